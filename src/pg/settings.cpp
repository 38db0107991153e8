#include "pg/settings.hpp"

#include "pg/bridge.hpp"

#include "core/token.hpp"

namespace fencing::pg {

namespace settings_detail {
bool token_present = false;
std::int64_t token_value = 0;
// fencing.token's own GUC record (stable once defined), for its stack of
// values: only a value set within the current transaction counts.
compat::GucRecord token_gconf = nullptr;
}  // namespace settings_detail

namespace {
using settings_detail::token_gconf;
char* token_setting_text = nullptr;
bool require_sync_standby_value = false;
int log_ahead_value = 1 << 20;

bool check_token_setting(char** newval, void** extra, GucSource source) {
    if (*newval == nullptr || (*newval)[0] == '\0') return true;  // unset
    core::ParseResult r = core::parse_token(*newval, strlen(*newval));
    if (r.status == core::ParseStatus::ok) return true;
    GUC_check_errcode(r.status == core::ParseStatus::syntax         ? ERRCODE_INVALID_TEXT_REPRESENTATION
                      : r.status == core::ParseStatus::out_of_range ? ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE
                                                                    : ERRCODE_CHECK_VIOLATION);
    GUC_check_errmsg("invalid value for fencing.token: \"%s\"", *newval);
    GUC_check_errdetail("A fence token is an integer from 1 to 9223372036854775807.");
    return false;
}

void assign_token_setting(const char* newval, void* extra) {
    if (newval == nullptr || newval[0] == '\0') {
        settings_detail::token_present = false;
        settings_detail::token_value = 0;
        return;
    }
    core::ParseResult r = core::parse_token(newval, strlen(newval));
    settings_detail::token_present = r.status == core::ParseStatus::ok;
    settings_detail::token_value = r.value;
}
}  // namespace

namespace {
// Whether the current value of fencing.token was set for the current
// transaction only: by SET LOCAL or set_config(..., true) (fencing.use()), or
// by a function's SET clause for the duration of the call. PostgreSQL keeps a
// stack entry for every variable changed in the transaction; a value without
// one, or whose entry says it was a plain SET (GUC_SET), is a session value,
// which a later transaction (or other code of this one) never means.
bool token_setting_is_local() noexcept { return compat::guc_set_for_transaction(token_gconf); }
}  // namespace

bool token_setting_ignored() noexcept { return settings_detail::token_present && !token_setting_is_local(); }

bool require_sync_standby() noexcept { return require_sync_standby_value; }

std::int64_t log_ahead() noexcept { return log_ahead_value; }

void define_settings() {
    DefineCustomStringVariable("fencing.token", "Fence token of the current transaction's writes.",
                               "Used by protected tables for writes that do not carry a token themselves; "
                               "set it with SELECT fencing.use($1) or SET LOCAL fencing.token = '<token>'.",
                               &token_setting_text, "", PGC_USERSET, 0, check_token_setting, assign_token_setting,
                               nullptr);
    token_gconf = compat::guc_record("fencing.token");
    DefineCustomBoolVariable(
        "fencing.require_sync_standby", "Refuse to issue fence tokens without a synchronous standby.",
        "When on, fencing.acquire and its variants raise an error unless synchronous_standby_names "
        "is set (a synchronous standby is configured), so that no token can be lost by a failover; "
        "with one configured, acquisition waits for a synchronous standby to confirm each token.",
        &require_sync_standby_value, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "fencing.log_ahead", "Number of fence tokens one WAL record of the token counter covers.",
        "The counter WAL-logs this many values ahead and writes its next record when half are used; "
        "no record covers more than 2 s past the wall clock in microseconds, whatever this says.",
        &log_ahead_value, 1 << 20, 16, 1 << 30, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    compat::reserve_guc_prefix("fencing");
}

}  // namespace fencing::pg

// fencing.use(token bigint): SET LOCAL fencing.token, with a bind parameter.
// Outside a transaction block the setting would end with the statement, before
// any write it is meant for: that is an error, never a silent no-op.
FENCING_FUNCTION(fencing_use) {
    return fencing::pg::guarded("fencing.use", [&]() -> Datum {
        if (PG_ARGISNULL(0))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("fence token must not be null"),
                            errhint("Pass the token that fencing.acquire() returned.")));
        const std::int64_t token = PG_GETARG_INT64(0);
        if (fencing::core::token_from_int64(token).status != fencing::core::ParseStatus::ok)
            ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
                            errmsg("value for domain fencing.token violates check constraint \"token_positive\""),
                            errdetail("A fence token is an integer from 1 to 9223372036854775807; %lld is not.",
                                      static_cast<long long>(token))));
        if (!IsTransactionBlock())
            ereport(ERROR,
                    (errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
                     errmsg("fencing.use() can only be used in transaction blocks"),
                     errdetail("The token applies to the current transaction only; outside a transaction "
                               "block that transaction ends with this statement."),
                     errhint("Run BEGIN first and call fencing.use() in the transaction whose writes it is for.")));
        char buf[fencing::core::kTokenTextMax];
        fencing::core::format_token(token, buf);
        (void)set_config_option("fencing.token", buf, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
        PG_RETURN_INT64(token);
    });
}
