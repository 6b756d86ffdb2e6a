/*
 * discovery: the set of inferd instances registered in etcd under
 * <prefix>instances/ (cluster/registration.h writes those keys), kept
 * current by a background thread that watches the prefix.
 *
 * The thread reads the whole prefix (a range), then watches it from the
 * next revision; every put or delete makes a new snapshot. When the watch
 * breaks (etcd restarted, connection lost) it reconnects with a backoff
 * (100 ms doubling to 5 s) and resumes from the last revision seen; if
 * that revision was compacted it reads the range again. While etcd is
 * unreachable the last snapshot stays current: instances are removed only
 * by etcd (a deleted key or an expired lease), never by a guess here.
 * A value that is not a valid registration (see below) is skipped and
 * logged once per key and revision.
 *
 * Snapshots are immutable and reference-counted. discovery_snapshot()
 * returns the current one with a reference the caller owns and gives back
 * with cluster_snapshot_release(); it never blocks on I/O (a short lock),
 * so a request path may call it. Snapshot memory (instances, their models,
 * strings) lives until the last reference is released.
 *
 * Change notification: each new snapshot has a generation one higher
 * than the last (the first, possibly empty, is 1 once the first range has
 * been read; 0 = nothing read yet). Poll discovery_generation() (atomic, no
 * lock), or set on_change in the config: it is called on the discovery
 * thread after each new snapshot is published, with that snapshot (borrowed
 * for the call; take a reference with cluster_snapshot_retain() to keep
 * it). The callback must not block for long and must not call
 * discovery_stop().
 *
 * Registration value (JSON), as registration.c writes it; parsed leniently
 * (unknown members ignored), strictly for the members used:
 *   {"id": "...", "host": "...", "http_port": 8000, "grpc_port": 8001,
 *    "metrics_port": 8002, "ready": true, "draining": false,
 *    "version": "...", "models": [{"name": "digits", "versions": ["1","2"],
 *    "ready_versions": ["1","2"]}]}
 * id, host and grpc_port are required; the others default to 0, false or
 * empty. Limits: CLUSTER_MAX_INSTANCES instances (more are ignored and
 * logged), CLUSTER_MAX_MODELS models per instance, CLUSTER_MAX_VERSIONS
 * versions per model, values up to CLUSTER_VALUE_MAX bytes.
 *
 * Threads: discovery_start()/discovery_stop() from one thread; the rest
 * from any thread.
 */
#ifndef INFERD_CLUSTER_DISCOVERY_H
#define INFERD_CLUSTER_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"

#define CLUSTER_ID_MAX 128
#define CLUSTER_HOST_MAX 256
#define CLUSTER_MAX_INSTANCES 1024
#define CLUSTER_MAX_MODELS 256
#define CLUSTER_MAX_VERSIONS 64
#define CLUSTER_VALUE_MAX (256 * 1024)

struct cluster_model {
    const char *name;
    const char *const *versions; /* every version in the instance's repository */
    uint32_t n_versions;
    const char *const *ready_versions; /* those ready to serve */
    uint32_t n_ready_versions;
};

struct cluster_instance {
    char id[CLUSTER_ID_MAX];
    char host[CLUSTER_HOST_MAX];
    int http_port, grpc_port, metrics_port; /* 0 = not served */
    bool ready, draining;
    const char *version; /* inferd's version; "" if absent */
    const struct cluster_model *models;
    uint32_t n_models;
    int64_t mod_revision; /* etcd revision of the key's last put */
};

struct cluster_snapshot {
    uint64_t generation;
    const struct cluster_instance *instances; /* sorted by id */
    uint32_t n_instances;
};

/*
 * Whether inst can take requests for model (and, if version is not NULL,
 * that version): ready, not draining, with a gRPC port, and the model
 * (version) among its ready versions (any ready version if version is NULL).
 */
bool cluster_instance_serves(const struct cluster_instance *inst, const char *model,
                             const char *version);

/* The model entry of inst named name, or NULL. */
const struct cluster_model *cluster_instance_model(const struct cluster_instance *inst,
                                                   const char *name);

/* Parses one registration value (the JSON above) into inst, its strings
 * and arrays in the arena. Returns NULL, or what is wrong (static text). */
const char *cluster_instance_parse(struct arena *a, const char *text, size_t len,
                                   struct cluster_instance *inst);

const struct cluster_snapshot *cluster_snapshot_retain(const struct cluster_snapshot *s);
void cluster_snapshot_release(const struct cluster_snapshot *s); /* NULL is a no-op */

typedef void (*discovery_change_fn)(void *ctx, const struct cluster_snapshot *snap);

struct discovery_config {
    const char *endpoints;         /* "http://host:port[,http://host:port...]" (etcd v3 gateway) */
    const char *prefix;            /* key prefix; "<prefix>instances/" is watched */
    uint32_t timeout_ms;           /* connect and request timeout (default 2000) */
    discovery_change_fn on_change; /* optional, see above */
    void *on_change_ctx;
};

struct discovery;

/* Validates the config and starts the thread; does not wait for etcd.
 * Returns 0, or ST_ERROR with a message in err (bad endpoint URL, thread). */
int discovery_start(const struct discovery_config *cfg, struct discovery **out, struct error *err);
/* Stops the watch (closing its connection) and joins the thread; snapshots
 * still referenced stay valid until released. NULL is a no-op. */
void discovery_stop(struct discovery *d);

/* The current snapshot (never NULL: an empty one before the first read),
 * with a reference for the caller. */
const struct cluster_snapshot *discovery_snapshot(struct discovery *d);
uint64_t discovery_generation(const struct discovery *d);

#endif
