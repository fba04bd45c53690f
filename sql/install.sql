-- install: the sharded plane's shapes, read from the catalog, and a clean
-- DROP EXTENSION / CREATE EXTENSION cycle in one session.
\set VERBOSITY terse
SET client_min_messages = warning;

-- pg_temp.err(sql): 'ok', or the SQLSTATE and message of the statement.
\set ECHO none
\i sql/err.psql
\set ECHO all

-- Key columns of a relation's primary key, in key order.
CREATE FUNCTION pg_temp.pk_columns(p_rel regclass) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(a.attname, ', ' ORDER BY k.ord)
      FROM pg_constraint c
      CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
     WHERE c.conrelid = p_rel AND c.contype = 'p'
$$;

-- 1. Every lane-keyed table has enqueue_shard in its primary key.
SELECT t AS relation, pg_temp.pk_columns(t::regclass) AS primary_key
  FROM unnest(ARRAY['awa.ready_entries', 'awa.done_entries', 'awa.leases',
                    'awa.queue_enqueue_heads', 'awa.queue_claim_heads',
                    'awa.deferred_jobs', 'awa.dlq_entries']) AS t
 ORDER BY t;

-- ... and so does every partition of them (16 ready + 16 done + the retained done partition + 8 lease partitions).
SELECT p.relname AS parent, count(*) AS partitions,
       count(*) FILTER (WHERE pg_temp.pk_columns(i.inhrelid) = pg_temp.pk_columns(p.oid)
                          AND pg_temp.pk_columns(i.inhrelid) LIKE '%enqueue_shard%') AS partitions_with_shard_pk
  FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
 WHERE p.oid IN ('awa.ready_entries'::regclass, 'awa.done_entries'::regclass, 'awa.leases'::regclass)
 GROUP BY p.relname ORDER BY p.relname;

-- Receipts carry the shard as a plain column; deferred and DLQ rows keep the key, not a shard.
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'enqueue_shard' AND NOT a.attisdropped) AS has_enqueue_shard,
       (SELECT format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE ' nullable' END
          FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'ordering_key' AND NOT a.attisdropped) AS ordering_key
  FROM pg_class c
 WHERE c.oid IN ('awa.claim_batches'::regclass, 'awa.deferred_jobs'::regclass, 'awa.dlq_entries'::regclass,
                 'awa.ready_entries'::regclass)
 ORDER BY c.relname;

-- 2. Every ready/done/lease partition has exactly one index leading with (queue, priority,
-- enqueue_shard, lane_seq): its primary key (a second one would cost every row an entry).
CREATE FUNCTION pg_temp.lane_indexes(p_rel oid, OUT lane_indexes bigint, OUT lane_keys bigint) AS $$
    SELECT count(*), count(*) FILTER (WHERE x.indisprimary)
      FROM pg_index x
     WHERE x.indrelid = p_rel
       AND (SELECT array_agg(a.attname ORDER BY k.ord)
              FROM unnest((x.indkey::int2[])[0:3]) WITH ORDINALITY AS k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum)
           = ARRAY['queue', 'priority', 'enqueue_shard', 'lane_seq']::name[]
$$ LANGUAGE sql;
SELECT p.relname AS parent, count(*) AS partitions,
       count(*) FILTER (WHERE l.lane_indexes = 1 AND l.lane_keys = 1) AS with_lane_key_only
  FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
 CROSS JOIN LATERAL pg_temp.lane_indexes(i.inhrelid) l
 WHERE p.oid IN ('awa.ready_entries'::regclass, 'awa.done_entries'::regclass, 'awa.leases'::regclass)
 GROUP BY p.relname ORDER BY p.relname;
-- Receipts are claim batches, looked up by block: every partition has no key and one more
-- index than its deadline index, leading with (queue, priority, enqueue_shard, lane_block).
SELECT count(*) AS receipt_partitions,
       count(*) FILTER (WHERE (SELECT count(*) FILTER (WHERE x.indisprimary) = 0 AND count(*) = 2
                                      AND count(*) FILTER (WHERE
                                          (SELECT array_agg(a.attname ORDER BY k.ord)
                                             FROM unnest((x.indkey::int2[])[0:3]) WITH ORDINALITY AS k(attnum, ord)
                                             JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum)
                                          = ARRAY['queue', 'priority', 'enqueue_shard', 'lane_block']::name[]) = 1
                                 FROM pg_index x
                                WHERE x.indrelid = i.inhrelid)) AS with_block_index
  FROM pg_inherits i WHERE i.inhparent = 'awa.claim_batches'::regclass;

-- 3. queue_meta.enqueue_shards is 1..64 (23514 outside), checked by the named constraint.
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'awa.queue_meta'::regclass AND conname = 'queue_meta_enqueue_shards_range';
SELECT w, pg_temp.err(format('INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (%L, %s)', 'install_w' || w, w))
  FROM unnest(ARRAY[0, 1, 64, 65, -1]) AS w ORDER BY w;
SELECT pg_temp.err($$UPDATE awa.queue_meta SET enqueue_shards = 65 WHERE queue = 'install_w64'$$) AS update_to_65;
SELECT queue, enqueue_shards FROM awa.queue_meta WHERE queue LIKE 'install_w%' ORDER BY queue;
DELETE FROM awa.queue_meta WHERE queue LIKE 'install_w%';

-- 4. DROP EXTENSION removes everything, including lane sequences created at run time.
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('install_q', 4);
SELECT cardinality(awa.insert_jobs('install_q', ARRAY['a', 'b'], p_ordering_keys => ARRAY['\x00'::bytea, '\x01'])) AS enqueued;
SELECT 1 AS one FROM awa.insert_job_compat('install_kind', 'install_q', p_priority => 3::smallint);
SELECT count(*) > 0 AS lane_sequences_exist FROM pg_class WHERE relname LIKE 'queue_enqueue_seq_%';

DROP EXTENSION awa_shard;

SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'awa'::regnamespace) AS relations,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'awa'::regnamespace) AS functions,
       (SELECT count(*) FROM pg_type WHERE typnamespace = 'awa'::regnamespace) AS types,
       (SELECT count(*) FROM pg_class WHERE relname LIKE 'queue_enqueue_seq_%') AS lane_sequences,
       (SELECT count(*) FROM pg_trigger WHERE tgname = 'queue_meta_changed') AS triggers,
       (SELECT count(*) FROM pg_extension WHERE extname = 'awa_shard') AS extensions;

-- 5. Recreated in the same session: the backend caches (lanes, widths, plans) must not
-- use the dropped objects; lanes and ids start over.
CREATE EXTENSION awa_shard;
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('install_q', 4);
SELECT id, enqueue_shard, lane_seq
  FROM awa.insert_job_compat('install_kind', 'install_q', p_priority => 1::smallint, p_ordering_key => '\x01');
SELECT awa.insert_jobs('install_q', ARRAY['a', 'b'], p_ordering_keys => ARRAY['\x00'::bytea, '\x01']) AS ids;
SELECT queue, priority, enqueue_shard, lane_seq FROM awa.ready_entries ORDER BY job_id;
SELECT job_id, lane_priority, lane_seq, enqueue_shard FROM awa.claim_ready_runtime('install_q', 10) ORDER BY job_id;
SELECT count(*) AS lanes FROM awa.queue_enqueue_heads;

-- Leave a fresh extension for the tests that follow.
DROP EXTENSION awa_shard;
CREATE EXTENSION awa_shard;
SELECT count(*) AS leftover_jobs FROM awa.ready_entries;
