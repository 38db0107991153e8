// Acquisition, release and validation of fencing locks.
//
// A fencing lock is a lock-manager lock on a tag of our own (pg/lock_tags.hpp)
// keyed by the resource's 64-bit key, plus a lock on the token it was granted
// with (so validate() can tell, race-free, that the grant with that token is
// still held by someone). The lock manager frees both when the session or
// transaction ends, however it ends.
#include "pg/args.hpp"
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/events.hpp"
#include "pg/fence_state.hpp"
#include "pg/key_secret.hpp"
#include "pg/lock_options.hpp"
#include "pg/retirement.hpp"
#include "pg/lock_tags.hpp"
#include "pg/session.hpp"
#include "pg/supervisor.hpp"

#include <type_traits>

using namespace fencing;
using namespace fencing::pg;

// Alive across calls that may ereport (a longjmp skips destructors).
static_assert(std::is_trivially_destructible_v<Resource> && std::is_trivially_destructible_v<StateRow> &&
              std::is_trivially_destructible_v<core::LockOptions> && std::is_trivially_destructible_v<AcquireCall> &&
              std::is_trivially_destructible_v<LOCKTAG>);

namespace {

[[noreturn]] void report_not_acquired(const Resource& r, std::int64_t wait_ms) {
    ereport(ERROR, (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
                    errmsg("could not acquire fencing lock on resource \"%.*s\"", r.len, r.data),
                    wait_ms > 0 ? errdetail("The lock was not granted within %lld ms.", static_cast<long long>(wait_ms))
                                : errdetail("The lock is held by another session.")));
    pg_unreachable();
}

// A plain acquisition of a resource this session already holds: behind a
// connection pool that is usually a lock the previous user of the connection
// left behind, and nesting would hand two workers one token.
[[noreturn]] void report_already_held(const Resource& r, bool session) {
    const char* scope = held_by_me(resource_tag(r.key), kSessionMode) ? "session" : "transaction";
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing lock on resource \"%.*s\" is already held by this session", r.len, r.data),
                    errdetail("This session holds it at %s scope; a plain %s does not nest, so that a connection "
                              "handed on by a pool with the lock still held never gives a second worker the same "
                              "token.",
                              scope, session ? "acquire" : "acquire_xact"),
                    errhint("Release the lock first, or pass reentrant => true to nest the hold and get its token "
                            "back.")));
    pg_unreachable();
}

// A new token of a resource whose guard this transaction holds (it validated
// an older token): the guard makes every acquisition wait for the guarded
// transactions to end, but a lock never waits for its own holder, so the new
// token would exist while the write it guarded is uncommitted, and a write
// made with the new token (on another connection) could commit first.
[[noreturn]] void report_guarded_here(const Resource& r) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                    errmsg("fencing resource \"%.*s\" cannot be acquired in a transaction that validated one of its "
                           "tokens",
                           r.len, r.data),
                    errdetail("A new token of a resource is issued only after every transaction in which "
                              "fencing.validate() accepted an older token has ended; this transaction is one of "
                              "them."),
                    errhint("Commit or roll back the transaction first, then acquire the resource.")));
    pg_unreachable();
}

// A transaction-scoped re-acquisition within the statement that took the
// transaction hold: PostgreSQL evaluates an UPDATE's SET list again when it
// re-checks a row another transaction updated meanwhile (READ COMMITTED), so
// `UPDATE ... SET fence_token = fencing.acquire_xact(r)` calls it twice for
// one write. No pool can hand the connection over within one statement: the
// hold nests, as reentrant => true would.
bool same_statement_regrant(const Resource& r, const LOCKTAG& rtag, bool session) {
    if (session || held_by_me(rtag, kSessionMode)) return false;
    const core::Hold* h = ledger().find(r.key);
    return h != nullptr && h->session == 0 && h->statement == GetCurrentStatementStartTimestamp();
}

bool bool_arg(FunctionCallInfo fcinfo, int argno, const char* what) {
    if (PG_NARGS() <= argno) return false;
    if (PG_ARGISNULL(argno))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
    return PG_GETARG_BOOL(argno);
}

// The wait for a lock failed (timeout, cancel, deadlock...). If the holder
// released at that very moment, the lock manager may already have granted us
// the lock: LockErrorCleanup() would then record the grant, and a session
// lock would outlive the error, held by nobody who knows it. Give it back.
void abandon_wait(const LOCKTAG& tag, LOCKMODE mode, bool session, bool held_before) {
    LockErrorCleanup();
    if (!held_before && held_by_me(tag, mode)) LockRelease(&tag, mode, session);
}

// Waits for the resource lock; at most wait_ms when wait_ms >= 0.
void lock_resource(const Resource& r, const LOCKTAG& tag, LOCKMODE mode, bool session, std::int64_t wait_ms) {
    if (wait_ms == 0) {
        if (LockAcquire(&tag, mode, session, true) == LOCKACQUIRE_NOT_AVAIL) report_not_acquired(r, 0);
        return;
    }
    if (!wait_for_lock(tag, mode, session, wait_ms)) report_not_acquired(r, wait_ms);
}

// The token whose lock this backend gave up last in release_one(), or 0. Only
// the backend a token was issued to ever takes its token lock in
// kTokenHoldMode (a nested hold takes its own token again), so once that
// backend no longer holds it nobody ever will: a grant that follows it needs
// no probe of that lock.
std::int64_t released_token = 0;

// Whether a transaction other than this backend's holds the guard. The guard
// is only ever held at transaction scope, and the lock manager names the
// holders of a transaction lock by their open transactions: one whose
// transaction has ended (its locks are freed just after) is not counted, and
// its writes are committed or rolled back. One look at the lock's holders,
// cheaper than taking the lock and giving it back.
bool guard_held_by_others(const LOCKTAG& gtag) {
    int n = 0;
    VirtualTransactionId* holders = GetLockConflicts(&gtag, kGuardDrainMode, &n);
    pfree(holders);
    return n > 0;
}

// Waits until no transaction that validate()d a token of the resource is still
// open (see the guard tag in lock_tags.hpp): takes the resource's guard
// exclusively and releases it at once, when some transaction holds it. At
// most wait_ms when wait_ms >= 0; false when wait_ms is 0 and a guarded
// transaction is open.
bool drain_guard(const Resource& r, std::int64_t wait_ms) {
    const LOCKTAG gtag = guard_tag(r.key);
    if (!guard_held_by_others(gtag)) return true;
    if (wait_ms == 0) {
        if (LockAcquire(&gtag, kGuardDrainMode, false, true) == LOCKACQUIRE_NOT_AVAIL) return false;
    } else {
        lock_resource(r, gtag, kGuardDrainMode, false, wait_ms);
    }
    LockRelease(&gtag, kGuardDrainMode, false);
    return true;
}

// The next token, once no transaction that validate()d an earlier one is
// open. The guard is drained before the token is drawn; and once more after,
// when the previous grant's token lock is gone: its holder's resource lock
// and token lock are freed one after the other and in no set order (the lock
// manager ends a transaction's or an exiting session's locks together), so
// this backend may hold the resource while the previous holder's token lock
// lingers for an instant, and a validate() of the previous token in that
// instant would succeed and take the guard after the first drain. Every such
// validate() holds the guard when the second drain comes (it took the guard
// before probing the token lock, which is now gone); every later one fails.
// When this backend released the previous grant itself (release_one() frees
// the token lock first), the token lock was gone before this acquisition
// began: every validate() after the first drain fails, and neither the probe
// nor the second drain is needed.
bool issue_guarded_token(const Resource& r, std::int32_t lease_ms, std::int64_t wait_ms, std::int64_t* token) {
    const TimestampTz asked_at = wait_ms > 0 ? GetCurrentTimestamp() : 0;
    if (!drain_guard(r, wait_ms)) return false;
    std::int64_t previous = 0;
    *token = issue_token(r.key, r.data, r.len, lease_ms, &previous);
    if (previous == 0 || previous == released_token) return true;
    std::int64_t left = wait_ms;
    if (wait_ms > 0) {
        long secs = 0;
        int usecs = 0;
        TimestampDifference(asked_at, GetCurrentTimestamp(), &secs, &usecs);
        left = wait_ms - (static_cast<std::int64_t>(secs) * 1000 + usecs / 1000);
        if (left < 1) left = 1;
    }
    const LOCKTAG ptag = token_tag(previous);
    if (!held_by_me(ptag, kTokenHoldMode)) {
        // Conditional first: the token lock of a grant that ended is free.
        if (LockAcquire(&ptag, kTokenProbeMode, false, true) == LOCKACQUIRE_NOT_AVAIL &&
            !wait_for_lock(ptag, kTokenProbeMode, false, wait_ms == 0 ? 1 : left))
            return false;
        LockRelease(&ptag, kTokenProbeMode, false);
    }
    return drain_guard(r, wait_ms == 0 ? 0 : left);
}

bool holds_resource(const LOCKTAG& tag) { return holds_any_mode(tag); }

// Whether the lock this session holds on the resource's key is in fact held
// for another resource whose name has the same key (a collision). The hold's
// token is the latest of the resource it was granted for: nobody can record
// a grant under the key while this session holds it.
bool held_for_other_resource(const Resource& r) {
    const core::Hold* h = ledger().find(r.key);
    if (h == nullptr) return false;
    const std::int64_t token = h->token;
    const StateRow row = read_state(r.key, r.data, r.len);
    return !row.found || row.token != token;
}

[[noreturn]] void report_held_for_other_resource(const Resource& r) {
    ereport(ERROR, (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
                    errmsg("could not acquire fencing lock on resource \"%.*s\"", r.len, r.data),
                    errdetail("This session holds another resource that shares the lock with it (both names map to "
                              "the same lock key), and cannot wait for itself."),
                    errhint("Release that resource first.")));
    pg_unreachable();
}

std::int64_t token_of_own_hold(const Resource& r) {
    if (const core::Hold* h = ledger().find(r.key)) return h->token;
    return read_state(r.key, r.data, r.len).token;
}

// The common body of acquire, try_acquire, acquire_xact and try_acquire_xact.
// Returns false (and takes nothing) when try_only and the resource is busy.
bool acquire(FunctionCallInfo fcinfo, bool session, bool try_only, std::int64_t* out) {
    Resource r = resource_arg(fcinfo, 0);
    std::int64_t wait_ms = try_only ? 0 : interval_ms_arg(fcinfo, 1, "wait", true);
    std::int64_t lease_ms = try_only ? -1 : interval_ms_arg(fcinfo, 2, "lease", false);
    if (lease_ms < 0) lease_ms = 0;
    const bool reentrant = bool_arg(fcinfo, try_only ? 1 : 3, "reentrant");
    // A standby answers every acquisition alike, before it takes any lock or
    // looks at any other precondition: read-only (an HA manager's replicas
    // run with an empty synchronous_standby_names, which would otherwise
    // report fencing.require_sync_standby unmet, and a busy resource would
    // make try_acquire return NULL).
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot acquire a fencing lock during recovery"),
                 errhint("Acquire fencing locks on the primary.")));
    // (1.2) Not in a replication connection (replication=database runs
    // SQL): the cut-over to a logical replica closes the old primary's
    // database with CONNECTION LIMIT 0, which walsenders pass.
    if (am_walsender)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("cannot acquire a fencing lock in a replication connection"),
                        errhint("Acquire fencing locks in an ordinary connection.")));
    // (1.2) Nor in a retired database (the old primary of a cut-over).
    retirement::refuse_if_retired();
    // (1.2) Nor under a secret this transaction set and may roll back, nor
    // on a counter, fence state or secret table it made.
    refuse_if_secret_new_here();
    refuse_if_fence_made_here();
    const core::LockOptions opts = lock_options_arg(fcinfo, try_only);
    // The supervisor enforces leases and keeps lock-delays.
    if (lease_ms > 0) supervisor::require("leases");
    if (opts.delay_ms > 0) supervisor::require("lock-delays");
    if (opts.permits > 0 || opts.shared) {
        const AcquireCall call{r, session, try_only, wait_ms, lease_ms, reentrant, opts};
        return opts.permits > 0 ? acquire_permit(call, out) : acquire_shared(call, out);
    }

    const LOCKTAG rtag = resource_tag(r.key);
    const LOCKMODE mode = session ? kSessionMode : kXactMode;
    const bool was_held = holds_resource(rtag);
    const TimestampTz asked_at = wait_ms > 0 ? GetCurrentTimestamp() : 0;
    if (was_held && held_for_other_resource(r)) {
        if (try_only) return false;
        report_held_for_other_resource(r);
    }
    if (was_held) refuse_upgrade_of_shared(r, rtag);
    if (was_held && !reentrant && !same_statement_regrant(r, rtag, session)) report_already_held(r, session);
    // Only a nested hold of this session's own grant, which keeps its token,
    // goes ahead in a transaction that validated a token of the resource.
    if (held_by_me(guard_tag(r.key), kGuardHoldMode) && !(was_held && ledger().find(r.key) != nullptr))
        report_guarded_here(r);

    if (try_only) {
        if (LockAcquire(&rtag, mode, session, true) == LOCKACQUIRE_NOT_AVAIL) return false;
    } else if (!events::counting_waits()) {
        lock_resource(r, rtag, mode, session, wait_ms);
    } else if (LockAcquire(&rtag, mode, session, true) == LOCKACQUIRE_NOT_AVAIL) {
        events::counted_wait([&] { lock_resource(r, rtag, mode, session, wait_ms); });
    }

    std::int64_t token = 0;
    bool fresh = false;
    bool guarded_busy = false;
    PG_TRY();
    {
        // A nested hold gets its grant's token back; a hold the ledger does
        // not know (it can only have lost it to an out-of-memory) gets a
        // fresh, greater one: never the fence state's latest token, which
        // may be someone else's.
        const core::Hold* own = was_held ? ledger().find(r.key) : nullptr;
        if (own != nullptr) {
            token = own->token;
        } else {
            // A new token only once every validate()-guarded transaction of
            // the previous grants has ended, within what is left of the wait.
            std::int64_t left = wait_ms;
            if (wait_ms > 0) {
                long secs = 0;
                int usecs = 0;
                TimestampDifference(asked_at, GetCurrentTimestamp(), &secs, &usecs);
                left = wait_ms - (static_cast<std::int64_t>(secs) * 1000 + usecs / 1000);
                if (left < 1) left = 1;
            }
            // A lost grant's lock-delay keeps the resource: wait it out,
            // holding the lock (the waiters behind stay queued in order).
            if (!lock_delay_wait_out(r.key, false, try_only, wait_ms == 0 ? 0 : left)) {
                if (try_only) {
                    guarded_busy = true;
                } else {
                    report_not_acquired(r, wait_ms);
                }
            } else if (issue_guarded_token(r, static_cast<std::int32_t>(lease_ms), left, &token)) {
                fresh = true;
            } else if (try_only) {
                guarded_busy = true;
            } else {
                report_not_acquired(r, 0);  // wait => 0: the lock is not free yet
            }
        }
        if (guarded_busy) {
            LockRelease(&rtag, mode, session);
        } else {
            // Tokens are unique, so nobody else holds this tag; a validate()
            // probe may hold it in ShareLock for an instant: wait that out.
            const LOCKTAG ttag = token_tag(token);
            (void)LockAcquire(&ttag, kTokenHoldMode, session, false);
        }
    }
    PG_CATCH();
    {
        // A session lock would outlive the failed statement: give it back.
        if (session) LockRelease(&rtag, mode, true);
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (guarded_busy) return false;  // only try_only gets here

    core::GrantTraits traits;
    traits.base = r.key;
    traits.delay_ms = opts.delay_ms;
    record_hold(r, r.key, token, session, lease_ms, traits, !was_held, fresh);
    *out = token;
    return true;
}

// Releases one session hold of r. False when the session holds none.
bool release_one(const Resource& r) {
    if (const int done = release_with_options(r); done >= 0) return done > 0;
    const LOCKTAG rtag = resource_tag(r.key);
    if (!held_by_me(rtag, kSessionMode)) {
        // The lock manager is the truth (pg_advisory_unlock_all() and DISCARD
        // ALL release our session locks too): forget what it does not hold.
        if (const core::Hold* h = ledger().find(r.key); h && h->session > 0 && !holds_resource(rtag))
            ledger().forget(r.key);
        return false;
    }
    const std::int64_t token = token_of_own_hold(r);
    const LOCKTAG ttag = token_tag(token);
    if (held_by_me(ttag, kTokenHoldMode)) {
        LockRelease(&ttag, kTokenHoldMode, true);
        if (!held_by_me(ttag, kTokenHoldMode)) released_token = token;
    }
    LockRelease(&rtag, kSessionMode, true);
    if (!ledger().release_session(r.key) && !holds_resource(rtag)) ledger().forget(r.key);
    if (!holds_resource(rtag)) {
        ledger().forget(r.key);
        events::grant_ended(r.key, token);
    }
    return true;
}

// A lock a parallel worker takes is the worker's, and goes when the worker
// exits, with its statement (PostgreSQL refuses its own advisory locks
// there for that reason): a validate() guard would not last until the
// transaction ends, nor a hold for the session. fencing's functions are
// PARALLEL UNSAFE; a function declared PARALLEL SAFE that calls them could
// still run them in a worker.
void refuse_in_parallel_mode(const char* name) {
    if (IsInParallelMode())
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_TRANSACTION_STATE), errmsg("cannot call %s during a parallel operation", name),
                 errdetail("A lock taken in a parallel worker is given back when the worker exits, at the end "
                           "of its statement; fencing locks and validate() guards last for their session or "
                           "transaction."),
                 errhint("Declare the functions that call %s PARALLEL UNSAFE.", name)));
}

Datum acquire_entry(FunctionCallInfo fcinfo, bool session, bool try_only, const char* name) {
    return guarded(name, [&]() -> Datum {
        refuse_in_parallel_mode(name);
        std::int64_t token = 0;
        if (!acquire(fcinfo, session, try_only, &token)) PG_RETURN_NULL();
        PG_RETURN_INT64(token);
    });
}

[[noreturn]] void report_stale(const Resource& r, std::int64_t presented, const StateRow& row, const char* why) {
    if (row.found)
        ereport(ERROR,
                (errcode(ERRCODE_FENCING_STALE_TOKEN), errmsg("stale fence token for resource \"%.*s\"", r.len, r.data),
                 errdetail("Token %lld was presented for resource \"%.*s\"; its latest token is %lld; %s.",
                           static_cast<long long>(presented), r.len, r.data, static_cast<long long>(row.token), why),
                 errhint("The lock was lost; acquire it again and use the new token.")));
    // Its permits have tokens (and fence state rows) of their own.
    if (acquired_with_permits(r))
        ereport(ERROR,
                (errcode(ERRCODE_FENCING_STALE_TOKEN), errmsg("stale fence token for resource \"%.*s\"", r.len, r.data),
                 errdetail("Token %lld was presented for resource \"%.*s\", which has only been acquired with "
                           "permits; no permit of it is held with that token.",
                           static_cast<long long>(presented), r.len, r.data),
                 errhint("The lock was lost; acquire it again and use the new token.")));
    ereport(ERROR,
            (errcode(ERRCODE_FENCING_STALE_TOKEN), errmsg("stale fence token for resource \"%.*s\"", r.len, r.data),
             errdetail("Token %lld was presented for resource \"%.*s\", which has never been acquired.",
                       static_cast<long long>(presented), r.len, r.data),
             errhint("Acquire the resource with fencing.acquire() and use the token it returns.")));
    pg_unreachable();
}

}  // namespace

FENCING_FUNCTION(fencing_acquire) { return acquire_entry(fcinfo, true, false, "fencing.acquire"); }
FENCING_FUNCTION(fencing_try_acquire) { return acquire_entry(fcinfo, true, true, "fencing.try_acquire"); }
FENCING_FUNCTION(fencing_acquire_xact) { return acquire_entry(fcinfo, false, false, "fencing.acquire_xact"); }
FENCING_FUNCTION(fencing_try_acquire_xact) { return acquire_entry(fcinfo, false, true, "fencing.try_acquire_xact"); }
// The symbols of 1.1's acquire family (sql/fencing--1.0--1.1.sql): the same
// functions, under names a backend still running the 1.0 module lacks.
FENCING_FUNCTION(fencing_acquire_with_options) { return acquire_entry(fcinfo, true, false, "fencing.acquire"); }
FENCING_FUNCTION(fencing_try_acquire_with_options) { return acquire_entry(fcinfo, true, true, "fencing.try_acquire"); }
FENCING_FUNCTION(fencing_acquire_xact_with_options) {
    return acquire_entry(fcinfo, false, false, "fencing.acquire_xact");
}
FENCING_FUNCTION(fencing_try_acquire_xact_with_options) {
    return acquire_entry(fcinfo, false, true, "fencing.try_acquire_xact");
}

FENCING_FUNCTION(fencing_release) {
    return guarded("fencing.release", [&]() -> Datum {
        refuse_in_parallel_mode("fencing.release");
        Resource r = resource_arg(fcinfo, 0);
        bool released = release_one(r);
        if (!released)
            ereport(WARNING, (errcode(ERRCODE_WARNING),
                              errmsg("fencing lock on resource \"%.*s\" is not held by this session", r.len, r.data),
                              errdetail("fencing.release releases session-scoped locks only; locks taken with "
                                        "acquire_xact end with their transaction.")));
        apply_leases();
        PG_RETURN_BOOL(released);
    });
}

FENCING_FUNCTION(fencing_release_all) {
    return guarded("fencing.release_all", [&]() -> Datum {
        refuse_in_parallel_mode("fencing.release_all");
        std::int32_t released = 0;
        // Copied into palloc'd memory first: the loop below calls the lock
        // manager, which may raise an error, and must hold no C++ object.
        const std::size_t cap = ledger().size();
        auto* holds = static_cast<core::HoldLedger::SessionHold*>(
            palloc(sizeof(core::HoldLedger::SessionHold) * (cap > 0 ? cap : 1)));
        const std::size_t n = ledger().copy_session_holds(holds, cap);
        for (std::size_t k = 0; k < n; ++k) {
            const std::uint64_t key = holds[k].key;
            const std::uint32_t count = holds[k].count;
            const LOCKTAG rtag = resource_tag(key);
            const LOCKTAG ttag = token_tag(holds[k].token);
            const HoldModes m = hold_modes(key);
            bool any = false;
            for (std::uint32_t i = 0; i < count && held_by_me(rtag, m.session); ++i) {
                if (held_by_me(ttag, m.token)) LockRelease(&ttag, m.token, true);
                LockRelease(&rtag, m.session, true);
                release_hold_extras(key, true);
                (void)ledger().release_session(key);
                any = true;
            }
            if (!holds_resource(rtag)) {
                ledger().forget(key);
                if (any) events::grant_ended(key, holds[k].token);
            }
            if (any) ++released;
        }
        apply_leases();
        PG_RETURN_INT32(released);
    });
}

FENCING_FUNCTION(fencing_current) {
    return guarded("fencing.current", [&]() -> Datum {
        Resource r = resource_arg(fcinfo, 0);
        StateRow row = read_state(r.key, r.data, r.len);
        if (!row.found) PG_RETURN_NULL();
        PG_RETURN_INT64(row.token);
    });
}

FENCING_FUNCTION(fencing_validate) {
    return guarded("fencing.validate", [&]() -> Datum {
        refuse_in_parallel_mode("fencing.validate");
        Resource r = resource_arg(fcinfo, 0);
        if (PG_ARGISNULL(1))
            ereport(
                ERROR,
                (errcode(ERRCODE_FENCING_STALE_TOKEN), errmsg("stale fence token for resource \"%.*s\"", r.len, r.data),
                 errdetail("No token was presented for resource \"%.*s\" (the token is null).", r.len, r.data),
                 errhint("Acquire the resource with fencing.acquire() and use the token it returns.")));
        std::int64_t token = PG_GETARG_INT64(1);
        refuse_if_secret_new_here();
        refuse_if_fence_made_here();
        // The guard first, then the check: an acquisition that has not yet
        // issued its token now waits for this transaction to end, and one
        // that has issued it makes the check below fail.
        const LOCKTAG gtag = guard_tag(r.key);
        const bool guard_new = !held_by_me(gtag, kGuardHoldMode);
        if (guard_new) (void)LockAcquire(&gtag, kGuardHoldMode, false, false);
        StateRow row = read_state(r.key, r.data, r.len);
        if ((!row.found || row.token != token) && validate_permit(r, token)) PG_RETURN_INT64(token);
        if (!row.found || row.token != token) report_stale(r, token, row, "a newer lock was granted since");
        // The holder of the latest grant keeps a lock on its token: probe it.
        const LOCKTAG ttag = token_tag(token);
        // Only an exclusive grant's hold counts: a shared hold shares the
        // latest token and must not make it valid again (lock_tags.hpp).
        bool held = held_by_me(ttag, kTokenHoldMode);
        if (!held) {
            if (LockAcquire(&ttag, kTokenProbeMode, false, true) == LOCKACQUIRE_NOT_AVAIL)
                held = true;
            else
                LockRelease(&ttag, kTokenProbeMode, false);
        }
        if (!held) report_stale(r, token, row, "the lock granted with it is no longer held");
        // The guard lasts as long as the transaction, limited by the grant's
        // lease: a guarding session silent for longer is ended like a holder.
        // Every guard is in the ledger (a PREPARE TRANSACTION that would keep
        // one is refused), with the grant's lease if it has one.
        if (guard_new) record_guard(r.key, token, row.lease_ms);
        PG_RETURN_INT64(token);
    });
}

FENCING_FUNCTION(fencing_renew) {
    return guarded("fencing.renew", [&]() -> Datum {
        refuse_in_parallel_mode("fencing.renew");
        Resource r = resource_arg(fcinfo, 0);
        r.key = held_key_of(r);  // a permit of the resource, when the session holds one
        const LOCKTAG rtag = resource_tag(r.key);
        if (!holds_resource(rtag)) {
            ledger().forget(r.key);
            apply_leases();
            ereport(ERROR, (errcode(ERRCODE_FENCING_STALE_TOKEN),
                            errmsg("fencing lock on resource \"%.*s\" is not held by this session", r.len, r.data),
                            errhint("The lock was lost; acquire it again and use the new token.")));
        }
        const core::Hold* h = ledger().find(r.key);
        std::int64_t lease_ms = h ? h->lease_ms : 0;
        if (lease_ms <= 0) PG_RETURN_NULL();
        // This very statement is activity: the whole lease lies ahead.
        Interval* iv = static_cast<Interval*>(palloc0(sizeof(Interval)));
        iv->time = lease_ms * 1000;
        PG_RETURN_INTERVAL_P(iv);
    });
}

FENCING_FUNCTION(fencing_resource_key) {
    return guarded("fencing.resource_key", [&]() -> Datum {
        Resource r = resource_arg(fcinfo, 0);
        PG_RETURN_INT64(core::key_as_int64(r.key));
    });
}

// What the acquisitions with options (pg/permits.cpp, pg/shared_holds.cpp)
// share with the plain one.
namespace fencing::pg {
bool wait_for_lock(const LOCKTAG& tag, LOCKMODE mode, bool session, std::int64_t wait_ms) {
    // Free (and nobody queued before us): no wait at all.
    if (LockAcquire(&tag, mode, session, true) != LOCKACQUIRE_NOT_AVAIL) return true;
    const bool held_before = held_by_me(tag, mode);
    const int saved = LockTimeout;
    const bool ours = wait_ms > 0 && (saved <= 0 || wait_ms < saved);
    if (!ours) {
        // Without a bound of its own (wait_ms < 0, or the session's
        // lock_timeout is shorter), lock_timeout, statement_timeout and the
        // deadlock detector apply as usual, and their errors propagate.
        PG_TRY();
        { (void)LockAcquire(&tag, mode, session, false); }
        PG_CATCH();
        {
            abandon_wait(tag, mode, session, held_before);
            PG_RE_THROW();
        }
        PG_END_TRY();
        return true;
    }
    // A bounded wait is a lock_timeout for this one wait, in a subtransaction
    // of its own, as PL/pgSQL's exception blocks run: the timeout's error
    // ends the subtransaction, and only then is it dismissed; any other
    // error is raised again once the subtransaction is rolled back. A
    // transaction-level lock granted in it belongs to the caller's
    // transaction once it is released (committed).
    MemoryContext caller = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(caller);
    bool timed_out = false;
    PG_TRY();
    {
        LockTimeout = static_cast<int>(wait_ms);
        (void)LockAcquire(&tag, mode, session, false);
        LockTimeout = saved;
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(caller);
        // The subtransaction's locks now belong to the transaction's own
        // resource owner (current again); the caller's owner (a portal's)
        // is the one its LockRelease() names: hand the hold over.
        if (!session && CurrentResourceOwner != owner) {
            ResourceOwner xact_owner = CurrentResourceOwner;
            CurrentResourceOwner = owner;
            (void)LockAcquire(&tag, mode, false, true);  // held already: only counted, for owner
            CurrentResourceOwner = xact_owner;
            LockRelease(&tag, mode, false);
        }
        CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
        LockTimeout = saved;
        MemoryContextSwitchTo(caller);
        ErrorData* e = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(caller);
        CurrentResourceOwner = owner;
        // Granted at the very moment of the timeout: a session lock outlives
        // the subtransaction, held by nobody who knows it. Give it back.
        if (!held_before && held_by_me(tag, mode)) LockRelease(&tag, mode, session);
        if (e->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE) ReThrowError(e);
        FreeErrorData(e);
        timed_out = true;
    }
    PG_END_TRY();
    return !timed_out;
}
std::int64_t elapsed_ms(TimestampTz since) {
    long secs = 0;
    int usecs = 0;
    TimestampDifference(since, GetCurrentTimestamp(), &secs, &usecs);
    return static_cast<std::int64_t>(secs) * 1000 + usecs / 1000;
}
void lock_or_report(const Resource& r, const LOCKTAG& tag, LOCKMODE mode, bool session, std::int64_t wait_ms) {
    lock_resource(r, tag, mode, session, wait_ms);
}
void report_lock_not_acquired(const Resource& r, std::int64_t wait_ms) { report_not_acquired(r, wait_ms); }
bool drain_guard_of(const Resource& r, std::int64_t wait_ms) { return drain_guard(r, wait_ms); }
void record_guard(std::uint64_t key, std::int64_t token, std::int32_t lease_ms) {
    guard_ledger().add(key, token, false, GetCurrentSubTransactionId(), lease_ms);
    if (lease_ms > 0) apply_leases();
}
bool issue_guarded(const Resource& r, std::int32_t lease_ms, std::int64_t wait_ms, std::int64_t* token) {
    return issue_guarded_token(r, lease_ms, wait_ms, token);
}
bool regrant_in_statement(const Resource& r, const LOCKTAG& rtag, bool session) {
    return same_statement_regrant(r, rtag, session);
}
void refuse_if_validated_here(const Resource& r) {
    if (held_by_me(guard_tag(r.key), kGuardHoldMode)) report_guarded_here(r);
}
}  // namespace fencing::pg
