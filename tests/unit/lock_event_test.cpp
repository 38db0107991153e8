// Unit tests of src/core/lock_event: the JSON payload of a lock event's
// notification (fields, escaping, the worst-case size against NOTIFY's
// limit), the UTC time format, and the per-transaction notification budget.
#include "core/lock_event.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

using fencing::core::event_payload;
using fencing::core::format_utc;
using fencing::core::kNotifyChannel;
using fencing::core::kNotifyPayloadLimit;
using fencing::core::kPayloadMax;
using fencing::core::kUtcTextMax;
using fencing::core::lock_event_name;
using fencing::core::LockEvent;
using fencing::core::NotifyBudget;

namespace {

std::string utc(std::int64_t unix_us) {
    char buf[kUtcTextMax];
    const std::size_t n = format_utc(unix_us, buf);
    EXPECT_EQ(n, std::string(buf).size());
    return std::string(buf);
}

std::string payload(const std::string& resource, LockEvent ev, std::int64_t token, std::int64_t unix_us) {
    char buf[kPayloadMax + 1];
    const std::size_t n = event_payload(resource.data(), resource.size(), ev, token, unix_us, buf);
    EXPECT_LE(n, kPayloadMax);
    EXPECT_EQ(n, std::string(buf).size());
    return std::string(buf, n);
}

constexpr std::int64_t kNov30 = INT64_C(1796062680) * 1000000 + 123456;  // 2026-11-30T18:18:00.123456Z

}  // namespace

TEST(LockEvent, Names) {
    EXPECT_STREQ(lock_event_name(LockEvent::granted), "granted");
    EXPECT_STREQ(lock_event_name(LockEvent::released), "released");
    EXPECT_STREQ(lock_event_name(LockEvent::lost), "lost");
    EXPECT_STREQ(lock_event_name(LockEvent::delay_ended), "delay_ended");
    EXPECT_STREQ(kNotifyChannel, "fencing");
}

TEST(LockEvent, UtcTime) {
    EXPECT_EQ(utc(0), "1970-01-01T00:00:00.000000Z");
    EXPECT_EQ(utc(1), "1970-01-01T00:00:00.000001Z");
    EXPECT_EQ(utc(kNov30), "2026-11-30T18:18:00.123456Z");
    EXPECT_EQ(utc(INT64_C(951782400) * 1000000), "2000-02-29T00:00:00.000000Z");  // leap day
    EXPECT_EQ(utc(INT64_C(4107542399) * 1000000 + 999999), "2100-02-28T23:59:59.999999Z");
    EXPECT_EQ(utc(INT64_C(4107542400) * 1000000), "2100-03-01T00:00:00.000000Z");  // 2100 is no leap year
    EXPECT_EQ(utc(-1), "1969-12-31T23:59:59.999999Z");
    EXPECT_EQ(utc(INT64_C(253402300800) * 1000000), "10000-01-01T00:00:00.000000Z");
    EXPECT_EQ(utc(INT64_MIN).size(), fencing::core::kUtcTextLongest);
}

TEST(LockEvent, UtcTimeExtremesFit) {
    // PostgreSQL's timestamp range ends in 294276 AD; any int64 fits the buffer.
    for (std::int64_t t : {INT64_MAX, INT64_MIN, INT64_C(9214646400000000000) / 2}) {
        const std::string s = utc(t);
        EXPECT_LE(s.size(), fencing::core::kUtcTextLongest);
        EXPECT_EQ(s.back(), 'Z');
    }
}

TEST(LockEvent, Payload) {
    EXPECT_EQ(payload("settlement:7", LockEvent::granted, INT64_C(1796062680123457), kNov30),
              "{\"resource\":\"settlement:7\",\"event\":\"granted\",\"token\":1796062680123457,"
              "\"time\":\"2026-11-30T18:18:00.123456Z\"}");
    EXPECT_EQ(payload("r", LockEvent::released, 5, 0),
              "{\"resource\":\"r\",\"event\":\"released\",\"token\":5,\"time\":\"1970-01-01T00:00:00.000000Z\"}");
    EXPECT_EQ(payload("r", LockEvent::lost, 5, 0),
              "{\"resource\":\"r\",\"event\":\"lost\",\"token\":5,\"time\":\"1970-01-01T00:00:00.000000Z\"}");
    EXPECT_EQ(payload("r", LockEvent::delay_ended, 5, 0),
              "{\"resource\":\"r\",\"event\":\"delay_ended\",\"token\":5,\"time\":\"1970-01-01T00:00:00.000000Z\"}");
}

TEST(LockEvent, PayloadEscapesJsonSpecials) {
    const std::string nasty = std::string("a\"b\\c/d\n\r\t\b\f") + '\x01' + '\x1f' + '\x7f' + "é€";
    EXPECT_EQ(payload(nasty, LockEvent::granted, 1, 0),
              "{\"resource\":\"a\\\"b\\\\c/d\\n\\r\\t\\b\\f\\u0001\\u001f\x7f"
              "é€\",\"event\":\"granted\",\"token\":1,"
              "\"time\":\"1970-01-01T00:00:00.000000Z\"}");
}

TEST(LockEvent, WorstCaseFitsNotify) {
    // NOTIFY refuses payloads of 8000 bytes or more: the largest payload (a
    // 1024-byte name of control characters, the longest event name, the
    // longest token and time) must stay below.
    static_assert(kPayloadMax < kNotifyPayloadLimit, "a payload could exceed NOTIFY's limit");
    const std::string worst(1024, '\x01');
    const std::string p = payload(worst, LockEvent::delay_ended, INT64_MIN, INT64_MIN);
    EXPECT_EQ(p.size(), kPayloadMax);
    EXPECT_LT(p.size(), kNotifyPayloadLimit);
}

TEST(NotifyBudget, AdmitsUpToTheLimitPerTransaction) {
    NotifyBudget b(3, 2);
    EXPECT_TRUE(b.admit());
    EXPECT_TRUE(b.admit());
    EXPECT_TRUE(b.admit());
    EXPECT_FALSE(b.admit());
    EXPECT_FALSE(b.admit());
    EXPECT_EQ(b.refused(), 2u);
    b.xact_end();
    EXPECT_EQ(b.refused(), 0u);
    EXPECT_TRUE(b.admit());
}

TEST(NotifyBudget, AsksForAQueueCheckAtTheFirstEventAndThenEveryPeriod) {
    NotifyBudget b(100, 3);
    EXPECT_TRUE(b.queue_check_due());  // first event of the transaction
    b.admit();
    EXPECT_FALSE(b.queue_check_due());
    b.admit();
    EXPECT_FALSE(b.queue_check_due());
    b.admit();
    EXPECT_TRUE(b.queue_check_due());  // every 3rd
    b.admit();
    EXPECT_FALSE(b.queue_check_due());
    b.xact_end();
    EXPECT_TRUE(b.queue_check_due());
}

TEST(NotifyBudget, AQueueTooFullRefusesTheRestOfTheTransaction) {
    NotifyBudget b(100, 1);
    b.queue_full();
    EXPECT_FALSE(b.admit());
    EXPECT_FALSE(b.admit());
    EXPECT_EQ(b.refused(), 2u);
    b.xact_end();
    EXPECT_TRUE(b.admit());
}
