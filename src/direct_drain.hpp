/*
 * direct_drain.hpp — the drain of one locked lane (receipts mode, 1.1 catalog) through
 * PostgreSQL's direct access routines (direct_drain.cpp): the lane's window read by index
 * scans of the live ready partitions, its claim batches and claim mark inserted with their
 * indexes maintained, no planned statement (docs/design.md §4, "Direct drain").
 */
#pragma once

#include "ring.hpp"

extern "C"
{
#include "postgres.h"
#include "access/tupdesc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

namespace awa
{

/* A range [from, bound) of lane_seqs of one lane. */
struct LaneRange
{
	text *queue;
	int16 priority;
	int16 shard;
	int64 from;
	int64 bound;
};

/* A ready row as a lane probe finds it. */
struct LaneRow
{
	TimestampTz run_at;
	int32 ready_slot;
	int64 lane_seq;
};

/*
 * A lane's window as lane_window_keys read it (direct_drain.cpp), kept for the drain of the
 * same lane by the same claim: under the head lock and the claim bound no row can enter or
 * leave it, so the drain takes its rows instead of reading them again.
 */
struct LaneWindow;

/* What to drain: a lane whose head this transaction has locked, and how. */
struct DrainRequest
{
	text *queue;
	int16 priority;
	int16 shard;
	int64 claim_seq;		  /* the lane's cursor, read after the head lock */
	int64 max_batch;		  /* at least 1 */
	int64 bound;			  /* the lane's claim bound (registry.cpp), read before the drain's snapshot */
	double deadline_secs;	  /* 0: no deadline */
	double aging_secs;		  /* 0: no aging */
	const int *arc;			  /* the queue ring's live arc: two ranges of ready slots */
	RingSlot claim_slot;	  /* the claim ring's write slot, fenced */
	bool keyed;				  /* hand back the attempts of keyed jobs (DrainOutcome::keyed) */
	const LaneWindow *window; /* the lane's window as the per-key step read it, or nullptr: read it */
};

/*
 * An attempt of a keyed job a drain started, as awa.key_attempts records it
 * (record_key_attempts, flow_control.cpp): the claimed ready row's identity and key, the
 * attempt's run lease (the ready row's plus one) and the ring slot it was recorded in.
 */
struct KeyedAttempt
{
	text *concurrency_key; /* the ready row's; nullptr: not read (the record reads it from the row) */
	int64 job_id;
	int64 run_lease;
	int64 lane_seq;
	int32 ready_slot;
	int64 ready_generation;
	bool has_claim_slot;
	int32 claim_slot;
	bool has_lease_slot;
	int32 lease_slot;
};

/* What a drain did: rows claimed, and the lane's cursor and hint after it. */
struct DrainOutcome
{
	int64 claimed;
	int64 next_seq;			 /* max(lane_seq) + 1 of the claimed rows */
	bool has_hint;			 /* the window showed the lane's next row */
	TimestampTz hint_run_at; /* its run_at */
	KeyedAttempt *keyed;	 /* with DrainRequest::keyed: the claimed rows that carry a key, in lane order */
	int n_keyed;
};

/*
 * Drain the lane as the receipts-mode drain statement does (claim_sql.hpp), putting the
 * claimed rows into `store` as rows of `result_desc` (the columns of claim_ready_runtime).
 * False, having read and written nothing, when the statement must run instead: under Citus,
 * without the privileges or with triggers, rules or row security on the tables, or when a
 * table's columns are not the ones this routine knows. SPI must be connected.
 */
bool drain_direct(const DrainRequest &req, Tuplestorestate *store, TupleDesc result_desc, DrainOutcome *out);

/*
 * The concurrency keys of a lane's window as the drain reads it: its first `limit` visible
 * rows in [from, bound) of the live ready slots, in lane order, on a copy of the latest
 * snapshot; (*keys)[i] is row i's key, nullptr for a keyless row (a palloc'd array of *n);
 * *first_seq: the first row's lane_seq (-1: none). With `kept`, the rows are read with the
 * one after them (the drain's hint) and kept in *kept (palloc'd) for the drain of this lane
 * (DrainRequest::window). False, having read nothing, when a statement must read instead
 * (as lane_first_row).
 */
bool lane_window_keys(const LaneRange &lane, const int *arc, int64 limit, text ***keys, int64 *n, int64 *first_seq,
					  LaneWindow **kept);

/*
 * The first visible row of a lane in [from, bound) of the live ready slots (arc: two ranges
 * of slots), on a copy of the latest snapshot, as the probe statements read it; *found says
 * whether there is one. False, having read nothing, when a statement must read instead
 * (Citus, privileges, row security, unknown columns).
 */
bool lane_first_row(const LaneRange &lane, const int *arc, bool *found, LaneRow *row);

/* Whether the ready row (lane, lane_seq) is visible in slot ready_slot, as lane_first_row. */
bool ready_row_visible(const LaneRange &lane, int32 ready_slot, int64 lane_seq, bool *found);

/*
 * The effective priority of a lane whose oldest row has waited since run_at (aging, §4):
 * one step higher (lower number) per aging_secs waited, never above 1 nor below priority.
 */
int aged_priority(int priority, TimestampTz run_at, TimestampTz now, double aging_secs);

} // namespace awa
