/*
 * metrics_port: the metrics listener (its own port, thread and event loop;
 * default 8002), serving
 *
 *     GET /metrics            Prometheus text format 0.0.4 (docs/metrics.md)
 *
 * Everything here reads: shards are summed and the repository snapshot is
 * walked at scrape time, so a scrape costs the hot path nothing. API keys:
 * `read` unless the `metrics` class is open (policy/auth.h).
 */
#ifndef INFERD_API_METRICS_PORT_H
#define INFERD_API_METRICS_PORT_H

#include "api/obs_sources.h"
#include "base/buf.h"
#include "http/server.h"
#include "obs/sysinfo.h"

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

#endif
