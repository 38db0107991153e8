// This backend's fencing holds (the ledgers), kept in step with transaction
// and subtransaction ends and with the lock manager; their leases are
// published for the supervisor (pg/supervisor.hpp), which enforces them.
#pragma once
#include "pg/pg.hpp"

#include "core/hold_ledger.hpp"

namespace fencing::pg {

// Holds of fencing locks, per resource key.
core::HoldLedger& ledger() noexcept;
// Guard holds taken by validate() (transaction scope), per resource key, with
// the lease of the grant they validated.
core::HoldLedger& guard_ledger() noexcept;

// Forgets leased holds the lock manager no longer has (pg_advisory_unlock_all(),
// DISCARD ALL, an aborted subtransaction), then publishes the leased holds
// left for the supervisor. Call after the holds changed.
void apply_leases() noexcept;

void register_session_callbacks();

// The lease (ms) whose expiry is ending this session; 0 when none is.
std::int64_t lease_ending_ms() noexcept;

}  // namespace fencing::pg
