// Orchestration of a grant: draw a token from the counter (counter_page),
// record it in the resource's row (resource_rows), make it durable
// (durability) before it leaves the backend.
#include "pg/fence_state.hpp"

#include "pg/catalog_ids.hpp"
#include "pg/counter_page.hpp"
#include "pg/durability.hpp"
#include "pg/key_secret.hpp"
#include "pg/resource_rows.hpp"

namespace fencing::pg {

std::int64_t issue_token(std::uint64_t key, const char* resource, int len, std::int32_t lease_ms,
                         std::int64_t* previous) {
    const FenceOids& o = fence_oids();
    const Oid state_oid = o.state, seq_oid = o.seq;
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
    check_fence_state_layout(rel);
    // Emptied by crash recovery, an unlogged fence state would forget every
    // grant (ALTER TABLE ... SET UNLOGGED by a superuser).
    if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.fence_state is not a logged table"),
                        errhint("Make it logged again: ALTER TABLE fencing.fence_state SET LOGGED.")));
    const Oid index_oid = state_index();
    // The lock was taken under the key of the secret this backend knew; a
    // new secret committed meanwhile (which had to wait for no lock to be
    // held, and holds the fence state until it commits) makes it the wrong
    // lock.
    check_key_current(key, resource, len);
    std::int32_t now = now_seconds();
    for (;;) {
        std::int64_t stored = 0;
        Recorded r = record_in_place(rel, index_oid, key, resource, len, issued.token, now, lease_ms, &stored);
        if (previous != nullptr) *previous = r == Recorded::missing ? 0 : stored;
        if (r == Recorded::updated) break;
        if (r == Recorded::missing) {
            if (insert_row(rel, index_oid, key, resource, len, issued.token, now, lease_ms)) break;
            continue;  // a row of the resource was being loaded: record the grant there
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

    make_covering_durable(issued.covering.lsn);
    return issued.token;
}

StateRow read_state(std::uint64_t key, const char* resource, int len) {
    Relation rel = table_open(fence_oids().state, AccessShareLock);
    check_fence_state_layout(rel);
    StateRow row = lookup_row(rel, state_index(), key, resource, len);
    table_close(rel, AccessShareLock);
    return row;
}

Advanced advance_counter_past(std::int64_t floor, bool unbounded) {
    const FenceOids& o = fence_oids();
    Issued issued =
        next_counter_value(o.seq, floor, unbounded ? core::FloorReach::unbounded : core::FloorReach::clock_bound);
    Advanced out;
    if (issued.beyond_bound != 0) {
        out.bound = issued.beyond_bound;
        return out;
    }
    make_covering_durable(issued.covering.lsn);
    out.moved = true;
    out.token = issued.token;
    return out;
}

}  // namespace fencing::pg
