/*
 * direct_insert.hpp — inserts of job rows into a known partition through PostgreSQL's
 * direct access routines (direct_insert.cpp), as the logical replication apply worker's
 * ExecSimpleRelationInsert does: heap insert, constraints and index entries, no planned
 * statement (docs/design.md §3, "Direct inserts").
 */
#pragma once

#include "enqueue_core.hpp"

extern "C"
{
#include "nodes/execnodes.h"
#include "utils/relcache.h"
}

namespace awa
{

/*
 * A column a row carries beyond the job's attributes: one value per row (values[k] for the
 * k-th picked row) or, with values == nullptr, one value every row shares.
 */
struct RowColumn
{
	const char *name;
	Oid type;
	const Datum *values;
	Datum shared;
};

/*
 * Insert rows[pick[0..n)] into `partition` of the table `parent` (the same OID when the
 * table is not partitioned), the caller holding the partition's RowExclusiveLock. Returns
 * false, having written nothing, when a planned statement must do it: a trigger, rule or
 * row security on either table, no INSERT privilege on the parent, a read-only transaction,
 * or a column of the partition this routine cannot fill as the statement would.
 */
bool direct_insert(Oid parent, Oid partition, const EnqueueRow *rows, const int *pick, int n, const RowColumn *extra,
				   int nextra);

/* A column of a row given to direct_target_insert: its name and exact type. */
struct DirectColumn
{
	const char *name;
	Oid type;
};

/* A table (or one partition of it) open for direct inserts of rows column by column. */
struct DirectTarget
{
	Relation parent;
	Relation rel;
	EState *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	int *column_of; /* per attribute of rel: its index in the caller's columns, -1 when dropped */
};

/*
 * Open `partition` of `parent` for rows of exactly `columns` (every column of the table,
 * each of its exact type); false, having opened nothing, when a planned statement must
 * insert (as direct_insert). Close with direct_target_close; the caller makes the rows
 * visible with CommandCounterIncrement.
 */
bool direct_target_open(DirectTarget *t, Oid parent, Oid partition, const DirectColumn *columns, int ncolumns);

/* Insert one row: values[c], nulls[c] for columns[c] of direct_target_open. */
void direct_target_insert(DirectTarget *t, const Datum *values, const bool *nulls);

/*
 * Insert one row unless a row with its key in the unique index `arbiter` of the target exists
 * or is being inserted: a speculative insertion, as INSERT .. ON CONFLICT makes it (a
 * conflicting insertion in progress is waited for). False, having inserted nothing, on a
 * conflict: the caller's ON CONFLICT statement takes the row.
 */
bool direct_target_insert_unless_conflict(DirectTarget *t, const Datum *values, const bool *nulls, Oid arbiter);

/*
 * Insert one row, or, when a row with its key in the unique index `arbiter` exists, update
 * that row to the values given (a NULL value of a column with keep_stored[c] keeps the stored
 * one), as INSERT .. ON CONFLICT DO UPDATE does: the existing row is locked first, waiting for
 * a writer that holds it. False, having written nothing, when the row changed meanwhile or an
 * insertion of the key raced this one: the caller's ON CONFLICT statement takes the row.
 */
bool direct_target_upsert(DirectTarget *t, const Datum *values, const bool *nulls, const bool *keep_stored,
						  Oid arbiter);

/*
 * Update the row at `tid` of the target to values[c], nulls[c] (every column), waiting for a
 * writer in progress: in place, HOT when the page has room. False, having changed nothing,
 * when the row was updated or deleted since the caller read it. The caller holds the
 * privileges an UPDATE would check.
 */
bool direct_target_update(DirectTarget *t, ItemPointer tid, const Datum *values, const bool *nulls);
/* Close a target opened by direct_target_open (the locks stay to the end of the transaction). */
void direct_target_close(DirectTarget *t);

/*
 * Whether the first n key columns of `index` are the columns `names` of `rel`, in that
 * order: a direct scan keyed on them reads what the statement's index scan reads (a 1.0
 * catalog's keys lead with other columns, and its calls keep their statements).
 */
bool index_keys_are(Relation rel, Relation index, const char *const *names, int n);

/*
 * Whether a planned statement would do more on this table than a direct access does (a
 * trigger, rule, row security or stored generated column): then the statement runs.
 */
bool needs_planned_statement(Relation rel);

/*
 * Whether the current user holds every privilege of `mode` on the relation: the rights a
 * statement doing the same work would check (pg_class_aclcheck of several bits accepts any one).
 */
bool has_all_privileges(Oid relid, AclMode mode);

/* OID of relation awa.<name>; a missing one is a broken install. */
Oid awa_relation(const char *name);

} // namespace awa
