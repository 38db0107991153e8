-- The client scenario in psql (run by psql.sh with ON_ERROR_STOP=1):
-- acquire (T1), 55006 from a second plain acquire, fenced write with T1,
-- release; a second session acquires (T2 > T1) and writes; the stale write
-- with T1 fails with SQLSTATE 23T01 (psql.sh checks its DETAIL and HINT on
-- stderr); acquire_xact in BEGIN/COMMIT; fencing.use() and a write with no
-- token. Tokens are above 2^53 and come back exactly (psql keeps them as
-- text). psql 15 has no \bind, so use() gets the token as a literal here.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset tuples_only on
\pset format unaligned
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;

CREATE OR REPLACE FUNCTION psql_client_check(ok boolean, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'psql client: FAILED: %', what;
  END IF;
  RETURN 'ok - ' || what;
END
$$;

-- The protected table. Its fence token column holds 2^53 + 1 and a superuser
-- moves the token counter past it (protect() refuses tables holding tokens
-- past 2^52): every token from now on is above 2^53 (a double cannot hold it
-- exactly).
DROP TABLE IF EXISTS psql_ledger;
CREATE TABLE psql_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
SELECT fencing.protect('psql_ledger') \gset
SELECT fencing.advance_past('psql_ledger', 9007199254740993) \gset
INSERT INTO psql_ledger VALUES (1, 0, '9007199254740993');

-- ---- session 1: acquire, write, release ---------------------------------------
SELECT fencing.acquire('clients:psql') AS t1 \gset
\echo 'T1 =' :t1
SELECT psql_client_check(:'t1'::numeric > 9007199254740993, 'T1 is above 2^53 + 1');
\echo 'a second plain acquire: one error (55006) expected on stderr'
\set ON_ERROR_STOP 0
SELECT fencing.acquire('clients:psql');
\set ON_ERROR_STOP 1
SELECT psql_client_check(:'LAST_ERROR_SQLSTATE' = '55006',
                         'a second plain acquire fails with 55006 (got ' || :'LAST_ERROR_SQLSTATE' || ')');
UPDATE psql_ledger SET balance = balance + 100, fence_token = :'t1' WHERE id = 1;
SELECT psql_client_check(:ROW_COUNT = 1, 'fenced write with T1 accepted');
SELECT fence_token AS stored FROM psql_ledger WHERE id = 1 \gset
SELECT psql_client_check(:'stored' = :'t1', 'T1 read back exactly (' || :'stored' || ')');
SELECT psql_client_check(fencing.current('clients:psql')::text = :'t1', 'fencing.current returns T1 exactly');
SELECT psql_client_check(fencing.release('clients:psql'), 'T1 released');

-- ---- session 2: a second acquirer -------------------------------------------------
\connect
SET client_min_messages = warning;
SELECT fencing.acquire('clients:psql', wait => '10 s') AS t2 \gset
\echo 'T2 =' :t2
SELECT psql_client_check(:'t2'::numeric > :'t1'::numeric, 'T2 > T1');
UPDATE psql_ledger SET balance = balance + 100, fence_token = :'t2' WHERE id = 1;
SELECT psql_client_check(:ROW_COUNT = 1, 'fenced write with T2 accepted');

-- ---- the stale write with T1 ----------------------------------------------------------
\echo 'stale write with T1 and validate(T1): two errors (23T01) expected on stderr'
\set VERBOSITY verbose
\set ON_ERROR_STOP 0
UPDATE psql_ledger SET balance = balance + 100, fence_token = :'t1' WHERE id = 1;
\set VERBOSITY default
\set ON_ERROR_STOP 1
SELECT psql_client_check(:'LAST_ERROR_SQLSTATE' = '23T01',
                         'stale write with T1 fails with SQLSTATE 23T01 (got ' || :'LAST_ERROR_SQLSTATE' || ')');
\set ON_ERROR_STOP 0
SELECT fencing.validate('clients:psql', :'t1');
\set ON_ERROR_STOP 1
SELECT psql_client_check(:'LAST_ERROR_SQLSTATE' = '23T01',
                         'validate(T1) fails with SQLSTATE 23T01 (got ' || :'LAST_ERROR_SQLSTATE' || ')');
SELECT psql_client_check(fencing.validate('clients:psql', :'t2')::text = :'t2', 'validate(T2) returns T2 exactly');

SELECT balance AS balance, fence_token AS stored FROM psql_ledger WHERE id = 1 \gset
SELECT psql_client_check(:'stored' = :'t2' AND :balance = 200, 'the row holds T2 and only the two fenced writes');
SELECT psql_client_check(fencing.release('clients:psql'), 'T2 released');
SELECT psql_client_check(count(*) = 0, 'no fencing lock left') FROM fencing.locks WHERE resource = 'clients:psql';

-- ---- acquire_xact in a transaction; use() and a write with no token ---------------
BEGIN;
SELECT fencing.acquire_xact('clients:psql') AS t3 \gset
UPDATE psql_ledger SET fence_token = :'t3' WHERE id = 1;
COMMIT;
SELECT psql_client_check(:'t3'::bigint > :'t2'::bigint AND count(*) = 0,
                         'acquire_xact in BEGIN/COMMIT: T3 > T2, the lock ended with the commit')
  FROM fencing.locks WHERE resource = 'clients:psql';
BEGIN;
SELECT fencing.acquire_xact('clients:psql') AS t4 \gset
SELECT fencing.use(:'t4') \gset
UPDATE psql_ledger SET balance = balance + 1 WHERE id = 1;
COMMIT;
SELECT psql_client_check(fence_token = :'t4', 'use() stamped the write that carries no token with T4')
  FROM psql_ledger WHERE id = 1;
\echo 'psql client: all checks passed'
