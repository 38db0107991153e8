// The differences between the PostgreSQL releases fencing builds against, in
// one place. Other files call these helpers instead of testing
// PG_VERSION_NUM themselves. Included by pg/pg.hpp, after PostgreSQL's
// headers.
//
// Builds against PostgreSQL 13 to 19 (tested: 15, 17, 18; 19 compiles; see
// docs/install.md), each from a minimum minor release on:
//
//   13.17, 14.14, 15.9, 16.5, 17.1: the first minor releases of their majors
//   with systable_inplace_update_begin/finish/cancel, the locking in-place
//   update of catalog-style rows that resource_rows.cpp uses (added by the
//   November 2024 minor releases; heap_inplace_update, which it replaces,
//   can lose a concurrent update and is gone in 18). A module built against
//   these headers does not load on an older minor release of its major
//   (undefined symbol systable_inplace_update_begin): install the minimum
//   minor release or later. The build refuses older headers.
//
// Nothing here reads private structures (replication/walsender_private.h and
// the like): their layout may change within a major (WalSndCtlData's
// sync_standbys_defined became sync_standbys_status in 13.21, 14.18, 15.13,
// 16.9 and 17.5), and a module is only rebuilt per major.
#pragma once


#if PG_VERSION_NUM < 130000
#error "fencing needs PostgreSQL 13 or later"
#endif

#if (PG_VERSION_NUM < 130017) || (PG_VERSION_NUM >= 140000 && PG_VERSION_NUM < 140014) ||         \
    (PG_VERSION_NUM >= 150000 && PG_VERSION_NUM < 150009) || (PG_VERSION_NUM >= 160000 && PG_VERSION_NUM < 160005) || \
    (PG_VERSION_NUM >= 170000 && PG_VERSION_NUM < 170001)
#error "fencing needs the minor releases 13.17, 14.14, 15.9, 16.5, 17.1 or later of their majors (systable_inplace_update_begin)"
#endif

extern "C" {
#include "replication/walsender_private.h"
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

// Reserves the GUC prefix "fencing." (15 replaced EmitWarningsOnPlaceholders
// by MarkGUCPrefixReserved, which also removes the placeholders).
inline void reserve_guc_prefix(const char* prefix) {
#if PG_VERSION_NUM >= 150000
    MarkGUCPrefixReserved(prefix);
#else
    EmitWarningsOnPlaceholders(prefix);
#endif
}

// Inserts a tuple's entry into a unique index (14 added the indexUnchanged
// hint).
inline void index_insert_unique(Relation irel, Datum* values, bool* nulls, ItemPointer tid, Relation heap,
                                IndexInfo* info) {
#if PG_VERSION_NUM >= 140000
    index_insert(irel, values, nulls, tid, heap, UNIQUE_CHECK_YES, false, info);
#else
    index_insert(irel, values, nulls, tid, heap, UNIQUE_CHECK_YES, info);
#endif
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

// The object type an ALTER TABLE statement names (13 called the field relkind).
inline ObjectType alter_table_object_type(const AlterTableStmt* stmt) {
#if PG_VERSION_NUM >= 140000
    return stmt->objtype;
#else
    return stmt->relkind;
#endif
}

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

// Leases need 14 or later: their expiry is reported with SQLSTATE 57P05
// (ERRCODE_IDLE_SESSION_TIMEOUT), which exists from 14 on.
#if PG_VERSION_NUM >= 140000
inline constexpr bool has_idle_session_timeout = true;
#else
inline constexpr bool has_idle_session_timeout = false;
#endif

// In-place update of a catalog-style row under the buffer lock, as the
// server updates pg_class rows (the minimum minor releases above all have
// it; 18 keeps it).
inline void inplace_update_begin(Relation rel, Oid index, int nkeys, ScanKey key, HeapTuple* old, void** state) {
    systable_inplace_update_begin(rel, index, true, SnapshotSelf, nkeys, key, old, state);
}
inline void inplace_update_finish(void* state, HeapTuple tuple) { systable_inplace_update_finish(state, tuple); }
inline void inplace_update_cancel(void* state) { systable_inplace_update_cancel(state); }

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
// shmem_request_hook from 15 on (15 added it, and refuses requests made
// elsewhere); before 15, from _PG_init itself. request_shared_memory(fn)
// arranges for fn to make its requests at the right moment.
using ShmemRequest = void (*)();
inline ShmemRequest pending_shmem_request = nullptr;
#if PG_VERSION_NUM >= 150000
inline shmem_request_hook_type previous_shmem_request_hook = nullptr;
inline void run_shmem_request() {
    if (previous_shmem_request_hook) previous_shmem_request_hook();
    if (pending_shmem_request) pending_shmem_request();
}
#endif
inline void request_shared_memory(ShmemRequest fn) {
#if PG_VERSION_NUM >= 150000
    pending_shmem_request = fn;
    previous_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = run_shmem_request;
#else
    fn();
#endif
}

// The cache id a syscache invalidation callback receives: an int before 19,
// a SysCacheIdentifier from 19 on.
#if PG_VERSION_NUM >= 190000
using SyscacheId = SysCacheIdentifier;
#else
using SyscacheId = int;
#endif

}  // namespace fencing::pg::compat
