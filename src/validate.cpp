/* validate.cpp — argument checks shared by the SQL functions (D11: checked before any write). */
#include "awa_shard.hpp"
#include "ordering_hash.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace awa
{

/* A queue argument: NULL -> 22004, empty or longer than 200 characters -> 23514. */
text *
checked_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	text *queue;
	int chars;

	if (PG_ARGISNULL(argno))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("%s must not be null", argname)));
	queue = PG_GETARG_TEXT_PP(argno);
	chars = pg_mbstrlen_with_len(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	if (chars < 1 || chars > kMaxQueueChars)
		ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
						errmsg("%s must be 1 to %d characters long", argname, kMaxQueueChars),
						errdetail("The value has %d characters.", chars)));
	return queue;
}

/* Priorities are 1 (most urgent) to 4. */
int
checked_priority(int priority, const char *argname)
{
	if (priority < 1 || priority > 4)
		ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION),
						errmsg("%s must be between 1 and 4", argname),
						errdetail("The value is %d.", priority)));
	return priority;
}

/* max_attempts: 1..1000 (23514), the range ready_entries.max_attempts also holds. */
int
checked_max_attempts(int value, const char *argname)
{
	if (value < 1 || value > 1000)
		ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION), errmsg("%s must be between 1 and 1000", argname),
						errdetail("The value is %d.", value)));
	return value;
}

/*
 * A priority argument declared integer (1.1; smallint in 1.0): read as int32, so 65537 is
 * refused instead of wrapping to 1. Reading an int2 Datum of a 1.0 catalog as int32 gives the
 * same value, so the library serves both until the update runs.
 */
int
priority_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	return checked_priority(PG_GETARG_INT32(argno), argname);
}

/* An enqueue shard argument declared integer: 0..63 (22023), read as int32 (no wrap). */
int
enqueue_shard_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	int32 shard = PG_GETARG_INT32(argno);

	if (shard < 0 || shard >= kMaxEnqueueShards)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be between 0 and %d", argname, kMaxEnqueueShards - 1),
						errdetail("The value is %d.", shard)));
	return shard;
}

/* A max_attempts argument declared integer: 1..1000 (23514), read as int32 (no wrap). */
int
max_attempts_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	return checked_max_attempts(PG_GETARG_INT32(argno), argname);
}

/* An element of an integer[] argument, or of the smallint[] a 1.0 catalog still passes. */
int
int_array_element(Datum element, Oid elemtype)
{
	if (elemtype == INT2OID)
		return DatumGetInt16(element);
	if (elemtype == INT4OID)
		return DatumGetInt32(element);
	elog(ERROR, "awa_shard: unexpected array element type %u", elemtype);
	pg_unreachable();
}

/* A run_at must be a real point in time: 'infinity' would never run, '-infinity' breaks aging. */
TimestampTz
checked_run_at(TimestampTz run_at, const char *argname)
{
	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be a finite timestamp", argname),
						errdetail("The value is %s.", TIMESTAMP_IS_NOBEGIN(run_at) ? "-infinity" : "infinity")));
	return run_at;
}

} // namespace awa
