// libFuzzer target for the pure C++ core (src/core): token parsing and
// formatting, resource keys, the write-acceptance decision and the hold
// ledger. Each is checked against an independent reference model written from
// the README's rules, under AddressSanitizer and UndefinedBehaviorSanitizer.
//
// Build and run: tests/fuzz/run.sh [SECONDS]   (clang++ -fsanitize=fuzzer,address,undefined)
//
// The first input byte chooses the target; the rest is its input.
#include "core/decision.hpp"
#include "core/hold_ledger.hpp"
#include "core/resource_key.hpp"
#include "core/token.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace fencing::core;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "token_fuzz: invariant violated: %s\n", what);
    std::abort();
}
#define CHECK(cond)                  \
    do {                             \
        if (!(cond)) fail(#cond);    \
    } while (0)

// A cursor over the fuzzer's bytes.
struct Bytes {
    const std::uint8_t* p;
    std::size_t n;
    std::uint8_t u8() {
        if (n == 0) return 0;
        --n;
        return *p++;
    }
    std::uint32_t u32() {
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = (v << 8) | u8();
        return v;
    }
    std::int64_t i64() {
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | u8();
        return static_cast<std::int64_t>(v);
    }
    // Small integers, so that equal values are common.
    std::int64_t small_token() {
        std::uint8_t k = u8();
        switch (k % 8) {
            case 0: return INT64_MAX - (k >> 3);
            case 1: return i64();
            default: return (k >> 3) % 6;  // 0..5
        }
    }
};

// ---- tokens -----------------------------------------------------------------

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The documented rules (bigint's input, then the domain's check): optional
// blanks and one sign around decimal digits, else 22P02 (syntax); a digit run
// outside bigint, whatever follows it, 22003 (range); a bigint <= 0, 23514
// (not_positive).
ParseResult ref_parse(const char* s, std::size_t n) {
    std::size_t i = 0;
    while (i < n && blank(s[i])) ++i;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    std::size_t start = i;
    std::string digits;  // without leading zeros
    for (; i < n && s[i] >= '0' && s[i] <= '9'; ++i)
        if (!(digits.empty() && s[i] == '0')) digits.push_back(s[i]);
    if (i == start) return {ParseStatus::syntax, 0};
    // A digit run beyond 2^64 - 1 is out of range whatever follows (bigint's
    // input accumulates an unsigned 64-bit magnitude); then trailing garbage;
    // then bigint's own range.
    const std::string u64max = "18446744073709551615";
    if (digits.size() > u64max.size() || (digits.size() == u64max.size() && digits > u64max)) return {ParseStatus::out_of_range, 0};
    while (i < n && blank(s[i])) ++i;
    if (i != n) return {ParseStatus::syntax, 0};
    const std::string limit = neg ? "9223372036854775808" : "9223372036854775807";
    if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit)) return {ParseStatus::out_of_range, 0};
    if (neg || digits.empty()) return {ParseStatus::not_positive, 0};
    std::int64_t v = 0;
    for (char c : digits) v = v * 10 + (c - '0');
    return {ParseStatus::ok, v};
}

void fuzz_token(const std::uint8_t* data, std::size_t size) {
    // An exactly sized heap copy: ASan catches any read past len (the parser
    // must not rely on a terminating NUL).
    char* buf = static_cast<char*>(std::malloc(size ? size : 1));
    if (size) std::memcpy(buf, data, size);
    ParseResult got = parse_token(buf, size);
    ParseResult want = ref_parse(buf, size);
    CHECK(got.status == want.status);
    if (got.status == ParseStatus::ok) {
        CHECK(got.value == want.value);
        CHECK(got.value >= kMinToken);
        // Round trip through the text form.
        char out[kTokenTextMax];
        std::size_t len = format_token(got.value, out);
        CHECK(len == std::strlen(out) && len < kTokenTextMax);
        ParseResult again = parse_token(out, len);
        CHECK(again.status == ParseStatus::ok && again.value == got.value);
    }
    // Parsing is a pure function of the bytes.
    ParseResult twice = parse_token(buf, size);
    CHECK(twice.status == got.status && (got.status != ParseStatus::ok || twice.value == got.value));
    std::free(buf);

    // The integer paths: format any int64, parse it back; token_from_int64.
    Bytes b{data, size};
    std::int64_t v = b.i64();
    char out[kTokenTextMax];
    std::size_t len = format_token(v, out);
    CHECK(len == std::strlen(out));
    CHECK(std::strtoll(out, nullptr, 10) == v);
    ParseResult back = parse_token(out, len);
    ParseResult conv = token_from_int64(v);
    if (v >= 1) {
        CHECK(back.status == ParseStatus::ok && back.value == v);
        CHECK(conv.status == ParseStatus::ok && conv.value == v);
    } else {
        CHECK(back.status == ParseStatus::not_positive);
        CHECK(conv.status == ParseStatus::not_positive);
    }
    std::int64_t w = b.i64();
    int c = compare_tokens(v, w);
    CHECK(c == (v < w ? -1 : v > w ? 1 : 0));
    CHECK(compare_tokens(w, v) == -c);
}

// ---- resource keys ----------------------------------------------------------

// A database's secret: any 16 bytes; fixed here, the input varies the name.
const KeySecret kFuzzSecret{0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL};

void fuzz_resource(const std::uint8_t* data, std::size_t size) {
    const char* s = reinterpret_cast<const char*>(data);
    ResourceStatus st = check_resource(size);
    CHECK(st == (size == 0 ? ResourceStatus::empty : size > kMaxResourceBytes ? ResourceStatus::too_long
                                                                             : ResourceStatus::ok));
    std::uint64_t k = resource_key(kFuzzSecret, s, size);
    // Independent of alignment and of the bytes around the name.
    std::vector<char> shifted(size + 9, '\xA5');
    std::size_t off = size % 7 + 1;
    if (size) std::memcpy(shifted.data() + off, s, size);
    CHECK(resource_key(kFuzzSecret, shifted.data() + off, size) == k);
    CHECK(key_join(key_high(k), key_low(k)) == k);
    std::int64_t signed_key = key_as_int64(k);
    std::uint64_t back;
    std::memcpy(&back, &signed_key, sizeof back);
    CHECK(back == k);
    // Every byte matters: flipping one changes the key (a collision here would
    // be a 2^-64 event, i.e. a bug in the mixing).
    if (size > 0) {
        shifted[off + (k % size)] ^= 0x01;
        CHECK(resource_key(kFuzzSecret, shifted.data() + off, size) != k);
    }
    // The length is part of the key: a trailing NUL makes another name.
    shifted[off + size] = '\0';
    if (size) std::memcpy(shifted.data() + off, s, size);
    CHECK(resource_key(kFuzzSecret, shifted.data() + off, size + 1) != k);
}

// ---- the decision -----------------------------------------------------------

// The README's row semantics, written independently of src/core/decision.hpp.
Decision ref_decide(const WriteInput& in, const ProtectMode& mode) {
    Decision d;
    std::optional<std::int64_t> incoming;
    bool explicit_token = true, fill = false;
    switch (in.event) {
        case WriteEvent::insert:
            // INSERT: the row's token, else the setting (written into the row);
            // rejected without any.
            incoming = in.row_token ? in.row_token : in.setting;
            fill = !in.row_token && in.setting;
            break;
        case WriteEvent::update:
            // The statement assigns the token: that value; except that an
            // unchanged value with fencing.token set defers to the setting
            // (MERGE names the union of its actions' columns; README, "Edges").
            if (in.assigned && !(in.setting && in.row_token && in.row_token == in.stored)) incoming = in.row_token;
            else if (in.setting) incoming = in.setting, fill = true;
            else incoming = in.row_token, explicit_token = false;
            break;
        case WriteEvent::del:
            if (!mode.fence_deletes) {
                d.unchecked = true;
                return d;
            }
            incoming = in.setting;
            break;
    }
    std::optional<std::int64_t> stored = in.event == WriteEvent::insert ? std::nullopt : in.stored;
    d.incoming = incoming;
    bool accept;
    RejectReason why = RejectReason::none;
    if (!incoming) {
        accept = false;
        why = RejectReason::no_token;
    } else if (!stored || *incoming > *stored) {
        accept = true;
    } else if (*incoming == *stored && mode.allow_equal && explicit_token) {
        accept = true;
    } else {
        accept = false;
        why = RejectReason::not_newer;
    }
    if (accept) {
        d.verdict = Verdict::accept;
        d.fill_row = fill;
    } else {
        d.verdict = mode.on_stale == OnStale::skip ? Verdict::reject_skip : Verdict::reject_error;
        d.reason = why;
    }
    return d;
}

bool same(const Decision& a, const Decision& b) {
    return a.verdict == b.verdict && a.reason == b.reason && a.incoming == b.incoming && a.fill_row == b.fill_row &&
           a.unchecked == b.unchecked;
}

void fuzz_decide(const std::uint8_t* data, std::size_t size) {
    Bytes b{data, size};
    while (b.n > 0) {
        std::uint8_t f = b.u8();
        WriteInput in;
        in.event = static_cast<WriteEvent>(f % 3);
        if (f & 0x04) in.stored = b.small_token();
        if (f & 0x08) in.row_token = b.small_token();
        in.assigned = (f & 0x10) != 0;
        if (f & 0x20) in.setting = b.small_token();
        std::uint8_t m = b.u8();
        ProtectMode mode;
        mode.allow_equal = m & 1;
        mode.on_stale = (m & 2) ? OnStale::skip : OnStale::error;
        mode.fence_deletes = m & 4;

        Decision got = decide(in, mode);
        Decision want = ref_decide(in, mode);
        if (!same(got, want)) {
            std::fprintf(stderr, "event %d stored %lld row %lld assigned %d setting %lld | allow_equal %d skip %d del %d\n",
                         static_cast<int>(in.event), in.stored ? static_cast<long long>(*in.stored) : -1LL,
                         in.row_token ? static_cast<long long>(*in.row_token) : -1LL, in.assigned,
                         in.setting ? static_cast<long long>(*in.setting) : -1LL, mode.allow_equal,
                         mode.on_stale == OnStale::skip, mode.fence_deletes);
            fail("decide() disagrees with the README's rules");
        }
        // The properties that make fencing work, whatever the inputs.
        if (got.verdict == Verdict::accept && !got.unchecked) {
            CHECK(got.incoming.has_value());
            if (in.event != WriteEvent::insert && in.stored)
                CHECK(*got.incoming > *in.stored || (mode.allow_equal && *got.incoming == *in.stored));
        }
        CHECK((got.verdict == Verdict::accept) == (got.reason == RejectReason::none));
        CHECK(got.verdict != Verdict::reject_skip || mode.on_stale == OnStale::skip);
        CHECK(got.verdict != Verdict::reject_error || mode.on_stale == OnStale::error);
        // allow_equal only ever accepts more.
        ProtectMode strict = mode;
        strict.allow_equal = false;
        if (decide(in, strict).verdict == Verdict::accept) CHECK(decide(in, mode).verdict == Verdict::accept);
    }
}

// ---- the hold ledger ----------------------------------------------------------

struct ModelHold {
    std::int64_t token = 0;
    std::uint32_t session = 0;
    std::map<std::uint32_t, std::uint32_t> xact;  // subtransaction -> count
    std::int64_t lease = 0;
    std::uint32_t xact_total() const {
        std::uint32_t n = 0;
        for (const auto& [s, c] : xact) n += c;
        return n;
    }
    bool held() const { return session > 0 || xact_total() > 0; }
};

void fuzz_ledger(const std::uint8_t* data, std::size_t size) {
    Bytes b{data, size};
    HoldLedger ledger;
    std::map<std::uint64_t, ModelHold> model;
    auto drop_free = [&]() {
        for (auto it = model.begin(); it != model.end();) it = it->second.held() ? std::next(it) : model.erase(it);
    };
    int steps = 0;
    while (b.n > 0 && ++steps < 2000) {
        std::uint8_t op = b.u8();
        std::uint64_t key = (b.u8() % 6) * 0x9E3779B97F4A7C15ULL;
        std::uint32_t sub = 1 + b.u8() % 4;
        switch (op % 7) {
            case 0:
            case 1: {  // add
                std::int64_t token = b.small_token();
                bool session = op & 0x10;
                std::int64_t lease = (op & 0x20) ? (b.u8() % 5) * 1000 : 0;
                ledger.add(key, token, session, sub, lease);
                ModelHold& h = model[key];
                if (!h.held()) {
                    h.token = token;
                    h.lease = lease;
                } else if (lease > 0 && (h.lease == 0 || lease < h.lease)) {
                    h.lease = lease;
                }
                if (session) ++h.session;
                else ++h.xact[sub];
                break;
            }
            case 2: {  // release one session hold
                auto it = model.find(key);
                bool want = it != model.end() && it->second.session > 0;
                CHECK(ledger.release_session(key) == want);
                if (want) --it->second.session;
                drop_free();
                break;
            }
            case 3:
                ledger.forget(key);
                model.erase(key);
                break;
            case 4: {  // subtransaction commit into its parent
                std::uint32_t parent = sub - 1;
                ledger.subxact_commit(sub, parent);
                for (auto& [k, h] : model) {
                    auto it = h.xact.find(sub);
                    if (it != h.xact.end()) {
                        h.xact[parent] += it->second;
                        h.xact.erase(sub);
                    }
                }
                break;
            }
            case 5:
                ledger.subxact_abort(sub);
                for (auto& [k, h] : model) h.xact.erase(sub);
                drop_free();
                break;
            default:
                ledger.xact_end();
                for (auto& [k, h] : model) h.xact.clear();
                drop_free();
                break;
        }
        // Compare everything observable.
        CHECK(ledger.size() == model.size());
        std::int64_t shortest = 0;
        std::size_t with_session = 0;
        for (const auto& [k, h] : model) {
            const Hold* got = ledger.find(k);
            CHECK(got != nullptr);
            CHECK(got->token == h.token);
            CHECK(got->session == h.session);
            CHECK(got->xact_total() == h.xact_total());
            CHECK(got->lease_ms == h.lease);
            CHECK(got->held());
            if (h.lease > 0 && (shortest == 0 || h.lease < shortest)) shortest = h.lease;
            if (h.session > 0) ++with_session;
        }
        CHECK(ledger.shortest_lease() == shortest);
        std::vector<HoldLedger::SessionHold> sessions(ledger.size() + 1);
        const std::size_t n = ledger.copy_session_holds(sessions.data(), ledger.size());
        CHECK(n == with_session);
        for (std::size_t i = 0; i < n; ++i)
            CHECK(model.count(sessions[i].key) && model[sessions[i].key].session == sessions[i].count &&
                  model[sessions[i].key].token == sessions[i].token);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t which = data[0];
    ++data;
    --size;
    switch (which % 4) {
        case 0: fuzz_token(data, size); break;
        case 1: fuzz_resource(data, size); break;
        case 2: fuzz_decide(data, size); break;
        default: fuzz_ledger(data, size); break;
    }
    return 0;
}
