"""The acquire_xact workflow through PgBouncer in transaction pooling mode
(run by pgbouncer.sh, which starts pgbouncer).

usage: pgbouncer_load.py BOUNCER_PORT POOL_SIZE

CLIENTS client connections, all open at once through PgBouncer, each run
ITERATIONS transactions of the shape

    BEGIN;
    SELECT fencing.acquire_xact('pgb:<n>');          -- token T
    UPDATE pgb_counters SET fence_token = T ...      -- fenced (fencing.protect)
    INSERT INTO pgb_log ...                          -- who wrote what, in lock order
    COMMIT;

over RESOURCES resources, on at most POOL_SIZE server connections. Checks: every
transaction committed (no 23T01, no other error); per resource, tokens strictly
increase in the order the lock was held; the counters add up; no fencing lock is
left; far more client connections than server connections (SHOW POOLS,
pg_stat_activity, and the backends that ran the transactions). Then shows why a
session-scoped lock is not safe behind transaction pooling: it outlives the
client that took it.
"""
import os
import sys
import threading
import time

import psycopg2

CLIENTS = 40
ITERATIONS = 25
RESOURCES = 4

bouncer_port = int(sys.argv[1])
pool_size = int(sys.argv[2])
dbname = os.environ.get("PGDATABASE", "postgres")
failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def direct():
    c = psycopg2.connect("")  # the cluster itself (PGHOST, PGPORT, ...)
    c.autocommit = True
    return c


def bounced(**kw):
    return psycopg2.connect(host="127.0.0.1", port=bouncer_port, dbname=dbname, user="postgres", **kw)


def q(conn, sql, args=()):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


# ---- setup ---------------------------------------------------------------------------
admin = direct()
(admin_pid,) = q(admin, "SELECT pg_backend_pid()")[0]
q(admin, "SET client_min_messages = warning")
q(admin, "CREATE EXTENSION IF NOT EXISTS fencing")
q(admin, "DROP TABLE IF EXISTS pgb_counters, pgb_log")
q(admin, "CREATE TABLE pgb_counters (resource text PRIMARY KEY, writes int NOT NULL DEFAULT 0, fence_token fencing.token)")
q(admin, "INSERT INTO pgb_counters (resource) SELECT 'pgb:' || i FROM generate_series(0, %s) i", (RESOURCES - 1,))
q(admin, "SELECT fencing.protect('pgb_counters')")
q(admin, "CREATE TABLE pgb_log (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL, "
         "client int NOT NULL, backend int NOT NULL)")

# ---- the workload ----------------------------------------------------------------------
errors = []
committed = [0] * CLIENTS
barrier = threading.Barrier(CLIENTS + 1)
done = threading.Event()


def client(k):
    try:
        conn = bounced(application_name=f"pgb-client-{k}")
    except Exception as e:  # noqa: BLE001
        errors.append(f"client {k}: connect: {e}")
        barrier.abort()
        return
    try:
        barrier.wait(timeout=60)
        for i in range(ITERATIONS):
            resource = f"pgb:{(k * 7 + i) % RESOURCES}"
            with conn:  # one transaction: BEGIN ... COMMIT (ROLLBACK on error)
                with conn.cursor() as cur:
                    cur.execute("SELECT fencing.acquire_xact(%s), pg_backend_pid()", (resource,))
                    token, pid = cur.fetchone()
                    cur.execute("UPDATE pgb_counters SET writes = writes + 1, fence_token = %s WHERE resource = %s",
                                (token, resource))
                    if cur.rowcount != 1:
                        raise RuntimeError(f"update of {resource} touched {cur.rowcount} rows")
                    cur.execute("INSERT INTO pgb_log (resource, token, client, backend) VALUES (%s, %s, %s, %s)",
                                (resource, token, k, pid))
            committed[k] += 1
    except Exception as e:  # noqa: BLE001
        errors.append(f"client {k}: {getattr(e, 'pgcode', None) or ''} {e}".strip())
    finally:
        conn.close()


observed = {"clients": 0, "servers": 0, "backends": 0}


def monitor():
    """SHOW POOLS on PgBouncer's admin console and pg_stat_activity, while the clients run."""
    console = psycopg2.connect(host="127.0.0.1", port=bouncer_port, dbname="pgbouncer", user="postgres")
    console.autocommit = True
    mon = direct()
    while not done.is_set():
        with console.cursor() as cur:
            cur.execute("SHOW POOLS")
            cols = [d[0] for d in cur.description]
            for row in cur.fetchall():
                r = dict(zip(cols, row))
                if r["database"] != dbname:
                    continue
                observed["clients"] = max(observed["clients"], r["cl_active"] + r["cl_waiting"])
                servers = sum(r.get(c, 0) for c in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
                observed["servers"] = max(observed["servers"], servers)
        (n,) = q(mon, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND backend_type = 'client backend' AND pid NOT IN (pg_backend_pid(), %s)", (admin_pid,))[0]
        observed["backends"] = max(observed["backends"], n)
        time.sleep(0.02)
    console.close()
    mon.close()


threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
for t in threads:
    t.start()
mon_thread = threading.Thread(target=monitor)
started = time.time()
try:
    barrier.wait(timeout=60)  # every client is connected now
except threading.BrokenBarrierError:
    pass
mon_thread.start()
for t in threads:
    t.join(timeout=300)
done.set()
mon_thread.join()
elapsed = time.time() - started

total = CLIENTS * ITERATIONS
print(f"{sum(committed)} transactions by {CLIENTS} clients through PgBouncer in {elapsed:.1f} s")
for e in errors[:10]:
    print("  error:", e)
check(not errors and sum(committed) == total, f"all {total} acquire_xact transactions committed ({len(errors)} errors)")

# ---- what the database saw --------------------------------------------------------------
(n_log,) = q(admin, "SELECT count(*) FROM pgb_log")[0]
check(n_log == total, f"the log has one row per transaction ({n_log})")
(bad,) = q(admin, """
    SELECT count(*) FROM (
      SELECT token, lag(token) OVER (PARTITION BY resource ORDER BY id) AS prev FROM pgb_log) s
     WHERE token <= prev""")[0]
check(bad == 0, "per resource, tokens strictly increase in the order the lock was held")
(mismatch,) = q(admin, """
    SELECT count(*) FROM pgb_counters c
     WHERE c.writes <> (SELECT count(*) FROM pgb_log l WHERE l.resource = c.resource)
        OR c.fence_token <> (SELECT max(token) FROM pgb_log l WHERE l.resource = c.resource)""")[0]
check(mismatch == 0, "each counter holds its resource's count of writes and latest token")
(backends,) = q(admin, "SELECT count(DISTINCT backend) FROM pgb_log")[0]
check(1 <= backends <= pool_size,
      f"the transactions of {CLIENTS} clients ran on {backends} server backends (pool size {pool_size})")
check(observed["clients"] >= CLIENTS, f"SHOW POOLS: {observed['clients']} client connections at once")
check(1 <= observed["servers"] <= pool_size, f"SHOW POOLS: at most {observed['servers']} server connections")
check(1 <= observed["backends"] <= pool_size,
      f"pg_stat_activity: at most {observed['backends']} backends for the {CLIENTS} clients")
(locks,) = q(admin, "SELECT count(*) FROM fencing.locks")[0]
check(locks == 0, "no fencing lock is left")

# ---- why not session-scoped locks -----------------------------------------------------
# A session lock taken through transaction pooling belongs to whichever server
# connection ran that statement: it stays there when the client leaves.
c = bounced()
c.autocommit = True
(token,) = q(c, "SELECT fencing.acquire('pgb:session')")[0]
c.close()
time.sleep(0.2)
rows = q(admin, "SELECT pid FROM fencing.locks WHERE resource = 'pgb:session' AND granted")
check(len(rows) == 1, "a session-scoped lock taken through transaction pooling outlives its client (leaked)")
for (pid,) in rows:
    q(admin, "SELECT pg_terminate_backend(%s)", (pid,))
for _ in range(100):
    if not q(admin, "SELECT 1 FROM fencing.locks"):
        break
    time.sleep(0.05)
check(not q(admin, "SELECT 1 FROM fencing.locks"), "the leaked lock is gone once its server connection is closed")

admin.close()
if failures:
    print(f"pgbouncer: {failures} check(s) failed")
    sys.exit(1)
print("pgbouncer: all checks passed")
