#include "cluster/remote.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/rand.h"
#include "base/status.h"
#include "cluster/remote_int.h"
#include "core/dtype.h"
#include "grpc_service.pb-c.h"
#include "obs/trace.h"

#define INFER_PATH "/inference.GRPCInferenceService/ModelInfer"
#define STREAM_PATH "/inference.GRPCInferenceService/ModelStreamInfer"
/* One stream message's tensors: BYTES element arrays (the data points
 * into the message). */
#define SCRATCH_MAX (4u << 20)
#define MAX_PARAMS 6

struct remote_call {
    struct upstream_call up;
    struct infer_request *req;
    /* A stream's (decoupled version). */
    struct arena scratch; /* one message's tensors, reset after it */
    struct error err;     /* what ended the stream from a message */
    uint32_t attempt;     /* the attempt `seen` counts */
    uint64_t delivered;   /* responses handed to the request */
    uint64_t seen;        /* responses of this attempt */
    uint64_t hash_delivered, hash_seen;
    bool final_seen;
};

/* ---- outputs ---------------------------------------------------------------------- */

/* The requested outputs of r as tensors (in the request's order) in *out,
 * from `a`: copies of the message's data (copy), or pointing into it. 0
 * or ST_ERROR with err (502: the upstream's answer is not what was asked). */
static int read_outputs(struct arena *a, const struct infer_request *req,
                        const Inference__ModelInferResponse *r, bool copy, struct tensor **out,
                        struct error *err)
{
    struct tensor *outs = arena_calloc(a, req->noutputs ? req->noutputs : 1, sizeof *outs);
    if (!outs)
        return error_set(err, 500, "out of memory");
    for (uint32_t i = 0; i < req->noutputs; i++) {
        const char *want = req->output_names[i];
        size_t k = 0;
        while (k < r->n_outputs && strcmp(r->outputs[k]->name, want) != 0)
            k++;
        if (k == r->n_outputs || k >= r->n_raw_output_contents)
            return error_set(err, 502, "the upstream's answer has no output '%s' (raw)", want);
        const Inference__ModelInferResponse__InferOutputTensor *o = r->outputs[k];
        struct tensor *t = &outs[i];
        t->name = want;
        t->dtype = dtype_from_name(o->datatype, strlen(o->datatype));
        if (t->dtype == DT_INVALID || o->n_shape > TENSOR_MAX_DIMS)
            return error_set(err, 502,
                             "the upstream's output '%s' has an unknown datatype or "
                             "too many dims",
                             want);
        t->ndim = (uint32_t)o->n_shape;
        memcpy(t->shape, o->shape, o->n_shape * sizeof *o->shape);
        const ProtobufCBinaryData *raw = &r->raw_output_contents[k];
        int64_t count = tensor_count(t, INT64_MAX);
        if (count < 0)
            return error_set(err, 502, "the upstream's output '%s' has a bad shape", want);
        char *data = (char *)raw->data;
        if (copy) {
            if (!(data = arena_alloc(a, raw->len ? raw->len : 1)))
                return error_set(err, 500, "out of memory for the upstream's outputs");
            memcpy(data, raw->data, raw->len);
        }
        if (t->dtype == DT_BYTES) {
            if (tensor_bytes_split(a, t, data, raw->len, count, "raw_output_contents", err) != 0) {
                err->status = 502;
                return ST_ERROR;
            }
        } else {
            if ((uint64_t)count * dtype_size(t->dtype) != raw->len)
                return error_set(err, 502, "the upstream's output '%s' has %zu bytes for its shape",
                                 want, raw->len);
            t->data = data;
            t->nbytes = raw->len;
        }
    }
    *out = outs;
    return 0;
}

/* The upstream's token counts of a generative model's response (its
 * num_input_tokens and num_output_tokens outputs, INT32 [1]), for token
 * budgets and usage metering here. */
static void note_usage(struct infer_request *req, const struct tensor *outs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct tensor *t = &outs[i];
        if (t->dtype != DT_INT32 || t->nbytes != 4)
            continue;
        int32_t v;
        memcpy(&v, t->data, 4);
        if (v < 0)
            continue;
        if (strcmp(t->name, "num_input_tokens") == 0)
            req->usage_prompt_tokens = (uint32_t)v;
        else if (strcmp(t->name, "num_output_tokens") == 0)
            req->usage_completion_tokens = (uint32_t)v;
    }
}

/* ---- one call ------------------------------------------------------------------------ */

static void unary_done(struct upstream_call *c)
{
    struct remote_call *rc = (struct remote_call *)c;
    struct infer_request *req = rc->req;
    req->exec_end_ns = req->infer_end_ns = clock_now_ns();
    req->batch_size = 1;
    if (c->status != 0) {
        req->rc = error_set(&req->err, upstream_http_status(c->status), "upstream %s", c->message);
    } else {
        Inference__ModelInferResponse *r = inference__model_infer_response__unpack(
            NULL, c->resp.len, (const uint8_t *)c->resp.data);
        if (!r)
            req->rc =
                error_set(&req->err, 502, "upstream %s: malformed ModelInferResponse", c->upstream);
        else
            req->rc = read_outputs(&req->arena, req, r, true, &req->outputs, &req->err);
        if (req->rc == 0)
            note_usage(req, req->outputs, req->noutputs);
        if (r)
            inference__model_infer_response__free_unpacked(r, NULL);
    }
    buf_free(&c->resp);
    req->complete(req);
}

/* ---- one stream ---------------------------------------------------------------------- */

static const Inference__InferParameter *response_parameter(const Inference__ModelInferResponse *r,
                                                           const char *key)
{
    for (size_t i = 0; r && i < r->n_parameters; i++)
        if (r->parameters[i]->key && strcmp(r->parameters[i]->key, key) == 0)
            return r->parameters[i]->value;
    return NULL;
}

/* A response's outputs and final flag, hashed: what a replay must repeat. */
static uint64_t response_hash(const Inference__ModelInferResponse *r, bool final)
{
    uint64_t h = HASH_FNV_OFFSET ^ (final ? 1u : 0u);
    for (size_t k = 0; k < r->n_raw_output_contents; k++) {
        const ProtobufCBinaryData *raw = &r->raw_output_contents[k];
        h = hash_fnv1a(h, raw->data, raw->len);
        h = hash_fnv1a(h, &raw->len, sizeof raw->len);
    }
    return h;
}

static uint64_t hash_add(uint64_t running, uint64_t h)
{
    return (running ^ h) * HASH_FNV_PRIME;
}

/* One response of the stream: skipped when a replay repeats what the
 * request already had, else handed on. Returns false to end the stream
 * (rc->err says why, unless the request was cancelled). */
static bool stream_response(struct remote_call *rc, const Inference__ModelStreamInferResponse *m)
{
    struct upstream_call *c = &rc->up;
    struct infer_request *req = rc->req;
    const Inference__ModelInferResponse *r = m->infer_response;
    if (m->error_message && m->error_message[0]) {
        const Inference__InferParameter *st = response_parameter(r, "inferd_http_status");
        int status = st && st->parameter_choice_case ==
                                   INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM &&
                             st->int64_param >= 400 && st->int64_param < 600
                         ? (int)st->int64_param
                         : 502;
        error_set(&rc->err, status, "%s", m->error_message);
        return false;
    }
    if (!r) {
        error_set(&rc->err, 502, "upstream %s: a stream response without its infer_response",
                  c->upstream);
        return false;
    }
    const Inference__InferParameter *fp = response_parameter(r, "triton_final_response");
    bool final = fp && fp->parameter_choice_case ==
                           INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM &&
                 fp->bool_param;
    uint64_t h = response_hash(r, final);
    if (++rc->seen <= rc->delivered) {
        /* A replay after a lost upstream: the request had this one. */
        rc->hash_seen = hash_add(rc->hash_seen, h);
        bool last_replayed = rc->seen == rc->delivered;
        if ((last_replayed && rc->hash_seen != rc->hash_delivered) || (final && !last_replayed)) {
            error_set(&rc->err, 502,
                      "the upstream stream was cut after %llu responses and its replay on %s "
                      "did not repeat them (the model is not deterministic for this request)",
                      (unsigned long long)rc->delivered, c->upstream);
            return false;
        }
        return true;
    }
    rc->delivered++;
    rc->hash_delivered = hash_add(rc->hash_delivered, h);
    if (final) {
        rc->final_seen = true;
        c->replayable = false;
    }
    if (atomic_load_explicit(&req->cancelled, memory_order_relaxed))
        return false;
    struct tensor *outs = NULL;
    uint32_t n = r->n_outputs ? req->noutputs : 0; /* Triton's empty final response */
    if (n && read_outputs(&rc->scratch, req, r, false, &outs, &rc->err) != 0)
        return false;
    note_usage(req, outs, n);
    return req->on_response(req, outs, n, final);
}

static bool stream_message(struct upstream_call *c, const uint8_t *msg, size_t len)
{
    struct remote_call *rc = (struct remote_call *)c;
    if (c->attempt != rc->attempt) {
        rc->attempt = c->attempt; /* sent again: its responses start over */
        rc->seen = 0;
        rc->hash_seen = HASH_FNV_OFFSET;
    }
    Inference__ModelStreamInferResponse *m =
        inference__model_stream_infer_response__unpack(NULL, len, msg);
    if (!m) {
        error_set(&rc->err, 502, "upstream %s: malformed ModelStreamInferResponse", c->upstream);
        return false;
    }
    bool more = stream_response(rc, m);
    inference__model_stream_infer_response__free_unpacked(m, NULL);
    arena_reset(&rc->scratch);
    if (!more)
        c->replayable = false;
    return more;
}

static void stream_done(struct upstream_call *c)
{
    struct remote_call *rc = (struct remote_call *)c;
    struct infer_request *req = rc->req;
    req->exec_end_ns = req->infer_end_ns = clock_now_ns();
    req->batch_size = 1;
    req->outputs = NULL;
    req->rc = 0;
    if (rc->err.status) {
        req->rc = ST_ERROR;
        req->err = rc->err;
    } else if (c->status == GRPC_CANCELLED ||
               (c->status != 0 && atomic_load_explicit(&req->cancelled, memory_order_relaxed))) {
        req->rc = error_set(&req->err, 499, "cancelled");
    } else if (c->status != 0 && !rc->final_seen) {
        req->rc = error_set(&req->err, upstream_http_status(c->status), "upstream %s", c->message);
    }
    arena_free(&rc->scratch);
    buf_free(&c->resp);
    req->complete(req);
}

/* ---- the request message --------------------------------------------------------------- */

/* The raw bytes of t: numeric data as is, BYTES as length-prefixed
 * elements (in the arena). */
static int raw_of(struct arena *a, const struct tensor *t, ProtobufCBinaryData *out)
{
    if (t->dtype != DT_BYTES) {
        out->data = t->data;
        out->len = t->nbytes;
        return 0;
    }
    int64_t n = tensor_count(t, INT64_MAX);
    if (n < 0)
        return ST_ERROR;
    const struct tensor_bytes *el = t->data;
    size_t size = (size_t)n * TENSOR_BYTES_PREFIX + t->nbytes;
    uint8_t *p = arena_alloc(a, size ? size : 1);
    if (!p)
        return ST_ERROR;
    out->data = p;
    out->len = size;
    for (int64_t i = 0; i < n; i++) {
        uint32_t l = el[i].len;
        p[0] = (uint8_t)l, p[1] = (uint8_t)(l >> 8), p[2] = (uint8_t)(l >> 16);
        p[3] = (uint8_t)(l >> 24);
        memcpy(p + 4, el[i].ptr, l);
        p += 4 + l;
    }
    return 0;
}

struct params {
    Inference__ModelInferRequest__ParametersEntry entry[MAX_PARAMS];
    Inference__InferParameter value[MAX_PARAMS];
    Inference__ModelInferRequest__ParametersEntry *ptr[MAX_PARAMS];
    size_t n;
};

static Inference__InferParameter *param_add(struct params *p, const char *key,
                                            Inference__InferParameter__ParameterChoiceCase kind)
{
    size_t i = p->n++;
    p->entry[i] = (Inference__ModelInferRequest__ParametersEntry)
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
    p->value[i] = (Inference__InferParameter)INFERENCE__INFER_PARAMETER__INIT;
    p->value[i].parameter_choice_case = kind;
    p->entry[i].key = (char *)key;
    p->entry[i].value = &p->value[i];
    p->ptr[i] = &p->entry[i];
    return &p->value[i];
}

/* What the request's own fields say that the upstream must hear: Triton's
 * sequence parameters, the priority, and (streams) the empty final
 * response that tells the stream's end. */
static void request_params(struct arena *a, const struct infer_request *req, bool stream,
                           struct params *p)
{
    const struct infer_sequence *sq = &req->sequence;
    if (sq->id_str) {
        char *id = arena_strndup(a, sq->id_str, sq->id_str_len);
        if (id)
            param_add(p, "sequence_id", INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
                ->string_param = id;
    } else if (sq->id) {
        param_add(p, "sequence_id", INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
            ->uint64_param = sq->id;
    }
    if (sq->start)
        param_add(p, "sequence_start", INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            ->bool_param = true;
    if (sq->end)
        param_add(p, "sequence_end", INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            ->bool_param = true;
    if (req->priority)
        param_add(p, "priority", INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
            ->uint64_param = req->priority;
    if (stream)
        param_add(p, "triton_enable_empty_final_response",
                  INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            ->bool_param = true;
}

static bool has_input(const struct infer_request *req, const char *name)
{
    for (uint32_t i = 0; i < req->ninputs; i++)
        if (strcmp(req->inputs[i].name, name) == 0)
            return true;
    return false;
}

/* A replayable generation repeats itself only with a fixed seed: a
 * version that takes random_seed (UINT64 [1]) gets one when the request
 * has none, as random as the one the upstream would have drawn. */
static bool needs_seed(const struct model *m, const struct infer_request *req)
{
    for (uint32_t i = 0; i < m->info.ninputs; i++)
        if (strcmp(m->info.inputs[i].name, "random_seed") == 0)
            return m->info.inputs[i].dtype == DT_UINT64 && !has_input(req, "random_seed");
    return false;
}

static uint64_t fresh_seed(const struct infer_request *req)
{
    uint64_t x = clock_now_ns() ^ (uint64_t)(uintptr_t)req;
    return rand_splitmix64(&x) & 0x7fffffffffffffffull;
}

/* The request as a ModelInferRequest (raw contents), packed into the
 * arena. extra: one more input (the chosen seed), or NULL. */
static int pack_request(const struct remote_engine *e, struct infer_request *req, bool stream,
                        const struct tensor *extra, uint8_t **out, size_t *len, struct error *err)
{
    struct arena *a = &req->arena;
    uint32_t nin = req->ninputs + (extra ? 1 : 0);
    Inference__ModelInferRequest msg = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor *ins = arena_calloc(a, nin ? nin : 1, sizeof *ins);
    Inference__ModelInferRequest__InferInputTensor **inp =
        arena_calloc(a, nin ? nin : 1, sizeof *inp);
    ProtobufCBinaryData *raw = arena_calloc(a, nin ? nin : 1, sizeof *raw);
    Inference__ModelInferRequest__InferRequestedOutputTensor *outs =
        arena_calloc(a, req->noutputs ? req->noutputs : 1, sizeof *outs);
    Inference__ModelInferRequest__InferRequestedOutputTensor **outp =
        arena_calloc(a, req->noutputs ? req->noutputs : 1, sizeof *outp);
    struct params *params = arena_calloc(a, 1, sizeof *params);
    if (!ins || !inp || !raw || !outs || !outp || !params)
        return error_set(err, 500, "out of memory");
    msg.model_name = e->cfg->remote_model;
    msg.model_version = (char *)"";
    msg.id = (char *)(req->id ? req->id : "");
    for (uint32_t i = 0; i < nin; i++) {
        const struct tensor *t = i < req->ninputs ? &req->inputs[i] : extra;
        ins[i] = (Inference__ModelInferRequest__InferInputTensor)
            INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
        ins[i].name = (char *)t->name;
        ins[i].datatype = (char *)dtype_name(t->dtype);
        ins[i].n_shape = t->ndim;
        ins[i].shape = (int64_t *)t->shape;
        inp[i] = &ins[i];
        if (raw_of(a, t, &raw[i]) != 0)
            return error_set(err, 500, "out of memory");
    }
    for (uint32_t i = 0; i < req->noutputs; i++) {
        outs[i] = (Inference__ModelInferRequest__InferRequestedOutputTensor)
            INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
        outs[i].name = (char *)req->output_names[i];
        outp[i] = &outs[i];
    }
    request_params(a, req, stream, params);
    msg.n_parameters = params->n;
    msg.parameters = params->ptr;
    msg.n_inputs = nin;
    msg.inputs = inp;
    msg.n_outputs = req->noutputs;
    msg.outputs = outp;
    msg.n_raw_input_contents = nin;
    msg.raw_input_contents = raw;
    *len = inference__model_infer_request__get_packed_size(&msg);
    if (!(*out = arena_alloc(a, *len ? *len : 1)))
        return error_set(err, 413, "request too large to forward");
    inference__model_infer_request__pack(&msg, *out);
    return 0;
}

/* A sequence's requests share an upstream: its correlation id, hashed. */
static uint64_t sequence_key(const struct infer_sequence *sq)
{
    if (!sq->id_str)
        return sq->id;
    uint64_t h = hash_fnv1a(HASH_FNV_OFFSET, sq->id_str, sq->id_str_len);
    return h ? h : 1;
}

static int remote_submit(void *engine, struct infer_request *req, struct error *err)
{
    struct remote_engine *e = engine;
    bool stream = req->model->sched_cfg.decoupled;
    struct remote_call *rc = arena_calloc(&req->arena, 1, sizeof *rc);
    if (!rc)
        return error_set(err, 500, "out of memory");
    rc->up.affinity = sequence_key(&req->sequence);
    bool replayable = stream && !rc->up.affinity;
    struct tensor seed = {0};
    uint64_t *seed_value = NULL;
    if (replayable && needs_seed(req->model, req)) {
        if (!(seed_value = arena_alloc(&req->arena, sizeof *seed_value)))
            return error_set(err, 500, "out of memory");
        *seed_value = fresh_seed(req);
        seed = (struct tensor){.name = "random_seed", .dtype = DT_UINT64, .ndim = 1,
                               .shape = {1}, .data = seed_value, .nbytes = 8};
    }
    uint8_t *packed = NULL;
    size_t len = 0;
    if (pack_request(e, req, stream, seed_value ? &seed : NULL, &packed, &len, err) != 0)
        return ST_ERROR;
    rc->req = req;
    rc->up.path = stream ? STREAM_PATH : INFER_PATH;
    rc->up.msg = packed;
    rc->up.len = len;
    rc->up.timeout_us = req->timeout_us;
    rc->up.done = stream ? stream_done : unary_done;
    if (stream) {
        rc->up.on_message = stream_message;
        rc->up.replayable = replayable;
        rc->hash_delivered = rc->hash_seen = HASH_FNV_OFFSET;
        arena_init(&rc->scratch, 1024, SCRATCH_MAX);
    }
    static const uint8_t zero[16];
    if (memcmp(req->trace.trace_id, zero, sizeof zero) != 0)
        trace_format_traceparent(rc->up.traceparent, req->trace.trace_id, req->trace.span_id,
                                 req->trace.sampled ? 1 : 0);
    if (req->id && req->id_len < sizeof rc->up.request_id)
        snprintf(rc->up.request_id, sizeof rc->up.request_id, "%.*s", (int)req->id_len, req->id);
    req->enqueue_ns = req->exec_start_ns = req->infer_start_ns = clock_now_ns();
    upstream_pool_call(e->pool, &rc->up);
    return 0;
}

static void remote_stop(void *engine)
{
    (void)engine; /* the pool belongs to struct remote_models */
}

const struct model_engine_ops remote_ops = {.submit = remote_submit, .stop = remote_stop};
