-- running_bound: a claim of a queue with a concurrency limit counts the queue's running
-- attempts only when the bound the claims before it published (preloaded; an upper bound of
-- the running attempts, src/running_bound.cpp; docs/design.md §4, "Flow control") leaves it
-- less room than it asks for. `counted` says whether the claim counted: the count is the only
-- reader of awa.leases in a receipts-mode claim. running_bound_1.out (no preload) shows every
-- claim counting. What the bound leaves is checked by what the claims take: never more than
-- the limit, and a completed job's place is taken by the next claim that asks for it.
\set VERBOSITY terse
-- Scans of awa.leases' partitions and their indexes so far in this transaction.
CREATE FUNCTION pg_temp.lease_scans() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_numscans(i.inhrelid)
               + (SELECT coalesce(sum(pg_stat_get_xact_numscans(x.indexrelid)), 0) FROM pg_index x
                   WHERE x.indrelid = i.inhrelid))::bigint
      FROM pg_inherits i WHERE i.inhparent = 'awa.leases'::regclass
$$;
-- A claim of at most n jobs of queue q: the kinds claimed, and whether it counted.
CREATE FUNCTION pg_temp.claim(q text, n integer, OUT claimed text, OUT counted boolean) LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_temp.lease_scans();
BEGIN
    SELECT coalesce(string_agg(c.kind, ' ' ORDER BY c.lane_seq), '-') INTO claimed FROM awa.claim_ready_runtime(q, n) c;
    counted := pg_temp.lease_scans() > before;
END
$$;
-- Complete the running job of kind k of queue rbq.
CREATE FUNCTION pg_temp.done(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM awa.jobs j, awa.complete_jobs(ARRAY[j.id], ARRAY[j.run_lease])
     WHERE j.queue = 'rbq' AND j.kind = k AND j.state = 'running'
$$;
-- The running jobs of queue rbq.
CREATE FUNCTION pg_temp.running() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM awa.jobs WHERE queue = 'rbq' AND state = 'running'
$$;

SELECT awa.create_queue('rbq', 1);
SELECT awa.create_queue('rbn', 1);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbq', ARRAY(SELECT 'j' || g FROM generate_series(1, 30) g)));
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbn', ARRAY['n1']));
SELECT awa.set_concurrency_limit('rbq', 5);

-- 0. A queue without a limit never counts.
SELECT * FROM pg_temp.claim('rbn', 1);
-- 1. The first claim under the limit knows no bound: it counts (0 running) and publishes 2.
SELECT * FROM pg_temp.claim('rbq', 2);
-- 2. The bound (2) leaves room for 2 more: taken without a count; the bound is now 4.
SELECT * FROM pg_temp.claim('rbq', 2);
-- 3. 4 + 2 is over the limit: the claim counts (4 running) and takes the one place left.
SELECT * FROM pg_temp.claim('rbq', 2);
SELECT pg_temp.running() AS running;
-- 4. At the cap, the bound (5) leaves nothing: the claim counts and takes nothing.
SELECT * FROM pg_temp.claim('rbq', 1);
-- 5. A completion frees its place at once: the next claim counts and takes it.
SELECT pg_temp.done('j1') AS completed;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 6. Exits never lower the bound: after three completions the next claim counts (2 running)
--    and takes 2; the one after it, for 1, needs no count (bound 4, + 1).
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j2', 'j3', 'j4']) k;
SELECT * FROM pg_temp.claim('rbq', 2);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 7. A claim rolled back publishes nothing; the bound before it still holds (5: a count).
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j5', 'j6']) k;
BEGIN;
SELECT * FROM pg_temp.claim('rbq', 1);
ROLLBACK;
SELECT * FROM pg_temp.claim('rbq', 1);
-- 8. The claim after it needs no count (bound 4, + 1). Then, after three completions, a
--    transaction's first claim counts (2 running), its second takes the first's job into
--    account without a count (3, + 1), and its commit publishes both (4): the next claim
--    needs no count either.
BEGIN;
SELECT * FROM pg_temp.claim('rbq', 1);
COMMIT;
SELECT pg_temp.running() AS running;
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j7', 'j8', 'j9']) k;
BEGIN;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 9. A claim whose lane holds fewer jobs than it was granted gives the rest back: queue rbg
--    (limit 5, 2 jobs): a claim of 5 takes 2 and publishes 2, so after 3 more jobs a claim of
--    3 needs no count.
SELECT awa.create_queue('rbg', 1);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbg', ARRAY['g1', 'g2']));
SELECT awa.set_concurrency_limit('rbg', 5);
SELECT * FROM pg_temp.claim('rbg', 5);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbg', ARRAY['g3', 'g4', 'g5', 'g6']));
SELECT * FROM pg_temp.claim('rbg', 3);
SELECT * FROM pg_temp.claim('rbg', 1);
-- 10. A changed limit (queue_meta's stamp moves) makes every bound unknown: raised to 6, the
--     next claim counts (5 running), which the old bound (5, + 1) would have let it skip.
SELECT awa.set_concurrency_limit('rbq', 6);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
-- 11. A bound is trusted for a second after the count it started from. Three completions:
--    a claim counts (3 running) and publishes 4, the next one needs no count (4, + 1), and a
--    second later one that the bound leaves room for counts.
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j10', 'j11', 'j12']) k;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_sleep(1.2);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 12. A transaction that changed queue_meta counts, and publishes nothing (its change moves
--     the stamp at commit): after two completions, with the limit raised to 7 in the
--     transaction, both its claims count (4 running), then the claim after it counts too.
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j13', 'j14']) k;
BEGIN;
SELECT awa.set_concurrency_limit('rbq', 7);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
SELECT awa.drop_queue(q) FROM unnest(ARRAY['rbq', 'rbn', 'rbg']) q;
