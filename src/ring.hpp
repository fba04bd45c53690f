/*
 * ring.hpp — the rings of partitions (ring.cpp): the write slot a transaction appends to,
 * fenced against prune, and the live arcs that readers restrict their probes to.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* The three rings, each a set of partitioned tables rotated and pruned together. */
enum class Ring
{
	Queue = 0, /* ready_entries, done_entries */
	Claim = 1, /* claim_batches (lease_claims on 1.0), lease_claim_closures */
	Lease = 2  /* leases */
};

/*
 * A ring's write slot and the generation it was read at; from ring_write_slot, also the
 * slot's first partition (ready_entries_<slot> of the queue ring), locked for writing and
 * looked up by name in this transaction.
 */
struct RingSlot
{
	int slot;
	int64 generation;
	Oid partition;
};

/*
 * The slot this transaction appends to, its partitions locked against prune (SPI connected);
 * with queue_arc, the queue ring's live arc as well (one read where the cursor is read).
 */
RingSlot ring_write_slot(Ring ring, int *queue_arc = nullptr);

/* The live slots of a ring as two inclusive ranges (the second empty unless the arc wraps). */
void live_slot_ranges(Ring ring, int ranges[4]);

/* The live arcs of the queue, claim and lease rings in one read (as live_slot_ranges). */
void live_slot_ranges_all(int queue_arc[4], int claim_arc[4], int lease_arc[4]);

/* OID of the ring partition awa.<prefix><slot> (e.g. "ready_entries_", 3); a missing one raises. */
Oid ring_partition_oid(const char *prefix, int slot);

} // namespace awa
