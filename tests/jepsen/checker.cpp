// The checker: reads the histories of a run (DIR/history/*.log) and the final
// state of the database, and proves the fencing guarantees on them. Every
// violation found is written to DIR/violations.txt; the counts go to
// DIR/summary.txt and, as one line, to stdout.
//
// What it checks (see README.md for why each check is sound):
//   order          per row, in commit order (the row's val counter, bumped by
//                  every committed write), the tokens of the accepted writes
//                  strictly increase: no write accepted with a token <= one
//                  already committed on that row
//   stale-accepted a write acknowledged (ok) with a token <= the token of a
//                  write on the same row acknowledged before it began
//   validate       a write acknowledged although, before it began, the
//                  resource had been granted with a newer token (the
//                  validate() guard must have refused it)
//   lost-write     an acknowledged write whose log row is missing, or whose
//                  token is above the row's final token
//   commit-gap     the committed log of a row is not exactly val 1..N with N
//                  the row's final val, or the row's final token is not the
//                  token of its last commit
//   phantom        a committed log row of a write that failed, of a write
//                  whose process died before sending COMMIT, or of no write
//   mismatch       an acknowledged write whose log row or returned row
//                  differs from what the worker saw (token, val, stamp)
//   realtime       an acknowledged write committed before one acknowledged
//                  before it began (val order against real time)
//   unexpected     an error other than 23T01 (rejection), 55P03 (acquire wait
//                  elapsed) or a lost connection / terminated session
//   lock-lost      renew() raising 23T01, or release() returning false, on a
//                  session that is alive: a lock lost silently
//   acquire-order  per resource, a token not greater than one returned by an
//                  acquire that completed before this acquire began; or a
//                  token returned twice
//   current        fencing.current() below the row's token or below a token
//                  an acquire returned
//   reentrant      a nested acquire of a held resource returned another token
//   leaked-lock    acquire() raised 55P03 and the session holds the lock anyway
//   counter-order  over every resource, an acquire returned a token not
//                  greater than one returned by an acquire that completed
//                  before this acquire began (the counter is database-wide)
// Multi-node runs (--nodes; workers note the node and timeline of each
// connection):
//   zombie         a write acknowledged on a timeline after an acquire on a
//                  newer timeline had completed (an old primary that lives
//                  on acknowledged a commit), or an acquire there that
//                  returned a token not below that newer grant's (it may
//                  return tokens its standby confirmed ahead, all below
//                  every token of the newer timeline: stale from birth; they
//                  are exempt from counter-order and acquire-order)
//   node-diverged  a node's final jepsen_rows or jepsen_log differs from the
//                  primary's once it has replayed all the primary wrote
// and `current` compares fencing.current() only with tokens of acquires that
// completed before an acknowledged write began: a token whose fence state
// record no durable commit followed may be lost in a failover, as in a crash
// (docs/operations.md).
#include "common.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <dirent.h>

namespace jepsen {
namespace {

struct Op {
    std::string proc;
    std::string op;
    std::int64_t opid = 0;
    int resource = 0;
    long long token = 0;
    std::int64_t invoke_t = -1;
    std::int64_t complete_t = -1;
    std::string type = "none";  // ok | fail | info | none (no completion: the process died)
    std::string value;          // write: val on ok; renew/release: the result
    std::string code;
    std::string detail;
    std::string form;
    bool committing = false;    // write: COMMIT was about to be sent
    int node = 0;               // multi-node runs: the port and timeline of the
    int tl = 0;                 // server that acknowledged it (0: not noted)
};

// Splits " node <port> tl <timeline>" off an acknowledged operation's detail.
void take_where(Op& o) {
    const std::size_t p = o.detail.find(" node ");
    if (p == std::string::npos) return;
    std::istringstream in(o.detail.substr(p));
    std::string k1, k2;
    in >> k1 >> o.node >> k2 >> o.tl;
    o.detail.erase(p);
}

struct LogRow {
    int resource = 0;
    long long token = 0;
    long long val = 0;
    std::string worker;
    std::int64_t opid = 0;
    std::string form;
};

struct Violations {
    std::map<std::string, long> by_kind;
    std::vector<std::string> lines;
    void add(const std::string& kind, const std::string& what) {
        ++by_kind[kind];
        lines.push_back(kind + ": " + what);
    }
    long total() const {
        long n = 0;
        for (const auto& [k, v] : by_kind) n += v;
        return n;
    }
};

std::vector<std::string> split_tabs(const std::string& s) {
    std::vector<std::string> f;
    std::size_t start = 0;
    for (;;) {
        std::size_t p = s.find('\t', start);
        if (p == std::string::npos) {
            f.push_back(s.substr(start));
            return f;
        }
        f.push_back(s.substr(start, p - start));
        start = p + 1;
    }
}

long long to_ll(const std::string& s) { return s == "-" || s.empty() ? 0 : std::atoll(s.c_str()); }

std::string describe(const Op& o) {
    std::ostringstream s;
    s << o.proc << "#" << o.opid << " " << o.op << " r" << o.resource << " token " << o.token << " [" << o.type;
    if (!o.value.empty() && o.value != "-") s << " " << o.value;
    if (!o.code.empty() && o.code != "-") s << " " << o.code;
    s << "] invoked " << o.invoke_t << " completed " << o.complete_t;
    if (!o.form.empty()) s << " form " << o.form;
    return s.str();
}

}  // namespace

CheckResult check_run(const Config& cfg) {
    CheckResult out;
    const std::string hdir = cfg.dir + "/history";
    std::string mode = cfg.mode, profile = cfg.profile;
    int resources = cfg.resources;

    // ---- histories -------------------------------------------------------
    std::map<std::pair<std::string, std::int64_t>, Op> ops;
    long pauses = 0, kills = 0, terminations = 0, terminations_missed = 0, restarts = 0, backend_pauses = 0;
    long bad_lines = 0;
    DIR* d = opendir(hdir.c_str());
    if (!d) {
        std::cerr << "jepsen check: no history in " << hdir << std::endl;
        return out;
    }
    std::vector<std::string> files;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0) files.push_back(n);
    }
    closedir(d);
    for (const auto& fn : files) {
        std::ifstream in(hdir + "/" + fn);
        std::string line;
        while (std::getline(in, line)) {
            auto f = split_tabs(line);
            if (f.size() != 10) {
                ++bad_lines;  // a torn last line of a killed process: its op stays without completion
                continue;
            }
            const std::int64_t t = std::atoll(f[0].c_str());
            const std::string &proc = f[1], &type = f[2], &op = f[3];
            const std::int64_t opid = std::atoll(f[4].c_str());
            if (proc == "driver") {
                if (op == "restart") ++restarts;
                if (op == "start") {
                    std::istringstream s(f[9]);
                    std::string k, v;
                    while (s >> k >> v) {
                        if (k == "mode") mode = v;
                        if (k == "profile") profile = v;
                        if (k == "resources") resources = std::atoi(v.c_str());
                    }
                }
                continue;
            }
            if (proc == "nemesis") {
                if (type == "ok" && op == "pause") ++pauses;
                if (type == "ok" && op == "kill") ++kills;
                if (type == "ok" && op == "terminate") (f[7] == "t" ? terminations : terminations_missed)++;
                if (type == "ok" && op == "backend-pause") ++backend_pauses;
                continue;
            }
            if (type == "note") {
                if (op == "write" && f[7] == "committing") {
                    auto it = ops.find({proc, opid});
                    if (it != ops.end()) it->second.committing = true;
                }
                continue;
            }
            if (type == "invoke") {
                Op o;
                o.proc = proc;
                o.op = op;
                o.opid = opid;
                o.resource = std::atoi(f[5].c_str());
                o.token = to_ll(f[6]);
                o.invoke_t = t;
                if (op == "write") o.form = f[7];
                ops[{proc, opid}] = o;
                continue;
            }
            auto it = ops.find({proc, opid});
            if (it == ops.end()) {
                ++bad_lines;
                continue;
            }
            Op& o = it->second;
            o.type = type;
            o.complete_t = t;
            o.value = f[7];
            o.code = f[8];
            o.detail = f[9];
            if (op == "acquire" && type == "ok") o.token = to_ll(f[6]);
            if (type == "ok") take_where(o);
        }
    }
    if (ops.empty()) {
        std::cerr << "jepsen check: the history holds no operation" << std::endl;
        return out;
    }

    // ---- the database ----------------------------------------------------
    Conn c;
    std::string err;
    if (!c.connect(conninfo(cfg, cfg.admin_user, "jepsen-checker"), &err)) {
        std::cerr << "jepsen check: cannot connect: " << err << std::endl;
        return out;
    }
    // Wait until no worker backend is left: a backend of a killed worker may
    // still be finishing its COMMIT.
    for (int i = 0; i < 600; ++i) {
        Result r = c.exec(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE 'jepsen-w%'");
        if (r.ok && r.value() == "0") break;
        sleep_ms(100);
    }
    Result rows = c.exec("SELECT id, val, fence_token::bigint FROM jepsen_rows ORDER BY id");
    Result logr = c.exec("SELECT resource, token, val, worker, opid, form FROM jepsen_log ORDER BY resource, val");
    Result prot = c.exec("SELECT count(*) FROM fencing.protected WHERE tbl = 'jepsen_rows'::regclass");
    if (!rows.ok || !logr.ok || !prot.ok) {
        std::cerr << "jepsen check: cannot read the final state: " << rows.message << logr.message << prot.message
                  << std::endl;
        return out;
    }
    std::map<int, long long> current;
    for (int r = 1; r <= resources; ++r) {
        Result cur = c.exec("SELECT fencing.current($1)::bigint", {"jepsen:" + std::to_string(r)});
        current[r] = cur.ok ? to_ll(cur.value()) : -1;
    }
    {
        std::ofstream f(cfg.dir + "/db_rows.tsv");
        for (auto& row : rows.rows) f << row[0] << '\t' << row[1] << '\t' << row[2] << '\n';
        std::ofstream g(cfg.dir + "/db_log.tsv");
        for (auto& row : logr.rows)
            g << row[0] << '\t' << row[1] << '\t' << row[2] << '\t' << row[3] << '\t' << row[4] << '\t' << row[5]
              << '\n';
    }

    Violations v;
    if (mode == "real" && prot.value() != "1") v.add("setup", "jepsen_rows is not protected at the end of the run");

    // ---- classify operations --------------------------------------------
    long operations = 0, writes = 0, accepted = 0, rej_trigger = 0, rej_validate = 0, conn_aborted = 0;
    long unknown = 0, died_before_commit = 0, acquires = 0, acquire_timeouts = 0, acquire_lost = 0;
    long renews = 0, sessions_lost = 0;
    for (auto& [key, o] : ops) {
        ++operations;
        const bool conn = is_connection_code(o.code);
        if (o.op == "write") {
            ++writes;
            if (o.type == "ok") {
                ++accepted;
                if (o.detail != "stamped " + std::to_string(o.token))
                    v.add("mismatch", "the row was stamped with another token (" + o.detail + "): " + describe(o));
            } else if (o.type == "fail" && o.code == "23T01") {
                (o.detail.rfind("log:", 0) == 0 ? rej_validate : rej_trigger)++;
            } else if (o.type == "fail" && conn) {
                ++conn_aborted;
            } else if (o.type == "info" && conn) {
                ++unknown;
            } else if (o.type == "none") {
                (o.committing ? unknown : died_before_commit)++;
            } else {
                v.add("unexpected", describe(o) + ": " + o.detail);
            }
        } else if (o.op == "acquire") {
            if (o.type == "ok") ++acquires;
            else if (o.type == "fail" && o.code == "55P03") ++acquire_timeouts;
            else if (o.type == "none" || conn) ++acquire_lost;
            else v.add("unexpected", describe(o) + ": " + o.detail);
        } else if (o.op == "held-after-timeout") {
            if (o.type == "ok" && o.value != "0")
                v.add("leaked-lock", "acquire() raised 55P03 but the session holds the lock: " + describe(o));
            else if (o.type != "ok" && o.type != "none" && !conn)
                v.add("unexpected", describe(o) + ": " + o.detail);
        } else if (o.op == "reacquire") {
            if (o.type == "ok") {
                if (to_ll(o.value) != o.token)
                    v.add("reentrant", "a nested acquire returned another token: " + describe(o));
            } else if (o.type == "none" || conn) {
                ++sessions_lost;
            } else {
                v.add("unexpected", describe(o) + ": " + o.detail);
            }
        } else if (o.op == "renew" || o.op == "release") {
            if (o.op == "renew") ++renews;
            if (o.type == "ok") {
                if (o.op == "release" && o.value != "t")
                    v.add("lock-lost", "release() returned false on a live session: " + describe(o));
            } else if (o.type == "none" || conn) {
                ++sessions_lost;
            } else if (o.code == "23T01") {
                v.add("lock-lost", "renew() says the lock is not held on a live session: " + describe(o) + ": " +
                                       o.detail);
            } else {
                v.add("unexpected", describe(o) + ": " + o.detail);
            }
        }
    }

    // ---- committed log against the history ------------------------------
    std::map<int, std::vector<LogRow>> log_of;
    std::map<std::pair<std::string, std::int64_t>, std::vector<LogRow>> log_by_op;
    for (auto& row : logr.rows) {
        LogRow l;
        l.resource = std::atoi(row[0].c_str());
        l.token = to_ll(row[1]);
        l.val = to_ll(row[2]);
        l.worker = row[3];
        l.opid = std::atoll(row[4].c_str());
        l.form = row[5];
        log_of[l.resource].push_back(l);
        log_by_op[{l.worker, l.opid}].push_back(l);
    }
    std::map<int, std::pair<long long, long long>> final_row;  // id -> (val, token)
    for (auto& row : rows.rows) final_row[std::atoi(row[0].c_str())] = {to_ll(row[1]), to_ll(row[2])};

    long unknown_committed = 0;
    for (auto& [key, o] : ops) {
        if (o.op != "write") continue;
        auto it = log_by_op.find(key);
        const std::size_t n = it == log_by_op.end() ? 0 : it->second.size();
        if (n > 1) v.add("phantom", "committed " + std::to_string(n) + " times: " + describe(o));
        if (o.type == "ok") {
            if (n == 0) {
                v.add("lost-write", "acknowledged write has no log row: " + describe(o));
            } else {
                const LogRow& l = it->second.front();
                if (l.token != o.token || l.val != to_ll(o.value) || l.resource != o.resource)
                    v.add("mismatch", "log row (r" + std::to_string(l.resource) + ", token " +
                                          std::to_string(l.token) + ", val " + std::to_string(l.val) +
                                          ") differs from " + describe(o));
            }
            if (final_row[o.resource].second < o.token)
                v.add("lost-write", "final row token " + std::to_string(final_row[o.resource].second) +
                                        " is below acknowledged " + describe(o));
        } else if (o.type == "info" || (o.type == "none" && o.committing)) {
            if (n > 0) ++unknown_committed;
        } else if (n > 0) {
            v.add("phantom", "a write that " + std::string(o.type == "none" ? "never sent COMMIT" : "failed") +
                                 " is committed (val " + std::to_string(it->second.front().val) + "): " + describe(o));
        }
    }
    for (auto& [key, ls] : log_by_op) {
        auto it = ops.find(key);
        if (it == ops.end() || it->second.op != "write")
            v.add("phantom", "log row of no write in the history: " + key.first + "#" + std::to_string(key.second));
    }

    // ---- per row: commit order --------------------------------------------
    for (int r = 1; r <= resources; ++r) {
        auto& ls = log_of[r];
        std::sort(ls.begin(), ls.end(), [](const LogRow& a, const LogRow& b) { return a.val < b.val; });
        long long max_token = 0;
        std::string max_by;
        bool gap_reported = false;  // one report per row: after a gap every later val is off by one
        for (std::size_t i = 0; i < ls.size(); ++i) {
            const LogRow& l = ls[i];
            if (l.val != static_cast<long long>(i) + 1 && !gap_reported) {
                gap_reported = true;
                v.add("commit-gap", "row " + std::to_string(r) + ": commit #" + std::to_string(i + 1) + " has val " +
                                        std::to_string(l.val) + " (a commit missing or duplicated before it)");
            }
            if (l.token <= max_token)
                v.add("order", "row " + std::to_string(r) + ": token " + std::to_string(l.token) + " (" + l.worker +
                                   "#" + std::to_string(l.opid) + ", val " + std::to_string(l.val) +
                                   ") accepted after token " + std::to_string(max_token) + " (" + max_by +
                                   ") was committed");
            if (l.token > max_token) {
                max_token = l.token;
                max_by = l.worker + "#" + std::to_string(l.opid) + ", val " + std::to_string(l.val);
            }
        }
        auto fr = final_row.find(r);
        if (fr == final_row.end()) {
            v.add("commit-gap", "row " + std::to_string(r) + " is missing");
            continue;
        }
        if (fr->second.first != static_cast<long long>(ls.size()))
            v.add("commit-gap", "row " + std::to_string(r) + " has val " + std::to_string(fr->second.first) + " but " +
                                    std::to_string(ls.size()) + " committed writes");
        const long long last = ls.empty() ? 0 : ls.back().token;
        if (fr->second.second != last)
            v.add("commit-gap", "row " + std::to_string(r) + " holds token " + std::to_string(fr->second.second) +
                                    ", its last committed write token " + std::to_string(last));
        if (current[r] < fr->second.second)
            v.add("current", "fencing.current(r" + std::to_string(r) + ") = " + std::to_string(current[r]) +
                                 " is below the row's token " + std::to_string(fr->second.second));
    }

    // ---- real time --------------------------------------------------------
    // Per resource, a sweep over invocations and completions in time order;
    // at equal times invocations come first (a completion must be strictly
    // before an invocation to count as "before").
    struct Ev {
        std::int64_t t;
        int kind;  // 0 invoke, 1 complete
        const Op* o;
    };
    std::map<int, std::vector<Ev>> evs;
    std::vector<Ev> all;  // every acknowledged acquire and write, every resource
    std::set<long long> seen_tokens;
    std::set<int> nodes_seen, timelines_seen;
    std::int64_t last_ack_write_invoked = -1;
    for (auto& [key, o] : ops)
        if (o.type == "ok" && o.op == "write") last_ack_write_invoked = std::max(last_ack_write_invoked, o.invoke_t);
    for (auto& [key, o] : ops) {
        if (o.type != "ok" || (o.op != "write" && o.op != "acquire")) continue;
        evs[o.resource].push_back({o.invoke_t, 0, &o});
        evs[o.resource].push_back({o.complete_t, 1, &o});
        all.push_back({o.invoke_t, 0, &o});
        all.push_back({o.complete_t, 1, &o});
        if (o.node > 0) nodes_seen.insert(o.node);
        if (o.tl > 0) timelines_seen.insert(o.tl);
    }
    const bool multi_node = !cfg.nodes.empty() || nodes_seen.size() > 1 || timelines_seen.size() > 1;
    for (auto& [key, o] : ops) {
        if (o.type != "ok" || o.op != "acquire") continue;
        if (!seen_tokens.insert(o.token).second) v.add("acquire-order", "token returned twice: " + describe(o));
        // Across a failover, only a token some durable commit followed is
        // sure to have its fence state on the new primary.
        if (o.token > current[o.resource] && (!multi_node || o.complete_t < last_ack_write_invoked))
            v.add("current", "fencing.current(r" + std::to_string(o.resource) + ") = " +
                                 std::to_string(current[o.resource]) + " is below " + describe(o));
    }
    // Over every resource: the counter is database-wide, so an acquire that
    // began after another completed has the greater token; and (multi-node)
    // nothing is acknowledged on a timeline once a newer one granted a token.
    // An old primary that lives on after a newer one granted a token may
    // still hand out tokens its synchronous standby confirmed ahead (the
    // counter logs ahead): those are below every token of the newer timeline
    // (its counter starts above everything the standby confirmed), stale from
    // birth. Such a token must be below the newer timeline's grant; it is
    // exempt from the real-time orders. A write acknowledged there is a
    // violation: its commit needs a standby the old primary no longer has.
    std::set<const Op*> stale_born;
    std::sort(all.begin(), all.end(), [](const Ev& a, const Ev& b) { return a.t != b.t ? a.t < b.t : a.kind < b.kind; });
    {
        const Op *max_a = nullptr, *newest_tl = nullptr;
        for (const Ev& e : all) {
            const Op& o = *e.o;
            if (e.kind == 1) {
                if (stale_born.count(&o)) continue;
                if (o.op == "acquire" && (!max_a || o.token > max_a->token)) max_a = &o;
                if (o.op == "acquire" && o.tl > 0 && (!newest_tl || o.tl > newest_tl->tl)) newest_tl = &o;
                continue;
            }
            const bool old_tl = o.tl > 0 && newest_tl && newest_tl->tl > o.tl;
            if (old_tl && o.op == "acquire") {
                stale_born.insert(&o);
                if (o.token >= newest_tl->token)
                    v.add("zombie", describe(o) + " was granted on timeline " + std::to_string(o.tl) + " (node " +
                                        std::to_string(o.node) + ") after " + describe(*newest_tl) + " on timeline " +
                                        std::to_string(newest_tl->tl) + ", with a token not below it");
                continue;
            }
            if (old_tl)
                v.add("zombie", describe(o) + " was acknowledged on timeline " + std::to_string(o.tl) + " (node " +
                                    std::to_string(o.node) + ") after " + describe(*newest_tl) + " on timeline " +
                                    std::to_string(newest_tl->tl) + " (node " + std::to_string(newest_tl->node) + ")");
            if (o.op == "acquire" && max_a && max_a->token >= o.token)
                v.add("counter-order", describe(o) + " returned a token not above " + describe(*max_a));
        }
    }
    for (auto& [r, es] : evs) {
        std::sort(es.begin(), es.end(), [](const Ev& a, const Ev& b) {
            return a.t != b.t ? a.t < b.t : a.kind < b.kind;
        });
        const Op *max_w = nullptr, *max_val = nullptr, *max_a = nullptr;
        for (const Ev& e : es) {
            const Op& o = *e.o;
            if (e.kind == 1) {
                if (o.op == "write") {
                    if (!max_w || o.token > max_w->token) max_w = &o;
                    if (!max_val || to_ll(o.value) > to_ll(max_val->value)) max_val = &o;
                } else if (!max_a || o.token > max_a->token) {
                    max_a = &o;
                }
                continue;
            }
            if (o.op == "acquire") {
                if (max_a && max_a->token >= o.token && !stale_born.count(&o))
                    v.add("acquire-order", describe(o) + " returned a token not above " + describe(*max_a));
                continue;
            }
            if (max_w && max_w->token >= o.token)
                v.add("stale-accepted", describe(o) + " was accepted, but " + describe(*max_w) +
                                            " had been acknowledged before it began");
            if (max_val && to_ll(max_val->value) >= to_ll(o.value))
                v.add("realtime", describe(o) + " committed before " + describe(*max_val) +
                                      ", which was acknowledged before it began");
            if (max_a && max_a->token > o.token)
                v.add("validate", describe(o) + " was accepted, but the resource had been granted to " +
                                      describe(*max_a) + " before it began");
        }
    }

    // ---- every node (multi-node runs) ------------------------------------
    // Once a node has replayed everything the primary wrote, its rows must
    // be the primary's: nothing an old primary committed survives there.
    long nodes_compared = 0;
    if (!cfg.nodes.empty()) {
        auto digest_sql =
            "SELECT (SELECT md5(coalesce(string_agg(id || ':' || val || ':' || coalesce(fence_token::text, '-'), ',' "
            "ORDER BY id), '')) FROM jepsen_rows) || '/' || (SELECT md5(coalesce(string_agg(resource || ':' || "
            "token || ':' || val || ':' || worker || ':' || opid, ',' ORDER BY resource, val, worker, opid), '')) "
            "FROM jepsen_log)";
        Result mine = c.exec(digest_sql);
        Result lsn = c.exec("SELECT pg_current_wal_lsn()::text");
        std::istringstream ports(cfg.nodes);
        std::string port;
        while (std::getline(ports, port, ',')) {
            Conn n;
            std::string nerr;
            // An explicit host and port, and any role (PGTARGETSESSIONATTRS
            // may say read-write).
            if (!n.connect("host=127.0.0.1 port=" + port + " dbname=" + cfg.dbname + " user=" + cfg.admin_user +
                               " target_session_attrs=any application_name=jepsen-checker connect_timeout=10",
                           &nerr)) {
                v.add("node-diverged", "node " + port + ": cannot connect: " + nerr);
                continue;
            }
            bool caught_up = false;
            for (int i = 0; i < 300 && !caught_up; ++i) {
                Result r = n.exec("SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn",
                                  {lsn.value()});
                caught_up = r.ok && r.value() == "t";
                if (!caught_up) sleep_ms(100);
            }
            Result theirs = n.exec(digest_sql);
            ++nodes_compared;
            if (!caught_up)
                v.add("node-diverged", "node " + port + " did not replay up to the primary's " + lsn.value());
            else if (!theirs.ok || theirs.value() != mine.value())
                v.add("node-diverged", "node " + port + " holds other rows than the primary (" + theirs.value() +
                                           theirs.message + " vs " + mine.value() + ")");
        }
    }

    // ---- report -------------------------------------------------------------
    out.checked = true;
    out.violations = v.total();
    out.accepted = accepted;
    {
        std::ofstream f(cfg.dir + "/violations.txt");
        for (const auto& l : v.lines) f << l << '\n';
    }
    std::ostringstream kinds;
    for (const auto& [k, n] : v.by_kind) kinds << (kinds.tellp() > 0 ? ", " : "") << k << " " << n;
    std::ostringstream s;
    s << "jepsen " << mode << "/" << profile << ": " << operations << " operations, " << writes << " guarded writes: "
      << accepted << " accepted, " << (rej_trigger + rej_validate) << " rejected 23T01 (" << rej_trigger
      << " by the trigger, " << rej_validate << " by validate), " << conn_aborted << " aborted by a lost connection, "
      << died_before_commit << " killed before COMMIT, " << unknown << " unknown (" << unknown_committed
      << " committed); " << acquires << " grants, " << acquire_timeouts << " acquire timeouts, " << sessions_lost
      << " lock sessions lost; " << pauses << " pauses, " << kills << " kills, " << terminations
      << " backend terminations, " << backend_pauses << " backend pauses, " << restarts << " restarts; ";
    if (multi_node)
        s << nodes_seen.size() << " nodes, " << timelines_seen.size() << " timelines acknowledged operations, "
          << nodes_compared << " nodes compared; ";
    s << out.violations << " violations";
    if (out.violations > 0) s << " (" << kinds.str() << ")";
    {
        std::ofstream f(cfg.dir + "/summary.txt");
        f << s.str() << '\n';
        f << "renews " << renews << ", acquires lost " << acquire_lost << ", terminate misses " << terminations_missed
          << ", unparsable history lines " << bad_lines << '\n';
    }
    for (std::size_t i = 0; i < v.lines.size() && i < 10; ++i) std::cerr << "  " << v.lines[i] << '\n';
    if (v.lines.size() > 10) std::cerr << "  ... (" << v.lines.size() << " in " << cfg.dir << "/violations.txt)\n";
    std::cout << s.str() << std::endl;
    return out;
}

}  // namespace jepsen
