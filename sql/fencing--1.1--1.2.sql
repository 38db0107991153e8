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
