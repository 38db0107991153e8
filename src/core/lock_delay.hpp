// The lock-delay schedule of a lost session.
//
// A grant taken with a lock-delay that ends uncleanly (its session ended
// while holding it: the client went away, the backend was terminated, its
// lease ran out) is not followed by another grant of the resource until the
// delay has passed. The ended session's backend keeps the lock for that long:
// it releases each delayed lock when its own delay is over, then exits.
// Pure: the glue (pg/lock_delay.cpp) samples the clock and does the waiting.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

struct DelayEntry {
    std::uint64_t key = 0;
    std::int64_t until_us = 0;  // when the delay ends (the caller's clock)
    bool done = false;          // released already
};

// Sets each entry's until_us to ended_us + its delay (delays_ms[i]), and
// sorts the entries by it, earliest first (stable).
void plan_delays(DelayEntry* entries, const std::int64_t* delays_ms, std::size_t n, std::int64_t ended_us) noexcept;

// At now_us: marks every entry whose delay is over as due (writes their
// indexes to due[], returns how many) and sets *sleep_us to how long until
// the next one is over (0 when none is left).
std::size_t due_delays(DelayEntry* entries, std::size_t n, std::int64_t now_us, std::size_t* due,
                       std::int64_t* sleep_us) noexcept;

// The end of a delay in whole seconds since the caller's epoch, rounded up
// (never earlier than the real end), for a lock tag field that fencing.locks
// shows as delay_until. Clamped to 1 .. 2^32 - 1.
std::uint32_t delay_end_seconds(std::int64_t until_us) noexcept;

}  // namespace fencing::core
