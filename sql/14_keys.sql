-- Resource keys and collisions.
--
-- A resource's lock key is SipHash-2-4 of its name under the database's
-- secret (fencing.key_secret, made at CREATE EXTENSION). Two names with the
-- same key share the lock (they exclude each other like one resource) but
-- never a fence state row: each keeps its own tokens, current() and
-- validate(). Collisions cannot be built without the secret, so they are
-- planted here, two ways:
--   1. as a superuser, a fence state row that carries the target's key under
--      another resource's name, with a token above every token issued so far;
--   2. a real collision: two names with equal keys under a known secret (the
--      SipHash reference key; the pair was found by a search, see
--      tests/unit/resource_key_test.cpp), which a superuser installs.
-- Prints comparisons, never keys or token values.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

-- A new secret changes every key: the function is not immutable.
SELECT provolatile, proparallel FROM pg_proc WHERE oid = 'fencing.resource_key(text)'::regprocedure;

--------------------------------------------------------------------------------
-- 1. A row of another resource under the target's key.
--------------------------------------------------------------------------------
SELECT fencing.acquire('t14:earlier') AS earlier_tok \gset
SELECT fencing.release('t14:earlier');
SELECT :earlier_tok + 1000000 AS planted_tok \gset
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t14:target'), :planted_tok, 0, 0, 't14:other');

-- The target is acquired (and said to share its lock), with a token above
-- every earlier one, the planted one included.
SELECT fencing.acquire('t14:target') AS target_tok \gset
SELECT :target_tok > :planted_tok AND :target_tok > :earlier_tok AS above_every_earlier_token;
-- It has a row of its own; the other resource's row is untouched.
SELECT resource, key = fencing.resource_key('t14:target') AS target_key,
       token = :target_tok AS new_token, token = :planted_tok AS planted_token
  FROM fencing.fence_state WHERE resource IN ('t14:target', 't14:other') ORDER BY resource;
SELECT fencing.current('t14:target') = :target_tok AS target_current,
       fencing.validate('t14:target', :target_tok) = :target_tok AS target_valid;
-- The other name was never acquired (its own key is another one).
SELECT fencing.current('t14:other') IS NULL AS other_never_acquired;
\set VERBOSITY terse
SELECT fencing.validate('t14:other', :planted_tok);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- fencing.locks names the holder.
SELECT resource, token = :target_tok AS holder_token FROM fencing.locks WHERE pid = pg_backend_pid();
-- A protected write with the new token is accepted.
CREATE TABLE t14_rows (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('t14_rows');
INSERT INTO t14_rows VALUES (1, 'before', :earlier_tok);
UPDATE t14_rows SET v = 'written', fence_token = :target_tok WHERE id = 1;
SELECT v, fence_token = :target_tok AS stamped FROM t14_rows;
SELECT fencing.release('t14:target');

-- The next grant: above, recorded in the target's row; the other row stays.
SELECT fencing.acquire('t14:target') AS target_tok2 \gset
SELECT :target_tok2 > :target_tok AS next_above, fencing.current('t14:target') = :target_tok2 AS current_moves,
       (SELECT token FROM fencing.fence_state WHERE resource = 't14:other') = :planted_tok AS other_untouched;
SELECT fencing.release('t14:target');

-- A second planted row, whose name sorts before the target's: still never used.
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('t14:target'), :target_tok2 + 1000000, 0, 0, 't14:a-other');
SELECT fencing.acquire('t14:target') AS target_tok3 \gset
SELECT resource, token = :target_tok3 AS new_token, token > :target_tok3 AS above_new
  FROM fencing.fence_state WHERE key = fencing.resource_key('t14:target') ORDER BY resource;
SELECT fencing.current('t14:target') = :target_tok3 AS target_current;
SELECT resource FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release('t14:target');
UPDATE t14_rows SET v = 'again', fence_token = :target_tok3 WHERE id = 1;
SELECT v FROM t14_rows;

-- forget removes every idle row of the key (the names share its lock).
SELECT fencing.forget('0') >= 3 AS forgot;
SELECT count(*) AS rows_left FROM fencing.fence_state WHERE key = fencing.resource_key('t14:target');

--------------------------------------------------------------------------------
-- 2. A real collision, under a known secret. Replacing the secret is refused
-- while a fencing lock is held, and rekeys the fence state.
--------------------------------------------------------------------------------
\set A 'k:966dff706d0f1462'
\set B 'k:104bbb3cd3f189b0'
SELECT fencing.acquire('t14:kept') AS kept_tok \gset
\set VERBOSITY terse
INSERT INTO fencing.key_secret VALUES ('\x000102030405060708090a0b0c0d0e0f');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT fencing.release('t14:kept');
SELECT fencing.resource_key('t14:kept') AS kept_key \gset
INSERT INTO fencing.key_secret VALUES ('\x000102030405060708090a0b0c0d0e0f');
SELECT count(*) AS secrets, fencing.resource_key(:'A') = fencing.resource_key(:'B') AS same_key,
       fencing.resource_key('t14:kept') <> :kept_key AS keys_changed
  FROM fencing.key_secret;
SELECT count(*) FILTER (WHERE key <> fencing.resource_key(resource)) AS rows_with_old_keys
  FROM fencing.fence_state;
SELECT fencing.current('t14:kept') = :kept_tok AS kept_current;

SELECT fencing.acquire(:'A') AS a1 \gset
SELECT fencing.release(:'A');
-- The second name gets a row of its own, and says it shares the lock.
SELECT fencing.acquire(:'B') AS b1 \gset
SELECT :b1 > :a1 AS b_above_a, fencing.current(:'A') = :a1 AS a_current, fencing.current(:'B') = :b1 AS b_current,
       fencing.validate(:'B', :b1) = :b1 AS b_valid;
SELECT resource, key = fencing.resource_key(:'A') AS shared_key
  FROM fencing.fence_state WHERE resource IN (:'A', :'B') ORDER BY resource;
\set VERBOSITY terse
SELECT fencing.validate(:'A', :a1);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.validate(:'A', :b1);
\echo :LAST_ERROR_SQLSTATE
-- This session holds B: A shares the lock, and the session cannot wait for itself.
SELECT fencing.acquire(:'A');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.acquire(:'A', reentrant => true);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT fencing.acquire_xact(:'A');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
\set VERBOSITY default
SELECT fencing.try_acquire(:'A') IS NULL AS try_busy, fencing.current(:'A') = :a1 AS a_untouched;
SELECT resource, token = :b1 AS holder_token FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release(:'B');
SELECT fencing.acquire(:'A') AS a2 \gset
SELECT :a2 > :b1 AS a_above_b, fencing.current(:'A') = :a2 AS a_current, fencing.current(:'B') = :b1 AS b_kept;
SELECT resource, token = :a2 AS holder_token FROM fencing.locks WHERE pid = pg_backend_pid();
SELECT fencing.release(:'A');

-- A new random secret (as CREATE EXTENSION makes): the names part, every row
-- gets its new key, and every resource keeps its tokens.
INSERT INTO fencing.key_secret DEFAULT VALUES;
SELECT count(*) AS secrets, fencing.resource_key(:'A') <> fencing.resource_key(:'B') AS apart
  FROM fencing.key_secret;
SELECT count(*) FILTER (WHERE key <> fencing.resource_key(resource)) AS rows_with_old_keys
  FROM fencing.fence_state;
SELECT fencing.current(:'A') = :a2 AS a_kept, fencing.current(:'B') = :b1 AS b_kept,
       fencing.current('t14:kept') = :kept_tok AS kept_kept;
SELECT fencing.acquire(:'B') > :a2 AS b_next_above;
SELECT fencing.release(:'B');

-- An UPDATE replaces it too; a secret is 16 bytes; the row cannot be removed.
SELECT fencing.resource_key('t14:kept') AS kept_key \gset
UPDATE fencing.key_secret SET secret = NULL;
SELECT count(*) AS secrets, fencing.resource_key('t14:kept') <> :kept_key AS keys_changed FROM fencing.key_secret;
\set VERBOSITY terse
INSERT INTO fencing.key_secret VALUES ('\x0001');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM fencing.key_secret;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE fencing.key_secret;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT count(*) FILTER (WHERE key <> fencing.resource_key(resource)) AS rows_with_old_keys
  FROM fencing.fence_state;
DROP TABLE t14_rows;

-- (1.2) No fencing lock is taken under a secret the transaction set and may
-- still roll back (25000): after the rollback its keys are nobody's, and
-- the lock would exclude no other session. Before 1.2, a first grant there
-- left its row under the rolled-back key, validate() refused the held token,
-- another session acquired the same resource at once, and every later
-- replacement of the secret failed.
SELECT fencing.acquire('t14:secret') AS sec1 \gset
SELECT fencing.release('t14:secret');
BEGIN;
INSERT INTO fencing.key_secret DEFAULT VALUES;
SELECT fencing.acquire('t14:secret:new');
ROLLBACK;
BEGIN;
INSERT INTO fencing.key_secret DEFAULT VALUES;
SELECT fencing.try_acquire_xact('t14:secret', shared => true);
ROLLBACK;
BEGIN;
UPDATE fencing.key_secret SET secret = NULL;
SELECT fencing.validate('t14:secret', :sec1);
ROLLBACK;
BEGIN;
SAVEPOINT s;
INSERT INTO fencing.key_secret DEFAULT VALUES;
RELEASE SAVEPOINT s;
SELECT fencing.acquire_xact('t14:secret', permits => 2);
ROLLBACK;
-- Rolled back to a savepoint, the secret is the old one again.
BEGIN;
SAVEPOINT s;
INSERT INTO fencing.key_secret DEFAULT VALUES;
ROLLBACK TO SAVEPOINT s;
SELECT fencing.acquire_xact('t14:secret') > :sec1 AS granted_under_old_secret;
COMMIT;
SELECT count(*) AS secret_rows, count(*) FILTER (WHERE key <> fencing.resource_key(resource)) AS rows_with_old_keys
  FROM fencing.fence_state WHERE resource LIKE 't14:secret%';
SELECT * FROM fencing.locks WHERE resource LIKE 't14:secret%' OR resource IS NULL;
-- A committed replacement works as before.
INSERT INTO fencing.key_secret DEFAULT VALUES;
SELECT fencing.acquire('t14:secret') > :sec1 AS granted_after_commit, fencing.release('t14:secret');
-- (1.2) Nor under a secret table put in the place of the extension's in
-- the transaction (the row is frozen by COPY FREEZE: its definition counts).
BEGIN;
ALTER TABLE fencing.key_secret RENAME TO key_secret_real;
CREATE TABLE fencing.key_secret (secret bytea NOT NULL);
COPY fencing.key_secret FROM stdin WITH (FREEZE);
\\x00112233445566778899aabbccddee00
\.
SELECT fencing.acquire('t14:secret');
ROLLBACK;
SELECT fencing.acquire('t14:secret') > :sec1 AS granted_under_the_secret, fencing.release('t14:secret');
