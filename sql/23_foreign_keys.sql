-- Foreign keys into a protected table. A referential action (ON UPDATE
-- CASCADE, ON DELETE SET NULL / SET DEFAULT / CASCADE) is PostgreSQL keeping
-- the references consistent after a write to the referenced table: it is let
-- through, unjudged, and leaves the row's token unchanged. The write that
-- causes it is judged by the referenced table's own protection, if any.
-- Direct writes to the protected table are judged as always.
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

-- ON UPDATE CASCADE, ON DELETE SET NULL, ON DELETE CASCADE: accepted.
UPDATE fk_parent SET id = 11 WHERE id = 1;
DELETE FROM fk_parent WHERE id = 2;
DELETE FROM fk_parent WHERE id = 3;
SELECT * FROM fk_child ORDER BY id;
SELECT * FROM fk_child_del ORDER BY id;

-- A transaction token does not change that, nor is it stamped into the rows.
BEGIN;
SET LOCAL fencing.token = '5';
UPDATE fk_parent SET id = 12 WHERE id = 11;
COMMIT;
SELECT * FROM fk_child ORDER BY id;

-- Direct writes are judged as always.
UPDATE fk_child SET parent_id = NULL WHERE id = 10;
DELETE FROM fk_child WHERE id = 10;
UPDATE fk_child SET parent_id = 12, fence_token = 250 WHERE id = 20 RETURNING *;

-- A protected referenced table: its own write is judged first.
CREATE TABLE fk_pp (id int PRIMARY KEY, fence_token fencing.token);
CREATE TABLE fk_pc (id int PRIMARY KEY, pp int REFERENCES fk_pp (id) ON DELETE CASCADE, fence_token fencing.token);
SELECT fencing.protect('fk_pp');
SELECT fencing.protect('fk_pc');
INSERT INTO fk_pp VALUES (1, 50);
INSERT INTO fk_pc VALUES (1, 1, 900);
DELETE FROM fk_pp WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = '60';
DELETE FROM fk_pp WHERE id = 1;
COMMIT;
SELECT count(*) AS children_left FROM fk_pc;

DROP TABLE fk_child, fk_child_del, fk_parent, fk_pc, fk_pp;
