// Statistics in shared memory: fencing.stats, fencing.table_stats,
// fencing.reset_stats.
//
// One array of entries, allocated when the library is preloaded: an entry per
// database that used fencing (at most kMaxDatabases at a time), and an entry
// per table with a stale write (at most fencing.stats_max_tables, in all
// databases; temporary tables take none). Counters are atomics, written
// without a lock; the LWLock only guards which entry belongs to whom. A
// backend keeps a pointer to its database's entry (given away only once the
// database is dropped, when no backend is connected to it) and a small cache
// of table entries, checked against a generation that moves whenever a table
// entry is given away (reset_stats, the pruning of dropped tables and
// databases). When the table
// entries are used up, a table's stale writes count for its database only,
// and in its kTableStatsMissed: from then on (until reset_stats) the
// database's tables without an entry may have missed some, and
// fencing.table_stats shows NULL for them rather than a 0 that may be false.
// Entries of tables that no longer exist are given away, at most once a
// second, to the next table that needs one; only when they are gone for good
// (a DROP or CREATE not committed yet keeps the entry: giving it away would
// lose counts nothing else records, and the table would show a false 0).
// Entries of dropped databases go when a table or a database needs one and
// none is free. An entry's reset_at says since
// when its counts are complete (its database's reset while nothing was
// missed, else the moment it was taken).
#include "pg/stats.hpp"

#include "pg/bridge.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/shmem.h"
}

namespace fencing::pg::stats {

namespace detail {
bool attached = false;
}

namespace {

constexpr const char* kTranche = "fencing";
constexpr const char* kNotPreloaded =
    "fencing is not in shared_preload_libraries: statistics are not collected (add it there and restart the server)";
constexpr const char* kTooManyDatabases =
    "statistics are kept for at most 256 databases at a time, and existing databases hold them all; this database has "
    "none";

struct Entry {
    Oid db;   // InvalidOid: free
    Oid rel;  // InvalidOid: the database's own entry
    pg_atomic_uint64 c[kCounters];
    pg_atomic_uint64 reset_at;  // TimestampTz
};

struct Shared {
    LWLock* lock;
    TimestampTz started;
    pg_atomic_uint32 generation;  // moves when a table entry is given away
    pg_atomic_uint64 last_prune;  // TimestampTz
    int capacity;
    int databases;  // entries in use, under lock
    int tables;
};

int max_tables = 1000;
Shared* shared = nullptr;
Entry* entries = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

Entry* my_db = nullptr;
bool my_db_unavailable = false;  // none, and none of a dropped database to take
bool my_db_unchecked = false;    // none, and the dropped databases not looked up yet

struct TableSlot {
    Oid rel;
    std::uint32_t generation;
    Entry* entry;  // nullptr: no entry (full)
};
constexpr int kTableSlots = 16;
TableSlot table_cache[kTableSlots];

Size shared_size() { return add_size(MAXALIGN(sizeof(Shared)), mul_size(kMaxDatabases + max_tables, sizeof(Entry))); }

void request() {
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTranche, 1);
}

void startup() {
    if (previous_startup_hook) previous_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    void* mem = ShmemInitStruct("fencing statistics", shared_size(), &found);
    shared = static_cast<Shared*>(mem);
    entries = reinterpret_cast<Entry*>(static_cast<char*>(mem) + MAXALIGN(sizeof(Shared)));
    if (!found) {
        shared->lock = &(GetNamedLWLockTranche(kTranche))->lock;
        shared->started = GetCurrentTimestamp();
        pg_atomic_init_u32(&shared->generation, 0);
        pg_atomic_init_u64(&shared->last_prune, 0);
        shared->capacity = kMaxDatabases + max_tables;
        shared->databases = shared->tables = 0;
        for (int i = 0; i < shared->capacity; ++i) {
            entries[i].db = entries[i].rel = InvalidOid;
            for (auto& c : entries[i].c) pg_atomic_init_u64(&c, 0);
            pg_atomic_init_u64(&entries[i].reset_at, 0);
        }
    }
    LWLockRelease(AddinShmemInitLock);
    detail::attached = true;
}

Entry* find_locked(Oid db, Oid rel) {
    for (int i = 0; i < shared->capacity; ++i)
        if (entries[i].db == db && entries[i].rel == rel) return &entries[i];
    return nullptr;
}

void zero(Entry* e, TimestampTz reset_at) {
    for (auto& c : e->c) pg_atomic_write_u64(&c, 0);
    pg_atomic_write_u64(&e->reset_at, static_cast<std::uint64_t>(reset_at));
}

// Takes a free entry for (db, rel), counting since reset_at; under the
// exclusive lock, with room checked.
Entry* claim_locked(Oid db, Oid rel, TimestampTz reset_at) {
    for (int i = 0; i < shared->capacity; ++i) {
        Entry* e = &entries[i];
        if (e->db != InvalidOid) continue;
        zero(e, reset_at);
        e->rel = rel;
        e->db = db;
        if (rel == InvalidOid)
            ++shared->databases;
        else
            ++shared->tables;
        return e;
    }
    return nullptr;
}

void release_locked(Entry* e) {
    e->db = e->rel = InvalidOid;
    --shared->tables;
}

// This database's entry, taken if there is room. may_look_up: the caller
// may read the catalog (a trigger, an SQL function; not a PG_CATCH block or
// the session's exit), so that, when all are taken, the entries of dropped
// databases are given away first. Without that look-up a miss is not
// remembered: the next caller that may look up tries again.
bool release_dropped_databases();

Entry* database_entry(bool may_look_up) {
    if (my_db != nullptr || my_db_unavailable || !detail::attached || !OidIsValid(MyDatabaseId)) return my_db;
    if (my_db_unchecked && !may_look_up) return nullptr;
    LWLockAcquire(shared->lock, LW_SHARED);
    Entry* e = find_locked(MyDatabaseId, InvalidOid);
    LWLockRelease(shared->lock);
    for (int attempt = 0; attempt < 2 && e == nullptr; ++attempt) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        e = find_locked(MyDatabaseId, InvalidOid);
        const bool full = shared->databases >= kMaxDatabases;
        if (e == nullptr && !full) e = claim_locked(MyDatabaseId, InvalidOid, shared->started);
        LWLockRelease(shared->lock);
        if (e != nullptr || !may_look_up || !full || attempt > 0 || !release_dropped_databases()) break;
    }
    my_db = e;
    my_db_unavailable = e == nullptr && may_look_up;
    my_db_unchecked = e == nullptr && !may_look_up;
    return e;
}

// Whether relation rel of this database is gone for good: not in the
// catalog, and not locked by a transaction that may still bring it back.
// This transaction's own DROP (not committed yet) holds a lock on it;
// another's CREATE, not committed yet (invisible to the catalog look-up),
// holds its AccessExclusiveLock until it ends, as does a DROP. Looked up
// again after the lock is taken, which accepts the invalidations of what
// committed meanwhile.
bool relation_gone(Oid rel) {
    if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rel))) return false;
    LOCKTAG tag;
    SET_LOCKTAG_RELATION(tag, MyDatabaseId, rel);
    for (LOCKMODE m = AccessShareLock; m <= AccessExclusiveLock; ++m)
        if (compat::lock_held_by_me(&tag, m)) return false;
    if (!ConditionalLockRelationOid(rel, AccessShareLock)) return false;
    const bool exists = SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rel));
    UnlockRelationOid(rel, AccessShareLock);
    return !exists;
}

// Gives away every entry (its own and its tables') of the databases that no
// longer exist (pg_database is shared: any database can tell). A database's
// entries are only taken by sessions connected to it, and none can be
// connected to a dropped database. Returns whether any was given away.
bool release_dropped_databases() {
    Oid* dbs = static_cast<Oid*>(palloc(sizeof(Oid) * (shared->capacity + 1)));
    int n = 0;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (int i = 0; i < shared->capacity; ++i) {
        const Oid db = entries[i].db;
        if (db == InvalidOid || db == MyDatabaseId) continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; ++j) seen = dbs[j] == db;
        if (!seen) dbs[n++] = db;
    }
    LWLockRelease(shared->lock);
    int gone = 0;
    for (int i = 0; i < n; ++i)
        if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbs[i]))) dbs[gone++] = dbs[i];
    if (gone > 0) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < shared->capacity; ++i) {
            Entry* e = &entries[i];
            if (e->db == InvalidOid) continue;
            for (int j = 0; j < gone; ++j) {
                if (e->db != dbs[j]) continue;
                if (e->rel == InvalidOid) {
                    e->db = InvalidOid;
                    --shared->databases;
                } else {
                    release_locked(e);
                }
                break;
            }
        }
        pg_atomic_fetch_add_u32(&shared->generation, 1);
        LWLockRelease(shared->lock);
    }
    pfree(dbs);
    return gone > 0;
}

// Gives away the entries of this database's tables that are gone for good
// (relation_gone), and those of dropped databases, at most once a second
// (cluster-wide). The relations are looked up without the LWLock held.
void prune_dropped_tables() {
    const TimestampTz now = GetCurrentTimestamp();
    const std::uint64_t last = pg_atomic_read_u64(&shared->last_prune);
    if (now - static_cast<TimestampTz>(last) < USECS_PER_SEC) return;
    std::uint64_t expected = last;
    if (!pg_atomic_compare_exchange_u64(&shared->last_prune, &expected, static_cast<std::uint64_t>(now))) return;
    release_dropped_databases();
    Oid* rels = static_cast<Oid*>(palloc(sizeof(Oid) * (max_tables + 1)));
    int n = 0;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (int i = 0; i < shared->capacity && n < max_tables; ++i)
        if (entries[i].db == MyDatabaseId && entries[i].rel != InvalidOid) rels[n++] = entries[i].rel;
    LWLockRelease(shared->lock);
    int gone = 0;
    for (int i = 0; i < n; ++i)
        if (relation_gone(rels[i])) rels[gone++] = rels[i];
    if (gone > 0) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < gone; ++i)
            if (Entry* e = find_locked(MyDatabaseId, rels[i])) release_locked(e);
        pg_atomic_fetch_add_u32(&shared->generation, 1);
        LWLockRelease(shared->lock);
    }
    pfree(rels);
}

// The entry of table relid of this database (db: its entry), taken if there
// is room; nullptr when there is none. *generation: the generation before
// the look-up (an entry given away after it moves the generation).
Entry* table_entry(Oid relid, Entry* db, std::uint32_t* generation) {
    TableSlot& slot = table_cache[relid % kTableSlots];
    const std::uint32_t gen = pg_atomic_read_u32(&shared->generation);
    *generation = gen;
    if (slot.rel == relid && slot.generation == gen) return slot.entry;
    LWLockAcquire(shared->lock, LW_SHARED);
    Entry* e = find_locked(MyDatabaseId, relid);
    LWLockRelease(shared->lock);
    if (e == nullptr) {
        const TimestampTz now = GetCurrentTimestamp();
        for (int attempt = 0; attempt < 2 && e == nullptr; ++attempt) {
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            e = find_locked(MyDatabaseId, relid);
            const bool full = shared->tables >= max_tables;
            if (e == nullptr && !full) {
                // Complete since the database's reset unless a stale write of
                // the database went uncounted since: it may have been this
                // table's, so the entry counts from now.
                const bool missed = pg_atomic_read_u64(&db->c[kTableStatsMissed]) > 0;
                e = claim_locked(MyDatabaseId, relid,
                                 missed ? now : static_cast<TimestampTz>(pg_atomic_read_u64(&db->reset_at)));
            }
            LWLockRelease(shared->lock);
            if (e == nullptr && full && attempt == 0)
                prune_dropped_tables();
            else
                break;
        }
    }
    slot = TableSlot{relid, gen, e};
    return e;
}

Datum interval_ms(std::uint64_t us) { return Float8GetDatum(static_cast<double>(us) / 1000.0); }

}  // namespace

void init() {
    if (!process_shared_preload_libraries_in_progress) return;
    DefineCustomIntVariable("fencing.stats_max_tables",
                            "Number of tables whose stale writes fencing.table_stats counts.",
                            "Tables beyond it count in their database's totals only. Takes effect at server start.",
                            &max_tables, 1000, 0, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    compat::request_shared_memory(request);
    previous_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup;
}

void add(Counter c, std::uint64_t n) noexcept {
    if (!detail::attached) return;
    if (Entry* e = database_entry(false)) pg_atomic_fetch_add_u64(&e->c[c], n);
}

void add_for_database(Oid db, Counter c, std::uint64_t n) {
    if (!detail::attached || !OidIsValid(db)) return;
    LWLockAcquire(shared->lock, LW_SHARED);
    if (Entry* e = find_locked(db, InvalidOid)) pg_atomic_fetch_add_u64(&e->c[c], n);
    LWLockRelease(shared->lock);
}

void raise_max(Counter c, std::uint64_t v) noexcept {
    if (!detail::attached) return;
    Entry* e = database_entry(false);
    if (e == nullptr) return;
    std::uint64_t old = pg_atomic_read_u64(&e->c[c]);
    while (v > old && !pg_atomic_compare_exchange_u64(&e->c[c], &old, v)) {
    }
}

void add_table(Oid relid, bool temporary, Counter c) {
    if (!detail::attached) return;
    add(c);
    Entry* db = database_entry(true);
    // A temporary table lives in one session, and any role may make many:
    // it takes no entry (fencing.table_stats shows NULL for it).
    if (db == nullptr || temporary) return;
    std::uint32_t gen = 0;
    Entry* e = table_entry(relid, db, &gen);
    if (e == nullptr) {
        pg_atomic_fetch_add_u64(&db->c[kTableStatsMissed], 1);
        // An entry given away since the look-up may have been taken for this
        // very table by a session that did not see the miss yet (both
        // atomics are full barriers: one of the two sees the other). Count
        // the write there too, so that the entry misses nothing it claims.
        std::uint32_t again = 0;
        if (pg_atomic_read_u32(&shared->generation) != gen) e = table_entry(relid, db, &again);
    }
    if (e != nullptr) pg_atomic_fetch_add_u64(&e->c[c], 1);
}

}  // namespace fencing::pg::stats

using namespace fencing::pg;

// fencing.stats_data(): this database's counters, for the fencing.stats view.
// Without the preload (or without room for the database), one row that says
// so, with NULL counters: monitoring keeps working and sees why.
FENCING_FUNCTION(fencing_stats_data) {
    return guarded("fencing.stats_data", [&]() -> Datum {
        TupleDesc desc;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("fencing.stats_data must return a record")));
        desc = BlessTupleDesc(desc);
        constexpr int kCols = 15;
        if (desc->natts != kCols)
            ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                            errmsg("fencing.stats_data has %d columns, expected %d", desc->natts, kCols)));
        Datum v[kCols];
        bool nulls[kCols];
        for (int i = 0; i < kCols; ++i) nulls[i] = true;
        stats::Entry* e = stats::detail::attached ? stats::database_entry(true) : nullptr;
        if (e != nullptr) {
            using namespace stats;
            auto get = [&](Counter c) { return pg_atomic_read_u64(&e->c[c]); };
            const Counter order[] = {
                kGrants, kWaits,           kWaitUs,     kWaitMaxUs, kWaitTimeouts,         kLeaseExpiries,
                kLost,   kStaleRejections, kStaleSkips, kForgets,   kNotificationsDropped, kTableStatsMissed};
            constexpr int kCounted = sizeof(order) / sizeof(order[0]);
            for (int i = 0; i < kCounted; ++i) {
                const std::uint64_t x = get(order[i]);
                v[i] = order[i] == kWaitUs || order[i] == kWaitMaxUs ? interval_ms(x)
                                                                     : Int64GetDatum(static_cast<std::int64_t>(x));
                nulls[i] = false;
            }
            v[kCounted] = TimestampTzGetDatum(static_cast<TimestampTz>(pg_atomic_read_u64(&e->reset_at)));
            nulls[kCounted] = false;
        }
        v[13] = BoolGetDatum(e != nullptr);
        nulls[13] = false;
        if (e == nullptr) {
            v[14] = CStringGetTextDatum(stats::detail::attached ? stats::kTooManyDatabases : stats::kNotPreloaded);
            nulls[14] = false;
        }
        PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, v, nulls)));
    });
}

namespace {
struct TableRow {
    Oid rel;
    std::uint64_t rejections;
    std::uint64_t skips;
    TimestampTz since;
};
struct TableRows {
    int n;
    TableRow* rows;
};
}  // namespace

// fencing.table_stats_data(): this database's table entries (relid, rejections,
// skips, and since when they are complete), for the fencing.table_stats view.
// No rows without the preload.
FENCING_FUNCTION(fencing_table_stats_data) {
    return guarded("fencing.table_stats_data", [&]() -> Datum {
        FuncCallContext* fctx;
        if (SRF_IS_FIRSTCALL()) {
            fctx = SRF_FIRSTCALL_INIT();
            MemoryContext old = MemoryContextSwitchTo(fctx->multi_call_memory_ctx);
            TupleDesc desc;
            if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
                ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                                errmsg("fencing.table_stats_data must return a record")));
            if (desc->natts != 4)
                ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                                errmsg("fencing.table_stats_data has %d columns, expected 4", desc->natts)));
            fctx->tuple_desc = BlessTupleDesc(desc);
            const int cap = stats::detail::attached ? stats::shared->capacity : 0;
            auto* rows = static_cast<TableRows*>(palloc(sizeof(TableRows)));
            rows->rows = static_cast<TableRow*>(palloc(sizeof(TableRow) * (cap + 1)));
            rows->n = 0;
            if (stats::detail::attached) {
                LWLockAcquire(stats::shared->lock, LW_SHARED);
                for (int i = 0; i < cap; ++i) {
                    stats::Entry* e = &stats::entries[i];
                    if (e->db != MyDatabaseId || e->rel == InvalidOid) continue;
                    rows->rows[rows->n++] = TableRow{e->rel, pg_atomic_read_u64(&e->c[stats::kStaleRejections]),
                                                     pg_atomic_read_u64(&e->c[stats::kStaleSkips]),
                                                     static_cast<TimestampTz>(pg_atomic_read_u64(&e->reset_at))};
                }
                LWLockRelease(stats::shared->lock);
            }
            fctx->user_fctx = rows;
            fctx->max_calls = rows->n;
            MemoryContextSwitchTo(old);
        }
        fctx = SRF_PERCALL_SETUP();
        if (fctx->call_cntr >= fctx->max_calls) SRF_RETURN_DONE(fctx);
        const TableRow& r = static_cast<TableRows*>(fctx->user_fctx)->rows[fctx->call_cntr];
        Datum v[4] = {ObjectIdGetDatum(r.rel), Int64GetDatum(static_cast<std::int64_t>(r.rejections)),
                      Int64GetDatum(static_cast<std::int64_t>(r.skips)), TimestampTzGetDatum(r.since)};
        bool nulls[4] = {false, false, false, false};
        SRF_RETURN_NEXT(fctx, HeapTupleGetDatum(heap_form_tuple(fctx->tuple_desc, v, nulls)));
    });
}

// fencing.reset_stats(): this database's counters start again from zero, now;
// its tables' entries are given away. Other databases are untouched.
FENCING_FUNCTION(fencing_reset_stats) {
    return guarded("fencing.reset_stats", [&]() -> Datum {
        if (!stats::detail::attached) {
            ereport(WARNING, (errcode(ERRCODE_WARNING), errmsg("fencing statistics are not collected"),
                              errdetail("%s.", stats::kNotPreloaded)));
            PG_RETURN_VOID();
        }
        stats::Entry* e = stats::database_entry(true);
        if (e == nullptr) {
            ereport(WARNING, (errcode(ERRCODE_WARNING), errmsg("fencing statistics are not collected"),
                              errdetail("%s.", stats::kTooManyDatabases)));
            PG_RETURN_VOID();
        }
        LWLockAcquire(stats::shared->lock, LW_EXCLUSIVE);
        stats::zero(e, GetCurrentTimestamp());
        for (int i = 0; i < stats::shared->capacity; ++i)
            if (stats::entries[i].db == MyDatabaseId && stats::entries[i].rel != InvalidOid)
                stats::release_locked(&stats::entries[i]);
        pg_atomic_fetch_add_u32(&stats::shared->generation, 1);
        LWLockRelease(stats::shared->lock);
        PG_RETURN_VOID();
    });
}
