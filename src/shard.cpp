/*
 * shard.cpp — routing of enqueued rows (docs/design.md §7): the width cache of
 * awa.queue_meta, the sticky keyless rotor pick and awa.shard_for_enqueue.
 */
#include "flow_control.hpp"
#include "lane_key.hpp"
#include "module.hpp"
#include "ordering_hash.hpp"
#include "pg_boundary.hpp"
#include "rate_limit.hpp"
#include "shard.hpp"
#include "shard_math.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include <cstdint>

namespace awa
{

namespace
{

/* A cached width or sticky pick, valid while epoch equals the transaction epoch. */
struct RouteEntry
{
	LaneKey key;
	std::uint64_t epoch; /* transaction epoch of the read or pick */
	std::uint64_t stamp; /* widths: queue_meta stamp of the read */
	int shards;
	int shard;
};

HTAB *widths = nullptr;
HTAB *picks = nullptr;
SPIPlanPtr width_plan = nullptr;

/* Backend-lifetime hash table of RouteEntry. */
HTAB *
route_table(HTAB **table, const char *name)
{
	if (*table == nullptr)
	{
		HASHCTL ctl;

		std::memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LaneKey);
		ctl.entrysize = sizeof(RouteEntry);
		ctl.hcxt = TopMemoryContext;
		*table = hash_create(name, 64, &ctl, HASH_ELEM | HASH_CONTEXT | use_lane_key_functions(&ctl));
	}
	return *table;
}

/*
 * Read enqueue_shards of a queue from awa.queue_meta (no row = 1), as of the latest
 * committed state: the width cached under a stamp must be at least as new as the stamp,
 * whatever snapshot the calling statement or transaction holds.
 */
int
read_width(const char *queue, int queue_len)
{
	static const Oid argtypes[1] = {TEXTOID};
	Datum values[1];
	Datum d;
	int shards = 1;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	keep_plan(&width_plan, "SELECT enqueue_shards FROM awa.queue_meta WHERE queue = $1", 1, argtypes);
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	exec_plan_latest(width_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue width lookup");
	if (spi_single_value(&d))
		shards = DatumGetInt16(d);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!valid_shard_count(shards))
		elog(ERROR, "awa_shard: queue_meta holds an out-of-range width %d", shards);
	return shards;
}

} // namespace

/*
 * Width of a queue: stable for the rest of a transaction once read, and cached across
 * transactions until queue_meta changes (preloaded: a commit that changed it bumps a
 * server-wide generation; otherwise it is re-read once per transaction). The stamp is read
 * before the table and the table is read on the latest committed state, so a cached width
 * is never older than its stamp; a change committed in between forces a re-read next time.
 */
int
queue_width(const char *queue, int queue_len)
{
	LaneKey key;
	bool found;
	RouteEntry *entry;
	int shards;
	std::uint64_t stamp = queue_meta_stamp();

	make_lane_key(&key, queue, queue_len, 0, 0);
	entry = static_cast<RouteEntry *>(hash_search(route_table(&widths, "awa_shard widths"), &key, HASH_FIND, &found));
	if (found && (entry->epoch == current_xact_epoch() || entry->stamp == stamp))
	{
		entry->epoch = current_xact_epoch();
		return entry->shards;
	}
	shards = read_width(queue, queue_len);
	entry = static_cast<RouteEntry *>(hash_search(widths, &key, HASH_ENTER, &found));
	entry->epoch = current_xact_epoch();
	entry->stamp = stamp;
	entry->shards = shards;
	return shards;
}

/* Drop every cached width (called when this transaction changed queue_meta). */
void
forget_queue_widths()
{
	if (widths != nullptr)
	{
		hash_destroy(widths);
		widths = nullptr;
	}
}

/* One rotor ticket per (queue, priority) per transaction: at most one keyless lane lock each. */
int
sticky_rotor_shard(const char *queue, int queue_len, int priority, int shards)
{
	LaneKey key;
	bool found;
	RouteEntry *entry;

	if (shards <= 1)
		return 0;
	make_lane_key(&key, queue, queue_len, priority, 0);
	entry = static_cast<RouteEntry *>(hash_search(route_table(&picks, "awa_shard picks"), &key, HASH_ENTER, &found));
	if (!found || entry->epoch != current_xact_epoch() || entry->shards != shards)
	{
		entry->epoch = current_xact_epoch();
		entry->shards = shards;
		entry->shard = rotor_shard(next_rotor_ticket(), shards);
	}
	return entry->shard;
}

} // namespace awa

/* awa.queue_enqueue_shards(queue): the width this transaction routes with. */
AWA_SQL_FUNCTION(awa_queue_enqueue_shards)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");

	return Int16GetDatum(static_cast<int16>(awa::queue_width(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue))));
}

/* awa.shard_for_enqueue(queue, priority, key): the shard a row would be enqueued to now. */
AWA_SQL_FUNCTION(awa_shard_for_enqueue)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	const char *q = VARDATA_ANY(queue);
	int qlen = VARSIZE_ANY_EXHDR(queue);
	int priority;
	int shards;

	priority = awa::priority_arg(fcinfo, 1, "p_priority");
	shards = awa::queue_width(q, qlen);
	if (!PG_ARGISNULL(2))
	{
		bytea *key = PG_GETARG_BYTEA_PP(2);

		return Int16GetDatum(static_cast<int16>(awa::shard_for_hash(
			awa::ordering_key_hash(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key)),
			shards)));
	}
	return Int16GetDatum(static_cast<int16>(awa::sticky_rotor_shard(q, qlen, priority, shards)));
}

/* Statement and row trigger on awa.queue_meta: this transaction's next enqueue re-reads widths and limits, and its
 * commit tells every backend to. */
AWA_SQL_FUNCTION(awa_queue_meta_changed)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
						errmsg("awa._queue_meta_changed must be called as a trigger")));
	awa::note_queue_meta_changed();
	awa::forget_queue_widths();
	awa::forget_queue_limits();
	awa::rate_limit_row_changed(reinterpret_cast<TriggerData *>(fcinfo->context));
	return PointerGetDatum(nullptr);
}
