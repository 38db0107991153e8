-- fencing 1.0 -> 1.1. CREATE EXTENSION fencing runs fencing--1.0.sql and then
-- this file; ALTER EXTENSION fencing UPDATE TO '1.1' runs this file alone.
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

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
-- session's cached settings at its next transaction, as set_notify's do.
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
CREATE FUNCTION fencing.stats_data(
    OUT grants bigint, OUT waits bigint, OUT total_wait_time double precision, OUT max_wait_time double precision,
    OUT wait_timeouts bigint, OUT lease_expiries bigint, OUT lost bigint, OUT stale_rejections bigint,
    OUT stale_skips bigint, OUT forgets bigint, OUT notifications_dropped bigint, OUT stats_reset timestamptz,
    OUT collecting boolean, OUT note text)
    RETURNS record AS 'MODULE_PATHNAME', 'fencing_stats_data' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION fencing.table_stats_data(OUT relid oid, OUT stale_rejections bigint, OUT stale_skips bigint)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'fencing_table_stats_data' LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW fencing.stats AS
SELECT s.grants, s.waits, s.total_wait_time, s.max_wait_time, s.wait_timeouts, s.lease_expiries, s.lost,
       s.stale_rejections, s.stale_skips, s.forgets, s.notifications_dropped, s.stats_reset, s.collecting, s.note
  FROM fencing.stats_data() s;
GRANT SELECT ON fencing.stats TO PUBLIC;

-- One row per protected table; a partitioned table's row sums its partitions.
CREATE VIEW fencing.table_stats AS
SELECT p.tbl,
       (CASE WHEN st.collecting THEN COALESCE(pg_catalog.sum(d.stale_rejections), 0) END)::bigint
           AS stale_rejections,
       (CASE WHEN st.collecting THEN COALESCE(pg_catalog.sum(d.stale_skips), 0) END)::bigint
           AS stale_skips,
       st.stats_reset
  FROM fencing.protected p
 CROSS JOIN fencing.stats_data() st
  -- the table itself, and its partitions (pg_partition_tree has no row for a plain table)
  CROSS JOIN LATERAL (SELECT p.tbl::pg_catalog.oid AS relid
                      UNION SELECT t.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(p.tbl) t) tree
  LEFT JOIN fencing.table_stats_data() d ON d.relid = tree.relid
 GROUP BY p.tbl, st.collecting, st.stats_reset;
GRANT SELECT ON fencing.table_stats TO PUBLIC;

-- Resets this database's counters. Not for PUBLIC.
CREATE FUNCTION fencing.reset_stats() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_reset_stats' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.reset_stats() FROM PUBLIC;
