/*
 * direct_key_count.cpp — the per-key count of a claim under a per-key concurrency limit
 * without a planned statement (D22; docs/design.md §4, "Flow control"). It does what the
 * count statement kKeyCountSql (flow_control.cpp) does, step by step:
 *
 * 1. On one copy of the latest snapshot (taken after a command counter increment, as SPI
 *    takes a non-read-only statement's), the entries of each key in awa.key_attempts, by an
 *    index scan of its primary key (queue, concurrency_key, ...).
 * 2. Each entry's attempt tested as the statement tests it (direct_named_receipts_open,
 *    direct_complete.cpp): its ready row and claim batch in the slots it names on the live
 *    arcs (the queue ring's the claim read, the claim ring's read then, as the statement's
 *    caller reads it), then the open-receipt test of awa._open_receipts. Keys without
 *    entries need no test, and no arc.
 * 3. The entries found ended are deleted (table_tuple_delete, as the statement's DELETE: one
 *    deleted meanwhile by another transaction is passed over under READ COMMITTED and raises
 *    40001 under REPEATABLE READ and SERIALIZABLE); each key's open entries are its count.
 *
 * Locks are the statement's: RowExclusiveLock on awa.key_attempts and its primary key, then
 * the live partitions the open test reads with AccessShareLock. An entry of a lease (leases
 * mode), and everything that would make the statement do more than this (Citus, a read-only
 * transaction, missing privileges, a trigger, rule or row security), send the count back to
 * the statement before anything is written.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "citus.hpp"
#include "direct_complete.hpp"
#include "direct_insert.hpp"
#include "direct_key_count.hpp"
#include "ring.hpp"

extern "C"
{
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace awa
{

namespace
{

/* The columns of an entry the count reads, in the order of kEntryNames. */
enum EntryColumn
{
	E_JOB_ID,
	E_RUN_LEASE,
	E_PRIORITY,
	E_ENQUEUE_SHARD,
	E_LANE_SEQ,
	E_READY_SLOT,
	E_READY_GENERATION,
	E_CLAIM_SLOT,
	E_LEASE_SLOT,
	E_NCOLUMNS
};

const char *const kEntryNames[E_NCOLUMNS] = {"job_id",			 "run_lease",  "priority",
											 "enqueue_shard",	 "lane_seq",   "ready_slot",
											 "ready_generation", "claim_slot", "lease_slot"};

/* The leading columns of awa.key_attempts' primary key, which the count probes. */
const char *const kEntryKey[2] = {"queue", "concurrency_key"};

/* One entry of awa.key_attempts: the key it counts for, its attempt, where its row is. */
struct Entry
{
	int key;
	ItemPointerData tid;
};

/* Attribute numbers of the EntryColumns in `rel`; false when one is missing. */
bool
entry_attributes(Relation rel, AttrNumber *att)
{
	TupleDesc desc = RelationGetDescr(rel);

	for (int c = 0; c < E_NCOLUMNS; c++)
	{
		att[c] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts && att[c] == InvalidAttrNumber; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), kEntryNames[c]) == 0)
				att[c] = static_cast<AttrNumber>(a + 1);
		if (att[c] == InvalidAttrNumber)
			return false;
	}
	return true;
}

/*
 * Delete an ended entry found on `snapshot`, as the statement's DELETE does: one another
 * transaction deleted meanwhile is gone already under READ COMMITTED and a serialization
 * failure under REPEATABLE READ and SERIALIZABLE.
 */
void
delete_entry(Relation rel, ItemPointer tid, Snapshot snapshot)
{
	TM_FailureData tmfd;
	TM_Result result =
		table_tuple_delete(rel, tid, GetCurrentCommandId(true), snapshot, InvalidSnapshot, true, &tmfd, false);

	switch (result)
	{
	case TM_Ok:
	case TM_SelfModified: /* deleted by this transaction already */
		break;
	case TM_Updated:
	case TM_Deleted:
		if (IsolationUsesXactSnapshot())
			ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							errmsg("could not serialize access due to concurrent %s",
								   result == TM_Updated ? "update" : "delete")));
		break; /* entries are never updated; deleted, it is gone */
	default:
		elog(ERROR, "awa_shard: unexpected table_tuple_delete status: %d", static_cast<int>(result));
	}
}

} // namespace

/* Count the keys' running attempts directly (see the file comment). */
bool
count_key_attempts_direct(text *queue, const Datum *keys, int n, const int queue_arc[4], int64 *counts,
						  CapWitness *first_key)
{
	int claim_arc[4];
	Relation rel;
	Relation index;
	AttrNumber att[E_NCOLUMNS];
	Snapshot snapshot;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	Entry *entries = nullptr;
	NamedAttempt *attempts = nullptr;
	int nentries = 0;
	int cap = 0;
	bool leases = false;
	bool *open;

	if (citus_present() || XactReadOnly)
		return false;
	rel = table_open(awa_relation("key_attempts"), RowExclusiveLock);
	if (needs_planned_statement(rel) || !has_all_privileges(RelationGetRelid(rel), ACL_SELECT | ACL_DELETE) ||
		!OidIsValid(RelationGetPrimaryKeyIndex(rel)) || !entry_attributes(rel, att))
	{
		table_close(rel, NoLock);
		return false;
	}
	index = index_open(RelationGetPrimaryKeyIndex(rel), RowExclusiveLock);
	if (!index_keys_are(rel, index, kEntryKey, 2))
	{
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return false;
	}

	/* 1. The keys' entries, on the latest committed state as a non-read-only statement sees it. */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(rel, nullptr);
	scan = index_beginscan(rel, index, snapshot, 2, 0);
	for (int k = 0; k < n && !leases; k++)
	{
		ScanKeyData scankeys[2];

		counts[k] = 0;
		ScanKeyEntryInitialize(&scankeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0],
							   F_TEXTEQ, PointerGetDatum(queue));
		ScanKeyEntryInitialize(&scankeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1],
							   F_TEXTEQ, keys[k]);
		index_rescan(scan, scankeys, 2, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			bool isnull;
			NamedAttempt *a;

			(void)slot_getattr(slot, att[E_LEASE_SLOT], &isnull);
			if (!isnull)
			{
				leases = true; /* a lease's entry: the statement tests leases */
				break;
			}
			if (nentries == cap)
			{
				cap = cap == 0 ? 16 : cap * 2;
				entries = static_cast<Entry *>(entries == nullptr ? palloc(sizeof(Entry) * cap)
																  : repalloc(entries, sizeof(Entry) * cap));
				attempts =
					static_cast<NamedAttempt *>(attempts == nullptr ? palloc(sizeof(NamedAttempt) * cap)
																	: repalloc(attempts, sizeof(NamedAttempt) * cap));
			}
			entries[nentries].key = k;
			entries[nentries].tid = slot->tts_tid;
			a = &attempts[nentries++];
			a->queue = queue;
			a->job_id = DatumGetInt64(slot_getattr(slot, att[E_JOB_ID], &isnull));
			a->run_lease = DatumGetInt64(slot_getattr(slot, att[E_RUN_LEASE], &isnull));
			a->priority = DatumGetInt16(slot_getattr(slot, att[E_PRIORITY], &isnull));
			a->enqueue_shard = DatumGetInt16(slot_getattr(slot, att[E_ENQUEUE_SHARD], &isnull));
			a->lane_seq = DatumGetInt64(slot_getattr(slot, att[E_LANE_SEQ], &isnull));
			a->ready_slot = DatumGetInt32(slot_getattr(slot, att[E_READY_SLOT], &isnull));
			a->ready_generation = DatumGetInt64(slot_getattr(slot, att[E_READY_GENERATION], &isnull));
			a->claim_slot = DatumGetInt32(slot_getattr(slot, att[E_CLAIM_SLOT], &isnull));
			a->has_claim_slot = !isnull;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);

	/*
	 * 2. Which entries' attempts are still open (nothing written yet: the statement may still
	 * take over), on the claim ring's live arc read now (none needed when no key has an entry).
	 */
	open = static_cast<bool *>(palloc0(sizeof(bool) * (nentries + 1)));
	if (!leases && nentries > 0)
		live_slot_ranges(Ring::Claim, claim_arc);
	if (leases ||
		(nentries > 0 && !direct_named_receipts_open(attempts, nentries, queue_arc, claim_arc, snapshot, open)))
	{
		UnregisterSnapshot(snapshot);
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return false;
	}

	/* 3. The open ones counted (the first key's named), the ended ones deleted. */
	first_key->n = 0;
	first_key->complete = true;
	for (int i = 0; i < nentries; i++)
		if (open[i])
		{
			counts[entries[i].key]++;
			if (entries[i].key != 0)
				continue;
			if (first_key->n == kMaxCapWitnesses)
				first_key->complete = false;
			else
				first_key->job_id[first_key->n++] = attempts[i].job_id;
		}
		else
			delete_entry(rel, &entries[i].tid, snapshot);
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	/* As after the statement: later statements of the transaction see the deletes. */
	CommandCounterIncrement();
	return true;
}

} // namespace awa
