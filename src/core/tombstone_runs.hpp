// The rules of tombstone runs (src/pg/tombstone_runs.cpp): how a DELETE
// statement's key hashes wait in memory per subtransaction, and how they are
// grouped into rows of narrow ranges. Unit-tested in
// tests/unit/tombstone_runs_test.cpp.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core::tombstone_runs {

// The rows of a statement (per call site of the check) that record a
// tombstone each before the rest go into runs.
inline constexpr int kRowsBeforeRuns = 64;
// Hashes per row of a run at most (the row, stored inline, fits in a page).
inline constexpr int kRunChunk = 960;

// Hashes of one table, token and subtransaction, in the order they came:
// hashes[start .. start + count) of the backend's pending array.
struct Segment {
    std::uint32_t owner;  // the table the tombstones are kept under
    std::uint32_t sub;    // the subtransaction that deleted the rows
    std::int64_t token;
    std::int64_t at;  // when the segment was begun (a timestamp)
    int start;
    int count;
    // 0 when the entries are key hashes; otherwise they are the rows' key
    // values as they are, of the kind RAW says, still to be hashed (before
    // anything reads them as hashes).
    int raw;
};

// Whether a row deleted by SUB with TOKEN under OWNER, its key kept as RAW
// says, goes on in LAST.
constexpr bool continues(const Segment& last, std::uint32_t owner, std::int64_t token, std::uint32_t sub,
                         int raw) noexcept {
    return last.owner == owner && last.token == token && last.sub == sub && last.raw == raw;
}

// Segments are begun in time order, and subtransaction ids grow: those of
// SUB and of its children (committed into it, or still in progress) come
// after every segment of its ancestors. The first of that suffix: what SUB
// writes when one of its statements finishes, and what its abort drops.
constexpr int suffix_from(const Segment* segs, int n, std::uint32_t sub) noexcept {
    int first = n;
    while (first > 0 && segs[first - 1].sub >= sub) --first;
    return first;
}

// How many leading bits group N hashes into groups of about half a row
// (0: they fit in one row).
constexpr int group_bits(int n) noexcept {
    int bits = 0;
    while (bits < 16 && (n >> bits) > kRunChunk / 2) ++bits;
    return bits;
}

// The group of hash H under BITS leading bits (1 to 16), groups in the
// order of the hashes as signed 64-bit integers (the sign bit flipped).
constexpr int group_of(std::int64_t h, int bits) noexcept {
    return static_cast<int>((static_cast<std::uint64_t>(h) ^ (UINT64_C(1) << 63)) >> (64 - bits));
}

// Copies the N hashes H into OUT grouped by group_of(BITS) (a counting
// sort: one pass to count, one to place; within a group in their order).
// START (1 << BITS) + 1 entries: group g is OUT[START[g] .. START[g + 1]).
// NEXT: 1 << BITS entries of scratch.
inline void group(const std::int64_t* h, int n, int bits, std::int64_t* out, int* start, int* next) noexcept {
    const int groups = 1 << bits;
    for (int g = 0; g <= groups; ++g) start[g] = 0;
    for (int i = 0; i < n; ++i) ++start[group_of(h[i], bits) + 1];
    for (int g = 0; g < groups; ++g) start[g + 1] += start[g];
    for (int g = 0; g < groups; ++g) next[g] = start[g];
    for (int i = 0; i < n; ++i) out[next[group_of(h[i], bits)]++] = h[i];
}

}  // namespace fencing::core::tombstone_runs
