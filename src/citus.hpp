/*
 * citus.hpp — scale-out by queue on Citus (citus.cpp, docs/scale-out.md): whether this
 * database runs under Citus, and the refusal of a call whose queue lives on another node.
 * Without Citus both cost one cached test.
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "executor/spi.h"
}

namespace awa
{

/* Citus is loaded and its extension exists in this database (cached per backend). */
bool citus_present();

/*
 * This node's Citus group (0: the coordinator) once awa.citus_setup() has distributed
 * awa.queue_meta; -1 without Citus or before that. Without Citus one cached test.
 */
int citus_group();

/*
 * Under Citus, once awa.citus_setup() has distributed awa.queue_meta: raise 0A000 with a
 * hint unless the queue's shard is on this node (the call was delegated to the queue's
 * worker, or made there). Before anything is touched; nothing without Citus.
 */
void require_queue_local(const char *queue, int queue_len);

/* Whether awa.citus_setup() has distributed the install and the queue's shard is on this node. */
bool queue_shard_here(text *queue);

/*
 * The same for a call whose p_queue may be NULL (by id alone): under Citus, once distributed,
 * NULL is refused (0A000, hint: give p_queue), since such a call cannot be delegated.
 */
void require_queue_local_or_given(text *queue);

/*
 * Under Citus, once the queue's tables are distributed: a kept plan of `sql` in which every
 * distributed table of awa is named by its shard holding `queue` (on this node: the caller
 * checked). PostgreSQL plans it as an ordinary statement, so nothing of it leaves this node
 * (Citus plans a data-modifying CTE apart and sends its input to every node). nullptr
 * without Citus or before awa.citus_setup(). Cached per backend by (sql, queue).
 */
SPIPlanPtr keep_shard_plan(const char *sql, text *queue, int nargs, const Oid *argtypes);

/*
 * The name, schema-qualified, of the shard of awa.queue_enqueue_heads holding the queue once
 * awa.citus_setup() has distributed it (the caller knows the queue's shard is on this node);
 * nullptr before that or without Citus. SPI must be connected.
 */
char *queue_heads_shard_name(text *queue);

} // namespace awa
