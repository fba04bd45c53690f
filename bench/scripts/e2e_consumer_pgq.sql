-- End-to-end PgQ consumer: next_batch / get_batch_events / finish_batch in one transaction.
-- Per batch it records the enqueue->fetch latency of every event (unlogged table).
BEGIN;
SELECT coalesce(pgq.next_batch('bench_q', 'bench_c'), 0) AS bid \gset
\if :bid = 0
COMMIT;
\sleep 5 ms
\else
INSERT INTO bench.pgq_lat (batch_id, events, lat)
SELECT :bid::bigint, count(*), array_agg(extract(epoch FROM clock_timestamp() - ev_time))
FROM pgq.get_batch_events(:bid::bigint);
SELECT pgq.finish_batch(:bid::bigint);
COMMIT;
\endif
