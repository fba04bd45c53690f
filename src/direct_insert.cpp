/*
 * direct_insert.cpp — job rows inserted into a known partition without a planned statement
 * (D22; docs/design.md §3, "Direct inserts"). The steps are those of the logical replication
 * apply worker (create_edata_for_relation, ExecSimpleRelationInsert): an EState with a
 * one-entry range table, a ResultRelInfo of the partition with its indexes open, then per
 * row NOT NULL and CHECK constraints, the heap insert and the index entries (a unique index
 * conflict raises 23505 as the statement would). A routed INSERT into the parent checks no
 * partition constraint either: the caller picks the partition of the row's ring slot.
 *
 * Locks follow the planned statement's order: the caller already holds the partition's
 * RowExclusiveLock (the ring fence, ring.cpp), then the parent's, then the partition's
 * indexes'. Whatever a planned statement would add is left to it: on a trigger, rule or row
 * security of either table, without INSERT privilege on the parent, in a read-only
 * transaction, or when the partition has a column this routine does not fill exactly as the
 * statement would, direct_insert writes nothing and returns false.
 */
#include "citus.hpp"
#include "direct_insert.hpp"
#include "relcache_watch.hpp"

extern "C"
{
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/varbit.h"
}

namespace awa
{

namespace
{

/* Where an attribute of the partition takes its value from. */
enum class Source
{
	Dropped, /* a dropped column: NULL */
	Job,	 /* a job attribute (index into EnqueueRow::value) */
	Extra	 /* a RowColumn (index into extra) */
};

struct AttrSource
{
	Source source;
	int index;
};

/*
 * Whether a value of type `type` goes into attribute `att` unchanged, as the statement's
 * cast would leave it: the same type without a modifier, or a bit string of exactly the
 * column's declared length (a job's unique-state mask, bit(8)).
 */
bool
fits_attribute(Form_pg_attribute att, Oid type)
{
	if (att->atttypid == type && att->atttypmod < 0)
		return true;
	return type == VARBITOID && (att->atttypid == BITOID || att->atttypid == VARBITOID);
}

/* A bit string value must have the column's declared length (the statement would raise 22026). */
bool
value_fits(Form_pg_attribute att, Datum value)
{
	if (att->atttypid != BITOID && att->atttypid != VARBITOID)
		return true;
	if (att->atttypmod < 0)
		return true;
	if (att->atttypid == BITOID)
		return VARBITLEN(DatumGetVarBitP(value)) == att->atttypmod;
	return VARBITLEN(DatumGetVarBitP(value)) <= att->atttypmod;
}

/*
 * For every attribute of `desc`, where its value comes from; false when an attribute is
 * neither a job attribute nor an extra column of a type that fits (the statement would give
 * it its default, or cast), or when a job attribute or extra column has no attribute (the
 * statement would fail).
 */
bool
map_attributes(TupleDesc desc, const RowColumn *extra, int nextra, AttrSource *map)
{
	int mapped = 0;

	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		const char *name = NameStr(att->attname);
		bool found = false;

		map[a].source = Source::Dropped;
		if (att->attisdropped)
			continue;
		for (int c = 0; c < JOB_NCOLUMNS && !found; c++)
		{
			if (strcmp(kJobColumns[c].name, name) != 0)
				continue;
			if (!fits_attribute(att, kJobColumns[c].type))
				return false;
			map[a] = {Source::Job, c};
			found = true;
		}
		for (int k = 0; k < nextra && !found; k++)
		{
			if (strcmp(extra[k].name, name) != 0)
				continue;
			if (!fits_attribute(att, extra[k].type))
				return false;
			map[a] = {Source::Extra, k};
			found = true;
		}
		if (!found)
			return false;
		mapped++;
	}
	return mapped == JOB_NCOLUMNS + nextra;
}

/*
 * The attribute maps of the partitions inserted into, kept per backend: a partition's map
 * depends on its columns and on the caller's extra columns alone, so it is worked out once
 * (map_attributes compares every attribute name with every column's) and forgotten on a
 * relcache invalidation of the partition, which any change of its columns sends.
 */
constexpr int kKeptMaps = 32;
constexpr int kMaxExtra = 8;

struct KeptMap
{
	Oid relid; /* InvalidOid: a free entry */
	int natts;
	int nextra;
	const char *extra_name[kMaxExtra]; /* the caller's names, compared by address */
	Oid extra_type[kMaxExtra];
	bool usable; /* map_attributes' answer */
	AttrSource *map;
};

KeptMap kept_maps[kKeptMaps];
bool maps_callback_registered = false;

/*
 * Relcache invalidation: forget the maps of the relation (every map when relid is invalid).
 * The memory stays until the entry is used again: an invalidation can arrive while a call
 * still reads the map it was given (index_open takes invalidations).
 */
void
on_maps_relcache_inval(Datum arg, Oid relid)
{
	for (KeptMap &k : kept_maps)
		if (OidIsValid(k.relid) && (relid == InvalidOid || k.relid == relid))
			k.relid = InvalidOid;
}

/* Whether kept entry `k` was made for `rel` and these extra columns. */
bool
kept_map_matches(const KeptMap &k, Relation rel, const RowColumn *extra, int nextra)
{
	if (k.relid != RelationGetRelid(rel) || k.natts != RelationGetDescr(rel)->natts || k.nextra != nextra)
		return false;
	for (int e = 0; e < nextra; e++)
		if (k.extra_name[e] != extra[e].name || k.extra_type[e] != extra[e].type)
			return false;
	return true;
}

/*
 * The attribute map of `rel` for these extra columns (map_attributes), kept per backend;
 * nullptr when a planned statement must insert. Extra column names must be literals.
 */
const AttrSource *
attribute_map(Relation rel, const RowColumn *extra, int nextra)
{
	TupleDesc desc = RelationGetDescr(rel);
	KeptMap *free_entry = nullptr;
	AttrSource *map;
	bool usable;

	for (KeptMap &k : kept_maps)
	{
		if (kept_map_matches(k, rel, extra, nextra))
			return k.usable ? k.map : nullptr;
		if (!OidIsValid(k.relid) && free_entry == nullptr)
			free_entry = &k;
	}
	if (!maps_callback_registered)
	{
		watch_relcache(on_maps_relcache_inval);
		maps_callback_registered = true;
	}
	map = static_cast<AttrSource *>(MemoryContextAlloc(TopMemoryContext, sizeof(AttrSource) * (desc->natts + 1)));
	usable = map_attributes(desc, extra, nextra, map);
	if (free_entry == nullptr || nextra > kMaxExtra)
	{
		/* Nowhere to keep it: the caller's memory holds it for this call. */
		AttrSource *local = static_cast<AttrSource *>(palloc(sizeof(AttrSource) * (desc->natts + 1)));

		memcpy(local, map, sizeof(AttrSource) * (desc->natts + 1));
		pfree(map);
		return usable ? local : nullptr;
	}
	if (free_entry->map != nullptr)
		pfree(free_entry->map);
	free_entry->relid = RelationGetRelid(rel);
	free_entry->natts = desc->natts;
	free_entry->nextra = nextra;
	for (int e = 0; e < nextra; e++)
	{
		free_entry->extra_name[e] = extra[e].name;
		free_entry->extra_type[e] = extra[e].type;
	}
	free_entry->usable = usable;
	free_entry->map = map;
	return usable ? map : nullptr;
}

/* Fill `slot` with the k-th picked row (rows_fit checked its values). */
void
fill_slot(TupleTableSlot *slot, const AttrSource *map, const EnqueueRow &row, int k, const RowColumn *extra)
{
	TupleDesc desc = slot->tts_tupleDescriptor;

	ExecClearTuple(slot);
	for (int a = 0; a < desc->natts; a++)
	{
		const AttrSource &m = map[a];

		slot->tts_isnull[a] = true;
		slot->tts_values[a] = (Datum)0;
		if (m.source == Source::Job && !row.null[m.index])
		{
			slot->tts_values[a] = row.value[m.index];
			slot->tts_isnull[a] = false;
		}
		else if (m.source == Source::Extra)
		{
			slot->tts_values[a] = extra[m.index].values ? extra[m.index].values[k] : extra[m.index].shared;
			slot->tts_isnull[a] = false;
		}
	}
	ExecStoreVirtualTuple(slot);
}

/* Whether every picked row's values fit the partition's columns as they are. */
bool
rows_fit(TupleDesc desc, const AttrSource *map, const EnqueueRow *rows, const int *pick, int n)
{
	for (int k = 0; k < n; k++)
		for (int a = 0; a < desc->natts; a++)
			if (map[a].source == Source::Job && !rows[pick[k]].null[map[a].index] &&
				!value_fits(TupleDescAttr(desc, a), rows[pick[k]].value[map[a].index]))
				return false;
	return true;
}

/* Close what direct_insert opened (the locks stay to the end of the transaction). */
void
close_tables(Relation parent, Relation rel)
{
	if (rel != parent)
		table_close(rel, NoLock);
	table_close(parent, NoLock);
}

/*
 * Open `partition` of `parent` (the same OID when not partitioned) with RowExclusiveLock,
 * the parent first as a statement does; false, with nothing left open, when a planned
 * statement must insert instead (see the file comment).
 */
bool
open_for_insert(Oid parent_oid, Oid partition_oid, Relation *parent, Relation *rel)
{
	/* Under Citus the tables here are shells: a statement reaches the shards, a heap insert would not. */
	if (citus_present() || XactReadOnly)
		return false;
	*parent = table_open(parent_oid, RowExclusiveLock);
	*rel = partition_oid == parent_oid ? *parent : table_open(partition_oid, RowExclusiveLock);
	if ((*rel)->rd_rel->relkind != RELKIND_RELATION || needs_planned_statement(*parent) ||
		needs_planned_statement(*rel) || !has_all_privileges(parent_oid, ACL_INSERT))
	{
		close_tables(*parent, *rel);
		return false;
	}
	return true;
}

/* The executor state of inserts into `rel`: a one-entry range table, its indexes open, a slot. */
void
begin_inserts(Relation rel, EState **estate, ResultRelInfo **rri, TupleTableSlot **slot)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	*estate = CreateExecutorState();
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(*estate, list_make1(rte));
	*rri = makeNode(ResultRelInfo);
	InitResultRelInfo(*rri, rel, 1, nullptr, 0);
	(*estate)->es_output_cid = GetCurrentCommandId(true);
	ExecOpenIndices(*rri, false);
	*slot = ExecInitExtraTupleSlot(*estate, RelationGetDescr(rel), &TTSOpsVirtual);
}

/* Constraints, heap insert and index entries of the row in `slot`, as ExecSimpleRelationInsert. */
void
insert_slot(Relation rel, EState *estate, ResultRelInfo *rri, TupleTableSlot *slot)
{
	if (rel->rd_att->constr != nullptr)
		ExecConstraints(rri, slot, estate);
	table_tuple_insert(rel, slot, estate->es_output_cid, 0, nullptr);
	if (rri->ri_NumIndices > 0)
		list_free(ExecInsertIndexTuples(rri, slot, estate, false, false, nullptr, NIL));
	ResetPerTupleExprContext(estate);
}

/* Release the executor state begin_inserts made. */
void
end_inserts(EState *estate, ResultRelInfo *rri)
{
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}

} // namespace

/* Insert rows into a known partition through the executor's routines (see the file comment). */
bool
direct_insert(Oid parent_oid, Oid partition_oid, const EnqueueRow *rows, const int *pick, int n, const RowColumn *extra,
			  int nextra)
{
	Relation parent;
	Relation rel;
	const AttrSource *map;
	EState *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;

	if (n == 0)
		return !citus_present();
	if (!open_for_insert(parent_oid, partition_oid, &parent, &rel))
		return false;
	map = attribute_map(rel, extra, nextra);
	if (map == nullptr || !rows_fit(RelationGetDescr(rel), map, rows, pick, n))
	{
		close_tables(parent, rel);
		return false;
	}

	begin_inserts(rel, &estate, &rri, &slot);
	for (int k = 0; k < n; k++)
	{
		fill_slot(slot, map, rows[pick[k]], k, extra);
		insert_slot(rel, estate, rri, slot);
	}
	end_inserts(estate, rri);
	close_tables(parent, rel);
	/* As after an SPI statement: later statements of the transaction see the rows. */
	CommandCounterIncrement();
	return true;
}

/*
 * Open a table for direct inserts of rows given column by column: every column of the
 * table must be one of `columns`, of exactly its type (no modifier), and every one of
 * `columns` a column of the table; false, nothing left open, when a planned statement must
 * insert (the rules of direct_insert).
 */
bool
direct_target_open(DirectTarget *t, Oid parent, Oid partition, const DirectColumn *columns, int ncolumns)
{
	TupleDesc desc;
	int mapped = 0;

	if (!open_for_insert(parent, partition, &t->parent, &t->rel))
		return false;
	desc = RelationGetDescr(t->rel);
	t->column_of = static_cast<int *>(palloc(sizeof(int) * (desc->natts + 1)));
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		t->column_of[a] = -1;
		if (att->attisdropped)
			continue;
		for (int c = 0; c < ncolumns && t->column_of[a] < 0; c++)
			if (strcmp(columns[c].name, NameStr(att->attname)) == 0 && att->atttypid == columns[c].type &&
				att->atttypmod < 0)
				t->column_of[a] = c;
		if (t->column_of[a] < 0)
		{
			close_tables(t->parent, t->rel);
			return false;
		}
		mapped++;
	}
	if (mapped != ncolumns)
	{
		close_tables(t->parent, t->rel);
		return false;
	}
	begin_inserts(t->rel, &t->estate, &t->rri, &t->slot);
	return true;
}

/* Put a row given column by column (values[c], nulls[c]) into the target's slot, as a virtual tuple. */
static void
store_row(DirectTarget *t, const Datum *values, const bool *nulls)
{
	TupleDesc desc = t->slot->tts_tupleDescriptor;

	ExecClearTuple(t->slot);
	for (int a = 0; a < desc->natts; a++)
	{
		int c = t->column_of[a];

		t->slot->tts_values[a] = c < 0 ? (Datum)0 : values[c];
		t->slot->tts_isnull[a] = c < 0 || nulls[c];
	}
	ExecStoreVirtualTuple(t->slot);
}

/* Insert one row into an open target: values[c] and nulls[c] for its c-th column. */
void
direct_target_insert(DirectTarget *t, const Datum *values, const bool *nulls)
{
	store_row(t, values, nulls);
	insert_slot(t->rel, t->estate, t->rri, t->slot);
}

namespace
{

/*
 * Insert one row unless its key conflicts in `arbiter`, as ExecInsert's speculative insertion;
 * on a conflict with a row that exists, *conflict_tid names it (invalid when the conflict was
 * an insertion that raced this one).
 */
bool
insert_unless_conflict(DirectTarget *t, const Datum *values, const bool *nulls, Oid arbiter, ItemPointer conflict_tid)
{
	List *arbiters = list_make1_oid(arbiter);
	bool conflict = false;
	uint32 token;

	ItemPointerSetInvalid(conflict_tid);
	/* The conflict checks need the unique indexes' operators, as ExecOpenIndices(speculative) builds them. */
	for (int i = 0; i < t->rri->ri_NumIndices; i++)
	{
		IndexInfo *ii = t->rri->ri_IndexRelationInfo[i];

		if (ii->ii_Unique && ii->ii_UniqueOps == nullptr)
			BuildSpeculativeIndexInfo(t->rri->ri_IndexRelationDescs[i], ii);
	}
	store_row(t, values, nulls);
	if (t->rel->rd_att->constr != nullptr)
		ExecConstraints(t->rri, t->slot, t->estate);
	/* A committed or in-progress row with the key (waited for): the caller's update, or its statement. */
	if (!ExecCheckIndexConstraints(t->rri, t->slot, t->estate, conflict_tid, arbiters))
	{
		list_free(arbiters);
		ResetPerTupleExprContext(t->estate);
		return false;
	}
	token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
	table_tuple_insert_speculative(t->rel, t->slot, t->estate->es_output_cid, 0, nullptr, token);
	list_free(ExecInsertIndexTuples(t->rri, t->slot, t->estate, false, true, &conflict, arbiters));
	/* A conflicting insertion that raced this one: the heap tuple is killed, as ExecInsert does. */
	table_tuple_complete_speculative(t->rel, t->slot, token, !conflict);
	SpeculativeInsertionLockRelease(GetCurrentTransactionId());
	list_free(arbiters);
	ResetPerTupleExprContext(t->estate);
	return !conflict;
}

/*
 * Update the row at `tid` to values[c], nulls[c] (a NULL value of a column with keep_stored[c]
 * keeps the stored one), as ExecOnConflictUpdate does: lock the row, waiting for a writer
 * that holds it, then update it in place (HOT when the page has room) with index entries
 * when it moved. False, having changed nothing, when the row was updated or deleted
 * meanwhile (the caller's statement takes it then).
 */
bool
update_conflicting(DirectTarget *t, ItemPointer tid, const Datum *values, const bool *nulls, const bool *keep_stored)
{
	TupleDesc desc = t->slot->tts_tupleDescriptor;
	TupleTableSlot *existing = table_slot_create(t->rel, &t->estate->es_tupleTable);
	Snapshot snapshot = GetLatestSnapshot();
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool update_indexes;
	TM_Result result;

	result = table_tuple_lock(t->rel, tid, snapshot, existing, t->estate->es_output_cid, LockTupleExclusive,
							  LockWaitBlock, 0, &tmfd);
	if (result != TM_Ok)
	{
		ExecClearTuple(existing);
		return false;
	}
	slot_getallattrs(existing);
	ExecClearTuple(t->slot);
	for (int a = 0; a < desc->natts; a++)
	{
		int c = t->column_of[a];
		bool keep = c >= 0 && nulls[c] && keep_stored[c];

		t->slot->tts_values[a] = keep ? existing->tts_values[a] : c < 0 ? (Datum)0 : values[c];
		t->slot->tts_isnull[a] = keep ? existing->tts_isnull[a] : c < 0 || nulls[c];
	}
	ExecStoreVirtualTuple(t->slot);
	if (t->rel->rd_att->constr != nullptr)
		ExecConstraints(t->rri, t->slot, t->estate);
	/* The row is locked by this transaction: no other writer can have changed it since. */
	result = table_tuple_update(t->rel, tid, t->slot, t->estate->es_output_cid, snapshot, InvalidSnapshot, true, &tmfd,
								&lockmode, &update_indexes);
	if (result != TM_Ok)
		elog(ERROR, "awa_shard: a locked row of %s could not be updated (%d)", RelationGetRelationName(t->rel),
			 static_cast<int>(result));
	if (update_indexes && t->rri->ri_NumIndices > 0)
		list_free(ExecInsertIndexTuples(t->rri, t->slot, t->estate, true, false, nullptr, NIL));
	ExecClearTuple(existing);
	ResetPerTupleExprContext(t->estate);
	return true;
}

} // namespace

/* Insert one row unless its key conflicts in `arbiter`, as ExecInsert's speculative insertion. */
bool
direct_target_insert_unless_conflict(DirectTarget *t, const Datum *values, const bool *nulls, Oid arbiter)
{
	ItemPointerData conflict_tid;

	return insert_unless_conflict(t, values, nulls, arbiter, &conflict_tid);
}

/* Insert one row, or update the row its key conflicts with, as INSERT .. ON CONFLICT DO UPDATE. */
bool
direct_target_upsert(DirectTarget *t, const Datum *values, const bool *nulls, const bool *keep_stored, Oid arbiter)
{
	ItemPointerData conflict_tid;

	if (insert_unless_conflict(t, values, nulls, arbiter, &conflict_tid))
		return true;
	return ItemPointerIsValid(&conflict_tid) && update_conflicting(t, &conflict_tid, values, nulls, keep_stored);
}

/*
 * Update the row at `tid` to values[c], nulls[c], as an UPDATE on the latest committed state
 * does when no other transaction holds the row (a writer in progress is waited for): in place
 * (HOT when the page has room), with index entries when it moved. False, having changed
 * nothing, when the row was updated or deleted since the caller read it.
 */
bool
direct_target_update(DirectTarget *t, ItemPointer tid, const Datum *values, const bool *nulls)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool update_indexes;
	TM_Result result;

	store_row(t, values, nulls);
	if (t->rel->rd_att->constr != nullptr)
		ExecConstraints(t->rri, t->slot, t->estate);
	result = table_tuple_update(t->rel, tid, t->slot, t->estate->es_output_cid, GetLatestSnapshot(), InvalidSnapshot,
								true, &tmfd, &lockmode, &update_indexes);
	if (result != TM_Ok)
	{
		ResetPerTupleExprContext(t->estate);
		return false;
	}
	if (update_indexes && t->rri->ri_NumIndices > 0)
		list_free(ExecInsertIndexTuples(t->rri, t->slot, t->estate, true, false, nullptr, NIL));
	ResetPerTupleExprContext(t->estate);
	return true;
}

/* Close an open target (its locks stay to the end of the transaction). */
void
direct_target_close(DirectTarget *t)
{
	end_inserts(t->estate, t->rri);
	close_tables(t->parent, t->rel);
}

/* Whether the first n key columns of `index` are the columns `names` of `rel`, in that order. */
bool
index_keys_are(Relation rel, Relation index, const char *const *names, int n)
{
	TupleDesc desc = RelationGetDescr(rel);

	if (index->rd_index->indnkeyatts < n)
		return false;
	for (int k = 0; k < n; k++)
	{
		AttrNumber attnum = index->rd_index->indkey.values[k];

		if (attnum <= 0 || attnum > desc->natts || TupleDescAttr(desc, attnum - 1)->attisdropped ||
			strcmp(NameStr(TupleDescAttr(desc, attnum - 1)->attname), names[k]) != 0)
			return false;
	}
	return true;
}

/* Whether a planned statement would do more on this table than a direct access does. */
bool
needs_planned_statement(Relation rel)
{
	TupleConstr *constr = rel->rd_att->constr;

	return rel->trigdesc != nullptr || rel->rd_rules != nullptr || rel->rd_rel->relrowsecurity ||
		   (constr != nullptr && constr->has_generated_stored);
}

/* Whether the current user holds every privilege of `mode` on the relation (not just one). */
bool
has_all_privileges(Oid relid, AclMode mode)
{
	return pg_class_aclmask(relid, GetUserId(), mode, ACLMASK_ALL) == mode;
}

/* OID of relation awa.<name>; a missing one is a broken install. */
Oid
awa_relation(const char *name)
{
	Oid relid = get_relname_relid(name, get_namespace_oid("awa", false));

	if (!OidIsValid(relid))
		elog(ERROR, "awa_shard: relation awa.%s is missing", name);
	return relid;
}

} // namespace awa
