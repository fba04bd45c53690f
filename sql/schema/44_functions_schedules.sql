-- Periodic jobs (docs/api.md, "Periodic jobs"): schedules in awa.cron_schedules, managed by
-- awa_admin; the maintenance step awa.run_schedules() enqueues one job per due tick. Cron
-- expressions are parsed and their ticks computed in C (src/cron.cpp, src/cron_sql.cpp).

-- The first tick of a cron expression in a time zone strictly after p_after; NULL when it
-- matches no date within ten years. 22023 for a bad expression (naming its field) or zone.
CREATE FUNCTION awa._cron_next(p_cron text, p_timezone text, p_after timestamptz)
    RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_cron_next'
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._cron_next(text, text, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._cron_next(text, text, timestamptz) IS 'Internal: the first tick of a cron expression in a time zone after an instant.';

-- The latest tick in [p_from, p_until], or p_from when none lies after it: after downtime,
-- the one tick a schedule enqueues.
CREATE FUNCTION awa._cron_latest(p_cron text, p_timezone text, p_from timestamptz, p_until timestamptz)
    RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_cron_latest'
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._cron_latest(text, text, timestamptz, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._cron_latest(text, text, timestamptz, timestamptz) IS 'Internal: the latest tick of a cron expression in a time zone within a stretch of time.';

-- Create or replace the schedule p_name: a job of p_kind in p_queue (with the job
-- attributes of awa.insert_job_compat) at every tick of p_cron in p_timezone. Every
-- argument is checked before anything is written. Replacing keeps the paused flag and the
-- last enqueue; it keeps the next tick when cron and time zone are unchanged, else the next
-- tick is the first after now. Returns the next tick (NULL while paused).
CREATE FUNCTION awa.schedule(
    p_name text,
    p_cron text,
    p_kind text,
    p_queue text DEFAULT 'default',
    p_args jsonb DEFAULT '{}',
    p_timezone text DEFAULT 'UTC',
    p_priority bigint DEFAULT 2,
    p_max_attempts bigint DEFAULT 25,
    p_metadata jsonb DEFAULT '{}',
    p_tags text[] DEFAULT '{}')
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_next timestamptz;
BEGIN
    -- A tick's enqueue and the schedule's update (a reference table, on every node) would be
    -- one transaction writing on every worker, which an enqueue cannot be (docs/scale-out.md).
    IF awa._citus_group() IS NOT NULL THEN
        RAISE EXCEPTION 'periodic jobs are not supported on a Citus cluster'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A tick would enqueue and update the install-wide schedule in one transaction that writes on every node.',
                  HINT = 'Enqueue the job with p_run_at from a scheduler outside the database, or run awa_shard on one server.';
    END IF;
    PERFORM awa._check_queue(p_name, 'p_name');
    PERFORM awa._require(p_cron IS NULL, 'p_cron');
    PERFORM awa._require(p_kind IS NULL, 'p_kind');
    PERFORM awa._check_queue(p_queue, 'p_queue');
    PERFORM awa._require(p_args IS NULL, 'p_args');
    PERFORM awa._require(p_timezone IS NULL, 'p_timezone');
    PERFORM awa._require(p_priority IS NULL, 'p_priority');
    PERFORM awa._require(p_max_attempts IS NULL, 'p_max_attempts');
    PERFORM awa._require(p_metadata IS NULL, 'p_metadata');
    PERFORM awa._require(p_tags IS NULL, 'p_tags');
    IF length(p_kind) NOT BETWEEN 1 AND awa._limit('max_kind_chars') THEN
        RAISE EXCEPTION 'p_kind must be 1 to % characters long', awa._limit('max_kind_chars')
            USING ERRCODE = '23514', DETAIL = format('The value has %s characters.', length(p_kind));
    END IF;
    PERFORM awa._check_priority(p_priority, 'p_priority');
    PERFORM awa._check_between(p_max_attempts, 1, awa._limit('max_attempts'), 'p_max_attempts', '23514');
    PERFORM awa._check_arg(jsonb_typeof(p_metadata) = 'object', 'p_metadata must be a JSON object');
    PERFORM awa._check_arg(coalesce(array_ndims(p_tags), 1) = 1, 'p_tags must be a one-dimensional array');
    IF cardinality(p_tags) > awa._limit('max_tags') THEN
        RAISE EXCEPTION 'p_tags must hold at most % tags', awa._limit('max_tags')
            USING ERRCODE = '23514', DETAIL = format('The array has %s elements.', cardinality(p_tags));
    END IF;
    IF array_position(p_tags, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'p_tags must not contain nulls' USING ERRCODE = '22004';
    END IF;
    -- 22023 for a bad expression (naming its field) or an unknown time zone.
    v_next := awa._cron_next(p_cron, p_timezone, clock_timestamp());
    IF v_next IS NULL THEN
        RAISE EXCEPTION 'cron expression "%" matches no date', p_cron USING ERRCODE = '22023',
            HINT = 'Check the day-of-month and month fields: February has no day 30 or 31.';
    END IF;
    INSERT INTO awa.cron_schedules AS s
           (name, cron, timezone, kind, queue, args, priority, max_attempts, metadata, tags, next_run_at)
    VALUES (p_name, p_cron, p_timezone, p_kind, p_queue, p_args, p_priority, p_max_attempts, p_metadata,
            p_tags, v_next)
    ON CONFLICT (name) DO UPDATE
       SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind, queue = EXCLUDED.queue,
           args = EXCLUDED.args, priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
           metadata = EXCLUDED.metadata, tags = EXCLUDED.tags,
           next_run_at = CASE WHEN s.cron = EXCLUDED.cron AND s.timezone = EXCLUDED.timezone
                              THEN s.next_run_at ELSE EXCLUDED.next_run_at END,
           updated_at = clock_timestamp()
    RETURNING CASE WHEN s.paused THEN NULL ELSE s.next_run_at END INTO v_next;
    RETURN v_next;
END
$$;
REVOKE ALL ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[]) TO awa_admin;
COMMENT ON FUNCTION awa.schedule(text, text, text, text, jsonb, text, bigint, bigint, jsonb, text[])
    IS 'Create or replace a periodic job: a job of p_kind at every tick of p_cron in p_timezone; returns the next tick. Role: awa_admin.';

-- Remove a schedule; jobs it enqueued stay. Returns whether it existed.
CREATE FUNCTION awa.unschedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    DELETE FROM awa.cron_schedules s WHERE s.name = p_name;
    RETURN FOUND;
END
$$;
REVOKE ALL ON FUNCTION awa.unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.unschedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.unschedule(text) IS 'Remove a periodic job (its enqueued jobs stay); returns whether it existed. Role: awa_admin.';

-- Stop enqueueing a schedule's ticks. Returns whether the schedule exists.
CREATE FUNCTION awa.pause_schedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    UPDATE awa.cron_schedules s SET paused = true, updated_at = clock_timestamp()
     WHERE s.name = p_name AND NOT s.paused;
    RETURN FOUND OR EXISTS (SELECT 1 FROM awa.cron_schedules s WHERE s.name = p_name);
END
$$;
REVOKE ALL ON FUNCTION awa.pause_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.pause_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.pause_schedule(text) IS 'Stop enqueueing a periodic job''s ticks; returns whether it exists. Role: awa_admin.';

-- Enqueue a paused schedule's ticks again, from the first tick after now: ticks that fell
-- while it was paused are not enqueued. Returns whether the schedule exists.
CREATE FUNCTION awa.resume_schedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    UPDATE awa.cron_schedules s
       SET paused = false, next_run_at = awa._cron_next(s.cron, s.timezone, clock_timestamp()),
           updated_at = clock_timestamp()
     WHERE s.name = p_name AND s.paused;
    RETURN FOUND OR EXISTS (SELECT 1 FROM awa.cron_schedules s WHERE s.name = p_name);
END
$$;
REVOKE ALL ON FUNCTION awa.resume_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.resume_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.resume_schedule(text) IS 'Enqueue a paused periodic job''s ticks again, from the next one after now; returns whether it exists. Role: awa_admin.';

-- The maintenance step of periodic jobs: for up to p_limit unpaused schedules whose next
-- tick has come, oldest first, enqueue one job per due tick with run_at = the tick and move
-- next_run_at past the last one, in this transaction and under the schedule's row lock
-- (FOR UPDATE SKIP LOCKED): a concurrent pass skips the row, or sees the moved tick once this
-- one commits, so every tick gets at most one job, whatever crashes or concurrent passes.
-- Which due ticks: if the schedule's previous job was enqueued less than 10 seconds ago, the
-- maintenance kept up and the ticks only came while a pass ran late (a 1-second schedule,
-- a pass a little longer than its interval), so each gets its job (at most 60, then the
-- latest); otherwise (downtime) only the latest tick that has come. Returns how many jobs
-- it enqueued.
CREATE FUNCTION awa.run_schedules(p_limit bigint DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_tick timestamptz;
    v_latest timestamptz;
    v_job bigint;
    v_count integer := 0;
    v_ticks integer;
    s record;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    PERFORM awa._require_read_committed('run_schedules');
    -- On a Citus cluster no schedule can be made (awa.schedule refuses); one made before
    -- awa.citus_setup() is refused here once due, rather than left silently unrun.
    IF awa._citus_group() IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM awa.cron_schedules c WHERE NOT c.paused AND c.next_run_at <= v_now) THEN
            RAISE EXCEPTION 'periodic jobs are not supported on a Citus cluster'
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Schedules made before awa.citus_setup() are due and cannot be run here.',
                      HINT = 'Remove them with awa.unschedule(name) (or pause them) and enqueue with p_run_at from a scheduler outside the database.';
        END IF;
        RETURN 0;
    END IF;
    FOR s IN
        SELECT c.name, c.cron, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
               c.metadata, c.tags, c.next_run_at, c.last_enqueued_at
          FROM awa.cron_schedules c
         WHERE NOT c.paused AND c.next_run_at <= v_now
         ORDER BY c.next_run_at, c.name
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    LOOP
        v_latest := awa._cron_latest(s.cron, s.timezone, s.next_run_at, v_now);
        v_tick := CASE WHEN s.last_enqueued_at > v_now - interval '10 seconds' THEN s.next_run_at ELSE v_latest END;
        v_ticks := 0;
        LOOP
            SELECT j.id INTO v_job
              FROM awa.insert_job_compat(s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts, v_tick,
                                         s.metadata || jsonb_build_object('awa_schedule', s.name), s.tags) j;
            v_count := v_count + 1;
            v_ticks := v_ticks + 1;
            EXIT WHEN v_tick >= v_latest;
            v_tick := CASE WHEN v_ticks < 60 THEN coalesce(awa._cron_next(s.cron, s.timezone, v_tick), v_latest)
                           ELSE v_latest END;
        END LOOP;
        UPDATE awa.cron_schedules c
           SET next_run_at = awa._cron_next(s.cron, s.timezone, v_tick), last_run_at = v_tick,
               last_enqueued_at = clock_timestamp(), last_job_id = v_job
         WHERE c.name = s.name;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.run_schedules(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.run_schedules(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.run_schedules(bigint) IS 'Enqueue the due ticks of the periodic jobs (after downtime only the latest of each); returns how many jobs. Role: awa_admin.';
