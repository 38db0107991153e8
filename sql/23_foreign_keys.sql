-- Foreign keys into a protected table. A referential action (ON UPDATE
-- CASCADE, ON DELETE SET NULL / SET DEFAULT / CASCADE) writes the protected
-- rows, and is judged like any other write: with the transaction's token.
-- Without one the write to the referenced table fails (23T01, nothing
-- changes); with a newer one (fencing.use(), SET LOCAL fencing.token) the
-- cascaded rows are accepted and stamped with it. Exempting referential
-- actions would let any code that runs inside one (a trigger of the
-- referencing tables, a cascade of a table an ordinary role created) write
-- protected rows unjudged.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

CREATE TABLE fk_parent (id int PRIMARY KEY, v text);
CREATE TABLE fk_child (id int PRIMARY KEY,
                       parent_id int REFERENCES fk_parent (id) ON UPDATE CASCADE ON DELETE SET NULL,
                       fence_token fencing.token, v text);
CREATE TABLE fk_child_del (id int PRIMARY KEY,
                           parent_id int REFERENCES fk_parent (id) ON DELETE CASCADE,
                           fence_token fencing.token);
SELECT fencing.protect('fk_child');
SELECT fencing.protect('fk_child_del');
INSERT INTO fk_parent VALUES (1, 'p1'), (2, 'p2'), (3, 'p3');
INSERT INTO fk_child VALUES (10, 1, 100, 'a'), (20, 2, 200, 'b');
INSERT INTO fk_child_del VALUES (30, 3, 300), (31, 3, 310);

-- Without a transaction token: refused, nothing changes.
\set VERBOSITY terse
UPDATE fk_parent SET id = 11 WHERE id = 1;
DELETE FROM fk_parent WHERE id = 2;
DELETE FROM fk_parent WHERE id = 3;
\set VERBOSITY default
SELECT * FROM fk_parent ORDER BY id;
SELECT * FROM fk_child ORDER BY id;
SELECT * FROM fk_child_del ORDER BY id;

-- With a token older than a row's: refused too.
BEGIN;
SELECT fencing.use(150);
\set VERBOSITY terse
UPDATE fk_parent SET id = 12 WHERE id = 2;
\set VERBOSITY default
ROLLBACK;

-- With a newer token: the cascade is accepted and stamps the rows.
BEGIN;
SELECT fencing.use(400);
UPDATE fk_parent SET id = 11 WHERE id = 1;
DELETE FROM fk_parent WHERE id = 2;
DELETE FROM fk_parent WHERE id = 3;
COMMIT;
SELECT * FROM fk_child ORDER BY id;
SELECT * FROM fk_child_del ORDER BY id;

-- Code running inside a referential action gets no pass: a trigger on a
-- referencing table that writes a protected row without a token is refused.
CREATE TABLE fk_victim (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('fk_victim');
INSERT INTO fk_victim VALUES (1, 'fresh', 500);
CREATE TABLE fk_a (id int PRIMARY KEY);
CREATE TABLE fk_b (id int REFERENCES fk_a ON DELETE CASCADE);
CREATE FUNCTION fk_b_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fk_victim SET v = 'stale via cascade' WHERE id = 1;
    RETURN OLD;
END $$;
CREATE TRIGGER fk_b_trg BEFORE DELETE ON fk_b FOR EACH ROW EXECUTE FUNCTION fk_b_trg();
INSERT INTO fk_a VALUES (1);
INSERT INTO fk_b VALUES (1);
\set VERBOSITY terse
DELETE FROM fk_a WHERE id = 1;
\set VERBOSITY default
SELECT * FROM fk_victim;

DROP TABLE fk_child, fk_child_del, fk_parent, fk_victim, fk_b, fk_a;
DROP FUNCTION fk_b_trg();

-- Privileges. PostgreSQL runs a referential action as the referencing
-- table's owner. A token the action takes from fencing.token is the choice of
-- the role whose statement set the action off: it needs INSERT/UPDATE on the
-- token column (UPDATE, for the tombstone of a fenced DELETE) as well, as if
-- it had written the rows itself. A role with privileges on the referenced
-- table only can still change it when the rows carry no token, but cannot
-- stamp one of its choosing into them.
\set SHOW_CONTEXT never
CREATE ROLE regress_fencing23_owner;
CREATE ROLE regress_fencing23_parent;
CREATE ROLE regress_fencing23_writer;
GRANT USAGE ON SCHEMA fencing TO regress_fencing23_owner, regress_fencing23_writer;
GRANT CREATE ON SCHEMA public TO regress_fencing23_owner;
SET ROLE regress_fencing23_owner;
CREATE TABLE fk_cust (id int PRIMARY KEY, name text);
CREATE TABLE fk_ord (id int PRIMARY KEY,
                     cust_id int REFERENCES fk_cust ON UPDATE CASCADE ON DELETE CASCADE,
                     amount int, fence_token fencing.token);
CREATE TABLE fk_ord_null (id int PRIMARY KEY,
                          cust_id int REFERENCES fk_cust ON DELETE SET NULL,
                          fence_token fencing.token);
SELECT fencing.protect('fk_ord');
SELECT fencing.protect('fk_ord_null');
INSERT INTO fk_cust VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
BEGIN;
SET LOCAL fencing.token = '1000';
INSERT INTO fk_ord VALUES (10, 1, 5), (20, 2, 5);
INSERT INTO fk_ord_null VALUES (30, 3), (40, 4);
COMMIT;
GRANT SELECT, UPDATE, DELETE ON fk_cust TO regress_fencing23_parent, regress_fencing23_writer;
GRANT UPDATE (fence_token) ON fk_ord, fk_ord_null TO regress_fencing23_writer;
RESET ROLE;

-- A role with privileges on fk_cust only: ON UPDATE CASCADE, ON DELETE
-- CASCADE (with tombstones) and ON DELETE SET NULL refuse its token.
SET ROLE regress_fencing23_parent;
BEGIN;
SET LOCAL fencing.token = '9223372036854775807';
UPDATE fk_cust SET id = 11 WHERE id = 1;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '9223372036854775806';
DELETE FROM fk_cust WHERE id = 2;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '9223372036854775805';
DELETE FROM fk_cust WHERE id = 3;
COMMIT;
-- Without a transaction token, as for every role: 23T01, nothing changes.
\set VERBOSITY terse
UPDATE fk_cust SET id = 11 WHERE id = 1;
DELETE FROM fk_cust WHERE id = 2;
DELETE FROM fk_cust WHERE id = 3;
\set VERBOSITY default
-- The detail names the key and the stored token although this role may not
-- read fk_ord: the action runs as fk_ord's owner, who may (a unique
-- violation in the action shows its key alike).
DELETE FROM fk_cust WHERE id = 2;
RESET ROLE;
SELECT * FROM fk_cust ORDER BY id;
SELECT * FROM fk_ord ORDER BY id;
SELECT * FROM fk_ord_null ORDER BY id;
SELECT count(*) FROM fencing.tombstones WHERE tbl = 'fk_ord'::regclass;

-- A role granted UPDATE on the token column: its cascades are accepted.
SET ROLE regress_fencing23_writer;
BEGIN;
SELECT fencing.use(2000);
UPDATE fk_cust SET id = 11 WHERE id = 1;
DELETE FROM fk_cust WHERE id = 3;
COMMIT;
RESET ROLE;
-- The owner's cascades too.
SET ROLE regress_fencing23_owner;
BEGIN;
SELECT fencing.use(3000);
DELETE FROM fk_cust WHERE id = 2;
DELETE FROM fk_cust WHERE id = 4;
COMMIT;
RESET ROLE;
SELECT * FROM fk_cust ORDER BY id;
SELECT * FROM fk_ord ORDER BY id;
SELECT * FROM fk_ord_null ORDER BY id;
SELECT token FROM fencing.tombstones WHERE tbl = 'fk_ord'::regclass;


-- Anything that runs within a referential action is checked so: here a
-- cascade through a table that is not protected into one that is (both
-- actions run as their owner), a trigger that the action fires on the
-- referencing table, and a referential action set off inside a SECURITY
-- DEFINER function, where the session's role is checked, not the function's
-- owner.
SET ROLE regress_fencing23_owner;
CREATE TABLE fk_note (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('fk_note');
INSERT INTO fk_note VALUES (1, 'note', 4000);
CREATE TABLE fk_tagged (id int PRIMARY KEY, cust_id int REFERENCES fk_cust ON DELETE SET NULL);
CREATE FUNCTION fk_tagged_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fk_note SET v = 'untagged ' || OLD.id WHERE id = 1;
    RETURN NEW;
END $$;
CREATE TRIGGER fk_tagged_note BEFORE UPDATE ON fk_tagged FOR EACH ROW EXECUTE FUNCTION fk_tagged_note();
INSERT INTO fk_cust VALUES (6, 'f');
INSERT INTO fk_tagged VALUES (1, 6);
CREATE TABLE fk_mid (id int PRIMARY KEY, cust_id int UNIQUE REFERENCES fk_cust ON UPDATE CASCADE);
CREATE TABLE fk_leaf (id int PRIMARY KEY, mid_cust int REFERENCES fk_mid (cust_id) ON UPDATE CASCADE,
                      fence_token fencing.token);
SELECT fencing.protect('fk_leaf');
INSERT INTO fk_cust VALUES (5, 'e');
INSERT INTO fk_mid VALUES (1, 5);
INSERT INTO fk_leaf VALUES (1, 5, 4000);
CREATE FUNCTION fk_rename_cust(old_id int, new_id int) RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp
    AS $$ UPDATE fk_cust SET id = new_id WHERE id = old_id $$;
RESET ROLE;
SET ROLE regress_fencing23_parent;
BEGIN;
SET LOCAL fencing.token = '9223372036854775807';
UPDATE fk_cust SET id = 15 WHERE id = 5;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '9223372036854775807';
DELETE FROM fk_cust WHERE id = 6;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '9223372036854775807';
SELECT fk_rename_cust(5, 15);
ROLLBACK;
RESET ROLE;
SET ROLE regress_fencing23_owner;
BEGIN;
SET LOCAL fencing.token = '5000';
SELECT fk_rename_cust(5, 15);
DELETE FROM fk_cust WHERE id = 6;
COMMIT;
RESET ROLE;
SELECT * FROM fk_mid;
SELECT * FROM fk_leaf;
SELECT * FROM fk_tagged;
SELECT * FROM fk_note;

DROP FUNCTION fk_rename_cust(int, int);
DROP TABLE fk_leaf, fk_mid, fk_tagged, fk_note, fk_ord, fk_ord_null, fk_cust;
DROP FUNCTION fk_tagged_note();
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing23_owner, regress_fencing23_writer;
REVOKE CREATE ON SCHEMA public FROM regress_fencing23_owner;
DROP ROLE regress_fencing23_owner;
DROP ROLE regress_fencing23_parent;
DROP ROLE regress_fencing23_writer;
