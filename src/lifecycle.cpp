/*
 * lifecycle.cpp — awa.complete_jobs: the set-based success exit of running attempts.
 * A success writes no row of its own: the completed attempts of one call are appended as
 * one awa.completion_batches row per (lane, ready slot, block of 64 lane_seqs), their
 * offsets in the block (lane_seq % 64) and claim times as parallel arrays (job id, attempt and run_lease are the ready
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
 * Results (1.1, p_results): one jsonb per pair travels with it through the statement and is
 * stored in the completion batch's `results` array, parallel to lane_offsets; a batch of
 * attempts without results stores NULL there. They are checked (kMaxResultBytes) before
 * anything is written, and live as long as the batch, i.e. as the completed job is kept.
 * Rows of the tables that grow with the running or waiting jobs (leases, heartbeats, unique
 * claims) are reached only through `job_id = ANY (ARRAY(...))` of the batch's ids, an index
 * condition: a join left to the planner hashed the whole table on every call.
 * On a 1.1 catalog the receipts are completed through the direct access routines
 * (direct_complete.cpp), the same steps without a planned statement; the statements below
 * then take only the pairs it found no receipt for (leases, stale pairs), and Citus.
 * (fail, retry, snooze, DLQ, heartbeat and rescue are SQL functions in the install scripts.)
 */
#include "catalog_version.hpp"
#include "citus.hpp"
#include "compat_1_0.hpp"
#include "completion_sql.hpp"
#include "direct_complete.hpp"
#include "job_wait.hpp"
#include "key_caps.hpp"
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

/*
 * The (job_id, run_lease, result) triples of a completion, one per distinct pair (with the
 * first result given for it), sorted ($15: the results, NULL when none were given).
 */
#define COMPLETE_INPUT_RESULTS_SQL                                                                                     \
	"WITH input AS MATERIALIZED (SELECT DISTINCT ON (t.job_id, t.run_lease) t.job_id, t.run_lease, t.result "          \
	"  FROM unnest($1::bigint[], $2::bigint[], $15::jsonb[]) WITH ORDINALITY AS t(job_id, run_lease, result, n) "      \
	"  ORDER BY t.job_id, t.run_lease, t.n) "

/*
 * The finished attempts of a completion: one completion batch per (lane, ready slot, block of
 * 64 lane_seqs), with the attempts' results in lane order, or NULL when none has one.
 */
#define COMPLETE_BATCHES_SQL                                                                                           \
	"done AS (INSERT INTO awa.completion_batches (ready_slot, ready_generation, queue, priority, enqueue_shard, "      \
	"  lane_block, lane_offsets, attempted_at, results) "                                                              \
	"  SELECT ready_slot, ready_generation, queue, priority, enqueue_shard, lane_seq / 64, "                           \
	"         array_agg((lane_seq % 64)::int2 ORDER BY lane_seq), array_agg(attempted_at ORDER BY lane_seq), "         \
	"         CASE WHEN count(result) > 0 THEN array_agg(result ORDER BY lane_seq) END "                               \
	"  FROM finished "                                                                                                 \
	"  GROUP BY ready_slot, ready_generation, queue, priority, enqueue_shard, lane_seq / 64), "

/*
 * The receipt of the input pair `i` (1.1 catalogs), through its ready row, each probe on the
 * live arcs: $3..$6 the claim ring's, $11..$14 the queue ring's.
 */
#define RECEIPT_OF_INPUT_SQL(Q)                                                                                        \
	"(SELECT " AWA_RECEIPT_COLUMNS                                                                                     \
	" FROM " AWA_RECEIPT_FROM_READY_ON(AWA_CLAIM_ARC_OF_B) " WHERE " AWA_RECEIPT_IS_INPUT Q(                           \
		"r") " AND (r.ready_slot BETWEEN $11 AND $12 OR r.ready_slot BETWEEN $13 AND $14) OFFSET 0)"

/*
 * Kept plans: [0] a 1.0 catalog's (a backend that outlives ALTER EXTENSION UPDATE serves
 * both), [1] 1.1's by id alone, [2] 1.1's in the queue given (p_queue, $16).
 */
SPIPlanPtr lock_receipts_plans[3];
SPIPlanPtr complete_plans[3];

/*
 * The claim batches of the receipts among the pairs ($1, $2), locked in receipt_base order,
 * the order of every exit that closes several receipts; $3..$6: the claim ring's live arc,
 * $11..$14: the queue ring's (the receipts are reached through their ready rows).
 */
#define LOCK_RECEIPTS_SQL(Q)                                                                                           \
	COMPLETE_INPUT_SQL                                                                                                 \
	", keys AS MATERIALIZED (SELECT DISTINCT c.claim_slot, c.queue, c.priority, c.enqueue_shard, c.lane_block, "       \
	"    c.ready_slot, c.receipt_base FROM input i CROSS JOIN LATERAL " RECEIPT_OF_INPUT_SQL(                          \
		Q) " c "                                                                                                       \
		   "  ORDER BY c.receipt_base) "                                                                               \
		   "SELECT 1 FROM keys k" AWA_LOCK_BATCH_OF_KEY("", AWA_CLAIM_ARC_OF_B)
const char *const kLockReceiptsSql[2] = {LOCK_RECEIPTS_SQL(COMPLETE_BY_ID), LOCK_RECEIPTS_SQL(COMPLETE_IN_QUEUE)};

/*
 * The completion: open receipts get their completion batches and no closure, leases are deleted.
 * A receipt is open by the test of the view awa._open_receipts on the live arcs of the rings
 * (AWA_READY_RECEIPT_OPEN_LIVE; $11..$14: the queue ring's arc): through the view a completion
 * prepared every partition of the tables on every call.
 */
#define COMPLETE_SQL(Q)                                                                                                \
	COMPLETE_INPUT_RESULTS_SQL                                                                                         \
	", receipts AS MATERIALIZED (SELECT c.*, i.result FROM input i CROSS JOIN LATERAL (SELECT c.* "                    \
	"FROM " RECEIPT_OF_INPUT_SQL(Q) " c WHERE " AWA_READY_RECEIPT_OPEN_LIVE(                                           \
		"3", "4", "5", "6", "11", "12", "13",                                                                          \
		"14") " OFFSET 0) c), " COMPLETE_LEASES_CARRYING_SQL(", i.result", ", k.result",                               \
															 Q("l")) "finished AS ("                                   \
																	 "  SELECT c.ready_slot, c.ready_generation, "     \
																	 "c.job_id, c.queue, c.priority, "                 \
																	 "c.enqueue_shard, c.lane_seq, "                   \
																	 "         c.attempt, c.run_lease, c.claimed_at "  \
																	 "AS attempted_at, c.result "                      \
																	 "FROM receipts "                                  \
																	 "c " COMPLETE_LEASES_FINISHED_CARRYING_SQL(       \
																		 ", l.result") COMPLETE_BATCHES_SQL            \
																	 COMPLETE_TAIL_1_1_SQL(Q)
const char *const kCompleteSql[2] = {COMPLETE_SQL(COMPLETE_BY_ID), COMPLETE_SQL(COMPLETE_IN_QUEUE)};

/*
 * Parameters of kCompleteSql: the pairs, then the live arcs of the claim ring, the lease ring
 * and the queue ring (two inclusive ranges each), so that only the partitions that can hold
 * an open attempt are read, then the results (1.1 only). (kCompleteWithClosuresSql reads the
 * queue ring's arc only in its tail.)
 */
enum CompleteParam
{
	CP_JOB_IDS,
	CP_RUN_LEASES,
	CP_CLAIM_ARC,
	CP_LEASE_ARC = CP_CLAIM_ARC + 4,
	CP_QUEUE_ARC = CP_LEASE_ARC + 4,
	CP_RESULTS = CP_QUEUE_ARC + 4,
	CP_QUEUE, /* 1.1, p_queue: the completion acts only on attempts of this queue */
	CP_NPARAMS
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
 * The results argument (1.1: argument 2), checked before anything is written: NULL when no
 * results were given; else one-dimensional, as long as p_job_ids, each element at most
 * kMaxResultBytes (22023 naming the argument and the element).
 */
ArrayType *
checked_results(FunctionCallInfo fcinfo, int n_ids)
{
	ArrayType *results;
	Datum *elems;
	bool *nulls;
	int n;

	if (PG_NARGS() < 3 || PG_ARGISNULL(2))
		return nullptr;
	results = PG_GETARG_ARRAYTYPE_P(2);
	awa::check_one_dimensional(results, "p_results");
	deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	awa::check_same_length(n_ids, n, "p_job_ids", "p_results");
	for (int k = 0; k < n; k++)
	{
		char name[32];

		if (nulls[k])
			continue;
		snprintf(name, sizeof(name), "p_results[%d]", k + 1);
		awa::check_json_size(elems[k], name);
	}
	return results;
}

/*
 * Return the attempts a direct completion completed (sorted by queue, shard, job_id) and
 * count them per (queue, shard); their waiters wake at commit (job_wait.cpp).
 */
void
emit_direct(ReturnSetInfo *rsinfo, const awa::DirectCompletion *direct)
{
	int run_start = 0;

	for (int i = 0; i < direct->ndone; i++)
	{
		Datum out[2] = {Int64GetDatum(direct->done[i].job_id), Int64GetDatum(direct->done[i].run_lease)};
		bool out_nulls[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, out_nulls);
		awa::note_job_finished(direct->done[i].job_id);
		awa::note_attempt_ended(direct->done[i].job_id, direct->done[i].run_lease, direct->done[i].queue);
	}
	for (int i = 1; i <= direct->ndone; i++)
	{
		const awa::DirectCompleted &a = direct->done[run_start];

		if (i < direct->ndone && direct->done[i].enqueue_shard == a.enqueue_shard &&
			VARSIZE_ANY_EXHDR(direct->done[i].queue) == VARSIZE_ANY_EXHDR(a.queue) &&
			memcmp(VARDATA_ANY(direct->done[i].queue), VARDATA_ANY(a.queue), VARSIZE_ANY_EXHDR(a.queue)) == 0)
			continue;
		awa::stats_add(VARDATA_ANY(a.queue), VARSIZE_ANY_EXHDR(a.queue), a.enqueue_shard, awa::StatKind::Completed,
					   static_cast<int64>(i - run_start));
		run_start = i;
	}
}

} // namespace

/*
 * awa.complete_jobs(job_ids[], run_leases[][, results[][, queue]]) -> table(job_id, run_lease)
 * completed by this call, with the statements of the catalog the calling entry point serves.
 * With a queue (1.1), only attempts of that queue are completed: an attempt of another queue
 * is left as it is and not returned, like a stale one.
 */
Datum
awa::complete_jobs(FunctionCallInfo fcinfo, Catalog catalog)
{
	static const Oid types[CP_NPARAMS] = {INT8ARRAYOID, INT8ARRAYOID, INT4OID,		 INT4OID, INT4OID, INT4OID,
										  INT4OID,		INT4OID,	  INT4OID,		 INT4OID, INT4OID, INT4OID,
										  INT4OID,		INT4OID,	  JSONBARRAYOID, TEXTOID};
	ArrayType *ids = awa::checked_id_array(fcinfo, 0, "p_job_ids");
	ArrayType *leases = awa::checked_id_array(fcinfo, 1, "p_run_leases");
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	Datum values[CP_NPARAMS];
	char nulls[CP_NPARAMS];
	int n_ids = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	int n_leases = ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases));
	uint64 run_start = 0;
	int claim_arc[4];
	int lease_arc[4];
	int queue_arc[4];
	int planner_level;
	SPIPlanPtr lock_plan;
	SPIPlanPtr plan;

	ArrayType *results;
	bool in_queue;
	awa::DirectCompletion direct;

	awa::check_same_length(n_ids, n_leases, "p_job_ids", "p_run_leases");
	results = catalog == Catalog::V1_1 ? checked_results(fcinfo, n_ids) : nullptr;
	InitMaterializedSRF(fcinfo, 0);
	if (n_ids == 0)
		return (Datum)0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	values[CP_JOB_IDS] = PointerGetDatum(ids);
	values[CP_RUN_LEASES] = PointerGetDatum(leases);
	values[CP_RESULTS] = PointerGetDatum(results);
	memset(nulls, ' ', sizeof(nulls));
	nulls[CP_RESULTS] = results == nullptr ? 'n' : ' ';
	/* p_queue (1.1, argument 3): NULL completes by id alone, as on one node. */
	values[CP_QUEUE] = catalog == Catalog::V1_1 ? awa::optional_queue_arg(fcinfo, 3, "p_queue") : (Datum)0;
	in_queue = values[CP_QUEUE] != (Datum)0;
	/* Under Citus: the queue's shard on this node, or the queue given (citus.cpp). */
	awa::require_queue_local_or_given(in_queue ? DatumGetTextPP(values[CP_QUEUE]) : nullptr);
	nulls[CP_QUEUE] = in_queue ? ' ' : 'n';
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
	 * 1.1: the receipts are completed through the direct access routines
	 * (direct_complete.cpp); only the pairs whose receipt it did not find (leases, stale
	 * pairs) go to the statements below, and none at all on the common path.
	 */
	if (catalog == Catalog::V1_1 &&
		awa::direct_complete_receipts(ids, leases, results, in_queue ? PG_GETARG_TEXT_PP(3) : nullptr, queue_arc,
									  claim_arc, &direct))
	{
		emit_direct(rsinfo, &direct);
		if (direct.nleft == 0)
		{
			awa::pop_hot_path_planner(planner_level);
			if (SPI_finish() != SPI_OK_FINISH)
				elog(ERROR, "awa_shard: SPI_finish failed");
			return (Datum)0;
		}
		values[CP_JOB_IDS] = PointerGetDatum(direct.left_ids);
		values[CP_RUN_LEASES] = PointerGetDatum(direct.left_leases);
		values[CP_RESULTS] = PointerGetDatum(direct.left_results);
		nulls[CP_RESULTS] = direct.left_results == nullptr ? 'n' : ' ';
	}
	if (catalog == Catalog::V1_1)
	{
		/* Generic plans: a custom plan of either was made again on every call (keep_generic_plan). */
		int form = in_queue ? 1 : 0;

		/* Under Citus, in the queue given: on the queue's shards alone (citus.cpp). */
		text *queue = in_queue ? PG_GETARG_TEXT_PP(3) : nullptr;

		lock_plan = in_queue ? awa::keep_shard_plan(kLockReceiptsSql[form], queue, CP_NPARAMS, types) : nullptr;
		plan = in_queue ? awa::keep_shard_plan(kCompleteSql[form], queue, CP_NPARAMS, types) : nullptr;
		if (lock_plan == nullptr)
			lock_plan =
				awa::keep_generic_plan(&lock_receipts_plans[1 + form], kLockReceiptsSql[form], CP_NPARAMS, types);
		if (plan == nullptr)
			plan = awa::keep_generic_plan(&complete_plans[1 + form], kCompleteSql[form], CP_NPARAMS, types);
	}
	else
	{
		lock_plan =
			awa::keep_plan(&lock_receipts_plans[0], awa::compat_1_0::completion_lock_sql(), CP_CLAIM_ARC + 4, types);
		plan = awa::keep_plan(&complete_plans[0], awa::compat_1_0::completion_sql(), CP_RESULTS, types);
	}
	awa::exec_plan_latest(lock_plan, values, nulls, false, 0, SPI_OK_SELECT, "receipt lock");
	awa::exec_plan_latest(plan, values, nulls, false, 0, SPI_OK_SELECT, "completion");
	awa::pop_hot_path_planner(planner_level);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum out[2] = {result_column(i, CC_JOB_ID), result_column(i, CC_RUN_LEASE)};
		bool out_nulls[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, out_nulls);
		awa::note_job_finished(DatumGetInt64(out[0])); /* its waiters wake at commit (job_wait.cpp) */
		/* And claims that passed its key over count again; its place may be known ended. */
		awa::note_attempt_ended(DatumGetInt64(out[0]), DatumGetInt64(out[1]),
								DatumGetTextPP(result_column(i, CC_QUEUE)));
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

/* awa.complete_jobs of the 1.1 catalog. */
AWA_SQL_FUNCTION(awa_complete_jobs_1_1)
{
	return awa::complete_jobs(fcinfo, awa::Catalog::V1_1);
}
