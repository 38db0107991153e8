// Settings (GUCs) of the fencing module.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>
#include <optional>

namespace fencing::pg {

// fencing.token: a transaction's token for writes that carry none (parsed once
// per SET by the GUC hooks, read per row by the trigger).
std::optional<std::int64_t> token_setting() noexcept;

// fencing.require_sync_standby: refuse to issue tokens unless a synchronous
// standby is configured and connected.
bool require_sync_standby() noexcept;

// fencing.log_ahead: how many tokens one WAL record of the counter covers.
std::int64_t log_ahead() noexcept;

void define_settings();

}  // namespace fencing::pg
