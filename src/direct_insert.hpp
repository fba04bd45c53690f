/*
 * direct_insert.hpp — inserts of job rows into a known partition through PostgreSQL's
 * direct access routines (direct_insert.cpp), as the logical replication apply worker's
 * ExecSimpleRelationInsert does: heap insert, constraints and index entries, no planned
 * statement (docs/design.md §3, "Direct inserts").
 */
#pragma once

#include "enqueue_core.hpp"

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

} // namespace awa
