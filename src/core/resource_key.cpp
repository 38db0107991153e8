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

inline std::uint64_t rotl(std::uint64_t x, int b) noexcept { return (x << b) | (x >> (64 - b)); }

struct SipState {
    std::uint64_t v0, v1, v2, v3;

    void round() noexcept {
        v0 += v1;
        v1 = rotl(v1, 13);
        v1 ^= v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotl(v1, 17);
        v1 ^= v2;
        v2 = rotl(v2, 32);
    }
    // c = 2 compression rounds per message word.
    void absorb(std::uint64_t m) noexcept {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
};

}  // namespace

KeySecret secret_from_bytes(const unsigned char* bytes) noexcept {
    return KeySecret{load_le64(bytes), load_le64(bytes + 8)};
}

std::uint64_t siphash24(const KeySecret& secret, const void* data, std::size_t len) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    SipState s{secret.k0 ^ 0x736f6d6570736575ULL, secret.k1 ^ 0x646f72616e646f6dULL, secret.k0 ^ 0x6c7967656e657261ULL,
               secret.k1 ^ 0x7465646279746573ULL};
    const std::size_t blocks = len / 8;
    for (std::size_t b = 0; b < blocks; ++b) s.absorb(load_le64(p + 8 * b));
    // The last word: the remaining bytes, and the length's low byte on top.
    const unsigned char* tail = p + 8 * blocks;
    std::uint64_t last = static_cast<std::uint64_t>(len & 0xff) << 56;
    for (std::size_t i = 0; i < (len & 7); ++i) last |= static_cast<std::uint64_t>(tail[i]) << (8 * i);
    s.absorb(last);
    // d = 4 finalization rounds.
    s.v2 ^= 0xff;
    s.round();
    s.round();
    s.round();
    s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace fencing::core
