-- limits: the numbers the SQL side states (table CHECKs and defaults of the released
-- scripts, plpgsql checks) agree with the C++ limits of src/limits.hpp, read through
-- awa._limit(name). Each row probes one bound on one side: accepted at the limit, refused
-- one past it. The unique-state mask is read the same way by C++ (enqueue) and SQL
-- (awa.job_state_in_bitmask). Everything runs in one transaction that is rolled back.
\set VERBOSITY terse
\i sql/sqlstate_of.psql
BEGIN;
CREATE TEMP TABLE lim AS
    SELECT awa._limit('max_queue_chars') AS q, awa._limit('max_enqueue_shards') AS s,
           awa._limit('min_priority') AS pmin, awa._limit('max_priority') AS pmax,
           awa._limit('max_attempts') AS att, awa._limit('default_priority') AS dprio,
           awa._limit('default_max_attempts') AS datt, awa._limit('unique_mask_bits') AS bits;
-- Bounds: the statement with %s replaced by `at` is accepted, by `past` refused with `code`.
CREATE FUNCTION pg_temp.bound(p_sql text, p_at bigint, p_past bigint, p_code text) RETURNS boolean LANGUAGE sql AS $$
    SELECT pg_temp.sqlstate_of(format(p_sql, p_at)) = 'no error'
       AND pg_temp.sqlstate_of(format(p_sql, p_past)) LIKE p_code || ' %'
$$;
SELECT b.side, pg_temp.bound(b.stmt, b.at, b.past, b.code) AS agrees
  FROM lim, LATERAL (VALUES
    -- Queue names: 1..max_queue_chars characters.
    (1, 'queue_meta CHECK queue length', 'INSERT INTO awa.queue_meta (queue) VALUES (repeat(''q'', %s))', q, q + 1, '23514'),
    (2, 'awa._check_queue', 'SELECT awa._check_queue(repeat(''q'', %s), ''p'')', q, q + 1, '23514'),
    (3, 'C++ queue argument (shard_for_enqueue)', 'SELECT awa.shard_for_enqueue(repeat(''q'', %s), 1)', q, q + 1, '23514'),
    -- Widths: 1..max_enqueue_shards; shard numbers 0..max_enqueue_shards - 1.
    (4, 'queue_meta CHECK enqueue_shards', 'INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (''lim_'' || %1$s, %1$s)', s, s + 1, '23514'),
    (5, 'awa.set_enqueue_shards', 'SELECT awa.set_enqueue_shards(''lim_u'', %s)', s, s + 1, '22023'),
    (6, 'awa.create_queue', 'SELECT awa.create_queue(''lim_v'', %s)', s, s + 1, '22023'),
    (7, 'C++ shard count (shard_for_ordering_key)', 'SELECT awa.shard_for_ordering_key(''k''::bytea, %s)', s, s + 1, '22023'),
    (8, 'C++ shard number (reserve_enqueue_seq peek)', 'SELECT awa.reserve_enqueue_seq(''lim_x'', 1, %s, 0)', s - 1, s, '22023'),
    -- Priorities: min_priority..max_priority.
    (9, 'awa._check_priority, lowest', 'SELECT awa._check_priority(%s, ''p'')', pmin, pmin - 1, '23514'),
    (10, 'awa._check_priority, highest', 'SELECT awa._check_priority(%s, ''p'')', pmax, pmax + 1, '23514'),
    (11, 'C++ priority (shard_for_enqueue), lowest', 'SELECT awa.shard_for_enqueue(''lim_y'', %s)', pmin, pmin - 1, '23514'),
    (12, 'C++ priority (shard_for_enqueue), highest', 'SELECT awa.shard_for_enqueue(''lim_y'', %s)', pmax, pmax + 1, '23514'),
    -- max_attempts: 1..max_attempts.
    (13, 'C++ max_attempts (insert_job_compat)', 'SELECT awa.insert_job_compat(''k'', ''lim_z'', p_max_attempts => %s)', att, att + 1, '23514')
  ) AS b(n, side, stmt, at, past, code)
 ORDER BY b.n;

-- Defaults and widths: the signature of insert_job_compat and the columns (released
-- scripts), what C++ gives a job whose caller passed NULL, the mask columns.
SELECT 'insert_job_compat DEFAULTs' AS sql_side,
       pg_get_function_arguments('awa.insert_job_compat'::regproc)
           LIKE format('%%p_priority bigint DEFAULT %s, p_max_attempts bigint DEFAULT %s,%%', dprio, datt) AS agrees
  FROM lim
UNION ALL
SELECT 'max_attempts column DEFAULTs',
       (SELECT array_agg(DISTINCT pg_get_expr(d.adbin, d.adrelid)) FROM pg_attrdef d
          JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE a.attname = 'max_attempts'
           AND d.adrelid IN ('awa.ready_entries'::regclass, 'awa.deferred_jobs'::regclass, 'awa.dlq_entries'::regclass))
       = ARRAY[datt::text]
  FROM lim
UNION ALL
SELECT 'max_attempts fits the smallint columns', att <= 32767 FROM lim
UNION ALL
SELECT 'C++ defaults for NULL priority and max_attempts',
       (SELECT j.priority = dprio AND j.max_attempts = datt
          FROM awa.insert_job_compat('k', 'lim_d', p_priority => NULL, p_max_attempts => NULL) j)
  FROM lim
UNION ALL
SELECT 'unique_states columns are bit(unique_mask_bits) and hold every state',
       format_type(a.atttypid, a.atttypmod) = format('bit(%s)', bits)
       AND cardinality(enum_range(NULL::awa.job_state)) <= bits
  FROM lim, pg_attribute a WHERE a.attrelid = 'awa.ready_entries'::regclass AND a.attname = 'unique_states';

-- C++ takes a unique claim at enqueue exactly when awa.job_state_in_bitmask holds the
-- job's first state, for a mask with each single bit set.
CREATE TEMP TABLE lim_masks AS
SELECT bit, first_state, mask, j.id
  FROM generate_series(0, 7) bit,
       LATERAL (SELECT (repeat('0', bit) || '1' || repeat('0', 7 - bit))::bit(8) AS mask) mk,
       unnest(ARRAY['available', 'scheduled']) first_state,
       LATERAL awa.insert_job_compat('k', 'lim_mask', p_state => first_state::awa.job_state,
                                     p_run_at => CASE first_state WHEN 'scheduled' THEN now() + interval '1 hour' END,
                                     p_unique_key => convert_to(first_state || bit, 'UTF8'), p_unique_states => mask) j;
SELECT bit, first_state, awa.job_state_in_bitmask(mask, first_state::awa.job_state) AS in_mask,
       EXISTS (SELECT 1 FROM awa.job_unique_claims u WHERE u.job_id = m.id) AS claimed
  FROM lim_masks m ORDER BY bit, first_state;
ROLLBACK;
