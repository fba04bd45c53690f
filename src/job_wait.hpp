/*
 * job_wait.hpp — waits for one job to finish (job_wait.cpp): the transactions that finish
 * jobs record them, and their commit wakes the waiters of those jobs' slots in shared
 * memory ("awa_shard job wait"), which awa.wait_for_job sleeps on.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

#include <cstdint>

namespace awa
{

/* A job's hash in this database: which slot of shared memory stands for it (wait slots, exit stamps). */
std::uint32_t database_job_hash(int64 job_id);

/* Remember that this transaction finished (or removed) job_id: its waiters wake at commit. */
void note_job_finished(int64 job_id);

/* Remember that this transaction removed jobs it does not name (purge, drop): wake every waiter. */
void note_jobs_finished_all();

/* Transaction end: at commit, wake the waiters of the jobs this transaction finished. Never raises. */
void job_wait_at_xact_end(bool committed);

/* shmem_request_hook: request the wait slots' shared memory. */
void job_wait_shmem_request();

/* shmem_startup_hook: claim it by name ("awa_shard job wait"), initialising it once. */
void job_wait_shmem_startup();

} // namespace awa
