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

-- Throttle slots are shared by hash (256 of them, by database and queue name): a slot that
-- another queue used last does not throttle this one. The slot and the tag the throttle
-- keeps are computed here as the server computes them (hash_combine(hashoid(database),
-- hashtext(queue))), and two pairs of queue names are picked from 20,000: one pair that
-- shares a slot and differs in tag (each notifies once within the interval), and one pair
-- whose slot and tag are the same (the second is throttled: it shows the hash here is the
-- server's, so the first pair does share a slot).
CREATE TEMP TABLE notify_slots AS
WITH q AS (SELECT 'en_slot_' || i AS queue FROM generate_series(1, 20000) i),
h AS (SELECT queue, (hashoid(d.oid)::bigint & 4294967295) AS a, (hashtext(queue)::bigint & 4294967295) AS b
        FROM q, pg_database d WHERE d.datname = current_database()),
c AS (SELECT queue, a # ((b + 2654435769 + ((a << 6) & 4294967295) + (a >> 2)) & 4294967295) AS h FROM h)
SELECT queue, h % 256 AS slot, (h >> 16) & 65535 AS tag FROM c;
SELECT min(x.queue) AS shared_a, max(y.queue) AS shared_b
  FROM notify_slots x JOIN notify_slots y ON x.slot = y.slot AND x.tag <> y.tag AND x.queue < y.queue
 WHERE x.slot = (SELECT min(slot) FROM notify_slots) \gset
SELECT x.queue AS same_a, y.queue AS same_b
  FROM notify_slots x JOIN notify_slots y ON x.slot = y.slot AND x.tag = y.tag AND x.queue < y.queue
 ORDER BY 1, 2 LIMIT 1 \gset
SELECT (SELECT slot FROM notify_slots WHERE queue = :'shared_a') = (SELECT slot FROM notify_slots WHERE queue = :'shared_b')
       AS shared_pair_same_slot,
       (SELECT tag FROM notify_slots WHERE queue = :'same_a') = (SELECT tag FROM notify_slots WHERE queue = :'same_b')
       AS same_pair_same_tag;
-- (the names depend on the database's oid: the LISTEN commands are not echoed)
\set ECHO none
SELECT 'LISTEN "awa:' || q || '"' FROM unnest(ARRAY[:'shared_a', :'shared_b', :'same_a', :'same_b']) q \gexec
\set ECHO all
SET awa_shard.notify_interval = '1h';
\o :notify_file
SELECT 1 FROM awa.insert_job_compat('n', :'shared_a');
SELECT 1 FROM awa.insert_job_compat('n', :'shared_b');
\o
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"
\o :notify_file
SELECT 1 FROM awa.insert_job_compat('n', :'same_a');
SELECT 1 FROM awa.insert_job_compat('n', :'same_b');
\o
\! grep -c 'Asynchronous notification' "$AWA_NOTIFY_FILE"
\! rm -f "$AWA_NOTIFY_FILE"
RESET awa_shard.notify_interval;
UNLISTEN *;
SELECT sum(awa.drop_queue(q, p_force => true)) >= 0 AS dropped
  FROM unnest(ARRAY[:'shared_a', :'shared_b', :'same_a', :'same_b']) q;
