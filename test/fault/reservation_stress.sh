#!/usr/bin/env bash
# Live stress test of the lane reservation promise (docs/design.md §3: the lane lock held
# to commit, or the registry's reservation fence): six producers (four READ COMMITTED, two
# REPEATABLE READ) enqueue single jobs and batches, keyed and keyless, into several lanes
# per transaction of a queue at S = 1 and one at S = 4, sleep inside their open
# transactions, roll back savepoints and whole transactions; three workers claim and complete, recording every claim in the claiming
# transaction. Mid-run the postmaster is killed with SIGKILL and restarted; everybody
# reconnects. After a drain it checks that every committed job was claimed exactly once,
# nothing rolled back was ever claimed, and each lane handed out its lane_seq in increasing
# order across the whole run (crash included). Passes in either reservation mode; a claim
# that steps over an in-flight reservation fails it.
# Each job's args carry {"t": token, "c": intended commit}; public.stress_committed is
# written by the producing (sub)transaction itself, so the database defines what committed.
# RESERVATION_SLOTS=4 runs it with a registry of four fixed entries, full most of the time
# (the overflow lists then fence most reservations). Run as the postgres user; about 25 s
# with the defaults (LOAD_SECS=20); KEEP_DIR=1 keeps the server directory and logs. Prints
# "reservation_stress: N passed, M failed".
TEST=reservation_stress; . "$(dirname "$0")/lib.sh"
LOAD_SECS=${LOAD_SECS:-20}        # producers and workers under load (the crash is inside)
DRAIN_SECS=${DRAIN_SECS:-25}      # upper bound of the drain
MIN_CLAIMS=${MIN_CLAIMS:-200}     # the run is not vacuous
PRODUCERS=${PRODUCERS:-6}         # the last third run at REPEATABLE READ
RESERVATION_SLOTS=${RESERVATION_SLOTS:-1024}  # fixed entries of the in-flight registry
started=$EPOCHSECONDS
start() {
  "$PGBIN/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c shared_preload_libraries=awa_shard -c awa_shard.maintenance=off -c awa_shard.reservation_slots=$RESERVATION_SLOTS \
    -c listen_addresses= -c lc_messages=C -c fsync=off -c full_page_writes=off -c max_connections=60" -l "$dir/log" -w -t 60 start >>"$dir/pg_ctl.out" 2>&1
}
# A process counts as gone once it has exited (a zombie nobody reaps is gone too).
alive() { local pid comm st; read -r pid comm st _ <"/proc/$1/stat" 2>/dev/null && [ "$st" != Z ]; }

new_server rstress 59000
q=("$PGBIN/psql" -h "$dir" -p "$port" -X -A -t -q -v ON_ERROR_STOP=1 -d rstress)   # for timeout and friends
psql_q() { "${q[@]}" "$@"; }
start || give_up "server did not start"
"$PGBIN/createdb" -h "$dir" -p "$port" rstress || give_up "createdb failed"
mkdir -p "$dir/logs"

psql_q >/dev/null <<'SQL' || give_up "setup failed"
CREATE EXTENSION awa_shard;
INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('rs1', 1), ('rs4', 4);
-- A row exists iff its job's enqueue committed: written by the enqueuing statement.
CREATE TABLE public.stress_committed (token text PRIMARY KEY, job_id bigint NOT NULL,
    server_start timestamptz NOT NULL DEFAULT pg_postmaster_start_time());
-- Every claimed row, written by the claiming transaction, numbered in claim order.
CREATE SEQUENCE public.stress_claim_order;
CREATE TABLE public.stress_claims (claim_order bigint PRIMARY KEY, job_id bigint NOT NULL,
    queue text NOT NULL, lane_priority smallint NOT NULL, enqueue_shard smallint NOT NULL,
    lane_seq bigint NOT NULL, token text, intent text,
    server_start timestamptz NOT NULL DEFAULT pg_postmaster_start_time());

-- Worker: alternate the two queues; each claim, its record and its completion are one
-- statement and one transaction. Claim order: a sequence value taken per row, after the
-- claim returned, in the order the claim returned the rows.
CREATE PROCEDURE public.stress_work(p_seconds float8, p_batch int)
LANGUAGE plpgsql AS $$
DECLARE
    v_end timestamptz := clock_timestamp() + make_interval(secs => p_seconds);
    v_i int := (pg_backend_pid() % 2);
    v_queue text;
    v_claimed bigint;
    v_completed bigint;
BEGIN
    LOOP
        EXIT WHEN clock_timestamp() >= v_end;
        v_i := v_i + 1;
        v_queue := CASE WHEN v_i % 2 = 0 THEN 'rs1' ELSE 'rs4' END;
        WITH c AS MATERIALIZED (SELECT * FROM awa.claim_ready_runtime(v_queue, p_batch, 0, 0) WITH ORDINALITY),
             rec AS (INSERT INTO public.stress_claims (claim_order, job_id, queue, lane_priority, enqueue_shard, lane_seq, token, intent)
                     SELECT nextval('public.stress_claim_order'), s.job_id, s.queue, s.lane_priority, s.enqueue_shard,
                            s.lane_seq, s.args ->> 't', s.args ->> 'c'
                       FROM (SELECT * FROM c ORDER BY c.ordinality) s)
        SELECT (SELECT count(*) FROM c),
               (SELECT count(*) FROM awa.complete_jobs((SELECT coalesce(array_agg(c.job_id ORDER BY c.ordinality), '{}') FROM c),
                                                       (SELECT coalesce(array_agg(c.run_lease ORDER BY c.ordinality), '{}') FROM c)))
          INTO v_claimed, v_completed;
        IF v_claimed <> v_completed THEN
            RAISE WARNING 'stress: claimed % but completed %', v_claimed, v_completed;
        END IF;
        COMMIT;
        IF v_claimed = 0 THEN
            PERFORM pg_sleep(0.01);
            COMMIT;
        END IF;
    END LOOP;
END
$$;
SQL

# Keys of queue rs4 by shard (S = 4), and an expression giving a key on this transaction's
# sticky keyless shard of (rs4, 2).
declare -a shard_keys
while IFS='|' read -r s ks; do shard_keys[$s]="$ks"; done < <(psql_q -c "SELECT awa.shard_for_ordering_key('key-' || g, 4), string_agg('key-' || g, ' ')
  FROM generate_series(1, 60) g GROUP BY 1 ORDER BY 1")
[ "${#shard_keys[@]}" = 4 ] || give_up "could not compute the keys of each shard"
sticky_key="(CASE awa.shard_for_enqueue('rs4', 2::smallint)"
for s in 0 1 2 3; do k=(${shard_keys[$s]}); sticky_key+=" WHEN $s THEN '${k[0]}'::bytea"; done
sticky_key+=" END)"
start0=$(psql_q -c "SELECT pg_postmaster_start_time()")

# --- Producers -----------------------------------------------------------------------------
# Lane locks are held to commit (today's mode), so every transaction takes its lanes in the
# global (queue, priority, shard) order: rs1/1, rs1/2, then rs4/2 (one batch call that may
# take any shards plus the sticky keyless one, then only lanes it holds; or keyed calls on
# ascending shards), then the single sticky keyless lane of rs4/3. No deadlock is possible,
# and none may appear in the log. A rolled-back savepoint releases the lanes it took.
t_end=0
pick_key() { local -a ks=(${shard_keys[$1]}); key="'${ks[RANDOM % ${#ks[@]}]}'::bytea"; }
new_tok() { n=$((n+1)); tok="$id-$txn-$n"; intents+="$kind $tok"$'\n'; }
rsleep() { printf -v sl '0.%03d' $((RANDOM % 201)); sql+="SELECT pg_sleep($sl);"$'\n'; }
# Open a call: maybe inside a savepoint that is rolled back (its tokens: intent false) or
# released. close_call ends it.
open_call() {
  local r=$((RANDOM % 10))
  wrap=none; kind=$txn_kind; c=$txn_c
  if (( r < 2 )); then wrap=rollback; kind=sp; c=false; elif (( r == 2 )); then wrap=release; fi
  [ "$wrap" != none ] && sql+="SAVEPOINT s;"$'\n'
  (( RANDOM % 6 == 0 )) && rsleep
}
close_call() {
  case $wrap in rollback) sql+="ROLLBACK TO SAVEPOINT s;"$'\n' ;; release) sql+="RELEASE SAVEPOINT s;"$'\n' ;; esac
}
compat() {   # queue priority key-expression
  open_call; new_tok
  sql+="INSERT INTO public.stress_committed (token, job_id) SELECT '$tok', id FROM awa.insert_job_compat('s', '$1', '{\"t\": \"$tok\", \"c\": $c}', p_priority => $2::smallint, p_ordering_key => $3);"$'\n'
  close_call
}
batch() {    # queue priority key-expression...
  local queue=$1 prio=$2 kinds="" args="" prios="" keys="" toks=""; shift 2
  open_call
  for k in "$@"; do
    new_tok
    kinds+="'s',"; args+="'{\"t\": \"$tok\", \"c\": $c}',"; prios+="$prio,"; keys+="$k,"; toks+="'$tok',"
  done
  sql+="INSERT INTO public.stress_committed (token, job_id) SELECT u.t, u.id FROM unnest(awa.insert_jobs('$queue', ARRAY[${kinds%,}], p_args => ARRAY[${args%,}]::jsonb[], p_priorities => ARRAY[${prios%,}]::smallint[], p_ordering_keys => ARRAY[${keys%,}]::bytea[]), ARRAY[${toks%,}]) AS u(id, t);"$'\n'
  close_call
}
rs1_key() { if (( RANDOM % 2 )); then key="'k1-$((RANDOM % 5))'::bytea"; else key=NULL; fi; }

# One long-lived psql per producer, fed through a FIFO one transaction at a time (a new
# connection per transaction costs more than the transaction on a busy machine); after each
# transaction psql echoes a marker, so the producer never runs ahead of the server. A lost
# connection (the crash) ends that psql: the producer starts another.
psql_open() {
  rm -f "$fin" "$fout"; mkfifo "$fin" "$fout"
  "${q[@]}" <"$fin" >"$fout" 2>>"$ferr" &
  psql_pid=$!
  exec {wfd}>"$fin" {rfd}<"$fout"
}
psql_close() {
  exec {wfd}>&- {rfd}<&-
  kill "$psql_pid" 2>/dev/null; wait "$psql_pid" 2>/dev/null
}
producer() {
  local id=$1 rr=$2 txn=0 n sql intents end_cmd txn_kind txn_c kind c wrap tok key sl mode s j m line ok
  local -a keys
  local fin="$dir/p$id.in" fout="$dir/p$id.out" ferr="$dir/logs/producer_$id.err" psql_pid wfd rfd
  trap '' PIPE
  psql_open
  while [ "$EPOCHSECONDS" -lt "$t_end" ]; do
    txn=$((txn+1)); n=0; intents=""; m=0
    if (( RANDOM % 8 == 0 )); then end_cmd=ROLLBACK; txn_kind=rb; txn_c=false; else end_cmd=COMMIT; txn_kind=ok; txn_c=true; fi
    sql="BEGIN"; (( rr )) && sql+=" ISOLATION LEVEL REPEATABLE READ"; sql+=$';\n'
    (( RANDOM % 2 )) && rsleep
    # rs1 (S = 1): priority 1, single jobs; priority 2, a batch and maybe a single job more.
    if (( RANDOM % 4 == 0 )); then rs1_key; compat rs1 1 "$key"; m=1; fi
    if (( RANDOM % 3 == 0 )); then
      keys=(); for j in $(seq 1 $((RANDOM % 8 + 1))); do rs1_key; keys+=("$key"); done
      batch rs1 2 "${keys[@]}"; m=1
      (( RANDOM % 3 == 0 )) && { rs1_key; compat rs1 2 "$key"; }
    fi
    (( RANDOM % 3 == 0 )) && rsleep
    # rs4 (S = 4), priority 2.
    mode=$((RANDOM % 6)); mode=$(( mode < 3 ? 1 : mode < 5 ? 2 : 0 ))
    if (( mode == 1 )); then
      # One batch: the sticky keyless lane and keyed lanes on any shards (locked sorted),
      # then only lanes already held: keyless, or keyed on the sticky shard.
      keys=(NULL); for j in $(seq 1 $((RANDOM % 8))); do if (( RANDOM % 2 )); then pick_key $((RANDOM % 4)); keys+=("$key"); else keys+=(NULL); fi; done
      batch rs4 2 "${keys[@]}"; m=1
      (( RANDOM % 2 )) && compat rs4 2 NULL
      (( RANDOM % 3 == 0 )) && compat rs4 2 "$sticky_key"
      (( RANDOM % 3 == 0 )) && batch rs4 2 NULL NULL
    elif (( mode == 2 )); then
      # Keyed only, one call per shard, ascending.
      s=$((RANDOM % 4))
      while (( s < 4 )); do
        if (( RANDOM % 2 )); then pick_key $s; compat rs4 2 "$key"
        else keys=(); for j in $(seq 1 $((RANDOM % 4 + 1))); do pick_key $s; keys+=("$key"); done; batch rs4 2 "${keys[@]}"; fi
        s=$((s + RANDOM % 3 + 1)); m=1
      done
    fi
    # rs4, priority 3: keyless only (the transaction's one sticky lane).
    if (( m == 0 || RANDOM % 3 == 0 )); then
      if (( RANDOM % 2 )); then compat rs4 3 NULL; else batch rs4 3 NULL NULL NULL; fi
    fi
    rsleep
    sql+="$end_cmd;"
    printf '%s' "$intents" >>"$dir/logs/intents_$id"
    ok=0
    if printf '%s\n\\echo @done %s\n' "$sql" "$txn" >&"$wfd" 2>/dev/null; then
      while read -r -t 30 line <&"$rfd"; do [ "$line" = "@done $txn" ] && { ok=1; break; }; done
    fi
    if [ "$ok" = 0 ]; then psql_close; sleep 0.2; psql_open; fi
  done
  psql_close
}

worker() {
  local id=$1 batch_size=$2 secs
  while [ "$EPOCHSECONDS" -lt "$t_end" ]; do
    secs=$((t_end - EPOCHSECONDS)); (( secs > 4 )) && secs=4
    timeout $((secs + 20)) "${q[@]}" -c "CALL public.stress_work($secs, $batch_size)" >/dev/null 2>>"$dir/logs/worker_$id.err" || sleep 0.2
  done
}

# --- Load, with a crash in the middle --------------------------------------------------------
t_end=$((EPOCHSECONDS + LOAD_SECS))
crash_at=$((EPOCHSECONDS + LOAD_SECS * 2 / 5))
for p in $(seq 1 "$PRODUCERS"); do
  rr=0; (( p > PRODUCERS * 2 / 3 )) && rr=1
  producer "$p" "$rr" & bg+=($!)
done
w=1
for b in 10 3 1; do worker "$w" "$b" & bg+=($!); w=$((w+1)); done

while [ "$EPOCHSECONDS" -lt "$crash_at" ]; do sleep 0.2; done
claims_before_crash=$(psql_q -c "SELECT count(*) FROM public.stress_claims" 2>/dev/null)
pm=$(head -n 1 "$dir/data/postmaster.pid")
kids=$(pgrep -P "$pm" | tr '\n' ' ')
crash_secs=$EPOCHSECONDS
echo "$(date +%T.%N) kill -9 $pm" >>"$dir/logs/crash.txt"
kill -9 "$pm"
# Wait for every child to notice the postmaster's death and exit (the new postmaster would
# refuse to start while one is attached to the old shared memory). A backend busy in a long
# statement only notices at its next wait: after 5 s end it too, as a real crash would.
forced=0
for i in $(seq 1 50); do
  left=""; for p in $kids; do alive "$p" && left+=" $p"; done
  [ -z "$left" ] && break
  (( i % 10 == 0 )) && for p in $left; do echo "$i: $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"; done >>"$dir/logs/crash.txt"
  sleep 0.1
done
for p in $left; do kill -9 "$p" 2>/dev/null && forced=$((forced+1)); done
for _ in $(seq 1 50); do left=""; for p in $kids; do alive "$p" && left+=" $p"; done; [ -z "$left" ] && break; sleep 0.1; done
echo "$(date +%T.%N) children gone" >>"$dir/logs/crash.txt"
# The dead postmaster may linger as a zombie until this container's init reaps it, and
# kill(pid, 0) still succeeds on a zombie: the new postmaster would take the lock files for
# a live one's. Every process of the old server is gone, so the lock files are stale.
alive "$pm" || rm -f "$dir/data/postmaster.pid" "$dir/.s.PGSQL.$port.lock"
start || give_up "restart after kill -9 failed"
echo "$(date +%T.%N) restarted" >>"$dir/logs/crash.txt"
restart_secs=$((EPOCHSECONDS - crash_secs))
start1=$(psql_q -c "SELECT pg_postmaster_start_time()" 2>/dev/null)

for p in "${bg[@]}"; do wait "$p"; done
bg=()

# --- Drain: until three rounds in a row claim nothing and no lane has waiting rows ----------
drain_end=$((EPOCHSECONDS + DRAIN_SECS)); empty=0
while [ "$EPOCHSECONDS" -lt "$drain_end" ]; do
  before=$(psql_q -c "SELECT count(*) FROM public.stress_claims")
  for w in 1 2; do timeout 20 "${q[@]}" -c "CALL public.stress_work(0.3, 10)" >/dev/null 2>>"$dir/logs/drain.err" & bg+=($!); done
  for p in "${bg[@]}"; do wait "$p"; done
  bg=()
  after=$(psql_q -c "SELECT count(*) FROM public.stress_claims")
  waiting=$(psql_q -c "SELECT coalesce(sum(waiting), 0) FROM awa.shard_lag WHERE queue IN ('rs1', 'rs4')")
  if [ "$before" = "$after" ] && [ "$waiting" = 0 ]; then empty=$((empty+1)); [ "$empty" -ge 3 ] && break; else empty=0; fi
done

# --- Checks ----------------------------------------------------------------------------------
cat "$dir"/logs/intents_* 2>/dev/null | awk 'NF == 2 { print $2 "\t" $1 }' | psql_q -c "CREATE TABLE public.stress_intents (token text, kind text)" -c "\\copy public.stress_intents FROM pstdin"
stats=$(psql_q -F ' ' -c "SELECT (SELECT count(*) FROM public.stress_committed), (SELECT count(*) FROM public.stress_claims),
  (SELECT count(*) FROM public.stress_intents WHERE kind = 'sp'), (SELECT count(*) FROM public.stress_intents WHERE kind = 'rb'),
  (SELECT count(*) FROM public.stress_intents i WHERE kind = 'ok' AND NOT EXISTS (SELECT 1 FROM public.stress_committed c WHERE c.token = i.token)),
  (SELECT count(DISTINCT server_start) FROM public.stress_claims), (SELECT count(DISTINCT server_start) FROM public.stress_committed)")
read -r n_comm n_claims n_sp n_rb n_lost claim_epochs commit_epochs <<<"$stats"
n_comm=${n_comm:-0}; n_claims=${n_claims:-0}; n_sp=${n_sp:-0}; n_rb=${n_rb:-0}; n_lost=${n_lost:-?}

# The run is not vacuous, and the crash happened in its middle.
check "claims > $MIN_CLAIMS" "$(( n_claims > MIN_CLAIMS ))" "1"
check "savepoint and transaction rollbacks were made (>= 10 tokens each)" "$(( n_sp >= 10 && n_rb >= 10 ))" "1"
check "the postmaster was killed and restarted" "$([ -n "$start1" ] && [ "$start1" != "$start0" ] && echo restarted)" "restarted"
check "jobs were committed and claimed both before and after the crash" "$claim_epochs/$commit_epochs" "2/2"
check "the drain ended with nothing to claim" "$empty" "3"

# Exactly the committed jobs, each once.
check "every committed token claimed" "$(psql_q -c "SELECT count(*) FROM public.stress_committed c WHERE NOT EXISTS (SELECT 1 FROM public.stress_claims k WHERE k.token = c.token)")" "0"
check "no token claimed twice" "$(psql_q -c "SELECT count(*) FROM (SELECT token FROM public.stress_claims GROUP BY token HAVING count(*) > 1) d")" "0"
check "every claimed token committed (same job id)" "$(psql_q -c "SELECT count(*) FROM public.stress_claims k WHERE NOT EXISTS (SELECT 1 FROM public.stress_committed c WHERE c.token = k.token AND c.job_id = k.job_id)")" "0"
check "no rolled-back token (savepoint or transaction) claimed" "$(psql_q -c "SELECT count(*) FROM public.stress_claims k WHERE k.intent IS DISTINCT FROM 'true' OR k.token IN (SELECT token FROM public.stress_intents WHERE kind <> 'ok')")" "0"
check "no rolled-back job visible in awa.jobs" "$(psql_q -c "SELECT count(*) FROM awa.jobs WHERE queue IN ('rs1', 'rs4') AND args ->> 'c' = 'false'")" "0"

# Dispatch order: per lane, lane_seq strictly increasing in claim order (across the crash).
order_bad=$(psql_q -c "SELECT count(*) FROM (SELECT lane_seq, lag(lane_seq) OVER w AS prev FROM public.stress_claims
  WINDOW w AS (PARTITION BY queue, lane_priority, enqueue_shard ORDER BY claim_order)) s WHERE lane_seq <= prev")
check "per lane, lane_seq strictly increasing in claim order" "$order_bad" "0"
[ "$order_bad" != 0 ] && psql_q -c "SELECT queue, lane_priority, enqueue_shard, prev, lane_seq, claim_order FROM (SELECT *, lag(lane_seq) OVER w AS prev FROM public.stress_claims
  WINDOW w AS (PARTITION BY queue, lane_priority, enqueue_shard ORDER BY claim_order)) s WHERE lane_seq <= prev LIMIT 5"
gaps=$(psql_q -c "SELECT count(*) FROM (SELECT lane_seq, lag(lane_seq) OVER w AS prev FROM public.stress_claims
  WINDOW w AS (PARTITION BY queue, lane_priority, enqueue_shard ORDER BY claim_order)) s WHERE lane_seq > prev + 1")
check "claims stepped over gaps of rolled-back reservations (>= 5)" "$(( ${gaps:-0} >= 5 ))" "1"
lanes=$(psql_q -c "SELECT count(DISTINCT (queue, lane_priority, enqueue_shard)) FROM public.stress_claims")
check "claims came from all 10 lanes (rs1/1, rs1/2, rs4/2 x 4, rs4/3 x 4)" "${lanes:-0}" "10"

# The queue agrees: every claimed job completed, nothing waiting or running.
check "every claimed job completed once" "$(psql_q -c "SELECT count(*) FROM public.stress_claims k JOIN awa.jobs j ON j.id = k.job_id WHERE j.state = 'completed'")/$(psql_q -c "SELECT count(*) FROM awa._terminal_attempts WHERE queue IN ('rs1', 'rs4') AND state = 'completed'")" "$n_claims/$n_claims"
check "nothing waiting (shard_lag) or available/running (awa.jobs)" "$(psql_q -c "SELECT coalesce(sum(waiting), 0) FROM awa.shard_lag WHERE queue IN ('rs1', 'rs4')")/$(psql_q -c "SELECT count(*) FROM awa.jobs WHERE queue IN ('rs1', 'rs4') AND state IN ('available', 'running')")" "0/0"

# Client errors other than the lost connections of the crash.
cerrs=$(cat "$dir"/logs/*.err 2>/dev/null | grep -E 'ERROR:|FATAL:|PANIC:|WARNING:' | grep -vE 'FATAL: +the database system is (starting up|in recovery mode|shutting down|not yet accepting connections)|FATAL: +terminating connection due to unexpected postmaster exit')
n_cerrs=$(grep -c . <<<"$cerrs")
check "no producer or worker error besides lost connections" "$n_cerrs" "0"
[ "$n_cerrs" -gt 0 ] && head -n 5 <<<"$cerrs"
# The server log: no deadlock, no ERROR, no PANIC, failed assertion or crashed backend (the
# SIGKILL of the postmaster logs nothing), FATAL only for connections around the crash.
log_deadlocks=$(grep -c 'deadlock detected' "$dir/log")
check "server log: no deadlock" "$log_deadlocks" "0"
check "server log: no TRAP, PANIC or crashed backend" "$(grep -cE 'TRAP|PANIC|terminated by (signal|exception)' "$dir/log")" "0"
srv_errs=$(grep -E '(ERROR|WARNING|FATAL):' "$dir/log" | grep -vE 'FATAL: +the database system is (starting up|in recovery mode|shutting down|not yet accepting connections)|FATAL: +terminating connection due to (unexpected postmaster exit|administrator command)')
n_srv=$(grep -c . <<<"$srv_errs")
check "server log: no ERROR, WARNING or unexpected FATAL" "$n_srv" "0"
[ "$n_srv" -gt 0 ] && head -n 5 <<<"$srv_errs"

[ -n "${KEEP_DIR:-}" ] && cat "$dir/logs/crash.txt"
echo "committed $n_comm jobs, claimed $n_claims ($claims_before_crash before the crash, $gaps gap jumps); rolled back: $n_sp in savepoints, $n_rb in transactions; $n_lost not committed (crash, refused connections); down ${restart_secs}s ($forced backends ended by hand); ${LOAD_SECS}s load, $((EPOCHSECONDS - started))s in all"
summary
[ "$failed" -eq 0 ]
