// Resource names -> 64-bit lock keys.
//
// The key of a resource is SipHash-2-4 of its name under the database's
// secret (a random 128-bit key made at CREATE EXTENSION, kept in
// fencing.key_secret; see docs/design.md). Without the secret nobody can
// build two names with the same key: a keyed hash, unlike a public one, cannot
// be inverted. The key is stored in the fence state table and names the lock
// in the shared lock table, so it must be identical on every platform: the
// function reads the name and the secret as little-endian words, as the
// SipHash reference does, and is checked against the reference test vectors.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

inline constexpr std::size_t kMaxResourceBytes = 1024;

enum class ResourceStatus { ok, empty, too_long };

// Length rule for resource names: 1 .. kMaxResourceBytes bytes.
ResourceStatus check_resource(std::size_t len) noexcept;

// A SipHash key: the 16 secret bytes read as two little-endian words.
struct KeySecret {
    std::uint64_t k0 = 0;
    std::uint64_t k1 = 0;
};
inline constexpr std::size_t kSecretBytes = 16;
KeySecret secret_from_bytes(const unsigned char* bytes) noexcept;  // exactly kSecretBytes bytes

// SipHash-2-4 with a 64-bit result (the reference's siphash() with outlen 8,
// its 8 output bytes read as a little-endian word).
std::uint64_t siphash24(const KeySecret& secret, const void* data, std::size_t len) noexcept;

// 64-bit key of a resource name under the database's secret.
inline std::uint64_t resource_key(const KeySecret& secret, const char* data, std::size_t len) noexcept {
    return siphash24(secret, data, len);
}

// The key split into the two 32-bit halves used in a lock tag, and back.
inline std::uint32_t key_high(std::uint64_t key) noexcept { return static_cast<std::uint32_t>(key >> 32); }
inline std::uint32_t key_low(std::uint64_t key) noexcept { return static_cast<std::uint32_t>(key); }
inline std::uint64_t key_join(std::uint32_t hi, std::uint32_t lo) noexcept {
    return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
// Stored in a signed bigint column: reinterpretation, not arithmetic.
inline std::int64_t key_as_int64(std::uint64_t key) noexcept {
    std::int64_t v;
    static_assert(sizeof v == sizeof key);
    __builtin_memcpy(&v, &key, sizeof v);
    return v;
}

}  // namespace fencing::core
