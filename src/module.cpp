/*
 * module.cpp — library entry: _PG_init, settings (GUCs), the shared-memory hooks (each
 * concern requests and claims its own; this file calls them in turn and owns the rotor and
 * the queue_meta generation) and the transaction hooks that drive per-transaction caches
 * and commit wake-ups.
 */
#include "citus.hpp"
#include "claim_cursor.hpp"
#include "enqueue.hpp"
#include "head_wait.hpp"
#include "job_wait.hpp"
#include "ended_places.hpp"
#include "key_places_memo.hpp"
#include "running_bound.hpp"
#include "key_caps.hpp"
#include "launcher.hpp"
#include "module.hpp"
#include "rate_limit.hpp"
#include "registry.hpp"
#include "report_commit.hpp"
#include "reserve.hpp"
#include "stats.hpp"
#include "wakeup.hpp"
#include "worker.hpp"

extern "C"
{
#include "access/xact.h"
#include "replication/logicalworker.h"
#include "storage/procarray.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

	PG_MODULE_MAGIC;
	void _PG_init(void);
}

namespace awa
{

int notify_interval_ms = 250;

namespace
{

/* Server-wide state of the module: the rotor, the queue_meta generation and the ring stamp. */
struct SharedState
{
	pg_atomic_uint32 rotor;
	pg_atomic_uint64 queue_meta_generation; /* bumped after a commit that changed queue_meta */
	pg_atomic_uint64 ring_generation;		/* bumped when a ring change starts and when it ends */
	pg_atomic_uint32 ring_changes_open;		/* transactions that changed a ring table, not yet ended */
};

/* NULL when the library was not preloaded. */
SharedState *shared = nullptr;
std::uint32_t local_rotor = 0;
std::uint64_t xact_epoch = 1;
bool queue_meta_changed_in_xact = false;
bool ring_changed_in_xact = false;

/*
 * A logical replication apply worker applies a publisher's prepared transaction as a prepared
 * transaction of its own, whose COMMIT PREPARED tells no backend to re-read queue widths: the
 * ids of those that changed queue_meta, until a later commit of the worker finds them ended
 * and moves the generation. Its first commit moves it too (one prepared before a restart).
 */
constexpr int kPreparedMetaChanges = 16;
TransactionId prepared_meta_changes[kPreparedMetaChanges];
int n_prepared_meta_changes = 0;
bool apply_worker_committed = false;

shmem_request_hook_type prev_shmem_request = nullptr;
shmem_startup_hook_type prev_shmem_startup = nullptr;

/* Request the module's own shared memory. */
void
module_shmem_request()
{
	RequestAddinShmemSpace(sizeof(SharedState));
}

/* Claim the module's own shared memory by name (initialised once, by the postmaster). */
void
module_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = static_cast<SharedState *>(ShmemInitStruct("awa_shard module", sizeof(SharedState), &found));
	if (!found)
	{
		pg_atomic_init_u32(&shared->rotor, 0);
		pg_atomic_init_u64(&shared->queue_meta_generation, 1);
		pg_atomic_init_u64(&shared->ring_generation, 1);
		pg_atomic_init_u32(&shared->ring_changes_open, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * shmem_request_hook: each concern requests its own shared memory and locks. It runs after
 * _PG_init, so the sizes that depend on settings (reservation_slots) see their values.
 */
void
request_shmem()
{
	if (prev_shmem_request)
		prev_shmem_request();
	module_shmem_request();
	wakeup_shmem_request();
	job_wait_shmem_request();
	key_caps_shmem_request();
	ended_places_shmem_request();
	key_places_memo_shmem_request();
	running_bound_shmem_request();
	launcher_shmem_request();
	stats_shmem_request();
	registry_shmem_request();
	cursor_board_shmem_request();
	rate_limit_shmem_request();
	head_wait_shmem_request();
}

/* shmem_startup_hook: each concern claims its shared memory by name. */
void
startup_shmem()
{
	if (prev_shmem_startup)
		prev_shmem_startup();
	module_shmem_startup();
	wakeup_shmem_startup();
	job_wait_shmem_startup();
	key_caps_shmem_startup();
	ended_places_shmem_startup();
	key_places_memo_shmem_startup();
	running_bound_shmem_startup();
	launcher_shmem_startup();
	stats_shmem_startup();
	registry_shmem_startup();
	cursor_board_shmem_startup();
	rate_limit_shmem_startup();
	head_wait_shmem_startup();
}

/*
 * A transaction that changed a ring table ended (committed: its change is visible now):
 * move the ring generation while it still counts as open, then close it, so that a stamp
 * read from here on differs from every stamp read before the change began.
 */
void
end_ring_change()
{
	if (!ring_changed_in_xact)
		return;
	ring_changed_in_xact = false;
	if (shared == nullptr)
		return;
	pg_atomic_fetch_add_u64(&shared->ring_generation, 1);
	pg_atomic_fetch_sub_u32(&shared->ring_changes_open, 1);
}

/*
 * In a logical replication apply worker: whether a prepared transaction of its own that
 * changed queue_meta has ended since (or this is its first commit). Never raises.
 */
bool
apply_worker_meta_changes_ended()
{
	bool ended = false;
	int kept = 0;

	if (!IsLogicalWorker())
		return false;
	if (!apply_worker_committed)
	{
		apply_worker_committed = true;
		ended = true;
	}
	for (int i = 0; i < n_prepared_meta_changes; i++)
		if (TransactionIdIsInProgress(prepared_meta_changes[i]))
			prepared_meta_changes[kept++] = prepared_meta_changes[i];
		else
			ended = true;
	n_prepared_meta_changes = kept;
	return ended;
}

/*
 * Transaction end: move the cache epoch, deliver wake-ups, of workers (wakeup.cpp) and of
 * callers waiting for a job (job_wait.cpp), and stamp the attempts that ended (key_caps.cpp)
 * (must not raise at commit).
 * PREPARE ends the session's transaction too: its write slots, held while their locks
 * were this session's, now belong to the prepared transaction, which another session may
 * commit before the ring is pruned; the next transaction must read and fence afresh. A
 * change of queue_meta cannot be prepared: the prepared transaction commits elsewhere,
 * where nothing would tell the other backends to re-read their cached widths.
 */
void
on_xact_event(XactEvent event, void *arg)
{
	switch (event)
	{
	case XACT_EVENT_PRE_COMMIT:
		report_commit_at_pre_commit();
		key_caps_at_pre_commit();
		running_bound_at_pre_commit();
		break;
	case XACT_EVENT_PRE_PREPARE:
		key_caps_at_pre_prepare();
		if (queue_meta_changed_in_xact && shared != nullptr && IsLogicalWorker() &&
			n_prepared_meta_changes < kPreparedMetaChanges && TransactionIdIsValid(GetTopTransactionIdIfAny()))
			prepared_meta_changes[n_prepared_meta_changes++] = GetTopTransactionIdIfAny();
		else if (queue_meta_changed_in_xact && shared != nullptr)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("cannot prepare a transaction that changed awa.queue_meta"),
							errdetail("Backends cache queue widths until a commit that changes queue_meta "
									  "tells them to re-read; a prepared transaction commits without it."),
							errhint("Create, pause, resume or resize queues outside the prepared transaction.")));
		/* Under Citus no ring is cached (ring.cpp), and Citus prepares the ring writes it replicates. */
		if (ring_changed_in_xact && shared != nullptr && !citus_present())
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("cannot prepare a transaction that changed a ring of awa_shard"),
							errdetail("Backends cache the rings' cursors until a transaction that changes them ends; "
									  "a prepared transaction commits elsewhere, after its own session has moved on."),
							errhint("Run rotation, prune and maintenance outside the prepared transaction.")));
		break;
	case XACT_EVENT_PREPARE:
		xact_epoch++;
		queue_meta_changed_in_xact = false;
		end_ring_change();
		wakeup_at_prepare();
		job_wait_at_xact_end(false);
		key_caps_at_prepare();
		ended_places_at_xact_end(false);
		key_places_memo_at_prepare();
		running_bound_at_prepare();
		rate_limit_at_xact_end(false);
		report_commit_at_xact_end();
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		xact_epoch++;
		/* Visible now: let every backend re-read queue widths. */
		if ((queue_meta_changed_in_xact || apply_worker_meta_changes_ended()) && shared != nullptr)
			pg_atomic_fetch_add_u64(&shared->queue_meta_generation, 1);
		queue_meta_changed_in_xact = false;
		end_ring_change();
		/* Exits stamped before anyone is woken: a woken claim must not trust a lane they ended. */
		key_caps_at_xact_end(true);
		ended_places_at_xact_end(true);
		/* Before the locks go: the next holder of a key's lock finds what this claim left. */
		key_places_memo_at_xact_end(true);
		running_bound_at_xact_end(true);
		wakeup_at_xact_end(true);
		job_wait_at_xact_end(true);
		rate_limit_at_xact_end(true);
		report_commit_at_xact_end();
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
		xact_epoch++;
		queue_meta_changed_in_xact = false;
		end_ring_change();
		wakeup_at_xact_end(false);
		job_wait_at_xact_end(false);
		key_caps_at_xact_end(false);
		ended_places_at_xact_end(false);
		key_places_memo_at_xact_end(false);
		running_bound_at_xact_end(false);
		rate_limit_at_xact_end(false);
		report_commit_at_xact_end();
		break;
	default:
		break;
	}
}

} // namespace

bool
shared_state_available()
{
	return shared != nullptr;
}

/* Shared rotor when preloaded; otherwise a backend counter seeded from the pid. */
std::uint32_t
next_rotor_ticket()
{
	if (shared != nullptr)
		return pg_atomic_fetch_add_u32(&shared->rotor, 1);
	return local_rotor++;
}

std::uint64_t
current_xact_epoch()
{
	return xact_epoch;
}

/*
 * Validity stamp of cached queue widths. Preloaded: the server-wide queue_meta generation,
 * so a width stays cached across transactions until some commit changes queue_meta (or
 * this transaction does). Otherwise: the transaction epoch (re-read every transaction).
 */
std::uint64_t
queue_meta_stamp()
{
	if (shared != nullptr && !queue_meta_changed_in_xact)
		return pg_atomic_read_u64(&shared->queue_meta_generation) << 1;
	return (xact_epoch << 1) | 1;
}

/* The queue_meta trigger fired in this transaction. */
void
note_queue_meta_changed()
{
	queue_meta_changed_in_xact = true;
}

/*
 * Validity stamp of cached ring cursors (ring.cpp), read before the rings' tables; 0: do not
 * cache (not preloaded, this transaction changed a ring, or some transaction that changed
 * one has not ended). A cached cursor is current while the stamp it was read under is.
 */
std::uint64_t
ring_state_stamp()
{
	std::uint64_t generation;

	if (shared == nullptr || ring_changed_in_xact)
		return 0;
	generation = pg_atomic_read_u64(&shared->ring_generation);
	pg_memory_barrier();
	if (pg_atomic_read_u32(&shared->ring_changes_open) != 0)
		return 0;
	return generation;
}

/*
 * The ring trigger fired in this transaction: count it open (and move the generation) until
 * it ends, so no backend trusts a cached cursor meanwhile.
 */
void
note_ring_changed()
{
	if (ring_changed_in_xact)
		return;
	ring_changed_in_xact = true;
	if (shared == nullptr)
		return;
	pg_atomic_fetch_add_u32(&shared->ring_changes_open, 1);
	pg_atomic_fetch_add_u64(&shared->ring_generation, 1);
}

} // namespace awa

/* Library load: settings, shared memory when preloaded, transaction hooks. */
void
_PG_init(void)
{
	/*
	 * pg_upgrade runs the new cluster in binary-upgrade mode, where it only restores the
	 * schema: set nothing up there, no shared memory and no maintenance launcher (pg_cron's
	 * guard). The SQL functions still load and fall back to their not-preloaded paths.
	 */
	if (IsBinaryUpgrade)
		return;
	DefineCustomIntVariable("awa_shard.notify_interval",
							"Minimum milliseconds between NOTIFYs sent by producers for one queue.",
							"0 notifies on every producing transaction, -1 never notifies.", &awa::notify_interval_ms,
							250, -1, 3600 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
	awa::define_maintenance_settings();
	awa::define_report_settings();
	awa::define_reservation_settings(process_shared_preload_libraries_in_progress);
	awa::define_lane_lock_settings();
	awa::init_head_wait();
	MarkGUCPrefixReserved("awa_shard");

	awa::local_rotor = static_cast<std::uint32_t>(MyProcPid) * 2654435761u;
	if (process_shared_preload_libraries_in_progress)
	{
		awa::prev_shmem_request = shmem_request_hook;
		shmem_request_hook = awa::request_shmem;
		awa::prev_shmem_startup = shmem_startup_hook;
		shmem_startup_hook = awa::startup_shmem;
		awa::register_maintenance_launcher();
		awa::init_cursor_board_hooks();
	}
	RegisterXactCallback(awa::on_xact_event, nullptr);
	awa::init_lane_cache();
	awa::init_registry_hooks();
	awa::init_wakeup_hooks();
	awa::init_rate_limit_hooks();
	awa::init_key_caps_hooks();
	awa::init_ended_places_hooks();
	awa::init_key_places_memo_hooks();
	awa::init_running_bound_hooks();
	awa::init_enqueue_cache();
}
