-- Idle-in-transaction cell, SKIP LOCKED baseline worker: the at-least-once drain worker
-- (claim by marking locked_at, committed; complete by DELETE, committed) that sleeps 50 ms
-- when the queue is empty instead of polling (awa's worker sleeps in wait_for_jobs).
WITH claimed AS (
  UPDATE bench.skipq SET locked_at = now()
  WHERE id IN (SELECT id FROM bench.skipq WHERE locked_at IS NULL ORDER BY id
               FOR UPDATE SKIP LOCKED LIMIT :batch::int)
  RETURNING id)
SELECT coalesce(array_agg(id), '{}') AS ids, count(*) AS n FROM claimed \gset
\if :n = 0
\sleep 50 ms
\else
DELETE FROM bench.skipq WHERE id = ANY(:ids::bigint[]);
\endif
