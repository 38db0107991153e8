#include "pg/resource_rows.hpp"
#include "pg/index_entries.hpp"

#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"

#include <type_traits>

extern "C" {
#include "catalog/index.h"
#include "catalog/pg_collation.h"
#include "utils/hsearch.h"
#include "commands/trigger.h"
#include "utils/fmgroids.h"
}

namespace fencing::pg {

namespace {

// Offsets of the fixed-width columns in a tuple without nulls (check_fence_state_layout
// guarantees the types, hence the alignment).
constexpr std::size_t kOffKey = 0, kOffToken = 8, kOffGrantedAt = 16, kOffLease = 20;

// A resource's row is found by its key and its name (the primary key): two
// names with the same key (a collision) share the lock but each has a row of
// its own, and never reads or writes the other's.
void row_scan_keys(ScanKeyData* skey, std::uint64_t key, const char* resource, int len) {
    ScanKeyInit(&skey[0], kAttKey, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(static_cast<std::int64_t>(key)));
    ScanKeyEntryInitialize(&skey[1], 0, kAttResource, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID, F_TEXTEQ,
                           PointerGetDatum(cstring_to_text_with_len(resource, len)));
}

void overwrite_fields(HeapTuple copy, std::uint64_t key, std::int64_t token, std::int32_t granted_at,
                      std::int32_t lease_ms) {
    HeapTupleHeader htup = copy->t_data;
    char* data = reinterpret_cast<char*>(htup) + htup->t_hoff;
    std::int64_t stored_key;
    memcpy(&stored_key, data + kOffKey, sizeof stored_key);
    if ((htup->t_infomask & HEAP_HASNULL) || stored_key != static_cast<std::int64_t>(key))
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                        errmsg("fence state row of key %lld is malformed", static_cast<long long>(key))));
    memcpy(data + kOffToken, &token, sizeof token);
    memcpy(data + kOffGrantedAt, &granted_at, sizeof granted_at);
    memcpy(data + kOffLease, &lease_ms, sizeof lease_ms);
}

std::int64_t token_field(HeapTuple tup) {
    std::int64_t t;
    memcpy(&t, reinterpret_cast<char*>(tup->t_data) + tup->t_data->t_hoff + kOffToken, sizeof t);
    return t;
}

// A transaction in progress that is writing a row of (KEY, RESOURCE) (a
// restore's INSERT), or InvalidTransactionId.
TransactionId row_writer_in_progress(Relation rel, Oid index, std::uint64_t key, const char* resource, int len) {
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    SysScanDesc scan = systable_beginscan(rel, index, true, &dirty, 2, skey);
    TransactionId writer = InvalidTransactionId;
    while (!TransactionIdIsValid(writer) && HeapTupleIsValid(systable_getnext(scan)))
        if (TransactionIdIsValid(dirty.xmin) && !TransactionIdIsCurrentTransactionId(dirty.xmin)) writer = dirty.xmin;
    systable_endscan(scan);
    return writer;
}

// Whether this transaction (or one of its subtransactions) wrote this row
// version: a restore's INSERT, a superuser's UPDATE, a rekeying. The
// module's own rows are inserted frozen.
bool written_here(HeapTupleHeader h) {
    return !HeapTupleHeaderXminFrozen(h) && TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(h));
}

// Whether this transaction deleted (or updated) a row of (KEY, RESOURCE):
// fencing.forget(), or SQL. Such a row is invisible here and comes back if
// the transaction rolls back.
bool deleted_here(Relation rel, Oid index, std::uint64_t key, const char* resource, int len) {
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotAny, 2, skey);
    bool found = false;
    HeapTuple tup;
    while (!found && HeapTupleIsValid(tup = systable_getnext(scan))) {
        const HeapTupleHeader h = tup->t_data;
        found = !(h->t_infomask & HEAP_XMAX_INVALID) && !HEAP_XMAX_IS_LOCKED_ONLY(h->t_infomask) &&
                TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(h));
    }
    systable_endscan(scan);
    return found;
}

// A grant is recorded outside the transaction (in place, or in a frozen
// row): built on a row version this transaction may still roll back, it
// would be lost with that version, or leave the resource a second row
// beside the one a rollback brings back.
}  // namespace

[[noreturn]] void report_changed_here(const char* resource, int len) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                    errmsg("cannot acquire fencing lock on resource \"%.*s\" in a transaction that changed its fence "
                           "state",
                           len, resource),
                    errdetail("This transaction deleted or wrote the resource's row in fencing.fence_state "
                              "(fencing.forget() or SQL); a grant is recorded outside the transaction and would not "
                              "be undone with that change."),
                    errhint("Commit or roll back the transaction first, then acquire the resource.")));
    pg_unreachable();
}

namespace {

// Whether a row of any resource carries this key.
bool key_in_use(Relation rel, Oid index, std::uint64_t key) {
    ScanKeyData skey;
    ScanKeyInit(&skey, kAttKey, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(static_cast<std::int64_t>(key)));
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotSelf, 1, &skey);
    const bool found = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    return found;
}

// A resource that shares its key with another (a collision): both names
// work, they only exclude each other. Said once, when the second one gets
// its row; naming neither the key nor the other resource.
void report_shared_key(const char* resource, int len) {
    ereport(WARNING, (errcode(ERRCODE_WARNING),
                      errmsg("fencing resource \"%.*s\" shares its lock with another resource", len, resource),
                      errdetail("Both names map to the same lock key: they exclude each other like one resource, and "
                                "each keeps its own tokens."),
                      errhint("Without the database's resource key secret, such names cannot be chosen on purpose; "
                              "renaming one of them ends the sharing.")));
}

// Where each resource's row was last seen, by the resource's key, so that
// a grant overwrites the row without an index scan (most of a grant's cost
// otherwise). A hint only: the row it leads to is used when it is live, on
// a page of the relation's present storage, and carries the key and the
// name; anything else sends the grant through the index, which sets the
// hint again. All are dropped at a relcache invalidation of fence_state
// (any rewrite of it sends one) and past kMaxHints.
struct RowHint {
    std::uint64_t key;  // dynahash key: first
    ItemPointerData tid;
};
static_assert(std::is_trivially_destructible_v<RowHint>);
constexpr long kMaxHints = 65536;
HTAB* hints = nullptr;
std::uint64_t hints_generation = 0;
compat::RelFile hints_file{};

void drop_hints() {
    if (hints != nullptr) hash_destroy(hints);
    hints = nullptr;
}

// The hints, valid for REL as it is now; nullptr when there are none.
HTAB* hints_for(Relation rel) {
    const compat::RelFile f = compat::rel_file(rel);
    if (hints != nullptr && (hints_generation != fence_oids_generation() || f.relfile != hints_file.relfile ||
                             f.tablespace != hints_file.tablespace || f.database != hints_file.database))
        drop_hints();
    return hints;
}

void set_hint(Relation rel, std::uint64_t key, const ItemPointerData& tid) {
    if (hints_for(rel) == nullptr || hash_get_num_entries(hints) >= kMaxHints) {
        drop_hints();
        HASHCTL ctl;
        memset(&ctl, 0, sizeof ctl);
        ctl.keysize = sizeof(std::uint64_t);
        ctl.entrysize = sizeof(RowHint);
        ctl.hcxt = TopMemoryContext;
        hints = hash_create("fencing fence_state row hints", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
        hints_generation = fence_oids_generation();
        hints_file = compat::rel_file(rel);
    }
    RowHint* h = static_cast<RowHint*>(hash_search(hints, &key, HASH_ENTER, nullptr));
    h->tid = tid;
}

void drop_hint(std::uint64_t key) {
    if (hints != nullptr) (void)hash_search(hints, &key, HASH_REMOVE, nullptr);
}

// Whether TUP (without nulls, checked by the caller) is the row of
// (KEY, RESOURCE). A name stored compressed or out of line is not compared
// here (reading it could need other buffers): not the row, as far as hints go.
bool row_is(HeapTuple tup, TupleDesc d, std::uint64_t key, const char* resource, int len) {
    std::int64_t stored_key;
    memcpy(&stored_key, reinterpret_cast<char*>(tup->t_data) + tup->t_data->t_hoff + kOffKey, sizeof stored_key);
    if (stored_key != static_cast<std::int64_t>(key)) return false;
    bool isnull = false;
    const Datum name = heap_getattr(tup, kAttResource, d, &isnull);
    if (isnull || VARATT_IS_EXTENDED(DatumGetPointer(name))) return false;
    const struct varlena* v = reinterpret_cast<const struct varlena*>(DatumGetPointer(name));
    return static_cast<int>(VARSIZE_ANY_EXHDR(v)) == len && memcmp(VARDATA_ANY(v), resource, len) == 0;
}

// The pin of a hinted row's buffer, which heap_inplace_lock lets go (through
// release_pinned) before it waits for a writer of the row.
struct PinnedRow {
    Buffer buffer;
    bool released;
};
static_assert(std::is_trivially_destructible_v<PinnedRow>);

void release_pinned(void* arg) {
    PinnedRow* p = static_cast<PinnedRow*>(arg);
    ReleaseBuffer(p->buffer);
    p->released = true;
}

// Records the grant in the row the key's hint leads to: false when there is
// no hint or it does not lead to the resource's live row (then the caller
// looks the row up through the index). Between the pin and its release no
// C++ object is alive: an error leaves the buffer, its lock and the tuple
// lock to the (sub)transaction's abort.
bool record_by_hint(Relation rel, std::uint64_t key, const char* resource, int len, std::int64_t token,
                    std::int32_t granted_at, std::int32_t lease_ms, std::int64_t* stored, Recorded* out) {
    if (hints_for(rel) == nullptr) return false;
    const RowHint* h = static_cast<const RowHint*>(hash_search(hints, &key, HASH_FIND, nullptr));
    if (h == nullptr) return false;
    const ItemPointerData tid = h->tid;
    const BlockNumber block = ItemPointerGetBlockNumber(&tid);
    // A VACUUM may have cut pages off the end (without a relcache
    // invalidation until it commits).
    if (block >= RelationGetNumberOfBlocks(rel)) {
        drop_hint(key);
        return false;
    }
    const Buffer buf = ReadBuffer(rel, block);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    const Page page = BufferGetPage(buf);
    const OffsetNumber off = ItemPointerGetOffsetNumber(&tid);
    HeapTupleData tup;
    bool ok = off >= FirstOffsetNumber && off <= PageGetMaxOffsetNumber(page);
    if (ok) {
        const ItemId lp = PageGetItemId(page, off);
        ok = ItemIdIsNormal(lp);
        if (ok) {
            tup.t_data = reinterpret_cast<HeapTupleHeader>(PageGetItem(page, lp));
            tup.t_len = ItemIdGetLength(lp);
            tup.t_self = tid;
            tup.t_tableOid = RelationGetRelid(rel);
            ok = !(tup.t_data->t_infomask & HEAP_HASNULL) && HeapTupleSatisfiesVisibility(&tup, SnapshotSelf, buf) &&
                 !written_here(tup.t_data) && row_is(&tup, RelationGetDescr(rel), key, resource, len);
        }
    }
    LockBuffer(buf, BUFFER_LOCK_UNLOCK);
    // The pin keeps the tuple where it is (pruning needs the only pin).
    if (!ok) {
        ReleaseBuffer(buf);
        drop_hint(key);
        return false;
    }
    PinnedRow pinned{buf, false};
    if (!compat::inplace_lock(rel, &tup, buf, release_pinned, &pinned)) {
        // It waited for a transaction that updated, deleted or locked the
        // row (letting the pin go first).
        if (!pinned.released) ReleaseBuffer(buf);
        drop_hint(key);
        return false;
    }
    *stored = token_field(&tup);
    if (*stored >= token) {
        compat::inplace_unlock(rel, &tup, buf);
        ReleaseBuffer(buf);
        *out = Recorded::behind;
        return true;
    }
    HeapTuple copy = heap_copytuple(&tup);
    overwrite_fields(copy, key, token, granted_at, lease_ms);
    compat::inplace_update_and_unlock(rel, &tup, copy, buf);
    ReleaseBuffer(buf);
    heap_freetuple(copy);
    *out = Recorded::updated;
    return true;
}

}  // namespace

StateRow lookup_row(Relation rel, Oid index, std::uint64_t key, const char* resource, int len) {
    StateRow row;
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotSelf, 2, skey);
    HeapTuple tup = systable_getnext(scan);
    if (HeapTupleIsValid(tup)) {
        TupleDesc d = RelationGetDescr(rel);
        bool isnull = false;
        row.found = true;
        row.written_here = written_here(tup->t_data);
        row.token = DatumGetInt64(heap_getattr(tup, kAttToken, d, &isnull));
        row.granted_at = DatumGetInt32(heap_getattr(tup, kAttGrantedAt, d, &isnull));
        row.lease_ms = DatumGetInt32(heap_getattr(tup, kAttLease, d, &isnull));
    }
    systable_endscan(scan);
    return row;
}

std::int32_t now_seconds() { return static_cast<std::int32_t>(GetCurrentTimestamp() / USECS_PER_SEC); }

Recorded record_in_place(Relation rel, Oid index, std::uint64_t key, const char* resource, int len, std::int64_t token,
                         std::int32_t granted_at, std::int32_t lease_ms, std::int64_t* stored) {
    Recorded hinted = Recorded::missing;
    if (record_by_hint(rel, key, resource, len, token, granted_at, lease_ms, stored, &hinted)) return hinted;
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    HeapTuple old = nullptr;
    void* state = nullptr;
    compat::inplace_update_begin(rel, index, 2, skey, &old, &state);
    if (old == nullptr) return Recorded::missing;
    const ItemPointerData tid = old->t_self;
    bool behind = false;
    PG_TRY();
    {
        if (written_here(old->t_data)) report_changed_here(resource, len);
        *stored = token_field(old);
        behind = *stored >= token;
        if (!behind) overwrite_fields(old, key, token, granted_at, lease_ms);
    }
    PG_CATCH();
    {
        compat::inplace_update_cancel(state);
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (behind) {
        compat::inplace_update_cancel(state);
        heap_freetuple(old);
        set_hint(rel, key, tid);
        return Recorded::behind;
    }
    compat::inplace_update_finish(state, old);
    heap_freetuple(old);
    set_hint(rel, key, tid);
    return Recorded::updated;
}

bool insert_row(Relation rel, Oid index, std::uint64_t key, const char* resource, int len, std::int64_t token,
                std::int32_t granted_at, std::int32_t lease_ms) {
    if (deleted_here(rel, index, key, resource, len)) report_changed_here(resource, len);
    // The row is frozen, its index entries are not undone: none may go into
    // an index this transaction made or rebuilt (REINDEX), whose rollback
    // would leave the row out of the old one.
    if (TransactionIdIsValid(GetTopTransactionIdIfAny())) {
        List* indexes = RelationGetIndexList(rel);
        ListCell* lc;
        foreach (lc, indexes) refuse_if_made_here(lfirst_oid(lc));
        list_free(indexes);
    }
    if (const TransactionId writer = row_writer_in_progress(rel, index, key, resource, len);
        TransactionIdIsValid(writer)) {
        XactLockTableWait(writer, nullptr, nullptr, XLTW_None);
        return false;
    }
    if (key_in_use(rel, index, key)) report_shared_key(resource, len);
    Datum values[kNatts];
    bool nulls[kNatts] = {false, false, false, false, false};
    values[kAttKey - 1] = Int64GetDatum(static_cast<std::int64_t>(key));
    values[kAttToken - 1] = Int64GetDatum(token);
    values[kAttGrantedAt - 1] = Int32GetDatum(granted_at);
    values[kAttLease - 1] = Int32GetDatum(lease_ms);
    values[kAttResource - 1] = PointerGetDatum(cstring_to_text_with_len(resource, len));
    HeapTuple tup = heap_form_tuple(RelationGetDescr(rel), values, nulls);
    heap_insert(rel, tup, GetCurrentCommandId(true), HEAP_INSERT_FROZEN, nullptr);

    Relation irel = index_open(index, RowExclusiveLock);
    IndexInfo* info = BuildIndexInfo(irel);
    Datum ivalues[2] = {values[kAttKey - 1], values[kAttResource - 1]};
    bool inulls[2] = {false, false};
    compat::index_insert_unique(irel, ivalues, inulls, &tup->t_self, rel, info);
    index_close(irel, RowExclusiveLock);
    (void)insert_other_index_entries(rel, index, tup, false);
    // Only a row the index reaches (an error before this leaves an orphan).
    set_hint(rel, key, tup->t_self);
    return true;
    heap_freetuple(tup);
}

}  // namespace fencing::pg

using namespace fencing;
using namespace fencing::pg;

// fencing.fence_state_merge(): BEFORE INSERT ROW trigger of fencing.fence_state.
// A resource's first grant writes its row (frozen) and then the row's index
// entry, two WAL records; a crash between them leaves a row the index does
// not reach, and the next grant writes a second one. pg_dump sees both. So
// that such a dump restores, a loaded row of a resource that already has one
// (found through the index, rows loaded earlier by the same statement
// included) replaces it when its token is newer, and is dropped otherwise.
// The replaced row is removed by the module, as it writes the fence state
// without SQL: a restore by the database's owner may insert, not delete.
// The replacing row is checked by fence_state_loaded like every loaded row.
FENCING_FUNCTION(fencing_fence_state_merge) {
    return guarded("fencing.fence_state_merge", [&]() -> Datum {
        const FenceOids& o = fence_oids();
        if (!CALLED_AS_TRIGGER(fcinfo))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.fence_state_merge must be called as a trigger")));
        TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
        if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
            !TRIGGER_FIRED_BY_INSERT(td->tg_event) || RelationGetRelid(td->tg_relation) != o.state)
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.fence_state_merge must be a BEFORE INSERT ROW trigger of "
                                   "fencing.fence_state")));
        Relation rel = td->tg_relation;
        check_fence_state_layout(rel);
        HeapTuple row = td->tg_trigtuple;
        TupleDesc d = RelationGetDescr(rel);
        bool key_null = false, token_null = false, name_null = false;
        const Datum key = heap_getattr(row, kAttKey, d, &key_null);
        const Datum token = heap_getattr(row, kAttToken, d, &token_null);
        const Datum name = heap_getattr(row, kAttResource, d, &name_null);
        // NOT NULL constraints report these, after BEFORE triggers.
        if (key_null || token_null || name_null) return PointerGetDatum(row);
        text* t = DatumGetTextPP(name);
        ScanKeyData skey[2];
        row_scan_keys(skey, static_cast<std::uint64_t>(DatumGetInt64(key)), VARDATA_ANY(t),
                      static_cast<int>(VARSIZE_ANY_EXHDR(t)));
        SysScanDesc scan = systable_beginscan(rel, o.index, true, SnapshotSelf, 2, skey);
        HeapTuple old = systable_getnext(scan);
        bool keep_new = true;
        if (HeapTupleIsValid(old)) {
            bool isnull = false;
            const std::int64_t stored = DatumGetInt64(heap_getattr(old, kAttToken, d, &isnull));
            if (stored >= DatumGetInt64(token)) {
                keep_new = false;
            } else {
                // The old row may have been inserted by this very statement
                // (an earlier row of the same COPY): make it visible to the
                // deletion, as SPI would between two commands.
                CommandCounterIncrement();
                simple_heap_delete(rel, &old->t_self);
            }
        }
        systable_endscan(scan);
        return keep_new ? PointerGetDatum(row) : compat::null_datum();
    });
}
