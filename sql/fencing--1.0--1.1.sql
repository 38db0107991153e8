-- fencing 1.0 -> 1.1: lock-delay, counted locks (permits) and shared holds,
-- as parameters of the acquire family, shown by fencing.locks; notifications
-- of lock events; statistics. CREATE EXTENSION fencing runs fencing--1.0.sql
-- and then this file; ALTER EXTENSION fencing UPDATE TO '1.1' runs this file
-- alone.
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-------------------------------------------------------------------------------
-- The acquire family gains three parameters, at the end, with defaults, so
-- that every call of 1.0 means what it meant:
--   lock_delay  after a grant that ends uncleanly (its session ended while
--               holding it), nobody is granted the resource until this has
--               passed (0 .. 1 minute; NULL or 0: none);
--   permits     one of N permits of the resource, each its own fenced grant
--               with its own tokens (1 .. 1000; NULL: a plain resource);
--   shared      a shared hold: many sessions at once, none exclusive; returns
--               the resource's latest token.
-- The functions are dropped and created again (a function's arguments cannot
-- change in place); their privileges are the defaults, as in 1.0. Their C
-- symbols are new: a backend that still runs the 1.0 module (loaded before
-- the 1.1 module was installed) cannot find them and refuses the call (42883,
-- "could not find function"), instead of ignoring the arguments it does not
-- know. The 1.1 module serves both symbols, the old ones for databases not yet
-- updated.
-------------------------------------------------------------------------------
DROP FUNCTION fencing.acquire(text, interval, interval, boolean);
DROP FUNCTION fencing.try_acquire(text, boolean);
DROP FUNCTION fencing.acquire_xact(text, interval, interval, boolean);
DROP FUNCTION fencing.try_acquire_xact(text, boolean);

CREATE FUNCTION fencing.acquire(resource text, wait interval DEFAULT NULL, lease interval DEFAULT NULL,
                                reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL,
                                permits integer DEFAULT NULL, shared boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_acquire_with_options' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.try_acquire(resource text, reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL,
                                    permits integer DEFAULT NULL, shared boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_try_acquire_with_options' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.acquire_xact(resource text, wait interval DEFAULT NULL, lease interval DEFAULT NULL,
                                     reentrant boolean DEFAULT false, lock_delay interval DEFAULT NULL,
                                     permits integer DEFAULT NULL, shared boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_acquire_xact_with_options' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.try_acquire_xact(resource text, reentrant boolean DEFAULT false,
                                         lock_delay interval DEFAULT NULL, permits integer DEFAULT NULL,
                                         shared boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_try_acquire_xact_with_options' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-------------------------------------------------------------------------------
-- fencing.locks: the 1.0 columns, then mode, permit and delay_until.
--
-- The advisory lock tags of fencing (field 4; defined in src/pg/lock_tags.hpp):
--   32257 /* kResourceTagKind */: a resource, or a permit of one (permit p of
--     resource R is the resource named R, U+001F, p: its key, its fence state
--     row); ExclusiveLock a session hold, ShareRowExclusiveLock a transaction
--     hold, ShareLock a shared hold
--   32260 /* kDelayTagKind */: a lost grant in its lock-delay, held by the
--     ended session's backend: (database, end of the delay in seconds since
--     2000, low half of the key)
--   32263 /* kSharedXactTagKind */: marks a shared hold (or wait) as
--     transaction-scoped: (database, key)
--   32264 /* kPermitQueueTagKind */: the queue of a counted resource
--     (database, its first permit's key): a waiter for a permit, in ExclusiveLock for a session
--     hold, ShareRowExclusiveLock for a transaction hold; its head holds it
--     while it waits for a permit
-------------------------------------------------------------------------------
DO $$
BEGIN
  EXECUTE format($v$
    CREATE OR REPLACE VIEW fencing.locks AS
    WITH l AS MATERIALIZED (
      SELECT l.pid, l.mode, l.granted, l.classid::bigint AS hi, l.objid::bigint AS lo, l.objsubid::integer AS kind,
             %s AS waitstart
        FROM pg_catalog.pg_locks l
       WHERE l.locktype = 'advisory'
         AND l.objsubid IN (32257 /* kResourceTagKind */, 32260 /* kDelayTagKind */,
                            32263 /* kSharedXactTagKind */, 32264 /* kPermitQueueTagKind */)
         AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
    ), g AS (
      SELECT l.*, (l.hi << 32) | l.lo AS key
        FROM l WHERE l.kind IN (32257 /* kResourceTagKind */, 32264 /* kPermitQueueTagKind */)
    ), r AS (
      -- The row of the lock's key: with two names of one key (a collision)
      -- the one with the latest grant holds it. A queue's key is its
      -- resource's first permit's. A permit's name is its resource's name,
      -- U+001F and its number.
      SELECT g.*, s.token AS state_token, s.granted_at, s.lease_ms,
             pg_catalog.substring(s.resource, E'\x1f([1-9][0-9]{0,3})$')::integer AS suffix,
             pg_catalog.substring(s.resource, E'^(.+)\x1f[1-9][0-9]{0,3}$') AS base,
             s.resource AS name,
             (SELECT pg_catalog.to_timestamp(946684800 + pg_catalog.max(d.hi)) FROM l d
               WHERE d.kind = 32260 /* kDelayTagKind */ AND d.pid = g.pid AND d.lo = g.lo
                 AND g.kind = 32257 /* kResourceTagKind */ AND g.granted) AS delay_until,
             g.kind = 32257 /* kResourceTagKind */ AND g.granted AND g.mode <> 'ShareLock' AS exclusive_grant
        FROM g
        LEFT JOIN LATERAL (SELECT x.resource, x.token, x.granted_at, x.lease_ms FROM fencing.fence_state x
                            WHERE x.key = g.key ORDER BY x.token DESC LIMIT 1) s ON true
    ), p AS (
      SELECT r.*,
             CASE WHEN r.base IS NOT NULL AND r.suffix <= 1000 THEN r.base ELSE r.name END AS resource,
             CASE WHEN r.kind = 32257 /* kResourceTagKind */ AND r.base IS NOT NULL AND r.suffix <= 1000
                  THEN r.suffix END AS permit
        FROM r
    )
    SELECT r.resource,
           -- Like pg_stat_activity: other roles' tokens only for pg_read_all_stats.
           (CASE WHEN r.kind = 32257 /* kResourceTagKind */ AND r.granted
                     AND (r.pid = pg_catalog.pg_backend_pid()
                          OR (a.usesysid IS NOT NULL AND pg_catalog.pg_has_role(a.usesysid, 'MEMBER'))
                          OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER'))
                THEN r.state_token END)::fencing.token AS token,
           r.pid,
           CASE WHEN r.mode = 'ExclusiveLock' THEN 'session'
                WHEN r.mode = 'ShareLock'
                     AND NOT EXISTS (SELECT 1 FROM l m WHERE m.kind = 32263 /* kSharedXactTagKind */
                                        AND m.pid = r.pid AND m.hi = r.hi AND m.lo = r.lo)
                THEN 'session'
                ELSE 'transaction' END AS scope,
           r.kind = 32257 /* kResourceTagKind */ AND r.granted AS granted,
           CASE WHEN r.exclusive_grant THEN pg_catalog.to_timestamp(946684800 + r.granted_at)
                WHEN r.kind = 32257 /* kResourceTagKind */ AND r.granted THEN NULL
                ELSE r.waitstart END AS since,
           a.application_name,
           CASE WHEN r.exclusive_grant AND r.lease_ms > 0 AND r.delay_until IS NULL
                THEN pg_catalog.make_interval(secs => r.lease_ms / 1000.0) END AS lease,
           CASE WHEN r.exclusive_grant AND r.lease_ms > 0 AND r.delay_until IS NULL THEN
                (CASE WHEN a.state = 'active' THEN pg_catalog.now() ELSE a.state_change END)
                + pg_catalog.make_interval(secs => r.lease_ms / 1000.0) END AS expires_at,
           CASE WHEN r.mode = 'ShareLock' THEN 'shared' ELSE 'exclusive' END AS mode,
           r.permit,
           r.delay_until
      FROM p r
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = r.pid
     -- The head of a permit queue also waits for one permit's lock: that wait
     -- is shown as its queue row, not twice.
     WHERE NOT (r.kind = 32257 /* kResourceTagKind */ AND NOT r.granted AND r.permit IS NOT NULL)
  $v$, CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 140000 THEN 'l.waitstart' ELSE 'NULL::timestamptz' END);
END
$$;

-------------------------------------------------------------------------------
-- Notifications of lock events: NOTIFY on channel "fencing", JSON payload
-- {"resource", "event": granted|released|lost|delay_ended, "token", "time"},
-- for the resources named here (resource NULL: every resource of the
-- database). Sent at the commit of the transaction the event happened in
-- (src/pg/notify.cpp). Enabling is not for PUBLIC: any role that can connect
-- may LISTEN, and would see the names and tokens of the enabled resources.
-------------------------------------------------------------------------------
CREATE TABLE fencing.notify_settings (
    resource text COLLATE "C"    -- NULL: every resource of the database
        -- the rule of every resource name (src/core/resource_key.hpp), for
        -- rows written by SQL (set_notify checks its argument so)
        CONSTRAINT notify_settings_resource_name
        CHECK (resource IS NULL OR pg_catalog.octet_length(resource) BETWEEN 1 AND 1024)
);
-- Written by set_notify only (which keeps names unique and one NULL at most,
-- under a self-conflicting lock), and loaded by a restore.
SELECT pg_catalog.pg_extension_config_dump('fencing.notify_settings', '');
REVOKE ALL ON fencing.notify_settings FROM PUBLIC;
GRANT SELECT ON fencing.notify_settings TO PUBLIC;
-- pg_dump reads it and a restore by the database's owner loads it (as for
-- fence_state).
GRANT SELECT, INSERT ON fencing.notify_settings TO pg_database_owner;

-- Enables (or disables) the notifications of a resource, or with NULL of
-- every resource of the database; at most 1000 resources per database. Writes
-- notify_settings on its caller's behalf. Not for PUBLIC.
CREATE FUNCTION fencing.set_notify(resource text, enabled boolean DEFAULT true)
    RETURNS void AS 'MODULE_PATHNAME', 'fencing_set_notify' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.set_notify(text, boolean) FROM PUBLIC;

-- Rows written by SQL (a restore's COPY, a superuser's hand) reach every
-- session's cached settings at its next transaction, as set_notify's do, and
-- keep set_notify's bound of 1000 resources by name (54000).
CREATE FUNCTION fencing.notify_settings_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_notify_settings_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION fencing.notify_settings_changed() FROM PUBLIC;
CREATE TRIGGER notify_settings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON fencing.notify_settings
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.notify_settings_changed();

-------------------------------------------------------------------------------
-- Statistics, kept in shared memory when fencing is in
-- shared_preload_libraries (src/pg/stats.cpp); otherwise the views say so
-- (collecting = false, note) and show NULL counters. Counters are per
-- database, not transactional, and start from zero at server start, after a
-- crash, and at fencing.reset_stats().
-------------------------------------------------------------------------------
-- Statistics never show a false 0 for a table. The per-table entries
-- (fencing.stats_max_tables, for all databases together) can run out: a
-- stale write of a table without one counts for its database only, and in
-- fencing.stats.table_stats_missed. While that is not 0 (until
-- fencing.reset_stats()), a table without an entry may have missed writes,
-- and fencing.table_stats shows NULL for it; so does a partitioned table
-- with such a partition. An entry taken after a miss counts from the moment
-- it was taken: that row's stats_reset. Temporary tables take no entry (any
-- role may make many, in any database): NULL, always.
CREATE FUNCTION fencing.stats_data(
    OUT grants bigint, OUT waits bigint, OUT total_wait_time double precision, OUT max_wait_time double precision,
    OUT wait_timeouts bigint, OUT lease_expiries bigint, OUT lost bigint, OUT stale_rejections bigint,
    OUT stale_skips bigint, OUT forgets bigint, OUT notifications_dropped bigint, OUT table_stats_missed bigint,
    OUT stats_reset timestamptz, OUT collecting boolean, OUT note text)
    RETURNS record AS 'MODULE_PATHNAME', 'fencing_stats_data' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION fencing.table_stats_data(OUT relid oid, OUT stale_rejections bigint, OUT stale_skips bigint,
                                         OUT since timestamptz)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'fencing_table_stats_data' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW fencing.stats AS
SELECT s.grants, s.waits, s.total_wait_time, s.max_wait_time, s.wait_timeouts, s.lease_expiries, s.lost,
       s.stale_rejections, s.stale_skips, s.forgets, s.notifications_dropped, s.table_stats_missed, s.stats_reset,
       s.collecting, s.note
  FROM fencing.stats_data() s;
GRANT SELECT ON fencing.stats TO PUBLIC;

-- One row per protected table; a partitioned table's row sums its partitions.
-- A relation is counted when it is a partitioned table (it holds no rows),
-- has an entry, or (not temporary) had no stale write go uncounted in its
-- database; the row's counts are complete since the latest of their starts.
CREATE VIEW fencing.table_stats AS
SELECT p.tbl,
       (CASE WHEN st.collecting AND pg_catalog.bool_and(k.counted)
             THEN COALESCE(pg_catalog.sum(d.stale_rejections), 0) END)::bigint AS stale_rejections,
       (CASE WHEN st.collecting AND pg_catalog.bool_and(k.counted)
             THEN COALESCE(pg_catalog.sum(d.stale_skips), 0) END)::bigint AS stale_skips,
       CASE WHEN st.collecting AND pg_catalog.bool_and(k.counted) THEN pg_catalog.max(k.since) END AS stats_reset
  FROM fencing.protected p
 CROSS JOIN fencing.stats_data() st
  -- the table itself, and its partitions (pg_partition_tree has no row for a plain table)
  CROSS JOIN LATERAL (SELECT p.tbl::pg_catalog.oid AS relid
                      UNION SELECT t.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(p.tbl) t) tree
  LEFT JOIN fencing.table_stats_data() d ON d.relid = tree.relid
  LEFT JOIN pg_catalog.pg_class c ON c.oid = tree.relid
 CROSS JOIN LATERAL (SELECT CASE WHEN c.relpersistence = 't' THEN false
                                 WHEN c.relkind = 'p' OR d.relid IS NOT NULL THEN true
                                 ELSE st.table_stats_missed = 0 END AS counted,
                            COALESCE(d.since, st.stats_reset) AS since) k
 GROUP BY p.tbl, st.collecting;
GRANT SELECT ON fencing.table_stats TO PUBLIC;

-- Resets this database's counters. Not for PUBLIC.
CREATE FUNCTION fencing.reset_stats() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_reset_stats' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.reset_stats() FROM PUBLIC;

-------------------------------------------------------------------------------
-- Tombstones: the 1.0 module kept a tombstone under the table that held the
-- row; 1.1 keeps a protected hierarchy's under its root, the top-most
-- ancestor that carries the check (at each step up, the first parent in
-- inheritance order that carries it; src/pg/tombstones.cpp). Those kept
-- under a partition or an inheritance child move to its root, where the
-- newer token of a key stays.
-------------------------------------------------------------------------------
WITH RECURSIVE up(leaf, rel, depth) AS (
    SELECT DISTINCT t.tbl, t.tbl, 0 FROM fencing.tombstones t
  UNION ALL
    SELECT up.leaf, p.parent, up.depth + 1
      FROM up
     CROSS JOIN LATERAL (
        SELECT i.inhparent AS parent
          FROM pg_catalog.pg_inherits i
         WHERE i.inhrelid = up.rel
           AND EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                        WHERE g.tgrelid = i.inhparent
                          AND g.tgfoid = 'fencing.enforce()'::pg_catalog.regprocedure)
         ORDER BY i.inhseqno
         LIMIT 1) p
), root AS (
    SELECT DISTINCT ON (up.leaf) up.leaf, up.rel AS root
      FROM up ORDER BY up.leaf, up.depth DESC
), moved AS (
    DELETE FROM fencing.tombstones t
     USING root r
     WHERE t.tbl = r.leaf AND r.root <> r.leaf
    RETURNING r.root, t.key_hash, t.token, t.deleted_at
)
INSERT INTO fencing.tombstones (tbl, key_hash, token, deleted_at)
SELECT m.root, m.key_hash, pg_catalog.max(m.token), pg_catalog.max(m.deleted_at)
  FROM moved m GROUP BY m.root, m.key_hash
    ON CONFLICT (tbl, key_hash) DO UPDATE
   SET token = GREATEST(fencing.tombstones.token, excluded.token),
       deleted_at = GREATEST(fencing.tombstones.deleted_at, excluded.deleted_at);

-------------------------------------------------------------------------------
-- fencing.protected, in 1.1:
--  * It decodes the trigger's arguments itself: a view's function calls are
--    made with its reader's rights, so in 1.0 PUBLIC had to be allowed to
--    execute the support function trigger_args. Each argument is the bytes
--    before its terminating zero byte, turned into text of the database
--    encoding by convert_from, which refuses bytes that are not valid in it
--    (22021), as trigger_args does; the text takes the default collation, as
--    trigger_args's does (not that of the encoding's name).
--  * It lists a check only where it is in force as the module reads it:
--    enabled (not DISABLEd, not ENABLE REPLICA), BEFORE each row of every
--    INSERT, UPDATE and DELETE, without a WHEN condition or a column list,
--    with five arguments the check accepts. A partitioned table holds no
--    rows: its check is in force when every leaf partition's clone of it is
--    (whatever ALTER TABLE ONLY did to its own), and the clones are not
--    listed. Any role may attach
--    fencing.enforce() to a table of its own (protect() must), and in 1.0 one
--    such trigger with an argument that is no boolean made the view fail for
--    every reader (22P02), while a disabled or narrowed one was listed as
--    protection. The booleans are compared as text, never cast, so nothing
--    a trigger holds makes the view fail.
-------------------------------------------------------------------------------
CREATE OR REPLACE VIEW fencing.protected AS
SELECT t.tgrelid::regclass AS tbl,
       a[1]::name COLLATE "C" AS token_column,
       a[2] IN ('true', 't', 'on') AS allow_equal,
       a[3]::text                  AS on_stale,
       a[4] IN ('true', 't', 'on') AS fence_deletes,
       a[5] IN ('true', 't', 'on') AS tombstones
  FROM pg_catalog.pg_trigger t
  JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 CROSS JOIN LATERAL (
    SELECT pg_catalog.array_agg(
               pg_catalog.convert_from(pg_catalog.substring(t.tgargs, z.prev + 2, z.i - z.prev - 1),
                                       pg_catalog.getdatabaseencoding()) COLLATE "default"
               ORDER BY z.i)
      FROM (SELECT g.i, pg_catalog.lag(g.i, 1, -1) OVER (ORDER BY g.i) AS prev
              FROM pg_catalog.generate_series(0, pg_catalog.length(t.tgargs) - 1) AS g(i)
             WHERE pg_catalog.get_byte(t.tgargs, g.i) = 0) AS z) AS x(a)
 WHERE t.tgfoid = 'fencing.enforce()'::pg_catalog.regprocedure
   AND NOT t.tgisinternal
   AND t.tgparentid = 0
   AND CASE WHEN c.relkind = 'p' THEN
            NOT EXISTS (SELECT 1 FROM pg_catalog.pg_partition_tree(t.tgrelid) p
                         WHERE p.isleaf
                           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger l
                                            WHERE l.tgrelid = p.relid AND l.tgfoid = t.tgfoid
                                              AND l.tgenabled IN ('O', 'A') AND l.tgtype = 31
                                              AND l.tgqual IS NULL
                                              AND pg_catalog.cardinality(l.tgattr::pg_catalog.int2[]) = 0
                                              AND l.tgargs = t.tgargs))
        ELSE t.tgenabled IN ('O', 'A') END
   AND t.tgtype = 31  -- ROW | BEFORE | INSERT | DELETE | UPDATE
   AND t.tgqual IS NULL
   AND pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) = 0
   AND t.tgnargs = 5
   AND a[2] IN ('true', 't', 'on', 'false', 'f', 'off')
   AND a[3] IN ('error', 'skip')
   AND a[4] IN ('true', 't', 'on', 'false', 'f', 'off')
   AND a[5] IN ('true', 't', 'on', 'false', 'f', 'off');
REVOKE ALL ON FUNCTION fencing.trigger_args(bytea) FROM PUBLIC;
