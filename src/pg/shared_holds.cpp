// Shared holds: acquire(..., shared => true) and its forms.
//
// A shared hold takes the resource's lock tag in ShareLock (either scope): it
// conflicts with the exclusive modes and not with itself, so many sessions
// hold a resource shared at once and none exclusively meanwhile. It issues no
// token: it returns the resource's latest one (the first shared hold of a
// resource never acquired issues its first token, as an exclusive grant
// would), and holds that token's tag in RowExclusiveLock, so that validate()
// of the token succeeds while a hold granted with it lasts.
//
// Writers are not starved: PostgreSQL's lock manager queues a request that
// conflicts with an earlier waiter's request behind it (LockAcquire checks
// the lock's wait mask), so a shared request that arrives while an exclusive
// one waits waits behind it, and so does a try form (it is refused).
//
// A transaction-scoped shared hold also holds a mark (lock_tags.hpp, taken
// before it waits) that tells fencing.locks its scope: both scopes hold the
// same lock mode.
#include "pg/resource_rows.hpp"
#include "pg/bridge.hpp"
#include "pg/fence_state.hpp"
#include "pg/lock_options.hpp"
#include "pg/lock_tags.hpp"
#include "pg/session.hpp"

namespace fencing::pg {

namespace {

[[noreturn]] void report_held_again(const Resource& r, bool held_shared, bool session) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing lock on resource \"%.*s\" is already held by this session", r.len, r.data),
                    errdetail("This session holds it %s; a plain %s does not nest, so that a connection handed on "
                              "by a pool with the lock still held never gives a second worker its hold.",
                              held_shared ? "shared" : "exclusively", session ? "acquire" : "acquire_xact"),
                    errhint("Release the lock first, or pass reentrant => true to nest the hold.")));
    pg_unreachable();
}

// What is left of a wait of wait_ms begun at since (-1: unbounded; at least 1).
std::int64_t left_of(std::int64_t wait_ms, TimestampTz since) {
    if (wait_ms <= 0) return wait_ms;
    const std::int64_t left = wait_ms - elapsed_ms(since);
    return left < 1 ? 1 : left;
}

// The first token of a resource never acquired (or forgotten), for a shared
// hold: taken as an exclusive grant would be, under the resource's exclusive
// transaction lock, which is released at once. False (try forms) when the
// resource is busy.
bool issue_first_token(const AcquireCall& c, TimestampTz asked_at) {
    const Resource& r = c.r;
    const LOCKTAG rtag = resource_tag(r.key);
    if (c.try_only) {
        if (LockAcquire(&rtag, kXactMode, false, true) == LOCKACQUIRE_NOT_AVAIL) return false;
    } else {
        lock_or_report(r, rtag, kXactMode, false, left_of(c.wait_ms, asked_at));
    }
    bool ok = true;
    if (!read_state(r.key, r.data, r.len).found) {
        if (drain_guard_of(r, c.try_only ? 0 : left_of(c.wait_ms, asked_at)))
            (void)issue_token(r.key, r.data, r.len, 0);
        else if (c.try_only)
            ok = false;
        else
            report_lock_not_acquired(r, 0);
    }
    LockRelease(&rtag, kXactMode, false);
    return ok;
}

}  // namespace

bool acquire_shared(const AcquireCall& c, std::int64_t* out) {
    const Resource& r = c.r;
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot acquire a fencing lock during recovery"),
                 errhint("Acquire fencing locks on the primary: a lock on a standby excludes nobody there.")));
    const LOCKTAG rtag = resource_tag(r.key);
    const bool held_exclusive = held_by_me(rtag, kSessionMode) || held_by_me(rtag, kXactMode);
    const bool held_shared = held_by_me(rtag, kSharedMode);
    const TimestampTz asked_at = GetCurrentTimestamp();

    if (held_exclusive || held_shared) {
        if (!c.reentrant && !regrant_in_statement(r, rtag, c.session)) report_held_again(r, held_shared, c.session);
        // Nest into the hold the session has, in its mode: granted at once
        // (a backend's own locks never conflict), with its token.
        const core::Hold* own = ledger().find(r.key);
        const std::int64_t token = own != nullptr ? own->token : read_state(r.key, r.data, r.len).token;
        const LOCKMODE mode = held_exclusive ? (c.session ? kSessionMode : kXactMode) : kSharedMode;
        const LOCKMODE tmode = held_exclusive ? kTokenHoldMode : kTokenSharedMode;
        const LOCKTAG ttag = token_tag(token);
        (void)LockAcquire(&rtag, mode, c.session, false);
        (void)LockAcquire(&ttag, tmode, c.session, false);
        core::GrantTraits t;
        t.shared = !held_exclusive;
        t.base = r.key;
        t.delay_ms = c.opts.delay_ms;
        record_hold(r, r.key, token, c.session, c.lease_ms, t, false, false);
        *out = token;
        return true;
    }

    // The scope mark of a transaction-scoped hold, before it waits (a try
    // that is refused gives it back).
    const LOCKTAG mark = option_tag(kSharedXactTagKind, core::key_high(r.key), core::key_low(r.key));
    if (!c.session) (void)LockAcquire(&mark, AccessShareLock, false, false);
    const bool got = (read_state(r.key, r.data, r.len).found || issue_first_token(c, asked_at)) &&
                     (!c.try_only || LockAcquire(&rtag, kSharedMode, c.session, true) != LOCKACQUIRE_NOT_AVAIL);
    if (!got) {
        if (!c.session) LockRelease(&mark, AccessShareLock, false);
        return false;
    }
    if (!c.try_only) {
        lock_or_report(r, rtag, kSharedMode, c.session, left_of(c.wait_ms, asked_at));
    }
    std::int64_t token = 0;
    volatile bool delayed = false;
    PG_TRY();
    {
        // A lost exclusive grant's lock-delay keeps shared holds out too.
        if (!lock_delay_wait_out(r.key, true, c.try_only, c.try_only ? 0 : left_of(c.wait_ms, asked_at))) {
            if (!c.try_only) report_lock_not_acquired(r, c.wait_ms);
            delayed = true;
        } else {
            // Under the shared lock no token of the resource is issued: its
            // latest token stays the one read here while the hold lasts.
            const StateRow row = read_state(r.key, r.data, r.len);
            // (1.2) Not the token of a row version this transaction wrote
            // by SQL, which its rollback takes back.
            if (row.written_here) report_changed_here(r.data, r.len);
            if (!row.found)
                ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                                errmsg("fencing resource \"%.*s\" has no token", r.len, r.data),
                                errdetail("Its fence state was removed (fencing.forget) while the shared hold was on "
                                          "its way."),
                                errhint("Acquire it again.")));
            token = row.token;
            // A validate() probe may hold the tag in ShareLock for an instant.
            const LOCKTAG ttag = token_tag(token);
            (void)LockAcquire(&ttag, kTokenSharedMode, c.session, false);
        }
    }
    PG_CATCH();
    {
        if (c.session) LockRelease(&rtag, kSharedMode, true);
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (delayed) {  // only try_only gets here
        LockRelease(&rtag, kSharedMode, c.session);
        if (!c.session) LockRelease(&mark, AccessShareLock, false);
        return false;
    }
    core::GrantTraits t;
    t.shared = true;
    t.base = r.key;
    t.delay_ms = c.opts.delay_ms;
    record_hold(r, r.key, token, c.session, c.lease_ms, t, true, true);
    *out = token;
    return true;
}

}  // namespace fencing::pg
