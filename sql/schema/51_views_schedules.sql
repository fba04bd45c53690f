-- The schedules of periodic jobs (docs/api.md, "Periodic jobs"); next_run_at is NULL while
-- a schedule is paused.
CREATE VIEW awa.schedules AS
    SELECT s.name, s.cron, s.timezone, s.kind, s.queue, s.args, s.priority, s.max_attempts,
           s.metadata, s.tags, s.paused,
           CASE WHEN s.paused THEN NULL ELSE s.next_run_at END AS next_run_at,
           s.last_run_at, s.last_enqueued_at, s.last_job_id, s.created_at, s.updated_at
      FROM awa.cron_schedules s;
COMMENT ON VIEW awa.schedules IS 'Periodic jobs: cron, time zone, job template, next tick (NULL while paused), last job enqueued.';
GRANT SELECT ON awa.schedules TO awa_admin, pg_monitor;
