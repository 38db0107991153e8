// Tombstones of fencing.tombstones: see tombstones.hpp and docs/design.md.
//
// The race to close: an INSERT of key K is checked (its BEFORE trigger reads
// K's tombstone) before its row reaches the primary key index, where it
// waits for a transaction that deletes K. A DELETE of K that records its
// tombstone in between would be missed: the INSERT goes through once the
// DELETE commits, with an older token. So each key has a lock (an
// advisory-type lock tag, lock_tags.hpp):
//
//  * A write that (re)creates K (INSERT, the INSERT half of a row moved to
//    another partition, an UPDATE that changes the key to K) takes K's lock
//    in ShareLock and keeps it until its row is in the index (the call
//    site's next row, or the end of the statement), and reads K's tombstone
//    as committed or in progress: one in progress is waited for, without the
//    lock, and read again.
//  * A write that removes K (a fenced DELETE, an UPDATE that changes the key
//    away from K) takes K's lock in ExclusiveLock, records the tombstone and
//    lets the lock go.
//
// So a tombstone is either recorded before the INSERT's lock (the INSERT
// reads it, waiting for its transaction if need be), or only once the
// INSERT's row is in the index, where the DELETE could only have found K's
// old row still live: the INSERT failed with a unique violation (or became
// the UPSERT's UPDATE, judged against that row).
//
// (1.2) A DELETE statement's rows beyond its 64th record their tombstones
// in runs (tombstone_runs.hpp) under the table's run lock instead, held in
// RowExclusiveLock until its transaction ends: the writes that (re)create a
// key take the run lock in ShareLock before K's lock, and keep both until
// their row is in the index, so the same holds for those rows.
#include "pg/tombstones.hpp"
#include "pg/index_entries.hpp"
#include "pg/tombstone_runs.hpp"
#include "pg/tombstone_summary.hpp"

#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/inheritance.hpp"
#include "pg/lock_tags.hpp"
#include "pg/rejections.hpp"
#include "pg/row_attr.hpp"

extern "C" {
#include "access/hash.h"
#include "access/stratnum.h"
#include "catalog/index.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_amop.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/defrem.h"
#include "common/hashfn.h"
#include "port/pg_bswap.h"
#include "utils/catcache.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
#include "utils/fmgroids.h"
#include "utils/typcache.h"
}

namespace fencing::pg::tombstones {

namespace {

// The table's columns (catalog_ids.hpp).
constexpr int kAttTbl = tombstone_att::kTbl, kAttHash = tombstone_att::kHash, kAttToken = tombstone_att::kToken,
              kAttDeletedAt = tombstone_att::kDeletedAt, kNatts = tombstone_att::kNatts;
constexpr std::uint64_t kSeed = UINT64_C(0x66656e63696e6721);  // "fencing!"

// The hash functions of 64-bit values, which fold them into 32 bits before
// hashing (hash_int8() says why that matters).
bool folds_int8(Oid fn) {
    return fn == F_HASHINT8EXTENDED || fn == F_TIMESTAMP_HASH_EXTENDED || fn == compat::kTimestamptzHashExtended ||
           fn == F_TIME_HASH_EXTENDED;
}

// fencing.tombstones as this transaction uses it: the table and its index
// opened once (RowExclusiveLock), the dirty snapshot and the slot of its
// lookups. It belongs to the transaction, not to a statement: allocated in
// TopTransactionContext, its relation references owned by
// TopTransactionResourceOwner. Closed before the transaction commits or
// prepares; an abort releases it with everything else.
struct Handle {
    Relation heap;
    Relation index;
    IndexInfo* index_info;
    TupleTableSlot* slot;
    SnapshotData dirty;
    // fencing.tombstone_runs, opened at the first lookup that reads it.
    bool runs_opened;
    bool has_runs;
    tombstone_runs::Reader runs;
};
Handle* current = nullptr;
bool xact_callback_registered = false;

void close_handle() {
    Handle* h = current;
    current = nullptr;
    ResourceOwner saved = CurrentResourceOwner;
    CurrentResourceOwner = TopTransactionResourceOwner;
    if (h->has_runs) tombstone_runs::close_reader(&h->runs);
    ExecDropSingleTupleTableSlot(h->slot);
    index_close(h->index, NoLock);
    table_close(h->heap, NoLock);
    CurrentResourceOwner = saved;
}

void xact_callback(XactEvent event, void*) {
    if (current == nullptr) return;
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            close_handle();
            break;
        default:
            // Ended otherwise (an abort): released with the transaction.
            current = nullptr;
            break;
    }
}

}  // namespace

void close_before_utility() {
    if (current != nullptr) close_handle();
}

std::uint64_t written = 0;
std::uint64_t writes() { return written; }
void note_write() { ++written; }

namespace {

Handle* handle() {
    if (current != nullptr) return current;
    if (!xact_callback_registered) {
        RegisterXactCallback(xact_callback, nullptr);
        xact_callback_registered = true;
    }
    const Oid tombstones_rel = required_fencing_relation(FencingRel::tombstones);
    MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
    ResourceOwner saved = CurrentResourceOwner;
    CurrentResourceOwner = TopTransactionResourceOwner;
    Handle* h = static_cast<Handle*>(palloc0(sizeof(Handle)));
    PG_TRY();
    {
        h->heap = table_open(tombstones_rel, RowExclusiveLock);
        check_tombstones_layout(h->heap);
        // Only now (see state_index() in catalog_ids.hpp).
        h->index = index_open(required_fencing_relation(FencingRel::tombstones_pkey), RowExclusiveLock);
        h->index_info = BuildIndexInfo(h->index);
        InitDirtySnapshot(h->dirty);
        h->slot = table_slot_create(h->heap, nullptr);
    }
    PG_FINALLY();
    {
        CurrentResourceOwner = saved;
        MemoryContextSwitchTo(old);
    }
    PG_END_TRY();
    current = h;
    return h;
}

// The extended (64-bit, seeded) hash function of a hash operator family that
// has EQOP as its equality, so that values equal by EQOP hash equally.
Oid hash_extended_for(Oid eqop) {
    Oid proc = InvalidOid;
    CatCList* list = SearchSysCacheList1(AMOPOPID, ObjectIdGetDatum(eqop));
    for (int i = 0; i < list->n_members && !OidIsValid(proc); ++i) {
        const Form_pg_amop a = reinterpret_cast<Form_pg_amop>(GETSTRUCT(&list->members[i]->tuple));
        if (a->amopmethod == HASH_AM_OID && a->amopstrategy == HTEqualStrategyNumber)
            proc = get_opfamily_proc(a->amopfamily, a->amoplefttype, a->amoprighttype, HASHEXTENDED_PROC);
    }
    ReleaseSysCacheList(list);
    return proc;
}

// Whether PROC hashes a value by its parts: arrays (elements), composite
// types (attributes), ranges (bounds) and multiranges (their ranges' bounds).
// Each part is hashed by the extended hash function the type cache gives its
// type, and a part whose type has none fails the hash (42883) at the first
// value, not when PROC is looked up.
bool hashes_by_parts(Oid proc) {
    return proc == F_HASH_ARRAY_EXTENDED || proc == F_HASH_RECORD_EXTENDED || proc == F_HASH_RANGE_EXTENDED ||
           proc == F_HASH_MULTIRANGE_EXTENDED;
}

// Whether every value of TYPE (a domain: of its base type) hashes with the
// hash-by-parts functions. The type cache leaves a type's extended hash
// function unset when a part's type, at any depth (through arrays,
// composites, ranges, multiranges and domains), has none: the very entries
// those functions read.
bool parts_hash(Oid type) {
    return OidIsValid(lookup_type_cache(getBaseType(type), TYPECACHE_HASH_EXTENDED_PROC)->hash_extended_proc);
}

// The innermost part type within TYPE (or TYPE's base type itself) that
// keeps it from hashing, for the message; InvalidOid when TYPE hashes.
Oid unhashable_part(Oid type) {
    check_stack_depth();
    const Oid base = getBaseType(type);
    if (parts_hash(base)) return InvalidOid;
    Oid part = InvalidOid;
    if (const Oid elem = get_element_type(base); OidIsValid(elem)) {
        part = unhashable_part(elem);
    } else if (const Oid sub = get_range_subtype(base); OidIsValid(sub)) {
        part = unhashable_part(sub);
    } else if (const Oid range = get_multirange_range(base); OidIsValid(range)) {
        part = unhashable_part(range);
    } else if (get_typtype(base) == TYPTYPE_COMPOSITE) {
        TupleDesc d = lookup_rowtype_tupdesc(base, -1);
        for (int i = 0; i < d->natts && !OidIsValid(part); ++i)
            if (!TupleDescAttr(d, i)->attisdropped) part = unhashable_part(TupleDescAttr(d, i)->atttypid);
        ReleaseTupleDesc(d);
    }
    return OidIsValid(part) ? part : base;
}

// (1.2) Whether START depends, through pg_depend at any depth, on an object
// in a temporary schema (*FOUND: that object). PostgreSQL drops a session's
// temporary objects at its end (ON COMMIT DROP tables at commit) with
// CASCADE and without event triggers, and the drop follows these very rows
// back: to a key column's type, an attribute of it, a collation, a type's
// support function. Each object is visited once; a column (a sub-object)
// leads only through its own rows. Past kMaxDependencies objects it answers
// true with no object, as a key that cannot be judged.
constexpr int kMaxDependencies = 4096;

// Adds NEXT to the N objects of SEEN unless it is there; false when full.
bool add_dependency(ObjectAddress* seen, int* n, const ObjectAddress& next) {
    for (int j = 0; j < *n; ++j)
        if (seen[j].classId == next.classId && seen[j].objectId == next.objectId &&
            seen[j].objectSubId == next.objectSubId)
            return true;
    if (*n == kMaxDependencies) return false;
    seen[(*n)++] = next;
    return true;
}

bool temporary_dependency(const ObjectAddress& start, ObjectAddress* found) {
    ObjectAddress* seen = static_cast<ObjectAddress*>(palloc(sizeof(ObjectAddress) * kMaxDependencies));
    int n = 0;
    seen[n++] = start;
    found->classId = InvalidOid;
    Relation dep = table_open(DependRelationId, AccessShareLock);
    bool temporary = false;
    for (int i = 0; i < n && !temporary; ++i) {
        const ObjectAddress node = seen[i];
        ScanKeyData key[3];
        ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(node.classId));
        ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(node.objectId));
        ScanKeyInit(&key[2], Anum_pg_depend_objsubid, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(node.objectSubId));
        SysScanDesc scan =
            systable_beginscan(dep, DependDependerIndexId, true, nullptr, node.objectSubId != 0 ? 3 : 2, key);
        HeapTuple tup;
        while (!temporary && HeapTupleIsValid(tup = systable_getnext(scan))) {
            const Form_pg_depend d = reinterpret_cast<Form_pg_depend>(GETSTRUCT(tup));
            if (d->refclassid == NamespaceRelationId && isAnyTempNamespace(d->refobjid)) {
                *found = node;
                temporary = true;
                break;
            }
            if (!add_dependency(seen, &n, ObjectAddress{d->refclassid, d->refobjid, d->refobjsubid})) temporary = true;
        }
        systable_endscan(scan);
        // An object's internal parts go with it, and what they depend on
        // reaches it: a composite type's relation, whose attributes name
        // their types and collations.
        ScanKeyData ref[3];
        ScanKeyInit(&ref[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(node.classId));
        ScanKeyInit(&ref[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(node.objectId));
        ScanKeyInit(&ref[2], Anum_pg_depend_refobjsubid, BTEqualStrategyNumber, F_INT4EQ,
                    Int32GetDatum(node.objectSubId));
        scan = systable_beginscan(dep, DependReferenceIndexId, true, nullptr, 3, ref);
        while (!temporary && HeapTupleIsValid(tup = systable_getnext(scan))) {
            const Form_pg_depend d = reinterpret_cast<Form_pg_depend>(GETSTRUCT(tup));
            if (d->deptype == DEPENDENCY_INTERNAL &&
                !add_dependency(seen, &n, ObjectAddress{d->classid, d->objid, d->objsubid}))
                temporary = true;
        }
        systable_endscan(scan);
    }
    table_close(dep, AccessShareLock);
    pfree(seen);
    return temporary;
}

// (1.2) The extended hash function of a type within TYPE (itself, a
// domain's base type, array elements, range subtypes, multiranges' ranges,
// composite attributes, at any depth) that depends on a temporary object
// (temporary_dependency: a function in a temporary schema, or one whose
// body reads a temporary table): its drop would take the function, and the
// key would hash otherwise. No dependency of the key's index leads to it.
// InvalidOid when none.
Oid temporary_hash_function(Oid type) {
    check_stack_depth();
    const Oid base = getBaseType(type);
    const Oid proc = lookup_type_cache(base, TYPECACHE_HASH_EXTENDED_PROC)->hash_extended_proc;
    ObjectAddress temp;
    if (OidIsValid(proc) && temporary_dependency(ObjectAddress{ProcedureRelationId, proc, 0}, &temp)) return proc;
    if (const Oid elem = get_element_type(base); OidIsValid(elem)) return temporary_hash_function(elem);
    if (const Oid sub = get_range_subtype(base); OidIsValid(sub)) return temporary_hash_function(sub);
    if (const Oid range = get_multirange_range(base); OidIsValid(range)) return temporary_hash_function(range);
    Oid found = InvalidOid;
    if (get_typtype(base) == TYPTYPE_COMPOSITE) {
        TupleDesc d = lookup_rowtype_tupdesc(base, -1);
        for (int i = 0; i < d->natts && !OidIsValid(found); ++i)
            if (!TupleDescAttr(d, i)->attisdropped) found = temporary_hash_function(TupleDescAttr(d, i)->atttypid);
        ReleaseTupleDesc(d);
    }
    return found;
}

// The lock of key HASH of relation RELID.
LOCKTAG key_tag(Oid relid, std::uint64_t hash) {
    const std::uint64_t k = hash_combine64(hash, static_cast<std::uint64_t>(relid) * UINT64_C(0x9E3779B97F4A7C15));
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(k >> 32), static_cast<uint32>(k), kTombstoneTagKind);
    return tag;
}

struct Found {
    bool found;
    std::int64_t token;
    ItemPointerData tid;
    TimestampTz deleted_at;
    TransactionId writer;  // a transaction in progress that wrote it (then nothing else is valid)
    bool this_command;     // written by the command in progress (which cannot delete it)
};

// The tombstone of (RELID, HASH), committed or written by this transaction.
// The scan is begun and ended here, in the caller's memory: an index scan
// kept across rows would keep state allocated in memory that is reset
// after every row.
// SKIP, when given, is a row of this command's left out (one just written).
Found lookup(Handle* h, Oid relid, std::uint64_t hash, const ItemPointerData* skip = nullptr) {
    Found f{false, 0, {}, 0, InvalidTransactionId, false};
    ScanKeyData skey[2];
    ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(static_cast<std::int64_t>(hash)));
    IndexScanDesc scan = compat::index_scan_begin(h->heap, h->index, &h->dirty, 2);
    index_rescan(scan, skey, 2, nullptr, 0);
    while (index_getnext_slot(scan, ForwardScanDirection, h->slot)) {
        const TransactionId writer = TransactionIdIsValid(h->dirty.xmin) ? h->dirty.xmin : h->dirty.xmax;
        if (TransactionIdIsValid(writer)) {
            f.writer = writer;
            break;
        }
        if (skip != nullptr && ItemPointerEquals(&h->slot->tts_tid, const_cast<ItemPointer>(skip))) continue;
        bool isnull = false;
        const std::int64_t token = DatumGetInt64(slot_getattr(h->slot, kAttToken, &isnull));
        if (!f.found || token > f.token) {
            f.found = true;
            f.token = token;
            f.tid = h->slot->tts_tid;
            f.deleted_at = DatumGetTimestampTz(slot_getattr(h->slot, kAttDeletedAt, &isnull));
            const HeapTupleHeader t = ExecFetchSlotHeapTuple(h->slot, false, nullptr)->t_data;
            f.this_command = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(t)) &&
                             HeapTupleHeaderGetCmin(t) >= GetCurrentCommandId(false);
        }
    }
    ExecClearTuple(h->slot);
    index_endscan(scan);
    return f;
}

void wait_for(TransactionId xid) { XactLockTableWait(xid, nullptr, nullptr, XLTW_None); }

// fencing.tombstone_runs for H's lookups (nullptr: the database has none),
// opened for the transaction as H itself.
const tombstone_runs::Reader* runs_of(Handle* h) {
    if (!h->runs_opened) {
        MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
        ResourceOwner saved = CurrentResourceOwner;
        CurrentResourceOwner = TopTransactionResourceOwner;
        PG_TRY();
        { h->has_runs = tombstone_runs::open_reader(&h->runs); }
        PG_FINALLY();
        {
            CurrentResourceOwner = saved;
            MemoryContextSwitchTo(old);
        }
        PG_END_TRY();
        h->runs_opened = true;
    }
    return h->has_runs ? &h->runs : nullptr;
}

// The tombstone of (RELID, HASH) once no transaction in progress writes it,
// with TAG, its key's lock, held in ExclusiveLock (let go while waiting).
Found lookup_settled(Handle* h, Oid relid, std::uint64_t hash, const LOCKTAG& tag) {
    for (;;) {
        const Found f = lookup(h, relid, hash);
        if (!TransactionIdIsValid(f.writer)) return f;
        LockRelease(&tag, ExclusiveLock, false);
        wait_for(f.writer);
        (void)LockAcquire(&tag, ExclusiveLock, false, false);
    }
}

ItemPointerData insert_row(Handle* h, Oid relid, std::uint64_t hash, std::int64_t token, TimestampTz at,
                           bool* duplicate);

// Writes the tombstone (RELID, HASH) with TOKEN, recorded at AT, replacing
// the key's tombstone (whose newer token and later time it keeps); with
// TAG, the key's lock, held in ExclusiveLock.
void put(Handle* h, Oid relid, std::uint64_t hash, std::int64_t token, TimestampTz at, const LOCKTAG& tag) {
    Found f = lookup_settled(h, relid, hash, tag);
    if (f.found && f.this_command) {
        // The key deleted twice in one command (a DELETE through an
        // inheritance parent of a key live in the parent and a child): the
        // tombstone cannot be replaced within the command that wrote it.
        if (token <= f.token) return;
        rejections::key_deleted_twice(relid, f.token, token);
    }
    if (f.found) {
        if (f.token > token) token = f.token;
        if (f.deleted_at > at) at = f.deleted_at;
        simple_heap_delete(h->heap, &f.tid);
    }
    (void)insert_row(h, relid, hash, token, at, nullptr);
}

// Writes the tombstone row (RELID, HASH) with TOKEN, recorded at AT, and
// returns where. With DUPLICATE, the index entry goes in with a check that
// sets *DUPLICATE instead of raising when the key has another tombstone
// (committed, or being written); without, a duplicate raises (23505).
ItemPointerData insert_row(Handle* h, Oid relid, std::uint64_t hash, std::int64_t token, TimestampTz at,
                           bool* duplicate) {
    Datum values[kNatts];
    bool nulls[kNatts] = {false, false, false, false};
    values[kAttTbl - 1] = ObjectIdGetDatum(relid);
    values[kAttHash - 1] = Int64GetDatum(static_cast<std::int64_t>(hash));
    values[kAttToken - 1] = Int64GetDatum(token);
    values[kAttDeletedAt - 1] = TimestampTzGetDatum(at);
    HeapTuple tup = heap_form_tuple(RelationGetDescr(h->heap), values, nulls);
    simple_heap_insert(h->heap, tup);
    note_write();
    Datum ivalues[2] = {values[kAttTbl - 1], values[kAttHash - 1]};
    bool inulls[2] = {false, false};
    if (duplicate == nullptr)
        compat::index_insert_unique(h->index, ivalues, inulls, &tup->t_self, h->heap, h->index_info);
    else
        *duplicate =
            !compat::index_insert_unless_duplicate(h->index, ivalues, inulls, &tup->t_self, h->heap, h->index_info);
    if (!insert_other_index_entries(h->heap, RelationGetRelid(h->index), tup, duplicate != nullptr)) *duplicate = true;
    const ItemPointerData tid = tup->t_self;
    heap_freetuple(tup);
    return tid;
}

// A key deleted again (the common case: a key never deleted before, where
// record() wrote its tombstone without looking first). OURS, the row just
// written with TOKEN at AT, is taken out (a command later: a command cannot
// delete what it wrote) and the key goes through put(), which keeps the
// newer token of the two; with TAG, the key's lock, held in ExclusiveLock.
void settle_duplicate(Handle* h, Oid relid, std::uint64_t hash, std::int64_t token, TimestampTz at, const LOCKTAG& tag,
                      const ItemPointerData& ours) {
    const Found f = lookup(h, relid, hash, &ours);
    CommandCounterIncrement();
    simple_heap_delete(h->heap, const_cast<ItemPointer>(&ours));
    if (f.found && f.this_command) {
        // Deleted twice in one command: as put() does.
        if (token <= f.token) return;
        rejections::key_deleted_twice(relid, f.token, token);
    }
    put(h, relid, hash, token, at, tag);
}

// Up to MAX hashes of the tombstones kept under RELID, through the dirty
// snapshot (which no longer returns those this transaction removed).
int hashes_of(Handle* h, Oid relid, std::uint64_t* hashes, int max) {
    int n = 0;
    ScanKeyData skey;
    ScanKeyInit(&skey, kAttTbl, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    IndexScanDesc scan = compat::index_scan_begin(h->heap, h->index, &h->dirty, 1);
    index_rescan(scan, &skey, 1, nullptr, 0);
    while (n < max && index_getnext_slot(scan, ForwardScanDirection, h->slot)) {
        bool isnull = false;
        hashes[n++] = static_cast<std::uint64_t>(DatumGetInt64(slot_getattr(h->slot, kAttHash, &isnull)));
    }
    ExecClearTuple(h->slot);
    index_endscan(scan);
    return n;
}

// Whether RELID carries a trigger on CHECK_FN.
bool carries_check(Relation tgrel, Oid relid, Oid check_fn) {
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true, nullptr, 1, &key);
    bool found = false;
    HeapTuple tup;
    while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
        found = reinterpret_cast<Form_pg_trigger>(GETSTRUCT(tup))->tgfoid == check_fn;
    systable_endscan(scan);
    return found;
}

void end_of_statement(void* arg) { release(static_cast<Site*>(arg)); }

void watch(Site* site, MemoryContext cxt) {
    if (site->callback_set) return;
    site->callback.func = end_of_statement;
    site->callback.arg = site;
    MemoryContextRegisterResetCallback(cxt, &site->callback);
    site->callback_set = true;
}

void hold(Site* site, const LOCKTAG& tag, LOCKMODE mode) {
    if (site->nlocks == 2) release(site);  // not expected: a row takes the run lock and one key lock
    site->tag[site->nlocks] = tag;
    site->mode[site->nlocks] = mode;
    site->lock_owner[site->nlocks] = CurrentResourceOwner;
    ++site->nlocks;
}

}  // namespace

namespace {

// How a table's primary key is hashed, without the function lookups (those
// are per call site): what the per-backend cache keeps.
struct KeyPlan {
    bool usable;
    const char* problem;  // in CacheMemoryContext when cached
    int natts;
    AttrNumber att[INDEX_MAX_KEYS];
    Oid coll[INDEX_MAX_KEYS];
    Oid proc[INDEX_MAX_KEYS];
};

// Fills PLAN for REL; *PK gets its primary key index (InvalidOid without one).
void plan_key(KeyPlan* plan, Relation rel, Oid* pk_out) {
    plan->usable = false;
    plan->problem = nullptr;
    plan->natts = 0;
    const Oid pk = compat::primary_key_index(rel);
    *pk_out = pk;
    if (!OidIsValid(pk)) {
        plan->problem = "It has no primary key (a deferrable one does not count).";
        return;
    }
    Relation idx = index_open(pk, AccessShareLock);
    const int n = idx->rd_index->indnkeyatts;
    TupleDesc desc = RelationGetDescr(rel);
    for (int k = 0; k < n && plan->problem == nullptr; ++k) {
        const AttrNumber att = idx->rd_index->indkey.values[k];
        if (att <= 0) {
            plan->problem = "Its primary key has an expression column.";
            break;
        }
        if (TupleDescAttr(desc, att - 1)->attgenerated != '\0') {
            plan->problem = psprintf(
                "Its primary key column \"%s\" is a generated column, which BEFORE triggers see "
                "before it is computed.",
                NameStr(TupleDescAttr(desc, att - 1)->attname));
            break;
        }
        const Oid type = idx->rd_opcintype[k];
        const Oid eqop = get_opfamily_member(idx->rd_opfamily[k], type, type, BTEqualStrategyNumber);
        const Oid hproc = OidIsValid(eqop) ? hash_extended_for(eqop) : InvalidOid;
        if (!OidIsValid(hproc)) {
            Form_pg_attribute a = TupleDescAttr(desc, att - 1);
            plan->problem =
                psprintf("Its primary key column \"%s\" is of type %s, which has no extended (64-bit) hash function.",
                         NameStr(a->attname), format_type_be(a->atttypid));
            break;
        }
        if (hashes_by_parts(hproc) && !parts_hash(TupleDescAttr(desc, att - 1)->atttypid)) {
            Form_pg_attribute a = TupleDescAttr(desc, att - 1);
            const Oid part = unhashable_part(a->atttypid);
            if (OidIsValid(part) && part != getBaseType(a->atttypid))
                plan->problem = psprintf(
                    "Its primary key column \"%s\" is of type %s, which has no extended (64-bit) hash function: "
                    "a value of it is hashed by its parts, and a part of type %s has none.",
                    NameStr(a->attname), format_type_be(a->atttypid), format_type_be(part));
            else
                plan->problem = psprintf(
                    "Its primary key column \"%s\" is of type %s, which has no extended (64-bit) hash function.",
                    NameStr(a->attname), format_type_be(a->atttypid));
            break;
        }
        {
            // (1.2) Nor may its hash function, at any depth of its type.
            Form_pg_attribute a = TupleDescAttr(desc, att - 1);
            ObjectAddress temp;
            const Oid temp_fn = temporary_dependency(ObjectAddress{ProcedureRelationId, hproc, 0}, &temp)
                                    ? hproc
                                    : temporary_hash_function(a->atttypid);
            if (OidIsValid(temp_fn)) {
                plan->problem = psprintf(
                    "Its primary key column \"%s\" is hashed with function %s, which depends on a temporary object "
                    "that PostgreSQL drops at the end of its session without event triggers.",
                    NameStr(a->attname), format_procedure(temp_fn));
                break;
            }
        }
        plan->att[k] = att;
        plan->coll[k] = idx->rd_indcollation[k];
        plan->proc[k] = hproc;
    }
    index_close(idx, AccessShareLock);
    if (plan->problem != nullptr) return;
    // (1.2) Nor on anything else in a temporary schema, at any depth: the
    // key's index reaches its columns, their types (and their attributes'),
    // collations and operator classes, and what those depend on.
    ObjectAddress temp;
    if (temporary_dependency(ObjectAddress{RelationRelationId, pk, 0}, &temp)) {
        plan->problem =
            OidIsValid(temp.classId)
                ? psprintf(
                      "Its primary key depends on %s, in a temporary schema, which PostgreSQL drops at the end "
                      "of its session (or transaction) without event triggers.",
                      getObjectDescription(&temp, false))
                : "Its primary key depends on more objects than can be checked for temporary ones.";
        return;
    }
    plan->natts = n;
    plan->usable = true;
}

// What hashing a value of TYPE depends on beyond its hash function: the
// types and collations of its parts, at any depth (a composite value hashes
// by its attributes, an array by its elements, a range by its bounds).
void type_signature(StringInfo out, Oid type) {
    check_stack_depth();
    const Oid base = getBaseType(type);
    // With the extended hash function of the type's default hash operator
    // class (from the catalogs: the type cache may not have seen a change).
    const Oid opclass = GetDefaultOpClass(base, HASH_AM_OID);
    const Oid family = OidIsValid(opclass) ? get_opclass_family(opclass) : InvalidOid;
    appendStringInfo(out, "%u#%u", base,
                     OidIsValid(family) ? get_opfamily_proc(family, base, base, HASHEXTENDED_PROC) : InvalidOid);
    if (const Oid elem = get_element_type(base); OidIsValid(elem)) {
        appendStringInfoChar(out, '[');
        type_signature(out, elem);
        appendStringInfoChar(out, ']');
    } else if (const Oid sub = get_range_subtype(base); OidIsValid(sub)) {
        appendStringInfo(out, "<%u:", get_range_collation(base));
        type_signature(out, sub);
        appendStringInfoChar(out, '>');
    } else if (const Oid range = get_multirange_range(base); OidIsValid(range)) {
        appendStringInfoChar(out, '{');
        type_signature(out, range);
        appendStringInfoChar(out, '}');
    } else if (get_typtype(base) == TYPTYPE_COMPOSITE) {
        TupleDesc d = lookup_rowtype_tupdesc(base, -1);
        appendStringInfoChar(out, '(');
        for (int i = 0; i < d->natts; ++i) {
            const Form_pg_attribute a = TupleDescAttr(d, i);
            if (a->attisdropped) continue;
            appendStringInfo(out, "%u:", a->attcollation);
            type_signature(out, a->atttypid);
            appendStringInfoChar(out, ',');
        }
        appendStringInfoChar(out, ')');
        ReleaseTupleDesc(d);
    }
}

// The attribute numbers of OWNER's primary key columns in their order (from
// pg_constraint, without a lock on OWNER), or NIL without a primary key.
List* primary_key_attnums(Oid owner) {
    List* attnums = NIL;
    Relation conrel = table_open(ConstraintRelationId, AccessShareLock);
    ScanKeyData skey;
    ScanKeyInit(&skey, Anum_pg_constraint_conrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(owner));
    SysScanDesc scan = systable_beginscan(conrel, ConstraintRelidTypidNameIndexId, true, nullptr, 1, &skey);
    HeapTuple tup;
    while (attnums == NIL && HeapTupleIsValid(tup = systable_getnext(scan))) {
        if (reinterpret_cast<Form_pg_constraint>(GETSTRUCT(tup))->contype != CONSTRAINT_PRIMARY) continue;
        bool isnull = true;
        const Datum d = heap_getattr(tup, Anum_pg_constraint_conkey, RelationGetDescr(conrel), &isnull);
        if (isnull) continue;
        ArrayType* arr = DatumGetArrayTypeP(d);
        const int n = ARR_DIMS(arr)[0];
        const int16* keys = reinterpret_cast<const int16*>(ARR_DATA_PTR(arr));
        for (int k = 0; k < n; ++k) attnums = lappend_int(attnums, keys[k]);
    }
    systable_endscan(scan);
    table_close(conrel, AccessShareLock);
    return attnums;
}

// A key column as its values hash: name, collation, the type part by part
// (a primary key's operator class is its type's default one).
void column_signature(StringInfo sig, StringInfo names, const char* name, Oid coll, Oid type) {
    appendStringInfo(sig, "%s/%u/", quote_identifier(name), coll);
    type_signature(sig, type);
    appendStringInfoChar(sig, ';');
    appendStringInfo(names, "%s%s", names->len > 0 ? ", " : "", quote_identifier(name));
}

// Why REL, planned as PLAN, cannot keep its tombstones under OWNER (a
// sentence), or nullptr. A key is hashed by its primary key's columns in
// order, so every table of a hierarchy needs the owner's primary key: the
// same columns, in the same order, of the same types and collations. A
// table with another primary key (another order, other or more columns)
// would hash its keys otherwise: a key deleted elsewhere in the hierarchy
// would not meet its INSERT into REL, another key might, and its own
// tombstones, kept under OWNER, would not follow a change of its primary
// key made while it is out of the hierarchy. An owner without a primary
// key gives none.
const char* other_key_problem(Relation rel, const KeyPlan& plan, Oid owner) {
    if (!plan.usable || owner == RelationGetRelid(rel)) return nullptr;
    const char* owner_name = get_rel_name(owner);
    if (owner_name == nullptr) owner_name = "?";
    List* theirs = primary_key_attnums(owner);
    if (theirs == NIL)
        return psprintf(
            "\"%s\", which keeps the tombstones of its hierarchy, has no primary key, so that the keys "
            "of the hierarchy's tables would not be compared column by column in one order.",
            owner_name);
    StringInfoData mine, mine_names, own, own_names;
    initStringInfo(&mine);
    initStringInfo(&mine_names);
    initStringInfo(&own);
    initStringInfo(&own_names);
    TupleDesc desc = RelationGetDescr(rel);
    for (int k = 0; k < plan.natts; ++k) {
        const Form_pg_attribute a = TupleDescAttr(desc, plan.att[k] - 1);
        column_signature(&mine, &mine_names, NameStr(a->attname), a->attcollation, a->atttypid);
    }
    ListCell* lc;
    foreach (lc, theirs) {
        const AttrNumber att = static_cast<AttrNumber>(lfirst_int(lc));
        Oid type = InvalidOid, coll = InvalidOid;
        int32 typmod = -1;
        get_atttypetypmodcoll(owner, att, &type, &typmod, &coll);
        column_signature(&own, &own_names, get_attname(owner, att, false), coll, type);
    }
    if (strcmp(mine.data, own.data) == 0) return nullptr;
    return psprintf(
        "Its primary key (%s) is not the primary key of \"%s\" (%s), which keeps the tombstones of its hierarchy: "
        "with other columns, another order, other types or collations its keys would be hashed otherwise, and "
        "would not meet the keys deleted elsewhere in the hierarchy.",
        mine_names.data, owner_name, own_names.data);
}

void key_from_plan(Key* key, const KeyPlan& plan, MemoryContext cxt) {
    key->built = true;
    key->usable = plan.usable;
    key->problem = plan.problem;
    key->other_owner = InvalidOid;
    key->natts = plan.usable ? plan.natts : 0;
    for (int k = 0; k < key->natts; ++k) {
        key->att[k] = plan.att[k];
        key->coll[k] = plan.coll[k];
        fmgr_info_cxt(plan.proc[k], &key->hash[k], cxt);
    }
    key->raw = 0;
    if (key->natts == 1 && key->hash[0].fn_oid == F_HASHINT4EXTENDED) key->raw = kRawInt4;
    if (key->natts == 1 && key->hash[0].fn_oid == F_HASHINT8EXTENDED) key->raw = kRawInt8;
    key->legacy_differs = false;
    for (int k = 0; k < key->natts; ++k)
        if (folds_int8(key->hash[k].fn_oid) || key->hash[k].fn_oid == F_HASH_NUMERIC_EXTENDED)
            key->legacy_differs = true;
}

// The relations whose catalog rows owner_of() read (the table and every
// parent it looked at), to know which relcache invalidations reach it.
constexpr int kMaxChain = 16;
struct Chain {
    int n = 0;
    bool overflow = false;
    Oid rel[kMaxChain];
    void add(Oid r) {
        for (int i = 0; i < n; ++i)
            if (rel[i] == r) return;
        if (n < kMaxChain)
            rel[n++] = r;
        else
            overflow = true;
    }
};

Oid owner_walk(Oid relid, Oid check_fn, Chain* chain, Oid* other);

// The per-backend cache of each protected table's key plan and tombstone
// owner. An entry is rebuilt after a relcache invalidation of the table,
// of its primary key index or of any ancestor owner_of() looked at (DDL
// that changes a primary key, a trigger, pg_inherits: ATTACH, DETACH,
// INHERIT, NO INHERIT, protect and unprotect all invalidate one of them),
// and after any change of functions, operator classes or types (the hash
// functions). Entries are never removed, only marked stale: nothing points
// into them across a call.
struct PlanEntry {
    Oid relid;  // hash key
    Oid check_fn;
    bool valid;
    KeyPlan plan;
    Oid owner;
    Oid other_owner;
    Chain chain;
};
HTAB* plans = nullptr;
std::uint64_t invalidations = 0;

void plans_relcache_callback(Datum, Oid relid) {
    ++invalidations;
    if (plans == nullptr) return;
    HASH_SEQ_STATUS status;
    hash_seq_init(&status, plans);
    while (PlanEntry* e = static_cast<PlanEntry*>(hash_seq_search(&status))) {
        if (!e->valid) continue;
        if (relid == InvalidOid) {
            e->valid = false;
            continue;
        }
        for (int i = 0; i < e->chain.n; ++i)
            if (e->chain.rel[i] == relid) {
                e->valid = false;
                break;
            }
    }
}

void plans_syscache_callback(Datum, compat::SyscacheId, uint32) { plans_relcache_callback(0, InvalidOid); }

PlanEntry* plan_entry(Relation rel, Oid check_fn) {
    if (plans == nullptr) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof ctl);
        ctl.keysize = sizeof(Oid);
        ctl.entrysize = sizeof(PlanEntry);
        ctl.hcxt = CacheMemoryContext;
        HTAB* h = hash_create("fencing tombstone key plans", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
        CacheRegisterRelcacheCallback(plans_relcache_callback, (Datum)0);
        CacheRegisterSyscacheCallback(PROCOID, plans_syscache_callback, (Datum)0);
        CacheRegisterSyscacheCallback(AMOPOPID, plans_syscache_callback, (Datum)0);
        CacheRegisterSyscacheCallback(AMPROCNUM, plans_syscache_callback, (Datum)0);
        CacheRegisterSyscacheCallback(TYPEOID, plans_syscache_callback, (Datum)0);
        plans = h;
    }
    const Oid relid = RelationGetRelid(rel);
    bool found = false;
    PlanEntry* e = static_cast<PlanEntry*>(hash_search(plans, &relid, HASH_ENTER, &found));
    if (!found) {
        e->valid = false;
        e->plan.problem = nullptr;
    }
    if (e->valid && e->check_fn == check_fn) return e;
    // Built from the catalogs as they are now; an invalidation that arrives
    // meanwhile (the catalog reads accept them) leaves the entry stale, to
    // be built again by the next statement.
    const std::uint64_t before = invalidations;
    KeyPlan plan;
    Oid pk = InvalidOid;
    plan_key(&plan, rel, &pk);
    Chain chain;
    Oid other = InvalidOid;
    const Oid owner = owner_walk(relid, check_fn, &chain, &other);
    if (OidIsValid(pk)) chain.add(pk);
    // (The owner's primary key changing invalidates the owner, in CHAIN.)
    if (const char* problem = other_key_problem(rel, plan, owner)) {
        plan.usable = false;
        plan.natts = 0;
        plan.problem = problem;
    }
    // (Dynahash entries stay where they are, and callbacks only mark them.)
    const char* old_problem = e->plan.problem;
    e->plan = plan;
    e->plan.problem = plan.problem != nullptr ? MemoryContextStrdup(CacheMemoryContext, plan.problem) : nullptr;
    if (old_problem != nullptr) pfree(const_cast<char*>(old_problem));
    e->check_fn = check_fn;
    e->owner = owner;
    e->other_owner = other;
    e->chain = chain;
    e->valid = !chain.overflow && invalidations == before;
    return e;
}

}  // namespace

Oid prepare(Key* key, Relation rel, Oid check_fn, MemoryContext cxt) {
    const PlanEntry* e = plan_entry(rel, check_fn);
    key_from_plan(key, e->plan, cxt);
    if (key->problem != nullptr) key->problem = MemoryContextStrdup(cxt, key->problem);
    key->other_owner = e->other_owner;
    return e->owner;
}

Oid owner_of(Oid relid, Oid check_fn) { return owner_walk(relid, check_fn, nullptr, nullptr); }

Oid other_owner_of(Oid relid, Oid check_fn) {
    Oid other = InvalidOid;
    (void)owner_walk(relid, check_fn, nullptr, &other);
    return other;
}

namespace {

// The parents of RELID that carry the check, in inhseqno order (each added
// to CHAIN, checked or not).
List* checked_parents(Relation tgrel, Oid relid, Oid check_fn, Chain* chain) {
    List* parents = inheritance_parents(relid);
    List* out = NIL;
    ListCell* lc;
    foreach (lc, parents) {
        const Oid parent = lfirst_oid(lc);
        if (chain != nullptr) chain->add(parent);
        if (carries_check(tgrel, parent, check_fn)) out = lappend_oid(out, parent);
    }
    list_free(parents);
    return out;
}

Oid owner_walk(Oid relid, Oid check_fn, Chain* chain, Oid* other) {
    if (chain != nullptr) chain->add(relid);
    Relation tgrel = table_open(TriggerRelationId, AccessShareLock);
    // The owner: the first parent (in inhseqno order) that carries the
    // check, level by level (a partition has one parent).
    Oid owner = relid;
    for (;;) {
        List* parents = checked_parents(tgrel, owner, check_fn, chain);
        const Oid next = parents != NIL ? linitial_oid(parents) : InvalidOid;
        list_free(parents);
        if (!OidIsValid(next)) break;
        owner = next;  // pg_inherits has no cycles
        CHECK_FOR_INTERRUPTS();
    }
    // Another top-most table reached through any other parent that carries
    // the check (an inheritance child of several parents): a table whose
    // writes no single hierarchy's tombstones can judge.
    if (other != nullptr) {
        *other = InvalidOid;
        List* todo = list_make1_oid(relid);
        List* seen = NIL;
        while (todo != NIL && !OidIsValid(*other)) {
            const Oid t = llast_oid(todo);
            todo = list_delete_last(todo);
            if (list_member_oid(seen, t)) continue;
            seen = lappend_oid(seen, t);
            List* parents = checked_parents(tgrel, t, check_fn, chain);
            if (parents == NIL && t != owner) *other = t;
            todo = list_concat(todo, parents);
            CHECK_FOR_INTERRUPTS();
        }
        list_free(todo);
        list_free(seen);
    }
    table_close(tgrel, AccessShareLock);
    return owner;
}

}  // namespace

const char* key_problem(Oid relid) {
    Relation rel = relation_open(relid, AccessShareLock);
    KeyPlan plan;
    Oid pk = InvalidOid;
    plan_key(&plan, rel, &pk);
    relation_close(rel, AccessShareLock);
    return plan.problem;
}

char* key_fingerprint(Oid relid) {
    Relation rel = relation_open(relid, AccessShareLock);
    KeyPlan plan;
    Oid pk = InvalidOid;
    plan_key(&plan, rel, &pk);
    StringInfoData s;
    initStringInfo(&s);
    TupleDesc desc = RelationGetDescr(rel);
    for (int k = 0; plan.usable && k < plan.natts; ++k) {
        const Form_pg_attribute a = TupleDescAttr(desc, plan.att[k] - 1);
        appendStringInfo(&s, "%s/%u/%u/", NameStr(a->attname), plan.coll[k], plan.proc[k]);
        type_signature(&s, a->atttypid);
        appendStringInfoChar(&s, ';');
    }
    relation_close(rel, AccessShareLock);
    return s.data;
}

Oid next_table_with_tombstones(Oid after) {
    // Opened and closed here, not kept for the transaction (handle()): the
    // command about to run may drop fencing.tombstones (DROP SCHEMA ...
    // CASCADE), which a reference kept open would refuse.
    Relation heap = table_open(required_fencing_relation(FencingRel::tombstones), AccessShareLock);
    Relation index = index_open(required_fencing_relation(FencingRel::tombstones_pkey), AccessShareLock);
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    TupleTableSlot* slot = table_slot_create(heap, nullptr);
    ScanKeyData skey;
    ScanKeyInit(&skey, kAttTbl, BTGreaterStrategyNumber, F_OIDGT, ObjectIdGetDatum(after));
    IndexScanDesc scan = compat::index_scan_begin(heap, index, &dirty, 1);
    index_rescan(scan, &skey, 1, nullptr, 0);
    Oid next = InvalidOid;
    if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
        bool isnull = false;
        next = DatumGetObjectId(slot_getattr(slot, kAttTbl, &isnull));
    }
    index_endscan(scan);
    ExecDropSingleTupleTableSlot(slot);
    index_close(index, AccessShareLock);
    table_close(heap, AccessShareLock);
    const Oid run_next = tombstone_runs::next_after(after);
    if (OidIsValid(run_next) && (!OidIsValid(next) || run_next < next)) next = run_next;
    return next;
}

bool has_tombstones(Oid relid) {
    Handle* h = handle();
    for (;;) {
        ScanKeyData skey;
        ScanKeyInit(&skey, kAttTbl, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
        IndexScanDesc scan = compat::index_scan_begin(h->heap, h->index, &h->dirty, 1);
        index_rescan(scan, &skey, 1, nullptr, 0);
        bool found = false;
        TransactionId writer = InvalidTransactionId;
        while (!found && index_getnext_slot(scan, ForwardScanDirection, h->slot)) {
            writer = TransactionIdIsValid(h->dirty.xmin) ? h->dirty.xmin : h->dirty.xmax;
            found = !TransactionIdIsValid(writer);
            if (TransactionIdIsValid(writer)) break;
        }
        ExecClearTuple(h->slot);
        index_endscan(scan);
        if (found) return true;
        if (!TransactionIdIsValid(writer) && tombstone_runs::any(relid, &writer)) return true;
        if (!TransactionIdIsValid(writer)) return false;
        // One being written (or removed) by a transaction in progress:
        // whether it stays is known once that transaction ends.
        wait_for(writer);
    }
}

void refuse_other_key(Oid relid, Oid owner) {
    Relation rel = relation_open(relid, AccessShareLock);
    KeyPlan plan;
    Oid pk = InvalidOid;
    plan_key(&plan, rel, &pk);
    const char* problem = other_key_problem(rel, plan, owner);
    relation_close(rel, AccessShareLock);
    if (problem != nullptr) rejections::other_key(relid, owner, problem);
}

bool same_key_bytes(const Key* key, Relation rel, HeapTuple a, HeapTuple b) {
    TupleDesc desc = RelationGetDescr(rel);
    for (int k = 0; k < key->natts; ++k) {
        const Form_pg_attribute att = TupleDescAttr(desc, key->att[k] - 1);
        bool anull = false, bnull = false;
        const Datum av = heap_getattr(a, key->att[k], desc, &anull);
        const Datum bv = heap_getattr(b, key->att[k], desc, &bnull);
        if (anull != bnull) return false;
        if (!anull && !datumIsEqual(av, bv, att->attbyval, att->attlen)) return false;
    }
    return true;
}

namespace {

// What hashint4extended returns for X, computed here without the function
// call (a bulk DELETE hashes every row).
std::uint64_t hash_int4(std::int32_t x) { return DatumGetUInt64(hash_uint32_extended(static_cast<uint32>(x), kSeed)); }
// (1.2) A 64-bit value by all its bits: its 8 bytes in network order (so
// that the hash is the same on every platform; what hashmacaddr8extended
// returns for those bytes). PostgreSQL's hashint8extended (and the
// timestamp and time hash functions, which call it) folds the two halves
// into 32 bits first: 1 and 4294967296 hash alike, as do any two values
// whose halves XOR alike, and they shared one tombstone.
std::uint64_t hash_int8(std::int64_t x) {
    const std::uint64_t bytes = pg_hton64(static_cast<std::uint64_t>(x));
    return DatumGetUInt64(hash_bytes_extended(reinterpret_cast<const unsigned char*>(&bytes), sizeof bytes, kSeed));
}
// What hashint8extended returns for X: the hash of tombstones recorded
// before 1.2 (legacy_hash_key()).
std::uint64_t hash_int8_folded(std::int64_t x) {
    std::uint32_t lo = static_cast<std::uint32_t>(x);
    const std::uint32_t hi = static_cast<std::uint32_t>(static_cast<std::uint64_t>(x) >> 32);
    lo ^= x >= 0 ? hi : ~hi;
    return DatumGetUInt64(hash_uint32_extended(lo, kSeed));
}

// (1.2) Which of NUMERIC's kinds V is, for its hash: 0 zero or positive,
// 1 negative, 2 NaN, 3 infinity, 4 minus infinity.
std::uint64_t numeric_kind(Datum v) {
    static Numeric zero = nullptr;
    if (zero == nullptr) {
        MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
        zero = int64_to_numeric(0);
        MemoryContextSwitchTo(old);
    }
    Numeric n = DatumGetNumeric(v);
    if (numeric_is_nan(n)) return 2;
    const bool negative = DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(n), NumericGetDatum(zero)));
    if (numeric_is_inf(n)) return negative ? 4 : 3;
    return negative ? 1 : 0;
}

// The extended hash of V under KEY's column K: int4 by hash_int4, 64-bit
// values by hash_int8, a numeric by its function and its kind; other
// types through their function. LEGACY: as before 1.2, by the functions
// alone (hashint8extended's fold included).
std::uint64_t hash_value(const Key* key, int k, Datum v, bool legacy = false) {
    const Oid fn = key->hash[k].fn_oid;
    if (fn == F_HASHINT4EXTENDED) return hash_int4(DatumGetInt32(v));
    if (fn == F_HASHINT8EXTENDED && legacy) return hash_int8_folded(DatumGetInt64(v));
    if (folds_int8(fn) && !legacy) return hash_int8(DatumGetInt64(v));
    const std::uint64_t h =
        DatumGetUInt64(FunctionCall2Coll(const_cast<FmgrInfo*>(&key->hash[k]), key->coll[k], v, UInt64GetDatum(kSeed)));
    if (fn == F_HASH_NUMERIC_EXTENDED && !legacy) return hash_combine64(h, numeric_kind(v));
    return h;
}

}  // namespace

// hash_key() of a row whose key, of one int4 or int8 column (RAW), is VALUE.
std::uint64_t hash_raw(int raw, std::int64_t value) {
    return hash_combine64(0, raw == kRawInt4 ? hash_int4(static_cast<std::int32_t>(value)) : hash_int8(value));
}

std::uint64_t hash_key(const Key* key, Relation rel, HeapTuple tup) {
    TupleDesc desc = RelationGetDescr(rel);
    std::uint64_t h = 0;
    for (int k = 0; k < key->natts; ++k) {
        bool isnull = false;
        const Datum v = row_attr(tup, desc, key->att[k], &isnull);
        h = hash_combine64(h, isnull ? UINT64_C(0x6e756c6c) : hash_value(key, k, v));
    }
    return h;
}

std::uint64_t legacy_hash_key(const Key* key, Relation rel, HeapTuple tup) {
    TupleDesc desc = RelationGetDescr(rel);
    std::uint64_t h = 0;
    for (int k = 0; k < key->natts; ++k) {
        bool isnull = false;
        const Datum v = row_attr(tup, desc, key->att[k], &isnull);
        h = hash_combine64(h, isnull ? UINT64_C(0x6e756c6c) : hash_value(key, k, v, true));
    }
    return h;
}

std::optional<std::int64_t> claim(Oid owner, std::uint64_t hash, std::uint64_t legacy, std::int64_t at_least,
                                  Site* site, MemoryContext cxt) {
    watch(site, cxt);
    Handle* h = handle();
    // This (sub)transaction's runs not written yet: written first, so that
    // the lookup finds them.
    tombstone_runs::write_pending();
    const LOCKTAG run = tombstone_runs::run_tag(owner);
    const LOCKTAG tag = key_tag(owner, hash);
    for (;;) {
        // The run lock, then the key's: a DELETE recording runs of the
        // table is waited for, and one recording the key by itself.
        (void)LockAcquire(&run, ShareLock, false, false);
        (void)LockAcquire(&tag, ShareLock, false, false);
        Found f = lookup(h, owner, hash);
        // A tombstone recorded before 1.2 under the key's hash of then (only
        // rows of fencing.tombstones: runs came with 1.2). No lock of its
        // own: nothing records under that hash any more.
        if (legacy != hash && !TransactionIdIsValid(f.writer)) {
            const Found old = lookup(h, owner, legacy);
            if (TransactionIdIsValid(old.writer)) {
                f.writer = old.writer;
            } else if (old.found && (!f.found || old.token > f.token)) {
                f.found = true;
                f.token = old.token;
            }
        }
        TransactionId writer = f.writer;
        bool in_run = false;
        std::int64_t run_token = 0;
        // With the run lock held: a DELETE recording runs of the table now
        // is waited for, and one that began since has not deleted a row.
        if (!TransactionIdIsValid(writer) && tombstone_summary::runs_may_reject(owner, at_least))
            writer = tombstone_runs::probe(runs_of(h), owner, hash, at_least, &in_run, &run_token);
        if (!TransactionIdIsValid(writer)) {
            hold(site, run, ShareLock);
            hold(site, tag, ShareLock);
            if (in_run && (!f.found || run_token > f.token)) return run_token;
            if (f.found) return f.token;
            return std::nullopt;
        }
        // A tombstone being written: wait for its transaction without the
        // locks (it may need them), then read again.
        LockRelease(&tag, ShareLock, false);
        LockRelease(&run, ShareLock, false);
        wait_for(writer);
    }
}

std::int64_t survey(Oid owner, std::int64_t limit, std::int64_t* greatest, std::int64_t* runs_greatest) {
    Handle* h = handle();
    std::int64_t n = 0;
    ScanKeyData skey;
    ScanKeyInit(&skey, kAttTbl, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(owner));
    IndexScanDesc scan = compat::index_scan_begin(h->heap, h->index, &h->dirty, 1);
    index_rescan(scan, &skey, 1, nullptr, 0);
    while (n <= limit && index_getnext_slot(scan, ForwardScanDirection, h->slot)) {
        bool isnull = false;
        const std::int64_t token = DatumGetInt64(slot_getattr(h->slot, kAttToken, &isnull));
        if (n == 0 || token > *greatest) *greatest = token;
        ++n;
        if ((n & 1023) == 0) CHECK_FOR_INTERRUPTS();
    }
    ExecClearTuple(h->slot);
    index_endscan(scan);
    if (n <= limit) {
        std::int64_t in_runs = *runs_greatest;
        n += tombstone_runs::survey(owner, limit - n, &in_runs);
        *runs_greatest = in_runs;
        if (in_runs > *greatest) *greatest = in_runs;
    }
    return n;
}

void refuse_read_only(Relation rel) {
    if (XactReadOnly)
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot record the deletion of a row of relation \"%s\" in a read-only transaction",
                               RelationGetRelationName(rel)),
                        errdetail("A fenced DELETE writes a tombstone into fencing.tombstones.")));
}

void record(Relation rel, Oid owner, std::uint64_t hash, std::int64_t token) {
    refuse_read_only(rel);
    Handle* h = handle();
    // Before the tombstone exists, and before the row is deleted: an INSERT
    // that skipped its lookup is refused at commit.
    tombstone_summary::recorded(owner, token, survey);
    const LOCKTAG tag = key_tag(owner, hash);
    (void)LockAcquire(&tag, ExclusiveLock, false, false);
    // Most keys were never deleted before: the row goes in without a
    // lookup, and its index entry's check finds the rare key that has a
    // tombstone already.
    const TimestampTz now = GetCurrentTimestamp();
    bool duplicate = false;
    const ItemPointerData tid = insert_row(h, owner, hash, token, now, &duplicate);
    if (duplicate) settle_duplicate(h, owner, hash, token, now, tag, tid);
    LockRelease(&tag, ExclusiveLock, false);
}

std::int64_t move_table(Oid from, Oid to) {
    if (from == to) return 0;
    Handle* h = handle();
    const std::int64_t in_runs = tombstone_runs::move(from, to);
    std::uint64_t any = 0;
    if (hashes_of(h, from, &any, 1) == 0) return in_runs;
    constexpr int kBatch = 10000;
    std::uint64_t* hashes = static_cast<std::uint64_t*>(palloc(sizeof(std::uint64_t) * kBatch));
    std::int64_t moved = 0;
    // Each under both keys' locks (FROM's first: nothing else takes two),
    // as record() and forget_tombstones() write them.
    for (;;) {
        const int n = hashes_of(h, from, hashes, kBatch);
        if (n == 0) break;
        for (int i = 0; i < n; ++i) {
            const LOCKTAG from_tag = key_tag(from, hashes[i]);
            (void)LockAcquire(&from_tag, ExclusiveLock, false, false);
            Found f = lookup_settled(h, from, hashes[i], from_tag);
            if (f.found) {
                // Recorded for TO before it arrives there.
                tombstone_summary::recorded(to, f.token, survey);
                simple_heap_delete(h->heap, &f.tid);
                const LOCKTAG to_tag = key_tag(to, hashes[i]);
                (void)LockAcquire(&to_tag, ExclusiveLock, false, false);
                put(h, to, hashes[i], f.token, f.deleted_at, to_tag);
                LockRelease(&to_tag, ExclusiveLock, false);
                ++moved;
            }
            LockRelease(&from_tag, ExclusiveLock, false);
        }
        CHECK_FOR_INTERRUPTS();
    }
    pfree(hashes);
    return moved + in_runs;
}

std::int64_t join_owner(Oid relid, Oid check_fn) {
    // Writers of the tables are waited for, so that none records a
    // tombstone under an old owner behind the move.
    List* tables = find_all_inheritors(relid, ShareLock, nullptr);
    std::int64_t n = 0;
    ListCell* lc;
    foreach (lc, tables) {
        const Oid t = lfirst_oid(lc);
        Oid other = InvalidOid;
        const Oid owner = owner_walk(t, check_fn, nullptr, &other);
        if (OidIsValid(other)) rejections::two_hierarchies(t, owner, other);
        refuse_other_key(t, owner);
        n += move_table(t, owner);
    }
    return n;
}

std::int64_t remove_table(Oid relid) {
    Handle* h = handle();
    const std::int64_t in_runs = tombstone_runs::remove(relid);
    constexpr int kBatch = 10000;
    std::uint64_t* hashes = static_cast<std::uint64_t*>(palloc(sizeof(std::uint64_t) * kBatch));
    std::int64_t removed = 0;
    // The table's tombstones, a batch at a time. Each goes under its key's
    // lock, as forget_tombstones() removes one, waiting for a transaction
    // that is removing it already.
    for (;;) {
        const int n = hashes_of(h, relid, hashes, kBatch);
        if (n == 0) break;
        for (int i = 0; i < n; ++i) {
            const LOCKTAG tag = key_tag(relid, hashes[i]);
            (void)LockAcquire(&tag, ExclusiveLock, false, false);
            Found f = lookup_settled(h, relid, hashes[i], tag);
            if (f.found) {
                simple_heap_delete(h->heap, &f.tid);
                ++removed;
            }
            LockRelease(&tag, ExclusiveLock, false);
        }
        CHECK_FOR_INTERRUPTS();
    }
    pfree(hashes);
    return removed + in_runs;
}

void release(Site* site) {
    // While a (sub)transaction aborts, its locks go with it; and a lock is
    // released by the resource owner that took it (a statement's locks
    // belong to its portal), never by another.
    if (IsTransactionState())
        for (int i = 0; i < site->nlocks; ++i)
            if (site->lock_owner[i] == CurrentResourceOwner && compat::lock_held_by_me(&site->tag[i], site->mode[i]))
                LockRelease(&site->tag[i], site->mode[i], false);
    site->nlocks = 0;
}

namespace {

constexpr int kMaxForgetPerCall = 10000;

struct Candidate {
    Oid tbl;
    std::uint64_t hash;
};

}  // namespace

std::int64_t forget_older_than(TimestampTz cutoff) {
    Handle* h = handle();
    Candidate* cand = static_cast<Candidate*>(palloc(sizeof(Candidate) * kMaxForgetPerCall));
    int n = 0;
    {
        Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
        SysScanDesc scan = systable_beginscan(h->heap, InvalidOid, false, snap, 0, nullptr);
        HeapTuple tup;
        TupleDesc d = RelationGetDescr(h->heap);
        while (n < kMaxForgetPerCall && HeapTupleIsValid(tup = systable_getnext(scan))) {
            bool isnull = false;
            if (DatumGetTimestampTz(heap_getattr(tup, kAttDeletedAt, d, &isnull)) >= cutoff || isnull) continue;
            cand[n].tbl = DatumGetObjectId(heap_getattr(tup, kAttTbl, d, &isnull));
            cand[n].hash = static_cast<std::uint64_t>(DatumGetInt64(heap_getattr(tup, kAttHash, d, &isnull)));
            ++n;
        }
        systable_endscan(scan);
        UnregisterSnapshot(snap);
    }
    std::int64_t forgotten = 0;
    for (int i = 0; i < n; ++i) {
        const LOCKTAG tag = key_tag(cand[i].tbl, cand[i].hash);
        if (compat::try_lock_quietly(&tag, ExclusiveLock, false) == LOCKACQUIRE_NOT_AVAIL) continue;
        Found f = lookup(h, cand[i].tbl, cand[i].hash);
        if (!TransactionIdIsValid(f.writer) && f.found && f.deleted_at < cutoff) {
            simple_heap_delete(h->heap, &f.tid);
            ++forgotten;
        }
        LockRelease(&tag, ExclusiveLock, false);
    }
    pfree(cand);
    return forgotten + tombstone_runs::forget(cutoff, kMaxForgetPerCall - forgotten);
}

}  // namespace fencing::pg::tombstones
