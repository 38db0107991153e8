// Jepsen-style history test of fencing: workers contend for a few resources,
// write protected rows with their tokens, while a nemesis pauses, kills and
// disconnects them; every operation goes to a history that checker.cpp judges
// together with the final database state. See README.md in this directory.
//
//   jepsen run   [options]   set up, run driver + workers + nemesis, then check
//   jepsen check [options]   check an existing output directory again
#include "common.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

namespace jepsen {
namespace {

const char* kResourcePrefix = "jepsen:";

std::string resource_name(int r) { return std::string(kResourcePrefix) + std::to_string(r); }

std::string worker_proc(int w, int inc) { return "w" + std::to_string(w) + "." + std::to_string(inc); }

std::string history_path(const Config& c, const std::string& proc) { return c.dir + "/history/" + proc + ".log"; }

[[noreturn]] void die(const std::string& msg) {
    std::cerr << "jepsen: " << msg << std::endl;
    std::exit(2);
}

// ---------------------------------------------------------------- setup ----

void must(Conn& c, const std::string& sql) {
    Result r = c.exec(sql.c_str());
    if (!r.ok) die("setup failed: " + sql + ": " + r.sqlstate + " " + r.message);
}

void setup_database(const Config& cfg) {
    Conn c;
    std::string err;
    if (!c.connect(conninfo(cfg, cfg.admin_user, "jepsen-setup"), &err)) die("cannot connect: " + err);
    must(c, "SET client_min_messages = warning");
    must(c, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '" + cfg.worker_user +
                "') THEN CREATE ROLE " + cfg.worker_user + " LOGIN; END IF; END $$");
    must(c, "CREATE EXTENSION IF NOT EXISTS fencing");
    must(c, "DROP TABLE IF EXISTS jepsen_log, jepsen_rows");
    must(c, "CREATE TABLE jepsen_rows (id int PRIMARY KEY, val bigint NOT NULL, fence_token fencing.token)");
    must(c, "INSERT INTO jepsen_rows SELECT g, 0, NULL FROM generate_series(1, " + std::to_string(cfg.resources) +
                ") g");
    // The append-only log: one row per committed write, in the same
    // transaction. No key: a duplicate would be data for the checker, not an
    // error for the worker.
    must(c,
         "CREATE TABLE jepsen_log (resource int NOT NULL, token bigint NOT NULL, val bigint NOT NULL, "
         "worker text NOT NULL, opid bigint NOT NULL, form text NOT NULL, "
         "committed_at timestamptz NOT NULL DEFAULT clock_timestamp())");
    must(c, "GRANT SELECT, INSERT, UPDATE ON jepsen_rows, jepsen_log TO " + cfg.worker_user);
    // PUBLIC has no USAGE on schema fencing: the worker role is granted it,
    // as the README's quick start does for an application role.
    must(c, "GRANT USAGE ON SCHEMA fencing TO " + cfg.worker_user);
    must(c, "SELECT fencing.protect('jepsen_rows')");
    if (cfg.mode == "control") {
        // The control run: the trigger removed, and no validate() guard.
        Result r = c.exec("SELECT fencing.unprotect('jepsen_rows')");
        if (!r.ok || r.value() != "t") die("control: unprotect failed: " + r.message);
        r = c.exec("SELECT count(*) FROM fencing.protected WHERE tbl = 'jepsen_rows'::regclass");
        if (!r.ok || r.value() != "0") die("control: jepsen_rows is still protected");
    } else {
        Result r = c.exec(
            "SELECT token_column, allow_equal, on_stale FROM fencing.protected WHERE tbl = 'jepsen_rows'::regclass");
        if (!r.ok || r.rows.size() != 1 || r.value(0, 0) != "fence_token" || r.value(0, 1) != "f" ||
            r.value(0, 2) != "error")
            die("jepsen_rows is not protected in strict mode");
    }
    // The first acquisition of each resource creates its fence state row.
    for (int i = 1; i <= cfg.resources; ++i) {
        must(c, "SELECT fencing.acquire('" + resource_name(i) + "')");
        must(c, "SELECT fencing.release('" + resource_name(i) + "')");
    }
}

// --------------------------------------------------------------- worker ----

struct Worker {
    const Config& cfg;
    Shared* sh;
    int w;
    int inc;
    Slot& slot;
    History h;
    std::mt19937_64 rng;
    Conn lock;   // the lock session (leased)
    Conn store;  // the storage session (writes)
    std::int64_t opid = 0;
    std::string proc;

    Worker(const Config& c, Shared* s, int w_, int inc_)
        : cfg(c), sh(s), w(w_), inc(inc_), slot(s->slots[w_]), h(history_path(c, worker_proc(w_, inc_)),
                                                                    worker_proc(w_, inc_)),
          rng(c.seed * 1000003ULL + static_cast<unsigned long long>(w_) * 7919ULL + static_cast<unsigned long long>(inc_)),
          proc(worker_proc(w_, inc_)) {}

    std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    }

    bool ensure(Conn& c, const char* role) {
        if (c.alive()) return true;
        std::string err;
        std::string app = "jepsen-" + proc + "-" + role;
        if (c.connect(conninfo(cfg, cfg.worker_user, app), &err)) {
            if (!cfg.nodes.empty()) {
                // Which node, on which timeline: a primary's timeline is
                // fixed while it runs, and a promotion starts a newer one.
                Result id = c.exec("SELECT inet_server_port(), ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), "
                                   "1, 8))::bit(32)::int");
                if (!id.ok) {
                    h.line("note", "connect", 0, 0, 0, role, id.sqlstate, "identity: " + id.message);
                    c.close();
                    return false;
                }
                c.where = " node " + id.value(0, 0) + " tl " + id.value(0, 1);
            }
            h.line("note", "connect", 0, 0, 0, role, "-", "backend " + std::to_string(c.backend_pid()) + c.where);
            return true;
        }
        h.line("note", "connect", 0, 0, 0, role, "conn", err);
        return false;
    }

    void finish(const char* op, std::int64_t id, int r, long long token, const Result& res, const std::string& value) {
        if (res.ok)
            h.line("ok", op, id, r, token, value, "-", "-");
        else
            h.line(res.conn_lost ? "info" : "fail", op, id, r, token, "-", res.sqlstate, res.message);
    }

    // Acquires r on conn c: the session-scoped acquire() on the lock session,
    // or acquire_xact() inside the storage session's open transaction.
    // Returns the token, or 0.
    long long acquire(Conn& c, int r, bool xact) {
        std::int64_t id = ++opid;
        h.line("invoke", "acquire", id, r, 0, xact ? "xact" : "session", "-", "-");
        Result res = c.exec(xact ? "SELECT fencing.acquire_xact($1, wait => $2::interval, lease => $3::interval)::bigint"
                                 : "SELECT fencing.acquire($1, wait => $2::interval, lease => $3::interval)::bigint",
                            {resource_name(r), std::to_string(cfg.acquire_wait_ms) + " ms",
                             std::to_string(cfg.lease_ms) + " ms"});
        if (!res.ok) {
            // A connection lost during acquire: the lock (if granted) went with
            // the session; the outcome is unknown.
            finish("acquire", id, r, 0, res, "-");
            if (res.conn_lost) c.close();
            if (res.sqlstate == "55P03" && !xact) check_not_held(r);
            return 0;
        }
        long long token = std::atoll(res.value().c_str());
        h.line("ok", "acquire", id, r, token, "-", "-", "backend " + std::to_string(c.backend_pid()) + c.where);
        return token;
    }

    // After acquire() failed with 55P03 the session must not hold the lock.
    void check_not_held(int r) {
        std::int64_t id = ++opid;
        h.line("invoke", "held-after-timeout", id, r, 0, "-", "-", "-");
        Result res = lock.exec(
            "SELECT count(*), coalesce(max(token::bigint), 0) FROM fencing.locks "
            "WHERE pid = pg_backend_pid() AND resource = $1 AND granted",
            {resource_name(r)});
        finish("held-after-timeout", id, r, 0, res, res.ok ? res.value(0, 0) : "-");
        if (res.conn_lost) lock.close();
    }

    // A nested acquire of a resource the session holds: the same token back.
    void reacquire(int r, long long token) {
        std::int64_t id = ++opid;
        h.line("invoke", "reacquire", id, r, token, "-", "-", "-");
        Result res = lock.exec("SELECT fencing.acquire($1, wait => $2::interval, lease => $3::interval, reentrant => true)::bigint",
                               {resource_name(r), std::to_string(cfg.acquire_wait_ms) + " ms",
                                std::to_string(cfg.lease_ms) + " ms"});
        finish("reacquire", id, r, token, res, res.ok ? res.value() : "-");
        if (res.conn_lost) lock.close();
    }

    void renew(Conn& c, int r, long long token) {
        std::int64_t id = ++opid;
        h.line("invoke", "renew", id, r, token, "-", "-", "-");
        Result res = c.exec("SELECT fencing.renew($1)", {resource_name(r)});
        finish("renew", id, r, token, res, res.ok ? res.value() : "-");
        if (res.conn_lost) c.close();
    }

    void release(int r, long long token) {
        std::int64_t id = ++opid;
        h.line("invoke", "release", id, r, token, "-", "-", "-");
        Result res = lock.exec("SELECT fencing.release($1)", {resource_name(r)});
        finish("release", id, r, token, res, res.ok ? res.value() : "-");
        if (res.conn_lost) lock.close();
    }

    void rollback() {
        if (store.alive()) {
            Result rb = store.exec("ROLLBACK");
            if (rb.conn_lost) store.close();
        }
    }

    // One guarded write: in one transaction, the row's read-modify-write
    // carrying the token, and the log append guarded by validate().
    //   form "update": UPDATE ... SET val = val + 1, fence_token = $t
    //   form "upsert": INSERT ... ON CONFLICT DO UPDATE SET ..., fence_token = excluded.fence_token
    //   form "setting": SET LOCAL fencing.token = $t; UPDATE ... SET val = val + 1 (the trigger stamps the token)
    // in_xact: the transaction is already open (it took the lock with acquire_xact).
    void write(int r, long long token, bool in_xact) {
        const bool control = cfg.mode == "control";
        const char* form = "update";
        if (!control) {
            std::int64_t f = uniform(0, 9);
            form = f < 6 ? "update" : f < 8 ? "upsert" : "setting";
        }
        const std::string rs = std::to_string(r), ts = std::to_string(token);
        std::int64_t id = ++opid;
        h.line("invoke", "write", id, r, token, form, "-", in_xact ? "xact" : "session");
        auto fail = [&](const Result& res, const char* stage) {
            // Before COMMIT was sent nothing can have committed: an error here,
            // even a lost connection, is a definite failure.
            h.line("fail", "write", id, r, token, "-", res.sqlstate, std::string(stage) + ": " + res.message);
            if (res.conn_lost)
                store.close();
            else
                rollback();
            if (res.sqlstate == "23T01") {
                sh->rejected.fetch_add(1);
                sh->attempts.fetch_add(1);
            }
        };
        Result res;
        if (!in_xact) {
            res = store.exec("BEGIN");
            if (!res.ok) return fail(res, "begin");
        }
        if (std::strcmp(form, "setting") == 0) {
            res = store.exec("SELECT set_config('fencing.token', $1, true)", {ts});
            if (!res.ok) return fail(res, "set_config");
        }
        const char* sql =
            std::strcmp(form, "upsert") == 0
                ? "INSERT INTO jepsen_rows AS t (id, val, fence_token) VALUES ($1::int, 1, $2::bigint) "
                  "ON CONFLICT (id) DO UPDATE SET val = t.val + 1, fence_token = excluded.fence_token "
                  "RETURNING val, fence_token::bigint"
            : std::strcmp(form, "setting") == 0
                ? "UPDATE jepsen_rows SET val = val + 1 WHERE id = $1::int RETURNING val, fence_token::bigint"
                : "UPDATE jepsen_rows SET val = val + 1, fence_token = $2::bigint WHERE id = $1::int "
                  "RETURNING val, fence_token::bigint";
        std::vector<std::string> params{rs};
        if (std::strcmp(form, "setting") != 0) params.push_back(ts);
        res = store.exec(sql, params);
        if (!res.ok) return fail(res, "row");
        if (res.rows.size() != 1) {
            Result bad;
            bad.sqlstate = "nrows";
            bad.message = "row write returned " + std::to_string(res.rows.size()) + " rows";
            return fail(bad, "row");
        }
        const std::string val = res.value(0, 0), stamped = res.value(0, 1);
        // Hold the row lock a little: a wider window for the nemesis.
        sleep_ms(uniform(0, cfg.write_gap_max_ms));
        const char* log_sql =
            control ? "INSERT INTO jepsen_log (resource, token, val, worker, opid, form) "
                      "VALUES ($1::int, $2::bigint, $3::bigint, $4, $5::bigint, $6)"
                    : "INSERT INTO jepsen_log (resource, token, val, worker, opid, form) "
                      "SELECT $1::int, $2::bigint, $3::bigint, $4, $5::bigint, $6 "
                      "WHERE fencing.validate($7, $2::bigint::fencing.token) IS NOT NULL";
        std::vector<std::string> lp{rs, ts, val, proc, std::to_string(id), form};
        if (!control) lp.push_back(resource_name(r));
        res = store.exec(log_sql, lp);
        if (!res.ok) return fail(res, "log");
        if (res.cmd_status != "INSERT 0 1") {
            Result bad;
            bad.sqlstate = "nrows";
            bad.message = "log append: " + res.cmd_status;
            return fail(bad, "log");
        }
        sleep_ms(uniform(0, cfg.write_gap_max_ms));
        // From here on a lost connection leaves the outcome unknown.
        h.line("note", "write", id, r, token, "committing", "-", "val " + val);
        res = store.exec("COMMIT");
        if (res.ok && res.cmd_status == "COMMIT") {
            h.line("ok", "write", id, r, token, val, "-", "stamped " + stamped + store.where);
            sh->accepted.fetch_add(1);
            sh->attempts.fetch_add(1);
            return;
        }
        if (res.ok) {  // COMMIT answered ROLLBACK
            h.line("fail", "write", id, r, token, "-", "rollback", "commit: " + res.cmd_status);
            return;
        }
        // A session that ends during COMMIT may or may not have committed.
        const bool unknown = res.conn_lost || is_connection_code(res.sqlstate);
        h.line(unknown ? "info" : "fail", "write", id, r, token, "-", res.sqlstate, "commit: " + res.message);
        if (unknown) store.close();
    }

    // The critical section's sleep, keeping the lease alive through c while
    // its session lives. A worker whose lock was lost (paused past its lease,
    // its backend terminated) does not notice and writes anyway: the stale
    // writer the fence must stop.
    void critical_sleep(Conn& c, int r, long long token) {
        std::int64_t left = uniform(0, cfg.sleep_max_ms);
        while (left > 0) {
            std::int64_t slice = std::min<std::int64_t>(left, cfg.renew_every_ms);
            sleep_ms(slice);
            left -= slice;
            if (left > 0 && c.alive()) renew(c, r, token);
        }
    }

    void publish(int phase, long long token) {
        slot.lock_backend.store(lock.backend_pid());
        slot.store_backend.store(store.backend_pid());
        slot.token.store(token);
        slot.phase.store(phase);
    }

    // Session style: lock session + storage session.
    void round_session(int r) {
        publish(kAcquiring, 0);
        long long token = acquire(lock, r, false);
        if (token == 0) {
            publish(kIdle, 0);
            sleep_ms(uniform(10, 100));
            return;
        }
        // Now and then a nested hold: the same token back, two releases.
        const bool nested = cfg.mode == "real" && uniform(0, 9) == 0;
        if (nested) reacquire(r, token);
        publish(kHolding, token);
        critical_sleep(lock, r, token);
        publish(kWriting, token);
        if (ensure(store, "store")) write(r, token, false);
        publish(kReleasing, token);
        if (lock.alive()) release(r, token);
        if (nested && lock.alive()) {
            renew(lock, r, token);  // still held once
            if (lock.alive()) release(r, token);
        }
        publish(kIdle, 0);
    }

    // Transaction style (behind a pooler): acquire_xact and the write in one
    // transaction of the storage session; the lock ends with it.
    void round_xact(int r) {
        publish(kAcquiring, 0);
        Result b = store.exec("BEGIN");
        if (!b.ok) {
            if (b.conn_lost) store.close();
            return;
        }
        long long token = acquire(store, r, true);
        if (token == 0) {
            rollback();
            publish(kIdle, 0);
            sleep_ms(uniform(10, 100));
            return;
        }
        publish(kHolding, token);
        critical_sleep(store, r, token);
        publish(kWriting, token);
        write(r, token, true);
        if (store.alive()) {
            // write() ended the transaction unless it failed without a
            // rollback; make sure nothing stays open.
            Result st = store.exec("ROLLBACK");
            if (st.conn_lost) store.close();
        }
        publish(kIdle, 0);
    }

    void run() {
        while (!sh->stop.load()) {
            if (!ensure(lock, "lock") || !ensure(store, "store")) {
                sleep_ms(200);
                continue;
            }
            int r = static_cast<int>(uniform(1, cfg.resources));
            slot.resource.store(r);
            if (cfg.mode == "real" && uniform(0, 4) == 0)
                round_xact(r);
            else
                round_session(r);
        }
        h.line("note", "exit", 0, 0, 0, "-", "-", "stop");
    }
};

// -------------------------------------------------------------- nemesis ----

struct Nemesis {
    const Config& cfg;
    Shared* sh;
    History h;
    std::mt19937_64 rng;
    Conn c;
    std::int64_t opid = 0;
    int term_wait = 0;
    bool cfg_backend_pauses_off = false;

    Nemesis(const Config& c_, Shared* s)
        : cfg(c_), sh(s), h(history_path(c_, "nemesis"), "nemesis"), rng(c_.seed * 31337ULL + 17ULL) {}

    std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    }
    std::int64_t next_after(std::int64_t mean_ms) { return now_ns() + uniform(mean_ms / 2, mean_ms * 3 / 2) * 1000000LL; }

    struct Paused {
        int w;
        int pid;
        std::int64_t until;
    };

    bool ensure_conn() {
        if (c.alive()) return true;
        std::string err;
        if (c.connect(conninfo(cfg, cfg.admin_user, "jepsen-nemesis"), &err)) return true;
        h.line("note", "terminate", 0, 0, 0, "-", "conn", err);
        return false;
    }

    int pick(const std::vector<int>& v) {
        return v[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(v.size()) - 1))];
    }

    // Terminates one backend: a third of the time a lock holder's session
    // (from fencing.locks), a third the storage session of a worker in the
    // middle of its write, else any worker backend.
    // A server-side pause: SIGSTOPs the backend of a worker session that is
    // waiting in acquire() for longer than its wait. The holder releases
    // meanwhile, the lock manager grants the lock to the stopped backend, and
    // when it resumes its wait has elapsed too: acquire() must then either
    // return the lock with a new token or fail without holding it. Needs the
    // nemesis to run as the cluster's OS user (as in make test); otherwise
    // skipped.
    bool pause_waiting_backend(std::int64_t* until, int* pid_out) {
        if (!ensure_conn()) return false;
        Result r = c.exec(
            "SELECT l.pid, a.application_name, l.resource FROM fencing.locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND l.resource LIKE 'jepsen:%' AND a.application_name LIKE 'jepsen-w%' "
            "ORDER BY random() LIMIT 1");
        if (!r.ok || r.rows.empty()) {
            if (r.conn_lost) c.close();
            return false;
        }
        int pid = std::atoi(r.value(0, 0).c_str());
        if (pid <= 0) return false;
        if (::kill(pid, SIGSTOP) != 0) {
            h.line("note", "backend-pause", 0, 0, 0, r.value(0, 1), std::to_string(errno),
                   "cannot signal backend " + r.value(0, 0) + ": backend pauses disabled");
            cfg_backend_pauses_off = true;
            return false;
        }
        std::int64_t ms = cfg.acquire_wait_ms + uniform(300, 800);
        *until = now_ns() + ms * 1000000LL;
        *pid_out = pid;
        h.line("ok", "backend-pause", ++opid, 0, 0, r.value(0, 1), "-",
               "pid " + r.value(0, 0) + " waiting for " + r.value(0, 2) + " ms " + std::to_string(ms));
        return true;
    }

    // Returns false to be called again soon (waiting for a writer to appear).
    bool terminate_one() {
        if (!ensure_conn()) return true;
        std::string pid, app, what;
        const std::int64_t kind = term_wait > 0 ? 1 : uniform(0, 2);
        if (kind == 1) {
            std::vector<int> cand;
            for (int w = 0; w < cfg.workers; ++w)
                if (sh->slots[w].phase.load() == kWriting && sh->slots[w].store_backend.load() > 0 &&
                    sh->slots[w].paused.load() == 0)
                    cand.push_back(w);
            if (!cand.empty()) {
                int w = pick(cand);
                pid = std::to_string(sh->slots[w].store_backend.load());
                app = "w" + std::to_string(w) + "-store (writing)";
                what = "r" + std::to_string(sh->slots[w].resource.load());
            } else if (term_wait < 50) {
                ++term_wait;
                return false;
            }
        }
        term_wait = 0;
        if (pid.empty()) {
            const char* q =
                kind == 0 ? "SELECT l.pid, a.application_name, l.resource FROM fencing.locks l "
                            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.granted AND l.resource LIKE 'jepsen:%' "
                            "ORDER BY random() LIMIT 1"
                          : "SELECT pid, application_name, '-' FROM pg_stat_activity "
                            "WHERE datname = current_database() AND application_name LIKE 'jepsen-w%' "
                            "ORDER BY random() LIMIT 1";
            Result r = c.exec(q);
            if (!r.ok || r.rows.empty()) {
                if (r.conn_lost) c.close();
                return true;
            }
            pid = r.value(0, 0);
            app = r.value(0, 1);
            what = r.value(0, 2);
        }
        std::int64_t id = ++opid;
        h.line("invoke", "terminate", id, 0, 0, app, "-", "pid " + pid + " " + what);
        Result t = c.exec("SELECT pg_terminate_backend($1::int)", {pid});
        if (t.ok)
            h.line("ok", "terminate", id, 0, 0, t.value(), "-", "pid " + pid);
        else
            h.line("fail", "terminate", id, 0, 0, "-", t.sqlstate, t.message);
        if (t.conn_lost) c.close();
        return true;
    }

    void run() {
        ensure_conn();
        std::vector<Paused> paused;
        int kill_wait = 0;
        std::int64_t next_pause = next_after(cfg.pause_every_ms);
        std::int64_t next_kill = next_after(cfg.kill_every_ms);
        std::int64_t next_term = next_after(cfg.term_every_ms);
        std::int64_t next_backend_pause = next_after(cfg.backend_pause_every_ms);
        bool backend_paused = false;
        std::int64_t backend_until = 0;
        int backend_pid = 0;
        while (!sh->stop.load()) {
            sleep_ms(20);
            std::int64_t t = now_ns();
            for (auto it = paused.begin(); it != paused.end();) {
                if (t >= it->until) {
                    ::kill(it->pid, SIGCONT);
                    sh->slots[it->w].paused.store(0);
                    h.line("ok", "resume", 0, 0, 0, "w" + std::to_string(it->w), "-", "pid " + std::to_string(it->pid));
                    it = paused.erase(it);
                } else {
                    ++it;
                }
            }
            if (t >= next_pause && static_cast<int>(paused.size()) < cfg.max_paused) {
                // A lock holder inside its critical section; now and then one
                // in the middle of its write transaction.
                const bool mid_write = uniform(0, 3) == 0;
                std::vector<int> cand;
                for (int w = 0; w < cfg.workers; ++w) {
                    int ph = sh->slots[w].phase.load();
                    if (sh->slots[w].pid.load() > 0 && sh->slots[w].paused.load() == 0 &&
                        (ph == kHolding || (mid_write && ph == kWriting)))
                        cand.push_back(w);
                }
                if (cand.empty()) {
                    next_pause = t + 50000000LL;
                } else {
                    int w = cand[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(cand.size()) - 1))];
                    int pid = sh->slots[w].pid.load();
                    int phase_before = sh->slots[w].phase.load();
                    if (pid > 0 && ::kill(pid, SIGSTOP) == 0) {
                        sh->slots[w].paused.store(1);
                        std::int64_t ms = cfg.lease_ms + uniform(cfg.pause_extra_min_ms, cfg.pause_extra_max_ms);
                        paused.push_back({w, pid, t + ms * 1000000LL});
                        sleep_ms(2);
                        h.line("ok", "pause", ++opid, sh->slots[w].resource.load(), sh->slots[w].token.load(),
                               "w" + std::to_string(w), "-",
                               "pid " + std::to_string(pid) + " ms " + std::to_string(ms) + " phase " +
                                   std::to_string(phase_before) + "/" + std::to_string(sh->slots[w].phase.load()));
                    }
                    next_pause = next_after(cfg.pause_every_ms);
                }
            }
            if (t >= next_kill) {
                // Half of the time a worker in the middle of its write.
                const bool writing = kill_wait > 0 || uniform(0, 1) == 0;
                std::vector<int> cand, any;
                for (int w = 0; w < cfg.workers; ++w) {
                    if (sh->slots[w].pid.load() <= 0 || sh->slots[w].paused.load() != 0) continue;
                    any.push_back(w);
                    if (sh->slots[w].phase.load() == kWriting) cand.push_back(w);
                }
                if (writing && cand.empty() && kill_wait < 50) {
                    ++kill_wait;  // wait up to a second for a writer
                } else {
                    kill_wait = 0;
                    if (!writing || cand.empty()) cand = any;
                }
                if (kill_wait == 0 && !cand.empty()) {
                    int w = pick(cand);
                    int pid = sh->slots[w].pid.load();
                    int phase = sh->slots[w].phase.load();
                    if (pid > 0 && ::kill(pid, SIGKILL) == 0)
                        h.line("ok", "kill", ++opid, sh->slots[w].resource.load(), sh->slots[w].token.load(),
                               "w" + std::to_string(w), "-",
                               "pid " + std::to_string(pid) + " phase " + std::to_string(phase));
                }
                if (kill_wait == 0) next_kill = next_after(cfg.kill_every_ms);
            }
            if (t >= next_term && terminate_one()) next_term = next_after(cfg.term_every_ms);
            if (cfg.backend_pause_every_ms > 0 && !cfg_backend_pauses_off && !backend_paused &&
                t >= next_backend_pause) {
                backend_paused = pause_waiting_backend(&backend_until, &backend_pid);
                next_backend_pause = backend_paused ? next_after(cfg.backend_pause_every_ms) : t + 100000000LL;
            }
            if (backend_paused && t >= backend_until) {
                ::kill(backend_pid, SIGCONT);
                backend_paused = false;
                h.line("ok", "backend-resume", 0, 0, 0, "-", "-", "pid " + std::to_string(backend_pid));
            }
        }
        if (backend_paused) {
            ::kill(backend_pid, SIGCONT);
            h.line("ok", "backend-resume", 0, 0, 0, "-", "-", "pid " + std::to_string(backend_pid) + " at stop");
        }
        for (const auto& p : paused) {
            ::kill(p.pid, SIGCONT);
            sh->slots[p.w].paused.store(0);
            h.line("ok", "resume", 0, 0, 0, "w" + std::to_string(p.w), "-", "pid " + std::to_string(p.pid) + " at stop");
        }
        h.line("note", "exit", 0, 0, 0, "-", "-", "stop");
    }
};

// --------------------------------------------------------------- driver ----

pid_t spawn_worker(const Config& cfg, Shared* sh, int w, int inc) {
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        {
            Worker wk(cfg, sh, w, inc);
            wk.run();
        }
        _exit(0);
    }
    sh->slots[w].incarnation.store(inc);
    sh->slots[w].pid.store(pid);
    return pid;
}

void run_driver(const Config& cfg) {
    mkdir(cfg.dir.c_str(), 0755);
    mkdir((cfg.dir + "/history").c_str(), 0755);
    setup_database(cfg);

    void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) die("mmap failed");
    std::memset(mem, 0, sizeof(Shared));
    Shared* sh = static_cast<Shared*>(mem);

    History dh(history_path(cfg, "driver"), "driver");
    {
        std::ostringstream o;
        o << "mode " << cfg.mode << " profile " << cfg.profile << " workers " << cfg.workers << " resources "
          << cfg.resources << " sleep_max_ms " << cfg.sleep_max_ms << " lease_ms " << cfg.lease_ms << " seed "
          << cfg.seed;
        dh.line("note", "start", 0, 0, 0, "-", "-", o.str());
    }
    signal(SIGPIPE, SIG_IGN);

    std::vector<int> incarnation(static_cast<std::size_t>(cfg.workers), 1);
    std::map<pid_t, int> worker_of;
    for (int w = 0; w < cfg.workers; ++w) worker_of[spawn_worker(cfg, sh, w, 1)] = w;

    pid_t nemesis = -1;
    if (!cfg.no_nemesis) {
        nemesis = fork();
        if (nemesis < 0) die("fork failed");
        if (nemesis == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            signal(SIGPIPE, SIG_IGN);
            {
                Nemesis n(cfg, sh);
                n.run();
            }
            _exit(0);
        }
    }

    const std::int64_t start = now_ns();
    std::int64_t last_progress = start;
    long restarts = 0;
    for (;;) {
        sleep_ms(50);
        // Reap dead workers (killed by the nemesis, or crashed) and restart
        // them. WNOWAIT first: the slot forgets the pid before it is reaped,
        // so the nemesis never signals a recycled pid.
        for (;;) {
            siginfo_t si;
            si.si_pid = 0;
            if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
            pid_t pid = si.si_pid;
            auto it = worker_of.find(pid);
            if (it != worker_of.end()) sh->slots[it->second].pid.store(0);
            int status = 0;
            waitpid(pid, &status, 0);
            if (it == worker_of.end()) {
                if (pid == nemesis) {
                    dh.line("note", "nemesis-exit", 0, 0, 0, "-", "-", "status " + std::to_string(status));
                    nemesis = -1;
                }
                continue;
            }
            int w = it->second;
            worker_of.erase(it);
            std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                  : "exit " + std::to_string(WEXITSTATUS(status));
            dh.line("note", "worker-exit", 0, 0, 0, worker_proc(w, incarnation[w]), "-", how);
            if (!sh->stop.load()) {
                ++restarts;
                int inc = ++incarnation[static_cast<std::size_t>(w)];
                worker_of[spawn_worker(cfg, sh, w, inc)] = w;
                dh.line("note", "restart", 0, 0, 0, worker_proc(w, inc), "-", "-");
            }
        }
        const std::int64_t t = now_ns();
        const double secs = static_cast<double>(t - start) / 1e9;
        const long long acc = sh->accepted.load();
        if (t - last_progress > 30000000000LL) {
            last_progress = t;
            std::cerr << "jepsen[" << cfg.mode << "," << cfg.profile << "]: " << static_cast<int>(secs) << " s, "
                      << sh->attempts.load() << " writes, " << acc << " accepted, " << sh->rejected.load()
                      << " rejected, " << restarts << " restarts" << std::endl;
        }
        if (!sh->stop.load() &&
            (secs >= cfg.max_seconds || (acc >= cfg.min_accepted && secs >= cfg.min_seconds))) {
            sh->stop.store(1);
            dh.line("note", "stop", 0, 0, 0, "-", "-",
                    "after " + std::to_string(secs) + " s, accepted " + std::to_string(acc));
            break;
        }
    }

    // Stop: the nemesis resumes whoever it paused; workers finish their
    // current operation. Stragglers are killed after a grace period.
    const std::int64_t grace_until = now_ns() + 20000000000LL;
    while ((!worker_of.empty() || nemesis > 0) && now_ns() < grace_until) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            sleep_ms(50);
            continue;
        }
        if (pid == nemesis) {
            nemesis = -1;
            continue;
        }
        auto it = worker_of.find(pid);
        if (it != worker_of.end()) {
            sh->slots[it->second].pid.store(0);
            worker_of.erase(it);
        }
    }
    for (auto& [pid, w] : worker_of) {
        ::kill(pid, SIGCONT);
        ::kill(pid, SIGKILL);
        dh.line("note", "straggler-killed", 0, 0, 0, worker_proc(w, incarnation[w]), "-", "-");
    }
    if (nemesis > 0) ::kill(nemesis, SIGKILL);
    while (waitpid(-1, nullptr, 0) > 0) {
    }
    dh.line("note", "end", 0, 0, 0, "-", "-", "restarts " + std::to_string(restarts));
}

// ----------------------------------------------------------------- main ----

void usage() {
    std::cerr << "usage: jepsen run|check --dir DIR --db DBNAME [--mode real|control] [--profile quick|long]\n"
                 "       [--workers N] [--resources N] [--sleep-max-ms N] [--lease-ms N] [--min-accepted N]\n"
                 "       [--min-seconds N] [--max-seconds N] [--pause-every-ms N] [--kill-every-ms N]\n"
                 "       [--term-every-ms N] [--max-paused N] [--pause-extra-min-ms N] [--pause-extra-max-ms N]\n"
                 "       [--renew-every-ms N] [--write-gap-max-ms N] [--backend-pause-every-ms N] [--seed N]\n"
                 "       [--nodes PORT,PORT,...] [--no-nemesis]\n";
    std::exit(2);
}

}  // namespace
}  // namespace jepsen

int main(int argc, char** argv) {
    using namespace jepsen;
    if (argc < 2) usage();
    std::string cmd = argv[1];
    Config cfg;
    cfg.seed = static_cast<unsigned long long>(now_ns());
    bool profile_set = false;
    std::vector<std::pair<std::string, std::string>> opts;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--no-nemesis") {
            cfg.no_nemesis = true;
            continue;
        }
        if (a.rfind("--", 0) != 0 || i + 1 >= argc) usage();
        opts.emplace_back(a.substr(2), argv[++i]);
    }
    // The profile first: it sets defaults the other options override.
    for (auto& [k, v] : opts) {
        if (k != "profile") continue;
        profile_set = true;
        cfg.profile = v;
        if (v == "long") {
            cfg.workers = 40;
            cfg.resources = 24;
            cfg.sleep_max_ms = 2000;
            cfg.renew_every_ms = 400;
            cfg.write_gap_max_ms = 50;
            cfg.min_accepted = 10200;
            cfg.required_accepted = 10000;
            cfg.min_seconds = 60;
            cfg.max_seconds = 840;
            cfg.pause_every_ms = 3000;
            cfg.kill_every_ms = 6000;
            cfg.term_every_ms = 4000;
            cfg.backend_pause_every_ms = 8000;
        } else if (v != "quick") {
            usage();
        }
    }
    (void)profile_set;
    for (auto& [k, v] : opts) {
        if (k == "profile") continue;
        else if (k == "dir") cfg.dir = v;
        else if (k == "db") cfg.dbname = v;
        else if (k == "mode") cfg.mode = v;
        else if (k == "workers") cfg.workers = std::atoi(v.c_str());
        else if (k == "resources") cfg.resources = std::atoi(v.c_str());
        else if (k == "sleep-max-ms") cfg.sleep_max_ms = std::atoi(v.c_str());
        else if (k == "lease-ms") cfg.lease_ms = std::atoi(v.c_str());
        else if (k == "min-accepted") cfg.min_accepted = cfg.required_accepted = std::atoll(v.c_str());
        else if (k == "min-seconds") cfg.min_seconds = std::atoi(v.c_str());
        else if (k == "max-seconds") cfg.max_seconds = std::atoi(v.c_str());
        else if (k == "pause-every-ms") cfg.pause_every_ms = std::atoi(v.c_str());
        else if (k == "kill-every-ms") cfg.kill_every_ms = std::atoi(v.c_str());
        else if (k == "term-every-ms") cfg.term_every_ms = std::atoi(v.c_str());
        else if (k == "write-gap-max-ms") cfg.write_gap_max_ms = std::atoi(v.c_str());
        else if (k == "renew-every-ms") cfg.renew_every_ms = std::atoi(v.c_str());
        else if (k == "pause-extra-min-ms") cfg.pause_extra_min_ms = std::atoi(v.c_str());
        else if (k == "pause-extra-max-ms") cfg.pause_extra_max_ms = std::atoi(v.c_str());
        else if (k == "backend-pause-every-ms") cfg.backend_pause_every_ms = std::atoi(v.c_str());
        else if (k == "max-paused") cfg.max_paused = std::atoi(v.c_str());
        else if (k == "nodes") cfg.nodes = v;
        else if (k == "seed") cfg.seed = std::strtoull(v.c_str(), nullptr, 10);
        else usage();
    }
    if (cfg.dir.empty() || cfg.dbname.empty()) usage();
    if (cfg.mode != "real" && cfg.mode != "control") usage();
    if (cfg.workers < 2 || cfg.workers > kMaxWorkers || cfg.resources < 1) usage();
    if (cmd == "run") {
        run_driver(cfg);
    } else if (cmd != "check") {
        usage();
    }
    CheckResult res = check_run(cfg);
    if (!res.checked) return 2;
    if (res.violations > 0) return 1;
    if (res.accepted < cfg.required_accepted) {
        std::cerr << "jepsen: only " << res.accepted << " writes accepted, fewer than the " << cfg.required_accepted
                  << " this profile requires" << std::endl;
        return 3;
    }
    return 0;
}
