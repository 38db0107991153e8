// The client scenario in C++ with libpq (built and run by cpp.sh).
//
// Acquire (T1), fenced write with T1, release; a second session acquires
// (T2 > T1) and writes; the stale write with T1 fails with SQLSTATE 23T01.
// Tokens are above 2^53 and held as std::int64_t; they round-trip exactly in
// text and in binary format (a fencing.token travels as int8 on the wire).
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
#include <libpq-fe.h>

#include <endian.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

const char* const kResource = "clients:cpp";
constexpr std::int64_t kAbove2to53 = 9007199254740993;  // 2^53 + 1
int failures = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s%s\n", ok ? "ok - " : "FAILED - ", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures;
}

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;
using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;

Conn connect() {
    Conn c(PQconnectdb(""), PQfinish);  // PGHOST, PGPORT, PGUSER, PGDATABASE
    if (PQstatus(c.get()) != CONNECTION_OK) {
        std::fprintf(stderr, "connection failed: %s", PQerrorMessage(c.get()));
        std::exit(1);
    }
    return c;
}

// Runs a query with text parameters; results in text (or binary) format.
Result run(PGconn* c, const char* sql, const std::vector<std::string>& params = {}, int result_format = 0) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    return Result(PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr,
                               result_format),
                  PQclear);
}

// Like run(), but the query must succeed.
Result must(PGconn* c, const char* sql, const std::vector<std::string>& params = {}, int result_format = 0) {
    Result r = run(c, sql, params, result_format);
    ExecStatusType s = PQresultStatus(r.get());
    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
        std::fprintf(stderr, "query failed: %s\n  %s", sql, PQresultErrorMessage(r.get()));
        std::exit(1);
    }
    return r;
}

std::string sqlstate(const Result& r) {
    const char* s = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    return s ? s : "(none)";
}

// The token text the server sent, as an integer: exact for the whole range.
std::int64_t parse_token(const char* text) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v <= 0) {
        std::fprintf(stderr, "not a token: '%s'\n", text);
        std::exit(1);
    }
    return static_cast<std::int64_t>(v);
}

std::int64_t acquire(PGconn* c) {
    Result r = must(c, "SELECT fencing.acquire($1)", {kResource});
    return parse_token(PQgetvalue(r.get(), 0, 0));
}

bool release(PGconn* c) {
    Result r = must(c, "SELECT fencing.release($1)", {kResource});
    return std::strcmp(PQgetvalue(r.get(), 0, 0), "t") == 0;
}

// The fenced write: its own transaction (autocommit), the token as a parameter.
Result fenced_write(PGconn* c, std::int64_t token) {
    return run(c, "UPDATE cpp_ledger SET balance = balance + 100, fence_token = $1 WHERE id = 1",
               {std::to_string(token)});
}

std::int64_t from_be64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return static_cast<std::int64_t>(v);
}

}  // namespace

int main() {
    Conn setup = connect();
    must(setup.get(), "SET client_min_messages = warning");
    must(setup.get(), "CREATE EXTENSION IF NOT EXISTS fencing");
    must(setup.get(), "DROP TABLE IF EXISTS cpp_ledger");
    must(setup.get(), "CREATE TABLE cpp_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)");
    // Tokens above 2^53: protect() refuses tables holding tokens past 2^52,
    // so the table is protected first and a superuser moves the counter.
    must(setup.get(), "SELECT fencing.protect('cpp_ledger')");
    must(setup.get(), "SELECT fencing.advance_past('cpp_ledger', $1)", {std::to_string(kAbove2to53)});
    must(setup.get(), "INSERT INTO cpp_ledger VALUES (1, 0, $1)", {std::to_string(kAbove2to53)});

    // Session 1: acquire, write, release.
    Conn s1 = connect();
    const std::int64_t t1 = acquire(s1.get());
    std::printf("T1 = %" PRId64 "\n", t1);
    check(t1 > kAbove2to53, "T1 is above 2^53 + 1");
    {
        Result w = fenced_write(s1.get(), t1);
        check(PQresultStatus(w.get()) == PGRES_COMMAND_OK && std::strcmp(PQcmdTuples(w.get()), "1") == 0,
              "fenced write with T1 accepted");
        Result r = must(s1.get(), "SELECT fence_token, fencing.current($1) FROM cpp_ledger WHERE id = 1", {kResource});
        check(std::string(PQgetvalue(r.get(), 0, 0)) == std::to_string(t1),
              std::string("T1 read back exactly (") + PQgetvalue(r.get(), 0, 0) + ")");
        check(parse_token(PQgetvalue(r.get(), 0, 1)) == t1, "fencing.current returns T1 exactly");

        // Binary format: a token is an int8 on the wire, both ways.
        Result b = must(s1.get(), "SELECT fence_token FROM cpp_ledger WHERE id = 1", {}, 1);
        check(PQgetlength(b.get(), 0, 0) == 8 && from_be64(PQgetvalue(b.get(), 0, 0)) == t1,
              "T1 read back exactly in binary format");
        Result oid = must(s1.get(), "SELECT 'fencing.token'::regtype::oid");
        Oid token_oid = static_cast<Oid>(std::strtoul(PQgetvalue(oid.get(), 0, 0), nullptr, 10));
        const std::uint64_t be = htobe64(static_cast<std::uint64_t>(t1));
        const char* values[] = {reinterpret_cast<const char*>(&be)};
        const int lengths[] = {8};
        const int formats[] = {1};
        Result sb(PQexecParams(s1.get(), "SELECT $1::text", 1, &token_oid, values, lengths, formats, 0), PQclear);
        check(PQresultStatus(sb.get()) == PGRES_TUPLES_OK &&
                  std::string(PQgetvalue(sb.get(), 0, 0)) == std::to_string(t1),
              "T1 sent in binary format arrives exactly");
    }
    check(release(s1.get()), "T1 released");

    // Session 2: the next acquirer.
    Conn s2 = connect();
    const std::int64_t t2 = acquire(s2.get());
    std::printf("T2 = %" PRId64 "\n", t2);
    check(t2 > t1, "T2 > T1");
    {
        Result w = fenced_write(s2.get(), t2);
        check(PQresultStatus(w.get()) == PGRES_COMMAND_OK && std::strcmp(PQcmdTuples(w.get()), "1") == 0,
              "fenced write with T2 accepted");
    }

    // The stale write with T1 (session 1 still thinks it may write).
    {
        Result w = fenced_write(s1.get(), t1);
        check(PQresultStatus(w.get()) == PGRES_FATAL_ERROR && sqlstate(w) == "23T01",
              "stale write with T1 fails with SQLSTATE 23T01 (got " + sqlstate(w) + ")");
        Result v = run(s1.get(), "SELECT fencing.validate($1, $2)", {kResource, std::to_string(t1)});
        check(sqlstate(v) == "23T01", "validate(T1) fails with SQLSTATE 23T01 (got " + sqlstate(v) + ")");
        Result v2 = must(s1.get(), "SELECT fencing.validate($1, $2)", {kResource, std::to_string(t2)});
        check(parse_token(PQgetvalue(v2.get(), 0, 0)) == t2, "validate(T2) returns T2 exactly");
    }

    {
        Result r = must(s2.get(), "SELECT balance, fence_token FROM cpp_ledger WHERE id = 1");
        check(std::string(PQgetvalue(r.get(), 0, 0)) == "200" && parse_token(PQgetvalue(r.get(), 0, 1)) == t2,
              "the row holds T2 and only the two fenced writes");
    }
    check(release(s2.get()), "T2 released");
    {
        Result r = must(s2.get(), "SELECT count(*) FROM fencing.locks WHERE resource = $1", {kResource});
        check(std::string(PQgetvalue(r.get(), 0, 0)) == "0", "no fencing lock left");
    }

    if (failures > 0) {
        std::printf("cpp client: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("cpp client: all checks passed\n");
    return 0;
}
