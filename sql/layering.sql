-- layering: C++ is the lower layer. The hot calls (an enqueue that creates its lane, a claim
-- that promotes a due job of its queue and releases a unique claim, a completion) and the
-- SQL entry points to the same C++ (lane creation, names, the unique-state rule) never
-- enter a PL/pgSQL or SQL-language function of the extension: with every function call
-- tracked, the only functions of schema awa that run are C functions.
\set SHOW_CONTEXT never
SET track_functions = 'all';
-- A due retryable job of the queue (promoted by the claim below) with a unique key whose
-- mask holds 'available' but not 'running' (the claim releases it).
SELECT count(*) AS scheduled FROM (
  SELECT awa.insert_job_compat('due', 'layering_q', p_run_at => now() + interval '1 hour',
                               p_unique_key => 'layering-key'::bytea, p_unique_states => B'11000000')) x;
UPDATE awa.deferred_jobs SET run_at = now() - interval '1 second' WHERE queue = 'layering_q';
SELECT count(*) AS key_held FROM awa.job_unique_claims WHERE unique_key = 'layering-key'::bytea;
BEGIN;
SELECT count(*) AS enqueued FROM (SELECT awa.insert_job_compat('first', 'layering_new_lane')) x;
SELECT kind, attempt FROM awa.claim_ready_runtime('layering_q', 10, 0, 0);
SELECT count(*) AS key_held FROM awa.job_unique_claims WHERE unique_key = 'layering-key'::bytea;
SELECT count(*) AS completed FROM awa.complete_jobs(
  (SELECT array_agg(job_id) FROM awa.lease_claims WHERE queue = 'layering_q'),
  (SELECT array_agg(run_lease) FROM awa.lease_claims WHERE queue = 'layering_q'));
SELECT created FROM awa._ensure_lane('layering_other_lane', 2::smallint, 0::smallint);
SELECT awa.lane_sequence_name('layering_q', 2, 0) = 'queue_enqueue_seq_' || left(md5('layering_q:2:0'), 32) AS name_rule,
       awa.lane_lock_key('layering_q', 2, 0) = hashtextextended('awa.' || quote_ident(awa.lane_sequence_name('layering_q', 2, 0)), 0) AS lock_rule,
       awa.job_state_in_bitmask(B'01000000', 'available') AND NOT awa.job_state_in_bitmask(B'01000000', 'running') AS mask_rule;
-- What ran in this transaction: C functions only (a positive count shows tracking works).
SELECT count(*) FILTER (WHERE l.lanname = 'c') > 3 AS c_functions_tracked,
       coalesce(string_agg(p.proname || ' (' || l.lanname || ')', ', ' ORDER BY p.proname)
                  FILTER (WHERE l.lanname <> 'c'), 'none') AS non_c_functions
  FROM pg_catalog.pg_stat_xact_user_functions f
  JOIN pg_catalog.pg_proc p ON p.oid = f.funcid
  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'awa'::regnamespace;
ROLLBACK;
RESET track_functions;
SELECT awa.drop_queue('layering_q', true) IS NOT NULL AS dropped;
