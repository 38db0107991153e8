"""The client scenario in Python with psycopg2 (run by python.sh).

A fencing token is a bigint: psycopg2 reads it as a Python int and sends an
int as its exact decimal text, with no type registration. The stale-write
error (SQLSTATE 23T01, class 23) arrives as psycopg2.IntegrityError.
Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
"""
import sys
import time

import psycopg2

RESOURCE = "clients:psycopg2"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1: not representable as a double
failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def connect():
    conn = psycopg2.connect("")  # PGHOST, PGPORT, PGUSER, PGDATABASE
    conn.autocommit = True       # a lock connection leaves no transaction open
    return conn


def one(conn, sql, params=()):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()[0]


def write(conn, token):
    with conn.cursor() as cur:
        cur.execute("UPDATE psycopg2_ledger SET balance = balance + 1, fence_token = %s WHERE id = 1", (token,))
        return cur.rowcount


def main():
    setup = connect()
    with setup.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute("DROP TABLE IF EXISTS psycopg2_ledger")
        cur.execute("CREATE TABLE psycopg2_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)")
        # protect() refuses tables holding tokens past 2^52: protect first, then a
        # superuser moves the counter past 2^53 + 1.
        cur.execute("SELECT fencing.protect('psycopg2_ledger')")
        cur.execute("SELECT fencing.advance_past('psycopg2_ledger', %s)", (ABOVE_2_53,))
        cur.execute("INSERT INTO psycopg2_ledger VALUES (1, 0, %s)", (ABOVE_2_53,))

    # (1) acquire; the default is not reentrant.
    s1 = connect()
    t1 = one(s1, "SELECT fencing.acquire(%s)", (RESOURCE,))
    check(type(t1) is int and t1 > ABOVE_2_53, f"acquire: T1 = {t1} is an int above 2^53 + 1")
    try:
        one(s1, "SELECT fencing.acquire(%s)", (RESOURCE,))
        check(False, "a second plain acquire on the same connection fails")
    except psycopg2.errors.ObjectInUse as e:
        check(e.pgcode == "55006", f"a second plain acquire fails with ObjectInUse, SQLSTATE {e.pgcode}")

    # (2) the token as a native int, both ways.
    check(write(s1, t1) == 1, "fenced write with T1 accepted")
    stored = one(s1, "SELECT fence_token FROM psycopg2_ledger WHERE id = 1")
    check(type(stored) is int and stored == t1, f"T1 read back exactly as an int ({stored})")
    check(one(s1, "SELECT fencing.release(%s)", (RESOURCE,)) is True, "T1 released")

    s2 = connect()
    t2 = one(s2, "SELECT fencing.acquire(%s, wait => '10 s')", (RESOURCE,))
    check(t2 > t1 and write(s2, t2) == 1, f"T2 = {t2} > T1, fenced write with T2 accepted")

    # (3) the stale write: IntegrityError, SQLSTATE 23T01, detail and hint.
    try:
        write(s1, t1)
        check(False, "stale write with T1 rejected")
    except psycopg2.IntegrityError as e:
        check(e.pgcode == "23T01", f"stale write raises IntegrityError ({type(e).__name__}), pgcode {e.pgcode}")
        check('stale fence token for relation "psycopg2_ledger"' in e.pgerror, "message names the relation")
        check(bool(e.diag.message_detail) and bool(e.diag.message_hint),
              f"detail and hint reachable: {e.diag.message_hint}")
    check(one(s1, "SELECT 1") == 1, "the connection is usable after the error")
    check(one(s2, "SELECT fencing.release(%s)", (RESOURCE,)) is True, "T2 released")

    # (4) acquire_xact inside psycopg2's transaction (the connection as context manager).
    s1.autocommit = False
    with s1:
        with s1.cursor() as cur:
            cur.execute("SELECT fencing.acquire_xact(%s)", (RESOURCE,))
            t3 = cur.fetchone()[0]
            cur.execute("UPDATE psycopg2_ledger SET fence_token = %s WHERE id = 1", (t3,))
    s1.autocommit = True
    check(t3 > t2, f"acquire_xact in a transaction: T3 = {t3} > T2")
    check(one(s1, "SELECT count(*) FROM fencing.locks WHERE resource = %s", (RESOURCE,)) == 0,
          "the transaction lock ended with the commit")

    # (5) fencing.use(%s) with a bind parameter, then a write that carries no token.
    s1.autocommit = False
    with s1:
        with s1.cursor() as cur:
            cur.execute("SELECT fencing.acquire_xact(%s)", (RESOURCE,))
            t4 = cur.fetchone()[0]
            cur.execute("SELECT fencing.use(%s)", (t4,))
            cur.execute("UPDATE psycopg2_ledger SET balance = balance + 1 WHERE id = 1")
    s1.autocommit = True
    check(one(s1, "SELECT fence_token FROM psycopg2_ledger WHERE id = 1") == t4,
          "use(%s) stamps the write that carries no token with T4")
    try:
        one(s1, "SELECT fencing.use(%s)", (t4,))
        check(False, "use() outside a transaction fails")
    except psycopg2.Error as e:
        check(e.pgcode == "25P01", f"use() outside a transaction block fails with {e.pgcode}")

    # (6) lease expiry: the server ends the silent holder's connection.
    s3 = connect()
    t5 = one(s3, "SELECT fencing.acquire(%s, lease => '1 s')", (RESOURCE,))
    time.sleep(2.5)
    try:
        one(s3, "SELECT 1")
        check(False, "the connection of the expired lease was ended")
    except psycopg2.OperationalError as e:
        check("fencing lease" in str(e) or s3.closed != 0,
              f"the expired lease ended the connection (OperationalError: {str(e).splitlines()[0]})")
    check(s3.closed != 0, "psycopg2 reports the connection closed")
    s3 = connect()
    t6 = one(s3, "SELECT fencing.acquire(%s)", (RESOURCE,))
    check(t6 > t5 and write(s3, t6) == 1, "reconnected: acquired again with a greater token and wrote")
    try:
        write(s3, t5)
        check(False, "the expired lease's token is stale")
    except psycopg2.IntegrityError as e:
        check(e.pgcode == "23T01", "a write with the expired lease's token fails with 23T01")
    one(s3, "SELECT fencing.release_all()")

    for c in (s1, s2, s3, setup):
        c.close()
    print(f"psycopg2 {psycopg2.__version__.split()[0]}: " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
