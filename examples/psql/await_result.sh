#!/usr/bin/env bash
# Enqueue one job and wait in the server for its outcome (bash + psql).
#
# awa.wait_for_job(job_id, timeout_ms) returns the job once it is completed, failed,
# dead-lettered or cancelled, or its current row at the timeout; `result` is what the worker
# passed to awa.complete_jobs(..., p_results). A worker reports progress with
# awa.set_progress(job_id, run_lease, progress), visible as `progress` meanwhile.
#
# Connection: the usual libpq variables. The role needs awa_producer.
# Usage: QUEUE=emails TIMEOUT_MS=30000 examples/psql/await_result.sh
set -euo pipefail

QUEUE=${QUEUE:-default}
TIMEOUT_MS=${TIMEOUT_MS:-30000}
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)

# Each psql call is its own transaction: the enqueue commits before the wait begins.
job=$("${PSQL[@]}" -v queue="$QUEUE" <<-'SQL'
	SELECT id FROM awa.insert_job_compat('send_email', :'queue', '{"to": "a@b.c"}');
SQL
)
"${PSQL[@]}" -v job="$job" -v timeout="$TIMEOUT_MS" <<-'SQL'
	SELECT format('job %s: %s, result %s, errors %s, progress %s', id, state, result, errors, progress)
	  FROM awa.wait_for_job(:job, :timeout);
SQL
