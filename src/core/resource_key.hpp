// Resource names -> 64-bit lock keys.
//
// The key must be identical on every platform and in every release: it is
// stored in the fence state table (so it travels through pg_dump) and it names
// the lock in the shared lock table. Never change the function; add a new one
// under a new name if that is ever needed.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

inline constexpr std::size_t kMaxResourceBytes = 1024;

enum class ResourceStatus { ok, empty, too_long };

// Length rule for resource names: 1 .. kMaxResourceBytes bytes.
ResourceStatus check_resource(std::size_t len) noexcept;

// 64-bit key of a resource name (MurmurHash64A over the bytes read as
// little-endian words, with a fixed seed). Endianness-independent.
std::uint64_t resource_key(const char* data, std::size_t len) noexcept;

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
