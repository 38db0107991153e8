#define FENCING_CORE_SOURCE 1
#include "core/lease_clock.hpp"

namespace fencing::core {

std::int64_t lease_sampling_period_ms(std::int64_t lease_ms) noexcept {
    if (lease_ms <= 0) return 0;
    std::int64_t p = lease_ms / 8;
    if (p < 25) p = 25;
    if (p > 125) p = 125;
    return p;
}

std::int64_t LeaseClock::sample(std::int64_t now_us, const LeaseSample& s) noexcept {
    if (s.wait == BackendWait::busy) {
        silent_ = false;
        last_ = s.wait;
        return 0;
    }
    // The send queue moved while the backend stayed blocked on it: only the
    // client can have done that.
    const bool took_data = last_ == BackendWait::client_write && s.drained != drained_;
    const bool restart = !silent_ || s.sent != sent_ || took_data || now_us < since_us_;
    if (restart) {
        silent_ = true;
        since_us_ = now_us;
    }
    sent_ = s.sent;
    drained_ = s.drained;
    last_ = s.wait;
    return restart ? 0 : now_us - since_us_;
}

}  // namespace fencing::core
