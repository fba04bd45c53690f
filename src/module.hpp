/*
 * module.hpp — what the library entry (module.cpp) offers the other concerns: the NOTIFY
 * setting, whether the library was preloaded, the keyless rotor, and the per-transaction
 * epoch, the queue_meta stamp and the ring stamp that backend caches compare against.
 */
#pragma once

#include <cstdint>

namespace awa
{

/* Milliseconds between NOTIFYs per queue (0 = every transaction, -1 = never). */
extern int notify_interval_ms;

/* Whether the library was loaded by shared_preload_libraries (shared memory exists). */
bool shared_state_available();

/* Next ticket of the server-wide rotor (or of the backend-local fallback). */
std::uint32_t next_rotor_ticket();

/* Counter bumped whenever this backend's transaction ends; caches compare against it. */
std::uint64_t current_xact_epoch();

/* Validity stamp of cached queue widths (see module.cpp). */
std::uint64_t queue_meta_stamp();

/* Called by the queue_meta trigger: widths change at this transaction's commit. */
void note_queue_meta_changed();

/* Validity stamp of cached ring cursors; 0 when they must be read (see module.cpp). */
std::uint64_t ring_state_stamp();

/* Called by the ring tables' trigger: cached ring cursors are untrusted until this transaction ends. */
void note_ring_changed();

} // namespace awa
