-- Scale-out on Citus (docs/scale-out.md): awa.citus_setup(), run on the coordinator.
-- Scale-out by queue on Citus (docs/scale-out.md). Run on the coordinator after
-- CREATE EXTENSION awa_shard (Citus cannot distribute inside an extension script) and again
-- after citus_add_node; each run does only what is not done yet. The per-queue tables are
-- distributed by queue, colocated with awa.queue_meta, so all rows of a queue live on one
-- worker; the install-wide singletons become reference tables; every worker-facing function
-- with a p_queue argument is distributed by it with force_delegation, so a call runs whole
-- on the queue's worker; forced generic plans become custom plans there (Citus routes a
-- statement by the value of its queue); each node's job and receipt ids are drawn from its
-- own range (group id << 48, as Citus does for sequences used on workers). A table that has a
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
        'job_unique_claims', 'key_attempts'];
    v_singletons constant text[] := ARRAY[
        'storage_transition_state', 'plane_settings', 'queue_ring_state', 'lease_ring_state',
        'claim_ring_state', 'queue_ring_slots', 'lease_ring_slots', 'claim_ring_slots',
        'retention_buckets', 'cron_schedules'];
    -- awa.rescue_progress (the rescue's watermark) stays node-local: each node rescues the
    -- attempts of its own queues.
    -- Calls with p_queue that are not routed by it: pure helpers (names and keys, no
    -- table) and schedules (install-wide, a reference table). A call that also has
    -- p_from_queue (move_queue, retry_from_dlq: p_queue is the destination) is routed by the
    -- queue the job is in.
    v_not_routed constant text[] := ARRAY['lane_sequence_name', 'lane_lock_key', 'schedule'];
    v_group integer;
    v_rel regclass;
    v_fn regprocedure;
    t text;
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

    -- 1. Per-queue tables, distributed by queue, colocated with the anchor.
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
END
$$;
REVOKE ALL ON FUNCTION awa.citus_setup() FROM PUBLIC;
COMMENT ON FUNCTION awa.citus_setup() IS 'On a Citus coordinator: distribute this install by queue (tables, worker-facing calls, id ranges); idempotent, re-run after citus_add_node. Raises without Citus.';
