/*
 * ended_places.cpp — row versions of awa.key_attempts whose attempt is known to have ended
 * (docs/design.md §4, "Flow control").
 *
 * A claim of a queue with a per-key concurrency limit counts each key's running attempts: it
 * finds the key's places in awa.key_attempts and tests each place's attempt for an open
 * receipt (direct_key_places.cpp), which reads the ready row, the claim batch and the
 * terminal rows on the rings' partitions. In the steady state almost every place it meets
 * names an attempt that ended long ago, and a worker usually ends the attempts it claimed.
 * So the backend that records an attempt in a place remembers the place's new row version
 * (relation file, tid, and its own transaction id, the version's xmin) with the attempt
 * (job id, run_lease, a hash of the queue), and publishes the pair in shared memory when its
 * record commits; a backend that commits the end of that attempt of that queue (the one that
 * recorded it, or any other: a worker behind a connection pool ends its attempts from
 * another backend than the one that claimed them) finds the version in its own memory or in
 * the shared one and publishes the whole as ended. A count that finds a place whose version
 * and attempt are exactly those knows its attempt has ended and passes the place as free
 * without testing it.
 *
 * Exact: neither half is enough alone (a second TRUNCATE in one transaction keeps the file,
 * so a new place can take an old one's tid with the same xmin; a job id can repeat in another
 * queue once the id sequence is set back), but a version that holds the attempt is that
 * attempt's place, and an end is published only once its
 * commit is visible (XACT_EVENT_COMMIT), never for a savepoint rolled back or a transaction
 * prepared (the count then tests, as before); a record is shared only at its COMMIT, once
 * visible (a record rolled back, to a savepoint too, or prepared, is not). Everything else
 * only costs a miss: an end committed before the record it ends was shared, a version
 * overwritten in the backend's memory or in shared memory, a server without the preload
 * (nothing is shared). Exits look in shared memory only for queues whose hash has a bit in
 * the map of queues that ever recorded a place (none on a server where no claim did).
 */
#include "ended_places.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "storage/lwlock.h"
}

namespace awa
{

namespace
{

/* Published versions, in sets of kWays: a version goes to one set, where the oldest is replaced. */
constexpr int kPublished = 65536;
constexpr int kWays = 4;
constexpr int kSets = kPublished / kWays;
/* Spinlocks over the published sets (set i under lock i % kStripes). */
constexpr int kStripes = 64;
/* Places a backend remembers recording (in sets of kWays chosen by attempt); kShared shared ones. */
constexpr int kRecorded = 4096;
/* Ended places one transaction publishes at most (more: the rest are tested as before). */
constexpr int kPending = 1024;
constexpr int kShared = 65536;

/*
 * A row version of awa.key_attempts in a database and the attempt it records: the version
 * names the row, the attempt (job, run_lease, a hash of its queue) what it holds, so that
 * neither a reused tid and xmin (a second TRUNCATE in one transaction keeps the file) nor a
 * job id that repeats (in another queue, or after the id sequence was set back) passes.
 */
struct PlaceVersion
{
	Oid db; /* InvalidOid: an empty entry */
	Oid relfile;
	ItemPointerData tid;
	TransactionId xmin;
	uint32 queue_hash;
	int64 job_id;
	int64 run_lease;
};

/* A set of versions, and the way its next version replaces (the oldest). */
struct VersionSet
{
	PlaceVersion way[kWays];
	uint32 next;
};

/* Shared: the published versions, the committed records, the queues that recorded places. */
struct EndedPlaces
{
	slock_t stripe[kStripes];
	VersionSet set[kSets];
	slock_t record_stripe[kStripes];
	VersionSet record[kShared / kWays];
	pg_atomic_uint64 recording_queues; /* bit (queue hash % 64): a place of such a queue was recorded */
};

EndedPlaces *shared_ended = nullptr;

/* The places this backend recorded: the version it wrote, with its attempt. */
VersionSet recorded[kRecorded / kWays];
/* Whether this backend has recorded a place: until then an exit looks nothing up. */
bool recorded_any = false;

/* Ends this transaction noted, with the subtransaction that noted each. */
struct PendingEnd
{
	PlaceVersion version;
	SubTransactionId subid;
};

PendingEnd pending[kPending];
int npending = 0;
/* Records this transaction made, shared at its commit (the version with its attempt). */
PendingEnd pending_records[kPending];
int npending_records = 0;

/* The hash that names a queue in a version. */
uint32
queue_hash_of(text *queue)
{
	return hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)), VARSIZE_ANY_EXHDR(queue));
}

/* The hash of an attempt, which chooses its set in `recorded` and among the shared records. */
uint32
attempt_hash(int64 job_id, int64 run_lease, uint32 queue_hash)
{
	int64 key[3] = {job_id, run_lease, queue_hash};

	return hash_bytes(reinterpret_cast<const unsigned char *>(key), sizeof(key));
}

/* The set of an attempt in `recorded`. */
VersionSet &
recorded_set(int64 job_id, int64 run_lease, uint32 queue_hash)
{
	return recorded[attempt_hash(job_id, run_lease, queue_hash) % (kRecorded / kWays)];
}

/* The bit of a queue in the map of queues that recorded places. */
uint64
queue_bit(uint32 queue_hash)
{
	return UINT64CONST(1) << (queue_hash % 64);
}

/* The set of a version in the published table (every field hashed, no padding). */
int
published_set(const PlaceVersion &v)
{
	int64 key[7] = {v.db,
					v.relfile,
					ItemPointerGetBlockNumberNoCheck(&v.tid),
					ItemPointerGetOffsetNumberNoCheck(&v.tid),
					v.xmin,
					v.job_id ^ (static_cast<int64>(v.queue_hash) << 32),
					v.run_lease};

	return static_cast<int>(hash_bytes(reinterpret_cast<const unsigned char *>(key), sizeof(key)) % kSets);
}

/* Whether two versions are the same. */
bool
same_version(const PlaceVersion &a, const PlaceVersion &b)
{
	return a.db == b.db && a.relfile == b.relfile && a.xmin == b.xmin && a.queue_hash == b.queue_hash &&
		   a.job_id == b.job_id && a.run_lease == b.run_lease &&
		   ItemPointerGetBlockNumberNoCheck(&a.tid) == ItemPointerGetBlockNumberNoCheck(&b.tid) &&
		   ItemPointerGetOffsetNumberNoCheck(&a.tid) == ItemPointerGetOffsetNumberNoCheck(&b.tid);
}

/* Whether two versions hold the same attempt of the same database. */
bool
same_attempt(const PlaceVersion &a, const PlaceVersion &b)
{
	return a.db == b.db && a.queue_hash == b.queue_hash && a.job_id == b.job_id && a.run_lease == b.run_lease;
}

/*
 * Put a version in its set (the shared ones under the set's lock): over the way that `same`
 * matches, else over the oldest. Sets rather than one entry per version: a count meets a
 * version long after its publication (the key's next claim), and with one entry per version
 * about one in sixty-five of a thousand keys' versions was overwritten by then, each miss
 * costing a test.
 */
void
put_in(VersionSet &set, const PlaceVersion &v, bool (*same)(const PlaceVersion &, const PlaceVersion &))
{
	for (PlaceVersion &w : set.way)
		if (same(w, v))
		{
			w = v;
			return;
		}
	set.way[set.next % kWays] = v;
	set.next++;
}

/* Subtransaction end: a savepoint rolled back takes back the ends noted in it and below it. */
void
on_ended_places_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	int kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (int i = 0; i < npending; i++)
		if (pending[i].subid < my_subid)
			pending[kept++] = pending[i];
	npending = kept;
	kept = 0;
	for (int i = 0; i < npending_records; i++)
		if (pending_records[i].subid < my_subid)
			pending_records[kept++] = pending_records[i];
	npending_records = kept;
}

/* Note an end of this transaction: the version that holds the attempt `a` ended. */
void
note_end(const PlaceVersion &v)
{
	pending[npending].version = v;
	pending[npending].subid = GetCurrentSubTransactionId();
	npending++;
}

} // namespace

/* Remember the place version a claim wrote for an attempt (ended_places.hpp). */
void
note_place_recorded(int64 job_id, int64 run_lease, text *queue, Oid relfile, ItemPointer tid)
{
	PlaceVersion v;

	if (shared_ended == nullptr)
		return;
	recorded_any = true;
	memset(&v, 0, sizeof(v));
	v.db = MyDatabaseId;
	v.relfile = relfile;
	v.tid = *tid;
	v.xmin = GetCurrentTransactionId();
	v.queue_hash = queue_hash_of(queue);
	v.job_id = job_id;
	v.run_lease = run_lease;
	put_in(recorded_set(job_id, run_lease, v.queue_hash), v, same_attempt);
	if (npending_records < kPending)
	{
		pending_records[npending_records].version = v;
		pending_records[npending_records].subid = GetCurrentSubTransactionId();
		npending_records++;
	}
}

/* Start loading an attempt's set of recorded places into the cache (ended_places.hpp). */
void
prefetch_place_recorded(int64 job_id, int64 run_lease, text *queue)
{
	const VersionSet &set = recorded_set(job_id, run_lease, queue_hash_of(queue));

	if (shared_ended == nullptr)
		return;
	for (std::size_t b = 0; b < sizeof(VersionSet); b += 64)
		__builtin_prefetch(reinterpret_cast<const char *>(&set) + b, 1);
}

/* Note the end of an attempt whose place this backend recorded (ended_places.hpp). */
void
note_place_attempt_ended(int64 job_id, int64 run_lease, text *queue)
{
	PlaceVersion a;
	uint32 i;
	bool found = false;

	if (shared_ended == nullptr || queue == nullptr || npending == kPending ||
		(!recorded_any && pg_atomic_read_u64(&shared_ended->recording_queues) == 0))
		return;
	memset(&a, 0, sizeof(a));
	a.db = MyDatabaseId;
	a.queue_hash = queue_hash_of(queue);
	a.job_id = job_id;
	a.run_lease = run_lease;
	if (recorded_any)
		for (const PlaceVersion &v : recorded_set(job_id, run_lease, a.queue_hash).way)
			if (same_attempt(v, a))
			{
				note_end(v);
				return;
			}
	/* Recorded by another backend (or forgotten by this one): the shared records. */
	if ((pg_atomic_read_u64(&shared_ended->recording_queues) & queue_bit(a.queue_hash)) == 0)
		return;
	i = attempt_hash(job_id, run_lease, a.queue_hash) % (kShared / kWays);
	SpinLockAcquire(&shared_ended->record_stripe[i % kStripes]);
	for (const PlaceVersion &v : shared_ended->record[i].way)
		if (!found && same_attempt(v, a))
		{
			a = v;
			found = true;
		}
	SpinLockRelease(&shared_ended->record_stripe[i % kStripes]);
	if (found)
		note_end(a);
}

/* A place version of this database as the published table holds it. */
static PlaceVersion
version_of(Oid relfile, ItemPointer tid, TransactionId xmin, int64 job_id, int64 run_lease, text *queue)
{
	PlaceVersion v;

	memset(&v, 0, sizeof(v));
	v.db = MyDatabaseId;
	v.relfile = relfile;
	v.tid = *tid;
	v.xmin = xmin;
	v.queue_hash = queue_hash_of(queue);
	v.job_id = job_id;
	v.run_lease = run_lease;
	return v;
}

/*
 * Start loading a set and its stripe's lock into the cache, so that a loop over several sets
 * overlaps their misses (the sets a transaction touches are far apart).
 */
static void
prefetch_set(const VersionSet &set, const slock_t &lock)
{
	__builtin_prefetch(&lock, 1);
	for (std::size_t b = 0; b < sizeof(VersionSet); b += 64)
		__builtin_prefetch(reinterpret_cast<const char *>(&set) + b, 1);
}

/* Start loading a version's published set into the cache (ended_places.hpp). */
void
prefetch_place_ended(Oid relfile, ItemPointer tid, TransactionId xmin, int64 job_id, int64 run_lease, text *queue)
{
	int i;

	if (shared_ended == nullptr)
		return;
	i = published_set(version_of(relfile, tid, xmin, job_id, run_lease, queue));
	prefetch_set(shared_ended->set[i], shared_ended->stripe[i % kStripes]);
}

/* Whether a place version's attempt has ended (ended_places.hpp). */
bool
place_attempt_ended(Oid relfile, ItemPointer tid, TransactionId xmin, int64 job_id, int64 run_lease, text *queue)
{
	PlaceVersion v;
	int i;
	bool ended;

	if (shared_ended == nullptr)
		return false;
	v = version_of(relfile, tid, xmin, job_id, run_lease, queue);
	i = published_set(v);
	SpinLockAcquire(&shared_ended->stripe[i % kStripes]);
	ended = false;
	for (const PlaceVersion &w : shared_ended->set[i].way)
		ended = ended || same_version(w, v);
	SpinLockRelease(&shared_ended->stripe[i % kStripes]);
	return ended;
}

/* Publish or forget this transaction's noted ends (ended_places.hpp). */
void
ended_places_at_xact_end(bool committed)
{
	for (int p = 0; committed && shared_ended != nullptr && p < npending_records; p++)
	{
		const PlaceVersion &v = pending_records[p].version;
		uint32 i = attempt_hash(v.job_id, v.run_lease, v.queue_hash) % (kShared / kWays);

		prefetch_set(shared_ended->record[i], shared_ended->record_stripe[i % kStripes]);
	}
	if (committed && shared_ended != nullptr)
		for (int p = 0; p < npending_records; p++)
		{
			const PlaceVersion &v = pending_records[p].version;
			uint32 i = attempt_hash(v.job_id, v.run_lease, v.queue_hash) % (kShared / kWays);

			if ((pg_atomic_read_u64(&shared_ended->recording_queues) & queue_bit(v.queue_hash)) == 0)
				pg_atomic_fetch_or_u64(&shared_ended->recording_queues, queue_bit(v.queue_hash));
			SpinLockAcquire(&shared_ended->record_stripe[i % kStripes]);
			put_in(shared_ended->record[i], v, same_attempt);
			SpinLockRelease(&shared_ended->record_stripe[i % kStripes]);
		}
	npending_records = 0;
	for (int p = 0; committed && shared_ended != nullptr && p < npending; p++)
	{
		int i = published_set(pending[p].version);

		prefetch_set(shared_ended->set[i], shared_ended->stripe[i % kStripes]);
	}
	if (committed && shared_ended != nullptr)
		for (int p = 0; p < npending; p++)
		{
			int i = published_set(pending[p].version);

			SpinLockAcquire(&shared_ended->stripe[i % kStripes]);
			put_in(shared_ended->set[i], pending[p].version, same_version);
			SpinLockRelease(&shared_ended->stripe[i % kStripes]);
		}
	npending = 0;
}

/* _PG_init: the subtransaction hook (ended_places.hpp). */
void
init_ended_places_hooks()
{
	RegisterSubXactCallback(on_ended_places_subxact, nullptr);
}

/* shmem_request_hook: room for the published versions. */
void
ended_places_shmem_request()
{
	RequestAddinShmemSpace(sizeof(EndedPlaces));
}

/* shmem_startup_hook: claim the published versions by name (initialised once, by the postmaster). */
void
ended_places_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_ended = static_cast<EndedPlaces *>(ShmemInitStruct("awa_shard ended places", sizeof(EndedPlaces), &found));
	if (!found)
	{
		for (slock_t &s : shared_ended->stripe)
			SpinLockInit(&s);
		for (slock_t &s : shared_ended->record_stripe)
			SpinLockInit(&s);
		memset(shared_ended->set, 0, sizeof(shared_ended->set));
		memset(shared_ended->record, 0, sizeof(shared_ended->record));
		pg_atomic_init_u64(&shared_ended->recording_queues, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
