/*
 * enqueue.cpp — enqueue_rows, the one enqueue routine behind every producer path
 * (docs/design.md §3 and §7): routing, one reservation per lane in sorted lane order,
 * one multi-row INSERT for the ready rows and one for the deferred rows, unique claims,
 * and the note that wakes the queue's waiters at commit.
 * Its SQL entry points (awa.insert_job_compat, awa.insert_jobs, awa._enqueue_ready) are
 * in enqueue_api.cpp.
 */
#include "enqueue.hpp"
#include "relcache_watch.hpp"
#include "citus.hpp"
#include "compat_1_0.hpp"
#include "direct_insert.hpp"
#include "enqueue_core.hpp"
#include "ordering_hash.hpp"
#include "reserve.hpp"
#include "ring.hpp"
#include "shard.hpp"
#include "shard_math.hpp"
#include "spi_util.hpp"
#include "stats.hpp"
#include "wakeup.hpp"

extern "C"
{
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/varbit.h"
}

namespace awa
{

namespace
{

SPIPlanPtr ready_plan[2] = {nullptr, nullptr};	   /* by awa::Catalog */
SPIPlanPtr ready_one_plan[2] = {nullptr, nullptr}; /* by awa::Catalog */
SPIPlanPtr deferred_plan[2] = {nullptr, nullptr};  /* by awa::Catalog */
SPIPlanPtr unique_plan[2] = {nullptr, nullptr};	   /* by awa::Catalog */

Oid job_seq_oid = InvalidOid;
Oid ready_parent_oid = InvalidOid;

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

/* OID of awa.ready_entries, the parent of the queue ring's partitions, cached like the sequence's. */
Oid
ready_parent()
{
	if (!OidIsValid(ready_parent_oid))
	{
		ready_parent_oid = get_relname_relid("ready_entries", get_namespace_oid("awa", false));
		if (!OidIsValid(ready_parent_oid))
			elog(ERROR, "awa_shard: table awa.ready_entries is missing");
	}
	return ready_parent_oid;
}

/* Relcache invalidation: DROP/CREATE EXTENSION gives the sequence and the table new OIDs. */
void
on_relcache_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == job_seq_oid)
		job_seq_oid = InvalidOid;
	if (relid == InvalidOid || relid == ready_parent_oid)
		ready_parent_oid = InvalidOid;
}

/* One parameter column of a batch insert: n values and their null flags. */
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

/* Whether two rows are in the same queue. */
bool
same_queue(const EnqueueRow &a, const EnqueueRow &b)
{
	return a.queue_len == b.queue_len && memcmp(a.queue, b.queue, a.queue_len) == 0;
}

/* Whether two routed rows are in the same lane (queue, priority, shard). */
bool
same_lane(const EnqueueRow &a, const EnqueueRow &b)
{
	return a.priority() == b.priority() && a.shard == b.shard && same_queue(a, b);
}

/* Comparison of two ready rows by lane, then input position (FIFO inside a lane). */
int
compare_row_lanes(const void *a, const void *b, void *arg)
{
	const EnqueueRow *rows = static_cast<const EnqueueRow *>(arg);
	int ia = *static_cast<const int *>(a);
	int ib = *static_cast<const int *>(b);
	LaneRef la{rows[ia].queue, static_cast<std::size_t>(rows[ia].queue_len), rows[ia].priority(), rows[ia].shard};
	LaneRef lb{rows[ib].queue, static_cast<std::size_t>(rows[ib].queue_len), rows[ib].priority(), rows[ib].shard};
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

	if (!row.null[JOB_ORDERING_KEY])
	{
		bytea *key = DatumGetByteaPP(row.value[JOB_ORDERING_KEY]);

		return shard_for_hash(
			ordering_key_hash(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key)),
			shards);
	}
	return sticky_rotor_shard(row.queue, row.queue_len, row.priority(), shards);
}

/* Parameters of the unique-claim insert. */
enum UniqueParam
{
	UQ_KEY,
	UQ_JOB_ID,
	UQ_QUEUE,
	UQ_NPARAMS
};

/* The unique claims of one call: a key held already is raised by the index. */
const char *const kUniqueInsertIndexSql = "INSERT INTO awa.job_unique_claims (unique_key, job_id, queue) "
										  "SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::text[])";

/* The unique-claim insert's plan and parameters, for run_naming_shard_index. */
struct UniqueInsert
{
	SPIPlanPtr plan;
	Datum *values;
};

/* Run the unique-claim insert (conflict -> 23505). */
void
insert_unique_claims(void *arg)
{
	UniqueInsert *insert = static_cast<UniqueInsert *>(arg);

	exec_plan(insert->plan, insert->values, nullptr, false, 0, SPI_OK_INSERT, "unique claim insert");
}

/*
 * Insert the unique claims of rows whose mask holds their initial state (conflict -> 23505):
 * per queue on a 1.1 catalog, global on a 1.0 one (whose table has no queue column).
 */
void
claim_unique_keys(EnqueueRow *rows, int n, Catalog catalog)
{
	static const Oid argtypes[UQ_NPARAMS] = {BYTEAARRAYOID, INT8ARRAYOID, TEXTARRAYOID};
	Column keys = new_column(n), ids = new_column(n), queues = new_column(n);
	int m = 0;
	Datum values[UQ_NPARAMS];

	for (int i = 0; i < n; i++)
	{
		const char *state = rows[i].deferred_state ? rows[i].deferred_state : "available";

		if (rows[i].null[JOB_UNIQUE_KEY] || rows[i].null[JOB_UNIQUE_STATES] ||
			!mask_has_state(rows[i].value[JOB_UNIQUE_STATES], state))
			continue;
		keys.values[m] = rows[i].value[JOB_UNIQUE_KEY];
		ids.values[m] = rows[i].value[JOB_ID];
		queues.values[m] = rows[i].value[JOB_QUEUE];
		m++;
	}
	if (m == 0)
		return;
	values[UQ_KEY] = column_array(keys, m, BYTEAOID);
	values[UQ_JOB_ID] = column_array(ids, m, INT8OID);
	values[UQ_QUEUE] = column_array(queues, m, TEXTOID);
	if (catalog == Catalog::V1_0)
	{
		keep_plan(&unique_plan[0], compat_1_0::unique_claims_insert_sql(), UQ_QUEUE, argtypes);
		exec_plan(unique_plan[0], values, nullptr, false, 0, SPI_OK_INSERT, "unique claim insert");
		return;
	}
	/*
	 * The index raises a conflict (23505, naming idx_awa_jobs_unique). On a Citus node the
	 * error names the worker's shard of the index (idx_awa_jobs_unique_102345): it is raised
	 * again naming the index and its table, as on one node, at every isolation level.
	 */
	UniqueInsert insert = {keep_plan(&unique_plan[1], kUniqueInsertIndexSql, UQ_NPARAMS, argtypes), values};

	if (citus_group() >= 0)
		run_naming_shard_index(insert_unique_claims, &insert, "idx_awa_jobs_unique", "job_unique_claims");
	else
		insert_unique_claims(&insert);
}

/*
 * The shape of an insert of job rows: the table, the columns a row adds after the job's
 * attributes, and the parameters the whole statement shares (the ring write slot). The
 * statement text and its parameter types are generated from the job column table: the job
 * attributes are parameters $1..$JOB_NCOLUMNS, the row's own columns follow, then the
 * shared ones.
 */
constexpr int kMaxRowColumns = JOB_NCOLUMNS + 2;
constexpr int kMaxParams = kMaxRowColumns + 2;

struct InsertShape
{
	const char *table;
	int nown;
	JobColumnDef own[2];
	int nshared;
	JobColumnDef shared[2];
};

/* Ready rows: lane position and shard, in the queue ring's write slot fenced against prune. */
const InsertShape kReadyShape = {
	"awa.ready_entries",
	2,
	{{"lane_seq", "bigint", INT8OID, "bigint", INT8OID}, {"enqueue_shard", "smallint", INT2OID, "smallint", INT2OID}},
	2,
	{{"ready_slot", "integer", INT4OID, "integer", INT4OID},
	 {"ready_generation", "bigint", INT8OID, "bigint", INT8OID}}};

/* Deferred rows: their state (scheduled or retryable). */
const InsertShape kDeferredShape = {
	"awa.deferred_jobs", 1, {{"state", "awa.job_state", TEXTOID, "text", TEXTOID}}, 0, {}};

/* Parameters of a row column of a ready insert, after the job's attributes. */
enum ReadyOwnParam
{
	READY_LANE_SEQ = JOB_NCOLUMNS,
	READY_ENQUEUE_SHARD,
	READY_RING_SLOT,
	READY_RING_GENERATION
};

/* Parameter of the deferred insert's state column. */
constexpr int kDeferredState = JOB_NCOLUMNS;

/* Column k of a row of the shape: a job attribute, then the row's own columns. */
const JobColumnDef &
row_column(const InsertShape &shape, int k)
{
	return k < JOB_NCOLUMNS ? kJobColumns[k] : shape.own[k - JOB_NCOLUMNS];
}

/*
 * Whether the statements of a catalog name job attribute k: a 1.0 catalog's job tables have
 * no concurrency_key (its parameter stays, unused, so the parameter numbers are the same).
 */
bool
catalog_has_column(Catalog catalog, int k)
{
	return catalog == Catalog::V1_1 || k != JOB_CONCURRENCY_KEY;
}

/*
 * Prepare (once per backend) the insert of one row with scalar parameters, or of a batch:
 * one array parameter per row column, unnested. Returns the number of parameters.
 */
int
prepare_insert(SPIPlanPtr *slot, const InsertShape &shape, bool batch, Catalog catalog)
{
	int nrow = JOB_NCOLUMNS + shape.nown;
	int nparams = nrow + shape.nshared;
	StringInfoData sql;
	StringInfoData unnest;
	Oid types[kMaxParams];

	if (*slot != nullptr)
		return nparams;
	initStringInfo(&sql);
	initStringInfo(&unnest);
	appendStringInfo(&sql, "INSERT INTO %s (", shape.table);
	for (int k = 0, named = 0; k < nparams; k++)
		if (k >= nrow || catalog_has_column(catalog, k))
			appendStringInfo(&sql, "%s%s", named++ > 0 ? ", " : "",
							 k < nrow ? row_column(shape, k).name : shape.shared[k - nrow].name);
	appendStringInfoString(&sql, batch ? ") SELECT " : ") VALUES (");
	for (int k = 0, named = 0; k < nrow; k++)
	{
		const JobColumnDef &c = row_column(shape, k);
		bool used = catalog_has_column(catalog, k);
		const char *sep = used && named++ > 0 ? ", " : "";

		types[k] = batch ? get_array_type(c.elem_type) : c.type;
		if (!used)
			continue;
		if (batch)
		{
			appendStringInfo(&sql, "%su.%s::%s", sep, c.name, c.sql_type);
			appendStringInfo(&unnest, "%s$%d::%s[]", sep, k + 1, c.elem_sql);
		}
		else
			appendStringInfo(&sql, "%s$%d::%s", sep, k + 1, c.sql_type);
	}
	for (int k = nrow; k < nparams; k++)
	{
		appendStringInfo(&sql, ", $%d::%s", k + 1, shape.shared[k - nrow].sql_type);
		types[k] = shape.shared[k - nrow].type;
	}
	if (batch)
	{
		appendStringInfo(&sql, " FROM unnest(%s) AS u(", unnest.data);
		for (int k = 0, named = 0; k < nrow; k++)
			if (catalog_has_column(catalog, k))
				appendStringInfo(&sql, "%s%s", named++ > 0 ? ", " : "", row_column(shape, k).name);
	}
	appendStringInfoChar(&sql, ')');
	keep_plan(slot, sql.data, nparams, types);
	pfree(sql.data);
	pfree(unnest.data);
	return nparams;
}

/* An array attribute travels in a batch as its text literal (no arrays of arrays). */
Datum
batch_element(const JobColumnDef &c, Datum value)
{
	Oid output;
	bool isvarlena;

	if (c.type == c.elem_type)
		return value;
	getTypeOutputInfo(c.type, &output, &isvarlena);
	return CStringGetTextDatum(OidOutputFunctionCall(output, value));
}

/* Batch columns of the job attributes of the rows picked by `pick` (m of them). */
void
fill_job_columns(Column *cols, const EnqueueRow *rows, const int *pick, int m)
{
	for (int c = 0; c < JOB_NCOLUMNS; c++)
	{
		cols[c] = new_column(m);
		for (int k = 0; k < m; k++)
		{
			const EnqueueRow &r = rows[pick[k]];

			cols[c].nulls[k] = r.null[c];
			if (!r.null[c])
				cols[c].values[k] = batch_element(kJobColumns[c], r.value[c]);
		}
	}
}

/* Run a prepared batch insert: row columns become arrays, shared parameters follow. */
void
exec_batch(SPIPlanPtr plan, const InsertShape &shape, Column *cols, int m, const Datum *shared, const char *what)
{
	int nrow = JOB_NCOLUMNS + shape.nown;
	Datum values[kMaxParams];

	for (int k = 0; k < nrow; k++)
		values[k] = column_array(cols[k], m, row_column(shape, k).elem_type);
	for (int k = 0; k < shape.nshared; k++)
		values[nrow + k] = shared[k];
	exec_plan(plan, values, nullptr, false, 0, SPI_OK_INSERT, what);
}

/* Insert a single ready row with scalar parameters (the common single-job path). */
void
insert_one_ready(const EnqueueRow &r, const RingSlot &ring, Catalog catalog)
{
	Datum values[kMaxParams];
	char nulls[kMaxParams];
	SPIPlanPtr *plan = &ready_one_plan[static_cast<int>(catalog)];

	prepare_insert(plan, kReadyShape, false, catalog);
	for (int c = 0; c < JOB_NCOLUMNS; c++)
	{
		values[c] = r.value[c];
		nulls[c] = r.null[c] ? 'n' : ' ';
	}
	values[READY_LANE_SEQ] = Int64GetDatum(r.lane_seq);
	values[READY_ENQUEUE_SHARD] = Int16GetDatum(r.shard);
	values[READY_RING_SLOT] = Int32GetDatum(ring.slot);
	values[READY_RING_GENERATION] = Int64GetDatum(ring.generation);
	for (int k = JOB_NCOLUMNS; k <= READY_RING_GENERATION; k++)
		nulls[k] = ' ';
	exec_plan(*plan, values, nulls, false, 0, SPI_OK_INSERT, "ready insert");
}

/*
 * Insert the ready rows straight into the write slot's partition (direct_insert.cpp), or
 * return false when a planned statement must (a user's trigger on the table, ...).
 */
bool
insert_ready_direct(const EnqueueRow *rows, const int *order, int nready, const RingSlot &ring)
{
	Datum *lane_seqs = static_cast<Datum *>(palloc(sizeof(Datum) * nready));
	Datum *shards = static_cast<Datum *>(palloc(sizeof(Datum) * nready));
	const RowColumn extra[] = {{"lane_seq", INT8OID, lane_seqs, 0},
							   {"enqueue_shard", INT2OID, shards, 0},
							   {"ready_slot", INT4OID, nullptr, Int32GetDatum(ring.slot)},
							   {"ready_generation", INT8OID, nullptr, Int64GetDatum(ring.generation)}};

	for (int k = 0; k < nready; k++)
	{
		lane_seqs[k] = Int64GetDatum(rows[order[k]].lane_seq);
		shards[k] = Int16GetDatum(rows[order[k]].shard);
	}
	return direct_insert(ready_parent(), ring.partition, rows, order, nready, extra, lengthof(extra));
}

/* Job ids first: they are the unique-claim owners and the returned values. */
void
assign_job_ids(EnqueueRow *rows, int n)
{
	Oid idseq = InvalidOid;

	for (int i = 0; i < n; i++)
	{
		if (rows[i].job_id() != 0)
			continue;
		if (!OidIsValid(idseq))
			idseq = job_id_sequence();
		rows[i].set(JOB_ID, Int64GetDatum(nextval_internal(idseq, false)));
	}
}

/*
 * Route the ready rows and reserve one block per lane, lanes in (queue, priority, shard)
 * order. Returns the ready rows' indexes in lane order (FIFO inside a lane).
 */
int *
reserve_lanes(EnqueueRow *rows, int n, int *nready)
{
	int *order = static_cast<int *>(palloc(sizeof(int) * n));
	int m = 0;

	for (int i = 0; i < n; i++)
	{
		if (rows[i].deferred_state != nullptr)
			continue;
		if (!rows[i].shard_fixed)
			rows[i].shard = route_row(rows[i]);
		order[m++] = i;
	}
	qsort_arg(order, m, sizeof(int), compare_row_lanes, rows);
	for (int k = 0; k < m;)
	{
		const EnqueueRow &first = rows[order[k]];
		int end = k + 1;
		int64 start;

		while (end < m && same_lane(rows[order[end]], first))
			end++;
		start = reserve_lane_block(first.queue, first.queue_len, first.priority(), first.shard, end - k);
		for (int j = k; j < end; j++)
			rows[order[j]].lane_seq = start + (j - k);
		k = end;
	}
	*nready = m;
	return order;
}

/* Insert the ready rows (in lane order) into the queue ring's write slot. */
void
insert_ready(const EnqueueRow *rows, const int *order, int nready, Catalog catalog)
{
	RingSlot ring;
	Column cols[kMaxRowColumns];
	Datum shared[2];

	if (nready == 0)
		return;
	ring = ring_write_slot(Ring::Queue);
	if (insert_ready_direct(rows, order, nready, ring))
		return;
	if (nready == 1)
	{
		insert_one_ready(rows[order[0]], ring, catalog);
		return;
	}
	prepare_insert(&ready_plan[static_cast<int>(catalog)], kReadyShape, true, catalog);
	fill_job_columns(cols, rows, order, nready);
	cols[READY_LANE_SEQ] = new_column(nready);
	cols[READY_ENQUEUE_SHARD] = new_column(nready);
	for (int k = 0; k < nready; k++)
	{
		cols[READY_LANE_SEQ].values[k] = Int64GetDatum(rows[order[k]].lane_seq);
		cols[READY_ENQUEUE_SHARD].values[k] = Int16GetDatum(rows[order[k]].shard);
	}
	shared[0] = Int32GetDatum(ring.slot);
	shared[1] = Int64GetDatum(ring.generation);
	exec_batch(ready_plan[static_cast<int>(catalog)], kReadyShape, cols, nready, shared, "ready insert");
}

/*
 * Wake-ups once per queue with the number of lanes it got rows in (a claim takes one lane's
 * rows), counters once per lane (rows are in lane order).
 */
void
announce(const EnqueueRow *rows, const int *order, int nready)
{
	int lane_start = 0;
	int queue_lanes = 0;

	for (int k = 0; k < nready; k++)
	{
		const EnqueueRow &r = rows[order[k]];

		if (k + 1 == nready || !same_lane(rows[order[k + 1]], r))
		{
			stats_add(r.queue, r.queue_len, r.shard, StatKind::Enqueued, k + 1 - lane_start);
			lane_start = k + 1;
			queue_lanes++;
		}
		if (k + 1 == nready || !same_queue(rows[order[k + 1]], r))
		{
			note_enqueued(r.queue, r.queue_len, queue_lanes);
			queue_lanes = 0;
		}
	}
}

/* Insert the scheduled and retryable rows into deferred_jobs. */
void
insert_deferred(const EnqueueRow *rows, int n, Catalog catalog)
{
	int *pick = static_cast<int *>(palloc(sizeof(int) * n));
	Column cols[kMaxRowColumns];
	int m = 0;

	for (int i = 0; i < n; i++)
		if (rows[i].deferred_state != nullptr)
			pick[m++] = i;
	if (m == 0)
		return;
	prepare_insert(&deferred_plan[static_cast<int>(catalog)], kDeferredShape, true, catalog);
	fill_job_columns(cols, rows, pick, m);
	cols[kDeferredState] = new_column(m);
	for (int k = 0; k < m; k++)
		cols[kDeferredState].values[k] = CStringGetTextDatum(rows[pick[k]].deferred_state);
	exec_batch(deferred_plan[static_cast<int>(catalog)], kDeferredShape, cols, m, nullptr, "deferred insert");
}

} // namespace

/* Register the invalidation hook of the cached job id sequence. */
void
init_enqueue_cache()
{
	watch_relcache(on_relcache_inval);
}

Datum
default_unique_mask()
{
	return DirectFunctionCall3(bit_in, CStringGetDatum("11111000"), ObjectIdGetDatum(InvalidOid), Int32GetDatum(8));
}

/* Route, reserve (lanes locked in sorted order) and insert rows; claim unique keys when asked. */
void
enqueue_rows(EnqueueRow *rows, int n, bool claim_unique_keys_flag, Catalog catalog)
{
	int nready;
	int *order;

	if (n == 0)
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	assign_job_ids(rows, n);
	if (claim_unique_keys_flag)
		claim_unique_keys(rows, n, catalog);
	order = reserve_lanes(rows, n, &nready);
	insert_ready(rows, order, nready, catalog);
	announce(rows, order, nready);
	insert_deferred(rows, n, catalog);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
}

} // namespace awa
