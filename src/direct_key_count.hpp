/*
 * direct_key_count.hpp — the per-key count of a claim under a per-key concurrency limit
 * through PostgreSQL's direct access routines (direct_key_count.cpp): the keys' entries in
 * awa.key_attempts by their primary key, each entry's receipt tested as the count statement
 * tests it (direct_complete.cpp), the ended entries deleted, no planned statement
 * (docs/design.md §4, "Flow control").
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

#include "key_caps.hpp"

namespace awa
{

/*
 * The running attempts of each of n distinct keys of the queue into counts[], with the live
 * arcs of the queue ring (queue_arc: the claim's) and of the claim ring (read when an entry
 * is to be tested), as the statement kKeyCountSql
 * (flow_control.cpp) counts them, removing the entries found ended. The caller holds the
 * keys' locks. False, having read and written nothing, when the statement must count
 * instead: Citus, a read-only transaction, missing privileges, a trigger, rule or row
 * security, an unknown key, or an entry of a lease (leases mode). keys[0]'s running attempts
 * are named in *first_key (key_caps.hpp). SPI must be connected.
 */
bool count_key_attempts_direct(text *queue, const Datum *keys, int n, const int queue_arc[4], int64 *counts,
							   CapWitness *first_key);

} // namespace awa
