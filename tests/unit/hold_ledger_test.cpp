// Unit tests of src/core/hold_ledger: nesting, session and transaction counts,
// subtransaction commit/abort, transaction end, leases and forget.
#include "core/hold_ledger.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

using fencing::core::Hold;
using fencing::core::HoldLedger;

namespace {
constexpr std::uint64_t kA = 0xA;
constexpr std::uint64_t kB = 0xB;
constexpr std::uint64_t kC = 0xFFFFFFFFFFFFFFFFULL;
constexpr bool kSession = true;
constexpr bool kXact = false;
constexpr std::uint32_t kTop = 1;  // the top-level transaction's subtransaction id

using Levels = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

std::vector<std::pair<std::uint64_t, std::uint32_t>> session_holds(const HoldLedger& l) {
    std::vector<HoldLedger::SessionHold> buf(l.size() + 1);
    const std::size_t n = l.copy_session_holds(buf.data(), l.size());
    std::vector<std::pair<std::uint64_t, std::uint32_t>> v;
    for (std::size_t i = 0; i < n; ++i) v.emplace_back(buf[i].key, buf[i].count);
    return v;
}

std::vector<std::pair<std::uint64_t, std::uint32_t>> sorted_session_holds(const HoldLedger& l) {
    auto v = session_holds(l);
    std::sort(v.begin(), v.end());
    return v;
}
}  // namespace

// ---- empty ledger -----------------------------------------------------------

TEST(HoldLedger, EmptyLedger) {
    HoldLedger l;
    EXPECT_EQ(l.size(), 0u);
    EXPECT_EQ(l.find(kA), nullptr);
    EXPECT_FALSE(l.release_session(kA));
    EXPECT_TRUE(session_holds(l).empty());
    EXPECT_EQ(l.shortest_lease(), 0);
    l.xact_end();
    l.subxact_abort(2);
    l.subxact_commit(2, kTop);
    l.forget(kA);
    EXPECT_EQ(l.size(), 0u);
}

TEST(HoldLedger, DefaultHoldIsNotHeld) {
    const Hold h;
    EXPECT_FALSE(h.held());
    EXPECT_EQ(h.xact_total(), 0u);
    EXPECT_EQ(h.token, 0);
    EXPECT_EQ(h.lease_ms, 0);
}

// ---- session holds ----------------------------------------------------------

TEST(HoldLedger, SingleSessionHold) {
    HoldLedger l;
    l.add(kA, 7, kSession, kTop, 0);
    const Hold* h = l.find(kA);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->token, 7);
    EXPECT_EQ(h->session, 1u);
    EXPECT_EQ(h->xact_total(), 0u);
    EXPECT_TRUE(h->xact.empty());
    EXPECT_TRUE(h->held());
    EXPECT_EQ(l.size(), 1u);
    EXPECT_TRUE(l.release_session(kA));
    EXPECT_EQ(l.find(kA), nullptr);
    EXPECT_EQ(l.size(), 0u);
    EXPECT_FALSE(l.release_session(kA));
}

TEST(HoldLedger, NestedSessionHoldsCountAndKeepFirstToken) {
    HoldLedger l;
    l.add(kA, 7, kSession, kTop, 0);
    l.add(kA, 8, kSession, kTop, 0);  // nested: the first grant's token stays
    l.add(kA, 9, kSession, kTop, 0);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->session, 3u);
    EXPECT_EQ(l.find(kA)->token, 7);
    EXPECT_TRUE(l.release_session(kA));
    EXPECT_TRUE(l.release_session(kA));
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->session, 1u);
    EXPECT_TRUE(l.release_session(kA));
    EXPECT_EQ(l.find(kA), nullptr);
    EXPECT_FALSE(l.release_session(kA));
}

TEST(HoldLedger, NewTokenAfterFullRelease) {
    HoldLedger l;
    l.add(kA, 7, kSession, kTop, 100);
    EXPECT_TRUE(l.release_session(kA));
    l.add(kA, 12, kSession, kTop, 0);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->token, 12);
    EXPECT_EQ(l.find(kA)->lease_ms, 0);  // the old lease is gone with the old hold
}

TEST(HoldLedger, SessionHoldsListsEveryKeyWithCount) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 0);
    l.add(kA, 1, kSession, kTop, 0);
    l.add(kB, 2, kXact, kTop, 0);  // transaction only: not listed
    l.add(kC, 3, kSession, kTop, 0);
    l.add(kC, 3, kXact, kTop, 0);
    using V = std::vector<std::pair<std::uint64_t, std::uint32_t>>;
    EXPECT_EQ(sorted_session_holds(l), (V{{kA, 2}, {kC, 1}}));
}

TEST(HoldLedger, ReleaseSessionDoesNotTouchXactHolds) {
    HoldLedger l;
    l.add(kA, 5, kXact, kTop, 0);
    EXPECT_FALSE(l.release_session(kA));  // no session hold to release
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
    l.add(kA, 6, kSession, kTop, 0);
    EXPECT_TRUE(l.release_session(kA));
    ASSERT_NE(l.find(kA), nullptr);  // still held by the transaction
    EXPECT_EQ(l.find(kA)->session, 0u);
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
    EXPECT_EQ(l.find(kA)->token, 5);
}

// ---- transaction holds ------------------------------------------------------

TEST(HoldLedger, XactHoldsCountPerSubtransaction) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.add(kA, 3, kXact, 3, 0);
    l.add(kA, 3, kXact, 3, 0);
    const Hold* h = l.find(kA);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->xact, (Levels{{kTop, 2}, {2, 1}, {3, 2}}));
    EXPECT_EQ(h->xact_total(), 5u);
    EXPECT_EQ(h->session, 0u);
    EXPECT_TRUE(h->held());
}

TEST(HoldLedger, XactEndDropsXactOnlyHolds) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.add(kB, 4, kXact, kTop, 0);
    l.xact_end();
    EXPECT_EQ(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kB), nullptr);
    EXPECT_EQ(l.size(), 0u);
}

TEST(HoldLedger, XactEndKeepsSessionHolds) {
    HoldLedger l;
    l.add(kA, 3, kSession, kTop, 0);
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.add(kB, 4, kXact, kTop, 0);
    l.xact_end();
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->session, 1u);
    EXPECT_EQ(l.find(kA)->xact_total(), 0u);
    EXPECT_TRUE(l.find(kA)->xact.empty());
    EXPECT_EQ(l.find(kA)->token, 3);
    EXPECT_EQ(l.find(kB), nullptr);
    EXPECT_EQ(l.size(), 1u);
}

TEST(HoldLedger, MixedNestingSessionAndXact) {
    HoldLedger l;
    l.add(kA, 10, kXact, kTop, 0);
    l.add(kA, 11, kSession, kTop, 0);  // nested: token stays 10
    l.add(kA, 12, kSession, kTop, 0);
    EXPECT_EQ(l.find(kA)->token, 10);
    EXPECT_EQ(l.find(kA)->session, 2u);
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
    l.xact_end();
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->token, 10);
    EXPECT_TRUE(l.release_session(kA));
    EXPECT_TRUE(l.release_session(kA));
    EXPECT_EQ(l.find(kA), nullptr);
}

// ---- subtransactions --------------------------------------------------------

TEST(HoldLedger, SubxactAbortDropsOnlyThatLevel) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.subxact_abort(2);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 1}}));
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
}

TEST(HoldLedger, SubxactAbortDropsKeyFirstTakenThere) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kB, 4, kXact, 2, 500);
    l.subxact_abort(2);
    EXPECT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kB), nullptr);
    EXPECT_EQ(l.size(), 1u);
    EXPECT_EQ(l.shortest_lease(), 0);  // the leased hold went with the abort
}

TEST(HoldLedger, SubxactAbortKeepsSessionHoldTakenThere) {
    // Session locks survive a subtransaction abort in PostgreSQL.
    HoldLedger l;
    l.add(kA, 3, kSession, 2, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.subxact_abort(2);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->session, 1u);
    EXPECT_EQ(l.find(kA)->xact_total(), 0u);
}

TEST(HoldLedger, SubxactAbortOfUnrelatedLevelChangesNothing) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.subxact_abort(7);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 1}, {2, 1}}));
}

TEST(HoldLedger, SubxactCommitMovesHoldsToParentAndMerges) {
    HoldLedger l;
    l.add(kA, 3, kXact, kTop, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.add(kA, 3, kXact, 2, 0);
    l.subxact_commit(2, kTop);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 3}}));
    EXPECT_EQ(l.find(kA)->xact_total(), 3u);
}

TEST(HoldLedger, SubxactCommitWithoutParentEntry) {
    HoldLedger l;
    l.add(kA, 3, kXact, 2, 0);
    l.subxact_commit(2, kTop);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 1}}));
    // Then a later abort of the old subtransaction id must not remove it.
    l.subxact_abort(2);
    ASSERT_NE(l.find(kA), nullptr);
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
    // But aborting the parent does.
    l.subxact_abort(kTop);
    EXPECT_EQ(l.find(kA), nullptr);
}

TEST(HoldLedger, DeepNestingCommitChain) {
    // BEGIN; (1) SAVEPOINT (2) SAVEPOINT (3) SAVEPOINT (4)
    HoldLedger l;
    l.add(kA, 9, kXact, 1, 0);
    l.add(kA, 9, kXact, 2, 0);
    l.add(kA, 9, kXact, 3, 0);
    l.add(kA, 9, kXact, 4, 0);
    l.add(kA, 9, kXact, 4, 0);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{1, 1}, {2, 1}, {3, 1}, {4, 2}}));
    l.subxact_commit(4, 3);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{1, 1}, {2, 1}, {3, 3}}));
    l.subxact_abort(3);  // ROLLBACK TO the savepoint that began 3: loses 3 holds
    EXPECT_EQ(l.find(kA)->xact, (Levels{{1, 1}, {2, 1}}));
    l.add(kA, 9, kXact, 5, 0);  // a new savepoint under 2
    l.subxact_commit(5, 2);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{1, 1}, {2, 2}}));
    l.subxact_commit(2, 1);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{1, 3}}));
    EXPECT_EQ(l.find(kA)->xact_total(), 3u);
    l.xact_end();
    EXPECT_EQ(l.find(kA), nullptr);
}

TEST(HoldLedger, SubxactCommitAffectsEveryKey) {
    HoldLedger l;
    l.add(kA, 1, kXact, 2, 0);
    l.add(kB, 2, kXact, 2, 0);
    l.add(kC, 3, kXact, kTop, 0);
    l.add(kC, 3, kXact, 2, 0);
    l.subxact_commit(2, kTop);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 1}}));
    EXPECT_EQ(l.find(kB)->xact, (Levels{{kTop, 1}}));
    EXPECT_EQ(l.find(kC)->xact, (Levels{{kTop, 2}}));
    l.subxact_abort(kTop);
    EXPECT_EQ(l.size(), 0u);
}

TEST(HoldLedger, AddAfterCommitMergesIntoParentLevel) {
    HoldLedger l;
    l.add(kA, 1, kXact, kTop, 0);
    l.add(kA, 1, kXact, 2, 0);
    l.subxact_commit(2, kTop);
    l.add(kA, 1, kXact, kTop, 0);
    EXPECT_EQ(l.find(kA)->xact, (Levels{{kTop, 3}}));
}

// ---- tokens and leases ------------------------------------------------------

TEST(HoldLedger, NestedHoldKeepsLeaseUnlessShorter) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 1000);
    l.add(kA, 2, kSession, kTop, 5000);  // longer: ignored
    EXPECT_EQ(l.find(kA)->lease_ms, 1000);
    l.add(kA, 3, kSession, kTop, 0);  // no lease: does not clear the lease
    EXPECT_EQ(l.find(kA)->lease_ms, 1000);
    l.add(kA, 4, kXact, kTop, 300);  // shorter: wins
    EXPECT_EQ(l.find(kA)->lease_ms, 300);
    EXPECT_EQ(l.find(kA)->token, 1);
}

TEST(HoldLedger, NestedLeaseOnUnleasedHoldWins) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 0);
    l.add(kA, 1, kSession, kTop, 2000);
    EXPECT_EQ(l.find(kA)->lease_ms, 2000);
}

TEST(HoldLedger, ShortestLeaseAcrossKeys) {
    HoldLedger l;
    EXPECT_EQ(l.shortest_lease(), 0);
    l.add(kA, 1, kSession, kTop, 0);
    EXPECT_EQ(l.shortest_lease(), 0);
    l.add(kB, 2, kSession, kTop, 4000);
    EXPECT_EQ(l.shortest_lease(), 4000);
    l.add(kC, 3, kXact, kTop, 1500);
    EXPECT_EQ(l.shortest_lease(), 1500);
    l.xact_end();  // kC goes away
    EXPECT_EQ(l.shortest_lease(), 4000);
    EXPECT_TRUE(l.release_session(kB));
    EXPECT_EQ(l.shortest_lease(), 0);
}

TEST(HoldLedger, LargeTokensAndLeases) {
    HoldLedger l;
    l.add(kC, INT64_MAX, kSession, kTop, INT64_MAX);
    EXPECT_EQ(l.find(kC)->token, INT64_MAX);
    EXPECT_EQ(l.shortest_lease(), INT64_MAX);
}

// ---- forget -----------------------------------------------------------------

TEST(HoldLedger, ForgetDropsEverything) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 100);
    l.add(kA, 1, kSession, kTop, 0);
    l.add(kA, 1, kXact, 2, 0);
    l.add(kB, 2, kSession, kTop, 0);
    l.forget(kA);
    EXPECT_EQ(l.find(kA), nullptr);
    EXPECT_FALSE(l.release_session(kA));
    EXPECT_EQ(l.size(), 1u);
    EXPECT_EQ(l.shortest_lease(), 0);
    EXPECT_NE(l.find(kB), nullptr);
    l.forget(kA);  // forgetting an unknown key is harmless
    l.forget(kB);
    EXPECT_EQ(l.size(), 0u);
}

TEST(HoldLedger, ForgetThenReaddStartsFresh) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 100);
    l.forget(kA);
    l.add(kA, 2, kXact, kTop, 0);
    EXPECT_EQ(l.find(kA)->token, 2);
    EXPECT_EQ(l.find(kA)->lease_ms, 0);
    EXPECT_EQ(l.find(kA)->session, 0u);
    EXPECT_EQ(l.find(kA)->xact_total(), 1u);
}

// ---- many keys --------------------------------------------------------------

TEST(HoldLedger, ManyKeys) {
    HoldLedger l;
    for (std::uint64_t k = 1; k <= 1000; ++k) l.add(k, static_cast<std::int64_t>(k), (k % 2) == 0, kTop, 0);
    EXPECT_EQ(l.size(), 1000u);
    EXPECT_EQ(session_holds(l).size(), 500u);
    l.xact_end();
    EXPECT_EQ(l.size(), 500u);
    for (std::uint64_t k = 2; k <= 1000; k += 2) EXPECT_TRUE(l.release_session(k));
    EXPECT_EQ(l.size(), 0u);
}

TEST(HoldLedger, CopySessionHoldsRespectsCapacityAndCarriesTokens) {
    HoldLedger l;
    l.add(kA, 11, kSession, kTop, 0);
    l.add(kB, 12, kSession, kTop, 0);
    l.add(kC, 13, kXact, kTop, 0);
    HoldLedger::SessionHold one[1];
    EXPECT_EQ(l.copy_session_holds(one, 1), 1u);
    EXPECT_TRUE(one[0].key == kA || one[0].key == kB);
    EXPECT_EQ(one[0].token, one[0].key == kA ? 11 : 12);
    HoldLedger::SessionHold all[3];
    EXPECT_EQ(l.copy_session_holds(all, 3), 2u);
    EXPECT_EQ(l.copy_session_holds(nullptr, 0), 0u);
}

TEST(HoldLedger, CopyLeasedHoldsListsOnlyLeasedKeysAndCountsPastCapacity) {
    HoldLedger l;
    l.add(kA, 1, kSession, kTop, 0);
    EXPECT_EQ(l.copy_leased_holds(nullptr, 0), 0u);
    l.add(kB, 2, kSession, kTop, 500);
    l.add(kC, 3, kXact, kTop, 900);
    HoldLedger::LeasedHold buf[2];
    ASSERT_EQ(l.copy_leased_holds(buf, 2), 2u);
    std::vector<std::pair<std::uint64_t, std::int64_t>> v{{buf[0].key, buf[0].lease_ms}, {buf[1].key, buf[1].lease_ms}};
    std::sort(v.begin(), v.end());
    EXPECT_EQ(v, (std::vector<std::pair<std::uint64_t, std::int64_t>>{{kB, 500}, {kC, 900}}));
    EXPECT_EQ(l.copy_leased_holds(buf, 1), 2u) << "the count says the buffer was too small";
    l.forget(kB);
    ASSERT_EQ(l.copy_leased_holds(buf, 2), 1u);
    EXPECT_EQ(buf[0].key, kC);
}

TEST(HoldLedger, AnyXactSeesOnlyTransactionHolds) {
    HoldLedger l;
    EXPECT_FALSE(l.any_xact());
    l.add(1, 10, true, 1, 0);
    EXPECT_FALSE(l.any_xact()) << "a session hold is not a transaction hold";
    l.add(2, 20, false, 3, 0);
    EXPECT_TRUE(l.any_xact());
    l.subxact_abort(3);
    EXPECT_FALSE(l.any_xact()) << "the subtransaction that took it aborted";
    l.add(2, 21, false, 1, 0);
    EXPECT_TRUE(l.any_xact());
    l.xact_end();
    EXPECT_FALSE(l.any_xact());
}

TEST(HoldLedger, KeepsTheStatementOfTheFirstHold) {
    HoldLedger l;
    l.add(7, 70, false, 1, 0, 111);
    ASSERT_NE(l.find(7), nullptr);
    EXPECT_EQ(l.find(7)->statement, 111);
    l.add(7, 70, false, 1, 0, 222);
    EXPECT_EQ(l.find(7)->statement, 111) << "a nested hold keeps the first statement";
    l.xact_end();
    l.add(7, 71, false, 1, 0, 333);
    EXPECT_EQ(l.find(7)->statement, 333) << "a new grant records its own";
}
