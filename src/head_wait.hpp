/*
 * head_wait.hpp — a claim that found every lane with work held by other claims waits for
 * one of them to end instead of returning nothing (head_wait.cpp).
 */
#pragma once

extern "C"
{
#include "postgres.h"
#include "utils/timestamp.h"
}

#include <cstdint>

namespace awa
{

/* awa_shard.claim_wait: milliseconds a claim waits for a held lane head (0: never waits). */
extern int claim_wait_ms;

/*
 * The release count of the queue's wait slot, read before a walk tries the heads; 0 when a
 * claim must not wait (not preloaded, claim_wait = 0, or not READ COMMITTED).
 */
std::uint64_t head_release_ticket(text *queue);

/*
 * Sleep until a transaction that held a head of the queue's wait slot has ended since
 * `ticket` was read, or `deadline` passes; true when one ended.
 */
bool wait_for_head_release(text *queue, std::uint64_t ticket, TimestampTz deadline);

/* This transaction locked a head of the queue: its end wakes the claims waiting for it. */
void note_head_held(text *queue);

/* Define awa_shard.claim_wait and register the end-of-transaction hook (_PG_init). */
void init_head_wait();

/* shmem_request_hook / shmem_startup_hook of the wait slots. */
void head_wait_shmem_request();
void head_wait_shmem_startup();

} // namespace awa
