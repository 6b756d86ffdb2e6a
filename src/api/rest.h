/*
 * rest: the KServe v2 / Open Inference Protocol REST front end. Routes an
 * HTTP request to its handler, decodes infer requests, submits them to the
 * model's scheduler and answers when they complete.
 *
 * Routes (the /versions/{v} segment is optional after /v2/models/{m}):
 *   GET  /v2                          server metadata
 *   GET  /v2/health/live, /ready      liveness, readiness
 *   GET  /v2/models/{m}               model metadata
 *   GET  /v2/models/{m}/ready         model readiness
 *   POST /v2/models/{m}/infer         inference
 *   GET  /v2/models/{m}/config        effective model configuration
 *   POST /v2/repository/index         models of the repository and their state
 *   POST /v2/repository/models/{m}/load, /unload   (explicit control mode)
 *   GET  /v2/models[/{m}[/versions/{v}]]/stats     statistics (api/obs_http.h)
 *   GET  /dashboard, /dashboard/data               live dashboard (api/obs_http.h)
 *   GET/POST /v2/logging, /v2[/models/{m}]/trace/setting   (api/rest_obs.h)
 * Every response carries x-request-id (api/rest_obs.h).
 * HEAD is accepted wherever GET is.
 *
 * All functions run on the I/O loop thread that owns the connection.
 */
#ifndef INFERD_API_REST_H
#define INFERD_API_REST_H

#include <stdatomic.h>
#include <stdint.h>

#include "api/obs_http.h"
#include "base/pool_use.h"
#include "http/server.h"
#include "model/repository.h"
#include "net/loop.h"

struct rest_infer;

/* One per I/O thread. */
struct rest_api {
    struct repository *repo;
    struct loop *loop;
    uint32_t inflight; /* infer requests submitted and not yet completed */
    bool draining;     /* shutting down: readiness answers 503 */
    /* Infer requests answered (any status); read by other threads for stats. */
    atomic_uint_fast64_t infer_requests;
    /* Called when inflight drops to 0 (used by shutdown to know that no
     * completion will be posted to this loop any more). */
    void (*on_idle)(void *arg);
    void *idle_arg;
    const struct obs_sources *obs; /* what the dashboard shows besides models */
    struct rest_infer *free_infers; /* reusable request objects, trimmed by rest_api_tick */
    uint32_t nfree_infers;
    struct pool_use infer_use;
};

/* The http_handler_fn for the HTTP server; `app` is a struct rest_api. */
void rest_handle(void *app, struct http_txn *txn);
/* About once a second on the loop thread: every POOL_USE_PERIOD_MS, frees
 * the pooled request objects the last period did not need (base/pool_use.h). */
void rest_api_tick(struct rest_api *api, uint64_t now_ms);
/* Frees the reusable objects; call after the loop has stopped. */
void rest_api_free(struct rest_api *api);

#endif
