/* clock: monotonic time for timeouts and durations; wall time for records. */
#ifndef INFERD_BASE_CLOCK_H
#define INFERD_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_now_ms(void)
{
    return clock_now_ns() / 1000000ull;
}

/* Wall-clock time, ms since the Unix epoch (for records people read). */
static inline int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
