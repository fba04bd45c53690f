/*
 * running_bound.cpp — an upper bound of a queue's running attempts in shared memory
 * (docs/design.md §4, "Flow control", "Counting only near the cap").
 *
 * A claim of a queue with a concurrency limit takes the queue's limit lock and, until now,
 * always counted the queue's running attempts (flow_control.cpp, kRunningSql): a walk of the
 * queue's claim and completion batches in the rings, whose cost grows with the batches the
 * rings hold. Every claim of the queue holds the same lock, so the claim holding it can know
 * what the claims before it started: each one, when it commits (after the commit is visible,
 * before its locks go), publishes here `base + started`, where base is the bound it found or
 * the running attempts it counted, and started what it may have started itself. Exits never
 * lower the bound, so it only ever over-counts: a claim for which the bound leaves room takes
 * that room without counting, and one for which it does not counts, so a completion's place
 * is taken by the first claim that needs it. An entry is trusted under the queue_meta stamp
 * (set_concurrency_limit, drop_queue), for this database and queue (a 128-bit hash of both),
 * and for at most kTrustMs after the count it started from: a claim that read the queue's
 * settings before a limit was set takes no lock and publishes nothing, and its attempts are
 * counted again at most that long after. An abort publishes nothing (the bound before it still
 * holds), a savepoint rolled back keeps what it started (over-counted), a prepare or a claim
 * this backend cannot follow makes the queue's bound unknown. Not preloaded, or under Citus,
 * every claim counts.
 */
#include "running_bound.hpp"
#include "citus.hpp"
#include "module.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"
}

#include <algorithm>

namespace awa
{

namespace
{

/* Queues with a known bound (direct-mapped by their identity: a newer one replaces an older one). */
constexpr int kBounds = 1024;
/* How long a bound is trusted after the count it started from. */
constexpr long kTrustMs = 1000;
/* Queues one transaction follows at most (a further one's bound becomes unknown instead). */
constexpr int kFollowed = 8;

/* A queue's identity: 128 bits of hash over database and queue name. */
struct QueueId
{
	std::uint64_t lo;
	std::uint64_t hi;
};

/* A queue's bound as published: its identity and basis, and the bound. */
struct Bound
{
	slock_t lock;
	bool valid;
	Oid db;
	QueueId id;
	std::uint64_t stamp;
	TimestampTz counted; /* when the count this bound started from was made */
	std::int64_t bound;
};

/* Shared: the bounds. */
struct Bounds
{
	Bound entry[kBounds];
};

Bounds *bounds = nullptr;

/* A queue this transaction's claims hold the limit lock of: what to publish at commit. */
struct Followed
{
	QueueId id;
	std::uint64_t stamp;
	TimestampTz counted;
	std::int64_t base;
	std::int64_t started;
};

Followed followed[kFollowed];
int nfollowed = 0;

/* The identity of (this database, queue). */
QueueId
queue_id(text *queue)
{
	const unsigned char *bytes = reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue));
	int len = VARSIZE_ANY_EXHDR(queue);

	return {hash_bytes_extended(bytes, len, hash_bytes_uint32_extended(MyDatabaseId, 0x6177615f72756e31ULL)),
			hash_bytes_extended(bytes, len, hash_bytes_uint32_extended(MyDatabaseId, 0x6177615f72756e32ULL))};
}

/* The entry of a queue. */
Bound &
entry_of(const QueueId &id)
{
	return bounds->entry[id.lo % kBounds];
}

/* Whether bounds may be kept: preloaded, not under Citus (claims of a queue may run on several nodes). */
bool
bounds_usable()
{
	return bounds != nullptr && !citus_present();
}

/* This transaction's record of a queue, or nullptr. */
Followed *
followed_of(const QueueId &id)
{
	for (int i = 0; i < nfollowed; i++)
		if (followed[i].id.lo == id.lo && followed[i].id.hi == id.hi)
			return &followed[i];
	return nullptr;
}

/* Make the queue's published bound unknown (the caller holds its limit lock, or is preparing). */
void
forget(const QueueId &id)
{
	Bound &e = entry_of(id);

	SpinLockAcquire(&e.lock);
	if (e.valid && e.db == MyDatabaseId && e.id.lo == id.lo && e.id.hi == id.hi)
		e.valid = false;
	SpinLockRelease(&e.lock);
}

/* The published bound of a queue, when it is the queue's, under the current stamp, and young enough. */
bool
published(const QueueId &id, std::uint64_t stamp, Bound *out)
{
	Bound &e = entry_of(id);
	bool found;

	SpinLockAcquire(&e.lock);
	found = e.valid && e.db == MyDatabaseId && e.id.lo == id.lo && e.id.hi == id.hi && e.stamp == stamp;
	if (found)
		*out = e;
	SpinLockRelease(&e.lock);
	return found && !TimestampDifferenceExceeds(out->counted, GetCurrentTimestamp(), kTrustMs);
}

/* Follow a queue from `base` (counted at `counted`); false when no more queues can be followed. */
bool
follow(const QueueId &id, std::uint64_t stamp, TimestampTz counted, std::int64_t base)
{
	if (nfollowed == kFollowed)
		return false;
	followed[nfollowed++] = {id, stamp, counted, base, 0};
	return true;
}

} // namespace

/* A trusted bound of the queue's running attempts, under its limit lock (see the header). */
bool
running_bound_lookup(text *queue, std::int64_t *bound)
{
	QueueId id;
	Followed *f;
	std::uint64_t stamp;
	Bound e;

	if (!bounds_usable())
		return false;
	id = queue_id(queue);
	f = followed_of(id);
	if (f != nullptr)
	{
		*bound = f->base + f->started;
		return true;
	}
	stamp = queue_meta_stamp();
	if ((stamp & 1) != 0 || !published(id, stamp, &e))
		return false; /* queue_meta changed by this transaction, or nothing trusted: count */
	if (!follow(id, stamp, e.counted, e.bound))
	{
		forget(id);
		return false;
	}
	*bound = e.bound;
	return true;
}

/* The claim counted the queue's running attempts under its limit lock (see the header). */
void
running_bound_counted(text *queue, std::int64_t running)
{
	QueueId id;
	Followed *f;
	std::uint64_t stamp;

	if (!bounds_usable())
		return;
	id = queue_id(queue);
	stamp = queue_meta_stamp();
	f = followed_of(id);
	if ((stamp & 1) != 0)
	{
		/* queue_meta changed by this transaction: its commit moves the stamp, nothing is published. */
		forget(id);
		return;
	}
	if (f != nullptr)
	{
		/* What this transaction started before stays counted (its own rows may be in the count too: over, never under).
		 */
		f->stamp = stamp;
		f->counted = GetCurrentTimestamp();
		f->base = running;
		return;
	}
	if (!follow(id, stamp, GetCurrentTimestamp(), running))
		forget(id);
}

/* The claim may start n more attempts of the queue, under its limit lock (see the header). */
void
running_bound_started(text *queue, std::int64_t n)
{
	QueueId id;
	Followed *f;

	if (!bounds_usable() || n == 0)
		return;
	id = queue_id(queue);
	f = followed_of(id);
	if (f == nullptr)
	{
		forget(id); /* not followed: what it starts is in no bound */
		return;
	}
	f->started = std::max<std::int64_t>(f->started + n, 0);
}

/* A bound of the queue's running attempts without its lock (see the header). */
bool
running_bound_peek(text *queue, std::int64_t *bound)
{
	std::uint64_t stamp;
	Bound e;

	if (!bounds_usable())
		return false;
	stamp = queue_meta_stamp();
	if ((stamp & 1) != 0 || !published(queue_id(queue), stamp, &e))
		return false;
	*bound = e.bound;
	return true;
}

/* Publish or drop this transaction's followed queues (see the header). */
void
running_bound_at_xact_end(bool committed)
{
	if (committed && bounds != nullptr)
		for (int i = 0; i < nfollowed; i++)
		{
			const Followed &f = followed[i];
			Bound &e = entry_of(f.id);

			SpinLockAcquire(&e.lock);
			e.valid = true;
			e.db = MyDatabaseId;
			e.id = f.id;
			e.stamp = f.stamp;
			e.counted = f.counted;
			e.bound = f.base + f.started;
			SpinLockRelease(&e.lock);
		}
	nfollowed = 0;
}

/* The followed queues' bounds become unknown at a prepare (see the header). */
void
running_bound_at_prepare()
{
	if (bounds != nullptr)
		for (int i = 0; i < nfollowed; i++)
			forget(followed[i].id);
	nfollowed = 0;
}

/* shmem_request_hook: the bounds' space. */
void
running_bound_shmem_request()
{
	RequestAddinShmemSpace(sizeof(Bounds));
}

/* shmem_startup_hook: claim the bounds by name (initialised once, by the postmaster). */
void
running_bound_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bounds = static_cast<Bounds *>(ShmemInitStruct("awa_shard running bounds", sizeof(Bounds), &found));
	if (!found)
		for (Bound &e : bounds->entry)
		{
			SpinLockInit(&e.lock);
			e.valid = false;
		}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
