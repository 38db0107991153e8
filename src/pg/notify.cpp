// Notifications of lock events (see notify.hpp), fencing.set_notify and the
// trigger that keeps every session's copy of the settings current.
//
// Settings. Each session keeps the keys of the enabled resources (or "all"),
// read from fencing.notify_settings when first needed and again after an
// invalidation of that table (or of fencing.key_secret: a new secret gives
// every name a new key), which set_notify (and the table's statement
// trigger, for rows written by SQL) sends at commit: a session sees a change
// at its next transaction. Without the table (a database still at 1.0) or
// with nothing enabled, a grant costs a test of a flag.
//
// Events. A notification is queued with Async_Notify in the transaction the
// event happens in, so PostgreSQL sends it at that transaction's commit, in
// commit order, and drops it when the transaction (or the subtransaction)
// aborts: nothing is notified for what did not commit. Transaction-scoped
// grants announce their end just before their transaction commits (they end
// with it). A session that ends while holding session-scoped grants it
// announced hands their "lost" to the supervisor from a before_shmem_exit
// callback, while the lock manager still holds its locks (they are freed
// right after); the supervisor's notifier of the database sends them
// (pg/supervisor.cpp). A backend that crashes (the server then restarts, and
// every listener's connection breaks) hands over nothing.
//
// Bounds. One transaction queues at most kPerTransaction notifications, and
// none once PostgreSQL's notification queue is half full (checked at the
// first event of a transaction and then every kQueueCheckEvery): a full queue
// would make every NOTIFY in the cluster fail at commit, the acquiring
// transaction's included. What is not sent is counted in fencing.stats
// (notifications_dropped) and the transaction gets a WARNING.
#include "pg/notify.hpp"
#include "pg/index_entries.hpp"

#include "pg/lock_options.hpp"

#include "pg/args.hpp"
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/clock.hpp"
#include "pg/key_secret.hpp"
#include "pg/lock_tags.hpp"
#include "pg/stats.hpp"
#include "pg/supervisor.hpp"

#include "core/announcements.hpp"

extern "C" {
#include "catalog/pg_database.h"
#include "commands/async.h"
#include "tcop/utility.h"
}

namespace fencing::pg::notify {

namespace {

constexpr std::uint32_t kPerTransaction = 10000;
constexpr std::uint32_t kQueueCheckEvery = 256;
constexpr double kQueueFullAt = 0.5;
constexpr int kMaxResources = 1000;

// The keys, with the generations (catalog_ids.hpp) they were read under: of
// fencing.notify_settings, of fencing.key_secret (a new resource key secret
// gives every name a new key) and, without the settings table, of every
// relation (any relation may be it once created: ALTER EXTENSION UPDATE).
core::NotifyKeys keys;
bool keys_valid = false;
bool keys_had_table = false;
std::uint64_t keys_settings_generation = 0;
std::uint64_t keys_secret_generation = 0;
std::uint64_t keys_relcache_generation = 0;

core::Announcements grants;
core::NotifyBudget budget(kPerTransaction, kQueueCheckEvery);
bool xact_callbacks_registered = false;

bool keys_current() {
    if (!keys_valid || keys_secret_generation != fencing_relation_generation(FencingRel::key_secret)) return false;
    if (!keys_had_table) return keys_relcache_generation == relcache_generation();
    return keys_settings_generation == fencing_relation_generation(FencingRel::notify_settings);
}

[[noreturn]] void out_of_memory() {
    ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in fencing notifications")));
    pg_unreachable();
}

void load_keys() {
    const Oid settings_relid = fencing_relation(FencingRel::notify_settings);
    (void)fencing_relation(FencingRel::key_secret);
    // Saved before reading: an invalidation arriving meanwhile makes them stale.
    keys_valid = true;
    keys_had_table = OidIsValid(settings_relid);
    keys_settings_generation = fencing_relation_generation(FencingRel::notify_settings);
    keys_secret_generation = fencing_relation_generation(FencingRel::key_secret);
    keys_relcache_generation = relcache_generation();
    std::uint64_t* found = nullptr;
    std::size_t n = 0;
    bool all = false;
    if (OidIsValid(settings_relid)) {
        Relation rel = table_open(settings_relid, AccessShareLock);
        check_notify_settings_layout(rel);
        found = static_cast<std::uint64_t*>(palloc(sizeof(std::uint64_t) * kMaxResources));
        Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
        SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snap, 0, nullptr);
        HeapTuple tup;
        while (HeapTupleIsValid(tup = systable_getnext(scan))) {
            bool isnull = false;
            const Datum v = heap_getattr(tup, 1, RelationGetDescr(rel), &isnull);
            if (isnull) {
                all = true;
            } else if (n < static_cast<std::size_t>(kMaxResources)) {  // rows past the bound (SQL) are ignored
                text* t = DatumGetTextPP(v);
                found[n++] = resource_key_of(VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
            }
        }
        systable_endscan(scan);
        UnregisterSnapshot(snap);
        table_close(rel, AccessShareLock);
    }
    bool failed = false;
    try {
        keys.assign(all, found, n);
    } catch (...) {
        failed = true;
    }
    if (found != nullptr) pfree(found);
    if (failed) {
        keys_valid = false;
        out_of_memory();
    }
}

bool enabled_for(std::uint64_t key) {
    if (!keys_current()) load_keys();
    return keys.enabled(key);
}

double queue_usage() {
    LOCAL_FCINFO(fc, 0);
    InitFunctionCallInfoData(*fc, nullptr, 0, InvalidOid, nullptr, nullptr);
    return DatumGetFloat8(pg_notification_queue_usage(fc));
}

void xact_callback(XactEvent event, void*);
void subxact_callback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void*);

void ensure_xact_callbacks() {
    if (xact_callbacks_registered) return;
    RegisterXactCallback(xact_callback, nullptr);
    RegisterSubXactCallback(subxact_callback, nullptr);
    xact_callbacks_registered = true;
}

// Queues the notification of an event in the current transaction, within the bounds.
void queue_at(const char* resource, std::size_t len, core::LockEvent ev, std::int64_t token, std::int64_t unix_us) {
    ensure_xact_callbacks();
    if (budget.queue_check_due() && queue_usage() >= kQueueFullAt) budget.queue_full();
    if (!budget.admit()) {
        stats::add(stats::kNotificationsDropped);
        return;
    }
    char* payload = static_cast<char*>(palloc(core::kPayloadMax + 1));
    core::event_payload(resource, len, ev, token, unix_us, payload);
    Async_Notify(core::kNotifyChannel, payload);
    pfree(payload);
}

void queue(const char* resource, std::size_t len, core::LockEvent ev, std::int64_t token) {
    queue_at(resource, len, ev, token, unix_now_us());
}

// Just before a commit: the transaction-scoped grants this session announced
// end with the transaction; a grant whose lock is gone (pg_advisory_unlock_all,
// DISCARD ALL) has ended too. One still held at session scope goes on.
void announce_transaction_end() {
    const std::size_t cap = grants.size();
    if (cap == 0) return;
    auto* ks = static_cast<std::uint64_t*>(palloc(sizeof(std::uint64_t) * cap));
    const std::size_t n = grants.copy_keys(ks, cap);
    for (std::size_t i = 0; i < n; ++i) {
        if (held_at_session_scope(ks[i])) {
            grants.mark_session(ks[i]);
            continue;
        }
        const core::Announcements::Grant* g = grants.find(ks[i]);
        if (g == nullptr) continue;
        if (holds_any_mode(resource_tag(ks[i])) || g->session)
            queue(g->resource.data(), g->resource.size(), core::LockEvent::released, g->token);
        grants.remove(ks[i]);
    }
    pfree(ks);
}

void warn_refused() {
    const std::uint32_t refused = budget.refused();
    if (refused == 0) return;
    ereport(WARNING, (errcode(ERRCODE_WARNING),
                      errmsg("%u fencing notification%s of this transaction %s not sent", refused,
                             refused == 1 ? "" : "s", refused == 1 ? "was" : "were"),
                      errdetail("A transaction sends at most %u lock-event notifications, and none while the "
                                "notification queue is half full or more.",
                                kPerTransaction),
                      errhint("Listeners should read fencing.locks when they may have missed events.")));
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
            announce_transaction_end();
            warn_refused();
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            budget.xact_end();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            grants.drop_transaction_grants();
            budget.xact_end();
            break;
        default:
            break;
    }
}

void subxact_callback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB)
        grants.subxact_abort(sub);
    else if (event == SUBXACT_EVENT_COMMIT_SUB)
        grants.subxact_commit(sub, parent);
}

}  // namespace

bool announcing() noexcept { return grants.size() > 0; }

void granted(std::uint64_t key, const char* resource, int len, std::int64_t token, bool session) {
    if (!keys_current()) load_keys();
    // A permit is announced under its resource's name, and enabled by it.
    if (!keys.any() || (!keys.enabled(key) && !keys.enabled(resource_key_of(resource, len)))) return;
    queue(resource, static_cast<std::size_t>(len), core::LockEvent::granted, token);
    bool failed = false;
    try {
        grants.add(key, token, resource, static_cast<std::size_t>(len), session, GetCurrentSubTransactionId());
    } catch (...) {
        failed = true;
    }
    if (failed) out_of_memory();
}

void released(std::uint64_t key) {
    const core::Announcements::Grant* g = grants.find(key);
    if (g == nullptr) return;
    queue(g->resource.data(), g->resource.size(), core::LockEvent::released, g->token);
    grants.remove(key);
}

void event(const char* resource, int len, core::LockEvent ev, std::int64_t token) {
    if (!enabled_for(resource_key_of(resource, len))) return;
    queue(resource, static_cast<std::size_t>(len), ev, token);
}

std::uint64_t session_ending() {
    const std::size_t cap = grants.size();
    if (cap == 0) return 0;
    std::uint64_t dropped = 0;
    std::uint64_t ks[256];
    // Only grants held at session scope: a transaction-scoped one ends with
    // a transaction that never committed, so it was never announced.
    const std::size_t n = grants.copy_keys(ks, 256);
    for (std::size_t i = 0; i < n; ++i) {
        if (!held_at_session_scope(ks[i])) continue;
        const core::Announcements::Grant* g = grants.find(ks[i]);
        if (g == nullptr) continue;
        if (!supervisor::post_event(core::LockEvent::lost, g->resource.data(), g->resource.size(), g->token)) ++dropped;
    }
    if (cap > n) dropped += cap - n;
    return dropped;
}

Announced announced(std::uint64_t key) noexcept {
    const core::Announcements::Grant* g = grants.find(key);
    if (g == nullptr) return Announced{nullptr, 0, 0};
    return Announced{g->resource.data(), g->resource.size(), g->token};
}

void send_event(const char* resource, std::size_t len, core::LockEvent ev, std::int64_t token, std::int64_t unix_us) {
    queue_at(resource, len, ev, token, unix_us);
}

}  // namespace fencing::pg::notify

using namespace fencing;
using namespace fencing::pg;

// fencing.set_notify(resource text, enabled boolean DEFAULT true): enables or
// disables the notifications of a resource, or (resource NULL) of every
// resource of the database. At most 1000 resources per database. Writes
// fencing.notify_settings on the caller's behalf (EXECUTE is the privilege);
// the change reaches every session at its next transaction after the commit.
FENCING_FUNCTION(fencing_set_notify) {
    return guarded("fencing.set_notify", [&]() -> Datum {
        if (PG_ARGISNULL(1))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("enabled must not be null")));
        const bool enable = PG_GETARG_BOOL(1);
        const bool all = PG_ARGISNULL(0);
        Resource r{nullptr, 0, 0};
        if (!all) r = resource_arg(fcinfo, 0);
        PreventCommandIfReadOnly("fencing.set_notify()");
        const Oid relid = fencing_relation(FencingRel::notify_settings);
        if (!OidIsValid(relid))
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("fencing.notify_settings does not exist"),
                            errhint("Update the extension: ALTER EXTENSION fencing UPDATE.")));
        // Self-conflicting: concurrent calls take turns, each seeing the
        // others' committed rows (the bound and the uniqueness hold).
        Relation rel = table_open(relid, ShareRowExclusiveLock);
        check_notify_settings_layout(rel);
        const TupleDesc desc = RelationGetDescr(rel);
        int named = 0;
        int nmatch = 0;
        int cap = 4;
        auto* matches = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * cap));
        Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
        SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snap, 0, nullptr);
        HeapTuple tup;
        while (HeapTupleIsValid(tup = systable_getnext(scan))) {
            bool isnull = false;
            const Datum v = heap_getattr(tup, 1, desc, &isnull);
            bool match = false;
            if (isnull) {
                match = all;
            } else {
                ++named;
                if (!all) {
                    text* t = DatumGetTextPP(v);
                    match =
                        VARSIZE_ANY_EXHDR(t) == static_cast<Size>(r.len) && memcmp(VARDATA_ANY(t), r.data, r.len) == 0;
                }
            }
            if (!match) continue;
            if (nmatch == cap) {
                cap *= 2;
                matches = static_cast<ItemPointerData*>(repalloc(matches, sizeof(ItemPointerData) * cap));
            }
            matches[nmatch++] = tup->t_self;
        }
        systable_endscan(scan);
        UnregisterSnapshot(snap);

        bool changed = false;
        if (enable && nmatch == 0) {
            if (!all && named >= notify::kMaxResources)
                ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                                errmsg("notifications are enabled for %d resources already", named),
                                errdetail("A database may enable the notifications of at most %d resources by name.",
                                          notify::kMaxResources),
                                errhint("Disable some with fencing.set_notify(resource, false), or enable every "
                                        "resource of the database with fencing.set_notify(NULL).")));
            Datum v = all ? (Datum)0 : PointerGetDatum(cstring_to_text_with_len(r.data, r.len));
            bool isnull = all;
            HeapTuple row = heap_form_tuple(desc, &v, &isnull);
            simple_heap_insert(rel, row);
            (void)insert_other_index_entries(rel, InvalidOid, row, false);
            heap_freetuple(row);
            changed = true;
        } else if (!enable) {
            for (int i = 0; i < nmatch; ++i) simple_heap_delete(rel, &matches[i]);
            changed = nmatch > 0;
        }
        pfree(matches);
        if (changed) {
            CacheInvalidateRelcacheByRelid(relid);
            CommandCounterIncrement();
        }
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction
        PG_RETURN_VOID();
    });
}

namespace {

int compare_texts(const void* a, const void* b) {
    const text* x = *static_cast<text* const*>(a);
    const text* y = *static_cast<text* const*>(b);
    const Size lx = VARSIZE_ANY_EXHDR(x), ly = VARSIZE_ANY_EXHDR(y);
    const int c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));
    if (c != 0) return c;
    return lx < ly ? -1 : lx > ly ? 1 : 0;
}

}  // namespace

// The statement trigger of fencing.notify_settings: rows written by SQL (a
// restore's COPY, the database owner's or a superuser's INSERT) reach every
// session's settings at its next transaction, as set_notify's do; and they
// keep set_notify's rules: each name once and one database-wide row at most
// (23505: the table is a set, as set_notify keeps it, so that its size is
// bounded and the bound counts names), and a statement that leaves more
// than kMaxResources resources by name fails (54000), whole. The rows are counted under a
// self-conflicting lock that does not conflict with writers (SHARE UPDATE
// EXCLUSIVE: concurrent writing statements count in turn, each seeing the
// rows of those that committed before it) and that waits for set_notify
// (SHARE ROW EXCLUSIVE), after the statement's own rows were made visible.
FENCING_FUNCTION(fencing_notify_settings_changed) {
    return guarded("fencing.notify_settings_changed", [&]() -> Datum {
        if (!CALLED_AS_TRIGGER(fcinfo))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.notify_settings_changed() was not called by the trigger manager")));
        const TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
        const Oid relid = RelationGetRelid(td->tg_relation);
        if (TRIGGER_FIRED_BY_INSERT(td->tg_event) || TRIGGER_FIRED_BY_UPDATE(td->tg_event)) {
            LockRelationOid(relid, ShareUpdateExclusiveLock);
            CommandCounterIncrement();
            check_notify_settings_layout(td->tg_relation);
            int named = 0;
            int whole = 0;
            int cap = 64;
            auto* names = static_cast<text**>(palloc(sizeof(text*) * cap));
            Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
            SysScanDesc scan = systable_beginscan(td->tg_relation, InvalidOid, false, snap, 0, nullptr);
            HeapTuple tup;
            while (HeapTupleIsValid(tup = systable_getnext(scan))) {
                bool isnull = false;
                const Datum v = heap_getattr(tup, 1, RelationGetDescr(td->tg_relation), &isnull);
                if (isnull) {
                    ++whole;
                    continue;
                }
                // Past the bound the statement fails anyway: stop collecting.
                if (named > notify::kMaxResources) {
                    ++named;
                    continue;
                }
                if (named == cap) {
                    cap *= 2;
                    names = static_cast<text**>(repalloc(names, sizeof(text*) * cap));
                }
                names[named++] = DatumGetTextPCopy(v);
            }
            systable_endscan(scan);
            UnregisterSnapshot(snap);
            if (whole > 1)
                ereport(ERROR, (errcode(ERRCODE_UNIQUE_VIOLATION),
                                errmsg("fencing.notify_settings would have %d rows for the whole database", whole),
                                errdetail("The row with a NULL resource enables the notifications of every resource "
                                          "of the database; there is one at most."),
                                errhint("Enable them with fencing.set_notify(NULL), which keeps one row.")));
            const int collected = Min(named, notify::kMaxResources + 1);
            if (collected > 1) {
                qsort(names, static_cast<size_t>(collected), sizeof(text*), compare_texts);
                for (int i = 1; i < collected; ++i)
                    if (compare_texts(&names[i - 1], &names[i]) == 0)
                        ereport(ERROR, (errcode(ERRCODE_UNIQUE_VIOLATION),
                                        errmsg("fencing.notify_settings would name resource \"%s\" twice",
                                               text_to_cstring(names[i])),
                                        errdetail("The table is the set of resources whose notifications are "
                                                  "enabled; each is named once."),
                                        errhint("Enable a resource with fencing.set_notify(resource), which "
                                                "writes it once.")));
            }
            if (named > notify::kMaxResources)
                ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                                errmsg("fencing.notify_settings would enable notifications for %d resources", named),
                                errdetail("A database may enable the notifications of at most %d resources by name.",
                                          notify::kMaxResources),
                                errhint("Disable some with fencing.set_notify(resource, false), or enable every "
                                        "resource of the database with fencing.set_notify(NULL).")));
        }
        CacheInvalidateRelcacheByRelid(relid);
        return compat::null_datum();
    });
}
