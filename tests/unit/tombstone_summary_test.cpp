#include "core/tombstone_summary.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

using namespace fencing::core::tombstone_summary;

namespace {
constexpr std::int64_t kLowest = std::numeric_limits<std::int64_t>::min();
}

TEST(TombstoneSummary, NoneLetsEveryInsertSkip) {
    EXPECT_TRUE(insert_may_skip(kNone, kLowest, 5));
    EXPECT_TRUE(insert_may_skip(kNone, kLowest, std::nullopt));
    EXPECT_FALSE(insert_may_skip(kUnknown, kLowest, 5));
    // A recorded tombstone, whatever the state before, never gives kNone.
    for (std::uint64_t g = 0; g < 100; ++g) EXPECT_NE(g + kStep, kNone);
}

TEST(TombstoneSummary, ATrackedTableLetsNewerTokensSkip) {
    const std::uint64_t g = kNone + 3 * kStep;
    EXPECT_TRUE(tracked(g));
    EXPECT_TRUE(insert_may_skip(g, 1000, 1001));
    // A tombstone rejects a token not above its own: that INSERT looks up.
    EXPECT_FALSE(insert_may_skip(g, 1000, 1000));
    EXPECT_FALSE(insert_may_skip(g, 1000, 999));
    EXPECT_FALSE(insert_may_skip(g, 1000, std::nullopt));
}

TEST(TombstoneSummary, AnUntrackedTableLooksEveryKeyUp) {
    // Tombstones recorded before the table was seen without any: their
    // tokens are not known.
    const std::uint64_t g = kUnknown + kStep;
    EXPECT_FALSE(tracked(g));
    EXPECT_FALSE(insert_may_skip(g, kLowest, std::numeric_limits<std::int64_t>::max()));
}

TEST(TombstoneSummary, OwnRecordsAloneAreNoRace) {
    EXPECT_FALSE(recorded_by_others(kNone, kNone, 0));
    EXPECT_FALSE(recorded_by_others(kNone, kNone + kStep, 1));
    EXPECT_FALSE(recorded_by_others(kNone, kNone + 3 * kStep, 3));
    EXPECT_FALSE(must_refuse(kNone, kNone + kStep, 1, 5, 1000));
}

TEST(TombstoneSummary, AnotherTransactionsRecordIsARace) {
    EXPECT_TRUE(recorded_by_others(kNone, kNone + kStep, 0));
    EXPECT_TRUE(recorded_by_others(kNone, kNone + 2 * kStep, 1));
}

TEST(TombstoneSummary, ARaceRefusesOnlyWhenATombstoneMayRejectAnInsertedToken) {
    const std::uint64_t seen = kNone + kStep, now = kNone + 2 * kStep;
    // Another's tombstone with token 1000; this transaction inserted with
    // tokens from 1001: no tombstone of the table rejects them.
    EXPECT_FALSE(must_refuse(seen, now, 0, 1001, 1000));
    // From 1000 (or less): the tombstone may be of one of those keys.
    EXPECT_TRUE(must_refuse(seen, now, 0, 1000, 1000));
    EXPECT_TRUE(must_refuse(seen, now, 0, 5, 1000));
    // Forgotten meanwhile (the database dropped): refused.
    EXPECT_TRUE(must_refuse(seen, kUnknown + kStep, 0, 1001, 1000));
}

TEST(TombstoneSummary, TheFirstLookStartsTheGeneration) {
    EXPECT_EQ(after_first_look(0, 100), kNone);
    EXPECT_EQ(after_first_look(1, 100), kTracked);
    EXPECT_EQ(after_first_look(100, 100), kTracked);
    EXPECT_EQ(after_first_look(101, 100), kUntracked);
    EXPECT_TRUE(tracked(kTracked));
    EXPECT_FALSE(tracked(kUntracked));
    EXPECT_FALSE(insert_may_skip(kUntracked, kLowest, 5));
    EXPECT_TRUE(insert_may_skip(kTracked, 20, 21));
    EXPECT_FALSE(insert_may_skip(kTracked, 20, 20));
}

TEST(TombstoneSummary, RunsAreReadOnlyWhenOneMayReject) {
    // A tracked table whose runs all have tokens below the write's: no read.
    const std::uint64_t g = kNone + 2 * kStep;
    EXPECT_FALSE(runs_may_reject(g, 100, 101));
    // A run with the write's token, or a greater one, may reject it.
    EXPECT_TRUE(runs_may_reject(g, 100, 100));
    EXPECT_TRUE(runs_may_reject(g, 100, 50));
    // A table without any run: nothing to read.
    EXPECT_FALSE(runs_may_reject(kNone, kLowest, kLowest + 1));
    // Not known (not looked at, or too many tombstones to look at): read.
    EXPECT_TRUE(runs_may_reject(kUnknown, kLowest, 1000));
    EXPECT_TRUE(runs_may_reject(kUntracked, kLowest, 1000));
    // A write without a token asks from the lowest token: read.
    EXPECT_TRUE(runs_may_reject(g, kLowest, kLowest));
}
