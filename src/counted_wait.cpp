/*
 * counted_wait.cpp — a condition variable with a count of the events it announces (see
 * counted_wait.hpp). Cancelling the query ends a sleep at once (ConditionVariableTimedSleep
 * checks for interrupts).
 */
#include "counted_wait.hpp"

extern "C"
{
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/wait_event.h"
}

namespace awa
{

/* A counted wait with no event yet. */
void
counted_wait_init(CountedWait *w)
{
	ConditionVariableInit(&w->cv);
	pg_atomic_init_u64(&w->count, 0);
}

/* The count of events so far. */
std::uint64_t
counted_wait_seen(CountedWait *w)
{
	return pg_atomic_read_u64(&w->count);
}

/* Count one event, then wake every sleeper or one. */
void
counted_wait_announce(CountedWait *w, bool all)
{
	pg_atomic_fetch_add_u64(&w->count, 1);
	if (all)
		ConditionVariableBroadcast(&w->cv);
	else
		ConditionVariableSignal(&w->cv);
}

/* Sleep until the count moves from `seen` or the deadline passes; true when it moved. */
bool
counted_wait_sleep(CountedWait *w, std::uint64_t seen, TimestampTz deadline)
{
	bool moved = false;

	ConditionVariablePrepareToSleep(&w->cv);
	for (;;)
	{
		long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (pg_atomic_read_u64(&w->count) != seen)
		{
			moved = true;
			break;
		}
		if (remaining <= 0)
			break;
		(void)ConditionVariableTimedSleep(&w->cv, remaining, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();
	return moved;
}

} // namespace awa
