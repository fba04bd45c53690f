-- Jobs off the ready plane: scheduled and retryable, dead-lettered, and unique claims.

-- Scheduled and retryable jobs. Unsharded; the ordering key is kept so a keyed job
-- returns to its key's shard when promoted.
CREATE TABLE awa.deferred_jobs (
    job_id bigint NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    state awa.job_state NOT NULL CHECK (state IN ('scheduled', 'retryable')),
    priority smallint NOT NULL,
    attempt smallint NOT NULL DEFAULT 0,
    run_lease bigint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 25,
    run_at timestamptz NOT NULL,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    concurrency_key text,
    PRIMARY KEY (job_id, queue));
CREATE INDEX deferred_jobs_due_idx ON awa.deferred_jobs (run_at, priority, job_id);
CREATE INDEX deferred_jobs_queue_idx ON awa.deferred_jobs (queue, state);
-- Promotion of one queue (awa._promote_due_queue, run by claims where no maintenance worker
-- serves the database) finds the queue's due jobs here.
CREATE INDEX deferred_jobs_queue_due_idx ON awa.deferred_jobs (queue, run_at);
SELECT pg_catalog.pg_extension_config_dump('awa.deferred_jobs', '');
GRANT SELECT ON awa.deferred_jobs TO awa_admin;
COMMENT ON TABLE awa.deferred_jobs IS 'Scheduled and retryable jobs with their ordering key; promoted to the ready plane when due.';

-- Dead-letter queue. Unsharded (job_id is globally unique); keeps the ordering key.
CREATE TABLE awa.dlq_entries (
    job_id bigint NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}',
    state awa.job_state NOT NULL DEFAULT 'failed',
    priority smallint NOT NULL,
    attempt smallint NOT NULL,
    run_lease bigint NOT NULL,
    max_attempts smallint NOT NULL,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at timestamptz NOT NULL,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    metadata jsonb,
    tags text[],
    errors jsonb,
    dlq_reason text NOT NULL,
    dlq_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    original_run_lease bigint NOT NULL,
    concurrency_key text,
    PRIMARY KEY (job_id, queue));
CREATE INDEX dlq_entries_queue_idx ON awa.dlq_entries (queue, dlq_at DESC);
SELECT pg_catalog.pg_extension_config_dump('awa.dlq_entries', '');
GRANT SELECT ON awa.dlq_entries TO awa_admin;
COMMENT ON TABLE awa.dlq_entries IS 'Dead-lettered jobs with reason, errors and ordering key.';

-- One live claim per unique key and queue: unique keys are per queue (docs/api.md).
CREATE TABLE awa.job_unique_claims (
    unique_key bytea NOT NULL,
    job_id bigint NOT NULL,
    queue text NOT NULL);
CREATE UNIQUE INDEX idx_awa_jobs_unique ON awa.job_unique_claims (queue, unique_key);
CREATE INDEX job_unique_claims_job_idx ON awa.job_unique_claims (job_id);
SELECT pg_catalog.pg_extension_config_dump('awa.job_unique_claims', '');
GRANT SELECT ON awa.job_unique_claims TO awa_admin;
COMMENT ON TABLE awa.job_unique_claims IS 'At most one live job per unique key and queue.';
