/*
 * shard_math.hpp — pure routing arithmetic: rotor reduction, shard-count bounds,
 * and the one lane order in which every multi-lane call takes its lane locks.
 */
#pragma once

#include <cstdint>
#include <cstring>

namespace awa
{

/* Shard chosen by a rotor ticket: ticket mod shards (unsigned), 0 when shards <= 1. */
int rotor_shard(std::uint32_t ticket, int shards);

/* Whether a shard count is one awa.queue_meta accepts (1..kMaxEnqueueShards). */
bool valid_shard_count(long shards);

/* A lane as the lock order sees it: queue bytes, priority, shard. */
struct LaneRef
{
	const char *queue;
	std::size_t queue_len;
	int priority;
	int shard;
};

/* Total order (queue bytes, priority, shard): concurrent batches lock lanes in this order. */
int compare_lanes(const LaneRef &a, const LaneRef &b);

} // namespace awa
