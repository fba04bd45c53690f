/*
 * rate_limit.cpp — token buckets of queue rate limits (docs/design.md §4, "Flow control").
 *
 * A queue with a rate limit (awa.queue_meta.rate_per_second, rate_burst) has one bucket
 * per (database, queue) in shared memory (named by a 64-bit hash of the queue name), whatever the backend that claims:
 * a claim takes min(batch, tokens) before its drain and gives back what its drain did not hand out, so claims hand out
 * at most burst + rate x t jobs over any t seconds. A per-key rate limit (key_rate_per_second, key_rate_burst) has one
 * bucket per (database, queue, concurrency key), named by a 64-bit hash of the key (two keys whose hashes collide share
 * one bucket: stricter, never looser): a claim takes one token per keyed job of its window, in lane order, up to the
 * first job whose key has none, and gives back those of the jobs its drain did not hand out. Tokens of a claim that
 * aborts are not given back: the limit is an upper bound. A bucket seen for the first time
 * (after a restart, or after it was evicted) starts full; a full bucket is the same as no
 * bucket, so only full buckets are evicted when the table is full. A dropped queue's bucket
 * is forgotten when the drop commits, so a queue created again under its name starts full.
 */
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "rate_limit.hpp"
#include "validate.hpp"

extern "C"
{
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
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

/* Buckets (queues and keys) the server keeps at once (full buckets are evicted). */
constexpr int kMaxBuckets = 8192;

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
HTAB *buckets = nullptr;

/* Buckets of queues this transaction dropped, forgotten when (and if) it commits. */
constexpr int kMaxForgets = 8;
BucketKey forgets[kMaxForgets];
int n_forgets = 0;
bool forget_all = false; /* more than kMaxForgets: forget every bucket of the database */

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
evict_full_bucket(TimestampTz now)
{
	HASH_SEQ_STATUS scan;
	Bucket *b;

	hash_seq_init(&scan, buckets);
	while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
	{
		double elapsed = static_cast<double>(now - b->at) / USECS_PER_SEC;

		if (b->tokens + b->per_second * elapsed >= static_cast<double>(b->burst))
		{
			BucketKey key = b->key;

			hash_seq_term(&scan);
			(void)hash_search(buckets, &key, HASH_REMOVE, nullptr);
			return true;
		}
	}
	return false;
}

/* A bucket, created full when missing; nullptr when every bucket is still refilling. The lock is held exclusively. */
Bucket *
find_bucket(const BucketKey *key, int burst, TimestampTz now)
{
	bool found;
	Bucket *b = static_cast<Bucket *>(hash_search(buckets, key, HASH_ENTER_NULL, &found));

	if (b == nullptr && evict_full_bucket(now))
		b = static_cast<Bucket *>(hash_search(buckets, key, HASH_ENTER_NULL, &found));
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
						errmsg("too many rate-limited queues and keys in use at once (%d)", kMaxBuckets),
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
	b = static_cast<const Bucket *>(hash_search(buckets, &key, HASH_FIND, nullptr));
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
	b = static_cast<Bucket *>(hash_search(buckets, &key, HASH_FIND, nullptr));
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
		b = static_cast<Bucket *>(hash_search(buckets, &key, HASH_FIND, nullptr));
		if (b == nullptr)
			continue;
		refill(b, per_second, burst, now);
		b->tokens = std::min(b->tokens + 1.0, static_cast<double>(burst));
	}
	LWLockRelease(rate_shared->lock);
}

/* Forget a dropped queue's bucket when this transaction commits (see rate_limit.hpp). */
void
rate_forget_at_commit(const char *queue, int queue_len)
{
	if (rate_shared == nullptr)
		return;
	if (n_forgets < kMaxForgets)
		bucket_key(&forgets[n_forgets++], queue, queue_len);
	else
		forget_all = true;
}

/* Transaction end: at commit, forget the buckets of the queues it dropped (never raises). */
void
rate_limit_at_xact_end(bool committed)
{
	if (committed && rate_shared != nullptr && (n_forgets > 0 || forget_all))
	{
		LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
		if (forget_all)
		{
			HASH_SEQ_STATUS scan;
			Bucket *b;

			hash_seq_init(&scan, buckets);
			while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
				if (b->key.dbid == MyDatabaseId)
					(void)hash_search(buckets, &b->key, HASH_REMOVE, nullptr);
		}
		else
		{
			HASH_SEQ_STATUS scan;
			Bucket *b;

			/* The queue's bucket and its keys' buckets. */
			hash_seq_init(&scan, buckets);
			while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
				for (int i = 0; i < n_forgets; i++)
					if (bucket_of_queue(&b->key, &forgets[i]))
					{
						(void)hash_search(buckets, &b->key, HASH_REMOVE, nullptr);
						break;
					}
		}
		LWLockRelease(rate_shared->lock);
	}
	n_forgets = 0;
	forget_all = false;
}

/* shmem_request_hook: the buckets' lock and their hash table. */
void
rate_limit_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard_rate_limits", 1);
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(RateShared)), hash_estimate_size(kMaxBuckets, sizeof(Bucket))));
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
	buckets = ShmemInitHash("awa_shard rate buckets", kMaxBuckets, kMaxBuckets, &ctl, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa

/* awa._forget_rate_limit(queue): the dropped queue's bucket goes when the transaction commits. */
AWA_SQL_FUNCTION(awa_forget_rate_limit)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");

	awa::rate_forget_at_commit(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	PG_RETURN_VOID();
}

/* awa._rate_limits_available(): whether the token buckets exist (library preloaded). */
AWA_SQL_FUNCTION(awa_rate_limits_available)
{
	PG_RETURN_BOOL(awa::rate_limits_available());
}
