-- The public SQL contract of fencing's core, as pgTAP sees it:
-- every function with its exact argument types, names and return type, the
-- type (a domain over bigint), the view
-- fencing.locks, and the SQLSTATEs of the documented errors.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

BEGIN;
SELECT plan(130);

--------------------------------------------------------------------------------
-- Schema and type.
--------------------------------------------------------------------------------
SELECT has_schema('fencing');
SELECT has_extension('fencing');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'fencing'), false, 'fencing is not relocatable');
SELECT is((SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
            WHERE e.extname = 'fencing'), 'fencing', 'fencing lives in schema fencing');
SELECT has_type('fencing', 'token', 'type fencing.token exists');
SELECT has_domain('fencing', 'token', 'fencing.token is a domain');
SELECT domain_type_is('fencing', 'token', 'bigint', 'fencing.token is a domain over bigint');
SELECT is((SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
            WHERE c.contypid = 'fencing.token'::regtype AND c.conname = 'token_positive'),
          'CHECK ((VALUE > 0))', 'fencing.token has the named constraint token_positive');

--------------------------------------------------------------------------------
-- Functions: existence with exact argument types, return types, and the
-- argument names and defaults of the contract.
--------------------------------------------------------------------------------
SELECT has_function('fencing', 'acquire', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.acquire(text, interval, interval, boolean, interval, integer, boolean)');
SELECT has_function('fencing', 'try_acquire', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.try_acquire(text, boolean, interval, integer, boolean)');
SELECT has_function('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.acquire_xact(text, interval, interval, boolean, interval, integer, boolean)');
SELECT has_function('fencing', 'try_acquire_xact', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.try_acquire_xact(text, boolean, interval, integer, boolean)');
SELECT has_function('fencing', 'release', ARRAY['text'], 'fencing.release(text)');
SELECT has_function('fencing', 'release_all', ARRAY[]::text[], 'fencing.release_all()');
SELECT has_function('fencing', 'current', ARRAY['text'], 'fencing.current(text)');
SELECT has_function('fencing', 'validate', ARRAY['text', 'bigint'], 'fencing.validate(text, bigint)');
SELECT has_function('fencing', 'use', ARRAY['bigint'], 'fencing.use(bigint)');
-- No other overloads of the public names.
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'fencing'
              AND p.proname IN ('acquire', 'try_acquire', 'acquire_xact', 'try_acquire_xact', 'release',
                                'release_all', 'current', 'validate', 'use')),
          9, 'one function per public name');

SELECT function_returns('fencing', 'acquire', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.token', 'acquire returns fencing.token');
SELECT function_returns('fencing', 'try_acquire', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.token', 'try_acquire returns fencing.token');
SELECT function_returns('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.token', 'acquire_xact returns fencing.token');
SELECT function_returns('fencing', 'try_acquire_xact', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'fencing.token', 'try_acquire_xact returns fencing.token');
SELECT function_returns('fencing', 'release', ARRAY['text'], 'boolean', 'release returns boolean');
SELECT function_returns('fencing', 'release_all', ARRAY[]::text[], 'integer', 'release_all returns integer');
SELECT function_returns('fencing', 'current', ARRAY['text'], 'fencing.token', 'current returns fencing.token');
SELECT function_returns('fencing', 'validate', ARRAY['text', 'bigint'], 'fencing.token', 'validate returns fencing.token');
SELECT function_returns('fencing', 'use', ARRAY['bigint'], 'fencing.token', 'use returns fencing.token');

SELECT is(pg_get_function_identity_arguments('fencing.acquire(text, interval, interval, boolean, interval, integer, boolean)'::regprocedure),
          'resource text, wait interval, lease interval, reentrant boolean, lock_delay interval, permits integer, shared boolean',
          'acquire argument names');
SELECT is(pg_get_function_arguments('fencing.acquire(text, interval, interval, boolean, interval, integer, boolean)'::regprocedure),
          'resource text, wait interval DEFAULT NULL::interval, lease interval DEFAULT NULL::interval, reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL::interval, permits integer DEFAULT NULL::integer, shared boolean DEFAULT false',
          'acquire: wait, lease, lock_delay and permits default to NULL, reentrant and shared to false');
SELECT is(pg_get_function_arguments('fencing.acquire_xact(text, interval, interval, boolean, interval, integer, boolean)'::regprocedure),
          'resource text, wait interval DEFAULT NULL::interval, lease interval DEFAULT NULL::interval, reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL::interval, permits integer DEFAULT NULL::integer, shared boolean DEFAULT false',
          'acquire_xact: wait, lease, lock_delay and permits default to NULL, reentrant and shared to false');
SELECT is(pg_get_function_arguments('fencing.try_acquire(text, boolean, interval, integer, boolean)'::regprocedure), 'resource text, reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL::interval, permits integer DEFAULT NULL::integer, shared boolean DEFAULT false', 'try_acquire argument names');
SELECT is(pg_get_function_arguments('fencing.try_acquire_xact(text, boolean, interval, integer, boolean)'::regprocedure), 'resource text, reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL::interval, permits integer DEFAULT NULL::integer, shared boolean DEFAULT false', 'try_acquire_xact argument names');
SELECT is(pg_get_function_arguments('fencing.release(text)'::regprocedure), 'resource text', 'release argument names');
SELECT is(pg_get_function_arguments('fencing.release_all()'::regprocedure), '', 'release_all has no arguments');
SELECT is(pg_get_function_arguments('fencing.current(text)'::regprocedure), 'resource text', 'current argument names');
SELECT is(pg_get_function_identity_arguments('fencing.validate(text, bigint)'::regprocedure),
          'resource text, token bigint', 'validate argument names');
SELECT is(pg_get_function_identity_arguments('fencing.use(bigint)'::regprocedure), 'token bigint', 'use argument names');

-- Functions that take or hand out locks are volatile.
SELECT volatility_is('fencing', 'acquire', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'volatile', 'acquire is volatile');
SELECT volatility_is('fencing', 'try_acquire', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'volatile', 'try_acquire is volatile');
SELECT volatility_is('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval', 'boolean', 'interval', 'integer', 'boolean'], 'volatile', 'acquire_xact is volatile');
SELECT volatility_is('fencing', 'try_acquire_xact', ARRAY['text', 'boolean', 'interval', 'integer', 'boolean'], 'volatile', 'try_acquire_xact is volatile');
SELECT volatility_is('fencing', 'release', ARRAY['text'], 'volatile', 'release is volatile');
SELECT volatility_is('fencing', 'validate', ARRAY['text', 'bigint'], 'volatile', 'validate is volatile');
SELECT volatility_is('fencing', 'use', ARRAY['bigint'], 'volatile', 'use is volatile');
SELECT volatility_is('fencing', 'resource_key', ARRAY['text'], 'stable', 'resource_key is stable, not immutable: a new secret changes the keys');

--------------------------------------------------------------------------------
-- bigint's operators, operator classes, aggregates and casts serve the token:
-- it has none of its own.
--------------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM pg_operator
            WHERE 'fencing.token'::regtype IN (oprleft, oprright, oprresult)), 0, 'no operators of its own');
SELECT is((SELECT count(*)::int FROM pg_cast
            WHERE 'fencing.token'::regtype IN (castsource, casttarget)), 0, 'no casts of its own');
SELECT ok('2'::fencing.token < 3 AND '3'::fencing.token = 3::bigint AND '4'::fencing.token >= '4'::fencing.token,
          'token operators work with the default search_path');
SELECT is((SELECT max(t)::bigint FROM (VALUES ('7'::fencing.token), ('10'), (NULL)) v(t)), 10::bigint,
          'max(token) works with the default search_path');
SELECT is(COALESCE(NULL::fencing.token, 0), 0::bigint, 'COALESCE(token, 0) works');
SELECT is(5::smallint::fencing.token::bigint, 5::bigint, 'smallint -> token');
SELECT is(5::numeric::fencing.token::bigint, 5::bigint, 'numeric -> token');
SELECT is('5'::varchar::fencing.token::bigint, 5::bigint, 'varchar -> token');

--------------------------------------------------------------------------------
-- The view fencing.locks.
--------------------------------------------------------------------------------
SELECT has_view('fencing', 'locks', 'view fencing.locks exists');
SELECT columns_are('fencing', 'locks',
                   ARRAY['resource', 'token', 'pid', 'scope', 'granted', 'since', 'application_name', 'lease', 'expires_at',
                         'mode', 'permit', 'delay_until'],
                   'fencing.locks has exactly the documented columns');
SELECT col_type_is('fencing', 'locks', 'resource', 'text', 'locks.resource is text');
SELECT col_type_is('fencing', 'locks', 'token', 'fencing', 'token', 'locks.token is fencing.token');
SELECT col_type_is('fencing', 'locks', 'pid', 'integer', 'locks.pid is integer');
SELECT col_type_is('fencing', 'locks', 'scope', 'text', 'locks.scope is text');
SELECT col_type_is('fencing', 'locks', 'granted', 'boolean', 'locks.granted is boolean');
SELECT col_type_is('fencing', 'locks', 'since', 'timestamp with time zone', 'locks.since is timestamptz');
SELECT col_type_is('fencing', 'locks', 'application_name', 'text', 'locks.application_name is text');
SELECT col_type_is('fencing', 'locks', 'lease', 'interval', 'locks.lease is interval');
SELECT col_type_is('fencing', 'locks', 'expires_at', 'timestamp with time zone', 'locks.expires_at is timestamptz');
SELECT col_type_is('fencing', 'locks', 'mode', 'text', 'locks.mode is text');
SELECT col_type_is('fencing', 'locks', 'permit', 'integer', 'locks.permit is integer');
SELECT col_type_is('fencing', 'locks', 'delay_until', 'timestamp with time zone', 'locks.delay_until is timestamptz');

--------------------------------------------------------------------------------
-- A role granted USAGE on the schema can use the API (the functions, the
-- view); PUBLIC has no USAGE on the schema itself.
--------------------------------------------------------------------------------
SELECT ok(NOT has_schema_privilege('public', 'fencing', 'USAGE'), 'PUBLIC has no USAGE on schema fencing (it is granted to the roles that use fencing)');
SELECT ok(has_function_privilege('public', 'fencing.acquire(text, interval, interval, boolean, interval, integer, boolean)', 'EXECUTE'), 'PUBLIC may execute fencing.acquire');
SELECT ok(has_function_privilege('public', 'fencing.validate(text, bigint)', 'EXECUTE'), 'PUBLIC may execute fencing.validate');
SELECT ok(has_table_privilege('public', 'fencing.locks', 'SELECT'), 'PUBLIC may read fencing.locks');

--------------------------------------------------------------------------------
-- Errors: SQLSTATEs.
--------------------------------------------------------------------------------
SELECT throws_ok($$SELECT ''::fencing.token$$, '22P02', NULL, 'token input '''' -> 22P02');
SELECT throws_ok($$SELECT 'abc'::fencing.token$$, '22P02', NULL, 'token input ''abc'' -> 22P02');
SELECT throws_ok($$SELECT '1.5'::fencing.token$$, '22P02', NULL, 'token input ''1.5'' -> 22P02');
SELECT throws_ok($$SELECT '12x'::fencing.token$$, '22P02', NULL, 'token input ''12x'' -> 22P02');
SELECT throws_ok($$SELECT ' '::fencing.token$$, '22P02', NULL, 'token input '' '' -> 22P02');
SELECT throws_ok($$SELECT '0'::fencing.token$$, '23514', NULL, 'token input ''0'' -> 23514');
SELECT throws_ok($$SELECT '9223372036854775808'::fencing.token$$, '22003', NULL, 'token input 2^63 -> 22003');
SELECT throws_ok($$SELECT 0::fencing.token$$, '23514', NULL, 'integer 0 -> token: 23514');
SELECT throws_ok($$SELECT (-1)::bigint::fencing.token$$, '23514', NULL, 'bigint -1 -> token: 23514');
SELECT throws_ok($$SELECT fencing.use(0)$$, '23514', NULL, 'use(0): 23514');
SELECT throws_ok($$SELECT fencing.use(NULL)$$, '22004', NULL, 'use(NULL): 22004');
SELECT throws_ok($$SELECT fencing.acquire('')$$, '22023', NULL, 'acquire(''''): 22023');
SELECT throws_ok($$SELECT fencing.acquire(repeat('r', 1025))$$, '22023', NULL, 'acquire(1025 bytes): 22023');
SELECT throws_ok($$SELECT fencing.try_acquire_xact(repeat('r', 1025))$$, '22023', NULL, 'try_acquire_xact(1025 bytes): 22023');
SELECT throws_ok($$SELECT fencing.acquire(NULL)$$, '22004', NULL, 'acquire(NULL): 22004');
SELECT throws_ok($$SELECT fencing.acquire_xact(NULL)$$, '22004', NULL, 'acquire_xact(NULL): 22004');
SELECT throws_ok($$SELECT fencing.try_acquire(NULL)$$, '22004', NULL, 'try_acquire(NULL): 22004');
SELECT throws_ok($$SELECT fencing.release(NULL)$$, '22004', NULL, 'release(NULL): 22004');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', wait => '-1s')$$, '22023', NULL, 'negative wait: 22023');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', lease => '0')$$, '22023', NULL, 'zero lease: 22023');
SELECT throws_ok($$SELECT fencing.acquire_xact('pgtap:args', lease => '-1s')$$, '22023', NULL, 'negative lease: 22023');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', lock_delay => '-1s')$$, '22023', NULL, 'negative lock_delay: 22023');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', lock_delay => '61s')$$, '22023', NULL, 'lock_delay over a minute: 22023');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', permits => 0)$$, '22023', NULL, 'permits 0: 22023');
SELECT throws_ok($$SELECT fencing.try_acquire('pgtap:args', permits => 1001)$$, '22023', NULL, 'permits 1001: 22023');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:args', permits => 2, shared => true)$$, '22023', NULL, 'permits and shared: 22023');
SELECT throws_ok($$SELECT fencing.acquire_xact('pgtap:args', shared => NULL)$$, '22004', NULL, 'shared NULL: 22004');
SELECT throws_ok($$SELECT fencing.validate('pgtap:never', 1)$$, '23T01', NULL, 'validate on a never acquired resource: 23T01');
SELECT throws_ok($$SELECT fencing.validate('pgtap:v', NULL)$$, '23T01', NULL, 'validate without a token: 23T01');

--------------------------------------------------------------------------------
-- A few calls.
--------------------------------------------------------------------------------
SELECT ok(fencing.current('pgtap:never') IS NULL, 'current() of a never acquired resource is NULL');
CREATE TEMP TABLE pgtap_tok (name text PRIMARY KEY, t fencing.token);
INSERT INTO pgtap_tok VALUES ('a1', fencing.acquire('pgtap:a'));
SELECT ok((SELECT t FROM pgtap_tok WHERE name = 'a1') IS NOT NULL, 'acquire returns a token');
SELECT results_eq($$SELECT fencing.current('pgtap:a')::bigint$$, $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'current() is the token acquire returned');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:a')$$, '55006', NULL, 'a plain acquire of a held resource: 55006');
SELECT results_eq($$SELECT fencing.acquire('pgtap:a', reentrant => true)::bigint$$, $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'a reentrant acquire returns the same token');
-- validate() in a subtransaction that is rolled back: its guard goes with it,
-- so that this file's one transaction may acquire the resource again below (a
-- transaction that holds the guard may not: 55006).
CREATE FUNCTION pg_temp.validate_undone(r text, t bigint) RETURNS bigint LANGUAGE plpgsql AS $fn$
BEGIN
    BEGIN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = fencing.validate(r, t)::text;
    EXCEPTION WHEN SQLSTATE 'P0001' THEN
        RETURN SQLERRM::bigint;
    END;
END
$fn$;
SELECT results_eq($$SELECT pg_temp.validate_undone('pgtap:a', t)::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'validate returns the token while it is held');
SELECT is((SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 32259),
          0, 'the guard of a validate() whose subtransaction rolled back is gone');
SELECT results_eq($$SELECT resource COLLATE "default", scope, granted FROM fencing.locks WHERE pid = pg_backend_pid()$$,
                  $$VALUES ('pgtap:a'::text, 'session'::text, true)$$,
                  'fencing.locks shows the session hold once');
SELECT is(fencing.release('pgtap:a'), true, 'first release');
SELECT is(fencing.release('pgtap:a'), true, 'second release');
SET LOCAL client_min_messages = error;  -- the WARNING of the next release
SELECT is(fencing.release('pgtap:a'), false, 'a third release finds nothing to release');
SET LOCAL client_min_messages = warning;
SELECT throws_ok($$SELECT fencing.validate('pgtap:a', t) FROM pgtap_tok WHERE name = 'a1'$$, '23T01', NULL,
                 'validate after release: 23T01');
INSERT INTO pgtap_tok VALUES ('a2', fencing.try_acquire('pgtap:a'));
SELECT ok((SELECT (SELECT t::bigint FROM pgtap_tok WHERE name = 'a2') > (SELECT t::bigint FROM pgtap_tok WHERE name = 'a1')),
          'the next acquisition is newer');
SELECT throws_ok($$SELECT fencing.validate('pgtap:a', t) FROM pgtap_tok WHERE name = 'a1'$$, '23T01', NULL,
                 'the old token is stale while the new one is held');
SELECT is(fencing.acquire('pgtap:b') IS NOT NULL, true, 'a second resource');
SELECT is(fencing.release_all(), 2, 'release_all releases both resources');
SELECT is(fencing.release_all(), 0, 'release_all again: nothing left');
SELECT is((SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
              AND objsubid <> 32259), 0,
          'no advisory lock left (but the guards validate() holds to the end of the transaction)');
SELECT lives_ok($$SELECT fencing.acquire_xact('pgtap:x')$$, 'acquire_xact in the test transaction');
SELECT results_eq($$SELECT scope FROM fencing.locks WHERE pid = pg_backend_pid()$$, $$VALUES ('transaction'::text)$$,
                  'the transaction hold shows as transaction scope');
SELECT is(fencing.release_all(), 0, 'release_all leaves transaction holds alone');
SELECT is(fencing.acquire('pgtap:pool', permits => 3) IS NOT NULL, true, 'a permit of a counted resource');
SELECT throws_ok($$SELECT fencing.acquire('pgtap:pool', permits => 4, reentrant => true)$$, '55T01', NULL,
                 'another count of permits for a counted resource: 55T01');
SELECT is(fencing.release('pgtap:pool'), true, 'release of the permit');
SELECT is(fencing.acquire('pgtap:m')::bigint > 0, true, 'a token reads back as bigint');
SELECT is(pg_typeof(fencing.acquire('pgtap:m', reentrant => true)::bigint)::text, 'bigint', 'token::bigint is bigint');
SELECT is(fencing.release_all(), 1, 'release_all after two nested holds counts one resource');
SELECT is('9223372036854775807'::fencing.token::bigint, 9223372036854775807::bigint, 'largest token round trips through bigint');
SELECT is(int8send('258'::fencing.token), '\x0000000000000102'::bytea, 'binary send is int8''s wire format');

-- The setting's description says what it checks: a configured synchronous
-- standby (synchronous_standby_names), not a connected one.
SELECT is((SELECT short_desc || ' ' || extra_desc FROM pg_settings WHERE name = 'fencing.require_sync_standby')
              ~ 'synchronous_standby_names' AND
          (SELECT extra_desc FROM pg_settings WHERE name = 'fencing.require_sync_standby') !~ 'connected',
          true, 'fencing.require_sync_standby says it needs a configured synchronous standby, not a connected one');

SELECT * FROM finish();
ROLLBACK;
