/*
 * claim_cursor.cpp — where a lane's claim cursor lives (docs/design.md §4, "Claim cursor").
 *
 * From 1.1 a claim does not update its lane's head row: it locks the head and appends a
 * claim mark (awa.claim_marks), so the cursor is the greater of the head's claim_seq and the
 * lane's latest mark (the view awa.lane_cursors); maintenance folds marks into the heads.
 * Between installing the library and ALTER EXTENSION UPDATE the catalog is still 1.0: there
 * the head's claim_seq is the cursor and a claim updates it, as 1.0 did.
 */
#include "awa_shard.hpp"

extern "C"
{
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
}

namespace awa
{

namespace
{

SPIPlanPtr cursor_plans[2];

} // namespace

/* Whether this database's catalog has claim marks (1.1 and later). One syscache look-up. */
bool
claim_marks_installed()
{
	Oid nsp = get_namespace_oid("awa", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("claim_marks", nsp));
}

/* The relation that holds every lane's cursor (claim_seq) and run_at hint (head_run_at). */
const char *
cursor_relation(bool marks)
{
	return marks ? "awa.lane_cursors" : "awa.queue_claim_heads";
}

/*
 * A lane's claim cursor on the latest committed state (SPI connected); false when the lane
 * has no head. Read after locking the head, it is exact: no claim can move it meanwhile, and
 * the claim that held the head before committed its mark before its lock was released.
 */
bool
lane_cursor(text *queue, int16 priority, int16 shard, bool marks, int64 *cursor)
{
	static const Oid types[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3] = {PointerGetDatum(queue), Int16GetDatum(priority), Int16GetDatum(shard)};
	Datum value;

	if (cursor_plans[marks] == nullptr)
	{
		char sql[256];

		snprintf(sql, sizeof(sql),
				 "SELECT h.claim_seq FROM %s h WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3",
				 cursor_relation(marks));
		keep_plan(&cursor_plans[marks], sql, 3, types);
	}
	exec_plan_latest(cursor_plans[marks], values, nullptr, true, 1, SPI_OK_SELECT, "lane cursor");
	if (!spi_single_value(&value))
		return false;
	*cursor = DatumGetInt64(value);
	return true;
}

} // namespace awa

/* awa._lane_cursor(queue, priority, shard): a lane's claim cursor on the latest committed state. */
AWA_SQL_FUNCTION(awa_lane_cursor)
{
	text *queue = PG_GETARG_TEXT_PP(0);
	int16 priority = PG_GETARG_INT16(1);
	int16 shard = PG_GETARG_INT16(2);
	int64 cursor = 0;
	bool found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	found = awa::lane_cursor(queue, priority, shard, awa::claim_marks_installed(), &cursor);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(cursor);
}
