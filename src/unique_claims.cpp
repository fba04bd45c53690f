/*
 * unique_claims.cpp — unique keys: the state-mask rule (which states of a job hold its key)
 * and a job's claim in awa.job_unique_claims, taken or released on the latest committed
 * state. Every caller (enqueue, claim-time promotion, the SQL exits through
 * awa._sync_unique_claim, the statements through awa.job_state_in_bitmask) uses this one
 * rule. The claim statements act on the claim as it is now, whatever the caller's isolation
 * level, like the exits that call them (docs/design.md §4): an exit at REPEATABLE READ takes
 * an attempt claimed after its snapshot (src/attempts.cpp); on that snapshot the release
 * would not see a claim row enqueued since and would keep the key taken for good, and a take
 * would raise 40001 on a conflicting claim it cannot see.
 */
#include "enqueue_core.hpp"
#include "pg_boundary.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/varbit.h"
}

#include <cstring>

namespace
{

SPIPlanPtr release_plan = nullptr;
SPIPlanPtr take_plan = nullptr;

/* The states of awa.job_state in their order: bit p of a mask (0 = leftmost) is state p. */
const char *const kStateNames[8] = {"scheduled", "available", "running",   "completed",
									"retryable", "failed",	  "cancelled", "waiting_external"};

/* Release: the job's claim row in its queue $3, whichever key it holds. */
const char *const kReleaseSql = "DELETE FROM awa.job_unique_claims WHERE job_id = $1 AND queue = $3";

/* Take: the key in the job's queue $3, unless a live claim of another job holds it (it keeps it). */
const char *const kTakeSql = "INSERT INTO awa.job_unique_claims (unique_key, job_id, queue) VALUES ($2, $1, $3) "
							 "ON CONFLICT (queue, unique_key) DO NOTHING";

/* The label of an awa.job_state value. */
const char *
state_label(Datum state)
{
	return DatumGetCString(DirectFunctionCall1(enum_out, state));
}

} // namespace

namespace awa
{

/* Whether a bit(8) unique-state mask holds a state: bit p (0 = leftmost = scheduled) is state p. */
bool
mask_has_state(Datum mask, const char *state)
{
	VarBit *vb = DatumGetVarBitP(mask);

	for (int p = 0; p < 8; p++)
	{
		if (std::strcmp(kStateNames[p], state) == 0)
		{
			if (VARBITLEN(vb) <= p)
				return false;
			return ((VARBITS(vb)[p / 8] >> (7 - (p % 8))) & 1) != 0;
		}
	}
	return false;
}

/* Take (hold) or release a job's unique claim in its queue, on the latest committed state (SPI connected). */
void
set_unique_claim(Datum job_id, Datum key, bool hold, Datum queue)
{
	static const Oid types[3] = {INT8OID, BYTEAOID, TEXTOID};
	Datum args[3] = {job_id, key, queue};

	if (hold)
		exec_plan_latest(keep_plan(&take_plan, kTakeSql, 3, types), args, nullptr, false, 0, SPI_OK_INSERT,
						 "unique claim take");
	else
		exec_plan_latest(keep_plan(&release_plan, kReleaseSql, 3, types), args, nullptr, false, 0, SPI_OK_DELETE,
						 "unique claim release");
}

/*
 * Move a job's unique claim with its state (SPI connected): released when the new state
 * leaves the mask, taken when it enters it (a conflicting live claim keeps its key). Nothing
 * for a job without a key or mask.
 */
void
sync_unique_claim(Datum job_id, Datum key, bool key_null, Datum mask, bool mask_null, const char *from, const char *to,
				  Datum queue)
{
	bool held, holds;

	if (key_null || mask_null)
		return;
	held = mask_has_state(mask, from);
	holds = mask_has_state(mask, to);
	if (held != holds)
		set_unique_claim(job_id, key, holds, queue);
}

} // namespace awa

/* awa.job_state_in_bitmask(mask, state): whether a unique-state mask holds a state. */
AWA_SQL_FUNCTION(awa_job_state_in_bitmask)
{
	PG_RETURN_BOOL(awa::mask_has_state(PG_GETARG_DATUM(0), state_label(PG_GETARG_DATUM(1))));
}

/* awa._set_unique_claim(job_id, unique_key, hold, queue): take (hold) or release the job's claim. */
AWA_SQL_FUNCTION(awa_set_unique_claim)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		PG_RETURN_VOID();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::set_unique_claim(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_BOOL(2), PG_GETARG_DATUM(3));
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	PG_RETURN_VOID();
}

/* awa._sync_unique_claim(job_id, unique_key, mask, from, to, queue): move a job's claim with its state. */
AWA_SQL_FUNCTION(awa_sync_unique_claim)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(3) || PG_ARGISNULL(4) || PG_ARGISNULL(5))
		PG_RETURN_VOID();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	awa::sync_unique_claim(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_ARGISNULL(1), PG_GETARG_DATUM(2), PG_ARGISNULL(2),
						   state_label(PG_GETARG_DATUM(3)), state_label(PG_GETARG_DATUM(4)), PG_GETARG_DATUM(5));
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	PG_RETURN_VOID();
}
