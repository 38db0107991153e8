#define FENCING_CORE_SOURCE 1
#include "core/token.hpp"

namespace fencing::core {

namespace {
bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
}  // namespace

ParseResult parse_token(const char* text, std::size_t len) noexcept {
    if (text == nullptr) return {ParseStatus::syntax, 0};
    std::size_t i = 0;
    while (i < len && is_space(text[i])) ++i;
    bool negative = false;
    if (i < len && (text[i] == '+' || text[i] == '-')) {
        negative = text[i] == '-';
        ++i;
    }
    const std::size_t digits_start = i;
    // As bigint's input does: the magnitude accumulates as an unsigned 64-bit
    // number (a digit run beyond that is out of range at once, whatever
    // follows); trailing garbage is checked next, then bigint's range (2^63 - 1
    // positive, 2^63 negative).
    std::uint64_t magnitude = 0;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
        const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
        if (magnitude > (UINT64_MAX - d) / 10) return {ParseStatus::out_of_range, 0};
        magnitude = magnitude * 10 + d;
        ++i;
    }
    if (i == digits_start) return {ParseStatus::syntax, 0};
    while (i < len && is_space(text[i])) ++i;
    if (i != len) return {ParseStatus::syntax, 0};
    const std::uint64_t limit = static_cast<std::uint64_t>(kMaxToken) + (negative ? 1 : 0);
    if (magnitude > limit) return {ParseStatus::out_of_range, 0};
    if (negative || magnitude == 0) return {ParseStatus::not_positive, 0};
    return {ParseStatus::ok, static_cast<std::int64_t>(magnitude)};
}

ParseResult token_from_int64(std::int64_t v) noexcept {
    if (v < kMinToken) return {ParseStatus::not_positive, 0};
    return {ParseStatus::ok, v};
}

std::size_t format_token(std::int64_t v, char* buf) noexcept {
    char tmp[kTokenTextMax];
    std::size_t n = 0;
    bool negative = v < 0;
    // Work on the unsigned magnitude so INT64_MIN formats correctly too.
    std::uint64_t u = negative ? (~static_cast<std::uint64_t>(v) + 1) : static_cast<std::uint64_t>(v);
    do {
        tmp[n++] = static_cast<char>('0' + (u % 10));
        u /= 10;
    } while (u != 0);
    std::size_t out = 0;
    if (negative) buf[out++] = '-';
    while (n > 0) buf[out++] = tmp[--n];
    buf[out] = '\0';
    return out;
}

}  // namespace fencing::core
