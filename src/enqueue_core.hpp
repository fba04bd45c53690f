/*
 * enqueue_core.hpp — the one enqueue routine shared by insert_job_compat,
 * insert_jobs and the re-entry paths (promotion, DLQ retry, aging, moves).
 */
#pragma once

#include "awa_shard.hpp"

extern "C"
{
#include "utils/timestamp.h"
}

namespace awa
{

/* One job to write. Plain data (palloc'd pointers, Datums): safe across PostgreSQL errors. */
struct EnqueueRow
{
	int64 job_id;			/* 0: allocate from awa.job_id_seq */
	const char *queue;		/* not NUL-terminated */
	int queue_len;
	Datum kind;				/* text */
	Datum args;				/* jsonb */
	int priority;			/* lane priority, 1..4 */
	int attempt;
	int64 run_lease;
	int max_attempts;
	TimestampTz run_at;
	TimestampTz created_at;
	Datum attempted_at;		/* timestamptz or null */
	bool attempted_at_null;
	Datum unique_key;		/* bytea or null */
	bool unique_key_null;
	Datum unique_states;	/* bit(8) or null */
	bool unique_states_null;
	Datum ordering_key;		/* bytea or null */
	bool ordering_key_null;
	Datum metadata;			/* jsonb or null (empty) */
	bool metadata_null;
	Datum tags;				/* text[] or null (empty) */
	bool tags_null;
	Datum errors;			/* jsonb or null */
	bool errors_null;
	const char *deferred_state; /* nullptr: ready; "scheduled" or "retryable": deferred_jobs */

	bool shard_fixed;			/* shard already chosen (insert_jobs spreading keyless rows) */

	/* Outputs for ready rows (shard is an input when shard_fixed). */
	int shard;
	int64 lane_seq;
};

/* Route, reserve (lanes locked in sorted order) and insert rows; claim unique keys when asked. */
void enqueue_rows(EnqueueRow *rows, int n, bool claim_unique_keys);

/* Whether a bit(8) unique-state mask contains a state (bit 0 = scheduled ... 7 = waiting_external). */
bool mask_has_state(Datum mask, const char *state);

/* The default unique-state mask 11111000 (scheduled, available, running, completed, retryable). */
Datum default_unique_mask();

} // namespace awa
