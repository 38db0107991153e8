// The client scenario in Node.js with node-postgres (run by ../node.sh).
//
// Acquire (T1), fenced write with T1, release; a second session acquires
// (T2 > T1) and writes; the stale write with T1 fails with SQLSTATE 23T01.
// Tokens are above 2^53, where a JS number loses precision: they are read as
// BigInt (a type parser for fencing.token) and sent back as BigInt, which pg
// sends as its exact decimal text. Never Number(token).
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
'use strict';

const pg = require('pg');

const RESOURCE = 'clients:node';
const ABOVE_2_53 = 9007199254740993n; // 2^53 + 1
let failures = 0;

function check(ok, what) {
  console.log((ok ? 'ok - ' : 'FAILED - ') + what);
  if (!ok) failures++;
}

async function connect() {
  const c = new pg.Client(); // PGHOST, PGPORT, PGUSER, PGDATABASE
  await c.connect();
  return c;
}

// bigint (and so fencing.token, a domain over it) -> BigInt, as for any
// bigint column: node-postgres returns int8 as a string by default.
async function registerTokenType(c) {
  pg.types.setTypeParser(pg.types.builtins.INT8, (text) => BigInt(text));
}

async function acquire(c, resource) {
  const { rows } = await c.query('SELECT fencing.acquire($1) AS token', [resource]);
  return rows[0].token;
}

async function release(c, resource) {
  const { rows } = await c.query('SELECT fencing.release($1) AS released', [resource]);
  return rows[0].released;
}

async function fencedWrite(c, token, amount) {
  await c.query('BEGIN');
  try {
    const r = await c.query('UPDATE node_ledger SET balance = balance + $1, fence_token = $2 WHERE id = 1',
      [amount, token]);
    await c.query('COMMIT');
    return r.rowCount;
  } catch (e) {
    await c.query('ROLLBACK');
    throw e;
  }
}

async function sqlstateOf(fn) {
  try {
    await fn();
  } catch (e) {
    return e.code; // the SQLSTATE
  }
  return null;
}

async function main() {
  const setup = await connect();
  await setup.query('SET client_min_messages = warning');
  await setup.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await registerTokenType(setup);
  await setup.query('DROP TABLE IF EXISTS node_ledger');
  await setup.query('CREATE TABLE node_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)');
  // Tokens above 2^53: protect() refuses tables holding tokens past 2^52,
  // so the table is protected first and a superuser moves the counter.
  await setup.query("SELECT fencing.protect('node_ledger')");
  await setup.query("SELECT fencing.advance_past('node_ledger', $1)", [ABOVE_2_53]);
  await setup.query('INSERT INTO node_ledger VALUES (1, 0, $1)', [ABOVE_2_53]);

  // Session 1: acquire, write, release.
  const s1 = await connect();
  const t1 = await acquire(s1, RESOURCE);
  console.log(`T1 = ${t1}`);
  check(typeof t1 === 'bigint' && t1 > ABOVE_2_53, 'T1 is a BigInt above 2^53 + 1');
  check(await fencedWrite(s1, t1, 100) === 1, 'fenced write with T1 accepted');
  let { rows } = await s1.query(
    'SELECT fence_token, fence_token::text AS text, fencing.current($1)::text AS current FROM node_ledger WHERE id = 1',
    [RESOURCE]);
  check(rows[0].fence_token === t1 && rows[0].text === t1.toString(), `T1 read back exactly (${rows[0].text})`);
  check(rows[0].current === t1.toString(), 'fencing.current returns T1 exactly');
  check(await release(s1, RESOURCE) === true, 'T1 released');

  // Session 2: the next acquirer.
  const s2 = await connect();
  const t2 = await acquire(s2, RESOURCE);
  console.log(`T2 = ${t2}`);
  check(typeof t2 === 'bigint' && t2 > t1, 'T2 > T1');
  check(await fencedWrite(s2, t2, 100) === 1, 'fenced write with T2 accepted');

  // The stale write with T1 (session 1 still thinks it may write).
  let state = await sqlstateOf(() => fencedWrite(s1, t1, 100));
  check(state === '23T01', `stale write with T1 fails with SQLSTATE 23T01 (got ${state})`);
  state = await sqlstateOf(() => s1.query('SELECT fencing.validate($1, $2)', [RESOURCE, t1]));
  check(state === '23T01', `validate(T1) fails with SQLSTATE 23T01 (got ${state})`);
  ({ rows } = await s1.query('SELECT fencing.validate($1, $2) AS token', [RESOURCE, t2]));
  check(rows[0].token === t2, 'validate(T2) returns T2 exactly');

  ({ rows } = await s2.query('SELECT balance, fence_token FROM node_ledger WHERE id = 1'));
  check(rows[0].fence_token === t2 && rows[0].balance === 200n, 'the row holds T2 and only the two fenced writes');
  check(await release(s2, RESOURCE) === true, 'T2 released');
  ({ rows } = await s2.query('SELECT count(*)::int AS n FROM fencing.locks WHERE resource = $1', [RESOURCE]));
  check(rows[0].n === 0, 'no fencing lock left');

  await Promise.all([s1.end(), s2.end(), setup.end()]);
  if (failures > 0) {
    console.log(`node client: ${failures} check(s) failed`);
    return 1;
  }
  console.log('node client: all checks passed');
  return 0;
}

main().then((rc) => { process.exitCode = rc; }, (e) => {
  console.error('node client: unexpected error:', e);
  process.exitCode = 1;
});
