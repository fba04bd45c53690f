/*
 * head_wait.cpp — a claim whose lanes with work are all held by other claims waits for one of
 * them to end (docs/design.md §4, "Waiting for a held head").
 *
 * A claim locks one lane head FOR UPDATE SKIP LOCKED and holds it to its commit; a claim that
 * finds every lane with work held would return nothing, and a worker that claims again at
 * once spins on the held heads, taking the CPU the holder needs to commit. So, preloaded and
 * at READ COMMITTED, such a claim sleeps on its queue's wait slot (a condition variable in
 * shared memory, queues hashed onto kHeadWaitSlots slots per database) until a transaction
 * that held a head of the slot ends (a claim, or an admin or maintenance path that locked
 * heads and said so through awa._heads_locked), then walks the lanes again, for at most
 * awa_shard.claim_wait milliseconds in all; then it returns nothing, as before.
 *
 * No lost wake-up: the claim reads the slot's release count before its walk tries the heads,
 * and a holder bumps the count and signals one waiter only once its transaction has ended in
 * full (resource release after its locks, as wakeup.cpp delivers), so a release between the
 * walk and the sleep is seen as a moved count; a subtransaction rolled back signals too. One
 * waiter per release, not all: the head it frees serves one claim, and a woken claim that
 * locks a head signals the next at its own end (waking all seven waiters of one hot lane
 * cost more CPU than the holder's commit). A
 * prepared holder keeps its heads, and its waiters wait out their claim_wait. At REPEATABLE
 * READ and SERIALIZABLE a claim never waits (the head it waited for has moved past its
 * snapshot: 40001 at the lock).
 */
#include "head_wait.hpp"
#include "counted_wait.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"
}

namespace awa
{

int claim_wait_ms = 10;

namespace
{

constexpr int kHeadWaitSlots = 64;
static_assert(kHeadWaitSlots <= 64, "held_slots has a bit per slot");

/* The wait slots: a holder's end counts a release on its queue's slot and wakes one waiter. */
struct HeadWaitShared
{
	CountedWait slots[kHeadWaitSlots];
};

HeadWaitShared *shared_heads = nullptr;

/* Slots of the heads this transaction locked (a bit each). */
std::uint64_t held_slots = 0;

/* The wait slot of a queue of this database. */
int
slot_of(text *queue)
{
	return static_cast<int>(hash_combine(hash_bytes_uint32(MyDatabaseId),
										 hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)),
													VARSIZE_ANY_EXHDR(queue))) %
							kHeadWaitSlots);
}

/*
 * Resource release after a transaction's locks were released (or a rolled-back
 * subtransaction's): the heads it held are free, so bump their slots and wake one waiter of
 * each. Never
 * raises.
 */
void
on_resource_release(ResourceReleasePhase phase, bool is_commit, bool is_top_level, void *arg)
{
	if (phase != RESOURCE_RELEASE_AFTER_LOCKS || held_slots == 0 || (!is_top_level && is_commit))
		return;
	for (int s = 0; s < kHeadWaitSlots; s++)
		if (held_slots & (UINT64CONST(1) << s))
			counted_wait_announce(&shared_heads->slots[s], false);
	/* A rolled-back subtransaction released its heads; the transaction may hold others. */
	if (is_top_level)
		held_slots = 0;
}

} // namespace

/* The release count of the queue's slot before a walk; 0: this claim must not wait. */
std::uint64_t
head_release_ticket(text *queue)
{
	if (shared_heads == nullptr || claim_wait_ms <= 0 || IsolationUsesXactSnapshot())
		return 0;
	/* Never 0 when waiting is possible: the count is offset by one. */
	return counted_wait_seen(&shared_heads->slots[slot_of(queue)]) + 1;
}

/* Sleep until the slot's count moves past `ticket` or the deadline; true when it moved. */
bool
wait_for_head_release(text *queue, std::uint64_t ticket, TimestampTz deadline)
{
	if (shared_heads == nullptr || ticket == 0)
		return false;
	return counted_wait_sleep(&shared_heads->slots[slot_of(queue)], ticket - 1, deadline);
}

/* Remember the queue's slot: this transaction's end wakes its waiters. */
void
note_head_held(text *queue)
{
	if (shared_heads != nullptr)
		held_slots |= UINT64CONST(1) << slot_of(queue);
}

/*
 * awa._heads_locked(queue) -> void: this transaction locked lane heads of the queue (NULL:
 * of any queue) outside a claim (cancel, delete, purge, drop, aging, fold, prune): its end
 * wakes the claims waiting for them, as a claim's end does.
 */
} // namespace awa

AWA_SQL_FUNCTION(awa_heads_locked)
{
	if (awa::shared_heads == nullptr)
		PG_RETURN_VOID();
	if (PG_ARGISNULL(0))
		awa::held_slots = ~UINT64CONST(0);
	else
		awa::note_head_held(PG_GETARG_TEXT_PP(0));
	PG_RETURN_VOID();
}

namespace awa
{

/* awa_shard.claim_wait and the resource-release hook. */
void
init_head_wait()
{
	DefineCustomIntVariable("awa_shard.claim_wait",
							"Milliseconds a claim waits for a lane head another claim holds, when every lane with "
							"work is held.",
							"0 returns nothing at once, as FOR UPDATE SKIP LOCKED does. Only with the preload, and "
							"only at READ COMMITTED.",
							&claim_wait_ms, 10, 0, 10000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
	RegisterResourceReleaseCallback(on_resource_release, nullptr);
}

/* shmem_request_hook: room for the wait slots. */
void
head_wait_shmem_request()
{
	RequestAddinShmemSpace(sizeof(HeadWaitShared));
}

/* shmem_startup_hook: claim the wait slots by name (initialised once, by the postmaster). */
void
head_wait_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_heads =
		static_cast<HeadWaitShared *>(ShmemInitStruct("awa_shard head wait", sizeof(HeadWaitShared), &found));
	if (!found)
		for (CountedWait &slot : shared_heads->slots)
			counted_wait_init(&slot);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
