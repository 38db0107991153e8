-- Row semantics of the enforcement trigger: UPDATE, INSERT (and
-- COPY FROM), INSERT ... ON CONFLICT DO UPDATE, DELETE with fence_deletes,
-- allow_equal, on_stale = 'skip' (with row counts), the fencing.token
-- setting, and the 23T01 error's message, detail (tokens, primary key) and
-- hint. Tokens are literals: none comes from fencing.acquire. Tables are
-- protected while empty (protect moves the token counter past the tokens a
-- table holds).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never
-- Command tags on: they show the row counts.
\set QUIET off

---------------------------------------------------------------------------
-- UPDATE (allow_equal false, on_stale error)
---------------------------------------------------------------------------
CREATE TABLE e (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('e');
INSERT INTO e VALUES (1, 10, 'a'), (2, 10, 'b');
-- incoming > stored: accepted.
UPDATE e SET fence_token = 11, v = 'a11' WHERE id = 1;
-- incoming = stored: rejected.
UPDATE e SET fence_token = 11, v = 'a-eq' WHERE id = 1;
\echo :SQLSTATE
-- incoming < stored: rejected.
UPDATE e SET fence_token = 3, v = 'a-lt' WHERE id = 1;
\echo :SQLSTATE
-- incoming NULL: rejected.
UPDATE e SET fence_token = NULL, v = 'a-null' WHERE id = 1;
\echo :SQLSTATE
-- An UPDATE that does not assign the token (and no fencing.token): rejected.
UPDATE e SET v = 'a-untokened' WHERE id = 1;
\echo :SQLSTATE
-- A statement is all or nothing: one stale row fails it.
UPDATE e SET fence_token = 11, v = 'both' WHERE id IN (1, 2);
SELECT * FROM e ORDER BY id;
UPDATE e SET fence_token = fence_token::bigint + 1;
UPDATE e SET fence_token = 13 WHERE id IN (1, 2);
-- A stored NULL (rows from before the table was protected) accepts any
-- token, but not NULL.
ALTER TABLE e DISABLE TRIGGER "~fencing_enforce";
INSERT INTO e VALUES (3, NULL, 'legacy');
ALTER TABLE e ENABLE TRIGGER "~fencing_enforce";
UPDATE e SET v = 'legacy-untokened' WHERE id = 3;
UPDATE e SET fence_token = NULL WHERE id = 3;
UPDATE e SET fence_token = 1, v = 'legacy-1' WHERE id = 3 RETURNING *;
-- A row that is not written is not checked.
UPDATE e SET fence_token = 1 WHERE id = 99;
SELECT * FROM e ORDER BY id;

---------------------------------------------------------------------------
-- The fencing.token setting
---------------------------------------------------------------------------
SHOW fencing.token;
SET fencing.token = 'abc';
\echo :SQLSTATE
SET fencing.token = '0';
\echo :SQLSTATE
SET fencing.token = '-1';
\echo :SQLSTATE
SET fencing.token = '9223372036854775808';
\echo :SQLSTATE
-- An UPDATE that does not assign the token column takes the setting's value,
-- and it is written into the row.
BEGIN;
SET LOCAL fencing.token = '35';
SHOW fencing.token;
UPDATE e SET v = 'a35' WHERE id = 1 RETURNING *;
COMMIT;
-- SET LOCAL ends with the transaction.
SHOW fencing.token;
UPDATE e SET v = 'a-after-commit' WHERE id = 1;
-- The setting judged like an assigned token: equal or lower is rejected.
BEGIN;
SET LOCAL fencing.token = '35';
UPDATE e SET v = 'a35-again' WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '20';
UPDATE e SET v = 'a20' WHERE id = 1;
ROLLBACK;
-- A token the UPDATE assigns itself wins over the setting: a lower assigned
-- token is rejected even with a newer setting; a newer one is written as is.
BEGIN;
SET LOCAL fencing.token = '100';
UPDATE e SET fence_token = 30, v = 'assigned-30' WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '100';
UPDATE e SET fence_token = 40, v = 'assigned-40' WHERE id = 1 RETURNING *;
-- An assigned NULL is no token, whatever the setting says.
\set VERBOSITY terse
UPDATE e SET fence_token = NULL WHERE id = 1;
\set VERBOSITY default
\echo :SQLSTATE
ROLLBACK;
-- Multi-row UPDATE with the setting: every row gets it.
BEGIN;
SET LOCAL fencing.token = '50';
WITH u AS (UPDATE e SET v = v || '@50' RETURNING *) SELECT * FROM u ORDER BY id;
COMMIT;
-- fencing.use(token): SET LOCAL fencing.token with a bind parameter; it
-- returns the token and ends with the transaction.
BEGIN;
SELECT fencing.use(51) AS used, pg_typeof(fencing.use(51)) AS type;
SHOW fencing.token;
UPDATE e SET v = 'use51' WHERE id = 1 RETURNING *;
COMMIT;
SHOW fencing.token;
PREPARE use_token(bigint) AS SELECT fencing.use($1);
BEGIN;
EXECUTE use_token(53);
UPDATE e SET v = 'use53' WHERE id = 1 RETURNING *;
-- Judged like the setting: an older token is stale.
EXECUTE use_token(52);
UPDATE e SET v = 'use52' WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
DEALLOCATE use_token;
-- Never silently ineffective: outside a transaction block it is an error.
SELECT fencing.use(54);
\echo :SQLSTATE
SHOW fencing.token;
-- A multi-statement query string is one transaction: it works there.
SELECT fencing.use(55) \; UPDATE e SET v = 'use55' WHERE id = 1 RETURNING *;
-- Bad tokens: <= 0 (23514, as for the domain), NULL (22004).
BEGIN;
SELECT fencing.use(0);
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SELECT fencing.use(-1);
ROLLBACK;
BEGIN;
SELECT fencing.use(NULL);
\echo :SQLSTATE
ROLLBACK;
-- A session-level SET (without LOCAL) is ignored: only a token set in the
-- transaction itself counts (SET LOCAL, fencing.use()), so that a value left
-- on a session never judges, nor is stamped into, a later transaction's
-- write by code that holds no lock.
SET fencing.token = '56';
UPDATE e SET v = 'a56' WHERE id = 1 RETURNING *;
INSERT INTO e VALUES (56, NULL, 'session') RETURNING *;
BEGIN;
UPDATE e SET v = 'a56' WHERE id = 1 RETURNING *;
ROLLBACK;
-- also when the session-level SET is made inside the writing transaction
BEGIN;
SET fencing.token = '57';
UPDATE e SET v = 'a57' WHERE id = 1 RETURNING *;
ROLLBACK;
SELECT set_config('fencing.token', '58', false);
UPDATE e SET v = 'a58' WHERE id = 1 RETURNING *;
-- SET LOCAL on top of it counts; once its transaction ends, the session
-- value is back and ignored again, also after a rolled-back savepoint.
BEGIN;
SET LOCAL fencing.token = '59';
UPDATE e SET v = 'a59' WHERE id = 1 RETURNING *;
COMMIT;
UPDATE e SET v = 'after' WHERE id = 1 RETURNING *;
BEGIN;
SAVEPOINT s;
SET LOCAL fencing.token = '70';
ROLLBACK TO SAVEPOINT s;
UPDATE e SET v = 'savepoint' WHERE id = 1 RETURNING *;
ROLLBACK;
BEGIN;
SAVEPOINT s;
SET LOCAL fencing.token = '60';
RELEASE SAVEPOINT s;
UPDATE e SET v = 'a60' WHERE id = 1 RETURNING *;
COMMIT;
-- an empty value unsets it
SET fencing.token = '';
UPDATE e SET v = 'unset' WHERE id = 1;
RESET fencing.token;
SELECT * FROM e ORDER BY id;

---------------------------------------------------------------------------
-- allow_equal
---------------------------------------------------------------------------
CREATE TABLE eq (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('eq', allow_equal => true);
INSERT INTO eq VALUES (1, 10, 'a');
-- The UPDATE assigns the token column itself: equal is accepted.
UPDATE eq SET fence_token = 10, v = 'eq-literal' RETURNING *;
UPDATE eq SET fence_token = fence_token, v = 'eq-self' RETURNING *;
-- Lower is still rejected.
UPDATE eq SET fence_token = 9, v = 'lower';
-- An UPDATE that does not mention the token is always rejected.
UPDATE eq SET v = 'untokened';
\echo :SQLSTATE
-- fencing.token equal to the stored token is accepted (and lower is not).
BEGIN;
SET LOCAL fencing.token = '10';
UPDATE eq SET v = 'eq-setting' RETURNING *;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '9';
UPDATE eq SET v = 'lower-setting';
ROLLBACK;
UPDATE eq SET fence_token = 11, v = 'newer' RETURNING *;
SELECT * FROM eq;

---------------------------------------------------------------------------
-- INSERT
---------------------------------------------------------------------------
CREATE TABLE ins (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('ins');
-- Any non-NULL token: there is no stored row to compare with.
INSERT INTO ins VALUES (1, 10, 'a'), (2, 1, 'b');
-- NULL token: rejected (explicitly, or by omission).
INSERT INTO ins VALUES (3, NULL, 'c');
\echo :SQLSTATE
INSERT INTO ins (id, v) VALUES (3, 'c');
\echo :SQLSTATE
-- One bad row fails the statement.
INSERT INTO ins VALUES (3, 5, 'c'), (4, NULL, 'd');
-- With fencing.token set, a NULL token takes the setting; a given one is kept.
BEGIN;
SET LOCAL fencing.token = '35';
INSERT INTO ins (id, v) VALUES (3, 'c') RETURNING *;
INSERT INTO ins VALUES (4, NULL, 'd'), (5, 7, 'e');
COMMIT;
-- INSERT ... SELECT
INSERT INTO ins SELECT 10 + i, NULL, 'sel' FROM generate_series(1, 3) i;
INSERT INTO ins SELECT 10 + i, i, 'sel' FROM generate_series(1, 3) i;
SELECT * FROM ins ORDER BY id;

---------------------------------------------------------------------------
-- COPY FROM: judged like INSERT
---------------------------------------------------------------------------
COPY ins FROM stdin;
20	20	copy-a
21	21	copy-b
\.
COPY ins FROM stdin;
22	22	copy-c
23	\N	copy-null
\.
BEGIN;
SET LOCAL fencing.token = '77';
COPY ins (id, v) FROM stdin;
24	copy-setting
\.
COMMIT;
SELECT * FROM ins WHERE id >= 20 ORDER BY id;

---------------------------------------------------------------------------
-- INSERT ... ON CONFLICT DO UPDATE: the update is judged as an UPDATE
---------------------------------------------------------------------------
CREATE TABLE up (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('up');
INSERT INTO up VALUES (1, 10, 'a') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v;
-- newer: updated
INSERT INTO up VALUES (1, 20, 'b') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v
RETURNING *;
-- equal or older: 23T01 against the existing row
INSERT INTO up VALUES (1, 20, 'c') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v;
\echo :SQLSTATE
INSERT INTO up VALUES (1, 15, 'c') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v;
\echo :SQLSTATE
-- an update part that does not assign the token: rejected without the
-- setting, written with it
INSERT INTO up VALUES (1, 30, 'd') ON CONFLICT (id) DO UPDATE SET v = excluded.v;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '40';
INSERT INTO up VALUES (1, 30, 'e') ON CONFLICT (id) DO UPDATE SET v = excluded.v RETURNING *;
COMMIT;
-- GREATEST() in the SET list: still judged by the token the row ends with
INSERT INTO up VALUES (1, 35, 'f') ON CONFLICT (id)
    DO UPDATE SET fence_token = greatest(up.fence_token::bigint, excluded.fence_token::bigint), v = excluded.v;
\echo :SQLSTATE
-- The proposed row is an INSERT first: a NULL token is rejected before any
-- conflict is looked at.
INSERT INTO up (id, v) VALUES (1, 'g') ON CONFLICT (id) DO UPDATE SET fence_token = 50, v = excluded.v;
\echo :SQLSTATE
-- No conflict: a plain INSERT.
INSERT INTO up VALUES (2, 5, 'x') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token RETURNING *;
-- ON CONFLICT DO NOTHING never updates.
INSERT INTO up VALUES (1, 1, 'stale') ON CONFLICT (id) DO NOTHING;
-- Several rows, one stale: the statement fails.
INSERT INTO up VALUES (1, 50, 'h'), (2, 4, 'y') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v;
SELECT * FROM up ORDER BY id;

---------------------------------------------------------------------------
-- DELETE: fenced by default (fence_deletes); unchecked with fence_deletes => false
---------------------------------------------------------------------------
CREATE TABLE del (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('del');
INSERT INTO del VALUES (1, 10, 'a'), (2, 10, 'b'), (3, 10, 'c'), (4, 10, 'd'), (5, 10, 'e');
-- the default: without fencing.token, rejected
DELETE FROM del WHERE id = 5;
SELECT fencing.protect('del', fence_deletes => false);
DELETE FROM del WHERE id = 5;
SELECT fencing.protect('del', fence_deletes => true);
-- without fencing.token: rejected
DELETE FROM del WHERE id = 1;
\echo :SQLSTATE
-- equal or lower: rejected
BEGIN;
SET LOCAL fencing.token = '10';
DELETE FROM del WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '9';
DELETE FROM del WHERE id = 1;
ROLLBACK;
-- greater: accepted
BEGIN;
SET LOCAL fencing.token = '11';
DELETE FROM del WHERE id = 1 RETURNING *;
COMMIT;
-- equal with allow_equal: accepted
SELECT fencing.protect('del', allow_equal => true, fence_deletes => true);
BEGIN;
SET LOCAL fencing.token = '10';
DELETE FROM del WHERE id = 2 RETURNING *;
COMMIT;
DELETE FROM del WHERE id = 3;
-- a stored NULL accepts any fencing.token
ALTER TABLE del DISABLE TRIGGER "~fencing_enforce";
INSERT INTO del VALUES (6, NULL, 'legacy');
ALTER TABLE del ENABLE TRIGGER "~fencing_enforce";
DELETE FROM del WHERE id = 6;
BEGIN;
SET LOCAL fencing.token = '1';
DELETE FROM del WHERE id = 6;
COMMIT;
SELECT * FROM del ORDER BY id;

---------------------------------------------------------------------------
-- on_stale = 'skip': the row is left unchanged and not counted, exactly like
-- the hand-written recipe UPDATE ... WHERE fence_token < $2.
---------------------------------------------------------------------------
CREATE TABLE sk (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE recipe (id int PRIMARY KEY, fence_token fencing.token, v text);
SELECT fencing.protect('sk', on_stale => 'skip');
INSERT INTO sk VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (4, 40, 'd');
INSERT INTO recipe SELECT * FROM sk;
UPDATE sk SET fence_token = 25, v = 'w25';
UPDATE recipe SET fence_token = 25, v = 'w25' WHERE fence_token < 25;
UPDATE sk SET fence_token = 25, v = 'w25' RETURNING *;
UPDATE sk SET fence_token = 1, v = 'stale';
UPDATE sk SET v = 'untokened';
UPDATE sk SET fence_token = NULL;
SELECT s.*, s IS NOT DISTINCT FROM r AS same_as_recipe FROM sk s JOIN recipe r USING (id) ORDER BY id;
BEGIN;
SET LOCAL fencing.token = '35';
UPDATE sk SET v = 'w35';
UPDATE recipe SET fence_token = 35, v = 'w35' WHERE fence_token < 35;
COMMIT;
SELECT s.*, s IS NOT DISTINCT FROM r AS same_as_recipe FROM sk s JOIN recipe r USING (id) ORDER BY id;
-- INSERT: rows without a token are skipped, the others inserted.
INSERT INTO sk VALUES (5, NULL, 'e');
INSERT INTO sk VALUES (5, NULL, 'e'), (6, 6, 'f'), (7, NULL, 'g');
COPY sk FROM stdin;
8	\N	copy-null
9	9	copy
\.
-- ON CONFLICT DO UPDATE: a stale update is skipped and not counted.
INSERT INTO sk VALUES (1, 5, 'stale') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v;
INSERT INTO sk VALUES (1, 50, 'upsert'), (2, 5, 'stale') ON CONFLICT (id)
    DO UPDATE SET fence_token = excluded.fence_token, v = excluded.v RETURNING *;
-- DELETE with fence_deletes: stale rows stay, and are not counted.
SELECT fencing.protect('sk', on_stale => 'skip', fence_deletes => true);
DELETE FROM sk WHERE id IN (1, 2, 3);
BEGIN;
SET LOCAL fencing.token = '36';
DELETE FROM sk WHERE id IN (1, 2, 3, 6, 9);
COMMIT;
SELECT * FROM sk ORDER BY id;

---------------------------------------------------------------------------
-- The error: SQLSTATE 23T01 (never class 40), errmsg naming the table,
-- errdetail with both tokens and the primary key, errhint about the lock.
---------------------------------------------------------------------------
CREATE FUNCTION pg_temp.stale_error(stmt text) RETURNS TABLE (field text, value text)
LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text; hnt text; tbl text; sch text;
BEGIN
    EXECUTE stmt;
    RETURN QUERY SELECT 'no error'::text, NULL::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                            hnt = PG_EXCEPTION_HINT, tbl = TABLE_NAME, sch = SCHEMA_NAME;
    RETURN QUERY VALUES ('sqlstate', st), ('message', msg), ('detail', det), ('hint', hnt),
                        ('schema', sch), ('table', tbl);
END
$$;
SELECT * FROM pg_temp.stale_error($$UPDATE e SET fence_token = 1 WHERE id = 1$$);
-- composite primary key (key columns in index order, values as text)
CREATE TABLE ck (region text, day date, n int, fence_token bigint, v text, PRIMARY KEY (region, day, n));
SELECT fencing.protect('ck');
INSERT INTO ck VALUES ('eu west', '2024-03-01', 7, 100, 'a');
UPDATE ck SET fence_token = 99;
INSERT INTO ck VALUES ('us', '2024-03-02', 1, NULL, 'b');
DELETE FROM ck;
-- no primary key: no key in the detail (a unique index is not a primary key;
-- without one, the table is protected without tombstones)
CREATE TABLE nk (a int UNIQUE, fence_token fencing.token, v text);
SELECT fencing.protect('nk', tombstones => false);
INSERT INTO nk VALUES (1, 10, 'a');
UPDATE nk SET fence_token = 9;
UPDATE nk SET v = 'untokened';
INSERT INTO nk VALUES (2, NULL, 'b');
-- fence_deletes without the setting, and with an older one
SELECT fencing.protect('nk', fence_deletes => true, tombstones => false);
DELETE FROM nk;
BEGIN;
SET LOCAL fencing.token = '3';
DELETE FROM nk;
ROLLBACK;

---------------------------------------------------------------------------
-- A bigint token column: tokens from another coordinator (e.g. an etcd
-- revision) are fenced the same way, over bigint's whole range.
---------------------------------------------------------------------------
CREATE TABLE bg (id int PRIMARY KEY, revision bigint, v text);
SELECT fencing.protect('bg', 'revision');
INSERT INTO bg VALUES (1, -5, 'negative'), (2, 9223372036854775806, 'near max');
UPDATE bg SET revision = -6 WHERE id = 1;
UPDATE bg SET revision = -4 WHERE id = 1 RETURNING *;
UPDATE bg SET revision = 9223372036854775807 WHERE id = 2 RETURNING *;
UPDATE bg SET revision = 9223372036854775807 WHERE id = 2;
BEGIN;
SET LOCAL fencing.token = '7';
UPDATE bg SET v = 'setting' WHERE id = 1 RETURNING *;
INSERT INTO bg (id, v) VALUES (3, 'setting') RETURNING *;
COMMIT;
SELECT * FROM bg ORDER BY id;

---------------------------------------------------------------------------
-- Through an updatable view (columns renamed): the same rules.
---------------------------------------------------------------------------
CREATE VIEW e_view AS SELECT v AS value, fence_token AS tok, id FROM e;
UPDATE e_view SET tok = 61 WHERE id = 1 RETURNING *;
UPDATE e_view SET tok = 61 WHERE id = 1;
UPDATE e_view SET value = 'untokened' WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = '70';
UPDATE e_view SET value = 'view70' WHERE id = 1 RETURNING *;
COMMIT;
DROP VIEW e_view;

DROP TABLE e, eq, ins, up, del, sk, recipe, ck, nk, bg;
