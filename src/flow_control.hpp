/*
 * flow_control.hpp — a queue's rate and concurrency limits as claims see them
 * (flow_control.cpp): cached per backend until awa.queue_meta changes, and the claim's
 * share of them (docs/design.md §4, "Flow control").
 */
#pragma once

#include "direct_drain.hpp"

extern "C"
{
#include "postgres.h"
#include "executor/spi.h"
}

namespace awa
{

struct KeyPlaces; /* direct_key_places.hpp */

/*
 * What a claim's per-key step kept of the lane it looked at last, for that lane's drain and
 * record (palloc'd, in the claim's memory context).
 */
struct KeyStep
{
	LaneWindow *window; /* the lane's window as read (the direct drain takes its rows), or nullptr */
	KeyPlaces *places;	/* the keys' places the count found (the record fills them), or nullptr */
};

/* The limits of one queue (awa.queue_meta; no row: none). */
struct QueueLimits
{
	bool rate;
	double per_second;
	int burst;
	bool concurrency;
	int concurrency_limit;
	bool key_concurrency; /* a cap on the running attempts of each concurrency key */
	int key_concurrency_limit;
	bool key_rate; /* a rate limit of each concurrency key */
	double key_per_second;
	int key_burst;
};

/* The tokens a claim took for the keyed jobs of its window (key_rate_room): jobs [0, n). */
struct KeyTokens
{
	text **keys; /* the window's keys in lane order (nullptr: a job without one) */
	int64 n;
};

/*
 * The limits of a queue of the 1.1 catalog: from the backend's cache while queue_meta has not
 * changed (preloaded: no statement at all), else read on the latest committed state. SPI
 * must be connected.
 */
void queue_limits(const char *queue, int queue_len, QueueLimits *out);

/* Forget cached limits (own-transaction change of queue_meta). */
void forget_queue_limits();

/*
 * How many of `want` attempts a claim of a queue with a concurrency limit may start (0 and
 * up): takes the queue's limit lock (held until the transaction's PRE_COMMIT or its end, so
 * claims of the queue follow one another), then counts its running attempts on the latest
 * committed state, once the claims past PRE_COMMIT are visible, unless the queue's bound of
 * them (running_bound.hpp) leaves room for `want`. SPI must be connected.
 */
int64 concurrency_room(text *queue, int limit, int64 want);

/* Of the attempts concurrency_room granted, `unstarted` were not started (the lane held fewer). */
void concurrency_give_back(text *queue, int64 unstarted);

/*
 * With a per-key limit: how many rows of a lane's window, from its start, a claim holding
 * the lane's head may take so that no key runs more than `limit` attempts. The window is the
 * drain's: the first `max_batch` rows of the lane in [claim_seq, bound) of the live ready
 * slots (*seen: how many). The claim takes the lock of each key of the window in turn (to
 * the end of the transaction; tried, never waited for), up to the first key another claim
 * holds or a 33rd key; then it counts those keys' running attempts on the latest committed
 * state and stops before the first job whose key is at its cap. 0 with *seen > 0: the lane
 * begins with a job whose key is at its cap or busy (pass the lane over). *step keeps the
 * window as read (for the drain) and what the count found of the keys' places (for
 * record_key_attempts after the drain of this lane). SPI must be connected.
 */
int64 key_window_room(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
					  int64 max_batch, int limit, int64 *seen, KeyStep *step);

/*
 * Take the locks a claim tries for each of the keys (NULL elements passed over) of the
 * queue, waiting for each in turn, held to the end of the transaction: a change of the
 * per-key limit waits for the claims of those keys in progress, and claims of them wait for
 * nothing (they only try the locks) until it commits.
 */
void lock_concurrency_keys(text *queue, const Datum *keys, const bool *nulls, int n);

/*
 * With a per-key rate limit: how many rows of a lane's window, from its start, a claim
 * holding the lane's head may take: one token from each keyed row's bucket, in lane order,
 * up to the first row whose key has no whole token (rate_take_keys). The window is the
 * drain's first `max_batch` rows (*seen: how many). 0 with *seen > 0: the lane begins with
 * a job whose key has no token (pass the lane over). *taken records the tokens, for
 * key_rate_give_back; step->window keeps the window as read (for the drain). SPI must be
 * connected.
 */
int64 key_rate_room(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
					int64 max_batch, const QueueLimits &limits, int64 *seen, KeyTokens *taken, KeyStep *step);

/* Give back the tokens of the jobs of *taken past the first `handed_out` (the drain's count). */
void key_rate_give_back(text *queue, const QueueLimits &limits, KeyTokens *taken, int64 handed_out);

/*
 * The attempts a drain statement started, from its n result rows (claim_sql.hpp,
 * AWA_DRAIN_RESULT), every one without its key (record_key_attempts reads it from the
 * ready row), palloc'd; read before another statement replaces SPI_tuptable.
 */
KeyedAttempt *drained_attempts(SPITupleTable *rows, uint64 n);

/*
 * Record in awa.key_attempts the attempts of keyed jobs a claim of a queue with a per-key
 * limit has just started in the lane (priority, shard), each attempt whose ready row has a
 * key in a place of that key: a free one the count found (updated in place), else a new one.
 * When every attempt carries its ready row's key (the direct drain's) and the count was
 * direct, through the executor's routines (direct_key_places.cpp); otherwise, or where those
 * step aside, by one statement that reads each key from the ready row and tests the keys'
 * places again (on the rings' live arcs read now). SPI must be connected.
 */
void record_key_attempts(text *queue, int16 priority, int16 shard, const KeyedAttempt *attempts, int n,
						 KeyPlaces *places);

/*
 * A claim of the queue returned nothing because every lane it could take began with a job
 * whose key was at its cap: wait_for_jobs then polls (limits_hold_ms) instead of reporting
 * work this backend's claim cannot take.
 */
void note_key_capped(text *queue);

/*
 * For awa.wait_for_jobs: 0 when the queue's limits let a claim take a job now; else the
 * milliseconds to sleep before looking again (until the rate's next token; a fixed poll
 * while the queue is at its concurrency cap, since an exit wakes no sleeper). Connects to SPI
 * itself.
 */
long limits_hold_ms(text *queue);

} // namespace awa
