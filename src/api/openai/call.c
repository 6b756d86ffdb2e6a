#include "api/openai/call.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/gen_outputs.h"
#include "api/limit_headers.h"
#include "api/openai/http.h"
#include "api/http_obs.h"
#include "base/sha256.h"
#include "obs/request.h"

#define FINISH_MAX 15

/* The front end's state of one call, in the call's arena. */
struct oa_call {
    struct openai_front *front;
    struct http_txn *txn;      /* until answered, or handed to the stream */
    struct gen_stream *stream; /* streamed: from decode until end() */
    struct openai_request rq;
    uint8_t digest[SHA256_DIGEST_SIZE]; /* of the body (streamed) */
    char id[16 + STREAM_ID_LEN];        /* "cmpl-<hex>", "chatcmpl-<hex>" */
    uint64_t created;
    bool first_sent; /* a chunk went out (chat: the one with the role) */
    bool attached;   /* the POST's txn went to the stream */
    bool broken;     /* the stream's buffer is full: only its error event follows */
    uint32_t prompt_tokens, completion_tokens;
    char finish[FINISH_MAX + 1];
};

static struct oa_call *oa_of(const struct infer_call *call)
{
    return call->fe.ctx;
}

/* ---- decoding ------------------------------------------------------------------ */

static struct tensor *add_input(struct infer_call *call, uint32_t *n, const char *name,
                                enum dtype dt, int64_t count, size_t elem)
{
    struct tensor *t = &call->req.inputs[(*n)++];
    t->name = name;
    t->dtype = dt;
    t->ndim = 1;
    t->shape[0] = count;
    t->nbytes = elem * (size_t)count;
    t->data = arena_calloc(&call->req.arena, (size_t)count, elem);
    return t;
}

/* The BYTES elements of s[0..n) as a tensor. */
static bool add_bytes(struct infer_call *call, uint32_t *k, const char *name, const char *const *s,
                      const size_t *len, uint32_t n)
{
    struct tensor *t = add_input(call, k, name, DT_BYTES, n, sizeof(struct tensor_bytes));
    if (!t->data)
        return false;
    struct tensor_bytes *b = t->data;
    t->nbytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        b[i].ptr = s[i];
        b[i].len = (uint32_t)len[i];
        t->nbytes += len[i];
    }
    return true;
}

static bool add_scalar(struct infer_call *call, uint32_t *k, const char *name, enum dtype dt,
                       const void *v, size_t size)
{
    struct tensor *t = add_input(call, k, name, dt, 1, size);
    if (t->data)
        memcpy(t->data, v, size);
    return t->data != NULL;
}

/* The text-interface inputs of the request (docs/openai.md). */
static int build_inputs(struct infer_call *call, const struct openai_request *rq, struct error *err)
{
    struct infer_request *req = &call->req;
    req->inputs = arena_calloc(&req->arena, 8, sizeof *req->inputs);
    if (!req->inputs)
        return error_set(err, 413, "the request does not fit in memory");
    uint32_t n = 0;
    bool ok = add_bytes(call, &n, "text_input", &rq->prompt, &rq->prompt_len, 1);
    bool stream = rq->stream;
    ok = ok && add_scalar(call, &n, "stream", DT_BOOL, &stream, 1);
    if (ok && rq->max_tokens >= 0)
        ok = add_scalar(call, &n, "max_tokens", DT_INT32, &rq->max_tokens, 4);
    if (ok && !isnan(rq->temperature))
        ok = add_scalar(call, &n, "temperature", DT_FP32, &rq->temperature, 4);
    if (ok && !isnan(rq->top_p))
        ok = add_scalar(call, &n, "top_p", DT_FP32, &rq->top_p, 4);
    if (ok && rq->top_k >= 0)
        ok = add_scalar(call, &n, "top_k", DT_INT32, &rq->top_k, 4);
    if (ok && rq->has_seed)
        ok = add_scalar(call, &n, "random_seed", DT_UINT64, &rq->seed, 8);
    if (ok && rq->nstop)
        ok = add_bytes(call, &n, "stop_words", rq->stop, rq->stop_len, rq->nstop);
    if (!ok)
        return error_set(err, 413, "the request does not fit in memory");
    req->ninputs = n;
    req->batch = 1;
    return 0;
}

static int oa_decode(struct infer_call *call, const struct model *m, struct error *err)
{
    struct oa_call *oc = oa_of(call);
    struct http_txn *txn = oc->txn;
    if (txn) {
        http_obs_infer_begin(txn, &call->req, m);
        obsreq_set_route(txn->obs, call->route);
        obsreq_set_tenant(txn->obs, call->tenant);
        call->fe.obs = txn->obs; /* until answered (the token-quota stage's note) */
    }
    const char **names = arena_calloc(&call->req.arena, GEN_OUTPUTS, sizeof *names);
    if (!names)
        return error_set(err, 413, "the request does not fit in memory");
    if (!gen_model_is(m) || gen_output_names(m, names) != 0)
        return error_set(err, 404,
                         "The model '%s' does not exist or is not a generative model (GET "
                         "/v1/models lists them)",
                         m->name);
    if (build_inputs(call, &oc->rq, err) != 0)
        return ST_ERROR;
    call->req.output_names = names;
    call->req.noutputs = GEN_OUTPUTS;
    if (!oc->rq.stream)
        return 0;
    if (stream_create(call->tenant, oc->digest, OPENAI_ROUTE_KIND(oc->rq.kind),
                      &call->req.cancelled, &oc->stream, err) != 0)
        return ST_ERROR;
    snprintf(oc->id, sizeof oc->id, "%s-%s", oc->rq.kind == OPENAI_CHAT ? "chatcmpl" : "cmpl",
             stream_id(oc->stream));
    return 0;
}

/* ---- answering ------------------------------------------------------------------- */

/* The txn is answered (or left): the call lets go of it. */
static void release_txn(struct infer_call *call, struct oa_call *oc)
{
    oc->txn->cancel = NULL;
    oc->txn = NULL;
    call->fe.obs = NULL;
}

/* Takes in one response's counts and finish reason. */
static void note_outputs(struct oa_call *oc, const struct gen_outputs *g, bool final)
{
    if (g->prompt_tokens || g->completion_tokens) {
        oc->prompt_tokens = g->prompt_tokens;
        oc->completion_tokens = g->completion_tokens;
    }
    if (g->finish_len) {
        size_t n = g->finish_len < FINISH_MAX ? g->finish_len : FINISH_MAX;
        memcpy(oc->finish, g->finish, n);
        oc->finish[n] = '\0';
    }
    if (final && !oc->finish[0])
        memcpy(oc->finish, "stop", 5); /* ended without saying why */
}

static void emit_whole(struct infer_call *call, const struct serve_response *resp)
{
    struct oa_call *oc = oa_of(call);
    struct http_txn *txn = oc->txn;
    struct gen_outputs g;
    gen_outputs_read(resp->outputs, resp->noutputs, &g);
    note_outputs(oc, &g, resp->final);
    if (!resp->final || !txn)
        return;
    http_obs_infer_done(txn, &call->req);
    obsreq_set_generation(txn->obs, oc->prompt_tokens, oc->completion_tokens, oc->finish);
    if (txn->aborted)
        return; /* end() releases the txn */
    struct openai_result r = {
        .id = oc->id,
        .created = oc->created,
        .model = oc->rq.model,
        .text = g.text,
        .text_len = g.text_len,
        .finish_reason = oc->finish,
        .prompt_tokens = oc->prompt_tokens,
        .completion_tokens = oc->completion_tokens,
    };
    buf_reset(&txn->body);
    openai_completion_json(&txn->body, oc->rq.kind, &r);
    release_txn(call, oc);
    limit_headers_add(txn, &call->ratelimit, &call->tokens);
    http_txn_respond(txn, 200, "application/json"); /* a failed encoding becomes a 500 */
}

/* Appends the JSON in the api's scratch buffer as the stream's next
 * event. */
static void append_event(struct oa_call *oc, bool last)
{
    struct buf *b = &oc->front->scratch;
    if (oc->broken || b->err)
        return;
    if (stream_append(oc->stream, b->data, b->len, last) != 0) {
        /* Over the stream's bound: the sequence is cancelled, an error
         * event ends the stream. */
        oc->broken = true;
        struct openai_error e = {.status = 500, .type = "server_error", .code = "stream_too_long"};
        snprintf(e.message, sizeof e.message,
                 "the stream's events exceed %zu bytes: its sequence was cancelled",
                 STREAM_MAX_BYTES);
        buf_reset(b);
        openai_error_json(b, &e);
        stream_append(oc->stream, b->data, b->len, true);
    }
}

static void append_chunk(struct oa_call *oc, const char *text, size_t len, const char *finish)
{
    struct buf *b = &oc->front->scratch;
    buf_reset(b);
    openai_chunk_json(b, oc->rq.kind, oc->id, oc->created, oc->rq.model, text, len, finish,
                      !oc->first_sent, oc->rq.include_usage);
    oc->first_sent = true;
    append_event(oc, false);
}

/* The events that end a stream: the finish chunk, the usage chunk, [DONE]. */
static void append_end(struct oa_call *oc)
{
    struct buf *b = &oc->front->scratch;
    append_chunk(oc, "", 0, oc->finish);
    if (oc->rq.include_usage) {
        buf_reset(b);
        openai_usage_chunk_json(b, oc->rq.kind, oc->id, oc->created, oc->rq.model,
                                oc->prompt_tokens, oc->completion_tokens);
        append_event(oc, false);
    }
    buf_reset(b);
    buf_puts(b, "[DONE]");
    append_event(oc, true);
}

/* The stream's first event is coming: the POST's txn follows it, its
 * response head with the call's limits. */
static void attach(struct infer_call *call, struct oa_call *oc)
{
    if (oc->attached)
        return;
    oc->attached = true;
    struct http_txn *txn = oc->txn;
    oc->txn = NULL;
    call->fe.obs = NULL; /* the stream's subscriber owns the txn now */
    limit_headers_add(txn, &call->ratelimit, &call->tokens);
    stream_attach_origin(oc->stream, &oc->front->streams, txn);
}

/* Final: the access log fields, and the POST's own timings if it still
 * follows the stream (before the events that end its response). */
static void record_final(struct infer_call *call, const char *finish)
{
    struct oa_call *oc = oa_of(call);
    stream_set_generation(oc->stream, oc->prompt_tokens, oc->completion_tokens, finish);
    struct http_txn *origin = stream_origin_txn(oc->stream);
    if (origin)
        http_obs_infer_done(origin, &call->req);
}

static void emit_stream(struct infer_call *call, const struct serve_response *resp)
{
    struct oa_call *oc = oa_of(call);
    struct gen_outputs g;
    gen_outputs_read(resp->outputs, resp->noutputs, &g);
    note_outputs(oc, &g, resp->final);
    attach(call, oc);
    stream_set_generation(oc->stream, oc->prompt_tokens, oc->completion_tokens, NULL);
    if (g.text_len)
        append_chunk(oc, g.text, g.text_len, NULL);
    if (!resp->final)
        return;
    record_final(call, oc->finish);
    append_end(oc);
}

static void oa_emit(struct infer_call *call, const struct serve_response *resp)
{
    if (oa_of(call)->rq.stream)
        emit_stream(call, resp);
    else
        emit_whole(call, resp);
}

static void oa_fail(struct infer_call *call, const struct error *err)
{
    struct oa_call *oc = oa_of(call);
    const char *code = err->status == 404 ? "model_not_found" : NULL;
    struct http_txn *txn = oc->txn;
    if (txn) {
        /* Nothing went out yet: an ordinary answer. */
        if (call->submitted)
            http_obs_infer_done(txn, &call->req);
        obsreq_set_tenant(txn->obs, call->tenant);
        if (call->req.model && gen_model_is(call->req.model))
            obsreq_set_generation(txn->obs, call->req.usage_prompt_tokens,
                                  call->req.usage_completion_tokens, NULL);
        if (txn->aborted)
            return; /* end() releases the txn */
        release_txn(call, oc);
        openai_http_call_error(txn, call, err, code);
        return;
    }
    if (!oc->stream || !oc->attached)
        return;
    record_final(call, NULL);
    struct openai_error e;
    openai_error_from(&e, err, code);
    buf_reset(&oc->front->scratch);
    openai_error_json(&oc->front->scratch, &e);
    append_event(oc, true);
}

static void oa_end(struct infer_call *call)
{
    struct oa_call *oc = oa_of(call);
    struct http_txn *txn = oc->txn;
    if (txn) {
        release_txn(call, oc);
        if (txn->aborted) {
            http_txn_respond(txn, 0, NULL); /* the client left before the answer */
        } else {
            struct error err;
            error_set(&err, 500, "the request ended without a response");
            openai_http_call_error(txn, call, &err, NULL);
        }
    }
    if (oc->stream)
        stream_call_ended(oc->stream);
    oc->stream = NULL;
}

static const struct serve_frontend fe_openai = {
    .name = "openai",
    .decode = oa_decode,
    .emit = oa_emit,
    .fail = oa_fail,
    .end = oa_end,
};

/* ---- starting ------------------------------------------------------------------ */

static const char *oa_header(const struct infer_call *call, const char *name, size_t *len)
{
    const struct oa_call *oc = oa_of(call);
    const struct http_header *h = oc->txn ? http1_header(&oc->txn->req, name) : NULL;
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

static void refuse(struct http_txn *txn, int status, const char *msg)
{
    struct error err;
    error_set(&err, status, "%s", msg);
    openai_http_error(txn, &err, NULL);
}

void openai_call_start(struct openai_front *front, struct http_txn *txn, enum openai_kind kind)
{
    const char *body = txn->req.body ? txn->req.body : "";
    size_t len = (size_t)txn->req.body_len;
    struct infer_call *call = serve_call_new(front->serve, &fe_openai, NULL, len);
    if (!call)
        return refuse(txn, 503, "out of memory");
    struct oa_call *oc = arena_calloc(&call->req.arena, 1, sizeof *oc);
    if (!oc) {
        serve_call_abandon(call);
        return refuse(txn, 413, "the request does not fit in memory");
    }
    struct openai_error perr;
    if (openai_request_parse(&call->req.arena, kind, body, len, &oc->rq, &perr) != 0) {
        openai_http_send(txn, &perr, 0);
        serve_call_abandon(call);
        return;
    }
    oc->front = front;
    oc->txn = txn;
    oc->created = (uint64_t)time(NULL);
    if (oc->rq.stream) {
        sha256(body, len, oc->digest);
    } else {
        char hex[REQUEST_ID_MAX + 1];
        request_id_resolve(NULL, 0, hex);
        snprintf(oc->id, sizeof oc->id, "%s-%.32s", kind == OPENAI_CHAT ? "chatcmpl" : "cmpl", hex);
    }
    call->fe.ctx = oc;
    call->fe.owner = front;
    call->model_name = oc->rq.model;
    call->version = NULL;
    call->header = oa_header;
    call->request_id = txn->request_id;
    call->received_ns = txn->start_ns;
    call->mode = oc->rq.stream ? SERVE_MANY_RESPONSES : SERVE_SINGLE_DECOUPLED;
    /* Until the stream has a subscriber, a client that goes away cancels
     * the call (it never learnt the stream's id). */
    txn->cancel = &call->req.cancelled;
    serve_call_start(call);
}
