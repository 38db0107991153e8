// The differences between the PostgreSQL releases fencing builds against, in
// one place. Other files call these helpers instead of testing
// PG_VERSION_NUM themselves. Included by pg/pg.hpp, after PostgreSQL's
// headers.
//
// Builds against PostgreSQL 15, 17 and 18 (tested) and 19 (compiles; see
// docs/install.md); 16 takes the branches of 17 and is not tested. Each
// from a minimum minor release on:
//
//   15.9, 16.5, 17.1: the first minor releases of their majors with
//   systable_inplace_update_begin/finish/cancel, the locking in-place update
//   of catalog-style rows that resource_rows.cpp uses (added by the November
//   2024 minor releases; heap_inplace_update, which it replaces, can lose a
//   concurrent update and is gone in 18). A module built against these
//   headers does not load on an older minor release of its major (undefined
//   symbol systable_inplace_update_begin): install the minimum minor release
//   or later. The build refuses older headers.
//
// Private structures are read here only, each with its reason beside it:
// WalSndCtl's lsn[] array (replication/walsender_private.h) and the GUC
// stack (utils/guc_tables.h). Their layout may change within a major
// (WalSndCtlData's sync_standbys_defined became sync_standbys_status in
// 13.21, 14.18, 15.13, 16.9 and 17.5) and a module is only rebuilt per
// major, so nothing reads more of them than the fields named, whose shape
// every supported major kept.
#pragma once

#if PG_VERSION_NUM < 150000
#error "fencing needs PostgreSQL 15 or later"
#endif

#if (PG_VERSION_NUM < 150009) || (PG_VERSION_NUM >= 160000 && PG_VERSION_NUM < 160005) || \
    (PG_VERSION_NUM >= 170000 && PG_VERSION_NUM < 170001)
#error "fencing needs the minor releases 15.9, 16.5, 17.1 or later of their majors (systable_inplace_update_begin)"
#endif

extern "C" {
#include "replication/walsender_private.h"
#include "utils/guc_tables.h"
#include "utils/backend_status.h"
#include "utils/fmgroids.h"
}

namespace fencing::pg::compat {

// The SQL NULL / "no tuple" Datum. (PointerGetDatum(nullptr) does not
// compile in C++ from 19 on, where PointerGetDatum is an inline function.)
inline constexpr Datum null_datum() { return (Datum)0; }

// Whether this backend holds the lock TAG in exactly MODE (17 added the
// "or stronger" argument).
inline bool lock_held_by_me(const LOCKTAG* tag, LOCKMODE mode) {
#if PG_VERSION_NUM >= 170000
    return LockHeldByMe(tag, mode, false);
#else
    return LockHeldByMe(tag, mode);
#endif
}

// The OID of the relation's primary key index, or InvalidOid (18 added the
// deferrable_ok argument; a deferrable primary key is not reported, as
// before 18).
inline Oid primary_key_index(Relation rel) {
#if PG_VERSION_NUM >= 180000
    return RelationGetPrimaryKeyIndex(rel, false);
#else
    return RelationGetPrimaryKeyIndex(rel);
#endif
}

// Whether ROLE owns the relation RELID (16 replaced the per-class ownership
// checks with object_ownercheck).
inline bool is_relation_owner(Oid relid, Oid role) {
#if PG_VERSION_NUM >= 160000
    return object_ownercheck(RelationRelationId, relid, role);
#else
    return pg_class_ownercheck(relid, role);
#endif
}

// Reserves the GUC prefix "fencing." (and removes its placeholders).
inline void reserve_guc_prefix(const char* prefix) { MarkGUCPrefixReserved(prefix); }

// Where a relation's storage lives: its tablespace, database and file
// number (16 renamed RelFileNode, rd_node, to RelFileLocator, rd_locator).
struct RelFile {
    Oid tablespace;
    Oid database;
    Oid relfile;
};
inline RelFile rel_file(Relation rel) {
#if PG_VERSION_NUM >= 160000
    return RelFile{rel->rd_locator.spcOid, rel->rd_locator.dbOid, rel->rd_locator.relNumber};
#else
    return RelFile{rel->rd_node.spcNode, rel->rd_node.dbNode, rel->rd_node.relNode};
#endif
}

// Whether the current transaction gave the relation new storage (TRUNCATE,
// CLUSTER, REINDEX, SET TABLESPACE, ALTER SEQUENCE ... RESTART), so that its
// rollback brings the earlier storage back. The relcache's record of it,
// which RelationNeedsWAL() reads too (16 renamed rd_firstRelfilenodeSubid
// to rd_firstRelfilelocatorSubid). A relation created in the transaction
// has none of its own to bring back.
inline bool storage_replaced_in_xact(Relation rel) {
#if PG_VERSION_NUM >= 160000
    return rel->rd_firstRelfilelocatorSubid != InvalidSubTransactionId;
#else
    return rel->rd_firstRelfilenodeSubid != InvalidSubTransactionId;
#endif
}

// The timeline WAL is inserted on (15 replaced the variable ThisTimeLineID
// with this function; every release supported has it).
inline TimeLineID wal_insertion_timeline() { return GetWALInsertionTimeLine(); }

// Inserts a tuple's entry into a unique index.
inline void index_insert_unique(Relation irel, Datum* values, bool* nulls, ItemPointer tid, Relation heap,
                                IndexInfo* info) {
    index_insert(irel, values, nulls, tid, heap, UNIQUE_CHECK_YES, false, info);
}

// The same insertion with the check that reports a possible duplicate (a
// live entry, or one a transaction in progress writes) instead of raising
// or waiting: false then, with the new entry inserted all the same.
inline bool index_insert_unless_duplicate(Relation irel, Datum* values, bool* nulls, ItemPointer tid, Relation heap,
                                          IndexInfo* info) {
    return index_insert(irel, values, nulls, tid, heap, UNIQUE_CHECK_PARTIAL, false, info);
}

// Replaces a tuple in a transactional update, as the server updates catalog
// rows (16 added the report of which indexes need new entries; the caller
// inserts them itself).
inline void simple_update(Relation rel, ItemPointer otid, HeapTuple tup) {
#if PG_VERSION_NUM >= 160000
    TU_UpdateIndexes update_indexes;
    simple_heap_update(rel, otid, tup, &update_indexes);
#else
    simple_heap_update(rel, otid, tup);
#endif
}

// Deletes a tuple unless another transaction is changing it (no wait):
// whether it was deleted (19 folded heap_delete's changingPart into an
// options word).
inline bool delete_unless_busy(Relation rel, ItemPointer tid) {
    TM_FailureData tmfd;
#if PG_VERSION_NUM >= 190000
    return heap_delete(rel, tid, GetCurrentCommandId(true), 0, InvalidSnapshot, false, &tmfd) == TM_Ok;
#else
    return heap_delete(rel, tid, GetCurrentCommandId(true), InvalidSnapshot, false, &tmfd, false) == TM_Ok;
#endif
}

// The object type an ALTER TABLE statement names.
inline ObjectType alter_table_object_type(const AlterTableStmt* stmt) { return stmt->objtype; }

// An index scan of HEAP through INDEX with SNAPSHOT and NKEYS keys (18 added
// the instrumentation argument, 19 the flags).
inline IndexScanDesc index_scan_begin(Relation heap, Relation index, Snapshot snapshot, int nkeys) {
#if PG_VERSION_NUM >= 190000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0, 0);
#elif PG_VERSION_NUM >= 180000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
    return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

// In-place update of a catalog-style row under the buffer lock, as the
// server updates pg_class rows (the minimum minor releases above all have
// it; 18 keeps it).
inline void inplace_update_begin(Relation rel, Oid index, int nkeys, ScanKey key, HeapTuple* old, void** state) {
    systable_inplace_update_begin(rel, index, true, SnapshotSelf, nkeys, key, old, state);
}
inline void inplace_update_finish(void* state, HeapTuple tuple) { systable_inplace_update_finish(state, tuple); }
inline void inplace_update_cancel(void* state) { systable_inplace_update_cancel(state); }

// The same update of a row whose place is known (resource_rows.cpp's
// hints), without the index scan: inplace_lock() takes the tuple's
// in-place lock and the buffer's content lock once no transaction in
// progress updates or deletes the row; false when it had to wait for one
// (look the row up again), RELEASE(ARG) having been called before the wait
// (the caller's pin of the buffer must not be held while waiting).
// inplace_update_and_unlock() overwrites the row and lets both locks go,
// inplace_unlock() only lets them go.
inline bool inplace_lock(Relation rel, HeapTuple tuple, Buffer buffer, void (*release)(void*), void* arg) {
    return heap_inplace_lock(rel, tuple, buffer, release, arg);
}
inline void inplace_update_and_unlock(Relation rel, HeapTuple old, HeapTuple tuple, Buffer buffer) {
    heap_inplace_update_and_unlock(rel, old, tuple, buffer);
}
inline void inplace_unlock(Relation rel, HeapTuple old, Buffer buffer) { heap_inplace_unlock(rel, old, buffer); }

// A lock-manager lock without waiting and without an error for a full lock
// table: LOCKACQUIRE_NOT_AVAIL instead (18 added the logLockFailure argument).
inline LockAcquireResult try_lock_quietly(const LOCKTAG* tag, LOCKMODE mode, bool session) {
#if PG_VERSION_NUM >= 180000
    return LockAcquireExtended(tag, mode, session, true, false, nullptr, false);
#else
    return LockAcquireExtended(tag, mode, session, true, false, nullptr);
#endif
}

// Whether synchronous standbys are configured for this backend
// (synchronous_standby_names, as parsed by its assign hook; public API).
inline bool sync_standbys_configured() {
    return max_wal_senders > 0 && SyncRepConfig != nullptr && SyncRepStandbyNames != nullptr &&
           SyncRepStandbyNames[0] != '\0';
}

// The WAL position up to which waits for the synchronous standbys' flush have
// been released: what SyncRepWaitForLSN() itself compares with. It lives in
// WalSndCtl (replication/walsender_private.h): no public function reads it,
// and a position computed from the standbys connected now would be wrong
// right after the last one went away. The lsn[] array has kept its shape
// through every major supported; the struct's other fields are not read.
inline XLogRecPtr sync_standbys_flushed() {
    if (WalSndCtl == nullptr) return InvalidXLogRecPtr;
    LWLockAcquire(SyncRepLock, LW_SHARED);
    const XLogRecPtr flushed = WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH];
    LWLockRelease(SyncRepLock);
    return flushed;
}

// Shared memory and LWLocks of a preloaded library are requested from the
// shmem_request_hook (which refuses requests made elsewhere).
// request_shared_memory(fn) arranges for fn to make its requests there (each
// module of the library calls it once).
using ShmemRequest = void (*)();
inline ShmemRequest pending_shmem_requests[4] = {};
inline int pending_shmem_request_count = 0;
inline shmem_request_hook_type previous_shmem_request_hook = nullptr;
inline void run_shmem_request() {
    if (previous_shmem_request_hook) previous_shmem_request_hook();
    for (int i = 0; i < pending_shmem_request_count; ++i) pending_shmem_requests[i]();
}
inline void request_shared_memory(ShmemRequest fn) {
    if (pending_shmem_request_count == 0) {
        previous_shmem_request_hook = shmem_request_hook;
        shmem_request_hook = run_shmem_request;
    }
    pending_shmem_requests[pending_shmem_request_count++] = fn;
}

// This backend's index into ProcGlobal's PGPROC array (17 renamed it
// MyProcNumber).
inline int my_proc_number() {
#if PG_VERSION_NUM >= 170000
    return MyProcNumber;
#else
    return MyProc != nullptr ? MyProc->pgprocno : -1;
#endif
}

// The backends' activity as pg_stat_activity reads it: a snapshot taken at
// the first call after clear_backend_status(); entries 1 .. count (16
// renamed the accessor).
inline void clear_backend_status() { pgstat_clear_backend_activity_snapshot(); }
inline int backend_status_count() { return pgstat_fetch_stat_numbackends(); }
inline PgBackendStatus* backend_status_at(int i) {
#if PG_VERSION_NUM >= 160000
    LocalPgBackendStatus* l = pgstat_get_local_beentry_by_index(i);
#else
    LocalPgBackendStatus* l = pgstat_fetch_stat_local_beentry(i);
#endif
    return l != nullptr ? &l->backendStatus : nullptr;
}

// Whether a setting's current value was set for the current transaction
// only: SET LOCAL or set_config(..., true), or a function's SET clause for
// the duration of the call. PostgreSQL keeps a stack entry for every
// variable changed in the transaction; a value without one, or whose entry
// says it was a plain SET (GUC_SET), is a session value. No public function
// tells the two apart, so this reads the setting's record in
// utils/guc_tables.h (its stack and state, unchanged in 15 to 19; the
// regress suite's 21_enforce checks SET against SET LOCAL on every major).
// guc_record() looks the record up once (16 made find_option public).
using GucRecord = config_generic*;
inline GucRecord guc_record(const char* name) {
#if PG_VERSION_NUM >= 160000
    return find_option(name, false, true, ERROR);
#else  // 15
    config_generic** vars = get_guc_variables();
    const int n = GetNumConfigOptions();
    for (int i = 0; i < n; ++i)
        if (strcmp(vars[i]->name, name) == 0) return vars[i];
    return nullptr;
#endif
}
inline bool guc_set_for_transaction(GucRecord rec) noexcept {
    if (rec == nullptr) return false;
    const GucStack* st = rec->stack;
    if (st == nullptr) return false;
    return st->state == GUC_LOCAL || st->state == GUC_SET_LOCAL || st->state == GUC_SAVE;
}

// A column's cached offset, length and by-value flag as the tuple routines
// read them (attcacheoff, attlen, attbyval; what fetchatt() takes): in the
// descriptor's pg_attribute entry before 18, in its CompactAttribute from
// 18 on (where pg_attribute has no attcacheoff).
#if PG_VERSION_NUM >= 180000
inline const CompactAttribute* attr_layout(TupleDesc desc, int i) noexcept { return TupleDescCompactAttr(desc, i); }
#else
inline const FormData_pg_attribute* attr_layout(TupleDesc desc, int i) noexcept { return TupleDescAttr(desc, i); }
#endif

// The extended hash function of timestamptz: timestamp's before 18, its own
// (timestamptz_hash_extended, computing the same) from 18 on.
#if PG_VERSION_NUM >= 180000
constexpr Oid kTimestamptzHashExtended = F_TIMESTAMPTZ_HASH_EXTENDED;
#else
constexpr Oid kTimestamptzHashExtended = F_TIMESTAMP_HASH_EXTENDED;
#endif

// The cache id a syscache invalidation callback receives: an int before 19,
// a SysCacheIdentifier from 19 on.
#if PG_VERSION_NUM >= 190000
using SyscacheId = SysCacheIdentifier;
#else
using SyscacheId = int;
#endif

}  // namespace fencing::pg::compat
