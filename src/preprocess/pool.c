/*
 * pool.c: the preprocessing workers (pool.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/mem.h"
#include "base/thread.h"
#include "preprocess/pool.h"

struct prep_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct prep_job *head, *tail;
    _Atomic uint32_t waiting;
    uint32_t queue_limit;
    bool stopping;
    uint32_t nthreads;
    pthread_t threads[];
};

static void *worker_main(void *arg)
{
    struct prep_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        struct prep_job *job = p->head;
        if (!job)
            break; /* stopping, and nothing left */
        p->head = job->next;
        if (!p->head)
            p->tail = NULL;
        atomic_fetch_sub_explicit(&p->waiting, 1, memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
        job->run(job);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int prep_pool_start(uint32_t threads, uint32_t queue_limit, struct prep_pool **out)
{
    if (threads < 1 || threads > PREP_POOL_MAX_THREADS || queue_limit < 1)
        return -EINVAL;
    struct prep_pool *p = mem_calloc(1, sizeof *p + threads * sizeof p->threads[0]);
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->queue_limit = queue_limit;
    for (; p->nthreads < threads; p->nthreads++) {
        char name[32]; /* cut to the kernel's 15 bytes by thread_start */
        snprintf(name, sizeof name, "preprocess-%u", p->nthreads);
        int rc = thread_start(&p->threads[p->nthreads], name, worker_main, p);
        if (rc) {
            prep_pool_stop(p);
            return -rc;
        }
    }
    *out = p;
    return 0;
}

int prep_pool_submit(struct prep_pool *p, struct prep_job *job)
{
    pthread_mutex_lock(&p->mu);
    if (atomic_load_explicit(&p->waiting, memory_order_relaxed) >= p->queue_limit || p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return -EAGAIN;
    }
    job->next = NULL;
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    atomic_fetch_add_explicit(&p->waiting, 1, memory_order_relaxed);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

uint32_t prep_pool_waiting(const struct prep_pool *p)
{
    return atomic_load_explicit(&p->waiting, memory_order_relaxed);
}

void prep_pool_stop(struct prep_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    mem_free(p);
}
