/* shard_math.cpp — pure routing arithmetic shared by enqueue, promotion and moves. */
#include "shard_math.hpp"
#include "limits.hpp"
#include "pure_cpp.hpp" /* last: proves that nothing above brought in a PostgreSQL header */

namespace awa
{

/* Rotor pick; the ticket is a free-running counter, so wrap-around is harmless. */
int
rotor_shard(std::uint32_t ticket, int shards)
{
	if (shards <= 1)
		return 0;
	return static_cast<int>(ticket % static_cast<std::uint32_t>(shards));
}

/* The width bounds of queue_meta_enqueue_shards_range. */
bool
valid_shard_count(long shards)
{
	return shards >= 1 && shards <= kMaxEnqueueShards;
}

/* Byte-wise queue comparison first, so the order does not depend on collation. */
int
compare_lanes(const LaneRef &a, const LaneRef &b)
{
	std::size_t n = a.queue_len < b.queue_len ? a.queue_len : b.queue_len;
	int c = std::memcmp(a.queue, b.queue, n);

	if (c != 0)
		return c < 0 ? -1 : 1;
	if (a.queue_len != b.queue_len)
		return a.queue_len < b.queue_len ? -1 : 1;
	if (a.priority != b.priority)
		return a.priority < b.priority ? -1 : 1;
	if (a.shard != b.shard)
		return a.shard < b.shard ? -1 : 1;
	return 0;
}

} // namespace awa
