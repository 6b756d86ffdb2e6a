/*
 * remote: model versions served by upstream KServe v2 gRPC servers
 * (gateway mode, the `remote-models` section of the config file), and the
 * set of them a server has.
 *
 * A remote version is a version of the model like a local one (model.h:
 * model_new_remote): it is in the repository's snapshot, so pinning,
 * canary, A/B and shadow (policy/routing.h) pick it like any other. Its
 * inputs and outputs come from an upstream's ModelMetadata when it loads
 * (the repository manager's thread, blocking up to the health timeout
 * per attempt). Its requests (engine_ops.submit) are encoded as a
 * ModelInferRequest (raw contents) and sent through its upstream pool
 * (cluster/upstream.h) with the request's remaining time as grpc-timeout,
 * its trace context as traceparent and its id as x-request-id; the
 * answer's outputs are copied into the request's arena and the request
 * completed on the pool's thread, as a scheduler would. An upstream's
 * error keeps its meaning (HTTP status from the gRPC status); a request
 * that no upstream could take fails with 503.
 *
 * Upstreams are static (`upstreams`) or discovered (`discover: true`):
 * remote_set_discovered() replaces the set of a discovering model's pools.
 *
 * Threads: remote_models_parse and _start on the main thread; the
 * registry hook on the repository manager's; submit on any.
 */
#ifndef INFERD_CLUSTER_REMOTE_H
#define INFERD_CLUSTER_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "cluster/upstream.h"
#include "model/model.h"

#define REMOTE_MAX_MODELS 32

struct remote_model_config {
    char *model;        /* served here under this name */
    int64_t version;    /* the version number it appears as (default 1) */
    char *remote_model; /* the model's name upstream (default: model) */
    char **upstreams;   /* "host:port" */
    uint32_t nupstreams;
    bool discover;
    struct upstream_pool_config pool;
};

struct remote_models_config {
    struct remote_model_config models[REMOTE_MAX_MODELS];
    uint32_t count;
};

/* The `remote-models` section (cli/config_file.h's contract): a sequence
 * of mappings with keys model, version, upstreams, discover,
 * remote-model, health-check {interval-ms, timeout-ms, unhealthy-threshold},
 * outlier {consecutive-failures, ejection-secs}, max-retries; an unknown
 * key anywhere is an error. v NULL: none. */
int remote_models_config_parse(const struct json_value *v, struct remote_models_config **out,
                               struct error *err);
void remote_models_config_free(struct remote_models_config *c);

/* The remote versions: the section's store, then the running pools (one
 * per remote version). */
struct remote_models;

struct remote_models *remote_models_new(void);
/* The section's apply (cli/config_file.h): the first takes c; the
 * section is read at start only, so a reload (SIGHUP) with a different
 * section is logged and ignored. */
void remote_models_apply(struct remote_models *r, struct remote_models_config *c);
/* Starts the pools of the applied section (none: nothing to do). 0 or ST_ERROR
 * with err. */
int remote_models_start(struct remote_models *r, struct error *err);
/* After the repository closed (no version refers to a pool any more):
 * stops the pools, frees r and its section. */
void remote_models_free(struct remote_models *r);
/* Fills opts->remote (model.h): the names and the load hook. */
void remote_models_registry(struct remote_models *r, struct registry_options *opts);
/* For each discovering model, the upstreams an etcd instance list offers
 * it: `addrs_of(ctx, remote_model, out, max)` fills "host:grpc_port" of
 * the instances that have the model ready and are not draining. */
void remote_models_discovered(struct remote_models *r,
                              uint32_t (*addrs_of)(void *ctx, const char *model,
                                                   char (*out)[UPSTREAM_ADDR_MAX], uint32_t max),
                              void *ctx);
/* Whether any model discovers its upstreams. */
bool remote_models_discovering(const struct remote_models *r);
/* Whether version m is a remote one (its requests go to upstreams). */
bool remote_version_is(const struct model *m);
/* The inferd_upstream_* families (HELP, TYPE and every pool's rows). */
void remote_models_metrics(struct remote_models *r, struct buf *out);

#endif
