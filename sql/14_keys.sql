-- Resource-key collisions. Two names with the same lock key share the lock
-- (they exclude each other like one resource) but never a fence state row:
-- each keeps its own tokens, current() and validate(). A collision is planted
-- as a superuser: a fence state row that carries the target's key under
-- another resource's name, with a token above every token issued so far.
-- Prints comparisons, never keys or token values.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

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
DROP TABLE t14_rows;
