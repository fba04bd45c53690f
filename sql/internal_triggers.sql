-- internal_triggers: a user's trigger on a table of the extension fires, as PostgreSQL defines
-- it, on the hot path too (docs/operations.md, "Triggers on the extension's tables"). AFTER
-- triggers on awa.claim_batches and awa.completion_batches broke every claim and completion
-- with XX000 "AfterTriggerSaveEvent() called outside of query": those statements run on the
-- latest committed state and opened no trigger context of their own. Every entry point that
-- writes through such a statement is called here from a plain SELECT (which opens none either).
\set VERBOSITY terse

CREATE TEMP TABLE trig_log (tab text, op text, level text, n int);
CREATE FUNCTION pg_temp.log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trig_log VALUES (TG_ARGV[0], TG_OP, 'row', 1);
    RETURN NULL;
END $$;
CREATE FUNCTION pg_temp.log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trig_log VALUES (TG_ARGV[0], TG_OP, 'statement', 1);
    RETURN NULL;
END $$;
CREATE FUNCTION pg_temp.before_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trig_log VALUES (TG_ARGV[0], TG_OP, 'before row', 1);
    RETURN NEW;
END $$;

-- Row and statement triggers on the tables the hot path writes with such statements.
SELECT format('CREATE TRIGGER user_row_%1$s AFTER INSERT OR UPDATE OR DELETE ON awa.%1$I '
              'FOR EACH ROW EXECUTE FUNCTION pg_temp.log_row(%1$L)', t),
       format('CREATE TRIGGER user_stmt_%1$s AFTER INSERT OR UPDATE OR DELETE ON awa.%1$I '
              'FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_statement(%1$L)', t)
  FROM unnest(ARRAY['claim_batches', 'completion_batches', 'attempt_state', 'job_unique_claims']) t \gexec
CREATE TRIGGER user_before_claim_batches BEFORE INSERT ON awa.claim_batches
    FOR EACH ROW EXECUTE FUNCTION pg_temp.before_row('claim_batches');

SELECT cardinality(awa.insert_jobs('trig_q', ARRAY['a', 'b', 'c', 'd'],
                   p_unique_keys => ARRAY['u1', 'u2', 'u3', 'u4']::bytea[],
                   p_unique_states => ARRAY['11100000', '11100000', '11100000', '11100000']::bit(8)[])) AS enqueued;

-- A claim of four jobs (one claim batch), a heartbeat of two, a completion of two, a
-- failure and a snooze: each from a plain SELECT.
CREATE TEMP TABLE claimed AS SELECT job_id, run_lease FROM awa.claim_ready_runtime('trig_q', 4);
SELECT count(*) AS claimed FROM claimed;
SELECT awa.heartbeat_jobs(array_agg(job_id), array_agg(run_lease)) AS heartbeats
  FROM (SELECT * FROM claimed ORDER BY job_id LIMIT 2) c;
SELECT count(*) AS completed
  FROM (SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases FROM (SELECT * FROM claimed ORDER BY job_id LIMIT 2) c) a,
       awa.complete_jobs(a.ids, a.leases);
SELECT awa.fail_job(job_id, run_lease, 'boom') FROM claimed ORDER BY job_id OFFSET 2 LIMIT 1;
SELECT awa.snooze_job(job_id, run_lease, interval '1 hour') FROM claimed ORDER BY job_id OFFSET 3;
-- A stale completion writes nothing and fires nothing.
SELECT count(*) AS stale_completed
  FROM (SELECT array_agg(job_id) AS ids, array_agg(run_lease) AS leases FROM claimed) a, awa.complete_jobs(a.ids, a.leases);

-- What fired: one receipt batch (its BEFORE and AFTER row trigger), one completion batch, the
-- heartbeats (a heartbeat runs one statement per plane mode, and both write attempt_state, so
-- its statement triggers fire twice), the unique claims the claim and the exits released and took.
SELECT tab, op, level, sum(n) AS fired FROM trig_log GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT state, count(*) FROM awa.jobs WHERE queue = 'trig_q' GROUP BY 1 ORDER BY 1;

-- The triggers go with the test; the queue too, so later tests see no lanes of it.
SELECT format('DROP TRIGGER %I ON %s', tgname, tgrelid::regclass)
  FROM pg_trigger WHERE tgname LIKE 'user\_%' AND tgparentid = 0 AND tgrelid::regclass::text LIKE 'awa.%'
 ORDER BY tgname \gexec
SELECT awa.drop_queue('trig_q', true) AS removed;
