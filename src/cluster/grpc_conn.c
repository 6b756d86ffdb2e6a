#include "cluster/grpc_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"

#define MAX_OUT_BUFFER (8u << 20)

struct grpc_conn {
    struct loop *loop;
    struct loop_watch w;
    nghttp2_session *session;
    char authority[300];
    bool connected, dead;
    int32_t goaway_last;      /* -1: no GOAWAY */
    struct buf out;           /* bytes nghttp2 produced that the socket did not take */
    struct grpc_unary *calls; /* outstanding, newest first */
    uint32_t ncalls;
    bool in_callback; /* inside nghttp2: do not free */
};

static void unlink_call(struct grpc_conn *c, struct grpc_unary *u)
{
    if (u->_prev)
        u->_prev->_next = u->_next;
    else
        c->calls = u->_next;
    if (u->_next)
        u->_next->_prev = u->_prev;
    u->_prev = u->_next = NULL;
    c->ncalls--;
}

static void finish(struct grpc_conn *c, struct grpc_unary *u, int status, bool reached,
                   const char *msg)
{
    if (u->_finished)
        return;
    u->_finished = true;
    unlink_call(c, u);
    if (u->_stream > 0 && c->session)
        nghttp2_session_set_stream_user_data(c->session, u->_stream, NULL);
    u->status = status;
    u->reached = reached;
    if (msg)
        snprintf(u->message, sizeof u->message, "%s", msg);
    u->_conn = NULL;
    u->done(u);
}

/* Whether the server may have seen u. */
static bool call_reached(const struct grpc_conn *c, const struct grpc_unary *u)
{
    if (!u->_headers_sent)
        return false;
    if (c->goaway_last >= 0 && u->_stream > c->goaway_last)
        return false;
    return true;
}

static void fail_all(struct grpc_conn *c, const char *why)
{
    c->dead = true;
    while (c->calls) {
        struct grpc_unary *u = c->calls;
        finish(c, u, GRPC_TRANSPORT, call_reached(c, u), why);
    }
}

/* ---- nghttp2 callbacks ---------------------------------------------------- */

static ssize_t read_body(nghttp2_session *s, int32_t stream, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)s, (void)stream, (void)user;
    struct grpc_unary *u = src->ptr;
    size_t total = u->len + 5, n = 0;
    while (n < length && u->_sent < total) {
        size_t chunk;
        if (u->_sent < 5) {
            chunk = 5 - u->_sent < length - n ? 5 - u->_sent : length - n;
            memcpy(buf + n, u->_prefix + u->_sent, chunk);
        } else {
            size_t off = u->_sent - 5;
            chunk = u->len - off < length - n ? u->len - off : length - n;
            memcpy(buf + n, u->msg + off, chunk);
        }
        n += chunk;
        u->_sent += chunk;
    }
    if (u->_sent == total)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags, (void)user;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct grpc_unary *u = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (!u)
        return 0;
    if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int st = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            st = st * 10 + (value[i] - '0');
        u->status = st;
        u->_have_status = true;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        snprintf(u->message, sizeof u->message, "%.*s", (int)valuelen, (const char *)value);
    } else if (namelen == 7 && memcmp(name, ":status", 7) == 0 &&
               !(valuelen == 3 && memcmp(value, "200", 3) == 0)) {
        snprintf(u->message, sizeof u->message, "HTTP status %.*s", (int)valuelen,
                 (const char *)value);
    }
    return 0;
}

/* A server stream's complete messages in u->resp, each handed to
 * on_message and consumed; a refusal cancels the stream. */
static void deliver_messages(nghttp2_session *s, struct grpc_unary *u)
{
    while (u->resp.len >= 5 && !u->_cancelled) {
        const uint8_t *p = (const uint8_t *)u->resp.data;
        uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        if ((size_t)n + 5 > u->resp.len)
            return;
        if (p[0] != 0 || !u->on_message(u, p + 5, n)) {
            u->_cancelled = true;
            snprintf(u->message, sizeof u->message, "%s",
                     p[0] != 0 ? "compressed gRPC message (not supported)" : "cancelled");
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, u->_stream, NGHTTP2_CANCEL);
        }
        buf_consume(&u->resp, (size_t)n + 5);
    }
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t stream, const uint8_t *data,
                   size_t len, void *user)
{
    (void)flags, (void)user;
    struct grpc_unary *u = nghttp2_session_get_stream_user_data(s, stream);
    if (!u || u->_cancelled)
        return 0;
    if (buf_append(&u->resp, data, len) != 0) {
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
        return 0;
    }
    if (u->on_message)
        deliver_messages(s, u);
    return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame, void *user)
{
    (void)user;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct grpc_unary *u = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (u)
        u->_headers_sent = true;
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user)
{
    (void)s;
    struct grpc_conn *c = user;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        c->goaway_last = frame->goaway.last_stream_id;
        c->dead = true; /* no new streams; the ones below last finish */
    }
    return 0;
}

/* The complete response message of u, unframed, or -1 (status set). */
static int unframe(struct grpc_unary *u)
{
    if (u->resp.err) {
        u->status = 8;
        snprintf(u->message, sizeof u->message, "response larger than %u bytes",
                 GRPC_CONN_MAX_MESSAGE);
        return ST_ERROR;
    }
    if (u->resp.len < 5) {
        if (u->status == 0) {
            u->status = 13;
            snprintf(u->message, sizeof u->message, "response without a message");
            return ST_ERROR;
        }
        return 0;
    }
    const uint8_t *p = (const uint8_t *)u->resp.data;
    uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (p[0] != 0 || (size_t)n + 5 != u->resp.len) {
        u->status = 13;
        snprintf(u->message, sizeof u->message, "malformed gRPC response framing");
        return ST_ERROR;
    }
    buf_consume(&u->resp, 5);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t stream, uint32_t error_code, void *user)
{
    struct grpc_conn *c = user;
    struct grpc_unary *u = nghttp2_session_get_stream_user_data(s, stream);
    if (!u)
        return 0;
    if (u->_cancelled) {
        finish(c, u, GRPC_CANCELLED, true, NULL);
    } else if (u->_have_status && u->on_message) {
        if (u->resp.len)
            finish(c, u, 13, true, "the stream ended inside a message");
        else
            finish(c, u, u->status, true, NULL);
    } else if (u->_have_status) {
        if (unframe(u) != 0 || u->status != 0)
            finish(c, u, u->status, true, NULL);
        else
            finish(c, u, 0, true, NULL);
    } else if (error_code == NGHTTP2_REFUSED_STREAM) {
        finish(c, u, GRPC_UNAVAILABLE, false, "stream refused by the upstream");
    } else {
        char why[64];
        snprintf(why, sizeof why, "stream closed without a status (%s)",
                 nghttp2_http2_strerror(error_code));
        finish(c, u, GRPC_TRANSPORT, call_reached(c, u), why);
    }
    return 0;
}

/* ---- I/O ------------------------------------------------------------------- */

static void flush(struct grpc_conn *c)
{
    for (;;) {
        if (c->out.len) {
            ssize_t n = send(c->w.fd, c->out.data, c->out.len, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return;
                fail_all(c, "connection lost (send)");
                return;
            }
            buf_consume(&c->out, (size_t)n);
            continue;
        }
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) {
            fail_all(c, nghttp2_strerror((int)n));
            return;
        }
        if (n == 0)
            return;
        if (buf_append(&c->out, data, (size_t)n) != 0) {
            fail_all(c, "out of memory");
            return;
        }
    }
}

static void expire(struct grpc_conn *c, uint64_t now)
{
    uint64_t next = 0;
    struct grpc_unary *u = c->calls;
    while (u) {
        struct grpc_unary *n = u->_next;
        if (u->_deadline_ns && now >= u->_deadline_ns) {
            if (u->_stream > 0)
                nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, u->_stream,
                                          NGHTTP2_CANCEL);
            finish(c, u, GRPC_DEADLINE_EXCEEDED, true, "deadline exceeded at the gateway");
        } else if (u->_deadline_ns && (!next || u->_deadline_ns < next)) {
            next = u->_deadline_ns;
        }
        u = n;
    }
    if (next)
        loop_defer_at(c->loop, &c->w, next);
}

/* Reads and handles what the upstream sent. ST_OK: nothing more to read
 * now; ST_ERROR: the connection failed (closed, reset or a protocol error)
 * and every call on it was finished. */
static int read_input(struct grpc_conn *c)
{
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = recv(c->w.fd, buf, sizeof buf, 0);
        if (n > 0) {
            ssize_t r = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
            if (r < 0) {
                fail_all(c, nghttp2_strerror((int)r));
                return ST_ERROR;
            }
            continue;
        }
        if (n == 0) {
            fail_all(c, "connection closed by the upstream");
            return ST_ERROR;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return ST_OK;
        fail_all(c, "connection lost (recv)");
        return ST_ERROR;
    }
}

static void on_events(struct loop_watch *w, uint32_t events)
{
    struct grpc_conn *c = (struct grpc_conn *)((char *)w - offsetof(struct grpc_conn, w));
    if (!c->connected && !c->dead && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            fail_all(c, "connection refused or unreachable");
            return;
        }
        c->connected = true;
    }
    if (c->dead && !c->calls)
        return;
    if (c->connected && (events & EPOLLIN) && read_input(c) != ST_OK)
        return;
    if (c->connected && !c->dead)
        flush(c);
    else if (c->connected && c->calls)
        flush(c); /* after GOAWAY: the streams below last still finish */
    if (c->calls)
        expire(c, clock_now_ns());
}

/* ---- API --------------------------------------------------------------------- */

static int resolve(const char *host, int port, struct sockaddr_storage *sa, socklen_t *len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0)
        return -EHOSTUNREACH;
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int grpc_conn_open(struct loop *l, const char *host, int port, struct grpc_conn **out)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    int rc = resolve(host, port, &sa, &salen);
    if (rc)
        return rc;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, salen) != 0 && errno != EINPROGRESS) {
        rc = -errno;
        close(fd);
        return rc;
    }
    struct grpc_conn *c = mem_calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->loop = l;
    c->goaway_last = -1;
    c->w.fd = fd;
    c->w.on_events = on_events;
    buf_init(&c->out, MAX_OUT_BUFFER);
    snprintf(c->authority, sizeof c->authority, "%s:%d", host, port);
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        close(fd);
        mem_free(c);
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    rc = nghttp2_session_client_new(&c->session, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        close(fd);
        mem_free(c);
        return -ENOMEM;
    }
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 24},
                                         {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, 1 << 26);
    rc = loop_add(l, &c->w, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    if (rc) {
        nghttp2_session_del(c->session);
        close(fd);
        mem_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void fmt_timeout(char *out, size_t n, uint64_t us)
{
    /* At most 8 digits (gRPC's rule). */
    if (us < 100000000ull)
        snprintf(out, n, "%lluu", (unsigned long long)us);
    else if (us / 1000 < 100000000ull)
        snprintf(out, n, "%llum", (unsigned long long)(us / 1000));
    else
        snprintf(out, n, "%lluS", (unsigned long long)(us / 1000000));
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }

void grpc_conn_call(struct grpc_conn *c, struct grpc_unary *u)
{
    /* An upstream that closed or reset the connection since the loop last
     * looked is seen now, before this call is written into a dead socket:
     * the call is then refused as never reached (the pool retries it
     * elsewhere) instead of failing as lost. One recv() per call. */
    if (c->connected && !c->dead)
        (void)read_input(c);
    u->status = 0;
    u->reached = false;
    u->message[0] = '\0';
    buf_init(&u->resp, GRPC_CONN_MAX_MESSAGE + 5);
    u->_conn = c;
    u->_stream = 0;
    u->_sent = 0;
    u->_headers_sent = u->_have_status = u->_finished = u->_cancelled = false;
    u->_deadline_ns = u->timeout_us ? clock_now_ns() + u->timeout_us * 1000u : 0;
    u->_prefix[0] = 0;
    u->_prefix[1] = (uint8_t)(u->len >> 24);
    u->_prefix[2] = (uint8_t)(u->len >> 16);
    u->_prefix[3] = (uint8_t)(u->len >> 8);
    u->_prefix[4] = (uint8_t)u->len;
    u->_prev = NULL;
    u->_next = c->calls;
    if (c->calls)
        c->calls->_prev = u;
    c->calls = u;
    c->ncalls++;
    if (c->dead) {
        finish(c, u, GRPC_UNAVAILABLE, false, "connection to the upstream is down");
        return;
    }
    char timeout[24];
    nghttp2_nv nva[9] = {NV(":method", "POST"),
                         NV(":scheme", "http"),
                         NV(":path", u->path),
                         NV(":authority", c->authority),
                         NV("content-type", "application/grpc"),
                         NV("te", "trailers")};
    size_t nnv = 6;
    if (u->timeout_us) {
        fmt_timeout(timeout, sizeof timeout, u->timeout_us);
        nva[nnv++] = (nghttp2_nv)NV("grpc-timeout", timeout);
    }
    if (u->traceparent)
        nva[nnv++] = (nghttp2_nv)NV("traceparent", u->traceparent);
    if (u->request_id)
        nva[nnv++] = (nghttp2_nv)NV("x-request-id", u->request_id);
    nghttp2_data_provider prd = {.source.ptr = u, .read_callback = read_body};
    int32_t id = nghttp2_submit_request(c->session, NULL, nva, nnv, &prd, u);
    if (id < 0) {
        finish(c, u, GRPC_UNAVAILABLE, false, nghttp2_strerror(id));
        return;
    }
    u->_stream = id;
    if (c->connected)
        flush(c);
    if (u->_deadline_ns && !u->_finished)
        loop_defer_at(c->loop, &c->w, u->_deadline_ns);
}

bool grpc_conn_alive(const struct grpc_conn *c)
{
    return !c->dead;
}

uint32_t grpc_conn_outstanding(const struct grpc_conn *c)
{
    return c->ncalls;
}

void grpc_conn_close(struct grpc_conn *c)
{
    if (!c)
        return;
    fail_all(c, "connection closed");
    loop_del(c->loop, &c->w);
    close(c->w.fd);
    nghttp2_session_del(c->session);
    buf_free(&c->out);
    mem_free(c);
}
