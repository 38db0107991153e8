// The token counter's plan (core/counter.hpp).
#include "core/counter.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace fencing::core;

namespace {

constexpr std::int64_t kAhead = 16;
// A clock far above the tokens of most tests: the clock bound does not bite.
constexpr std::int64_t kClock = 1'000'000'000'000;

// A page whose newest record (at lsn) covers `upto` and which handed out `last`.
CounterPage page_at(std::int64_t last, std::int64_t upto, std::uint64_t lsn) {
    return CounterPage{last, upto - last, true, lsn};
}

// The plan hands out `token` and logs a record covering a window past it now.
void expect_logs_now(const CounterPlan& plan, std::int64_t token) {
    EXPECT_EQ(plan.status, CounterStatus::ok);
    EXPECT_EQ(plan.token, token);
    EXPECT_EQ(plan.action, CounterAction::log_now);
    EXPECT_EQ(plan.covered, token + kAhead);
}

}  // namespace

TEST(CounterPlan, FreshSequenceLogsItsStartValue) {
    expect_logs_now(plan_next_token(CounterPage{1000, 0, false, 50}, 0, 10, {}, kAhead, kClock), 1000);
}

TEST(CounterPlan, CountsDownInTheFirstHalfUnderTheNewestRecord) {
    CounterPlan plan = plan_next_token(page_at(100, 116, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.token, 101);
    EXPECT_EQ(plan.action, CounterAction::count_down);
    EXPECT_EQ(plan.covering.lsn, 500u);
    EXPECT_EQ(plan.covering.upto, 116);
}

TEST(CounterPlan, LogsTheNextRecordOnceHalfIsUsed) {
    // 116 - 108 = 8 left, the token's included: 7 after it, under half of 16.
    CounterPlan plan = plan_next_token(page_at(108, 116, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.token, 109);
    EXPECT_EQ(plan.action, CounterAction::log_ahead);
    EXPECT_EQ(plan.covered, 109 + kAhead);
    // The token itself waits for the record that already covers it.
    EXPECT_EQ(plan.covering.lsn, 500u);
    EXPECT_EQ(plan.covering.upto, 116);
    CounterPlan earlier = plan_next_token(page_at(107, 116, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(earlier.action, CounterAction::count_down);
}

TEST(CounterPlan, TokensUnderAnOlderRecordNameIt) {
    // Record A (lsn 500) covers 116; B (lsn 900), written early, covers 125.
    CounterRecord a{500, 116};
    CounterPlan plan = plan_next_token(page_at(110, 125, 900), 0, 10, a, kAhead, kClock);
    EXPECT_EQ(plan.token, 111);
    EXPECT_EQ(plan.action, CounterAction::count_down);
    EXPECT_EQ(plan.covering.lsn, 500u);
    // Past A's values, only B covers.
    CounterPlan past = plan_next_token(page_at(116, 125, 900), 0, 10, a, kAhead, kClock);
    EXPECT_EQ(past.token, 117);
    EXPECT_EQ(past.covering.lsn, 900u);
}

TEST(CounterPlan, RecordsBeforeTheRedoPointDoNotCount) {
    // A checkpoint's redo point after A: recovery would not replay A.
    CounterRecord a{500, 116};
    CounterPlan plan = plan_next_token(page_at(110, 125, 900), 0, 600, a, kAhead, kClock);
    EXPECT_EQ(plan.covering.lsn, 900u);
    // The page's own record before the redo point: the first change after a
    // checkpoint logs, and the token waits for it.
    CounterPlan first = plan_next_token(page_at(110, 125, 900), 0, 900, a, kAhead, kClock);
    EXPECT_EQ(first.action, CounterAction::log_now);
    EXPECT_EQ(first.token, 111);
}

TEST(CounterPlan, IgnoresARecordThatIsNotOlderOrDoesNotCover) {
    CounterPlan newer = plan_next_token(page_at(110, 125, 900), 0, 10, CounterRecord{950, 200}, kAhead, kClock);
    EXPECT_EQ(newer.covering.lsn, 900u);
    CounterPlan short_one = plan_next_token(page_at(110, 125, 900), 0, 10, CounterRecord{500, 110}, kAhead, kClock);
    EXPECT_EQ(short_one.covering.lsn, 900u);
}

TEST(CounterPlan, LogsWhenTheWindowIsUsedUp) {
    expect_logs_now(plan_next_token(page_at(116, 116, 500), 0, 10, {}, kAhead, kClock), 117);
}

TEST(CounterPlan, JumpsPastAFloorAndLogs) {
    expect_logs_now(plan_next_token(page_at(100, 116, 500), 5000, 10, {}, kAhead, kClock), 5001);
    // A floor under the counter changes nothing.
    EXPECT_EQ(plan_next_token(page_at(100, 116, 500), 50, 10, {}, kAhead, kClock).token, 101);
}

TEST(CounterPlan, StopsAtTheMaximum) {
    EXPECT_EQ(plan_next_token(page_at(INT64_MAX, INT64_MAX, 500), 0, 10, {}, kAhead, kClock).status,
              CounterStatus::exhausted);
    EXPECT_EQ(plan_next_token(page_at(100, 116, 500), INT64_MAX, 10, {}, kAhead, kClock, FloorReach::unbounded).status,
              CounterStatus::exhausted);
    // Within the clock bound no floor gets there.
    EXPECT_EQ(plan_next_token(page_at(100, 116, 500), INT64_MAX, 10, {}, kAhead, kClock).status,
              CounterStatus::beyond_bound);
    // Near it: the record covers up to the maximum and no further record is
    // logged ahead (it could cover nothing more).
    CounterPlan near = plan_next_token(page_at(INT64_MAX - 5, INT64_MAX, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(near.token, INT64_MAX - 4);
    EXPECT_EQ(near.action, CounterAction::count_down);
    CounterPlan last = plan_next_token(page_at(INT64_MAX - 1, INT64_MAX, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(last.token, INT64_MAX);
    CounterPlan over = plan_next_token(page_at(INT64_MAX - 3, INT64_MAX - 3, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(over.action, CounterAction::log_now);
    EXPECT_EQ(over.covered, INT64_MAX);
}

// Carries plans out on a simulated page and WAL, with a flush position that
// lags, and checks the property the glue relies on: every token handed out
// is covered by a record that really covers it, is replayable, and after a
// crash at any point (replaying the records up to any flushed position that
// includes the token's covering record) the counter restarts above it.
TEST(CounterPlan, SimulatedRunNeverReissuesAfterACrash) {
    struct Rec {
        std::uint64_t lsn;
        std::int64_t upto;
    };
    std::vector<Rec> wal;
    CounterPage page{1, 0, false, 1};
    wal.push_back({1, 1});
    std::uint64_t next_lsn = 2;
    SeenRecords seen;
    std::vector<std::pair<std::int64_t, std::uint64_t>> issued;  // token, covering lsn
    for (int i = 0; i < 2000; ++i) {
        seen.observe({page.lsn, page.is_called ? page.last_value + page.log_cnt : page.last_value});
        CounterPlan plan = plan_next_token(page, 0, 0, seen.before(), kAhead, kClock);
        ASSERT_EQ(plan.status, CounterStatus::ok);
        CounterRecord covering = plan.covering;
        if (plan.action == CounterAction::count_down) {
            page.last_value = plan.token;
            page.log_cnt -= 1;
        } else {
            wal.push_back({next_lsn, plan.covered});
            CounterRecord rec{next_lsn, plan.covered};
            page = CounterPage{plan.token, plan.covered - plan.token, true, next_lsn++};
            seen.observe(rec);
            if (plan.action == CounterAction::log_now) covering = rec;
        }
        page.is_called = true;
        // The covering record really covers the token.
        bool found = false;
        for (const Rec& r : wal)
            if (r.lsn == covering.lsn) {
                found = true;
                EXPECT_GE(r.upto, plan.token);
            }
        ASSERT_TRUE(found);
        if (!issued.empty()) {
            ASSERT_GT(plan.token, issued.back().first);
        }
        issued.emplace_back(plan.token, covering.lsn);
    }
    // Crash with WAL flushed up to each record: every token whose covering
    // record is flushed must be below what replay restores.
    for (const Rec& flushed : wal) {
        std::int64_t restored = 0;
        for (const Rec& r : wal)
            if (r.lsn <= flushed.lsn) restored = r.upto;
        for (const auto& [token, lsn] : issued) {
            if (lsn <= flushed.lsn) {
                ASSERT_LE(token, restored) << "token " << token << " reissued after a crash";
            }
        }
    }
    // Most tokens need no record newer than the one before the newest.
    std::set<std::uint64_t> lsns;
    for (const auto& t : issued) lsns.insert(t.second);
    EXPECT_LE(lsns.size(), wal.size());
}

// ---- the clock bound -----------------------------------------------------

namespace {
CounterPage unvouched(CounterPage p) {
    p.vouched = false;
    return p;
}
}  // namespace

TEST(CounterClock, AnUnprovenPageStartsAtTheClockBound) {
    // A copy of a page that counted down to 100 under a record covering 116:
    // the copy is a fresh counter, at clock + lead, and logs at once.
    CounterPlan plan = plan_next_token(unvouched(page_at(100, 116, 500)), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.token, kClock + kClockLead);
    EXPECT_EQ(plan.action, CounterAction::log_now);
    // It covers nothing past the bound: just the token.
    EXPECT_EQ(plan.covered, kClock + kClockLead);
}

TEST(CounterClock, AnUnprovenPageAboveTheBoundKeepsItsValueAndLogs) {
    const std::int64_t far = kClock + 10 * kClockLead;
    CounterPlan plan = plan_next_token(unvouched(page_at(far, far + 16, 500)), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.token, far + 1);
    EXPECT_EQ(plan.action, CounterAction::log_now);
    EXPECT_EQ(plan.covered, far + 1 + kAhead);
}

TEST(CounterClock, ARecordNeverCoversPastTheClockBound) {
    // A window of 2^30 values, a counter near the clock.
    const std::int64_t ahead = std::int64_t{1} << 30;
    CounterPlan plan = plan_next_token(page_at(kClock, kClock, 500), 0, 10, {}, ahead, kClock);
    EXPECT_EQ(plan.token, kClock + 1);
    EXPECT_EQ(plan.action, CounterAction::log_now);
    EXPECT_EQ(plan.covered, kClock + kClockLead);
    // Far below the clock the window is the full log-ahead.
    CounterPlan low = plan_next_token(page_at(1000, 1000, 500), 0, 10, {}, ahead, kClock);
    EXPECT_EQ(low.covered, 1001 + ahead);
}

TEST(CounterClock, WaitsForTheClockRatherThanRunAhead) {
    // The counter at the bound (a fresh start a moment ago): one more token
    // needs the clock to move 1 us.
    const std::int64_t at = kClock + kClockLead;
    CounterPlan plan = plan_next_token(page_at(at, at, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.action, CounterAction::wait_for_clock);
    EXPECT_EQ(plan.wait_us, 1);
    CounterPlan later = plan_next_token(page_at(at, at, 500), 0, 10, {}, kAhead, kClock + 1);
    EXPECT_EQ(later.action, CounterAction::log_now);
    EXPECT_EQ(later.token, at + 1);
    EXPECT_EQ(later.covered, at + 1);
    // A floor just past the bound waits too; one far past it moves the
    // counter there only when unbounded.
    CounterPlan floor_near = plan_next_token(page_at(100, 116, 500), at + 10, 10, {}, kAhead, kClock);
    EXPECT_EQ(floor_near.action, CounterAction::wait_for_clock);
    EXPECT_EQ(floor_near.wait_us, 11);
    CounterPlan floor_far =
        plan_next_token(page_at(100, 116, 500), at + 5 * kClockLead, 10, {}, kAhead, kClock, FloorReach::unbounded);
    EXPECT_EQ(floor_far.status, CounterStatus::ok);
    EXPECT_EQ(floor_far.action, CounterAction::log_now);
    EXPECT_EQ(floor_far.covered, at + 5 * kClockLead + 1 + kAhead);
}

TEST(CounterClock, AFloorMovesTheCounterOnlyWithinTheBound) {
    // The largest floor accepted: its token is kClockLead past the bound,
    // which the plan waits out.
    const std::int64_t limit = floor_limit(kClock);
    EXPECT_EQ(limit, kClock + 2 * kClockLead - 1);
    CounterPlan at_limit = plan_next_token(page_at(100, 116, 500), limit, 10, {}, kAhead, kClock);
    EXPECT_EQ(at_limit.status, CounterStatus::ok);
    EXPECT_EQ(at_limit.action, CounterAction::wait_for_clock);
    EXPECT_EQ(at_limit.wait_us, kClockLead);
    CounterPlan waited = plan_next_token(page_at(100, 116, 500), limit, 10, {}, kAhead, kClock + kClockLead);
    EXPECT_EQ(waited.token, limit + 1);
    EXPECT_EQ(waited.covered, limit + 1);  // at the bound: nothing ahead
    // One past it is refused, and says where the bound is.
    for (std::int64_t floor : {limit + 1, kClock + 60 * kClockLead, std::int64_t{1} << 52, INT64_MAX - 1, INT64_MAX}) {
        CounterPlan plan = plan_next_token(page_at(100, 116, 500), floor, 10, {}, kAhead, kClock);
        EXPECT_EQ(plan.status, CounterStatus::beyond_bound) << floor;
        EXPECT_EQ(plan.bound, limit) << floor;
        EXPECT_EQ(plan.token, 0) << floor;
    }
    // A floor the counter is already past moves nothing, wherever it is:
    // a counter a superuser moved far ahead goes on.
    const std::int64_t far = kClock + 100 * kClockLead;
    CounterPlan below = plan_next_token(page_at(far, far + 16, 500), far - 5, 10, {}, kAhead, kClock);
    EXPECT_EQ(below.status, CounterStatus::ok);
    EXPECT_EQ(below.token, far + 1);
    // An unproven page (a restored copy) is refused a far floor too.
    EXPECT_EQ(plan_next_token(unvouched(page_at(100, 116, 500)), far, 10, {}, kAhead, kClock).status,
              CounterStatus::beyond_bound);
}

TEST(CounterClock, CountsDownUnderARecordNearTheBound) {
    // A record covering up to the bound: tokens under it count down.
    const std::int64_t at = kClock + kClockLead;
    CounterPlan plan = plan_next_token(page_at(at - 100, at, 500), 0, 10, {}, kAhead, kClock);
    EXPECT_EQ(plan.token, at - 99);
    EXPECT_EQ(plan.action, CounterAction::count_down);
}

TEST(CounterStampTest, VouchesOnlyForTheSameFileRunAndRecord) {
    CounterStamp here{0, 1663, 5, 16400, 1, 0, 777, 0};
    CounterStamp on_page = here;
    on_page.magic = kStampMagic;
    on_page.lsn = 900;
    EXPECT_TRUE(stamp_vouches(on_page, here, 900, 800));
    // The page changed since (another record, a copy's record, setval).
    EXPECT_FALSE(stamp_vouches(on_page, here, 901, 800));
    CounterStamp other = here;
    other.database = 6;  // CREATE DATABASE: another database's file
    EXPECT_FALSE(stamp_vouches(on_page, other, 900, 800));
    other = here;
    other.tablespace = 1664;  // ALTER DATABASE ... SET TABLESPACE
    EXPECT_FALSE(stamp_vouches(on_page, other, 900, 800));
    other = here;
    other.relfile = 16401;
    EXPECT_FALSE(stamp_vouches(on_page, other, 900, 800));
    other = here;
    other.timeline = 2;  // promotion, PITR
    EXPECT_FALSE(stamp_vouches(on_page, other, 900, 800));
    other = here;
    other.server_start = 778;  // a restart: crash, restore, pg_rewind
    EXPECT_FALSE(stamp_vouches(on_page, other, 900, 800));
    // A record older than the database's current row in pg_database: written
    // by an earlier database under this OID, or by the one a snapshot was
    // taken of (CREATE DATABASE ... OID = n), or before an ALTER DATABASE.
    EXPECT_FALSE(stamp_vouches(on_page, here, 900, 900));
    EXPECT_FALSE(stamp_vouches(on_page, here, 900, 901));
    EXPECT_TRUE(stamp_vouches(on_page, here, 900, 0));
    // No stamp (a replayed or copied image has none).
    EXPECT_FALSE(stamp_vouches(CounterStamp{}, here, 900, 800));
    EXPECT_FALSE(stamp_vouches(CounterStamp{}, CounterStamp{}, 0, 0));
}

// A run on a simulated page with a clock that at times runs slower than the
// tokens, a huge log-ahead, and copies of the page taken at random points
// (its state then, with any older record: what a restore or a standby
// keeps). Every token stays within the clock bound at its issue, and a copy
// that goes on later (fresh, as its stamp does not match) issues only tokens
// above every token issued before.
TEST(CounterClock, SimulatedCopiesNeverReissue) {
    std::uint64_t state = 12345;
    auto rnd = [&state](std::uint64_t n) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (state >> 33) % n;
    };
    const std::int64_t ahead = std::int64_t{1} << 30;
    std::int64_t clock = kClock;
    CounterPage page{kClock, 0, false, 1, false};
    std::uint64_t next_lsn = 2;
    std::int64_t max_issued = 0;
    for (int round = 0; round < 50; ++round) {
        std::vector<CounterPage> copies;
        for (int i = 0; i < 400; ++i) {
            clock += static_cast<std::int64_t>(rnd(3));  // 0 to 2 us per acquisition
            CounterPlan plan = plan_next_token(page, 0, 0, {}, ahead, clock);
            ASSERT_EQ(plan.status, CounterStatus::ok);
            if (plan.action == CounterAction::wait_for_clock) {
                ASSERT_GT(plan.wait_us, 0);
                ASSERT_LE(plan.wait_us, kClockLead);
                clock += plan.wait_us;
                continue;
            }
            if (plan.action == CounterAction::count_down) {
                page.last_value = plan.token;
                page.log_cnt -= 1;
            } else {
                ASSERT_LE(plan.covered, clock + kClockLead) << "a record past the clock bound";
                page = CounterPage{plan.token, plan.covered - plan.token, true, next_lsn++, true};
            }
            page.is_called = true;
            ASSERT_GT(plan.token, max_issued);
            ASSERT_LE(plan.token, clock + kClockLead);
            max_issued = plan.token;
            if (rnd(50) == 0) copies.push_back(page);
        }
        // A copy taken earlier goes on, a while later.
        if (!copies.empty()) {
            CounterPage copy = copies[rnd(copies.size())];
            copy.vouched = false;
            clock += 1 + static_cast<std::int64_t>(rnd(1000));
            CounterPlan plan = plan_next_token(copy, 0, 0, {}, ahead, clock);
            ASSERT_NE(plan.action, CounterAction::count_down);
            ASSERT_GT(plan.token, max_issued) << "a copy reissued a token";
            // The copy replaces the original (a promotion, a restore).
            if (plan.action != CounterAction::wait_for_clock) {
                page = CounterPage{plan.token, plan.covered - plan.token, true, next_lsn++, true};
                max_issued = plan.token;
            }
        }
    }
}

TEST(SeenRecords, KeepsTheNewestTwo) {
    SeenRecords s;
    s.observe({10, 100});
    s.observe({10, 100});
    EXPECT_EQ(s.newest().lsn, 10u);
    EXPECT_EQ(s.before().lsn, 0u);
    s.observe({20, 200});
    EXPECT_EQ(s.before().lsn, 10u);
    s.observe({30, 300});
    EXPECT_EQ(s.before().lsn, 20u);
    EXPECT_EQ(s.newest().upto, 300);
    // An older LSN: another counter; nothing before it is known.
    s.observe({5, 50});
    EXPECT_EQ(s.newest().lsn, 5u);
    EXPECT_EQ(s.before().lsn, 0u);
    s.forget();
    EXPECT_EQ(s.newest().lsn, 0u);
}
