// The options of an acquisition beyond the plain exclusive lock: a lock-delay,
// a count of permits, a shared hold. Pure rules: ranges, which combine, how
// a permit's lock key derives from the resource's, and what this session
// holds with which options (the grant book).
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace fencing::core {

// A lock-delay is at most a minute (Consul's bound): a lost holder's backend
// keeps the lock for its delay, and a fast shutdown waits for it.
inline constexpr std::int64_t kMaxLockDelayMs = 60 * 1000;
// At most this many permits: an acquisition tries each permit in turn.
inline constexpr std::int32_t kMaxPermits = 1000;

struct LockOptions {
    std::int64_t delay_ms = 0;  // 0: no lock-delay
    std::int32_t permits = 0;   // 0: a plain resource; N: one of N permits
    bool shared = false;
};

enum class OptionsStatus {
    ok,
    delay_too_long,        // delay_ms > kMaxLockDelayMs
    permits_out_of_range,  // permits given, but not 1 .. kMaxPermits
    shared_with_permits,   // a shared hold of a counted resource
};

// permits_given: the caller passed a permit count (not NULL); delay_ms is
// already known to be >= 0 (the interval parser refuses negative ones).
OptionsStatus check_options(const LockOptions& o, bool permits_given) noexcept;

// Permit p (1 .. kMaxPermits) of a resource is the resource whose name is
// the resource's name, U+001F (the unit separator) and p in decimal: a name
// of its own, so it has its own lock key, lock, guard and fence state row,
// and its key follows from the row's name as every key does (a new resource
// key secret rekeys it like any row). fencing.locks reads the permit back
// from the name.
inline constexpr char kPermitSeparator = '\x1f';
inline constexpr std::size_t kPermitSuffixBytes = 5;  // the separator and at most 4 digits
// Writes the name of permit p of (name, len) to out, which has room for len +
// kPermitSuffixBytes bytes; returns its length.
std::size_t permit_name(const char* name, std::size_t len, std::int32_t permit, char* out) noexcept;
// Whether (name, len) is the name of a permit (1 .. kMaxPermits) of some
// resource: then *base_len is the length of that resource's name and
// *permit the permit.
bool parse_permit_name(const char* name, std::size_t len, std::size_t* base_len, std::int32_t* permit) noexcept;

// Agreement on the count of permits. Every holder of a permit of a resource
// also holds, shared, two marks: one that says "some permit is held" and one
// named by its count. A newcomer (alone at the head of the resource's queue,
// so no other newcomer is deciding at the same time) asks whether anyone holds
// the first, and whether anyone holds the one named by its own count.
enum class CountCheck {
    first,      // nobody holds a permit: the newcomer's count stands
    agrees,     // the holders use the newcomer's count
    disagrees,  // the holders use another count: refuse
};
CountCheck check_count(bool permits_held, bool same_count_held) noexcept;

// The low 32 bits of the lock tag of the "count N" mark of a resource whose
// key's low half is base_low.
inline std::uint32_t count_mark_low(std::uint32_t base_low, std::int32_t permits) noexcept {
    return base_low ^ static_cast<std::uint32_t>(permits);
}

// Waiting for one of N permits. PostgreSQL's lock manager waits for one lock
// at a time: the waiter at the head of the queue waits for the permit granted
// longest ago (the smallest token: tokens grow with every grant) for a round,
// then tries every permit again. tokens[i] is the latest token of permit
// i + 1 (0 when unknown). Returns the permit (1 .. n) to wait for.
std::int32_t permit_to_wait_for(const std::int64_t* tokens, std::int32_t n, std::int32_t round) noexcept;
// How long a round lasts: 10 ms, doubling up to 160 ms, so that a release of
// another permit than the one waited for is seen within 160 ms.
std::int64_t permit_round_ms(std::int32_t round) noexcept;

// What this session holds with options, per lock key (the key of the
// resource, or of the permit). Plain exclusive holds without a delay have no
// entry, so the book stays empty (and costs nothing) for plain locks.
struct GrantTraits {
    bool shared = false;
    std::int32_t permit = 0;   // 1 .. N for a permit, else 0
    std::int32_t permits = 0;  // N for a permit, else 0
    std::uint64_t base = 0;    // the key the resource's queue and marks use: a
                               // permit's is its first permit's key; else the key
    std::int64_t delay_ms = 0;
};

class GrantBook {
public:
    // Records the traits of a hold of key. first: the session did not hold
    // key before (stale traits are replaced); a nested hold keeps the
    // traits, except that the longest delay asked for wins.
    void note(std::uint64_t key, const GrantTraits& t, bool first);
    const GrantTraits* find(std::uint64_t key) const noexcept;
    void forget(std::uint64_t key) noexcept;
    bool empty() const noexcept { return book_.empty(); }
    std::size_t size() const noexcept { return book_.size(); }

    // The key of a permit recorded in the book whose base is `base`, or 0 (a
    // session holds at most one permit of a resource).
    std::uint64_t permit_key_of(std::uint64_t base) const noexcept;

    // Entries with a delay, written to out[0 .. cap) without allocating;
    // returns how many were written.
    struct Delayed {
        std::uint64_t key;
        GrantTraits traits;
    };
    std::size_t copy_delayed(Delayed* out, std::size_t cap) const noexcept;

private:
    std::unordered_map<std::uint64_t, GrantTraits> book_;
};

}  // namespace fencing::core
