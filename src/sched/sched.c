#include "sched/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

#define BATCH_ARENA_CHUNK (16 * 1024)
#define BATCH_ARENA_MAX ((size_t)1 << 30)
/* Batch objects allocated per worker at start. */
#define BATCHES_PER_WORKER 4
/* How far into the queue the batcher looks for compatible requests. */
#define SCAN_LIMIT 4096

/* Output memory of one backend run, shared by the requests of the batch. */
struct sched_batch {
    struct sched *sched;
    void *instance;
    void *backend_state;
    struct arena arena; /* BYTES outputs and per-batch tensors */
    atomic_uint refs;
    struct sched_batch *next_free;
};

struct worker {
    struct sched *sched;
    pthread_t tid;
    void *instance;
    struct buf *gather; /* one buffer per model input, grown as needed */
    struct tensor *inputs;
    const char **names;   /* union of requested outputs */
    struct tensor *outs;
    struct infer_request **members;
    uint32_t capacity; /* size of members */
    bool started;
};

/* A batch that waits for more requests: its first request (still queued)
 * and what the batch holds. Set by form_batch when a worker starts waiting,
 * grown by sched_submit, forgotten when any request leaves the queue. */
struct fill {
    const struct infer_request *first;
    uint64_t samples;
    uint32_t n;
};

struct sched {
    struct sched_model model;
    struct sched_config cfg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct infer_request *head, *tail;
    uint32_t queued;
    /* Workers asleep with nothing to do, and workers waiting for a batch to
     * fill: a submit wakes one only when it changes what they would do (a
     * wake-up per request costs two context switches on a busy core). */
    uint32_t idle_workers, filling_workers;
    /* The batch filling workers wait to grow (first == NULL: unknown). */
    struct fill fill;
    bool stopping;
    struct worker *workers;
    uint32_t nworkers;
    pthread_mutex_t pool_lock;
    struct sched_batch *free_batches;
};

/* ---- batch objects ---------------------------------------------------- */

static struct sched_batch *batch_get(struct sched *s, void *instance)
{
    pthread_mutex_lock(&s->pool_lock);
    struct sched_batch *b = s->free_batches;
    if (b)
        s->free_batches = b->next_free;
    pthread_mutex_unlock(&s->pool_lock);
    if (!b) {
        b = mem_calloc(1, sizeof *b);
        if (!b)
            return NULL;
        arena_init(&b->arena, BATCH_ARENA_CHUNK, BATCH_ARENA_MAX);
        b->sched = s;
    }
    b->instance = instance;
    b->backend_state = NULL;
    atomic_store(&b->refs, 0);
    return b;
}

static void batch_put(struct sched_batch *b)
{
    struct sched *s = b->sched;
    if (b->backend_state)
        s->model.backend->release(b->instance, b->backend_state);
    b->backend_state = NULL;
    arena_reset(&b->arena);
    pthread_mutex_lock(&s->pool_lock);
    b->next_free = s->free_batches;
    s->free_batches = b;
    pthread_mutex_unlock(&s->pool_lock);
}

void sched_release(struct infer_request *req)
{
    struct sched_batch *b = req->batch_ref;
    req->batch_ref = NULL;
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        batch_put(b);
}

/* ---- forming batches ---------------------------------------------------- */

static bool compatible(const struct infer_request *a, const struct infer_request *b)
{
    for (uint32_t i = 0; i < a->ninputs; i++) {
        const struct tensor *x = &a->inputs[i], *y = &b->inputs[i];
        if (x->ndim != y->ndim)
            return false;
        for (uint32_t d = 1; d < x->ndim; d++)
            if (x->shape[d] != y->shape[d])
                return false;
    }
    return true;
}

static bool expired(const struct infer_request *r, uint64_t now)
{
    return r->timeout_us && now - r->enqueue_ns > r->timeout_us * 1000u;
}

static void unlink_req(struct sched *s, struct infer_request *prev, struct infer_request *r)
{
    if (prev)
        prev->next = r->next;
    else
        s->head = r->next;
    if (s->tail == r)
        s->tail = prev;
    r->next = NULL;
    s->fill.first = NULL;
    s->queued--;
}

static void fail_request(struct infer_request *r, int status, const char *msg)
{
    r->rc = error_set(&r->err, status, "%s", msg);
    r->outputs = NULL;
    r->batch_ref = NULL;
    r->complete(r);
}

/* Removes requests whose timeout passed while they waited, and requests
 * their client cancelled (lock held); they are collected in *expired_list
 * to be answered outside the lock, without running. */
static void collect_expired(struct sched *s, uint64_t now, struct infer_request **expired_list)
{
    struct infer_request *prev = NULL, *r = s->head;
    uint32_t scanned = 0;
    while (r && scanned++ < SCAN_LIMIT) {
        struct infer_request *next = r->next;
        if (expired(r, now) || atomic_load_explicit(&r->cancelled, memory_order_relaxed)) {
            unlink_req(s, prev, r);
            r->next = *expired_list;
            *expired_list = r;
        } else {
            prev = r;
        }
        r = next;
    }
}

static bool is_preferred(const struct sched_config *c, uint64_t samples)
{
    for (uint32_t i = 0; i < c->npreferred; i++)
        if (samples == c->preferred_batch_sizes[i])
            return true;
    return false;
}

/* Requests a batch may hold: max_batch_size (each request has >= 1 sample,
 * or 0 samples: bound those by the same number), 1 without batching. */
static uint32_t batch_capacity(const struct sched_config *c)
{
    return c->max_batch_size > 1 && c->dynamic_batching ? c->max_batch_size : 1;
}

/* Whether r joins a batch that starts with first and holds `samples`. */
static bool joins(const struct sched_config *c, const struct infer_request *first,
                  const struct infer_request *r, uint64_t samples)
{
    return samples + (uint64_t)r->batch <= c->max_batch_size && compatible(first, r);
}

/* Decides what the worker does next (lock held). Returns the number of
 * requests placed in w->members (0 = wait until *wait_until_ns, or until a
 * new request if that is 0).
 *
 * The candidates are the head of the queue and, in arrival order, every
 * later request compatible with it that still fits within max_batch_size
 * (a request is never split; one that does not fit is passed over, and the
 * batch then counts as full). Among the prefixes of that sequence the
 * batch is the longest whose samples are a preferred size, dispatched at
 * once. Without one, all the candidates go when the batch is full
 * (max_batch_size samples, or a compatible request that does not fit) or
 * the head has waited max_queue_delay; until then the worker waits, and
 * records in s->fill the batch it waits to grow (for sched_submit). */
static uint32_t form_batch(struct sched *s, struct worker *w, uint64_t now, uint64_t *wait_until_ns)
{
    *wait_until_ns = 0;
    struct infer_request *first = s->head;
    const struct sched_config *c = &s->cfg;
    if (!first)
        return 0;
    if (!c->dynamic_batching || c->max_batch_size == 0 || (uint64_t)first->batch >= c->max_batch_size) {
        unlink_req(s, NULL, first);
        w->members[0] = first;
        return 1;
    }
    uint64_t samples = (uint64_t)first->batch;
    uint32_t n = 1, scanned = 0;
    uint32_t preferred_n = is_preferred(c, samples) ? 1 : 0;
    bool full = false;
    for (struct infer_request *r = first->next;
         r && scanned < SCAN_LIMIT && samples < c->max_batch_size && n < w->capacity;
         r = r->next, scanned++) {
        if (!compatible(first, r))
            continue;
        if (!joins(c, first, r, samples)) {
            full = true;
            continue;
        }
        samples += (uint64_t)r->batch;
        n++;
        if (is_preferred(c, samples))
            preferred_n = n;
    }
    full = full || samples == c->max_batch_size || n == w->capacity;
    uint64_t deadline = first->enqueue_ns + c->max_queue_delay_us * 1000u;
    if (!preferred_n && !full && now < deadline && !s->stopping) {
        s->fill = (struct fill){.first = first, .samples = samples, .n = n};
        *wait_until_ns = deadline;
        return 0;
    }
    uint32_t take = preferred_n ? preferred_n : n;
    /* Take them, in arrival order: the same walk as above. */
    uint64_t taken_samples = 0;
    uint32_t taken = 0;
    struct infer_request *prev = NULL, *r = first;
    while (r && taken < take) {
        struct infer_request *next = r->next;
        if (r == first || joins(c, first, r, taken_samples)) {
            unlink_req(s, prev, r);
            w->members[taken++] = r;
            taken_samples += (uint64_t)r->batch;
        } else {
            prev = r;
        }
        r = next;
    }
    return taken;
}

/* sched_submit, lock held, req just queued: whether the batch a filling
 * worker waits for may now go (see form_batch). req extends that batch
 * when it joins; without a recorded batch, any submit may complete it. */
static bool fill_may_dispatch(struct sched *s, const struct infer_request *req)
{
    const struct sched_config *c = &s->cfg;
    struct fill *f = &s->fill;
    if (!f->first)
        return true;
    if (!compatible(f->first, req))
        return false;
    if (!joins(c, f->first, req, f->samples))
        return true; /* full: it does not fit */
    f->samples += (uint64_t)req->batch;
    f->n++;
    return is_preferred(c, f->samples) || f->samples == c->max_batch_size ||
           f->n >= batch_capacity(c);
}

/* ---- running a batch ---------------------------------------------------- */

/* Concatenates the members' inputs along dim 0 into the worker's buffers. */
static int gather_inputs(struct worker *w, struct infer_request **members, uint32_t n,
                         int64_t total, struct error *err)
{
    const struct infer_request *first = members[0];
    for (uint32_t i = 0; i < first->ninputs; i++) {
        struct tensor *t = &w->inputs[i];
        *t = first->inputs[i];
        t->shape[0] = total;
        struct buf *g = &w->gather[i];
        buf_reset(g);
        size_t bytes = 0;
        for (uint32_t j = 0; j < n; j++) {
            const struct tensor *src = &members[j]->inputs[i];
            size_t len = t->dtype == DT_BYTES
                             ? (size_t)tensor_count(src, INT64_MAX) * sizeof(struct tensor_bytes)
                             : src->nbytes;
            if (buf_append(g, src->data, len) != 0)
                return error_set(err, 500, "out of memory gathering a batch");
            bytes += src->nbytes;
        }
        t->data = g->data;
        t->nbytes = bytes;
    }
    return 0;
}

/* The union of the members' requested outputs, in model order. */
static uint32_t union_outputs(struct worker *w, struct infer_request **members, uint32_t n)
{
    const struct model_info *info = w->sched->model.info;
    uint32_t count = 0;
    for (uint32_t o = 0; o < info->noutputs; o++) {
        const char *name = info->outputs[o].name;
        bool wanted = false;
        for (uint32_t j = 0; j < n && !wanted; j++)
            for (uint32_t k = 0; k < members[j]->noutputs && !wanted; k++)
                wanted = members[j]->output_names[k] == name;
        if (wanted)
            w->names[count++] = name;
    }
    return count;
}

/* Gives each request its outputs, in the order it asked for them. With a
 * batch dimension, a request's outputs point at its rows of the batch
 * outputs; otherwise (one request) they are the outputs themselves. */
static int assign_outputs(struct worker *w, uint32_t nout, struct infer_request **members,
                          uint32_t n, int64_t total, bool batched, struct error *err)
{
    for (uint32_t k = 0; batched && k < nout; k++) {
        const struct tensor *t = &w->outs[k];
        if (t->ndim == 0 || t->shape[0] != total)
            return error_set(err, 500, "output '%s' has %lld rows for a batch of %lld",
                             t->name, t->ndim ? (long long)t->shape[0] : 0LL, (long long)total);
    }
    int64_t offset = 0;
    for (uint32_t j = 0; j < n; j++) {
        struct infer_request *r = members[j];
        for (uint32_t q = 0; q < r->noutputs; q++) {
            const struct tensor *t = NULL;
            for (uint32_t k = 0; k < nout && !t; k++)
                if (w->names[k] == r->output_names[q])
                    t = &w->outs[k];
            struct tensor *o = &r->outputs[q];
            *o = *t;
            if (!batched)
                continue;
            int64_t row = total ? tensor_count(t, INT64_MAX) / total : 0;
            o->shape[0] = r->batch;
            if (t->dtype == DT_BYTES) {
                const struct tensor_bytes *rows = (const struct tensor_bytes *)t->data + offset * row;
                o->data = (void *)rows;
                o->nbytes = 0;
                for (int64_t e = 0; e < r->batch * row; e++)
                    o->nbytes += rows[e].len;
            } else {
                size_t row_bytes = (size_t)row * dtype_size(t->dtype);
                o->data = (char *)t->data + (size_t)offset * row_bytes;
                o->nbytes = (size_t)r->batch * row_bytes;
            }
        }
        offset += r->batch;
    }
    return 0;
}

static void run_batch(struct worker *w, struct infer_request **members, uint32_t n)
{
    struct sched *s = w->sched;
    const struct sched_model *m = &s->model;
    struct error err;
    error_clear(&err);
    uint64_t start = clock_now_ns();
    int64_t total = 0;
    for (uint32_t j = 0; j < n; j++) {
        total += members[j]->batch;
        members[j]->exec_start_ns = start;
        members[j]->outputs = arena_calloc(&members[j]->arena, members[j]->noutputs,
                                           sizeof(struct tensor));
        if (!members[j]->outputs)
            error_set(&err, 500, "out of memory for outputs");
    }
    struct sched_batch *b = err.status ? NULL : batch_get(s, w->instance);
    if (!b && !err.status)
        error_set(&err, 500, "out of memory for a batch");

    const struct tensor *inputs = members[0]->inputs;
    uint32_t nout = 0;
    if (!err.status && n > 1) {
        if (gather_inputs(w, members, n, total, &err) == 0)
            inputs = w->inputs;
    }
    uint64_t infer_start = 0, infer_end = 0;
    if (!err.status) {
        nout = union_outputs(w, members, n);
        infer_start = clock_now_ns();
        int rc = m->backend->execute(w->instance, &b->arena, inputs, members[0]->ninputs,
                                     w->names, nout, w->outs, &b->backend_state, &err);
        infer_end = clock_now_ns();
        if (rc != 0)
            b->backend_state = NULL;
        else
            assign_outputs(w, nout, members, n, total, s->cfg.max_batch_size > 0, &err);
    }
    uint64_t end = clock_now_ns();
    if (s->cfg.observer.on_batch) {
        struct sched_batch_report report = {
            .members = members, .n = n, .samples = total, .start_ns = start,
            .infer_start_ns = infer_start, .infer_end_ns = infer_end, .end_ns = end,
            .err = &err};
        s->cfg.observer.on_batch(s->cfg.observer.ctx, m, &report);
    }
    log_debug("model %s: ran %u requests, %lld samples in %llu us%s%s", m->name, n,
              (long long)total, (unsigned long long)((end - start) / 1000u),
              err.status ? ": " : "", err.status ? err.msg : "");
    if (err.status && b) {
        batch_put(b);
        b = NULL;
    }
    if (b)
        atomic_store(&b->refs, n);
    for (uint32_t j = 0; j < n; j++) {
        struct infer_request *r = members[j];
        r->exec_end_ns = end;
        r->infer_start_ns = infer_start;
        r->infer_end_ns = infer_end;
        r->batch_size = (uint32_t)total;
        r->batch_ref = b;
        if (err.status) {
            r->rc = -1;
            r->err = err;
        } else {
            r->rc = 0;
        }
        r->complete(r);
    }
}

/* ---- decoupled models ----------------------------------------------------- */

/* The backend's send(): one response of a decoupled request. */
static bool stream_send(void *ctx, const struct tensor *outputs, uint32_t n, bool final)
{
    struct infer_request *r = ctx;
    if (atomic_load_explicit(&r->cancelled, memory_order_relaxed))
        return false;
    return r->on_response(r, outputs, n, final) &&
           !atomic_load_explicit(&r->cancelled, memory_order_relaxed);
}

/* Runs one request of a decoupled model: its responses go out through
 * req->on_response as the model sends them; complete() ends it. */
static void run_decoupled(struct worker *w, struct infer_request *r)
{
    struct sched *s = w->sched;
    const struct sched_model *m = &s->model;
    struct error err;
    error_clear(&err);
    uint64_t start = clock_now_ns();
    r->exec_start_ns = r->infer_start_ns = start;
    int rc = m->backend->execute_stream(w->instance, r->inputs, r->ninputs, r->output_names,
                                        r->noutputs, stream_send, r, &err);
    uint64_t end = clock_now_ns();
    r->exec_end_ns = r->infer_end_ns = end;
    r->batch_size = (uint32_t)r->batch;
    r->batch_ref = NULL;
    r->outputs = NULL;
    if (rc != 0) {
        r->rc = -1;
        r->err = err;
    } else if (atomic_load_explicit(&r->cancelled, memory_order_relaxed)) {
        r->rc = error_set(&r->err, 499, "request cancelled by the client");
    } else {
        r->rc = 0;
    }
    if (s->cfg.observer.on_batch) {
        struct sched_batch_report report = {
            .members = &r, .n = 1, .samples = r->batch, .start_ns = start,
            .infer_start_ns = start, .infer_end_ns = end, .end_ns = end, .err = &err};
        s->cfg.observer.on_batch(s->cfg.observer.ctx, m, &report);
    }
    r->complete(r);
}

/* ---- workers ------------------------------------------------------------ */

static void timed_wait(struct sched *s, uint64_t until_ns)
{
    if (!until_ns) {
        pthread_cond_wait(&s->cond, &s->lock);
        return;
    }
    /* The condition variable uses CLOCK_MONOTONIC (see sched_start). */
    struct timespec ts = {.tv_sec = (time_t)(until_ns / 1000000000u),
                          .tv_nsec = (long)(until_ns % 1000000000u)};
    pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct sched *s = w->sched;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (!s->head) {
            if (s->stopping)
                break;
            s->idle_workers++;
            pthread_cond_wait(&s->cond, &s->lock);
            s->idle_workers--;
            continue;
        }
        uint64_t now = clock_now_ns();
        struct infer_request *late = NULL;
        collect_expired(s, now, &late);
        uint64_t until;
        uint32_t n = late ? 0 : form_batch(s, w, now, &until);
        if (!late && n == 0) {
            s->filling_workers++;
            timed_wait(s, until);
            s->filling_workers--;
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        while (late) {
            struct infer_request *next = late->next;
            char msg[96];
            snprintf(msg, sizeof msg, "request timed out after waiting %llu us in the queue",
                     (unsigned long long)((now - late->enqueue_ns) / 1000u));
            if (atomic_load_explicit(&late->cancelled, memory_order_relaxed))
                fail_request(late, 499, "request cancelled by the client");
            else
                fail_request(late, 504, msg);
            late = next;
        }
        if (n && s->cfg.decoupled)
            run_decoupled(w, w->members[0]);
        else if (n)
            run_batch(w, w->members, n);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void worker_free(struct worker *w, uint32_t ninputs)
{
    if (w->gather)
        for (uint32_t i = 0; i < ninputs; i++)
            buf_free(&w->gather[i]);
    mem_free(w->gather);
    mem_free(w->inputs);
    mem_free(w->names);
    mem_free(w->outs);
    mem_free(w->members);
}

static int worker_init(struct worker *w, struct sched *s, void *instance)
{
    const struct model_info *info = s->model.info;
    w->sched = s;
    w->instance = instance;
    w->capacity = batch_capacity(&s->cfg);
    w->gather = mem_calloc(info->ninputs, sizeof *w->gather);
    w->inputs = mem_calloc(info->ninputs, sizeof *w->inputs);
    w->names = mem_calloc(info->noutputs, sizeof *w->names);
    w->outs = mem_calloc(info->noutputs, sizeof *w->outs);
    w->members = mem_calloc(w->capacity, sizeof *w->members);
    if (!w->gather || !w->inputs || !w->names || !w->outs || !w->members)
        return -ENOMEM;
    for (uint32_t i = 0; i < info->ninputs; i++)
        buf_init(&w->gather[i], SIZE_MAX);
    return 0;
}

int sched_start(const struct sched_model *m, const struct sched_config *cfg, struct sched **out)
{
    struct sched *s = mem_calloc(1, sizeof *s);
    if (!s) {
        if (cfg->observer.on_stop)
            cfg->observer.on_stop(cfg->observer.ctx);
        return -ENOMEM;
    }
    s->model = *m;
    s->cfg = *cfg;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    s->workers = mem_calloc(m->ninstances, sizeof *s->workers);
    s->nworkers = s->workers ? m->ninstances : 0;
    int rc = s->workers ? 0 : -ENOMEM;
    /* Batch objects up front, so the pool need not grow while serving: a
     * worker's finished batches stay alive until their responses are
     * encoded on the I/O threads. */
    for (uint32_t i = 0; rc == 0 && i < m->ninstances * BATCHES_PER_WORKER; i++) {
        struct sched_batch *b = mem_calloc(1, sizeof *b);
        if (!b) {
            rc = -ENOMEM;
            break;
        }
        arena_init(&b->arena, BATCH_ARENA_CHUNK, BATCH_ARENA_MAX);
        b->sched = s;
        b->next_free = s->free_batches;
        s->free_batches = b;
    }
    for (uint32_t i = 0; rc == 0 && i < s->nworkers; i++) {
        rc = worker_init(&s->workers[i], s, m->instances[i]);
        if (rc == 0) {
            rc = -pthread_create(&s->workers[i].tid, NULL, worker_main, &s->workers[i]);
            s->workers[i].started = rc == 0;
        }
    }
    if (rc) {
        sched_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

int sched_submit(struct sched *s, struct infer_request *req, struct error *err)
{
    const struct sched_config *c = &s->cfg;
    if (c->max_batch_size && (uint64_t)req->batch > c->max_batch_size && !c->allow_oversize)
        return error_set(err, 400, "batch of %lld exceeds model '%s' max_batch_size %u",
                         (long long)req->batch, s->model.name, c->max_batch_size);
    if (c->default_timeout_us) {
        bool shorter = req->timeout_us && req->timeout_us < c->default_timeout_us;
        if (!(c->allow_timeout_override && shorter))
            req->timeout_us = c->default_timeout_us;
    }
    req->next = NULL;
    req->batch_ref = NULL;
    req->enqueue_ns = clock_now_ns();
    pthread_mutex_lock(&s->lock);
    if (s->stopping || s->queued >= c->max_queue_size) {
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stopping)
            return error_set(err, 503, "model '%s' is shutting down", s->model.name);
        return error_set(err, 429, "model '%s' queue is full (%u requests waiting)",
                         s->model.name, c->max_queue_size);
    }
    if (s->tail)
        s->tail->next = req;
    else
        s->head = req;
    s->tail = req;
    s->queued++;
    /* Wake a worker when one is idle, or when the batch a worker fills may
     * now go (a preferred size, or full); otherwise the filling worker's own
     * timer will do (a wake-up per request costs two context switches). */
    if (s->idle_workers || (s->filling_workers && fill_may_dispatch(s, req)))
        pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

const struct sched_observer *sched_get_observer(const struct sched *s)
{
    return &s->cfg.observer;
}

uint32_t sched_queue_depth(struct sched *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->queued;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    for (uint32_t i = 0; i < s->nworkers; i++) {
        if (s->workers[i].started)
            pthread_join(s->workers[i].tid, NULL);
        worker_free(&s->workers[i], s->model.info->ninputs);
    }
    mem_free(s->workers);
    while (s->free_batches) {
        struct sched_batch *b = s->free_batches;
        s->free_batches = b->next_free;
        arena_free(&b->arena);
        mem_free(b);
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->pool_lock);
    if (s->cfg.observer.on_stop) /* the workers are joined: nothing reports any more */
        s->cfg.observer.on_stop(s->cfg.observer.ctx);
    mem_free(s);
}
