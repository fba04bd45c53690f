-- claim_batch_cost: a claim and a completion cost O(batch), not O(batch^2). Both statements
-- join per-job rows that the planner sees as one-row CTEs; a join of two of them became a
-- nested loop comparing every row with every other (a claim of 1 000 jobs: 1 000 000
-- comparisons, five times slower per job than a claim of 100). Claims and completions of
-- 10 000 jobs, in custom and generic plans, must each take well under a second.
\set VERBOSITY terse

SELECT awa.create_queue('cost_q');
SELECT cardinality(awa.insert_jobs('cost_q', array_fill('k'::text, ARRAY[60000]))) AS enqueued;
CREATE TEMP TABLE timings (step text, ms double precision);

-- Six rounds (the sixth runs a generic plan): claim 10 000, then complete them.
DO $$
DECLARE
    t0 timestamptz;
    ids bigint[];
    leases bigint[];
    n bigint;
BEGIN
    FOR round IN 1..6 LOOP
        t0 := clock_timestamp();
        SELECT array_agg(job_id), array_agg(run_lease) INTO ids, leases
          FROM awa.claim_ready_runtime('cost_q', 10000);
        INSERT INTO timings VALUES ('claim', 1000 * extract(epoch FROM clock_timestamp() - t0));
        IF cardinality(ids) <> 10000 THEN
            RAISE EXCEPTION 'round %: claimed % jobs', round, cardinality(ids);
        END IF;
        t0 := clock_timestamp();
        SELECT count(*) INTO n FROM awa.complete_jobs(ids, leases);
        INSERT INTO timings VALUES ('complete', 1000 * extract(epoch FROM clock_timestamp() - t0));
        IF n <> 10000 THEN
            RAISE EXCEPTION 'round %: completed % jobs', round, n;
        END IF;
    END LOOP;
END $$;

-- Every job completed once; each call of 10 000 far below the quadratic cost (seconds).
SELECT state, count(*) FROM awa.jobs WHERE queue = 'cost_q' GROUP BY 1 ORDER BY 1;
SELECT step, count(*) AS calls, max(ms) < 1500 AS under_1_5_s FROM timings GROUP BY 1 ORDER BY 1;

-- The queue goes, so that later tests see no lanes or claim marks of it.
SELECT awa.drop_queue('cost_q', true) AS removed;
