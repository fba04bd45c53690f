-- claim_batch_cost: a claim and a completion cost O(batch), not O(batch^2). Both statements
-- join per-job rows that the planner sees as one-row CTEs; a join of two of them became a
-- nested loop comparing every row with every other (a claim of 1 000 jobs: 1 000 000
-- comparisons, five times slower per job than a claim of 100). The cost is counted, not
-- timed: the buffers each call uses (shared, and temporary files), read from EXPLAIN
-- (ANALYZE, BUFFERS) of the call, which counts its statements' buffers too. With a small
-- work_mem every per-job CTE larger than a few hundred rows lives in a temporary file, so a
-- nested loop that rescans one for each row of another reads that file once per row: a
-- quadratic join shows up as O(batch^2) temporary blocks. Claims and completions of 10 000
-- jobs, in custom and generic plans, must use a bounded number of buffers per job, and about
-- ten times what a call of 1 000 uses.
\set VERBOSITY terse

SELECT awa.create_queue('cost_q');
SELECT cardinality(awa.insert_jobs('cost_q', array_fill('k'::text, ARRAY[66000]))) AS enqueued;
CREATE TEMP TABLE buffers (round int, step text, batch int, shared bigint, temp bigint);
CREATE TEMP TABLE claimed (job_id bigint, run_lease bigint);
SET work_mem = '64kB';

-- Six rounds (the sixth runs a generic plan): claim 1 000 and complete them, then claim
-- 10 000 and complete them; each call under EXPLAIN (ANALYZE, BUFFERS).
DO $$
DECLARE
    p json;
    ids bigint[];
    leases bigint[];
    n int;
BEGIN
    FOR round IN 1..6 LOOP
        FOREACH n IN ARRAY ARRAY[1000, 10000] LOOP
            TRUNCATE claimed;
            EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) INSERT INTO claimed '
                           'SELECT job_id, run_lease FROM awa.claim_ready_runtime(%L, %s)', 'cost_q', n) INTO p;
            INSERT INTO buffers VALUES (round, 'claim', n,
                (p->0->'Plan'->>'Shared Hit Blocks')::bigint + (p->0->'Plan'->>'Shared Read Blocks')::bigint,
                (p->0->'Plan'->>'Temp Read Blocks')::bigint + (p->0->'Plan'->>'Temp Written Blocks')::bigint);
            SELECT array_agg(job_id), array_agg(run_lease) INTO ids, leases FROM claimed;
            IF cardinality(ids) <> n THEN
                RAISE EXCEPTION 'round %: claimed % jobs of %', round, cardinality(ids), n;
            END IF;
            EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT count(*) FROM awa.complete_jobs($1, $2)'
               INTO p USING ids, leases;
            IF (p->0->'Plan'->>'Actual Rows')::int <> 1 THEN
                RAISE EXCEPTION 'round %: unexpected plan %', round, p;
            END IF;
            INSERT INTO buffers VALUES (round, 'complete', n,
                (p->0->'Plan'->>'Shared Hit Blocks')::bigint + (p->0->'Plan'->>'Shared Read Blocks')::bigint,
                (p->0->'Plan'->>'Temp Read Blocks')::bigint + (p->0->'Plan'->>'Temp Written Blocks')::bigint);
        END LOOP;
    END LOOP;
END $$;
RESET work_mem;

-- Every job completed once (the completions above each returned their batch).
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cost_q' GROUP BY 1 ORDER BY 1;
-- At most 40 buffers per job in every call (about 1 for a claim, 27 for a completion: it
-- probes each job's ready row and receipt), and a call of 10 000 uses less than 20 times
-- what the call of 1 000 of its round used (about 10 to 15 times; a quadratic join: 100).
SELECT b.step, count(*) AS calls,
       bool_and(b.shared + b.temp <= 40 * b.batch) AS at_most_40_buffers_per_job,
       bool_and(b.shared + b.temp < 20 * (s.shared + s.temp)) AS linear_in_the_batch
  FROM buffers b JOIN buffers s ON s.round = b.round AND s.step = b.step AND s.batch = 1000
 WHERE b.batch = 10000 GROUP BY 1 ORDER BY 1;

-- The queue goes, so that later tests see no lanes or claim marks of it.
SELECT awa.drop_queue('cost_q', true) AS removed;
