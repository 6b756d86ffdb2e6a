/*
 * etcd: a small blocking client of etcd's v3 HTTP/JSON gateway (POST
 * /v3/<service>/<method> with a JSON body; HTTP/1.1 over TCP, keep-alive).
 *
 * One struct etcd_client is one connection, used by one thread at a time.
 * Endpoints are tried in order: a connection that fails moves to the next
 * one, so a cluster of several members keeps answering while one is down.
 * Every call has a deadline (timeout_ms for connect, send and the whole
 * answer); a call on a kept-alive connection that the server closed
 * meanwhile is retried once on a new connection. Calls fail with -1 and a
 * message in c->err (kept until the next call): cannot connect, timed out,
 * an HTTP error, or etcd's own error answer (such as "requested lease not
 * found"). c->unreachable tells the first kind (no answer at all) apart.
 *
 * cancel (optional): an atomic flag polled at least every 100 ms while a
 * call waits; when set, the call fails at once ("canceled"). That is how
 * another thread stops a long watch.
 *
 * Watch: etcd_watch_open() sends a watch request on this connection, which
 * then belongs to the watch (a streamed, chunked answer of one JSON message
 * per line) until etcd_client_disconnect(); etcd_watch_next() returns the
 * next message.
 */
#ifndef INFERD_CLUSTER_ETCD_H
#define INFERD_CLUSTER_ETCD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/error.h"
#include "cluster/etcd_proto.h"

#define ETCD_MAX_ENDPOINTS 8
#define ETCD_ANSWER_MAX (4u << 20) /* bytes of one answer, or of one watch message */

struct etcd_endpoint {
    char host[256];
    int port;
};

struct etcd_client {
    struct etcd_endpoint endpoints[ETCD_MAX_ENDPOINTS];
    uint32_t n_endpoints, current;
    uint32_t timeout_ms;
    const atomic_bool *cancel;
    int fd;
    bool watching;
    bool unreachable; /* the last failure: no connection or no answer */
    struct etcd_resp resp;
    struct buf req;
    struct buf line;
    char err[600];
};

/* Parses "http://host:port[,http://host:port...]" (a missing scheme is
 * http; https is refused; port default 2379). Returns 0, or ST_ERROR with err
 * (400-style message). No connection is made yet. */
int etcd_client_init(struct etcd_client *c, const char *endpoints, uint32_t timeout_ms,
                     const atomic_bool *cancel, struct error *err);
void etcd_client_free(struct etcd_client *c);
/* Only checks an endpoint list the way etcd_client_init() parses it. */
int etcd_endpoints_check(const char *endpoints, struct error *err);
/* Closes the connection (a watch ends); the next call reconnects. */
void etcd_client_disconnect(struct etcd_client *c);
/* "host:port" of the endpoint in use, for log lines. */
const char *etcd_client_endpoint(const struct etcd_client *c, char *dst, size_t cap);

/* POSTs body to path ("/v3/kv/put") and parses the JSON answer into *out
 * (arena a). An HTTP error status or an error answer fails. */
int etcd_call(struct etcd_client *c, const char *path, const char *body, size_t len,
              struct arena *a, struct json_value **out);

/* Leases: grant (the TTL etcd granted in *granted), keep alive once (*ttl
 * 0 when the lease no longer exists), revoke. */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted);
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl);
int etcd_lease_revoke(struct etcd_client *c, int64_t id);

/* Puts key = value (lease 0: none). */
int etcd_put(struct etcd_client *c, const char *key, const char *value, size_t value_len,
             int64_t lease);
/* Deletes key (or every key with that prefix); *deleted may be NULL. */
int etcd_delete(struct etcd_client *c, const char *key, bool prefix, int64_t *deleted);
/* Reads every key with prefix into the arena; *revision is the store's. */
int etcd_range_prefix(struct etcd_client *c, const char *prefix, struct arena *a,
                      struct etcd_kv **kvs, uint32_t *n, int64_t *revision);

/* Starts watching every key with prefix from start_revision (0: now). */
int etcd_watch_open(struct etcd_client *c, const char *prefix, int64_t start_revision);
/* Waits up to wait_ms for the next message: 0 with *out filled (in a),
 * 1 when none came in time (the watch goes on), -1 when the watch broke
 * (c->err; disconnect and open again). */
int etcd_watch_next(struct etcd_client *c, uint32_t wait_ms, struct arena *a,
                    struct etcd_watch_msg *out);

#endif
