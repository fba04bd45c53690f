/*
 * wakeup.hpp — wake-ups of waiting workers (wakeup.cpp): the NOTIFY throttle and, when
 * preloaded, the wake slots in shared memory that a producing commit signals.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Remember that this transaction made work available in a queue. */
void note_enqueued(const char *queue, int queue_len);

/* Transaction end: signal waiters of the queues this transaction fed. */
void wakeup_at_xact_end(bool committed);

/* Shared memory of the wake slots and NOTIFY stamps, and its attachment. */
Size wakeup_shmem_size();
void wakeup_shmem_init(void *base, bool found);

} // namespace awa
