// The per-table summary that lets an INSERT skip the tombstone lookup: one
// 64-bit generation per table that owns tombstones, kept in shared memory
// (src/pg/tombstone_summary.cpp). The rules are here, unit-tested in
// tests/unit/tombstone_summary_test.cpp.
//
// kUnknown: not looked at since the server started. kNone: the table had no
// tombstone, committed or in progress, when it was looked at, and none was
// recorded since. Every tombstone recorded for the table (a fenced DELETE, a
// key-changing UPDATE, tombstones moved to it, a row written into
// fencing.tombstones by SQL) adds 2 before it is written, so the generation
// never returns to kNone, and a backend that saw kNone can tell at commit
// how many tombstones were recorded since, its own included.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core::tombstone_summary {

inline constexpr std::uint64_t kUnknown = 0;
inline constexpr std::uint64_t kNone = 1;
inline constexpr std::uint64_t kStep = 2;

// An INSERT may skip the lookup (and the key lock) while the table has none.
constexpr bool insert_may_skip(std::uint64_t generation) noexcept { return generation == kNone; }

// At commit of a transaction that skipped lookups after seeing `seen`
// (kNone), with `own` tombstones of the table recorded by itself since:
// whether another transaction recorded one meanwhile. Its DELETE may have
// removed a row whose key this transaction inserted again without being
// judged against the tombstone, so the transaction must not commit.
constexpr bool recorded_by_others(std::uint64_t seen, std::uint64_t now, std::uint64_t own) noexcept {
    return now != seen + kStep * own;
}

}  // namespace fencing::core::tombstone_summary
