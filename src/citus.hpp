/*
 * citus.hpp — scale-out by queue on Citus (citus.cpp, docs/scale-out.md): whether this
 * database runs under Citus, and the refusal of a call whose queue lives on another node.
 * Without Citus both cost one cached test.
 */
#pragma once

extern "C"
{
#include "postgres.h"
}

namespace awa
{

/* Citus is loaded and its extension exists in this database (cached per backend). */
bool citus_present();

/*
 * Under Citus, once awa.citus_setup() has distributed awa.queue_meta: raise 0A000 with a
 * hint unless the queue's shard is on this node (the call was delegated to the queue's
 * worker, or made there). Before anything is touched; nothing without Citus.
 */
void require_queue_local(const char *queue, int queue_len);

} // namespace awa
