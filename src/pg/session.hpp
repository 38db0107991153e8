// This backend's fencing holds (the ledger), kept in step with transaction
// and subtransaction ends, and the idle timeouts that enforce leases.
#pragma once
#include "pg/pg.hpp"

#include "core/hold_ledger.hpp"

namespace fencing::pg {

core::HoldLedger& ledger() noexcept;

// Re-arms or restores idle_session_timeout / idle_in_transaction_session_timeout
// after the set of leased holds changed.
void apply_leases() noexcept;

void register_session_callbacks();

}  // namespace fencing::pg
