/*
 * cluster_setup: `inferd serve`'s registration in etcd, from its settings
 * (--etcd-endpoints, --etcd-prefix, --etcd-lease-ttl, --advertise-host,
 * --instance-id; docs/deploy.md).
 *
 * cluster_setup_start() fills in the defaults the flags leave open and
 * starts cluster/registration.h's thread:
 *   advertise host: --advertise-host; else --host unless it is a wildcard
 *                   (0.0.0.0, ::); else the first non-loopback IPv4
 *                   address of an interface that is up; else 127.0.0.1.
 *   instance id:    --instance-id; else "<hostname>:<http port>".
 * Called once the ports are bound (port 0 resolved). Without
 * --etcd-endpoints it does nothing (*out NULL). Returns 0, or ST_ERROR after
 * logging why (a bad endpoint list).
 */
#ifndef INFERD_CLI_CLUSTER_SETUP_H
#define INFERD_CLI_CLUSTER_SETUP_H

#include "cli/serve_options.h"
#include "cluster/discovery.h"
#include "cluster/registration.h"
#include "cluster/remote.h"
#include "model/repository.h"

int cluster_setup_start(const struct serve_options *o, struct repository *repo, int http_port,
                        int grpc_port, int metrics_port, struct registration **out);

/*
 * The gateway's discovery: when a remote model says `discover: true`,
 * starts cluster/discovery.h on --etcd-endpoints (prefix --etcd-prefix)
 * and hands every new instance set to the remote models' pools
 * (remote_models_discovered: "host:grpc_port" of the instances that have
 * the model ready and are not draining). Waits up to 3 s for the first
 * read of etcd, so that remote versions find an upstream when they load;
 * a later etcd only delays that. Call before repository_open(); stop with
 * discovery_stop() before remote_models_free(). Without a discovering
 * model: nothing (*out NULL). Returns 0, or ST_ERROR after logging why
 * (`discover: true` without --etcd-endpoints).
 */
int cluster_discovery_start(const struct serve_options *o, struct remote_models *remote,
                            struct discovery **out);

/* The default advertise host (above) for listen address host. */
void cluster_default_host(const char *host, char *dst, size_t cap);

#endif
