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

std::int64_t LeaseClock::sample(std::int64_t now_us, bool client_wait, std::uint64_t progress) noexcept {
    if (!client_wait) {
        waiting_ = false;
        return 0;
    }
    if (!waiting_ || progress != progress_ || now_us < since_us_) {
        waiting_ = true;
        since_us_ = now_us;
        progress_ = progress;
        return 0;
    }
    return now_us - since_us_;
}

}  // namespace fencing::core
