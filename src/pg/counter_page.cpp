// The token counter's glue: the sequence page, its WAL records and stamps
// (counter_page.hpp says how; core/counter.hpp decides what to do next).
#include "pg/counter_page.hpp"

#include "pg/catalog_ids.hpp"
#include "pg/clock.hpp"
#include "pg/settings.hpp"

namespace fencing::pg {

namespace {

// The two newest records of the counter this backend has seen (their LSN and
// the value they cover; see next_counter_value). Tokens are usually covered
// by a record that was written long enough ago to be flushed already, so the
// common case needs neither a flush nor a wait. The records are forgotten
// with the counter's relation (DROP/CREATE EXTENSION: fence_oids_generation).
core::SeenRecords seen;
std::uint64_t seen_generation = 0;

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
    const compat::RelFile file = compat::rel_file(rel);
    s.tablespace = file.tablespace;
    s.database = file.database;
    s.relfile = file.relfile;
    s.timeline = compat::wal_insertion_timeline();
    s.server_start = PgStartTime;
    return s;
}

// The incarnation of this backend's database: the LSN of the pg_database
// page that holds the database's row, as this backend last read it (see
// core/counter.hpp, "The incarnation"). pg_database is a shared catalog:
// CREATE DATABASE writes the row (whatever the strategy, the template and the
// OID), no copy of the database carries it, so a counter record written by
// an earlier database under the same OID, or by the database a snapshot was
// taken of, is older than it. A backend reads it once, after it connected
// (after its database was created), and again after an invalidation of the
// row (ALTER DATABASE, datfrozenxid advanced): a value read earlier is never
// greater than the current one, and never older than the row's creation.
XLogRecPtr born_lsn = InvalidXLogRecPtr;
bool born_valid = false;
bool born_callback = false;

void forget_born(Datum, compat::SyscacheId, uint32) { born_valid = false; }

XLogRecPtr incarnation_lsn() {
    if (!born_callback) {
        CacheRegisterSyscacheCallback(DATABASEOID, forget_born, static_cast<Datum>(0));
        born_callback = true;
    }
    if (born_valid) return born_lsn;
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    HeapTuple tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
    if (!HeapTupleIsValid(tup))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cache lookup failed for database %u", MyDatabaseId)));
    BlockNumber block = ItemPointerGetBlockNumber(&tup->t_self);
    ReleaseSysCache(tup);
    Buffer buf = ReadBuffer(rel, block);
    LockBuffer(buf, BUFFER_LOCK_SHARE);
    XLogRecPtr lsn = PageGetLSN(BufferGetPage(buf));
    UnlockReleaseBuffer(buf);
    table_close(rel, AccessShareLock);
    born_lsn = lsn;
    born_valid = true;
    return lsn;
}

bool page_vouched(Relation rel, Page page, XLogRecPtr born) {
    const char* slot = stamp_slot(page);
    if (slot == nullptr) return false;
    core::CounterStamp on_page;
    memcpy(&on_page, slot, sizeof on_page);
    return core::stamp_vouches(on_page, stamp_here(rel), PageGetLSN(page), born);
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

}  // namespace

Issued next_counter_value(Oid seq, std::int64_t floor, core::FloorReach reach) {
    // What this backend saw of an earlier counter relation does not count.
    if (seen_generation != fence_oids_generation()) {
        seen.forget();
        seen_generation = fence_oids_generation();
    }
    if (RecoveryInProgress())
        ereport(ERROR,
                (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot acquire a fencing lock during recovery"),
                 errhint("Acquire fencing locks on the primary.")));
    if (XactReadOnly)
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot acquire a fencing lock in a read-only transaction")));
    // RowExclusiveLock, as nextval takes; the buffer lock serialises all
    // changes of the counter (ours, and setval's by hand).
    // A counter made in this transaction (ALTER SEQUENCE ... RESTART, or a
    // sequence put in its place) is a new page: its rollback would bring
    // back the old one, below the tokens the new one handed out.
    refuse_if_fence_made_here();
    Relation rel = relation_open(seq, RowExclusiveLock);
    // Not unlogged or temporary: crash recovery would reset it. (A counter
    // this transaction created needs no WAL under wal_level = minimal, as
    // in a pg_restore --single-transaction: its page is written out at
    // commit, and the records below are skipped, leaving it unvouched, so
    // that it resumes as a fresh counter after a crash.)
    if (rel->rd_rel->relkind != RELKIND_SEQUENCE || rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.token_seq is not a logged sequence")));
    // Read before the buffer lock: it may read a catalog.
    const XLogRecPtr born = incarnation_lsn();
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
                                  page_vouched(rel, page, born)};
        if (state.vouched)
            seen.observe(Record{state.lsn, state.is_called ? state.last_value + state.log_cnt : state.last_value});
        plan = core::plan_next_token(state, floor, GetRedoRecPtr(), seen.before(), log_ahead(), unix_now_us(), reach);
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

}  // namespace fencing::pg
