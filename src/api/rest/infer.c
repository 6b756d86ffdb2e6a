#include "api/rest/infer.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/auth_http.h"
#include "api/gen_outputs.h"
#include "api/rest/generate_json.h"
#include "api/rest/infer_json.h"
#include "api/limit_headers.h"
#include "api/http_obs.h"
#include "base/clock.h"
#include "base/inflate.h"
#include "http/sse.h"
#include "preprocess/prep.h"

/* Largest JSON text of one SSE event. */
#define SSE_EVENT_MAX ((size_t)64 << 20)

static struct http_txn *call_txn(const struct infer_call *call)
{
    return call->fe.ctx;
}

static const char *body_of(const struct http_txn *txn)
{
    return txn->req.body ? txn->req.body : "";
}

/* ---- decoding ------------------------------------------------------------------ */

/* The body of a call started on the request's head (serve_frontend.body):
 * call->fe.flag says decode waits for it, so that on_body resumes it. */
/* A body sent with Content-Encoding gzip or deflate (Triton's clients'
 * request compression) replaced by its decompressed bytes, in the call's
 * arena: what the decoders read from then on. Another coding is 415. */
static int decompress_body(struct infer_call *call, struct http_txn *txn, struct error *err)
{
    const struct http_header *ce = http1_header(&txn->req, "content-encoding");
    if (!ce || (ce->value_len == 8 && strncasecmp(ce->value, "identity", 8) == 0))
        return 0;
    int f = inflate_format_of(ce->value, ce->value_len);
    if (f < 0)
        return error_set(err, 415,
                         "Content-Encoding '%.*s' is not supported (gzip, deflate and identity are)",
                         (int)(ce->value_len < 64 ? ce->value_len : 64), ce->value);
    const struct rest_infer_api *api = call->fe.owner;
    struct buf plain;
    buf_init(&plain, api->max_body);
    if (inflate_all((enum inflate_format)f, (const uint8_t *)body_of(txn),
                    (size_t)txn->req.body_len, &plain, err) != 0) {
        buf_free(&plain);
        if (err->status == 413)
            return error_set(err, 413,
                             "the request body is larger than %llu bytes once decompressed "
                             "(--max-body-bytes)",
                             (unsigned long long)api->max_body);
        return ST_ERROR;
    }
    /* Decode then sets the arena's ceiling for a body of this length. */
    if (call->req.arena.max < call->req.arena.used + plain.len + 32)
        call->req.arena.max = call->req.arena.used + plain.len + 32;
    char *body = arena_alloc(&call->req.arena, plain.len + 1);
    if (body) {
        memcpy(body, plain.data, plain.len);
        body[plain.len] = '\0';
        txn->req.body = body;
        txn->req.body_len = plain.len;
    }
    buf_free(&plain);
    return body ? 0 : error_set(err, 413, "the decompressed request body does not fit in memory");
}

static int rest_body(struct infer_call *call, size_t *body_len, struct error *err)
{
    struct http_txn *txn = call_txn(call);
    if (txn->body_pending) {
        call->fe.flag = true;
        return ST_AGAIN;
    }
    if (txn->body_status)
        return error_set(err, txn->body_status, "%s", txn->body_error);
    if (decompress_body(call, txn, err) != 0)
        return ST_ERROR;
    *body_len = (size_t)txn->req.body_len;
    return ST_OK;
}

/* The transport is done with the body (complete, failed, or the client
 * left): decode, if it waits, goes on. */
static void on_body(struct http_txn *txn, void *ctx)
{
    (void)txn;
    struct infer_call *call = ctx;
    if (call->fe.flag) {
        call->fe.flag = false;
        serve_call_resume(call);
    }
}

/* Triton's binary tensor data extension: the length of the JSON part, or
 * -1 without the header. Several copies of the header would be ambiguous. */
static int header_length(const struct http_txn *txn, int64_t *out, struct error *err)
{
    static const char name[] = "Inference-Header-Content-Length";
    const struct http_header *h = NULL;
    *out = -1;
    for (uint32_t i = 0; i < txn->req.nheaders; i++) {
        const struct http_header *x = &txn->req.headers[i];
        if (x->name_len != sizeof name - 1 || strncasecmp(x->name, name, sizeof name - 1) != 0)
            continue;
        if (h)
            return error_set(err, 400, "more than one Inference-Header-Content-Length header");
        h = x;
    }
    if (!h)
        return 0;
    return infer_json_header_length(h->value, h->value_len, (size_t)txn->req.body_len, out, err);
}

/* The call's line and span: its model, route and tenant; call->fe.obs
 * is the txn's observer until the answer (the token-quota stage notes its
 * reservation there). */
static void begin_obs(struct http_txn *txn, struct infer_call *call, const struct model *m)
{
    http_obs_infer_begin(txn, &call->req, m);
    obsreq_set_route(txn->obs, call->route);
    obsreq_set_tenant(txn->obs, call->tenant);
    call->fe.obs = txn->obs;
}

static int infer_decode(struct infer_call *call, const struct model *m, struct error *err)
{
    struct http_txn *txn = call_txn(call);
    int64_t header_len;
    begin_obs(txn, call, m);
    if (header_length(txn, &header_len, err) != 0)
        return ST_ERROR;
    /* An image, a sound or a text as the whole body (preprocess/prep.h). */
    const struct http_header *ct = http1_header(&txn->req, "content-type");
    int raw = ct && header_len < 0 ? prep_decode_raw(&call->req, m, ct->value, ct->value_len,
                                                     body_of(txn), (size_t)txn->req.body_len, err)
                                   : 0;
    if (raw != 0)
        return raw < 0 ? ST_ERROR : ST_OK;
    return infer_json_decode(&call->req, &call->shm, m, body_of(txn), (size_t)txn->req.body_len,
                             header_len, err);
}

static int generate_decode(struct infer_call *call, const struct model *m, struct error *err)
{
    struct http_txn *txn = call_txn(call);
    const char *text;
    size_t len;
    begin_obs(txn, call, m);
    if (generate_json_to_infer(&call->req.arena, m, body_of(txn), (size_t)txn->req.body_len, &text,
                               &len, err) != 0)
        return ST_ERROR;
    return infer_json_decode(&call->req, NULL, m, text, len, -1, err);
}

/* ---- answering ------------------------------------------------------------------- */

/* The state of the rate limit the call came under (docs/limits.md), in
 * both vocabularies (IETF draft and OpenAI's), and of its token budget. */
static void add_ratelimit_headers(struct http_txn *txn, const struct infer_call *call)
{
    limit_headers_add(txn, &call->ratelimit, &call->tokens);
    if (!call->ratelimit.set)
        return;
    char v[12];
    snprintf(v, sizeof v, "%u", call->ratelimit.limit);
    http_txn_add_header(txn, "RateLimit-Limit", v);
    snprintf(v, sizeof v, "%u", call->ratelimit.remaining);
    http_txn_add_header(txn, "RateLimit-Remaining", v);
    snprintf(v, sizeof v, "%u", call->ratelimit.reset_s);
    http_txn_add_header(txn, "RateLimit-Reset", v);
}

/* The rate limit's state on every answer to a call that came under one,
 * and which version answered and why (docs/traffic.md) on every answer to
 * a call that resolved a model (rate limits come before resolve). */
static void add_route_headers(struct http_txn *txn, const struct infer_call *call)
{
    add_ratelimit_headers(txn, call);
    if (!call->req.model)
        return;
    http_txn_add_header(txn, "x-inferd-model-version", call->req.model->version_str);
    http_txn_add_header(txn, "x-inferd-route", route_kind_name(call->route));
}

static void unlink_stream(struct infer_call *call)
{
    struct rest_infer_api *api = call->fe.owner;
    if (!call->fe.started)
        return;
    if (call->fe.prev)
        call->fe.prev->fe.next = call->fe.next;
    else if (api->streams == call)
        api->streams = call->fe.next;
    if (call->fe.next)
        call->fe.next->fe.prev = call->fe.prev;
    call->fe.prev = call->fe.next = NULL;
}

/* The txn is answered: the call lets go of it. */
static void detach(struct infer_call *call)
{
    call_txn(call)->cancel = NULL;
    call->fe.ctx = NULL;
    call->fe.obs = NULL;
}

/* The event stream is over: the call lets go of it and the txn ends. */
static void end_stream(struct infer_call *call, struct http_txn *txn)
{
    unlink_stream(call);
    call->fe.started = false;
    detach(call);
    http_txn_stream_end(txn);
}

static void infer_emit(struct infer_call *call, const struct serve_response *resp)
{
    (void)resp; /* an ordinary model's one response: the request's outputs */
    struct http_txn *txn = call_txn(call);
    http_obs_infer_done(txn, &call->req);
    if (txn->aborted)
        return; /* the client is gone: end() only releases the txn */
    size_t json_len;
    infer_json_encode(&call->req, &call->shm, &txn->body, &json_len);
    detach(call);
    add_route_headers(txn, call);
    if (json_len && !txn->body.err) {
        char value[24];
        snprintf(value, sizeof value, "%zu", json_len);
        http_txn_add_header(txn, "Inference-Header-Content-Length", value);
        http_txn_respond(txn, 200, "application/octet-stream");
    } else {
        http_txn_respond(txn, 200, "application/json"); /* a failed encoding becomes a 500 */
    }
}

/* A generative model's response (api/gen_outputs.h): its token counts and
 * finish reason for the access log. */
static void note_generation(struct http_txn *txn, const struct infer_call *call,
                            const struct serve_response *resp)
{
    if (!gen_model_is(call->req.model) || !resp->noutputs)
        return;
    struct gen_outputs g;
    char finish[OBSREQ_FINISH_MAX + 1];
    gen_outputs_read(resp->outputs, resp->noutputs, &g);
    size_t n = g.finish_len < OBSREQ_FINISH_MAX ? g.finish_len : OBSREQ_FINISH_MAX;
    memcpy(finish, g.finish, n);
    finish[n] = '\0';
    obsreq_set_generation(txn->obs, g.prompt_tokens, g.completion_tokens, finish);
}

static void generate_emit(struct infer_call *call, const struct serve_response *resp)
{
    struct http_txn *txn = call_txn(call);
    note_generation(txn, call, resp);
    if (!txn->aborted && (resp->noutputs || !call->fe.seq)) {
        buf_reset(&txn->body);
        generate_json_response(&txn->body, call->req.model, resp->outputs, resp->noutputs);
        call->fe.seq = 1; /* the body holds a response */
    }
    if (!resp->final)
        return;
    http_obs_infer_done(txn, &call->req);
    if (txn->aborted)
        return;
    detach(call);
    add_route_headers(txn, call);
    http_txn_respond(txn, 200, "application/json");
}

static void stream_emit(struct infer_call *call, const struct serve_response *resp)
{
    struct rest_infer_api *api = call->fe.owner;
    struct http_txn *txn = call_txn(call);
    note_generation(txn, call, resp);
    if (resp->final)
        http_obs_infer_done(txn, &call->req);
    if (txn->aborted)
        return;
    if (!call->fe.started) {
        call->fe.started = true;
        call->fe.next = api->streams;
        if (api->streams)
            api->streams->fe.prev = call;
        api->streams = call;
        add_route_headers(txn, call);
        sse_begin(txn);
    }
    if (resp->noutputs || !resp->final) {
        buf_reset(&api->scratch);
        generate_json_response(&api->scratch, call->req.model, resp->outputs, resp->noutputs);
        call->fe.time_ns = clock_now_ns();
        if (api->scratch.err ||
            sse_event(txn, ++call->fe.seq, api->scratch.data, api->scratch.len) != 0)
            /* The client does not read (or left): the model stops. */
            atomic_store_explicit(&call->req.cancelled, true, memory_order_relaxed);
    }
    /* The stream's end is written by rest_end, after the pipeline has
     * counted the request: a client that reads the end of the stream and
     * then asks for statistics finds the request in them. */
}

static void rest_fail(struct infer_call *call, const struct error *err)
{
    struct http_txn *txn = call_txn(call);
    if (call->submitted)
        http_obs_infer_done(txn, &call->req);
    if (!call->fe.started && call->req.model && gen_model_is(call->req.model))
        /* What the engine used before the failure (0 and 0 if it never ran). */
        obsreq_set_generation(txn->obs, call->req.usage_prompt_tokens,
                              call->req.usage_completion_tokens, NULL);
    if (txn->aborted)
        return;
    if (call->fe.started) {
        /* The event stream already said 200: the error is its last event. */
        struct rest_infer_api *api = call->fe.owner;
        buf_reset(&api->scratch);
        http_error_body(&api->scratch, err->msg);
        sse_event(txn, 0, api->scratch.data, api->scratch.len);
        end_stream(call, txn);
        return;
    }
    add_route_headers(txn, call);
    obsreq_set_tenant(txn->obs, call->tenant);
    auth_http_challenge(txn, err);
    limit_headers_retry(txn, err->status, err->retry_after_s, &call->tokens);
    detach(call);
    http_txn_error(txn, err->status, err->msg);
}

static void rest_end(struct infer_call *call)
{
    struct http_txn *txn = call_txn(call);
    unlink_stream(call);
    if (!txn)
        return; /* answered */
    detach(call);
    /* The client left before the answer: ending the txn only releases it. */
    if (txn->streaming)
        http_txn_stream_end(txn);
    else if (txn->aborted)
        http_txn_respond(txn, 0, NULL);
    else
        http_txn_error(txn, 500, "the request ended without a response");
}

static const struct serve_frontend fe_infer = {
    .name = "rest-infer",
    .decode = infer_decode,
    .body = rest_body,
    .emit = infer_emit,
    .fail = rest_fail,
    .end = rest_end,
};

static const struct serve_frontend fe_generate = {
    .name = "rest-generate",
    .decode = generate_decode,
    .body = rest_body,
    .emit = generate_emit,
    .fail = rest_fail,
    .end = rest_end,
};

static const struct serve_frontend fe_generate_stream = {
    .name = "rest-generate-stream",
    .decode = generate_decode,
    .body = rest_body,
    .emit = stream_emit,
    .fail = rest_fail,
    .end = rest_end,
};

/* ---- starting ------------------------------------------------------------------ */

static const char *txn_header(const struct infer_call *call, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&call_txn(call)->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

void rest_infer_start(struct rest_infer_api *api, struct http_txn *txn, enum rest_infer_kind kind,
                      const char *name, const char *version)
{
    static const struct serve_frontend *const fes[] = {
        [REST_INFER] = &fe_infer,
        [REST_GENERATE] = &fe_generate,
        [REST_GENERATE_STREAM] = &fe_generate_stream,
    };
    static const enum serve_mode modes[] = {
        [REST_INFER] = SERVE_ONE_RESPONSE,
        [REST_GENERATE] = SERVE_SINGLE_DECOUPLED,
        [REST_GENERATE_STREAM] = SERVE_MANY_RESPONSES,
    };
    /* On the head (txn->body_pending) the body's length is what the client
     * announced, if it did; decode sets the ceiling again. */
    size_t body_len = (size_t)(txn->body_pending ? txn->req.content_length : txn->req.body_len);
    struct infer_call *call = serve_call_new(api->serve, fes[kind], txn, body_len);
    if (!call) {
        http_txn_add_header(txn, "Retry-After", "1");
        http_txn_error(txn, 503, "out of memory");
        return;
    }
    if (txn->body_pending) {
        /* name and version are the caller's (its stack): a call that
         * waits for its body outlives them. */
        const char *v = version;
        name = arena_strndup(&call->req.arena, name, strlen(name));
        version = v ? arena_strndup(&call->req.arena, v, strlen(v)) : NULL;
        if (!name || (v && !version)) {
            serve_call_abandon(call);
            http_txn_add_header(txn, "Retry-After", "1");
            http_txn_error(txn, 503, "out of memory");
            return;
        }
        txn->on_body = on_body;
        txn->body_ctx = call;
    }
    call->fe.owner = api;
    call->model_name = name;
    call->version = version;
    call->header = txn_header;
    call->request_id = txn->request_id;
    call->received_ns = txn->start_ns;
    call->mode = modes[kind];
    /* A client that goes away cancels the call: queued work is dropped, a
     * streaming model stops at its next response. */
    txn->cancel = &call->req.cancelled;
    serve_call_start(call);
}

void rest_infer_tick(struct rest_infer_api *api, uint64_t now_ns)
{
    uint64_t idle_ns = api->sse_keepalive_ms * 1000000u;
    for (struct infer_call *call = api->streams; call; call = call->fe.next) {
        struct http_txn *txn = call_txn(call);
        /* fe.time_ns is read from the clock when an event goes out, and
         * may be later than the loop's now: no subtraction. */
        if (now_ns < call->fe.time_ns + idle_ns || txn->aborted)
            continue;
        call->fe.time_ns = now_ns;
        if (sse_comment(txn, "keep-alive") != 0)
            atomic_store_explicit(&call->req.cancelled, true, memory_order_relaxed);
    }
}

void rest_infer_init(struct rest_infer_api *api, struct serve_thread *serve,
                     uint64_t sse_keepalive_ms)
{
    memset(api, 0, sizeof *api);
    api->serve = serve;
    api->sse_keepalive_ms = sse_keepalive_ms ? sse_keepalive_ms : REST_SSE_KEEPALIVE_MS;
    buf_init(&api->scratch, SSE_EVENT_MAX);
    api->max_body = 64ull << 20;
}

void rest_infer_free(struct rest_infer_api *api)
{
    buf_free(&api->scratch);
}
