-- enqueue_routing: keyed jobs go to hash mod S, keyless jobs through the rotor (one pick
-- per (queue, priority) per transaction), S = 1 is a single lane, width changes apply to
-- the next transaction. It calls each queue's functions alone in their statements so that it
-- runs through a Citus coordinator too.
\set VERBOSITY terse

-- 1. S = 4: 16 ordering keys x 3 jobs. Reference shards (reference notes §5):
-- customer-1..8 -> 3,0,1,2,3,0,1,2; order-100/101/200/201 -> 1,2,2,3; account-a..d -> 0,1,2,3.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_keyed', 4);
CREATE TEMP TABLE routing_keys (key text, reference_shard int);
INSERT INTO routing_keys VALUES
    ('customer-1', 3), ('customer-2', 0), ('customer-3', 1), ('customer-4', 2),
    ('customer-5', 3), ('customer-6', 0), ('customer-7', 1), ('customer-8', 2),
    ('order-100', 1), ('order-101', 2), ('order-200', 2), ('order-201', 3),
    ('account-a', 0), ('account-b', 1), ('account-c', 2), ('account-d', 3);
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, %L, p_ordering_key => convert_to(%L, %L))',
              'route', 'enqueue_routing_keyed', jsonb_build_object('rep', rep), k.key, 'UTF8')
  FROM routing_keys k, generate_series(1, 3) rep ORDER BY k.key COLLATE "C", rep \gexec
SELECT count(*) AS enqueued FROM awa.ready_entries WHERE queue = 'enqueue_routing_keyed';

-- Per key: every job on the key's shard, three jobs, matching the reference and the SQL function.
SELECT k.key, k.reference_shard, count(r.job_id) AS jobs,
       array_agg(DISTINCT r.enqueue_shard) AS shards,
       bool_and(r.enqueue_shard = awa.shard_for_ordering_key(k.key, 4)) AS matches_function,
       bool_and(r.ordering_key = convert_to(k.key, 'UTF8')) AS key_kept
  FROM routing_keys k
  LEFT JOIN awa.ready_entries r ON r.queue = 'enqueue_routing_keyed' AND r.ordering_key = convert_to(k.key, 'UTF8')
 GROUP BY k.key, k.reference_shard ORDER BY k.key COLLATE "C";
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE r.enqueue_shard = awa.shard_for_ordering_key(r.ordering_key, 4)) AS on_key_shard,
       array_agg(DISTINCT r.enqueue_shard ORDER BY r.enqueue_shard) AS shards_hit
  FROM awa.ready_entries r WHERE r.queue = 'enqueue_routing_keyed';
-- Each shard's lane is dense: lane_seq 1..n, in enqueue (job id) order.
SELECT enqueue_shard, count(*) AS jobs, min(lane_seq) AS first, max(lane_seq) AS last,
       array_agg(lane_seq ORDER BY job_id) = array_agg(lane_seq ORDER BY lane_seq) AS fifo
  FROM awa.ready_entries WHERE queue = 'enqueue_routing_keyed'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;

-- 2. S = 4, 16 keyless single-job transactions (each statement commits on its own): 4 per shard.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_keyless', 4);
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L)', 'route', 'enqueue_routing_keyless')
  FROM generate_series(1, 16) \gexec
SELECT enqueue_shard, count(*) AS jobs, array_agg(lane_seq ORDER BY lane_seq) AS lane_seqs
  FROM awa.ready_entries WHERE queue = 'enqueue_routing_keyless'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;

-- 3. S = 1 (no queue_meta row, then an explicit row): every job on shard 0 whatever its key.
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, p_ordering_key => convert_to(%L, %L))',
              'route', 'enqueue_routing_one', k.key, 'UTF8')
  FROM routing_keys k ORDER BY k.key COLLATE "C" \gexec
SELECT count(*) AS enqueued FROM awa.ready_entries WHERE queue = 'enqueue_routing_one';
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_one', 1);
SELECT array_agg(convert_to(key, 'UTF8')) AS routing_keys FROM routing_keys \gset
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('enqueue_routing_one', array_fill('route'::text, ARRAY[16]),
                       p_ordering_keys => :'routing_keys'::bytea[]) AS ids;
SELECT FROM awa.insert_job_compat('route', 'enqueue_routing_one');
SELECT count(*) AS jobs, array_agg(DISTINCT enqueue_shard) AS shards, max(lane_seq) AS last_lane_seq
  FROM awa.ready_entries WHERE queue = 'enqueue_routing_one';
SELECT awa.shard_for_enqueue('enqueue_routing_one', 2::smallint, 'account-d') AS keyed_s1 \gset
SELECT awa.shard_for_enqueue('enqueue_routing_one', 2::smallint) AS keyless_s1 \gset
SELECT awa.shard_for_enqueue('enqueue_routing_nowhere', 2::smallint, 'account-d') AS no_meta_row \gset
SELECT :keyed_s1 AS keyed_s1, :keyless_s1 AS keyless_s1, :no_meta_row AS no_meta_row;

-- 4. Keyless rows of one transaction stick to one shard per (queue, priority), across
-- insert_job_compat, insert_jobs and shard_for_enqueue.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_sticky', 8);
BEGIN;
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L)', 'sticky', 'enqueue_routing_sticky')
  FROM generate_series(1, 5) \gexec
SELECT count(*) AS p2_jobs FROM awa.ready_entries WHERE queue = 'enqueue_routing_sticky' AND priority = 2;
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, p_priority => 3::smallint)', 'sticky', 'enqueue_routing_sticky')
  FROM generate_series(1, 3) \gexec
SELECT count(*) AS p3_jobs FROM awa.ready_entries WHERE queue = 'enqueue_routing_sticky' AND priority = 3;
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('enqueue_routing_sticky', array_fill('sticky'::text, ARRAY[6]),
                       p_priorities => '{2,3,2,3,2,3}') AS ids;
SELECT priority, count(*) AS jobs, count(DISTINCT enqueue_shard) AS shards,
       bool_and(enqueue_shard = awa.shard_for_enqueue('enqueue_routing_sticky', priority)) AS same_as_shard_for_enqueue,
       array_agg(lane_seq ORDER BY job_id) AS lane_seqs
  FROM awa.ready_entries WHERE queue = 'enqueue_routing_sticky'
 GROUP BY priority ORDER BY priority;
COMMIT;
-- The next transactions pick again: 8 one-job transactions at S = 8 cover all 8 shards.
SELECT format('SELECT FROM awa.insert_job_compat(%L, %L, p_priority => 4::smallint)', 'sticky', 'enqueue_routing_sticky')
  FROM generate_series(1, 8) \gexec
SELECT count(DISTINCT enqueue_shard) AS shards, count(*) AS jobs
  FROM awa.ready_entries WHERE queue = 'enqueue_routing_sticky' AND priority = 4;

-- 5. Width changes: an UPSERT of queue_meta is used by the next transaction, and by the
-- changing transaction itself after the change. account-42 -> 0 (S=1), 7 (S=8), 3 (S=4).
SELECT enqueue_shard AS s_default FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42');
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_width', 8)
    ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
SELECT enqueue_shard AS s_after_upsert_8 FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42');
BEGIN;
SELECT awa.queue_enqueue_shards('enqueue_routing_width') AS width_before;
SELECT enqueue_shard AS s8 FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42');
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_routing_width', 4)
    ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
SELECT awa.queue_enqueue_shards('enqueue_routing_width') AS width_after;
SELECT enqueue_shard AS s4_same_xact FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42');
ROLLBACK;
SELECT awa.queue_enqueue_shards('enqueue_routing_width') AS width_after_rollback \gset
SELECT enqueue_shard AS s8_again FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42') \gset
SELECT :width_after_rollback AS width_after_rollback, :s8_again AS s8_again;
DELETE FROM awa.queue_meta WHERE queue = 'enqueue_routing_width';
SELECT enqueue_shard AS s_after_delete FROM awa.insert_job_compat('width', 'enqueue_routing_width', p_ordering_key => 'account-42');
SELECT enqueue_shard, count(*) FROM awa.ready_entries WHERE queue = 'enqueue_routing_width'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;

SELECT awa.drop_queue('enqueue_routing_keyed', p_force => true) AS dropped;
SELECT awa.drop_queue('enqueue_routing_keyless', p_force => true) AS dropped;
SELECT awa.drop_queue('enqueue_routing_one', p_force => true) AS dropped;
SELECT awa.drop_queue('enqueue_routing_sticky', p_force => true) AS dropped;
SELECT awa.drop_queue('enqueue_routing_width', p_force => true) AS dropped;
