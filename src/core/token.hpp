// Fencing tokens: parse, format and validate 64-bit tokens (1 .. INT64_MAX).
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

inline constexpr std::int64_t kMinToken = 1;
inline constexpr std::int64_t kMaxToken = INT64_MAX;

enum class ParseStatus {
    ok,
    syntax,        // not a decimal integer (empty, blanks only, letters, '1.5', '12x')
    out_of_range,  // a decimal integer outside bigint's range
    not_positive,  // a decimal integer within bigint's range, but <= 0
};

struct ParseResult {
    ParseStatus status;
    std::int64_t value;  // valid only when status == ok
};

// Parses the text form of a token exactly as PostgreSQL's bigint input and
// the fencing.token domain judge it: optional leading/trailing ASCII
// whitespace and an optional leading '+' or '-' sign around decimal digits,
// nothing else (syntax), except that a digit run beyond 2^64 - 1 is
// out_of_range whatever follows (bigint's input accumulates an unsigned 64-bit
// magnitude); then a number outside bigint is out_of_range; a bigint <= 0 is
// not_positive (the domain's check constraint). Never reads
// past len; embedded NUL is a syntax error.
ParseResult parse_token(const char* text, std::size_t len) noexcept;

// A signed 64-bit value as a token: ok when 1 <= v, not_positive otherwise.
ParseResult token_from_int64(std::int64_t v) noexcept;

// Writes the decimal form of v into buf (at least kTokenTextMax bytes) and
// returns the number of characters written (no terminating NUL counted; a NUL
// is written).
inline constexpr std::size_t kTokenTextMax = 21;
std::size_t format_token(std::int64_t v, char* buf) noexcept;

// Three-way comparison, -1 / 0 / 1.
inline int compare_tokens(std::int64_t a, std::int64_t b) noexcept { return (a < b) ? -1 : (a > b) ? 1 : 0; }

}  // namespace fencing::core
