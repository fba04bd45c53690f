/*
 * enqueue.hpp — the set-up of enqueue.cpp's backend cache (the routine itself is declared
 * in enqueue_core.hpp).
 */
#pragma once

namespace awa
{

/* Register the invalidation hook of the cached job id sequence. */
void init_enqueue_cache();

} // namespace awa
