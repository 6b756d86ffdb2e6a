#include "sched/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "model/model.h"

struct sched {
    struct model *model;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct infer_request *head, *tail;
    uint32_t queued;
    uint32_t queue_limit;
    bool stopping;
};

static void run_one(struct sched *s, struct infer_request *req)
{
    struct model *m = s->model;
    req->exec_start_ns = clock_now_ns();
    error_clear(&req->err);
    req->backend_state = NULL;
    req->outputs = arena_calloc(&req->arena, req->noutputs, sizeof *req->outputs);
    if (!req->outputs) {
        req->rc = error_set(&req->err, 500, "out of memory for outputs");
    } else {
        req->rc = m->backend->execute(m->instance, &req->arena, req->inputs, req->ninputs,
                                      req->output_names, req->noutputs, req->outputs,
                                      &req->backend_state, &req->err);
        if (req->rc != 0)
            req->backend_state = NULL;
    }
    req->exec_end_ns = clock_now_ns();
    req->complete(req);
}

static void *worker_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cond, &s->lock);
        struct infer_request *req = s->head;
        if (!req)
            break; /* stopping and nothing left */
        s->head = req->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        pthread_mutex_unlock(&s->lock);
        run_one(s, req);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int sched_start(struct model *m, uint32_t queue_limit, struct sched **out)
{
    struct sched *s = mem_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->model = m;
    s->queue_limit = queue_limit;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    int rc = pthread_create(&s->worker, NULL, worker_main, s);
    if (rc) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        mem_free(s);
        return -rc;
    }
    *out = s;
    return 0;
}

int sched_submit(struct sched *s, struct infer_request *req, struct error *err)
{
    req->next = NULL;
    req->enqueue_ns = clock_now_ns();
    pthread_mutex_lock(&s->lock);
    if (s->stopping || s->queued >= s->queue_limit) {
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        return error_set(err, 503, stopping ? "model '%s' is shutting down"
                                            : "model '%s' queue is full (%u requests waiting)",
                         s->model->name, s->queue_limit);
    }
    if (s->tail)
        s->tail->next = req;
    else
        s->head = req;
    s->tail = req;
    s->queued++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    mem_free(s);
}
