/* validate.cpp — argument checks shared by the SQL functions (D11: checked before any write). */
#include "awa_shard.hpp"

extern "C"
{
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
