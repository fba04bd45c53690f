/*
 * promote.hpp — promotion of one queue's due deferred jobs (promote.cpp), run by its claims
 * where no maintenance worker serves the database.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Promote up to `limit` due jobs of a queue to the ready plane (SPI connected); how many. */
int promote_due_queue(text *queue, int limit);

} // namespace awa
