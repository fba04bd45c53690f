/*
 * unique_claims.cpp — a job's unique claim (awa.job_unique_claims), taken or released on the
 * latest committed state (awa._set_unique_claim). awa._sync_unique_claim decides from the
 * job's mask which of the two a state change needs; the statement runs here, so that it acts
 * on the claim as it is now, whatever the caller's isolation level, like the exits that call
 * it (docs/design.md §4). An exit at REPEATABLE READ takes an attempt claimed after its
 * snapshot (src/attempts.cpp); on that snapshot the release would not see a claim row enqueued
 * since and would keep the key taken for good, and a take would raise 40001 on a conflicting
 * claim it cannot see.
 */
#include "pg_boundary.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
}

namespace
{

SPIPlanPtr release_plan = nullptr;
SPIPlanPtr take_plan = nullptr;

/* Release: the job's claim row, whichever key it holds. */
const char *const kReleaseSql = "DELETE FROM awa.job_unique_claims WHERE job_id = $1";

/* Take: the key for the job, unless a live claim of another job holds it (it keeps it). */
const char *const kTakeSql = "INSERT INTO awa.job_unique_claims (unique_key, job_id) VALUES ($2, $1) "
							 "ON CONFLICT (unique_key) DO NOTHING";

} // namespace

/* awa._set_unique_claim(job_id, unique_key, hold): take (hold) or release the job's claim. */
AWA_SQL_FUNCTION(awa_set_unique_claim)
{
	static const Oid types[2] = {INT8OID, BYTEAOID};
	Datum args[2];
	bool hold;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_VOID();
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	hold = PG_GETARG_BOOL(2);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	if (hold)
		awa::exec_plan_latest(awa::keep_plan(&take_plan, kTakeSql, 2, types), args, nullptr, false, 0, SPI_OK_INSERT,
							  "unique claim take");
	else
		awa::exec_plan_latest(awa::keep_plan(&release_plan, kReleaseSql, 1, types), args, nullptr, false, 0,
							  SPI_OK_DELETE, "unique claim release");
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	PG_RETURN_VOID();
}
