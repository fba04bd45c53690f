-- End-to-end PgQ producer: :batch events per transaction.
SELECT count(pgq.insert_event('bench_q', 'k', '{}')) FROM generate_series(1, :batch::int);
