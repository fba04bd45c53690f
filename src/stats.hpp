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

/* shmem_request_hook: request the counters' lock and their shared memory. */
void stats_shmem_request();

/* shmem_startup_hook: claim the counters by name ("awa_shard stats"), initialising them once. */
void stats_shmem_startup();

} // namespace awa
