-- One heartbeat per transaction (awa.heartbeat_jobs of one attempt) on one of :jobs running
-- attempts (job ids :first .. :first + :jobs - 1, run lease 1), chosen at random: after each
-- attempt's first heartbeat its attempt_state row exists, as for a worker's long job.
\set id :first + random(0, :jobs - 1)
SELECT awa.heartbeat_jobs(ARRAY[:id]::bigint[], '{1}');
