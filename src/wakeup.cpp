/*
 * wakeup.cpp — telling workers that work arrived (docs/design.md §8) without a server-wide lock:
 * a per-queue NOTIFY throttle (awa_shard.notify_interval), and condition variables in
 * shared memory signalled after a producing transaction commits, which
 * awa.wait_for_jobs sleeps on. Without preload, wait_for_jobs sleeps and re-checks.
 */
#include "catalog_version.hpp"
#include "claim_cursor.hpp"
#include "compat_1_0.hpp"
#include "module.hpp"
#include "pg_boundary.hpp"
#include "spi_util.hpp"
#include "validate.hpp"
#include "wakeup.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include <cstdint>

namespace awa
{

namespace
{

constexpr int kWakeSlots = 128;
constexpr int kNotifySlots = 256;
constexpr int kMaxFedQueues = 32;

/* One wake-up slot: queues hash onto slots; a commit bumps the counter and broadcasts. */
struct WakeSlot
{
	ConditionVariable cv;
	pg_atomic_uint64 commits;
};

struct WakeShared
{
	WakeSlot slots[kWakeSlots];
	pg_atomic_uint64 last_notify_us[kNotifySlots];
};

WakeShared *wake = nullptr;
std::uint64_t local_last_notify_us[kNotifySlots];

/* Queues fed by the current transaction (hashes; at most kMaxFedQueues tracked). */
std::uint32_t fed[kMaxFedQueues];
int nfed = 0;
bool fed_overflow = false;
SPIPlanPtr avail_plans[2]; /* [catalog] */

/* Hash of (database, queue name), shared by the NOTIFY throttle and the wake slots: a busy
 * queue of one database never throttles or wakes a same-named queue of another. */
std::uint32_t
queue_hash(const char *queue, int queue_len)
{
	return hash_combine(hash_bytes_uint32(MyDatabaseId),
						hash_bytes(reinterpret_cast<const unsigned char *>(queue), queue_len));
}

/* Whether the throttle lets this transaction NOTIFY for the queue now (claims the slot if so). */
bool
notify_due(std::uint32_t h)
{
	std::uint64_t now = static_cast<std::uint64_t>(GetCurrentTimestamp());
	std::uint64_t interval = static_cast<std::uint64_t>(notify_interval_ms) * 1000;
	int slot = h % kNotifySlots;

	if (notify_interval_ms < 0)
		return false;
	if (notify_interval_ms == 0)
		return true;
	if (wake != nullptr)
	{
		std::uint64_t last = pg_atomic_read_u64(&wake->last_notify_us[slot]);

		if (now - last < interval && now >= last)
			return false;
		return pg_atomic_compare_exchange_u64(&wake->last_notify_us[slot], &last, now);
	}
	if (now - local_last_notify_us[slot] < interval && now >= local_last_notify_us[slot])
		return false;
	local_last_notify_us[slot] = now;
	return true;
}

/* NOTIFY channel of a queue: 'awa:' || queue, or 'awa:md5:' || md5(queue) when that is too long. */
void
send_notify(const char *queue, int queue_len)
{
	char channel[NAMEDATALEN];

	if (queue_len + 4 < NAMEDATALEN)
	{
		memcpy(channel, "awa:", 4);
		memcpy(channel + 4, queue, queue_len);
		channel[4 + queue_len] = '\0';
	}
	else
	{
		char hex[33];
		const char *errstr = nullptr;

		if (!pg_md5_hash(queue, queue_len, hex, &errstr))
			elog(ERROR, "awa_shard: md5 failed: %s", errstr ? errstr : "unknown");
		snprintf(channel, sizeof(channel), "awa:md5:%s", hex);
	}
	Async_Notify(channel, "");
}

/* Is there a visible ready row at or after some lane cursor of an unpaused queue? Runs with
 * a fresh snapshot (read_only = false), so it sees commits made after the calling statement began. */
bool
work_visible(text *queue, Catalog catalog)
{
	static const Oid argtypes[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	bool isnull;
	bool result;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	if (avail_plans[static_cast<int>(catalog)] == nullptr)
	{
		char sql[512];

		snprintf(sql, sizeof(sql),
				 "SELECT NOT coalesce((SELECT m.paused FROM awa.queue_meta m WHERE m.queue = $1), false) "
				 "AND EXISTS (SELECT 1 FROM %s h WHERE h.queue = $1 AND EXISTS ("
				 "SELECT 1 FROM awa.ready_entries r WHERE r.queue = h.queue AND r.priority = h.priority "
				 "AND r.enqueue_shard = h.enqueue_shard AND r.lane_seq >= h.claim_seq))",
				 catalog == Catalog::V1_1 ? cursor_relation() : compat_1_0::kCursorRelation);
		keep_plan(&avail_plans[static_cast<int>(catalog)], sql, 1, argtypes);
	}
	exec_plan(avail_plans[static_cast<int>(catalog)], values, nullptr, false, 1, SPI_OK_SELECT, "work check");
	result = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return result;
}

} // namespace

/* First enqueue of a queue in this transaction: maybe NOTIFY, and remember it for commit. */
void
note_enqueued(const char *queue, int queue_len)
{
	std::uint32_t h = queue_hash(queue, queue_len);

	for (int i = 0; i < nfed; i++)
		if (fed[i] == h)
			return;
	if (nfed < kMaxFedQueues)
		fed[nfed++] = h;
	else
		fed_overflow = true;
	if (notify_due(h))
		send_notify(queue, queue_len);
}

/* After commit (rows visible): wake the sleepers of every fed queue's slot. Never raises. */
void
wakeup_at_xact_end(bool committed)
{
	if (committed && wake != nullptr)
	{
		if (fed_overflow)
		{
			for (int s = 0; s < kWakeSlots; s++)
			{
				pg_atomic_fetch_add_u64(&wake->slots[s].commits, 1);
				ConditionVariableBroadcast(&wake->slots[s].cv);
			}
		}
		else
		{
			for (int i = 0; i < nfed; i++)
			{
				WakeSlot *slot = &wake->slots[fed[i] % kWakeSlots];

				pg_atomic_fetch_add_u64(&slot->commits, 1);
				ConditionVariableBroadcast(&slot->cv);
			}
		}
	}
	nfed = 0;
	fed_overflow = false;
}

/* shmem_request_hook: room for the wake slots and the NOTIFY stamps. */
void
wakeup_shmem_request()
{
	RequestAddinShmemSpace(sizeof(WakeShared));
}

/* shmem_startup_hook: claim the wake slots by name (initialised once, by the postmaster). */
void
wakeup_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wake = static_cast<WakeShared *>(ShmemInitStruct("awa_shard wakeup", sizeof(WakeShared), &found));
	if (!found)
	{
		for (int s = 0; s < kWakeSlots; s++)
		{
			ConditionVariableInit(&wake->slots[s].cv);
			pg_atomic_init_u64(&wake->slots[s].commits, 0);
		}
		for (int s = 0; s < kNotifySlots; s++)
			pg_atomic_init_u64(&wake->last_notify_us[s], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

} // namespace awa

/*
 * awa.wait_for_jobs(queue, timeout_ms) -> boolean: true at once if work is visible, else
 * sleeps until a producing transaction of the queue's wake slot commits (true) or the
 * timeout passes (false); the work check reads the cursors of the calling entry point's catalog.
 */
Datum
awa::wait_for_jobs(FunctionCallInfo fcinfo, Catalog catalog)
{
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	int32 timeout_ms;
	TimestampTz deadline;

	timeout_ms = awa::timeout_ms_arg(fcinfo, 1, "p_timeout_ms");
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	if (awa::wake != nullptr)
	{
		awa::WakeSlot *slot =
			&awa::wake->slots[awa::queue_hash(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue)) % awa::kWakeSlots];
		std::uint64_t seen = pg_atomic_read_u64(&slot->commits);
		bool woken = false;

		/* Read the counter before checking, so a commit after the check is never missed. */
		if (awa::work_visible(queue, catalog))
			PG_RETURN_BOOL(true);
		ConditionVariablePrepareToSleep(&slot->cv);
		for (;;)
		{
			long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			if (pg_atomic_read_u64(&slot->commits) != seen)
			{
				woken = true;
				break;
			}
			if (remaining <= 0)
				break;
			if (ConditionVariableTimedSleep(&slot->cv, remaining, PG_WAIT_EXTENSION))
				continue; /* timed out: the loop re-checks the counter and the clock */
		}
		ConditionVariableCancelSleep();
		PG_RETURN_BOOL(woken);
	}

	/* Not preloaded: sleep in short steps and look again. */
	for (;;)
	{
		long remaining;

		if (awa::work_visible(queue, catalog))
			PG_RETURN_BOOL(true);
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			PG_RETURN_BOOL(false);
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, remaining < 50 ? remaining : 50,
						PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* awa.wait_for_jobs of the 1.1 catalog. */
AWA_SQL_FUNCTION(awa_wait_for_jobs_1_1)
{
	return awa::wait_for_jobs(fcinfo, awa::Catalog::V1_1);
}
