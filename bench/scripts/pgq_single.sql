-- PgQ: one event per transaction.
SELECT pgq.insert_event('bench_q', 'k', '{}');
