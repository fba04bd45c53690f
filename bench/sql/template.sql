-- Objects of the benchmark template database: the extension under test, PgQ, and the
-- baseline tables. Every cell runs in a fresh copy of this database.
CREATE EXTENSION awa_shard;
CREATE EXTENSION pgq;
CREATE SCHEMA bench;

-- Physical-limit baseline: an ordinary (unpartitioned) table with the columns, primary key
-- and secondary index of awa.ready_entries (a partition of it has exactly these two indexes).
CREATE TABLE bench.raw_ready (LIKE awa.ready_entries INCLUDING DEFAULTS);
ALTER TABLE bench.raw_ready ADD PRIMARY KEY (queue, priority, enqueue_shard, lane_seq, ready_slot);
CREATE INDEX raw_ready_job_idx ON bench.raw_ready (job_id);
CREATE SEQUENCE bench.raw_seq AS bigint;
-- The same columns with only a primary key on the job id and the lane index: the lighter
-- baseline of single-row enqueue (what a hand-rolled FIFO table would carry).
CREATE TABLE bench.raw_ready_pk (LIKE awa.ready_entries INCLUDING DEFAULTS);
ALTER TABLE bench.raw_ready_pk ADD PRIMARY KEY (job_id);
CREATE INDEX raw_ready_pk_lane_idx ON bench.raw_ready_pk (queue, priority, enqueue_shard, lane_seq);

-- Plain SKIP LOCKED table queue (the usual hand-rolled PostgreSQL queue).
CREATE TABLE bench.skipq (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    run_at timestamptz NOT NULL DEFAULT now(),
    locked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX skipq_ready_idx ON bench.skipq (id) WHERE locked_at IS NULL;

-- PgQ end-to-end latency log: one row per consumed batch (unlogged: no WAL).
CREATE UNLOGGED TABLE bench.pgq_lat (
    batch_id bigint NOT NULL,
    events integer NOT NULL,
    lat double precision[],
    fetched_at timestamptz NOT NULL DEFAULT clock_timestamp());

-- awa end-to-end log: one row per completed batch (unlogged: no WAL). Prune truncates the
-- plane's own rows while the cell runs, so counts and latencies are recorded here.
CREATE UNLOGGED TABLE bench.awa_lat (
    events integer NOT NULL,
    lat double precision[],
    completed_at timestamptz NOT NULL DEFAULT clock_timestamp());

-- The commit ceiling's table: one small row per transaction, so that each commit waits for its
-- WAL flush as a worker's does (a transaction that only takes an id commits asynchronously).
CREATE TABLE bench.commit_probe (n integer);
