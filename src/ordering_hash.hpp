/*
 * ordering_hash.hpp — the portable 64-bit rolling hash that routes ordering keys
 * to enqueue shards (pure C++, no PostgreSQL header).
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace awa
{

constexpr std::uint64_t kOrderingHashBasis = 14695981039346656037ULL;
constexpr std::uint64_t kOrderingHashPrime = 1099511628211ULL;

/* h = basis; for each unsigned byte b: h = h * prime + b (mod 2^64). Add-form, not FNV xor. */
std::uint64_t ordering_key_hash(const unsigned char *bytes, std::size_t length);

/* Shard of a hash for a queue of `shards` lanes: unsigned h mod shards; shards <= 1 gives 0. */
int shard_for_hash(std::uint64_t hash, int shards);

} // namespace awa
