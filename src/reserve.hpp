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

/* Reserve [start, start + count) on a lane, creating the lane on first use. */
int64 reserve_lane_block(const char *queue, int queue_len, int priority, int shard, int64 count);

/* Register cache invalidation and transaction hooks of the lane cache. */
void init_lane_cache();

} // namespace awa
