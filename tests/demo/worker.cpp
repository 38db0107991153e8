// worker: one settlement worker of `make demo` (tests/scripts/demo.sh).
//
// It takes the lock on settlement:<batch>, reads and sums the batch's
// transactions, and writes the batch's summary row. Like a real service it
// keeps two connections: a *lock* connection that holds the lock, and a
// *storage* connection that reads and writes the data (in real life these are
// often two different systems: a lock service and a database or object store).
//
//   --mode fenced   the lock is fencing.acquire(resource, wait, lease) on the
//                   lock connection; the summary is written with the fence
//                   token into a table protected by fencing.protect. When the
//                   write is rejected (SQLSTATE 23T01) the worker reports that
//                   it lost its lease and exits 0 without retrying.
//   --mode plain    the lock is the classic timed lock (Redis' SET NX PX):
//                   a row in demo_plain_locks with an expiry time, taken when
//                   absent or expired; the summary is written without a token.
//
// Options: --name A --mode fenced|plain --conninfo STR --batch N --table NAME
//          --lease-ms N --wait-ms N --ready-file PATH --think-ms N --log FILE
// After summing, the worker creates --ready-file (the demo then freezes it
// with SIGSTOP) and "formats the report" for --think-ms before writing.
// Output: one line per step, "[HH:MM:SS.mmm] worker X  ...", on stdout.
// Exit status: 0 when the worker did its job or gave up because its lock was
// lost; 1 on anything unexpected; 2 on bad usage.
#include <libpq-fe.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::system_clock;

std::string g_name = "?";
std::FILE* g_log = nullptr;  // --log FILE: a copy of the output

std::string now_str() {
    auto t = Clock::now();
    std::time_t secs = Clock::to_time_t(t);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    std::tm tm{};
    localtime_r(&secs, &tm);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03lld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(ms));
    return buf;
}

void say(const std::string& msg) {
    std::string line = "[" + now_str() + "] worker " + g_name + (g_name.size() < 2 ? "  " : " ") + msg + "\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
    if (g_log) {
        std::fputs(line.c_str(), g_log);
        std::fflush(g_log);
    }
}

[[noreturn]] void die(const std::string& msg) {
    say("UNEXPECTED: " + msg);
    std::exit(1);
}

std::string money(long long cents) {
    bool neg = cents < 0;
    unsigned long long c = neg ? -static_cast<unsigned long long>(cents) : cents;
    std::string whole = std::to_string(c / 100);
    std::string grouped;
    for (std::size_t i = 0; i < whole.size(); ++i) {
        if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
        grouped += whole[i];
    }
    char frac[4];
    std::snprintf(frac, sizeof frac, "%02llu", c % 100);
    return (neg ? "-" : "") + grouped + "." + frac;
}

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", s);
    return buf;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string one_line(const char* s) {
    std::string r = s ? s : "";
    while (!r.empty() && (r.back() == '\n' || r.back() == ' ')) r.pop_back();
    for (auto& ch : r)
        if (ch == '\n') ch = ' ';
    return r;
}

// A query result that clears itself.
struct Result {
    PGresult* r;
    explicit Result(PGresult* res) : r(res) {}
    ~Result() { PQclear(r); }
    Result(const Result&) = delete;
    Result& operator=(const Result&) = delete;
    ExecStatusType status() const { return PQresultStatus(r); }
    bool ok() const { return status() == PGRES_TUPLES_OK || status() == PGRES_COMMAND_OK; }
    std::string sqlstate() const {
        const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        return s ? s : "";
    }
    std::string field(int diag) const { return one_line(PQresultErrorField(r, diag)); }
    bool null(int row, int col) const { return PQgetisnull(r, row, col); }
    std::string get(int row, int col) const { return PQgetvalue(r, row, col); }
};

PGresult* exec(PGconn* c, const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.c_str());
    return PQexecParams(c, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
}

PGconn* connect(const std::string& conninfo, const std::string& purpose) {
    std::string ci = conninfo + " application_name='settlement-worker-" + g_name + "-" + purpose + "'";
    PGconn* c = PQconnectdb(ci.c_str());
    if (PQstatus(c) != CONNECTION_OK) die(purpose + " connection: " + one_line(PQerrorMessage(c)));
    return c;
}

struct Options {
    std::string mode, conninfo, table, ready_file;
    long batch = 0, lease_ms = 2000, wait_ms = 30000, think_ms = 500;
};

Options parse(int argc, char** argv) {
    std::map<std::string, std::string> kv;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strncmp(argv[i], "--", 2) != 0) break;
        kv[argv[i] + 2] = argv[i + 1];
    }
    if (argc % 2 == 0 || !kv.count("name") || !kv.count("mode") || !kv.count("conninfo") || !kv.count("batch") ||
        !kv.count("table")) {
        std::fprintf(stderr,
                     "usage: %s --name A --mode fenced|plain --conninfo STR --batch N --table NAME "
                     "[--lease-ms N] [--wait-ms N] [--ready-file PATH] [--think-ms N] [--log FILE]\n",
                     argv[0]);
        std::exit(2);
    }
    Options o;
    g_name = kv["name"];
    o.mode = kv["mode"];
    if (o.mode != "fenced" && o.mode != "plain") {
        std::fprintf(stderr, "--mode is fenced or plain\n");
        std::exit(2);
    }
    o.conninfo = kv["conninfo"];
    o.table = kv["table"];
    o.batch = std::stol(kv["batch"]);
    if (kv.count("lease-ms")) o.lease_ms = std::stol(kv["lease-ms"]);
    if (kv.count("wait-ms")) o.wait_ms = std::stol(kv["wait-ms"]);
    if (kv.count("think-ms")) o.think_ms = std::stol(kv["think-ms"]);
    if (kv.count("ready-file")) o.ready_file = kv["ready-file"];
    if (kv.count("log") && !(g_log = std::fopen(kv["log"].c_str(), "a"))) {
        std::perror(kv["log"].c_str());
        std::exit(2);
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    const std::string resource = "settlement:" + std::to_string(o.batch);
    const std::string lease = std::to_string(o.lease_ms) + " ms";
    const bool fenced = o.mode == "fenced";

    PGconn* lock = connect(o.conninfo, "lock");
    PGconn* storage = connect(o.conninfo, "storage");

    // 1. The lock.
    std::string token;  // fenced mode: the fence token, as the decimal text the server sent
    auto asked = Clock::now();
    if (fenced) {
        Result r(exec(lock, "SELECT fencing.acquire($1, $2::interval, $3::interval)",
                      {resource, std::to_string(o.wait_ms) + " ms", lease}));
        if (!r.ok()) die("fencing.acquire: " + r.field(PG_DIAG_MESSAGE_PRIMARY));
        token = r.get(0, 0);
        double waited = since(asked);
        say("acquired " + resource + " with fence token " + token + " (lease " + seconds(o.lease_ms / 1000.0) + ")" +
            (waited > 0.2 ? ", after waiting " + seconds(waited) + " in fencing.acquire" : ""));
    } else {
        // SET resource me NX PX lease: take the row when it is absent or expired.
        const std::string sql =
            "INSERT INTO demo_plain_locks AS l (name, owner, expires_at) "
            "VALUES ($1, $2, clock_timestamp() + $3::interval) "
            "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
            "WHERE l.expires_at < clock_timestamp() RETURNING owner";
        bool got = false;
        int tries = 0;
        while (!got) {
            Result r(exec(lock, sql, {resource, g_name, lease}));
            if (!r.ok()) die("timed lock: " + r.field(PG_DIAG_MESSAGE_PRIMARY));
            got = PQntuples(r.r) == 1;
            ++tries;
            if (!got) {
                if (since(asked) * 1000 > o.wait_ms) die("timed lock not granted within the wait");
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        }
        double waited = since(asked);
        say("acquired " + resource + " as a timed lock (SET NX PX " + std::to_string(o.lease_ms) + ")" +
            (waited > 0.2 ? ", after polling for " + seconds(waited) : "") + "; no token");
    }

    // 2. Read and sum the batch (through the storage connection).
    long long rows = 0, total = 0;
    {
        Result r(exec(storage, "SELECT amount_cents FROM demo_transactions WHERE batch_id = $1",
                      {std::to_string(o.batch)}));
        if (!r.ok()) die("reading the batch: " + r.field(PG_DIAG_MESSAGE_PRIMARY));
        rows = PQntuples(r.r);
        for (int i = 0; i < rows; ++i) total += std::atoll(PQgetvalue(r.r, i, 0));
    }
    if (fenced) {
        // Still ours? (renew is also what keeps the lease while working)
        Result r(exec(lock, "SELECT fencing.renew($1)", {resource}));
        if (!r.ok()) {
            say("lost the lock while reading (" + r.sqlstate() + "); giving up");
            return 0;
        }
        say("read " + std::to_string(rows) + " transactions, total " + money(total) + "; lease renewed (" + r.get(0, 0) +
            " left)");
    } else {
        say("read " + std::to_string(rows) + " transactions, total " + money(total));
    }

    // 3. "Format the report": this is where the demo freezes the worker.
    if (!o.ready_file.empty()) std::ofstream(o.ready_file) << getpid() << "\n";
    auto think_start = Clock::now();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.think_ms);
    while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    double thought = since(think_start);
    if (thought * 1000 > o.think_ms + 1000)
        say("formatted the report (" + std::to_string(o.think_ms) + " ms of work took " + seconds(thought) +
            " of wall-clock time: the process was paused, and could not tell)");

    // 4. Write the summary through the storage connection.
    const std::string set =
        "status = 'settled', row_count = $2, total_cents = $3, written_by = $4, written_at = clock_timestamp()";
    std::string sql = "UPDATE " + o.table + " SET " + set + (fenced ? ", fence_token = $5" : "") + " WHERE batch_id = $1";
    std::vector<std::string> params = {std::to_string(o.batch), std::to_string(rows), std::to_string(total), g_name};
    if (fenced) params.push_back(token);
    say(std::string("writing the summary (") + std::to_string(rows) + " rows, " + money(total) + ")" +
        (fenced ? " with fence token " + token : "") + " through its storage connection");
    Result w(exec(storage, sql, params));
    if (!w.ok()) {
        if (fenced && w.sqlstate() == "23T01") {
            say("REJECTED by the database: SQLSTATE 23T01, " + w.field(PG_DIAG_MESSAGE_PRIMARY));
            say("  detail: " + w.field(PG_DIAG_MESSAGE_DETAIL));
            // What happened to the lock connection while it was frozen?
            Result p(exec(lock, "SELECT 1"));
            std::string why = PQerrorMessage(lock);
            why = why.substr(0, why.find('\n'));
            if (why.rfind("FATAL:", 0) == 0) why = why.substr(why.find_first_not_of(' ', 6));
            if (p.ok())
                say("its lock connection is still up, but the lock is gone");
            else
                say("its lock connection was ended by the server: " + (why.empty() ? std::string("closed") : why));
            say("it lost its lease while paused: it gives up, nothing written (exit 0)");
            PQfinish(storage);
            PQfinish(lock);
            return 0;
        }
        die("writing the summary: SQLSTATE " + w.sqlstate() + " " + w.field(PG_DIAG_MESSAGE_PRIMARY));
    }
    if (std::string(PQcmdTuples(w.r)) != "1") die("the batch row is missing");
    say("wrote the summary of batch " + std::to_string(o.batch) + (fenced ? " (token " + token + ")" : ""));

    // 5. Release.
    if (fenced) {
        Result r(exec(lock, "SELECT fencing.release($1)", {resource}));
        if (!r.ok()) die("fencing.release: " + r.field(PG_DIAG_MESSAGE_PRIMARY));
    } else {
        Result r(exec(lock, "DELETE FROM demo_plain_locks WHERE name = $1 AND owner = $2", {resource, g_name}));
        if (!r.ok()) die("releasing the timed lock: " + r.field(PG_DIAG_MESSAGE_PRIMARY));
        if (std::string(PQcmdTuples(r.r)) == "0") say("(its timed lock had expired and was taken by someone else meanwhile)");
    }
    say("released " + resource + ", done");
    PQfinish(storage);
    PQfinish(lock);
    return 0;
}
