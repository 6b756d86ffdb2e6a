#include "obs/otlp.h"

#include <errno.h>
#include <netinet/in.h>
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
#include "base/status.h"
#include "base/thread.h"
#include "net/sock.h"
#include "obs/jsonline.h"

#define HOST_MAX 256
#define PATH_MAX_LEN 512
/* Largest response head + body read from the collector. */
#define RESPONSE_MAX (64 * 1024)
/* An encoded span is at most a few KiB; the body ceiling bounds a batch. */
#define BODY_MAX ((size_t)64 << 20)
/* The byte bound of a span queue, per span of buffer_spans (a packed
 * record, pack() below, is typically under 1 KiB). */
#define QUEUE_BYTES_PER_SPAN 4096
/* At most one failure line per this many milliseconds. */
#define WARN_EVERY_MS 10000

/* Spans as submitted, packed back to back (pack()); ends[i] is where span
 * i's bytes end. At most buffer_spans spans and QUEUE_BYTES_PER_SPAN bytes
 * per span on average. The exporter thread encodes them. */
struct span_queue {
    struct buf text;
    uint32_t *ends;
    uint32_t count;
};

struct exporter {
    struct otlp_config cfg;
    char host[HOST_MAX];
    char path[PATH_MAX_LEN];
    char service[128];
    int port;
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Spans waiting (under lock), packed by the submitting thread, and the
     * ones the thread is sending (its own): swapped, never copied. */
    struct span_queue waiting, sending;
    struct span_record unpacked; /* the span being encoded */
    bool stopping;
    struct buf envelope_head; /* the request up to the spans array's '[' */
    struct buf body;
    int fd; /* kept-alive connection to the collector, or -1 */
    uint64_t last_warn_ms;
};

static struct exporter *exporter; /* set by otlp_start, read by submit */
static atomic_bool running;
static atomic_uint_fast64_t st_exported, st_dropped, st_failed, st_exports_failed;

/* ---- encoding ------------------------------------------------------------- */

static char *jc_hex(char *p, const uint8_t *id, size_t n)
{
    *p++ = '"';
    span_hex(id, n, p); /* its NUL is overwritten by the closing quote */
    p += 2 * n;
    *p++ = '"';
    return p;
}

static char *jc_attr(char *p, const struct span_record *r, const struct span_attr *a)
{
    p = jc_lit(p, "{\"key\":");
    p = jc_str(p, a->key, a->key_len);
    switch (a->type) {
    case SPAN_ATTR_STRING:
        p = jc_lit(p, ",\"value\":{\"stringValue\":");
        p = jc_str(p, r->text + a->str_off, a->str_len);
        break;
    case SPAN_ATTR_INT:
        /* proto3 JSON: 64-bit integers are strings of digits */
        p = jc_lit(p, ",\"value\":{\"intValue\":\"");
        p = jc_i64(p, a->v.i);
        p = jc_lit(p, "\"");
        break;
    case SPAN_ATTR_DOUBLE:
        p = jc_lit(p, ",\"value\":{\"doubleValue\":");
        p += numfmt_f64(p, a->v.d);
        break;
    default:
        p = jc_lit(p, ",\"value\":{\"boolValue\":");
        p = a->v.b ? jc_lit(p, "true") : jc_lit(p, "false");
        break;
    }
    return jc_lit(p, "}}");
}

/* Encodes one span at out (room for OTLP_SPAN_JSON_MAX bytes); returns its
 * length. */
static size_t encode_span(char *out, const struct span_record *r)
{
    char *p = jc_lit(out, "{\"traceId\":");
    p = jc_hex(p, r->trace_id, TRACE_ID_BYTES);
    p = jc_lit(p, ",\"spanId\":");
    p = jc_hex(p, r->span_id, SPAN_ID_BYTES);
    if (r->state_len) {
        p = jc_lit(p, ",\"traceState\":");
        p = jc_str(p, r->text + r->state_off, r->state_len);
    }
    if (r->has_parent) {
        p = jc_lit(p, ",\"parentSpanId\":");
        p = jc_hex(p, r->parent_span_id, SPAN_ID_BYTES);
    }
    p = jc_lit(p, ",\"flags\":");
    p = jc_u64(p, r->flags);
    p = jc_lit(p, ",\"name\":");
    p = jc_str(p, r->text + r->name_off, r->name_len);
    p = jc_lit(p, ",\"kind\":");
    p = jc_u64(p, r->kind);
    p = jc_lit(p, ",\"startTimeUnixNano\":\"");
    p = jc_u64(p, r->start_unix_ns);
    p = jc_lit(p, "\",\"endTimeUnixNano\":\"");
    p = jc_u64(p, r->end_unix_ns);
    p = jc_lit(p, "\",\"attributes\":[");
    for (uint32_t i = 0; i < r->nattrs; i++) {
        if (i)
            *p++ = ',';
        p = jc_attr(p, r, &r->attrs[i]);
    }
    *p++ = ']';
    if (r->dropped_attrs) {
        p = jc_lit(p, ",\"droppedAttributesCount\":");
        p = jc_u64(p, r->dropped_attrs);
    }
    if (r->nlinks) {
        p = jc_lit(p, ",\"links\":[");
        for (uint32_t i = 0; i < r->nlinks; i++) {
            if (i)
                *p++ = ',';
            p = jc_lit(p, "{\"traceId\":");
            p = jc_hex(p, r->links[i].trace_id, TRACE_ID_BYTES);
            p = jc_lit(p, ",\"spanId\":");
            p = jc_hex(p, r->links[i].span_id, SPAN_ID_BYTES);
            *p++ = '}';
        }
        *p++ = ']';
    }
    if (r->dropped_links) {
        p = jc_lit(p, ",\"droppedLinksCount\":");
        p = jc_u64(p, r->dropped_links);
    }
    p = jc_lit(p, ",\"status\":{");
    if (r->msg_len) {
        p = jc_lit(p, "\"message\":");
        p = jc_str(p, r->text + r->msg_off, r->msg_len);
        *p++ = ',';
    }
    p = jc_lit(p, "\"code\":");
    p = jc_u64(p, (uint64_t)r->status_code);
    p = jc_lit(p, "}}");
    return (size_t)(p - out);
}

/* The ExportTraceServiceRequest around the spans: one resource, one scope
 * "inferd". The head ends with the spans array's '['. */
static void envelope_head(struct buf *out, const char *service_name)
{
    static const char *const keys[] = {"service.name", "service.version", "telemetry.sdk.name",
                                       "telemetry.sdk.language"};
    const char *values[] = {service_name, INFERD_VERSION, "inferd", "c"};
    char tmp[1024];
    struct jline l;
    jl_init(&l, tmp, sizeof tmp);
    jl_lit(&l, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (i)
            jl_lit(&l, ",");
        jl_lit(&l, "{\"key\":");
        jl_cstr(&l, keys[i]);
        jl_lit(&l, ",\"value\":{\"stringValue\":");
        jl_cstr(&l, values[i]);
        jl_lit(&l, "}}");
    }
    jl_lit(&l, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"inferd\",\"version\":");
    jl_cstr(&l, INFERD_VERSION);
    jl_lit(&l, "},\"spans\":[");
    if (l.overflow)
        out->err = -E2BIG;
    else
        buf_append(out, l.p, l.n);
}

static const char envelope_tail[] = "]}]}]}";

void otlp_encode(struct buf *out, const struct span_record *spans, size_t n,
                 const char *service_name)
{
    envelope_head(out, service_name);
    for (size_t i = 0; i < n && !out->err; i++) {
        if (buf_reserve(out, OTLP_SPAN_JSON_MAX + 1) != 0)
            break;
        if (i)
            out->data[out->len++] = ',';
        out->len += encode_span(out->data + out->len, &spans[i]);
    }
    buf_append(out, envelope_tail, sizeof envelope_tail - 1);
}

/* ---- the HTTP client ---------------------------------------------------------- */

int otlp_parse_url(const char *url, char *host, size_t host_cap, int *port, char *path,
                   size_t path_cap)
{
    static const char scheme[] = "http://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return ST_ERROR;
    const char *h = url + sizeof scheme - 1;
    const char *slash = strchr(h, '/');
    const char *end = slash ? slash : h + strlen(h);
    const char *colon = NULL;
    if (*h == '[') { /* [IPv6]:port */
        const char *close = memchr(h, ']', (size_t)(end - h));
        if (!close)
            return ST_ERROR;
        colon = close[1] == ':' ? close + 1 : NULL;
        if (!colon && close + 1 != end)
            return ST_ERROR;
        size_t n = (size_t)(close - h - 1);
        if (n == 0 || n >= host_cap)
            return ST_ERROR;
        memcpy(host, h + 1, n);
        host[n] = '\0';
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        size_t n = (size_t)((colon ? colon : end) - h);
        if (n == 0 || n >= host_cap)
            return ST_ERROR;
        memcpy(host, h, n);
        host[n] = '\0';
    }
    *port = 80;
    if (colon) {
        long p = 0;
        const char *c = colon + 1;
        if (c == end)
            return ST_ERROR;
        for (; c < end; c++) {
            if (*c < '0' || *c > '9')
                return ST_ERROR;
            p = p * 10 + (*c - '0');
            if (p > 65535)
                return ST_ERROR;
        }
        if (p == 0)
            return ST_ERROR;
        *port = (int)p;
    }
    const char *p = slash ? slash : "/v1/traces";
    if (strlen(p) >= path_cap)
        return ST_ERROR;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return ST_ERROR;
    snprintf(path, path_cap, "%s", p);
    return 0;
}

static void conn_close(struct exporter *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
}

/* sock_connect's wait: writable within the export timeout. */
static int wait_writable(int fd, void *arg)
{
    const struct exporter *e = arg;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    return poll(&pfd, 1, (int)e->cfg.timeout_ms) == 1 ? ST_OK : ST_ERROR;
}

static int conn_open(struct exporter *e)
{
    int fd = sock_connect(e->host, e->port, wait_writable, e);
    if (fd < 0)
        return ST_ERROR;
    e->fd = fd;
    return 0;
}

/* Waits until fd is ready for `events` or the deadline passes. */
static int wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = clock_now_ms();
        if (now >= deadline_ms)
            return ST_ERROR;
        struct pollfd pfd = {.fd = fd, .events = events};
        int rc = poll(&pfd, 1, (int)(deadline_ms - now));
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return ST_ERROR;
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
                return ST_ERROR;
        } else {
            return ST_ERROR;
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
                return ST_ERROR;
            size_t head = (size_t)(end - buf) + 4;
            long long clen = -1;
            bool close_conn = false;
            /* Header names are case-insensitive. */
            for (char *line = strstr(buf, "\r\n"); line && line < end;
                 line = strstr(line + 2, "\r\n")) {
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
                    return ST_ERROR;
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
            return ST_ERROR;
        if (wait_fd(fd, POLLIN, deadline_ms) != 0)
            return ST_ERROR;
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (r == 0)
            return ST_ERROR;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return ST_ERROR;
        }
        len += (size_t)r;
        total += (size_t)r;
    }
}

/* POSTs e->body. Returns the HTTP status, or ST_ERROR when the exchange failed. */
static int post_body(struct exporter *e)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        /* A kept-alive connection the collector closed meanwhile fails on
         * first use: retry once on a fresh one. */
        bool reused = e->fd >= 0;
        if (!reused && conn_open(e) != 0)
            return ST_ERROR;
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
    return ST_ERROR;
}

static void warn_failure(struct exporter *e, const char *what, int status, uint32_t n)
{
    uint64_t now = clock_now_ms();
    if (e->last_warn_ms && now - e->last_warn_ms < WARN_EVERY_MS)
        return;
    e->last_warn_ms = now;
    if (status > 0)
        log_warn("otlp export to %s:%d%s: %s %d; %u spans dropped", e->host, e->port, e->path, what,
                 status, n);
    else
        log_warn("otlp export to %s:%d%s: %s; %u spans dropped", e->host, e->port, e->path, what,
                 n);
}

/* A span record as queued: the record up to its links, the links it has,
 * then the text it uses. Most of a record is room it does not use (64
 * links, 1.5 KiB of text): packed, a request's spans are a few hundred
 * bytes to copy under the lock. */
#define PACKED_HEAD offsetof(struct span_record, links)

static size_t packed_size(const struct span_record *r)
{
    return PACKED_HEAD + sizeof(struct span_link) * r->nlinks + r->text_len;
}

static void pack(char *out, const struct span_record *r)
{
    memcpy(out, r, PACKED_HEAD);
    out += PACKED_HEAD;
    memcpy(out, r->links, sizeof(struct span_link) * r->nlinks);
    out += sizeof(struct span_link) * r->nlinks;
    memcpy(out, r->text, r->text_len);
}

/* The record pack() wrote in len bytes at in. */
static void unpack(struct span_record *r, const char *in, size_t len)
{
    memcpy(r, in, PACKED_HEAD);
    in += PACKED_HEAD;
    size_t links = sizeof(struct span_link) * r->nlinks;
    memcpy(r->links, in, links);
    r->text_len = (uint16_t)(len - PACKED_HEAD - links);
    memcpy(r->text, in + links, r->text_len);
}

/* POSTs spans [from, to) of e->sending, encoded here. Returns false when
 * they were lost. */
static bool export_batch(struct exporter *e, uint32_t from, uint32_t to)
{
    const struct span_queue *q = &e->sending;
    uint32_t n = to - from;
    buf_reset(&e->body);
    buf_append(&e->body, e->envelope_head.data, e->envelope_head.len);
    for (uint32_t i = from; i < to && buf_reserve(&e->body, OTLP_SPAN_JSON_MAX + 1) == 0; i++) {
        size_t start = i ? q->ends[i - 1] : 0;
        unpack(&e->unpacked, q->text.data + start, q->ends[i] - start);
        if (i != from)
            e->body.data[e->body.len++] = ',';
        e->body.len += encode_span(e->body.data + e->body.len, &e->unpacked);
    }
    buf_append(&e->body, envelope_tail, sizeof envelope_tail - 1);
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

static void queue_swap(struct span_queue *a, struct span_queue *b)
{
    struct span_queue t = *a;
    *a = *b;
    *b = t;
}

static void queue_clear(struct span_queue *q)
{
    buf_reset(&q->text);
    q->count = 0;
}

/* Sends e->sending in batches of batch_size; once one fails while shutting
 * down (the collector is not answering), counts the rest as failed instead
 * of waiting a timeout per batch. */
static void export_all(struct exporter *e, bool stopping)
{
    uint32_t total = e->sending.count;
    for (uint32_t from = 0; from < total;) {
        uint32_t to = total - from > e->cfg.batch_size ? from + e->cfg.batch_size : total;
        bool ok = export_batch(e, from, to);
        from = to;
        if (!ok && stopping) {
            atomic_fetch_add(&st_failed, total - from);
            break;
        }
    }
    queue_clear(&e->sending);
}

static void *exporter_main(void *arg)
{
    struct exporter *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->waiting.count < e->cfg.batch_size && !e->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t until = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                             (uint64_t)e->cfg.interval_ms * 1000000ull;
            ts.tv_sec = (time_t)(until / 1000000000ull);
            ts.tv_nsec = (long)(until % 1000000000ull);
            pthread_cond_timedwait(&e->cond, &e->lock, &ts);
        }
        bool stopping = e->stopping;
        queue_swap(&e->waiting, &e->sending);
        pthread_mutex_unlock(&e->lock);
        export_all(e, stopping);
        pthread_mutex_lock(&e->lock);
        if (stopping && e->waiting.count == 0)
            break;
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static void queue_free(struct span_queue *q)
{
    buf_free(&q->text);
    mem_free(q->ends);
}

static int queue_init(struct span_queue *q, uint32_t spans)
{
    buf_init(&q->text, (size_t)spans * QUEUE_BYTES_PER_SPAN);
    q->count = 0;
    q->ends = mem_calloc(spans, sizeof *q->ends);
    return q->ends ? ST_OK : ST_ERROR;
}

static void exporter_free(struct exporter *e)
{
    conn_close(e);
    buf_free(&e->body);
    buf_free(&e->envelope_head);
    queue_free(&e->waiting);
    queue_free(&e->sending);
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
    buf_init(&e->envelope_head, 4096);
    if (otlp_parse_url(cfg->endpoint, e->host, sizeof e->host, &e->port, e->path, sizeof e->path) !=
        0) {
        exporter_free(e);
        return error_set(err, 400, "--otlp-endpoint: expected http://host[:port][/path], got '%s'",
                         cfg->endpoint);
    }
    envelope_head(&e->envelope_head, e->service);
    if (queue_init(&e->waiting, e->cfg.buffer_spans) != 0 ||
        queue_init(&e->sending, e->cfg.buffer_spans) != 0 || e->envelope_head.err) {
        exporter_free(e);
        return error_set(err, 500, "out of memory for the span buffer");
    }
    int rc = thread_start(&e->tid, "otlp-export", exporter_main, e);
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
    size_t len = packed_size(r);
    bool queued = false;
    pthread_mutex_lock(&e->lock);
    struct span_queue *q = &e->waiting;
    if (q->count < e->cfg.buffer_spans && !e->stopping && buf_reserve(&q->text, len) == 0) {
        pack(q->text.data + q->text.len, r);
        q->text.len += len;
        q->ends[q->count++] = (uint32_t)q->text.len;
        queued = true;
        if (q->count == e->cfg.batch_size)
            pthread_cond_signal(&e->cond);
    }
    q->text.err = 0; /* a span that did not fit is dropped, not sticky */
    pthread_mutex_unlock(&e->lock);
    if (!queued)
        atomic_fetch_add_explicit(&st_dropped, 1, memory_order_relaxed);
}

void otlp_stats(struct otlp_stats *out)
{
    out->spans_exported = atomic_load(&st_exported);
    out->spans_dropped = atomic_load(&st_dropped);
    out->spans_failed = atomic_load(&st_failed);
    out->exports_failed = atomic_load(&st_exports_failed);
}
