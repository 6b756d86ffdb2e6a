/*
 * registration: this instance's entry in etcd, so that gateways
 * (cluster/discovery.h) find it.
 *
 * Key <prefix>instances/<id>, value (JSON, one object):
 *   {"id": "...", "host": "...", "http_port": 8000, "grpc_port": 8001,
 *    "metrics_port": 8002, "ready": true, "draining": false,
 *    "version": "<inferd version>",
 *    "models": [{"name": "digits", "versions": ["1","2"],
 *                "ready_versions": ["1","2"]}]}
 * versions: the versions of the model the repository knows (loaded, or
 * failed to load); ready_versions: the loaded ones, when the model is
 * ready. ready: every model that should be loaded is (snapshot_all_ready).
 * metrics_port 0: no metrics server.
 *
 * Everything happens on the registration's own thread; serving never
 * waits for etcd. The thread grants a lease of lease_ttl_s seconds, puts
 * the key with it, and keeps the lease alive every lease_ttl_s / 3. Every
 * 250 ms it compares the value the repository's current snapshot gives
 * with the one in etcd and puts the new one when they differ (model
 * loaded, unloaded, readiness changed). When etcd is unreachable it
 * retries every second; when the lease is gone (etcd answers it is not
 * found, a restart of etcd without its data, or no keepalive got through
 * for a whole TTL) it grants a new one and puts the key again. Each change
 * of state (registered, unreachable, lease lost) is logged once.
 *
 * registration_deregister() is the first step of a drain: the thread
 * deletes the key and revokes the lease, and stops registering; the
 * caller waits for that up to wait_ms (so that gateways stop sending new
 * requests before this instance stops taking them), then goes on whatever
 * happened.
 *
 * Threads: start, deregister and stop from one thread (the main thread).
 */
#ifndef INFERD_CLUSTER_REGISTRATION_H
#define INFERD_CLUSTER_REGISTRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "model/repository.h"

struct registration_config {
    const char *endpoints;   /* --etcd-endpoints */
    const char *prefix;      /* --etcd-prefix */
    uint32_t lease_ttl_s;    /* --etcd-lease-ttl */
    uint32_t timeout_ms;     /* each etcd call (default 2000) */
    const char *instance_id; /* --instance-id */
    const char *host;        /* --advertise-host */
    int http_port, grpc_port, metrics_port;
    struct repository *repo;
};

struct registration;

/* Checks the config (endpoints, id, prefix) and starts the thread; does
 * not wait for etcd. Returns 0, or ST_ERROR with err. */
int registration_start(const struct registration_config *cfg, struct registration **out,
                       struct error *err);
/* Deletes the key (see above); waits up to wait_ms. Returns true when the
 * key is known gone (deleted, or never put). NULL: true. */
bool registration_deregister(struct registration *r, uint32_t wait_ms);
/* Stops and joins the thread, revoking the lease if it is still held
 * (so the key goes at once rather than at the lease's expiry). NULL is a
 * no-op. */
void registration_stop(struct registration *r);

/* The registration value of the snapshot s, appended to out (errors
 * sticky in out->err). "draining" is always false: a draining instance
 * deletes its key instead. */
void registration_value(struct buf *out, const struct registration_config *cfg,
                        const struct model_snapshot *s);

#endif
