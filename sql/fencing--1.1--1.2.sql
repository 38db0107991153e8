-- fencing 1.1 -> 1.2: a supervisor (a background worker; fencing in
-- shared_preload_libraries) enforces leases, keeps lock-delays and sends the
-- events of ended sessions.
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-------------------------------------------------------------------------------
-- Lost grants in their lock-delay, kept by the supervisor in shared memory
-- (src/pg/supervisor.cpp) after the ended backend has exited: the resource's
-- key, the ended backend's pid, the end of the delay (seconds since
-- 2000-01-01, rounded up) and the lost grant's lock mode. Empty without the
-- preload. For fencing.locks, which every role may read (as pg_locks).
-------------------------------------------------------------------------------
CREATE FUNCTION fencing.lock_delays(OUT key bigint, OUT pid integer, OUT until_seconds bigint, OUT mode text)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'fencing_lock_delays' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED ROWS 10;

-------------------------------------------------------------------------------
-- fencing.locks: as in 1.1; a lost grant in its delay is read from
-- fencing.lock_delays() (its backend has exited), and a lock the lock manager
-- granted while such a delay keeps the resource shows as waiting.
-------------------------------------------------------------------------------
DO $$
BEGIN
  EXECUTE format($v$
    CREATE OR REPLACE VIEW fencing.locks AS
    WITH d AS MATERIALIZED (
      SELECT x.key, x.pid, x.until_seconds, x.mode FROM fencing.lock_delays() x
    ), m AS MATERIALIZED (
      SELECT l.pid, l.mode, l.granted, l.classid::bigint AS hi, l.objid::bigint AS lo, l.objsubid::integer AS kind,
             %s AS waitstart
        FROM pg_catalog.pg_locks l
       WHERE l.locktype = 'advisory'
         AND l.objsubid IN (32257 /* kResourceTagKind */, 32263 /* kSharedXactTagKind */,
                            32264 /* kPermitQueueTagKind */)
         AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
    ), l AS (
      -- A lock the lock manager granted while a lost grant's delay keeps the
      -- resource waits for the delay: not granted yet.
      SELECT m.pid, m.mode,
             m.granted AND NOT (m.kind = 32257 /* kResourceTagKind */ AND EXISTS (
               SELECT 1 FROM d WHERE d.key = ((m.hi << 32) | m.lo) AND NOT (d.mode = 'ShareLock' AND m.mode = 'ShareLock'))) AS granted,
             m.hi, m.lo, m.kind, m.waitstart
        FROM m
      UNION ALL
      -- The lost grant, kept for the ended backend until its delay is over,
      -- and the mark that carries the end of the delay.
      SELECT d.pid, d.mode, true,
             (d.key >> 32) & 4294967295, d.key & 4294967295, 32257 /* kResourceTagKind */, NULL::timestamptz
        FROM d
      UNION ALL
      SELECT d.pid, 'AccessShareLock', true, d.until_seconds, d.key & 4294967295, 32260 /* kDelayTagKind */,
             NULL::timestamptz
        FROM d
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
-- What \dx+, \df+ and \d+ show: a comment on every object of the extension.
-------------------------------------------------------------------------------
COMMENT ON SCHEMA fencing IS 'fencing: fencing tokens, fenced locks with leases, and tables that reject stale writes';
COMMENT ON FUNCTION fencing.acquire(text, interval, interval, boolean, interval, integer, boolean) IS
    'Takes the resource''s lock at session scope and returns a new fencing token; waits at most wait, ends the session after lease of client silence';
COMMENT ON FUNCTION fencing.acquire_xact(text, interval, interval, boolean, interval, integer, boolean) IS
    'As acquire, with the lock held until the end of the transaction';
COMMENT ON FUNCTION fencing.try_acquire(text, boolean, interval, integer, boolean) IS
    'As acquire without waiting: NULL when the resource is busy';
COMMENT ON FUNCTION fencing.try_acquire_xact(text, boolean, interval, integer, boolean) IS
    'As acquire_xact without waiting: NULL when the resource is busy';
COMMENT ON FUNCTION fencing.release(text) IS 'Releases one session hold of the resource; false when the session holds none';
COMMENT ON FUNCTION fencing.release_all() IS 'Releases every fencing lock this session holds at session scope';
COMMENT ON FUNCTION fencing.renew(text) IS 'Shows the server that the holder of the resource is alive (any statement does)';
COMMENT ON FUNCTION fencing.validate(text, bigint) IS
    'Checks that a grant with this token is still held, and guards the transaction''s writes until it ends (23T01 otherwise)';
COMMENT ON FUNCTION fencing.current(text) IS 'The latest token issued for the resource, or NULL';
COMMENT ON FUNCTION fencing.use(bigint) IS 'Sets fencing.token for the current transaction (SET LOCAL with a bind parameter)';
COMMENT ON FUNCTION fencing.resource_key(text) IS 'The 64-bit lock key of a resource name in this database';
COMMENT ON FUNCTION fencing.version() IS 'The version of the loaded fencing module';
COMMENT ON FUNCTION fencing.protect(regclass, name, boolean, text, boolean, boolean) IS
    'Protects a table: its row writes must carry a token newer than the stored one (23T01 otherwise)';
COMMENT ON FUNCTION fencing.unprotect(regclass) IS 'Removes the protection of a table';
COMMENT ON FUNCTION fencing.enforce() IS 'The trigger of protected tables: rejects stale row writes';
COMMENT ON FUNCTION fencing.forget(interval) IS 'Removes the fence state of resources idle for longer than the interval';
COMMENT ON FUNCTION fencing.forget_tombstones(interval) IS 'Removes tombstones older than the interval';
COMMENT ON FUNCTION fencing.advance_past(regclass, bigint) IS 'Moves the token counter past a token (superuser, within the clock bound)';
COMMENT ON FUNCTION fencing.advance_past_table(regclass) IS 'Moves the token counter past the largest token of a table its caller owns (used by protect)';
COMMENT ON FUNCTION fencing.tombstone_key_problem(regclass) IS 'Why a table''s primary key cannot carry tombstones, or NULL (used by protect)';
COMMENT ON FUNCTION fencing.trigger_args(bytea) IS 'Decodes a protection trigger''s arguments';
COMMENT ON FUNCTION fencing.set_notify(text, boolean) IS 'Enables or disables the lock-event notifications of a resource (NULL: every resource)';
COMMENT ON FUNCTION fencing.reset_stats() IS 'Sets this database''s statistics back to zero';
COMMENT ON FUNCTION fencing.stats_data() IS 'The counters behind fencing.stats';
COMMENT ON FUNCTION fencing.table_stats_data() IS 'The counters behind fencing.table_stats';
COMMENT ON FUNCTION fencing.lock_delays() IS 'The lost grants in their lock-delay, kept by the supervisor (behind fencing.locks)';
COMMENT ON FUNCTION fencing.fence_state_loaded() IS 'Keeps the token counter past rows loaded into fencing.fence_state';
COMMENT ON FUNCTION fencing.fence_state_merge() IS 'Keeps one row per resource in fencing.fence_state, the newest';
COMMENT ON FUNCTION fencing.key_secret_replace() IS 'Guards the resource key secret against changes while locks are held';
COMMENT ON FUNCTION fencing.notify_settings_changed() IS 'Brings rows written into fencing.notify_settings to every session, within the bound';
COMMENT ON FUNCTION fencing.ddl_command_start() IS 'Checks DDL that would change what protected tables check';
COMMENT ON FUNCTION fencing.ddl_command_end() IS 'Checks DDL that would change what protected tables check';
COMMENT ON FUNCTION fencing.sql_drop() IS 'Forgets the fencing state of dropped tables';
COMMENT ON EVENT TRIGGER fencing_ddl_command_start IS 'Checks DDL that would change what protected tables check';
COMMENT ON EVENT TRIGGER fencing_ddl_command_end IS 'Checks DDL that would change what protected tables check';
COMMENT ON EVENT TRIGGER fencing_sql_drop IS 'Forgets the fencing state of dropped tables';
COMMENT ON SEQUENCE fencing.token_seq IS 'The database''s token counter (its page is stamped and WAL-logged ahead)';
COMMENT ON TABLE fencing.fence_state IS 'Per resource: the latest token, when it was granted, and its lease';
COMMENT ON TABLE fencing.key_secret IS 'The secret that makes resource keys unguessable';
COMMENT ON TABLE fencing.notify_settings IS 'The resources whose lock events are notified (NULL: every resource)';
COMMENT ON TABLE fencing.tombstones IS 'Per protected table and key: the token a row was deleted with';
COMMENT ON VIEW fencing.locks IS 'One row per held or awaited fencing lock, and per lost grant in its lock-delay';
COMMENT ON VIEW fencing.protected IS 'The protected tables and how their writes are checked';
COMMENT ON VIEW fencing.stats IS 'Lock and write statistics of this database (with the preload)';
COMMENT ON VIEW fencing.table_stats IS 'Stale writes per protected table (with the preload)';
