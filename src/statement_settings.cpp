/*
 * statement_settings.cpp — the settings the statements of an awa C function run under
 * (docs/design.md §9, "Statement settings").
 *
 * A SECURITY DEFINER function must not let its caller's search_path choose the operators,
 * functions and types its statements resolve. SQL and PL/pgSQL functions pin it with a SET
 * clause, which PostgreSQL applies on every call (fmgr_security_definer: the clause parsed,
 * set, the search path computed again, and every setting scanned when it is undone). The C
 * functions of the hot path carry no such clause: the boundary (pg_boundary.hpp) opens a frame
 * per call, and the call pins search_path = pg_catalog, pg_temp and jit = off here before its
 * first statement is prepared or run (spi_util.cpp, citus.cpp, reserve.cpp) and before it opens
 * a GUC level or subtransaction of its own, so the pin always sits at the call's outermost level
 * and nothing the call pops can undo it. A call that runs no statement (the direct paths)
 * resolves no name through the search path and leaves the session's settings alone. The frame's
 * normal end restores the caller's settings; on error the abort of the (sub)transaction that
 * catches it does.
 */
#include "statement_settings.hpp"

extern "C"
{
#include "catalog/namespace.h"
#include "jit/jit.h"
#include "utils/guc.h"
}

#include <cstring>

namespace awa
{

namespace
{

/* The search path every statement of the extension runs under. */
constexpr const char *kPinnedSearchPath = "pg_catalog, pg_temp";

/* The GUC level this call pinned at; 0: not pinned by it; -1: no call is running. */
int frame_pin_level = -1;

} // namespace

/* Pin the settings for the rest of the current call, on first need (see the header). */
void
pin_statement_settings()
{
	if (frame_pin_level != 0)
		return;
	if (namespace_search_path != nullptr && std::strcmp(namespace_search_path, kPinnedSearchPath) == 0 && !jit_enabled)
		return;
	frame_pin_level = NewGUCNestLevel();
	(void)set_config_option("search_path", kPinnedSearchPath, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
							false);
	(void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

/* Open a call's frame: nothing pinned yet. */
int
enter_statement_frame()
{
	int outer = frame_pin_level;

	frame_pin_level = 0;
	return outer;
}

/* End a call normally: give back what it pinned, then the enclosing call's state. */
void
leave_statement_frame(int outer)
{
	if (frame_pin_level > 0)
		AtEOXact_GUC(true, frame_pin_level);
	frame_pin_level = outer;
}

/* End a call on error: the abort pops its GUC level; only the frame state comes back. */
void
abandon_statement_frame(int outer)
{
	frame_pin_level = outer;
}

} // namespace awa
