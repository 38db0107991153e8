// Unit tests of src/core/resource_key: the length rule, the key function
// (pinned: the keys are stored on disk and name shared locks, so they must
// never change) and the 32/32 split used in lock tags.
#include "core/resource_key.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using fencing::core::check_resource;
using fencing::core::key_as_int64;
using fencing::core::key_high;
using fencing::core::key_join;
using fencing::core::key_low;
using fencing::core::kMaxResourceBytes;
using fencing::core::resource_key;
using fencing::core::ResourceStatus;

namespace {
std::uint64_t key(const std::string& s) { return resource_key(s.data(), s.size()); }

// Sorts the keys and reports the first duplicate, if any.
::testing::AssertionResult all_distinct(std::vector<std::uint64_t> keys) {
    std::sort(keys.begin(), keys.end());
    const auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end())
        return ::testing::AssertionFailure() << "duplicate key 0x" << std::hex << *dup << " among " << std::dec
                                             << keys.size() << " keys";
    return ::testing::AssertionSuccess();
}
}  // namespace

// ---- check_resource ---------------------------------------------------------

TEST(CheckResource, Limits) {
    EXPECT_EQ(kMaxResourceBytes, 1024u);
    EXPECT_EQ(check_resource(0), ResourceStatus::empty);
    EXPECT_EQ(check_resource(1), ResourceStatus::ok);
    EXPECT_EQ(check_resource(2), ResourceStatus::ok);
    EXPECT_EQ(check_resource(1023), ResourceStatus::ok);
    EXPECT_EQ(check_resource(1024), ResourceStatus::ok);
    EXPECT_EQ(check_resource(1025), ResourceStatus::too_long);
    EXPECT_EQ(check_resource(4096), ResourceStatus::too_long);
    EXPECT_EQ(check_resource(SIZE_MAX), ResourceStatus::too_long);
}

// ---- key stability ----------------------------------------------------------
// Values computed by the 1.0 implementation (they equal the reference
// MurmurHash64A with seed 0x66656e63696e6721 "fencing!"). If one of these
// fails, the function changed: existing fence state and running clusters would
// disagree about lock keys. Do not "fix" the numbers; restore the function.

TEST(ResourceKey, PinnedValues) {
    EXPECT_EQ(key(""), 0x01642a39fbbdf00fULL);
    EXPECT_EQ(key("a"), 0x44455f753ba16998ULL);
    EXPECT_EQ(key("abc"), 0x6ed13e838f2cbd80ULL);
    EXPECT_EQ(key("smoke"), 0x268895d962d6e2eaULL);
    EXPECT_EQ(key("fencing"), 0xc7c8b68913f8d25cULL);           // 7 bytes: tail only
    EXPECT_EQ(key("12345678"), 0xaa9b8dd27021ecadULL);          // exactly one block
    EXPECT_EQ(key("123456789"), 0xf72dbcd62a486d02ULL);         // one block + tail
    EXPECT_EQ(key("payments/batch-42"), 0x8fd297179f79e6acULL);  // two blocks + tail
    EXPECT_EQ(key(std::string("a\0b", 3)), 0x51129c54028c1015ULL);
    EXPECT_EQ(key("\xff\x80"), 0xac87a3e59d41de67ULL);  // bytes >= 0x80 (signed char pitfall)
    EXPECT_EQ(key("\xc3\xa9t\xc3\xa9"), 0xa800a1338256715bULL);  // "été" in UTF-8
    EXPECT_EQ(key("r0"), 0xef3ab2048f0f82bfULL);
    EXPECT_EQ(key("r999999"), 0xef8bbb8b5679a91aULL);
    EXPECT_EQ(key(std::string(1024, 'x')), 0xb8c60cba0604abf0ULL);
}

TEST(ResourceKey, PinnedAsSignedBigint) {
    // The fence state table stores the key as bigint: a bit reinterpretation.
    EXPECT_EQ(key_as_int64(0xac87a3e59d41de67ULL), static_cast<std::int64_t>(-0x53785c1a62be2199LL));
    EXPECT_EQ(key_as_int64(0x44455f753ba16998ULL), 0x44455f753ba16998LL);
    EXPECT_EQ(key_as_int64(0), 0);
    EXPECT_EQ(key_as_int64(UINT64_MAX), -1);
    EXPECT_EQ(key_as_int64(0x8000000000000000ULL), INT64_MIN);
}

TEST(ResourceKey, DependsOnlyOnBytesNotAlignment) {
    const std::string s = "some/resource/name-that-spans-blocks";
    const std::uint64_t want = key(s);
    std::vector<char> buf(s.size() + 16);
    for (std::size_t off = 0; off < 8; ++off) {
        std::memcpy(buf.data() + off, s.data(), s.size());
        EXPECT_EQ(resource_key(buf.data() + off, s.size()), want) << "offset " << off;
    }
}

TEST(ResourceKey, ReadsExactlyLenBytes) {
    const char text[] = "abcdefghijklmnop";
    EXPECT_EQ(resource_key(text, 3), key("abc"));
    EXPECT_EQ(resource_key(text, 8), key("abcdefgh"));
    EXPECT_NE(resource_key(text, 3), resource_key(text, 4));
}

TEST(ResourceKey, LengthIsPartOfTheKey) {
    // Trailing NULs must not collide with the shorter string.
    EXPECT_NE(key("a"), key(std::string("a\0", 2)));
    EXPECT_NE(key(std::string("\0", 1)), key(std::string("\0\0", 2)));
    EXPECT_NE(key(""), key(std::string("\0", 1)));
}

// ---- distinctness -----------------------------------------------------------

TEST(ResourceKey, AllOneAndTwoByteStringsDistinct) {
    std::vector<std::uint64_t> keys;
    keys.reserve(256 + 65536);
    for (int a = 0; a < 256; ++a) {
        const char s[1] = {static_cast<char>(a)};
        keys.push_back(resource_key(s, 1));
    }
    for (int a = 0; a < 256; ++a)
        for (int b = 0; b < 256; ++b) {
            const char s[2] = {static_cast<char>(a), static_cast<char>(b)};
            keys.push_back(resource_key(s, 2));
        }
    EXPECT_TRUE(all_distinct(keys));
}

TEST(ResourceKey, AllOneAndTwoByteStringsHaveDistinctLockHalves) {
    // Not required, but a cheap smell test of mixing: both 32-bit halves of the
    // 1-byte keys are distinct too.
    std::vector<std::uint64_t> hi, lo;
    for (int a = 0; a < 256; ++a) {
        const char s[1] = {static_cast<char>(a)};
        const std::uint64_t k = resource_key(s, 1);
        hi.push_back(key_high(k));
        lo.push_back(key_low(k));
    }
    EXPECT_TRUE(all_distinct(hi));
    EXPECT_TRUE(all_distinct(lo));
}

TEST(ResourceKey, MillionGeneratedNamesDistinct) {
    std::vector<std::uint64_t> keys;
    keys.reserve(1000000);
    std::string name;
    for (int i = 0; i < 1000000; ++i) {
        name = "r" + std::to_string(i);
        keys.push_back(key(name));
    }
    EXPECT_TRUE(all_distinct(keys));
}

TEST(ResourceKey, MaxLengthNamesDifferingInOneByteDistinct) {
    std::string base(kMaxResourceBytes, 'q');
    std::vector<std::uint64_t> keys{key(base)};
    for (std::size_t pos = 0; pos < base.size(); ++pos) {
        std::string s = base;
        s[pos] = 'r';
        keys.push_back(key(s));
    }
    EXPECT_TRUE(all_distinct(keys));
}

// ---- lock-tag halves --------------------------------------------------------

TEST(KeyHalves, ExactSplit) {
    const std::uint64_t k = 0x0123456789abcdefULL;
    EXPECT_EQ(key_high(k), 0x01234567u);
    EXPECT_EQ(key_low(k), 0x89abcdefu);
    EXPECT_EQ(key_join(0x01234567u, 0x89abcdefu), k);
    EXPECT_EQ(key_join(0, 0), 0u);
    EXPECT_EQ(key_join(UINT32_MAX, UINT32_MAX), UINT64_MAX);
    EXPECT_EQ(key_join(0, UINT32_MAX), 0x00000000ffffffffULL);
    EXPECT_EQ(key_join(UINT32_MAX, 0), 0xffffffff00000000ULL);
}

TEST(KeyHalves, RoundTrip) {
    const std::uint64_t fixed[] = {0, 1, UINT32_MAX, std::uint64_t{UINT32_MAX} + 1, UINT64_MAX, 0x8000000000000000ULL,
                                   key("smoke"), key("a"), key("")};
    for (std::uint64_t k : fixed) EXPECT_EQ(key_join(key_high(k), key_low(k)), k) << std::hex << k;
    for (int i = 0; i < 100000; ++i) {
        const std::uint64_t k = key("rt" + std::to_string(i));
        ASSERT_EQ(key_join(key_high(k), key_low(k)), k);
    }
}
