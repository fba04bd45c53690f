-- claim_probe_stale: the candidate walk's per-backend probe cache (docs/design.md §4) must not
-- change which jobs a claim returns. The walk keeps "the lanes that have a visible ready row
-- at or after their cursor", ordered by effective priority, then the run_at of that row, then
-- lane priority. A remembered row that was removed by cancel_job or move_queue moves neither
-- its lane's cursor nor its sequence, so the remembered lane keeps the old row's run_at.
\set VERBOSITY terse

-- 1. A claim must not come back empty while lanes of its queue hold waiting jobs nobody
--    holds: every lane whose remembered row is gone drains nothing, and after four empty
--    drains the claim gives up.
SELECT awa.create_queue('stale_q', 8);
-- One ordering key per shard.
CREATE TEMP TABLE stale_keys AS
SELECT DISTINCT ON (s) s, k FROM (
  SELECT awa.shard_for_enqueue('stale_q', 2, convert_to(g::text, 'UTF8')) AS s, g::text AS k
  FROM generate_series(1, 500) g) x ORDER BY s, k;
SELECT count(*) AS shards_covered FROM stale_keys;
-- One job per lane; shard s's job is the s-th oldest.
CREATE TEMP TABLE stale_jobs AS
SELECT s, (awa.insert_job_compat('j' || s, 'stale_q', p_ordering_key => convert_to(k, 'UTF8'),
                                 p_run_at => now() - make_interval(secs => 100 - s))).id AS id
FROM stale_keys ORDER BY s;
-- The first claim probes all eight hint-less lanes (this backend remembers them) and takes j0.
SELECT kind FROM awa.claim_ready_runtime('stale_q', 1);
-- The next five oldest are cancelled.
SELECT count(*) FILTER (WHERE awa.cancel_job(id)) AS cancelled FROM stale_jobs WHERE s BETWEEN 1 AND 5;
-- j6 and j7 wait on unlocked lanes: each claim takes one, oldest first.
SELECT kind FROM awa.claim_ready_runtime('stale_q', 1);
SELECT kind FROM awa.claim_ready_runtime('stale_q', 1);
SELECT count(*) AS left_over FROM awa.claim_ready_runtime('stale_q', 1);

-- 2. The same with move_queue and aging on.
SELECT awa.create_queue('stale_m', 8);
SELECT awa.create_queue('stale_elsewhere');
CREATE TEMP TABLE stale_jobs2 AS
SELECT s, (awa.insert_job_compat('m' || s, 'stale_m', p_ordering_key => convert_to(k, 'UTF8'),
                                 p_run_at => now() - make_interval(secs => 100 - s))).id AS id
FROM stale_keys ORDER BY s;
SELECT kind FROM awa.claim_ready_runtime('stale_m', 1, 0, 30);
SELECT count(*) FILTER (WHERE awa.move_queue(id, 'stale_elsewhere')) AS moved FROM stale_jobs2 WHERE s BETWEEN 1 AND 6;
SELECT kind FROM awa.claim_ready_runtime('stale_m', 1, 0, 30);

-- 3. Priority with aging (one shard, one lane per priority; aging step 100 s). Lane 1 holds
--    c1 (2000 s old, claimed first); lane 4 holds a1 (1000 s old: aged to priority 1) and
--    a2 (fresh: priority 4). The first claim probes lane 4 and remembers a1.
SELECT awa.create_queue('stale_a');
SELECT (awa.insert_job_compat('c1', 'stale_a', p_priority => 1, p_run_at => now() - interval '2000 s')).id IS NOT NULL AS c1;
SELECT (awa.insert_job_compat('a1', 'stale_a', p_priority => 4, p_run_at => now() - interval '1000 s')).id AS a1 \gset
SELECT (awa.insert_job_compat('a2', 'stale_a', p_priority => 4)).id IS NOT NULL AS a2;
SELECT kind, lane_priority, priority FROM awa.claim_ready_runtime('stale_a', 1, 0, 100);
-- a1 is cancelled; b1 (priority 1, 10 s old) arrives.
SELECT awa.cancel_job(:a1);
SELECT (awa.insert_job_compat('b1', 'stale_a', p_priority => 1, p_run_at => now() - interval '10 s')).id IS NOT NULL AS b1;
-- Lane 4's first row is now a2 (effective priority 4): b1 (priority 1) comes first.
SELECT kind, lane_priority, priority FROM awa.claim_ready_runtime('stale_a', 1, 0, 100);
SELECT kind, lane_priority, priority FROM awa.claim_ready_runtime('stale_a', 1, 0, 100);

SELECT awa.drop_queue(q, true) >= 0 AS dropped FROM unnest(ARRAY['stale_q', 'stale_m', 'stale_elsewhere', 'stale_a']) q;
