/*
 * attempts.cpp — one running attempt at a time, on the latest committed state: take it out
 * of the running set for a per-job exit (awa._take_attempt, awa._take_open_attempt,
 * awa._take_attempt_unless_busy: the arbiter of fail, retry, snooze, dead-letter, cancel
 * and both rescues) and record the
 * heartbeats of open attempts (awa._heartbeat_open_attempts).
 *
 * A receipt is taken by locking its claim batch (found through the job's ready row), then, in
 * a statement whose snapshot sees what an earlier holder of the lock committed, appending its
 * closure if it is still open (awa._open_receipts: every closer, complete_jobs included, locks
 * first, so exactly one wins); a lease is taken by deleting it. Either way the attempt comes
 * back with its ready row's body as an awa.taken_attempt, joined on the full lane identity.
 * Every statement runs on the latest committed state, like the claim and complete_jobs
 * (docs/design.md §4): a REPEATABLE READ or SERIALIZABLE worker whose snapshot predates the
 * claim of its job still finds the attempt, instead of finding nothing and leaving the job
 * running until a rescue. A per-job statement probes every partition of a ring by index:
 * reading the ring's live arc first, to prune the others, cost more than the probes (about a
 * fifth of a take). The heartbeat, one statement for a whole batch, reads only the live slots.
 */
#include "pg_boundary.hpp"
#include "receipt_sql.hpp"
#include "ring.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

namespace
{

SPIPlanPtr lock_receipt_plan = nullptr;
SPIPlanPtr lock_receipt_unless_busy_plan = nullptr;
SPIPlanPtr take_receipt_plan = nullptr;
SPIPlanPtr take_lease_plan = nullptr;
SPIPlanPtr forget_heartbeat_plan = nullptr;
SPIPlanPtr open_receipt_plan = nullptr;
SPIPlanPtr open_lease_plan = nullptr;
SPIPlanPtr heartbeat_receipts_plan = nullptr;
SPIPlanPtr heartbeat_leases_plan = nullptr;

/*
 * An awa.taken_attempt, in the type's column order: the attempt's identity from its receipt
 * or lease `A` (job, lane, attempt, run_lease, ready row), attempted at ATTEMPTED_AT, and the
 * job's body from its ready row `r`.
 */
#define TAKEN_ATTEMPT(A, ATTEMPTED_AT)                                                                                 \
	" ROW(" A ".job_id, r.kind, " A ".queue, r.args, " A ".priority, " A ".attempt, " A ".run_lease, " A               \
	".max_attempts, r.run_at, " ATTEMPTED_AT ", r.created_at, r.unique_key, r.unique_states, r.ordering_key, "         \
	"r.metadata, r.tags, r.errors, " A ".ready_slot, " A ".ready_generation, " A ".enqueue_shard, " A                  \
	".lane_seq)::awa.taken_attempt "

/*
 * Close the receipt (job_id $1, run_lease $2) with outcome $3; the taken attempt is the
 * receipt's attempt with its ready row's body, its claim time as attempted_at.
 */
const char *const kTakeReceiptSql =
	"WITH c AS MATERIALIZED (SELECT c.* FROM (SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY
	"  WHERE " AWA_RECEIPT_IS(
		"$1", "$2") " OFFSET 0) c WHERE " AWA_READY_RECEIPT_OPEN "), "
					"closed AS (INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome, queue) "
					"  SELECT claim_slot, job_id, run_lease, $3, queue FROM c ON CONFLICT DO NOTHING RETURNING claim_slot) "
					"SELECT " TAKEN_ATTEMPT(
						"c", "c.claimed_at") " FROM c JOIN closed USING (claim_slot) "
											 "  JOIN awa.ready_entries r ON r.ready_slot = c.ready_slot AND r.queue = "
											 "c.queue AND r.priority = "
											 "c.priority "
											 "   AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq";

/*
 * Lock the claim batch of the receipt (job_id $1, run_lease $2) before deciding whether it is
 * open: the batch is found first, without a lock, then locked by its key and receipt_base
 * (a lock taken in the probe itself would lock every batch of the block, the probe's rows,
 * and in the order they were read).
 */
#define LOCK_RECEIPT_BATCH_SQL(WAIT)                                                                                   \
	"SELECT 1 FROM (SELECT b.claim_slot, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.ready_slot, "           \
	"    b.receipt_base FROM " AWA_RECEIPT_FROM_READY                                                                  \
	" WHERE " AWA_RECEIPT_IS("$1", "$2") " OFFSET 0) k " AWA_LOCK_BATCH_OF_KEY(WAIT, "")
const char *const kLockReceiptSql = LOCK_RECEIPT_BATCH_SQL("");

/* The same, unless another transaction holds the batch (then nothing is locked). */
const char *const kLockReceiptUnlessBusySql = LOCK_RECEIPT_BATCH_SQL("SKIP LOCKED");

/* Delete the running lease (job_id $1, run_lease $2); the lease's columns override the ready row's. */
const char *const kTakeLeaseSql =
	"WITH l AS (DELETE FROM awa.leases l WHERE l.job_id = $1 AND l.run_lease = $2 "
	"    AND l.state IN ('running', 'waiting_external') RETURNING l.*) "
	"SELECT " TAKEN_ATTEMPT(
		"l",
		"l.attempted_at") " FROM l JOIN awa.ready_entries r ON r.ready_slot = l.ready_slot "
						  "   AND r.queue = l.queue AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard "
						  "   AND r.lane_seq = l.lane_seq";

/* A taken attempt's heartbeat and progress go with it. */
const char *const kForgetHeartbeatSql = "DELETE FROM awa.attempt_state WHERE job_id = $1 AND run_lease = $2";

/* The newest open receipt of job $1. */
const char *const kOpenReceiptSql =
	"SELECT c.run_lease FROM (SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY
	"  WHERE " AWA_RECEIPT_OF_JOB("$1") " OFFSET 0) c "
										"WHERE " AWA_READY_RECEIPT_OPEN " ORDER BY c.run_lease DESC LIMIT 1";

/* The newest running lease of job $1. */
const char *const kOpenLeaseSql =
	"SELECT l.run_lease FROM awa.leases l WHERE l.job_id = $1 AND l.state IN ('running', 'waiting_external') "
	" ORDER BY l.run_lease DESC LIMIT 1";

/* The receipt of the input pair `i`, through its ready row, on the live arcs ($3..$6, $7..$10). */
#define HEARTBEAT_RECEIPT_SQL                                                                                          \
	"(SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY_ON(                                                 \
		AWA_CLAIM_ARC_OF_B) " WHERE " AWA_RECEIPT_IS_INPUT                                                             \
							" AND (r.ready_slot BETWEEN $7 AND $8 OR r.ready_slot BETWEEN $9 AND $10) OFFSET 0)"

/*
 * Heartbeats of the open receipts among the pairs ($1, $2): an attempt_state row per
 * attempt, created or refreshed. Each receipt is probed from the sorted input through its
 * ready row (AWA_RECEIPT_FROM_READY); $3..$6 is the claim ring's live arc, $7..$10 the queue
 * ring's.
 */
const char *const kHeartbeatReceiptsSql =
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease), "
	"open_receipts AS (SELECT c.job_id, c.run_lease, c.queue FROM input i CROSS JOIN LATERAL " HEARTBEAT_RECEIPT_SQL " c "
	"  WHERE " AWA_READY_RECEIPT_OPEN_LIVE(
		"3", "4", "5", "6", "7", "8", "9",
		"10") ") "
			  "INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "
			  "SELECT job_id, run_lease, clock_timestamp(), $11::jsonb, clock_timestamp(), queue FROM open_receipts "
			  "ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "
			  "  progress = coalesce(EXCLUDED.progress, awa.attempt_state.progress), updated_at = EXCLUDED.updated_at";

/*
 * Heartbeats of the running leases among the pairs ($1, $2). The rows are locked in
 * (job_id, run_lease) order first, the order in which the rescues and completions take
 * leases: an update in whatever order its join produced could wait at one lease while
 * holding another that a rescue waits for, a deadlock. Progress ($7, when not NULL) goes
 * to awa.attempt_state as in receipts mode (leases have no column for it), with the
 * heartbeat's time, so that the sweep of awa.rescue_stale_heartbeats removes a row left
 * behind by an attempt that ended meanwhile.
 */
const char *const kHeartbeatLeasesSql =
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease), "
	"keys AS MATERIALIZED (SELECT l.* FROM input i CROSS JOIN LATERAL ("
	"  SELECT l.lease_slot, l.queue, l.priority, l.enqueue_shard, l.lane_seq, l.job_id, l.run_lease FROM awa.leases l "
	"  WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease AND l.state IN ('running', 'waiting_external') "
	"    AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6) FOR UPDATE OF l) l), "
	"progress AS (INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "
	"  SELECT k.job_id, k.run_lease, clock_timestamp(), $7::jsonb, clock_timestamp(), k.queue FROM keys k "
	"  WHERE $7::jsonb IS NOT NULL "
	"  ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "
	"    progress = EXCLUDED.progress, updated_at = EXCLUDED.updated_at) "
	"UPDATE awa.leases l SET heartbeat_at = clock_timestamp() FROM keys k "
	" WHERE l.job_id = ANY ($1) AND l.lease_slot = k.lease_slot AND l.queue = k.queue AND l.priority = k.priority "
	"   AND l.enqueue_shard = k.enqueue_shard AND l.lane_seq = k.lane_seq "
	"   AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6)";

/* Put a ring's live arc into values[at .. at + 3]. */
void
put_live_arc(awa::Ring ring, Datum *values, int at)
{
	int arc[4];

	awa::live_slot_ranges(ring, arc);
	for (int k = 0; k < 4; k++)
		values[at + k] = Int32GetDatum(arc[k]);
}

/*
 * Take the open attempt (job_id, run_lease), closing a receipt with `outcome` or deleting a
 * lease; true with the awa.taken_attempt datum (copied out of SPI) in *taken, false when
 * the attempt is not open (a stale writer, or another closer won). With `unless_busy`, a
 * receipt whose claim batch another transaction holds is left alone (false), instead of
 * waiting for that transaction. SPI must be connected.
 */
bool
take_attempt(Datum job_id, Datum run_lease, Datum outcome, Datum *taken, bool unless_busy = false)
{
	static const Oid receipt_types[3] = {INT8OID, INT8OID, TEXTOID};
	static const Oid pair_types[2] = {INT8OID, INT8OID};
	Datum args[3] = {job_id, run_lease, outcome};
	bool found;
	int level;

	SPIPlanPtr lock_plan =
		unless_busy ? awa::keep_generic_plan(&lock_receipt_unless_busy_plan, kLockReceiptUnlessBusySql, 2, pair_types)
					: awa::keep_generic_plan(&lock_receipt_plan, kLockReceiptSql, 2, pair_types);

	awa::keep_generic_plan(&take_receipt_plan, kTakeReceiptSql, 3, receipt_types);
	awa::keep_generic_plan(&take_lease_plan, kTakeLeaseSql, 2, pair_types);
	awa::keep_generic_plan(&forget_heartbeat_plan, kForgetHeartbeatSql, 2, pair_types);

	level = awa::push_hot_path_planner();
	awa::exec_plan_latest(lock_plan, args, nullptr, false, 0, SPI_OK_SELECT, "receipt lock");
	if (SPI_processed > 0)
		awa::exec_plan_latest(take_receipt_plan, args, nullptr, false, 0, SPI_OK_SELECT, "receipt take");
	found = awa::spi_single_value(taken);
	if (!found)
	{
		awa::exec_plan_latest(take_lease_plan, args, nullptr, false, 0, SPI_OK_SELECT, "lease take");
		found = awa::spi_single_value(taken);
	}
	if (found)
	{
		*taken = SPI_datumTransfer(*taken, false, -1);
		awa::exec_plan_latest(forget_heartbeat_plan, args, nullptr, false, 0, SPI_OK_DELETE, "heartbeat removal");
	}
	awa::pop_hot_path_planner(level);
	return found;
}

/* The run_lease of job_id's newest open attempt found by `plan` (receipt or lease); false: none. */
bool
newest_open_run_lease(SPIPlanPtr *plan, const char *sql, Datum job_id, Datum *run_lease)
{
	static const Oid types[1] = {INT8OID};
	Datum args[1] = {job_id};
	int level;
	bool found;

	awa::keep_generic_plan(plan, sql, 1, types);
	level = awa::push_hot_path_planner();
	awa::exec_plan_latest(*plan, args, nullptr, true, 1, SPI_OK_SELECT, "open attempt lookup");
	found = awa::spi_single_value(run_lease);
	awa::pop_hot_path_planner(level);
	return found;
}

/* SPI_connect, checked. */
void
spi_connect()
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
}

/* SPI_finish, checked. */
void
spi_finish()
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
}

} // namespace

/* awa._take_attempt(job_id, run_lease, outcome) -> awa.taken_attempt, NULL when not open. */
AWA_SQL_FUNCTION(awa_take_attempt)
{
	Datum taken;
	bool found;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	spi_connect();
	found = take_attempt(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), &taken);
	spi_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(taken);
}

/*
 * awa._take_attempt_unless_busy(job_id, run_lease, outcome) -> awa.taken_attempt, NULL when
 * not open or when another transaction holds the receipt's claim batch (the rescues: a
 * maintenance pass never waits for a worker's transaction).
 */
AWA_SQL_FUNCTION(awa_take_attempt_unless_busy)
{
	Datum taken;
	bool found;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	spi_connect();
	found = take_attempt(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), &taken, true);
	spi_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(taken);
}

/*
 * awa._take_open_attempt(job_id, outcome) -> awa.taken_attempt: whichever attempt of the job
 * is open, its newest receipt first, then its newest running lease; NULL when none is.
 */
AWA_SQL_FUNCTION(awa_take_open_attempt)
{
	Datum job_id = PG_GETARG_DATUM(0);
	Datum run_lease;
	Datum taken;
	bool found = false;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	spi_connect();
	if (newest_open_run_lease(&open_receipt_plan, kOpenReceiptSql, job_id, &run_lease))
		found = take_attempt(job_id, run_lease, PG_GETARG_DATUM(1), &taken);
	if (!found && newest_open_run_lease(&open_lease_plan, kOpenLeaseSql, job_id, &run_lease))
		found = take_attempt(job_id, run_lease, PG_GETARG_DATUM(1), &taken);
	spi_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(taken);
}

/*
 * awa._heartbeat_open_attempts(job_ids[], run_leases[], progress) -> integer: record a
 * heartbeat of every open attempt among the pairs (checked by awa.heartbeat_jobs and
 * awa.set_progress), and the progress when it is not NULL; how many were open.
 */
AWA_SQL_FUNCTION(awa_heartbeat_open_attempts)
{
	static const Oid types[11] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4OID, INT4OID,
								  INT4OID,		INT4OID,	  INT4OID, INT4OID, JSONBOID};
	static const Oid lease_types[7] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4OID, INT4OID, JSONBOID};
	Datum args[11];
	char nulls[11];
	bool no_progress = PG_NARGS() < 3 || PG_ARGISNULL(2);
	uint64 alive;
	int level;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_INT32(0);
	memset(nulls, ' ', sizeof(nulls));
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[10] = no_progress ? (Datum)0 : PG_GETARG_DATUM(2);
	nulls[10] = no_progress ? 'n' : ' ';
	spi_connect();
	awa::keep_generic_plan(&heartbeat_receipts_plan, kHeartbeatReceiptsSql, 11, types);
	awa::keep_generic_plan(&heartbeat_leases_plan, kHeartbeatLeasesSql, 7, lease_types);
	level = awa::push_hot_path_planner();
	put_live_arc(awa::Ring::Claim, args, 2);
	put_live_arc(awa::Ring::Queue, args, 6);
	awa::exec_plan_latest(heartbeat_receipts_plan, args, nulls, false, 0, SPI_OK_INSERT, "receipt heartbeat");
	alive = SPI_processed;
	put_live_arc(awa::Ring::Lease, args, 2);
	args[6] = args[10];
	nulls[6] = nulls[10];
	awa::exec_plan_latest(heartbeat_leases_plan, args, nulls, false, 0, SPI_OK_UPDATE, "lease heartbeat");
	alive += SPI_processed;
	awa::pop_hot_path_planner(level);
	spi_finish();
	PG_RETURN_INT32(static_cast<int32>(alive));
}
