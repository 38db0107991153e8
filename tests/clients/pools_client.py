"""What connection pools do to fencing's session-scoped locks (run by pools.sh).

docs/clients.md ("Pools and session locks") states these; this program checks
them against the installed libraries:
- SQLAlchemy's QueuePool resets a returned connection with a ROLLBACK: a
  session lock stays with the connection and goes to its next user, whose
  plain acquire of the resource fails with 55006 (not reentrant by default).
  acquire_xact inside the transaction leaves nothing behind.
- asyncpg's pool resets a released connection with
  pg_advisory_unlock_all(), CLOSE ALL, UNLISTEN *, RESET ALL: fencing's
  session locks are dropped silently (fencing notices: the old token no longer
  validates, release returns false).
Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
"""
import asyncio
import sys

import asyncpg
import sqlalchemy
from sqlalchemy import exc, text

failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def sqlalchemy_queue_pool():
    engine = sqlalchemy.create_engine("postgresql+psycopg2://", future=True, pool_size=1, max_overflow=0)
    with engine.connect() as c:
        c.execute(text("CREATE EXTENSION IF NOT EXISTS fencing"))
        c.commit()
        pid = c.scalar(text("SELECT pg_backend_pid()"))
        c.scalar(text("SELECT fencing.acquire('pools:sqlalchemy')"))
        c.commit()
    # The next user of the pool gets the same connection, lock included.
    with engine.connect() as c:
        same = c.scalar(text("SELECT pg_backend_pid()")) == pid
        held = c.scalar(text("SELECT count(*) FROM fencing.locks WHERE resource = 'pools:sqlalchemy' AND pid = pg_backend_pid()"))
        check(same and held == 1, "SQLAlchemy QueuePool: the session lock stays with the returned connection")
        try:
            c.scalar(text("SELECT fencing.acquire('pools:sqlalchemy')"))
            check(False, "SQLAlchemy QueuePool: the next user's plain acquire fails")
        except exc.OperationalError as e:
            check(e.orig.pgcode == "55006", "SQLAlchemy QueuePool: the next user's plain acquire fails with 55006")
        c.rollback()
        c.scalar(text("SELECT fencing.release('pools:sqlalchemy')"))
        c.commit()
    # acquire_xact in the transaction: nothing outlives it.
    with engine.begin() as c:
        c.scalar(text("SELECT fencing.acquire_xact('pools:sqlalchemy')"))
    with engine.connect() as c:
        check(c.scalar(text("SELECT count(*) FROM fencing.locks WHERE resource = 'pools:sqlalchemy'")) == 0,
              "SQLAlchemy QueuePool: acquire_xact leaves no lock on the returned connection")
    engine.dispose()


async def asyncpg_pool():
    pool = await asyncpg.create_pool(min_size=1, max_size=1)
    async with pool.acquire() as c:
        pid = await c.fetchval("SELECT pg_backend_pid()")
        token = await c.fetchval("SELECT fencing.acquire('pools:asyncpg')")
        reset = c._get_reset_query()
    check("pg_advisory_unlock_all()" in reset and "RESET ALL" in reset,
          "asyncpg pool: the reset on release runs pg_advisory_unlock_all() and RESET ALL")
    async with pool.acquire() as c:
        same = await c.fetchval("SELECT pg_backend_pid()") == pid
        held = await c.fetchval("SELECT count(*) FROM fencing.locks WHERE resource = 'pools:asyncpg'")
        check(same and held == 0, "asyncpg pool: the released connection no longer holds the session lock")
        try:
            await c.fetchval("SELECT fencing.validate('pools:asyncpg', $1)", token)
            check(False, "asyncpg pool: the dropped lock's token no longer validates")
        except asyncpg.PostgresError as e:
            check(e.sqlstate == "23T01", "asyncpg pool: the dropped lock's token no longer validates (23T01)")
        check(await c.fetchval("SELECT fencing.release('pools:asyncpg')") is False,
              "asyncpg pool: release of the dropped lock returns false")
    await pool.close()


def main():
    sqlalchemy_queue_pool()
    asyncio.run(asyncpg_pool())
    print("pools (SQLAlchemy, asyncpg): " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
