// The client scenario in C++ with libpq (built and run by cpp.sh).
//
// A fencing token is a bigint: held as std::int64_t, it round-trips exactly
// in text and in binary format (int8 on the wire, type OID 20 like any
// bigint). The stale-write error is SQLSTATE 23T01 in PG_DIAG_SQLSTATE, with
// PG_DIAG_MESSAGE_DETAIL and PG_DIAG_MESSAGE_HINT. Also: 55006 from a second
// plain acquire, acquire_xact in BEGIN/COMMIT, fencing.use($1), lease expiry.
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
#include <thread>
#include <chrono>
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

std::string field(const Result& r, int code) {
    const char* s = PQresultErrorField(r.get(), code);
    return s ? s : "";
}

std::string sqlstate(const Result& r) {
    std::string s = field(r, PG_DIAG_SQLSTATE);
    return s.empty() ? "(none)" : s;
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

std::int64_t acquire(PGconn* c, const char* sql = "SELECT fencing.acquire($1)") {
    Result r = must(c, sql, {kResource});
    return parse_token(PQgetvalue(r.get(), 0, 0));
}

bool release(PGconn* c) {
    Result r = must(c, "SELECT fencing.release($1)", {kResource});
    return std::strcmp(PQgetvalue(r.get(), 0, 0), "t") == 0;
}

// The fenced write: its own transaction (autocommit), the token as a parameter.
Result fenced_write(PGconn* c, std::int64_t token) {
    return run(c, "UPDATE cpp_ledger SET balance = balance + 1, fence_token = $1 WHERE id = 1",
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

    // (1) acquire; not reentrant by default.
    Conn s1 = connect();
    const std::int64_t t1 = acquire(s1.get());
    check(t1 > kAbove2to53, "acquire: T1 = " + std::to_string(t1) + " is above 2^53 + 1");
    {
        Result r = run(s1.get(), "SELECT fencing.acquire($1)", {kResource});
        check(sqlstate(r) == "55006", "a second plain acquire fails with 55006 (got " + sqlstate(r) + ")");
    }
    // (2) the token as an int64, in text and binary format.
    {
        Result w = fenced_write(s1.get(), t1);
        check(PQresultStatus(w.get()) == PGRES_COMMAND_OK && std::strcmp(PQcmdTuples(w.get()), "1") == 0,
              "fenced write with T1 accepted");
        Result r = must(s1.get(), "SELECT fence_token FROM cpp_ledger WHERE id = 1");
        check(PQftype(r.get(), 0) == 20 && parse_token(PQgetvalue(r.get(), 0, 0)) == t1,
              std::string("T1 read back exactly, column type OID 20 (int8): ") + PQgetvalue(r.get(), 0, 0));
        Result b = must(s1.get(), "SELECT fence_token FROM cpp_ledger WHERE id = 1", {}, 1);
        check(PQgetlength(b.get(), 0, 0) == 8 && from_be64(PQgetvalue(b.get(), 0, 0)) == t1,
              "T1 read back exactly in binary format");
    }
    check(release(s1.get()), "T1 released");
    Conn s2 = connect();
    const std::int64_t t2 = acquire(s2.get(), "SELECT fencing.acquire($1, wait => '10 s')");
    {
        Result w = fenced_write(s2.get(), t2);
        check(t2 > t1 && PQresultStatus(w.get()) == PGRES_COMMAND_OK, "T2 > T1, fenced write with T2 accepted");
    }

    // (3) the stale write.
    {
        Result w = fenced_write(s1.get(), t1);
        check(PQresultStatus(w.get()) == PGRES_FATAL_ERROR && sqlstate(w) == "23T01",
              "stale write with T1 fails with SQLSTATE 23T01 (got " + sqlstate(w) + ")");
        check(field(w, PG_DIAG_MESSAGE_PRIMARY) == "stale fence token for relation \"cpp_ledger\"" &&
                  !field(w, PG_DIAG_MESSAGE_DETAIL).empty() && !field(w, PG_DIAG_MESSAGE_HINT).empty(),
              "message, detail and hint in PQresultErrorField");
        Result ok = run(s1.get(), "SELECT 1");
        check(PQresultStatus(ok.get()) == PGRES_TUPLES_OK, "the connection is usable after the error");
    }
    check(release(s2.get()), "T2 released");

    // (4) acquire_xact in BEGIN/COMMIT.
    must(s1.get(), "BEGIN");
    const std::int64_t t3 = acquire(s1.get(), "SELECT fencing.acquire_xact($1)");
    {
        Result w = fenced_write(s1.get(), t3);
        must(s1.get(), "COMMIT");
        Result n = must(s1.get(), "SELECT count(*) FROM fencing.locks WHERE resource = $1", {kResource});
        check(t3 > t2 && PQresultStatus(w.get()) == PGRES_COMMAND_OK && std::string(PQgetvalue(n.get(), 0, 0)) == "0",
              "acquire_xact in BEGIN/COMMIT: T3 > T2, the lock ended with the commit");
    }
    // (5) fencing.use($1) with a binary int8 parameter, then a write that carries no token.
    must(s1.get(), "BEGIN");
    const std::int64_t t4 = acquire(s1.get(), "SELECT fencing.acquire_xact($1)");
    {
        const std::uint64_t be = htobe64(static_cast<std::uint64_t>(t4));
        const Oid types[] = {20};  // INT8OID, as for any bigint parameter
        const char* values[] = {reinterpret_cast<const char*>(&be)};
        const int lengths[] = {8};
        const int formats[] = {1};
        Result u(PQexecParams(s1.get(), "SELECT fencing.use($1)", 1, types, values, lengths, formats, 0), PQclear);
        check(PQresultStatus(u.get()) == PGRES_TUPLES_OK && parse_token(PQgetvalue(u.get(), 0, 0)) == t4,
              "use($1) with a binary int8 parameter returns T4");
        must(s1.get(), "UPDATE cpp_ledger SET balance = balance + 1 WHERE id = 1");
        must(s1.get(), "COMMIT");
        Result r = must(s1.get(), "SELECT fence_token FROM cpp_ledger WHERE id = 1");
        check(parse_token(PQgetvalue(r.get(), 0, 0)) == t4, "use($1) stamped the write that carries no token with T4");
    }

    // (6) lease expiry: the server ends the silent holder's connection.
    Conn s3 = connect();
    const std::int64_t t5 = acquire(s3.get(), "SELECT fencing.acquire($1, lease => '1 s')");
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    {
        Result r = run(s3.get(), "SELECT 1");
        std::string msg = PQerrorMessage(s3.get());
        check(PQresultStatus(r.get()) != PGRES_TUPLES_OK && PQstatus(s3.get()) == CONNECTION_BAD,
              "the expired lease ended the connection (CONNECTION_BAD)");
        check(msg.find("fencing lease of 1000 ms expired") != std::string::npos,
              "PQerrorMessage names the lease: " + msg.substr(0, msg.find('\n')));
    }
    Conn s4 = connect();
    const std::int64_t t6 = acquire(s4.get());
    {
        Result w = fenced_write(s4.get(), t6);
        check(t6 > t5 && PQresultStatus(w.get()) == PGRES_COMMAND_OK,
              "reconnected: acquired again with a greater token and wrote");
        Result stale = fenced_write(s4.get(), t5);
        check(sqlstate(stale) == "23T01", "a write with the expired lease's token fails with 23T01");
        must(s4.get(), "SELECT fencing.release_all()");
    }

    if (failures > 0) {
        std::printf("libpq %d: %d check(s) failed\n", PQlibVersion(), failures);
        return 1;
    }
    std::printf("libpq %d: all checks passed\n", PQlibVersion());
    return 0;
}
