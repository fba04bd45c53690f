/*
 * key_places_memo.hpp — the places of a key in awa.key_attempts, remembered in shared memory
 * by the claims that read and wrote them, so that the next claim of the key counts them
 * without probing the table (key_places_memo.cpp; docs/design.md §4, "Flow control").
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
}

#include <cstdint>

namespace awa
{

/* Keys with more places than this are not remembered (their claims probe the table). */
constexpr int kRememberedPlaces = 8;

/* One place of a key as its row version holds it: number, version, and the attempt recorded. */
struct RememberedPlace
{
	int32 place;
	ItemPointerData tid;
	TransactionId xmin;
	int16 priority;
	int16 enqueue_shard;
	bool has_claim_slot;
	int32 ready_slot;
	int32 claim_slot;
	int64 lane_seq;
	int64 ready_generation;
	int64 job_id;
	int64 run_lease;
};

/*
 * What the remembered places of a count are valid under, read before the count's snapshot:
 * the table's file, the queue_meta stamp and the queue's epoch, and the time. `usable` is false when
 * nothing may be remembered or used: not preloaded, queue_meta or awa.key_attempts changed by
 * this transaction, or statistics counting off (the table's changes in this transaction are
 * seen through them).
 */
struct MemoBasis
{
	bool usable;
	Oid relfile;
	std::uint64_t stamp;
	std::uint64_t epoch;
	TimestampTz now;
	std::uint64_t seed[2]; /* the queue's part of its keys' identities */
};

/* The basis of a count of the queue's keys in `rel` (awa.key_attempts), read now. */
MemoBasis memo_basis(Relation rel, text *queue);

/*
 * The remembered places of the basis' queue's key (at most kRememberedPlaces, into out[], their number into
 * *n), when they were remembered under `basis` less than a while ago. The caller holds the
 * key's lock: every claim of the key that held it before has published what it wrote.
 */
bool memo_lookup(const MemoBasis &basis, text *key, RememberedPlace *out, int *n);

/*
 * Start loading into the cache the sets memo_lookup will read for these keys, so that their
 * misses overlap instead of following one another: a claim's keys fall in sets far apart.
 */
void memo_prefetch(const MemoBasis &basis, const Datum *keys, int n);

/* Remember the places of the basis' queue's key a count read from the table under the key's lock (n may be 0). */
void memo_fill(const MemoBasis &basis, text *key, const RememberedPlace *places, int n);

/*
 * This transaction's record left the key with exactly these places (n > kRememberedPlaces:
 * forget the key): published when it commits; a savepoint rolled back or a prepare forgets
 * the key instead.
 */
void memo_note_recorded(const MemoBasis &basis, text *queue, text *key, const RememberedPlace *places, int n);

/* A statement wrote places of the queue: everything remembered of it is forgotten at commit (or prepare). */
void memo_note_statement_write(text *queue);

/* Transaction end: commit publishes; abort forgets; prepare forgets the keys written. Never raises. */
void key_places_memo_at_xact_end(bool committed);
void key_places_memo_at_prepare();

/* _PG_init: the subtransaction hook. */
void init_key_places_memo_hooks();

/* shmem_request_hook / shmem_startup_hook of the remembered places. */
void key_places_memo_shmem_request();
void key_places_memo_shmem_startup();

} // namespace awa
