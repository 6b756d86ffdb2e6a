/*
 * rest: the KServe v2 / Open Inference Protocol REST front end and
 * Triton's REST extensions: every path under /v2, routed here by the HTTP
 * entry (api/http_api.h) once the path's API key was checked. Inference
 * goes through the serving pipeline (api/rest/infer.h, serve/call.h).
 *
 * Routes (the /versions/{v} segment is optional after /v2/models/{m}):
 *   GET  /v2                          server metadata
 *   GET  /v2/health/live, /ready      liveness, readiness
 *   GET  /v2/models/{m}               model metadata
 *   GET  /v2/models/{m}/ready         model readiness
 *   POST /v2/models/{m}/infer         inference (api/rest/infer.h)
 *   POST /v2/models/{m}/generate, /generate_stream  Triton's generate extension
 *   GET  /v2/models/{m}/config        effective model configuration
 *   POST /v2/repository/index         models of the repository and their state
 *   POST /v2/repository/models/{m}/load, /unload   (explicit control mode)
 *   GET  /v2/models[/{m}[/versions/{v}]]/stats     statistics (api/rest/stats.h)
 *   GET/PUT /v2/models/{m}/routing                 routing table (policy/routing.h)
 *   GET  /v2/usage                                 token metering (api/usage_http.h)
 *   GET/POST /v2/logging, /v2[/models/{m}]/trace/setting   (api/rest/logging.h)
 *   POST /v2/systemsharedmemory/region/{n}/register, GET .../status,
 *   POST .../unregister (with or without /region/{n})  (api/rest/shm.h);
 *   /v2/cudasharedmemory/...: 400, not supported on this build
 * HEAD is accepted wherever GET is; 405 with Allow for another method.
 *
 * All functions run on the I/O loop thread that owns the connection.
 */
#ifndef INFERD_API_REST_H
#define INFERD_API_REST_H

#include <stdbool.h>
#include <stdint.h>

#include "api/http_path.h"
#include "api/obs_sources.h"
#include "api/rest/infer.h"
#include "http/txn.h"
#include "model/repository.h"
#include "policy/auth.h"
#include "policy/routing.h"
#include "serve/call.h"

/* One per I/O thread. */
struct rest_api {
    struct repository *repo;
    struct serve_thread *serve;    /* the thread's pipeline (infer and repository calls) */
    bool draining;                 /* shutting down: readiness answers 503 */
    const struct obs_sources *obs; /* the usage endpoint's meter */
    struct routing *routing;       /* the routing tables (GET/PUT .../routing) */
    struct rest_infer_api infer;
};

/* Fills api for the thread whose pipeline is `serve`. */
void rest_api_init(struct rest_api *api, struct serve_thread *serve, const struct obs_sources *obs,
                   uint64_t sse_keepalive_ms);
/* The API-key class a /v2 path needs (policy/auth.h). Only the exact
 * infer paths are left to the pipeline's auth stage (AUTH_IN_PIPELINE); a
 * path no handler takes needs `read`. */
enum auth_class rest_route_class(const struct http_path *p);
/* Answers a request whose first segment is v2; 404 for a path no handler
 * takes. */
void rest_route(struct rest_api *api, struct http_txn *txn, const struct http_path *p);
/* About once a second on the loop thread (SSE keep-alive comments). */
void rest_api_tick(struct rest_api *api, uint64_t now_ms);
/* Frees what the api holds; call after the loop has stopped. */
void rest_api_free(struct rest_api *api);

#endif
