// The client scenario in Node.js with postgres.js (the `postgres` package;
// run by ../postgresjs.sh).
//
// A fencing token is a bigint: postgres.js returns int8 as a string unless
// told otherwise, so this program parses int8 as BigInt with its bigint type
// option (types: { bigint: postgres.BigInt }), as for any bigint column, and
// passes BigInt parameters. The stale-write error is a postgres.PostgresError
// with .code '23T01', .detail, .hint.
// postgres.js is a pool: a session lock needs one connection (sql.reserve(),
// or an instance with max: 1), and when a lease expires postgres.js silently
// opens a new connection for the next query: the program notices through
// pg_backend_pid() that its connection changed, and acquires again.
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
'use strict';

const postgres = require('postgres');

const RESOURCE = 'clients:postgresjs';
const ABOVE_2_53 = 9007199254740993n; // 2^53 + 1
let failures = 0;

function check(ok, what) {
  console.log((ok ? 'ok - ' : 'FAILED - ') + what);
  if (!ok) failures++;
}

async function errorOf(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  return null;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// PGHOST, PGPORT, PGUSER, PGDATABASE; int8 as BigInt.
const options = { types: { bigint: postgres.BigInt }, onnotice: () => {} };

async function main() {
  const sql = postgres(options);
  await sql`CREATE EXTENSION IF NOT EXISTS fencing`;
  await sql`DROP TABLE IF EXISTS postgresjs_ledger`;
  await sql`CREATE TABLE postgresjs_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)`;
  // protect() refuses tables holding tokens past 2^52: protect first, then a
  // superuser moves the counter past 2^53 + 1.
  await sql`SELECT fencing.protect('postgresjs_ledger')`;
  await sql`SELECT fencing.advance_past('postgresjs_ledger', ${ABOVE_2_53})`;
  await sql`INSERT INTO postgresjs_ledger VALUES (1, 0, ${ABOVE_2_53})`;
  const write = (q, token) => q`UPDATE postgresjs_ledger SET balance = balance + 1, fence_token = ${token} WHERE id = 1`;

  // (1) acquire on a reserved connection (a session lock needs one connection).
  const s1 = await sql.reserve();
  const [{ t1 }] = await s1`SELECT fencing.acquire(${RESOURCE}) AS t1`;
  check(typeof t1 === 'bigint' && t1 > ABOVE_2_53, `acquire: T1 = ${t1} is a BigInt above 2^53 + 1`);
  let e = await errorOf(s1`SELECT fencing.acquire(${RESOURCE})`);
  check(e && e.code === '55006', `a second plain acquire fails with 55006 (got ${e && e.code})`);

  // (2) BigInt both ways.
  check((await write(s1, t1)).count === 1, 'fenced write with T1 accepted');
  const [{ fence_token: stored }] = await sql`SELECT fence_token FROM postgresjs_ledger WHERE id = 1`;
  check(stored === t1, `T1 read back exactly as a BigInt (${stored})`);
  await s1`SELECT fencing.release(${RESOURCE})`;
  const s2 = await sql.reserve();
  const [{ t2 }] = await s2`SELECT fencing.acquire(${RESOURCE}, wait => '10 s') AS t2`;
  check(t2 > t1 && (await write(s2, t2)).count === 1, 'T2 > T1, fenced write with T2 accepted');

  // (3) the stale write.
  e = await errorOf(write(s1, t1));
  check(e instanceof postgres.PostgresError && e.code === '23T01', `stale write rejects with PostgresError, code ${e && e.code}`);
  check(e && e.message === 'stale fence token for relation "postgresjs_ledger"' && !!e.detail && !!e.hint,
    'message, detail and hint reachable');
  check((await s1`SELECT 1 AS one`)[0].one === 1, 'the connection is usable after the error');
  await s2`SELECT fencing.release(${RESOURCE})`;
  s1.release();
  s2.release();

  // (4) acquire_xact inside sql.begin(); (5) use(${token}), then a write with no token.
  const t3 = await sql.begin(async (tx) => {
    const [{ t }] = await tx`SELECT fencing.acquire_xact(${RESOURCE}) AS t`;
    await write(tx, t);
    return t;
  });
  const [{ n }] = await sql`SELECT count(*) AS n FROM fencing.locks WHERE resource = ${RESOURCE}`;
  check(t3 > t2 && n === 0n, 'acquire_xact in sql.begin(): T3 > T2, the lock ended with the commit');
  const t4 = await sql.begin(async (tx) => {
    const [{ t }] = await tx`SELECT fencing.acquire_xact(${RESOURCE}) AS t`;
    const [{ used }] = await tx`SELECT fencing.use(${t}) AS used`;
    check(used === t, 'use(${token}) with a BigInt returns the token');
    await tx`UPDATE postgresjs_ledger SET balance = balance + 1 WHERE id = 1`;
    return t;
  });
  const [{ fence_token: stamped }] = await sql`SELECT fence_token FROM postgresjs_ledger WHERE id = 1`;
  check(stamped === t4, 'use(${token}) stamped the write that carries no token with T4');

  // (6) lease expiry: the server ends the holder's connection; postgres.js
  // reconnects without telling, so compare the backend before and after.
  const holder = postgres({ ...options, max: 1 });
  const [{ pid: pid1, t5 }] = await holder`SELECT pg_backend_pid() AS pid, fencing.acquire(${RESOURCE}, lease => '1 s') AS t5`;
  await sleep(2500);
  const r = await errorOf(holder`SELECT 1`);
  let pid2 = null;
  if (r === null) {
    [{ pid: pid2 }] = await holder`SELECT pg_backend_pid() AS pid`;
  }
  check(r !== null || pid2 !== pid1,
    `the expired lease ended the connection (${r ? `the next query failed: ${r.code} ${r.message}` : `postgres.js reconnected silently: backend ${pid1} -> ${pid2}`})`);
  const [{ held }] = await holder`SELECT count(*) AS held FROM fencing.locks WHERE resource = ${RESOURCE}`;
  check(held === 0n, 'the lock of the expired lease is gone');
  const [{ t6 }] = await holder`SELECT fencing.acquire(${RESOURCE}) AS t6`;
  check(t6 > t5 && (await write(holder, t6)).count === 1, 'acquired again with a greater token and wrote');
  e = await errorOf(write(holder, t5));
  check(e && e.code === '23T01', "a write with the expired lease's token fails with 23T01");
  await holder`SELECT fencing.release_all()`;

  await holder.end();
  await sql.end();
  const version = require('./package-lock.json').packages['node_modules/postgres'].version;
  console.log(`postgres.js ${version}: ` + (failures ? `${failures} check(s) failed` : 'all checks passed'));
  return failures ? 1 : 0;
}

main().then((rc) => { process.exitCode = rc; }, (err) => {
  console.error('postgres.js client: unexpected error:', err);
  process.exit(1); // open connections would keep the process alive
});
