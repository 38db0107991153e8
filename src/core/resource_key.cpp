#define FENCING_CORE_SOURCE 1
#include "core/resource_key.hpp"

namespace fencing::core {

ResourceStatus check_resource(std::size_t len) noexcept {
    if (len == 0) return ResourceStatus::empty;
    if (len > kMaxResourceBytes) return ResourceStatus::too_long;
    return ResourceStatus::ok;
}

namespace {
inline std::uint64_t load_le64(const unsigned char* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
}  // namespace

std::uint64_t resource_key(const char* data, std::size_t len) noexcept {
    constexpr std::uint64_t m = 0xc6a4a7935bd1e995ULL;
    constexpr int r = 47;
    constexpr std::uint64_t seed = 0x66656e63696e6721ULL;  // "fencing!"
    const auto* p = reinterpret_cast<const unsigned char*>(data);
    std::uint64_t h = seed ^ (static_cast<std::uint64_t>(len) * m);
    const std::size_t blocks = len / 8;
    for (std::size_t b = 0; b < blocks; ++b) {
        std::uint64_t k = load_le64(p + 8 * b);
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    const unsigned char* tail = p + 8 * blocks;
    switch (len & 7) {
        case 7: h ^= static_cast<std::uint64_t>(tail[6]) << 48; [[fallthrough]];
        case 6: h ^= static_cast<std::uint64_t>(tail[5]) << 40; [[fallthrough]];
        case 5: h ^= static_cast<std::uint64_t>(tail[4]) << 32; [[fallthrough]];
        case 4: h ^= static_cast<std::uint64_t>(tail[3]) << 24; [[fallthrough]];
        case 3: h ^= static_cast<std::uint64_t>(tail[2]) << 16; [[fallthrough]];
        case 2: h ^= static_cast<std::uint64_t>(tail[1]) << 8; [[fallthrough]];
        case 1:
            h ^= static_cast<std::uint64_t>(tail[0]);
            h *= m;
            break;
        default: break;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

}  // namespace fencing::core
