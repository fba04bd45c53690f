#!/usr/bin/env bash
# test/citus/run.sh — the Citus suite: build Citus (cached, test/citus/build.sh), start a
# coordinator and two workers (test/citus/cluster.sh), run the checks of scale-out by queue
# (docs/scale-out.md) and the single-node isolation specs of test/citus/specs.list through the
# coordinator (test/citus/specs.sh), stop the cluster. Ends with "citus: N passed, M failed", the line
# test/run counts; exits 3 with "citus: skipped (...)" when the vendored Citus source is
# absent. PG_CONFIG: the PostgreSQL to use (awa_shard must be installed there already).
# KEEP=1 leaves the cluster running.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PG_CONFIG=${PG_CONFIG:-$(command -v pg_config)}
export AWA_CITUS_WORK=${AWA_CITUS_WORK:-/tmp/awa_citus_suite}
bin=$("$PG_CONFIG" --bindir)
passed=0; failed=0
check() { if [ "$2" = "$3" ]; then passed=$((passed + 1)); echo "ok - $1"; else failed=$((failed + 1)); echo "not ok - $1: expected '$3', got '$2'"; fi; }
summary() { echo "citus: $passed passed, $failed failed"; }

out=$("$here/build.sh" 2>&1); rc=$?
echo "$out" | tail -n 3
if [ $rc -eq 3 ]; then echo "citus: skipped (${out#citus: })"; exit 3; fi
if [ $rc -ne 0 ]; then failed=1; summary; exit 1; fi

"$here/cluster.sh" stop >/dev/null 2>&1
if ! "$here/cluster.sh" start > "$AWA_CITUS_WORK.start.log" 2>&1; then
  tail -n 30 "$AWA_CITUS_WORK.start.log"; failed=1; summary; exit 1
fi
tail -n 1 "$AWA_CITUS_WORK.start.log"
stop_cluster() { [ "${KEEP:-0}" = 1 ] || "$here/cluster.sh" stop >/dev/null 2>&1; }
trap stop_cluster EXIT

# q N SQL: one statement on node N (0 coordinator); stderr kept, SQLSTATE shown for errors.
q() { local n=$1; shift; "$here/cluster.sh" psql "$n" -c '\set VERBOSITY sqlstate' -c 'SET client_min_messages = warning' -c "$*" 2>&1; }
# qv N SQL: the same with whole messages (errors with their detail and hint).
qv() { local n=$1; shift; "$here/cluster.sh" psql "$n" -c 'SET client_min_messages = warning' -c "$*" 2>&1; }
port0=$(cat "$AWA_CITUS_WORK/port")

# -- Set-up: idempotent, tables colocated by queue, ids in per-node ranges.
check "a second awa.citus_setup() distributes nothing more" \
  "$(q 0 "SELECT count(*) FROM awa.citus_setup() WHERE step NOT IN ('id ranges', 'left node-local')")" "0"
check "the distributed tables of awa share one colocation group" \
  "$(q 0 "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'awa.%' AND partmethod = 'h'")" "1"
check "the worker-facing calls with p_queue are delegated with force_delegation" \
  "$(q 0 "SELECT bool_and(force_delegation) AND count(*) >= 5 FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND objid::regprocedure::text ~ '^awa\.(insert_job_compat|insert_jobs|claim_ready_runtime|wait_for_jobs|create_queue)\('")" "t"

check "wait_for_job, move_failed_to_dlq and age_waiting_priorities are delegated by p_queue" \
  "$(q 0 "SELECT count(*) FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND force_delegation AND objid::regprocedure::text ~ '^awa\.(wait_for_job|move_failed_to_dlq|age_waiting_priorities)\(' AND distribution_argument_index = 2")" "3"

# Two queues on different workers.
placement="SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('awa.queue_meta', %s)"
qa=""; qb=""
for i in $(seq 1 40); do
  p=$(q 0 "$(printf "$placement" "'q$i'")")
  if [ -z "$qa" ] && [ "$p" = $((port0 + 1)) ]; then qa=q$i; fi
  if [ -z "$qb" ] && [ "$p" = $((port0 + 2)) ]; then qb=q$i; fi
done
check "two queues found on the two workers" "$([ -n "$qa" ] && [ -n "$qb" ] && echo yes)" "yes"
worker_of() { if [ "$1" = "$qa" ]; then echo 1; else echo 2; fi; }
# queue_on PREFIX W: the first of PREFIX1..PREFIX40 whose shards are on worker W.
queue_on() {
  local i
  for i in $(seq 1 40); do
    [ "$(q 0 "$(printf "$placement" "'$1$i'")")" = $((port0 + $2)) ] && { echo "$1$i"; return; }
  done
}

# -- Round trip per worker: enqueue -> claim -> complete, each one delegated call.
has_complete_queue=$(q 0 "SELECT count(*) FROM pg_proc WHERE proname = 'complete_jobs' AND 'p_queue' = ANY (proargnames)")
for queue in "$qa" "$qb"; do
  w=$(worker_of "$queue")
  ids=$(q 0 "SELECT awa.insert_jobs('$queue', '{rt}', p_args => ARRAY['{\"n\": 1}'::jsonb, '{\"n\": 2}'])")
  check "$queue: enqueue through the coordinator returns ids of worker $w's range" \
    "$(q 0 "SELECT bool_and(id >> 48 = (SELECT groupid FROM pg_dist_node WHERE nodeport = $((port0 + w)))) FROM unnest('$ids'::bigint[]) id")" "t"
  claimed=$(q 0 "SELECT string_agg((c).job_id || ':' || (c).run_lease, ',' ORDER BY (c).lane_seq) FROM (SELECT awa.claim_ready_runtime('$queue', 10) c) s" )
  # The claim above is not a lone call (an aggregate over it): it must be refused; claim alone.
  check "$queue: a claim inside an expression is refused (0A000)" "$(echo "$claimed" | grep -oE '^ERROR: +0A000' | head -1 | tr -s ' ')" "ERROR: 0A000"
  claimed=$(q 0 "SELECT awa.claim_ready_runtime('$queue', 10)" | sed -E 's/^\(([^,]*,){7}([0-9]+),([0-9]+),.*/\3/' | paste -sd, -)
  check "$queue: a delegated claim takes both jobs, in lane order" "$claimed" "$(echo "$ids" | tr -d '{}')"
  if [ "$has_complete_queue" = 1 ]; then
    check "$queue: a delegated completion completes both" \
      "$(q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[$(echo "$claimed")]::bigint[], ARRAY[1,1]::bigint[], p_queue => '$queue')" | grep -c '^[0-9]')" "2"
    check "$queue: a completion by id alone is refused on the cluster (0A000)" \
      "$(q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[$(echo "$claimed")]::bigint[], ARRAY[1,1]::bigint[])" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
    check "$queue: both jobs are completed on its worker" \
      "$(q 0 "SELECT count(*) FROM awa.completion_batches WHERE queue = '$queue'")" "1"
  else
    check "$queue: complete_jobs takes p_queue (routing argument)" "no" "yes"
  fi
  check "$queue: its rows are on worker $w only" \
    "$(q 0 "SELECT string_agg(DISTINCT (SELECT nodeport - $port0 FROM pg_dist_shard_placement p WHERE p.shardid = get_shard_id_for_distribution_column('awa.ready_entries', r.queue))::text, ',') FROM awa.ready_entries r WHERE r.queue = '$queue'")" "$w"
done

# -- Exits other than completion, delegated by p_queue: each runs on the queue's worker.
ids=$(q 0 "SELECT awa.insert_jobs('$qa', '{ex}', p_args => array_fill('{}'::jsonb, ARRAY[6]))" | tr -d '{}')
claimed=$(q 0 "SELECT awa.claim_ready_runtime('$qa', 10)" | sed -E 's/^\(([^,]*,){7}([0-9]+),([0-9]+),.*/\3/' | paste -sd, -)
check "exits: six jobs claimed through delegation" "$claimed" "$ids"
IFS=, read -r x1 x2 x3 x4 x5 x6 <<< "$ids"
check "exits: fail_job by id alone is refused on the cluster (0A000)" \
  "$(q 0 "SELECT awa.fail_job($x1, 1, 'boom')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "... and so are cancel_job and snooze_job" \
  "$(q 0 "SELECT awa.cancel_job($x4)" | grep -oE '^ERROR: +0A000' | tr -s ' ')$(q 0 "SELECT awa.snooze_job($x2, 1, interval '1 hour')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000ERROR: 0A000"
check "... having changed nothing" "$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$qa' AND kind = 'ex' AND state = 'running'")" "6"
check "exits: heartbeat_jobs and set_progress by id alone are refused (0A000)" \
  "$(q 0 "SELECT awa.heartbeat_jobs(ARRAY[$x1]::bigint[], ARRAY[1]::bigint[])" | grep -oE '^ERROR: +0A000' | tr -s ' ')$(q 0 "SELECT awa.set_progress($x1, 1, '{\"p\": 1}')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000ERROR: 0A000"
check "exits: heartbeat_jobs with p_queue finds the open attempt" \
  "$(q 0 "SELECT awa.heartbeat_jobs(ARRAY[$x1]::bigint[], ARRAY[1]::bigint[], '$qa')")" "1"
check "exits: set_progress with p_queue records it, seen on the coordinator" \
  "$(q 0 "SELECT awa.set_progress($x1, 1, '{\"p\": 7}', '$qa')")$(q 0 "SELECT progress->>'p' FROM awa.jobs WHERE id = $x1")" "t7"
check "exits: fail_job with p_queue (retried later)" "$(q 0 "SELECT awa.fail_job($x1, 1, 'boom', p_queue => '$qa')")" "retryable"
check "exits: snooze_job with p_queue" "$(q 0 "SELECT awa.snooze_job($x2, 1, interval '1 hour', '$qa')")" "t"
check "exits: retry_job_after with p_queue" "$(q 0 "SELECT awa.retry_job_after($x3, 1, interval '1 hour', '$qa')")" "t"
check "exits: cancel_job of a running job with p_queue" "$(q 0 "SELECT awa.cancel_job($x4, '$qa')")" "t"
check "exits: fail_job_to_dlq with p_queue" "$(q 0 "SELECT awa.fail_job_to_dlq($x5, 1, 'dead', p_queue => '$qa')")" "t"
check "exits: delete_job of a running job with p_queue" "$(q 0 "SELECT awa.delete_job($x6, '$qa')")" "t"
check "exits: the jobs' states, seen on the coordinator" \
  "$(q 0 "SELECT string_agg(state::text, ',' ORDER BY id) FROM awa.jobs WHERE queue = '$qa' AND kind = 'ex'")" "retryable,scheduled,retryable,cancelled,failed"
check "exits: the dead-lettered job is in the queue's dead letters on its worker" \
  "$(q "$(worker_of "$qa")" "SELECT count(*) FROM awa.dlq_entries WHERE queue = '$qa' AND job_id = $x5")" "1"
# -- move_queue and retry_from_dlq, routed by p_from_queue: within the job's queue they work
#    (a waiting and a scheduled job moved to priority 3: the scheduled row is written again,
#    since queue is the distribution column, which an UPDATE may not change; the dead letter
#    of the exits above back in its queue); into another queue, even one of the same worker,
#    they are refused (0A000) before anything changes (Citus lets a call delegated by a queue
#    touch that queue alone), and so are they by id alone.
wa=$(worker_of "$qa"); mv_to=$(queue_on mvto "$wa")
mids=$(q 0 "SELECT awa.insert_jobs('$qa', '{mv}', p_args => array_fill('{}'::jsonb, ARRAY[2]))" | tr -d '{}')
IFS=, read -r m1 m2 <<< "$mids"
q 0 "SELECT awa.insert_job_compat('mvlater', '$qa', p_run_at => now() + interval '1 hour')" >/dev/null
later=$(q 0 "SELECT max(id) FROM awa.jobs WHERE queue = '$qa' AND kind = 'mvlater'")
check "move_queue within the queue: a waiting job and a scheduled one to priority 3" \
  "$(q 0 "SELECT awa.move_queue($m1, '$qa', 3, p_from_queue => '$qa')")$(q 0 "SELECT awa.move_queue($later, '$qa', 3, p_from_queue => '$qa')")" "tt"
check "... seen on the coordinator with their new priority and the old one in metadata" \
  "$(q 0 "SELECT string_agg(kind || ':' || state || ':' || priority || ':' || (metadata->>'_awa_original_priority'), ',' ORDER BY kind) FROM awa.jobs WHERE queue = '$qa' AND id IN ($m1, $later)")" "mv:available:3:2,mvlater:scheduled:3:2"
check "move_queue into another queue of the same worker is refused (0A000), nothing moved" \
  "$(q 0 "SELECT awa.move_queue($m2, '$mv_to', p_from_queue => '$qa')" | grep -oE '^ERROR: +0A000' | tr -s ' ')$(q 0 "SELECT awa.move_queue($later, '$mv_to', p_from_queue => '$qa')" | grep -oE '^ERROR: +0A000' | tr -s ' ')/$(q 0 "SELECT string_agg(state::text, ',' ORDER BY id) FROM awa.jobs WHERE queue = '$qa' AND id IN ($m2, $later)")/$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$mv_to'")" "ERROR: 0A000ERROR: 0A000/available,scheduled/0"
check "... and move_queue by id alone (0A000)" \
  "$(q 0 "SELECT awa.move_queue($m2, '$qa')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "retry_from_dlq into another queue is refused (0A000), the dead letter kept" \
  "$(q 0 "SELECT awa.retry_from_dlq($x5, '$mv_to', p_from_queue => '$qa')" | grep -oE '^ERROR: +0A000' | tr -s ' ')/$(q "$(worker_of "$qa")" "SELECT count(*) FROM awa.dlq_entries WHERE queue = '$qa' AND job_id = $x5")" "ERROR: 0A000/1"
check "retry_from_dlq within the queue brings the dead letter back" \
  "$(q 0 "SELECT awa.retry_from_dlq($x5, p_from_queue => '$qa')")/$(q 0 "SELECT state FROM awa.jobs WHERE queue = '$qa' AND id = $x5")" "t/available"
last=$(q 0 "SELECT awa.insert_jobs('$qa', '{lastex}', p_max_attempts => ARRAY[1])" | tr -d '{}')
q 0 "SELECT job_id FROM awa.claim_ready_runtime('$qa', 10)" >/dev/null
check "exits: fail_job with p_queue at the job's last attempt fails it (its queue's dead-letter setting read on its worker)" \
  "$(q 0 "SELECT awa.fail_job($last, 1, 'boom', p_queue => '$qa')")/$(q 0 "SELECT state FROM awa.jobs WHERE id = $last")" "failed/failed"

# -- Each hot call (and each read of one queue's jobs: its views are read over the worker's own
#    shards) is one delegated command to the queue's worker, and that worker sends no
#    command to any other node (every command a node sends is logged: citus.log_remote_commands,
#    set for this session on the coordinator and by cluster.sh on the workers).
remote_commands() {
  "$here/cluster.sh" psql 0 -c 'SET client_min_messages = notice' -c 'SET citus.log_remote_commands = on' -c "$1" 2>&1 |
    grep -E '^NOTICE: +issuing' | cut -c1-60
}
q 0 "SELECT awa.insert_jobs('$qb', '{hot}', p_args => ARRAY['{}'::jsonb, '{}'])" >/dev/null
hot_id=$(q 0 "SELECT job_id FROM awa.claim_ready_runtime('$qb', 1)")
for call in "SELECT awa.insert_jobs('$qb', '{hot}')" "SELECT job_id FROM awa.claim_ready_runtime('$qb', 1)" \
            "SELECT awa.claim_ready_runtime('$qb', 1)" "SELECT awa.wait_for_jobs('$qb', 1)" \
            "SELECT job_id FROM awa.complete_jobs(ARRAY[$hot_id]::bigint[], ARRAY[1]::bigint[], p_queue => '$qb')" \
            "SELECT id FROM awa.get_job('$qb', $hot_id)" "SELECT count(*) FROM awa.list_jobs('$qb')" \
            "SELECT state FROM awa.wait_for_job($hot_id, 1, '$qb')" "SELECT awa.queue_counts_exact('$qb')" \
            "SELECT awa.queue_depth('$qb')" "SELECT count(*) FROM awa.jobs WHERE queue = '$qb'"; do
  cmds=$(remote_commands "$call")
  check "one command crosses nodes for: $call" "$(echo "$cmds" | grep -c .)" "1"
  [ "$(echo "$cmds" | grep -c .)" = 1 ] || echo "$cmds" | head -n 5
done
# awa.lane_cursors (citus_setup's form of it) read for one queue on its worker stays there,
# and gives each lane's head cursor or its latest mark, whichever is further.
check "awa.lane_cursors of one queue, read on its worker, sends no command to another node" \
  "$("$here/cluster.sh" psql 2 -c 'SET client_min_messages = notice' -c 'SET citus.log_remote_commands = on' \
       -c "SELECT count(*) FROM awa.lane_cursors WHERE queue = '$qb'" 2>&1 | grep -cE '^NOTICE: +issuing')" "0"
check "... and reads each lane's cursor as the head or its latest mark" \
  "$(q 0 "SELECT string_agg(priority || '/' || enqueue_shard || ':' || claim_seq, ',' ORDER BY priority, enqueue_shard) FROM awa.lane_cursors WHERE queue = '$qb'")" \
  "$(q 0 "SELECT string_agg(h.priority || '/' || h.enqueue_shard || ':' || greatest(h.claim_seq, (SELECT max(k.claim_seq) FROM awa.claim_marks k WHERE k.queue = '$qb' AND k.priority = h.priority AND k.enqueue_shard = h.enqueue_shard)), ',' ORDER BY h.priority, h.enqueue_shard) FROM awa.queue_claim_heads h WHERE h.queue = '$qb'")"
# The views' definitions that the rewrite for a queue's shards expands are kept per backend
# until a relcache invalidation of a view: on q's worker, a view replaced (and put back by a
# rollback) in the same session is read at once, so list_jobs sees its available jobs as
# claimed through and then again as available.
q 0 "SELECT awa.insert_jobs('$qb', '{vc}')" >/dev/null
check "a view replaced on the worker is expanded anew by the next list_jobs of the session, and again after a rollback" \
  "$("$here/cluster.sh" psql 2 -c "SELECT count(*) FROM awa.list_jobs('$qb', 'available', 10000)" -c 'BEGIN' \
       -c 'SET LOCAL citus.enable_ddl_propagation = off' \
       -c 'CREATE OR REPLACE VIEW awa.lane_cursors AS SELECT h.queue, h.priority, h.enqueue_shard, 9223372036854775807::bigint AS claim_seq, h.head_run_at FROM awa.queue_claim_heads h' \
       -c "SELECT count(*) FROM awa.list_jobs('$qb', 'available', 10000)" -c 'ROLLBACK' \
       -c "SELECT count(*) FROM awa.list_jobs('$qb', 'available', 10000)" 2>/dev/null | paste -sd/ -)" \
  "$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$qb' AND state = 'available'")/0/$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$qb' AND state = 'available'")"
check "list_jobs and get_job over the worker's shards read what awa.jobs on the coordinator reads" \
  "$(q 0 "SELECT string_agg(id || ':' || state, ',' ORDER BY id) FROM awa.list_jobs('$qb')")/$(q 0 "SELECT state FROM awa.get_job('$qb', $hot_id)")" \
  "$(q 0 "SELECT string_agg(id || ':' || state, ',' ORDER BY id) FROM awa.jobs WHERE queue = '$qb'")/completed"

# -- A wait on the queue's worker is woken by an enqueue through the coordinator (the
#    producer's commit wakes the worker's sleepers there); a timeout would return false.
qw=""
for i in $(seq 1 40); do
  [ "$(q 0 "$(printf "$placement" "'w$i'")")" = $((port0 + 2)) ] && { qw=w$i; break; }
done
q 0 "SELECT awa.wait_for_jobs('$qw', 60000)" > "$AWA_CITUS_WORK.wait" 2>&1 &
waiter=$!
for i in $(seq 1 50); do
  [ "$(q 2 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%wait_for_jobs(''$qw''%' AND state = 'active' AND pid <> pg_backend_pid()")" -ge 1 ] && break
  sleep 0.2
done
q 0 "SELECT awa.insert_jobs('$qw', '{wake}')" >/dev/null
wait "$waiter"
check "a delegated wait_for_jobs is woken by a delegated enqueue of its queue" "$(cat "$AWA_CITUS_WORK.wait")" "t"

# -- awa.wait_for_job with p_queue (its routing argument) is delegated to the job's worker and
#    returns the job once a delegated completion has finished it there; by id alone, or not
#    delegated, it is refused before it reads anything.
jw=$(q 0 "SELECT awa.insert_jobs('$qw', '{jw}')" | tr -d '{}')
check "wait_for_job with p_queue through the coordinator returns the job (delegated)" \
  "$(q 0 "SELECT id || ':' || state FROM awa.wait_for_job(${jw:-0}, 0, '$qw')")" "$jw:available"
check "wait_for_job by id alone is refused on the cluster (0A000)" \
  "$(q 0 "SELECT state FROM awa.wait_for_job(${jw:-0}, 0)" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "... with a hint to give p_queue" \
  "$(qv 0 "SELECT state FROM awa.wait_for_job(${jw:-0}, 0)" | grep -c '^HINT: .*p_queue')" "1"
check "an undelegated wait_for_job (inside an expression) is refused (0A000)" \
  "$(q 0 "SELECT (awa.wait_for_job(${jw:-0}, 0, '$qw')).state" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
jlease=$(q 0 "SELECT job_id, run_lease FROM awa.claim_ready_runtime('$qw', 10)" | awk -F'|' -v id="$jw" '$1 == id {print $2}')
q 0 "SELECT state FROM awa.wait_for_job(${jw:-0}, 60000, '$qw')" > "$AWA_CITUS_WORK.waitjob" 2>&1 &
waiter=$!
for i in $(seq 1 50); do
  [ "$(q 2 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%wait_for_job(%' AND state = 'active' AND pid <> pg_backend_pid()")" -ge 1 ] && break
  sleep 0.2
done
q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[${jw:-0}]::bigint[], ARRAY[${jlease:-0}]::bigint[], p_queue => '$qw')" >/dev/null
wait "$waiter"
check "a delegated wait_for_job returns the job completed by a delegated completion" "$(cat "$AWA_CITUS_WORK.waitjob")" "completed"

# -- Per-lane FIFO through delegation: single enqueues, claims of 3, the same order.
for i in $(seq 1 12); do q 0 "SELECT awa.insert_job_compat('fifo', '$qa', jsonb_build_object('i', $i))" >/dev/null; done
order=""
for i in 1 2 3 4 5; do
  got=$(q 0 "SELECT awa.claim_ready_runtime('$qa', 3)" | grep -oE '"?\{""i"": [0-9]+\}"?|\{"i": [0-9]+\}' | grep -oE '[0-9]+' | paste -sd, -)
  [ -n "$got" ] && order="${order:+$order,}$got"
done
check "per-lane FIFO through delegation: 12 single enqueues claimed 3 at a time in order" "$order" "$(seq -s, 1 12)"

# -- Ids unique across nodes.
# (Arguments must be constants for Citus to delegate: the array is spelled out.)
args50="ARRAY[$(printf "'{}'::jsonb,%.0s" $(seq 1 50) | sed 's/,$//')]"
q 0 "SELECT awa.insert_jobs('$qa', '{u}', p_args => $args50)" >/dev/null
q 0 "SELECT awa.insert_jobs('$qb', '{u}', p_args => $args50)" >/dev/null
check "job ids unique across the workers (100 jobs of two queues)" \
  "$(q 0 "SELECT count(DISTINCT job_id) || '/' || count(*) || '/' || count(DISTINCT job_id >> 48) FROM awa.ready_entries WHERE kind = 'u'")" "100/100/2"

# -- A producer transaction touching two workers: refused, nothing committed.
before=$(q 0 "SELECT count(*) FROM awa.ready_entries WHERE kind = 'two'")
out=$(qv 0 "BEGIN; SELECT awa.insert_jobs('$qa', '{two}'); SELECT awa.insert_jobs('$qb', '{two}'); COMMIT;")
check "a transaction enqueuing on two workers is refused" "$(echo "$out" | grep -c '^ERROR: *a transaction that enqueues may write on one Citus worker only')" "1"
check "... with a hint" "$(echo "$out" | tail -n 3 | grep -c '^HINT: *Enqueue into the queues of one worker per transaction')" "1"
check "... and nothing of it committed" "$(q 0 "SELECT count(*) FROM awa.ready_entries WHERE kind = 'two'")" "$before"
check "a transaction enqueuing twice on one worker commits" \
  "$(q 0 "BEGIN; SELECT awa.insert_jobs('$qa', '{one}'); SELECT awa.insert_jobs('$qa', '{one}'); COMMIT;" >/dev/null; q 0 "SELECT count(*) FROM awa.ready_entries WHERE kind = 'one'")" "2"

# -- An undelegated call is refused before it touches anything.
before=$(q 0 "SELECT count(*) FROM awa.ready_entries WHERE queue = '$qa'")
out=$(q 0 "SELECT (awa.insert_job_compat('undelegated', '$qa')).id")
check "an undelegated enqueue is refused with 0A000" "$(echo "$out" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
out=$(qv 0 "SELECT (awa.insert_job_compat('undelegated', '$qa')).id")
check "... naming the queue, with a hint" "$(echo "$out" | grep -cE "queue \"$qa\" lives on another node|^HINT:")" "2"
check "... and nothing enqueued, no lane created" \
  "$(q 0 "SELECT count(*) FROM awa.ready_entries WHERE queue = '$qa'")/$(q 0 "SELECT count(*) FROM awa.ready_entries WHERE kind = 'undelegated'")" "$before/0"
check "a worker delegates a lone call for another worker's queue there" \
  "$(q 1 "SELECT awa.insert_jobs('$qb', '{relayed}')" >/dev/null; q 0 "SELECT count(*) FROM awa.ready_entries WHERE kind = 'relayed' AND queue = '$qb'")" "1"
check "a worker refuses an undelegated call for another worker's queue (0A000)" \
  "$(q 1 "SELECT (awa.insert_job_compat('wrong', '$qb')).id" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "a worker takes a direct call for its own queue" \
  "$(q 1 "SELECT cardinality(awa.insert_jobs('$qa', '{direct}'))")" "1"

# -- Maintenance on the cluster (docs/scale-out.md, "Maintenance"): a pass per node for the
#    queues whose shards it holds, the shared rings rotated and pruned by the coordinator alone.
#    On each worker's queue: two jobs past their deadline (one at its last attempt) and a
#    scheduled job that falls due.
ma=$(queue_on m 1); mb=$(queue_on m 2)
check "two maintenance queues found on the two workers" "$([ -n "$ma" ] && [ -n "$mb" ] && echo yes)" "yes"
declare -A late
for queue in $ma $mb; do
  q 0 "SELECT awa.insert_jobs('$queue', '{late,last}', p_max_attempts => ARRAY[25, 1])" >/dev/null
  late[$queue]=$(q 0 "SELECT job_id FROM awa.claim_ready_runtime('$queue', 2, 0.001)" | head -n 1)
  q 0 "SELECT awa.insert_jobs('$queue', '{due}', p_run_ats => ARRAY[now() + interval '1 second'])" >/dev/null
done
sleep 1.5
pass() { q "$1" "SELECT r->>'promoted', r->>'deadline_rescued', r->>'queue_ring', r->>'claim_ring', r->>'queue_prune' FROM awa.run_maintenance() r" | tr '|' ' '; }
out=$(pass 0)
check "a pass on the coordinator promotes and rescues nothing (it holds no queue's shards)" "$(echo "$out" | cut -d' ' -f1-2)" "0 0"
check "... and rotates the shared rings itself" "$(echo "$out" | grep -c skipped_not_coordinator)" "0"
for w in 1 2; do
  if [ $w = 1 ]; then queue=$ma; else queue=$mb; fi
  out=$(pass $w)
  check "a pass on worker $w promotes its queue's due job and rescues its expired deadlines" "$(echo "$out" | cut -d' ' -f1-2)" "1 2"
  check "... and leaves the shared rings to the coordinator" "$(echo "$out" | cut -d' ' -f3-4)" "skipped_not_coordinator skipped_not_coordinator"
  check "$queue: the due job is available, seen on the coordinator" \
    "$(q 0 "SELECT string_agg(state::text, ',') FROM awa.jobs WHERE queue = '$queue' AND kind = 'due'")" "available"
  # (A retried job comes back after a backoff of 2-2.5 s: retryable, or available again.)
  check "$queue: the rescued jobs are retried, or failed at their last attempt" \
    "$(q 0 "SELECT string_agg(kind || ':' || CASE WHEN state IN ('retryable', 'available') THEN 'retried' ELSE state::text END || '/' || attempt, ',' ORDER BY kind) FROM awa.jobs WHERE queue = '$queue' AND kind IN ('late', 'last')")" \
    "last:failed/1,late:retried/1"
  check "$queue: get_job through the coordinator finds the rescued job" \
    "$(q 0 "SELECT attempt FROM awa.get_job('$queue', ${late[$queue]})")" "1"
  check "a second pass on worker $w rescues nothing more" "$(pass $w | cut -d' ' -f2)" "0"
done
check "the due job is claimable on its worker after promotion" \
  "$(q 0 "SELECT kind FROM awa.claim_ready_runtime('$ma', 1)")" "due"
check "awa.fold_claim_marks on a worker folds its queues' marks" \
  "$(q 1 "SELECT awa.fold_claim_marks() >= 0")" "t"
# (The rescued jobs come back after a backoff of 2-2.5 s: what promote_due finds by now varies.)
check "awa.promote_due, rescue_expired_deadlines on a worker run for its queues" \
  "$(q 1 "SELECT (awa.promote_due() >= 0) || '/' || awa.rescue_expired_deadlines()")" "true/0"
# The sweep of stale heartbeat rows of attempts no longer open (a heartbeat that committed
# after its attempt's completion) runs on every worker for its queues: such a row (written
# here by hand, for attempts that never existed) goes with a heartbeat rescue once it is
# stale; a fresh one stays.
q 0 "INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, queue) VALUES (-1, 1, now() - interval '1 hour', '$ma'), (-2, 1, now(), '$ma')" >/dev/null
q 1 "SELECT awa.rescue_stale_heartbeats('10 minutes')" >/dev/null
check "a worker's heartbeat rescue sweeps its queues' stale rows of attempts no longer open, not fresh ones" \
  "$(q 0 "SELECT string_agg(job_id::text, ',' ORDER BY job_id) FROM awa.attempt_state WHERE queue = '$ma' AND job_id < 0")" "-2"
q 0 "DELETE FROM awa.attempt_state WHERE queue = '$ma' AND job_id < 0" >/dev/null
# The prune's "slot empty" test reads every worker: sealed slots still hold pending jobs of
# both workers ('u', never claimed) and an open attempt, so the coordinator's prunes move the
# pending jobs forward and stop at a slot with an open attempt (or run out of sealed slots),
# and no job is lost.
pending=$(q 0 "SELECT count(*) FROM awa.jobs WHERE kind = 'u' AND state = 'available'")
q 0 "SELECT awa.rotate_queue_ring()" >/dev/null
result=""
for i in $(seq 1 40); do
  result=$(q 0 "SELECT awa.prune_queue_ring()")
  case "$result" in pruned|moved|skipped_snapshots) ;; *) break;; esac
done
check "the coordinator's prunes stop at a slot with an open attempt on a worker (or none sealed)" \
  "$(echo "$result" | grep -cE '^skipped_(running|none_sealed)$')" "1"
uw=$(q 0 "SELECT nodeport - $port0 FROM citus_shards WHERE table_name = 'awa.queue_meta'::regclass AND shardid = get_shard_id_for_distribution_column('awa.queue_meta', (SELECT queue FROM awa.ready_entries WHERE kind = 'u' ORDER BY ready_slot, job_id LIMIT 1))")
check "... the test over the shards of the worker holding a pending job finds its slot busy" \
  "$(q "${uw:-1}" "SELECT awa._citus_local_slot_busy('queue', (SELECT min(ready_slot) FROM awa.ready_entries WHERE kind = 'u')) IS NOT NULL")" "t"
check "... and every pending job is still there" \
  "$(q 0 "SELECT count(*) FROM awa.jobs WHERE kind = 'u' AND state = 'available'")" "$pending"
check "a worker leaves the prune to the coordinator" "$(q 2 "SELECT awa.prune_queue_ring()")" "skipped_not_coordinator"

# -- The queue ring's prune on the cluster moves a sealed slot's pending jobs forward, each
#    queue's rows on its worker in the coordinator's transaction, and truncates the slot once
#    every worker's snapshots see the move (docs/scale-out.md, "Maintenance"). One slot holds,
#    on a queue of each worker, four pending jobs and two completed ones (not kept); the
#    second queue is paused.
pa=$(queue_on pm 1); pb=$(queue_on pm 2)
check "two queues found on the two workers for the ring's move" "$([ -n "$pa" ] && [ -n "$pb" ] && echo yes)" "yes"
check "the ring turns to an empty slot (or its current slot is empty)" \
  "$(q 0 "SELECT awa.rotate_queue_ring()" | grep -cE '^(rotated|skipped_idle)$')" "1"
slot=$(q 0 "SELECT current_slot FROM awa.queue_ring_state")
for queue in $pa $pb; do
  for n in 1 2 3 4 5 6; do
    q 0 "SELECT awa.insert_jobs('$queue', '{mv}', p_args => ARRAY['{\"n\": $n}'::jsonb], p_max_attempts => '{1}')" >/dev/null
  done
  c=$(q 0 "SELECT job_id || ' ' || run_lease FROM awa.claim_ready_runtime('$queue', 2)")
  set -- $c
  q 0 "SELECT count(*) FROM awa.complete_jobs(ARRAY[$1], ARRAY[$2], p_queue => '$queue')" >/dev/null
  q 0 "SELECT count(*) FROM awa.complete_jobs(ARRAY[$3], ARRAY[$4], p_queue => '$queue')" >/dev/null
done
q 0 "SELECT awa.pause_queue('$pb')" >/dev/null
jobs_of="SELECT string_agg(queue || ':' || id || ':' || state || ':' || (args->>'n'), ',' ORDER BY id) FROM awa.jobs WHERE queue IN ('$pa', '$pb')"
before=$(q 0 "$jobs_of")
check "the ring seals the slot" "$(q 0 "SELECT awa.rotate_queue_ring()")" "rotated"
cur=$(q 0 "SELECT current_slot || ', ' || generation FROM awa.queue_ring_state")
prune_slot() { q 0 "SELECT awa._citus_prune_queue_slot($slot, 1000, $cur, $1)"; }
check "amortised, with free slots left in the ring, the prune leaves the slot as it is" "$(prune_slot true)" "skipped_pending"
# A REPEATABLE READ snapshot on worker 1, taken before the move, and the second queue's claim
# heads held (as a claim holds them), both until cancelled.
"$here/cluster.sh" psql 1 -c "SET application_name = 'awa_rr_hold'" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
  -c "SELECT count(*) FROM awa.queue_ring_state" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
holds=$!
"$here/cluster.sh" psql 0 -c "SET application_name = 'awa_head_hold'" -c "BEGIN" \
  -c "SELECT queue FROM awa.queue_claim_heads WHERE queue = '$pb' FOR UPDATE" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
holds="$holds $!"
for i in $(seq 1 100); do
  [ "$(q 1 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'awa_rr_hold' AND backend_xmin IS NOT NULL")" = 1 ] &&
    [ "$(q 0 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'awa_head_hold' AND query LIKE '%pg_sleep%'")" = 1 ] && break
  sleep 0.1
done
pending_in_slot="SELECT count(*) FILTER (WHERE queue = '$pa') || '/' || count(*) FILTER (WHERE queue = '$pb') FROM awa.ready_entries WHERE ready_slot = $slot AND queue IN ('$pa', '$pb')"
check "a prune moves the pending jobs of the queue whose heads are free" "$(prune_slot false)" "moved"
check "... out of the slot (the completed jobs' ready rows stay; the queue whose heads a claim holds waits)" \
  "$(q 0 "$pending_in_slot")" "2/6"
check "... with their states and bodies" "$(q 0 "$jobs_of")" "$before"
check "the next prune reads each worker's horizon" "$(prune_slot false)" "skipped_snapshots"
check "... and the slot waits while a snapshot of worker 1 taken before the move is open" \
  "$(prune_slot false)" "skipped_snapshots"
q 1 "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'awa_rr_hold'" >/dev/null
q 0 "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'awa_head_hold'" >/dev/null
wait $holds 2>/dev/null
steps=""
for i in $(seq 1 50); do
  result=$(prune_slot false)
  steps="$steps $result"
  [ "$result" = pruned ] && break
  sleep 0.1
done
check "once both end, the other queue's pending jobs move, and the slot is truncated and freed" \
  "$(echo "$steps" | grep -c ' moved')/$result/$(q 0 "SELECT generation FROM awa.queue_ring_slots WHERE slot = $slot")" "1/pruned/-1"
check "every pending job is still there, with its body; the completed ones (not kept) went with the slot" \
  "$(q 0 "$jobs_of")" "$(echo "$before" | tr ',' '\n' | grep -v ":completed:" | paste -sd, -)"
q 0 "SELECT awa.resume_queue('$pb')" >/dev/null
for queue in $pa $pb; do
  check "$queue: the moved pending jobs are claimed in lane order" \
    "$(q 0 "SELECT string_agg(args->>'n', ',' ORDER BY lane_seq) FROM awa.claim_ready_runtime('$queue', 10)")" "3,4,5,6"
done

# -- Cross-queue views and counts, answered on the coordinator.
check "awa.jobs on the coordinator shows both workers' queues" \
  "$(q 0 "SELECT count(DISTINCT queue) FROM awa.jobs WHERE queue IN ('$ma', '$mb')")" "2"
check "awa.queues on the coordinator lists both workers' queues with their counts" \
  "$(q 0 "SELECT string_agg(queue || ':' || running || ':' || (available + retryable), ',' ORDER BY queue) FROM awa.queues WHERE queue IN ('$ma', '$mb')")" \
  "$(printf '%s\n' "$ma:1:1" "$mb:0:2" | sort | paste -sd, -)"
check "... and the failed ones" \
  "$(q 0 "SELECT sum(failed) FROM awa.queues WHERE queue IN ('$ma', '$mb')")" "2"
check "awa.queues on a worker lists its own queues only" \
  "$(q 1 "SELECT count(*) FILTER (WHERE queue = '$ma') || '/' || count(*) FILTER (WHERE queue = '$mb') FROM awa.queues")" "1/0"
check "awa.queue_depth through the coordinator (delegated to the queue's worker)" \
  "$(q 0 "SELECT awa.queue_depth('$mb') >= 1")" "t"
check "awa.get_job by id alone on the coordinator finds a job of a worker" \
  "$(q 0 "SELECT queue FROM awa.get_job(${late[$mb]})")" "$mb"

# awa.shard_lag on the coordinator: every worker's lanes, gathered as awa.queues gathers its
# rows; on a worker, its own queues' lanes.
check "awa.shard_lag on the coordinator lists the lanes of both workers' queues" \
  "$(q 0 "SELECT count(DISTINCT queue) FROM awa.shard_lag WHERE queue IN ('$ma', '$mb')")" "2"
check "... its lag is the queue's cheap depth (awa.queue_depth, delegated)" \
  "$(q 0 "SELECT sum(lag) FROM awa.shard_lag WHERE queue = '$mb'")" "$(q 0 "SELECT awa.queue_depth('$mb')")"
check "... its waiting rows are the queue's available jobs (awa.queues)" \
  "$(q 0 "SELECT sum(waiting) FROM awa.shard_lag WHERE queue = '$ma'")" "$(q 0 "SELECT available FROM awa.queues WHERE queue = '$ma'")"
check "awa.shard_lag on a worker lists its own queues' lanes only" \
  "$(q 1 "SELECT (count(*) FILTER (WHERE queue = '$ma') > 0) || '/' || count(*) FILTER (WHERE queue = '$mb') FROM awa.shard_lag")" "true/0"

# awa.shard_stats on the coordinator: every worker's counters (its shared memory: the calls of
# a queue run, delegated, on its worker and count there), gathered as awa.shard_lag gathers
# its rows; on a worker, its own.
check "awa.shard_stats on the coordinator lists the counters of both workers' queues" \
  "$(q 0 "SELECT count(DISTINCT queue) FROM awa.shard_stats WHERE queue IN ('$ma', '$mb') AND enqueued > 0")" "2"
check "... the counters worker 2 keeps for its queue" \
  "$(q 0 "SELECT string_agg(concat_ws(':', enqueue_shard, enqueued, claimed, completed, failed, source), ',' ORDER BY enqueue_shard) FROM awa.shard_stats WHERE queue = '$mb'")" \
  "$(q 2 "SELECT string_agg(concat_ws(':', enqueue_shard, enqueued, claimed, completed, failed, source), ',' ORDER BY enqueue_shard) FROM awa.shard_stats WHERE queue = '$mb'")"
check "awa.shard_stats on a worker lists its own queues only" \
  "$(q 1 "SELECT (count(*) FILTER (WHERE queue = '$ma') > 0) || '/' || count(*) FILTER (WHERE queue = '$mb') FROM awa.shard_stats")" "true/0"

# awa.age_waiting_priorities over every queue would move jobs of several workers in one
# transaction: refused on the cluster, with a hint naming the per-queue form.
check "awa.age_waiting_priorities without p_queue is refused on the coordinator (0A000)" \
  "$(q 0 "SELECT awa.age_waiting_priorities('0 seconds', 10)" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "... with a hint naming p_queue" \
  "$(qv 0 "SELECT awa.age_waiting_priorities('0 seconds', 10)" | grep -c "^HINT: .*p_queue =>")" "1"
check "... and on a worker (0A000)" \
  "$(q 2 "SELECT awa.age_waiting_priorities('0 seconds', 10)" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
# With p_queue it is delegated to the queue's worker and ages there: the two oldest of three
# waiting priority-4 jobs (p_limit 2) move up to priority 3; not delegated, it is refused.
q 0 "SELECT awa.insert_jobs('$qw', '{p4,p4,p4}', p_priorities => ARRAY[4, 4, 4])" >/dev/null
check "an undelegated age_waiting_priorities (inside an expression) is refused (0A000)" \
  "$(q 0 "SELECT awa.age_waiting_priorities('0 seconds', 2, '$qw') + 0" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "a delegated age_waiting_priorities with p_queue ages the queue's oldest waiting jobs" \
  "$(q 0 "SELECT awa.age_waiting_priorities('0 seconds', 2, p_queue => '$qw')")" "2"
check "... one priority up, in lane order" \
  "$(q 0 "SELECT string_agg(priority::text, ',' ORDER BY id) FROM awa.jobs WHERE queue = '$qw' AND kind = 'p4'")" "3,3,4"

# awa.move_failed_to_dlq with p_queue is delegated to the job's worker; by id alone, or not
# delegated, it is refused and moves nothing. (The failed job: $mb's job rescued at its last
# attempt, above.)
fj=$(q 0 "SELECT id FROM awa.jobs WHERE queue = '$mb' AND kind = 'last' AND state = 'failed'")
check "move_failed_to_dlq by id alone is refused on the cluster (0A000)" \
  "$(q 0 "SELECT awa.move_failed_to_dlq(${fj:-0}, 'suite')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "an undelegated move_failed_to_dlq (inside an expression) is refused (0A000)" \
  "$(q 0 "SELECT NOT awa.move_failed_to_dlq(${fj:-0}, 'suite', '$mb')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "... and nothing was dead-lettered" "$(q 0 "SELECT count(*) FROM awa.dlq_entries WHERE queue = '$mb'")" "0"
check "a delegated move_failed_to_dlq with p_queue moves the failed job" \
  "$(q 0 "SELECT awa.move_failed_to_dlq(${fj:-0}, 'suite', p_queue => '$mb')")" "t"
check "... into the queue's dead letters on its worker, with the reason" \
  "$(q 0 "SELECT string_agg(job_id || ':' || dlq_reason, ',') FROM awa.dlq_entries WHERE queue = '$mb'")/$(q 0 "SELECT dlq FROM awa.queues WHERE queue = '$mb'")" "${fj:-0}:suite/1"
check "... a second call moves nothing" \
  "$(q 0 "SELECT awa.move_failed_to_dlq(${fj:-0}, 'suite', p_queue => '$mb')")" "f"

# The deadline rescue of a worker keeps its node's watermark (awa.rescue_progress stays
# node-local), as one server does: after the passes above it has moved up from -infinity, and an
# attempt claimed since, past its deadline, is still found.
check "a worker's deadline rescue moves its node's watermark (awa.rescue_progress)" \
  "$(q 1 "SELECT deadline_watermark > '-infinity' FROM awa.rescue_progress")" "t"
q 0 "SELECT awa.insert_jobs('$ma', '{wm}')" >/dev/null
wm_claimed=$(q 0 "SELECT count(*) FROM awa.claim_ready_runtime('$ma', 10, 0.001)")
sleep 1.2
check "... and an attempt claimed after it moved, past its deadline, is rescued" \
  "$([ "${wm_claimed:-0}" -ge 1 ] && q 1 "SELECT awa.rescue_expired_deadlines()")" "$wm_claimed"

# Freeing a slot drops the unique claims of its finished jobs on every worker, each worker
# in a transaction of its own: a completed unique job, alone in a slot sealed after it.
uq=$(queue_on uq 2)
check "the ring turns to an empty slot for the unique job (or its current slot is empty)" \
  "$(q 0 "SELECT awa.rotate_queue_ring()" | grep -cE '^(rotated|skipped_idle)$')" "1"
uid=$(q 0 "SELECT awa.insert_jobs('$uq', '{uniq}', p_unique_keys => ARRAY['\\x01'::bytea])" | tr -d '{}')
ulease=$(q 0 "SELECT job_id, run_lease FROM awa.claim_ready_runtime('$uq', 10)" | awk -F'|' -v id="$uid" '$1 == id {print $2}')
q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[$uid]::bigint[], ARRAY[${ulease:-0}]::bigint[], p_queue => '$uq')" >/dev/null
uslot=$(q 0 "SELECT ready_slot || ' ' || ready_generation FROM awa.ready_entries WHERE queue = '$uq' AND job_id = $uid")
set -- $uslot; uslot=${1:-0}; ugen=${2:-0}
check "... and seals it" "$(q 0 "SELECT awa.rotate_queue_ring()")" "rotated"
check "a freed slot drops the unique claims of its finished jobs on the workers" \
  "$(q 0 "SELECT awa._citus_free_ring_slot('queue', $uslot, 1000)")/$(q 0 "SELECT count(*) FROM awa.job_unique_claims WHERE queue = '$uq'")/$(q 0 "SELECT generation FROM awa.queue_ring_slots WHERE slot = $uslot")" \
  "pruned/0/-1"
check "... each worker noted its part freed (awa.ring_slot_closures, node-local)" \
  "$(q 1 "SELECT count(*) FROM awa.ring_slot_closures WHERE ring = 'queue' AND slot = $uslot AND generation = $ugen")/$(q 2 "SELECT count(*) FROM awa.ring_slot_closures WHERE ring = 'queue' AND slot = $uslot AND generation = $ugen")/$(q 0 "SELECT count(*) FROM awa.ring_slot_closures")" \
  "1/1/0"
check "the current slot is never freed: the coordinator refuses it, and so does a worker that sees it current" \
  "$(q 0 "SELECT awa._citus_free_ring_slot('queue', current_slot, 100) FROM awa.queue_ring_state")/$(q 1 "SELECT awa._citus_free_local_ring_slot('queue', current_slot, generation, 100) FROM awa.queue_ring_state")" \
  "skipped_not_sealed/skipped_not_sealed"
check "... nor a free slot" "$(q 0 "SELECT awa._citus_free_ring_slot('queue', $uslot, 100)")" "skipped_not_sealed"
check "... and the key is free: the same unique job is enqueued again" \
  "$(q 0 "SELECT awa.insert_jobs('$uq', '{uniq}', p_unique_keys => ARRAY['\\x01'::bytea])" | tr -d '{}' | grep -cvE "^(|$uid)$")" "1"
# A producer on a worker never writes into a slot this worker has freed its part of: shown
# with the current slot noted as freed here (rolled back), where it finds no slot to write.
check "a producer refuses a slot its worker has freed its part of (55P03), and writes nothing" \
  "$(q 2 "BEGIN; INSERT INTO awa.ring_slot_closures SELECT 'queue', current_slot, generation FROM awa.queue_ring_state; SELECT awa.insert_jobs('$uq', '{closed}'); ROLLBACK;" | grep -oE '^ERROR: +55P03' | tr -s ' ')/$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$uq' AND kind = 'closed'")" \
  "ERROR: 55P03/0"

# pg_monitor reads the views over the tables it is not granted on one server; on the cluster
# awa.citus_setup() grants it the tables behind awa.jobs and awa.lane_cursors before they are
# distributed, so their shards are made with the grant.
q 0 "CREATE ROLE awa_monitor_cl LOGIN IN ROLE pg_monitor" >/dev/null
check "a pg_monitor member reads awa.jobs and awa.lane_cursors on the coordinator, as the owner does" \
  "$(q 0 "SET ROLE awa_monitor_cl; SELECT (SELECT count(*) FROM awa.jobs) || '/' || (SELECT count(*) FROM awa.lane_cursors)")" \
  "$(q 0 "SELECT (SELECT count(*) FROM awa.jobs) || '/' || (SELECT count(*) FROM awa.lane_cursors)")"
check "... and may not write them" \
  "$(q 0 "SET ROLE awa_monitor_cl; DELETE FROM awa.ready_entries WHERE false" | grep -oE '^ERROR: +42501' | tr -s ' ')" "ERROR: 42501"

# -- Periodic jobs (docs/scale-out.md, "Periodic jobs"): a schedule's row lives on its queue's
#    worker; that worker's pass enqueues its tick and moves the schedule in one local
#    transaction; schedules are managed on the coordinator, which keeps names unique.
shard_port="SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('awa.cron_schedules', %s)"
q 0 "SELECT awa.schedule('cl_tick', '@hourly', 'tick', '$ma')" >/dev/null
check "a schedule made on the coordinator lives on its queue's worker" \
  "$(q 0 "$(printf "$shard_port" "'$ma'")")" "$((port0 + 1))"
check "schedules are managed on the coordinator only: a worker refuses (0A000)" \
  "$(q 1 "SELECT awa.schedule('cl_other', '@hourly', 'tick', '$ma')" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
check "... and so is the same name in another queue refused on the coordinator above READ COMMITTED (0A000)" \
  "$(q 0 "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT awa.schedule('cl_tick', '@hourly', 'tick', '$mb'); COMMIT" | grep -oE '^ERROR: +0A000' | tr -s ' ')" "ERROR: 0A000"
q 0 "UPDATE awa.cron_schedules SET next_run_at = date_trunc('hour', now()) WHERE queue = '$ma' AND name = 'cl_tick'" >/dev/null
check "a due tick: the coordinator's and the other worker's passes enqueue nothing, its worker's one job" \
  "$(q 0 "SELECT awa.run_schedules()")/$(q 2 "SELECT awa.run_schedules()")/$(q 1 "SELECT awa.run_schedules()")" "0/0/1"
check "... a second pass on its worker enqueues nothing for the same tick" "$(q 1 "SELECT awa.run_schedules()")" "0"
check "... the job is in the queue with run_at = the tick, and the schedule names it and moved on" \
  "$(q 0 "SELECT count(*) || '/' || bool_and(j.run_at = date_trunc('hour', now()) AND s.last_job_id = j.id AND s.next_run_at = j.run_at + interval '1 hour') FROM awa.jobs j JOIN awa.schedules s ON s.name = 'cl_tick' WHERE j.queue = '$ma' AND j.kind = 'tick'")" "1/true"
check "a schedule moved to a queue of the other worker keeps its next tick, and its row goes there" \
  "$(q 0 "SELECT awa.schedule('cl_tick', '@hourly', 'tick', '$mb') = date_trunc('hour', now()) + interval '1 hour'")/$(q 0 "SELECT count(*) FROM awa.cron_schedules WHERE name = 'cl_tick'")/$(q 0 "$(printf "$shard_port" "'$mb'")")" \
  "t/1/$((port0 + 2))"
q 0 "UPDATE awa.cron_schedules SET next_run_at = date_trunc('hour', now()) WHERE queue = '$mb' AND name = 'cl_tick'" >/dev/null
check "... where that worker's pass enqueues its tick, and the first worker's none" \
  "$(q 1 "SELECT awa.run_schedules()")/$(q 2 "SELECT awa.run_schedules()")/$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$mb' AND kind = 'tick'")" "0/1/1"
check "pause, resume and unschedule on the coordinator" \
  "$(q 0 "SELECT awa.pause_schedule('cl_tick')::text || awa.resume_schedule('cl_tick')::text || (SELECT (NOT paused AND next_run_at > now())::text FROM awa.schedules WHERE name = 'cl_tick') || awa.unschedule('cl_tick')::text || awa.unschedule('cl_tick')::text")" \
  "truetruetruetruefalse"

# The background maintenance worker of a worker node (awa_shard.maintenance, off in this
# cluster until now) runs the same steps: it promotes a due job of its queue.
# It also enqueues the ticks of a one-second schedule of its queue, each once.
q 0 "SELECT awa.schedule('bg_tick', '1 seconds', 'bgtick', '$ma')" >/dev/null
q 1 "ALTER SYSTEM SET awa_shard.maintenance = on" >/dev/null; q 1 "SELECT pg_reload_conf()" >/dev/null
q 0 "SELECT awa.insert_jobs('$ma', '{bg}', p_run_ats => ARRAY[now() + interval '1 second'])" >/dev/null
state=""
for i in $(seq 1 60); do
  state=$(q 0 "SELECT string_agg(state::text, ',') FROM awa.jobs WHERE queue = '$ma' AND kind = 'bg'")
  [ "$state" = available ] && break
  sleep 0.5
done
check "worker 1's background maintenance promotes its queue's due job" "$state" "available"
check "... and reports no error" "$(q 1 "SELECT count(*) FROM awa.maintenance_status WHERE database = current_database() AND served_by = 'worker' AND last_error IS NULL")" "1"
ticks=""
for i in $(seq 1 60); do
  ticks=$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$ma' AND kind = 'bgtick'")
  [ "${ticks:-0}" -ge 3 ] && break
  sleep 0.5
done
q 0 "SELECT awa.pause_schedule('bg_tick')" >/dev/null
check "... and enqueues the ticks of its queue's one-second schedule, each once, on the second" \
  "$(q 0 "SELECT count(*) >= 3 AND count(*) = count(DISTINCT run_at) AND bool_and(run_at = date_trunc('second', run_at)) FROM awa.jobs WHERE queue = '$ma' AND kind = 'bgtick'")" "t"
q 1 "ALTER SYSTEM RESET awa_shard.maintenance" >/dev/null; q 1 "SELECT pg_reload_conf()" >/dev/null

# -- A per-key concurrency limit on the cluster: the claim's count and record run as
#    statements on the queue's worker (the direct routines step aside under Citus); a
#    completed attempt's place is reused in place, the cap holds in lane order.
q 0 "SELECT awa.create_queue('pk_cl', 1)" >/dev/null
q 0 "SELECT awa.set_concurrency_limit('pk_cl', 2, p_per_key => true)" >/dev/null
q 0 "SELECT awa.insert_jobs('pk_cl', '{k}', p_concurrency_keys => ARRAY['a', 'a', 'a', 'b', 'b', 'b'])" >/dev/null
pk_first=$(q 0 "SELECT job_id FROM awa.claim_ready_runtime('pk_cl', 10)" | head -n 1)
check "a per-key limit of 2 on the cluster: a claim takes a, a and stops at the third a" \
  "$(q 0 "SELECT string_agg(concurrency_key || place || ':' || lane_seq, ',' ORDER BY concurrency_key, place) FROM awa.key_attempts WHERE queue = 'pk_cl'")" "a0:1,a1:2"
q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[${pk_first:-0}]::bigint[], ARRAY[1]::bigint[], p_queue => 'pk_cl')" >/dev/null
check "... a completion frees its place: the next claim takes a (in that place), b, b" \
  "$(q 0 "SELECT string_agg(lane_seq::text, ',' ORDER BY lane_seq) FROM awa.claim_ready_runtime('pk_cl', 10)")/$(q 0 "SELECT string_agg(concurrency_key || place || ':' || lane_seq, ',' ORDER BY concurrency_key, place) FROM awa.key_attempts WHERE queue = 'pk_cl'")" \
  "3,4,5/a0:3,a1:2,b0:4,b1:5"
check "... and the third b waits for its key's place" \
  "$(q 0 "SELECT count(*) FROM awa.claim_ready_runtime('pk_cl', 10)")" "0"
# The prune of unused places reads the shards of awa.key_attempts on the worker it runs on: a
# place whose attempt's claim slot is not live (written here by hand) goes, the places of the
# running attempts stay; the coordinator holds no shard of it.
q 0 "INSERT INTO awa.key_attempts (queue, concurrency_key, place, job_id, run_lease, priority, enqueue_shard, lane_seq, ready_slot, ready_generation, claim_slot) VALUES ('pk_cl', 'gone', 0, -1, 1, 2, 0, 0, 0, 0, -1)" >/dev/null
pk_node=$(( $(q 0 "$(printf "$placement" "'pk_cl'")") - port0 ))
check "prune_key_places on the queue's worker removes a place whose claim slot is not live, keeps the places in use" \
  "$(q "$pk_node" "SELECT awa.prune_key_places(1000000)")/$(q 0 "SELECT string_agg(concurrency_key || place, ',' ORDER BY concurrency_key, place) FROM awa.key_attempts WHERE queue = 'pk_cl'")" \
  "1/a0,a1,b0,b1"
check "... and removes nothing on the coordinator" "$(q 0 "SELECT awa.prune_key_places()")" "0"
q 0 "SELECT awa.drop_queue('pk_cl', true)" >/dev/null

# -- drop_queue, delegated: the queue's jobs, lanes and claim marks go on its worker (the
#    trigger that drops a lane's marks names the queue, lane by lane); the queue can be used again.
q 0 "SELECT awa.insert_jobs('dq_cl', '{a,b,c}')" >/dev/null
q 0 "SELECT job_id FROM awa.claim_ready_runtime('dq_cl', 1)" >/dev/null
check "drop_queue through the coordinator drops the queue's jobs, lanes and marks" \
  "$(q 0 "SELECT awa.drop_queue('dq_cl', true)")/$(q 0 "SELECT (SELECT count(*) FROM awa.jobs WHERE queue = 'dq_cl') + (SELECT count(*) FROM awa.queue_claim_heads WHERE queue = 'dq_cl') + (SELECT count(*) FROM awa.claim_marks WHERE queue = 'dq_cl')")" "3/0"
check "... and the queue is used afresh afterwards" \
  "$(q 0 "SELECT awa.insert_jobs('dq_cl', '{d}')" >/dev/null; q 0 "SELECT kind || ':' || lane_seq FROM awa.claim_ready_runtime('dq_cl', 5)")" "d:1"

# -- A split of a live queue's shard (citus_split_shard_by_split_points, both new shards on
#    the same worker, which keeps the lane sequences there): a worker session's kept claim
#    plan names the old shard, which Citus keeps for a while; the session's next claim makes
#    the plan again for the new shard, so it takes the queue's next jobs, and no job is
#    claimed twice.
qs=""
for i in $(seq 1 40); do
  [ "$(q 0 "$(printf "$placement" "'sp$i'")")" = $((port0 + 1)) ] && { qs=sp$i; break; }
done
q 0 "SELECT awa.create_queue('$qs', 1)" >/dev/null
q 0 "SELECT awa.insert_jobs('$qs', '{a,b,c,d,e,f}')" >/dev/null
old_shard=$(q 0 "SELECT get_shard_id_for_distribution_column('awa.queue_meta', '$qs')")
node1=$(q 0 "SELECT nodeid FROM pg_dist_node WHERE nodeport = $((port0 + 1))")
split="SELECT citus_split_shard_by_split_points($old_shard, ARRAY[(worker_hash('$qs'::text) - 1)::text], ARRAY[$node1, $node1], 'block_writes')"
check "a worker session claims across a split of its queue's shard: the next jobs each time" \
  "$("$here/cluster.sh" psql 1 -c "SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('$qs', 2)" \
       -c "\\! bash '$here/cluster.sh' psql 0 -c \"$split\" >/dev/null 2>&1" \
       -c "SELECT string_agg(kind, ',') FROM awa.claim_ready_runtime('$qs', 2)" 2>/dev/null | paste -sd/ -)" "a,b/c,d"
check "... the queue's rows are in a new shard" \
  "$(q 0 "SELECT get_shard_id_for_distribution_column('awa.queue_meta', '$qs') <> ${old_shard:-0}")" "t"
check "... which the second claim wrote: four jobs running, two available" \
  "$(q 0 "SELECT string_agg(kind || ':' || state, ',' ORDER BY kind) FROM awa.jobs WHERE queue = '$qs'")" \
  "a:running,b:running,c:running,d:running,e:available,f:available"

# Once Citus drops the old shards (citus_cleanup_orphaned_resources here; the suite's nodes
# turn off Citus's own timed drop, citus.defer_shard_delete_interval = -1, so that it comes
# at this step and no earlier), the lane sequence that belonged to the old shard of the lane
# heads goes with it. A claim passes the lane over until the node's next maintenance pass (or
# enqueue) makes the sequence again past the lane's rows; then the pending jobs are claimed
# in order, and an enqueue continues the lane after them.
q 0 "CALL citus_cleanup_orphaned_resources()" >/dev/null
check "after the split's old shards are dropped, a claim passes the lane over (its sequence went with them)" \
  "$(q 0 "SELECT count(*) FROM awa.claim_ready_runtime('$qs', 10)")/$(q 0 "SELECT count(*) FROM awa.jobs WHERE queue = '$qs' AND state = 'available'")" "0/2"
check "... the worker's maintenance pass makes it again, and a claim takes the pending jobs in order" \
  "$(q 1 "SELECT awa.promote_due()" >/dev/null; q 0 "SELECT string_agg(kind || ':' || lane_seq, ',' ORDER BY lane_seq) FROM awa.claim_ready_runtime('$qs', 10)")" "e:5,f:6"
check "... and an enqueue continues the lane after them" \
  "$(q 0 "SELECT awa.insert_jobs('$qs', '{g}')" >/dev/null; q 0 "SELECT kind || ':' || lane_seq FROM awa.claim_ready_runtime('$qs', 10)")" "g:7"

# -- A live queue's shards moved to the other worker and back (citus_move_shard_placement, as
#    the rebalancer does after citus_add_node). A lane's sequence belongs to the local shard of
#    the lane heads, so it leaves with it; on the new worker the next maintenance pass (or the
#    first enqueue) makes it again past the lane's rows: the pending jobs are claimed in order,
#    new jobs go after them, and no lane position is used twice.
qm=""
for i in $(seq 1 40); do
  [ "$(q 0 "$(printf "$placement" "'mv$i'")")" = $((port0 + 1)) ] && { qm=mv$i; break; }
done
q 0 "SELECT awa.create_queue('$qm', 1)" >/dev/null
q 0 "SELECT awa.insert_jobs('$qm', '{a,b,c,d}')" >/dev/null
q 0 "SELECT job_id FROM awa.claim_ready_runtime('$qm', 1)" >/dev/null
mv_shard=$(q 0 "SELECT get_shard_id_for_distribution_column('awa.queue_meta', '$qm')")
move() { q 0 "SELECT citus_move_shard_placement($mv_shard, 'localhost', $((port0 + $1)), 'localhost', $((port0 + $2)), 'block_writes')" >/dev/null; }
# A claim whose transaction is still open on worker 1 when the move starts (a claim writes the
# queue's shards by name, which Citus's own blocking of writes does not cover): the move waits
# for it (each call holds its queue's shard in place to its end), so its claim moves too and
# the claimed job is not claimed again. (Without that, the job showed available again.)
q 0 "SELECT awa.insert_jobs('$qm', '{late}')" >/dev/null
q 0 "BEGIN; SELECT job_id FROM awa.claim_ready_runtime('$qm', 1); SELECT pg_sleep(2); COMMIT;" > "$AWA_CITUS_WORK.late" 2>&1 &
late_tx=$!
for i in $(seq 1 50); do
  [ "$(q 1 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%claim_ready_runtime(''$qm''%' AND pid <> pg_backend_pid()")" -ge 1 ] && break
  sleep 0.1
done
move 1 2
wait "$late_tx"
check "a queue's shards moved to worker 2: placed there" "$(q 0 "$(printf "$placement" "'$qm'")")" "$((port0 + 2))"
check "... a claim in progress when the move started: the move waited for it, and its claim moved too" \
  "$(q 0 "SELECT string_agg(kind || ':' || state, ',' ORDER BY lane_seq) FROM awa.jobs WHERE queue = '$qm'")" \
  "a:running,b:running,c:available,d:available,late:available"
check "... worker 2's maintenance pass makes the lane's sequence again, and a claim takes the next pending job" \
  "$(q 2 "SELECT awa.promote_due()" >/dev/null; q 0 "SELECT kind || ':' || lane_seq FROM awa.claim_ready_runtime('$qm', 1)")" "c:3"
check "... new jobs go after the pending ones" \
  "$(q 0 "SELECT awa.insert_jobs('$qm', '{e,f}')" >/dev/null; q 0 "SELECT string_agg(kind || ':' || lane_seq, ',' ORDER BY lane_seq) FROM awa.claim_ready_runtime('$qm', 10)")" "d:4,late:5,e:6,f:7"
move 2 1
check "moved back to worker 1, the first enqueue (a REPEATABLE READ producer) makes the lane's sequence again there, past the lane's rows" \
  "$(q 0 "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT awa.insert_jobs('$qm', '{g}'); COMMIT;" >/dev/null; q 0 "SELECT kind || ':' || lane_seq FROM awa.claim_ready_runtime('$qm', 10)")" "g:8"
check "... every job of the queue is there once, each at its own lane position" \
  "$(q 0 "SELECT count(*) || '/' || count(DISTINCT lane_seq) || '/' || string_agg(DISTINCT state::text, ',') FROM awa.jobs WHERE queue = '$qm'")" "8/8/running"

# -- pg_dump of the coordinator.
dump=$("$bin/pg_dump" -h "$AWA_CITUS_WORK/sock" -p "$port0" -U postgres -d "${AWA_CITUS_DB:-awa}" 2>&1); rc=$?
check "pg_dump of the coordinator succeeds" "$rc" "0"
check "... and names both extensions" "$(echo "$dump" | grep -cE '^CREATE EXTENSION IF NOT EXISTS (citus|awa_shard) ')" "2"
check "... and holds the schedules, kept on the workers" "$(echo "$dump" | grep -cE '^bg_tick	1 seconds	UTC	bgtick	')" "1"

# -- A worker that does not answer fails the cross-queue views on the coordinator (58000)
# rather than leaving its queues out; they answer again once it is back.
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
q 0 "SELECT awa.insert_jobs('$qa', '{down}')" >/dev/null
q 0 "SELECT awa.rotate_queue_ring()" >/dev/null
as_postgres "$bin/pg_ctl -D '$AWA_CITUS_WORK/n2' -m fast -w stop" >/dev/null
check "awa.queues on the coordinator fails (58000) while a worker does not answer" \
  "$(q 0 "SELECT count(*) FROM awa.queues" | grep -o 58000 | head -n 1)" "58000"
check "... and so does awa.shard_lag" "$(q 0 "SELECT count(*) FROM awa.shard_lag" | grep -o 58000 | head -n 1)" "58000"
check "... and awa.shard_stats" "$(q 0 "SELECT count(*) FROM awa.shard_stats" | grep -o 58000 | head -n 1)" "58000"
# Freeing a slot needs every worker: one that does not answer makes the prune step back (a
# warning names it), and no move is tried over it, whatever the other worker answers.
check "a prune steps back while a worker does not answer (skipped_worker_error, with a warning)" \
  "$(qv 0 "SELECT awa._citus_free_ring_slot('queue', s.slot, 100) FROM awa.queue_ring_slots s, awa.queue_ring_state r WHERE s.generation >= 0 AND s.slot <> r.current_slot ORDER BY s.generation LIMIT 1" | grep -cE '^(WARNING: .*failed on a worker|skipped_worker_error$)')" "2"
check "... and prune_queue_ring answers a reason, never an error" \
  "$(q 0 "SELECT awa.prune_queue_ring()" | grep -cE '^skipped_[a-z_]+$')" "1"
as_postgres "$bin/pg_ctl -D '$AWA_CITUS_WORK/n2' -l '$AWA_CITUS_WORK/n2.log' -w start" >/dev/null
check "... and both answer again, with worker 2's queue, once it is back" \
  "$(q 0 "SELECT (SELECT count(*) FROM awa.queues WHERE queue = '$mb') || '/' || (SELECT count(*) > 0 FROM awa.shard_lag WHERE queue = '$mb')")" "1/true"
check "... and awa.shard_stats answers again (worker 2's counters start afresh with its restart)" \
  "$(q 0 "SELECT count(*) FILTER (WHERE queue = '$ma') > 0 FROM awa.shard_stats")" "t"

# -- The single-node isolation specs of per-queue promises (test/citus/specs.list), run through
#    the coordinator against the same expected outputs as on one node (test/citus/specs.sh):
#    a check each.
out=$("$here/specs.sh" 2>&1)
echo "$out" | grep -v '^citus specs:'
passed=$((passed + $(echo "$out" | grep -c '^ok - '))); failed=$((failed + $(echo "$out" | grep -c '^not ok - ')))
[ -n "$(echo "$out" | grep '^citus specs:')" ] || { echo "not ok - test/citus/specs.sh did not finish"; failed=$((failed + 1)); }

summary
[ "$failed" -eq 0 ]
