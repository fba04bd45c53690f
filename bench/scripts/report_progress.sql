-- One progress report per transaction on one of :jobs running attempts (job ids :first ..
-- :first + :jobs - 1, run lease 1), chosen at random: after each attempt's first report, the
-- path of a worker that reports on a long job (its attempt_state row exists).
\set id :first + random(0, :jobs - 1)
SELECT awa.set_progress(:id, 1, '{"done": 1, "of": 2}');
