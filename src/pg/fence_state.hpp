// Durable fence state: the database-wide token counter and the per-resource
// rows of fencing.fence_state.
//
// Tokens come from one sequence (fencing.token_seq). A sequence WAL-logs 32
// values ahead and flushes only at commit; issue_token() therefore flushes the
// WAL record that covers the token it hands out (a no-op when an earlier call
// already did) and waits for synchronous standbys, before the token leaves the
// backend. So a token is never issued twice: not after an abort, not with
// synchronous_commit = off, not after a crash or a promotion of a synchronous
// standby.
//
// The per-resource row (latest token, grant time, lease) is updated in place
// (a heap "inplace" WAL record: no transaction id, so no commit flush); the
// record is not flushed on its own: any later durable commit (in particular
// one of a write fenced with that token) flushes it. A crash can therefore
// leave current() behind a token that reached no durable write, never behind
// one that did; the counter itself never goes back.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

struct StateRow {
    bool found = false;
    std::int64_t token = 0;
    std::int32_t granted_at = 0;  // seconds since 2000-01-01 UTC
    std::int32_t lease_ms = 0;
    bool written_here = false;  // the row version was written by this transaction (SQL), not by the module
};

// Next token for the resource; records it as the resource's latest token.
// `previous` (when given) receives the latest token the resource had before
// (0 for its first grant).
std::int64_t issue_token(std::uint64_t key, const char* resource, int len, std::int32_t lease_ms,
                         std::int64_t* previous = nullptr);

// The resource's row (found = false when it was never acquired).
StateRow read_state(std::uint64_t key, const char* resource, int len);

// Moves the token counter past `floor` (never backwards): every token issued
// from now on is greater. Within the clock bound (core::floor_limit) unless
// `unbounded`: a floor past it moves nothing and comes back as !moved, with
// the bound it exceeded.
struct Advanced {
    bool moved = false;
    std::int64_t token = 0;  // moved: the counter's value afterwards
    std::int64_t bound = 0;  // !moved: the largest floor accepted
};
Advanced advance_counter_past(std::int64_t floor, bool unbounded);

}  // namespace fencing::pg
