#!/usr/bin/env bash
# Live test of the exact running bound of a queue-wide concurrency limit (src/running_bound.cpp):
# a claim at the cap takes the room an exact bound leaves without counting, so every exit must
# be taken off it at its commit, and a count that exits overlapped must tell those it saw from
# those it did not.
#  1. Churn: 8 clients claim 1 job of a queue limited to 4 and, in the same transaction, add 1
#     to an occupancy row and check it is at most 4 (the row holds what committed claims and
#     exits left, and the claim's own: the running attempts); they end the job a moment later
#     by completion, failure with a retry, snooze or cancel, taking 1 off in the same
#     transaction, so exits commit during most counts. No transaction may fail.
#  2. At once: ITERATIONS rounds (default 30), with CPU burners beside them. The queue at its
#     cap (4 running), a waiter claims (nothing: the bound is exact), waits for one running job
#     with awa.wait_for_job while another session completes it, and claims again the moment it
#     wakes: it must take the freed place.
# Run as the postgres user; prints "running_bound_race: N passed, M failed".
TEST=running_bound_race; . "$(dirname "$0")/lib.sh"
new_server runbound 58200
start_preloaded race
q race <<'SQL' >/dev/null || exit 1
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('qc', 1);
SELECT count(*) FROM unnest(awa.insert_jobs('qc', array_fill('k'::text, ARRAY[5000])));
SELECT awa.set_concurrency_limit('qc', 4);
CREATE TABLE held (job_id bigint, run_lease bigint);
-- The running attempts of qc as the churn's clients see them: each claim and each exit moves it in its own transaction.
CREATE TABLE occupancy (n integer NOT NULL);
INSERT INTO occupancy VALUES (0);
-- Claim (nothing, at the cap), wait for the held attempt to end, claim again.
CREATE FUNCTION waiter() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    w bigint;
    n integer;
    before integer;
    r awa.job_row;
BEGIN
    SELECT job_id INTO w FROM held LIMIT 1;
    SELECT count(*) INTO before FROM awa.claim_ready_runtime('qc', 1);
    r := awa.wait_for_job(w, 3000);
    SELECT count(*) INTO n FROM awa.claim_ready_runtime('qc', 1);
    RETURN format('%s %s %s', before, n, r.state);
END $$;
-- End a running job of qc the way its number says: completion, failure with a retry, snooze, cancel.
CREATE FUNCTION end_job(p_id bigint, p_lease bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    CASE p_id % 4
    WHEN 0 THEN PERFORM awa.complete_jobs(ARRAY[p_id], ARRAY[p_lease]);
    WHEN 1 THEN PERFORM awa.fail_job(p_id, p_lease, 'failed on purpose');
    WHEN 2 THEN PERFORM awa.snooze_job(p_id, p_lease, interval '1 hour');
    ELSE PERFORM awa.cancel_job(p_id);
    END CASE;
END $$;
SQL

# 1. Churn.
w=$(mktemp -d)
trap 'rm -rf "$w"; cleanup' EXIT
cat > "$w/worker.sql" <<'S'
BEGIN;
SELECT coalesce(max(job_id), 0) AS id, coalesce(max(run_lease), 0) AS lease FROM awa.claim_ready_runtime('qc', 1) \gset
UPDATE occupancy SET n = n + 1 WHERE :id > 0 RETURNING 1 / CASE WHEN n > 4 THEN 0 ELSE 1 END AS within_cap;
COMMIT;
\sleep 1 ms
BEGIN;
SELECT end_job(:id, :lease) WHERE :id > 0;
UPDATE occupancy SET n = n - 1 WHERE :id > 0;
COMMIT;
S
"$PGBIN/pgbench" -h "$dir" -p "$port" -n -c 8 -j 2 -T "${CHURN_SECONDS:-8}" -f "$w/worker.sql" race > "$w/pgbench.out" 2>&1
check "8 clients under churn: no claim saw more than 4 running, no transaction failed (pgbench status)" "$?" "0"
check "8 clients under churn: failed transactions" "$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$w/pgbench.out")" "0"
ended=$(q race -c "SELECT count(*) FROM awa.jobs WHERE queue = 'qc' AND state IN ('completed', 'retryable', 'scheduled', 'cancelled')")
check "8 clients under churn: jobs were claimed and ended" "$([ "$ended" -gt 100 ] && echo yes || echo "no ($ended)")" "yes"
check "8 clients under churn: nothing left running" "$(q race -c "SELECT count(*) FROM awa.jobs WHERE queue = 'qc' AND state = 'running'")" "0"

# 2. At once.
for i in 1 2 3 4; do timeout 300 sh -c 'while :; do :; done' & bg+=($!); done
rounds=${ITERATIONS:-30}; right=0; results=""
for i in $(seq 1 "$rounds"); do
  q race -c "TRUNCATE held" -c "INSERT INTO held SELECT job_id, run_lease FROM awa.claim_ready_runtime('qc', 4)" >/dev/null || exit 1
  # The completion once the waiter sleeps in wait_for_job (its first claim made, whatever the load).
  ( wait_for race 30 "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT waiter()' AND wait_event_type = 'Extension'" 1
    q race -c "SELECT count(*) FROM (SELECT * FROM held LIMIT 1) h, awa.complete_jobs(ARRAY[h.job_id], ARRAY[h.run_lease])" >/dev/null ) &
  got=$(q race -c "SELECT waiter()")
  wait $!
  [ "$got" = "0 1 completed" ] && right=$((right + 1)) || results="$results [$got]"
  # Every running job ends, so that the next round starts with the queue empty of attempts.
  q race -c "SELECT count(*) FROM awa.jobs j, awa.complete_jobs(ARRAY[j.id], ARRAY[j.run_lease]) WHERE j.queue = 'qc' AND j.state = 'running'" >/dev/null
done
check "every woken claim took the freed place at the cap ($rounds rounds)${results:+, others:$results}" "$right" "$rounds"
summary
[ "$failed" -eq 0 ]
