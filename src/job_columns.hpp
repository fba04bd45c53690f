/*
 * job_columns.hpp — the one C++ definition of a job: its stored attributes, in the order
 * of the SQL composite type awa.job_template (sql/awa_shard--1.0--1.1.sql). The enqueue
 * statements' column lists, their parameter types and the code that fills them are all
 * generated from this list; the regression test job_definition checks that it agrees with
 * awa.job_template and that every job table carries every attribute (docs/design.md,
 * "Adding a job attribute").
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "catalog/pg_type.h"
}

/*
 * X(ENUM, name, SQL type, parameter type, element SQL type, element type): the parameter
 * type carries one value; a batch carries a column as an array of the element type. An
 * array attribute (tags) travels in a batch as its text literal (PostgreSQL has no arrays
 * of arrays) and is cast back to the SQL type.
 */
#define AWA_JOB_COLUMNS(X)                                                                                             \
	X(ID, job_id, "bigint", INT8OID, "bigint", INT8OID)                                                                \
	X(KIND, kind, "text", TEXTOID, "text", TEXTOID)                                                                    \
	X(QUEUE, queue, "text", TEXTOID, "text", TEXTOID)                                                                  \
	X(ARGS, args, "jsonb", JSONBOID, "jsonb", JSONBOID)                                                                \
	X(PRIORITY, priority, "smallint", INT2OID, "smallint", INT2OID)                                                    \
	X(ATTEMPT, attempt, "smallint", INT2OID, "smallint", INT2OID)                                                      \
	X(RUN_LEASE, run_lease, "bigint", INT8OID, "bigint", INT8OID)                                                      \
	X(MAX_ATTEMPTS, max_attempts, "smallint", INT2OID, "smallint", INT2OID)                                            \
	X(RUN_AT, run_at, "timestamptz", TIMESTAMPTZOID, "timestamptz", TIMESTAMPTZOID)                                    \
	X(ATTEMPTED_AT, attempted_at, "timestamptz", TIMESTAMPTZOID, "timestamptz", TIMESTAMPTZOID)                        \
	X(CREATED_AT, created_at, "timestamptz", TIMESTAMPTZOID, "timestamptz", TIMESTAMPTZOID)                            \
	X(UNIQUE_KEY, unique_key, "bytea", BYTEAOID, "bytea", BYTEAOID)                                                    \
	X(UNIQUE_STATES, unique_states, "bit(8)", VARBITOID, "varbit", VARBITOID)                                          \
	X(ORDERING_KEY, ordering_key, "bytea", BYTEAOID, "bytea", BYTEAOID)                                                \
	X(METADATA, metadata, "jsonb", JSONBOID, "jsonb", JSONBOID)                                                        \
	X(TAGS, tags, "text[]", TEXTARRAYOID, "text", TEXTOID)                                                             \
	X(ERRORS, errors, "jsonb", JSONBOID, "jsonb", JSONBOID)                                                            \
	X(CONCURRENCY_KEY, concurrency_key, "text", TEXTOID, "text", TEXTOID)

namespace awa
{

/* A job attribute by name: JOB_ID, JOB_KIND, ... (JOB_NCOLUMNS counts them). */
enum JobColumn
{
#define AWA_JOB_ENUM(e, name, sqltype, type, elemsql, elemtype) JOB_##e,
	AWA_JOB_COLUMNS(AWA_JOB_ENUM)
#undef AWA_JOB_ENUM
		JOB_NCOLUMNS
};

/* What the generated statements need to know of an attribute. */
struct JobColumnDef
{
	const char *name;	  /* column name in every job table */
	const char *sql_type; /* declared type */
	Oid type;			  /* parameter type of one value */
	const char *elem_sql; /* element type of a batch column */
	Oid elem_type;
};

inline constexpr JobColumnDef kJobColumns[JOB_NCOLUMNS] = {
#define AWA_JOB_DEF(e, name, sqltype, type, elemsql, elemtype) {#name, sqltype, type, elemsql, elemtype},
	AWA_JOB_COLUMNS(AWA_JOB_DEF)
#undef AWA_JOB_DEF
};

} // namespace awa
