-- The view fencing.locks, one row per held or awaited
-- fencing lock (awaited ones are in the isolation specs, they need a second
-- session). Prints comparisons, never raw token values.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

-- The columns, in order.
SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = 'fencing.locks'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

-- Nothing held, nothing shown.
SELECT count(*) AS rows_before FROM fencing.locks WHERE pid = pg_backend_pid();

--------------------------------------------------------------------------------
-- A session hold.
--------------------------------------------------------------------------------
SELECT clock_timestamp() AS before_acquire \gset
SELECT fencing.acquire('t12:one') AS one \gset
SELECT resource, token = :'one' AS token_is_returned_one, pid = pg_backend_pid() AS my_pid, scope, granted,
       since >= date_trunc('second', :'before_acquire'::timestamptz) AND since <= clock_timestamp() AS since_ok,
       application_name = current_setting('application_name') AS application_name_ok,
       lease IS NULL AS no_lease, expires_at IS NULL AS no_expiry
  FROM fencing.locks WHERE pid = pg_backend_pid();
-- Nested: still one row.
SELECT fencing.acquire('t12:one', reentrant => true) = :'one' AS nested_same;
SELECT count(*) AS rows_nested FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t12:one');
SELECT resource, scope FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t12:one');
SELECT count(*) AS rows_after_release FROM fencing.locks WHERE pid = pg_backend_pid();

--------------------------------------------------------------------------------
-- A transaction hold, and both scopes on one resource.
--------------------------------------------------------------------------------
BEGIN;
SELECT fencing.acquire_xact('t12:x') AS x \gset
SELECT resource, token = :'x' AS token_ok, scope, granted FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.acquire('t12:x', reentrant => true) = :'x' AS session_same;
SELECT resource, token = :'x' AS token_ok, scope, granted FROM fencing.locks WHERE pid = pg_backend_pid() ORDER BY scope;
COMMIT;
SELECT resource, token = :'x' AS token_ok, scope, granted FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t12:x');
SELECT count(*) AS rows_after_release FROM fencing.locks WHERE pid = pg_backend_pid();

BEGIN;
SELECT fencing.try_acquire_xact('t12:y') IS NOT NULL AS got;
SELECT resource, scope FROM fencing.locks WHERE pid = pg_backend_pid();
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM fencing.locks WHERE pid = pg_backend_pid();

--------------------------------------------------------------------------------
-- A leased hold shows its lease and when it expires.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t12:lease', lease => '90 seconds') IS NOT NULL AS got;
SELECT resource, lease, expires_at > now() AS expires_later, expires_at <= clock_timestamp() + interval '90 seconds' AS within_lease
  FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t12:lease');

--------------------------------------------------------------------------------
-- Many resources: one row each, with the token current() reports; the
-- application's own advisory locks are not fencing locks.
--------------------------------------------------------------------------------
SELECT count(fencing.acquire('t12:many:' || g)) AS acquired FROM generate_series(1, 100) g;
SELECT pg_advisory_lock(1), pg_advisory_lock(1, 2), pg_advisory_lock(fencing.resource_key('t12:many:1'));
SELECT count(*) AS rows_held, count(DISTINCT resource) AS resources, count(DISTINCT token) AS tokens,
       bool_and(token = fencing.current(resource)) AS tokens_current,
       bool_and(scope = 'session' AND granted) AS all_session_granted
  FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release_all() AS released;
SELECT count(*) AS rows_after_release_all FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT pg_advisory_unlock_all();

--------------------------------------------------------------------------------
-- An ordinary role reads the view and uses the functions.
--------------------------------------------------------------------------------
CREATE ROLE regress_fencing_t12_app;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_t12_app;
SET ROLE regress_fencing_t12_app;
SELECT fencing.acquire('t12:app') AS app \gset
SELECT resource, token = :'app' AS token_ok, scope, granted FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.validate('t12:app', :'app') = :'app' AS valid, fencing.current('t12:app') = :'app' AS current_ok;
SELECT fencing.release('t12:app');
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing_t12_app;
DROP ROLE regress_fencing_t12_app;
SELECT count(*) AS rows_at_end FROM fencing.locks WHERE pid = pg_backend_pid();
