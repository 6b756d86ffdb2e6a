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
#include <unistd.h>

#include "base/log.h"

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
        return -1;
    }
    log_info("etcd registration: %sinstances/%s -> %s (gRPC %d, HTTP %d), lease TTL %u s",
             o->etcd.prefix, id, host, grpc_port, http_port, o->etcd.lease_ttl_s);
    return 0;
}
