-- The table's floor (fencing.raise_floor, 1.2): every token up to it is
-- stale for every row of a protected table, whatever the row or its key's
-- tombstone holds; for the cut-over to a logical replica, where no token of
-- the old primary may write any more (docs/operations.md). It only rises,
-- moves the token counter past it first, survives protecting the table
-- again, reaches partitions (those attached later too) and inheritance
-- children, and shows in fencing.protected.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
\set SHOW_CONTEXT never
\set VERBOSITY default

CREATE TABLE fl (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('fl');
SELECT floor FROM fencing.protected WHERE tbl = 'fl'::regclass;
-- Rows written with token 100; a worker holds tokens 150 and 160, issued
-- after them; the floor is 1000 (below the counter, which stays).
\set s1 150
\set s3 160
\set f 1000
INSERT INTO fl VALUES (1, 'a', 100), (2, 'b', 100);
SELECT fencing.raise_floor('fl', :f) = :f AS floor_returned;
SELECT floor = :f AS shown FROM fencing.protected WHERE tbl = 'fl'::regclass;
SELECT fencing.acquire_xact('fl:1') > :f AS counter_past_floor;

-- Newer than the row, but not above the floor: rejected.
UPDATE fl SET v = 'x', fence_token = :s1 WHERE id = 1;
\echo :SQLSTATE
-- An INSERT of a key that never existed, with an old token.
INSERT INTO fl VALUES (3, 'c', :s3);
\echo :SQLSTATE
-- The floor itself is stale; allow_equal does not change that.
UPDATE fl SET v = 'x', fence_token = :f WHERE id = 1;
\echo :SQLSTATE
-- A fenced DELETE with an old token.
BEGIN;
SELECT fencing.use(:s1);
DELETE FROM fl WHERE id = 2;
\echo :SQLSTATE
ROLLBACK;
-- A token from fencing.token likewise.
BEGIN;
SELECT fencing.use(:s3);
INSERT INTO fl (id, v) VALUES (3, 'c');
\echo :SQLSTATE
ROLLBACK;
-- New tokens write.
SELECT fencing.acquire_xact('fl:1') AS n1 \gset
UPDATE fl SET v = 'new', fence_token = :n1 WHERE id = 1;
INSERT INTO fl VALUES (3, 'c', :n1);
SELECT id, v FROM fl ORDER BY id;

-- on_stale => 'skip': skipped, not an error.
SELECT fencing.protect('fl', on_stale => 'skip');
SELECT floor = :f AS kept_by_protect FROM fencing.protected WHERE tbl = 'fl'::regclass;
UPDATE fl SET v = 'skipped', fence_token = :s1 WHERE id = 2;
SELECT v FROM fl WHERE id = 2;

-- It only rises.
SELECT fencing.raise_floor('fl', 5) = :f AS unchanged;
SELECT floor = :f AS still FROM fencing.protected WHERE tbl = 'fl'::regclass;

-- A floor above the counter moves it first: new tokens are above the floor.
SELECT fencing.acquire_xact('fl:1') + 1000000 AS big \gset
SELECT fencing.raise_floor('fl', :big) = :big AS raised;
SELECT fencing.acquire_xact('fl:1') > :big AS counter_past_floor;

-- Misuse.
SELECT fencing.raise_floor('fl', -1);
\echo :SQLSTATE
SELECT fencing.raise_floor('fl', 0);
\echo :SQLSTATE
SELECT fencing.raise_floor(NULL, 1);
\echo :SQLSTATE
CREATE TABLE fl_plain (id int PRIMARY KEY, fence_token fencing.token);
SELECT fencing.raise_floor('fl_plain', 1);
\echo :SQLSTATE
CREATE ROLE fl_other;
GRANT USAGE ON SCHEMA fencing TO fl_other;
SET ROLE fl_other;
SELECT fencing.raise_floor('fl', :f + 1);
\echo :SQLSTATE
RESET ROLE;
-- The table's owner needs what fencing.advance_past needs to move the counter.
CREATE ROLE fl_owner;
CREATE TABLE fl_owned (id int PRIMARY KEY, fence_token fencing.token);
ALTER TABLE fl_owned OWNER TO fl_owner;
GRANT USAGE ON SCHEMA fencing TO fl_owner;
SET ROLE fl_owner;
SELECT fencing.protect('fl_owned');
SELECT fencing.raise_floor('fl_owned', 10);
\echo :SQLSTATE
RESET ROLE;

-- Partitions, those attached later too, and inheritance children.
CREATE TABLE flp (region text, id int, fence_token fencing.token, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE flp_eu PARTITION OF flp FOR VALUES IN ('eu');
SELECT fencing.protect('flp');
SELECT fencing.raise_floor('flp', :f) = :f AS partitioned;
CREATE TABLE flp_us PARTITION OF flp FOR VALUES IN ('us');
INSERT INTO flp VALUES ('eu', 1, :s1);
\echo :SQLSTATE
INSERT INTO flp_us VALUES ('us', 1, :s1);
\echo :SQLSTATE
SELECT fencing.raise_floor('flp_eu', :f);
\echo :SQLSTATE
CREATE TABLE flh (id int PRIMARY KEY, fence_token fencing.token);
CREATE TABLE flh_child (extra int) INHERITS (flh);
ALTER TABLE flh_child ADD PRIMARY KEY (id);
SELECT fencing.protect('flh');
SELECT fencing.raise_floor('flh', :f) = :f AS inheritance;
INSERT INTO flh_child VALUES (1, :s1, 0);
\echo :SQLSTATE
SELECT tgrelid::regclass AS rel, (fencing.trigger_args(tgargs))[6] = :'f' AS has_floor
  FROM pg_trigger WHERE tgname = '~fencing_enforce' AND tgrelid::regclass::text LIKE 'fl%' ORDER BY 1;

-- The floor is 1 to 19 decimal digits, at most 9223372036854775807; the
-- check, fencing.protected and protect() read it alike. A check made by
-- hand with anything else fails every write (39P01) and is not listed.
CREATE TABLE flx (id int PRIMARY KEY, fence_token fencing.token);
INSERT INTO flx VALUES (1, 100);
CREATE TRIGGER "~fencing_enforce" BEFORE INSERT OR UPDATE OR DELETE ON flx FOR EACH ROW
    EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'true', '1500000000000000000');
SELECT floor FROM fencing.protected WHERE tbl = 'flx'::regclass;
UPDATE flx SET fence_token = 1400000000000000000 WHERE id = 1;
\echo :SQLSTATE
SELECT fencing.protect('flx');
SELECT floor FROM fencing.protected WHERE tbl = 'flx'::regclass;
UPDATE flx SET fence_token = 1400000000000000000 WHERE id = 1;
\echo :SQLSTATE
SELECT fencing.unprotect('flx');
CREATE FUNCTION fl_try(arg text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    DROP TRIGGER IF EXISTS "~fencing_enforce" ON flx;
    EXECUTE format('CREATE TRIGGER "~fencing_enforce" BEFORE INSERT OR UPDATE OR DELETE ON flx FOR EACH ROW '
                   'EXECUTE FUNCTION fencing.enforce(%L, %L, %L, %L, %L, %L)', 'fence_token', 'false', 'error', 'true', 'true', arg);
    BEGIN
        UPDATE flx SET fence_token = (SELECT max(fence_token) FROM flx) + 1 WHERE id = 1;
        RETURN 'accepted, listed: ' || (SELECT count(*) FROM fencing.protected WHERE tbl = 'flx'::regclass);
    EXCEPTION WHEN OTHERS THEN
        RETURN SQLSTATE || ', listed: ' || (SELECT count(*) FROM fencing.protected WHERE tbl = 'flx'::regclass);
    END;
END $$;
SELECT a AS floor_argument, fl_try(a) AS result
  FROM (VALUES (1, '+5000'), (2, ' 5000'), (3, '-0'), (4, '5000 '), (5, ''), (6, '9223372036854775807'),
               (7, '9223372036854775808'), (8, '00000000000000000005'), (9, '0')) AS v(n, a) ORDER BY n;
DROP FUNCTION fl_try(text);
DROP TABLE flx;

-- raise_floor by a role that does not own the table.
SET ROLE fl_other;
SELECT fencing.raise_floor('fl', 1);
RESET ROLE;

-- Unprotected, the floor is gone with the check.
SELECT fencing.unprotect('fl');
SELECT count(*) FROM fencing.protected WHERE tbl = 'fl'::regclass;

DROP TABLE fl, fl_plain, fl_owned, flp, flh_child, flh;
DROP OWNED BY fl_other, fl_owner;
DROP ROLE fl_other, fl_owner;
