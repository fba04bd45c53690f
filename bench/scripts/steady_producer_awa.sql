-- Steady-rate producer (bench/steady): :batch jobs per transaction (rate set by pgbench --rate).
SELECT 1 FROM awa.insert_jobs('steady_q', array_fill('k'::text, ARRAY[:batch::int]));
