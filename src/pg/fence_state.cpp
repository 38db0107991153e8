#include "pg/fence_state.hpp"

#include "core/counter.hpp"
#include "pg/key_secret.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "replication/walsender.h"
#include "utils/fmgroids.h"
}

namespace fencing::pg {

namespace {

// Column layout of fencing.fence_state; checked once per relcache entry.
constexpr int kAttKey = 1, kAttToken = 2, kAttGrantedAt = 3, kAttLease = 4, kAttResource = 5;
constexpr int kNatts = 5;

struct Oids {
    Oid state = InvalidOid;
    Oid index = InvalidOid;
    Oid seq = InvalidOid;
};
Oids cached;
bool callback_registered = false;

// The two newest records of the counter this backend has seen (their LSN and
// the value they cover; see next_counter_value), and the WAL position it
// knows to be flushed. Tokens are usually covered by a record that was
// written long enough ago to be flushed already, so the common case needs
// neither a flush nor a wait. The records are forgotten with the counter's
// relation (DROP/CREATE EXTENSION).
using Record = core::CounterRecord;
core::SeenRecords seen;
XLogRecPtr known_flushed = InvalidXLogRecPtr;

void invalidate_oids(Datum, Oid relid) {
    if (relid == InvalidOid || relid == cached.state || relid == cached.index || relid == cached.seq) {
        cached = Oids{};
        seen.forget();
    }
}

const Oids& oids() {
    if (OidIsValid(cached.state)) return cached;
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(invalidate_oids, (Datum)0);
        callback_registered = true;
    }
    Oid nsp = get_namespace_oid("fencing", true);
    Oid state = OidIsValid(nsp) ? get_relname_relid("fence_state", nsp) : InvalidOid;
    Oid index = OidIsValid(nsp) ? get_relname_relid("fence_state_pkey", nsp) : InvalidOid;
    Oid seq = OidIsValid(nsp) ? get_relname_relid("token_seq", nsp) : InvalidOid;
    if (!OidIsValid(state) || !OidIsValid(index) || !OidIsValid(seq))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("fencing extension is not installed in this database"),
                        errhint("Run CREATE EXTENSION fencing.")));
    cached = Oids{state, index, seq};
    return cached;
}

void check_layout(Relation rel) {
    TupleDesc d = RelationGetDescr(rel);
    bool ok = d->natts == kNatts && TupleDescAttr(d, kAttKey - 1)->atttypid == INT8OID &&
              TupleDescAttr(d, kAttToken - 1)->atttypid == INT8OID &&
              TupleDescAttr(d, kAttGrantedAt - 1)->atttypid == INT4OID &&
              TupleDescAttr(d, kAttLease - 1)->atttypid == INT4OID &&
              TupleDescAttr(d, kAttResource - 1)->atttypid == TEXTOID;
    if (!ok)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.fence_state has an unexpected layout"),
                        errhint("The table was altered by hand; reinstall the fencing extension.")));
}

// Offsets of the fixed-width columns in a tuple without nulls (check_layout
// guarantees the types, hence the alignment).
constexpr std::size_t kOffKey = 0, kOffToken = 8, kOffGrantedAt = 16, kOffLease = 20;

struct Found {
    bool found = false;
    ItemPointerData tid;
    StateRow row;
};

// A resource's row is found by its key and its name (the primary key): two
// names with the same key (a collision) share the lock but each has a row of
// its own, and never reads or writes the other's.
void row_scan_keys(ScanKeyData* skey, std::uint64_t key, const char* resource, int len) {
    ScanKeyInit(&skey[0], kAttKey, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(static_cast<std::int64_t>(key)));
    ScanKeyEntryInitialize(&skey[1], 0, kAttResource, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID, F_TEXTEQ,
                           PointerGetDatum(cstring_to_text_with_len(resource, len)));
}

Found lookup(Relation rel, Oid index, std::uint64_t key, const char* resource, int len) {
    Found f;
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotSelf, 2, skey);
    HeapTuple tup = systable_getnext(scan);
    if (HeapTupleIsValid(tup)) {
        TupleDesc d = RelationGetDescr(rel);
        bool isnull = false;
        f.found = true;
        f.tid = tup->t_self;
        f.row.found = true;
        f.row.token = DatumGetInt64(heap_getattr(tup, kAttToken, d, &isnull));
        f.row.granted_at = DatumGetInt32(heap_getattr(tup, kAttGrantedAt, d, &isnull));
        f.row.lease_ms = DatumGetInt32(heap_getattr(tup, kAttLease, d, &isnull));
    }
    systable_endscan(scan);
    return f;
}

std::int32_t now_seconds() {
    return static_cast<std::int32_t>(GetCurrentTimestamp() / USECS_PER_SEC);
}

// In-place updates of the resource row: a small heap "inplace" WAL record
// carrying just the tuple (no page image, no transaction id, no commit),
// under the buffer lock (compat.hpp: the minimum minor releases).

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

enum class Recorded {
    updated,  // the row now holds the grant
    missing,  // the resource has no row yet
    behind,   // the row already holds a token >= this one: the counter is behind
};

std::int64_t token_field(HeapTuple tup) {
    std::int64_t t;
    memcpy(&t, reinterpret_cast<char*>(tup->t_data) + tup->t_data->t_hoff + kOffToken, sizeof t);
    return t;
}

// Records the grant in the resource's existing row. The counter can be behind
// a stored token when the rows were restored from a dump of a database whose
// counter was ahead of this one's clock seed: *stored then says how far.
Recorded record_in_place(Relation rel, Oid index, std::uint64_t key, const char* resource, int len,
                         std::int64_t token, std::int32_t granted_at, std::int32_t lease_ms, std::int64_t* stored) {
    ScanKeyData skey[2];
    row_scan_keys(skey, key, resource, len);
    HeapTuple old = nullptr;
    void* state = nullptr;
    compat::inplace_update_begin(rel, index, 2, skey, &old, &state);
    if (old == nullptr) return Recorded::missing;
    bool behind = false;
    PG_TRY();
    {
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
        return Recorded::behind;
    }
    compat::inplace_update_finish(state, old);
    heap_freetuple(old);
    return Recorded::updated;
}

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

// First acquisition of a resource: insert its row. The tuple is inserted
// frozen, so it stays (and is visible to everyone) even if this transaction
// aborts: the token it records was handed out either way.
void insert_row(Relation rel, Oid index, std::uint64_t key, const char* resource, int len, std::int64_t token,
                std::int32_t granted_at, std::int32_t lease_ms) {
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
    heap_freetuple(tup);
}

// Whether synchronous standbys are configured (synchronous_standby_names).
bool sync_standbys_defined() { return compat::sync_standbys_configured(); }

bool sync_standby_confirmed(XLogRecPtr lsn) { return compat::sync_standbys_flushed() >= lsn; }

// The token must be durable before it leaves the backend: locally, and on
// synchronous standbys where they are configured, whatever this session's
// synchronous_commit says.
void make_durable(XLogRecPtr lsn) {
    XLogFlush(lsn);
    if (!sync_standbys_defined()) return;
    // SyncRepWaitForLSN() waits in the mode SyncRepWaitMode says, which only
    // synchronous_commit's assign hook sets: raise the setting through the GUC
    // machinery (so the hook runs) for the wait, and pop it afterwards, on
    // error too (an aborting (sub)transaction pops it as well).
    const bool raise = synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH;
    const int nest = raise ? NewGUCNestLevel() : 0;
    if (raise)
        (void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                                false);
    PG_TRY();
    { SyncRepWaitForLSN(lsn, false); }
    PG_CATCH();
    {
        if (raise) AtEOXact_GUC(false, nest);
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (raise) AtEOXact_GUC(false, nest);
    // The wait ends early only when canceled (a cancel, statement_timeout, or
    // a termination that is on its way): the token must not leave. Not a
    // class-08 code: that would tell connection pools the connection broke.
    if (sync_standbys_defined() && !sync_standby_confirmed(lsn))
        ereport(ERROR, (errcode(ProcDiePending ? ERRCODE_ADMIN_SHUTDOWN : ERRCODE_QUERY_CANCELED),
                        errmsg("fence token was not confirmed by the synchronous standby"),
                        errdetail("The wait for synchronous replication was canceled before the standby flushed the token."),
                        errhint("The token was not handed out; acquire again.")));
}

void check_sync_standby_required() {
    if (!require_sync_standby()) return;
    bool defined = sync_standbys_defined();
    if (!defined)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("fencing.require_sync_standby is on but no synchronous standby is configured"),
                        errdetail("Tokens issued without a synchronous standby can be issued again after a failover."),
                        errhint("Set synchronous_standby_names, or turn fencing.require_sync_standby off.")));
}

// ---------------------------------------------------------------------------
// The token counter. It lives in the page of the sequence fencing.token_seq
// (so the sequence's SQL view of it stays true), but is advanced here with a
// log-ahead of fencing.log_ahead values (default 2^20) instead of the
// sequence's 32. The technique is the sequence's own: under the buffer lock,
// WAL-log the page as it must be after a crash (last_value = the highest
// value covered, log_cnt = 0), then set the page to the value actually handed
// out, counting log_cnt down, without WAL. Redo restores the covered value,
// so no token is issued twice. On the page, last_value + log_cnt is thus what
// the newest record covers.
//
// A token may leave the backend once a record that covers it is flushed. The
// next record is written early, when half of the current one's values are
// handed out, and the WAL writer is asked to flush it; the tokens of the
// second half are still covered by the current record, flushed long ago. By
// the time they run out, the next record is normally flushed too: no
// acquisition waits for a flush. (Waiting for a flush at the end of every
// window stalled acquisitions: profiling found those waits, not CPU, to be
// most of the difference to bare advisory locks. A window of 2^20 tokens
// gives the WAL writer, which flushes at least every wal_writer_delay,
// seconds even at 100,000 acquisitions a second.)
//
// Only records written after the current checkpoint's redo point count:
// recovery replays nothing older. So the first change after a checkpoint is
// always logged, as for sequences (torn-page safety too), and the token it
// hands out waits for that record's flush: one wait per checkpoint.
//
// A page can also be copied or restored without its records: CREATE DATABASE
// (the WAL_LOG strategy logs the copy with a new LSN), tablespace moves, base
// backups and PITR, standbys. Right after each record, the page is therefore
// stamped (CounterStamp, in the unused space between the line pointers and
// the tuple, which the logged image leaves zero) with its relation file, the
// timeline, the server's start time and the record's LSN. Only a page whose
// stamp matches counts down; any other starts over as a fresh counter at the
// clock bound (core/counter.hpp), above every token a copy of it issued.
// ---------------------------------------------------------------------------
Form_pg_sequence_data sequence_tuple(Page page) {
    ItemId lp = PageGetItemId(page, FirstOffsetNumber);
    if (PageGetMaxOffsetNumber(page) < FirstOffsetNumber || !ItemIdIsNormal(lp))
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.token_seq has no tuple")));
    HeapTupleHeader htup = reinterpret_cast<HeapTupleHeader>(PageGetItem(page, lp));
    return reinterpret_cast<Form_pg_sequence_data>(reinterpret_cast<char*>(htup) + htup->t_hoff);
}

// Where the stamp lives: the start of the page's free space, if it fits.
char* stamp_slot(Page page) {
    PageHeader h = reinterpret_cast<PageHeader>(page);
    std::size_t at = MAXALIGN(h->pd_lower);
    if (h->pd_upper < at || h->pd_upper - at < sizeof(core::CounterStamp) || h->pd_upper > BLCKSZ) return nullptr;
    return reinterpret_cast<char*>(page) + at;
}

// The stamp this backend would write on the counter's page (lsn left 0).
core::CounterStamp stamp_here(Relation rel) {
    core::CounterStamp s;
    s.magic = core::kStampMagic;
#if PG_VERSION_NUM >= 160000
    s.tablespace = rel->rd_locator.spcOid;
    s.database = rel->rd_locator.dbOid;
    s.relfile = rel->rd_locator.relNumber;
#else
    s.tablespace = rel->rd_node.spcNode;
    s.database = rel->rd_node.dbNode;
    s.relfile = rel->rd_node.relNode;
#endif
#if PG_VERSION_NUM >= 150000
    s.timeline = GetWALInsertionTimeLine();
#else
    s.timeline = ThisTimeLineID;
#endif
    s.server_start = PgStartTime;
    return s;
}

bool page_vouched(Relation rel, Page page) {
    const char* slot = stamp_slot(page);
    if (slot == nullptr) return false;
    core::CounterStamp on_page;
    memcpy(&on_page, slot, sizeof on_page);
    return core::stamp_vouches(on_page, stamp_here(rel), PageGetLSN(page));
}

// The wall clock in microseconds since 1970 (the unit of the clock bound).
std::int64_t clock_us() {
    return GetCurrentTimestamp() + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

// WAL-logs the counter page as it must be after a crash: covering `covered`.
// Then puts the page at `token` (handed out), counting down to `covered`, and
// stamps it.
Record log_counter(Relation rel, Buffer buf, std::int64_t token, std::int64_t covered) {
    // A full page image: redo always restores it, whatever the LSN of the
    // page on disk. (A delta record would be skipped for a page that was
    // written out after this record, counted down without WAL, with
    // full_page_writes off: redo would keep the counted-down value and
    // reissue the tokens handed out after that write.)
    GenericXLogState* state = GenericXLogStart(rel);
    Page copy = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);
    Form_pg_sequence_data logged = sequence_tuple(copy);
    logged->last_value = covered;
    logged->log_cnt = 0;
    logged->is_called = true;
    // Applies the copy to the buffer, marks it dirty, WAL-logs it and sets
    // the page LSN, all in a critical section.
    XLogRecPtr lsn = GenericXLogFinish(state);
    Page page = BufferGetPage(buf);
    Form_pg_sequence_data seq_data = sequence_tuple(page);
    core::CounterStamp stamp = stamp_here(rel);
    stamp.lsn = lsn;
    char* slot = stamp_slot(page);
    START_CRIT_SECTION();
    seq_data->last_value = token;
    seq_data->log_cnt = covered - token;
    seq_data->is_called = true;
    if (slot != nullptr) memcpy(slot, &stamp, sizeof stamp);
    MarkBufferDirty(buf);
    END_CRIT_SECTION();
    return Record{lsn, covered};
}

struct Issued {
    std::int64_t token;
    Record covering;  // a record covering the token, to be flushed before it leaves
    std::int64_t beyond_bound = 0;  // nonzero: nothing issued, the floor is past this bound
};

// The next token, greater than `floor` too (within the clock bound, unless
// `reach` is unbounded).
Issued next_counter_value(Oid seq, std::int64_t floor, core::FloorReach reach) {
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot acquire a fencing lock during recovery"),
                        errhint("Acquire fencing locks on the primary.")));
    if (XactReadOnly)
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot acquire a fencing lock in a read-only transaction")));
    // RowExclusiveLock, as nextval takes; the buffer lock serialises all
    // changes of the counter (ours, and setval's by hand).
    Relation rel = relation_open(seq, RowExclusiveLock);
    if (rel->rd_rel->relkind != RELKIND_SEQUENCE || !RelationNeedsWAL(rel))
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.token_seq is not a logged sequence")));
    Buffer buf;
    Form_pg_sequence_data seq_data;
    core::CounterPage state;
    core::CounterPlan plan;
    for (;;) {
        buf = ReadBuffer(rel, 0);
        LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
        Page page = BufferGetPage(buf);
        seq_data = sequence_tuple(page);
        state = core::CounterPage{seq_data->last_value, seq_data->log_cnt, seq_data->is_called, PageGetLSN(page),
                                  page_vouched(rel, page)};
        if (state.vouched)
            seen.observe(Record{state.lsn, state.is_called ? state.last_value + state.log_cnt : state.last_value});
        plan = core::plan_next_token(state, floor, GetRedoRecPtr(), seen.before(), log_ahead(), clock_us(), reach);
        if (plan.action != core::CounterAction::wait_for_clock) break;
        // The counter is at the clock bound: wait (without the buffer lock)
        // for the clock to move past it.
        UnlockReleaseBuffer(buf);
        pg_usleep(plan.wait_us < 100000 ? plan.wait_us : 100000);
        CHECK_FOR_INTERRUPTS();
    }
    if (plan.status == core::CounterStatus::exhausted) {
        UnlockReleaseBuffer(buf);
        relation_close(rel, NoLock);
        ereport(ERROR, (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
                        errmsg("fencing token counter reached its maximum value")));
    }
    if (plan.status == core::CounterStatus::beyond_bound) {
        UnlockReleaseBuffer(buf);
        relation_close(rel, NoLock);
        Issued none{0, Record{}, plan.bound};
        return none;
    }
    Issued out{plan.token, plan.covering};
    switch (plan.action) {
        case core::CounterAction::log_now:
            out.covering = log_counter(rel, buf, plan.token, plan.covered);
            seen.observe(out.covering);
            break;
        case core::CounterAction::log_ahead: {
            // Have the WAL writer flush the next record while the current
            // one's values last.
            Record next = log_counter(rel, buf, plan.token, plan.covered);
            seen.observe(next);
            XLogSetAsyncXactLSN(next.lsn);
            break;
        }
        case core::CounterAction::wait_for_clock:
            pg_unreachable();
        case core::CounterAction::count_down:
            START_CRIT_SECTION();
            seq_data->last_value = plan.token;
            seq_data->log_cnt = state.log_cnt - 1;
            seq_data->is_called = true;
            MarkBufferDirty(buf);
            END_CRIT_SECTION();
            break;
    }
    UnlockReleaseBuffer(buf);
    relation_close(rel, NoLock);  // RowExclusiveLock is kept to the end of the transaction, as nextval's
    return out;
}

// Flushes (and has synchronous standbys confirm) the record covering a token.
// With synchronous standbys configured, always check (cheap when the standby
// has already confirmed): they may have been configured, or replaced by a
// lagging one, after this backend last looked.
void make_covering_durable(const Record& covering) {
    if (covering.lsn <= known_flushed && !sync_standbys_defined()) return;
    make_durable(covering.lsn);
    if (covering.lsn > known_flushed) known_flushed = covering.lsn;
}

}  // namespace

std::int64_t issue_token(std::uint64_t key, const char* resource, int len, std::int32_t lease_ms) {
    const Oids& o = oids();
    Oid state_oid = o.state, index_oid = o.index, seq_oid = o.seq;
    check_sync_standby_required();

    // The records written here need no flush at commit: the token's covering
    // record is flushed below before the token leaves, and the row's may wait
    // for the next flush (see fence_state.hpp). Left in XactLastRecEnd, they
    // would make every commit of a transaction without an xid wake the WAL
    // writer (profiling: ~20% of an acquire/release cycle's CPU). A later
    // commit record of this transaction still flushes them, being written
    // after.
    const XLogRecPtr saved_last_rec_end = XactLastRecEnd;
    Issued issued = next_counter_value(seq_oid, 0, core::FloorReach::clock_bound);

    Relation rel = table_open(state_oid, RowExclusiveLock);
    check_layout(rel);
    // The lock was taken under the key of the secret this backend knew; a
    // new secret committed meanwhile (which had to wait for no lock to be
    // held, and holds the fence state until it commits) makes it the wrong
    // lock.
    check_key_current(key, resource, len);
    std::int32_t now = now_seconds();
    for (;;) {
        std::int64_t stored = 0;
        Recorded r = record_in_place(rel, index_oid, key, resource, len, issued.token, now, lease_ms, &stored);
        if (r == Recorded::updated) break;
        if (r == Recorded::missing) {
            if (key_in_use(rel, index_oid, key)) report_shared_key(resource, len);
            insert_row(rel, index_oid, key, resource, len, issued.token, now, lease_ms);
            break;
        }
        // The resource already holds a newer token than the counter's: move
        // the counter past it (the token just drawn is never handed out).
        // Unbounded: only the module and bounded floors write the fence
        // state's tokens, so a stored token past the clock bound was put
        // there by a superuser, and refusing would lock the resource.
        issued = next_counter_value(seq_oid, stored, core::FloorReach::unbounded);
    }
    table_close(rel, RowExclusiveLock);
    if (!TransactionIdIsValid(GetTopTransactionIdIfAny())) XactLastRecEnd = saved_last_rec_end;

    make_covering_durable(issued.covering);
    return issued.token;
}

StateRow read_state(std::uint64_t key, const char* resource, int len) {
    const Oids& o = oids();
    Relation rel = table_open(o.state, AccessShareLock);
    check_layout(rel);
    Found f = lookup(rel, o.index, key, resource, len);
    table_close(rel, AccessShareLock);
    return f.row;
}

Advanced advance_counter_past(std::int64_t floor, bool unbounded) {
    const Oids& o = oids();
    Issued issued =
        next_counter_value(o.seq, floor, unbounded ? core::FloorReach::unbounded : core::FloorReach::clock_bound);
    Advanced out;
    if (issued.beyond_bound != 0) {
        out.bound = issued.beyond_bound;
        return out;
    }
    make_covering_durable(issued.covering);
    out.moved = true;
    out.token = issued.token;
    return out;
}


}  // namespace fencing::pg
