/*
 * relcache_watch.hpp — one relcache invalidation callback for the whole library
 * (relcache_watch.cpp); each cache of relation facts registers its handler here.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "utils/inval.h"
}

namespace awa
{

/* Call `fn` on every relcache invalidation of this backend from now on (once per fn). */
void watch_relcache(RelcacheCallbackFunction fn);

} // namespace awa
