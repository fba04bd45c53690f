/*
 * catalog_version.hpp — which version of the extension's catalog an entry point serves.
 *
 * Each SQL script names the C symbols of its own version (docs/design.md §11): the 1.1
 * scripts name the `_1_1` entry points, the frozen 1.0 script the unsuffixed ones, which
 * live in compat_1_0.cpp. An entry point passes its version to the body below, so no call
 * asks the catalog which version is installed. A backend that outlives ALTER EXTENSION
 * UPDATE calls the new symbols from its next statement on.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "fmgr.h"
}

namespace awa
{

/* Catalog versions with entry points of their own (the index of per-version plan slots). */
enum class Catalog
{
	V1_0 = 0,
	V1_1 = 1
};

/* The bodies behind each version's entry points. */
Datum claim_ready_runtime(FunctionCallInfo fcinfo, Catalog catalog); /* claim.cpp */
Datum complete_jobs(FunctionCallInfo fcinfo, Catalog catalog);		 /* lifecycle.cpp */
Datum wait_for_jobs(FunctionCallInfo fcinfo, Catalog catalog);		 /* wakeup.cpp */
Datum insert_jobs(FunctionCallInfo fcinfo, Catalog catalog);		 /* enqueue_api.cpp */
Datum insert_job_compat(FunctionCallInfo fcinfo, Catalog catalog);	 /* enqueue_api.cpp */

} // namespace awa
