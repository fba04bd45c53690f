/*
 * ring.cpp — the write slot of a ring, fenced against prune (docs/maintenance.md §2).
 *
 * Every writer into a ring partition (producers into ready_entries, claims into
 * claim_batches or leases, terminal rows written without an attempt) asks for the ring's
 * write slot here instead of reading the ring cursor in its own statement:
 *   1. read the current slot and its generation with the latest committed state (never
 *      through an old transaction snapshot: a REPEATABLE READ producer is normal), by a scan
 *      of the cursor row and a probe of the slot table's key, without a planned statement;
 *   2. take RowExclusiveLock on that slot's partitions (held to the end of the transaction,
 *      unless the subtransaction that took it rolls back: then the slot is read again);
 *   3. re-read the slot's generation; if prune freed or reused the slot in between, start again.
 * Prune takes ACCESS EXCLUSIVE on a slot's partitions before it decides anything, so once
 * step 3 passed, the slot cannot be pruned until this transaction ends; a slot sealed by a
 * rotation meanwhile is still live and read by claims.
 *
 * When preloaded, step 1 and the live arcs come from a backend cache of each ring's cursor
 * and slot generations, trusted while the server-wide ring stamp (module.cpp) is the one it
 * was read under: the triggers ring_changed (statement) and ring_row_changed (row) on every
 * ring table open a change when a transaction first writes one, and the change closes when
 * that transaction ends, so
 * a cached cursor is only used when no ring table has changed since it was read, which is
 * what a read of the latest committed state would have returned. Step 3 needs no read then:
 * the lock is taken before the stamp is compared, and a prune holds its ACCESS EXCLUSIVE
 * lock until its change has closed.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "citus.hpp"
#include "relcache_watch.hpp"
#include "module.hpp"
#include "ring.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/procarray.h"
#include "executor/tuptable.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"
}

#include <cstdint>

namespace awa
{

namespace
{

/* What a ring is made of: its cursor, its slot table and the partitions of one slot. */
struct RingSpec
{
	const char *name;
	const char *state_table; /* the cursor: one row (slot_count, current_slot, ...) */
	const char *slots_table; /* generation of every slot, keyed by slot */
	const char *read_sql;	 /* current slot, its generation */
	const char *check_sql;	 /* generation of slot $1 */
	const char *live_sql;	 /* oldest live slot (NULL: none), current slot, slot count */
	const char *partitions[2];
};

/* Result columns of a read_sql row (SPI attribute numbers). */
enum ReadColumn
{
	RC_CURRENT_SLOT = 1,
	RC_GENERATION
};

/* The result column of a check_sql row. */
constexpr int kCheckGeneration = 1;

/* Columns of a live_sql row, counted from its first: oldest live slot, current slot, slot count. */
enum LiveColumn
{
	LC_OLDEST,
	LC_CURRENT,
	LC_SLOT_COUNT,
	LC_WIDTH /* columns of a live_sql row */
};

const RingSpec kRings[3] = {
	{"queue",
	 "queue_ring_state",
	 "queue_ring_slots",
	 "SELECT r.current_slot, s.generation FROM awa.queue_ring_state r "
	 "JOIN awa.queue_ring_slots s ON s.slot = r.current_slot",
	 "SELECT generation FROM awa.queue_ring_slots WHERE slot = $1",
	 "SELECT (SELECT s.slot FROM awa.queue_ring_slots s WHERE s.generation >= 0 ORDER BY s.generation LIMIT 1), "
	 "r.current_slot, r.slot_count FROM awa.queue_ring_state r",
	 {"ready_entries_", "done_entries_"}},
	{"claim",
	 "claim_ring_state",
	 "claim_ring_slots",
	 "SELECT r.current_slot, s.generation FROM awa.claim_ring_state r "
	 "JOIN awa.claim_ring_slots s ON s.slot = r.current_slot",
	 "SELECT generation FROM awa.claim_ring_slots WHERE slot = $1",
	 "SELECT (SELECT s.slot FROM awa.claim_ring_slots s WHERE s.generation >= 0 ORDER BY s.generation LIMIT 1), "
	 "r.current_slot, r.slot_count FROM awa.claim_ring_state r",
	 {"claim_batches_", "lease_claim_closures_"}},
	{"lease",
	 "lease_ring_state",
	 "lease_ring_slots",
	 "SELECT r.current_slot, s.generation FROM awa.lease_ring_state r "
	 "JOIN awa.lease_ring_slots s ON s.slot = r.current_slot",
	 "SELECT generation FROM awa.lease_ring_slots WHERE slot = $1",
	 "SELECT (SELECT s.slot FROM awa.lease_ring_slots s WHERE s.generation >= 0 ORDER BY s.generation LIMIT 1), "
	 "r.current_slot, r.slot_count FROM awa.lease_ring_state r",
	 {"leases_", nullptr}},
};

/*
 * The slot this transaction holds for a ring: valid while the partition locks taken by
 * subtransaction `fenced_in` (or by the parent it committed into) are held.
 */
struct HeldSlot
{
	std::uint64_t epoch;
	SubTransactionId fenced_in;
	RingSlot slot;
	Oid first_partition;
};

/*
 * A ring's cursor and live arc as read from its tables under `stamp` (0: nothing cached),
 * by `user` (the direct reads check the caller's SELECT privilege), from tables `state_oid`
 * and `slots_oid`.
 */
struct CachedRing
{
	std::uint64_t stamp;
	Oid user;
	Oid state_oid;
	Oid slots_oid;
	int current;
	int64 current_generation;
	int arc[4];
};

CachedRing cached[3];
bool ring_cache_callback_registered = false;

HeldSlot held[3];
SPIPlanPtr read_plans[3];
SPIPlanPtr check_plans[3];
SPIPlanPtr live_plans[3];
bool subxact_callback_registered = false;

/*
 * A subtransaction that took a slot's partition locks ended. Rolled back: its locks are
 * gone, so the slot is no longer fenced, even if a later statement of the transaction locks
 * the same partitions again (a cancel, purge or completion locks every partition of its
 * table); forget it, so the next write reads and fences the live slot again. Committed: the
 * locks now belong to the parent.
 */
void
on_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	for (HeldSlot &h : held)
	{
		if (h.epoch == 0 || h.fenced_in != my_subid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			h.epoch = 0;
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			h.fenced_in = parent_subid;
	}
}

/*
 * Partition OIDs found by name, kept per backend by (prefix, slot): the hot calls open a
 * slot's partitions several times per call, and a name lookup is two catalog cache probes.
 * A relcache invalidation of a kept partition (its drop or replacement), or of every
 * relation, forgets them all (on_ring_relcache_inval).
 */
constexpr int kKeptPrefixes = 8;
constexpr int kKeptSlots = 256;
struct KeptPartitions
{
	const char *prefix;
	Oid oid[kKeptSlots];
};
KeptPartitions kept_partitions[kKeptPrefixes];
int kept_prefixes = 0;

void on_ring_relcache_inval(Datum arg, Oid relid);

/* Forget every kept partition OID when `relid` is one of them (InvalidOid: every relation). */
void
forget_kept_partitions(Oid relid)
{
	bool hit = !OidIsValid(relid);

	for (int p = 0; p < kept_prefixes && !hit; p++)
		for (int s = 0; s < kKeptSlots && !hit; s++)
			hit = kept_partitions[p].oid[s] == relid;
	if (hit)
		kept_prefixes = 0;
}

/* The kept OID of awa.<prefix><slot>, or where to keep it (nullptr: not kept). */
Oid *
kept_partition(const char *prefix, int slot)
{
	int p;

	if (slot < 0 || slot >= kKeptSlots)
		return nullptr;
	if (!ring_cache_callback_registered)
	{
		watch_relcache(on_ring_relcache_inval);
		ring_cache_callback_registered = true;
	}
	for (p = 0; p < kept_prefixes; p++)
		if (strcmp(kept_partitions[p].prefix, prefix) == 0)
			return &kept_partitions[p].oid[slot];
	if (kept_prefixes == kKeptPrefixes)
		return nullptr;
	kept_partitions[p].prefix = prefix;
	memset(kept_partitions[p].oid, 0, sizeof(kept_partitions[p].oid));
	kept_prefixes++;
	return &kept_partitions[p].oid[slot];
}

/*
 * OID of partition awa.<prefix><slot>; a missing partition is a broken install. A 1.0
 * catalog (before ALTER EXTENSION UPDATE) keeps its receipts in lease_claims partitions.
 * `prefix` must be a string that lives as long as the backend (a literal).
 */
Oid
partition_oid(const char *prefix, int slot)
{
	char name[NAMEDATALEN];
	Oid relid;
	Oid *kept = kept_partition(prefix, slot);

	if (kept != nullptr && OidIsValid(*kept))
		return *kept;
	snprintf(name, sizeof(name), "%s%d", prefix, slot);
	relid = get_relname_relid(name, get_namespace_oid("awa", false));
	if (!OidIsValid(relid) && strcmp(prefix, "claim_batches_") == 0)
	{
		snprintf(name, sizeof(name), "lease_claims_%d", slot);
		relid = get_relname_relid(name, get_namespace_oid("awa", false));
	}
	if (!OidIsValid(relid))
		elog(ERROR, "awa_shard: ring partition awa.%s is missing", name);
	if (kept != nullptr)
		*kept = relid;
	return relid;
}

/* Whether this backend still holds RowExclusiveLock on a relation (a rolled-back savepoint drops it). */
bool
holds_row_exclusive(Oid relid)
{
	LOCKTAG tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	return LockHeldByMe(&tag, RowExclusiveLock);
}

/*
 * Run a read of `ring` that yields exactly one row (its state or one of its slots), with the
 * latest committed snapshot, and return attribute `column` of that row; the row stays in
 * SPI_tuptable for the caller's other columns.
 */
Datum
ring_read(int ring, SPIPlanPtr *plan, const char *sql, int nargs, const Oid *types, Datum *values, const char *what,
		  int column, bool *isnull)
{
	keep_plan(plan, sql, nargs, types);
	exec_plan_latest(*plan, values, nullptr, true, 1, SPI_OK_SELECT, what);
	if (SPI_processed != 1)
		elog(ERROR, "awa_shard: %s ring state is missing (%s)", kRings[ring].name, what);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, column, isnull);
}

/*
 * A live arc (oldest live slot, NULL when none; current slot; slot count) as two inclusive
 * ranges [r0, r1] and [r2, r3] (the second empty unless the arc wraps).
 */
void
arc_ranges(int oldest, bool oldest_isnull, int current, int slot_count, int ranges[4])
{
	if (oldest_isnull)
		oldest = current;
	ranges[0] = oldest;
	if (oldest <= current)
	{
		ranges[1] = current;
		ranges[2] = 1;
		ranges[3] = 0;
	}
	else
	{
		ranges[1] = slot_count - 1;
		ranges[2] = 0;
		ranges[3] = current;
	}
}

/*
 * The live arc from columns first..first+2 (oldest live slot or NULL, current slot, slot
 * count: a live_sql row) of the single row in SPI_tuptable (see arc_ranges).
 */
void
arc_from_result(int first, int ranges[4])
{
	bool oldest_isnull;
	bool isnull;
	int oldest =
		DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, first + LC_OLDEST, &oldest_isnull));
	int current =
		DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, first + LC_CURRENT, &isnull));
	int slot_count =
		DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, first + LC_SLOT_COUNT, &isnull));

	arc_ranges(oldest, oldest_isnull, current, slot_count, ranges);
}

/*
 * The cursor reads of a ring without a planned statement (D22): the one row of its state
 * table by a heap scan, one slot's generation by its slot table's primary key, with the
 * AccessShareLocks a SELECT takes, in the same order (table, then index), on a snapshot the
 * caller registered (one for both reads of a cursor, as the statement's join read both at
 * once). A caller without SELECT on the tables falls back to the statements, which raise
 * what they raised.
 */

/*
 * Open awa.<table> for a direct read; nullptr without SELECT on it, or under Citus, where the
 * table here may be a shell whose rows live in shards that only a statement reaches.
 */
Relation
open_for_read(const char *table)
{
	Oid relid = get_relname_relid(table, get_namespace_oid("awa", false));

	if (citus_present())
		return nullptr;
	if (!OidIsValid(relid))
		elog(ERROR, "awa_shard: table awa.%s is missing", table);
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return nullptr;
	return table_open(relid, AccessShareLock);
}

/* Attribute `name` of the row in `slot` (an int4 or int8 column, never NULL). */
Datum
read_attribute(TupleTableSlot *slot, Relation rel, const char *name)
{
	bool isnull;
	AttrNumber attnum = InvalidAttrNumber;
	TupleDesc desc = RelationGetDescr(rel);

	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped && strcmp(NameStr(TupleDescAttr(desc, a)->attname), name) == 0)
			attnum = a + 1;
	if (attnum == InvalidAttrNumber)
		elog(ERROR, "awa_shard: column %s of awa.%s is missing", name, RelationGetRelationName(rel));
	return slot_getattr(slot, attnum, &isnull);
}

/*
 * The current slot (and, with slot_count, the slot count) of a ring by a heap scan of its
 * one-row state table; false: no privilege.
 */
bool
read_cursor_direct(int ring, Snapshot snapshot, int *current, int *slot_count = nullptr)
{
	Relation rel = open_for_read(kRings[ring].state_table);
	TableScanDesc scan;
	TupleTableSlot *slot;
	int rows = 0;

	if (rel == nullptr)
		return false;
	scan = table_beginscan(rel, snapshot, 0, nullptr);
	slot = table_slot_create(rel, nullptr);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		*current = DatumGetInt32(read_attribute(slot, rel, "current_slot"));
		if (slot_count != nullptr)
			*slot_count = DatumGetInt32(read_attribute(slot, rel, "slot_count"));
		rows++;
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	if (rows != 1)
		elog(ERROR, "awa_shard: %s ring state is missing (ring cursor read)", kRings[ring].name);
	return true;
}

/* The generation of one slot of a ring by its primary key; false: no privilege. */
bool
read_generation_direct(int ring, Snapshot snapshot, int slot_no, int64 *generation)
{
	Relation rel = open_for_read(kRings[ring].slots_table);
	Relation index;
	IndexScanDesc scan;
	ScanKeyData key;
	TupleTableSlot *slot;
	bool found;

	if (rel == nullptr)
		return false;
	index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(slot_no));
	scan = index_beginscan(rel, index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, nullptr, 0);
	slot = table_slot_create(rel, nullptr);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
		*generation = DatumGetInt64(read_attribute(slot, rel, "generation"));
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	if (!found)
		elog(ERROR, "awa_shard: %s ring state is missing (ring slot check)", kRings[ring].name);
	return true;
}

/*
 * The live arc of a ring (as live_sql: the live slot of the lowest generation, the current
 * slot, the slot count) by heap scans of its state and slot tables, and with current, the
 * current slot; false: no privilege.
 */
bool
read_arc_direct(int ring, Snapshot snapshot, int ranges[4], int *current_out = nullptr)
{
	int current;
	int slot_count;
	Relation rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	bool have_oldest = false;
	int oldest = 0;
	int64 oldest_generation = 0;

	if (!read_cursor_direct(ring, snapshot, &current, &slot_count))
		return false;
	rel = open_for_read(kRings[ring].slots_table);
	if (rel == nullptr)
		return false;
	scan = table_beginscan(rel, snapshot, 0, nullptr);
	slot = table_slot_create(rel, nullptr);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		int64 generation = DatumGetInt64(read_attribute(slot, rel, "generation"));

		if (generation >= 0 && (!have_oldest || generation < oldest_generation))
		{
			have_oldest = true;
			oldest_generation = generation;
			oldest = DatumGetInt32(read_attribute(slot, rel, "slot"));
		}
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	arc_ranges(oldest, !have_oldest, current, slot_count, ranges);
	if (current_out != nullptr)
		*current_out = current;
	return true;
}

/* A relation's relcache entry was invalidated (all of them: relid 0): forget rings read from it, and kept partitions.
 */
void
on_ring_relcache_inval(Datum arg, Oid relid)
{
	forget_kept_partitions(relid);
	for (CachedRing &c : cached)
		if (!OidIsValid(relid) || relid == c.state_oid || relid == c.slots_oid)
			c.stamp = 0;
}

/*
 * Whether `rel` carries both ring triggers in a state that fires for every writer: the
 * statement trigger ring_changed (every statement, TRUNCATE included) and the row trigger
 * ring_row_changed (a logical replication apply worker fires row triggers only).
 */
bool
has_ring_trigger(Relation rel)
{
	bool statement = false;
	bool row = false;

	if (rel->trigdesc == nullptr)
		return false;
	for (int i = 0; i < rel->trigdesc->numtriggers; i++)
	{
		const Trigger &t = rel->trigdesc->triggers[i];

		if (t.tgenabled != TRIGGER_FIRES_ALWAYS)
			continue;
		statement = statement || strcmp(t.tgname, "ring_changed") == 0;
		row = row || strcmp(t.tgname, "ring_row_changed") == 0;
	}
	return statement && row;
}

/*
 * Whether a ring's tables may be cached: this user may read them, no Citus, and both carry
 * their ring triggers (a 1.0 catalog does not); their OIDs in *state_oid and *slots_oid.
 */
bool
ring_tables_cacheable(int ring, Oid *state_oid, Oid *slots_oid)
{
	Relation state = open_for_read(kRings[ring].state_table);
	Relation slots = state == nullptr ? nullptr : open_for_read(kRings[ring].slots_table);
	bool cacheable = slots != nullptr && has_ring_trigger(state) && has_ring_trigger(slots);

	if (cacheable)
	{
		*state_oid = RelationGetRelid(state);
		*slots_oid = RelationGetRelid(slots);
	}
	if (slots != nullptr)
		table_close(slots, NoLock);
	if (state != nullptr)
		table_close(state, NoLock);
	return cacheable;
}

/*
 * Read a ring's live arc, current slot and its generation into the cache under `stamp`, on
 * one latest snapshot (read_arc_direct, read_generation_direct). False where nothing may be
 * cached (ring_tables_cacheable).
 */
bool
fill_ring_cache(int ring, std::uint64_t stamp)
{
	CachedRing c;
	Snapshot snapshot;
	bool read;

	if (!ring_tables_cacheable(ring, &c.state_oid, &c.slots_oid))
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	read = read_arc_direct(ring, snapshot, c.arc, &c.current) &&
		   read_generation_direct(ring, snapshot, c.current, &c.current_generation);
	UnregisterSnapshot(snapshot);
	if (!read)
		return false;
	c.stamp = stamp;
	c.user = GetUserId();
	if (!ring_cache_callback_registered)
	{
		watch_relcache(on_ring_relcache_inval);
		ring_cache_callback_registered = true;
	}
	cached[ring] = c;
	return true;
}

/*
 * A ring's cursor and live arc as of the latest committed state, from the cache (read into
 * it when stale), or nullptr where they must be read by the caller (see the file comment).
 */
const CachedRing *
cached_ring(int ring)
{
	std::uint64_t stamp;
	const CachedRing &c = cached[ring];

	/* A trigger disabled or a table replaced since: its invalidation drops the entry first. */
	AcceptInvalidationMessages();
	stamp = ring_state_stamp(); /* read before the tables */

	if (stamp == 0)
		return nullptr;
	if (c.stamp == stamp && c.user == GetUserId())
		return &c;
	return fill_ring_cache(ring, stamp) ? &c : nullptr;
}

/* A ring's cursor read with the queue ring's live_sql row beside it (from column kArcAfterRead). */
const char *const kReadWithQueueArcSql = "SELECT c.current_slot, c.generation, a.* FROM (%s) c, (%s) a";
SPIPlanPtr read_with_queue_arc_plans[3];
constexpr int kArcAfterRead = RC_GENERATION + 1;

/*
 * Current slot and generation of a ring as of the latest committed state; with queue_arc,
 * the queue ring's live arc in the same read.
 */
RingSlot
read_current(int ring, int *queue_arc)
{
	RingSlot s;
	bool isnull;

	s.partition = InvalidOid;
	{
		const CachedRing *c = cached_ring(ring);
		const CachedRing *q = queue_arc == nullptr ? nullptr : cached_ring(static_cast<int>(Ring::Queue));

		if (c != nullptr && (queue_arc == nullptr || q != nullptr))
		{
			s.slot = c->current;
			s.generation = c->current_generation;
			if (queue_arc != nullptr)
				memcpy(queue_arc, q->arc, sizeof(q->arc));
			return s;
		}
	}
	{
		/* One snapshot for every read: a slot, its generation and the arc of one committed state. */
		Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
		bool read = read_cursor_direct(ring, snapshot, &s.slot) &&
					read_generation_direct(ring, snapshot, s.slot, &s.generation) &&
					(queue_arc == nullptr || read_arc_direct(static_cast<int>(Ring::Queue), snapshot, queue_arc));

		UnregisterSnapshot(snapshot);
		if (read)
			return s;
	}
	if (queue_arc == nullptr)
		s.slot = DatumGetInt32(ring_read(ring, &read_plans[ring], kRings[ring].read_sql, 0, nullptr, nullptr,
										 "ring cursor read", RC_CURRENT_SLOT, &isnull));
	else
	{
		char sql[1024] = "";

		if (read_with_queue_arc_plans[ring] == nullptr)
			snprintf(sql, sizeof(sql), kReadWithQueueArcSql, kRings[ring].read_sql,
					 kRings[static_cast<int>(Ring::Queue)].live_sql);
		s.slot = DatumGetInt32(ring_read(ring, &read_with_queue_arc_plans[ring], sql, 0, nullptr, nullptr,
										 "ring cursor and arc read", RC_CURRENT_SLOT, &isnull));
		arc_from_result(kArcAfterRead, queue_arc);
	}
	s.generation = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, RC_GENERATION, &isnull));
	return s;
}

/* Generation of one slot as of the latest committed state (-1: freed by prune). */
int64
read_slot_generation(int ring, int slot)
{
	static const Oid argtypes[1] = {INT4OID};
	Datum values[1] = {Int32GetDatum(slot)};
	bool isnull;
	int64 generation;
	const CachedRing *c = cached_ring(ring);
	Snapshot snapshot;
	bool read;

	if (c != nullptr && c->current == slot)
		return c->current_generation;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	read = read_generation_direct(ring, snapshot, slot, &generation);

	UnregisterSnapshot(snapshot);
	if (read)
		return generation;
	return DatumGetInt64(ring_read(ring, &check_plans[ring], kRings[ring].check_sql, 1, argtypes, values,
								   "ring slot check", kCheckGeneration, &isnull));
}

/*
 * Under Citus, whether this node has freed its own shards of a ring slot at this generation
 * (awa.ring_slot_closures, written by a worker's part of a prune: docs/scale-out.md). The
 * coordinator marks the slot free only once every worker has, so meanwhile a writer that read
 * the slot as current before it was sealed must not write into it here: it reads the ring
 * again. Latest committed state; nothing read without Citus.
 */
bool
closed_on_this_node(int ring, int slot, int64 generation)
{
	static SPIPlanPtr plan = nullptr;
	static const Oid argtypes[3] = {TEXTOID, INT4OID, INT8OID};
	Datum values[3] = {CStringGetTextDatum(kRings[ring].name), Int32GetDatum(slot), Int64GetDatum(generation)};

	if (!citus_present())
		return false;
	keep_plan(&plan, "SELECT 1 FROM awa.ring_slot_closures WHERE ring = $1 AND slot = $2 AND generation = $3", 3,
			  argtypes);
	exec_plan_latest(plan, values, nullptr, true, 1, SPI_OK_SELECT, "ring slot closure");
	return SPI_processed > 0;
}

/* Lock the partitions of one slot of a ring for writing, to the end of the transaction. */
Oid
lock_slot_partitions(int ring, int slot)
{
	Oid first = partition_oid(kRings[ring].partitions[0], slot);

	LockRelationOid(first, RowExclusiveLock);
	if (kRings[ring].partitions[1] != nullptr)
		LockRelationOid(partition_oid(kRings[ring].partitions[1], slot), RowExclusiveLock);
	return first;
}

/* The live arcs of the three rings in one read: the three rings' live_sql rows side by side. */
const char *const kAllArcsSql = "SELECT * FROM (%s) q, (%s) c, (%s) l";
SPIPlanPtr all_arcs_plan = nullptr;

} // namespace

/* OID of partition awa.<prefix><slot> of a ring (see partition_oid). */
Oid
ring_partition_oid(const char *prefix, int slot)
{
	return partition_oid(prefix, slot);
}

/*
 * The slots of `ring` that can hold rows, as two inclusive ranges [r0, r1] and [r2, r3]
 * (the second empty unless the arc wraps), as of the latest committed state. Rotation
 * makes the next slot live and prune frees the oldest only once nothing in it is needed,
 * so the live slots are the arc from the oldest live generation to the current one;
 * passing it as parameters lets the executor prune every other partition of the ring at
 * start-up, so a statement touches one to three partitions instead of all of them.
 * SPI must be connected.
 */
void
live_slot_ranges(Ring ring, int ranges[4])
{
	int r = static_cast<int>(ring);
	bool isnull;
	const CachedRing *c = cached_ring(r);
	Snapshot snapshot;
	bool read;

	if (c != nullptr)
	{
		memcpy(ranges, c->arc, sizeof(c->arc));
		return;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	read = read_arc_direct(r, snapshot, ranges);

	UnregisterSnapshot(snapshot);
	if (read)
		return;
	ring_read(r, &live_plans[r], kRings[r].live_sql, 0, nullptr, nullptr, "ring arc read", 1 + LC_CURRENT, &isnull);
	arc_from_result(1, ranges);
}

/*
 * The live arcs of all three rings (as live_slot_ranges) in one read of the latest committed
 * state, for statements that read receipts, leases and ready rows together. SPI must be
 * connected.
 */
void
live_slot_ranges_all(int queue_arc[4], int claim_arc[4], int lease_arc[4])
{
	const CachedRing *q = cached_ring(static_cast<int>(Ring::Queue));
	const CachedRing *c = q == nullptr ? nullptr : cached_ring(static_cast<int>(Ring::Claim));
	const CachedRing *l = c == nullptr ? nullptr : cached_ring(static_cast<int>(Ring::Lease));
	Snapshot snapshot;
	bool read;

	if (l != nullptr)
	{
		memcpy(queue_arc, q->arc, sizeof(q->arc));
		memcpy(claim_arc, c->arc, sizeof(c->arc));
		memcpy(lease_arc, l->arc, sizeof(l->arc));
		return;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	read = read_arc_direct(static_cast<int>(Ring::Queue), snapshot, queue_arc) &&
		   read_arc_direct(static_cast<int>(Ring::Claim), snapshot, claim_arc) &&
		   read_arc_direct(static_cast<int>(Ring::Lease), snapshot, lease_arc);

	UnregisterSnapshot(snapshot);
	if (read)
		return;
	if (all_arcs_plan == nullptr)
	{
		char sql[1024];

		snprintf(sql, sizeof(sql), kAllArcsSql, kRings[static_cast<int>(Ring::Queue)].live_sql,
				 kRings[static_cast<int>(Ring::Claim)].live_sql, kRings[static_cast<int>(Ring::Lease)].live_sql);
		keep_plan(&all_arcs_plan, sql, 0, nullptr);
	}
	exec_plan_latest(all_arcs_plan, nullptr, nullptr, true, 1, SPI_OK_SELECT, "ring arcs read");
	if (SPI_processed != 1)
		elog(ERROR, "awa_shard: ring state is missing (ring arcs read)");
	arc_from_result(1, queue_arc);
	arc_from_result(1 + LC_WIDTH, claim_arc);
	arc_from_result(1 + 2 * LC_WIDTH, lease_arc);
}

/*
 * The slot writers of `ring` append to in this transaction, with its partitions locked
 * against prune. SPI must be connected. Free after the first call of a transaction; the
 * first call costs one read when the ring has not turned since this backend last wrote
 * (the remembered slot is locked first, then confirmed current), two otherwise. With
 * queue_arc, the queue ring's live arc (as live_slot_ranges) is read too, in the same read
 * as the ring's cursor when there is one: a claim needs both.
 */
RingSlot
ring_write_slot(Ring ring, int *queue_arc)
{
	int r = static_cast<int>(ring);
	HeldSlot *h = &held[r];
	bool guessed = false;

	if (!subxact_callback_registered)
	{
		RegisterSubXactCallback(on_subxact, nullptr);
		subxact_callback_registered = true;
	}
	if (h->epoch == current_xact_epoch() && holds_row_exclusive(h->first_partition))
	{
		if (queue_arc != nullptr)
			live_slot_ranges(Ring::Queue, queue_arc);
		return h->slot;
	}
	if (h->epoch != 0)
	{
		lock_slot_partitions(r, h->slot.slot);
		guessed = true;
	}
	for (int attempt = 0;; attempt++)
	{
		RingSlot s = read_current(r, queue_arc);
		Oid first;

		/* The remembered slot was locked before this read saw it current: prune cannot free it now. */
		if (guessed && s.slot == h->slot.slot && s.generation == h->slot.generation)
		{
			h->epoch = current_xact_epoch();
			h->fenced_in = GetCurrentSubTransactionId();
			h->first_partition = partition_oid(kRings[r].partitions[0], s.slot);
			h->slot.partition = h->first_partition;
			return h->slot;
		}
		guessed = false;
		first = lock_slot_partitions(r, s.slot);
		/* A free slot (generation -1) is never written, even read as current (a rotation not yet applied here). */
		if (s.generation >= 0 && read_slot_generation(r, s.slot) == s.generation &&
			!closed_on_this_node(r, s.slot, s.generation))
		{
			h->epoch = current_xact_epoch();
			h->fenced_in = GetCurrentSubTransactionId();
			h->slot = s;
			h->slot.partition = first;
			h->first_partition = first;
			return h->slot;
		}
		/* Pruned, reused or closed here between the read and the lock: the lock is harmless, read again. */
		if (attempt >= 100)
			ereport(ERROR, (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							errmsg("could not find a live slot in the %s ring", kRings[r].name)));
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * This transaction freed `slot` of `ring` (a prune). A write slot it fenced there is no
 * longer protected: its own partition locks never conflicted with its own prune. Forget
 * it, so the next write reads and fences the live slot.
 */
void
forget_freed_slot(Ring ring, int slot)
{
	HeldSlot *h = &held[static_cast<int>(ring)];

	if (h->slot.slot == slot)
		h->epoch = 0;
}

} // namespace awa

/* awa._ring_slot_freed(ring, slot): called by the prunes after they free a slot. */
AWA_SQL_FUNCTION(awa_ring_slot_freed)
{
	awa::Ring ring = awa::ring_arg(fcinfo, 0, "p_ring");

	if (PG_ARGISNULL(1))
		PG_RETURN_VOID();
	awa::forget_freed_slot(ring, PG_GETARG_INT32(1));
	PG_RETURN_VOID();
}

/* awa._ring_write_slot(ring): the fenced write slot of a ring, for SQL writers. */
AWA_SQL_FUNCTION(awa_ring_write_slot)
{
	TupleDesc tupdesc;
	Datum values[2];
	bool nulls[2] = {false, false};
	awa::Ring ring = awa::ring_arg(fcinfo, 0, "p_ring");
	awa::RingSlot s;

	if (get_call_result_type(fcinfo, nullptr, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "awa_shard: _ring_write_slot must return a record");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	s = awa::ring_write_slot(ring);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	values[0] = Int32GetDatum(s.slot);
	values[1] = Int64GetDatum(s.generation);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

/*
 * awa._ring_live_arc(ring): the slots of a ring that can hold rows, as two inclusive
 * ranges (lo1..hi1, lo2..hi2; an empty range has lo > hi), for SQL readers that must
 * not visit the freed slots' partitions.
 */
AWA_SQL_FUNCTION(awa_ring_live_arc)
{
	TupleDesc tupdesc;
	Datum values[4];
	bool nulls[4] = {false, false, false, false};
	awa::Ring ring = awa::ring_arg(fcinfo, 0, "p_ring");
	int ranges[4];

	if (get_call_result_type(fcinfo, nullptr, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "awa_shard: _ring_live_arc must return a record");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::live_slot_ranges(ring, ranges);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	for (int k = 0; k < 4; k++)
		values[k] = Int32GetDatum(ranges[k]);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

/*
 * awa._seen_ended_by_all(xid8): whether every snapshot of this database sees transaction
 * p_xid as ended, so that no reader can still need rows that p_xid deleted or moved. A prune
 * that moved rows out of a slot truncates the slot only then (TRUNCATE is not MVCC-safe).
 * Reads the procarray's horizon for this database's tables; never waits. p_xid itself (the
 * caller's own transaction) and any transaction still running are never seen as ended; an
 * xid this cluster never assigned (restored from another one) always is.
 */
AWA_SQL_FUNCTION(awa_seen_ended_by_all)
{
	FullTransactionId fxid = PG_GETARG_FULLTRANSACTIONID(0);
	FullTransactionId next = ReadNextFullTransactionId();
	TransactionId horizon;
	Relation rel;

	if (!TransactionIdIsNormal(XidFromFullTransactionId(fxid)))
		PG_RETURN_BOOL(true);
	/* Never assigned here (a value restored from another cluster): no snapshot can need it. */
	if (FullTransactionIdFollowsOrEquals(fxid, next))
		PG_RETURN_BOOL(true);
	/* Older than any snapshot can reach (every xmin lies within 2^31 of the next xid). */
	if (U64FromFullTransactionId(next) - U64FromFullTransactionId(fxid) > (UINT64CONST(1) << 31))
		PG_RETURN_BOOL(true);
	/* Any table of this database gives the data horizon of the database, not the shared one. */
	rel = table_open(get_relname_relid("queue_ring_slots", get_namespace_oid("awa", false)), AccessShareLock);
	horizon = GetOldestNonRemovableTransactionId(rel);
	table_close(rel, AccessShareLock);
	PG_RETURN_BOOL(TransactionIdPrecedes(XidFromFullTransactionId(fxid), horizon));
}

/*
 * awa._next_xid(): the next transaction id the cluster will assign. Every transaction that
 * held an id before this call has a lower one; deadline rescue reads it after the snapshot of
 * its candidate, so that the transactions running at that snapshot are those of its list and
 * those from its xmax up to this value (awa._rescue).
 */
AWA_SQL_FUNCTION(awa_next_xid)
{
	PG_RETURN_FULLTRANSACTIONID(ReadNextFullTransactionId());
}

/* Triggers ring_changed and ring_row_changed on every ring table: cached ring cursors are untrusted until this
 * transaction ends. */
AWA_SQL_FUNCTION(awa_ring_changed)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
						errmsg("awa._ring_changed must be called as a trigger")));
	awa::note_ring_changed();
	return PointerGetDatum(nullptr);
}
