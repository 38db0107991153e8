// SQL type fencing.token: text and binary I/O and the integer casts. The
// comparison operators reuse int8's internal functions (same representation).
#include "pg/bridge.hpp"

#include "core/token.hpp"

using namespace fencing;

namespace {

[[noreturn]] void report_bad_token(const char* text, core::ParseStatus status) {
    if (status == core::ParseStatus::syntax)
        ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                        errmsg("invalid input syntax for type fencing.token: \"%s\"", text),
                        errhint("A fence token is an integer from 1 to 9223372036854775807.")));
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("value \"%s\" is out of range for type fencing.token", text),
                    errhint("A fence token is an integer from 1 to 9223372036854775807.")));
    pg_unreachable();
}

[[noreturn]] void report_out_of_range(std::int64_t v) {
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("value %lld is out of range for type fencing.token", static_cast<long long>(v)),
                    errhint("A fence token is an integer from 1 to 9223372036854775807.")));
    pg_unreachable();
}

}  // namespace

FENCING_FUNCTION(fencing_token_in) {
    return pg::guarded("fencing.token_in", [&]() -> Datum {
    const char* text = PG_GETARG_CSTRING(0);
    core::ParseResult r = core::parse_token(text, strlen(text));
    if (r.status != core::ParseStatus::ok) {
#if FENCING_HAS_SOFT_ERRORS
        // Soft errors for pg_input_is_valid() and friends.
        if (fcinfo->context && IsA(fcinfo->context, ErrorSaveContext)) {
            if (r.status == core::ParseStatus::syntax)
                ereturn(fcinfo->context, (Datum)0,
                        (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
                         errmsg("invalid input syntax for type fencing.token: \"%s\"", text)));
            ereturn(fcinfo->context, (Datum)0,
                    (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                     errmsg("value \"%s\" is out of range for type fencing.token", text)));
        }
#endif
        report_bad_token(text, r.status);
    }
    PG_RETURN_INT64(r.value);
    });
}

FENCING_FUNCTION(fencing_token_out) {
    return pg::guarded("fencing.token_out", [&]() -> Datum {
        char* buf = static_cast<char*>(palloc(core::kTokenTextMax));
        core::format_token(PG_GETARG_INT64(0), buf);
        PG_RETURN_CSTRING(buf);
    });
}

FENCING_FUNCTION(fencing_token_recv) {
    return pg::guarded("fencing.token_recv", [&]() -> Datum {
        StringInfo msg = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
        std::int64_t v = pq_getmsgint64(msg);
        if (core::token_from_int64(v).status != core::ParseStatus::ok) report_out_of_range(v);
        PG_RETURN_INT64(v);
    });
}

FENCING_FUNCTION(fencing_token_from_int4) {
    return pg::guarded("fencing.token_from_int4", [&]() -> Datum {
        std::int64_t v = PG_GETARG_INT32(0);
        if (core::token_from_int64(v).status != core::ParseStatus::ok) report_out_of_range(v);
        PG_RETURN_INT64(v);
    });
}

FENCING_FUNCTION(fencing_token_from_int8) {
    return pg::guarded("fencing.token_from_int8", [&]() -> Datum {
        std::int64_t v = PG_GETARG_INT64(0);
        if (core::token_from_int64(v).status != core::ParseStatus::ok) report_out_of_range(v);
        PG_RETURN_INT64(v);
    });
}

FENCING_FUNCTION(fencing_version) {
    return pg::guarded("fencing.version", [&]() -> Datum { PG_RETURN_TEXT_P(cstring_to_text(FENCING_VERSION)); });
}
