/*
 * claim.cpp — awa.claim_ready_runtime, the claim path of docs/design.md §4.
 *
 * 1. Candidate walk: every claim head of the queue (all priorities and shards, never
 *    filtered by the current width) whose lane has a visible ready row at or after its
 *    cursor (the head's hint, else a probe, remembered per backend until the lane moves);
 *    ordered by effective priority, run_at of that row, lane priority; the first head that
 *    is not locked is locked FOR UPDATE SKIP LOCKED.
 * 2. Drain: in a new statement (new snapshot, after the lock), take up to max_batch
 *    visible rows of that lane with lane_seq >= its cursor in lane order, record the
 *    running attempts (receipts or leases) in the fenced write slot of the claim or lease
 *    ring (ring.cpp) and move the cursor to max(lane_seq) + 1 by appending a claim mark
 *    (claim_cursor.cpp): the head row is locked, never updated.
 * Both statements and the ring reads run on the latest committed state, whatever the
 * caller's isolation level, so an old REPEATABLE READ snapshot never hides rows that
 * prune moved forward and never makes the claim jump them.
 * The drain takes only rows below the lane's claim bound (registry.cpp), read before its
 * snapshot: every reservation below it has ended, so a missing lane_seq there was rolled
 * back or removed and may be jumped, while a reservation still in flight is never jumped.
 * In lane-lock mode there is no bound: reservations hold the lane lock until they end, so
 * a visible N+1 already proves that N has ended.
 * Flow control (flow_control.cpp, rate_limit.cpp): before the walk, a queue with limits
 * lowers max_batch to the room left under its concurrency limit and to the tokens of its
 * rate limit; a queue without limits pays one look-up in a backend cache. With a per-key
 * limit the drain of a lane stops before the first job whose key is at its cap or (per-key
 * rate limit) has no token, and a lane that begins with such a job is passed over for the
 * rest of the claim (passed_lanes).
 */
#include "catalog_version.hpp"
#include "citus.hpp"
#include "claim_cursor.hpp"
#include "claim_sql.hpp"
#include "compat_1_0.hpp"
#include "direct_drain.hpp"
#include "flow_control.hpp"
#include "key_caps.hpp"
#include "head_wait.hpp"
#include "lane_lock.hpp"
#include "limits.hpp"
#include "module.hpp"
#include "running_bound.hpp"
#include "pg_boundary.hpp"
#include "promote.hpp"
#include "rate_limit.hpp"
#include "registry.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "stats.hpp"
#include "validate.hpp"
#include "wakeup.hpp"
#include "worker.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "access/xact.h"
#include "utils/resowner.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace
{

SPIPlanPtr probe_plan = nullptr;
SPIPlanPtr row_exists_plan = nullptr;
SPIPlanPtr lock_head_plan = nullptr;
SPIPlanPtr head_exists_plan = nullptr;
SPIPlanPtr drain_plans[2][2];	/* [catalog][receipts] */
SPIPlanPtr clear_hint_plans[2]; /* [catalog] */

/* The first visible row of a lane in [from, fence) of the live ready slots: run_at and key. */
const char *const kProbeSql =
	"SELECT r.run_at, r.ready_slot, r.lane_seq FROM awa.ready_entries r "
	"WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 AND r.lane_seq < $5 "
	"  AND (r.ready_slot BETWEEN $6 AND $7 OR r.ready_slot BETWEEN $8 AND $9) "
	"ORDER BY r.lane_seq LIMIT 1";

/* Result columns of kProbeSql. */
enum ProbeColumn
{
	PC_RUN_AT = 1,
	PC_READY_SLOT,
	PC_LANE_SEQ
};

/* Whether a remembered row is still there (one primary-key probe of one partition). */
const char *const kRowExistsSql =
	"SELECT 1 FROM awa.ready_entries r "
	"WHERE r.ready_slot = $1 AND r.queue = $2 AND r.priority = $3 AND r.enqueue_shard = $4 AND r.lane_seq = $5";

/* Lock one lane head unless another claim holds it (its cursor is read after the lock). */
const char *const kLockHeadSql =
	"SELECT 1 FROM awa.queue_claim_heads h "
	"WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3 FOR UPDATE SKIP LOCKED";

/* Whether a lane head the lock statement skipped is still there, so held by another claim. */
const char *const kHeadExistsSql = "SELECT 1 FROM awa.queue_claim_heads h "
								   "WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3";

/*
 * A locked head whose hint pointed at nothing: forget the hint so the next walk probes
 * (rare: only a cancel, delete or move between two claims makes a hint point at nothing).
 * With claim marks the hint is the latest mark's when that mark is further than the head;
 * the fold never deletes such a mark (only marks below their head), so this never waits for
 * maintenance, and the head is this claim's own.
 */
const char *const kClearHintSql =
	"WITH head AS (UPDATE awa.queue_claim_heads SET head_run_at = NULL "
	"  WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3 AND head_run_at IS NOT NULL) "
	"UPDATE awa.claim_marks k SET head_run_at = NULL "
	"WHERE k.queue = $1 AND k.priority = $2 AND k.enqueue_shard = $3 AND k.head_run_at IS NOT NULL "
	"  AND k.claim_seq = (SELECT max(x.claim_seq) FROM awa.claim_marks x "
	"                      WHERE x.queue = $1 AND x.priority = $2 AND x.enqueue_shard = $3) "
	"  AND k.claim_seq > (SELECT h.claim_seq FROM awa.queue_claim_heads h "
	"                      WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3)";
const Oid kClearHintTypes[3] = {TEXTOID, INT2OID, INT2OID};

/*
 * How a drain moves its lane's cursor past the rows it took: a claim mark appended, with the
 * run_at of the next visible row as the hint (the 1.0 catalog's head update is in compat_1_0.cpp).
 */
#define AWA_ADVANCE_MARK                                                                                               \
	"advance AS (INSERT INTO awa.claim_marks (queue, priority, enqueue_shard, claim_seq, head_run_at) "                \
	"  SELECT $1, $2, $3, m.next, "                                                                                    \
	"    (SELECT w.run_at FROM window_ w WHERE w.lane_seq >= m.next ORDER BY w.lane_seq LIMIT 1) "                     \
	"  FROM (SELECT max(lane_seq) + 1 AS next FROM rows_) m WHERE m.next IS NOT NULL RETURNING head_run_at), "

/*
 * Receipts mode: one append-only awa.claim_batches row per (ready slot, block of 64
 * lane_seqs) of the claimed window, its offsets in the block (lane_seq % 64) and effective
 * priorities as arrays in lane order (job id, attempt, run lease and max_attempts are read from the ready rows, which a
 * claim does not change). Each row draws one
 * receipt id (the sequence steps by 64), rows in lane order; its k-th attempt's receipt id is
 * that plus k - 1. All attempts of a claim share one claim time (claim_time), so one block
 * makes one row.
 */
#define AWA_DRAIN_RECEIPT_BATCHES(ADVANCE)                                                                             \
	AWA_DRAIN_PICK(ADVANCE, AWA_UNIQUE_IN_QUEUE)                                                                       \
	"blocks AS MATERIALIZED (SELECT g.ready_slot, g.lane_block, nextval('awa.receipt_id_seq') AS receipt_base "        \
	"  FROM (SELECT ready_slot, lane_seq / 64 AS lane_block FROM rows_ GROUP BY 1, 2 ORDER BY min(lane_seq)) g), "     \
	"numbered AS MATERIALIZED (SELECT r.*, k.receipt_base + row_number() OVER ("                                       \
	"    PARTITION BY r.ready_slot, r.lane_seq / 64 ORDER BY r.lane_seq) - 1 AS receipt_id, k.receipt_base "           \
	"  FROM rows_ r JOIN blocks k ON k.ready_slot = r.ready_slot AND k.lane_block = r.lane_seq / 64), "                \
	"ins AS (INSERT INTO awa.claim_batches (claim_slot, ready_slot, ready_generation, queue, priority, "               \
	"  enqueue_shard, lane_block, receipt_base, claimed_at, deadline_at, lane_offsets, effective_priorities) "         \
	"  SELECT ring_slot, ready_slot, ready_generation, queue, priority, enqueue_shard, lane_seq / 64, receipt_base, "  \
	"    claimed_at, deadline_at, array_agg((lane_seq % 64)::int2 ORDER BY lane_seq), "                                \
	"    array_agg(effective_priority ORDER BY lane_seq) "                                                             \
	"  FROM numbered GROUP BY ring_slot, ready_slot, ready_generation, queue, priority, enqueue_shard, "               \
	"    lane_seq / 64, receipt_base, claimed_at, deadline_at) " AWA_DRAIN_RESULT(                                     \
		"NULL::int", "NULL::bigint", "r.ring_slot", "r.receipt_id") "FROM numbered r ORDER BY r.lane_seq"

/* The drain statements, [receipts]. */
const char *const kDrainSql[2] = {AWA_DRAIN_LEASES(AWA_ADVANCE_MARK, AWA_UNIQUE_IN_QUEUE),
								  AWA_DRAIN_RECEIPT_BATCHES(AWA_ADVANCE_MARK)};

/* Due jobs a claim promotes at most per call, and how often one backend looks for them. */
constexpr int kClaimPromoteLimit = 100;
constexpr long kClaimPromoteEveryMs = 100;

std::uint32_t promoted_queue_hash = 0;
TimestampTz promoted_at = 0;

/*
 * Where no maintenance worker serves this database, a claim promotes the due scheduled and
 * retryable jobs of its own queue (bounded, at most every 100 ms per backend and queue), so
 * retries and scheduled jobs come back with no scheduler (maintenance.md §1). Only claims
 * of the 1.1 catalog promote (1.0's never did).
 */
void
promote_own_queue(text *queue)
{
	TimestampTz now = GetCurrentTimestamp();
	std::uint32_t h = hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)), VARSIZE_ANY_EXHDR(queue));

	if (awa::maintenance_worker_serves_database())
		return;
	if (h == promoted_queue_hash && !TimestampDifferenceExceeds(promoted_at, now, kClaimPromoteEveryMs))
		return;
	promoted_queue_hash = h;
	promoted_at = now;
	if (!IsolationUsesXactSnapshot())
	{
		(void)awa::promote_due_queue(queue, kClaimPromoteLimit);
		return;
	}
	/*
	 * At REPEATABLE READ a due job another claim promoted after this transaction's snapshot
	 * raises 40001 here: give up this promotion (the other claim did it) rather than the claim.
	 */
	(void)awa::run_unless_serialization_failure(
		[](void *arg) { (void)awa::promote_due_queue(static_cast<text *>(arg), kClaimPromoteLimit); }, queue);
}

/*
 * Lanes this claim has locked and passed over because their first job's key was at its
 * per-key cap or had no token: the walk skips them (its own head locks would not be skipped by
 * SKIP LOCKED). Room for every lane a queue can have; reset at the start of every claim.
 */
struct PassedLanes
{
	int n;
	int16 priority[awa::kMaxEnqueueShards * (awa::kMaxPriority - awa::kMinPriority + 1)]; /* every lane of a queue */
	int16 shard[awa::kMaxEnqueueShards * (awa::kMaxPriority - awa::kMinPriority + 1)];
} passed_lanes;

/* Whether the claim has passed over this lane (per-key caps). */
bool
lane_passed(int16 priority, int16 shard)
{
	for (int i = 0; i < passed_lanes.n; i++)
		if (passed_lanes.priority[i] == priority && passed_lanes.shard[i] == shard)
			return true;
	return false;
}

/* The lane a claim drains: its head is locked by this transaction. */
struct Candidate
{
	int16 priority;
	int16 shard;
	int64 claim_seq;
	bool receipts;
	awa::Catalog catalog;
	bool board; /* the walk read the cursor board */
	Oid seq_oid;
	TransactionId head_xmin; /* version of the head row, the board's key */
};

/*
 * What a walk learned by probing a lane that had no hint: the run_at of its first visible
 * row, valid while the lane's cursor, high-water mark and fence are the ones it was probed
 * at. Kept per backend (keyed by the lane's sequence), so a lane whose sequence has not
 * moved since its last probe costs no index probe; the shared hint on the head row is only
 * written by claims of that lane. Only rows found are remembered: "nothing visible" can
 * change without the sequence moving (a reservation committing), so such a lane is probed
 * again. A cancel, delete or move removes rows without moving the cursor or the sequence, so
 * a remembered row may be gone: the walk checks it with one primary-key probe when its lane
 * is about to win, so a claim is never empty and a lane never jumps the queue because of a
 * removed row; the lanes behind the winner cost nothing. (Like the hint on the head row, a
 * remembered run_at can also be later than the lane's true first row, e.g. after a promoted
 * job with an earlier run_at landed behind it: that lane is then served a little later.)
 */
struct ProbeEntry
{
	Oid seq_oid; /* hash key */
	int64 claim_seq;
	int64 high_water;
	int64 fence;
	TimestampTz run_at;
	int32 ready_slot; /* the remembered row */
	int64 lane_seq;
};

HTAB *probe_cache = nullptr;

/* The probe cache, created on first use. */
HTAB *
probes()
{
	if (probe_cache == nullptr)
	{
		HASHCTL ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ProbeEntry);
		probe_cache = hash_create("awa_shard claim probes", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	return probe_cache;
}

/* A lane head as the walk sees it, with the key it is ordered by. */
struct Head
{
	int16 priority;
	int16 shard;
	int64 claim_seq;
	TimestampTz run_at;
	Oid seq_oid;
	TransactionId head_xmin;
	int effective_priority;
	int64 fence;
	bool remembered; /* run_at came from the probe cache, not checked yet */
};

/*
 * The queue ring's live arc for a walk, read (latest committed state) only when a lane
 * without a hint must be probed: most walks take every lane's first row from its hint and
 * need no arc. SPI must be connected.
 */
struct LazyArc
{
	bool read = false;
	int ranges[4];

	/* The arc, read on first use. */
	const int *get()
	{
		if (!read)
		{
			awa::live_slot_ranges(awa::Ring::Queue, ranges);
			read = true;
		}
		return ranges;
	}
};

/*
 * The run_at of a hint-less lane's first visible row at or after its cursor and below its
 * fence: from the probe cache when the lane has not moved since it was probed (*remembered
 * set; with `verify`, only after one primary-key probe shows the row is still there), else
 * by one ordered index probe, remembered when it finds a row. False when the lane shows no row.
 */
bool
probe_lane(text *queue, const Head &head, LazyArc *arc, bool verify, TimestampTz *run_at, bool *remembered)
{
	static const Oid types[9] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID, INT4OID};
	int64 high_water = awa::lane_high_water(head.seq_oid);
	Datum values[9];
	bool found;
	bool isnull;
	ProbeEntry *entry;

	*remembered = false;
	if (head.claim_seq >= high_water)
		return false; /* nothing was ever reserved at or after the cursor */
	entry = static_cast<ProbeEntry *>(hash_search(probes(), &head.seq_oid, HASH_FIND, nullptr));
	values[0] = PointerGetDatum(queue);
	if (entry != nullptr && entry->claim_seq == head.claim_seq && entry->high_water == high_water &&
		entry->fence == head.fence)
	{
		static const Oid exists_types[5] = {INT4OID, TEXTOID, INT2OID, INT2OID, INT8OID};
		Datum key[5] = {Int32GetDatum(entry->ready_slot), values[0], Int16GetDatum(head.priority),
						Int16GetDatum(head.shard), Int64GetDatum(entry->lane_seq)};

		awa::LaneRange lane = {queue, head.priority, head.shard, 0, 0};
		bool there;

		if (!verify)
		{
			*run_at = entry->run_at;
			*remembered = true;
			return true;
		}
		if (!awa::ready_row_visible(lane, entry->ready_slot, entry->lane_seq, &there))
		{
			awa::keep_plan(&row_exists_plan, kRowExistsSql, 5, exists_types);
			awa::exec_plan_latest(row_exists_plan, key, nullptr, true, 1, SPI_OK_SELECT, "claim remembered row");
			there = SPI_processed == 1;
		}
		if (there)
		{
			*run_at = entry->run_at;
			return true;
		}
	}
	const int *slot_ranges = arc->get();
	awa::LaneRange lane = {queue, head.priority, head.shard, head.claim_seq, head.fence};
	awa::LaneRow first;
	bool there;

	if (!awa::lane_first_row(lane, slot_ranges, &there, &first))
	{
		awa::keep_plan(&probe_plan, kProbeSql, 9, types);
		values[1] = Int16GetDatum(head.priority);
		values[2] = Int16GetDatum(head.shard);
		values[3] = Int64GetDatum(head.claim_seq);
		values[4] = Int64GetDatum(head.fence);
		for (int k = 0; k < 4; k++)
			values[5 + k] = Int32GetDatum(slot_ranges[k]);
		awa::exec_plan_latest(probe_plan, values, nullptr, true, 1, SPI_OK_SELECT, "claim lane probe");
		there = SPI_processed > 0;
		if (there)
		{
			HeapTuple row = SPI_tuptable->vals[0];

			first.run_at = DatumGetTimestampTz(SPI_getbinval(row, SPI_tuptable->tupdesc, PC_RUN_AT, &isnull));
			first.ready_slot = DatumGetInt32(SPI_getbinval(row, SPI_tuptable->tupdesc, PC_READY_SLOT, &isnull));
			first.lane_seq = DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, PC_LANE_SEQ, &isnull));
		}
	}
	if (!there)
	{
		if (entry != nullptr)
			(void)hash_search(probes(), &head.seq_oid, HASH_REMOVE, nullptr);
		return false;
	}
	*run_at = first.run_at;
	entry = static_cast<ProbeEntry *>(hash_search(probes(), &head.seq_oid, HASH_ENTER, &found));
	entry->claim_seq = head.claim_seq;
	entry->high_water = high_water;
	entry->fence = head.fence;
	entry->run_at = first.run_at;
	entry->ready_slot = first.ready_slot;
	entry->lane_seq = first.lane_seq;
	return true;
}

/* Forget what the probe cache knows of a lane (its remembered row turned out to be gone). */
void
forget_probe(Oid seq_oid)
{
	if (probe_cache != nullptr)
		(void)hash_search(probe_cache, &seq_oid, HASH_REMOVE, nullptr);
}

/* The walk's order: effective priority, run_at of the lane's first row, lane priority. */
bool
walk_order(const Head &a, const Head &b)
{
	if (a.effective_priority != b.effective_priority)
		return a.effective_priority < b.effective_priority;
	if (a.run_at != b.run_at)
		return a.run_at < b.run_at;
	return a.priority < b.priority;
}

/*
 * Run the candidate walk once; false when no unlocked lane has work. Reads every head of the
 * queue, keeps the lanes that show a row at or after their cursor and below their fence
 * (the head's hint, else probe_lane), orders them by effective priority, run_at of that row,
 * lane priority, and locks the first one no other claim holds (FOR UPDATE SKIP LOCKED, one
 * statement per head tried, so concurrent claimers spread over the lanes). *saw_held is set
 * when a lane with work was skipped because another transaction holds its head.
 */
bool
walk_once(text *queue, awa::Catalog catalog, double aging_secs, LazyArc *arc, Candidate *out, bool *saw_held)
{
	static const Oid lock_types[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3];
	int n_inflight;
	const awa::InflightLow *inflight = awa::inflight_lows(&n_inflight);
	TimestampTz now = GetCurrentTimestamp();
	bool receipts = false;
	awa::LaneHead *lanes;
	int n_lanes = awa::read_lane_heads(queue, catalog, &lanes, &receipts);
	Head *heads;
	int n_heads = 0;

	if (n_lanes == 0 || passed_lanes.n == lengthof(passed_lanes.priority))
		return false;
	values[0] = PointerGetDatum(queue);
	heads = static_cast<Head *>(palloc(sizeof(Head) * n_lanes));
	for (int i = 0; i < n_lanes; i++)
	{
		Head h;

		h.priority = lanes[i].priority;
		h.shard = lanes[i].shard;
		if (passed_lanes.n > 0 && lane_passed(h.priority, h.shard))
			continue;
		h.claim_seq = lanes[i].claim_seq;
		h.seq_oid = lanes[i].seq_oid;
		h.head_xmin = lanes[i].head_xmin;
		h.fence = awa::lane_fence(h.seq_oid, inflight, n_inflight);
		if (h.claim_seq >= h.fence)
			continue; /* the cursor reached a reservation still in flight */
		h.remembered = false;
		if (!lanes[i].hint_null)
			h.run_at = lanes[i].hint;
		else if (!probe_lane(queue, h, arc, false, &h.run_at, &h.remembered))
			continue;
		h.effective_priority = awa::aged_priority(h.priority, h.run_at, now, aging_secs);
		heads[n_heads++] = h;
	}
	std::stable_sort(heads, heads + n_heads, walk_order);
	for (int i = 0; i < n_heads; i++)
	{
		/*
		 * A remembered row is checked only when its lane is about to win: a removed row can
		 * only make a lane look older than it is, so the lanes behind the winner need no check.
		 */
		if (heads[i].remembered)
		{
			bool again;

			if (!probe_lane(queue, heads[i], arc, true, &heads[i].run_at, &again))
			{
				std::memmove(&heads[i], &heads[i + 1], sizeof(Head) * (n_heads - i - 1));
				n_heads--;
				i--;
				continue;
			}
			heads[i].remembered = false;
			heads[i].effective_priority = awa::aged_priority(heads[i].priority, heads[i].run_at, now, aging_secs);
			std::stable_sort(heads + i, heads + n_heads, walk_order);
			i--;
			continue;
		}
		bool locked;
		bool held;

		if (!awa::lock_head_direct(queue, heads[i].priority, heads[i].shard, &locked, &held))
		{
			values[1] = Int16GetDatum(heads[i].priority);
			values[2] = Int16GetDatum(heads[i].shard);
			awa::keep_plan(&lock_head_plan, kLockHeadSql, 3, lock_types);
			awa::exec_plan_latest(lock_head_plan, values, nullptr, false, 1, SPI_OK_SELECT, "claim head lock");
			locked = SPI_processed > 0;
			if (locked)
				awa::note_head_held(queue);
			else
			{
				/* Skipped: held by another claim unless it is gone (a dropped lane), as the direct lock tells. */
				awa::keep_plan(&head_exists_plan, kHeadExistsSql, 3, lock_types);
				awa::exec_plan_latest(head_exists_plan, values, nullptr, true, 1, SPI_OK_SELECT, "claim head check");
				held = SPI_processed > 0;
			}
		}
		if (!locked)
		{
			*saw_held = *saw_held || held;
			continue; /* another claim holds this lane */
		}
		/*
		 * The cursor, on a snapshot taken after the lock: the claim that held the head before
		 * committed its mark first, and none can move it now. A claim that committed since the
		 * heads were read may have emptied the lane.
		 */
		if (!awa::lane_cursor(queue, heads[i].priority, heads[i].shard, catalog, &out->claim_seq))
			continue; /* the lane was dropped */
		if (out->claim_seq != heads[i].claim_seq &&
			out->claim_seq >= std::min(heads[i].fence, awa::lane_high_water(heads[i].seq_oid)))
		{
			/* The board was behind: the next walks start from what the lock showed. */
			if (TransactionIdIsValid(heads[i].head_xmin))
				awa::board_publish(heads[i].seq_oid, heads[i].head_xmin, out->claim_seq, false, 0, false);
			continue;
		}
		out->priority = heads[i].priority;
		out->shard = heads[i].shard;
		out->receipts = receipts;
		out->catalog = catalog;
		out->board = TransactionIdIsValid(heads[i].head_xmin); /* the walk read the board */
		out->seq_oid = heads[i].seq_oid;
		out->head_xmin = heads[i].head_xmin;
		return true;
	}
	return false;
}

/*
 * Lock the best unlocked lane head. At READ COMMITTED a head updated by a concurrent claim
 * is re-read by the lock itself. At REPEATABLE READ and SERIALIZABLE PostgreSQL raises 40001
 * instead, so there the walk runs in a subtransaction and a head that moved under it is
 * walked again (a few times, then the claim returns nothing, as when every lane is busy).
 */
bool
lock_candidate(text *queue, awa::Catalog catalog, double aging_secs, LazyArc *arc, Candidate *out, bool *saw_held)
{
	struct Walk
	{
		text *queue;
		awa::Catalog catalog;
		double aging_secs;
		LazyArc *arc;
		Candidate *out;
		bool found;
		bool saw_held;
	} walk = {queue, catalog, aging_secs, arc, out, false, false};
	auto walk_in_subxact = [](void *arg)
	{
		Walk *w = static_cast<Walk *>(arg);

		w->found = walk_once(w->queue, w->catalog, w->aging_secs, w->arc, w->out, &w->saw_held);
	};

	*saw_held = false;
	if (!IsolationUsesXactSnapshot())
		return walk_once(queue, catalog, aging_secs, arc, out, saw_held);
	for (int attempt = 0; attempt < 5; attempt++)
		if (awa::run_unless_serialization_failure(walk_in_subxact, &walk))
			return walk.found;
	return false;
}

/*
 * The walk locked no lane and saw one with work held by another claim (head_wait.cpp): sleep
 * until a claim of the queue ends and walk again, until a lane is locked, none is held any
 * more, or *deadline (set at the first wait of the call: awa_shard.claim_wait from then, for
 * every wait of one claim) has passed. `ticket` was read before the walk. Each walk runs in
 * a memory context of its own, reset after it: a long wait on a busy slot walks often.
 */
bool
wait_then_walk(text *queue, awa::Catalog catalog, double aging_secs, std::uint64_t ticket, TimestampTz *deadline,
			   Candidate *out)
{
	MemoryContext walks;
	MemoryContext caller;
	bool found = false;

	if (ticket == 0)
		return false;
	if (*deadline == 0)
		*deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), awa::claim_wait_ms);
	walks = AllocSetContextCreate(CurrentMemoryContext, "awa_shard claim wait", ALLOCSET_SMALL_SIZES);
	caller = MemoryContextSwitchTo(walks);
	while (awa::wait_for_head_release(queue, ticket, *deadline))
	{
		LazyArc arc;
		bool saw_held = false;

		ticket = awa::head_release_ticket(queue);
		found = walk_once(queue, catalog, aging_secs, &arc, out, &saw_held);
		MemoryContextReset(walks);
		if (found || !saw_held || ticket == 0)
			break;
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(walks);
	return found;
}

/*
 * The drain by its statement (claim_sql.hpp): leases mode, the 1.0 catalog, Citus, or a
 * receipts-mode drain the direct one sent back. Its rows stay in SPI_tuptable for the
 * caller; *out says how many and where the lane's cursor and hint stand after them.
 */
void
drain_statement(text *queue, awa::Catalog catalog, bool receipts, int16 priority, int16 shard, int64 claim_seq,
				int64 max_batch, double deadline_secs, double aging_secs, const int *slot_ranges,
				const awa::RingSlot &ring, int64 bound, awa::DrainOutcome *out)
{
	static const Oid drain_types[14] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID, FLOAT8OID, FLOAT8OID,
										INT4OID, INT4OID, INT4OID, INT4OID, INT4OID, INT8OID,	INT8OID};
	Datum values[14];
	SPIPlanPtr drain;
	bool isnull;

	/* Under Citus the drain names the queue's shards: Citus would plan its inserting CTEs
	 * apart and send their input to every node (citus.cpp, keep_shard_plan). */
	drain = catalog == awa::Catalog::V1_1 ? awa::keep_shard_plan(kDrainSql[receipts], queue, 14, drain_types) : nullptr;
	if (drain == nullptr)
		drain = awa::keep_plan(&drain_plans[static_cast<int>(catalog)][receipts],
							   catalog == awa::Catalog::V1_1 ? kDrainSql[receipts]
															 : awa::compat_1_0::claim_drain_sql(receipts),
							   14, drain_types);
	values[0] = PointerGetDatum(queue);
	values[1] = Int16GetDatum(priority);
	values[2] = Int16GetDatum(shard);
	values[3] = Int64GetDatum(claim_seq);
	values[4] = Int64GetDatum(max_batch);
	values[5] = Float8GetDatum(deadline_secs);
	values[6] = Float8GetDatum(aging_secs);
	for (int k = 0; k < 4; k++)
		values[7 + k] = Int32GetDatum(slot_ranges[k]);
	values[11] = Int32GetDatum(ring.slot);
	values[12] = Int64GetDatum(ring.generation);
	values[13] = Int64GetDatum(bound);
	awa::exec_plan_latest(drain, values, nullptr, false, 0, SPI_OK_SELECT, "claim drain");
	out->claimed = static_cast<int64>(SPI_processed);
	out->has_hint = false;
	if (SPI_processed == 0)
		return;
	HeapTuple last = SPI_tuptable->vals[SPI_processed - 1];
	/* The lane's hint is the last column, after the function's own (AWA_DRAIN_RESULT). */
	Datum hint = SPI_getbinval(last, SPI_tuptable->tupdesc, SPI_tuptable->tupdesc->natts, &isnull);

	out->next_seq = DatumGetInt64(SPI_getbinval(last, SPI_tuptable->tupdesc, DC_LANE_SEQ, &isnull)) + 1;
	out->has_hint = !isnull;
	out->hint_run_at = isnull ? 0 : DatumGetTimestampTz(hint);
}

} // namespace

/*
 * awa.claim_ready_runtime(queue, max_batch, deadline_secs, aging_secs): claim up to
 * max_batch jobs from one lane of the queue and return them in lane order, with the
 * statements of the catalog the calling entry point serves.
 */
Datum
awa::claim_ready_runtime(FunctionCallInfo fcinfo, Catalog catalog)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	int64 max_batch;
	double deadline_secs;
	double aging_secs;
	awa::RingSlot ring;
	int slot_ranges[4];
	int16 priority;
	int16 shard;
	int64 claim_seq;
	int64 bound;
	bool receipts;
	bool direct = false;
	awa::DrainOutcome outcome = {};
	int64 claimed;
	int planner_level;
	awa::QueueLimits limits = {};
	int64 tokens = 0;						  /* taken from the rate limit's bucket */
	int64 granted = 0;						  /* attempts granted under the concurrency limit */
	awa::KeyTokens key_tokens = {nullptr, 0}; /* taken from the keys' buckets (per-key rate limit) */
	awa::KeyStep key_step = {};				  /* what the per-key step kept of the lane it looked at */
	int64 lane_batch;
	TimestampTz wait_deadline = 0; /* of the waits for held heads, from the first one */

	max_batch = awa::max_batch_arg(fcinfo, 1, "p_max_batch");
	deadline_secs = awa::seconds_arg(fcinfo, 2, "p_deadline_secs", 0);
	aging_secs = awa::seconds_arg(fcinfo, 3, "p_aging_secs", awa::kMinAgingSeconds);

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	if (catalog == Catalog::V1_1)
	{
		std::uint64_t stamp_before = awa::queue_meta_stamp();

		promote_own_queue(queue);
		awa::queue_limits(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), &limits);
		/* A limit set before this claim commits must not miss its attempts (running_bound.cpp). */
		if (!limits.concurrency)
			awa::running_bound_note_unlimited(queue, stamp_before);
	}
	/* Flow control: at most the room under the concurrency limit, then the rate's tokens. */
	if (limits.concurrency)
	{
		max_batch = awa::concurrency_room(queue, limits.concurrency_limit, max_batch);
		granted = max_batch;
	}
	passed_lanes.n = 0;
	if (limits.rate && max_batch > 0)
	{
		max_batch =
			awa::rate_take(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), limits.per_second, limits.burst, max_batch);
		tokens = max_batch;
	}
	if (max_batch <= 0)
	{
		awa::concurrency_give_back(queue, granted);
		if (SPI_finish() != SPI_OK_FINISH)
			elog(ERROR, "awa_shard: SPI_finish failed");
		return (Datum)0;
	}
	/* After promotion: only the walk and the drain run with the pinned settings. */
	planner_level = awa::push_hot_path_planner();

	/* A stale hint can lead to an empty lane: clear it and walk again (bounded). */
	for (int attempt = 0;; attempt++)
	{
		Candidate cand;
		LazyArc walk_arc;
		bool saw_held;
		std::uint64_t ticket = awa::head_release_ticket(queue); /* before the walk tries the heads */

		if (!lock_candidate(queue, catalog, aging_secs, &walk_arc, &cand, &saw_held) &&
			!(saw_held && wait_then_walk(queue, catalog, aging_secs, ticket, &wait_deadline, &cand)))
		{
			if (passed_lanes.n > 0)
				awa::note_key_capped(queue);
			awa::rate_give_back(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), limits.per_second, limits.burst, tokens);
			awa::concurrency_give_back(queue, granted);
			awa::pop_hot_path_planner(planner_level);
			if (SPI_finish() != SPI_OK_FINISH)
				elog(ERROR, "awa_shard: SPI_finish failed");
			return (Datum)0;
		}
		priority = cand.priority;
		shard = cand.shard;
		claim_seq = cand.claim_seq;
		receipts = cand.receipts;

		/*
		 * Read the live arc now that the head is locked (with the write slot, in one read):
		 * prune moves a lane's pending rows only while holding that lane's head, so everything
		 * it moved is in this arc.
		 */
		ring = awa::ring_write_slot(receipts ? awa::Ring::Claim : awa::Ring::Lease, slot_ranges);
		bound = awa::claim_bound(cand.seq_oid); /* before the drain's snapshot, and before a per-key count */
		lane_batch = max_batch;
		key_step.window = nullptr; /* a window read for an earlier lane, or an earlier walk, is not this one */
		if (limits.key_concurrency || limits.key_rate)
		{
			int64 seen = 0;
			/* A lane this backend passed over at its head key's cap, and nothing has ended since (key_caps.cpp). */
			bool capped = limits.key_concurrency && awa::lane_still_capped(queue, priority, shard, claim_seq, bound,
																		   slot_ranges, limits.key_concurrency_limit);

			if (!capped && limits.key_concurrency)
				lane_batch = awa::key_window_room(queue, priority, shard, claim_seq, bound, slot_ranges, max_batch,
												  limits.key_concurrency_limit, &seen, &key_step);
			if (!capped && limits.key_rate && lane_batch > 0)
				lane_batch = awa::key_rate_room(queue, priority, shard, claim_seq, bound, slot_ranges, lane_batch,
												limits, &seen, &key_tokens, &key_step);
			if (capped || (seen > 0 && lane_batch == 0))
			{
				/* The lane begins with a job whose key is at its cap, busy or out of tokens: try the other lanes. */
				passed_lanes.priority[passed_lanes.n] = priority;
				passed_lanes.shard[passed_lanes.n] = shard;
				passed_lanes.n++;
				attempt--;
				continue;
			}
		}
		/*
		 * A claim with a deadline holds its transaction id before the drain reads the clock
		 * (the head lock has taken one already; this says so): deadline rescue trusts that a
		 * transaction without an id when it read cannot commit a batch whose deadline is
		 * before that read (awa._rescue, awa.rescue_progress).
		 */
		if (deadline_secs > 0)
			(void)GetTopTransactionId();
		/*
		 * The receipts-mode drain of the 1.1 catalog runs without a planned statement when it
		 * can; under a per-key limit it hands back the attempts of keyed jobs it started.
		 */
		direct = false;
		if (catalog == Catalog::V1_1 && receipts)
		{
			awa::DrainRequest req = {queue,
									 priority,
									 shard,
									 claim_seq,
									 lane_batch,
									 bound,
									 deadline_secs,
									 aging_secs,
									 slot_ranges,
									 ring,
									 limits.key_concurrency,
									 key_step.window};

			direct = awa::drain_direct(req, rsinfo->setResult, rsinfo->setDesc, &outcome);
		}
		if (!direct)
			drain_statement(queue, catalog, receipts, priority, shard, claim_seq, lane_batch, deadline_secs, aging_secs,
							slot_ranges, ring, bound, &outcome);
		if (outcome.claimed > 0)
		{
			/* Rows come in lane order: the cursor now stands after the last one. */
			if (cand.board)
				awa::board_publish_at_commit(cand.seq_oid, cand.head_xmin, outcome.next_seq, outcome.has_hint,
											 outcome.hint_run_at);
			/* The drain saw the lane's next row (its hint is set): one more sleeper has work. */
			if (outcome.has_hint)
				awa::note_more_work(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
			break;
		}
		awa::key_rate_give_back(queue, limits, &key_tokens, 0); /* the drain handed out nothing */
		if (attempt >= 3)
			break;
		forget_probe(cand.seq_oid);
		if (cand.board)
			awa::board_publish(cand.seq_oid, cand.head_xmin, claim_seq, false, 0, true);
		awa::keep_plan(&clear_hint_plans[static_cast<int>(catalog)],
					   catalog == Catalog::V1_1 ? kClearHintSql : awa::compat_1_0::claim_clear_hint_sql(), 3,
					   kClearHintTypes);
		{
			Datum head_key[3] = {PointerGetDatum(queue), Int16GetDatum(priority), Int16GetDatum(shard)};

			/* On the latest committed state like the walk and the drain, whatever the isolation level. */
			awa::exec_plan_latest(clear_hint_plans[static_cast<int>(catalog)], head_key, nullptr, false, 0,
								  SPI_OK_UPDATE, "claim hint reset");
		}
	}

	/* The statement's rows go to the result here (the direct drain put its own there). */
	if (!direct && outcome.claimed > 0)
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum values[33];
			bool nulls[33];

			/* The drain's last column (the lane's hint) is not part of the result. */
			if (SPI_tuptable->tupdesc->natts != rsinfo->setDesc->natts + 1 || rsinfo->setDesc->natts > 32)
				elog(ERROR, "awa_shard: claim result has %d columns, expected %d", SPI_tuptable->tupdesc->natts - 1,
					 rsinfo->setDesc->natts);
			heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	claimed = outcome.claimed;
	/*
	 * Under a per-key limit the keyed attempts are recorded for the next claims' counts: the
	 * direct drain handed them back; a statement's are its rows, in SPI_tuptable.
	 */
	if (limits.key_concurrency && claimed > 0)
	{
		if (direct)
			awa::record_key_attempts(queue, priority, shard, outcome.keyed, outcome.n_keyed, key_step.places);
		else
			awa::record_key_attempts(queue, priority, shard,
									 awa::drained_attempts(SPI_tuptable, static_cast<uint64>(claimed)),
									 static_cast<int>(claimed), key_step.places);
	}
	awa::stats_add(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), shard, awa::StatKind::Claimed, claimed);
	/* Tokens the drain did not hand out go back (a rollback of this claim keeps them spent). */
	awa::rate_give_back(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), limits.per_second, limits.burst,
						tokens - claimed);
	awa::key_rate_give_back(queue, limits, &key_tokens, claimed);
	awa::concurrency_give_back(queue, granted - claimed);
	awa::pop_hot_path_planner(planner_level);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return (Datum)0;
}

/* awa.claim_ready_runtime of the 1.1 catalog. */
AWA_SQL_FUNCTION(awa_claim_ready_runtime_1_1)
{
	return awa::claim_ready_runtime(fcinfo, awa::Catalog::V1_1);
}
