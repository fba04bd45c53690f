/*
 * direct_complete.cpp — the receipts of a completion completed without a planned statement
 * (D22; docs/design.md §5, "Direct completion"). The two statements it replaces on the
 * common path were the lock statement (find each pair's receipt through its ready row and
 * lock the claim batches, in receipt_base order) and the completion statement (on a snapshot
 * taken after the locks: test that each receipt is still open, append completion batches,
 * drop heartbeats and unique claims). Here the same steps are index probes on known
 * partitions of the live arcs, as the logical replication apply worker finds a row
 * (RelationFindReplTupleByIndex):
 *   1. on one copy of the latest snapshot (D14: whatever the caller's isolation level), each
 *      pair's ready row by the job index of every live ready partition, then its claim batch
 *      by the block index of every live claim partition (the attempt at its offset's
 *      position in the batch's arrays);
 *   2. the batches found are locked (table_tuple_lock, LockTupleExclusive: FOR UPDATE) in
 *      receipt_base order; a batch deleted meanwhile is skipped under READ COMMITTED and
 *      raises 40001 under REPEATABLE READ and SERIALIZABLE, as ExecLockRows does;
 *   3. on a new latest snapshot, taken after the locks (what a closer that held one
 *      committed is visible), a receipt is open while its ready row is visible and no
 *      terminal row, completion batch entry or closure names the attempt (the test of
 *      awa._open_receipts, each probe on the one partition that can hold the row);
 *   4. the open ones are appended as completion batches, one per (ready slot, generation,
 *      lane, block of 64), inserted into completion_batches_<slot> with ExecConstraints,
 *      table_tuple_insert and ExecInsertIndexTuples; then the command counter advances;
 *   5. heartbeats and unique claims of the completed attempts are probed; only when one
 *      exists does a (small) statement delete them.
 * Locks are the statements' modes: AccessShareLock on what is only read, RowShareLock on
 * the claim batches, RowExclusiveLock on completion_batches and on the partition a batch
 * goes to (then its indexes), when it goes there, as tuple routing takes it (a prune moving a
 * sealed slot holds SHARE ROW EXCLUSIVE on its partitions and lets readers in), each parent
 * before its partitions; only the live partitions are locked,
 * where a generic plan locked every partition of every table. Pairs whose receipt is not
 * found (a lease, a stale pair, another queue's attempt) are handed back to the statements.
 * Everything that would make the statements do more than this (Citus, whose tables here are
 * shells; a read-only transaction; a missing privilege; a trigger, rule or row security; a
 * column of completion_batches this file does not fill) is checked before any row is read,
 * and the statements then do all of it.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "citus.hpp"
#include "direct_complete.hpp"
#include "direct_insert.hpp"
#include "enqueue_core.hpp"
#include "ring.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace awa
{

namespace
{

/* One (job_id, run_lease) pair of the call, with its value (result or progress) and its position in the input. */
struct Pair
{
	int64 job_id;
	int64 run_lease;
	Datum result;
	bool result_null;
	int n;
};

/* A ring partition opened for a probe: its slot, the table and the index probed. */
struct Part
{
	int slot;
	Relation rel;
	Relation index;
	TupleTableSlot *row; /* a slot of the partition's kind (heap tuples in a buffer) */
};

/* A receipt found in step 1: its ready row, its claim batch, and what step 3 decided. */
struct Receipt
{
	int pair;
	Part *ready;
	ItemPointerData ready_tid;
	text *queue;
	int16 priority;
	int16 enqueue_shard;
	int64 lane_seq;
	int32 ready_slot;
	int64 ready_generation;
	bool release_unique;
	Part *claim;
	ItemPointerData batch_tid;
	int32 claim_slot;
	int64 receipt_base;
	TimestampTz claimed_at;
	bool locked;
	bool batch_checked; /* no completion batch names it (tested already on the same snapshot) */
	bool open;
};

/* Columns of a ready row and of a claim batch that a completion reads. */
enum ReadyAttr
{
	RA_JOB_ID,
	RA_RUN_LEASE,
	RA_QUEUE,
	RA_PRIORITY,
	RA_ENQUEUE_SHARD,
	RA_LANE_SEQ,
	RA_READY_SLOT,
	RA_READY_GENERATION,
	RA_UNIQUE_KEY,
	RA_UNIQUE_STATES,
	RA_N
};
const char *const kReadyAttrs[RA_N] = {"job_id",		"run_lease",	"queue",	  "priority",
									   "enqueue_shard", "lane_seq",		"ready_slot", "ready_generation",
									   "unique_key",	"unique_states"};
enum ClaimAttr
{
	CA_READY_GENERATION,
	CA_LANE_OFFSETS,
	CA_CLAIM_SLOT,
	CA_RECEIPT_BASE,
	CA_CLAIMED_AT,
	CA_N
};
const char *const kClaimAttrs[CA_N] = {"ready_generation", "lane_offsets", "claim_slot", "receipt_base", "claimed_at"};

/* Columns of the indexes probed, in index order. */
const char *const kJobIndex[] = {"job_id"};
const char *const kBlockIndex[] = {"queue", "priority", "enqueue_shard", "lane_block", "ready_slot"};
const char *const kDoneKey[] = {"queue", "priority", "enqueue_shard", "lane_seq", "ready_slot"};
const char *const kClosureKey[] = {"claim_slot", "job_id", "run_lease", "queue"};
const char *const kAttemptStateKey[] = {"job_id", "run_lease", "queue"};

/* The columns of completion_batches, as a completion fills them. */
enum BatchColumn
{
	BC_READY_SLOT,
	BC_READY_GENERATION,
	BC_QUEUE,
	BC_PRIORITY,
	BC_ENQUEUE_SHARD,
	BC_LANE_BLOCK,
	BC_LANE_OFFSETS,
	BC_ATTEMPTED_AT,
	BC_FINALIZED_AT,
	BC_RESULTS,
	BC_NCOLUMNS
};
const struct
{
	const char *name;
	Oid type;
} kBatchColumns[BC_NCOLUMNS] = {{"ready_slot", INT4OID},
								{"ready_generation", INT8OID},
								{"queue", TEXTOID},
								{"priority", INT2OID},
								{"enqueue_shard", INT2OID},
								{"lane_block", INT8OID},
								{"lane_offsets", INT2ARRAYOID},
								{"attempted_at", TIMESTAMPTZARRAYOID},
								{"finalized_at", TIMESTAMPTZOID},
								{"results", JSONBARRAYOID}};

/* Heartbeats of completed attempts ($1 job ids, $2 run leases, $3 queues). */
const char *const kForgetHeartbeatsSql =
	"DELETE FROM awa.attempt_state a USING unnest($1::bigint[], $2::bigint[], $3::text[]) AS f(job_id, run_lease, "
	"queue) WHERE a.job_id = ANY ($1) AND a.job_id = f.job_id AND a.run_lease = f.run_lease AND a.queue = f.queue";
/* Unique claims of completed jobs whose mask does not hold 'completed' ($1 job ids, $2 queues). */
const char *const kReleaseUniqueSql =
	"DELETE FROM awa.job_unique_claims u USING unnest($1::bigint[], $2::text[]) AS f(job_id, queue) "
	"WHERE u.job_id = ANY ($1) AND u.job_id = f.job_id AND u.queue = f.queue";
SPIPlanPtr forget_heartbeats_plan = nullptr;
SPIPlanPtr release_unique_plan = nullptr;

/* Attribute number of column `name` of `rel`; a missing column is a broken install. */
AttrNumber
attnum_of(Relation rel, const char *name)
{
	TupleDesc desc = RelationGetDescr(rel);

	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped && strcmp(NameStr(TupleDescAttr(desc, a)->attname), name) == 0)
			return a + 1;
	elog(ERROR, "awa_shard: column %s of %s is missing", name, RelationGetRelationName(rel));
	return InvalidAttrNumber;
}

/*
 * The valid, non-partial btree index of `rel` on exactly the columns `cols` (in that order),
 * found in the relcache's index list and the syscache; InvalidOid when there is none.
 */
Oid
find_index(Relation rel, const char *const *cols, int ncols)
{
	List *indexes = RelationGetIndexList(rel);
	ListCell *lc;
	Oid found = InvalidOid;

	foreach (lc, indexes)
	{
		Oid indexoid = lfirst_oid(lc);
		HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		Form_pg_index index;
		bool match;

		if (!HeapTupleIsValid(tuple))
			continue;
		index = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
		match = index->indisvalid && index->indnkeyatts == ncols && index->indnatts == ncols &&
				heap_attisnull(tuple, Anum_pg_index_indpred, nullptr) &&
				heap_attisnull(tuple, Anum_pg_index_indexprs, nullptr);
		for (int k = 0; match && k < ncols; k++)
		{
			AttrNumber att = index->indkey.values[k];

			match = att > 0 && strcmp(NameStr(TupleDescAttr(RelationGetDescr(rel), att - 1)->attname), cols[k]) == 0;
		}
		ReleaseSysCache(tuple);
		if (match)
		{
			found = indexoid;
			break;
		}
	}
	list_free(indexes);
	return found;
}

/* Open partition awa.<prefix><slot> and its index on `cols`; false: no such index. */
bool
open_part(const char *prefix, int slot, LOCKMODE mode, const char *const *cols, int ncols, Part *part)
{
	Oid indexoid;

	part->slot = slot;
	part->rel = table_open(ring_partition_oid(prefix, slot), mode);
	part->index = nullptr;
	indexoid = find_index(part->rel, cols, ncols);
	if (!OidIsValid(indexoid))
		return false;
	part->index = index_open(indexoid, AccessShareLock);
	part->row = table_slot_create(part->rel, nullptr);
	return part->index->rd_rel->relam == BTREE_AM_OID;
}

/* Close what open_part opened (the locks stay to the end of the transaction). */
void
close_part(Part *part)
{
	if (part->row != nullptr)
		ExecDropSingleTupleTableSlot(part->row);
	part->row = nullptr;
	if (part->index != nullptr)
		index_close(part->index, NoLock);
	if (part->rel != nullptr)
		table_close(part->rel, NoLock);
	part->index = nullptr;
	part->rel = nullptr;
}

/* The slots of an arc (two inclusive ranges) into slots[]; returns how many. */
int
arc_slots(const int arc[4], int *slots)
{
	int n = 0;

	for (int s = arc[0]; s <= arc[1]; s++)
		slots[n++] = s;
	for (int s = arc[2]; s <= arc[3]; s++)
		slots[n++] = s;
	return n;
}

/* The number of slots of an arc. */
int
arc_size(const int arc[4])
{
	return (arc[1] >= arc[0] ? arc[1] - arc[0] + 1 : 0) + (arc[3] >= arc[2] ? arc[3] - arc[2] + 1 : 0);
}

/* An equality key on column `col` (1-based) of `index`, with the index column's collation. */
void
eq_key(ScanKey key, Relation index, int col, RegProcedure proc, Datum value)
{
	ScanKeyEntryInitialize(key, 0, col, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[col - 1], proc,
						   value);
}

/* Whether two text values are equal byte for byte (queue names: the C collation's equality). */
bool
text_equal(text *a, text *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		   memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/* A column of the row in `slot` (never NULL by the schema unless isnull is asked for). */
Datum
column(TupleTableSlot *slot, AttrNumber att, bool *isnull = nullptr)
{
	bool null;
	Datum value = slot_getattr(slot, att, &null);

	if (isnull != nullptr)
		*isnull = null;
	return value;
}

/*
 * The offsets an int2[] of lane_offsets names, as bits 0..63. Lane sequences start at 1, so
 * every offset a lane_seq % 64 can take is one bit; an element outside 0..63 names none.
 */
uint64
offset_bits(Datum array)
{
	ArrayType *a = DatumGetArrayTypeP(array);
	Datum *elems;
	bool *nulls;
	int n;
	uint64 bits = 0;

	deconstruct_array(a, INT2OID, sizeof(int16), true, TYPALIGN_SHORT, &elems, &nulls, &n);
	for (int k = 0; k < n; k++)
	{
		int16 offset = DatumGetInt16(elems[k]);

		if (!nulls[k] && offset >= 0 && offset < 64)
			bits |= UINT64CONST(1) << offset;
	}
	return bits;
}

/* Whether `bits` (offset_bits) names the offset of `lane_seq` in its block (lane_seq % 64). */
bool
has_offset(uint64 bits, int64 lane_seq)
{
	int64 offset = lane_seq % 64;

	return offset >= 0 && ((bits >> offset) & 1) != 0;
}

/* Order of pairs: (job_id, run_lease), then input position (the first result given wins). */
int
pair_order(const void *a, const void *b)
{
	const Pair *x = static_cast<const Pair *>(a);
	const Pair *y = static_cast<const Pair *>(b);

	if (x->job_id != y->job_id)
		return x->job_id < y->job_id ? -1 : 1;
	if (x->run_lease != y->run_lease)
		return x->run_lease < y->run_lease ? -1 : 1;
	return x->n < y->n ? -1 : (x->n > y->n ? 1 : 0);
}

/* Order of receipts to lock: receipt_base, the order of every exit that closes several. */
int
lock_order(const void *a, const void *b)
{
	const Receipt *x = *static_cast<Receipt *const *>(a);
	const Receipt *y = *static_cast<Receipt *const *>(b);

	return x->receipt_base < y->receipt_base ? -1 : (x->receipt_base > y->receipt_base ? 1 : 0);
}

/* Compare two text values bytewise, then by length. */
int
text_order(text *a, text *b)
{
	int la = VARSIZE_ANY_EXHDR(a);
	int lb = VARSIZE_ANY_EXHDR(b);
	int c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	return c != 0 ? c : (la < lb ? -1 : (la > lb ? 1 : 0));
}

/* Order of completion batches: (ready_slot, generation, queue, priority, shard, block), then lane_seq. */
int
batch_order(const void *a, const void *b)
{
	const Receipt *x = *static_cast<Receipt *const *>(a);
	const Receipt *y = *static_cast<Receipt *const *>(b);
	int c;

	if (x->ready_slot != y->ready_slot)
		return x->ready_slot < y->ready_slot ? -1 : 1;
	if (x->ready_generation != y->ready_generation)
		return x->ready_generation < y->ready_generation ? -1 : 1;
	if ((c = text_order(x->queue, y->queue)) != 0)
		return c;
	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	if (x->enqueue_shard != y->enqueue_shard)
		return x->enqueue_shard < y->enqueue_shard ? -1 : 1;
	return x->lane_seq < y->lane_seq ? -1 : (x->lane_seq > y->lane_seq ? 1 : 0);
}

/* Order of the result: (queue, enqueue_shard, job_id), as the statement returned it. */
int
done_order(const void *a, const void *b)
{
	const DirectCompleted *x = static_cast<const DirectCompleted *>(a);
	const DirectCompleted *y = static_cast<const DirectCompleted *>(b);
	int c = text_order(x->queue, y->queue);

	if (c != 0)
		return c;
	if (x->enqueue_shard != y->enqueue_shard)
		return x->enqueue_shard < y->enqueue_shard ? -1 : 1;
	return x->job_id < y->job_id ? -1 : (x->job_id > y->job_id ? 1 : 0);
}

/* Whether the caller (the functions' owner) has `mode` on awa.<table>. */
bool
may(const char *table, AclMode mode)
{
	Oid relid = get_relname_relid(table, get_namespace_oid("awa", false));

	return OidIsValid(relid) && has_all_privileges(relid, mode);
}

/*
 * Whether every column of a completion_batches partition is one this file fills, with its
 * type; map[a] is the BatchColumn of attribute a + 1 (-1: dropped).
 */
bool
map_batch_columns(Relation rel, int *map)
{
	TupleDesc desc = RelationGetDescr(rel);
	int mapped = 0;

	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		map[a] = -1;
		if (att->attisdropped)
			continue;
		for (int c = 0; c < BC_NCOLUMNS && map[a] < 0; c++)
			if (strcmp(NameStr(att->attname), kBatchColumns[c].name) == 0 && att->atttypid == kBatchColumns[c].type &&
				att->atttypmod < 0)
				map[a] = c;
		if (map[a] < 0)
			return false;
		mapped++;
	}
	if (rel->rd_att->constr != nullptr && rel->rd_att->constr->has_generated_stored)
		return false;
	return mapped == BC_NCOLUMNS;
}

/* The partitions of completion_batches on the queue arc, opened for inserts. */
struct BatchTarget
{
	Part part;
	int *map;
	ResultRelInfo *rri;
};

/* Build int8[] / text[] arrays of n values. */
ArrayType *
int8_array(const Datum *values, int n)
{
	return construct_array(const_cast<Datum *>(values), n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

ArrayType *
text_array(const Datum *values, int n)
{
	return construct_array(const_cast<Datum *>(values), n, TEXTOID, -1, false, TYPALIGN_INT);
}

/* Run a tail delete (SPI connected) on the latest committed state. */
void
run_tail_delete(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *types, Datum *values, const char *what)
{
	keep_generic_plan(plan, sql, nargs, types);
	exec_plan_latest(*plan, values, nullptr, false, 0, SPI_OK_DELETE, what);
}

/*
 * What one direct pass over receipts opens and finds: the parents, the live partitions with
 * the indexes probed, the distinct sorted pairs, and the receipts found for them.
 */
struct Pass
{
	Relation ready_parent;
	Relation claim_parent;
	Relation done_parent;
	Relation batches_parent;
	Relation closures_parent;
	Relation state_rel;
	Relation state_index;
	int nready;
	int nclaim;
	int max_slot;
	int *ready_slots;
	int *claim_slots;
	Part *ready_parts;
	Part *claim_parts;
	BatchTarget *targets;
	Pair *pairs;
	int npairs;
	bool *found;
	Receipt *receipts;
	int nreceipts;
};

/* Close everything a pass opened (the locks stay to the end of the transaction). */
void
close_pass(Pass *pass)
{
	for (int k = 0; k < pass->nready; k++)
	{
		close_part(&pass->ready_parts[k]);
		close_part(&pass->targets[k].part);
	}
	for (int k = 0; k < pass->nclaim; k++)
		close_part(&pass->claim_parts[k]);
	if (pass->state_index != nullptr)
		index_close(pass->state_index, NoLock);
	table_close(pass->state_rel, NoLock);
	table_close(pass->closures_parent, NoLock);
	table_close(pass->batches_parent, NoLock);
	table_close(pass->done_parent, NoLock);
	table_close(pass->claim_parent, NoLock);
	table_close(pass->ready_parent, NoLock);
}

/*
 * Open the tables of a pass on the live arcs, the parents first, each in the statement's
 * mode: `completing` for a completion (claim batches RowShareLock for FOR UPDATE,
 * completion_batches RowExclusiveLock, and the privileges and columns its writes need), else
 * for a heartbeat (reads only). False, every table closed and nothing read, when the
 * statements must run instead (see the file comment).
 */
bool
open_pass(Pass *pass, const int queue_arc[4], const int claim_arc[4], bool completing)
{
	bool ok;

	memset(pass, 0, sizeof(*pass));
	/* Under Citus the tables here are shells: statements reach the shards, direct access would not. */
	if (citus_present() || XactReadOnly)
		return false;
	if (!may("ready_entries", ACL_SELECT) || !may("claim_batches", ACL_SELECT | (completing ? ACL_UPDATE : 0)) ||
		!may("done_entries", ACL_SELECT) || !may("completion_batches", ACL_SELECT | (completing ? ACL_INSERT : 0)) ||
		!may("lease_claim_closures", ACL_SELECT) || !may("attempt_state", ACL_SELECT))
		return false;

	pass->nready = arc_size(queue_arc);
	pass->nclaim = arc_size(claim_arc);
	pass->ready_parent = table_open(awa_relation("ready_entries"), AccessShareLock);
	pass->claim_parent = table_open(awa_relation("claim_batches"), completing ? RowShareLock : AccessShareLock);
	pass->done_parent = table_open(awa_relation("done_entries"), AccessShareLock);
	pass->batches_parent =
		table_open(awa_relation("completion_batches"), completing ? RowExclusiveLock : AccessShareLock);
	pass->closures_parent = table_open(awa_relation("lease_claim_closures"), AccessShareLock);
	pass->state_rel = table_open(awa_relation("attempt_state"), AccessShareLock);
	ok = !needs_planned_statement(pass->ready_parent) && !needs_planned_statement(pass->claim_parent) &&
		 !needs_planned_statement(pass->done_parent) && !needs_planned_statement(pass->batches_parent) &&
		 !needs_planned_statement(pass->closures_parent) && !needs_planned_statement(pass->state_rel);

	pass->ready_slots = static_cast<int *>(palloc(sizeof(int) * (pass->nready + 1)));
	pass->claim_slots = static_cast<int *>(palloc(sizeof(int) * (pass->nclaim + 1)));
	arc_slots(queue_arc, pass->ready_slots);
	arc_slots(claim_arc, pass->claim_slots);
	pass->ready_parts = static_cast<Part *>(palloc0(sizeof(Part) * (pass->nready + 1)));
	pass->claim_parts = static_cast<Part *>(palloc0(sizeof(Part) * (pass->nclaim + 1)));
	pass->targets = static_cast<BatchTarget *>(palloc0(sizeof(BatchTarget) * (pass->nready + 1)));
	for (int k = 0; k < pass->nready; k++)
		pass->max_slot = Max(pass->max_slot, pass->ready_slots[k]);
	for (int k = 0; k < pass->nclaim; k++)
		pass->max_slot = Max(pass->max_slot, pass->claim_slots[k]);
	if (ok)
	{
		Oid state_key = find_index(pass->state_rel, kAttemptStateKey, lengthof(kAttemptStateKey));

		ok = OidIsValid(state_key);
		if (ok)
			pass->state_index = index_open(state_key, AccessShareLock);
		ok = ok && pass->state_index->rd_rel->relam == BTREE_AM_OID;
	}
	for (int k = 0; ok && k < pass->nready; k++)
		ok = open_part("ready_entries_", pass->ready_slots[k], AccessShareLock, kJobIndex, 1, &pass->ready_parts[k]);
	for (int k = 0; ok && k < pass->nclaim; k++)
		ok = open_part("claim_batches_", pass->claim_slots[k], completing ? RowShareLock : AccessShareLock, kBlockIndex,
					   5, &pass->claim_parts[k]);
	for (int k = 0; ok && k < pass->nready; k++)
	{
		BatchTarget *t = &pass->targets[k];

		/* Read here; the partition a batch goes to is locked for writing only then, as tuple routing does. */
		ok = open_part("completion_batches_", pass->ready_slots[k], AccessShareLock, kBlockIndex, 5, &t->part);
		if (ok && completing)
		{
			t->map = static_cast<int *>(palloc(sizeof(int) * (RelationGetDescr(t->part.rel)->natts + 1)));
			ok = !needs_planned_statement(t->part.rel) && t->part.rel->rd_rel->relkind == RELKIND_RELATION &&
				 map_batch_columns(t->part.rel, t->map);
		}
	}
	if (!ok)
		close_pass(pass);
	return ok;
}

/*
 * Whether the pair arrays (and the values aligned with them, when given) are what the
 * statements' unnest reads as pairs: no NULL id or lease, one length.
 */
bool
pairs_usable(ArrayType *ids, ArrayType *leases, ArrayType *values)
{
	int n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));

	return !array_contains_nulls(ids) && !array_contains_nulls(leases) &&
		   n == ArrayGetNItems(ARR_NDIM(leases), ARR_DIMS(leases)) &&
		   (values == nullptr || n == ArrayGetNItems(ARR_NDIM(values), ARR_DIMS(values)));
}

/*
 * The pairs of the call into the pass: distinct, sorted, each with the value given for it
 * (results: a completion's, the first given for a pair wins; progress, with `last_wins`: a
 * report's, the last given wins, as the progress statement's DISTINCT ON).
 */
void
read_pairs(Pass *pass, ArrayType *ids, ArrayType *leases, ArrayType *results, bool last_wins)
{
	Datum *id_elems;
	Datum *lease_elems;
	Datum *result_elems = nullptr;
	bool *id_nulls;
	bool *lease_nulls;
	bool *result_nulls = nullptr;
	int n;
	int n_leases;
	int n_results;
	Pair *pairs;

	deconstruct_array(ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &id_elems, &id_nulls, &n);
	deconstruct_array(leases, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &lease_elems, &lease_nulls,
					  &n_leases);
	if (results != nullptr)
		deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT, &result_elems, &result_nulls, &n_results);
	pairs = static_cast<Pair *>(palloc(sizeof(Pair) * (n + 1)));
	for (int k = 0; k < n; k++)
	{
		/* The callers refused NULL elements and arrays of different lengths. */
		pairs[k].job_id = DatumGetInt64(id_elems[k]);
		pairs[k].run_lease = DatumGetInt64(lease_elems[k]);
		pairs[k].result = result_elems != nullptr ? result_elems[k] : (Datum)0;
		pairs[k].result_null = result_elems == nullptr || result_nulls[k];
		pairs[k].n = k;
	}
	qsort(pairs, n, sizeof(Pair), pair_order);
	pass->npairs = 0;
	for (int k = 0; k < n; k++)
		if (pass->npairs == 0 || pairs[k].job_id != pairs[pass->npairs - 1].job_id ||
			pairs[k].run_lease != pairs[pass->npairs - 1].run_lease)
			pairs[pass->npairs++] = pairs[k];
		else if (last_wins)
			pairs[pass->npairs - 1] = pairs[k];
	pass->pairs = pairs;
	pass->found = static_cast<bool *>(palloc0(sizeof(bool) * (pass->npairs + 1)));
	pass->receipts = static_cast<Receipt *>(palloc0(sizeof(Receipt) * (pass->npairs + 1)));
	pass->nreceipts = 0;
}

/*
 * A lane block of a ready slot: the key of the block indexes of claim_batches and
 * completion_batches (queue, priority, enqueue_shard, lane_block, ready_slot). The receipts
 * of one completion mostly share a few blocks (a claim takes a run of one lane), so what a
 * block holds is read once per pass and snapshot, not once per receipt.
 */
struct BlockKey
{
	text *queue;
	int16 priority;
	int16 enqueue_shard;
	int64 block;
	int32 ready_slot;
};

/* The block of a receipt's attempt. */
BlockKey
block_of(const Receipt *r)
{
	return {r->queue, r->priority, r->enqueue_shard, r->lane_seq / 64, r->ready_slot};
}

/* Whether two block keys are the same block. */
bool
same_block(const BlockKey &a, const BlockKey &b)
{
	return a.block == b.block && a.ready_slot == b.ready_slot && a.priority == b.priority &&
		   a.enqueue_shard == b.enqueue_shard && text_equal(a.queue, b.queue);
}

/* The equality keys of a block index (claim_batches or completion_batches) for `key`. */
void
block_keys(ScanKey keys, Relation index, const BlockKey &key)
{
	eq_key(&keys[0], index, 1, F_TEXTEQ, PointerGetDatum(key.queue));
	eq_key(&keys[1], index, 2, F_INT2EQ, Int16GetDatum(key.priority));
	eq_key(&keys[2], index, 3, F_INT2EQ, Int16GetDatum(key.enqueue_shard));
	eq_key(&keys[3], index, 4, F_INT8EQ, Int64GetDatum(key.block));
	eq_key(&keys[4], index, 5, F_INT4EQ, Int32GetDatum(key.ready_slot));
}

/*
 * The blocks a pass read most recently, each with what it found there (T has a `key`);
 * the oldest is replaced when all are taken. Pairs come sorted by job id: the blocks of the
 * lanes of one claim interleave, so a few entries hold them all.
 */
template <typename T> struct RecentBlocks
{
	static constexpr int kEntries = 16;
	T entries[kEntries];
	int used; /* zeroed with the struct (palloc0) */
	int next;

	/* The entry of `key`, or nullptr when it has not been read. */
	T *find(const BlockKey &key)
	{
		for (int k = 0; k < used; k++)
			if (same_block(entries[k].key, key))
				return &entries[k];
		return nullptr;
	}

	/* A cleared entry for `key`, replacing the oldest when every entry is taken. */
	T *add(const BlockKey &key)
	{
		T *e = &entries[next];

		next = (next + 1) % kEntries;
		used = Max(used, next == 0 ? kEntries : next);
		memset(e, 0, sizeof(T));
		e->key = key;
		return e;
	}
};

/* A claim batch of a block: where it is, its generation, its offsets, and what a receipt takes from it. */
struct ClaimedBatch
{
	Part *claim;
	ItemPointerData tid;
	int64 generation;
	uint64 offsets;
	int32 claim_slot;
	int64 receipt_base;
	TimestampTz claimed_at;
};

/* The claim batches of one block on every live claim partition. */
struct ClaimBlock
{
	BlockKey key;
	ClaimedBatch *batches;
	int n;
};

/*
 * The claim batch holding the receipt's attempt (its generation, its offset), from the
 * block's batches on every live claim partition, read once per block on the scans' snapshot;
 * nullptr when none holds it.
 */
const ClaimedBatch *
claimed_batch(Pass *pass, RecentBlocks<ClaimBlock> *blocks, IndexScanDesc *scans, AttrNumber (*atts)[CA_N],
			  const Receipt *r)
{
	BlockKey key = block_of(r);
	ClaimBlock *b = blocks->find(key);

	if (b == nullptr)
	{
		int cap = 4;

		b = blocks->add(key);
		b->batches = static_cast<ClaimedBatch *>(palloc(sizeof(ClaimedBatch) * cap));
		for (int c = 0; c < pass->nclaim; c++)
		{
			Part *cp = &pass->claim_parts[c];
			ScanKeyData keys[5];

			block_keys(keys, cp->index, key);
			index_rescan(scans[c], keys, 5, nullptr, 0);
			while (index_getnext_slot(scans[c], ForwardScanDirection, cp->row))
			{
				if (b->n == cap)
				{
					cap *= 2;
					b->batches = static_cast<ClaimedBatch *>(repalloc(b->batches, sizeof(ClaimedBatch) * cap));
				}
				b->batches[b->n++] = {cp,
									  cp->row->tts_tid,
									  DatumGetInt64(column(cp->row, atts[c][CA_READY_GENERATION])),
									  offset_bits(column(cp->row, atts[c][CA_LANE_OFFSETS])),
									  DatumGetInt32(column(cp->row, atts[c][CA_CLAIM_SLOT])),
									  DatumGetInt64(column(cp->row, atts[c][CA_RECEIPT_BASE])),
									  DatumGetTimestampTz(column(cp->row, atts[c][CA_CLAIMED_AT]))};
			}
		}
	}
	for (int k = 0; k < b->n; k++)
		if (b->batches[k].generation == r->ready_generation && has_offset(b->batches[k].offsets, r->lane_seq))
			return &b->batches[k];
	return nullptr;
}

/*
 * Each pair's receipt on `snapshot`: its ready row by the job index of every live ready
 * partition (run_lease + 1, and the queue when one is given), then its claim batch by the
 * block index of every live claim partition, the attempt at its offset's position.
 */
void
find_receipts(Pass *pass, text *queue, Snapshot snapshot)
{
	int nready = pass->nready;
	int nclaim = pass->nclaim;
	IndexScanDesc *ready_scans = static_cast<IndexScanDesc *>(palloc(sizeof(IndexScanDesc) * (nready + 1)));
	IndexScanDesc *claim_scans = static_cast<IndexScanDesc *>(palloc(sizeof(IndexScanDesc) * (nclaim + 1)));
	AttrNumber(*ready_atts)[RA_N] = static_cast<AttrNumber(*)[RA_N]>(palloc(sizeof(AttrNumber[RA_N]) * (nready + 1)));
	AttrNumber(*claim_atts)[CA_N] = static_cast<AttrNumber(*)[CA_N]>(palloc(sizeof(AttrNumber[CA_N]) * (nclaim + 1)));
	RecentBlocks<ClaimBlock> *claims =
		static_cast<RecentBlocks<ClaimBlock> *>(palloc0(sizeof(RecentBlocks<ClaimBlock>)));
	int last_ready = 0;

	for (int k = 0; k < nready; k++)
		for (int a = 0; a < RA_N; a++)
			ready_atts[k][a] = attnum_of(pass->ready_parts[k].rel, kReadyAttrs[a]);
	for (int k = 0; k < nclaim; k++)
		for (int a = 0; a < CA_N; a++)
			claim_atts[k][a] = attnum_of(pass->claim_parts[k].rel, kClaimAttrs[a]);
	for (int k = 0; k < nready; k++)
		ready_scans[k] = index_beginscan(pass->ready_parts[k].rel, pass->ready_parts[k].index, snapshot, 1, 0);
	for (int k = 0; k < nclaim; k++)
		claim_scans[k] = index_beginscan(pass->claim_parts[k].rel, pass->claim_parts[k].index, snapshot, 5, 0);

	for (int p = 0; p < pass->npairs; p++)
	{
		const Pair &pair = pass->pairs[p];

		/* The partition of the last receipt found first: a completion's jobs mostly share one. */
		for (int i = 0; i < nready && !pass->found[p]; i++)
		{
			int k = (last_ready + i) % nready;
			Part *rp = &pass->ready_parts[k];
			ScanKeyData key;
			TupleTableSlot *rs = rp->row;
			const AttrNumber *att = ready_atts[k];

			eq_key(&key, rp->index, 1, F_INT8EQ, Int64GetDatum(pair.job_id));
			index_rescan(ready_scans[k], &key, 1, nullptr, 0);
			while (!pass->found[p] && index_getnext_slot(ready_scans[k], ForwardScanDirection, rs))
			{
				Receipt *r = &pass->receipts[pass->nreceipts];
				bool key_null;
				bool states_null;
				Datum unique_states;
				const ClaimedBatch *b;

				if (DatumGetInt64(column(rs, att[RA_JOB_ID])) != pair.job_id ||
					DatumGetInt64(column(rs, att[RA_RUN_LEASE])) + 1 != pair.run_lease)
					continue;
				r->queue = DatumGetTextPP(column(rs, att[RA_QUEUE]));
				if (queue != nullptr && !text_equal(r->queue, queue))
					continue;
				r->queue = static_cast<text *>(PG_DETOAST_DATUM_COPY(PointerGetDatum(r->queue)));
				r->pair = p;
				r->ready = rp;
				r->ready_tid = rs->tts_tid;
				r->priority = DatumGetInt16(column(rs, att[RA_PRIORITY]));
				r->enqueue_shard = DatumGetInt16(column(rs, att[RA_ENQUEUE_SHARD]));
				r->lane_seq = DatumGetInt64(column(rs, att[RA_LANE_SEQ]));
				r->ready_slot = DatumGetInt32(column(rs, att[RA_READY_SLOT]));
				r->ready_generation = DatumGetInt64(column(rs, att[RA_READY_GENERATION]));
				(void)column(rs, att[RA_UNIQUE_KEY], &key_null);
				unique_states = column(rs, att[RA_UNIQUE_STATES], &states_null);
				/* As `unique_key IS NOT NULL AND NOT job_state_in_bitmask(unique_states, 'completed')` (strict). */
				r->release_unique = !key_null && !states_null && !mask_has_state(unique_states, "completed");

				b = claimed_batch(pass, claims, claim_scans, claim_atts, r);
				if (b == nullptr)
					continue;
				r->claim = b->claim;
				r->batch_tid = b->tid;
				r->claim_slot = b->claim_slot;
				r->receipt_base = b->receipt_base;
				r->claimed_at = b->claimed_at;
				r->locked = true; /* until a completion's lock says otherwise */
				pass->found[p] = true;
				pass->nreceipts++;
				last_ready = k;
			}
		}
	}
	for (int k = 0; k < nready; k++)
		index_endscan(ready_scans[k]);
	for (int k = 0; k < nclaim; k++)
		index_endscan(claim_scans[k]);
}

/*
 * Lock the claim batches of the receipts found (FOR UPDATE) in receipt_base order, each
 * once, as ExecLockRows locks a row: a batch deleted meanwhile is skipped under READ
 * COMMITTED (its receipts are gone) and raises 40001 under REPEATABLE READ and SERIALIZABLE.
 */
void
lock_batches(Pass *pass, Receipt **order)
{
	for (int k = 0; k < pass->nreceipts; k++)
		order[k] = &pass->receipts[k];
	qsort(order, pass->nreceipts, sizeof(Receipt *), lock_order);
	for (int k = 0; k < pass->nreceipts; k++)
	{
		Receipt *r = order[k];
		TM_FailureData tmfd;
		TM_Result result;
		TupleTableSlot *ls;

		if (k > 0 && order[k - 1]->claim == r->claim && ItemPointerEquals(&order[k - 1]->batch_tid, &r->batch_tid))
		{
			r->locked = order[k - 1]->locked;
			continue;
		}
		ls = table_slot_create(r->claim->rel, nullptr);
		result = table_tuple_lock(r->claim->rel, &r->batch_tid, GetActiveSnapshot(), ls, GetCurrentCommandId(true),
								  LockTupleExclusive, LockWaitBlock,
								  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		ExecDropSingleTupleTableSlot(ls);
		switch (result)
		{
		case TM_Ok:
			r->locked = true;
			break;
		case TM_SelfModified:
			/* Deleted by this transaction (a drop of the queue): no longer there. */
			r->locked = false;
			break;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
								errmsg("could not serialize access due to concurrent %s",
									   result == TM_Updated ? "update" : "delete")));
			/* Claim batches are never updated; deleted, the batch's receipts are gone. */
			r->locked = false;
			break;
		case TM_Invisible:
			elog(ERROR, "attempted to lock invisible tuple");
			break;
		default:
			elog(ERROR, "awa_shard: unexpected table_tuple_lock status: %d", static_cast<int>(result));
		}
	}
}

/* Whether the index probe `keys` of `part` on `snapshot` finds a row that `match` accepts (nullptr: any). */
bool
probe_finds(Part *part, Snapshot snapshot, ScanKey keys, int nkeys, bool (*match)(TupleTableSlot *, const void *),
			const void *arg)
{
	IndexScanDesc scan = index_beginscan(part->rel, part->index, snapshot, nkeys, 0);
	bool found = false;

	index_rescan(scan, keys, nkeys, nullptr, 0);
	while (!found && index_getnext_slot(scan, ForwardScanDirection, part->row))
		found = match == nullptr || match(part->row, arg);
	index_endscan(scan);
	return found;
}

/* An attempt named by a row of an index that leads with the job id (after equality columns). */
struct AttemptKey
{
	int64 job_id;
	int64 run_lease;
	text *queue;
	ItemPointerData tid;
};

/* The attempts an index holds for a range of job ids, in index order (job_id, run_lease). */
struct AttemptRange
{
	bool read; /* false: the range was too wide; probe each attempt instead */
	AttemptKey *keys;
	int n;
};

/*
 * Whether one range scan over job ids [lo, hi] reads less than `n` probes would: job ids
 * are dense, and an attempt-keyed index holds a row or two per job id at most, so a range
 * a few times `n` wide costs no more than the probes; a wider one (a completion naming
 * jobs far apart) is probed attempt by attempt.
 */
bool
range_is_narrow(int64 lo, int64 hi, int n)
{
	return hi >= lo && hi - lo <= 4 * static_cast<int64>(n) + 64;
}

/*
 * The attempts of index `index` of `rel` whose equality columns 1..neq equal `eq` and whose
 * job id (column neq + 1) is in [lo, hi], on `snapshot`: one range scan.
 */
AttemptRange
read_attempt_range(Relation rel, Relation index, TupleTableSlot *slot, Snapshot snapshot, const ScanKeyData *eq,
				   int neq, int64 lo, int64 hi)
{
	ScanKeyData keys[3];
	IndexScanDesc scan;
	AttrNumber job_att = attnum_of(rel, "job_id");
	AttrNumber lease_att = attnum_of(rel, "run_lease");
	AttrNumber queue_att = attnum_of(rel, "queue");
	int cap = 8;
	AttemptRange range = {true, static_cast<AttemptKey *>(palloc(sizeof(AttemptKey) * cap)), 0};

	for (int k = 0; k < neq; k++)
		keys[k] = eq[k];
	ScanKeyEntryInitialize(&keys[neq], 0, neq + 1, BTGreaterEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[neq], F_INT8GE, Int64GetDatum(lo));
	ScanKeyEntryInitialize(&keys[neq + 1], 0, neq + 1, BTLessEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[neq], F_INT8LE, Int64GetDatum(hi));
	scan = index_beginscan(rel, index, snapshot, neq + 2, 0);
	index_rescan(scan, keys, neq + 2, nullptr, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		if (range.n == cap)
		{
			cap *= 2;
			range.keys = static_cast<AttemptKey *>(repalloc(range.keys, sizeof(AttemptKey) * cap));
		}
		range.keys[range.n++] = {DatumGetInt64(column(slot, job_att)), DatumGetInt64(column(slot, lease_att)),
								 static_cast<text *>(PG_DETOAST_DATUM_COPY(column(slot, queue_att))), slot->tts_tid};
	}
	index_endscan(scan);
	return range;
}

/* The row of `range` (read) that names the attempt (job_id, run_lease, queue), or nullptr: a binary search. */
const AttemptKey *
range_row(const AttemptRange &range, int64 job_id, int64 run_lease, text *queue)
{
	int lo = 0;
	int hi = range.n;

	while (lo < hi)
	{
		int mid = (lo + hi) / 2;
		const AttemptKey &k = range.keys[mid];

		if (k.job_id < job_id || (k.job_id == job_id && k.run_lease < run_lease))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int k = lo; k < range.n && range.keys[k].job_id == job_id && range.keys[k].run_lease == run_lease; k++)
		if (text_equal(range.keys[k].queue, queue))
			return &range.keys[k];
	return nullptr;
}

/*
 * What the open test read of one block on its snapshot: the offsets that completion batches
 * name, by ready generation, and the terminal rows (done_entries) by offset.
 */
struct OpenBlock
{
	BlockKey key;
	bool batches_read;
	int64 *generations;
	uint64 *completed; /* completed[k]: the offsets named for generations[k] */
	int ngenerations;
	bool terminal_read;
	uint64 terminal; /* offsets with a terminal row, whose attempt is terminal_attempt[offset] */
	int64 terminal_job[64];
	int64 terminal_lease[64];
};

/* The open-test entry of the receipt's block (cleared when it has not been read). */
OpenBlock *
open_block(RecentBlocks<OpenBlock> *blocks, const Receipt *r)
{
	BlockKey key = block_of(r);
	OpenBlock *b = blocks->find(key);

	return b != nullptr ? b : blocks->add(key);
}

/* An empty set of open-test blocks, for one snapshot. */
RecentBlocks<OpenBlock> *
new_open_blocks()
{
	return static_cast<RecentBlocks<OpenBlock> *>(palloc0(sizeof(RecentBlocks<OpenBlock>)));
}

/*
 * Whether a completion batch names the receipt's attempt on `snapshot` (its ready slot's
 * partition): the block's batches are read once, their offsets merged by generation.
 */
bool
in_completion_batch(Pass *pass, RecentBlocks<OpenBlock> *blocks, const Receipt *r, Snapshot snapshot)
{
	OpenBlock *b = open_block(blocks, r);

	if (!b->batches_read)
	{
		Part *bp = nullptr;
		ScanKeyData keys[5];
		IndexScanDesc scan;
		AttrNumber generation_att;
		AttrNumber offsets_att;
		int cap = 2;

		for (int t = 0; t < pass->nready; t++)
			if (pass->targets[t].part.slot == r->ready_slot)
				bp = &pass->targets[t].part;
		if (bp == nullptr)
			elog(ERROR, "awa_shard: ready slot %d is not on the queue ring's live arc", r->ready_slot);
		generation_att = attnum_of(bp->rel, "ready_generation");
		offsets_att = attnum_of(bp->rel, "lane_offsets");
		b->generations = static_cast<int64 *>(palloc(sizeof(int64) * cap));
		b->completed = static_cast<uint64 *>(palloc(sizeof(uint64) * cap));
		block_keys(keys, bp->index, b->key);
		scan = index_beginscan(bp->rel, bp->index, snapshot, 5, 0);
		index_rescan(scan, keys, 5, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, bp->row))
		{
			int64 generation = DatumGetInt64(column(bp->row, generation_att));
			uint64 offsets = offset_bits(column(bp->row, offsets_att));
			int k = 0;

			while (k < b->ngenerations && b->generations[k] != generation)
				k++;
			if (k == b->ngenerations)
			{
				if (k == cap)
				{
					cap *= 2;
					b->generations = static_cast<int64 *>(repalloc(b->generations, sizeof(int64) * cap));
					b->completed = static_cast<uint64 *>(repalloc(b->completed, sizeof(uint64) * cap));
				}
				b->generations[k] = generation;
				b->completed[k] = 0;
				b->ngenerations++;
			}
			b->completed[k] |= offsets;
		}
		index_endscan(scan);
		b->batches_read = true;
	}
	for (int k = 0; k < b->ngenerations; k++)
		if (b->generations[k] == r->ready_generation)
			return has_offset(b->completed[k], r->lane_seq);
	return false;
}

/*
 * Whether a terminal row of the attempt (its job_id and run_lease at its lane_seq) is in
 * done partition `dp` on `snapshot`: the block's terminal rows are read once, by a range
 * scan of the primary key over the block's 64 lane sequences.
 */
bool
has_terminal_row(Part *dp, RecentBlocks<OpenBlock> *blocks, const Receipt *r, const Pair *pair, Snapshot snapshot)
{
	OpenBlock *b = open_block(blocks, r);
	int64 first = b->key.block * 64;
	int64 offset = r->lane_seq - first;

	if (!b->terminal_read)
	{
		ScanKeyData keys[5];
		IndexScanDesc scan;
		AttrNumber job_att = attnum_of(dp->rel, "job_id");
		AttrNumber lease_att = attnum_of(dp->rel, "run_lease");
		AttrNumber seq_att = attnum_of(dp->rel, "lane_seq");
		AttrNumber slot_att = attnum_of(dp->rel, "ready_slot");

		eq_key(&keys[0], dp->index, 1, F_TEXTEQ, PointerGetDatum(b->key.queue));
		eq_key(&keys[1], dp->index, 2, F_INT2EQ, Int16GetDatum(b->key.priority));
		eq_key(&keys[2], dp->index, 3, F_INT2EQ, Int16GetDatum(b->key.enqueue_shard));
		ScanKeyEntryInitialize(&keys[3], 0, 4, BTGreaterEqualStrategyNumber, InvalidOid, dp->index->rd_indcollation[3],
							   F_INT8GE, Int64GetDatum(first));
		ScanKeyEntryInitialize(&keys[4], 0, 4, BTLessStrategyNumber, InvalidOid, dp->index->rd_indcollation[3],
							   F_INT8LT, Int64GetDatum(first + 64));
		scan = index_beginscan(dp->rel, dp->index, snapshot, 5, 0);
		index_rescan(scan, keys, 5, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, dp->row))
		{
			int64 at = DatumGetInt64(column(dp->row, seq_att)) - first;

			if (DatumGetInt32(column(dp->row, slot_att)) != b->key.ready_slot || at < 0 || at >= 64)
				continue;
			b->terminal |= UINT64CONST(1) << at;
			b->terminal_job[at] = DatumGetInt64(column(dp->row, job_att));
			b->terminal_lease[at] = DatumGetInt64(column(dp->row, lease_att));
		}
		index_endscan(scan);
		b->terminal_read = true;
	}
	return offset >= 0 && offset < 64 && ((b->terminal >> offset) & 1) != 0 &&
		   b->terminal_job[offset] == pair->job_id && b->terminal_lease[offset] == pair->run_lease;
}

/*
 * The open test of every receipt found (and still locked) on `snapshot`: its ready row is
 * visible (with `recheck_ready`, when the snapshot is newer than the one it was found on),
 * and no terminal row, completion batch entry or closure names the attempt, each read in
 * the one live partition that can hold it (awa._open_receipts): terminal rows and
 * completion batches once per block (`blocks`, on this snapshot), the closures of a claim
 * slot by one range scan over the receipts' job ids (a probe per receipt when they are far
 * apart).
 */
void
test_open(Pass *pass, RecentBlocks<OpenBlock> *blocks, Snapshot snapshot, bool recheck_ready)
{
	int nslots = pass->max_slot + 1;
	Part *done_parts = static_cast<Part *>(palloc0(sizeof(Part) * nslots));
	Part *closure_parts = static_cast<Part *>(palloc0(sizeof(Part) * nslots));
	IndexScanDesc *closure_scans = static_cast<IndexScanDesc *>(palloc0(sizeof(IndexScanDesc) * nslots));
	AttemptRange *closures = static_cast<AttemptRange *>(palloc0(sizeof(AttemptRange) * nslots));
	int64 *lo = static_cast<int64 *>(palloc(sizeof(int64) * nslots));
	int64 *hi = static_cast<int64 *>(palloc(sizeof(int64) * nslots));
	int *count = static_cast<int *>(palloc0(sizeof(int) * nslots));

	for (int k = 0; k < pass->nreceipts; k++)
	{
		const Receipt *r = &pass->receipts[k];
		int64 job_id = pass->pairs[r->pair].job_id;

		if (!r->locked)
			continue;
		lo[r->claim_slot] = count[r->claim_slot] == 0 ? job_id : Min(lo[r->claim_slot], job_id);
		hi[r->claim_slot] = count[r->claim_slot] == 0 ? job_id : Max(hi[r->claim_slot], job_id);
		count[r->claim_slot]++;
	}
	for (int k = 0; k < pass->nreceipts; k++)
	{
		Receipt *r = &pass->receipts[k];
		const Pair *pair = &pass->pairs[r->pair];
		Part *dp = &done_parts[r->ready_slot];
		Part *xp = &closure_parts[r->claim_slot];
		ScanKeyData keys[4];

		r->open = false;
		if (!r->locked)
			continue;
		/* Ready rows are never updated: the version found is the row. */
		if (recheck_ready && !table_tuple_fetch_row_version(r->ready->rel, &r->ready_tid, snapshot, r->ready->row))
			continue;
		if (dp->rel == nullptr && !open_part("done_entries_", r->ready_slot, AccessShareLock, kDoneKey, 5, dp))
			elog(ERROR, "awa_shard: the primary key of awa.done_entries_%d is missing", r->ready_slot);
		if (has_terminal_row(dp, blocks, r, pair, snapshot))
			continue;
		if (!r->batch_checked && in_completion_batch(pass, blocks, r, snapshot))
			continue;
		if (xp->rel == nullptr)
		{
			if (!open_part("lease_claim_closures_", r->claim_slot, AccessShareLock, kClosureKey, 4, xp))
				elog(ERROR, "awa_shard: the primary key of awa.lease_claim_closures_%d is missing", r->claim_slot);
			eq_key(&keys[0], xp->index, 1, F_INT4EQ, Int32GetDatum(r->claim_slot));
			if (range_is_narrow(lo[r->claim_slot], hi[r->claim_slot], count[r->claim_slot]))
				closures[r->claim_slot] = read_attempt_range(xp->rel, xp->index, xp->row, snapshot, keys, 1,
															 lo[r->claim_slot], hi[r->claim_slot]);
			else
				closure_scans[r->claim_slot] = index_beginscan(xp->rel, xp->index, snapshot, 4, 0);
		}
		if (closures[r->claim_slot].read)
		{
			if (range_row(closures[r->claim_slot], pair->job_id, pair->run_lease, r->queue) != nullptr)
				continue;
		}
		else
		{
			eq_key(&keys[0], xp->index, 1, F_INT4EQ, Int32GetDatum(r->claim_slot));
			eq_key(&keys[1], xp->index, 2, F_INT8EQ, Int64GetDatum(pair->job_id));
			eq_key(&keys[2], xp->index, 3, F_INT8EQ, Int64GetDatum(pair->run_lease));
			eq_key(&keys[3], xp->index, 4, F_TEXTEQ, PointerGetDatum(r->queue));
			index_rescan(closure_scans[r->claim_slot], keys, 4, nullptr, 0);
			if (index_getnext_slot(closure_scans[r->claim_slot], ForwardScanDirection, xp->row))
				continue;
		}
		r->open = true;
	}
	for (int s = 0; s < nslots; s++)
	{
		if (closure_scans[s] != nullptr)
			index_endscan(closure_scans[s]);
		close_part(&done_parts[s]);
		close_part(&closure_parts[s]);
	}
}

/*
 * Append the open receipts (order[0..nopen), sorted by batch_order) as completion batches,
 * one per (ready slot, generation, lane, block of 64), each inserted into its partition
 * with constraints and index entries; the partition is locked for writing first.
 */
void
insert_batches(Pass *pass, Receipt **order, int nopen)
{
	EState *estate = CreateExecutorState();
	List *rtable = NIL;
	TupleTableSlot **slots = static_cast<TupleTableSlot **>(palloc0(sizeof(TupleTableSlot *) * (pass->nready + 1)));

	for (int t = 0; t < pass->nready; t++)
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);

		rte->rtekind = RTE_RELATION;
		rte->relid = RelationGetRelid(pass->targets[t].part.rel);
		rte->relkind = pass->targets[t].part.rel->rd_rel->relkind;
		rte->rellockmode = RowExclusiveLock;
		rtable = lappend(rtable, rte);
	}
	ExecInitRangeTable(estate, rtable);
	estate->es_output_cid = GetCurrentCommandId(true);
	for (int g = 0; g < nopen;)
	{
		Receipt *first = order[g];
		int end = g + 1;
		int t = 0;
		int count;
		bool any_result = false;
		Datum *offsets;
		Datum *claimed;
		Datum *res;
		bool *res_nulls;
		Datum row[BC_NCOLUMNS];
		bool row_nulls[BC_NCOLUMNS];
		TupleTableSlot *slot;
		BatchTarget *target;
		int dims[1];
		int lbs[1] = {1};

		while (end < nopen && order[end]->ready_slot == first->ready_slot &&
			   order[end]->ready_generation == first->ready_generation && text_equal(order[end]->queue, first->queue) &&
			   order[end]->priority == first->priority && order[end]->enqueue_shard == first->enqueue_shard &&
			   order[end]->lane_seq / 64 == first->lane_seq / 64)
			end++;
		count = end - g;
		offsets = static_cast<Datum *>(palloc(sizeof(Datum) * count));
		claimed = static_cast<Datum *>(palloc(sizeof(Datum) * count));
		res = static_cast<Datum *>(palloc(sizeof(Datum) * count));
		res_nulls = static_cast<bool *>(palloc(sizeof(bool) * count));
		for (int k = 0; k < count; k++)
		{
			Receipt *r = order[g + k];

			offsets[k] = Int16GetDatum(static_cast<int16>(r->lane_seq % 64));
			claimed[k] = TimestampTzGetDatum(r->claimed_at);
			res[k] = pass->pairs[r->pair].result;
			res_nulls[k] = pass->pairs[r->pair].result_null;
			any_result = any_result || !res_nulls[k];
		}
		dims[0] = count;
		row[BC_READY_SLOT] = Int32GetDatum(first->ready_slot);
		row[BC_READY_GENERATION] = Int64GetDatum(first->ready_generation);
		row[BC_QUEUE] = PointerGetDatum(first->queue);
		row[BC_PRIORITY] = Int16GetDatum(first->priority);
		row[BC_ENQUEUE_SHARD] = Int16GetDatum(first->enqueue_shard);
		row[BC_LANE_BLOCK] = Int64GetDatum(first->lane_seq / 64);
		row[BC_LANE_OFFSETS] =
			PointerGetDatum(construct_array(offsets, count, INT2OID, sizeof(int16), true, TYPALIGN_SHORT));
		row[BC_ATTEMPTED_AT] = PointerGetDatum(
			construct_array(claimed, count, TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		row[BC_FINALIZED_AT] = TimestampTzGetDatum(GetCurrentTimestamp()); /* the default, clock_timestamp() */
		row[BC_RESULTS] =
			any_result
				? PointerGetDatum(construct_md_array(res, res_nulls, 1, dims, lbs, JSONBOID, -1, false, TYPALIGN_INT))
				: (Datum)0;
		for (int c = 0; c < BC_NCOLUMNS; c++)
			row_nulls[c] = c == BC_RESULTS && !any_result;

		while (pass->targets[t].part.slot != first->ready_slot)
			t++;
		target = &pass->targets[t];
		if (target->rri == nullptr)
		{
			LockRelationOid(RelationGetRelid(target->part.rel), RowExclusiveLock);
			target->rri = makeNode(ResultRelInfo);
			InitResultRelInfo(target->rri, target->part.rel, t + 1, nullptr, 0);
			ExecOpenIndices(target->rri, false);
			slots[t] = ExecInitExtraTupleSlot(estate, RelationGetDescr(target->part.rel), &TTSOpsVirtual);
		}
		slot = slots[t];
		ExecClearTuple(slot);
		for (int a = 0; a < slot->tts_tupleDescriptor->natts; a++)
		{
			int c = target->map[a];

			slot->tts_values[a] = c >= 0 ? row[c] : (Datum)0;
			slot->tts_isnull[a] = c < 0 || row_nulls[c];
		}
		ExecStoreVirtualTuple(slot);
		if (target->part.rel->rd_att->constr != nullptr)
			ExecConstraints(target->rri, slot, estate);
		table_tuple_insert(target->part.rel, slot, estate->es_output_cid, 0, nullptr);
		if (target->rri->ri_NumIndices > 0)
			list_free(ExecInsertIndexTuples(target->rri, slot, estate, false, false, nullptr, NIL));
		ResetPerTupleExprContext(estate);
		g = end;
	}
	for (int t = 0; t < pass->nready; t++)
		if (pass->targets[t].rri != nullptr)
			ExecCloseIndices(pass->targets[t].rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	/* As after an SPI statement: later statements of the transaction see the rows. */
	CommandCounterIncrement();
}

/*
 * Delete the heartbeat row at `tid`, found on `snapshot`, as the statement's DELETE deletes it;
 * false when another transaction changed or deleted it since (the statement, which reads the
 * latest version, then deletes it).
 */
bool
delete_state_row(Relation rel, ItemPointer tid, Snapshot snapshot)
{
	TM_FailureData tmfd;

	return table_tuple_delete(rel, tid, GetCurrentCommandId(true), snapshot, InvalidSnapshot, true, &tmfd, false) ==
		   TM_Ok;
}

/*
 * The completed attempts' heartbeats and unique claims: the heartbeats read from the key of
 * attempt_state on `snapshot` (one range scan over the attempts' job ids, or a probe per
 * attempt when they are far apart) and deleted where they were found (with the statement's
 * lock, RowExclusiveLock; a row changed since, or a caller without DELETE on the table, leaves
 * it to a statement), a unique claim released by a statement when the ready row's mask does
 * not hold 'completed'.
 */
void
forget_heartbeats_and_claims(Pass *pass, Snapshot snapshot)
{
	int n = pass->nreceipts;
	Datum *hb_ids = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	Datum *hb_leases = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	Datum *hb_queues = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	Datum *uq_ids = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	Datum *uq_queues = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	int nhb = 0;
	int nuq = 0;
	int nopen = 0;
	int64 lo = 0;
	int64 hi = 0;
	TupleTableSlot *ss = table_slot_create(pass->state_rel, nullptr);
	IndexScanDesc scan = nullptr;
	AttemptRange states = {false, nullptr, 0};
	bool direct = may("attempt_state", ACL_DELETE);
	bool deleted = false;

	for (int k = 0; k < n; k++)
		if (pass->receipts[k].open)
		{
			int64 job_id = pass->pairs[pass->receipts[k].pair].job_id;

			lo = nopen == 0 ? job_id : Min(lo, job_id);
			hi = nopen == 0 ? job_id : Max(hi, job_id);
			nopen++;
		}
	if (nopen > 0 && range_is_narrow(lo, hi, nopen))
		states = read_attempt_range(pass->state_rel, pass->state_index, ss, snapshot, nullptr, 0, lo, hi);
	else if (nopen > 0)
		scan = index_beginscan(pass->state_rel, pass->state_index, snapshot, 3, 0);
	for (int k = 0; k < n; k++)
	{
		Receipt *r = &pass->receipts[k];
		const Pair *pair = &pass->pairs[r->pair];
		bool has_state;
		ItemPointerData tid;

		if (!r->open)
			continue;
		if (states.read)
		{
			const AttemptKey *row = range_row(states, pair->job_id, pair->run_lease, r->queue);

			has_state = row != nullptr;
			if (has_state)
				tid = row->tid;
		}
		else
		{
			ScanKeyData keys[3];

			eq_key(&keys[0], pass->state_index, 1, F_INT8EQ, Int64GetDatum(pair->job_id));
			eq_key(&keys[1], pass->state_index, 2, F_INT8EQ, Int64GetDatum(pair->run_lease));
			eq_key(&keys[2], pass->state_index, 3, F_TEXTEQ, PointerGetDatum(r->queue));
			index_rescan(scan, keys, 3, nullptr, 0);
			has_state = index_getnext_slot(scan, ForwardScanDirection, ss);
			if (has_state)
				tid = ss->tts_tid;
		}
		if (has_state && direct)
		{
			if (!deleted)
				LockRelationOid(RelationGetRelid(pass->state_rel), RowExclusiveLock);
			deleted = true;
			if (delete_state_row(pass->state_rel, &tid, snapshot))
				has_state = false;
		}
		if (has_state)
		{
			hb_ids[nhb] = Int64GetDatum(pair->job_id);
			hb_leases[nhb] = Int64GetDatum(pair->run_lease);
			hb_queues[nhb++] = PointerGetDatum(r->queue);
		}
		if (r->release_unique)
		{
			uq_ids[nuq] = Int64GetDatum(pair->job_id);
			uq_queues[nuq++] = PointerGetDatum(r->queue);
		}
	}
	if (scan != nullptr)
		index_endscan(scan);
	ExecDropSingleTupleTableSlot(ss);
	if (deleted)
		CommandCounterIncrement();
	if (nhb > 0)
	{
		static const Oid types[3] = {INT8ARRAYOID, INT8ARRAYOID, TEXTARRAYOID};
		Datum values[3] = {PointerGetDatum(int8_array(hb_ids, nhb)), PointerGetDatum(int8_array(hb_leases, nhb)),
						   PointerGetDatum(text_array(hb_queues, nhb))};

		run_tail_delete(&forget_heartbeats_plan, kForgetHeartbeatsSql, 3, types, values, "heartbeat removal");
	}
	if (nuq > 0)
	{
		static const Oid types[2] = {INT8ARRAYOID, TEXTARRAYOID};
		Datum values[2] = {PointerGetDatum(int8_array(uq_ids, nuq)), PointerGetDatum(text_array(uq_queues, nuq))};

		run_tail_delete(&release_unique_plan, kReleaseUniqueSql, 2, types, values, "unique claim release");
	}
}

/* The pairs without a receipt (with their results when `with_results`), for the statements. */
void
leftover_pairs(const Pass *pass, bool with_results, ArrayType **ids, ArrayType **leases, ArrayType **results,
			   int *nleft)
{
	Datum *left_ids = static_cast<Datum *>(palloc(sizeof(Datum) * (pass->npairs + 1)));
	Datum *left_leases = static_cast<Datum *>(palloc(sizeof(Datum) * (pass->npairs + 1)));
	Datum *left_results = static_cast<Datum *>(palloc(sizeof(Datum) * (pass->npairs + 1)));
	bool *left_nulls = static_cast<bool *>(palloc(sizeof(bool) * (pass->npairs + 1)));
	int n = 0;

	for (int p = 0; p < pass->npairs; p++)
	{
		if (pass->found[p])
			continue;
		left_ids[n] = Int64GetDatum(pass->pairs[p].job_id);
		left_leases[n] = Int64GetDatum(pass->pairs[p].run_lease);
		left_results[n] = pass->pairs[p].result;
		left_nulls[n++] = pass->pairs[p].result_null;
	}
	*nleft = n;
	*ids = *leases = *results = nullptr;
	if (n == 0)
		return;
	*ids = int8_array(left_ids, n);
	*leases = int8_array(left_leases, n);
	if (with_results)
	{
		int dims[1] = {n};
		int lbs[1] = {1};

		*results = construct_md_array(left_results, left_nulls, 1, dims, lbs, JSONBOID, -1, false, TYPALIGN_INT);
	}
}

/* The columns of attempt_state, as a first heartbeat or report fills them. */
const DirectColumn kAttemptStateColumns[] = {
	{"job_id", INT8OID},	{"run_lease", INT8OID},			{"heartbeat_at", TIMESTAMPTZOID},
	{"progress", JSONBOID}, {"updated_at", TIMESTAMPTZOID}, {"queue", TEXTOID}};

/*
 * Open attempt_state for the rows of first heartbeats and reports (direct_target_open's
 * rules, and the UPDATE privilege the upsert needs); false when the upsert must write all.
 */
bool
open_attempt_state_target(const Pass *pass, DirectTarget *target)
{
	return pass->state_index->rd_index->indisunique && may("attempt_state", ACL_INSERT | ACL_UPDATE) &&
		   direct_target_open(target, RelationGetRelid(pass->state_rel), RelationGetRelid(pass->state_rel),
							  kAttemptStateColumns, lengthof(kAttemptStateColumns));
}

/*
 * Upsert the heartbeat and progress of the attempts ($1, $2, $3 queue, $4 progress: NULL, or
 * NULL elements, keep the stored one), as the statements did.
 */
const char *const kHeartbeatUpsertSql =
	"INSERT INTO awa.attempt_state (job_id, run_lease, heartbeat_at, progress, updated_at, queue) "
	"SELECT t.job_id, t.run_lease, clock_timestamp(), t.progress, clock_timestamp(), t.queue "
	"  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::jsonb[]) AS t(job_id, run_lease, queue, progress) "
	"ON CONFLICT (job_id, run_lease, queue) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, "
	"  progress = coalesce(EXCLUDED.progress, awa.attempt_state.progress), updated_at = EXCLUDED.updated_at";
SPIPlanPtr heartbeat_upsert_plan = nullptr;

/* What the probes of a named attempt's ready row and claim batch compare a row with. */
struct NamedProbe
{
	const NamedAttempt *a;
	AttrNumber att[RA_N];
	AttrNumber generation; /* claim batch: ready_generation */
	AttrNumber offsets;	   /* claim batch: lane_offsets */
};

/* The ready row of a named attempt: its lane, generation, job and the run lease before the attempt. */
bool
is_named_ready_row(TupleTableSlot *slot, const void *arg)
{
	const NamedProbe *p = static_cast<const NamedProbe *>(arg);
	const NamedAttempt *a = p->a;

	return DatumGetInt64(column(slot, p->att[RA_JOB_ID])) == a->job_id &&
		   DatumGetInt64(column(slot, p->att[RA_RUN_LEASE])) + 1 == a->run_lease &&
		   text_equal(DatumGetTextPP(column(slot, p->att[RA_QUEUE])), a->queue) &&
		   DatumGetInt16(column(slot, p->att[RA_PRIORITY])) == a->priority &&
		   DatumGetInt16(column(slot, p->att[RA_ENQUEUE_SHARD])) == a->enqueue_shard &&
		   DatumGetInt64(column(slot, p->att[RA_LANE_SEQ])) == a->lane_seq &&
		   DatumGetInt64(column(slot, p->att[RA_READY_GENERATION])) == a->ready_generation;
}

/* A claim batch holding a named attempt: its ready generation, its offset in lane_offsets. */
bool
holds_named_attempt(TupleTableSlot *slot, const void *arg)
{
	const NamedProbe *p = static_cast<const NamedProbe *>(arg);

	return DatumGetInt64(column(slot, p->generation)) == p->a->ready_generation &&
		   has_offset(offset_bits(column(slot, p->offsets)), p->a->lane_seq);
}

/* The part of a pass's parts that holds `slot`, or nullptr when the slot is not on its arc. */
Part *
part_of_slot(Part *parts, int nparts, int slot)
{
	for (int k = 0; k < nparts; k++)
		if (parts[k].slot == slot)
			return &parts[k];
	return nullptr;
}

/*
 * The attempt_state rows of the open attempts (ids, leases, queues, progress of n, sorted by
 * pair), written as the upsert statement would write them: a first heartbeat or report
 * inserts its row speculatively (heartbeat and update times now, the progress given), a later
 * one locks the row and updates it in place (a NULL progress keeps the stored one). The
 * arrays are compacted to the attempts whose row changed or raced meanwhile, for the upsert
 * statement, and their number returned. Nothing is written where the statement must write
 * (direct_target_open's rules); the rows written are visible to the next command.
 */
int
write_attempt_states(const Pass *pass, int n, Datum *ids, Datum *leases, Datum *queues, Datum *progress, bool *nulls)
{
	static const bool keep_stored[6] = {false, false, false, true, false, false}; /* progress */
	DirectTarget target;
	TimestampTz now = GetCurrentTimestamp(); /* clock_timestamp(), as the upsert's */
	int left = 0;

	if (n == 0 || !open_attempt_state_target(pass, &target))
		return n;
	for (int k = 0; k < n; k++)
	{
		Datum values[6] = {ids[k],	 leases[k], TimestampTzGetDatum(now), progress[k], TimestampTzGetDatum(now),
						   queues[k]};
		bool value_nulls[6] = {false, false, false, nulls[k], false, false};

		if (direct_target_upsert(&target, values, value_nulls, keep_stored, RelationGetRelid(pass->state_index)))
			continue;
		ids[left] = ids[k];
		leases[left] = leases[k];
		queues[left] = queues[k];
		progress[left] = progress[k];
		nulls[left++] = nulls[k];
	}
	direct_target_close(&target);
	CommandCounterIncrement();
	return left;
}

} // namespace

/* Which named attempts hold an open receipt (see direct_complete.hpp). */
bool
direct_named_receipts_open(const NamedAttempt *attempts, int n, const int queue_arc[4], const int claim_arc[4],
						   Snapshot snapshot, bool *open)
{
	Pass pass;
	RecentBlocks<OpenBlock> *blocks = new_open_blocks();

	if (!open_pass(&pass, queue_arc, claim_arc, false))
		return false;
	pass.pairs = static_cast<Pair *>(palloc(sizeof(Pair) * (n + 1)));
	pass.npairs = n;
	pass.found = static_cast<bool *>(palloc0(sizeof(bool) * (n + 1)));
	pass.receipts = static_cast<Receipt *>(palloc0(sizeof(Receipt) * (n + 1)));
	pass.nreceipts = 0;
	for (int i = 0; i < n; i++)
	{
		const NamedAttempt &a = attempts[i];
		Part *rp = a.has_claim_slot ? part_of_slot(pass.ready_parts, pass.nready, a.ready_slot) : nullptr;
		Part *cp = rp != nullptr ? part_of_slot(pass.claim_parts, pass.nclaim, a.claim_slot) : nullptr;
		NamedProbe probe;
		ScanKeyData keys[5];
		Receipt *r;

		pass.pairs[i] = {a.job_id, a.run_lease, (Datum)0, true, i};
		open[i] = false;
		/* Off the live arcs (its slot pruned) or with no claim batch named: the attempt has ended. */
		if (cp == nullptr)
			continue;
		r = &pass.receipts[pass.nreceipts];
		r->pair = i;
		r->ready = rp;
		r->queue = a.queue;
		r->priority = a.priority;
		r->enqueue_shard = a.enqueue_shard;
		r->lane_seq = a.lane_seq;
		r->ready_slot = a.ready_slot;
		r->ready_generation = a.ready_generation;
		r->claim = cp;
		r->claim_slot = a.claim_slot;
		/*
		 * The completion batch first: most entries a count meets have been completed, and one
		 * probe tells (the test is a conjunction: its order does not change the answer).
		 */
		if (in_completion_batch(&pass, blocks, r, snapshot))
			continue;
		r->batch_checked = true;
		probe.a = &a;
		for (int c = 0; c < RA_N; c++)
			probe.att[c] = attnum_of(rp->rel, kReadyAttrs[c]);
		eq_key(&keys[0], rp->index, 1, F_INT8EQ, Int64GetDatum(a.job_id));
		if (!probe_finds(rp, snapshot, keys, 1, is_named_ready_row, &probe))
			continue;
		probe.generation = attnum_of(cp->rel, "ready_generation");
		probe.offsets = attnum_of(cp->rel, "lane_offsets");
		eq_key(&keys[0], cp->index, 1, F_TEXTEQ, PointerGetDatum(a.queue));
		eq_key(&keys[1], cp->index, 2, F_INT2EQ, Int16GetDatum(a.priority));
		eq_key(&keys[2], cp->index, 3, F_INT2EQ, Int16GetDatum(a.enqueue_shard));
		eq_key(&keys[3], cp->index, 4, F_INT8EQ, Int64GetDatum(a.lane_seq / 64));
		eq_key(&keys[4], cp->index, 5, F_INT4EQ, Int32GetDatum(a.ready_slot));
		if (!probe_finds(cp, snapshot, keys, 5, holds_named_attempt, &probe))
			continue;
		r->locked = true; /* nothing is locked: the test is on this one snapshot */
		pass.nreceipts++;
	}
	test_open(&pass, blocks, snapshot, false);
	for (int k = 0; k < pass.nreceipts; k++)
		open[pass.receipts[k].pair] = pass.receipts[k].open;
	close_pass(&pass);
	return true;
}

/* Complete the open receipts among the pairs directly (see the file comment). */
bool
direct_complete_receipts(ArrayType *ids, ArrayType *leases, ArrayType *results, text *queue, const int queue_arc[4],
						 const int claim_arc[4], DirectCompletion *out)
{
	Pass pass;
	Receipt **order;
	Snapshot snapshot;
	int nopen = 0;

	out->done = nullptr;
	out->ndone = 0;
	out->nleft = 0;
	out->left_ids = out->left_leases = out->left_results = nullptr;
	if (!pairs_usable(ids, leases, results) || !open_pass(&pass, queue_arc, claim_arc, true))
		return false;
	read_pairs(&pass, ids, leases, results, false);
	order = static_cast<Receipt **>(palloc(sizeof(Receipt *) * (pass.npairs + 1)));

	/* 1. Each pair's receipt on one copy of the latest snapshot; 2. their batches locked. */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	find_receipts(&pass, queue, snapshot);
	UnregisterSnapshot(snapshot);
	lock_batches(&pass, order);

	/* 3. On a snapshot taken after the locks: which receipts are still open. */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	test_open(&pass, new_open_blocks(), snapshot, true);

	/* 4. The open ones appended as completion batches. */
	for (int k = 0; k < pass.nreceipts; k++)
		if (pass.receipts[k].open)
			order[nopen++] = &pass.receipts[k];
	qsort(order, nopen, sizeof(Receipt *), batch_order);
	insert_batches(&pass, order, nopen);
	out->done = static_cast<DirectCompleted *>(palloc(sizeof(DirectCompleted) * (nopen + 1)));
	for (int k = 0; k < nopen; k++)
		out->done[k] = {pass.pairs[order[k]->pair].job_id, pass.pairs[order[k]->pair].run_lease, order[k]->queue,
						order[k]->enqueue_shard};
	out->ndone = nopen;
	qsort(out->done, nopen, sizeof(DirectCompleted), done_order);

	/* 5. Their heartbeats and unique claims. */
	forget_heartbeats_and_claims(&pass, snapshot);
	UnregisterSnapshot(snapshot);

	leftover_pairs(&pass, results != nullptr, &out->left_ids, &out->left_leases, &out->left_results, &out->nleft);
	close_pass(&pass);
	return true;
}

/* Record heartbeats (and progress) of the open receipts among the pairs directly (see direct_complete.hpp). */
bool
direct_heartbeat_receipts(ArrayType *ids, ArrayType *leases, ArrayType *progress, text *queue, const int queue_arc[4],
						  const int claim_arc[4], DirectHeartbeat *out)
{
	static const Oid types[4] = {INT8ARRAYOID, INT8ARRAYOID, TEXTARRAYOID, JSONBARRAYOID};
	Pass pass;
	Snapshot snapshot;
	Datum *alive_ids;
	Datum *alive_leases;
	Datum *alive_queues;
	Datum *alive_progress;
	bool *alive_nulls;
	bool any_progress = false;
	int nalive = 0;
	int nupsert;

	out->alive = 0;
	out->open = nullptr;
	out->nleft = 0;
	out->left_ids = out->left_leases = out->left_progress = nullptr;
	out->ran_statement = false;
	if (!pairs_usable(ids, leases, progress) || !open_pass(&pass, queue_arc, claim_arc, false))
		return false;
	read_pairs(&pass, ids, leases, progress, true);

	/* One snapshot, as the statement's: the receipts found and their open test. */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	find_receipts(&pass, queue, snapshot);
	test_open(&pass, new_open_blocks(), snapshot, false);
	UnregisterSnapshot(snapshot);

	alive_ids = static_cast<Datum *>(palloc(sizeof(Datum) * (pass.nreceipts + 1)));
	alive_leases = static_cast<Datum *>(palloc(sizeof(Datum) * (pass.nreceipts + 1)));
	alive_queues = static_cast<Datum *>(palloc(sizeof(Datum) * (pass.nreceipts + 1)));
	alive_progress = static_cast<Datum *>(palloc(sizeof(Datum) * (pass.nreceipts + 1)));
	alive_nulls = static_cast<bool *>(palloc(sizeof(bool) * (pass.nreceipts + 1)));
	out->open = static_cast<DirectAttempt *>(palloc(sizeof(DirectAttempt) * (pass.nreceipts + 1)));
	/* Receipts are found in pair order: the open ones come out sorted. */
	for (int k = 0; k < pass.nreceipts; k++)
	{
		const Receipt *r = &pass.receipts[k];
		const Pair *pair = &pass.pairs[r->pair];

		if (!r->open)
			continue;
		out->open[nalive] = {pair->job_id, pair->run_lease};
		alive_ids[nalive] = Int64GetDatum(pair->job_id);
		alive_leases[nalive] = Int64GetDatum(pair->run_lease);
		alive_queues[nalive] = PointerGetDatum(r->queue);
		alive_progress[nalive] = pair->result;
		alive_nulls[nalive] = pair->result_null;
		nalive++;
	}
	leftover_pairs(&pass, progress != nullptr, &out->left_ids, &out->left_leases, &out->left_progress, &out->nleft);
	nupsert = write_attempt_states(&pass, nalive, alive_ids, alive_leases, alive_queues, alive_progress, alive_nulls);
	close_pass(&pass);
	out->alive = nalive - nupsert;
	nalive = nupsert;

	/* attempt_state rows that changed or raced meanwhile: their upsert is a statement. */
	if (nalive > 0)
	{
		int dims[1] = {nalive};
		int lbs[1] = {1};
		Datum values[4] = {PointerGetDatum(int8_array(alive_ids, nalive)),
						   PointerGetDatum(int8_array(alive_leases, nalive)),
						   PointerGetDatum(text_array(alive_queues, nalive)), (Datum)0};
		char nulls[4] = {' ', ' ', ' ', 'n'};

		for (int k = 0; k < nalive; k++)
			any_progress = any_progress || !alive_nulls[k];
		/* No progress at all: a NULL array, which unnest reads as NULL elements. */
		if (any_progress)
		{
			values[3] = PointerGetDatum(
				construct_md_array(alive_progress, alive_nulls, 1, dims, lbs, JSONBOID, -1, false, TYPALIGN_INT));
			nulls[3] = ' ';
		}
		out->ran_statement = true;
		keep_generic_plan(&heartbeat_upsert_plan, kHeartbeatUpsertSql, 4, types);
		exec_plan_latest(heartbeat_upsert_plan, values, nulls, false, 0, SPI_OK_INSERT, "receipt heartbeat");
		if (SPI_processed != static_cast<uint64>(nalive))
			elog(ERROR, "awa_shard: the receipt heartbeat wrote %lu rows for %d attempts",
				 static_cast<unsigned long>(SPI_processed), nalive);
		out->alive += SPI_processed;
	}
	return true;
}

} // namespace awa
