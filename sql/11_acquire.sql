-- Acquisition (and the monotonic, exclusive and separate-key-space guarantees
-- as far as one session can show them): acquire, try_acquire, the _xact forms, nesting, release,
-- release_all, current, validate.
-- Tokens come from one database-wide counter, so their values depend on what
-- ran before: this file prints comparisons, never raw token values.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

-- The SQLSTATE a statement ends with ('ok' when it succeeds).
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;

-- This session's fencing locks (resource, scope), from the lock manager itself.
CREATE FUNCTION pg_temp.my_fencing_locks() RETURNS TABLE (resource text, scope text, granted boolean)
LANGUAGE sql AS $$
    SELECT l.resource, l.scope, l.granted FROM fencing.locks l
     WHERE l.pid = pg_backend_pid() ORDER BY 1, 2
$$;
-- Every advisory lock of this session: (kind, mode); kind is 'fencing' for
-- fencing's resource locks, 'fencing token' for its token locks, 'app' for
-- pg_advisory_lock's.
CREATE FUNCTION pg_temp.my_advisory_locks() RETURNS TABLE (kind text, mode text, n bigint)
LANGUAGE sql AS $$
    SELECT CASE objsubid WHEN 32257 THEN 'fencing' WHEN 32258 THEN 'fencing token' ELSE 'app' END,
           mode, count(*)
      FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
     GROUP BY 1, 2 ORDER BY 1, 2
$$;

--------------------------------------------------------------------------------
-- Resource names: 1 to 1024 bytes (22023), not NULL (22004).
--------------------------------------------------------------------------------
SELECT fencing.acquire('');
SELECT fencing.acquire(repeat('x', 1025));
SELECT fencing.acquire(NULL);
SELECT stmt, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM unnest(ARRAY[
    'SELECT fencing.acquire('''')',
    'SELECT fencing.try_acquire('''')',
    'SELECT fencing.acquire_xact('''')',
    'SELECT fencing.try_acquire_xact('''')',
    'SELECT fencing.release('''')',
    'SELECT fencing.current('''')',
    'SELECT fencing.validate('''', 1)',
    'SELECT fencing.acquire(repeat(''x'', 1025))',
    'SELECT fencing.try_acquire(repeat(''x'', 1025))',
    'SELECT fencing.acquire_xact(repeat(''x'', 1025))',
    'SELECT fencing.try_acquire_xact(repeat(''x'', 1025))',
    'SELECT fencing.release(repeat(''x'', 1025))',
    'SELECT fencing.current(repeat(''x'', 1025))',
    'SELECT fencing.validate(repeat(''x'', 1025), 1)',
    'SELECT fencing.acquire(repeat(''é'', 513))',
    'SELECT fencing.acquire(NULL)',
    'SELECT fencing.try_acquire(NULL)',
    'SELECT fencing.acquire_xact(NULL)',
    'SELECT fencing.try_acquire_xact(NULL)',
    'SELECT fencing.release(NULL)',
    'SELECT fencing.validate(NULL, 1)',
    'SELECT fencing.acquire_xact(repeat(''x'', 1024))',
    'SELECT fencing.try_acquire_xact(repeat(''é'', 512))',
    'SELECT fencing.acquire_xact(''a'')',
    'SELECT fencing.acquire_xact(''t11:name with spaces, ''''quotes'''' and ünïcødé'')'
  ]) WITH ORDINALITY AS s(stmt, n)
 ORDER BY n;
-- The limit counts bytes, not characters; 1024 bytes work everywhere.
SELECT octet_length(repeat('é', 512)) AS bytes_512, octet_length(repeat('é', 513)) AS bytes_513;
SELECT fencing.acquire(repeat('x', 1024)) AS t_long \gset
SELECT fencing.current(repeat('x', 1024)) = :'t_long' AS current_of_long,
       fencing.validate(repeat('x', 1024), :'t_long') = :'t_long' AS validate_of_long,
       fencing.release(repeat('x', 1024)) AS released;
-- A failed acquisition leaves nothing behind.
SELECT * FROM pg_temp.my_advisory_locks();

--------------------------------------------------------------------------------
-- wait and lease arguments.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t11:args', wait => '-1 second');
SELECT fencing.acquire('t11:args', lease => '0');
SELECT stmt, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM unnest(ARRAY[
    'SELECT fencing.acquire(''t11:args'', wait => ''-1 second'')',
    'SELECT fencing.acquire(''t11:args'', wait => ''-1 day'')',
    'SELECT fencing.acquire_xact(''t11:args'', wait => ''-1 ms'')',
    'SELECT fencing.acquire(''t11:args'', lease => ''0'')',
    'SELECT fencing.acquire(''t11:args'', lease => ''-5 seconds'')',
    'SELECT fencing.acquire_xact(''t11:args'', lease => ''0'')',
    'SELECT fencing.acquire_xact(''t11:args'', lease => ''-1 ms'')',
    'SELECT fencing.acquire_xact(''t11:args'', wait => ''0'')',
    'SELECT fencing.acquire_xact(''t11:args'', wait => ''10 ms'', reentrant => true)',
    'SELECT fencing.acquire_xact(''t11:args'', wait => NULL, reentrant => true)',
    'SELECT fencing.acquire_xact(''t11:args'', wait => ''1 hour'', lease => ''1 hour'', reentrant => true)'
  ]) WITH ORDINALITY AS s(stmt, n)
 ORDER BY n;
-- Nothing stayed held after the failures.
SELECT * FROM pg_temp.my_advisory_locks();

--------------------------------------------------------------------------------
-- acquire: a token; current() reports it; nesting returns the same token and
-- must be released as many times.
--------------------------------------------------------------------------------
SELECT fencing.current('t11:never') IS NULL AS never_acquired_is_null;
SELECT fencing.acquire('t11:a') AS a1 \gset
SELECT pg_typeof(fencing.current('t11:a')), fencing.current('t11:a') = :'a1' AS current_is_a1;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.acquire('t11:a', reentrant => true) = :'a1' AS nested_same,
       fencing.try_acquire('t11:a', reentrant => true) = :'a1' AS try_nested_same,
       fencing.acquire('t11:a', wait => '0', reentrant => true) = :'a1' AS nowait_nested_same;
-- Not reentrant by default: a plain re-acquire in either scope and form is
-- refused (55006) and takes nothing, so that a pooled connection handed on
-- with the lock still held never gives a second worker the same token.
SELECT s.stmt, pg_temp.sqlstate_of(s.stmt) AS sqlstate
  FROM unnest(ARRAY[
    'SELECT fencing.acquire(''t11:a'')',
    'SELECT fencing.acquire(''t11:a'', wait => ''0'')',
    'SELECT fencing.acquire(''t11:a'', reentrant => false)',
    'SELECT fencing.try_acquire(''t11:a'')',
    'SELECT fencing.acquire_xact(''t11:a'')',
    'SELECT fencing.try_acquire_xact(''t11:a'')',
    'SELECT fencing.acquire(''t11:a'', reentrant => NULL)'
  ]) WITH ORDINALITY AS s(stmt, n)
 ORDER BY n;
SELECT fencing.acquire('t11:a');
-- Four holds, one lock each (as pg_advisory_lock shows nesting).
SELECT * FROM pg_temp.my_advisory_locks();
SELECT fencing.release('t11:a') AS r1, fencing.release('t11:a') AS r2, fencing.release('t11:a') AS r3;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.validate('t11:a', :'a1') = :'a1' AS still_valid;
SELECT fencing.release('t11:a') AS r4;
SELECT * FROM pg_temp.my_fencing_locks();
-- One release too many: false and a WARNING.
SELECT fencing.release('t11:a') AS r5;
SELECT fencing.release('t11:never') AS never_held;
-- current() keeps the latest token after the release.
SELECT fencing.current('t11:a') = :'a1' AS current_after_release;
-- The next acquisition is newer.
SELECT fencing.acquire('t11:a') AS a2 \gset
SELECT :'a2'::fencing.token > :'a1'::fencing.token AS a2_newer, fencing.current('t11:a') = :'a2' AS current_is_a2;
SELECT fencing.release('t11:a');

-- (1.2) The exception for a statement that calls acquire_xact twice (an
-- UPDATE's SET list evaluated again) covers statements sent together in one
-- query string (psql's \;): PostgreSQL gives them the message's time. Sent
-- as a message of its own, a repetition is refused (55006).
BEGIN;
SELECT fencing.acquire_xact('t11:message') > 0 AS first \; SELECT fencing.acquire_xact('t11:message') = fencing.current('t11:message') AS same_message_nests;
SELECT pg_temp.sqlstate_of('SELECT fencing.acquire_xact(''t11:message'')') AS next_message;
ROLLBACK;

-- acquire returns a token that reads back as bigint.
SELECT fencing.acquire('t11:cast')::bigint > 0 AS as_bigint, pg_typeof(fencing.acquire('t11:cast', reentrant => true)::bigint);
CREATE TABLE t11_bigint (n bigint);
INSERT INTO t11_bigint VALUES (fencing.acquire('t11:cast', reentrant => true));
SELECT n = fencing.current('t11:cast')::bigint AS assigned FROM t11_bigint;
SELECT fencing.release_all() AS released_resources;
DROP TABLE t11_bigint;

--------------------------------------------------------------------------------
-- try_acquire and try_acquire_xact: a token when free.
--------------------------------------------------------------------------------
SELECT fencing.try_acquire('t11:try') AS try1 \gset
SELECT :'try1'::fencing.token IS NOT NULL AS got_one, fencing.current('t11:try') = :'try1' AS is_current;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.release('t11:try');
BEGIN;
SELECT fencing.try_acquire_xact('t11:try') AS try2 \gset
SELECT :'try2'::fencing.token > :'try1'::fencing.token AS newer;
SELECT * FROM pg_temp.my_fencing_locks();
COMMIT;
SELECT * FROM pg_temp.my_fencing_locks();

--------------------------------------------------------------------------------
-- Transaction scope: released at COMMIT and at ROLLBACK, also in autocommit;
-- release() does not touch it.
--------------------------------------------------------------------------------
SELECT fencing.acquire_xact('t11:x') AS x0 \gset
-- Autocommit: the statement's transaction is over, so is the lock.
SELECT * FROM pg_temp.my_fencing_locks();
BEGIN;
SELECT fencing.acquire_xact('t11:x') AS x1 \gset
SELECT fencing.acquire_xact('t11:x', reentrant => true) = :'x1' AS nested_same, :'x1'::fencing.token > :'x0'::fencing.token AS newer;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.release('t11:x') AS release_of_xact_hold;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.validate('t11:x', :'x1') = :'x1' AS valid_in_xact;
COMMIT;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT * FROM pg_temp.my_advisory_locks();
\set VERBOSITY terse
SELECT fencing.validate('t11:x', :'x1');
\set VERBOSITY default

BEGIN;
SELECT fencing.acquire_xact('t11:x') AS x2 \gset
SELECT * FROM pg_temp.my_fencing_locks();
ROLLBACK;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT * FROM pg_temp.my_advisory_locks();

-- An error ends the transaction and its locks.
BEGIN;
SELECT fencing.acquire_xact('t11:x') AS x3 \gset
SELECT 1 / 0;
ROLLBACK;
SELECT * FROM pg_temp.my_fencing_locks();

-- A rolled back subtransaction gives back the locks it took.
BEGIN;
SELECT fencing.acquire_xact('t11:outer') IS NOT NULL AS outer_held;
SAVEPOINT sp;
SELECT fencing.acquire_xact('t11:inner') AS inner1 \gset
SELECT * FROM pg_temp.my_fencing_locks();
ROLLBACK TO SAVEPOINT sp;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.acquire_xact('t11:inner') AS inner2 \gset
SELECT :'inner2'::fencing.token > :'inner1'::fencing.token AS newer_after_subxact_abort;
SAVEPOINT sp2;
SELECT fencing.acquire_xact('t11:inner2') IS NOT NULL AS inner2_held;
RELEASE SAVEPOINT sp2;
SELECT * FROM pg_temp.my_fencing_locks();
COMMIT;
SELECT * FROM pg_temp.my_fencing_locks();

--------------------------------------------------------------------------------
-- Session scope survives ROLLBACK (of the transaction and of a subtransaction).
--------------------------------------------------------------------------------
BEGIN;
SELECT fencing.acquire('t11:s') AS s1 \gset
ROLLBACK;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.validate('t11:s', :'s1') = :'s1' AS valid_after_rollback,
       fencing.current('t11:s') = :'s1' AS current_after_rollback;
BEGIN;
SAVEPOINT sp;
SELECT fencing.acquire('t11:s', reentrant => true) = :'s1' AS nested_in_subxact;
ROLLBACK TO SAVEPOINT sp;
COMMIT;
-- Two holds now.
SELECT fencing.release('t11:s') AS r1, fencing.release('t11:s') AS r2, fencing.release('t11:s') AS r3;
SELECT * FROM pg_temp.my_advisory_locks();

--------------------------------------------------------------------------------
-- Both scopes on one resource in one session: one token.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t11:both') AS both1 \gset
BEGIN;
SELECT fencing.acquire_xact('t11:both', reentrant => true) = :'both1' AS xact_same_as_session;
SELECT * FROM pg_temp.my_fencing_locks();
COMMIT;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.release('t11:both');
BEGIN;
SELECT fencing.acquire_xact('t11:both') AS both2 \gset
SELECT fencing.acquire('t11:both', reentrant => true) = :'both2' AS session_same_as_xact,
       :'both2'::fencing.token > :'both1'::fencing.token AS newer;
COMMIT;
SELECT * FROM pg_temp.my_fencing_locks();
SELECT fencing.validate('t11:both', :'both2') = :'both2' AS session_hold_still_valid;
SELECT fencing.release('t11:both');
SELECT * FROM pg_temp.my_advisory_locks();

--------------------------------------------------------------------------------
-- A read-only transaction cannot be granted a new token (25006) and keeps
-- nothing; a lock the session already holds nests in it; current() and
-- validate() work in it.
--------------------------------------------------------------------------------
BEGIN READ ONLY;
SELECT pg_temp.sqlstate_of($$SELECT fencing.acquire('t11:ro')$$) AS acquire,
       pg_temp.sqlstate_of($$SELECT fencing.try_acquire('t11:ro')$$) AS try_acquire,
       pg_temp.sqlstate_of($$SELECT fencing.acquire_xact('t11:ro')$$) AS acquire_xact,
       pg_temp.sqlstate_of($$SELECT fencing.try_acquire_xact('t11:ro')$$) AS try_acquire_xact;
SELECT * FROM pg_temp.my_advisory_locks();
ROLLBACK;
SELECT fencing.acquire('t11:ro') AS ro1 \gset
BEGIN READ ONLY;
SELECT fencing.acquire('t11:ro', reentrant => true) = :'ro1' AS nested_in_read_only,
       fencing.current('t11:ro') = :'ro1' AS current_in_read_only,
       fencing.validate('t11:ro', :'ro1') = :'ro1' AS validate_in_read_only;
ROLLBACK;
SELECT fencing.release('t11:ro') AS r1, fencing.release('t11:ro') AS r2;
SELECT * FROM pg_temp.my_advisory_locks();

--------------------------------------------------------------------------------
-- Guarantee 1 in one session: tokens strictly increase whether the
-- transaction that got them committed or aborted, for the first acquisition
-- of a resource too.
--------------------------------------------------------------------------------
BEGIN;
SELECT fencing.acquire_xact('t11:first-in-aborted') AS f1 \gset
ROLLBACK;
SELECT fencing.current('t11:first-in-aborted') = :'f1' AS current_survives_abort;
SELECT fencing.acquire_xact('t11:first-in-aborted') > :'f1' AS newer_after_abort;

BEGIN;
SELECT fencing.acquire('t11:m') AS m1 \gset
SELECT fencing.release('t11:m');
ROLLBACK;
BEGIN;
SELECT fencing.acquire_xact('t11:m') AS m2 \gset
ROLLBACK;
SELECT fencing.acquire_xact('t11:m') AS m3 \gset
SELECT :'m2'::fencing.token > :'m1'::fencing.token AS m2_newer,
       :'m3'::fencing.token > :'m2'::fencing.token AS m3_newer,
       fencing.current('t11:m') = :'m3' AS current_is_m3;

-- 200 acquisitions, every other one in an aborted subtransaction, the rest
-- committed or not: strictly increasing, and current() follows.
CREATE TABLE t11_seen (n int, t fencing.token);
DO $$
DECLARE
    t fencing.token;
BEGIN
    FOR i IN 1..200 LOOP
        BEGIN
            t := fencing.acquire('t11:loop');
            INSERT INTO t11_seen VALUES (i, t);
            IF fencing.current('t11:loop') <> t THEN
                RAISE EXCEPTION 'current() is not the token just returned';
            END IF;
            PERFORM fencing.release('t11:loop');
            IF i % 2 = 0 THEN
                RAISE EXCEPTION 'abort' USING ERRCODE = 'P0001';
            END IF;
        EXCEPTION WHEN SQLSTATE 'P0001' THEN
            INSERT INTO t11_seen VALUES (i, t);
        END;
    END LOOP;
END
$$;
SELECT count(*) AS acquisitions,
       bool_and(t > prev) AS strictly_increasing
  FROM (SELECT t, lag(t) OVER (ORDER BY n) AS prev FROM t11_seen) s;
SELECT fencing.current('t11:loop') = max(t) AS current_is_latest FROM t11_seen;
DROP TABLE t11_seen;
SELECT * FROM pg_temp.my_advisory_locks();

-- Many resources in one statement: all distinct and increasing in call order.
BEGIN;
CREATE TEMP TABLE t11_many AS
    SELECT g, fencing.acquire_xact('t11:many:' || g) AS t FROM generate_series(1, 500) g;
SELECT count(*) AS held FROM pg_temp.my_fencing_locks();
SELECT count(DISTINCT t) AS distinct_tokens, bool_and(t IS NOT NULL) AS none_null FROM t11_many;
COMMIT;
SELECT count(*) AS held_after_commit FROM pg_temp.my_fencing_locks();
DROP TABLE t11_many;

--------------------------------------------------------------------------------
-- release_all: every session-scoped fencing lock, and nothing else: the
-- application's advisory locks with the very same keys stay, and so do
-- transaction-scoped fencing locks.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t11:ra1') IS NOT NULL, fencing.acquire('t11:ra1', reentrant => true) IS NOT NULL,
       fencing.acquire('t11:ra2') IS NOT NULL, fencing.acquire('t11:ra3') IS NOT NULL;
-- The application takes advisory locks on the same numbers as fencing's lock
-- on t11:ra1: pg_advisory_lock(bigint) on the 64-bit key, and
-- pg_advisory_lock(int, int) on its two halves.
SELECT classid, objid FROM pg_locks
 WHERE locktype = 'advisory' AND objsubid = 32257 AND pid = pg_backend_pid()
   AND ((classid::bigint << 32) | objid::bigint) = fencing.resource_key('t11:ra1') \gset
SELECT pg_advisory_lock(fencing.resource_key('t11:ra1')),
       pg_advisory_lock(((:classid::bigint # 2147483648) - 2147483648)::int, ((:objid::bigint # 2147483648) - 2147483648)::int),
       pg_advisory_lock(12345);
-- Same numbers as fencing's lock, as pg_locks shows them.
SELECT count(DISTINCT objsubid) AS kinds
  FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
   AND classid = :classid AND objid = :objid;
BEGIN;
SELECT fencing.acquire_xact('t11:ra-xact') IS NOT NULL AS xact_held;
SELECT * FROM pg_temp.my_advisory_locks();
SELECT fencing.release_all() AS released;
SELECT * FROM pg_temp.my_advisory_locks();
SELECT * FROM pg_temp.my_fencing_locks();
COMMIT;
SELECT fencing.release_all() AS released_again;
SELECT pg_advisory_unlock(fencing.resource_key('t11:ra1')),
       pg_advisory_unlock(((:classid::bigint # 2147483648) - 2147483648)::int, ((:objid::bigint # 2147483648) - 2147483648)::int),
       pg_advisory_unlock(12345);
SELECT * FROM pg_temp.my_advisory_locks();
-- The released resources are free and stale.
\set VERBOSITY terse
SELECT fencing.validate('t11:ra1', fencing.current('t11:ra1'));
\set VERBOSITY default

-- The application's advisory locks in the transaction scope never disturb
-- fencing either.
BEGIN;
SELECT pg_advisory_xact_lock(fencing.resource_key('t11:axl'));
SELECT fencing.acquire_xact('t11:axl') IS NOT NULL AS fencing_xact_too;
SELECT * FROM pg_temp.my_advisory_locks();
COMMIT;

--------------------------------------------------------------------------------
-- validate: the token while a lock granted with it is held; 23T01 otherwise.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t11:v') AS v1 \gset
SELECT fencing.validate('t11:v', :'v1') = :'v1' AS valid_while_held,
       pg_typeof(fencing.validate('t11:v', :'v1'));
SELECT fencing.acquire('t11:v-other') AS vo \gset
\set VERBOSITY terse
-- A token that was never granted for the resource.
SELECT fencing.validate('t11:v', (:'v1'::bigint + 1000000)::fencing.token);
-- Another resource's token, and this resource's token on another resource.
SELECT fencing.validate('t11:v', :'vo');
SELECT fencing.validate('t11:v-other', :'v1');
-- A resource never acquired.
SELECT fencing.validate('t11:v-never', :'v1');
-- No token at all.
SELECT fencing.validate('t11:v', NULL);
\set VERBOSITY default
SELECT what, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM (VALUES
    (1, 'held token',                  format('SELECT fencing.validate(%L, %s)', 't11:v', :'v1')),
    (2, 'held token of other resource', format('SELECT fencing.validate(%L, %s)', 't11:v', :'vo')),
    (3, 'token on other resource',     format('SELECT fencing.validate(%L, %s)', 't11:v-other', :'v1')),
    (4, 'never acquired resource',     format('SELECT fencing.validate(%L, %s)', 't11:v-never', :'v1')),
    (5, 'never granted token',         format('SELECT fencing.validate(%L, %s)', 't11:v', :'v1'::bigint + 1000000)),
    (6, 'null token',                  format('SELECT fencing.validate(%L, NULL)', 't11:v'))
  ) AS s(n, what, stmt)
 ORDER BY n;
-- Usable inline in a write.
CREATE TABLE t11_out (resource text, token fencing.token, payload text);
INSERT INTO t11_out (resource, token, payload)
SELECT 't11:v', :'v1', 'written while held'
 WHERE fencing.validate('t11:v', :'v1') IS NOT NULL;
PREPARE t11_write(fencing.token) AS
    INSERT INTO t11_out (resource, token, payload)
    SELECT 't11:v', $1, 'prepared write' WHERE fencing.validate('t11:v', $1) IS NOT NULL;
EXECUTE t11_write(:'v1');
SELECT fencing.release('t11:v');
\set VERBOSITY terse
SELECT fencing.validate('t11:v', :'v1');
INSERT INTO t11_out (resource, token, payload)
SELECT 't11:v', :'v1', 'written after release'
 WHERE fencing.validate('t11:v', :'v1') IS NOT NULL;
EXECUTE t11_write(:'v1');
\set VERBOSITY default
SELECT payload, token = :'v1' AS with_v1 FROM t11_out ORDER BY payload;
-- After a newer grant, the old token is stale and the new one valid.
SELECT fencing.acquire('t11:v') AS v2 \gset
\set VERBOSITY terse
SELECT fencing.validate('t11:v', :'v1');
\set VERBOSITY default
SELECT fencing.validate('t11:v', :'v2') = :'v2' AS new_token_valid;
EXECUTE t11_write(:'v2');
SELECT count(*) AS rows_written FROM t11_out;
DEALLOCATE t11_write;
DROP TABLE t11_out;

-- A transaction that validated a token of a resource cannot get a new token
-- of it: the new token would exist while a write that token guarded is still
-- uncommitted (the guard cannot hold back its own session). Every form is
-- refused with 55006, also after the session's own lock is released in the
-- transaction; a reentrant re-acquisition of a lock still held returns its
-- token, and after the transaction the resource is acquired as usual.
SELECT fencing.acquire('t11:g') AS g1 \gset
BEGIN;
SELECT fencing.validate('t11:g', :'g1') = :'g1' AS guarded;
SELECT fencing.acquire('t11:g', reentrant => true) = :'g1' AS reentrant_same_token;
SELECT fencing.release('t11:g') AND fencing.release('t11:g') AS released_twice;
SELECT fencing.acquire('t11:g');
ROLLBACK;
SELECT fencing.acquire('t11:g') AS g2 \gset
BEGIN;
SELECT fencing.validate('t11:g', :'g2') = :'g2' AS guarded;
SELECT fencing.release('t11:g');
SELECT what, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM (VALUES
    (1, 'acquire',          $$SELECT fencing.acquire('t11:g')$$),
    (2, 'try_acquire',      $$SELECT fencing.try_acquire('t11:g')$$),
    (3, 'acquire_xact',     $$SELECT fencing.acquire_xact('t11:g')$$),
    (4, 'try_acquire_xact', $$SELECT fencing.try_acquire_xact('t11:g')$$),
    (5, 'reentrant',        $$SELECT fencing.acquire('t11:g', reentrant => true)$$)
  ) AS s(n, what, stmt)
 ORDER BY n;
SELECT fencing.current('t11:g') = :'g2' AS no_new_token;
COMMIT;
SELECT fencing.acquire_xact('t11:g') > :'g2' AS acquired_after_commit;

-- The 23T01 error names the resource and both tokens in its detail.
DO $$
DECLARE
    v1 fencing.token;
    v2 fencing.token;
    msg text;
    detail text;
    state text;
BEGIN
    SELECT fencing.current('t11:v') INTO v2;
    v1 := (v2::bigint - 1)::fencing.token;
    BEGIN
        PERFORM fencing.validate('t11:v', v1);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    END;
    RAISE NOTICE 'sqlstate %', state;
    RAISE NOTICE 'message names the resource: %', position('t11:v' IN msg) > 0;
    RAISE NOTICE 'detail names the resource: %', position('t11:v' IN detail) > 0;
    RAISE NOTICE 'detail names the presented token: %', detail ~ ('\m' || v1::text || '\M');
    RAISE NOTICE 'detail names the latest token: %', detail ~ ('\m' || v2::text || '\M');
END
$$;
SELECT fencing.release_all() AS released;

--------------------------------------------------------------------------------
-- The application's pg_advisory_lock keys and fencing's never share a lock,
-- whatever the keys (the other direction is in the isolation specs).
--------------------------------------------------------------------------------
SELECT count(pg_advisory_lock(k)) AS app_locks
  FROM unnest(ARRAY[0, 1, -1, 9223372036854775807, -9223372036854775807 - 1, fencing.resource_key('t11:keys')]) AS k;
SELECT count(pg_advisory_lock(i, j)) AS app_locks
  FROM unnest(ARRAY[0, 1, -1, 2147483647, -2147483648]) AS i,
       unnest(ARRAY[0, 1, -1, 2147483647, -2147483648]) AS j;
SELECT fencing.acquire('t11:keys') IS NOT NULL AS acquired;
SELECT * FROM pg_temp.my_advisory_locks();
SELECT fencing.release('t11:keys');
SELECT * FROM pg_temp.my_advisory_locks();
SELECT pg_advisory_unlock_all();
SELECT * FROM pg_temp.my_advisory_locks();
--------------------------------------------------------------------------------
-- The lock manager is the truth: when PostgreSQL drops the session's advisory
-- locks behind fencing's back (pg_advisory_unlock_all(), DISCARD ALL), the
-- next acquisition is a fresh grant, a nested one returns that same token,
-- and releasing it leaves nothing held and the token stale.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t11:behind') AS b1 \gset
SELECT pg_advisory_unlock_all();
SELECT * FROM pg_temp.my_advisory_locks();
SELECT fencing.acquire('t11:behind') AS b2 \gset
SELECT fencing.acquire('t11:behind', reentrant => true) AS b3 \gset
SELECT :'b2'::fencing.token > :'b1'::fencing.token AS fresh_grant, :'b3' = :'b2' AS nested_same_as_fresh;
SELECT fencing.release('t11:behind') AS r1, fencing.release('t11:behind') AS r2;
SELECT * FROM pg_temp.my_advisory_locks();
\set VERBOSITY terse
SELECT fencing.validate('t11:behind', :'b2');
SELECT fencing.validate('t11:behind', :'b1');
\set VERBOSITY default
SELECT fencing.release('t11:behind') AS r3;

SELECT fencing.acquire('t11:discard') AS d1 \gset
DISCARD ALL;
-- DISCARD ALL dropped the temporary helper functions too.
SELECT count(*) AS advisory_locks_left FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT fencing.acquire('t11:discard') AS d2 \gset
SELECT fencing.acquire('t11:discard', reentrant => true) AS d3 \gset
SELECT :'d2'::fencing.token > :'d1'::fencing.token AS fresh_grant, :'d3' = :'d2' AS nested_same_as_fresh;
SELECT fencing.release('t11:discard') AS r1, fencing.release('t11:discard') AS r2;
SELECT count(*) AS advisory_locks_left FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
\set VERBOSITY terse
SELECT fencing.validate('t11:discard', :'d2');
\set VERBOSITY default

--------------------------------------------------------------------------------
-- A transaction that holds fencing locks (or validate() guards) cannot be
-- prepared (0A000): a prepared transaction would keep them after its session
-- ends, beyond any lease. The failed PREPARE rolls back and frees them.
--------------------------------------------------------------------------------
BEGIN;
SELECT fencing.acquire_xact('t11:2pc', lease => '1 s') IS NOT NULL AS held;
PREPARE TRANSACTION 't11_2pc';
\echo :SQLSTATE
SELECT count(*) AS advisory_locks_left FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- A validate() guard of an unleased grant too.
SELECT fencing.acquire('t11:2pc-guard') AS g_tok \gset
BEGIN;
SELECT fencing.validate('t11:2pc-guard', :g_tok) IS NOT NULL AS guarded;
PREPARE TRANSACTION 't11_2pc_guard';
\echo :SQLSTATE
SELECT count(*) AS guards_left FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 32259;
SELECT fencing.release('t11:2pc-guard');

--------------------------------------------------------------------------------
-- Not during a parallel operation (25000): a lock a parallel worker takes
-- goes when the worker exits, at the end of its statement, so a validate()
-- guard there would not last until its transaction ends. fencing's own
-- functions are PARALLEL UNSAFE; a function declared PARALLEL SAFE that
-- calls them is refused too (in a worker or, when none is free, in the
-- leader running the parallel plan itself).
--------------------------------------------------------------------------------
CREATE FUNCTION t11_par_validate(r text, t bigint) RETURNS bigint LANGUAGE plpgsql PARALLEL SAFE
  AS $$ BEGIN RETURN fencing.validate(r, t); END $$;
CREATE FUNCTION t11_par_acquire(r text) RETURNS bigint LANGUAGE plpgsql PARALLEL SAFE
  AS $$ BEGIN RETURN fencing.acquire(r); END $$;
CREATE FUNCTION t11_par_release(r text) RETURNS boolean LANGUAGE plpgsql PARALLEL SAFE
  AS $$ BEGIN RETURN fencing.release(r); END $$;
SELECT fencing.acquire('t11:parallel') AS par_tok \gset
BEGIN;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', true) AS parallel;
\set VERBOSITY terse
SAVEPOINT a;
SELECT t11_par_validate('t11:parallel', :par_tok);
\echo :SQLSTATE
ROLLBACK TO a;
SELECT t11_par_acquire('t11:parallel-2');
\echo :SQLSTATE
ROLLBACK TO a;
SELECT t11_par_release('t11:parallel');
\echo :SQLSTATE
ROLLBACK TO a;
\set VERBOSITY default
COMMIT;
-- No guard was left, and the hold is still there.
SELECT count(*) FILTER (WHERE objsubid = 32259 /* kGuardTagKind */) AS guards,
       count(*) FILTER (WHERE objsubid = 32257 /* kResourceTagKind */) AS holds
  FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT fencing.release('t11:parallel');
DROP FUNCTION t11_par_validate(text, bigint), t11_par_acquire(text), t11_par_release(text);
