#include "obs/otlp.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/numfmt.h"
#include "obs/jsonline.h"

#define HOST_MAX 256
#define PATH_MAX_LEN 512
/* Largest response head + body read from the collector. */
#define RESPONSE_MAX (64 * 1024)
/* An encoded span is at most a few KiB; the body ceiling bounds a batch. */
#define BODY_MAX ((size_t)64 << 20)
/* At most one failure line per this many milliseconds. */
#define WARN_EVERY_MS 10000

struct exporter {
    struct otlp_config cfg;
    char host[HOST_MAX];
    char path[PATH_MAX_LEN];
    char service[128];
    int port;
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct span_record *ring; /* cfg.buffer_spans entries */
    uint32_t head, count;
    bool stopping;
    struct span_record *batch; /* the thread's copy of a batch */
    struct buf body;
    int fd; /* kept-alive connection to the collector, or -1 */
    uint64_t last_warn_ms;
};

static struct exporter *exporter; /* set by otlp_start, read by submit */
static atomic_bool running;
static atomic_uint_fast64_t st_exported, st_dropped, st_failed, st_exports_failed;

/* ---- encoding ------------------------------------------------------------- */

/* Upper bound of one encoded span: every text byte escaped (6x), every
 * attribute and link at its longest. */
#define SPAN_JSON_MAX (6 * SPAN_TEXT_MAX + SPAN_MAX_ATTRS * 160 + SPAN_MAX_LINKS * 80 + 1024)

static void jl_hex(struct jline *l, const uint8_t *id, size_t n)
{
    char hex[2 * TRACE_ID_BYTES + 1];
    trace_hex(id, n, hex);
    jl_lit(l, "\"");
    jl_put(l, hex, 2 * n);
    jl_lit(l, "\"");
}

static void jl_attr(struct jline *l, const struct span_record *r, const struct span_attr *a)
{
    jl_lit(l, "{\"key\":");
    jl_cstr(l, a->key);
    switch (a->type) {
    case SPAN_ATTR_STRING:
        jl_lit(l, ",\"value\":{\"stringValue\":");
        jl_str(l, r->text + a->str_off, a->str_len);
        break;
    case SPAN_ATTR_INT:
        /* proto3 JSON: 64-bit integers are strings of digits */
        jl_lit(l, ",\"value\":{\"intValue\":\"");
        jl_i64(l, a->v.i);
        jl_lit(l, "\"");
        break;
    case SPAN_ATTR_DOUBLE: {
        char tmp[NUMFMT_MAX];
        jl_lit(l, ",\"value\":{\"doubleValue\":");
        jl_put(l, tmp, numfmt_f64(tmp, a->v.d));
        break;
    }
    default:
        jl_lit(l, ",\"value\":{\"boolValue\":");
        if (a->v.b)
            jl_lit(l, "true");
        else
            jl_lit(l, "false");
        break;
    }
    jl_lit(l, "}}");
}

static void jl_span(struct jline *l, const struct span_record *r)
{
    jl_lit(l, "{\"traceId\":");
    jl_hex(l, r->trace_id, TRACE_ID_BYTES);
    jl_lit(l, ",\"spanId\":");
    jl_hex(l, r->span_id, SPAN_ID_BYTES);
    if (r->state_len) {
        jl_lit(l, ",\"traceState\":");
        jl_str(l, r->text + r->state_off, r->state_len);
    }
    if (r->has_parent) {
        jl_lit(l, ",\"parentSpanId\":");
        jl_hex(l, r->parent_span_id, SPAN_ID_BYTES);
    }
    jl_lit(l, ",\"flags\":");
    jl_u64(l, r->flags);
    jl_lit(l, ",\"name\":");
    jl_str(l, r->text + r->name_off, r->name_len);
    jl_lit(l, ",\"kind\":");
    jl_u64(l, r->kind);
    jl_lit(l, ",\"startTimeUnixNano\":\"");
    jl_u64(l, r->start_unix_ns);
    jl_lit(l, "\",\"endTimeUnixNano\":\"");
    jl_u64(l, r->end_unix_ns);
    jl_lit(l, "\",\"attributes\":[");
    for (uint32_t i = 0; i < r->nattrs; i++) {
        if (i)
            jl_lit(l, ",");
        jl_attr(l, r, &r->attrs[i]);
    }
    jl_lit(l, "]");
    if (r->dropped_attrs) {
        jl_lit(l, ",\"droppedAttributesCount\":");
        jl_u64(l, r->dropped_attrs);
    }
    if (r->nlinks) {
        jl_lit(l, ",\"links\":[");
        for (uint32_t i = 0; i < r->nlinks; i++) {
            if (i)
                jl_lit(l, ",");
            jl_lit(l, "{\"traceId\":");
            jl_hex(l, r->links[i].trace_id, TRACE_ID_BYTES);
            jl_lit(l, ",\"spanId\":");
            jl_hex(l, r->links[i].span_id, SPAN_ID_BYTES);
            jl_lit(l, "}");
        }
        jl_lit(l, "]");
    }
    if (r->dropped_links) {
        jl_lit(l, ",\"droppedLinksCount\":");
        jl_u64(l, r->dropped_links);
    }
    jl_lit(l, ",\"status\":{");
    if (r->msg_len) {
        jl_lit(l, "\"message\":");
        jl_str(l, r->text + r->msg_off, r->msg_len);
        jl_lit(l, ",");
    }
    jl_lit(l, "\"code\":");
    jl_u64(l, (uint64_t)r->status_code);
    jl_lit(l, "}}");
}

void otlp_encode(struct buf *out, const struct span_record *spans, size_t n,
                 const char *service_name)
{
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "resourceSpans");
    json_w_arr_begin(&w);
    json_w_obj_begin(&w);
    json_w_key(&w, "resource");
    json_w_obj_begin(&w);
    json_w_key(&w, "attributes");
    json_w_arr_begin(&w);
    static const char *const keys[] = {"service.name", "service.version", "telemetry.sdk.name",
                                       "telemetry.sdk.language"};
    const char *values[] = {service_name, INFERD_VERSION, "inferd", "c"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_w_obj_begin(&w);
        json_w_key(&w, "key");
        json_w_cstr(&w, keys[i]);
        json_w_key(&w, "value");
        json_w_obj_begin(&w);
        json_w_key(&w, "stringValue");
        json_w_cstr(&w, values[i]);
        json_w_obj_end(&w);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    json_w_key(&w, "scopeSpans");
    json_w_arr_begin(&w);
    json_w_obj_begin(&w);
    json_w_key(&w, "scope");
    json_w_obj_begin(&w);
    json_w_key(&w, "name");
    json_w_cstr(&w, "inferd");
    json_w_key(&w, "version");
    json_w_cstr(&w, INFERD_VERSION);
    json_w_obj_end(&w);
    json_w_key(&w, "spans");
    /* The spans themselves: built in place with the fast line builder. */
    if (!json_w_value_buf(&w))
        return;
    buf_putc(out, '[');
    for (size_t i = 0; i < n && !out->err; i++) {
        if (buf_reserve(out, SPAN_JSON_MAX + 1) != 0)
            break;
        struct jline l;
        jl_init(&l, out->data + out->len, out->cap - out->len);
        if (i)
            jl_lit(&l, ",");
        jl_span(&l, &spans[i]);
        if (l.overflow) {
            out->err = -E2BIG;
            break;
        }
        out->len += l.n;
    }
    buf_putc(out, ']');
    json_w_obj_end(&w);
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    json_w_arr_end(&w);
    json_w_obj_end(&w);
}

/* ---- the HTTP client ---------------------------------------------------------- */

int otlp_parse_url(const char *url, char *host, size_t host_cap, int *port, char *path,
                   size_t path_cap)
{
    static const char scheme[] = "http://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return -1;
    const char *h = url + sizeof scheme - 1;
    const char *slash = strchr(h, '/');
    const char *end = slash ? slash : h + strlen(h);
    const char *colon = NULL;
    if (*h == '[') { /* [IPv6]:port */
        const char *close = memchr(h, ']', (size_t)(end - h));
        if (!close)
            return -1;
        colon = close[1] == ':' ? close + 1 : NULL;
        if (!colon && close + 1 != end)
            return -1;
        size_t n = (size_t)(close - h - 1);
        if (n == 0 || n >= host_cap)
            return -1;
        memcpy(host, h + 1, n);
        host[n] = '\0';
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        size_t n = (size_t)((colon ? colon : end) - h);
        if (n == 0 || n >= host_cap)
            return -1;
        memcpy(host, h, n);
        host[n] = '\0';
    }
    *port = 80;
    if (colon) {
        long p = 0;
        const char *c = colon + 1;
        if (c == end)
            return -1;
        for (; c < end; c++) {
            if (*c < '0' || *c > '9')
                return -1;
            p = p * 10 + (*c - '0');
            if (p > 65535)
                return -1;
        }
        if (p == 0)
            return -1;
        *port = (int)p;
    }
    const char *p = slash ? slash : "/v1/traces";
    if (strlen(p) >= path_cap)
        return -1;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return -1;
    snprintf(path, path_cap, "%s", p);
    return 0;
}

static void conn_close(struct exporter *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
}

static int conn_open(struct exporter *e)
{
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", e->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(e->host, portstr, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int soerr = 0;
            socklen_t len = sizeof soerr;
            if (poll(&pfd, 1, (int)e->cfg.timeout_ms) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
                rc = 0;
        }
        if (rc != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    e->fd = fd;
    return 0;
}

/* Waits until fd is ready for `events` or the deadline passes. */
static int wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = clock_now_ms();
        if (now >= deadline_ms)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = events};
        int rc = poll(&pfd, 1, (int)(deadline_ms - now));
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline_ms)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, POLLOUT, deadline_ms) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads one response; returns its status (or -1). Sets *keep when the
 * connection may be reused. Bodies are read by Content-Length only; a
 * chunked or unbounded response closes the connection afterwards. */
static int read_response(int fd, uint64_t deadline_ms, bool *keep)
{
    char buf[4096];
    size_t len = 0, total = 0;
    *keep = false;
    for (;;) {
        char *end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
        if (end) {
            buf[len < sizeof buf ? len : sizeof buf - 1] = '\0';
            int status = 0;
            if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
                return -1;
            size_t head = (size_t)(end - buf) + 4;
            long long clen = -1;
            bool close_conn = false;
            /* Header names are case-insensitive. */
            for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
                char *l = line + 2;
                if (strncasecmp(l, "content-length:", 15) == 0)
                    clen = strtoll(l + 15, NULL, 10);
                else if (strncasecmp(l, "connection:", 11) == 0 && strstr(l, "close") &&
                         strstr(l, "close") < strstr(l, "\r\n"))
                    close_conn = true;
                else if (strncasecmp(l, "transfer-encoding:", 18) == 0)
                    close_conn = true;
            }
            if (clen < 0 || clen > RESPONSE_MAX)
                return status; /* the body's end is unknown: do not reuse */
            size_t have = len - head;
            size_t want = (size_t)clen;
            while (have < want) {
                if (wait_fd(fd, POLLIN, deadline_ms) != 0)
                    return -1;
                ssize_t r = recv(fd, buf, sizeof buf < want - have ? sizeof buf : want - have, 0);
                if (r <= 0) {
                    if (r < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                    return status;
                }
                have += (size_t)r;
            }
            *keep = !close_conn && have == want;
            return status;
        }
        if (len == sizeof buf - 1 || total > RESPONSE_MAX)
            return -1;
        if (wait_fd(fd, POLLIN, deadline_ms) != 0)
            return -1;
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (r == 0)
            return -1;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        len += (size_t)r;
        total += (size_t)r;
    }
}

/* POSTs e->body. Returns the HTTP status, or -1 when the exchange failed. */
static int post_body(struct exporter *e)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        /* A kept-alive connection the collector closed meanwhile fails on
         * first use: retry once on a fresh one. */
        bool reused = e->fd >= 0;
        if (!reused && conn_open(e) != 0)
            return -1;
        uint64_t deadline = clock_now_ms() + e->cfg.timeout_ms;
        char head[1024];
        int n = snprintf(head, sizeof head,
                         "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nUser-Agent: inferd/" INFERD_VERSION "\r\n\r\n",
                         e->path, e->host, e->port, e->body.len);
        bool keep = false;
        int status = -1;
        if (send_all(e->fd, head, (size_t)n, deadline) == 0 &&
            send_all(e->fd, e->body.data, e->body.len, deadline) == 0)
            status = read_response(e->fd, deadline, &keep);
        if (!keep)
            conn_close(e);
        if (status >= 0 || !reused)
            return status;
    }
    return -1;
}

static void warn_failure(struct exporter *e, const char *what, int status, uint32_t n)
{
    uint64_t now = clock_now_ms();
    if (e->last_warn_ms && now - e->last_warn_ms < WARN_EVERY_MS)
        return;
    e->last_warn_ms = now;
    if (status > 0)
        log_warn("otlp export to %s:%d%s: %s %d; %u spans dropped", e->host, e->port, e->path,
                 what, status, n);
    else
        log_warn("otlp export to %s:%d%s: %s; %u spans dropped", e->host, e->port, e->path, what,
                 n);
}

/* Returns false when the batch was lost. */
static bool export_batch(struct exporter *e, uint32_t n)
{
    buf_reset(&e->body);
    otlp_encode(&e->body, e->batch, n, e->service);
    if (e->body.err) {
        atomic_fetch_add(&st_failed, n);
        atomic_fetch_add(&st_exports_failed, 1);
        warn_failure(e, "encoding failed", 0, n);
        return false;
    }
    int status = post_body(e);
    if (status >= 200 && status < 300) {
        atomic_fetch_add(&st_exported, n);
        return true;
    }
    atomic_fetch_add(&st_failed, n);
    atomic_fetch_add(&st_exports_failed, 1);
    warn_failure(e, status < 0 ? "collector unreachable" : "collector answered", status, n);
    return false;
}

/* Copies the used parts of a record: the fixed fields and attributes, the
 * links in use and the text in use (a record is mostly unused room). */
static void span_copy(struct span_record *dst, const struct span_record *src)
{
    memcpy(dst, src, offsetof(struct span_record, links));
    memcpy(dst->links, src->links, src->nlinks * sizeof src->links[0]);
    dst->text_len = src->text_len;
    memcpy(dst->text, src->text, src->text_len);
}

/* Moves up to batch_size spans from the ring (lock held). */
static uint32_t take_batch(struct exporter *e)
{
    uint32_t n = e->count < e->cfg.batch_size ? e->count : e->cfg.batch_size;
    for (uint32_t i = 0; i < n; i++) {
        span_copy(&e->batch[i], &e->ring[e->head]);
        e->head = (e->head + 1) % e->cfg.buffer_spans;
    }
    e->count -= n;
    return n;
}

static void *exporter_main(void *arg)
{
    struct exporter *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->count < e->cfg.batch_size && !e->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t until = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                             (uint64_t)e->cfg.interval_ms * 1000000ull;
            ts.tv_sec = (time_t)(until / 1000000000ull);
            ts.tv_nsec = (long)(until % 1000000000ull);
            pthread_cond_timedwait(&e->cond, &e->lock, &ts);
        }
        bool stopping = e->stopping;
        uint32_t n = take_batch(e);
        pthread_mutex_unlock(&e->lock);
        bool ok = n == 0 || export_batch(e, n);
        pthread_mutex_lock(&e->lock);
        if (stopping && !ok) {
            /* Shutting down and the collector is not answering: do not
             * wait a timeout per remaining batch. */
            atomic_fetch_add(&st_failed, e->count);
            e->count = 0;
        }
        if (stopping && e->count == 0)
            break;
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static void exporter_free(struct exporter *e)
{
    conn_close(e);
    buf_free(&e->body);
    mem_free(e->ring);
    mem_free(e->batch);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
    mem_free(e);
}

int otlp_start(const struct otlp_config *cfg, struct error *err)
{
    struct exporter *e = mem_calloc(1, sizeof *e);
    if (!e)
        return error_set(err, 500, "out of memory");
    e->cfg = *cfg;
    e->fd = -1;
    if (!e->cfg.batch_size)
        e->cfg.batch_size = 256;
    if (!e->cfg.interval_ms)
        e->cfg.interval_ms = 1000;
    if (!e->cfg.buffer_spans)
        e->cfg.buffer_spans = 2048;
    if (!e->cfg.timeout_ms)
        e->cfg.timeout_ms = 2000;
    if (e->cfg.batch_size > e->cfg.buffer_spans)
        e->cfg.batch_size = e->cfg.buffer_spans;
    snprintf(e->service, sizeof e->service, "%s", cfg->service_name ? cfg->service_name : "inferd");
    pthread_mutex_init(&e->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    buf_init(&e->body, BODY_MAX);
    if (otlp_parse_url(cfg->endpoint, e->host, sizeof e->host, &e->port, e->path,
                       sizeof e->path) != 0) {
        exporter_free(e);
        return error_set(err, 400, "--otlp-endpoint: expected http://host[:port][/path], got '%s'",
                         cfg->endpoint);
    }
    e->ring = mem_calloc(e->cfg.buffer_spans, sizeof *e->ring);
    e->batch = mem_calloc(e->cfg.batch_size, sizeof *e->batch);
    if (!e->ring || !e->batch) {
        exporter_free(e);
        return error_set(err, 500, "out of memory for the span buffer");
    }
    int rc = pthread_create(&e->tid, NULL, exporter_main, e);
    if (rc) {
        exporter_free(e);
        return error_set(err, 500, "cannot start the OTLP exporter: %s", strerror(rc));
    }
    exporter = e;
    atomic_store(&running, true);
    return 0;
}

void otlp_stop(void)
{
    struct exporter *e = exporter;
    if (!e)
        return;
    atomic_store(&running, false);
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->tid, NULL);
    exporter = NULL;
    exporter_free(e);
}

void otlp_submit(const struct span_record *r)
{
    if (!atomic_load_explicit(&running, memory_order_acquire))
        return;
    struct exporter *e = exporter;
    pthread_mutex_lock(&e->lock);
    if (e->count == e->cfg.buffer_spans || e->stopping) {
        pthread_mutex_unlock(&e->lock);
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed);
        return;
    }
    uint32_t slot = (e->head + e->count) % e->cfg.buffer_spans;
    span_copy(&e->ring[slot], r);
    e->count++;
    if (e->count == e->cfg.batch_size)
        pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void otlp_stats(struct otlp_stats *out)
{
    out->spans_exported = atomic_load(&st_exported);
    out->spans_dropped = atomic_load(&st_dropped);
    out->spans_failed = atomic_load(&st_failed);
    out->exports_failed = atomic_load(&st_exports_failed);
}
