"""The client scenario in Python with psycopg2 (run by python.sh).

Acquire (T1), fenced write with T1, release; a second session acquires
(T2 > T1) and writes; the stale write with T1 fails with SQLSTATE 23T01.
Tokens are above 2^53 and must come back exactly: fencing.token values are
read as Python ints (arbitrary precision) through a registered typecaster.
Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
"""
import sys

import psycopg2
import psycopg2.extensions

RESOURCE = "clients:python"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1: not representable as a double
failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def connect():
    conn = psycopg2.connect("")  # PGHOST, PGPORT, PGUSER, PGDATABASE
    conn.autocommit = True       # the lock connection: no transaction left open
    # fencing.token -> int (exact, whatever its size).
    with conn.cursor() as cur:
        cur.execute("SELECT 'fencing.token'::regtype::oid")
        oid = cur.fetchone()[0]
    token_type = psycopg2.extensions.new_type(
        (oid,), "FENCING_TOKEN", lambda value, cur: None if value is None else int(value))
    psycopg2.extensions.register_type(token_type, conn)
    return conn


def acquire(conn, resource):
    with conn.cursor() as cur:
        cur.execute("SELECT fencing.acquire(%s)", (resource,))
        return cur.fetchone()[0]


def release(conn, resource):
    with conn.cursor() as cur:
        cur.execute("SELECT fencing.release(%s)", (resource,))
        return cur.fetchone()[0]


def fenced_write(conn, token, amount):
    """UPDATE in its own transaction; returns the row count."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        try:
            cur.execute("UPDATE py_ledger SET balance = balance + %s, fence_token = %s WHERE id = 1",
                        (amount, token))
            n = cur.rowcount
            cur.execute("COMMIT")
            return n
        except psycopg2.Error:
            cur.execute("ROLLBACK")
            raise


def sqlstate_of(fn):
    try:
        fn()
    except psycopg2.Error as e:
        return e.pgcode
    return None


def main():
    setup = psycopg2.connect("")
    setup.autocommit = True
    with setup.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute("DROP TABLE IF EXISTS py_ledger")
        cur.execute("CREATE TABLE py_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)")
        # Tokens above 2^53: protect() refuses tables holding tokens past 2^52,
        # so the table is protected first and a superuser moves the counter.
        cur.execute("SELECT fencing.protect('py_ledger')")
        cur.execute("SELECT fencing.advance_past('py_ledger', %s)", (ABOVE_2_53,))
        cur.execute("INSERT INTO py_ledger VALUES (1, 0, %s)", (ABOVE_2_53,))

    # Session 1: acquire, write, release.
    s1 = connect()
    t1 = acquire(s1, RESOURCE)
    print(f"T1 = {t1}")
    check(type(t1) is int and t1 > ABOVE_2_53, "T1 is an int above 2^53 + 1")
    check(fenced_write(s1, t1, 100) == 1, "fenced write with T1 accepted")
    with s1.cursor() as cur:
        cur.execute("SELECT fence_token, fence_token::text, fencing.current(%s)::text FROM py_ledger WHERE id = 1",
                    (RESOURCE,))
        stored, stored_text, current_text = cur.fetchone()
    check(stored == t1 and stored_text == str(t1), f"T1 read back exactly ({stored_text})")
    check(current_text == str(t1), "fencing.current returns T1 exactly")
    check(release(s1, RESOURCE) is True, "T1 released")

    # Session 2: the next acquirer.
    s2 = connect()
    t2 = acquire(s2, RESOURCE)
    print(f"T2 = {t2}")
    check(t2 > t1, "T2 > T1")
    check(fenced_write(s2, t2, 100) == 1, "fenced write with T2 accepted")

    # The stale write with T1 (session 1 still thinks it may write).
    state = sqlstate_of(lambda: fenced_write(s1, t1, 100))
    check(state == "23T01", f"stale write with T1 fails with SQLSTATE 23T01 (got {state})")

    def validate(tok):
        with s1.cursor() as cur:
            cur.execute("SELECT fencing.validate(%s, %s)", (RESOURCE, tok))
            return cur.fetchone()[0]
    state = sqlstate_of(lambda: validate(t1))
    check(state == "23T01", f"validate(T1) fails with SQLSTATE 23T01 (got {state})")
    check(validate(t2) == t2, "validate(T2) returns T2 exactly")

    with s2.cursor() as cur:
        cur.execute("SELECT balance, fence_token FROM py_ledger WHERE id = 1")
        balance, stored = cur.fetchone()
    check(stored == t2 and balance == 200, "the row holds T2 and only the two fenced writes")
    check(release(s2, RESOURCE) is True, "T2 released")
    with s2.cursor() as cur:
        cur.execute("SELECT count(*) FROM fencing.locks WHERE resource = %s", (RESOURCE,))
        check(cur.fetchone()[0] == 0, "no fencing lock left")

    for c in (s1, s2, setup):
        c.close()
    if failures:
        print(f"python client: {failures} check(s) failed")
        return 1
    print("python client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
