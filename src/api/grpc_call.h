/*
 * grpc_call: what the three parts of the gRPC front end share (internal to
 * src/api/grpc_*.c; the public interface is api/grpc.h):
 *   grpc_transport.c  call objects, request messages (api/grpc_framing.h),
 *                     status trailers, the access log of calls, the api,
 *                     and the native wire: gRPC on HTTP/2 streams
 *   grpc_web.c        the gRPC-Web wire: the same calls on an HTTP
 *                     exchange (HTTP/1.1 or HTTP/2, api/grpc_web.h)
 *   grpc_infer.c      ModelInfer and ModelStreamInfer on the serving
 *                     pipeline (serve/call.h)
 *   grpc_admin.c      health, metadata, configuration, statistics,
 *                     repository, trace and log settings, and grpc.health.v1
 *                     RPCs
 *   grpc_shm.c        Triton's shared-memory RPCs (serve/shm.h)
 *   grpc_routing.c    inferd.RoutingService (policy/routing.h)
 * All on the loop thread that owns the api.
 */
#ifndef INFERD_API_GRPC_CALL_H
#define INFERD_API_GRPC_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/grpc.h"
#include "api/grpc_framing.h"
#include "grpc_service.pb-c.h"
#include "obs/request.h"
#include "policy/auth.h"
#include "serve/call.h"

/* gRPC message prefix: compressed flag + 4-byte big-endian length. */
#define FRAME_HEADER GRPC_FRAME_HEADER

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16,
};

enum method_id {
    M_SERVER_LIVE,
    M_SERVER_READY,
    M_MODEL_READY,
    M_SERVER_METADATA,
    M_MODEL_METADATA,
    M_MODEL_INFER,
    M_MODEL_STREAM_INFER,
    M_MODEL_CONFIG,
    M_MODEL_STATISTICS,
    M_REPOSITORY_INDEX,
    M_REPOSITORY_LOAD,
    M_REPOSITORY_UNLOAD,
    M_TRACE_SETTING,
    M_LOG_SETTINGS,
    M_HEALTH_CHECK,
    M_HEALTH_WATCH,
    M_SYSTEM_SHM_STATUS,
    M_SYSTEM_SHM_REGISTER,
    M_SYSTEM_SHM_UNREGISTER,
    M_CUDA_SHM_STATUS,
    M_CUDA_SHM_REGISTER,
    M_CUDA_SHM_UNREGISTER,
    M_ROUTING_GET,
    M_ROUTING_SET,
};

struct method {
    const char *path;
    enum method_id id;
    bool client_stream; /* each request message is handled as it arrives */
    /* What the call needs (policy/auth.h), checked when its headers
     * arrive; ModelInfer's stage checks the model's infer scope. */
    enum auth_class auth;
};

#define SVC "/inference.GRPCInferenceService/"
extern const struct method grpc_methods[];
extern const size_t grpc_nmethods;

/* What carries a call: native gRPC on an HTTP/2 stream (grpc_transport.c)
 * or gRPC-Web on an HTTP exchange (grpc_web.c). Everything else about a
 * call (methods, framing of request messages, status mapping, limits,
 * deadlines, auth, cancellation, the access log) is the same code. conn is
 * the wire's object (call->conn), valid until the wire's close reaches
 * grpc_call_closed(). */
struct grpc_wire {
    enum obs_protocol proto; /* for the access log and the request metrics */
    /* Request metadata (case-insensitive, first match; NULL if absent). */
    const char *(*header)(const void *conn, const char *name, size_t *len);
    const char *(*method)(const void *conn, size_t *len);
    const char *(*path)(const void *conn, size_t *len);
    size_t (*peer)(const void *conn, char *out, size_t cap);
    /* The initial metadata h[0..n) (content-type first), once, before the
     * first message. 0 or -1. */
    int (*respond_headers)(void *conn, const struct h2_header *h, size_t n);
    /* One framed message (prefix included). 0, or -1 when the client does
     * not read (the output queue is over its limit) or is gone. */
    int (*write)(void *conn, const void *data, size_t len);
    /* The trailers t[0..n), ending the call; without respond_headers
     * before, a trailers-only answer (t then starts with the initial
     * metadata). 0 or -1. */
    int (*finish)(void *conn, const struct h2_header *t, size_t n);
    /* finish failed: abort the exchange; NULL when finish always ends it. */
    void (*abort)(void *conn);
    /* finish ends the exchange itself (conn is gone once it returns): the
     * call is closed right after; else the wire reports the close later. */
    bool finish_closes;
};

/* One RPC: its exchange on a wire (an HTTP/2 stream, a gRPC-Web request)
 * and the work started for it. Reference counted: the open exchange holds
 * one reference, each infer call or
 * repository command in flight one, and each transport callback one for
 * its duration (so that a stream closing inside a callback never frees
 * the call under it). */
struct grpc_call {
    struct grpc_api *api;
    const struct grpc_wire *wire;
    void *conn; /* the wire's object (an h2_stream, a gRPC-Web exchange); NULL once closed */
    const struct method *method;
    uint32_t refs;
    uint64_t received_ns;
    uint64_t deadline_ns; /* from grpc-timeout; 0 = none */
    /* Incoming message framing. */
    struct grpc_reader rd;
    struct buf msg;
    uint32_t nmessages;
    bool client_ended;
    bool headers_sent;
    bool finished;             /* trailers sent (or the stream closed): nothing more to send */
    uint32_t inflight;         /* infer calls and repository commands */
    struct infer_call *infers; /* infer calls in flight, for cancellation */
    /* Health/Watch: the watched service and the last status sent. */
    char service[256];
    int watch_status;
    bool watching;
    /* Access log and tracing (obs/request.h). The call's x-request-id (for
     * ModelStreamInfer the stream's; each message has its own observer). */
    char request_id[REQUEST_ID_MAX + 1];
    size_t request_id_len;
    /* ModelInfer: the version that answers and why (obs/route_kind.h),
     * sent as x-inferd-model-version / x-inferd-route in the initial
     * metadata; route NULL until the call resolved a model. */
    char model_version[24];
    const char *route;
    /* ModelInfer under a rate limit (serve/call.h's call->ratelimit), as
     * text for ratelimit-limit, -remaining and -reset in the initial
     * metadata (the trailers of a trailers-only answer); "" = none. */
    char ratelimit_limit[12], ratelimit_remaining[12], ratelimit_reset[12];
    /* A 429 or 503 that said when to try again: retry-after (seconds) and
     * grpc-retry-pushback-ms in the trailers; "" = none. */
    char retry_after[12], retry_pushback_ms[24];
    struct obsreq *obs;               /* other calls: the call's observer, NULL once ended */
    char tenant[AUTH_TENANT_MAX + 1]; /* its key's tenant (policy/auth.h); "" = none */
    bool obs_begun;                   /* call->obs was decided */
    int http_status;                  /* HTTP equivalent of the status the call ended with */
    uint64_t bytes_out;               /* response message bytes sent */
    /* gRPC-Web (grpc_web.c): the response is base64 text; after the
     * client left, the exchange still to end and the task that ends it. */
    bool web_text;
    struct http_txn *web_txn;
    struct loop_task web_end;
    struct grpc_call *prev, *next; /* api->calls */
    struct grpc_call *next_free;
};

/* ---- grpc_transport.c ---- */

/* A new call on conn (the wire's object), created when the request's
 * metadata is complete: method, request id, auth and grpc-timeout are
 * decided here (an error answers the call at once). Returns the call with
 * one reference held for the open exchange (dropped by grpc_call_closed)
 * and one for the caller (to drop with grpc_call_drop once it is done with
 * the call, which may have ended already), or NULL when out of memory
 * (nothing was sent). set_user stores the call
 * in conn before anything can be answered. */
struct grpc_call *grpc_call_open(struct grpc_api *api, const struct grpc_wire *wire, void *conn,
                                 void (*set_user)(void *conn, struct grpc_call *call));
/* Request bytes of the call (gRPC framing), as they arrive. */
void grpc_call_data(struct grpc_call *call, const uint8_t *data, size_t len);
/* The client has sent everything. */
void grpc_call_request_end(struct grpc_call *call);
/* The exchange is gone (answered, or the client left): work in flight is
 * cancelled; drops the exchange's reference. */
void grpc_call_closed(struct grpc_call *call);

void grpc_call_hold(struct grpc_call *call);
void grpc_call_drop(struct grpc_call *call);
bool grpc_call_is_stream(const struct grpc_call *call);
/* An observer for one request of the call (obs/request.h); NULL when
 * nobody wants it or the stream is gone. */
struct obsreq *grpc_obs_begin(struct grpc_call *call, const char *id, size_t id_len,
                              uint64_t bytes_in, uint64_t start_ns);
/* ModelStreamInfer: the observer of one request message (request id = its
 * `id` when valid, else a new one). */
struct obsreq *grpc_message_obs_begin(struct grpc_call *call, const char *msg_id, uint64_t bytes_in,
                                      uint64_t start_ns);
/* Ends the observer *o of one message answered with a response of n bytes
 * (n < 0: none could be sent). */
void grpc_message_obs_end(struct grpc_call *call, struct obsreq **o, int http_status, int64_t n);
void grpc_call_obs_end(struct grpc_call *call, int http_status);
/* Ends the call with a gRPC status (and its HTTP equivalent for the log). */
void grpc_call_finish(struct grpc_call *call, int code, const char *msg);
/* Ends the call with the gRPC status matching an inferd (HTTP) error. */
void grpc_call_fail(struct grpc_call *call, int http_status, const char *msg);
/* Queues msg as one gRPC message; returns its size, or -1 (the call was
 * ended: response too large, or the client does not read). */
int64_t grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg);
/* A unary response: the message, then status OK. */
void grpc_call_reply(struct grpc_call *call, const ProtobufCMessage *msg);
/* Unpacks a request message into the api's scratch arena; answers the call
 * itself on failure (NULL). */
void *grpc_call_unpack(struct grpc_call *call, const ProtobufCMessageDescriptor *d,
                       const uint8_t *data, size_t len);

/* ---- grpc_infer.c ---- */

/* Starts ModelInfer (the call's one message) or one request message of a
 * ModelStreamInfer stream. */
void grpc_infer_start(struct grpc_call *call, const uint8_t *data, size_t len);
/* ModelStreamInfer: a failed request is one response with error_message
 * (and its id), and the stream goes on. Ends *o with http_status. */
void grpc_stream_error(struct grpc_call *call, struct obsreq **o, int http_status,
                       const char *model, const char *version, const char *id, const char *msg);
/* A stream ends with OK once the client half-closed and every request was
 * answered; when the server drains, with UNAVAILABLE. */
void grpc_stream_maybe_end(struct grpc_call *call);
/* The stream closed: work still in flight for it is cancelled. */
void grpc_infer_cancel_all(struct grpc_call *call);

/* ---- grpc_admin.c ---- */

void grpc_admin_dispatch(struct grpc_call *call, const uint8_t *data, size_t len);
/* Health/Watch: sends the watched service's status if it changed. */
void grpc_watch_update(struct grpc_call *call);
/* Runs the Watch poll timer only while some stream watches. */
void grpc_watch_timer_update(struct grpc_api *api);

/* ---- grpc_shm.c ---- */

/* SystemSharedMemoryStatus/Register/Unregister on the thread's registry
 * (an empty name: every region); CudaSharedMemory*: INVALID_ARGUMENT. */
void grpc_shm_dispatch(struct grpc_call *call, const uint8_t *data, size_t len);
void grpc_watch_on_timer(struct loop_watch *w, uint32_t events);

/* ---- grpc_routing.c ---- */

/* inferd.RoutingService/ModelRoutingGet and ModelRoutingSet: the model's
 * routing table as JSON text (policy/routing.h). */
void grpc_routing_dispatch(struct grpc_call *call, const uint8_t *data, size_t len);

#endif
