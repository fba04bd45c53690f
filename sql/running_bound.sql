-- running_bound: a claim of a queue with a concurrency limit counts the queue's running
-- attempts only when the bound the claims before it published, less the exits committed
-- since (preloaded; an upper bound of the running attempts, src/running_bound.cpp;
-- docs/design.md §4, "Flow control"), leaves it less room than it asks for and is not
-- exact: a bound that started from a count, with every exit since taken off, is what a
-- count would find, so a claim takes the room it leaves (none at the cap) without one. `counted` says
-- whether the claim counted: the count is the only reader of awa.leases in a receipts-mode
-- claim. running_bound_1.out (no preload) shows every claim counting. What the bound leaves
-- is checked by what the claims take: never more than the limit, and a completed job's place
-- is taken by the next claim that asks for it.
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
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbq', ARRAY(SELECT 'j' || g FROM generate_series(1, 40) g)));
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbn', ARRAY['n1']));
SELECT awa.set_concurrency_limit('rbq', 5);

-- 0. A queue without a limit never counts.
SELECT * FROM pg_temp.claim('rbn', 1);
-- 1. The first claim under the limit knows no bound: it counts (0 running) and publishes 2.
SELECT * FROM pg_temp.claim('rbq', 2);
-- 2. The bound (2) leaves room for 2 more: taken without a count; the bound is now 4.
SELECT * FROM pg_temp.claim('rbq', 2);
-- 3. 4 + 2 is over the limit, but the bound is exact (the count of 1, and what the claims
--    since started): the claim takes the one place left without a count.
SELECT * FROM pg_temp.claim('rbq', 2);
SELECT pg_temp.running() AS running;
-- 4. At the cap, the exact bound (5) leaves nothing: the claim takes nothing, without a count.
SELECT * FROM pg_temp.claim('rbq', 1);
-- 5. A completion lowers the bound when it commits (4): the next claim takes its place
--    without a count, and the one after it, at the cap again, takes nothing without one.
SELECT pg_temp.done('j1') AS completed;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 6. Three completions in one transaction (bound 2): a claim of 2 and one of 1 need no count.
SELECT count(*) AS completed FROM awa.jobs j, awa.complete_jobs(ARRAY[j.id], ARRAY[j.run_lease])
 WHERE j.queue = 'rbq' AND j.kind IN ('j2', 'j3', 'j4') AND j.state = 'running';
SELECT * FROM pg_temp.claim('rbq', 2);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 7. A claim rolled back publishes nothing; the bound before it still holds: two completions
--    (bound 3), a claim of 1 rolled back, and the next one takes the same job without a count.
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j5', 'j6']) k;
BEGIN;
SELECT * FROM pg_temp.claim('rbq', 1);
ROLLBACK;
SELECT * FROM pg_temp.claim('rbq', 1);
-- 8. Two claims in one transaction: the second takes the first's job into account (bound 4,
--    + 1, without a count; then 5, + 1: a count, nothing left), and the commit publishes both.
BEGIN;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
COMMIT;
SELECT pg_temp.running() AS running;
-- 9. A transaction that completes a job and then counts does not take that exit off twice:
--    at the cap, j7 completed and a claim of 2 in one transaction (the bound, 5 before the
--    commit, leaves nothing and is not exact, the transaction's own exit not taken off yet:
--    a count, which no longer sees j7) takes the one place; after the commit the queue is at
--    its cap (the count's exact bound, 4 + 1) and the next claim takes nothing without one.
BEGIN;
SELECT pg_temp.done('j7') AS completed;
SELECT * FROM pg_temp.claim('rbq', 2);
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 10. A savepoint rolled back forgets the transaction's bounds (it may have released a limit
--     lock taken inside it, and undone exits): at the cap, j8 completed and a claim (a count:
--     4, and j13) inside a savepoint rolled back, then the commit: the next claim counts (5
--     running) and takes nothing.
BEGIN;
SAVEPOINT s;
SELECT pg_temp.done('j8') AS completed;
SELECT * FROM pg_temp.claim('rbq', 1);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 11. A claim whose lane holds fewer jobs than it was granted gives the rest back: queue rbg
--     (limit 5, 2 jobs): a claim of 5 takes 2 and publishes 2, so after 4 more jobs a claim of
--     3 needs no count, and one more, at the cap, takes nothing without one.
SELECT awa.create_queue('rbg', 1);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbg', ARRAY['g1', 'g2']));
SELECT awa.set_concurrency_limit('rbg', 5);
SELECT * FROM pg_temp.claim('rbg', 5);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbg', ARRAY['g3', 'g4', 'g5', 'g6']));
SELECT * FROM pg_temp.claim('rbg', 3);
SELECT * FROM pg_temp.claim('rbg', 1);
-- 12. A savepoint rolled back with an exit and a claim that gave everything back: queue rbs
--     (limit 1, one job s1, running). Inside the savepoint s1 completed and a claim of the
--     empty lane counts 0 and starts nothing; after the rollback s1 runs again. Nothing of it
--     is published: after one more job, the next claim counts (1 running) and takes nothing.
SELECT awa.create_queue('rbs', 1);
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbs', ARRAY['s1']));
SELECT awa.set_concurrency_limit('rbs', 1);
SELECT * FROM pg_temp.claim('rbs', 1);
BEGIN;
SAVEPOINT s;
SELECT count(*) AS completed FROM awa.jobs j, awa.complete_jobs(ARRAY[j.id], ARRAY[j.run_lease])
 WHERE j.queue = 'rbs' AND j.state = 'running';
SELECT * FROM pg_temp.claim('rbs', 1);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('rbs', ARRAY['s2']));
SELECT * FROM pg_temp.claim('rbs', 1);
SELECT count(*) AS running_rbs FROM awa.jobs WHERE queue = 'rbs' AND state = 'running';
-- 13. A changed limit (queue_meta's stamp moves) makes every bound unknown: two completions,
--     the limit raised to 6, and the next claim counts (3 running) although the old bound
--     (3, + 1) would have let it skip the count; the one after it needs none.
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j8', 'j9']) k;
SELECT awa.set_concurrency_limit('rbq', 6);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
-- 14. One completion, and a claim the bound (4, + 1) leaves room for needs no count.
SELECT pg_temp.done('j10') AS completed;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 15. A transaction that changed queue_meta counts, and publishes nothing (its change moves
--     the stamp at commit): after two completions, with the limit raised to 7 in the
--     transaction, both its claims count (3 running, then 4), then the claim after it counts
--     too.
SELECT pg_temp.done(k) AS completed FROM unnest(ARRAY['j11', 'j12']) k;
BEGIN;
SELECT awa.set_concurrency_limit('rbq', 7);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
-- 16. The count of 15 made an exact bound (5, + 1): a claim of 2 takes the one place left
--     (limit 7) without a count, and the next one, at the cap, takes nothing without one.
SELECT * FROM pg_temp.claim('rbq', 2);
SELECT * FROM pg_temp.claim('rbq', 1);
-- 17. An exit before a savepoint rolled back is taken off no bound (the savepoint dropped
--     the transaction's exits): its commit ends the exact bounds, so at the cap, after j13
--     completed that way, the next claim counts (6 running) and takes the freed place.
BEGIN;
SELECT pg_temp.done('j13') AS completed;
SAVEPOINT s;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT * FROM pg_temp.claim('rbq', 1);
SELECT pg_temp.running() AS running;
SELECT awa.drop_queue(q, true) FROM unnest(ARRAY['rbq', 'rbn', 'rbg', 'rbs']) q;
