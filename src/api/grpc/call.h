/*
 * call: a gRPC call and what the transport offers the services (internal
 * to src/api/grpc/; the public interface is api/grpc/grpc.h):
 *   transport.c   call objects, request messages (api/grpc/framing.h),
 *                 status trailers, the access log of calls, the api, the
 *                 method lookup in the services' tables, and the native
 *                 wire: gRPC on HTTP/2 streams (implements this header)
 *   web.c         the gRPC-Web wire: the same calls on an HTTP exchange
 *                 (HTTP/1.1 or HTTP/2, api/grpc/web.h)
 * and the services, each a table of methods (struct grpc_service), listed
 * in services.c:
 *   infer.c       ModelInfer and ModelStreamInfer on the serving pipeline
 *                 (serve/call.h)
 *   admin.c       health, metadata, configuration, statistics,
 *                 repository, trace and log settings, and grpc.health.v1
 *   shm.c         Triton's shared-memory RPCs (serve/shm.h)
 *   routing.c     inferd.RoutingService (policy/routing.h)
 * The services call the transport (grpc_call_*); the transport calls them
 * only through their method tables, so the dependency is one way.
 * All on the loop thread that owns the api.
 */
#ifndef INFERD_API_GRPC_CALL_H
#define INFERD_API_GRPC_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/grpc/grpc.h"
#include "api/grpc/framing.h"
#include "base/inflate.h"
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

struct grpc_api;
struct grpc_call;

/* One RPC: its path, its kind, the API-key class its headers must pass,
 * and what the service does with it. Each service (infer.c, admin.c,
 * shm.c, routing.c) defines the table of its methods; api/grpc/services.c
 * lists the services, and the transport finds a call's method there by
 * path: it calls a service only through these pointers, never by name. */
struct grpc_method {
    const char *path;
    bool client_stream; /* each request message is handled as it arrives */
    /* What the call needs (policy/auth.h), checked when its headers
     * arrive; ModelInfer's stage checks the model's infer scope. */
    enum auth_class auth;
    /* The request message: a unary call's one message once the request
     * ended; each message of a client stream as it arrives (the api's
     * scratch arena is reset after each). */
    void (*on_message)(struct grpc_call *call, const uint8_t *data, size_t len);
    /* A client stream: the client half-closed. NULL: nothing to do. */
    void (*on_client_end)(struct grpc_call *call);
    /* The server began to drain, with the call open. NULL: the call goes
     * on to its end. */
    void (*on_drain)(struct grpc_call *call);
    /* The exchange closed (answered, or the client left), before its
     * reference is dropped: undo what the method holds (work in flight is
     * cancelled, a watch ends). NULL: nothing to undo. */
    void (*on_close)(struct grpc_call *call);
};

/* A service: a table of methods, and its state in each thread's api. */
struct grpc_service {
    const struct grpc_method *methods;
    size_t nmethods;
    /* At grpc_api_init, on the loop thread: 0, or -errno after undoing
     * its own work. NULL: none. */
    int (*init)(struct grpc_api *api);
    /* At grpc_api_free, if init succeeded. NULL: none. */
    void (*free)(struct grpc_api *api);
};

#define GRPC_KSERVE_SERVICE "/inference.GRPCInferenceService/"

/* What carries a call: native gRPC on an HTTP/2 stream (transport.c)
 * or gRPC-Web on an HTTP exchange (web.c). Everything else about a
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
     * first message. 0 or ST_ERROR. */
    int (*respond_headers)(void *conn, const struct h2_header *h, size_t n);
    /* One framed message (prefix included). 0, or ST_ERROR when the client does
     * not read (the output queue is over its limit) or is gone. */
    int (*write)(void *conn, const void *data, size_t len);
    /* The trailers t[0..n), ending the call; without respond_headers
     * before, a trailers-only answer (t then starts with the initial
     * metadata). 0 or ST_ERROR. */
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
    const struct grpc_method *method; /* NULL: unknown path */
    uint32_t refs;
    uint64_t received_ns;
    uint64_t deadline_ns; /* from grpc-timeout; 0 = none */
    /* Incoming message framing. */
    struct grpc_reader rd;
    struct buf msg;
    enum inflate_format encoding; /* of compressed messages (rd.compressed_ok) */
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
    /* gRPC-Web (web.c): the response is base64 text; after the
     * client left, the exchange still to end and the task that ends it. */
    bool web_text;
    struct http_txn *web_txn;
    struct loop_task web_end;
    struct grpc_call *prev, *next; /* api->calls */
    struct grpc_call *next_free;
};

/* ---- transport.c ---- */

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

#endif
