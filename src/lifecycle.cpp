/*
 * lifecycle.cpp — awa.complete_jobs: the set-based success exit of running attempts.
 * Receipts are closed by appending a closure (ON CONFLICT DO NOTHING: exactly one
 * closer wins), leases are deleted; the winners get one done_entries row keyed by
 * the ready row's lane identity (ready_slot, queue, lane priority, enqueue_shard,
 * lane_seq). A stale or repeated completion finds nothing to close and writes nothing.
 * (fail, retry, snooze, DLQ, heartbeat and rescue are SQL functions in the install scripts.)
 */
#include "awa_shard.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

namespace
{

SPIPlanPtr complete_plan = nullptr;

const char *const kCompleteSql =
	"WITH input AS (SELECT DISTINCT t.job_id, t.run_lease FROM unnest($1::bigint[], $2::bigint[]) AS t(job_id, run_lease)), "
	"receipts AS (SELECT c.* FROM awa.lease_claims c JOIN input i ON c.job_id = i.job_id AND c.run_lease = i.run_lease "
	"  WHERE c.materialized_at IS NULL), "
	"closed AS (INSERT INTO awa.lease_claim_closures (claim_slot, job_id, run_lease, outcome) "
	"  SELECT claim_slot, job_id, run_lease, 'completed' FROM receipts ON CONFLICT DO NOTHING "
	"  RETURNING claim_slot, job_id, run_lease), "
	"leased AS (DELETE FROM awa.leases l USING input i WHERE l.job_id = i.job_id AND l.run_lease = i.run_lease "
	"  AND l.state IN ('running', 'waiting_external') RETURNING l.*), "
	"finished AS ("
	"  SELECT c.ready_slot, c.ready_generation, c.job_id, c.queue, c.priority, c.enqueue_shard, c.lane_seq, "
	"         c.attempt, c.run_lease, c.claimed_at AS attempted_at "
	"  FROM receipts c JOIN closed USING (claim_slot, job_id, run_lease) "
	"  UNION ALL "
	"  SELECT l.ready_slot, l.ready_generation, l.job_id, l.queue, l.priority, l.enqueue_shard, l.lane_seq, "
	"         l.attempt, l.run_lease, l.attempted_at FROM leased l), "
	"done AS (INSERT INTO awa.done_entries (ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, "
	"  lane_seq, state, attempt, run_lease, attempted_at) "
	"  SELECT ready_slot, ready_generation, job_id, queue, priority, enqueue_shard, lane_seq, 'completed', attempt, "
	"         run_lease, attempted_at FROM finished RETURNING job_id, run_lease, queue, enqueue_shard), "
	"heartbeats AS (DELETE FROM awa.attempt_state a USING finished f WHERE a.job_id = f.job_id AND a.run_lease = f.run_lease), "
	"unique_release AS (DELETE FROM awa.job_unique_claims u USING finished f WHERE u.job_id = f.job_id "
	"  AND EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.ready_slot = f.ready_slot AND r.queue = f.queue "
	"    AND r.priority = f.priority AND r.enqueue_shard = f.enqueue_shard AND r.lane_seq = f.lane_seq "
	"    AND r.unique_key IS NOT NULL AND NOT awa.job_state_in_bitmask(r.unique_states, 'completed'))) "
	"SELECT job_id, run_lease, queue, enqueue_shard FROM done ORDER BY queue, enqueue_shard, job_id";

} // namespace

/* awa.complete_jobs(job_ids[], run_leases[]) -> table(job_id, run_lease) completed by this call. */
AWA_SQL_FUNCTION(awa_complete_jobs)
{
	static const Oid types[2] = {INT8ARRAYOID, INT8ARRAYOID};
	ArrayType *ids = awa::checked_id_array(fcinfo, 0, "p_job_ids");
	ArrayType *leases = awa::checked_id_array(fcinfo, 1, "p_run_leases");
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	Datum values[2];
	int n_ids = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	int n_leases = ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases));
	int run_start = 0;

	awa::check_same_length(n_ids, n_leases, "p_job_ids", "p_run_leases");
	InitMaterializedSRF(fcinfo, 0);
	if (n_ids == 0)
		return (Datum) 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::keep_plan(&complete_plan, kCompleteSql, 2, types);
	values[0] = PointerGetDatum(ids);
	values[1] = PointerGetDatum(leases);
	awa::exec_plan(complete_plan, values, nullptr, false, 0, SPI_OK_SELECT, "completion");

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple tup = SPI_tuptable->vals[i];
		TupleDesc desc = SPI_tuptable->tupdesc;
		Datum out[2];
		bool nulls[2] = {false, false};
		bool isnull;

		out[0] = SPI_getbinval(tup, desc, 1, &isnull);
		out[1] = SPI_getbinval(tup, desc, 2, &isnull);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	}
	/* Per-shard counters: rows arrive grouped by (queue, enqueue_shard). */
	for (uint64 i = 0; i <= SPI_processed && SPI_processed > 0; i++)
	{
		bool boundary = (i == SPI_processed);

		if (!boundary && i > 0)
		{
			bool isnull;
			text *qa = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
			text *qb = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[i - 1], SPI_tuptable->tupdesc, 3, &isnull));
			int16 sa = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
			int16 sb = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[i - 1], SPI_tuptable->tupdesc, 4, &isnull));

			boundary = sa != sb || VARSIZE_ANY_EXHDR(qa) != VARSIZE_ANY_EXHDR(qb) ||
					   memcmp(VARDATA_ANY(qa), VARDATA_ANY(qb), VARSIZE_ANY_EXHDR(qa)) != 0;
		}
		if (boundary && i > 0)
		{
			bool isnull;
			text *q = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[run_start], SPI_tuptable->tupdesc, 3, &isnull));
			int16 s = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[run_start], SPI_tuptable->tupdesc, 4, &isnull));

			awa::stats_add(VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q), s, awa::StatKind::Completed,
						   static_cast<int64>(i - run_start));
			run_start = static_cast<int>(i);
		}
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return (Datum) 0;
}
