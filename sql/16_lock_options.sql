-- The options of the acquire family as far as one session can show them:
-- lock_delay, permits (counted locks) and shared holds; their argument
-- checks, nesting, release, scopes and what fencing.locks shows. Waits,
-- fairness and other sessions are in the isolation specs; lost holders and
-- their delays in the TAP test 070_lock_delay.pl.
-- Prints comparisons, never raw token values.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
-- SQLSTATE and detail of a statement's error, token values left out.
CREATE FUNCTION pg_temp.detail_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || regexp_replace(d, 'Token [0-9]+', 'Token N');
END
$$;
-- This session's rows of fencing.locks (no tokens).
CREATE FUNCTION pg_temp.mine() RETURNS TABLE (resource text, scope text, granted boolean, mode text, permit integer,
                                             delayed boolean)
LANGUAGE sql AS $$
    SELECT l.resource, l.scope, l.granted, l.mode, l.permit, l.delay_until IS NOT NULL
      FROM fencing.locks l WHERE l.pid = pg_backend_pid() ORDER BY 1, 5, 2
$$;
-- Every advisory lock of this session by fencing's kind (field 4) and mode.
CREATE FUNCTION pg_temp.my_advisory_locks() RETURNS TABLE (kind integer, mode text, n bigint)
LANGUAGE sql AS $$
    SELECT objsubid::integer, mode, count(*) FROM pg_locks
     WHERE locktype = 'advisory' AND pid = pg_backend_pid() GROUP BY 1, 2 ORDER BY 1, 2
$$;

--------------------------------------------------------------------------------
-- The signatures: new parameters at the end, with defaults; old calls work.
--------------------------------------------------------------------------------
SELECT p.oid::regprocedure AS function, pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'fencing' AND p.proname IN ('acquire', 'try_acquire', 'acquire_xact', 'try_acquire_xact')
 ORDER BY p.oid;  -- the order they were created in

--------------------------------------------------------------------------------
-- Argument checks: lock_delay 0 .. 1 minute (22023), permits 1 .. 1000
-- (22023), shared not NULL (22004), shared and permits do not combine (22023).
--------------------------------------------------------------------------------
SELECT stmt, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM unnest(ARRAY[
    'SELECT fencing.acquire(''t14:arg'', lock_delay => ''-1 s'')',
    'SELECT fencing.acquire(''t14:arg'', lock_delay => ''61 s'')',
    'SELECT fencing.try_acquire(''t14:arg'', lock_delay => ''1 min 1 ms'')',
    'SELECT fencing.acquire_xact(''t14:arg'', lock_delay => ''1 day'')',
    'SELECT fencing.acquire(''t14:arg'', permits => 0)',
    'SELECT fencing.acquire(''t14:arg'', permits => -1)',
    'SELECT fencing.acquire(''t14:arg'', permits => 1001)',
    'SELECT fencing.try_acquire_xact(''t14:arg'', permits => 1001)',
    'SELECT fencing.acquire(''t14:arg'', shared => NULL)',
    'SELECT fencing.try_acquire(''t14:arg'', shared => NULL)',
    'SELECT fencing.acquire(''t14:arg'', permits => 3, shared => true)',
    'SELECT fencing.try_acquire_xact(''t14:arg'', permits => 3, shared => true)'
  ]) AS stmt;
\set VERBOSITY terse
SELECT fencing.acquire('t14:arg', lock_delay => '2 min');
SELECT fencing.acquire('t14:arg', permits => 0);
SELECT fencing.acquire('t14:arg', permits => 2, shared => true);
\set VERBOSITY default
-- A refused call takes nothing.
SELECT count(*) AS locks_after_errors FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- NULL means "not asked for": lock_delay => NULL and permits => NULL are plain.
SELECT fencing.acquire('t14:null', lock_delay => NULL, permits => NULL) IS NOT NULL AS got;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:null');
-- lock_delay => '0' is no delay.
SELECT fencing.acquire('t14:zero', lock_delay => '0') IS NOT NULL AS got;
SELECT fencing.release('t14:zero');

--------------------------------------------------------------------------------
-- The view's columns, in order: the 1.0 columns, then mode, permit, delay_until.
--------------------------------------------------------------------------------
SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = 'fencing.locks'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

--------------------------------------------------------------------------------
-- lock_delay while held and after a clean release: no delay.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t14:delay', lock_delay => '30 s') AS d \gset
SELECT *, (SELECT token = :'d' FROM fencing.locks WHERE pid = pg_backend_pid()) AS token_ok FROM pg_temp.mine();
SELECT fencing.release('t14:delay');
SELECT count(*) AS delay_rows_after_release FROM fencing.locks WHERE resource = 't14:delay';
SELECT count(*) AS locks_after_release FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- Nested: the longest delay asked for counts; the hold is still one row.
SELECT fencing.acquire('t14:delay', lock_delay => '1 s') = fencing.acquire('t14:delay', reentrant => true, lock_delay => '5 s')
       AS nested_same;
SELECT * FROM pg_temp.mine();
SELECT fencing.release_all() AS released;
-- Transaction scope: commit frees it at once.
BEGIN;
SELECT fencing.acquire_xact('t14:delay', lock_delay => '30 s') IS NOT NULL AS got;
SELECT * FROM pg_temp.mine();
COMMIT;
SELECT count(*) AS locks_after_commit FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

--------------------------------------------------------------------------------
-- Shared holds.
--------------------------------------------------------------------------------
-- A resource never acquired: the first shared hold issues its first token,
-- which is then its latest token.
SELECT fencing.current('t14:sh:new') IS NULL AS never_acquired;
SELECT fencing.acquire('t14:sh:new', shared => true) AS first \gset
SELECT fencing.current('t14:sh:new') = :'first' AS first_is_current;
SELECT fencing.release('t14:sh:new');
SELECT fencing.acquire('t14:sh:new', shared => true) = :'first' AS same_token_again;
SELECT fencing.release('t14:sh:new');

-- A shared hold returns the latest exclusive token, and issues none.
SELECT fencing.acquire('t14:sh') AS ex \gset
SELECT fencing.release('t14:sh');
SELECT fencing.acquire('t14:sh', shared => true) = :'ex' AS shared_gets_latest,
       fencing.current('t14:sh') = :'ex' AS no_new_token;
SELECT * FROM pg_temp.mine();
SELECT * FROM pg_temp.my_advisory_locks();
-- A shared hold's row: the latest token; no grant time, lease or expiry.
SELECT token = :'ex' AS latest_token, since IS NULL AS no_since, lease IS NULL AS no_lease,
       expires_at IS NULL AS no_expiry FROM fencing.locks WHERE pid = pg_backend_pid();
-- The token is not valid again because a shared hold shares it: the
-- exclusive grant that issued it is over (a lost writer must not pass).
SELECT pg_temp.sqlstate_of(format('SELECT fencing.validate(%L, %s)', 't14:sh', :'ex')) AS validate_while_shared;
-- Nesting: a plain shared re-acquisition is refused (55006); reentrant nests.
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:sh', shared => true)$$) AS again_plain;
SELECT fencing.acquire('t14:sh', shared => true, reentrant => true) = :'ex' AS nested_same;
SELECT * FROM pg_temp.mine();
-- A shared hold cannot become exclusive (55006), reentrant or not: two
-- readers upgrading would wait for each other for ever.
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:sh')$$) AS exclusive_plain,
       pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:sh', reentrant => true)$$) AS exclusive_reentrant,
       pg_temp.sqlstate_of($$SELECT fencing.try_acquire('t14:sh', reentrant => true)$$) AS try_exclusive_reentrant;
\set VERBOSITY terse
SELECT fencing.acquire('t14:sh', reentrant => true);
\set VERBOSITY default
SELECT fencing.release('t14:sh') AND fencing.release('t14:sh') AS released_twice;
SELECT fencing.release('t14:sh') AS third_release;
SELECT count(*) AS locks_after_release FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- After the shared hold, validate() of its token still fails.
SELECT pg_temp.sqlstate_of(format('SELECT fencing.validate(%L, %s)', 't14:sh', :'ex')) AS validate_after;

-- A permit this session holds under the permit's own name (a plain
-- acquisition of R, chr(31), p): a counted acquisition of R raises 55006,
-- reentrant or not, and in a try form: a plain hold carries none of a
-- permit's marks (its count was never checked against the holders'), so no
-- counted hold nests on it. The message names the permit and the scope it
-- is held in.
SELECT fencing.acquire('t14:q' || chr(31) || '1') IS NOT NULL AS plain_permit_name;
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:q', permits => 1)$$) AS permit_held_by_name,
       pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:q', permits => 1, reentrant => true)$$) AS reentrant,
       pg_temp.sqlstate_of($$SELECT fencing.try_acquire('t14:q', permits => 1, reentrant => true)$$) AS try_reentrant,
       pg_temp.sqlstate_of($$SELECT fencing.acquire_xact('t14:q', permits => 1, reentrant => true)$$) AS xact_reentrant;
SELECT fencing.release('t14:q' || chr(31) || '1');
SELECT fencing.acquire('t14:q' || chr(31) || '2') IS NOT NULL AS plain_permit_2;
SELECT fencing.acquire('t14:q', permits => 3);
SELECT fencing.acquire('t14:q', permits => 3, reentrant => true);
SELECT fencing.release('t14:q' || chr(31) || '2');
BEGIN;
SELECT fencing.acquire_xact('t14:q' || chr(31) || '3') IS NOT NULL AS xact_permit_3;
SELECT fencing.acquire('t14:q', permits => 3);
ROLLBACK;
BEGIN;
SELECT fencing.acquire_xact('t14:q' || chr(31) || '3') IS NOT NULL AS xact_permit_3;
SELECT fencing.acquire('t14:q' || chr(31) || '3', reentrant => true) IS NOT NULL AS and_session;
SELECT fencing.acquire_xact('t14:q', permits => 3, reentrant => true);
ROLLBACK;
SELECT fencing.release('t14:q' || chr(31) || '3') AS session_hold_released;
SELECT count(*) AS locks_after_permit_names FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- An exclusive holder may nest a shared hold (reentrant): it stays exclusive.
SELECT fencing.acquire('t14:sh') AS ex2 \gset
SELECT fencing.acquire('t14:sh', shared => true, reentrant => true) = :'ex2' AS shared_in_exclusive;
SELECT * FROM pg_temp.mine();
-- The nested hold is one more nesting of the exclusive grant: once the hold
-- it nested on is released, what is left is still exclusive, and the
-- grant's token valid, until it is released too.
SELECT fencing.release('t14:sh') AS released_one;
SELECT * FROM pg_temp.mine();
SELECT fencing.validate('t14:sh', :'ex2') = :'ex2' AS still_valid;
SELECT fencing.release('t14:sh') AS released_nested;
SELECT count(*) AS locks_after FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_temp.sqlstate_of(format('SELECT fencing.validate(%L, %s)', 't14:sh', :'ex2')) AS validate_after_both;
-- The same when the hold it nested on was transaction-scoped.
BEGIN;
SELECT fencing.acquire_xact('t14:sh') AS ex3 \gset
SELECT fencing.acquire('t14:sh', shared => true, reentrant => true) = :'ex3' AS session_shared_in_xact;
COMMIT;
SELECT * FROM pg_temp.mine();
SELECT fencing.validate('t14:sh', :'ex3') = :'ex3' AS valid_after_commit;
SELECT fencing.release_all() AS released;

-- Transaction scope: the scope shows, and commit ends it.
BEGIN;
SELECT fencing.acquire_xact('t14:sh', shared => true) = :'ex3' AS xact_shared;
SELECT fencing.try_acquire_xact('t14:sh:other', shared => true) IS NOT NULL AS try_xact_shared;
SELECT * FROM pg_temp.mine();
COMMIT;
SELECT count(*) AS locks_after_commit FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- Held shared in both scopes at once: one row, with the scope of the first
-- hold; the session hold stays after COMMIT.
BEGIN;
SELECT fencing.acquire('t14:sh', shared => true) IS NOT NULL AS session_shared;
SELECT fencing.acquire_xact('t14:sh', shared => true, reentrant => true) IS NOT NULL AS xact_shared_too;
SELECT * FROM pg_temp.mine();
COMMIT;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:sh');
BEGIN;
SELECT fencing.acquire_xact('t14:sh', shared => true) IS NOT NULL AS xact_shared;
SELECT fencing.acquire('t14:sh', shared => true, reentrant => true) IS NOT NULL AS session_shared_too;
SELECT * FROM pg_temp.mine();
COMMIT;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:sh');
-- ROLLBACK TO SAVEPOINT undoes a shared hold taken after it.
BEGIN;
SAVEPOINT a;
SELECT fencing.acquire_xact('t14:sh', shared => true) IS NOT NULL AS got;
ROLLBACK TO SAVEPOINT a;
SELECT count(*) AS rows_after_rollback_to FROM pg_temp.mine();
COMMIT;
-- A shared hold writes nothing: it is allowed in a read-only transaction
-- (the first token of a resource is a write: 25006).
BEGIN READ ONLY;
SELECT fencing.acquire_xact('t14:sh', shared => true) IS NOT NULL AS read_only_shared;
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire_xact('t14:sh:never', shared => true)$$) AS first_token_read_only;
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire_xact('t14:sh:never')$$) AS exclusive_read_only;
COMMIT;
-- A lease on a shared hold: renew() reports it (fencing.locks does not).
SELECT fencing.acquire('t14:sh', lease => '1 min', shared => true) IS NOT NULL AS got;
SELECT fencing.renew('t14:sh') AS lease_left;
SELECT lease IS NULL AS no_lease_shown FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t14:sh');
SELECT pg_temp.sqlstate_of($$SELECT fencing.renew('t14:sh')$$) AS renew_after_release;
-- A session-scoped shared hold survives ROLLBACK; release_all ends it.
BEGIN;
SELECT fencing.acquire('t14:sh', shared => true) IS NOT NULL AS got;
ROLLBACK;
SELECT * FROM pg_temp.mine();
SELECT fencing.release_all() AS released;
SELECT count(*) AS locks_after_release_all FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

--------------------------------------------------------------------------------
-- Counted locks: permits.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t14:pool', permits => 3) AS p1 \gset
SELECT * FROM pg_temp.mine();
-- Each permit is its own fenced grant: the plain resource has no token.
SELECT fencing.current('t14:pool') IS NULL AS plain_resource_untouched;
SELECT fencing.validate('t14:pool', :'p1') = :'p1' AS permit_token_valid;
-- One permit per session: again is 55006; reentrant nests on the same permit;
-- a different count is refused (55T01).
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:pool', permits => 3)$$) AS again_plain,
       pg_temp.sqlstate_of($$SELECT fencing.acquire('t14:pool', permits => 4, reentrant => true)$$) AS other_count;
\set VERBOSITY terse
SELECT fencing.acquire('t14:pool', permits => 4, reentrant => true);
\set VERBOSITY default
SELECT fencing.acquire('t14:pool', permits => 3, reentrant => true) = :'p1' AS nested_same;
SELECT * FROM pg_temp.mine();
-- The plain resource of the same name is another lock.
SELECT fencing.acquire('t14:pool') IS NOT NULL AS plain_too;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:pool') AS released_plain_first;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:pool') AND fencing.release('t14:pool') AS released_permit_twice;
SELECT fencing.release('t14:pool') AS none_left;
SELECT count(*) AS locks_after_release FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_temp.sqlstate_of(format('SELECT fencing.validate(%L, %s)', 't14:pool', :'p1')) AS validate_after;
-- validate()'s detail for a resource without a latest token of its own:
-- acquired only with permits (none held with the token), or never.
SELECT fencing.acquire('t14:pool:only', permits => 2) AS q1 \gset
SELECT fencing.release('t14:pool:only') AS released;
SELECT pg_temp.detail_of(format('SELECT fencing.validate(%L, %s)', 't14:pool:only', :'q1')) AS permits_only;
SELECT pg_temp.detail_of($$SELECT fencing.validate('t14:pool:never', 5)$$) AS never_acquired;

-- The next acquisition gets the lowest free permit again, with a new token.
SELECT fencing.acquire('t14:pool', permits => 3) AS p1b \gset
SELECT :'p1b'::bigint > :'p1'::bigint AS newer, (SELECT permit FROM fencing.locks WHERE pid = pg_backend_pid()) AS permit;
-- A lease on a permit: renew() reports it.
SELECT fencing.release_all() AS released;
SELECT fencing.acquire('t14:pool', lease => '1 min', permits => 3) IS NOT NULL AS got;
SELECT fencing.renew('t14:pool') AS lease_left;
SELECT fencing.release_all() AS released;

-- Transaction scope, try forms.
BEGIN;
SELECT fencing.acquire_xact('t14:pool', permits => 3) IS NOT NULL AS got;
SELECT fencing.try_acquire_xact('t14:pool2', permits => 1) IS NOT NULL AS try_got;
SELECT * FROM pg_temp.mine();
COMMIT;
SELECT count(*) AS locks_after_commit FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT fencing.try_acquire('t14:pool', permits => 3) IS NOT NULL AS try_got;
SELECT * FROM pg_temp.mine();
-- A session permit survives ROLLBACK; ROLLBACK TO SAVEPOINT undoes an xact one.
BEGIN;
SAVEPOINT a;
SELECT fencing.acquire_xact('t14:pool3', permits => 2) IS NOT NULL AS got;
ROLLBACK TO SAVEPOINT a;
ROLLBACK;
SELECT * FROM pg_temp.mine();
-- pg_advisory_unlock_all() drops session permits too (as it drops every
-- session-level advisory lock), and fencing notices.
SELECT pg_advisory_unlock_all();
SELECT count(*) AS locks_after_unlock_all FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT fencing.release('t14:pool') AS release_after_unlock_all;
SELECT fencing.acquire('t14:pool', permits => 3) IS NOT NULL AS got_again;
SELECT fencing.release_all() AS released;

-- A permit is the resource named by its resource's name, U+001F and its
-- number: current() of that name is the permit's latest token.
SELECT fencing.acquire('t14:named', permits => 3) AS pn \gset
SELECT fencing.current('t14:named' || chr(31) || '1') = :'pn' AS current_of_permit_1,
       fencing.current('t14:named') IS NULL AS plain_untouched;
SELECT fencing.release('t14:named');
-- A new resource key secret gives every row the key of its name: permits
-- keep their rows and tokens, and go on from there.
INSERT INTO fencing.key_secret DEFAULT VALUES;
SELECT fencing.current('t14:named' || chr(31) || '1') = :'pn' AS permit_row_kept;
SELECT fencing.acquire('t14:named', permits => 3) AS pn2 \gset
SELECT :'pn2'::bigint > :'pn'::bigint AS newer_after_new_secret,
       fencing.current('t14:named' || chr(31) || '1') = :'pn2' AS same_row;
SELECT * FROM pg_temp.mine();
SELECT count(*) AS permit_rows FROM fencing.fence_state WHERE resource LIKE 't14:named%';
SELECT fencing.release('t14:named');

-- permits => 1 is a mutex with its own token.
SELECT fencing.acquire('t14:one', permits => 1) IS NOT NULL AS got;
SELECT * FROM pg_temp.mine();
SELECT fencing.release('t14:one');

-- Nothing left behind.
SELECT count(*) AS locks_at_end FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
