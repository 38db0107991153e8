-- The public SQL contract of fencing 1.0's core, as pgTAP sees it:
-- every function with its exact argument types, names and return type, the
-- type, its operators, operator classes, aggregates and casts, the view
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
SELECT plan(122);

--------------------------------------------------------------------------------
-- Schema and type.
--------------------------------------------------------------------------------
SELECT has_schema('fencing');
SELECT has_extension('fencing');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'fencing'), false, 'fencing is not relocatable');
SELECT is((SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
            WHERE e.extname = 'fencing'), 'fencing', 'fencing lives in schema fencing');
SELECT has_type('fencing', 'token', 'type fencing.token exists');
SELECT is((SELECT typlen::int FROM pg_type WHERE oid = 'fencing.token'::regtype), 8, 'fencing.token is 8 bytes');
SELECT is((SELECT typbyval FROM pg_type WHERE oid = 'fencing.token'::regtype), true, 'fencing.token is passed by value');

--------------------------------------------------------------------------------
-- Functions: existence with exact argument types, return types, and the
-- argument names and defaults of the contract.
--------------------------------------------------------------------------------
SELECT has_function('fencing', 'acquire', ARRAY['text', 'interval', 'interval'], 'fencing.acquire(text, interval, interval)');
SELECT has_function('fencing', 'try_acquire', ARRAY['text'], 'fencing.try_acquire(text)');
SELECT has_function('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval'], 'fencing.acquire_xact(text, interval, interval)');
SELECT has_function('fencing', 'try_acquire_xact', ARRAY['text'], 'fencing.try_acquire_xact(text)');
SELECT has_function('fencing', 'release', ARRAY['text'], 'fencing.release(text)');
SELECT has_function('fencing', 'release_all', ARRAY[]::text[], 'fencing.release_all()');
SELECT has_function('fencing', 'current', ARRAY['text'], 'fencing.current(text)');
SELECT has_function('fencing', 'validate', ARRAY['text', 'fencing.token'], 'fencing.validate(text, fencing.token)');
-- min/max and the operators are usable with any search_path.
SELECT has_function('pg_catalog', 'min', ARRAY['fencing.token'], 'min(fencing.token)');
SELECT has_function('pg_catalog', 'max', ARRAY['fencing.token'], 'max(fencing.token)');
SELECT is_aggregate('pg_catalog', 'min', ARRAY['fencing.token'], 'min(fencing.token) is an aggregate');
SELECT is_aggregate('pg_catalog', 'max', ARRAY['fencing.token'], 'max(fencing.token) is an aggregate');
-- No other overloads of the public names.
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'fencing'
              AND p.proname IN ('acquire', 'try_acquire', 'acquire_xact', 'try_acquire_xact', 'release',
                                'release_all', 'current', 'validate')),
          8, 'one function per public name');

SELECT function_returns('fencing', 'acquire', ARRAY['text', 'interval', 'interval'], 'fencing.token', 'acquire returns fencing.token');
SELECT function_returns('fencing', 'try_acquire', ARRAY['text'], 'fencing.token', 'try_acquire returns fencing.token');
SELECT function_returns('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval'], 'fencing.token', 'acquire_xact returns fencing.token');
SELECT function_returns('fencing', 'try_acquire_xact', ARRAY['text'], 'fencing.token', 'try_acquire_xact returns fencing.token');
SELECT function_returns('fencing', 'release', ARRAY['text'], 'boolean', 'release returns boolean');
SELECT function_returns('fencing', 'release_all', ARRAY[]::text[], 'integer', 'release_all returns integer');
SELECT function_returns('fencing', 'current', ARRAY['text'], 'fencing.token', 'current returns fencing.token');
SELECT function_returns('fencing', 'validate', ARRAY['text', 'fencing.token'], 'fencing.token', 'validate returns fencing.token');
SELECT function_returns('pg_catalog', 'min', ARRAY['fencing.token'], 'fencing.token', 'min returns fencing.token');
SELECT function_returns('pg_catalog', 'max', ARRAY['fencing.token'], 'fencing.token', 'max returns fencing.token');

SELECT is(pg_get_function_identity_arguments('fencing.acquire(text, interval, interval)'::regprocedure),
          'resource text, wait interval, lease interval', 'acquire argument names');
SELECT is(pg_get_function_arguments('fencing.acquire(text, interval, interval)'::regprocedure),
          'resource text, wait interval DEFAULT NULL::interval, lease interval DEFAULT NULL::interval',
          'acquire: wait and lease default to NULL');
SELECT is(pg_get_function_arguments('fencing.acquire_xact(text, interval, interval)'::regprocedure),
          'resource text, wait interval DEFAULT NULL::interval, lease interval DEFAULT NULL::interval',
          'acquire_xact: wait and lease default to NULL');
SELECT is(pg_get_function_arguments('fencing.try_acquire(text)'::regprocedure), 'resource text', 'try_acquire argument names');
SELECT is(pg_get_function_arguments('fencing.try_acquire_xact(text)'::regprocedure), 'resource text', 'try_acquire_xact argument names');
SELECT is(pg_get_function_arguments('fencing.release(text)'::regprocedure), 'resource text', 'release argument names');
SELECT is(pg_get_function_arguments('fencing.release_all()'::regprocedure), '', 'release_all has no arguments');
SELECT is(pg_get_function_arguments('fencing.current(text)'::regprocedure), 'resource text', 'current argument names');
SELECT is(pg_get_function_identity_arguments('fencing.validate(text, fencing.token)'::regprocedure),
          'resource text, token fencing.token', 'validate argument names');

-- Functions that take or hand out locks are volatile.
SELECT volatility_is('fencing', 'acquire', ARRAY['text', 'interval', 'interval'], 'volatile', 'acquire is volatile');
SELECT volatility_is('fencing', 'try_acquire', ARRAY['text'], 'volatile', 'try_acquire is volatile');
SELECT volatility_is('fencing', 'acquire_xact', ARRAY['text', 'interval', 'interval'], 'volatile', 'acquire_xact is volatile');
SELECT volatility_is('fencing', 'try_acquire_xact', ARRAY['text'], 'volatile', 'try_acquire_xact is volatile');
SELECT volatility_is('fencing', 'release', ARRAY['text'], 'volatile', 'release is volatile');
SELECT volatility_is('fencing', 'validate', ARRAY['text', 'fencing.token'], 'volatile', 'validate is volatile');

--------------------------------------------------------------------------------
-- Operators, operator classes, casts.
--------------------------------------------------------------------------------
SELECT has_operator('fencing.token', 'pg_catalog', '=',  'fencing.token', 'boolean', 'operator = (token, token)');
SELECT has_operator('fencing.token', 'pg_catalog', '<>', 'fencing.token', 'boolean', 'operator <> (token, token)');
SELECT has_operator('fencing.token', 'pg_catalog', '<',  'fencing.token', 'boolean', 'operator < (token, token)');
SELECT has_operator('fencing.token', 'pg_catalog', '<=', 'fencing.token', 'boolean', 'operator <= (token, token)');
SELECT has_operator('fencing.token', 'pg_catalog', '>',  'fencing.token', 'boolean', 'operator > (token, token)');
SELECT has_operator('fencing.token', 'pg_catalog', '>=', 'fencing.token', 'boolean', 'operator >= (token, token)');
SELECT ok(EXISTS (SELECT 1 FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
                   WHERE c.opcintype = 'fencing.token'::regtype AND a.amname = 'btree' AND c.opcdefault),
          'default btree operator class for fencing.token');
SELECT ok(EXISTS (SELECT 1 FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
                   WHERE c.opcintype = 'fencing.token'::regtype AND a.amname = 'hash' AND c.opcdefault),
          'default hash operator class for fencing.token');
SELECT ok((SELECT oprcanhash AND oprcanmerge FROM pg_operator
            WHERE oprname = '=' AND oprleft = 'fencing.token'::regtype AND oprright = 'fencing.token'::regtype),
          '= on tokens hashes and merges');

SELECT ok('2'::fencing.token < 3 AND '3'::fencing.token = 3::bigint AND '4'::fencing.token >= '4'::fencing.token,
          'token operators work with the default search_path');
SELECT is((SELECT max(t)::bigint FROM (VALUES ('7'::fencing.token), ('10'), (NULL)) v(t)), 10::bigint,
          'max(token) works with the default search_path');
SELECT has_cast('integer', 'fencing.token', 'cast integer -> fencing.token');
SELECT has_cast('bigint', 'fencing.token', 'cast bigint -> fencing.token');
SELECT has_cast('fencing.token', 'bigint', 'cast fencing.token -> bigint');
SELECT cast_context_is('integer', 'fencing.token', 'implicit', 'integer -> token is implicit');
SELECT cast_context_is('bigint', 'fencing.token', 'implicit', 'bigint -> token is implicit');
SELECT cast_context_is('fencing.token', 'bigint', 'assignment', 'token -> bigint is an assignment cast');

--------------------------------------------------------------------------------
-- The view fencing.locks.
--------------------------------------------------------------------------------
SELECT has_view('fencing', 'locks', 'view fencing.locks exists');
SELECT columns_are('fencing', 'locks',
                   ARRAY['resource', 'token', 'pid', 'scope', 'granted', 'since', 'application_name', 'lease', 'expires_at'],
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

--------------------------------------------------------------------------------
-- Every role can use the API (the schema, the functions, the view).
--------------------------------------------------------------------------------
SELECT ok(has_schema_privilege('public', 'fencing', 'USAGE'), 'PUBLIC may use schema fencing');
SELECT ok(has_function_privilege('public', 'fencing.acquire(text, interval, interval)', 'EXECUTE'), 'PUBLIC may execute fencing.acquire');
SELECT ok(has_function_privilege('public', 'fencing.validate(text, fencing.token)', 'EXECUTE'), 'PUBLIC may execute fencing.validate');
SELECT ok(has_table_privilege('public', 'fencing.locks', 'SELECT'), 'PUBLIC may read fencing.locks');

--------------------------------------------------------------------------------
-- Errors: SQLSTATEs.
--------------------------------------------------------------------------------
SELECT throws_ok($$SELECT ''::fencing.token$$, '22P02', NULL, 'token input '''' -> 22P02');
SELECT throws_ok($$SELECT 'abc'::fencing.token$$, '22P02', NULL, 'token input ''abc'' -> 22P02');
SELECT throws_ok($$SELECT '1.5'::fencing.token$$, '22P02', NULL, 'token input ''1.5'' -> 22P02');
SELECT throws_ok($$SELECT '12x'::fencing.token$$, '22P02', NULL, 'token input ''12x'' -> 22P02');
SELECT throws_ok($$SELECT ' '::fencing.token$$, '22P02', NULL, 'token input '' '' -> 22P02');
SELECT throws_ok($$SELECT '0'::fencing.token$$, '22003', NULL, 'token input ''0'' -> 22003');
SELECT throws_ok($$SELECT '9223372036854775808'::fencing.token$$, '22003', NULL, 'token input 2^63 -> 22003');
SELECT throws_ok($$SELECT 0::fencing.token$$, '22003', NULL, 'integer 0 -> token: 22003');
SELECT throws_ok($$SELECT (-1)::bigint::fencing.token$$, '22003', NULL, 'bigint -1 -> token: 22003');
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
SELECT throws_ok($$SELECT fencing.validate('pgtap:never', 1)$$, 'FN001', NULL, 'validate on a never acquired resource: FN001');
SELECT throws_ok($$SELECT fencing.validate('pgtap:v', NULL)$$, 'FN001', NULL, 'validate without a token: FN001');

--------------------------------------------------------------------------------
-- A few calls.
--------------------------------------------------------------------------------
SELECT ok(fencing.current('pgtap:never') IS NULL, 'current() of a never acquired resource is NULL');
CREATE TEMP TABLE pgtap_tok (name text PRIMARY KEY, t fencing.token);
INSERT INTO pgtap_tok VALUES ('a1', fencing.acquire('pgtap:a'));
SELECT ok((SELECT t FROM pgtap_tok WHERE name = 'a1') IS NOT NULL, 'acquire returns a token');
SELECT results_eq($$SELECT fencing.current('pgtap:a')::bigint$$, $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'current() is the token acquire returned');
SELECT results_eq($$SELECT fencing.acquire('pgtap:a')::bigint$$, $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'a nested acquire returns the same token');
SELECT results_eq($$SELECT fencing.validate('pgtap:a', t)::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  $$SELECT t::bigint FROM pgtap_tok WHERE name = 'a1'$$,
                  'validate returns the token while it is held');
SELECT results_eq($$SELECT resource COLLATE "default", scope, granted FROM fencing.locks WHERE pid = pg_backend_pid()$$,
                  $$VALUES ('pgtap:a'::text, 'session'::text, true)$$,
                  'fencing.locks shows the session hold once');
SELECT is(fencing.release('pgtap:a'), true, 'first release');
SELECT is(fencing.release('pgtap:a'), true, 'second release');
SET LOCAL client_min_messages = error;  -- the WARNING of the next release
SELECT is(fencing.release('pgtap:a'), false, 'a third release finds nothing to release');
SET LOCAL client_min_messages = warning;
SELECT throws_ok($$SELECT fencing.validate('pgtap:a', t) FROM pgtap_tok WHERE name = 'a1'$$, 'FN001', NULL,
                 'validate after release: FN001');
INSERT INTO pgtap_tok VALUES ('a2', fencing.try_acquire('pgtap:a'));
SELECT ok((SELECT (SELECT t::bigint FROM pgtap_tok WHERE name = 'a2') > (SELECT t::bigint FROM pgtap_tok WHERE name = 'a1')),
          'the next acquisition is newer');
SELECT throws_ok($$SELECT fencing.validate('pgtap:a', t) FROM pgtap_tok WHERE name = 'a1'$$, 'FN001', NULL,
                 'the old token is stale while the new one is held');
SELECT is(fencing.acquire('pgtap:b') IS NOT NULL, true, 'a second resource');
SELECT is(fencing.release_all(), 2, 'release_all releases both resources');
SELECT is(fencing.release_all(), 0, 'release_all again: nothing left');
SELECT is((SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), 0,
          'no advisory lock left');
SELECT lives_ok($$SELECT fencing.acquire_xact('pgtap:x')$$, 'acquire_xact in the test transaction');
SELECT results_eq($$SELECT scope FROM fencing.locks WHERE pid = pg_backend_pid()$$, $$VALUES ('transaction'::text)$$,
                  'the transaction hold shows as transaction scope');
SELECT is(fencing.release_all(), 0, 'release_all leaves transaction holds alone');
SELECT is(fencing.acquire('pgtap:m')::bigint > 0, true, 'a token reads back as bigint');
SELECT is(pg_typeof(fencing.acquire('pgtap:m')::bigint)::text, 'bigint', 'token::bigint is bigint');
SELECT is(fencing.release_all(), 1, 'release_all after two nested holds counts one resource');
SELECT is('9223372036854775807'::fencing.token::bigint, 9223372036854775807::bigint, 'largest token round trips through bigint');
SELECT is(fencing.token_send('258'), '\x0000000000000102'::bytea, 'binary send is int8''s wire format');

SELECT * FROM finish();
ROLLBACK;
