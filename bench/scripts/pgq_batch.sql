-- PgQ: :batch events per transaction through pgq.insert_event.
SELECT count(pgq.insert_event('bench_q', 'k', '{}')) FROM generate_series(1, :batch::int);
