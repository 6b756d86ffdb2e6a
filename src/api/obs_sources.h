/*
 * obs_sources: what the observability endpoints read besides the models of
 * the repository: the metrics port (api/metrics_port.h), the dashboard
 * (api/pages/dashboard.h) and the usage endpoint (api/usage_http.h).
 *
 * Filled by main before the listeners start; everything it points to
 * outlives them. Readers only read (shards are summed, snapshots taken at
 * request time), from any thread.
 */
#ifndef INFERD_API_OBS_SOURCES_H
#define INFERD_API_OBS_SOURCES_H

#include <stdatomic.h>
#include <stdint.h>

#include "cluster/remote.h"
#include "model/repository.h"
#include "obs/usage.h"
#include "policy/auth.h"
#include "policy/breaker.h"
#include "policy/limiter.h"
#include "policy/ratelimit.h"
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

#endif
