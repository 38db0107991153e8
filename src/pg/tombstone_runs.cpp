// Tombstone runs: see tombstone_runs.hpp and docs/design.md, "Tombstones".
//
// What a statement has not written yet lives in this backend's memory, as
// segments of hashes: one per (table, token, subtransaction), in the order
// they were begun (core/tombstone_runs.hpp has the rules: which suffix of
// them a subtransaction writes or drops, how hashes are grouped into rows).
#include "pg/tombstone_runs.hpp"

#include "pg/catalog_ids.hpp"
#include "pg/index_entries.hpp"
#include "pg/lock_tags.hpp"
#include "pg/tombstone_summary.hpp"
#include "pg/tombstones.hpp"

#include "core/tombstone_runs.hpp"

#include <algorithm>
#include <type_traits>

extern "C" {
#include "access/stratnum.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
}

namespace fencing::pg::tombstone_runs {

namespace {

// A statement's hashes are written once this many wait in one segment (and
// once this many segments wait), so that the memory they take stays small.
constexpr int kWriteAt = 65536;
constexpr int kMaxSegments = 4096;

using core::tombstone_runs::Segment;
static_assert(std::is_trivially_destructible_v<Segment>);
static_assert(sizeof(Oid) == sizeof(Segment::owner) && sizeof(SubTransactionId) == sizeof(Segment::sub));

// TopMemoryContext; emptied at the end of every transaction.
std::int64_t* hashes = nullptr;
int nhashes = 0, hash_cap = 0;
Segment* segs = nullptr;
int nsegs = 0, seg_cap = 0;

void reserve_hash() {
    if (nhashes < hash_cap) return;
    const int cap = hash_cap == 0 ? 1024 : hash_cap * 2;
    hashes =
        static_cast<std::int64_t*>(hashes == nullptr ? MemoryContextAlloc(TopMemoryContext, sizeof(std::int64_t) * cap)
                                                     : repalloc(hashes, sizeof(std::int64_t) * cap));
    hash_cap = cap;
}

void reserve_segment() {
    if (nsegs < seg_cap) return;
    const int cap = seg_cap == 0 ? 16 : seg_cap * 2;
    segs = static_cast<Segment*>(segs == nullptr ? MemoryContextAlloc(TopMemoryContext, sizeof(Segment) * cap)
                                                 : repalloc(segs, sizeof(Segment) * cap));
    seg_cap = cap;
}

int suffix_from(SubTransactionId sub) { return core::tombstone_runs::suffix_from(segs, nsegs, sub); }

void truncate_to(int first) {
    if (first >= nsegs) return;
    nhashes = segs[first].start;
    nsegs = first;
}

// Replaces the key values of segment S, if it holds values (Segment::raw),
// by their hashes: before anything reads its entries as hashes.
void settle(Segment* s) {
    if (s->raw == 0) return;
    for (int j = s->start; j < s->start + s->count; ++j)
        hashes[j] = static_cast<std::int64_t>(tombstones::hash_raw(s->raw, hashes[j]));
    s->raw = 0;
}

// fencing.tombstone_runs and its index, opened for this call only.
struct Rels {
    Relation heap;
    Relation index;
    IndexInfo* info;
};

Rels open_rels(LOCKMODE mode) {
    Rels r;
    r.heap = table_open(required_fencing_relation(FencingRel::tombstone_runs), mode);
    check_tombstone_runs_layout(r.heap);
    // The index only once the table is locked (see state_index()).
    r.index = index_open(required_fencing_relation(FencingRel::tombstone_runs_key), mode);
    r.info = mode == AccessShareLock ? nullptr : BuildIndexInfo(r.index);
    return r;
}

// The locks stay until the transaction ends, as for any table it writes.
void close_rels(const Rels& r) {
    index_close(r.index, NoLock);
    table_close(r.heap, NoLock);
}

bytea* hashes_datum(const std::int64_t* h, int n) {
    const Size len = sizeof(std::int64_t) * n;
    bytea* b = static_cast<bytea*>(palloc(VARHDRSZ + len));
    SET_VARSIZE(b, VARHDRSZ + len);
    memcpy(VARDATA(b), h, len);
    return b;
}

// Inserts TUP (a row of the table) and its index entries.
void insert_tuple(const Rels& r, HeapTuple tup) {
    simple_heap_insert(r.heap, tup);
    tombstones::note_write();
    const TupleDesc d = RelationGetDescr(r.heap);
    bool isnull = false;
    Datum iv[4] = {heap_getattr(tup, run_att::kTbl, d, &isnull), heap_getattr(tup, run_att::kToken, d, &isnull),
                   heap_getattr(tup, run_att::kLo, d, &isnull), heap_getattr(tup, run_att::kHi, d, &isnull)};
    bool in[4] = {false, false, false, false};
    index_insert(r.index, iv, in, &tup->t_self, r.heap, UNIQUE_CHECK_NO, false, r.info);
    (void)insert_other_index_entries(r.heap, RelationGetRelid(r.index), tup, false);
}

// Writes the N hashes H of segment S as rows of up to kRunChunk hashes,
// each with the least and greatest of its own.
void write_rows(const Rels& r, const Segment& s, const std::int64_t* h, int n) {
    for (int i = 0; i < n; i += kRunChunk) {
        const int m = std::min(kRunChunk, n - i);
        std::int64_t lo = h[i], hi = h[i];
        for (int j = i + 1; j < i + m; ++j) {
            lo = std::min(lo, h[j]);
            hi = std::max(hi, h[j]);
        }
        Datum v[run_att::kNatts];
        bool nulls[run_att::kNatts] = {false, false, false, false, false, false};
        bytea* b = hashes_datum(h + i, m);
        v[run_att::kTbl - 1] = ObjectIdGetDatum(s.owner);
        v[run_att::kLo - 1] = Int64GetDatum(lo);
        v[run_att::kToken - 1] = Int64GetDatum(s.token);
        v[run_att::kDeletedAt - 1] = TimestampTzGetDatum(s.at);
        v[run_att::kHi - 1] = Int64GetDatum(hi);
        v[run_att::kHashes - 1] = PointerGetDatum(b);
        HeapTuple tup = heap_form_tuple(RelationGetDescr(r.heap), v, nulls);
        insert_tuple(r, tup);
        heap_freetuple(tup);
        pfree(b);
    }
}

// Writes segment S: its hashes grouped by their leading bits into about half
// full rows, so that each row covers a narrow range of hashes (a lookup
// reads the one row of a run whose range holds its key's hash). A counting
// sort, not a sort: within a row the hashes are in no order.
void write_segment(const Rels& r, const Segment& s) {
    const std::int64_t* h = hashes + s.start;
    const int bits = core::tombstone_runs::group_bits(s.count);
    if (bits == 0) {
        write_rows(r, s, h, s.count);
        return;
    }
    const int groups = 1 << bits;
    int* start = static_cast<int*>(palloc(sizeof(int) * (groups + 1)));
    int* next = static_cast<int*>(palloc(sizeof(int) * groups));
    std::int64_t* grouped = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * s.count));
    core::tombstone_runs::group(h, s.count, bits, grouped, start, next);
    for (int g = 0; g < groups; ++g)
        if (start[g + 1] > start[g]) write_rows(r, s, grouped + start[g], start[g + 1] - start[g]);
    pfree(grouped);
    pfree(next);
    pfree(start);
}

// Writes the hashes of the segments with a subtransaction id of at least SUB.
void write_from(SubTransactionId sub) {
    const int first = suffix_from(sub);
    if (first >= nsegs) return;
    const Rels r = open_rels(RowExclusiveLock);
    for (int i = first; i < nsegs; ++i) {
        settle(&segs[i]);
        write_segment(r, segs[i]);
        CHECK_FOR_INTERRUPTS();
    }
    close_rels(r);
    truncate_to(first);
}

ExecutorFinish_hook_type previous_finish = nullptr;

// A statement's hashes are written when its executor finishes, before its
// AFTER triggers run (a statement nested in one writes its own).
void executor_finish(QueryDesc* query) {
    if (nsegs > 0) write_from(GetCurrentSubTransactionId());
    if (previous_finish)
        previous_finish(query);
    else
        standard_ExecutorFinish(query);
    if (nsegs > 0) write_from(GetCurrentSubTransactionId());
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            // Written when their statements' executors finished; anything
            // left (a write outside an executor) goes before the commit.
            if (nsegs > 0) write_from(TopSubTransactionId);
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PREPARE:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
            nsegs = nhashes = 0;
            break;
        default:
            break;
    }
}

void subxact_callback(SubXactEvent event, SubTransactionId sub, SubTransactionId, void*) {
    // The subtransaction's deletions are undone: so are their tombstones.
    if (event == SUBXACT_EVENT_ABORT_SUB) truncate_to(suffix_from(sub));
}

void wait_for(TransactionId xid) { XactLockTableWait(xid, nullptr, nullptr, XLTW_None); }

// The writer in progress of the row the dirty snapshot just returned, or
// InvalidTransactionId (committed, or this transaction's).
TransactionId writer_of(const SnapshotData& dirty) {
    return TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
}

// A scan of the rows of the runs' index whose table column compares with TBL
// by STRATEGY (PROC), through a dirty snapshot: rows committed or in
// progress. Lives on the caller's stack (the scan points into it).
struct Scan {
    SnapshotData dirty;
    TupleTableSlot* slot;
    IndexScanDesc scan;
};

void begin_scan(Scan* sc, const Rels& r, StrategyNumber strategy, RegProcedure proc, Oid tbl) {
    InitDirtySnapshot(sc->dirty);
    sc->slot = table_slot_create(r.heap, nullptr);
    ScanKeyData skey;
    ScanKeyInit(&skey, 1, strategy, proc, ObjectIdGetDatum(tbl));
    sc->scan = compat::index_scan_begin(r.heap, r.index, &sc->dirty, 1);
    index_rescan(sc->scan, &skey, 1, nullptr, 0);
}

bool next_row(Scan* sc) { return index_getnext_slot(sc->scan, ForwardScanDirection, sc->slot); }

void end_scan(Scan* sc) {
    ExecClearTuple(sc->slot);
    index_endscan(sc->scan);
    ExecDropSingleTupleTableSlot(sc->slot);
}

// Copies of the rows of RELID's runs, once no transaction in progress writes
// or removes one; *N gets how many.
HeapTuple* rows_of(const Rels& r, Oid relid, int* n) {
    for (;;) {
        int cap = 16, count = 0;
        HeapTuple* rows = static_cast<HeapTuple*>(palloc(sizeof(HeapTuple) * cap));
        Scan sc;
        begin_scan(&sc, r, BTEqualStrategyNumber, F_OIDEQ, relid);
        TransactionId writer = InvalidTransactionId;
        while (next_row(&sc)) {
            writer = writer_of(sc.dirty);
            if (TransactionIdIsValid(writer)) break;
            if (count == cap) rows = static_cast<HeapTuple*>(repalloc(rows, sizeof(HeapTuple) * (cap *= 2)));
            rows[count++] = ExecCopySlotHeapTuple(sc.slot);
        }
        end_scan(&sc);
        if (!TransactionIdIsValid(writer)) {
            *n = count;
            return rows;
        }
        for (int i = 0; i < count; ++i) heap_freetuple(rows[i]);
        pfree(rows);
        wait_for(writer);
    }
}

std::int64_t hashes_in(const Rels& r, HeapTuple tup) {
    bool isnull = false;
    const bytea* b = DatumGetByteaPP(heap_getattr(tup, run_att::kHashes, RelationGetDescr(r.heap), &isnull));
    return static_cast<std::int64_t>(VARSIZE_ANY_EXHDR(b) / sizeof(std::int64_t));
}

}  // namespace

void init() {
    previous_finish = ExecutorFinish_hook;
    ExecutorFinish_hook = executor_finish;
    RegisterXactCallback(xact_callback, nullptr);
    RegisterSubXactCallback(subxact_callback, nullptr);
}

bool available() { return OidIsValid(fencing_relation(FencingRel::tombstone_runs)); }

LOCKTAG run_tag(Oid owner) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, owner, 0, kTombstoneRunTagKind);
    return tag;
}

namespace {
// Begins a segment for rows deleted by SUB with TOKEN under OWNER; once per
// segment, so kept out of defer()'s per-row instructions.
[[gnu::cold, gnu::noinline]] Segment* begin_segment(Oid owner, std::int64_t token, SubTransactionId sub, int raw) {
    // Before the first row of the segment is deleted: an INSERT that
    // skipped its lookup is refused at commit, and one that looks its key
    // up waits for this transaction.
    tombstone_summary::recorded(owner, token, tombstones::survey, true);
    const LOCKTAG tag = run_tag(owner);
    (void)LockAcquire(&tag, RowExclusiveLock, false, false);
    reserve_segment();
    Segment* s = &segs[nsegs++];
    *s = Segment{owner, sub, token, GetCurrentTimestamp(), nhashes, 0, raw};
    return s;
}
}  // namespace

void defer(Relation rel, Oid owner, std::uint64_t hash, std::int64_t token, int raw) {
    if (unlikely(XactReadOnly)) tombstones::refuse_read_only(rel);
    const SubTransactionId sub = GetCurrentSubTransactionId();
    Segment* s = nsegs > 0 ? &segs[nsegs - 1] : nullptr;
    if (unlikely(s == nullptr || !core::tombstone_runs::continues(*s, owner, token, sub, raw)))
        s = begin_segment(owner, token, sub, raw);
    if (unlikely(nhashes >= hash_cap)) reserve_hash();
    hashes[nhashes++] = static_cast<std::int64_t>(hash);
    ++s->count;
    if (unlikely(s->count >= kWriteAt || nsegs >= kMaxSegments)) write_from(sub);
}

void write_pending() {
    if (nsegs > 0) write_from(GetCurrentSubTransactionId());
}

bool open_reader(Reader* reader) {
    if (!available()) return false;
    reader->heap = table_open(required_fencing_relation(FencingRel::tombstone_runs), AccessShareLock);
    check_tombstone_runs_layout(reader->heap);
    reader->index = index_open(required_fencing_relation(FencingRel::tombstone_runs_key), AccessShareLock);
    reader->slot = table_slot_create(reader->heap, nullptr);
    return true;
}

void close_reader(Reader* reader) {
    ExecDropSingleTupleTableSlot(reader->slot);
    index_close(reader->index, NoLock);
    table_close(reader->heap, NoLock);
}

TransactionId probe(const Reader* reader, Oid owner, std::uint64_t hash, std::int64_t at_least, bool* found,
                    std::int64_t* token) {
    *found = false;
    const std::int64_t h = static_cast<std::int64_t>(hash);
    // Hashes of statements of outer (sub)transactions, still in memory.
    for (int i = 0; i < nsegs; ++i) {
        const Segment& s = segs[i];
        if (s.owner != owner || s.token < at_least || (*found && s.token <= *token)) continue;
        settle(&segs[i]);
        for (int j = 0; j < s.count; ++j)
            if (hashes[s.start + j] == h) {
                *found = true;
                *token = s.token;
                break;
            }
    }
    if (reader == nullptr) return InvalidTransactionId;
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    TupleTableSlot* slot = reader->slot;
    // The rows of runs with a token that may reject the write whose range
    // holds the hash: one per run.
    ScanKeyData skey[4];
    ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(owner));
    ScanKeyInit(&skey[1], 2, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(at_least));
    ScanKeyInit(&skey[2], 3, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(h));
    ScanKeyInit(&skey[3], 4, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(h));
    IndexScanDesc scan = compat::index_scan_begin(reader->heap, reader->index, &dirty, 4);
    index_rescan(scan, skey, 4, nullptr, 0);
    TransactionId writer = InvalidTransactionId;
    while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
        writer = writer_of(dirty);
        if (TransactionIdIsValid(writer)) break;
        bool isnull = false;
        const std::int64_t t = DatumGetInt64(slot_getattr(slot, run_att::kToken, &isnull));
        if (*found && t <= *token) continue;
        const bytea* b = DatumGetByteaPP(slot_getattr(slot, run_att::kHashes, &isnull));
        const char* v = VARDATA_ANY(b);
        const std::size_t n = VARSIZE_ANY_EXHDR(b) / sizeof(std::int64_t);
        // Read by copy: a short-headed value is not aligned.
        for (std::size_t j = 0; j < n; ++j) {
            std::int64_t x;
            memcpy(&x, v + j * sizeof x, sizeof x);
            if (x == h) {
                *found = true;
                *token = t;
                break;
            }
        }
    }
    ExecClearTuple(slot);
    index_endscan(scan);
    return writer;
}

std::int64_t survey(Oid owner, std::int64_t limit, std::int64_t* greatest) {
    if (!available()) return 0;
    const Rels r = open_rels(AccessShareLock);
    Scan sc;
    begin_scan(&sc, r, BTEqualStrategyNumber, F_OIDEQ, owner);
    std::int64_t n = 0;
    while (n <= limit && next_row(&sc)) {
        bool isnull = false;
        const std::int64_t t = DatumGetInt64(slot_getattr(sc.slot, run_att::kToken, &isnull));
        if (t > *greatest) *greatest = t;
        ++n;
        if ((n & 1023) == 0) CHECK_FOR_INTERRUPTS();
    }
    end_scan(&sc);
    close_rels(r);
    return n;
}

bool any(Oid owner, TransactionId* writer) {
    *writer = InvalidTransactionId;
    if (!available()) return false;
    const Rels r = open_rels(AccessShareLock);
    Scan sc;
    begin_scan(&sc, r, BTEqualStrategyNumber, F_OIDEQ, owner);
    const bool found = next_row(&sc) && !TransactionIdIsValid(*writer = writer_of(sc.dirty));
    end_scan(&sc);
    close_rels(r);
    return found;
}

Oid next_after(Oid after) {
    if (!available()) return InvalidOid;
    const Rels r = open_rels(AccessShareLock);
    Scan sc;
    begin_scan(&sc, r, BTGreaterStrategyNumber, F_OIDGT, after);
    Oid next = InvalidOid;
    if (next_row(&sc)) {
        bool isnull = false;
        next = DatumGetObjectId(slot_getattr(sc.slot, run_att::kTbl, &isnull));
    }
    end_scan(&sc);
    close_rels(r);
    return next;
}

std::int64_t move(Oid from, Oid to) {
    if (from == to || !available()) return 0;
    const Rels r = open_rels(RowExclusiveLock);
    int n = 0;
    HeapTuple* rows = rows_of(r, from, &n);
    std::int64_t moved = 0;
    const TupleDesc d = RelationGetDescr(r.heap);
    for (int i = 0; i < n; ++i) {
        bool isnull = false;
        // Recorded for TO before it arrives there.
        tombstone_summary::recorded(to, DatumGetInt64(heap_getattr(rows[i], run_att::kToken, d, &isnull)),
                                    tombstones::survey, true);
        simple_heap_delete(r.heap, &rows[i]->t_self);
        int col = run_att::kTbl;
        Datum value = ObjectIdGetDatum(to);
        bool null = false;
        HeapTuple tup = heap_modify_tuple_by_cols(rows[i], d, 1, &col, &value, &null);
        insert_tuple(r, tup);
        moved += hashes_in(r, tup);
        heap_freetuple(tup);
    }
    close_rels(r);
    return moved;
}

std::int64_t remove(Oid relid) {
    if (!available()) return 0;
    const Rels r = open_rels(RowExclusiveLock);
    int n = 0;
    HeapTuple* rows = rows_of(r, relid, &n);
    std::int64_t removed = 0;
    for (int i = 0; i < n; ++i) {
        simple_heap_delete(r.heap, &rows[i]->t_self);
        removed += hashes_in(r, rows[i]);
    }
    close_rels(r);
    return removed;
}

std::int64_t forget(TimestampTz cutoff, std::int64_t budget) {
    if (budget <= 0 || !available()) return 0;
    const Rels r = open_rels(RowExclusiveLock);
    // The snapshot stays registered until the rows are removed, so that none
    // of those it saw can be pruned and its place reused meanwhile.
    Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
    int cap = 16, count = 0;
    ItemPointerData* tids = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * cap));
    std::int64_t* sizes = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * cap));
    std::int64_t planned = 0;
    {
        SysScanDesc scan = systable_beginscan(r.heap, InvalidOid, false, snap, 0, nullptr);
        const TupleDesc d = RelationGetDescr(r.heap);
        HeapTuple tup;
        while (HeapTupleIsValid(tup = systable_getnext(scan))) {
            bool isnull = false;
            if (DatumGetTimestampTz(heap_getattr(tup, run_att::kDeletedAt, d, &isnull)) >= cutoff) continue;
            const std::int64_t m = hashes_in(r, tup);
            if (planned + m > budget) break;
            if (count == cap) {
                cap *= 2;
                tids = static_cast<ItemPointerData*>(repalloc(tids, sizeof(ItemPointerData) * cap));
                sizes = static_cast<std::int64_t*>(repalloc(sizes, sizeof(std::int64_t) * cap));
            }
            tids[count] = tup->t_self;
            sizes[count++] = m;
            planned += m;
        }
        systable_endscan(scan);
    }
    std::int64_t forgotten = 0;
    for (int i = 0; i < count; ++i) {
        // Not waiting: a row another transaction is removing is left to it.
        if (compat::delete_unless_busy(r.heap, &tids[i])) forgotten += sizes[i];
    }
    UnregisterSnapshot(snap);
    pfree(tids);
    pfree(sizes);
    close_rels(r);
    return forgotten;
}

}  // namespace fencing::pg::tombstone_runs
