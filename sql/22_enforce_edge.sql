-- The edges of the enforcement trigger:
--  * cached column positions survive ALTER TABLE in the same session (add,
--    drop, rename columns; the token column's type between bigint and
--    fencing.token; prepared statements and PL/pgSQL plans);
--  * renaming the token column gives a clear error until protect is called
--    again;
--  * a BEFORE ROW trigger that fires after fencing's (its name sorts after
--    "~fencing_enforce") cannot get a stale write through; one that fires
--    before works normally;
--  * hostile objects in public and pg_temp change nothing;
--  * what bypasses the check (a superuser's session_replication_role =
--    replica, the owner's ALTER TABLE ... DISABLE TRIGGER) and that an
--    ordinary role that may write the table has no way around it;
--  * row movement between partitions and MERGE.
-- Tokens are literals, none comes from fencing.acquire.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never

---------------------------------------------------------------------------
-- ALTER TABLE in the same session
---------------------------------------------------------------------------
CREATE TABLE al (id int PRIMARY KEY, a int, fence_token fencing.token, v text);
SELECT fencing.protect('al');
INSERT INTO al VALUES (1, 0, 10, 'a');
PREPARE upd(bigint) AS UPDATE al SET fence_token = $1 WHERE id = 1;
PREPARE upd_untokened AS UPDATE al SET id = id WHERE id = 1;
CREATE FUNCTION pg_temp.plpgsql_upd(tok bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    UPDATE al SET fence_token = tok WHERE id = 1;
    RETURN 'updated to ' || tok;
END
$$;
EXECUTE upd(11);
EXECUTE upd(11);
SELECT pg_temp.plpgsql_upd(11);
EXECUTE upd_untokened;
-- add a column
ALTER TABLE al ADD COLUMN b int DEFAULT 7;
EXECUTE upd(11);
EXECUTE upd(12);
SELECT pg_temp.plpgsql_upd(12);
SELECT pg_temp.plpgsql_upd(13);
-- drop the column before the token column
ALTER TABLE al DROP COLUMN a;
EXECUTE upd(13);
EXECUTE upd(14);
SELECT pg_temp.plpgsql_upd(14);
EXECUTE upd_untokened;
-- rename other columns, add one with a rewrite
ALTER TABLE al RENAME COLUMN b TO b2;
ALTER TABLE al RENAME COLUMN v TO w;
ALTER TABLE al ADD COLUMN c timestamptz DEFAULT now();
ALTER TABLE al ADD COLUMN d int GENERATED ALWAYS AS (id * 2) STORED;
EXECUTE upd(14);
EXECUTE upd(15);
SELECT pg_temp.plpgsql_upd(16);
-- the token column becomes bigint ...
ALTER TABLE al ALTER COLUMN fence_token TYPE bigint;
EXECUTE upd(16);
EXECUTE upd(17);
SELECT pg_temp.plpgsql_upd(17);
SELECT pg_temp.plpgsql_upd(18);
BEGIN;
SET LOCAL fencing.token = '19';
UPDATE al SET w = 'bigint, from the setting' WHERE id = 1;
COMMIT;
SELECT id, fence_token, pg_typeof(fence_token), w FROM al;
-- ... and fencing.token again
ALTER TABLE al ALTER COLUMN fence_token TYPE fencing.token;
EXECUTE upd(19);
EXECUTE upd(20);
SELECT id, fence_token, pg_typeof(fence_token), w FROM al;
-- all of it inside one transaction
BEGIN;
EXECUTE upd(21);
ALTER TABLE al ADD COLUMN e int;
EXECUTE upd(22);
ALTER TABLE al DROP COLUMN e, DROP COLUMN b2;
EXECUTE upd(23);
ALTER TABLE al ALTER COLUMN fence_token TYPE bigint;
EXECUTE upd(24);
SAVEPOINT s;
EXECUTE upd(24);
ROLLBACK TO SAVEPOINT s;
ALTER TABLE al ALTER COLUMN fence_token TYPE fencing.token;
EXECUTE upd(25);
COMMIT;
-- and inside one PL/pgSQL call
DO $$
BEGIN
    UPDATE al SET fence_token = 26 WHERE id = 1;
    ALTER TABLE al ADD COLUMN f int;
    UPDATE al SET fence_token = 27 WHERE id = 1;
    ALTER TABLE al DROP COLUMN f;
    ALTER TABLE al ALTER COLUMN fence_token TYPE bigint;
    UPDATE al SET fence_token = 28 WHERE id = 1;
    BEGIN
        UPDATE al SET fence_token = 28 WHERE id = 1;
        RAISE EXCEPTION 'not reached';
    EXCEPTION WHEN SQLSTATE '23T01' THEN
        RAISE NOTICE '23T01 after the type change: %', SQLERRM;
    END;
    ALTER TABLE al ALTER COLUMN fence_token TYPE fencing.token;
END
$$;
SELECT id, fence_token, pg_typeof(fence_token), w, d FROM al;
-- A type that is not a token type: a clear error until the type is fixed.
ALTER TABLE al ALTER COLUMN fence_token TYPE text;
EXECUTE upd(30);
\echo :SQLSTATE
ALTER TABLE al ALTER COLUMN fence_token TYPE bigint USING fence_token::bigint;
EXECUTE upd(28);
EXECUTE upd(30);

-- Renaming the token column: every write gets a clear error naming the
-- column, the trigger and the table ...
ALTER TABLE al RENAME COLUMN fence_token TO tok;
UPDATE al SET tok = 31;
\echo :SQLSTATE
INSERT INTO al (id, tok, w) VALUES (2, 31, 'x');
DELETE FROM al;
SELECT * FROM fencing.protected WHERE tbl = 'al'::regclass;
-- ... until protect is called again.
SELECT fencing.protect('al', 'tok');
SELECT * FROM fencing.protected WHERE tbl = 'al'::regclass;
UPDATE al SET tok = 30;
UPDATE al SET tok = 31;
INSERT INTO al (id, tok, w) VALUES (2, 31, 'x');
SELECT id, tok, w FROM al ORDER BY id;
-- Renaming (or moving) the table changes nothing.
ALTER TABLE al RENAME TO al_renamed;
CREATE SCHEMA edge_other;
ALTER TABLE al_renamed SET SCHEMA edge_other;
UPDATE edge_other.al_renamed SET tok = 31 WHERE id = 1;
UPDATE edge_other.al_renamed SET tok = 32 WHERE id = 1;
SELECT * FROM fencing.protected WHERE tbl = 'edge_other.al_renamed'::regclass;
DEALLOCATE upd;
DEALLOCATE upd_untokened;

---------------------------------------------------------------------------
-- BEFORE ROW triggers that fire after fencing's check (name order) could
-- rewrite the token once it has been checked: writes are refused (55000)
-- while one is enabled.
---------------------------------------------------------------------------
CREATE TABLE ht (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ht');
INSERT INTO ht VALUES (1, 10, 'a');
CREATE FUNCTION rewrite_to_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence_token := 1;
    RETURN NEW;
END
$$;
CREATE TRIGGER "~~zz" BEFORE UPDATE ON ht FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
SELECT tgname, tgname > '~fencing_enforce' COLLATE "C" AS fires_after FROM pg_trigger WHERE tgrelid = 'ht'::regclass ORDER BY tgname COLLATE "C";
UPDATE ht SET fence_token = 20, v = 'through ~~zz?';
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '20';
UPDATE ht SET v = 'through ~~zz with the setting?';
ROLLBACK;
INSERT INTO ht VALUES (1, 99, 'upsert') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token;
-- ~~zz fires on UPDATE only: INSERT is fine.
INSERT INTO ht VALUES (2, 1, 'b'), (3, 5, 'c');
SELECT * FROM ht ORDER BY id;
-- Disabled, it cannot fire: writes are accepted again ...
ALTER TABLE ht DISABLE TRIGGER "~~zz";
UPDATE ht SET fence_token = 20, v = 'a20' WHERE id = 1;
-- ... and refused again once it is enabled.
ALTER TABLE ht ENABLE TRIGGER "~~zz";
UPDATE ht SET fence_token = 21 WHERE id = 1;
-- Re-protecting warns about it.
SELECT fencing.protect('ht');
DROP TRIGGER "~~zz" ON ht;
-- Non-ASCII names sort after "~" too (triggers fire in byte order).
CREATE TRIGGER "éclair" BEFORE INSERT OR UPDATE ON ht FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
UPDATE ht SET fence_token = 30 WHERE id = 1;
INSERT INTO ht VALUES (4, 30, 'd');
DROP TRIGGER "éclair" ON ht;
CREATE TRIGGER "~fencing_enforce2" BEFORE INSERT ON ht FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
INSERT INTO ht VALUES (4, 30, 'd');
UPDATE ht SET fence_token = 30 WHERE id = 1;
DROP TRIGGER "~fencing_enforce2" ON ht;
-- A later BEFORE DELETE trigger cannot change the token, nor can AFTER or
-- statement-level ones: they are fine.
CREATE FUNCTION pass_through() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN RETURN NULL; END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER "~~del" BEFORE DELETE ON ht FOR EACH ROW EXECUTE FUNCTION pass_through();
CREATE TRIGGER "~~after" AFTER INSERT OR UPDATE ON ht FOR EACH ROW EXECUTE FUNCTION pass_through();
CREATE TRIGGER "~~stmt" BEFORE INSERT OR UPDATE ON ht FOR EACH STATEMENT EXECUTE FUNCTION pass_through();
UPDATE ht SET fence_token = 31 WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = '32';
DELETE FROM ht WHERE id = 3;
COMMIT;
-- A trigger that fires before fencing's works normally: what it writes is
-- what gets checked.
CREATE FUNCTION upper_v() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.v := upper(NEW.v);
    RETURN NEW;
END
$$;
CREATE TRIGGER "a_upper" BEFORE INSERT OR UPDATE ON ht FOR EACH ROW EXECUTE FUNCTION upper_v();
UPDATE ht SET fence_token = 32, v = 'upper' WHERE id = 1 RETURNING *;
INSERT INTO ht VALUES (5, 1, 'lower') RETURNING *;
UPDATE ht SET fence_token = 31 WHERE id = 1;
CREATE TRIGGER "b_stale" BEFORE UPDATE ON ht FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
UPDATE ht SET fence_token = 40 WHERE id = 1;
DROP TRIGGER "b_stale" ON ht;
SELECT * FROM ht ORDER BY id;
-- On a partitioned table, a later trigger on the parent reaches every
-- partition.
CREATE TABLE hp (id int PRIMARY KEY, fence_token fencing.token, v text) PARTITION BY RANGE (id);
CREATE TABLE hp1 PARTITION OF hp FOR VALUES FROM (0) TO (10);
SELECT fencing.protect('hp');
INSERT INTO hp VALUES (1, 10, 'a');
CREATE TRIGGER "~~zz" BEFORE UPDATE ON hp FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
UPDATE hp SET fence_token = 20;
CREATE TABLE hp2 PARTITION OF hp FOR VALUES FROM (10) TO (20);
INSERT INTO hp VALUES (11, 10, 'b');
UPDATE hp SET fence_token = 20 WHERE id = 11;
DROP TRIGGER "~~zz" ON hp;
UPDATE hp SET fence_token = 20;
SELECT * FROM hp ORDER BY id;

---------------------------------------------------------------------------
-- Hostile objects in public and pg_temp: functions and operators for bigint
-- and fencing.token that always answer "yes" (or "no"), look-alike tables.
-- The results below are the same as without them.
---------------------------------------------------------------------------
CREATE TABLE hs (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE hsb (id int PRIMARY KEY, fence_token bigint, v text);
CREATE FUNCTION public.hostile_yes(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.hostile_no(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE FUNCTION public.hostile_tyes(fencing.token, fencing.token) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.hostile_tno(fencing.token, fencing.token) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_yes);
CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_no);
CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_yes);
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_no);
CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_yes);
CREATE OPERATOR public.= (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.hostile_tyes);
CREATE OPERATOR public.< (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.hostile_tno);
CREATE OPERATOR public.> (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.hostile_tyes);
CREATE OPERATOR public.<= (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.hostile_tno);
CREATE OPERATOR public.>= (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = public.hostile_tyes);
CREATE FUNCTION public.int8gt(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.int8lt(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE FUNCTION public.btint8cmp(bigint, bigint) RETURNS integer LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION public.max(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
CREATE FUNCTION public.pg_has_role(name, oid, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.format(text, text, text, text) RETURNS text LANGUAGE sql AS $$SELECT 'SELECT 1'$$;
CREATE FUNCTION public.quote_literal(text) RETURNS text LANGUAGE sql AS $$SELECT '''x'''$$;
CREATE FUNCTION public.current_setting(text) RETURNS text LANGUAGE sql AS $$SELECT '1'$$;
CREATE FUNCTION public.current_setting(text, boolean) RETURNS text LANGUAGE sql AS $$SELECT '1'$$;
CREATE FUNCTION public.trigger_args(bytea) RETURNS text[] LANGUAGE sql AS $$SELECT '{x,true,skip,false}'::text[]$$;
CREATE FUNCTION public.enforce() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TABLE public.fence_state (key bigint, token bigint, granted_at integer, lease_ms integer, resource text);
CREATE TABLE public.token_seq (x int);
CREATE TABLE public.pg_trigger (tgrelid oid, tgname name);
CREATE FUNCTION pg_temp.int8gt(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION pg_temp.hostile_yes(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION pg_temp.hostile_tyes(fencing.token, fencing.token) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR pg_temp.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = pg_temp.hostile_yes);
CREATE OPERATOR pg_temp.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = pg_temp.hostile_yes);
CREATE OPERATOR pg_temp.> (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = pg_temp.hostile_tyes);
CREATE OPERATOR pg_temp.= (LEFTARG = fencing.token, RIGHTARG = fencing.token, FUNCTION = pg_temp.hostile_tyes);
CREATE TEMP TABLE pg_trigger (tgrelid oid, tgname name);
CREATE TEMP TABLE pg_attribute (attrelid oid, attname name);
CREATE TEMP TABLE pg_class (oid oid, relname name);
CREATE TEMP TABLE fence_state (key bigint, token bigint);
CREATE TEMP TABLE protected (tbl regclass);
SET search_path = pg_temp, public, pg_catalog, fencing;
-- The hostile operators are in effect for ordinary SQL ...
SELECT 1::bigint > 2::bigint AS "1 > 2", 1::fencing.token > 2::fencing.token AS "token 1 > 2";
-- ... but not for protect, the view or the trigger.
SELECT fencing.protect('hs');
SELECT fencing.protect('hsb', allow_equal => true);
SELECT * FROM fencing.protected WHERE tbl IN ('public.hs'::regclass, 'public.hsb'::regclass) ORDER BY tbl::text;
SELECT tgname, fencing.trigger_args(tgargs) FROM pg_catalog.pg_trigger
 WHERE tgrelid IN ('public.hs'::regclass, 'public.hsb'::regclass) ORDER BY tgrelid::regclass::text;
INSERT INTO hs VALUES (1, 10, 'a');
INSERT INTO hsb VALUES (1, 10, 'a');
INSERT INTO hs VALUES (2, NULL, 'b');
UPDATE hs SET fence_token = 9;
UPDATE hs SET fence_token = 10;
UPDATE hs SET v = 'untokened';
UPDATE hs SET fence_token = 11 RETURNING *;
UPDATE hsb SET fence_token = 9;
UPDATE hsb SET fence_token = 10 RETURNING *;
UPDATE hsb SET v = 'untokened';
BEGIN;
SET LOCAL fencing.token = '10';
UPDATE hsb SET v = 'setting 10' RETURNING *;
UPDATE hs SET v = 'setting 10';
ROLLBACK;
-- A non-owner is still refused, whatever public.pg_has_role says.
CREATE ROLE regress_fencing22_hostile;
GRANT USAGE ON SCHEMA fencing TO regress_fencing22_hostile;
GRANT ALL ON hs TO regress_fencing22_hostile;
SET ROLE regress_fencing22_hostile;
SELECT fencing.unprotect('public.hs');
\echo :SQLSTATE
SELECT fencing.protect('public.hs', on_stale => 'skip');
\echo :SQLSTATE
RESET ROLE;
SELECT fencing.protect('hs', on_stale => 'skip');
\set QUIET off
UPDATE hs SET fence_token = 5;
\set QUIET on
SELECT fencing.unprotect('hsb');
SELECT fencing.unprotect('hsb');
SELECT * FROM fencing.protected WHERE tbl IN ('public.hs'::regclass, 'public.hsb'::regclass) ORDER BY tbl::text;
RESET search_path;
SELECT * FROM hs ORDER BY id;
SELECT * FROM hsb ORDER BY id;
DROP TABLE public.fence_state, public.token_seq, public.pg_trigger;
DROP TABLE pg_temp.pg_trigger, pg_temp.pg_attribute, pg_temp.pg_class, pg_temp.fence_state, pg_temp.protected;
DROP OPERATOR public.= (bigint, bigint), public.< (bigint, bigint), public.> (bigint, bigint),
              public.<= (bigint, bigint), public.>= (bigint, bigint),
              public.= (fencing.token, fencing.token), public.< (fencing.token, fencing.token),
              public.> (fencing.token, fencing.token), public.<= (fencing.token, fencing.token),
              public.>= (fencing.token, fencing.token),
              pg_temp.> (bigint, bigint), pg_temp.= (bigint, bigint),
              pg_temp.> (fencing.token, fencing.token), pg_temp.= (fencing.token, fencing.token);
DROP FUNCTION public.hostile_yes(bigint, bigint), public.hostile_no(bigint, bigint),
              public.hostile_tyes(fencing.token, fencing.token), public.hostile_tno(fencing.token, fencing.token),
              public.int8gt(bigint, bigint), public.int8lt(bigint, bigint), public.btint8cmp(bigint, bigint),
              public.max(bigint), public.pg_has_role(name, oid, text), public.format(text, text, text, text),
              public.quote_literal(text), public.current_setting(text), public.current_setting(text, boolean),
              public.trigger_args(bytea), public.enforce(),
              pg_temp.int8gt(bigint, bigint), pg_temp.hostile_yes(bigint, bigint),
              pg_temp.hostile_tyes(fencing.token, fencing.token);

---------------------------------------------------------------------------
-- What bypasses the check, by design: the owner's ALTER TABLE ... DISABLE
-- TRIGGER. (1.2) A superuser with session_replication_role = replica does
-- not: protect() enables the check ALWAYS, so that it fires in replica mode
-- (logical replication's apply workers) too; the owner's plain ENABLE
-- TRIGGER makes it an ordinary trigger again, which replica mode skips.
---------------------------------------------------------------------------
CREATE ROLE regress_fencing22_owner;
CREATE ROLE regress_fencing22_app;
GRANT USAGE ON SCHEMA fencing TO regress_fencing22_owner, regress_fencing22_app;
CREATE TABLE bp (id int PRIMARY KEY, fence_token fencing.token, v text);
ALTER TABLE bp OWNER TO regress_fencing22_owner;
SET ROLE regress_fencing22_owner;
SELECT fencing.protect('bp', fence_deletes => true);
INSERT INTO bp VALUES (1, 10, 'a'), (2, 10, 'b');
RESET ROLE;
-- superuser, replica mode: the check fires (enabled ALWAYS)
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE bp SET fence_token = 5, v = 'stale, replica mode' WHERE id = 1;
COMMIT;
SELECT * FROM bp ORDER BY id;
-- the owner, trigger disabled: a stale write goes through
SET ROLE regress_fencing22_owner;
BEGIN;
ALTER TABLE bp DISABLE TRIGGER "~fencing_enforce";
UPDATE bp SET fence_token = 4, v = 'stale, trigger disabled' WHERE id = 1;
ALTER TABLE bp ENABLE TRIGGER "~fencing_enforce";
COMMIT;
UPDATE bp SET fence_token = 3 WHERE id = 1;
-- enabled as an ordinary trigger now: replica mode skips it
RESET ROLE;
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE bp SET fence_token = 3, v = 'stale, replica mode' WHERE id = 1;
SELECT * FROM bp WHERE id = 1;
ROLLBACK;
SET ROLE regress_fencing22_owner;
-- the owner makes the check fire in replica mode again
ALTER TABLE bp ENABLE ALWAYS TRIGGER "~fencing_enforce";
RESET ROLE;
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE bp SET fence_token = 3 WHERE id = 1;
ROLLBACK;
SET ROLE regress_fencing22_owner;
ALTER TABLE bp ENABLE TRIGGER "~fencing_enforce";
RESET ROLE;
SELECT * FROM bp ORDER BY id;

---------------------------------------------------------------------------
-- An ordinary role that may SELECT, INSERT, UPDATE and DELETE the table (and
-- use the schema fencing) has no way around the check.
---------------------------------------------------------------------------
GRANT SELECT, INSERT, UPDATE, DELETE ON bp TO regress_fencing22_app;
SET ROLE regress_fencing22_app;
-- stale writes, every way in
UPDATE bp SET fence_token = 9, v = 'stale' WHERE id = 2;
UPDATE bp SET v = 'untokened' WHERE id = 2;
INSERT INTO bp VALUES (2, 9, 'stale') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token;
INSERT INTO bp VALUES (3, NULL, 'no token');
COPY bp FROM stdin;
4	\N	copy without token
\.
MERGE INTO bp USING (VALUES (2, 9)) s(id, tok) ON bp.id = s.id
    WHEN MATCHED THEN UPDATE SET fence_token = s.tok, v = 'merge stale';
DELETE FROM bp WHERE id = 2;
BEGIN;
SET LOCAL fencing.token = '9';
UPDATE bp SET v = 'stale setting' WHERE id = 2;
ROLLBACK;
BEGIN;
DECLARE c CURSOR FOR SELECT * FROM bp WHERE id = 2 FOR UPDATE;
FETCH c;
UPDATE bp SET fence_token = 9 WHERE CURRENT OF c;
ROLLBACK;
-- switching the check off
ALTER TABLE bp DISABLE TRIGGER "~fencing_enforce";
\echo :SQLSTATE
ALTER TABLE bp DISABLE TRIGGER ALL;
\echo :SQLSTATE
ALTER TABLE bp DISABLE TRIGGER USER;
\echo :SQLSTATE
ALTER TABLE bp ENABLE REPLICA TRIGGER "~fencing_enforce";
\echo :SQLSTATE
DROP TRIGGER "~fencing_enforce" ON bp;
\echo :SQLSTATE
CREATE TRIGGER "~~zz" BEFORE UPDATE ON bp FOR EACH ROW EXECUTE FUNCTION rewrite_to_stale();
\echo :SQLSTATE
CREATE RULE bp_rule AS ON UPDATE TO bp DO INSTEAD NOTHING;
\echo :SQLSTATE
ALTER TABLE bp RENAME COLUMN fence_token TO t;
\echo :SQLSTATE
ALTER TABLE bp ALTER COLUMN fence_token TYPE bigint;
\echo :SQLSTATE
TRUNCATE bp;
\echo :SQLSTATE
SET session_replication_role = replica;
\echo :SQLSTATE
BEGIN;
SET LOCAL session_replication_role = replica;
\echo :SQLSTATE
ROLLBACK;
SELECT set_config('session_replication_role', 'replica', true);
\echo :SQLSTATE
SELECT fencing.unprotect('bp');
\echo :SQLSTATE
SELECT fencing.protect('bp', on_stale => 'skip');
\echo :SQLSTATE
-- the fence state and the token counter
INSERT INTO fencing.fence_state VALUES (1, 1, 0, 0, 'x');
\echo :SQLSTATE
UPDATE fencing.fence_state SET token = 1;
\echo :SQLSTATE
DELETE FROM fencing.fence_state;
\echo :SQLSTATE
TRUNCATE fencing.fence_state;
\echo :SQLSTATE
SELECT setval('fencing.token_seq', 1);
\echo :SQLSTATE
SELECT nextval('fencing.token_seq');
\echo :SQLSTATE
ALTER SEQUENCE fencing.token_seq RESTART;
\echo :SQLSTATE
SELECT fencing.advance_past('bp', 1000000);
\echo :SQLSTATE
-- the writes it is entitled to still work
UPDATE bp SET fence_token = 11, v = 'b11' WHERE id = 2;
BEGIN;
SET LOCAL fencing.token = '12';
UPDATE bp SET v = 'b12' WHERE id = 2;
COMMIT;
RESET ROLE;
SELECT * FROM bp ORDER BY id;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'bp'::regclass;

---------------------------------------------------------------------------
-- Row movement between partitions is an UPDATE: it is judged as one (by
-- the token it carries), also with fence_deletes and on_stale = 'skip'.
---------------------------------------------------------------------------
CREATE TABLE mv (id int, region text, fence_token fencing.token, v text, PRIMARY KEY (id, region))
    PARTITION BY LIST (region);
CREATE TABLE mv_eu PARTITION OF mv FOR VALUES IN ('eu');
CREATE TABLE mv_us PARTITION OF mv FOR VALUES IN ('us');
SELECT fencing.protect('mv');
INSERT INTO mv VALUES (1, 'eu', 10, 'a'), (2, 'eu', 10, 'b');
UPDATE mv SET region = 'us', fence_token = 5 WHERE id = 1;
UPDATE mv SET region = 'us', fence_token = 11 WHERE id = 1;
SELECT fencing.protect('mv', fence_deletes => true);
UPDATE mv SET region = 'eu', fence_token = 5 WHERE id = 1;
UPDATE mv SET region = 'eu', fence_token = 12 WHERE id = 1;
SELECT tableoid::regclass, * FROM mv ORDER BY id;
SELECT fencing.protect('mv', on_stale => 'skip', fence_deletes => true);
\set QUIET off
UPDATE mv SET region = 'us', fence_token = 5 WHERE id = 1;
UPDATE mv SET region = 'us', fence_token = 13 WHERE id = 1;
UPDATE mv SET region = 'eu', fence_token = 14 WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = '15';
UPDATE mv SET region = 'us' WHERE id = 2;
COMMIT;
\set QUIET on
SELECT tableoid::regclass, * FROM mv ORDER BY id;

---------------------------------------------------------------------------
-- MERGE: each WHEN MATCHED ... UPDATE action is an UPDATE of its own; an
-- action that does not assign the token is judged like an UPDATE that does
-- not mention it, even when another action of the statement assigns it.
---------------------------------------------------------------------------
CREATE TABLE mg (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('mg');
INSERT INTO mg VALUES (1, 10, 'a'), (2, 10, 'b');
\set QUIET off
MERGE INTO mg USING (VALUES (1, 5)) s(id, tok) ON mg.id = s.id
    WHEN MATCHED THEN UPDATE SET fence_token = s.tok;
MERGE INTO mg USING (VALUES (1, 11)) s(id, tok) ON mg.id = s.id
    WHEN MATCHED THEN UPDATE SET fence_token = s.tok, v = 'merged 11';
MERGE INTO mg USING (VALUES (3, NULL::bigint)) s(id, tok) ON mg.id = s.id
    WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.tok, 'merge insert');
MERGE INTO mg USING (VALUES (3, 1)) s(id, tok) ON mg.id = s.id
    WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.tok, 'merge insert');
-- without fencing.token: the action that does not assign the token is rejected
MERGE INTO mg USING (VALUES (1, 12, 'x'), (2, 12, 'y')) s(id, tok, v) ON mg.id = s.id
    WHEN MATCHED AND mg.id = 1 THEN UPDATE SET fence_token = s.tok, v = s.v
    WHEN MATCHED THEN UPDATE SET v = s.v;
-- with fencing.token: that action takes (and writes) the setting
BEGIN;
SET LOCAL fencing.token = '20';
MERGE INTO mg USING (VALUES (1, 12, 'x'), (2, 12, 'y')) s(id, tok, v) ON mg.id = s.id
    WHEN MATCHED AND mg.id = 1 THEN UPDATE SET fence_token = s.tok, v = s.v
    WHEN MATCHED THEN UPDATE SET v = s.v;
COMMIT;
\set QUIET on
SELECT * FROM mg ORDER BY id;
-- with allow_equal: PostgreSQL reports to a trigger the union of all MERGE
-- actions' SET lists, so an action that does not assign the token counts as
-- assigning the (unchanged, equal) token and is accepted (a documented
-- limitation); an older setting is rejected
SELECT fencing.protect('mg', allow_equal => true);
\set QUIET off
MERGE INTO mg USING (VALUES (1, 30, 'x'), (2, 30, 'z')) s(id, tok, v) ON mg.id = s.id
    WHEN MATCHED AND mg.id = 1 THEN UPDATE SET fence_token = s.tok, v = s.v
    WHEN MATCHED THEN UPDATE SET v = s.v;
BEGIN;
SET LOCAL fencing.token = '5';
MERGE INTO mg USING (VALUES (1, 30, 'x'), (2, 30, 'z')) s(id, tok, v) ON mg.id = s.id
    WHEN MATCHED AND mg.id = 0 THEN UPDATE SET fence_token = s.tok, v = s.v
    WHEN MATCHED AND mg.id = 2 THEN UPDATE SET v = s.v;
COMMIT;
\set QUIET on
SELECT * FROM mg ORDER BY id;

---------------------------------------------------------------------------
-- The token and key columns as the trigger reads them for every row: rows
-- that do not store the token column (added later with a default), a
-- NULL token, and a token after a variable-width column.
---------------------------------------------------------------------------
CREATE TABLE late (id int PRIMARY KEY, v int);
INSERT INTO late SELECT g, 0 FROM generate_series(1, 4) g;
ALTER TABLE late ADD COLUMN fence_token bigint DEFAULT 100;
INSERT INTO late VALUES (5, 0, NULL);
SELECT fencing.protect('late', tombstones => true);
BEGIN;
SELECT fencing.use(50) \gset
UPDATE late SET v = 1 WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT fencing.use(50) \gset
DELETE FROM late WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT fencing.use(100) \gset
DELETE FROM late WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT fencing.use(101) \gset
UPDATE late SET v = 1 WHERE id = 1;
DELETE FROM late WHERE id = 2;
COMMIT;
INSERT INTO late VALUES (2, 0, 101);
INSERT INTO late VALUES (2, 0, 102);
BEGIN;
SELECT fencing.use(40) \gset
DELETE FROM late WHERE id = 3;
ROLLBACK;
BEGIN;
SELECT fencing.use(40) \gset
DELETE FROM late WHERE id = 5;
COMMIT;
SELECT id, v, fence_token FROM late ORDER BY id;
CREATE TABLE wide (name text, id int PRIMARY KEY, fence_token bigint);
INSERT INTO wide SELECT repeat('x', g), g, 10 FROM generate_series(1, 3) g;
SELECT fencing.protect('wide');
BEGIN;
SELECT fencing.use(10) \gset
DELETE FROM wide WHERE id = 1;
ROLLBACK;
BEGIN;
SELECT fencing.use(11) \gset
DELETE FROM wide WHERE id = 1;
COMMIT;
INSERT INTO wide VALUES ('y', 1, 11);
INSERT INTO wide VALUES ('y', 1, 12);
SELECT name, id, fence_token FROM wide ORDER BY id;
DROP TABLE late, wide;

---------------------------------------------------------------------------
-- Clean up.
---------------------------------------------------------------------------
DROP TABLE edge_other.al_renamed, ht, hp, hs, hsb, bp, mv, mg;
DROP SCHEMA edge_other;
DROP FUNCTION rewrite_to_stale(), pass_through(), upper_v();
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing22_hostile, regress_fencing22_owner, regress_fencing22_app;
DROP ROLE regress_fencing22_hostile;
DROP ROLE regress_fencing22_owner;
DROP ROLE regress_fencing22_app;
