/*
 * rate_limit.cpp — token buckets of queue rate limits (docs/design.md §4, "Flow control").
 *
 * A queue with a rate limit (awa.queue_meta.rate_per_second, rate_burst) has one bucket
 * per (database, queue) in shared memory, whatever the backend that claims: a claim takes
 * min(batch, tokens) before its drain and gives back what its drain did not hand out, so
 * claims hand out at most burst + rate x t jobs over any t seconds. A per-key rate limit
 * (key_rate_per_second, key_rate_burst) has one bucket per (database, queue, concurrency
 * key) in a table of its own, so that keys never crowd out queues: a claim takes one token
 * per keyed job of its window, in lane order, up to the first job whose key has none, and
 * gives back those of the jobs its drain did not hand out. Buckets are named by 64-bit
 * hashes of the queue name and the key (names that collide share a bucket: stricter, never
 * looser). Tokens of a claim that aborts are not given back: the limit is an upper bound.
 * A bucket seen for the first time (after a restart, or after it was evicted) starts full;
 * a full bucket is the same as no bucket, so only full buckets are evicted when a table is
 * full; both tables have a fixed size. A dropped queue's buckets are forgotten when the drop
 * commits (not when a savepoint of it rolls back), so a queue created again under its name
 * starts full; its keys' buckets also when its per-key limit is removed.
 */
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "rate_limit.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace awa
{

namespace
{

/* Buckets the server keeps at once, per table (full buckets are evicted). */
constexpr int kMaxQueueBuckets = 1024;
constexpr int kMaxKeyBuckets = 8192;

/*
 * Key: database, a 64-bit hash of the queue name and, for a per-key bucket, one of the key:
 * one database never sees another's bucket, and a queue's bucket is never one of its keys'.
 * (Names whose hashes collide share a bucket: stricter, never looser.)
 */
struct BucketKey
{
	Oid dbid;
	bool per_key;
	std::uint64_t queue_hash;
	std::uint64_t key_hash;
};

struct Bucket
{
	BucketKey key;
	double tokens;
	TimestampTz at;	   /* when tokens was last brought up to date */
	double per_second; /* the limit it was last used with */
	int burst;
};

struct RateShared
{
	LWLock *lock;
};

RateShared *rate_shared = nullptr;
HTAB *queue_buckets = nullptr; /* one per rate-limited queue */
HTAB *key_buckets = nullptr;   /* one per key of a queue with a per-key rate limit */

/*
 * A queue whose buckets this transaction forgets when (and if) it commits: all of them
 * (drop_queue), or its keys' (its per-key limit removed). Kept in the transaction's memory,
 * with the subtransaction that asked, so a savepoint rolled back takes its forgets with it.
 */
struct Forget
{
	BucketKey queue;
	bool keys_only;
	SubTransactionId subid;
};
Forget *forgets = nullptr;
int n_forgets = 0;
int forgets_cap = 0;

/* The table a bucket lives in. */
HTAB *
table_of(const BucketKey *key)
{
	return key->per_key ? key_buckets : queue_buckets;
}

/* The key of a queue of the current database. */
void
bucket_key(BucketKey *key, const char *queue, int queue_len)
{
	check_queue_bytes(queue_len);
	std::memset(key, 0, sizeof(*key));
	key->dbid = MyDatabaseId;
	key->queue_hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(queue), queue_len, 0x717565);
}

/* The key of one concurrency key's bucket of a queue of the current database. */
void
key_bucket_key(BucketKey *key, const char *queue, int queue_len, text *concurrency_key)
{
	bucket_key(key, queue, queue_len);
	key->per_key = true;
	key->key_hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(concurrency_key)),
										VARSIZE_ANY_EXHDR(concurrency_key), 0x6b6579);
}

/* Whether a bucket belongs to a queue (its own or one of its keys'). */
bool
bucket_of_queue(const BucketKey *bucket, const BucketKey *queue)
{
	return bucket->dbid == queue->dbid && bucket->queue_hash == queue->queue_hash;
}

/*
 * Bring a bucket's tokens up to `now`: rate per second since it was last used, at most
 * burst (a limit lowered meanwhile takes effect at once).
 */
void
refill(Bucket *b, double per_second, int burst, TimestampTz now)
{
	b->per_second = per_second;
	b->burst = burst;
	if (now > b->at)
		b->tokens += per_second * static_cast<double>(now - b->at) / USECS_PER_SEC;
	b->tokens = std::min(b->tokens, static_cast<double>(burst));
	b->at = std::max(b->at, now);
}

/*
 * Evict one bucket that is full now at the limit it was last used with (it refilled, or its
 * queue has no limit any more and it refilled): a new bucket starts full, so this changes
 * nothing. The lock is held exclusively. False when no bucket is full.
 */
bool
evict_full_bucket(HTAB *table, TimestampTz now)
{
	HASH_SEQ_STATUS scan;
	Bucket *b;

	hash_seq_init(&scan, table);
	while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
	{
		double elapsed = static_cast<double>(now - b->at) / USECS_PER_SEC;

		if (b->tokens + b->per_second * elapsed >= static_cast<double>(b->burst))
		{
			BucketKey key = b->key;

			hash_seq_term(&scan);
			(void)hash_search(table, &key, HASH_REMOVE, nullptr);
			return true;
		}
	}
	return false;
}

/*
 * A bucket, created full when missing; nullptr when every bucket of its table is still
 * refilling. The lock is held exclusively.
 */
Bucket *
find_bucket(const BucketKey *key, int burst, TimestampTz now)
{
	HTAB *table = table_of(key);
	bool found;
	Bucket *b = static_cast<Bucket *>(hash_search(table, key, HASH_ENTER_NULL, &found));

	if (b == nullptr && evict_full_bucket(table, now))
		b = static_cast<Bucket *>(hash_search(table, key, HASH_ENTER_NULL, &found));
	if (b == nullptr)
		return nullptr;
	if (!found)
	{
		b->tokens = burst;
		b->at = now;
		b->burst = burst;
		b->per_second = 0;
	}
	return b;
}

} // namespace

bool
rate_limits_available()
{
	return rate_shared != nullptr;
}

/* Take up to want tokens (see rate_limit.hpp). */
int64
rate_take(const char *queue, int queue_len, double per_second, int burst, int64 want)
{
	BucketKey key;
	TimestampTz now = GetCurrentTimestamp();
	Bucket *b;
	int64 took;

	if (rate_shared == nullptr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("queue \"%.*s\" has a rate limit, which needs awa_shard in shared_preload_libraries",
							   queue_len, queue),
						errdetail("The token buckets that all claims of the server share live in shared memory."),
						errhint("Preload the library, or remove the limit with awa.set_rate_limit(queue, NULL).")));
	if (want <= 0)
		return 0;
	bucket_key(&key, queue, queue_len);
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	b = find_bucket(&key, burst, now);
	if (b == nullptr)
	{
		LWLockRelease(rate_shared->lock);
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						errmsg("too many rate-limited queues in use at once (%d)", kMaxQueueBuckets),
						errdetail("Every token bucket is still refilling."),
						errhint("Remove rate limits that are no longer needed with awa.set_rate_limit(queue, NULL).")));
	}
	refill(b, per_second, burst, now);
	/* A token is whole: a bucket at 2.9999999 after a refill of exactly 3 tokens still gives 3. */
	took = std::min(want, static_cast<int64>(std::floor(b->tokens + 1e-9)));
	took = std::max<int64>(took, 0);
	b->tokens -= static_cast<double>(took);
	LWLockRelease(rate_shared->lock);
	return took;
}

/* Time until the bucket holds a whole token, without taking any (see rate_limit.hpp). */
long
rate_wait_ms(const char *queue, int queue_len, double per_second, int burst)
{
	BucketKey key;
	TimestampTz now = GetCurrentTimestamp();
	const Bucket *b;
	double tokens;

	if (rate_shared == nullptr)
		return 0; /* a claim raises 55000: let it */
	bucket_key(&key, queue, queue_len);
	LWLockAcquire(rate_shared->lock, LW_SHARED);
	b = static_cast<const Bucket *>(hash_search(queue_buckets, &key, HASH_FIND, nullptr));
	tokens = b == nullptr
				 ? static_cast<double>(burst)
				 : b->tokens + per_second * static_cast<double>(std::max<TimestampTz>(now - b->at, 0)) / USECS_PER_SEC;
	LWLockRelease(rate_shared->lock);
	if (tokens + 1e-9 >= 1.0)
		return 0;
	/* Clamped before the cast: a tiny rate gives a wait beyond any long (or infinity). */
	return static_cast<long>(std::clamp(std::ceil((1.0 - tokens) / per_second * 1000.0), 1.0, 3600.0 * 1000.0));
}

/* Give back tokens taken and not handed out (never more than the bucket holds). */
void
rate_give_back(const char *queue, int queue_len, double per_second, int burst, int64 n)
{
	BucketKey key;
	TimestampTz now = GetCurrentTimestamp();
	Bucket *b;

	if (rate_shared == nullptr || n <= 0)
		return;
	bucket_key(&key, queue, queue_len);
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	b = static_cast<Bucket *>(hash_search(queue_buckets, &key, HASH_FIND, nullptr));
	if (b != nullptr)
	{
		refill(b, per_second, burst, now);
		b->tokens = std::min(b->tokens + static_cast<double>(n), static_cast<double>(burst));
	}
	LWLockRelease(rate_shared->lock);
}

/* Take the tokens of a window's keyed jobs, in order (see rate_limit.hpp). */
int64
rate_take_keys(const char *queue, int queue_len, text *const *keys, int64 n, double per_second, int burst)
{
	TimestampTz now = GetCurrentTimestamp();
	int64 rows = 0;

	if (rate_shared == nullptr)
		ereport(
			ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("queue \"%.*s\" has a per-key rate limit, which needs awa_shard in shared_preload_libraries",
					queue_len, queue),
			 errdetail("The token buckets that all claims of the server share live in shared memory."),
			 errhint(
				 "Preload the library, or remove the limit with awa.set_rate_limit(queue, NULL, p_per_key => true).")));
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	for (; rows < n; rows++)
	{
		BucketKey key;
		Bucket *b;

		if (keys[rows] == nullptr)
			continue; /* a job without a key: no token */
		key_bucket_key(&key, queue, queue_len, keys[rows]);
		b = find_bucket(&key, burst, now);
		if (b == nullptr)
			break; /* no room for its bucket: its job waits, as one without a token */
		refill(b, per_second, burst, now);
		if (b->tokens + 1e-9 < 1.0)
			break;
		b->tokens -= 1.0;
	}
	LWLockRelease(rate_shared->lock);
	return rows;
}

/* Give back the tokens of a window's keyed jobs [from, n) (see rate_limit.hpp). */
void
rate_give_back_keys(const char *queue, int queue_len, text *const *keys, int64 from, int64 n, double per_second,
					int burst)
{
	TimestampTz now = GetCurrentTimestamp();

	if (rate_shared == nullptr || from >= n)
		return;
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	for (int64 i = from; i < n; i++)
	{
		BucketKey key;
		Bucket *b;

		if (keys[i] == nullptr)
			continue;
		key_bucket_key(&key, queue, queue_len, keys[i]);
		b = static_cast<Bucket *>(hash_search(key_buckets, &key, HASH_FIND, nullptr));
		if (b == nullptr)
			continue;
		refill(b, per_second, burst, now);
		b->tokens = std::min(b->tokens + 1.0, static_cast<double>(burst));
	}
	LWLockRelease(rate_shared->lock);
}

/* Forget a queue's buckets, or its keys', when this transaction commits (see rate_limit.hpp). */
void
rate_forget_at_commit(const char *queue, int queue_len, bool keys_only)
{
	if (rate_shared == nullptr)
		return;
	if (n_forgets == forgets_cap)
	{
		forgets_cap = forgets_cap == 0 ? 8 : forgets_cap * 2;
		forgets = static_cast<Forget *>(forgets == nullptr
											? MemoryContextAlloc(TopTransactionContext, sizeof(Forget) * forgets_cap)
											: repalloc(forgets, sizeof(Forget) * forgets_cap));
	}
	bucket_key(&forgets[n_forgets].queue, queue, queue_len);
	forgets[n_forgets].keys_only = keys_only;
	forgets[n_forgets].subid = GetCurrentSubTransactionId();
	n_forgets++;
}

/* Transaction end: at commit, forget the buckets it asked to forget (never raises). */
void
rate_limit_at_xact_end(bool committed)
{
	if (committed && rate_shared != nullptr && n_forgets > 0)
	{
		HASH_SEQ_STATUS scan;
		Bucket *b;

		LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n_forgets; i++)
			if (!forgets[i].keys_only)
				(void)hash_search(queue_buckets, &forgets[i].queue, HASH_REMOVE, nullptr);
		hash_seq_init(&scan, key_buckets);
		while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
			for (int i = 0; i < n_forgets; i++)
				if (bucket_of_queue(&b->key, &forgets[i].queue))
				{
					(void)hash_search(key_buckets, &b->key, HASH_REMOVE, nullptr);
					break;
				}
		LWLockRelease(rate_shared->lock);
	}
	forgets = nullptr; /* its memory goes with the transaction's */
	n_forgets = 0;
	forgets_cap = 0;
}

/* Subtransaction end: a savepoint rolled back takes its forgets with it; a released one hands them up. */
void
on_rate_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	int kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < n_forgets; i++)
	{
		if (forgets[i].subid == my_subid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			forgets[i].subid = parent_subid;
		}
		forgets[kept++] = forgets[i];
	}
	n_forgets = kept;
}

/* _PG_init: the subtransaction hook of the forgets. */
void
init_rate_limit_hooks()
{
	RegisterSubXactCallback(on_rate_subxact, nullptr);
}

/* shmem_request_hook: the buckets' lock and their hash table. */
void
rate_limit_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard_rate_limits", 1);
	RequestAddinShmemSpace(
		add_size(add_size(MAXALIGN(sizeof(RateShared)), hash_estimate_size(kMaxQueueBuckets, sizeof(Bucket))),
				 hash_estimate_size(kMaxKeyBuckets, sizeof(Bucket))));
}

/* shmem_startup_hook: claim the buckets by name (initialised once). */
void
rate_limit_shmem_startup()
{
	HASHCTL ctl;
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	rate_shared = static_cast<RateShared *>(ShmemInitStruct("awa_shard rate limits", sizeof(RateShared), &found));
	if (!found)
		rate_shared->lock = &(GetNamedLWLockTranche("awa_shard_rate_limits"))->lock;
	std::memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(BucketKey);
	ctl.entrysize = sizeof(Bucket);
	/* Fixed size: a full table evicts or refuses, never takes shared memory others need. */
	queue_buckets = ShmemInitHash("awa_shard rate buckets", kMaxQueueBuckets, kMaxQueueBuckets, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	key_buckets = ShmemInitHash("awa_shard key rate buckets", kMaxKeyBuckets, kMaxKeyBuckets, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa

/* awa._forget_rate_limit(queue): the dropped queue's buckets go when the transaction commits. */
AWA_SQL_FUNCTION(awa_forget_rate_limit)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");

	awa::rate_forget_at_commit(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), false);
	PG_RETURN_VOID();
}

/* awa._forget_key_rate_limits(queue): the queue's keys' buckets go when the transaction commits. */
AWA_SQL_FUNCTION(awa_forget_key_rate_limits)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");

	awa::rate_forget_at_commit(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), true);
	PG_RETURN_VOID();
}

/* awa._rate_limits_available(): whether the token buckets exist (library preloaded). */
AWA_SQL_FUNCTION(awa_rate_limits_available)
{
	PG_RETURN_BOOL(awa::rate_limits_available());
}
