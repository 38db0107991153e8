#define FENCING_CORE_SOURCE 1
#include "core/lock_options.hpp"

namespace fencing::core {

OptionsStatus check_options(const LockOptions& o, bool permits_given) noexcept {
    if (o.delay_ms > kMaxLockDelayMs) return OptionsStatus::delay_too_long;
    if (permits_given && (o.permits < 1 || o.permits > kMaxPermits)) return OptionsStatus::permits_out_of_range;
    if (permits_given && o.shared) return OptionsStatus::shared_with_permits;
    return OptionsStatus::ok;
}

std::size_t permit_name(const char* name, std::size_t len, std::int32_t permit, char* out) noexcept {
    for (std::size_t i = 0; i < len; ++i) out[i] = name[i];
    std::size_t n = len;
    out[n++] = kPermitSeparator;
    char digits[4];
    std::size_t d = 0;
    std::uint32_t v = permit < 1 ? 1 : static_cast<std::uint32_t>(permit);
    if (v > static_cast<std::uint32_t>(kMaxPermits)) v = kMaxPermits;
    do {
        digits[d++] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v != 0 && d < sizeof digits);
    while (d > 0) out[n++] = digits[--d];
    return n;
}

bool parse_permit_name(const char* name, std::size_t len, std::size_t* base_len, std::int32_t* permit) noexcept {
    std::size_t i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
    const std::size_t digits = len - i;
    if (digits == 0 || digits > 4 || i == 0 || name[i - 1] != kPermitSeparator || name[i] == '0') return false;
    std::int32_t v = 0;
    for (std::size_t k = i; k < len; ++k) v = v * 10 + (name[k] - '0');
    if (v < 1 || v > kMaxPermits || i - 1 == 0) return false;
    *base_len = i - 1;
    *permit = v;
    return true;
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
