/*
 * work_check.hpp — whether a queue has work a claim could take now (work_check.cpp), the
 * check awa.wait_for_jobs runs before it sleeps.
 */
#pragma once

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
 * the caller's isolation level. Connects to SPI itself. *fenced: some lane's cursor stands
 * below its high-water mark but at its fence (the end of that reservation may bring work).
 */
bool work_visible(text *queue, bool *fenced);

} // namespace awa
