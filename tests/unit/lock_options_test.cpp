// Unit tests of src/core/lock_options and src/core/lock_delay: option ranges
// and combinations, permit keys, the count agreement, which permit a waiter
// waits for, the grant book, and a lost session's delay schedule.
#include "core/lock_delay.hpp"
#include "core/lock_options.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace fencing::core;

namespace {
LockOptions opts(std::int64_t delay, std::int32_t permits, bool shared) {
    LockOptions o;
    o.delay_ms = delay;
    o.permits = permits;
    o.shared = shared;
    return o;
}
}  // namespace

// ---- options ------------------------------------------------------------------

TEST(LockOptions, PlainAndEachOptionAlone) {
    EXPECT_EQ(check_options(opts(0, 0, false), false), OptionsStatus::ok);
    EXPECT_EQ(check_options(opts(1, 0, false), false), OptionsStatus::ok);
    EXPECT_EQ(check_options(opts(kMaxLockDelayMs, 0, false), false), OptionsStatus::ok);
    EXPECT_EQ(check_options(opts(0, 1, false), true), OptionsStatus::ok);
    EXPECT_EQ(check_options(opts(0, kMaxPermits, false), true), OptionsStatus::ok);
    EXPECT_EQ(check_options(opts(0, 0, true), false), OptionsStatus::ok);
}

TEST(LockOptions, DelayBound) {
    EXPECT_EQ(check_options(opts(kMaxLockDelayMs + 1, 0, false), false), OptionsStatus::delay_too_long);
    EXPECT_EQ(kMaxLockDelayMs, 60000);
}

TEST(LockOptions, PermitRange) {
    EXPECT_EQ(check_options(opts(0, 0, false), true), OptionsStatus::permits_out_of_range);
    EXPECT_EQ(check_options(opts(0, -3, false), true), OptionsStatus::permits_out_of_range);
    EXPECT_EQ(check_options(opts(0, kMaxPermits + 1, false), true), OptionsStatus::permits_out_of_range);
    // Not given: the value is not looked at.
    EXPECT_EQ(check_options(opts(0, -3, false), false), OptionsStatus::ok);
}

TEST(LockOptions, SharedPermitsDoNotCombine) {
    EXPECT_EQ(check_options(opts(0, 3, true), true), OptionsStatus::shared_with_permits);
    EXPECT_EQ(check_options(opts(500, 3, false), true), OptionsStatus::ok);  // delay and permits do
    EXPECT_EQ(check_options(opts(500, 0, true), false), OptionsStatus::ok);  // delay and shared do
}

// ---- permit names ----------------------------------------------------------------

namespace {
std::string name_of(const std::string& base, std::int32_t p) {
    std::vector<char> buf(base.size() + kPermitSuffixBytes);
    const std::size_t n = permit_name(base.data(), base.size(), p, buf.data());
    return std::string(buf.data(), n);
}
}  // namespace

TEST(PermitNames, ResourceSeparatorNumber) {
    // Frozen: the names are rows of fencing.fence_state, and fencing.locks
    // reads the permit back from them.
    EXPECT_EQ(name_of("queue:7", 1), std::string("queue:7\x1f"
                                                 "1"));
    EXPECT_EQ(name_of("queue:7", 42), std::string("queue:7\x1f"
                                                  "42"));
    EXPECT_EQ(name_of("q", 1000), std::string("q\x1f"
                                              "1000"));
    EXPECT_EQ(name_of(std::string(1024, 'x'), 1000).size(), 1024u + kPermitSuffixBytes);
}

TEST(PermitNames, DistinctAndReadBack) {
    std::set<std::string> names{"pool"};
    for (std::int32_t p = 1; p <= kMaxPermits; ++p) {
        const std::string n = name_of("pool", p);
        EXPECT_TRUE(names.insert(n).second) << p;
        std::size_t base_len = 0;
        std::int32_t permit = 0;
        ASSERT_TRUE(parse_permit_name(n.data(), n.size(), &base_len, &permit)) << p;
        EXPECT_EQ(base_len, 4u);
        EXPECT_EQ(permit, p);
    }
}

TEST(PermitNames, OtherNamesAreNoPermit) {
    std::size_t base_len = 0;
    std::int32_t permit = 0;
    for (const std::string& n : {std::string("pool"), std::string("pool1"), std::string("pool\x1f"),
                                 std::string("\x1f"
                                             "3"),
                                 std::string("pool\x1f"
                                             "0"),
                                 std::string("pool\x1f"
                                             "01"),
                                 std::string("pool\x1f"
                                             "1001"),
                                 std::string("pool\x1f"
                                             "12345"),
                                 std::string("pool\x1f"
                                             "3x")})
        EXPECT_FALSE(parse_permit_name(n.data(), n.size(), &base_len, &permit)) << n;
    // The last separator counts: a resource name may contain one itself.
    const std::string nested = name_of(std::string("a\x1f"
                                                   "b"),
                                       7);
    ASSERT_TRUE(parse_permit_name(nested.data(), nested.size(), &base_len, &permit));
    EXPECT_EQ(base_len, 3u);
    EXPECT_EQ(permit, 7);
}

TEST(PermitMarks, CountMarksDifferPerCount) {
    std::set<std::uint32_t> marks;
    for (std::int32_t n = 1; n <= kMaxPermits; ++n) EXPECT_TRUE(marks.insert(count_mark_low(0xDEADBEEF, n)).second);
}

// ---- the count agreement ---------------------------------------------------------

TEST(CountAgreement, Decisions) {
    EXPECT_EQ(check_count(false, false), CountCheck::first);
    EXPECT_EQ(check_count(false, true), CountCheck::first);  // a mark without holders cannot be; the count stands
    EXPECT_EQ(check_count(true, true), CountCheck::agrees);
    EXPECT_EQ(check_count(true, false), CountCheck::disagrees);
}

// ---- which permit the queue's head waits for ----------------------------------------

TEST(PermitWait, OldestGrantFirst) {
    const std::int64_t tokens[] = {50, 20, 90, 30};
    EXPECT_EQ(permit_to_wait_for(tokens, 4, 0), 2);
    EXPECT_EQ(permit_to_wait_for(tokens, 4, 7), 2);  // the round does not matter while tokens are known
}

TEST(PermitWait, UnknownTokensAreSkipped) {
    const std::int64_t tokens[] = {0, 70, 0, 40};
    EXPECT_EQ(permit_to_wait_for(tokens, 4, 0), 4);
}

TEST(PermitWait, NoTokenKnownTakesTurns) {
    const std::int64_t tokens[] = {0, 0, 0};
    std::vector<std::int32_t> seen;
    for (std::int32_t r = 0; r < 6; ++r) seen.push_back(permit_to_wait_for(tokens, 3, r));
    EXPECT_EQ(seen, (std::vector<std::int32_t>{1, 2, 3, 1, 2, 3}));
    EXPECT_EQ(permit_to_wait_for(tokens, 3, -5), 1);
    EXPECT_EQ(permit_to_wait_for(nullptr, 0, 0), 1);
}

TEST(PermitWait, Rounds) {
    EXPECT_EQ(permit_round_ms(0), 10);
    EXPECT_EQ(permit_round_ms(1), 20);
    EXPECT_EQ(permit_round_ms(2), 40);
    EXPECT_EQ(permit_round_ms(3), 80);
    EXPECT_EQ(permit_round_ms(4), 160);
    EXPECT_EQ(permit_round_ms(1000000), 160);
    EXPECT_EQ(permit_round_ms(-1), 10);
}

// ---- the grant book ------------------------------------------------------------------

TEST(GrantBook, EmptyUntilOptionsAreUsed) {
    GrantBook b;
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(b.find(1), nullptr);
    EXPECT_EQ(b.permit_key_of(1), 0u);
}

TEST(GrantBook, NestedHoldKeepsTraitsLongestDelayWins) {
    GrantBook b;
    GrantTraits t;
    t.shared = true;
    t.base = 7;
    t.delay_ms = 100;
    b.note(7, t, true);
    GrantTraits nested;
    nested.base = 7;
    nested.delay_ms = 50;
    b.note(7, nested, false);
    ASSERT_NE(b.find(7), nullptr);
    EXPECT_TRUE(b.find(7)->shared);
    EXPECT_EQ(b.find(7)->delay_ms, 100);
    nested.delay_ms = 300;
    b.note(7, nested, false);
    EXPECT_EQ(b.find(7)->delay_ms, 300);
    EXPECT_TRUE(b.find(7)->shared);
}

TEST(GrantBook, FirstHoldReplacesStaleTraits) {
    GrantBook b;
    GrantTraits shared;
    shared.shared = true;
    shared.delay_ms = 500;
    b.note(9, shared, true);
    GrantTraits plain;
    plain.delay_ms = 10;
    b.note(9, plain, true);
    EXPECT_FALSE(b.find(9)->shared);
    EXPECT_EQ(b.find(9)->delay_ms, 10);
    b.forget(9);
    EXPECT_TRUE(b.empty());
}

TEST(GrantBook, PermitOfAResource) {
    GrantBook b;
    const std::uint64_t base = 0x1234567890ABCDEFULL;  // the resource's first permit's key
    const std::uint64_t third = 0x0FEDCBA987654321ULL;
    GrantTraits t;
    t.permit = 3;
    t.permits = 5;
    t.base = base;
    b.note(third, t, true);
    EXPECT_EQ(b.permit_key_of(base), third);
    EXPECT_EQ(b.permit_key_of(third), 0u);
    EXPECT_EQ(b.permit_key_of(base ^ 0x10000), 0u);
}

TEST(GrantBook, DelayedEntries) {
    GrantBook b;
    GrantTraits t;
    t.delay_ms = 200;
    b.note(1, t, true);
    t.delay_ms = 0;
    t.shared = true;
    b.note(2, t, true);
    t.delay_ms = 900;
    b.note(3, t, true);
    GrantBook::Delayed out[4];
    const std::size_t n = b.copy_delayed(out, 4);
    ASSERT_EQ(n, 2u);
    std::set<std::uint64_t> keys{out[0].key, out[1].key};
    EXPECT_EQ(keys, (std::set<std::uint64_t>{1, 3}));
    EXPECT_EQ(b.copy_delayed(out, 1), 1u);
}

// ---- a lost session's delays ------------------------------------------------------------

TEST(DelaySchedule, ARecordKeepsItsResourceUntilItsEndNeverLater) {
    DelayRecord d;
    d.used = true;
    d.db = 5;
    d.key = 42;
    d.until_us = 2000000;
    EXPECT_TRUE(delay_keeps(d, 5, 42, false, 1999999));
    EXPECT_FALSE(delay_keeps(d, 5, 42, false, 2000000));  // over at its end
    EXPECT_FALSE(delay_keeps(d, 6, 42, false, 0));        // another database
    EXPECT_FALSE(delay_keeps(d, 5, 43, false, 0));        // another resource
    EXPECT_TRUE(delay_keeps(d, 5, 42, true, 0));          // an exclusive grant's delay keeps shared holds out
    d.shared = true;
    EXPECT_FALSE(delay_keeps(d, 5, 42, true, 0));  // a shared grant's delay: other shared holds are granted
    EXPECT_TRUE(delay_keeps(d, 5, 42, false, 0));  // exclusive ones are not
    d.used = false;
    EXPECT_FALSE(delay_keeps(d, 5, 42, false, 0));
}

TEST(DelaySchedule, EndSecondsRoundUp) {
    EXPECT_EQ(delay_end_seconds(1000000), 1u);
    EXPECT_EQ(delay_end_seconds(1000001), 2u);
    EXPECT_EQ(delay_end_seconds(1999999), 2u);
    EXPECT_EQ(delay_end_seconds(0), 1u);
    EXPECT_EQ(delay_end_seconds(-5), 1u);
    EXPECT_EQ(delay_end_seconds(INT64_C(1) << 62), UINT32_MAX);
    // About 2026 in seconds since 2000: fits.
    EXPECT_EQ(delay_end_seconds(INT64_C(820454400) * 1000000), 820454400u);
}
