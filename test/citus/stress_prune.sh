#!/usr/bin/env bash
# The rings' prunes on a Citus cluster under traffic, by hand (not in CI): what the prunes
# return and which errors anything meets, and an audit that no job is lost or claimed twice.
# Run on a cluster started with test/citus/cluster.sh (same AWA_CITUS_WORK), e.g.
#   AWA_CITUS_WORK=/tmp/awa_stress test/citus/cluster.sh start
#   AWA_CITUS_WORK=/tmp/awa_stress SECS=40 test/citus/stress_prune.sh
# Workload: QUEUES queues on each worker, each with 2 producers (3 jobs a call) and 2
# claimers (4 a call: every fifth call fails one job, completes the rest); one admin
# cancelling and retrying; the coordinator rotating the three rings and pruning them every
# 0.3 s, with awa.run_maintenance() every fourth turn. Then every queue is drained.
# FAILED_RETENTION (default 0 seconds) is each queue's failed retention: failed jobs kept past
# their slot (retention 'NULL', the default of a queue) keep it on a cluster, so the queue
# ring's truncate is reached only once they are not kept.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${AWA_CITUS_WORK:?set AWA_CITUS_WORK to the directory of the cluster}"
SECS=${SECS:-40}
QUEUES=${QUEUES:-2}
FAILED_RETENTION=${FAILED_RETENTION:-0 seconds}
log=$(mktemp -d /tmp/awa_stress_log.XXXXXX)
chmod 777 "$log"

q() { local n=$1; shift; "$here/cluster.sh" psql "$n" -XAtq -c '\set VERBOSITY sqlstate' -c 'SET client_min_messages = warning' -c "$*" 2>&1; }
port0=$(cat "$AWA_CITUS_WORK/port")
placement="SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('awa.queue_meta', %s)"
queue_on() { local i; for i in $(seq 1 60); do [ "$(q 0 "$(printf "$placement" "'$1$i'")")" = $((port0 + $2)) ] && { echo "$1$i"; return; }; done; }

tag=st$(date +%s)
queues=""
for w in 1 2; do
  for n in $(seq 1 "$QUEUES"); do queues="$queues $(queue_on "${tag}w${w}q${n}x" "$w")"; done
done
[ -n "${queues// /}" ] || { echo "no queue found on the workers: is the cluster up? ($(q 0 "SELECT 1" | head -1))"; exit 1; }
for qq in $queues; do
  q 0 "SELECT awa.create_queue('$qq')" >/dev/null
  q 0 "SELECT awa.set_queue_retention('$qq', '0 seconds', $( [ "$FAILED_RETENTION" = NULL ] && echo NULL || echo "'$FAILED_RETENTION'"))" >/dev/null
done
echo "== workload: ${SECS}s; failed retention $FAILED_RETENTION; queues:$queues; 2 producers (3 jobs a call) and 2 claimers (4 a call) a queue; admin; coordinator rotating and pruning every 0.3 s"
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {print int($2 / 1024) " MB"}' /proc/meminfo); $(q 0 "SELECT 'fsync=' || current_setting('fsync') || ' synchronous_commit=' || current_setting('synchronous_commit')")"

end=$(( $(date +%s) + SECS ))
producer() { local qq=$1 me=$2 n=0
  while [ "$(date +%s)" -lt "$end" ]; do n=$((n + 1))
    # Alone in its statement, so that Citus delegates it: '{id,id,id}', one id a line.
    q 0 "SELECT awa.insert_jobs('$qq', '{s,s,s}', p_max_attempts => '{1,1,1}')" | tr -d '{}' | tr ',' '\n' >> "$log/produced_$me"
  done; }
claimer() { local qq=$1 me=$2 n=0 r ids leases
  while [ "$(date +%s)" -lt "$end" ]; do n=$((n + 1))
    r=$(q 0 "SELECT job_id || ' ' || run_lease FROM awa.claim_ready_runtime('$qq', 4)")
    [ -z "$r" ] && { sleep 0.05; continue; }
    echo "$r" >> "$log/claimed_$me"
    echo "$r" | grep -q ERROR && continue
    if [ $((n % 5)) = 0 ]; then
      set -- $(echo "$r" | head -1)
      [ "$(q 0 "SELECT awa.fail_job($1, $2, 'stress', p_queue => '$qq')")" = failed ] && echo "$1" >> "$log/failed_$me"
      r=$(echo "$r" | sed 1d)
    fi
    [ -z "$r" ] && continue
    ids=$(echo "$r" | awk '{print $1}' | paste -sd,); leases=$(echo "$r" | awk '{print $2}' | paste -sd,)
    q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[$ids]::bigint[], ARRAY[$leases]::bigint[], p_queue => '$qq')" >> "$log/completed_$me"
  done; }
admin() { local id r
  while [ "$(date +%s)" -lt "$end" ]; do
    for qq in $queues; do
      id=$(q 0 "SELECT id FROM awa.jobs WHERE queue = '$qq' AND state = 'available' ORDER BY random() LIMIT 1")
      if [ -n "$id" ]; then
        r=$(q 0 "SELECT awa.cancel_job($id, '$qq')")
        [ "$r" = t ] && echo "$id" >> "$log/cancelled" || echo "$r" >> "$log/admin"
      fi
      q 0 "SELECT awa.retry_jobs('$qq', NULL, 2)" >> "$log/admin"
    done
    sleep 0.5
  done; }
# One line a call: its name and what it returned (an error's lines joined).
call() { echo "$1 $(q 0 "$2" | tr '\n' ' ' | sed 's/ $//')" >> "$log/coordinator"; }
coordinator() { local n=0
  while [ "$(date +%s)" -lt "$end" ]; do n=$((n + 1))
    call rotate_queue "SELECT awa.rotate_queue_ring()"
    call rotate_claim "SELECT awa.rotate_attempt_ring('claim')"
    call rotate_lease "SELECT awa.rotate_attempt_ring('lease')"
    call prune_queue "SELECT awa.prune_queue_ring()"
    call prune_queue "SELECT awa.prune_queue_ring()"
    call prune_claim "SELECT awa.prune_attempt_ring('claim')"
    call prune_lease "SELECT awa.prune_attempt_ring('lease')"
    [ $((n % 4)) = 0 ] && call run_maintenance "SELECT CASE WHEN r ? 'queue_prune' THEN 'ok' ELSE r::text END FROM awa.run_maintenance() r"
    sleep 0.3
  done; }

for qq in $queues; do
  producer "$qq" "${qq}_a" & producer "$qq" "${qq}_b" &
  claimer "$qq" "${qq}_c1" & claimer "$qq" "${qq}_c2" &
done
admin & coordinator &
wait

# Drain: whatever is still available is claimed and completed.
for qq in $queues; do
  for i in $(seq 1 200); do
    r=$(q 0 "SELECT job_id || ' ' || run_lease FROM awa.claim_ready_runtime('$qq', 100)")
    [ -z "$r" ] && break
    echo "$r" >> "$log/claimed_drain"
    echo "$r" | grep -q ERROR && continue
    q 0 "SELECT job_id FROM awa.complete_jobs(ARRAY[$(echo "$r" | awk '{print $1}' | paste -sd,)]::bigint[], ARRAY[$(echo "$r" | awk '{print $2}' | paste -sd,)]::bigint[], p_queue => '$qq')" >> "$log/completed_drain"
  done
done

echo "== the coordinator's calls (result: count)"
awk '{k = $1 " " (match($0, /ERROR: +[0-9A-Z]{5}/) ? substr($0, RSTART, RLENGTH) : $NF); gsub(/ +/, " ", k); c[k]++}
     END {for (k in c) print "  " k ": " c[k]}' "$log/coordinator" | sort
echo "== warnings of the coordinator's calls (first 5)"
grep -oE 'WARNING: .*' "$log/coordinator" | cut -c1-300 | head -5 | sed 's/^/  /'
echo "== errors met by producers, claimers and the admin, by SQLSTATE"
cat "$log"/produced_* "$log"/claimed_* "$log"/completed_* "$log"/failed_* "$log"/admin 2>/dev/null |
  grep -oE '^ERROR: +[0-9A-Z]{5}' | tr -s ' ' | sort | uniq -c | sed 's/^/  hot path and admin: /'
grep -vhE '^[0-9]+$' "$log"/produced_* | sort -u > "$log/produced_errors"
grep -hE '^[0-9]+$' "$log"/produced_* | sort -u > "$log/all_produced"
grep -hE '^[0-9]+ [0-9]+$' "$log"/claimed_* | sort > "$log/all_claims"
cat "$log"/completed_* "$log"/failed_* "$log/cancelled" 2>/dev/null | grep -E '^[0-9]+$' | sort -u > "$log/all_ended"
in_list=$(echo $queues | sed "s/ /','/g")
q 0 "SELECT id FROM awa.jobs WHERE queue IN ('$in_list')" | sort -u > "$log/still_there"
echo "== audit"
echo "  jobs produced: $(wc -l < "$log/all_produced"); claims: $(wc -l < "$log/all_claims"); ended (completed, failed, cancelled): $(wc -l < "$log/all_ended"); still listed: $(wc -l < "$log/still_there")"
echo "  claimed twice (same job and lease): $(awk '{print $1, $2}' "$log/all_claims" | uniq -d | wc -l)"
echo "  lost (produced, never ended, not listed): $(sort -u "$log/all_ended" "$log/still_there" | comm -23 "$log/all_produced" - | wc -l)"
echo "  left available after the drain: $(q 0 "SELECT count(*) FROM awa.jobs WHERE queue IN ('$in_list') AND state = 'available'")"
echo "== logs: $log"
