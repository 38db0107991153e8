#define FENCING_CORE_SOURCE 1
#include "core/lock_delay.hpp"

#include <algorithm>

namespace fencing::core {

bool delay_keeps(const DelayRecord& d, std::uint32_t db, std::uint64_t key, bool for_shared,
                 std::int64_t now_us) noexcept {
    return d.used && d.db == db && d.key == key && !(for_shared && d.shared) && now_us < d.until_us;
}

std::uint32_t delay_end_seconds(std::int64_t until_us) noexcept {
    if (until_us <= 0) return 1;
    const std::int64_t secs = (until_us + 999999) / 1000000;
    if (secs > static_cast<std::int64_t>(UINT32_MAX)) return UINT32_MAX;
    return secs < 1 ? 1 : static_cast<std::uint32_t>(secs);
}

}  // namespace fencing::core
