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
      SELECT d.pid AS pid, d.mode AS mode, true AS granted, (d.key >> 32) & 4294967295 AS hi,
             d.key & 4294967295 AS lo, 32257 /* kResourceTagKind */ AS kind, NULL::timestamptz AS waitstart
        FROM d
      UNION ALL
      SELECT d.pid AS pid, 'AccessShareLock'::text AS mode, true AS granted, d.until_seconds AS hi,
             d.key & 4294967295 AS lo, 32260 /* kDelayTagKind */ AS kind, NULL::timestamptz AS waitstart
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

-- protect refuses unlogged tables (also among the partitions and inheritance
-- children a write through the table reaches): crash recovery empties them
-- without firing triggers and leaves no tombstones. The event triggers
-- refuse making a checked table unlogged, and fencing.enforce() refuses
-- writes to an unlogged table (src/pg/coverage.cpp, src/pg/trigger.cpp).

-- The tables a write through a table reaches: the table itself first,
-- then its partitions and inheritance children at any depth, each once,
-- with what install_check needs of them (src/pg/inheritance.cpp, the one
-- walk of pg_inherits). For the table's owner (used by protect); it shows
-- nothing that pg_class does not show any role.
CREATE FUNCTION fencing.reached_tables(tbl regclass)
    RETURNS TABLE (oid oid, relname name, nspname name, relkind "char", relispartition boolean,
                   relpersistence "char")
    AS 'MODULE_PATHNAME', 'fencing_reached_tables' LANGUAGE C STABLE STRICT PARALLEL SAFE;

-------------------------------------------------------------------------------
-- (1.2) What protect() did, with the table's floor (fencing.raise_floor):
-- every token up to it is stale for the table's rows, whatever they or
-- their keys' tombstones hold. The floor is the check's sixth argument, so
-- that partitions' clones, inheritance children's checks, pg_dump and
-- pg_upgrade carry it with the check. Protecting a table again keeps its
-- floor; a floor given here only raises it, and moves the token counter
-- past it first (fencing.advance_past, with its privileges), so that new
-- tokens are above it.
CREATE FUNCTION fencing.install_check(tbl regclass, token_column name, allow_equal boolean, on_stale text,
                                      fence_deletes boolean, tombstones boolean, floor bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    old_floor   bigint;
    new_floor   bigint;
    floor_arg   text := '';
    r           record;
    col         name;
    coltype     oid;
    token_type  oid := 'fencing.token'::regtype;
    n           integer;
    floor_value bigint;
    parent_tbl  name;
    d           record;
    use_tombstones boolean;
    problem     text;
    unlogged    record;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = '42P01';
    END IF;
    SELECT c.oid, c.relname, c.relkind, c.relowner, c.relispartition, c.relpersistence, n.nspname INTO r
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF r.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', r.relname USING ERRCODE = '42809',
              DETAIL = 'Only tables and partitioned tables can be protected.';
    END IF;
    IF NOT pg_has_role(current_user, r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', r.relname USING ERRCODE = '42501',
              HINT = 'Only the table''s owner or a superuser may protect or unprotect it.';
    END IF;
    IF on_stale IS NULL OR on_stale NOT IN ('error', 'skip') THEN
        RAISE EXCEPTION 'invalid value for on_stale: %', coalesce(quote_literal(on_stale), 'NULL') USING ERRCODE = '22023',
              HINT = 'on_stale is ''error'' (raise SQLSTATE 23T01) or ''skip'' (leave the row unchanged).';
    END IF;
    IF allow_equal IS NULL OR fence_deletes IS NULL THEN
        RAISE EXCEPTION 'allow_equal and fence_deletes must not be null' USING ERRCODE = '22004';
    END IF;
    -- Tombstones by default wherever DELETEs are fenced; they record the
    -- DELETE's token, which only a fenced DELETE has.
    IF tombstones AND NOT fence_deletes THEN
        RAISE EXCEPTION 'tombstones need fence_deletes' USING ERRCODE = '22023',
              DETAIL = 'A tombstone records the token of the DELETE that removed a row; without fence_deletes a DELETE needs no token.',
              HINT = 'Protect the table with fence_deletes => true, or without tombstones.';
    END IF;
    -- A temporary table gets none: PostgreSQL drops it at the end of its
    -- session without event triggers, so nothing could remove its
    -- tombstones with it (fencing_sql_drop removes those of other tables).
    IF r.relpersistence = 't' AND tombstones THEN
        RAISE EXCEPTION 'temporary table "%" cannot have tombstones', r.relname USING ERRCODE = '0A000',
              DETAIL = 'PostgreSQL drops a temporary table at the end of its session without running event triggers, so its tombstones would outlive it.',
              HINT = 'Protect it without tombstones: fencing.protect(tbl) does so by default for a temporary table.';
    END IF;
    use_tombstones := coalesce(tombstones, fence_deletes AND r.relpersistence <> 't');
    -- (1.2) No unlogged table, nor one a write through tbl reaches (its
    -- partitions and inheritance children): crash recovery empties it
    -- without firing triggers and leaves no tombstones, so a stale write
    -- would create its rows again.
    SELECT t.relname, t.oid = tbl AS itself INTO unlogged
      FROM fencing.reached_tables(tbl) t
     WHERE t.relpersistence = 'u'
     ORDER BY t.oid = tbl DESC, t.relname LIMIT 1;
    IF unlogged.relname IS NOT NULL THEN
        RAISE EXCEPTION 'unlogged table "%" cannot be protected', unlogged.relname USING ERRCODE = '0A000',
              DETAIL = CASE WHEN unlogged.itself THEN ''
                            ELSE format('Writes through "%s" reach it. ', r.relname) END
                       || 'Crash recovery empties an unlogged table without firing triggers and leaves no tombstones, so a stale write could create its rows again.',
              HINT = 'Make it a logged table first: ALTER TABLE ... SET LOGGED.';
    END IF;

    IF token_column IS NULL THEN
        SELECT count(*), min(a.attname) INTO n, col
          FROM pg_attribute a WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = token_type;
        IF n <> 1 THEN
            SELECT a.attname INTO col FROM pg_attribute a
             WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = 'fence_token';
            IF col IS NULL THEN
                RAISE EXCEPTION 'table "%" has no fence token column', r.relname USING ERRCODE = '42703',
                      DETAIL = CASE WHEN n > 1 THEN format('It has %s columns of type fencing.token and none is named fence_token.', n)
                                    ELSE 'It has no column of type fencing.token and no column named fence_token.' END,
                      HINT = 'Name the column with the token_column argument: fencing.protect(tbl, token_column => ''...'').';
            END IF;
        END IF;
    ELSE
        SELECT a.attname INTO col FROM pg_attribute a
         WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = token_column;
        IF col IS NULL THEN
            RAISE EXCEPTION 'column "%" of table "%" does not exist', token_column, r.relname USING ERRCODE = '42703',
                  HINT = 'The token_column argument must name an existing column of type fencing.token or bigint.';
        END IF;
    END IF;

    SELECT a.atttypid INTO coltype FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col;
    IF coltype NOT IN ('bigint'::regtype, token_type) THEN
        RAISE EXCEPTION 'column "%" of table "%" is of type %', col, r.relname, format_type(coltype, NULL)
              USING ERRCODE = '42804', HINT = 'A fence token column must be of type fencing.token or bigint.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col AND a.attgenerated <> '') THEN
        RAISE EXCEPTION 'column "%" of table "%" is a generated column', col, r.relname USING ERRCODE = '0A000',
              DETAIL = 'BEFORE triggers see a generated column before it is computed.',
              HINT = 'Use an ordinary column for the token.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = '~fencing_enforce' AND t.tgparentid <> 0) THEN
        RAISE EXCEPTION 'table "%" is a partition of a protected table', r.relname USING ERRCODE = '55000',
              DETAIL = 'Its protection comes from the partitioned table it belongs to.',
              HINT = 'Protect or unprotect the partitioned table instead.';
    END IF;
    -- An inheritance child of a protected table carries its parent's check
    -- (writes through the parent reach its rows): protect the parent.
    SELECT pc.relname INTO parent_tbl
      FROM pg_inherits i JOIN pg_trigger t ON t.tgrelid = i.inhparent JOIN pg_class pc ON pc.oid = i.inhparent
     WHERE i.inhrelid = tbl AND NOT r.relispartition
       AND t.tgname = '~fencing_enforce' AND t.tgfoid = 'fencing.enforce()'::regprocedure
     ORDER BY i.inhseqno LIMIT 1;
    IF parent_tbl IS NOT NULL THEN
        RAISE EXCEPTION 'table "%" inherits from protected table "%"', r.relname, parent_tbl USING ERRCODE = '55000',
              DETAIL = 'Writes through the parent reach its rows, so it is checked with the parent''s settings.',
              HINT = 'Protect or unprotect the parent instead.';
    END IF;

    -- Every table whose rows a write through tbl reaches gets the check:
    -- partitions get clones of it (their own checks make way), inheritance
    -- children (legacy inheritance, at any depth) the same check as their
    -- own trigger.
    FOR d IN SELECT t.oid, t.relname, t.relkind, t.relispartition, t.nspname
               FROM fencing.reached_tables(tbl) t WHERE t.oid <> tbl LOOP
        IF d.relkind = 'f' AND NOT d.relispartition THEN
            RAISE EXCEPTION 'foreign table "%" inherits from table "%"', d.relname, r.relname USING ERRCODE = '0A000',
                  DETAIL = format('Writes through "%s" reach the foreign table, which cannot be protected.', r.relname),
                  HINT = 'Detach the foreign table (ALTER FOREIGN TABLE ... NO INHERIT) first.';
        END IF;
        IF EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = d.oid AND t.tgname = '~fencing_enforce' AND t.tgparentid = 0) THEN
            EXECUTE format('DROP TRIGGER %I ON %I.%I', '~fencing_enforce', d.nspname, d.relname);
        END IF;
    END LOOP;
    -- Tombstones remember deleted rows by primary key: the table, and each
    -- inheritance child (which does not inherit its parent's), needs one.
    IF use_tombstones THEN
        FOR d IN SELECT t.oid, t.relname, t.relpersistence
                   FROM fencing.reached_tables(tbl) t WHERE t.oid = tbl OR NOT t.relispartition LOOP
            IF d.relpersistence = 't' THEN
                RAISE EXCEPTION 'temporary table "%" cannot have tombstones', d.relname USING ERRCODE = '0A000',
                      DETAIL = format('It inherits from "%s", which would be protected with tombstones; PostgreSQL drops a temporary table at the end of its session without running event triggers, so its tombstones would outlive it.', r.relname),
                      HINT = 'Protect the table with tombstones => false, or remove the temporary table from it (ALTER TABLE ... NO INHERIT).';
            END IF;
            problem := fencing.tombstone_key_problem(d.oid);
            IF problem IS NOT NULL THEN
                RAISE EXCEPTION 'table "%" cannot be protected with tombstones', d.relname USING ERRCODE = '0A000',
                      DETAIL = problem || ' A fenced DELETE records its token per primary key (a tombstone), and an INSERT of a deleted key is judged against it.',
                      HINT = 'Give it a primary key (not deferrable, of ordinary columns whose types have hash functions), or protect the table with tombstones => false: a row deleted and inserted again is then not judged against the token it was deleted with.';
            END IF;
        END LOOP;
    END IF;

    -- The floor the table's check has (its sixth argument), kept; a floor
    -- given raises it, the counter moved past it first.
    IF floor <= 0 THEN
        RAISE EXCEPTION 'floor must be positive' USING ERRCODE = '22023',
              DETAIL = 'Tokens are positive: a floor below 1 would make no token stale.';
    END IF;
    SELECT CASE WHEN a.arg ~ '^[0-9]{1,19}$' AND a.arg::numeric BETWEEN 1 AND 9223372036854775807 THEN a.arg::bigint END
      INTO old_floor
      FROM pg_trigger t
     CROSS JOIN LATERAL (
        SELECT convert_from(substring(t.tgargs, z.prev + 2, z.i - z.prev - 1), getdatabaseencoding()) AS arg
          FROM (SELECT g.i, lag(g.i, 1, -1) OVER (ORDER BY g.i) AS prev, row_number() OVER (ORDER BY g.i) AS n
                  FROM generate_series(0, length(t.tgargs) - 1) AS g(i)
                 WHERE get_byte(t.tgargs, g.i) = 0) AS z
         WHERE z.n = 6) AS a
     WHERE t.tgrelid = tbl AND t.tgname = '~fencing_enforce' AND t.tgparentid = 0
       AND t.tgfoid = 'fencing.enforce()'::regprocedure;
    new_floor := greatest(old_floor, floor);
    IF new_floor IS DISTINCT FROM old_floor THEN
        PERFORM fencing.advance_past(tbl, new_floor);
    END IF;
    IF new_floor IS NOT NULL THEN
        floor_arg := format(', %L', new_floor);
    END IF;

    IF EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = '~fencing_enforce') THEN
        EXECUTE format('DROP TRIGGER %I ON %I.%I', '~fencing_enforce', r.nspname, r.relname);
    END IF;
    EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I.%I FOR EACH ROW '
                   'EXECUTE FUNCTION fencing.enforce(%L, %L, %L, %L, %L%s)',
                   '~fencing_enforce', r.nspname, r.relname, col, allow_equal::text, on_stale, fence_deletes::text,
                   use_tombstones::text, floor_arg);
    -- (1.2) Enabled ALWAYS: it fires in replica mode too (logical
    -- replication's apply workers, session_replication_role = replica).
    -- Partitions' clones take it over, those created later too.
    EXECUTE format('ALTER TABLE %I.%I ENABLE ALWAYS TRIGGER %I', r.nspname, r.relname, '~fencing_enforce');
    FOR d IN SELECT t.oid, t.relname, t.nspname
               FROM fencing.reached_tables(tbl) t WHERE t.oid <> tbl AND NOT t.relispartition LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I.%I FOR EACH ROW '
                       'EXECUTE FUNCTION fencing.enforce(%L, %L, %L, %L, %L%s)',
                       '~fencing_enforce', d.nspname, d.relname, col, allow_equal::text, on_stale, fence_deletes::text,
                       use_tombstones::text, floor_arg);
        EXECUTE format('ALTER TABLE %I.%I ENABLE ALWAYS TRIGGER %I', d.nspname, d.relname, '~fencing_enforce');
    END LOOP;
    -- A child that also inherits from a table protected otherwise would be
    -- checked with one of two settings: refused.
    SELECT cc.relname AS child, pc.relname AS parent INTO d
      FROM pg_inherits i JOIN pg_class cc ON cc.oid = i.inhrelid JOIN pg_class pc ON pc.oid = i.inhparent
      JOIN pg_trigger pt ON pt.tgrelid = i.inhparent AND pt.tgname = '~fencing_enforce'
      JOIN pg_trigger ct ON ct.tgrelid = i.inhrelid AND ct.tgname = '~fencing_enforce' AND ct.tgparentid = 0
     WHERE pt.tgargs <> ct.tgargs
       AND i.inhrelid IN (SELECT t.oid FROM fencing.reached_tables(tbl) t WHERE t.oid <> tbl)
     LIMIT 1;
    IF d.child IS NOT NULL THEN
        RAISE EXCEPTION 'table "%" inherits from protected tables with different settings', d.child USING ERRCODE = '0A000',
              DETAIL = format('"%s" is protected with other settings than "%s"; a write through either reaches the rows of "%s", which can carry one check only.',
                              d.parent, r.relname, d.child),
              HINT = 'Protect the parent tables with the same settings.';
    END IF;
    -- (1.2) Tables the check now reaches that owned their protection before
    -- (protected before this one) keep their tombstones under themselves:
    -- they count under the owner the tables have now.
    IF use_tombstones THEN
        PERFORM fencing.join_tombstones(tbl);
    END IF;

    -- Tokens issued from now on must be newer than every token the table
    -- holds. advance_past_table moves the counter only within the clock bound
    -- (the clock in microseconds + 4 s), for every role: a table holding
    -- tokens past it and past the counter is refused (22003), so that no
    -- table can carry the counter every resource shares out of the clock
    -- bound (where restored copies could issue tokens again) or exhaust it.
    PERFORM fencing.advance_past_table(tbl);

    FOR r IN SELECT t.tgname FROM pg_trigger t
              WHERE t.tgrelid = tbl AND NOT t.tgisinternal AND t.tgenabled <> 'D'
                AND t.tgname > '~fencing_enforce' COLLATE "C"
                AND (t.tgtype & 2) <> 0 AND (t.tgtype & 1) <> 0 AND (t.tgtype & (4 | 16)) <> 0 LOOP
        RAISE WARNING 'trigger "%" fires after the fencing check', r.tgname
              USING DETAIL = 'Writes to the table are refused while a BEFORE ROW INSERT or UPDATE trigger fires after "~fencing_enforce".',
                    HINT = 'Rename the trigger so that its name sorts before "~fencing_enforce".';
    END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION fencing.protect(tbl regclass, token_column name DEFAULT NULL, allow_equal boolean DEFAULT false,
                                on_stale text DEFAULT 'error', fence_deletes boolean DEFAULT true,
                                tombstones boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM fencing.install_check(tbl, token_column, allow_equal, on_stale, fence_deletes, tombstones, NULL);
END
$fn$;

-- (1.2) Makes every token up to `floor` stale for a protected table (and its
-- partitions and inheritance children): a write with such a token is
-- rejected (23T01) whatever the row or its key's tombstone holds. For the
-- cut-over to a logical replica, where every token of the old primary must
-- be stale. Only raises the floor; moves the token counter past it first
-- (as fencing.advance_past, whose privileges it needs). Returns the floor.
CREATE FUNCTION fencing.raise_floor(tbl regclass, floor bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    p record;
BEGIN
    IF tbl IS NULL OR floor IS NULL THEN
        RAISE EXCEPTION 'table and floor must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = '42P01';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl AND pg_has_role(current_user, c.relowner, 'USAGE')) THEN
        RAISE EXCEPTION 'must be owner of table %', (SELECT c.relname FROM pg_class c WHERE c.oid = tbl)
              USING ERRCODE = '42501', HINT = 'Only the table''s owner or a superuser may raise its floor.';
    END IF;
    SELECT * INTO p FROM fencing.protected v WHERE v.tbl = raise_floor.tbl;
    IF p.tbl IS NULL THEN
        RAISE EXCEPTION 'table "%" is not protected by fencing', (SELECT c.relname FROM pg_class c WHERE c.oid = tbl)
              USING ERRCODE = '55000',
                    DETAIL = 'fencing.protected does not list it: it has no complete check of its own (a partition or an inheritance child has the check of the table it belongs to).',
                    HINT = 'Protect it with fencing.protect(table), or raise the floor of the table it belongs to.';
    END IF;
    PERFORM fencing.install_check(tbl, p.token_column, p.allow_equal, p.on_stale, p.fence_deletes, p.tombstones, floor);
    RETURN (SELECT v.floor FROM fencing.protected v WHERE v.tbl = raise_floor.tbl);
END
$fn$;

-------------------------------------------------------------------------------
-- (1.2) fencing.protected shows the table's floor (fencing.raise_floor), the
-- check's sixth argument; a check with a floor is listed as protection.
-------------------------------------------------------------------------------
CREATE OR REPLACE VIEW fencing.protected AS
SELECT t.tgrelid::regclass AS tbl,
       a[1]::name COLLATE "C" AS token_column,
       a[2] IN ('true', 't', 'on') AS allow_equal,
       a[3]::text                  AS on_stale,
       a[4] IN ('true', 't', 'on') AS fence_deletes,
       a[5] IN ('true', 't', 'on') AS tombstones,
       CASE WHEN a[6] ~ '^[0-9]{1,19}$' AND a[6]::numeric BETWEEN 1 AND 9223372036854775807 THEN a[6]::bigint END AS floor
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
   AND (t.tgnargs = 5 OR (t.tgnargs = 6 AND a[6] ~ '^[0-9]{1,19}$' AND a[6]::numeric <= 9223372036854775807))
   AND a[2] IN ('true', 't', 'on', 'false', 'f', 'off')
   AND a[3] IN ('error', 'skip')
   AND a[4] IN ('true', 't', 'on', 'false', 'f', 'off')
   AND a[5] IN ('true', 't', 'on', 'false', 'f', 'off');

-------------------------------------------------------------------------------
-- Logical replication does not write fencing's own tables (src/pg/replication.cpp).
-- A publication FOR ALL TABLES carries them (PostgreSQL publishes every
-- permanent table, an extension's too); a subscriber's replication workers
-- would load the publisher's fence state, secret, tombstones and settings
-- beside its own (the secret's copy fails on every retry: one row only).
-- These BEFORE ROW triggers, enabled ALWAYS, drop every row change a logical
-- replication worker makes to them; every other writer passes. Their names
-- sort before the tables' other BEFORE ROW triggers.
-------------------------------------------------------------------------------
CREATE FUNCTION fencing.local_state() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_local_state' LANGUAGE C;
REVOKE ALL ON FUNCTION fencing.local_state() FROM PUBLIC;
CREATE TRIGGER fence_state_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.fence_state
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.fence_state ENABLE ALWAYS TRIGGER fence_state_local;
CREATE TRIGGER key_secret_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.key_secret
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.key_secret ENABLE ALWAYS TRIGGER key_secret_local;
CREATE TRIGGER tombstones_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.tombstones
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.tombstones ENABLE ALWAYS TRIGGER tombstones_local;

-- (1.2) Tombstone runs: the tombstones of a DELETE of many rows, written
-- together when its statement ends, as rows of up to 960 key hashes (each
-- row a narrow range of them, 8 bytes each in the machine's order) that
-- share the DELETE's token (src/pg/tombstone_runs.cpp). A key's tombstone
-- is the newest token of its row in fencing.tombstones and of the runs that
-- hold its hash. Private, written by the module and not dumped, like
-- fencing.tombstones; tbl and token are its first and third columns there
-- too.
CREATE TABLE fencing.tombstone_runs (
    tbl        oid         NOT NULL,   -- as in fencing.tombstones
    lo         bigint      NOT NULL,   -- the least key hash of the row
    token      bigint      NOT NULL,   -- the token the rows were deleted with
    deleted_at timestamptz NOT NULL,   -- when
    hi         bigint      NOT NULL,   -- the greatest key hash of the row
    key_hashes bytea       NOT NULL    -- the key hashes, in no order
);
ALTER TABLE fencing.tombstone_runs ALTER COLUMN key_hashes SET STORAGE PLAIN;
CREATE INDEX tombstone_runs_key ON fencing.tombstone_runs (tbl, token, lo, hi);
COMMENT ON TABLE fencing.tombstone_runs IS 'Per protected table: the keys a DELETE of many rows removed, with its token';
CREATE TRIGGER tombstone_runs_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.tombstone_runs
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.tombstone_runs ENABLE ALWAYS TRIGGER tombstone_runs_local;
CREATE TRIGGER notify_settings_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.notify_settings
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.notify_settings ENABLE ALWAYS TRIGGER notify_settings_local;

-------------------------------------------------------------------------------
-- The checks fire in replica mode too (1.2): a logical replication apply
-- worker (and a session with session_replication_role = replica) runs only
-- triggers enabled ALWAYS or REPLICA, and wrote protected rows unjudged.
-- protect() and the event triggers now enable the check ALWAYS; the checks
-- of tables protected before are enabled ALWAYS here, each by itself (a
-- check its table's owner disabled stays disabled). On a subscriber, a stale
-- replicated change is skipped and counted, never an error (src/core/decision).
-------------------------------------------------------------------------------
DO $do$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT n.nspname, c.relname
               FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE g.tgname = '~fencing_enforce' AND g.tgfoid = 'fencing.enforce()'::regprocedure
                AND g.tgenabled = 'O'
              ORDER BY g.tgparentid <> 0, c.oid LOOP
        EXECUTE format('ALTER TABLE ONLY %I.%I ENABLE ALWAYS TRIGGER %I', t.nspname, t.relname, '~fencing_enforce');
    END LOOP;
END
$do$;

-------------------------------------------------------------------------------
-- fencing's own checks of rows written by SQL fire in replica mode too: a
-- role allowed to set session_replication_role (PostgreSQL 15 lets a
-- superuser GRANT SET on it) wrote fence state beyond the clock bound, and
-- any number of notification settings, past them. Logical replication's
-- workers meet the *_local triggers first (their names sort first), which
-- drop their changes.
-------------------------------------------------------------------------------
ALTER TABLE fencing.fence_state ENABLE ALWAYS TRIGGER fence_state_merge;
ALTER TABLE fencing.fence_state ENABLE ALWAYS TRIGGER fence_state_loaded;
ALTER TABLE fencing.key_secret ENABLE ALWAYS TRIGGER key_secret_replace;
ALTER TABLE fencing.key_secret ENABLE ALWAYS TRIGGER key_secret_kept;
ALTER TABLE fencing.notify_settings ENABLE ALWAYS TRIGGER notify_settings_changed;

-------------------------------------------------------------------------------
-- What \dx+, \df+ and \d+ show: a comment on every object of the extension.
-------------------------------------------------------------------------------
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
COMMENT ON FUNCTION fencing.raise_floor(regclass, bigint) IS
    'Makes every token up to a floor stale for a protected table (moves the counter past it first)';
COMMENT ON FUNCTION fencing.install_check(regclass, name, boolean, text, boolean, boolean, bigint) IS
    'Installs the check of protect and raise_floor on a table and the tables a write through it reaches';
COMMENT ON FUNCTION fencing.enforce() IS 'The trigger of protected tables: rejects stale row writes';
COMMENT ON FUNCTION fencing.forget(interval) IS 'Removes the fence state of resources idle for longer than the interval';
COMMENT ON FUNCTION fencing.forget_tombstones(interval) IS 'Removes tombstones older than the interval';
COMMENT ON FUNCTION fencing.advance_past(regclass, bigint) IS 'Moves the token counter past a token (superuser, within the clock bound)';
COMMENT ON FUNCTION fencing.advance_past_table(regclass) IS 'Moves the token counter past the largest token of a table its caller owns (used by protect)';
COMMENT ON FUNCTION fencing.tombstone_key_problem(regclass) IS 'Why a table''s primary key cannot carry tombstones, or NULL (used by protect)';
CREATE FUNCTION fencing.join_tombstones(tbl regclass)
    RETURNS bigint AS 'MODULE_PATHNAME', 'fencing_join_tombstones' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION fencing.join_tombstones(regclass) IS 'Moves the tombstones the tables a protected table reaches kept under earlier owners to their owner now (used by protect)';
COMMENT ON FUNCTION fencing.reached_tables(regclass) IS
    'The tables a write through a table reaches: itself, its partitions and inheritance children (used by protect)';
COMMENT ON FUNCTION fencing.trigger_args(bytea) IS 'Decodes a protection trigger''s arguments';
COMMENT ON FUNCTION fencing.set_notify(text, boolean) IS 'Enables or disables the lock-event notifications of a resource (NULL: every resource)';
COMMENT ON FUNCTION fencing.reset_stats() IS 'Sets this database''s statistics back to zero';
COMMENT ON FUNCTION fencing.stats_data() IS 'The counters behind fencing.stats';
COMMENT ON FUNCTION fencing.table_stats_data() IS 'The counters behind fencing.table_stats';
COMMENT ON FUNCTION fencing.local_state() IS 'Drops the row changes logical replication workers make to fencing''s own tables';
COMMENT ON FUNCTION fencing.lock_delays() IS 'The lost grants in their lock-delay, kept by the supervisor (behind fencing.locks)';
COMMENT ON FUNCTION fencing.fence_state_loaded() IS 'Keeps the token counter past rows loaded into fencing.fence_state';
COMMENT ON FUNCTION fencing.fence_state_merge() IS 'Keeps one row per resource in fencing.fence_state, the newest';
COMMENT ON FUNCTION fencing.key_secret_replace() IS 'Guards the resource key secret against changes while locks are held';
COMMENT ON FUNCTION fencing.notify_settings_changed() IS 'Brings rows written into fencing.notify_settings to every session, within the bound';
COMMENT ON FUNCTION fencing.ddl_command_start() IS 'Checks DDL that would change what protected tables check';
COMMENT ON FUNCTION fencing.ddl_command_end() IS 'Checks DDL that would change what protected tables check';
COMMENT ON FUNCTION fencing.sql_drop() IS 'Forgets the fencing state of dropped tables';
-- (1.2) ALTER TYPE too: a composite type's attributes changed with CASCADE
-- change the primary keys of the tables using it, which tombstones are
-- hashed under.
DROP EVENT TRIGGER fencing_ddl_command_start;
DROP EVENT TRIGGER fencing_ddl_command_end;
CREATE EVENT TRIGGER fencing_ddl_command_start ON ddl_command_start
    WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'ALTER DOMAIN', 'ALTER FOREIGN TABLE', 'CREATE VIEW', 'DROP TYPE', 'DROP DOMAIN',
                 'DROP COLLATION', 'DROP EXTENSION', 'DROP TABLE', 'DROP VIEW', 'DROP MATERIALIZED VIEW', 'DROP FOREIGN TABLE', 'DROP SCHEMA',
                 'DROP OWNED', 'ALTER OPERATOR FAMILY', 'DROP OPERATOR CLASS', 'DROP OPERATOR FAMILY',
                 'CREATE OPERATOR CLASS', 'CREATE FUNCTION')
    EXECUTE FUNCTION fencing.ddl_command_start();
CREATE EVENT TRIGGER fencing_ddl_command_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'ALTER TABLE', 'ALTER FOREIGN TABLE', 'CREATE SCHEMA',
                 'ALTER TYPE', 'ALTER DOMAIN', 'CREATE VIEW', 'DROP TYPE', 'DROP DOMAIN', 'DROP COLLATION', 'DROP EXTENSION',
                 'DROP TABLE', 'DROP VIEW', 'DROP MATERIALIZED VIEW', 'DROP FOREIGN TABLE', 'DROP SCHEMA',
                 'DROP OWNED', 'ALTER OPERATOR FAMILY', 'DROP OPERATOR CLASS', 'DROP OPERATOR FAMILY',
                 'CREATE OPERATOR CLASS', 'CREATE FUNCTION')
    EXECUTE FUNCTION fencing.ddl_command_end();
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

-------------------------------------------------------------------------------
-- (1.2) A retired database: the old primary of a cut-over to a logical
-- replica (docs/operations.md). Once fencing.retire() has put its one row
-- here, no acquisition succeeds in the database (55000), nor in a copy of
-- it (CREATE DATABASE ... TEMPLATE) or a restore of its dump, which carry
-- the row: otherwise a fresh counter there would jump above every token of
-- the database that took over. Only a superuser can take the row out
-- (there is no GRANT on the table). Logical replication does not carry it
-- (a subscriber is the database that takes over).
-------------------------------------------------------------------------------
CREATE TABLE fencing.retired (
    retired_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE UNIQUE INDEX retired_one_row ON fencing.retired ((true));
SELECT pg_catalog.pg_extension_config_dump('fencing.retired', '');
CREATE TRIGGER retired_local BEFORE INSERT OR UPDATE OR DELETE ON fencing.retired
    FOR EACH ROW EXECUTE FUNCTION fencing.local_state();
ALTER TABLE fencing.retired ENABLE ALWAYS TRIGGER retired_local;
COMMENT ON TABLE fencing.retired IS 'One row once the database is retired: it issues no fencing tokens';
-- What pg_dump and a restore by the database's owner need (as for
-- fencing.key_secret): reading it and carrying the row into the restored
-- database. Taking the row out is a superuser's (fencing.local_state()).
GRANT SELECT, INSERT ON fencing.retired TO pg_database_owner;
CREATE FUNCTION fencing.retire() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_retire' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.retire() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.retire() TO pg_database_owner;
COMMENT ON FUNCTION fencing.retire() IS 'Retires this database: no acquisition succeeds in it, its copies or restores';
