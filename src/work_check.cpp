/*
 * work_check.cpp — "is there work?", the check awa.wait_for_jobs runs before it sleeps
 * (docs/design.md §8).
 *
 * The check looks at every lane of the queue and asks what a claim would ask: is there a
 * committed ready row at or after the lane's claim cursor and below its fence (the lowest
 * lane_seq another open transaction reserved) and its high-water mark (the lane sequence's
 * last value + 1)? The cursor comes from the cursor board when preloaded (claim_cursor.cpp),
 * else from the head and its latest claim mark. A lane whose cursor reached its fence or its
 * high-water mark has nothing a claim could take and costs no read of the ready rows: that is
 * every lane of a queue whose workers keep up. Any other lane costs one index probe that
 * starts at the cursor, so rows already claimed (below the cursor, until prune removes them)
 * are never read.
 *
 * A lane whose head another transaction in progress holds (a claim of it: a claim now would
 * skip it), or that another worker's check promised to its claim, is busy: the caller looks
 * again once that claim has gone by, rather than claim alongside it and come back empty.
 *
 * Order of the reads: the heads, then the high-water marks, then the in-flight reservations,
 * then (only for a lane that needs it) the probe on a new snapshot. A producer that is still
 * listed as in flight has not yet run its wake-up (wakeup.cpp releases reservations before it
 * wakes anyone), so a lane skipped because of its fence is one that producer will wake for.
 */
#include "claim_cursor.hpp"
#include "compat_1_0.hpp"
#include "direct_drain.hpp"
#include "registry.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "wakeup.hpp"
#include "work_check.hpp"

extern "C"
{
#include "catalog/namespace.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

#include <algorithm>

namespace awa
{

namespace
{

SPIPlanPtr probe_plan = nullptr;

/* Is there a visible row of the lane in [cursor, limit) in the live ready slots? */
const char *const kProbeSql =
	"SELECT 1 FROM awa.ready_entries r "
	"WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 AND r.lane_seq < $5 "
	"  AND (r.ready_slot BETWEEN $6 AND $7 OR r.ready_slot BETWEEN $8 AND $9) LIMIT 1";

/* One lane as the heads read showed it. */
struct Lane
{
	int16 priority;
	int16 shard;
	int64 cursor;
	Oid seq_oid;
	TransactionId head_xmax;
	bool held; /* another transaction in progress holds the head (a claim of the lane) */
};

/*
 * Whether the lane shows a row in [cursor, limit): one index probe from the cursor per live
 * ready partition (direct_drain.cpp), or the statement where that steps aside.
 */
bool
probe(text *queue, const Lane &lane, int64 limit, const int *ranges)
{
	static const Oid types[9] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID, INT4OID};
	Datum values[9] = {PointerGetDatum(queue), Int16GetDatum(lane.priority), Int16GetDatum(lane.shard),
					   Int64GetDatum(lane.cursor), Int64GetDatum(limit)};

	LaneRange range = {queue, lane.priority, lane.shard, lane.cursor, limit};
	LaneRow first;
	bool found;

	if (lane_first_row(range, ranges, &found, &first))
		return found;
	for (int k = 0; k < 4; k++)
		values[5 + k] = Int32GetDatum(ranges[k]);
	keep_plan(&probe_plan, kProbeSql, 9, types);
	exec_plan_latest(probe_plan, values, nullptr, true, 1, SPI_OK_SELECT, "work check probe");
	return SPI_processed > 0;
}

/* The check, SPI connected and the hot path's planner settings in force. */
bool
check(text *queue, Catalog catalog, bool promise, std::uint64_t *fence_bits, bool *busy)
{
	LaneHead *heads;
	bool receipts;
	int n_heads = read_lane_heads(queue, catalog, &heads, &receipts);
	Lane *lanes;
	int64 *high;
	int n_lanes = 0;
	int n_inflight;
	const InflightLow *inflight;
	int ranges[4];
	bool ranges_read = false;

	if (n_heads == 0)
		return false;
	lanes = static_cast<Lane *>(palloc(sizeof(Lane) * n_heads));
	high = static_cast<int64 *>(palloc(sizeof(int64) * n_heads));
	for (int i = 0; i < n_heads; i++)
	{
		Lane lane;
		TransactionId holder = heads[i].head_xmax;

		lane.priority = heads[i].priority;
		lane.shard = heads[i].shard;
		lane.cursor = heads[i].claim_seq;
		lane.seq_oid = heads[i].seq_oid;
		lane.head_xmax = holder;
		lane.held = TransactionIdIsNormal(holder) && !TransactionIdIsCurrentTransactionId(holder) &&
					TransactionIdIsInProgress(holder);
		lanes[n_lanes++] = lane;
	}
	/* High-water marks before the in-flight list (as claim_bound reads them). */
	for (int i = 0; i < n_lanes; i++)
		high[i] = lane_high_water(lanes[i].seq_oid);
	inflight = inflight_lows(&n_inflight);
	for (int i = 0; i < n_lanes; i++)
	{
		int64 limit = std::min(high[i], lane_fence(lanes[i].seq_oid, inflight, n_inflight));

		if (lanes[i].cursor >= limit)
		{
			/* nothing a claim could take: no read of the ready rows */
			if (limit < high[i])
				*fence_bits |= fence_bit(lanes[i].seq_oid);
			continue;
		}
		if (lanes[i].held)
		{
			/* A claim holds the lane: a claim now would skip it. Look again once it ends. */
			*busy = true;
			continue;
		}
		if (!ranges_read)
		{
			live_slot_ranges(Ring::Queue, ranges);
			ranges_read = true;
		}
		if (!probe(queue, lanes[i], limit, ranges))
			continue;
		if (!promise || promise_lane(lanes[i].seq_oid, lanes[i].head_xmax))
			return true;
		*busy = true; /* another worker's claim is on its way to these rows */
	}
	return false;
}

} // namespace

/* Is there work a claim of the queue could take now? (See work_check.hpp.) */
bool
work_visible(text *queue, Catalog catalog, bool promise, std::uint64_t *fence_bits, bool *busy)
{
	int level;
	bool result;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	level = push_hot_path_planner();
	*fence_bits = 0;
	*busy = false;
	result = check(queue, catalog, promise, fence_bits, busy);
	pop_hot_path_planner(level);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return result;
}

} // namespace awa
