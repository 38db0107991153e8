// Hook points: where the life of a fencing grant has its events. The code that
// makes an event happen calls one function here; statistics (stats.cpp) and
// notifications (notify.cpp) observe it. With neither in use (fencing not
// preloaded, no resource's notifications enabled) a call costs a few
// predictable branches.
//
//   grant_started   a grant with a new token: acquire, try_acquire,
//                   acquire_xact, try_acquire_xact (not a nested hold)
//   grant_ended     a session-scoped grant ends cleanly: release(),
//                   release_all() (transaction-scoped grants end with their
//                   transaction, which the observers see themselves)
//   grant_lost      a grant ended uncleanly, learned other than by its own
//                   session ending (the observers see that themselves)
//   stale_write     the trigger rejected (or skipped) a stale row write
//   forgotten       fencing.forget removed resources' fence state
//   counted_wait    wraps the wait for a busy resource's lock
//   leases_enforced this session started enforcing a lease
//
// Each must be called in a transaction, and none raises an error of its own
// (apart from out of memory): the caller's grant has already happened.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

#include "pg/stats.hpp"

namespace fencing::pg::events {

void grant_started(std::uint64_t key, const char* resource, int len, std::int64_t token, bool session);
void grant_ended(std::uint64_t key, std::int64_t token);
void grant_lost(const char* resource, int len, std::int64_t token);
void stale_write(Oid relid, bool temporary, bool skipped);
void forgotten(std::int64_t n);
void leases_enforced();

// Registers the session's exit callback (once): it counts lease expiries and
// lost grants, and hands the grants with a lock-delay and the "lost" events
// to the supervisor (pg/supervisor.hpp).
void ensure_exit_callback();

// Waits are counted only with statistics on: then the caller first tries the
// lock without waiting, and wraps the wait in counted_wait when it is busy.
inline bool counting_waits() noexcept { return stats::collecting(); }

struct Wait {
    TimestampTz began;
};
Wait wait_began() noexcept;
void wait_ended(const Wait& w) noexcept;
// Inside PG_CATCH, with the error that ended the wait still current.
void wait_failed(const Wait& w) noexcept;

// Runs lock() (which waits for a lock, and may raise an error) as a counted
// wait: its time, and whether it ended in a timeout (SQLSTATE 55P03).
template <class Lock>
void counted_wait(Lock&& lock) {
    const Wait w = wait_began();
    PG_TRY();
    { lock(); }
    PG_CATCH();
    {
        wait_failed(w);
        PG_RE_THROW();
    }
    PG_END_TRY();
    wait_ended(w);
}

}  // namespace fencing::pg::events
