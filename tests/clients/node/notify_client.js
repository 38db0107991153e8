// Listening for lock events with node-postgres (run by ../notify_node.sh).
//
// A listener Client runs LISTEN fencing and gets a 'notification' event per
// lock event; msg.payload is JSON:
//   {"resource": ..., "event": "granted"|"released"|"lost"|"delay_ended",
//    "token": <integer>, "time": "<UTC, RFC 3339>"}
// JSON.parse reads numbers as doubles, exact only below 2^53. fencing's
// tokens stay below 2^53 unless a superuser moved the counter past it, but
// the token is read here from the payload's text as a BigInt, as for any
// bigint (tokens from queries are BigInt too: setTypeParser(20, BigInt)).
//
// Checked: granted and released carry the token acquire returned; nothing
// for a rolled back transaction (notifications follow commit order, so a
// later committed event arriving first proves it); acquire_xact's granted
// then released at commit; a terminated holder's lost arrives (sent by the
// supervisor's notifier), and a waiter acquires when it hears it. Connection parameters come from
// the libpq environment (PGHOST, PGPORT, ...); the user must be allowed to
// call fencing.set_notify (a superuser here).
'use strict';

const pg = require('pg');

pg.types.setTypeParser(20, BigInt);

let failures = 0;
function check(ok, what) {
  console.log((ok ? 'ok - ' : 'FAILED - ') + what);
  if (!ok) failures++;
}

// A lock event from a notification: the JSON object, with the token as a BigInt.
function lockEvent(msg) {
  const e = JSON.parse(msg.payload);
  e.token = BigInt(/"token":(-?\d+)/.exec(msg.payload)[1]);
  e.pid = msg.processId;
  e.raw = msg.payload;
  return e;
}

async function connect() {
  const c = new pg.Client();
  c.on('error', () => {});
  await c.connect();
  return c;
}

async function one(c, sql, params) {
  const { rows } = await c.query({ text: sql, values: params, rowMode: 'array' });
  return rows[0][0];
}

async function main() {
  const setup = await connect();
  await setup.query('SET client_min_messages = warning');
  await setup.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await setup.query("SELECT fencing.set_notify('jobs:7')");
  await setup.query("SELECT fencing.set_notify('jobs:marker')");

  // The listener: every event into a queue; next() waits for the next one.
  const listener = await connect();
  const queue = [];
  let wake = null;
  listener.on('notification', (msg) => {
    if (msg.channel !== 'fencing') return;
    queue.push(lockEvent(msg));
    if (wake) wake();
  });
  await listener.query('LISTEN fencing');
  async function next(timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    while (queue.length === 0) {
      if (Date.now() > deadline) throw new Error('no lock event within ' + timeoutMs + ' ms');
      await new Promise((resolve) => { wake = resolve; setTimeout(resolve, 100); });
    }
    return queue.shift();
  }

  // Takes resource, sleeping until its lock is released or lost while it is
  // busy. Returns the token and the event that last woke it (or null).
  async function acquireWhenFree(c, resource) {
    let woke = null;
    for (;;) {
      const token = await one(c, 'SELECT fencing.try_acquire($1)', [resource]);
      if (token !== null) return { token, woke };
      for (;;) {
        const ev = await next(60000);
        if (ev.resource === resource && (ev.event === 'released' || ev.event === 'lost')) { woke = ev; break; }
      }
    }
  }

  const worker = await connect();
  const workerPid = await one(worker, 'SELECT pg_backend_pid()');

  // granted and released, with the token acquire returned.
  const token = await one(worker, 'SELECT fencing.acquire($1)', ['jobs:7']);
  let e = await next();
  check(e.event === 'granted' && e.resource === 'jobs:7' && e.token === token,
    `granted jobs:7 with token ${token} (a BigInt from the payload's text)`);
  check(/^\{"resource":"jobs:7","event":"granted","token":\d+,"time":"[0-9T:.-]+Z"\}$/.test(e.raw),
    `payload ${e.raw}`);
  check(e.pid === workerPid, 'sent by the acquiring backend');
  await worker.query("SELECT fencing.release('jobs:7')");
  e = await next();
  check(e.event === 'released' && e.token === token, 'released, same token');

  // Nothing for a rolled back transaction: the marker, committed later, comes first.
  await worker.query('BEGIN');
  await worker.query("SELECT fencing.acquire_xact('jobs:7')");
  await worker.query('ROLLBACK');
  await worker.query("SELECT fencing.acquire('jobs:marker')");
  await worker.query("SELECT fencing.release('jobs:marker')");
  e = await next();
  check(e.resource === 'jobs:marker' && e.event === 'granted',
    'a rolled back acquire_xact sends nothing (the next event is a later commit\'s)');
  await next();

  // acquire_xact committed: granted, then released at the commit.
  await worker.query('BEGIN');
  const t2 = await one(worker, "SELECT fencing.acquire_xact('jobs:7')");
  await new Promise((r) => setTimeout(r, 200));
  check(queue.length === 0, 'nothing before the commit');
  await worker.query('COMMIT');
  const e1 = await next();
  const e2 = await next();
  check(e1.event === 'granted' && e1.token === t2 && e2.event === 'released' && e2.token === t2,
    'a committed acquire_xact: granted, then released');

  // Waiting without polling: the holder is terminated, its session sends lost.
  const holder = await connect();
  const holderPid = await one(holder, 'SELECT pg_backend_pid()');
  const t3 = await one(holder, "SELECT fencing.acquire('jobs:7')");
  await next(); // granted
  let done = false;
  const waiter = acquireWhenFree(worker, 'jobs:7').then((r) => { done = true; return r; });
  await new Promise((r) => setTimeout(r, 300));
  check(!done, 'the waiter sleeps while the lock is held');
  await setup.query('SELECT pg_terminate_backend($1)', [holderPid]);
  const { token: t4, woke } = await waiter;
  check(woke !== null && woke.event === 'lost' && woke.token === t3 && woke.pid !== holderPid,
    "a terminated holder: lost, sent for it by the supervisor's notifier, wakes the waiter");
  check(t4 > t3, 'the waiter acquires once it hears the lock is gone');
  await worker.query('SELECT fencing.release_all()');

  await Promise.all([setup.end(), listener.end(), worker.end()]);
  await holder.end().catch(() => {});
}

main().then(
  () => { console.log(`${failures} failures`); process.exit(failures ? 1 : 0); },
  (err) => { console.error(err); process.exit(1); },
);
