/*
 * counted_wait.hpp — a condition variable in shared memory with a count of the events it
 * announces (counted_wait.cpp): a waiter reads the count before it looks for what it waits
 * for, and sleeps only while the count has not moved, so an event between its look and its
 * sleep is never missed. Used by awa.wait_for_job (job_wait.cpp) and by claims waiting for a
 * held lane head (head_wait.cpp).
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "utils/timestamp.h"
}

#include <cstdint>

namespace awa
{

/* One counted wait: the events announced so far, and the sleepers waiting for the next. */
struct CountedWait
{
	ConditionVariable cv;
	pg_atomic_uint64 count;
};

/* Initialise a counted wait in shared memory (shmem startup). */
void counted_wait_init(CountedWait *w);

/* The count, read before the waiter looks for what it waits for. */
std::uint64_t counted_wait_seen(CountedWait *w);

/* Count one event, then wake every sleeper (all) or one of them. */
void counted_wait_announce(CountedWait *w, bool all);

/* Sleep until the count moves from `seen` or `deadline` passes; true when it moved. */
bool counted_wait_sleep(CountedWait *w, std::uint64_t seen, TimestampTz deadline);

} // namespace awa
