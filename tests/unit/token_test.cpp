// Unit tests of src/core/token: parse_token, token_from_int64, format_token,
// compare_tokens.
#include "core/token.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

using fencing::core::compare_tokens;
using fencing::core::format_token;
using fencing::core::kMaxToken;
using fencing::core::kMinToken;
using fencing::core::kTokenTextMax;
using fencing::core::parse_token;
using fencing::core::ParseResult;
using fencing::core::ParseStatus;
using fencing::core::token_from_int64;

namespace {

// Parses a std::string, embedded NULs included (the length is explicit).
ParseResult parse(const std::string& s) { return parse_token(s.data(), s.size()); }

::testing::AssertionResult parses_to(const std::string& s, std::int64_t want) {
    const ParseResult r = parse(s);
    if (r.status != ParseStatus::ok)
        return ::testing::AssertionFailure()
               << "'" << s << "' did not parse (status " << static_cast<int>(r.status) << ")";
    if (r.value != want) return ::testing::AssertionFailure() << "'" << s << "' parsed to " << r.value;
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult fails_with(const std::string& s, ParseStatus want) {
    const ParseResult r = parse(s);
    if (r.status != want)
        return ::testing::AssertionFailure()
               << "'" << s << "' gave status " << static_cast<int>(r.status) << ", wanted " << static_cast<int>(want);
    return ::testing::AssertionSuccess();
}

std::string formatted(std::int64_t v) {
    char buf[kTokenTextMax];
    const std::size_t n = format_token(v, buf);
    EXPECT_LT(n, kTokenTextMax);
    EXPECT_EQ(buf[n], '\0') << "format_token must NUL-terminate";
    return std::string(buf, n);
}

}  // namespace

// ---- parse_token: syntax errors ---------------------------------------------

TEST(ParseToken, EmptyIsSyntax) { EXPECT_TRUE(fails_with("", ParseStatus::syntax)); }
TEST(ParseToken, LettersAreSyntax) { EXPECT_TRUE(fails_with("abc", ParseStatus::syntax)); }
TEST(ParseToken, DecimalFractionIsSyntax) { EXPECT_TRUE(fails_with("1.5", ParseStatus::syntax)); }
TEST(ParseToken, TrailingGarbageIsSyntax) { EXPECT_TRUE(fails_with("12x", ParseStatus::syntax)); }
TEST(ParseToken, BlankIsSyntax) { EXPECT_TRUE(fails_with(" ", ParseStatus::syntax)); }
TEST(ParseToken, BlanksOnlyIsSyntax) { EXPECT_TRUE(fails_with(" \t\n\r\f\v ", ParseStatus::syntax)); }

// As bigint's input: a digit run beyond 2^64 - 1 is a range error at once,
// whatever follows it; garbage after digits that fit in 64 unsigned bits is a
// syntax error, even when they exceed bigint.
TEST(ParseToken, OverflowingDigitsThenGarbageIsRangeLikeBigint) {
    EXPECT_TRUE(fails_with("99999999999999999999x", ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with(std::string(5000, '9') + "x", ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with("-99999999999999999999x", ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with("9223372036854775807x", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("9223372036854775808_ ", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("18446744073709551615x", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("18446744073709551616x", ParseStatus::out_of_range));
}

TEST(ParseToken, SignWithoutDigitsIsSyntax) {
    EXPECT_TRUE(fails_with("+", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("-", ParseStatus::syntax));
    EXPECT_TRUE(fails_with(" + ", ParseStatus::syntax));
}

TEST(ParseToken, MisplacedSignsAndBlanksAreSyntax) {
    EXPECT_TRUE(fails_with("++7", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("--7", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("+-7", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("+ 7", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("7+", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("1 2", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("1_000", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("1,000", ParseStatus::syntax));
}

TEST(ParseToken, OtherNumberFormsAreSyntax) {
    EXPECT_TRUE(fails_with("0x10", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("1e3", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("1.", ParseStatus::syntax));
    EXPECT_TRUE(fails_with(".5", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("inf", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("NaN", ParseStatus::syntax));
    EXPECT_TRUE(fails_with("\xd9\xa3", ParseStatus::syntax));      // ARABIC-INDIC DIGIT THREE
    EXPECT_TRUE(fails_with("\xef\xbc\x93", ParseStatus::syntax));  // FULLWIDTH DIGIT THREE
    EXPECT_TRUE(
        fails_with("\xc2\xa0"
                   "5",
                   ParseStatus::syntax));  // NO-BREAK SPACE is not ASCII whitespace
}

TEST(ParseToken, EmbeddedNulIsSyntax) {
    EXPECT_TRUE(fails_with(std::string("12\0", 3), ParseStatus::syntax));
    EXPECT_TRUE(fails_with(std::string("\0"
                                       "12",
                                       3),
                           ParseStatus::syntax));
    EXPECT_TRUE(fails_with(std::string("1\0"
                                       "2",
                                       3),
                           ParseStatus::syntax));
    EXPECT_TRUE(fails_with(std::string("12 \0", 4), ParseStatus::syntax));
    EXPECT_TRUE(fails_with(std::string("\0", 1), ParseStatus::syntax));
}

TEST(ParseToken, NullPointerIsSyntax) {
    EXPECT_EQ(parse_token(nullptr, 0).status, ParseStatus::syntax);
    EXPECT_EQ(parse_token(nullptr, 5).status, ParseStatus::syntax);
}

// ---- parse_token: range errors ----------------------------------------------

TEST(ParseToken, ZeroIsNotPositive) {
    EXPECT_TRUE(fails_with("0", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("-0", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("+0", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("000", ParseStatus::not_positive));
}

TEST(ParseToken, NegativeBigintIsNotPositiveBeyondBigintOutOfRange) {
    EXPECT_TRUE(fails_with("-5", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("-1", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with(" -5 ", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("-9223372036854775808", ParseStatus::not_positive));
    EXPECT_TRUE(fails_with("-9223372036854775809", ParseStatus::out_of_range));
}

TEST(ParseToken, JustAboveInt64MaxIsOutOfRange) {
    EXPECT_TRUE(fails_with("9223372036854775808", ParseStatus::out_of_range));
}

TEST(ParseToken, AroundUint64MaxIsOutOfRange) {
    EXPECT_TRUE(fails_with("18446744073709551615", ParseStatus::out_of_range));  // UINT64_MAX
    EXPECT_TRUE(fails_with("18446744073709551616", ParseStatus::out_of_range));  // UINT64_MAX + 1
    EXPECT_TRUE(fails_with("99999999999999999999", ParseStatus::out_of_range));
}

TEST(ParseToken, HugeDigitStringsAreOutOfRange) {
    EXPECT_TRUE(fails_with(std::string(100, '9'), ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with(std::string(100000, '1'), ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with("  " + std::string(100000, '7') + "  ", ParseStatus::out_of_range));
    EXPECT_TRUE(fails_with("-" + std::string(100000, '1'), ParseStatus::out_of_range));
    // 2^64 * 10 + small: wraps around to a small value if overflow were unchecked.
    EXPECT_TRUE(fails_with("184467440737095516161", ParseStatus::out_of_range));
}

// ---- parse_token: accepted values -------------------------------------------

TEST(ParseToken, Int64MaxIsAccepted) { EXPECT_TRUE(parses_to("9223372036854775807", INT64_MAX)); }
TEST(ParseToken, SurroundingBlanksAreAccepted) { EXPECT_TRUE(parses_to(" 42 ", 42)); }
TEST(ParseToken, LeadingPlusIsAccepted) { EXPECT_TRUE(parses_to("+7", 7)); }

TEST(ParseToken, SmallValues) {
    EXPECT_TRUE(parses_to("1", 1));
    EXPECT_TRUE(parses_to("9", 9));
    EXPECT_TRUE(parses_to("10", 10));
    EXPECT_TRUE(parses_to("123456789", 123456789));
}

TEST(ParseToken, AllAsciiWhitespaceIsTrimmed) {
    EXPECT_TRUE(parses_to("\t\n\r\f\v 5 \v\f\r\n\t", 5));
    EXPECT_TRUE(parses_to("  +8", 8));
}

TEST(ParseToken, LeadingZerosAreAccepted) {
    EXPECT_TRUE(parses_to("007", 7));
    EXPECT_TRUE(parses_to(std::string(100000, '0') + "1", 1));
    EXPECT_TRUE(parses_to("0009223372036854775807", INT64_MAX));
    EXPECT_TRUE(fails_with("0009223372036854775808", ParseStatus::out_of_range));
}

TEST(ParseToken, NeverReadsPastLen) {
    const char text[] = "12345";
    const ParseResult r = parse_token(text, 2);
    ASSERT_EQ(r.status, ParseStatus::ok);
    EXPECT_EQ(r.value, 12);
    EXPECT_EQ(parse_token(text, 0).status, ParseStatus::syntax);
    // A buffer without terminator, followed by garbage the parser must not see.
    const char raw[4] = {'4', '2', 'x', 'y'};
    const ParseResult r2 = parse_token(raw, 2);
    ASSERT_EQ(r2.status, ParseStatus::ok);
    EXPECT_EQ(r2.value, 42);
}

TEST(ParseToken, EveryValueNearInt64MaxBoundary) {
    for (std::int64_t v = INT64_MAX - 1000; v != INT64_MAX; ++v) ASSERT_TRUE(parses_to(std::to_string(v), v));
    ASSERT_TRUE(parses_to(std::to_string(INT64_MAX), INT64_MAX));
}

// ---- token_from_int64 -------------------------------------------------------

TEST(TokenFromInt64, Range) {
    EXPECT_EQ(token_from_int64(0).status, ParseStatus::not_positive);
    EXPECT_EQ(token_from_int64(-1).status, ParseStatus::not_positive);
    EXPECT_EQ(token_from_int64(INT64_MIN).status, ParseStatus::not_positive);
    ASSERT_EQ(token_from_int64(1).status, ParseStatus::ok);
    EXPECT_EQ(token_from_int64(1).value, 1);
    ASSERT_EQ(token_from_int64(INT64_MAX).status, ParseStatus::ok);
    EXPECT_EQ(token_from_int64(INT64_MAX).value, INT64_MAX);
    EXPECT_EQ(kMinToken, 1);
    EXPECT_EQ(kMaxToken, INT64_MAX);
}

// ---- format_token -----------------------------------------------------------

TEST(FormatToken, ExactText) {
    EXPECT_EQ(formatted(0), "0");
    EXPECT_EQ(formatted(1), "1");
    EXPECT_EQ(formatted(-1), "-1");
    EXPECT_EQ(formatted(10), "10");
    EXPECT_EQ(formatted(42), "42");
    EXPECT_EQ(formatted(INT64_MAX), "9223372036854775807");
    EXPECT_EQ(formatted(INT64_MIN), "-9223372036854775808");
    EXPECT_EQ(formatted(INT64_MIN + 1), "-9223372036854775807");
}

TEST(FormatToken, ReturnsLengthWithinBuffer) {
    char buf[kTokenTextMax];
    EXPECT_EQ(format_token(INT64_MIN, buf), 20u);  // the longest text: 20 chars + NUL == kTokenTextMax
    EXPECT_EQ(format_token(INT64_MAX, buf), 19u);
    EXPECT_EQ(format_token(7, buf), 1u);
}

TEST(FormatToken, RoundTripsThroughParseForTokens) {
    const std::int64_t values[] = {1,
                                   2,
                                   9,
                                   10,
                                   11,
                                   99,
                                   100,
                                   12345,
                                   1000000007,
                                   INT32_MAX,
                                   std::int64_t{INT32_MAX} + 1,
                                   INT64_MAX / 10,
                                   INT64_MAX - 1,
                                   INT64_MAX};
    for (std::int64_t v : values) EXPECT_TRUE(parses_to(formatted(v), v)) << v;
    // Powers of ten and their neighbours.
    for (std::int64_t p = 1; p <= INT64_MAX / 10; p *= 10) {
        EXPECT_TRUE(parses_to(formatted(p), p));
        EXPECT_TRUE(parses_to(formatted(p + 1), p + 1));
        if (p > 1) {
            EXPECT_TRUE(parses_to(formatted(p - 1), p - 1));
        }
    }
}

TEST(FormatToken, RoundTripsEverySignedValueThroughStrtoll) {
    const std::int64_t values[] = {INT64_MIN, INT64_MIN + 1, -1000, -1, 0, 1, 1000, INT64_MAX - 1, INT64_MAX};
    for (std::int64_t v : values) {
        const std::string s = formatted(v);
        EXPECT_EQ(s, std::to_string(v));
        EXPECT_EQ(std::strtoll(s.c_str(), nullptr, 10), v);
    }
}

TEST(FormatToken, NonTokensDoNotParseBackAsTokens) {
    EXPECT_TRUE(fails_with(formatted(0), ParseStatus::not_positive));
    EXPECT_TRUE(fails_with(formatted(-1), ParseStatus::not_positive));
    EXPECT_TRUE(fails_with(formatted(INT64_MIN), ParseStatus::not_positive));
}

TEST(FormatToken, MatchesToStringOverAPseudoRandomSweep) {
    std::uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 100000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::int64_t v;
        __builtin_memcpy(&v, &x, sizeof v);
        ASSERT_EQ(formatted(v), std::to_string(v));
        if (v >= 1) {
            ASSERT_TRUE(parses_to(formatted(v), v));
        }
    }
}

// ---- compare_tokens ---------------------------------------------------------

TEST(CompareTokens, ThreeWay) {
    EXPECT_EQ(compare_tokens(1, 2), -1);
    EXPECT_EQ(compare_tokens(2, 1), 1);
    EXPECT_EQ(compare_tokens(5, 5), 0);
    EXPECT_EQ(compare_tokens(1, INT64_MAX), -1);
    EXPECT_EQ(compare_tokens(INT64_MAX, 1), 1);
    EXPECT_EQ(compare_tokens(INT64_MAX, INT64_MAX), 0);
    EXPECT_EQ(compare_tokens(INT64_MIN, INT64_MAX), -1);  // no subtraction overflow
    EXPECT_EQ(compare_tokens(INT64_MAX, INT64_MIN), 1);
}
