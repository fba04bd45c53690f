/*
 * lane_lock.hpp — the claim's lock of a lane head and its read of the lane's cursor through
 * PostgreSQL's direct access routines (lane_lock.cpp), as the statements `SELECT ... FOR
 * UPDATE SKIP LOCKED` on awa.queue_claim_heads and `SELECT claim_seq FROM awa.lane_cursors`
 * do them (docs/design.md §4, "Direct drain").
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "utils/timestamp.h"
}

namespace awa
{

/*
 * Lock the claim head of a lane unless another transaction holds it (FOR UPDATE SKIP
 * LOCKED, on the latest committed version): *locked says whether this transaction holds it
 * now, *held whether another transaction held it. At REPEATABLE READ and SERIALIZABLE a head
 * updated or deleted since the latest snapshot raises 40001, as the statement does. False,
 * having locked nothing, when the statement must run instead (Citus, privileges, row
 * security).
 */
bool lock_head_direct(text *queue, int16 priority, int16 shard, bool *locked, bool *held);

/*
 * A lane's claim cursor (the greater of its head's claim_seq and its latest claim mark's) on
 * a copy of the latest snapshot; *found is false when the lane has no head. False, having
 * read nothing, when the statement must read instead.
 */
bool lane_cursor_direct(text *queue, int16 priority, int16 shard, bool *found, int64 *cursor);

/* A claim head as read_heads_direct reads it (the heads statement's columns). */
struct HeadRow
{
	int16 priority;
	int16 shard;
	int64 claim_seq;
	bool hint_null;
	TimestampTz hint;
	char *seq_name;
	TransactionId xmin;
	TransactionId xmax;
};

/*
 * Every claim head of the queue with its enqueue sequence's name (none when the queue is
 * paused), its row's xmin and xmax, and the plane's mode, on a copy of the latest snapshot,
 * as the heads statement reads them with the heads themselves as the cursors (the cursor
 * board completes them). False, having read nothing, when the statement must read instead.
 */
bool read_heads_direct(text *queue, HeadRow **out, int *n, bool *receipts);

} // namespace awa
