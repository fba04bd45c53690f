/*
 * enqueue_api.cpp — SQL entry points of the producer path: awa.insert_job_compat (one
 * job, the reference's 12-argument signature), awa.insert_jobs (a batch into one queue)
 * and awa._enqueue_ready (re-entry of existing jobs for promotion, DLQ retry, moves).
 * Every argument is checked (src/validate.cpp) before anything is written (docs/design.md §12).
 */
#include "enqueue_core.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varbit.h"
}

namespace
{

using awa::EnqueueRow;

/* A jsonb constant parsed once per backend and kept in TopMemoryContext. */
Datum
cached_jsonb(Datum *slot, const char *text)
{
	if (*slot == 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		*slot = DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
		MemoryContextSwitchTo(old);
	}
	return *slot;
}

Datum empty_object_slot = 0;
Datum empty_array_slot = 0;

/* '{}'::jsonb */
Datum
empty_object()
{
	return cached_jsonb(&empty_object_slot, "{}");
}

/* '[]'::jsonb */
Datum
empty_array()
{
	return cached_jsonb(&empty_array_slot, "[]");
}

/* Metadata must be a JSON object (22023); an empty object is stored as NULL. */
void
set_metadata(EnqueueRow *row, Datum metadata, bool isnull, const char *argname)
{
	Jsonb *jb;

	row->metadata_null = true;
	if (isnull)
		return;
	jb = DatumGetJsonbP(metadata);
	awa::check_json_object(jb, argname);
	if (JB_ROOT_COUNT(jb) > 0)
	{
		row->metadata = PointerGetDatum(jb);
		row->metadata_null = false;
	}
}

/* Tags (checked by check_tags); an empty array is stored as NULL. */
void
set_tags(EnqueueRow *row, Datum tags, bool isnull, const char *argname)
{
	ArrayType *arr;
	int n;

	row->tags_null = true;
	if (isnull)
		return;
	arr = DatumGetArrayTypeP(tags);
	awa::check_tags(arr, argname);
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (n > 0)
	{
		row->tags = PointerGetDatum(arr);
		row->tags_null = false;
	}
}

/* Ordering key (checked by check_ordering_key); empty is a key, NULL is none. */
void
set_ordering_key(EnqueueRow *row, Datum key, bool isnull, const char *argname)
{
	row->ordering_key_null = isnull;
	if (isnull)
		return;
	awa::check_ordering_key(key, argname);
	row->ordering_key = key;
}

/* Unique key (non-empty bytea) with its state mask; a key without a mask gets 11111000. */
void
set_unique(EnqueueRow *row, Datum key, bool key_null, Datum mask, bool mask_null, const char *key_arg,
		   const char *mask_arg)
{
	awa::check_unique(key, key_null, mask, mask_null, key_arg, mask_arg);
	row->unique_key_null = key_null;
	row->unique_states_null = true;
	if (key_null)
		return;
	row->unique_key = key;
	row->unique_states = mask_null ? awa::default_unique_mask() : mask;
	row->unique_states_null = false;
}

/* Defaults of a freshly enqueued job. */
void
init_row(EnqueueRow *row, const char *queue, int queue_len, TimestampTz now)
{
	std::memset(row, 0, sizeof(*row));
	row->queue = queue;
	row->queue_len = queue_len;
	row->args = empty_object();
	row->priority = awa::kDefaultPriority;
	row->max_attempts = awa::kDefaultMaxAttempts;
	row->run_at = now;
	row->created_at = now;
	row->attempted_at_null = true;
	row->unique_key_null = row->unique_states_null = row->ordering_key_null = true;
	row->metadata_null = row->tags_null = row->errors_null = true;
}

/* A future run_at turns an available job into a scheduled one (never claimable early). */
void
settle_run_at(EnqueueRow *row, TimestampTz now)
{
	if (row->deferred_state == nullptr && row->run_at > now)
		row->deferred_state = "scheduled";
}

/* An enum value of awa.job_state by label. */
Datum
job_state_datum(Oid enum_type, const char *label)
{
	return DirectFunctionCall2(enum_in, CStringGetDatum(label), ObjectIdGetDatum(enum_type));
}

/* An optional array argument of insert_jobs, deconstructed; length checked once the batch size is known. */
struct OptionalArray
{
	const char *name;
	Datum *values; /* nullptr when the argument is NULL */
	bool *nulls;
	int count;
	Oid elemtype; /* the array's own element type (smallint[] from a 1.0 catalog, integer[] from 1.1) */
};

/* Deconstruct an optional array argument (NULL: every job takes the default); 22023 when multi-dimensional. */
OptionalArray
optional_array(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	OptionalArray a = {argname, nullptr, nullptr, 0, InvalidOid};
	ArrayType *arr;
	int16 typlen;
	bool typbyval;
	char typalign;

	if (PG_ARGISNULL(argno))
		return a;
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	awa::check_one_dimensional(arr, argname);
	a.elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(a.elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, a.elemtype, typlen, typbyval, typalign, &a.values, &a.nulls, &a.count);
	return a;
}

/* Every given optional array must hold n elements, as the array that set the batch size does (22023). */
void
require_batch_length(const OptionalArray &a, int n, const char *sized_by)
{
	if (a.values != nullptr)
		awa::check_batch_length(a.count, n, a.name, sized_by);
}

/*
 * p_spread_keyless: the keyless ready rows of each priority are cut into `shards` contiguous
 * runs (input order kept inside each run), starting at this transaction's rotor pick, instead
 * of all going to the pick. enqueue_rows still locks the lanes in sorted order.
 */
void
spread_keyless(EnqueueRow *rows, int n, const char *queue, int queue_len)
{
	int shards = awa::queue_width(queue, queue_len);

	if (shards <= 1)
		return;
	for (int priority = 1; priority <= 4; priority++)
	{
		int m = 0;
		int run;
		int start;
		int k = 0;

		for (int i = 0; i < n; i++)
			if (rows[i].priority == priority && rows[i].deferred_state == nullptr && rows[i].ordering_key_null)
				m++;
		if (m == 0)
			continue;
		run = (m + shards - 1) / shards;
		start = awa::sticky_rotor_shard(queue, queue_len, priority, shards);
		for (int i = 0; i < n; i++)
		{
			if (rows[i].priority != priority || rows[i].deferred_state != nullptr || !rows[i].ordering_key_null)
				continue;
			rows[i].shard = (start + k / run) % shards;
			rows[i].shard_fixed = true;
			k++;
		}
	}
}

} // namespace

/*
 * awa.insert_job_compat(kind, queue, args, state, priority, max_attempts, run_at, metadata,
 * tags, unique_key, unique_states, ordering_key) -> awa.job_row.
 */
AWA_SQL_FUNCTION(awa_insert_job_compat)
{
	TimestampTz now = GetCurrentTimestamp();
	EnqueueRow *row = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow)));
	const char *queue = "default";
	int queue_len = 7;
	TupleDesc tupdesc;
	Datum values[21];
	bool nulls[21];

	awa::require_not_null(PG_ARGISNULL(0), "p_kind");
	if (!PG_ARGISNULL(1))
	{
		text *q = awa::checked_queue_arg(fcinfo, 1, "p_queue");

		queue = VARDATA_ANY(q);
		queue_len = VARSIZE_ANY_EXHDR(q);
	}
	init_row(row, queue, queue_len, now);
	row->kind = awa::checked_kind(PG_GETARG_DATUM(0), "p_kind");
	if (!PG_ARGISNULL(2))
		row->args = PG_GETARG_DATUM(2);
	if (!PG_ARGISNULL(3))
	{
		row->deferred_state = awa::checked_enqueue_state(PG_GETARG_DATUM(3), "p_state");
	}
	if (!PG_ARGISNULL(4))
		row->priority = awa::priority_arg(fcinfo, 4, "p_priority");
	if (!PG_ARGISNULL(5))
		row->max_attempts = awa::max_attempts_arg(fcinfo, 5, "p_max_attempts");
	if (!PG_ARGISNULL(6))
		row->run_at = awa::checked_run_at(PG_GETARG_TIMESTAMPTZ(6), "p_run_at");
	set_metadata(row, PG_GETARG_DATUM(7), PG_ARGISNULL(7), "p_metadata");
	set_tags(row, PG_GETARG_DATUM(8), PG_ARGISNULL(8), "p_tags");
	set_unique(row, PG_GETARG_DATUM(9), PG_ARGISNULL(9), PG_GETARG_DATUM(10), PG_ARGISNULL(10), "p_unique_key",
			   "p_unique_states");
	set_ordering_key(row, PG_GETARG_DATUM(11), PG_ARGISNULL(11), "p_ordering_key");
	settle_run_at(row, now);

	if (get_call_result_type(fcinfo, nullptr, &tupdesc) != TYPEFUNC_COMPOSITE || tupdesc->natts != 21)
		elog(ERROR, "awa_shard: insert_job_compat must return awa.job_row");
	awa::enqueue_rows(row, 1, true);

	std::memset(nulls, 0, sizeof(nulls));
	values[0] = Int64GetDatum(row->job_id);
	values[1] = row->kind;
	values[2] = PointerGetDatum(cstring_to_text_with_len(row->queue, row->queue_len));
	values[3] = row->args;
	values[4] = job_state_datum(TupleDescAttr(tupdesc, 4)->atttypid,
								row->deferred_state ? row->deferred_state : "available");
	values[5] = Int16GetDatum(row->priority);
	values[6] = Int16GetDatum(0);
	values[7] = Int64GetDatum(0);
	values[8] = Int16GetDatum(row->max_attempts);
	values[9] = TimestampTzGetDatum(row->run_at);
	nulls[10] = nulls[11] = true;
	values[12] = TimestampTzGetDatum(row->created_at);
	values[13] = row->metadata_null ? empty_object() : row->metadata;
	values[14] = row->tags_null ? PointerGetDatum(construct_empty_array(TEXTOID)) : row->tags;
	values[15] = empty_array();
	values[16] = row->unique_key;
	nulls[16] = row->unique_key_null;
	values[17] = row->unique_states;
	nulls[17] = row->unique_states_null;
	values[18] = row->ordering_key;
	nulls[18] = row->ordering_key_null;
	values[19] = Int16GetDatum(row->shard);
	nulls[19] = row->deferred_state != nullptr;
	values[20] = Int64GetDatum(row->lane_seq);
	nulls[20] = row->deferred_state != nullptr;
	tupdesc = BlessTupleDesc(tupdesc);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * awa.insert_jobs(queue, kinds[], args[], priorities[], run_ats[], ordering_keys[],
 * max_attempts[], metadata[], unique_keys[], unique_states[], spread_keyless) -> bigint[] of job
 * ids in input order. A one-element p_kinds is the kind of every job; the batch then has as
 * many jobs as the first optional array given (one when none is).
 */
AWA_SQL_FUNCTION(awa_insert_jobs)
{
	TimestampTz now = GetCurrentTimestamp();
	text *queue = awa::checked_queue_arg(fcinfo, 0, "p_queue");
	ArrayType *kinds_arr;
	Datum *kinds;
	bool *kinds_n;
	int nkinds;
	int n;
	const char *sized_by = "p_kinds";
	bool spread;
	EnqueueRow *rows;
	Datum *ids;

	awa::require_not_null(PG_ARGISNULL(1), "p_kinds");
	kinds_arr = PG_GETARG_ARRAYTYPE_P(1);
	awa::check_one_dimensional(kinds_arr, "p_kinds");
	deconstruct_array(kinds_arr, TEXTOID, -1, false, TYPALIGN_INT, &kinds, &kinds_n, &nkinds);

	OptionalArray args = optional_array(fcinfo, 2, "p_args");
	OptionalArray prios = optional_array(fcinfo, 3, "p_priorities");
	OptionalArray run_ats = optional_array(fcinfo, 4, "p_run_ats");
	OptionalArray keys = optional_array(fcinfo, 5, "p_ordering_keys");
	OptionalArray maxes = optional_array(fcinfo, 6, "p_max_attempts");
	OptionalArray metas = optional_array(fcinfo, 7, "p_metadata");
	OptionalArray ukeys = optional_array(fcinfo, 8, "p_unique_keys");
	OptionalArray umasks = optional_array(fcinfo, 9, "p_unique_states");
	OptionalArray *optional[] = {&args, &prios, &run_ats, &keys, &maxes, &metas, &ukeys, &umasks};

	/* The batch size: p_kinds, or with one kind the first optional array given. */
	n = nkinds;
	if (nkinds == 1)
	{
		for (OptionalArray *a : optional)
		{
			if (a->values != nullptr)
			{
				n = a->count;
				sized_by = a->name;
				break;
			}
		}
	}
	awa::check_batch_size(n, sized_by);
	for (OptionalArray *a : optional)
		require_batch_length(*a, n, sized_by);
	/* Argument 10 exists from 1.1 on; a 1.0 catalog calls with ten arguments. */
	spread = PG_NARGS() > 10 && !PG_ARGISNULL(10) && PG_GETARG_BOOL(10);

	rows = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
	{
		EnqueueRow *row = &rows[i];
		int k = nkinds == 1 ? 0 : i;

		init_row(row, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), now);
		awa::require_not_null(kinds_n[k], "p_kinds element");
		row->kind = awa::checked_kind(kinds[k], "p_kinds element");
		if (args.values && !args.nulls[i])
			row->args = args.values[i];
		if (prios.values && !prios.nulls[i])
			row->priority = awa::checked_priority(awa::int_array_element(prios.values[i], prios.elemtype),
												  "p_priorities element");
		if (run_ats.values && !run_ats.nulls[i])
			row->run_at = awa::checked_run_at(DatumGetTimestampTz(run_ats.values[i]), "p_run_ats element");
		if (keys.values)
			set_ordering_key(row, keys.values[i], keys.nulls[i], "p_ordering_keys element");
		if (maxes.values && !maxes.nulls[i])
			row->max_attempts = awa::checked_max_attempts(awa::int_array_element(maxes.values[i], maxes.elemtype),
														  "p_max_attempts element");
		if (metas.values)
			set_metadata(row, metas.values[i], metas.nulls[i], "p_metadata element");
		set_unique(row, ukeys.values ? ukeys.values[i] : 0, ukeys.values ? ukeys.nulls[i] : true,
				   umasks.values ? umasks.values[i] : 0, umasks.values ? umasks.nulls[i] : true,
				   "p_unique_keys element", "p_unique_states element");
		settle_run_at(row, now);
	}
	if (spread && n > 1)
		spread_keyless(rows, n, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	awa::enqueue_rows(rows, n, true);

	ids = static_cast<Datum *>(palloc(sizeof(Datum) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
		ids[i] = Int64GetDatum(rows[i].job_id);
	PG_RETURN_ARRAYTYPE_P(construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

/*
 * awa._enqueue_ready(rows awa.deferred_jobs[]) -> integer: put existing jobs (ids, attempts,
 * keys and bodies kept) back on the ready plane with the destination queue's current width.
 * Keyed rows go to their key's shard; keyless rows through the rotor. run_at restarts now.
 */
AWA_SQL_FUNCTION(awa_enqueue_ready)
{
	TimestampTz now = GetCurrentTimestamp();
	ArrayType *arr;
	Datum *elems;
	bool *elem_nulls;
	int n;
	EnqueueRow *rows;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_DOUBLE, &elems, &elem_nulls, &n);
	rows = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
	{
		HeapTupleHeader tup;
		bool isnull;
		text *queue;
		EnqueueRow *row = &rows[i];

		awa::require_not_null(elem_nulls[i], "row");
		tup = DatumGetHeapTupleHeader(elems[i]);
		queue = DatumGetTextPP(GetAttributeByName(tup, "queue", &isnull));
		init_row(row, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), now);
		row->job_id = DatumGetInt64(GetAttributeByName(tup, "job_id", &isnull));
		row->kind = GetAttributeByName(tup, "kind", &isnull);
		row->args = GetAttributeByName(tup, "args", &isnull);
		row->priority = awa::checked_priority(DatumGetInt16(GetAttributeByName(tup, "priority", &isnull)), "priority");
		row->attempt = DatumGetInt16(GetAttributeByName(tup, "attempt", &isnull));
		row->run_lease = DatumGetInt64(GetAttributeByName(tup, "run_lease", &isnull));
		row->max_attempts = DatumGetInt16(GetAttributeByName(tup, "max_attempts", &isnull));
		row->created_at = DatumGetTimestampTz(GetAttributeByName(tup, "created_at", &isnull));
		row->attempted_at = GetAttributeByName(tup, "attempted_at", &row->attempted_at_null);
		row->unique_key = GetAttributeByName(tup, "unique_key", &row->unique_key_null);
		row->unique_states = GetAttributeByName(tup, "unique_states", &row->unique_states_null);
		row->ordering_key = GetAttributeByName(tup, "ordering_key", &row->ordering_key_null);
		row->metadata = GetAttributeByName(tup, "metadata", &row->metadata_null);
		row->tags = GetAttributeByName(tup, "tags", &row->tags_null);
		row->errors = GetAttributeByName(tup, "errors", &row->errors_null);
		if (row->job_id <= 0 || row->kind == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("row %d has no job id or kind", i + 1)));
	}
	awa::enqueue_rows(rows, n, false);
	PG_RETURN_INT32(n);
}
