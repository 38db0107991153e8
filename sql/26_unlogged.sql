-- Unlogged tables cannot be protected: crash recovery empties them without
-- firing triggers and without tombstones, so a stale worker's write would
-- create their rows again after a crash with a token older than the one they
-- held. Refused: protect() of an unlogged table, or of a table with an
-- unlogged partition or inheritance child; ALTER TABLE ... SET UNLOGGED of
-- a protected table, a partition or a child; an unlogged table created as,
-- attached as, or added as a partition or child of a protected table. A
-- check that reaches an unlogged table anyway (DDL while event triggers do
-- not fire, a trigger created by hand) refuses every write to it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never
\set VERBOSITY default

-- protect() of an unlogged table.
CREATE UNLOGGED TABLE ul (id int PRIMARY KEY, fence_token fencing.token);
SELECT fencing.protect('ul');
\echo :SQLSTATE
SELECT fencing.protect('ul', tombstones => false);
\echo :SQLSTATE
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ul'::regclass;

-- A protected table cannot become unlogged.
CREATE TABLE lg (id int PRIMARY KEY, fence_token fencing.token);
SELECT fencing.protect('lg');
ALTER TABLE lg SET UNLOGGED;
\echo :SQLSTATE
SELECT relpersistence FROM pg_class WHERE oid = 'lg'::regclass;
-- Unprotected, it can; protected again, it is refused.
SELECT fencing.unprotect('lg');
ALTER TABLE lg SET UNLOGGED;
SELECT fencing.protect('lg');
\echo :SQLSTATE
ALTER TABLE lg SET LOGGED;
SELECT fencing.protect('lg');

-- Partitions.
CREATE TABLE pt (id int, fence_token fencing.token, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('pt');
CREATE UNLOGGED TABLE pt2 PARTITION OF pt FOR VALUES FROM (100) TO (200);
\echo :SQLSTATE
ALTER TABLE pt1 SET UNLOGGED;
\echo :SQLSTATE
CREATE UNLOGGED TABLE pt3 (id int, fence_token fencing.token, PRIMARY KEY (id));
ALTER TABLE pt ATTACH PARTITION pt3 FOR VALUES FROM (200) TO (300);
\echo :SQLSTATE
SELECT c.relname, c.relpersistence FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'pt'::regclass ORDER BY 1;
-- A partitioned table with an unlogged partition cannot be protected.
SELECT fencing.unprotect('pt');
ALTER TABLE pt ATTACH PARTITION pt3 FOR VALUES FROM (200) TO (300);
SELECT fencing.protect('pt');
\echo :SQLSTATE
ALTER TABLE pt3 SET LOGGED;
SELECT fencing.protect('pt');

-- Inheritance children.
CREATE TABLE ip (id int PRIMARY KEY, fence_token fencing.token);
CREATE TABLE ic1 (PRIMARY KEY (id)) INHERITS (ip);
SELECT fencing.protect('ip');
CREATE UNLOGGED TABLE ic2 (PRIMARY KEY (id)) INHERITS (ip);
\echo :SQLSTATE
ALTER TABLE ic1 SET UNLOGGED;
\echo :SQLSTATE
CREATE UNLOGGED TABLE ic3 (id int PRIMARY KEY, fence_token fencing.token);
ALTER TABLE ic3 INHERIT ip;
\echo :SQLSTATE
SELECT count(*) FROM pg_inherits WHERE inhparent = 'ip'::regclass;
-- A parent with an unlogged child cannot be protected.
SELECT fencing.unprotect('ip');
SELECT fencing.unprotect('ic1');
ALTER TABLE ic3 INHERIT ip;
SELECT fencing.protect('ip');
\echo :SQLSTATE
SELECT count(*) FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid IN ('ip'::regclass, 'ic1'::regclass, 'ic3'::regclass);

-- A check on an unlogged table however it got there refuses every write:
-- made unlogged while event triggers do not fire, or created by hand.
SET session_replication_role = replica;
ALTER TABLE lg SET UNLOGGED;
RESET session_replication_role;
INSERT INTO lg VALUES (1, 10);
\echo :SQLSTATE
ALTER TABLE lg SET LOGGED;
INSERT INTO lg VALUES (1, 10);
CREATE TRIGGER "~fencing_enforce" BEFORE INSERT OR UPDATE OR DELETE ON ul FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'false');
INSERT INTO ul VALUES (1, 10);
\echo :SQLSTATE
SELECT count(*) FROM ul;

-- Unprotected tables are left alone.
CREATE TABLE free_t (id int);
ALTER TABLE free_t SET UNLOGGED;
CREATE UNLOGGED TABLE free_u (id int);
ALTER TABLE free_u SET LOGGED;

DROP TABLE ul, lg, pt, ip CASCADE;
DROP TABLE free_t, free_u;
