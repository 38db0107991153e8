-- Coverage: every table whose rows a write through a protected table reaches
-- is checked, whatever DDL adds it later; a table that leaves a protected
-- table keeps its check until it is unprotected itself; fencing.protected
-- lists every table that carries a check of its own.
--  * legacy inheritance: CREATE TABLE ... INHERITS and ALTER TABLE ...
--    INHERIT after protect(), grandchildren, NO INHERIT, protect() of a
--    table that already has children, unprotect of parent and child,
--    children protected with other settings, multiple inheritance, foreign
--    tables;
--  * partitions: CREATE TABLE ... PARTITION OF (cloned check), ATTACH of a
--    table holding tokens newer than the counter (the counter moves past
--    them) or past the clock bound (refused), ATTACH of a protected table, DETACH
--    (the detached table stays protected), sub-partitions, re-attach;
--  * the event triggers that do it: extension members, and what they need
--    from the role that runs the DDL.
-- Tokens are literals or relative to the counter (whose values are not
-- printed: errors that would show them are terse).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never

-- The event triggers belong to the extension (dropped with it, recreated by
-- CREATE EXTENSION, never dumped on their own).
SELECT e.evtname, e.evtevent, e.evtenabled, e.evtfoid::regproc AS function, e.evttags
  FROM pg_event_trigger e
  JOIN pg_depend d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = e.oid AND d.deptype = 'e'
  JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'fencing'
 ORDER BY e.evtname;

---------------------------------------------------------------------------
-- Legacy inheritance: a child created after protect() is checked with the
-- parent's settings, and listed.
---------------------------------------------------------------------------
CREATE TABLE ih (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ih', on_stale => 'error', allow_equal => true);
CREATE TABLE ih_c (PRIMARY KEY (id)) INHERITS (ih);
SELECT * FROM fencing.protected WHERE tbl::text LIKE 'ih%' ORDER BY tbl::text COLLATE "C";
INSERT INTO ih_c VALUES (1, 100, 'child');
-- Stale writes through the parent reach the child's check.
UPDATE ih SET fence_token = 5, v = 'stale' WHERE id = 1;
DELETE FROM ih WHERE id = 1;
INSERT INTO ih_c VALUES (2, NULL, 'no token');
-- allow_equal came with the settings.
UPDATE ih SET fence_token = 100, v = 'equal' WHERE id = 1;
UPDATE ih SET fence_token = 101, v = 'newer' WHERE id = 1;
SELECT tableoid::regclass, * FROM ih ORDER BY id;

-- A grandchild, created through the child.
CREATE TABLE ih_gc (PRIMARY KEY (id)) INHERITS (ih_c);
SELECT tbl FROM fencing.protected WHERE tbl::text LIKE 'ih%' ORDER BY tbl::text COLLATE "C";
INSERT INTO ih_gc VALUES (3, 30, 'grandchild');
UPDATE ih SET fence_token = 29 WHERE id = 3;

-- A child of a protected parent is protected through it: its own protect()
-- and unprotect() are refused (they would change what the parent promises).
SELECT fencing.protect('ih_c', on_stale => 'skip');
SELECT fencing.unprotect('ih_gc');

-- ALTER TABLE ... INHERIT: the table joins with the parent's settings, and
-- the counter moves past the tokens it holds (they are newer than any token
-- issued so far).
CREATE TABLE ih_add (id int PRIMARY KEY, fence_token fencing.token, v text);
INSERT INTO ih_add SELECT 7, last_value + 500000, 'ahead of the counter' FROM fencing.token_seq;
ALTER TABLE ih_add INHERIT ih;
SELECT * FROM fencing.protected WHERE tbl = 'ih_add'::regclass;
BEGIN;
SELECT fencing.use(fencing.acquire_xact('cov:ih_add')) IS NOT NULL AS acquired;
UPDATE ih SET v = 'fresh token' WHERE id = 7;
COMMIT;
SELECT v FROM ih WHERE id = 7;
-- Its own children come along.
CREATE TABLE ih_tree (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE ih_tree_c (PRIMARY KEY (id)) INHERITS (ih_tree);
ALTER TABLE ih_tree INHERIT ih;
SELECT tbl FROM fencing.protected WHERE tbl::text LIKE 'ih_tree%' ORDER BY tbl::text COLLATE "C";
INSERT INTO ih_tree_c VALUES (8, NULL, 'no token');

-- A table protected with other settings cannot join; with the same ones it can.
CREATE TABLE ih_other (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ih_other', on_stale => 'skip');
ALTER TABLE ih_other INHERIT ih;
SELECT fencing.protect('ih_other', allow_equal => true);
ALTER TABLE ih_other INHERIT ih;
SELECT * FROM fencing.protected WHERE tbl = 'ih_other'::regclass;

-- Multiple inheritance from tables protected differently is refused.
CREATE TABLE ih_p2 (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ih_p2', fence_deletes => false);
CREATE TABLE ih_both (PRIMARY KEY (id)) INHERITS (ih, ih_p2);
-- (1.2) With the same settings and tombstones too: the child would be in
-- two protected hierarchies (25_tombstones).
SELECT fencing.protect('ih_p2', allow_equal => true);
CREATE TABLE ih_both (PRIMARY KEY (id)) INHERITS (ih, ih_p2);
-- Without tombstones, with the same settings, it is accepted.
CREATE TABLE ih_n1 (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE ih_n2 (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ih_n1', tombstones => false);
SELECT fencing.protect('ih_n2', tombstones => false);
CREATE TABLE ih_both (PRIMARY KEY (id)) INHERITS (ih_n1, ih_n2);
SELECT * FROM fencing.protected WHERE tbl = 'ih_both'::regclass;
-- ... and protect() of one parent cannot then make them differ.
SELECT fencing.protect('ih_n2', tombstones => false, on_stale => 'skip');

-- A child always has the token column, with its type: PostgreSQL refuses a
-- table that lacks it or has another type.
CREATE TABLE ih_lack (id int PRIMARY KEY, v text);
ALTER TABLE ih_lack INHERIT ih;
CREATE TABLE ih_text (id int PRIMARY KEY, fence_token text, v text);
ALTER TABLE ih_text INHERIT ih;
CREATE TABLE pa_lack (id int NOT NULL, region text NOT NULL, v text);
DROP TABLE ih_lack, ih_text;

-- A foreign table cannot be an inheritance child of a protected table.
CREATE FOREIGN DATA WRAPPER cov_fdw;
CREATE SERVER cov_srv FOREIGN DATA WRAPPER cov_fdw;
CREATE FOREIGN TABLE ih_ft (id int NOT NULL, fence_token fencing.token, v text) SERVER cov_srv;
ALTER FOREIGN TABLE ih_ft INHERIT ih;
CREATE FOREIGN TABLE ih_ft2 () INHERITS (ih) SERVER cov_srv;

-- NO INHERIT: the table leaves and keeps its check.
ALTER TABLE ih_add NO INHERIT ih;
SELECT * FROM fencing.protected WHERE tbl = 'ih_add'::regclass;
\set VERBOSITY terse
UPDATE ih_add SET fence_token = 1 WHERE id = 7;
\set VERBOSITY default
-- Now it may be unprotected.
SELECT fencing.unprotect('ih_add');
SELECT count(*) FROM fencing.protected WHERE tbl = 'ih_add'::regclass;

-- unprotect() of the parent removes its own check only: its children keep
-- theirs (no child is left writable through a protected table, and none
-- loses its check unless unprotected itself).
SELECT fencing.unprotect('ih');
SELECT tbl FROM fencing.protected WHERE tbl::text LIKE 'ih%' ORDER BY tbl::text COLLATE "C";
UPDATE ih SET fence_token = 1 WHERE id = 1;
SELECT fencing.unprotect('ih_c');
SELECT tbl FROM fencing.protected WHERE tbl::text LIKE 'ih%' ORDER BY tbl::text COLLATE "C";

-- protect() of a table that already has children protects them too (with
-- its settings, replacing theirs), and moves the counter past all their
-- tokens.
CREATE TABLE ih2 (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE ih2_c (PRIMARY KEY (id)) INHERITS (ih2);
CREATE TABLE ih2_gc (PRIMARY KEY (id)) INHERITS (ih2_c);
SELECT fencing.protect('ih2_gc', on_stale => 'skip');
INSERT INTO ih2_gc SELECT 1, last_value + 500000, 'ahead' FROM fencing.token_seq;
SELECT fencing.protect('ih2');
SELECT * FROM fencing.protected WHERE tbl::text LIKE 'ih2%' ORDER BY tbl::text COLLATE "C";
BEGIN;
SELECT fencing.use(fencing.acquire_xact('cov:ih2')) IS NOT NULL AS acquired;
UPDATE ih2 SET v = 'fresh token' WHERE id = 1;
COMMIT;
\set VERBOSITY terse
UPDATE ih2 SET fence_token = 1 WHERE id = 1;
\set VERBOSITY default

---------------------------------------------------------------------------
-- Partitions.
---------------------------------------------------------------------------
CREATE TABLE pa (id int, region text, fence_token fencing.token, v text, PRIMARY KEY (region, id))
    PARTITION BY LIST (region);
SELECT fencing.protect('pa');
-- PARTITION OF: PostgreSQL clones the check (also into sub-partitions).
CREATE TABLE pa_eu PARTITION OF pa FOR VALUES IN ('eu');
CREATE TABLE pa_sub PARTITION OF pa FOR VALUES IN ('x', 'y') PARTITION BY LIST (region);
CREATE TABLE pa_x PARTITION OF pa_sub FOR VALUES IN ('x');
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid::regclass::text LIKE 'pa%' ORDER BY tgrelid::regclass::text COLLATE "C";
INSERT INTO pa VALUES (1, 'eu', 10, 'eu'), (1, 'x', 10, 'x');
UPDATE pa SET fence_token = 5;

-- ATTACH of a table holding tokens newer than the counter: the counter
-- moves past them, so a token acquired afterwards may write its rows.
CREATE TABLE pa_us (id int NOT NULL, region text NOT NULL, fence_token fencing.token, v text);
INSERT INTO pa_us SELECT 1, 'us', last_value + 500000, 'ahead of the counter' FROM fencing.token_seq;
ALTER TABLE pa ATTACH PARTITION pa_us FOR VALUES IN ('us');
ALTER TABLE pa ATTACH PARTITION pa_lack FOR VALUES IN ('lack');
DROP TABLE pa_lack;
BEGIN;
SELECT fencing.use(fencing.acquire_xact('cov:pa_us')) IS NOT NULL AS acquired;
UPDATE pa SET v = 'fresh token' WHERE region = 'us';
COMMIT;
SELECT region, v FROM pa WHERE region = 'us';
-- Into a sub-partition too.
CREATE TABLE pa_y (id int NOT NULL, region text NOT NULL, fence_token fencing.token, v text);
INSERT INTO pa_y SELECT 1, 'y', last_value + 500000, 'ahead of the counter' FROM fencing.token_seq;
ALTER TABLE pa_sub ATTACH PARTITION pa_y FOR VALUES IN ('y');
BEGIN;
SELECT fencing.use(fencing.acquire_xact('cov:pa_y')) IS NOT NULL AS acquired;
UPDATE pa SET v = 'fresh token' WHERE region = 'y';
COMMIT;
SELECT region, v FROM pa WHERE region = 'y';
-- A table holding a token past the clock bound (2^52 here) cannot be attached (the counter every
-- resource shares would have to move there).
CREATE TABLE pa_big (id int NOT NULL, region text NOT NULL, fence_token bigint, v text);
INSERT INTO pa_big VALUES (1, 'big', 4503599627370497, 'past the bound');
CREATE TABLE pa_bigp (id int, region text, fence_token bigint, v text, PRIMARY KEY (region, id))
    PARTITION BY LIST (region);
SELECT fencing.protect('pa_bigp');
-- (The message names the bound, which moves with the clock: SQLSTATE only.)
\set VERBOSITY sqlstate
ALTER TABLE pa_bigp ATTACH PARTITION pa_big FOR VALUES IN ('big');
\set VERBOSITY default
SELECT count(*) FROM pg_inherits WHERE inhrelid = 'pa_big'::regclass;

-- ATTACH of a table protected on its own: the partitioned table's check
-- takes the place of its own.
CREATE TABLE pa_ap (id int NOT NULL, region text NOT NULL, fence_token fencing.token, v text,
                    PRIMARY KEY (region, id));
SELECT fencing.protect('pa_ap', on_stale => 'skip');
ALTER TABLE pa ATTACH PARTITION pa_ap FOR VALUES IN ('ap');
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid = 'pa_ap'::regclass;
SELECT count(*) FROM fencing.protected WHERE tbl = 'pa_ap'::regclass;
INSERT INTO pa VALUES (1, 'ap', 10, 'ap');
UPDATE pa SET fence_token = 5 WHERE region = 'ap';

-- DETACH: the detached table keeps the check, now its own, and is listed.
ALTER TABLE pa DETACH PARTITION pa_eu;
SELECT * FROM fencing.protected WHERE tbl = 'pa_eu'::regclass;
UPDATE pa_eu SET fence_token = 5;
INSERT INTO pa_eu VALUES (2, 'eu', NULL, 'no token');
-- A detached sub-partitioned table keeps it in every partition.
ALTER TABLE pa DETACH PARTITION pa_sub;
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid::regclass::text LIKE 'pa_sub%'
     OR tgname = '~fencing_enforce' AND tgrelid IN ('pa_x'::regclass, 'pa_y'::regclass) ORDER BY tgrelid::regclass::text COLLATE "C";
UPDATE pa_sub SET fence_token = 5;
-- Attached again, it takes the partitioned table's check again.
ALTER TABLE pa ATTACH PARTITION pa_eu FOR VALUES IN ('eu');
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid = 'pa_eu'::regclass;
-- DETACH ... CONCURRENTLY too.
ALTER TABLE pa DETACH PARTITION pa_us CONCURRENTLY;
SELECT * FROM fencing.protected WHERE tbl = 'pa_us'::regclass;
\set VERBOSITY terse
UPDATE pa_us SET fence_token = 5;
\set VERBOSITY default
-- A partition of an unprotected table is detached as it was.
SELECT fencing.unprotect('pa');
ALTER TABLE pa DETACH PARTITION pa_ap;
SELECT count(*) FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid = 'pa_ap'::regclass;
-- protect() of a partitioned table whose partition is protected on its own:
-- the partitioned table's check takes its place.
SELECT fencing.protect('pa_eu', on_stale => 'skip');
SELECT fencing.protect('pa');
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned, fencing.trigger_args(tgargs) AS args
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid = 'pa_eu'::regclass;

---------------------------------------------------------------------------
-- Roles. The DDL's own role does the work: it needs nothing of fencing
-- (not even USAGE on its schema) to add a child to a table it owns, and a
-- partition it may not install a check on cannot be detached from a
-- protected table.
---------------------------------------------------------------------------
CREATE ROLE regress_fencing24_owner;
CREATE ROLE regress_fencing24_other;
GRANT CREATE ON SCHEMA public TO regress_fencing24_owner, regress_fencing24_other;
CREATE TABLE ro (id int PRIMARY KEY, fence_token fencing.token, v text);
ALTER TABLE ro OWNER TO regress_fencing24_owner;
SELECT fencing.protect('ro');
SET ROLE regress_fencing24_owner;
CREATE TABLE ro_c (PRIMARY KEY (id)) INHERITS (ro);
INSERT INTO ro_c VALUES (1, NULL, 'no token');
RESET ROLE;
SELECT tbl FROM fencing.protected WHERE tbl::text LIKE 'ro%' ORDER BY tbl::text COLLATE "C";
CREATE TABLE rp (id int PRIMARY KEY, fence_token fencing.token, v text) PARTITION BY RANGE (id);
CREATE TABLE rp1 (id int PRIMARY KEY, fence_token fencing.token, v text);
ALTER TABLE rp OWNER TO regress_fencing24_owner;
ALTER TABLE rp1 OWNER TO regress_fencing24_other;
GRANT regress_fencing24_other TO regress_fencing24_owner;
SET ROLE regress_fencing24_owner;
ALTER TABLE rp ATTACH PARTITION rp1 FOR VALUES FROM (0) TO (10);
RESET ROLE;
REVOKE regress_fencing24_other FROM regress_fencing24_owner;
SELECT fencing.protect('rp');
SET ROLE regress_fencing24_owner;
ALTER TABLE rp DETACH PARTITION rp1;
RESET ROLE;
SELECT count(*) FROM pg_inherits WHERE inhrelid = 'rp1'::regclass;

---------------------------------------------------------------------------
-- Unrelated DDL is left alone.
---------------------------------------------------------------------------
CREATE TABLE un (id int PRIMARY KEY, v text);
CREATE TABLE un_c () INHERITS (un);
ALTER TABLE un ADD COLUMN w int;
CREATE TABLE un_p (id int) PARTITION BY RANGE (id);
CREATE TABLE un_p1 PARTITION OF un_p FOR VALUES FROM (0) TO (10);
ALTER TABLE un_p DETACH PARTITION un_p1;
SELECT count(*) FROM pg_trigger WHERE tgrelid::regclass::text LIKE 'un%';

DROP TABLE un_p1, un_p, un_c, un;
DROP TABLE rp, rp1, ro CASCADE;
DROP TABLE pa, pa_ap, pa_us, pa_sub, pa_bigp, pa_big;
DROP TABLE ih2 CASCADE;
DROP TABLE ih, ih_p2, ih_add, ih_other, ih_tree, ih_n1, ih_n2 CASCADE;
DROP FOREIGN TABLE ih_ft;
DROP SERVER cov_srv;
DROP FOREIGN DATA WRAPPER cov_fdw;
REVOKE CREATE ON SCHEMA public FROM regress_fencing24_owner, regress_fencing24_other;
DROP ROLE regress_fencing24_owner;
DROP ROLE regress_fencing24_other;
