// input_fuzz: generated inputs for the token input function and the resource
// argument of the fencing functions, over one libpq connection.
//
//   input_fuzz CONNINFO COUNT SEED
//
// Sends COUNT generated inputs (random bytes, huge strings, boundary numbers,
// invalid encodings, strings in other client encodings) through prepared
// statements with text and binary parameters:
//
//   $1::fencing.token (text and binary), convert_from($1::bytea, 'UTF8')::fencing.token,
//   fencing.current / acquire+release / try_acquire_xact / validate / resource_key
//   with a generated resource, fencing.acquire with generated wait/lease,
//   set_config('fencing.token', $1), fencing.trigger_args($1::bytea).
//
// Checks: the connection never breaks (same backend pid from start to end),
// every failure carries a SQLSTATE of the expected set, and, for inputs the
// server sees exactly as sent (client_encoding UTF8), the outcome agrees with
// a reference model of the documented rules (a token is optional ASCII blanks,
// an optional sign, decimal digits, optional blanks, value 1..2^63-1: else
// 22P02 for syntax and 22003 for range; a resource is 1..1024 bytes: else
// 22023). Prints a summary; exit status 0 only when nothing unexpected
// happened.
#include <libpq-fe.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

std::mt19937_64 rng;

std::uint64_t rnd(std::uint64_t n) { return n == 0 ? 0 : rng() % n; }
bool chance(int percent) { return static_cast<int>(rnd(100)) < percent; }

// ---- reference model --------------------------------------------------------

enum class Expect { ok, syntax, range, syntax_or_range, not_positive, any_integer_form };

struct TokenModel {
    Expect expect;
    std::int64_t value;
};

bool ascii_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// bigint's input, then the domain's check: blanks and one sign around
// decimal digits, else syntax (22P02); a digit run outside bigint, whatever
// follows it, range (22003); a bigint <= 0, not_positive (23514).
// From PostgreSQL 16 on, bigint's input also takes hexadecimal, octal and
// binary literals (0x, 0o, 0b) and underscores between digits; such inputs
// are judged only as "one of the outcomes of an integer" there.
bool pg16_literals = false;

bool pg16_only_form(const std::string& s) {
    if (s.find('_') != std::string::npos) return true;
    std::size_t i = 0;
    while (i < s.size() && ascii_space(s[i])) ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    return i + 1 < s.size() && s[i] == '0' && std::strchr("xXoObB", s[i + 1]) != nullptr && s[i + 1] != '\0';
}

TokenModel model_token(const std::string& s) {
    if (pg16_literals && pg16_only_form(s)) return {Expect::any_integer_form, 0};
    std::size_t i = 0, n = s.size();
    while (i < n && ascii_space(s[i])) ++i;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        ++i;
    }
    std::size_t start = i;
    // Magnitude as a decimal string without leading zeros.
    std::string digits;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (!(digits.empty() && s[i] == '0')) digits.push_back(s[i]);
        ++i;
    }
    if (i == start) return {Expect::syntax, 0};
    // A digit run outside bigint followed by garbage is reported as either
    // (PostgreSQL's bigint input differs between releases here); both are
    // refusals of a bad token.
    const std::string limit = neg ? "9223372036854775808" : "9223372036854775807";
    const bool too_big = digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit);
    while (i < n && ascii_space(s[i])) ++i;
    if (i != n) return {too_big ? Expect::syntax_or_range : Expect::syntax, 0};
    if (too_big) return {Expect::range, 0};
    if (digits.empty() || neg) return {Expect::not_positive, 0};
    return {Expect::ok, static_cast<std::int64_t>(std::strtoull(digits.c_str(), nullptr, 10))};
}

bool valid_utf8(const std::string& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c == 0) return false;
        if (c < 0x80) {
            ++i;
            continue;
        }
        int len;
        std::uint32_t cp;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
        else return false;
        if (i + len > n) return false;
        for (int k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

// ---- generators --------------------------------------------------------------

const std::vector<std::string> kBoundary = {
    "0", "1", "-1", "+1", "-0", "+0", "00", "01", "0001", "9223372036854775807", "+9223372036854775807",
    "9223372036854775806", "9223372036854775808", "-9223372036854775808", "-9223372036854775807",
    "18446744073709551615", "18446744073709551616", "99999999999999999999", "99999999999999999999x",
    "09223372036854775807", "00000000000000000000009223372036854775807", "1e3", "1E3", "0x1F", "0X10", "0b1",
    "0o7", "1.0", "1.", ".1", "1,000", "1_000", "1 000", "+", "-", "", " ", "\t", "+-1", "-+1", "--1", "++1",
    " 1", "1 ", " \t\n\r\f\v1\v\f\r\n\t ", "1\n", "\n", "NaN", "nan", "Infinity", "-Infinity", "inf", "null",
    "NULL", "true", "1e-1", "0.5e1", "٣", "１２３", "１", "−5", "5−", "\xC2\xA0" "5", "5\xC2\xA0", "\xE2\x80\x8B" "5",
    "\xEF\xBB\xBF" "5", "5\xE2\x80\x8B", "'5'", "\"5\"", "(5)", "5;", "5--", "$1", "4294967296", "2147483648",
    "-2147483648", "4294967295", "2147483647", "65536", "1" + std::string(18, '0'), "1" + std::string(19, '0'),
    "9" + std::string(18, '9'), std::string(1000, '0') + "1", std::string(1000, ' ') + "7" + std::string(1000, ' '),
};

const std::vector<std::string> kBadUtf8 = {
    "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
    "\xF8\x88\x80\x80\x80", "\xFC\x84\x80\x80\x80\x80", "\xFE", "\xFF", "\x80", "\xBF", "\xC2", "\xE2\x82",
    "\xF0\x9F\x98", "\xC3\x28", "\xA0\xA1", "\xE2\x28\xA1", "\xF0\x28\x8C\xBC",
};

std::string random_bytes(std::size_t n, bool allow_nul) {
    std::string s(n, '\0');
    for (auto& c : s) {
        do c = static_cast<char>(rnd(256));
        while (!allow_nul && c == '\0');
    }
    return s;
}

std::string random_printable(std::size_t n) {
    static const char alphabet[] = "0123456789+- \t\n\r\f\vabcxyzXYZ.,_eE:/\\'\"%$#@!()[]{}";
    std::string s(n, ' ');
    for (auto& c : s) c = alphabet[rnd(sizeof alphabet - 1)];
    return s;
}

std::string random_unicode(std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t cp;
        switch (rnd(4)) {
            case 0: cp = 0x20 + rnd(0x5F); break;
            case 1: cp = 0x80 + rnd(0x780); break;
            case 2: cp = 0x800 + rnd(0xD000); break;
            default: cp = 0x10000 + rnd(0x100000); break;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;
        if (cp < 0x80) s.push_back(static_cast<char>(cp));
        else if (cp < 0x800) {
            s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }
    return s;
}

std::string digits(std::size_t n) {
    std::string s(n, '0');
    for (auto& c : s) c = static_cast<char>('0' + rnd(10));
    return s;
}

std::string blanks() {
    static const char b[] = " \t\n\r\f\v";
    std::string s(rnd(4), ' ');
    for (auto& c : s) c = b[rnd(6)];
    return s;
}

// A numeric-looking string: blanks, sign, digits (sometimes around the int64
// boundary), blanks, sometimes a junk character somewhere.
std::string numberish() {
    std::string s = blanks();
    switch (rnd(5)) {
        case 0: s += "+"; break;
        case 1: s += "-"; break;
        default: break;
    }
    switch (rnd(4)) {
        case 0: s += std::to_string(rng()); break;  // up to 2^64-1
        case 1: {
            std::int64_t v = INT64_MAX - static_cast<std::int64_t>(rnd(3)) + static_cast<std::int64_t>(rnd(3));
            s += std::to_string(static_cast<std::uint64_t>(v) + (chance(30) ? rnd(3) : 0));
            break;
        }
        case 2: s += std::string(rnd(30), '0') + digits(1 + rnd(20)); break;
        default: s += digits(rnd(25)); break;
    }
    s += blanks();
    if (chance(20) && !s.empty()) {
        std::string junk = chance(50) ? std::string(1, "x.e,_+-/ \x01\x7f"[rnd(11)]) : random_unicode(1);
        s.insert(rnd(s.size() + 1), junk);
    }
    return s;
}

std::string huge() {
    std::size_t n = 1024 + rnd(chance(10) ? 4 << 20 : 64 << 10);
    switch (rnd(4)) {
        case 0: return digits(n);
        case 1: return std::string(n, '0') + "5";
        case 2: return std::string(n, ' ') + "5" + std::string(n, ' ');
        default: return random_unicode(n / 3);
    }
}

std::string bad_encoding() {
    std::string base = chance(50) ? numberish() : random_printable(rnd(20));
    const std::string& bad = kBadUtf8[rnd(kBadUtf8.size())];
    base.insert(rnd(base.size() + 1), bad);
    return base;
}

// A generated text input (never containing NUL: text-format parameters are C strings).
std::string gen_text() {
    switch (rnd(10)) {
        case 0: return kBoundary[rnd(kBoundary.size())];
        case 1: case 2: return numberish();
        case 3: return random_bytes(rnd(40), false);
        case 4: return random_printable(rnd(40));
        case 5: return random_unicode(rnd(20));
        case 6: return bad_encoding();
        case 7: return chance(5) ? huge() : random_printable(1000 + rnd(60));
        case 8: {  // resource-length boundaries
            static const std::size_t lens[] = {0, 1, 2, 1023, 1024, 1025, 2048};
            std::size_t n = lens[rnd(7)];
            if (chance(50)) return std::string(n, 'r');
            std::string s = random_unicode(n);  // multibyte: more bytes than characters
            return s;
        }
        default: return kBoundary[rnd(kBoundary.size())] + (chance(50) ? numberish() : blanks());
    }
}

// ---- the connection ------------------------------------------------------------

struct Stmt {
    const char* name;
    const char* sql;
    int nparams;
};

const Stmt kStmts[] = {
    {"tok_in", "SELECT $1::fencing.token::text", 1},
    {"tok_text", "SELECT $1::text::fencing.token::text", 1},
    {"tok_recv", "SELECT $1::fencing.token::text", 1},  // binary parameter
    {"tok_conv", "SELECT convert_from($1::bytea, 'UTF8')::fencing.token::text", 1},
    {"res_current", "SELECT fencing.current($1)::text", 1},
    {"res_acquire", "SELECT fencing.acquire($1)::text, fencing.release($1)", 1},
    {"res_try_xact", "SELECT fencing.try_acquire_xact($1)::text", 1},
    {"res_validate", "SELECT fencing.validate($1, $2)::text", 2},
    {"res_key", "SELECT fencing.resource_key($1)", 1},
    {"res_bin", "SELECT fencing.current($1::text)::text", 1},  // binary text parameter
    {"res_conv", "SELECT fencing.resource_key(convert_from($1::bytea, 'UTF8'))", 1},
    {"acq_wait", "SELECT fencing.acquire($1, $2::interval, $3::interval)::text, fencing.release($1)", 3},
    {"guc", "SELECT set_config('fencing.token', $1, false)", 1},
    {"targs", "SELECT cardinality(fencing.trigger_args($1::bytea))", 1},
};
constexpr int kNumStmts = sizeof kStmts / sizeof kStmts[0];

const std::set<std::string> kExpected = {
    "22P02",  // invalid text representation
    "22003",  // out of range
    "22023",  // invalid parameter value (resource length, wait/lease)
    "22004",  // null value not allowed
    "22021",  // invalid byte sequence for encoding
    "22P05",  // untranslatable character (client_encoding conversions)
    "54000",  // program limit exceeded
    "22P03",  // invalid binary representation
    "08P01",  // binary parameter of the wrong length ("insufficient data left in message")
    "23T01",  // validate(): stale token
    "23514",  // a token <= 0 (the domain's check constraint)
    "22007", "22008", "22015",  // interval input (wait/lease)
};

const char* kEncodings[] = {"UTF8", "UTF8", "UTF8", "LATIN1", "SJIS", "BIG5", "GBK", "EUC_JP", "SQL_ASCII", "WIN1251"};

struct Stats {
    long inputs = 0, ok = 0, failed = 0, unexpected = 0, mismatches = 0, conn_lost = 0;
    std::map<std::string, long> states;
    std::map<std::string, long> per_stmt;
    std::vector<std::string> notes;
    void note(const std::string& s) {
        if (notes.size() < 30) notes.push_back(s);
    }
};

std::string printable(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < 80; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) out.push_back(static_cast<char>(c));
        else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
    }
    if (s.size() > 80) out += "...(" + std::to_string(s.size()) + " bytes)";
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s CONNINFO COUNT SEED\n", argv[0]);
        return 2;
    }
    const char* conninfo = argv[1];
    long count = std::atol(argv[2]);
    rng.seed(std::strtoull(argv[3], nullptr, 10));

    PGconn* conn = PQconnectdb(conninfo);
    pg16_literals = PQserverVersion(conn) >= 160000;
    // The model is that of the fencing.token setting once the module is
    // loaded in the session: before that, PostgreSQL keeps any text as a
    // placeholder (docs/reference.md). Load it first, so that the outcome
    // does not depend on which statement the seed happens to draw first.
    PQclear(PQexec(conn, "SELECT fencing.version()"));
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "connection failed: %s", PQerrorMessage(conn));
        return 2;
    }
    PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
    auto exec_ok = [&](const char* sql) -> std::string {
        PGresult* r = PQexec(conn, sql);
        std::string v;
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) v = PQgetvalue(r, 0, 0);
        else if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
            std::fprintf(stderr, "setup query failed: %s: %s", sql, PQerrorMessage(conn));
            std::exit(2);
        }
        PQclear(r);
        return v;
    };
    const std::string pid0 = exec_ok("SELECT pg_backend_pid()");
    exec_ok("SET lc_messages = 'C'");
    for (const Stmt& s : kStmts) {
        PGresult* r = PQprepare(conn, s.name, s.sql, s.nparams, nullptr);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            std::fprintf(stderr, "prepare %s failed: %s", s.name, PQerrorMessage(conn));
            return 2;
        }
        PQclear(r);
    }

    Stats st;
    std::string encoding = "UTF8";
    for (long n = 0; n < count; ++n) {
        // Now and then another client encoding: the server converts what it
        // receives (or rejects it: 22021, 22P05) and converts its messages back.
        if (n % 500 == 0) {
            encoding = kEncodings[rnd(sizeof kEncodings / sizeof kEncodings[0])];
            if (PQsetClientEncoding(conn, encoding.c_str()) != 0) {
                std::fprintf(stderr, "could not set client_encoding %s: %s", encoding.c_str(), PQerrorMessage(conn));
                return 2;
            }
        }
        const bool exact = encoding == "UTF8";
        const int which = static_cast<int>(rnd(kNumStmts));
        const Stmt& s = kStmts[which];
        std::string p[3];
        const char* values[3] = {nullptr, nullptr, nullptr};
        int lengths[3] = {0, 0, 0};
        int formats[3] = {0, 0, 0};
        bool null0 = chance(1);
        const std::string sname = s.name;

        if (sname == "tok_recv") {
            std::size_t len = chance(80) ? 8 : rnd(17);
            p[0] = random_bytes(len, true);
            if (len == 8 && chance(30)) {  // boundary values in network byte order
                static const std::uint64_t b[] = {0, 1, 0x7FFFFFFFFFFFFFFFULL, 0x8000000000000000ULL,
                                                  0xFFFFFFFFFFFFFFFFULL, 0x0000000100000000ULL};
                std::uint64_t v = b[rnd(6)];
                for (int k = 0; k < 8; ++k) p[0][k] = static_cast<char>(v >> (56 - 8 * k));
            }
            formats[0] = 1;
        } else if (sname == "tok_conv" || sname == "res_conv" || sname == "targs") {
            p[0] = chance(50) ? random_bytes(rnd(64), true) : gen_text();
            if (chance(20)) p[0] += kBadUtf8[rnd(kBadUtf8.size())];
            formats[0] = 1;
        } else if (sname == "res_bin") {
            p[0] = chance(50) ? random_bytes(rnd(64), true) : gen_text();
            formats[0] = 1;
        } else if (sname == "acq_wait") {
            p[0] = gen_text();
            static const std::vector<std::string> iv = {"0", "1 ms", "-1 ms", "0.5 ms", "1 s", "-1 s", "1000000 years",
                                                        "24 days", "25 days", "1 mon", "-1 mon", "P1D", "abc", "",
                                                        "1 s 2", "9223372036854775807 us", "@ 1 hour ago"};
            p[1] = chance(70) ? iv[rnd(iv.size())] : gen_text();
            p[2] = chance(70) ? iv[rnd(iv.size())] : gen_text();
        } else {
            for (int k = 0; k < s.nparams; ++k) p[k] = gen_text();
        }
        for (int k = 0; k < s.nparams; ++k) {
            values[k] = p[k].data();
            lengths[k] = static_cast<int>(p[k].size());
        }
        if (null0) values[0] = nullptr;

        ++st.inputs;
        ++st.per_stmt[sname];
        PGresult* r = PQexecPrepared(conn, s.name, s.nparams, values, lengths, formats, 0);
        ExecStatusType rs = PQresultStatus(r);
        std::string state = rs == PGRES_FATAL_ERROR && PQresultErrorField(r, PG_DIAG_SQLSTATE)
                                ? PQresultErrorField(r, PG_DIAG_SQLSTATE)
                                : "";
        std::string value = rs == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
        bool is_null = rs == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQgetisnull(r, 0, 0);
        std::string errmsg = rs == PGRES_FATAL_ERROR ? PQresultErrorMessage(r) : "";
        PQclear(r);

        if (PQstatus(conn) != CONNECTION_OK) {
            ++st.conn_lost;
            st.note("connection lost at input " + std::to_string(n) + " (" + sname + ", " + printable(p[0]) +
                    "): " + PQerrorMessage(conn));
            PQreset(conn);
            if (PQstatus(conn) != CONNECTION_OK) break;
            for (const Stmt& s2 : kStmts) PQclear(PQprepare(conn, s2.name, s2.sql, s2.nparams, nullptr));
            PQsetClientEncoding(conn, encoding.c_str());
            continue;
        }
        if (rs == PGRES_TUPLES_OK) {
            ++st.ok;
        } else if (rs == PGRES_FATAL_ERROR) {
            ++st.failed;
            ++st.states[state];
            if (!kExpected.count(state)) {
                ++st.unexpected;
                st.note("unexpected SQLSTATE " + state + " (" + sname + ", " + printable(p[0]) + "): " + errmsg);
            }
            if (errmsg.find("ERROR:") == std::string::npos && errmsg.find("FATAL") == std::string::npos) {
                // A message without a severity: still counted by its SQLSTATE.
            }
        } else {
            ++st.unexpected;
            st.note(std::string("unexpected result status ") + PQresStatus(rs) + " (" + sname + ")");
        }

        // The reference model, where the server sees exactly what was sent.
        if (!exact || null0) {
            if (null0 && rs == PGRES_FATAL_ERROR && sname.rfind("tok", 0) == 0 && state != "22004") {
                // NULL tokens are NULL, not errors (the cast is strict).
                ++st.mismatches;
                st.note("NULL token input failed with " + state + " (" + sname + ")");
            }
            continue;
        }
        auto mismatch = [&](const std::string& what) {
            ++st.mismatches;
            st.note("model mismatch (" + sname + ", " + printable(p[0]) + "): " + what + "; got " +
                    (rs == PGRES_TUPLES_OK ? "value '" + value + "'" : "error " + state + " " + errmsg));
        };
        if (sname == "tok_in" || sname == "tok_text" || sname == "guc") {
            if (!valid_utf8(p[0])) {
                if (state != "22021") mismatch("invalid UTF-8 must fail with 22021");
                continue;
            }
            if (sname == "guc" && p[0].empty()) {
                if (rs != PGRES_TUPLES_OK) mismatch("an empty fencing.token setting unsets it");
                continue;
            }
            TokenModel m = model_token(p[0]);
            if (m.expect == Expect::ok) {
                if (rs != PGRES_TUPLES_OK) mismatch("valid token " + std::to_string(m.value));
                else if (sname != "guc" && value != std::to_string(m.value)) mismatch("value " + std::to_string(m.value));
            } else if (m.expect == Expect::syntax && state != "22P02") {
                mismatch("syntax error 22P02");
            } else if (m.expect == Expect::range && state != "22003") {
                mismatch("range error 22003");
            } else if (m.expect == Expect::syntax_or_range && state != "22P02" && state != "22003") {
                mismatch("syntax or range error 22P02/22003");
            } else if (m.expect == Expect::any_integer_form && rs != PGRES_TUPLES_OK && state != "22P02" &&
                       state != "22003" && state != "23514") {
                mismatch("an integer literal of PostgreSQL 16 or later: a value, 22P02, 22003 or 23514");
            } else if (m.expect == Expect::not_positive && state != "23514") {
                mismatch("a token <= 0 fails with 23514");
            }
        } else if (sname == "tok_recv") {
            if (p[0].size() != 8) {
                // Too short: 08P01. Too long: 22P03, or 23514 when the first 8
                // bytes already are a bigint <= 0 (the domain's check runs
                // before the length check).
                bool first_not_positive = false;
                if (p[0].size() > 8) {
                    std::uint64_t u8 = 0;
                    for (int k = 0; k < 8; ++k) u8 = (u8 << 8) | static_cast<unsigned char>(p[0][k]);
                    first_not_positive = static_cast<std::int64_t>(u8) < 1;
                }
                if (state != "08P01" && state != "22P03" && !(first_not_positive && state == "23514"))
                    mismatch("wrong length must fail with 08P01/22P03");
                continue;
            }
            std::uint64_t u = 0;
            for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<unsigned char>(p[0][k]);
            auto v = static_cast<std::int64_t>(u);
            if (v >= 1) {
                if (value != std::to_string(v)) mismatch("binary value " + std::to_string(v));
            } else if (state != "23514") {
                mismatch("binary value <= 0 must fail with 23514");
            }
        } else if (sname == "res_current" || sname == "res_key" || sname == "res_try_xact" || sname == "res_acquire") {
            if (!valid_utf8(p[0])) {
                if (state != "22021") mismatch("invalid UTF-8 must fail with 22021");
                continue;
            }
            bool good = !p[0].empty() && p[0].size() <= 1024;
            if (!good && state != "22023") mismatch("resource of " + std::to_string(p[0].size()) + " bytes must fail with 22023");
            if (good && rs != PGRES_TUPLES_OK) mismatch("resource of " + std::to_string(p[0].size()) + " bytes is valid");
            if (good && (sname == "res_try_xact" || sname == "res_acquire") && (is_null || value.empty()))
                mismatch("an uncontended acquisition returns a token");
        } else if (sname == "res_validate") {
            if (!valid_utf8(p[0]) || !valid_utf8(p[1])) {
                if (state != "22021") mismatch("invalid UTF-8 must fail with 22021");
                continue;
            }
            TokenModel m = model_token(p[1]);
            bool good = !p[0].empty() && p[0].size() <= 1024;
            if (m.expect == Expect::syntax) {
                if (state != "22P02") mismatch("token syntax error 22P02");
            } else if (m.expect == Expect::syntax_or_range) {
                if (state != "22P02" && state != "22003") mismatch("token syntax or range error 22P02/22003");
            } else if (m.expect == Expect::any_integer_form) {
                if (state != "22P02" && state != "22003" && state != "23T01" && state != "22023")
                    mismatch("an integer literal of PostgreSQL 16 or later: 22P02, 22003, 22023 or 23T01");
            } else if (m.expect == Expect::range) {
                if (state != "22003") mismatch("token range error 22003");
            } else if (!good) {
                if (state != "22023") mismatch("bad resource 22023");
            } else if (state != "23T01") {
                mismatch("a token nobody holds is stale (23T01)");
            }
        }
    }

    // The same connection still works, with the same backend.
    PQsetClientEncoding(conn, "UTF8");
    PGresult* r = PQexec(conn, "SELECT pg_backend_pid()::text || ' ' || fencing.acquire('fuzz:final')::text || ' ' || fencing.release('fuzz:final')::text");
    std::string final_row = PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : std::string("error: ") + PQerrorMessage(conn);
    PQclear(r);
    bool same_backend = final_row.rfind(pid0 + " ", 0) == 0 && final_row.size() > pid0.size() + 6 &&
                        final_row.substr(final_row.size() - 4) == "true";
    r = PQexec(conn, "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'");
    std::string leaked = PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?";
    PQclear(r);

    std::printf("inputs %ld\nok %ld\nfailed %ld\nunexpected %ld\nmismatches %ld\nconnection_lost %ld\n", st.inputs,
                st.ok, st.failed, st.unexpected, st.mismatches, st.conn_lost);
    std::printf("same_backend %d (%s)\nadvisory_locks_left %s\n", same_backend ? 1 : 0, final_row.c_str(), leaked.c_str());
    for (const auto& [k, v] : st.states) std::printf("sqlstate %s %ld\n", k.c_str(), v);
    for (const auto& [k, v] : st.per_stmt) std::printf("statement %s %ld\n", k.c_str(), v);
    for (const auto& s : st.notes) std::printf("note %s\n", s.c_str());
    PQfinish(conn);
    bool good = st.unexpected == 0 && st.mismatches == 0 && st.conn_lost == 0 && same_backend && leaked == "0";
    return good ? 0 : 1;
}
