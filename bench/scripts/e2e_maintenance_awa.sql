-- End-to-end maintenance: the background worker's pass (each step its own transaction)
-- every second, its default interval, with ring rotation, prune and the fold of the claim
-- marks on one pass in ten as the worker does. (The bench server turns background
-- maintenance off: cells clone template databases, which a connected worker would hold up.)
SELECT awa.promote_due(1000);
SELECT awa.rescue_expired_deadlines(1000);
SELECT awa.rescue_stale_heartbeats(pg_catalog.make_interval(secs => 300), 1000);
\set ring random(1, 10)
\if :ring = 1
SELECT awa.rotate_queue_ring();
SELECT awa.prune_queue_ring(200, true);
SELECT awa.rotate_attempt_ring('claim');
SELECT awa.prune_attempt_ring('claim', 200);
SELECT awa.rotate_attempt_ring('lease');
SELECT awa.prune_attempt_ring('lease', 200);
SELECT awa.fold_claim_marks();
\endif
\sleep 1000 ms
