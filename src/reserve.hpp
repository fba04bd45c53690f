/*
 * reserve.hpp — lanes and reservations (reserve.cpp): a producer reserves a block of a
 * lane's sequence numbers, the lane created on first use and cached per backend.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Room for a lane's sequence name: "queue_enqueue_seq_", 32 hex digits, NUL. */
constexpr int kLaneSeqNameSize = 51;

/* The name of a lane's sequence (the md5 rule every catalog version shares). */
void lane_sequence_name(const char *queue, int queue_len, int priority, int shard, char out[kLaneSeqNameSize]);

/* A lane's advisory-lock key (held by reservations; lane creation takes it first). */
int64 lane_lock_key(const char *queue, int queue_len, int priority, int shard);

/* Reserve [start, start + count) on a lane, creating the lane on first use. */
int64 reserve_lane_block(const char *queue, int queue_len, int priority, int shard, int64 count);

/* Register cache invalidation and transaction hooks of the lane cache. */
void init_lane_cache();

/* awa_shard.lane_lock_wait: whether an enqueue waits for a lane lock held elsewhere (else 55P03). */
enum LaneLockWait
{
	kLaneLockWaitOn,	  /* always */
	kLaneLockWaitOrdered, /* only for a lane after every lane this transaction holds to its end */
	kLaneLockWaitOff	  /* never */
};
extern int lane_lock_wait;

/* Define awa_shard.lane_lock_wait (_PG_init). */
void define_lane_lock_settings();

/*
 * This process (the maintenance worker) never waits for a lane lock another transaction
 * holds, whatever awa_shard.lane_lock_wait says: a producer's open transaction must not hold
 * a worker of the shared pool. The step passes the lane over (55P03) until the next pass.
 */
void never_wait_for_lane_locks();

} // namespace awa
