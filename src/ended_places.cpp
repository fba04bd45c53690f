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
 * (relation file, tid, and its own transaction id, the version's xmin), and when that backend
 * commits the attempt's end it publishes the version in shared memory. A count that finds
 * exactly that version (same file, tid and xmin) knows its attempt has ended and passes the
 * place as free without testing it.
 *
 * Exact: a row version is named by its file, tid and xmin (a rewrite of the table gives it a
 * new file; the line pointer of a pruned version is reused only by versions of later
 * transactions), a place version names one attempt, and an end is published only once its
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

/* Published versions (direct-mapped: a newer one replaces an older one in its entry). */
constexpr int kPublished = 65536;
/* Spinlocks over the published entries (entry i under lock i % kStripes). */
constexpr int kStripes = 64;
/* Places a backend remembers recording (direct-mapped by attempt). */
constexpr int kRecorded = 4096;
/* Ended places one transaction publishes at most (more: the rest are tested as before). */
constexpr int kPending = 1024;

/* A row version of awa.key_attempts in a database. */
struct PlaceVersion
{
	Oid db; /* InvalidOid: an empty entry */
	Oid relfile;
	ItemPointerData tid;
	TransactionId xmin;
};

/* Shared: the published versions. */
struct EndedPlaces
{
	slock_t stripe[kStripes];
	PlaceVersion entry[kPublished];
};

EndedPlaces *shared_ended = nullptr;

/* A place this backend recorded: the attempt and the version it wrote. */
struct RecordedPlace
{
	int64 job_id;
	int64 run_lease;
	PlaceVersion version;
};

RecordedPlace recorded[kRecorded];

/* Ends this transaction noted, with the subtransaction that noted each. */
struct PendingEnd
{
	PlaceVersion version;
	SubTransactionId subid;
};

PendingEnd pending[kPending];
int npending = 0;

/* The entry of an attempt in `recorded`. */
int
recorded_index(int64 job_id, int64 run_lease)
{
	int64 key[2] = {job_id, run_lease};

	return static_cast<int>(hash_bytes(reinterpret_cast<const unsigned char *>(key), sizeof(key)) % kRecorded);
}

/* The entry of a version in the published table (every field hashed, no padding). */
int
published_index(const PlaceVersion &v)
{
	uint32 key[5] = {v.db, v.relfile, ItemPointerGetBlockNumberNoCheck(&v.tid),
					 ItemPointerGetOffsetNumberNoCheck(&v.tid), v.xmin};

	return static_cast<int>(hash_bytes(reinterpret_cast<const unsigned char *>(key), sizeof(key)) % kPublished);
}

/* Whether two versions are the same. */
bool
same_version(const PlaceVersion &a, const PlaceVersion &b)
{
	return a.db == b.db && a.relfile == b.relfile && a.xmin == b.xmin &&
		   ItemPointerGetBlockNumberNoCheck(&a.tid) == ItemPointerGetBlockNumberNoCheck(&b.tid) &&
		   ItemPointerGetOffsetNumberNoCheck(&a.tid) == ItemPointerGetOffsetNumberNoCheck(&b.tid);
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
note_place_recorded(int64 job_id, int64 run_lease, Oid relfile, ItemPointer tid)
{
	RecordedPlace &r = recorded[recorded_index(job_id, run_lease)];

	if (shared_ended == nullptr)
		return;
	r.job_id = job_id;
	r.run_lease = run_lease;
	r.version.db = MyDatabaseId;
	r.version.relfile = relfile;
	r.version.tid = *tid;
	r.version.xmin = GetCurrentTransactionId();
}

/* Note the end of an attempt whose place this backend recorded (ended_places.hpp). */
void
note_place_attempt_ended(int64 job_id, int64 run_lease)
{
	const RecordedPlace &r = recorded[recorded_index(job_id, run_lease)];

	if (shared_ended == nullptr || r.version.db != MyDatabaseId || r.job_id != job_id || r.run_lease != run_lease ||
		npending == kPending)
		return;
	pending[npending].version = r.version;
	pending[npending].subid = GetCurrentSubTransactionId();
	npending++;
}

/* Whether a place version's attempt has ended (ended_places.hpp). */
bool
place_attempt_ended(Oid relfile, ItemPointer tid, TransactionId xmin)
{
	PlaceVersion v;
	int i;
	bool ended;

	if (shared_ended == nullptr)
		return false;
	v.db = MyDatabaseId;
	v.relfile = relfile;
	v.tid = *tid;
	v.xmin = xmin;
	i = published_index(v);
	SpinLockAcquire(&shared_ended->stripe[i % kStripes]);
	ended = same_version(shared_ended->entry[i], v);
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
			int i = published_index(pending[p].version);

			SpinLockAcquire(&shared_ended->stripe[i % kStripes]);
			shared_ended->entry[i] = pending[p].version;
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
		memset(shared_ended->entry, 0, sizeof(shared_ended->entry));
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa
