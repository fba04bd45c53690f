/*
 * stats.hpp — per-shard counters (stats.cpp) in shared memory, read by awa._shard_stats().
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* What a counter counts. */
enum class StatKind
{
	Enqueued = 0,
	Claimed = 1,
	Completed = 2,
	Failed = 3
};

/* Add n to a (queue, shard) counter (no-op without shared memory). */
void stats_add(const char *queue, int queue_len, int shard, StatKind kind, int64 n);

/* Shared memory of the counters, and its attachment. */
Size stats_shmem_size();
void stats_shmem_init(bool found);

} // namespace awa
