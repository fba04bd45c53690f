-- enqueue_notify: producers NOTIFY 'awa:<queue>' only through the awa_shard.notify_interval
-- throttle (0 = every producing transaction, -1 = never) and never for deferred rows.
-- psql prints notifications with the sender's PID, so they are written to a private file
-- with \o and shown with the PID masked.
SELECT '/tmp/awa_enqueue_notify_' || pg_backend_pid() || '_' || md5(random()::text) || '.txt' AS notify_file \gset
\setenv AWA_NOTIFY_FILE :notify_file
LISTEN "awa:enqueue_notify";
LISTEN "awa:enqueue_notify_other";

-- interval 0: one notification per producing transaction (two rows, one transaction, one NOTIFY).
SET awa_shard.notify_interval = 0;
\o :notify_file
SELECT cardinality(awa.insert_jobs('enqueue_notify', ARRAY['a', 'b']));
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify');
\o
\! sed -E 's/PID [0-9]+/PID N/' "$AWA_NOTIFY_FILE" | grep -c 'Asynchronous notification "awa:enqueue_notify" received from server process with PID N'
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"

-- Deferred rows never notify, even at interval 0.
\o :notify_file
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify', p_run_at => now() + interval '1 hour');
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify', p_state => 'scheduled');
\o
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"

-- A rolled-back producer notifies nobody.
\o :notify_file
BEGIN;
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify');
ROLLBACK;
\o
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"

-- interval -1: never.
SET awa_shard.notify_interval = -1;
\o :notify_file
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify');
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify_other');
\o
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"

-- A long interval: the first transaction for a queue notifies, the next ones within the
-- interval do not.
SET awa_shard.notify_interval = '1h';
\o :notify_file
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify_other');
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify_other');
SELECT 1 FROM awa.insert_job_compat('n', 'enqueue_notify_other');
\o
\! sed -E 's/PID [0-9]+/PID N/' "$AWA_NOTIFY_FILE" | grep 'Asynchronous notification'
\! rm -f "$AWA_NOTIFY_FILE"
RESET awa_shard.notify_interval;
UNLISTEN *;
SELECT count(*) AS ready_rows FROM awa.ready_entries WHERE queue LIKE 'enqueue_notify%';
