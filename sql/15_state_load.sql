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

DELETE FROM fencing.fence_state WHERE resource LIKE 't15:%';
