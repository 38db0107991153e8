// Unit tests of src/core/lease_clock: when a lease is over, given samples of
// what the backend is doing and its two counters.
#include "core/lease_clock.hpp"

#include <gtest/gtest.h>

using fencing::core::BackendWait;
using fencing::core::lease_sampling_period_ms;
using fencing::core::LeaseClock;
using fencing::core::LeaseSample;

namespace {
constexpr std::int64_t ms = 1000;  // microseconds

LeaseSample reading(std::uint64_t sent, std::uint64_t drained = 0) {
    return LeaseSample{BackendWait::client_read, sent, drained};
}
LeaseSample writing(std::uint64_t sent, std::uint64_t drained) {
    return LeaseSample{BackendWait::client_write, sent, drained};
}
LeaseSample idle_work(std::uint64_t sent, std::uint64_t drained) {
    return LeaseSample{BackendWait::idle_work, sent, drained};
}
LeaseSample busy(std::uint64_t sent = 0) { return LeaseSample{BackendWait::busy, sent, 0}; }
}  // namespace

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
        c.sample(t * ms, reading(7));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
    c.sample(1250 * ms, reading(7));
    EXPECT_TRUE(c.over(1250 * ms, 1000));
}

TEST(LeaseClock, TheWaitCountsFromTheFirstSampleThatSawIt) {
    LeaseClock c;
    c.sample(0, busy(1));
    EXPECT_EQ(c.sample(100 * ms, reading(1)), 0);
    EXPECT_EQ(c.sample(350 * ms, reading(1)), 250 * ms);
    EXPECT_FALSE(c.over(1100 * ms, 1000));
    EXPECT_TRUE(c.over(1101 * ms, 1000));
}

TEST(LeaseClock, BusyInAStatementRestartsTheClock) {
    LeaseClock c;
    c.sample(0, reading(1));
    c.sample(900 * ms, busy(1));  // in a statement: running, or waiting for a lock
    EXPECT_FALSE(c.over(900 * ms, 100));
    c.sample(1000 * ms, reading(1));
    EXPECT_FALSE(c.over(1500 * ms, 1000));
    EXPECT_TRUE(c.over(2001 * ms, 1000));
}

TEST(LeaseClock, WhatTheClientSendsInterruptsTheWait) {
    // A client that sends a statement every 200 ms may be sampled waiting
    // every time: its sent counter tells that the waits were different.
    LeaseClock c;
    for (std::int64_t t = 0; t <= 5000; t += 250) {
        c.sample(t * ms, reading(static_cast<std::uint64_t>(t / 200)));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
}

TEST(LeaseClock, NotificationsToAnIdleClientAreNotTheClient) {
    // A stopped LISTENing holder: the backend delivers a notification now and
    // then (sampled at work between statements, or waiting for the client
    // again), and every delivery moves the send queue into the stopped
    // client's socket buffers. Nothing the client did: the lease ends.
    LeaseClock c;
    std::uint64_t queue = 0;
    for (std::int64_t t = 0; t <= 1000; t += 125) {
        queue += 300;
        c.sample(t * ms, (t / 125) % 3 == 1 ? idle_work(5, queue) : reading(5, queue));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
    queue += 300;
    c.sample(1125 * ms, idle_work(5, queue));
    EXPECT_TRUE(c.over(1125 * ms, 1000));
}

TEST(LeaseClock, ANotifiedClientWhoseBuffersFillIsStillSilent) {
    // The notifications fill the stopped client's buffers: the backend then
    // blocks sending the next one, and nothing moves any more.
    LeaseClock c;
    c.sample(0, reading(5, 100));
    c.sample(125 * ms, idle_work(5, 900));
    c.sample(250 * ms, writing(5, 5000));
    for (std::int64_t t = 375; t <= 1000; t += 125) {
        c.sample(t * ms, writing(5, 5000));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
    c.sample(1125 * ms, writing(5, 5000));
    EXPECT_TRUE(c.over(1125 * ms, 1000));
}

TEST(LeaseClock, AClientReadingASlowResultIsNotSilent) {
    // Blocked sending a result, sampled blocked every time, but the queue
    // moves between the samples: the client takes data.
    LeaseClock c;
    for (std::int64_t t = 0; t <= 5000; t += 125) {
        c.sample(t * ms, writing(9, static_cast<std::uint64_t>(1000 + t / 250)));
        EXPECT_FALSE(c.over(t * ms, 1000)) << t;
    }
}

TEST(LeaseClock, AStoppedReaderIsSilentOnceTheQueueStands) {
    LeaseClock c;
    c.sample(0, busy(9));
    c.sample(125 * ms, writing(9, 4000));
    for (std::int64_t t = 250; t <= 1125; t += 125) c.sample(t * ms, writing(9, 4000));
    EXPECT_FALSE(c.over(1125 * ms, 1000));
    c.sample(1250 * ms, writing(9, 4000));
    EXPECT_TRUE(c.over(1250 * ms, 1000));
}

TEST(LeaseClock, TheLastDataTakenBeforeGoingIdleCounts) {
    // The client takes the end of the result between two samples and the
    // backend goes idle: the silence starts there, not at the sample before.
    LeaseClock c;
    c.sample(0, writing(9, 4000));
    c.sample(900 * ms, writing(9, 4000));
    c.sample(1000 * ms, reading(9, 0));
    EXPECT_FALSE(c.over(1950 * ms, 1000));
    c.sample(2100 * ms, reading(9, 0));
    EXPECT_TRUE(c.over(2100 * ms, 1000));
}

TEST(LeaseClock, ResetForgetsTheWait) {
    LeaseClock c;
    c.sample(0, reading(1));
    c.reset();
    c.sample(900 * ms, reading(1));
    EXPECT_FALSE(c.over(1500 * ms, 1000));
    EXPECT_FALSE(c.over(1500 * ms, 0)) << "no lease, never over";
}

TEST(LeaseClock, ClockGoingBackwardsRestartsTheWait) {
    LeaseClock c;
    c.sample(5000 * ms, reading(1));
    c.sample(1000 * ms, reading(1));
    EXPECT_FALSE(c.over(1500 * ms, 1000));
}
