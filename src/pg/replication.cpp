// Logical replication and fencing's own state (1.2).
//
// fencing.fence_state, fencing.key_secret, fencing.tombstones and
// fencing.notify_settings belong to the database they are in: its counter,
// its locks, its secret, the keys deleted from its tables. A publication
// FOR ALL TABLES carries them too (PostgreSQL publishes every permanent
// table, an extension's included, and offers no way to leave one out), and
// a subscriber's apply and table synchronisation workers would load the
// publisher's rows beside its own: the copy of key_secret's one row fails on
// every retry (its unique index), and the publisher's fence state and
// tombstones, under the publisher's keys and table OIDs, would mix with the
// subscriber's. So each of these tables has a BEFORE ROW trigger, enabled
// ALWAYS (it fires in replica mode, as the workers run), that drops every row
// change a logical replication worker makes: the subscription synchronises
// and applies everything else, and the subscriber's fencing state stays its
// own. Any other writer (a restore's COPY, a superuser's hand, also under
// session_replication_role = replica) passes through it unchanged.
#include <limits>

#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/tombstone_summary.hpp"

extern "C" {
#include "commands/trigger.h"
}

FENCING_FUNCTION(fencing_local_state) {
    return fencing::pg::guarded("fencing.local_state", [&]() -> Datum {
        if (!CALLED_AS_TRIGGER(fcinfo))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.local_state() was not called by the trigger manager")));
        TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
        if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.local_state() must be a BEFORE ROW trigger")));
        // A change replicated from another database's fencing state: skipped.
        if (IsLogicalWorker()) return fencing::pg::compat::null_datum();
        // Tombstones and the retirement are taken back by SQL by a superuser
        // only: a role granted DELETE on every table (pg_write_all_data)
        // would let stale writes in again, or a retired database issue
        // tokens. (The module writes tombstones without SQL.)
        const Oid relid = RelationGetRelid(td->tg_relation);
        const bool runs = relid == fencing::pg::fencing_relation(fencing::pg::FencingRel::tombstone_runs);
        const bool tombstones = runs || relid == fencing::pg::fencing_relation(fencing::pg::FencingRel::tombstones);
        const bool retired = relid == fencing::pg::fencing_relation(fencing::pg::FencingRel::retired);
        if ((tombstones || retired) && !TRIGGER_FIRED_BY_INSERT(td->tg_event) && !superuser())
            ereport(ERROR,
                    (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                     errmsg("only a superuser may change or remove rows of fencing.%s", runs         ? "tombstone_runs"
                                                                                        : tombstones ? "tombstones"
                                                                                                     : "retired"),
                     errdetail("%s", tombstones ? "A tombstone removed by hand would let a stale INSERT of "
                                                  "its key in; fencing.forget_tombstones() removes old ones."
                                                : "Taking the row out would let the retired database "
                                                  "issue fencing tokens again.")));
        // A tombstone written by SQL (a superuser's hand, a restore) counts
        // as recorded for the table it names (pg/tombstone_summary.hpp); a
        // run names both in the same columns.
        if (!TRIGGER_FIRED_BY_DELETE(td->tg_event) && tombstones) {
            HeapTuple row = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
            bool isnull = true;
            const Datum tbl = heap_getattr(row, 1, RelationGetDescr(td->tg_relation), &isnull);
            bool token_null = true;
            const Datum token = heap_getattr(row, 3, RelationGetDescr(td->tg_relation), &token_null);
            if (!isnull)
                fencing::pg::tombstone_summary::recorded(
                    DatumGetObjectId(tbl), token_null ? std::numeric_limits<std::int64_t>::max() : DatumGetInt64(token),
                    nullptr, runs);
        }
        return PointerGetDatum(TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple);
    });
}
