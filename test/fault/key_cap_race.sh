#!/usr/bin/env bash
# Live test of the capped-lane memory of per-key concurrency limits (src/key_caps.cpp) against
# the moment an exit commits: a session that remembered a lane at its head key's cap (the key's
# one running attempt W as witness) waits for W with awa.wait_for_job, and another session
# completes W; the moment the waiter wakes, its claim must take the key's next job. An exit is
# visible before its commit callbacks run; while the wake-ups came before the exit's stamp, a
# woken claim could still trust the memory and return nothing (about 1 in 8 here, under CPU
# load). ITERATIONS rounds (default 40) with CPU burners beside them; every round must count
# and take the job. Run as the postgres user; prints "key_cap_race: N passed, M failed".
TEST=key_cap_race; . "$(dirname "$0")/lib.sh"
new_server keyrace 58000
start_preloaded race
q race <<'SQL' >/dev/null || exit 1
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('qr', 1);
SELECT awa.set_concurrency_limit('qr', 1, p_per_key => true);
CREATE TABLE held (job_id bigint, run_lease bigint);
-- Claim (passing over the lane: remembered), wait for the held attempt to end, claim again.
CREATE FUNCTION waiter() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    w bigint;
    n integer;
    r awa.job_row;
BEGIN
    SELECT job_id INTO w FROM held;
    PERFORM count(*) FROM awa.claim_ready_runtime('qr', 5);
    r := awa.wait_for_job(w, 3000);
    SELECT count(*) INTO n FROM awa.claim_ready_runtime('qr', 5);
    RETURN format('%s %s', n, r.state); -- a claim that trusted the memory would take nothing
END $$;
SQL

for i in 1 2 3 4; do timeout 300 sh -c 'while :; do :; done' & bg+=($!); done
rounds=${ITERATIONS:-40}; right=0; results=""
for i in $(seq 1 "$rounds"); do
  q race -c "TRUNCATE held" \
         -c "SELECT count(*) FROM awa.insert_jobs('qr', ARRAY['k'], p_concurrency_keys => ARRAY['hot', 'hot'])" \
         -c "INSERT INTO held SELECT job_id, run_lease FROM awa.claim_ready_runtime('qr', 1)" >/dev/null || exit 1
  ( sleep 0.15; q race -c "SELECT count(*) FROM held h, awa.complete_jobs(ARRAY[h.job_id], ARRAY[h.run_lease])" >/dev/null ) &
  got=$(q race -c "SELECT waiter()")
  wait $!
  [ "$got" = "1 completed" ] && right=$((right + 1)) || results="$results [$got]"
  # The job the waiter took ends too, so that the next round starts with the lane free.
  q race -c "SELECT count(*) FROM awa.complete_jobs(ARRAY(SELECT c.job_id FROM awa.lease_claims c WHERE c.queue = 'qr'),
                                                    ARRAY(SELECT c.run_lease FROM awa.lease_claims c WHERE c.queue = 'qr'))" >/dev/null
done
check "every woken claim counted the key and took its next job ($rounds rounds)${results:+, others:$results}" "$right" "$rounds"
check "no claim ran over the cap" "$(q race -c "SELECT count(*) FROM awa.jobs WHERE queue = 'qr' AND state = 'running'")" "0"
summary
[ "$failed" -eq 0 ]
