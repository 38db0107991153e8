// Unit tests of src/core/announcements: the grants whose end this session
// will announce (by key, with name, token, scope and subtransaction), and the
// set of resources notifications are enabled for.
#include "core/announcements.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using fencing::core::Announcements;
using fencing::core::NotifyKeys;

namespace {
constexpr std::uint64_t kA = 0xA, kB = 0xB, kC = 0xC;
constexpr bool kSession = true, kXact = false;
constexpr std::uint32_t kTop = 1;

std::vector<std::uint64_t> keys(const Announcements& a) {
    std::vector<std::uint64_t> v(a.size() + 1);
    const std::size_t n = a.copy_keys(v.data(), v.size());
    v.resize(n);
    std::sort(v.begin(), v.end());
    return v;
}

void add(Announcements& a, std::uint64_t key, std::int64_t token, const std::string& name, bool session,
         std::uint32_t sub) {
    a.add(key, token, name.data(), name.size(), session, sub);
}
}  // namespace

TEST(Announcements, AddFindRemove) {
    Announcements a;
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(a.find(kA), nullptr);
    add(a, kA, 10, "job:a", kSession, kTop);
    add(a, kB, 11, std::string("b\0b", 3), kXact, kTop);
    ASSERT_NE(a.find(kA), nullptr);
    EXPECT_EQ(a.find(kA)->token, 10);
    EXPECT_EQ(a.find(kA)->resource, "job:a");
    EXPECT_TRUE(a.find(kA)->session);
    EXPECT_EQ(a.find(kB)->resource, std::string("b\0b", 3));
    EXPECT_FALSE(a.find(kB)->session);
    EXPECT_EQ(keys(a), (std::vector<std::uint64_t>{kA, kB}));
    a.remove(kA);
    EXPECT_EQ(a.find(kA), nullptr);
    a.remove(kA);  // twice is harmless
    EXPECT_EQ(a.size(), 1u);
}

TEST(Announcements, ANewGrantOfTheSameKeyReplacesTheOld) {
    Announcements a;
    add(a, kA, 10, "a", kXact, 2);
    add(a, kA, 12, "a", kSession, kTop);
    EXPECT_EQ(a.size(), 1u);
    EXPECT_EQ(a.find(kA)->token, 12);
    EXPECT_TRUE(a.find(kA)->session);
}

TEST(Announcements, SubtransactionAbortDropsItsTransactionGrantsOnly) {
    Announcements a;
    add(a, kA, 10, "a", kXact, 2);
    add(a, kB, 11, "b", kSession, 2);  // a session lock survives the abort
    add(a, kC, 12, "c", kXact, kTop);
    a.subxact_abort(2);
    EXPECT_EQ(keys(a), (std::vector<std::uint64_t>{kB, kC}));
}

TEST(Announcements, SubtransactionCommitHandsGrantsToTheParent) {
    Announcements a;
    add(a, kA, 10, "a", kXact, 3);
    a.subxact_commit(3, 2);
    a.subxact_abort(3);  // gone from 3 already
    EXPECT_NE(a.find(kA), nullptr);
    a.subxact_abort(2);
    EXPECT_EQ(a.find(kA), nullptr);
}

TEST(Announcements, TransactionAbortDropsTransactionGrants) {
    Announcements a;
    add(a, kA, 10, "a", kXact, kTop);
    add(a, kB, 11, "b", kSession, kTop);
    a.drop_transaction_grants();
    EXPECT_EQ(keys(a), (std::vector<std::uint64_t>{kB}));
}

TEST(Announcements, ScopeCanBecomeSession) {
    Announcements a;
    add(a, kA, 10, "a", kXact, kTop);
    a.mark_session(kA);
    a.drop_transaction_grants();
    EXPECT_NE(a.find(kA), nullptr);
    a.mark_session(kB);  // unknown key: nothing
    EXPECT_EQ(a.size(), 1u);
}

TEST(Announcements, CopyKeysRespectsCapacity) {
    Announcements a;
    add(a, kA, 1, "a", kSession, kTop);
    add(a, kB, 2, "b", kSession, kTop);
    add(a, kC, 3, "c", kSession, kTop);
    std::uint64_t out[2] = {0, 0};
    EXPECT_EQ(a.copy_keys(out, 2), 2u);
    EXPECT_EQ(a.copy_keys(nullptr, 0), 0u);
}

TEST(NotifyKeys, EmptyMeansNothing) {
    NotifyKeys k;
    EXPECT_FALSE(k.any());
    EXPECT_FALSE(k.enabled(kA));
}

TEST(NotifyKeys, WholeDatabase) {
    NotifyKeys k;
    k.assign(true, nullptr, 0);
    EXPECT_TRUE(k.any());
    EXPECT_TRUE(k.enabled(kA));
    EXPECT_TRUE(k.enabled(0));
}

TEST(NotifyKeys, SomeResources) {
    NotifyKeys k;
    const std::uint64_t ks[] = {kC, kA, kA};
    k.assign(false, ks, 3);
    EXPECT_TRUE(k.any());
    EXPECT_TRUE(k.enabled(kA));
    EXPECT_FALSE(k.enabled(kB));
    EXPECT_TRUE(k.enabled(kC));
    EXPECT_EQ(k.size(), 2u);
    k.assign(false, nullptr, 0);
    EXPECT_FALSE(k.any());
    EXPECT_FALSE(k.enabled(kA));
}
