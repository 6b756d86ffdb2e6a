#include "sched/pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/thread.h"

struct sched_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    struct pool_job *ready_head, *ready_tail; /* FIFO: fair between models */
    struct pool_job *timers;                 /* unordered; few at a time */
    uint32_t idle;                         /* workers asleep */
    bool stopping;
    uint32_t nthreads, started;
    pthread_t *tids;
    char name[12];
    bool lowest_priority; /* workers at SCHED_IDLE */
};

/* Lock held. */
static void make_ready(struct sched_pool *p, struct pool_job *s)
{
    if (s->_on_ready)
        return;
    s->hold(s);
    s->_on_ready = true;
    s->_ready_next = NULL;
    if (p->ready_tail)
        p->ready_tail->_ready_next = s;
    else
        p->ready_head = s;
    p->ready_tail = s;
}

void pool_post(struct sched_pool *p, struct pool_job *s)
{
    pthread_mutex_lock(&p->lock);
    bool was = s->_on_ready;
    make_ready(p, s);
    if (!was && p->idle)
        pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void pool_wake_at(struct sched_pool *p, struct pool_job *s, uint64_t wake_ns)
{
    pthread_mutex_lock(&p->lock);
    bool earlier = !s->_on_timer || wake_ns < s->_wake_ns;
    if (!s->_on_timer) {
        s->hold(s);
        s->_on_timer = true;
        s->_timer_next = p->timers;
        p->timers = s;
        s->_wake_ns = wake_ns;
    } else if (earlier) {
        s->_wake_ns = wake_ns;
    }
    if (earlier && p->idle)
        pthread_cond_signal(&p->cond); /* a sleeper may need to wake sooner */
    pthread_mutex_unlock(&p->lock);
}

/* Moves the due timers to the ready list; returns the earliest time still
 * to come (0: none). Lock held. */
static uint64_t due_timers(struct sched_pool *p, uint64_t now)
{
    uint64_t next = 0;
    struct pool_job **pp = &p->timers;
    while (*pp) {
        struct pool_job *s = *pp;
        if (s->_wake_ns <= now) {
            *pp = s->_timer_next;
            s->_on_timer = false;
            make_ready(p, s);
            s->drop(s); /* the ready list holds its own */
            continue;
        }
        if (!next || s->_wake_ns < next)
            next = s->_wake_ns;
        pp = &s->_timer_next;
    }
    return next;
}

static void sleep_until(struct sched_pool *p, uint64_t until_ns)
{
    p->idle++;
    if (!until_ns) {
        pthread_cond_wait(&p->cond, &p->lock);
    } else {
        struct timespec ts = {.tv_sec = (time_t)(until_ns / 1000000000u),
                              .tv_nsec = (long)(until_ns % 1000000000u)};
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    p->idle--;
}

struct worker_arg {
    struct sched_pool *pool;
    char name[64]; /* "<pool>-<index>", the thread's name (cut to 15 bytes) */
};

static void *worker_main(void *arg)
{
    struct worker_arg *a = arg;
    struct sched_pool *p = a->pool;
    if (p->lowest_priority) {
        struct sched_param sp = {0};
        int rc = pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
        if (rc)
            log_warn("%s: cannot lower its CPU priority (SCHED_IDLE): %s", a->name, strerror(rc));
    }
    mem_free(a);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        uint64_t next = due_timers(p, clock_now_ns());
        struct pool_job *s = p->ready_head;
        if (s) {
            p->ready_head = s->_ready_next;
            if (!p->ready_head)
                p->ready_tail = NULL;
            s->_on_ready = false;
            pthread_mutex_unlock(&p->lock);
            s->run(s);
            s->drop(s);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        if (p->stopping)
            break;
        sleep_until(p, next);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int pool_start(uint32_t nthreads, const char *name, bool idle, struct sched_pool **out);

int sched_pool_start(uint32_t nthreads, const char *name, struct sched_pool **out)
{
    return pool_start(nthreads, name, false, out);
}

int sched_pool_start_idle(uint32_t nthreads, const char *name, struct sched_pool **out)
{
    return pool_start(nthreads, name, true, out);
}

static int pool_start(uint32_t nthreads, const char *name, bool idle, struct sched_pool **out)
{
    struct sched_pool *p = mem_calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    if (nthreads < 1)
        nthreads = 1;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->lowest_priority = idle;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    p->nthreads = nthreads;
    p->tids = mem_calloc(nthreads, sizeof *p->tids);
    int rc = p->tids ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < nthreads; i++) {
        struct worker_arg *a = mem_calloc(1, sizeof *a);
        if (!a) {
            rc = -ENOMEM;
            break;
        }
        a->pool = p;
        snprintf(a->name, sizeof a->name, "%s-%u", p->name, i);
        char name[sizeof a->name]; /* a may be freed by the worker before the start returns */
        memcpy(name, a->name, sizeof name);
        rc = -thread_start(&p->tids[i], name, worker_main, a);
        if (rc) {
            mem_free(a);
            break;
        }
        p->started++;
    }
    if (rc) {
        sched_pool_stop(p);
        return rc;
    }
    *out = p;
    return 0;
}

uint32_t sched_pool_threads(const struct sched_pool *p)
{
    return p->nthreads;
}

void sched_pool_stop(struct sched_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < p->started; i++)
        pthread_join(p->tids[i], NULL);
    /* Every scheduler stopped first: no timer is left that matters. */
    while (p->timers) {
        struct pool_job *s = p->timers;
        p->timers = s->_timer_next;
        s->_on_timer = false;
        s->drop(s);
    }
    mem_free(p->tids);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    mem_free(p);
}
