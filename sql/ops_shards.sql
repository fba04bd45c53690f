-- ops_shards: changing a queue's shard count live (reference test T4). Lowering never
-- strands a job: shards >= the new width keep draining; promotion, retries and moves
-- only write shards < the new width; awa.shard_lag shows the draining shards.
\set VERBOSITY terse
CREATE TEMP TABLE ops_shards_saved AS SELECT receipts FROM awa.plane_settings;
UPDATE awa.plane_settings SET receipts = true;

-- 1. S = 4, four jobs on each shard through the keys shard-fixture-0..3.
SELECT awa.set_enqueue_shards('ops_shards', 4) AS previous_width;
SELECT cardinality(awa.insert_jobs('ops_shards', array_fill('ops'::text, ARRAY[16]),
           p_ordering_keys => (SELECT array_agg(convert_to('shard-fixture-' || (i % 4), 'UTF8') ORDER BY i)
                                 FROM generate_series(0, 15) i))) AS enqueued;
-- A scheduled keyless job and a keyed one on shard 3, both due: promoted after lowering.
SELECT count(*) FROM awa.insert_job_compat('ops', 'ops_shards', '{"n": "due-keyless"}', p_state => 'scheduled',
                                           p_run_at => now() - interval '1 second');
SELECT count(*) FROM awa.insert_job_compat('ops', 'ops_shards', '{"n": "due-key3"}', p_state => 'scheduled',
                                           p_run_at => now() - interval '1 second',
                                           p_ordering_key => convert_to('shard-fixture-3', 'UTF8'));
SELECT enqueue_shard, count(*) AS waiting FROM awa.ready_entries WHERE queue = 'ops_shards'
 GROUP BY enqueue_shard ORDER BY enqueue_shard;

-- 2. Lower to 2. Shards 2 and 3 are draining; nothing moved.
SELECT awa.set_enqueue_shards('ops_shards', 2) AS previous_width;
SELECT awa.queue_enqueue_shards('ops_shards') AS width_now;
SELECT enqueue_shard, next_seq, claim_seq, lag, waiting, enqueue_shards, draining
  FROM awa.shard_lag WHERE queue = 'ops_shards' ORDER BY enqueue_shard;

-- 3. New keyless jobs (one transaction each) land only on shards 0 and 1; the keyed
-- job of shard-fixture-3 goes to hash mod 2; promotion writes below the new width.
DO $$
BEGIN
    FOR i IN 1..8 LOOP
        PERFORM awa.insert_job_compat('ops', 'ops_shards', jsonb_build_object('n', 'new-' || i));
        COMMIT;
    END LOOP;
END
$$;
SELECT count(*) AS new_jobs, array_agg(DISTINCT enqueue_shard ORDER BY enqueue_shard) <@ ARRAY[0, 1]::smallint[] AS only_0_1,
       count(DISTINCT enqueue_shard) AS shards_used
  FROM awa.ready_entries WHERE queue = 'ops_shards' AND args->>'n' LIKE 'new-%';
SELECT enqueue_shard = awa.shard_for_ordering_key('shard-fixture-3', 2) AS key_rehashed, enqueue_shard
  FROM awa.insert_job_compat('ops', 'ops_shards', '{"n": "new-key3"}', p_ordering_key => convert_to('shard-fixture-3', 'UTF8'));
SELECT awa.promote_due(100) >= 2 AS promoted;
SELECT args->>'n' AS n, enqueue_shard < 2 AS below_width,
       CASE WHEN ordering_key IS NOT NULL THEN enqueue_shard END AS key_shard
  FROM awa.ready_entries WHERE queue = 'ops_shards' AND args->>'n' LIKE 'due-%' ORDER BY 1;

-- 4. Drain with plain claim + complete calls: every job completes, including the
-- sixteen fixture jobs on all four shards.
DO $$
DECLARE
    v_ids bigint[];
    v_leases bigint[];
BEGIN
    FOR i IN 1..200 LOOP
        SELECT array_agg(job_id), array_agg(run_lease) INTO v_ids, v_leases
          FROM awa.claim_ready_runtime('ops_shards', 5);
        EXIT WHEN v_ids IS NULL;
        PERFORM awa.complete_jobs(v_ids, v_leases);
    END LOOP;
END
$$;
SELECT * FROM awa.queue_counts_exact('ops_shards');
SELECT count(*) AS fixture_completed, array_agg(DISTINCT enqueue_shard ORDER BY enqueue_shard) AS shards
  FROM awa.jobs WHERE queue = 'ops_shards' AND state = 'completed' AND ordering_key IS NOT NULL AND args = '{}';
SELECT enqueue_shard, lag, waiting, draining FROM awa.shard_lag WHERE queue = 'ops_shards' ORDER BY enqueue_shard;

-- 5. Raising again: the key of shard 3 returns to shard 3 in the next transaction.
SELECT awa.set_enqueue_shards('ops_shards', 4) AS previous_width;
SELECT enqueue_shard FROM awa.insert_job_compat('ops', 'ops_shards', '{"n": "raised-key3"}',
                                                p_ordering_key => convert_to('shard-fixture-3', 'UTF8'));
SELECT enqueue_shard, draining FROM awa.shard_lag WHERE queue = 'ops_shards' ORDER BY enqueue_shard;

-- 6. A plain UPSERT of queue_meta (the ADR's procedure) is the same lever.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('ops_shards', 1)
ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards;
SELECT enqueue_shard FROM awa.insert_job_compat('ops', 'ops_shards', '{"n": "s1-key3"}',
                                                p_ordering_key => convert_to('shard-fixture-3', 'UTF8'));
SELECT count(*) AS draining_lanes FROM awa.shard_lag WHERE queue = 'ops_shards' AND draining;

UPDATE awa.plane_settings SET receipts = (SELECT receipts FROM ops_shards_saved);
