-- The data of `make demo` (tests/scripts/demo.sh): one settlement batch of
-- 40,000 card transactions and its summary row, twice: once in a table that
-- fencing protects, once in a plain table for the control run.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;

CREATE TABLE demo_transactions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id     integer NOT NULL,
    merchant     text    NOT NULL,
    amount_cents bigint  NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON demo_transactions (batch_id);

-- 40,000 transactions of batch 7, amounts 1.00 .. 1,000.00 (deterministic).
INSERT INTO demo_transactions (batch_id, merchant, amount_cents)
SELECT 7, 'merchant-' || (i % 97), 100 + (i::bigint * 7919) % 99901
  FROM generate_series(1, 40000) AS i;

-- The summary the workers write. fencing.protect makes the table refuse a
-- write whose fence_token is not newer than the one the row holds.
CREATE TABLE settlement_batches (
    batch_id    integer PRIMARY KEY,
    status      text    NOT NULL DEFAULT 'open',
    row_count   integer,
    total_cents bigint,
    written_by  text,
    written_at  timestamptz,
    fence_token fencing.token
);
INSERT INTO settlement_batches (batch_id) VALUES (7);
SELECT fencing.protect('settlement_batches');

-- The control run: the same table, unprotected, and a classic timed lock
-- (Redis' SET key value NX PX ttl, as a row with an expiry time).
CREATE TABLE settlement_batches_unfenced (LIKE settlement_batches INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE settlement_batches_unfenced ADD PRIMARY KEY (batch_id);
INSERT INTO settlement_batches_unfenced (batch_id) VALUES (7);

CREATE TABLE demo_plain_locks (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz NOT NULL
);
ANALYZE;
