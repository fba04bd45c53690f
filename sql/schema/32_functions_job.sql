-- One definition of a job (awa.job_template) and the helpers every path that moves a job shares.

-- The job attributes of any row that has them (a job table's row, awa.taken_attempt), by
-- name; a NULL row gives a job with every attribute NULL.
-- The C++ side of the same definition (AWA_JOB_COLUMNS), for the test that they agree.
CREATE FUNCTION awa._job_columns(OUT attnum integer, OUT name text, OUT type text) RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'awa_job_columns'
    LANGUAGE C IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._job_columns() FROM PUBLIC;
COMMENT ON FUNCTION awa._job_columns() IS
    'Internal: the job attributes of the C++ definition (src/job_columns.hpp), in order, to check them against awa.job_template.';

CREATE FUNCTION awa._job(p_row anyelement) RETURNS awa.job_template
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$ SELECT jsonb_populate_record(NULL::awa.job_template, coalesce(to_jsonb(p_row), '{}')) $$;
REVOKE ALL ON FUNCTION awa._job(anyelement) FROM PUBLIC;
COMMENT ON FUNCTION awa._job(anyelement) IS 'Internal: the job attributes (awa.job_template) of any row that has them, by name.';

-- A row of p_into's type (a job table's row type or awa.taken_attempt): p_into's own
-- values, overwritten by the job's attributes, then by p_own (the columns the destination
-- adds or changes, by name).
CREATE FUNCTION awa._job_row(p_into anyelement, p_job awa.job_template, p_own jsonb) RETURNS anyelement
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$ SELECT jsonb_populate_record(p_into, coalesce(to_jsonb(p_job), '{}') || coalesce(p_own, '{}')) $$;
REVOKE ALL ON FUNCTION awa._job_row(anyelement, awa.job_template, jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._job_row(anyelement, awa.job_template, jsonb) IS 'Internal: a row of a job table''s type from a job and the columns that table adds.';

-- The job of a terminal row: its own attributes; the body it leaves NULL (because the
-- ready row of the same lane identity holds it) from that ready row. attempted_at is the
-- terminal attempt's own.
CREATE FUNCTION awa._done_job(d awa.done_entries, r awa.ready_entries) RETURNS awa.job_template
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN jsonb_populate_record(awa._job(r),
                                 jsonb_strip_nulls(to_jsonb(awa._job(d))) || jsonb_build_object('attempted_at', d.attempted_at));
REVOKE ALL ON FUNCTION awa._done_job(awa.done_entries, awa.ready_entries) FROM PUBLIC;
COMMENT ON FUNCTION awa._done_job(awa.done_entries, awa.ready_entries) IS 'Internal: the job of a terminal row, its NULL body taken from its ready row.';

-- Metadata with provenance keys added only where absent ("stamped once").
CREATE FUNCTION awa._stamp_metadata(p_metadata jsonb, p_stamp jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN nullif(coalesce(p_metadata, '{}'::jsonb)
                  || (coalesce(p_stamp, '{}'::jsonb)
                      - ARRAY(SELECT jsonb_object_keys(coalesce(p_metadata, '{}'::jsonb)))),
                  '{}'::jsonb);
REVOKE ALL ON FUNCTION awa._stamp_metadata(jsonb, jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._stamp_metadata(jsonb, jsonb) IS 'Internal: metadata with provenance keys added where absent.';

-- Errors array with one more entry {error, attempt, at[, terminal]}.
CREATE FUNCTION awa._append_error(p_errors jsonb, p_error text, p_attempt integer, p_terminal boolean)
    RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    RETURN coalesce(p_errors, '[]'::jsonb) || jsonb_build_array(
        jsonb_build_object('error', p_error, 'attempt', p_attempt, 'at', clock_timestamp())
        || CASE WHEN p_terminal THEN '{"terminal": true}'::jsonb ELSE '{}'::jsonb END);
REVOKE ALL ON FUNCTION awa._append_error(jsonb, text, integer, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._append_error(jsonb, text, integer, boolean) IS 'Internal: an errors array with one more {error, attempt, at[, terminal]} entry.';

-- Take (p_hold) or release a job's unique claim on the latest committed state, whatever the
-- caller's isolation level: a release must see a claim row committed after the caller's
-- snapshot (an exit at REPEATABLE READ of a job enqueued since), and a take must not raise
-- 40001 on a conflicting claim it cannot see (C, src/unique_claims.cpp).
CREATE FUNCTION awa._set_unique_claim(p_job_id bigint, p_key bytea, p_hold boolean, p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_set_unique_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._set_unique_claim(bigint, bytea, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._set_unique_claim(bigint, bytea, boolean, text) IS 'Internal: take or release a job''s unique claim in its queue on the latest committed state.';

-- Move a job's unique claim with its state: released when the new state leaves the mask,
-- taken when it enters it (a conflicting live claim keeps its key), on the latest committed
-- state (C, src/unique_claims.cpp).
CREATE FUNCTION awa._sync_unique_claim(p_job_id bigint, p_key bytea, p_mask bit(8),
                                       p_old awa.job_state, p_new awa.job_state, p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_sync_unique_claim'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._sync_unique_claim(bigint, bytea, bit, awa.job_state, awa.job_state, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._sync_unique_claim(bigint, bytea, bit, awa.job_state, awa.job_state, text) IS 'Internal: move a job''s unique claim in its queue with its state.';

-- Record that this transaction finished (or removed) a job, so that its waiters
-- (awa.wait_for_job) wake at commit; NULL: jobs it does not name (purge, drop). C,
-- src/job_wait.cpp: the PL/pgSQL exits call it; C++ exits record their jobs themselves.
CREATE FUNCTION awa._job_finished(p_job_id bigint) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_job_finished'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._job_finished(bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._job_finished(bigint) IS 'Internal: wake the waiters of a job this transaction finished or moved to another queue, at commit (NULL: every waiter).';
