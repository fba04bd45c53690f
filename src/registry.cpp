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
 * read them. Nothing that can take a heavyweight lock or do I/O runs under the LWLock.
 */
#include "pg_boundary.hpp"
#include "registry.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
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

/* Lanes one transaction can register; further lanes of that transaction hold their lock. */
constexpr int kMaxLanesPerXact = 64;

/* One in-flight reservation: the lowest lane_seq a transaction reserved on a lane. */
struct InflightEntry
{
	Oid dbid;	 /* InvalidOid: free */
	Oid seq_oid; /* the lane's sequence */
	int64 low;
	int owner; /* pgprocno of the reserving backend */
};

struct Registry
{
	LWLock *lock;
	int capacity;
	int used_bound; /* no entry at or above this index is in use */
	InflightEntry entries[FLEXIBLE_ARRAY_MEMBER];
};

Registry *registry = nullptr;
bool registry_mode = false;
char *reservation_mode_value = nullptr;

/* This transaction's entries (indexes into the registry) and their lanes. */
int my_entries[kMaxLanesPerXact];
Oid my_lanes[kMaxLanesPerXact];
int my_count = 0;
bool exit_hook_registered = false;

/* Free this backend's entries (commit, abort, exit). */
void
release_my_entries()
{
	if (my_count == 0 || registry == nullptr)
		return;
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	for (int i = 0; i < my_count; i++)
		registry->entries[my_entries[i]].dbid = InvalidOid;
	while (registry->used_bound > 0 && registry->entries[registry->used_bound - 1].dbid == InvalidOid)
		registry->used_bound--;
	LWLockRelease(registry->lock);
	my_count = 0;
}

/*
 * Transaction end. PostgreSQL 15 calls the COMMIT callbacks after ProcArrayEndTransaction,
 * so an entry disappears only once its commit is visible to every new snapshot.
 * A prepared transaction would outlive this backend's entries: PREPARE is refused.
 */
void
on_xact(XactEvent event, void *arg)
{
	switch (event)
	{
	case XACT_EVENT_PRE_PREPARE:
		if (my_count > 0)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("cannot prepare a transaction that reserved lane sequence numbers"),
							errdetail("awa_shard.reservation_mode is \"registry\": an in-flight reservation "
									  "lives in shared memory and cannot outlive its session."),
							errhint("Enqueue outside the prepared transaction, or set "
									"awa_shard.reservation_slots = 0 (lane-lock mode).")));
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
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

/* Whether this transaction already has an entry for the lane. */
bool
registered_in_xact(Oid seq_oid)
{
	for (int i = 0; i < my_count; i++)
		if (my_lanes[i] == seq_oid)
			return true;
	return false;
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
								"In-flight reservations the shared registry can hold (0 = lane-lock mode).",
								"Needs shared_preload_libraries. When the registry is full, a reservation "
								"falls back to holding its lane lock until its transaction ends.",
								&reservation_slots, 1024, 0, 65536, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
	registry_mode = preloaded && reservation_slots > 0;
	DefineCustomStringVariable(
		"awa_shard.reservation_mode", "How producers fence their reservations: registry or lane_lock (read-only).",
		"registry: an in-flight registry in shared memory, producers of one lane do "
		"not wait for each other; lane_lock: the lane lock is held until commit.",
		&reservation_mode_value, registry_mode ? "registry" : "lane_lock", PGC_INTERNAL, 0, nullptr, nullptr, nullptr);
}

/* Shared memory of the registry: reservation_slots entries (read in _PG_init). */
static Size
registry_shmem_size()
{
	return add_size(offsetof(Registry, entries), mul_size(reservation_slots, sizeof(InflightEntry)));
}

/* shmem_request_hook: the registry's lock, and room for the registry (none in lane-lock mode). */
void
registry_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard_registry", 1);
	if (registry_mode)
		RequestAddinShmemSpace(registry_shmem_size());
}

/* shmem_startup_hook: claim the registry by name (initialised once, by the postmaster). */
void
registry_shmem_startup()
{
	bool found;

	if (!registry_mode)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	registry = static_cast<Registry *>(ShmemInitStruct("awa_shard registry", registry_shmem_size(), &found));
	if (!found)
	{
		registry->lock = &(GetNamedLWLockTranche("awa_shard_registry"))->lock;
		registry->capacity = reservation_slots;
		registry->used_bound = 0;
		for (int i = 0; i < reservation_slots; i++)
			registry->entries[i].dbid = InvalidOid;
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

/* Register the hook that frees this backend's entries at transaction end. */
void
init_registry_hooks()
{
	if (!registry_mode)
		return;
	RegisterXactCallback(on_xact, nullptr);
}

/*
 * Record that this transaction reserved lane_seq >= low on a lane. The caller holds the
 * lane lock, so no later number of the lane is reserved before this entry exists. False
 * when the registry (or this transaction's share of it) is full: the caller keeps the lane
 * lock until the transaction ends instead.
 */
bool
registry_register(Oid seq_oid, int64 low)
{
	int slot = -1;

	if (registry == nullptr)
		return false;
	if (registered_in_xact(seq_oid))
		return true;
	if (my_count >= kMaxLanesPerXact)
		return false;
	/* Exit callbacks of the postmaster are not inherited: register in the backend. */
	if (!exit_hook_registered)
	{
		before_shmem_exit(on_exit_release, (Datum)0);
		exit_hook_registered = true;
	}
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	for (int i = 0; i < registry->capacity; i++)
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
		return false;
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
	LWLockRelease(registry->lock);
	return bound;
}

/*
 * The in-flight reservations of other transactions in this database (lane sequence, lowest
 * reserved lane_seq), copied under the LWLock for the claim's candidate walk, which skips a
 * lane whose cursor already reached its lowest in-flight reservation. None in lane-lock mode.
 * The array is kept for the life of the backend: a walk allocates nothing here.
 */
const InflightLow *
inflight_lows(int *n)
{
	static InflightLow *buf = nullptr;

	*n = 0;
	if (registry == nullptr)
		return nullptr;
	if (buf == nullptr)
		buf =
			static_cast<InflightLow *>(MemoryContextAlloc(TopMemoryContext, sizeof(InflightLow) * registry->capacity));
	LWLockAcquire(registry->lock, LW_SHARED);
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
	LWLockRelease(registry->lock);
	return buf;
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
