/*
 * shard.hpp — routing (shard.cpp): a queue's width as this transaction sees it, and the
 * keyless pick of a shard.
 */
#pragma once

namespace awa
{

/* Width of a queue for this transaction (queue_meta, cached per transaction). */
int queue_width(const char *queue, int queue_len);

/* Forget cached widths (own-transaction change of queue_meta). */
void forget_queue_widths();

/* Keyless pick, sticky per (queue, priority) for the rest of the transaction. */
int sticky_rotor_shard(const char *queue, int queue_len, int priority, int shards);

} // namespace awa
