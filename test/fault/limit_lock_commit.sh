#!/usr/bin/env bash
# Live test of the limit lock's early end (src/running_bound.cpp, running_bound_at_pre_commit):
# a claim of a queue with a concurrency limit publishes its bound and releases the queue's
# limit lock at PRE_COMMIT, before its commit record is flushed and made visible, so the next
# claim of the queue does not wait for that commit. Synchronous replication to a standby that
# never comes holds claim A's commit in that window (flushed, not visible) for as long as the
# test needs. Queue qc: 2 lanes, limit 2. A claims through the extended protocol (pgbench -M
# extended), whose portal holds what the statement took until the commit.
#  1. B's claim returns while A's commit is held, and takes the one place left: the bound A
#     published holds A's attempt. C's claim then gets nothing (at the cap).
#  2. D's claim must count (a savepoint rolled back in its transaction): a count would not see
#     A's attempt, so it waits for A's transaction. Once A's commit is let go, D counts both
#     attempts and gets nothing: never more than 2 running.
# Run as the postgres user; prints "limit_lock_commit: N passed, M failed".
TEST=limit_lock_commit; . "$(dirname "$0")/lib.sh"
new_server limitlock 59300
start_preloaded lc
q lc <<'SQL' >/dev/null || give_up "setup failed"
CREATE EXTENSION awa_shard;
SELECT awa.create_queue('qc', 2);
SELECT count(*) FROM unnest(awa.insert_jobs('qc', array_fill('k'::text, ARRAY[8]), p_spread_keyless => true));
SELECT awa.set_concurrency_limit('qc', 2);
CREATE TABLE probe (x integer);
ALTER SYSTEM SET synchronous_standby_names = 'awa_no_such_standby';
SELECT pg_reload_conf();
SQL
# Every session but A commits without waiting for the standby.
export PGOPTIONS="-c synchronous_commit=local"
w=$(mktemp -d)
trap 'rm -rf "$w"; cleanup' EXIT
attrs="SELECT coalesce(wait_event, '-') FROM pg_stat_activity WHERE application_name ="
# Committers wait for the standby once the checkpointer has read the setting: probe until one does.
ready=no
for i in $(seq 1 30); do
  PGOPTIONS="-c synchronous_commit=on" PGAPPNAME=probe q lc -c "INSERT INTO probe VALUES (1)" >/dev/null 2>&1 &
  p=$!
  if wait_for lc 1 "$attrs 'probe'" "SyncRep"; then
    q lc -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'probe'" >/dev/null
    wait $p; ready=yes; break
  fi
  wait $p
done
[ "$ready" = yes ] || give_up "commits never waited for the named standby"

# A claims through the extended protocol, whose portal lives until the commit.
echo "SELECT count(*) FROM awa.claim_ready_runtime('qc', 1);" > "$w/a.sql"
PGOPTIONS="-c synchronous_commit=on" PGAPPNAME=claim_a \
  "$PGBIN/pgbench" -h "$dir" -p "$port" -n -M extended -t 1 -f "$w/a.sql" lc > "$w/a.out" 2>&1 &
a=$!; bg+=($a)
wait_for lc 30 "$attrs 'claim_a'" "SyncRep" || give_up "A's commit did not wait for the standby"
check "A's commit is held before it is visible: no attempt seen running" \
  "$(q lc -c "SELECT count(*) FROM awa.jobs WHERE queue = 'qc' AND state = 'running'")" "0"

# 1. B and C, while A's commit is held (timeout: the build before waits for A's limit lock).
check "B's claim returns during A's commit and takes the place left" \
  "$(timeout 30 "$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -d lc -c "SELECT count(*) FROM awa.claim_ready_runtime('qc', 1)" 2>&1)" "1"
check "C's claim gets nothing: A's attempt and B's fill the limit" \
  "$(timeout 30 "$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -d lc -c "SELECT count(*) FROM awa.claim_ready_runtime('qc', 1)" 2>&1)" "0"
check "A's commit was still held meanwhile" "$(q lc -c "$attrs 'claim_a'")" "SyncRep"

# 2. D counts: it waits for A's transaction.
PGAPPNAME=claim_d q lc > "$w/d.out" 2>&1 <<'SQL' &
BEGIN;
SAVEPOINT s;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM awa.claim_ready_runtime('qc', 1);
COMMIT;
SQL
d=$!; bg+=($d)
wait_for lc 30 "$attrs 'claim_d'" "transactionid"
check "D's count waits for A's transaction" "$(q lc -c "$attrs 'claim_d'")" "transactionid"
q lc -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'claim_a'" >/dev/null
wait $d
check "D's claim, once A's commit is visible, gets nothing" "$(cat "$w/d.out")" "0"
wait $a
check "A's claim committed (its commit let go)" "$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$w/a.out")" "1"
check "no warning about the lock's owner in the log" "$(grep -c "you don't own a lock" "$dir/log")" "0"
check "never more than the limit running: A's attempt and B's" \
  "$(q lc -c "SELECT count(*) FROM awa.jobs WHERE queue = 'qc' AND state = 'running'")" "2"
summary
[ "$failed" -eq 0 ]
