-- Notifications and statistics (1.1): the SQL surface. fencing.set_notify
-- (who, arguments, the bound), fencing.notify_settings, the fencing.stats
-- and fencing.table_stats views and fencing.reset_stats. What they do on a
-- running server (notifications received, exact counts with the module
-- preloaded) is tested in tests/tap/072_stats.pl and 073_notify.pl. The
-- output does not depend on whether the server preloads fencing.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS result,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('set_notify', 'reset_stats', 'stats_data', 'table_stats_data')
 ORDER BY 1::text;
SELECT pg_get_function_arguments('fencing.set_notify(text, boolean)'::regprocedure) AS set_notify_args;

-- ---- set_notify and notify_settings ------------------------------------------
SELECT count(*) AS settings FROM fencing.notify_settings;
SELECT fencing.set_notify('t30:a');
SELECT fencing.set_notify('t30:a');                 -- again: nothing changes
SELECT fencing.set_notify(NULL);                    -- every resource of the database
SELECT fencing.set_notify(NULL);
SELECT resource FROM fencing.notify_settings ORDER BY resource NULLS FIRST;
SELECT fencing.set_notify('t30:a', false);
SELECT fencing.set_notify('t30:never', false);      -- not enabled: nothing to do
SELECT fencing.set_notify(NULL, false);
SELECT count(*) AS settings FROM fencing.notify_settings;

-- Arguments.
SELECT fencing.set_notify('');
SELECT fencing.set_notify(repeat('x', 1025));
SELECT fencing.set_notify('t30:a', NULL);

-- At most 1000 resources; the database-wide setting is not one of them.
SELECT count(fencing.set_notify('t30:many:' || g)) AS enabled FROM generate_series(1, 1000) g;
SELECT fencing.set_notify('t30:many:1001');
SELECT fencing.set_notify('t30:many:1');            -- already enabled: fine
SELECT fencing.set_notify(NULL);
SELECT count(*) AS settings FROM fencing.notify_settings;
SELECT fencing.set_notify('t30:many:1', false);
SELECT fencing.set_notify('t30:many:1001');         -- room again
SELECT count(fencing.set_notify('t30:many:' || g, false)) AS disabled FROM generate_series(2, 1001) g;
SELECT fencing.set_notify(NULL, false);
SELECT count(*) AS settings FROM fencing.notify_settings;

-- Not in a read-only transaction.
BEGIN READ ONLY;
SELECT fencing.set_notify('t30:read-only');
ROLLBACK;

-- A change is transactional.
BEGIN;
SELECT fencing.set_notify('t30:rolled-back');
SELECT count(*) AS in_transaction FROM fencing.notify_settings;
ROLLBACK;
SELECT count(*) AS after_rollback FROM fencing.notify_settings;

-- The bound holds for rows written by SQL too (a restore's COPY, the database
-- owner's or a superuser's INSERT): a statement that would leave more than
-- 1000 resources in notify_settings fails with set_notify's 54000, whole.
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
INSERT INTO fencing.notify_settings SELECT 't30:sql:' || g FROM generate_series(1, 3000) g;
SELECT pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings SELECT 't30:sql:' || g FROM generate_series(1, 1001) g$$)
       AS one_too_many;
SELECT count(*) AS settings FROM fencing.notify_settings;
INSERT INTO fencing.notify_settings SELECT 't30:sql:' || g FROM generate_series(1, 1000) g;   -- the bound itself
INSERT INTO fencing.notify_settings VALUES (NULL);   -- the database-wide setting does not count
SELECT pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES ('t30:sql:1001')$$) AS insert_past_bound,
       pg_temp.sqlstate_of($$UPDATE fencing.notify_settings SET resource = 't30:sql:0' WHERE resource IS NULL$$)
           AS update_past_bound,
       pg_temp.sqlstate_of($$SELECT fencing.set_notify('t30:sql:1001')$$) AS set_notify_past_bound,
       pg_temp.sqlstate_of($$UPDATE fencing.notify_settings SET resource = resource || ':renamed'
                              WHERE resource = 't30:sql:1'$$) AS rename_within_bound;
SELECT count(*) AS settings, count(resource) AS by_name FROM fencing.notify_settings;
DELETE FROM fencing.notify_settings;
-- And the rule of resource names: 1 to 1024 bytes (23514 for rows by SQL).
SELECT pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES ('')$$) AS empty_name,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES (repeat('x', 1025))$$) AS name_too_long,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES (repeat('é', 512))$$) AS name_of_1024_bytes;
SELECT count(*) AS settings FROM fencing.notify_settings;
DELETE FROM fencing.notify_settings;
-- The table is a set, as set_notify keeps it: a name twice, or a second
-- database-wide row, is refused (23505), so that the table stays bounded and
-- the bound counts names (900 names, one written twice, are not 901).
INSERT INTO fencing.notify_settings SELECT 't30:set:' || g FROM generate_series(1, 900) g;
SELECT pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES ('t30:set:1')$$) AS name_twice,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings SELECT 't30:dup' FROM generate_series(1, 2)$$)
           AS name_twice_in_one_statement,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings SELECT NULL FROM generate_series(1, 1000)$$)
           AS whole_database_rows,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES (NULL)$$) AS one_whole_database_row,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings VALUES (NULL)$$) AS another_whole_database_row,
       pg_temp.sqlstate_of($$UPDATE fencing.notify_settings SET resource = 't30:set:2' WHERE resource = 't30:set:3'$$)
           AS rename_onto_another,
       pg_temp.sqlstate_of($$INSERT INTO fencing.notify_settings SELECT 't30:set:more:' || g FROM generate_series(1, 100) g$$)
           AS up_to_the_bound,
       pg_temp.sqlstate_of($$SELECT fencing.set_notify('t30:set:1')$$) AS set_notify_of_a_named_one;
SELECT count(*) AS settings, count(resource) AS by_name, count(DISTINCT resource) AS distinct_names
  FROM fencing.notify_settings;
DELETE FROM fencing.notify_settings;

-- ---- stats, table_stats, reset_stats ------------------------------------------
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'fencing.stats'::regclass AND attnum > 0 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'fencing.table_stats'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*) AS one_row FROM fencing.stats;
-- collecting exactly when fencing is preloaded; the note says why not.
SELECT collecting = ('fencing' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ',')))
           AS collecting_iff_preloaded,
       (note IS NULL) = collecting AS note_iff_not_collecting,
       (grants IS NULL) = NOT collecting AS counters_null_iff_not_collecting
  FROM fencing.stats;

CREATE TABLE t30_tbl (id int PRIMARY KEY, fence_token bigint);
CREATE TABLE t30_plain (id int PRIMARY KEY, fence_token bigint);
SELECT fencing.protect('t30_tbl');
SELECT tbl FROM fencing.table_stats WHERE tbl::text LIKE 't30%';
SET client_min_messages = error;   -- a WARNING without the preload
SELECT fencing.reset_stats();
RESET client_min_messages;
SELECT (stale_rejections = 0) IS NOT FALSE AS zero_or_null FROM fencing.table_stats WHERE tbl = 't30_tbl'::regclass;

DROP TABLE t30_tbl, t30_plain;
