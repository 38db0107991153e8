-- Who may do what with notifications and statistics (1.1).
--
-- set_notify and reset_stats are not executable by PUBLIC (the extension's
-- owner grants them); the views and notify_settings are read with USAGE on
-- the schema; nobody writes notify_settings but set_notify (and the
-- database's owner, whose restore loads it); set_notify writes on its
-- caller's behalf without granting anything.
--
-- Everything runs in one transaction that is rolled back (roles included).
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
SELECT plan(25);

SET LOCAL client_min_messages = warning;
CREATE ROLE fencing_t60_app NOLOGIN;
CREATE ROLE fencing_t60_ops NOLOGIN;
CREATE ROLE fencing_t60_outsider NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO fencing_t60_app, fencing_t60_ops;

CREATE SCHEMA t60;
CREATE FUNCTION t60.state_as(r name, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        EXECUTE q;
        RAISE EXCEPTION 'ran' USING ERRCODE = 'T6000';
    EXCEPTION WHEN OTHERS THEN
        st := SQLSTATE;
    END;
    RETURN CASE st WHEN 'T6000' THEN '00000' ELSE st END;
END $$;
RESET client_min_messages;

-- 1. Function privileges.
SELECT ok(NOT has_function_privilege('public', 'fencing.set_notify(text, boolean)', 'EXECUTE'),
          'PUBLIC may not execute set_notify');
SELECT ok(NOT has_function_privilege('public', 'fencing.reset_stats()', 'EXECUTE'),
          'PUBLIC may not execute reset_stats');
SELECT ok(has_function_privilege('public', 'fencing.stats_data()', 'EXECUTE')
          AND has_function_privilege('public', 'fencing.table_stats_data()', 'EXECUTE'),
          'the views'' functions are executable (the schema is the gate)');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'fencing'::regnamespace AND prosecdef), 0,
          'still no SECURITY DEFINER function');

-- 2. A role with USAGE only.
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT fencing.set_notify('t60:a')$q$), '42501',
          'an application role may not enable notifications');
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT fencing.set_notify(NULL)$q$), '42501',
          'nor for the whole database');
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT fencing.reset_stats()$q$), '42501',
          'nor reset the statistics');
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT * FROM fencing.stats$q$), '00000', 'it reads fencing.stats');
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT * FROM fencing.table_stats$q$), '00000',
          'and fencing.table_stats');
SELECT is(t60.state_as('fencing_t60_app', $q$SELECT * FROM fencing.notify_settings$q$), '00000',
          'and fencing.notify_settings');
SELECT is(t60.state_as('fencing_t60_app', $q$INSERT INTO fencing.notify_settings VALUES ('t60:x')$q$), '42501',
          'it may not insert into notify_settings');
SELECT is(t60.state_as('fencing_t60_app', $q$DELETE FROM fencing.notify_settings$q$), '42501',
          'nor delete from it');
SELECT is(t60.state_as('fencing_t60_app', $q$UPDATE fencing.notify_settings SET resource = 'x'$q$), '42501',
          'nor update it');
SELECT is(t60.state_as('fencing_t60_app', $q$TRUNCATE fencing.notify_settings$q$), '42501',
          'nor truncate it');

-- 3. Without USAGE on the schema.
SELECT is(t60.state_as('fencing_t60_outsider', $q$SELECT * FROM fencing.stats$q$), '42501',
          'a role without USAGE does not read fencing.stats');
SELECT is(t60.state_as('fencing_t60_outsider', $q$SELECT * FROM fencing.notify_settings$q$), '42501',
          'nor fencing.notify_settings');

-- 4. A role granted EXECUTE.
GRANT EXECUTE ON FUNCTION fencing.set_notify(text, boolean) TO fencing_t60_ops;
GRANT EXECUTE ON FUNCTION fencing.reset_stats() TO fencing_t60_ops;
SELECT is(t60.state_as('fencing_t60_ops', $q$SELECT fencing.set_notify('t60:ops')$q$), '00000',
          'GRANT EXECUTE lets a role enable notifications');
SELECT is(t60.state_as('fencing_t60_ops', $q$SELECT fencing.set_notify(NULL)$q$), '00000',
          'for the whole database too');
SELECT is(t60.state_as('fencing_t60_ops', $q$SET client_min_messages = error; SELECT fencing.reset_stats()$q$), '00000',
          'and reset the statistics');
SELECT is(t60.state_as('fencing_t60_ops', $q$INSERT INTO fencing.notify_settings VALUES ('t60:x')$q$), '42501',
          'set_notify grants nothing: the role still may not write notify_settings');
SELECT ok(NOT has_table_privilege('fencing_t60_ops', 'fencing.notify_settings', 'INSERT,UPDATE,DELETE,TRUNCATE'),
          'no write privilege on notify_settings');
SELECT is(t60.state_as('fencing_t60_ops', $q$SELECT fencing.set_notify('')$q$), '22023', 'an empty name: 22023');

-- 5. The database's owner restores what pg_dump wrote.
SELECT ok(has_table_privilege('pg_database_owner', 'fencing.notify_settings', 'SELECT')
          AND has_table_privilege('pg_database_owner', 'fencing.notify_settings', 'INSERT'),
          'pg_database_owner may read and load notify_settings (dump and restore)');
SELECT ok(NOT has_table_privilege('pg_database_owner', 'fencing.notify_settings', 'UPDATE,DELETE,TRUNCATE'),
          'and nothing more');
SELECT ok(EXISTS (SELECT 1 FROM pg_extension e WHERE e.extname = 'fencing'
                   AND 'fencing.notify_settings'::regclass = ANY (e.extconfig)),
          'notify_settings is part of pg_dump''s output');

SELECT * FROM finish();
ROLLBACK;
