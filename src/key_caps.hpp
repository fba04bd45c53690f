/*
 * key_caps.hpp — a backend's memory of lanes its claims passed over because the job at the
 * lane's head has a concurrency key at its per-key cap (key_caps.cpp), and the attempt exits
 * that end that memory: every path that ends an attempt marks it, and its commit stamps the
 * attempt's slot in shared memory ("awa_shard attempt exits").
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

#include <cstdint>

namespace awa
{

/* How many running attempts of a capped key the memory follows (a key with more is counted each time). */
constexpr int kMaxCapWitnesses = 64;

/* The running attempts of the key at a lane's head, found by the count that put it at its cap. */
struct CapWitness
{
	int n;
	bool complete; /* false: the count could not name them all (statement, or more than kMaxCapWitnesses) */
	int64 job_id[kMaxCapWitnesses];
};

/*
 * Remember that this transaction ended the attempt (job_id, run_lease) of `queue` (nullptr:
 * not known): its slot is stamped at commit, and its place, when this backend recorded it,
 * is published (ended_places.cpp).
 */
void note_attempt_ended(int64 job_id, int64 run_lease, text *queue);

/* Remember that this transaction ended attempts it does not name (purge, drop): every memory ends at commit. */
void note_attempts_ended_all();

/* Whether this transaction has ended attempts (an exit of any kind), rolled back to a savepoint or not. */
bool attempts_ended_in_xact();

/*
 * The exit sequence now, read before the snapshot of a count whose result may be
 * remembered; 0 when nothing may be remembered (not preloaded, or a prepared transaction
 * that ended attempts is in progress).
 */
std::uint64_t attempt_exit_seq();

/*
 * Whether a prepared transaction that ended attempts may be in progress (its COMMIT PREPARED
 * tells no memory): then no count is exact. SPI must be connected.
 */
bool prepared_exits_pending();

/*
 * Remember that the lane (queue, priority, shard) with its cursor at claim_seq begins with
 * the row first_seq, whose key is at its cap `limit` with the witnessed running attempts, as
 * a count taken after reading `seq` found it. Nothing is remembered when seq is 0, the
 * witness is incomplete or first_seq is unknown (< 0).
 */
void remember_capped_lane(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 first_seq, int limit,
						  std::uint64_t seq, const CapWitness &witness);

/*
 * Whether the locked lane is one this backend remembers at a key's cap and still is: same
 * cursor, same limit, same first row (read now, on the latest committed state), no witnessed
 * attempt ended since the count, and not older than kCapMemoryMs. The claim then passes it
 * over without taking the key's lock or counting. SPI must be connected.
 */
bool lane_still_capped(text *queue, int16 priority, int16 shard, int64 claim_seq, int64 bound, const int *slot_ranges,
					   int limit);

/* PRE_COMMIT: count this transaction's ended attempts as pending in their slots until they are stamped. */
void key_caps_at_pre_commit();

/* Transaction end: at commit stamp the ended attempts' slots; at abort forget the remembered lanes. Never raises. */
void key_caps_at_xact_end(bool committed);

/*
 * Before PREPARE: a prepared transaction that ended attempts commits where no stamp
 * follows; its id is kept, and nothing is remembered while it is in progress. May raise.
 */
void key_caps_at_pre_prepare();

/* PREPARE: forget this session's marks and remembered lanes. Never raises. */
void key_caps_at_prepare();

/* _PG_init: the subtransaction hook (a savepoint rolled back forgets the remembered lanes). */
void init_key_caps_hooks();

/* shmem_request_hook: request the exit stamps' shared memory. */
void key_caps_shmem_request();

/* shmem_startup_hook: claim it by name ("awa_shard attempt exits"), initialising it once. */
void key_caps_shmem_startup();

} // namespace awa
