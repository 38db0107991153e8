#include "pg/args.hpp"

#include "core/resource_key.hpp"
#include "pg/key_secret.hpp"

namespace fencing::pg {

Resource resource_arg(FunctionCallInfo fcinfo, int argno) {
    if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("fencing resource must not be null")));
    text* t = PG_GETARG_TEXT_PP(argno);
    Resource r{VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)), 0};
    switch (core::check_resource(static_cast<std::size_t>(r.len))) {
        case core::ResourceStatus::empty:
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("fencing resource must not be empty"),
                            errdetail("A resource name is 1 to %zu bytes long.", core::kMaxResourceBytes)));
            break;
        case core::ResourceStatus::too_long:
            ereport(ERROR,
                    (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("fencing resource name is too long"),
                     errdetail("The name is %d bytes long; the limit is %zu bytes.", r.len, core::kMaxResourceBytes)));
            break;
        case core::ResourceStatus::ok:
            break;
    }
    r.key = resource_key_of(r.data, r.len);
    return r;
}

__int128 interval_usecs(const Interval* iv) {
    return static_cast<__int128>(iv->time) + static_cast<__int128>(iv->day) * USECS_PER_DAY +
           static_cast<__int128>(iv->month) * DAYS_PER_MONTH * USECS_PER_DAY;
}

std::int64_t interval_ms_arg(FunctionCallInfo fcinfo, int argno, const char* what, bool allow_zero) {
    if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return -1;
    Interval* iv = PG_GETARG_INTERVAL_P(argno);
    const __int128 usecs = interval_usecs(iv);
    if (usecs < 0 || (usecs == 0 && !allow_zero))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must be %s", what, allow_zero ? "zero or positive" : "positive"),
                        errdetail("The interval given is %s.",
                                  DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv))))));
    __int128 ms = (usecs + 999) / 1000;         // round up: never wait or lease less than asked
    if (ms > INT_MAX && allow_zero) return -1;  // a wait of more than 24 days: no limit
    if (ms > INT_MAX)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s is too long", what),
                        errdetail("The limit is %d milliseconds (about 24 days).", INT_MAX)));
    return static_cast<std::int64_t>(ms);
}

}  // namespace fencing::pg
