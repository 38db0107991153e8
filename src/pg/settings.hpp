// Settings (GUCs) of the fencing module.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>
#include <optional>

namespace fencing::pg {

// fencing.token: a transaction's token for writes that carry none (parsed once
// per SET by the GUC hooks, read per row by the trigger). Only a value set for
// the current transaction counts (SET LOCAL, fencing.use(), a function's SET
// clause); a session-level value (SET without LOCAL, set_config(..., false),
// ALTER ROLE ... SET, postgresql.conf) is ignored: empty then.
namespace settings_detail {
// Kept by the GUC's check and assign hooks (settings.cpp).
extern bool token_present;
extern std::int64_t token_value;
extern compat::GucRecord token_gconf;
}  // namespace settings_detail
// Inline: read for every row a protected table's trigger sees.
inline std::optional<std::int64_t> token_setting() noexcept {
    if (!settings_detail::token_present || !compat::guc_set_for_transaction(settings_detail::token_gconf))
        return std::nullopt;
    return settings_detail::token_value;
}

// A session-level fencing.token value is present and being ignored.
bool token_setting_ignored() noexcept;

// fencing.require_sync_standby: refuse to issue tokens unless a synchronous
// standby is configured and connected.
bool require_sync_standby() noexcept;

// fencing.log_ahead: how many tokens one WAL record of the counter covers.
std::int64_t log_ahead() noexcept;

void define_settings();

}  // namespace fencing::pg
