// Lock events and their notifications: the JSON payload a NOTIFY on channel
// "fencing" carries when a grant starts or ends, and the bound on how many a
// transaction may send (pure: no PostgreSQL header).
//
// Payload, one JSON object per event, fields in this order:
//   {"resource":"<name>","event":"granted|released|lost|delay_ended",
//    "token":<integer>,"time":"YYYY-MM-DDTHH:MM:SS.ffffffZ"}
// The resource name is escaped as JSON requires ('"', '\\' and control
// characters); other bytes are passed through (text in the database
// encoding). The largest possible payload stays below NOTIFY's limit.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>

namespace fencing::core {

enum class LockEvent { granted, released, lost, delay_ended };

// "granted", "released", "lost", "delay_ended".
const char* lock_event_name(LockEvent ev) noexcept;

// The channel every lock event is notified on.
inline constexpr const char* kNotifyChannel = "fencing";

// NOTIFY refuses payloads of this many bytes or more.
inline constexpr std::size_t kNotifyPayloadLimit = 8000;

// Room for format_utc's text and its NUL. The longest text is 30 characters:
// an int64 of microseconds spans the years -290308 to 294247.
inline constexpr std::size_t kUtcTextMax = 32;
inline constexpr std::size_t kUtcTextLongest = 30;

// Writes the UTC time `unix_us` (microseconds since 1970-01-01) as
// "YYYY-MM-DDTHH:MM:SS.ffffffZ" (RFC 3339; years past 9999 get more digits,
// years before 1 a sign) and a NUL into out; returns the length.
std::size_t format_utc(std::int64_t unix_us, char (&out)[kUtcTextMax]) noexcept;

// The largest payload event_payload() writes: a 1024-byte resource name of
// which every byte is escaped as \u00XX, the longest event name, token and time.
inline constexpr std::size_t kPayloadMax = sizeof("{\"resource\":\"") - 1 + 6 * 1024 + sizeof("\",\"event\":\"") - 1 +
                                           sizeof("delay_ended") - 1 + sizeof("\",\"token\":") - 1 + 20 +
                                           sizeof(",\"time\":\"") - 1 + kUtcTextLongest + sizeof("\"}") - 1;

// Writes the payload of an event (resource of `len` <= 1024 bytes) and a NUL
// into out, which has room for kPayloadMax + 1 bytes; returns the length.
std::size_t event_payload(const char* resource, std::size_t len, LockEvent ev, std::int64_t token, std::int64_t unix_us,
                          char* out) noexcept;

// How many notifications one transaction may queue: at most `per_xact`; and
// whether the NOTIFY queue's fill should be looked at before the next one (at
// the first event of a transaction, then every `check_every` events). Once the
// queue was found too full, the rest of the transaction queues nothing.
class NotifyBudget {
public:
    NotifyBudget(std::uint32_t per_xact, std::uint32_t check_every) noexcept
        : per_xact_(per_xact), check_every_(check_every > 0 ? check_every : 1) {}
    // Whether the caller should check the queue's fill before admit().
    bool queue_check_due() const noexcept { return !full_ && admitted_ % check_every_ == 0; }
    // The queue is too full: refuse the rest of this transaction's events.
    void queue_full() noexcept { full_ = true; }
    // Whether the next event may be queued; counts it either way.
    bool admit() noexcept;
    // Events refused in this transaction.
    std::uint32_t refused() const noexcept { return refused_; }
    // The transaction ended (committed or not): a new budget.
    void xact_end() noexcept { admitted_ = refused_ = 0, full_ = false; }

private:
    std::uint32_t per_xact_;
    std::uint32_t check_every_;
    std::uint32_t admitted_ = 0;
    std::uint32_t refused_ = 0;
    bool full_ = false;
};

}  // namespace fencing::core
