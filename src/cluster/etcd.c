/*
 * etcd: the blocking v3 gateway client (etcd.h).
 */
#include "cluster/etcd.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base64.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/status.h"
#include "net/sock.h"

#define SLICE_MS 100 /* the longest wait between looks at the cancel flag */

static int parse_endpoint(const char *s, size_t n, struct etcd_endpoint *ep)
{
    if (n >= 8 && strncmp(s, "https://", 8) == 0)
        return ST_ERROR;
    if (n >= 7 && strncmp(s, "http://", 7) == 0) {
        s += 7;
        n -= 7;
    }
    while (n > 0 && s[n - 1] == '/')
        n--;
    const char *colon = memrchr(s, ':', n);
    size_t hlen = colon ? (size_t)(colon - s) : n;
    if (hlen == 0 || hlen >= sizeof ep->host)
        return ST_ERROR;
    for (size_t i = 0; i < hlen; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '/' || (unsigned char)s[i] >= 0x7f)
            return ST_ERROR;
    memcpy(ep->host, s, hlen);
    ep->host[hlen] = '\0';
    ep->port = 2379;
    if (colon) {
        size_t plen = n - hlen - 1;
        if (plen == 0 || plen > 5)
            return ST_ERROR;
        int port = 0;
        for (size_t i = 0; i < plen; i++) {
            if (colon[1 + i] < '0' || colon[1 + i] > '9')
                return ST_ERROR;
            port = port * 10 + (colon[1 + i] - '0');
        }
        if (port < 1 || port > 65535)
            return ST_ERROR;
        ep->port = port;
    }
    return 0;
}

int etcd_client_init(struct etcd_client *c, const char *endpoints, uint32_t timeout_ms,
                     const atomic_bool *cancel, struct error *err)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->timeout_ms = timeout_ms ? timeout_ms : 2000;
    c->cancel = cancel;
    const char *p = endpoints ? endpoints : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            if (c->n_endpoints == ETCD_MAX_ENDPOINTS)
                return error_set(err, 400, "--etcd-endpoints: more than %d endpoints",
                                 ETCD_MAX_ENDPOINTS);
            if (parse_endpoint(p, n, &c->endpoints[c->n_endpoints]) != 0)
                return error_set(err, 400,
                                 "--etcd-endpoints: '%.*s' is not http://host:port (https is "
                                 "not supported)",
                                 (int)(n > 200 ? 200 : n), p);
            c->n_endpoints++;
        }
        p += n + (comma != NULL);
    }
    if (c->n_endpoints == 0)
        return error_set(err, 400, "--etcd-endpoints: no endpoint given");
    etcd_resp_init(&c->resp, ETCD_ANSWER_MAX);
    buf_init(&c->req, 1u << 20);
    buf_init(&c->line, ETCD_ANSWER_MAX);
    return 0;
}

int etcd_endpoints_check(const char *endpoints, struct error *err)
{
    struct etcd_client c;
    if (etcd_client_init(&c, endpoints, 0, NULL, err) != 0)
        return ST_ERROR;
    etcd_client_free(&c);
    return 0;
}

void etcd_client_disconnect(struct etcd_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->watching = false;
}

void etcd_client_free(struct etcd_client *c)
{
    etcd_client_disconnect(c);
    etcd_resp_free(&c->resp);
    buf_free(&c->req);
    buf_free(&c->line);
}

const char *etcd_client_endpoint(const struct etcd_client *c, char *dst, size_t cap)
{
    const struct etcd_endpoint *ep = &c->endpoints[c->current];
    snprintf(dst, cap, "%s:%d", ep->host, ep->port);
    return dst;
}

static int set_err(struct etcd_client *c, bool unreachable, const char *fmt, const char *arg)
{
    char ep[300];
    char msg[200];
    snprintf(msg, sizeof msg, fmt, arg);
    snprintf(c->err, sizeof c->err, "etcd %s: %s", etcd_client_endpoint(c, ep, sizeof ep), msg);
    c->unreachable = unreachable;
    return ST_ERROR;
}

static bool canceled(const struct etcd_client *c)
{
    return c->cancel && atomic_load(c->cancel);
}

/* Waits until fd is ready for events: 0, -ETIMEDOUT at the deadline,
 * -ECANCELED, or -EIO on a poll error. */
static int wait_fd(struct etcd_client *c, int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        if (canceled(c))
            return -ECANCELED;
        uint64_t now = clock_now_ms();
        if (now >= deadline_ms)
            return -ETIMEDOUT;
        uint64_t left = deadline_ms - now;
        struct pollfd pfd = {.fd = fd, .events = events};
        int rc = poll(&pfd, 1, left < SLICE_MS ? (int)left : SLICE_MS);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -EIO;
    }
}

/* sock_connect's wait: writable within the timeout, unless canceled. */
static int wait_writable(int fd, void *arg)
{
    struct etcd_client *c = arg;
    return wait_fd(c, fd, POLLOUT, clock_now_ms() + c->timeout_ms);
}

static int connect_one(struct etcd_client *c, const struct etcd_endpoint *ep)
{
    return sock_connect(ep->host, ep->port, wait_writable, c);
}

/* Connects to the current endpoint or, failing that, the next ones. */
static int ensure_connected(struct etcd_client *c)
{
    if (c->fd >= 0)
        return 0;
    for (uint32_t i = 0; i < c->n_endpoints; i++) {
        if (canceled(c))
            return set_err(c, true, "%s", "canceled");
        c->fd = connect_one(c, &c->endpoints[c->current]);
        if (c->fd >= 0)
            return 0;
        if (i + 1 < c->n_endpoints)
            c->current = (c->current + 1) % c->n_endpoints;
    }
    return set_err(c, true, "%s", "cannot connect");
}

static int send_all(struct etcd_client *c, const char *p, size_t n, uint64_t deadline_ms)
{
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(c, c->fd, POLLOUT, deadline_ms) != 0)
                return ST_ERROR;
        } else {
            return ST_ERROR;
        }
    }
    return 0;
}

/* Waits (until deadline_ms) for bytes and feeds them to the reader.
 * Returns 1 when some were fed, 0 when interrupted (call again), or the
 * wait's error (-ETIMEDOUT, -ECANCELED, -EIO), -EPIPE when the connection
 * closed, -EPROTO when the reader refused them (c->resp.err). */
static int feed_more(struct etcd_client *c, uint64_t deadline_ms)
{
    char in[16384];
    int w = wait_fd(c, c->fd, POLLIN, deadline_ms);
    if (w != 0)
        return w;
    ssize_t r = recv(c->fd, in, sizeof in, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (r <= 0)
        return -EPIPE;
    size_t used;
    return etcd_resp_feed(&c->resp, in, (size_t)r, &used) == ST_ERROR ? -EPROTO : 1;
}

/* Receives into the reader until the head of the answer is read (or, with
 * whole, all of it). Returns 0, or ST_ERROR with c->err. */
static int receive(struct etcd_client *c, bool whole, uint64_t deadline_ms, bool *got_any)
{
    while (c->resp.state != ETCD_RESP_DONE && (whole || c->resp.state == ETCD_RESP_HEAD)) {
        int rc = feed_more(c, deadline_ms);
        *got_any |= rc == 1 || rc == -EPROTO;
        if (rc == -EPROTO)
            return set_err(c, false, "%s", c->resp.err);
        if (rc == -EPIPE)
            return set_err(c, true, "%s", "connection closed");
        if (rc < 0)
            return set_err(c, true, "%s", rc == -ECANCELED ? "canceled" : "no answer in time");
    }
    return 0;
}

/* Sends the request in c->req and reads the head of the answer (and, with
 * whole, its body). Retries once on a fresh connection when a kept-alive
 * one turns out closed. */
static int exchange(struct etcd_client *c, bool whole)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        bool reused = c->fd >= 0;
        if (ensure_connected(c) != 0)
            return ST_ERROR;
        uint64_t deadline = clock_now_ms() + c->timeout_ms;
        etcd_resp_reset(&c->resp);
        bool got_any = false;
        int rc = send_all(c, c->req.data, c->req.len, deadline) == 0
                     ? receive(c, whole, deadline, &got_any)
                     : set_err(c, true, "%s", "connection closed");
        if (rc == 0)
            return 0;
        etcd_client_disconnect(c);
        if (!reused || got_any || canceled(c))
            return ST_ERROR;
    }
    return ST_ERROR;
}

static void build_request(struct etcd_client *c, const char *path, const char *body, size_t len)
{
    const struct etcd_endpoint *ep = &c->endpoints[c->current];
    buf_reset(&c->req);
    buf_printf(&c->req,
               "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n\r\n",
               path, ep->host, ep->port, len);
    buf_append(&c->req, body, len);
}

int etcd_call(struct etcd_client *c, const char *path, const char *body, size_t len,
              struct arena *a, struct json_value **out)
{
    if (c->watching)
        etcd_client_disconnect(c);
    build_request(c, path, body, len);
    if (c->req.err)
        return set_err(c, false, "%s", "request too large");
    if (exchange(c, true) != 0)
        return ST_ERROR;
    if (c->resp.close)
        etcd_client_disconnect(c);
    const char *jerr;
    size_t off;
    struct json_value *v = NULL;
    bool parsed = json_parse(a, c->resp.body.data ? c->resp.body.data : "", c->resp.body.len, NULL,
                             &v, &jerr, &off) == ST_OK &&
                  v->type == JSON_OBJECT;
    const char *emsg = parsed ? etcd_json_error(v) : NULL;
    if (emsg)
        return set_err(c, false, "%s", emsg);
    if (c->resp.status != 200) {
        char st[16];
        snprintf(st, sizeof st, "%d", c->resp.status);
        return set_err(c, false, "HTTP status %s", st);
    }
    if (!parsed)
        return set_err(c, false, "%s", "the answer is not a JSON object");
    *out = v;
    return 0;
}

static int call_simple(struct etcd_client *c, const char *path, struct buf *body, struct arena *a,
                       struct json_value **out)
{
    if (body->err)
        return set_err(c, false, "%s", "request too large");
    return etcd_call(c, path, body->data, body->len, a, out);
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted)
{
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct buf b;
    buf_init(&b, 256);
    buf_printf(&b, "{\"TTL\":%lld}", (long long)ttl_s);
    struct json_value *v;
    int rc = call_simple(c, "/v3/lease/grant", &b, &a, &v);
    if (rc == 0 &&
        (etcd_json_i64(v, "ID", id) != 0 || etcd_json_i64(v, "TTL", granted) != 0 || *id == 0))
        rc = set_err(c, false, "%s", "lease grant answer without an ID");
    buf_free(&b);
    arena_free(&a);
    return rc;
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl)
{
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct buf b;
    buf_init(&b, 256);
    buf_printf(&b, "{\"ID\":\"%lld\"}", (long long)id);
    struct json_value *v;
    int rc = call_simple(c, "/v3/lease/keepalive", &b, &a, &v);
    if (rc == 0) {
        /* A streamed method: its one answer is {"result": {...}}. */
        const struct json_value *res = json_get(v, "result");
        if (!res || etcd_json_i64(res, "TTL", ttl) != 0)
            rc = set_err(c, false, "%s", "malformed keepalive answer");
    }
    buf_free(&b);
    arena_free(&a);
    return rc;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct buf b;
    buf_init(&b, 256);
    buf_printf(&b, "{\"ID\":\"%lld\"}", (long long)id);
    struct json_value *v;
    int rc = call_simple(c, "/v3/lease/revoke", &b, &a, &v);
    buf_free(&b);
    arena_free(&a);
    return rc;
}

int etcd_put(struct etcd_client *c, const char *key, const char *value, size_t value_len,
             int64_t lease)
{
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct buf b;
    buf_init(&b, (value_len + strlen(key)) / 3 * 4 + 256);
    buf_puts(&b, "{\"key\":\"");
    base64_append(&b, key, strlen(key));
    buf_puts(&b, "\",\"value\":\"");
    base64_append(&b, value, value_len);
    buf_printf(&b, "\",\"lease\":\"%lld\"}", (long long)lease);
    struct json_value *v;
    int rc = call_simple(c, "/v3/kv/put", &b, &a, &v);
    buf_free(&b);
    arena_free(&a);
    return rc;
}

/* Appends "key":"..." and, for a prefix, "range_end":"..." to b. */
static void key_range(struct buf *b, const char *key, bool prefix)
{
    size_t n = strlen(key);
    buf_puts(b, "\"key\":\"");
    base64_append(b, key, n);
    buf_putc(b, '"');
    if (prefix) {
        char end[1024];
        size_t m = n <= sizeof end ? etcd_prefix_end(key, n, end) : 0;
        buf_puts(b, ",\"range_end\":\"");
        if (m)
            base64_append(b, end, m);
        else
            buf_puts(b, "AA=="); /* "\0": every key */
        buf_putc(b, '"');
    }
}

int etcd_delete(struct etcd_client *c, const char *key, bool prefix, int64_t *deleted)
{
    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct buf b;
    buf_init(&b, 4096);
    buf_putc(&b, '{');
    key_range(&b, key, prefix);
    buf_putc(&b, '}');
    struct json_value *v;
    int64_t n = 0;
    int rc = call_simple(c, "/v3/kv/deleterange", &b, &a, &v);
    if (rc == 0 && etcd_json_i64(v, "deleted", &n) != 0)
        rc = set_err(c, false, "%s", "malformed deleterange answer");
    if (deleted)
        *deleted = n;
    buf_free(&b);
    arena_free(&a);
    return rc;
}

int etcd_range_prefix(struct etcd_client *c, const char *prefix, struct arena *a,
                      struct etcd_kv **kvs, uint32_t *n, int64_t *revision)
{
    struct buf b;
    buf_init(&b, 4096);
    buf_putc(&b, '{');
    key_range(&b, prefix, true);
    buf_putc(&b, '}');
    int rc = ST_ERROR;
    if (b.err) {
        set_err(c, false, "%s", "prefix too long");
    } else {
        if (c->watching)
            etcd_client_disconnect(c);
        build_request(c, "/v3/kv/range", b.data, b.len);
        if (exchange(c, true) == 0) {
            if (c->resp.close)
                etcd_client_disconnect(c);
            const char *err = NULL;
            if (etcd_parse_range(a, c->resp.body.data ? c->resp.body.data : "", c->resp.body.len,
                                 kvs, n, revision, &err) == 0 &&
                c->resp.status == 200)
                rc = 0;
            else
                set_err(c, false, "%s", err ? err : "range failed");
        }
    }
    buf_free(&b);
    return rc;
}

int etcd_watch_open(struct etcd_client *c, const char *prefix, int64_t start_revision)
{
    etcd_client_disconnect(c);
    struct buf b;
    buf_init(&b, 4096);
    buf_puts(&b, "{\"create_request\":{");
    key_range(&b, prefix, true);
    if (start_revision > 0)
        buf_printf(&b, ",\"start_revision\":\"%lld\"", (long long)start_revision);
    buf_puts(&b, "}}");
    int rc = ST_ERROR;
    if (b.err) {
        set_err(c, false, "%s", "prefix too long");
    } else {
        build_request(c, "/v3/watch", b.data, b.len);
        if (exchange(c, false) == 0) {
            if (c->resp.status == 200) {
                c->watching = true;
                rc = 0;
            } else {
                char st[16];
                snprintf(st, sizeof st, "%d", c->resp.status);
                set_err(c, false, "watch: HTTP status %s", st);
                etcd_client_disconnect(c);
            }
        }
    }
    buf_free(&b);
    return rc;
}

int etcd_watch_next(struct etcd_client *c, uint32_t wait_ms, struct arena *a,
                    struct etcd_watch_msg *out)
{
    if (!c->watching || c->fd < 0)
        return set_err(c, true, "%s", "no watch open");
    uint64_t deadline = clock_now_ms() + wait_ms;
    for (;;) {
        if (etcd_resp_take_line(&c->resp, &c->line)) {
            if (c->line.len == 0 || (c->line.len == 1 && c->line.data[0] == '\r'))
                continue;
            const char *err = NULL;
            if (etcd_parse_watch(a, c->line.data, c->line.len, out, &err) != 0)
                return set_err(c, false, "watch: %s", err);
            return 0;
        }
        if (c->resp.state == ETCD_RESP_DONE)
            return set_err(c, true, "%s", "watch stream ended");
        int rc = feed_more(c, deadline);
        if (rc == -ETIMEDOUT)
            return 1;
        if (rc == -EPROTO)
            return set_err(c, false, "watch: %s", c->resp.err);
        if (rc == -EPIPE)
            return set_err(c, true, "%s", "watch connection closed");
        if (rc < 0)
            return set_err(c, true, "%s", rc == -ECANCELED ? "canceled" : "poll failed");
    }
}
