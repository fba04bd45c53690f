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
-- Accepted at the limit (`at`), refused past it with the SQLSTATE `code` (`past`).
CREATE FUNCTION pg_temp.bound(p_at text, p_past text, p_code text) RETURNS boolean LANGUAGE sql AS $$
    SELECT pg_temp.sqlstate_of(p_at) = 'no error' AND pg_temp.sqlstate_of(p_past) LIKE p_code || ' %'
$$;

-- Queue names: 1..max_queue_chars characters.
SELECT 'queue_meta CHECK queue length' AS sql_side,
       pg_temp.bound(format('INSERT INTO awa.queue_meta (queue) VALUES (%L)', repeat('q', q)),
                     format('INSERT INTO awa.queue_meta (queue) VALUES (%L)', repeat('r', q + 1)), '23514') AS agrees
  FROM lim
UNION ALL
SELECT 'awa._check_queue',
       pg_temp.bound(format('SELECT awa._check_queue(%L, %L)', repeat('q', q), 'p'),
                     format('SELECT awa._check_queue(%L, %L)', repeat('q', q + 1), 'p'), '23514')
  FROM lim
UNION ALL
SELECT 'C++ queue argument (shard_for_enqueue)',
       pg_temp.bound(format('SELECT awa.shard_for_enqueue(%L, 1)', repeat('q', q)),
                     format('SELECT awa.shard_for_enqueue(%L, 1)', repeat('q', q + 1)), '23514')
  FROM lim
-- Widths: 1..max_enqueue_shards; shard numbers 0..max_enqueue_shards - 1.
UNION ALL
SELECT 'queue_meta CHECK enqueue_shards',
       pg_temp.bound(format('INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (%L, %s)', 'lim_s', s),
                     format('INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (%L, %s)', 'lim_t', s + 1), '23514')
  FROM lim
UNION ALL
SELECT 'awa.set_enqueue_shards',
       pg_temp.bound(format('SELECT awa.set_enqueue_shards(%L, %s)', 'lim_u', s),
                     format('SELECT awa.set_enqueue_shards(%L, %s)', 'lim_u', s + 1), '22023')
  FROM lim
UNION ALL
SELECT 'awa.create_queue',
       pg_temp.bound(format('SELECT awa.create_queue(%L, %s)', 'lim_v', s),
                     format('SELECT awa.create_queue(%L, %s)', 'lim_w', s + 1), '22023')
  FROM lim
UNION ALL
SELECT 'C++ shard count (shard_for_ordering_key)',
       pg_temp.bound(format('SELECT awa.shard_for_ordering_key(%L::bytea, %s)', 'k', s),
                     format('SELECT awa.shard_for_ordering_key(%L::bytea, %s)', 'k', s + 1), '22023')
  FROM lim
UNION ALL
SELECT 'C++ shard number (reserve_enqueue_seq peek)',
       pg_temp.bound(format('SELECT awa.reserve_enqueue_seq(%L, 1, %s, 0)', 'lim_x', s - 1),
                     format('SELECT awa.reserve_enqueue_seq(%L, 1, %s, 0)', 'lim_x', s), '22023')
  FROM lim
-- Priorities: min_priority..max_priority.
UNION ALL
SELECT 'awa._check_priority',
       pg_temp.bound(format('SELECT awa._check_priority(%s, %L), awa._check_priority(%s, %L)', pmin, 'p', pmax, 'p'),
                     format('SELECT awa._check_priority(%s, %L)', pmax + 1, 'p'), '23514')
       AND pg_temp.sqlstate_of(format('SELECT awa._check_priority(%s, %L)', pmin - 1, 'p')) LIKE '23514 %'
  FROM lim
UNION ALL
SELECT 'C++ priority (shard_for_enqueue)',
       pg_temp.bound(format('SELECT awa.shard_for_enqueue(%L, %s), awa.shard_for_enqueue(%L, %s)', 'lim_y', pmin, 'lim_y', pmax),
                     format('SELECT awa.shard_for_enqueue(%L, %s)', 'lim_y', pmax + 1), '23514')
  FROM lim
-- max_attempts: 1..max_attempts, stored in smallint columns.
UNION ALL
SELECT 'C++ max_attempts (insert_job_compat), smallint columns hold it',
       pg_temp.bound(format('SELECT awa.insert_job_compat(%L, %L, p_max_attempts => %s)', 'k', 'lim_z', att),
                     format('SELECT awa.insert_job_compat(%L, %L, p_max_attempts => %s)', 'k', 'lim_z', att + 1), '23514')
       AND att <= 32767
  FROM lim
-- Defaults: the signature of insert_job_compat, the columns, and what C++ gives a job
-- whose caller passed NULL.
UNION ALL
SELECT 'insert_job_compat DEFAULTs',
       pg_get_function_arguments('awa.insert_job_compat'::regproc)
           LIKE format('%%p_priority integer DEFAULT %s, p_max_attempts integer DEFAULT %s,%%', dprio, datt)
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
SELECT 'C++ defaults for NULL priority and max_attempts',
       (SELECT j.priority = dprio AND j.max_attempts = datt
          FROM awa.insert_job_compat('k', 'lim_d', p_priority => NULL, p_max_attempts => NULL) j)
  FROM lim
-- Unique-state masks: one bit per job_state, as wide as the columns.
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
