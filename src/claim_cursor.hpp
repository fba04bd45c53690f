/*
 * claim_cursor.hpp — a lane's claim cursor (claim_cursor.cpp): where the next claim of a
 * lane starts (its head row, or its latest claim mark), read from the catalog or from the
 * cursor board, a copy of every lane's cursor and hint in shared memory (preloaded).
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include "catalog_version.hpp"

namespace awa
{

/* Whether this database's catalog has claim marks (1.1 and later; the background worker's question). */
bool claim_marks_installed();

/* The relation holding every lane's cursor and hint (1.1: awa.lane_cursors). */
const char *cursor_relation();

/* One lane head as a heads read shows it (read_lane_heads). */
struct LaneHead
{
	int16 priority;
	int16 shard;
	int64 claim_seq;		 /* the lane's cursor */
	bool hint_null;			 /* no run_at hint: the lane's first row must be probed */
	TimestampTz hint;		 /* run_at of the lane's first row at the cursor, as the last claim left it */
	Oid seq_oid;			 /* the lane's sequence */
	TransactionId head_xmin; /* the head row's version, the board's key (invalid off the board) */
	TransactionId head_xmax; /* the head row's last locker or updater (invalid through the view) */
};

/*
 * Every lane head of an unpaused queue with its cursor and hint as the catalog keeps them,
 * on the latest committed state (SPI connected); palloc'd, lanes being dropped left out.
 * *receipts: the plane's mode. Returns how many.
 */
int read_lane_heads(text *queue, Catalog catalog, LaneHead **heads, bool *receipts);

/* A lane's claim cursor on the latest committed state (SPI connected); false: no such lane. */
bool lane_cursor(text *queue, int16 priority, int16 shard, Catalog catalog, int64 *cursor);

/* shmem_request_hook: request the cursor board's lock and its shared memory. */
void cursor_board_shmem_request();

/* shmem_startup_hook: claim the board by name ("awa_shard cursor board"), initialising it once. */
void cursor_board_shmem_startup();

/* Register the transaction hooks that publish claimed cursors at commit (preloaded only). */
void init_cursor_board_hooks();

/* Whether the cursor board exists (the library is preloaded). */
bool cursor_board_available();

/* What the board knows of a lane at this head version; false when nothing. */
bool board_lookup(Oid seq_oid, TransactionId head_xmin, int64 *claim_seq, bool *has_run_at, TimestampTz *run_at);

/* Publish a lane's cursor (and, with replace_hint, its run_at hint) on the board now. */
void board_publish(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at,
				   bool replace_hint);

/* Publish a lane's cursor when (and if) this transaction commits. */
void board_publish_at_commit(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at,
							 TimestampTz run_at);

} // namespace awa
