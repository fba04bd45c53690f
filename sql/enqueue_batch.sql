-- enqueue_batch: insert_jobs returns ids in input order with one contiguous reservation
-- per lane; deferred states and future run_at go to deferred_jobs (keeping the key);
-- unique keys conflict with 23505; reserve_enqueue_seq peeks without consuming.
-- It calls each queue's functions alone in their statements, so that it runs through a Citus
-- coordinator too (a peek at a lane is reserve_enqueue_seq with p_count 0).
\set VERBOSITY terse


-- 1. A mixed batch at S = 4: keys spread rows over lanes of two priorities; keyless rows
-- (priority 4 only, so their rotor lane is never shared with a keyed lane) take one pick.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('enqueue_batch', 4);
-- Lanes already in use before the batch: the batch continues them.
SELECT coalesce(cardinality(ids), 0) AS pre
  FROM awa.insert_jobs('enqueue_batch', ARRAY['pre', 'pre'],
                       p_ordering_keys => ARRAY[convert_to('account-a', 'UTF8'), convert_to('account-d', 'UTF8')]) AS ids;
-- Next value of a lane (peek: p_count 0 reserves nothing).
SELECT awa.reserve_enqueue_seq('enqueue_batch', 2, 0, 0) AS next_p2_s0;
SELECT awa.reserve_enqueue_seq('enqueue_batch', 2, 3, 0) AS next_p2_s3;
CREATE TEMP TABLE batch_input AS
SELECT ord, 'k' || ord AS kind, key, prio
  FROM unnest(ARRAY['account-d', 'account-a', 'account-d', NULL, 'account-b', 'account-a', NULL, 'account-d', 'account-c', NULL],
              ARRAY[2, 2, 2, 4, 3, 2, 4, 2, 3, 4]) WITH ORDINALITY AS t(key, prio, ord);
SELECT array_agg(kind ORDER BY ord) AS kinds, array_agg(jsonb_build_object('ord', ord) ORDER BY ord) AS args,
       array_agg(prio::smallint ORDER BY ord) AS prios, array_agg(convert_to(key, 'UTF8') ORDER BY ord) AS keys
  FROM batch_input \gset
SELECT awa.insert_jobs('enqueue_batch', :'kinds'::text[], p_args => :'args'::jsonb[],
                       p_priorities => :'prios'::smallint[], p_ordering_keys => :'keys'::bytea[]) AS ids \gset
CREATE TEMP TABLE batch_ids AS SELECT :'ids'::bigint[] AS ids;
-- Ids come back in input order: position i holds the job whose kind and args are row i's.
SELECT i.ord, i.kind, i.key, i.prio, r.kind = i.kind AND (r.args ->> 'ord')::int = i.ord AS same_job,
       r.priority, CASE WHEN i.key IS NULL THEN 'rotor' ELSE r.enqueue_shard::text END AS shard
  FROM batch_ids b, unnest(b.ids) WITH ORDINALITY AS u(id, ord)
  JOIN batch_input i USING (ord)
  JOIN awa.ready_entries r ON r.queue = 'enqueue_batch' AND r.job_id = u.id
 ORDER BY i.ord;
SELECT cardinality(ids) AS returned, (SELECT count(DISTINCT id) FROM batch_ids, unnest(ids) id) AS distinct_ids FROM batch_ids;
-- One block per lane: each lane's rows of the batch are contiguous, continue the lane and keep
-- input order (FIFO inside the lane).
SELECT r.priority, CASE WHEN r.priority = 4 THEN 'rotor' ELSE r.enqueue_shard::text END AS shard,
       count(*) AS jobs, max(r.lane_seq) - min(r.lane_seq) + 1 = count(*) AS contiguous,
       array_agg(r.lane_seq ORDER BY u.ord) = array_agg(r.lane_seq ORDER BY r.lane_seq) AS input_order,
       min(r.lane_seq) = (SELECT count(*) FROM awa.ready_entries p WHERE p.queue = 'enqueue_batch' AND p.kind = 'pre'
                            AND p.priority = r.priority AND p.enqueue_shard = r.enqueue_shard) + 1 AS continues_lane
  FROM batch_ids b, unnest(b.ids) WITH ORDINALITY AS u(id, ord)
  JOIN awa.ready_entries r ON r.queue = 'enqueue_batch' AND r.job_id = u.id
 GROUP BY r.priority, r.enqueue_shard
 ORDER BY r.priority, min(u.ord);
-- Keyless rows of one (queue, priority) took one rotor pick.
SELECT r.priority, count(DISTINCT r.enqueue_shard) AS keyless_shards
  FROM batch_ids b, unnest(b.ids) id JOIN awa.ready_entries r ON r.queue = 'enqueue_batch' AND r.job_id = id
 WHERE r.ordering_key IS NULL GROUP BY r.priority ORDER BY r.priority;
-- The lane sequences moved by exactly the rows reserved (no count x nextval leftovers): a peek
-- at every lane, each in a statement of its own (a psql script made from the lanes), gathers
-- their next values into :peeks ("priority/shard": value).
\set peeks '{}'
SELECT string_agg(format('SELECT :''peeks''::jsonb || jsonb_build_object(%L, n) AS peeks '
                         'FROM awa.reserve_enqueue_seq(%L, %s, %s, 0) n \gset \\',
                         priority || '/' || enqueue_shard, queue, priority, enqueue_shard), ' ') AS peek_lanes
  FROM awa.queue_enqueue_heads WHERE queue = 'enqueue_batch' \gset
:peek_lanes
SELECT h.priority, CASE WHEN h.priority = 4 THEN 'rotor' ELSE h.enqueue_shard::text END AS shard,
       (:'peeks'::jsonb ->> (h.priority || '/' || h.enqueue_shard))::bigint - 1 = max(r.lane_seq) AS next_is_max_plus_one
  FROM awa.queue_enqueue_heads h JOIN awa.ready_entries r USING (queue, priority, enqueue_shard)
 WHERE h.queue = 'enqueue_batch' GROUP BY h.priority, h.enqueue_shard ORDER BY h.priority, h.enqueue_shard;
-- An empty batch writes nothing.
SELECT awa.insert_jobs('enqueue_batch', '{}'::text[]) AS empty_batch;

-- 2. Deferred: available + future run_at -> scheduled in deferred_jobs (not claimable);
-- scheduled and retryable -> deferred_jobs keeping the ordering key; no lane reserved.
SELECT state, enqueue_shard IS NULL AS no_shard, lane_seq IS NULL AS no_lane_seq, ordering_key
  FROM awa.insert_job_compat('later', 'enqueue_batch_deferred', p_run_at => now() + interval '1 hour',
                             p_ordering_key => 'account-a');
SELECT state, ordering_key FROM awa.insert_job_compat('later', 'enqueue_batch_deferred', p_state => 'scheduled',
                                                     p_run_at => now() + interval '1 hour', p_ordering_key => 'account-b');
SELECT state, ordering_key FROM awa.insert_job_compat('later', 'enqueue_batch_deferred', p_state => 'retryable',
                                                     p_run_at => now() + interval '1 hour', p_ordering_key => '');
SELECT coalesce(cardinality(ids), 0) AS batch
  FROM awa.insert_jobs('enqueue_batch_deferred', ARRAY['later', 'now'],
                       p_run_ats => ARRAY[now() + interval '1 hour', NULL],
                       p_ordering_keys => ARRAY['account-c'::bytea, 'account-d']) AS ids;
SELECT kind, state, convert_from(ordering_key, 'UTF8') AS ordering_key, run_at > now() AS future
  FROM awa.deferred_jobs WHERE queue = 'enqueue_batch_deferred' ORDER BY job_id;
SELECT kind, convert_from(ordering_key, 'UTF8') AS ordering_key FROM awa.ready_entries WHERE queue = 'enqueue_batch_deferred';
SELECT count(*) AS lanes FROM awa.queue_enqueue_heads WHERE queue = 'enqueue_batch_deferred';
SELECT kind FROM awa.claim_ready_runtime('enqueue_batch_deferred', 100);
SELECT count(*) AS claimable_after FROM awa.claim_ready_runtime('enqueue_batch_deferred', 100);

-- 3. Unique keys: a second live job with the key fails with 23505 and writes nothing.
SELECT state FROM awa.insert_job_compat('uniq', 'enqueue_batch_unique', p_unique_key => '\xabcd');
-- (Each failing call, then its SQLSTATE and message.)
SELECT awa.insert_job_compat('uniq', 'enqueue_batch_unique', p_unique_key => '\xabcd');
SELECT :'LAST_ERROR_SQLSTATE' || ': ' || :'LAST_ERROR_MESSAGE' AS compat_dup;
SELECT awa.insert_job_compat('uniq', 'enqueue_batch_unique', p_state => 'scheduled', p_unique_key => '\xabcd');
SELECT :'LAST_ERROR_SQLSTATE' || ': ' || :'LAST_ERROR_MESSAGE' AS deferred_dup;
SELECT awa.insert_jobs('enqueue_batch_unique', ARRAY['a', 'b'], p_unique_keys => ARRAY['\x01'::bytea, '\x01']);
SELECT :'LAST_ERROR_SQLSTATE' || ': ' || :'LAST_ERROR_MESSAGE' AS batch_dup;
SELECT awa.insert_jobs('enqueue_batch_unique', ARRAY['a', 'b'], p_unique_keys => ARRAY['\x02'::bytea, '\xabcd']);
SELECT :'LAST_ERROR_SQLSTATE' || ': ' || :'LAST_ERROR_MESSAGE' AS batch_vs_live;
-- A mask without the initial state does not claim the key (00000000: no state holds it):
-- both enqueues of the pair succeed.
SELECT state AS unclaimed_first FROM awa.insert_job_compat('uniq', 'enqueue_batch_unique', p_unique_key => '\x03',
                                                           p_unique_states => B'00000000');
SELECT state AS unclaimed_second FROM awa.insert_job_compat('uniq', 'enqueue_batch_unique', p_unique_key => '\x03',
                                                            p_unique_states => B'00000000');
SELECT (SELECT count(*) FROM awa.ready_entries WHERE queue = 'enqueue_batch_unique') AS ready_rows,
       (SELECT count(*) FROM awa.deferred_jobs WHERE queue = 'enqueue_batch_unique') AS deferred_rows,
       (SELECT count(*) FROM awa.job_unique_claims c JOIN awa.ready_entries r USING (queue, job_id)
         WHERE r.queue = 'enqueue_batch_unique') AS claims;
SELECT awa.reserve_enqueue_seq('enqueue_batch_unique', 2, 0, 0) AS next_lane_seq;

-- 4. reserve_enqueue_seq: a block [start, start + n); count <= 0 peeks and consumes nothing;
-- a peek at an unknown lane is 1 and creates nothing.
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1, 5, 0) AS unknown_lane_peek;
SELECT count(*) AS lanes_after_peek FROM awa.queue_enqueue_heads WHERE queue = 'enqueue_batch_reserve';
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1::smallint, 5::smallint, 1) AS first;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1, 5, 0) AS peek1;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1, 5, 0) AS peek2;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1::smallint, 5::smallint, -7) AS negative_peek;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1::smallint, 5::smallint, 5) AS block_start;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1, 5, 0) AS after_block;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1::smallint, 5::smallint, 1) AS next_single;
-- A rolled-back reservation leaves a gap (the sequence is not transactional) and no ready row.
BEGIN;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1::smallint, 5::smallint, 3) AS rolled_back_block;
ROLLBACK;
SELECT awa.reserve_enqueue_seq('enqueue_batch_reserve', 1, 5, 0) AS after_rollback;
SELECT queue, priority, enqueue_shard,
       (SELECT claim_seq FROM awa.lane_cursors c WHERE (c.queue, c.priority, c.enqueue_shard) = (h.queue, h.priority, h.enqueue_shard)) AS claim_seq
  FROM awa.queue_enqueue_heads h WHERE queue = 'enqueue_batch_reserve';

-- Drop the queues (the open claim of enqueue_batch_deferred with them).
SELECT awa.drop_queue('enqueue_batch', p_force => true);
SELECT awa.drop_queue('enqueue_batch_deferred', p_force => true);
SELECT awa.drop_queue('enqueue_batch_unique', p_force => true);
SELECT awa.drop_queue('enqueue_batch_reserve', p_force => true);
DELETE FROM awa.lease_claim_closures WHERE queue = 'enqueue_batch_deferred';
