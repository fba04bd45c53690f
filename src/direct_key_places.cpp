/*
 * direct_key_places.cpp — the places of the keys of a claim under a per-key concurrency
 * limit without a planned statement (D22; docs/design.md §4, "Flow control").
 *
 * The count does what the count statement kKeyCountSql (flow_control.cpp) does, step by step:
 * 1. On one copy of the latest snapshot (taken after a command counter increment, as SPI
 *    takes a non-read-only statement's), the places of each key in awa.key_attempts, by an
 *    index scan of its primary key (queue, concurrency_key, place).
 * 2. Each place's attempt tested as the statement tests it (direct_named_receipts_open,
 *    direct_complete.cpp): its ready row and claim batch in the slots it names on the live
 *    arcs (the queue ring's read under the keys' locks, the claim ring's read then, as the
 *    statement's caller reads them), then the open-receipt test of awa._open_receipts. Keys without
 *    places need no test, and no arc.
 * 3. Each key's taken places are its count; its free places (attempt ended) and highest
 *    place are kept for the record. The count writes nothing.
 *
 * The record then writes what the record statement kRecordKeySql writes: each attempt the
 * claim started in the next free place of its key (table_tuple_update: the indexed columns
 * do not change, so a HOT update when the page has room, and the old version is pruned on
 * its page without a vacuum), or, with none left, in a new place after the key's highest
 * (heap insert and primary-key entry); then the free places of those keys it did not need
 * are deleted (table_tuple_delete; one deleted meanwhile by another transaction, the
 * maintenance's awa.prune_key_places, is passed over). A free place that changed before its
 * update (deleted by that prune) sends the rest to the record statement.
 *
 * Locks are the statements': RowExclusiveLock on awa.key_attempts and its primary key, then
 * the live partitions the open test reads with AccessShareLock. A place of a lease (leases
 * mode), and everything that would make a statement do more than this (Citus, a read-only
 * transaction, missing privileges, a trigger, rule or row security), send the work back to
 * the statements.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "citus.hpp"
#include "direct_complete.hpp"
#include "direct_insert.hpp"
#include "direct_key_places.hpp"
#include "ended_places.hpp"
#include "key_places_memo.hpp"
#include "ring.hpp"

#include <algorithm>

extern "C"
{
#include "access/genam.h"
#include "access/heapam.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
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
	E_PLACE,
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

const char *const kEntryNames[E_NCOLUMNS] = {"place",		  "job_id",	   "run_lease",	 "priority",
											 "enqueue_shard", "lane_seq",  "ready_slot", "ready_generation",
											 "claim_slot",	  "lease_slot"};

/* The leading columns of awa.key_attempts' primary key, which the count probes. */
const char *const kEntryKey[2] = {"queue", "concurrency_key"};

/*
 * One place of awa.key_attempts: the key it is of, its number, where its row is, the row's
 * xmin, and whether it came from memory (key_places_memo.hpp) rather than the table.
 */
struct Entry
{
	int key;
	int32 place;
	ItemPointerData tid;
	TransactionId xmin;
	bool remembered;
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
 * Delete a free place the count found. One another transaction deleted meanwhile (the
 * maintenance's awa.prune_key_places) is gone already, whatever the isolation level: the
 * claim works on the latest committed state, and the place's absence is what it wanted.
 * False when another transaction updated it instead (the place stays).
 */
bool
delete_place(Relation rel, ItemPointer tid)
{
	TM_FailureData tmfd;
	TM_Result result = table_tuple_delete(rel, tid, GetCurrentCommandId(true), GetLatestSnapshot(), InvalidSnapshot,
										  true, &tmfd, false);

	switch (result)
	{
	case TM_Ok:
	case TM_SelfModified: /* deleted by this transaction already */
	case TM_Deleted:	  /* deleted by another transaction */
		return true;
	case TM_Updated:
		return false; /* updated by another transaction: not this claim's to remove */
	default:
		elog(ERROR, "awa_shard: unexpected table_tuple_delete status: %d", static_cast<int>(result));
	}
	return false;
}

/*
 * Whether each entry's attempt is open, into open[]: an entry whose row version is one whose
 * attempt has ended (ended_places.cpp) is free without a test; the others are tested as the
 * statement tests them, on the claim ring's live arc read now (none when every entry is
 * known). False when the statement must test instead.
 */
bool
test_unended(Relation rel, const Entry *entries, const NamedAttempt *attempts, int n, const int queue_arc[4],
			 Snapshot snapshot, bool *open)
{
	NamedAttempt *unknown = static_cast<NamedAttempt *>(palloc(sizeof(NamedAttempt) * (n + 1)));
	int *index_of = static_cast<int *>(palloc(sizeof(int) * (n + 1)));
	bool *unknown_open;
	int claim_arc[4];
	int m = 0;

	for (int i = 0; i < n; i++)
		prefetch_place_ended(rel->rd_node.relNode, const_cast<ItemPointer>(&entries[i].tid), entries[i].xmin,
							 attempts[i].job_id, attempts[i].run_lease, attempts[i].queue);
	for (int i = 0; i < n; i++)
	{
		open[i] = false;
		if (place_attempt_ended(rel->rd_node.relNode, const_cast<ItemPointer>(&entries[i].tid), entries[i].xmin,
								attempts[i].job_id, attempts[i].run_lease, attempts[i].queue))
			continue;
		unknown[m] = attempts[i];
		index_of[m++] = i;
	}
	if (m == 0)
		return true;
	live_slot_ranges(Ring::Claim, claim_arc);
	unknown_open = static_cast<bool *>(palloc0(sizeof(bool) * m));
	if (!direct_named_receipts_open(unknown, m, queue_arc, claim_arc, snapshot, unknown_open))
		return false;
	for (int j = 0; j < m; j++)
		open[index_of[j]] = unknown_open[j];
	return true;
}

} // namespace

/* The attempt a place records, as the open test names it. */
static NamedAttempt
attempt_of(text *queue, const RememberedPlace &p)
{
	NamedAttempt a;

	a.queue = queue;
	a.priority = p.priority;
	a.enqueue_shard = p.enqueue_shard;
	a.lane_seq = p.lane_seq;
	a.ready_slot = p.ready_slot;
	a.ready_generation = p.ready_generation;
	a.has_claim_slot = p.has_claim_slot;
	a.claim_slot = p.claim_slot;
	a.job_id = p.job_id;
	a.run_lease = p.run_lease;
	return a;
}

/* Count the keys' running attempts directly (see the file comment). */
bool
count_key_attempts_direct(text *queue, const Datum *keys, int n, const int queue_arc[4], int64 *counts,
						  CapWitness *first_key, KeyPlaces *places)
{
	Relation rel;
	Relation index;
	AttrNumber att[E_NCOLUMNS];
	MemoBasis basis;
	Snapshot snapshot;
	TupleTableSlot *slot = nullptr;
	IndexScanDesc scan = nullptr;
	Entry *entries = nullptr;
	RememberedPlace *found = nullptr;
	NamedAttempt *attempts = nullptr;
	int first_of[kMaxKeysPerClaim + 1];
	bool from_memory[kMaxKeysPerClaim];
	int nentries = 0;
	int cap = 0;
	bool leases = false;
	bool *open;

	places->known = false;
	if (citus_present() || XactReadOnly || n > kMaxKeysPerClaim)
		return false;
	rel = table_open(awa_relation("key_attempts"), RowExclusiveLock);
	if (needs_planned_statement(rel) ||
		!has_all_privileges(RelationGetRelid(rel), ACL_SELECT | ACL_INSERT | ACL_UPDATE | ACL_DELETE) ||
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

	/*
	 * 1. The keys' entries, on the latest committed state as a non-read-only statement sees
	 * it: from memory where a claim of the key that held its lock left them (key_places_memo.hpp,
	 * its basis read before the snapshot), else by the primary key.
	 */
	basis = memo_basis(rel, queue);
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	memo_prefetch(basis, keys, n);
	for (int k = 0; k < n && !leases; k++)
	{
		RememberedPlace memory[kRememberedPlaces];
		int remembered = 0;
		ScanKeyData scankeys[2];

		counts[k] = 0;
		first_of[k] = nentries;
		from_memory[k] = memo_lookup(basis, DatumGetTextPP(keys[k]), memory, &remembered);
		if (nentries + std::max(remembered, 1) > cap)
		{
			cap = std::max(cap * 2, nentries + kRememberedPlaces + 16);
			entries = static_cast<Entry *>(entries == nullptr ? palloc(sizeof(Entry) * cap)
															  : repalloc(entries, sizeof(Entry) * cap));
			found = static_cast<RememberedPlace *>(found == nullptr ? palloc(sizeof(RememberedPlace) * cap)
																	: repalloc(found, sizeof(RememberedPlace) * cap));
			attempts =
				static_cast<NamedAttempt *>(attempts == nullptr ? palloc(sizeof(NamedAttempt) * cap)
																: repalloc(attempts, sizeof(NamedAttempt) * cap));
		}
		if (from_memory[k])
		{
			for (int r = 0; r < remembered; r++)
			{
				entries[nentries] = {k, memory[r].place, memory[r].tid, memory[r].xmin, true};
				found[nentries] = memory[r];
				attempts[nentries] = attempt_of(queue, memory[r]);
				nentries++;
			}
			continue;
		}
		if (scan == nullptr)
		{
			slot = table_slot_create(rel, nullptr);
			scan = index_beginscan(rel, index, snapshot, 2, 0);
		}
		ScanKeyEntryInitialize(&scankeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0],
							   F_TEXTEQ, PointerGetDatum(queue));
		ScanKeyEntryInitialize(&scankeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1],
							   F_TEXTEQ, keys[k]);
		index_rescan(scan, scankeys, 2, nullptr, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			bool isnull;

			(void)slot_getattr(slot, att[E_LEASE_SLOT], &isnull);
			if (!isnull)
			{
				leases = true; /* a lease's entry: the statement tests leases */
				break;
			}
			if (nentries == cap)
			{
				cap *= 2;
				entries = static_cast<Entry *>(repalloc(entries, sizeof(Entry) * cap));
				found = static_cast<RememberedPlace *>(repalloc(found, sizeof(RememberedPlace) * cap));
				attempts = static_cast<NamedAttempt *>(repalloc(attempts, sizeof(NamedAttempt) * cap));
			}
			RememberedPlace &q = found[nentries];
			q.place = DatumGetInt32(slot_getattr(slot, att[E_PLACE], &isnull));
			q.tid = slot->tts_tid;
			q.xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
			q.job_id = DatumGetInt64(slot_getattr(slot, att[E_JOB_ID], &isnull));
			q.run_lease = DatumGetInt64(slot_getattr(slot, att[E_RUN_LEASE], &isnull));
			q.priority = DatumGetInt16(slot_getattr(slot, att[E_PRIORITY], &isnull));
			q.enqueue_shard = DatumGetInt16(slot_getattr(slot, att[E_ENQUEUE_SHARD], &isnull));
			q.lane_seq = DatumGetInt64(slot_getattr(slot, att[E_LANE_SEQ], &isnull));
			q.ready_slot = DatumGetInt32(slot_getattr(slot, att[E_READY_SLOT], &isnull));
			q.ready_generation = DatumGetInt64(slot_getattr(slot, att[E_READY_GENERATION], &isnull));
			q.claim_slot = DatumGetInt32(slot_getattr(slot, att[E_CLAIM_SLOT], &isnull));
			q.has_claim_slot = !isnull;
			if (isnull)
				q.claim_slot = 0;
			entries[nentries] = {k, q.place, q.tid, q.xmin, false};
			attempts[nentries] = attempt_of(queue, q);
			nentries++;
		}
	}
	first_of[n] = nentries;
	if (scan != nullptr)
	{
		index_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
	}

	/*
	 * 2. Which entries' attempts are still open (nothing written yet: the statement may still
	 * take over), on the claim ring's live arc read now (none needed when no key has an entry).
	 */
	open = static_cast<bool *>(palloc0(sizeof(bool) * (nentries + 1)));
	if (!leases && !test_unended(rel, entries, attempts, nentries, queue_arc, snapshot, open))
		leases = true; /* the statement counts */
	if (leases)
	{
		UnregisterSnapshot(snapshot);
		index_close(index, NoLock);
		table_close(rel, NoLock);
		return false;
	}

	/* 3. The taken places counted (the first key's named); the free ones and each key's highest kept. */
	first_key->n = 0;
	first_key->complete = true;
	places->nkeys = n;
	places->nfree = 0;
	places->free = static_cast<FreePlace *>(palloc(sizeof(FreePlace) * (nentries + 1)));
	places->basis = basis;
	places->place = found;
	places->taken = open;
	places->key_of = static_cast<int *>(palloc(sizeof(int) * (nentries + 1)));
	places->nplaces = nentries;
	for (int k = 0; k < n; k++)
	{
		places->keys[k] = DatumGetTextPP(keys[k]);
		places->top[k] = -1;
		/* What the table held for a key not taken from memory is remembered for the next claim of it. */
		if (!from_memory[k])
			memo_fill(basis, places->keys[k], found + first_of[k], first_of[k + 1] - first_of[k]);
	}
	for (int i = 0; i < nentries; i++)
	{
		places->key_of[i] = entries[i].key;
		places->top[entries[i].key] = std::max(places->top[entries[i].key], entries[i].place);
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
			places->free[places->nfree++] = {entries[i].key, entries[i].place, entries[i].tid, entries[i].xmin,
											 entries[i].remembered};
	}
	places->known = true;
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return true;
}

namespace
{

/* The columns of an awa.key_attempts row, as the record writes them. */
enum PlaceColumn
{
	K_QUEUE,
	K_CONCURRENCY_KEY,
	K_PLACE,
	K_JOB_ID,
	K_RUN_LEASE,
	K_PRIORITY,
	K_ENQUEUE_SHARD,
	K_LANE_SEQ,
	K_READY_SLOT,
	K_READY_GENERATION,
	K_CLAIM_SLOT,
	K_LEASE_SLOT,
	K_NCOLUMNS
};

const DirectColumn kPlaceColumns[K_NCOLUMNS] = {
	{"queue", TEXTOID},		 {"concurrency_key", TEXTOID},	{"place", INT4OID},			{"job_id", INT8OID},
	{"run_lease", INT8OID},	 {"priority", INT2OID},			{"enqueue_shard", INT2OID}, {"lane_seq", INT8OID},
	{"ready_slot", INT4OID}, {"ready_generation", INT8OID}, {"claim_slot", INT4OID},	{"lease_slot", INT4OID}};

} // namespace

/*
 * Whether a place taken from memory is still the row version remembered: visible on the
 * latest committed state at its tid with the remembered xmin. A place the maintenance's
 * awa.prune_key_places deleted (and a vacuum may have given its tid to another row) is not.
 * A vacuum may also have cut the table's end off since (`nblocks`: the table's length under
 * the claim's lock, which such a cut waits for). Its page is pruned first, as the index
 * fetch of a place read from the table prunes it, so that the update finds the room its
 * earlier versions left (a HOT update).
 */
static bool
remembered_version_current(Relation rel, BlockNumber nblocks, TupleTableSlot *check, const FreePlace &f)
{
	ItemPointerData tid = f.tid;
	bool isnull;

	if (ItemPointerGetBlockNumber(&tid) >= nblocks)
		return false;
	if (rel->rd_rel->relam == HEAP_TABLE_AM_OID)
	{
		Buffer buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(&tid));

		heap_page_prune_opt(rel, buffer);
		ReleaseBuffer(buffer);
	}
	if (!table_tuple_fetch_row_version(rel, &tid, GetLatestSnapshot(), check))
		return false;
	return DatumGetTransactionId(slot_getsysattr(check, MinTransactionIdAttributeNumber, &isnull)) == f.xmin;
}

/* Order of places by number. */
static bool
place_before(const RememberedPlace &a, const RememberedPlace &b)
{
	return a.place < b.place;
}

/* Record a claim's keyed attempts in the places its count found (see the file comment). */
bool
record_key_attempts_direct(text *queue, int16 priority, int16 shard, const KeyedAttempt *attempts, int n,
						   KeyPlaces *places)
{
	int *key_of;
	int next_free[kMaxKeysPerClaim]; /* per key: its next free place in places->free, or -1 */
	bool recorded[kMaxKeysPerClaim] = {};
	bool unknown[kMaxKeysPerClaim] = {}; /* a key whose places this record cannot tell (not remembered) */
	RememberedPlace *written;			 /* the versions written, attempt i's in written[i] */
	TupleTableSlot *check = nullptr;	 /* for remembered places' versions */
	BlockNumber nblocks = InvalidBlockNumber;
	DirectTarget target;
	bool all = true;

	if (!places->known)
		return false;
	key_of = static_cast<int *>(palloc(sizeof(int) * (n + 1)));
	written = static_cast<RememberedPlace *>(palloc0(sizeof(RememberedPlace) * (n + 1)));
	for (int i = 0; i < n; i++)
	{
		key_of[i] = -1;
		for (int k = 0; k < places->nkeys && key_of[i] < 0; k++)
			if (attempts[i].concurrency_key != nullptr && same_text(places->keys[k], attempts[i].concurrency_key))
				key_of[i] = k;
		if (key_of[i] < 0)
			return false; /* a key the count did not see: the statement finds its places */
	}
	if (!direct_target_open(&target, awa_relation("key_attempts"), awa_relation("key_attempts"), kPlaceColumns,
							K_NCOLUMNS))
		return false;
	for (int k = 0; k < places->nkeys; k++)
		next_free[k] = -1;
	for (int i = 0; i < n; i++)
		prefetch_place_recorded(attempts[i].job_id, attempts[i].run_lease, queue);
	for (int f = places->nfree - 1; f >= 0; f--)
		next_free[places->free[f].key] = f;
	for (int i = 0; i < n && all; i++)
	{
		const KeyedAttempt &a = attempts[i];
		int k = key_of[i];
		int f = next_free[k];
		Datum values[K_NCOLUMNS];
		bool nulls[K_NCOLUMNS] = {};

		values[K_QUEUE] = PointerGetDatum(queue);
		values[K_CONCURRENCY_KEY] = PointerGetDatum(a.concurrency_key);
		values[K_PLACE] = Int32GetDatum(f >= 0 ? places->free[f].place : places->top[k] + 1);
		values[K_JOB_ID] = Int64GetDatum(a.job_id);
		values[K_RUN_LEASE] = Int64GetDatum(a.run_lease);
		values[K_PRIORITY] = Int16GetDatum(priority);
		values[K_ENQUEUE_SHARD] = Int16GetDatum(shard);
		values[K_LANE_SEQ] = Int64GetDatum(a.lane_seq);
		values[K_READY_SLOT] = Int32GetDatum(a.ready_slot);
		values[K_READY_GENERATION] = Int64GetDatum(a.ready_generation);
		values[K_CLAIM_SLOT] = Int32GetDatum(a.claim_slot);
		nulls[K_CLAIM_SLOT] = !a.has_claim_slot;
		values[K_LEASE_SLOT] = Int32GetDatum(a.lease_slot);
		nulls[K_LEASE_SLOT] = !a.has_lease_slot;
		recorded[k] = true;
		unknown[k] = unknown[k] || a.has_lease_slot; /* leases' places are the statement's to count */
		if (f >= 0)
		{
			/*
			 * A free place: its row updated in place (one from memory only while it is the version
			 * remembered). Changed meanwhile: the statement finishes.
			 */
			if (places->free[f].remembered && check == nullptr)
			{
				check = table_slot_create(target.rel, nullptr);
				nblocks = RelationGetNumberOfBlocks(target.rel);
			}
			all = (!places->free[f].remembered ||
				   remembered_version_current(target.rel, nblocks, check, places->free[f])) &&
				  direct_target_update(&target, &places->free[f].tid, values, nulls);
			next_free[k] = f + 1 < places->nfree && places->free[f + 1].key == k ? f + 1 : -1;
		}
		else
		{
			places->top[k]++;
			direct_target_insert(&target, values, nulls);
		}
		if (!all)
			break;
		/* The version written, so that this backend's end of the attempt can publish it. */
		note_place_recorded(a.job_id, a.run_lease, queue, target.rel->rd_node.relNode, &target.slot->tts_tid);
		written[i] = {DatumGetInt32(values[K_PLACE]),
					  target.slot->tts_tid,
					  GetCurrentTransactionId(),
					  priority,
					  shard,
					  a.has_claim_slot,
					  a.ready_slot,
					  a.has_claim_slot ? a.claim_slot : 0,
					  a.lane_seq,
					  a.ready_generation,
					  a.job_id,
					  a.run_lease};
	}
	/* The free places of the recorded keys left over (none in the steady state): removed. */
	for (int k = 0; k < places->nkeys && all; k++)
		for (int f = next_free[k]; recorded[k] && f >= 0 && f < places->nfree && places->free[f].key == k; f++)
		{
			if (places->free[f].remembered)
			{
				if (check == nullptr)
				{
					check = table_slot_create(target.rel, nullptr);
					nblocks = RelationGetNumberOfBlocks(target.rel);
				}
				if (!remembered_version_current(target.rel, nblocks, check, places->free[f]))
					continue; /* gone already (or no longer that row): not this claim's to remove */
			}
			if (!delete_place(target.rel, &places->free[f].tid))
				unknown[k] = true;
		}
	/*
	 * What each recorded key's places now are, published when this transaction commits: its
	 * places with an open attempt, and the ones written (the spare free ones are gone).
	 */
	for (int k = 0; k < places->nkeys && all; k++)
	{
		RememberedPlace after[kRememberedPlaces + 1];
		int m = 0;

		if (!recorded[k])
			continue;
		for (int p = 0; p < places->nplaces && m <= kRememberedPlaces; p++)
			if (places->key_of[p] == k && places->taken[p])
				after[m++] = places->place[p];
		for (int i = 0; i < n && m <= kRememberedPlaces; i++)
			if (key_of[i] == k)
				after[m++] = written[i];
		if (unknown[k])
			m = kRememberedPlaces + 1; /* forgotten at commit */
		if (m <= kRememberedPlaces)
			std::sort(after, after + m, place_before);
		memo_note_recorded(places->basis, queue, places->keys[k], after, m);
	}
	if (check != nullptr)
		ExecDropSingleTupleTableSlot(check);
	direct_target_close(&target);
	places->known = false; /* used */
	/* As after the statement: the claim's later statements see the rows. */
	CommandCounterIncrement();
	return all;
}

} // namespace awa
