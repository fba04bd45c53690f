/*
 * lifecycle.cpp — awa.complete_jobs: the set-based success exit of running attempts.
 * A success writes no row of its own: the completed attempts of one call are appended as
 * one awa.completion_batches row per (lane, ready slot, block of 64 lane_seqs), their
 * offsets in the block (lane_seq % 64) and claim times as parallel arrays (job id, attempt and run lease are the ready
 * row's, which names the one attempt that ran it). That entry is
 * what ends the receipt (awa._open_receipts); no closure. Exactly one closer wins because
 * every closer locks the receipts first (FOR UPDATE, in (job_id, run_lease) order, the order
 * of every exit that closes several attempts, so two of them never deadlock) and decides in
 * a second statement, on a snapshot taken after the locks: what a closer that held one of
 * them committed is visible there. Leases are deleted, in the same order. Everything is
 * looked up only in the live slots of its ring. A stale or repeated completion finds nothing
 * open and writes nothing. On a 1.0 catalog, whose readers know only closures and terminal
 * rows, a completion closes each receipt with a closure (ON CONFLICT DO NOTHING the
 * arbiter) and a completed terminal row, as 1.0 did.
 * Rows of the tables that grow with the running or waiting jobs (leases, heartbeats, unique
 * claims) are reached only through `job_id = ANY (ARRAY(...))` of the batch's ids, an index
 * condition: a join left to the planner hashed the whole table on every call.
 * (fail, retry, snooze, DLQ, heartbeat and rescue are SQL functions in the install scripts.)
 */
#include "pg_boundary.hpp"
#include "receipt_sql.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "stats.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace
{

/* The (job_id, run_lease) pairs of a completion, distinct and sorted. */
#define COMPLETE_INPUT_SQL                                                                                             \
	"WITH input AS MATERIALIZED (SELECT DISTINCT t.job_id, t.run_lease "                                               \
	"  FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease) ORDER BY t.job_id, t.run_lease) "

/* The running leases among the pairs, locked in pair order, then deleted. */
#define COMPLETE_LEASES_SQL                                                                                            \
	"lease_keys AS MATERIALIZED (SELECT l.* FROM input i CROSS JOIN LATERAL ("                                         \
	"  SELECT l.lease_slot, l.queue, l.priority, l.enqueue_shard, l.lane_seq, l.job_id FROM awa.leases l "             \
	"  WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease AND l.state IN ('running', 'waiting_external') "        \
	"    AND (l.lease_slot BETWEEN $7 AND $8 OR l.lease_slot BETWEEN $9 AND $10) FOR UPDATE OF l) l), "                \
	"leased AS (DELETE FROM awa.leases l USING lease_keys k "                                                          \
	"  WHERE l.job_id = ANY (ARRAY(SELECT x.job_id FROM lease_keys x)) AND l.queue = k.queue AND l.priority = "        \
	"k.priority "                                                                                                      \
	"  AND l.enqueue_shard = k.enqueue_shard AND l.lane_seq = k.lane_seq AND l.lease_slot = k.lease_slot "             \
	"  AND (l.lease_slot BETWEEN $7 AND $8 OR l.lease_slot BETWEEN $9 AND $10) "                                       \
	"  AND l.state IN ('running', 'waiting_external') RETURNING l.*), "

/* The end of the finished attempts: the deleted leases. */
#define COMPLETE_LEASES_FINISHED_SQL                                                                                   \
	"  UNION ALL "                                                                                                     \
	"  SELECT l.ready_slot, l.ready_generation, l.job_id, l.queue, l.priority, l.enqueue_shard, l.lane_seq, "          \
	"         l.attempt, l.run_lease, l.attempted_at FROM leased l), "

/* The finished attempts of a 1.1 completion: one completion batch per (lane, ready slot, block of 64 lane_seqs). */
#define COMPLETE_BATCHES_SQL                                                                                           \
	"done AS (INSERT INTO awa.completion_batches (ready_slot, ready_generation, queue, priority, enqueue_shard, "      \
	"  lane_block, lane_offsets, attempted_at) "                                                                       \
	"  SELECT ready_slot, ready_generation, queue, priority, enqueue_shard, lane_seq / 64, "                           \
	"         array_agg((lane_seq % 64)::int2 ORDER BY lane_seq), array_agg(attempted_at ORDER BY lane_seq) "          \
	"  FROM finished "                                                                                                 \
	"  GROUP BY ready_slot, ready_generation, queue, priority, enqueue_shard, lane_seq / 64), "

/* The finished attempts of a completion on a 1.0 catalog: a terminal row each. */
#define COMPLETE_DONE_ROWS_SQL                                                                                         \
	"done AS (INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, "    \
	"  lane_seq, state, attempt, run_lease, attempted_at) "                                                            \
	"  SELECT ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, lane_seq, 'completed', attempt, "  \
	"         run_lease, attempted_at FROM finished), "

/*
 * What every completion does with its finished attempts besides recording them: heartbeats
 * and unique claims go. The ready rows are read on the queue ring's live arc ($11..$14), where
 * the finished attempts' rows are, so that only those partitions are prepared.
 */
#define COMPLETE_TAIL_SQL                                                                                              \
	"heartbeats AS (DELETE FROM awa.attempt_state a USING finished f "                                                 \
	"  WHERE a.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND a.job_id = f.job_id AND a.run_lease = "       \
	"f.run_lease), "                                                                                                   \
	"unique_release AS (DELETE FROM awa.job_unique_claims u USING finished f "                                         \
	"  WHERE u.job_id = ANY (ARRAY(SELECT x.job_id FROM finished x)) AND u.job_id = f.job_id "                         \
	"  AND EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.ready_slot = f.ready_slot AND r.queue = f.queue "         \
	"    AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = f.lane_seq "               \
	"    AND (r.ready_slot BETWEEN $11 AND $12 OR r.ready_slot BETWEEN $13 AND $14) "                                  \
	"    AND r.unique_key IS NOT NULL AND NOT awa.job_state_in_bitmask(r.unique_states, 'completed'))) "               \
	"SELECT job_id, run_lease, queue, enqueue_shard FROM finished ORDER BY queue, enqueue_shard, job_id"

/*
 * The receipt of the input pair `i` (1.1 catalogs), through its ready row, each probe on the
 * live arcs: $3..$6 the claim ring's, $11..$14 the queue ring's.
 */
#define RECEIPT_OF_INPUT_SQL                                                                                           \
	"(SELECT " AWA_RECEIPT_COLUMNS " FROM " AWA_RECEIPT_FROM_READY_ON(                                                 \
		AWA_CLAIM_ARC_OF_B) " WHERE " AWA_RECEIPT_IS_INPUT                                                             \
							" AND (r.ready_slot BETWEEN $11 AND $12 OR r.ready_slot BETWEEN $13 AND $14) OFFSET 0)"

SPIPlanPtr lock_receipts_plan = nullptr;
SPIPlanPtr lock_receipts_1_0_plan = nullptr;
SPIPlanPtr complete_plan = nullptr;
SPIPlanPtr complete_with_closures_plan = nullptr;

/*
 * The claim batches of the receipts among the pairs ($1, $2), locked in receipt_base order,
 * the order of every exit that closes several receipts; $3..$6: the claim ring's live arc,
 * $11..$14: the queue ring's (the receipts are reached through their ready rows).
 */
const char *const kLockReceiptsSql = COMPLETE_INPUT_SQL
	", keys AS MATERIALIZED (SELECT DISTINCT c.claim_slot, c.queue, c.priority, c.enqueue_shard, c.lane_block, "
	"    c.ready_slot, c.receipt_base FROM input i CROSS JOIN LATERAL " RECEIPT_OF_INPUT_SQL " c "
	"  ORDER BY c.receipt_base) "
	"SELECT 1 FROM keys k" AWA_LOCK_BATCH_OF_KEY("", AWA_CLAIM_ARC_OF_B);

/* The receipts among the pairs ($1, $2) on a 1.0 catalog, locked in (job_id, run_lease) order. */
const char *const kLockReceipts10Sql = COMPLETE_INPUT_SQL
	"SELECT c.claim_slot FROM input i CROSS JOIN LATERAL (SELECT c.claim_slot FROM awa.lease_claims c "
	"  WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL "
	"    AND (c.claim_slot BETWEEN $3 AND $4 OR c.claim_slot BETWEEN $5 AND $6) FOR UPDATE OF c) c";

/*
 * The completion: open receipts get their completion batches and no closure, leases are deleted.
 * A receipt is open by the test of the view awa._open_receipts on the live arcs of the rings
 * (AWA_READY_RECEIPT_OPEN_LIVE; $11..$14: the queue ring's arc): through the view a completion
 * prepared every partition of the tables on every call.
 */
const char *const kCompleteSql = COMPLETE_INPUT_SQL
	", receipts AS MATERIALIZED (SELECT c.* FROM input i CROSS JOIN LATERAL (SELECT c.* FROM " RECEIPT_OF_INPUT_SQL
	" c WHERE " AWA_READY_RECEIPT_OPEN_LIVE(
		"3", "4", "5", "6", "11", "12", "13",
		"14") " OFFSET 0) c), " COMPLETE_LEASES_SQL "finished AS ("
			  "  SELECT c.ready_slot, c.ready_generation, c.job_id, c.queue, c.priority, c.enqueue_shard, c.lane_seq, "
			  "         c.attempt, c.run_lease, c.claimed_at AS attempted_at FROM receipts "
			  "c " COMPLETE_LEASES_FINISHED_SQL COMPLETE_BATCHES_SQL COMPLETE_TAIL_SQL;

/*
 * The same completion on a 1.0 catalog (between installing this library and ALTER EXTENSION
 * UPDATE), whose readers know only closures and terminal rows: each receipt is closed by
 * appending its closure, ON CONFLICT DO NOTHING being the arbiter there, and gets a
 * completed terminal row. The receipts are locked first, like the 1.1 statement's, and the
 * catalog is read after the locks, so this statement runs only on a 1.0 catalog (the test
 * reads only tables 1.0 has; no completion batch exists there).
 */
const char *const kCompleteWithClosuresSql = COMPLETE_INPUT_SQL
	", receipts AS MATERIALIZED (SELECT c.* FROM input i CROSS JOIN LATERAL (SELECT c.* FROM awa.lease_claims c "
	"  WHERE c.job_id = i.job_id AND c.run_lease = i.run_lease AND c.materialized_at IS NULL "
	"    AND (c.claim_slot BETWEEN $3 AND $4 OR c.claim_slot BETWEEN $5 AND $6) AND " AWA_OPEN_RECEIPT_TEST_1_0
	" OFFSET 0) c), "
	"closed AS (INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome) "
	"  SELECT claim_slot, job_id, run_lease, 'completed' FROM receipts ORDER BY job_id, run_lease "
	"  ON CONFLICT DO NOTHING RETURNING claim_slot, job_id, run_lease), " COMPLETE_LEASES_SQL "finished AS ("
	"  SELECT c.ready_slot, c.ready_generation, c.job_id, c.queue, c.priority, c.enqueue_shard, c.lane_seq, "
	"         c.attempt, c.run_lease, c.claimed_at AS attempted_at "
	"  FROM closed k CROSS JOIN LATERAL (SELECT c.* FROM awa.lease_claims c WHERE c.claim_slot = k.claim_slot "
	"    AND c.job_id = k.job_id AND c.run_lease = k.run_lease OFFSET 0) c " COMPLETE_LEASES_FINISHED_SQL
		COMPLETE_DONE_ROWS_SQL COMPLETE_TAIL_SQL;

/*
 * Parameters of kCompleteSql: the pairs, then the live arcs of the claim ring, the lease ring
 * and the queue ring (two inclusive ranges each), so that only the partitions that can hold
 * an open attempt are read. (kCompleteWithClosuresSql reads the queue ring's arc only in its tail.)
 */
enum CompleteParam
{
	CP_JOB_IDS,
	CP_RUN_LEASES,
	CP_CLAIM_ARC,
	CP_LEASE_ARC = CP_CLAIM_ARC + 4,
	CP_QUEUE_ARC = CP_LEASE_ARC + 4,
	CP_NPARAMS = CP_QUEUE_ARC + 4
};

/* Result columns of kCompleteSql (SPI attribute numbers): the completed pairs, then their lane. */
enum CompleteColumn
{
	CC_JOB_ID = 1,
	CC_RUN_LEASE,
	CC_QUEUE,
	CC_ENQUEUE_SHARD
};

/* A result column of row i of the last SPI statement. */
Datum
result_column(uint64 i, int column)
{
	bool isnull;

	return SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, column, &isnull);
}

/* Whether rows i and j of the completion result are of the same (queue, shard). */
bool
same_shard(uint64 i, uint64 j)
{
	text *qa = DatumGetTextPP(result_column(i, CC_QUEUE));
	text *qb = DatumGetTextPP(result_column(j, CC_QUEUE));

	return DatumGetInt16(result_column(i, CC_ENQUEUE_SHARD)) == DatumGetInt16(result_column(j, CC_ENQUEUE_SHARD)) &&
		   VARSIZE_ANY_EXHDR(qa) == VARSIZE_ANY_EXHDR(qb) &&
		   memcmp(VARDATA_ANY(qa), VARDATA_ANY(qb), VARSIZE_ANY_EXHDR(qa)) == 0;
}

/*
 * Whether this database's catalog ends a completed receipt by its completion batch alone
 * (awa._open_receipts and awa.completion_batches exist: 1.1 and later). One syscache
 * look-up per call, so a backend that outlives ALTER EXTENSION UPDATE switches at once.
 */
bool
receipts_end_without_closure()
{
	Oid nsp = get_namespace_oid("awa", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("_open_receipts", nsp));
}

} // namespace

/* awa.complete_jobs(job_ids[], run_leases[]) -> table(job_id, run_lease) completed by this call. */
AWA_SQL_FUNCTION(awa_complete_jobs)
{
	static const Oid types[CP_NPARAMS] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID, INT4OID, INT4OID, INT4OID, INT4OID,
										  INT4OID,		INT4OID,	  INT4OID, INT4OID, INT4OID, INT4OID, INT4OID};
	ArrayType *ids = awa::checked_id_array(fcinfo, 0, "p_job_ids");
	ArrayType *leases = awa::checked_id_array(fcinfo, 1, "p_run_leases");
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	Datum values[CP_NPARAMS];
	int n_ids = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	int n_leases = ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases));
	uint64 run_start = 0;
	int claim_arc[4];
	int lease_arc[4];
	int queue_arc[4];
	int planner_level;
	bool closure_free;

	awa::check_same_length(n_ids, n_leases, "p_job_ids", "p_run_leases");
	InitMaterializedSRF(fcinfo, 0);
	if (n_ids == 0)
		return (Datum)0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	values[CP_JOB_IDS] = PointerGetDatum(ids);
	values[CP_RUN_LEASES] = PointerGetDatum(leases);
	awa::live_slot_ranges_all(queue_arc, claim_arc, lease_arc);
	for (int k = 0; k < 4; k++)
	{
		values[CP_CLAIM_ARC + k] = Int32GetDatum(claim_arc[k]);
		values[CP_LEASE_ARC + k] = Int32GetDatum(lease_arc[k]);
		values[CP_QUEUE_ARC + k] = Int32GetDatum(queue_arc[k]);
	}
	/*
	 * A plan made while the attempt tables looked empty must still probe them by index
	 * once they hold millions of rows, and must cost O(ids) whatever the planner estimates:
	 * every per-job row is found by a lateral index probe driven by the sorted input
	 * (`OFFSET 0` keeps each probe a subquery the planner cannot turn into a join), and
	 * the pinned settings keep those probes on index scans. Joins of two per-job sets,
	 * which a generic plan estimates at a row each, became nested loops comparing every
	 * row with every other: 10 000 ids took 3-10 s (regression test claim_batch_cost).
	 * Both statements run on the latest committed state, like the claim's: a REPEATABLE READ
	 * worker whose snapshot predates the claim of its jobs still completes them. The second
	 * one's snapshot is taken after the first holds every receipt lock it waited for.
	 */
	planner_level = awa::push_hot_path_planner();
	/*
	 * The catalog is read before the locks. A call that then waits for ALTER EXTENSION
	 * UPDATE (it locks every table of the plane) fails if the update replaced what its
	 * statement reads (1.0's receipts table): nothing was claimed or completed by it, and
	 * the worker's retry runs on the updated catalog. An update cannot start while this
	 * transaction holds its locks.
	 */
	closure_free = receipts_end_without_closure();
	if (closure_free)
	{
		/* Generic plans: a custom plan of either was made again on every call (keep_generic_plan). */
		awa::keep_generic_plan(&lock_receipts_plan, kLockReceiptsSql, CP_NPARAMS, types);
		awa::keep_generic_plan(&complete_plan, kCompleteSql, CP_NPARAMS, types);
	}
	else
	{
		awa::keep_plan(&lock_receipts_1_0_plan, kLockReceipts10Sql, CP_CLAIM_ARC + 4, types);
		awa::keep_plan(&complete_with_closures_plan, kCompleteWithClosuresSql, CP_NPARAMS, types);
	}
	awa::exec_plan_latest(closure_free ? lock_receipts_plan : lock_receipts_1_0_plan, values, nullptr, false, 0,
						  SPI_OK_SELECT, "receipt lock");
	awa::exec_plan_latest(closure_free ? complete_plan : complete_with_closures_plan, values, nullptr, false, 0,
						  SPI_OK_SELECT, "completion");
	awa::pop_hot_path_planner(planner_level);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum out[2] = {result_column(i, CC_JOB_ID), result_column(i, CC_RUN_LEASE)};
		bool nulls[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	}
	/* Per-shard counters: rows arrive grouped by (queue, enqueue_shard). */
	for (uint64 i = 1; i <= SPI_processed; i++)
	{
		if (i < SPI_processed && same_shard(i, run_start))
			continue;
		text *q = DatumGetTextPP(result_column(run_start, CC_QUEUE));

		awa::stats_add(VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q), DatumGetInt16(result_column(run_start, CC_ENQUEUE_SHARD)),
					   awa::StatKind::Completed, static_cast<int64>(i - run_start));
		run_start = i;
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return (Datum)0;
}
