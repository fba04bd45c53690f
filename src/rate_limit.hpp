/*
 * rate_limit.hpp — the token buckets of queue rate limits (rate_limit.cpp), one per
 * (database, queue) in shared memory, shared by every claim of the server.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "commands/trigger.h"
}

namespace awa
{

/* Whether the buckets exist (the library was preloaded). */
bool rate_limits_available();

/*
 * Take up to `want` tokens from the queue's bucket (rate per second, bucket size burst),
 * refilled for the time since it was last used; returns how many it took (0..want). A
 * bucket seen for the first time starts full. Raises 55000 without shared memory and
 * 53000 when the bucket table is full of buckets still in use.
 */
int64 rate_take(const char *queue, int queue_len, double per_second, int burst, int64 want);

/*
 * Milliseconds until the queue's bucket holds a whole token (0: it holds one now, or has no
 * bucket yet, which starts full). Takes nothing.
 */
long rate_wait_ms(const char *queue, int queue_len, double per_second, int burst);

/* Put back tokens a claim took and did not hand out (its drain found fewer jobs). */
void rate_give_back(const char *queue, int queue_len, double per_second, int burst, int64 n);

/*
 * A per-key rate limit: take one token from the bucket of each keyed job of a window (keys:
 * the jobs' concurrency keys in lane order, nullptr for a job without one), in order, up to
 * the first job whose key's bucket holds no whole token or has no room in the table; returns
 * how many jobs, from the window's start, may go. Raises 55000 without shared memory.
 */
int64 rate_take_keys(const char *queue, int queue_len, text *const *keys, int64 n, double per_second, int burst);

/* Put back the tokens rate_take_keys took for the jobs [from, n) of its window (not handed out). */
void rate_give_back_keys(const char *queue, int queue_len, text *const *keys, int64 from, int64 n, double per_second,
						 int burst);

/*
 * The row trigger of awa.queue_meta (and its TRUNCATE): note what the change does to the
 * queue's buckets when this transaction commits. A row deleted (drop_queue) or a limit
 * removed forgets them, so that a queue created again under its name, or a limit set again,
 * starts full; a limit set or changed becomes the one they hold to. A savepoint rolled back
 * takes its changes with it (preloaded, a transaction that changed queue_meta cannot be
 * prepared: module.cpp).
 */
void rate_limit_row_changed(TriggerData *trigdata);
/* _PG_init: register the subtransaction hook of the changes. */
void init_rate_limit_hooks();

/* Transaction end: apply (commit) or discard the changes of this transaction. */
void rate_limit_at_xact_end(bool committed);

/* shmem_request_hook: room for the buckets and their lock. */
void rate_limit_shmem_request();

/* shmem_startup_hook: claim the buckets by name ("awa_shard rate limits"), once. */
void rate_limit_shmem_startup();

} // namespace awa
