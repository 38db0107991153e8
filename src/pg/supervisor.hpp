// The supervisor: one background worker (fencing in shared_preload_libraries)
// that owns everything that must happen while no client statement of the
// holder runs: it ends leased holders whose clients are silent past their
// lease, keeps lock-delays after the lost holder's backend has exited, and
// has the lock events of ended sessions (lost, delay_ended) sent.
//
// Backends and the supervisor meet in shared memory (pg/supervisor.cpp):
//   - a holder slot per backend: the backend publishes its leased holds
//     there (publish_leases), the supervisor samples the backend from outside
//     (its wait event and activity, pg_stat_activity's data; on TCP, the
//     socket's byte counters) and, when a silence outlasts the shortest
//     lease still held, marks the slot and terminates the backend;
//   - the delay table: a backend that exits holding grants with a lock-delay
//     records them there (post_delay, from its exit callback, before
//     PostgreSQL releases its locks); every acquisition checks it once it
//     holds the resource's lock (delay_left_ms) and waits the delay out;
//   - the event queue: the ended session's lost events (post_event); the
//     supervisor adds delay_ended when a delay is over, and starts a
//     short-lived notifier worker per database to send them as NOTIFY.
// The exit callback only writes to shared memory and sets a latch: it never
// starts a transaction, sleeps or waits.
#pragma once
#include "pg/pg.hpp"

#include <cstddef>
#include <cstdint>

#include "core/lock_event.hpp"

namespace fencing::pg::supervisor {

// From _PG_init: requests shared memory and registers the supervisor, when
// the library is being preloaded.
void init();

// Whether the shared state exists (fencing is in shared_preload_libraries).
bool available() noexcept;

// Raises 55000 unless available(): `what` ("leases", "lock_delay") need the
// supervisor.
void require(const char* what);
// A statement of this backend begins (the executor or a utility command):
// its client did something. Cheap; never raises.
void note_statement() noexcept;

// One leased hold of this backend, for the supervisor.
struct LeasedHold {
    std::uint64_t key;
    std::int64_t lease_ms;
    bool guard;  // a validate() guard, not a resource lock
};

// Publishes this backend's leased holds (n of them; more than fit: overflow)
// and the shortest of their leases (0: none). Cheap; never raises.
void publish_leases(const LeasedHold* holds, std::size_t n, bool overflow, std::int64_t shortest_ms) noexcept;

// The lease (ms) whose expiry made the supervisor end this session; 0 when
// it did not.
std::int64_t lease_ending_ms() noexcept;
// How many leased holds the session held when the supervisor ended it.
int lease_ending_held() noexcept;

// From the exit callback, for this backend's database: a lock event of the
// ending session (lost). Never waits (an LWLock, briefly); false when the queue
// is full (the caller counts it as dropped).
bool post_event(core::LockEvent ev, const char* resource, std::size_t len, std::int64_t token);

// A grant that ended uncleanly with a lock-delay: `key` held in `mode`
// (kSharedMode: a shared hold); a permit's resource's base key and count of
// permits (0 for other grants); whether to send delay_ended for it
// (resource, token) when the delay is over.
struct LostGrant {
    std::uint64_t key;
    std::int64_t delay_ms;
    LOCKMODE mode;
    std::uint64_t base;
    std::int32_t permits;
    bool announce;
    const char* resource;
    std::size_t len;
    std::int64_t token;
};
// From the exit callback: nobody is granted the lost grant's resource until
// its delay has passed. False when the table is full.
bool post_delay(const LostGrant& g);

// The count of permits of a permit of the counted resource `base` (this
// database) kept by a lost grant's lock-delay, or 0.
std::int32_t delayed_permit_count(std::uint64_t base);

// For an acquisition holding the lock of `key` in this database: how long
// (ms, rounded up) the lock-delay of a lost grant still keeps it from being
// granted; 0 when none does. A shared acquisition is kept out only by the
// delay of an exclusive grant.
std::int64_t delay_left_ms(std::uint64_t key, bool shared);

// Waits, holding the resource lock, until the delay of `key` is over: at most
// wait_ms (-1: no bound). False when the bound ran out first (nothing is
// released here). Interrupts (statement_timeout, cancel) raise as usual.
bool wait_out_delay(std::uint64_t key, bool shared, std::int64_t wait_ms);

}  // namespace fencing::pg::supervisor
