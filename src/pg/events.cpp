// Hook points (events.hpp): each event goes to the statistics and to the
// notifications. Also the session's exit callback, which counts lease
// expiries and grants lost with the session, and has the notifications send
// "lost": registered in a backend when it first needs it.
#include "pg/events.hpp"

#include "pg/bridge.hpp"
#include "pg/lock_options.hpp"
#include "pg/lock_tags.hpp"
#include "pg/notify.hpp"
#include "pg/session.hpp"
#include "pg/supervisor.hpp"

extern "C" {
#include "storage/ipc.h"
}

namespace fencing::pg::events {

namespace {

bool exit_callback_registered = false;

// Session-scoped grants the lock manager still holds: they end with the session.
std::uint64_t session_grants_held() {
    const std::size_t cap = ledger().size();
    if (cap == 0) return 0;
    auto* holds = static_cast<core::HoldLedger::SessionHold*>(palloc(sizeof(core::HoldLedger::SessionHold) * cap));
    const std::size_t n = ledger().copy_session_holds(holds, cap);
    std::uint64_t held = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (held_at_session_scope(holds[i].key)) ++held;
    pfree(holds);
    return held;
}

// before_shmem_exit: runs before PostgreSQL's own (ShutdownPostgres), so the
// session's locks are still held. It only publishes: the grants with a
// lock-delay go into the supervisor's delay table, the lost grants' events
// into its queue, and the statistics are counted. It starts no transaction
// and waits for nothing: the backend exits at once, and the supervisor does
// the rest.
void on_exit(int, Datum) {
    (void)lock_delay_publish();
    if (stats::collecting()) {
        if (lease_ending_ms() > 0) stats::add(stats::kLeaseExpiries);
        if (const std::uint64_t lost = session_grants_held(); lost > 0) stats::add(stats::kLost, lost);
    }
    if (const std::uint64_t dropped = notify::session_ending(); dropped > 0)
        stats::add(stats::kNotificationsDropped, dropped);
    const supervisor::LeasedHold none[1] = {};
    supervisor::publish_leases(none, 0, false, 0);
}

}  // namespace

void ensure_exit_callback() {
    if (exit_callback_registered) return;
    before_shmem_exit(on_exit, (Datum)0);
    exit_callback_registered = true;
}

namespace {

void account(const Wait& w) {
    const TimestampTz now = GetCurrentTimestamp();
    const std::uint64_t us = now > w.began ? static_cast<std::uint64_t>(now - w.began) : 0;
    stats::add(stats::kWaitUs, us);
    stats::raise_max(stats::kWaitMaxUs, us);
}

}  // namespace

void grant_started(std::uint64_t key, const char* resource, int len, std::int64_t token, bool session) {
    if (stats::collecting()) {
        stats::add(stats::kGrants);
        ensure_exit_callback();
    }
    notify::granted(key, resource, len, token, session);
    if (notify::announcing()) ensure_exit_callback();
}

void grant_ended(std::uint64_t key, std::int64_t) { notify::released(key); }

void grant_lost(const char* resource, int len, std::int64_t token) {
    notify::event(resource, len, core::LockEvent::lost, token);
}

void stale_write(Oid relid, bool temporary, bool skipped) {
    stats::add_table(relid, temporary, skipped ? stats::kStaleSkips : stats::kStaleRejections);
}

void forgotten(std::int64_t n) {
    if (n > 0) stats::add(stats::kForgets, static_cast<std::uint64_t>(n));
}

void leases_enforced() { ensure_exit_callback(); }

Wait wait_began() noexcept {
    if (!stats::collecting()) return Wait{0};
    stats::add(stats::kWaits);
    return Wait{GetCurrentTimestamp()};
}

void wait_ended(const Wait& w) noexcept {
    if (w.began != 0) account(w);
}

void wait_failed(const Wait& w) noexcept {
    if (w.began == 0) return;
    account(w);
    if (geterrcode() == ERRCODE_LOCK_NOT_AVAILABLE) stats::add(stats::kWaitTimeouts);
}

}  // namespace fencing::pg::events
