-- Periodic jobs (docs/api.md, "Periodic jobs"): one row per named schedule, managed by
-- awa.schedule() and friends and read through the awa.schedules view. The maintenance step
-- awa.run_schedules() enqueues the job of a due tick and moves next_run_at in the same
-- transaction, under this row's lock: the row is the fence that makes one job per tick.
-- A configuration table: pg_dump keeps its rows. Its key begins with the queue so that on a
-- Citus cluster it is distributed with the queue's other rows (a tick's enqueue and its
-- update are one worker's transaction); a name is unique install-wide through
-- cron_schedules_name on one server and through awa.schedule's lock on a cluster
-- (docs/scale-out.md, "Periodic jobs").
CREATE TABLE awa.cron_schedules (
    name text NOT NULL,
    cron text NOT NULL,
    timezone text NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL,
    priority smallint NOT NULL,
    max_attempts smallint NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    next_run_at timestamptz,
    last_run_at timestamptz,
    last_enqueued_at timestamptz,
    last_job_id bigint,
    ticks_reset_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    CONSTRAINT cron_schedules_pkey PRIMARY KEY (queue, name),
    CONSTRAINT cron_schedules_name_length CHECK (length(name) BETWEEN 1 AND 200));
CREATE UNIQUE INDEX cron_schedules_name ON awa.cron_schedules (name);
CREATE INDEX cron_schedules_due ON awa.cron_schedules (next_run_at) WHERE NOT paused;
SELECT pg_catalog.pg_extension_config_dump('awa.cron_schedules', '');
-- pg_monitor as for awa.schedules, which shows every column: on a Citus cluster the view's
-- reads of the shards are checked against the caller's own privileges.
GRANT SELECT ON awa.cron_schedules TO awa_admin, pg_monitor;
COMMENT ON TABLE awa.cron_schedules IS 'Periodic jobs: one row per schedule (awa.schedule); the maintenance step enqueues their ticks.';
COMMENT ON COLUMN awa.cron_schedules.cron IS 'Five cron fields, an @alias or ''N seconds'' (1..59).';
COMMENT ON COLUMN awa.cron_schedules.timezone IS 'Time zone of the cron fields (a name of pg_timezone_names).';
COMMENT ON COLUMN awa.cron_schedules.next_run_at IS 'The next tick to enqueue; stale while paused (resume computes it again).';
COMMENT ON COLUMN awa.cron_schedules.last_run_at IS 'The tick (run_at) of the last job enqueued.';
COMMENT ON COLUMN awa.cron_schedules.last_enqueued_at IS 'When the last job was enqueued.';
COMMENT ON COLUMN awa.cron_schedules.last_job_id IS 'Id of the last job enqueued.';
COMMENT ON COLUMN awa.cron_schedules.ticks_reset_at IS 'When resume_schedule, or a change of cron or time zone, last set next_run_at to the first tick after that moment (NULL: never); the ticks from there on are owed as after a job enqueued then.';
