/*
 * enqueue.cpp — enqueue_rows, the one enqueue routine behind every producer path
 * (docs/design.md §3 and §7): routing, one reservation per lane in sorted lane order,
 * one multi-row INSERT for the ready rows and one for the deferred rows, unique claims,
 * and the note that wakes the queue's waiters at commit.
 * Its SQL entry points (awa.insert_job_compat, awa.insert_jobs, awa._enqueue_ready) are
 * in enqueue_api.cpp.
 */
#include "enqueue_core.hpp"
#include "ordering_hash.hpp"
#include "shard_math.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/varbit.h"
}

namespace awa
{

namespace
{

SPIPlanPtr ready_plan = nullptr;
SPIPlanPtr ready_one_plan = nullptr;
SPIPlanPtr deferred_plan = nullptr;
SPIPlanPtr unique_plan = nullptr;

const char *const kStateNames[8] = {"scheduled", "available", "running",   "completed",
									"retryable", "failed",	  "cancelled", "waiting_external"};

Oid job_seq_oid = InvalidOid;

/* OID of awa.job_id_seq, looked up by name once and forgotten when that relation changes. */
Oid
job_id_sequence()
{
	if (!OidIsValid(job_seq_oid))
	{
		Oid nsp = get_namespace_oid("awa", false);

		job_seq_oid = get_relname_relid("job_id_seq", nsp);
		if (!OidIsValid(job_seq_oid))
			elog(ERROR, "awa_shard: sequence awa.job_id_seq is missing");
	}
	return job_seq_oid;
}

/* Relcache invalidation: DROP/CREATE EXTENSION gives the sequence a new OID. */
void
on_relcache_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == job_seq_oid)
		job_seq_oid = InvalidOid;
}

/* Element accessors for building parameter arrays. */
struct Column
{
	Datum *values;
	bool *nulls;
};

/* A palloc'd column of n entries. */
Column
new_column(int n)
{
	Column c;

	c.values = static_cast<Datum *>(palloc0(sizeof(Datum) * (n > 0 ? n : 1)));
	c.nulls = static_cast<bool *>(palloc0(sizeof(bool) * (n > 0 ? n : 1)));
	return c;
}

/* One-dimensional array Datum of a column. */
Datum
column_array(const Column &c, int n, Oid elemtype)
{
	int16 typlen;
	bool typbyval;
	char typalign;
	int dims[1] = {n};
	int lbs[1] = {1};

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(c.values, c.nulls, 1, dims, lbs, elemtype, typlen, typbyval, typalign));
}

/* Comparison of two ready rows by lane, then input position (FIFO inside a lane). */
int
compare_row_lanes(const void *a, const void *b, void *arg)
{
	const EnqueueRow *rows = static_cast<const EnqueueRow *>(arg);
	int ia = *static_cast<const int *>(a);
	int ib = *static_cast<const int *>(b);
	LaneRef la{rows[ia].queue, static_cast<std::size_t>(rows[ia].queue_len), rows[ia].priority, rows[ia].shard};
	LaneRef lb{rows[ib].queue, static_cast<std::size_t>(rows[ib].queue_len), rows[ib].priority, rows[ib].shard};
	int c = compare_lanes(la, lb);

	if (c != 0)
		return c;
	return ia < ib ? -1 : (ia > ib ? 1 : 0);
}

/* Shard of one ready row: keyed -> hash mod width; keyless -> sticky rotor pick. */
int
route_row(const EnqueueRow &row)
{
	int shards = queue_width(row.queue, row.queue_len);

	if (!row.ordering_key_null)
	{
		bytea *key = DatumGetByteaPP(row.ordering_key);

		return shard_for_hash(
			ordering_key_hash(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key)),
			shards);
	}
	return sticky_rotor_shard(row.queue, row.queue_len, row.priority, shards);
}

/* Insert the unique claims of rows whose mask holds their initial state (conflict -> 23505). */
void
claim_unique_keys(EnqueueRow *rows, int n)
{
	static const Oid argtypes[2] = {BYTEAARRAYOID, INT8ARRAYOID};
	Column keys = new_column(n), ids = new_column(n);
	int m = 0;
	Datum values[2];

	for (int i = 0; i < n; i++)
	{
		const char *state = rows[i].deferred_state ? rows[i].deferred_state : "available";

		if (rows[i].unique_key_null || rows[i].unique_states_null || !mask_has_state(rows[i].unique_states, state))
			continue;
		keys.values[m] = rows[i].unique_key;
		ids.values[m] = Int64GetDatum(rows[i].job_id);
		m++;
	}
	if (m == 0)
		return;
	keep_plan(&unique_plan,
			  "INSERT INTO awa.job_unique_claims (unique_key, job_id) SELECT * FROM unnest($1::bytea[], $2::bigint[])",
			  2, argtypes);
	values[0] = column_array(keys, m, BYTEAOID);
	values[1] = column_array(ids, m, INT8OID);
	exec_plan(unique_plan, values, nullptr, false, 0, SPI_OK_INSERT, "unique claim insert");
}

/* Parameter columns shared by the ready and deferred inserts. */
enum BodyColumn
{
	C_JOB_ID,
	C_KIND,
	C_QUEUE,
	C_ARGS,
	C_PRIORITY,
	C_ATTEMPT,
	C_RUN_LEASE,
	C_MAX_ATTEMPTS,
	C_RUN_AT,
	C_CREATED_AT,
	C_ATTEMPTED_AT,
	C_UNIQUE_KEY,
	C_UNIQUE_STATES,
	C_ORDERING_KEY,
	C_METADATA,
	C_TAGS,
	C_ERRORS,
	C_EXTRA1, /* ready: lane_seq; deferred: state */
	C_EXTRA2, /* ready: enqueue_shard */
	C_COUNT
};

const Oid kBodyTypes[C_COUNT] = {INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, INT2ARRAYOID,
								 INT2ARRAYOID, INT8ARRAYOID, INT2ARRAYOID, TIMESTAMPTZARRAYOID,
								 TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, BYTEAARRAYOID, VARBITARRAYOID,
								 BYTEAARRAYOID, JSONBARRAYOID, TEXTARRAYOID, JSONBARRAYOID, INT8ARRAYOID,
								 INT2ARRAYOID};
const Oid kBodyElems[C_COUNT] = {INT8OID, TEXTOID, TEXTOID, JSONBOID, INT2OID, INT2OID, INT8OID, INT2OID,
								 TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BYTEAOID, VARBITOID,
								 BYTEAOID, JSONBOID, TEXTOID, JSONBOID, INT8OID, INT2OID};

/* Fill the body columns of row i at position m (tags travel as text[] literals). */
void
fill_body(Column *cols, int m, const EnqueueRow &r)
{
	cols[C_JOB_ID].values[m] = Int64GetDatum(r.job_id);
	cols[C_KIND].values[m] = r.kind;
	cols[C_QUEUE].values[m] = PointerGetDatum(cstring_to_text_with_len(r.queue, r.queue_len));
	cols[C_ARGS].values[m] = r.args;
	cols[C_PRIORITY].values[m] = Int16GetDatum(r.priority);
	cols[C_ATTEMPT].values[m] = Int16GetDatum(r.attempt);
	cols[C_RUN_LEASE].values[m] = Int64GetDatum(r.run_lease);
	cols[C_MAX_ATTEMPTS].values[m] = Int16GetDatum(r.max_attempts);
	cols[C_RUN_AT].values[m] = TimestampTzGetDatum(r.run_at);
	cols[C_CREATED_AT].values[m] = TimestampTzGetDatum(r.created_at);
	cols[C_ATTEMPTED_AT].values[m] = r.attempted_at;
	cols[C_ATTEMPTED_AT].nulls[m] = r.attempted_at_null;
	cols[C_UNIQUE_KEY].values[m] = r.unique_key;
	cols[C_UNIQUE_KEY].nulls[m] = r.unique_key_null;
	cols[C_UNIQUE_STATES].values[m] = r.unique_states;
	cols[C_UNIQUE_STATES].nulls[m] = r.unique_states_null;
	cols[C_ORDERING_KEY].values[m] = r.ordering_key;
	cols[C_ORDERING_KEY].nulls[m] = r.ordering_key_null;
	cols[C_METADATA].values[m] = r.metadata;
	cols[C_METADATA].nulls[m] = r.metadata_null;
	if (!r.tags_null)
		cols[C_TAGS].values[m] = DirectFunctionCall1(textin, OidFunctionCall1(F_ARRAY_OUT, r.tags)); /* array_out needs flinfo */
	cols[C_TAGS].nulls[m] = r.tags_null;
	cols[C_ERRORS].values[m] = r.errors;
	cols[C_ERRORS].nulls[m] = r.errors_null;
}

/* Execute an insert whose parameters are the body columns, then the ring slot when `ring` is set. */
void
insert_body(SPIPlanPtr *slot, const char *sql, Column *cols, int m, const RingSlot *ring, const char *what)
{
	Oid types[C_COUNT + 2];
	Datum values[C_COUNT + 2];
	char nulls[C_COUNT + 2];
	int nargs = C_COUNT;

	memcpy(types, kBodyTypes, sizeof(kBodyTypes));
	for (int c = 0; c < C_COUNT; c++)
	{
		values[c] = column_array(cols[c], m, kBodyElems[c]);
		nulls[c] = ' ';
	}
	if (ring != nullptr)
	{
		types[C_COUNT] = INT4OID;
		types[C_COUNT + 1] = INT8OID;
		values[C_COUNT] = Int32GetDatum(ring->slot);
		values[C_COUNT + 1] = Int64GetDatum(ring->generation);
		nulls[C_COUNT] = nulls[C_COUNT + 1] = ' ';
		nargs += 2;
	}
	keep_plan(slot, sql, nargs, types);
	exec_plan(*slot, values, nulls, false, 0, SPI_OK_INSERT, what);
}

#define AWA_UNNEST_BODY                                                                                  \
	"unnest($1::bigint[], $2::text[], $3::text[], $4::jsonb[], $5::int2[], $6::int2[], $7::int8[], "    \
	"$8::int2[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::bytea[], $13::varbit[], " \
	"$14::bytea[], $15::jsonb[], $16::text[], $17::jsonb[], $18::int8[], $19::int2[]) "                   \
	"AS u(job_id, kind, queue, args, priority, attempt, run_lease, max_attempts, run_at, created_at, "   \
	"attempted_at, unique_key, unique_states, ordering_key, metadata, tags, errors, extra1, extra2)"

/* Ready rows land in the queue ring's write slot ($20, generation $21), fenced against prune. */
const char *const kReadyInsertSql =
	"INSERT INTO awa.ready_entries (ready_slot, ready_generation, job_id, kind, queue, args, "
	"priority, attempt, run_lease, max_attempts, run_at, created_at, attempted_at, unique_key, "
	"unique_states, ordering_key, metadata, tags, errors, lane_seq, enqueue_shard) "
	"SELECT $20, $21, u.job_id, u.kind, u.queue, u.args, u.priority, "
	"u.attempt, u.run_lease, u.max_attempts, u.run_at, u.created_at, u.attempted_at, "
	"u.unique_key, u.unique_states::bit(8), u.ordering_key, u.metadata, u.tags::text[], "
	"u.errors, u.extra1, u.extra2 FROM " AWA_UNNEST_BODY;

/* One ready row (the common single-job path): plain VALUES, no arrays to build and unnest. */
const char *const kReadyInsertOneSql =
	"INSERT INTO awa.ready_entries (ready_slot, ready_generation, job_id, kind, queue, args, "
	"priority, attempt, run_lease, max_attempts, run_at, created_at, attempted_at, unique_key, "
	"unique_states, ordering_key, metadata, tags, errors, lane_seq, enqueue_shard) "
	"VALUES ($20, $21, "
	"$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::bit(8), $14, $15, $16, $17, $18, $19)";

const Oid kOneTypes[C_COUNT + 2] = {INT8OID, TEXTOID, TEXTOID, JSONBOID, INT2OID, INT2OID, INT8OID,
									INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BYTEAOID,
									VARBITOID, BYTEAOID, JSONBOID, TEXTARRAYOID, JSONBOID, INT8OID,
									INT2OID, INT4OID, INT8OID};

/* Insert a single ready row with scalar parameters. */
void
insert_one_ready(const EnqueueRow &r, const RingSlot &ring)
{
	Datum values[C_COUNT + 2];
	char nulls[C_COUNT + 2];

	keep_plan(&ready_one_plan, kReadyInsertOneSql, C_COUNT + 2, kOneTypes);
	memset(nulls, ' ', sizeof(nulls));
	values[C_JOB_ID] = Int64GetDatum(r.job_id);
	values[C_KIND] = r.kind;
	values[C_QUEUE] = PointerGetDatum(cstring_to_text_with_len(r.queue, r.queue_len));
	values[C_ARGS] = r.args;
	values[C_PRIORITY] = Int16GetDatum(r.priority);
	values[C_ATTEMPT] = Int16GetDatum(r.attempt);
	values[C_RUN_LEASE] = Int64GetDatum(r.run_lease);
	values[C_MAX_ATTEMPTS] = Int16GetDatum(r.max_attempts);
	values[C_RUN_AT] = TimestampTzGetDatum(r.run_at);
	values[C_CREATED_AT] = TimestampTzGetDatum(r.created_at);
	values[C_ATTEMPTED_AT] = r.attempted_at;
	nulls[C_ATTEMPTED_AT] = r.attempted_at_null ? 'n' : ' ';
	values[C_UNIQUE_KEY] = r.unique_key;
	nulls[C_UNIQUE_KEY] = r.unique_key_null ? 'n' : ' ';
	values[C_UNIQUE_STATES] = r.unique_states;
	nulls[C_UNIQUE_STATES] = r.unique_states_null ? 'n' : ' ';
	values[C_ORDERING_KEY] = r.ordering_key;
	nulls[C_ORDERING_KEY] = r.ordering_key_null ? 'n' : ' ';
	values[C_METADATA] = r.metadata;
	nulls[C_METADATA] = r.metadata_null ? 'n' : ' ';
	values[C_TAGS] = r.tags;
	nulls[C_TAGS] = r.tags_null ? 'n' : ' ';
	values[C_ERRORS] = r.errors;
	nulls[C_ERRORS] = r.errors_null ? 'n' : ' ';
	values[C_EXTRA1] = Int64GetDatum(r.lane_seq);
	values[C_EXTRA2] = Int16GetDatum(r.shard);
	values[C_COUNT] = Int32GetDatum(ring.slot);
	values[C_COUNT + 1] = Int64GetDatum(ring.generation);
	exec_plan(ready_one_plan, values, nulls, false, 0, SPI_OK_INSERT, "ready insert");
}

/* Deferred rows: extra2 = 1 marks retryable, 0 scheduled. */
const char *const kDeferredInsertSql =
	"INSERT INTO awa.deferred_jobs (job_id, kind, queue, args, state, priority, attempt, "
	"run_lease, max_attempts, run_at, created_at, attempted_at, unique_key, unique_states, "
	"ordering_key, metadata, tags, errors) "
	"SELECT u.job_id, u.kind, u.queue, u.args, "
	"CASE WHEN u.extra2 = 1 THEN 'retryable' ELSE 'scheduled' END::awa.job_state, "
	"u.priority, u.attempt, u.run_lease, u.max_attempts, u.run_at, u.created_at, "
	"u.attempted_at, u.unique_key, u.unique_states::bit(8), u.ordering_key, u.metadata, "
	"u.tags::text[], u.errors FROM " AWA_UNNEST_BODY;

} // namespace

/* Register the invalidation hook of the cached job id sequence. */
void
init_enqueue_cache()
{
	CacheRegisterRelcacheCallback(on_relcache_inval, PointerGetDatum(nullptr));
}

/* Bit p (0 = leftmost = scheduled) of a bit(8) mask. */
bool
mask_has_state(Datum mask, const char *state)
{
	VarBit *vb = DatumGetVarBitP(mask);

	for (int p = 0; p < 8; p++)
	{
		if (strcmp(kStateNames[p], state) == 0)
		{
			if (VARBITLEN(vb) <= p)
				return false;
			return ((VARBITS(vb)[p / 8] >> (7 - (p % 8))) & 1) != 0;
		}
	}
	return false;
}

Datum
default_unique_mask()
{
	return DirectFunctionCall3(bit_in, CStringGetDatum("11111000"), ObjectIdGetDatum(InvalidOid), Int32GetDatum(8));
}

void
enqueue_rows(EnqueueRow *rows, int n, bool claim_unique_keys_flag)
{
	int *order;
	int nready = 0;
	int ndeferred = 0;
	Oid idseq = InvalidOid;
	RingSlot ring = {0, 0};

	if (n == 0)
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");

	/* Ids first: they are the unique-claim owners and the returned values. */
	for (int i = 0; i < n; i++)
	{
		if (rows[i].job_id == 0)
		{
			if (!OidIsValid(idseq))
				idseq = job_id_sequence();
			rows[i].job_id = nextval_internal(idseq, false);
		}
	}
	if (claim_unique_keys_flag)
		claim_unique_keys(rows, n);

	/* Route ready rows, then reserve one block per lane in (queue, priority, shard) order. */
	order = static_cast<int *>(palloc(sizeof(int) * n));
	for (int i = 0; i < n; i++)
	{
		if (rows[i].deferred_state != nullptr)
			continue;
		if (!rows[i].shard_fixed)
			rows[i].shard = route_row(rows[i]);
		order[nready++] = i;
	}
	qsort_arg(order, nready, sizeof(int), compare_row_lanes, rows);
	for (int k = 0; k < nready;)
	{
		int first = order[k];
		int end = k + 1;
		int64 start;

		while (end < nready && rows[order[end]].priority == rows[first].priority &&
			   rows[order[end]].shard == rows[first].shard && rows[order[end]].queue_len == rows[first].queue_len &&
			   memcmp(rows[order[end]].queue, rows[first].queue, rows[first].queue_len) == 0)
			end++;
		start = reserve_lane_block(rows[first].queue, rows[first].queue_len, rows[first].priority,
								   rows[first].shard, end - k);
		for (int j = k; j < end; j++)
			rows[order[j]].lane_seq = start + (j - k);
		k = end;
	}

	if (nready > 0)
		ring = ring_write_slot(Ring::Queue);
	if (nready == 1)
		insert_one_ready(rows[order[0]], ring);
	else if (nready > 1)
	{
		Column cols[C_COUNT];

		for (int c = 0; c < C_COUNT; c++)
			cols[c] = new_column(nready);
		for (int k = 0; k < nready; k++)
		{
			const EnqueueRow &r = rows[order[k]];

			fill_body(cols, k, r);
			cols[C_EXTRA1].values[k] = Int64GetDatum(r.lane_seq);
			cols[C_EXTRA2].values[k] = Int16GetDatum(r.shard);
		}
		insert_body(&ready_plan, kReadyInsertSql, cols, nready, &ring, "ready insert");
	}
	/* Wake-ups once per queue, counters once per lane (rows are in lane order). */
	for (int k = 0, lane_start = 0; k < nready; k++)
	{
		const EnqueueRow &r = rows[order[k]];
		bool last_of_lane = (k + 1 == nready) || rows[order[k + 1]].shard != r.shard ||
							rows[order[k + 1]].priority != r.priority || rows[order[k + 1]].queue_len != r.queue_len ||
							memcmp(rows[order[k + 1]].queue, r.queue, r.queue_len) != 0;

		if (k == 0 || r.queue_len != rows[order[k - 1]].queue_len ||
			memcmp(r.queue, rows[order[k - 1]].queue, r.queue_len) != 0)
			note_enqueued(r.queue, r.queue_len);
		if (last_of_lane)
		{
			stats_add(r.queue, r.queue_len, r.shard, StatKind::Enqueued, k + 1 - lane_start);
			lane_start = k + 1;
		}
	}

	for (int i = 0; i < n; i++)
		if (rows[i].deferred_state != nullptr)
			ndeferred++;
	if (ndeferred > 0)
	{
		Column cols[C_COUNT];
		int m = 0;

		for (int c = 0; c < C_COUNT; c++)
			cols[c] = new_column(ndeferred);
		for (int i = 0; i < n; i++)
		{
			if (rows[i].deferred_state == nullptr)
				continue;
			fill_body(cols, m, rows[i]);
			cols[C_EXTRA1].nulls[m] = true;
			m++;
		}
		m = 0;
		for (int i = 0; i < n; i++)
		{
			if (rows[i].deferred_state == nullptr)
				continue;
			cols[C_EXTRA2].values[m] = Int16GetDatum(strcmp(rows[i].deferred_state, "retryable") == 0 ? 1 : 0);
			cols[C_EXTRA2].nulls[m] = false;
			m++;
		}
		insert_body(&deferred_plan, kDeferredInsertSql, cols, ndeferred, nullptr, "deferred insert");
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
}

} // namespace awa
