#!/usr/bin/env python3
"""Fencing under Patroni: tokens and fenced writes across switchovers,
failovers and a zombie primary.

    ha.py --dir DIR [--profile quick|long] [--seed N]

Starts one etcd and three Patroni nodes on loopback (data directories, ports
and REST ports of their own, all as the calling user), with strict
synchronous mode, use_pg_rewind and fencing.require_sync_standby = on, on the
PostgreSQL whose binaries are in PGBIN (or first on PATH). Clients connect
with a multi-host connection string and target_session_attrs=read-write.
Prints TAP (one assertion per line, "ok N - ..."), then a summary line:

    ha <profile>: N failovers (S switchovers, K SIGKILL, Z zombie), T tokens
    checked, W writes checked, V violations; control: ...

Scenarios (see docs/operations.md, "Running under Patroni"):
  standbys      acquire on every replica answers 25006
  sync wait     the synchronous standby stops confirming: acquire waits; a
                statement_timeout ends the wait with 57014, no lock held
  switchover    patronictl switchover while workers acquire and write
  kill          SIGKILL of the primary's postmaster and its Patroni
  zombie        SIGSTOP of the primary (postmaster, every backend, Patroni)
                until another node leads, then SIGCONT
  jepsen        (long) tests/jepsen through switchovers, kills and zombies,
                checked as a multi-node history
  control       synchronous_mode off: require_sync_standby refuses to issue
                tokens; with it off, an asynchronous failover loses
                acknowledged fenced writes and fence state

After each switchover, failover or zombie: every token an acquisition
returned after it exceeds every token returned before it (indeed every
acquisition's token exceeds the token of every acquisition that completed
before it began), a write with a pre-failover token is rejected (23T01),
every acknowledged write is on the new primary, and the old primary rejoins
as a replica (the zombie and a killed primary through pg_rewind where their
WAL diverged). At the end every node holds the same rows.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg2

DB = "fencing_ha"
SCOPE = "fencing-ha"


# ---------------------------------------------------------------- TAP ----

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag=None):
        self.n += 1
        print(("ok" if cond else "not ok") + f" {self.n} - {name}", flush=True)
        if not cond:
            self.failed += 1
            if diag:
                for line in str(diag).splitlines()[:30]:
                    print(f"# {line}", flush=True)
        return cond

    def note(self, msg):
        print(f"# {msg}", flush=True)


tap = Tap()


def log(msg):
    print(f"# [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def children_of(pid):
    """Every descendant process of pid (from /proc)."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def signal_quietly(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


def pgcode(e):
    return getattr(e, "pgcode", None)


# ------------------------------------------------------------ cluster ----

class Node:
    def __init__(self, cl, i, pg_port, rest_port):
        self.cl, self.i, self.name = cl, i, f"node{i}"
        self.port, self.rest = pg_port, rest_port
        self.dir = os.path.join(cl.dir, self.name)
        self.data = os.path.join(self.dir, "data")
        self.cfg = os.path.join(self.dir, "patroni.yml")
        self.proc = None

    def write_config(self):
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o700)
        cfg = {
            "scope": SCOPE,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest}", "connect_address": f"127.0.0.1:{self.rest}"},
            # etcd's v2 API: Patroni 3.0's etcd3 client renews the leader
            # key after its lease expired with an unconditional put, so a
            # primary that was paused past the TTL takes the key back from
            # the new primary when it wakes up, and the new primary's
            # acknowledged writes are rewound away (the zombie scenario
            # shows it). Its v2 client compares the key's value first.
            "etcd": {"hosts": f"127.0.0.1:{self.cl.etcd_port}"},
            "bootstrap": {
                "dcs": self.cl.dcs_config(),
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.port}",
                "connect_address": f"127.0.0.1:{self.port}",
                "data_dir": self.data,
                "bin_dir": self.cl.pgbin,
                "pgpass": os.path.join(self.dir, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                },
                "parameters": {"unix_socket_directories": self.dir},
                "pg_hba": [
                    "local all all trust",
                    "host replication replicator 127.0.0.1/32 trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
            "watchdog": {"mode": "off"},
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }
        # JSON is YAML.
        with open(self.cfg, "w") as f:
            json.dump(cfg, f, indent=2)

    def start(self):
        logf = open(os.path.join(self.dir, "patroni.log"), "ab")
        env = dict(os.environ, PATH=self.cl.pgbin + ":" + os.environ.get("PATH", ""))
        self.proc = subprocess.Popen(["patroni", self.cfg], stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        logf.close()
        self.cl.note_pid(self.proc.pid)

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if os.path.exists(f"/proc/{pid}") else None

    def patroni_alive(self):
        return self.proc is not None and self.proc.poll() is None

    def rest_get(self, path, timeout=2):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.rest}{path}", timeout=timeout) as r:
            return json.loads(r.read().decode())

    def dsn(self, **kw):
        d = dict(host="127.0.0.1", port=self.port, dbname=DB, user="postgres", connect_timeout=3,
                 application_name="ha-admin")
        d.update(kw)
        return d

    def connect(self, **kw):
        c = psycopg2.connect(**self.dsn(**kw))
        c.autocommit = True
        return c

    def query(self, sql, args=None, **kw):
        c = self.connect(**kw)
        try:
            cur = c.cursor()
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def log_text(self):
        try:
            with open(os.path.join(self.dir, "patroni.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class Cluster:
    def __init__(self, workdir, pgbin):
        self.dir = workdir
        self.pgbin = pgbin
        ports = free_ports(8)
        self.etcd_port, self.etcd_peer = ports[0], ports[1]
        self.nodes = [Node(self, i + 1, ports[2 + 2 * i], ports[3 + 2 * i]) for i in range(3)]
        self.etcd = None
        self.stopped = set()  # pids we SIGSTOPped and have not resumed

    def dcs_config(self):
        return {
            "ttl": 10, "loop_wait": 2, "retry_timeout": 4,
            "maximum_lag_on_failover": 16 * 1024 * 1024,
            "synchronous_mode": True,
            "synchronous_mode_strict": True,
            "postgresql": {
                "use_pg_rewind": True,
                "use_slots": True,
                "parameters": {
                    "wal_level": "replica",
                    "hot_standby": "on",
                    "wal_log_hints": "on",
                    "max_wal_senders": 10,
                    "max_replication_slots": 10,
                    "max_connections": 100,
                    "max_locks_per_transaction": 128,
                    # leases and lock-delays need the supervisor
                    "shared_preload_libraries": "fencing",
                    "fencing.require_sync_standby": "on",
                    # Small counter windows: failovers meet every point of
                    # the hand-over from one counter record to the next.
                    "fencing.log_ahead": 16,
                    "log_min_messages": "warning",
                },
            },
        }

    def multi_dsn(self, **kw):
        d = dict(host=",".join("127.0.0.1" for _ in self.nodes), port=",".join(str(n.port) for n in self.nodes),
                 dbname=DB, user="postgres", target_session_attrs="read-write", connect_timeout=2)
        d.update(kw)
        return d

    def start(self):
        ed = os.path.join(self.dir, "etcd")
        os.makedirs(ed, exist_ok=True)
        os.chmod(ed, 0o700)
        logf = open(os.path.join(self.dir, "etcd.log"), "ab")
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "ha", "--data-dir", os.path.join(ed, "data"),
             "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
             "--initial-cluster", f"ha=http://127.0.0.1:{self.etcd_peer}",
             "--initial-cluster-state", "new", "--log-level", "warn", "--enable-v2=true"],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        self.note_pid(self.etcd.pid)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        for n in self.nodes:
            n.write_config()
        # The first node bootstraps; the others start once it leads, and
        # clone it (pg_basebackup).
        self.nodes[0].start()
        self.wait_leader(timeout=120)
        for n in self.nodes[1:]:
            n.start()

    def note_pid(self, pid):
        """Every process started, for the test runner's last-resort cleanup
        should this script itself be killed (tests/scripts/suites.sh)."""
        with open(os.path.join(self.dir, "pids"), "a") as f:
            f.write(f"{pid}\n")

    def leader(self, exclude=()):
        """The node Patroni reports as leader, asked of every live node."""
        for n in self.nodes:
            if n in exclude or not n.patroni_alive():
                continue
            try:
                members = n.rest_get("/cluster", timeout=1.5).get("members", [])
            except Exception:
                continue
            for m in members:
                if m.get("role") in ("leader", "master", "primary") and m.get("state") == "running":
                    for x in self.nodes:
                        if x.name == m.get("name") and x not in exclude:
                            return x
        return None

    def sync_standby(self, leader):
        try:
            members = leader.rest_get("/cluster", timeout=2).get("members", [])
        except Exception:
            return None
        for m in members:
            if m.get("role") == "sync_standby":
                return next((x for x in self.nodes if x.name == m.get("name")), None)
        return None

    def writable(self, node):
        try:
            return node.query("SELECT NOT pg_is_in_recovery()", dbname="postgres")[0][0]
        except Exception:
            return False

    def wait_leader(self, timeout=90, exclude=(), not_node=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            ld = self.leader(exclude=exclude)
            if ld is not None and ld is not not_node and self.writable(ld):
                return ld
            time.sleep(0.3)
        raise RuntimeError("no writable leader within %d s" % timeout)

    def wait_healthy(self, timeout=180, replicas=2):
        """A leader with `replicas` streaming replicas, one synchronous."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            ld = self.leader()
            if ld is not None:
                try:
                    rows = ld.query("SELECT count(*) FILTER (WHERE state = 'streaming'), "
                                    "count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication",
                                    dbname="postgres")
                    last = rows[0]
                    # In strict mode Patroni promotes only the standby its
                    # /sync key names; right after a switchover or a rejoin
                    # it names none for a loop or two (PostgreSQL's '*'
                    # already counts any standby as synchronous): a primary
                    # lost then is not replaced automatically. Wait for it.
                    if rows[0][0] >= replicas and (not self.sync_expected or
                                                   (rows[0][1] >= 1 and self.sync_standby(ld) is not None)):
                        return ld
                except Exception as e:
                    last = e
            time.sleep(0.5)
        raise RuntimeError(f"cluster not healthy within {timeout} s (last: {last})")

    sync_expected = True

    def stop_node_hard(self, node):
        """SIGKILL of the node's Patroni and postmaster (its backends follow)."""
        pm = node.postmaster_pid()
        if node.proc is not None:
            signal_quietly(node.proc.pid, signal.SIGKILL)
            node.proc.wait()
        if pm:
            signal_quietly(pm, signal.SIGKILL)
        return pm

    def freeze(self, node):
        """SIGSTOP of the node's Patroni, postmaster and every backend."""
        pids = []
        if node.proc is not None:
            pids.append(node.proc.pid)
        pm = node.postmaster_pid()
        if pm:
            pids.append(pm)
            pids.extend(children_of(pm))
        for p in pids:
            if signal_quietly(p, signal.SIGSTOP):
                self.stopped.add(p)
        return pids

    def thaw(self, pids):
        for p in pids:
            signal_quietly(p, signal.SIGCONT)
            self.stopped.discard(p)

    def patronictl(self, *args, node=None):
        node = node or next(n for n in self.nodes if n.patroni_alive())
        env = dict(os.environ, PATH=self.pgbin + ":" + os.environ.get("PATH", ""))
        return subprocess.run(["patronictl", "-c", node.cfg] + list(args), capture_output=True, text=True,
                              timeout=120, env=env, stdin=subprocess.DEVNULL)

    def shutdown(self):
        for p in list(self.stopped):
            signal_quietly(p, signal.SIGCONT)
        for n in self.nodes:
            if n.patroni_alive():
                signal_quietly(n.proc.pid, signal.SIGTERM)
        deadline = time.time() + 40
        for n in self.nodes:
            if n.proc is not None:
                try:
                    n.proc.wait(timeout=max(1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    signal_quietly(n.proc.pid, signal.SIGKILL)
            pm = n.postmaster_pid()
            if pm:
                # Patroni did not stop it (killed, or hung): immediate stop.
                subprocess.run([os.path.join(self.pgbin, "pg_ctl"), "-D", n.data, "-m", "immediate", "-w",
                                "-t", "30", "stop"], capture_output=True)
                if n.postmaster_pid():
                    signal_quietly(pm, signal.SIGKILL)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.etcd.kill()


# ----------------------------------------------------------- workload ----

class History:
    """What clients saw: acquisitions and writes, with the node and timeline
    of the connection and monotonic times of invocation and completion."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acquires = []   # dict(inv, done, token, node, tl, resource)
        self.writes = {}     # opid -> dict(inv, done, token, resource, outcome ok|fail|unknown, node, tl, code)
        self.opid = 0

    def next_opid(self):
        with self.lock:
            self.opid += 1
            return self.opid


def conn_identity(conn):
    cur = conn.cursor()
    cur.execute("SELECT inet_server_port(), substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)")
    port, tl = cur.fetchone()
    return port, int(tl, 16)


class Workers:
    """Threads that take a lock (acquire_xact), write the row of the resource
    with its token and a log row, and commit; they reconnect through the
    multi-host connection string whenever their connection breaks."""

    def __init__(self, cl, hist, n, resources, rng_seed):
        self.cl, self.hist, self.n, self.resources = cl, hist, n, resources
        self.stop_ev = threading.Event()
        self.threads = []
        self.seed = rng_seed
        self.errors = []  # unexpected errors: (code, message)

    def start(self):
        self.stop_ev.clear()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(self.n)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=120)

    def run(self, i):
        rng = random.Random(self.seed * 1000 + i)
        conn = None
        ident = None
        while not self.stop_ev.is_set():
            if conn is None:
                try:
                    conn = psycopg2.connect(**self.cl.multi_dsn(application_name=f"ha-w{i}", user="ha_app"))
                    conn.autocommit = True
                    ident = conn_identity(conn)
                    conn.autocommit = False
                except Exception:
                    conn = None
                    time.sleep(0.2)
                    continue
            r = rng.randint(1, self.resources)
            opid = self.hist.next_opid()
            w = dict(inv=None, done=None, token=None, resource=r, outcome="fail", node=ident[0], tl=ident[1],
                     code=None)
            stage = "acquire"
            try:
                cur = conn.cursor()
                a_inv = time.monotonic()
                cur.execute("SELECT fencing.acquire_xact(%s)::bigint", (f"ha:{r}",))
                token = cur.fetchone()[0]
                a_done = time.monotonic()
                with self.hist.lock:
                    self.hist.acquires.append(dict(inv=a_inv, done=a_done, token=token, node=ident[0],
                                                   tl=ident[1], resource=r))
                w["token"] = token
                w["inv"] = time.monotonic()
                with self.hist.lock:
                    self.hist.writes[opid] = w
                stage = "write"
                cur.execute("UPDATE ha_rows SET val = val + 1, fence_token = %s WHERE id = %s RETURNING val",
                            (token, r))
                val = cur.fetchone()[0]
                cur.execute("INSERT INTO ha_log (resource, token, val, opid) VALUES (%s, %s, %s, %s)",
                            (r, token, val, opid))
                stage = "commit"
                conn.commit()
                w["done"] = time.monotonic()
                w["outcome"] = "ok"
            except Exception as e:
                code = pgcode(e)
                broken = conn.closed != 0 or isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError))
                if w["inv"] is not None:
                    w["code"] = code or "conn"
                    # Before COMMIT was sent nothing can have committed.
                    w["outcome"] = "unknown" if stage == "commit" and broken else "fail"
                    w["done"] = time.monotonic()
                allowed = broken or code in ("57P01", "57P02", "57P03", "25006", "40001", "40P01")
                if not allowed:
                    self.errors.append((code, str(e).strip().splitlines()[0] if str(e) else repr(e)))
                if broken:
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn = None
                    time.sleep(0.1)
                else:
                    try:
                        conn.rollback()
                    except Exception:
                        conn = None
            time.sleep(rng.uniform(0, 0.02))
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


# ------------------------------------------------------------- checks ----

def stale_born(acquires):
    """The acquisitions an old primary granted after a newer timeline had
    granted a token (before its HA manager demoted it): from a counter
    window its standby confirmed ahead, so below every token of the newer
    timeline. Returns {id(acquire): the newer grant}."""
    evs = sorted([(a["inv"], 0, a) for a in acquires] + [(a["done"], 1, a) for a in acquires],
                 key=lambda e: (e[0], e[1]))
    newest, out = None, {}
    for t, kind, a in evs:
        if kind == 1:
            if id(a) not in out and (newest is None or a["tl"] > newest["tl"]):
                newest = a
        elif newest is not None and a["tl"] < newest["tl"]:
            out[id(a)] = newest
    return out


def check_counter(acquires):
    """Every acquisition's token is greater than the token of every
    acquisition that completed before it began (one database-wide counter,
    across every node it moved to), but for tokens an old primary granted
    after a newer timeline had granted one: those must be below that newer
    grant's token (stale from birth). Returns the violations."""
    old = stale_born(acquires)
    evs = []
    for a in acquires:
        evs.append((a["inv"], 0, a))
        evs.append((a["done"], 1, a))
    evs.sort(key=lambda e: (e[0], e[1]))
    best = None
    bad = []
    for a in acquires:
        if id(a) in old and a["token"] >= old[id(a)]["token"]:
            bad.append(f"token {a['token']} granted on timeline {a['tl']} after timeline {old[id(a)]['tl']} granted "
                       f"{old[id(a)]['token']} is not below it")
    for t, kind, a in evs:
        if id(a) in old:
            continue
        if kind == 1:
            if best is None or a["token"] > best["token"]:
                best = a
        elif best is not None and a["token"] <= best["token"]:
            bad.append(f"token {a['token']} (node {a['node']}, timeline {a['tl']}) is not above {best['token']} "
                       f"(node {best['node']}, timeline {best['tl']}), returned before it was asked for")
    seen = {}
    for a in acquires:
        if a["token"] in seen:
            bad.append(f"token {a['token']} returned twice")
        seen[a["token"]] = a
    return bad


def check_zombie(acquires, writes):
    """No write is acknowledged on a timeline once a newer timeline granted a
    token: an old primary that lives on commits nothing a client sees."""
    grants = sorted((a["done"], a["tl"]) for a in acquires)
    bad = []
    acked = [("write", w["inv"], w["tl"], w["token"]) for w in writes.values() if w["outcome"] == "ok"]
    import bisect
    times = [g[0] for g in grants]
    prefix_max = []
    m = 0
    for g in grants:
        m = max(m, g[1])
        prefix_max.append(m)
    for kind, inv, tl, token in acked:
        k = bisect.bisect_left(times, inv)
        if k > 0 and prefix_max[k - 1] > tl:
            bad.append(f"{kind} with token {token} acknowledged on timeline {tl} after timeline "
                       f"{prefix_max[k - 1]} granted a token")
    return bad


def check_writes(node, writes, resources):
    """Against node's ha_log and ha_rows: every acknowledged write is there
    with its token; no write that failed before COMMIT is; per row, tokens
    strictly increase in commit order and val counts the commits."""
    bad = []
    log = node.query("SELECT opid, resource, token, val FROM ha_log ORDER BY resource, val")
    rows = dict((r[0], (r[1], r[2])) for r in node.query("SELECT id, val, fence_token FROM ha_rows"))
    by_opid = {}
    for opid, r, token, val in log:
        by_opid.setdefault(opid, []).append((r, token, val))
    checked = 0
    for opid, w in writes.items():
        got = by_opid.get(opid, [])
        if len(got) > 1:
            bad.append(f"write {opid} committed {len(got)} times")
        if w["outcome"] == "ok":
            checked += 1
            if not got:
                bad.append(f"acknowledged write {opid} (token {w['token']}, node {w['node']}) is missing")
            elif got[0][1] != w["token"]:
                bad.append(f"write {opid} committed with token {got[0][1]}, not {w['token']}")
        elif w["outcome"] == "fail" and got:
            bad.append(f"write {opid} failed before COMMIT ({w['code']}) but is committed")
    for opid in by_opid:
        if opid not in writes:
            bad.append(f"log row of no write: {opid}")
    per = {}
    for opid, r, token, val in log:
        per.setdefault(r, []).append((val, token))
    for r in range(1, resources + 1):
        ls = per.get(r, [])
        for k, (val, token) in enumerate(ls):
            if val != k + 1:
                bad.append(f"row {r}: commit {k + 1} has val {val}")
                break
        for k in range(1, len(ls)):
            if ls[k][1] <= ls[k - 1][1]:
                bad.append(f"row {r}: token {ls[k][1]} committed after {ls[k - 1][1]}")
        val, token = rows.get(r, (None, None))
        if val != len(ls) or (ls and token != ls[-1][1]):
            bad.append(f"row {r} is (val {val}, token {token}), its log has {len(ls)} commits")
    return bad, checked


def wait_caught_up(cl, leader, timeout=120):
    """Every replica has replayed what the leader wrote so far."""
    lsn = leader.query("SELECT pg_current_wal_lsn()::text", dbname="postgres")[0][0]
    deadline = time.time() + timeout
    for n in cl.nodes:
        if n is leader:
            continue
        while time.time() < deadline:
            try:
                ok = n.query("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,), dbname="postgres")[0][0]
                if ok:
                    break
            except Exception:
                pass
            time.sleep(0.3)
        else:
            return False
    return True


def node_digest(node):
    return node.query("SELECT md5(coalesce(string_agg(opid || ':' || resource || ':' || token || ':' || val, ',' "
                      "ORDER BY opid), '')) || '/' || (SELECT md5(coalesce(string_agg(id || ':' || val || ':' || "
                      "coalesce(fence_token::text, '-'), ',' ORDER BY id), '')) FROM ha_rows) FROM ha_log")[0][0]


# ---------------------------------------------------------- scenarios ----

class Run:
    def __init__(self, args):
        self.args = args
        self.profile = args.profile
        self.rng = random.Random(args.seed)
        pgbin = os.environ.get("PGBIN") or os.path.dirname(shutil.which("pg_config") or "/usr/lib/postgresql/15/bin/x")
        self.cl = Cluster(args.dir, pgbin)
        self.hist = History()
        self.resources = 6
        self.failovers = {"switchover": 0, "kill": 0, "zombie": 0}
        self.violations = 0
        self.stale_checked = 0
        self.after_failover = []   # (what, seconds to a writable leader, seconds to the first token, 57014 seen)
        self.jepsen_line = ""
        self.control_line = ""
        self.stale_born_seen = 0

    # -- helpers --
    def violation(self, cond, name, diag=None):
        if not tap.ok(cond, name, diag):
            self.violations += 1

    def setup_db(self, leader):
        c = leader.connect(dbname="postgres")
        cur = c.cursor()
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute("CREATE ROLE ha_app LOGIN")
        c.close()
        leader.query("""
            CREATE EXTENSION fencing;
            GRANT USAGE ON SCHEMA fencing TO ha_app;
            CREATE TABLE ha_rows (id int PRIMARY KEY, val bigint NOT NULL, fence_token fencing.token);
            INSERT INTO ha_rows SELECT g, 0, NULL FROM generate_series(1, %s) g;
            CREATE TABLE ha_log (opid bigint NOT NULL, resource int NOT NULL, token bigint NOT NULL,
                                 val bigint NOT NULL);
            CREATE TABLE ha_probe (id text PRIMARY KEY, fence_token fencing.token);
            CREATE TABLE ha_plain (id text PRIMARY KEY);
            SELECT fencing.protect('ha_rows'), fencing.protect('ha_probe');
            GRANT SELECT, INSERT, UPDATE ON ha_rows, ha_log, ha_probe TO ha_app;
        """, (self.resources,))

    def stale_before(self, tag):
        """Takes a token of 'ha:stale:<tag>' on the primary and writes with it
        (acknowledged): the pre-failover token."""
        c = psycopg2.connect(**self.cl.multi_dsn(application_name="ha-stale"))
        try:
            cur = c.cursor()
            cur.execute("SELECT fencing.acquire_xact(%s)::bigint", (f"ha:stale:{tag}",))
            t = cur.fetchone()[0]
            cur.execute("INSERT INTO ha_probe VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET "
                        "fence_token = excluded.fence_token", (tag, t))
            c.commit()
            return t
        finally:
            c.close()

    def stale_after(self, tag, old, what):
        """On the new primary: a new token of the resource is above the old
        one and is written; a write with the old token is then rejected
        (23T01)."""
        c = psycopg2.connect(**self.cl.multi_dsn(application_name="ha-stale"))
        try:
            cur = c.cursor()
            cur.execute("SELECT fencing.acquire_xact(%s)::bigint", (f"ha:stale:{tag}",))
            new = cur.fetchone()[0]
            cur.execute("UPDATE ha_probe SET fence_token = %s WHERE id = %s", (new, tag))
            c.commit()
            self.violation(new > old, f"{what}: the resource's new token {new} is above its pre-failover token {old}")
            code = None
            try:
                cur.execute("UPDATE ha_probe SET fence_token = %s WHERE id = %s", (old, tag))
                c.commit()
            except psycopg2.Error as e:
                code = pgcode(e)
                c.rollback()
            self.stale_checked += 1
            self.violation(code == "23T01", f"{what}: a write with the pre-failover token is rejected with 23T01",
                           f"got {code}")
        finally:
            c.close()

    def lock_user_probe(self, t0, stop_after=60.0):
        """What a lock user sees after a failover: a client with a 1 s
        statement_timeout acquiring in a loop. Each try either returns a
        token or fails with 57014 (the standby wait canceled) leaving no lock
        held; a server never sends a class-08 error. Returns (seconds to the
        first token, 57014 count, bad outcomes)."""
        n57014, bad, first = 0, [], None
        deadline = time.monotonic() + stop_after
        while time.monotonic() < deadline:
            try:
                c = psycopg2.connect(**self.cl.multi_dsn(application_name="ha-probe",
                                                         options="-c statement_timeout=1000"))
            except psycopg2.Error:
                time.sleep(0.2)
                continue
            try:
                cur = c.cursor()
                try:
                    cur.execute("SELECT fencing.acquire('ha:probe')::bigint")
                    cur.fetchone()
                    first = time.monotonic() - t0
                    c.rollback()
                    cur.execute("SELECT fencing.release('ha:probe')")
                    c.commit()
                    break
                except psycopg2.Error as e:
                    code = pgcode(e)
                    if code == "57014":
                        n57014 += 1
                        c.rollback()
                        cur.execute("SELECT count(*) FROM fencing.locks WHERE pid = pg_backend_pid()")
                        held = cur.fetchone()[0]
                        c.rollback()
                        if held != 0:
                            bad.append(f"57014 left {held} fencing locks held")
                    elif code is not None and code.startswith("08"):
                        bad.append(f"class-08 error from the server: {code} {e}")
                    elif code not in (None, "57P01", "57P02", "57P03", "25006"):
                        bad.append(f"unexpected {code}: {str(e).strip()}")
            except psycopg2.Error:
                pass
            finally:
                try:
                    c.close()
                except Exception:
                    pass
        if first is None:
            bad.append(f"no token within {stop_after} s")
        return first, n57014, bad

    def rejoined(self, node, what, expect_rewind=False, log_before=""):
        """The old primary runs again as a streaming replica."""
        # Patroni may still be demoting, rewinding or restarting it: wait
        # until it streams (what the leader's pg_stat_replication shows may
        # be a walsender of a moment before).
        ok = False
        deadline = time.time() + 240
        while not ok and time.time() < deadline:
            try:
                ok = node.query("SELECT pg_is_in_recovery()", dbname="postgres")[0][0] and \
                    node.query("SELECT status FROM pg_stat_wal_receiver", dbname="postgres")[0][0] == "streaming"
            except Exception:
                ok = False
            if not ok:
                time.sleep(1)
        self.cl.wait_healthy(timeout=240)
        ld = self.cl.leader()
        tap.ok(ok and ld is not node, f"{what}: {node.name} rejoined as a streaming replica")
        text = node.log_text()[len(log_before):]
        rewound = "running pg_rewind" in text
        if expect_rewind:
            tap.ok(rewound, f"{what}: {node.name} rejoined through pg_rewind")
        return rewound

    # -- scenarios --
    def scenario_standbys(self):
        ld = self.cl.wait_healthy()
        wait_caught_up(self.cl, ld)  # the database is on every replica
        for n in self.cl.nodes:
            if n is ld:
                continue
            names = n.query("SHOW synchronous_standby_names")[0][0]
            code = None
            try:
                n.query("SELECT fencing.acquire('ha:replica')")
            except psycopg2.Error as e:
                code = pgcode(e)
            tap.ok(code == "25006", f"standbys: acquire on replica {n.name} (synchronous_standby_names = "
                                    f"'{names}', require_sync_standby on) raises 25006", f"got {code}")

    def scenario_sync_wait(self):
        """The synchronous standby stops confirming (its walsender on the
        primary is stopped): acquire waits like a commit; statement_timeout
        ends the wait with 57014 and no lock is held; once the standby
        confirms again, acquire returns a greater token."""
        ld = self.cl.wait_healthy()
        before = ld.query("SELECT fencing.acquire('ha:wait')::bigint, fencing.release('ha:wait')")[0][0]
        senders = [r[0] for r in ld.query("SELECT pid FROM pg_stat_replication", dbname="postgres")]
        for p in senders:
            signal_quietly(p, signal.SIGSTOP)
            self.cl.stopped.add(p)
        th, result = None, {}
        try:
            c = ld.connect(options="-c statement_timeout=2000")
            cur = c.cursor()
            t0 = time.monotonic()
            code, msg = None, ""
            try:
                cur.execute("SELECT fencing.acquire('ha:wait')")
            except psycopg2.Error as e:
                code, msg = pgcode(e), str(e).strip().splitlines()[0]
            waited = time.monotonic() - t0
            tap.ok(code == "57014" and waited >= 1.5,
                   f"sync wait: acquire waits for the synchronous standby; statement_timeout ends it with 57014 "
                   f"({waited:.1f} s)", f"got {code} {msg} after {waited:.1f} s")
            tap.ok("synchronous standby" in msg, "sync wait: the error names the synchronous standby", msg)
            cur.execute("SELECT count(*) FROM fencing.locks WHERE pid = pg_backend_pid()")
            tap.ok(cur.fetchone()[0] == 0, "sync wait: no fencing lock is held after the canceled wait")
            # An ordinary commit waits too, and statement_timeout does not end
            # that wait (PostgreSQL disarms it before the commit); a cancel
            # does, and the commit is then reported committed with a WARNING
            # (PostgreSQL's behaviour): an unknown outcome for the client.
            pid = c.get_backend_pid()
            canceler = threading.Timer(3.0, lambda: ld.query("SELECT pg_cancel_backend(%s)", (pid,)))
            canceler.start()
            code = None
            t0 = time.monotonic()
            try:
                cur.execute("INSERT INTO ha_plain VALUES ('sync-wait')")
            except psycopg2.Error as e:
                code = pgcode(e)
            waited = time.monotonic() - t0
            canceler.join()
            warned = any("canceling wait for synchronous replication" in m for m in c.notices)
            tap.ok(code is None and warned and waited >= 2.5,
                   f"sync wait: a plain commit waits past statement_timeout; a cancel ends it and it is reported "
                   f"committed, with a WARNING ({waited:.1f} s)", f"got {code}, notices {c.notices}")
            c.close()
            # Without a timeout it waits until the standby confirms.

            def blocked():
                try:
                    result["token"] = ld.query("SELECT fencing.acquire_xact('ha:wait')::bigint")[0][0]
                except Exception as e:
                    result["error"] = e
            th = threading.Thread(target=blocked, daemon=True)
            th.start()
            th.join(timeout=2)
            tap.ok(th.is_alive(), "sync wait: without a timeout, acquire is still waiting after 2 s")
        finally:
            for p in senders:
                signal_quietly(p, signal.SIGCONT)
                self.cl.stopped.discard(p)
        if th is not None:
            th.join(timeout=60)
        tap.ok(result.get("token", 0) > before,
               "sync wait: once the standby confirms, the waiting acquire returns a greater token", str(result))

    def event(self, kind, n_event):
        """One switchover, SIGKILL failover or zombie, under load."""
        cl = self.cl
        ld = cl.wait_healthy(timeout=240)
        what = f"{kind} {n_event} ({ld.name})"
        tag = f"{kind}{n_event}"
        old = self.stale_before(tag)
        time.sleep(1.5)  # load on the old primary
        log_before = ld.log_text()
        t0 = time.monotonic()
        if kind == "switchover":
            cand = cl.sync_standby(ld)
            r = cl.patronictl("switchover", "--leader", ld.name, "--candidate", cand.name if cand else "", "--force",
                              SCOPE)
            tap.note(f"patronictl switchover: {r.stdout.strip().splitlines()[-1:] if r.stdout else r.stderr}")
            new = cl.wait_leader(timeout=120, not_node=ld)
            t1 = time.monotonic()
        elif kind == "kill":
            cl.stop_node_hard(ld)
            new = cl.wait_leader(timeout=120, exclude=(ld,))
            t1 = time.monotonic()
        else:
            new, t1 = self.zombie(ld, what, tag)
        self.failovers[kind] += 1
        log(f"{what}: {new.name} leads after {t1 - t0:.1f} s")
        if kind != "switchover":
            first, n57014, bad = self.lock_user_probe(t0)
            self.violation(not bad, f"{what}: a lock user sees a token or 57014 (no lock held), never a class-08 "
                                    f"error", "\n".join(bad))
            self.after_failover.append((kind, t1 - t0, first, n57014))
        self.stale_after(tag, old, what)
        time.sleep(1.5)  # load on the new primary
        if kind == "kill":
            ld.start()
        self.rejoined(ld, what, expect_rewind=(kind == "zombie"), log_before=log_before)
        return t0, t1

    def zombie(self, ld, what, tag):
        """SIGSTOP the primary with an open fenced write and a lock holder on
        it; another node leads and grants a newer token; SIGCONT; the old
        primary's backends go on: its write commits locally and waits for a
        synchronous standby it no longer has, its acquire waits likewise.
        Neither is acknowledged; Patroni demotes it and pg_rewind removes the
        local commit."""
        cl = self.cl
        # A holder on the old primary with a token, and a transaction that
        # wrote a row with it, not yet committed.
        z1 = ld.connect(application_name="ha-zombie-lock", options="-c statement_timeout=5000")
        z1.autocommit = True
        zc = z1.cursor()
        zc.execute("SELECT fencing.acquire(%s)::bigint", (f"ha:zombie:{tag}",))
        tz = zc.fetchone()[0]
        zc.execute("SELECT fencing.release(%s)", (f"ha:zombie:{tag}",))
        z2 = ld.connect(application_name="ha-zombie-write")
        z2.autocommit = False
        w2 = z2.cursor()
        w2.execute("INSERT INTO ha_probe VALUES (%s, %s)", (f"zombie:{tag}", tz))
        frozen = cl.freeze(ld)
        t0 = time.monotonic()
        new = cl.wait_leader(timeout=120, exclude=(ld,))
        t1 = time.monotonic()
        # The new primary grants a newer token and writes with it.
        c = psycopg2.connect(**cl.multi_dsn(application_name="ha-new"))
        cur = c.cursor()
        cur.execute("SELECT fencing.acquire_xact(%s)::bigint", (f"ha:zombie:{tag}",))
        tn = cur.fetchone()[0]
        cur.execute("INSERT INTO ha_probe VALUES (%s, %s)", (f"zombie-new:{tag}", tn))
        c.commit()
        c.close()
        self.violation(tn > tz, f"{what}: the new primary's token {tn} is above the zombie's {tz}")
        # Wake the old primary: its PostgreSQL first (so its backends run
        # before its Patroni notices it lost the leader key), then Patroni.
        pm_pids = [p for p in frozen if p != (ld.proc.pid if ld.proc else None)]
        cl.thaw(pm_pids)
        out = {}

        def commit_z2():
            try:
                z2.commit()
                out["z2"] = "acknowledged"
            except psycopg2.Error as e:
                out["z2"] = pgcode(e) or "conn"

        def acquire_z1():
            try:
                zc.execute("SELECT fencing.acquire(%s)::bigint", (f"ha:zombie:{tag}:2",))
                out["z1"] = f"token {zc.fetchone()[0]}"
            except psycopg2.Error as e:
                out["z1"] = pgcode(e) or "conn"
        ths = [threading.Thread(target=commit_z2, daemon=True), threading.Thread(target=acquire_z1, daemon=True)]
        for th in ths:
            th.start()
        time.sleep(1.0)
        cl.thaw(frozen)
        for th in ths:
            th.join(timeout=90)
        self.violation(out.get("z2") not in (None, "acknowledged"),
                       f"{what}: the zombie's fenced write (stale token) is not acknowledged ({out.get('z2')})")
        # It may hand out a token its standby confirmed ahead, never one
        # that is not below the new primary's.
        z1_token = int(out["z1"].split()[1]) if str(out.get("z1", "")).startswith("token") else None
        self.violation(out.get("z1") is not None and (z1_token is None or z1_token < tn),
                       f"{what}: the zombie hands out no token above the new primary's ({out.get('z1')})")
        if z1_token is not None:
            self.stale_born_seen += 1
        for x in (z1, z2):
            try:
                x.close()
            except Exception:
                pass
        self.zombie_tags.append(tag)
        return new, t1

    zombie_tags = []

    def check_all(self, label):
        """The history so far against the leader's database and every node."""
        cl = self.cl
        ld = cl.wait_healthy(timeout=240)
        bad = check_counter(self.hist.acquires)
        self.violation(not bad, f"{label}: every token is above every token returned before it was asked for "
                                f"({len(self.hist.acquires)} tokens)", "\n".join(bad[:20]))
        bad = check_zombie(self.hist.acquires, self.hist.writes)
        self.violation(not bad, f"{label}: no write was acknowledged on an old timeline after a newer one granted a "
                                f"token", "\n".join(bad[:20]))
        self.stale_born_seen += len(stale_born(self.hist.acquires))
        bad, checked = check_writes(ld, self.hist.writes, self.resources)
        self.violation(not bad, f"{label}: every acknowledged write is on the primary ({checked} writes), per-row "
                                f"tokens increase in commit order", "\n".join(bad[:20]))
        for tag in self.zombie_tags:
            rows = ld.query("SELECT count(*) FROM ha_probe WHERE id = %s", (f"zombie:{tag}",))[0][0]
            self.violation(rows == 0, f"{label}: the zombie's write {tag} is not committed on the primary")
        caught = wait_caught_up(cl, ld)
        digests = {n.name: node_digest(n) for n in cl.nodes}
        self.violation(caught and len(set(digests.values())) == 1,
                       f"{label}: every node holds the same rows", json.dumps(digests))
        for tag in self.zombie_tags:
            for n in cl.nodes:
                rows = n.query("SELECT count(*) FROM ha_probe WHERE id = %s", (f"zombie:{tag}",))[0][0]
                self.violation(rows == 0, f"{label}: the zombie's write {tag} is not committed on {n.name}")
        return checked

    def jepsen(self, events):
        """tests/jepsen's real run against the multi-host cluster while
        switchovers, kills and zombies happen; its checker judges the
        multi-node history."""
        cl = self.cl
        here = os.path.dirname(os.path.abspath(__file__))
        jdir = os.path.join(self.args.dir, "jepsen")
        os.makedirs(jdir, exist_ok=True)
        pg_config = os.path.join(cl.pgbin, "pg_config")
        b = subprocess.run(["make", "-s", "-C", os.path.join(here, "..", "jepsen"), f"BUILD={jdir}",
                            f"PG_CONFIG={pg_config}"], capture_output=True, text=True)
        if not tap.ok(b.returncode == 0, "jepsen: the harness builds", b.stdout + b.stderr):
            return
        ld = cl.wait_healthy()
        c = ld.connect(dbname="postgres")
        c.cursor().execute("CREATE DATABASE fencing_jepsen")
        c.close()
        nodes = ",".join(str(n.port) for n in cl.nodes)
        env = dict(os.environ, PGHOST=",".join("127.0.0.1" for _ in cl.nodes), PGPORT=nodes, PGUSER="postgres",
                   PGTARGETSESSIONATTRS="read-write", PGCONNECT_TIMEOUT="3")
        seconds = 60 + 45 * len(events)
        cmd = [os.path.join(jdir, "jepsen"), "run", "--profile", "quick", "--mode", "real", "--db", "fencing_jepsen",
               "--dir", os.path.join(jdir, "real"), "--seed", str(self.args.seed), "--workers", "12",
               "--resources", "6", "--min-accepted", "800", "--min-seconds", str(seconds),
               "--max-seconds", str(seconds + 120), "--nodes", nodes]
        out = open(os.path.join(jdir, "real.txt"), "w")
        err = open(os.path.join(jdir, "real.err"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        time.sleep(30)
        n = 0
        for kind in events:
            if p.poll() is not None:
                break
            n += 1
            try:
                self.jepsen_event(kind, n)
            except Exception as e:
                tap.ok(False, f"jepsen: {kind} {n}", repr(e))
            time.sleep(10)
        try:
            rc = p.wait(timeout=seconds + 400)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = -9
        out.close()
        err.close()
        with open(os.path.join(jdir, "real.txt")) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("jepsen real")]
        self.jepsen_line = lines[-1] if lines else ""
        with open(os.path.join(jdir, "real.err")) as f:
            errtext = f.read()
        self.violation(rc == 0, f"jepsen: 0 violations over {n} switchovers and failovers (exit status {rc})",
                       self.jepsen_line + "\n" + errtext[-3000:])
        tap.note(self.jepsen_line)
        if rc == 0:
            self.jepsen_tampered(jdir, env, nodes)

    def jepsen_tampered(self, jdir, env, nodes):
        """The multi-node checks can fail: the checker, run again on a
        history with a forged acquisition (acknowledged on the first
        timeline, after the last one granted, with an old token) and on a
        cluster where one replica stopped replaying before a forged log row,
        must report zombie, counter-order and node-diverged."""
        cl = self.cl
        tdir = os.path.join(jdir, "tamper")
        shutil.rmtree(tdir, ignore_errors=True)
        shutil.copytree(os.path.join(jdir, "real"), tdir)
        last = 0
        hdir = os.path.join(tdir, "history")
        for fn in os.listdir(hdir):
            with open(os.path.join(hdir, fn)) as f:
                for line in f:
                    try:
                        last = max(last, int(line.split("\t", 1)[0]))
                    except ValueError:
                        pass
        with open(os.path.join(hdir, "w99.1.log"), "w") as f:
            # On the first timeline, after the last one granted, a token
            # above everything: an old primary handing out a live token.
            f.write(f"{last + 1000}\tw99.1\tinvoke\tacquire\t1\t1\t-\tsession\t-\t-\n")
            f.write(f"{last + 2000}\tw99.1\tok\tacquire\t1\t1\t9000000000000000000\t-\t-\tbackend 1 node "
                    f"{cl.nodes[0].port} tl 1\n")
            # Then, on a newer timeline than any, a token below everything.
            f.write(f"{last + 3000}\tw99.1\tinvoke\tacquire\t2\t2\t-\tsession\t-\t-\n")
            f.write(f"{last + 4000}\tw99.1\tok\tacquire\t2\t2\t2\t-\t-\tbackend 1 node "
                    f"{cl.nodes[0].port} tl 999\n")
        ld = cl.wait_healthy()
        lagging = next(n for n in cl.nodes if n is not ld)
        # Its startup process stopped, the replica replays nothing more
        # (Patroni would resume a replay paused with pg_wal_replay_pause()).
        startup = []
        for p in children_of(lagging.postmaster_pid() or -1):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if b"startup" in f.read():
                        startup.append(p)
            except OSError:
                pass
        for p in startup:
            signal_quietly(p, signal.SIGSTOP)
            cl.stopped.add(p)
        try:
            ld.query("INSERT INTO jepsen_log (resource, token, val, worker, opid, form) "
                     "VALUES (1, 1, 1, 'w98.1', 1, 'update')", dbname="fencing_jepsen")
            r = subprocess.run([os.path.join(jdir, "jepsen"), "check", "--mode", "real", "--db", "fencing_jepsen",
                                "--dir", tdir, "--nodes", nodes], capture_output=True, text=True, env=env,
                               timeout=300)
        finally:
            cl.thaw(startup)
        line = next((l for l in r.stdout.splitlines() if l.startswith("jepsen real")), "")
        tap.ok(bool(startup) and r.returncode == 1 and
               all(k in line for k in ("zombie", "counter-order", "node-diverged")),
               "jepsen: the checker reports a forged acknowledgement on an old timeline (zombie, counter-order) "
               "and a replica that did not replay the primary's rows (node-diverged)", line + r.stderr[-2000:])

    def jepsen_event(self, kind, n):
        cl = self.cl
        ld = cl.wait_healthy(timeout=240)
        what = f"jepsen {kind} {n} ({ld.name})"
        log_before = ld.log_text()
        t0 = time.monotonic()
        if kind == "switchover":
            cand = cl.sync_standby(ld)
            cl.patronictl("switchover", "--leader", ld.name, "--candidate", cand.name if cand else "", "--force",
                          SCOPE)
            cl.wait_leader(timeout=120, not_node=ld)
        elif kind == "kill":
            cl.stop_node_hard(ld)
            cl.wait_leader(timeout=120, exclude=(ld,))
            time.sleep(3)
            ld.start()
        else:
            frozen = cl.freeze(ld)
            cl.wait_leader(timeout=120, exclude=(ld,))
            time.sleep(2)
            cl.thaw(frozen)
        self.failovers[kind] += 1
        log(f"{what}: done after {time.monotonic() - t0:.1f} s")
        self.rejoined(ld, what, log_before=log_before)

    def control(self):
        """synchronous_mode off. With fencing.require_sync_standby on,
        acquisition fails at once (55000) while ordinary writes commit. With
        it off, tokens issue without a standby; the primary's walsenders are
        stopped, acknowledged fenced writes happen, the primary is killed:
        the new primary lacks them and its fence state is behind the tokens
        handed out (tokens still increase: the clock bound)."""
        cl = self.cl
        ld = cl.wait_healthy(timeout=240)
        cl.sync_expected = False
        r = cl.patronictl("edit-config", "--force", "-s", "synchronous_mode=false", "-s",
                          "synchronous_mode_strict=false", SCOPE)
        tap.ok(r.returncode == 0, "control: synchronous_mode off", r.stderr)
        deadline = time.time() + 60
        while time.time() < deadline and ld.query("SHOW synchronous_standby_names")[0][0] != "":
            time.sleep(0.5)
        code = None
        try:
            ld.query("SELECT fencing.acquire('ha:ctl')")
        except psycopg2.Error as e:
            code = pgcode(e)
        tap.ok(code == "55000", "control: asynchronous, require_sync_standby on: acquire raises 55000", f"got {code}")
        wrote = ld.query("INSERT INTO ha_plain VALUES ('ctl:plain') RETURNING 1")
        tap.ok(wrote == [(1,)], "control: asynchronous: an ordinary write commits")

        r = cl.patronictl("edit-config", "--force", "-p", "fencing.require_sync_standby=off", SCOPE)
        deadline = time.time() + 60
        while time.time() < deadline and \
                ld.query("SELECT fencing.version(), current_setting('fencing.require_sync_standby')")[0][1] \
                not in ("off", "false"):
            time.sleep(0.5)
        ld = cl.wait_healthy(timeout=120)
        old_lead = ld
        # The rows, written with a first token each, on every node.
        for i in range(4):
            ld.query("INSERT INTO ha_probe SELECT %s, fencing.acquire_xact(%s)", (f"ctl:{i}", f"ha:ctl:{i}"))
        wait_caught_up(cl, ld)
        senders = [x[0] for x in ld.query("SELECT pid FROM pg_stat_replication", dbname="postgres")]
        for p in senders:
            signal_quietly(p, signal.SIGSTOP)
            cl.stopped.add(p)
        acked = []
        c = ld.connect(application_name="ha-control")
        c.autocommit = False
        cur = c.cursor()
        for i in range(1, 21):
            cur.execute("SELECT fencing.acquire_xact(%s)::bigint", (f"ha:ctl:{i % 4}",))
            t = cur.fetchone()[0]
            cur.execute("INSERT INTO ha_probe VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET fence_token = "
                        "excluded.fence_token", (f"ctl:{i % 4}", t))
            c.commit()
            acked.append((f"ctl:{i % 4}", t))
        c.close()
        max_old = max(t for _, t in acked)
        first_of = {}
        for k, t in acked:
            first_of.setdefault(k, t)
        cl.stop_node_hard(ld)
        for p in senders:
            signal_quietly(p, signal.SIGKILL)
            cl.stopped.discard(p)
        t0 = time.monotonic()
        new = cl.wait_leader(timeout=120, exclude=(old_lead,))
        secs = time.monotonic() - t0
        present = dict(new.query("SELECT id, fence_token::bigint FROM ha_probe WHERE id LIKE 'ctl:%%'"))
        lost = sum(1 for k, t in acked if present.get(k) is None or present[k] < t)
        last_of = {}
        for k, t in acked:
            last_of[k] = t
        lost_rows = sum(1 for k, t in last_of.items() if present.get(k) != t)
        behind = 0
        for k in last_of:
            cur_tok = new.query("SELECT fencing.current(%s)::bigint", (f"ha:{k.replace('ctl:', 'ctl:')}",))[0][0]
            if cur_tok is None or cur_tok < last_of[k]:
                behind += 1
        tap.ok(lost_rows > 0, f"control: the asynchronous failover lost acknowledged fenced writes "
                              f"({lost_rows} of {len(last_of)} rows lost their last acknowledged write)")
        nt = new.query("SELECT fencing.acquire_xact('ha:ctl:after')::bigint")[0][0]
        tap.ok(nt > max_old, f"control: the new primary's tokens are still above the old one's (the clock bound: "
                             f"{nt} > {max_old})")
        # A token the lost history had already superseded is accepted now.
        k = next(iter(last_of))
        superseded = first_of[k] if first_of[k] != last_of[k] else None
        accepted = None
        if superseded is not None and present.get(k) is not None and present[k] < superseded:
            try:
                accepted = new.query("UPDATE ha_probe SET fence_token = %s WHERE id = %s RETURNING 1",
                                     (superseded, k)) == [(1,)]
            except psycopg2.Error:
                accepted = False
            tap.ok(accepted, f"control: a token the lost history had superseded ({superseded} < {last_of[k]}) is "
                             f"accepted on the new primary")
        self.control_line = (f"control (asynchronous): require_sync_standby refused acquisition (55000); without it "
                             f"a failover after {secs:.1f} s lost the last acknowledged write of {lost_rows} of "
                             f"{len(last_of)} rows, fencing.current went back on {behind} resources, a superseded "
                             f"token was {'accepted' if accepted else 'not tried' if accepted is None else 'rejected'}"
                             f"; new tokens stayed above the old ones")
        tap.note(self.control_line)
        old_lead.start()

    def main(self):
        cl = self.cl
        os.makedirs(self.args.dir, exist_ok=True)
        log(f"starting etcd and 3 Patroni nodes in {self.args.dir} (PostgreSQL {cl.pgbin})")
        cl.start()
        ld = cl.wait_healthy(timeout=300)
        tap.ok(True, f"cluster: {ld.name} leads, 2 replicas stream, one synchronous")
        self.setup_db(ld)
        self.scenario_standbys()
        self.scenario_sync_wait()

        workers = Workers(cl, self.hist, 6, self.resources, self.args.seed)
        workers.start()
        if self.profile == "long":
            plan = ["switchover", "kill", "zombie", "switchover", "kill", "zombie"]
        else:
            plan = ["switchover", "kill", "zombie"]
        counts = {}
        for kind in plan:
            counts[kind] = counts.get(kind, 0) + 1
            try:
                self.event(kind, counts[kind])
            except Exception as e:
                self.violation(False, f"{kind} {counts[kind]}: completed", repr(e))
                break
        workers.stop()
        tap.ok(not workers.errors, "workload: no unexpected error", "\n".join(map(str, workers.errors[:20])))
        checked = self.check_all("history")
        if self.profile == "long":
            self.jepsen(["switchover", "kill", "zombie", "switchover", "kill", "zombie"])
        self.control()

        fo = sum(self.failovers.values())
        probes = "; ".join(f"{k}: leader after {a:.1f} s, first token after {b:.1f} s, {c} x 57014"
                           for k, a, b, c in self.after_failover if b is not None)
        tap.note(f"after a failover: {probes}")
        summary = (f"ha {self.profile}: {fo} failovers ({self.failovers['switchover']} switchovers, "
                   f"{self.failovers['kill']} SIGKILL, {self.failovers['zombie']} zombie), "
                   f"{len(self.hist.acquires)} tokens checked, {checked} writes checked, "
                   f"{self.stale_checked} pre-failover tokens rejected, {self.stale_born_seen} tokens from a "
                   f"paused old primary (all below the new primary's), {self.violations} violations")
        if self.jepsen_line:
            summary += f"; {self.jepsen_line}"
        return summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--profile", default="quick", choices=["quick", "long"])
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    print(f"# seed {args.seed}", flush=True)
    run = Run(args)
    out = {}

    # The scenarios run in a thread of their own, so that this thread stays
    # free to stop everything on SIGTERM (a time limit) even while a
    # scenario's connection waits inside libpq.
    def scenarios():
        try:
            out["summary"] = run.main()
        except BaseException:
            import traceback
            out["error"] = traceback.format_exc()

    stop = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    th = threading.Thread(target=scenarios, daemon=True)
    th.start()
    while th.is_alive() and not stop:
        th.join(0.5)
    summary = out.get("summary")
    if stop:
        tap.ok(False, "the run completed", "stopped by SIGTERM (time limit)")
    elif "error" in out:
        tap.ok(False, "the run completed", out["error"])
    run.cl.shutdown()
    print(f"1..{tap.n}", flush=True)
    if summary:
        print(summary + ("" if tap.failed == 0 else f" ({tap.failed} assertions failed)"), flush=True)
        if run.control_line:
            print(run.control_line, flush=True)
    sys.exit(0 if tap.failed == 0 else 1)


if __name__ == "__main__":
    main()
