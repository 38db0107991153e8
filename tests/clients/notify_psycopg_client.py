"""Listening for lock events with psycopg 3 (run by notify_psycopg.sh).

A listener connection runs LISTEN fencing and reads notifications as they
arrive (AsyncConnection.notifies()); each payload is a JSON object:
{"resource": ..., "event": "granted" | "released" | "lost" | "delay_ended",
 "token": <int>, "time": "<UTC, RFC 3339>"}. Python's json module reads the
token as an exact int. A worker waits for a busy resource without polling:
it sleeps until the holder's lock is released or lost, then acquires.

Checked here: granted and released carry the token acquire returned;
nothing arrives for a transaction that rolls back (notifications follow
commit order, so a later committed event arriving first proves it); a
committed acquire_xact sends granted then released; a terminated holder's
lost arrives, sent by the supervisor's notifier. Connection parameters come from the libpq
environment (PGHOST, PGPORT, ...); the user must be allowed to call
fencing.set_notify (a superuser here).
"""
import asyncio
import json
import sys

import psycopg

failures = 0


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


async def listen(conn, queue):
    """Forever: every notification on channel "fencing", decoded, into queue."""
    await conn.execute("LISTEN fencing")
    async for n in conn.notifies():
        event = json.loads(n.payload)
        event["pid"] = n.pid
        await queue.put(event)


async def next_event(queue, timeout=10.0):
    return await asyncio.wait_for(queue.get(), timeout)


async def acquire_when_free(worker, queue, resource):
    """Takes resource, sleeping until its lock is released or lost while it
    is busy. Returns the token, and the event that last woke it (or None)."""
    woke = None
    while True:
        cur = await worker.execute("SELECT fencing.try_acquire(%s)", (resource,))
        token = (await cur.fetchone())[0]
        if token is not None:
            return token, woke
        while True:
            e = await queue.get()
            if e["resource"] == resource and e["event"] in ("released", "lost"):
                woke = e
                break


async def main():
    setup = await psycopg.AsyncConnection.connect("", autocommit=True)
    await setup.execute("SET client_min_messages = warning")
    await setup.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    await setup.execute("SELECT fencing.set_notify('jobs:7')")
    await setup.execute("SELECT fencing.set_notify('jobs:marker')")

    listener = await psycopg.AsyncConnection.connect("", autocommit=True)
    queue = asyncio.Queue()
    task = asyncio.create_task(listen(listener, queue))
    await asyncio.sleep(0.2)  # LISTEN has run

    worker = await psycopg.AsyncConnection.connect("", autocommit=True)

    async def one(conn, sql, params=()):
        cur = await conn.execute(sql, params)
        return (await cur.fetchone())[0]

    # granted and released, with the token acquire returned.
    token = await one(worker, "SELECT fencing.acquire(%s)", ("jobs:7",))
    e = await next_event(queue)
    check(e["event"] == "granted" and e["resource"] == "jobs:7" and e["token"] == token,
          f"granted jobs:7 with token {token} (an exact int: {type(e['token']).__name__})")
    check(list(e.keys())[:4] == ["resource", "event", "token", "time"] and e["time"].endswith("Z"),
          f"payload fields resource, event, token, time ({e['time']})")
    check(e["pid"] == worker.info.backend_pid, "sent by the acquiring backend")
    await worker.execute("SELECT fencing.release('jobs:7')")
    e = await next_event(queue)
    check((e["event"], e["token"]) == ("released", token), "released, same token")

    # Nothing for a transaction that rolls back: the marker, committed later,
    # is the next event.
    async with worker.transaction(force_rollback=True):
        await worker.execute("SELECT fencing.acquire_xact('jobs:7')")
    await worker.execute("SELECT fencing.acquire('jobs:marker'); SELECT fencing.release('jobs:marker')")
    e = await next_event(queue)
    check(e["resource"] == "jobs:marker" and e["event"] == "granted",
          "a rolled back acquire_xact sends nothing (the next event is a later commit's)")
    await next_event(queue)  # the marker's release

    # A committed acquire_xact: granted, then released at the commit.
    async with worker.transaction():
        t2 = await one(worker, "SELECT fencing.acquire_xact('jobs:7')")
        check(queue.empty(), "nothing before the commit")
    e1, e2 = await next_event(queue), await next_event(queue)
    check((e1["event"], e1["token"], e2["event"], e2["token"]) == ("granted", t2, "released", t2),
          "a committed acquire_xact: granted, then released")

    # Waiting for a busy resource without polling: the holder is terminated,
    # its session sends lost, the waiter acquires.
    holder = await psycopg.AsyncConnection.connect("", autocommit=True)
    t3 = await one(holder, "SELECT fencing.acquire('jobs:7')")
    await next_event(queue)  # granted
    waiter = asyncio.create_task(acquire_when_free(worker, queue, "jobs:7"))
    await asyncio.sleep(0.3)
    check(not waiter.done(), "the waiter sleeps while the lock is held")
    await setup.execute("SELECT pg_terminate_backend(%s)", (holder.info.backend_pid,))
    t4, e = await asyncio.wait_for(waiter, 10.0)
    check(e is not None and (e["event"], e["token"]) == ("lost", t3) and e["pid"] != holder.info.backend_pid,
          "a terminated holder: lost, sent for it by the supervisor's notifier, wakes the waiter")
    check(t4 > t3, "the waiter acquires once it hears the lock is gone")
    await worker.execute("SELECT fencing.release_all()")

    task.cancel()
    for c in (setup, listener, worker):
        await c.close()
    try:
        await holder.close()
    except psycopg.Error:
        pass


asyncio.run(main())
print(f"{failures} failures")
sys.exit(1 if failures else 0)
