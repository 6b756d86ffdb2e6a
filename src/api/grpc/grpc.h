/*
 * grpc: the KServe v2 / Open Inference Protocol gRPC front end
 * (proto/grpc_service.proto, package inference, service
 * GRPCInferenceService) and the standard health service
 * (proto/health.proto, grpc.health.v1.Health), on the HTTP/2 streams of
 * http/h2.h.
 *
 * RPCs: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
 * ModelInfer, ModelStreamInfer (bidirectional; several requests in flight
 * on one stream, each response carrying its request's id, errors per
 * request in error_message), ModelConfig, ModelStatistics, RepositoryIndex,
 * RepositoryModelLoad, RepositoryModelUnload, SystemSharedMemoryStatus,
 * SystemSharedMemoryRegister, SystemSharedMemoryUnregister (serve/shm.h;
 * CudaSharedMemory* answer INVALID_ARGUMENT: no CUDA on this build);
 * Health/Check and Health/Watch; inferd's own extension
 * inferd.RoutingService (proto/inferd_routing.proto: ModelRoutingGet,
 * ModelRoutingSet on policy/routing.h, the routing tables as JSON text).
 * Anything else is UNIMPLEMENTED.
 *
 * API keys (policy/auth.h): each method's class is checked from the
 * metadata as soon as the headers arrive (UNAUTHENTICATED, PERMISSION_DENIED
 * before any message is read); a ModelStreamInfer stream needs a valid
 * key, and each of its requests, like ModelInfer, the model's infer scope
 * (the pipeline's auth stage).
 *
 * gRPC framing: each message is a 1-byte compressed flag (set → UNIMPLEMENTED,
 * compression is not supported), a 4-byte big-endian length and the
 * protobuf bytes. A message longer than max_message_bytes is answered
 * RESOURCE_EXHAUSTED as soon as its length is known, without buffering it.
 * Status travels in the grpc-status / grpc-message (percent-encoded)
 * trailers; an error before any response message is a trailers-only
 * response. Error mapping from inferd's HTTP statuses: 400 INVALID_ARGUMENT,
 * 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409
 * FAILED_PRECONDITION, 413 and 429 RESOURCE_EXHAUSTED, 499 CANCELLED, 501
 * status 12 (not implemented), 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED,
 * other 5xx INTERNAL.
 * The grpc-timeout header becomes the deadline of the call's infer requests
 * in the scheduler (timed out in the queue → never run, DEADLINE_EXCEEDED).
 *
 * Observability (obs/request.h): the x-request-id metadata (or a new id)
 * goes back in every response's initial metadata, with traceparent when
 * the call is traced. Each call is one access-log line and request span
 * (endpoint = its :path, status = the HTTP equivalent of its gRPC status),
 * logged when its status is sent or, if the client reset it, when nothing
 * of it is in flight any more (status 0). On ModelStreamInfer each request
 * message is its own line and span (request id = its `id`); the stream
 * itself only when it ends with an error status.
 *
 * Lifecycle of a call (struct grpc_call, one per stream, on the loop
 * thread): created by on_headers → request messages arrive through on_data
 * → answered (synchronously, or when its infer requests or repository
 * commands complete) → on_close. A call whose stream closes while work is
 * still queued for it marks that work cancelled (the scheduler drops
 * cancelled requests without running them) and is freed when the last of
 * it comes back.
 *
 * Inference goes through the serving pipeline (serve/call.h); the code is
 * split by responsibility (api/grpc/call.h): the transport, and services
 * (inference, admin, shared memory, routing) that it finds by method path.
 *
 * All functions run on the I/O loop thread that owns the api, except where
 * noted.
 */
#ifndef INFERD_API_GRPC_H
#define INFERD_API_GRPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/pool_use.h"
#include "http/h2.h"
#include "model/repository.h"
#include "net/loop.h"
#include "serve/call.h"

/* Default of --grpc-max-message-bytes. */
#define GRPC_DEFAULT_MAX_MESSAGE_BYTES (64u << 20)

struct auth;
struct grpc_call;
struct grpc_service;
struct routing;

/* One per I/O thread. */
struct grpc_api {
    struct repository *repo;
    struct loop *loop;
    struct serve_thread *serve; /* the thread's pipeline (infer and repository calls) */
    /* The routing tables (policy/routing.h) of inferd.RoutingService; set
     * after grpc_api_init (NULL: those RPCs answer UNIMPLEMENTED). */
    struct routing *routing;
    /* API keys (policy/auth.h), checked per method; NULL: nothing checked. */
    struct auth *auth;
    uint64_t max_message_bytes; /* largest request message accepted */
    bool draining;              /* shutting down: readiness false, streams end */
    /* The stream application to put into struct http_server_config.grpc. */
    struct h2_stream_app app;

    /* The services whose methods the calls find (api/grpc/services.h);
     * the first nservices_ready were set up and are freed with the api. */
    const struct grpc_service *const *services;
    size_t nservices, nservices_ready;

    struct grpc_call *calls; /* every call whose stream is open */
    /* The Health service's (admin.c): Health/Watch calls among them, and
     * the timerfd that polls health for them while nwatchers > 0. */
    uint32_t nwatchers;
    struct loop_watch timer;
    struct grpc_call *free_calls; /* reusable objects, trimmed by grpc_api_tick */
    uint32_t nfree_calls;
    struct pool_use call_use;
    struct arena scratch; /* small messages: decoded requests, built responses */
    struct buf out;       /* one serialized response message */
    struct buf web_in;    /* gRPC-Web: a decoded text request body */
    struct buf web_out;   /* gRPC-Web: one text-encoded response frame */
};

/* About once a second on the loop thread: every POOL_USE_PERIOD_MS, frees
 * the pooled objects the last period did not need (base/pool_use.h). */
void grpc_api_tick(struct grpc_api *api, uint64_t now_ms);

/* Fills api (and api->app) for the thread whose pipeline is `serve`,
 * answering the methods of services[0..nservices) (the array outlives the
 * api; api/grpc/services.h has inferd's). Returns 0 or -errno; either way
 * grpc_api_free releases what was set up. */
int grpc_api_init(struct grpc_api *api, struct serve_thread *serve, uint64_t max_message_bytes,
                  const struct grpc_service *const *services, size_t nservices);
/* Shutdown began: readiness turns false; Health/Watch streams get
 * NOT_SERVING and end with UNAVAILABLE; ModelStreamInfer streams end
 * (UNAVAILABLE) once their in-flight requests are answered. */
void grpc_api_drain(struct grpc_api *api);
/* Frees the reusable objects; call after the loop has stopped. */
void grpc_api_free(struct grpc_api *api);

/* Maps an inferd error status (HTTP) to a gRPC status code. */
int grpc_status_from_http(int status);
/* Parses a grpc-timeout value ("<1-8 digits><H|M|S|m|u|n>") into
 * nanoseconds (saturated). Returns 0, or ST_ERROR if malformed. */
int grpc_timeout_parse(const char *value, size_t len, uint64_t *out_ns);
/* Percent-encodes msg for grpc-message into out (always NUL-terminated,
 * truncated to fit). */
void grpc_message_encode(const char *msg, char *out, size_t size);

#endif
