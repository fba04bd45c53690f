/*
 * ended_places.hpp — row versions of awa.key_attempts whose attempt is known to have ended,
 * so that a per-key count passes them as free without testing them (ended_places.cpp).
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "access/transam.h"
#include "storage/itemptr.h"
}

namespace awa
{

/*
 * The claim of this transaction wrote the place row version `tid` of the relation file
 * `relfile` for the attempt (job_id, run_lease): remembered by the backend, so that the
 * attempt's end, when this backend commits it, can name that version.
 */
void note_place_recorded(int64 job_id, int64 run_lease, text *queue, Oid relfile, ItemPointer tid);

/* Start loading into the cache what note_place_recorded will write for this attempt (a claim's are far apart). */
void prefetch_place_recorded(int64 job_id, int64 run_lease, text *queue);

/*
 * This transaction ended the attempt (job_id, run_lease) of `queue`: its place version, when
 * this backend recorded it, is published at commit (nothing when queue is nullptr).
 */
void note_place_attempt_ended(int64 job_id, int64 run_lease, text *queue);

/*
 * Whether the place row version (relfile, tid, xmin) of this database, recording the attempt
 * (job_id, run_lease) of `queue`, is one whose attempt's end has committed (published by the
 * backend that recorded it and ended it). False says nothing: the count tests the attempt.
 */
bool place_attempt_ended(Oid relfile, ItemPointer tid, TransactionId xmin, int64 job_id, int64 run_lease, text *queue);

/*
 * Start loading into the cache the set place_attempt_ended will read for the same version, so
 * that a count's tests of several places overlap their misses.
 */
void prefetch_place_ended(Oid relfile, ItemPointer tid, TransactionId xmin, int64 job_id, int64 run_lease, text *queue);

/* Transaction end: at commit publish the ended attempts' place versions; else forget them. Never raises. */
void ended_places_at_xact_end(bool committed);

/* _PG_init: the subtransaction hook (a savepoint rolled back takes back the ends it noted). */
void init_ended_places_hooks();

/* shmem_request_hook / shmem_startup_hook of the published versions. */
void ended_places_shmem_request();
void ended_places_shmem_startup();

} // namespace awa
