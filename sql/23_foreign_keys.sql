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
