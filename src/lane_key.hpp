/*
 * lane_key.hpp — the fixed-size key of a lane (or of a queue) that the backend-local hash
 * tables of several concerns share (HASH_BLOBS: compared bytewise).
 */
#pragma once

#include "limits.hpp"
#include "validate.hpp"

#include <cstring>

extern "C"
{
#include "common/hashfn.h"
#include "utils/hsearch.h"
}

namespace awa
{

/* Whether two texts (queue names, concurrency keys) are the same, whatever their varlena headers. */
inline bool
same_text(text *a, text *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		   std::memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

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

/*
 * Hash of a zero-padded queue name's bytes up to its terminator (a key's `capacity` bytes at
 * most): not the 800 bytes of padding HASH_BLOBS would hash and compare on every look-up (a
 * queue name holds no NUL byte). The keys of the lane caches and of the shared counters.
 */
inline uint32
padded_queue_hash(const char *queue, Size capacity)
{
	return hash_bytes(reinterpret_cast<const unsigned char *>(queue), strnlen(queue, capacity));
}

/* dynahash hash of a LaneKey table (HashValueFunc); pass it with HASH_FUNCTION | HASH_COMPARE. */
inline uint32
lane_key_hash(const void *key, Size keysize)
{
	const LaneKey *k = static_cast<const LaneKey *>(key);
	uint32 h = padded_queue_hash(k->queue, sizeof(k->queue));

	return hash_combine(h, hash_bytes_uint32((static_cast<uint32>(static_cast<uint16>(k->priority)) << 16) |
											 static_cast<uint16>(k->shard)));
}

/* 0 when two LaneKeys name the same lane (dynahash HashCompareFunc). */
inline int
lane_key_match(const void *a, const void *b, Size keysize)
{
	const LaneKey *x = static_cast<const LaneKey *>(a);
	const LaneKey *y = static_cast<const LaneKey *>(b);

	if (x->priority != y->priority || x->shard != y->shard)
		return 1;
	return strncmp(x->queue, y->queue, sizeof(x->queue));
}

/* Set the LaneKey hash functions in a HASHCTL; returns the flags to add to hash_create's. */
inline int
use_lane_key_functions(HASHCTL *ctl)
{
	ctl->hash = lane_key_hash;
	ctl->match = lane_key_match;
	return HASH_FUNCTION | HASH_COMPARE;
}

} // namespace awa
