// The lease clock: given periodic samples of what a backend is doing, is the
// lease of a leased holder over?
//
// A lease ends when the holder's client is silent for longer than the lease.
// The server can see silence only as the backend waiting for its client
// (wait event ClientRead or ClientWrite: idle, idle in a transaction, waiting
// for COPY data, blocked sending a result). A sample says whether the backend
// was waiting for its client at that moment, plus a progress counter that
// changes whenever the client did something (a statement began or ended, a
// TCP byte went in either direction); a wait is uninterrupted while the
// samples see it and the counter stays put. The wait counts from the first
// sample that saw it, so the lease is over at most one sampling period late.
//
// Pure logic, no allocation, noexcept: the glue calls it from a signal handler.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core {

// How often to sample for a lease of lease_ms: an eighth of it, within
// [25 ms, 125 ms]; 0 when there is no lease. A lease ends at most two periods
// late (the wait counts from the first sample that saw it, and is found over
// at the first sample after the lease), a quarter of the lease at most.
std::int64_t lease_sampling_period_ms(std::int64_t lease_ms) noexcept;

class LeaseClock {
public:
    // Forget the current wait (the lease was renewed by activity, or a new
    // set of leased holds began).
    void reset() noexcept { waiting_ = false; }

    // One sample at now_us (microseconds, any monotonic-enough origin).
    // Returns how long, in microseconds, the current uninterrupted client
    // wait has lasted (0 when the backend is not waiting for its client).
    std::int64_t sample(std::int64_t now_us, bool client_wait, std::uint64_t progress) noexcept;

    // True when the current uninterrupted client wait is longer than lease_ms.
    bool over(std::int64_t now_us, std::int64_t lease_ms) const noexcept {
        return waiting_ && lease_ms > 0 && now_us - since_us_ > lease_ms * 1000;
    }

private:
    bool waiting_ = false;
    std::int64_t since_us_ = 0;
    std::uint64_t progress_ = 0;
};

}  // namespace fencing::core
