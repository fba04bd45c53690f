/*
 * flow_control.cpp — the limits a claim of a queue obeys (docs/design.md §4, "Flow
 * control"): the queue's rate limit and concurrency limit, read from awa.queue_meta and
 * cached per backend under the queue_meta stamp (module.cpp), so a claim of a queue without
 * limits pays one look-up in a backend hash table; and the concurrency limit's room: claims
 * of a limited queue take a lock of the queue held to the end of their transaction, then
 * count its running attempts on the latest committed state, so no two claims ever count
 * without seeing each other's attempts, whatever their isolation level. A per-key limit takes
 * a lock per (queue, key) instead, for the keys at the start of the lane's window it takes
 * (tried, never waited for: a key another claim holds ends the window there); it counts
 * those keys' running attempts (the taken places of awa.key_attempts, where such claims
 * record their keyed attempts, direct_key_places.cpp) after the locks, and stops before the
 * first job whose key is at its cap. set_concurrency_limit waits for those locks instead.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "citus.hpp"
#include "claim_sql.hpp"
#include "direct_insert.hpp"
#include "direct_key_places.hpp"
#include "flow_control.hpp"
#include "key_caps.hpp"
#include "key_places_memo.hpp"
#include "lane_key.hpp"
#include "module.hpp"
#include "rate_limit.hpp"
#include "receipt_sql.hpp"
#include "ring.hpp"
#include "running_bound.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
}

#include <algorithm>
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
SPIPlanPtr window_plan = nullptr;
SPIPlanPtr key_count_plan = nullptr;
SPIPlanPtr record_key_plan = nullptr;

/* The queue whose claim was last held back by per-key caps in this backend (note_key_capped). */
std::uint32_t key_capped_queue = 0;
bool key_capped = false;

/* The queue's limits as awa.queue_meta holds them (set_rate_limit, set_concurrency_limit). */
const char *const kLimitsSql =
	"SELECT m.rate_per_second, m.rate_burst, m.concurrency_limit, m.key_concurrency_limit, m.key_rate_per_second, "
	"  m.key_rate_burst FROM awa.queue_meta m WHERE m.queue = $1";

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
 * The window of a lane a claim drains (claim.cpp, AWA_DRAIN_PICK): $1 queue, $2 priority,
 * $3 shard, lane_seq in [$4, $5) in the live slots $6..$9, lane order, the first $10; the
 * concurrency key of each row.
 */
const char *const kWindowSql =
	"SELECT r.concurrency_key FROM awa.ready_entries r "
	"WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3 AND r.lane_seq >= $4 AND r.lane_seq < $5 "
	"  AND (r.ready_slot BETWEEN $6 AND $7 OR r.ready_slot BETWEEN $8 AND $9) ORDER BY r.lane_seq LIMIT $10";

/*
 * The places of the keys KEYS (a text[] expression) of queue $1 in awa.key_attempts, each
 * with whether its attempt is still open (the place is taken): in receipts mode the receipt
 * as awa._open_receipts finds it (its ready row, the claim batch naming the row, the
 * attempt's run lease) with the open-receipt test of receipt_sql.hpp: an attempt whose batch
 * was pruned with its claim slot, or whose ready row went with its queue slot, has ended. In
 * leases mode it is the running lease. Each probe names its ring's live arc ($3..$6 the queue
 * ring's, $7..$10 the claim ring's, $11..$14 the lease ring's), so a plan run with them
 * starts only the live partitions; an attempt outside them is gone. A CTE of a WITH list.
 */
// clang-format off
#define AWA_KEY_PLACES(KEYS)                                                                                           \
	"places AS MATERIALIZED (SELECT c.concurrency_key, c.place, c.job_id, c.run_lease, "                               \
	"    CASE WHEN c.lease_slot IS NOT NULL THEN EXISTS (SELECT 1 FROM awa.leases l WHERE l.queue = c.queue "          \
	"      AND l.priority = c.priority AND l.enqueue_shard = c.enqueue_shard AND l.lane_seq = c.lane_seq "             \
	"      AND l.lease_slot = c.lease_slot AND l.job_id = c.job_id AND l.run_lease = c.run_lease "                     \
	"      AND (l.lease_slot BETWEEN $11 AND $12 OR l.lease_slot BETWEEN $13 AND $14) "                                \
	"      AND l.state IN ('running', 'waiting_external')) "                                                           \
	"    ELSE EXISTS (SELECT 1 FROM "                                                                                  \
	AWA_RECEIPT_FROM_READY_ON("AND (b.claim_slot BETWEEN $7 AND $8 OR b.claim_slot BETWEEN $9 AND $10)")               \
	"      WHERE r.ready_slot = c.ready_slot AND (r.ready_slot BETWEEN $3 AND $4 OR r.ready_slot BETWEEN $5 AND $6) "  \
	"        AND r.queue = c.queue AND r.priority = c.priority AND r.enqueue_shard = c.enqueue_shard "                 \
	"        AND r.lane_seq = c.lane_seq AND r.ready_generation = c.ready_generation "                                 \
	"        AND b.claim_slot = c.claim_slot AND " AWA_RECEIPT_IS("c.job_id", "c.run_lease")                           \
	"        AND " AWA_READY_RECEIPT_OPEN_LIVE("7", "8", "9", "10", "3", "4", "5", "6") ") END AS open "               \
	"  FROM awa.key_attempts c WHERE c.queue = $1 AND c.concurrency_key = ANY (" KEYS ")) "
// clang-format on

/* The running attempts of the keys $2 of queue $1, in the order of $2: their taken places. */
const char *const kKeyCountSql = "WITH " AWA_KEY_PLACES(
	"$2::text[]") "SELECT (SELECT count(*) FROM places x WHERE x.open AND x.concurrency_key = k.k) "
				  "FROM unnest($2::text[]) WITH ORDINALITY AS k(k, n) ORDER BY k.n";

/* Advisory-lock field of the lock of one (queue, concurrency key): next to the limit lock's. */
constexpr uint16 kKeyLockField = 4;

/*
 * Record the attempts a claim of a queue with a per-key limit started for keyed jobs in
 * their keys' places: $1 queue, $2 priority and $15 shard of the lane, $3..$14 the live arcs
 * (as AWA_KEY_PLACES), then the claimed rows as arrays $16..$22 (job_id, run_lease,
 * lane_seq, ready_slot, ready_generation, claim_slot, lease_slot); the key is the ready
 * row's. Each key's new attempts (those not in a place already) take its free places,
 * lowest first, then new places after its last; its free places left over are removed.
 */
const char *const kRecordKeySql =
	"WITH d AS MATERIALIZED (SELECT d.*, r.concurrency_key "
	"  FROM unnest($16::bigint[], $17::bigint[], $18::bigint[], $19::int[], $20::bigint[], $21::int[], $22::int[]) "
	"    AS d(job_id, run_lease, lane_seq, ready_slot, ready_generation, claim_slot, lease_slot) "
	"  CROSS JOIN LATERAL (SELECT e.concurrency_key FROM awa.ready_entries e WHERE e.ready_slot = d.ready_slot "
	"    AND e.queue = $1 AND e.priority = $2 AND e.enqueue_shard = $15 AND e.lane_seq = d.lane_seq "
	"    AND e.job_id = d.job_id OFFSET 0) r "
	" WHERE r.concurrency_key IS NOT NULL), " AWA_KEY_PLACES(
		"ARRAY(SELECT DISTINCT d.concurrency_key FROM d)") ", "
														   "todo AS (SELECT d.*, row_number() OVER (PARTITION BY "
														   "d.concurrency_key ORDER BY d.lane_seq) AS nth FROM d "
														   "  WHERE NOT EXISTS (SELECT 1 FROM places x WHERE "
														   "x.concurrency_key = d.concurrency_key "
														   "    AND x.job_id = d.job_id AND x.run_lease = "
														   "d.run_lease)), "
														   "free AS (SELECT x.concurrency_key, x.place, "
														   "    row_number() OVER (PARTITION BY x.concurrency_key "
														   "ORDER BY x.place) AS nth FROM places x WHERE NOT x.open), "
														   "top AS (SELECT x.concurrency_key, max(x.place) AS place, "
														   "count(*) FILTER (WHERE NOT x.open) AS nfree "
														   "    FROM places x GROUP BY x.concurrency_key), "
														   "spare AS (DELETE FROM awa.key_attempts k USING free f "
														   "WHERE k.queue = $1 "
														   "    AND k.concurrency_key = f.concurrency_key AND k.place "
														   "= f.place "
														   "    AND f.nth > (SELECT count(*) FROM todo t WHERE "
														   "t.concurrency_key = f.concurrency_key)) "
														   "INSERT INTO awa.key_attempts AS k (queue, concurrency_key, "
														   "place, job_id, run_lease, priority, enqueue_shard, "
														   "  lane_seq, ready_slot, ready_generation, claim_slot, "
														   "lease_slot) "
														   "SELECT $1, t.concurrency_key, coalesce(f.place, "
														   "coalesce(p.place, -1) + t.nth - coalesce(p.nfree, "
														   "0))::int, "
														   "  t.job_id, t.run_lease, $2, $15, t.lane_seq, "
														   "t.ready_slot, t.ready_generation, t.claim_slot, "
														   "t.lease_slot "
														   "  FROM todo t LEFT JOIN free f ON f.concurrency_key = "
														   "t.concurrency_key AND f.nth = t.nth "
														   "  LEFT JOIN top p ON p.concurrency_key = t.concurrency_key "
														   "ON CONFLICT (queue, concurrency_key, place) DO UPDATE SET "
														   "job_id = EXCLUDED.job_id, "
														   "  run_lease = EXCLUDED.run_lease, priority = "
														   "EXCLUDED.priority, enqueue_shard = EXCLUDED.enqueue_shard, "
														   "  lane_seq = EXCLUDED.lane_seq, ready_slot = "
														   "EXCLUDED.ready_slot, ready_generation = "
														   "EXCLUDED.ready_generation, "
														   "  claim_slot = EXCLUDED.claim_slot, lease_slot = "
														   "EXCLUDED.lease_slot";

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
		limits_cache =
			hash_create("awa_shard queue limits", 64, &ctl, HASH_ELEM | HASH_CONTEXT | use_lane_key_functions(&ctl));
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
	bool null_key_rate;
	bool null_key_burst;
	Datum key_rate = SPI_getbinval(row, desc, 5, &null_key_rate);
	Datum key_burst = SPI_getbinval(row, desc, 6, &null_key_burst);

	if (!null_key_rate && !null_key_burst)
	{
		out->key_rate = true;
		out->key_per_second = DatumGetFloat8(key_rate);
		out->key_burst = DatumGetInt32(key_burst);
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

/*
 * The kept plan of a statement over the queue's rows: under Citus one that names the queue's
 * shards (citus.cpp, keep_shard_plan), so that PostgreSQL plans it on this node as it is
 * (Citus refuses some of these statements, and inside a delegated call in a transaction
 * block every one whose tables it cannot tie to the call's queue); otherwise *plan, kept.
 */
static SPIPlanPtr
queue_statement_plan(SPIPlanPtr *plan, const char *sql, text *queue, int nargs, const Oid *types)
{
	SPIPlanPtr shard_plan = keep_shard_plan(sql, queue, nargs, types);

	if (shard_plan != nullptr)
		return shard_plan;
	keep_plan(plan, sql, nargs, types);
	return *plan;
}

/* The queue's running attempts on the latest committed state (`snapshot`, or one taken now). SPI is connected. */
int64
running_attempts(text *queue, Snapshot snapshot)
{
	static const Oid types[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	Datum running;

	exec_plan_snapshot(queue_statement_plan(&running_plan, kRunningSql, queue, 1, types), values, nullptr, true, 1,
					   SPI_OK_SELECT, "queue running attempts", snapshot != nullptr ? snapshot : GetLatestSnapshot());
	if (!spi_single_value(&running))
		elog(ERROR, "awa_shard: running attempts of a queue counted no row");
	return DatumGetInt64(running);
}

/*
 * Take the queue's limit lock (once in a transaction), held until its PRE_COMMIT or its end
 * (running_bound_hold_lock); its tag in *tag. Held by the transaction's own resource owner,
 * not the statement's portal (one of the extended protocol lives until the commit), so that
 * PRE_COMMIT can release it; a savepoint rolled back then keeps it to the end.
 */
static void
take_limit_lock(text *queue, LOCKTAG *tag)
{
	uint64 h = queue_hash(queue);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, static_cast<uint32>(h >> 32), static_cast<uint32>(h), kLimitLockField);
	if (!LockHeldByMe(tag, ExclusiveLock))
	{
		ResourceOwner owner = CurrentResourceOwner;

		CurrentResourceOwner = TopTransactionResourceOwner;
		PG_TRY();
		{
			(void)LockAcquire(tag, ExclusiveLock, false, false);
		}
		PG_FINALLY();
		{
			CurrentResourceOwner = owner;
		}
		PG_END_TRY();
	}
}

/* Attempts a claim may start under a concurrency limit: none at the cap by an exact bound, else after taking the
 * queue's limit lock (flow_control.hpp). */
int64
concurrency_room(text *queue, int limit, int64 want)
{
	std::int64_t running;
	bool exact;
	int64 room;
	LOCKTAG lock;

	/* At the cap by an exact bound: no room, and no wait for the claims holding the lock. */
	if (running_bound_at_cap(queue, limit))
		return 0;
	take_limit_lock(queue, &lock);
	/*
	 * After the lock: every claim that held it before has published its bound, and has
	 * committed, aborted, or is past PRE_COMMIT. Counted only when the bound leaves less room
	 * than the claim wants and is not exact (a queue at its cap answers without a count while
	 * no exit is left untaken); a count first waits for the claims past PRE_COMMIT.
	 */
	if (!running_bound_lookup(queue, &running, &exact) || (running + want > limit && !exact))
	{
		running_bound_wait_committing(queue);
		RunningCountTicket ticket = running_bound_count_ticket(queue);
		/* Kept past the count: the bound tells the exits it saw from those it did not by it. */
		Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());

		running = running_bound_counted(queue, running_attempts(queue, snapshot), ticket, snapshot);
		UnregisterSnapshot(snapshot);
	}
	room = std::max<int64>(std::min<int64>(want, static_cast<int64>(limit) - running), 0);
	running_bound_started(queue, room);
	running_bound_hold_lock(queue, &lock);
	return room;
}

/* Attempts a claim was granted and did not start (flow_control.hpp). */
void
concurrency_give_back(text *queue, int64 unstarted)
{
	if (unstarted > 0)
		running_bound_started(queue, -unstarted);
}

/*
 * The running attempts of each of n keys of the queue into counts[], on the live arcs of the
 * three rings read now, under the keys' locks: a claim of these keys that committed before
 * may have put its attempt in a slot that a rotation made live after this claim's drain read
 * the queue ring's arc, and that place must count. By direct index probes
 * (direct_key_places.cpp), which name keys[0]'s running attempts in *first_key and keep the
 * keys' free places in *places for the record, or, where they step aside, by kKeyCountSql
 * (the record statement then finds the places).
 */
static void
count_key_attempts(text *queue, Datum *keys, int n, int64 *counts, CapWitness *first_key, KeyPlaces *places)
{
	static const Oid types[14] = {TEXTOID, TEXTARRAYOID, INT4OID, INT4OID, INT4OID, INT4OID, INT4OID,
								  INT4OID, INT4OID,		 INT4OID, INT4OID, INT4OID, INT4OID, INT4OID};
	Datum values[14];
	int queue_arc[4];
	int claim_arc[4];
	int lease_arc[4];
	bool isnull;

	first_key->n = 0;
	first_key->complete = false; /* the statement counts without naming */
	/* The direct count reads the claim ring's arc itself, and only when a place needs a test. */
	live_slot_ranges(Ring::Queue, queue_arc);
	if (count_key_attempts_direct(queue, keys, n, queue_arc, counts, first_key, places))
		return;
	live_slot_ranges_all(queue_arc, claim_arc, lease_arc);
	values[0] = PointerGetDatum(queue);
	values[1] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	for (int k = 0; k < 4; k++)
	{
		values[2 + k] = Int32GetDatum(queue_arc[k]);
		values[6 + k] = Int32GetDatum(claim_arc[k]);
		values[10 + k] = Int32GetDatum(lease_arc[k]);
	}
	exec_plan_latest(queue_statement_plan(&key_count_plan, kKeyCountSql, queue, 14, types), values, nullptr, false, 0,
					 SPI_OK_SELECT, "per-key running attempts");
	if (SPI_processed != static_cast<uint64>(n))
		elog(ERROR, "awa_shard: per-key count returned %d rows for %d keys", static_cast<int>(SPI_processed), n);
	for (int k = 0; k < n; k++)
		counts[k] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
}

/* Rows of the window before the first one whose key would pass its cap (row_key: -1 keyless). */
static int64
window_room(const int *row_key, int64 rows, const int64 *counts, int nkeys, int limit)
{
	int64 *taken = static_cast<int64 *>(palloc0(sizeof(int64) * nkeys));

	for (int64 i = 0; i < rows; i++)
		if (row_key[i] >= 0 && counts[row_key[i]] + ++taken[row_key[i]] > limit)
			return i;
	return rows;
}

/* The lock of a (queue, concurrency key): an advisory lock on a hash of both, field kKeyLockField. */
static LOCKTAG
key_lock_tag(text *queue, text *key)
{
	uint64 h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key),
								   queue_hash(queue));
	LOCKTAG tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(h >> 32), static_cast<uint32>(h), kKeyLockField);
	return tag;
}

/* Take the lock of a (queue, key) unless another transaction holds it (never waits). */
static bool
try_key_lock(text *queue, Datum key)
{
	LOCKTAG tag = key_lock_tag(queue, DatumGetTextPP(key));

	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/* Take the locks of the keys of a queue, waiting for each, to the end of the transaction (flow_control.hpp). */
void
lock_concurrency_keys(text *queue, const Datum *keys, const bool *nulls, int n)
{
	for (int i = 0; i < n; i++)
		if (!nulls[i])
		{
			LOCKTAG tag = key_lock_tag(queue, DatumGetTextPP(keys[i]));

			(void)LockAcquire(&tag, ExclusiveLock, false, false);
		}
}

/*
 * The keys of the window a claim drains (kWindowSql's rows), by the direct lane read
 * (direct_drain.cpp) or, where it steps aside, by the statement: (*keys)[i] is row i's key,
 * nullptr when it has none; *first_seq: the first row's lane_seq (-1: none, or not read).
 */
static int64
window_keys(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
			int64 max_batch, text ***keys, int64 *first_seq, LaneWindow **kept)
{
	static const Oid types[10] = {TEXTOID, INT2OID, INT2OID, INT8OID, INT8OID,
								  INT4OID, INT4OID, INT4OID, INT4OID, INT8OID};
	Datum values[10] = {PointerGetDatum(queue),		   Int16GetDatum(priority),		  Int16GetDatum(shard),
						Int64GetDatum(claim_seq),	   Int64GetDatum(bound),		  Int32GetDatum(slot_ranges[0]),
						Int32GetDatum(slot_ranges[1]), Int32GetDatum(slot_ranges[2]), Int32GetDatum(slot_ranges[3]),
						Int64GetDatum(max_batch)};
	LaneRange lane = {queue, priority, shard, claim_seq, bound};
	int64 rows;

	*kept = nullptr;
	if (lane_window_keys(lane, slot_ranges, max_batch, keys, &rows, first_seq, kept))
		return rows;
	*first_seq = -1;
	keep_plan(&window_plan, kWindowSql, 10, types);
	exec_plan_latest(window_plan, values, nullptr, true, 0, SPI_OK_SELECT, "per-key window");
	rows = static_cast<int64>(SPI_processed);
	*keys = static_cast<text **>(palloc(sizeof(text *) * (rows > 0 ? rows : 1)));
	for (int64 i = 0; i < rows; i++)
	{
		bool isnull;
		Datum key = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		(*keys)[i] = isnull ? nullptr : DatumGetTextPP(datumCopy(key, false, -1));
	}
	return rows;
}

/* Rows of a locked lane's window a claim may take under a per-key limit (flow_control.hpp). */
int64
key_window_room(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
				int64 max_batch, int limit, int64 *seen, KeyStep *step)
{
	Datum keys[kMaxKeysPerClaim];
	int64 counts[kMaxKeysPerClaim];
	int nkeys = 0;
	int64 rows;
	int64 first_seq;
	int64 room;
	int *row_key;
	text **window;
	std::uint64_t exit_seq;
	CapWitness *first_key;

	if (step->places == nullptr)
		step->places = static_cast<KeyPlaces *>(palloc0(sizeof(KeyPlaces)));
	step->places->known = false;
	rows = window_keys(queue, priority, shard, claim_seq, bound, slot_ranges, max_batch, &window, &first_seq,
					   &step->window);
	*seen = rows;
	row_key = static_cast<int *>(palloc(sizeof(int) * (rows > 0 ? rows : 1)));
	/*
	 * The window's rows up to the first one whose key this claim cannot lock now (another
	 * claim of that key is running: it counts and records first) or that would be its 33rd
	 * key. Locks are only tried, never waited for, so claims cannot deadlock on keys, whatever
	 * order they meet them in.
	 */
	for (int64 i = 0; i < rows; i++)
	{
		text *key = window[i];
		int k = -1;

		if (key != nullptr)
		{
			for (k = 0; k < nkeys; k++)
				if (same_text(DatumGetTextPP(keys[k]), key))
					break;
			if (k == nkeys)
			{
				if (nkeys == kMaxKeysPerClaim || !try_key_lock(queue, PointerGetDatum(key)))
				{
					rows = i;
					break;
				}
				keys[nkeys++] = PointerGetDatum(key);
			}
		}
		row_key[i] = k;
	}
	if (nkeys == 0)
		return rows;
	/*
	 * Under the keys' locks: every claim that held one before has ended, so its attempts
	 * count. The exit sequence is read before the count's snapshot (key_caps.cpp).
	 */
	exit_seq = attempt_exit_seq();
	first_key = static_cast<CapWitness *>(palloc(sizeof(CapWitness)));
	count_key_attempts(queue, keys, nkeys, counts, first_key, step->places);
	room = window_room(row_key, rows, counts, nkeys, limit);
	/* The lane begins with a job whose key is at its cap: later claims may pass it over without counting. */
	if (room == 0 && row_key[0] == 0 && counts[0] >= limit)
		remember_capped_lane(queue, priority, shard, claim_seq, first_seq, limit, exit_seq, *first_key);
	return room;
}

/* Rows of a locked lane's window a claim may take under a per-key rate limit (flow_control.hpp). */
int64
key_rate_room(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
			  int64 max_batch, const QueueLimits &limits, int64 *seen, KeyTokens *taken, KeyStep *step)
{
	text **window;
	int64 first_seq;
	int64 rows = window_keys(queue, priority, shard, claim_seq, bound, slot_ranges, max_batch, &window, &first_seq,
							 &step->window);

	*seen = rows;
	rows = rate_take_keys(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), window, rows, limits.key_per_second,
						  limits.key_burst);
	taken->keys = window;
	taken->n = rows;
	return rows;
}

/* Give back the tokens of the jobs a drain did not hand out (flow_control.hpp). */
void
key_rate_give_back(text *queue, const QueueLimits &limits, KeyTokens *taken, int64 handed_out)
{
	if (taken->n > 0)
		rate_give_back_keys(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), taken->keys, std::max<int64>(handed_out, 0),
							taken->n, limits.key_per_second, limits.key_burst);
	taken->n = 0;
}

/* The attempts a drain statement's result rows started (flow_control.hpp). */
KeyedAttempt *
drained_attempts(SPITupleTable *rows, uint64 n)
{
	KeyedAttempt *out = static_cast<KeyedAttempt *>(palloc(sizeof(KeyedAttempt) * (n > 0 ? n : 1)));

	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple row = rows->vals[i];
		TupleDesc desc = rows->tupdesc;
		KeyedAttempt &a = out[i];
		bool isnull;

		a.concurrency_key = nullptr; /* the record reads it from the ready row */
		a.job_id = DatumGetInt64(SPI_getbinval(row, desc, DC_JOB_ID, &isnull));
		a.run_lease = DatumGetInt64(SPI_getbinval(row, desc, DC_RUN_LEASE, &isnull));
		a.lane_seq = DatumGetInt64(SPI_getbinval(row, desc, DC_LANE_SEQ, &isnull));
		a.ready_slot = DatumGetInt32(SPI_getbinval(row, desc, DC_READY_SLOT, &isnull));
		a.ready_generation = DatumGetInt64(SPI_getbinval(row, desc, DC_READY_GENERATION, &isnull));
		a.claim_slot = DatumGetInt32(SPI_getbinval(row, desc, DC_CLAIM_SLOT, &isnull));
		a.has_claim_slot = !isnull;
		a.lease_slot = DatumGetInt32(SPI_getbinval(row, desc, DC_LEASE_SLOT, &isnull));
		a.has_lease_slot = !isnull;
	}
	return out;
}

/* Record the keyed attempts a claim started (flow_control.hpp). */
void
record_key_attempts(text *queue, int16 priority, int16 shard, const KeyedAttempt *attempts, int n, KeyPlaces *places)
{
	static Oid types[22];
	Datum values[22];
	Datum *elems[7];
	bool *nulls[7];
	int queue_arc[4];
	int claim_arc[4];
	int lease_arc[4];
	bool keys_read = true;

	if (n == 0)
		return;
	for (int i = 0; i < n && keys_read; i++)
		keys_read = attempts[i].concurrency_key != nullptr;
	if (keys_read && places != nullptr && record_key_attempts_direct(queue, priority, shard, attempts, n, places))
		return;
	memo_note_statement_write(queue); /* what is remembered of the queue's places is forgotten at commit */
	/* The statement: the rows as arrays, in the order of kRecordKeySql's $16..$22. */
	for (int c = 0; c < 7; c++)
	{
		elems[c] = static_cast<Datum *>(palloc(sizeof(Datum) * n));
		nulls[c] = static_cast<bool *>(palloc0(sizeof(bool) * n));
	}
	for (int i = 0; i < n; i++)
	{
		const KeyedAttempt &a = attempts[i];

		elems[0][i] = Int64GetDatum(a.job_id);
		elems[1][i] = Int64GetDatum(a.run_lease);
		elems[2][i] = Int64GetDatum(a.lane_seq);
		elems[3][i] = Int32GetDatum(a.ready_slot);
		elems[4][i] = Int64GetDatum(a.ready_generation);
		elems[5][i] = Int32GetDatum(a.claim_slot);
		nulls[5][i] = !a.has_claim_slot;
		elems[6][i] = Int32GetDatum(a.lease_slot);
		nulls[6][i] = !a.has_lease_slot;
	}
	types[0] = TEXTOID;
	types[1] = INT2OID;
	types[14] = INT2OID;
	values[0] = PointerGetDatum(queue);
	values[1] = Int16GetDatum(priority);
	values[14] = Int16GetDatum(shard);
	live_slot_ranges_all(queue_arc, claim_arc, lease_arc); /* now, as the count's */
	for (int k = 0; k < 4; k++)
	{
		types[2 + k] = types[6 + k] = types[10 + k] = INT4OID;
		values[2 + k] = Int32GetDatum(queue_arc[k]);
		values[6 + k] = Int32GetDatum(claim_arc[k]);
		values[10 + k] = Int32GetDatum(lease_arc[k]);
	}
	for (int c = 0; c < 7; c++)
	{
		static const Oid elem_types[7] = {INT8OID, INT8OID, INT8OID, INT4OID, INT8OID, INT4OID, INT4OID};
		static const Oid array_types[7] = {INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID,
										   INT8ARRAYOID, INT4ARRAYOID, INT4ARRAYOID};
		int dims[1] = {n};
		int lbs[1] = {1};
		int16 typlen;
		bool typbyval;
		char typalign;

		get_typlenbyvalalign(elem_types[c], &typlen, &typbyval, &typalign);
		types[15 + c] = array_types[c];
		values[15 + c] = PointerGetDatum(
			construct_md_array(elems[c], nulls[c], 1, dims, lbs, elem_types[c], typlen, typbyval, typalign));
	}
	exec_plan_latest(queue_statement_plan(&record_key_plan, kRecordKeySql, queue, 22, types), values, nullptr, false, 0,
					 SPI_OK_INSERT, "per-key attempts record");
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
	/*
	 * No lock: a worker that sees a place claims, and its claim decides under the lock. A bound
	 * below the limit shows a place without a count.
	 */
	if (hold == 0 && limits.concurrency)
	{
		std::int64_t bound;

		if (!(running_bound_peek(queue, &bound) && bound < limits.concurrency_limit) &&
			running_attempts(queue, nullptr) >= limits.concurrency_limit)
			hold = kCapPollMs;
	}
	/* The last claim of this queue here found only keys at their cap or without a token: look again later. */
	if (hold == 0 && (limits.key_concurrency || limits.key_rate) && key_capped &&
		key_capped_queue == static_cast<std::uint32_t>(queue_hash(queue)))
		hold = kCapPollMs;
	key_capped = false;
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return hold;
}

} // namespace awa

/*
 * awa._lock_concurrency_keys(queue, keys): set_concurrency_limit's wait for the claims of
 * those keys in progress, holding their locks to the end of its transaction.
 */
AWA_SQL_FUNCTION(awa_lock_concurrency_keys)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	Datum *keys;
	bool *nulls;
	int n;

	if (PG_ARGISNULL(1))
		PG_RETURN_VOID();
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &keys, &nulls, &n);
	awa::lock_concurrency_keys(queue, keys, nulls, n);
	PG_RETURN_VOID();
}
