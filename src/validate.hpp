/*
 * validate.hpp — every argument check of the SQL functions, each with its SQLSTATE (the
 * limits themselves are in limits.hpp). Defined in validate.cpp.
 */
#pragma once

#include "pg_boundary.hpp"

extern "C"
{
#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/jsonb.h"
}

namespace awa
{

/* A ring of partitions (ring.hpp); ring_arg reads one from an argument. */
enum class Ring;

/* Refuse a queue name longer than kMaxQueueBytes before it is copied into a key. */
void check_queue_bytes(int queue_len);

/* NULL -> 22004 naming the argument. */
void require_not_null(bool isnull, const char *argname);

/* value in [lo, hi], else `sqlstate` (22023 or 23514) "<arg> must be between lo and hi". */
int64 checked_between(int64 value, int64 lo, int64 hi, const char *argname, int sqlstate);

/* Text of a queue argument, checked (NULL -> 22004, 1..kMaxQueueChars characters -> 23514). */
text *checked_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/*
 * An optional queue argument (the queue a call acts in; NULL or absent: any): (Datum)0 when
 * none, else its text checked as checked_queue_arg checks it (23514), without the Citus check.
 */
Datum optional_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* A job kind of 1..kMaxKindChars characters (23514). */
Datum checked_kind(Datum kind, const char *argname);

/* Priority checked to kMinPriority..kMaxPriority (23514). */
int checked_priority(int64 priority, const char *argname);

/* max_attempts checked to 1..kMaxAttempts (23514). */
int checked_max_attempts(int64 value, const char *argname);

/* A finite run_at (22023 for 'infinity' and '-infinity'). */
TimestampTz checked_run_at(TimestampTz run_at, const char *argname);

/* An integer argument (bigint in 1.1, integer or smallint in older catalogs), read as passed. */
int64 int_arg(FunctionCallInfo fcinfo, int argno);
/* The same, refused (22023) outside the range of int. */
int int32_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Integer arguments that were smallint in 1.0, range-checked (no wrap). */
int priority_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int enqueue_shard_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int max_attempts_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Non-null number arguments with their ranges (22004, 22023). */
int shards_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int64 max_batch_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int timeout_ms_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
int64 reserve_count_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Seconds (NULL = 0): 0, or finite in [min, kMaxSeconds] (22023). */
double seconds_arg(FunctionCallInfo fcinfo, int argno, const char *argname, double min);

/* 'queue', 'claim' or 'lease' (22004, 22023). */
Ring ring_arg(FunctionCallInfo fcinfo, int argno, const char *argname);

/* Array arguments: one dimension (22023), no NULL elements (22004), paired lengths (22023). */
void check_one_dimensional(ArrayType *arr, const char *argname);
void check_no_nulls(ArrayType *arr, const char *argname);
ArrayType *checked_id_array(FunctionCallInfo fcinfo, int argno, const char *argname);
void check_same_length(int n_a, int n_b, const char *name_a, const char *name_b);

/* insert_jobs batches: at most kMaxInsertBatch jobs, every optional array as long (22023). */
void check_batch_size(int n, const char *sized_by);
void check_batch_length(int count, int n, const char *argname, const char *sized_by);

/* Job attributes: metadata object, tags, ordering key, unique key and mask, initial state. */
void check_json_object(Jsonb *jb, const char *argname);
void check_json_size(Datum value, const char *argname);
void check_tags(ArrayType *arr, const char *argname);
void check_ordering_key(Datum key, const char *argname);

/* A concurrency key: 1..kMaxConcurrencyKeyBytes bytes (22023). */
void check_concurrency_key(Datum key, const char *argname);
void check_unique(Datum key, bool key_null, Datum mask, bool mask_null, const char *key_arg, const char *mask_arg);
const char *checked_enqueue_state(Datum state, const char *argname);

/* An element of a bigint[] (1.1) or smallint[] (1.0 catalog) argument. */
int64 int_array_element(Datum element, Oid elemtype);

} // namespace awa
