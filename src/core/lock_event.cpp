#define FENCING_CORE_SOURCE 1
#include "core/lock_event.hpp"

#include <cstdio>
#include <cstring>

namespace fencing::core {

namespace {

// Days since 1970-01-01 -> civil date (proleptic Gregorian; H. Hinnant's
// days_from_civil inverse), for any day count an int64 of microseconds yields.
void civil_from_days(std::int64_t z, std::int64_t* y, unsigned* m, unsigned* d) noexcept {
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const std::int64_t doe = z - era * 146097;                                       // [0, 146096]
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
    const std::int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
    *d = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
    *m = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

std::size_t append(char* out, std::size_t at, const char* s) noexcept {
    const std::size_t n = std::strlen(s);
    std::memcpy(out + at, s, n);
    return at + n;
}

}  // namespace

const char* lock_event_name(LockEvent ev) noexcept {
    switch (ev) {
        case LockEvent::granted:
            return "granted";
        case LockEvent::released:
            return "released";
        case LockEvent::lost:
            return "lost";
        case LockEvent::delay_ended:
            return "delay_ended";
    }
    return "unknown";
}

std::size_t format_utc(std::int64_t unix_us, char (&out)[kUtcTextMax]) noexcept {
    constexpr std::int64_t kUsPerDay = INT64_C(86400000000);
    // Floor division, so that times before 1970 count down from the day's start.
    std::int64_t days = unix_us / kUsPerDay;
    std::int64_t rest = unix_us % kUsPerDay;
    if (rest < 0) {
        rest += kUsPerDay;
        --days;
    }
    std::int64_t year;
    unsigned month, day;
    civil_from_days(days, &year, &month, &day);
    const std::int64_t secs = rest / 1000000;
    const int n = std::snprintf(out, kUtcTextMax, "%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ", static_cast<long long>(year),
                                month, day, static_cast<int>(secs / 3600), static_cast<int>(secs / 60 % 60),
                                static_cast<int>(secs % 60), static_cast<int>(rest % 1000000));
    return n < 0 ? 0 : static_cast<std::size_t>(n) < kUtcTextMax ? static_cast<std::size_t>(n) : kUtcTextMax - 1;
}

std::size_t event_payload(const char* resource, std::size_t len, LockEvent ev, std::int64_t token, std::int64_t unix_us,
                          char* out) noexcept {
    static const char kHex[] = "0123456789abcdef";
    if (len > 1024) len = 1024;
    std::size_t at = append(out, 0, "{\"resource\":\"");
    for (std::size_t i = 0; i < len; ++i) {
        const unsigned char c = static_cast<unsigned char>(resource[i]);
        switch (c) {
            case '"':
                at = append(out, at, "\\\"");
                break;
            case '\\':
                at = append(out, at, "\\\\");
                break;
            case '\n':
                at = append(out, at, "\\n");
                break;
            case '\r':
                at = append(out, at, "\\r");
                break;
            case '\t':
                at = append(out, at, "\\t");
                break;
            case '\b':
                at = append(out, at, "\\b");
                break;
            case '\f':
                at = append(out, at, "\\f");
                break;
            default:
                if (c < 0x20) {
                    const char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF], '\0'};
                    at = append(out, at, u);
                } else {
                    out[at++] = static_cast<char>(c);
                }
        }
    }
    at = append(out, at, "\",\"event\":\"");
    at = append(out, at, lock_event_name(ev));
    at = append(out, at, "\",\"token\":");
    char num[24];
    std::snprintf(num, sizeof num, "%lld", static_cast<long long>(token));
    at = append(out, at, num);
    at = append(out, at, ",\"time\":\"");
    char when[kUtcTextMax];
    format_utc(unix_us, when);
    at = append(out, at, when);
    at = append(out, at, "\"}");
    out[at] = '\0';
    return at;
}

bool NotifyBudget::admit() noexcept {
    if (full_ || admitted_ >= per_xact_) {
        ++refused_;
        return false;
    }
    ++admitted_;
    return true;
}

}  // namespace fencing::core
