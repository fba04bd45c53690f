
-- Step 3, the 0.16 functions go. The function pieces of 1.0 that follow create every
-- function anew; the 11-argument insert_job_compat in particular must not survive, or
-- 11-argument positional calls would match two overloads. Only a pre-shard schema (its
-- enqueue heads still carry next_seq) has them, so this step is a no-op on a 1.0 schema.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                WHERE attrelid = 'awa.queue_enqueue_heads'::regclass
                  AND attname = 'next_seq' AND NOT attisdropped) THEN
        DROP FUNCTION IF EXISTS awa.insert_job_compat(text, text, jsonb, awa.job_state, smallint, smallint,
                                                      timestamptz, jsonb, text[], bytea, bit);
        DROP FUNCTION IF EXISTS awa.claim_ready_runtime(text, integer);
        DROP FUNCTION IF EXISTS awa.complete_jobs(bigint[], bigint[]);
        DROP FUNCTION IF EXISTS awa.fail_job(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa.fail_job_to_dlq(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa._take_attempt(bigint, bigint, text);
        DROP FUNCTION IF EXISTS awa.job_state_in_bitmask(bit, awa.job_state);
        DROP TYPE IF EXISTS awa.job_row;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE pronamespace = 'awa'::regnamespace) THEN
            RAISE EXCEPTION 'a 0.16 function survived the upgrade: %',
                (SELECT string_agg(oid::regprocedure::text, ', ') FROM pg_catalog.pg_proc
                  WHERE pronamespace = 'awa'::regnamespace)
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;
