/*
 * enqueue_api.cpp — SQL entry points of the producer path: awa.insert_job_compat (one
 * job, the reference's 12-argument signature), awa.insert_jobs (a batch into one queue)
 * and awa._enqueue_ready (re-entry of existing jobs for promotion, DLQ retry, moves).
 * Every argument is checked (src/validate.cpp) before anything is written (docs/design.md §12).
 */
#include "catalog_version.hpp"
#include "enqueue_core.hpp"
#include "limits.hpp"
#include "pg_boundary.hpp"
#include "shard.hpp"
#include "validate.hpp"

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
#include "utils/tuplestore.h"
#include "utils/typcache.h"
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

	row->set_null(awa::JOB_METADATA);
	if (isnull)
		return;
	jb = DatumGetJsonbP(metadata);
	awa::check_json_object(jb, argname);
	if (JB_ROOT_COUNT(jb) > 0)
		row->set(awa::JOB_METADATA, PointerGetDatum(jb));
}

/* Tags (checked by check_tags); an empty array is stored as NULL. */
void
set_tags(EnqueueRow *row, Datum tags, bool isnull, const char *argname)
{
	ArrayType *arr;
	int n;

	row->set_null(awa::JOB_TAGS);
	if (isnull)
		return;
	arr = DatumGetArrayTypeP(tags);
	awa::check_tags(arr, argname);
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (n > 0)
		row->set(awa::JOB_TAGS, PointerGetDatum(arr));
}

/* Concurrency key (checked by check_concurrency_key); NULL is none. */
void
set_concurrency_key(EnqueueRow *row, Datum key, bool isnull, const char *argname)
{
	row->set_null(awa::JOB_CONCURRENCY_KEY);
	if (isnull)
		return;
	awa::check_concurrency_key(key, argname);
	row->set(awa::JOB_CONCURRENCY_KEY, key);
}

/* Ordering key (checked by check_ordering_key); empty is a key, NULL is none. */
void
set_ordering_key(EnqueueRow *row, Datum key, bool isnull, const char *argname)
{
	row->set_null(awa::JOB_ORDERING_KEY);
	if (isnull)
		return;
	awa::check_ordering_key(key, argname);
	row->set(awa::JOB_ORDERING_KEY, key);
}

/* Unique key (non-empty bytea) with its state mask; a key without a mask gets 11111000. */
void
set_unique(EnqueueRow *row, Datum key, bool key_null, Datum mask, bool mask_null, const char *key_arg,
		   const char *mask_arg)
{
	awa::check_unique(key, key_null, mask, mask_null, key_arg, mask_arg);
	row->set_null(awa::JOB_UNIQUE_KEY);
	row->set_null(awa::JOB_UNIQUE_STATES);
	if (key_null)
		return;
	row->set(awa::JOB_UNIQUE_KEY, key);
	row->set(awa::JOB_UNIQUE_STATES, mask_null ? awa::default_unique_mask() : mask);
}

/* Defaults of a freshly enqueued job: every attribute NULL but those set here. */
void
init_row(EnqueueRow *row, const char *queue, int queue_len, TimestampTz now)
{
	std::memset(row, 0, sizeof(*row));
	for (int c = 0; c < awa::JOB_NCOLUMNS; c++)
		row->set_null(static_cast<awa::JobColumn>(c));
	row->queue = queue;
	row->queue_len = queue_len;
	row->set(awa::JOB_ID, Int64GetDatum(0));
	row->set(awa::JOB_QUEUE, PointerGetDatum(cstring_to_text_with_len(queue, queue_len)));
	row->set(awa::JOB_ARGS, empty_object());
	row->set(awa::JOB_PRIORITY, Int16GetDatum(awa::kDefaultPriority));
	row->set(awa::JOB_ATTEMPT, Int16GetDatum(0));
	row->set(awa::JOB_RUN_LEASE, Int64GetDatum(0));
	row->set(awa::JOB_MAX_ATTEMPTS, Int16GetDatum(awa::kDefaultMaxAttempts));
	row->set(awa::JOB_RUN_AT, TimestampTzGetDatum(now));
	row->set(awa::JOB_CREATED_AT, TimestampTzGetDatum(now));
}

/* A future run_at turns an available job into a scheduled one (never claimable early). */
void
settle_run_at(EnqueueRow *row, TimestampTz now)
{
	if (row->deferred_state == nullptr && DatumGetTimestampTz(row->value[awa::JOB_RUN_AT]) > now)
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
	Oid elemtype; /* the array's own element type (smallint[] from a 1.0 catalog, bigint[] from 1.1) */
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
			if (rows[i].priority() == priority && rows[i].deferred_state == nullptr &&
				rows[i].null[awa::JOB_ORDERING_KEY])
				m++;
		if (m == 0)
			continue;
		run = (m + shards - 1) / shards;
		start = awa::sticky_rotor_shard(queue, queue_len, priority, shards);
		for (int i = 0; i < n; i++)
		{
			if (rows[i].priority() != priority || rows[i].deferred_state != nullptr ||
				!rows[i].null[awa::JOB_ORDERING_KEY])
				continue;
			rows[i].shard = (start + k / run) % shards;
			rows[i].shard_fixed = true;
			k++;
		}
	}
}

/* Arguments of awa.insert_job_compat, by position in its signature. */
enum CompatArg
{
	ARG_KIND,
	ARG_QUEUE,
	ARG_ARGS,
	ARG_STATE,
	ARG_PRIORITY,
	ARG_MAX_ATTEMPTS,
	ARG_RUN_AT,
	ARG_METADATA,
	ARG_TAGS,
	ARG_UNIQUE_KEY,
	ARG_UNIQUE_STATES,
	ARG_ORDERING_KEY,
	ARG_CONCURRENCY_KEY /* 1.1 only */
};

/* The job insert_job_compat's arguments describe, every argument checked. */
EnqueueRow *
compat_row(FunctionCallInfo fcinfo, TimestampTz now)
{
	EnqueueRow *row = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow)));
	const char *queue = "default";
	int queue_len = 7;

	awa::require_not_null(PG_ARGISNULL(ARG_KIND), "p_kind");
	if (!PG_ARGISNULL(ARG_QUEUE))
	{
		text *q = awa::checked_queue_arg(fcinfo, ARG_QUEUE, "p_queue");

		queue = VARDATA_ANY(q);
		queue_len = VARSIZE_ANY_EXHDR(q);
	}
	init_row(row, queue, queue_len, now);
	row->set(awa::JOB_KIND, awa::checked_kind(PG_GETARG_DATUM(ARG_KIND), "p_kind"));
	if (!PG_ARGISNULL(ARG_ARGS))
		row->set(awa::JOB_ARGS, PG_GETARG_DATUM(ARG_ARGS));
	if (!PG_ARGISNULL(ARG_STATE))
		row->deferred_state = awa::checked_enqueue_state(PG_GETARG_DATUM(ARG_STATE), "p_state");
	if (!PG_ARGISNULL(ARG_PRIORITY))
		row->set(awa::JOB_PRIORITY, Int16GetDatum(awa::priority_arg(fcinfo, ARG_PRIORITY, "p_priority")));
	if (!PG_ARGISNULL(ARG_MAX_ATTEMPTS))
		row->set(awa::JOB_MAX_ATTEMPTS,
				 Int16GetDatum(awa::max_attempts_arg(fcinfo, ARG_MAX_ATTEMPTS, "p_max_attempts")));
	if (!PG_ARGISNULL(ARG_RUN_AT))
		row->set(awa::JOB_RUN_AT,
				 TimestampTzGetDatum(awa::checked_run_at(PG_GETARG_TIMESTAMPTZ(ARG_RUN_AT), "p_run_at")));
	set_metadata(row, PG_GETARG_DATUM(ARG_METADATA), PG_ARGISNULL(ARG_METADATA), "p_metadata");
	set_tags(row, PG_GETARG_DATUM(ARG_TAGS), PG_ARGISNULL(ARG_TAGS), "p_tags");
	set_unique(row, PG_GETARG_DATUM(ARG_UNIQUE_KEY), PG_ARGISNULL(ARG_UNIQUE_KEY), PG_GETARG_DATUM(ARG_UNIQUE_STATES),
			   PG_ARGISNULL(ARG_UNIQUE_STATES), "p_unique_key", "p_unique_states");
	set_ordering_key(row, PG_GETARG_DATUM(ARG_ORDERING_KEY), PG_ARGISNULL(ARG_ORDERING_KEY), "p_ordering_key");
	if (PG_NARGS() > ARG_CONCURRENCY_KEY)
		set_concurrency_key(row, PG_GETARG_DATUM(ARG_CONCURRENCY_KEY), PG_ARGISNULL(ARG_CONCURRENCY_KEY),
							"p_concurrency_key");
	settle_run_at(row, now);
	return row;
}

/* Where an attribute of awa.job_row takes its value: a job attribute (>= 0) or one of these. */
enum RowSource : int16
{
	SOURCE_NULL = -1,	  /* dropped, finalized_at, or an attribute the job does not have */
	SOURCE_STATE = -2,	  /* the job's state */
	SOURCE_SHARD = -3,	  /* its enqueue_shard (NULL while deferred) */
	SOURCE_LANE_SEQ = -4, /* its lane_seq (NULL while deferred) */
};

/* The source of an awa.job_row attribute named `attname` (its id is the job_id). */
int16
row_source_of(const char *attname)
{
	if (strcmp(attname, "id") == 0)
		return awa::JOB_ID;
	for (int c = 0; c < awa::JOB_NCOLUMNS; c++)
		if (strcmp(awa::kJobColumns[c].name, attname) == 0)
			return static_cast<int16>(c);
	if (strcmp(attname, "state") == 0)
		return SOURCE_STATE;
	if (strcmp(attname, "enqueue_shard") == 0)
		return SOURCE_SHARD;
	if (strcmp(attname, "lane_seq") == 0)
		return SOURCE_LANE_SEQ;
	return SOURCE_NULL;
}

/* The sources of one version of the row type (its type cache identifier), kept per backend. */
struct RowSources
{
	Oid type;
	uint64 identifier;
	int natts;
	int16 *source;
};
RowSources row_sources = {InvalidOid, 0, 0, nullptr};

/* The source of every attribute of `tupdesc`, worked out by name once per version of the type. */
const int16 *
sources_of(TupleDesc tupdesc, Oid type, uint64 identifier)
{
	if (row_sources.source != nullptr && row_sources.type == type && row_sources.identifier == identifier &&
		identifier != 0 && row_sources.natts == tupdesc->natts)
		return row_sources.source;
	if (row_sources.source != nullptr)
		pfree(row_sources.source);
	row_sources.source =
		static_cast<int16 *>(MemoryContextAlloc(TopMemoryContext, sizeof(int16) * (tupdesc->natts + 1)));
	for (int a = 0; a < tupdesc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, a);

		row_sources.source[a] =
			att->attisdropped ? static_cast<int16>(SOURCE_NULL) : row_source_of(NameStr(att->attname));
	}
	row_sources.type = type;
	row_sources.identifier = identifier;
	row_sources.natts = tupdesc->natts;
	return row_sources.source;
}

/*
 * An enqueued job as awa.job_row (the type cache's descriptor of `type`): the job's
 * attributes, its state and lane (NULL while deferred), and metadata, tags and errors empty
 * rather than NULL, as awa.jobs shows them.
 */
Datum
job_row_datum(const EnqueueRow *row, Oid type)
{
	TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_TUPDESC);
	TupleDesc tupdesc = tce->tupDesc;
	const int16 *source;
	Datum *values;
	bool *nulls;
	Datum result;

	if (tupdesc == nullptr)
		elog(ERROR, "awa_shard: insert_job_compat must return awa.job_row");
	PinTupleDesc(tupdesc);
	source = sources_of(tupdesc, type, tce->tupDesc_identifier);
	values = static_cast<Datum *>(palloc0(sizeof(Datum) * tupdesc->natts));
	nulls = static_cast<bool *>(palloc0(sizeof(bool) * tupdesc->natts));
	for (int a = 0; a < tupdesc->natts; a++)
	{
		int c = source[a];

		if (c == awa::JOB_METADATA && row->null[c])
			values[a] = empty_object();
		else if (c == awa::JOB_TAGS && row->null[c])
			values[a] = PointerGetDatum(construct_empty_array(TEXTOID));
		else if (c == awa::JOB_ERRORS && row->null[c])
			values[a] = empty_array();
		else if (c >= 0)
		{
			values[a] = row->value[c];
			nulls[a] = row->null[c];
		}
		else if (c == SOURCE_STATE)
			values[a] = job_state_datum(TupleDescAttr(tupdesc, a)->atttypid,
										row->deferred_state ? row->deferred_state : "available");
		else if (c == SOURCE_SHARD && row->deferred_state == nullptr)
			values[a] = Int16GetDatum(row->shard);
		else if (c == SOURCE_LANE_SEQ && row->deferred_state == nullptr)
			values[a] = Int64GetDatum(row->lane_seq);
		else
			nulls[a] = true; /* finalized_at; the lane of a deferred job */
	}
	result = HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
	ReleaseTupleDesc(tupdesc);
	return result;
}

} // namespace

/*
 * awa.insert_job_compat(kind, queue, args, state, priority, max_attempts, run_at, metadata,
 * tags, unique_key, unique_states, ordering_key) -> awa.job_row.
 */
Datum
awa::insert_job_compat(FunctionCallInfo fcinfo, Catalog catalog)
{
	TupleDesc tupdesc;
	EnqueueRow *row = compat_row(fcinfo, GetCurrentTimestamp());
	/* The declared result type, read from the call without copying its descriptor. */
	Oid type = get_fn_expr_rettype(fcinfo->flinfo);

	if (!OidIsValid(type) || type == RECORDOID)
	{
		if (get_call_result_type(fcinfo, &type, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "awa_shard: insert_job_compat must return awa.job_row");
	}
	awa::enqueue_rows(row, 1, true, catalog);
	return job_row_datum(row, type);
}

/* awa.insert_job_compat of the 1.1 catalog (unique claims per queue). */
AWA_SQL_FUNCTION(awa_insert_job_compat_1_1)
{
	return awa::insert_job_compat(fcinfo, awa::Catalog::V1_1);
}

/*
 * awa.insert_jobs(queue, kinds[], args[], priorities[], run_ats[], ordering_keys[],
 * max_attempts[], metadata[], unique_keys[], unique_states[], spread_keyless, concurrency_keys[]) -> bigint[] of job
 * ids in input order. A one-element p_kinds is the kind of every job; the batch then has as
 * many jobs as the first optional array given (one when none is). The 1.0 catalog's
 * function has no spread_keyless and no concurrency_keys argument.
 */
Datum
awa::insert_jobs(FunctionCallInfo fcinfo, Catalog catalog)
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
	OptionalArray ckeys = {"p_concurrency_keys", nullptr, nullptr, 0, InvalidOid};
	if (PG_NARGS() > 11)
		ckeys = optional_array(fcinfo, 11, "p_concurrency_keys");
	OptionalArray *optional[] = {&args, &prios, &run_ats, &keys, &maxes, &metas, &ukeys, &umasks, &ckeys};

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
	spread = catalog == Catalog::V1_1 && !PG_ARGISNULL(10) && PG_GETARG_BOOL(10);

	rows = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
	{
		EnqueueRow *row = &rows[i];
		int k = nkinds == 1 ? 0 : i;

		init_row(row, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), now);
		awa::require_not_null(kinds_n[k], "p_kinds element");
		row->set(awa::JOB_KIND, awa::checked_kind(kinds[k], "p_kinds element"));
		if (args.values && !args.nulls[i])
			row->set(awa::JOB_ARGS, args.values[i]);
		if (prios.values && !prios.nulls[i])
			row->set(awa::JOB_PRIORITY,
					 Int16GetDatum(awa::checked_priority(awa::int_array_element(prios.values[i], prios.elemtype),
														 "p_priorities element")));
		if (run_ats.values && !run_ats.nulls[i])
			row->set(awa::JOB_RUN_AT, TimestampTzGetDatum(awa::checked_run_at(DatumGetTimestampTz(run_ats.values[i]),
																			  "p_run_ats element")));
		if (keys.values)
			set_ordering_key(row, keys.values[i], keys.nulls[i], "p_ordering_keys element");
		if (ckeys.values)
			set_concurrency_key(row, ckeys.values[i], ckeys.nulls[i], "p_concurrency_keys element");
		if (maxes.values && !maxes.nulls[i])
			row->set(awa::JOB_MAX_ATTEMPTS,
					 Int16GetDatum(awa::checked_max_attempts(awa::int_array_element(maxes.values[i], maxes.elemtype),
															 "p_max_attempts element")));
		if (metas.values)
			set_metadata(row, metas.values[i], metas.nulls[i], "p_metadata element");
		set_unique(row, ukeys.values ? ukeys.values[i] : 0, ukeys.values ? ukeys.nulls[i] : true,
				   umasks.values ? umasks.values[i] : 0, umasks.values ? umasks.nulls[i] : true,
				   "p_unique_keys element", "p_unique_states element");
		settle_run_at(row, now);
	}
	if (spread && n > 1)
		spread_keyless(rows, n, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
	awa::enqueue_rows(rows, n, true, catalog);

	ids = static_cast<Datum *>(palloc(sizeof(Datum) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
		ids[i] = rows[i].value[awa::JOB_ID];
	PG_RETURN_ARRAYTYPE_P(construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

namespace awa
{

/* Whether a job row's type has a concurrency key (a 1.0 catalog's job tables have none). */
static bool
has_concurrency_key(HeapTupleHeader tup)
{
	TupleDesc desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(tup), HeapTupleHeaderGetTypMod(tup));
	bool found = false;

	for (int a = 0; a < desc->natts && !found; a++)
		found = !TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), kJobColumns[JOB_CONCURRENCY_KEY].name) == 0;
	ReleaseTupleDesc(desc);
	return found;
}

/*
 * Put existing jobs (rows of a job table's type: ids, attempts, keys and bodies kept) back
 * on the ready plane with the destination queue's current width. Keyed rows go to their
 * key's shard; keyless rows through the rotor. run_at restarts now. Every job attribute is
 * read by name (job_columns.hpp). Returns how many rows it enqueued.
 */
int
enqueue_ready_array(ArrayType *arr)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum *elems;
	bool *elem_nulls;
	int n;
	EnqueueRow *rows;
	Catalog catalog = Catalog::V1_1; /* a 1.0 catalog's rows have no concurrency key */

	deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_DOUBLE, &elems, &elem_nulls, &n);
	rows = static_cast<EnqueueRow *>(palloc(sizeof(EnqueueRow) * (n > 0 ? n : 1)));
	for (int i = 0; i < n; i++)
	{
		HeapTupleHeader tup;
		bool isnull;
		text *queue;
		EnqueueRow *row = &rows[i];

		require_not_null(elem_nulls[i], "row");
		tup = DatumGetHeapTupleHeader(elems[i]);
		if (i == 0 && !has_concurrency_key(tup))
			catalog = Catalog::V1_0;
		queue = DatumGetTextPP(GetAttributeByName(tup, "queue", &isnull));
		init_row(row, VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue), now);
		for (int c = 0; c < JOB_NCOLUMNS; c++)
			if (c != JOB_QUEUE && c != JOB_RUN_AT && (c != JOB_CONCURRENCY_KEY || catalog == Catalog::V1_1))
				row->value[c] = GetAttributeByName(tup, kJobColumns[c].name, &row->null[c]);
		if (row->null[JOB_ID] || row->job_id() <= 0 || row->null[JOB_KIND])
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("row %d has no job id or kind", i + 1)));
		checked_priority(row->priority(), "priority");
	}
	enqueue_rows(rows, n, false, catalog);
	return n;
}

} // namespace awa

/* awa._enqueue_ready(rows awa.deferred_jobs[]) -> integer: awa::enqueue_ready_array. */
AWA_SQL_FUNCTION(awa_enqueue_ready)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	PG_RETURN_INT32(awa::enqueue_ready_array(PG_GETARG_ARRAYTYPE_P(0)));
}

/*
 * awa._job_columns() -> (attnum, name, type): the C++ job definition (AWA_JOB_COLUMNS), so
 * that the regression test job_definition can compare it with awa.job_template.
 */
AWA_SQL_FUNCTION(awa_job_columns)
{
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);

	InitMaterializedSRF(fcinfo, 0);
	for (int c = 0; c < awa::JOB_NCOLUMNS; c++)
	{
		Datum values[3] = {Int32GetDatum(c + 1), CStringGetTextDatum(awa::kJobColumns[c].name),
						   CStringGetTextDatum(awa::kJobColumns[c].sql_type)};
		bool nulls[3] = {false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum)0;
}

/* awa.insert_jobs of the 1.1 catalog. */
AWA_SQL_FUNCTION(awa_insert_jobs_1_1)
{
	return awa::insert_jobs(fcinfo, awa::Catalog::V1_1);
}
