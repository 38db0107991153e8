// The options of the acquire family beyond a plain exclusive lock (1.1):
// lock_delay (pg/lock_delay.cpp), permits (pg/permits.cpp) and shared holds
// (pg/shared_holds.cpp), and what the rest of the glue needs to know about
// them: the lock modes a hold uses, the extra locks released with it, the key
// a resource's hold is under.
//
// A session's holds with options are recorded in its grant book
// (core::GrantBook); plain holds without a delay are not, so that while the
// book is empty every helper here answers "plain" without further work.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

#include "core/lock_options.hpp"
#include "pg/args.hpp"

// SQLSTATE 55T01: a counted lock asked for with another count of permits than
// the holders of its permits use (class 55, object not in prerequisite state).
#define ERRCODE_FENCING_PERMIT_COUNT MAKE_SQLSTATE('5', '5', 'T', '0', '1')

namespace fencing::pg {

// lock_delay, permits and shared of an acquire call (22023 / 22004 for bad
// values). Absent arguments (a database still at 1.0 calls with fewer) are
// the defaults.
core::LockOptions lock_options_arg(FunctionCallInfo fcinfo, bool try_only);

core::GrantBook& grant_book() noexcept;

// The lock modes of this session's hold of key: the resource tag in session
// and transaction scope, and its token tag.
struct HoldModes {
    LOCKMODE session;
    LOCKMODE xact;
    LOCKMODE token;
};
HoldModes hold_modes(std::uint64_t key) noexcept;

// Whether this session holds the resource tag in any fencing mode.
bool holds_any_mode(const LOCKTAG& rtag) noexcept;

// Whether this session holds the grant of `key` (a plain resource, a permit
// or a shared hold) at session scope: its ledger says so and the lock
// manager still has the lock (pg_advisory_unlock_all, DISCARD ALL).
bool held_at_session_scope(std::uint64_t key) noexcept;

// A plain exclusive acquisition of a resource this session holds shared
// would upgrade the hold: refused (55006), reentrant or not.
void refuse_upgrade_of_shared(const Resource& r, const LOCKTAG& rtag);

// After a plain exclusive grant of key (first: the session did not hold it
// before): records its lock-delay, if any.
void note_plain_grant(std::uint64_t key, bool first, std::int64_t delay_ms);

// Releases the locks that come with one hold of key besides its resource and
// token tags (a permit's marks), in the given scope.
void release_hold_extras(std::uint64_t key, bool session);

// The key this session's hold of the resource is under: its own key when the
// session holds it (or nothing of it), else the key of the permit of it that
// the session holds.
std::uint64_t held_key_of(const Resource& r);

// The key of the permit this session holds of the counted resource whose
// base key (its first permit's key) is `base`, or 0.
std::uint64_t held_permit_key(std::uint64_t base);

// release(resource) of a shared hold or a permit: 1 released, 0 not held,
// -1 not such a hold (the plain path decides).
int release_with_options(const Resource& r);

// The acquire family with options.
struct AcquireCall {
    Resource r;
    bool session;
    bool try_only;
    std::int64_t wait_ms;   // -1: no bound
    std::int64_t lease_ms;  // 0: none
    bool reentrant;
    core::LockOptions opts;
};
bool acquire_shared(const AcquireCall& c, std::int64_t* out);  // pg/shared_holds.cpp
bool acquire_permit(const AcquireCall& c, std::int64_t* out);  // pg/permits.cpp

// validate() of a token granted for a permit of the resource: true (and the
// permit's guard held) when a hold granted with it is still held.
bool validate_permit(const Resource& r, std::int64_t token);  // pg/permits.cpp
// The base key of a counted resource: its first permit's key (pg/permits.cpp).
std::uint64_t permit_base_key(const Resource& r);
// Whether the resource was ever acquired with permits (its first permit has
// a row in the fence state; pg/permits.cpp).
bool acquired_with_permits(const Resource& r);

// Records a hold, for every kind of grant (plain, permit, shared): in the
// ledger, in the grant book (a plain hold only for its lock-delay), arms the
// lock-delay and the leases, and announces a new grant (`announce`; a
// nested hold or a hold that keeps its token is none). `first`: the
// session did not hold the resource before. Raises 53200 on out-of-memory
// after giving back a session hold's locks.
void record_hold(const Resource& r, std::uint64_t key, std::int64_t token, bool session, std::int64_t lease_ms,
                 const core::GrantTraits& traits, bool first, bool announce);

// From pg/locks.cpp: waiting for a lock with the acquire family's bounds and
// errors.
void lock_or_report(const Resource& r, const LOCKTAG& tag, LOCKMODE mode, bool session, std::int64_t wait_ms);
[[noreturn]] void report_lock_not_acquired(const Resource& r, std::int64_t wait_ms);
bool drain_guard_of(const Resource& r, std::int64_t wait_ms);
// Records a validate() guard this transaction took of KEY (granted with
// TOKEN and LEASE_MS): every guard is in the guard ledger (a PREPARE
// TRANSACTION that would keep one is refused), with the grant's lease.
void record_guard(std::uint64_t key, std::int64_t token, std::int32_t lease_ms);
// Issues the next token of r (whose resource lock the caller holds) once no
// validate()-guarded transaction of an earlier grant is open, and records it
// (issue_token). Within wait_ms (0: no wait; < 0: no bound of its own);
// false when a guarded transaction outlasted it (nothing is issued, or the
// token drawn is never handed out).
bool issue_guarded(const Resource& r, std::int32_t lease_ms, std::int64_t wait_ms, std::int64_t* token);
// Waits for a lock, at most wait_ms (> 0; < 0: no bound of its own); false
// when that bound elapsed (the wait is abandoned, nothing is held). Other
// errors (lock_timeout, the deadlock detector, a cancel) propagate.
bool wait_for_lock(const LOCKTAG& tag, LOCKMODE mode, bool session, std::int64_t wait_ms);
// Milliseconds since `since`.
std::int64_t elapsed_ms(TimestampTz since);
bool regrant_in_statement(const Resource& r, const LOCKTAG& rtag, bool session);
// 55006 when this transaction validated a token of the resource (a new
// token is issued only after such transactions end).
void refuse_if_validated_here(const Resource& r);

// pg/lock_delay.cpp: grants taken with a lock-delay (armed at the first).
void arm_lock_delay();
// The session's exit (pg/events.cpp's callback, before PostgreSQL releases
// the locks): records the delayed grants still held in the supervisor's
// delay table; returns how many. Never waits (an LWLock, briefly).
std::size_t lock_delay_publish();
// After the lock manager granted the lock of `key` (shared: a shared hold):
// true when no lost grant's lock-delay keeps it, or once the delay was waited
// out within wait_ms (-1: no bound); false when try_only and a delay keeps
// it, or the wait ran out first (nothing is released here).
bool lock_delay_wait_out(std::uint64_t key, bool shared, bool try_only, std::int64_t wait_ms);

}  // namespace fencing::pg
