-- fencing.forget(idle): removes the fence state of resources that nobody
-- holds or awaits and whose last grant is at least `idle` old; returns how
-- many. A forgotten resource's current() is NULL and its next token is still
-- greater than every earlier one (the counter is database-wide). Not for
-- PUBLIC. Prints comparisons, never raw token values or counts that other
-- tests' resources would change.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

SELECT pg_get_function_arguments('fencing.forget(interval)'::regprocedure) AS args,
       pg_get_function_result('fencing.forget(interval)'::regprocedure) AS result,
       has_function_privilege('public', 'fencing.forget(interval)', 'EXECUTE') AS public_may_execute;

-- An idle resource, one held by this session, one held in a transaction.
SELECT fencing.acquire('t13:idle') AS idle_tok \gset
SELECT fencing.release('t13:idle');
SELECT fencing.acquire('t13:held') AS held_tok \gset

-- Nothing is a day old yet.
SELECT fencing.forget('1 day') AS forgotten_day;
SELECT fencing.current('t13:idle') = :idle_tok AS idle_still_known;

BEGIN;
SELECT fencing.acquire_xact('t13:xact') AS xact_tok \gset
SELECT fencing.forget('0') >= 1 AS forgot_some;
SELECT fencing.current('t13:idle') IS NULL AS idle_forgotten,
       fencing.current('t13:held') = :held_tok AS held_kept,
       fencing.current('t13:xact') = :xact_tok AS xact_kept;
COMMIT;
SELECT fencing.current('t13:idle') IS NULL AS idle_forgotten_after_commit;
SELECT count(*) AS idle_rows FROM fencing.fence_state WHERE resource = 't13:idle';

-- The next token of a forgotten resource is greater than every earlier one.
SELECT fencing.acquire('t13:idle') AS idle_again \gset
SELECT :idle_again > :idle_tok AND :idle_again > :held_tok AND :idle_again > :xact_tok AS newer_than_all,
       fencing.current('t13:idle') = :idle_again AS current_is_new;
SELECT fencing.release('t13:idle'), fencing.release('t13:held');

-- Rolled back, nothing is forgotten.
BEGIN;
SELECT fencing.forget('0') >= 1 AS forgot_some;
SELECT fencing.current('t13:idle') IS NULL AS gone_inside;
ROLLBACK;
SELECT fencing.current('t13:idle') = :idle_again AS back_after_rollback;

-- Arguments.
SELECT fencing.forget('-1 second');
SELECT fencing.forget(NULL);
SELECT fencing.forget('100 years') AS forgotten_century;

-- Privileges: not PUBLIC; a role granted EXECUTE (and USAGE) may.
CREATE ROLE regress_fencing_t13_ops;
CREATE ROLE regress_fencing_t13_app;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_t13_ops, regress_fencing_t13_app;
GRANT EXECUTE ON FUNCTION fencing.forget(interval) TO regress_fencing_t13_ops;
SET ROLE regress_fencing_t13_app;
SELECT fencing.forget('1 day');
RESET ROLE;
SET ROLE regress_fencing_t13_ops;
SELECT fencing.forget('100 years') AS forgotten_by_ops;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION fencing.forget(interval) FROM regress_fencing_t13_ops;
REVOKE USAGE ON SCHEMA fencing FROM regress_fencing_t13_ops, regress_fencing_t13_app;
DROP ROLE regress_fencing_t13_ops, regress_fencing_t13_app;

-- Read-only transactions forget nothing.
BEGIN READ ONLY;
SELECT fencing.forget('0');
ROLLBACK;

-- (1.2) A grant is recorded outside the transaction (in place, or in a
-- frozen row), so it cannot build on a row version the transaction may
-- still roll back: a resource whose fence state row this transaction
-- deleted (forget(), or SQL) or wrote is not acquired in it (25000).
-- Before 1.2 the rollback left the resource two rows under its primary key,
-- and current() the older token while the newer grant was held.
SELECT fencing.acquire('t13:own') AS own1 \gset
SELECT fencing.release('t13:own');
BEGIN;
SELECT fencing.forget('0') >= 1 AS forgot_own;
SELECT fencing.acquire('t13:own');
ROLLBACK;
BEGIN;
SELECT fencing.forget('0') >= 1 AS forgot_own;
SELECT fencing.try_acquire_xact('t13:own');
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT fencing.forget('0') >= 1 AS forgot_own;
RELEASE SAVEPOINT s;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
BEGIN;
DELETE FROM fencing.fence_state WHERE resource = 't13:own';
SELECT fencing.acquire('t13:own');
ROLLBACK;
BEGIN;
UPDATE fencing.fence_state SET lease_ms = 0 WHERE resource = 't13:own';
SELECT fencing.acquire('t13:own');
ROLLBACK;
SELECT count(*) AS own_rows, min(token) = :own1 AS own_row_kept
  FROM fencing.fence_state WHERE resource = 't13:own';
-- A forget() rolled back to a savepoint deleted nothing: the acquisition
-- goes ahead, and its grant outlives the transaction's rollback.
BEGIN;
SAVEPOINT s;
SELECT fencing.forget('0') >= 1 AS forgot_own;
ROLLBACK TO SAVEPOINT s;
SELECT fencing.acquire('t13:own') > :own1 AS acquired_after_rollback_to;
ROLLBACK;
SELECT count(*) AS own_rows, fencing.current('t13:own') > :own1 AS current_is_the_grant,
       fencing.validate('t13:own', fencing.current('t13:own')) = fencing.current('t13:own') AS held_token_valid
  FROM fencing.fence_state WHERE resource = 't13:own';
SELECT fencing.release('t13:own');

-- (1.2) Nor in a transaction that gave the fence state, its index or the
-- token counter new storage (25000): a rollback brings the old storage back
-- without the grant. Before 1.2, a grant after TRUNCATE or CLUSTER was lost
-- with it (validate() then refused the held token), a first grant after
-- REINDEX left a row outside the index (a second row followed, and REINDEX
-- failed), and tokens drawn after ALTER SEQUENCE ... RESTART were above
-- those the old counter went on to issue.
BEGIN;
TRUNCATE fencing.fence_state;
SELECT fencing.acquire('t13:own');
ROLLBACK;
BEGIN;
CLUSTER fencing.fence_state USING fence_state_pkey;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
BEGIN;
REINDEX TABLE fencing.fence_state;
SELECT fencing.acquire('t13:first');
ROLLBACK;
BEGIN;
REINDEX INDEX fencing.fence_state_pkey;
SELECT fencing.try_acquire_xact('t13:first');
ROLLBACK;
BEGIN;
ALTER SEQUENCE fencing.token_seq RESTART;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
-- The rule is the definition, not the row: a REINDEX refuses a grant into
-- an existing row too (which would write no index).
BEGIN;
REINDEX TABLE fencing.fence_state;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
-- Rolled back to a savepoint, the old storage is back: acquisitions go ahead.
BEGIN;
SAVEPOINT s;
TRUNCATE fencing.fence_state;
ALTER SEQUENCE fencing.token_seq RESTART;
ROLLBACK TO SAVEPOINT s;
SELECT fencing.acquire_xact('t13:own') > :own1 AS granted_after_rollback_to;
ROLLBACK;
SELECT count(*) FILTER (WHERE resource = 't13:own') AS own_rows,
       count(*) FILTER (WHERE resource = 't13:first') AS first_rows
  FROM fencing.fence_state;
SELECT fencing.acquire('t13:first') > fencing.current('t13:own') AS first_grant_newest;
SELECT fencing.release('t13:first');
REINDEX TABLE fencing.fence_state;

-- (1.2) Nor in one that put a counter or a fence state of its own in place
-- of the extension's (created in the transaction): its rollback brings the
-- old ones back, without what was recorded in the new ones.
BEGIN;
ALTER SEQUENCE fencing.token_seq RENAME TO token_seq_old;
CREATE SEQUENCE fencing.token_seq;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
BEGIN;
ALTER TABLE fencing.fence_state RENAME TO fence_state_old;
ALTER INDEX fencing.fence_state_pkey RENAME TO fence_state_old_pkey;
CREATE TABLE fencing.fence_state (LIKE fencing.fence_state_old INCLUDING ALL);
SELECT fencing.acquire('t13:own');
ROLLBACK;
BEGIN;
ALTER SEQUENCE fencing.token_seq SET UNLOGGED;
SELECT fencing.acquire('t13:own');
ROLLBACK;
SELECT fencing.acquire('t13:own') > :own1 AS own_granted, fencing.release('t13:own');
-- (1.2) An unlogged fence state, which crash recovery would empty, takes no
-- grant (XX001) until it is logged again.
ALTER TABLE fencing.fence_state SET UNLOGGED;
SELECT fencing.acquire('t13:own');
ALTER TABLE fencing.fence_state SET LOGGED;
SELECT fencing.acquire('t13:own') > :own1 AS logged_again, fencing.release('t13:own');

-- (1.2) Nor when a committed counter or fence state of the same shape is
-- moved under the extension's names in the transaction: a rename writes the
-- definition too. Nor a shared hold of a row this transaction wrote.
CREATE SEQUENCE fencing.token_seq_alt;
BEGIN;
ALTER SEQUENCE fencing.token_seq RENAME TO token_seq_real;
ALTER SEQUENCE fencing.token_seq_alt RENAME TO token_seq;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
DROP SEQUENCE fencing.token_seq_alt;
CREATE TABLE fencing.fs_alt (LIKE fencing.fence_state INCLUDING ALL);
BEGIN;
ALTER TABLE fencing.fence_state RENAME TO fs_real;
ALTER INDEX fencing.fence_state_pkey RENAME TO fs_real_pkey;
ALTER TABLE fencing.fs_alt RENAME TO fence_state;
ALTER INDEX fencing.fs_alt_pkey RENAME TO fence_state_pkey;
SELECT fencing.acquire('t13:own');
ROLLBACK;
DROP TABLE fencing.fs_alt;
BEGIN;
UPDATE fencing.fence_state SET token = token + 50 WHERE resource = 't13:own';
SELECT fencing.acquire_xact('t13:own', shared => true);
ROLLBACK;
SELECT fencing.acquire('t13:own') > :own1 AS own_granted, fencing.release('t13:own');
-- A schema of spare relations renamed into the place of schema fencing is
-- not the extension's: the grant goes into the extension's own relations,
-- which the rollback does not take away.
CREATE SCHEMA t13_spare;
CREATE SEQUENCE t13_spare.token_seq;
CREATE TABLE t13_spare.fence_state (key bigint NOT NULL, token bigint NOT NULL, granted_at int NOT NULL,
  lease_ms int NOT NULL, resource text COLLATE "C" NOT NULL,
  CONSTRAINT fence_state_pkey PRIMARY KEY (key, resource));
CREATE TABLE t13_spare.key_secret (secret bytea NOT NULL);
INSERT INTO t13_spare.key_secret VALUES ('\x000102030405060708090a0b0c0d0e0f');
BEGIN;
ALTER SCHEMA fencing RENAME TO t13_fold;
ALTER SCHEMA t13_spare RENAME TO fencing;
SELECT t13_fold.acquire('t13:own') > :own1 AS granted_in_the_extensions_schema;
ROLLBACK;
SET client_min_messages = warning;
DROP SCHEMA t13_spare CASCADE;
RESET client_min_messages;
SELECT fencing.current('t13:own') > :own1 AS current_is_the_grant,
       fencing.validate('t13:own', fencing.current('t13:own')) = fencing.current('t13:own') AS held_token_valid,
       fencing.release('t13:own') AS released;
-- (1.2) Nor in one that made a committed spare a member of the extension
-- in the place of its own relation (ALTER EXTENSION ... DROP/ADD, a
-- superuser's): its rollback gives the members back. Before, a grant there
-- was keyed by the spare secret (a second session's hold of the resource
-- did not exclude it), or drawn from the spare counter (later tokens were
-- behind it).
CREATE TABLE public.t13_ks (secret bytea NOT NULL);
INSERT INTO public.t13_ks VALUES ('\x00112233445566778899aabbccddeeff');
CREATE SEQUENCE public.t13_seq;
BEGIN;
ALTER EXTENSION fencing DROP TABLE fencing.key_secret;
ALTER TABLE fencing.key_secret RENAME TO key_secret_real;
ALTER TABLE public.t13_ks SET SCHEMA fencing;
ALTER TABLE fencing.t13_ks RENAME TO key_secret;
ALTER EXTENSION fencing ADD TABLE fencing.key_secret;
SELECT fencing.try_acquire_xact('t13:own');
ROLLBACK;
BEGIN;
ALTER EXTENSION fencing DROP SEQUENCE fencing.token_seq;
ALTER SEQUENCE fencing.token_seq RENAME TO token_seq_real;
ALTER SEQUENCE public.t13_seq SET SCHEMA fencing;
ALTER SEQUENCE fencing.t13_seq RENAME TO token_seq;
ALTER EXTENSION fencing ADD SEQUENCE fencing.token_seq;
SELECT fencing.acquire_xact('t13:own');
ROLLBACK;
BEGIN;
ALTER EXTENSION fencing DROP SEQUENCE fencing.token_seq;
ALTER SEQUENCE fencing.token_seq RENAME TO token_seq_real;
CREATE SEQUENCE fencing.token_seq;
ALTER EXTENSION fencing ADD SEQUENCE fencing.token_seq;
SELECT fencing.advance_past('pg_class', 1);
ROLLBACK;
DROP TABLE public.t13_ks;
DROP SEQUENCE public.t13_seq;
-- A fence state put in the place of the extension's, with an index of its
-- own, leaves the old primary key under its name: not taken for the new
-- table (55000), also by a session that looked the resource up before.
-- Before, its scan of the old index read the new table (XX001, or another
-- resource's row).
SELECT fencing.current('t13:own') > :own1 AS looked_up;
BEGIN;
ALTER EXTENSION fencing DROP TABLE fencing.fence_state;
ALTER TABLE fencing.fence_state RENAME TO fs_old;
CREATE TABLE fencing.fence_state (LIKE fencing.fs_old INCLUDING ALL);
ALTER EXTENSION fencing ADD TABLE fencing.fence_state;
SELECT fencing.current('t13:own');
ROLLBACK;
-- Nor a token returned by advance_past in a transaction that dropped the
-- extension and created it again: the rollback brings the earlier counter
-- back, which was behind it. (Its acquisitions are refused by the new
-- secret; protect() returns no token and works.) A member dropped and added
-- back, committed, changes nothing.
BEGIN;
SAVEPOINT s;
SET LOCAL client_min_messages = warning;
DROP EXTENSION fencing CASCADE;
CREATE EXTENSION fencing;
CREATE TABLE t13_reinstalled (id int PRIMARY KEY, fence_token fencing.token);
SELECT fencing.protect('t13_reinstalled');
SELECT fencing.advance_past('pg_class', 1);
ROLLBACK;
ALTER EXTENSION fencing DROP SEQUENCE fencing.token_seq;
ALTER EXTENSION fencing ADD SEQUENCE fencing.token_seq;
SELECT fencing.acquire('t13:own') > :own1 AS granted_after_the_members_changed,
       fencing.current('t13:own') = fencing.validate('t13:own', fencing.current('t13:own')) AS held_token_valid,
       fencing.release('t13:own') AS released;
