-- rate_limit: a queue's rate limit (docs/api.md, "Flow control"), a token bucket per
-- (database, queue) in shared memory. Everything is asserted by counts, never by time: a
-- rate of one job per 11.6 days (1e-6 per second) never refills during the test, so a claim
-- gets exactly what the bucket holds; a rate of 1e9 per second refills the bucket between
-- any two claims. Without the preload (expected/rate_limit_1.out) there are no buckets:
-- set_rate_limit raises 55000, and so does a claim of a queue that has a limit anyway (a
-- dump restored on a server without the preload), until the limit is removed. It calls each
-- queue's functions alone in their statements so that it runs through a Citus coordinator too.
\set ECHO none
\i sql/sqlstate_of.psql
\set ECHO all
\set VERBOSITY terse

SELECT awa.create_queue('rl_rate', 4);
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_rate', array_fill('k'::text, ARRAY[40]), p_spread_keyless => true) AS ids;

-- 1. Rate limit, burst 3 at a rate that does not refill: one claim of 10 gets exactly 3
--    (from one lane holding 10), every later claim none, whatever its lane.
SELECT awa.set_rate_limit('rl_rate', 1e-6, 3);
SELECT queue, rate_per_second, rate_burst, concurrency_limit FROM awa.queues WHERE queue = 'rl_rate';
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 1);
-- wait_for_jobs reports no work a claim could take while the bucket is empty (the queue
-- holds 37 waiting jobs); a timeout of 0 only looks.
SELECT awa.wait_for_jobs('rl_rate', 0) AS work_without_tokens \gset
SELECT awa.queue_depth('rl_rate') AS depth \gset
SELECT :'work_without_tokens'::boolean AS work_without_tokens, :depth > 0 AS jobs_waiting;

-- 2. A high rate refills between claims: each claim of 10 gets the burst, 2, no more.
SELECT awa.set_rate_limit('rl_rate', 1e9, 2);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT awa.wait_for_jobs('rl_rate', 0) AS work_with_tokens;
-- A claim of fewer than the bucket holds takes only what it asks for.
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 1);

-- 3. Tokens of a claim rolled back are not given back (the limit is an upper bound); tokens
--    a claim took and did not hand out (its lane held fewer jobs) are. A changed limit keeps
--    its bucket's tokens (at most the new burst): here the 1 token step 2 left.
SELECT awa.set_rate_limit('rl_rate', 1e-6, 2);
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 10);
ROLLBACK;
SELECT count(*) AS claimed_after_rollback FROM awa.claim_ready_runtime('rl_rate', 10);
SELECT awa.create_queue('rl_refund');
SELECT awa.set_rate_limit('rl_refund', 1e-6, 5);
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_refund', array_fill('k'::text, ARRAY[2])) AS ids;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_refund', 10);
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_refund', array_fill('k'::text, ARRAY[5])) AS ids;
SELECT count(*) AS claimed_with_the_rest FROM awa.claim_ready_runtime('rl_refund', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_refund', 10);

-- 4. Removing the limit: claims get whole batches again.
SELECT awa.set_rate_limit('rl_rate', NULL);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_rate', 4);
SELECT queue, rate_per_second, rate_burst FROM awa.queues WHERE queue = 'rl_rate';

-- 5. Both limits at once: the tighter one wins, and a claim capped by the concurrency
--    limit takes only the tokens it hands out.
SELECT awa.create_queue('rl_both');
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_both', array_fill('k'::text, ARRAY[20])) AS ids;
SELECT awa.set_concurrency_limit('rl_both', 2);
SELECT awa.set_rate_limit('rl_both', 1e-6, 5);
SELECT count(*) AS claimed_by_concurrency FROM awa.claim_ready_runtime('rl_both', 10);
SELECT awa.set_concurrency_limit('rl_both', 100);
SELECT count(*) AS claimed_by_rate FROM awa.claim_ready_runtime('rl_both', 10);
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_both', 10);

-- 6. A limit that a server without the preload finds in queue_meta (a restored dump): there
--    the claim raises 55000 rather than claim without it; removing it is always allowed.
SELECT awa.create_queue('rl_dump');
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_dump', array_fill('k'::text, ARRAY[3])) AS ids;
UPDATE awa.queue_meta SET rate_per_second = 1e-6, rate_burst = 1 WHERE queue = 'rl_dump';
SELECT count(*) AS claim_with_limit FROM awa.claim_ready_runtime('rl_dump', 10);
SELECT :'SQLSTATE' AS sqlstate;  -- 55000 without the preload
SELECT awa.set_rate_limit('rl_dump', NULL);
SELECT count(*) AS claimed_without_limit FROM awa.claim_ready_runtime('rl_dump', 10);

-- 7. Per-key rate limit (p_per_key): a bucket per concurrency key, burst 2 at a rate that
--    does not refill. A claim takes jobs in lane order, one token per keyed job, and stops
--    before the first job whose key has none; keyless jobs take none; the queue-wide limit
--    is independent (none here). Without the preload set_rate_limit raises 55000 and the
--    claims below are not limited.
SELECT awa.create_queue('rl_key');
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_key', ARRAY['k'],
    p_concurrency_keys => ARRAY['a', 'a', NULL, 'b', 'a', 'b', 'b', 'a']) AS ids;
SELECT awa.set_rate_limit('rl_key', 1e-6, 2, p_per_key => true) AS set_per_key;
SELECT :'SQLSTATE' AS sqlstate;  -- 55000 without the preload
SELECT queue, rate_per_second, rate_burst, key_rate_per_second, key_rate_burst FROM awa.queues WHERE queue = 'rl_key';
-- a, a, -, b, then the third a (lane_seq 5) has no token: the claim stops before it.
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(lane_seq), '{}') AS lane_seqs
  FROM awa.claim_ready_runtime('rl_key', 10) \gset
SELECT c.lane_seq, j.concurrency_key
  FROM unnest(:'ids'::bigint[], :'lane_seqs'::bigint[]) c(job_id, lane_seq)
  JOIN awa.jobs j ON j.queue = 'rl_key' AND j.id = c.job_id ORDER BY c.lane_seq;
-- The lane begins with a's job now: nothing more (lane FIFO holds; b's jobs wait behind it).
-- After a claim held back by keys, this backend's wait_for_jobs polls (every 100 ms) instead
-- of reporting the waiting jobs: a timeout of 0 reports no work.
SELECT count(*) AS claimed_behind_a FROM awa.claim_ready_runtime('rl_key', 10);
SELECT awa.wait_for_jobs('rl_key', 0) AS work_reported;
-- Another lane is not held back: b's job at priority 3 goes (b has one token left), the
-- next b's does not.
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_key', ARRAY['k', 'k'], p_priorities => ARRAY[3, 3],
    p_concurrency_keys => ARRAY['b', 'b']) AS ids;
SELECT coalesce(array_agg(job_id), '{}') AS ids, coalesce(array_agg(lane_seq), '{}') AS lane_seqs,
       coalesce(array_agg(priority), '{}') AS priorities
  FROM awa.claim_ready_runtime('rl_key', 10) \gset
SELECT c.priority, j.concurrency_key
  FROM unnest(:'ids'::bigint[], :'lane_seqs'::bigint[], :'priorities'::smallint[]) c(job_id, lane_seq, priority)
  JOIN awa.jobs j ON j.queue = 'rl_key' AND j.id = c.job_id ORDER BY c.lane_seq;
-- A claim rolled back keeps its tokens spent (an upper bound): a new key c, burst 2.
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_key', ARRAY['k', 'k', 'k'], p_priorities => ARRAY[1, 1, 1],
    p_concurrency_keys => ARRAY['c', 'c', 'c']) AS ids;
BEGIN;
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_key', 10);
ROLLBACK;
SELECT count(*) AS claimed_after_rollback FROM awa.claim_ready_runtime('rl_key', 10);
-- The queue-wide limit and the per-key one are independent: removing the queue's (there is
-- none) leaves the keys' in place; removing the keys' lets every job go.
SELECT awa.set_rate_limit('rl_key', NULL);
SELECT count(*) AS claimed_still_limited FROM awa.claim_ready_runtime('rl_key', 10);
SELECT awa.set_rate_limit('rl_key', NULL, p_per_key => true);
SELECT queue, key_rate_per_second, key_rate_burst FROM awa.queues WHERE queue = 'rl_key';
SELECT count(*) AS claimed_without_limit FROM awa.claim_ready_runtime('rl_key', 10);
-- Bad input names the argument; the row's check holds the pair together (a Citus cluster
-- names the table's shard in the message: read as the table).
SELECT a.call, regexp_replace(pg_temp.sqlstate_of(a.call), 'relation "queue_meta_[0-9]+"', 'relation "queue_meta"') AS result
  FROM (VALUES
    ($$SELECT awa.set_rate_limit('rl_key', 0, 1, true)$$),
    ($$SELECT awa.set_rate_limit('rl_key', 1, 0, true)$$),
    ($$SELECT awa.set_rate_limit('rl_key', 1, NULL, true)$$),
    ($$UPDATE awa.queue_meta SET key_rate_per_second = 1 WHERE queue = 'rl_key'$$)) a(call);
-- A dropped queue's key buckets go with it: created again, its key a has a full bucket.
SELECT awa.drop_queue('rl_key', true) AS dropped \gset
SELECT :dropped > 0 AS dropped;
SELECT awa.create_queue('rl_key');
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_key', ARRAY['k'], p_concurrency_keys => ARRAY['a', 'a', 'a']) AS ids;
SELECT awa.set_rate_limit('rl_key', 1e-6, 2, p_per_key => true) AS set_per_key;
SELECT :'SQLSTATE' AS sqlstate;  -- 55000 without the preload
SELECT count(*) AS claimed_after_recreate FROM awa.claim_ready_runtime('rl_key', 10);
-- A per-key limit that a server without the preload finds in queue_meta (a restored dump):
-- the claim raises 55000 there; here it runs, and a's empty bucket holds its job back.
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_key', ARRAY['k'], p_concurrency_keys => ARRAY['a']) AS ids;
UPDATE awa.queue_meta SET key_rate_per_second = 1e-6, key_rate_burst = 1 WHERE queue = 'rl_key';
SELECT count(*) AS claim_with_key_limit FROM awa.claim_ready_runtime('rl_key', 10);
SELECT :'SQLSTATE' AS sqlstate;  -- 55000 without the preload
SELECT count(*) AS claimed FROM awa.claim_ready_runtime('rl_key', 10);
-- Nothing else resets a's empty bucket: not a drop of the queue rolled back to a savepoint,
-- not a transaction that drops nine other queues (queues that the Citus suite's cluster places
-- on rl_key's worker: a transaction that drops queues runs on one node).
BEGIN;
SAVEPOINT s;
SELECT awa.drop_queue('rl_key', true) AS dropped \gset
SELECT :dropped > 0 AS dropped_in_savepoint;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT awa.create_queue('rl_other_3') AS created \gset
SELECT awa.create_queue('rl_other_9') AS created \gset
SELECT awa.create_queue('rl_other_11') AS created \gset
SELECT awa.create_queue('rl_other_12') AS created \gset
SELECT awa.create_queue('rl_other_13') AS created \gset
SELECT awa.create_queue('rl_other_14') AS created \gset
SELECT awa.create_queue('rl_other_15') AS created \gset
SELECT awa.create_queue('rl_other_16') AS created \gset
SELECT awa.create_queue('rl_other_19') AS created \gset
SELECT count(*) AS created FROM awa.queues
 WHERE queue IN ('rl_other_3', 'rl_other_9', 'rl_other_11', 'rl_other_12', 'rl_other_13', 'rl_other_14', 'rl_other_15', 'rl_other_16', 'rl_other_19');
BEGIN;
SELECT awa.drop_queue('rl_other_3') AS dropped \gset
SELECT awa.drop_queue('rl_other_9') AS dropped \gset
SELECT awa.drop_queue('rl_other_11') AS dropped \gset
SELECT awa.drop_queue('rl_other_12') AS dropped \gset
SELECT awa.drop_queue('rl_other_13') AS dropped \gset
SELECT awa.drop_queue('rl_other_14') AS dropped \gset
SELECT awa.drop_queue('rl_other_15') AS dropped \gset
SELECT awa.drop_queue('rl_other_16') AS dropped \gset
SELECT awa.drop_queue('rl_other_19') AS dropped \gset
COMMIT;
SELECT count(*) AS left_after_drops FROM awa.queues
 WHERE queue IN ('rl_other_3', 'rl_other_9', 'rl_other_11', 'rl_other_12', 'rl_other_13', 'rl_other_14', 'rl_other_15', 'rl_other_16', 'rl_other_19');
SELECT count(*) AS claimed_still_held FROM awa.claim_ready_runtime('rl_key', 10);

-- 8. More lanes held back than one queue's priority had before (64): a queue of 64 shards
--    whose every priority-1 lane begins with a job of key h, out of tokens; a keyless job at
--    priority 3 is still claimed (the walk passes all 64 lanes over and goes on).
SELECT awa.create_queue('rl_wide', 64);
-- One ordering key for each of the 64 shards (evaluated where the call runs: on a Citus
-- cluster the queue's worker).
CREATE FUNCTION rl_wide_keys(p_queue text) RETURNS bytea[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN ARRAY(SELECT convert_to('w' || k.g, 'UTF8') FROM generate_series(0, 63) s,
                   LATERAL (SELECT g FROM generate_series(1, 100000) g
                             WHERE awa.shard_for_enqueue(p_queue, 1, convert_to('w' || g, 'UTF8')) = s.s LIMIT 1) k
                  ORDER BY s.s);
END $$;
SELECT awa.set_rate_limit('rl_wide', 1e-6, 1, p_per_key => true) AS set_per_key;
SELECT :'SQLSTATE' AS sqlstate;  -- 55000 without the preload
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('rl_wide', array_fill('k'::text, ARRAY[64]), p_ordering_keys => rl_wide_keys('rl_wide'),
                       p_concurrency_keys => array_fill('h'::text, ARRAY[64]), p_priorities => array_fill(1, ARRAY[64])) AS ids;
SELECT count(*) AS claimed_h FROM awa.claim_ready_runtime('rl_wide', 10);
SELECT coalesce(cardinality(ids), 0) AS enqueued
  FROM awa.insert_jobs('rl_wide', array_fill('k'::text, ARRAY[64]), p_ordering_keys => rl_wide_keys('rl_wide'),
                       p_concurrency_keys => array_fill('h'::text, ARRAY[64]), p_priorities => array_fill(1, ARRAY[64])) AS ids;
SELECT coalesce(cardinality(ids), 0) AS enqueued FROM awa.insert_jobs('rl_wide', ARRAY['free'], p_priorities => ARRAY[3]) AS ids;
SELECT kind FROM awa.claim_ready_runtime('rl_wide', 10);

SELECT awa.drop_queue('rl_rate', true) AS dropped;
SELECT awa.drop_queue('rl_refund', true) AS dropped;
SELECT awa.drop_queue('rl_both', true) AS dropped;
SELECT awa.drop_queue('rl_dump', true) AS dropped;
SELECT awa.drop_queue('rl_key', true) AS dropped;
SELECT awa.drop_queue('rl_wide', true) AS dropped;
DROP FUNCTION rl_wide_keys(text);
