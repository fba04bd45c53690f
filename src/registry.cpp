/*
 * registry.cpp — the in-flight reservation registry (docs/design.md §3, "Why a claim may jump a missing number").
 *
 * A claim may jump a missing lane_seq only when the reservation that took it has ended.
 * Without shared memory, a producer proves that by holding its lane's advisory lock until
 * its transaction ends (lane-lock mode). With the library preloaded, a producer holds the
 * lane lock only while it reserves and registers its block here; the entry (database, lane
 * sequence, first reserved lane_seq) stays until the transaction ends. A claim then reads
 * the lane's high-water mark (the sequence's last value), then the lowest in-flight entry,
 * then takes its snapshot, and claims only rows below min(lowest in flight, high-water + 1).
 *
 * The registry is a fixed array under one LWLock: producers add and remove entries, claims
 * read them. When the array is full (or a transaction has used its share of it), the entry
 * goes to the producing backend's overflow list instead, which lives in dynamic shared
 * memory and grows as needed: every reservation of registry mode is registered, so no
 * producer ever keeps a lane lock to commit for want of room (two such producers taking
 * lanes in opposite orders deadlocked), and PREPARE TRANSACTION of a producer is refused
 * whatever the registry holds. Nothing that can take a heavyweight lock or do I/O runs under
 * the LWLock.
 */
#include "citus.hpp"
#include "pg_boundary.hpp"
#include "registry.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/dsa.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace awa
{

int reservation_slots = 1024;

namespace
{

/* Fixed entries one transaction can take; its further lanes go to its overflow list. */
constexpr int kMaxLanesPerXact = 64;

/* Initial size of the in-place dynamic area that holds the overflow lists. */
constexpr Size kOverflowAreaSize = 64 * 1024;

/* One in-flight reservation: the lowest lane_seq a transaction reserved on a lane. */
struct InflightEntry
{
	Oid dbid;	 /* InvalidOid: free */
	Oid seq_oid; /* the lane's sequence */
	int64 low;
	int owner; /* pgprocno of the reserving backend */
};

/*
 * One backend's overflow list (indexed by backend id - 1): the in-flight reservations of its
 * transaction that found no fixed entry, as InflightLow[count] in the dynamic area. The
 * buffer is kept for the next transaction (and the next backend with that id).
 */
struct Overflow
{
	Oid dbid;	   /* InvalidOid: the list is empty */
	int owner;	   /* pgprocno of the backend */
	int count;	   /* entries in use */
	int allocated; /* entries the buffer holds */
	dsa_pointer lanes;
};

struct Registry
{
	LWLock *lock;
	int capacity;
	int used_bound;	 /* no entry at or above this index is in use */
	int overflowing; /* overflow lists in use (count > 0) */
	int overflow_lists;
	int area_tranche;
	Overflow *overflow; /* overflow_lists entries, after the fixed entries */
	void *area_place;	/* the in-place dynamic area, after the overflow lists */
	InflightEntry entries[FLEXIBLE_ARRAY_MEMBER];
};

Registry *registry = nullptr;
dsa_area *area = nullptr; /* this backend's attachment to the overflow area */
bool registry_mode = false;
char *reservation_mode_value = nullptr;

/* This transaction's entries (indexes into the registry) and their lanes. */
int my_entries[kMaxLanesPerXact];
Oid my_lanes[kMaxLanesPerXact];
int my_count = 0;
bool exit_hook_registered = false;

/* This transaction reserved lane numbers (either mode; a rolled-back savepoint's count too). */
bool reserved_in_xact = false;

/* This backend's overflow list (a backend that reserves has a backend id). */
Overflow *
my_overflow()
{
	if (registry == nullptr || MyBackendId == InvalidBackendId || MyBackendId > registry->overflow_lists)
		return nullptr;
	return &registry->overflow[MyBackendId - 1];
}

/*
 * Attach to the overflow area once per backend, for the life of the backend (the area's
 * reference is given back at exit, as an in-place area without a segment needs).
 */
dsa_area *
overflow_area()
{
	if (area == nullptr)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		LWLockRegisterTranche(registry->area_tranche, "awa_shard_registry_overflow");
		area = dsa_attach_in_place(registry->area_place, nullptr);
		on_shmem_exit(dsa_on_shmem_exit_release_in_place, PointerGetDatum(registry->area_place));
		dsa_pin_mapping(area);
		MemoryContextSwitchTo(old);
	}
	return area;
}

/* An overflow list's entries (the caller holds the LWLock, or owns the list). */
InflightLow *
overflow_lanes(const Overflow *o)
{
	return static_cast<InflightLow *>(dsa_get_address(overflow_area(), o->lanes));
}

/* Whether this transaction has any in-flight reservation (fixed entry or overflow). */
bool
has_entries()
{
	const Overflow *o = my_overflow();

	return my_count > 0 || (o != nullptr && o->count > 0);
}

/* Free this backend's entries, fixed and overflow (commit, abort, exit). */
void
release_my_entries()
{
	Overflow *o = my_overflow();

	if (!has_entries())
		return;
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	for (int i = 0; i < my_count; i++)
		registry->entries[my_entries[i]].dbid = InvalidOid;
	while (registry->used_bound > 0 && registry->entries[registry->used_bound - 1].dbid == InvalidOid)
		registry->used_bound--;
	if (o != nullptr && o->count > 0)
	{
		o->count = 0;
		o->dbid = InvalidOid;
		registry->overflowing--;
	}
	LWLockRelease(registry->lock);
	my_count = 0;
}

/*
 * Transaction end. PostgreSQL 15 calls the COMMIT callbacks after ProcArrayEndTransaction,
 * so an entry disappears only once its commit is visible to every new snapshot.
 * PREPARE of a transaction that reserved lane numbers is refused, in either mode and
 * whatever the registry holds: in registry mode its entries would not outlive this backend;
 * in lane-lock mode its enqueue may have sent a NOTIFY (awa_shard.notify_interval), which
 * PostgreSQL cannot prepare, so the answer would depend on the throttle. This callback runs
 * before PostgreSQL's own checks, so the answer is always this one.
 */
void
on_xact(XactEvent event, void *arg)
{
	switch (event)
	{
	case XACT_EVENT_PRE_PREPARE:
		/* Under Citus a prepare is the two-phase commit of a transaction that wrote on two
		 * nodes: a producer transaction that enqueued here and wrote on another worker. */
		if ((reserved_in_xact || has_entries()) && citus_present())
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("a transaction that enqueues may write on one Citus worker only"),
							errdetail("It enqueued on this worker and wrote on another node, so Citus commits it "
									  "in two phases, which an enqueue cannot take part in; nothing of it is "
									  "committed."),
							errhint("Enqueue into the queues of one worker per transaction (their rows are "
									"colocated by queue), or commit each queue's enqueue in its own "
									"transaction.")));
		if (reserved_in_xact || has_entries())
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("cannot prepare a transaction that reserved lane sequence numbers"),
							errdetail("A transaction that enqueued, or whose claim promoted due jobs, cannot "
									  "be prepared, in either awa_shard.reservation_mode (here \"%s\").",
									  registry != nullptr ? "registry" : "lane_lock"),
							errhint("Enqueue in an ordinary transaction, before or after the prepared one.")));
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
		reserved_in_xact = false;
		release_my_entries();
		break;
	default:
		break;
	}
}

/* Backend exit: never leave an entry behind (normally the abort callback already ran). */
void
on_exit_release(int code, Datum arg)
{
	release_my_entries();
}

/* Whether this transaction already has an entry for the lane (its own list needs no lock). */
bool
registered_in_xact(Oid seq_oid)
{
	const Overflow *o = my_overflow();

	for (int i = 0; i < my_count; i++)
		if (my_lanes[i] == seq_oid)
			return true;
	if (o != nullptr && o->count > 0)
	{
		const InflightLow *lanes = overflow_lanes(o);

		for (int i = 0; i < o->count; i++)
			if (lanes[i].seq_oid == seq_oid)
				return true;
	}
	return false;
}

/*
 * Add an entry to this backend's overflow list, growing its buffer first if it is full.
 * The buffer is allocated before the LWLock is taken (an allocation can fail, with an
 * error) and the old one freed after: a claim reads a list only under the LWLock.
 */
void
overflow_register(Oid seq_oid, int64 low)
{
	Overflow *o = my_overflow();
	dsa_pointer old = InvalidDsaPointer;

	if (o == nullptr)
		elog(ERROR, "awa_shard: a reservation outside a regular backend");
	if (o->count == o->allocated)
	{
		int allocated = Max(16, o->allocated * 2);
		dsa_pointer grown = dsa_allocate(overflow_area(), sizeof(InflightLow) * allocated);

		LWLockAcquire(registry->lock, LW_EXCLUSIVE);
		if (o->count > 0)
			memcpy(dsa_get_address(area, grown), overflow_lanes(o), sizeof(InflightLow) * o->count);
		old = o->allocated > 0 ? o->lanes : InvalidDsaPointer;
		o->lanes = grown;
		o->allocated = allocated;
		LWLockRelease(registry->lock);
		if (DsaPointerIsValid(old))
			dsa_free(area, old);
	}
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	overflow_lanes(o)[o->count] = InflightLow{seq_oid, low};
	if (o->count++ == 0)
	{
		o->dbid = MyDatabaseId;
		o->owner = MyProc->pgprocno;
		registry->overflowing++;
	}
	LWLockRelease(registry->lock);
}

} // namespace

/*
 * Settings of the registry: its size (postmaster; defined only when preloaded, since a
 * postmaster setting cannot appear later) and the mode in force (read-only).
 */
void
define_reservation_settings(bool preloaded)
{
	if (preloaded)
		DefineCustomIntVariable("awa_shard.reservation_slots",
								"Fixed entries of the in-flight reservation registry (0 = lane-lock mode).",
								"Needs shared_preload_libraries. When they are all in use, a reservation "
								"is registered in its backend's overflow list in dynamic shared memory.",
								&reservation_slots, 1024, 0, 65536, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	registry_mode = preloaded && reservation_slots > 0;
	DefineCustomStringVariable(
		"awa_shard.reservation_mode", "How producers fence their reservations: registry or lane_lock (read-only).",
		"registry: an in-flight registry in shared memory, producers of one lane do "
		"not wait for each other; lane_lock: the lane lock is held until commit.",
		&reservation_mode_value, registry_mode ? "registry" : "lane_lock", PGC_INTERNAL, 0, nullptr, nullptr, nullptr);
}

/* Bytes before the overflow lists: the header and reservation_slots fixed entries. */
static Size
registry_entries_size()
{
	return MAXALIGN(add_size(offsetof(Registry, entries), mul_size(reservation_slots, sizeof(InflightEntry))));
}

/* Bytes of the overflow lists' headers: one per backend id (MaxBackends is known by now). */
static Size
registry_overflow_size()
{
	return MAXALIGN(mul_size(MaxBackends, sizeof(Overflow)));
}

/* Shared memory of the registry: fixed entries, overflow headers, the in-place area. */
static Size
registry_shmem_size()
{
	return add_size(add_size(registry_entries_size(), registry_overflow_size()),
					Max(kOverflowAreaSize, dsa_minimum_size()));
}

/*
 * Locks that order the reservations of a lane in registry mode (lane_reservation_lock): a
 * fixed set, so that producers of one lane never queue on the heavyweight lock manager,
 * whose waiters are granted the lock in turn (on two cores a producer preempted while
 * holding the lane lock made every other producer of the lane sleep until it ran again).
 */
constexpr int kLaneReservationLocks = 64;
static LWLockPadded *lane_locks = nullptr;

/* shmem_request_hook: the registry's lock, and room for the registry (none in lane-lock mode). */
void
registry_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard_registry", 1);
	if (registry_mode)
	{
		RequestAddinShmemSpace(registry_shmem_size());
		RequestNamedLWLockTranche("awa_shard_lanes", kLaneReservationLocks);
	}
}

/* The reservation lock of the lane whose lock key is `lock_key` (registry mode only). */
LWLock *
lane_reservation_lock(int64 lock_key)
{
	uint64 k = static_cast<uint64>(lock_key);

	Assert(lane_locks != nullptr);
	return &lane_locks[(k ^ (k >> 32)) % kLaneReservationLocks].lock;
}

/* shmem_startup_hook: claim the registry by name (initialised once, by the postmaster). */
void
registry_shmem_startup()
{
	bool found;

	if (!registry_mode)
		return;
	lane_locks = GetNamedLWLockTranche("awa_shard_lanes");
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	registry = static_cast<Registry *>(ShmemInitStruct("awa_shard registry", registry_shmem_size(), &found));
	if (!found)
	{
		char *base = reinterpret_cast<char *>(registry);
		dsa_area *created;

		registry->lock = &(GetNamedLWLockTranche("awa_shard_registry"))->lock;
		registry->capacity = reservation_slots;
		registry->used_bound = 0;
		for (int i = 0; i < reservation_slots; i++)
			registry->entries[i].dbid = InvalidOid;
		registry->overflowing = 0;
		registry->overflow_lists = MaxBackends;
		registry->overflow = reinterpret_cast<Overflow *>(base + registry_entries_size());
		for (int i = 0; i < MaxBackends; i++)
		{
			registry->overflow[i].dbid = InvalidOid;
			registry->overflow[i].count = 0;
			registry->overflow[i].allocated = 0;
			registry->overflow[i].lanes = InvalidDsaPointer;
		}
		/* The overflow area: created in place, pinned so that it lives as long as the server. */
		registry->area_place = base + registry_entries_size() + registry_overflow_size();
		registry->area_tranche = LWLockNewTrancheId();
		created = dsa_create_in_place(registry->area_place, Max(kOverflowAreaSize, dsa_minimum_size()),
									  registry->area_tranche, nullptr);
		dsa_pin(created);
		dsa_detach(created);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Whether reservations are fenced by the registry (else by the lane lock held to commit). */
bool
registry_in_force()
{
	return registry != nullptr;
}

/* Free this transaction's entries now, at its end (idempotent). */
void
registry_release_xact()
{
	release_my_entries();
}

/* Register the hook that refuses PREPARE of a producer and frees this backend's entries. */
void
init_registry_hooks()
{
	RegisterXactCallback(on_xact, nullptr);
}

/*
 * Record that this transaction reserved lane_seq >= low on a lane. The caller holds the
 * lane lock, so no later number of the lane is reserved before this entry exists. A fixed
 * entry if one is free and the transaction has not used its share, else an entry of the
 * backend's overflow list. False only in lane-lock mode: the caller keeps the lane lock
 * until the transaction ends instead. Either way the transaction is now a producer, which
 * PREPARE refuses.
 */
bool
registry_register(Oid seq_oid, int64 low)
{
	int slot = -1;

	reserved_in_xact = true;
	if (registry == nullptr)
		return false;
	if (registered_in_xact(seq_oid))
		return true;
	/* Exit callbacks of the postmaster are not inherited: register in the backend. */
	if (!exit_hook_registered)
	{
		before_shmem_exit(on_exit_release, (Datum)0);
		exit_hook_registered = true;
	}
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	for (int i = 0; i < registry->capacity && my_count < kMaxLanesPerXact; i++)
	{
		if (registry->entries[i].dbid == InvalidOid)
		{
			slot = i;
			break;
		}
	}
	if (slot >= 0)
	{
		InflightEntry *e = &registry->entries[slot];

		e->seq_oid = seq_oid;
		e->low = low;
		e->owner = MyProc->pgprocno;
		e->dbid = MyDatabaseId;
		if (slot >= registry->used_bound)
			registry->used_bound = slot + 1;
	}
	LWLockRelease(registry->lock);
	if (slot < 0)
	{
		overflow_register(seq_oid, low);
		return true;
	}
	my_entries[my_count] = slot;
	my_lanes[my_count] = seq_oid;
	my_count++;
	return true;
}

/*
 * Take a lane's sequence for reading without waiting: the lock reading a sequence takes
 * anyway (RowExclusiveLock), only if no other transaction holds the sequence exclusively,
 * and only if it still exists. drop_queue drops its lanes' sequences first and holds them
 * until it commits: a claim or a monitoring read passes over such a lane instead of waiting
 * for the drop and then failing on a relation that is gone, or deadlocking with it.
 */
bool
lane_sequence_readable(Oid seq_oid)
{
	if (!ConditionalLockRelationOid(seq_oid, RowExclusiveLock))
		return false;
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(seq_oid)))
	{
		UnlockRelationOid(seq_oid, RowExclusiveLock);
		return false;
	}
	return true;
}

/*
 * The lane's high-water mark: its sequence's last value + 1 (1 for a lane never used).
 * 0 for a lane whose sequence is being dropped (lane_sequence_readable): below every
 * cursor, so such a lane reads as one with nothing to claim.
 */
int64
lane_high_water(Oid seq_oid)
{
	Datum last;
	LOCAL_FCINFO(fcinfo, 1);

	if (!lane_sequence_readable(seq_oid))
		return 0;
	InitFunctionCallInfoData(*fcinfo, nullptr, 1, InvalidOid, nullptr, nullptr);
	fcinfo->args[0].value = ObjectIdGetDatum(seq_oid);
	fcinfo->args[0].isnull = false;
	last = pg_sequence_last_value(fcinfo);
	return fcinfo->isnull ? 1 : DatumGetInt64(last) + 1;
}

/*
 * The exclusive upper bound of lane_seq a claim may take on a lane, read before the claim's
 * snapshot: min(lowest lane_seq reserved by another open transaction, high-water + 1).
 * The high-water mark is read first: a reservation that is not registered yet either holds
 * the lane lock (nothing after it exists) or starts after that read (above the bound).
 * Lane-lock mode: no bound.
 */
int64
claim_bound(Oid seq_oid)
{
	int64 bound;

	if (registry == nullptr)
		return PG_INT64_MAX;
	bound = lane_high_water(seq_oid);
	LWLockAcquire(registry->lock, LW_SHARED);
	for (int i = 0; i < registry->used_bound; i++)
	{
		const InflightEntry *e = &registry->entries[i];

		if (e->dbid == MyDatabaseId && e->seq_oid == seq_oid && e->owner != MyProc->pgprocno && e->low < bound)
			bound = e->low;
	}
	for (int i = 0; registry->overflowing > 0 && i < registry->overflow_lists; i++)
	{
		const Overflow *o = &registry->overflow[i];

		if (o->count > 0 && o->dbid == MyDatabaseId && o->owner != MyProc->pgprocno)
		{
			const InflightLow *lanes = overflow_lanes(o);

			for (int j = 0; j < o->count; j++)
				if (lanes[j].seq_oid == seq_oid && lanes[j].low < bound)
					bound = lanes[j].low;
		}
	}
	LWLockRelease(registry->lock);
	return bound;
}

/*
 * The in-flight reservations of other transactions in this database (lane sequence, lowest
 * reserved lane_seq), fixed entries and overflow lists, copied under the LWLock for the
 * claim's candidate walk, which skips a lane whose cursor already reached its lowest
 * in-flight reservation. None in lane-lock mode. The array is kept for the life of the
 * backend and grows (outside the LWLock) when the entries outnumber it.
 */
const InflightLow *
inflight_lows(int *n)
{
	static InflightLow *buf = nullptr;
	static int buf_size = 0;

	*n = 0;
	if (registry == nullptr)
		return nullptr;
	for (;;)
	{
		int needed = 0;
		InflightLow *grown;

		LWLockAcquire(registry->lock, LW_SHARED);
		for (int i = 0; registry->overflowing > 0 && i < registry->overflow_lists; i++)
			needed += registry->overflow[i].count;
		needed += registry->used_bound;
		if (needed <= buf_size)
			break;
		LWLockRelease(registry->lock);
		needed = Max(needed, registry->capacity);
		grown = static_cast<InflightLow *>(MemoryContextAlloc(TopMemoryContext, sizeof(InflightLow) * needed));
		if (buf != nullptr)
			pfree(buf);
		buf = grown;
		buf_size = needed;
	}
	for (int i = 0; i < registry->used_bound; i++)
	{
		const InflightEntry *e = &registry->entries[i];

		if (e->dbid == MyDatabaseId && e->owner != MyProc->pgprocno)
		{
			buf[*n].seq_oid = e->seq_oid;
			buf[*n].low = e->low;
			(*n)++;
		}
	}
	for (int i = 0; registry->overflowing > 0 && i < registry->overflow_lists; i++)
	{
		const Overflow *o = &registry->overflow[i];

		if (o->count > 0 && o->dbid == MyDatabaseId && o->owner != MyProc->pgprocno)
		{
			memcpy(&buf[*n], overflow_lanes(o), sizeof(InflightLow) * o->count);
			*n += o->count;
		}
	}
	LWLockRelease(registry->lock);
	return buf;
}

/* The lowest in-flight reservation of another transaction on a lane (none: INT64_MAX). */
int64
lane_fence(Oid seq_oid, const InflightLow *inflight, int n_inflight)
{
	int64 fence = PG_INT64_MAX;

	for (int i = 0; i < n_inflight; i++)
		if (inflight[i].seq_oid == seq_oid && inflight[i].low < fence)
			fence = inflight[i].low;
	return fence;
}

} // namespace awa

/* awa.reservation_mode(): 'registry' or 'lane_lock'. */
AWA_SQL_FUNCTION(awa_reservation_mode)
{
	return CStringGetTextDatum(awa::registry_in_force() ? "registry" : "lane_lock");
}

/*
 * awa._lane_next_seq(sequence name): the next lane_seq a lane will hand out (1 for a fresh
 * lane); NULL while the lane is being dropped, without waiting for the drop.
 */
AWA_SQL_FUNCTION(awa_lane_next_seq)
{
	Oid seq_oid;
	int64 next;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	seq_oid = get_relname_relid(text_to_cstring(PG_GETARG_TEXT_PP(0)), get_namespace_oid("awa", false));
	next = OidIsValid(seq_oid) ? awa::lane_high_water(seq_oid) : 0;
	if (next == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(next);
}

/* awa._lane_claim_bound(lane sequence): claim_bound() for SQL paths that move a claim cursor. */
AWA_SQL_FUNCTION(awa_lane_claim_bound)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	return Int64GetDatum(awa::claim_bound(PG_GETARG_OID(0)));
}
