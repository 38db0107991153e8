-- The enforcement API as pgTAP sees it: fencing.protect,
-- fencing.unprotect and fencing.enforce with their exact signatures, the
-- view fencing.protected, and the SQLSTATEs of the documented errors (23T01,
-- 42703, 42804, 42501, 22023). Everything runs in one transaction that is
-- rolled back. Tables are protected while empty (protect moves the token
-- counter past the tokens a table holds).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

BEGIN;
SELECT plan(110);

-- as_role(r, q): runs q as role r (an error propagates; the role switch is
-- undone either way, as the caller's subtransaction is rolled back).
CREATE SCHEMA t20;
CREATE FUNCTION t20.as_role(r name, q text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE q;
    RESET ROLE;
END $$;
-- value_as(r, q): the first column of q's first row, run as role r.
CREATE FUNCTION t20.value_as(r name, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE q INTO v;
    RESET ROLE;
    RETURN v;
END $$;
-- hint_of(q): the HINT of the error q raises.
CREATE FUNCTION t20.hint_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE h text;
BEGIN
    EXECUTE q;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
    RETURN h;
END $$;

--------------------------------------------------------------------------------
-- Signatures.
--------------------------------------------------------------------------------
SELECT has_function('fencing', 'protect', ARRAY['regclass', 'name', 'boolean', 'text', 'boolean', 'boolean'],
                    'fencing.protect(regclass, name, boolean, text, boolean, boolean)');
SELECT function_returns('fencing', 'protect', ARRAY['regclass', 'name', 'boolean', 'text', 'boolean', 'boolean'], 'void',
                        'fencing.protect returns void');
SELECT is((SELECT pg_get_function_arguments('fencing.protect(regclass,name,boolean,text,boolean,boolean)'::regprocedure)),
          'tbl regclass, token_column name DEFAULT NULL::name, allow_equal boolean DEFAULT false, on_stale text DEFAULT ''error''::text, fence_deletes boolean DEFAULT true, tombstones boolean DEFAULT NULL::boolean',
          'fencing.protect argument names and defaults');
SELECT has_function('fencing', 'unprotect', ARRAY['regclass'], 'fencing.unprotect(regclass)');
SELECT function_returns('fencing', 'unprotect', ARRAY['regclass'], 'boolean', 'fencing.unprotect returns boolean');
SELECT is((SELECT pg_get_function_arguments('fencing.unprotect(regclass)'::regprocedure)), 'tbl regclass',
          'fencing.unprotect argument name');
SELECT has_function('fencing', 'enforce', ARRAY[]::name[], 'fencing.enforce()');
SELECT function_returns('fencing', 'enforce', ARRAY[]::name[], 'trigger', 'fencing.enforce returns trigger');
SELECT function_lang_is('fencing', 'enforce', ARRAY[]::name[], 'c', 'fencing.enforce is a C function');
SELECT hasnt_function('fencing', 'protect', ARRAY['regclass'], 'no one-argument overload of fencing.protect');
SELECT has_view('fencing', 'protected', 'view fencing.protected');
SELECT columns_are('fencing', 'protected', ARRAY['tbl', 'token_column', 'allow_equal', 'on_stale', 'fence_deletes', 'tombstones', 'floor'],
                   'fencing.protected columns');
SELECT col_type_is('fencing', 'protected', 'tbl', 'regclass', 'protected.tbl is regclass');
SELECT col_type_is('fencing', 'protected', 'token_column', 'name', 'protected.token_column is name');
SELECT col_type_is('fencing', 'protected', 'allow_equal', 'boolean', 'protected.allow_equal is boolean');
SELECT col_type_is('fencing', 'protected', 'on_stale', 'text', 'protected.on_stale is text');
SELECT col_type_is('fencing', 'protected', 'fence_deletes', 'boolean', 'protected.fence_deletes is boolean');
SELECT col_type_is('fencing', 'protected', 'tombstones', 'boolean', 'protected.tombstones is boolean');
SELECT has_function('fencing', 'forget_tombstones', ARRAY['interval'], 'fencing.forget_tombstones(interval)');
SELECT function_returns('fencing', 'forget_tombstones', ARRAY['interval'], 'bigint', 'fencing.forget_tombstones returns bigint');
SELECT has_table('fencing', 'tombstones', 'table fencing.tombstones');
-- Like every name column of the catalogs, token_column has collation "C", so
-- rows of the view compare with name values (pgTAP's results_eq, record =).
SELECT is((SELECT attcollation FROM pg_attribute
            WHERE attrelid = 'fencing.protected'::regclass AND attname = 'token_column'),
          'pg_catalog."C"'::regcollation::oid, 'protected.token_column has the collation of type name');

--------------------------------------------------------------------------------
-- protect, the view, re-protect, unprotect.
--------------------------------------------------------------------------------
CREATE TABLE t20.acct (id int PRIMARY KEY, fence_token fencing.token, v text);
CREATE TABLE t20.rev (id int PRIMARY KEY, etcd_revision bigint);
CREATE TABLE t20.only_tok (id int PRIMARY KEY, tok fencing.token);
SELECT lives_ok($$SELECT fencing.protect('t20.acct')$$, 'protect with defaults');
SELECT lives_ok($$SELECT fencing.protect('t20.rev', 'etcd_revision', true)$$, 'protect a bigint column by name');
SELECT lives_ok($$SELECT fencing.protect('t20.only_tok')$$, 'protect finds the only fencing.token column');
SELECT results_eq(
    $$SELECT tbl, token_column::text COLLATE "default", allow_equal, on_stale, fence_deletes, tombstones FROM fencing.protected
       WHERE tbl::text LIKE 't20.%' ORDER BY tbl::text$$,
    $$VALUES ('t20.acct'::regclass, 'fence_token', false, 'error', true, true),
             ('t20.only_tok'::regclass, 'tok', false, 'error', true, true),
             ('t20.rev'::regclass, 'etcd_revision', true, 'error', true, true)$$,
    'fencing.protected lists each protected table with its settings (fence_deletes and tombstones by default)');
SELECT is((SELECT tgname::text FROM pg_trigger WHERE tgrelid = 't20.acct'::regclass), '~fencing_enforce',
          'the trigger is named "~fencing_enforce"');
SELECT is((SELECT (tgtype & (1 | 2 | 4 | 8 | 16))::int FROM pg_trigger WHERE tgrelid = 't20.acct'::regclass),
          1 | 2 | 4 | 8 | 16, 'BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW');
SELECT lives_ok($$SELECT fencing.protect('t20.acct', allow_equal => true, on_stale => 'skip', fence_deletes => true)$$,
                'protect again with other settings');
SELECT results_eq(
    $$SELECT tbl, token_column::text COLLATE "default", allow_equal, on_stale, fence_deletes FROM fencing.protected WHERE tbl = 't20.acct'::regclass$$,
    $$VALUES ('t20.acct'::regclass, 'fence_token', true, 'skip', true)$$,
    'protecting again replaces the settings');
SELECT is((SELECT count(*)::int FROM pg_trigger WHERE tgrelid = 't20.acct'::regclass), 1,
          'protecting again leaves one trigger');
SELECT lives_ok($$SELECT fencing.protect('t20.acct')$$, 'protect again with the defaults');
SELECT is(fencing.unprotect('t20.only_tok'), true, 'unprotect returns true when it removed the check');
SELECT is(fencing.unprotect('t20.only_tok'), false, 'unprotect returns false when the table was not protected');
SELECT is_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.only_tok'::regclass$$,
                'an unprotected table is not listed');

-- Partitioned table: listed once, partitions (also later ones) carry the check.
CREATE TABLE t20.part (id int, region text, fence_token fencing.token, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE t20.part_a PARTITION OF t20.part FOR VALUES IN ('a');
SELECT lives_ok($$SELECT fencing.protect('t20.part', on_stale => 'skip')$$, 'protect a partitioned table');
CREATE TABLE t20.part_b PARTITION OF t20.part FOR VALUES IN ('b');
CREATE TABLE t20.part_c (fence_token fencing.token, region text NOT NULL, id int NOT NULL);
ALTER TABLE t20.part ATTACH PARTITION t20.part_c FOR VALUES IN ('c');
SELECT results_eq(
    $$SELECT tbl, on_stale FROM fencing.protected WHERE tbl::text LIKE 't20.part%'$$,
    $$VALUES ('t20.part'::regclass, 'skip'::text)$$,
    'fencing.protected lists the partitioned table, not its partitions');
SELECT is((SELECT count(*)::int FROM pg_trigger
            WHERE tgrelid IN ('t20.part_a'::regclass, 't20.part_b'::regclass, 't20.part_c'::regclass)
              AND tgname = '~fencing_enforce'), 3,
          'existing, created and attached partitions carry the check');

--------------------------------------------------------------------------------
-- 23T01: stale writes.
--------------------------------------------------------------------------------
INSERT INTO t20.acct VALUES (1, 10, 'a');
SELECT throws_ok($$UPDATE t20.acct SET fence_token = 9 WHERE id = 1$$, '23T01',
                 'stale fence token for relation "acct"', 'UPDATE with a lower token: 23T01');
SELECT throws_ok($$UPDATE t20.acct SET fence_token = 10 WHERE id = 1$$, '23T01',
                 'stale fence token for relation "acct"', 'UPDATE with an equal token: 23T01');
SELECT throws_ok($$UPDATE t20.acct SET v = 'no token' WHERE id = 1$$, '23T01',
                 'stale fence token for relation "acct"', 'UPDATE that does not assign the token: 23T01');
SELECT throws_ok($$INSERT INTO t20.acct VALUES (2, NULL, 'b')$$, '23T01',
                 'stale fence token for relation "acct"', 'INSERT without a token: 23T01');
SELECT throws_ok($$INSERT INTO t20.acct VALUES (1, 5, 'c') ON CONFLICT (id) DO UPDATE SET fence_token = excluded.fence_token$$,
                 '23T01', 'stale fence token for relation "acct"', 'ON CONFLICT DO UPDATE with a lower token: 23T01');
SELECT lives_ok($$UPDATE t20.acct SET fence_token = 11 WHERE id = 1$$, 'UPDATE with a higher token is accepted');
INSERT INTO t20.rev VALUES (1, 500);
SELECT throws_ok($$UPDATE t20.rev SET etcd_revision = NULL$$, '23T01', 'stale fence token for relation "rev"',
                 'bigint column: UPDATE to NULL: 23T01');
SELECT throws_ok($$UPDATE t20.rev SET etcd_revision = 499$$, '23T01', 'stale fence token for relation "rev"',
                 'bigint column: lower revision: 23T01');
SELECT lives_ok($$UPDATE t20.rev SET etcd_revision = 500$$, 'bigint column with allow_equal: equal revision accepted');
SELECT is((SELECT fence_token::bigint FROM t20.acct WHERE id = 1), 11::bigint, 'the row holds the accepted token');
-- DELETE is fenced by default: it needs a transaction token newer than the row's.
SELECT throws_ok($$DELETE FROM t20.acct WHERE id = 1$$, '23T01', 'stale fence token for relation "acct"',
                 'DELETE without fencing.token on a table protected with the defaults: 23T01');
SELECT throws_ok($$SELECT set_config('fencing.token', '11', true); DELETE FROM t20.acct WHERE id = 1$$, '23T01',
                 'stale fence token for relation "acct"', 'DELETE with the row''s own token: 23T01');
SELECT lives_ok($$INSERT INTO t20.acct VALUES (99, 5, 'd'); SELECT set_config('fencing.token', '12', true); DELETE FROM t20.acct WHERE id = 99$$,
                'DELETE with a newer token is accepted');
SELECT is((SELECT count(*)::int FROM t20.acct WHERE id = 1), 1, 'the rejected DELETEs left the row');
SELECT lives_ok($$SELECT fencing.protect('t20.rev', 'etcd_revision', true, fence_deletes => false); DELETE FROM t20.rev WHERE false$$,
                'fence_deletes => false turns the DELETE check off');
SELECT is((SELECT fence_deletes FROM fencing.protected WHERE tbl = 't20.rev'::regclass), false,
          'fencing.protected shows fence_deletes false');
SELECT is((SELECT tombstones FROM fencing.protected WHERE tbl = 't20.rev'::regclass), false,
          'without fence_deletes there are no tombstones');
-- Tombstones: a fenced DELETE remembers its token per primary key.
SELECT lives_ok($$SELECT set_config('fencing.token', '20', true); DELETE FROM t20.acct WHERE id = 1$$,
                'a fenced DELETE');
SELECT throws_ok($$INSERT INTO t20.acct VALUES (1, 15, 'stale')$$, '23T01', 'stale fence token for relation "acct"',
                 'an INSERT of the deleted key with an older token: 23T01');
SELECT lives_ok($$INSERT INTO t20.acct VALUES (1, 21, 'newer')$$, 'with a newer token it is accepted');
CREATE TABLE t20.nopk (id int, fence_token fencing.token);
SELECT throws_ok($$SELECT fencing.protect('t20.nopk')$$, '0A000', 'table "nopk" cannot be protected with tombstones',
                 'a table without a primary key, with the defaults: 0A000');
SELECT lives_ok($$SELECT fencing.protect('t20.nopk', tombstones => false)$$, 'with tombstones => false it is protected');
SELECT throws_ok($$SELECT fencing.protect('t20.nopk', fence_deletes => false, tombstones => true)$$, '22023',
                 'tombstones need fence_deletes', 'tombstones without fence_deletes: 22023');

--------------------------------------------------------------------------------
-- 42703, 42804, 22023, 42501.
--------------------------------------------------------------------------------
CREATE TABLE t20.none (id int, v text);
CREATE TABLE t20.two (id int, a fencing.token, b fencing.token);
CREATE TABLE t20.texty (id int, fence_token text);
CREATE TABLE t20.inty (id int, fence_token integer);
SELECT throws_ok($$SELECT fencing.protect('t20.none')$$, '42703', NULL, 'no token column: 42703');
SELECT throws_ok($$SELECT fencing.protect('t20.two')$$, '42703', NULL,
                 'two token columns, none named fence_token: 42703');
SELECT throws_ok($$SELECT fencing.protect('t20.acct', 'nope')$$, '42703', NULL, 'token_column names no column: 42703');
SELECT matches(t20.hint_of($$SELECT fencing.protect('t20.none')$$), 'token_column',
               'the 42703 hint names the token_column argument');
SELECT throws_ok($$SELECT fencing.protect('t20.texty')$$, '42804', NULL, 'text column named fence_token: 42804');
SELECT throws_ok($$SELECT fencing.protect('t20.inty')$$, '42804', NULL, 'integer column: 42804');
SELECT throws_ok($$SELECT fencing.protect('t20.acct', 'v')$$, '42804', NULL, 'token_column of type text: 42804');
SELECT throws_ok($$SELECT fencing.protect('t20.acct', on_stale => 'ignore')$$, '22023', NULL, 'on_stale ''ignore'': 22023');
SELECT throws_ok($$SELECT fencing.protect('t20.acct', on_stale => NULL)$$, '22023', NULL, 'on_stale NULL: 22023');
SELECT results_eq(
    $$SELECT allow_equal, on_stale, fence_deletes FROM fencing.protected WHERE tbl = 't20.acct'::regclass$$,
    $$VALUES (false, 'error'::text, true)$$,
    'failed calls leave the settings alone');

-- A table that no longer exists (an OID kept from before a DROP): 42P01,
-- named by its OID, never "<NULL>".
CREATE TABLE t20.gone (id int, fence_token fencing.token);
SELECT 't20.gone'::regclass::oid AS gone_oid \gset
DROP TABLE t20.gone;
SELECT throws_ok(format('SELECT fencing.protect(%s::oid::regclass)', :gone_oid), '42P01',
                 format('relation with OID %s does not exist', :gone_oid), 'protect of a dropped table: 42P01');
SELECT throws_ok(format('SELECT fencing.unprotect(%s::oid::regclass)', :gone_oid), '42P01',
                 format('relation with OID %s does not exist', :gone_oid), 'unprotect of a dropped table: 42P01');

-- trigger_args never returns invalid text. Since 1.1 PUBLIC may not execute
-- it: fencing.protected decodes the trigger's arguments itself.
SELECT throws_ok($$SELECT fencing.trigger_args('\xff00'::bytea)$$, '22021', NULL,
                 'trigger_args of bytes that are not valid in the database encoding: 22021');
SELECT throws_ok($$SELECT fencing.trigger_args('\x61c3'::bytea)$$, '22021', NULL,
                 'trigger_args of a truncated multibyte character: 22021');
SELECT is(fencing.trigger_args('\x610062'::bytea), ARRAY['a', 'b'], 'trigger_args of valid arguments');
SELECT ok(NOT has_function_privilege('public', 'fencing.trigger_args(bytea)', 'EXECUTE'),
          'PUBLIC may not execute the support function fencing.trigger_args');
-- The view's own decoding: the arguments of a token column named with
-- characters outside ASCII and with a comma, and bytes planted in the
-- catalog that are not valid in the database encoding (22021, as
-- trigger_args gives; never invalid text).
CREATE TABLE t20."tök,n" (id int PRIMARY KEY, "Tök,en" fencing.token);
SELECT lives_ok($$SELECT fencing.protect('t20."tök,n"', token_column => 'Tök,en', allow_equal => true, on_stale => 'skip')$$,
                'protect with a token column named outside ASCII');
SELECT results_eq(
    $$SELECT token_column::text COLLATE "default", allow_equal, on_stale, fence_deletes, tombstones
        FROM fencing.protected WHERE tbl = 't20."tök,n"'::regclass$$,
    $$VALUES ('Tök,en', true, 'skip', true, true)$$,
    'fencing.protected decodes a token column name outside ASCII and every setting');
SELECT is((SELECT token_column::text COLLATE "default" FROM fencing.protected WHERE tbl = 't20."tök,n"'::regclass),
          (SELECT (fencing.trigger_args(tgargs))[1] FROM pg_trigger
            WHERE tgrelid = 't20."tök,n"'::regclass AND tgname = '~fencing_enforce'),
          'the view and trigger_args decode the same name');
SAVEPOINT planted;
UPDATE pg_trigger SET tgargs = '\xff00'::bytea || substring(tgargs FROM position('\x00'::bytea IN tgargs) + 1)
 WHERE tgrelid = 't20."tök,n"'::regclass AND tgname = '~fencing_enforce';
SELECT throws_ok($$SELECT token_column FROM fencing.protected WHERE tbl = 't20."tök,n"'::regclass$$, '22021', NULL,
                 'fencing.protected of trigger arguments not valid in the database encoding: 22021');
ROLLBACK TO SAVEPOINT planted;

SET LOCAL client_min_messages = warning;
CREATE ROLE t20_owner NOLOGIN;
CREATE ROLE t20_other NOLOGIN;
RESET client_min_messages;
GRANT USAGE ON SCHEMA fencing, t20 TO t20_owner, t20_other;
CREATE TABLE t20.owned (id int PRIMARY KEY, fence_token fencing.token, v text);
ALTER TABLE t20.owned OWNER TO t20_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON t20.owned TO t20_other;
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'SELECT fencing.protect(''t20.owned'')')$$, '42501', NULL,
                 'a non-owner may not protect: 42501');
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'SELECT fencing.protect(''t20.owned'')')$$, 'the owner may protect');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'SELECT fencing.unprotect(''t20.owned'')')$$, '42501', NULL,
                 'a non-owner may not unprotect: 42501');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'ALTER TABLE t20.owned DISABLE TRIGGER "~fencing_enforce"')$$,
                 '42501', NULL, 'a non-owner may not disable the trigger: 42501');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'DROP TRIGGER "~fencing_enforce" ON t20.owned')$$,
                 '42501', NULL, 'a non-owner may not drop the trigger: 42501');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'SET session_replication_role = replica')$$,
                 '42501', NULL, 'a non-owner may not set session_replication_role: 42501');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'UPDATE fencing.fence_state SET token = 1')$$,
                 '42501', NULL, 'a non-owner may not write fencing.fence_state: 42501');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'SELECT setval(''fencing.token_seq'', 1)')$$,
                 '42501', NULL, 'a non-owner may not setval fencing.token_seq: 42501');
SELECT lives_ok($$SELECT t20.as_role('t20_other', 'SELECT * FROM fencing.protected')$$,
                'a role with USAGE reads every column of fencing.protected');
SELECT is(t20.value_as('t20_other', $q$SELECT string_agg(token_column || '/' || allow_equal || '/' || on_stale, ',') FROM fencing.protected WHERE tbl = 't20.owned'::regclass$q$),
          'fence_token/false/error', 'and sees the protected table''s settings');
INSERT INTO t20.owned VALUES (1, 10, 'a');
SELECT throws_ok($$SELECT t20.as_role('t20_other', 'UPDATE t20.owned SET fence_token = 9')$$,
                 '23T01', 'stale fence token for relation "owned"', 'a writer with a stale token: 23T01');
-- The view lists a check only where it is in force. The owner may disable
-- it (a documented bypass): then the table is not listed.
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'ALTER TABLE t20.owned DISABLE TRIGGER "~fencing_enforce"')$$,
                'the owner may disable the check');
SELECT is_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.owned'::regclass$$,
                'fencing.protected does not list a table whose check is disabled');
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'ALTER TABLE t20.owned ENABLE REPLICA TRIGGER "~fencing_enforce"')$$,
                'or fires it in replica mode only');
SELECT is_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.owned'::regclass$$,
                'fencing.protected does not list a check that fires in replica mode only');
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'ALTER TABLE t20.owned ENABLE TRIGGER "~fencing_enforce"')$$,
                'the owner enables it again');
SELECT isnt_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.owned'::regclass$$,
                  'and the table is listed again');
-- Any role may attach fencing.enforce() to a table of its own (protect()
-- does): a trigger with arguments the check refuses, or one narrowed to some
-- events, is not listed, and never makes the view fail for anyone.
SELECT lives_ok($$SELECT t20.as_role('t20_other', $s$
    CREATE TEMP TABLE t20_junk (id int PRIMARY KEY, fence_token bigint);
    CREATE TRIGGER junk BEFORE INSERT OR UPDATE OR DELETE ON t20_junk FOR EACH ROW
        EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'nope');
    CREATE TEMP TABLE t20_narrow (id int PRIMARY KEY, fence_token bigint);
    CREATE TRIGGER narrow BEFORE INSERT ON t20_narrow FOR EACH ROW
        EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'false');
    CREATE TEMP TABLE t20_cols (id int PRIMARY KEY, fence_token bigint, v int);
    CREATE TRIGGER cols BEFORE INSERT OR UPDATE OF v OR DELETE ON t20_cols FOR EACH ROW
        EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'false');
    CREATE TEMP TABLE t20_when (id int PRIMARY KEY, fence_token bigint);
    CREATE TRIGGER cond BEFORE INSERT OR UPDATE OR DELETE ON t20_when FOR EACH ROW WHEN (false)
        EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'false');
    CREATE TEMP TABLE t20_byhand (id int PRIMARY KEY, fence_token bigint);
    CREATE TRIGGER byhand BEFORE INSERT OR UPDATE OR DELETE ON t20_byhand FOR EACH ROW
        EXECUTE FUNCTION fencing.enforce('fence_token', 'on', 'skip', 'off', 'f')$s$)$$,
                'a role attaches fencing.enforce() to temporary tables of its own by hand');
SELECT lives_ok($$SELECT * FROM fencing.protected$$,
                'fencing.protected still answers a superuser');
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'SELECT * FROM fencing.protected')$$,
                'and any other reader');
SELECT results_eq(
    $$SELECT tbl::text, allow_equal, on_stale, fence_deletes, tombstones FROM fencing.protected
       WHERE tbl::text LIKE '%t20\_%' AND tbl::text NOT LIKE 't20.%' ORDER BY 1$$,
    $$VALUES ((SELECT 't20_byhand'::regclass::text), true, 'skip', false, false)$$,
    'only the check in force on every event, with arguments it accepts, is listed, as the check reads them');
SELECT throws_ok($$INSERT INTO t20_junk VALUES (1, 1)$$, '39P01', NULL,
                 'the check with an argument it refuses fails every write instead');
-- A partitioned table holds no rows: its check is in force when every leaf
-- partition's clone is, whatever ALTER TABLE ONLY did to its own.
CREATE TABLE t20.pv (id int PRIMARY KEY, fence_token fencing.token) PARTITION BY RANGE (id);
CREATE TABLE t20.pv_a PARTITION OF t20.pv FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
CREATE TABLE t20.pv_a1 PARTITION OF t20.pv_a FOR VALUES FROM (0) TO (10);
CREATE TABLE t20.pv_b PARTITION OF t20.pv FOR VALUES FROM (10) TO (20);
SELECT lives_ok($$SELECT fencing.protect('t20.pv')$$, 'protect a partitioned table with a sub-partitioned partition');
ALTER TABLE t20.pv_a1 DISABLE TRIGGER "~fencing_enforce";
SELECT is_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.pv'::regclass$$,
                'a partitioned table one of whose leaf partitions has its check disabled is not listed');
ALTER TABLE t20.pv_a1 ENABLE TRIGGER "~fencing_enforce";
ALTER TABLE ONLY t20.pv DISABLE TRIGGER "~fencing_enforce";
SELECT isnt_empty($$SELECT 1 FROM fencing.protected WHERE tbl = 't20.pv'::regclass$$,
                  'a partitioned table whose own trigger only is disabled is listed: its partitions are checked');
INSERT INTO t20.pv VALUES (1, 100);
SELECT throws_ok($$UPDATE t20.pv SET fence_token = 50 WHERE id = 1$$, '23T01', NULL,
                 'as a stale write through it shows');
SELECT is((SELECT count(*)::int FROM fencing.protected WHERE tbl::text LIKE 't20.pv%'), 1,
          'the partitions are not listed themselves');
SELECT lives_ok($$SELECT t20.as_role('t20_owner', 'SELECT fencing.unprotect(''t20.owned'')')$$, 'the owner may unprotect');

--------------------------------------------------------------------------------
-- A stored generated column cannot be the token column: the check runs
-- before it is computed, so it could never judge the token the row ends with.
--------------------------------------------------------------------------------
CREATE TABLE t20.gen (id int PRIMARY KEY, raw bigint, fence_token bigint GENERATED ALWAYS AS (raw) STORED);
SELECT throws_ok($$SELECT fencing.protect('t20.gen', allow_equal => true)$$, NULL, NULL,
                 'protect refuses a generated token column');

SELECT * FROM finish();
ROLLBACK;
