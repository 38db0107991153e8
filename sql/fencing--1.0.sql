-- fencing 1.0: fencing tokens as a property of the database.
\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-------------------------------------------------------------------------------
-- The token type: a domain over bigint, so that every driver reads and writes
-- it as its native 64-bit integer (a domain's values travel with bigint's type
-- OID and wire format) and every bigint operator, cast, index and aggregate
-- applies. Bad values: not a number 22P02, outside bigint 22003, zero or
-- negative 23514 (constraint token_positive).
-------------------------------------------------------------------------------
-- PUBLIC gets no USAGE on schema fencing: GRANT USAGE ON SCHEMA fencing TO
-- app_role is what lets a role acquire tokens and call the functions. Writes
-- to protected tables need nothing of fencing: the trigger is resolved by OID
-- and looks up the token type without a schema privilege check. The state
-- tables stay private whatever is granted (see the REVOKEs below).

CREATE DOMAIN fencing.token AS bigint CONSTRAINT token_positive CHECK (VALUE > 0);
COMMENT ON DOMAIN fencing.token IS 'fencing token: a strictly increasing 64-bit lock-grant number (1 .. 9223372036854775807)';

-------------------------------------------------------------------------------
-- Fence state. Tokens come from one database-wide counter (so every resource's
-- tokens are strictly increasing, and one log-ahead WAL record serves many
-- acquisitions); the per-resource row remembers the latest token and the
-- holder's grant time and lease. Rows are written by the module only: token,
-- granted_at and lease_ms in place with WAL-logged page updates, the row
-- itself once per resource. Both are part of pg_dump's output.
-------------------------------------------------------------------------------
CREATE SEQUENCE fencing.token_seq AS bigint MINVALUE 1 NO MAXVALUE START 1 CACHE 1 NO CYCLE;

-- The counter starts at the current time in microseconds since 1970, not at 1,
-- and the module moves it to the clock + 2 s at its first token: a counter
-- page the module has not stamped itself (new, copied, restored, replayed, or
-- from before a restart) starts there. No WAL record of the counter ever
-- covers more than 2 s past the clock, so no token exceeds the clock at its
-- issue by more than 2 s. A counter created later (CREATE EXTENSION after DROP
-- EXTENSION, or into the database a dump is restored into) thus starts above
-- every token an earlier one issued, however often that one crashed, while
-- the clock does not go back (src/core/counter.hpp). For the same reason the
-- counter's value is not part of pg_dump's output: the fresh counter of the
-- restored database is already past it, a dumped value would only move it
-- back.
SELECT pg_catalog.setval('fencing.token_seq',
    GREATEST(1, (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint), false);

-- One row per resource, found by its lock key and its name: two names with
-- the same key (a collision, which nobody can bring about without the secret
-- below) share the lock but never a row.
CREATE TABLE fencing.fence_state (
    key        bigint  NOT NULL,   -- 64-bit lock key of resource (fencing.resource_key)
    token      bigint  NOT NULL,   -- latest token issued for resource
    granted_at integer NOT NULL,   -- seconds since 2000-01-01 UTC of the latest grant
    lease_ms   integer NOT NULL,   -- lease of the latest grant in milliseconds, 0 for none
    resource   text    NOT NULL COLLATE "C",
    CONSTRAINT fence_state_pkey PRIMARY KEY (key, resource)
) WITH (fillfactor = 100);
ALTER TABLE fencing.fence_state ALTER COLUMN resource SET STORAGE PLAIN;

SELECT pg_catalog.pg_extension_config_dump('fencing.fence_state', '');

-- Rows that arrive by SQL (pg_restore's COPY of the dumped fence state; the
-- module itself writes without SQL) move the counter past their tokens, so a
-- restored database continues above every old token even when its clock is
-- behind the old one's counter.
CREATE FUNCTION fencing.fence_state_loaded() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    top bigint;
BEGIN
    SELECT max(l.token) INTO top FROM loaded_rows l;
    IF top IS NOT NULL THEN
        PERFORM fencing.advance_past('fencing.fence_state'::regclass, top);
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION fencing.fence_state_loaded() FROM PUBLIC;
REVOKE ALL ON fencing.fence_state FROM PUBLIC;
REVOKE ALL ON SEQUENCE fencing.token_seq FROM PUBLIC;
-- The database's owner (not a superuser) can dump and restore the database:
-- pg_dump reads the fence state (and locks it, which needs USAGE on the
-- schema); a restore loads it back with COPY, whose rows move the counter
-- past their tokens (fence_state_loaded, through advance_past, which allows
-- that to a role that may insert into fencing.fence_state, within the clock
-- bound: rows past it are refused for any role but a superuser). The
-- owner thus uses fencing in its database without a further grant.
GRANT USAGE ON SCHEMA fencing TO pg_database_owner;
GRANT SELECT, INSERT ON fencing.fence_state TO pg_database_owner;
GRANT SELECT ON SEQUENCE fencing.token_seq TO pg_database_owner;

-------------------------------------------------------------------------------
-- The resource key secret. A resource's lock key (fence_state.key, the lock
-- tag) is SipHash-2-4 of its name under this secret: 16 bytes from the
-- server's strong random source, made for this database at CREATE EXTENSION.
-- Whoever cannot read it cannot compute keys outside the database, nor build
-- two names with the same key. Only the extension's owner and the database's
-- owner may read it (a dump needs it); the module reads it on every caller's
-- behalf. It is part of pg_dump's output, and CREATE DATABASE copies it.
--
-- One row. A row inserted (a restore's COPY; INSERT ... DEFAULT VALUES makes
-- a new random one) or updated replaces the secret: the trigger removes the
-- other row and gives every fence state row its key under the new secret, in
-- that transaction; each backend drops its copy when the transaction commits.
-- So the restored secret wins over the one the restore's CREATE EXTENSION
-- made, whether the fence state is loaded before or after it. Refused while
-- any fencing lock of the database is held or awaited (55006): those locks
-- carry keys of the old secret. It is never removed (DELETE and TRUNCATE are
-- refused, 55000).
-------------------------------------------------------------------------------
CREATE TABLE fencing.key_secret (
    secret bytea NOT NULL CONSTRAINT key_secret_length CHECK (pg_catalog.octet_length(secret) = 16)
);
CREATE UNIQUE INDEX key_secret_one_row ON fencing.key_secret ((true));
CREATE FUNCTION fencing.key_secret_replace() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_key_secret_replace' LANGUAGE C;
REVOKE ALL ON FUNCTION fencing.key_secret_replace() FROM PUBLIC;
CREATE TRIGGER key_secret_replace BEFORE INSERT OR UPDATE OR DELETE ON fencing.key_secret
    FOR EACH ROW EXECUTE FUNCTION fencing.key_secret_replace();
CREATE TRIGGER key_secret_kept BEFORE TRUNCATE ON fencing.key_secret
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.key_secret_replace();
SELECT pg_catalog.pg_extension_config_dump('fencing.key_secret', '');
REVOKE ALL ON fencing.key_secret FROM PUBLIC;
GRANT SELECT, INSERT ON fencing.key_secret TO pg_database_owner;
INSERT INTO fencing.key_secret DEFAULT VALUES;

-------------------------------------------------------------------------------
-- Acquisition and release.
-------------------------------------------------------------------------------
-- A session that already holds the resource gets an error from a plain
-- re-acquire (so that a pooled connection handed over with a lock still held
-- never shares a token between two workers); reentrant => true nests the hold
-- and returns the same token.
CREATE FUNCTION fencing.acquire(resource text, wait interval DEFAULT NULL, lease interval DEFAULT NULL,
                                reentrant boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_acquire' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.try_acquire(resource text, reentrant boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_try_acquire' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.acquire_xact(resource text, wait interval DEFAULT NULL, lease interval DEFAULT NULL,
                                     reentrant boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_acquire_xact' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.try_acquire_xact(resource text, reentrant boolean DEFAULT false)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_try_acquire_xact' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.release(resource text)
    RETURNS boolean AS 'MODULE_PATHNAME', 'fencing_release' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.release_all()
    RETURNS integer AS 'MODULE_PATHNAME', 'fencing_release_all' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.current(resource text)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_current' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.validate(resource text, token bigint)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_validate' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fencing.renew(resource text)
    RETURNS interval AS 'MODULE_PATHNAME', 'fencing_renew' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Sets the current transaction's token for protected writes that carry none,
-- exactly as SET LOCAL fencing.token does, but with a bind parameter.
CREATE FUNCTION fencing.use(token bigint)
    RETURNS fencing.token AS 'MODULE_PATHNAME', 'fencing_use' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Removes the fence state of resources nobody holds or awaits whose latest
-- grant is at least `idle` old; returns how many. Their next tokens still come
-- from the database-wide counter. Not for PUBLIC: the extension's owner
-- grants EXECUTE to the role that runs retention.
CREATE FUNCTION fencing.forget(idle interval)
    RETURNS bigint AS 'MODULE_PATHNAME', 'fencing_forget' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.forget(interval) FROM PUBLIC;

CREATE FUNCTION fencing.version() RETURNS text
    AS 'MODULE_PATHNAME', 'fencing_version' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The 64-bit lock key of a resource name (the value in fence_state.key) under
-- this database's secret: not IMMUTABLE, a new secret changes it.
CREATE FUNCTION fencing.resource_key(resource text)
    RETURNS bigint AS 'MODULE_PATHNAME', 'fencing_resource_key' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

-------------------------------------------------------------------------------
-- fencing.locks: one row per held or awaited fencing lock.
-- Lock tags: advisory tags of our own (field4 = 32257 /* kResourceTagKind */, and
-- 32258 /* kTokenTagKind */ for token tags), so applications' pg_advisory_lock
-- keys (field4 1 and 2) never meet ours. The numbers are defined in
-- src/pg/lock_tags.hpp; the build checks that each number here names its
-- constant there (tests/scripts/check_lock_tags.sh). Session holds are
-- ExclusiveLock, transaction holds ShareRowExclusiveLock.
-------------------------------------------------------------------------------
DO $$
BEGIN
  EXECUTE format($v$
    CREATE VIEW fencing.locks AS
    SELECT s.resource,
           -- Like pg_stat_activity: other roles' tokens only for pg_read_all_stats.
           (CASE WHEN l.granted
                     AND (l.pid = pg_catalog.pg_backend_pid()
                          OR (a.usesysid IS NOT NULL AND pg_catalog.pg_has_role(a.usesysid, 'MEMBER'))
                          OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER'))
                THEN s.token END)::fencing.token AS token,
           l.pid,
           CASE l.mode WHEN 'ExclusiveLock' THEN 'session' ELSE 'transaction' END AS scope,
           l.granted,
           CASE WHEN l.granted THEN pg_catalog.to_timestamp(946684800 + s.granted_at) ELSE %s END AS since,
           a.application_name,
           CASE WHEN l.granted AND s.lease_ms > 0 THEN pg_catalog.make_interval(secs => s.lease_ms / 1000.0) END AS lease,
           CASE WHEN l.granted AND s.lease_ms > 0 THEN
                (CASE WHEN a.state = 'active' THEN pg_catalog.now() ELSE a.state_change END)
                + pg_catalog.make_interval(secs => s.lease_ms / 1000.0) END AS expires_at
      FROM pg_catalog.pg_locks l
      -- The row of the lock's key. Two names with the same key (a collision)
      -- share the lock, and the one with the latest grant holds it: nobody
      -- else can be granted the key while it is held.
      LEFT JOIN LATERAL (SELECT r.resource, r.token, r.granted_at, r.lease_ms FROM fencing.fence_state r
                          WHERE r.key = ((l.classid::bigint << 32) | l.objid::bigint)
                          ORDER BY r.token DESC LIMIT 1) s ON true
      LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.objsubid = 32257 /* kResourceTagKind */
       AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
  $v$, CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 140000 THEN 'l.waitstart' ELSE 'NULL::timestamptz' END);
END
$$;
GRANT SELECT ON fencing.locks TO PUBLIC;

-------------------------------------------------------------------------------
-- Enforcement: the trigger function and protect/unprotect.
-------------------------------------------------------------------------------
CREATE FUNCTION fencing.enforce() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_enforce' LANGUAGE C;

-- Decodes pg_trigger.tgargs into text[] (used by fencing.protected).
CREATE FUNCTION fencing.trigger_args(bytea) RETURNS text[]
    AS 'MODULE_PATHNAME', 'fencing_trigger_args' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- Not for PUBLIC: the view (owned by the extension's owner) calls it with its
-- owner's rights.
REVOKE ALL ON FUNCTION fencing.trigger_args(bytea) FROM PUBLIC;

-- Moves the token counter past `floor` (never backwards); only the table's
-- owner may, and only a superuser past the clock bound (the clock in
-- microseconds + 4 s). Not for PUBLIC: a floor of the caller's choosing could
-- move the counter every resource shares to its end. Used by the restore
-- trigger of fencing.fence_state.
CREATE FUNCTION fencing.advance_past(tbl regclass, floor bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fencing_advance_past' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.advance_past(regclass, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.advance_past(regclass, bigint) TO pg_database_owner;

-- Moves the token counter past the largest token of a table protected by
-- fencing (the floor comes from the table, not from the caller); only the
-- table's owner may, and only within the clock bound, for every role (22003
-- beyond). Used by fencing.protect, which runs with its caller's rights.
CREATE FUNCTION fencing.advance_past_table(tbl regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fencing_advance_past_table' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-------------------------------------------------------------------------------
-- Tombstones: per (protected table, primary key) the token of the DELETE (or
-- key-changing UPDATE) that removed the key; a later INSERT of the key is
-- judged against it (src/pg/tombstones.cpp). Written by the module under the
-- writer's transaction, never through SQL; private like the fence state.
-- Not part of pg_dump's output (table OIDs and key hashes would not carry
-- over): a restored database starts without tombstones.
-------------------------------------------------------------------------------
CREATE TABLE fencing.tombstones (
    tbl        oid         NOT NULL,   -- the table owning the protection: the top-most protected ancestor of the row's table, or that table
    key_hash   bigint      NOT NULL,   -- 64-bit hash of the row's primary key, by its columns' hash functions
    token      bigint      NOT NULL,   -- the token the row was deleted with (the newest, if deleted again)
    deleted_at timestamptz NOT NULL,   -- when
    CONSTRAINT tombstones_pkey PRIMARY KEY (tbl, key_hash)
);
-- No GRANT: only its owner (the extension's installer) may read it. A REVOKE
-- FROM PUBLIC here would be a no-op that pg_upgrade does not carry (it keeps
-- no initial privileges equal to the default), so the catalog after
-- pg_upgrade would differ from a fresh install's.

-- Removes tombstones recorded at least `older_than` ago; returns how many
-- (at most 10000 per call). Not for PUBLIC, like forget.
CREATE FUNCTION fencing.forget_tombstones(older_than interval)
    RETURNS bigint AS 'MODULE_PATHNAME', 'fencing_forget_tombstones' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fencing.forget_tombstones(interval) FROM PUBLIC;

-- Why a table's primary key cannot carry tombstones (a sentence), or NULL.
-- For the table's owner (used by protect).
CREATE FUNCTION fencing.tombstone_key_problem(tbl regclass)
    RETURNS text AS 'MODULE_PATHNAME', 'fencing_tombstone_key_problem' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION fencing.protect(tbl regclass, token_column name DEFAULT NULL, allow_equal boolean DEFAULT false,
                                on_stale text DEFAULT 'error', fence_deletes boolean DEFAULT true,
                                tombstones boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
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
    FOR d IN WITH RECURSIVE tree(rel) AS (
                 SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = tbl
                 UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.rel)
             SELECT c.oid, c.relname, c.relkind, c.relispartition, n.nspname
               FROM tree JOIN pg_class c ON c.oid = tree.rel JOIN pg_namespace n ON n.oid = c.relnamespace LOOP
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
        FOR d IN SELECT tbl::oid AS oid, r.relname AS relname
                 UNION ALL
                 (WITH RECURSIVE tree(rel) AS (
                      SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = tbl
                      UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.rel)
                  SELECT c.oid, c.relname FROM tree JOIN pg_class c ON c.oid = tree.rel WHERE NOT c.relispartition) LOOP
            IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = d.oid AND c.relpersistence = 't') THEN
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

    IF EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = '~fencing_enforce') THEN
        EXECUTE format('DROP TRIGGER %I ON %I.%I', '~fencing_enforce', r.nspname, r.relname);
    END IF;
    EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I.%I FOR EACH ROW '
                   'EXECUTE FUNCTION fencing.enforce(%L, %L, %L, %L, %L)',
                   '~fencing_enforce', r.nspname, r.relname, col, allow_equal::text, on_stale, fence_deletes::text,
                   use_tombstones::text);
    FOR d IN WITH RECURSIVE tree(rel) AS (
                 SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = tbl
                 UNION SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.rel)
             SELECT c.oid, c.relname, n.nspname
               FROM tree JOIN pg_class c ON c.oid = tree.rel JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE NOT c.relispartition LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I.%I FOR EACH ROW '
                       'EXECUTE FUNCTION fencing.enforce(%L, %L, %L, %L, %L)',
                       '~fencing_enforce', d.nspname, d.relname, col, allow_equal::text, on_stale, fence_deletes::text,
                       use_tombstones::text);
    END LOOP;
    -- A child that also inherits from a table protected otherwise would be
    -- checked with one of two settings: refused.
    SELECT cc.relname AS child, pc.relname AS parent INTO d
      FROM pg_inherits i JOIN pg_class cc ON cc.oid = i.inhrelid JOIN pg_class pc ON pc.oid = i.inhparent
      JOIN pg_trigger pt ON pt.tgrelid = i.inhparent AND pt.tgname = '~fencing_enforce'
      JOIN pg_trigger ct ON ct.tgrelid = i.inhrelid AND ct.tgname = '~fencing_enforce' AND ct.tgparentid = 0
     WHERE pt.tgargs <> ct.tgargs
       AND i.inhrelid IN (WITH RECURSIVE tree(rel) AS (
                              SELECT i2.inhrelid FROM pg_inherits i2 WHERE i2.inhparent = tbl
                              UNION SELECT i2.inhrelid FROM pg_inherits i2 JOIN tree ON i2.inhparent = tree.rel)
                          SELECT rel FROM tree)
     LIMIT 1;
    IF d.child IS NOT NULL THEN
        RAISE EXCEPTION 'table "%" inherits from protected tables with different settings', d.child USING ERRCODE = '0A000',
              DETAIL = format('"%s" is protected with other settings than "%s"; a write through either reaches the rows of "%s", which can carry one check only.',
                              d.parent, r.relname, d.child),
              HINT = 'Protect the parent tables with the same settings.';
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

CREATE FUNCTION fencing.unprotect(tbl regclass) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    r          record;
    parent_tbl name;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = '42P01';
    END IF;
    SELECT c.relname, c.relowner, n.nspname INTO r
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT pg_has_role(current_user, r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', r.relname USING ERRCODE = '42501',
              HINT = 'Only the table''s owner or a superuser may protect or unprotect it.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = '~fencing_enforce' AND t.tgparentid = 0) THEN
        RETURN false;
    END IF;
    -- A child of a protected table keeps its check while writes through the
    -- parent reach it.
    SELECT pc.relname INTO parent_tbl
      FROM pg_inherits i JOIN pg_trigger t ON t.tgrelid = i.inhparent JOIN pg_class pc ON pc.oid = i.inhparent
     WHERE i.inhrelid = tbl
       AND t.tgname = '~fencing_enforce' AND t.tgfoid = 'fencing.enforce()'::regprocedure
     ORDER BY i.inhseqno LIMIT 1;
    IF parent_tbl IS NOT NULL THEN
        RAISE EXCEPTION 'table "%" inherits from protected table "%"', r.relname, parent_tbl USING ERRCODE = '55000',
              DETAIL = 'Writes through the parent reach its rows, so it keeps its check while the parent is protected.',
              HINT = 'Unprotect the parent first, or detach the table from it (ALTER TABLE ... NO INHERIT).';
    END IF;
    EXECUTE format('DROP TRIGGER %I ON %I.%I', '~fencing_enforce', r.nspname, r.relname);
    RETURN true;
END
$fn$;

CREATE VIEW fencing.protected AS
SELECT t.tgrelid::regclass AS tbl,
       a[1]::name COLLATE "C" AS token_column,
       a[2]::boolean       AS allow_equal,
       a[3]::text          AS on_stale,
       a[4]::boolean       AS fence_deletes,
       a[5]::boolean       AS tombstones
  FROM pg_catalog.pg_trigger t
 CROSS JOIN LATERAL (SELECT fencing.trigger_args(t.tgargs)) AS x(a)
 WHERE t.tgfoid = 'fencing.enforce()'::pg_catalog.regprocedure
   AND NOT t.tgisinternal
   AND (t.tgparentid = 0);
GRANT SELECT ON fencing.protected TO PUBLIC;

CREATE TRIGGER fence_state_loaded AFTER INSERT ON fencing.fence_state
    REFERENCING NEW TABLE AS loaded_rows FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_state_loaded();

-------------------------------------------------------------------------------
-- Coverage: DDL that adds a table to, or removes one from, what a protected
-- table's writes reach keeps every such table checked (src/pg/coverage.cpp).
-- Inheritance children created or added later get the parent's check; a
-- table ATTACHed as a partition moves the counter past its tokens (its own
-- check, if any, makes way for the partitioned table's clone first); a
-- DETACHed partition keeps the check as its own. Event triggers need a
-- superuser to be created, as CREATE EXTENSION fencing does; they belong to
-- the extension (not dumped, recreated with it) and run with the rights of
-- the role that runs the DDL.
-------------------------------------------------------------------------------
CREATE FUNCTION fencing.ddl_command_start() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_ddl_command_start' LANGUAGE C;
CREATE FUNCTION fencing.ddl_command_end() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_ddl_command_end' LANGUAGE C;
REVOKE ALL ON FUNCTION fencing.ddl_command_start() FROM PUBLIC;
REVOKE ALL ON FUNCTION fencing.ddl_command_end() FROM PUBLIC;
CREATE EVENT TRIGGER fencing_ddl_command_start ON ddl_command_start
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION fencing.ddl_command_start();
CREATE EVENT TRIGGER fencing_ddl_command_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'ALTER TABLE', 'ALTER FOREIGN TABLE', 'CREATE SCHEMA')
    EXECUTE FUNCTION fencing.ddl_command_end();

-- Tombstones go with their table: a table dropped (DROP TABLE, a partition,
-- DROP SCHEMA ... CASCADE, DROP OWNED, whatever drops it) loses its
-- tombstones in the dropping transaction, so that a table that later gets
-- its OID does not meet them (a hierarchy's go with its root, under which
-- they are kept). Every command's dropped objects are looked at
-- (many commands can drop a table by a dependency). Temporary tables, which
-- PostgreSQL drops at the end of their session without event triggers, have
-- none (protect).
CREATE FUNCTION fencing.sql_drop() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_sql_drop' LANGUAGE C;
REVOKE ALL ON FUNCTION fencing.sql_drop() FROM PUBLIC;
CREATE EVENT TRIGGER fencing_sql_drop ON sql_drop
    EXECUTE FUNCTION fencing.sql_drop();
