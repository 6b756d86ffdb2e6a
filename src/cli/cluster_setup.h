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
 * --etcd-endpoints it does nothing (*out NULL). Returns 0, or -1 after
 * logging why (a bad endpoint list).
 */
#ifndef INFERD_CLI_CLUSTER_SETUP_H
#define INFERD_CLI_CLUSTER_SETUP_H

#include "cli/serve_options.h"
#include "cluster/registration.h"
#include "model/repository.h"

int cluster_setup_start(const struct serve_options *o, struct repository *repo, int http_port,
                        int grpc_port, int metrics_port, struct registration **out);

/* The default advertise host (above) for listen address host. */
void cluster_default_host(const char *host, char *dst, size_t cap);

#endif
