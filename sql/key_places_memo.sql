-- key_places_memo: the places of a key in awa.key_attempts are remembered in shared memory by
-- the claim that read or wrote them (preloaded; src/key_places_memo.cpp; docs/design.md §4,
-- "Flow control"), and the next claim of the key counts them without probing the table's
-- primary key. `probes` is the number of probes of that key a claim made: 0 where the
-- places were remembered; key_places_memo_1.out (no preload) shows every claim probing. What
-- a claim rolled back, rolled back to a savepoint, or followed by another claim of the key
-- in its transaction wrote is not published; a limit changed forgets everything. A
-- remembered free place deleted behind the memory (as the maintenance's prune deletes places
-- whose attempt ended) and its tid given to another key's place after a vacuum is not written
-- over: the claim checks the row version first.
-- The test vacuums awa.key_attempts: it runs in a database of its own, maintenance off.
\set VERBOSITY terse
SELECT current_database() AS home \gset
CREATE DATABASE awa_places_memo;
ALTER DATABASE awa_places_memo SET awa_shard.maintenance = off;
\c awa_places_memo
SET client_min_messages = warning;
CREATE EXTENSION awa_shard;
RESET client_min_messages;

-- A claim of n jobs of queue q: the kinds claimed, and the probes of awa.key_attempts' key.
CREATE FUNCTION pg_temp.claim(q text, n integer, OUT claimed text, OUT probes bigint) LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_stat_get_xact_numscans('awa.key_attempts_pkey'::regclass);
BEGIN
    SELECT coalesce(string_agg(c.kind, ' ' ORDER BY c.lane_seq), '-') INTO claimed FROM awa.claim_ready_runtime(q, n) c;
    probes := pg_stat_get_xact_numscans('awa.key_attempts_pkey'::regclass) - before;
END
$$;
-- Wait (at most 10 s) until no other backend of this database holds a snapshot (an
-- autovacuum ANALYZE would keep the next VACUUM from removing the place deleted before it).
CREATE FUNCTION pg_temp.wait_horizon() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..100 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                                 AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL);
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
-- Complete the running job of kind k.
CREATE FUNCTION pg_temp.done(k text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM awa.jobs j, awa.complete_jobs(ARRAY[j.id], ARRAY[j.run_lease])
     WHERE j.queue IN ('kpm', 'kpo') AND j.kind = k AND j.state = 'running'
$$;

SELECT awa.create_queue(q, 1) FROM unnest(ARRAY['kpm', 'kpo']) q;
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('kpm', ARRAY(SELECT 'a' || g FROM generate_series(1, 14) g),
                                                        p_concurrency_keys => array_fill('a'::text, ARRAY[14])));
SELECT count(*) AS enqueued FROM unnest(awa.insert_jobs('kpo', ARRAY['o1', 'o2'], p_concurrency_keys => ARRAY['o', 'o']));
SELECT awa.set_concurrency_limit(q, 2, p_per_key => true) FROM unnest(ARRAY['kpm', 'kpo']) q;

-- 1. The key's first claim reads its places from the table (none) and remembers them.
SELECT * FROM pg_temp.claim('kpm', 1);
-- 2. The next ones take them from memory, a1's place (published at commit) included: a2 runs,
--    then the key is at its cap of 2.
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT * FROM pg_temp.claim('kpm', 1);
-- 3. a1 completed: its remembered place is free, and a3 takes it.
SELECT pg_temp.done('a1') AS completed;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT count(*) AS places FROM awa.key_attempts WHERE queue = 'kpm';
-- 4. A claim rolled back publishes nothing: the next claim takes a4 again in the same remembered
--    place, and the key is at its cap (a3, a4).
SELECT pg_temp.done('a2') AS completed;
BEGIN;
SELECT * FROM pg_temp.claim('kpm', 1);
ROLLBACK;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT * FROM pg_temp.claim('kpm', 1);
-- 5. A claim rolled back to a savepoint: the key is forgotten, the next claim reads the table.
SELECT pg_temp.done('a3') AS completed;
BEGIN;
SAVEPOINT s;
SELECT * FROM pg_temp.claim('kpm', 1);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM pg_temp.claim('kpm', 1);
-- 6. Two claims of the key in one transaction: the second counts the first one's places from
--    the table, and the key is forgotten at commit.
SELECT pg_temp.done('a4') AS completed;
SELECT pg_temp.done('a5') AS completed;
BEGIN;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT * FROM pg_temp.claim('kpm', 1);
COMMIT;
SELECT pg_temp.done('a6') AS completed;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT kind, state FROM awa.jobs WHERE queue = 'kpm' AND state <> 'available' ORDER BY id;
-- 7. A changed limit forgets what was remembered.
SELECT pg_temp.done('a7') AS completed;
SELECT pg_temp.done('a8') AS completed;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT pg_temp.done('a9') AS completed;
SELECT awa.set_concurrency_limit('kpm', 1, p_per_key => true);
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT pg_temp.done('a10') AS completed;
-- 8. A remembered free place deleted behind the memory (by hand here, as the prune deletes a
--    place whose attempt ended) and vacuumed away with the table's end: the next claim finds
--    the version gone and records a11 through the record statement.
TRUNCATE awa.key_attempts;
SELECT * FROM pg_temp.claim('kpm', 1);
SELECT pg_temp.done('a11') AS completed;
SELECT ctid AS kpm_tid FROM awa.key_attempts WHERE queue = 'kpm' \gset
DELETE FROM awa.key_attempts WHERE queue = 'kpm';
SELECT pg_temp.wait_horizon();
VACUUM awa.key_attempts;
SELECT claimed FROM pg_temp.claim('kpm', 1);
SELECT pg_temp.done('a12') AS completed;
-- 9. The same, and key o's first place then takes the deleted place's tid: the claim of key a
--    does not write over it.
TRUNCATE awa.key_attempts;
SELECT claimed FROM pg_temp.claim('kpm', 1);
SELECT pg_temp.done('a13') AS completed;
SELECT ctid AS kpm_tid FROM awa.key_attempts WHERE queue = 'kpm' \gset
DELETE FROM awa.key_attempts WHERE queue = 'kpm';
SELECT pg_temp.wait_horizon();
VACUUM awa.key_attempts;
SELECT claimed FROM pg_temp.claim('kpo', 1);
SELECT ctid = :'kpm_tid' AS same_tid FROM awa.key_attempts WHERE queue = 'kpo';
SELECT claimed FROM pg_temp.claim('kpm', 1);
SELECT k.queue, k.concurrency_key, j.kind, j.state
  FROM awa.key_attempts k JOIN awa.jobs j ON j.id = k.job_id ORDER BY k.queue;
SELECT claimed FROM pg_temp.claim('kpo', 1);
SELECT claimed FROM pg_temp.claim('kpm', 1);

\c :home
DROP DATABASE awa_places_memo;
