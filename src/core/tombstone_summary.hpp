// The per-table summary that lets an INSERT skip the tombstone lookup: per
// table that owns tombstones, a 64-bit generation and the greatest token
// recorded, kept in shared memory (src/pg/tombstone_summary.cpp). The rules
// are here, unit-tested in tests/unit/tombstone_summary_test.cpp.
//
// Generation kUnknown: not looked at since the server started. kNone: the
// table had no tombstone, committed or in progress, when it was looked at,
// and none was recorded since. kTracked (below): it had some, and the
// greatest token covers them. Every tombstone recorded for the table (a
// fenced DELETE, a key-changing UPDATE, tombstones moved to it, a row written
// into fencing.tombstones by SQL) adds kStep before it is written, and raises
// the greatest token to its own if need be, so the generation never returns
// to kNone, and a backend that saw the table can tell at commit how many
// tombstones were recorded since, its own included. A generation that went
// through kNone or kTracked stays odd: no tombstone of the table has a token
// above the greatest token.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>
#include <optional>

namespace fencing::core::tombstone_summary {

inline constexpr std::uint64_t kUnknown = 0;
inline constexpr std::uint64_t kNone = 1;
inline constexpr std::uint64_t kStep = 2;
// What a look at a table with tombstones (the first since the server
// started) leaves: kTracked when it read the greatest of their tokens
// (every tombstone recorded after counts from there), kUntracked when they
// were too many to read (its INSERTs look their keys up until the server
// restarts).
inline constexpr std::uint64_t kTracked = kNone + kStep;
inline constexpr std::uint64_t kUntracked = kUnknown + kStep;

// The first look at a table: how many tombstones it has, committed or in
// progress (`count`, counted up to `limit` + 1), gives the generation to
// start from.
constexpr std::uint64_t after_first_look(std::int64_t count, std::int64_t limit) noexcept {
    return count == 0 ? kNone : count <= limit ? kTracked : kUntracked;
}

// Whether every tombstone of the table was recorded since it had none, so
// that `greatest` bounds their tokens.
constexpr bool tracked(std::uint64_t generation) noexcept { return (generation & 1) == 1; }

// An INSERT with `token` may skip the lookup (and the key lock) while the
// table has no tombstone, or while no tombstone of the table has a token as
// great as its own: a tombstone rejects only a token not above its own. An
// INSERT without a token is rejected whatever the tombstones say.
constexpr bool insert_may_skip(std::uint64_t generation, std::int64_t greatest,
                               std::optional<std::int64_t> token) noexcept {
    if (generation == kNone) return true;
    return tracked(generation) && token.has_value() && *token > greatest;
}

// (1.2) Whether a lookup of a key written with `token` (the least token of
// a run that could reject it) must read the table's runs: unless the table
// is tracked, so that `runs_greatest` bounds the tokens of all its runs
// (those seen at the first look and every one recorded since), and none is
// as great as `token`.
constexpr bool runs_may_reject(std::uint64_t generation, std::int64_t runs_greatest, std::int64_t token) noexcept {
    return !tracked(generation) || runs_greatest >= token;
}

// At commit of a transaction that skipped lookups after seeing generation
// `seen`, with `own` tombstones of the table recorded by itself since:
// whether another transaction recorded one meanwhile.
constexpr bool recorded_by_others(std::uint64_t seen, std::uint64_t now, std::uint64_t own) noexcept {
    return now != seen + kStep * own;
}

// Whether a transaction that skipped lookups of keys it inserted with tokens
// of at least `least` must not commit: another transaction recorded a
// tombstone of the table meanwhile (its DELETE may have removed a row whose
// key this transaction inserted again without being judged against the
// tombstone), and the table's greatest token, now `greatest`, does not rule
// out that the tombstone rejects one of those tokens (this transaction's own
// tombstones raise it too: then the answer errs on the side of refusing).
constexpr bool must_refuse(std::uint64_t seen, std::uint64_t now, std::uint64_t own, std::int64_t least,
                           std::int64_t greatest) noexcept {
    return recorded_by_others(seen, now, own) && (!tracked(now) || greatest >= least);
}

}  // namespace fencing::core::tombstone_summary
