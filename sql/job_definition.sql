-- One definition of a job: awa.job_template lists a job's attributes in the
-- order of AWA_JOB_COLUMNS (src/job_columns.hpp), and every table and type that holds
-- jobs carries every attribute under the same name and type. A new attribute added to the
-- template but not to one of them is listed by the second query.
SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = 'awa.job_template'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

-- The C++ definition (src/job_columns.hpp) and the template agree, name by name, type by
-- type, in order: any difference is listed (no row: they agree).
SELECT coalesce(c.attnum, t.attnum) AS attnum, c.name AS cpp_name, c.type AS cpp_type,
       t.attname AS sql_name, format_type(t.atttypid, t.atttypmod) AS sql_type
  FROM awa._job_columns() c
  FULL JOIN (SELECT * FROM pg_attribute WHERE attrelid = 'awa.job_template'::regclass AND attnum > 0
               AND NOT attisdropped) t ON t.attnum = c.attnum
 WHERE c.name IS DISTINCT FROM t.attname::text
    OR to_regtype(c.type) IS DISTINCT FROM t.atttypid
 ORDER BY 1;

-- Missing or differently typed attributes (awa.job_row and awa.jobs name job_id "id").
SELECT rel::regclass AS relation, t.attname AS attribute, format_type(t.atttypid, t.atttypmod) AS template_type,
       format_type(c.atttypid, c.atttypmod) AS relation_type
  FROM unnest(ARRAY['awa.ready_entries', 'awa.done_entries', 'awa.deferred_jobs', 'awa.dlq_entries',
                    'awa.taken_attempt', 'awa.job_row', 'awa.jobs']::regclass[]) AS rel
 CROSS JOIN pg_attribute t
  LEFT JOIN pg_attribute c
    ON c.attrelid = rel AND NOT c.attisdropped
   AND c.attname = CASE WHEN t.attname = 'job_id' AND rel IN ('awa.job_row'::regclass, 'awa.jobs'::regclass)
                        THEN 'id' ELSE t.attname END
 WHERE t.attrelid = 'awa.job_template'::regclass AND t.attnum > 0 AND NOT t.attisdropped
   AND (c.attname IS NULL OR (c.atttypid, c.atttypmod) <> (t.atttypid, t.atttypmod))
 ORDER BY 1, 2;

-- A job keeps every attribute through its moves: enqueue (C++), retry, dead letter, DLQ
-- retry and cancel (SQL, through the template).
SELECT id AS job_id FROM awa.insert_job_compat('jobdef_kind', 'jobdef_q', '{"a": 1}', p_priority => 3,
    p_max_attempts => 2, p_metadata => '{"m": true}', p_tags => ARRAY['t1', 't2'], p_unique_key => '\x0102',
    p_unique_states => B'11111111', p_ordering_key => '\x09') \gset
SELECT job_id = :job_id AS claimed, attempt FROM awa.claim_ready_runtime('jobdef_q', 1, 0, 0) \gset
SELECT awa.retry_job_after(:job_id, 1, '0 seconds');
SELECT awa.promote_due(10);
SELECT job_id = :job_id AS claimed, run_lease FROM awa.claim_ready_runtime('jobdef_q', 1, 0, 0);
SELECT awa.fail_job_to_dlq(:job_id, 2, 'boom', 'test');
SELECT awa.retry_from_dlq(:job_id, p_run_at => clock_timestamp() + interval '1 hour');
SELECT awa.cancel_job(:job_id);
SELECT id = :job_id AS same_id, kind, queue, args, state, priority, attempt, run_lease, max_attempts,
       metadata, tags, jsonb_array_length(errors) AS errors, unique_key, unique_states, ordering_key
  FROM awa.jobs WHERE id = :job_id;
