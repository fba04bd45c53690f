/*
 * wakeup.hpp — wake-ups of waiting workers (wakeup.cpp): the NOTIFY throttle and, when
 * preloaded, the lists of sleeping workers in shared memory that a producing commit wakes.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Remember that this transaction added ready rows to `lanes` lanes of a queue. */
void note_enqueued(const char *queue, int queue_len, int64 lanes);

/* Remember that this transaction's claim left more rows in its lane (wake one more sleeper). */
void note_more_work(const char *queue, int queue_len);

/* Remember that this transaction reserved lane numbers of a queue's lane (its sequence). */
void note_reserved(const char *queue, int queue_len, Oid seq_oid);

/*
 * Promise a lane's waiting rows to this worker's next claim (the check found them); false
 * when another worker holds a live promise for it: one that has not expired and that no
 * claim has used yet (the head's xmax is still the one it was made at). Always true when
 * not preloaded.
 */
bool promise_lane(Oid seq_oid, TransactionId head_xmax);

/* Transaction end: release its reservations; its wake-ups go out once its locks are released. */
void wakeup_at_xact_end(bool committed);

/* PREPARE TRANSACTION: forget this transaction's wake-ups (a prepared claim relays none). */
void wakeup_at_prepare();

/* _PG_init: register the resource-release callback that delivers a transaction's wake-ups. */
void init_wakeup_hooks();

/* shmem_request_hook: request the shared memory of the wake slots, sleepers and NOTIFY stamps. */
void wakeup_shmem_request();

/* shmem_startup_hook: claim them by name ("awa_shard wakeup"), initialising them once. */
void wakeup_shmem_startup();

} // namespace awa
