/*
 * job_wait.cpp — awa.wait_for_job: a caller sleeps until one job reaches a terminal state
 * (completed, failed, cancelled, dead-lettered) or is removed, then gets its row.
 *
 * Preloaded: a fixed array of condition variables in shared memory ("awa_shard job wait"),
 * a job's slot chosen by a hash of (database, job id). Every path that finishes a job
 * records its id in the finishing transaction (complete_jobs in C++; the PL/pgSQL exits
 * through awa._job_finished); at commit, once the new state is visible, the callback bumps
 * the counter of each recorded slot and broadcasts. A waiter reads its slot's counter
 * before it reads the job, so a commit between the read and the sleep is never missed;
 * other jobs sharing the slot only cause a re-read. Nothing is signalled at abort; a
 * prepared transaction's finishes are not signalled (its waiters return at their timeout).
 * Not preloaded: the waiter re-reads the job every kPollMs milliseconds.
 */
#include "job_wait.hpp"
#include "citus.hpp"
#include "counted_wait.hpp"
#include "key_caps.hpp"
#include "pg_boundary.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include <cstdint>

namespace awa
{

namespace
{

/* Wait slots: jobs hash onto them; a waiter wakes for any finish of its slot. */
constexpr int kJobWaitSlots = 256;
/* Re-read interval of a waiter when the library is not preloaded (documented in docs/api.md). */
constexpr int kPollMs = 100;

/* The wait slots: a finishing commit counts a finish on its job's slot and wakes every waiter. */
struct JobWaitShared
{
	CountedWait slots[kJobWaitSlots];
};

JobWaitShared *shared_waits = nullptr;

/* Slots of the jobs the current transaction finished (a bit each), or all of them. */
std::uint64_t finished_slots[kJobWaitSlots / 64];
bool finished_any = false;

SPIPlanPtr job_plan = nullptr;
SPIPlanPtr job_in_queue_plan = nullptr;

/* The wait slot of a job of this database. */
int
slot_of(int64 job_id)
{
	return static_cast<int>(database_job_hash(job_id) % kJobWaitSlots);
}

/* Signal one slot's waiters (after the finishing commit). */
void
signal_slot(int s)
{
	counted_wait_announce(&shared_waits->slots[s], true);
}

/*
 * The job's row (awa.jobs) on the latest committed state, as a datum of the function's
 * result type, built in memory context `into`; false when no row has the id (in `queue`,
 * when given: then every statement names the queue, as on a Citus cluster it must).
 * *terminal: whether its state is one a waiter stops at.
 */
bool
read_job(int64 job_id, text *queue, TupleDesc result_desc, MemoryContext into, Datum *row, bool *terminal)
{
	static const Oid types[2] = {INT8OID, TEXTOID};
	Datum args[2] = {Int64GetDatum(job_id), PointerGetDatum(queue)};
	SPIPlanPtr plan;
	bool found = false;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	if (queue == nullptr)
		plan = awa::keep_generic_plan(&job_plan,
									  "SELECT j.*, j.state IN ('completed', 'failed', 'cancelled') AS terminal "
									  "FROM awa.jobs j WHERE j.id = $1 LIMIT 1",
									  1, types);
	else
	{
		static const char job_in_queue_sql[] =
			"SELECT j.*, j.state IN ('completed', 'failed', 'cancelled') AS terminal "
			"FROM awa.jobs j WHERE j.queue = $2 AND j.id = $1 LIMIT 1";

		/* On a Citus worker (the caller checked the queue is here): the view over its shards. */
		plan = awa::keep_shard_plan(job_in_queue_sql, queue, 2, types);
		if (plan == nullptr)
			plan = awa::keep_generic_plan(&job_in_queue_plan, job_in_queue_sql, 2, types);
	}
	awa::exec_plan_latest(plan, args, nullptr, true, 1, SPI_OK_SELECT, "job read");
	if (SPI_processed == 1)
	{
		TupleDesc desc = SPI_tuptable->tupdesc;
		HeapTuple tuple = SPI_tuptable->vals[0];
		int natts = result_desc->natts;
		MemoryContext spi = MemoryContextSwitchTo(into);
		Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * natts));
		bool *nulls = static_cast<bool *>(palloc(sizeof(bool) * natts));
		bool isnull;

		if (desc->natts != natts + 1)
			elog(ERROR, "awa_shard: awa.jobs and awa.job_row differ (%d and %d columns)", desc->natts - 1, natts);
		/* j.* is the job row, column for column (the check above). */
		for (int a = 0; a < natts; a++)
			values[a] = SPI_getbinval(tuple, desc, a + 1, &nulls[a]);
		*terminal = DatumGetBool(SPI_getbinval(tuple, desc, SPI_fnumber(desc, "terminal"), &isnull));
		*row = HeapTupleGetDatum(heap_form_tuple(result_desc, values, nulls));
		MemoryContextSwitchTo(spi);
		found = true;
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return found;
}

} // namespace

/* A job's hash in this database (job_wait.hpp). */
std::uint32_t
database_job_hash(int64 job_id)
{
	return hash_combine(hash_bytes_uint32(MyDatabaseId),
						hash_bytes(reinterpret_cast<const unsigned char *>(&job_id), sizeof(job_id)));
}

/* Mark the job's slot in this transaction's bitmap; its waiters wake at commit. */
void
note_job_finished(int64 job_id)
{
	int s = slot_of(job_id);

	finished_slots[s / 64] |= UINT64CONST(1) << (s % 64);
	finished_any = true;
}

/* Mark every slot: the transaction removed jobs it does not name. */
void
note_jobs_finished_all()
{
	for (std::uint64_t &word : finished_slots)
		word = ~UINT64CONST(0);
	finished_any = true;
}

/* At commit (the new states are visible), signal the marked slots; any end forgets the marks. */
void
job_wait_at_xact_end(bool committed)
{
	if (!finished_any)
		return;
	if (committed && shared_waits != nullptr)
		for (int s = 0; s < kJobWaitSlots; s++)
			if (finished_slots[s / 64] & (UINT64CONST(1) << (s % 64)))
				signal_slot(s);
	for (std::uint64_t &word : finished_slots)
		word = 0;
	finished_any = false;
}

/* shmem_request_hook: room for the wait slots. */
void
job_wait_shmem_request()
{
	RequestAddinShmemSpace(sizeof(JobWaitShared));
}

/* shmem_startup_hook: claim the wait slots by name (initialised once, by the postmaster). */
void
job_wait_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared_waits = static_cast<JobWaitShared *>(ShmemInitStruct("awa_shard job wait", sizeof(JobWaitShared), &found));
	if (!found)
		for (CountedWait &slot : shared_waits->slots)
			counted_wait_init(&slot);
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa

namespace awa
{
namespace
{

/*
 * Before a wait_for_job sleeps: a transaction that has ended attempts holds their claim
 * batches, which the exit that would finish the job takes too when the job was claimed in the
 * same call, and no deadlock check sees a wait on a job, so the two would stand still for the
 * whole timeout. Such a transaction is refused (0A000). Other locks of the caller's (a
 * lane it enqueued into under the lane lock, rows it updated) are not looked for: a claim or
 * an enqueue before a wait in one transaction is a pattern workers use, and it waits.
 */
void
require_may_sleep()
{
	if (attempts_ended_in_xact())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("wait_for_job cannot wait in a transaction that has ended attempts"),
				 errdetail("An exit holds its claim batch, which the exit of the awaited job takes when both "
						   "were claimed in one call, and no deadlock check sees a wait on a job."),
				 errhint("Call it in its own transaction (autocommit), or with p_timeout_ms = 0 to only read.")));
}

} // namespace
} // namespace awa

/*
 * awa.wait_for_job(job_id, timeout_ms, queue) -> awa.job_row: the job as soon as it is
 * terminal (at once if it already is), else its row when the timeout passes; NULL when no
 * job has the id (never enqueued, deleted, or pruned; or not in p_queue when given), at once
 * or as soon as it goes. p_queue is the routing argument on a Citus cluster, where a call
 * without it (or not delegated to the queue's worker) is refused before the first read.
 */
AWA_SQL_FUNCTION(awa_wait_for_job)
{
	int64 job_id;
	int timeout_ms;
	text *queue = nullptr;
	TimestampTz deadline;
	TupleDesc desc;
	Datum row = (Datum)0;
	bool terminal = false;
	MemoryContext caller = CurrentMemoryContext;
	/* Each read's row lives here until the next one: a long wait on a busy slot reads often. */
	MemoryContext reads = AllocSetContextCreate(caller, "awa_shard job wait", ALLOCSET_SMALL_SIZES);

	awa::require_not_null(PG_ARGISNULL(0), "p_job_id");
	job_id = PG_GETARG_INT64(0);
	timeout_ms = awa::timeout_ms_arg(fcinfo, 1, "p_timeout_ms");
	/* Under Citus: the queue's shard on this node, or the call refused (citus.cpp). */
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		queue = awa::checked_queue_arg(fcinfo, 2, "p_queue");
	else
		awa::require_queue_local_or_given(nullptr);
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "awa_shard: wait_for_job must return awa.job_row");
	desc = BlessTupleDesc(desc);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	for (;;)
	{
		awa::CountedWait *slot =
			awa::shared_waits != nullptr ? &awa::shared_waits->slots[awa::slot_of(job_id)] : nullptr;
		/* Read the counter before the job, so a finish committed after the read wakes the sleep. */
		std::uint64_t seen = slot != nullptr ? awa::counted_wait_seen(slot) : 0;

		MemoryContextReset(reads);
		if (!awa::read_job(job_id, queue, desc, reads, &row, &terminal))
			PG_RETURN_NULL();
		if (terminal || TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline) <= 0)
			PG_RETURN_DATUM(datumCopy(row, false, -1));
		awa::require_may_sleep();
		if (slot != nullptr)
		{
			if (!awa::counted_wait_sleep(slot, seen, deadline))
				deadline = GetCurrentTimestamp(); /* timed out: one last read of the current row */
		}
		else
		{
			long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							remaining < awa::kPollMs ? remaining : awa::kPollMs, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
}

/*
 * awa._job_finished(job_id): the PL/pgSQL exits record a job they finished (NULL: jobs they
 * do not name, as purge and drop remove, and with them their attempts: key_caps.cpp), so
 * its waiters wake at this transaction's commit.
 */
AWA_SQL_FUNCTION(awa_job_finished)
{
	if (PG_ARGISNULL(0))
	{
		awa::note_jobs_finished_all();
		awa::note_attempts_ended_all(); /* their running attempts went with them */
	}
	else
		awa::note_job_finished(PG_GETARG_INT64(0));
	PG_RETURN_VOID();
}
