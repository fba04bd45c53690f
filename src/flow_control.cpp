/*
 * flow_control.cpp — the limits a claim of a queue obeys (docs/design.md §4, "Flow
 * control"): the queue's rate limit and concurrency limit, read from awa.queue_meta and
 * cached per backend under the queue_meta stamp (module.cpp), so a claim of a queue without
 * limits pays one look-up in a backend hash table; and the concurrency limit's room: claims
 * of a limited queue take a lock of the queue held to the end of their transaction, then
 * count its running attempts on the latest committed state, so no two claims ever count
 * without seeing each other's attempts, whatever their isolation level. A per-key limit takes
 * the same lock; the claim then counts the running attempts of the keys at the start of its
 * lane's window only, and stops before the first job whose key is at its cap.
 */
#include "flow_control.hpp"
#include "lane_key.hpp"
#include "module.hpp"
#include "rate_limit.hpp"
#include "receipt_sql.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include <cstdint>
#include <cstring>

namespace awa
{

namespace
{

/* A queue's cached limits, valid while the queue_meta stamp is the one they were read under. */
struct LimitsEntry
{
	LaneKey key;
	std::uint64_t stamp;
	QueueLimits limits;
};

HTAB *limits_cache = nullptr;
SPIPlanPtr limits_plan = nullptr;
SPIPlanPtr running_plan = nullptr;
SPIPlanPtr key_room_plan = nullptr;

/* The queue whose claim was last held back by per-key caps in this backend (note_key_capped). */
std::uint32_t key_capped_queue = 0;
bool key_capped = false;

/* The queue's limits as awa.queue_meta holds them (set_rate_limit, set_concurrency_limit). */
const char *const kLimitsSql =
	"SELECT m.rate_per_second, m.rate_burst, m.concurrency_limit, m.key_concurrency_limit FROM awa.queue_meta m "
	"WHERE m.queue = $1";

/*
 * The queue's running attempts: open receipts and running leases, what
 * awa.queue_counts_exact counts as running. The receipts are walked from the queue's claim
 * batches (the view awa._open_receipts starts from the ready rows, so a count through it
 * read every ready row of the queue: O(backlog)). The completion batches of the queue are
 * gathered per block once; a claim batch whose every offset they name holds no open receipt
 * and is passed over; the attempts of the others get the view's tests, the fragments of
 * receipt_sql.hpp. Both sets are the queue's (O(claim ring)), never a batch's per-job sets.
 */
const char *const kRunningSql =
	"WITH done AS MATERIALIZED (SELECT f.priority, f.enqueue_shard, f.lane_block, f.ready_slot, f.ready_generation, "
	"    array_agg(f_o) AS offsets FROM awa.completion_batches f CROSS JOIN LATERAL unnest(f.lane_offsets) AS f_o "
	"   WHERE f.queue = $1 GROUP BY 1, 2, 3, 4, 5), "
	"pending AS MATERIALIZED (SELECT b.* FROM awa.claim_batches b LEFT JOIN done d "
	"    ON d.priority = b.priority AND d.enqueue_shard = b.enqueue_shard AND d.lane_block = b.lane_block "
	"   AND d.ready_slot = b.ready_slot AND d.ready_generation = b.ready_generation "
	"   WHERE b.queue = $1 AND NOT (b.lane_offsets <@ coalesce(d.offsets, '{}'::int2[]))) "
	"SELECT (SELECT count(*) FROM pending b "
	"  CROSS JOIN LATERAL unnest(b.lane_offsets) AS o(off) "
	"  CROSS JOIN LATERAL (SELECT b.claim_slot, r.job_id, r.run_lease + 1 AS run_lease, r.queue, r.priority, "
	"      r.enqueue_shard, r.lane_seq, r.ready_slot, r.ready_generation FROM awa.ready_entries r "
	"    WHERE r.ready_slot = b.ready_slot AND r.queue = b.queue AND r.priority = b.priority "
	"      AND r.enqueue_shard = b.enqueue_shard AND r.lane_seq = b.lane_block * 64 + o.off "
	"      AND r.ready_generation = b.ready_generation OFFSET 0) c "
	"  WHERE " AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NOT_IN_BATCH("") " AND " AWA_RECEIPT_NO_CLOSURE(
		"") ") "
			"     + (SELECT count(*) FROM awa.leases l WHERE l.queue = $1 AND l.state IN ('running', "
			"'waiting_external'))";

/*
 * The room of a lane's window under a per-key limit ($11): the window is the drain's
 * (claim.cpp, AWA_DRAIN_PICK: $1 queue, $2 priority, $3 shard, lane_seq in [$4, $5) in the
 * live slots $6..$9, lane order, the first $10); the keys at its start are counted as
 * kRunningSql counts the queue (open receipts through the queue's claim batches, running
 * leases), but only attempts of those keys; each row of a key then takes the key's next
 * place, and the room is the number of rows before the first one past its key's cap. A window
 * without keys counts nothing. Returns (rows of the window, room).
 */
const char *const kKeyRoomSql =
	"WITH window_ AS MATERIALIZED (SELECT r.lane_seq, r.concurrency_key FROM awa.ready_entries r "
	"  WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 AND r.lane_seq < $5 "
	"    AND (r.ready_slot BETWEEN $6 AND $7 OR r.ready_slot BETWEEN $8 AND $9) ORDER BY r.lane_seq LIMIT $10), "
	"keys AS MATERIALIZED (SELECT array_agg(DISTINCT w.concurrency_key) AS k FROM window_ w "
	"   WHERE w.concurrency_key IS NOT NULL), "
	"done AS MATERIALIZED (SELECT f.priority, f.enqueue_shard, f.lane_block, f.ready_slot, f.ready_generation, "
	"    array_agg(f_o) AS offsets FROM awa.completion_batches f CROSS JOIN LATERAL unnest(f.lane_offsets) AS f_o "
	"   WHERE f.queue = $1 AND (SELECT k FROM keys) IS NOT NULL GROUP BY 1, 2, 3, 4, 5), "
	"pending AS MATERIALIZED (SELECT b.* FROM awa.claim_batches b LEFT JOIN done d "
	"    ON d.priority = b.priority AND d.enqueue_shard = b.enqueue_shard AND d.lane_block = b.lane_block "
	"   AND d.ready_slot = b.ready_slot AND d.ready_generation = b.ready_generation "
	"   WHERE b.queue = $1 AND (SELECT k FROM keys) IS NOT NULL "
	"     AND NOT (b.lane_offsets <@ coalesce(d.offsets, '{}'::int2[]))), "
	"running AS MATERIALIZED (SELECT c.concurrency_key AS k, count(*) AS n FROM pending b "
	"  CROSS JOIN LATERAL unnest(b.lane_offsets) AS o(off) "
	"  CROSS JOIN LATERAL (SELECT b.claim_slot, r.job_id, r.run_lease + 1 AS run_lease, r.queue, r.priority, "
	"      r.enqueue_shard, r.lane_seq, r.ready_slot, r.ready_generation, r.concurrency_key FROM awa.ready_entries r "
	"    WHERE r.ready_slot = b.ready_slot AND r.queue = b.queue AND r.priority = b.priority "
	"      AND r.enqueue_shard = b.enqueue_shard AND r.lane_seq = b.lane_block * 64 + o.off "
	"      AND r.ready_generation = b.ready_generation AND r.concurrency_key = ANY ((SELECT k FROM keys)::text[]) "
	"OFFSET 0) c "
	"  WHERE " AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NOT_IN_BATCH("") " AND " AWA_RECEIPT_NO_CLOSURE(
		"") " GROUP BY 1 "
			"UNION ALL SELECT r.concurrency_key, count(*) FROM awa.leases l JOIN awa.ready_entries r "
			"    ON r.ready_slot = l.ready_slot AND r.ready_generation = l.ready_generation AND r.queue = l.queue "
			"   AND r.priority = l.priority AND r.enqueue_shard = l.enqueue_shard AND r.lane_seq = l.lane_seq "
			"  WHERE l.queue = $1 AND l.state IN ('running', 'waiting_external') "
			"    AND r.concurrency_key = ANY ((SELECT k FROM keys)::text[]) GROUP BY 1), "
			"ranked AS MATERIALIZED (SELECT w.lane_seq, w.concurrency_key IS NOT NULL AND coalesce((SELECT sum(x.n) "
			"    FROM running x WHERE x.k = w.concurrency_key), 0) "
			"    + row_number() OVER (PARTITION BY w.concurrency_key ORDER BY w.lane_seq) > $11 AS over "
			"  FROM window_ w) "
			"SELECT (SELECT count(*) FROM window_), (SELECT count(*) FROM ranked WHERE lane_seq < "
			"  coalesce((SELECT min(y.lane_seq) FROM ranked y WHERE y.over), 9223372036854775807))";

/*
 * Advisory-lock field that marks a queue's limit lock. pg_advisory_lock uses 1 (bigint key)
 * and 2 (two int keys), so no lock a client takes by SQL is ever this one.
 */
constexpr uint16 kLimitLockField = 3;

/* How often wait_for_jobs looks again while its queue is at its concurrency cap. */
constexpr long kCapPollMs = 100;

/* The backend's cache of limits, created on first use. */
HTAB *
limits_table()
{
	if (limits_cache == nullptr)
	{
		HASHCTL ctl;

		std::memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LaneKey);
		ctl.entrysize = sizeof(LimitsEntry);
		ctl.hcxt = TopMemoryContext;
		limits_cache = hash_create("awa_shard queue limits", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	return limits_cache;
}

/* Read a queue's limits on the latest committed state (no row: none). SPI is connected. */
void
read_limits(const char *queue, int queue_len, QueueLimits *out)
{
	static const Oid types[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(queue, queue_len))};
	bool null_rate;
	bool null_burst;
	bool null_limit;

	std::memset(out, 0, sizeof(*out));
	keep_plan(&limits_plan, kLimitsSql, 1, types);
	exec_plan_latest(limits_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue limits lookup");
	if (SPI_processed != 1)
		return;
	HeapTuple row = SPI_tuptable->vals[0];
	TupleDesc desc = SPI_tuptable->tupdesc;
	Datum rate = SPI_getbinval(row, desc, 1, &null_rate);
	Datum burst = SPI_getbinval(row, desc, 2, &null_burst);
	Datum limit = SPI_getbinval(row, desc, 3, &null_limit);
	bool null_key_limit;
	Datum key_limit = SPI_getbinval(row, desc, 4, &null_key_limit);

	if (!null_rate && !null_burst)
	{
		out->rate = true;
		out->per_second = DatumGetFloat8(rate);
		out->burst = DatumGetInt32(burst);
	}
	if (!null_limit)
	{
		out->concurrency = true;
		out->concurrency_limit = DatumGetInt32(limit);
	}
	if (!null_key_limit)
	{
		out->key_concurrency = true;
		out->key_concurrency_limit = DatumGetInt32(key_limit);
	}
}

/* The hash that names a queue in the limit lock and in note_key_capped. */
uint64
queue_hash(text *queue)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)), VARSIZE_ANY_EXHDR(queue),
							   0x617761);
}

} // namespace

/* A queue's limits, cached until queue_meta changes (see flow_control.hpp). */
void
queue_limits(const char *queue, int queue_len, QueueLimits *out)
{
	LaneKey key;
	bool found;
	LimitsEntry *entry;
	std::uint64_t stamp = queue_meta_stamp(); /* read before the table, as queue_width does */

	make_lane_key(&key, queue, queue_len, 0, 0);
	entry = static_cast<LimitsEntry *>(hash_search(limits_table(), &key, HASH_FIND, &found));
	if (found && entry->stamp == stamp)
	{
		*out = entry->limits;
		return;
	}
	read_limits(queue, queue_len, out);
	entry = static_cast<LimitsEntry *>(hash_search(limits_table(), &key, HASH_ENTER, &found));
	entry->stamp = stamp;
	entry->limits = *out;
}

/* Drop every cached limit (this transaction changed queue_meta). */
void
forget_queue_limits()
{
	if (limits_cache != nullptr)
	{
		hash_destroy(limits_cache);
		limits_cache = nullptr;
	}
}

/* The queue's running attempts on the latest committed state. SPI is connected. */
int64
running_attempts(text *queue)
{
	static const Oid types[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	Datum running;

	keep_plan(&running_plan, kRunningSql, 1, types);
	exec_plan_latest(running_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue running attempts");
	if (!spi_single_value(&running))
		elog(ERROR, "awa_shard: running attempts of a queue counted no row");
	return DatumGetInt64(running);
}

/* Take the queue's limit lock, held to the end of the transaction (flow_control.hpp). */
void
take_limit_lock(text *queue)
{
	uint64 h = queue_hash(queue);
	LOCKTAG tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(h >> 32), static_cast<uint32>(h), kLimitLockField);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);
}

/* Room left under a concurrency limit, after taking the queue's limit lock (flow_control.hpp). */
int64
concurrency_room(text *queue, int limit)
{
	take_limit_lock(queue);
	/* After the lock: every claim that held it before has committed or aborted. */
	return static_cast<int64>(limit) - running_attempts(queue);
}

/* Rows of a locked lane's window a claim may take under a per-key limit (flow_control.hpp). */
int64
key_window_room(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
				int64 max_batch, int limit, int64 *seen)
{
	static const Oid types[11] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID, INT4OID,
								  INT4OID, INT4OID, INT4OID, INT8OID, INT4OID};
	Datum values[11] = {PointerGetDatum(queue),		   Int16GetDatum(priority),		  Int16GetDatum(shard),
						Int64GetDatum(claim_seq),	   Int64GetDatum(bound),		  Int32GetDatum(slot_ranges[0]),
						Int32GetDatum(slot_ranges[1]), Int32GetDatum(slot_ranges[2]), Int32GetDatum(slot_ranges[3]),
						Int64GetDatum(max_batch),	   Int32GetDatum(limit)};
	bool isnull;

	keep_plan(&key_room_plan, kKeyRoomSql, 11, types);
	exec_plan_latest(key_room_plan, values, nullptr, true, 1, SPI_OK_SELECT, "per-key room");
	if (SPI_processed != 1)
		elog(ERROR, "awa_shard: per-key room of a lane returned %d rows", static_cast<int>(SPI_processed));
	*seen = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
}

/* Remember that a claim of the queue was held back by per-key caps only (flow_control.hpp). */
void
note_key_capped(text *queue)
{
	key_capped_queue = static_cast<std::uint32_t>(queue_hash(queue));
	key_capped = true;
}

/* Whether, and how long, the queue's limits hold a waiting worker back (flow_control.hpp). */
long
limits_hold_ms(text *queue)
{
	QueueLimits limits;
	long hold = 0;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	queue_limits(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), &limits);
	if (limits.rate)
		hold = rate_wait_ms(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), limits.per_second, limits.burst);
	/* No lock: a worker that sees a place claims, and its claim decides under the lock. */
	if (hold == 0 && limits.concurrency && running_attempts(queue) >= limits.concurrency_limit)
		hold = kCapPollMs;
	/* The last claim of this queue here found only keys at their cap: look again later. */
	if (hold == 0 && limits.key_concurrency && key_capped &&
		key_capped_queue == static_cast<std::uint32_t>(queue_hash(queue)))
		hold = kCapPollMs;
	key_capped = false;
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return hold;
}

} // namespace awa
