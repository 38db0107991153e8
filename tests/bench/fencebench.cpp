// fencebench: the benchmark client of `make bench` (tests/scripts/bench.sh).
//
//   fencebench run VARIANT [--conninfo S] [--clients N] [--seconds S]
//                  [--warmup S] [--resources N] [--seed N] [--sync on|off]
//                  [--redis-port P] [--offset N]
//       Runs VARIANT's cycle in N client threads (one libpq connection each,
//       prepared statements, random resources "r1".."rN" drawn from a fixed
//       seed) for --warmup seconds unmeasured, then --seconds measured, and
//       prints one line of key=value pairs: ops, seconds, ops_per_s, p50_us,
//       p99_us, max_us, mean_us, fairness (longest wait / mean wait), retries,
//       and backend_cpu_us: on-CPU time of the clients' PostgreSQL backends
//       per operation during the measured phase (from /proc/PID/schedstat, so
//       the server must run on this machine; -1 when unreadable), plus
//       server_cpu_us: the same with the processes of --extra-pids added (the
//       bench passes the WAL writer and redis-server). Throughput on a shared
//       machine moves with the load; CPU per operation much less.
//
//   fencebench pair WORKLOAD [--conninfo S] [--clients N] [--seconds S]
//                   [--warmup S] [--offset N] [--slice N] [--resources N]
//                   [--seed N]
//       A single-row WORKLOAD (pair_insert, pair_delete) on two tables at once,
//       interleaved: each client runs --slice (32) statements on the table
//       with the no-op C trigger (<table>_noop), then as many on the
//       protected one (<table>), the first of the two alternating, and reads
//       its backend's on-CPU time between slices (after a pause in which the
//       backend goes idle, so that the kernel's count is up to date). Both
//       variants thus run at the same moments of the machine: their ratio
//       does not move with its load as that of separate runs does. Prints a
//       line per variant (variant=noop, variant=fencing): ops, ops_per_s
//       (clients / mean latency: the rate of that variant alone), p50_us,
//       p99_us, mean_us and backend_cpu_us. pair_cycle does the same with
//       --slice cycles of bare_cycle and of fence_cycle (variant=bare,
//       variant=fencing) on random resources.
//
//   fencebench exec [--conninfo S] SQL...
//       Runs each SQL statement in order on one connection and prints
//       "ms=<elapsed> cpu_ms=<backend on-CPU time>" per statement (used to
//       time bulk UPDATEs; cpu_ms is -1 when /proc of the backend is unreadable).
//
// Variants (the resource of a cycle is r<i>, its row is id = i):
//   fence_cycle   SELECT fencing.acquire($1); SELECT fencing.release($1)
//   recipe_cycle  pg_advisory_lock(hashtext($1)); UPDATE counters ... RETURNING
//                 token (autocommit); pg_advisory_unlock(hashtext($1))
//   bare_cycle    pg_advisory_lock(hashtext($1)); pg_advisory_unlock(...)
//   e2e_fencing   UPDATE items_a SET fence_token = fencing.acquire_xact($1),
//                 v = $2 WHERE id = $3   (one autocommit statement; items_a
//                 is protected by fencing.protect)
//   e2e_redis     Redis SET lock NX PX; INCR token; UPDATE items_b ... WHERE
//                 id = $3 AND fence_token < $2; Lua compare-and-delete
//   e2e_advisory  pg_advisory_lock(hashtext); UPDATE counters ... RETURNING;
//                 UPDATE items_c ... AND fence_token < $2; pg_advisory_unlock
//   acquire_lat   SELECT fencing.acquire_xact($1)   (autocommit)
//   bare_lat      SELECT pg_advisory_xact_lock(hashtext($1))  (autocommit)
//   hot_fencing   every client: fencing.acquire('hot'); fencing.release('hot')
//   hot_bare      every client: pg_advisory_lock / unlock of hashtext('hot')
//   single_update UPDATE single SET fence_token = fence_token + 1, v = v + 1
//                 WHERE id = $1   (the pgbench -M prepared script of suite B)
//   single_insert INSERT INTO single_ins (fence_token, v) VALUES (1000000, 0)
//                 (id from the table's sequence; suite G)
//   pair_insert   single_insert on single_ins_noop and single_ins (pair only)
//   pair_delete   single_delete on single_del_noop and single_del (pair only)
//   pair_cycle    bare_cycle and fence_cycle (pair only; variants bare, fencing)
//   single_delete BEGIN; SELECT fencing.use(2000000); DELETE FROM single_del
//                 WHERE id = $1; COMMIT   (ids --offset + client + clients * k,
//                 each once: the table must hold them; suite G)
//   delay_cycle   fence_cycle with lock_delay => '5 s'        (suite E)
//   shared_cycle  fence_cycle with shared => true
//   permit_cycle  fence_cycle with permits => 4
//   hot_shared    hot_fencing with shared => true (nobody waits)
//   hot_permits   hot_fencing with permits => 4
// For the hot_* variants the recorded latency is the wait of the acquire call;
// for the others it is the whole cycle.
#include <libpq-fe.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string conninfo = "";
    std::string variant;
    int clients = 2;
    double seconds = 3.0;
    double warmup = 0.5;
    long resources = 10000;
    long offset = 0;  // single_delete: the first id
    int slice = 32;   // pair: statements per variant between CPU readings
    unsigned long seed = 42;
    std::string sync = "";  // "", "on" or "off"
    int redis_port = 0;
    std::vector<int> extra_pids;  // server processes whose CPU counts too
};

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "fencebench: %s\n", msg.c_str());
    std::exit(2);
}

// ---------------------------------------------------------------- libpq ----
class Pg {
public:
    explicit Pg(const std::string& conninfo) {
        conn_ = PQconnectdb(conninfo.c_str());
        if (PQstatus(conn_) != CONNECTION_OK) die(std::string("connect: ") + PQerrorMessage(conn_));
    }
    ~Pg() { PQfinish(conn_); }
    int backend_pid() const { return PQbackendPID(conn_); }
    Pg(const Pg&) = delete;
    Pg& operator=(const Pg&) = delete;

    void exec(const char* sql) {
        PGresult* r = PQexec(conn_, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            std::string msg = std::string("exec: ") + sql + ": " + PQerrorMessage(conn_);
            PQclear(r);
            die(msg);
        }
        PQclear(r);
    }
    void prepare(const char* name, const char* sql, int nparams) {
        PGresult* r = PQprepare(conn_, name, sql, nparams, nullptr);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            std::string msg = std::string("prepare ") + name + ": " + PQerrorMessage(conn_);
            PQclear(r);
            die(msg);
        }
        PQclear(r);
    }
    // Runs a prepared statement; returns the first value of the first row
    // ("" when none) and the number of affected rows in *affected.
    std::string run(const char* name, std::initializer_list<const char*> params, long* affected = nullptr) {
        const char* values[8] = {};
        int n = 0;
        for (const char* p : params) values[n++] = p;
        PGresult* r = PQexecPrepared(conn_, name, n, values, nullptr, nullptr, 0);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            std::string msg = std::string("statement ") + name + ": " + PQerrorMessage(conn_);
            PQclear(r);
            die(msg);
        }
        std::string out;
        if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) out = PQgetvalue(r, 0, 0);
        if (affected) {
            const char* t = PQcmdTuples(r);
            *affected = (t && *t) ? std::atol(t) : 0;
        }
        PQclear(r);
        return out;
    }

private:
    PGconn* conn_ = nullptr;
};

// -------------------------------------------------------------- hiredis ----
class Redis {
public:
    explicit Redis(int port) {
        ctx_ = redisConnect("127.0.0.1", port);
        if (ctx_ == nullptr || ctx_->err) die(std::string("redis connect: ") + (ctx_ ? ctx_->errstr : "out of memory"));
    }
    ~Redis() { redisFree(ctx_); }
    Redis(const Redis&) = delete;
    Redis& operator=(const Redis&) = delete;

    redisReply* command(const char* fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        void* r = redisvCommand(ctx_, fmt, ap);
        va_end(ap);
        if (r == nullptr) die(std::string("redis: ") + ctx_->errstr);
        auto* reply = static_cast<redisReply*>(r);
        if (reply->type == REDIS_REPLY_ERROR) die(std::string("redis error: ") + reply->str);
        return reply;
    }

private:
    redisContext* ctx_ = nullptr;
};

const char* kReleaseLua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

// ------------------------------------------------------------- variants ----
enum class Phase : int { warmup = 0, measure = 1, stop = 2 };

struct Shared {
    std::atomic<int> phase{static_cast<int>(Phase::warmup)};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::atomic<int> finished{0};      // threads out of their loop (connections still open)
    std::atomic<bool> release{false};  // main has read the backends' CPU: disconnect
};

struct ThreadResult {
    std::vector<double> lat_us;  // recorded latencies, microseconds
    long ops = 0;
    long retries = 0;
    Clock::time_point last_end{};
};

class Client {
public:
    Client(const Options& o, int tid)
        : o_(o), tid_(tid), rng_(o.seed * 1000003ULL + static_cast<unsigned long>(tid)), dist_(1, o.resources) {}
    virtual ~Client() = default;
    virtual void prepare() = 0;
    // One cycle; returns the latency to record (microseconds), or < 0 to
    // record the whole cycle's duration.
    virtual double cycle() = 0;
    virtual int backend_pid() const { return 0; }
    long retries = 0;

protected:
    long pick() { return dist_(rng_); }
    const Options& o_;
    int tid_;
    std::mt19937_64 rng_;
    std::uniform_int_distribution<long> dist_;
};

class PgClient : public Client {
public:
    PgClient(const Options& o, int tid) : Client(o, tid), pg_(o.conninfo) {
        if (!o.sync.empty()) pg_.exec(("SET synchronous_commit = " + o.sync).c_str());
    }
    int backend_pid() const override { return pg_.backend_pid(); }

protected:
    Pg pg_;
};

class FenceCycle final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("acq", "SELECT fencing.acquire($1)", 1);
        pg_.prepare("rel", "SELECT fencing.release($1)", 1);
    }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        if (pg_.run("acq", {r.c_str()}).empty()) die("acquire returned null");
        if (pg_.run("rel", {r.c_str()}) != "t") die("release returned false");
        return -1;
    }
};

class RecipeCycle final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("lock", "SELECT pg_advisory_lock(hashtext($1))", 1);
        pg_.prepare("tok", "UPDATE counters SET token = token + 1 WHERE resource = $1 RETURNING token", 1);
        pg_.prepare("unlock", "SELECT pg_advisory_unlock(hashtext($1))", 1);
    }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        pg_.run("lock", {r.c_str()});
        if (pg_.run("tok", {r.c_str()}).empty()) die("counter row missing for " + r);
        pg_.run("unlock", {r.c_str()});
        return -1;
    }
};

class BareCycle final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("lock", "SELECT pg_advisory_lock(hashtext($1))", 1);
        pg_.prepare("unlock", "SELECT pg_advisory_unlock(hashtext($1))", 1);
    }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        pg_.run("lock", {r.c_str()});
        pg_.run("unlock", {r.c_str()});
        return -1;
    }
};

class E2eFencing final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("w", "UPDATE items_a SET fence_token = fencing.acquire_xact($1), v = $2 WHERE id = $3", 3);
    }
    double cycle() override {
        long i = pick();
        std::string r = "r" + std::to_string(i), id = std::to_string(i), v = std::to_string(++n_);
        long affected = 0;
        pg_.run("w", {r.c_str(), v.c_str(), id.c_str()}, &affected);
        if (affected != 1) die("fenced update of " + r + " wrote " + std::to_string(affected) + " rows");
        return -1;
    }

private:
    long n_ = 0;
};

class E2eRedis final : public PgClient {
public:
    E2eRedis(const Options& o, int tid) : PgClient(o, tid), redis_(o.redis_port) {}
    void prepare() override {
        pg_.prepare("w", "UPDATE items_b SET fence_token = $2, v = $1 WHERE id = $3 AND fence_token < $2", 3);
        redisReply* r = redis_.command("SCRIPT LOAD %s", kReleaseLua);
        sha_ = r->str;
        freeReplyObject(r);
    }
    double cycle() override {
        long i = pick();
        std::string lock = "lock:r" + std::to_string(i), tokkey = "token:r" + std::to_string(i);
        std::string me = "c" + std::to_string(tid_) + ":" + std::to_string(++n_);
        for (;;) {  // SET NX PX; on contention retry after 1 ms (kinder than the usual 50-200 ms)
            redisReply* r = redis_.command("SET %s %s NX PX 30000", lock.c_str(), me.c_str());
            bool ok = r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            if (ok) break;
            ++retries;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        redisReply* t = redis_.command("INCR %s", tokkey.c_str());
        std::string token = std::to_string(t->integer);
        freeReplyObject(t);
        std::string id = std::to_string(i), v = std::to_string(n_);
        long affected = 0;
        pg_.run("w", {v.c_str(), token.c_str(), id.c_str()}, &affected);
        if (affected != 1) die("fenced update of r" + id + " wrote " + std::to_string(affected) + " rows");
        redisReply* d = redis_.command("EVALSHA %s 1 %s %s", sha_.c_str(), lock.c_str(), me.c_str());
        freeReplyObject(d);
        return -1;
    }

private:
    Redis redis_;
    std::string sha_;
    long n_ = 0;
};

class E2eAdvisory final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("lock", "SELECT pg_advisory_lock(hashtext($1))", 1);
        pg_.prepare("tok", "UPDATE counters SET token = token + 1 WHERE resource = $1 RETURNING token", 1);
        pg_.prepare("w", "UPDATE items_c SET fence_token = $2, v = $1 WHERE id = $3 AND fence_token < $2", 3);
        pg_.prepare("unlock", "SELECT pg_advisory_unlock(hashtext($1))", 1);
    }
    double cycle() override {
        long i = pick();
        std::string r = "r" + std::to_string(i), id = std::to_string(i), v = std::to_string(++n_);
        pg_.run("lock", {r.c_str()});
        std::string token = pg_.run("tok", {r.c_str()});
        if (token.empty()) die("counter row missing for " + r);
        long affected = 0;
        pg_.run("w", {v.c_str(), token.c_str(), id.c_str()}, &affected);
        if (affected != 1) die("fenced update of " + r + " wrote " + std::to_string(affected) + " rows");
        pg_.run("unlock", {r.c_str()});
        return -1;
    }

private:
    long n_ = 0;
};

class AcquireLat final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override { pg_.prepare("acq", "SELECT fencing.acquire_xact($1)", 1); }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        if (pg_.run("acq", {r.c_str()}).empty()) die("acquire_xact returned null");
        return -1;
    }
};

class BareLat final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override { pg_.prepare("acq", "SELECT pg_advisory_xact_lock(hashtext($1))", 1); }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        pg_.run("acq", {r.c_str()});
        return -1;
    }
};

class HotFencing final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("acq", "SELECT fencing.acquire('hot')", 0);
        pg_.prepare("rel", "SELECT fencing.release('hot')", 0);
    }
    double cycle() override {
        auto t0 = Clock::now();
        if (pg_.run("acq", {}).empty()) die("acquire returned null");
        double wait = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        pg_.run("rel", {});
        return wait;
    }
};

class HotBare final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("acq", "SELECT pg_advisory_lock(hashtext('hot'))", 0);
        pg_.prepare("rel", "SELECT pg_advisory_unlock(hashtext('hot'))", 0);
    }
    double cycle() override {
        auto t0 = Clock::now();
        pg_.run("acq", {});
        double wait = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        pg_.run("rel", {});
        return wait;
    }
};

// fence_cycle with options: `acq` takes the resource, `rel` releases it.
class OptionCycle final : public PgClient {
public:
    OptionCycle(const Options& o, int tid, const char* acq) : PgClient(o, tid), acq_(acq) {}
    void prepare() override {
        pg_.prepare("acq", acq_, 1);
        pg_.prepare("rel", "SELECT fencing.release($1)", 1);
    }
    double cycle() override {
        std::string r = "r" + std::to_string(pick());
        if (pg_.run("acq", {r.c_str()}).empty()) die("acquire returned null");
        if (pg_.run("rel", {r.c_str()}) != "t") die("release returned false");
        return -1;
    }

private:
    const char* acq_;
};

// hot_fencing with options.
class HotOption final : public PgClient {
public:
    HotOption(const Options& o, int tid, const char* acq) : PgClient(o, tid), acq_(acq) {}
    void prepare() override {
        pg_.prepare("acq", acq_, 0);
        pg_.prepare("rel", "SELECT fencing.release('hot')", 0);
    }
    double cycle() override {
        auto t0 = Clock::now();
        if (pg_.run("acq", {}).empty()) die("acquire returned null");
        double wait = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (pg_.run("rel", {}) != "t") die("release returned false");
        return wait;
    }

private:
    const char* acq_;
};

class SingleUpdate final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("u", "UPDATE single SET fence_token = fence_token + 1, v = v + 1 WHERE id = $1", 1);
    }
    double cycle() override {
        std::string id = std::to_string(pick());
        long affected = 0;
        pg_.run("u", {id.c_str()}, &affected);
        if (affected != 1) die("update of id " + id + " wrote " + std::to_string(affected) + " rows");
        return -1;
    }
};

class SingleInsert final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override { pg_.prepare("i", "INSERT INTO single_ins (fence_token, v) VALUES (1000000, 0)", 0); }
    double cycle() override {
        long affected = 0;
        pg_.run("i", {}, &affected);
        if (affected != 1) die("insert wrote " + std::to_string(affected) + " rows");
        return -1;
    }
};

class SingleDelete final : public PgClient {
public:
    using PgClient::PgClient;
    void prepare() override {
        pg_.prepare("use", "SELECT fencing.use(2000000)", 0);
        pg_.prepare("d", "DELETE FROM single_del WHERE id = $1", 1);
    }
    double cycle() override {
        std::string id = std::to_string(o_.offset + tid_ + static_cast<long>(o_.clients) * n_++);
        long affected = 0;
        pg_.exec("BEGIN");
        pg_.run("use", {});
        pg_.run("d", {id.c_str()}, &affected);
        pg_.exec("COMMIT");
        if (affected != 1) die("delete of id " + id + " wrote " + std::to_string(affected) + " rows");
        return -1;
    }

private:
    long n_ = 0;
};

std::unique_ptr<Client> make_client(const Options& o, int tid) {
    const std::string& v = o.variant;
    if (v == "fence_cycle") return std::make_unique<FenceCycle>(o, tid);
    if (v == "recipe_cycle") return std::make_unique<RecipeCycle>(o, tid);
    if (v == "bare_cycle") return std::make_unique<BareCycle>(o, tid);
    if (v == "e2e_fencing") return std::make_unique<E2eFencing>(o, tid);
    if (v == "e2e_redis") return std::make_unique<E2eRedis>(o, tid);
    if (v == "e2e_advisory") return std::make_unique<E2eAdvisory>(o, tid);
    if (v == "acquire_lat") return std::make_unique<AcquireLat>(o, tid);
    if (v == "bare_lat") return std::make_unique<BareLat>(o, tid);
    if (v == "hot_fencing") return std::make_unique<HotFencing>(o, tid);
    if (v == "hot_bare") return std::make_unique<HotBare>(o, tid);
    if (v == "single_update") return std::make_unique<SingleUpdate>(o, tid);
    if (v == "single_insert") return std::make_unique<SingleInsert>(o, tid);
    if (v == "single_delete") return std::make_unique<SingleDelete>(o, tid);
    if (v == "delay_cycle") return std::make_unique<OptionCycle>(o, tid, "SELECT fencing.acquire($1, lock_delay => '5 s')");
    if (v == "shared_cycle") return std::make_unique<OptionCycle>(o, tid, "SELECT fencing.acquire($1, shared => true)");
    if (v == "permit_cycle") return std::make_unique<OptionCycle>(o, tid, "SELECT fencing.acquire($1, permits => 4)");
    if (v == "hot_shared") return std::make_unique<HotOption>(o, tid, "SELECT fencing.acquire('hot', shared => true)");
    if (v == "hot_permits") return std::make_unique<HotOption>(o, tid, "SELECT fencing.acquire('hot', permits => 4)");
    die("unknown variant " + v);
}

// On-CPU nanoseconds of a process so far, or -1.
long long cpu_ns(int pid) {
    if (pid <= 0) return -1;
    FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/schedstat").c_str(), "r");
    if (f == nullptr) return -1;
    long long ns = -1;
    if (std::fscanf(f, "%lld", &ns) != 1) ns = -1;
    std::fclose(f);
    return ns;
}

long long total_cpu_ns(const std::vector<int>& pids) {
    long long sum = 0;
    for (int p : pids) {
        long long ns = cpu_ns(p);
        if (ns < 0) return -1;
        sum += ns;
    }
    return sum;
}

long ops_total(const std::vector<ThreadResult>& results) {
    long n = 0;
    for (const auto& r : results) n += r.ops;
    return n;
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::size_t k = static_cast<std::size_t>(p * (v.size() - 1) + 0.5);
    std::nth_element(v.begin(), v.begin() + k, v.end());
    return v[k];
}

int cmd_run(const Options& o) {
    Shared shared;
    std::vector<ThreadResult> results(o.clients);
    std::vector<std::thread> threads;
    std::vector<int> pids(o.clients, 0);
    for (int t = 0; t < o.clients; ++t) {
        threads.emplace_back([&, t] {
            std::unique_ptr<Client> c = make_client(o, t);
            c->prepare();
            pids[t] = c->backend_pid();
            ThreadResult& res = results[t];
            res.lat_us.reserve(1 << 16);
            shared.ready.fetch_add(1);
            while (!shared.go.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
            for (;;) {
                int ph = shared.phase.load(std::memory_order_relaxed);
                if (ph == static_cast<int>(Phase::stop)) break;
                long retries_before = c->retries;
                auto t0 = Clock::now();
                double rec = c->cycle();
                auto t1 = Clock::now();
                if (ph == static_cast<int>(Phase::measure)) {
                    res.lat_us.push_back(rec >= 0 ? rec : std::chrono::duration<double, std::micro>(t1 - t0).count());
                    ++res.ops;
                    res.retries += c->retries - retries_before;
                    res.last_end = t1;
                }
            }
            shared.finished.fetch_add(1);
            while (!shared.release.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
    }
    while (shared.ready.load() < o.clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    shared.go.store(true);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
    long long cpu0 = total_cpu_ns(pids), extra0 = total_cpu_ns(o.extra_pids);
    auto start = Clock::now();
    shared.phase.store(static_cast<int>(Phase::measure));
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    shared.phase.store(static_cast<int>(Phase::stop));
    while (shared.finished.load() < o.clients) std::this_thread::sleep_for(std::chrono::microseconds(100));
    long long cpu1 = total_cpu_ns(pids), extra1 = total_cpu_ns(o.extra_pids);
    shared.release.store(true);
    for (auto& th : threads) th.join();
    double backend_cpu = cpu0 >= 0 && cpu1 >= cpu0 && ops_total(results) > 0 ? (cpu1 - cpu0) / 1000.0 / ops_total(results) : -1.0;
    double server_cpu = backend_cpu >= 0 && extra0 >= 0 && extra1 >= extra0
                            ? backend_cpu + (extra1 - extra0) / 1000.0 / ops_total(results)
                            : -1.0;

    std::vector<double> all;
    long ops = 0, retries = 0;
    Clock::time_point end = start;
    long min_client = -1, max_client = 0;
    for (auto& r : results) {
        all.insert(all.end(), r.lat_us.begin(), r.lat_us.end());
        ops += r.ops;
        retries += r.retries;
        if (r.ops > 0) end = std::max(end, r.last_end);
        min_client = min_client < 0 ? r.ops : std::min(min_client, r.ops);
        max_client = std::max(max_client, r.ops);
    }
    double secs = std::chrono::duration<double>(end - start).count();
    double sum = 0, mx = 0;
    for (double x : all) sum += x, mx = std::max(mx, x);
    double mean = all.empty() ? 0 : sum / all.size();
    double p50 = percentile(all, 0.50), p99 = percentile(all, 0.99);
    std::printf("variant=%s clients=%d ops=%ld seconds=%.3f ops_per_s=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f "
                "mean_us=%.1f fairness=%.2f retries=%ld client_min_ops=%ld client_max_ops=%ld backend_cpu_us=%.2f server_cpu_us=%.2f\n",
                o.variant.c_str(), o.clients, ops, secs, secs > 0 ? ops / secs : 0.0, p50, p99, mx, mean,
                mean > 0 ? mx / mean : 0.0, retries, min_client, max_client, backend_cpu, server_cpu);
    return ops > 0 ? 0 : 1;
}

// ----------------------------------------------------------------- pair ----
// A client of `pair`: one connection, the statement of either variant.
class PairClient {
public:
    PairClient(const Options& o, int tid) : o_(o), tid_(tid), pg_(o.conninfo) {
        if (o.variant == "pair_insert") {
            pg_.prepare("op0", "INSERT INTO single_ins_noop (fence_token, v) VALUES (1000000, 0)", 0);
            pg_.prepare("op1", "INSERT INTO single_ins (fence_token, v) VALUES (1000000, 0)", 0);
        } else if (o.variant == "pair_delete") {
            pg_.prepare("use", "SELECT fencing.use(2000000)", 0);
            pg_.prepare("op0", "DELETE FROM single_del_noop WHERE id = $1", 1);
            pg_.prepare("op1", "DELETE FROM single_del WHERE id = $1", 1);
        } else if (o.variant == "pair_cycle") {
            pg_.prepare("op0", "SELECT pg_advisory_lock(hashtext($1))", 1);
            pg_.prepare("end0", "SELECT pg_advisory_unlock(hashtext($1))", 1);
            pg_.prepare("op1", "SELECT fencing.acquire($1)", 1);
            pg_.prepare("end1", "SELECT fencing.release($1)", 1);
        } else {
            die("unknown pair workload " + o.variant);
        }
    }
    int backend_pid() const { return pg_.backend_pid(); }
    // One statement of variant V (0: no-op trigger, 1: fencing).
    void op(int v) {
        const char* name = v == 0 ? "op0" : "op1";
        long affected = 0;
        if (o_.variant == "pair_insert") {
            pg_.run(name, {}, &affected);
        } else if (o_.variant == "pair_cycle") {
            // One acquire-and-release cycle of a random resource.
            const std::string r = "r" + std::to_string(dist_(rng_));
            if (pg_.run(name, {r.c_str()}).empty() && v == 1) die("acquire returned null");
            if (pg_.run(v == 0 ? "end0" : "end1", {r.c_str()}) != "t") die("release returned false");
            affected = 1;
        } else {
            std::string id = std::to_string(o_.offset + tid_ + static_cast<long>(o_.clients) * n_[v]++);
            pg_.exec("BEGIN");
            pg_.run("use", {});
            pg_.run(name, {id.c_str()}, &affected);
            pg_.exec("COMMIT");
        }
        if (affected != 1) die(std::string(name) + " wrote " + std::to_string(affected) + " rows");
    }

private:
    const Options& o_;
    int tid_;
    Pg pg_;
    long n_[2] = {0, 0};
    std::mt19937_64 rng_{o_.seed * 1000003ULL + static_cast<unsigned long>(tid_)};
    std::uniform_int_distribution<long> dist_{1, o_.resources};
};

struct PairResult {
    std::vector<double> lat_us[2];
    long long cpu_ns[2] = {0, 0};
    bool cpu_unreadable = false;  // /proc of the backend (on another machine?)
};

int cmd_pair(const Options& o) {
    Shared shared;
    std::vector<PairResult> results(o.clients);
    std::vector<std::thread> threads;
    for (int t = 0; t < o.clients; ++t) {
        threads.emplace_back([&, t] {
            PairClient c(o, t);
            const int pid = c.backend_pid();
            PairResult& res = results[t];
            shared.ready.fetch_add(1);
            while (!shared.go.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
            // The backend's count, once it has gone idle after its last reply.
            auto idle_cpu = [pid] {
                std::this_thread::sleep_for(std::chrono::microseconds(300));
                return cpu_ns(pid);
            };
            long long before = idle_cpu();
            for (long pair = 0;; ++pair) {
                const int ph = shared.phase.load(std::memory_order_relaxed);
                if (ph == static_cast<int>(Phase::stop)) break;
                for (int k = 0; k < 2; ++k) {
                    const int v = static_cast<int>((pair + k) & 1);
                    for (int i = 0; i < o.slice; ++i) {
                        auto t0 = Clock::now();
                        c.op(v);
                        if (ph == static_cast<int>(Phase::measure))
                            res.lat_us[v].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
                    }
                    const long long after = idle_cpu();
                    if (before < 0 || after < before) res.cpu_unreadable = true;
                    if (ph == static_cast<int>(Phase::measure)) res.cpu_ns[v] += after - before;
                    before = after;
                }
            }
        });
    }
    while (shared.ready.load() < o.clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    shared.go.store(true);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
    shared.phase.store(static_cast<int>(Phase::measure));
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    shared.phase.store(static_cast<int>(Phase::stop));
    for (auto& th : threads) th.join();
    const char* names[2] = {o.variant == "pair_cycle" ? "bare" : "noop", "fencing"};
    for (int v = 0; v < 2; ++v) {
        std::vector<double> all;
        long long cpu = 0;
        bool unreadable = false;
        for (auto& r : results) {
            all.insert(all.end(), r.lat_us[v].begin(), r.lat_us[v].end());
            cpu += r.cpu_ns[v];
            unreadable = unreadable || r.cpu_unreadable;
        }
        if (all.empty()) die("no statement measured");
        double sum = 0;
        for (double x : all) sum += x;
        const double mean = sum / all.size();
        const double p50 = percentile(all, 0.50), p99 = percentile(all, 0.99);
        std::printf("variant=%s clients=%d ops=%zu ops_per_s=%.1f p50_us=%.1f p99_us=%.1f mean_us=%.1f "
                    "backend_cpu_us=%.2f\n",
                    names[v], o.clients, all.size(), o.clients * 1e6 / mean, p50, p99, mean,
                    unreadable ? -1.0 : cpu / 1000.0 / all.size());
    }
    return 0;
}

int cmd_exec(const Options& o, const std::vector<std::string>& sqls) {
    Pg pg(o.conninfo);
    const int pid = pg.backend_pid();
    for (const auto& s : sqls) {
        long long c0 = cpu_ns(pid);
        auto t0 = Clock::now();
        pg.exec(s.c_str());
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        long long c1 = cpu_ns(pid);
        std::printf("ms=%.3f cpu_ms=%.3f\n", ms, c0 >= 0 && c1 >= c0 ? (c1 - c0) / 1e6 : -1.0);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) die("usage: fencebench run VARIANT [options] | fencebench pair WORKLOAD [options] | fencebench exec [--conninfo S] SQL...");
    std::string cmd = argv[1];
    Options o;
    std::vector<std::string> positional;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value of " + a);
            return argv[++i];
        };
        if (a == "--conninfo") o.conninfo = next();
        else if (a == "--clients") o.clients = std::atoi(next().c_str());
        else if (a == "--seconds") o.seconds = std::atof(next().c_str());
        else if (a == "--warmup") o.warmup = std::atof(next().c_str());
        else if (a == "--resources") o.resources = std::atol(next().c_str());
        else if (a == "--offset") o.offset = std::atol(next().c_str());
        else if (a == "--slice") o.slice = std::atoi(next().c_str());
        else if (a == "--seed") o.seed = std::strtoul(next().c_str(), nullptr, 10);
        else if (a == "--sync") o.sync = next();
        else if (a == "--redis-port") o.redis_port = std::atoi(next().c_str());
        else if (a == "--extra-pids") {
            std::string list = next();
            for (std::size_t pos = 0; pos < list.size();) {
                std::size_t comma = list.find(',', pos);
                if (comma == std::string::npos) comma = list.size();
                int pid = std::atoi(list.substr(pos, comma - pos).c_str());
                if (pid > 0) o.extra_pids.push_back(pid);
                pos = comma + 1;
            }
        }
        else positional.push_back(a);
    }
    if (cmd == "run") {
        if (positional.size() != 1) die("run needs exactly one VARIANT");
        o.variant = positional[0];
        if (o.clients < 1 || o.resources < 1 || o.seconds <= 0) die("bad options");
        if (!o.sync.empty() && o.sync != "on" && o.sync != "off") die("--sync is on or off");
        if (o.variant == "e2e_redis" && o.redis_port <= 0) die("e2e_redis needs --redis-port");
        return cmd_run(o);
    }
    if (cmd == "pair") {
        if (positional.size() != 1) die("pair needs exactly one WORKLOAD");
        o.variant = positional[0];
        if (o.clients < 1 || o.seconds <= 0 || o.slice < 1) die("bad options");
        return cmd_pair(o);
    }
    if (cmd == "exec") return cmd_exec(o, positional);
    die("unknown command " + cmd);
}
