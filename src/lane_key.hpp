/*
 * lane_key.hpp — the fixed-size key of a lane (or of a queue) that the backend-local hash
 * tables of several concerns share (HASH_BLOBS: compared bytewise).
 */
#pragma once

#include "limits.hpp"
#include "validate.hpp"

#include <cstring>

namespace awa
{

/* Fixed-size hash key of a lane (or of a queue: priority and shard 0) for backend caches. */
struct LaneKey
{
	char queue[kMaxQueueBytes + 1];
	int16 priority;
	int16 shard;
};

/* Fill a zero-padded key so HASH_BLOBS compares it bytewise. */
inline void
make_lane_key(LaneKey *key, const char *queue, int queue_len, int priority, int shard)
{
	check_queue_bytes(queue_len);
	std::memset(key, 0, sizeof(*key));
	std::memcpy(key->queue, queue, queue_len);
	key->priority = static_cast<int16>(priority);
	key->shard = static_cast<int16>(shard);
}

} // namespace awa
