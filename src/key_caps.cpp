/*
 * key_caps.cpp — what lets a claim pass over a lane whose head key is at its per-key cap
 * without locking and counting that key again (docs/design.md §4, "Flow control").
 *
 * A claim that finds the job at a lane's head keyed by a key at its cap passes the lane over
 * (flow_control.cpp). Counting costs a key lock and, per running attempt of the key, the
 * open-receipt test; every claim that meets the lane paid it again. Now the backend
 * remembers the lane: its cursor, its first row, the limit, and the running attempts the
 * count found (the witnesses). The key can only get room when one of those attempts ends.
 *
 * Attempt exits: shared memory (preloaded) holds a sequence of exits and, per slot of a hash
 * of (database, job id), the sequence number of the last committed exit in that slot. Every
 * path that ends an attempt (completion in lifecycle.cpp, the other exits and the rescues
 * through take_attempt in attempts.cpp) marks its job's slot in the transaction; at commit,
 * once the end is visible, each marked slot is raised to a new sequence number. A claim reads
 * the sequence (S) before the count's snapshot. An exit committed after that snapshot is
 * stamped after S was read, so its slot's number exceeds S; the memory holds while every
 * witness's slot is at most S. Between its commit becoming visible and its stamp, an exit
 * is counted as pending in its slots (from PRE_COMMIT on), and a witness whose slot has a
 * pending exit is not trusted either. Other jobs sharing a slot only cost a recount. Until a
 * first count may be remembered (a queue with a per-key limit), commits stamp nothing and
 * count nothing as pending, so that a server without per-key limits pays nothing. The price:
 * an exit already past PRE_COMMIT when the server's first memory is taken is stamped but not
 * counted as pending, and a claim in the instant between its commit becoming visible and its
 * stamp may pass the lane over once more (never past a cap), once in the server's life.
 *
 * The memory also ends: when the lane's cursor, first row (read under the head lock) or
 * limit differ; at the transaction's or a savepoint's rollback (the count saw its own
 * claims); for the transaction's own marked exits at once; and after kCapMemoryMs in any
 * case. A prepared transaction that ended attempts is stamped by no commit of its own: its
 * id is kept in shared memory, nothing is remembered or trusted while it is in progress, and
 * the first claim to find it ended stamps every slot. A restart (or the reset of shared
 * memory after a backend crashed) loses those ids, so the prepared transactions recovered
 * then are kept the same way (listed from pg_prepared_xacts by the first claim that asks).
 * Not preloaded, nothing is remembered.
 */
#include "key_caps.hpp"
#include "direct_drain.hpp"
#include "ended_places.hpp"
#include "job_wait.hpp"
#include "running_bound.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "access/transam.h"
#include "access/twophase.h"
#include "catalog/pg_type.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/spin.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include <cstring>

namespace awa
{

namespace
{

/* Exit slots: jobs hash onto them; an exit of any job of a slot ends the memories that witness it. */
constexpr int kExitSlots = 1024;
/* The longest a remembered lane is trusted, whatever the stamps say. */
constexpr long kCapMemoryMs = 1000;
/* Lanes a backend remembers at once (the oldest is replaced). */
constexpr int kRememberedLanes = 8;
/* Prepared transactions with exits followed at once (more: nothing is remembered until restart). */
constexpr int kPreparedExits = 8;

/*
 * Shared: the exit sequence, each slot's last stamp, the stamp of the last unnamed exits,
 * and the prepared transactions that ended attempts and may still be in progress.
 */
struct ExitStamps
{
	pg_atomic_uint64 seq;
	pg_atomic_uint64 all;	 /* stamp of the last commit that ended attempts it did not name */
	pg_atomic_uint32 in_use; /* 1 once a count may be remembered: until then, commits stamp nothing */
	pg_atomic_uint32 n_prepared;
	/* The prepared transactions recovered when this memory began: 0 not listed yet, 1 being listed, 2 listed. */
	pg_atomic_uint32 recovered;
	TimestampTz began; /* when this memory was made (the server's start, or its restart after a crash) */
	slock_t mutex;	   /* of prepared[] and overflow */
	bool overflow;	   /* more than kPreparedExits at once: nothing is remembered until restart */
	TransactionId prepared[kPreparedExits];
	pg_atomic_uint64 slot[kExitSlots];
	pg_atomic_uint32 pending[kExitSlots]; /* commits past PRE_COMMIT that have not stamped the slot yet */
};

ExitStamps *stamps = nullptr;

/* This transaction's ended attempts: a bit per slot, or all of them. */
std::uint64_t marked[kExitSlots / 64];
bool marked_any = false;
bool marked_all = false;
bool pending_raised = false; /* PRE_COMMIT counted this transaction's marked slots as pending */

/* A lane passed over at a key's cap, as the count found it. */
struct CappedLane
{
	bool used;
	char *queue; /* in TopMemoryContext */
	int queue_len;
	int16 priority;
	int16 shard;
	int64 claim_seq;
	int64 first_seq;
	int limit;
	std::uint64_t seq;
	TimestampTz remembered_at;
	int n_slots;
	int16 slot[kMaxCapWitnesses];
};

CappedLane lanes[kRememberedLanes];
int next_victim = 0;

/* The exit slot of a job of this database. */
int
slot_of(int64 job_id)
{
	return static_cast<int>(database_job_hash(job_id) % kExitSlots);
}

/* Raise a stamp to at least `to` (concurrent commits may stamp a slot in either order). */
void
raise_stamp(pg_atomic_uint64 *stamp, std::uint64_t to)
{
	std::uint64_t old = pg_atomic_read_u64(stamp);

	while (old < to && !pg_atomic_compare_exchange_u64(stamp, &old, to))
	{
	}
}

/* Follow a prepared transaction that may end attempts (more than kPreparedExits: overflow). */
void
follow_prepared(TransactionId xid)
{
	bool kept = false;

	/* Counted first: a claim that reads no pending transaction reads the sequence after it. */
	SpinLockAcquire(&stamps->mutex);
	for (int i = 0; i < kPreparedExits && !kept; i++)
		if (!TransactionIdIsValid(stamps->prepared[i]))
		{
			stamps->prepared[i] = xid;
			pg_atomic_fetch_add_u32(&stamps->n_prepared, 1);
			kept = true;
		}
	if (!kept)
		stamps->overflow = true;
	SpinLockRelease(&stamps->mutex);
}

/* The statement that lists them (kept per backend). */
SPIPlanPtr recovered_plan = nullptr;

/*
 * The prepared transactions recovered when this memory was made (at the server's start, or
 * its restart after a backend crashed: those prepared before then) are followed as ones that
 * ended attempts: their PREPARE told a memory that is gone, so a COMMIT PREPARED of an exit
 * would stamp nothing. Listed once, by the first backend that asks (the others remember
 * nothing meanwhile); true once listed.
 */
bool
recovered_prepared_listed()
{
	std::uint32_t unlisted = 0;

	if (pg_atomic_read_u32(&stamps->recovered) == 2)
		return true;
	if (max_prepared_xacts == 0)
	{
		pg_atomic_write_u32(&stamps->recovered, 2);
		return true;
	}
	if (!pg_atomic_compare_exchange_u32(&stamps->recovered, &unlisted, 1))
		return false;
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "awa_shard: SPI_connect failed");
		Oid types[1] = {TIMESTAMPTZOID};
		Datum values[1] = {TimestampTzGetDatum(stamps->began)};

		exec_plan(keep_plan(&recovered_plan, "SELECT transaction FROM pg_catalog.pg_prepared_xacts WHERE prepared < $1",
							1, types),
				  values, nullptr, true, 0, SPI_OK_SELECT, "recovered prepared transactions");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool isnull;
			Datum xid = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				follow_prepared(DatumGetTransactionId(xid));
		}
		SPI_finish();
	}
	PG_CATCH();
	{
		pg_atomic_write_u32(&stamps->recovered, 0); /* the next backend that asks lists them */
		PG_RE_THROW();
	}
	PG_END_TRY();
	pg_atomic_write_u32(&stamps->recovered, 2);
	return true;
}

/*
 * Whether no prepared transaction's exits are pending: each one found ended (committed or
 * rolled back, its effects visible) is dropped and every slot stamped, which ends the
 * memories taken while it was in progress. The ones recovered at the server's start count
 * (listed first). SPI must be connected.
 */
bool
no_prepared_exits()
{
	TransactionId pending[kPreparedExits];
	bool none;

	if (!recovered_prepared_listed())
		return false;
	if (pg_atomic_read_u32(&stamps->n_prepared) == 0)
		return !stamps->overflow;
	SpinLockAcquire(&stamps->mutex);
	memcpy(pending, stamps->prepared, sizeof(pending));
	SpinLockRelease(&stamps->mutex);
	/* Tested outside the spinlock (TransactionIdIsInProgress takes ProcArrayLock). */
	for (int i = 0; i < kPreparedExits; i++)
		if (TransactionIdIsValid(pending[i]) && !TransactionIdIsInProgress(pending[i]))
		{
			bool dropped = false;

			raise_stamp(&stamps->all, pg_atomic_add_fetch_u64(&stamps->seq, 1));
			SpinLockAcquire(&stamps->mutex);
			if (TransactionIdEquals(stamps->prepared[i], pending[i]))
			{
				stamps->prepared[i] = InvalidTransactionId;
				dropped = true;
			}
			SpinLockRelease(&stamps->mutex);
			if (dropped)
				pg_atomic_fetch_sub_u32(&stamps->n_prepared, 1);
		}
	SpinLockAcquire(&stamps->mutex);
	none = pg_atomic_read_u32(&stamps->n_prepared) == 0 && !stamps->overflow;
	SpinLockRelease(&stamps->mutex);
	return none;
}

/* Forget one remembered lane. */
void
forget_lane(CappedLane *l)
{
	if (l->queue != nullptr)
		pfree(l->queue);
	l->queue = nullptr;
	l->used = false;
}

/* Forget every remembered lane. */
void
forget_all_lanes()
{
	for (CappedLane &l : lanes)
		if (l.used)
			forget_lane(&l);
}

/* The remembered lane of (queue, priority, shard), or nullptr. */
CappedLane *
find_lane(text *queue, int16 priority, int16 shard)
{
	int len = VARSIZE_ANY_EXHDR(queue);

	for (CappedLane &l : lanes)
		if (l.used && l.priority == priority && l.shard == shard && l.queue_len == len &&
			memcmp(l.queue, VARDATA_ANY(queue), len) == 0)
			return &l;
	return nullptr;
}

/* Whether a slot's stamp is at most seq (marked by this transaction: no). */
bool
slot_unstamped(int s, std::uint64_t seq)
{
	return pg_atomic_read_u64(&stamps->slot[s]) <= seq && !(marked[s / 64] & (UINT64CONST(1) << (s % 64)));
}

/*
 * Whether no witnessed attempt of the remembered lane can have ended since its count. An
 * exit counts its slots as pending before its commit becomes visible and stamps them after:
 * read the stamps, then the pending counts, then the stamps again, so an exit that became
 * visible in between is either still pending or stamped.
 */
bool
witnesses_running(const CappedLane &l)
{
	if (pg_atomic_read_u64(&stamps->all) > l.seq || marked_all)
		return false;
	for (int i = 0; i < l.n_slots; i++)
		if (!slot_unstamped(l.slot[i], l.seq))
			return false;
	pg_memory_barrier();
	for (int i = 0; i < l.n_slots; i++)
		if (pg_atomic_read_u32(&stamps->pending[l.slot[i]]) != 0)
			return false;
	pg_memory_barrier();
	for (int i = 0; i < l.n_slots; i++)
		if (!slot_unstamped(l.slot[i], l.seq))
			return false;
	return pg_atomic_read_u64(&stamps->all) <= l.seq;
}

/* Subtransaction end: a savepoint rolled back may have held claims the counts saw. */
void
on_key_caps_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_all_lanes();
}

} // namespace

/* Mark the job's slot in this transaction's bitmap (key_caps.hpp). */
void
note_attempt_ended(int64 job_id, int64 run_lease, text *queue)
{
	int s = slot_of(job_id);

	note_place_attempt_ended(job_id, run_lease, queue);
	running_bound_note_exit(queue);

	marked[s / 64] |= UINT64CONST(1) << (s % 64);
	marked_any = true;
}

/* Mark every slot (key_caps.hpp). */
void
note_attempts_ended_all()
{
	marked_all = true;
	marked_any = true;
	running_bound_note_exits_unknown();
}

/* Whether this transaction has ended attempts (key_caps.hpp). */
bool
attempts_ended_in_xact()
{
	return marked_any;
}

/* The exit sequence, or 0 when nothing may be remembered (key_caps.hpp). */
std::uint64_t
attempt_exit_seq()
{
	if (stamps == nullptr || !no_prepared_exits())
		return 0;
	/*
	 * From now on every commit that ends attempts stamps them. Set before the sequence and
	 * the count's snapshot are read: a commit after that snapshot sees it (the snapshot and
	 * the commit's end meet on ProcArrayLock).
	 */
	if (pg_atomic_read_u32(&stamps->in_use) == 0)
	{
		pg_atomic_write_u32(&stamps->in_use, 1);
		pg_memory_barrier();
	}
	return pg_atomic_read_u64(&stamps->seq);
}

/* Whether a prepared transaction's exits may be in progress (key_caps.hpp). */
bool
prepared_exits_pending()
{
	return stamps == nullptr || !no_prepared_exits();
}

/* Remember a lane passed over at a key's cap (key_caps.hpp). */
void
remember_capped_lane(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 first_seq, int limit,
					 std::uint64_t seq, const CapWitness &witness)
{
	CappedLane *l;

	if (seq == 0 || !witness.complete || first_seq < 0 || witness.n < limit)
		return;
	l = find_lane(queue, priority, shard);
	if (l == nullptr)
	{
		for (CappedLane &free_lane : lanes)
			if (!free_lane.used)
			{
				l = &free_lane;
				break;
			}
		if (l == nullptr)
		{
			l = &lanes[next_victim];
			next_victim = (next_victim + 1) % kRememberedLanes;
			forget_lane(l);
		}
		l->queue_len = VARSIZE_ANY_EXHDR(queue);
		l->queue = static_cast<char *>(MemoryContextAlloc(TopMemoryContext, l->queue_len + 1));
		memcpy(l->queue, VARDATA_ANY(queue), l->queue_len);
		l->priority = priority;
		l->shard = shard;
	}
	l->used = true;
	l->claim_seq = claim_seq;
	l->first_seq = first_seq;
	l->limit = limit;
	l->seq = seq;
	l->remembered_at = GetCurrentTimestamp();
	l->n_slots = witness.n;
	for (int i = 0; i < witness.n; i++)
		l->slot[i] = static_cast<int16>(slot_of(witness.job_id[i]));
}

/* Whether the locked lane is still at its head key's cap (key_caps.hpp). */
bool
lane_still_capped(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
				  int limit)
{
	CappedLane *l;
	LaneRange lane = {queue, priority, shard, claim_seq, bound};
	LaneRow first;
	bool found;

	if (stamps == nullptr)
		return false;
	l = find_lane(queue, priority, shard);
	if (l == nullptr)
		return false;
	if (l->claim_seq != claim_seq || l->limit != limit || !no_prepared_exits() || !witnesses_running(*l) ||
		TimestampDifferenceExceeds(l->remembered_at, GetCurrentTimestamp(), static_cast<int>(kCapMemoryMs)))
	{
		forget_lane(l);
		return false;
	}
	/* The same job still heads the lane (a pending one may have been cancelled, moved or aged). */
	if (!lane_first_row(lane, slot_ranges, &found, &first) || !found || first.lane_seq != l->first_seq)
	{
		forget_lane(l);
		return false;
	}
	return true;
}

/* Before the commit record (key_caps.hpp). */
void
key_caps_at_pre_commit()
{
	if (!marked_any || marked_all || stamps == nullptr || pg_atomic_read_u32(&stamps->in_use) == 0)
		return;
	for (int s = 0; s < kExitSlots; s++)
		if (marked[s / 64] & (UINT64CONST(1) << (s % 64)))
			pg_atomic_fetch_add_u32(&stamps->pending[s], 1);
	pending_raised = true;
}

/* Transaction end (key_caps.hpp). */
void
key_caps_at_xact_end(bool committed)
{
	if (!committed)
		forget_all_lanes();
	if (!marked_any)
		return;
	if (committed && stamps != nullptr && (pending_raised || pg_atomic_read_u32(&stamps->in_use) != 0))
	{
		std::uint64_t stamp = pg_atomic_add_fetch_u64(&stamps->seq, 1);

		if (marked_all)
			raise_stamp(&stamps->all, stamp);
		else
			for (int s = 0; s < kExitSlots; s++)
				if (marked[s / 64] & (UINT64CONST(1) << (s % 64)))
					raise_stamp(&stamps->slot[s], stamp);
	}
	/* Stamped (or rolled back): no longer pending. */
	if (pending_raised)
		for (int s = 0; s < kExitSlots; s++)
			if (marked[s / 64] & (UINT64CONST(1) << (s % 64)))
				pg_atomic_fetch_sub_u32(&stamps->pending[s], 1);
	pending_raised = false;
	memset(marked, 0, sizeof(marked));
	marked_any = false;
	marked_all = false;
}

/* Before PREPARE (key_caps.hpp). */
void
key_caps_at_pre_prepare()
{
	TransactionId xid = GetTopTransactionIdIfAny();

	/* Claims that read no limit too: their attempts' exits may commit while a count runs. */
	if ((!marked_any && !running_bound_claimed_unlimited()) || stamps == nullptr || !TransactionIdIsValid(xid))
		return;
	follow_prepared(xid);
}

/* PREPARE (key_caps.hpp). */
void
key_caps_at_prepare()
{
	memset(marked, 0, sizeof(marked));
	marked_any = false;
	marked_all = false;
	forget_all_lanes();
}

/* _PG_init: the subtransaction hook (key_caps.hpp). */
void
init_key_caps_hooks()
{
	RegisterSubXactCallback(on_key_caps_subxact, nullptr);
}

/* shmem_request_hook: room for the exit stamps. */
void
key_caps_shmem_request()
{
	RequestAddinShmemSpace(sizeof(ExitStamps));
}

/* shmem_startup_hook: claim the exit stamps by name (initialised once, by the postmaster). */
void
key_caps_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stamps = static_cast<ExitStamps *>(ShmemInitStruct("awa_shard attempt exits", sizeof(ExitStamps), &found));
	if (!found)
	{
		pg_atomic_init_u64(&stamps->seq, 1);
		pg_atomic_init_u64(&stamps->all, 0);
		pg_atomic_init_u32(&stamps->in_use, 0);
		pg_atomic_init_u32(&stamps->n_prepared, 0);
		pg_atomic_init_u32(&stamps->recovered, 0);
		stamps->began = GetCurrentTimestamp();
		SpinLockInit(&stamps->mutex);
		stamps->overflow = false;
		for (TransactionId &xid : stamps->prepared)
			xid = InvalidTransactionId;
		for (pg_atomic_uint64 &s : stamps->slot)
			pg_atomic_init_u64(&s, 0);
		for (pg_atomic_uint32 &p : stamps->pending)
			pg_atomic_init_u32(&p, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
