-- fencing.reached_tables(tbl): the tables a write through tbl reaches, the
-- one walk of pg_inherits behind protect() (src/pg/inheritance.cpp): tbl
-- first, then its partitions and inheritance children at any depth, each
-- once (a child of two parents in the tree too), with what install_check
-- reads of them. For the table's owner (42501 otherwise).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never
\set VERBOSITY default

-- Legacy inheritance with a diamond and a second level, a temporary child
-- and one in another schema.
CREATE SCHEMA rt_other;
CREATE TABLE rt_root (id int PRIMARY KEY, fence_token fencing.token);
CREATE TABLE rt_a (PRIMARY KEY (id)) INHERITS (rt_root);
CREATE TABLE rt_b (PRIMARY KEY (id)) INHERITS (rt_root);
CREATE TABLE rt_ab (PRIMARY KEY (id)) INHERITS (rt_a, rt_b);
CREATE TABLE rt_other.rt_a1 (PRIMARY KEY (id)) INHERITS (rt_a);
CREATE TEMP TABLE rt_tmp () INHERITS (rt_b);
SELECT t.n = 1 AS first, t.relname, t.nspname = 'rt_other' AS other_schema, t.relkind, t.relispartition,
       t.relpersistence
  FROM fencing.reached_tables('rt_root') WITH ORDINALITY
       AS t(oid, relname, nspname, relkind, relispartition, relpersistence, n)
 ORDER BY t.n = 1 DESC, t.relname;
SELECT count(*) AS reached, count(DISTINCT t.oid) AS distinct_oids FROM fencing.reached_tables('rt_root') t;
-- A level after the one above it: rt_a1 and rt_ab after rt_a and rt_b.
SELECT max(t.n) FILTER (WHERE t.relname IN ('rt_a', 'rt_b'))
       < min(t.n) FILTER (WHERE t.relname IN ('rt_ab', 'rt_a1')) AS by_level
  FROM fencing.reached_tables('rt_root') WITH ORDINALITY
       AS t(oid, relname, nspname, relkind, relispartition, relpersistence, n);
-- From the middle of the tree: only what is below it.
SELECT t.relname FROM fencing.reached_tables('rt_b') t ORDER BY t.relname;
-- A table without children: itself.
SELECT t.relname FROM fencing.reached_tables('rt_ab') t;

-- Partitions and sub-partitions, an unlogged one.
CREATE TABLE rtp (id int, region text, fence_token fencing.token, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE rtp_eu PARTITION OF rtp FOR VALUES IN ('eu');
CREATE TABLE rtp_us PARTITION OF rtp FOR VALUES IN ('us', 'ca') PARTITION BY LIST (region);
CREATE UNLOGGED TABLE rtp_ca PARTITION OF rtp_us FOR VALUES IN ('ca');
SELECT t.oid = 'rtp'::regclass AS itself, t.relname, t.relkind, t.relispartition, t.relpersistence
  FROM fencing.reached_tables('rtp') t ORDER BY t.oid <> 'rtp'::regclass, t.relname;
-- A detached partition is no longer reached.
ALTER TABLE rtp DETACH PARTITION rtp_eu;
SELECT t.relname FROM fencing.reached_tables('rtp') t ORDER BY t.relname;

-- Errors: a table that does not exist, a NULL (STRICT: no rows), a caller
-- that does not own the table.
SELECT * FROM fencing.reached_tables(0);
\echo :SQLSTATE
SELECT count(*) FROM fencing.reached_tables(NULL);
CREATE ROLE regress_fencing28_other;
GRANT USAGE ON SCHEMA fencing TO regress_fencing28_other;
GRANT SELECT ON rt_root TO regress_fencing28_other;
SET ROLE regress_fencing28_other;
SELECT * FROM fencing.reached_tables('rt_root');
\echo :SQLSTATE
RESET ROLE;
-- A member of the owning role counts as the owner, as for protect().
CREATE ROLE regress_fencing28_owner;
CREATE ROLE regress_fencing28_member IN ROLE regress_fencing28_owner;
GRANT USAGE ON SCHEMA fencing TO regress_fencing28_member;
ALTER TABLE rtp_eu OWNER TO regress_fencing28_owner;
SET ROLE regress_fencing28_member;
SELECT t.relname FROM fencing.reached_tables('rtp_eu') t;
RESET ROLE;

SET client_min_messages = warning;
DROP TABLE rt_root, rtp, rtp_eu CASCADE;
DROP SCHEMA rt_other CASCADE;
RESET client_min_messages;
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing28_other, regress_fencing28_member;
DROP ROLE regress_fencing28_other, regress_fencing28_member, regress_fencing28_owner;
