"""The client scenario in Python with psycopg 3 (run by psycopg3.sh).

A fencing token is a bigint: psycopg reads it as a Python int, with text and
with binary cursors, and sends an int as int8, with no type registration. The
stale-write error (SQLSTATE 23T01, class 23) arrives as
psycopg.IntegrityError. Connection parameters come from the libpq
environment (PGHOST, PGPORT, ...).
"""
import sys
import time

import psycopg

RESOURCE = "clients:psycopg3"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1
failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def connect():
    return psycopg.connect("", autocommit=True)  # PGHOST, PGPORT, PGUSER, PGDATABASE


def scenario(binary):
    mode = "binary" if binary else "text"
    table = f"psycopg3_{mode}_ledger"
    resource = f"{RESOURCE}:{mode}"

    def one(conn, sql, params=()):
        with conn.cursor(binary=binary) as cur:
            return cur.execute(sql, params).fetchone()[0]

    def write(conn, token):
        with conn.cursor(binary=binary) as cur:
            return cur.execute(f"UPDATE {table} SET balance = balance + 1, fence_token = %s WHERE id = 1",
                               (token,)).rowcount

    with connect() as setup:
        setup.execute("SET client_min_messages = warning")
        setup.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        setup.execute(f"DROP TABLE IF EXISTS {table}")
        setup.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)")
        # protect() refuses tables holding tokens past 2^52: protect first, then a
        # superuser moves the counter past 2^53 + 1.
        setup.execute(f"SELECT fencing.protect('{table}')")
        setup.execute(f"SELECT fencing.advance_past('{table}', %s)", (ABOVE_2_53,))
        setup.execute(f"INSERT INTO {table} VALUES (1, 0, %s)", (ABOVE_2_53,))

    s1, s2 = connect(), connect()
    # (1) acquire; not reentrant by default.
    t1 = one(s1, "SELECT fencing.acquire(%s)", (resource,))
    check(type(t1) is int and t1 > ABOVE_2_53, f"[{mode}] acquire: T1 = {t1} is an int above 2^53 + 1")
    try:
        one(s1, "SELECT fencing.acquire(%s)", (resource,))
        check(False, f"[{mode}] a second plain acquire fails")
    except psycopg.errors.ObjectInUse as e:
        check(e.sqlstate == "55006", f"[{mode}] a second plain acquire fails with ObjectInUse ({e.sqlstate})")

    # (2) the token as a native int, both ways.
    check(write(s1, t1) == 1, f"[{mode}] fenced write with T1 accepted")
    stored = one(s1, f"SELECT fence_token FROM {table} WHERE id = 1")
    check(type(stored) is int and stored == t1, f"[{mode}] T1 read back exactly as an int ({stored})")
    check(one(s1, "SELECT fencing.release(%s)", (resource,)) is True, f"[{mode}] T1 released")
    t2 = one(s2, "SELECT fencing.acquire(%s, wait => '10 s')", (resource,))
    check(t2 > t1 and write(s2, t2) == 1, f"[{mode}] T2 > T1, fenced write with T2 accepted")

    # (3) the stale write.
    try:
        write(s1, t1)
        check(False, f"[{mode}] stale write rejected")
    except psycopg.IntegrityError as e:
        check(e.sqlstate == "23T01", f"[{mode}] stale write raises IntegrityError ({type(e).__name__}), sqlstate {e.sqlstate}")
        check(e.diag.message_primary == f'stale fence token for relation "{table}"'
              and bool(e.diag.message_detail) and bool(e.diag.message_hint),
              f"[{mode}] message, detail and hint reachable in e.diag")
    check(one(s1, "SELECT 1") == 1, f"[{mode}] the connection is usable after the error")
    one(s2, "SELECT fencing.release(%s)", (resource,))

    # (4) acquire_xact inside conn.transaction().
    with s1.transaction():
        t3 = one(s1, "SELECT fencing.acquire_xact(%s)", (resource,))
        write(s1, t3)
    check(t3 > t2, f"[{mode}] acquire_xact in conn.transaction(): T3 > T2")
    check(one(s1, "SELECT count(*) FROM fencing.locks WHERE resource = %s", (resource,)) == 0,
          f"[{mode}] the transaction lock ended with the transaction")

    # (5) fencing.use(%s), then a write that carries no token.
    with s1.transaction():
        t4 = one(s1, "SELECT fencing.acquire_xact(%s)", (resource,))
        check(one(s1, "SELECT fencing.use(%s)", (t4,)) == t4, f"[{mode}] use(%s) returns the token")
        with s1.cursor(binary=binary) as cur:
            cur.execute(f"UPDATE {table} SET balance = balance + 1 WHERE id = 1")
    check(one(s1, f"SELECT fence_token FROM {table} WHERE id = 1") == t4,
          f"[{mode}] the write that carries no token took T4")
    for c in (s1, s2):
        c.close()
    return t4


def lease():
    # (6) lease expiry: the server ends the silent holder's connection.
    s3 = connect()
    t5 = s3.execute("SELECT fencing.acquire(%s, lease => '1 s')", (RESOURCE,)).fetchone()[0]
    time.sleep(2.5)
    try:
        s3.execute("SELECT 1")
        check(False, "the connection of the expired lease was ended")
    except psycopg.OperationalError as e:
        check("fencing lease of 1000 ms expired" in str(e),
              f"the expired lease ended the connection (OperationalError: {str(e).splitlines()[0]})")
    check(s3.closed, "psycopg reports the connection closed")
    with connect() as s4:
        t6 = s4.execute("SELECT fencing.acquire(%s)", (RESOURCE,)).fetchone()[0]
        s4.execute("UPDATE psycopg3_text_ledger SET fence_token = %s WHERE id = 1", (t6,))
        check(t6 > t5, "reconnected: acquired again with a greater token and wrote")
        try:
            s4.execute("UPDATE psycopg3_text_ledger SET fence_token = %s WHERE id = 1", (t5,))
            check(False, "the expired lease's token is stale")
        except psycopg.IntegrityError as e:
            check(e.sqlstate == "23T01", "a write with the expired lease's token fails with 23T01")


def main():
    scenario(binary=False)
    scenario(binary=True)
    lease()
    print(f"psycopg {psycopg.__version__}: " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
