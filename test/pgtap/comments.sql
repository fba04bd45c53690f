-- Self-description: every function, table (partitions included), view, type and sequence
-- of schema awa carries a comment, so \df+ awa.*, \dt+ awa.* and \dv+ awa.* say what each
-- is. Runtime lane sequences (queue_enqueue_seq_*) are created per lane and left out. A new
-- object without COMMENT ON fails here by name. The settings (GUCs) have descriptions.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS awa_shard;
SELECT plan(9);

SELECT is((SELECT array_agg(p.oid::regprocedure::text ORDER BY 1) FROM pg_proc p
            WHERE p.pronamespace = 'awa'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL),
          NULL, 'every function in awa has a comment');
SELECT is((SELECT array_agg(c.relname::text ORDER BY 1) FROM pg_class c
            WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
              AND obj_description(c.oid, 'pg_class') IS NULL),
          NULL, 'every table, partition and view in awa has a comment');
SELECT is((SELECT array_agg(c.relname::text ORDER BY 1) FROM pg_class c
            WHERE c.relnamespace = 'awa'::regnamespace AND c.relkind = 'S' AND c.relname NOT LIKE 'queue\_enqueue\_seq\_%'
              AND obj_description(c.oid, 'pg_class') IS NULL),
          NULL, 'every sequence of the extension has a comment');
SELECT is((SELECT array_agg(t.typname::text ORDER BY 1) FROM pg_type t
            WHERE t.typnamespace = 'awa'::regnamespace AND t.typcategory <> 'A'
              AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
              AND obj_description(t.oid, 'pg_type') IS NULL),
          NULL, 'every type in awa (enums, standalone composites) has a comment');
SELECT ok(obj_description('awa'::regnamespace, 'pg_namespace') IS NOT NULL, 'schema awa has a comment');
SELECT is((SELECT array_agg(a.attname::text ORDER BY 1) FROM pg_attribute a
            WHERE a.attrelid IN ('awa.queue_meta'::regclass, 'awa.plane_settings'::regclass) AND a.attnum > 0
              AND NOT a.attisdropped AND col_description(a.attrelid, a.attnum) IS NULL),
          NULL, 'every column of the settings tables queue_meta and plane_settings has a comment');
SELECT ok((SELECT obj_description('awa.get_job(bigint)'::regprocedure, 'pg_proc')) ~ 'awa_producer, awa_worker',
          'a public function''s comment names the roles that may call it');

-- The settings: loaded once by LOAD, each has a short description.
LOAD 'awa_shard';
SELECT ok((SELECT count(*) FROM pg_settings WHERE name LIKE 'awa\_shard.%') >= 5, 'the awa_shard settings are defined');
SELECT is((SELECT array_agg(name::text ORDER BY 1) FROM pg_settings
            WHERE name LIKE 'awa\_shard.%' AND coalesce(short_desc, '') = ''),
          NULL, 'every awa_shard setting has a description');

SELECT * FROM finish();
ROLLBACK;
