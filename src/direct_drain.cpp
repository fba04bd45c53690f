/*
 * direct_drain.cpp — the drain of one locked lane without a planned statement (D22;
 * docs/design.md §4, "Direct drain"). It does what the receipts-mode drain statement does
 * (claim_sql.hpp, AWA_DRAIN_RECEIPT_BATCHES with AWA_ADVANCE_MARK), step by step:
 *
 * 1. The window: on one snapshot of the latest committed state (taken after a command
 *    counter increment, as SPI takes a non-read-only statement's), an index scan of the
 *    primary key of every live ready partition, (queue, priority, enqueue_shard) equal and
 *    lane_seq in [cursor, bound); the rows of all partitions merged in lane order, the
 *    first max_batch + 1 kept. The first max_batch are claimed; the one after is the hint.
 * 2. One claim time for the batch; its deadline; each row's aged priority.
 * 3. One awa.claim_batches row per (ready slot, block of 64 lane_seqs), in lane order of the
 *    blocks' first rows, each drawing one receipt id from awa.receipt_id_seq (the k-th row
 *    of a block has receipt base + k - 1), inserted into the claim ring's write slot.
 * 4. One awa.claim_marks row: the lane's cursor after the batch and the hint.
 * 5. The unique claims of rows whose unique states leave out 'running' are released (one
 *    statement, only when there are such rows).
 * 6. The rows go to the caller's tuplestore, with the columns of claim_ready_runtime.
 *
 * The lane probes of the claim walk and of the work check (lane_first_row, ready_row_visible)
 * are the window's read with a limit of one row.
 *
 * Locks follow the statement's: AccessShareLock on ready_entries then on each partition
 * read, RowExclusiveLock on claim_batches (its write partition is already locked by the
 * ring fence) and claim_marks, their indexes as the executor opens them. Every check that
 * can send the work back to the statement (Citus, privileges, triggers, rules, row
 * security, unknown columns, a tags value to_jsonb would nest) runs before the first write.
 */
#include "citus.hpp"
#include "direct_drain.hpp"
#include "direct_insert.hpp"
#include "enqueue_core.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace awa
{

namespace
{

/* The columns of a ready row the drain reads. */
enum ReadyColumn
{
	R_READY_SLOT,
	R_READY_GENERATION,
	R_JOB_ID,
	R_KIND,
	R_QUEUE,
	R_ARGS,
	R_PRIORITY,
	R_ATTEMPT,
	R_RUN_LEASE,
	R_MAX_ATTEMPTS,
	R_LANE_SEQ,
	R_ENQUEUE_SHARD,
	R_RUN_AT,
	R_CREATED_AT,
	R_UNIQUE_KEY,
	R_UNIQUE_STATES,
	R_ORDERING_KEY,
	R_METADATA,
	R_TAGS,
	R_ERRORS,
	R_CONCURRENCY_KEY,
	R_NCOLUMNS
};

const char *const kReadyNames[R_NCOLUMNS] = {
	"ready_slot", "ready_generation", "job_id",		  "kind",	  "queue",		   "args",	 "priority",
	"attempt",	  "run_lease",		  "max_attempts", "lane_seq", "enqueue_shard", "run_at", "created_at",
	"unique_key", "unique_states",	  "ordering_key", "metadata", "tags",		   "errors", "concurrency_key"};

/* The result columns of claim_ready_runtime (its RETURNS TABLE), matched by name. */
enum ResultColumn
{
	O_READY_SLOT,
	O_READY_GENERATION,
	O_LANE_SEQ,
	O_ENQUEUE_SHARD,
	O_LEASE_SLOT,
	O_LEASE_GENERATION,
	O_CLAIM_SLOT,
	O_RECEIPT_ID,
	O_JOB_ID,
	O_KIND,
	O_QUEUE,
	O_ARGS,
	O_LANE_PRIORITY,
	O_PRIORITY,
	O_ATTEMPT,
	O_RUN_LEASE,
	O_MAX_ATTEMPTS,
	O_RUN_AT,
	O_HEARTBEAT_AT,
	O_DEADLINE_AT,
	O_ATTEMPTED_AT,
	O_CREATED_AT,
	O_UNIQUE_KEY,
	O_UNIQUE_STATES,
	O_ORDERING_KEY,
	O_PAYLOAD,
	O_NCOLUMNS
};

const char *const kResultNames[O_NCOLUMNS] = {
	"ready_slot",	 "ready_generation", "lane_seq",	 "enqueue_shard", "lease_slot",	  "lease_generation",
	"claim_slot",	 "receipt_id",		 "job_id",		 "kind",		  "queue",		  "args",
	"lane_priority", "priority",		 "attempt",		 "run_lease",	  "max_attempts", "run_at",
	"heartbeat_at",	 "deadline_at",		 "attempted_at", "created_at",	  "unique_key",	  "unique_states",
	"ordering_key",	 "payload"};

/* The columns of an awa.claim_batches row, as the drain writes them. */
enum BatchColumn
{
	B_CLAIM_SLOT,
	B_RECEIPT_BASE,
	B_QUEUE,
	B_PRIORITY,
	B_ENQUEUE_SHARD,
	B_LANE_BLOCK,
	B_READY_SLOT,
	B_READY_GENERATION,
	B_CLAIMED_AT,
	B_DEADLINE_AT,
	B_LANE_OFFSETS,
	B_EFFECTIVE_PRIORITIES,
	B_NCOLUMNS
};

const DirectColumn kBatchColumns[B_NCOLUMNS] = {
	{"claim_slot", INT4OID},		 {"receipt_base", INT8OID},		 {"queue", TEXTOID},
	{"priority", INT2OID},			 {"enqueue_shard", INT2OID},	 {"lane_block", INT8OID},
	{"ready_slot", INT4OID},		 {"ready_generation", INT8OID},	 {"claimed_at", TIMESTAMPTZOID},
	{"deadline_at", TIMESTAMPTZOID}, {"lane_offsets", INT2ARRAYOID}, {"effective_priorities", INT2ARRAYOID}};

/* The columns of an awa.claim_marks row. */
const DirectColumn kMarkColumns[5] = {{"queue", TEXTOID},
									  {"priority", INT2OID},
									  {"enqueue_shard", INT2OID},
									  {"claim_seq", INT8OID},
									  {"head_run_at", TIMESTAMPTZOID}};

/* One ready row of the window, its columns in ReadyColumn order. */
struct ReadyRow
{
	Datum value[R_NCOLUMNS];
	bool null[R_NCOLUMNS];
};

/* A claim batch being built: one (ready slot, block of 64 lane_seqs) of the claimed rows. */
struct Block
{
	int32 ready_slot;
	int64 lane_block;
	int64 ready_generation;
	int64 receipt_base;
	int n;
	Datum *offsets;
	Datum *priorities;
};

SPIPlanPtr unique_release_plan = nullptr;

/* Release the unique claims of jobs whose unique states leave out 'running'. */
const char *const kUniqueReleaseSql =
	"DELETE FROM awa.job_unique_claims u WHERE u.queue = $1 AND u.job_id = ANY ($2::bigint[])";

/* Whether a table can be read by index scans as a SELECT would read it (privilege, no row security). */
bool
readable_directly(Relation rel)
{
	return !rel->rd_rel->relrowsecurity &&
		   pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

/* For every ReadyColumn its attribute index in `desc`; false when one is missing. */
bool
map_ready_columns(TupleDesc desc, int map[R_NCOLUMNS])
{
	for (int c = 0; c < R_NCOLUMNS; c++)
	{
		map[c] = -1;
		for (int a = 0; a < desc->natts && map[c] < 0; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), kReadyNames[c]) == 0)
				map[c] = a;
		if (map[c] < 0)
			return false;
	}
	return true;
}

/* Append a row to a growing palloc'd array of rows. */
void
append_row(ReadyRow **rows, int *n, int *cap, const ReadyRow &row)
{
	if (*n == *cap)
	{
		*cap = *cap == 0 ? 16 : *cap * 2;
		*rows = static_cast<ReadyRow *>(*rows == nullptr ? palloc(sizeof(ReadyRow) * *cap)
														 : repalloc(*rows, sizeof(ReadyRow) * *cap));
	}
	(*rows)[(*n)++] = row;
}

/*
 * Read the lane's rows in [from, bound) from one ready partition, in lane order, at most
 * `limit`; false when the partition's columns are not the ones the drain knows.
 */
bool
read_partition(Oid partition, const LaneRange &lane, Snapshot snapshot, int64 limit, ReadyRow **rows, int *n, int *cap)
{
	Relation rel = table_open(partition, AccessShareLock);
	Relation index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	int map[R_NCOLUMNS];
	ScanKeyData keys[5];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	int64 taken = 0;
	Datum values[MaxTupleAttributeNumber];
	bool nulls[MaxTupleAttributeNumber];

	static const char *const kLaneKey[4] = {"queue", "priority", "enqueue_shard", "lane_seq"};

	if (!map_ready_columns(RelationGetDescr(rel), map) || !index_keys_are(rel, index, kLaneKey, 4))
	{
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return false;
	}
	/* The primary key (queue, priority, enqueue_shard, lane_seq, ready_slot), with its collation. */
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(lane.queue));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1], F_INT2EQ,
						   Int16GetDatum(lane.priority));
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[2], F_INT2EQ,
						   Int16GetDatum(lane.shard));
	ScanKeyEntryInitialize(&keys[3], 0, 4, BTGreaterEqualStrategyNumber, InvalidOid, index->rd_indcollation[3],
						   F_INT8GE, Int64GetDatum(lane.from));
	ScanKeyEntryInitialize(&keys[4], 0, 4, BTLessStrategyNumber, InvalidOid, index->rd_indcollation[3], F_INT8LT,
						   Int64GetDatum(lane.bound));
	scan = index_beginscan(rel, index, snapshot, 5, 0);
	index_rescan(scan, keys, 5, nullptr, 0);
	slot = table_slot_create(rel, nullptr);
	while (taken < limit && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		HeapTuple tuple = ExecCopySlotHeapTuple(slot);
		ReadyRow row;

		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		for (int c = 0; c < R_NCOLUMNS; c++)
		{
			row.value[c] = values[map[c]];
			row.null[c] = nulls[map[c]];
		}
		append_row(rows, n, cap, row);
		taken++;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return true;
}

/* Order of the window: lane_seq. */
int
by_lane_seq(const void *a, const void *b)
{
	int64 x = DatumGetInt64(static_cast<const ReadyRow *>(a)->value[R_LANE_SEQ]);
	int64 y = DatumGetInt64(static_cast<const ReadyRow *>(b)->value[R_LANE_SEQ]);

	return x < y ? -1 : (x > y ? 1 : 0);
}

/* The first span of lane_seq a window read probes: twice the rows it wants, at least 16. */
int64
first_window_span(int64 limit)
{
	return std::max<int64>(16, std::min<int64>(limit, INT64_MAX / 64) * 2);
}

/*
 * The lane's window: up to `limit` visible rows in [from, bound) of the live ready
 * partitions (two ranges of slots), in lane order; false when a partition cannot be read
 * directly. The range is read in at most three spans from `from`: twice the rows wanted,
 * eight times that, then the rest up to `bound`, each only while the rows found are fewer
 * than `limit`: every row of a span precedes every row of the next, so the first `limit`
 * rows found are the window's. A span's upper end stops the B-tree's page read at the rows
 * wanted (a scan to `bound` checks every entry of the lane on its first leaf page against
 * the keys, hundreds under a backlog); a lane with a long run of lane_seq without rows
 * (cancelled jobs, rolled-back inserts) costs at most two more probes per partition.
 */
bool
read_window(const LaneRange &lane, const int *arc, Snapshot snapshot, int64 limit, ReadyRow **rows, int *n)
{
	int cap = 0;
	LaneRange span = lane;
	int64 width = first_window_span(limit);
	int spans = 0;

	*rows = nullptr;
	*n = 0;
	while (span.from < lane.bound)
	{
		int before = *n; /* rows of earlier spans: each partition may hold all the rest */

		/* [from, from + width) within [from, bound), without overflow. */
		span.bound = static_cast<uint64>(lane.bound) - static_cast<uint64>(span.from) > static_cast<uint64>(width)
						 ? span.from + width
						 : lane.bound;
		for (int range = 0; range < 2; range++)
			for (int s = arc[2 * range]; s <= arc[2 * range + 1]; s++)
				if (!read_partition(ring_partition_oid("ready_entries_", s), span, snapshot, limit - before, rows, n,
									&cap))
					return false;
		if (*n >= limit)
			break;
		span.from = span.bound;
		width = ++spans < 2 ? width * 8 : INT64_MAX; /* the third span: the rest */
	}
	if (*n > 1)
		qsort(*rows, *n, sizeof(ReadyRow), by_lane_seq);
	if (*n > limit)
		*n = static_cast<int>(limit);
	return true;
}

/* ready_entries open for direct reads (AccessShareLock), or nullptr when a statement must read. */
Relation
open_ready_for_read()
{
	Relation ready;

	if (citus_present())
		return nullptr;
	ready = table_open(awa_relation("ready_entries"), AccessShareLock);
	if (!readable_directly(ready))
	{
		table_close(ready, NoLock);
		return nullptr;
	}
	return ready;
}

/* Whether to_jsonb of this tags value is the flat array payload_of builds (one dimension or none). */
bool
tags_flat(const ReadyRow &row)
{
	return row.null[R_TAGS] || ARR_NDIM(DatumGetArrayTypeP(row.value[R_TAGS])) <= 1;
}

/* Push a jsonb value (container or scalar) as the value of the current key. */
void
push_jsonb(JsonbParseState **state, Datum value)
{
	Jsonb *jb = DatumGetJsonbP(value);
	JsonbValue v;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		if (!JsonbExtractScalar(&jb->root, &v))
			elog(ERROR, "awa_shard: a scalar jsonb value could not be read");
	}
	else
	{
		v.type = jbvBinary;
		v.val.binary.data = &jb->root;
		v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	}
	(void)pushJsonbValue(state, WJB_VALUE, &v);
}

/* Push an object key. */
void
push_key(JsonbParseState **state, const char *key)
{
	JsonbValue k;

	k.type = jbvString;
	k.val.string.val = const_cast<char *>(key);
	k.val.string.len = static_cast<int>(strlen(key));
	(void)pushJsonbValue(state, WJB_KEY, &k);
}

/*
 * The payload column: jsonb_build_object('metadata', coalesce(metadata, '{}'), 'tags',
 * to_jsonb(coalesce(tags, '{}')), 'errors', coalesce(errors, '[]')).
 */
Datum
build_payload(const ReadyRow &row)
{
	JsonbParseState *state = nullptr;
	JsonbValue *result;

	(void)pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
	push_key(&state, "metadata");
	if (row.null[R_METADATA])
	{
		(void)pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
		(void)pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
	}
	else
		push_jsonb(&state, row.value[R_METADATA]);
	push_key(&state, "tags");
	(void)pushJsonbValue(&state, WJB_BEGIN_ARRAY, nullptr);
	if (!row.null[R_TAGS])
	{
		Datum *elems;
		bool *elem_nulls;
		int nelems;

		deconstruct_array(DatumGetArrayTypeP(row.value[R_TAGS]), TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls,
						  &nelems);
		for (int i = 0; i < nelems; i++)
		{
			JsonbValue e;

			if (elem_nulls[i])
				e.type = jbvNull;
			else
			{
				text *t = DatumGetTextPP(elems[i]);

				e.type = jbvString;
				e.val.string.val = VARDATA_ANY(t);
				e.val.string.len = static_cast<int>(VARSIZE_ANY_EXHDR(t));
			}
			(void)pushJsonbValue(&state, WJB_ELEM, &e);
		}
	}
	(void)pushJsonbValue(&state, WJB_END_ARRAY, nullptr);
	push_key(&state, "errors");
	if (row.null[R_ERRORS])
	{
		(void)pushJsonbValue(&state, WJB_BEGIN_ARRAY, nullptr);
		(void)pushJsonbValue(&state, WJB_END_ARRAY, nullptr);
	}
	else
		push_jsonb(&state, row.value[R_ERRORS]);
	result = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
	return JsonbPGetDatum(JsonbValueToJsonb(result));
}

/*
 * The payload of a row (build_payload). Most rows have no metadata, tags or errors: their
 * payload is one constant, built once per backend, so a claim of many such rows builds no
 * jsonb per row (each build allocated a kilobyte or more of the call's memory).
 */
Datum
payload_of(const ReadyRow &row)
{
	static Datum empty = (Datum)0;

	if (!row.null[R_METADATA] || !row.null[R_TAGS] || !row.null[R_ERRORS])
		return build_payload(row);
	if (empty == (Datum)0)
	{
		Datum built = build_payload(row);
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		empty = datumCopy(built, false, -1);
		MemoryContextSwitchTo(old);
	}
	return empty;
}

/* For every attribute of the result its ResultColumn; false when one is unknown. */
bool
map_result_columns(TupleDesc desc, int *map)
{
	if (desc->natts > O_NCOLUMNS)
		return false;
	for (int a = 0; a < desc->natts; a++)
	{
		map[a] = -1;
		for (int c = 0; c < O_NCOLUMNS && map[a] < 0; c++)
			if (strcmp(NameStr(TupleDescAttr(desc, a)->attname), kResultNames[c]) == 0)
				map[a] = c;
		if (map[a] < 0)
			return false;
	}
	return true;
}

/* The claim batches of the picked rows: one per (ready slot, block of 64), in lane order of first rows. */
Block *
group_blocks(const ReadyRow *rows, int n, int *receipt_block, int *n_blocks)
{
	Block *blocks = static_cast<Block *>(palloc(sizeof(Block) * n));

	*n_blocks = 0;
	for (int i = 0; i < n; i++)
	{
		int32 ready_slot = DatumGetInt32(rows[i].value[R_READY_SLOT]);
		int64 lane_block = DatumGetInt64(rows[i].value[R_LANE_SEQ]) / 64;
		int b = 0;

		while (b < *n_blocks && (blocks[b].ready_slot != ready_slot || blocks[b].lane_block != lane_block))
			b++;
		if (b == *n_blocks)
		{
			blocks[b].ready_slot = ready_slot;
			blocks[b].lane_block = lane_block;
			blocks[b].ready_generation = DatumGetInt64(rows[i].value[R_READY_GENERATION]);
			blocks[b].n = 0;
			blocks[b].offsets = static_cast<Datum *>(palloc(sizeof(Datum) * n));
			blocks[b].priorities = static_cast<Datum *>(palloc(sizeof(Datum) * n));
			(*n_blocks)++;
		}
		receipt_block[i] = b;
	}
	return blocks;
}

/* Release the unique claims the claimed rows give up (their unique states leave out 'running'). */
void
release_unique_claims(const DrainRequest &req, const ReadyRow *rows, int n)
{
	static const Oid types[2] = {TEXTOID, INT8ARRAYOID};
	Datum *ids = static_cast<Datum *>(palloc(sizeof(Datum) * n));
	int k = 0;
	Datum values[2];

	for (int i = 0; i < n; i++)
		if (!rows[i].null[R_UNIQUE_KEY] && !rows[i].null[R_UNIQUE_STATES] &&
			!mask_has_state(rows[i].value[R_UNIQUE_STATES], "running"))
			ids[k++] = rows[i].value[R_JOB_ID];
	if (k == 0)
		return;
	keep_plan(&unique_release_plan, kUniqueReleaseSql, 2, types);
	values[0] = PointerGetDatum(req.queue);
	values[1] = PointerGetDatum(construct_array(ids, k, INT8OID, 8, true, TYPALIGN_DOUBLE));
	exec_plan_latest(unique_release_plan, values, nullptr, false, 0, SPI_OK_DELETE, "claim unique release");
}

/* Raise as the statement's int2 and int8 casts would on an attempt or run lease at its type's end. */
void
check_increments(const ReadyRow &row)
{
	if (DatumGetInt16(row.value[R_ATTEMPT]) == PG_INT16_MAX)
		ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("smallint out of range")));
	if (DatumGetInt64(row.value[R_RUN_LEASE]) == PG_INT64_MAX)
		ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
}

} // namespace

/* A lane's window kept for its drain (direct_drain.hpp): the rows asked for and the one after. */
struct LaneWindow
{
	LaneRange lane;
	int arc[4];
	int64 limit; /* rows asked for; one more was read for the hint */
	ReadyRow *rows;
	int n;
};

namespace
{

/* Whether a kept window is the one the drain would read: same lane, range and arc, no fewer rows. */
bool
window_serves(const LaneWindow &w, const DrainRequest &req)
{
	text *a = w.lane.queue;
	text *b = req.queue;

	return w.lane.priority == req.priority && w.lane.shard == req.shard && w.lane.from == req.claim_seq &&
		   w.lane.bound == req.bound && req.max_batch <= w.limit && memcmp(w.arc, req.arc, sizeof(w.arc)) == 0 &&
		   VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		   memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

} // namespace

/* The aged priority of a lane (see the header), as the drain statement computes it. */
int
aged_priority(int priority, TimestampTz run_at, TimestampTz now, double aging_secs)
{
	double waited;
	double steps;

	if (aging_secs <= 0)
		return priority;
	/* An infinite run_at has waited forever (-infinity) or not at all (infinity), as in SQL. */
	if (TIMESTAMP_IS_NOBEGIN(run_at))
		waited = INFINITY;
	else if (TIMESTAMP_IS_NOEND(run_at))
		waited = -INFINITY;
	else
		waited = static_cast<double>(now - run_at) / USECS_PER_SEC;
	steps = std::floor(waited / aging_secs);
	return static_cast<int>(std::rint(std::fmin(priority, std::fmax(1.0, priority - steps))));
}

/* Drain a locked lane through direct access (see the file comment). */
bool
drain_direct(const DrainRequest &req, Tuplestorestate *store, TupleDesc result_desc, DrainOutcome *out)
{
	Oid batches_parent;
	Oid marks_table;
	Relation ready;
	Snapshot snapshot;
	ReadyRow *rows;
	int n_window;
	int n;
	int *result_map;
	DirectTarget batches;
	DirectTarget marks;
	TimestampTz claimed_at;
	bool has_deadline = req.deadline_secs > 0;
	TimestampTz deadline_at = 0;
	int *receipt_block;
	Block *blocks;
	int n_blocks;
	int64 *receipt_id;
	int16 *priority;
	Oid receipt_seq;

	out->claimed = 0;
	out->has_hint = false;
	out->keyed = nullptr;
	out->n_keyed = 0;
	if (citus_present() || req.max_batch < 1 || req.max_batch > INT_MAX / 2)
		return false;
	result_map = static_cast<int *>(palloc(sizeof(int) * (result_desc->natts + 1)));
	if (!map_result_columns(result_desc, result_map))
		return false;
	batches_parent = awa_relation("claim_batches");
	marks_table = awa_relation("claim_marks");
	receipt_seq = awa_relation("receipt_id_seq");

	/* 1. The window, on the latest committed state as a non-read-only SPI statement sees it. */
	ready = open_ready_for_read();
	if (ready == nullptr)
		return false;
	CommandCounterIncrement();
	if (req.window != nullptr && window_serves(*req.window, req))
	{
		/* Read by the per-key step under this head lock and bound: the same rows. */
		rows = req.window->rows;
		n_window = static_cast<int>(std::min<int64>(req.window->n, req.max_batch + 1));
	}
	else
	{
		LaneRange lane = {req.queue, req.priority, req.shard, req.claim_seq, req.bound};
		bool readable;

		snapshot = RegisterSnapshot(GetLatestSnapshot());
		readable = read_window(lane, req.arc, snapshot, req.max_batch + 1, &rows, &n_window);
		UnregisterSnapshot(snapshot);
		if (!readable)
		{
			table_close(ready, NoLock);
			return false;
		}
	}
	table_close(ready, NoLock);
	n = static_cast<int>(std::min<int64>(n_window, req.max_batch));
	for (int i = 0; i < n; i++)
		if (!tags_flat(rows[i]))
			return false;
	if (n == 0)
		return true;

	/* Both targets open, or neither: nothing is written before the statement could take over. */
	if (!direct_target_open(&batches, batches_parent,
							OidIsValid(req.claim_slot.partition)
								? req.claim_slot.partition
								: ring_partition_oid("claim_batches_", req.claim_slot.slot),
							kBatchColumns, B_NCOLUMNS))
		return false;
	if (!direct_target_open(&marks, marks_table, marks_table, kMarkColumns, 5))
	{
		direct_target_close(&batches);
		return false;
	}

	/* 2. One claim time, its deadline, the aged priorities. */
	claimed_at = GetCurrentTimestamp();
	if (has_deadline)
		deadline_at = claimed_at + static_cast<int64>(std::rint(req.deadline_secs * USECS_PER_SEC));
	priority = static_cast<int16 *>(palloc(sizeof(int16) * n));
	for (int i = 0; i < n; i++)
	{
		int lane_priority = DatumGetInt16(rows[i].value[R_PRIORITY]);

		check_increments(rows[i]);
		priority[i] = static_cast<int16>(
			aged_priority(lane_priority, DatumGetTimestampTz(rows[i].value[R_RUN_AT]), claimed_at, req.aging_secs));
	}

	/* 3. The claim batches, each with its receipt base, and every row's receipt id. */
	receipt_block = static_cast<int *>(palloc(sizeof(int) * n));
	receipt_id = static_cast<int64 *>(palloc(sizeof(int64) * n));
	blocks = group_blocks(rows, n, receipt_block, &n_blocks);
	for (int b = 0; b < n_blocks; b++)
		blocks[b].receipt_base = nextval_internal(receipt_seq, true);
	for (int i = 0; i < n; i++)
	{
		Block &blk = blocks[receipt_block[i]];

		receipt_id[i] = blk.receipt_base + blk.n;
		blk.offsets[blk.n] = Int16GetDatum(static_cast<int16>(DatumGetInt64(rows[i].value[R_LANE_SEQ]) % 64));
		blk.priorities[blk.n] = Int16GetDatum(priority[i]);
		blk.n++;
	}
	for (int b = 0; b < n_blocks; b++)
	{
		Datum values[B_NCOLUMNS];
		bool nulls[B_NCOLUMNS] = {};

		values[B_CLAIM_SLOT] = Int32GetDatum(req.claim_slot.slot);
		values[B_RECEIPT_BASE] = Int64GetDatum(blocks[b].receipt_base);
		values[B_QUEUE] = PointerGetDatum(req.queue);
		values[B_PRIORITY] = Int16GetDatum(req.priority);
		values[B_ENQUEUE_SHARD] = Int16GetDatum(req.shard);
		values[B_LANE_BLOCK] = Int64GetDatum(blocks[b].lane_block);
		values[B_READY_SLOT] = Int32GetDatum(blocks[b].ready_slot);
		values[B_READY_GENERATION] = Int64GetDatum(blocks[b].ready_generation);
		values[B_CLAIMED_AT] = TimestampTzGetDatum(claimed_at);
		values[B_DEADLINE_AT] = TimestampTzGetDatum(deadline_at);
		nulls[B_DEADLINE_AT] = !has_deadline;
		values[B_LANE_OFFSETS] =
			PointerGetDatum(construct_array(blocks[b].offsets, blocks[b].n, INT2OID, 2, true, TYPALIGN_SHORT));
		values[B_EFFECTIVE_PRIORITIES] =
			PointerGetDatum(construct_array(blocks[b].priorities, blocks[b].n, INT2OID, 2, true, TYPALIGN_SHORT));
		direct_target_insert(&batches, values, nulls);
	}
	direct_target_close(&batches);

	/* 4. The claim mark: the cursor after the batch, the next row's run_at as the hint. */
	out->claimed = n;
	out->next_seq = DatumGetInt64(rows[n - 1].value[R_LANE_SEQ]) + 1;
	out->has_hint = n_window > n;
	out->hint_run_at = out->has_hint ? DatumGetTimestampTz(rows[n].value[R_RUN_AT]) : 0;
	{
		Datum values[5] = {PointerGetDatum(req.queue), Int16GetDatum(req.priority), Int16GetDatum(req.shard),
						   Int64GetDatum(out->next_seq), TimestampTzGetDatum(out->hint_run_at)};
		bool nulls[5] = {false, false, false, false, !out->has_hint};

		direct_target_insert(&marks, values, nulls);
	}
	direct_target_close(&marks);
	CommandCounterIncrement();

	/* 5. Unique claims that do not cover 'running'. */
	release_unique_claims(req, rows, n);

	/* 6. The claimed rows, in lane order (and, when asked, the attempts of keyed ones). */
	if (req.keyed)
		out->keyed = static_cast<KeyedAttempt *>(palloc(sizeof(KeyedAttempt) * n));
	for (int i = 0; i < n; i++)
	{
		const ReadyRow &r = rows[i];
		Datum v[O_NCOLUMNS];
		bool isnull[O_NCOLUMNS] = {};
		Datum values[O_NCOLUMNS];
		bool nulls[O_NCOLUMNS];

		v[O_READY_SLOT] = r.value[R_READY_SLOT];
		v[O_READY_GENERATION] = r.value[R_READY_GENERATION];
		v[O_LANE_SEQ] = r.value[R_LANE_SEQ];
		v[O_ENQUEUE_SHARD] = r.value[R_ENQUEUE_SHARD];
		v[O_LEASE_SLOT] = (Datum)0;
		isnull[O_LEASE_SLOT] = true;
		v[O_LEASE_GENERATION] = (Datum)0;
		isnull[O_LEASE_GENERATION] = true;
		v[O_CLAIM_SLOT] = Int32GetDatum(req.claim_slot.slot);
		v[O_RECEIPT_ID] = Int64GetDatum(receipt_id[i]);
		v[O_JOB_ID] = r.value[R_JOB_ID];
		v[O_KIND] = r.value[R_KIND];
		v[O_QUEUE] = r.value[R_QUEUE];
		v[O_ARGS] = r.value[R_ARGS];
		v[O_LANE_PRIORITY] = r.value[R_PRIORITY];
		v[O_PRIORITY] = Int16GetDatum(priority[i]);
		v[O_ATTEMPT] = Int16GetDatum(static_cast<int16>(DatumGetInt16(r.value[R_ATTEMPT]) + 1));
		v[O_RUN_LEASE] = Int64GetDatum(DatumGetInt64(r.value[R_RUN_LEASE]) + 1);
		v[O_MAX_ATTEMPTS] = r.value[R_MAX_ATTEMPTS];
		v[O_RUN_AT] = r.value[R_RUN_AT];
		v[O_HEARTBEAT_AT] = TimestampTzGetDatum(claimed_at);
		v[O_DEADLINE_AT] = TimestampTzGetDatum(deadline_at);
		isnull[O_DEADLINE_AT] = !has_deadline;
		v[O_ATTEMPTED_AT] = TimestampTzGetDatum(claimed_at);
		v[O_CREATED_AT] = r.value[R_CREATED_AT];
		v[O_UNIQUE_KEY] = r.value[R_UNIQUE_KEY];
		isnull[O_UNIQUE_KEY] = r.null[R_UNIQUE_KEY];
		v[O_UNIQUE_STATES] = r.value[R_UNIQUE_STATES];
		isnull[O_UNIQUE_STATES] = r.null[R_UNIQUE_STATES];
		v[O_ORDERING_KEY] = r.value[R_ORDERING_KEY];
		isnull[O_ORDERING_KEY] = r.null[R_ORDERING_KEY];
		v[O_PAYLOAD] = payload_of(r);
		if (req.keyed && !r.null[R_CONCURRENCY_KEY])
		{
			KeyedAttempt &k = out->keyed[out->n_keyed++];

			k.concurrency_key = DatumGetTextPP(r.value[R_CONCURRENCY_KEY]);
			k.job_id = DatumGetInt64(r.value[R_JOB_ID]);
			k.run_lease = DatumGetInt64(v[O_RUN_LEASE]);
			k.lane_seq = DatumGetInt64(r.value[R_LANE_SEQ]);
			k.ready_slot = DatumGetInt32(r.value[R_READY_SLOT]);
			k.ready_generation = DatumGetInt64(r.value[R_READY_GENERATION]);
			k.has_claim_slot = true;
			k.claim_slot = req.claim_slot.slot;
			k.has_lease_slot = false;
			k.lease_slot = 0;
		}
		for (int a = 0; a < result_desc->natts; a++)
		{
			values[a] = v[result_map[a]];
			nulls[a] = isnull[result_map[a]];
		}
		tuplestore_putvalues(store, result_desc, values, nulls);
	}
	return true;
}

/* The concurrency keys of a lane's window (see the header). */
bool
lane_window_keys(const LaneRange &lane, const int *arc, int64 limit, text ***keys, int64 *n, int64 *first_seq,
				 LaneWindow **kept)
{
	Relation ready;
	Snapshot snapshot;
	ReadyRow *rows;
	int n_rows;
	bool readable;

	*n = 0;
	*first_seq = -1;
	if (limit < 1 || limit > INT_MAX / 2)
		return false;
	ready = open_ready_for_read();
	if (ready == nullptr)
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	readable = read_window(lane, arc, snapshot, kept != nullptr ? limit + 1 : limit, &rows, &n_rows);
	UnregisterSnapshot(snapshot);
	table_close(ready, NoLock);
	if (!readable)
		return false;
	if (kept != nullptr)
	{
		*kept = static_cast<LaneWindow *>(palloc(sizeof(LaneWindow)));
		(*kept)->lane = lane;
		memcpy((*kept)->arc, arc, sizeof((*kept)->arc));
		(*kept)->limit = limit;
		(*kept)->rows = rows;
		(*kept)->n = n_rows;
		n_rows = static_cast<int>(std::min<int64>(n_rows, limit));
	}
	*keys = static_cast<text **>(palloc(sizeof(text *) * (n_rows > 0 ? n_rows : 1)));
	for (int i = 0; i < n_rows; i++)
		(*keys)[i] = rows[i].null[R_CONCURRENCY_KEY] ? nullptr : DatumGetTextPP(rows[i].value[R_CONCURRENCY_KEY]);
	if (n_rows > 0)
		*first_seq = DatumGetInt64(rows[0].value[R_LANE_SEQ]);
	*n = n_rows;
	return true;
}

/* The first visible row of a lane in [from, bound) of the live ready slots (see the header). */
bool
lane_first_row(const LaneRange &lane, const int *arc, bool *found, LaneRow *row)
{
	Relation ready = open_ready_for_read();
	Snapshot snapshot;
	ReadyRow *rows;
	int n;
	bool readable;

	if (ready == nullptr)
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	readable = read_window(lane, arc, snapshot, 1, &rows, &n);
	UnregisterSnapshot(snapshot);
	table_close(ready, NoLock);
	if (!readable)
		return false;
	*found = n > 0;
	if (*found)
	{
		row->run_at = DatumGetTimestampTz(rows[0].value[R_RUN_AT]);
		row->ready_slot = DatumGetInt32(rows[0].value[R_READY_SLOT]);
		row->lane_seq = DatumGetInt64(rows[0].value[R_LANE_SEQ]);
	}
	return true;
}

/* Whether one ready row (by its key) is visible (see the header). */
bool
ready_row_visible(const LaneRange &lane, int32 ready_slot, int64 lane_seq, bool *found)
{
	Relation ready = open_ready_for_read();
	Snapshot snapshot;
	ReadyRow *rows;
	int n;
	int cap = 0;
	LaneRange one = {lane.queue, lane.priority, lane.shard, lane_seq, lane_seq + 1};
	bool readable;

	if (ready == nullptr)
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rows = nullptr;
	n = 0;
	readable = read_partition(ring_partition_oid("ready_entries_", ready_slot), one, snapshot, 1, &rows, &n, &cap);
	UnregisterSnapshot(snapshot);
	table_close(ready, NoLock);
	if (!readable)
		return false;
	*found = n > 0;
	return true;
}

} // namespace awa
