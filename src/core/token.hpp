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
    out_of_range,  // a decimal integer, but <= 0 or > INT64_MAX
};

struct ParseResult {
    ParseStatus status;
    std::int64_t value;  // valid only when status == ok
};

// Parses the text form of a token. Accepts optional leading/trailing ASCII
// whitespace and an optional leading '+' or '-' sign followed by decimal
// digits; nothing else. Never reads past len; embedded NUL is a syntax error.
ParseResult parse_token(const char* text, std::size_t len) noexcept;

// A signed 64-bit value as a token: ok when 1 <= v, out_of_range otherwise.
ParseResult token_from_int64(std::int64_t v) noexcept;

// Writes the decimal form of v into buf (at least kTokenTextMax bytes) and
// returns the number of characters written (no terminating NUL counted; a NUL
// is written).
inline constexpr std::size_t kTokenTextMax = 21;
std::size_t format_token(std::int64_t v, char* buf) noexcept;

// Three-way comparison, -1 / 0 / 1.
inline int compare_tokens(std::int64_t a, std::int64_t b) noexcept {
    return (a < b) ? -1 : (a > b) ? 1 : 0;
}

}  // namespace fencing::core
