/*
 * stats.cpp — per-(queue, enqueue_shard) live counters since server start or the database's
 * last reset: enqueued, claimed, completed, failed. Kept in shared memory when the library is preloaded
 * (awa.shard_stats, like pg_stat_statements); without preload nothing is counted and
 * the view falls back to what the tables can tell (see awa.shard_stats in the install scripts).
 */
#include "lane_key.hpp"
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "stats.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include <cstdint>
#include <cstring>

namespace awa
{

namespace
{

constexpr int kMaxStatEntries = 2048;
constexpr int kStatKinds = 4;
/* Databases whose counters were reset since the server started, remembered with the time. */
constexpr int kResetRecords = 256;

/* Key: database, queue bytes (zero padded) and shard: one database never sees another's. */
struct StatKey
{
	Oid dbid;
	char queue[kMaxQueueBytes + 1];
	int16 shard;
};

/* Hash of a StatKey over its queue's bytes, not their padding (dynahash HashValueFunc). */
uint32
stat_key_hash(const void *key, Size keysize)
{
	const StatKey *k = static_cast<const StatKey *>(key);
	uint32 h = padded_queue_hash(k->queue, sizeof(k->queue));

	return hash_combine(h, hash_bytes_uint32(k->dbid ^ (static_cast<uint32>(static_cast<uint16>(k->shard)) << 20)));
}

/* 0 when two StatKeys name the same database, queue and shard (dynahash HashCompareFunc). */
int
stat_key_match(const void *a, const void *b, Size keysize)
{
	const StatKey *x = static_cast<const StatKey *>(a);
	const StatKey *y = static_cast<const StatKey *>(b);

	if (x->dbid != y->dbid || x->shard != y->shard)
		return 1;
	return strncmp(x->queue, y->queue, sizeof(x->queue));
}

struct StatEntry
{
	StatKey key;
	TimestampTz since; /* its counters count what happened since then */
	pg_atomic_uint64 counters[kStatKinds];
};

/* When a database's counters were last reset. */
struct ResetRecord
{
	Oid dbid; /* InvalidOid: free */
	TimestampTz at;
};

struct StatShared
{
	LWLock *lock;
	pg_atomic_uint64 dropped; /* increments that found the table full */
	TimestampTz started_at;	  /* when counting began: the server's start */
	bool record_lost;		  /* a reset record was overwritten (more databases reset than kResetRecords) */
	ResetRecord resets[kResetRecords];
};

StatShared *stat_shared = nullptr;
HTAB *stat_hash = nullptr;

/*
 * Since when the database's new counters count (under the lock): its last reset, else the
 * server's start; once a reset record was lost, a database without one counts from now.
 */
TimestampTz
counting_since(Oid dbid)
{
	for (const ResetRecord &r : stat_shared->resets)
		if (r.dbid == dbid)
			return r.at;
	return stat_shared->record_lost ? GetCurrentTimestamp() : stat_shared->started_at;
}

/* Remember that the database's counters were reset now (under the exclusive lock). */
void
note_reset(Oid dbid)
{
	ResetRecord *slot = nullptr;

	for (ResetRecord &r : stat_shared->resets)
		if (r.dbid == dbid)
			slot = &r;
	for (ResetRecord &r : stat_shared->resets)
		if (slot == nullptr && r.dbid == InvalidOid)
			slot = &r;
	if (slot == nullptr)
	{
		slot = &stat_shared->resets[0];
		for (ResetRecord &r : stat_shared->resets)
			if (r.at < slot->at)
				slot = &r;
		stat_shared->record_lost = true;
	}
	slot->dbid = dbid;
	slot->at = GetCurrentTimestamp();
}

} // namespace

/* Add to one counter; the entry is created on first use (exclusive lock only then). */
void
stats_add(const char *queue, int queue_len, int shard, StatKind kind, int64 n)
{
	StatKey key;
	StatEntry *entry;
	bool found;

	if (stat_shared == nullptr || n == 0)
		return;
	check_queue_bytes(queue_len);
	std::memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	std::memcpy(key.queue, queue, queue_len);
	key.shard = static_cast<int16>(shard);
	LWLockAcquire(stat_shared->lock, LW_SHARED);
	entry = static_cast<StatEntry *>(hash_search(stat_hash, &key, HASH_FIND, nullptr));
	if (entry == nullptr)
	{
		LWLockRelease(stat_shared->lock);
		LWLockAcquire(stat_shared->lock, LW_EXCLUSIVE);
		entry = static_cast<StatEntry *>(hash_search(stat_hash, &key, HASH_ENTER_NULL, &found));
		if (entry == nullptr)
		{
			pg_atomic_fetch_add_u64(&stat_shared->dropped, 1);
			LWLockRelease(stat_shared->lock);
			return;
		}
		if (!found)
		{
			entry->since = counting_since(MyDatabaseId);
			for (int k = 0; k < kStatKinds; k++)
				pg_atomic_init_u64(&entry->counters[k], 0);
		}
	}
	pg_atomic_fetch_add_u64(&entry->counters[static_cast<int>(kind)], static_cast<std::uint64_t>(n));
	LWLockRelease(stat_shared->lock);
}

/* shmem_request_hook: the counters' lock, and room for their header and hash table. */
void
stats_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard", 1);
	RequestAddinShmemSpace(
		add_size(MAXALIGN(sizeof(StatShared)), hash_estimate_size(kMaxStatEntries, sizeof(StatEntry))));
}

/* shmem_startup_hook: claim the counters and their hash table by name (initialised once). */
void
stats_shmem_startup()
{
	HASHCTL ctl;
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stat_shared = static_cast<StatShared *>(ShmemInitStruct("awa_shard stats", sizeof(StatShared), &found));
	if (!found)
	{
		stat_shared->lock = &(GetNamedLWLockTranche("awa_shard"))->lock;
		pg_atomic_init_u64(&stat_shared->dropped, 0);
		stat_shared->started_at = GetCurrentTimestamp();
		stat_shared->record_lost = false;
		std::memset(stat_shared->resets, 0, sizeof(stat_shared->resets));
	}
	std::memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(StatKey);
	ctl.entrysize = sizeof(StatEntry);
	ctl.hash = stat_key_hash;
	ctl.match = stat_key_match;
	stat_hash = ShmemInitHash("awa_shard shard stats", kMaxStatEntries, kMaxStatEntries, &ctl,
							  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa

/* awa._shard_stats() -> setof (queue, enqueue_shard, enqueued, claimed, completed, failed, since). */
AWA_SQL_FUNCTION(awa_shard_stats)
{
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	HASH_SEQ_STATUS status;
	awa::StatEntry *entry;

	InitMaterializedSRF(fcinfo, 0);
	if (awa::stat_shared == nullptr)
		return (Datum)0;
	LWLockAcquire(awa::stat_shared->lock, LW_SHARED);
	hash_seq_init(&status, awa::stat_hash);
	while ((entry = static_cast<awa::StatEntry *>(hash_seq_search(&status))) != nullptr)
	{
		Datum values[7];

		if (entry->key.dbid != MyDatabaseId)
			continue;
		{
			bool nulls[7] = {false, false, false, false, false, false, false};
			values[0] = CStringGetTextDatum(entry->key.queue);
			values[1] = Int16GetDatum(entry->key.shard);
			for (int k = 0; k < awa::kStatKinds; k++)
				values[2 + k] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&entry->counters[k])));
			values[6] = TimestampTzGetDatum(entry->since);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	LWLockRelease(awa::stat_shared->lock);
	return (Datum)0;
}

/* awa.reset_shard_stats(): forget every counter of this database (awa_admin only). */
AWA_SQL_FUNCTION(awa_reset_shard_stats)
{
	HASH_SEQ_STATUS status;
	awa::StatEntry *entry;

	if (awa::stat_shared == nullptr)
		PG_RETURN_BOOL(false);
	LWLockAcquire(awa::stat_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, awa::stat_hash);
	while ((entry = static_cast<awa::StatEntry *>(hash_seq_search(&status))) != nullptr)
		if (entry->key.dbid == MyDatabaseId)
			hash_search(awa::stat_hash, &entry->key, HASH_REMOVE, nullptr);
	awa::note_reset(MyDatabaseId);
	LWLockRelease(awa::stat_shared->lock);
	PG_RETURN_BOOL(true);
}

/* awa._count_failed(queue, shard): count a terminal failure (called by the SQL exits). */
AWA_SQL_FUNCTION(awa_count_failed)
{
	text *queue;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	queue = PG_GETARG_TEXT_PP(0);
	awa::stats_add(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), PG_GETARG_INT16(1), awa::StatKind::Failed, 1);
	PG_RETURN_VOID();
}
