/*
 * reserve.cpp — lanes and lane_seq reservation (docs/design.md §3).
 *
 * A lane (queue, priority, enqueue_shard) owns one sequence. A reservation takes the
 * lane's advisory lock, then one nextval and (for a block) one setval. With the in-flight
 * registry (registry.cpp) it registers the block and lets the lock go at once; in lane-lock
 * mode, or when the registry is full, the lock stays held until the transaction ends.
 * A backend cache maps lane -> (sequence OID, lock key) so a known
 * lane costs no SPI, no DDL and no catalog lookup; entries created by a (sub)transaction
 * that aborts are forgotten, and a relcache invalidation of the sequence drops its entry.
 */
#include "lane_key.hpp"
#include "ordering_hash.hpp"
#include "pg_boundary.hpp"
#include "registry.hpp"
#include "reserve.hpp"
#include "shard_math.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
}

namespace awa
{

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
SPIPlanPtr ensure_plan = nullptr;
SPIPlanPtr lock_key_plan = nullptr;
SPIPlanPtr lookup_plan = nullptr;
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
		lanes = hash_create("awa_shard lanes", 128, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
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

/* Top-level end: entries of a committed creator become permanent; an aborted creator's vanish. */
void
on_xact(XactEvent event, void *arg)
{
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

/* Subtransaction end: a rolled-back savepoint takes its lanes with it. */
void
on_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
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

/*
 * Cache miss: look the lane up, or create it through awa._ensure_lane. The lane lock is
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
	bool isnull;
	bool found;
	LaneEntry *entry;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	values[1] = Int16GetDatum(key->priority);
	values[2] = Int16GetDatum(key->shard);
	keep_plan(&lock_key_plan, "SELECT awa.lane_lock_key($1, $2, $3)", 3, argtypes);
	exec_plan(lock_key_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane lock key");
	lock_key = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	lane_lock_tag(&tag, lock_key);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);
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
	if (spi_single_value(&d))
		seq_oid = DatumGetObjectId(d);
	if (!OidIsValid(seq_oid) && IsolationUsesXactSnapshot())
	{
		/*
		 * Gone from the latest state but still in this transaction's snapshot: dropped after
		 * the snapshot was taken. Creating it again would write rows the snapshot contradicts
		 * (and awa._ensure_lane, reading that snapshot, would not create it): retry instead.
		 */
		exec_plan(lookup_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane look-up in the snapshot");
		if (SPI_processed > 0)
			ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							errmsg("the lane of queue \"%.*s\" (priority %d, shard %d) was dropped after this "
								   "transaction's snapshot",
								   queue_len, queue, key->priority, key->shard),
							errhint("Retry the transaction.")));
	}
	if (!OidIsValid(seq_oid))
	{
		keep_plan(&ensure_plan, "SELECT seq_oid, lock_key, created FROM awa._ensure_lane($1, $2, $3)", 3, argtypes);
		exec_plan(ensure_plan, values, nullptr, false, 1, SPI_OK_SELECT, "lane creation");
		if (SPI_processed != 1)
			elog(ERROR, "awa_shard: lane creation returned %lu rows", static_cast<unsigned long>(SPI_processed));
		seq_oid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		created = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	}
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
 * Reserve [start, start + count) on a lane. The lane lock makes nextval + setval one step
 * and orders reservations with their registration; it is released as soon as the block is
 * registered as in flight, and held until the transaction ends otherwise (lane-lock mode,
 * registry full). Re-entrant: a lock this transaction already holds only bumps a count.
 */
int64
reserve_lane_block(const char *queue, int queue_len, int priority, int shard, int64 count)
{
	LaneKey key;
	LOCKTAG tag;
	bool found;
	LaneEntry *entry;
	int64 start;

	make_lane_key(&key, queue, queue_len, priority, shard);
	entry = static_cast<LaneEntry *>(hash_search(lane_table(), &key, HASH_FIND, &found));
	if (!found)
		entry = ensure_lane(&key, queue, queue_len);
	lane_lock_tag(&tag, entry->lock_key);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);
	/*
	 * An advisory lock takes no invalidations: a drop_queue that held this lane committed
	 * while we waited for it, and the lane's sequence is gone. Take its invalidations now; if
	 * they evicted the lane, resolve it again (the drop's commit made it a new lane).
	 */
	AcceptInvalidationMessages();
	entry = static_cast<LaneEntry *>(hash_search(lane_table(), &key, HASH_FIND, &found));
	if (!found)
		entry = ensure_lane(&key, queue, queue_len);
	start = nextval_internal(entry->seq_oid, false);
	if (count > 1)
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(entry->seq_oid), Int64GetDatum(start + count - 1));
	if (registry_register(entry->seq_oid, start))
		LockRelease(&tag, ExclusiveLock, false);
	return start;
}

/* Hooks that keep the lane cache honest across aborts and DDL. */
void
init_lane_cache()
{
	CacheRegisterRelcacheCallback(on_relcache_inval, PointerGetDatum(nullptr));
	RegisterXactCallback(on_xact, nullptr);
	RegisterSubXactCallback(on_subxact, nullptr);
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
