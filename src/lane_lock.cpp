/*
 * lane_lock.cpp — the lock of a lane head and the read of a lane's cursor without planned
 * statements (D22; docs/design.md §4, "Direct drain").
 *
 * The lock does what ExecLockRows does for `SELECT 1 FROM awa.queue_claim_heads h WHERE
 * (queue, priority, enqueue_shard) = (...) FOR UPDATE SKIP LOCKED` run on the latest
 * snapshot: RowShareLock on the table and its primary key, the head found by an index scan on
 * a copy of the latest snapshot (after a command counter increment, as SPI gives a
 * non-read-only statement), then table_tuple_lock in LockTupleExclusive with LockWaitSkip.
 * At READ COMMITTED it follows the head's update chain to its latest version
 * (TUPLE_LOCK_FLAG_FIND_LAST_VERSION, the executor's EvalPlanQual case: the key columns it
 * re-checks never change); at REPEATABLE READ and SERIALIZABLE a head updated or deleted
 * since the snapshot raises 40001, as the executor does. A head another transaction holds is
 * skipped (TM_WouldBlock), and so is one this transaction changed in a later command, or one
 * deleted at READ COMMITTED.
 *
 * The cursor read does what `SELECT claim_seq FROM awa.lane_cursors` does for one lane: the
 * head's claim_seq by its primary key, the lane's latest claim mark by a backward scan of
 * the marks' primary key (down to the cursor this backend last read for the lane, when it
 * finds one there), the greater of the two, on one copy of the latest snapshot.
 */
#include "citus.hpp"
#include "direct_insert.hpp"
#include "head_wait.hpp"
#include "lane_key.hpp"
#include "lane_lock.hpp"

extern "C"
{
#include "access/genam.h"
#include "access/sysattr.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include <algorithm>
#include <cstring>

namespace awa
{

namespace
{

/* awa.<name> opened with `mode` when this user may read it (and, with `update`, update it) and it has no row security;
 * else nullptr. */
Relation
open_lane_table(const char *name, LOCKMODE mode, bool update)
{
	Oid relid;
	Relation rel;

	if (citus_present())
		return nullptr;
	relid = awa_relation(name);
	if (!has_all_privileges(relid, ACL_SELECT | (update ? ACL_UPDATE : 0)))
		return nullptr;
	rel = table_open(relid, mode);
	if (rel->rd_rel->relrowsecurity)
	{
		table_close(rel, NoLock);
		return nullptr;
	}
	return rel;
}

/* The lane's key columns, which lead the primary keys of the lane tables. */
const char *const kLaneColumns[3] = {"queue", "priority", "enqueue_shard"};
/* The primary key of awa.claim_marks. */
const char *const kMarkKey[4] = {"queue", "priority", "enqueue_shard", "claim_seq"};

/* Whether the primary key of `rel` leads with `names` (index_keys_are). */
bool
keys_lead(Relation rel, const char *const *names, int n)
{
	Relation index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	bool leads = index_keys_are(rel, index, names, n);

	index_close(index, NoLock);
	return leads;
}

/* Scan keys (queue, priority, enqueue_shard) equal on the first three columns of `index`. */
void
lane_keys(Relation index, text *queue, int16 priority, int16 shard, ScanKeyData keys[3])
{
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(queue));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1], F_INT2EQ,
						   Int16GetDatum(priority));
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[2], F_INT2EQ,
						   Int16GetDatum(shard));
}

/* Attribute number of column `name` of `rel`; a missing one is a broken install. */
AttrNumber
column_of(Relation rel, const char *name)
{
	TupleDesc desc = RelationGetDescr(rel);

	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped && strcmp(NameStr(TupleDescAttr(desc, a)->attname), name) == 0)
			return static_cast<AttrNumber>(a + 1);
	elog(ERROR, "awa_shard: column %s of awa.%s is missing", name, RelationGetRelationName(rel));
	return InvalidAttrNumber;
}

/*
 * The int8 column `name` of the first row the index scan of a lane finds in `direction`
 * (the lane's keys as the index's leading columns); false when there is none.
 */
bool
first_of_lane(Relation rel, Relation index, Snapshot snapshot, text *queue, int16 priority, int16 shard,
			  ScanDirection direction, const char *name, int64 *value)
{
	ScanKeyData keys[3];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool found;
	bool isnull;

	lane_keys(index, queue, priority, shard, keys);
	scan = index_beginscan(rel, index, snapshot, 3, 0);
	index_rescan(scan, keys, 3, nullptr, 0);
	slot = table_slot_create(rel, nullptr);
	found = index_getnext_slot(scan, direction, slot);
	if (found)
	{
		Datum d = slot_getattr(slot, column_of(rel, name), &isnull);

		found = !isnull;
		if (found)
			*value = DatumGetInt64(d);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/* A lane's latest cursor this backend read: the floor of its next probe of the lane's marks. */
struct MarkFloor
{
	LaneKey lane;
	int64 cursor;
};

HTAB *mark_floors = nullptr;

/* At most this many lanes remembered; past it the table starts again empty. */
constexpr long kMaxMarkFloors = 1024;

/* The remembered cursors, created on first use (and emptied when full). */
HTAB *
mark_floor_table()
{
	if (mark_floors != nullptr && hash_get_num_entries(mark_floors) >= kMaxMarkFloors)
	{
		hash_destroy(mark_floors);
		mark_floors = nullptr;
	}
	if (mark_floors == nullptr)
	{
		HASHCTL ctl;

		std::memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LaneKey);
		ctl.entrysize = sizeof(MarkFloor);
		ctl.hcxt = TopMemoryContext;
		mark_floors = hash_create("awa_shard claim mark floors", 64, &ctl,
								  HASH_ELEM | HASH_CONTEXT | use_lane_key_functions(&ctl));
	}
	return mark_floors;
}

/*
 * The lane's greatest claim mark at or above `floor` on `snapshot` (a backward scan of the
 * marks' primary key from the lane's end down to `floor`); false when there is none. The
 * floor ends the B-tree's page read there: without it the read checks every mark of the lane
 * on the last leaf page, up to a few hundred between two folds.
 */
bool
latest_mark_from(Relation marks, Relation index, Snapshot snapshot, text *queue, int16 priority, int16 shard,
				 int64 floor, int64 *mark)
{
	ScanKeyData keys[4];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool found;
	bool isnull;

	lane_keys(index, queue, priority, shard, keys);
	ScanKeyEntryInitialize(&keys[3], 0, 4, BTGreaterEqualStrategyNumber, InvalidOid, index->rd_indcollation[3],
						   F_INT8GE, Int64GetDatum(floor));
	scan = index_beginscan(marks, index, snapshot, 4, 0);
	index_rescan(scan, keys, 4, nullptr, 0);
	slot = table_slot_create(marks, nullptr);
	found = index_getnext_slot(scan, BackwardScanDirection, slot);
	if (found)
	{
		Datum d = slot_getattr(slot, column_of(marks, "claim_seq"), &isnull);

		found = !isnull;
		if (found)
			*mark = DatumGetInt64(d);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/*
 * The lane's cursor from its head's claim_seq `head` and its marks: the greater of `head` and
 * the latest mark. The marks above the cursor this backend last read for the lane are probed
 * first (marks only grow, so the latest of those, when there is one, is the latest of all);
 * when the fold deleted them, every mark above `head`.
 */
int64
cursor_from_marks(Relation marks, Relation index, Snapshot snapshot, text *queue, int16 priority, int16 shard,
				  int64 head)
{
	LaneKey lane;
	MarkFloor *remembered;
	bool found;
	int64 floor;
	int64 mark;
	int64 cursor = head;

	if (head == PG_INT64_MAX)
		return head;
	make_lane_key(&lane, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard);
	remembered = static_cast<MarkFloor *>(hash_search(mark_floor_table(), &lane, HASH_ENTER, &found));
	floor = found && remembered->cursor > head ? remembered->cursor : head + 1;
	if (latest_mark_from(marks, index, snapshot, queue, priority, shard, floor, &mark) ||
		(floor > head + 1 && latest_mark_from(marks, index, snapshot, queue, priority, shard, head + 1, &mark)))
		cursor = std::max(cursor, mark);
	remembered->cursor = cursor;
	return cursor;
}

} // namespace

/* Lock a lane head unless another transaction holds it (see the file comment). */
bool
lock_head_direct(text *queue, int16 priority, int16 shard, bool *locked, bool *held)
{
	Relation rel = open_lane_table("queue_claim_heads", RowShareLock, true);
	Relation index;
	ScanKeyData keys[3];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	Snapshot snapshot;

	*locked = false;
	*held = false;
	if (rel == nullptr)
		return false;
	/* A read-only transaction gets the statement's error (no row lock in it). */
	if (XactReadOnly)
	{
		table_close(rel, NoLock);
		return false;
	}
	index = index_open(RelationGetPrimaryKeyIndex(rel), RowShareLock);
	if (!index_keys_are(rel, index, kLaneColumns, 3))
	{
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return false;
	}
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	lane_keys(index, queue, priority, shard, keys);
	scan = index_beginscan(rel, index, snapshot, 3, 0);
	index_rescan(scan, keys, 3, nullptr, 0);
	slot = table_slot_create(rel, nullptr);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		ItemPointerData tid = slot->tts_tid;
		TupleTableSlot *lock_slot = table_slot_create(rel, nullptr);
		TM_FailureData tmfd;
		int flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
		TM_Result result;

		if (!IsolationUsesXactSnapshot())
			flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
		result = table_tuple_lock(rel, &tid, snapshot, lock_slot, GetCurrentCommandId(true), LockTupleExclusive,
								  LockWaitSkip, flags, &tmfd);
		switch (result)
		{
		case TM_Ok:
			*locked = true;
			note_head_held(queue);
			break;
		case TM_WouldBlock:
			*held = true;
			break; /* held by another transaction: skipped */
		case TM_SelfModified:
			break; /* changed by this transaction since: skipped */
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
								errmsg("could not serialize access due to concurrent %s",
									   result == TM_Updated ? "update" : "delete")));
			if (result == TM_Updated)
				elog(ERROR, "awa_shard: unexpected lane head lock status %d", static_cast<int>(result));
			break; /* deleted (a dropped lane): skipped */
		default:
			elog(ERROR, "awa_shard: unexpected lane head lock status %d", static_cast<int>(result));
		}
		ExecDropSingleTupleTableSlot(lock_slot);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return true;
}

/* A lane's claim cursor on the latest committed state (see the file comment). */
bool
lane_cursor_direct(text *queue, int16 priority, int16 shard, bool *found, int64 *cursor)
{
	Relation heads = open_lane_table("queue_claim_heads", AccessShareLock, false);
	Relation marks;
	Relation heads_index;
	Relation marks_index;
	Snapshot snapshot;

	if (heads == nullptr)
		return false;
	marks = open_lane_table("claim_marks", AccessShareLock, false);
	if (marks == nullptr)
	{
		table_close(heads, NoLock);
		return false;
	}
	heads_index = index_open(RelationGetPrimaryKeyIndex(heads), AccessShareLock);
	marks_index = index_open(RelationGetPrimaryKeyIndex(marks), AccessShareLock);
	if (!index_keys_are(heads, heads_index, kLaneColumns, 3) || !index_keys_are(marks, marks_index, kMarkKey, 4))
	{
		index_close(marks_index, NoLock);
		index_close(heads_index, NoLock);
		table_close(marks, NoLock);
		table_close(heads, NoLock);
		return false;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	*found =
		first_of_lane(heads, heads_index, snapshot, queue, priority, shard, ForwardScanDirection, "claim_seq", cursor);
	if (*found)
		*cursor = cursor_from_marks(marks, marks_index, snapshot, queue, priority, shard, *cursor);
	UnregisterSnapshot(snapshot);
	index_close(marks_index, NoLock);
	index_close(heads_index, NoLock);
	table_close(marks, NoLock);
	table_close(heads, NoLock);
	return true;
}

namespace
{

/* Whether the queue is paused (its awa.queue_meta row says so), on `snapshot`. */
bool
queue_paused(Relation meta, Snapshot snapshot, text *queue)
{
	Relation index = index_open(RelationGetPrimaryKeyIndex(meta), AccessShareLock);
	ScanKeyData key;
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(meta, nullptr);
	bool paused = false;
	bool isnull;

	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(queue));
	scan = index_beginscan(meta, index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, nullptr, 0);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		Datum d = slot_getattr(slot, column_of(meta, "paused"), &isnull);

		paused = !isnull && DatumGetBool(d);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	return paused;
}

/* The plane's mode (awa.plane_settings.receipts) on `snapshot`; true when the row is missing, as the statement's
 * reader. */
bool
plane_receipts(Relation settings, Snapshot snapshot)
{
	TableScanDesc scan = table_beginscan(settings, snapshot, 0, nullptr);
	TupleTableSlot *slot = table_slot_create(settings, nullptr);
	bool receipts = true;
	bool isnull;

	if (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		Datum d = slot_getattr(slot, column_of(settings, "receipts"), &isnull);

		receipts = isnull || DatumGetBool(d);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return receipts;
}

/* The name of a lane's enqueue sequence from its awa.queue_enqueue_heads row; nullptr when it has none. */
char *
lane_seq_name(Relation enqueue_heads, Relation index, Snapshot snapshot, text *queue, int16 priority, int16 shard)
{
	ScanKeyData keys[3];
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(enqueue_heads, nullptr);
	char *name = nullptr;
	bool isnull;

	lane_keys(index, queue, priority, shard, keys);
	scan = index_beginscan(enqueue_heads, index, snapshot, 3, 0);
	index_rescan(scan, keys, 3, nullptr, 0);
	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		Datum d = slot_getattr(slot, column_of(enqueue_heads, "seq_name"), &isnull);

		if (!isnull)
			name = TextDatumGetCString(d);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return name;
}

} // namespace

/* Every claim head of an unpaused queue with its sequence's name (see the header). */
bool
read_heads_direct(text *queue, HeadRow **out, int *n, bool *receipts)
{
	Relation meta = open_lane_table("queue_meta", AccessShareLock, false);
	Relation settings = meta ? open_lane_table("plane_settings", AccessShareLock, false) : nullptr;
	Relation heads = settings ? open_lane_table("queue_claim_heads", AccessShareLock, false) : nullptr;
	Relation enqueue_heads = heads ? open_lane_table("queue_enqueue_heads", AccessShareLock, false) : nullptr;
	Snapshot snapshot;

	*out = nullptr;
	*n = 0;
	if (enqueue_heads == nullptr)
	{
		if (heads != nullptr)
			table_close(heads, NoLock);
		if (settings != nullptr)
			table_close(settings, NoLock);
		if (meta != nullptr)
			table_close(meta, NoLock);
		return false;
	}
	if (!keys_lead(heads, kLaneColumns, 3) || !keys_lead(enqueue_heads, kLaneColumns, 3) ||
		!keys_lead(meta, kLaneColumns, 1))
	{
		table_close(enqueue_heads, NoLock);
		table_close(heads, NoLock);
		table_close(settings, NoLock);
		table_close(meta, NoLock);
		return false;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!queue_paused(meta, snapshot, queue))
	{
		Relation heads_index = index_open(RelationGetPrimaryKeyIndex(heads), AccessShareLock);
		Relation enqueue_index = index_open(RelationGetPrimaryKeyIndex(enqueue_heads), AccessShareLock);
		AttrNumber a_priority = column_of(heads, "priority");
		AttrNumber a_shard = column_of(heads, "enqueue_shard");
		AttrNumber a_claim_seq = column_of(heads, "claim_seq");
		AttrNumber a_hint = column_of(heads, "head_run_at");
		ScanKeyData key;
		IndexScanDesc scan;
		TupleTableSlot *slot = table_slot_create(heads, nullptr);
		int cap = 0;
		bool isnull;

		ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid, heads_index->rd_indcollation[0], F_TEXTEQ,
							   PointerGetDatum(queue));
		scan = index_beginscan(heads, heads_index, snapshot, 1, 0);
		index_rescan(scan, &key, 1, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			HeadRow h;
			Datum d;

			h.priority = DatumGetInt16(slot_getattr(slot, a_priority, &isnull));
			h.shard = DatumGetInt16(slot_getattr(slot, a_shard, &isnull));
			h.claim_seq = DatumGetInt64(slot_getattr(slot, a_claim_seq, &isnull));
			d = slot_getattr(slot, a_hint, &h.hint_null);
			h.hint = h.hint_null ? 0 : DatumGetTimestampTz(d);
			h.xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
			h.xmax = DatumGetTransactionId(slot_getsysattr(slot, MaxTransactionIdAttributeNumber, &isnull));
			h.seq_name = lane_seq_name(enqueue_heads, enqueue_index, snapshot, queue, h.priority, h.shard);
			if (h.seq_name == nullptr)
				continue; /* the inner join of the statement */
			if (*n == cap)
			{
				cap = cap == 0 ? 16 : cap * 2;
				*out = static_cast<HeadRow *>(*out == nullptr ? palloc(sizeof(HeadRow) * cap)
															  : repalloc(*out, sizeof(HeadRow) * cap));
			}
			(*out)[(*n)++] = h;
		}
		index_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
		index_close(enqueue_index, NoLock);
		index_close(heads_index, NoLock);
		*receipts = plane_receipts(settings, snapshot);
	}
	UnregisterSnapshot(snapshot);
	table_close(enqueue_heads, NoLock);
	table_close(heads, NoLock);
	table_close(settings, NoLock);
	table_close(meta, NoLock);
	return true;
}

} // namespace awa
