/*
 * rest: the KServe v2 / Open Inference Protocol REST front end. Routes an
 * HTTP request to its handler; inference goes through the serving
 * pipeline (api/rest_infer.h, serve/call.h).
 *
 * Routes (the /versions/{v} segment is optional after /v2/models/{m}):
 *   GET  /v2                          server metadata
 *   GET  /v2/health/live, /ready      liveness, readiness
 *   GET  /v2/models/{m}               model metadata
 *   GET  /v2/models/{m}/ready         model readiness
 *   POST /v2/models/{m}/infer         inference (api/rest_infer.h)
 *   POST /v2/models/{m}/generate, /generate_stream  Triton's generate extension
 *   GET  /v2/models/{m}/config        effective model configuration
 *   POST /v2/repository/index         models of the repository and their state
 *   POST /v2/repository/models/{m}/load, /unload   (explicit control mode)
 *   GET  /v2/models[/{m}[/versions/{v}]]/stats     statistics (api/obs_http.h)
 *   GET  /dashboard, /dashboard/data               live dashboard (api/obs_http.h)
 *   GET  /playground                               try models by hand (api/playground.h)
 *   GET/PUT /v2/models/{m}/routing                 routing table (policy/routing.h)
 *   GET/POST /v2/logging, /v2[/models/{m}]/trace/setting   (api/rest_obs.h)
 *   POST /v2/systemsharedmemory/region/{n}/register, GET .../status,
 *   POST .../unregister (with or without /region/{n})  (api/rest_shm.h);
 *   /v2/cudasharedmemory/...: 400, not supported on this build
 *   /v1/models, /v1/completions, /v1/chat/completions, /v1/streams/{id}
 *                                  the OpenAI-compatible API (api/openai.h)
 * POST /<service>/<method> with a gRPC-Web content type: the gRPC calls of
 * api/grpc.h framed for browsers (api/grpc_web.h).
 * Every response carries x-request-id (api/rest_obs.h), and the CORS
 * headers when the request's Origin is allowed; preflights are answered
 * (api/cors.h).
 * With API keys configured (policy/auth.h), each route is checked before
 * its handler runs: 401 (with WWW-Authenticate) or 403, JSON error body;
 * infer, generate and generate_stream are checked by the pipeline.
 * HEAD is accepted wherever GET is.
 *
 * All functions run on the I/O loop thread that owns the connection.
 */
#ifndef INFERD_API_REST_H
#define INFERD_API_REST_H

#include <stdbool.h>
#include <stdint.h>

#include "api/cors.h"
#include "api/grpc.h"
#include "api/obs_http.h"
#include "policy/auth.h"
#include "policy/routing.h"
#include "api/openai.h"
#include "api/rest_infer.h"
#include "http/server.h"
#include "model/repository.h"
#include "serve/call.h"

/* One per I/O thread. */
struct rest_api {
    struct repository *repo;
    struct serve_thread *serve; /* the thread's pipeline (infer and repository calls) */
    bool draining;              /* shutting down: readiness answers 503 */
    const struct obs_sources *obs; /* what the dashboard shows besides models */
    struct routing *routing;       /* the routing tables (GET/PUT .../routing) */
    struct auth *auth;             /* API keys (policy/auth.h); NULL: nothing checked */
    /* The thread's gRPC calls, for gRPC-Web requests (api/grpc_web.h);
     * NULL: gRPC-Web content types are routed as any request. */
    struct grpc_api *grpc;
    const struct cors *cors; /* --cors-allow-origin (api/cors.h); NULL: none */
    struct rest_infer_api infer;
    struct openai_api openai; /* /v1/... */
};

/* Fills api for the thread whose pipeline is `serve`. */
void rest_api_init(struct rest_api *api, struct serve_thread *serve,
                   const struct obs_sources *obs, uint64_t sse_keepalive_ms);
/* The http_handler_fn for the HTTP server; `app` is a struct rest_api. */
void rest_handle(void *app, struct http_txn *txn);
/* About once a second on the loop thread (SSE keep-alive comments, the
 * streams' grace period). */
void rest_api_tick(struct rest_api *api, uint64_t now_ms);
/* Frees what the api holds; call after the loop has stopped. */
void rest_api_free(struct rest_api *api);

#endif
