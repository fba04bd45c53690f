-- Scale-out on Citus (docs/scale-out.md): awa.citus_setup(), run on the coordinator.
-- Scale-out by queue on Citus (docs/scale-out.md). Run on the coordinator after
-- CREATE EXTENSION awa_shard (Citus cannot distribute inside an extension script) and again
-- after citus_add_node; each run does only what is not done yet. The per-queue tables are
-- distributed by queue, colocated with awa.queue_meta, so all rows of a queue live on one
-- worker; the install-wide singletons become reference tables; every worker-facing function
-- with a p_queue argument is distributed by it with force_delegation, so a call runs whole
-- on the queue's worker; forced generic plans become custom plans there (Citus routes a
-- statement by the value of its queue); each node's job and receipt ids are drawn from its
-- own range (group id << 48, as Citus does for sequences used on workers); pg_monitor is
-- granted the tables behind awa.jobs and awa.lane_cursors (below). A table that has a
-- unique key without queue is left node-local (a NOTICE names it). Without Citus it raises
-- and changes nothing.
CREATE FUNCTION awa.citus_setup() RETURNS TABLE (step text, object text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_anchor constant regclass := 'awa.queue_meta'::regclass;
    v_per_queue constant text[] := ARRAY[
        'queue_meta', 'queue_enqueue_heads', 'queue_claim_heads', 'claim_marks',
        'ready_entries', 'done_entries', 'completion_batches', 'leases', 'claim_batches',
        'lease_claim_closures', 'attempt_state', 'deferred_jobs', 'dlq_entries',
        'job_unique_claims', 'key_attempts', 'cron_schedules'];
    v_singletons constant text[] := ARRAY[
        'storage_transition_state', 'plane_settings', 'queue_ring_state', 'lease_ring_state',
        'claim_ring_state', 'queue_ring_slots', 'lease_ring_slots', 'claim_ring_slots',
        'retention_buckets'];
    -- awa.rescue_progress (the rescue's watermark) stays node-local: each node rescues the
    -- attempts of its own queues.
    -- Calls with p_queue that are not routed by it: pure helpers (names and keys, no
    -- table) and awa.schedule (run on the coordinator, whose lock keeps schedule names
    -- unique). A call that also has p_from_queue (move_queue, retry_from_dlq: p_queue is the
    -- destination) is routed by the queue the job is in.
    v_not_routed constant text[] := ARRAY['lane_sequence_name', 'lane_lock_key', 'schedule'];
    v_group integer;
    v_rel regclass;
    v_fn regprocedure;
    t text;
    v_granted integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'awa.citus_setup: Citus is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Load citus first in shared_preload_libraries, CREATE EXTENSION citus on every node and add the workers (citus_add_node), then call awa.citus_setup() on the coordinator. Without Citus nothing needs setting up.';
    END IF;
    EXECUTE 'SELECT groupid FROM pg_dist_local_group' INTO v_group;
    IF v_group <> 0 THEN
        RAISE EXCEPTION 'awa.citus_setup: this node is a Citus worker (group %)', v_group
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call awa.citus_setup() on the coordinator.';
    END IF;
    -- Triggers of distributed tables (queue_meta, queue_claim_heads) need this setting.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);

    -- 0. pg_monitor reads awa.jobs and awa.lane_cursors on one server through the views, with
    --    their owner's privileges. On a cluster Citus checks the reads of the shards against
    --    the caller's own, so the tables behind those views (and every partition of them) are
    --    granted to pg_monitor before they are distributed: their shards are made with the
    --    grant (a GRANT after that goes to every shard, one statement each).
    v_granted := 0;
    FOR v_rel IN
        WITH RECURSIVE reads(oid) AS (
            SELECT unnest(ARRAY['awa.jobs'::regclass, 'awa.lane_cursors'::regclass])::oid
            UNION
            SELECT d.refobjid FROM reads
              JOIN pg_rewrite w ON w.ev_class = reads.oid
              JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                              AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> reads.oid)
        SELECT DISTINCT t.relid::regclass
          FROM reads r
          JOIN pg_class c ON c.oid = r.oid AND c.relkind IN ('r', 'p')
         CROSS JOIN LATERAL (SELECT r.oid UNION SELECT p.relid FROM pg_partition_tree(r.oid) p) t(relid)
         WHERE NOT has_table_privilege('pg_monitor', t.relid, 'SELECT')
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO pg_monitor', v_rel);
        v_granted := v_granted + 1;
    END LOOP;
    IF v_granted > 0 THEN
        step := 'granted to pg_monitor'; object := v_granted || ' tables read by awa.jobs and awa.lane_cursors';
        RETURN NEXT;
    END IF;

    -- 1. Per-queue tables, distributed by queue, colocated with the anchor. A schedule's
    --    name is unique on one server through an index without queue, which cannot be
    --    distributed; on the cluster awa.schedule keeps it unique under its lock.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'awa.cron_schedules'::regclass)
       AND to_regclass('awa.cron_schedules_name') IS NOT NULL THEN
        DROP INDEX awa.cron_schedules_name;
        -- (The workers' copies, made by CREATE EXTENSION there, alike.)
        PERFORM run_command_on_workers(
            'SET citus.enable_ddl_propagation = off; DROP INDEX IF EXISTS awa.cron_schedules_name');
        step := 'schedule names unique by lock'; object := 'awa.cron_schedules'; RETURN NEXT;
    END IF;
    FOREACH t IN ARRAY v_per_queue LOOP
        v_rel := format('awa.%I', t)::regclass;
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_rel);
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = v_rel AND attname = 'queue' AND NOT attisdropped)
           OR EXISTS (SELECT 1 FROM pg_index i
                       WHERE i.indrelid = v_rel AND i.indisunique
                         AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                                          WHERE a.attrelid = v_rel AND a.attname = 'queue'
                                            AND a.attnum = ANY (i.indkey::int2[]))) THEN
            RAISE NOTICE 'awa.citus_setup: % has a unique key without queue; left node-local', v_rel;
            step := 'left node-local'; object := v_rel::text; RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_rel = v_anchor THEN
            PERFORM create_distributed_table(v_rel, 'queue', colocate_with := 'none');
        ELSE
            PERFORM create_distributed_table(v_rel, 'queue', colocate_with := v_anchor::text);
        END IF;
        step := 'distributed by queue'; object := v_rel::text; RETURN NEXT;
    END LOOP;

    -- 2. Install-wide singletons: a copy on every node.
    FOREACH t IN ARRAY v_singletons LOOP
        v_rel := format('awa.%I', t)::regclass;
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = v_rel);
        PERFORM create_reference_table(v_rel);
        step := 'reference table'; object := v_rel::text; RETURN NEXT;
    END LOOP;

    -- 3. Worker-facing calls: custom plans instead of forced generic ones on every node, then
    --    distributed by p_queue with force_delegation.
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'awa_shard'
         WHERE p.pronamespace = 'awa'::regnamespace AND p.prokind = 'f'
           AND 'force_generic_plan' = ANY (SELECT split_part(c, '=', 2) FROM unnest(p.proconfig) c)
    LOOP
        PERFORM run_command_on_all_nodes(format(
            'SET citus.enable_ddl_propagation = off; ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', v_fn));
        step := 'custom plans'; object := v_fn::text; RETURN NEXT;
    END LOOP;
    FOR v_fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'awa_shard'
         WHERE p.pronamespace = 'awa'::regnamespace AND p.prokind = 'f'
           AND p.proname NOT LIKE '\_%' AND p.proname <> ALL (v_not_routed)
           AND 'p_queue' = ANY (p.proargnames)
           AND NOT EXISTS (SELECT 1 FROM pg_dist_object o
                            WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
                              AND o.distribution_argument_index IS NOT NULL)
         ORDER BY p.oid
    LOOP
        PERFORM create_distributed_function(v_fn,
                    CASE WHEN (SELECT 'p_from_queue' = ANY (proargnames) FROM pg_proc WHERE oid = v_fn)
                         THEN 'p_from_queue' ELSE 'p_queue' END,
                    colocate_with := v_anchor::text, force_delegation := true);
        step := 'delegated by p_queue'; object := v_fn::text; RETURN NEXT;
    END LOOP;

    -- 4. Ids unique across nodes: node group g draws job and receipt ids from
    --    [g << 48, (g + 1) << 48) (group 0, the coordinator, keeps its values).
    PERFORM run_command_on_all_nodes($cmd$
DO $do$
DECLARE
    g bigint := (SELECT groupid FROM pg_dist_local_group);
    s text;
BEGIN
    IF g > 0 THEN
        FOREACH s IN ARRAY ARRAY['awa.job_id_seq', 'awa.receipt_id_seq'] LOOP
            IF (SELECT max_value FROM pg_sequences WHERE format('%I.%I', schemaname, sequencename) = s) <> ((g + 1) << 48) - 1 THEN
                EXECUTE format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s RESTART', s, g << 48, ((g + 1) << 48) - 1, g << 48);
            END IF;
        END LOOP;
    END IF;
END
$do$
$cmd$);
    step := 'id ranges'; object := 'awa.job_id_seq, awa.receipt_id_seq'; RETURN NEXT;

    -- 5. awa.lane_cursors in a form Citus routes by queue, on every node: the latest mark of
    --    each lane from a DISTINCT ON subquery joined by queue, where the one-server view
    --    looks it up per lane in a lateral subquery with LIMIT (the same rows: the head's
    --    cursor, or the lane's latest mark when further). Citus sends that lateral subquery
    --    to every shard of the colocation group even for one queue; this form makes a read
    --    of one queue's cursors (queue_counts_exact, queue_depth, awa.jobs of one queue, the
    --    per-queue maintenance) a statement on that queue's shards alone.
    IF EXISTS (SELECT 1 FROM run_command_on_all_nodes(
                   $cmd$SELECT pg_get_viewdef('awa.lane_cursors'::regclass) LIKE '%LATERAL%'$cmd$) r
                WHERE r.result <> 'f') THEN
        PERFORM run_command_on_all_nodes($cmd$
SET citus.enable_ddl_propagation = off;
CREATE OR REPLACE VIEW awa.lane_cursors AS
    SELECT h.queue, h.priority, h.enqueue_shard, greatest(h.claim_seq, m.claim_seq) AS claim_seq,
           CASE WHEN m.claim_seq > h.claim_seq THEN m.head_run_at ELSE h.head_run_at END AS head_run_at
      FROM awa.queue_claim_heads h
      LEFT JOIN (SELECT DISTINCT ON (k.queue, k.priority, k.enqueue_shard)
                        k.queue, k.priority, k.enqueue_shard, k.claim_seq, k.head_run_at
                   FROM awa.claim_marks k
                  ORDER BY k.queue, k.priority, k.enqueue_shard, k.claim_seq DESC) m
        ON m.queue = h.queue AND m.priority = h.priority AND m.enqueue_shard = h.enqueue_shard
$cmd$);
        step := 'lane cursors routed by queue'; object := 'awa.lane_cursors'; RETURN NEXT;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa.citus_setup() FROM PUBLIC;
COMMENT ON FUNCTION awa.citus_setup() IS 'On a Citus coordinator: distribute this install by queue (tables, worker-facing calls, id ranges); idempotent, re-run after citus_add_node. Raises without Citus.';

-- Maintenance on a Citus cluster (docs/scale-out.md, "Maintenance"). Once awa.citus_setup()
-- has distributed the install, each node runs maintenance for the queues whose shards it
-- holds, one queue at a time with queue = $n on every statement (Citus runs them on the local
-- shards); the shared rings (reference tables) are rotated, pruned and expired by the
-- coordinator alone, whose "slot empty" tests read every worker. Without Citus, or before
-- awa.citus_setup(), awa._citus_group() is NULL and maintenance is the one-server pass.

-- This node's Citus group (0: the coordinator) once the install is distributed; NULL
-- without Citus or before awa.citus_setup() (C, src/citus.cpp: one cached test without Citus).
CREATE FUNCTION awa._citus_group() RETURNS integer
    AS 'MODULE_PATHNAME', 'awa_citus_group'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._citus_group() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_group() IS 'Internal: this node''s Citus group once the install is distributed by awa.citus_setup(), NULL otherwise.';

-- The refusal of an undelegated call, for the PL/pgSQL calls that take p_queue (C,
-- src/citus.cpp, as the C++ entry points check it): under Citus, once distributed, 0A000
-- with a hint unless p_queue is given and its shard is on this node; nothing without Citus.
CREATE FUNCTION awa._require_queue_local(p_queue text) RETURNS void
    AS 'MODULE_PATHNAME', 'awa_require_queue_local'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._require_queue_local(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_queue_local(text) IS 'Internal: under Citus, refuse (0A000) a call whose queue is not given or lives on another node.';

-- A call that takes a job out of queue p_from (its routing argument) and puts it into p_to
-- (move_queue, retry_from_dlq): under Citus, p_from must be given and local (the call was
-- delegated to its worker), and p_to must be p_from, since Citus lets a call delegated by a
-- queue touch that queue alone (0A000 otherwise, before anything changes). Nothing on one node.
CREATE FUNCTION awa._require_queue_kept(p_from text, p_to text, p_function text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM awa._require_queue_local(p_from);
    IF p_to IS DISTINCT FROM p_from AND awa._citus_group() IS NOT NULL THEN
        RAISE EXCEPTION 'on a Citus cluster %() cannot put a job into another queue', p_function
            USING ERRCODE = '0A000',
                  DETAIL = format('The call runs on the worker of queue %L (p_from_queue), where Citus lets it touch that queue alone.', p_from),
                  HINT = 'Keep the job in its queue (p_queue => p_from_queue: a new priority or run time), or cancel it and enqueue it into the other queue.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._require_queue_kept(text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._require_queue_kept(text, text, text) IS 'Internal: under Citus, refuse (0A000) a call that would move a job out of its queue or was not delegated by it.';

-- A statement over one queue's rows rewritten for this node's shards: the views of awa it
-- names expanded and every distributed table named by its shard holding the queue, when the
-- install is distributed and that shard is on this node; NULL otherwise (C, src/citus.cpp).
-- The PL/pgSQL reads of one queue (get_job, list_jobs) EXECUTE it, so that on the queue's
-- worker they read its shards only, where Citus would send a view's statement to every shard.
CREATE FUNCTION awa._queue_shard_sql(p_sql text, p_queue text) RETURNS text
    AS 'MODULE_PATHNAME', 'awa_queue_shard_sql'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._queue_shard_sql(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._queue_shard_sql(text, text) IS 'Internal: a statement over one queue rewritten for this node''s Citus shards, NULL when they are not here.';

-- The names of the shards of the given distributed tables placed on this node, in shard
-- order; NULL when none is here. Read from Citus' catalog by EXECUTE (it exists only under
-- Citus); the caller has checked awa._citus_group().
CREATE FUNCTION awa._citus_local_shard_names(p_tables regclass[]) RETURNS text[]
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    EXECUTE $q$
        SELECT array_agg(pg_catalog.shard_name(s.logicalrelid, s.shardid) ORDER BY s.shardid)
          FROM pg_catalog.pg_dist_shard s
          JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
          JOIN pg_catalog.pg_dist_local_group g ON g.groupid = p.groupid
         WHERE s.logicalrelid = ANY ($1)$q$
      INTO v_shards USING p_tables;
    RETURN v_shards;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_names(regclass[]) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_names(regclass[]) IS 'Internal: the shards of the given distributed tables placed on this node (Citus).';

-- The queues whose shards this node holds: every known queue (settings, lanes, deferred or
-- dead-lettered jobs) in the shards of awa.queue_meta, awa.queue_enqueue_heads,
-- awa.deferred_jobs and awa.dlq_entries placed here, read from those shards themselves (one index probe per queue: an idle backlog costs
-- nothing). Nothing on a node without shards (the coordinator) or without Citus.
CREATE FUNCTION awa._citus_local_queues() RETURNS SETOF text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards text[];
BEGIN
    IF awa._citus_group() IS NULL THEN
        RETURN;
    END IF;
    v_shards := awa._citus_local_shard_names(ARRAY['awa.queue_meta', 'awa.queue_enqueue_heads',
                                                   'awa.deferred_jobs', 'awa.dlq_entries']::regclass[]);
    IF v_shards IS NULL THEN
        RETURN;
    END IF;
    -- Each shard's distinct queues by skipping along its index on queue.
    RETURN QUERY EXECUTE
        'SELECT DISTINCT q FROM (' ||
        (SELECT string_agg(format(
            'SELECT q FROM (WITH RECURSIVE t(q) AS ('
            '  SELECT min(x.queue) FROM %1$s x '
            '  UNION ALL SELECT (SELECT min(x.queue) FROM %1$s x WHERE x.queue > t.q) FROM t WHERE t.q IS NOT NULL) '
            'SELECT t.q FROM t WHERE t.q IS NOT NULL) s', sh), ' UNION ALL ')
           FROM unnest(v_shards) sh) ||
        ') u ORDER BY q';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_queues() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_queues() IS 'Internal: the queues whose shards this Citus node holds (none without Citus).';

-- Both rescues of one queue (awa._rescue on a Citus cluster, once per local queue): the
-- same search, order and outcome as awa._rescue, with queue = p_queue on every statement so
-- that Citus runs it on the queue's shards. The deadline search reads the queue's open
-- receipts from p_from on: this node's watermark (awa.rescue_progress, node-local), which
-- awa._rescue keeps over all of the node's queues as it does on one server.
CREATE FUNCTION awa._rescue_queue(p_queue text, p_stale interval, p_deadlines boolean, p_limit integer,
                                  p_from timestamptz,
                                  OUT deadline_rescued integer, OUT heartbeat_rescued integer)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz := clock_timestamp() - p_stale;
    r record;
    t awa.taken_attempt;
BEGIN
    deadline_rescued := 0;
    heartbeat_rescued := 0;
    FOR r IN
        WITH deadlines AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
             WHERE p_deadlines AND c.queue = p_queue AND c.deadline_at >= p_from AND c.deadline_at < v_now
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE p_deadlines AND l.queue = p_queue AND l.deadline_at IS NOT NULL AND l.deadline_at < v_now
               AND l.state = 'running'
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit),
        stale AS (
            SELECT c.receipt_base, c.job_id, c.run_lease FROM awa._open_receipts c
              LEFT JOIN awa.attempt_state a
                ON a.job_id = c.job_id AND a.run_lease = c.run_lease AND a.queue = c.queue AND a.queue = p_queue
             WHERE v_cutoff IS NOT NULL AND c.queue = p_queue AND c.claimed_at < v_cutoff
               AND coalesce(a.heartbeat_at, c.claimed_at) < v_cutoff
            UNION ALL
            SELECT NULL, l.job_id, l.run_lease FROM awa.leases l
             WHERE v_cutoff IS NOT NULL AND l.queue = p_queue AND l.state = 'running' AND l.heartbeat_at < v_cutoff
            ORDER BY 1 NULLS LAST, 2, 3
            LIMIT p_limit)
        SELECT DISTINCT ON (receipt_base, job_id, run_lease) job_id, run_lease, due_deadline
          FROM (SELECT receipt_base, job_id, run_lease, true AS due_deadline FROM deadlines
                UNION ALL
                SELECT receipt_base, job_id, run_lease, false FROM stale) due
         ORDER BY receipt_base NULLS LAST, job_id, run_lease, due_deadline DESC
    LOOP
        t := awa._take_attempt_unless_busy(r.job_id, r.run_lease,
                                           CASE WHEN r.due_deadline THEN 'deadline_expired' ELSE 'rescued' END,
                                           p_queue);
        CONTINUE WHEN t.job_id IS NULL;
        IF r.due_deadline THEN
            PERFORM awa._rescue_taken(t, 'hard deadline exceeded');
            deadline_rescued := deadline_rescued + 1;
        ELSE
            PERFORM awa._rescue_taken(t, 'heartbeat stale: worker presumed dead');
            heartbeat_rescued := heartbeat_rescued + 1;
        END IF;
    END LOOP;
    IF v_cutoff IS NOT NULL THEN
        -- Stale heartbeat rows of attempts no longer open (as awa._rescue), by key.
        DELETE FROM awa.attempt_state a
         WHERE a.queue = p_queue AND a.heartbeat_at < v_cutoff
           AND (a.job_id, a.run_lease) IN (
             SELECT s.job_id, s.run_lease FROM awa.attempt_state s
              WHERE s.queue = p_queue AND s.heartbeat_at < v_cutoff
                AND NOT EXISTS (SELECT 1 FROM awa._open_receipts c
                                 WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease AND c.queue = p_queue)
                AND NOT EXISTS (SELECT 1 FROM awa.leases l
                                 WHERE l.job_id = s.job_id AND l.run_lease = s.run_lease AND l.queue = p_queue
                                   AND l.state IN ('running', 'waiting_external'))
              LIMIT p_limit);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION awa._rescue_queue(text, interval, boolean, integer, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION awa._rescue_queue(text, interval, boolean, integer, timestamptz) IS 'Internal: both rescues of one queue, every statement in that queue (maintenance on a Citus cluster).';

-- Priority aging of one queue (awa.age_waiting_priorities with p_queue on a Citus cluster):
-- the same lanes, order, prefix rule, limit and re-enqueue, with queue = p_queue on every
-- statement so that Citus runs it on the queue's shards, and no whole row of a table in a
-- statement (Citus would hand the shard's row type to awa._ready_as_deferred).
CREATE FUNCTION awa._age_waiting_queue(p_queue text, p_cutoff timestamptz, p_limit bigint) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_priorities smallint[];
    v_shards smallint[];
    v_claims bigint[];
    v_rows awa.deferred_jobs[];
BEGIN
    -- The lanes with a waiting row old enough, then their heads locked (SKIP LOCKED: lanes
    -- being claimed right now are left for the next run); two statements, since Citus does
    -- not route a locking statement that reads awa.lane_cursors. A lane found but no longer
    -- old enough once locked contributes nothing below (its prefix is empty).
    SELECT array_agg(DISTINCT k.priority), array_agg(DISTINCT k.enqueue_shard)
      INTO v_priorities, v_shards
      FROM awa.lane_cursors k
      JOIN awa.ready_entries r
        ON r.queue = k.queue AND r.priority = k.priority
       AND r.enqueue_shard = k.enqueue_shard AND r.lane_seq >= k.claim_seq
     WHERE k.queue = p_queue AND r.queue = p_queue AND k.priority > 1 AND r.run_at <= p_cutoff;
    IF v_priorities IS NULL THEN
        RETURN 0;
    END IF;
    SELECT array_agg(h.priority), array_agg(h.enqueue_shard)
      INTO v_priorities, v_shards
      FROM (SELECT c.priority, c.enqueue_shard FROM awa.queue_claim_heads c
             WHERE c.queue = p_queue AND c.priority = ANY (v_priorities) AND c.enqueue_shard = ANY (v_shards)
             ORDER BY c.priority, c.enqueue_shard
               FOR UPDATE SKIP LOCKED) h;
    IF v_priorities IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM awa._heads_locked(p_queue);
    -- The locked lanes' cursors on the latest committed state: no claim can move them now.
    SELECT array_agg(awa._lane_cursor(p_queue, l.priority, l.enqueue_shard) ORDER BY l.ord) INTO v_claims
      FROM unnest(v_priorities, v_shards) WITH ORDINALITY AS l(priority, enqueue_shard, ord);
    WITH waiting AS (
        SELECT r.ready_slot, r.priority, r.enqueue_shard, r.lane_seq,
               bool_and(r.run_at <= p_cutoff) OVER (PARTITION BY r.priority, r.enqueue_shard
                                                    ORDER BY r.lane_seq) AS in_prefix
          FROM unnest(v_priorities, v_shards, v_claims) AS h(priority, enqueue_shard, claim_seq)
          JOIN awa.ready_entries r
            ON r.queue = p_queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq),
    victims AS (
        SELECT w.* FROM waiting w WHERE w.in_prefix
         ORDER BY w.priority, w.enqueue_shard, w.lane_seq
         LIMIT p_limit),
    gone AS (
        DELETE FROM awa.ready_entries r USING victims v
         WHERE r.queue = p_queue AND r.ready_slot = v.ready_slot AND r.priority = v.priority
           AND r.enqueue_shard = v.enqueue_shard AND r.lane_seq = v.lane_seq
        RETURNING r.*)
    SELECT array_agg(awa._ready_as_deferred(g::awa.ready_entries, p_queue, (g.priority - 1)::smallint,
                         jsonb_build_object('_awa_original_priority', g.priority))
                     ORDER BY g.priority, g.enqueue_shard, g.lane_seq)
      INTO v_rows FROM gone g;
    IF v_rows IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa._enqueue_ready(v_rows);
END
$$;
REVOKE ALL ON FUNCTION awa._age_waiting_queue(text, timestamptz, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._age_waiting_queue(text, timestamptz, bigint) IS 'Internal: priority aging of one queue, every statement in that queue (awa.age_waiting_priorities on a Citus cluster).';

-- The lanes of one local queue whose sequence is missing on this node (a Citus cluster: the
-- queue's shards were moved here, or the split shard its sequences belonged to was dropped)
-- get it again, past the lane's rows (awa._restore_lane_sequence: a lane whose lock a producer
-- holds is left to that producer, a lane dropped meanwhile stays dropped), so a claim takes
-- their pending jobs before any enqueue has made the sequence again. Returns how many.
CREATE FUNCTION awa._citus_restore_lane_sequences(p_queue text) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
    v_count integer := 0;
BEGIN
    FOR l IN SELECT e.priority, e.enqueue_shard FROM awa.queue_enqueue_heads e
              WHERE e.queue = p_queue AND to_regclass('awa.' || quote_ident(e.seq_name)) IS NULL
              ORDER BY e.priority, e.enqueue_shard LOOP
        IF awa._restore_lane_sequence(p_queue, l.priority, l.enqueue_shard) THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_restore_lane_sequences(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_restore_lane_sequences(text) IS 'Internal: make again the lane sequences of a local queue missing on this Citus node (after a shard move or split).';

-- awa.fold_claim_marks for one queue (on a Citus cluster, once per local queue): the same two
-- steps with queue = p_queue on every statement. Returns the number of heads moved.
CREATE FUNCTION awa._fold_claim_marks_queue(p_queue text, p_limit bigint) RETURNS integer
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    DELETE FROM awa.claim_marks k
     WHERE k.queue = p_queue
       AND (k.priority, k.enqueue_shard, k.claim_seq) IN (
         SELECT m.priority, m.enqueue_shard, m.claim_seq FROM awa.claim_marks m
           JOIN awa.queue_claim_heads h
             ON h.queue = m.queue AND h.priority = m.priority AND h.enqueue_shard = m.enqueue_shard
          WHERE m.queue = p_queue AND h.queue = p_queue AND m.claim_seq < h.claim_seq
          LIMIT p_limit);
    WITH lanes AS (
        SELECT h.queue, h.priority, h.enqueue_shard, m.claim_seq, m.head_run_at
          FROM awa.queue_claim_heads h
         CROSS JOIN LATERAL (
             SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k
              WHERE k.queue = p_queue AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard
              ORDER BY k.claim_seq DESC LIMIT 1) m
         WHERE h.queue = p_queue AND m.claim_seq > h.claim_seq
         ORDER BY h.priority, h.enqueue_shard
           FOR UPDATE OF h SKIP LOCKED),
    moved AS (
        UPDATE awa.queue_claim_heads h SET claim_seq = l.claim_seq, head_run_at = l.head_run_at
          FROM lanes l
         WHERE h.queue = p_queue AND l.queue = p_queue AND h.priority = l.priority
           AND h.enqueue_shard = l.enqueue_shard AND h.claim_seq < l.claim_seq
        RETURNING 1)
    SELECT count(*) INTO v_count FROM moved;
    IF v_count > 0 THEN
        PERFORM awa._heads_locked(p_queue);
    END IF;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION awa._fold_claim_marks_queue(text, bigint) FROM PUBLIC;
COMMENT ON FUNCTION awa._fold_claim_marks_queue(text, bigint) IS 'Internal: awa.fold_claim_marks for one queue (maintenance on a Citus cluster).';

-- A statement once for every group of colocated shards on this node (C, src/citus.cpp): its
-- views of awa expanded and every distributed table named by its shard of the group, for
-- maintenance of this node's own shards that must not leave the node. An empty array where
-- no shard is placed; NULL without Citus or before awa.citus_setup().
CREATE FUNCTION awa._local_shard_sqls(p_sql text) RETURNS text[]
    AS 'MODULE_PATHNAME', 'awa_local_shard_sqls'
    LANGUAGE C VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION awa._local_shard_sqls(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._local_shard_sqls(text) IS 'Internal: a statement rewritten for each group of colocated Citus shards on this node.';

-- Whether this node's shards of a ring slot still hold something a reader needs (a Citus
-- worker's part of the slot's prune), the first test that finds something: a queue slot an
-- open attempt on one of its ready rows ('skipped_running'), a pending row -- at or past its
-- lane's claim cursor, or in a lane without a claim head ('skipped_pending') -- or a finished
-- job its queue keeps past the slot: a failed job (kept by default) or one within its queue's
-- retention ('skipped_retained'); a claim slot an open receipt ('skipped_open_receipts'); a
-- lease slot a lease ('skipped_open_leases'). NULL when none. Each test is one statement a
-- group of colocated shards here (awa._local_shard_sqls), stopping at the first that finds;
-- open receipts are asked of the slot's claim batches one by one (awa._open_claim_batches, as
-- on one server: through awa._open_receipts the planner may pair every ready row of a slot
-- with every claim batch of its lane).
-- Each statement is prepared once a session (named by ring, slot, test and shard group; made
-- again if its text changed, as after a split) and run from then on: a worker's free tests
-- the slot twice, the second time holding the slot's locks, which planning every shard group
-- again would prolong.
CREATE FUNCTION awa._citus_local_slot_busy(p_ring text, p_slot integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tests text[];
    v_sqls text[];
    v_sql text;
    v_name text;
    v_prepared text;
    v_found boolean;
BEGIN
    -- Pairs of (reason, statement), in the order tested.
    v_tests := CASE p_ring
        WHEN 'queue' THEN ARRAY[
            'skipped_running', format('SELECT 1 FROM awa._open_claim_batches b WHERE b.ready_slot = %s', p_slot),
            'skipped_running', format('SELECT 1 FROM awa.leases l WHERE l.ready_slot = %s', p_slot),
            'skipped_pending', format(
                'SELECT 1 FROM awa.ready_entries r LEFT JOIN awa.lane_cursors h'
                '  ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard'
                ' WHERE r.ready_slot = %s AND r.lane_seq >= coalesce(h.claim_seq, 0)', p_slot),
            -- What awa._retainable keeps: a failed job of a queue without a failed retention,
            -- or a finished job whose retention has not run out.
            'skipped_retained', format(
                'SELECT 1 FROM awa.done_entries d LEFT JOIN awa.queue_meta m ON m.queue = d.queue'
                ' WHERE d.ready_slot = %s'
                '   AND ((d.state = ''failed'' AND m.failed_retention IS NULL)'
                '        OR d.finalized_at + CASE WHEN d.state = ''completed'' THEN m.completed_retention'
                '                                 ELSE m.failed_retention END > clock_timestamp())', p_slot),
            'skipped_retained', format(
                'SELECT 1 FROM awa.completion_batches b JOIN awa.queue_meta m ON m.queue = b.queue'
                ' WHERE b.ready_slot = %s AND b.finalized_at + m.completed_retention > clock_timestamp()', p_slot)]
        WHEN 'claim' THEN ARRAY[
            'skipped_open_receipts', format('SELECT 1 FROM awa._open_claim_batches b WHERE b.claim_slot = %s', p_slot)]
        ELSE ARRAY[
            'skipped_open_leases', format('SELECT 1 FROM awa.leases l WHERE l.lease_slot = %s', p_slot)] END;
    FOR i IN 1 .. cardinality(v_tests) / 2 LOOP
        v_sqls := coalesce(awa._local_shard_sqls(v_tests[2 * i]), '{}');
        FOR g IN 1 .. cardinality(v_sqls) LOOP
            v_name := format('awa_slot_busy_%s_%s_%s_%s', p_ring, p_slot, i, g);
            v_sql := format('PREPARE %I AS SELECT EXISTS (%s)', v_name, v_sqls[g]);
            SELECT p.statement INTO v_prepared FROM pg_catalog.pg_prepared_statements p WHERE p.name = v_name;
            IF v_prepared IS DISTINCT FROM v_sql THEN
                IF v_prepared IS NOT NULL THEN
                    EXECUTE format('DEALLOCATE %I', v_name);
                END IF;
                EXECUTE v_sql;
            END IF;
            EXECUTE format('EXECUTE %I', v_name) INTO v_found;
            IF v_found THEN
                RETURN v_tests[2 * i - 1];
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_slot_busy(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_slot_busy(text, integer) IS 'Internal: what this Citus node''s shards of a ring slot still hold that a reader needs; NULL when nothing.';

-- Lock every claim head of a queue, skipping those another transaction holds (a statement
-- routed to the queue's worker); whether all were locked (awa._citus_move_queue_slot).
CREATE FUNCTION awa._citus_lock_queue_heads(p_queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_locked bigint;
BEGIN
    PERFORM 1 FROM awa.queue_claim_heads h WHERE h.queue = p_queue
     ORDER BY h.priority, h.enqueue_shard FOR UPDATE SKIP LOCKED;
    GET DIAGNOSTICS v_locked = ROW_COUNT;
    PERFORM awa._heads_locked(p_queue);
    RETURN v_locked = (SELECT count(*) FROM awa.queue_claim_heads h WHERE h.queue = p_queue);
END
$$;
REVOKE ALL ON FUNCTION awa._citus_lock_queue_heads(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_lock_queue_heads(text) IS 'Internal: lock a queue''s claim heads, skipping held ones; whether all were locked (the queue ring''s move on a Citus cluster).';

-- The queue ring's move on a Citus cluster (awa._citus_prune_queue_slot, on the
-- coordinator): the pending rows of a sealed slot (at or past their lane's claim cursor, or
-- in a lane without a claim head) go into the current slot, queue by queue, with their lane
-- identity and lane_seq (only ready_slot and ready_generation change). Every statement names
-- one queue, so Citus runs it on that queue's worker alone; the moves commit with the
-- caller's transaction, on every worker at once. The slot's partitions are share-locked on
-- every node first (no writer adds to the slot; in short tries, as on one server, AWA01
-- 'skipped_locked' when they do not come), then each queue's claim heads, SKIP LOCKED: a
-- queue one of whose heads a claim holds is left for a later prune. (Once a connection to a
-- worker has run a command of the transaction, Citus turns a lock refused on it into an
-- error that aborts the whole transaction, so no lock after the first is asked NOWAIT.)
-- Returns the rows moved. Finished jobs kept past the slot are not moved (docs/scale-out.md,
-- "Maintenance").
CREATE FUNCTION awa._citus_move_queue_slot(p_slot integer, p_to_slot integer, p_to_generation bigint,
                                           p_budget_ms integer)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_queues text[];
    v_locked text[] := '{}';
    v_queue text;
    v_moved bigint := 0;
    v_rows bigint;
    v_cols text;
    v_select text;
    v_pending text;
    v_cursor_priorities smallint[];
    v_cursor_shards smallint[];
    v_cursor_seqs bigint[];
    v_from bigint;
    l record;
BEGIN
    IF NOT awa._lock_ring_partitions(ARRAY['ready_entries_' || p_slot, 'done_entries_' || p_slot,
                                           'completion_batches_' || p_slot], p_budget_ms, true) THEN
        RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
    END IF;
    SELECT array_agg(x.queue ORDER BY x.queue) INTO v_queues
      FROM (SELECT DISTINCT r.queue FROM awa.ready_entries r WHERE r.ready_slot = p_slot) x;
    -- A claim can take rows of the slot only under one of these heads: the queues whose
    -- heads are all held move.
    FOREACH v_queue IN ARRAY coalesce(v_queues, '{}') LOOP
        IF awa._citus_lock_queue_heads(v_queue) THEN
            v_locked := v_locked || v_queue;
        END IF;
    END LOOP;
    -- Whole rows are not named (Citus gives them its shards' row types): every column is,
    -- with the new slot and generation.
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
           string_agg(CASE a.attname WHEN 'ready_slot' THEN p_to_slot::text
                                     WHEN 'ready_generation' THEN p_to_generation::text
                                     ELSE 'r.' || quote_ident(a.attname) END, ', ' ORDER BY a.attnum)
      INTO v_cols, v_select
      FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = 'awa.ready_entries'::regclass AND a.attnum > 0 AND NOT a.attisdropped;
    FOREACH v_queue IN ARRAY v_locked LOOP
        -- Literals: every statement is routed by its queue. The heads are held, so the
        -- cursors, the copy and the delete see the same rows. The queue's cursors are read
        -- once and each lane of the slot is moved from its own (a lane without a claim head
        -- from its first row): a cursor read inside the statement was read again for every
        -- row of the slot.
        EXECUTE format('SELECT array_agg(c.priority), array_agg(c.enqueue_shard), array_agg(c.claim_seq)'
                       '  FROM awa.lane_cursors c WHERE c.queue = %L', v_queue)
           INTO v_cursor_priorities, v_cursor_shards, v_cursor_seqs;
        FOR l IN EXECUTE format('SELECT DISTINCT r.priority, r.enqueue_shard FROM awa.ready_entries r'
                                ' WHERE r.queue = %L AND r.ready_slot = %s', v_queue, p_slot) LOOP
            v_from := coalesce((SELECT c.claim_seq
                                  FROM unnest(v_cursor_priorities, v_cursor_shards, v_cursor_seqs)
                                       AS c(priority, enqueue_shard, claim_seq)
                                 WHERE c.priority = l.priority AND c.enqueue_shard = l.enqueue_shard), 0);
            v_pending := format('r.queue = %L AND r.priority = %s AND r.enqueue_shard = %s AND r.ready_slot = %s'
                                ' AND r.lane_seq >= %s', v_queue, l.priority, l.enqueue_shard, p_slot, v_from);
            EXECUTE format('INSERT INTO awa.ready_entries (%s) SELECT %s FROM awa.ready_entries r WHERE %s',
                           v_cols, v_select, v_pending);
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            v_moved := v_moved + v_rows;
            EXECUTE format('DELETE FROM awa.ready_entries r WHERE %s', v_pending);
        END LOOP;
    END LOOP;
    RETURN v_moved;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_move_queue_slot(integer, integer, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_move_queue_slot(integer, integer, bigint, integer) IS 'Internal: move a sealed queue slot''s pending rows into the current slot, queue by queue, each queue''s statements on its Citus worker.';

-- Whether every snapshot of this worker sees the moves of a queue slot (awa._citus_prune_queue_slot):
-- p_horizons holds, per Citus group, the next transaction id its node was to assign once the
-- move had committed (awa._next_xid, read in a later prune); a snapshot that does not see the
-- move is older than that and holds back this node's horizon. True on a node without one.
CREATE FUNCTION awa._citus_move_seen(p_horizons jsonb) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next text := p_horizons ->> awa._citus_group()::text;
BEGIN
    RETURN v_next IS NULL OR awa._seen_ended_by_all((v_next::numeric - 1)::text::xid8);
END
$$;
REVOKE ALL ON FUNCTION awa._citus_move_seen(jsonb) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_move_seen(jsonb) IS 'Internal: whether every snapshot of this Citus node sees a queue slot''s move, given the horizons read after it.';

-- A worker's part of freeing a sealed slot of a ring on a Citus cluster (awa._citus_free_ring_slot
-- runs it on every worker, each in a transaction of its own): this node's shards of the slot
-- are truncated once nothing in them is needed, with the locks of one server taken here alone
-- (Citus would send a LOCK or TRUNCATE of a distributed table to every node) and in short
-- tries: SHARE ROW EXCLUSIVE on the slot's partitions and their shards here keeps this node's
-- writers out, the test is made again, the unique claims of the queue slot's finished jobs
-- are dropped (a claim row another transaction holds is skipped), and ACCESS EXCLUSIVE is
-- taken for the truncate alone. The closure is noted (awa.ring_slot_closures): until the
-- coordinator frees the slot, a writer here that read it as current before it was sealed
-- finds it closed and reads the ring again (src/ring.cpp). Returns freed (also when this node
-- had freed it already, or holds no shard), what still holds the slot here
-- (awa._citus_local_slot_busy), skipped_locked, skipped_not_sealed when this node still sees
-- the slot current (or p_generation is a free slot's), or skipped_generation when the slot no
-- longer has p_generation.
CREATE FUNCTION awa._citus_free_local_ring_slot(p_ring text, p_slot integer, p_generation bigint,
                                                p_budget_ms integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_parents constant text[] := CASE p_ring
        WHEN 'queue' THEN ARRAY['ready_entries_', 'done_entries_', 'completion_batches_']
        WHEN 'claim' THEN ARRAY['claim_batches_', 'lease_claim_closures_']
        ELSE ARRAY['leases_'] END;
    v_partitions text[];
    v_shards text[];
    v_generation bigint;
    v_reason text;
    v_sql text;
    v_shared_at timestamptz;
    v_current boolean;
BEGIN
    PERFORM awa._check_arg(p_ring IN ('queue', 'claim', 'lease'), 'p_ring must be queue, claim or lease');
    EXECUTE format('SELECT s.generation, s.slot = r.current_slot FROM awa.%I s, awa.%I r WHERE s.slot = $1',
                   p_ring || '_ring_slots', p_ring || '_ring_state')
      INTO v_generation, v_current USING p_slot;
    -- This node's own view of the ring: a rotation it has not applied yet (its part of the
    -- two-phase commit still to come) leaves the slot current here, where producers write.
    IF v_current OR p_generation < 0 THEN
        RETURN 'skipped_not_sealed';
    END IF;
    IF v_generation IS DISTINCT FROM p_generation THEN
        RETURN 'skipped_generation';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.ring_slot_closures c
                WHERE c.ring = p_ring AND c.slot = p_slot AND c.generation = p_generation) THEN
        RETURN 'freed';
    END IF;
    -- Without a lock first: a slot still in use costs none.
    v_reason := awa._citus_local_slot_busy(p_ring, p_slot);
    IF v_reason IS NOT NULL THEN
        RETURN v_reason;
    END IF;
    v_partitions := ARRAY(SELECT 'awa.' || quote_ident(t || p_slot) FROM unnest(v_parents) t);
    v_shards := coalesce(awa._citus_local_shard_names(v_partitions::regclass[]), '{}');
    -- This node's locks alone, and its shards named: for this transaction only.
    PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
    PERFORM set_config('citus.enable_manual_changes_to_shards', 'on', true);
    BEGIN
        IF NOT awa._lock_relations_briefly(v_partitions || v_shards, p_budget_ms, true) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
        v_shared_at := clock_timestamp();
        v_reason := awa._citus_local_slot_busy(p_ring, p_slot);
        IF v_reason IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = v_reason;
        END IF;
        IF p_ring = 'queue' THEN
            FOREACH v_sql IN ARRAY awa._local_shard_sqls(format(
                'DELETE FROM awa.job_unique_claims u WHERE u.ctid = ANY (ARRAY('
                '  SELECT c.ctid FROM awa.job_unique_claims c'
                '   WHERE (c.queue, c.job_id) IN (SELECT d.queue, d.job_id FROM awa.done_entries d WHERE d.ready_slot = %1$s'
                '                                 UNION ALL'
                '                                 SELECT b.queue, b.job_id FROM awa._batch_completions b WHERE b.ready_slot = %1$s)'
                '     FOR UPDATE SKIP LOCKED))', p_slot)) LOOP
                EXECUTE v_sql;
            END LOOP;
        END IF;
        -- The share lock is held for less than half of deadlock_timeout in all: a writer that
        -- read the slot in its transaction waits for it, and had that wait outlasted
        -- deadlock_timeout while this one waited for the writer's read lock, the deadlock
        -- check would cancel the writer (seen under traffic with cancel_job).
        IF NOT awa._lock_relations_briefly(
                v_partitions || v_shards,
                greatest(0, least(p_budget_ms,
                                  extract(epoch FROM current_setting('deadlock_timeout')::interval) * 500
                                  - extract(epoch FROM clock_timestamp() - v_shared_at) * 1000))::integer,
                false) THEN
            RAISE EXCEPTION USING ERRCODE = 'AWA01', MESSAGE = 'skipped_locked';
        END IF;
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    IF cardinality(v_shards) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(v_shards, ', ');
    END IF;
    DELETE FROM awa.ring_slot_closures c WHERE c.ring = p_ring AND c.slot = p_slot;
    INSERT INTO awa.ring_slot_closures (ring, slot, generation) VALUES (p_ring, p_slot, p_generation);
    RETURN 'freed';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_free_local_ring_slot(text, integer, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_free_local_ring_slot(text, integer, bigint, integer) IS 'Internal: a Citus worker''s part of freeing a sealed ring slot: truncate this node''s shards of it under local locks once nothing there is needed.';

-- Free a sealed slot of a ring on a Citus cluster (the coordinator's prunes): every worker
-- frees its own shards of the slot, each in a transaction of its own
-- (awa._citus_free_local_ring_slot over run_command_on_workers, whose connections are not
-- this transaction's), and once all have, the slot is marked free here. So no lock is ever
-- asked over a connection of this transaction, where Citus would turn a refusal into an
-- error that aborts it ("failure on connection marked as essential"); this transaction must
-- not have read the slot's shards before (the worker's locks would wait for its own).
-- Returns pruned, skipped_not_sealed (the slot is the current one or free: nothing is
-- asked), or the first reason a worker gave, in this order: skipped_worker_error (a worker
-- failed or is down: no move is tried either), skipped_not_sealed (a worker still sees the
-- slot current: its rotation has not reached it), skipped_running, skipped_open_receipts,
-- skipped_open_leases, skipped_pending, skipped_retained, skipped_locked, skipped_generation.
CREATE FUNCTION awa._citus_free_ring_slot(p_ring text, p_slot integer, p_budget_ms integer) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_generation bigint;
    v_reasons text[];
    v_failures text;
BEGIN
    EXECUTE format('SELECT s.generation FROM awa.%I s, awa.%I r WHERE s.slot = $1 AND s.slot <> r.current_slot',
                   p_ring || '_ring_slots', p_ring || '_ring_state')
      INTO v_generation USING p_slot;
    IF v_generation IS NULL OR v_generation < 0 THEN
        RETURN 'skipped_not_sealed';
    END IF;
    EXECUTE $q$SELECT array_agg(CASE WHEN w.success THEN w.result ELSE 'skipped_worker_error' END),
                      string_agg(w.nodename || ':' || w.nodeport || ': ' || w.result, '; ') FILTER (WHERE NOT w.success)
                 FROM pg_catalog.run_command_on_workers($1) w$q$
      INTO v_reasons, v_failures
      USING format('SELECT awa._citus_free_local_ring_slot(%L, %s, %s, %s)', p_ring, p_slot, v_generation, p_budget_ms);
    IF v_failures IS NOT NULL THEN
        RAISE WARNING 'awa_shard: freeing slot % of the % ring failed on a worker: %', p_slot, p_ring, v_failures;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_reasons) r WHERE r <> 'freed') THEN
        RETURN (SELECT r FROM unnest(v_reasons) r WHERE r <> 'freed'
                 ORDER BY array_position(ARRAY['skipped_worker_error', 'skipped_not_sealed', 'skipped_running',
                                               'skipped_open_receipts', 'skipped_open_leases', 'skipped_pending',
                                               'skipped_retained', 'skipped_locked', 'skipped_generation'], r) NULLS LAST
                 LIMIT 1);
    END IF;
    EXECUTE format('UPDATE awa.%I SET generation = -1%s WHERE slot = $1 AND generation = $2',
                   p_ring || '_ring_slots', CASE WHEN p_ring = 'queue' THEN ', moved_xid = NULL, moved_horizons = NULL' ELSE '' END)
      USING p_slot, v_generation;
    PERFORM awa._ring_slot_freed(p_ring, p_slot);
    RETURN 'pruned';
END
$$;
REVOKE ALL ON FUNCTION awa._citus_free_ring_slot(text, integer, integer) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_free_ring_slot(text, integer, integer) IS 'Internal: free a sealed ring slot on a Citus cluster: each worker truncates its own shards of it in a transaction of its own, then the slot is marked free.';

-- The queue ring's prune on a Citus cluster (awa.prune_queue_ring on the coordinator;
-- docs/scale-out.md, "Maintenance"), in steps as on one server:
--   1. the workers free their shards of the slot (awa._citus_free_ring_slot) once nothing
--      in them is needed; the slot is freed once all have ('pruned');
--   2. a slot whose pending rows keep it ('skipped_pending') has them moved into the current
--      slot, on their workers, in this transaction (awa._citus_move_queue_slot), and is
--      marked moved ('moved'); with p_amortised only once the ring is full (the slot after
--      the current one is live), so a backlog is copied at most once a turn of the ring;
--      finished jobs kept past the slot are not moved, so they keep it ('skipped_retained');
--   3. a later call reads each worker's next transaction id ('skipped_snapshots'): every
--      xid the move used on a worker is below it;
--   4. once every worker's snapshots have passed it (awa._citus_move_seen, on every worker),
--      step 1 again (rows written there since by a producer that read the ring before the
--      slot was sealed are moved again).
-- Returns pruned / moved / skipped_snapshots / skipped_running / skipped_pending /
-- skipped_retained / skipped_locked / skipped_not_sealed / skipped_generation /
-- skipped_worker_error.
CREATE FUNCTION awa._citus_prune_queue_slot(p_slot integer, p_budget_ms integer, p_to_slot integer,
                                            p_to_generation bigint, p_amortised boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
    v_moved_by xid8;
    v_horizons jsonb;
    v_moved bigint;
BEGIN
    SELECT s.moved_xid, s.moved_horizons INTO v_moved_by, v_horizons
      FROM awa.queue_ring_slots s WHERE s.slot = p_slot;
    IF v_moved_by IS NOT NULL THEN
        IF v_horizons IS NULL THEN
            EXECUTE $q$SELECT jsonb_object_agg(split_part(w.result, ':', 1), split_part(w.result, ':', 2))
                         FILTER (WHERE w.success), bool_and(w.success)
                         FROM pg_catalog.run_command_on_workers(
                                  'SELECT awa._citus_group() || '':'' || awa._next_xid()') w$q$
              INTO v_horizons, v_reason;
            IF v_reason::boolean THEN
                UPDATE awa.queue_ring_slots SET moved_horizons = v_horizons WHERE slot = p_slot;
            END IF;
            RETURN 'skipped_snapshots';
        END IF;
        EXECUTE 'SELECT bool_and(w.success AND w.result = ''t'') FROM pg_catalog.run_command_on_workers($1) w'
          INTO v_reason USING format('SELECT awa._citus_move_seen(%L)', v_horizons);
        IF NOT v_reason::boolean THEN
            RETURN 'skipped_snapshots';
        END IF;
    END IF;
    -- First, before this transaction reads anything of the slot on a worker.
    v_reason := awa._citus_free_ring_slot('queue', p_slot, p_budget_ms);
    IF v_reason <> 'skipped_pending'
       OR (p_amortised
           AND (SELECT s.generation FROM awa.queue_ring_slots s
                 WHERE s.slot = (p_to_slot + 1) % (SELECT st.slot_count FROM awa.queue_ring_state st)) < 0) THEN
        RETURN v_reason;
    END IF;
    BEGIN
        v_moved := awa._citus_move_queue_slot(p_slot, p_to_slot, p_to_generation, p_budget_ms);
    EXCEPTION WHEN SQLSTATE 'AWA01' THEN
        GET STACKED DIAGNOSTICS v_reason = MESSAGE_TEXT;
        RETURN v_reason;
    END;
    IF v_moved > 0 THEN
        -- A snapshot on a worker that does not see this move still reads the rows here.
        UPDATE awa.queue_ring_slots SET moved_xid = pg_catalog.pg_current_xact_id(), moved_horizons = NULL
         WHERE slot = p_slot;
        RETURN 'moved';
    END IF;
    -- Nothing moved (claims held the heads of every queue with pending rows): a later call.
    RETURN v_reason;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_prune_queue_slot(integer, integer, integer, bigint, boolean) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_prune_queue_slot(integer, integer, integer, bigint, boolean) IS 'Internal: the queue ring''s prune on a Citus cluster: free the oldest sealed slot on every worker, or move its pending rows forward and free it once no snapshot of a worker needs them.';

-- Cross-queue views on a Citus cluster (docs/scale-out.md, "Views and counts"). The rows of
-- awa.queues for the queues whose shards this node holds (awa._citus_local_queues), as a
-- JSON array: each row is read with queue = $n on every statement, so Citus answers it from
-- the local shards; the lane sequences (the cheap depth) exist only here.
CREATE FUNCTION awa._citus_local_queue_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
    v_row jsonb;
    c record;
    v_depth bigint;
    v_oldest interval;
BEGIN
    -- One statement per function call: a statement over one queue's shards that also calls a
    -- function reading them would be sent to the shard whole, and that nested read refused.
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        SELECT * INTO c FROM awa.queue_counts_exact(v_queue);
        v_depth := awa._queue_depth(v_queue);
        SELECT CASE WHEN min(r.run_at) IS NOT NULL THEN greatest(now() - min(r.run_at), interval '0') END
          INTO v_oldest
          FROM awa.lane_cursors h
          JOIN awa.ready_entries r
            ON r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= h.claim_seq
         WHERE h.queue = v_queue AND r.queue = v_queue;
        SELECT to_jsonb(x) INTO v_row FROM (
            SELECT v_queue AS queue, coalesce(m.enqueue_shards, 1::smallint) AS enqueue_shards,
                   coalesce(m.paused, false) AS paused,
                   coalesce(m.dlq_enabled, (SELECT s.dlq_enabled_by_default FROM awa.plane_settings s)) AS dlq_enabled,
                   v_depth AS depth,
                   c.available, c.scheduled, c.retryable, c.running, c.completed, c.failed, c.cancelled, c.dlq,
                   v_oldest AS oldest_waiting_age,
                   m.rate_per_second, m.rate_burst, m.concurrency_limit, m.completed_retention, m.failed_retention,
                   m.key_concurrency_limit, m.key_rate_per_second, m.key_rate_burst
              FROM (SELECT) one
              LEFT JOIN awa.queue_meta m ON m.queue = v_queue) x;
        v_rows := v_rows || jsonb_build_array(v_row);
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_queue_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_queue_rows() IS 'Internal: the awa.queues rows of the queues whose shards this Citus node holds, as a JSON array.';

-- The awa.shard_lag rows of one queue: awa._shard_lag's statement with queue = p_queue on
-- every table, so that Citus runs it on the queue's shards alone (the next value of the lane
-- sequence is read in the target list: Citus does not push down a lateral subquery without
-- FROM next to awa.lane_cursors).
CREATE FUNCTION awa._shard_lag_of(p_queue text)
    RETURNS TABLE (queue text, priority smallint, enqueue_shard smallint, next_seq bigint,
                   claim_seq bigint, lag bigint, waiting bigint, oldest_run_at timestamptz,
                   enqueue_shards smallint, draining boolean)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT x.queue, x.priority, x.enqueue_shard, x.next_seq, x.claim_seq, x.next_seq - x.claim_seq,
           x.waiting, x.oldest_run_at, x.enqueue_shards, x.enqueue_shard >= x.enqueue_shards
      FROM (SELECT e.queue, e.priority, e.enqueue_shard, awa._lane_next_seq(e.seq_name) AS next_seq,
                   h.claim_seq, w.waiting, w.oldest_run_at, coalesce(m.enqueue_shards, 1::smallint) AS enqueue_shards
              FROM awa.queue_enqueue_heads e
              JOIN awa.lane_cursors h
                ON h.queue = e.queue AND h.priority = e.priority AND h.enqueue_shard = e.enqueue_shard
               AND h.queue = p_queue
              LEFT JOIN awa.queue_meta m ON m.queue = e.queue AND m.queue = p_queue
             CROSS JOIN LATERAL (
                SELECT count(*) AS waiting, min(r.run_at) AS oldest_run_at
                  FROM awa.ready_entries r
                 WHERE r.queue = e.queue AND r.priority = e.priority AND r.enqueue_shard = e.enqueue_shard
                   AND r.lane_seq >= h.claim_seq AND r.queue = p_queue) w
             WHERE e.queue = p_queue) x;
END
$$;
REVOKE ALL ON FUNCTION awa._shard_lag_of(text) FROM PUBLIC;
COMMENT ON FUNCTION awa._shard_lag_of(text) IS 'Internal: the awa.shard_lag rows of one queue (on a Citus worker, for awa._citus_local_shard_lag_rows).';

-- The awa.shard_lag rows of the queues whose shards this node holds, as a JSON array: each
-- queue's lanes read with queue = $n on every statement (awa._shard_lag_of), so Citus
-- answers them from the local shards; the lane sequences exist only here.
CREATE FUNCTION awa._citus_local_shard_lag_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
BEGIN
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        v_rows := v_rows || coalesce((SELECT jsonb_agg(to_jsonb(l)) FROM awa._shard_lag_of(v_queue) l), '[]');
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_lag_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_lag_rows() IS 'Internal: the awa.shard_lag rows of the queues whose shards this Citus node holds, as a JSON array.';

-- The awa.shard_stats rows of this Citus node, as a JSON array: its shared-memory counters
-- (the delegated calls of its queues run here), or, without the preload, each of its
-- queues' counters derived from its own shards (awa._shard_stats_of; the lane sequences
-- exist only here).
CREATE FUNCTION awa._citus_local_shard_stats_rows() RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_queue text;
BEGIN
    IF awa._stats_preloaded() THEN
        RETURN coalesce((SELECT jsonb_agg(to_jsonb(s) || '{"source": "shared_memory"}') FROM awa._shard_stats() s), '[]');
    END IF;
    FOR v_queue IN SELECT q FROM awa._citus_local_queues() q LOOP
        v_rows := v_rows || coalesce((SELECT jsonb_agg(to_jsonb(s) || '{"since": null, "source": "tables"}')
                                        FROM awa._shard_stats_of(v_queue) s), '[]');
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_local_shard_stats_rows() FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_local_shard_stats_rows() IS 'Internal: the awa.shard_stats rows of this Citus node (its shared-memory counters, or its queues'' counters from its shards), as a JSON array.';

-- The rows of a cross-queue view on a Citus node, as one JSON array: on a worker, its own
-- queues' rows (p_local_rows, the name of a node-local function returning them); on the
-- coordinator, every worker's answer to that function, gathered with run_command_on_workers.
-- A worker that does not answer fails the view (58000, its error as the detail): a view that
-- silently left out a worker's queues would under-report them.
CREATE FUNCTION awa._citus_gathered_rows(p_view text, p_local_rows text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rows jsonb := '[]';
    v_node record;
BEGIN
    IF awa._citus_group() <> 0 THEN
        EXECUTE format('SELECT awa.%I()', p_local_rows) INTO v_rows;
        RETURN v_rows;
    END IF;
    FOR v_node IN EXECUTE 'SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers($1)'
                  USING format('SELECT awa.%I()', p_local_rows) LOOP
        IF NOT v_node.success THEN
            RAISE EXCEPTION '%: worker %:% did not answer', p_view, v_node.nodename, v_node.nodeport
                USING ERRCODE = '58000', DETAIL = v_node.result;
        END IF;
        v_rows := v_rows || v_node.result::jsonb;
    END LOOP;
    RETURN v_rows;
END
$$;
REVOKE ALL ON FUNCTION awa._citus_gathered_rows(text, text) FROM PUBLIC;
COMMENT ON FUNCTION awa._citus_gathered_rows(text, text) IS 'Internal: a cross-queue view''s rows on a Citus node (a worker''s own, or every worker''s on the coordinator), as a JSON array; 58000 when a worker does not answer.';
