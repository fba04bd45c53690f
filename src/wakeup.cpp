/*
 * wakeup.cpp — telling workers that work arrived (docs/design.md §8) without a server-wide lock:
 * a per-queue NOTIFY throttle (awa_shard.notify_interval), and, when preloaded, a list of the
 * workers sleeping in awa.wait_for_jobs per wake slot in shared memory. A producing
 * transaction, after its commit, wakes as many sleepers of each queue it fed as it brought
 * work for (one per lane it added rows to; a claim that left rows in its lane, one more), by
 * their latches, not all of them. Without preload, wait_for_jobs sleeps and
 * re-checks.
 *
 * No lost wake-up: a sleeper puts itself on its slot's list before it checks for work (on
 * a new snapshot), and a producer scans the list only after its transaction has ended in
 * full: its rows visible, its in-flight reservations released, its catalog invalidations
 * sent and its locks released (a transaction that made a new lane holds its new sequence
 * exclusively until then, and a check cannot read the lane before). So a commit either is
 * seen by the check or finds the sleeper on the list. A woken sleeper checks again (an
 * awake worker may have taken the work). Two awake workers do not claim the same rows: the
 * check promises the lane it found to its worker's coming claim (promise_lane), and treats
 * a lane another worker holds or was promised as busy: it looks again shortly instead of
 * reporting work. A queue whose flow control limits hold claims back (flow_control.cpp)
 * reports no work until they let one through.
 */
#include "catalog_version.hpp"
#include "flow_control.hpp"
#include "module.hpp"
#include "pg_boundary.hpp"
#include "registry.hpp"
#include "validate.hpp"
#include "wakeup.hpp"
#include "work_check.hpp"

extern "C"
{
#include "access/xact.h"
#include "commands/async.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include <algorithm>
#include <cstdint>

namespace awa
{

namespace
{

constexpr int kWakeSlots = 128;
constexpr int kNotifySlots = 256;
constexpr int kMaxFedQueues = 32;
constexpr int kNone = -1;
constexpr int kWakeBatch = 64; /* latches set per pass over a slot */
/* Longest sleep of a worker its queue's limits hold back before it reads them again. */
constexpr long kLimitsRecheckMs = 1000;
constexpr int kPromiseSlots = 1024;
constexpr long kPromiseMs = 50;	   /* a promise not used by a claim within this expires */
constexpr int kMaxBusyPolls = 100; /* waits for claims in progress before reporting work (~1 s) */

/* A backend's entry (indexed by pgprocno): on its slot's list while it sleeps. */
struct Sleeper
{
	int next;
	int prev;
	int slot; /* kNone: on no list */
	Oid dbid;
	std::uint64_t queue;	  /* hash of the queue name */
	bool woken;				  /* a producer took it off the list for its work */
	std::uint64_t fence_bits; /* lanes its check found held back by an in-flight reservation */
};

/*
 * One wake slot: queues hash onto slots; the list of the sleepers of its queues, and the
 * number of ends of reserving transactions of its queues (a sleeper whose check overlapped
 * one checks again).
 */
struct WakeSlot
{
	slock_t mutex;
	int head;
	std::uint64_t fence_ends;
};

/* A lane promised to one worker's coming claim (direct-mapped by lane; a collision replaces). */
struct Promise
{
	slock_t mutex;
	Oid dbid;
	Oid seq_oid;
	int procno;
	TransactionId head_xmax; /* the head's xmax when promised: a claim since changed it */
	TimestampTz until;
};

struct WakeShared
{
	WakeSlot slots[kWakeSlots];
	Promise promises[kPromiseSlots];
	pg_atomic_uint64 notify_stamps[kNotifySlots]; /* notify_stamp of each throttle slot */
	int n_sleepers;
	Sleeper sleepers[FLEXIBLE_ARRAY_MEMBER];
};

WakeShared *wake = nullptr;
/* The throttle stamps of this backend alone, used when shared memory is not there. */
std::uint64_t local_notify_stamps[kNotifySlots];

/* Queues fed by the current transaction: sleepers to wake, and whether it reserved numbers. */
struct Fed
{
	std::uint64_t queue;
	int64 wake;
	std::uint64_t fences; /* lanes it reserved numbers on (fence_bit) */
	bool announced;		  /* its first ready row was announced (NOTIFY throttle asked) */
};
Fed fed[kMaxFedQueues];
int nfed = 0;
bool fed_overflow = false;

/* The transaction that ended has wake-ups to deliver once its locks are released. */
bool delivery_due = false;
bool delivery_committed = false;

/* This backend is on a sleeper list (so a transaction end must take it off). */
bool listed = false;
bool exit_hook_registered = false;

/* Hash of (database, queue name) for the NOTIFY throttle: a busy queue of one database never
 * throttles a same-named queue of another. */
std::uint32_t
queue_hash(const char *queue, int queue_len)
{
	return hash_combine(hash_bytes_uint32(MyDatabaseId),
						hash_bytes(reinterpret_cast<const unsigned char *>(queue), queue_len));
}

/* 64-bit identity of a queue name for the sleeper lists (with the database id beside it). */
std::uint64_t
queue_key(const char *queue, int queue_len)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(queue), queue_len, MyDatabaseId);
}

/* The wake slot of a queue. */
WakeSlot *
slot_of(std::uint64_t key)
{
	return &wake->slots[key % kWakeSlots];
}

/* Take a sleeper off its slot's list (slot mutex held). */
void
unlink_sleeper(WakeSlot *slot, int me)
{
	Sleeper *s = &wake->sleepers[me];

	if (s->prev != kNone)
		wake->sleepers[s->prev].next = s->next;
	else
		slot->head = s->next;
	if (s->next != kNone)
		wake->sleepers[s->next].prev = s->prev;
	s->next = s->prev = kNone;
	s->slot = kNone;
}

/*
 * Wake up to `n` sleepers of a queue of this database, and every sleeper whose check found
 * one of the lanes in `fences` held back by an in-flight reservation (this transaction's,
 * perhaps, now ended): take them off the list, mark them woken, then set their latches.
 * With fences, count a fence end on the slot first. Never raises.
 */
void
wake_queue(std::uint64_t key, int64 n, std::uint64_t fences)
{
	WakeSlot *slot = slot_of(key);
	int chosen[kWakeBatch];
	int n_chosen = 0;
	bool more = true;

	if (fences != 0)
	{
		SpinLockAcquire(&slot->mutex);
		slot->fence_ends++;
		SpinLockRelease(&slot->mutex);
	}
	while (more && (n != 0 || fences != 0))
	{
		more = false;
		SpinLockAcquire(&slot->mutex);
		for (int i = slot->head; i != kNone;)
		{
			Sleeper *s = &wake->sleepers[i];
			int next = s->next;

			bool fenced = (s->fence_bits & fences) != 0;

			if (s->dbid == MyDatabaseId && s->queue == key && (n != 0 || fenced))
			{
				if (n_chosen == kWakeBatch)
				{
					more = true;
					break;
				}
				unlink_sleeper(slot, i);
				s->woken = true;
				chosen[n_chosen++] = i;
				if (!fenced && n > 0)
					n--;
				if (n == 0 && fences == 0)
					break;
			}
			i = next;
		}
		SpinLockRelease(&slot->mutex);
		for (int i = 0; i < n_chosen; i++)
			SetLatch(&GetPGProcByNumber(chosen[i])->procLatch);
		n_chosen = 0;
	}
}

/* Wake every sleeper of every slot (a transaction that fed more queues than it tracks). */
void
wake_everyone()
{
	for (int k = 0; k < kWakeSlots; k++)
	{
		WakeSlot *slot = &wake->slots[k];
		int chosen[kWakeBatch];
		int n_chosen;

		do
		{
			n_chosen = 0;
			SpinLockAcquire(&slot->mutex);
			while (slot->head != kNone && n_chosen < kWakeBatch)
			{
				int i = slot->head;

				unlink_sleeper(slot, i);
				wake->sleepers[i].woken = true;
				chosen[n_chosen++] = i;
			}
			SpinLockRelease(&slot->mutex);
			for (int i = 0; i < n_chosen; i++)
				SetLatch(&GetPGProcByNumber(chosen[i])->procLatch);
		} while (n_chosen == kWakeBatch);
	}
}

/* This backend's sleeper entry, or nullptr when it has none (not a regular backend). */
Sleeper *
my_sleeper()
{
	if (wake == nullptr || MyProc == nullptr || MyProc->pgprocno >= wake->n_sleepers)
		return nullptr;
	return &wake->sleepers[MyProc->pgprocno];
}

/* Put this backend on the list of the queue's slot, not woken; returns the slot's fence ends. */
std::uint64_t
list_me(std::uint64_t key)
{
	Sleeper *s = my_sleeper();
	WakeSlot *slot = slot_of(key);
	int me = MyProc->pgprocno;

	SpinLockAcquire(&slot->mutex);
	s->dbid = MyDatabaseId;
	s->queue = key;
	s->woken = false;
	s->fence_bits = 0;
	s->prev = kNone;
	s->next = slot->head;
	if (slot->head != kNone)
		wake->sleepers[slot->head].prev = me;
	slot->head = me;
	s->slot = static_cast<int>(key % kWakeSlots);
	std::uint64_t ends = slot->fence_ends;
	SpinLockRelease(&slot->mutex);
	listed = true;
	return ends;
}

/* Take this backend off its list (if still there); whether a producer woke it. */
bool
unlist_me()
{
	Sleeper *s = my_sleeper();
	WakeSlot *slot;
	bool woken;

	if (!listed || s == nullptr)
		return false;
	slot = slot_of(s->queue);
	SpinLockAcquire(&slot->mutex);
	if (s->slot != kNone)
		unlink_sleeper(slot, MyProc->pgprocno);
	woken = s->woken;
	s->woken = false;
	SpinLockRelease(&slot->mutex);
	listed = false;
	return woken;
}

/* Whether a producer has woken this backend (it is then off the list). */
bool
woken_yet()
{
	Sleeper *s = my_sleeper();
	WakeSlot *slot = slot_of(s->queue);
	bool woken;

	SpinLockAcquire(&slot->mutex);
	woken = s->woken;
	SpinLockRelease(&slot->mutex);
	return woken;
}

/*
 * The check found no work: record the lanes it found fenced, for the reserving producers.
 * False when a reserving transaction of the slot ended since *ends was read (its fence may
 * have held back what the check skipped): then check again; *ends is brought up to date.
 */
bool
settle_me(std::uint64_t fence_bits, std::uint64_t *ends)
{
	Sleeper *s = my_sleeper();
	WakeSlot *slot = slot_of(s->queue);
	bool settled = true;

	SpinLockAcquire(&slot->mutex);
	if (fence_bits != 0 && slot->fence_ends != *ends)
		settled = false;
	else
		s->fence_bits = fence_bits;
	*ends = slot->fence_ends;
	SpinLockRelease(&slot->mutex);
	return settled;
}

/*
 * Leave the list after an error or at exit: a wake-up this backend received but can no
 * longer act on goes to another sleeper of the queue, so it is not lost.
 */
void
unlist_on_error()
{
	Sleeper *s = my_sleeper();

	if (!listed || s == nullptr)
		return;
	if (unlist_me())
		wake_queue(s->queue, 1, 0);
}

/* Backend exit: never leave an entry on a list. */
void
on_exit_unlist(int code, Datum arg)
{
	unlist_on_error();
}

/*
 * A throttle slot's value: the queue's tag (16 bits of its hash that the slot number does not
 * use) and the time of its last NOTIFY in milliseconds since 2000 (48 bits). A slot that
 * another queue last used does not throttle this one: it notifies and takes the slot.
 */
std::uint64_t
notify_stamp(std::uint32_t h, std::uint64_t now_ms)
{
	return (static_cast<std::uint64_t>((h >> 16) & 0xFFFF) << 48) | (now_ms & ((UINT64CONST(1) << 48) - 1));
}

/* Whether slot value `last` (notify_stamp) throttles queue hash `h` at `now_ms` for `interval_ms`. */
bool
notify_throttled(std::uint64_t last, std::uint32_t h, std::uint64_t now_ms, std::uint64_t interval_ms)
{
	std::uint64_t then = last & ((UINT64CONST(1) << 48) - 1);

	return last != 0 && (last >> 48) == ((h >> 16) & 0xFFFF) && now_ms >= then && now_ms - then < interval_ms;
}

/* Whether the throttle lets this transaction NOTIFY for the queue now (claims the slot if so). */
bool
notify_due(std::uint32_t h)
{
	std::uint64_t now_ms = static_cast<std::uint64_t>(GetCurrentTimestamp()) / 1000;
	std::uint64_t interval_ms = static_cast<std::uint64_t>(notify_interval_ms);
	int slot = h % kNotifySlots;

	if (notify_interval_ms < 0)
		return false;
	if (notify_interval_ms == 0)
		return true;
	if (wake != nullptr)
	{
		std::uint64_t last = pg_atomic_read_u64(&wake->notify_stamps[slot]);

		/* A failed exchange re-reads the slot: another queue's stamp there does not throttle this one. */
		while (!notify_throttled(last, h, now_ms, interval_ms))
			if (pg_atomic_compare_exchange_u64(&wake->notify_stamps[slot], &last, notify_stamp(h, now_ms)))
				return true;
		return false;
	}
	if (notify_throttled(local_notify_stamps[slot], h, now_ms, interval_ms))
		return false;
	local_notify_stamps[slot] = notify_stamp(h, now_ms);
	return true;
}

/* NOTIFY channel of a queue: 'awa:' || queue, or 'awa:md5:' || md5(queue) when that is too long. */
void
send_notify(const char *queue, int queue_len)
{
	char channel[NAMEDATALEN];

	if (queue_len + 4 < NAMEDATALEN)
	{
		memcpy(channel, "awa:", 4);
		memcpy(channel + 4, queue, queue_len);
		channel[4 + queue_len] = '\0';
	}
	else
	{
		char hex[33];
		const char *errstr = nullptr;

		if (!pg_md5_hash(queue, queue_len, hex, &errstr))
			elog(ERROR, "awa_shard: md5 failed: %s", errstr ? errstr : "unknown");
		snprintf(channel, sizeof(channel), "awa:md5:%s", hex);
	}
	Async_Notify(channel, "");
}

/*
 * Deliver the ended transaction's wake-ups: per queue it fed, as many sleepers as it noted
 * (on commit), and the sleepers fenced by its reservations (commit or abort). Never raises.
 */
void
deliver_wakeups()
{
	if (fed_overflow)
		wake_everyone();
	else
		for (int i = 0; i < nfed; i++)
			wake_queue(fed[i].queue, delivery_committed ? fed[i].wake : 0, fed[i].fences);
	nfed = 0;
	fed_overflow = false;
	delivery_due = false;
}

/*
 * Resource release of a top-level transaction, after its locks were released and its
 * catalog invalidations sent: the moment its wake-ups may go out (see the file's comment).
 * Never raises.
 */
void
on_resource_release(ResourceReleasePhase phase, bool is_commit, bool is_top_level, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && is_top_level && delivery_due)
		deliver_wakeups();
}

/* This transaction's entry for a queue (nullptr when it tracks too many queues). */
Fed *
fed_entry(std::uint64_t key)
{
	for (int i = 0; i < nfed; i++)
		if (fed[i].queue == key)
			return &fed[i];
	if (nfed == kMaxFedQueues)
	{
		fed_overflow = true;
		return nullptr;
	}
	fed[nfed] = {key, 0, 0, false};
	return &fed[nfed++];
}

} // namespace

/*
 * A transaction added ready rows to `lanes` lanes of a queue: maybe NOTIFY (first time), and
 * wake one sleeper per lane at commit (a claim drains one lane, up to its batch).
 */
void
note_enqueued(const char *queue, int queue_len, int64 lanes)
{
	Fed *f = fed_entry(queue_key(queue, queue_len));
	bool first = f == nullptr || !f->announced;

	if (f != nullptr)
	{
		f->wake += lanes;
		f->announced = true;
	}
	if (first && notify_due(queue_hash(queue, queue_len)))
		send_notify(queue, queue_len);
}

/*
 * A claim of this transaction took a full batch and saw the lane's next row: wake one more
 * sleeper at commit, so a lane that holds more than one batch is drained by as many workers
 * as it can keep busy, one relay at a time.
 */
void
note_more_work(const char *queue, int queue_len)
{
	Fed *f;

	if (wake == nullptr)
		return;
	f = fed_entry(queue_key(queue, queue_len));
	if (f != nullptr)
		f->wake++;
}

/*
 * Promise a lane's waiting rows to this worker's next claim, unless another worker holds a
 * live promise for the lane. Two awake workers whose checks both saw the same rows would
 * otherwise both claim, and one would come back empty; the second now waits (busy) until the
 * first one's claim has locked and released the lane, then looks again.
 */
bool
promise_lane(Oid seq_oid, TransactionId head_xmax)
{
	Promise *p;
	TimestampTz now;
	bool mine = true;

	if (wake == nullptr || MyProc == nullptr)
		return true;
	p = &wake->promises[hash_combine(MyDatabaseId, seq_oid) % kPromiseSlots];
	now = GetCurrentTimestamp();
	SpinLockAcquire(&p->mutex);
	if (p->dbid == MyDatabaseId && p->seq_oid == seq_oid && p->procno != MyProc->pgprocno && p->until > now &&
		p->head_xmax == head_xmax)
		mine = false;
	else
	{
		p->dbid = MyDatabaseId;
		p->seq_oid = seq_oid;
		p->procno = MyProc->pgprocno;
		p->head_xmax = head_xmax;
		p->until = TimestampTzPlusMilliseconds(now, kPromiseMs);
	}
	SpinLockRelease(&p->mutex);
	return mine;
}

/* A transaction reserved lane numbers of a queue (its end may unblock other producers' rows). */
void
note_reserved(const char *queue, int queue_len, Oid seq_oid)
{
	Fed *f;

	if (wake == nullptr)
		return;
	f = fed_entry(queue_key(queue, queue_len));
	if (f != nullptr)
		f->fences |= fence_bit(seq_oid);
}

/*
 * Transaction end (rows visible on commit), never raises. Its reservations are released by
 * now (registry.cpp's callback; again here, which is idempotent, so that no worker woken
 * later finds this transaction's fence whatever the order of the callbacks); the wake-ups
 * go out once its locks are released (on_resource_release). A commit wakes, per queue it
 * fed, as many sleepers as it noted (lanes it added rows to, full claims); a transaction
 * that reserved lane numbers (commit or abort) also wakes the queue's fenced sleepers, whose
 * check found rows held back by an in-flight reservation (perhaps this one) or was still
 * running. A rolled-back enqueue wakes no other sleeper (except past 32 fed queues, where
 * every sleeper wakes and checks again). A backend still on a list (an error while it
 * slept) leaves it.
 */
void
wakeup_at_xact_end(bool committed)
{
	if (delivery_due)
		deliver_wakeups(); /* the last transaction's, should its end not have delivered them */
	if (wake != nullptr && (nfed > 0 || fed_overflow))
	{
		registry_release_xact();
		delivery_due = true;
		delivery_committed = committed;
	}
	else
	{
		nfed = 0;
		fed_overflow = false;
	}
	if (listed)
		unlist_on_error();
}

/*
 * PREPARE TRANSACTION: the transaction ends here without committing, and its COMMIT
 * PREPARED, perhaps in another session, wakes nobody. So a prepared claim relays no wake-up
 * (a sleeper sees the rest of its lane at its next check: its timeout) and nothing of it is
 * left for this session's next transaction; a wait cancelled inside it leaves its list.
 * (A prepared producer is refused by the registry.) Never raises.
 */
void
wakeup_at_prepare()
{
	if (wake != nullptr && nfed > 0)
		registry_release_xact();
	nfed = 0;
	fed_overflow = false;
	delivery_due = false;
	if (listed)
		unlist_on_error();
}

/* Register the resource-release callback that delivers a transaction's wake-ups. */
void
init_wakeup_hooks()
{
	RegisterResourceReleaseCallback(on_resource_release, nullptr);
}

/* Sleeper entries: one per backend that can call wait_for_jobs (MaxBackends). */
static Size
wake_shmem_size()
{
	return add_size(offsetof(WakeShared, sleepers), mul_size(MaxBackends, sizeof(Sleeper)));
}

/* shmem_request_hook: room for the wake slots, the sleeper entries and the NOTIFY stamps. */
void
wakeup_shmem_request()
{
	RequestAddinShmemSpace(wake_shmem_size());
}

/* shmem_startup_hook: claim the wake slots by name (initialised once, by the postmaster). */
void
wakeup_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wake = static_cast<WakeShared *>(ShmemInitStruct("awa_shard wakeup", wake_shmem_size(), &found));
	if (!found)
	{
		for (int s = 0; s < kWakeSlots; s++)
		{
			SpinLockInit(&wake->slots[s].mutex);
			wake->slots[s].head = kNone;
			wake->slots[s].fence_ends = 0;
		}
		for (int s = 0; s < kNotifySlots; s++)
			pg_atomic_init_u64(&wake->notify_stamps[s], 0);
		for (int s = 0; s < kPromiseSlots; s++)
		{
			SpinLockInit(&wake->promises[s].mutex);
			wake->promises[s].dbid = InvalidOid;
		}
		wake->n_sleepers = MaxBackends;
		for (int i = 0; i < MaxBackends; i++)
			wake->sleepers[i] = {kNone, kNone, kNone, InvalidOid, 0, false, 0};
	}
	LWLockRelease(AddinShmemInitLock);
}

/* What one round of wait_for_jobs came to. */
enum class WaitOutcome
{
	Work,	 /* the check found work a claim can take */
	Woken,	 /* a producer woke this worker: look again */
	Timeout, /* nothing came before the deadline */
};

/*
 * One round of wait_for_jobs, preloaded: on the list of the queue's slot first, then the
 * check (again while claims in progress hold the only lanes that may have work, or while a
 * fence it saw ended during it), then sleep until woken or the deadline. Leaves the list.
 */
WaitOutcome
check_then_sleep(text *queue, Catalog catalog, TimestampTz deadline)
{
	std::uint64_t fence_bits = 0;
	std::uint64_t ends = list_me(queue_key(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue)));
	int rechecks = 0;
	int busy_polls = 0;
	bool busy;

	for (;;)
	{
		if (work_visible(queue, catalog, true, &fence_bits, &busy))
		{
			(void)unlist_me();
			return WaitOutcome::Work;
		}
		if (busy)
		{
			/*
			 * The lanes that may have work are held by claims in progress, which a claim now
			 * would skip: wait for them to end (1 ms steps, 10 ms after the first 20; on the
			 * list, so a commit can still wake this worker), then look again; after
			 * kMaxBusyPolls steps, report work.
			 */
			if (++busy_polls > kMaxBusyPolls)
			{
				(void)unlist_me();
				return WaitOutcome::Work;
			}
			if (woken_yet())
				return unlist_me() ? WaitOutcome::Woken : WaitOutcome::Work;
			if (TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline) <= 0)
				return unlist_me() ? WaitOutcome::Work : WaitOutcome::Timeout;
			(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, busy_polls < 20 ? 1 : 10,
							PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		/* A fence it saw ended during the check: look again (a few times, then report work). */
		if (settle_me(fence_bits, &ends))
			break;
		if (++rechecks > 3)
		{
			(void)unlist_me();
			return WaitOutcome::Work;
		}
	}
	for (;;)
	{
		long remaining;

		if (woken_yet())
		{
			(void)unlist_me();
			return WaitOutcome::Woken;
		}
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			return unlist_me() ? WaitOutcome::Work : WaitOutcome::Timeout; /* woken just now: counts */
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, remaining, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

} // namespace awa

/*
 * awa.wait_for_jobs(queue, timeout_ms) -> boolean: true at once if work is visible, else
 * sleeps until a producing transaction of the queue wakes this worker for its work (true)
 * or the timeout passes (false). The check reads the cursors of the calling entry point's
 * catalog.
 */
Datum
awa::wait_for_jobs(FunctionCallInfo fcinfo, Catalog catalog)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	int32 timeout_ms;
	TimestampTz deadline;

	timeout_ms = awa::timeout_ms_arg(fcinfo, 1, "p_timeout_ms");
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	/*
	 * A queue whose limits hold claims back (no token, at its cap) has no work a claim could
	 * take: sleep until the next token, or poll the cap (an exit wakes nobody), then look;
	 * at least every kLimitsRecheckMs, so that a limit removed or raised meanwhile (nothing
	 * wakes this sleep for it) holds the worker back no longer than that.
	 */
	if (catalog == awa::Catalog::V1_1)
		for (;;)
		{
			long hold = awa::limits_hold_ms(queue);
			long remaining;

			if (hold == 0)
				break;
			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (remaining <= 0)
				PG_RETURN_BOOL(false);
			(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							std::min({hold, remaining, awa::kLimitsRecheckMs}), PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}

	if (awa::my_sleeper() != nullptr && timeout_ms > 0)
	{
		if (!awa::exit_hook_registered)
		{
			before_shmem_exit(awa::on_exit_unlist, (Datum)0);
			awa::exit_hook_registered = true;
		}
		if (awa::listed)
			awa::unlist_on_error(); /* left there by an error caught in this transaction */
		for (;;)
		{
			switch (awa::check_then_sleep(queue, catalog, deadline))
			{
			case awa::WaitOutcome::Work:
				PG_RETURN_BOOL(true);
			case awa::WaitOutcome::Timeout:
				PG_RETURN_BOOL(false);
			case awa::WaitOutcome::Woken:
				break; /* look again: an awake worker may have taken the work meanwhile */
			}
		}
	}

	/* Not preloaded: sleep in short steps and look again. */
	for (;;)
	{
		long remaining;
		std::uint64_t fence_bits;
		bool busy;

		if (awa::work_visible(queue, catalog, false, &fence_bits, &busy))
			PG_RETURN_BOOL(true);
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			PG_RETURN_BOOL(false);
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, remaining < 50 ? remaining : 50,
						PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* awa.wait_for_jobs of the 1.1 catalog. */
AWA_SQL_FUNCTION(awa_wait_for_jobs_1_1)
{
	return awa::wait_for_jobs(fcinfo, awa::Catalog::V1_1);
}
