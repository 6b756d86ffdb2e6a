/*
 * http_api: the entry of every request on the HTTP port (HTTP/1.1, HTTP/2
 * and HTTP/3): it stamps the exchange (request id, access log, tracing:
 * api/http_obs.h), answers CORS preflights (api/cors.h), checks the API
 * key of the path (policy/auth.h) and hands the exchange to its front end:
 *
 *   POST /<service>/<method> with a gRPC-Web content type
 *                       the gRPC calls, framed for browsers (api/grpc/web.h)
 *   /v1/...             the OpenAI-compatible API (api/openai/openai.h),
 *                       which checks keys itself (refusals in OpenAI's shape)
 *   /playground         try models by hand (api/pages/playground.h), static,
 *                       served without a key
 *   /dashboard[/data]   the live dashboard (api/pages/dashboard.h)
 *   /v2/...             KServe v2 REST and Triton's extensions
 *                       (api/rest/rest.h)
 * Anything else: 404. Every response carries x-request-id, and the CORS
 * headers when the request's Origin is allowed. HEAD is accepted wherever
 * GET is.
 *
 * The front ends below do not include one another; only this file knows
 * them all (scripts/check_layers.py holds it).
 *
 * One struct http_api per I/O thread; every function runs on that thread.
 */
#ifndef INFERD_API_HTTP_API_H
#define INFERD_API_HTTP_API_H

#include <stdbool.h>
#include <stdint.h>

#include "api/cors.h"
#include "api/grpc/grpc.h"
#include "api/obs_sources.h"
#include "api/openai/openai.h"
#include "api/rest/rest.h"
#include "http/txn.h"
#include "policy/auth.h"
#include "serve/call.h"

struct http_api {
    struct rest_api rest;     /* /v2 */
    struct openai_api openai; /* /v1 */
    struct auth *auth;        /* API keys (policy/auth.h); NULL: nothing checked */
    /* The thread's gRPC calls, for gRPC-Web requests; NULL: gRPC-Web
     * content types are routed as any request. */
    struct grpc_api *grpc;
    const struct cors *cors;       /* --cors-allow-origin; NULL: none */
    const struct obs_sources *obs; /* what the dashboard shows besides models */
};

/* Fills api for the thread whose pipeline is `serve`; the caller sets
 * auth, grpc, cors and the rest's routing afterwards. */
void http_api_init(struct http_api *api, struct serve_thread *serve, const struct obs_sources *obs,
                   uint64_t sse_keepalive_ms);
/* The http_handler_fn of the HTTP server; `app` is a struct http_api. */
void http_api_handle(void *app, struct http_txn *txn);
/* The http_early_fn of the HTTP server (http/txn.h, "Request bodies"):
 * the inference routes (POST /v2/models/{m}[/versions/{v}]/infer,
 * generate, generate_stream; POST /v1/completions and
 * /v1/chat/completions without Last-Event-ID) are handed over on their
 * head, so that their key, rate limits, breaker, concurrency limit and
 * queue refuse them before the body is read (the REST front ends start
 * their call there; OpenAI's checks the key, then waits for the body,
 * which names the model). Every other request is read whole first. */
bool http_api_early(void *app, const struct http_txn *txn);
/* About once a second on the loop thread (SSE keep-alive comments, the
 * OpenAI streams' grace period). */
void http_api_tick(struct http_api *api, uint64_t now_ms);
/* Frees what the api holds; call after the loop has stopped. */
void http_api_free(struct http_api *api);

#endif
