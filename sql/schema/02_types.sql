CREATE TYPE awa.job_state AS ENUM (
    'scheduled', 'available', 'running', 'completed',
    'retryable', 'failed', 'cancelled', 'waiting_external');
COMMENT ON TYPE awa.job_state IS 'State of a job; the label order defines the bits of a unique-state mask.';

-- Composite returned by the producer functions; same columns as the awa.jobs view. The
-- columns after lane_seq are not job attributes (awa.job_template): they are read from where
-- they live, progress from the running attempt's awa.attempt_state row, result from the
-- completion's awa.completion_batches row.
CREATE TYPE awa.job_row AS (
    id bigint,
    kind text,
    queue text,
    args jsonb,
    state awa.job_state,
    priority smallint,
    attempt smallint,
    run_lease bigint,
    max_attempts smallint,
    run_at timestamptz,
    attempted_at timestamptz,
    finalized_at timestamptz,
    created_at timestamptz,
    metadata jsonb,
    tags text[],
    errors jsonb,
    unique_key bytea,
    unique_states bit(8),
    ordering_key bytea,
    enqueue_shard smallint,
    lane_seq bigint,
    progress jsonb,
    result jsonb,
    concurrency_key text);
COMMENT ON TYPE awa.job_row IS 'A job as callers see it: returned by insert_job_compat, get_job and list_jobs; the columns of awa.jobs.';

-- An attempt an exit has just ended (taken out of the running set), with its ready row's body.
CREATE TYPE awa.taken_attempt AS (
    job_id bigint, kind text, queue text, args jsonb, priority smallint, attempt smallint,
    run_lease bigint, max_attempts smallint, run_at timestamptz, attempted_at timestamptz,
    created_at timestamptz, unique_key bytea, unique_states bit(8), ordering_key bytea,
    metadata jsonb, tags text[], errors jsonb,
    ready_slot integer, ready_generation bigint, enqueue_shard smallint, lane_seq bigint,
    concurrency_key text);
COMMENT ON TYPE awa.taken_attempt IS 'Internal: an attempt an exit has just ended (taken out of the running set), with its ready row''s body.';

-- =========================================================================================
-- One definition of a job: awa.job_template names the attributes every job
-- carries, under the same names and types in every table that holds jobs (ready_entries,
-- done_entries, deferred_jobs, dlq_entries) and in awa.taken_attempt and awa.job_row. The
-- C++ list AWA_JOB_COLUMNS (src/job_columns.hpp) is the same list in the same order; the
-- regression test job_definition checks both. Code that moves a job from one table to
-- another goes through the template (awa._job, awa._job_row) and names only the columns
-- the destination adds or changes, so a new attribute travels with no other edit
-- (docs/design.md, "Adding a job attribute").
-- =========================================================================================

CREATE TYPE awa.job_template AS (
    job_id bigint, kind text, queue text, args jsonb, priority smallint, attempt smallint,
    run_lease bigint, max_attempts smallint, run_at timestamptz, attempted_at timestamptz,
    created_at timestamptz, unique_key bytea, unique_states bit(8), ordering_key bytea,
    metadata jsonb, tags text[], errors jsonb, concurrency_key text);

COMMENT ON TYPE awa.job_template IS 'The attributes of a job, as every table holding jobs names them (one definition; src/job_columns.hpp is the same list).';
