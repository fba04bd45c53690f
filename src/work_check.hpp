/*
 * work_check.hpp — whether a queue has work a claim could take now (work_check.cpp), the
 * check awa.wait_for_jobs runs before it sleeps.
 */
#pragma once

#include "catalog_version.hpp"

#include <cstdint>

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/*
 * Whether the queue (not paused) has a committed ready row a claim could take: in some lane,
 * at or after the lane's claim cursor and below its fence (the lowest reservation another
 * transaction still has in flight) and its high-water mark. Reads O(lanes): a lane whose
 * cursor reached its fence or high-water mark costs no read of the ready rows, any other at
 * most one index probe starting at its cursor. Runs on the latest committed state, whatever
 * the caller's isolation level. Connects to SPI itself. *fence_bits: a bit (fence_bit) for
 * each lane whose cursor stands below its high-water mark but at its fence (the end of that
 * reservation may bring work). *busy: a lane that may have work is held by another
 * transaction still in progress (a claim of it, which a claim now would skip): it was not
 * counted as work, and the caller should look again once that transaction has ended.
 * With promise (a worker about to claim), the lane found is promised to it (promise_lane);
 * a lane another worker holds a promise for counts as busy, not as work. The lanes' cursors
 * are read as the catalog of the calling entry point keeps them.
 */
bool work_visible(text *queue, Catalog catalog, bool promise, std::uint64_t *fence_bits, bool *busy);

/* A lane's bit in a set of fenced lanes (64 bits, by its sequence). */
inline std::uint64_t
fence_bit(Oid seq_oid)
{
	return std::uint64_t{1} << (seq_oid % 64);
}

} // namespace awa
