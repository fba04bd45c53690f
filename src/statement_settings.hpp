/*
 * statement_settings.hpp — the settings the statements of an awa C function run under
 * (statement_settings.cpp): a pinned search_path and no JIT, taken on first need and given
 * back when the call ends.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/*
 * Pin search_path = pg_catalog, pg_temp and jit = off for the rest of the current call, unless
 * they hold already. Called before a statement is prepared or run, and before the call opens
 * a GUC level or a subtransaction of its own. Outside a call (a background worker's own
 * transaction) it does nothing.
 */
void pin_statement_settings();

/* Open the settings frame of one SQL-callable call; returns the enclosing call's state. */
int enter_statement_frame();

/* Close it at a normal return: the caller's settings come back if this call pinned them. */
void leave_statement_frame(int outer);

/* Close it on error: the (sub)transaction's abort gives the settings back. */
void abandon_statement_frame(int outer);

} // namespace awa
