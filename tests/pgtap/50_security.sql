-- The privilege model.
--
-- A role without privileges on fencing's internal state cannot lower or reset
-- a stored token (fence_state, token_seq), cannot move the counter for a table
-- it does not own, cannot protect or unprotect other roles' tables, cannot
-- take or release a fencing lock through pg_advisory_* (separate key space),
-- does not see other roles' tokens in fencing.locks, and cannot stamp a token
-- of its choosing into protected rows through a foreign key's referential
-- action. Hostile objects in public and pg_temp change no result of
-- fencing's functions. No function of schema fencing is SECURITY DEFINER,
-- and the PL/pgSQL ones pin search_path.
--
-- Everything runs in one transaction that is rolled back (roles included);
-- only acquisitions leave traces (fence_state rows of 't50:*' resources, the
-- counter), as acquisitions always do. The checks that need a second session
-- use dblink (contrib) to the same database.
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
SELECT plan(151);

SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE ROLE fencing_t50_owner NOLOGIN;
CREATE ROLE fencing_t50_intruder NOLOGIN;
CREATE ROLE fencing_t50_monitor NOLOGIN IN ROLE pg_read_all_stats;
CREATE ROLE fencing_t50_fresh NOLOGIN;

-- Helpers (owned by the superuser running the file; the roles never call
-- them). state_as runs SQL as a role and returns its SQLSTATE ('00000' when
-- it succeeded); value_as returns the first column of its first row. Both
-- roll back whatever the SQL did, role switch included.
CREATE SCHEMA t50;
CREATE FUNCTION t50.state_as(r name, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        EXECUTE q;
        RAISE EXCEPTION 'ran' USING ERRCODE = 'T5000';
    EXCEPTION WHEN OTHERS THEN
        st := SQLSTATE;
    END;
    RETURN CASE st WHEN 'T5000' THEN '00000' ELSE st END;
END $$;
CREATE FUNCTION t50.value_as(r name, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text; st text;
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        EXECUTE q INTO v;
        RAISE EXCEPTION 'ran' USING ERRCODE = 'T5000';
    EXCEPTION WHEN OTHERS THEN
        st := SQLSTATE;
    END;
    RETURN CASE st WHEN 'T5000' THEN v ELSE 'ERROR ' || st END;
END $$;

-- detail_as returns the DETAIL of the error the SQL raises as the role.
CREATE FUNCTION t50.detail_as(r name, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        EXECUTE q;
        RAISE EXCEPTION 'ran' USING ERRCODE = 'T5000', DETAIL = 'no error';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    END;
    RETURN d;
END $$;

-- A protected table owned by another role, which the intruder may read and write.
CREATE TABLE public.t50_owned (id int PRIMARY KEY, v text, fence_token fencing.token);
ALTER TABLE public.t50_owned OWNER TO fencing_t50_owner;
SELECT fencing.protect('public.t50_owned');
INSERT INTO public.t50_owned VALUES (1, 'a', 100);
CREATE TABLE public.t50_plain (id int PRIMARY KEY, fence_token bigint);
ALTER TABLE public.t50_plain OWNER TO fencing_t50_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.t50_owned, public.t50_plain TO fencing_t50_intruder;
RESET client_min_messages;

--------------------------------------------------------------------------------
-- 1. Using fencing takes a grant; writing to a protected table does not.
--------------------------------------------------------------------------------
SELECT ok(NOT has_schema_privilege('fencing_t50_fresh', 'fencing', 'USAGE'),
          'PUBLIC has no USAGE on schema fencing: a role without grants has none');
SELECT is(t50.state_as('fencing_t50_fresh', $q$SELECT fencing.current('t50:any')$q$), '42501',
          'a role without USAGE on schema fencing cannot call fencing.current');
SELECT is(t50.state_as('fencing_t50_fresh', $q$SELECT fencing.acquire_xact('t50:any')$q$), '42501',
          'nor fencing.acquire_xact');
SELECT is(t50.state_as('fencing_t50_fresh', $q$SELECT count(*) FROM fencing.locks$q$), '42501',
          'nor read fencing.locks');
-- The writer may read and write the protected table but has nothing of fencing.
CREATE ROLE fencing_t50_writer NOLOGIN;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.t50_owned TO fencing_t50_writer;
SELECT is(t50.state_as('fencing_t50_writer', $q$INSERT INTO public.t50_owned VALUES (7, 'w', 200)$q$), '00000',
          'a role without USAGE on schema fencing inserts into a protected table with a token');
SELECT is(t50.state_as('fencing_t50_writer', $q$UPDATE public.t50_owned SET v = 'w', fence_token = 101 WHERE id = 1$q$), '00000',
          'and updates it with a newer token');
SELECT is(t50.state_as('fencing_t50_writer', $q$UPDATE public.t50_owned SET v = 'w', fence_token = 100 WHERE id = 1$q$), '23T01',
          'its stale write is rejected with 23T01');
SELECT is(t50.value_as('fencing_t50_writer',
          $q$SET LOCAL fencing.token = '150'; UPDATE public.t50_owned SET v = 'w' WHERE id = 1 RETURNING fence_token::bigint$q$), '150',
          'SET LOCAL fencing.token works without USAGE on schema fencing');
SELECT is(t50.state_as('fencing_t50_writer', $q$UPDATE public.t50_owned SET v = 'w' WHERE id = 1$q$), '23T01',
          'its write without a token is rejected with 23T01');
SELECT is(t50.state_as('fencing_t50_writer', $q$SELECT fencing.use(5)$q$), '42501',
          'fencing.use needs USAGE on schema fencing (SET LOCAL fencing.token does not)');
-- GRANT USAGE ON SCHEMA fencing TO app_role is what lets a role use fencing.
GRANT USAGE ON SCHEMA fencing TO fencing_t50_fresh;
SELECT is(t50.state_as('fencing_t50_fresh', $q$SELECT fencing.current('t50:any')$q$), '00000',
          'with USAGE on schema fencing a role can call fencing.current');
SELECT is(t50.state_as('fencing_t50_fresh', $q$SELECT fencing.acquire_xact('t50:any')$q$), '00000',
          'and acquire');

-- From here on, the roles have USAGE on the schema, so that each check below
-- meets the object's own privileges, not the schema's.
GRANT USAGE ON SCHEMA fencing TO fencing_t50_intruder, fencing_t50_monitor, fencing_t50_owner;

--------------------------------------------------------------------------------
-- 2. The fence state and the counter: no way to lower or reset a token.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t50:state') IS NOT NULL AS acquired \gset
SELECT fencing.release('t50:state') AS released \gset
SELECT fencing.current('t50:state')::bigint AS state_token \gset

SELECT is(t50.state_as('fencing_t50_intruder', $q$UPDATE fencing.fence_state SET token = 1$q$), '42501',
          'intruder cannot UPDATE fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DELETE FROM fencing.fence_state$q$), '42501',
          'intruder cannot DELETE FROM fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t50:forged'), 1, 0, 0, 't50:forged')$q$), '42501',
          'intruder cannot INSERT INTO fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$TRUNCATE fencing.fence_state$q$), '42501',
          'intruder cannot TRUNCATE fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT * FROM fencing.fence_state$q$), '42501',
          'intruder cannot read fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$LOCK TABLE fencing.fence_state IN ACCESS EXCLUSIVE MODE$q$), '42501',
          'intruder cannot lock fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$ALTER TABLE fencing.fence_state DISABLE TRIGGER ALL$q$), '42501',
          'intruder cannot ALTER fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DROP TABLE fencing.fence_state$q$), '42501',
          'intruder cannot DROP fencing.fence_state');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT setval('fencing.token_seq', 1)$q$), '42501',
          'intruder cannot setval fencing.token_seq');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT nextval('fencing.token_seq')$q$), '42501',
          'intruder cannot nextval fencing.token_seq');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT last_value FROM fencing.token_seq$q$), '42501',
          'intruder cannot read fencing.token_seq');
SELECT is(t50.state_as('fencing_t50_intruder', $q$ALTER SEQUENCE fencing.token_seq RESTART WITH 1$q$), '42501',
          'intruder cannot ALTER SEQUENCE fencing.token_seq');
-- The tombstones: written by the module on a fenced DELETE, for nobody else.
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT * FROM fencing.tombstones$q$), '42501',
          'intruder cannot read fencing.tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DELETE FROM fencing.tombstones$q$), '42501',
          'intruder cannot DELETE FROM fencing.tombstones (to let a stale INSERT through)');
SELECT is(t50.state_as('fencing_t50_intruder', $q$TRUNCATE fencing.tombstones$q$), '42501',
          'intruder cannot TRUNCATE fencing.tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$UPDATE fencing.tombstones SET token = 1$q$), '42501',
          'intruder cannot UPDATE fencing.tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.forget_tombstones('0')$q$), '42501',
          'intruder cannot call fencing.forget_tombstones');
SELECT ok(NOT has_function_privilege('public', 'fencing.forget_tombstones(interval)', 'EXECUTE'),
          'PUBLIC may not execute fencing.forget_tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.tombstone_key_problem('public.t50_owned')$q$), '42501',
          'fencing.tombstone_key_problem is for the table''s owner');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT * FROM fencing.reached_tables('public.t50_owned')$q$), '42501',
          'fencing.reached_tables is for the table''s owner');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.join_tombstones('public.t50_owned')$q$), '42501',
          'fencing.join_tombstones is for the table''s owner');
-- A fenced DELETE by a role that has nothing of fencing still records its
-- tombstone: the stale INSERT of the key that follows is rejected.
SELECT is(t50.state_as('fencing_t50_writer',
          $q$INSERT INTO public.t50_owned VALUES (40, 'd', 300);
             SET LOCAL fencing.token = '400'; DELETE FROM public.t50_owned WHERE id = 40;
             INSERT INTO public.t50_owned VALUES (40, 'stale', 350)$q$), '23T01',
          'a role without USAGE on schema fencing records tombstones: its stale INSERT of a key it deleted is rejected');
SELECT is(t50.state_as('fencing_t50_writer',
          $q$INSERT INTO public.t50_owned VALUES (40, 'd', 300);
             SET LOCAL fencing.token = '400'; DELETE FROM public.t50_owned WHERE id = 40;
             INSERT INTO public.t50_owned VALUES (40, 'newer', 401)$q$), '00000',
          'and its INSERT with a newer token is accepted');
SELECT is(t50.state_as('fencing_t50_intruder', $q$CREATE TABLE fencing.t50_mine (x int)$q$), '42501',
          'intruder cannot create objects in schema fencing');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE FUNCTION fencing.current(text, int) RETURNS int LANGUAGE sql AS 'SELECT 1'$q$), '42501',
          'intruder cannot add functions to schema fencing');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SET fencing.require_sync_standby = off$q$), '42501',
          'intruder cannot change fencing.require_sync_standby');
-- Rows loaded into the fence state hold positive tokens (as fencing.token
-- does), whoever loads them.
SELECT is(t50.state_as(current_user, $q$INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t50:neg'), -5, 0, 0, 't50:neg')$q$),
          '23514', 'a fence state row with a negative token is refused (23514)');
SELECT is(t50.state_as(current_user, $q$INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t50:zero'), 0, 0, 0, 't50:zero')$q$),
          '23514', 'a fence state row with token 0 is refused (23514)');
SELECT is(t50.state_as(current_user, $q$INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t50:lease'), 5, 0, -1, 't50:lease')$q$),
          '23514', 'a fence state row with a negative lease is refused (23514)');
-- The tombstones: no role but the extension's owner may read or write them,
-- whatever it may do in schema fencing (written by the module only).
SELECT ok(NOT has_table_privilege('public', 'fencing.tombstones', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE'),
          'PUBLIC has no privilege on fencing.tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT * FROM fencing.tombstones$q$), '42501',
          'intruder cannot read fencing.tombstones');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DELETE FROM fencing.tombstones$q$), '42501',
          'intruder cannot DELETE FROM fencing.tombstones');
-- The resource key secret: no role but the extension's and the database's
-- owners may read it; only they may replace it.
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT * FROM fencing.key_secret$q$), '42501',
          'intruder cannot read fencing.key_secret');
SELECT is(t50.state_as('fencing_t50_intruder', $q$INSERT INTO fencing.key_secret DEFAULT VALUES$q$), '42501',
          'intruder cannot replace the resource key secret');
SELECT is(t50.state_as('fencing_t50_intruder', $q$UPDATE fencing.key_secret SET secret = NULL$q$), '42501',
          'intruder cannot UPDATE fencing.key_secret');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DELETE FROM fencing.key_secret$q$), '42501',
          'intruder cannot DELETE FROM fencing.key_secret');
SELECT is(t50.state_as('fencing_t50_intruder', $q$TRUNCATE fencing.key_secret$q$), '42501',
          'intruder cannot TRUNCATE fencing.key_secret');
SELECT ok(NOT has_function_privilege('public', 'fencing.key_secret_replace()', 'EXECUTE'),
          'PUBLIC may not execute fencing.key_secret_replace');
SELECT is(t50.value_as('fencing_t50_intruder', $q$SELECT fencing.resource_key('t50:k')::text$q$),
          fencing.resource_key('t50:k')::text,
          'a role with USAGE computes its database''s keys (without reading the secret)');
SELECT ok(has_table_privilege('pg_database_owner', 'fencing.key_secret', 'SELECT')
          AND has_table_privilege('pg_database_owner', 'fencing.key_secret', 'INSERT')
          AND NOT has_table_privilege('pg_database_owner', 'fencing.key_secret', 'UPDATE')
          AND NOT has_table_privilege('pg_database_owner', 'fencing.key_secret', 'DELETE'),
          'the database owner may read and load it (pg_dump, a restore), not update or delete it');
SELECT is(fencing.current('t50:state')::bigint, :state_token::bigint,
          'the stored token is unchanged after all attempts');

--------------------------------------------------------------------------------
-- 3. Internal functions and protection of other roles' tables.
--------------------------------------------------------------------------------
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.advance_past('public.t50_owned', 9000000000000000000)$q$),
          '42501', 'intruder cannot call fencing.advance_past on a table it does not own');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.advance_past('pg_catalog.pg_class', 9000000000000000000)$q$),
          '42501', 'intruder cannot call fencing.advance_past on a catalog');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.protect('public.t50_plain')$q$), '42501',
          'intruder cannot protect another role''s table');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.protect('public.t50_owned', allow_equal => true)$q$), '42501',
          'intruder cannot re-protect (weaken) another role''s protected table');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT fencing.unprotect('public.t50_owned')$q$), '42501',
          'intruder cannot unprotect another role''s table');
SELECT is(t50.state_as('fencing_t50_intruder', $q$DROP TRIGGER "~fencing_enforce" ON public.t50_owned$q$), '42501',
          'intruder cannot drop the fencing trigger');
SELECT is(t50.state_as('fencing_t50_intruder', $q$ALTER TABLE public.t50_owned DISABLE TRIGGER "~fencing_enforce"$q$), '42501',
          'intruder cannot disable the fencing trigger');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SET session_replication_role = replica$q$), '42501',
          'intruder cannot switch session_replication_role to bypass triggers');
SELECT is(t50.state_as('fencing_t50_intruder', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 100 WHERE id = 1$q$), '23T01',
          'intruder''s stale write to a protected table is rejected');
SELECT is(t50.state_as('fencing_t50_intruder', $q$UPDATE public.t50_owned SET v = 'x' WHERE id = 1$q$), '23T01',
          'intruder''s write without a token is rejected');
SELECT is(t50.state_as('fencing_t50_owner', $q$SELECT fencing.unprotect('public.t50_owned')$q$), '00000',
          'the owner may unprotect its table');
SELECT is(t50.state_as('fencing_t50_owner', $q$SELECT fencing.protect('public.t50_plain')$q$), '00000',
          'the owner may protect its table');
SELECT ok(NOT has_function_privilege('public', 'fencing.advance_past(regclass, bigint)', 'EXECUTE'),
          'PUBLIC may not execute fencing.advance_past');
-- What PUBLIC may execute, all of it: the functions of the reference, those
-- behind the views PUBLIC may read, and support functions that check their
-- caller themselves. Trigger functions are left out (they cannot be called).
-- A support function added without a REVOKE fails this.
SELECT set_eq(
    $$SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'fencing'::regnamespace
         AND has_function_privilege('public', p.oid, 'EXECUTE')
         AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)$$,
    ARRAY['fencing.acquire(text,interval,interval,boolean,interval,integer,boolean)',
          'fencing.acquire_xact(text,interval,interval,boolean,interval,integer,boolean)',
          'fencing.try_acquire(text,boolean,interval,integer,boolean)',
          'fencing.try_acquire_xact(text,boolean,interval,integer,boolean)',
          'fencing.release(text)', 'fencing.release_all()', 'fencing.renew(text)',
          'fencing.validate(text,bigint)', 'fencing.current(text)', 'fencing.use(bigint)',
          'fencing.resource_key(text)', 'fencing.version()',
          'fencing.protect(regclass,name,boolean,text,boolean,boolean)', 'fencing.unprotect(regclass)',
          'fencing.raise_floor(regclass,bigint)',
          -- behind fencing.stats, fencing.table_stats and fencing.locks
          'fencing.stats_data()', 'fencing.table_stats_data()', 'fencing.lock_delays()',
          -- used by protect; each checks that its caller owns the table
          'fencing.advance_past_table(regclass)', 'fencing.tombstone_key_problem(regclass)',
          'fencing.reached_tables(regclass)', 'fencing.join_tombstones(regclass)',
          -- protect's and raise_floor's work; checks that its caller owns the table
          'fencing.install_check(regclass,name,boolean,text,boolean,boolean,bigint)'],
    'PUBLIC may execute exactly the API, the functions behind the views and the self-checking support functions');
SELECT is(t50.state_as('fencing_t50_owner', $q$SELECT fencing.advance_past('public.t50_plain', 1)$q$), '42501',
          'not even the table''s owner may call fencing.advance_past');
SELECT cmp_ok(fencing.advance_past('public.t50_plain', 1), '>=', :state_token::bigint,
              'advance_past never moves the counter backwards');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE TEMP TABLE t50_tmp (fence_token bigint); SELECT fencing.advance_past('t50_tmp', 4611686018427387904)$q$), '42501',
          'a role cannot call advance_past on a (temporary) table of its own to move the counter to 2^62');
-- Counter exhaustion: protect refuses tables holding tokens beyond the clock
-- bound (the clock in microseconds + 4 s), for every role, so no table owner
-- can move the shared counter out of it, near 2^53 (the largest integer
-- JavaScript numbers hold exactly), or exhaust it.
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE TEMP TABLE t50_big (id int PRIMARY KEY, fence_token bigint); INSERT INTO t50_big VALUES (1, 9223372036854775806);
             SELECT fencing.protect('t50_big')$q$), '22003',
          'protect of a table holding 9223372036854775806 is refused (22003)');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE TEMP TABLE t50_big (id int PRIMARY KEY, fence_token bigint); INSERT INTO t50_big VALUES (1, 4503599627370497);
             SELECT fencing.protect('t50_big')$q$), '22003',
          'protect of a table holding 2^52 + 1 is refused');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE TEMP TABLE t50_big (id int PRIMARY KEY, fence_token bigint);
             INSERT INTO t50_big VALUES (1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 60000000);
             SELECT fencing.protect('t50_big')$q$), '22003',
          'protect of a table holding a token 60 s past the clock is refused');
SELECT is((SELECT state FROM (SELECT t50.state_as(session_user,
          $q$CREATE TEMP TABLE t50_big (id int PRIMARY KEY, fence_token bigint); INSERT INTO t50_big VALUES (1, 9223372036854775806);
             SELECT fencing.protect('t50_big')$q$) AS state) x), '22003',
          'also for a superuser');
SELECT is(t50.state_as('fencing_t50_intruder',
          $q$CREATE TEMP TABLE t50_small (id int PRIMARY KEY, fence_token bigint); INSERT INTO t50_small VALUES (1, 5);
             SELECT fencing.protect('t50_small')$q$), '00000',
          'protect of a table holding small tokens moves the counter as before');
SELECT cmp_ok(fencing.acquire_xact('t50:after')::bigint, '<=',
              (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 2000000,
              'acquisition still works and tokens stay within the clock bound after all attempts');
SELECT is((SELECT count(*)::int FROM public.t50_owned WHERE fence_token::bigint = 100 AND v = 'a'), 1,
          'the protected row is unchanged');

--------------------------------------------------------------------------------
-- 3b. Column privileges: the token the setting writes, and what a rejection shows.
--------------------------------------------------------------------------------
SET LOCAL client_min_messages = warning;
CREATE ROLE fencing_t50_cols NOLOGIN;
CREATE ROLE fencing_t50_tokcol NOLOGIN;
CREATE ROLE fencing_t50_blind NOLOGIN;
RESET client_min_messages;
GRANT SELECT (id), UPDATE (v), INSERT (id, v) ON public.t50_owned TO fencing_t50_cols;
GRANT SELECT (id), UPDATE (v, fence_token), INSERT (id, v, fence_token) ON public.t50_owned TO fencing_t50_tokcol;
GRANT UPDATE (v, fence_token) ON public.t50_owned TO fencing_t50_blind;
SELECT is(t50.state_as('fencing_t50_cols',
          $q$SET LOCAL fencing.token = '9223372036854775807'; UPDATE public.t50_owned SET v = 'x' WHERE id = 1$q$), '42501',
          'an UPDATE whose token comes from fencing.token needs UPDATE on the token column');
SELECT is(t50.state_as('fencing_t50_cols',
          $q$SET LOCAL fencing.token = '9223372036854775807'; INSERT INTO public.t50_owned (id, v) VALUES (8, 'x')$q$), '42501',
          'an INSERT whose token comes from fencing.token needs INSERT on the token column');
SELECT is(t50.value_as('fencing_t50_tokcol',
          $q$SET LOCAL fencing.token = '150'; UPDATE public.t50_owned SET v = 'x' WHERE id = 1 RETURNING id$q$), '1',
          'with UPDATE on the token column the setting''s token is written');
SELECT is(t50.state_as('fencing_t50_tokcol',
          $q$SET LOCAL fencing.token = '150'; INSERT INTO public.t50_owned (id, v) VALUES (8, 'x')$q$), '00000',
          'with INSERT on the token column too');
SELECT is(t50.state_as('fencing_t50_cols', $q$UPDATE public.t50_owned SET v = 'x' WHERE id = 1$q$), '23T01',
          'without the setting, a write that does not touch the token column is judged as before');
SELECT ok(t50.detail_as('fencing_t50_blind', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5$q$) NOT LIKE '%(id)=(1)%',
          'the stale-write detail hides the key from a role that may not read it');
SELECT ok(t50.detail_as('fencing_t50_blind', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5$q$) NOT LIKE '%100%',
          'and the stored token from a role that may not read the token column');
SELECT ok(t50.detail_as('fencing_t50_blind', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5$q$) LIKE 'Incoming token 5 %',
          'but shows the role its own incoming token');
SELECT ok(t50.detail_as('fencing_t50_tokcol', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5 WHERE id = 1$q$) LIKE '%(id)=(1)%',
          'a role that may read the key columns sees the key');
SELECT ok(t50.detail_as('fencing_t50_tokcol', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5 WHERE id = 1$q$) NOT LIKE '%100%',
          'but not the stored token without SELECT on the token column');
SELECT ok(t50.detail_as('fencing_t50_intruder', $q$UPDATE public.t50_owned SET v = 'x', fence_token = 5 WHERE id = 1$q$)
          LIKE '%stored token 100%(id)=(1)%',
          'a role with SELECT on the table sees the stored token and the key');

--------------------------------------------------------------------------------
-- 3c. Referential actions. PostgreSQL runs them as the referencing table's
-- owner; a token they take from fencing.token is checked for the session's
-- role as well, as if it had written the protected rows itself.
--------------------------------------------------------------------------------
SET LOCAL client_min_messages = warning;
CREATE ROLE fencing_t50_parent NOLOGIN;
RESET client_min_messages;
CREATE TABLE public.t50_cust (id int PRIMARY KEY, name text);
CREATE TABLE public.t50_ord (id int PRIMARY KEY,
                             cust_id int REFERENCES public.t50_cust ON UPDATE CASCADE ON DELETE CASCADE,
                             amount int, fence_token fencing.token);
CREATE TABLE public.t50_ord_null (id int PRIMARY KEY, cust_id int REFERENCES public.t50_cust ON DELETE SET NULL,
                                  fence_token fencing.token);
ALTER TABLE public.t50_cust OWNER TO fencing_t50_owner;
ALTER TABLE public.t50_ord OWNER TO fencing_t50_owner;
ALTER TABLE public.t50_ord_null OWNER TO fencing_t50_owner;
SELECT fencing.protect('public.t50_ord');
SELECT fencing.protect('public.t50_ord_null');
INSERT INTO public.t50_cust VALUES (1, 'a'), (2, 'b'), (3, 'c');
INSERT INTO public.t50_ord VALUES (10, 1, 5, 1000), (20, 2, 5, 1000);
INSERT INTO public.t50_ord_null VALUES (30, 3, 1000);
GRANT SELECT, UPDATE, DELETE ON public.t50_cust TO fencing_t50_parent;
SELECT is(t50.state_as('fencing_t50_parent',
          $q$SET LOCAL fencing.token = '9223372036854775807'; UPDATE public.t50_cust SET id = 11 WHERE id = 1$q$), '42501',
          'ON UPDATE CASCADE cannot stamp the token of a role without UPDATE on the referencing token column');
SELECT is(t50.state_as('fencing_t50_parent',
          $q$SET LOCAL fencing.token = '9223372036854775806'; DELETE FROM public.t50_cust WHERE id = 2$q$), '42501',
          'ON DELETE CASCADE cannot record its token as a tombstone');
SELECT is(t50.state_as('fencing_t50_parent',
          $q$SET LOCAL fencing.token = '9223372036854775805'; DELETE FROM public.t50_cust WHERE id = 3$q$), '42501',
          'ON DELETE SET NULL cannot stamp it either');
SELECT is(t50.state_as('fencing_t50_parent', $q$UPDATE public.t50_cust SET id = 11 WHERE id = 1$q$), '23T01',
          'without a transaction token the referential action is judged as before');
SELECT is(t50.state_as('fencing_t50_owner',
          $q$SET LOCAL fencing.token = '2000'; UPDATE public.t50_cust SET id = 11 WHERE id = 1;
             DELETE FROM public.t50_cust WHERE id IN (2, 3)$q$), '00000',
          'the owner''s referential actions with a newer token are accepted');
GRANT UPDATE (fence_token) ON public.t50_ord, public.t50_ord_null TO fencing_t50_parent;
SELECT is(t50.state_as('fencing_t50_parent',
          $q$SET LOCAL fencing.token = '2000'; UPDATE public.t50_cust SET id = 11 WHERE id = 1;
             DELETE FROM public.t50_cust WHERE id IN (2, 3)$q$), '00000',
          'and so are those of a role granted UPDATE on the token column');
SELECT is((SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM public.t50_ord), '10:1000,20:1000',
          'the referencing rows are unchanged');
-- A token column that itself references another table: the action carries a
-- value of the referenced table into it, chosen by whoever writes that table.
-- The session's role needs UPDATE on the token column for that too.
CREATE TABLE public.t50_tokref (t bigint PRIMARY KEY);
CREATE TABLE public.t50_tokfk (id int PRIMARY KEY,
                               fence_token bigint REFERENCES public.t50_tokref ON UPDATE CASCADE ON DELETE SET NULL,
                               v int);
ALTER TABLE public.t50_tokref OWNER TO fencing_t50_owner;
ALTER TABLE public.t50_tokfk OWNER TO fencing_t50_owner;
SELECT fencing.protect('public.t50_tokfk');
INSERT INTO public.t50_tokref VALUES (100), (200);
INSERT INTO public.t50_tokfk VALUES (1, 100, 0), (2, 200, 0);
GRANT SELECT, UPDATE, DELETE ON public.t50_tokref TO fencing_t50_parent;
SELECT is(t50.state_as('fencing_t50_parent', $q$UPDATE public.t50_tokref SET t = 9223372036854775807 WHERE t = 100$q$),
          '42501', 'ON UPDATE CASCADE of the token column itself cannot stamp a value of the role''s choosing');
SELECT is(t50.state_as('fencing_t50_parent', $q$DELETE FROM public.t50_tokref WHERE t = 200$q$),
          '42501', 'nor can ON DELETE SET NULL of the token column');
SELECT is(t50.state_as('fencing_t50_owner', $q$UPDATE public.t50_tokref SET t = 50 WHERE t = 100$q$),
          '23T01', 'the owner''s cascade of an older value is judged: 23T01');
SELECT is(t50.state_as('fencing_t50_owner', $q$UPDATE public.t50_tokref SET t = 150 WHERE t = 100$q$),
          '00000', 'and that of a newer value is accepted');
GRANT UPDATE (fence_token) ON public.t50_tokfk TO fencing_t50_parent;
SELECT is(t50.state_as('fencing_t50_parent', $q$UPDATE public.t50_tokref SET t = 150 WHERE t = 100$q$),
          '00000', 'as is that of a role granted UPDATE on the token column');
SELECT is((SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM public.t50_tokfk), '1:100,2:200',
          'the rows referencing by their token column are unchanged');

--------------------------------------------------------------------------------
-- 3d. Through a partitioned table or an inheritance parent. The token the
-- setting writes needs the token column's privilege on the table that holds
-- the row (the check cannot tell which table the statement named, and a
-- privilege on an ancestor says nothing of what the role may do through it:
-- here row-level security on the parent hides every row). A token column the
-- statement names is checked by PostgreSQL on the table named.
--------------------------------------------------------------------------------
SET LOCAL client_min_messages = warning;
CREATE ROLE fencing_t50_via NOLOGIN;
CREATE ROLE fencing_t50_leaf NOLOGIN;
RESET client_min_messages;
CREATE TABLE public.t50_parts (id int PRIMARY KEY, fence_token fencing.token, v text) PARTITION BY RANGE (id);
CREATE TABLE public.t50_parts_1 PARTITION OF public.t50_parts FOR VALUES FROM (0) TO (100);
CREATE TABLE public.t50_parts_2 PARTITION OF public.t50_parts FOR VALUES FROM (100) TO (200);
CREATE TABLE public.t50_inh (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE public.t50_inh_child (PRIMARY KEY (id)) INHERITS (public.t50_inh);
SELECT fencing.protect('public.t50_parts');
SELECT fencing.protect('public.t50_inh');
INSERT INTO public.t50_parts VALUES (1, 100, 'a'), (101, 100, 'b');
INSERT INTO public.t50_inh_child VALUES (1, 100, 'a');
GRANT SELECT, INSERT, UPDATE, DELETE ON public.t50_parts, public.t50_inh TO fencing_t50_via;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.t50_parts TO fencing_t50_leaf;
GRANT SELECT, INSERT (id, v), UPDATE (v), DELETE ON public.t50_parts_1 TO fencing_t50_leaf;
GRANT SELECT (id), UPDATE (v, fence_token) ON public.t50_parts_2 TO fencing_t50_leaf;
SELECT is(t50.state_as('fencing_t50_via',
          $q$SET LOCAL fencing.token = '150'; UPDATE public.t50_parts SET v = 'x' WHERE id = 1$q$), '42501',
          'the setting''s token through a partitioned table needs the privilege on the partition');
SELECT is(t50.state_as('fencing_t50_via',
          $q$SET LOCAL fencing.token = '150'; UPDATE public.t50_inh SET v = 'x' WHERE id = 1$q$), '42501',
          'through an inheritance parent on the child');
SELECT is(t50.state_as('fencing_t50_via',
          $q$UPDATE public.t50_parts SET v = 'x', fence_token = 150 WHERE id IN (1, 101);
             UPDATE public.t50_inh SET v = 'x', fence_token = 150 WHERE id = 1$q$), '00000',
          'a token column named in the statement is checked on the table named');
SELECT is(t50.state_as('fencing_t50_via',
          $q$UPDATE public.t50_parts SET v = 'x', fence_token = 50 WHERE id = 1$q$), '23T01',
          'and judged');
ALTER TABLE public.t50_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY nobody ON public.t50_parts USING (false) WITH CHECK (false);
SELECT is(t50.state_as('fencing_t50_leaf',
          $q$SET LOCAL fencing.token = '9000000000000001'; UPDATE public.t50_parts_1 SET v = 'x' WHERE id = 1$q$),
          '42501', 'a privilege on the partitioned table, whose rows the role cannot reach, counts for nothing on a partition');
SELECT is(t50.state_as('fencing_t50_leaf',
          $q$SET LOCAL fencing.token = '9000000000000001'; DELETE FROM public.t50_parts_1 WHERE id = 1$q$),
          '42501', 'nor for the tombstone of a DELETE');
SELECT is(t50.state_as('fencing_t50_leaf',
          $q$SET LOCAL fencing.token = '9000000000000001'; INSERT INTO public.t50_parts_1 (id, v) VALUES (2, 'n')$q$),
          '42501', 'nor for an INSERT');
SELECT is(t50.state_as('fencing_t50_leaf',
          $q$SET LOCAL fencing.token = '150'; UPDATE public.t50_parts_2 SET v = 'x' WHERE id = 101$q$), '00000',
          'the privilege on the partition itself counts');

--------------------------------------------------------------------------------
-- 4. SECURITY DEFINER and search_path.
--------------------------------------------------------------------------------
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'fencing'::regnamespace AND prosecdef), 0,
          'no function of schema fencing is SECURITY DEFINER');
SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'fencing'::regnamespace AND p.prosecdef
              AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')), 0,
          'every SECURITY DEFINER function of schema fencing pins search_path');
SELECT is((SELECT string_agg(p.proname, ', ' ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.pronamespace = 'fencing'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
              AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')), NULL,
          'every SQL and PL/pgSQL function of schema fencing pins search_path');
SELECT is((SELECT string_agg(p.proname, ', ' ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.pronamespace = 'fencing'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
              AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c
                               WHERE c ~ '^search_path=("?pg_catalog"?|"?pg_catalog"?, *"?pg_temp"?)$')), NULL,
          'the pinned search_path is pg_catalog (then pg_temp), nothing a role can create objects in');

--------------------------------------------------------------------------------
-- 5. Locks: a separate key space, and other roles' tokens hidden.
--------------------------------------------------------------------------------
SELECT format('dbname=%s user=%s port=%s host=%s', current_database(), session_user, current_setting('port'),
              coalesce(host(inet_server_addr()), split_part(current_setting('unix_socket_directories'), ',', 1))) AS connstr \gset
SELECT dblink_connect('t50', :'connstr') AS connected \gset
SELECT t FROM dblink('t50', $q$SELECT fencing.acquire('t50:held')::bigint$q$) AS r(t bigint) \gset remote_
SELECT fencing.resource_key('t50:held') AS k \gset
SELECT (:k::bigint >> 32)::int AS khi, (:k::bigint & 4294967295)::bit(32)::int AS klo,
       (:remote_t::bigint >> 32)::int AS thi, (:remote_t::bigint & 4294967295)::bit(32)::int AS tlo \gset

SELECT ok(fencing.try_acquire('t50:held') IS NULL, 'the other session holds t50:held (try_acquire returns NULL)');
SELECT ok(pg_try_advisory_lock(:k::bigint), 'pg_advisory_lock(bigint) on the resource''s key does not meet the fencing lock');
SELECT ok(pg_try_advisory_lock(:khi, :klo), 'pg_advisory_lock(int, int) on the key''s halves does not meet it');
SELECT ok(pg_try_advisory_lock(:klo, :khi), 'nor on the halves swapped');
SELECT ok(pg_try_advisory_lock_shared(:k::bigint), 'nor a shared advisory lock on the key');
SELECT ok(pg_try_advisory_lock(:remote_t::bigint), 'pg_advisory_lock on the token does not meet the token lock');
SELECT ok(pg_try_advisory_lock(:thi, :tlo), 'nor on the token''s halves');
SELECT ok(pg_try_advisory_xact_lock(:k::bigint) AND pg_try_advisory_xact_lock(:khi, :klo),
          'nor transaction-scoped advisory locks');
SELECT ok(fencing.try_acquire('t50:held') IS NULL, 'the resource is still busy for fencing');
SELECT is(fencing.validate('t50:held', :remote_t::bigint)::bigint, :remote_t::bigint,
          'and validate still sees the other session''s grant as held');
SELECT ok(pg_advisory_unlock(:k::bigint) AND pg_advisory_unlock(:khi, :klo) AND pg_advisory_unlock(:klo, :khi)
          AND pg_advisory_unlock_shared(:k::bigint) AND pg_advisory_unlock(:remote_t::bigint) AND pg_advisory_unlock(:thi, :tlo),
          'the advisory locks release');

-- The reverse: another session's advisory locks on a resource's key do not block fencing.
SELECT fencing.resource_key('t50:free') AS k2 \gset
SELECT (:k2::bigint >> 32)::int AS k2hi, (:k2::bigint & 4294967295)::bit(32)::int AS k2lo \gset
SELECT ok FROM dblink('t50', format('SELECT pg_advisory_lock(%s) IS NOT NULL AND pg_advisory_lock(%s, %s) IS NOT NULL AND pg_advisory_lock_shared(%s) IS NOT NULL',
                                    :k2, :k2hi, :k2lo, :k2hi::bigint)) AS r(ok boolean) \gset remote_adv_
SELECT ok(fencing.try_acquire('t50:free') IS NOT NULL, 'another session''s pg_advisory_lock on a resource''s key does not block fencing.try_acquire');
SELECT ok(fencing.acquire('t50:free', wait => '0'::interval, reentrant => true) IS NOT NULL, 'nor fencing.acquire without waiting');
SELECT ok(fencing.release('t50:free') AND fencing.release('t50:free'), 'released');
SELECT is((SELECT string_agg(DISTINCT objsubid::text, ',' ORDER BY objsubid::text) FROM pg_locks
            WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())),
          '1,2,32257,32258,32259', 'pg_locks: advisory keys use objsubid 1 and 2, fencing 32257 (resources), 32258 (tokens) and 32259 (validate() guards)');

-- Other roles' tokens in fencing.locks.
SELECT is(t50.value_as('fencing_t50_intruder',
          $q$SELECT count(*) FILTER (WHERE token IS NULL) || '/' || count(*) FROM fencing.locks WHERE resource = 't50:held'$q$),
          '1/1', 'fencing.locks shows another role''s lock with a NULL token');
SELECT is(t50.value_as('fencing_t50_intruder',
          $q$SELECT count(*) FILTER (WHERE pid IS NOT NULL AND granted AND scope = 'session') FROM fencing.locks WHERE resource = 't50:held'$q$),
          '1', 'but shows the lock itself (pid, scope, granted)');
SELECT is(t50.value_as('fencing_t50_monitor',
          $q$SELECT token::bigint FROM fencing.locks WHERE resource = 't50:held'$q$),
          :'remote_t'::text, 'a member of pg_read_all_stats sees the token');
SELECT is((SELECT token::bigint FROM fencing.locks WHERE resource = 't50:held'), :remote_t::bigint,
          'the holder''s own role (here a superuser) sees the token');

-- Nobody but the holder can release it.
SET client_min_messages = error;
SELECT is(t50.value_as('fencing_t50_intruder', $q$SELECT fencing.release('t50:held')::text$q$), 'false',
          'intruder''s fencing.release of another session''s lock returns false');
SELECT is(t50.value_as('fencing_t50_intruder', $q$SELECT fencing.release_all()::text$q$), '0',
          'intruder''s fencing.release_all releases nothing of another session');
SELECT is(t50.state_as('fencing_t50_intruder', $q$SELECT pg_advisory_unlock_all()$q$), '00000',
          'intruder''s pg_advisory_unlock_all runs');
RESET client_min_messages;
-- (Not try_acquire: this transaction validated a token of t50:held above.)
SELECT is((SELECT count(*)::int FROM fencing.locks WHERE resource = 't50:held' AND granted AND pid <> pg_backend_pid()), 1,
          'and the other session still holds t50:held');
SELECT is(t50.state_as('fencing_t50_intruder', format('SELECT pg_terminate_backend(%s)',
          (SELECT pid FROM fencing.locks WHERE resource = 't50:held'))), '42501',
          'intruder cannot terminate the holder''s backend');
SELECT is((SELECT r FROM dblink('t50', $q$SELECT fencing.release('t50:held')::text$q$) AS x(r text)), 'true',
          'the holder releases it');
SELECT ok(dblink_disconnect('t50') = 'OK', 'second session closed');

--------------------------------------------------------------------------------
-- 6. Hostile objects in public and pg_temp change no result.
--------------------------------------------------------------------------------
SAVEPOINT hostile;
SET LOCAL client_min_messages = warning;
CREATE TABLE public.fence_state (key bigint, token bigint, granted_at int, lease_ms int, resource text);
INSERT INTO public.fence_state SELECT fencing.resource_key('t50:h'), 1, 0, 0, 't50:h';
CREATE SEQUENCE public.token_seq START 1;
CREATE TABLE public.pg_locks (locktype text);
CREATE FUNCTION public.acquire(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.current(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.validate(text, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.setval(regclass, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.pg_has_role(name, oid, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.pg_has_role(oid, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.format(text, VARIADIC "any") RETURNS text LANGUAGE internal AS 'text_format';
CREATE FUNCTION public.max(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION public.t50_true(fencing.token, fencing.token) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.t50_true8(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR public.< (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.t50_true);
CREATE OPERATOR public.> (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.t50_true);
CREATE OPERATOR public.= (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.t50_true);
CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.t50_true8);
CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.t50_true8);
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.t50_true8);
CREATE FUNCTION pg_temp.current(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION pg_temp.acquire(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE TEMP TABLE fence_state (key bigint, token bigint, granted_at int, lease_ms int, resource text);
CREATE TEMP TABLE pg_trigger (tgrelid oid, tgname name);
CREATE TEMP TABLE pg_class (oid oid, relname name);
CREATE TEMP VIEW pg_attribute AS SELECT 0::oid AS attrelid;
CREATE TABLE public.t50_victim (id int PRIMARY KEY, fence_token fencing.token, v text);
INSERT INTO public.t50_victim VALUES (1, 5, 'a');
RESET client_min_messages;
SET LOCAL search_path = pg_temp, public, fencing, pg_catalog;

-- Under that search_path: acquire, current, validate, protect, a fresh write,
-- a stale write, the views, release. Results go to psql variables; they are
-- checked once the hostile objects are gone.
SELECT fencing.acquire('t50:h')::bigint AS h_tok \gset
SELECT fencing.current('t50:h')::bigint AS h_cur \gset
SELECT fencing.validate('t50:h', :h_tok::bigint)::bigint AS h_val \gset
SELECT (SELECT token::bigint FROM fencing.locks WHERE resource = 't50:h' AND pid = pg_backend_pid()) AS h_locks \gset
SELECT true AS h_protected FROM (SELECT fencing.protect('public.t50_victim')) p \gset
SELECT (SELECT on_stale || ',' || token_column || ',' || allow_equal::text FROM fencing.protected
         WHERE tbl = 'public.t50_victim'::regclass) AS h_listed \gset
WITH u AS (UPDATE public.t50_victim SET v = 'fresh', fence_token = :h_tok::bigint WHERE id = 1 RETURNING 1)
SELECT count(*) AS h_fresh FROM u \gset
DO $$
BEGIN
    UPDATE public.t50_victim SET v = 'stale', fence_token = 6 WHERE id = 1;
    PERFORM pg_catalog.set_config('t50.stale', '00000', true);
EXCEPTION WHEN OTHERS THEN
    PERFORM pg_catalog.set_config('t50.stale', SQLSTATE, true);
END $$;
SELECT pg_catalog.current_setting('t50.stale') AS h_stale \gset
SELECT fencing.release('t50:h') AS h_released \gset
SELECT fencing.current('t50:h')::bigint AS h_cur_after \gset
SELECT (SELECT v || ',' || fence_token::bigint FROM public.t50_victim WHERE id = 1) AS h_row \gset
ROLLBACK TO SAVEPOINT hostile;
RESET search_path;

SELECT ok(:h_tok::bigint > 1, 'with hostile objects: fencing.acquire returns a real token');
SELECT is(:h_cur::bigint, :h_tok::bigint, 'with hostile objects: fencing.current returns it');
SELECT is(:h_val::bigint, :h_tok::bigint, 'with hostile objects: fencing.validate accepts it');
SELECT is(:'h_locks'::text, :'h_tok'::text, 'with hostile objects: fencing.locks lists it');
SELECT ok(:'h_protected'::boolean, 'with hostile objects: fencing.protect runs');
SELECT is(:'h_listed'::text, 'error,fence_token,false'::text, 'with hostile objects: fencing.protected lists the table with its settings');
SELECT is(:'h_fresh'::text, '1'::text, 'with hostile objects: a write with the new token is accepted');
SELECT is(:'h_stale'::text, '23T01'::text, 'with hostile objects: a stale write is rejected with 23T01');
SELECT is(:'h_released'::text, 't'::text, 'with hostile objects: fencing.release releases');
SELECT is(:h_cur_after::bigint, :h_tok::bigint, 'with hostile objects: the stored token is the issued one');
SELECT is(:'h_row'::text, 'fresh,' || :'h_tok', 'with hostile objects: the row holds the fresh write');

SELECT is(fencing.release_all(), 0, 'this session holds no fencing lock at the end');
SELECT * FROM finish();
ROLLBACK;
