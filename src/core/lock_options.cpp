#define FENCING_CORE_SOURCE 1
#include "core/lock_options.hpp"

namespace fencing::core {

OptionsStatus check_options(const LockOptions& o, bool permits_given) noexcept {
    if (o.delay_ms > kMaxLockDelayMs) return OptionsStatus::delay_too_long;
    if (permits_given && (o.permits < 1 || o.permits > kMaxPermits)) return OptionsStatus::permits_out_of_range;
    if (permits_given && o.shared) return OptionsStatus::shared_with_permits;
    return OptionsStatus::ok;
}

std::int32_t permit_of(std::uint64_t key, std::uint64_t base) noexcept {
    const std::uint64_t d = key ^ base;
    if (d == 0 || d > static_cast<std::uint64_t>(kMaxPermits)) return 0;
    return static_cast<std::int32_t>(d);
}

CountCheck check_count(bool permits_held, bool same_count_held) noexcept {
    if (!permits_held) return CountCheck::first;
    return same_count_held ? CountCheck::agrees : CountCheck::disagrees;
}

std::int32_t permit_to_wait_for(const std::int64_t* tokens, std::int32_t n, std::int32_t round) noexcept {
    if (n <= 0) return 1;
    std::int32_t best = 0;
    for (std::int32_t i = 0; i < n; ++i)
        if (tokens[i] > 0 && (best == 0 || tokens[i] < tokens[best - 1])) best = i + 1;
    if (best != 0) return best;
    // No token known (the rows were forgotten): take turns.
    const std::int32_t r = round < 0 ? 0 : round;
    return r % n + 1;
}

std::int64_t permit_round_ms(std::int32_t round) noexcept {
    if (round <= 0) return 10;
    if (round >= 4) return 160;
    return INT64_C(10) << round;
}

void GrantBook::note(std::uint64_t key, const GrantTraits& t, bool first) {
    auto it = book_.find(key);
    if (first || it == book_.end()) {
        book_[key] = t;
        return;
    }
    if (t.delay_ms > it->second.delay_ms) it->second.delay_ms = t.delay_ms;
}

const GrantTraits* GrantBook::find(std::uint64_t key) const noexcept {
    auto it = book_.find(key);
    return it == book_.end() ? nullptr : &it->second;
}

void GrantBook::forget(std::uint64_t key) noexcept { book_.erase(key); }

std::uint64_t GrantBook::permit_key_of(std::uint64_t base) const noexcept {
    for (const auto& [key, t] : book_)
        if (t.permit > 0 && t.base == base) return key;
    return 0;
}

std::size_t GrantBook::copy_delayed(Delayed* out, std::size_t cap) const noexcept {
    std::size_t n = 0;
    for (const auto& [key, t] : book_)
        if (t.delay_ms > 0 && n < cap) out[n++] = Delayed{key, t};
    return n;
}

}  // namespace fencing::core
