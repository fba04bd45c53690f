-- claim_roundtrip: claim_ready_runtime and complete_jobs end to end: the multi-shard round
-- trip (reference T2), no shard starves (T3), lowering S still drains every shard (T4),
-- priority aging keeps the lane identity, paused and empty queues claim nothing.
-- It calls each queue's functions alone in their statements, so that it runs through a Citus
-- coordinator too (its loops are psql scripts of such statements).
\set VERBOSITY terse

-- :drain claims from queue :dq (:dbatch at a time) and completes until the queue is empty,
-- each claim and its completion in a statement of its own (committed after every claim), at
-- most 1000 claims; then prints how many jobs were completed and how many claims returned rows.
SELECT '\set completed 0 \\ \set claims 0 \\ \set more true \\ ' || repeat($turn$\if :more \\
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases, count(*) > 0 AS more
  FROM awa.claim_ready_runtime(:'dq', :dbatch) \gset \\
\if :more \\
SELECT :completed + count(*) AS completed, :claims + 1 AS claims
  FROM awa.complete_jobs(:'ids'::bigint[], :'leases'::bigint[], p_queue => :'dq') \gset \\
\endif \\ \endif \\ $turn$, 1000) || 'SELECT :completed AS completed, :claims AS claims;' AS drain \gset

-- :lane_peeks sets :peeks to the next enqueue value of every lane of queue :lq (a peek, which
-- reserves nothing: each in a statement of its own), as {"priority/shard": value}.
SELECT $script$\set peeks '{}' \\
SELECT coalesce(string_agg(format('SELECT :''peeks''::jsonb || jsonb_build_object(%L, n) AS peeks '
                                  'FROM awa.reserve_enqueue_seq(%L, %s, %s, 0) n \gset \\',
                                  priority || '/' || enqueue_shard, queue, priority, enqueue_shard), ' '), '') AS peek_lanes
  FROM awa.queue_enqueue_heads WHERE queue = :'lq' \gset \\
:peek_lanes$script$ AS lane_peeks \gset

-- 0. A queue with no lanes claims nothing.
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('claim_roundtrip_nothing', 10);

-- 1. Round trip at S = 4 (T2): 16 keyless single-job transactions, claim and complete all.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('claim_roundtrip_t2', 4);
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L)', 'roundtrip', 'claim_roundtrip_t2')
  FROM generate_series(1, 16) \gexec
\set dq claim_roundtrip_t2
\set dbatch 10
:drain
SELECT enqueue_shard, count(*) AS completed
  FROM awa._terminal_attempts WHERE queue = 'claim_roundtrip_t2' AND state = 'completed'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;
-- The shard is load-bearing in the terminal key: one (slot, queue, priority, lane_seq) on several shards.
SELECT max(n) AS max_shards_per_lane_identity, max(n) >= 2 AS shard_is_load_bearing
  FROM (SELECT count(*) AS n FROM awa._terminal_attempts WHERE queue = 'claim_roundtrip_t2'
         GROUP BY ready_slot, queue, priority, lane_seq) s;
SELECT count(*) AS done_rows, count(DISTINCT job_id) AS distinct_jobs,
       bool_and(d.attempt = 1 AND d.run_lease = 1) AS first_attempt
  FROM awa._terminal_attempts d WHERE queue = 'claim_roundtrip_t2';
-- Every lane: its claim cursor and its next enqueue value.
\set lq claim_roundtrip_t2
:lane_peeks
SELECT h.priority, h.enqueue_shard, c.claim_seq,
       (:'peeks'::jsonb ->> (h.priority || '/' || h.enqueue_shard))::bigint AS next_enqueue
  FROM awa.queue_enqueue_heads h JOIN awa.lane_cursors c USING (queue, priority, enqueue_shard)
 WHERE h.queue = 'claim_roundtrip_t2' ORDER BY h.priority, h.enqueue_shard;
SELECT count(*) AS claimable_after FROM awa.claim_ready_runtime('claim_roundtrip_t2', 10);

-- 2. No starvation at S = 4 (T3): 16 jobs on each shard via keys shard-fixture-0..3.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('claim_roundtrip_t3', 4);
SELECT array_agg(convert_to('shard-fixture-' || (i % 4), 'UTF8') ORDER BY i) AS keys
  FROM generate_series(0, 63) i \gset
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('claim_roundtrip_t3', array_fill('fair'::text, ARRAY[64]), p_ordering_keys => :'keys'::bytea[]) AS ids;
SELECT enqueue_shard, count(*) AS ready FROM awa.ready_entries WHERE queue = 'claim_roundtrip_t3'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;
\set dq claim_roundtrip_t3
\set dbatch 5
:drain
SELECT enqueue_shard, count(*) AS completed FROM awa._terminal_attempts
 WHERE queue = 'claim_roundtrip_t3' AND state = 'completed' GROUP BY enqueue_shard ORDER BY enqueue_shard;
-- Every lane's claim cursor reached its next enqueue value.
\set lq claim_roundtrip_t3
:lane_peeks
SELECT h.priority, h.enqueue_shard, c.claim_seq, n.next_enqueue, c.claim_seq = n.next_enqueue AND c.claim_seq > 1 AS drained
  FROM awa.queue_enqueue_heads h JOIN awa.lane_cursors c USING (queue, priority, enqueue_shard),
       LATERAL (SELECT (:'peeks'::jsonb ->> (h.priority || '/' || h.enqueue_shard))::bigint AS next_enqueue) n
 WHERE h.queue = 'claim_roundtrip_t3' ORDER BY h.priority, h.enqueue_shard;
-- Dispatch order inside a shard is lane order (receipts were taken in lane_seq order).
SELECT enqueue_shard, array_agg(lane_seq ORDER BY receipt_id) = array_agg(lane_seq ORDER BY lane_seq) AS lane_order
  FROM awa.lease_claims WHERE queue = 'claim_roundtrip_t3' GROUP BY enqueue_shard ORDER BY enqueue_shard;

-- 3. Lowering S (T4): rows already on shards 2 and 3 still drain after S = 4 -> 2.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('claim_roundtrip_t4', 4);
SELECT array_agg(convert_to('shard-fixture-' || (i % 4), 'UTF8') ORDER BY i) AS keys
  FROM generate_series(0, 15) i \gset
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('claim_roundtrip_t4', array_fill('lower'::text, ARRAY[16]), p_ordering_keys => :'keys'::bytea[]) AS ids;
UPDATE awa.queue_meta SET enqueue_shards = 2 WHERE queue = 'claim_roundtrip_t4';
\set dq claim_roundtrip_t4
\set dbatch 3
:drain
SELECT array_agg(DISTINCT enqueue_shard) AS done_shards, count(*) AS completed
  FROM awa._terminal_attempts WHERE queue = 'claim_roundtrip_t4' AND state = 'completed';

-- 4. Aging: a priority-4 job that waited is claimed first with priority 1 but lane priority 4,
-- and completes into its own lane identity (priority 4).
SELECT id AS aged_id FROM awa.insert_job_compat('aged', 'claim_roundtrip_aging', p_priority => 4::smallint) \gset
SELECT pg_sleep(0.1);
SELECT id AS fresh_id FROM awa.insert_job_compat('fresh', 'claim_roundtrip_aging', p_priority => 2::smallint) \gset
SELECT job_id = :aged_id AS is_aged_job, kind, priority, lane_priority, attempt, run_lease, enqueue_shard, lane_seq
  FROM awa.claim_ready_runtime('claim_roundtrip_aging', 10, 0, 0.02);
SELECT job_id, run_lease FROM awa.lease_claims WHERE queue = 'claim_roundtrip_aging' AND job_id = :aged_id \gset claimed_
SELECT priority AS receipt_priority, effective_priority AS receipt_effective_priority
  FROM awa.lease_claims WHERE queue = 'claim_roundtrip_aging' AND job_id = :aged_id;
SELECT job_id = :aged_id AS completed_aged FROM awa.complete_jobs(ARRAY[:claimed_job_id]::bigint[], ARRAY[:claimed_run_lease]::bigint[],
                                                                  p_queue => 'claim_roundtrip_aging');
SELECT d.priority, d.enqueue_shard, d.lane_seq, d.state,
       EXISTS (SELECT 1 FROM awa.ready_entries r
                WHERE (r.ready_slot, r.queue, r.priority, r.enqueue_shard, r.lane_seq)
                    = (d.ready_slot, d.queue, d.priority, d.enqueue_shard, d.lane_seq)
                  AND r.job_id = d.job_id) AS matches_ready_identity
  FROM awa._terminal_attempts d WHERE d.queue = 'claim_roundtrip_aging' AND d.job_id = :aged_id;
-- Without aging, lane priority decides: the priority-2 job comes before an older priority-4 job.
SELECT id AS old_low_id FROM awa.insert_job_compat('old-low', 'claim_roundtrip_noaging', p_priority => 4::smallint) \gset
SELECT pg_sleep(0.05);
SELECT 1 FROM awa.insert_job_compat('new-high', 'claim_roundtrip_noaging', p_priority => 2::smallint);
SELECT kind, priority, lane_priority FROM awa.claim_ready_runtime('claim_roundtrip_noaging', 10, 0, 0);
SELECT kind, priority, lane_priority FROM awa.claim_ready_runtime('claim_roundtrip_noaging', 10, 0, 0);

-- 5. A paused queue claims nothing until it is resumed.
INSERT INTO awa.queue_meta (queue, paused) VALUES ('claim_roundtrip_paused', true);
SELECT 1 FROM awa.insert_job_compat('paused', 'claim_roundtrip_paused');
SELECT count(*) AS claimed_while_paused FROM awa.claim_ready_runtime('claim_roundtrip_paused', 10);
UPDATE awa.queue_meta SET paused = false WHERE queue = 'claim_roundtrip_paused';
SELECT count(*) AS claimed_after_resume FROM awa.claim_ready_runtime('claim_roundtrip_paused', 10);

-- Leave no open attempt behind: complete the open receipts of each queue, one queue a turn.
\set completed_leftovers 0
SELECT string_agg(format($turn$SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(run_lease), '{}') AS leases
  FROM awa._open_receipts WHERE queue = %1$L \gset \\
SELECT :completed_leftovers + count(*) AS completed_leftovers
  FROM awa.complete_jobs(:'ids'::bigint[], :'leases'::bigint[], p_queue => %1$L) \gset \\ $turn$, q), ' ') AS close_open
  FROM unnest(ARRAY['claim_roundtrip_nothing', 'claim_roundtrip_t2', 'claim_roundtrip_t3', 'claim_roundtrip_t4',
                    'claim_roundtrip_aging', 'claim_roundtrip_noaging', 'claim_roundtrip_paused']) q \gset
:close_open
SELECT :completed_leftovers AS completed_leftovers;

-- Drop the queues.
SELECT awa.drop_queue('claim_roundtrip_t2', p_force => true);
SELECT awa.drop_queue('claim_roundtrip_t3', p_force => true);
SELECT awa.drop_queue('claim_roundtrip_t4', p_force => true);
SELECT awa.drop_queue('claim_roundtrip_aging', p_force => true);
SELECT awa.drop_queue('claim_roundtrip_noaging', p_force => true);
SELECT awa.drop_queue('claim_roundtrip_paused', p_force => true);
