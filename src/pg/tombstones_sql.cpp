// The SQL entry points of tombstones: fencing.forget_tombstones, the event
// trigger fencing_sql_drop and fencing.tombstone_key_problem. Storing,
// hashing and reading tombstones is tombstones.cpp's (see tombstones.hpp).
#include "pg/args.hpp"
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/tombstones.hpp"

extern "C" {
#include "commands/event_trigger.h"
}

using namespace fencing::pg;
using namespace fencing::pg::tombstones;

// fencing.forget_tombstones(older_than interval): removes the tombstones
// recorded at least OLDER_THAN ago; returns how many (at most 10,000 per
// call: call again until it returns 0). A tombstone whose key is being
// written at the moment is left for the next call. After its tombstone is
// gone, an INSERT of a deleted key is no longer judged against the deleting
// token.
namespace {

std::int64_t forget(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("older_than must not be null"),
                        errhint("Pass how old a tombstone must be to be removed, e.g. '30 days'.")));
    Interval* iv = PG_GETARG_INTERVAL_P(0);
    const __int128 usecs = interval_usecs(iv);
    if (usecs < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("older_than must be zero or positive"),
                        errdetail("The interval given is %s.",
                                  DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv))))));
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot forget tombstones during recovery")));
    if (XactReadOnly)
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot forget tombstones in a read-only transaction")));
    const __int128 limit = static_cast<__int128>(GetCurrentTimestamp()) - usecs;
    const TimestampTz cutoff =
        limit < static_cast<__int128>(DT_NOBEGIN) + 1 ? DT_NOBEGIN + 1 : static_cast<TimestampTz>(limit);

    return forget_older_than(cutoff);
}

}  // namespace

FENCING_FUNCTION(fencing_forget_tombstones) {
    return guarded("fencing.forget_tombstones", [&]() -> Datum { PG_RETURN_INT64(forget(fcinfo)); });
}

// fencing.sql_drop(): the event trigger fencing_sql_drop. Every table the
// command dropped loses the tombstones kept under it (a hierarchy's root
// those of the whole hierarchy; a partition or child only those from a time
// it owned its protection), in the dropping transaction (a DROP
// rolled back keeps them), so that a table that later gets its OID does not
// meet them. It runs with the rights of the role that runs the DDL, which
// needs nothing of fencing: the module removes them. Nothing to do when
// fencing.tombstones itself is gone (DROP EXTENSION).
FENCING_FUNCTION(fencing_sql_drop) {
    return guarded("fencing.sql_drop", [&]() -> Datum {
        if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.sql_drop() was not called by the event trigger manager")));
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
        // Every DROP of the database comes here: the query is planned once
        // per session.
        static SPIPlanPtr dropped_tables = nullptr;
        if (dropped_tables == nullptr) {
            SPIPlanPtr plan = SPI_prepare(
                "SELECT objid FROM pg_catalog.pg_event_trigger_dropped_objects() "
                "WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass "
                "AND objsubid = 0 AND object_type = 'table'",
                0, nullptr);
            if (plan == nullptr || SPI_keepplan(plan) != 0) elog(ERROR, "could not plan the query of dropped tables");
            dropped_tables = plan;
        }
        if (SPI_execute_plan(dropped_tables, nullptr, nullptr, true, 0) != SPI_OK_SELECT)
            elog(ERROR, "could not read the objects the command dropped");
        const int n = static_cast<int>(SPI_processed);
        Oid* dropped = static_cast<Oid*>(SPI_palloc(sizeof(Oid) * (n + 1)));
        int m = 0;
        for (int i = 0; i < n; ++i) {
            bool isnull = true;
            const Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
            if (!isnull) dropped[m++] = DatumGetObjectId(d);
        }
        SPI_finish();
        if (m == 0) PG_RETURN_VOID();
        const Oid tombstones_rel = fencing_relation(FencingRel::tombstones);
        if (!OidIsValid(tombstones_rel)) PG_RETURN_VOID();
        for (int i = 0; i < m; ++i)
            if (dropped[i] == tombstones_rel) PG_RETURN_VOID();
        for (int i = 0; i < m; ++i) (void)remove_table(dropped[i]);
        PG_RETURN_VOID();
    });
}

// fencing.join_tombstones(tbl regclass): protect() calls it once tbl's check
// is installed; the tombstones the tables it reaches kept under earlier
// owners count under the owner they have now (tombstones::join_owner). For
// the table's owner.
FENCING_FUNCTION(fencing_join_tombstones) {
    return guarded("fencing.join_tombstones", [&]() -> Datum {
        const Oid relid = PG_GETARG_OID(0);
        const char* relname = get_rel_name(relid);
        if (relname == nullptr)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
        if (!compat::is_relation_owner(relid, GetUserId()))
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", relname)));
        if (XactReadOnly)
            ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                            errmsg("cannot move tombstones in a read-only transaction")));
        PG_RETURN_INT64(join_owner(relid, enforce_function()));
    });
}

// fencing.tombstone_key_problem(tbl regclass): why the table's primary key
// cannot carry tombstones, or NULL. For the table's owner (protect() asks).
FENCING_FUNCTION(fencing_tombstone_key_problem) {
    return guarded("fencing.tombstone_key_problem", [&]() -> Datum {
        const Oid relid = PG_GETARG_OID(0);
        const char* relname = get_rel_name(relid);
        if (relname == nullptr)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
        if (!compat::is_relation_owner(relid, GetUserId()))
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", relname)));
        const char* problem = key_problem(relid);
        if (problem == nullptr) PG_RETURN_NULL();
        PG_RETURN_TEXT_P(cstring_to_text(problem));
    });
}
