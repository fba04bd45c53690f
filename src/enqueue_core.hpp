/*
 * enqueue_core.hpp — the one enqueue routine shared by insert_job_compat,
 * insert_jobs and the re-entry paths (promotion, DLQ retry, aging, moves).
 */
#pragma once

#include "catalog_version.hpp"
#include "job_columns.hpp"

extern "C"
{
#include "utils/array.h"
#include "utils/timestamp.h"
}

namespace awa
{

/*
 * One job to write: its attributes by JobColumn (job_columns.hpp), plus where it goes. Plain
 * data (palloc'd pointers, Datums): safe across PostgreSQL errors.
 */
struct EnqueueRow
{
	Datum value[JOB_NCOLUMNS]; /* JOB_ID 0: allocate from awa.job_id_seq */
	bool null[JOB_NCOLUMNS];
	const char *queue; /* the bytes of value[JOB_QUEUE], not NUL-terminated (routing) */
	int queue_len;
	const char *deferred_state; /* nullptr: ready; "scheduled" or "retryable": deferred_jobs */

	bool shard_fixed; /* shard already chosen (insert_jobs spreading keyless rows) */

	/* Outputs for ready rows (shard is an input when shard_fixed). */
	int shard;
	int64 lane_seq;

	/* Set an attribute to a value, or to NULL. */
	void set(JobColumn c, Datum v)
	{
		value[c] = v;
		null[c] = false;
	}
	void set_null(JobColumn c)
	{
		value[c] = (Datum)0;
		null[c] = true;
	}
	int64 job_id() const
	{
		return DatumGetInt64(value[JOB_ID]);
	}
	int priority() const
	{
		return DatumGetInt16(value[JOB_PRIORITY]);
	}
};

/*
 * Route, reserve (lanes locked in sorted order) and insert rows; claim unique keys when asked,
 * in the unique-claim table of `catalog` (per queue from 1.1 on).
 */
void enqueue_rows(EnqueueRow *rows, int n, bool claim_unique_keys, Catalog catalog);

/* Put existing jobs (an array of job-table rows) back on the ready plane; how many. */
int enqueue_ready_array(ArrayType *arr);

/* Take (hold) or release a job's unique claim in its queue, on the latest committed state (SPI connected). */
void set_unique_claim(Datum job_id, Datum key, bool hold, Datum queue);

/* Move a job's unique claim in its queue with its state change from -> to (SPI connected). */
void sync_unique_claim(Datum job_id, Datum key, bool key_null, Datum mask, bool mask_null, const char *from,
					   const char *to, Datum queue);

/* Whether a bit(8) unique-state mask contains a state (bit 0 = scheduled ... 7 = waiting_external). */
bool mask_has_state(Datum mask, const char *state);

/* The default unique-state mask 11111000 (scheduled, available, running, completed, retryable). */
Datum default_unique_mask();

} // namespace awa
