/*
 * claim.cpp — awa.claim_ready_runtime, the claim path of docs/design.md §4.
 *
 * 1. Candidate walk: every claim head of the queue (all priorities and shards, never
 *    filtered by the current width) whose lane has a visible ready row at or after its
 *    cursor; ordered by effective priority, run_at of that head row, lane priority;
 *    the first head that is not locked is locked FOR UPDATE SKIP LOCKED.
 * 2. Drain: in a new statement (new snapshot, after the lock), take up to max_batch
 *    visible rows of that lane with lane_seq >= claim_seq in lane order, record the
 *    running attempts (receipts or leases) in the fenced write slot of the claim or lease
 *    ring (ring.cpp) and set claim_seq = max(lane_seq) + 1.
 * Both statements and the ring reads run on the latest committed state, whatever the
 * caller's isolation level, so an old REPEATABLE READ snapshot never hides rows that
 * prune moved forward and never makes the claim jump them.
 * The drain takes only rows below the lane's claim bound (registry.cpp), read before its
 * snapshot: every reservation below it has ended, so a missing lane_seq there was rolled
 * back or removed and may be jumped, while a reservation still in flight is never jumped.
 * In lane-lock mode there is no bound: reservations hold the lane lock until they end, so
 * a visible N+1 already proves that N has ended.
 */
#include "awa_shard.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "access/xact.h"
#include "utils/resowner.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "common/hashfn.h"
#include "utils/catcache.h"
#include "utils/syscache.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/float.h"
#include "utils/tuplestore.h"
}

#include <cmath>

namespace
{

SPIPlanPtr candidate_plan = nullptr;
SPIPlanPtr drain_receipts_plan = nullptr;
SPIPlanPtr drain_leases_plan = nullptr;
SPIPlanPtr clear_hint_plan = nullptr;
SPIPlanPtr ring_plan = nullptr;

/*
 * The ready slots that can hold rows, as two inclusive ranges [r0, r1] and [r2, r3] (the
 * second empty unless the arc wraps). Rotation makes the next slot live and prune frees
 * the oldest, so the live slots are the arc from the oldest live generation to the current
 * one; passing it as parameters lets the executor prune every other ready partition at
 * start-up, so a lane probe touches one or two partitions instead of sixteen. The drain
 * reads the arc again after its lane head is locked (prune moves a lane's pending rows
 * forward only while holding that head).
 */
void
live_slot_ranges(int *ranges)
{
	bool isnull;
	int oldest;
	int current;

	awa::keep_plan(&ring_plan,
				   "SELECT (SELECT s.slot FROM awa.queue_ring_slots s WHERE s.generation >= 0 "
				   "        ORDER BY s.generation LIMIT 1), r.current_slot, r.slot_count "
				   "FROM awa.queue_ring_state r",
				   0, nullptr);
	awa::exec_plan_latest(ring_plan, nullptr, nullptr, true, 1, SPI_OK_SELECT, "ring read");
	if (SPI_processed != 1)
		elog(ERROR, "awa_shard: queue ring state is missing");
	current = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	oldest = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		oldest = current;
	if (oldest <= current)
	{
		ranges[0] = oldest;
		ranges[1] = current;
		ranges[2] = 1;
		ranges[3] = 0;
	}
	else
	{
		ranges[0] = oldest;
		ranges[1] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)) - 1;
		ranges[2] = 0;
		ranges[3] = current;
	}
}

/*
 * Lock the best unlocked lane head of a queue; returns the plane mode in its last column.
 * A head's run_at comes from the hint the last claim left on the head row; without a hint
 * the lane is probed, but only when its sequence has moved past the cursor (an empty lane
 * costs one sequence read, not one index probe per ready partition). A lane whose cursor
 * reached the lowest reservation still in flight ($7/$8, registry.cpp) is not a candidate,
 * and its probe looks only below that reservation.
 */
const char *const kCandidateSql =
	"SELECT h.priority, h.enqueue_shard, h.claim_seq, (SELECT s.receipts FROM awa.plane_settings s), "
	"  l.seq::oid "
	"FROM awa.queue_claim_heads h "
	"JOIN awa.queue_enqueue_heads e "
	"  ON e.queue = h.queue AND e.priority = h.priority AND e.enqueue_shard = h.enqueue_shard "
	"CROSS JOIN LATERAL (SELECT to_regclass('awa.' || quote_ident(e.seq_name)) AS seq) l "
	"CROSS JOIN LATERAL (SELECT CASE WHEN cardinality($7::oid[]) = 0 THEN 9223372036854775807 "
	"  ELSE coalesce((SELECT min(u.low) FROM unnest($7::oid[], $8::int8[]) AS u(seq, low) "
	"                 WHERE u.seq = l.seq::oid), 9223372036854775807) END AS fence) f "
	"CROSS JOIN LATERAL (SELECT coalesce(h.head_run_at, CASE "
	"  WHEN h.claim_seq <= coalesce(pg_sequence_last_value(l.seq), 0) "
	"  THEN (SELECT r.run_at FROM awa.ready_entries r "
	"        WHERE r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard "
	"          AND r.lane_seq >= h.claim_seq AND r.lane_seq < f.fence "
	"          AND (r.ready_slot BETWEEN $3 AND $4 OR r.ready_slot BETWEEN $5 AND $6) "
	"        ORDER BY r.lane_seq LIMIT 1) END) AS run_at) head "
	"WHERE h.queue = $1 AND head.run_at IS NOT NULL AND h.claim_seq < f.fence "
	"  AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = $1 AND m.paused) "
	"ORDER BY CASE WHEN $2 > 0 THEN least(h.priority, greatest(1, h.priority - floor("
	"  (extract(epoch FROM clock_timestamp()) - extract(epoch FROM head.run_at)) / $2))) "
	"              ELSE h.priority END, head.run_at, h.priority "
	"LIMIT 1 FOR UPDATE OF h SKIP LOCKED";

/* A locked head whose hint pointed at nothing: forget the hint so the next walk probes. */
const char *const kClearHintSql =
	"UPDATE awa.queue_claim_heads SET head_run_at = NULL "
	"WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3 AND head_run_at IS NOT NULL";

/* Shared head of the drain statements: the picked rows with their attempt values. */
#define AWA_DRAIN_PICK                                                                                   \
	"WITH window_ AS MATERIALIZED ("                                                                           \
	"  SELECT r.* FROM awa.ready_entries r "                                                                   \
	"  WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 "                   \
	"    AND r.lane_seq < $14 "                                                                                  \
	"    AND (r.ready_slot BETWEEN $8 AND $9 OR r.ready_slot BETWEEN $10 AND $11) "                              \
	"  ORDER BY r.lane_seq LIMIT $5 + 1), "                                                                    \
	"picked AS MATERIALIZED (SELECT * FROM window_ ORDER BY lane_seq LIMIT $5), "                              \
	"rows_ AS MATERIALIZED ("                                                                                  \
	"  SELECT p.*, c.slot AS ring_slot, c.generation AS ring_generation, c.t AS claimed_at, "                   \
	"    CASE WHEN $6 > 0 THEN c.t + make_interval(secs => $6) END AS deadline_at, "                           \
	"    (CASE WHEN $7 > 0 THEN least(p.priority, greatest(1, p.priority - floor("                           \
	"      (extract(epoch FROM c.t) - extract(epoch FROM p.run_at)) / $7))) "                                  \
	"          ELSE p.priority END)::int2 AS effective_priority "                                              \
	"  FROM picked p, (SELECT $12::int AS slot, $13::bigint AS generation, clock_timestamp() AS t) c), "       \
	"advance AS (UPDATE awa.queue_claim_heads h SET claim_seq = m.next, "                                      \
	"  head_run_at = (SELECT w.run_at FROM window_ w WHERE w.lane_seq >= m.next ORDER BY w.lane_seq LIMIT 1) " \
	"  FROM (SELECT max(lane_seq) + 1 AS next FROM rows_) m "                                                  \
	"  WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3 AND m.next IS NOT NULL), "              \
	"unique_release AS (DELETE FROM awa.job_unique_claims u USING rows_ r "                                    \
	"  WHERE r.unique_key IS NOT NULL AND u.job_id = r.job_id AND get_bit(r.unique_states, 2) = 0), "

/* Result columns, in the order of the function's RETURNS TABLE. */
#define AWA_DRAIN_RESULT(LEASE_SLOT, LEASE_GEN, CLAIM_SLOT, RECEIPT)                                           \
	"SELECT r.ready_slot, r.ready_generation, r.lane_seq, r.enqueue_shard, " LEASE_SLOT ", " LEASE_GEN ", "    \
	CLAIM_SLOT ", " RECEIPT ", r.job_id, r.kind, r.queue, r.args, r.priority AS lane_priority, "               \
	"r.effective_priority AS priority, (r.attempt + 1)::int2 AS attempt, r.run_lease + 1 AS run_lease, "      \
	"r.max_attempts, r.run_at, r.claimed_at AS heartbeat_at, r.deadline_at, r.claimed_at AS attempted_at, "   \
	"r.created_at, r.unique_key, r.unique_states, r.ordering_key, "                                           \
	"jsonb_build_object('metadata', coalesce(r.metadata, '{}'), 'tags', to_jsonb(coalesce(r.tags, '{}')), "   \
	"'errors', coalesce(r.errors, '[]')) AS payload "

/* Receipts mode: one append-only lease_claims row per claimed job. */
const char *const kDrainReceiptsSql =
	AWA_DRAIN_PICK
	"ins AS (INSERT INTO awa.lease_claims (claim_slot, job_id, run_lease, ready_slot, ready_generation, queue, "
	"  priority, effective_priority, attempt, max_attempts, lane_seq, enqueue_shard, claimed_at, deadline_at) "
	"  SELECT ring_slot, job_id, run_lease + 1, ready_slot, ready_generation, queue, priority, "
	"    effective_priority, attempt + 1, max_attempts, lane_seq, enqueue_shard, claimed_at, deadline_at "
	"  FROM rows_ RETURNING job_id, receipt_id) "
	AWA_DRAIN_RESULT("NULL::int", "NULL::bigint", "r.ring_slot", "i.receipt_id")
	"FROM rows_ r JOIN ins i USING (job_id) ORDER BY r.lane_seq";

/* Leases mode: one mutable leases row per claimed job. */
const char *const kDrainLeasesSql =
	AWA_DRAIN_PICK
	"ins AS (INSERT INTO awa.leases (lease_slot, lease_generation, ready_slot, ready_generation, job_id, queue, "
	"  state, priority, effective_priority, attempt, run_lease, max_attempts, lane_seq, enqueue_shard, "
	"  heartbeat_at, deadline_at, attempted_at) "
	"  SELECT ring_slot, ring_generation, ready_slot, ready_generation, job_id, queue, 'running', priority, "
	"    effective_priority, attempt + 1, run_lease + 1, max_attempts, lane_seq, enqueue_shard, claimed_at, "
	"    deadline_at, claimed_at FROM rows_) "
	AWA_DRAIN_RESULT("r.ring_slot", "r.ring_generation", "NULL::int", "NULL::bigint")
	"FROM rows_ r ORDER BY r.lane_seq";

/* Due jobs a claim promotes at most per call, and how often one backend looks for them. */
constexpr int kClaimPromoteLimit = 100;
constexpr long kClaimPromoteEveryMs = 100;

SPIPlanPtr promote_plan = nullptr;

/* OID of a function awa.<name> (any arguments), InvalidOid when there is none. */
Oid
get_func_oid_by_name(const char *nsp, const char *name)
{
	CatCList *list;
	Oid result = InvalidOid;
	Oid nspoid = get_namespace_oid(nsp, true);

	if (!OidIsValid(nspoid))
		return InvalidOid;
	list = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(name));
	for (int i = 0; i < list->n_members; i++)
	{
		Form_pg_proc proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(&list->members[i]->tuple));

		if (proc->pronamespace == nspoid)
			result = proc->oid;
	}
	ReleaseSysCacheList(list);
	return result;
}
std::uint32_t promoted_queue_hash = 0;
TimestampTz promoted_at = 0;

/*
 * Whether the catalog has awa._promote_due_queue (1.1 and later). The library can run
 * against a 1.0 catalog between its installation and ALTER EXTENSION UPDATE: claims must
 * keep working there. A missing function is looked up again at most every 10 s.
 */
bool
promotion_installed(TimestampTz now)
{
	static bool installed = false;
	static TimestampTz checked_at = 0;

	if (installed)
		return true;
	if (checked_at != 0 && !TimestampDifferenceExceeds(checked_at, now, 10000))
		return false;
	checked_at = now;
	installed = OidIsValid(get_func_oid_by_name("awa", "_promote_due_queue"));
	return installed;
}

/*
 * Where no maintenance worker serves this database, a claim promotes the due scheduled and
 * retryable jobs of its own queue (bounded, at most every 100 ms per backend and queue), so
 * retries and scheduled jobs come back with no scheduler (maintenance.md §1).
 */
void
promote_own_queue(text *queue)
{
	static const Oid argtypes[2] = {TEXTOID, INT4OID};
	Datum values[2];
	TimestampTz now = GetCurrentTimestamp();
	std::uint32_t h = hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)), VARSIZE_ANY_EXHDR(queue));

	if (awa::maintenance_worker_serves_database())
		return;
	if (h == promoted_queue_hash && !TimestampDifferenceExceeds(promoted_at, now, kClaimPromoteEveryMs))
		return;
	if (!promotion_installed(now))
		return;
	promoted_queue_hash = h;
	promoted_at = now;
	awa::keep_plan(&promote_plan,
				   "SELECT awa._promote_due_queue($1, $2) WHERE EXISTS (SELECT 1 FROM awa.deferred_jobs d "
				   "WHERE d.queue = $1 AND d.run_at <= clock_timestamp())",
				   2, argtypes);
	values[0] = PointerGetDatum(queue);
	values[1] = Int32GetDatum(kClaimPromoteLimit);
	awa::exec_plan(promote_plan, values, nullptr, false, 0, SPI_OK_SELECT, "claim promotion");
}

/* The lane a claim drains: its head is locked by this transaction. */
struct Candidate
{
	int16 priority;
	int16 shard;
	int64 claim_seq;
	bool receipts;
	Oid seq_oid;
};

/* Run the candidate walk once; false when no unlocked lane has work. */
bool
walk_once(text *queue, double aging_secs, const int *slot_ranges, Candidate *out)
{
	static const Oid cand_types[8] = {TEXTOID, FLOAT8OID, INT4OID, INT4OID, INT4OID, INT4OID, OIDARRAYOID, INT8ARRAYOID};
	Datum values[8];
	ArrayType *inflight_oids;
	ArrayType *inflight_lows;
	bool isnull;

	awa::keep_plan(&candidate_plan, kCandidateSql, 8, cand_types);
	values[0] = PointerGetDatum(queue);
	values[1] = Float8GetDatum(aging_secs);
	for (int k = 0; k < 4; k++)
		values[2 + k] = Int32GetDatum(slot_ranges[k]);
	awa::inflight_arrays(&inflight_oids, &inflight_lows);
	values[6] = PointerGetDatum(inflight_oids);
	values[7] = PointerGetDatum(inflight_lows);
	awa::exec_plan_latest(candidate_plan, values, nullptr, false, 1, SPI_OK_SELECT, "claim candidate walk");
	if (SPI_processed == 0)
		return false;
	out->priority = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	out->shard = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	out->claim_seq = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	out->receipts = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	out->seq_oid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	return true;
}

/*
 * Lock the best unlocked lane head. At READ COMMITTED a head updated by a concurrent claim
 * is re-read by the lock itself. At REPEATABLE READ and SERIALIZABLE PostgreSQL raises 40001
 * instead, so there the walk runs in a subtransaction and a head that moved under it is
 * walked again (a few times, then the claim returns nothing, as when every lane is busy).
 */
bool
lock_candidate(text *queue, double aging_secs, const int *slot_ranges, Candidate *out)
{
	if (!IsolationUsesXactSnapshot())
		return walk_once(queue, aging_secs, slot_ranges, out);
	for (int attempt = 0; attempt < 5; attempt++)
	{
		MemoryContext cxt = CurrentMemoryContext;
		ResourceOwner owner = CurrentResourceOwner;
		volatile bool found = false;
		volatile bool retry = false;

		BeginInternalSubTransaction(nullptr);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			found = walk_once(queue, aging_secs, slot_ranges, out);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		PG_CATCH();
		{
			ErrorData *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			if (edata->sqlerrcode != ERRCODE_T_R_SERIALIZATION_FAILURE)
				ReThrowError(edata);
			FreeErrorData(edata);
			retry = true;
		}
		PG_END_TRY();
		if (!retry)
			return found;
	}
	return false;
}

} // namespace

/*
 * awa.claim_ready_runtime(queue, max_batch, deadline_secs, aging_secs): claim up to
 * max_batch jobs from one lane of the queue and return them in lane order.
 */
AWA_SQL_FUNCTION(awa_claim_ready_runtime)
{
	static const Oid drain_types[14] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID, FLOAT8OID, FLOAT8OID,
										INT4OID, INT4OID, INT4OID, INT4OID, INT4OID, INT8OID, INT8OID};
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	int64 max_batch;
	double deadline_secs;
	double aging_secs;
	Datum drain_values[14];
	awa::RingSlot ring;
	int slot_ranges[4];
	int16 priority;
	int16 shard;
	int64 claim_seq;
	bool receipts;
	SPIPlanPtr drain;
	int planner_level;

	max_batch = awa::max_batch_arg(fcinfo, 1, "p_max_batch");
	deadline_secs = awa::seconds_arg(fcinfo, 2, "p_deadline_secs", 0);
	aging_secs = awa::seconds_arg(fcinfo, 3, "p_aging_secs", awa::kMinAgingSeconds);

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	planner_level = awa::push_hot_path_planner();

	promote_own_queue(queue);

	/* A stale hint can lead to an empty lane: clear it and walk again (bounded). */
	for (int attempt = 0;; attempt++)
	{
		Candidate cand;

		live_slot_ranges(slot_ranges);
		if (!lock_candidate(queue, aging_secs, slot_ranges, &cand))
		{
			awa::pop_hot_path_planner(planner_level);
			SPI_finish();
			return (Datum) 0;
		}
		priority = cand.priority;
		shard = cand.shard;
		claim_seq = cand.claim_seq;
		receipts = cand.receipts;

		/*
		 * Re-read the live arc now that the head is locked: prune moves a lane's pending rows
		 * only while holding that lane's head, so everything it moved is in this arc.
		 */
		live_slot_ranges(slot_ranges);
		ring = awa::ring_write_slot(receipts ? awa::Ring::Claim : awa::Ring::Lease);
		if (receipts)
			drain = awa::keep_plan(&drain_receipts_plan, kDrainReceiptsSql, 14, drain_types);
		else
			drain = awa::keep_plan(&drain_leases_plan, kDrainLeasesSql, 14, drain_types);
		drain_values[0] = PointerGetDatum(queue);
		drain_values[1] = Int16GetDatum(priority);
		drain_values[2] = Int16GetDatum(shard);
		drain_values[3] = Int64GetDatum(claim_seq);
		drain_values[4] = Int64GetDatum(max_batch);
		drain_values[5] = Float8GetDatum(deadline_secs);
		drain_values[6] = Float8GetDatum(aging_secs);
		for (int k = 0; k < 4; k++)
			drain_values[7 + k] = Int32GetDatum(slot_ranges[k]);
		drain_values[11] = Int32GetDatum(ring.slot);
		drain_values[12] = Int64GetDatum(ring.generation);
		/* Read before the drain's snapshot (exec_plan_latest takes it). */
		drain_values[13] = Int64GetDatum(awa::claim_bound(cand.seq_oid));
		awa::exec_plan_latest(drain, drain_values, nullptr, false, 0, SPI_OK_SELECT, "claim drain");
		if (SPI_processed > 0 || attempt >= 3)
			break;
		awa::keep_plan(&clear_hint_plan, kClearHintSql, 3, drain_types);
		awa::exec_plan(clear_hint_plan, drain_values, nullptr, false, 0, SPI_OK_UPDATE, "claim hint reset");
	}

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum values[32];
		bool nulls[32];

		if (SPI_tuptable->tupdesc->natts != rsinfo->setDesc->natts || rsinfo->setDesc->natts > 32)
			elog(ERROR, "awa_shard: claim result has %d columns, expected %d", SPI_tuptable->tupdesc->natts,
				 rsinfo->setDesc->natts);
		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	awa::stats_add(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), shard, awa::StatKind::Claimed,
				   static_cast<int64>(SPI_processed));
	awa::pop_hot_path_planner(planner_level);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return (Datum) 0;
}
