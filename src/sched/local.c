/*
 * local: the I/O thread's side of run to completion (see sched.h).
 *
 * sched_submit() on an I/O thread adds the model's scheduler to the
 * thread's pending list and defers the thread's `flush` watcher to the end
 * of the loop pass. The flush looks at each pending scheduler once (its
 * pool job's run_local, which is queue.c's work with this context): it
 * runs the next batch inline when the model may, or hands the scheduler to
 * the pool once the batch is ready to go (a worker is woken per batch, not
 * per pass). A batch that waits to fill keeps its scheduler on the list
 * with a due time, and the loop calls the flush again then
 * (loop_defer_at). This file knows schedulers only as pool jobs, so the
 * dependency between it and queue.c is one way (queue.c calls local_add).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "sched/sched_int.h"

struct pending {
    struct pool_job *job;    /* held while listed */
    struct sched_pool *pool; /* where it goes when this thread cannot run it */
    uint64_t at_ns;          /* 0: this pass */
};

struct sched_local {
    struct loop *loop;
    uint64_t budget_ns;
    struct loop_watch flush;
    struct pending *list, *spare; /* spare: the list being flushed */
    uint32_t n, cap, spare_cap;
};

static void flush(struct loop_watch *w, uint32_t events);

struct sched_local *sched_local_new(struct loop *l, uint64_t budget_us)
{
    struct sched_local *x = mem_calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->loop = l;
    x->budget_ns = budget_us * 1000u;
    x->flush = (struct loop_watch){.fd = -1, .on_events = flush};
    x->cap = x->spare_cap = 8;
    x->list = mem_calloc(x->cap, sizeof *x->list);
    x->spare = mem_calloc(x->spare_cap, sizeof *x->spare);
    if (!x->list || !x->spare) {
        sched_local_free(x);
        return NULL;
    }
    return x;
}

void sched_local_free(struct sched_local *x)
{
    if (!x)
        return;
    for (uint32_t i = 0; x->list && i < x->n; i++)
        x->list[i].job->drop(x->list[i].job);
    mem_free(x->list);
    mem_free(x->spare);
    mem_free(x);
}

uint64_t local_budget_ns(const struct sched_local *x)
{
    return x->budget_ns;
}

void sched_local_stop(struct sched_local *x)
{
    for (uint32_t i = 0; i < x->n; i++) {
        pool_post(x->list[i].pool, x->list[i].job);
        x->list[i].job->drop(x->list[i].job);
    }
    x->n = 0;
}

/* Grows the list only: the spare may be the list a flush is walking. */
static int grow(struct sched_local *x)
{
    uint32_t cap = x->cap * 2;
    struct pending *list = mem_realloc(x->list, cap * sizeof *list);
    if (!list)
        return -ENOMEM;
    x->list = list;
    x->cap = cap;
    return 0;
}

void local_add(struct sched_local *x, struct sched_pool *pool, struct pool_job *job, uint64_t at_ns)
{
    struct pending *p = NULL;
    for (uint32_t i = 0; i < x->n && !p; i++)
        if (x->list[i].job == job)
            p = &x->list[i];
    if (p) {
        if (at_ns < p->at_ns)
            p->at_ns = at_ns;
    } else if (x->n == x->cap && grow(x) != 0) {
        /* Out of memory: a pool worker looks at the scheduler instead. */
        pool_post(pool, job);
        return;
    } else {
        job->hold(job);
        x->list[x->n++] = (struct pending){.job = job, .pool = pool, .at_ns = at_ns};
    }
    loop_defer_at(x->loop, &x->flush, at_ns);
}

static void flush(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct sched_local *x = (struct sched_local *)((char *)w - offsetof(struct sched_local, flush));
    /* Take the list: running a batch completes requests, whose front ends
     * may submit again (pipelined HTTP/1.1) and add to a new list. */
    struct pending *taken = x->list;
    uint32_t n = x->n, taken_cap = x->cap;
    x->list = x->spare;
    x->cap = x->spare_cap;
    x->spare = taken;
    x->spare_cap = taken_cap;
    x->n = 0;
    uint64_t now = clock_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        struct pool_job *job = taken[i].job;
        if (taken[i].at_ns > now)
            local_add(x, taken[i].pool, job, taken[i].at_ns);
        else
            job->run_local(job, x); /* runs it here, or hands a ready batch to the pool */
        job->drop(job);
    }
}
