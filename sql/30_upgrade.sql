-- ALTER EXTENSION fencing UPDATE from 1.0 to 1.1, in a database of its own:
-- the 1.1 module serves a database still at 1.0; the update keeps held
-- locks, fence state and protection; tokens continue; the new options work
-- afterwards; an updated database has exactly the objects of a fresh 1.1.
-- Prints comparisons, never raw token values.
\set regress_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS regress_fencing_upgrade;
DROP DATABASE IF EXISTS regress_fencing_fresh;
RESET client_min_messages;
CREATE DATABASE regress_fencing_upgrade TEMPLATE template0;
CREATE DATABASE regress_fencing_fresh TEMPLATE template0;

\c regress_fencing_fresh
-- Every object of the extension, with its signature or definition.
CREATE FUNCTION objects() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(d, E'\n' ORDER BY d) FROM (
        SELECT pg_describe_object(classid, objid, objsubid) || ' ' ||
               CASE WHEN classid = 'pg_proc'::regclass
                    THEN pg_get_function_arguments(objid) || ' -> ' || pg_get_function_result(objid) || ' ' ||
                         (SELECT coalesce(proacl::text, '') FROM pg_proc WHERE oid = objid)
                    WHEN classid = 'pg_class'::regclass
                    THEN (SELECT coalesce(relacl::text, '') FROM pg_class WHERE oid = objid) || ' ' ||
                         CASE WHEN (SELECT relkind FROM pg_class WHERE oid = objid) = 'v'
                              THEN md5(pg_get_viewdef(objid)) ELSE '' END
                    ELSE '' END AS d
          FROM pg_depend
         WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
           AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')) o
$$;
CREATE EXTENSION fencing VERSION '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
SELECT objects() AS fresh_objects \gset

\c regress_fencing_upgrade
CREATE EXTENSION fencing VERSION '1.0';
-- Every object of the extension, with its signature or definition.
CREATE FUNCTION objects() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(d, E'\n' ORDER BY d) FROM (
        SELECT pg_describe_object(classid, objid, objsubid) || ' ' ||
               CASE WHEN classid = 'pg_proc'::regclass
                    THEN pg_get_function_arguments(objid) || ' -> ' || pg_get_function_result(objid) || ' ' ||
                         (SELECT coalesce(proacl::text, '') FROM pg_proc WHERE oid = objid)
                    WHEN classid = 'pg_class'::regclass
                    THEN (SELECT coalesce(relacl::text, '') FROM pg_class WHERE oid = objid) || ' ' ||
                         CASE WHEN (SELECT relkind FROM pg_class WHERE oid = objid) = 'v'
                              THEN md5(pg_get_viewdef(objid)) ELSE '' END
                    ELSE '' END AS d
          FROM pg_depend
         WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
           AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')) o
$$;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
CREATE FUNCTION sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;

--------------------------------------------------------------------------------
-- The 1.1 module with the 1.0 objects: the 1.0 API works as before; the
-- options of 1.1 do not exist yet (42883), so nothing is taken silently
-- without them.
--------------------------------------------------------------------------------
SELECT fencing.version() AS module_version;
SELECT fencing.acquire('up:held') AS held \gset
SELECT fencing.acquire('up:tok') AS t1 \gset
SELECT fencing.release('up:tok');
SELECT fencing.try_acquire('up:try') IS NOT NULL AS try_got, fencing.release('up:try') AS released;
SELECT fencing.validate('up:held', :'held') = :'held' AS valid, fencing.renew('up:held') IS NULL AS no_lease;
SELECT resource, scope, granted FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT sqlstate_of($$SELECT fencing.acquire('up:x', lock_delay => '1 s')$$) AS lock_delay_at_1_0,
       sqlstate_of($$SELECT fencing.acquire('up:x', permits => 2)$$) AS permits_at_1_0,
       sqlstate_of($$SELECT fencing.acquire('up:x', shared => true)$$) AS shared_at_1_0;
CREATE TABLE up_rows (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('up_rows');
INSERT INTO up_rows VALUES (1, 'one', :'t1');
-- A tombstone in a partition, where the 1.0 module kept it (under the
-- partition; 1.1 keeps a hierarchy's under its protected root): the update
-- moves it to the root, so the key stays barred for stale tokens.
CREATE TABLE up_parts (id int PRIMARY KEY, v text, fence_token fencing.token) PARTITION BY RANGE (id);
CREATE TABLE up_parts_1 PARTITION OF up_parts FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('up_parts');
INSERT INTO up_parts VALUES (5, 'five', :'t1');
BEGIN;
SELECT fencing.use(:'t1'::bigint + 1) IS NOT NULL AS used;
DELETE FROM up_parts WHERE id = 5;
COMMIT;
UPDATE fencing.tombstones SET tbl = 'up_parts_1'::regclass WHERE tbl = 'up_parts'::regclass;
SELECT tbl::regclass, token = :'t1'::bigint + 1 AS deleted_with FROM fencing.tombstones;

--------------------------------------------------------------------------------
-- The update, while this session holds a session lock and, in the same
-- transaction, a transaction lock.
--------------------------------------------------------------------------------
BEGIN;
SELECT fencing.acquire_xact('up:xact') AS xt \gset
ALTER EXTENSION fencing UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
SELECT resource, scope, granted, mode, permit, delay_until FROM fencing.locks WHERE pid = pg_backend_pid() ORDER BY 1;
SELECT fencing.validate('up:xact', :'xt') = :'xt' AS xact_valid;
COMMIT;
SELECT resource, scope, granted, mode FROM fencing.locks WHERE pid = pg_backend_pid();
-- The lock taken before the update is still held, valid, and releases.
SELECT fencing.validate('up:held', :'held') = :'held' AS still_valid;
SELECT fencing.release('up:held') AS released;
SELECT count(*) AS locks_left FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- Fence state and tokens continue; protection holds.
SELECT fencing.current('up:tok') = :'t1' AS state_kept;
SELECT fencing.acquire('up:tok') AS t2 \gset
SELECT :'t2'::bigint > :'t1'::bigint AS newer_token;
\set VERBOSITY terse
UPDATE up_rows SET v = 'stale', fence_token = :'t1' WHERE id = 1;
\set VERBOSITY default
UPDATE up_rows SET v = 'fresh', fence_token = :'t2' WHERE id = 1;
SELECT v, fence_token = :'t2' AS stamped FROM up_rows;
SELECT fencing.release('up:tok');
SELECT * FROM fencing.protected;
SELECT tbl::regclass, token = :'t1'::bigint + 1 AS deleted_with FROM fencing.tombstones;
\set VERBOSITY terse
INSERT INTO up_parts VALUES (5, 'stale', :'t1');
\set VERBOSITY default
SELECT count(*) AS rows_of_key_5 FROM up_parts WHERE id = 5;

--------------------------------------------------------------------------------
-- The 1.1 options after the update.
--------------------------------------------------------------------------------
SELECT fencing.acquire('up:pool', permits => 2) IS NOT NULL AS permit,
       fencing.acquire('up:sh', shared => true) IS NOT NULL AS shared,
       fencing.acquire('up:d', lock_delay => '5 s') IS NOT NULL AS delayed;
SELECT resource, mode, permit FROM fencing.locks WHERE pid = pg_backend_pid() ORDER BY 1;
SELECT fencing.release_all() AS released;

-- The same objects as a fresh install of 1.1.
SELECT objects() = :'fresh_objects' AS same_as_fresh_install;

\c :regress_db
DROP DATABASE regress_fencing_upgrade;
DROP DATABASE regress_fencing_fresh;
