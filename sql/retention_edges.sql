-- retention_edges: odd retentions, hand-written settings, paused queues and odd names against
-- per-queue retention (docs/operations.md §10, docs/maintenance.md "Retention") and the
-- 1.1 flow-control settings.
-- Rings are global: run in a database of our own so other tests' rows do not interfere.
SELECT current_database() AS home \gset
CREATE DATABASE awa_retention_edges;
ALTER DATABASE awa_retention_edges SET awa_shard.maintenance = off;
\c awa_retention_edges
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;
\set VERBOSITY terse
\i sql/err.psql
\i sql/prune_when_seen.psql

SELECT awa.create_queue('re_q');

-- A retention with a part of the other sign compares as not negative ('1 month -30 days'
-- = 0, '1 month -29 days' = 1 day), but how long it keeps a job depends on the calendar
-- (a job finished on 1 February with '1 month -29 days' would go at once): 22023 naming the
-- argument, nothing written. Retentions made of parts of one sign are taken as written (a
-- time of day is one part: '1 hour -1 second' is 00:59:59).
SELECT r AS retention, pg_temp.err(format('SELECT awa.set_queue_retention(%L, %L, NULL)', 're_q', r)) AS completed,
       pg_temp.err(format('SELECT awa.set_queue_retention(%L, NULL, %L)', 're_q', r)) AS failed
  FROM unnest(ARRAY['1 month -30 days', '1 month -29 days', '-1 month 31 days', '1 day -1 hour', '-1 day 25 hours',
                    '1 hour -1 second', '0', '-0 seconds', '1 mon', '1 year 2 mons 3 days 04:05:06',
                    '1000 years', '1000 years 1 day']) r;
SELECT completed_retention, failed_retention FROM awa.queue_meta WHERE queue = 're_q';
-- The rule's longest retention is the limit of every interval argument.
SELECT awa._interval_in_range(make_interval(years => awa._limit('max_interval_years'))) AS at_limit,
       awa._interval_in_range(make_interval(years => awa._limit('max_interval_years'), days => 1)) AS past_limit;

-- queue_meta is writable by awa_admin by hand (docs/operations.md §2): the table holds a
-- retention to the same rule (23514 naming the constraint). A retention past the last
-- timestamp made every prune, and so every run_maintenance, fail with 22008 for all queues.
SET ROLE awa_admin;
SELECT r AS retention, pg_temp.err(format('UPDATE awa.queue_meta SET completed_retention = %L WHERE queue = %L', r, 're_q')) AS completed,
       pg_temp.err(format('UPDATE awa.queue_meta SET failed_retention = %L WHERE queue = %L', r, 're_q')) AS failed
  FROM unnest(ARRAY['300000 years', '1001 years', '-1 second', '1 month -30 days', '7 days']) r;
SELECT pg_temp.err($$INSERT INTO awa.queue_meta (queue, failed_retention) VALUES ('re_hand', '-1 day')$$) AS insert_negative;
SELECT pg_temp.err($$UPDATE awa.queue_meta SET enqueue_shards = 1 WHERE queue = 're_q'$$) AS other_setting_by_hand;
RESET ROLE;
SELECT queue, completed_retention, failed_retention FROM awa.queue_meta ORDER BY queue;

-- The longest retention keeps a job through prune; maintenance goes on.
SELECT awa.set_queue_retention('re_q', '1000 years', '1000 years');
CREATE TEMP TABLE re_jobs AS
SELECT g, (awa.insert_job_compat('re', 're_q', jsonb_build_object('g', g), p_max_attempts => 1)).id
  FROM generate_series(1, 2) g;
SELECT count(*) AS completed FROM awa.claim_ready_runtime('re_q', 1) c,
       awa.complete_jobs(ARRAY[c.job_id], ARRAY[c.run_lease], ARRAY['{"ok": true}'::jsonb]);
SELECT awa.fail_job(c.job_id, c.run_lease, 'boom') AS failed FROM awa.claim_ready_runtime('re_q', 1) c;
SELECT awa.rotate_queue_ring() AS rotate;
SELECT awa.prune_queue_ring() AS prune_copies;
CALL pg_temp.prune_when_seen(NULL); -- prune_frees
SELECT awa.run_maintenance() ->> 'queue_prune' AS maintenance_prune;
SELECT g, x.state, x.result FROM re_jobs j LEFT JOIN LATERAL awa.get_job(j.id) x ON true ORDER BY g;
SELECT count(*) AS in_buckets FROM awa.done_entries WHERE queue = 're_q' AND ready_slot <= -2;
SELECT awa._expire_retention(now() + interval '999 years', 1000) AS after_999_years;

-- A paused queue with a retention: prune copies its finished jobs to their buckets and moves
-- its waiting jobs forward (none lost, none pinning the ring), every job is found by get_job,
-- list_jobs and the counts in its state, and once resumed the waiting jobs are claimed in
-- their lane's order.
SELECT awa.create_queue('re_paused');
SELECT awa.set_queue_retention('re_paused', '1 hour', '2 hours');
CREATE TEMP TABLE rp_jobs AS
SELECT g, (awa.insert_job_compat('rp', 're_paused', jsonb_build_object('g', g), p_max_attempts => 1)).id
  FROM generate_series(1, 6) g;
CREATE TEMP TABLE rp_claims AS SELECT * FROM awa.claim_ready_runtime('re_paused', 3);
SELECT count(*) AS completed
  FROM awa.complete_jobs(ARRAY(SELECT job_id FROM rp_claims ORDER BY job_id LIMIT 2),
                         ARRAY(SELECT run_lease FROM rp_claims ORDER BY job_id LIMIT 2),
                         ARRAY['{"r": 1}', '{"r": 2}']::jsonb[]);
SELECT awa.fail_job(job_id, run_lease, 'boom') AS failed FROM rp_claims ORDER BY job_id DESC LIMIT 1;
SELECT awa.pause_queue('re_paused');
SELECT awa.cancel_job(id) AS cancelled FROM rp_jobs WHERE g = 6;
SELECT awa.rotate_queue_ring() AS rotate;
SELECT awa.prune_queue_ring() AS prune_moves;
CALL pg_temp.prune_when_seen(NULL); -- prune_frees
SELECT count(*) AS sealed_slots_left FROM awa.queue_ring_slots s, awa.queue_ring_state st
 WHERE s.generation >= 0 AND s.slot <> st.current_slot;
SELECT g, x.state, x.args ->> 'g' AS args, x.result FROM rp_jobs j LEFT JOIN LATERAL awa.get_job(j.id) x ON true ORDER BY g;
SELECT j.g, l.state FROM awa.list_jobs('re_paused') l JOIN rp_jobs j ON j.id = l.id ORDER BY j.g;
SELECT available, completed, failed, cancelled FROM awa.queue_counts_exact('re_paused');
SELECT count(*) AS claimed_while_paused FROM awa.claim_ready_runtime('re_paused', 10);
SELECT awa.resume_queue('re_paused');
SELECT array_agg((args ->> 'g')::int ORDER BY job_id) AS claimed_after_resume FROM awa.claim_ready_runtime('re_paused', 10);

-- Odd queue names travel as values: quotes, a semicolon, a tab, 200 four-byte characters
-- (800 bytes, the longest name, far past 64 bytes) take every 1.1 setting and read back as
-- set; 201 characters are refused (23514) by each.
CREATE TEMP TABLE re_names AS
SELECT n, q FROM unnest(ARRAY['it''s "q"', 'q; DROP TABLE awa.queue_meta', E'tab\tq', repeat(chr(128512), 200), repeat(chr(128512), 199) || 'v'])
       WITH ORDINALITY AS x(q, n);
SELECT n, awa.create_queue(q) FROM re_names ORDER BY n;
SELECT n, awa.set_queue_retention(q, make_interval(days => n::int), NULL) IS NOT NULL AS set_retention,
       awa.set_concurrency_limit(q, n) IS NOT NULL AS set_cap, awa.pause_queue(q) AS paused
  FROM re_names ORDER BY n;
-- Rate limits need the preload (55000 without it, expected/retention_edges_1.out).
SELECT n, pg_temp.err(format('SELECT awa.set_rate_limit(%L, %s, %s)', q, n, n)) AS set_rate FROM re_names ORDER BY n;
SELECT r.n, length(m.queue) AS chars, octet_length(m.queue) AS bytes, m.completed_retention, m.rate_per_second,
       m.rate_burst, m.concurrency_limit, m.paused
  FROM re_names r JOIN awa.queue_meta m ON m.queue = r.q ORDER BY r.n;
SELECT f, pg_temp.err(format(f, repeat('ü', 201))) AS too_long
  FROM unnest(ARRAY['SELECT awa.set_queue_retention(%L, NULL, NULL)', 'SELECT awa.set_rate_limit(%L, 1)',
                    'SELECT awa.set_concurrency_limit(%L, 1)', 'SELECT awa.pause_queue(%L)',
                    'SELECT awa.list_jobs(%L)', 'SELECT awa.cancel_jobs(%L)', 'SELECT awa.retry_jobs(%L)']) f;
-- Each long name has a token bucket of its own (the names share their first 796 bytes): the
-- first queue's claim takes its 4 tokens, the second still has its 5 (a shared bucket of 5
-- would have had 1 left). Without the preload only the caps (4 and 5) hold the claims.
SELECT awa.resume_queue(q) FROM re_names WHERE n IN (4, 5);
SELECT count((awa.insert_job_compat('rn', q)).id) AS enqueued FROM re_names, generate_series(1, 6) WHERE n IN (4, 5);
SELECT n, (SELECT count(*) FROM awa.claim_ready_runtime(q, 10)) AS claimed FROM re_names WHERE n IN (4, 5) ORDER BY n;

-- Rate limits: NaN, infinities, zero and negative zero are refused (22023), so are bursts
-- past 1 000 000 or below 1 and caps past 1 000 000; the smallest positive rate is a rate.
SELECT r, b, pg_temp.err(format('SELECT awa.set_rate_limit(%L, %s, %s)', 're_q', r, b)) AS rate_limit
  FROM (VALUES ('''NaN''::float8', '1'), ('''Infinity''::float8', '1'), ('''-Infinity''::float8', '1'),
               ('0', '1'), ('''-0''::float8', '1'), ('1e9', '1000000'), ('1e9 + 1', '1'), ('1', '1000001'),
               ('1', '0'), ('1', '9223372036854775807'), ('4.9e-324', '1')) v(r, b);
SELECT l, pg_temp.err(format('SELECT awa.set_concurrency_limit(%L, %s)', 're_q', l)) AS cap
  FROM unnest(ARRAY['0', '-1', '1000000', '1000001', '9223372036854775807']) l;
SELECT rate_per_second > 0 AS positive_rate, rate_burst, concurrency_limit FROM awa.queue_meta WHERE queue = 're_q';
-- By hand, the table's checks hold the same ranges.
SET ROLE awa_admin;
SELECT pg_temp.err($$UPDATE awa.queue_meta SET rate_per_second = 'NaN' WHERE queue = 're_q'$$) AS nan_by_hand,
       pg_temp.err($$UPDATE awa.queue_meta SET concurrency_limit = 0 WHERE queue = 're_q'$$) AS zero_cap_by_hand;
RESET ROLE;

-- Thresholds subtracted from now have the same rule: '1 month -29 days' compares as a day,
-- yet on the days after a month shorter than 30 days now minus it is in the future, and every
-- running attempt would count as stale (rescued and run again) or every waiting job as old.
-- 22023 naming the argument, before anything is done.
SELECT f, pg_temp.err(format(f, '1 month -29 days')) AS mixed, pg_temp.err(format(f, '-1 day 25 hours')) AS mixed_time
  FROM unnest(ARRAY['SELECT awa.run_maintenance(%L)', 'SELECT awa.rescue_stale_heartbeats(%L)',
                    'SELECT awa.age_waiting_priorities(%L)']) f;
SELECT awa.rescue_stale_heartbeats('1 mon') AS rescued_one_month, awa.age_waiting_priorities('1 mon') AS aged_one_month;

\c :home
DROP DATABASE awa_retention_edges;
