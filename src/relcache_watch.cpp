/*
 * relcache_watch.cpp — one relcache invalidation callback for the whole library.
 *
 * PostgreSQL keeps at most ten relcache callbacks per backend (MAX_RELCACHE_CALLBACKS in
 * inval.c), shared by every library the backend loads: Citus registers several, and a
 * registration past the tenth fails with "out of relcache_callback_list slots". The library's
 * caches of relation facts (the enqueue's partitions, the lane cache, the ring cursors and
 * partitions, the views a Citus read expands) therefore register their handlers here, and one
 * callback calls them all.
 */
#include "relcache_watch.hpp"

namespace awa
{

namespace
{

constexpr int kWatchers = 8;
RelcacheCallbackFunction watchers[kWatchers];
int n_watchers = 0;

/* The one callback: every handler, in the order they were registered. */
void
dispatch(Datum arg, Oid relid)
{
	for (int i = 0; i < n_watchers; i++)
		watchers[i](arg, relid);
}

} // namespace

/* Register `fn` (a second registration of the same handler is ignored). */
void
watch_relcache(RelcacheCallbackFunction fn)
{
	for (int i = 0; i < n_watchers; i++)
		if (watchers[i] == fn)
			return;
	if (n_watchers == kWatchers)
		elog(ERROR, "awa_shard: too many relcache watchers");
	if (n_watchers == 0)
		CacheRegisterRelcacheCallback(dispatch, PointerGetDatum(nullptr));
	watchers[n_watchers++] = fn;
}

} // namespace awa
