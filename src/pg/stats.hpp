// Statistics of fencing (fencing.stats, fencing.table_stats): counters per
// database, and rejections per table, in shared memory. They exist only when
// fencing is in shared_preload_libraries; otherwise collecting() is false and
// every add is a no-op.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg::stats {

enum Counter : int {
    kGrants,
    kWaits,
    kWaitUs,     // total wait time, microseconds
    kWaitMaxUs,  // longest wait, microseconds (a maximum, not a sum)
    kWaitTimeouts,
    kLeaseExpiries,
    kLost,
    kStaleRejections,
    kStaleSkips,
    kForgets,
    kNotificationsDropped,
    kTableStatsMissed,  // stale writes that could not be counted for their table (no entry left)
    kCounters
};

// At most this many databases have counters at a time (the first ones to
// use fencing; a dropped database's entry goes to the next one that needs
// it).
inline constexpr int kMaxDatabases = 256;

// From _PG_init, before the "fencing." settings prefix is reserved: defines
// fencing.stats_max_tables and requests the shared memory, when the library
// is being preloaded; nothing otherwise.
void init();

// Whether statistics are collected (fencing was preloaded).
inline bool collecting() noexcept;

// Adds n to a counter of this database / raises its maximum to v. Never
// raise an error; safe in a PG_CATCH block and at session exit.
void add(Counter c, std::uint64_t n = 1) noexcept;
void raise_max(Counter c, std::uint64_t v) noexcept;
// Adds n to a counter of database db, if it has counters (the supervisor's
// count of events it could not have sent).
void add_for_database(Oid db, Counter c, std::uint64_t n);
// A stale write (kStaleRejections or kStaleSkips) on table relid: counted
// for the database, and for the table while fencing.stats_max_tables allows
// (otherwise in kTableStatsMissed). A temporary table's counts for the
// database only: it takes no table entry.
void add_table(Oid relid, bool temporary, Counter c);

namespace detail {
extern bool attached;
}
inline bool collecting() noexcept { return detail::attached; }

}  // namespace fencing::pg::stats
