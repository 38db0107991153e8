#include "core/tombstone_runs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using namespace fencing::core::tombstone_runs;

namespace {
Segment seg(std::uint32_t sub, int start, int count) { return Segment{7, sub, 100, 0, start, count, 0}; }
}  // namespace

TEST(TombstoneRuns, ARowGoesOnInItsSegmentOnly) {
    const Segment s{7, 3, 100, 0, 0, 5, 0};
    EXPECT_TRUE(continues(s, 7, 100, 3, 0));
    EXPECT_FALSE(continues(s, 8, 100, 3, 0));  // another table
    EXPECT_FALSE(continues(s, 7, 101, 3, 0));  // another token
    EXPECT_FALSE(continues(s, 7, 100, 4, 0));  // another subtransaction
    EXPECT_FALSE(continues(s, 7, 100, 3, 8));  // key values, not hashes
    const Segment r{7, 3, 100, 0, 0, 5, 8};
    EXPECT_TRUE(continues(r, 7, 100, 3, 8));
    EXPECT_FALSE(continues(r, 7, 100, 3, 4));  // values of another kind
}

TEST(TombstoneRuns, ASubtransactionOwnsTheSuffixOfItsAndItsChildrensSegments) {
    // Top level (1) deletes, savepoint 2 deletes, its child 3 deletes and
    // commits into 2, 2 deletes again.
    const Segment segs[] = {seg(1, 0, 10), seg(2, 10, 5), seg(3, 15, 5), seg(2, 20, 5)};
    EXPECT_EQ(suffix_from(segs, 4, 2), 1);  // 2 writes (or drops) its own and 3's
    EXPECT_EQ(suffix_from(segs, 4, 1), 0);  // the top level writes everything
    EXPECT_EQ(suffix_from(segs, 4, 4), 4);  // a later subtransaction has none
    // 3 aborting while in progress drops its own only.
    EXPECT_EQ(suffix_from(segs, 3, 3), 2);
}

TEST(TombstoneRuns, ALaterSiblingLeavesAnEarlierOnesSegmentsToTheParent) {
    // Savepoint 2 deleted and was released into 1; savepoint 3 begins: its
    // statements do not write 2's segments (the parent's, by then).
    const Segment segs[] = {seg(1, 0, 10), seg(2, 10, 5), seg(3, 15, 5)};
    EXPECT_EQ(suffix_from(segs, 3, 3), 2);
    EXPECT_EQ(suffix_from(segs, 2, 3), 2);
}

TEST(TombstoneRuns, FewHashesMakeOneRow) {
    EXPECT_EQ(group_bits(0), 0);
    EXPECT_EQ(group_bits(1), 0);
    EXPECT_EQ(group_bits(kRunChunk / 2), 0);
    EXPECT_EQ(group_bits(kRunChunk / 2 + 1), 1);
}

TEST(TombstoneRuns, GroupsAreAboutHalfARow) {
    for (int n : {481, 1000, 5000, 65536, 200000}) {
        const int bits = group_bits(n);
        const double mean = static_cast<double>(n) / (1 << bits);
        EXPECT_LE(mean, kRunChunk / 2) << n;
        EXPECT_GT(mean, kRunChunk / 4) << n;
    }
}

TEST(TombstoneRuns, GroupingKeepsEveryHashAndOrdersTheGroups) {
    std::mt19937_64 rng(42);
    for (int n : {1, 2, 481, 5000, 65536}) {
        std::vector<std::int64_t> h(n);
        for (auto& x : h) x = static_cast<std::int64_t>(rng());
        h[0] = INT64_MIN;
        if (n > 1) h[1] = INT64_MAX;
        const int bits = std::max(1, group_bits(n));
        std::vector<std::int64_t> out(n);
        std::vector<int> start((1 << bits) + 1), next(1 << bits);
        group(h.data(), n, bits, out.data(), start.data(), next.data());
        EXPECT_EQ(start[0], 0);
        EXPECT_EQ(start[1 << bits], n);
        std::vector<std::int64_t> a = h, b = out;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << n;
        // Every hash of a group is below every hash of the next one, and a
        // group's rows stay within kRunChunk in practice.
        std::int64_t prev_max = INT64_MIN;
        bool first = true;
        for (int g = 0; g < (1 << bits); ++g) {
            if (start[g] == start[g + 1]) continue;
            const auto [lo, hi] = std::minmax_element(out.begin() + start[g], out.begin() + start[g + 1]);
            if (!first) {
                EXPECT_LT(prev_max, *lo);
            }
            prev_max = *hi;
            first = false;
            for (int i = start[g]; i < start[g + 1]; ++i) EXPECT_EQ(group_of(out[i], bits), g);
            EXPECT_LE(start[g + 1] - start[g], kRunChunk) << n;
        }
    }
}

TEST(TombstoneRuns, GroupsFollowSignedOrder) {
    EXPECT_EQ(group_of(INT64_MIN, 1), 0);
    EXPECT_EQ(group_of(-1, 1), 0);
    EXPECT_EQ(group_of(0, 1), 1);
    EXPECT_EQ(group_of(INT64_MAX, 1), 1);
    EXPECT_LT(group_of(-5, 8), group_of(5, 8));
}
