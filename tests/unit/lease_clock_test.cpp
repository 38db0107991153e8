// Unit tests of src/core/lease_clock: when a lease is over, given samples of
// the backend's client waits and its progress counter.
#include "core/lease_clock.hpp"

#include <gtest/gtest.h>

using fencing::core::lease_sampling_period_ms;
using fencing::core::LeaseClock;

namespace {
constexpr std::int64_t ms = 1000;  // microseconds
}

TEST(LeaseClock, SamplingPeriodIsAnEighthOfTheLeaseWithinBounds) {
    EXPECT_EQ(lease_sampling_period_ms(0), 0);
    EXPECT_EQ(lease_sampling_period_ms(-5), 0);
    EXPECT_EQ(lease_sampling_period_ms(100), 25);
    EXPECT_EQ(lease_sampling_period_ms(400), 50);
    EXPECT_EQ(lease_sampling_period_ms(1000), 125);
    EXPECT_EQ(lease_sampling_period_ms(3600 * 1000), 125);
}

TEST(LeaseClock, UninterruptedClientWaitEndsTheLease) {
    LeaseClock c;
    for (std::int64_t t = 0; t <= 1000; t += 250) {
        c.sample(t * ms, true, 7);
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
    c.sample(1250 * ms, true, 7);
    EXPECT_TRUE(c.over(1250 * ms, 1000));
}

TEST(LeaseClock, TheWaitCountsFromTheFirstSampleThatSawIt) {
    LeaseClock c;
    c.sample(0, false, 1);
    EXPECT_EQ(c.sample(100 * ms, true, 1), 0);
    EXPECT_EQ(c.sample(350 * ms, true, 1), 250 * ms);
    EXPECT_FALSE(c.over(1100 * ms, 1000));
    EXPECT_TRUE(c.over(1101 * ms, 1000));
}

TEST(LeaseClock, AnyOtherWaitOrWorkRestartsTheClock) {
    LeaseClock c;
    c.sample(0, true, 1);
    c.sample(900 * ms, false, 1);  // busy in a statement
    c.sample(1000 * ms, true, 1);
    EXPECT_FALSE(c.over(1500 * ms, 1000));
    EXPECT_TRUE(c.over(2001 * ms, 1000));
}

TEST(LeaseClock, ProgressBetweenSamplesInterruptsTheWait) {
    // A client that sends a statement every 200 ms may be sampled waiting
    // every time: its progress counter tells that the waits were different.
    LeaseClock c;
    for (std::int64_t t = 0; t <= 5000; t += 250) {
        c.sample(t * ms, true, static_cast<std::uint64_t>(t / 200));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
}

TEST(LeaseClock, ResetForgetsTheWait) {
    LeaseClock c;
    c.sample(0, true, 1);
    c.reset();
    c.sample(900 * ms, true, 1);
    EXPECT_FALSE(c.over(1500 * ms, 1000));
    EXPECT_FALSE(c.over(1500 * ms, 0)) << "no lease, never over";
}

TEST(LeaseClock, ClockGoingBackwardsRestartsTheWait) {
    LeaseClock c;
    c.sample(5000 * ms, true, 1);
    c.sample(1000 * ms, true, 1);
    EXPECT_FALSE(c.over(1500 * ms, 1000));
}
