// fencing.retire() and the check every acquisition makes (retirement.hpp).
#include "pg/retirement.hpp"

#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "utils/inval.h"
}

namespace fencing::pg::retirement {

namespace {

// Per backend: whether fencing.retired holds a row, as of the relation
// generation it was read at (a relcache invalidation of the table, which
// fencing.retire() sends, makes it stale).
bool cached_valid = false;
bool cached_retired = false;
std::uint64_t cached_generation = 0;
char cached_at[64] = "";

bool read_retired() {
    const Oid rel = fencing_relation(FencingRel::retired);
    if (!OidIsValid(rel)) return false;  // still at 1.1, or no extension
    Relation r = table_open(rel, AccessShareLock);
    // Committed rows (and this transaction's own), whatever the snapshot.
    SysScanDesc scan = systable_beginscan(r, InvalidOid, false, SnapshotSelf, 0, nullptr);
    HeapTuple tup = systable_getnext(scan);
    const bool found = HeapTupleIsValid(tup);
    if (found) {
        bool isnull = true;
        const Datum at = heap_getattr(tup, 1, RelationGetDescr(r), &isnull);
        strlcpy(cached_at, isnull ? "?" : timestamptz_to_str(DatumGetTimestampTz(at)), sizeof cached_at);
    }
    systable_endscan(scan);
    table_close(r, AccessShareLock);
    return found;
}

}  // namespace

void refuse_if_retired() {
    const std::uint64_t g = fencing_relation_generation(FencingRel::retired);
    if (!cached_valid || g != cached_generation) {
        cached_retired = read_retired();
        cached_generation = fencing_relation_generation(FencingRel::retired);
        cached_valid = true;
    }
    if (cached_retired)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("database \"%s\" issues no fencing tokens any more", get_database_name(MyDatabaseId)),
                 errdetail("It was retired with fencing.retire() at %s, as the old primary of a cut-over.", cached_at),
                 errhint("Acquire fencing locks in the database that took over.")));
}

}  // namespace fencing::pg::retirement

using namespace fencing;
using namespace fencing::pg;

// fencing.retire(): marks this database retired (one row in
// fencing.retired, which copies and dumps carry) and has every session
// read it again. Idempotent.
FENCING_FUNCTION(fencing_retire) {
    return guarded("fencing.retire", [&]() -> Datum {
        if (RecoveryInProgress())
            ereport(ERROR,
                    (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot retire a database during recovery")));
        const Oid rel = required_fencing_relation(FencingRel::retired);
        // Written on the caller's behalf, as the table's owner (the caller
        // is granted nothing on it; no function is SECURITY DEFINER). An
        // error ends the (sub)transaction, which restores the user.
        Oid saved_user = InvalidOid;
        int saved_context = 0;
        GetUserIdAndSecContext(&saved_user, &saved_context);
        Relation r = table_open(rel, RowExclusiveLock);
        const Oid owner = r->rd_rel->relowner;
        table_close(r, NoLock);
        SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
        if (SPI_execute("INSERT INTO fencing.retired DEFAULT VALUES ON CONFLICT DO NOTHING", false, 0) != SPI_OK_INSERT)
            elog(ERROR, "could not record the retirement");
        SPI_finish();
        SetUserIdAndSecContext(saved_user, saved_context);
        CacheInvalidateRelcacheByRelid(rel);
        PG_RETURN_VOID();
    });
}
