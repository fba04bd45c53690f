/*
 * validate.cpp — every argument check of the C++ SQL functions, with its SQLSTATE
 * (docs/design.md §12: each argument is checked before anything is written, and a message
 * names the argument). The limits come from limits.hpp.
 */
#include "citus.hpp"
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "ring.hpp"
#include "validate.hpp"

extern "C"
{
#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/varbit.h"
}

#include <cmath>

namespace awa
{

namespace
{

/* Characters of a text value (multibyte-aware). */
int
text_chars(text *t)
{
	return pg_mbstrlen_with_len(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/* A text of 1..max characters (23514). */
text *
checked_text_chars(text *t, int max_chars, const char *argname)
{
	int chars = text_chars(t);

	if (chars < 1 || chars > max_chars)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION), errmsg("%s must be 1 to %d characters long", argname, max_chars),
				 errdetail("The value has %d characters.", chars)));
	return t;
}

} // namespace

/* NULL -> 22004 naming the argument. */
void
require_not_null(bool isnull, const char *argname)
{
	if (isnull)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", argname)));
}

/* A number in [lo, hi]; otherwise `sqlstate` (22023 or 23514) naming the argument. */
int64
checked_between(int64 value, int64 lo, int64 hi, const char *argname, int sqlstate)
{
	if (value < lo || value > hi)
		ereport(ERROR,
				(errcode(sqlstate), errmsg("%s must be between " INT64_FORMAT " and " INT64_FORMAT, argname, lo, hi),
				 errdetail("The value is " INT64_FORMAT ".", value)));
	return value;
}

/* A queue argument: NULL -> 22004, empty or longer than kMaxQueueChars characters -> 23514. */
text *
checked_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	text *queue;

	require_not_null(PG_ARGISNULL(argno), argname);
	queue = checked_text_chars(PG_GETARG_TEXT_PP(argno), kMaxQueueChars, argname);
	/* Under Citus the queue's shard must be on this node (citus.cpp). */
	require_queue_local(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	return queue;
}

/* An optional queue argument (validate.hpp). */
Datum
optional_queue_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return (Datum)0;
	return PointerGetDatum(checked_text_chars(PG_GETARG_TEXT_PP(argno), kMaxQueueChars, argname));
}

/* A queue name longer than any valid one is refused before it is copied into a fixed-size
 * key: internal functions are reachable with any input. */
void
check_queue_bytes(int queue_len)
{
	if (queue_len < 0 || queue_len > kMaxQueueBytes)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("queue name must be at most %d bytes long", kMaxQueueBytes),
						errdetail("The value has %d bytes.", queue_len)));
}

/* Job kind: 1..kMaxKindChars characters (23514). */
Datum
checked_kind(Datum kind, const char *argname)
{
	return PointerGetDatum(checked_text_chars(DatumGetTextPP(kind), kMaxKindChars, argname));
}

/*
 * An integer argument, declared bigint (1.1: any integer type a driver sends converts to it),
 * or integer / smallint in the catalog of an older version still in place before ALTER
 * EXTENSION UPDATE: read as the type the call passes, so no value wraps.
 */
int64
int_arg(FunctionCallInfo fcinfo, int argno)
{
	Oid type = fcinfo->flinfo ? get_fn_expr_argtype(fcinfo->flinfo, argno) : InvalidOid;

	if (type == INT2OID)
		return PG_GETARG_INT16(argno);
	if (type == INT4OID)
		return PG_GETARG_INT32(argno);
	return PG_GETARG_INT64(argno);
}

/* An integer argument that must fit an int (a lane's priority or shard in its name): 22023. */
int
int32_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	return static_cast<int>(
		checked_between(int_arg(fcinfo, argno), PG_INT32_MIN, PG_INT32_MAX, argname, ERRCODE_INVALID_PARAMETER_VALUE));
}

/* Priorities are kMinPriority (most urgent) to kMaxPriority (23514). */
int
checked_priority(int64 priority, const char *argname)
{
	return static_cast<int>(checked_between(priority, kMinPriority, kMaxPriority, argname, ERRCODE_CHECK_VIOLATION));
}

/* max_attempts: 1..kMaxAttempts (23514), the range ready_entries.max_attempts also holds. */
int
checked_max_attempts(int64 value, const char *argname)
{
	return static_cast<int>(checked_between(value, 1, kMaxAttempts, argname, ERRCODE_CHECK_VIOLATION));
}

/*
 * A priority argument declared bigint (1.1; smallint in 1.0): read with int_arg, so 65537 is
 * refused instead of wrapping to 1, and the library serves both catalogs until the update runs.
 */
int
priority_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return checked_priority(int_arg(fcinfo, argno), argname);
}

/* An enqueue shard argument: 0..kMaxEnqueueShards - 1 (22023), read with int_arg (no wrap). */
int
enqueue_shard_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return static_cast<int>(
		checked_between(int_arg(fcinfo, argno), 0, kMaxEnqueueShards - 1, argname, ERRCODE_INVALID_PARAMETER_VALUE));
}

/* A max_attempts argument: 1..kMaxAttempts (23514), read with int_arg (no wrap). */
int
max_attempts_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return checked_max_attempts(int_arg(fcinfo, argno), argname);
}

/* A shard count argument: NULL -> 22004, outside 1..kMaxEnqueueShards -> 22023. */
int
shards_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return static_cast<int>(
		checked_between(int_arg(fcinfo, argno), 1, kMaxEnqueueShards, argname, ERRCODE_INVALID_PARAMETER_VALUE));
}

/* A claim's batch size: NULL -> 22004, outside 1..kMaxClaimBatch -> 22023. */
int64
max_batch_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return checked_between(PG_GETARG_INT64(argno), 1, kMaxClaimBatch, argname, ERRCODE_INVALID_PARAMETER_VALUE);
}

/* A wait in milliseconds: NULL -> 22004, outside 0..kMaxWaitMs -> 22023. */
int
timeout_ms_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_not_null(PG_ARGISNULL(argno), argname);
	return static_cast<int>(
		checked_between(int_arg(fcinfo, argno), 0, kMaxWaitMs, argname, ERRCODE_INVALID_PARAMETER_VALUE));
}

/* A lane reservation's count: NULL -> 22004, above kMaxReserveCount -> 22023 (<= 0 peeks). */
int64
reserve_count_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	int64 count;

	require_not_null(PG_ARGISNULL(argno), argname);
	count = PG_GETARG_INT64(argno);
	if (count > kMaxReserveCount)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be at most %d", argname, kMaxReserveCount),
				 errdetail("The value is " INT64_FORMAT ".", count)));
	return count;
}

/*
 * A number of seconds (NULL = 0): 0, or finite between `min` and kMaxSeconds; 22023 naming
 * the argument otherwise, before any arithmetic can overflow (22008, 22003).
 */
double
seconds_arg(FunctionCallInfo fcinfo, int argno, const char *argname, double min)
{
	double v;

	if (PG_ARGISNULL(argno))
		return 0;
	v = PG_GETARG_FLOAT8(argno);
	if (v == 0)
		return 0;
	if (std::isnan(v) || std::isinf(v) || v < min || v > kMaxSeconds)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be 0 or a number of seconds between %g and %g", argname, min, kMaxSeconds),
						errdetail("The value is %g.", v)));
	return v;
}

/* A ring name argument: 'queue', 'claim' or 'lease' (NULL -> 22004, else 22023). */
Ring
ring_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	const char *name;

	require_not_null(PG_ARGISNULL(argno), argname);
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(name, "queue") == 0)
		return Ring::Queue;
	if (strcmp(name, "claim") == 0)
		return Ring::Claim;
	if (strcmp(name, "lease") != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be queue, claim or lease", argname)));
	return Ring::Lease;
}

/* An array argument must be one-dimensional (22023). */
void
check_one_dimensional(ArrayType *arr, const char *argname)
{
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be a one-dimensional array", argname)));
}

/* An array argument must not hold NULL elements (22004). */
void
check_no_nulls(ArrayType *arr, const char *argname)
{
	if (array_contains_nulls(arr))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not contain nulls", argname)));
}

/* A one-dimensional bigint array argument without NULLs (NULL -> 22004). */
ArrayType *
checked_id_array(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	ArrayType *arr;

	require_not_null(PG_ARGISNULL(argno), argname);
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	check_one_dimensional(arr, argname);
	check_no_nulls(arr, argname);
	return arr;
}

/* Two arrays that pair up element by element must be equally long (22023). */
void
check_same_length(int n_a, int n_b, const char *name_a, const char *name_b)
{
	if (n_a != n_b)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s and %s must have the same number of elements", name_a, name_b),
						errdetail("%s has %d, %s has %d.", name_a, n_a, name_b, n_b)));
}

/* An optional array given beside the one that set the batch size must be as long (22023). */
void
check_batch_length(int count, int n, const char *argname, const char *sized_by)
{
	if (count != n)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must have as many elements as %s", argname, sized_by),
						errdetail("%s has %d elements, %s has %d.", sized_by, n, argname, count)));
}

/* A batch of insert_jobs holds at most kMaxInsertBatch jobs (22023). */
void
check_batch_size(int n, const char *sized_by)
{
	if (n > kMaxInsertBatch)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must hold at most %d jobs", sized_by, kMaxInsertBatch),
						errdetail("The array has %d elements.", n)));
}

/* Metadata must be a JSON object (22023). */
void
check_json_object(Jsonb *jb, const char *argname)
{
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be a JSON object", argname)));
}

/* A result or progress value of at most kMaxResultBytes bytes, uncompressed (22023). */
void
check_json_size(Datum value, const char *argname)
{
	Size bytes = toast_raw_datum_size(value) - VARHDRSZ;

	if (bytes > static_cast<Size>(kMaxResultBytes))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be at most %d bytes of jsonb", argname, kMaxResultBytes),
						errdetail("The value is %zu bytes.", bytes)));
}

/* Tags: a one-dimensional text array of at most kMaxTags non-null tags (22023 / 23514 / 22004). */
void
check_tags(ArrayType *arr, const char *argname)
{
	int n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));

	check_one_dimensional(arr, argname);
	if (n > kMaxTags)
		ereport(ERROR, (errcode(ERRCODE_CHECK_VIOLATION), errmsg("%s must hold at most %d tags", argname, kMaxTags),
						errdetail("The array has %d elements.", n)));
	check_no_nulls(arr, argname);
}

/* Ordering key: at most kMaxOrderingKeyBytes bytes (22023); empty is a key. */
void
check_ordering_key(Datum key, const char *argname)
{
	if (VARSIZE_ANY_EXHDR(DatumGetByteaPP(key)) > kMaxOrderingKeyBytes)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be at most %d bytes", argname, kMaxOrderingKeyBytes)));
}

/* A concurrency key is 1..kMaxConcurrencyKeyBytes bytes; NULL (no key) is checked by the caller. */
void
check_concurrency_key(Datum key, const char *argname)
{
	int len = VARSIZE_ANY_EXHDR(DatumGetTextPP(key));

	if (len < 1 || len > kMaxConcurrencyKeyBytes)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be between 1 and %d bytes", argname, kMaxConcurrencyKeyBytes),
						errdetail("The value has %d bytes.", len), errhint("Pass NULL for a job without a key.")));
}

/* A unique key and its mask: no mask without a key, no empty key, kUniqueMaskBits bits (22023). */
void
check_unique(Datum key, bool key_null, Datum mask, bool mask_null, const char *key_arg, const char *mask_arg)
{
	if (key_null)
	{
		if (!mask_null)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s needs %s", mask_arg, key_arg)));
		return;
	}
	if (VARSIZE_ANY_EXHDR(DatumGetByteaPP(key)) == 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must not be empty", key_arg)));
	if (!mask_null && VARBITLEN(DatumGetVarBitP(mask)) != kUniqueMaskBits)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must have exactly %d bits", mask_arg, kUniqueMaskBits),
						errdetail("The value has %d bits.", VARBITLEN(DatumGetVarBitP(mask)))));
}

/* The state a job is enqueued in: available, scheduled or retryable (22023). Returns the
 * deferred state, or nullptr for available. */
const char *
checked_enqueue_state(Datum state, const char *argname)
{
	const char *name = DatumGetCString(DirectFunctionCall1(enum_out, state));

	if (strcmp(name, "available") != 0 && strcmp(name, "scheduled") != 0 && strcmp(name, "retryable") != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be available, scheduled or retryable", argname),
						errdetail("The value is \"%s\".", name)));
	return strcmp(name, "available") == 0 ? nullptr : name;
}

/* A run_at must be a real point in time: 'infinity' would never run, '-infinity' breaks aging. */
TimestampTz
checked_run_at(TimestampTz run_at, const char *argname)
{
	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be a finite timestamp", argname),
						errdetail("The value is %s.", TIMESTAMP_IS_NOBEGIN(run_at) ? "-infinity" : "infinity")));
	return run_at;
}

/* An element of a bigint[] argument (1.1), or of the smallint[] a 1.0 catalog still passes. */
int64
int_array_element(Datum element, Oid elemtype)
{
	if (elemtype == INT2OID)
		return DatumGetInt16(element);
	if (elemtype == INT4OID)
		return DatumGetInt32(element);
	if (elemtype == INT8OID)
		return DatumGetInt64(element);
	elog(ERROR, "awa_shard: unexpected array element type %u", elemtype);
	pg_unreachable();
}

} // namespace awa

namespace
{

/* The limits of limits.hpp by the names awa._limit knows. */
struct NamedLimit
{
	const char *name;
	int value;
};

constexpr NamedLimit kNamedLimits[] = {
	{"max_queue_chars", awa::kMaxQueueChars},
	{"max_kind_chars", awa::kMaxKindChars},
	{"max_enqueue_shards", awa::kMaxEnqueueShards},
	{"min_priority", awa::kMinPriority},
	{"max_priority", awa::kMaxPriority},
	{"max_attempts", awa::kMaxAttempts},
	{"default_priority", awa::kDefaultPriority},
	{"default_max_attempts", awa::kDefaultMaxAttempts},
	{"max_ordering_key_bytes", awa::kMaxOrderingKeyBytes},
	{"max_tags", awa::kMaxTags},
	{"unique_mask_bits", awa::kUniqueMaskBits},
	{"max_claim_batch", awa::kMaxClaimBatch},
	{"max_insert_batch", awa::kMaxInsertBatch},
	{"max_reserve_count", awa::kMaxReserveCount},
	{"max_wait_ms", awa::kMaxWaitMs},
	{"max_interval_years", awa::kMaxIntervalYears},
	{"max_result_bytes", awa::kMaxResultBytes},
};

} // namespace

/* awa._limit(name) -> integer: a limit of limits.hpp, so SQL states it once (22023 for an unknown name). */
AWA_SQL_FUNCTION(awa_limit)
{
	const char *name;

	awa::require_not_null(PG_ARGISNULL(0), "p_name");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (const NamedLimit &l : kNamedLimits)
		if (strcmp(l.name, name) == 0)
			PG_RETURN_INT32(l.value);
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("awa_shard has no limit named \"%s\"", name)));
	pg_unreachable();
}

/* awa._check_json_size(value, name): 22023 naming the argument when a result or progress is too large. */
AWA_SQL_FUNCTION(awa_check_json_size)
{
	if (!PG_ARGISNULL(0))
		awa::check_json_size(PG_GETARG_DATUM(0), PG_ARGISNULL(1) ? "value" : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}
