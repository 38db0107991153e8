-- fencing.protect / fencing.unprotect / the fencing.protected view.
-- Argument resolution, SQLSTATEs, ownership, re-protection, partitioned
-- tables (existing partitions, ATTACHed and PARTITION OF later, DETACHed;
-- more of that in 24_coverage), other
-- schemas and quoted names, dropped columns, and misuse of fencing.enforce()
-- as a trigger.
-- protect() moves the database-wide token counter past the tokens a table
-- already holds, so tables here are protected while they hold no token; no
-- token from fencing.acquire is printed.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never

-- The public API, exactly.
SELECT p.oid::regprocedure AS function, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result
  FROM pg_proc p
 WHERE p.oid IN ('fencing.protect(regclass,name,boolean,text,boolean,boolean)'::regprocedure,
                 'fencing.unprotect(regclass)'::regprocedure,
                 'fencing.enforce()'::regprocedure)
 ORDER BY p.oid::regprocedure::text;
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
  FROM pg_attribute a WHERE a.attrelid = 'fencing.protected'::regclass AND a.attnum > 0 ORDER BY a.attnum;

---------------------------------------------------------------------------
-- token_column => NULL: the table's only fencing.token column ...
---------------------------------------------------------------------------
CREATE TABLE p_only (id int PRIMARY KEY, tok fencing.token, v text);
SELECT fencing.protect('p_only');
SELECT * FROM fencing.protected WHERE tbl = 'p_only'::regclass;
-- ... installed as a BEFORE ROW trigger named "~fencing_enforce".
SELECT tgname, tgenabled, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = 'p_only'::regclass;
INSERT INTO p_only VALUES (1, 10, 'a');
UPDATE p_only SET tok = 9;
UPDATE p_only SET tok = 11 RETURNING *;

-- ... else a column named fence_token (two token columns).
CREATE TABLE p_two (id int PRIMARY KEY, a fencing.token, fence_token fencing.token);
SELECT fencing.protect('p_two');
SELECT tbl, token_column FROM fencing.protected WHERE tbl = 'p_two'::regclass;

-- ... else 42703, with a hint naming the argument.
CREATE TABLE p_two_bad (id int PRIMARY KEY, a fencing.token, b fencing.token);
SELECT fencing.protect('p_two_bad');
\echo :SQLSTATE
CREATE TABLE p_none (id int, v text);
SELECT fencing.protect('p_none');
\echo :SQLSTATE
-- A bigint column is used when named fence_token, never guessed otherwise.
CREATE TABLE p_rev (id int PRIMARY KEY, revision bigint);
SELECT fencing.protect('p_rev');
\echo :SQLSTATE
-- An explicit token_column: either type, any name.
SELECT fencing.protect('p_two_bad', 'b');
SELECT fencing.protect('p_rev', 'revision');
SELECT fencing.protect('p_rev', token_column => 'nope');
\echo :SQLSTATE
CREATE TABLE p_big (id int PRIMARY KEY, fence_token bigint, v text);
SELECT fencing.protect('p_big');
SELECT tbl, token_column FROM fencing.protected
 WHERE tbl IN ('p_two_bad'::regclass, 'p_rev'::regclass, 'p_big'::regclass) ORDER BY tbl::text;

-- Any other column type: 42804.
CREATE TABLE p_text (id int, fence_token text, label text);
SELECT fencing.protect('p_text');
\echo :SQLSTATE
SELECT fencing.protect('p_text', 'label');
\echo :SQLSTATE
CREATE TABLE p_int (id int, fence_token integer);
SELECT fencing.protect('p_int');
\echo :SQLSTATE
CREATE TABLE p_num (id int, fence_token numeric);
SELECT fencing.protect('p_num');
\echo :SQLSTATE
CREATE DOMAIN p_tokdom AS bigint;
CREATE TABLE p_dom (id int, fence_token p_tokdom);
SELECT fencing.protect('p_dom');
\echo :SQLSTATE
-- A system column is not a column for this purpose.
SELECT fencing.protect('p_dom', 'xmin');
\echo :SQLSTATE

-- on_stale is 'error' or 'skip': 22023 otherwise.
SELECT fencing.protect('p_big', on_stale => 'ignore');
\echo :SQLSTATE
SELECT fencing.protect('p_big', on_stale => 'ERROR');
\echo :SQLSTATE
SELECT fencing.protect('p_big', on_stale => NULL);
\echo :SQLSTATE
-- NULL arguments.
SELECT fencing.protect(NULL);
\echo :SQLSTATE
SELECT fencing.protect('p_big', allow_equal => NULL);
\echo :SQLSTATE
SELECT fencing.protect('p_big', fence_deletes => NULL);
\echo :SQLSTATE
-- Not a table.
CREATE VIEW p_view AS SELECT * FROM p_big;
SELECT fencing.protect('p_view');
\echo :SQLSTATE
CREATE SEQUENCE p_seq;
SELECT fencing.protect('p_seq');
\echo :SQLSTATE
SELECT fencing.protect('p_does_not_exist');
\echo :SQLSTATE
-- A failed call changes nothing.
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;

---------------------------------------------------------------------------
-- Calling protect again replaces the settings (one trigger, new arguments).
---------------------------------------------------------------------------
SELECT fencing.protect('p_big', allow_equal => true, on_stale => 'skip', fence_deletes => true);
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'p_big'::regclass;
SELECT fencing.protect('p_big', 'fence_token', false, 'error', false);
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'p_big'::regclass;
-- Positional arguments, named arguments, defaults.
SELECT fencing.protect('p_big'::regclass, NULL, true);
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;
SELECT fencing.protect(tbl => 'p_big', on_stale => 'skip');
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;

---------------------------------------------------------------------------
-- unprotect: true when it removed the check, false when there was none.
---------------------------------------------------------------------------
SELECT fencing.unprotect('p_big');
SELECT fencing.unprotect('p_big');
SELECT fencing.unprotect('p_none');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'p_big'::regclass;
INSERT INTO p_big VALUES (1, NULL, 'unprotected: no token needed');
SELECT * FROM fencing.protected WHERE tbl = 'p_big'::regclass;
SELECT fencing.unprotect(NULL);
\echo :SQLSTATE

---------------------------------------------------------------------------
-- Only the owner (or a superuser) may protect or unprotect: 42501.
-- The roles get USAGE on the schema fencing as a DBA would grant it.
---------------------------------------------------------------------------
CREATE ROLE regress_fencing20_owner;
CREATE ROLE regress_fencing20_other;
CREATE ROLE regress_fencing20_member IN ROLE regress_fencing20_owner;
GRANT USAGE ON SCHEMA fencing TO regress_fencing20_owner, regress_fencing20_other, regress_fencing20_member;
CREATE TABLE p_owned (id int PRIMARY KEY, fence_token fencing.token, v text);
ALTER TABLE p_owned OWNER TO regress_fencing20_owner;
GRANT ALL ON p_owned TO regress_fencing20_other;
SET ROLE regress_fencing20_other;
SELECT fencing.protect('p_owned');
\echo :SQLSTATE
RESET ROLE;
SELECT * FROM fencing.protected WHERE tbl = 'p_owned'::regclass;
SET ROLE regress_fencing20_owner;
SELECT fencing.protect('p_owned');
RESET ROLE;
SET ROLE regress_fencing20_other;
SELECT fencing.protect('p_owned', on_stale => 'skip');
\echo :SQLSTATE
SELECT fencing.unprotect('p_owned');
\echo :SQLSTATE
RESET ROLE;
SELECT * FROM fencing.protected WHERE tbl = 'p_owned'::regclass;
-- A member of the owning role counts as the owner (as for ALTER TABLE).
SET ROLE regress_fencing20_member;
SELECT fencing.protect('p_owned', allow_equal => true);
RESET ROLE;
SELECT * FROM fencing.protected WHERE tbl = 'p_owned'::regclass;
-- The owner may unprotect; a superuser may protect anyone's table.
SET ROLE regress_fencing20_owner;
SELECT fencing.unprotect('p_owned');
RESET ROLE;
SELECT fencing.protect('p_owned');
SELECT tbl, token_column FROM fencing.protected WHERE tbl = 'p_owned'::regclass;

---------------------------------------------------------------------------
-- Partitioned tables: existing partitions, partitions created with
-- PARTITION OF later, tables ATTACHed later (with another column order and
-- dropped columns), sub-partitions.
---------------------------------------------------------------------------
CREATE TABLE pt (id int, junk int, region text, fence_token fencing.token, v text, PRIMARY KEY (region, id))
    PARTITION BY LIST (region);
ALTER TABLE pt DROP COLUMN junk;
CREATE TABLE pt_eu PARTITION OF pt FOR VALUES IN ('eu');
SELECT fencing.protect('pt');
CREATE TABLE pt_us PARTITION OF pt FOR VALUES IN ('us');
CREATE TABLE pt_ap (v text, dropped int, fence_token fencing.token, region text NOT NULL, id int NOT NULL);
ALTER TABLE pt_ap DROP COLUMN dropped;
ALTER TABLE pt ATTACH PARTITION pt_ap FOR VALUES IN ('ap');
CREATE TABLE pt_sa PARTITION OF pt FOR VALUES IN ('sa', 'sb') PARTITION BY LIST (region);
CREATE TABLE pt_sa1 PARTITION OF pt_sa FOR VALUES IN ('sa');
CREATE TABLE pt_sb (id int NOT NULL, region text NOT NULL, fence_token fencing.token, v text);
ALTER TABLE pt_sa ATTACH PARTITION pt_sb FOR VALUES IN ('sb');
-- Every partition carries the check; the view lists the table itself only.
SELECT tgrelid::regclass AS rel, tgname, tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args
  FROM pg_trigger WHERE tgrelid::regclass::text LIKE 'pt%' ORDER BY tgrelid::regclass::text;
SELECT * FROM fencing.protected WHERE tbl::text LIKE 'pt%';
INSERT INTO pt VALUES (1, 'eu', 10, 'eu'), (1, 'us', 10, 'us'), (1, 'ap', 10, 'ap'), (1, 'sa', 10, 'sa'), (1, 'sb', 10, 'sb');
INSERT INTO pt (id, region, v) VALUES (2, 'ap', 'no token');
-- A stale write is refused in each partition (the error names the partition
-- that holds the row).
UPDATE pt SET fence_token = 5 WHERE region = 'eu';
UPDATE pt SET fence_token = 5 WHERE region = 'us';
UPDATE pt SET fence_token = 5 WHERE region = 'ap';
UPDATE pt SET fence_token = 5 WHERE region = 'sa';
UPDATE pt SET fence_token = 5 WHERE region = 'sb';
UPDATE pt_ap SET fence_token = 10;
UPDATE pt SET v = 'no token' WHERE region = 'sb';
UPDATE pt SET fence_token = 20, v = v || '!';
SELECT * FROM pt ORDER BY region, id;
-- Re-protecting the partitioned table re-installs the check everywhere.
SELECT fencing.protect('pt', on_stale => 'skip');
SELECT DISTINCT fencing.trigger_args(tgargs) AS args FROM pg_trigger WHERE tgrelid::regclass::text LIKE 'pt%';
UPDATE pt SET fence_token = 15;
UPDATE pt SET fence_token = 30 WHERE region IN ('eu', 'sb');
SELECT * FROM pt ORDER BY region, id;
-- A partition's clone of the check is not the partition's own.
SELECT fencing.unprotect('pt_eu');
-- A DETACHed partition stays protected, with a check of its own (and the
-- same settings), until it is unprotected itself.
ALTER TABLE pt DETACH PARTITION pt_us;
SELECT tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args FROM pg_trigger WHERE tgrelid = 'pt_us'::regclass;
SELECT * FROM fencing.protected WHERE tbl = 'pt_us'::regclass;
\set QUIET off
UPDATE pt_us SET fence_token = 1;
\set QUIET on
SELECT fencing.unprotect('pt_us');
UPDATE pt_us SET fence_token = 1;
-- unprotect of the partitioned table removes the check from every partition.
SELECT fencing.unprotect('pt');
SELECT count(*) FROM pg_trigger WHERE tgrelid::regclass::text LIKE 'pt%';
UPDATE pt SET fence_token = 1 WHERE region = 'eu';

---------------------------------------------------------------------------
-- Another schema, quoted mixed-case names, names with quotes and spaces.
---------------------------------------------------------------------------
CREATE SCHEMA "Fence Schema";
CREATE TABLE "Fence Schema"."Mixed Table" ("ID" int PRIMARY KEY, "Fence Token" fencing.token, "V" text);
SELECT fencing.protect('"Fence Schema"."Mixed Table"');
SELECT * FROM fencing.protected WHERE tbl = '"Fence Schema"."Mixed Table"'::regclass;
INSERT INTO "Fence Schema"."Mixed Table" VALUES (1, 10, 'a');
UPDATE "Fence Schema"."Mixed Table" SET "Fence Token" = 10;
UPDATE "Fence Schema"."Mixed Table" SET "Fence Token" = 11 RETURNING *;
CREATE TABLE "Fence Schema"."it's ""odd""" (k text PRIMARY KEY, "tok'en" bigint, "%s" text);
SELECT fencing.protect('"Fence Schema"."it''s ""odd"""', $$tok'en$$, allow_equal => true);
SELECT * FROM fencing.protected WHERE tbl = '"Fence Schema"."it''s ""odd"""'::regclass;
INSERT INTO "Fence Schema"."it's ""odd""" VALUES ('a b', 7, 'x');
UPDATE "Fence Schema"."it's ""odd""" SET "tok'en" = 7;
UPDATE "Fence Schema"."it's ""odd""" SET "tok'en" = 6;
SELECT fencing.unprotect('"Fence Schema"."it''s ""odd"""');
SELECT fencing.unprotect('"Fence Schema"."Mixed Table"');
-- search_path does not decide which table is meant: the regclass does.
CREATE TABLE "Fence Schema".p_only (id int PRIMARY KEY, tok fencing.token);
SET search_path = "Fence Schema", public;
SELECT fencing.protect('public.p_only', allow_equal => true);
SELECT * FROM fencing.protected WHERE tbl IN ('public.p_only'::regclass, '"Fence Schema".p_only'::regclass);
RESET search_path;

---------------------------------------------------------------------------
-- Tables with dropped columns (before and after the token column).
---------------------------------------------------------------------------
CREATE TABLE p_drop (a int, b int, id int PRIMARY KEY, c int, fence_token fencing.token, d int, v text);
ALTER TABLE p_drop DROP COLUMN a, DROP COLUMN c, DROP COLUMN d;
SELECT fencing.protect('p_drop');
INSERT INTO p_drop (id, b, fence_token, v) VALUES (1, 0, 10, 'a');
UPDATE p_drop SET fence_token = 10;
UPDATE p_drop SET fence_token = 12, v = 'b' RETURNING *;
-- A dropped column named fence_token is not found.
CREATE TABLE p_drop2 (id int, fence_token fencing.token);
ALTER TABLE p_drop2 DROP COLUMN fence_token;
SELECT fencing.protect('p_drop2');
\echo :SQLSTATE

---------------------------------------------------------------------------
-- Misuse of fencing.enforce(): a clear error naming the trigger and table.
---------------------------------------------------------------------------
CREATE TABLE p_misuse (id int PRIMARY KEY, fence_token fencing.token, v text);
INSERT INTO p_misuse VALUES (1, 10, 'a');
-- statement-level
CREATE TRIGGER bad_stmt BEFORE UPDATE ON p_misuse FOR EACH STATEMENT
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_stmt ON p_misuse;
-- AFTER ROW
CREATE TRIGGER bad_after AFTER UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_after ON p_misuse;
-- AFTER statement
CREATE TRIGGER bad_after_stmt AFTER INSERT ON p_misuse FOR EACH STATEMENT
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false');
INSERT INTO p_misuse VALUES (2, 10, 'b');
\echo :SQLSTATE
DROP TRIGGER bad_after_stmt ON p_misuse;
-- TRUNCATE
CREATE TRIGGER bad_truncate BEFORE TRUNCATE ON p_misuse
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false');
TRUNCATE p_misuse;
\echo :SQLSTATE
DROP TRIGGER bad_truncate ON p_misuse;
-- INSTEAD OF on a view
CREATE VIEW p_misuse_v AS SELECT * FROM p_misuse;
CREATE TRIGGER bad_instead INSTEAD OF UPDATE ON p_misuse_v FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false');
UPDATE p_misuse_v SET fence_token = 11;
\echo :SQLSTATE
DROP VIEW p_misuse_v;
-- bad arguments
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW EXECUTE FUNCTION fencing.enforce();
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'false', 'false', 'extra');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'maybe', 'error', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'ignore', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', '', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'sometimes');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('nope', 'false', 'error', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
CREATE TRIGGER bad_args BEFORE UPDATE ON p_misuse FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('v', 'false', 'error', 'false', 'false');
UPDATE p_misuse SET fence_token = 11;
\echo :SQLSTATE
DROP TRIGGER bad_args ON p_misuse;
-- Called directly, not as a trigger.
SELECT fencing.enforce();
\echo :SQLSTATE
-- Nothing was written by any of the above.
SELECT * FROM p_misuse;

---------------------------------------------------------------------------
-- Everything protected by this file, then clean up.
---------------------------------------------------------------------------
SELECT * FROM fencing.protected
 WHERE tbl::text ~ '^(p_|pt|"Fence Schema")' ORDER BY tbl::text;
DROP TABLE p_only, p_two, p_two_bad, p_none, p_rev, p_big, p_text, p_int, p_num, p_dom, p_owned,
           pt, pt_us, p_drop, p_drop2, p_misuse CASCADE;
DROP DOMAIN p_tokdom;
DROP SEQUENCE p_seq;
DROP SCHEMA "Fence Schema" CASCADE;
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing20_owner, regress_fencing20_other, regress_fencing20_member;
DROP ROLE regress_fencing20_member;
DROP ROLE regress_fencing20_owner;
DROP ROLE regress_fencing20_other;
