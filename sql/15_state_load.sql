-- Loading fence state rows (what pg_restore's COPY does). A crash between the
-- two WAL records of a resource's first grant (its heap row, then its index
-- entry) can leave a row that the index does not reach; the next grant then
-- writes a second row of the resource, and pg_dump sees both. Of the rows of
-- one resource that reach the table, the one with the newer token stays, so
-- such a dump restores.
\set VERBOSITY terse
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;
SELECT fencing.acquire('t15:a') AS a1 \gset
SELECT fencing.release('t15:a');
SELECT fencing.acquire('t15:a') AS a2 \gset
SELECT fencing.release('t15:a');

-- Two rows of t15:b in one statement, the older first: the newer stays.
SELECT fencing.resource_key('t15:b') AS kb \gset
CREATE TEMP TABLE t15_rows (key bigint, token bigint, granted_at int, lease_ms int, resource text);
INSERT INTO t15_rows VALUES (:kb, :a1, 1, 0, 't15:b'), (:kb, :a2, 2, 0, 't15:b');
INSERT INTO fencing.fence_state SELECT * FROM t15_rows ORDER BY token;
SELECT count(*) AS rows_of_b, max(token) = :a2 AS newer_kept, max(granted_at) AS granted_at
  FROM fencing.fence_state WHERE resource = 't15:b';
SELECT fencing.current('t15:b') = :a2 AS current_is_newer;

-- The newer first, then the older: the newer stays, the older is dropped.
DELETE FROM fencing.fence_state WHERE resource = 't15:b';
INSERT INTO fencing.fence_state SELECT * FROM t15_rows ORDER BY token DESC;
SELECT count(*) AS rows_of_b, max(token) = :a2 AS newer_kept FROM fencing.fence_state WHERE resource = 't15:b';

-- A row of a resource that already has one: the newer token wins there too.
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t15:a'), :a1, 3, 0, 't15:a');
SELECT count(*) AS rows_of_a, max(token) = :a2 AS stored_kept FROM fencing.fence_state WHERE resource = 't15:a';
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t15:a'), :a2 + 10, 4, 0, 't15:a');
SELECT count(*) AS rows_of_a, max(token) = :a2 + 10 AS loaded_kept FROM fencing.fence_state WHERE resource = 't15:a';
-- and it moved the counter past it, as every loaded row does
SELECT fencing.acquire('t15:a') > :a2 + 10 AS next_above_loaded;
SELECT fencing.release('t15:a');

-- A grant overwrites the resource's row where this session last found it,
-- only while that is still the row: after the row was replaced (the load
-- above), moved (VACUUM FULL), removed with its page (VACUUM cutting the
-- table's end), or removed and its place taken by another resource's row.
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t15:a'), :a2 + 20, 5, 0, 't15:a');
SELECT fencing.acquire('t15:a') AS a3 \gset
SELECT fencing.release('t15:a');
SELECT :a3 > :a2 + 20 AS above_replaced, fencing.current('t15:a') = :a3 AS current_is_grant;
VACUUM FULL fencing.fence_state;
SELECT fencing.acquire('t15:a') AS a4 \gset
SELECT fencing.release('t15:a');
SELECT fencing.current('t15:a') = :a4 AS current_after_move,
       (SELECT count(*) FROM fencing.fence_state WHERE resource = 't15:a') AS rows_of_a;
SELECT count(*) FILTER (WHERE fencing.acquire('t15:p' || g) > 0 AND fencing.release('t15:p' || g)) AS padded
  FROM generate_series(1, 1000) g;
SELECT fencing.acquire('t15:last') AS l1 \gset
SELECT fencing.release('t15:last');
DELETE FROM fencing.fence_state WHERE resource LIKE 't15:p%' OR resource = 't15:last';
VACUUM fencing.fence_state;
SELECT fencing.acquire('t15:last') AS l2 \gset
SELECT fencing.release('t15:last');
SELECT :l2 > :l1 AS above_removed, fencing.current('t15:last') = :l2 AS current_of_removed;
SELECT fencing.acquire('t15:x') AS x1 \gset
SELECT fencing.release('t15:x');
DELETE FROM fencing.fence_state WHERE resource = 't15:x';
VACUUM fencing.fence_state;
SELECT fencing.acquire('t15:y') AS y1 \gset
SELECT fencing.release('t15:y');
SELECT fencing.acquire('t15:x') AS x2 \gset
SELECT fencing.release('t15:x');
SELECT fencing.current('t15:y') = :y1 AS other_untouched, fencing.current('t15:x') = :x2 AS current_of_x,
       (SELECT count(*) FROM fencing.fence_state WHERE resource IN ('t15:x', 't15:y')) AS rows_of_x_y;

DELETE FROM fencing.fence_state WHERE resource LIKE 't15:%';

-- A first grant's row reaches every index of fencing.fence_state that
-- takes insertions (one built or rebuilt concurrently too), not only the
-- primary key. (An index of the token, granted_at or lease_ms columns
-- would not follow the grants, which overwrite those in place.)
CREATE INDEX fence_state_by_resource ON fencing.fence_state (resource);
SELECT fencing.acquire('t15:ix') > 0 AS granted, fencing.release('t15:ix') AS released;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM fencing.fence_state WHERE resource = 't15:ix';
SELECT count(*) AS through_own_index FROM fencing.fence_state WHERE resource = 't15:ix';
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX fencing.fence_state_by_resource;
DELETE FROM fencing.fence_state WHERE resource = 't15:ix';
