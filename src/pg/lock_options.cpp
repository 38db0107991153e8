// The options of the acquire family: arguments, the grant book, the modes
// and extra locks of holds with options, release of shared holds and permits.
#include "pg/lock_options.hpp"

#include "pg/events.hpp"

#include "pg/bridge.hpp"
#include "pg/lock_tags.hpp"
#include "pg/session.hpp"

namespace fencing::pg {

namespace {

core::GrantBook the_book;

// Argument positions: acquire / acquire_xact (resource, wait, lease,
// reentrant, lock_delay, permits, shared); try forms (resource, reentrant,
// lock_delay, permits, shared).
constexpr int kDelayArg = 4, kPermitsArg = 5, kSharedArg = 6;
constexpr int kTryDelayArg = 2, kTryPermitsArg = 3, kTrySharedArg = 4;

bool shared_in_book(std::uint64_t key) noexcept {
    if (the_book.empty()) return false;
    const core::GrantTraits* t = the_book.find(key);
    return t != nullptr && t->shared;
}

bool holds_permit_key(std::uint64_t key) {
    const LOCKTAG tag = resource_tag(key);
    return held_by_me(tag, kSessionMode) || held_by_me(tag, kXactMode);
}

}  // namespace

core::GrantBook& grant_book() noexcept { return the_book; }

core::LockOptions lock_options_arg(FunctionCallInfo fcinfo, bool try_only) {
    core::LockOptions o;
    const int delay_arg = try_only ? kTryDelayArg : kDelayArg;
    const int permits_arg = try_only ? kTryPermitsArg : kPermitsArg;
    const int shared_arg = try_only ? kTrySharedArg : kSharedArg;
    if (PG_NARGS() <= delay_arg) return o;  // a database still at 1.0
    const std::int64_t delay = interval_ms_arg(fcinfo, delay_arg, "lock_delay", true);
    o.delay_ms = delay < 0 && !PG_ARGISNULL(delay_arg) ? core::kMaxLockDelayMs + 1 : (delay < 0 ? 0 : delay);
    const bool permits_given = PG_NARGS() > permits_arg && !PG_ARGISNULL(permits_arg);
    if (permits_given) o.permits = PG_GETARG_INT32(permits_arg);
    if (PG_NARGS() > shared_arg) {
        if (PG_ARGISNULL(shared_arg))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("shared must not be null")));
        o.shared = PG_GETARG_BOOL(shared_arg);
    }
    switch (core::check_options(o, permits_given)) {
        case core::OptionsStatus::ok:
            break;
        case core::OptionsStatus::delay_too_long:
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("lock_delay is too long"),
                            errdetail("A lock-delay is at most %lld ms (one minute).",
                                      static_cast<long long>(core::kMaxLockDelayMs))));
            break;
        case core::OptionsStatus::permits_out_of_range:
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("permits must be between 1 and %d", core::kMaxPermits),
                            errdetail("The count given is %d.", o.permits)));
            break;
        case core::OptionsStatus::shared_with_permits:
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("a counted lock cannot be held shared"),
                            errdetail("Each permit is an exclusive grant with a token of its own."),
                            errhint("Pass either permits or shared => true.")));
            break;
    }
    return o;
}

HoldModes hold_modes(std::uint64_t key) noexcept {
    if (shared_in_book(key)) return HoldModes{kSharedMode, kSharedMode, kTokenSharedMode};
    return HoldModes{kSessionMode, kXactMode, kTokenHoldMode};
}

bool holds_any_mode(const LOCKTAG& rtag) noexcept {
    return held_by_me(rtag, kSessionMode) || held_by_me(rtag, kXactMode) ||
           (!the_book.empty() && held_by_me(rtag, kSharedMode));
}

bool held_at_session_scope(std::uint64_t key) noexcept {
    const LOCKTAG rtag = resource_tag(key);
    if (!shared_in_book(key)) return held_by_me(rtag, kSessionMode);
    const core::Hold* h = ledger().find(key);
    return h != nullptr && h->session > 0 && held_by_me(rtag, kSharedMode);
}

void refuse_upgrade_of_shared(const Resource& r, const LOCKTAG& rtag) {
    if (the_book.empty() || !held_by_me(rtag, kSharedMode)) return;
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing lock on resource \"%.*s\" is held shared by this session", r.len, r.data),
                    errdetail("A shared hold does not become exclusive, reentrant or not: two sessions doing so at "
                              "once would wait for each other."),
                    errhint("Release the shared hold first, then acquire the resource exclusively.")));
}

void note_plain_grant(std::uint64_t key, bool first, std::int64_t delay_ms) {
    if (delay_ms <= 0 && the_book.empty()) return;
    if (delay_ms <= 0 && first) {
        the_book.forget(key);  // stale traits of an earlier hold
        return;
    }
    core::GrantTraits t;
    t.base = key;
    t.delay_ms = delay_ms;
    try {
        the_book.note(key, t, first);
    } catch (...) {
        // std::bad_alloc only; reported below, outside the catch scope.
        delay_ms = -1;
    }
    if (delay_ms < 0)
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory recording a fencing lock-delay")));
    if (t.delay_ms > 0) arm_lock_delay();
}

void release_hold_extras(std::uint64_t key, bool session) {
    if (the_book.empty()) return;
    const core::GrantTraits* t = the_book.find(key);
    if (t == nullptr || t->permit == 0) return;
    const LOCKTAG held = option_tag(kPermitsHeldTagKind, core::key_high(t->base), core::key_low(t->base));
    const LOCKTAG count = option_tag(kPermitCountTagKind, core::key_high(t->base),
                                     core::count_mark_low(core::key_low(t->base), t->permits));
    // "Held" before "count N" (pg/permits.cpp: a holder of the first holds the
    // second).
    if (held_by_me(held, ShareLock)) LockRelease(&held, ShareLock, session);
    if (held_by_me(count, ShareLock)) LockRelease(&count, ShareLock, session);
}

std::uint64_t held_permit_key(std::uint64_t base) {
    for (;;) {
        const std::uint64_t k = the_book.permit_key_of(base);
        if (k == 0) return 0;
        if (holds_permit_key(k)) return k;
        the_book.forget(k);  // a permit hold that ended (the lock manager is the truth)
    }
}

std::uint64_t held_key_of(const Resource& r) {
    if (the_book.empty() || holds_any_mode(resource_tag(r.key))) return r.key;
    const std::uint64_t k = held_permit_key(permit_base_key(r));
    return k != 0 ? k : r.key;
}

int release_with_options(const Resource& r) {
    if (the_book.empty()) return -1;
    const LOCKTAG rtag = resource_tag(r.key);
    if (held_by_me(rtag, kSessionMode)) return -1;  // a plain session hold: released first
    std::uint64_t key = r.key;
    if (!(shared_in_book(r.key) && held_by_me(rtag, kSharedMode))) {
        key = held_key_of(r);  // a permit of the resource
        if (key == r.key) return -1;
    }
    const core::Hold* h = ledger().find(key);
    if (h == nullptr || h->session == 0) return 0;  // held at transaction scope only
    const HoldModes m = hold_modes(key);
    const LOCKTAG ktag = resource_tag(key);
    if (!held_by_me(ktag, m.session)) {
        // The lock manager dropped it (pg_advisory_unlock_all(), DISCARD ALL).
        ledger().forget(key);
        the_book.forget(key);
        return 0;
    }
    const LOCKTAG ttag = token_tag(h->token);
    if (held_by_me(ttag, m.token)) LockRelease(&ttag, m.token, true);
    LockRelease(&ktag, m.session, true);
    release_hold_extras(key, true);
    (void)ledger().release_session(key);
    if (!holds_any_mode(ktag)) {
        const std::int64_t token = h->token;
        ledger().forget(key);
        the_book.forget(key);
        events::grant_ended(key, token);
    }
    return 1;
}

void record_hold(const Resource& r, std::uint64_t key, std::int64_t token, bool session, std::int64_t lease_ms,
                 const core::GrantTraits& traits, bool first, bool announce) {
    const SubTransactionId sub = GetCurrentSubTransactionId();
    const TimestampTz statement = GetCurrentStatementStartTimestamp();
    // A plain exclusive hold keeps traits only for a lock-delay (the book
    // stays empty on the common path).
    const bool plain = !traits.shared && traits.permit == 0;
    bool recorded = false;
    try {
        // A ledger entry for a resource the lock manager says we did not
        // hold is stale (pg_advisory_unlock_all(), DISCARD ALL): dropped.
        if (first) ledger().forget(key);
        ledger().add(key, token, session, sub, lease_ms, statement);
        if (!plain) the_book.note(key, traits, first);
        recorded = true;
    } catch (...) {
        // Only std::bad_alloc can get here; handled below, outside the catch.
    }
    if (!recorded) {
        if (session) {
            const HoldModes m = hold_modes(key);
            const LOCKTAG ttag = token_tag(token);
            const LOCKTAG ktag = resource_tag(key);
            if (held_by_me(ttag, m.token)) LockRelease(&ttag, m.token, true);
            release_hold_extras(key, true);
            if (held_by_me(ktag, traits.shared ? kSharedMode : kSessionMode))
                LockRelease(&ktag, traits.shared ? kSharedMode : kSessionMode, true);
        }
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                        errmsg("out of memory recording the fencing lock on resource \"%.*s\"", r.len, r.data)));
    }
    if (plain)
        note_plain_grant(key, first, traits.delay_ms);
    else if (traits.delay_ms > 0)
        arm_lock_delay();
    apply_leases();
    // A permit or a shared hold is announced under its resource's name (a
    // permit with its own token); a nested hold is no new grant.
    if (announce) events::grant_started(key, r.data, r.len, token, session);
}

}  // namespace fencing::pg
