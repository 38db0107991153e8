// Notifications of lock events: NOTIFY on channel "fencing" with a JSON
// payload (core/lock_event.hpp), for the resources fencing.set_notify enabled
// (table fencing.notify_settings). Queued in the transaction the event happens
// in, so sent at its commit and never for what did not commit.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

#include "core/lock_event.hpp"

namespace fencing::pg::notify {

// A grant started: notify it, and remember it to announce its end.
void granted(std::uint64_t key, const char* resource, int len, std::int64_t token, bool session);
// A session-scoped grant ended cleanly (release, release_all).
void released(std::uint64_t key);
// Any other event of a resource (lost, delay_ended), when it is enabled.
void event(const char* resource, int len, core::LockEvent ev, std::int64_t token);
// The session is ending: its session-scoped grants it announced are lost.
// From a before_shmem_exit callback: the events go to the supervisor, which
// has them sent (nothing here starts a transaction or waits). Returns how
// many could not be queued.
std::uint64_t session_ending();
// The grant of key this session announced (its name and token), or
// resource == nullptr.
struct Announced {
    const char* resource;
    std::size_t len;
    std::int64_t token;
};
Announced announced(std::uint64_t key) noexcept;
// Queues the notification of an event that happened at unix_us, in the
// current transaction (the supervisor's notifier).
void send_event(const char* resource, std::size_t len, core::LockEvent ev, std::int64_t token, std::int64_t unix_us);
// Whether this session has grants whose end it will announce.
bool announcing() noexcept;

}  // namespace fencing::pg::notify
