"""The client scenario in Python with asyncpg (run by asyncpg.sh).

A fencing token is a bigint: asyncpg reads it as a Python int (binary int8)
and sends an int as int8, with no codec. asyncpg maps exact SQLSTATEs to
exception classes and has none for 23T01: the stale-write error arrives as
asyncpg.exceptions.UnknownPostgresError (a PostgresError, not an
IntegrityConstraintViolationError), with .sqlstate == '23T01', .detail and
.hint. Connection parameters come from the libpq environment (PGHOST, ...).
"""
import asyncio
import sys

import asyncpg

RESOURCE = "clients:asyncpg"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1
failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


async def main():
    setup = await asyncpg.connect()  # PGHOST, PGPORT, PGUSER, PGDATABASE
    await setup.execute("SET client_min_messages = warning")
    await setup.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    await setup.execute("DROP TABLE IF EXISTS asyncpg_ledger")
    await setup.execute("CREATE TABLE asyncpg_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)")
    # protect() refuses tables holding tokens past 2^52: protect first, then a
    # superuser moves the counter past 2^53 + 1.
    await setup.execute("SELECT fencing.protect('asyncpg_ledger')")
    await setup.execute("SELECT fencing.advance_past('asyncpg_ledger', $1)", ABOVE_2_53)
    await setup.execute("INSERT INTO asyncpg_ledger VALUES (1, 0, $1)", ABOVE_2_53)
    write = "UPDATE asyncpg_ledger SET balance = balance + 1, fence_token = $1 WHERE id = 1"

    s1, s2 = await asyncpg.connect(), await asyncpg.connect()
    # (1) acquire; not reentrant by default.
    t1 = await s1.fetchval("SELECT fencing.acquire($1)", RESOURCE)
    check(type(t1) is int and t1 > ABOVE_2_53, f"acquire: T1 = {t1} is an int above 2^53 + 1")
    try:
        await s1.fetchval("SELECT fencing.acquire($1)", RESOURCE)
        check(False, "a second plain acquire fails")
    except asyncpg.exceptions.ObjectInUseError as e:
        check(e.sqlstate == "55006", f"a second plain acquire fails with ObjectInUseError ({e.sqlstate})")

    # (2) the token as a native int, both ways.
    check(await s1.execute(write, t1) == "UPDATE 1", "fenced write with T1 accepted")
    stored = await s1.fetchval("SELECT fence_token FROM asyncpg_ledger WHERE id = 1")
    check(type(stored) is int and stored == t1, f"T1 read back exactly as an int ({stored})")
    check(await s1.fetchval("SELECT fencing.release($1)", RESOURCE) is True, "T1 released")
    t2 = await s2.fetchval("SELECT fencing.acquire($1, wait => '10 s')", RESOURCE)
    check(t2 > t1 and await s2.execute(write, t2) == "UPDATE 1", "T2 > T1, fenced write with T2 accepted")

    # (3) the stale write.
    try:
        await s1.execute(write, t1)
        check(False, "stale write rejected")
    except asyncpg.PostgresError as e:
        check(type(e) is asyncpg.exceptions.UnknownPostgresError and e.sqlstate == "23T01",
              f"stale write raises {type(e).__name__} with sqlstate {e.sqlstate}")
        check(not isinstance(e, asyncpg.exceptions.IntegrityConstraintViolationError),
              "asyncpg does not classify the unknown 23T01 as IntegrityConstraintViolationError")
        check(e.message == 'stale fence token for relation "asyncpg_ledger"' and bool(e.detail) and bool(e.hint),
              "message, detail and hint reachable")
    check(await s1.fetchval("SELECT 1") == 1, "the connection is usable after the error")
    await s2.fetchval("SELECT fencing.release($1)", RESOURCE)

    # (4) acquire_xact inside conn.transaction().
    async with s1.transaction():
        t3 = await s1.fetchval("SELECT fencing.acquire_xact($1)", RESOURCE)
        await s1.execute(write, t3)
    check(t3 > t2, "acquire_xact in conn.transaction(): T3 > T2")
    check(await s1.fetchval("SELECT count(*) FROM fencing.locks WHERE resource = $1", RESOURCE) == 0,
          "the transaction lock ended with the transaction")

    # (5) fencing.use($1), then a write that carries no token.
    async with s1.transaction():
        t4 = await s1.fetchval("SELECT fencing.acquire_xact($1)", RESOURCE)
        check(await s1.fetchval("SELECT fencing.use($1)", t4) == t4, "use($1) returns the token")
        await s1.execute("UPDATE asyncpg_ledger SET balance = balance + 1 WHERE id = 1")
    check(await s1.fetchval("SELECT fence_token FROM asyncpg_ledger WHERE id = 1") == t4,
          "the write that carries no token took T4")

    # (6) lease expiry: the server ends the silent holder's connection.
    s3 = await asyncpg.connect()
    t5 = await s3.fetchval("SELECT fencing.acquire($1, lease => '1 s')", RESOURCE)
    await asyncio.sleep(2.5)
    try:
        await s3.fetchval("SELECT 1")
        check(False, "the connection of the expired lease was ended")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as e:
        check(True, f"the expired lease ended the connection ({type(e).__name__}: {e})")
    check(s3.is_closed(), "asyncpg reports the connection closed")
    s4 = await asyncpg.connect()
    t6 = await s4.fetchval("SELECT fencing.acquire($1)", RESOURCE)
    check(t6 > t5 and await s4.execute(write, t6) == "UPDATE 1", "reconnected: acquired again with a greater token and wrote")
    try:
        await s4.execute(write, t5)
        check(False, "the expired lease's token is stale")
    except asyncpg.PostgresError as e:
        check(e.sqlstate == "23T01", "a write with the expired lease's token fails with 23T01")

    for c in (s1, s2, s4, setup):
        await c.close()
    print(f"asyncpg {asyncpg.__version__}: " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
