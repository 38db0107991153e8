-- The type fencing.token: a domain over bigint (CHECK (VALUE > 0), constraint
-- token_positive). Bad input: 22P02 (not a number), 22003 (outside bigint),
-- 23514 (zero or negative). bigint's operators, operator classes, min/max,
-- casts and wire format serve it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
RESET client_min_messages;

-- The SQLSTATE a statement ends with ('ok' when it succeeds).
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;

--------------------------------------------------------------------------------
-- The shape: a domain over bigint with one named constraint, and nothing of
-- its own (no I/O functions, operators, operator classes, casts, aggregates).
--------------------------------------------------------------------------------
SELECT t.typtype, t.typbasetype::regtype AS base, c.conname, pg_get_constraintdef(c.oid) AS def
  FROM pg_type t JOIN pg_constraint c ON c.contypid = t.oid
 WHERE t.oid = 'fencing.token'::regtype;
SELECT count(*) AS own_operators FROM pg_operator
 WHERE 'fencing.token'::regtype IN (oprleft, oprright, oprresult);
SELECT count(*) AS own_casts FROM pg_cast
 WHERE 'fencing.token'::regtype IN (castsource, casttarget);
SELECT count(*) AS own_opclasses FROM pg_opclass WHERE opcintype = 'fencing.token'::regtype;
SELECT count(*) AS own_aggregates FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
 WHERE p.prorettype = 'fencing.token'::regtype;

--------------------------------------------------------------------------------
-- Text input and output.
--------------------------------------------------------------------------------
SELECT '1'::fencing.token AS smallest, '9223372036854775807'::fencing.token AS largest;
SELECT ' 42 '::fencing.token AS spaces, '+7'::fencing.token AS plus, '007'::fencing.token AS zeros;
SELECT '42'::fencing.token::text AS text_form, pg_typeof('42'::fencing.token);

-- Every bad input: 22P02 (not a number), 22003 (outside bigint), 23514 (<= 0).
-- (Hexadecimal, octal and binary integers and underscores are bigint input
-- from PostgreSQL 16 on, so they are left out here.)
SELECT input, pg_temp.sqlstate_of(format('SELECT %L::fencing.token', input)) AS sqlstate
  FROM unnest(ARRAY['', 'abc', '0', '-5', '1.5', '12x', ' ', '9223372036854775808',
                    '-0', '00', '-9223372036854775808', '18446744073709551616',
                    '99999999999999999999x', '1e3', '+', '-', '1 2', 'NaN']) WITH ORDINALITY AS t(input, n)
 ORDER BY n;

-- The messages (no crash, no internal error).
SELECT ''::fencing.token;
SELECT 'abc'::fencing.token;
SELECT '0'::fencing.token;
SELECT '-5'::fencing.token;
SELECT '1.5'::fencing.token;
SELECT '12x'::fencing.token;
SELECT ' '::fencing.token;
SELECT '9223372036854775808'::fencing.token;

-- Bad input in a table column is refused the same way.
CREATE TABLE t10_in (t fencing.token);
INSERT INTO t10_in VALUES ('0');
INSERT INTO t10_in VALUES ('abc');
SELECT count(*) FROM t10_in;
DROP TABLE t10_in;

--------------------------------------------------------------------------------
-- Operators and min/max as an application writes them: with the default
-- search_path, which does not contain the schema fencing.
--------------------------------------------------------------------------------
SHOW search_path;
SELECT '2'::fencing.token =  '2'::fencing.token AS eq,
       '2'::fencing.token <> '3'::fencing.token AS ne,
       '2'::fencing.token <  '3'::fencing.token AS lt,
       '3'::fencing.token <= '3'::fencing.token AS le,
       '4'::fencing.token >  '3'::fencing.token AS gt,
       '3'::fencing.token >= '3'::fencing.token AS ge;
SELECT '5'::fencing.token > 4 AS gt_int, '5'::fencing.token = 5::bigint AS eq_bigint;
SELECT max(t) AS max, min(t) AS min
  FROM (VALUES ('7'::fencing.token), ('9223372036854775807'), ('1'), (NULL)) AS v(t);
SELECT pg_typeof(max(t)) FROM (VALUES ('7'::fencing.token)) AS v(t);

SET search_path = fencing, public;

--------------------------------------------------------------------------------
-- Operators: every one of = <> < <= > >= on every ordering of two values.
--------------------------------------------------------------------------------
SELECT a, b, a = b AS eq, a <> b AS ne, a < b AS lt, a <= b AS le, a > b AS gt, a >= b AS ge
  FROM (VALUES ('1'::fencing.token), ('2'), ('9223372036854775807')) AS x(a)
 CROSS JOIN (VALUES ('1'::fencing.token), ('2'), ('9223372036854775807')) AS y(b)
 ORDER BY a, b;
-- Large values compare as numbers, not as text.
SELECT '10'::fencing.token > '9'::fencing.token AS numeric_order,
       '9223372036854775807'::fencing.token > '922337203685477580'::fencing.token AS large;
-- NULL handling is SQL's.
SELECT ('1'::fencing.token = NULL::fencing.token) IS NULL AS null_eq;

--------------------------------------------------------------------------------
-- btree operator class: primary key, ORDER BY, DISTINCT, GROUP BY, index scans.
--------------------------------------------------------------------------------
CREATE TABLE t10_pk (t fencing.token PRIMARY KEY, label text);
INSERT INTO t10_pk VALUES (3, 'three'), (1, 'one'), ('9223372036854775807', 'max'), (2::bigint, 'two'), ('10', 'ten');
INSERT INTO t10_pk VALUES (2, 'duplicate');
SELECT t, label FROM t10_pk ORDER BY t;
SELECT t, label FROM t10_pk ORDER BY t DESC LIMIT 2;
SELECT t FROM t10_pk WHERE t > 2 AND t <= 10 ORDER BY t;
SELECT min(t), max(t), count(*) FROM t10_pk;
SELECT pg_catalog.min(t) AS qualified_min, pg_catalog.max(t) AS qualified_max FROM t10_pk;
SELECT min(t) IS NULL AS empty_min, max(t) IS NULL AS empty_max FROM t10_pk WHERE false;

SELECT DISTINCT t FROM (VALUES ('5'::fencing.token), ('3'), ('5'), ('3'), ('1')) AS v(t) ORDER BY t;
SELECT t, count(*) FROM (VALUES ('5'::fencing.token), ('3'), ('5')) AS v(t) GROUP BY t ORDER BY t;

-- The planner uses the primary key for equality and ranges, and for ORDER BY.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT t FROM t10_pk WHERE t = 3;
SELECT t FROM t10_pk WHERE t = 3;
EXPLAIN (COSTS OFF) SELECT t FROM t10_pk WHERE t >= 3 ORDER BY t;
SELECT t FROM t10_pk WHERE t >= 3 ORDER BY t;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- A sort big enough to use the sort support function.
SELECT bool_and(ok) AS sorted
  FROM (SELECT t >= lag(t, 1, t) OVER (ORDER BY n) AS ok
          FROM (SELECT t, row_number() OVER (ORDER BY t) AS n
                  FROM (SELECT ((g * 7919) % 10007 + 1)::fencing.token AS t
                          FROM generate_series(1, 10007) g) s) s2) s3;

--------------------------------------------------------------------------------
-- hash operator class: hash index, hash join, hashed DISTINCT / GROUP BY.
--------------------------------------------------------------------------------
CREATE TABLE t10_a (t fencing.token, a text);
CREATE TABLE t10_b (t fencing.token, b text);
INSERT INTO t10_a SELECT g, 'a' || g FROM generate_series(1, 200) g;
INSERT INTO t10_b SELECT g * 2, 'b' || g FROM generate_series(1, 200) g;
ANALYZE t10_a;
ANALYZE t10_b;

SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM t10_a JOIN t10_b USING (t);
SELECT count(*), min(t), max(t) FROM t10_a JOIN t10_b USING (t);
RESET enable_mergejoin;
RESET enable_nestloop;

-- Merge join works too (the = operator MERGES).
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM t10_a JOIN t10_b USING (t);
SELECT count(*) FROM t10_a JOIN t10_b USING (t);
RESET enable_hashjoin;
RESET enable_nestloop;

SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT DISTINCT t FROM t10_b;
SELECT count(*) FROM (SELECT DISTINCT t FROM (SELECT t FROM t10_b UNION ALL SELECT t FROM t10_b) u) d;
RESET enable_sort;

CREATE INDEX t10_b_hash ON t10_b USING hash (t);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT b FROM t10_b WHERE t = 40;
SELECT b FROM t10_b WHERE t = 40;
RESET enable_seqscan;
RESET enable_bitmapscan;

DROP TABLE t10_a, t10_b, t10_pk;

--------------------------------------------------------------------------------
-- Casts.
--------------------------------------------------------------------------------
-- Every integer type, numeric and text assign to a token; values <= 0 are
-- refused with 23514 however they arrive.
SELECT 5::fencing.token AS from_int, 5000000000::fencing.token AS from_bigint,
       pg_typeof(5::fencing.token);
CREATE TABLE t10_cast (t fencing.token, n bigint);
INSERT INTO t10_cast (t) VALUES (1), (2::bigint), (9223372036854775807);
-- A bigint parameter assigns to a token column without a cast.
PREPARE t10_ins(bigint) AS INSERT INTO t10_cast (t) VALUES ($1);
EXECUTE t10_ins(77);
PREPARE t10_upd(bigint) AS UPDATE t10_cast SET t = $1 WHERE t = 77;
EXECUTE t10_upd(78);
SELECT t FROM t10_cast ORDER BY t;
-- A token column compares with an integer parameter.
PREPARE t10_sel(bigint) AS SELECT count(*) FROM t10_cast WHERE t >= $1;
EXECUTE t10_sel(2);

-- Values <= 0 raise 23514 (the domain's check constraint), however they arrive.
SELECT 0::fencing.token;
SELECT (-1)::fencing.token;
SELECT 0::bigint::fencing.token;
SELECT (-9223372036854775808)::bigint::fencing.token;
EXECUTE t10_ins(0);
EXECUTE t10_ins(-5);
INSERT INTO t10_cast (t) VALUES (0);
INSERT INTO t10_cast (t) VALUES (-1::bigint);
SELECT stmt, pg_temp.sqlstate_of(stmt) AS sqlstate
  FROM unnest(ARRAY['SELECT 0::fencing.token', 'SELECT (-1)::fencing.token',
                    'SELECT 0::bigint::fencing.token', 'SELECT (-9223372036854775808)::bigint::fencing.token',
                    'SELECT 0::smallint::fencing.token', 'SELECT 0.0::numeric::fencing.token',
                    'INSERT INTO t10_cast (t) VALUES (0)', 'EXECUTE t10_ins(-5)',
                    'SELECT 1::fencing.token', 'SELECT 2147483647::fencing.token']) WITH ORDINALITY AS s(stmt, n)
 ORDER BY n;
SELECT count(*) AS rows_after_bad_inserts FROM t10_cast;

-- Casts from smallint, numeric and varchar, as drivers send them (psycopg 3
-- sends small ints as int2; pgjdbc setBigDecimal/setObject(BigInteger) numeric).
SELECT 5::smallint::fencing.token AS from_int2, 12345678901::numeric::fencing.token AS from_numeric,
       '77'::varchar::fencing.token AS from_varchar, 9007199254740993::numeric::fencing.token AS above_2_53;
SELECT pg_temp.sqlstate_of('SELECT 1.5::numeric::fencing.token') AS numeric_fraction_rounds,
       pg_temp.sqlstate_of('SELECT 0.4::numeric::fencing.token') AS rounds_to_zero,
       pg_temp.sqlstate_of('SELECT 9223372036854775808::numeric::fencing.token') AS numeric_too_big;
PREPARE t10_ins2(smallint) AS INSERT INTO t10_cast (t) VALUES ($1);
EXECUTE t10_ins2(5);
PREPARE t10_ins3(numeric) AS INSERT INTO t10_cast (t) VALUES ($1);
EXECUTE t10_ins3(6);
DEALLOCATE t10_ins2;
DEALLOCATE t10_ins3;
-- A token mixes with integers as a bigint does.
SELECT COALESCE(NULL::fencing.token, 0) AS coalesce_zero, '5'::fencing.token > 0 AS gt_zero,
       '5'::fencing.token + 1 AS plus_one, pg_typeof('5'::fencing.token + 1);

-- token to bigint: explicitly and by assignment.
SELECT '9223372036854775807'::fencing.token::bigint AS as_bigint, pg_typeof('5'::fencing.token::bigint);
UPDATE t10_cast SET n = t;
SELECT t, n, n = t::bigint AS same FROM t10_cast ORDER BY t;
CREATE TABLE t10_big (n bigint);
INSERT INTO t10_big SELECT t FROM t10_cast;
SELECT sum(n) > 0 AS assigned FROM t10_big;
DEALLOCATE t10_ins;
DEALLOCATE t10_upd;
DEALLOCATE t10_sel;
DROP TABLE t10_cast, t10_big;

--------------------------------------------------------------------------------
-- Binary COPY: a token column is written in int8's format and reads back as
-- bigint and vice versa; <= 0 is refused on the way in (23514).
--------------------------------------------------------------------------------
CREATE TABLE t10_bin (t fencing.token, n bigint);
CREATE TABLE t10_bin2 (t fencing.token, n bigint);
CREATE TABLE t10_binbig (t bigint, n bigint);
INSERT INTO t10_bin VALUES (1, 1), (4294967296, 2), (9223372036854775807, 3);
SELECT 'cat > /tmp/fencing_regress_10_' || pg_backend_pid() || '.bin' AS copy_out,
       'cat /tmp/fencing_regress_10_' || pg_backend_pid() || '.bin' AS copy_in,
       'cat > /dev/null; rm -f /tmp/fencing_regress_10_' || pg_backend_pid() || '.bin' AS copy_rm \gset
COPY t10_bin TO PROGRAM :'copy_out' WITH (FORMAT binary);
COPY t10_bin2 FROM PROGRAM :'copy_in' WITH (FORMAT binary);
SELECT t, n FROM t10_bin2 ORDER BY n;
SELECT count(*) AS identical FROM t10_bin JOIN t10_bin2 USING (t, n);
COPY t10_binbig FROM PROGRAM :'copy_in' WITH (FORMAT binary);
SELECT t, n FROM t10_binbig ORDER BY n;
TRUNCATE t10_binbig;
INSERT INTO t10_binbig VALUES (0, 1);
COPY t10_binbig TO PROGRAM :'copy_out' WITH (FORMAT binary);
COPY t10_bin2 FROM PROGRAM :'copy_in' WITH (FORMAT binary);
TRUNCATE t10_binbig;
INSERT INTO t10_binbig VALUES (-7, 1);
COPY t10_binbig TO PROGRAM :'copy_out' WITH (FORMAT binary);
COPY t10_bin2 FROM PROGRAM :'copy_in' WITH (FORMAT binary);
SELECT count(*) AS rows_after_bad_copy FROM t10_bin2;
COPY (SELECT 1) TO PROGRAM :'copy_rm';
DROP TABLE t10_bin, t10_bin2, t10_binbig;

RESET search_path;
