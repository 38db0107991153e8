#include "pg/settings.hpp"

#include "core/token.hpp"

namespace fencing::pg {

namespace {
char* token_setting_text = nullptr;
bool token_setting_present = false;
std::int64_t token_setting_value = 0;
bool require_sync_standby_value = false;
int log_ahead_value = 1 << 20;

bool check_token_setting(char** newval, void** extra, GucSource source) {
    if (*newval == nullptr || (*newval)[0] == '\0') return true;  // unset
    core::ParseResult r = core::parse_token(*newval, strlen(*newval));
    if (r.status == core::ParseStatus::ok) return true;
    GUC_check_errcode(r.status == core::ParseStatus::syntax ? ERRCODE_INVALID_TEXT_REPRESENTATION
                                                           : ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE);
    GUC_check_errmsg("invalid value for fencing.token: \"%s\"", *newval);
    GUC_check_errdetail("A fence token is an integer from 1 to 9223372036854775807.");
    return false;
}

void assign_token_setting(const char* newval, void* extra) {
    if (newval == nullptr || newval[0] == '\0') {
        token_setting_present = false;
        token_setting_value = 0;
        return;
    }
    core::ParseResult r = core::parse_token(newval, strlen(newval));
    token_setting_present = r.status == core::ParseStatus::ok;
    token_setting_value = r.value;
}
}  // namespace

std::optional<std::int64_t> token_setting() noexcept {
    if (!token_setting_present) return std::nullopt;
    return token_setting_value;
}

bool require_sync_standby() noexcept { return require_sync_standby_value; }

std::int64_t log_ahead() noexcept { return log_ahead_value; }

void define_settings() {
    DefineCustomStringVariable(
        "fencing.token", "Fence token of the current transaction's writes.",
        "Used by protected tables for writes that do not carry a token themselves; "
        "set it with SET LOCAL fencing.token = '<token>'.",
        &token_setting_text, "", PGC_USERSET, 0, check_token_setting, assign_token_setting, nullptr);
    DefineCustomBoolVariable(
        "fencing.require_sync_standby", "Refuse to issue fence tokens without a synchronous standby.",
        "When on, fencing.acquire and its variants raise an error unless synchronous_standby_names "
        "is set and a synchronous standby is connected, so that no token can be lost by a failover.",
        &require_sync_standby_value, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "fencing.log_ahead", "Number of fence tokens one WAL record of the token counter covers.",
        "The counter WAL-logs this many values ahead and writes its next record when half are used. "
        "After a crash, tokens resume above the covered value, so they jump by up to this much.",
        &log_ahead_value, 1 << 20, 16, 1 << 30, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    compat::reserve_guc_prefix("fencing");
}

}  // namespace fencing::pg
