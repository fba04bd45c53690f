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
 * (job id, run_lease, a hash of the queue), and when that backend commits the end of that
 * attempt of that queue it publishes the whole in shared memory. A count that finds a place
 * whose version and attempt are exactly those knows its attempt has ended and passes the
 * place as free without testing it.
 *
 * Exact: neither half is enough alone (a second TRUNCATE in one transaction keeps the file,
 * so a new place can take an old one's tid with the same xmin; a job id can repeat in another
 * queue once the id sequence is set back), but a version that holds the attempt is that
 * attempt's place, and an end is published only once its
 * commit is visible (XACT_EVENT_COMMIT), never for a savepoint rolled back or a transaction
 * prepared (the count then tests, as before). Everything else only costs a miss: a place
 * written or ended by another backend, a version overwritten in the backend's memory or in
 * shared memory, a server without the preload (nothing is shared).
 */
#include "ended_places.hpp"
#include "pg_boundary.hpp"

extern "C"
{
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
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
/* Places a backend remembers recording (in sets of kWays chosen by attempt). */
constexpr int kRecorded = 4096;
/* Ended places one transaction publishes at most (more: the rest are tested as before). */
constexpr int kPending = 1024;

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

/* Shared: the published versions. */
struct EndedPlaces
{
	slock_t stripe[kStripes];
	VersionSet set[kSets];
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

/* The hash that names a queue in a version. */
uint32
queue_hash_of(text *queue)
{
	return hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(queue)), VARSIZE_ANY_EXHDR(queue));
}

/* The set of an attempt in `recorded`. */
VersionSet &
recorded_set(int64 job_id, int64 run_lease, uint32 queue_hash)
{
	int64 key[3] = {job_id, run_lease, queue_hash};

	return recorded[hash_bytes(reinterpret_cast<const unsigned char *>(key), sizeof(key)) % (kRecorded / kWays)];
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
}

/* Note the end of an attempt whose place this backend recorded (ended_places.hpp). */
void
note_place_attempt_ended(int64 job_id, int64 run_lease, text *queue)
{
	PlaceVersion a;

	if (!recorded_any || queue == nullptr || npending == kPending)
		return;
	memset(&a, 0, sizeof(a));
	a.db = MyDatabaseId;
	a.queue_hash = queue_hash_of(queue);
	a.job_id = job_id;
	a.run_lease = run_lease;
	for (const PlaceVersion &v : recorded_set(job_id, run_lease, a.queue_hash).way)
		if (same_attempt(v, a))
		{
			pending[npending].version = v;
			pending[npending].subid = GetCurrentSubTransactionId();
			npending++;
			return;
		}
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
	memset(&v, 0, sizeof(v));
	v.db = MyDatabaseId;
	v.relfile = relfile;
	v.tid = *tid;
	v.xmin = xmin;
	v.queue_hash = queue_hash_of(queue);
	v.job_id = job_id;
	v.run_lease = run_lease;
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
		memset(shared_ended->set, 0, sizeof(shared_ended->set));
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
