// The client scenario in Node.js with node-postgres (run by ../node.sh).
//
// A fencing token is a bigint: node-postgres returns int8 as a string unless
// told otherwise, so this program parses int8 as BigInt, as for any bigint
// column (pg.types.setTypeParser(20, BigInt)), and passes BigInt parameters,
// which pg sends as their exact decimal text. Never Number(token).
// The stale-write error is a DatabaseError with .code '23T01', .detail, .hint.
// A session holding a leased lock must have an 'error' listener on its
// Client: when the lease expires the server ends the connection, and an idle
// Client without a listener crashes the process (checked below in a child).
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
'use strict';

const { spawn } = require('child_process');
const pg = require('pg');

pg.types.setTypeParser(20, BigInt); // int8 -> BigInt, for every bigint column

const RESOURCE = 'clients:node-postgres';
const ABOVE_2_53 = 9007199254740993n; // 2^53 + 1
const WRITE = 'UPDATE node_ledger SET balance = balance + 1, fence_token = $1 WHERE id = 1';
let failures = 0;

function check(ok, what) {
  console.log((ok ? 'ok - ' : 'FAILED - ') + what);
  if (!ok) failures++;
}

async function connect() {
  const c = new pg.Client(); // PGHOST, PGPORT, PGUSER, PGDATABASE
  c.errors = [];
  c.on('error', (e) => { c.errors.push(e); });
  await c.connect();
  return c;
}

async function errorOf(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  return null;
}

async function one(c, sql, params) {
  const { rows } = await c.query({ text: sql, values: params, rowMode: 'array' });
  return rows[0][0];
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A child that holds a leased lock on a Client with no 'error' listener.
function unguardedChild() {
  const code = `
    const pg = require('pg');
    const c = new pg.Client();
    c.connect().then(() => c.query("SELECT fencing.acquire('${RESOURCE}:child', lease => '1 s')"))
      .then(() => setTimeout(() => { console.log('still alive'); process.exit(0); }, 5000));`;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', code], { cwd: __dirname, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('exit', (status) => resolve({ status, out }));
  });
}

async function main() {
  const setup = await connect();
  await setup.query('SET client_min_messages = warning');
  await setup.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await setup.query('DROP TABLE IF EXISTS node_ledger');
  await setup.query('CREATE TABLE node_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)');
  // Tokens above 2^53: protect() refuses tables holding tokens past 2^52,
  // so the table is protected first and a superuser moves the counter.
  await setup.query("SELECT fencing.protect('node_ledger')");
  await setup.query("SELECT fencing.advance_past('node_ledger', $1)", [ABOVE_2_53]);
  await setup.query('INSERT INTO node_ledger VALUES (1, 0, $1)', [ABOVE_2_53]);

  const s1 = await connect();
  const s2 = await connect();
  // (1) acquire; not reentrant by default.
  const t1 = await one(s1, 'SELECT fencing.acquire($1)', [RESOURCE]);
  check(typeof t1 === 'bigint' && t1 > ABOVE_2_53, `acquire: T1 = ${t1} is a BigInt above 2^53 + 1`);
  let e = await errorOf(one(s1, 'SELECT fencing.acquire($1)', [RESOURCE]));
  check(e && e.code === '55006', `a second plain acquire fails with 55006 (got ${e && e.code})`);

  // (2) BigInt both ways.
  check((await s1.query(WRITE, [t1])).rowCount === 1, 'fenced write with T1 accepted');
  const stored = await one(s1, 'SELECT fence_token FROM node_ledger WHERE id = 1');
  check(stored === t1, `T1 read back exactly as a BigInt (${stored})`);
  await s1.query('SELECT fencing.release($1)', [RESOURCE]);
  const t2 = await one(s2, "SELECT fencing.acquire($1, wait => '10 s')", [RESOURCE]);
  check(t2 > t1 && (await s2.query(WRITE, [t2])).rowCount === 1, 'T2 > T1, fenced write with T2 accepted');

  // (3) the stale write.
  e = await errorOf(s1.query(WRITE, [t1]));
  check(e instanceof pg.DatabaseError && e.code === '23T01', `stale write rejects with a DatabaseError, code ${e && e.code}`);
  check(e && e.message === 'stale fence token for relation "node_ledger"' && !!e.detail && !!e.hint,
    'message, detail and hint reachable');
  check(await one(s1, 'SELECT 1') === 1, 'the connection is usable after the error');
  await s2.query('SELECT fencing.release($1)', [RESOURCE]);

  // (4) acquire_xact in a transaction on a pooled client; (5) use($1).
  const pool = new pg.Pool({ max: 2 });
  const tx = await pool.connect();
  let t3;
  let t4;
  try {
    await tx.query('BEGIN');
    t3 = await one(tx, 'SELECT fencing.acquire_xact($1)', [RESOURCE]);
    await tx.query(WRITE, [t3]);
    await tx.query('COMMIT');
    check(t3 > t2 && await one(tx, 'SELECT count(*) FROM fencing.locks WHERE resource = $1', [RESOURCE]) === 0n,
      'acquire_xact in BEGIN/COMMIT: T3 > T2, the lock ended with the commit');
    await tx.query('BEGIN');
    t4 = await one(tx, 'SELECT fencing.acquire_xact($1)', [RESOURCE]);
    check(await one(tx, 'SELECT fencing.use($1)', [t4]) === t4, 'use($1) with a BigInt returns the token');
    await tx.query('UPDATE node_ledger SET balance = balance + 1 WHERE id = 1');
    await tx.query('COMMIT');
  } catch (err) {
    await tx.query('ROLLBACK');
    throw err;
  } finally {
    tx.release();
  }
  check(await one(s1, 'SELECT fence_token FROM node_ledger WHERE id = 1') === t4,
    'use($1) stamped the write that carries no token with T4');
  await pool.end();

  // (6) lease expiry: the server ends the silent holder's connection.
  const child = unguardedChild();
  const s3 = await connect();
  const t5 = await one(s3, "SELECT fencing.acquire($1, lease => '1 s')", [RESOURCE]);
  await sleep(2500);
  const le = s3.errors.find((x) => x.code === '57P05');
  check(le && /fencing lease of 1000 ms expired/.test(le.message),
    `the Client's 'error' event reports the expired lease (${s3.errors.map((x) => `${x.code}: ${x.message}`).join('; ')})`);
  e = await errorOf(s3.query('SELECT 1'));
  check(e !== null, `the Client is not queryable afterwards (${e && e.message})`);
  const s4 = await connect();
  const t6 = await one(s4, 'SELECT fencing.acquire($1)', [RESOURCE]);
  check(t6 > t5 && (await s4.query(WRITE, [t6])).rowCount === 1, 'reconnected: acquired again with a greater token and wrote');
  e = await errorOf(s4.query(WRITE, [t5]));
  check(e && e.code === '23T01', "a write with the expired lease's token fails with 23T01");
  await s4.query('SELECT fencing.release_all()');
  const c = await child;
  check(c.status !== 0 && /fencing lease of 1000 ms expired/.test(c.out),
    `without an 'error' listener the expired lease crashes the process (exit status ${c.status})`);

  await Promise.all([s1.end(), s2.end(), s4.end(), setup.end()]);
  const version = require('./package-lock.json').packages['node_modules/pg'].version;
  console.log(`node-postgres ${version}: ` + (failures ? `${failures} check(s) failed` : 'all checks passed'));
  return failures ? 1 : 0;
}

main().then((rc) => { process.exitCode = rc; }, (err) => {
  console.error('node-postgres client: unexpected error:', err);
  process.exit(1); // open connections would keep the process alive
});
