-- queue_routing: the routing argument of every worker-facing call (p_queue; p_from_queue for
-- move_queue and retry_from_dlq, whose p_queue is the destination) in both plane modes.
\set VERBOSITY terse
\set receipts true
\i sql/queue_routing_checks.psql
\set receipts false
\i sql/queue_routing_checks.psql
