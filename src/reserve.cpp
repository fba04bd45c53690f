/*
 * reserve.cpp — lanes and lane_seq reservation (docs/design.md §3).
 *
 * A lane (queue, priority, enqueue_shard) owns one sequence. A reservation takes the
 * lane's advisory lock, then one nextval and (for a block) one setval. With the in-flight
 * registry (registry.cpp) it registers the block and lets the lock go at once, always (a
 * full registry overflows into dynamic shared memory); in lane-lock mode the lock stays
 * held until the transaction ends.
 * A backend cache maps lane -> (sequence OID, lock key) so a known
 * lane costs no SPI, no DDL and no catalog lookup; entries created by a (sub)transaction
 * that aborts are forgotten, and a relcache invalidation of the sequence drops its entry.
 */
#include "citus.hpp"
#include "relcache_watch.hpp"
#include "lane_key.hpp"
#include "ordering_hash.hpp"
#include "pg_boundary.hpp"
#include "registry.hpp"
#include "reserve.hpp"
#include "shard_math.hpp"
#include "spi_util.hpp"
#include "statement_settings.hpp"
#include "validate.hpp"
#include "wakeup.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/guc.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace awa
{

int lane_lock_wait = kLaneLockWaitOn;

namespace
{

/* A known lane. created_subid is set while the creating transaction is still open. */
struct LaneEntry
{
	LaneKey key;
	Oid seq_oid;
	int64 lock_key;
	SubTransactionId created_subid;
};

HTAB *lanes = nullptr;
int pending_created = 0;
SPIPlanPtr head_exists_plan = nullptr;
SPIPlanPtr insert_heads_plan = nullptr;
SPIPlanPtr lookup_plan = nullptr;
SPIPlanPtr lane_position_plan = nullptr;
SPIPlanPtr peek_plan = nullptr;

/* The lock tag pg_advisory_xact_lock(bigint) uses for a lane's lock key. */
void
lane_lock_tag(LOCKTAG *tag, int64 lock_key)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, static_cast<uint32>(lock_key >> 32), static_cast<uint32>(lock_key), 1);
}

/* The lane cache, created on first use. */
HTAB *
lane_table()
{
	if (lanes == nullptr)
	{
		HASHCTL ctl;

		std::memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LaneKey);
		ctl.entrysize = sizeof(LaneEntry);
		ctl.hcxt = TopMemoryContext;
		lanes = hash_create("awa_shard lanes", 128, &ctl, HASH_ELEM | HASH_CONTEXT | use_lane_key_functions(&ctl));
		pending_created = 0;
	}
	return lanes;
}

/* Remove entries matching a predicate (the cache is small: one entry per lane used). */
template <typename Pred>
void
evict_if(Pred pred)
{
	HASH_SEQ_STATUS status;
	LaneEntry *entry;

	if (lanes == nullptr)
		return;
	hash_seq_init(&status, lanes);
	while ((entry = static_cast<LaneEntry *>(hash_seq_search(&status))) != nullptr)
	{
		if (pred(entry))
		{
			if (entry->created_subid != InvalidSubTransactionId)
				pending_created--;
			hash_search(lanes, &entry->key, HASH_REMOVE, nullptr);
		}
	}
}

/* Relcache invalidation: a dropped or recreated sequence must not be used again. */
void
on_relcache_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid)
		evict_if([](LaneEntry *) { return true; });
	else
		evict_if([relid](LaneEntry *e) { return e->seq_oid == relid; });
}

/* The last lane, in lane order, whose lock this transaction holds to its end (lane-lock mode, or created). */
LaneKey last_held;
bool holds_lane = false;
/* The maintenance worker: it never waits for a lane lock, whatever awa_shard.lane_lock_wait says. */
bool never_wait = false;

/*
 * What last_held was before a subtransaction first moved it, so that its rollback, which
 * releases the locks it took, gives the earlier value back (deeper than kSavedHeld: the later
 * value stays, which only refuses more).
 */
struct SavedHeld
{
	SubTransactionId subid;
	bool holds;
	LaneKey key;
};
constexpr int kSavedHeld = 16;
SavedHeld saved_held[kSavedHeld];
int nsaved_held = 0;

/* last_held is about to move in the current subtransaction: keep what it was (once per subtransaction). */
void
save_last_held()
{
	SubTransactionId subid = GetCurrentSubTransactionId();

	if (subid == TopSubTransactionId || (nsaved_held > 0 && saved_held[nsaved_held - 1].subid == subid) ||
		nsaved_held == kSavedHeld)
		return;
	saved_held[nsaved_held].subid = subid;
	saved_held[nsaved_held].holds = holds_lane;
	if (holds_lane)
		saved_held[nsaved_held].key = last_held;
	nsaved_held++;
}

/* Top-level end: the transaction holds no lane lock any more; entries of a committed creator become permanent, an
 * aborted creator's vanish. */
void
on_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
	{
		holds_lane = false; /* its lane locks are released (or the prepared transaction's now) */
		nsaved_held = 0;
	}
	if (pending_created == 0)
		return;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		evict_if([](LaneEntry *e) { return e->created_subid != InvalidSubTransactionId; });
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		HASH_SEQ_STATUS status;
		LaneEntry *entry;

		hash_seq_init(&status, lanes);
		while ((entry = static_cast<LaneEntry *>(hash_seq_search(&status))) != nullptr)
			entry->created_subid = InvalidSubTransactionId;
		pending_created = 0;
	}
}

/*
 * Subtransaction end: a rolled-back savepoint takes its lanes with it, and the locks it took
 * (last_held goes back to what it was before); a committed one hands what it saved to its
 * parent, unless the parent saved an earlier value itself.
 */
void
on_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		while (nsaved_held > 0 && saved_held[nsaved_held - 1].subid >= my_subid)
		{
			const SavedHeld &saved = saved_held[--nsaved_held];

			holds_lane = saved.holds;
			if (saved.holds)
				last_held = saved.key;
		}
	else if (event == SUBXACT_EVENT_COMMIT_SUB && nsaved_held > 0 && saved_held[nsaved_held - 1].subid == my_subid)
	{
		if ((nsaved_held > 1 && saved_held[nsaved_held - 2].subid == parent_subid) ||
			parent_subid == TopSubTransactionId)
			nsaved_held--;
		else
			saved_held[nsaved_held - 1].subid = parent_subid;
	}
	if (pending_created == 0)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		evict_if([my_subid](LaneEntry *e) { return e->created_subid == my_subid; });
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		HASH_SEQ_STATUS status;
		LaneEntry *entry;

		hash_seq_init(&status, lanes);
		while ((entry = static_cast<LaneEntry *>(hash_seq_search(&status))) != nullptr)
			if (entry->created_subid == my_subid)
				entry->created_subid = parent_subid;
	}
}

} // namespace

/*
 * The name of a lane's sequence: 'queue_enqueue_seq_' and the md5 of 'queue:priority:shard'.
 * The rule of 1.0's SQL function, kept so that every existing lane keeps its sequence.
 */
void
lane_sequence_name(const char *queue, int queue_len, int priority, int shard, char out[kLaneSeqNameSize])
{
	StringInfoData buf;
	char hex[33];
	const char *errstr = nullptr;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, queue, queue_len);
	appendStringInfo(&buf, ":%d:%d", priority, shard);
	if (!pg_md5_hash(buf.data, buf.len, hex, &errstr))
		elog(ERROR, "awa_shard: md5 of a lane name failed: %s", errstr ? errstr : "unknown");
	pfree(buf.data);
	snprintf(out, kLaneSeqNameSize, "queue_enqueue_seq_%s", hex);
}

/*
 * A lane's advisory-lock key: hashtextextended('awa.' || quote_ident(sequence name), 0), the
 * rule of 1.0's SQL function (a sequence name is lower-case hex, so the hash of its bytes
 * under any deterministic collation).
 */
int64
lane_lock_key(const char *queue, int queue_len, int priority, int shard)
{
	char name[kLaneSeqNameSize];
	StringInfoData buf;
	int64 key;

	lane_sequence_name(queue, queue_len, priority, shard, name);
	initStringInfo(&buf);
	appendStringInfo(&buf, "awa.%s", quote_identifier(name));
	key = DatumGetInt64(hash_any_extended(reinterpret_cast<const unsigned char *>(buf.data), buf.len, 0));
	pfree(buf.data);
	return key;
}

namespace
{

/* The OID of awa.<name>, InvalidOid when there is none (to_regclass). */
Oid
sequence_oid(const char *name)
{
	return RangeVarGetRelid(makeRangeVar(const_cast<char *>("awa"), pstrdup(name), -1), NoLock, true);
}

/*
 * Create the lane's sequence awa.<name>, belonging to the lane heads' seq_name column: of
 * awa.queue_enqueue_heads on one server; under Citus, once distributed, of its shard holding
 * the queue on this node (so the sequence goes with that shard when Citus drops it after a
 * shard move or split); before that, of nothing (a sequence cannot belong to a distributed
 * table). SPI connected.
 */
void
create_lane_sequence(const char *name, text *queue)
{
	StringInfoData ddl;
	const char *owner = "awa.queue_enqueue_heads";

	if (citus_present())
		owner = queue_heads_shard_name(queue);
	initStringInfo(&ddl);
	appendStringInfo(&ddl, "CREATE SEQUENCE awa.%s AS bigint START 1 MINVALUE 1 CACHE 1", quote_identifier(name));
	if (owner != nullptr)
		appendStringInfo(&ddl, " OWNED BY %s.seq_name", owner);
	pin_statement_settings();
	if (SPI_execute(ddl.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "awa_shard: creating a lane sequence failed");
}

/*
 * A lane's sequence made again on the node its queue's shards moved to (or after Citus
 * dropped the split shard it belonged to): its last value set to the lane's furthest
 * position in use -- the highest lane_seq of its ready and finished rows, or its claim cursor
 * less one -- so new jobs go after every job of the lane and at or past its cursor. SPI
 * connected, the lane lock held (no producer of the lane on this node meanwhile).
 */
void
restore_lane_position(Oid seq_oid, const Datum *lane)
{
	static const Oid argtypes[3] = {TEXTOID, INT2OID, INT2OID};
	Datum last;

	keep_plan(&lane_position_plan,
			  "SELECT greatest((SELECT max(r.lane_seq) FROM awa.ready_entries r "
			  "                  WHERE r.queue = $1 AND r.priority = $2 AND r.enqueue_shard = $3), "
			  "                (SELECT max(d.lane_seq) FROM awa.done_entries d "
			  "                  WHERE d.queue = $1 AND d.priority = $2 AND d.enqueue_shard = $3), "
			  "                (SELECT h.claim_seq - 1 FROM awa.lane_cursors h "
			  "                  WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3))",
			  3, argtypes);
	exec_plan_latest(lane_position_plan, lane, nullptr, true, 1, SPI_OK_SELECT, "lane position");
	if (spi_single_value(&last) && DatumGetInt64(last) >= 1)
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq_oid), last);
}

/*
 * Under Citus: whether the lane's sequence awa.<name> (seq_oid) was left behind by a shard of
 * the lane heads that is no longer the queue's (a split or move whose old shard Citus could
 * not drop yet, and the queue's shards came back to this node): it belongs to another shard
 * than the queue's local one, so its values are stale. It is dropped (the caller then makes
 * it again at the lane's position). SPI connected, the lane lock held.
 */
bool
drop_stale_lane_sequence(Oid seq_oid, const char *name, text *queue)
{
	static SPIPlanPtr owner_plan = nullptr;
	static const Oid argtypes[2] = {OIDOID, TEXTOID};
	Datum values[2];
	Datum owned;
	char *shard;
	StringInfoData ddl;

	if (citus_group() < 0 || (shard = queue_heads_shard_name(queue)) == nullptr)
		return false;
	values[0] = ObjectIdGetDatum(seq_oid);
	values[1] = CStringGetTextDatum(shard);
	keep_plan(&owner_plan,
			  "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d "
			  "               WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = $1 "
			  "                 AND d.deptype = 'a' AND d.refobjid = pg_catalog.to_regclass($2))",
			  2, argtypes);
	exec_plan_latest(owner_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane sequence owner");
	if (spi_single_value(&owned) && DatumGetBool(owned))
		return false;
	initStringInfo(&ddl);
	appendStringInfo(&ddl, "DROP SEQUENCE awa.%s", quote_identifier(name));
	pin_statement_settings();
	if (SPI_execute(ddl.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "awa_shard: dropping a stale lane sequence failed");
	return true;
}

/*
 * Under Citus: make again the sequence awa.<name> of the lane (queue, priority, shard) in
 * lane[0..2], whose head is on this node without it, at the lane's position. Returns its OID.
 * SPI connected, the lane lock held.
 */
Oid
restore_lane_sequence(const char *name, const Datum *lane)
{
	Oid seq_oid;

	create_lane_sequence(name, DatumGetTextPP(lane[0]));
	seq_oid = sequence_oid(name);
	restore_lane_position(seq_oid, lane);
	return seq_oid;
}

/*
 * Create a lane's head rows and sequence if its enqueue head is missing, with the lane lock
 * held (SPI connected; the head is looked for on the latest committed state, so a lane made
 * after a REPEATABLE READ caller's snapshot is found, not made twice). Under Citus a head without its sequence on this
 * node (the queue's shards moved here, or the shard its sequence belonged to was dropped after a split) gets it again
 * (restore_lane_position). Returns the sequence's OID; *created says whether this call
 * created the lane or its sequence. 55000 when the head exists without its sequence on one
 * server.
 */
Oid
create_lane_objects(const char *queue, int queue_len, int priority, int shard, bool *created)
{
	static const Oid argtypes[4] = {TEXTOID, INT2OID, INT2OID, TEXTOID};
	char name[kLaneSeqNameSize];
	Datum values[4];
	Oid seq_oid;

	lane_sequence_name(queue, queue_len, priority, shard, name);
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	values[1] = Int16GetDatum(priority);
	values[2] = Int16GetDatum(shard);
	values[3] = CStringGetTextDatum(name);
	*created = false;
	keep_plan(&head_exists_plan,
			  "SELECT 1 FROM awa.queue_enqueue_heads WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3", 3,
			  argtypes);
	/* On the latest committed state, under the lane lock: a lane made after a REPEATABLE READ snapshot exists. */
	exec_plan_latest(head_exists_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane head look-up");
	if (SPI_processed == 0)
	{
		if (!OidIsValid(sequence_oid(name)))
			create_lane_sequence(name, DatumGetTextPP(values[0]));
		keep_plan(&insert_heads_plan,
				  "WITH e AS (INSERT INTO awa.queue_enqueue_heads (queue, priority, enqueue_shard, seq_name) "
				  "VALUES ($1, $2, $3, $4)) "
				  "INSERT INTO awa.queue_claim_heads (queue, priority, enqueue_shard) VALUES ($1, $2, $3) "
				  "ON CONFLICT DO NOTHING",
				  4, argtypes);
		exec_plan(insert_heads_plan, values, nullptr, false, 0, SPI_OK_INSERT, "lane heads");
		*created = true;
	}
	seq_oid = sequence_oid(name);
	if (!OidIsValid(seq_oid) && citus_group() >= 0)
	{
		seq_oid = restore_lane_sequence(name, values);
		*created = true;
	}
	if (!OidIsValid(seq_oid))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("missing enqueue lane sequence for queue %.*s, priority %d, shard %d", queue_len, queue,
							   priority, shard)));
	return seq_oid;
}

/*
 * Take a lane's lock for an enqueue; `to_end`: it is held until the transaction ends. Under
 * awa_shard.lane_lock_wait = off a lane another transaction holds raises 55P03 at once; under
 * `ordered` it does so only when this transaction already holds, to its end, the lock of a lane
 * at or after it in lane order (compare_lanes), and waits otherwise. Transactions that wait
 * only in that order, as maintenance passes do, cannot close a cycle with each other or with
 * producers that take their lanes in that order (batches do); one that is refused leaves the
 * lane to the next try.
 */
void
lock_lane_for_enqueue(const LOCKTAG *tag, LOCKMODE mode, const char *queue, int queue_len, int priority, int shard,
					  bool to_end)
{
	LaneRef lane{queue, static_cast<std::size_t>(queue_len), priority, shard};
	/* Whether this lane comes after every lane the transaction holds to its end. */
	bool after_held =
		!holds_lane || compare_lanes(LaneRef{last_held.queue, strnlen(last_held.queue, sizeof(last_held.queue)),
											 last_held.priority, last_held.shard},
									 lane) < 0;
	bool wait =
		!never_wait && (lane_lock_wait == kLaneLockWaitOn || (lane_lock_wait == kLaneLockWaitOrdered && after_held));

	if (LockAcquire(tag, mode, false, !wait) == LOCKACQUIRE_NOT_AVAIL)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lane (%.*s, %d, %d) is locked by another transaction", queue_len, queue, priority, shard),
				 errdetail("awa_shard.lane_lock_wait is %s: the enqueue does not wait for the lane's lock.",
						   never_wait							? "off in the maintenance worker"
						   : lane_lock_wait == kLaneLockWaitOff ? "off"
																: "ordered, and a later lane is held"),
				 errhint("Try again once that transaction has ended.")));
	if (to_end && after_held)
	{
		save_last_held();
		make_lane_key(&last_held, queue, queue_len, priority, shard);
		holds_lane = true;
	}
}

/*
 * Cache miss: look the lane up, or create it (create_lane_objects). The lane lock is
 * taken first and the look-up reads the latest committed state: a lane created by a
 * transaction that committed after this (REPEATABLE READ) transaction's snapshot is found,
 * not created a second time (which would fail on the heads' primary key).
 */
LaneEntry *
ensure_lane(const LaneKey *key, const char *queue, int queue_len)
{
	static const Oid argtypes[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3];
	Datum d;
	Oid seq_oid = InvalidOid;
	int64 lock_key;
	LOCKTAG tag;
	bool created = false;
	bool head_now;
	bool found;
	LaneEntry *entry;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	values[1] = Int16GetDatum(key->priority);
	values[2] = Int16GetDatum(key->shard);
	lock_key = lane_lock_key(queue, queue_len, key->priority, key->shard);
	lane_lock_tag(&tag, lock_key);
	lock_lane_for_enqueue(&tag, ExclusiveLock, queue, queue_len, key->priority, key->shard, true);
	/*
	 * The lane may have been dropped or created while we waited for its lock, and an
	 * advisory lock takes no invalidations: without them the look-up's to_regclass could
	 * answer from a stale catalog cache (a sequence created meanwhile looks missing).
	 */
	AcceptInvalidationMessages();
	keep_plan(&lookup_plan,
			  "SELECT to_regclass('awa.' || quote_ident(seq_name))::oid FROM awa.queue_enqueue_heads "
			  "WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3",
			  3, argtypes);
	exec_plan_latest(lookup_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane look-up");
	head_now = SPI_processed > 0;
	if (spi_single_value(&d))
		seq_oid = DatumGetObjectId(d);
	/* (A head without its sequence is not a dropped lane: create_lane_objects tells.) */
	if (!OidIsValid(seq_oid) && !head_now && IsolationUsesXactSnapshot())
	{
		/*
		 * Gone from the latest state but still in this transaction's snapshot: dropped after
		 * the snapshot was taken. Creating it again would write rows the snapshot contradicts
		 * (and the creation, reading that snapshot, would not create it): retry instead.
		 */
		exec_plan(lookup_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane look-up in the snapshot");
		if (SPI_processed > 0)
			ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							errmsg("the lane of queue \"%.*s\" (priority %d, shard %d) was dropped after this "
								   "transaction's snapshot",
								   queue_len, queue, key->priority, key->shard),
							errhint("Retry the transaction.")));
	}
	if (OidIsValid(seq_oid) && head_now)
	{
		char name[kLaneSeqNameSize];

		lane_sequence_name(queue, queue_len, key->priority, key->shard, name);
		if (drop_stale_lane_sequence(seq_oid, name, DatumGetTextPP(values[0])))
			seq_oid = InvalidOid; /* made again below, at the lane's position */
	}
	if (!OidIsValid(seq_oid))
		seq_oid = create_lane_objects(queue, queue_len, key->priority, key->shard, &created);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	/* A lane this transaction created stays locked until it commits (others cannot use it
	 * before then anyway); a lane that existed needs no lock beyond the reservation's. */
	if (!created && registry_in_force())
		LockRelease(&tag, ExclusiveLock, false);

	entry = static_cast<LaneEntry *>(hash_search(lane_table(), key, HASH_ENTER, &found));
	if (found && entry->created_subid != InvalidSubTransactionId)
		pending_created--;
	entry->seq_oid = seq_oid;
	entry->lock_key = lock_key;
	entry->created_subid = created ? GetCurrentSubTransactionId() : InvalidSubTransactionId;
	if (created)
		pending_created++;
	return entry;
}

/* Next value of a lane's sequence without reserving it (1 for a lane that does not exist). */
int64
peek_lane(const char *queue, int queue_len, int priority, int shard)
{
	static const Oid argtypes[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3];
	Datum d;
	int64 next = 1;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	keep_plan(&peek_plan,
			  "SELECT coalesce(pg_sequence_last_value(to_regclass('awa.' || quote_ident(seq_name))), 0) + 1 "
			  "FROM awa.queue_enqueue_heads WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3",
			  3, argtypes);
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	values[1] = Int16GetDatum(priority);
	values[2] = Int16GetDatum(shard);
	exec_plan(peek_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane peek");
	if (spi_single_value(&d))
		next = DatumGetInt64(d);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return next;
}

} // namespace

/*
 * Reserve [start, start + count) on a lane. In registry mode a producer holds the lane's
 * advisory lock in share mode only while it reserves (drop_queue takes it exclusively, so it
 * still waits for reservations in progress and holds new ones off),
 * and the lane's reservation lock (an LWLock, registry.cpp) makes nextval, setval and the
 * registration one step: producers of one lane never queue in the lock manager. A lane this
 * transaction created stays locked exclusively until it commits (ensure_lane). In lane-lock
 * mode the advisory lock is taken exclusively and held until the transaction ends.
 * Re-entrant: a lock this transaction already holds only bumps a count.
 */
int64
reserve_lane_block(const char *queue, int queue_len, int priority, int shard, int64 count)
{
	const bool registry = registry_in_force();
	const LOCKMODE mode = registry ? ShareLock : ExclusiveLock;
	LaneKey key;
	LOCKTAG tag;
	bool found;
	LaneEntry *entry;
	int64 start;

	make_lane_key(&key, queue, queue_len, priority, shard);
	for (;;)
	{
		Oid seq_oid;

		entry = static_cast<LaneEntry *>(hash_search(lane_table(), &key, HASH_FIND, &found));
		if (!found)
			entry = ensure_lane(&key, queue, queue_len);
		lane_lock_tag(&tag, entry->lock_key);
		lock_lane_for_enqueue(&tag, mode, queue, queue_len, priority, shard, !registry);
		/*
		 * An advisory lock takes no invalidations: a drop_queue that held this lane committed
		 * while we waited for it, and the lane's sequence is gone. Take its invalidations now; if
		 * they evicted the lane, resolve it again (the drop's commit made it a new lane).
		 */
		AcceptInvalidationMessages();
		entry = static_cast<LaneEntry *>(hash_search(lane_table(), &key, HASH_FIND, &found));
		if (!found)
		{
			if (!registry)
			{
				entry = ensure_lane(&key, queue, queue_len);
				break;
			}
			/* ensure_lane takes the lock exclusively: two producers holding it shared would deadlock. */
			LockRelease(&tag, mode, false);
			continue;
		}
		/*
		 * The sequence's own lock first: the only lock that could make the reservation wait.
		 * Under Citus the sequence belongs to the local shard of the lane heads, which Citus
		 * drops some time after a shard move or split without the lane lock: once the lock
		 * comes, a sequence dropped meanwhile sends the lane to be resolved again (under Citus
		 * that makes the sequence again past the lane's rows, create_lane_objects).
		 */
		seq_oid = entry->seq_oid;
		LockRelationOid(seq_oid, RowExclusiveLock);
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(seq_oid)))
			break;
		UnlockRelationOid(seq_oid, RowExclusiveLock);
		LockRelease(&tag, mode, false);
		evict_if([seq_oid](LaneEntry *e) { return e->seq_oid == seq_oid; });
	}
	/* Its end may let other producers' rows of the queue be claimed: wake-ups must know. */
	note_reserved(queue, queue_len, entry->seq_oid);
	if (!registry)
	{
		start = nextval_internal(entry->seq_oid, false);
		if (count > 1)
			DirectFunctionCall2(setval_oid, ObjectIdGetDatum(entry->seq_oid), Int64GetDatum(start + count - 1));
		(void)registry_register(entry->seq_oid, start);
		return start;
	}
	{
		LWLock *order = lane_reservation_lock(entry->lock_key);

		LWLockAcquire(order, LW_EXCLUSIVE);
		start = nextval_internal(entry->seq_oid, false);
		if (count > 1)
			DirectFunctionCall2(setval_oid, ObjectIdGetDatum(entry->seq_oid), Int64GetDatum(start + count - 1));
		(void)registry_register(entry->seq_oid, start);
		LWLockRelease(order);
	}
	LockRelease(&tag, mode, false);
	return start;
}

/* Hooks that keep the lane cache honest across aborts and DDL. */
void
init_lane_cache()
{
	watch_relcache(on_relcache_inval);
	RegisterXactCallback(on_xact, nullptr);
	RegisterSubXactCallback(on_subxact, nullptr);
}

/* The maintenance worker never waits for a lane lock (reserve.hpp). */
void
never_wait_for_lane_locks()
{
	never_wait = true;
}

/* awa_shard.lane_lock_wait. */
void
define_lane_lock_settings()
{
	static const struct config_enum_entry options[] = {
		{"on", kLaneLockWaitOn, false},	   {"ordered", kLaneLockWaitOrdered, false},
		{"off", kLaneLockWaitOff, false},  {"true", kLaneLockWaitOn, true},
		{"false", kLaneLockWaitOff, true}, {"yes", kLaneLockWaitOn, true},
		{"no", kLaneLockWaitOff, true},	   {"1", kLaneLockWaitOn, true},
		{"0", kLaneLockWaitOff, true},	   {nullptr, 0, false}};

	DefineCustomEnumVariable("awa_shard.lane_lock_wait",
							 "Whether an enqueue waits for a lane lock another transaction holds: on, ordered or off.",
							 "off: it fails at once with 55P03 instead; ordered: it waits only for a lane after every "
							 "lane its transaction holds (lane order). Maintenance passes run ordered.",
							 &lane_lock_wait, kLaneLockWaitOn, options, PGC_USERSET, 0, nullptr, nullptr, nullptr);
}

} // namespace awa

/* awa.reserve_enqueue_seq(queue, priority, shard, count). */
AWA_SQL_FUNCTION(awa_reserve_enqueue_seq)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	int priority;
	int shard;
	int64 count;

	priority = awa::priority_arg(fcinfo, 1, "p_priority");
	shard = awa::enqueue_shard_arg(fcinfo, 2, "p_enqueue_shard");
	count = awa::reserve_count_arg(fcinfo, 3, "p_count");
	if (count <= 0)
		return Int64GetDatum(awa::peek_lane(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard));
	return Int64GetDatum(awa::reserve_lane_block(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard, count));
}

/* awa.lane_sequence_name(queue, priority, shard): the name of a lane's sequence. */
AWA_SQL_FUNCTION(awa_lane_sequence_name)
{
	text *queue = PG_GETARG_TEXT_PP(0);
	char name[awa::kLaneSeqNameSize];

	awa::lane_sequence_name(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), awa::int32_arg(fcinfo, 1, "p_priority"),
							awa::int32_arg(fcinfo, 2, "p_enqueue_shard"), name);
	PG_RETURN_TEXT_P(cstring_to_text(name));
}

/* awa.lane_lock_key(queue, priority, shard): the advisory-lock key of a lane. */
AWA_SQL_FUNCTION(awa_lane_lock_key)
{
	text *queue = PG_GETARG_TEXT_PP(0);

	PG_RETURN_INT64(awa::lane_lock_key(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue),
									   awa::int32_arg(fcinfo, 1, "p_priority"),
									   awa::int32_arg(fcinfo, 2, "p_enqueue_shard")));
}

/*
 * awa._restore_lane_sequence(queue, priority, shard) -> boolean: under Citus, make again the
 * sequence of a lane whose head is on this node without it (the queue's shards moved here, or
 * the split shard it belonged to was dropped), at the lane's position, keeping the lane lock
 * to commit. Only a restore: false, nothing done, when the lane lock is held by another
 * transaction (tried, never waited for: maintenance does not queue behind a producer), when
 * the lane is gone (dropped meanwhile, on the latest committed state) or has its sequence, or
 * without Citus.
 */
AWA_SQL_FUNCTION(awa_restore_lane_sequence)
{
	static SPIPlanPtr head_now_plan = nullptr;
	static const Oid argtypes[3] = {TEXTOID, INT2OID, INT2OID};
	text *queue = PG_GETARG_TEXT_PP(0);
	int priority = PG_GETARG_INT16(1);
	int shard = PG_GETARG_INT16(2);
	char name[awa::kLaneSeqNameSize];
	Datum lane[3] = {PointerGetDatum(queue), Int16GetDatum(priority), Int16GetDatum(shard)};
	bool restored = false;
	LOCKTAG tag;

	if (awa::citus_group() < 0)
		PG_RETURN_BOOL(false);
	awa::check_queue_bytes(VARSIZE_ANY_EXHDR(queue));
	awa::lane_lock_tag(&tag, awa::lane_lock_key(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard));
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		PG_RETURN_BOOL(false);
	AcceptInvalidationMessages(); /* a sequence made or dropped while the lock was held elsewhere */
	awa::lane_sequence_name(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard, name);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::keep_plan(&head_now_plan,
				   "SELECT 1 FROM awa.queue_enqueue_heads WHERE queue = $1 AND priority = $2 AND enqueue_shard = $3", 3,
				   argtypes);
	awa::exec_plan_latest(head_now_plan, lane, nullptr, true, 1, SPI_OK_SELECT, "lane head look-up");
	if (SPI_processed > 0 && !OidIsValid(awa::sequence_oid(name)))
	{
		(void)awa::restore_lane_sequence(name, lane);
		restored = true;
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!restored)
		LockRelease(&tag, ExclusiveLock, false);
	PG_RETURN_BOOL(restored);
}

/*
 * awa._ensure_lane(queue, priority, shard) -> (seq_oid, lock_key, created): create a lane's
 * heads and sequence if missing, under the lane lock (taken here, held to commit).
 */
AWA_SQL_FUNCTION(awa_ensure_lane)
{
	text *queue = PG_GETARG_TEXT_PP(0);
	int priority = PG_GETARG_INT16(1);
	int shard = PG_GETARG_INT16(2);
	int64 lock_key = awa::lane_lock_key(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard);
	TupleDesc desc;
	Datum values[3];
	bool nulls[3] = {false, false, false};
	bool created;
	Oid seq_oid;
	LOCKTAG tag;

	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "awa_shard: _ensure_lane must return a record");
	awa::lane_lock_tag(&tag, lock_key);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	seq_oid = awa::create_lane_objects(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), priority, shard, &created);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	values[0] = ObjectIdGetDatum(seq_oid);
	values[1] = Int64GetDatum(lock_key);
	values[2] = BoolGetDatum(created);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
