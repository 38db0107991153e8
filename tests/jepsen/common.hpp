// Shared pieces of the Jepsen-style history test: libpq wrapper, clock,
// history lines, configuration. See README.md in this directory.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace jepsen {

// Monotonic nanoseconds: one clock for every process of the run, so the
// histories of all workers and the nemesis order against each other.
inline std::int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline void sleep_ms(std::int64_t ms) {
    if (ms <= 0) return;
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

// One statement's outcome.
struct Result {
    bool ok = false;
    bool conn_lost = false;         // the connection is gone after this statement
    std::string sqlstate;           // "" when ok; "conn" when the server sent none
    std::string message;            // primary error message
    std::string cmd_status;         // PQcmdStatus on success
    std::vector<std::vector<std::string>> rows;
    std::string value(std::size_t r = 0, std::size_t c = 0) const {
        return r < rows.size() && c < rows[r].size() ? rows[r][c] : std::string();
    }
};

// SQLSTATEs and pseudo-codes that mean "the connection or session ended":
// a terminated backend (57P01), an idle-session timeout of a lease (57P05),
// a broken socket ("conn"), class 08.
inline bool is_connection_code(const std::string& s) {
    return s.compare(0, 4, "conn") == 0 || s == "57P01" || s == "57P02" || s == "57P03" || s == "57P05" || s == "25P03" ||
           (s.size() == 5 && s.compare(0, 2, "08") == 0);
}

class Conn {
public:
    // Multi-node runs: " node <port> tl <timeline>" of the server this
    // connection reached (set by Worker::ensure), appended to the details of
    // acknowledged operations.
    std::string where;

    Conn() = default;
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;
    ~Conn() { close(); }

    // conninfo is completed by libpq from PGHOST, PGPORT, PGUSER, ...
    bool connect(const std::string& conninfo, std::string* err = nullptr) {
        close();
        c_ = PQconnectdb(conninfo.c_str());
        if (PQstatus(c_) != CONNECTION_OK) {
            if (err) *err = PQerrorMessage(c_);
            close();
            return false;
        }
        PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);
        return true;
    }
    bool alive() const { return c_ != nullptr && PQstatus(c_) == CONNECTION_OK; }
    int backend_pid() const { return c_ ? PQbackendPID(c_) : 0; }
    void close() {
        if (c_) PQfinish(c_);
        c_ = nullptr;
        where.clear();
    }

    Result exec(const char* sql, const std::vector<std::string>& params = {}) {
        Result r;
        if (!alive()) {
            r.conn_lost = true;
            r.sqlstate = "conn";
            r.message = "not connected";
            return r;
        }
        std::vector<const char*> values;
        values.reserve(params.size());
        for (const auto& p : params) values.push_back(p.c_str());
        PGresult* res = PQexecParams(c_, sql, static_cast<int>(params.size()), nullptr,
                                     params.empty() ? nullptr : values.data(), nullptr, nullptr, 0);
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (res && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
            r.ok = true;
            r.cmd_status = PQcmdStatus(res);
            int nr = PQntuples(res), nc = PQnfields(res);
            r.rows.resize(nr);
            for (int i = 0; i < nr; ++i)
                for (int j = 0; j < nc; ++j) r.rows[i].push_back(PQgetisnull(res, i, j) ? "" : PQgetvalue(res, i, j));
        } else {
            const char* code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
            const char* msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
            r.sqlstate = code ? code : "conn";
            r.message = msg ? msg : PQerrorMessage(c_);
            if (PQstatus(c_) != CONNECTION_OK) r.conn_lost = true;
            if (r.conn_lost && !is_connection_code(r.sqlstate)) r.sqlstate = "conn:" + r.sqlstate;
        }
        if (res) PQclear(res);
        // A FATAL error may arrive after the result: look once more.
        if (!r.conn_lost && PQstatus(c_) != CONNECTION_OK) r.conn_lost = true;
        return r;
    }

private:
    PGconn* c_ = nullptr;
};

// Replaces tabs and newlines so that a field stays on its line.
inline std::string clean(std::string s) {
    for (char& ch : s)
        if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
    if (s.empty()) s = "-";
    return s;
}

// An append-only history file. One write(2) per line, no buffering, no fsync:
// a line is in the file (the page cache) as soon as write returns, so a
// SIGKILL loses at most the line being formatted.
//
// Line: time_ns proc type op opid resource token value code detail  (TAB-separated)
//   type: invoke | ok | fail | info | note
class History {
public:
    History() = default;
    History(const std::string& path, std::string proc) : proc_(std::move(proc)) {
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            perror(path.c_str());
            _exit(3);
        }
    }
    ~History() {
        if (fd_ >= 0) ::close(fd_);
    }
    History(const History&) = delete;
    History& operator=(const History&) = delete;

    void line(const char* type, const char* op, std::int64_t opid, long resource, long long token,
              const std::string& value, const std::string& code, const std::string& detail) {
        std::string s = std::to_string(now_ns());
        s += '\t';
        s += proc_;
        s += '\t';
        s += type;
        s += '\t';
        s += op;
        s += '\t';
        s += std::to_string(opid);
        s += '\t';
        s += resource > 0 ? std::to_string(resource) : "-";
        s += '\t';
        s += token > 0 ? std::to_string(token) : "-";
        s += '\t';
        s += clean(value);
        s += '\t';
        s += clean(code);
        s += '\t';
        s += clean(detail);
        s += '\n';
        const char* p = s.data();
        std::size_t left = s.size();
        while (left > 0) {
            ssize_t n = ::write(fd_, p, left);
            if (n < 0) {
                if (errno == EINTR) continue;
                _exit(3);
            }
            p += n;
            left -= static_cast<std::size_t>(n);
        }
    }

private:
    int fd_ = -1;
    std::string proc_;
};

// Worker phases published in shared memory for the nemesis.
enum Phase : int { kIdle = 0, kAcquiring = 1, kHolding = 2, kWriting = 3, kReleasing = 4 };

constexpr int kMaxWorkers = 128;

struct Slot {
    std::atomic<int> pid;
    std::atomic<int> incarnation;
    std::atomic<int> phase;
    std::atomic<int> resource;
    std::atomic<long long> token;
    std::atomic<int> paused;
    std::atomic<int> lock_backend;    // backend pids of the worker's sessions
    std::atomic<int> store_backend;
};

// Shared between driver, workers and nemesis (anonymous MAP_SHARED mapping).
struct Shared {
    std::atomic<int> stop;
    std::atomic<long long> attempts;   // writes with a definite outcome (accepted + rejected)
    std::atomic<long long> accepted;
    std::atomic<long long> rejected;
    Slot slots[kMaxWorkers];
};

struct Config {
    std::string mode = "real";        // real | control
    std::string profile = "quick";    // quick | long (labels only; numbers below)
    std::string dir;                  // output directory
    std::string dbname;               // database (PGHOST/PGPORT from the environment)
    // Multi-node runs (a cluster under an HA manager; PGHOST/PGPORT list every
    // node, PGTARGETSESSIONATTRS=read-write): the nodes' ports, comma-separated.
    // Workers then note the node and timeline of each connection, and the
    // checker compares every node's final rows with the primary's.
    std::string nodes;
    std::string admin_user = "postgres";
    std::string worker_user = "jepsen_worker";
    int workers = 10;
    int resources = 3;
    int sleep_max_ms = 200;           // random sleep inside the critical section: 0..sleep_max_ms
    int renew_every_ms = 100;         // renew the lease at most this far apart while sleeping
    int write_gap_max_ms = 20;        // random pause between the statements of a write transaction
    int lease_ms = 1000;
    int acquire_wait_ms = 3000;
    long long min_accepted = 600;     // stop once this many writes were accepted ...
    int min_seconds = 25;             // ... and at least this long has passed,
    int max_seconds = 90;             // or at this time limit in any case
    long long required_accepted = 500;  // fewer accepted writes than this fail the run
    // nemesis: mean intervals (each draw is uniform in [0.5, 1.5] x mean)
    int pause_every_ms = 2000;
    int max_paused = 2;               // workers paused at the same time
    int kill_every_ms = 5000;
    int term_every_ms = 3500;
    int pause_extra_min_ms = 1500;    // pause = lease + extra (extra uniform in [min, max])
    int pause_extra_max_ms = 2500;
    int backend_pause_every_ms = 6000; // SIGSTOP a backend waiting in acquire() past its wait (0: never)
    unsigned long long seed = 0;
    bool no_nemesis = false;
};

inline std::string conninfo(const Config& c, const std::string& user, const std::string& app) {
    return "dbname=" + c.dbname + " user=" + user + " application_name=" + app + " connect_timeout=10";
}

struct CheckResult {
    bool checked = false;        // false: the checker could not run (no history, no database)
    long violations = 0;
    long long accepted = 0;
};

// Implemented in checker.cpp: reads DIR/history/*.log and the database, writes
// DIR/violations.txt and DIR/summary.txt, prints the one-line summary.
CheckResult check_run(const Config& cfg);

}  // namespace jepsen
