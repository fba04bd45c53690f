#!/usr/bin/env bash
# Live test of monitoring/queries.yaml with prometheus-postgres-exporter (Debian 12's package).
# A preloaded server has database awa_mon with the extension and jobs in several states, and
# database plain without it. The exporter runs with --auto-discover-databases as a login role
# that has only pg_monitor, and /metrics must show the per-queue (awa_queue_*) and per-shard
# (awa_shard_*) series once each, with the values SQL reports. Run as the postgres user;
# prints "exporter: N passed, M failed".
TEST=exporter; . "$(dirname "$0")/lib.sh"
EXPORTER=${EXPORTER:-/usr/bin/prometheus-postgres-exporter}
tree="$(cd "$(dirname "$0")/../.." && pwd)"
queries="$tree/monitoring/queries.yaml"

# Every query of the file runs only in the database of DATA_SOURCE_NAME (master: true).
queries_n=$(grep -cE '^[a-z_]+:$' "$queries")
master_n=$(awk '/^[a-z_]+:$/ {q=$1} /^  master: true$/ && q {m++; q=""} END {print m+0}' "$queries")
check "queries.yaml has queries" "$(( queries_n > 0 ))" "1"
check "every query in queries.yaml has master: true" "$master_n" "$queries_n"

if [ ! -x "$EXPORTER" ] || ! command -v curl >/dev/null; then
  echo "SKIP exporter: $EXPORTER or curl is not installed (apt-get install prometheus-postgres-exporter curl)"
  if [ "${CI:-}" = true ]; then failed=$((failed+1)); fi
  summary; [ "$failed" -eq 0 ]; exit
fi

eport=$((19100 + RANDOM % 800))
exporter_pid=""
cleanup() {
  [ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null && wait "$exporter_pid" 2>/dev/null
  drop_server
}
new_server exporter 52000
start_server "-c listen_addresses='' -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off" \
  || give_up "the server did not start"
q postgres -c "CREATE DATABASE awa_mon" -c "CREATE DATABASE plain" -c "CREATE ROLE awa_exporter LOGIN IN ROLE pg_monitor"
q awa_mon >/dev/null <<'SQL'
CREATE EXTENSION awa_shard;
SELECT awa.set_enqueue_shards('emails', 4);
-- 20 keyed jobs spread over the four shards of emails; 6 claimed, 2 of them completed.
SELECT count(*) FROM generate_series(1, 20) i, LATERAL awa.insert_job_compat('send', 'emails', p_ordering_key => convert_to('customer-' || i, 'UTF8'));
-- A claim takes from one lane: six claims of one job each.
CREATE TEMP TABLE claimed (job_id bigint, run_lease bigint);
SELECT format('INSERT INTO claimed SELECT job_id, run_lease FROM awa.claim_ready_runtime(%L, 1)', 'emails')
  FROM generate_series(1, 6) \gexec
SELECT awa.complete_jobs(array_agg(job_id), array_agg(run_lease))
  FROM (SELECT job_id, run_lease FROM claimed ORDER BY job_id LIMIT 2) c;
-- reports: 3 waiting jobs and one scheduled for tomorrow.
SELECT count(*) FROM generate_series(1, 3) i, LATERAL awa.insert_job_compat('build', 'reports', jsonb_build_object('i', i));
SELECT awa.insert_job_compat('build', 'reports', p_run_at => now() + interval '1 day');
SQL
[ $? -eq 0 ] || give_up "set-up failed"

# What SQL says, to compare with what the exporter shows.
sql_waiting=$(q awa_mon -c "SELECT sum(waiting) FROM awa.shard_lag WHERE queue = 'emails'")
sql_shards=$(q awa_mon -c "SELECT count(DISTINCT enqueue_shard) FROM awa.shard_lag WHERE queue = 'emails'")
sql_per_shard=$(q awa_mon -F ' ' -c "SELECT enqueue_shard, sum(waiting) FROM awa.shard_lag WHERE queue = 'emails' GROUP BY 1 ORDER BY 1")
check "the set-up left 14 emails waiting" "$sql_waiting" "14"
check "the keyed emails landed on more than one shard" "$(( sql_shards > 1 ))" "1"

DATA_SOURCE_NAME="host=$dir port=$port user=awa_exporter dbname=awa_mon sslmode=disable" \
  "$EXPORTER" --web.listen-address="127.0.0.1:$eport" --extend.query-path="$queries" \
  --auto-discover-databases --log.level=warn > "$dir/exporter.log" 2>&1 &
exporter_pid=$!
metrics=""
for _ in $(seq 1 50); do
  metrics=$(curl -s "http://127.0.0.1:$eport/metrics" 2>/dev/null)
  echo "$metrics" | grep -q '^awa_queue_waiting{' && break
  sleep 0.2
done
echo "$metrics" > "$dir/metrics.txt"

# Value of the one sample of metric $1 whose labels contain every label=value given after it.
value() {
  local name="$1"; shift
  echo "$metrics" | awk -v name="$name" -v want="$*" '
    index($0, name "{") == 1 {
      labels = substr($0, length(name) + 2); sub(/}.*/, "", labels)
      n = split(want, w, " "); ok = 1
      for (i = 1; i <= n; i++) if (index("," labels ",", "," w[i] ",") == 0) ok = 0
      if (ok) { hits++; v = $NF }
    }
    END { if (hits == 1) print v + 0; else print "samples:" hits + 0 }'
}

check "the exporter loaded queries.yaml without error" "$(echo "$metrics" | awk '/^pg_exporter_user_queries_load_error/ {s += $NF} END {print s + 0}')" "0"
check "the exporter's last scrape had no error" "$(echo "$metrics" | awk '/^pg_exporter_last_scrape_error / {print $NF + 0}')" "0"
check "awa_queue_waiting for emails (once, despite auto-discovery)" "$(value awa_queue_waiting 'queue="emails"')" "$sql_waiting"
check "awa_queue_running for emails" "$(value awa_queue_running 'queue="emails"')" "4"
check "awa_queue_lag for emails" "$(value awa_queue_lag 'queue="emails"')" "14"
check "awa_queue_enqueue_shards for emails" "$(value awa_queue_enqueue_shards 'queue="emails"')" "4"
check "awa_queue_enqueued_total for emails" "$(value awa_queue_enqueued_total 'queue="emails"' 'source="shared_memory"')" "20"
check "awa_queue_claimed_total for emails" "$(value awa_queue_claimed_total 'queue="emails"')" "6"
check "awa_queue_completed_total for emails" "$(value awa_queue_completed_total 'queue="emails"')" "2"
check "awa_queue_waiting for reports" "$(value awa_queue_waiting 'queue="reports"')" "3"
check "awa_queue_scheduled for reports" "$(value awa_queue_scheduled 'queue="reports"')" "1"
check "awa_queue_oldest_wait_seconds for emails is above zero" \
  "$(echo "$metrics" | awk '/^awa_queue_oldest_wait_seconds\{.*queue="emails"/ {print ($NF > 0)}')" "1"
check "one awa_shard_waiting series per shard of emails" \
  "$(echo "$metrics" | grep -c '^awa_shard_waiting{.*queue="emails"')" "$sql_shards"
while read -r shard waiting; do
  check "awa_shard_waiting for emails shard $shard" "$(value awa_shard_waiting 'queue="emails"' "shard=\"$shard\"")" "$waiting"
done <<< "$sql_per_shard"
check "awa_shard_enqueued_total summed over the shards of emails" \
  "$(echo "$metrics" | awk '/^awa_shard_enqueued_total\{.*queue="emails"/ {s += $NF} END {print s + 0}')" "20"
check "awa_shard_claimed_total summed over the shards of emails" \
  "$(echo "$metrics" | awk '/^awa_shard_claimed_total\{.*queue="emails"/ {s += $NF} END {print s + 0}')" "6"
check "awa_shard_draining is 0 on every shard" \
  "$(echo "$metrics" | awk '/^awa_shard_draining\{/ {n++; s += $NF} END {print (n > 0 && s == 0)}')" "1"
if [ "$failed" -gt 0 ]; then
  echo "--- exporter log"; tail -n 20 "$dir/exporter.log"
  echo "--- awa series"; grep '^awa_' "$dir/metrics.txt" | head -n 40
fi
summary
[ "$failed" -eq 0 ]
