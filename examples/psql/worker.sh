#!/usr/bin/env bash
# A job worker in plain bash + psql.
#
#   loop: claim a batch (awa.claim_ready_runtime) -> report its progress in one call
#         (awa.set_jobs_progress) -> run each job -> complete the successes
#         (awa.complete_jobs) and fail the others (awa.fail_job); while a batch runs, a
#         background loop heartbeats it (awa.heartbeat_jobs); when nothing was claimed,
#         sleep in the server until a producer commits (awa.wait_for_jobs).
#
# Connection: the usual libpq variables (PGHOST, PGPORT, PGDATABASE, PGUSER, ...).
# The role needs awa_worker:  GRANT awa_worker TO my_worker_role;
#
# Usage: QUEUE=emails BATCH=10 examples/psql/worker.sh      (Ctrl-C stops after the current batch)
set -euo pipefail

QUEUE=${QUEUE:-default}
BATCH=${BATCH:-10}               # jobs per claim (1..10000)
DEADLINE_SECS=${DEADLINE_SECS:-300}  # hard deadline of an attempt (0 = none)
HEARTBEAT_SECS=${HEARTBEAT_SECS:-10}
MAX_BATCHES=${MAX_BATCHES:-0}    # stop after this many non-empty batches (0 = never)

EXIT_WHEN_IDLE=${EXIT_WHEN_IDLE:-0}  # 1: exit when a 1 s wait brings no work

PSQL=(psql -X -q -At -v ON_ERROR_STOP=1 -F $'\t')
stopping=0
trap 'stopping=1' INT TERM
errfile=$(mktemp)
hb_pid=""

# Stop the heartbeat loop of the current batch, if one runs (its pending sleep dies with it).
stop_heartbeat() {
	if [[ -n "$hb_pid" ]]; then
		kill "$hb_pid" 2>/dev/null || true
		wait "$hb_pid" 2>/dev/null || true
		hb_pid=""
	fi
}
# However the script ends (last batch, Ctrl-C, a failing psql under set -e), nothing is left running.
trap 'stop_heartbeat; rm -f "$errfile"' EXIT

# The work itself. Replace with yours: a non-zero exit fails the job, its stderr is the error.
handle_job() {
	local id=$1 kind=$2 args=$3
	echo "job $id ($kind): $args"
	case "$args" in
		*'"fail": true'*) echo "asked to fail" >&2; return 1 ;;
		*) return 0 ;;
	esac
}

# Claim up to BATCH jobs: one line per job: job_id, run_lease, kind, args (lane order).
claim() {
	"${PSQL[@]}" -v queue="$QUEUE" -v batch="$BATCH" -v deadline="$DEADLINE_SECS" <<-'SQL'
		SELECT job_id, run_lease, kind, args
		  FROM awa.claim_ready_runtime(:'queue', :'batch', :'deadline', 0);
	SQL
}

# Heartbeat the claimed jobs every HEARTBEAT_SECS until killed (keeps long jobs from being
# rescued). It runs in the background; its sleep is a child it waits for, so a TERM ends the
# sleep at once instead of leaving it behind for up to HEARTBEAT_SECS.
heartbeat_loop() {
	local ids=$1 run_leases=$2 sleeper=""
	trap '[[ -n "$sleeper" ]] && kill "$sleeper" 2>/dev/null && wait "$sleeper"; exit 0' TERM
	while :; do
		sleep "$HEARTBEAT_SECS" &
		sleeper=$!
		wait "$sleeper" || true
		sleeper=""
		"${PSQL[@]}" -v ids="$ids" -v run_leases="$run_leases" >/dev/null <<-'SQL' || true
			SELECT awa.heartbeat_jobs(:'ids', :'run_leases');
		SQL
	done
}

batches=0
while ((stopping == 0)); do
	mapfile -t jobs < <(claim)
	if ((${#jobs[@]} == 0)); then
		# Nothing ready: sleep until a producing transaction commits (or 1 s passes).
		woken=$("${PSQL[@]}" -v queue="$QUEUE" <<-'SQL'
			SELECT awa.wait_for_jobs(:'queue', 1000);
		SQL
		)
		if [[ "$woken" == f && "$EXIT_WHEN_IDLE" == 1 ]]; then
			break
		fi
		continue
	fi

	all_ids=() all_run_leases=()
	for line in "${jobs[@]}"; do
		IFS=$'\t' read -r id run_lease _ <<<"$line"
		all_ids+=("$id") all_run_leases+=("$run_lease")
	done
	ids="{$(IFS=,; echo "${all_ids[*]}")}" run_leases="{$(IFS=,; echo "${all_run_leases[*]}")}"
	heartbeat_loop "$ids" "$run_leases" &
	hb_pid=$!
	# Progress of the whole batch in one call (also a heartbeat), one value per job: its place
	# in the batch, shown by awa.get_job and awa.wait_for_job while the attempt runs. Element k
	# of the answer is false when attempt k is no longer open.
	"${PSQL[@]}" -v ids="$ids" -v run_leases="$run_leases" >/dev/null <<-'SQL'
		SELECT awa.set_jobs_progress(:'ids', :'run_leases',
		       ARRAY(SELECT jsonb_build_object('position', p, 'of', cardinality(:'ids'::bigint[]))
		               FROM generate_series(1, cardinality(:'ids'::bigint[])) AS p));
	SQL

	ok_ids=() ok_run_leases=()
	for line in "${jobs[@]}"; do
		IFS=$'\t' read -r id run_lease kind args <<<"$line"
		if handle_job "$id" "$kind" "$args" 2>"$errfile"; then
			ok_ids+=("$id") ok_run_leases+=("$run_lease")
		else
			err=$(head -c 2000 "$errfile")
			# Retryable with backoff while attempts remain, then failed (returns the new state).
			state=$("${PSQL[@]}" -v id="$id" -v run_lease="$run_lease" -v err="${err:-failed}" <<-'SQL'
				SELECT awa.fail_job(:'id', :'run_lease', :'err');
			SQL
			)
			echo "job $id failed: ${err:-failed} -> ${state:-already finished}" >&2
		fi
	done

	stop_heartbeat
	if ((${#ok_ids[@]} > 0)); then
		"${PSQL[@]}" -v ids="{$(IFS=,; echo "${ok_ids[*]}")}" -v run_leases="{$(IFS=,; echo "${ok_run_leases[*]}")}" >/dev/null <<-'SQL'
			SELECT count(*) FROM awa.complete_jobs(:'ids', :'run_leases');
		SQL
	fi
	batches=$((batches + 1))
	if ((MAX_BATCHES > 0 && batches >= MAX_BATCHES)); then
		break
	fi
done
