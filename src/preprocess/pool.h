/*
 * pool: the preprocessing workers, a fixed set of threads taking jobs from
 * one bounded first-in first-out line, so that decoding a large image or a
 * long recording never runs on an I/O thread.
 *
 * prep_pool_submit() never blocks: it refuses (returns -EAGAIN) when
 * `queue_limit` jobs already wait. A job runs exactly once, on a worker.
 * prep_pool_stop() lets the waiting jobs run, then joins the workers.
 * Threads: submit from any thread; start and stop from one (main).
 */
#ifndef INFERD_PREPROCESS_POOL_H
#define INFERD_PREPROCESS_POOL_H

#include <stdint.h>

struct prep_job {
    void (*run)(struct prep_job *job);
    struct prep_job *next; /* the pool's */
};

struct prep_pool;

#define PREP_POOL_MAX_THREADS 256

/* 0 with *out, or a negative errno. threads 1..PREP_POOL_MAX_THREADS,
 * queue_limit >= 1. */
int prep_pool_start(uint32_t threads, uint32_t queue_limit, struct prep_pool **out);
/* 0, or -EAGAIN when the line is full (the job is still the caller's). */
int prep_pool_submit(struct prep_pool *p, struct prep_job *job);
/* Jobs waiting now (a gauge). */
uint32_t prep_pool_waiting(const struct prep_pool *p);
void prep_pool_stop(struct prep_pool *p); /* NULL: no-op */

#endif
