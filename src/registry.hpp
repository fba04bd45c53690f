/*
 * registry.hpp — the registry of in-flight reservations (registry.cpp): in shared memory
 * when preloaded, it lets producers of one lane reserve without waiting for each other and
 * tells a claim how far a lane's committed numbers reach.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "storage/lwlock.h"
}

namespace awa
{

/* Fixed entries of the registry (awa_shard.reservation_slots; 0 = lane-lock mode). */
extern int reservation_slots;

/* Define awa_shard.reservation_slots and the read-only awa_shard.reservation_mode. */
void define_reservation_settings(bool preloaded);

/* Whether reservations are fenced by the registry rather than by the lane lock held to commit. */
bool registry_in_force();

/* Register this transaction's reservation of lane_seq >= low (false: lane-lock mode). */
bool registry_register(Oid seq_oid, int64 low);

/*
 * In registry mode, the lock that makes a lane's nextval, setval and registration one step
 * (one of a fixed set, picked by the lane's lock key; two lanes may share one).
 */
LWLock *lane_reservation_lock(int64 lock_key);

/* Exclusive upper bound of lane_seq a claim may take on the lane (read before its snapshot). */
int64 claim_bound(Oid seq_oid);

/* A reservation of another transaction in flight in this database: lane sequence, lowest lane_seq. */
struct InflightLow
{
	Oid seq_oid;
	int64 low;
};

/* Other transactions' in-flight reservations in this database (*n of them), for the claim walk. */
const InflightLow *inflight_lows(int *n);

/* The lowest in-flight reservation of another transaction on a lane among `inflight` (none: INT64_MAX). */
int64 lane_fence(Oid seq_oid, const InflightLow *inflight, int n_inflight);

/* Whether a lane's sequence can be read without waiting (not being dropped); takes it if so. */
bool lane_sequence_readable(Oid seq_oid);

/* A lane's high-water mark: its sequence's last value + 1; 0 while the lane is being dropped. */
int64 lane_high_water(Oid seq_oid);

/* Refuse PREPARE of a producer; free this backend's entries at transaction end and exit. */
void init_registry_hooks();

/*
 * Free this transaction's entries now (at its end; idempotent): the wake-up of a committing
 * producer runs after this, so a worker it wakes never sees its fence (wakeup.cpp).
 */
void registry_release_xact();

/* shmem_request_hook: request the registry's lock and its shared memory (none in lane-lock mode). */
void registry_shmem_request();

/* shmem_startup_hook: claim the registry by name ("awa_shard registry"), initialising it once. */
void registry_shmem_startup();

} // namespace awa
