/*
 * pool: the worker threads that run the batches no I/O thread runs inline
 * (models above the inline budget, models whose run time is not known
 * yet, batches that waited for their delay, submits from other threads).
 *
 * One process-wide pool, sized to the CPUs the process may use
 * (base/cpus.h), serves every model. A job (a model's scheduler, embedding
 * a struct pool_job) with work is put on the pool's ready list once, and a
 * free worker runs it (the scheduler leases one of its instances and runs
 * a batch). Workers are named "<name>-<i>" (top -H, debuggers). A job
 * that waits for a batch to fill sets a wake-up time; a free worker sleeps
 * until the earliest one.
 *
 * sched_pool_stop() only after every scheduler using the pool stopped.
 */
#ifndef INFERD_SCHED_POOL_H
#define INFERD_SCHED_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct sched_local;
struct sched_pool;

/* Work for the pool, embedded in its owner. */
struct pool_job {
    void (*run)(struct pool_job *j);  /* on a worker thread */
    void (*hold)(struct pool_job *j); /* keeps the owner alive while listed */
    void (*drop)(struct pool_job *j); /* undoes hold */
    /* On an I/O thread's pending list (sched/local.c): runs what fits that
     * thread's budget, as run does on a worker. NULL for a job that never
     * runs on an I/O thread. */
    void (*run_local)(struct pool_job *j, struct sched_local *here);
    /* The pool's, under its lock. */
    bool _on_ready, _on_timer;
    uint64_t _wake_ns;
    struct pool_job *_ready_next, *_timer_next;
};

/* j has work for a worker now (any thread). */
void pool_post(struct sched_pool *p, struct pool_job *j);
/* A worker runs j once wake_ns (clock_now_ns) has come (any thread). */
void pool_wake_at(struct sched_pool *p, struct pool_job *j, uint64_t wake_ns);

/* Starts nthreads (>= 1) workers. Returns 0 or -errno. */
int sched_pool_start(uint32_t nthreads, const char *name, struct sched_pool **out);
/* The same with workers of the lowest CPU priority (Linux SCHED_IDLE: they
 * run only when no other thread of the machine wants the CPU), for
 * background work (shadow copies) that must never slow client requests. */
int sched_pool_start_idle(uint32_t nthreads, const char *name, struct sched_pool **out);
uint32_t sched_pool_threads(const struct sched_pool *p);
void sched_pool_stop(struct sched_pool *p);

#endif
