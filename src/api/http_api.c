#include "api/http_api.h"

#include <string.h>

#include "api/auth_http.h"
#include "api/grpc/web.h"
#include "api/http_obs.h"
#include "api/http_path.h"
#include "api/pages/dashboard.h"
#include "api/pages/playground.h"

/* /dashboard (the page), /dashboard/data (what it polls) */
static void route_dashboard(struct http_api *api, struct http_txn *txn, const struct http_path *p)
{
    bool page = p->n == 1, data = p->n == 2 && http_path_is(p, 1, "data");
    if (!page && !data) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!http_method_is_get(txn)) {
        http_method_not_allowed(txn, "GET, HEAD");
        return;
    }
    if (page)
        dashboard_page(txn);
    else
        dashboard_data(api->obs, txn);
}

/* The segments of /v1/... after v1. */
static void v1_path(const struct http_path *p, struct openai_path *out)
{
    out->n = p->n - 1;
    for (int i = 1; i < p->n && i <= OPENAI_PATH_MAX; i++) {
        out->seg[i - 1] = p->seg[i].text;
        out->len[i - 1] = p->seg[i].len;
    }
}

/* What a request to p needs (policy/auth.h), following http_api_handle's
 * dispatch; a path no handler takes needs `read`, so that a client
 * without a key learns nothing from a 404. */
static enum auth_class route_class(const struct http_path *p)
{
    if (http_path_is(p, 0, "dashboard"))
        return AUTH_DASHBOARD;
    if (http_path_is(p, 0, "v2"))
        return rest_route_class(p);
    return AUTH_READ;
}

bool http_api_early(void *app, const struct http_txn *txn)
{
    struct http_api *api = app;
    struct http_path p;
    if (!http_method_is(txn, "POST") || (grpc_web_request(txn) != GRPC_WEB_NONE && api->grpc) ||
        !http_path_split(txn->req.path, txn->req.path_len, &p))
        return false;
    /* The inference routes: the ones whose checks the pipeline makes. */
    if (http_path_is(&p, 0, "v2"))
        return rest_route_class(&p) == AUTH_IN_PIPELINE;
    if (http_path_is(&p, 0, "v1")) {
        struct openai_path v1;
        v1_path(&p, &v1);
        return openai_route_class(&v1) == AUTH_IN_PIPELINE &&
               !http1_header(&txn->req, "Last-Event-ID"); /* a resume hashes the body */
    }
    return false;
}

void http_api_handle(void *app, struct http_txn *txn)
{
    struct http_api *api = app;
    struct http_path p;
    enum grpc_web_encoding web = grpc_web_request(txn);
    if (web != GRPC_WEB_NONE && api->grpc) {
        /* A gRPC call: its own request id, access log and status (api/grpc/web.h). */
        cors_add_headers(api->cors, txn);
        return grpc_web_handle(api->grpc, txn, web);
    }
    http_obs_begin(txn); /* request id, access log, tracing */
    if (cors_preflight(api->cors, txn))
        return;
    cors_add_headers(api->cors, txn);
    if (!http_path_split(txn->req.path, txn->req.path_len, &p)) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (http_path_is(&p, 0, "v1")) {
        /* It checks the key itself: its refusals have OpenAI's shape. */
        struct openai_path v1;
        v1_path(&p, &v1);
        return openai_handle(&api->openai, api->auth, txn, &v1);
    }
    if (http_path_is(&p, 0, "playground") && p.n == 1) {
        /* Static, without server data: served without a key (api/pages/playground.h). */
        if (!http_method_is_get(txn))
            return http_method_not_allowed(txn, "GET, HEAD");
        return playground_page(txn);
    }
    if (!auth_http_allow(api->auth, route_class(&p), txn))
        return;
    if (http_path_is(&p, 0, "dashboard"))
        return route_dashboard(api, txn, &p);
    if (!http_path_is(&p, 0, "v2")) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    rest_route(&api->rest, txn, &p);
}

void http_api_init(struct http_api *api, struct serve_thread *serve, const struct obs_sources *obs,
                   uint64_t sse_keepalive_ms)
{
    memset(api, 0, sizeof *api);
    api->obs = obs;
    rest_api_init(&api->rest, serve, obs, sse_keepalive_ms);
    openai_api_init(&api->openai, serve, obs ? obs->start_ms : 0, sse_keepalive_ms);
}

void http_api_tick(struct http_api *api, uint64_t now_ms)
{
    rest_api_tick(&api->rest, now_ms);
    openai_api_tick(&api->openai, now_ms);
}

void http_api_free(struct http_api *api)
{
    rest_api_free(&api->rest);
    openai_api_free(&api->openai);
}
