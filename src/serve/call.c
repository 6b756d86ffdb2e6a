#include "serve/call.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"
#include "model/lookup.h"
#include "obs/stats.h"
#include "serve/classify.h"

/* Decode memory per call: the JSON tree and typed tensors take a small
 * multiple of the body; beyond this ceiling the request gets a 413. */
#define CALL_ARENA_CHUNK (64 * 1024)
#define CALL_ARENA_MAX_FACTOR 32
#define CALL_ARENA_MAX_BYTES ((size_t)1 << 30)
/* Calls kept per I/O thread for reuse (each keeps one arena chunk). */
#define CALL_POOL_MAX 512

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- the thread's pool ------------------------------------------------------ */

int serve_thread_init(struct serve_thread *t, struct repository *repo, struct loop *loop,
                      const struct serve_pipeline *pipeline, uint64_t inline_budget_us)
{
    memset(t, 0, sizeof *t);
    t->repo = repo;
    t->loop = loop;
    t->pipeline = pipeline;
    if (loop && !(t->sched = sched_local_new(loop, inline_budget_us)))
        return -ENOMEM;
    return 0;
}

static void call_free(struct infer_call *call)
{
    arena_free(&call->req.arena);
    mem_free(call);
}

static void trim_pool(struct serve_thread *t, uint32_t keep)
{
    while (t->nfree > keep) {
        struct infer_call *call = t->free_calls;
        t->free_calls = call->_next_free;
        t->nfree--;
        call_free(call);
    }
}

void serve_thread_tick(struct serve_thread *t, uint64_t now_ms)
{
    trim_pool(t, pool_use_keep(&t->use, now_ms));
}

void serve_thread_stopped(struct serve_thread *t)
{
    if (t->sched)
        sched_local_stop(t->sched);
}

void serve_thread_free(struct serve_thread *t)
{
    trim_pool(t, 0);
    sched_local_free(t->sched);
    t->sched = NULL;
}

/* The decode memory ceiling of a request whose body is body_len bytes. */
static size_t arena_max_for(size_t body_len)
{
    if (body_len < CALL_ARENA_MAX_BYTES / CALL_ARENA_MAX_FACTOR)
        return body_len * CALL_ARENA_MAX_FACTOR + CALL_ARENA_CHUNK * 16;
    return CALL_ARENA_MAX_BYTES;
}

struct infer_call *serve_call_new(struct serve_thread *t, const struct serve_frontend *fe,
                                  void *fe_ctx, size_t body_len)
{
    size_t arena_max = arena_max_for(body_len);
    struct infer_call *call = t->free_calls;
    if (call) {
        t->free_calls = call->_next_free;
        t->nfree--;
        struct arena arena = call->req.arena;
        memset(call, 0, sizeof *call);
        call->req.arena = arena;
        call->req.arena.max = arena_max;
    } else {
        call = mem_calloc(1, sizeof *call);
        if (!call)
            return NULL;
        arena_init(&call->req.arena, CALL_ARENA_CHUNK, arena_max);
    }
    pool_use_take(&t->use);
    call->thread = t;
    call->frontend = fe;
    call->fe.ctx = fe_ctx;
    call->shm.registry = t->shm;
    call->received_ns = clock_now_ns();
    atomic_fetch_add_explicit(&t->calls, 1, memory_order_relaxed);
    return call;
}

static void call_put(struct infer_call *call)
{
    struct serve_thread *t = call->thread;
    pool_use_give(&t->use);
    if (t->nfree >= CALL_POOL_MAX) {
        call_free(call);
        return;
    }
    arena_reset(&call->req.arena);
    call->_next_free = t->free_calls;
    t->free_calls = call;
    t->nfree++;
}

void serve_call_abandon(struct infer_call *call)
{
    call_put(call);
}

/* ---- ending a call -------------------------------------------------------------- */

static struct stats_model *call_stats(const struct infer_call *call)
{
    return call->req.model ? sched_stats(call->req.model->sched) : NULL;
}

static void release_snapshot(struct infer_call *call)
{
    if (call->snapshot) {
        repository_release(call->thread->repo, call->snapshot);
        call->snapshot = NULL;
        call->entry = NULL;
    }
}

/* The last step of every call: the front end lets go, the outputs and the
 * model are released, the object goes back to the pool. */
static void call_end(struct infer_call *call)
{
    struct serve_thread *t = call->thread;
    const struct serve_pipeline *p = t->pipeline;
    for (uint32_t i = call->_next_stage; i-- > 0;)
        if (p->stages[i].done)
            p->stages[i].done(call, p->stages[i].cfg);
    if (call->req.model)
        stats_record_route(call_stats(call), call->route);
    release_snapshot(call);
    call->frontend->end(call);
    shm_request_end(&call->shm); /* after the front end: its encoder read them */
    sched_release(&call->req);
    if (call->req.model)
        model_unref(call->req.model);
    call_put(call);
    if (--t->inflight == 0 && t->on_idle)
        t->on_idle(t->idle_arg);
}

/* Answers a call that never reached the scheduler. */
static void call_refuse(struct infer_call *call, const struct error *err)
{
    const struct serve_pipeline *p = call->thread->pipeline;
    INFERD_PROBE_4(refused, call->request_id, call->model_name, err->status,
                   p->stages[call->_next_stage ? call->_next_stage - 1 : 0].name);
    stats_record_refused(call_stats(call), err->status, call->received_ns, clock_now_ns());
    call->frontend->fail(call, err);
    call_end(call);
}

enum stage_result serve_call_respond(struct infer_call *call, const struct tensor *outputs,
                                     uint32_t n)
{
    struct serve_response resp = {.outputs = outputs, .noutputs = n, .final = true};
    call->frontend->emit(call, &resp);
    return STAGE_DONE;
}

enum stage_result serve_call_error(struct infer_call *call, int status, const char *fmt, ...)
{
    struct error *err = &call->req.err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = status;
    err->retry_after_s = 0;
    call->req.rc = ST_ERROR;
    return STAGE_DONE;
}

/* ---- running the stages ------------------------------------------------------ */

static void run_stages(struct infer_call *call)
{
    const struct serve_pipeline *p = call->thread->pipeline;
    while (call->_next_stage < p->nstages) {
        const struct serve_stage *st = &p->stages[call->_next_stage++];
        enum stage_result r = st->run(call, st->cfg);
        if (r == STAGE_DEFER)
            return;
        if (r == STAGE_DONE) {
            if (call->req.rc != 0)
                call_refuse(call, &call->req.err);
            else
                call_end(call); /* the stage answered through the front end */
            return;
        }
    }
    /* Past the last stage: the scheduler has it (submit), and completion
     * arrives through the posted task. */
    if (call->submitted)
        INFERD_PROBE_3(admitted, call->request_id, call->req.model->name,
                       call->req.model->version_str);
    if (!call->submitted) {
        struct error err;
        error_set(&err, 500, "the pipeline ended without submitting the request");
        call_refuse(call, &err);
    }
}

void serve_call_start(struct infer_call *call)
{
    call->thread->inflight++;
    call->_next_stage = 0;
    run_stages(call);
}

static void resume_on_loop(struct loop_task *task)
{
    struct infer_call *call = container_of(task, struct infer_call, _task);
    if (call->req.rc != 0)
        call_refuse(call, &call->req.err); /* the deferred stage answered it */
    else
        run_stages(call);
}

void serve_call_resume(struct infer_call *call)
{
    call->_task.run = resume_on_loop;
    loop_post(call->thread->loop, &call->_task);
}

/* ---- completion ------------------------------------------------------------------ */

/* One response of a decoupled model, copied out of the backend's memory on
 * the worker thread and posted to the call's loop. */
struct chunk {
    struct loop_task task;
    struct infer_call *call;
    uint64_t infer_ns, output_ns; /* response statistics (stats_record_response) */
    bool final;
    uint32_t n;
    struct tensor outputs[];
};

static uint64_t elapsed(uint64_t from, uint64_t to)
{
    return from && to > from ? to - from : 0;
}

static void chunk_on_loop(struct loop_task *task)
{
    struct chunk *k = container_of(task, struct chunk, task);
    struct infer_call *call = k->call;
    uint32_t index = call->_responses++;
    INFERD_PROBE_3(stream_token, call->request_id, index, k->final);
    enum stats_response_outcome outcome = STATS_RESPONSE_FAIL;
    if (index > 0 && call->mode == SERVE_SINGLE_DECOUPLED) {
        if (!call->_stream_err.status)
            error_set(&call->_stream_err, 400,
                      "model '%s' sent more than one response: use the streaming endpoint "
                      "(generate_stream, or gRPC ModelStreamInfer)",
                      call->req.model->name);
    } else if (!call->_final_sent && !call->_stream_err.status) {
        const struct tensor *outs;
        void *classified;
        if (classify_outputs(&call->req, k->outputs, k->n, &outs, &classified,
                             &call->_stream_err) == 0) {
            struct serve_response resp = {.outputs = outs, .noutputs = k->n, .final = k->final};
            call->_final_sent = k->final;
            call->frontend->emit(call, &resp);
            mem_free(classified);
            /* Only the final flag, no outputs: Triton's empty response. */
            outcome = k->n == 0 && k->final ? STATS_RESPONSE_EMPTY : STATS_RESPONSE_SUCCESS;
        }
    }
    stats_record_response(call_stats(call), index, outcome, k->infer_ns, k->output_ns);
    mem_free(k);
}

/* Loop thread, when a decoupled request ends: the response that did not
 * come (cancelled, failed, or the model ended without a final response, to
 * which the pipeline answers an empty final one) is counted at the next
 * index. */
static void record_stream_end(struct infer_call *call, bool cancelled)
{
    const struct infer_request *req = &call->req;
    if (call->_final_sent)
        return;
    uint64_t from = call->_last_response_ns ? call->_last_response_ns : req->infer_start_ns;
    uint64_t ns = elapsed(from, req->exec_end_ns);
    enum stats_response_outcome outcome;
    if (cancelled || (req->rc != 0 && req->err.status == 499))
        outcome = STATS_RESPONSE_CANCEL;
    else if (req->rc != 0 || call->_out_of_memory || call->_stream_err.status)
        outcome = STATS_RESPONSE_FAIL;
    else
        outcome = STATS_RESPONSE_EMPTY;
    stats_record_response(call_stats(call), call->_responses, outcome, ns, 0);
}

/* Worker thread: on_response of a decoupled request. */
static bool on_response(struct infer_request *req, const struct tensor *outputs, uint32_t n,
                        bool final)
{
    struct infer_call *call = (struct infer_call *)req;
    uint64_t start = clock_now_ns();
    size_t size = sizeof(struct chunk) + n * sizeof(struct tensor);
    for (uint32_t i = 0; i < n; i++)
        size += tensor_copy_size(&outputs[i]);
    struct chunk *k = mem_alloc(size);
    if (!k) {
        call->_out_of_memory = true;
        return false;
    }
    k->call = call;
    k->infer_ns =
        elapsed(call->_last_response_ns ? call->_last_response_ns : req->infer_start_ns, start);
    k->final = final;
    k->n = n;
    k->task.run = chunk_on_loop;
    char *p = (char *)&k->outputs[n];
    for (uint32_t i = 0; i < n; i++)
        p = tensor_copy_to(&k->outputs[i], &outputs[i], p);
    call->_last_response_ns = clock_now_ns();
    k->output_ns = elapsed(start, call->_last_response_ns);
    loop_post(call->thread->loop, &k->task);
    return true;
}

static void complete_on_loop(struct loop_task *task)
{
    struct infer_call *call = container_of(task, struct infer_call, _task);
    struct infer_request *req = &call->req;
    bool cancelled = atomic_load_explicit(&req->cancelled, memory_order_relaxed);
    uint64_t now = clock_now_ns();
    /* Outputs computed for the server (a sequence's state) stay out of the
     * response; the stages' done() find them after the others
     * (serve/seqbatch.h). */
    req->noutputs -= req->hidden_outputs;
    INFERD_PROBE_6(request_done, call->request_id, req->model->name, req->model->version_str,
                   elapsed(req->enqueue_ns, req->exec_start_ns),
                   elapsed(req->exec_start_ns, req->exec_end_ns), elapsed(call->received_ns, now));
    stats_record_completion(call_stats(call), req, cancelled, call->received_ns, now);
    if (req->model->sched_cfg.decoupled)
        record_stream_end(call, cancelled);
    if (req->rc == 0 && call->_out_of_memory)
        req->rc = error_set(&req->err, 500, "out of memory copying a response");
    if (req->rc == 0 && call->_stream_err.status) {
        req->rc = ST_ERROR;
        req->err = call->_stream_err;
    }
    if (req->rc == 0 && !req->model->sched_cfg.decoupled && call->shm.outputs &&
        shm_request_write(&call->shm, req->outputs, req->noutputs, &req->err) != 0)
        req->rc = ST_ERROR;
    /* Outputs asked as classes (serve/classify.h) are converted for the
     * front end only: the stages' done() see the model's outputs again. */
    struct tensor *computed = req->outputs;
    const struct tensor *classes = computed;
    void *classified = NULL;
    if (req->rc == 0 && !req->model->sched_cfg.decoupled &&
        classify_outputs(req, computed, req->noutputs, &classes, &classified, &req->err) != 0)
        req->rc = ST_ERROR;
    req->outputs = (struct tensor *)classes;
    if (req->rc != 0) {
        if (!req->err.status)
            req->err.status = 500;
        call->frontend->fail(call, &req->err);
    } else if (!req->model->sched_cfg.decoupled) {
        struct serve_response resp = {.outputs = req->outputs, .noutputs = req->noutputs,
                                      .final = true};
        call->frontend->emit(call, &resp);
    } else if (!call->_final_sent) {
        struct serve_response resp = {.outputs = NULL, .noutputs = 0, .final = true};
        call->frontend->emit(call, &resp);
    }
    req->outputs = computed;
    mem_free(classified);
    call_end(call);
}

/* The thread that ran the request: on the call's own loop (run to
 * completion) the response goes out now; from any other thread it is
 * handed to that loop. */
static void on_complete(struct infer_request *req)
{
    struct infer_call *call = (struct infer_call *)req;
    call->_task.run = complete_on_loop;
    if (loop_current() == call->thread->loop)
        complete_on_loop(&call->_task);
    else
        loop_post(call->thread->loop, &call->_task);
}

/* ---- the stages every pipeline has ------------------------------------------ */

enum stage_result serve_stage_resolve(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct error err;
    call->snapshot = repository_acquire(call->thread->repo);
    const struct model *m = model_lookup(call->snapshot, call->model_name,
                                         strlen(call->model_name), call->version, &call->entry,
                                         &err);
    if (!m)
        return serve_call_error(call, err.status, "%s", err.msg);
    /* The call keeps the version loaded until it ends, even if a reload or
     * unload replaces it meanwhile. */
    call->req.model = model_ref((struct model *)m);
    call->route = call->version && call->version[0] ? ROUTE_URL : ROUTE_DEFAULT;
    return STAGE_CONTINUE;
}

enum stage_result serve_stage_decode(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct error err;
    error_clear(&err);
    const struct model *m = call->req.model;
    release_snapshot(call); /* policy stages are done with the entry */
    if (m->sched_cfg.decoupled && call->mode == SERVE_ONE_RESPONSE)
        return serve_call_error(call, 400,
                                "model '%s' is decoupled (many responses per request): use gRPC "
                                "ModelStreamInfer or POST /v2/models/%s/generate_stream",
                                m->name, m->name);
    if (call->frontend->body) {
        size_t body_len;
        int rc = call->frontend->body(call, &body_len, &err);
        if (rc == ST_AGAIN) {
            call->_next_stage--; /* resumed: decode runs again */
            return STAGE_DEFER;
        }
        if (rc != ST_OK)
            return serve_call_error(call, err.status ? err.status : 400, "%s", err.msg);
        call->req.arena.max = arena_max_for(body_len); /* as if the body had come whole */
    }
    if (call->frontend->decode(call, m, &err) != 0)
        return serve_call_error(call, err.status ? err.status : 400, "%s", err.msg);
    if (classify_check(&call->req, &call->shm, &err) != 0)
        return serve_call_error(call, err.status, "%s", err.msg);
    if (call->shm.outputs && m->sched_cfg.decoupled)
        return serve_call_error(call, 400,
                                "model '%s' is decoupled: its outputs cannot be written to "
                                "shared memory",
                                m->name);
    return STAGE_CONTINUE;
}

enum stage_result serve_stage_queue(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    const struct model *m = call->req.model;
    if (!m || !model_queue_full(m))
        return STAGE_CONTINUE;
    /* sched_submit's refusal, word for word (the front end adds
     * Retry-After: 1). */
    return serve_call_error(call, 429, "model '%s' queue is full (%u requests waiting)", m->name,
                            m->sched_cfg.max_queue_size);
}

enum stage_result serve_stage_submit(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct infer_request *req = &call->req;
    struct error err;
    if (call->deadline_ns) {
        uint64_t now = clock_now_ns();
        if (now >= call->deadline_ns)
            return serve_call_error(call, 504, "deadline exceeded before the request was queued");
        uint64_t left_us = (call->deadline_ns - now) / 1000u;
        if (left_us == 0)
            left_us = 1;
        if (!req->timeout_us || left_us < req->timeout_us)
            req->timeout_us = left_us;
    }
    req->complete = on_complete;
    req->many_responses = call->mode == SERVE_MANY_RESPONSES;
    req->on_response = req->model->sched_cfg.decoupled ? on_response : NULL;
    if (model_submit(req->model, req, call->thread->sched, &err) != 0) {
        req->err = err; /* with its Retry-After */
        req->rc = ST_ERROR;
        return STAGE_DONE;
    }
    call->submitted = true;
    return STAGE_CONTINUE;
}
