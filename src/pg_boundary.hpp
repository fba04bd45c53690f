/*
 * pg_boundary.hpp — the single C++/PostgreSQL boundary of awa_shard.
 *
 * Every SQL-callable entry point is declared with AWA_SQL_FUNCTION(name). The
 * macro emits the extern "C" symbol and its PG_FUNCTION_INFO_V1 record, and runs
 * the C++ body inside invoke_guarded(), which catches every C++ exception
 * (std::bad_alloc -> 53200, anything else, `...` included -> XX000), copies its
 * message into plain storage, leaves the handler, and only then raises the
 * PostgreSQL error. Bad arguments are not C++ exceptions: validate.cpp raises them
 * with ereport and their own SQLSTATE. A PostgreSQL error
 * (longjmp) must never cross a live C++ object with a destructor: bodies hold no
 * std::string/std::vector across a call that can raise; they use palloc'd memory.
 * Each call is also a frame of the statement settings (statement_settings.cpp): what the call
 * pins for its statements is given back when it ends.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "fmgr.h"
#include "utils/elog.h"
}

#include "statement_settings.hpp"

#include <cstring>
#include <exception>

namespace awa
{

using SqlBody = Datum (*)(FunctionCallInfo);

/* Run one SQL function body; turn any C++ exception into a PostgreSQL ERROR. */
inline Datum
invoke_guarded(SqlBody body, FunctionCallInfo fcinfo)
{
	char message[512];
	int sqlstate = ERRCODE_INTERNAL_ERROR;

	message[0] = '\0';
	try
	{
		return body(fcinfo);
	}
	catch (const std::bad_alloc &)
	{
		sqlstate = ERRCODE_OUT_OF_MEMORY;
		std::strncpy(message, "out of memory in awa_shard", sizeof(message) - 1);
	}
	catch (const std::exception &e)
	{
		std::strncpy(message, e.what(), sizeof(message) - 1);
	}
	catch (...)
	{
		std::strncpy(message, "unknown C++ exception in awa_shard", sizeof(message) - 1);
	}
	message[sizeof(message) - 1] = '\0';
	/* The handler has ended: every C++ object of the body is destroyed. */
	ereport(ERROR, (errcode(sqlstate), errmsg("%s", message)));
	pg_unreachable();
}

/* Run one SQL function body inside its statement-settings frame (see statement_settings.cpp). */
inline Datum
run_sql_function(SqlBody body, FunctionCallInfo fcinfo)
{
	int outer = enter_statement_frame();
	Datum result;

	PG_TRY();
	{
		result = invoke_guarded(body, fcinfo);
	}
	PG_CATCH();
	{
		abandon_statement_frame(outer);
		PG_RE_THROW();
	}
	PG_END_TRY();
	leave_statement_frame(outer);
	return result;
}

} // namespace awa

/* Declare a SQL-callable function whose body runs inside the C++ guard. */
#define AWA_SQL_FUNCTION(name)                                                                                         \
	static Datum name##_body(PG_FUNCTION_ARGS);                                                                        \
	extern "C"                                                                                                         \
	{                                                                                                                  \
		PG_FUNCTION_INFO_V1(name);                                                                                     \
		Datum name(PG_FUNCTION_ARGS)                                                                                   \
		{                                                                                                              \
			return awa::run_sql_function(name##_body, fcinfo);                                                         \
		}                                                                                                              \
	}                                                                                                                  \
	static Datum name##_body(PG_FUNCTION_ARGS)
