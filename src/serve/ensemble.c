#include "serve/ensemble.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "model/model.h"
#include "serve/call.h"

/* One ensemble tensor of a request: an input, or a step's output once it
 * has run. */
struct slot {
    const char *name; /* the config's */
    struct tensor t;
    bool have;
};

enum step_state { STEP_WAITING, STEP_RUNNING, STEP_DONE };

struct run;

/* A step's internal call's context. */
struct step_call {
    struct run *run;
    uint32_t step;
};

/* One ensemble request in progress, in the request's memory. */
struct run {
    struct infer_call *call; /* the client's call (its req is the ensemble's request) */
    const struct model_ensemble *en;
    struct loop_task start; /* the steps start after submit has returned */
    uint32_t nslots;
    struct slot *slots;
    uint8_t state[MODEL_ENSEMBLE_MAX_STEPS];
    struct step_call ctx[MODEL_ENSEMBLE_MAX_STEPS];
    uint32_t running;
    bool advancing, again; /* advance() re-entered by a step that ended at once */
    bool failed;
    struct error err;
};

static struct slot *slot_of(struct run *r, const char *name)
{
    for (uint32_t i = 0; i < r->nslots; i++)
        if (!strcmp(r->slots[i].name, name))
            return &r->slots[i];
    return NULL; /* model_config_check_ensemble: never for a name the config uses */
}

static void fail(struct run *r, uint32_t step, const struct error *err)
{
    if (r->failed)
        return;
    r->failed = true;
    r->err.status = err->status ? err->status : 500;
    r->err.retry_after_s = err->retry_after_s;
    /* A nested ensemble's message names its own failing step already: the
     * innermost is the one that says what to fix. */
    if (!strncmp(err->msg, "in ensemble '", 13))
        snprintf(r->err.msg, sizeof r->err.msg, "%s", err->msg);
    else
        snprintf(r->err.msg, sizeof r->err.msg, "in ensemble '%.64s', step %u ('%.64s'): %.300s",
                 r->call->req.model->name, step, r->en->steps[step].model_name, err->msg);
}

/* ---- a step's call (a front end of the pipeline) ------------------------------------ */

static const char *step_header(const struct infer_call *call, const char *name, size_t *len)
{
    const struct step_call *sc = call->fe.ctx;
    const struct infer_call *client = sc->run->call;
    return client->header ? client->header(client, name, len) : NULL;
}

/* The step's request: its model's inputs from the ensemble's tensors, the
 * outputs its output_map names, in that order. */
static int step_decode(struct infer_call *call, const struct model *m, struct error *err)
{
    const struct step_call *sc = call->fe.ctx;
    const struct model_ensemble_step *st = &sc->run->en->steps[sc->step];
    struct infer_request *req = &call->req;
    req->inputs = arena_calloc(&req->arena, m->info.ninputs ? m->info.ninputs : 1,
                               sizeof *req->inputs);
    bool *seen = arena_calloc(&req->arena, m->info.ninputs ? m->info.ninputs : 1, sizeof *seen);
    const char **names = arena_alloc(&req->arena, st->noutputs * sizeof *names);
    if (!req->inputs || !seen || !names)
        return error_set(err, 413, "request too large to decode");
    req->ninputs = m->info.ninputs;
    for (uint32_t i = 0; i < st->ninputs; i++) {
        int idx = model_input_index(m, st->input_map[i].key);
        if (idx < 0)
            return error_set(err, 400, "model '%s' has no input '%s' (input_map)", m->name,
                             st->input_map[i].key);
        const struct slot *s = slot_of(sc->run, st->input_map[i].value);
        struct tensor *t = &req->inputs[idx];
        *t = s->t;
        t->name = m->info.inputs[idx].name;
        seen[idx] = true;
        if (model_io_check(m->name, &m->info.inputs[idx], t, err) != 0)
            return ST_ERROR;
    }
    if (model_inputs_complete(m, req->inputs, seen, &req->ninputs, err) != 0)
        return ST_ERROR;
    req->batch = m->batched && req->ninputs ? req->inputs[0].shape[0] : 1;
    for (uint32_t i = 0; i < st->noutputs; i++) {
        int idx = model_output_index(m, st->output_map[i].key);
        if (idx < 0)
            return error_set(err, 400, "model '%s' has no output '%s' (output_map)", m->name,
                             st->output_map[i].key);
        names[i] = m->info.outputs[idx].name;
    }
    req->output_names = names;
    req->noutputs = st->noutputs;
    return 0;
}

/* The step's outputs become ensemble tensors: copied into the request's
 * memory (the step's own goes when its call ends). */
static void step_emit(struct infer_call *call, const struct serve_response *resp)
{
    const struct step_call *sc = call->fe.ctx;
    struct run *r = sc->run;
    const struct model_ensemble_step *st = &r->en->steps[sc->step];
    struct arena *a = &r->call->req.arena;
    for (uint32_t i = 0; i < st->noutputs && i < resp->noutputs; i++) {
        struct slot *s = slot_of(r, st->output_map[i].value);
        char *p = arena_alloc(a, tensor_copy_size(&resp->outputs[i]));
        if (!p) {
            struct error e = {.status = 413};
            snprintf(e.msg, sizeof e.msg, "out of memory copying output '%s'",
                     st->output_map[i].key);
            fail(r, sc->step, &e);
            return;
        }
        tensor_copy_to(&s->t, &resp->outputs[i], p);
        s->t.name = s->name;
        s->have = true;
    }
}

static void step_fail(struct infer_call *call, const struct error *err)
{
    const struct step_call *sc = call->fe.ctx;
    fail(sc->run, sc->step, err);
}

static void advance(struct run *r);

static void step_end(struct infer_call *call)
{
    const struct step_call *sc = call->fe.ctx;
    struct run *r = sc->run;
    r->state[sc->step] = STEP_DONE;
    r->running--;
    advance(r);
}

static const struct serve_frontend step_frontend = {
    .name = "ensemble step",
    .decode = step_decode,
    .emit = step_emit,
    .fail = step_fail,
    .end = step_end,
};

/* ---- running a request ---------------------------------------------------------------- */

static bool step_ready(struct run *r, uint32_t s)
{
    const struct model_ensemble_step *st = &r->en->steps[s];
    if (r->state[s] != STEP_WAITING)
        return false;
    for (uint32_t i = 0; i < st->ninputs; i++)
        if (!slot_of(r, st->input_map[i].value)->have)
            return false;
    return true;
}

static void start_step(struct run *r, uint32_t s)
{
    const struct model_ensemble_step *st = &r->en->steps[s];
    struct infer_call *client = r->call;
    struct infer_call *call = serve_call_new(client->thread, &step_frontend, &r->ctx[s], 0);
    if (!call) {
        struct error e = {.status = 503, .msg = "out of memory"};
        fail(r, s, &e);
        return;
    }
    char *version = NULL;
    if (st->model_version >= 0 && (version = arena_alloc(&client->req.arena, 24)))
        snprintf(version, 24, "%lld", (long long)st->model_version);
    r->ctx[s] = (struct step_call){.run = r, .step = s};
    call->model_name = st->model_name;
    call->version = version ? version : "";
    call->header = step_header;
    call->request_id = client->request_id;
    call->deadline_ns = client->deadline_ns;
    call->mode = SERVE_ONE_RESPONSE;
    call->ensemble_depth = client->ensemble_depth + 1;
    if (atomic_load_explicit(&client->req.cancelled, memory_order_relaxed))
        atomic_store_explicit(&call->req.cancelled, true, memory_order_relaxed);
    r->state[s] = STEP_RUNNING;
    r->running++;
    serve_call_start(call); /* may end at once: advance() is then re-entered */
}

/* Answers the client's call; r is gone afterwards (it lives in the call). */
static void finish(struct run *r)
{
    struct infer_request *req = &r->call->req;
    req->exec_end_ns = req->infer_end_ns = clock_now_ns();
    if (!r->failed) {
        req->outputs = arena_alloc(&req->arena, (req->noutputs ? req->noutputs : 1) *
                                                    sizeof *req->outputs);
        if (!req->outputs) {
            r->failed = true;
            error_set(&r->err, 413, "request too large for its outputs");
        }
        for (uint32_t q = 0; !r->failed && q < req->noutputs; q++) {
            const struct slot *s = slot_of(r, req->output_names[q]);
            if (!s->have) { /* every step ran well: it cannot be, but answer, not crash */
                r->failed = true;
                error_set(&r->err, 500, "ensemble output '%s' was not produced",
                          req->output_names[q]);
                break;
            }
            req->outputs[q] = s->t;
            req->outputs[q].name = req->output_names[q];
        }
    }
    if (r->failed) {
        req->outputs = NULL;
        req->err = r->err;
        req->rc = ST_ERROR;
    } else {
        req->rc = 0;
        req->batch_size = (uint32_t)req->batch;
    }
    req->complete(req);
}

/* Starts every step whose inputs are there; once none runs, answers. */
static void advance(struct run *r)
{
    if (r->advancing) {
        r->again = true;
        return;
    }
    r->advancing = true;
    do {
        r->again = false;
        if (atomic_load_explicit(&r->call->req.cancelled, memory_order_relaxed) && !r->failed) {
            r->failed = true;
            error_set(&r->err, 499, "the client went away");
        }
        for (uint32_t s = 0; !r->failed && s < r->en->nsteps; s++)
            if (step_ready(r, s))
                start_step(r, s);
    } while (r->again);
    r->advancing = false;
    if (r->running == 0)
        finish(r);
}

static void start_task(struct loop_task *t)
{
    struct run *r = (struct run *)((char *)t - offsetof(struct run, start));
    r->call->req.exec_start_ns = r->call->req.infer_start_ns = clock_now_ns();
    advance(r);
}

/* ---- the engine ------------------------------------------------------------------------ */

static int ensemble_submit(void *engine, struct infer_request *req, struct error *err)
{
    const struct model *m = engine;
    struct infer_call *call = (struct infer_call *)req; /* req is the call's first member */
    if (call->ensemble_depth >= ENSEMBLE_MAX_DEPTH)
        return error_set(err, 400,
                         "ensemble '%s' runs inside %u ensembles already (the most is %d): do "
                         "the ensembles run each other?",
                         m->name, call->ensemble_depth, ENSEMBLE_MAX_DEPTH);
    const struct model_config *cfg = &m->config;
    struct run *r = arena_calloc(&req->arena, 1, sizeof *r);
    uint32_t nslots = cfg->ninputs;
    for (uint32_t s = 0; s < cfg->ensemble.nsteps; s++)
        nslots += cfg->ensemble.steps[s].noutputs;
    struct slot *slots = arena_calloc(&req->arena, nslots ? nslots : 1, sizeof *slots);
    if (!r || !slots)
        return error_set(err, 413, "request too large to run the ensemble");
    r->call = call;
    r->en = &cfg->ensemble;
    r->slots = slots;
    for (uint32_t i = 0; i < cfg->ninputs; i++) {
        struct slot *s = &slots[r->nslots++];
        s->name = cfg->inputs[i].name;
        for (uint32_t k = 0; k < req->ninputs && !s->have; k++)
            if (!strcmp(req->inputs[k].name, s->name)) {
                s->t = req->inputs[k];
                s->have = true;
            }
    }
    for (uint32_t st = 0; st < cfg->ensemble.nsteps; st++)
        for (uint32_t i = 0; i < cfg->ensemble.steps[st].noutputs; i++)
            slots[r->nslots++].name = cfg->ensemble.steps[st].output_map[i].value;
    req->enqueue_ns = clock_now_ns();
    r->start.run = start_task;
    loop_post(call->thread->loop, &r->start); /* after submit returns: the call is the pipeline's until then */
    return 0;
}

static void ensemble_stop(void *engine)
{
    (void)engine; /* the version itself: nothing of its own */
}

static const struct model_engine_ops ensemble_ops = {
    .submit = ensemble_submit,
    .stop = ensemble_stop,
};

int ensemble_attach(struct model *m, struct error *err)
{
    (void)err;
    m->engine_ops = &ensemble_ops;
    m->engine = m;
    return 0;
}
