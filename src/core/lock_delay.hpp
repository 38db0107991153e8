// Lock-delays of lost grants.
//
// A grant taken with a lock-delay that ends uncleanly (its session ended
// while holding it: the client went away, the backend was terminated, its
// lease ran out) is not followed by another grant of the resource until the
// delay has passed. The supervisor's table keeps a record of each such delay
// (pg/supervisor.cpp); an acquisition asks it whether one keeps its resource.
// Pure: the glue samples the clock and does the waiting.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

// A lost grant in its delay, as the supervisor's table keeps it.
struct DelayRecord {
    bool used = false;
    bool shared = false;        // the lost grant was a shared hold
    std::uint32_t db = 0;       // its database
    std::uint64_t key = 0;      // its resource's key
    std::int64_t until_us = 0;  // when the delay ends (a monotonic clock)
};

// Whether the record keeps key of database db from being granted at now_us
// to an acquisition (for_shared: a shared hold, which only a lost exclusive
// grant's delay keeps out). Never early: at until_us it no longer does.
bool delay_keeps(const DelayRecord& d, std::uint32_t db, std::uint64_t key, bool for_shared,
                 std::int64_t now_us) noexcept;

// The end of a delay in whole seconds since the caller's epoch, rounded up
// (never earlier than the real end), for a lock tag field that fencing.locks
// shows as delay_until. Clamped to 1 .. 2^32 - 1.
std::uint32_t delay_end_seconds(std::int64_t until_us) noexcept;

}  // namespace fencing::core
