/*
 * key_places_memo.cpp — the places of a key remembered in shared memory (docs/design.md §4,
 * "Flow control", "Places remembered").
 *
 * A claim of a queue with a per-key concurrency limit counts each key of its window under the
 * key's lock (flow_control.cpp): it finds the key's places in awa.key_attempts by the primary
 * key (an index descent and a heap fetch per place) and tests each place's attempt. Every
 * write of a key's places is made under the same lock (a claim's record, set_concurrency_limit
 * after waiting for it), so the claim that holds the lock knows, once it has read them, the
 * key's places exactly, and a claim that then writes them knows what it left. Both are kept
 * here, one entry per key (direct-mapped by a 128-bit hash of database, queue and key), so the
 * next holder of the key's lock takes the places from memory:
 *  - a count that read a key's places from the table remembers them (memo_fill);
 *  - a record that wrote them publishes the places it left when it commits, after the commit
 *    is visible and before its locks are released (memo_note_recorded, XACT_EVENT_COMMIT);
 *    rolled back (a savepoint included) or prepared, it forgets the key instead;
 *  - a statement that wrote places of a queue (the record statement where the direct record
 *    steps aside) moves the queue's epoch on at commit: all its entries are forgotten.
 * An entry is used only under the basis it was made under: the table's file (TRUNCATE,
 * VACUUM FULL), the queue_meta stamp (set_concurrency_limit and its removal, drop_queue: they
 * change queue_meta, and their commit moves the stamp before their locks go), the queue's
 * epoch, and for at most kTrust. What no lock orders can only make an entry hold more than the
 * table: the maintenance's awa.prune_key_places deletes places whose attempt ended, which the
 * count finds ended anyway, and the record checks each remembered place's row version before
 * it writes it. A transaction that wrote awa.key_attempts or queue_meta itself counts from the
 * table (its own writes are not published yet). Without the preload nothing is remembered.
 */
#include "key_places_memo.hpp"
#include "module.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"
}

#include <cstring>

namespace awa
{

namespace
{

/* Remembered keys: sets of two entries, a key in one of its set's (the older one is replaced). */
constexpr int kSets = 4096;
constexpr int kWays = 2;
/* Queue epochs (direct-mapped by database and queue: queues sharing one move together). */
constexpr int kEpochs = 1024;
/* How long an entry is trusted: the bound on what a write by hand to awa.key_attempts hides. */
constexpr long kTrustMs = 30 * 1000;
/* Keys one transaction publishes at most (more: the queue's epoch moves instead). */
constexpr int kPending = 256;
/* Queues whose epoch one transaction moves at most (more: every epoch moves). */
constexpr int kPendingQueues = 16;

/* A key's identity: 128 bits of hash over database, queue and key. */
struct KeyId
{
	std::uint64_t lo;
	std::uint64_t hi;
};

/* A remembered key: its identity and basis, when it was made, and its places. */
struct Entry
{
	bool valid;
	Oid db;
	Oid relfile;
	std::uint64_t stamp;
	std::uint64_t epoch;
	KeyId id;
	TimestampTz made;
	int n;
	RememberedPlace place[kRememberedPlaces];
};

/* A set of entries under its spinlock. */
struct Set
{
	slock_t lock;
	Entry way[kWays];
};

/* Shared: the entries and the queues' epochs. */
struct Memo
{
	pg_atomic_uint64 epoch[kEpochs];
	Set set[kSets];
};

Memo *memo = nullptr;

/* A key this transaction's record wrote: what to publish (or, `forget`, to clear) at commit. */
struct Pending
{
	KeyId id;
	MemoBasis basis;
	SubTransactionId subid;
	bool forget;
	int n;
	RememberedPlace place[kRememberedPlaces];
};

Pending pending[kPending];
int npending = 0;
/* Queues (their epoch index) whose epoch moves at commit; all_epochs: every one. */
int moved_queues[kPendingQueues];
int nmoved = 0;
bool all_epochs = false;

/* The seeds of the queue's keys' identities: (this database, queue) hashed two ways. */
void
queue_seeds(text *queue, std::uint64_t seed[2])
{
	const std::uint64_t salt[2] = {0x6177615f6b657931ULL, 0x6177615f6b657932ULL};

	for (int s = 0; s < 2; s++)
		seed[s] = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)),
									  VARSIZE_ANY_EXHDR(queue), hash_bytes_uint32_extended(MyDatabaseId, salt[s]));
}

/* The identity of (this database, queue, key), from the queue's seeds. */
KeyId
key_id(const std::uint64_t seed[2], text *key)
{
	const unsigned char *bytes = reinterpret_cast<const unsigned char *>(VARDATA_ANY(key));
	int len = VARSIZE_ANY_EXHDR(key);

	return {hash_bytes_extended(bytes, len, seed[0]), hash_bytes_extended(bytes, len, seed[1])};
}

/* The identity of (this database, queue, key). */
KeyId
key_id(text *queue, text *key)
{
	std::uint64_t seed[2];

	queue_seeds(queue, seed);
	return key_id(seed, key);
}

/* The epoch index of (this database, queue). */
int
epoch_index(text *queue)
{
	std::uint64_t h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)),
										  VARSIZE_ANY_EXHDR(queue), MyDatabaseId);

	return static_cast<int>(h % kEpochs);
}

/* The set of a key. */
Set &
set_of(const KeyId &id)
{
	return memo->set[id.lo % kSets];
}

/*
 * Start loading into the cache a set's lock and the head of each of its entries, so that a
 * loop over several keys overlaps their misses (a transaction's keys fall in sets far apart).
 */
void
prefetch_set(const Set &set)
{
	__builtin_prefetch(&set.lock, 1);
	for (const Entry &e : set.way)
		__builtin_prefetch(&e.id, 0);
}

/* Whether an entry is the key's (under its set's lock). */
bool
is_key(const Entry &e, const KeyId &id)
{
	return e.valid && e.db == MyDatabaseId && e.id.lo == id.lo && e.id.hi == id.hi;
}

/* Store places under a basis in the key's entry, else the set's oldest (the caller holds the key's lock). */
void
store(const KeyId &id, const MemoBasis &basis, const RememberedPlace *places, int n, TimestampTz made)
{
	Set &set = set_of(id);
	int w = 0;

	SpinLockAcquire(&set.lock);
	while (w < kWays && !is_key(set.way[w], id))
		w++;
	if (w == kWays)
	{
		w = 0;
		for (int v = 1; v < kWays; v++)
			if (!set.way[v].valid || (set.way[w].valid && set.way[v].made < set.way[w].made))
				w = v;
	}
	Entry &e = set.way[w];
	e.valid = true;
	e.db = MyDatabaseId;
	e.relfile = basis.relfile;
	e.stamp = basis.stamp;
	e.epoch = basis.epoch;
	e.id = id;
	e.made = made;
	e.n = n;
	memcpy(e.place, places, sizeof(RememberedPlace) * n);
	SpinLockRelease(&set.lock);
}

/* Clear the key's entry, if it has one. */
void
forget(const KeyId &id)
{
	Set &set = set_of(id);

	SpinLockAcquire(&set.lock);
	for (Entry &e : set.way)
		if (is_key(e, id))
			e.valid = false;
	SpinLockRelease(&set.lock);
}

/* Subtransaction end: the keys a rolled-back savepoint wrote are forgotten at commit, not published. */
void
on_memo_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (int i = 0; i < npending; i++)
		if (pending[i].subid >= my_subid)
			pending[i].forget = true;
}

/* Move the queue's epoch at commit (every epoch when too many queues). */
void
note_moved(int index)
{
	for (int i = 0; i < nmoved; i++)
		if (moved_queues[i] == index)
			return;
	if (nmoved == kPendingQueues)
		all_epochs = true;
	else
		moved_queues[nmoved++] = index;
}

/* Move the noted epochs. */
void
move_epochs()
{
	if (all_epochs)
		for (pg_atomic_uint64 &e : memo->epoch)
			pg_atomic_fetch_add_u64(&e, 1);
	else
		for (int i = 0; i < nmoved; i++)
			pg_atomic_fetch_add_u64(&memo->epoch[moved_queues[i]], 1);
}

/* Forget this transaction's notes. */
void
reset_pending()
{
	npending = 0;
	nmoved = 0;
	all_epochs = false;
}

} // namespace

/* The basis of a count, read now (key_places_memo.hpp). */
MemoBasis
memo_basis(Relation rel, text *queue)
{
	MemoBasis b = {};
	PgStat_TableStatus *stats;

	if (memo == nullptr || !pgstat_track_counts || rel->rd_createSubid != InvalidSubTransactionId ||
		rel->rd_firstRelfilenodeSubid != InvalidSubTransactionId)
		return b; /* the table's file is this transaction's */
	b.stamp = queue_meta_stamp();
	if ((b.stamp & 1) != 0)
		return b; /* queue_meta changed by this transaction */
	stats = find_tabstat_entry(RelationGetRelid(rel));
	if (stats != nullptr && stats->trans != nullptr)
		return b; /* awa.key_attempts written by this transaction */
	b.relfile = rel->rd_node.relNode;
	b.epoch = pg_atomic_read_u64(&memo->epoch[epoch_index(queue)]);
	b.now = GetCurrentTimestamp();
	queue_seeds(queue, b.seed);
	b.usable = true;
	return b;
}

/* The key's remembered places (key_places_memo.hpp). */
bool
memo_lookup(const MemoBasis &basis, text *key, RememberedPlace *out, int *n)
{
	KeyId id;
	bool hit = false;

	if (!basis.usable)
		return false;
	id = key_id(basis.seed, key);
	Set &set = set_of(id);
	SpinLockAcquire(&set.lock);
	for (const Entry &e : set.way)
		if (!hit && is_key(e, id) && e.relfile == basis.relfile && e.stamp == basis.stamp && e.epoch == basis.epoch &&
			!TimestampDifferenceExceeds(e.made, basis.now, static_cast<int>(kTrustMs)))
		{
			hit = true;
			*n = e.n;
			memcpy(out, e.place, sizeof(RememberedPlace) * e.n);
		}
	SpinLockRelease(&set.lock);
	return hit;
}

/* Start loading the keys' sets into the cache (key_places_memo.hpp). */
void
memo_prefetch(const MemoBasis &basis, const Datum *keys, int n)
{
	if (!basis.usable)
		return;
	for (int k = 0; k < n; k++)
		prefetch_set(set_of(key_id(basis.seed, DatumGetTextPP(keys[k]))));
}

/* Remember the places a count read (key_places_memo.hpp). */
void
memo_fill(const MemoBasis &basis, text *key, const RememberedPlace *places, int n)
{
	if (!basis.usable || n > kRememberedPlaces)
		return;
	store(key_id(basis.seed, key), basis, places, n, basis.now);
}

/* Note the places a record left the key with (key_places_memo.hpp). */
void
memo_note_recorded(const MemoBasis &basis, text *queue, text *key, const RememberedPlace *places, int n)
{
	KeyId id;
	Pending *p = nullptr;

	if (memo == nullptr)
		return;
	id = key_id(queue, key);
	for (int i = 0; i < npending && p == nullptr; i++)
		if (pending[i].id.lo == id.lo && pending[i].id.hi == id.hi)
			p = &pending[i];
	if (p == nullptr)
	{
		if (npending == kPending)
		{
			note_moved(epoch_index(queue));
			return;
		}
		p = &pending[npending++];
		p->id = id;
	}
	p->basis = basis;
	p->subid = GetCurrentSubTransactionId();
	p->forget = !basis.usable || n > kRememberedPlaces;
	p->n = p->forget ? 0 : n;
	if (!p->forget)
		memcpy(p->place, places, sizeof(RememberedPlace) * n);
}

/* A statement wrote the queue's places (key_places_memo.hpp). */
void
memo_note_statement_write(text *queue)
{
	if (memo != nullptr)
		note_moved(epoch_index(queue));
}

/* Publish or forget at transaction end (key_places_memo.hpp). */
void
key_places_memo_at_xact_end(bool committed)
{
	if (committed && memo != nullptr)
	{
		TimestampTz now = npending > 0 ? GetCurrentTimestamp() : 0;

		move_epochs();
		for (int i = 0; i < npending; i++)
			prefetch_set(set_of(pending[i].id));
		for (int i = 0; i < npending; i++)
			if (pending[i].forget)
				forget(pending[i].id);
			else
				store(pending[i].id, pending[i].basis, pending[i].place, pending[i].n, now);
	}
	reset_pending();
}

/* Prepare: the keys written are forgotten, the queues noted move (key_places_memo.hpp). */
void
key_places_memo_at_prepare()
{
	if (memo != nullptr)
	{
		move_epochs();
		for (int i = 0; i < npending; i++)
			forget(pending[i].id);
	}
	reset_pending();
}

/* _PG_init: the subtransaction hook (key_places_memo.hpp). */
void
init_key_places_memo_hooks()
{
	RegisterSubXactCallback(on_memo_subxact, nullptr);
}

/* shmem_request_hook: room for the entries and epochs. */
void
key_places_memo_shmem_request()
{
	RequestAddinShmemSpace(sizeof(Memo));
}

/* shmem_startup_hook: claim the entries by name (initialised once, by the postmaster). */
void
key_places_memo_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	memo = static_cast<Memo *>(ShmemInitStruct("awa_shard key places", sizeof(Memo), &found));
	if (!found)
	{
		for (pg_atomic_uint64 &e : memo->epoch)
			pg_atomic_init_u64(&e, 0);
		for (Set &set : memo->set)
		{
			SpinLockInit(&set.lock);
			for (Entry &e : set.way)
				e.valid = false;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
