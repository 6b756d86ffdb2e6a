/*
 * The batch former (sched/queue.c) driven directly: a struct model built by
 * hand around a test backend whose execute() records every batch it gets
 * (rows, width, which request each row came from) and then waits at a gate
 * the test opens. While the single instance waits at the gate, the test
 * builds up the queue it wants, so what the next batch holds is decided by
 * the batcher alone, never by timing.
 *
 * Every row of a request holds the request's tag, so a batch's rows name its
 * requests in order; the backend returns its input as its output, so each
 * request must get back exactly its own rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/clock.h"
#include "model/model.h"
#include "sched/sched.h"

#define MAX_CALLS 32
#define MAX_ROWS 32
#define MAX_WIDTH 8
#define WAIT_S 60 /* for conditions that hold at once unless the code is wrong */
#define HOUR_US (3600ull * 1000 * 1000)
#define ALL UINT32_MAX

struct call {
    uint32_t rows;
    int64_t width;
    int32_t tags[MAX_ROWS]; /* per row; -1 when the row is not one tag */
    uint64_t start_ns;
    uint32_t flags; /* execute()'s BACKEND_EXEC_* */
};

struct harness;

struct treq {
    struct infer_request req; /* first: on_complete() casts back */
    struct harness *h;
    struct tensor in;
    int32_t data[MAX_ROWS * MAX_WIDTH];
    int32_t tag;
    /* Set by on_complete(), under h->mu. */
    bool done;
    int status;
    bool outputs_ok; /* got back exactly its own rows */
};

#define MAX_REQS 24

struct harness {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    uint32_t allowed;  /* execute() call i returns once i < allowed */
    struct call calls[MAX_CALLS];
    uint32_t ncalls;
    uint32_t completed;
    struct model model;
    struct sched_model smodel; /* what the scheduler sees of `model` */
    void *instances[1];
    struct model_io in_io, out_io;
    const char *out_names[1];
    struct sched *sched;
    /* On the heap with the harness: a test that fails half-way leaves them
     * (and a worker waiting at the gate) to a later test's stack otherwise. */
    struct treq reqs[MAX_REQS];
};

static char model_name[] = "sched_test", in_name[] = "IN", out_name[] = "OUT";

/* ---- the test backend ---------------------------------------------------- */

static int test_execute(void *instance, struct arena *arena, const struct tensor *inputs,
                        uint32_t nin, const char *const *output_names, uint32_t nout,
                        struct tensor *out, void **state, uint32_t flags, struct error *err)
{
    struct harness *h = instance;
    const struct tensor *in = &inputs[0];
    *state = NULL;
    if (nin != 1 || nout != 1 || in->ndim != 2 || in->shape[0] > MAX_ROWS ||
        in->shape[1] > MAX_WIDTH)
        return error_set(err, 500, "test backend: unexpected call");
    const int32_t *v = in->data;
    pthread_mutex_lock(&h->mu);
    uint32_t idx = h->ncalls++;
    if (idx < MAX_CALLS) {
        struct call *c = &h->calls[idx];
        c->rows = (uint32_t)in->shape[0];
        c->width = in->shape[1];
        c->start_ns = clock_now_ns();
        c->flags = flags;
        for (int64_t r = 0; r < in->shape[0]; r++) {
            c->tags[r] = v[r * in->shape[1]];
            for (int64_t k = 1; k < in->shape[1]; k++)
                if (v[r * in->shape[1] + k] != c->tags[r])
                    c->tags[r] = -1;
        }
    }
    pthread_cond_broadcast(&h->cv);
    while (idx >= h->allowed)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);

    void *data = arena_alloc(arena, in->nbytes ? in->nbytes : 1);
    if (!data)
        return error_set(err, 500, "test backend: out of memory");
    memcpy(data, in->data, in->nbytes);
    out[0] = *in;
    out[0].name = output_names[0];
    out[0].data = data;
    return 0;
}

static void test_release(void *instance, void *state)
{
    (void)instance;
    (void)state;
}

static const struct backend_ops test_backend = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "sched_test",
    .execute = test_execute,
    .release = test_release,
};

/* ---- harness ------------------------------------------------------------- */

/* allowed: how many execute() calls may return before allow() (0: the
 * first one already waits at the gate). */
static struct harness *harness_new(const struct sched_config *cfg, uint32_t allowed)
{
    struct harness *h = calloc(1, sizeof *h);
    assert_non_null(h);
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    h->allowed = allowed;
    /* Width is variable, so requests of different widths are valid and the
     * batcher must keep them apart. */
    h->in_io = (struct model_io){.name = in_name, .dtype = DT_INT32, .ndim = 2, .dims = {-1, -1}};
    h->out_io = (struct model_io){.name = out_name, .dtype = DT_INT32, .ndim = 2, .dims = {-1, -1}};
    h->out_names[0] = h->out_io.name;
    struct model *m = &h->model;
    m->name = model_name;
    m->version = 1;
    snprintf(m->version_str, sizeof m->version_str, "1");
    m->backend = &test_backend;
    h->instances[0] = h;
    m->instances = h->instances;
    m->ninstances = 1;
    m->info.ninputs = 1;
    m->info.inputs = &h->in_io;
    m->info.noutputs = 1;
    m->info.outputs = &h->out_io;
    m->batched = true;
    m->sched_cfg = *cfg;
    h->smodel = (struct sched_model){.name = m->name, .version = m->version_str,
                                     .backend = m->backend, .instances = m->instances,
                                     .ninstances = m->ninstances, .info = &m->info};
    assert_int_equal(sched_start(&h->smodel, cfg, &h->sched), 0);
    return h;
}

/* Opens the gate for every execute() call, lets the workers drain the
 * queue and stop, and frees everything. (A failed test leaves its harness
 * and threads as they are.) */
static void harness_finish(struct harness *h)
{
    pthread_mutex_lock(&h->mu);
    h->allowed = ALL;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    sched_stop(h->sched);
    for (size_t i = 0; i < MAX_REQS; i++)
        if (h->reqs[i].h)
            arena_free(&h->reqs[i].req.arena);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static void allow(struct harness *h, uint32_t calls)
{
    pthread_mutex_lock(&h->mu);
    h->allowed = calls;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Waits (generously) until at least n execute() calls started, or n
 * requests completed. */
static void wait_count(struct harness *h, const uint32_t *counter, uint32_t n, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += WAIT_S;
    pthread_mutex_lock(&h->mu);
    int rc = 0;
    while (*counter < n && rc == 0)
        rc = pthread_cond_timedwait(&h->cv, &h->mu, &until);
    uint32_t got = *counter;
    pthread_mutex_unlock(&h->mu);
    if (got < n)
        fail_msg("waited %d s for %u %s, have %u", WAIT_S, n, what, got);
}

static void wait_calls(struct harness *h, uint32_t n)
{
    wait_count(h, &h->ncalls, n, "backend calls");
}

static void wait_completed(struct harness *h, uint32_t n)
{
    wait_count(h, &h->completed, n, "completed requests");
}

static void on_complete(struct infer_request *req)
{
    struct treq *t = (struct treq *)req;
    bool ok = false;
    if (req->rc == 0 && req->outputs) {
        const struct tensor *o = &req->outputs[0];
        ok = o->ndim == 2 && o->shape[0] == req->batch && o->shape[1] == t->in.shape[1] &&
             o->nbytes == t->in.nbytes;
        for (size_t i = 0; ok && i < o->nbytes / sizeof(int32_t); i++)
            ok = ((const int32_t *)o->data)[i] == t->tag;
    }
    sched_release(req);
    pthread_mutex_lock(&t->h->mu);
    t->status = req->rc ? req->err.status : 200;
    t->outputs_ok = ok;
    t->done = true;
    t->h->completed++;
    pthread_cond_broadcast(&t->h->cv);
    pthread_mutex_unlock(&t->h->mu);
}

static void treq_init(struct treq *t, struct harness *h, int32_t tag, int64_t rows, int64_t width)
{
    memset(t, 0, sizeof *t);
    arena_init(&t->req.arena, 4096, 1 << 20);
    atomic_init(&t->req.cancelled, false);
    t->h = h;
    t->tag = tag;
    for (int64_t i = 0; i < rows * width; i++)
        t->data[i] = tag;
    t->in = (struct tensor){.name = in_name, .dtype = DT_INT32, .ndim = 2, .shape = {rows, width},
                            .data = t->data, .nbytes = (size_t)(rows * width) * sizeof(int32_t)};
    t->req.model = &h->model;
    t->req.inputs = &t->in;
    t->req.ninputs = 1;
    t->req.output_names = h->out_names;
    t->req.noutputs = 1;
    t->req.batch = rows;
    t->req.complete = on_complete;
}

static void submit_ok(struct harness *h, struct treq *t)
{
    struct error err;
    error_clear(&err);
    int rc = sched_submit(h->sched, &t->req, NULL, &err);
    if (rc)
        fail_msg("submit of request %d: %d %s", t->tag, err.status, err.msg);
}

/* Call i got exactly these rows (one tag per row) of this width. */
static void check_call(struct harness *h, uint32_t i, int64_t width, const int32_t *tags,
                       uint32_t n)
{
    pthread_mutex_lock(&h->mu);
    struct call c = h->calls[i];
    uint32_t ncalls = h->ncalls;
    pthread_mutex_unlock(&h->mu);
    assert_true(i < ncalls);
    assert_int_equal(c.rows, n);
    assert_int_equal(c.width, width);
    for (uint32_t r = 0; r < n; r++)
        if (c.tags[r] != tags[r])
            fail_msg("call %u row %u: request %d, expected %d", i, r, c.tags[r], tags[r]);
}

#define CHECK_CALL(h, i, width, ...)                                                   \
    check_call(h, i, width, (const int32_t[]){__VA_ARGS__},                            \
               (uint32_t)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static uint32_t ncalls(struct harness *h)
{
    pthread_mutex_lock(&h->mu);
    uint32_t n = h->ncalls;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* Completed with status, and, for 200, with exactly its own rows. */
static void check_answer(struct harness *h, struct treq *t, int status)
{
    pthread_mutex_lock(&h->mu);
    bool done = t->done, ok = t->outputs_ok;
    int got = t->status;
    pthread_mutex_unlock(&h->mu);
    if (!done)
        fail_msg("request %d not completed", t->tag);
    if (got != status)
        fail_msg("request %d: status %d, expected %d", t->tag, got, status);
    if (status == 200 && !ok)
        fail_msg("request %d did not get back its own rows", t->tag);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- preferred batch sizes and max_batch_size ---------------------------- */

/* With a queue delay far longer than the test, only a preferred size (here
 * 3) or a full batch (max_batch_size 8) can dispatch a batch. */
static void test_preferred_size_dispatches_and_max_caps(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .preferred_batch_sizes = {3}, .npreferred = 1,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 1); /* the first call returns, the second waits */
    struct treq *r = h->reqs;
    /* 1, 2 wait for a third; the third makes a preferred batch. */
    for (int i = 0; i < 3; i++) {
        treq_init(&r[i], h, i + 1, 1, 4);
        submit_ok(h, &r[i]);
    }
    wait_completed(h, 3);
    CHECK_CALL(h, 0, 4, 1, 2, 3);
    /* Request 10 (3 rows, a preferred size) runs at once and holds the
     * instance while 11..15, two rows each, queue up: 2, 4, 6, 8 samples
     * never make 3, so the full batch 11..14 goes; 15 waits for a third
     * sample. */
    treq_init(&r[3], h, 10, 3, 4);
    submit_ok(h, &r[3]);
    wait_calls(h, 2);
    for (int i = 0; i < 5; i++) {
        treq_init(&r[4 + i], h, 11 + i, 2, 4);
        submit_ok(h, &r[4 + i]);
    }
    assert_int_equal(sched_queue_depth(h->sched), 5);
    allow(h, ALL);
    wait_completed(h, 8);
    assert_int_equal(sched_queue_depth(h->sched), 1);
    treq_init(&r[9], h, 21, 1, 4);
    submit_ok(h, &r[9]);
    wait_completed(h, 10);
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 1, 4, 10, 10, 10);
    CHECK_CALL(h, 2, 4, 11, 11, 12, 12, 13, 13, 14, 14);
    CHECK_CALL(h, 3, 4, 15, 15, 21);
    for (int i = 0; i < 10; i++)
        check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* Triton's rule: with enough requests queued the batch is the largest
 * preferred size that can be formed, never a larger one. Preferred {4, 8},
 * max_batch_size 16: 16 single samples queued behind a running batch go as
 * 8 and 8 (not 16). */
static void test_preferred_sizes_16_queued_run_as_8_and_8(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 8}, .npreferred = 2,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 100, 4, 4); /* a preferred size: runs at once, holds the instance */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    for (int i = 1; i <= 16; i++) {
        treq_init(&r[i], h, i, 1, 4);
        submit_ok(h, &r[i]);
    }
    assert_int_equal(sched_queue_depth(h->sched), 16);
    allow(h, ALL);
    wait_completed(h, 17);
    assert_int_equal(ncalls(h), 3);
    CHECK_CALL(h, 1, 4, 1, 2, 3, 4, 5, 6, 7, 8);
    CHECK_CALL(h, 2, 4, 9, 10, 11, 12, 13, 14, 15, 16);
    for (int i = 0; i <= 16; i++)
        check_answer(h, &r[i], 200);
    assert_int_equal(r[1].req.batch_size, 8);
    harness_finish(h);
}

/* 13 queued: 8, then 4, then the last one alone once its delay passed. */
static void test_preferred_sizes_13_queued_run_as_8_4_then_1_after_delay(void **state)
{
    (void)state;
    const uint64_t delay_us = 50 * 1000;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 8}, .npreferred = 2,
                               .max_queue_delay_us = delay_us, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 100, 4, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    for (int i = 1; i <= 13; i++) {
        treq_init(&r[i], h, i, 1, 4);
        submit_ok(h, &r[i]);
    }
    /* However long the test took to get here (the delay of 1..13 may have
     * passed already), the preferred sizes come first. */
    allow(h, ALL);
    wait_completed(h, 14);
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 1, 4, 1, 2, 3, 4, 5, 6, 7, 8);
    CHECK_CALL(h, 2, 4, 9, 10, 11, 12);
    CHECK_CALL(h, 3, 4, 13);
    for (int i = 0; i <= 13; i++)
        check_answer(h, &r[i], 200);
    /* Never before its delay (no upper bound: the machine may be slow). */
    assert_true(r[13].req.exec_start_ns - r[13].req.enqueue_ns >= delay_us * 1000);
    harness_finish(h);
}

/* The leftover of a preferred batch waits (here for an hour) until a
 * preferred size can be formed again. */
static void test_leftover_waits_for_a_preferred_size(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 8}, .npreferred = 2,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 100, 4, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    for (int i = 1; i <= 13; i++) {
        treq_init(&r[i], h, i, 1, 4);
        submit_ok(h, &r[i]);
    }
    allow(h, ALL);
    wait_completed(h, 13);
    assert_int_equal(sched_queue_depth(h->sched), 1);
    for (int i = 14; i <= 16; i++) {
        treq_init(&r[i], h, i, 1, 4);
        submit_ok(h, &r[i]);
    }
    wait_completed(h, 17);
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 1, 4, 1, 2, 3, 4, 5, 6, 7, 8);
    CHECK_CALL(h, 2, 4, 9, 10, 11, 12);
    CHECK_CALL(h, 3, 4, 13, 14, 15, 16);
    for (int i = 0; i <= 16; i++)
        check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* Requests of several samples are never split: the batch is the longest
 * run of whole requests, in arrival order, whose samples make a preferred
 * size. Rows 3, 1, 4, 5, 3 reach 3, 4, 8, 13, 16 samples: 8 goes (not 16),
 * then 5 + 3 make 8 again. */
static void test_preferred_sizes_with_multi_sample_requests(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 8}, .npreferred = 2,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 100, 4, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    const int64_t rows[] = {3, 1, 4, 5, 3};
    for (int i = 1; i <= 5; i++) {
        treq_init(&r[i], h, i, rows[i - 1], 4);
        submit_ok(h, &r[i]);
    }
    allow(h, ALL);
    wait_completed(h, 6);
    assert_int_equal(ncalls(h), 3);
    CHECK_CALL(h, 1, 4, 1, 1, 1, 2, 3, 3, 3, 3);
    CHECK_CALL(h, 2, 4, 4, 4, 4, 4, 4, 5, 5, 5);
    for (int i = 0; i <= 5; i++)
        check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* When no run of whole requests makes a preferred size, the batch goes
 * once it is full: 3-sample requests reach 3, 6, 9, 12, 15, and the sixth
 * does not fit in 16, so 15 samples go; the sixth then waits until a
 * 1-sample request makes 4. A request of another shape, queued behind
 * them, joins neither batch. */
static void test_no_preferred_size_formable_sends_largest_batch(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 8}, .npreferred = 2,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 100, 4, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    for (int i = 1; i <= 6; i++) {
        treq_init(&r[i], h, i, 3, 4);
        submit_ok(h, &r[i]);
        if (i == 6) { /* width 3: incompatible */
            treq_init(&r[10], h, 10, 1, 3);
            submit_ok(h, &r[10]);
        }
    }
    allow(h, ALL);
    wait_completed(h, 6);
    assert_int_equal(sched_queue_depth(h->sched), 2);
    treq_init(&r[7], h, 7, 1, 4);
    submit_ok(h, &r[7]);
    wait_completed(h, 8);
    /* Request 10 (width 3) makes 4 with these three. */
    for (int i = 11; i <= 13; i++) {
        treq_init(&r[i], h, i, 1, 3);
        submit_ok(h, &r[i]);
    }
    wait_completed(h, 12);
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 1, 4, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5);
    CHECK_CALL(h, 2, 4, 6, 6, 6, 7);
    CHECK_CALL(h, 3, 3, 10, 11, 12, 13);
    for (int i = 0; i <= 13; i++)
        if (i <= 7 || i >= 10)
            check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* A worker waiting for its batch to fill is woken by the submit that makes
 * a preferred size, counting every sample queued since it began waiting
 * (3 + 3 + 2 = 8) and not the requests of another shape. */
static void test_waiting_worker_counts_samples_of_its_batch(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 16, .dynamic_batching = true,
                               .preferred_batch_sizes = {8}, .npreferred = 1,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, ALL);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 3, 4);
    submit_ok(h, &r[0]);
    /* Give the worker time to start waiting: the case to check. (Should it
     * not be waiting yet, the batch is formed directly: the assertions hold
     * either way.) */
    sleep_ms(100);
    treq_init(&r[1], h, 2, 5, 3); /* another width: 3 + 5 is not its batch */
    submit_ok(h, &r[1]);
    treq_init(&r[2], h, 3, 3, 4);
    submit_ok(h, &r[2]);
    sleep_ms(20);
    assert_int_equal(ncalls(h), 0);
    treq_init(&r[3], h, 4, 2, 4);
    submit_ok(h, &r[3]);
    wait_completed(h, 3);
    assert_int_equal(ncalls(h), 1);
    CHECK_CALL(h, 0, 4, 1, 1, 1, 3, 3, 3, 4, 4);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            check_answer(h, &r[i], 200);
    assert_int_equal(sched_queue_depth(h->sched), 1);
    harness_finish(h);
}

/* Preferred sizes {2, 4}: a worker already waiting for the delay with one
 * request queued runs the batch as soon as a second one makes size 2. */
static void test_smaller_preferred_size_wakes_waiting_worker(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .preferred_batch_sizes = {4, 2}, .npreferred = 2,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, ALL);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 1, 4);
    submit_ok(h, &r[0]);
    /* Give the worker time to start waiting for the delay: the case to
     * check. (Should it not be waiting yet, the batch is formed directly:
     * the assertions hold either way.) */
    sleep_ms(100);
    assert_int_equal(ncalls(h), 0);
    treq_init(&r[1], h, 2, 1, 4);
    submit_ok(h, &r[1]);
    wait_completed(h, 2);
    assert_int_equal(ncalls(h), 1);
    CHECK_CALL(h, 0, 4, 1, 2);
    check_answer(h, &r[0], 200);
    check_answer(h, &r[1], 200);
    harness_finish(h);
}

/* ---- max_queue_delay ------------------------------------------------------ */

static void test_lone_request_runs_alone_after_delay(void **state)
{
    (void)state;
    const uint64_t delay_us = 50 * 1000;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .max_queue_delay_us = delay_us, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, ALL);
    struct treq *r = &h->reqs[0];
    treq_init(r, h, 7, 1, 4);
    uint64_t t0 = clock_now_ns();
    submit_ok(h, r);
    wait_completed(h, 1);
    assert_int_equal(ncalls(h), 1);
    CHECK_CALL(h, 0, 4, 7);
    check_answer(h, r, 200);
    /* Never before the delay (no upper bound: the machine may be slow). */
    assert_true(h->calls[0].start_ns - t0 >= delay_us * 1000);
    assert_true(r->req.exec_start_ns - r->req.enqueue_ns >= delay_us * 1000);
    assert_int_equal(r->req.batch_size, 1);
    harness_finish(h);
}

/* ---- oversize requests ----------------------------------------------------- */

static void test_oversize_refused_without_allow_oversize(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 4, .dynamic_batching = true,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, ALL);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 5, 2);
    struct error err;
    error_clear(&err);
    assert_int_equal(sched_submit(h->sched, &r[0].req, NULL, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "max_batch_size 4"));
    assert_int_equal(sched_queue_depth(h->sched), 0);
    /* Exactly max_batch_size is fine. */
    treq_init(&r[1], h, 2, 4, 2);
    submit_ok(h, &r[1]);
    wait_completed(h, 1);
    assert_int_equal(ncalls(h), 1);
    CHECK_CALL(h, 0, 2, 2, 2, 2, 2);
    check_answer(h, &r[1], 200);
    assert_false(r[0].done); /* refused: it stayed with the caller */
    harness_finish(h);
}

static void test_oversize_runs_alone_with_allow_oversize(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 4, .dynamic_batching = true,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64,
                               .allow_oversize = true};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 4, 2); /* full batch: runs at once, holds the instance */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 2, 2);
    treq_init(&r[2], h, 3, 6, 2); /* oversize, between two that fit together */
    treq_init(&r[3], h, 4, 2, 2);
    for (int i = 1; i < 4; i++)
        submit_ok(h, &r[i]);
    allow(h, ALL);
    wait_completed(h, 4);
    assert_int_equal(ncalls(h), 3);
    CHECK_CALL(h, 0, 2, 1, 1, 1, 1);
    CHECK_CALL(h, 1, 2, 2, 2, 4, 4);
    CHECK_CALL(h, 2, 2, 3, 3, 3, 3, 3, 3);
    for (int i = 0; i < 4; i++)
        check_answer(h, &r[i], 200);
    assert_int_equal(r[2].req.batch_size, 6);
    harness_finish(h);
}

/* ---- queue timeouts and cancellation --------------------------------------- */

static void test_queue_timeout_504_never_executed(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 4, .dynamic_batching = true,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 4, 2);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 4, 2);
    r[1].req.timeout_us = 1000;
    submit_ok(h, &r[1]);
    treq_init(&r[2], h, 3, 4, 2); /* no timeout */
    submit_ok(h, &r[2]);
    /* Request 2's time in the queue runs out while the instance is held. */
    while (clock_now_ns() - r[1].req.enqueue_ns <= 2 * 1000 * 1000)
        sleep_ms(1);
    allow(h, ALL);
    wait_completed(h, 3);
    assert_int_equal(ncalls(h), 2);
    CHECK_CALL(h, 0, 2, 1, 1, 1, 1);
    CHECK_CALL(h, 1, 2, 3, 3, 3, 3);
    check_answer(h, &r[0], 200);
    check_answer(h, &r[1], 504);
    assert_non_null(strstr(r[1].req.err.msg, "timed out"));
    check_answer(h, &r[2], 200);
    harness_finish(h);
}

static void test_cancelled_499_never_executed(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 4, .dynamic_batching = true,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 4, 2);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 4, 2);
    submit_ok(h, &r[1]);
    treq_init(&r[2], h, 3, 4, 2);
    submit_ok(h, &r[2]);
    atomic_store(&r[1].req.cancelled, true); /* the client went away */
    allow(h, ALL);
    wait_completed(h, 3);
    assert_int_equal(ncalls(h), 2);
    CHECK_CALL(h, 0, 2, 1, 1, 1, 1);
    CHECK_CALL(h, 1, 2, 3, 3, 3, 3);
    check_answer(h, &r[0], 200);
    check_answer(h, &r[1], 499);
    check_answer(h, &r[2], 200);
    harness_finish(h);
}

/* ---- queue limit ----------------------------------------------------------- */

static void test_queue_full_429(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 4, .dynamic_batching = true,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 2};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 4, 2); /* taken by the worker: not waiting */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 4, 2);
    submit_ok(h, &r[1]);
    treq_init(&r[2], h, 3, 4, 2);
    submit_ok(h, &r[2]);
    assert_int_equal(sched_queue_depth(h->sched), 2);
    treq_init(&r[3], h, 4, 4, 2);
    struct error err;
    error_clear(&err);
    assert_int_equal(sched_submit(h->sched, &r[3].req, NULL, &err), -1);
    assert_int_equal(err.status, 429);
    assert_int_equal(sched_queue_depth(h->sched), 2);
    allow(h, ALL);
    wait_completed(h, 3);
    assert_false(r[3].done); /* refused: it stayed with the caller */
    /* The limit is on waiting requests: once they ran, it is accepted. */
    submit_ok(h, &r[3]);
    wait_completed(h, 4);
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 1, 2, 2, 2, 2, 2);
    CHECK_CALL(h, 2, 2, 3, 3, 3, 3);
    CHECK_CALL(h, 3, 2, 4, 4, 4, 4);
    for (int i = 0; i < 4; i++)
        check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* ---- the queue budget ------------------------------------------------------ */

/* A fixed budget of 1 ms, a model whose first run took at least 20 ms (held
 * at the gate), one instance, no batching: a request with another queued
 * ahead of it is estimated to wait a run, and is refused at once (503 with
 * Retry-After) -- unless it is budget_exempt (a sequence's request after its
 * START), which queues and runs. */
static void test_queue_budget_spares_exempt_requests(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 1, .max_queue_size = 64,
                               .queue_budget_us = 1000};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 1, 2); /* nothing is estimated yet: admitted */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    sleep_ms(20);
    allow(h, 1);
    wait_completed(h, 1);
    treq_init(&r[1], h, 2, 1, 2); /* runs, held at the gate */
    submit_ok(h, &r[1]);
    wait_calls(h, 2);
    treq_init(&r[2], h, 3, 1, 2);
    r[2].req.budget_exempt = true;
    submit_ok(h, &r[2]);
    treq_init(&r[3], h, 4, 1, 2); /* behind request 3: a whole run to wait */
    struct error err;
    error_clear(&err);
    assert_int_equal(sched_submit(h->sched, &r[3].req, NULL, &err), ST_ERROR);
    assert_int_equal(err.status, 503);
    assert_non_null(strstr(err.msg, "is overloaded"));
    assert_true(err.retry_after_s >= 1);
    treq_init(&r[4], h, 5, 1, 2);
    r[4].req.budget_exempt = true;
    submit_ok(h, &r[4]);
    allow(h, ALL);
    wait_completed(h, 4);
    assert_false(r[3].done); /* refused: it stayed with the caller */
    assert_int_equal(ncalls(h), 4);
    CHECK_CALL(h, 2, 2, 3);
    CHECK_CALL(h, 3, 2, 5);
    for (int i = 0; i < 5; i++)
        if (i != 3)
            check_answer(h, &r[i], 200);
    harness_finish(h);
}

/* ---- shapes ---------------------------------------------------------------- */

static void test_incompatible_shapes_not_batched(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .preferred_batch_sizes = {2}, .npreferred = 1,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 2, 4); /* a preferred batch: runs at once */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    /* Widths 4, 3, 4, 3 in arrival order. */
    for (int i = 1; i < 5; i++) {
        treq_init(&r[i], h, i + 1, 1, i % 2 ? 4 : 3);
        submit_ok(h, &r[i]);
    }
    allow(h, ALL);
    wait_completed(h, 5);
    assert_int_equal(ncalls(h), 3);
    CHECK_CALL(h, 0, 4, 1, 1);
    CHECK_CALL(h, 1, 4, 2, 4);
    CHECK_CALL(h, 2, 3, 3, 5);
    for (int i = 0; i < 5; i++)
        check_answer(h, &r[i], 200);
    harness_finish(h);
}


/* ---- queue order: priority levels, earliest deadline first --------------- */

/* Request 1 holds the instance while n requests (tags, priorities,
 * timeouts) queue behind it, one row of width 4 each; then everything runs,
 * one request per call (no batching). */
static void queue_behind_held(struct harness *h, uint32_t n, const int32_t *tags,
                              const uint64_t *priority, const uint64_t *timeout_us)
{
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 1, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    for (uint32_t i = 0; i < n; i++) {
        treq_init(&r[1 + i], h, tags[i], 1, 4);
        r[1 + i].req.priority = priority[i];
        r[1 + i].req.timeout_us = timeout_us[i];
        submit_ok(h, &r[1 + i]);
    }
    allow(h, ALL);
    wait_completed(h, n + 1);
    for (uint32_t i = 0; i <= n; i++)
        check_answer(h, &r[i], 200);
}

/* Levels 1 and 2 (default 2): while the instance is held, B (priority 2),
 * C (priority 1), D (priority 0: the default level) and E (priority 9,
 * above the levels: the default) queue; C runs first, then the level-2
 * requests in arrival order. */
static void test_higher_priority_level_runs_first(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = false,
                               .max_queue_size = 64, .nlevels = 2, .default_level = 1};
    struct harness *h = harness_new(&cfg, 0);
    queue_behind_held(h, 4, (const int32_t[]){2, 3, 4, 5}, (const uint64_t[]){2, 1, 0, 9},
                      (const uint64_t[]){0, 0, 0, 0});
    CHECK_CALL(h, 1, 4, 3);
    CHECK_CALL(h, 2, 4, 2);
    CHECK_CALL(h, 3, 4, 4);
    CHECK_CALL(h, 4, 4, 5);
    harness_finish(h);
}

/* Within a level the earliest deadline goes first; requests without a
 * timeout come after those with one, in arrival order. */
static void test_earliest_deadline_first_within_a_level(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = false,
                               .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    const uint64_t s_us = 1000 * 1000;
    queue_behind_held(h, 4, (const int32_t[]){2, 3, 4, 5}, (const uint64_t[]){0, 0, 0, 0},
                      (const uint64_t[]){0, 20 * s_us, 10 * s_us, 0});
    CHECK_CALL(h, 1, 4, 4);
    CHECK_CALL(h, 2, 4, 3);
    CHECK_CALL(h, 3, 4, 2);
    CHECK_CALL(h, 4, 4, 5);
    harness_finish(h);
}

/* Background requests (shadow copies) queue behind every client request,
 * never share a batch with one, and reach the backend flagged as shadow
 * work: while the instance is held, background 10, client 2, background
 * 11 and client 3 queue; 2 and 3 run together, then 10 and 11. */
static void test_background_requests_run_last_in_their_own_batch(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .max_queue_size = 64};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 1, 4);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    const int32_t tags[] = {10, 2, 11, 3};
    for (uint32_t i = 0; i < 4; i++) {
        treq_init(&r[1 + i], h, tags[i], 1, 4);
        r[1 + i].req.background = tags[i] >= 10;
        r[1 + i].req.timeout_us = tags[i] >= 10 ? 60ull * 1000 * 1000 : 0;
        submit_ok(h, &r[1 + i]);
    }
    allow(h, ALL);
    wait_completed(h, 5);
    for (uint32_t i = 0; i < 5; i++)
        check_answer(h, &r[i], 200);
    assert_int_equal(ncalls(h), 3);
    CHECK_CALL(h, 1, 4, 2, 3);
    CHECK_CALL(h, 2, 4, 10, 11);
    assert_int_equal(h->calls[0].flags, 0);
    assert_int_equal(h->calls[1].flags, 0);
    assert_int_equal(h->calls[2].flags, BACKEND_EXEC_SHADOW);
    harness_finish(h);
}

/* More than SCHED_BACKGROUND_MAX waiting background requests: refused
 * (429), and the hint says so before anyone prepares one. */
static void test_background_queue_is_bounded(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 0, .max_queue_size = 1024};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *held = &h->reqs[0];
    treq_init(held, h, 1, 1, 4);
    submit_ok(h, held);
    wait_calls(h, 1);
    struct treq *bg = calloc(SCHED_BACKGROUND_MAX + 1, sizeof *bg);
    assert_non_null(bg);
    for (uint32_t i = 0; i < SCHED_BACKGROUND_MAX; i++) {
        assert_false(sched_background_full(h->sched));
        treq_init(&bg[i], h, 100, 1, 4);
        bg[i].req.background = true;
        bg[i].req.timeout_us = 60ull * 1000 * 1000;
        submit_ok(h, &bg[i]);
    }
    assert_true(sched_background_full(h->sched));
    treq_init(&bg[SCHED_BACKGROUND_MAX], h, 100, 1, 4);
    bg[SCHED_BACKGROUND_MAX].req.background = true;
    struct error err;
    assert_int_equal(sched_submit(h->sched, &bg[SCHED_BACKGROUND_MAX].req, NULL, &err), -1);
    assert_int_equal(err.status, 429);
    allow(h, ALL);
    wait_completed(h, SCHED_BACKGROUND_MAX + 1);
    for (uint32_t i = 0; i < SCHED_BACKGROUND_MAX; i++)
        check_answer(h, &bg[i], 200);
    harness_finish(h);
    for (uint32_t i = 0; i <= SCHED_BACKGROUND_MAX; i++)
        arena_free(&bg[i].req.arena);
    free(bg);
}

/* A full queue (2 waiting) sheds its last request for a newcomer of a
 * higher level: background first, then the lower level; a newcomer of the
 * lowest level present is refused. */
static void test_full_queue_sheds_lower_levels_first(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = false,
                               .max_queue_size = 2, .nlevels = 2, .default_level = 1};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    treq_init(&r[0], h, 1, 1, 4); /* holds the instance */
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 1, 4); /* level 2 */
    submit_ok(h, &r[1]);
    treq_init(&r[2], h, 3, 1, 4); /* background */
    r[2].req.background = true;
    submit_ok(h, &r[2]);
    treq_init(&r[3], h, 4, 1, 4); /* level 2: sheds the background one */
    submit_ok(h, &r[3]);
    wait_completed(h, 1);
    check_answer(h, &r[2], 429);
    treq_init(&r[4], h, 5, 1, 4); /* level 1: sheds request 4, the last level-2 one */
    r[4].req.priority = 1;
    submit_ok(h, &r[4]);
    wait_completed(h, 2);
    check_answer(h, &r[3], 429);
    treq_init(&r[5], h, 6, 1, 4); /* level 2 again: nothing lower to shed */
    struct error err;
    error_clear(&err);
    assert_int_equal(sched_submit(h->sched, &r[5].req, NULL, &err), -1);
    assert_int_equal(err.status, 429);
    assert_false(r[5].done);
    assert_int_equal(sched_queue_depth(h->sched), 2);
    allow(h, ALL);
    wait_completed(h, 5);
    CHECK_CALL(h, 0, 4, 1);
    CHECK_CALL(h, 1, 4, 5);
    CHECK_CALL(h, 2, 4, 2);
    assert_int_equal(ncalls(h), 3);
    check_answer(h, &r[0], 200);
    check_answer(h, &r[1], 200);
    check_answer(h, &r[4], 200);
    harness_finish(h);
}

/* sched_queue_full, the hint a request's head is refused on: full only
 * when even a request of the highest level would be refused, i.e. the
 * queue is at its limit with nothing of a lower level to shed. */
static void test_queue_full_hint_follows_the_highest_level(void **state)
{
    (void)state;
    /* Level 1 by default; level 2 asked for by priority. */
    struct sched_config cfg = {.max_queue_size = 2, .nlevels = 2, .default_level = 0};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *q = h->reqs;
    treq_init(&q[0], h, 10, 1, 4);
    submit_ok(h, &q[0]); /* runs: holds the only instance */
    wait_calls(h, 1);
    treq_init(&q[1], h, 11, 1, 4);
    q[1].req.priority = 2;
    submit_ok(h, &q[1]);
    assert_false(sched_queue_full(h->sched));
    treq_init(&q[2], h, 12, 1, 4);
    submit_ok(h, &q[2]);
    /* At the limit, but a level-1 request would shed the level-2 one. */
    assert_int_equal(sched_queue_depth(h->sched), 2);
    assert_false(sched_queue_full(h->sched));
    treq_init(&q[3], h, 13, 1, 4);
    submit_ok(h, &q[3]); /* sheds request 11 */
    wait_completed(h, 1);
    check_answer(h, &q[1], 429);
    assert_true(sched_queue_full(h->sched)); /* two of level 1: nothing to shed */
    allow(h, ALL);
    wait_completed(h, 4);
    assert_false(sched_queue_full(h->sched));
    check_answer(h, &q[0], 200);
    check_answer(h, &q[2], 200);
    check_answer(h, &q[3], 200);
    harness_finish(h);
}

/* ---- variable-length batching --------------------------------------------- */

/* With a 20 % padding budget, widths 4, 3 and 4 share a batch padded to
 * width 4 (1 zero in 12 elements), and each request gets back exactly its
 * own width. Width 1, queued second, would make 3 zeros in 8 elements with
 * the first: it is passed over and waits for a batch of its own. */
static void test_padding_within_budget_and_outputs_cut_back(void **state)
{
    (void)state;
    struct sched_config cfg = {.max_batch_size = 8, .dynamic_batching = true,
                               .preferred_batch_sizes = {3}, .npreferred = 1,
                               .max_queue_delay_us = HOUR_US, .max_queue_size = 64,
                               .padding_budget = 0.20};
    struct harness *h = harness_new(&cfg, 0);
    struct treq *r = h->reqs;
    /* Hold the instance: 3 rows are a preferred size by themselves. */
    treq_init(&r[0], h, 1, 3, 2);
    submit_ok(h, &r[0]);
    wait_calls(h, 1);
    treq_init(&r[1], h, 2, 1, 4);
    treq_init(&r[2], h, 3, 1, 1);
    treq_init(&r[3], h, 4, 1, 3);
    treq_init(&r[4], h, 5, 1, 4);
    for (int i = 1; i < 5; i++)
        submit_ok(h, &r[i]);
    allow(h, 2);
    wait_calls(h, 2);
    /* 2 (w4), 4 (w3), 5 (w4): the preferred size 3; 3 (w1) passed over. */
    CHECK_CALL(h, 1, 4, 2, -1, 5);
    assert_int_equal(sched_queue_depth(h->sched), 1);
    allow(h, ALL);
    wait_completed(h, 4);
    for (int i = 0; i < 5; i++)
        if (i != 2)
            check_answer(h, &r[i], 200);
    harness_finish(h); /* request 3 runs alone as the scheduler stops */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preferred_size_dispatches_and_max_caps),
        cmocka_unit_test(test_preferred_sizes_16_queued_run_as_8_and_8),
        cmocka_unit_test(test_preferred_sizes_13_queued_run_as_8_4_then_1_after_delay),
        cmocka_unit_test(test_leftover_waits_for_a_preferred_size),
        cmocka_unit_test(test_preferred_sizes_with_multi_sample_requests),
        cmocka_unit_test(test_no_preferred_size_formable_sends_largest_batch),
        cmocka_unit_test(test_waiting_worker_counts_samples_of_its_batch),
        cmocka_unit_test(test_smaller_preferred_size_wakes_waiting_worker),
        cmocka_unit_test(test_lone_request_runs_alone_after_delay),
        cmocka_unit_test(test_oversize_refused_without_allow_oversize),
        cmocka_unit_test(test_oversize_runs_alone_with_allow_oversize),
        cmocka_unit_test(test_queue_timeout_504_never_executed),
        cmocka_unit_test(test_cancelled_499_never_executed),
        cmocka_unit_test(test_queue_full_429),
        cmocka_unit_test(test_queue_budget_spares_exempt_requests),
        cmocka_unit_test(test_incompatible_shapes_not_batched),
        cmocka_unit_test(test_higher_priority_level_runs_first),
        cmocka_unit_test(test_full_queue_sheds_lower_levels_first),
        cmocka_unit_test(test_queue_full_hint_follows_the_highest_level),
        cmocka_unit_test(test_earliest_deadline_first_within_a_level),
        cmocka_unit_test(test_padding_within_budget_and_outputs_cut_back),
        cmocka_unit_test(test_background_requests_run_last_in_their_own_batch),
        cmocka_unit_test(test_background_queue_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
