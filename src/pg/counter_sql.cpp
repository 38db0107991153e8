// The token counter's SQL entry points: fencing.advance_past_table (for
// fencing.protect) and fencing.advance_past (for restores and superusers),
// which move the counter past tokens stored elsewhere. The counter itself is
// counter_page.cpp's (through fence_state.hpp's advance_counter_past).
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/fence_state.hpp"

using namespace fencing;
using namespace fencing::pg;

namespace {

bool owns_table(Oid relid) { return compat::is_relation_owner(relid, GetUserId()); }

// The clock bound (core::floor_limit), for the messages: no floor moves the
// counter past it on a protected table's or a non-superuser's behalf.
[[noreturn]] void report_beyond_bound(const char* relname, std::int64_t top, std::int64_t bound) {
    ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
                    errmsg("table \"%s\" holds fence token %lld, beyond %lld", relname, static_cast<long long>(top),
                           static_cast<long long>(bound)),
                    errdetail("fencing moves the token counter past a protected table's tokens only up to the clock "
                              "bound, the wall clock in microseconds since 1970 plus 4 s, so that a restored copy of "
                              "the database never issues a token again and no table can exhaust the counter every "
                              "resource shares."),
                    errhint("Protect a table whose tokens are at most the clock in microseconds plus 4 s, or have "
                            "a superuser move the counter past them first with fencing.advance_past, which takes "
                            "the counter out of the clock bound.")));
    pg_unreachable();
}

}  // namespace

// Moves the token counter past the largest token a table protected by fencing
// holds (the column its fencing trigger names), for fencing.protect. Only the
// table's owner may, and only within the clock bound, superuser or not: the
// floor comes from the table, never from the caller.
FENCING_FUNCTION(fencing_advance_past_table) {
    return guarded("fencing.advance_past_table", [&]() -> Datum {
        if (PG_ARGISNULL(0))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("table must not be null")));
        const Oid relid = PG_GETARG_OID(0);
        const char* relname = get_rel_name(relid);
        if (relname == nullptr)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
        if (!owns_table(relid))
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", relname)));
        // The token column named by the table's own fencing trigger.
        Relation rel = relation_open(relid, AccessShareLock);
        char* column = nullptr;
        if (const TriggerDesc* td = rel->trigdesc)
            for (int i = 0; i < td->numtriggers; ++i)
                if (strcmp(td->triggers[i].tgname, "~fencing_enforce") == 0 && td->triggers[i].tgnargs >= 1)
                    column = pstrdup(td->triggers[i].tgargs[0]);
        const char* nsp = get_namespace_name(RelationGetNamespace(rel));
        relation_close(rel, AccessShareLock);
        if (column == nullptr)
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("table \"%s\" is not protected by fencing", relname),
                            errhint("Use fencing.protect(table).")));
        const char* query = psprintf("SELECT pg_catalog.max(%s::pg_catalog.int8) FROM %s", quote_identifier(column),
                                     quote_qualified_identifier(nsp, relname));
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
        if (SPI_execute(query, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
            elog(ERROR, "could not read %s", relname);
        bool isnull = true;
        Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        const std::int64_t top = isnull ? 0 : DatumGetInt64(d);
        SPI_finish();
        if (isnull) PG_RETURN_NULL();
        const Advanced a = advance_counter_past(top, false);
        if (!a.moved) report_beyond_bound(relname, top, a.bound);
        PG_RETURN_INT64(a.token);
    });
}

// Moves the token counter past the tokens stored in a table being protected,
// so that tokens issued from now on are newer than any it holds (after a
// restore into a fresh counter, or a DROP/CREATE EXTENSION). Only the table's
// owner may do it, and only forwards.
FENCING_FUNCTION(fencing_advance_past) {
    return guarded("fencing.advance_past", [&]() -> Datum {
        Oid relid = PG_GETARG_OID(0);
        // The restore trigger of fencing.fence_state calls it for the rows
        // being loaded: a role that may insert them (pg_database_owner
        // restoring its database) may move the counter past them.
        const bool loading_state = get_rel_name(relid) != nullptr && strcmp(get_rel_name(relid), "fence_state") == 0 &&
                                   get_rel_namespace(relid) == fencing_namespace() &&
                                   pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
        if (!loading_state && !owns_table(relid))
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                            errmsg("must be owner of table %s", get_rel_name(relid))));
        // A restore's load returns nothing to its caller; a floor the caller
        // is told of must outlast a rollback.
        if (!loading_state) refuse_if_counter_replaced_here();
        // The counter is shared by every resource of the database: only a
        // superuser may move it past the clock bound (EXECUTE is not granted
        // to PUBLIC anyway; a role it is granted to, pg_database_owner for
        // restores, is held to the bound).
        const std::int64_t floor = PG_GETARG_INT64(1);
        const Advanced a = advance_counter_past(floor, superuser());
        if (!a.moved)
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                            errmsg("only a superuser may move the fence token counter past %lld",
                                   static_cast<long long>(a.bound)),
                            errdetail("The floor given is %lld. Other roles move the counter at most to the clock "
                                      "bound, the wall clock in microseconds since 1970 plus 4 s, so that a restored "
                                      "copy of the database never issues a token again.",
                                      static_cast<long long>(floor))));
        PG_RETURN_INT64(a.token);
    });
}
