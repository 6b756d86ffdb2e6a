#include "http/tcp_conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"
#include "http/resp_head.h"
#include "http/tcp_io.h"
#include "net/drain.h"
#include "net/sock.h"

#define READ_CHUNK (64 * 1024)
#define LINGER_MS 2000
#define LINGER_MAX_BYTES (1024 * 1024)
/* While draining, a client in the middle of sending a request gets this
 * long to finish it. */
#define DRAIN_GRACE_MS 3000
/* HTTP/2: frames are produced into the output buffer up to this much
 * before it is flushed; reads per wakeup before yielding to other
 * connections. */
#define H2_OUT_HIGH (256 * 1024)
#define H2_READS_PER_WAKEUP 16

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN (sizeof h2_preface - 1)

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

enum conn_state {
    CONN_HANDSHAKE, /* TLS handshake */
    CONN_READING, /* reading/parsing a request */
    CONN_WAITING, /* the handler owns the request */
    CONN_BODY,    /* the handler took the request on its head; its body is being read */
    CONN_WRITING, /* sending a response */
    CONN_STREAMING, /* the handler streams its response: chunks are sent as they come */
    CONN_LINGER,  /* response sent, write side shut; discarding input before close */
    CONN_H2,      /* HTTP/2: the session (h2.c) drives the connection */
    CONN_CLOSED,  /* fd closed; freed when the pending txn responds */
};

/* What an HTTP/2 connection's deadline is counting. */
enum h2_wait { H2_WAIT_NONE, H2_WAIT_READ, H2_WAIT_WRITE };


struct http_conn {
    struct loop_watch watch;
    struct http_server *server;
    struct http_conn *prev, *next; /* server->conns */
    enum conn_state state;
    bool readable;      /* edge-triggered: data may be waiting */
    bool peer_closed;   /* EPOLLRDHUP seen: the peer's FIN is in the socket */
    bool sent_continue; /* 100 Continue already sent for this request */
    bool close_after_write;
    bool linger_after_write; /* error response: drain input before closing */
    bool txn_active;
    /* The request went to the handler on its head and its body was not
     * read whole (still arriving, or it failed): its answer closes the
     * connection, since the stream cannot be resynchronised. */
    bool body_open;
    bool chunked; /* the streamed response uses Transfer-Encoding: chunked */
    uint8_t peer_len; /* http_txn_peer() cache; 0 = not looked up yet */
    char peer[56];
    bool grpc_port;      /* accepted on the gRPC port */
    bool preface_checked; /* the first bytes were not the HTTP/2 preface */
    enum h2_wait h2_wait;
    uint64_t deadline_ms; /* 0 = none */
    size_t lingered;
    struct buf in;       /* received bytes; the current request starts at in.data */
    struct buf out_head; /* response head (or an interim 100 Continue) */
    struct buf out_body;
    size_t out_off; /* bytes of head+body already sent */
    struct http1_parser parser;
    struct http_txn txn;
    struct tls_conn *tls;   /* NULL: plaintext */
    struct h2_session *h2;  /* in CONN_H2 */
};


static void conn_process(struct http_conn *c);
static void conn_close(struct http_conn *c);
static const struct http_txn_ops h1_ops;

/* Receive buffer ceiling: a whole request must fit. Chunked framing costs
 * extra bytes on the wire, so allow twice the body. */
static size_t in_buffer_max(const struct http_server *s)
{
    return (size_t)s->cfg.limits.max_header_bytes + 2 * (size_t)s->cfg.limits.max_body + READ_CHUNK;
}

static void set_deadline(struct http_conn *c, uint32_t timeout_ms)
{
    c->deadline_ms = timeout_ms ? clock_now_ms() + timeout_ms : 0;
}

static void maybe_drained(struct http_server *s)
{
    drain_notify_if_done(s->draining, s->nconns, &s->on_drained, s->drained_arg);
}

static void conn_free(struct http_conn *c)
{
    buf_free(&c->in);
    buf_free(&c->out_head);
    buf_free(&c->out_body);
    buf_free(&c->txn.body);
    mem_free(c);
}

static void reap(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct http_server *s = container_of(w, struct http_server, reaper);
    struct http_conn *c = s->graveyard;
    s->graveyard = NULL;
    while (c) {
        struct http_conn *next = c->next;
        conn_free(c);
        c = next;
    }
}

/* Closes the socket. The memory is freed at the end of the loop iteration
 * (events for this connection may still be queued in the same batch), or,
 * when a handler still holds the transaction, when it responds. */
static void conn_close(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (c->state == CONN_CLOSED)
        return;
    loop_del(s->loop, &c->watch);
    if (c->h2) {
        h2_session_free(c->h2); /* streams still held by handlers are aborted */
        c->h2 = NULL;
    }
    if (c->tls) {
        tls_conn_shutdown(c->tls);
        tls_conn_free(c->tls);
        c->tls = NULL;
    }
    close(c->watch.fd);
    c->watch.fd = -1;
    c->state = CONN_CLOSED;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    s->nconns--;
    atomic_fetch_sub(s->open_connections, 1);
    if (c->txn_active) {
        http_txn_abort(&c->txn);
    } else {
        c->next = s->graveyard;
        s->graveyard = c;
        loop_defer(s->loop, &s->reaper);
    }
    maybe_drained(s);
}

/* Formats the response head into c->out_head (resp_head.h). */
static void format_head(struct http_conn *c, int status, const char *content_type,
                        const char *extra_headers, bool keep_alive, int version_minor,
                        int64_t content_length)
{
    http_resp_head_h1(&c->out_head, status, content_type, extra_headers, keep_alive,
                      version_minor, content_length);
    c->out_off = 0;
    c->close_after_write = !keep_alive;
}

/* Queues the response head for the body already in c->out_body. */
static void queue_response(struct http_conn *c, int status, const char *content_type,
                           const char *extra_headers, bool head_only, bool keep_alive,
                           int version_minor)
{
    format_head(c, status, content_type, extra_headers, keep_alive, version_minor,
                (int64_t)c->out_body.len);
    if (head_only)
        c->out_body.len = 0;
    c->state = CONN_WRITING;
    set_deadline(c, c->server->cfg.write_timeout_ms);
}

/* An error the server answers itself (parse error, timeout): the connection
 * is closed after the response, and input is drained first so the client
 * sees the response rather than a reset. */
static void conn_fail(struct http_conn *c, int status, const char *msg)
{
    http_error_body(&c->out_body, msg);
    if (c->server->cfg.on_response)
        c->server->cfg.on_response(NULL, status, c->out_body.len);
    queue_response(c, status, "application/json", NULL, false, false, 1);
    c->linger_after_write = true;
}

/* Sends pending output (tcp_io.h); progress extends the write deadline.
 * Returns 0 when all is sent, 1 when the socket is full (wait for
 * EPOLLOUT), -1 when the connection failed. */
static int conn_flush(struct http_conn *c)
{
    size_t before = c->out_off;
    int rc = tcp_io_send(c->watch.fd, c->tls, &c->out_head, &c->out_body, &c->out_off);
    if (c->out_off != before)
        set_deadline(c, c->server->cfg.write_timeout_ms);
    return rc == ST_AGAIN ? 1 : rc;
}

static void send_continue(struct http_conn *c)
{
    buf_reset(&c->out_head);
    buf_puts(&c->out_head, "HTTP/1.1 100 Continue\r\n\r\n");
    buf_reset(&c->out_body);
    c->out_off = 0;
    c->sent_continue = true;
}

static void start_request(struct http_conn *c)
{
    http1_parser_init(&c->parser, &c->server->cfg.limits);
    c->sent_continue = false;
    c->body_open = false;
    c->out_head.len = c->out_body.len = 0;
    c->out_off = 0;
    set_deadline(c, c->in.len ? c->server->cfg.header_timeout_ms : c->server->cfg.idle_timeout_ms);
}

/* Hands the parsed request to the handler: a whole one (CONN_WAITING), or
 * only its head (CONN_BODY: the body is read while the handler works). */
static void dispatch(struct http_conn *c, enum conn_state state)
{
    struct http_txn *t = &c->txn;
    http_txn_reset(t, &h1_ops, c, t->req.version_minor == 0 ? HTTP_VERSION_1_0 : HTTP_VERSION_1_1,
                   c->server->cfg.on_response);
    t->start_ns = clock_now_ns();
    if (c->tls && c->server->cfg.alt_svc)
        http_txn_add_header(t, "Alt-Svc", c->server->cfg.alt_svc);
    c->txn_active = true;
    c->state = state;
    if (state == CONN_BODY) {
        c->body_open = true;
        t->body_pending = true;
    } else {
        c->deadline_ms = 0; /* a body still arriving keeps its idle timeout */
    }
    c->server->handler(c->server->app, t);
}

/* The body of a request handed over on its head is complete (status 0)
 * or cannot be (status, msg): the handler hears of it (txn.h) and answers
 * now or later. */
static void body_done(struct http_conn *c, int status, const char *msg)
{
    c->state = CONN_WAITING;
    c->deadline_ms = 0;
    if (status == 0)
        c->body_open = false;
    http_txn_body_done(&c->txn, status, msg);
}

/* Reads up to len bytes (tcp_io.h). Returns the count (> 0), 0 when
 * nothing is waiting, -1 on EOF or error. c->readable is cleared when the
 * socket is known empty: edge-triggered, bytes arriving later raise a new
 * event, so asking again now would only cost a read that fails with
 * EAGAIN (as nginx does). Unless the peer's FIN is waiting: no event would
 * announce it again. */
static ssize_t conn_recv(struct http_conn *c, void *p, size_t len)
{
    bool emptied;
    ssize_t n = tcp_io_recv(c->watch.fd, c->tls, p, len, &emptied);
    if (n == ST_AGAIN || (emptied && !c->peer_closed))
        c->readable = false;
    return n == ST_AGAIN ? 0 : n;
}

/* Reads what the socket has, up to one chunk. Returns 1 if bytes arrived,
 * 0 if none are waiting, -1 on EOF or error, -2 if the buffer is full. */
static int conn_read(struct http_conn *c)
{
    int rc = buf_reserve(&c->in, READ_CHUNK);
    if (rc) {
        size_t room = c->in.cap - c->in.len;
        if (room == 0)
            return -2;
    }
    ssize_t n = conn_recv(c, c->in.data + c->in.len, c->in.cap - c->in.len);
    if (n > 0) {
        c->in.len += (size_t)n;
        return 1;
    }
    return (int)n;
}

/* The client's address "ip:port" ("[ip6]:port") of c into out; returns its
 * length (0 if unknown). Looked up once per connection (HTTP/1 and h2). */
static size_t conn_peer(struct http_conn *c, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    if (!c->peer_len) /* once per connection */
        c->peer_len = (uint8_t)sock_peer_format(c->watch.fd, c->peer, sizeof c->peer);
    size_t n = c->peer_len < cap ? c->peer_len : cap - 1;
    memcpy(out, c->peer, n);
    out[n] = '\0';
    return n;
}

static size_t h2_peer(void *arg, char *out, size_t cap)
{
    return conn_peer(arg, out, cap);
}

static void h2_want_write(void *arg)
{
    struct http_conn *c = arg;
    loop_defer(c->server->loop, &c->watch);
}

/* The connection speaks HTTP/2 from now on; c->in holds the first bytes
 * (the client preface, unless TLS ALPN chose h2 before any byte came). */
static void conn_start_h2(struct http_conn *c)
{
    struct http_server *s = c->server;
    struct h2_session_config hc = {
        .limits = &s->cfg.limits,
        .max_concurrent_streams = s->cfg.h2_max_concurrent_streams,
        .max_response_bytes = s->cfg.max_response_bytes,
        .grpc = s->cfg.grpc,
        .handler = s->handler,
        .handler_app = s->app,
        .early = s->cfg.early,
        .loop = s->loop,
        .want_write = h2_want_write,
        .arg = c,
        .peer = h2_peer,
        .on_response = s->cfg.on_response,
        .alt_svc = c->tls ? s->cfg.alt_svc : NULL,
    };
    if (h2_session_new(&hc, &c->h2) != 0) {
        log_warn("http2: out of memory for a session");
        conn_close(c);
        return;
    }
    c->state = CONN_H2;
    c->out_head.len = c->out_body.len = 0;
    c->out_off = 0;
    c->h2_wait = H2_WAIT_NONE;
    c->readable = true; /* TLS may hold bytes that will raise no new event */
    if (c->in.len) {
        h2_session_recv(c->h2, (const uint8_t *)c->in.data, c->in.len);
        c->in.len = 0;
    }
    if (s->draining)
        h2_session_drain(c->h2);
}

/* The first bytes of a connection: the HTTP/2 client preface, or HTTP/1.
 * Returns 1 for HTTP/2, 0 for HTTP/1, -1 when more bytes are needed. */
static int detect_preface(const struct http_conn *c)
{
    size_t n = c->in.len < H2_PREFACE_LEN ? c->in.len : H2_PREFACE_LEN;
    if (memcmp(c->in.data, h2_preface, n) != 0)
        return 0;
    return n == H2_PREFACE_LEN ? 1 : -1;
}

/* Sends what is left of an interim 100 Continue before more of the request
 * is looked at. Returns false when the caller must stop: the socket is
 * full (EPOLLOUT resumes) or the connection failed (closed). */
static bool flush_interim(struct http_conn *c)
{
    if (c->out_off >= c->out_head.len)
        return true;
    int rc = conn_flush(c);
    if (rc < 0)
        conn_close(c);
    return rc == 0;
}

/* One step of the READING state. Returns true to continue processing. */
static bool step_reading(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (!c->preface_checked && c->in.len > 0) {
        int h2 = detect_preface(c);
        if (h2 == 1) {
            conn_start_h2(c);
            return c->state == CONN_H2;
        }
        if (h2 == 0) {
            c->preface_checked = true;
            if (c->grpc_port) {
                conn_fail(c, 505, "this port serves HTTP/2 (gRPC) only");
                return true;
            }
        }
    }
    if (!flush_interim(c))
        return false;
    size_t before = c->in.len;
    if (before > 0) {
        bool head_was_done = c->parser.head_done;
        int rc = http1_parse(&c->parser, c->in.data, c->in.len, &c->txn.req);
        if (rc == ST_DONE) {
            dispatch(c, CONN_WAITING);
            return c->state != CONN_WAITING;
        }
        if (rc == ST_ERROR) {
            conn_fail(c, c->parser.err_status, c->parser.err_msg);
            return true;
        }
        if (c->parser.head_done && !head_was_done) {
            set_deadline(c, s->cfg.idle_timeout_ms);
            if (s->cfg.early && s->cfg.early(s->app, &c->txn)) {
                dispatch(c, CONN_BODY);
                /* Not answered on its head: the client may send the body. */
                if (c->state == CONN_BODY && c->txn.req.expect_continue && !s->draining)
                    send_continue(c);
                return true;
            }
            if (c->txn.req.expect_continue && !c->sent_continue && !s->draining) {
                send_continue(c);
                return true;
            }
        }
    }
    if (!c->readable)
        return false;
    int rc = conn_read(c);
    if (rc == 1) {
        if (before == 0)
            set_deadline(c, s->cfg.header_timeout_ms);
        else if (c->parser.head_done)
            set_deadline(c, s->cfg.idle_timeout_ms);
        return true;
    }
    if (rc == 0)
        return false;
    if (rc == -2) {
        conn_fail(c, 413, "request too large for the receive buffer");
        return true;
    }
    conn_close(c); /* EOF: a partial request is abandoned */
    return false;
}

/* One step of the BODY state: the handler took the request on its head
 * (dispatch) and the rest of its body is read and parsed in place, as in
 * READING; the txn's pointers follow the buffer, which may move as it
 * grows, because every read is parsed before anything else runs. Returns
 * true to continue processing. */
static bool step_body(struct http_conn *c)
{
    if (!flush_interim(c))
        return false;
    int rc = http1_parse(&c->parser, c->in.data, c->in.len, &c->txn.req);
    if (rc == ST_DONE || rc == ST_ERROR) {
        if (rc == ST_DONE)
            body_done(c, 0, NULL);
        else
            body_done(c, c->parser.err_status, c->parser.err_msg);
        return c->state != CONN_WAITING;
    }
    if (!c->readable)
        return false;
    rc = conn_read(c);
    if (rc == 1) {
        set_deadline(c, c->server->cfg.idle_timeout_ms);
        return true;
    }
    if (rc == 0)
        return false;
    if (rc == -2) {
        body_done(c, 413, "request too large for the receive buffer");
        return c->state != CONN_WAITING;
    }
    conn_close(c); /* EOF mid-body: the handler hears 499 (http_txn_abort) */
    return false;
}

/* One step of the TLS handshake. Returns true to continue processing. */
static bool step_handshake(struct http_conn *c)
{
    int rc = tls_conn_handshake(c->tls);
    if (rc == ST_AGAIN)
        return false;
    if (rc != ST_DONE) {
        conn_close(c);
        return false;
    }
    if (tls_conn_alpn_h2(c->tls)) {
        conn_start_h2(c);
        return c->state == CONN_H2;
    }
    /* No ALPN (or http/1.1): HTTP/1, or HTTP/2 with prior knowledge. */
    c->state = CONN_READING;
    c->readable = true; /* the handshake may have left bytes in TLS buffers */
    start_request(c);
    return true;
}

/* Sets an HTTP/2 connection's deadline for what it waits on now. */
static void h2_update_deadline(struct http_conn *c, bool got_bytes)
{
    const struct http_server_config *cfg = &c->server->cfg;
    if (c->out_off < c->out_body.len) {
        if (c->h2_wait != H2_WAIT_WRITE)
            set_deadline(c, cfg->write_timeout_ms); /* conn_flush extends it on progress */
        c->h2_wait = H2_WAIT_WRITE;
    } else if (h2_session_stream_count(c->h2) > 0 && !h2_session_receiving(c->h2)) {
        c->deadline_ms = 0; /* every stream waits on its handler */
        c->h2_wait = H2_WAIT_NONE;
    } else if (got_bytes || c->h2_wait != H2_WAIT_READ) {
        set_deadline(c, cfg->idle_timeout_ms);
        c->h2_wait = H2_WAIT_READ;
    }
}

/* HTTP/2: produce frames, flush them, read and feed the session, until the
 * socket blocks both ways or the read budget of this wakeup is spent. */
static bool step_h2(struct http_conn *c)
{
    struct http_server *s = c->server;
    bool got_bytes = false;
    int reads = 0;
    for (;;) {
        if (c->out_off == c->out_body.len)
            c->out_body.len = c->out_off = 0;
        size_t queued = c->out_body.len;
        if (c->out_body.len < H2_OUT_HIGH &&
            h2_session_send(c->h2, &c->out_body, H2_OUT_HIGH) != 0) {
            conn_close(c);
            return false;
        }
        bool produced = c->out_body.len > queued;
        bool blocked = false;
        if (c->out_off < c->out_body.len) {
            int rc = conn_flush(c);
            if (rc < 0) {
                conn_close(c);
                return false;
            }
            blocked = rc > 0;
        }
        if (h2_session_done(c->h2) && (c->out_off == c->out_body.len || blocked)) {
            /* Finished (GOAWAY both ways, or a protocol error/flood whose
             * GOAWAY went out as far as the socket would take it). */
            conn_close(c);
            return false;
        }
        if (produced && !blocked)
            continue; /* the buffer was full: there may be more to send */
        if (!c->readable)
            break;
        if (++reads > H2_READS_PER_WAKEUP) {
            loop_defer(s->loop, &c->watch); /* let the other connections run */
            break;
        }
        c->in.len = 0;
        if (buf_reserve(&c->in, READ_CHUNK) != 0) {
            conn_close(c);
            return false;
        }
        ssize_t n = conn_recv(c, c->in.data, c->in.cap);
        if (n < 0) {
            conn_close(c); /* EOF: streams in progress are aborted */
            return false;
        }
        if (n > 0) {
            got_bytes = true;
            h2_session_recv(c->h2, (const uint8_t *)c->in.data, (size_t)n);
        }
    }
    h2_update_deadline(c, got_bytes);
    return false;
}

/* While the server drains, a request begun gets DRAIN_GRACE_MS to
 * arrive (then 408). */
static void drain_grace(struct http_conn *c)
{
    uint64_t grace = clock_now_ms() + DRAIN_GRACE_MS;
    if (!c->deadline_ms || c->deadline_ms > grace)
        c->deadline_ms = grace;
}

/* A connection between requests while the server drains: closed if idle,
 * else given DRAIN_GRACE_MS to finish the request it has begun. Returns
 * false when it closed. */
static bool drain_reading(struct http_conn *c)
{
    if (c->in.len == 0) {
        conn_close(c);
        return false;
    }
    drain_grace(c);
    return true;
}

/* One step of the WRITING state. Returns true to continue processing. */
static bool step_writing(struct http_conn *c)
{
    int rc = conn_flush(c);
    if (rc < 0) {
        conn_close(c);
        return false;
    }
    if (rc > 0)
        return false;
    size_t consumed = c->parser.consumed;
    if (c->close_after_write) {
        if (!c->linger_after_write) {
            conn_close(c);
            return false;
        }
        shutdown(c->watch.fd, SHUT_WR);
        c->state = CONN_LINGER;
        c->lingered = 0;
        c->in.len = 0;
        set_deadline(c, LINGER_MS);
        return true;
    }
    buf_consume(&c->in, consumed);
    c->state = CONN_READING;
    start_request(c);
    /* A keep-alive response queued before the drain began: the sweep in
     * http_server_drain saw this connection writing and left it open. */
    if (c->server->draining)
        return drain_reading(c);
    return true;
}

/* One step of the STREAMING state: send what the handler wrote so far. */
static bool step_streaming(struct http_conn *c)
{
    int rc = conn_flush(c);
    if (rc < 0) {
        conn_close(c); /* aborts the txn: the handler stops streaming */
        return false;
    }
    if (rc == 0)
        c->deadline_ms = 0; /* all sent: wait for the handler, not the peer */
    return false;
}

static bool step_linger(struct http_conn *c)
{
    char scratch[16384];
    for (;;) {
        ssize_t n = conn_recv(c, scratch, sizeof scratch);
        if (n > 0) {
            c->lingered += (size_t)n;
            if (c->lingered > LINGER_MAX_BYTES)
                break;
            continue;
        }
        if (n == 0)
            return false;
        break;
    }
    conn_close(c);
    return false;
}

static void conn_process(struct http_conn *c)
{
    bool more = true;
    while (more) {
        switch (c->state) {
        case CONN_HANDSHAKE: more = step_handshake(c); break;
        case CONN_H2: more = step_h2(c); break;
        case CONN_READING: more = step_reading(c); break;
        case CONN_BODY: more = step_body(c); break;
        case CONN_WRITING: more = step_writing(c); break;
        case CONN_STREAMING: more = step_streaming(c); break;
        case CONN_LINGER: more = step_linger(c); break;
        case CONN_WAITING:
        case CONN_CLOSED: more = false; break;
        }
    }
}

/* While a request is being handled: did the peer close its side with no
 * further request, neither buffered (pipelined) nor in the socket? A client
 * that half-closes after pipelining keeps its responses. */
static bool peer_left(const struct http_conn *c)
{
    if (c->in.len > c->parser.consumed)
        return false;
    char b;
    ssize_t n = recv(c->watch.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void conn_on_events(struct loop_watch *w, uint32_t events)
{
    struct http_conn *c = container_of(w, struct http_conn, watch);
    if (events & EPOLLERR) {
        conn_close(c);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
        c->readable = true;
    if (events & (EPOLLRDHUP | EPOLLHUP))
        c->peer_closed = true;
    /* While a handler owns the request (or streams its response) we do not
     * read further, but a peer
     * that hung up entirely (or, as nginx sees it, closed its side with
     * nothing pipelined) cancels the exchange. */
    if ((c->state == CONN_WAITING || c->state == CONN_STREAMING) &&
        ((events & EPOLLHUP) || ((events & EPOLLRDHUP) && peer_left(c)))) {
        conn_close(c);
        return;
    }
    conn_process(c);
}



/* ---- the server's calls (tcp_conn.h) ---- */

void tcp_conns_init(struct http_server *s)
{
    s->reaper.fd = -1;
    s->reaper.on_events = reap;
}

int tcp_conn_open(struct http_server *s, int fd, bool grpc_port, int port)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct http_conn *c = mem_calloc(1, sizeof *c);
    if (!c)
        goto fail;
    c->server = s;
    c->watch.fd = fd;
    c->watch.on_events = conn_on_events;
    buf_init(&c->in, in_buffer_max(s));
    buf_init(&c->out_head, 64 * 1024);
    buf_init(&c->out_body, s->cfg.max_response_bytes);
    buf_init(&c->txn.body, s->cfg.max_response_bytes);
    c->grpc_port = grpc_port;
    c->state = CONN_READING;
    start_request(c);
    if (s->cfg.tls) {
        c->tls = tls_conn_new(s->cfg.tls, fd, grpc_port ? TLS_ALPN_H2_ONLY : TLS_ALPN_H2_HTTP1);
        if (!c->tls)
            goto fail;
        c->state = CONN_HANDSHAKE;
        set_deadline(c, s->cfg.header_timeout_ms);
    }
    if (loop_add(s->loop, &c->watch, EPOLLIN | EPOLLOUT | EPOLLRDHUP) != 0) {
        tls_conn_free(c->tls);
        goto fail;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    INFERD_PROBE_2(conn_accepted, fd, port);
    return ST_OK;
fail:
    atomic_fetch_sub(s->open_connections, 1);
    close(fd);
    if (c)
        conn_free(c);
    return ST_ERROR;
}

void tcp_conns_expire(struct http_server *s, uint64_t now_ms)
{
    struct http_conn *c = s->conns;
    while (c) {
        struct http_conn *next = c->next;
        if (c->deadline_ms && now_ms >= c->deadline_ms) {
            if (c->state == CONN_READING && c->in.len > 0) {
                conn_fail(c, 408, "request not received in time");
                conn_process(c);
            } else if (c->state == CONN_BODY) {
                body_done(c, 408, "request not received in time"); /* the handler answers */
            } else {
                conn_close(c);
            }
        }
        c = next;
    }
}

void tcp_conns_drain(struct http_server *s)
{
    struct http_conn *c = s->conns;
    while (c) {
        struct http_conn *next = c->next;
        if (c->state == CONN_READING) {
            /* A request may have arrived without its event being handled
             * yet: read what is there before deciding the connection is idle. */
            c->readable = true;
            conn_process(c);
        }
        if (c->state == CONN_H2) {
            /* GOAWAY; streams in flight finish, then the connection closes. */
            h2_session_drain(c->h2);
        } else if (c->state == CONN_HANDSHAKE) {
            conn_close(c);
        } else if (c->state == CONN_READING) {
            drain_reading(c);
        } else if (c->state == CONN_BODY) {
            drain_grace(c); /* a body still arriving: as a request begun */
        }
        c = next;
    }
    maybe_drained(s);
}

void tcp_conns_close(struct http_server *s)
{
    while (s->conns)
        conn_close(s->conns);
    reap(&s->reaper, 0);
}

/* ---- the HTTP/1 side of struct http_txn (txn.h) ---- */

static struct http_conn *txn_conn(const struct http_txn *txn)
{
    return txn->transport;
}

/* The handler let go of an aborted txn: the connection (already closed)
 * can be freed. */
static void bury(struct http_conn *c)
{
    c->txn_active = false;
    c->next = c->server->graveyard;
    c->server->graveyard = c;
    loop_defer(c->server->loop, &c->server->reaper);
}

/* The handler answers a request whose body was not read whole
 * (body_open): the answer closes the connection, and what the client still
 * sends is read and dropped for a short linger so that it sees the answer,
 * not a reset. An interim 100 Continue cut by a full socket cannot be
 * followed by anything: the connection is closed then (the client does not
 * read). Returns false when it was. */
static bool body_answerable(struct http_conn *c)
{
    if (!c->body_open)
        return true;
    if (c->out_off > 0 && c->out_off < c->out_head.len) {
        conn_close(c); /* aborts the txn if the handler still holds it */
        return false;
    }
    c->linger_after_write = true;
    return true;
}

static void h1_respond(struct http_txn *txn, int status, const char *content_type)
{
    struct http_conn *c = txn_conn(txn);
    if (txn->aborted) {
        bury(c); /* the peer left while the handler worked: nothing to send */
        return;
    }
    c->txn_active = false;
    if (!body_answerable(c))
        return;
    /* Hand the body over without copying; the txn keeps the old buffer. */
    struct buf tmp = c->out_body;
    c->out_body = txn->body;
    txn->body = tmp;
    buf_reset(&txn->body);
    bool keep = txn->req.keep_alive && !c->server->draining && !c->body_open;
    queue_response(c, status, content_type, txn->extra_headers, txn->head_only, keep,
                   txn->req.version_minor);
    loop_defer(c->server->loop, &c->watch);
}

static int h1_stream_begin(struct http_txn *txn, int status, const char *content_type)
{
    struct http_conn *c = txn_conn(txn);
    if (!body_answerable(c))
        return ST_ERROR; /* the txn is aborted: the handler ends it */
    c->chunked = txn->req.version_minor >= 1;
    /* Without chunked coding the body ends with the connection. */
    bool keep = c->chunked && txn->req.keep_alive && !c->server->draining && !c->body_open;
    buf_reset(&c->out_body);
    format_head(c, status, content_type, txn->extra_headers, keep, txn->req.version_minor, -1);
    c->state = CONN_STREAMING;
    set_deadline(c, c->server->cfg.write_timeout_ms);
    loop_defer(c->server->loop, &c->watch);
    return 0;
}

static size_t h1_stream_pending(const struct http_txn *txn)
{
    const struct http_conn *c = txn_conn(txn);
    return c->out_head.len + c->out_body.len - c->out_off;
}

/* Appends to the unsent output, first dropping what was sent. */
static int h1_queue(struct http_conn *c, const void *data, size_t len)
{
    if (c->out_off > 0 && c->out_off == c->out_head.len + c->out_body.len) {
        c->out_head.len = c->out_body.len = 0;
        c->out_off = 0;
    }
    char size[24];
    int n = c->chunked ? snprintf(size, sizeof size, "%zx\r\n", len) : 0;
    if (buf_reserve(&c->out_body, (size_t)n + len + 2) != 0)
        return ST_ERROR;
    buf_append(&c->out_body, size, (size_t)n);
    buf_append(&c->out_body, data, len);
    if (c->chunked)
        buf_append(&c->out_body, "\r\n", 2);
    if (c->state == CONN_STREAMING)
        set_deadline(c, c->server->cfg.write_timeout_ms);
    loop_defer(c->server->loop, &c->watch);
    return 0;
}

static int h1_stream_write(struct http_txn *txn, const void *data, size_t len)
{
    return h1_queue(txn_conn(txn), data, len);
}

static void h1_stream_end(struct http_txn *txn)
{
    struct http_conn *c = txn_conn(txn);
    if (txn->aborted) {
        bury(c);
        return;
    }
    c->txn_active = false;
    if (c->chunked) {
        if (c->out_off > 0 && c->out_off == c->out_head.len + c->out_body.len) {
            c->out_head.len = c->out_body.len = 0;
            c->out_off = 0;
        }
        if (buf_puts(&c->out_body, "0\r\n\r\n") != 0)
            c->close_after_write = true; /* the peer sees a cut body */
    }
    c->state = CONN_WRITING;
    set_deadline(c, c->server->cfg.write_timeout_ms);
    loop_defer(c->server->loop, &c->watch);
}

static size_t h1_peer(const struct http_txn *txn, char *out, size_t cap)
{
    return conn_peer(txn_conn(txn), out, cap);
}

static const struct http_txn_ops h1_ops = {
    .respond = h1_respond,
    .stream_begin = h1_stream_begin,
    .stream_write = h1_stream_write,
    .stream_end = h1_stream_end,
    .stream_pending = h1_stream_pending,
    .peer = h1_peer,
};
