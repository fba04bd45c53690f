/*
 * spi_util.hpp — checked SPI (spi_util.cpp): kept plans, execution that requires the exact
 * result code, the hot path's planner settings, and subtransactions that absorb
 * serialization failures.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "executor/spi.h"
}

namespace awa
{

/* Prepare a statement once per backend and keep it (SPI must be connected). */
SPIPlanPtr keep_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);

/* The same, always with the generic plan (statements run once per job; see spi_util.cpp). */
SPIPlanPtr keep_generic_plan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);

/* Execute a kept plan and require the exact SPI result code. */
void exec_plan(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
			   const char *what);

/* Execute a kept plan on the latest committed state, whatever the caller's isolation level. */
void exec_plan_latest(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count, int expected,
					  const char *what);

/* exec_plan_latest under a snapshot the caller took (and keeps, to test what it saw). */
void exec_plan_snapshot(SPIPlanPtr plan, const Datum *values, const char *nulls, bool read_only, long count,
						int expected, const char *what, Snapshot snapshot);

/* The first column of the last statement's single row (false: no row, or NULL). */
bool spi_single_value(Datum *value);

/* Pin the planner settings of the hot path's lane scans; returns the level to pop. */
int push_hot_path_planner();

/* Give the session its own planner settings back. */
void pop_hot_path_planner(int level);

/*
 * Run fn(arg) in a subtransaction; false when it raised a serialization failure (40001),
 * which is rolled back and swallowed. Any other error is raised again.
 */
bool run_unless_serialization_failure(void (*fn)(void *), void *arg);
/*
 * Run fn(arg); a unique violation of a Citus shard of index `index` (named `index`_<shard
 * id>) is raised again naming `index` and its table `table`, as on one node.
 */
void run_naming_shard_index(void (*fn)(void *), void *arg, const char *index, const char *table);

} // namespace awa
