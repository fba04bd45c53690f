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
 * Tokens a claim holds between its take and its end (a claim may wait for a held lane head,
 * awa_shard.claim_wait) keep their room in the bucket: a bucket refills only up to burst less
 * the tokens its claims in progress hold, so tokens given back late never stack on a bucket
 * that refilled meanwhile (which handed out up to twice the burst in a short window). A
 * backend remembers what its claim in progress took, so an error ending the claim consumes
 * those tokens at the transaction's end and frees their room.
 * A bucket seen for the first time (after a restart, or after it was evicted) starts full;
 * a full bucket is the same as no bucket, so only full buckets are evicted when a table is
 * full (full at the queue's current limit), and buckets of databases dropped since; both
 * tables have a fixed size. The row trigger of awa.queue_meta reports each change of a
 * queue's limits (rate_limit_row_changed), applied when its transaction commits (not when a
 * savepoint of it rolls back): a limit removed, or its queue dropped, forgets its buckets (a
 * queue created again under its name starts full); a limit changed sets the limit its
 * buckets hold to, which a claim that read the old limit before the change committed does
 * not set back.
 */
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "rate_limit.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
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
	double held;	   /* tokens taken by claims in progress (given back or consumed at their end) */
	TimestampTz at;	   /* when tokens was last brought up to date */
	double per_second; /* the limit it holds to: the last change's, or the last claim's */
	int burst;
	TimestampTz limits_set_at; /* when a committed change last set them (0: never) */
};

struct RateShared
{
	LWLock *lock;
};

RateShared *rate_shared = nullptr;
HTAB *queue_buckets = nullptr; /* one per rate-limited queue */
HTAB *key_buckets = nullptr;   /* one per key of a queue with a per-key rate limit */

/* What a change of awa.queue_meta does to a queue's buckets when its transaction commits. */
enum class ChangeKind
{
	ForgetAll,		/* the queue's row deleted (drop_queue): its bucket and its keys' */
	ForgetQueue,	/* its rate limit removed */
	ForgetKeys,		/* its per-key rate limit removed */
	SetQueue,		/* its rate limit set or changed */
	SetKeys,		/* its per-key rate limit set or changed */
	ForgetDatabase, /* awa.queue_meta truncated: every bucket of the database */
};

/*
 * A change of a queue's limits this transaction made, applied when (and if) it commits. Kept
 * in the transaction's memory, with the subtransaction that made it, so a savepoint rolled
 * back takes it with it.
 */
struct Change
{
	BucketKey queue;
	ChangeKind kind;
	double per_second;
	int burst;
	SubTransactionId subid;
};
Change *changes = nullptr;
int n_changes = 0;
int changes_cap = 0;

/*
 * The tokens this backend's claim in progress holds: the queue bucket's (rate_take) and the
 * keys' buckets' (rate_take_keys), until the claim gives back or consumes them, or its
 * transaction ends (an error: consumed). In TopMemoryContext, grown as needed.
 */
BucketKey held_queue;
int64 held_queue_tokens = 0;
BucketKey *held_keys = nullptr;
int n_held_keys = 0;
int held_keys_cap = 0;

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

/*
 * Bring a bucket's tokens up to `now`: rate per second since it was last used, at most
 * burst (a limit lowered meanwhile takes effect at once). The claim's limit becomes the one
 * the bucket holds to unless a change committed after the claim's statement began: the claim
 * may have read the limit before it (a statement reads the limits after it begins, and a
 * change's commit tells the backends before it sets its buckets).
 */
void
refill(Bucket *b, double per_second, int burst, TimestampTz now)
{
	if (b->limits_set_at < GetCurrentStatementStartTimestamp())
	{
		b->per_second = per_second;
		b->burst = burst;
	}
	if (now > b->at)
		b->tokens += per_second * static_cast<double>(now - b->at) / USECS_PER_SEC;
	b->tokens = std::min(b->tokens, static_cast<double>(burst) - b->held);
	b->at = std::max(b->at, now);
}

/* End the hold of n tokens on a bucket, giving back `back` of them (the rest are consumed). The lock is held. */
void
release_held(Bucket *b, double n, double back)
{
	b->held = std::max(b->held - n, 0.0);
	b->tokens = std::min(b->tokens + back, static_cast<double>(b->burst) - b->held);
}

/* Consume the queue bucket's tokens this backend's claim still holds (an error ended it). The lock is held exclusively.
 */
void
consume_held_queue()
{
	Bucket *b;

	if (held_queue_tokens > 0 &&
		(b = static_cast<Bucket *>(hash_search(queue_buckets, &held_queue, HASH_FIND, nullptr))) != nullptr)
		release_held(b, static_cast<double>(held_queue_tokens), 0);
	held_queue_tokens = 0;
}

/* Consume the keys' buckets' tokens this backend's claim still holds (an error ended it). The lock is held exclusively.
 */
void
consume_held_keys()
{
	Bucket *b;

	for (int i = 0; i < n_held_keys; i++)
		if ((b = static_cast<Bucket *>(hash_search(key_buckets, &held_keys[i], HASH_FIND, nullptr))) != nullptr)
			release_held(b, 1, 0);
	n_held_keys = 0;
}

/* Remember one more key bucket this backend's claim holds a token of. */
void
note_held_key(const BucketKey &key)
{
	if (n_held_keys == held_keys_cap)
	{
		int cap = std::max(16, held_keys_cap * 2);
		BucketKey *grown = static_cast<BucketKey *>(MemoryContextAlloc(TopMemoryContext, sizeof(BucketKey) * cap));

		if (n_held_keys > 0)
			memcpy(grown, held_keys, sizeof(BucketKey) * n_held_keys);
		if (held_keys != nullptr)
			pfree(held_keys);
		held_keys = grown;
		held_keys_cap = cap;
	}
	held_keys[n_held_keys++] = key;
}

/*
 * Evict one bucket that is full now at the limit it holds to (it refilled): a new bucket
 * starts full, so this changes nothing. The lock is held exclusively. False when no bucket
 * is full.
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

		if (b->held == 0 && b->tokens + b->per_second * elapsed >= static_cast<double>(b->burst))
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
		b->held = 0;
		b->at = now;
		b->burst = burst;
		b->per_second = 0;
		b->limits_set_at = 0;
	}
	return b;
}

/*
 * Forget the buckets of databases dropped since they were used (nothing else would: they are
 * full only at their rate). Called with the lock not held, when a table has no room; every
 * other database the table names is looked up (a table of at most kMaxKeyBuckets entries,
 * and only when it is full); true when it freed some.
 */
bool
forget_dropped_databases(HTAB *table)
{
	long size = hash_get_num_entries(table);
	Oid *dbs;
	bool *gone;
	int n = 0;
	int distinct = 0;
	int ngone = 0;
	HASH_SEQ_STATUS scan;
	Bucket *b;

	dbs = static_cast<Oid *>(palloc(sizeof(Oid) * (size + 1)));
	LWLockAcquire(rate_shared->lock, LW_SHARED);
	hash_seq_init(&scan, table);
	while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
	{
		if (n > size)
		{
			hash_seq_term(&scan); /* grown meanwhile: the rest waits for the next claim without room */
			break;
		}
		if (b->key.dbid != MyDatabaseId)
			dbs[n++] = b->key.dbid;
	}
	LWLockRelease(rate_shared->lock);
	std::sort(dbs, dbs + n);
	distinct = static_cast<int>(std::unique(dbs, dbs + n) - dbs);
	gone = static_cast<bool *>(palloc(sizeof(bool) * (distinct + 1)));
	/* pg_database is a shared catalog: its syscache answers in any database, outside the lock. */
	for (int i = 0; i < distinct; i++)
	{
		gone[i] = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbs[i]));
		ngone += gone[i] ? 1 : 0;
	}
	if (ngone > 0)
	{
		LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
		hash_seq_init(&scan, table);
		while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
		{
			const Oid *at = std::lower_bound(dbs, dbs + distinct, b->key.dbid);

			if (at != dbs + distinct && *at == b->key.dbid && gone[at - dbs])
			{
				BucketKey key = b->key;

				(void)hash_search(table, &key, HASH_REMOVE, nullptr); /* the scan's current entry: allowed */
			}
		}
		LWLockRelease(rate_shared->lock);
	}
	pfree(gone);
	pfree(dbs);
	return ngone > 0;
}

/* A change of a queue's buckets this transaction made, applied at its commit. */
void
add_change(const BucketKey &queue, ChangeKind kind, double per_second, int burst)
{
	if (n_changes == changes_cap)
	{
		changes_cap = changes_cap == 0 ? 8 : changes_cap * 2;
		changes = static_cast<Change *>(changes == nullptr
											? MemoryContextAlloc(TopTransactionContext, sizeof(Change) * changes_cap)
											: repalloc(changes, sizeof(Change) * changes_cap));
	}
	changes[n_changes] = {queue, kind, per_second, burst, GetCurrentSubTransactionId()};
	n_changes++;
}

/* Apply one committed change to the buckets of a table (the lock is held exclusively). */
void
apply_change(HTAB *table, const Change &c, TimestampTz now)
{
	HASH_SEQ_STATUS scan;
	Bucket *b;
	bool keys = table == key_buckets;

	switch (c.kind)
	{
	case ChangeKind::ForgetQueue:
	case ChangeKind::SetQueue:
		if (keys)
			return;
		break;
	case ChangeKind::ForgetKeys:
	case ChangeKind::SetKeys:
		if (!keys)
			return;
		break;
	default:
		break;
	}
	hash_seq_init(&scan, table);
	while ((b = static_cast<Bucket *>(hash_seq_search(&scan))) != nullptr)
	{
		if (b->key.dbid != c.queue.dbid ||
			(c.kind != ChangeKind::ForgetDatabase && b->key.queue_hash != c.queue.queue_hash))
			continue;
		if (c.kind == ChangeKind::SetQueue || c.kind == ChangeKind::SetKeys)
		{
			b->per_second = c.per_second;
			b->burst = c.burst;
			b->limits_set_at = now;
		}
		else
		{
			BucketKey key = b->key;

			(void)hash_search(table, &key, HASH_REMOVE, nullptr); /* the scan's current entry: allowed */
		}
	}
}

/*
 * The attribute of column `name` of a queue_meta row (0: none); read from the trigger's
 * relation, a shard of it on a Citus worker included.
 */
int
meta_attribute(TupleDesc desc, const char *name)
{
	int a = SPI_fnumber(desc, name);

	return a > 0 ? a : 0;
}

/* A rate limit of a queue_meta row: (per second, burst), *set false when the row has none. */
void
row_rate(HeapTuple row, TupleDesc desc, const char *rate_column, const char *burst_column, bool *set,
		 double *per_second, int *burst)
{
	int ra = meta_attribute(desc, rate_column);
	int ba = meta_attribute(desc, burst_column);
	bool rnull = true;
	bool bnull = true;
	Datum r = ra > 0 ? heap_getattr(row, ra, desc, &rnull) : Datum(0);
	Datum bu = ba > 0 ? heap_getattr(row, ba, desc, &bnull) : Datum(0);

	*set = !rnull && !bnull;
	*per_second = *set ? DatumGetFloat8(r) : 0;
	*burst = *set ? DatumGetInt32(bu) : 0;
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
		if (forget_dropped_databases(queue_buckets))
		{
			LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
			b = find_bucket(&key, burst, now);
		}
		else
			LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	}
	if (b == nullptr)
	{
		LWLockRelease(rate_shared->lock);
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						errmsg("too many rate-limited queues in use at once (%d)", kMaxQueueBuckets),
						errdetail("Every token bucket is still refilling."),
						errhint("Remove rate limits that are no longer needed with awa.set_rate_limit(queue, NULL).")));
	}
	consume_held_queue(); /* a claim of this transaction that an error ended */
	refill(b, per_second, burst, now);
	/* A token is whole: a bucket at 2.9999999 after a refill of exactly 3 tokens still gives 3. */
	took = std::min(want, static_cast<int64>(std::floor(b->tokens + 1e-9)));
	took = std::max<int64>(took, 0);
	b->tokens -= static_cast<double>(took);
	b->held += static_cast<double>(took);
	held_queue = key;
	held_queue_tokens = took;
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
				 : std::min(b->tokens +
								per_second * static_cast<double>(std::max<TimestampTz>(now - b->at, 0)) / USECS_PER_SEC,
							static_cast<double>(burst) - b->held);
	LWLockRelease(rate_shared->lock);
	if (tokens + 1e-9 >= 1.0)
		return 0;
	/* Clamped before the cast: a tiny rate gives a wait beyond any long (or infinity). */
	return static_cast<long>(std::clamp(std::ceil((1.0 - tokens) / per_second * 1000.0), 1.0, 3600.0 * 1000.0));
}

/* End the claim's hold: give back n of the tokens it took, the rest handed out (see rate_limit.hpp). */
void
rate_give_back(const char *queue, int queue_len, double per_second, int burst, int64 n)
{
	BucketKey key;
	TimestampTz now = GetCurrentTimestamp();
	Bucket *b;

	if (rate_shared == nullptr || held_queue_tokens == 0)
		return;
	bucket_key(&key, queue, queue_len);
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	b = static_cast<Bucket *>(hash_search(queue_buckets, &held_queue, HASH_FIND, nullptr));
	if (b != nullptr)
	{
		refill(b, per_second, burst, now);
		release_held(b, static_cast<double>(held_queue_tokens),
					 memcmp(&key, &held_queue, sizeof(key)) == 0
						 ? static_cast<double>(std::clamp<int64>(n, 0, held_queue_tokens))
						 : 0);
	}
	held_queue_tokens = 0;
	LWLockRelease(rate_shared->lock);
}

/* Take the tokens of a window's keyed jobs, in order (see rate_limit.hpp). */
int64
rate_take_keys(const char *queue, int queue_len, text *const *keys, int64 n, double per_second, int burst)
{
	TimestampTz now = GetCurrentTimestamp();
	int64 rows = 0;
	bool tried_dropped = false;

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
	consume_held_keys(); /* a claim of this transaction that an error ended */
	for (; rows < n; rows++)
	{
		BucketKey key;
		Bucket *b;

		if (keys[rows] == nullptr)
			continue; /* a job without a key: no token */
		key_bucket_key(&key, queue, queue_len, keys[rows]);
		b = find_bucket(&key, burst, now);
		if (b == nullptr && !tried_dropped)
		{
			tried_dropped = true;
			LWLockRelease(rate_shared->lock);
			(void)forget_dropped_databases(key_buckets);
			LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
			b = find_bucket(&key, burst, now);
		}
		if (b == nullptr)
			break; /* no room for its bucket: its job waits, as one without a token */
		refill(b, per_second, burst, now);
		if (b->tokens + 1e-9 < 1.0)
			break;
		b->tokens -= 1.0;
		b->held += 1.0;
		note_held_key(key);
	}
	LWLockRelease(rate_shared->lock);
	return rows;
}

/*
 * End the hold of the tokens of a window's keyed jobs: those of [from, n) go back, those of
 * [0, from) were handed out (see rate_limit.hpp). The keys are the ones rate_take_keys took
 * for, in the same order.
 */
void
rate_give_back_keys(const char *queue, int queue_len, text *const *keys, int64 from, int64 n, double per_second,
					int burst)
{
	TimestampTz now = GetCurrentTimestamp();
	int held = 0;

	if (rate_shared == nullptr || n_held_keys == 0)
		return;
	LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
	for (int64 i = 0; i < n && held < n_held_keys; i++)
	{
		Bucket *b;

		if (keys[i] == nullptr)
			continue;
		b = static_cast<Bucket *>(hash_search(key_buckets, &held_keys[held++], HASH_FIND, nullptr));
		if (b == nullptr)
			continue;
		refill(b, per_second, burst, now);
		release_held(b, 1, i >= from ? 1 : 0);
	}
	n_held_keys = 0;
	LWLockRelease(rate_shared->lock);
}

/* Note a change of a queue_meta row's rate limits, applied at commit (see rate_limit.hpp). */
void
rate_limit_row_changed(TriggerData *trigdata)
{
	TupleDesc desc = RelationGetDescr(trigdata->tg_relation);
	TriggerEvent event = trigdata->tg_event;
	HeapTuple old_row = nullptr;
	HeapTuple new_row = nullptr;
	BucketKey queue;
	int qa;
	bool isnull;
	Datum name;

	if (rate_shared == nullptr)
		return;
	if (TRIGGER_FIRED_BY_TRUNCATE(event))
	{
		std::memset(&queue, 0, sizeof(queue));
		queue.dbid = MyDatabaseId;
		add_change(queue, ChangeKind::ForgetDatabase, 0, 0);
		return;
	}
	if (!TRIGGER_FIRED_FOR_ROW(event))
		return;
	if (TRIGGER_FIRED_BY_INSERT(event))
		new_row = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_DELETE(event))
		old_row = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		old_row = trigdata->tg_trigtuple;
		new_row = trigdata->tg_newtuple;
	}
	else
		return;
	qa = meta_attribute(desc, "queue");
	if (qa == 0)
		return;
	name = heap_getattr(new_row != nullptr ? new_row : old_row, qa, desc, &isnull);
	if (isnull)
		return;
	{
		text *q = DatumGetTextPP(name);

		bucket_key(&queue, VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q));
	}
	if (new_row == nullptr)
	{
		add_change(queue, ChangeKind::ForgetAll, 0, 0);
		return;
	}
	for (int per_key = 0; per_key < 2; per_key++)
	{
		const char *rate_column = per_key ? "key_rate_per_second" : "rate_per_second";
		const char *burst_column = per_key ? "key_rate_burst" : "rate_burst";
		bool had = false;
		bool has;
		double old_rate = 0;
		double new_rate;
		int old_burst = 0;
		int new_burst;

		if (old_row != nullptr)
			row_rate(old_row, desc, rate_column, burst_column, &had, &old_rate, &old_burst);
		row_rate(new_row, desc, rate_column, burst_column, &has, &new_rate, &new_burst);
		if (had == has && old_rate == new_rate && old_burst == new_burst)
			continue;
		if (!has)
			add_change(queue, per_key ? ChangeKind::ForgetKeys : ChangeKind::ForgetQueue, 0, 0);
		else
			add_change(queue, per_key ? ChangeKind::SetKeys : ChangeKind::SetQueue, new_rate, new_burst);
	}
}

/* Transaction end: at commit, apply its changes to the buckets (never raises). */
void
rate_limit_at_xact_end(bool committed)
{
	if (rate_shared != nullptr && (held_queue_tokens > 0 || n_held_keys > 0))
	{
		LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
		consume_held_queue(); /* a claim that an error ended */
		consume_held_keys();
		LWLockRelease(rate_shared->lock);
	}
	if (committed && rate_shared != nullptr && n_changes > 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		LWLockAcquire(rate_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n_changes; i++)
		{
			apply_change(queue_buckets, changes[i], now);
			apply_change(key_buckets, changes[i], now);
		}
		LWLockRelease(rate_shared->lock);
	}
	changes = nullptr; /* its memory goes with the transaction's */
	n_changes = 0;
	changes_cap = 0;
}

/* Subtransaction end: a savepoint rolled back takes its changes with it; a released one hands them up. */
void
on_rate_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	int kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < n_changes; i++)
	{
		if (changes[i].subid == my_subid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			changes[i].subid = parent_subid;
		}
		changes[kept++] = changes[i];
	}
	n_changes = kept;
}

/* _PG_init: the subtransaction hook of the changes. */
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

/* awa._rate_limits_available(): whether the token buckets exist (library preloaded). */
AWA_SQL_FUNCTION(awa_rate_limits_available)
{
	PG_RETURN_BOOL(awa::rate_limits_available());
}
