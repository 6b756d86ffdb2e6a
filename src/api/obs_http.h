/*
 * obs_http: the observability endpoints.
 *
 *   metrics port (own listener and thread, default 8002):
 *     GET /metrics            Prometheus text format 0.0.4 (docs/metrics.md)
 *   HTTP port (routed by rest.c):
 *     GET /v2/models[/{m}[/versions/{v}]]/stats   Triton's statistics extension
 *     GET /dashboard          a self-contained HTML page (api/dashboard.html)
 *     GET /dashboard/data     the JSON the page polls every second
 *
 * Everything here reads: shards are summed and the repository snapshot is
 * walked at request time, so serving these costs the hot path nothing.
 */
#ifndef INFERD_API_OBS_HTTP_H
#define INFERD_API_OBS_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/server.h"
#include "model/repository.h"
#include "obs/sysinfo.h"
#include "obs/usage.h"
#include "policy/auth.h"
#include "policy/breaker.h"
#include "policy/limiter.h"
#include "policy/ratelimit.h"
#include "cluster/remote.h"
#include "policy/routing.h"
#include "policy/tokenquota.h"

/* What the metrics and the dashboard show besides the per-model numbers.
 * Owned by main; outlives the listeners. */
struct obs_sources {
    struct repository *repo;
    atomic_uint *open_connections; /* HTTP connections of the process, or NULL */
    uint64_t start_ms;             /* wall clock at start, ms since the epoch */
    struct routing *routing;       /* routing and shadow metrics; NULL: none */
    /* API keys: refusal metrics, and the metrics port's check (`read`
     * unless `metrics` is open); NULL: none. */
    struct auth *auth;
    struct limiter *limiter;       /* adaptive concurrency metrics; NULL: none */
    struct breaker *breaker;       /* circuit breaker metrics; NULL: none */
    struct ratelimit *ratelimit;   /* rate-limit metrics; NULL: none */
    struct tokenquota *tokenquota; /* token-quota metrics; NULL: none */
    struct usage *usage;           /* token metering: metrics, GET /v2/usage; NULL: none */
    struct remote_models *remote;  /* gateway upstream metrics; NULL: none */
};

/* ---- the metrics listener ------------------------------------------------ */

struct metrics_server;

/* Starts a thread with its own event loop serving GET /metrics on
 * cfg->host:cfg->port (0 = any free port). cfg's limits and timeouts apply;
 * connections here are not counted in open_connections. Returns 0 or
 * -errno (logged). */
int metrics_server_start(const struct http_server_config *cfg, const struct obs_sources *src,
                         struct metrics_server **out);
int metrics_server_port(const struct metrics_server *ms);
/* Stops the thread and frees everything (NULL is a no-op). */
void metrics_server_stop(struct metrics_server *ms);

/* The whole exposition. cpu: the previous /proc/stat sample, updated
 * (nv_cpu_utilization is the busy share since the previous call). */
void metrics_expose(const struct obs_sources *src, struct sysinfo_cpu *cpu, struct buf *out);

/* ---- on the HTTP port (rest.c) --------------------------------------------- */

/* Answers a statistics request. model == NULL: every model; version ==
 * NULL: every loaded version of model. 404 JSON error for an unknown model
 * or version. */
void obs_http_stats(struct repository *repo, struct http_txn *txn, const char *model,
                    size_t model_len, const char *version);
void obs_http_dashboard_page(struct http_txn *txn);
/* The servers' on_response observer (http/server.h): counts responses by
 * endpoint and status, and body bytes, for inferd_http_* metrics. */
void obs_http_on_response(const struct http_txn *txn, int status, size_t body_bytes);
void obs_http_dashboard_data(const struct obs_sources *src, struct http_txn *txn);

#endif
