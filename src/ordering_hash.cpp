/* ordering_hash.cpp — the ordering-key hash and its shard reduction (pure C++). */
#include "ordering_hash.hpp"
#include "pure_cpp.hpp" /* last: proves that nothing above brought in a PostgreSQL header */

namespace awa
{

/* Rolling hash over raw bytes; unsigned arithmetic wraps modulo 2^64 by definition. */
std::uint64_t
ordering_key_hash(const unsigned char *bytes, std::size_t length)
{
	std::uint64_t h = kOrderingHashBasis;

	for (std::size_t i = 0; i < length; i++)
		h = h * kOrderingHashPrime + static_cast<std::uint64_t>(bytes[i]);
	return h;
}

/* Reduce the unsigned hash; never a signed modulo (negative int64 hashes are common). */
int
shard_for_hash(std::uint64_t hash, int shards)
{
	if (shards <= 1)
		return 0;
	return static_cast<int>(hash % static_cast<std::uint64_t>(shards));
}

} // namespace awa
