/*
 * running_bound.cpp — an upper bound of a queue's running attempts in shared memory
 * (docs/design.md §4, "Flow control", "Counting only near the cap").
 *
 * A claim of a queue with a concurrency limit takes the queue's limit lock and counts the
 * queue's running attempts (flow_control.cpp, kRunningSql): a walk of the queue's claim and
 * completion batches in the rings, whose cost grows with the batches the rings hold. Every
 * claim of the queue holds the same lock, so the claim holding it can know what the claims
 * before it started: each one, when it commits (after the commit is visible, before its
 * locks go), publishes here the bound it found, or the running attempts it counted, plus what
 * it started. A claim the bound leaves the room it asks for takes it without counting; one
 * it does not counts, so a freed place goes to the first claim that needs it.
 *
 * Exits lower the bound. An exit (completion, failure, retry, snooze, cancel, rescue through
 * take_attempt; key_caps.cpp names them) adds to its queue's exit counter when it commits,
 * after its end is visible, and the bound is the last publication less the exits counted
 * since. No exit may be taken off twice: once by a count that no longer saw its attempt, and
 * again by the counter. So an exit is pending in its queue's entry from PRE_COMMIT until it
 * has added itself, and a count reads, after its snapshot, the pending exits and the counter
 * together: an exit visible to the count's snapshot has either added itself before (the
 * publication starts from that value) or was still pending (then, unless the count can tell
 * the exits apart, see below, the exits since are not taken off at all until the next
 * count). An exit that adds nothing (the queue had no entry when it committed, a savepoint
 * rolled back, a prepared transaction) only leaves the bound higher. A claim's own exits
 * before its count are not taken off (its count did not see those attempts).
 *
 * A bound is exact when it is what a count would find now. Each exit is listed in its entry
 * with its transaction from PRE_COMMIT (pending) and then among the entry's recent additions
 * (added), moved from one to the other in one step. A count reads a ticket before its
 * snapshot (the counter, the entry taken if need be) and, after it, the additions since the
 * ticket and the pending exits: an exit added whose transaction the snapshot did not see was
 * counted running and is in the counter already (taken off the count now); one pending whose
 * committed transaction it saw was not counted and will still be taken off (put back now). If
 * every such exit is known (none unlisted, none of the additions overwritten), no prepared
 * transaction that ended attempts was in progress and the exactness epoch did not move, the
 * bound is exact, and claims and exits since keep it so: a claim then takes the room it
 * leaves, none at the cap, without counting. The epoch moves when attempts end that no bound
 * takes off (a PREPARE that ended attempts, a commit of unnamed or dropped exits); an exact
 * bound is trusted for kExactTrustMs. Otherwise the old rule holds: an upper bound, whose
 * exits since lower nothing if any was pending.
 *
 * The limit lock ends at PRE_COMMIT: there a claim's transaction publishes its bound and
 * releases the lock, before its commit record is flushed, so the next claim of the queue does
 * not wait for that flush. Its bound holds the transaction's attempts; a count would not see
 * them until the commit is visible, so the transaction is listed as committing in its entry
 * (by index, like the pending exits) until then, and a count waits for the listed
 * transactions first. A commit that fails after PRE_COMMIT forgets the bound it published.
 * A prepare, a transaction that also claimed a queue that read no limit, and one with no room
 * in the list keep the lock to the end and publish there, as before.
 *
 * An entry is trusted under the queue_meta stamp (set_concurrency_limit, drop_queue), for
 * this database and queue (a 128-bit hash of both), and for at most kTrustMs after the count
 * it started from. A claim that read the queue's settings before a limit was set takes no
 * lock and publishes nothing: it notes the stamp it read them under, and if the stamp moved
 * before its commit, its commit (once visible) forgets the queue's bound, so the next claim
 * counts its attempts; a publication begun before a forget is not trusted (the entry's
 * forget sequence, kept per index whoever holds the entry, moved). Such a claim prepared
 * forgets the bound at its PREPARE and is followed like a prepared exit (key_caps.cpp): no
 * count publishes while it is in progress, so the first count after its COMMIT PREPARED sees
 * its attempts. An abort publishes nothing (the bound before it still holds). A savepoint rolled back
 * may have undone exits, so it forgets the bounds of the transaction's queues (and takes none
 * of its exits off); a prepare forgets them too (the claims commit elsewhere). Not preloaded, or under Citus (claims of
 * one queue may run on several nodes), every claim counts.
 */
#include "running_bound.hpp"
#include "citus.hpp"
#include "key_caps.hpp"
#include "module.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "access/transam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <algorithm>
#include <cstring>

namespace awa
{

namespace
{

/* Queues with a known bound (direct-mapped by their identity: a newer one replaces an older one). */
constexpr int kBounds = 1024;
/* How long a bound is trusted after the count it started from (the bound on a prepared claim that read no limit). */
constexpr long kTrustMs = 10 * 1000;
/* How long an exact bound stands in for a count that would find less room than asked (an exit no path names). */
constexpr long kExactTrustMs = 1000;
/* Exits past PRE_COMMIT listed per entry with their transaction (more: pending, unlisted). */
constexpr int kPendingListed = 8;
/* The last exits added to an entry's counter, with their transactions. */
constexpr int kRecentAdds = 16;
/* Claims past PRE_COMMIT that released their queue's limit lock, listed per entry (more: they keep the lock). */
constexpr int kCommittingListed = 16;
/* Queues one transaction follows (claims) or ends attempts of at most (more: their bounds become unknown, their exits
 * are lost). */
constexpr int kFollowed = 8;

/* A queue's identity: 128 bits of hash over database and queue name. */
struct QueueId
{
	std::uint64_t lo;
	std::uint64_t hi;
};

/* An exit past PRE_COMMIT that has not added itself yet: its transaction, queue and attempts (xid invalid: free). */
struct PendingExit
{
	TransactionId xid;
	QueueId id;
	std::uint32_t n;
};

/* A claim past PRE_COMMIT whose commit is not visible yet, its queue's limit lock released (xid invalid: free). */
struct CommittingClaim
{
	TransactionId xid;
	QueueId id;
};

/* An exit added to an entry's counter: its transaction, attempts, and the counter after it. */
struct AddedExit
{
	TransactionId xid;
	std::uint32_t n;
	std::uint64_t upto;
};

/*
 * A queue's entry. The identity is kept while the entry is not trusted (valid false), so
 * exits keep being counted; gen changes whenever the entry is taken for a queue. The pending
 * exits belong to the index, whatever queue holds the entry.
 */
struct Bound
{
	slock_t lock;
	bool valid;
	Oid db;
	QueueId id;
	std::uint64_t gen;
	std::uint64_t forgets; /* moved by every forget at this index, whoever holds it: a publication begun before one is
							  not trusted */
	std::uint64_t stamp;
	TimestampTz counted;		 /* when the count this bound started from was made */
	std::int64_t base;			 /* the bound as last published */
	std::uint64_t exits;		 /* exits of the queue added since the entry was taken for it */
	std::uint64_t exits_at_base; /* ... when the count behind `base` read them */
	bool exits_lower;			 /* whether the exits since exits_at_base lower the bound */
	bool exact;					 /* the bound is the running attempts, under `epoch` */
	std::uint64_t epoch;		 /* the exactness epoch read before the count behind `base` */
	std::uint64_t nadds;		 /* exits added since the entry was taken (recent: the last kRecentAdds) */
	AddedExit recent[kRecentAdds];
	PendingExit pending[kPendingListed];
	std::uint32_t pending_unlisted; /* exits past PRE_COMMIT of this index not listed (no xid, or no room) */
	CommittingClaim committing[kCommittingListed]; /* of this index, whatever queue holds the entry */
};

/* Shared: the entries, with per entry the exits past PRE_COMMIT that have not added themselves. */
struct Bounds
{
	pg_atomic_uint64 gens;
	/* Moved when attempts end that no bound takes off (unnamed, lost or prepared exits): exact bounds made before end.
	 */
	pg_atomic_uint64 epoch;
	/* Transactions past PRE_COMMIT whose exits no bound takes off, until they have moved the epoch. */
	pg_atomic_uint32 pending_unknown;
	Bound entry[kBounds];
};

Bounds *bounds = nullptr;

/* A queue this transaction claimed under its limit lock: what to publish at commit. */
struct Followed
{
	QueueId id;
	std::uint64_t stamp;
	TimestampTz counted;
	std::int64_t base;		/* the bound found, or the running attempts counted */
	bool counted_here;		/* base is this transaction's count (its publication replaces) */
	std::uint64_t gen;		/* the entry's generation it was read or counted under */
	std::uint64_t forgets;	/* the entry's forget sequence then */
	std::uint64_t exits_at; /* counted_here: the exit counter read after the count */
	bool exits_lower;		/* counted_here: no exit was pending then */
	bool exact;				/* counted_here: the count is exact (see running_bound_counted) */
	bool unpublished;		/* counted while a followed prepared transaction was in progress: publish nothing */
	std::uint64_t epoch;	/* counted_here: the exactness epoch read before the count */
	std::int64_t started;
	bool holds_lock;			  /* the claim holds the queue's limit lock `lock` (taken once in the transaction) */
	LOCKTAG lock;				  /* ... its tag */
	int committing;				  /* released at PRE_COMMIT: its slot in the entry's committing claims; else -1 */
	TransactionId committing_xid; /* ... listed under this transaction id */
};

/* Exits of one queue in this transaction: how many, and how many its count (if any) already did not see. */
struct Exits
{
	QueueId id;
	text *queue; /* the name, to find the queue again (TopTransactionContext) */
	std::int64_t n;
	std::int64_t unseen_by_count; /* noted before this transaction's count of the queue */
	bool raised;				  /* counted as pending (from PRE_COMMIT) until added or dropped */
	int listed;					  /* its slot in the entry's pending list, or -1 (unlisted) */
};

Followed followed[kFollowed];
int nfollowed = 0;
Exits exits[kFollowed];
int nexits = 0;
bool exits_lost = false; /* more queues than kFollowed: the rest are not taken off */
/* Queues this transaction claimed from having read no concurrency limit, and the stamp before the first read. */
text *unlimited[kFollowed];
int nunlimited = 0;
bool unlimited_lost = false; /* more of them than kFollowed */
std::uint64_t unlimited_stamp = 0;
/* A savepoint was rolled back: until the transaction ends its claims count and it publishes and takes off nothing. */
bool untrusted = false;
/* This transaction ends attempts that no bound will take off (unnamed, or lost): exact bounds end at its commit. */
bool exits_unknown = false;
bool unknown_raised = false; /* counted in pending_unknown (from PRE_COMMIT) */

/* The identity of (this database, queue). */
QueueId
queue_id(text *queue)
{
	const unsigned char *bytes = reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue));
	int len = VARSIZE_ANY_EXHDR(queue);

	return {hash_bytes_extended(bytes, len, hash_bytes_uint32_extended(MyDatabaseId, 0x6177615f72756e31ULL)),
			hash_bytes_extended(bytes, len, hash_bytes_uint32_extended(MyDatabaseId, 0x6177615f72756e32ULL))};
}

/* The index of a queue's entry. */
int
index_of(const QueueId &id)
{
	return static_cast<int>(id.lo % kBounds);
}

/* Whether the entry is the queue's (under its lock). */
bool
owned(const Bound &e, const QueueId &id)
{
	return e.db == MyDatabaseId && e.id.lo == id.lo && e.id.hi == id.hi;
}

/* Take the entry for a queue, untrusted and with no exits counted (under its lock). */
void
take_entry(Bound &e, const QueueId &id)
{
	e.valid = false;
	e.db = MyDatabaseId;
	e.id = id;
	e.gen = pg_atomic_add_fetch_u64(&bounds->gens, 1);
	e.exits = 0;
	e.exits_at_base = 0;
	e.exits_lower = false;
	e.exact = false;
	e.epoch = 0;
	e.nadds = 0;
	e.base = 0;
}

/* An exit is no longer pending in its entry (under the entry's lock). */
void
unlist(Bound &e, Exits &x)
{
	if (x.listed >= 0)
		e.pending[x.listed].xid = InvalidTransactionId;
	else
		e.pending_unlisted--;
	x.raised = false;
}

/* The bound an entry holds now (under its lock). */
std::int64_t
current_bound(const Bound &e)
{
	std::int64_t lowered = e.exits_lower ? static_cast<std::int64_t>(e.exits - e.exits_at_base) : 0;

	return std::max<std::int64_t>(e.base - lowered, 0);
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

/* This transaction's exits of a queue, or nullptr. */
Exits *
exits_of(const QueueId &id)
{
	for (int i = 0; i < nexits; i++)
		if (exits[i].id.lo == id.lo && exits[i].id.hi == id.hi)
			return &exits[i];
	return nullptr;
}

/* Make the queue's published bound untrusted (its exits keep being counted). */
void
forget(const QueueId &id)
{
	Bound &e = bounds->entry[index_of(id)];

	/* Whoever holds the entry: a claim of the queue that began publishing may take it back. */
	SpinLockAcquire(&e.lock);
	if (owned(e, id))
		e.valid = false;
	e.forgets++;
	SpinLockRelease(&e.lock);
}

/* Make every bound untrusted (a transaction claimed from more queues than it follows). */
void
forget_database()
{
	for (Bound &e : bounds->entry)
	{
		SpinLockAcquire(&e.lock);
		if (e.db == MyDatabaseId)
			e.valid = false;
		e.forgets++;
		SpinLockRelease(&e.lock);
	}
}

/*
 * The published bound of a queue, when it is the queue's, trusted, under the current stamp,
 * and young enough: the bound, its generation and the time of its count.
 */
bool
published(const QueueId &id, std::uint64_t stamp, std::int64_t *bound, std::uint64_t *gen, std::uint64_t *forgets,
		  TimestampTz *counted, bool *exact)
{
	Bound &e = bounds->entry[index_of(id)];
	bool found;
	std::uint64_t epoch = 0;

	SpinLockAcquire(&e.lock);
	found = e.valid && owned(e, id) && e.stamp == stamp;
	if (found)
	{
		*bound = current_bound(e);
		*gen = e.gen;
		*forgets = e.forgets;
		*counted = e.counted;
		*exact = e.exact;
		epoch = e.epoch;
	}
	SpinLockRelease(&e.lock);
	if (!found || TimestampDifferenceExceeds(*counted, GetCurrentTimestamp(), kTrustMs))
		return false;
	/*
	 * Exact only under its epoch, with no unnamed exit past its commit record. An exit that
	 * is visible and has not added itself yet counts as running a moment longer.
	 */
	if (*exact)
		*exact = epoch == pg_atomic_read_u64(&bounds->epoch) && pg_atomic_read_u32(&bounds->pending_unknown) == 0 &&
				 !TimestampDifferenceExceeds(*counted, GetCurrentTimestamp(), kExactTrustMs);
	return true;
}

/* Follow a queue; nullptr when no more queues can be followed. */
Followed *
follow(const QueueId &id)
{
	if (nfollowed == kFollowed)
		return nullptr;
	followed[nfollowed] = {};
	followed[nfollowed].id = id;
	followed[nfollowed].committing = -1;
	return &followed[nfollowed++];
}

/* Publish what this transaction's claims of a queue leave (at commit, under the queue's limit lock). */
void
publish(const Followed &f)
{
	Bound &e = bounds->entry[index_of(f.id)];

	SpinLockAcquire(&e.lock);
	if (e.forgets != f.forgets || f.unpublished)
	{
		/*
		 * Forgotten since it was read (a claim that read no limit committed or was prepared), or
		 * counted while a prepared claim's attempts were unseen: nothing trusted is published.
		 */
		if (owned(e, f.id))
			e.valid = false;
		e.forgets++;
		SpinLockRelease(&e.lock);
		return;
	}
	if (!owned(e, f.id) || e.gen != f.gen)
	{
		/* Taken by another queue meanwhile: start again from what this transaction knew, without exits. */
		take_entry(e, f.id);
		e.base = f.base + f.started;
	}
	else if (f.counted_here)
	{
		e.base = f.base + f.started;
		e.exits_at_base = f.exits_at;
		e.exits_lower = f.exits_lower;
		e.exact = f.exact;
		e.epoch = f.epoch;
	}
	else
		e.base += f.started; /* the exits since keep lowering it */
	e.valid = true;
	e.stamp = f.stamp;
	e.counted = f.counted;
	SpinLockRelease(&e.lock);
}

/*
 * Add a queue's committed exits to its counter (after the commit is visible), no longer
 * pending in the same step, so a count finds each exit either pending or added.
 */
void
add_exits(Exits &x, TransactionId xid)
{
	Bound &e = bounds->entry[index_of(x.id)];
	std::int64_t n = x.n - x.unseen_by_count;

	SpinLockAcquire(&e.lock);
	unlist(e, x);
	if (owned(e, x.id))
	{
		e.exits += static_cast<std::uint64_t>(n);
		e.recent[e.nadds % kRecentAdds] = {xid, static_cast<std::uint32_t>(n), e.exits};
		e.nadds++;
	}
	SpinLockRelease(&e.lock);
}

/*
 * List this transaction's claim of a queue among the entry's committing claims; false when
 * the list is full (the claim then keeps its limit lock to the end).
 */
bool
list_committing(Followed &f, TransactionId xid)
{
	Bound &e = bounds->entry[index_of(f.id)];

	SpinLockAcquire(&e.lock);
	for (int k = 0; k < kCommittingListed; k++)
		if (!TransactionIdIsValid(e.committing[k].xid))
		{
			e.committing[k] = {xid, f.id};
			f.committing = k;
			f.committing_xid = xid;
			break;
		}
	SpinLockRelease(&e.lock);
	return f.committing >= 0;
}

/* The transaction's commit is visible, or it aborted: no count waits for it any more. */
void
unlist_committing(Followed &f)
{
	Bound &e = bounds->entry[index_of(f.id)];

	SpinLockAcquire(&e.lock);
	if (e.committing[f.committing].xid == f.committing_xid)
		e.committing[f.committing].xid = InvalidTransactionId;
	SpinLockRelease(&e.lock);
	f.committing = -1;
}

/* Forget this transaction's followed queues and exits (a savepoint rolled back, a prepare, an abort). */
void
drop_all(bool forget_bounds)
{
	if (bounds != nullptr)
	{
		if (forget_bounds)
			for (int i = 0; i < nfollowed; i++)
				forget(followed[i].id);
		for (int i = 0; i < nexits; i++)
			if (exits[i].raised)
			{
				Bound &e = bounds->entry[index_of(exits[i].id)];

				SpinLockAcquire(&e.lock);
				unlist(e, exits[i]);
				SpinLockRelease(&e.lock);
			}
		if (unknown_raised)
			pg_atomic_fetch_sub_u32(&bounds->pending_unknown, 1);
	}
	unknown_raised = false;
	nfollowed = 0;
	nexits = 0;
	exits_lost = false;
}

/* Transaction end: forget what it did (publishing first, at a commit). */
void
end_transaction()
{
	drop_all(false);
	untrusted = false;
	exits_unknown = false;
	nunlimited = 0;
	unlimited_lost = false;
}

/* Subtransaction end: a savepoint rolled back may have released limit locks and undone exits. */
void
on_running_bound_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* Exits of the transaction before the savepoint stand, and are no longer taken off. */
		if (nexits > 0)
			exits_unknown = true;
		drop_all(true);
		untrusted = true;
		exits_lost = true;
	}
}

/* Whether this transaction claimed the queue while it read no concurrency limit. */
bool
claimed_unlimited(text *queue)
{
	if (unlimited_lost)
		return true;
	for (int i = 0; i < nunlimited; i++)
		if (VARSIZE_ANY_EXHDR(unlimited[i]) == VARSIZE_ANY_EXHDR(queue) &&
			memcmp(VARDATA_ANY(unlimited[i]), VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue)) == 0)
			return true;
	return false;
}

} // namespace

/* A trusted bound of the queue's running attempts, under its limit lock (see the header). */
bool
running_bound_lookup(text *queue, std::int64_t *bound, bool *exact)
{
	QueueId id;
	Followed *f;
	Exits *x;
	std::uint64_t stamp;
	std::uint64_t gen;
	std::uint64_t forgets;
	TimestampTz counted;

	*exact = false;
	if (!bounds_usable() || untrusted)
		return false;
	/*
	 * Attempts this transaction started while it read no limit are in no bound: neither in one
	 * another claim published (they were not committed when it counted) nor in what this
	 * transaction follows of the queue from an earlier claim under a limit. Only a count sees them.
	 */
	if (claimed_unlimited(queue))
		return false;
	id = queue_id(queue);
	f = followed_of(id);
	if (f != nullptr)
	{
		/* Exits committed since this transaction read or made it are not in it: an upper bound only. */
		*bound = f->base + f->started;
		return true;
	}
	stamp = queue_meta_stamp();
	if ((stamp & 1) != 0 || !published(id, stamp, bound, &gen, &forgets, &counted, exact))
		return false; /* queue_meta changed by this transaction, or nothing trusted: count */
	/* This transaction's own exits are visible to a count, not yet taken off the bound. */
	x = exits_of(id);
	if (exits_unknown || exits_lost || (x != nullptr && x->n > 0))
		*exact = false;
	f = follow(id);
	if (f == nullptr)
	{
		forget(id);
		return false;
	}
	f->stamp = stamp;
	f->counted = counted;
	f->base = *bound;
	f->gen = gen;
	f->forgets = forgets;
	return true;
}

/* Read before a count's snapshot: what tells whether the count can be exact (see the header). */
RunningCountTicket
running_bound_count_ticket(text *queue)
{
	RunningCountTicket t = {};
	QueueId id;

	if (!bounds_usable())
		return t;
	id = queue_id(queue);
	/* The epoch first: a prepare with exits moves it after it has been listed as pending. */
	t.epoch = pg_atomic_read_u64(&bounds->epoch);
	pg_memory_barrier();
	if (prepared_exits_pending())
		t.epoch = 0;
	{
		Bound &e = bounds->entry[index_of(id)];

		/* Taken now if need be: the exits that add themselves during the count must be kept. */
		SpinLockAcquire(&e.lock);
		if (!owned(e, id))
			take_entry(e, id);
		t.owned = true;
		t.gen = e.gen;
		t.exits = e.exits;
		t.forgets = e.forgets;
		SpinLockRelease(&e.lock);
	}
	pg_memory_barrier();
	return t;
}

/* The claim counted the queue's running attempts under its limit lock (see the header). */
std::int64_t
running_bound_counted(text *queue, std::int64_t running, const RunningCountTicket &ticket, Snapshot snapshot)
{
	QueueId id;
	Followed *f;
	Exits *x;
	std::uint64_t stamp;
	std::uint64_t gen;
	std::uint64_t forgets;
	std::uint64_t exits_at = 0;
	bool exits_lower;
	bool unknown_pending;
	bool same = false;
	bool adds_known = false;
	bool pending_any;
	AddedExit added[kRecentAdds];
	int nadded = 0;
	PendingExit pending[kPendingListed];
	int npending = 0;
	std::int64_t correction = 0;
	std::int64_t started_before;
	int i;

	if (!bounds_usable())
		return running;
	id = queue_id(queue);
	stamp = queue_meta_stamp();
	f = followed_of(id);
	if (untrusted || (stamp & 1) != 0 || (f == nullptr && (f = follow(id)) == nullptr))
	{
		/*
		 * A savepoint rolled back, queue_meta changed by this transaction (its commit moves the
		 * stamp), or too many queues: publish nothing, and no bound stays trusted meanwhile.
		 */
		forget(id);
		return running;
	}
	i = index_of(id);
	{
		Bound &e = bounds->entry[i];

		SpinLockAcquire(&e.lock);
		if (!owned(e, id))
			take_entry(e, id);
		gen = e.gen;
		forgets = e.forgets;
		SpinLockRelease(&e.lock);
	}
	/*
	 * The publication begins at the ticket, before the count's snapshot: a claim that read no
	 * limit and committed during the count (its attempts unseen by it) forgets the bound then.
	 */
	if (ticket.owned)
		forgets = ticket.forgets; /* the index's sequence, whoever held the entry meanwhile */
	/*
	 * After the count's snapshot, in one step: the counter, the exits added since the ticket
	 * and the queue's exits still pending (each exit is one or the other).
	 */
	pg_memory_barrier();
	unknown_pending = pg_atomic_read_u32(&bounds->pending_unknown) != 0;
	{
		Bound &e = bounds->entry[i];

		SpinLockAcquire(&e.lock);
		same = owned(e, id) && e.gen == gen;
		if (same)
		{
			std::uint64_t sum = 0;

			exits_at = e.exits;
			for (std::uint64_t j = 0; j < std::min<std::uint64_t>(e.nadds, kRecentAdds); j++)
			{
				const AddedExit &a = e.recent[(e.nadds - 1 - j) % kRecentAdds];

				if (a.upto > ticket.exits && a.upto <= exits_at)
				{
					added[nadded++] = a;
					sum += a.n;
				}
			}
			/*
			 * Known only when no claim that read no limit committed during the count (it
			 * forgot the bound first): an exit of its attempts was not counted running.
			 */
			adds_known =
				ticket.owned && ticket.gen == gen && sum == exits_at - ticket.exits && e.forgets == ticket.forgets;
		}
		pending_any = e.pending_unlisted > 0;
		for (const PendingExit &p : e.pending)
			if (TransactionIdIsValid(p.xid) && p.id.lo == id.lo && p.id.hi == id.hi)
			{
				pending[npending++] = p;
				pending_any = true;
			}
		adds_known = adds_known && e.pending_unlisted == 0;
		SpinLockRelease(&e.lock);
	}
	/*
	 * Which of them the count saw, by their transactions against its snapshot: an exit added
	 * that the snapshot did not see was counted running and is already in the counter (taken
	 * off now); one pending that it saw committed was not counted and will still be taken off
	 * (put back now). Then the exits since lower the bound, and it is exact.
	 */
	/*
	 * Not while a prepared transaction that ended attempts or claimed without a limit was in
	 * progress at the ticket: its exits, or the exits of its attempts, may commit unseen.
	 */
	if (adds_known && snapshot != nullptr && ticket.epoch != 0)
	{
		for (int k = 0; k < nadded && adds_known; k++)
			if (!TransactionIdIsValid(added[k].xid))
				adds_known = false;
			else if (XidInMVCCSnapshot(added[k].xid, snapshot))
				correction -= added[k].n;
		for (int k = 0; k < npending && adds_known; k++)
			if (!XidInMVCCSnapshot(pending[k].xid, snapshot) && TransactionIdDidCommit(pending[k].xid))
				correction += pending[k].n;
	}
	else
		adds_known = false;
	/* Otherwise the exits since the count lower nothing if any was pending (see the file comment). */
	exits_lower = same && (adds_known || !pending_any);
	/* This transaction's own exits so far: the count did not see their attempts. */
	x = exits_of(id);
	if (x != nullptr)
		x->unseen_by_count = x->n;
	/* What it started before stays counted (its own rows may be in the count too: over, never under). */
	started_before = f->started;
	/*
	 * Exact when every exit the count did not see will be taken off, and every one it saw is
	 * taken off no more (all known), none unnamed, lost or prepared since the ticket; and
	 * nothing is counted twice.
	 */
	/* A prepared claim that read no limit may commit unseen by this count: nothing of it is trusted. */
	f->unpublished = f->unpublished || ticket.epoch == 0;
	f->exact =
		ticket.epoch != 0 && adds_known && !unknown_pending && started_before == 0 && !exits_unknown && !exits_lost;
	f->epoch = ticket.epoch;
	f->stamp = stamp;
	f->counted = GetCurrentTimestamp();
	f->base = std::max<std::int64_t>(running + (adds_known ? correction : 0), 0);
	f->counted_here = true;
	f->gen = gen;
	f->forgets = forgets;
	f->exits_at = exits_at;
	f->exits_lower = exits_lower;
	return f->base;
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

/* The claim holds the queue's limit lock (see the header). */
void
running_bound_hold_lock(text *queue, const LOCKTAG *lock)
{
	Followed *f;

	if (!bounds_usable())
		return;
	f = followed_of(queue_id(queue));
	if (f == nullptr)
		return; /* not followed: nothing is published, the lock is kept to the end */
	f->holds_lock = true;
	f->lock = *lock;
}

/* Under the queue's limit lock, before a count: wait for the claims whose commit is on its way (see the header). */
void
running_bound_wait_committing(text *queue)
{
	TransactionId wait[kCommittingListed];
	int n = 0;
	QueueId id;

	if (!bounds_usable())
		return;
	id = queue_id(queue);
	{
		Bound &e = bounds->entry[index_of(id)];

		SpinLockAcquire(&e.lock);
		for (const CommittingClaim &c : e.committing)
			if (TransactionIdIsValid(c.xid) && c.id.lo == id.lo && c.id.hi == id.hi)
				wait[n++] = c.xid;
		SpinLockRelease(&e.lock);
	}
	/*
	 * Only claims that held the limit lock before this one are listed (a claim lists itself
	 * under it), so none is added meanwhile. After the wait each has committed, visible to
	 * the count's snapshot, or aborted.
	 */
	for (int k = 0; k < n; k++)
		if (!TransactionIdIsCurrentTransactionId(wait[k]))
			XactLockTableWait(wait[k], nullptr, nullptr, XLTW_None);
}

/* An attempt of the queue ends in this transaction (see the header). */
void
running_bound_note_exit(text *queue)
{
	QueueId id;
	Exits *x;

	if (!bounds_usable())
		return;
	if (queue == nullptr || exits_lost)
	{
		exits_unknown = true;
		return;
	}
	/* The last queue noted, by name, saves the hashing of a batch's exits. */
	for (int i = nexits - 1; i >= 0; i--)
		if (VARSIZE_ANY_EXHDR(exits[i].queue) == VARSIZE_ANY_EXHDR(queue) &&
			memcmp(VARDATA_ANY(exits[i].queue), VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue)) == 0)
		{
			exits[i].n++;
			return;
		}
	id = queue_id(queue);
	x = exits_of(id);
	if (x == nullptr)
	{
		MemoryContext old;

		if (nexits == kFollowed)
		{
			exits_lost = true;
			exits_unknown = true;
			return;
		}
		x = &exits[nexits++];
		*x = {};
		x->id = id;
		old = MemoryContextSwitchTo(TopTransactionContext);
		x->queue = static_cast<text *>(palloc(VARSIZE_ANY_EXHDR(queue) + VARHDRSZ));
		SET_VARSIZE(x->queue, VARSIZE_ANY_EXHDR(queue) + VARHDRSZ);
		memcpy(VARDATA(x->queue), VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
		MemoryContextSwitchTo(old);
	}
	x->n++;
}

/* This transaction ends attempts it does not name (see the header). */
void
running_bound_note_exits_unknown()
{
	if (bounds_usable())
		exits_unknown = true;
}

/* A claim of the queue read no concurrency limit (see the header). */
void
running_bound_note_unlimited(text *queue, std::uint64_t stamp_before)
{
	MemoryContext old;

	if (!bounds_usable())
		return;
	if (nunlimited == 0 && !unlimited_lost)
		unlimited_stamp = stamp_before;
	if (claimed_unlimited(queue))
		return;
	if (nunlimited == kFollowed)
	{
		unlimited_lost = true;
		return;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	unlimited[nunlimited] = static_cast<text *>(palloc(VARSIZE_ANY_EXHDR(queue) + VARHDRSZ));
	SET_VARSIZE(unlimited[nunlimited], VARSIZE_ANY_EXHDR(queue) + VARHDRSZ);
	memcpy(VARDATA(unlimited[nunlimited]), VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	nunlimited++;
	MemoryContextSwitchTo(old);
}

/* Whether this transaction claimed a queue that had no concurrency limit (see the header). */
bool
running_bound_claimed_unlimited()
{
	return nunlimited > 0 || unlimited_lost;
}

/*
 * Whether the queue is at its cap by an exact bound, without the limit lock (see the header).
 * The bound only leaves out claims in flight (they add) and exits not yet added (counted
 * running a moment longer), as under the lock: a claim the lock would give no room gets none
 * here either, and one that ends its wait after an exit's commit sees the freed place.
 */
bool
running_bound_at_cap(text *queue, int limit)
{
	std::int64_t bound;
	std::uint64_t gen;
	std::uint64_t forgets;
	std::uint64_t stamp;
	TimestampTz counted;
	bool exact;
	QueueId id;
	Exits *x;

	if (!bounds_usable() || untrusted || exits_unknown || exits_lost)
		return false;
	id = queue_id(queue);
	x = exits_of(id);
	if (followed_of(id) != nullptr || (x != nullptr && x->n > 0))
		return false;
	stamp = queue_meta_stamp();
	return (stamp & 1) == 0 && published(id, stamp, &bound, &gen, &forgets, &counted, &exact) && exact &&
		   bound >= limit;
}

/* A bound of the queue's running attempts without its lock (see the header). */
bool
running_bound_peek(text *queue, std::int64_t *bound)
{
	std::uint64_t gen;
	std::uint64_t forgets;
	TimestampTz counted;
	std::uint64_t stamp;
	bool exact;

	if (!bounds_usable())
		return false;
	stamp = queue_meta_stamp();
	return (stamp & 1) == 0 && published(queue_id(queue), stamp, bound, &gen, &forgets, &counted, &exact);
}

/* Before the commit record: this transaction's exits count as pending (see the header). */
void
running_bound_at_pre_commit()
{
	if (bounds == nullptr)
		return;
	/*
	 * Every queue's, whether or not it has an entry now: a count that takes an entry for the
	 * queue before this commit is visible must not take these exits off itself.
	 */
	TransactionId xid = GetTopTransactionIdIfAny();

	for (int i = 0; i < nexits; i++)
		if (exits[i].n > exits[i].unseen_by_count)
		{
			Bound &e = bounds->entry[index_of(exits[i].id)];

			exits[i].listed = -1;
			SpinLockAcquire(&e.lock);
			for (int k = 0; k < kPendingListed && TransactionIdIsValid(xid); k++)
				if (!TransactionIdIsValid(e.pending[k].xid))
				{
					e.pending[k] = {xid, exits[i].id,
									static_cast<std::uint32_t>(exits[i].n - exits[i].unseen_by_count)};
					exits[i].listed = k;
					break;
				}
			if (exits[i].listed < 0)
				e.pending_unlisted++;
			exits[i].raised = true;
			SpinLockRelease(&e.lock);
		}
	if (exits_unknown)
	{
		pg_atomic_fetch_add_u32(&bounds->pending_unknown, 1);
		unknown_raised = true;
	}
	/*
	 * The claims' bounds published now, and their limit locks released: the next claim of the
	 * queue need not wait for this commit's flush. The bound it finds holds this transaction's
	 * attempts; a count, which would not see them until the commit is visible, waits for this
	 * transaction first (running_bound_wait_committing). Not for a transaction that also
	 * claimed queues that read no limit (its commit may forget their bounds first).
	 */
	if (nunlimited > 0 || unlimited_lost || !TransactionIdIsValid(xid))
		return;
	for (int i = 0; i < nfollowed; i++)
		if (followed[i].holds_lock && list_committing(followed[i], xid))
		{
			ResourceOwner owner = CurrentResourceOwner;

			publish(followed[i]);
			/* Taken by the transaction's resource owner (flow_control.cpp, take_limit_lock). */
			CurrentResourceOwner = TopTransactionResourceOwner;
			LockRelease(&followed[i].lock, ExclusiveLock, false);
			CurrentResourceOwner = owner;
			followed[i].holds_lock = false;
		}
}

/* Publish the followed queues' bounds, then add the exits (see the header). */
void
running_bound_at_xact_end(bool committed)
{
	if (committed && bounds != nullptr)
	{
		/*
		 * Claims that read no limit, and queue_meta changed since: their queues' bounds may
		 * miss them. First: a count that sees this transaction's exits added sees the forget.
		 */
		if ((nunlimited > 0 || unlimited_lost) && queue_meta_stamp() != unlimited_stamp)
		{
			if (unlimited_lost)
				forget_database();
			for (int i = 0; i < nunlimited; i++)
				forget(queue_id(unlimited[i]));
		}
		for (int i = 0; i < nfollowed; i++)
			if (followed[i].committing < 0)
				publish(followed[i]);
		TransactionId xid = GetTopTransactionIdIfAny();

		for (int i = 0; i < nexits; i++)
			if (exits[i].raised)
				add_exits(exits[i], xid);
		/* Attempts ended that no bound takes off: the exact bounds made before end (visible now). */
		if (unknown_raised)
			pg_atomic_fetch_add_u64(&bounds->epoch, 1);
		pg_memory_barrier();
		/* Visible now: counts no longer wait for it. */
		for (int i = 0; i < nfollowed; i++)
			if (followed[i].committing >= 0)
				unlist_committing(followed[i]);
	}
	else if (bounds != nullptr)
	{
		/* Aborted after publishing at PRE_COMMIT: its attempts never start, the bound it left is forgotten. */
		for (int i = 0; i < nfollowed; i++)
			if (followed[i].committing >= 0)
			{
				forget(followed[i].id);
				unlist_committing(followed[i]);
			}
	}
	end_transaction(); /* takes back the pending marks, after the exits were added */
}

/* The followed queues' bounds become unknown at a prepare; its exits are not taken off (see the header). */
void
running_bound_at_prepare()
{
	/* Its claims that read no limit commit elsewhere: their queues' bounds may miss them from now on. */
	if (bounds != nullptr && unlimited_lost)
		forget_database();
	for (int i = 0; bounds != nullptr && i < nunlimited; i++)
		forget(queue_id(unlimited[i]));
	/* Its exits end at COMMIT PREPARED, which takes nothing off: exact bounds made before end. */
	if (bounds != nullptr && (nexits > 0 || exits_unknown))
		pg_atomic_fetch_add_u64(&bounds->epoch, 1);
	exits_unknown = false;
	drop_all(true);
	untrusted = false;
	nunlimited = 0;
	unlimited_lost = false;
}

/* _PG_init: the subtransaction hook. */
void
init_running_bound_hooks()
{
	RegisterSubXactCallback(on_running_bound_subxact, nullptr);
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
	{
		pg_atomic_init_u64(&bounds->gens, 0);
		pg_atomic_init_u64(&bounds->epoch, 1); /* 0 is no epoch (running_bound_count_ticket) */
		pg_atomic_init_u32(&bounds->pending_unknown, 0);
		for (Bound &e : bounds->entry)
		{
			SpinLockInit(&e.lock);
			e.valid = false;
			e.db = InvalidOid;
			e.id = {0, 0};
			e.nadds = 0;
			e.pending_unlisted = 0;
			for (PendingExit &p : e.pending)
				p.xid = InvalidTransactionId;
			for (CommittingClaim &c : e.committing)
				c.xid = InvalidTransactionId;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
