/*
 * running_bound.hpp — an upper bound of a queue's running attempts, kept in shared memory by
 * the claims of queues with a concurrency limit, so that a claim the bound leaves room for
 * counts nothing (running_bound.cpp; docs/design.md §4, "Flow control").
 */
#pragma once

#include <cstdint>

extern "C"
{
#include "postgres.h"
#include "storage/lock.h"
#include "utils/snapshot.h"
}

namespace awa
{

/*
 * The caller holds the queue's limit lock. True, with *bound, when a bound of the queue's
 * running attempts is known (this transaction's own claims of the queue included) and young
 * enough to trust; false when the claim must count. *exact: the bound is what a count would
 * find now (every exit since the count it started from taken off, none pending), so the
 * claim may take the room it leaves, however little, without counting. A claim that cannot
 * be followed makes the queue's bound unknown at once. SPI must be connected.
 */
bool running_bound_lookup(text *queue, std::int64_t *bound, bool *exact);

/*
 * What a count can be exact under, read before its snapshot: the epoch of exact bounds (0:
 * none can be, a prepared transaction that ended attempts is in progress) and the queue's
 * exit counter then.
 */
struct RunningCountTicket
{
	std::uint64_t epoch;
	bool owned; /* the queue had an entry */
	std::uint64_t gen;
	std::uint64_t exits;
	std::uint64_t forgets; /* the entry's forget sequence */
};

/* The ticket of a count about to be made, under the queue's limit lock. SPI must be connected. */
RunningCountTicket running_bound_count_ticket(text *queue);

/*
 * The caller holds the queue's limit lock and counted `running` attempts on the latest
 * committed state under `snapshot` (nullptr: not known; the bound is then not exact), with
 * `ticket` read before the snapshot was taken. Returns the running attempts now: the count
 * less the exits that committed after its snapshot and have taken themselves off already.
 */
std::int64_t running_bound_counted(text *queue, std::int64_t running, const RunningCountTicket &ticket,
								   Snapshot snapshot);

/* The caller holds the queue's limit lock and may start `n` more attempts (n < 0: gives back unstarted ones). */
void running_bound_started(text *queue, std::int64_t n);

/*
 * The claim holds the queue's limit lock `lock` (taken once in the transaction). When its
 * bound is followed, the lock is released at PRE_COMMIT, once the bound is published, and
 * the transaction is listed as committing until its commit is visible or it aborts (an
 * abort after PRE_COMMIT forgets the bound); otherwise it is held to the end.
 */
void running_bound_hold_lock(text *queue, const LOCKTAG *lock);

/*
 * Under the queue's limit lock, before a count: wait for the claims that released the lock
 * at PRE_COMMIT and whose commit is not visible yet, so that the count sees their attempts.
 */
void running_bound_wait_committing(text *queue);

/*
 * A claim of the queue read no concurrency limit, with the queue_meta stamp read before
 * (stamp_before): if the stamp has moved when this transaction commits (a limit may have been
 * set meanwhile), the queue's bound is forgotten once the commit is visible.
 */
void running_bound_note_unlimited(text *queue, std::uint64_t stamp_before);

/* An attempt of the queue ends in this transaction (every exit path; key_caps.cpp). */
void running_bound_note_exit(text *queue);

/* This transaction ends attempts it does not name (purge, drop): no bound made before its commit stays exact. */
void running_bound_note_exits_unknown();

/*
 * Whether this transaction claimed a queue that had no concurrency limit (its attempts may
 * escape a limit set meanwhile): a prepare of it is followed as one that ends attempts.
 */
bool running_bound_claimed_unlimited();

/*
 * Without the limit lock: whether the queue is at its cap by an exact bound (at least `limit`
 * running, every exit since its count taken off), so that a claim takes nothing and need not
 * wait for the lock. False when this transaction follows the queue (it claimed it already) or
 * ended attempts of it, or no exact bound is known: the claim then takes the lock.
 */
bool running_bound_at_cap(text *queue, int limit);

/* Without a lock: a bound of the queue's running attempts, when one is known and trusted (a hint only). */
bool running_bound_peek(text *queue, std::int64_t *bound);

/*
 * PRE_COMMIT: this transaction's exits of queues with a bound count as pending until they are
 * added; its claims' bounds are published and their limit locks released. Never raises.
 */
void running_bound_at_pre_commit();

/*
 * Transaction end: a commit publishes each followed queue's bound not published at
 * PRE_COMMIT (after the commit is visible, before the limit locks go), then adds its exits;
 * an abort publishes nothing, and forgets the bounds it published at PRE_COMMIT. Never raises.
 */
void running_bound_at_xact_end(bool committed);

/* Prepare: the followed queues' bounds become unknown (the claims commit elsewhere). Never raises. */
void running_bound_at_prepare();

/* _PG_init: the subtransaction hook. */
void init_running_bound_hooks();

/* shmem_request_hook / shmem_startup_hook of the bounds. */
void running_bound_shmem_request();
void running_bound_shmem_startup();

} // namespace awa
