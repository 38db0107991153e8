// Counted locks: acquire(..., permits => N) and its forms.
//
// Permit p (1 .. N) of resource R is the resource named R, U+001F, p
// (core::permit_name): its own lock key, lock, guard and fence state row, so
// each permit is a fenced grant with its own tokens. The resource's queue and
// marks use the key of its first permit (the base key).
//
// Waiting for one of N locks is not something PostgreSQL's lock manager does:
//  * every acquisition first takes the resource's queue (a lock of its own,
//    lock_tags.hpp), so waiters line up in the lock manager's arrival order
//    and a try form never gets ahead of a waiter;
//  * the head of the queue tries every permit; when none is free it waits in
//    the lock manager for the permit granted longest ago (it is granted the
//    moment that permit is released), for a round of 10 ms doubling up to
//    160 ms, then tries every permit again, until its wait runs out;
//  * with a permit, it gives the queue to the next waiter.
// The wait for a permit is invisible to the deadlock detector between rounds;
// wait, lock_timeout and statement_timeout bound it as any wait.
//
// Every holder of a permit also holds, shared, two marks of the resource:
// "some permit is held" and "a permit is held with count N". The head checks
// them before it takes a permit (count_disagrees): a count other than the
// holders' is refused with 55T01.
#include "pg/bridge.hpp"
#include "pg/fence_state.hpp"
#include "pg/key_secret.hpp"
#include "pg/lock_options.hpp"
#include "pg/supervisor.hpp"
#include "pg/lock_tags.hpp"
#include "pg/session.hpp"

namespace fencing::pg {

namespace {

// The names and keys of a counted resource's permits (a buffer of the
// statement's memory context, written for each permit in turn).
struct PermitNames {
    const char* base;
    int base_len;
    char* buf;
};

PermitNames permit_names(const Resource& r) {
    return PermitNames{r.data, r.len, static_cast<char*>(palloc(r.len + core::kPermitSuffixBytes))};
}

// Permit p's name in pn.buf; returns its length.
int name_of(const PermitNames& pn, std::int32_t p) {
    return static_cast<int>(core::permit_name(pn.base, static_cast<std::size_t>(pn.base_len), p, pn.buf));
}

std::uint64_t key_of(const PermitNames& pn, std::int32_t p) { return resource_key_of(pn.buf, name_of(pn, p)); }

LOCKTAG queue_tag(std::uint64_t base) {
    return option_tag(kPermitQueueTagKind, core::key_high(base), core::key_low(base));
}
LOCKTAG held_mark(std::uint64_t base) {
    return option_tag(kPermitsHeldTagKind, core::key_high(base), core::key_low(base));
}
LOCKTAG count_mark(std::uint64_t base, std::int32_t permits) {
    return option_tag(kPermitCountTagKind, core::key_high(base), core::count_mark_low(core::key_low(base), permits));
}

[[noreturn]] void report_count_mismatch(const Resource& r, std::int32_t asked, std::int32_t held) {
    if (held > 0)
        ereport(ERROR,
                (errcode(ERRCODE_FENCING_PERMIT_COUNT),
                 errmsg("fencing resource \"%.*s\" is counted with %d permits, not %d", r.len, r.data, held, asked),
                 errdetail("This session holds a permit of it, taken with permits => %d.", held),
                 errhint("Every caller must pass the same permits for a resource.")));
    ereport(ERROR,
            (errcode(ERRCODE_FENCING_PERMIT_COUNT),
             errmsg("fencing resource \"%.*s\" is held with another count of permits than %d", r.len, r.data, asked),
             errdetail("Permits of the resource are held by sessions that passed a different permits."),
             errhint("Every caller must pass the same permits for a resource; another count may be used once "
                     "no permit of it is held.")));
    pg_unreachable();
}

[[noreturn]] void report_permit_held(const Resource& r, const core::GrantTraits& t, bool session) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing lock on resource \"%.*s\" is already held by this session", r.len, r.data),
                    errdetail("This session holds permit %d of %d; a plain %s does not nest, so that a connection "
                              "handed on by a pool with the permit still held never gives a second worker its "
                              "token.",
                              t.permit, t.permits, session ? "acquire" : "acquire_xact"),
                    errhint("Release the permit first, or pass reentrant => true to nest the hold and get its "
                            "token back.")));
    pg_unreachable();
}

// Permit P of R, whose key is KEY, is held by this session under its own
// name, by a plain acquisition of R, chr(31), P. A counted acquisition of R
// does not nest on it, even with reentrant => true: that hold took none of
// the marks by which the holders of R's permits agree on their count.
[[noreturn]] void report_permit_held_by_name(const Resource& r, std::int32_t p, std::uint64_t key) {
    const core::Hold* h = ledger().find(key);
    const bool in_session = held_at_session_scope(key);
    const bool in_xact = held_by_me(resource_tag(key), kXactMode) || (h != nullptr && h->xact_total() > 0);
    const char* scope = in_session && in_xact ? "session and at transaction" : (in_session ? "session" : "transaction");
    const char* hint = !in_xact      ? "Release the hold of the permit's name first (fencing.release), then acquire "
                                       "the resource with permits."
                       : !in_session ? "End the transaction that holds the permit's name first, then acquire the "
                                       "resource with permits."
                                     : "Release the session's hold of the permit's name (fencing.release) and end the "
                                       "transaction that holds it too, then acquire the resource with permits.";
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing lock on resource \"%.*s\" is already held by this session", r.len, r.data),
                    errdetail("This session holds permit %d of it at %s scope, under the permit's own name (the "
                              "resource's name, chr(31), %d); a counted acquisition does not nest on that hold, "
                              "reentrant or not, as it was taken without the count of permits.",
                              p, scope, p),
                    errhint("%s", hint)));
    pg_unreachable();
}

// Whether another session holds tag in a mode that conflicts with `probe`
// (which is taken without waiting and given back at once).
bool held_by_others(const LOCKTAG& tag, LOCKMODE probe) {
    if (compat::try_lock_quietly(&tag, probe, false) == LOCKACQUIRE_NOT_AVAIL) return true;
    LockRelease(&tag, probe, false);
    return false;
}

// The first free permit, taken (without waiting); 0 when every one is held.
// Whether permit p, whose lock this session was just granted, is free: not
// kept by a lost grant's lock-delay (else its lock is given back).
bool permit_free(const PermitNames& pn, std::int32_t p, LOCKMODE mode, bool session) {
    if (lock_delay_wait_out(key_of(pn, p), false, true, 0)) return true;
    const LOCKTAG tag = resource_tag(key_of(pn, p));
    LockRelease(&tag, mode, session);
    return false;
}

std::int32_t take_free_permit(const PermitNames& pn, std::int32_t n, LOCKMODE mode, bool session) {
    for (std::int32_t p = 1; p <= n; ++p) {
        const LOCKTAG tag = resource_tag(key_of(pn, p));
        if (LockAcquire(&tag, mode, session, true) != LOCKACQUIRE_NOT_AVAIL && permit_free(pn, p, mode, session))
            return p;
    }
    return 0;
}

// The permit to wait for in this round: the one granted longest ago.
std::int32_t choose_permit(const PermitNames& pn, std::int32_t n, std::int32_t round) {
    auto* tokens = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * n));
    for (std::int32_t p = 1; p <= n; ++p) {
        const std::uint64_t key = key_of(pn, p);
        const StateRow row = read_state(key, pn.buf, name_of(pn, p));
        tokens[p - 1] = row.found ? row.token : 0;
    }
    const std::int32_t choice = core::permit_to_wait_for(tokens, n, round);
    pfree(tokens);
    return choice;
}

// The marks: "count N" is taken before "held" and released after it, so that
// whoever holds "held" holds "count N" of its own count too.
void take_marks(std::uint64_t base, std::int32_t n, bool session) {
    const LOCKTAG held = held_mark(base);
    const LOCKTAG count = count_mark(base, n);
    (void)LockAcquire(&count, ShareLock, session, false);
    (void)LockAcquire(&held, ShareLock, session, false);
}

void give_back(std::uint64_t base, std::int32_t n, std::uint64_t permit_key, bool session, LOCKMODE mode) {
    const LOCKTAG ptag = resource_tag(permit_key);
    const LOCKTAG held = held_mark(base);
    const LOCKTAG count = count_mark(base, n);
    if (held_by_me(held, ShareLock)) LockRelease(&held, ShareLock, session);
    if (held_by_me(count, ShareLock)) LockRelease(&count, ShareLock, session);
    if (held_by_me(ptag, mode)) LockRelease(&ptag, mode, session);
}

// Whether the holders of the resource's permits use another count than n.
// Alone at the head of the queue nobody takes a first permit meanwhile, but
// holders may be giving theirs back: a transaction's end releases both marks
// in no particular order. So "count n" is asked first (held: they agree),
// and an apparent disagreement must last 100 ms, through twenty looks, to
// count: holders on their way out are gone by then.
bool count_disagrees(std::uint64_t base, std::int32_t n) {
    // A permit kept by a lost grant's lock-delay counts with its count.
    if (const std::int32_t kept = supervisor::delayed_permit_count(base); kept != 0 && kept != n) return true;
    for (int look = 0;; ++look) {
        const bool same = held_by_others(count_mark(base, n), ExclusiveLock);
        const bool any = same || held_by_others(held_mark(base), ExclusiveLock);
        if (core::check_count(any, same) != core::CountCheck::disagrees) return false;
        if (look == 20) return true;
        pg_usleep(5000);
        CHECK_FOR_INTERRUPTS();
    }
}

}  // namespace

bool acquire_permit(const AcquireCall& c, std::int64_t* out) {
    const Resource& r = c.r;
    const PermitNames pn = permit_names(r);
    const std::uint64_t base = key_of(pn, 1);
    const std::int32_t n = c.opts.permits;
    const LOCKMODE mode = c.session ? kSessionMode : kXactMode;

    // A permit of the resource this session holds already: nest on it.
    const std::uint64_t own = held_permit_key(base);
    if (own != 0) {
        const core::GrantTraits t = *grant_book().find(own);
        if (t.permits != n) report_count_mismatch(r, n, t.permits);
        Resource pr = r;
        pr.key = own;
        const LOCKTAG ptag = resource_tag(own);
        if (!c.reentrant && !regrant_in_statement(pr, ptag, c.session)) report_permit_held(r, t, c.session);
        const core::Hold* h = ledger().find(own);
        const std::int64_t token = h != nullptr ? h->token : read_state(own, pn.buf, name_of(pn, t.permit)).token;
        const LOCKTAG ttag = token_tag(token);
        (void)LockAcquire(&ptag, mode, c.session, false);  // our own: at once
        (void)LockAcquire(&ttag, kTokenHoldMode, c.session, false);
        take_marks(base, n, c.session);
        core::GrantTraits nested = t;
        nested.delay_ms = c.opts.delay_ms;
        record_hold(r, own, token, c.session, c.lease_ms, nested, false, false);
        *out = token;
        return true;
    }

    // A permit this session holds under the permit's own name (a plain
    // acquisition of R, chr(31), p): it holds the resource already, and no
    // counted hold nests on that one, reentrant or not.
    for (std::int32_t p = 1; p <= n; ++p)
        if (const std::uint64_t k = key_of(pn, p); holds_any_mode(resource_tag(k))) report_permit_held_by_name(r, p, k);

    // The bound of the whole wait: wait, and lock_timeout when shorter.
    const TimestampTz asked_at = GetCurrentTimestamp();
    std::int64_t budget = c.try_only ? 0 : c.wait_ms;
    if (!c.try_only && LockTimeout > 0 && (budget < 0 || LockTimeout < budget)) budget = LockTimeout;
    auto left = [&]() -> std::int64_t {
        if (budget < 0) return -1;
        const std::int64_t l = budget - elapsed_ms(asked_at);
        return l < 0 ? 0 : l;
    };

    // The queue: held (at transaction level) while this session decides and
    // waits; given on once it has its permit. Waiters wait here in order.
    const LOCKTAG qtag = queue_tag(base);
    if (c.try_only) {
        if (LockAcquire(&qtag, mode, false, true) == LOCKACQUIRE_NOT_AVAIL) return false;
    } else {
        lock_or_report(r, qtag, mode, false, c.wait_ms);
    }

    // Read in PG_CATCH after a longjmp: volatile.
    volatile std::int32_t got = 0;
    volatile std::uint64_t got_key = 0;
    volatile std::int64_t token = 0;
    volatile bool busy = false;
    PG_TRY();
    {
        // Alone at the head: the holders' count must be ours.
        if (count_disagrees(base, n)) report_count_mismatch(r, n, 0);

        got = take_free_permit(pn, n, mode, c.session);
        for (std::int32_t round = 0; got == 0; ++round) {
            if (c.try_only) {
                busy = true;
                break;
            }
            const std::int64_t l = left();
            if (l == 0) report_lock_not_acquired(r, budget);
            std::int64_t slice = core::permit_round_ms(round);
            if (l > 0 && l < slice) slice = l;
            const std::int32_t p = choose_permit(pn, n, round);
            if (supervisor::delay_left_ms(key_of(pn, p), false) > 0)
                (void)supervisor::wait_out_delay(key_of(pn, p), false, slice);  // kept by a lost grant's delay
            else if (wait_for_lock(resource_tag(key_of(pn, p)), mode, c.session, slice) &&
                     permit_free(pn, p, mode, c.session))
                got = p;
            else
                got = take_free_permit(pn, n, mode, c.session);
            CHECK_FOR_INTERRUPTS();
        }
        if (got != 0) {
            got_key = key_of(pn, got);
            take_marks(base, n, c.session);
            Resource pr = r;
            pr.key = got_key;
            refuse_if_validated_here(pr);
            // A new token only once every validate()-guarded transaction of
            // the permit's previous grants has ended.
            // (40001 when the key secret was replaced meanwhile.)
            Resource named = pr;
            named.data = pn.buf;
            named.len = name_of(pn, got);
            std::int64_t issued = 0;
            if (!issue_guarded(named, static_cast<std::int32_t>(c.lease_ms),
                               c.try_only ? 0 : (budget < 0 ? -1 : (left() > 0 ? left() : 1)), &issued)) {
                if (!c.try_only) report_lock_not_acquired(r, 0);
                busy = true;
                give_back(base, n, got_key, c.session, mode);
                got = 0;
            } else {
                token = issued;
                const LOCKTAG ttag = token_tag(token);
                (void)LockAcquire(&ttag, kTokenHoldMode, c.session, false);
            }
        }
    }
    PG_CATCH();
    {
        // Session locks would outlive the failed statement: give them back.
        if (c.session && got != 0) {
            if (token != 0) {
                const LOCKTAG ttag = token_tag(token);
                if (held_by_me(ttag, kTokenHoldMode)) LockRelease(&ttag, kTokenHoldMode, true);
            }
            give_back(base, n, got_key != 0 ? got_key : key_of(pn, got), true, mode);
        }
        PG_RE_THROW();
    }
    PG_END_TRY();
    LockRelease(&qtag, mode, false);
    if (busy) return false;

    core::GrantTraits t;
    t.permit = got;
    t.permits = n;
    t.base = base;
    t.delay_ms = c.opts.delay_ms;
    record_hold(r, got_key, token, c.session, c.lease_ms, t, true, true);
    *out = token;
    return true;
}

bool validate_permit(const Resource& r, std::int64_t token) {
    const PermitNames pn = permit_names(r);
    const std::uint64_t base = key_of(pn, 1);
    // Cheap refusals first: no permit of the resource is held by anyone, or
    // no hold of that token exists at all.
    const LOCKTAG held = held_mark(base);
    if (!held_by_me(held, ShareLock) && !held_by_others(held, ExclusiveLock)) return false;
    const LOCKTAG ttag = token_tag(token);
    if (!held_by_me(ttag, kTokenHoldMode) && !held_by_others(ttag, kTokenProbeMode)) return false;
    std::uint64_t key = 0;
    std::int32_t permit = 0;
    for (std::int32_t p = 1; p <= core::kMaxPermits && key == 0; ++p) {
        const std::uint64_t k = key_of(pn, p);
        const StateRow row = read_state(k, pn.buf, name_of(pn, p));
        if (row.found && row.token == token) {
            key = k;
            permit = p;
        }
    }
    if (key == 0) return false;
    // As validate() does for a resource: the permit's guard first, then the
    // check again (an acquisition that has not yet issued the permit's next
    // token now waits for this transaction to end).
    const LOCKTAG gtag = guard_tag(key);
    const bool guard_new = !held_by_me(gtag, kGuardHoldMode);
    if (guard_new) (void)LockAcquire(&gtag, kGuardHoldMode, false, false);
    const StateRow row = read_state(key, pn.buf, name_of(pn, permit));
    if (!row.found || row.token != token) return false;
    if (!held_by_me(ttag, kTokenHoldMode) && !held_by_others(ttag, kTokenProbeMode)) return false;
    if (guard_new) record_guard(key, token, row.lease_ms);
    return true;
}

std::uint64_t permit_base_key(const Resource& r) { return key_of(permit_names(r), 1); }

bool acquired_with_permits(const Resource& r) {
    const PermitNames pn = permit_names(r);
    return read_state(key_of(pn, 1), pn.buf, name_of(pn, 1)).found;
}

}  // namespace fencing::pg
