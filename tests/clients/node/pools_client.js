// What node-postgres's Pool and postgres.js do to fencing's session-scoped
// locks (run by ../pools.sh; docs/clients.md, "Pools and session locks"):
// neither resets a connection it hands on, so a session lock stays with the
// connection and its next user's plain acquire fails with 55006.
// client.release(true) destroys a node-postgres client instead.
'use strict';

const pg = require('pg');
const postgres = require('postgres');

let failures = 0;
function check(ok, what) {
  console.log((ok ? 'ok - ' : 'FAILED - ') + what);
  if (!ok) failures++;
}
async function codeOf(promise) {
  try {
    await promise;
  } catch (e) {
    return e.code;
  }
  return null;
}

async function nodePostgresPool() {
  const pool = new pg.Pool({ max: 1 });
  pool.on('error', () => {}); // an idle client's error must not crash the process
  let c = await pool.connect();
  await c.query('CREATE EXTENSION IF NOT EXISTS fencing');
  const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  await c.query("SELECT fencing.acquire('pools:node-postgres')");
  c.release();
  c = await pool.connect();
  const same = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid === pid;
  check(same && await codeOf(c.query("SELECT fencing.acquire('pools:node-postgres')")) === '55006',
    "node-postgres Pool: the session lock stays with the released client; the next user's plain acquire fails with 55006");
  c.release(true); // destroy the client: its backend ends, and the lock with it
  c = await pool.connect();
  const other = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid !== pid;
  await c.query("SELECT fencing.acquire('pools:node-postgres')");
  check(other, 'node-postgres Pool: release(true) destroys the client; a new one acquires');
  await c.query('SELECT fencing.release_all()');
  c.release();
  await pool.end();
}

async function postgresJs() {
  const sql = postgres({ max: 1, onnotice: () => {} });
  let r = await sql.reserve();
  const [{ pid }] = await r`SELECT pg_backend_pid() AS pid`;
  await r`SELECT fencing.acquire('pools:postgresjs')`;
  r.release();
  r = await sql.reserve();
  const [{ pid: pid2 }] = await r`SELECT pg_backend_pid() AS pid`;
  check(pid2 === pid && await codeOf(r`SELECT fencing.acquire('pools:postgresjs')`) === '55006',
    "postgres.js: a reserved connection goes back with its session lock; the next user's plain acquire fails with 55006");
  await r`SELECT fencing.release_all()`;
  r.release();
  await sql.end();
}

(async () => {
  await nodePostgresPool();
  await postgresJs();
  console.log('pools (node-postgres, postgres.js): ' + (failures ? `${failures} check(s) failed` : 'all checks passed'));
  return failures ? 1 : 0;
})().then((rc) => { process.exitCode = rc; }, (e) => {
  console.error('pools: unexpected error:', e);
  process.exit(1); // open connections would keep the process alive
});
