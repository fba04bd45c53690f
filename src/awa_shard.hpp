/*
 * awa_shard.hpp — what the PostgreSQL-facing files share: the fixed-size lane key, and the
 * functions each concern offers the others, grouped below by the file that defines them.
 * Every file that includes it sees PostgreSQL headers; the pure C++ (ordering_hash,
 * shard_math, limits) has its own headers and no PostgreSQL header.
 */
#pragma once

#include "limits.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/jsonb.h"
}

#include <cstdint>

namespace awa
{

/* Fixed-size hash key of a lane (or of a queue: priority and shard 0) for backend caches. */
struct LaneKey
{
	char queue[kMaxQueueBytes + 1];
	int16 priority;
	int16 shard;
};

/* Refuse a queue name longer than kMaxQueueBytes before it is copied into a key (validate.cpp). */
void check_queue_bytes(int queue_len);

/* Fill a zero-padded key so HASH_BLOBS compares it bytewise. */
inline void
make_lane_key(LaneKey *key, const char *queue, int queue_len, int priority, int shard)
{
	check_queue_bytes(queue_len);
	std::memset(key, 0, sizeof(*key));
	std::memcpy(key->queue, queue, queue_len);
	key->priority = static_cast<int16>(priority);
	key->shard = static_cast<int16>(shard);
}

/* ---- module.cpp: settings and shared memory ---- */

/* Milliseconds between NOTIFYs per queue (0 = every transaction, -1 = never). */
extern int notify_interval_ms;

/* Whether the library was loaded by shared_preload_libraries (shared memory exists). */
bool shared_state_available();

/* Next ticket of the server-wide rotor (or of the backend-local fallback). */
std::uint32_t next_rotor_ticket();

/* Counter bumped whenever this backend's transaction ends; caches compare against it. */
std::uint64_t current_xact_epoch();

/* Validity stamp of cached queue widths (see module.cpp). */
std::uint64_t queue_meta_stamp();

/* Called by the queue_meta trigger: widths change at this transaction's commit. */
void note_queue_meta_changed();

/* ---- validate.cpp: every argument check, with its SQLSTATE (limits from limits.hpp) ---- */

enum class Ring;

/* NULL -> 22004 naming the argument. */
void require_not_null(bool isnull, const char *argname);

/* value in [lo, hi], else `sqlstate` (22023 or 23514) "<arg> must be between lo and hi". */
int64 checked_between(int64 value, int64 lo, int64 hi, const char *argname, int sqlstate);

/* Text of a queue argument, checked (NULL -> 22004, 1..kMaxQueueChars characters -> 23514). */
text *checked_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* A job kind of 1..kMaxKindChars characters (23514). */
Datum checked_kind(Datum kind, const char *argname);

/* Priority checked to kMinPriority..kMaxPriority (23514). */
int checked_priority(int priority, const char *argname);

/* max_attempts checked to 1..kMaxAttempts (23514). */
int checked_max_attempts(int value, const char *argname);

/* A finite run_at (22023 for 'infinity' and '-infinity'). */
TimestampTz checked_run_at(TimestampTz run_at, const char *argname);

/* Integer arguments that were smallint in 1.0, read as int32 and range-checked (no wrap). */
int priority_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int enqueue_shard_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int max_attempts_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Non-null number arguments with their ranges (22004, 22023). */
int shards_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int64 max_batch_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int timeout_ms_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int64 reserve_count_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Seconds (NULL = 0): 0, or finite in [min, kMaxSeconds] (22023). */
double seconds_arg(FunctionCallInfo fcinfo, int argno, const char *argname, double min);

/* 'queue', 'claim' or 'lease' (22004, 22023). */
Ring ring_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Array arguments: one dimension (22023), no NULL elements (22004), paired lengths (22023). */
void check_one_dimensional(ArrayType *arr, const char *argname);
void check_no_nulls(ArrayType *arr, const char *argname);
ArrayType *checked_id_array(FunctionCallInfo fcinfo, int argno, const char *argname);
void check_same_length(int n_a, int n_b, const char *name_a, const char *name_b);

/* insert_jobs batches: at most kMaxInsertBatch jobs, every optional array as long (22023). */
void check_batch_size(int n, const char *sized_by);
void check_batch_length(int count, int n, const char *argname, const char *sized_by);

/* Job attributes: metadata object, tags, ordering key, unique key and mask, initial state. */
void check_json_object(Jsonb *jb, const char *argname);
void check_tags(ArrayType *arr, const char *argname);
void check_ordering_key(Datum key, const char *argname);
void check_unique(Datum key, bool key_null, Datum mask, bool mask_null, const char *key_arg, const char *mask_arg);
const char *checked_enqueue_state(Datum state, const char *argname);

/* An element of an integer[] (1.1) or smallint[] (1.0 catalog) argument. */
int int_array_element(Datum element, Oid elemtype);

/* ---- shard.cpp: routing ---- */

/* Width of a queue for this transaction (queue_meta, cached per transaction). */
int queue_width(const char *queue, int queue_len);

/* Forget cached widths (own-transaction change of queue_meta). */
void forget_queue_widths();

/* Keyless pick, sticky per (queue, priority) for the rest of the transaction. */
int sticky_rotor_shard(const char *queue, int queue_len, int priority, int shards);

/* ---- reserve.cpp: lanes and reservations ---- */

/* Room for a lane's sequence name: "queue_enqueue_seq_", 32 hex digits, NUL. */
constexpr int kLaneSeqNameSize = 51;

/* The name of a lane's sequence (the md5 rule every catalog version shares). */
void lane_sequence_name(const char *queue, int queue_len, int priority, int shard, char out[kLaneSeqNameSize]);

/* A lane's advisory-lock key (held by reservations; lane creation takes it first). */
int64 lane_lock_key(const char *queue, int queue_len, int priority, int shard);

/* Reserve [start, start + count) on a lane, creating the lane on first use. */
int64 reserve_lane_block(const char *queue, int queue_len, int priority, int shard, int64 count);

/* Register cache invalidation and transaction hooks of the lane cache. */
void init_lane_cache();

/* ---- registry.cpp: in-flight reservations (preloaded) ---- */

/* Size of the registry (awa_shard.reservation_slots; 0 = lane-lock mode). */
extern int reservation_slots;

/* Define awa_shard.reservation_slots and the read-only awa_shard.reservation_mode. */
void define_reservation_settings(bool preloaded);

/* Whether reservations are fenced by the registry rather than by the lane lock held to commit. */
bool registry_in_force();

/* Register this transaction's reservation of lane_seq >= low (false: registry full). */
bool registry_register(Oid seq_oid, int64 low);

/* Exclusive upper bound of lane_seq a claim may take on the lane (read before its snapshot). */
int64 claim_bound(Oid seq_oid);

/* A reservation of another transaction in flight in this database: lane sequence, lowest lane_seq. */
struct InflightLow
{
	Oid seq_oid;
	int64 low;
};

/* Other transactions' in-flight reservations in this database (*n of them), for the claim walk. */
const InflightLow *inflight_lows(int *n);

/* Whether a lane's sequence can be read without waiting (not being dropped); takes it if so. */
bool lane_sequence_readable(Oid seq_oid);

/* A lane's high-water mark: its sequence's last value + 1; 0 while the lane is being dropped. */
int64 lane_high_water(Oid seq_oid);

/* Free this backend's entries at transaction end and exit. */
void init_registry_hooks();

Size registry_shmem_size();
void registry_shmem_init(void *base, bool found);

/* ---- claim_cursor.cpp: a lane's claim cursor (head row or latest claim mark) ---- */

/* Whether this database's catalog has claim marks (1.1 and later). */
bool claim_marks_installed();

/* The relation holding every lane's cursor and hint: awa.lane_cursors, or the 1.0 heads. */
const char *cursor_relation(bool marks);

/* A lane's claim cursor on the latest committed state (SPI connected); false: no such lane. */
bool lane_cursor(text *queue, int16 priority, int16 shard, bool marks, int64 *cursor);

/* The cursor board: every lane's cursor and hint in shared memory, for the walk (preloaded). */
Size cursor_board_shmem_size();
void cursor_board_shmem_init();
void init_cursor_board_hooks();
bool cursor_board_available();
bool board_lookup(Oid seq_oid, TransactionId head_xmin, int64 *claim_seq, bool *has_run_at, TimestampTz *run_at);
void board_publish(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at,
				   bool replace_hint);
void board_publish_at_commit(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at,
							 TimestampTz run_at);

/* ---- ring.cpp: ring write slots fenced against prune ---- */

enum class Ring
{
	Queue = 0, /* ready_entries, done_entries */
	Claim = 1, /* claim_batches (lease_claims on 1.0), lease_claim_closures */
	Lease = 2  /* leases */
};

struct RingSlot
{
	int slot;
	int64 generation;
};

/*
 * The slot this transaction appends to, its partitions locked against prune (SPI connected);
 * with queue_arc, the queue ring's live arc as well (one read where the cursor is read).
 */
RingSlot ring_write_slot(Ring ring, int *queue_arc = nullptr);

/* The live slots of a ring as two inclusive ranges (the second empty unless the arc wraps). */
void live_slot_ranges(Ring ring, int ranges[4]);

/* The live arcs of the queue, claim and lease rings in one read (as live_slot_ranges). */
void live_slot_ranges_all(int queue_arc[4], int claim_arc[4], int lease_arc[4]);

/*
 * SQL: the parts of the test of the view awa._open_receipts, as subqueries on a receipt `c`
 * (a row with the columns of awa.lease_claims) probed per receipt, each with the receipt's
 * slot as a parameter so that run-time pruning leaves one partition (as joins, the planner
 * probed every partition of the tables per receipt): no terminal row for its attempt, no
 * completion batch naming it (found by its lane's block of 64 lane_seqs and ready generation,
 * then by its offset in the block in the batch's array), no closure, its ready row still there
 * (a test only the 1.0 receipts need, whose rows store their job id: matched on it too, since
 * lane numbers restart when a queue is dropped and created again). ARC is an extra condition
 * ("" for none) that restricts the look-up to its ring's live arc, so that a statement run
 * with the arcs also prepares only the live partitions.
 */
#define AWA_RECEIPT_NO_TERMINAL_ROW(ARC)                                                                               \
	" NOT EXISTS (SELECT 1 FROM awa.done_entries d WHERE d.queue = c.queue AND d.priority = c.priority "               \
	"   AND d.enqueue_shard = c.enqueue_shard AND d.lane_seq = c.lane_seq AND d.ready_slot = c.ready_slot "            \
	"   AND d.job_id = c.job_id AND d.run_lease = c.run_lease " ARC " OFFSET 0) "
#define AWA_RECEIPT_NOT_IN_BATCH(ARC)                                                                                  \
	" NOT EXISTS (SELECT 1 FROM awa.completion_batches b WHERE b.queue = c.queue AND b.priority = c.priority "         \
	"   AND b.enqueue_shard = c.enqueue_shard AND b.lane_block = c.lane_seq / 64 AND b.ready_slot = c.ready_slot "     \
	"   AND b.ready_generation = c.ready_generation AND (c.lane_seq % 64)::int2 = ANY (b.lane_offsets) " ARC           \
	" OFFSET 0) "
#define AWA_RECEIPT_NO_CLOSURE(ARC)                                                                                    \
	" NOT EXISTS (SELECT 1 FROM awa.lease_claim_closures x WHERE x.claim_slot = c.claim_slot "                         \
	"   AND x.job_id = c.job_id AND x.run_lease = c.run_lease " ARC " OFFSET 0) "
#define AWA_RECEIPT_READY_ROW(ARC)                                                                                     \
	" EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.queue = c.queue AND r.priority = c.priority "                  \
	"   AND r.enqueue_shard = c.enqueue_shard AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot "            \
	"   AND r.ready_generation = c.ready_generation AND r.job_id = c.job_id " ARC " OFFSET 0) "

/*
 * The test on a 1.0 catalog (awa.complete_jobs only, between installing this library and
 * ALTER EXTENSION UPDATE), whose receipts are rows of its lease_claims table and which has no
 * completion batches.
 */
#define AWA_OPEN_RECEIPT_TEST_1_0                                                                                      \
	AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NO_CLOSURE("") " AND " AWA_RECEIPT_READY_ROW("")

/*
 * SQL (1.1 catalogs): receipts reached through their ready rows. A receipt is one attempt of
 * a claim batch (awa.claim_batches); its ready row, found by the ready rows' job index, gives
 * the lane, the lane_seq and the ready slot, hence the batch's block key, and the attempt is
 * then found by its position in the batch's arrays. The batches are probed by that key from
 * each ready row (a lateral subquery the planner cannot turn into a join: a plan made while
 * the batches looked empty hashed every batch of the slot on every call). AWA_RECEIPT_COLUMNS is the receipt as a
 * row with the columns of the view awa.lease_claims (plus receipt_base, the batch's identity
 * and the order in which closers lock batches); AWA_RECEIPT_FROM_READY the FROM clause that
 * makes it (ready row `r`, batch `b`, position `x.k`; AWA_RECEIPT_FROM_READY_ON(ARC) with
 * a condition on `b` that restricts the batch probe to the claim ring's live arc, so that
 * only those partitions are probed); AWA_RECEIPT_IS(JOB, LEASE) the
 * condition selecting the receipt of one attempt (for the newest receipt of a job, the same
 * without the run_lease condition). A ready row is claimed once: the attempt's job id,
 * attempt, run lease and max_attempts are the ready row's (attempt and run lease plus one).
 * Joined on the ready generation as well (a slot truncated and used again); awa.drop_queue
 * deletes a queue's batches, whose lane numbers a queue created again would reuse.
 */
#define AWA_RECEIPT_COLUMNS                                                                                            \
	" b.claim_slot, b.receipt_base + x.k - 1 AS receipt_id, r.job_id, r.run_lease + 1 AS run_lease, b.ready_slot, "    \
	" b.ready_generation, b.queue, b.priority, b.effective_priorities[x.k] AS effective_priority, "                    \
	" (r.attempt + 1)::int2 AS attempt, r.max_attempts, r.lane_seq, b.enqueue_shard, b.claimed_at, "                   \
	" b.deadline_at, b.lane_block, b.receipt_base "
#define AWA_RECEIPT_FROM_READY_ON(ARC)                                                                                 \
	" awa.ready_entries r CROSS JOIN LATERAL (SELECT b.* FROM awa.claim_batches b WHERE b.queue = r.queue "            \
	"   AND b.priority = r.priority AND b.enqueue_shard = r.enqueue_shard AND b.lane_block = r.lane_seq / 64 "         \
	"   AND b.ready_slot = r.ready_slot AND b.ready_generation = r.ready_generation " ARC " OFFSET 0) b "              \
	" CROSS JOIN LATERAL (SELECT array_position(b.lane_offsets, (r.lane_seq % 64)::int2) AS k) x "
#define AWA_RECEIPT_FROM_READY AWA_RECEIPT_FROM_READY_ON("")
/* The live arc of the claim ring as a condition on `b`, when it is parameters $3..$6. */
#define AWA_CLAIM_ARC_OF_B "AND (b.claim_slot BETWEEN $3 AND $4 OR b.claim_slot BETWEEN $5 AND $6)"
#define AWA_RECEIPT_OF_JOB(JOB) " r.job_id = " JOB " AND x.k IS NOT NULL "
#define AWA_RECEIPT_IS(JOB, LEASE) AWA_RECEIPT_OF_JOB(JOB) " AND r.run_lease = " LEASE " - 1 "
/*
 * Lock the claim batch whose key and receipt_base a row `k` names (FOR UPDATE, WAIT "" or
 * "SKIP LOCKED"), as a lateral subquery `b`. A batch is always found first and locked by its
 * identity here: a lock taken in the probe of a block would lock every batch of the block.
 * ARC ("" for none, or AWA_CLAIM_ARC_OF_B) restricts the probe to the claim ring's live arc,
 * so that the executor prepares only those partitions.
 */
#define AWA_LOCK_BATCH_OF_KEY(WAIT, ARC)                                                                               \
	" CROSS JOIN LATERAL (SELECT 1 FROM awa.claim_batches b WHERE b.claim_slot = k.claim_slot AND b.queue = k.queue "  \
	"   AND b.priority = k.priority AND b.enqueue_shard = k.enqueue_shard AND b.lane_block = k.lane_block "            \
	"   AND b.ready_slot = k.ready_slot AND b.receipt_base = k.receipt_base " ARC " FOR UPDATE OF b " WAIT ") b "

/* The receipt of the pair `i` (job_id, run_lease) of a statement's input. */
#define AWA_RECEIPT_IS_INPUT AWA_RECEIPT_IS("i.job_id", "i.run_lease")

/*
 * The open-receipt test of a receipt `c` reached through its ready row (AWA_RECEIPT_FROM_READY:
 * the ready-row part of the test holds by construction), each probe restricted to its ring's
 * live arc: the claim ring's in parameters $C1..$C4, the queue ring's in $Q1..$Q4.
 */
#define AWA_READY_RECEIPT_OPEN_LIVE(C1, C2, C3, C4, Q1, Q2, Q3, Q4)                                                    \
	AWA_RECEIPT_NO_TERMINAL_ROW("AND (d.ready_slot BETWEEN $" Q1 " AND $" Q2 " OR d.ready_slot BETWEEN $" Q3           \
								" AND $" Q4 ")")                                                                       \
	" AND " AWA_RECEIPT_NOT_IN_BATCH(                                                                                  \
		"AND (b.ready_slot BETWEEN $" Q1 " AND $" Q2 " OR b.ready_slot BETWEEN $" Q3 " AND $" Q4                       \
		")") " AND " AWA_RECEIPT_NO_CLOSURE("AND (x.claim_slot BETWEEN $" C1 " AND $" C2                               \
											" OR x.claim_slot BETWEEN $" C3 " AND $" C4 ")")

/* The same on every partition (a statement about one job). */
#define AWA_READY_RECEIPT_OPEN                                                                                         \
	AWA_RECEIPT_NO_TERMINAL_ROW("") " AND " AWA_RECEIPT_NOT_IN_BATCH("") " AND " AWA_RECEIPT_NO_CLOSURE("")

/* ---- promote.cpp ---- */

/* Promote up to `limit` due jobs of a queue to the ready plane (SPI connected); how many. */
int promote_due_queue(text *queue, int limit);

/* ---- enqueue.cpp ---- */

/* Register the invalidation hook of the cached job id sequence. */
void init_enqueue_cache();

/* ---- spi_util.cpp: checked SPI ---- */

/* Prepare a statement once per backend and keep it (SPI must be connected). */
SPIPlanPtr keep_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);

/* The same, always with the generic plan (statements run once per job; see spi_util.cpp). */
SPIPlanPtr keep_generic_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);

/* Execute a kept plan and require the exact SPI result code. */
void exec_plan(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
			   const char *what);

/* Execute a kept plan on the latest committed state, whatever the caller's isolation level. */
void exec_plan_latest(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
					  const char *what);

/* The first column of the last statement's single row (false: no row, or NULL). */
bool spi_single_value(Datum *value);

/* Pin the planner settings of the hot path's lane scans; returns the level to pop. */
int push_hot_path_planner();

/* Give the session its own planner settings back. */
void pop_hot_path_planner(int level);

/*
 * Run fn(arg) in a subtransaction; false when it raised a serialization failure (40001),
 * which is rolled back and swallowed. Any other error is raised again.
 */
bool run_unless_serialization_failure(void (*fn)(void *), void *arg);

/* ---- wakeup.cpp: NOTIFY throttle and commit wake-ups ---- */

/* Remember that this transaction made work available in a queue. */
void note_enqueued(const char *queue, int queue_len);

/* Transaction end: signal waiters of the queues this transaction fed. */
void wakeup_at_xact_end(bool committed);

/* ---- stats.cpp: per-shard counters ---- */

enum class StatKind
{
	Enqueued = 0,
	Claimed = 1,
	Completed = 2,
	Failed = 3
};

/* Add n to a (queue, shard) counter (no-op without shared memory). */
void stats_add(const char *queue, int queue_len, int shard, StatKind kind, int64 n);

/* ---- worker.cpp and launcher.cpp: background maintenance ---- */
extern bool maintenance_enabled;
extern char *maintenance_database;
extern int maintenance_interval_ms;
void define_maintenance_settings();
void register_maintenance_launcher();
void mark_database_absent(Oid dbid, bool wanted_elsewhere);
void wake_database(Oid dbid);

/* Whether a maintenance worker runs in this backend's database (claims promote otherwise). */
bool maintenance_worker_serves_database();

/* ---- module.cpp: shared memory sizing for the concerns above ---- */
Size wakeup_shmem_size();
void wakeup_shmem_init(void *base, bool found);
Size stats_shmem_size();
void stats_shmem_init(bool found);
Size launcher_shmem_size();
void launcher_shmem_init(void *base, bool found);

} // namespace awa
