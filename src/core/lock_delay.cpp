#define FENCING_CORE_SOURCE 1
#include "core/lock_delay.hpp"

#include <algorithm>

namespace fencing::core {

void plan_delays(DelayEntry* entries, const std::int64_t* delays_ms, std::size_t n, std::int64_t ended_us) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        entries[i].until_us = ended_us + (delays_ms[i] > 0 ? delays_ms[i] : 0) * 1000;
        entries[i].done = false;
    }
    std::stable_sort(entries, entries + n,
                     [](const DelayEntry& a, const DelayEntry& b) { return a.until_us < b.until_us; });
}

std::size_t due_delays(DelayEntry* entries, std::size_t n, std::int64_t now_us, std::size_t* due,
                       std::int64_t* sleep_us) noexcept {
    std::size_t k = 0;
    std::int64_t next = 0;
    bool any_left = false;
    for (std::size_t i = 0; i < n; ++i) {
        if (entries[i].done) continue;
        if (entries[i].until_us <= now_us) {
            entries[i].done = true;
            due[k++] = i;
        } else if (!any_left || entries[i].until_us < next) {
            next = entries[i].until_us;
            any_left = true;
        }
    }
    *sleep_us = any_left ? next - now_us : 0;
    return k;
}

std::uint32_t delay_end_seconds(std::int64_t until_us) noexcept {
    if (until_us <= 0) return 1;
    const std::int64_t secs = (until_us + 999999) / 1000000;
    if (secs > static_cast<std::int64_t>(UINT32_MAX)) return UINT32_MAX;
    return secs < 1 ? 1 : static_cast<std::uint32_t>(secs);
}

}  // namespace fencing::core
