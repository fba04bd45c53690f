-- Plain SKIP LOCKED table queue, at-most-once upper bound: claim = DELETE ... RETURNING.
WITH claimed AS (
  DELETE FROM bench.skipq
  WHERE id IN (SELECT id FROM bench.skipq ORDER BY id FOR UPDATE SKIP LOCKED LIMIT :batch::int)
  RETURNING id, kind, args)
SELECT count(*) FROM claimed;
