-- awa.maintenance_status (docs/maintenance.md §1): always a row for this database. The test
-- servers run without background maintenance (or without preload), so this database has no
-- worker and no pass and is served by its claims: a claim promotes the queue's due job
-- itself. The view's columns, and who may read it (awa_admin, pg_monitor), are fixed here.
SELECT database = current_database() AS this_database, served_by, worker_pid, last_pass, passes, last_error,
       last_error_at
  FROM awa.maintenance_status WHERE database = current_database();
SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute WHERE attrelid = 'awa.maintenance_status'::regclass AND attnum > 0 ORDER BY attnum;
SELECT r AS role, has_table_privilege(r, 'awa.maintenance_status', 'SELECT') AS may_read
  FROM unnest(ARRAY['awa_admin', 'pg_monitor', 'awa_worker', 'awa_producer', 'public']) r;
SELECT (awa.insert_job_compat('due', 'ms_q', p_state => 'scheduled', p_run_at => now() - interval '1 second')).state;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('ms_q', 10, 0, 0);
SELECT awa.drop_queue('ms_q', true) >= 0 AS dropped;
