/*
 * cluster_setup: the registration's defaults and start (cluster_setup.h).
 */
#include "cli/cluster_setup.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"

void cluster_default_host(const char *host, char *dst, size_t cap)
{
    if (host && strcmp(host, "0.0.0.0") != 0 && strcmp(host, "::") != 0 && host[0]) {
        snprintf(dst, cap, "%s", host);
        return;
    }
    snprintf(dst, cap, "127.0.0.1");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        char text[INET_ADDRSTRLEN];
        const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
        if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text)) {
            snprintf(dst, cap, "%s", text);
            break;
        }
    }
    freeifaddrs(ifs);
}

int cluster_setup_start(const struct serve_options *o, struct repository *repo, int http_port,
                        int grpc_port, int metrics_port, struct registration **out)
{
    *out = NULL;
    if (!o->etcd.endpoints)
        return 0;
    char host[256], id[128];
    if (o->etcd.advertise_host)
        snprintf(host, sizeof host, "%s", o->etcd.advertise_host);
    else
        cluster_default_host(o->http.host, host, sizeof host);
    if (o->etcd.instance_id) {
        snprintf(id, sizeof id, "%s", o->etcd.instance_id);
    } else {
        char name[64];
        if (gethostname(name, sizeof name) != 0)
            snprintf(name, sizeof name, "inferd");
        name[sizeof name - 1] = '\0';
        snprintf(id, sizeof id, "%s:%d", name, http_port);
    }
    struct registration_config cfg = {
        .endpoints = o->etcd.endpoints,
        .prefix = o->etcd.prefix,
        .lease_ttl_s = o->etcd.lease_ttl_s,
        .instance_id = id,
        .host = host,
        .http_port = http_port,
        .grpc_port = grpc_port,
        .metrics_port = metrics_port,
        .repo = repo,
    };
    struct error err;
    error_clear(&err);
    if (registration_start(&cfg, out, &err) != 0) {
        log_error("%s", err.msg);
        return ST_ERROR;
    }
    log_info("etcd registration: %sinstances/%s -> %s (gRPC %d, HTTP %d), lease TTL %u s",
             o->etcd.prefix, id, host, grpc_port, http_port, o->etcd.lease_ttl_s);
    return 0;
}

/* remote_models_discovered's addrs_of over a snapshot. */
static uint32_t addrs_of(void *ctx, const char *model, char (*out)[UPSTREAM_ADDR_MAX], uint32_t max)
{
    const struct cluster_snapshot *s = ctx;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_instances && n < max; i++) {
        const struct cluster_instance *inst = &s->instances[i];
        if (!cluster_instance_serves(inst, model, NULL))
            continue;
        bool v6 = strchr(inst->host, ':') != NULL;
        if ((size_t)snprintf(out[n], UPSTREAM_ADDR_MAX, v6 ? "[%s]:%d" : "%s:%d", inst->host,
                             inst->grpc_port) < UPSTREAM_ADDR_MAX)
            n++;
    }
    return n;
}

static void on_instances(void *ctx, const struct cluster_snapshot *snap)
{
    remote_models_discovered(ctx, addrs_of, (void *)snap);
}

int cluster_discovery_start(const struct serve_options *o, struct remote_models *remote,
                            struct discovery **out)
{
    *out = NULL;
    if (!remote_models_discovering(remote))
        return 0;
    if (!o->etcd.endpoints) {
        log_error("remote-models: discover: true needs --etcd-endpoints");
        return ST_ERROR;
    }
    struct discovery_config cfg = {.endpoints = o->etcd.endpoints,
                                   .prefix = o->etcd.prefix,
                                   .on_change = on_instances,
                                   .on_change_ctx = remote};
    struct error err;
    error_clear(&err);
    if (discovery_start(&cfg, out, &err) != 0) {
        log_error("%s", err.msg);
        return ST_ERROR;
    }
    uint64_t deadline = clock_now_ms() + 3000;
    while (discovery_generation(*out) == 0 && clock_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (discovery_generation(*out) == 0)
        log_warn("discovery: etcd not read yet; discovered upstreams join when it is");
    return 0;
}
