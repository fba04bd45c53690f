/*
 * wakeup.hpp — wake-ups of waiting workers (wakeup.cpp): the NOTIFY throttle and, when
 * preloaded, the wake slots in shared memory that a producing commit signals.
 */
#pragma once

namespace awa
{

/* Remember that this transaction made work available in a queue. */
void note_enqueued(const char *queue, int queue_len);

/* Transaction end: signal waiters of the queues this transaction fed. */
void wakeup_at_xact_end(bool committed);

/* shmem_request_hook: request the shared memory of the wake slots and NOTIFY stamps. */
void wakeup_shmem_request();

/* shmem_startup_hook: claim them by name ("awa_shard wakeup"), initialising them once. */
void wakeup_shmem_startup();

} // namespace awa
