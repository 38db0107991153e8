// fencing.forget(idle interval): removes the fence state of idle resources.
//
// A resource's row in fencing.fence_state is removed when no session holds or
// awaits the resource and its latest grant is at least `idle` old. Its next
// token still comes from the database-wide counter, so it is greater than
// every token issued before; current() of a forgotten resource is NULL.
//
// Race-free against a concurrent acquisition of the same resource: the row is
// deleted only while this transaction holds the resource's lock tag in
// AccessExclusiveLock (taken without waiting: a resource held or awaited by
// anyone is skipped), and the lock is kept until the transaction ends. An
// acquisition waits for it and then finds the row gone (or, after an abort,
// still there). Crash safety follows from the WAL order: the deletion's commit
// record precedes every record of a later acquisition of the resource (which
// waited for the lock released after that commit), so a durable new row
// implies a durable deletion of the old one.
#include "pg/args.hpp"
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/events.hpp"
#include "pg/lock_tags.hpp"
#include "pg/resource_rows.hpp"

extern "C" {
#include "utils/fmgroids.h"
}

using namespace fencing;
using namespace fencing::pg;

namespace {

// At most this many resources per call (each keeps a lock until the
// transaction ends); a retention job calls again until it returns 0.
constexpr int kMaxPerCall = 1000;

struct Candidate {
    std::int64_t key;
};

Relation open_state(Oid* index) {
    Relation rel = table_open(fence_oids().state, RowExclusiveLock);
    check_fence_state_layout(rel);
    *index = state_index();
    return rel;
}

// Idle seconds from the interval argument (months as 30 days, as everywhere).
std::int64_t idle_seconds(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("idle must not be null"),
                        errhint("Pass how long a resource must have been idle, e.g. '30 days'.")));
    Interval* iv = PG_GETARG_INTERVAL_P(0);
    const __int128 usecs = interval_usecs(iv);
    if (usecs < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("idle must be zero or positive"),
                        errdetail("The interval given is %s.",
                                  DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv))))));
    __int128 secs = (usecs + USECS_PER_SEC - 1) / USECS_PER_SEC;
    return secs > INT64_C(1) << 40 ? INT64_C(1) << 40 : static_cast<std::int64_t>(secs);
}

// Deletes the rows of `key` (SnapshotSelf: the fence state is written
// without transactions) whose latest grant is at or before `cutoff`; returns
// how many. More than one row carries a key only when resource names collide:
// they share the lock, which this transaction holds.
std::int64_t delete_idle_rows(Relation rel, Oid index, std::int64_t key, std::int64_t cutoff) {
    ScanKeyData skey;
    ScanKeyInit(&skey, kAttKey, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(key));
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotSelf, 1, &skey);
    std::int64_t deleted = 0;
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        bool isnull = false;
        const std::int32_t granted_at = DatumGetInt32(heap_getattr(tup, kAttGrantedAt, RelationGetDescr(rel), &isnull));
        if (isnull || granted_at > cutoff) continue;
        simple_heap_delete(rel, &tup->t_self);
        ++deleted;
    }
    systable_endscan(scan);
    return deleted;
}

std::int64_t forget(FunctionCallInfo fcinfo) {
    const std::int64_t idle = idle_seconds(fcinfo);
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot forget fence state during recovery")));
    if (XactReadOnly)
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot forget fence state in a read-only transaction")));
    // granted_at is in seconds since 2000-01-01 UTC, as PostgreSQL's timestamps.
    const std::int64_t now = GetCurrentTimestamp() / USECS_PER_SEC;
    const std::int64_t cutoff = now - idle;

    Oid index = InvalidOid;
    Relation rel = open_state(&index);
    // Candidates first (a plain scan, locking each), then each one deleted.
    Candidate* cand = static_cast<Candidate*>(palloc(sizeof(Candidate) * kMaxPerCall));
    int n = 0;
    {
        SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, SnapshotSelf, 0, nullptr);
        HeapTuple tup;
        TupleDesc d = RelationGetDescr(rel);
        while (n < kMaxPerCall && HeapTupleIsValid(tup = systable_getnext(scan))) {
            bool isnull = false;
            const std::int32_t granted_at = DatumGetInt32(heap_getattr(tup, kAttGrantedAt, d, &isnull));
            if (isnull || granted_at > cutoff) continue;
            const std::int64_t key = DatumGetInt64(heap_getattr(tup, kAttKey, d, &isnull));
            if (isnull) continue;
            const LOCKTAG tag = resource_tag(static_cast<std::uint64_t>(key));
            if (held_by_me(tag, kSessionMode) || held_by_me(tag, kXactMode) || held_by_me(tag, kSharedMode)) continue;
            // Held or awaited by anyone (or no lock memory left): skip it.
            // Kept until the transaction ends, so that no acquisition can
            // record a grant in a row whose deletion is not yet committed.
            if (compat::try_lock_quietly(&tag, AccessExclusiveLock, false) == LOCKACQUIRE_NOT_AVAIL) continue;
            cand[n++].key = key;
        }
        systable_endscan(scan);
    }

    std::int64_t forgotten = 0;
    // Re-read under the lock: a grant may have happened since the scan.
    for (int i = 0; i < n; ++i) forgotten += delete_idle_rows(rel, index, cand[i].key, cutoff);
    table_close(rel, RowExclusiveLock);
    pfree(cand);
    events::forgotten(forgotten);
    return forgotten;
}

}  // namespace

FENCING_FUNCTION(fencing_forget) {
    return guarded("fencing.forget", [&]() -> Datum { PG_RETURN_INT64(forget(fcinfo)); });
}
