/*
 * direct_key_places.hpp — the places of the keys of a claim under a per-key concurrency
 * limit through PostgreSQL's direct access routines (direct_key_places.cpp): the count of a
 * key's taken places (its entries in awa.key_attempts by their primary key, each attempt
 * tested as the count statement tests it, direct_complete.cpp), then the record of the
 * attempts the claim started in the free places it found, no planned statement
 * (docs/design.md §4, "Flow control").
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "storage/itemptr.h"
}

#include "direct_drain.hpp"
#include "key_caps.hpp"
#include "key_places_memo.hpp"
#include "lane_key.hpp"

namespace awa
{

/* At most this many distinct keys in the part of a window one claim takes (their locks). */
constexpr int kMaxKeysPerClaim = 32;

/*
 * A free place a count found: its key (index into KeyPlaces::keys), number and row version,
 * and whether it came from memory (key_places_memo.hpp: the record checks its row first).
 */
struct FreePlace
{
	int key;
	int32 place;
	ItemPointerData tid;
	TransactionId xmin;
	bool remembered;
};

/*
 * The places of the keys a claim counted (it holds their locks): per key its highest place
 * (-1: none) and its free places, in key then place order; every place found (key_of[i],
 * taken[i]: its attempt open) and the basis they were found under, for what the record
 * publishes (key_places_memo.hpp). `known` is false when the count statement counted
 * instead: the record statement then finds the places itself.
 */
struct KeyPlaces
{
	bool known;
	int nkeys;
	text *keys[kMaxKeysPerClaim];
	int32 top[kMaxKeysPerClaim];
	FreePlace *free;
	int nfree;
	MemoBasis basis;
	RememberedPlace *place;
	int *key_of;
	bool *taken;
	int nplaces;
};

/*
 * The running attempts of each of n distinct keys of the queue into counts[] (their taken
 * places), with the live arcs of the queue ring (queue_arc: read under the keys' locks, after
 * any turn of the ring a claim of these keys saw) and of the claim ring (read when a place
 * is to be tested), as the statement kKeyCountSql (flow_control.cpp)
 * counts them; each key's free places and highest place into *places. The caller holds the
 * keys' locks. False, having read and written nothing, when the statement must count
 * instead: Citus, a read-only transaction, missing privileges, a trigger, rule or row
 * security, or a place of a lease (leases mode). keys[0]'s running attempts are named in
 * *first_key (key_caps.hpp). SPI must be connected.
 */
bool count_key_attempts_direct(text *queue, const Datum *keys, int n, const int queue_arc[4], int64 *counts,
							   CapWitness *first_key, KeyPlaces *places);

/*
 * Record the n keyed attempts a claim started in the lane (priority, shard), each with its
 * key, in the places *places found: a key's free places first (lowest first, updated in
 * place), then new places after its highest; then the free places of those keys left over
 * are removed. False when the statement kRecordKeySql must record instead, or finish (it
 * passes over attempts already in a place): the count was the statement's, an attempt's key
 * was not counted, the table needs a planned statement, or a place changed meanwhile.
 */
bool record_key_attempts_direct(text *queue, int16 priority, int16 shard, const KeyedAttempt *attempts, int n,
								KeyPlaces *places);

} // namespace awa
