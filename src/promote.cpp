/*
 * promote.cpp — promotion of one queue by its claims (docs/maintenance.md §1): where no
 * maintenance worker serves the database, a claim moves the due scheduled and retryable jobs
 * of its own queue to the ready plane, so retries and scheduled jobs come back with no
 * scheduler. The whole step runs here (C++ and SPI statements over the tables): the claim
 * path never enters plpgsql.
 */
#include "enqueue_core.hpp"
#include "pg_boundary.hpp"
#include "promote.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
}

namespace
{

SPIPlanPtr due_plan = nullptr;
SPIPlanPtr move_due_plan = nullptr;

/*
 * Whether queue $1 has a job due at $2 and is not paused (a paused queue is not promoted).
 * The time is a parameter: clock_timestamp() (volatile) bounds no index scan, and the probe
 * read every deferred job of the queue that was not yet due.
 */
const char *const kDueSql =
	"SELECT 1 WHERE EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.queue = $1 AND d.run_at <= $2) "
	"  AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = $1 AND m.paused)";

/*
 * Take up to $2 deferred jobs of queue $1 due at $3 out of awa.deferred_jobs, oldest first,
 * skipping rows another promoter holds: the rows in that order, and their states as text.
 */
const char *const kMoveDueSql =
	"WITH due AS (SELECT j.job_id FROM awa.deferred_jobs j WHERE j.queue = $1 AND j.run_at <= $3 "
	"    ORDER BY j.run_at, j.priority, j.job_id LIMIT $2 FOR UPDATE SKIP LOCKED), "
	"moved AS (DELETE FROM awa.deferred_jobs j USING due WHERE j.queue = $1 AND j.job_id = due.job_id RETURNING j.*) "
	"SELECT array_agg(m ORDER BY m.run_at, m.priority, m.job_id) FROM moved m";

} // namespace

namespace awa
{

/*
 * Promote up to `limit` due jobs of a queue (SPI connected): each job's unique claim moves
 * with it to 'available', then the jobs are enqueued with the queue's current width.
 * Nothing while the queue is paused or has nothing due. Returns how many jobs it promoted.
 */
int
promote_due_queue(text *queue, int limit)
{
	static const Oid due_types[2] = {TEXTOID, TIMESTAMPTZOID};
	static const Oid move_types[3] = {TEXTOID, INT4OID, TIMESTAMPTZOID};
	Datum now = TimestampTzGetDatum(GetCurrentTimestamp()); /* clock_timestamp() */
	Datum due_values[2] = {PointerGetDatum(queue), now};
	Datum move_values[3] = {PointerGetDatum(queue), Int32GetDatum(limit), now};
	Datum rows;
	ArrayType *arr;
	Datum *elems;
	bool *elem_nulls;
	int n;

	exec_plan(keep_plan(&due_plan, kDueSql, 2, due_types), due_values, nullptr, false, 1, SPI_OK_SELECT, "due jobs");
	if (SPI_processed == 0)
		return 0;
	exec_plan(keep_plan(&move_due_plan, kMoveDueSql, 3, move_types), move_values, nullptr, false, 1, SPI_OK_SELECT,
			  "promotion");
	if (!spi_single_value(&rows))
		return 0;
	arr = DatumGetArrayTypeP(rows);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_DOUBLE, &elems, &elem_nulls, &n);
	for (int i = 0; i < n; i++)
	{
		HeapTupleHeader tup = DatumGetHeapTupleHeader(elems[i]);
		bool id_null, key_null, mask_null, state_null;
		Datum job_id = GetAttributeByName(tup, "job_id", &id_null);
		Datum key = GetAttributeByName(tup, "unique_key", &key_null);
		Datum mask = GetAttributeByName(tup, "unique_states", &mask_null);
		Datum state = GetAttributeByName(tup, "state", &state_null);

		if (!id_null && !state_null)
			sync_unique_claim(job_id, key, key_null, mask, mask_null,
							  DatumGetCString(DirectFunctionCall1(enum_out, state)), "available",
							  PointerGetDatum(queue));
	}
	return enqueue_ready_array(arr);
}

} // namespace awa

/* awa._promote_due_queue(queue, limit) -> integer: awa::promote_due_queue. */
AWA_SQL_FUNCTION(awa_promote_due_queue)
{
	int promoted;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_INT32(0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	promoted = awa::promote_due_queue(PG_GETARG_TEXT_PP(0), PG_GETARG_INT32(1));
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	PG_RETURN_INT32(promoted);
}
