/*
 * limits.hpp — the named limits and defaults of awa_shard's arguments, in one place.
 *
 * Pure C++ (no PostgreSQL header): the routing arithmetic and its unit tests use it too.
 * The SQL side states some of these numbers again where SQL needs them (table CHECKs and
 * defaults of the released scripts, plpgsql checks); awa._limit(name) exposes the values
 * below to SQL and the regression test `limits` proves that the two sides agree.
 */
#pragma once

namespace awa
{

/* Queue names and job kinds: 1 to 200 characters (23514). */
constexpr int kMaxQueueChars = 200;
constexpr int kMaxKindChars = 200;
/* The same limit in bytes (UTF-8: at most 4 bytes a character), for fixed-size keys. */
constexpr int kMaxQueueBytes = kMaxQueueChars * 4;

/* Width of a queue, awa.queue_meta.enqueue_shards: 1..64; shard numbers are 0..63. */
constexpr int kMaxEnqueueShards = 64;

/* Priorities: 1 (most urgent) to 4. */
constexpr int kMinPriority = 1;
constexpr int kMaxPriority = 4;

/* max_attempts of a job: 1..1000. */
constexpr int kMaxAttempts = 1000;

/* What a job gets when the caller gives nothing (insert_job_compat's DEFAULTs say the same). */
constexpr int kDefaultPriority = 2;
constexpr int kDefaultMaxAttempts = 25;

/* Ordering keys: at most 1024 bytes. Tags: at most 20 a job. */
constexpr int kMaxOrderingKeyBytes = 1024;
/* A concurrency key (docs/api.md, "Flow control"): 1..200 bytes; NULL is no key. */
constexpr int kMaxConcurrencyKeyBytes = 200;
constexpr int kMaxTags = 20;

/* Unique-state masks: one bit per awa.job_state, leftmost = the first state of the enum. */
constexpr int kUniqueMaskBits = 8;

/* Jobs one call may handle: a claim batch, an insert_jobs batch, a lane reservation. */
constexpr int kMaxClaimBatch = 10000;
constexpr int kMaxInsertBatch = 100000;
constexpr int kMaxReserveCount = 1000000;

/*
 * A job's result (complete_jobs) and its progress (set_progress): at most 1 MiB each, the
 * size of the stored jsonb value before compression (22023).
 */
constexpr int kMaxResultBytes = 1024 * 1024;

/* Longest wait_for_jobs timeout: one hour. */
constexpr int kMaxWaitMs = 3600 * 1000;

/* Claim deadlines and aging steps: 0 (none), or finite from the minimum up to ten years. */
constexpr double kMaxSeconds = 10.0 * 365 * 24 * 3600;
/*
 * Longest interval argument (retry and snooze delays, staleness and age thresholds): 1000
 * years; now plus or minus it is always a valid timestamp (longer ones overflowed, 22008).
 */
constexpr int kMaxIntervalYears = 1000;
/* Shortest aging step: a smaller one would overflow the priority arithmetic. */
constexpr double kMinAgingSeconds = 0.001;

} // namespace awa
