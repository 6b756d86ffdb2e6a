/*
 * pool_use: sizing a free list of reusable objects by recent use.
 *
 * The front ends keep request objects (each with its arena chunk or message
 * buffer) for reuse, so that a warm server allocates nothing per request.
 * Without a bound in time, a burst of concurrent requests would leave its
 * peak of objects pooled for ever. The owner counts objects handed out
 * (pool_use_take / pool_use_give) and, once per period, keeps only as many
 * free objects as the busiest moment of that period used beyond those live
 * now (pool_use_keep). Steady concurrency keeps its objects; a burst's are
 * freed one to two periods after it.
 *
 * Single-threaded: the owning loop thread only.
 */
#ifndef INFERD_BASE_POOL_USE_H
#define INFERD_BASE_POOL_USE_H

#include <stdint.h>

/* How often pools are cut back to their recent use. */
#define POOL_USE_PERIOD_MS 10000

struct pool_use {
    uint32_t live;        /* objects handed out and not returned */
    uint32_t peak;        /* most live at once in this period */
    uint64_t period_start_ms;
};

static inline void pool_use_take(struct pool_use *u)
{
    if (++u->live > u->peak)
        u->peak = u->live;
}

static inline void pool_use_give(struct pool_use *u)
{
    u->live--;
}

/* At most once per POOL_USE_PERIOD_MS (else returns UINT32_MAX: keep all):
 * the number of free objects worth keeping, and a new period starts. */
static inline uint32_t pool_use_keep(struct pool_use *u, uint64_t now_ms)
{
    if (now_ms - u->period_start_ms < POOL_USE_PERIOD_MS)
        return UINT32_MAX;
    uint32_t keep = u->peak - u->live;
    u->peak = u->live;
    u->period_start_ms = now_ms;
    return keep;
}

#endif
