/*
 * request (obsreq): what the access log and the tracer record about one
 * request, independent of the protocol front end (REST over HTTP/1.1 or
 * h2, gRPC).
 *
 * A front end, on the thread that owns the request:
 *   1. request_id_resolve(): the client's x-request-id when valid, else a
 *      new one; always, even with logging and tracing off (the id goes back
 *      in every response).
 *   2. obsreq_begin(): counts the request (obs_protocol_requests), then
 *      returns NULL when neither the access log nor the
 *      tracer wants the request (then every other call is a no-op on NULL
 *      and nothing is allocated); else an object from the thread's pool.
 *   3. when the model is known: obsreq_attach(o, req, model) before
 *      sched_submit() (decides sampling with the model's trace settings and
 *      copies the trace context into req->trace so that the batch span can
 *      link to it); obsreq_set_model() for requests that are not submitted.
 *   4. obsreq_infer_done(o, req) when the completed request is back,
 *      before sched_release() and before the model reference is dropped:
 *      copies timings, batch size and the input summary, and starts the
 *      response-encode span.
 *   5. obsreq_traceparent() for the response header (when sampled);
 *      for an error answer, obsreq_set_error(o, msg) with the message the
 *      client gets (error body, grpc-message); then obsreq_end(o, status,
 *      bytes_out) once the response is committed: writes the access log
 *      line, submits the spans and returns o to the pool. Exactly once per
 *      obsreq_begin() that returned non-NULL.
 *
 * Not thread-safe per object: begin/attach/done/end on the owning thread
 * (the worker only reads req->trace, filled before submit).
 */
#ifndef INFERD_OBS_REQUEST_H
#define INFERD_OBS_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/infer.h"
#include "obs/route_kind.h"
#include "obs/trace.h"

#define REQUEST_ID_MAX 128
/* Longest tenant name the access log keeps (policy/auth.h's). */
#define OBSREQ_TENANT_MAX 64
/* Longest finish reason the access log keeps ("stop", "length", "cancelled"). */
#define OBSREQ_FINISH_MAX 15

/* The protocol of a request, as the access log, the spans (inferd.protocol)
 * and the request metrics name it: "h1" (HTTP/1.1), "h1.0", "h2", "h3"
 * (HTTP/3 over QUIC), "grpc", "grpc-web" (on HTTP/1.1, h2 or h3 alike). */
enum obs_protocol {
    OBS_PROTO_HTTP1,
    OBS_PROTO_HTTP10,
    OBS_PROTO_H2,
    OBS_PROTO_GRPC,
    OBS_PROTO_H3,
    OBS_PROTO_GRPC_WEB,
    OBS_PROTO_COUNT
};
/* The name of p ("h1", ...). */
const char *obs_protocol_name(enum obs_protocol p);
/* Requests of protocol p begun since the start (every obsreq_begin(),
 * whether or not the request is logged or traced): the metric
 * inferd_requests_total{protocol}. Any thread. */
uint64_t obs_protocol_requests(enum obs_protocol p);

/* Writes the request id into out (NUL-terminated) and returns its length:
 * `in` when it is 1..REQUEST_ID_MAX printable ASCII characters (0x21-0x7e),
 * else 32 random lower-case hex digits. in may be NULL. */
size_t request_id_resolve(const char *in, size_t len, char out[REQUEST_ID_MAX + 1]);

/* Writes the client's address "ip:port" ("[ip6]:port") into out; returns
 * its length (0 if unknown). */
typedef size_t (*obs_peer_fn)(const void *ctx, char *out, size_t cap);

struct obsreq_start {
    enum obs_protocol proto;
    const char *method;          /* e.g. "POST"; gRPC: "POST" */
    size_t method_len;
    const char *endpoint;        /* path, e.g. /v2/models/m/infer or /inference.GRPCInferenceService/ModelInfer */
    size_t endpoint_len;
    const char *request_id;      /* from request_id_resolve() */
    size_t request_id_len;
    const char *traceparent;     /* header or metadata value; NULL if absent */
    size_t traceparent_len;
    const char *tracestate;      /* NULL if absent */
    size_t tracestate_len;
    uint64_t bytes_in;           /* request body (message) bytes */
    uint64_t start_ns;           /* clock_now_ns() when the request arrived */
    obs_peer_fn peer;            /* may be NULL */
    const void *peer_ctx;
};

struct obsreq;

struct obsreq *obsreq_begin(const struct obsreq_start *s);
/* Records the model (name, version string, sha256 hex); decides sampling
 * again when the model has its own trace settings. */
void obsreq_set_model(struct obsreq *o, const char *name, const char *version,
                      const char *sha256);
/* set_model + copies the trace context into req->trace (before submit). */
void obsreq_attach(struct obsreq *o, struct infer_request *req, const char *name,
                   const char *version, const char *sha256);
/* The request body's size, once known: a request handed over on its
 * head (http/txn.h) began with 0. */
void obsreq_set_bytes_in(struct obsreq *o, uint64_t bytes_in);
/* The rule that chose the model version (access log `route`, span
 * attribute inferd.route); infer requests only. */
void obsreq_set_route(struct obsreq *o, enum route_kind route);
/* The authenticated tenant (policy/auth.h): the access log's `tenant`
 * field and the span attribute inferd.tenant, present only on requests
 * that have one. tenant may be NULL or
 * "" (none); copied, cut to OBSREQ_TENANT_MAX bytes. */
void obsreq_set_tenant(struct obsreq *o, const char *tenant);
/* A generative model's request (gen/, docs/openai.md): the access log's
 * prompt_tokens, completion_tokens and finish_reason fields, present only
 * on requests that set them. finish_reason NULL or "": the response ended
 * before the sequence did (JSON null, text "-"). */
void obsreq_set_generation(struct obsreq *o, uint32_t prompt_tokens, uint32_t completion_tokens,
                           const char *finish_reason);
/* The tokens a token budget reserved for the request (policy/tokenquota.h:
 * prompt + max_tokens): the access log's tokens_reserved field, present
 * only when a quota rule matched (tokens > 0). */
void obsreq_set_tokens_reserved(struct obsreq *o, uint64_t tokens);
void obsreq_infer_done(struct obsreq *o, const struct infer_request *req);
/* The response's traceparent value (our server span) when the request is
 * traced: writes TRACEPARENT_LEN chars + NUL into out and returns true. */
bool obsreq_traceparent(const struct obsreq *o, char out[TRACEPARENT_LEN + 1]);
/* The message of an error answer, for the access log's `error` field
 * (copied, cut to ERROR_MSG_MAX - 1 bytes); msg may be NULL (no error). */
void obsreq_set_error(struct obsreq *o, const char *msg);
void obsreq_end(struct obsreq *o, int status, uint64_t bytes_out);

/* Frees the pooled objects of every thread (at exit, after the front ends
 * stopped). */
void obsreq_pool_free(void);

#endif
