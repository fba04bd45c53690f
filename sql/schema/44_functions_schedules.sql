-- Periodic jobs (docs/api.md, "Periodic jobs"): schedules in awa.cron_schedules, managed by
-- awa_admin; the maintenance step awa.run_schedules() enqueues one job per due tick. Cron
-- expressions are parsed and their ticks computed in C (src/cron.cpp, src/cron_sql.cpp).

-- The first tick of a cron expression in a time zone strictly after p_after; NULL when it
-- matches no date (none in the 400 years after p_after: then none ever) or the tick lies
-- past the last timestamp. 22023 for a bad expression (naming its field) or zone.
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

-- Where and how periodic jobs are managed (awa.schedule and its friends): anywhere on one
-- server, where the unique index on the name keeps names unique and nothing is locked here;
-- on a Citus cluster on the coordinator only, at READ COMMITTED, since there a name is kept
-- unique install-wide by the lock taken here (the table is distributed by queue and cannot
-- hold a unique index on the name alone; docs/scale-out.md, "Periodic jobs"). The lock
-- serialises the admin calls with each other, not with the ticks, which run on the workers
-- (SHARE UPDATE EXCLUSIVE: row locks and updates do not conflict with it). 0A000 otherwise.
CREATE FUNCTION awa._begin_schedule_admin(p_call text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_group integer := awa._citus_group();
BEGIN
    IF v_group <> 0 THEN
        RAISE EXCEPTION 'awa.% manages periodic jobs on the Citus coordinator only', p_call
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('This node is a Citus worker (group %s).', v_group),
                  HINT = 'Connect to the coordinator: it keeps schedule names unique across the workers.';
    END IF;
    IF v_group = 0 THEN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'awa.% must run at READ COMMITTED isolation on a Citus cluster', p_call
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Call it in a transaction of its own at READ COMMITTED: the test that a schedule name is free must see every committed schedule.';
        END IF;
        LOCK TABLE awa.cron_schedules IN SHARE UPDATE EXCLUSIVE MODE;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._begin_schedule_admin(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._begin_schedule_admin(text) IS 'Internal: refuse a schedule admin call on a Citus worker (or above READ COMMITTED on a cluster); on a cluster, serialise the admin calls.';

-- The queue of the schedule p_name, with its row locked (FOR UPDATE) by this transaction;
-- NULL when no schedule has that name. A schedule moved to another queue while this call
-- waited for its row is looked up again (at REPEATABLE READ or SERIALIZABLE the lock itself
-- then fails with 40001). Every statement names the row by queue and name (on a Citus
-- cluster, one shard's).
CREATE FUNCTION awa._lock_schedule(p_name text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue text;
BEGIN
    FOR v_try IN 1..100 LOOP
        SELECT s.queue INTO v_queue FROM awa.cron_schedules s WHERE s.name = p_name;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        PERFORM FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name FOR UPDATE;
        IF FOUND THEN
            RETURN v_queue;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'schedule "%" kept moving under this call', p_name
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
END
$$;
REVOKE ALL ON FUNCTION awa._lock_schedule(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._lock_schedule(text) IS 'Internal: lock the row of a schedule by name and return its queue (NULL when unknown).';

-- Create or replace the schedule p_name: a job of p_kind in p_queue (with the job
-- attributes of awa.insert_job_compat) at every tick of p_cron in p_timezone. Every
-- argument is checked before anything is written. Replacing keeps the paused flag and the
-- last enqueue; it keeps the next tick when cron and time zone are unchanged, else the next
-- tick is the first after now; a new queue moves the row (on a cluster, to that queue's
-- worker). The kept values are read under the row's lock (awa._lock_schedule), and "now" is
-- read after it: a replacement that waited for a pass enqueueing the schedule's tick keeps
-- the tick the pass stored, and takes none from before its wait. A schedule of the same name
-- created meanwhile by another call is met by the insert's ON CONFLICT and the call starts
-- again, as an upsert would; at REPEATABLE READ or SERIALIZABLE that conflict is a
-- serialization failure (40001). Returns the next tick (NULL while paused).
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
    v_now timestamptz;
    v_next timestamptz;
    v_old_queue text;
    v_same_ticks boolean;
    v_old_next timestamptz;
    v_paused boolean;
    v_last_run timestamptz;
    v_last_enqueued timestamptz;
    v_last_job bigint;
    v_created timestamptz;
    v_ticks_reset timestamptz;
BEGIN
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
    IF awa._cron_next(p_cron, p_timezone, clock_timestamp()) IS NULL THEN
        RAISE EXCEPTION 'cron expression "%" matches no date', p_cron USING ERRCODE = '22023',
            HINT = 'Check the day-of-month and month fields: February has no day 30 or 31.';
    END IF;
    PERFORM awa._begin_schedule_admin('schedule');
    FOR v_try IN 1..100 LOOP
        v_old_queue := awa._lock_schedule(p_name);
        v_same_ticks := NULL; v_old_next := NULL; v_paused := NULL; v_last_run := NULL;
        v_last_enqueued := NULL; v_last_job := NULL; v_created := NULL; v_ticks_reset := NULL;
        IF v_old_queue IS NOT NULL THEN
            SELECT s.cron = p_cron AND s.timezone = p_timezone, s.next_run_at, s.paused, s.last_run_at,
                   s.last_enqueued_at, s.last_job_id, s.created_at, s.ticks_reset_at
              INTO v_same_ticks, v_old_next, v_paused, v_last_run, v_last_enqueued, v_last_job, v_created,
                   v_ticks_reset
              FROM awa.cron_schedules s WHERE s.queue = v_old_queue AND s.name = p_name;
        END IF;
        v_now := clock_timestamp();
        v_next := CASE WHEN v_same_ticks THEN v_old_next ELSE awa._cron_next(p_cron, p_timezone, v_now) END;
        -- New ticks of a schedule that had others are owed from now, as after a resume.
        v_ticks_reset := CASE WHEN v_old_queue IS NULL OR v_same_ticks THEN v_ticks_reset ELSE v_now END;
        IF v_old_queue = p_queue THEN
            UPDATE awa.cron_schedules s
               SET cron = p_cron, timezone = p_timezone, kind = p_kind, args = p_args, priority = p_priority,
                   max_attempts = p_max_attempts, metadata = p_metadata, tags = p_tags, next_run_at = v_next,
                   ticks_reset_at = v_ticks_reset, updated_at = v_now
             WHERE s.queue = p_queue AND s.name = p_name;
            RETURN CASE WHEN v_paused THEN NULL ELSE v_next END;
        END IF;
        IF v_old_queue IS NOT NULL THEN
            DELETE FROM awa.cron_schedules s WHERE s.queue = v_old_queue AND s.name = p_name;
        END IF;
        INSERT INTO awa.cron_schedules
               (name, cron, timezone, kind, queue, args, priority, max_attempts, metadata, tags, paused,
                next_run_at, last_run_at, last_enqueued_at, last_job_id, ticks_reset_at, created_at, updated_at)
        VALUES (p_name, p_cron, p_timezone, p_kind, p_queue, p_args, p_priority, p_max_attempts, p_metadata,
                p_tags, coalesce(v_paused, false), v_next, v_last_run, v_last_enqueued, v_last_job, v_ticks_reset,
                coalesce(v_created, v_now), v_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN CASE WHEN v_paused THEN NULL ELSE v_next END;
        END IF;
        -- Another call created the name meanwhile (it was free when looked up): start again.
    END LOOP;
    RAISE EXCEPTION 'schedule "%" kept changing under this call', p_name
        USING ERRCODE = 'serialization_failure', HINT = 'Retry the call.';
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
DECLARE
    v_queue text;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('unschedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    DELETE FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name;
    RETURN true;
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
DECLARE
    v_queue text;
    v_now timestamptz;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('pause_schedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    v_now := clock_timestamp();
    UPDATE awa.cron_schedules s SET paused = true, updated_at = v_now
     WHERE s.queue = v_queue AND s.name = p_name AND NOT s.paused;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.pause_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.pause_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.pause_schedule(text) IS 'Stop enqueueing a periodic job''s ticks; returns whether it exists. Role: awa_admin.';

-- Enqueue a paused schedule's ticks again, from the first tick after now (read once the
-- schedule's row is locked): ticks that fell while it was paused are not enqueued. Returns
-- whether the schedule exists.
CREATE FUNCTION awa.resume_schedule(p_name text)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queue text;
    v_cron text;
    v_timezone text;
    v_now timestamptz;
BEGIN
    PERFORM awa._require(p_name IS NULL, 'p_name');
    PERFORM awa._begin_schedule_admin('resume_schedule');
    v_queue := awa._lock_schedule(p_name);
    IF v_queue IS NULL THEN
        RETURN false;
    END IF;
    -- (Read first: Citus computes no function of a column in an UPDATE.)
    SELECT s.cron, s.timezone INTO v_cron, v_timezone
      FROM awa.cron_schedules s WHERE s.queue = v_queue AND s.name = p_name;
    v_now := clock_timestamp();
    UPDATE awa.cron_schedules s
       SET paused = false, next_run_at = awa._cron_next(v_cron, v_timezone, v_now), ticks_reset_at = v_now,
           updated_at = v_now
     WHERE s.queue = v_queue AND s.name = p_name AND s.paused;
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION awa.resume_schedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.resume_schedule(text) TO awa_admin;
COMMENT ON FUNCTION awa.resume_schedule(text) IS 'Enqueue a paused periodic job''s ticks again, from the next one after now; returns whether it exists. Role: awa_admin.';

-- The schedules whose next tick has come by p_now, oldest tick first (the caller stops once
-- it has run as many as it may: rows it skips as locked do not count): on one server all of
-- them; on a Citus cluster those in the shards of awa.cron_schedules placed on
-- this node (the schedules of the queues it holds; none on a coordinator without shards),
-- read from those shards themselves, as awa._citus_local_queues reads its shards.
CREATE FUNCTION awa._due_schedules(p_now timestamptz, p_limit bigint DEFAULT NULL,
                                   p_after timestamptz DEFAULT '-infinity')
    RETURNS TABLE (queue text, name text, next_run_at timestamptz)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    IF awa._citus_group() IS NULL THEN
        RETURN QUERY
            SELECT c.queue, c.name, c.next_run_at FROM awa.cron_schedules c
             WHERE NOT c.paused AND c.next_run_at <= p_now AND c.next_run_at > p_after
             ORDER BY c.next_run_at, c.name
             LIMIT p_limit;
        RETURN;
    END IF;
    v_shards := awa._citus_local_shard_names(ARRAY['awa.cron_schedules']::regclass[]);
    IF v_shards IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.queue, u.name, u.next_run_at FROM (' ||
        (SELECT string_agg(format(
            'SELECT c.queue, c.name, c.next_run_at FROM %s c WHERE NOT c.paused AND c.next_run_at <= $1 AND c.next_run_at > $3', sh),
            ' UNION ALL ')
           FROM unnest(v_shards) sh) ||
        ') u ORDER BY u.next_run_at, u.name LIMIT $2'
      USING p_now, p_limit, p_after;
END
$$;
REVOKE ALL ON FUNCTION awa._due_schedules(timestamptz, bigint, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._due_schedules(timestamptz, bigint, timestamptz) IS 'Internal: the schedules this node runs (all of them on one server, those of its own shards on a Citus cluster) whose tick is in (p_after, p_now], soonest first, at most p_limit (NULL: all).';

-- The soonest tick after p_after of an unpaused schedule this node runs (awa._due_schedules),
-- NULL when none: the background maintenance worker wakes for it between and during its
-- passes (src/worker.cpp), so a tick is enqueued right after it comes rather than at the next
-- pass. p_after is when the worker's last run of the schedules began: a tick at or before
-- it that is still due (its enqueue failed, or more schedules were due than one run takes)
-- waits for the passes and does not hold back the others' wake.
CREATE FUNCTION awa._next_schedule_tick(p_after timestamptz)
    RETURNS timestamptz
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    RETURN (SELECT d.next_run_at FROM awa._due_schedules('infinity', 1, p_after) d);
REVOKE ALL ON FUNCTION awa._next_schedule_tick(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._next_schedule_tick(timestamptz) IS 'Internal: the next tick after p_after of a schedule this node runs, for the background worker''s wake.';

-- The maintenance step of periodic jobs: for up to p_limit unpaused schedules whose next
-- tick has come, oldest first, enqueue one job per due tick with run_at = the tick and move
-- next_run_at past the last one, in this transaction and under the schedule's row lock
-- (FOR UPDATE SKIP LOCKED): a concurrent pass skips the row, or sees the moved tick once this
-- one commits, so every tick gets at most one job, whatever crashes or concurrent passes.
-- Which due ticks: if the schedule's previous job (or, before its first, its creation) is
-- less than 10 seconds old, the maintenance kept up and the ticks only came while a pass ran
-- late (a 1-second schedule, a pass a little longer than its interval); if its next tick came
-- after the last background pass of the database began (awa._maintenance_served_since: one
-- that ended less than ten minutes ago), the ticks since only waited for the database's turn
-- (more databases than maintenance workers). Either way each gets its job (at most 600, then
-- the latest); otherwise (downtime) only the latest tick that has come.
-- Each schedule runs in a subtransaction: one whose enqueue fails is reported (WARNING) and
-- stays due, and the pass goes on with the others. In lane-lock mode each enqueue keeps its
-- lane locked to the commit, so the pass runs its schedules in lane order (queue bytes, then
-- priority) and waits for a lane only when it comes after every lane the transaction holds
-- (awa_shard.lane_lock_wait = ordered), as batches and promotion take lanes: two passes, or a
-- pass and a producer that takes its lanes in that order, cannot close a cycle. A schedule
-- whose lane is locked and comes before one the pass holds stays due, quietly, for the next.
-- On a Citus cluster each
-- node runs the schedules of the queues whose shards it holds (awa._due_schedules): the
-- schedule's row is on the queue's worker, so a tick is one transaction on that worker.
-- Every statement names the schedule by queue and name. Returns how many jobs it enqueued.
CREATE FUNCTION awa._maintenance_served_since() RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'awa_maintenance_served_since'
    LANGUAGE C VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._maintenance_served_since() FROM PUBLIC;
COMMENT ON FUNCTION awa._maintenance_served_since() IS 'Internal: when the last background pass of this database that has ended began, if it ended less than ten minutes ago (NULL: none; periodic jobs).';

CREATE FUNCTION awa.run_schedules(p_limit bigint DEFAULT 1000)
    RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET awa_shard.lane_lock_wait = ordered
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_served_since timestamptz := awa._maintenance_served_since();
    v_tick timestamptz;
    v_latest timestamptz;
    v_job bigint;
    v_count integer := 0;
    v_ticks integer;
    v_enqueued_at timestamptz;
    v_error text;
    v_sqlstate text;
    v_detail text;
    v_priority smallint;
    v_queues text[] := '{}';
    v_names text[] := '{}';
    v_priorities smallint[] := '{}';
    d record;
    s record;
BEGIN
    PERFORM awa._require(p_limit IS NULL, 'p_limit');
    PERFORM awa._require_at_least(p_limit, 1, 'p_limit');
    PERFORM awa._require_read_committed('run_schedules');
    -- The schedules of this pass: up to p_limit due ones, oldest first, each locked now (one
    -- another transaction holds is passed over and does not count).
    FOR d IN SELECT due.queue, due.name FROM awa._due_schedules(v_now) due LOOP
        EXIT WHEN cardinality(v_names) >= p_limit;
        SELECT c.priority INTO v_priority
          FROM awa.cron_schedules c
         WHERE c.queue = d.queue AND c.name = d.name AND NOT c.paused AND c.next_run_at <= v_now
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        v_queues := v_queues || d.queue;
        v_names := v_names || d.name;
        v_priorities := v_priorities || v_priority;
    END LOOP;
    -- Then run in lane order (queue bytes, priority), the order batches and promotion lock
    -- lanes in, waiting for a lane only after every lane this transaction holds.
    FOR d IN SELECT u.queue, u.name FROM unnest(v_queues, v_names, v_priorities) AS u(queue, name, priority)
              ORDER BY u.queue COLLATE "C", u.priority, u.name COLLATE "C" LOOP
        -- Each schedule in a subtransaction of its own: one whose job cannot be enqueued is
        -- reported and stays due, and does not hold back the others of the pass.
        BEGIN
            SELECT c.name, c.cron, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts,
                   c.metadata, c.tags, c.next_run_at, coalesce(c.last_enqueued_at, c.created_at) AS last_news,
                   c.ticks_reset_at
              INTO s
              FROM awa.cron_schedules c
             WHERE c.queue = d.queue AND c.name = d.name;
            v_latest := awa._cron_latest(s.cron, s.timezone, s.next_run_at, v_now);
            -- Every due tick when the maintenance kept up: the last job (or the schedule's
            -- creation, or the resume or new ticks its next tick follows) less than 10 seconds
            -- ago, or the tick after the start of the database's last background pass.
            v_tick := CASE WHEN s.last_news > v_now - interval '10 seconds' OR s.next_run_at >= v_served_since
                                OR (s.ticks_reset_at > v_now - interval '10 seconds' AND s.next_run_at > s.ticks_reset_at)
                           THEN s.next_run_at ELSE v_latest END;
            v_ticks := 0;
            LOOP
                SELECT j.id INTO v_job
                  FROM awa.insert_job_compat(s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts, v_tick,
                                             s.metadata || jsonb_build_object('awa_schedule', s.name), s.tags) j;
                v_ticks := v_ticks + 1;
                EXIT WHEN v_tick >= v_latest;
                v_tick := CASE WHEN v_ticks < 600 THEN coalesce(awa._cron_next(s.cron, s.timezone, v_tick), v_latest)
                               ELSE v_latest END;
            END LOOP;
            v_enqueued_at := clock_timestamp();
            UPDATE awa.cron_schedules c
               SET next_run_at = awa._cron_next(s.cron, s.timezone, v_tick), last_run_at = v_tick,
                   last_enqueued_at = v_enqueued_at, last_job_id = v_job
             WHERE c.queue = s.queue AND c.name = s.name;
            v_count := v_count + v_ticks;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT, v_sqlstate = RETURNED_SQLSTATE, v_detail = PG_EXCEPTION_DETAIL;
            -- Its lane is locked and comes before one this pass holds: due still, for the next pass.
            CONTINUE WHEN v_sqlstate = '55P03' AND v_detail LIKE 'awa\_shard.lane\_lock\_wait is %';
            RAISE WARNING 'awa.run_schedules: schedule "%" of queue "%" was not run: % (SQLSTATE %)',
                d.name, d.queue, v_error, v_sqlstate
                USING HINT = 'Its tick stays due and the next pass tries again; fix the schedule (awa.schedule) or remove it (awa.unschedule).';
        END;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa.run_schedules(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION awa.run_schedules(bigint) TO awa_admin;
COMMENT ON FUNCTION awa.run_schedules(bigint) IS 'Enqueue the due ticks of the periodic jobs (after downtime only the latest of each); returns how many jobs. Role: awa_admin.';
