/*
 * citus.cpp — scale-out by queue on Citus (docs/scale-out.md). A queue's rows live on one
 * worker (awa.citus_setup() distributes the per-queue tables by queue, colocated, and the
 * worker-facing calls by p_queue with force_delegation). A call Citus did not delegate would
 * run its statements from the coordinator, one routed statement at a time, and could split
 * a lane over nodes: every entry point that takes a queue refuses it here, before it touches
 * anything, unless the queue's shard is on this node.
 */
#include "citus.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
}

namespace awa
{

namespace
{

/* -1 unknown, 0 no, 1 yes: Citus's library is loaded into this backend. */
int citus_loaded = -1;
/* Whether the citus extension exists (looked up until found; then kept). */
bool citus_extension = false;
SPIPlanPtr local_plan = nullptr;

} // namespace

/* Citus is loaded (its settings exist: it is preloaded) and CREATE EXTENSION citus ran here. */
bool
citus_present()
{
	if (citus_loaded < 0)
		citus_loaded = GetConfigOption("citus.node_conninfo", true, false) != nullptr ? 1 : 0;
	if (citus_loaded == 0)
		return false;
	if (!citus_extension && IsTransactionState())
		citus_extension = OidIsValid(get_extension_oid("citus", true));
	return citus_extension;
}

/* Refuse a call whose queue's shard is not on this node (0A000, with a hint). */
void
require_queue_local(const char *queue, int queue_len)
{
	Oid argtypes[1] = {TEXTOID};
	Datum values[1];
	Datum result;
	bool local;

	if (!citus_present())
		return;
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	/* Not distributed yet (awa.citus_setup() not run): one node, nothing to refuse. */
	keep_plan(&local_plan,
			  "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "                              WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass) "
			  "            THEN true "
			  "            ELSE EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g "
			  "                          WHERE p.groupid = g.groupid "
			  "                            AND p.shardid = pg_catalog.get_shard_id_for_distribution_column("
			  "                                              'awa.queue_meta'::pg_catalog.regclass, $1)) END",
			  1, argtypes);
	exec_plan(local_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue placement");
	local = spi_single_value(&result) && DatumGetBool(result);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!local)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("queue \"%.*s\" lives on another node of the Citus cluster", queue_len, queue),
						errdetail("Citus did not delegate this call to the queue's worker, so it would run here, a "
								  "statement at a time."),
						errhint("Call the function alone in its own statement with p_queue given (SELECT awa.f(...), "
								"not inside an expression or a multi-statement transaction that touched another "
								"queue's worker), or connect to the queue's worker.")));
}

} // namespace awa
