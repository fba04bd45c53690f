-- The commit ceiling of the drain cells: a transaction that writes one small row and commits
-- (one WAL flush to wait for, little else; a transaction that only took an id would commit
-- without waiting for its flush). A worker that claims and completes in two transactions
-- cannot finish more than batch / 2 jobs per such commit.
INSERT INTO bench.commit_probe VALUES (1);
