-- Plain SKIP LOCKED table queue, at-least-once: claim by marking locked_at (committed), then
-- complete by DELETE (committed): the same two-transaction worker shape as awa_shard's.
WITH claimed AS (
  UPDATE bench.skipq SET locked_at = now()
  WHERE id IN (SELECT id FROM bench.skipq WHERE locked_at IS NULL ORDER BY id
               FOR UPDATE SKIP LOCKED LIMIT :batch::int)
  RETURNING id, kind, args)
SELECT coalesce(array_agg(id), '{}') AS ids FROM claimed \gset
DELETE FROM bench.skipq WHERE id = ANY(:ids::bigint[]);
