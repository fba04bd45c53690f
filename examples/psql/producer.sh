#!/usr/bin/env bash
# A job producer in plain bash + psql.
#
# Enqueues COUNT jobs into QUEUE three ways:
#   - one job per call with awa.insert_job_compat, keyless (the rotor spreads them over shards);
#   - one job per call with an ordering key: every job of a customer lands on the customer's
#     shard, so its jobs are dispatched in enqueue order (see docs/design.md, ordering contract);
#   - a batch in one call with awa.insert_jobs (one reservation per lane, ids in input order).
# Values travel as psql variables (:'name' quotes them as literals), never spliced into SQL.
#
# Connection: the usual libpq variables (PGHOST, PGPORT, PGDATABASE, PGUSER, ...).
# The role needs awa_producer:  GRANT awa_producer TO my_app_role;
#
# Usage: QUEUE=emails COUNT=100 examples/psql/producer.sh
set -euo pipefail

QUEUE=${QUEUE:-default}
COUNT=${COUNT:-10}
PSQL=(psql -X -q -At -v ON_ERROR_STOP=1)

# 1. Keyless jobs, one transaction each. Returns the job as an awa.job_row.
for ((i = 1; i <= COUNT; i++)); do
	"${PSQL[@]}" -v queue="$QUEUE" -v args="{\"n\": $i}" <<-'SQL'
		SELECT format('job %s -> shard %s, lane_seq %s', id, enqueue_shard, lane_seq)
		  FROM awa.insert_job_compat('send_email', :'queue', :'args');
	SQL
done

# 2. Keyed jobs: the ordering key is bytea; convert_to(text, 'UTF8') gives the bytes that
#    awa.shard_for_ordering_key(text, S) and the client libraries hash.
for ((i = 1; i <= COUNT; i++)); do
	customer="customer-$((i % 3))"
	"${PSQL[@]}" -v queue="$QUEUE" -v key="$customer" -v args="{\"customer\": \"$customer\", \"step\": $i}" <<-'SQL'
		SELECT format('job %s (%s) -> shard %s', id, :'key', enqueue_shard)
		  FROM awa.insert_job_compat('send_email', :'queue', :'args',
		                             p_ordering_key => convert_to(:'key', 'UTF8'));
	SQL
done

# 3. A batch in one call and one transaction: arrays are NULL or as long as the kinds.
#    Keyless rows share one rotor pick; keyed rows go to their key's shard; priority 1 is
#    claimed before priority 2; a future run_at makes a row 'scheduled' (promoted when due).
"${PSQL[@]}" -v queue="$QUEUE" -v n="$COUNT" <<-'SQL'
	SELECT format('batch of %s jobs: ids %s .. %s', cardinality(ids), ids[1], ids[cardinality(ids)])
	  FROM awa.insert_jobs(
	         :'queue',
	         p_kinds => (SELECT array_agg('send_email'::text) FROM generate_series(1, :n)),
	         p_args => (SELECT array_agg(jsonb_build_object('batch_item', g)) FROM generate_series(1, :n) g),
	         p_priorities => (SELECT array_agg(CASE WHEN g = 1 THEN 1 ELSE 2 END) FROM generate_series(1, :n) g),
	         p_ordering_keys => (SELECT array_agg(CASE WHEN g % 2 = 0 THEN convert_to('customer-' || g % 3, 'UTF8') END)
	                               FROM generate_series(1, :n) g)) AS ids;
SQL
