// The per-table tombstone summary in shared memory (see
// tombstone_summary.hpp and core/tombstone_summary.hpp).
//
// A fixed table of slots, open addressing on (database, table): a slot is
// claimed by a compare-and-swap of its key and never given back (a table
// dropped keeps it; a table that later gets its OID starts from what it
// says, which can only make INSERTs look keys up). When every slot is
// taken, tables without one look their keys up, as without the preload.
#include "pg/tombstone_summary.hpp"

#include "core/tombstone_summary.hpp"

#include <limits>
#include <type_traits>

extern "C" {
#include "commands/dbcommands.h"
#include "nodes/parsenodes.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
}

namespace fencing::pg::tombstone_summary {

namespace core = fencing::core::tombstone_summary;

namespace {

struct Slot {
    pg_atomic_uint64 key;  // (database << 32) | table; 0: free
    pg_atomic_uint64 generation;
    // The greatest token of a tombstone recorded since the server started
    // (an int64's bits). Only ever raised, before the generation moves on:
    // a backend that reads the generation and then this sees every token
    // the generation counts.
    pg_atomic_uint64 greatest;
    // (1.2) The same for the tombstones recorded in runs, raised before
    // greatest.
    pg_atomic_uint64 runs_greatest;
};
static_assert(std::is_trivially_destructible_v<Slot>);

constexpr int kSlots = 8192;
// A table with more rows of tombstones than this at the first look (what
// the look reads: a row of fencing.tombstones, or of fencing.tombstone_runs,
// each) is not tracked: its INSERTs look their keys up until the server
// restarts.
constexpr std::int64_t kSurveyLimit = 100000;
Slot* slots = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

constexpr std::int64_t kLowest = std::numeric_limits<std::int64_t>::min();
std::uint64_t bits_of(std::int64_t token) { return static_cast<std::uint64_t>(token); }
std::int64_t token_of(std::uint64_t bits) { return static_cast<std::int64_t>(bits); }

// The generation, then the greatest token (see Slot).
struct Seen {
    std::uint64_t generation;
    std::int64_t greatest;
};
Seen read_slot(Slot* s) {
    Seen seen;
    seen.generation = pg_atomic_read_u64(&s->generation);
    pg_read_barrier();
    seen.greatest = token_of(pg_atomic_read_u64(&s->greatest));
    return seen;
}

Size shared_size() { return mul_size(kSlots, sizeof(Slot)); }

void request() { RequestAddinShmemSpace(shared_size()); }

void startup() {
    if (previous_startup_hook) previous_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    slots = static_cast<Slot*>(ShmemInitStruct("fencing tombstone summary", shared_size(), &found));
    if (!found)
        for (int i = 0; i < kSlots; ++i) {
            pg_atomic_init_u64(&slots[i].key, 0);
            pg_atomic_init_u64(&slots[i].generation, core::kUnknown);
            pg_atomic_init_u64(&slots[i].greatest, bits_of(kLowest));
            pg_atomic_init_u64(&slots[i].runs_greatest, bits_of(kLowest));
        }
    LWLockRelease(AddinShmemInitLock);
}

std::uint64_t key_of(Oid owner) { return (static_cast<std::uint64_t>(MyDatabaseId) << 32) | owner; }

// The table's slot, claimed if it has none; nullptr when all are taken.
Slot* find(Oid owner) {
    if (slots == nullptr || !OidIsValid(owner) || !OidIsValid(MyDatabaseId)) return nullptr;
    const std::uint64_t key = key_of(owner);
    std::uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
    for (int probe = 0; probe < kSlots; ++probe) {
        Slot* s = &slots[(h >> 40) % kSlots];
        std::uint64_t k = pg_atomic_read_u64(&s->key);
        if (k == 0) {
            std::uint64_t expected = 0;
            if (pg_atomic_compare_exchange_u64(&s->key, &expected, key)) return s;
            k = expected;
        }
        if (k == key) return s;
        h += UINT64_C(1) << 40;
    }
    return nullptr;
}

// This backend's slots of recent tables (slots never move).
struct Cached {
    Oid owner;
    Slot* slot;
};
constexpr int kCached = 16;
Cached cache[kCached];
int cache_next = 0;

Slot* slot_of(Oid owner) {
    for (const Cached& c : cache)
        if (c.owner == owner && c.slot != nullptr) return c.slot;
    Slot* s = find(owner);
    if (s != nullptr) {
        cache[cache_next] = Cached{owner, s};
        cache_next = (cache_next + 1) % kCached;
    }
    return s;
}

// The tables this transaction inserted into without lookups: what their
// generation was, how many tombstones of theirs it recorded since, and the
// least token it inserted with.
struct Skipping {
    Oid owner;
    Slot* slot;
    std::uint64_t seen;
    std::uint64_t own;
    std::int64_t least;
};
constexpr int kSkipping = 32;
Skipping skipping[kSkipping];
int nskipping = 0;
bool callback_registered = false;

void verify() {
    for (int i = 0; i < nskipping; ++i) {
        const Skipping& s = skipping[i];
        const Seen now = read_slot(s.slot);
        if (!core::must_refuse(s.seen, now.generation, s.own, s.least, now.greatest)) continue;
        const char* name = get_rel_name(s.owner);
        nskipping = 0;
        ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                        errmsg("could not check the inserted keys of relation \"%s\" against its tombstones",
                               name != nullptr ? name : "?"),
                        errdetail("The table had no tombstone with a token as great as those this transaction "
                                  "inserted with, so its INSERTs did not look their keys up; another transaction "
                                  "has recorded a tombstone of the table since, and a key this transaction "
                                  "inserted may be one it deleted."),
                        errhint("Retry the transaction.")));
    }
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            verify();
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PREPARE:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
            nskipping = 0;
            break;
        default:
            break;
    }
}

// A database dropped takes its tables' tombstones with it, and a database
// created later may get its OID (CREATE DATABASE ... OID, or a wrapped
// counter) with tables of the same OIDs copied from a template that has
// tombstones: what its slots' generations say is forgotten (the greatest
// tokens only grow, which can only make INSERTs look keys up), before the DROP (no backend
// of it is left to write, once it has begun) and after it (one that ended
// meanwhile may have looked a table up).
void forget_database(Oid db) {
    if (slots == nullptr || !OidIsValid(db)) return;
    for (int i = 0; i < kSlots; ++i)
        if ((pg_atomic_read_u64(&slots[i].key) >> 32) == db) pg_atomic_write_u64(&slots[i].generation, core::kUnknown);
}

ProcessUtility_hook_type previous_process_utility = nullptr;

void utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
             ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    Oid dropped = InvalidOid;
    if (IsA(pstmt->utilityStmt, DropdbStmt))
        dropped = get_database_oid(castNode(DropdbStmt, pstmt->utilityStmt)->dbname, true);
    forget_database(dropped);
    if (previous_process_utility)
        previous_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    forget_database(dropped);
}

}  // namespace

void init() {
    if (!process_shared_preload_libraries_in_progress) return;
    compat::request_shared_memory(request);
    previous_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup;
    previous_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = utility;
}

namespace {

// The first look at a table since the server started (or its database was
// dropped): its tombstones, committed or in progress, are counted and the
// greatest token raised to theirs; unless one was recorded while we looked
// (the generation moved on: it will never be tracked), the generation starts
// from what they say. Every tombstone written after the look began is
// recorded first, and so moves the generation; every one written before is
// seen.
void raise(pg_atomic_uint64* to, std::int64_t token) {
    std::uint64_t current = pg_atomic_read_u64(to);
    while (token_of(current) < token && !pg_atomic_compare_exchange_u64(to, &current, bits_of(token))) {
    }
}

void first_look(Slot* s, Oid owner, Survey survey) {
    std::int64_t greatest = kLowest, runs_greatest = kLowest;
    const std::int64_t count = survey(owner, kSurveyLimit, &greatest, &runs_greatest);
    raise(&s->runs_greatest, runs_greatest);
    if (count > 0) raise(&s->greatest, greatest);
    std::uint64_t expected = core::kUnknown;
    (void)pg_atomic_compare_exchange_u64(&s->generation, &expected, core::after_first_look(count, kSurveyLimit));
}

}  // namespace

void recorded(Oid owner, std::int64_t token, Survey survey, bool run) {
    Slot* s = slot_of(owner);
    if (s == nullptr) return;
    if (survey != nullptr && pg_atomic_read_u64(&s->generation) == core::kUnknown) first_look(s, owner, survey);
    // The greatest tokens first, then the generation (see Slot).
    if (run) raise(&s->runs_greatest, token);
    raise(&s->greatest, token);
    (void)pg_atomic_fetch_add_u64(&s->generation, core::kStep);
    for (int i = 0; i < nskipping; ++i)
        if (skipping[i].slot == s) ++skipping[i].own;
}

bool runs_may_reject(Oid owner, std::int64_t token) {
    Slot* s = slot_of(owner);
    if (s == nullptr) return true;
    const std::uint64_t generation = pg_atomic_read_u64(&s->generation);
    pg_read_barrier();
    return core::runs_may_reject(generation, token_of(pg_atomic_read_u64(&s->runs_greatest)), token);
}

bool insert_may_skip(Oid owner, Survey survey, std::optional<std::int64_t> token) {
    // Already skipping in this transaction: while no tombstone of the table,
    // neither one of this transaction's own (its DELETE of a key it then
    // inserts again) nor another's, has a token as great as this one.
    for (int i = 0; i < nskipping; ++i)
        if (skipping[i].owner == owner) {
            const Seen now = read_slot(skipping[i].slot);
            if (!core::insert_may_skip(now.generation, now.greatest, token)) return false;
            if (token && *token < skipping[i].least) skipping[i].least = *token;
            return true;
        }
    if (nskipping == kSkipping) return false;
    Slot* s = slot_of(owner);
    if (s == nullptr) return false;
    Seen seen = read_slot(s);
    if (seen.generation == core::kUnknown) {
        first_look(s, owner, survey);
        seen = read_slot(s);
    }
    if (!core::insert_may_skip(seen.generation, seen.greatest, token)) return false;
    if (!callback_registered) {
        RegisterXactCallback(xact_callback, nullptr);
        callback_registered = true;
    }
    skipping[nskipping++] =
        Skipping{owner, s, seen.generation, 0, token.value_or(std::numeric_limits<std::int64_t>::max())};
    return true;
}

}  // namespace fencing::pg::tombstone_summary
