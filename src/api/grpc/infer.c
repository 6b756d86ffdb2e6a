/*
 * grpc_infer: ModelInfer and ModelStreamInfer as front ends of the serving
 * pipeline (serve/call.h). Each request message becomes one infer call:
 * the message is unpacked here (its model name and version select the
 * model), decoded against the model by infer_pb, and answered with one
 * ModelInferResponse (ModelInfer), or one ModelStreamInferResponse per
 * response (ModelStreamInfer, where a decoupled model may send many, each
 * with Triton's triton_final_response parameter; the empty final response
 * is sent only when the request asks for it with
 * triton_enable_empty_final_response, as in Triton).
 */
#include "api/grpc/services.h"

#include <stdio.h>
#include <string.h>

#include "api/grpc/infer_pb.h"
#include "base/clock.h"

/* Requests in flight on one ModelStreamInfer stream; more are refused
 * (RESOURCE_EXHAUSTED) until responses have been sent. */
#define STREAM_MAX_INFLIGHT 256

static struct grpc_call *call_of(const struct infer_call *ic)
{
    return ic->fe.ctx;
}

static const Inference__ModelInferRequest *message_of(const struct infer_call *ic)
{
    return ic->fe.request;
}

/* Where the observer of an infer call lives: the message's own on a
 * ModelStreamInfer stream, else the call's. */
static struct obsreq **infer_obs(struct infer_call *ic)
{
    struct grpc_call *call = call_of(ic);
    return grpc_call_is_stream(call) ? &ic->fe.obs : &call->obs;
}

/* Ends the observer *o of one message answered with a response of n bytes
 * (n < 0: none could be sent). */
static void message_obs_end(struct grpc_call *call, struct obsreq **o, int http_status, int64_t n)
{
    if (n < 0)
        http_status = call->conn ? call->http_status : 0;
    obsreq_end(*o, http_status, n < 0 ? 0 : (uint64_t)n);
    *o = NULL;
}

/* ModelStreamInfer: a failed request is one response with error_message
 * (and its id), and the stream goes on. Its HTTP status, which the message
 * has no field for, is the response's parameter inferd_http_status (a
 * gateway in front answers its own client with it; docs/grpc.md). Ends *o
 * with http_status. */
static void stream_error(struct grpc_call *call, struct obsreq **o, int http_status,
                         const char *model, const char *version, const char *id, const char *msg)
{
    Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    ir.model_name = (char *)model;
    ir.model_version = (char *)version;
    ir.id = (char *)id;
    Inference__InferParameter status = INFERENCE__INFER_PARAMETER__INIT;
    status.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    status.int64_param = http_status;
    Inference__ModelInferResponse__ParametersEntry entry =
        INFERENCE__MODEL_INFER_RESPONSE__PARAMETERS_ENTRY__INIT;
    entry.key = (char *)"inferd_http_status";
    entry.value = &status;
    Inference__ModelInferResponse__ParametersEntry *entries[] = {&entry};
    ir.n_parameters = 1;
    ir.parameters = entries;
    Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    r.error_message = (char *)msg;
    r.infer_response = &ir;
    obsreq_set_error(*o, msg);
    message_obs_end(call, o, http_status, grpc_call_send(call, &r.base));
}

/* A stream ends with OK once the client half-closed and every request was
 * answered; when the server drains, with UNAVAILABLE. */
static void stream_maybe_end(struct grpc_call *call)
{
    if (call->inflight || call->finished || !call->conn)
        return;
    if (call->client_ended)
        grpc_call_finish(call, GRPC_OK, NULL);
    else if (call->api->draining)
        grpc_call_finish(call, GRPC_UNAVAILABLE, "server is shutting down");
}

/* The exchange closed: work still queued for it must not run (the
 * scheduler drops cancelled requests). */
static void cancel_all(struct grpc_call *call)
{
    for (struct infer_call *ic = call->infers; ic; ic = ic->fe.next)
        atomic_store_explicit(&ic->req.cancelled, true, memory_order_relaxed);
}

/* ---- the front end ------------------------------------------------------------ */

/* A request parameter that is a bool (absent: false). */
static bool bool_parameter(const Inference__ModelInferRequest *msg, const char *key)
{
    for (size_t i = 0; i < msg->n_parameters; i++) {
        const Inference__ModelInferRequest__ParametersEntry *e = msg->parameters[i];
        if (e->key && strcmp(e->key, key) == 0 && e->value &&
            e->value->parameter_choice_case ==
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            return e->value->bool_param;
    }
    return false;
}

static int infer_decode(struct infer_call *ic, const struct model *m, struct error *err)
{
    const Inference__ModelInferRequest *msg = message_of(ic);
    obsreq_attach(*infer_obs(ic), &ic->req, m->name, m->version_str, m->sha256);
    obsreq_set_route(*infer_obs(ic), ic->route);
    obsreq_set_tenant(*infer_obs(ic), ic->tenant);
    ic->fe.flag = bool_parameter(msg, "triton_enable_empty_final_response");
    return infer_pb_decode(&ic->req, &ic->shm, m, msg, err);
}

static bool answerable(const struct grpc_call *call)
{
    return call->conn && !call->finished;
}

/* ModelInfer: the rate limit's state on every answer to a call that came
 * under one, and which version answers and why on every answer to a call
 * that resolved a model (rate limits come before resolve), for the
 * response's initial metadata (ratelimit-*, x-inferd-model-version,
 * x-inferd-route: REST's headers). ModelStreamInfer sends its metadata
 * before any request is routed: each response's model_version tells the
 * version. */
static void note_route(struct grpc_call *call, const struct infer_call *ic)
{
    if (grpc_call_is_stream(call))
        return;
    if (ic->req.model) {
        snprintf(call->model_version, sizeof call->model_version, "%s",
                 ic->req.model->version_str);
        call->route = route_kind_name(ic->route);
    }
    if (ic->ratelimit.set) {
        snprintf(call->ratelimit_limit, sizeof call->ratelimit_limit, "%u", ic->ratelimit.limit);
        snprintf(call->ratelimit_remaining, sizeof call->ratelimit_remaining, "%u",
                 ic->ratelimit.remaining);
        snprintf(call->ratelimit_reset, sizeof call->ratelimit_reset, "%u",
                 ic->ratelimit.reset_s);
    }
}

/* A 429 or 503 that says when to try again: its delay in the trailers
 * (retry-after in seconds, as REST's header, and gRPC's own pushback). */
static void note_retry(struct grpc_call *call, const struct error *err)
{
    if ((err->status != 429 && err->status != 503) || !err->retry_after_s)
        return;
    snprintf(call->retry_after, sizeof call->retry_after, "%u", err->retry_after_s);
    snprintf(call->retry_pushback_ms, sizeof call->retry_pushback_ms, "%llu",
             (unsigned long long)err->retry_after_s * 1000u);
}

static void infer_emit(struct infer_call *ic, const struct serve_response *resp)
{
    struct grpc_call *call = call_of(ic);
    struct infer_request *req = &ic->req;
    bool decoupled = req->model->sched_cfg.decoupled;
    if (resp->final)
        obsreq_infer_done(*infer_obs(ic), req);
    if (!answerable(call))
        return;
    if (decoupled && resp->final && !resp->noutputs && !ic->fe.flag) {
        /* The model ended without a last response; Triton sends the empty
         * one only when asked. */
        message_obs_end(call, &ic->fe.obs, 200, 0);
        return;
    }
    enum infer_pb_final final = !decoupled ? INFER_PB_NOT_DECOUPLED
                                : resp->final ? INFER_PB_FINAL
                                              : INFER_PB_MORE;
    Inference__ModelInferResponse *r;
    if (infer_pb_response(req, &ic->shm, resp->outputs, resp->noutputs, final, &req->arena,
                          &r) != 0) {
        if (grpc_call_is_stream(call))
            stream_error(call, &ic->fe.obs, 500, req->model->name, req->model->version_str,
                         req->id ? req->id : "", "out of memory encoding the response");
        else {
            note_route(call, ic);
            grpc_call_fail(call, 500, "out of memory encoding the response");
        }
        return;
    }
    if (!grpc_call_is_stream(call)) {
        note_route(call, ic);
        grpc_call_reply(call, &r->base);
        return;
    }
    Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    sr.infer_response = r;
    int64_t n = grpc_call_send(call, &sr.base);
    if (resp->final)
        message_obs_end(call, &ic->fe.obs, 200, n);
    else if (n < 0)
        atomic_store_explicit(&req->cancelled, true, memory_order_relaxed);
}

static void infer_fail(struct infer_call *ic, const struct error *err)
{
    struct grpc_call *call = call_of(ic);
    const Inference__ModelInferRequest *msg = message_of(ic);
    if (ic->submitted)
        obsreq_infer_done(*infer_obs(ic), &ic->req);
    if (!answerable(call))
        return;
    obsreq_set_tenant(*infer_obs(ic), ic->tenant);
    if (grpc_call_is_stream(call))
        stream_error(call, &ic->fe.obs, err->status, msg->model_name, msg->model_version, msg->id,
                     err->msg);
    else {
        note_route(call, ic);
        note_retry(call, err);
        grpc_call_fail(call, err->status, err->msg);
    }
}

static void infer_end(struct infer_call *ic)
{
    struct grpc_call *call = call_of(ic);
    if (ic->fe.prev)
        ic->fe.prev->fe.next = ic->fe.next;
    else
        call->infers = ic->fe.next;
    if (ic->fe.next)
        ic->fe.next->fe.prev = ic->fe.prev;
    call->inflight--;
    if (grpc_call_is_stream(call))
        stream_maybe_end(call);
    struct obsreq **o = infer_obs(ic);
    if (*o) { /* not answered: the client left, or the stream ended first */
        obsreq_end(*o, call->conn ? call->http_status : 0, 0);
        *o = NULL;
    }
    grpc_call_drop(call);
}

static const struct serve_frontend fe_grpc_infer = {
    .name = "grpc-infer",
    .decode = infer_decode,
    .emit = infer_emit,
    .fail = infer_fail,
    .end = infer_end,
};

static const char *metadata(const struct infer_call *ic, const char *name, size_t *len)
{
    struct grpc_call *call = call_of(ic);
    return call->conn ? call->wire->header(call->conn, name, len) : NULL;
}

/* Starts ModelInfer (the call's one message) or one request message of a
 * ModelStreamInfer stream. */
static void infer_start(struct grpc_call *call, const uint8_t *data, size_t len)
{
    struct grpc_api *api = call->api;
    bool stream = grpc_call_is_stream(call);
    struct infer_call *ic = serve_call_new(api->serve, &fe_grpc_infer, call, len);
    if (!ic) {
        if (stream) {
            struct obsreq *o = grpc_message_obs_begin(call, NULL, len, clock_now_ns());
            stream_error(call, &o, 503, "", "", "", "out of memory");
        } else {
            grpc_call_fail(call, 503, "out of memory");
        }
        return;
    }
    struct error err;
    Inference__ModelInferRequest *msg = NULL;
    int rc = infer_pb_unpack(&ic->req.arena, data, len, &msg, &err);
    if (stream)
        ic->fe.obs = grpc_message_obs_begin(call, msg ? msg->id : NULL, len, ic->received_ns);
    if (rc == 0 && stream && call->inflight >= STREAM_MAX_INFLIGHT)
        rc = error_set(&err, 429, "too many requests in flight on this stream (%d)",
                       STREAM_MAX_INFLIGHT);
    if (rc != 0) {
        /* Answered here: the pipeline never saw a request it could route. */
        if (stream)
            stream_error(call, &ic->fe.obs, err.status, msg ? msg->model_name : "",
                         msg ? msg->model_version : "", msg ? msg->id : "", err.msg);
        else
            grpc_call_fail(call, err.status, err.msg);
        serve_call_abandon(ic);
        return;
    }
    ic->fe.request = msg;
    ic->model_name = msg->model_name;
    ic->version = msg->model_version;
    ic->header = metadata;
    ic->request_id = call->request_id;
    ic->deadline_ns = call->deadline_ns;
    ic->mode = stream ? SERVE_MANY_RESPONSES : SERVE_ONE_RESPONSE;
    ic->fe.next = call->infers;
    if (call->infers)
        call->infers->fe.prev = ic;
    call->infers = ic;
    call->inflight++;
    grpc_call_hold(call);
    serve_call_start(ic);
}

/* ModelStreamInfer: one request message. */
static void stream_message(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->api->draining) {
        struct obsreq *o = grpc_message_obs_begin(call, NULL, len, clock_now_ns());
        stream_error(call, &o, 503, "", "", "", "server is shutting down");
        return;
    }
    infer_start(call, data, len);
}

static const struct grpc_method infer_methods[] = {
    {.path = GRPC_KSERVE_SERVICE "ModelInfer",
     .auth = AUTH_IN_PIPELINE,
     .on_message = infer_start,
     .on_close = cancel_all},
    {.path = GRPC_KSERVE_SERVICE "ModelStreamInfer",
     .client_stream = true,
     .auth = AUTH_ANY_KEY,
     .on_message = stream_message,
     .on_client_end = stream_maybe_end,
     .on_drain = stream_maybe_end,
     .on_close = cancel_all},
};

const struct grpc_service grpc_infer_service = {
    .methods = infer_methods,
    .nmethods = sizeof infer_methods / sizeof infer_methods[0],
};
