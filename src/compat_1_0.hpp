/*
 * compat_1_0.hpp — the statements the library keeps only for a 1.0 catalog (compat_1_0.cpp),
 * used by the bodies behind the 1.0 entry points when they run for that catalog.
 */
#pragma once

namespace awa::compat_1_0
{

/* The relation holding a 1.0 lane's cursor and run_at hint: its head row. */
extern const char *const kCursorRelation;

/* The drain statement of a 1.0 claim (parameters as claim.cpp's drain). */
const char *claim_drain_sql(bool receipts);

/* The statement that forgets a 1.0 head's stale hint ($1..$3: the lane). */
const char *claim_clear_hint_sql();

/* The statement that locks a 1.0 completion's receipts ($1..$6 as lifecycle.cpp's). */
const char *completion_lock_sql();

/* The statement of a 1.0 completion (parameters as lifecycle.cpp's completion). */
const char *completion_sql();

/* The insert of a 1.0 enqueue's unique claims ($1 keys, $2 job ids; no queue column). */
const char *unique_claims_insert_sql();

} // namespace awa::compat_1_0
