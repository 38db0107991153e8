#include "core/tombstone_summary.hpp"

#include <gtest/gtest.h>

using namespace fencing::core::tombstone_summary;

TEST(TombstoneSummary, OnlyNoneLetsAnInsertSkip) {
    EXPECT_FALSE(insert_may_skip(kUnknown));
    EXPECT_TRUE(insert_may_skip(kNone));
    // A recorded tombstone, whatever the state before, never gives kNone.
    EXPECT_FALSE(insert_may_skip(kUnknown + kStep));
    EXPECT_FALSE(insert_may_skip(kNone + kStep));
    for (std::uint64_t g = 0; g < 100; ++g) EXPECT_NE(g + kStep, kNone);
}

TEST(TombstoneSummary, OwnRecordsAloneAreNoRace) {
    EXPECT_FALSE(recorded_by_others(kNone, kNone, 0));
    EXPECT_FALSE(recorded_by_others(kNone, kNone + kStep, 1));
    EXPECT_FALSE(recorded_by_others(kNone, kNone + 3 * kStep, 3));
}

TEST(TombstoneSummary, AnotherTransactionsRecordIsARace) {
    EXPECT_TRUE(recorded_by_others(kNone, kNone + kStep, 0));
    EXPECT_TRUE(recorded_by_others(kNone, kNone + 2 * kStep, 1));
}
