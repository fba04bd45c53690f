/*
 * attempts.cpp — one running attempt at a time, on the latest committed state: take it out
 * of the running set for a per-job exit (awa._take_attempt, awa._take_open_attempt,
 * awa._take_attempt_unless_busy: the arbiter of fail, retry, snooze, dead-letter, cancel
 * and both rescues) and record the heartbeats of open attempts (awa.heartbeat_jobs).
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
 * fifth of a take). The heartbeat finds and tests the receipts of a whole batch through the
 * direct access routines (direct_complete.cpp) on the live slots only, and writes their
 * attempt_state rows there too; its statements remain for leases, stale pairs and Citus.
 */
#include "citus.hpp"
#include "pg_boundary.hpp"
#include "direct_complete.hpp"
#include "key_caps.hpp"
#include "receipt_sql.hpp"
#include "report_commit.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "utils/builtins.h"
}

namespace
{

/* Kept plans; [2]: [0] by id alone, [1] in the queue given (the routing argument). */
SPIPlanPtr lock_receipt_plan[2];
SPIPlanPtr lock_receipt_unless_busy_plan[2];
SPIPlanPtr take_receipt_plan[2];
SPIPlanPtr take_lease_plan[2];
SPIPlanPtr forget_heartbeat_plan = nullptr;
SPIPlanPtr open_receipt_plan[2];
SPIPlanPtr open_lease_plan[2];
SPIPlanPtr heartbeat_receipts_plan[2];
SPIPlanPtr heartbeat_leases_plan[2];

/*
 * An awa.taken_attempt, in the type's column order: the attempt's identity from its receipt
 * or lease `A` (job, lane, attempt, run_lease, ready row), attempted at ATTEMPTED_AT, and the
 * job's body from its ready row `r`.
 */
#define TAKEN_ATTEMPT(A, ATTEMPTED_AT)                                                                                 \
	" ROW(" A ".job_id, r.kind, " A ".queue, r.args, " A ".priority, " A ".attempt, " A ".run_lease, " A               \
	".max_attempts, r.run_at, " ATTEMPTED_AT ", r.created_at, r.unique_key, r.unique_states, r.ordering_key, "         \
	"r.metadata, r.tags, r.errors, " A ".ready_slot, " A ".ready_generation, " A ".enqueue_shard, " A                  \
	".lane_seq, r.concurrency_key)::awa.taken_attempt "

/*
 * Every take statement has the parameters ($1 job_id, $2 run_lease, $3 outcome, $4 queue)
 * (a statement leaves out those it does not need) and comes in two forms: [0] finds the
 * attempt by id alone, [1] only in queue $4, every table it reads or writes carrying
 * `queue = $4` (a routing argument, docs/api.md "p_queue": an attempt of another queue is
 * not open there). TAKE_IN_QUEUE(Q, ALIAS) is that condition on ALIAS in form [1].
 */
#define IN_QUEUE(ALIAS, N) " AND " ALIAS ".queue = $" N " "

/*
 * Close the receipt (job_id $1, run_lease $2) with outcome $3; the taken attempt is the
 * receipt's attempt with its ready row's body, its claim time as attempted_at. Q: "" or
 * the queue condition on the ready row `r`.
 */
#define TAKE_RECEIPT_SQL(Q)                                                                                            \
	"WITH c AS MATERIALIZED (SELECT c.* FROM (SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY             \
	"  WHERE " AWA_RECEIPT_IS("$1", "$2") Q                                                                            \
		" OFFSET 0) c WHERE " AWA_READY_RECEIPT_OPEN "), "                                                             \
		"closed AS (INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome, queue) "             \
		"  SELECT claim_slot, job_id, run_lease, $3, queue FROM c ON CONFLICT DO NOTHING RETURNING claim_slot) "       \
		"SELECT " TAKEN_ATTEMPT(                                                                                       \
			"c", "c.claimed_at") " FROM c JOIN closed USING (claim_slot) "                                             \
								 "  JOIN awa.ready_entries r ON r.ready_slot = c.ready_slot AND r.queue = c.queue "    \
								 "AND r.priority = c.priority "                                                        \
								 "   AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq " Q
const char *const kTakeReceiptSql[2] = {TAKE_RECEIPT_SQL(""), TAKE_RECEIPT_SQL(IN_QUEUE("r", "4"))};

/*
 * Lock the claim batch of the receipt (job_id $1, run_lease $2) before deciding whether it is
 * open: the batch is found first, without a lock, then locked by its key and receipt_base
 * (a lock taken in the probe itself would lock every batch of the block, the probe's rows,
 * and in the order they were read).
 */
#define LOCK_RECEIPT_BATCH_SQL(WAIT, Q)                                                                                \
	"SELECT 1 FROM (SELECT b.claim_slot, b.queue, b.priority, b.enqueue_shard, b.lane_block, b.ready_slot, "           \
	"    b.receipt_base FROM " AWA_RECEIPT_FROM_READY " WHERE " AWA_RECEIPT_IS("$1", "$2") Q                           \
		" OFFSET 0) k " AWA_LOCK_BATCH_OF_KEY(WAIT, "")
const char *const kLockReceiptSql[2] = {LOCK_RECEIPT_BATCH_SQL("", ""), LOCK_RECEIPT_BATCH_SQL("", IN_QUEUE("r", "4"))};

/* The same, unless another transaction holds the batch (then nothing is locked). */
const char *const kLockReceiptUnlessBusySql[2] = {LOCK_RECEIPT_BATCH_SQL("SKIP LOCKED", ""),
												  LOCK_RECEIPT_BATCH_SQL("SKIP LOCKED", IN_QUEUE("r", "4"))};

/* Delete the running lease (job_id $1, run_lease $2); the lease's columns override the ready row's. */
#define TAKE_LEASE_SQL(Q)                                                                                              \
	"WITH l AS (DELETE FROM awa.leases l WHERE l.job_id = $1 AND l.run_lease = $2 " Q                                  \
	"    AND l.state IN ('running', 'waiting_external') RETURNING l.*) "                                               \
	"SELECT " TAKEN_ATTEMPT("l", "l.attempted_at") " FROM l JOIN awa.ready_entries r ON r.ready_slot = l.ready_slot "  \
												   "   AND r.queue = l.queue AND r.priority = l.priority AND "         \
												   "r.enqueue_shard = l.enqueue_shard "                                \
												   "   AND r.lane_seq = l.lane_seq"
const char *const kTakeLeaseSql[2] = {TAKE_LEASE_SQL(""), TAKE_LEASE_SQL(IN_QUEUE("l", "4"))};

/* A taken attempt's heartbeat and progress go with it ($4: the taken attempt's queue). */
const char *const kForgetHeartbeatSql =
	"DELETE FROM awa.attempt_state WHERE job_id = $1 AND run_lease = $2 AND queue = $4";

/* The newest open receipt of job $1 (in queue $2). */
#define OPEN_RECEIPT_SQL(Q)                                                                                            \
	"SELECT c.run_lease FROM (SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY                             \
	"  WHERE " AWA_RECEIPT_OF_JOB("$1") Q " OFFSET 0) c "                                                              \
										  "WHERE " AWA_READY_RECEIPT_OPEN " ORDER BY c.run_lease DESC LIMIT 1"
const char *const kOpenReceiptSql[2] = {OPEN_RECEIPT_SQL(""), OPEN_RECEIPT_SQL(IN_QUEUE("r", "2"))};

/* The newest running lease of job $1 (in queue $2). */
#define OPEN_LEASE_SQL(Q)                                                                                              \
	"SELECT l.run_lease FROM awa.leases l WHERE l.job_id = $1 " Q                                                      \
	"  AND l.state IN ('running', 'waiting_external') ORDER BY l.run_lease DESC LIMIT 1"
const char *const kOpenLeaseSql[2] = {OPEN_LEASE_SQL(""), OPEN_LEASE_SQL(IN_QUEUE("l", "2"))};

/* The receipt of the input pair `i`, through its ready row, on the live arcs ($3..$6, $7..$10). */
#define HEARTBEAT_RECEIPT_SQL(Q)                                                                                       \
	"(SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY_ON(                                                 \
		AWA_CLAIM_ARC_OF_B) " WHERE " AWA_RECEIPT_IS_INPUT Q                                                           \
							" AND (r.ready_slot BETWEEN $7 AND $8 OR r.ready_slot BETWEEN $9 AND $10) OFFSET 0)"

/*
 * Heartbeats of the open receipts among the pairs ($1, $2): an attempt_state row per
 * attempt, created or refreshed. Each receipt is probed from the sorted input through its
 * ready row (AWA_RECEIPT_FROM_READY); $3..$6 is the claim ring's live arc, $7..$10 the queue
 * ring's, $11 the progress, $12 the queue of form [1].
 */
#define HEARTBEAT_RECEIPTS_SQL(Q)                                                                                      \
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "                                               \
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease), "              \
	"open_receipts AS (SELECT c.job_id, c.run_lease, c.queue FROM input i "                                            \
	"  CROSS JOIN LATERAL " HEARTBEAT_RECEIPT_SQL(                                                                     \
		Q) " c "                                                                                                       \
		   "  WHERE " AWA_READY_RECEIPT_OPEN_LIVE(                                                                     \
			   "3", "4", "5", "6", "7", "8", "9",                                                                      \
			   "10") ") "                                                                                              \
					 "INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "   \
					 "SELECT job_id, run_lease, clock_timestamp(), $11::jsonb, clock_timestamp(), queue FROM "         \
					 "open_receipts "                                                                                  \
					 "ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "     \
					 "  progress = coalesce(EXCLUDED.progress, awa.attempt_state.progress), updated_at = "             \
					 "EXCLUDED.updated_at"
const char *const kHeartbeatReceiptsSql[2] = {HEARTBEAT_RECEIPTS_SQL(""), HEARTBEAT_RECEIPTS_SQL(IN_QUEUE("r", "12"))};

/*
 * Heartbeats of the running leases among the pairs ($1, $2). The rows are locked in
 * (job_id, run_lease) order first, the order in which the rescues and completions take
 * leases: an update in whatever order its join produced could wait at one lease while
 * holding another that a rescue waits for, a deadlock. Progress ($7, when not NULL) goes
 * to awa.attempt_state as in receipts mode (leases have no column for it), with the
 * heartbeat's time, so that the sweep of awa.rescue_stale_heartbeats removes a row left
 * behind by an attempt that ended meanwhile. $8: the queue of form [1].
 */
#define HEARTBEAT_LEASES_SQL(Q)                                                                                        \
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "                                               \
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease), "              \
	"keys AS MATERIALIZED (SELECT l.* FROM input i CROSS JOIN LATERAL ("                                               \
	"  SELECT l.lease_slot, l.queue, l.priority, l.enqueue_shard, l.lane_seq, l.job_id, l.run_lease FROM awa.leases "  \
	"l "                                                                                                               \
	"  WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease " Q " AND l.state IN ('running', 'waiting_external') "  \
	"    AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6) FOR UPDATE OF l) l), "                 \
	"progress AS (INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "       \
	"  SELECT k.job_id, k.run_lease, clock_timestamp(), $7::jsonb, clock_timestamp(), k.queue FROM keys k "            \
	"  WHERE $7::jsonb IS NOT NULL "                                                                                   \
	"  ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "                    \
	"    progress = EXCLUDED.progress, updated_at = EXCLUDED.updated_at) "                                             \
	"UPDATE awa.leases l SET heartbeat_at = clock_timestamp() FROM keys k "                                            \
	" WHERE l.job_id = ANY ($1) " Q " AND l.lease_slot = k.lease_slot AND l.queue = k.queue "                          \
	"   AND l.priority = k.priority AND l.enqueue_shard = k.enqueue_shard AND l.lane_seq = k.lane_seq "                \
	"   AND (l.lease_slot BETWEEN $3 AND $4 OR l.lease_slot BETWEEN $5 AND $6)"
const char *const kHeartbeatLeasesSql[2] = {HEARTBEAT_LEASES_SQL(""), HEARTBEAT_LEASES_SQL(IN_QUEUE("l", "8"))};

/*
 * Take the open attempt (job_id, run_lease), closing a receipt with `outcome` or deleting a
 * lease; true with the awa.taken_attempt datum (copied out of SPI) in *taken, false when
 * the attempt is not open (a stale writer, or another closer won). With `unless_busy`, a
 * receipt whose claim batch another transaction holds is left alone (false), instead of
 * waiting for that transaction. `queue` (text, or 0 for none): only an attempt of that
 * queue is open, and every statement carries it. SPI must be connected.
 */
bool
take_attempt(Datum job_id, Datum run_lease, Datum outcome, Datum *taken, bool unless_busy = false,
			 Datum queue = (Datum)0)
{
	static const Oid types[4] = {INT8OID, INT8OID, TEXTOID, TEXTOID};
	int q = queue != (Datum)0 ? 1 : 0;
	Datum args[4] = {job_id, run_lease, outcome, queue};
	const char nulls[4] = {' ', ' ', ' ', q ? ' ' : 'n'};
	bool found;
	int level;

	SPIPlanPtr lock_plan = nullptr;
	SPIPlanPtr take_receipt = nullptr;
	SPIPlanPtr take_lease = nullptr;

	/*
	 * An exit or rescue of one queue on a Citus cluster (delegated to the queue's node): the
	 * statements name the queue's shards (citus.cpp), as Citus cannot route a row lock inside
	 * a lateral subquery. nullptr without Citus.
	 */
	if (q)
	{
		text *in_queue = DatumGetTextPP(queue);

		lock_plan =
			awa::keep_shard_plan(unless_busy ? kLockReceiptUnlessBusySql[1] : kLockReceiptSql[1], in_queue, 4, types);
		take_receipt = awa::keep_shard_plan(kTakeReceiptSql[1], in_queue, 4, types);
		take_lease = awa::keep_shard_plan(kTakeLeaseSql[1], in_queue, 4, types);
	}
	if (lock_plan == nullptr || take_receipt == nullptr || take_lease == nullptr)
	{
		lock_plan = unless_busy ? awa::keep_generic_plan(&lock_receipt_unless_busy_plan[q],
														 kLockReceiptUnlessBusySql[q], 4, types)
								: awa::keep_generic_plan(&lock_receipt_plan[q], kLockReceiptSql[q], 4, types);
		take_receipt = awa::keep_generic_plan(&take_receipt_plan[q], kTakeReceiptSql[q], 4, types);
		take_lease = awa::keep_generic_plan(&take_lease_plan[q], kTakeLeaseSql[q], 4, types);
	}
	awa::keep_generic_plan(&forget_heartbeat_plan, kForgetHeartbeatSql, 4, types);

	level = awa::push_hot_path_planner();
	awa::exec_plan_latest(lock_plan, args, nulls, false, 0, SPI_OK_SELECT, "receipt lock");
	if (SPI_processed > 0)
		awa::exec_plan_latest(take_receipt, args, nulls, false, 0, SPI_OK_SELECT, "receipt take");
	found = awa::spi_single_value(taken);
	if (!found)
	{
		awa::exec_plan_latest(take_lease, args, nulls, false, 0, SPI_OK_SELECT, "lease take");
		found = awa::spi_single_value(taken);
	}
	if (found)
	{
		bool isnull;
		const char forget_nulls[4] = {' ', ' ', ' ', ' '};

		*taken = SPI_datumTransfer(*taken, false, -1);
		args[3] = GetAttributeByName(DatumGetHeapTupleHeader(*taken), "queue", &isnull);
		/* Claims that passed its key over count again; its place may be known ended. */
		awa::note_attempt_ended(DatumGetInt64(job_id), DatumGetInt64(run_lease),
								isnull ? nullptr : DatumGetTextPP(args[3]));
		awa::exec_plan_latest(forget_heartbeat_plan, args, forget_nulls, false, 0, SPI_OK_DELETE, "heartbeat removal");
	}
	awa::pop_hot_path_planner(level);
	return found;
}

/*
 * The run_lease of job_id's newest open attempt found by plan `which` (receipt or lease),
 * in `queue` when it is not 0; false: none.
 */
bool
newest_open_run_lease(SPIPlanPtr *plans, const char *const *sql, Datum job_id, Datum queue, Datum *run_lease)
{
	static const Oid types[2] = {INT8OID, TEXTOID};
	int q = queue != (Datum)0 ? 1 : 0;
	Datum args[2] = {job_id, queue};
	const char nulls[2] = {' ', q ? ' ' : 'n'};
	/* On a Citus cluster, with the queue: on its shards (see take_attempt). */
	SPIPlanPtr plan = q ? awa::keep_shard_plan(sql[1], DatumGetTextPP(queue), 2, types) : nullptr;
	int level;
	bool found;

	if (plan == nullptr)
		plan = awa::keep_generic_plan(&plans[q], sql[q], 2, types);
	level = awa::push_hot_path_planner();
	awa::exec_plan_latest(plan, args, nulls, true, 1, SPI_OK_SELECT, "open attempt lookup");
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

/*
 * awa._take_attempt(job_id, run_lease, outcome[, queue]) -> awa.taken_attempt, NULL when not
 * open (in that queue, when one is given).
 */
AWA_SQL_FUNCTION(awa_take_attempt)
{
	Datum taken;
	bool found;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_NULL();
	spi_connect();
	found = take_attempt(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), &taken, false,
						 awa::optional_queue_arg(fcinfo, 3, "p_queue"));
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
	found = take_attempt(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), &taken, true,
						 awa::optional_queue_arg(fcinfo, 3, "p_queue"));
	spi_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(taken);
}

/*
 * awa._take_open_attempt(job_id, outcome[, queue]) -> awa.taken_attempt: whichever attempt of
 * the job is open (in that queue, when one is given), its newest receipt first, then its
 * newest running lease; NULL when none is.
 */
AWA_SQL_FUNCTION(awa_take_open_attempt)
{
	Datum job_id = PG_GETARG_DATUM(0);
	Datum queue = awa::optional_queue_arg(fcinfo, 2, "p_queue");
	Datum run_lease;
	Datum taken;
	bool found = false;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	spi_connect();
	if (newest_open_run_lease(open_receipt_plan, kOpenReceiptSql, job_id, queue, &run_lease))
		found = take_attempt(job_id, run_lease, PG_GETARG_DATUM(1), &taken, false, queue);
	if (!found && newest_open_run_lease(open_lease_plan, kOpenLeaseSql, job_id, queue, &run_lease))
		found = take_attempt(job_id, run_lease, PG_GETARG_DATUM(1), &taken, false, queue);
	spi_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(taken);
}

/*
 * awa.heartbeat_jobs(job_ids[], run_leases[][, queue]) -> integer: record a heartbeat of every
 * open attempt among the pairs; how many were open. The arrays: not NULL (22004), one
 * dimension and equally long (22023), no NULL element (22004), all checked before anything is
 * written. With a queue, only attempts of that queue are open, and every statement carries it.
 */
AWA_SQL_FUNCTION(awa_heartbeat_jobs)
{
	static const Oid types[12] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4OID,  INT4OID,
								  INT4OID,		INT4OID,	  INT4OID, INT4OID, JSONBOID, TEXTOID};
	static const Oid lease_types[8] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID,	 INT4OID,
									   INT4OID,		 INT4OID,	   JSONBOID, TEXTOID};
	Datum args[12];
	char nulls[12];
	Datum queue = awa::optional_queue_arg(fcinfo, 2, "p_queue");
	int q = queue != (Datum)0 ? 1 : 0;
	ArrayType *ids;
	ArrayType *leases;
	uint64 alive;
	int level;
	int queue_arc[4];
	int claim_arc[4];
	int lease_arc[4];
	awa::DirectHeartbeat direct;
	SPIPlanPtr receipts_plan;
	SPIPlanPtr leases_plan;

	awa::require_not_null(PG_ARGISNULL(0) || PG_ARGISNULL(1), "p_job_ids and p_run_leases");
	ids = PG_GETARG_ARRAYTYPE_P(0);
	leases = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(ids) > 1 || ARR_NDIM(leases) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("p_job_ids and p_run_leases must be one-dimensional arrays")));
	if (ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids)) != ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("p_job_ids and p_run_leases must have the same number of elements")));
	if (array_contains_nulls(ids) || array_contains_nulls(leases))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("p_job_ids and p_run_leases must not contain nulls")));
	memset(nulls, ' ', sizeof(nulls));
	args[0] = PointerGetDatum(ids);
	args[1] = PointerGetDatum(leases);
	args[10] = (Datum)0; /* the statements' progress: none */
	nulls[10] = 'n';
	args[11] = queue;
	nulls[11] = q ? ' ' : 'n';
	/* On a Citus cluster: delegated by p_queue, or refused (0A000) before anything is written. */
	awa::require_queue_local_or_given(q ? DatumGetTextPP(queue) : nullptr);
	spi_connect();
	awa::report_writes_begin();
	/* With the queue on a Citus cluster, the statements name its shards (see take_attempt). */
	receipts_plan = q ? awa::keep_shard_plan(kHeartbeatReceiptsSql[1], DatumGetTextPP(queue), 12, types) : nullptr;
	leases_plan = q ? awa::keep_shard_plan(kHeartbeatLeasesSql[1], DatumGetTextPP(queue), 8, lease_types) : nullptr;
	if (receipts_plan == nullptr || leases_plan == nullptr)
	{
		receipts_plan = awa::keep_generic_plan(&heartbeat_receipts_plan[q], kHeartbeatReceiptsSql[q], 12, types);
		leases_plan = awa::keep_generic_plan(&heartbeat_leases_plan[q], kHeartbeatLeasesSql[q], 8, lease_types);
	}
	level = awa::push_hot_path_planner();
	awa::live_slot_ranges_all(queue_arc, claim_arc, lease_arc);
	/*
	 * Receipts through the direct access routines (direct_complete.cpp); the lease statement
	 * then takes only the pairs without a receipt, and none on the common path.
	 */
	if (awa::direct_heartbeat_receipts(ids, leases, nullptr, q ? DatumGetTextPP(queue) : nullptr, queue_arc, claim_arc,
									   &direct))
	{
		alive = direct.alive;
		if (direct.nleft == 0)
		{
			awa::pop_hot_path_planner(level);
			awa::report_writes_end(!direct.ran_statement);
			spi_finish();
			PG_RETURN_INT32(static_cast<int32>(alive));
		}
		args[0] = PointerGetDatum(direct.left_ids);
		args[1] = PointerGetDatum(direct.left_leases);
	}
	else
	{
		for (int k = 0; k < 4; k++)
		{
			args[2 + k] = Int32GetDatum(claim_arc[k]);
			args[6 + k] = Int32GetDatum(queue_arc[k]);
		}
		awa::exec_plan_latest(receipts_plan, args, nulls, false, 0, SPI_OK_INSERT, "receipt heartbeat");
		alive = SPI_processed;
	}
	for (int k = 0; k < 4; k++)
		args[2 + k] = Int32GetDatum(lease_arc[k]);
	args[6] = args[10];
	nulls[6] = nulls[10];
	args[7] = args[11];
	nulls[7] = nulls[11];
	awa::exec_plan_latest(leases_plan, args, nulls, false, 0, SPI_OK_UPDATE, "lease heartbeat");
	alive += SPI_processed;
	awa::pop_hot_path_planner(level);
	awa::report_writes_end(false);
	spi_finish();
	PG_RETURN_INT32(static_cast<int32>(alive));
}
