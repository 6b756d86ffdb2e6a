#include "http/h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/clock.h"
#include "base/status.h"
#include "http/h2_mem.h"
#include "http/resp_head.h"
#include "http/txn.h"

/* Flow control: large windows so that a big tensor is not throttled by
 * round trips; the window is returned as the bytes are taken. */
#define H2_STREAM_WINDOW (16u << 20)
#define H2_CONN_WINDOW (64u << 20)
/* HPACK dynamic table we decode with (advertised) and encode with. */
#define H2_HEADER_TABLE_SIZE 4096
/* Flood limits (nghttp2 options). */
#define H2_MAX_SETTINGS_ENTRIES 32
#define H2_MAX_OUTBOUND_ACK 256
#define H2_RESET_BURST 1000
#define H2_RESET_RATE 33
#define H2_MAX_CONTINUATIONS 8
/* Reused stream objects kept per session. */
/* Closed streams are kept for reuse, up to the session's concurrent-stream
 * limit (at most this many), so a connection that keeps its streams busy
 * stops allocating. A pooled stream drops buffers larger than
 * H2_POOL_KEEP_BYTES: large tensors reallocate, small requests do not. */
#define H2_STREAM_POOL_MAX 128
#define H2_POOL_KEEP_BYTES (64u * 1024)
/* A REST stream answered before its request was complete (an error) reads
 * and drops this much more of the body, then resets the stream (as the
 * HTTP/1 linger: the client sees the answer, not a reset, if it is close to
 * the end of its request). */
#define H2_DISCARD_MAX (1u << 20)

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

enum stream_kind {
    STREAM_REST, /* answered through struct http_txn */
    STREAM_APP,  /* gRPC: the app's callbacks (app may be NULL: refused) */
};

struct h2_stream {
    struct h2_session *sess;       /* NULL once detached (REST txn outlives the session) */
    struct h2_stream *prev, *next; /* sess->streams, or the free list (next) */
    int32_t id;
    enum stream_kind kind;
    const struct h2_stream_app *app;
    void *user;
    /* Request head: names and values copied into hbuf. While the block
     * arrives the h2_header pointers hold offsets into hbuf; they become
     * pointers when the block is complete (hbuf no longer grows). */
    struct buf hbuf;
    struct h2_header *hdrs;
    uint32_t nhdrs;
    size_t method_off, method_len, path_off, path_len;
    bool has_method, has_path;
    uint64_t header_bytes; /* RFC 9113 accounting: name + value + 32 each */
    int err_status;        /* REST: answer this error once the head is complete */
    const char *err_msg;
    bool head_done;    /* request header block complete */
    bool request_done; /* END_STREAM received */
    bool txn_active;   /* the REST handler owns the txn */
    bool responded;    /* response headers submitted */
    bool finished;     /* all output queued (REST body, or app finish) */
    bool deferred;     /* the data provider waits for output */
    bool closed;       /* nghttp2 closed the stream */
    bool reset_sent;   /* RST_STREAM submitted by us */
    bool offered;      /* REST: its head was offered to the config's `early` */
    bool early;        /* REST: handed to the handler on its head (txn.h) */
    bool body_failed;  /* early: the body broke a limit; the rest is dropped */
    bool has_content_length;
    uint64_t content_length; /* REST: the content-length header's value */
    size_t discarded;  /* request bytes dropped after an early answer */
    struct buf body;   /* REST request body */
    /* Response output queue: bytes [out_off, out.len) are not yet sent. */
    struct buf out;
    size_t out_off;
    struct buf trailers; /* app trailers: name\0value\0 ... */
    uint32_t ntrailers;
    struct http_txn txn;
};

struct h2_session {
    nghttp2_session *ng;
    struct h2_session_config cfg;
    struct http1_limits limits;
    struct h2_stream *streams; /* attached streams */
    uint32_t nstreams;
    struct h2_stream *free_streams;
    uint32_t nfree;
    struct buf *out; /* target of the send callbacks during h2_session_send */
    size_t high_water;
    bool failed;
    bool heads_waiting; /* a REST head completed in this h2_session_recv */
    struct h2_mem mem; /* nghttp2 allocates here (h2_mem.h) */
};

/* ---- streams ---- */

static void want_write(struct h2_session *s)
{
    if (s->cfg.want_write)
        s->cfg.want_write(s->cfg.arg);
}

static void stream_free(struct h2_stream *st)
{
    buf_free(&st->hbuf);
    buf_free(&st->body);
    buf_free(&st->out);
    buf_free(&st->trailers);
    buf_free(&st->txn.body);
    mem_free(st->hdrs);
    mem_free(st);
}

static void trim(struct buf *b)
{
    if (b->cap > H2_POOL_KEEP_BYTES)
        buf_free(b);
    else
        buf_reset(b);
}

/* Returns a stream that left its session (closed, or never opened) to the
 * pool or frees it. */
static void stream_release(struct h2_session *s, struct h2_stream *st)
{
    if (!s || s->nfree >= H2_STREAM_POOL_MAX || s->nfree >= s->cfg.max_concurrent_streams) {
        stream_free(st);
        return;
    }
    trim(&st->hbuf);
    trim(&st->body);
    trim(&st->out);
    trim(&st->trailers);
    trim(&st->txn.body);
    st->next = s->free_streams;
    s->free_streams = st;
    s->nfree++;
}

static struct h2_stream *stream_get(struct h2_session *s)
{
    struct h2_stream *st = s->free_streams;
    if (st) {
        s->free_streams = st->next;
        s->nfree--;
    } else {
        st = mem_calloc(1, sizeof *st);
        if (!st)
            return NULL;
        st->hdrs = mem_calloc(s->limits.max_headers, sizeof *st->hdrs);
        if (!st->hdrs) {
            mem_free(st);
            return NULL;
        }
        buf_init(&st->hbuf, (size_t)s->limits.max_header_bytes);
        buf_init(&st->body, (size_t)s->limits.max_body);
        buf_init(&st->out, (size_t)s->cfg.max_response_bytes);
        buf_init(&st->trailers, 64 * 1024);
        buf_init(&st->txn.body, (size_t)s->cfg.max_response_bytes);
    }
    /* Keep the buffers and the header array, clear the rest. */
    struct buf hbuf = st->hbuf, body = st->body, out = st->out, trailers = st->trailers;
    struct buf tbody = st->txn.body;
    struct h2_header *hdrs = st->hdrs;
    memset(st, 0, offsetof(struct h2_stream, txn)); /* the txn is set up at dispatch */
    st->hbuf = hbuf;
    st->body = body;
    st->out = out;
    st->trailers = trailers;
    st->txn.body = tbody;
    st->hdrs = hdrs;
    st->sess = s;
    return st;
}

static void stream_link(struct h2_session *s, struct h2_stream *st)
{
    st->prev = NULL;
    st->next = s->streams;
    if (s->streams)
        s->streams->prev = st;
    s->streams = st;
    s->nstreams++;
}

static void stream_unlink(struct h2_session *s, struct h2_stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    s->nstreams--;
}

/* The stream leaves the session: the app hears of it, a REST txn still
 * held by its handler is detached and marked aborted, anything else is
 * recycled. */
static void stream_gone(struct h2_session *s, struct h2_stream *st, uint32_t error_code)
{
    stream_unlink(s, st);
    st->closed = true;
    if (st->kind == STREAM_APP && st->head_done && st->app && st->app->on_close)
        st->app->on_close(st->app->app, st, error_code);
    if (st->kind == STREAM_REST && st->txn_active) {
        /* Detached first: the abort may make the handler answer (and so
         * free the stream) before it returns. */
        st->sess = NULL;
        http_txn_abort(&st->txn);
        return;
    }
    stream_release(s, st);
}

static struct h2_stream *stream_find(struct h2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s->ng, id);
}

/* ---- data provider: output queue → DATA frames (no copy into nghttp2) ---- */

static ssize_t data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
    (void)buf;
    (void)user;
    struct h2_stream *st = source->ptr;
    size_t avail = st->out.len - st->out_off;
    size_t n = avail < length ? avail : length;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (n == avail && st->finished) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->ntrailers) {
            nghttp2_nv nv[H2_MAX_TRAILERS];
            const char *p = st->trailers.data;
            for (uint32_t i = 0; i < st->ntrailers; i++) {
                size_t nl = strlen(p);
                const char *v = p + nl + 1;
                size_t vl = strlen(v);
                nv[i] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)v, nl, vl, NGHTTP2_NV_FLAG_NONE};
                p = v + vl + 1;
            }
            if (nghttp2_submit_trailer(ng, id, nv, st->ntrailers) == 0)
                *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        }
        return (ssize_t)n;
    }
    if (n == 0) {
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

static int send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *source, void *user)
{
    (void)ng;
    struct h2_session *s = user;
    struct h2_stream *st = source->ptr;
    if (s->out->len >= s->high_water)
        return NGHTTP2_ERR_WOULDBLOCK;
    (void)frame; /* no padding is ever selected: header + payload */
    if (buf_reserve(s->out, 9 + length) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    buf_append(s->out, framehd, 9);
    if (length) /* a streamed response may end with an empty DATA frame */
        buf_append(s->out, st->out.data + st->out_off, length);
    st->out_off += length;
    if (st->out_off == st->out.len) {
        st->out.len = 0;
        st->out_off = 0;
    }
    return 0;
}

static ssize_t send_frames(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
                           void *user)
{
    (void)ng;
    (void)flags;
    struct h2_session *s = user;
    if (s->out->len >= s->high_water)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (buf_append(s->out, data, len) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

/* ---- responses ---- */

static nghttp2_nv make_nv(const char *name, size_t nl, const char *value, size_t vl)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, nl, vl, NGHTTP2_NV_FLAG_NONE};
}

static int submit(struct h2_stream *st, const nghttp2_nv *nv, size_t n, bool with_data)
{
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read};
    int rc = nghttp2_submit_response(st->sess->ng, st->id, nv, n, with_data ? &prd : NULL);
    if (rc != 0)
        return ST_ERROR;
    st->responded = true;
    want_write(st->sess);
    return 0;
}

/* A REST response from st->out: status, content type, body length and the
 * extra header lines ("Name: value\r\n", names lowercased for HTTP/2).
 * A streamed response (`streamed`) has no content-length: its DATA frames
 * follow as the handler writes, until h2_stream_finish(). */
static void rest_submit(struct h2_stream *st, int status, const char *content_type,
                        const char *extra, bool head_only, bool streamed)
{
    struct http_resp_head head;
    http_resp_head_build(&head, status, content_type, extra, streamed, st->out.len);
    nghttp2_nv nv[HTTP_RESP_HEAD_FIELDS];
    for (size_t i = 0; i < head.n; i++)
        nv[i] = make_nv(head.fields[i].name, head.fields[i].name_len, head.fields[i].value,
                        head.fields[i].value_len);
    if (head_only) {
        st->out.len = 0;
        st->out_off = 0;
    }
    st->finished = !streamed;
    if (submit(st, nv, head.n, streamed || st->out.len > 0) != 0)
        nghttp2_submit_rst_stream(st->sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

/* An error the transport answers itself (limits). If the request is not
 * complete yet, the rest of its body is read and dropped (up to
 * H2_DISCARD_MAX, then RST_STREAM NO_ERROR). */
static void stream_fail(struct h2_stream *st, int status, const char *msg)
{
    if (st->responded)
        return;
    buf_reset(&st->out);
    st->out_off = 0;
    http_error_body(&st->out, msg);
    rest_submit(st, status, "application/json", NULL, false, false);
}

/* The request body broke a limit as it arrived: the transport answers,
 * or, when the handler took the request on its head, the handler does
 * (http_txn_body_done) and what else arrives is dropped. */
static void body_fail(struct h2_stream *st, int status, const char *msg)
{
    if (!st->txn_active) {
        stream_fail(st, status, msg);
        return;
    }
    st->body_failed = true;
    http_txn_body_done(&st->txn, status, msg);
}

/* ---- the HTTP/2 side of struct http_txn (txn.h) ---- */

static bool stream_usable(const struct h2_stream *st);

static struct h2_stream *txn_stream(const struct http_txn *txn)
{
    return txn->transport;
}

static void h2t_respond(struct http_txn *txn, int status, const char *content_type)
{
    struct h2_stream *st = txn_stream(txn);
    st->txn_active = false;
    if (!st->sess) {
        /* Detached: the peer reset the stream or the connection closed
         * while the handler worked. Nothing to send. */
        stream_free(st);
        return;
    }
    /* Hand the body over without copying; the txn keeps the old buffer. */
    struct buf tmp = st->out;
    st->out = txn->body;
    txn->body = tmp;
    buf_reset(&txn->body);
    st->out_off = 0;
    rest_submit(st, status, content_type, txn->extra_headers, txn->head_only, false);
}

static int h2t_stream_begin(struct http_txn *txn, int status, const char *content_type)
{
    struct h2_stream *st = txn_stream(txn);
    if (!stream_usable(st) || st->responded)
        return ST_ERROR;
    buf_reset(&st->out);
    st->out_off = 0;
    rest_submit(st, status, content_type, txn->extra_headers, txn->head_only, true);
    return 0;
}

static int h2t_stream_write(struct http_txn *txn, const void *data, size_t len)
{
    return h2_stream_write(txn_stream(txn), data, len);
}

static void h2t_stream_end(struct http_txn *txn)
{
    struct h2_stream *st = txn_stream(txn);
    st->txn_active = false;
    if (!st->sess) {
        stream_free(st);
        return;
    }
    if (h2_stream_finish(st, NULL, 0) != 0)
        h2_stream_reset(st, H2_INTERNAL_ERROR);
}

static size_t h2t_stream_pending(const struct http_txn *txn)
{
    return h2_stream_pending(txn_stream(txn));
}

static size_t h2t_peer(const struct http_txn *txn, char *out, size_t cap)
{
    return h2_stream_peer(txn_stream(txn), out, cap);
}

static const struct http_txn_ops h2_txn_ops = {
    .respond = h2t_respond,
    .stream_begin = h2t_stream_begin,
    .stream_write = h2t_stream_write,
    .stream_end = h2t_stream_end,
    .stream_pending = h2t_stream_pending,
    .peer = h2t_peer,
};

/* ---- request assembly ---- */

static const char *hstr(const struct h2_stream *st, size_t off)
{
    return st->hbuf.data + off;
}

/* The header block is complete: offsets become pointers. */
static void head_fix(struct h2_stream *st)
{
    for (uint32_t i = 0; i < st->nhdrs; i++) {
        struct h2_header *h = &st->hdrs[i];
        h->name = hstr(st, (size_t)(uintptr_t)h->name);
        h->value = hstr(st, (size_t)(uintptr_t)h->value);
    }
    st->head_done = true;
}

/* The stream's request line, headers and body so far into its txn. */
static void rest_fill(struct h2_stream *st)
{
    struct http1_request *r = &st->txn.req;
    http_txn_set_request(&st->txn, hstr(st, st->method_off), st->method_len,
                         hstr(st, st->path_off), st->path_len, &st->body);
    r->nheaders = st->nhdrs;
    for (uint32_t i = 0; i < st->nhdrs; i++)
        r->headers[i] = (struct http_header){st->hdrs[i].name, (uint32_t)st->hdrs[i].name_len,
                                             st->hdrs[i].value, (uint32_t)st->hdrs[i].value_len};
    http1_request_index(r);
}

/* Calls the handler with the request filled in (rest_fill): whole, or
 * only its head (`early`, txn.h: the body follows through
 * http_txn_body_done). */
static void rest_dispatch(struct h2_stream *st, bool early)
{
    struct h2_session *s = st->sess;
    struct http_txn *t = &st->txn;
    http_txn_reset(t, &h2_txn_ops, st, HTTP_VERSION_2, s->cfg.on_response);
    t->start_ns = clock_now_ns();
    if (early) {
        st->early = true;
        t->body_pending = true;
        /* DATA that came in the same batch as the head is the body so
         * far, not the body: the handler sees it at request_end(). */
        t->req.body = NULL;
        t->req.body_len = 0;
        t->req.has_content_length = st->has_content_length;
        t->req.content_length = st->content_length;
    }
    if (s->cfg.alt_svc)
        http_txn_add_header(t, "Alt-Svc", s->cfg.alt_svc);
    st->txn_active = true;
    s->cfg.handler(s->cfg.handler_app, t);
}

/* After a batch of received bytes: the REST streams whose head came and
 * whose body is still on its way go to the handler now if the server
 * takes them on their head (config `early`). Deciding after the batch, not
 * at the HEADERS frame, keeps a request whose DATA came with its HEADERS
 * on the ordinary path. */
static void dispatch_heads(struct h2_session *s)
{
    s->heads_waiting = false;
    for (struct h2_stream *st = s->streams, *next; st; st = next) {
        next = st->next;
        if (st->kind != STREAM_REST || !st->head_done || st->request_done || st->responded ||
            st->offered)
            continue;
        st->offered = true;
        rest_fill(st);
        if (s->cfg.early(s->cfg.handler_app, &st->txn))
            rest_dispatch(st, true);
    }
}

static bool is_grpc(const struct h2_stream *st)
{
    size_t len;
    const char *ct = h2_stream_header(st, "content-type", &len);
    /* application/grpc-web* is an ordinary HTTP exchange (the REST
     * handler routes it to the gRPC-Web front end). */
    return ct && len >= 16 && strncasecmp(ct, "application/grpc", 16) == 0 &&
           !(len >= 20 && strncasecmp(ct + 16, "-web", 4) == 0);
}

static void head_complete(struct h2_stream *st)
{
    head_fix(st);
    if (st->err_status) {
        stream_fail(st, st->err_status, st->err_msg);
        return;
    }
    if (!st->has_method || !st->has_path) {
        stream_fail(st, 400, "request without :method or :path (CONNECT is not supported)");
        return;
    }
    if (is_grpc(st)) {
        st->kind = STREAM_APP;
        st->app = st->sess->cfg.grpc;
        if (!st->app) {
            static const struct h2_header tr[] = {
                {"content-type", 12, "application/grpc", 16},
                {"grpc-status", 11, "12", 2},
                {"grpc-message", 12, "gRPC is not enabled on this server", 34},
            };
            h2_stream_finish(st, tr, 3);
            return;
        }
        st->app->on_headers(st->app->app, st);
        return;
    }
    size_t len;
    const char *cl = h2_stream_header(st, "content-length", &len);
    if (cl) {
        uint64_t v = 0;
        bool ok = len > 0 && len <= 19;
        for (size_t i = 0; ok && i < len; i++) {
            ok = cl[i] >= '0' && cl[i] <= '9';
            v = v * 10 + (uint64_t)(cl[i] - '0');
        }
        if (!ok) {
            stream_fail(st, 400, "invalid Content-Length");
            return;
        }
        if (v > st->sess->limits.max_body) {
            char msg[HTTP_BODY_TOO_LARGE_MAX];
            stream_fail(st, 413, http_body_too_large(msg, v, false, st->sess->limits.max_body));
            return;
        }
        st->has_content_length = true;
        st->content_length = v;
    }
    st->sess->heads_waiting = st->sess->cfg.early != NULL;
}

static void request_end(struct h2_stream *st)
{
    st->request_done = true;
    if (st->kind == STREAM_APP) {
        if (st->app && st->app->on_end)
            st->app->on_end(st->app->app, st);
        return;
    }
    if (st->early) {
        /* The handler has the txn since the head: its body is complete. */
        if (st->txn_active && st->txn.body_pending && !st->body_failed) {
            struct http1_request *r = &st->txn.req;
            r->body = st->body.len ? st->body.data : NULL;
            r->body_len = st->body.len;
            r->has_content_length = true;
            r->content_length = st->body.len;
            http_txn_body_done(&st->txn, 0, NULL);
        }
        return;
    }
    if (!st->responded) {
        rest_fill(st);
        rest_dispatch(st, false);
    }
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct h2_stream *st = stream_get(s);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM */
    st->id = frame->hd.stream_id;
    st->kind = STREAM_REST;
    if (nghttp2_session_set_stream_user_data(ng, st->id, st) != 0) {
        stream_release(s, st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    stream_link(s, st);
    return 0;
}

static void head_error(struct h2_stream *st, int status, const char *msg)
{
    if (!st->err_status) {
        st->err_status = status;
        st->err_msg = msg;
    }
}

static bool hbuf_add(struct h2_stream *st, const uint8_t *p, size_t n, size_t *off)
{
    *off = st->hbuf.len;
    return buf_append(&st->hbuf, p, n) == 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags;
    struct h2_session *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers of a request are ignored */
    struct h2_stream *st = stream_find(s, frame->hd.stream_id);
    (void)ng;
    if (!st || st->err_status)
        return 0;
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > s->limits.max_header_bytes) {
        head_error(st, 431, "request header fields too large");
        return 0;
    }
    size_t noff, voff;
    if (namelen && name[0] == ':') {
        if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
            if (!hbuf_add(st, value, valuelen, &voff))
                goto too_large;
            st->method_off = voff;
            st->method_len = valuelen;
            st->has_method = true;
        } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
            if (!hbuf_add(st, value, valuelen, &voff))
                goto too_large;
            st->path_off = voff;
            st->path_len = valuelen;
            st->has_path = true;
        }
        return 0;
    }
    if (st->nhdrs >= s->limits.max_headers) {
        head_error(st, 431, "too many header fields");
        return 0;
    }
    if (!hbuf_add(st, name, namelen, &noff) || !hbuf_add(st, value, valuelen, &voff))
        goto too_large;
    st->hdrs[st->nhdrs++] = (struct h2_header){(const char *)(uintptr_t)noff, namelen,
                                               (const char *)(uintptr_t)voff, valuelen};
    return 0;
too_large:
    head_error(st, 431, "request header fields too large");
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    (void)ng;
    struct h2_session *s = user;
    struct h2_stream *st;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        st = stream_find(s, frame->hd.stream_id);
        if (!st)
            return 0;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            head_complete(st);
        if (!st->closed && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->request_done)
            request_end(st);
        return 0;
    case NGHTTP2_DATA:
        st = stream_find(s, frame->hd.stream_id);
        if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->request_done)
            request_end(st);
        return 0;
    default:
        return 0;
    }
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    (void)flags;
    struct h2_session *s = user;
    struct h2_stream *st = stream_find(s, id);
    if (st && st->head_done) {
        if (st->kind == STREAM_APP) {
            if (st->app && st->app->on_data)
                st->app->on_data(st->app->app, st, data, len);
        } else if (!st->responded && !st->body_failed) {
            if (st->body.len + len > s->limits.max_body) {
                char msg[HTTP_BODY_TOO_LARGE_MAX];
                body_fail(st, 413,
                          http_body_too_large(msg, st->body.len + len, true, s->limits.max_body));
            } else if (buf_append(&st->body, data, len) != 0)
                body_fail(st, 503, "out of memory for the request body");
        } else if (!st->responded) {
            /* The body failed: dropped until the handler has answered. */
        } else if ((st->discarded += len) > H2_DISCARD_MAX && !st->reset_sent) {
            st->reset_sent = true;
            nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        }
    }
    /* The bytes are taken (or dropped): give the window back. */
    nghttp2_session_consume(ng, id, len);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *s = user;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct h2_stream *st = stream_find(s, frame->hd.stream_id);
    /* An app (gRPC) finished before the request was complete: stop the
     * client sending (RFC 9113 section 8.1). REST streams read on (see
     * H2_DISCARD_MAX), unless the body they announced has more than that
     * left to come (a request refused on its head): then it is not waited
     * for either. (Some clients, curl 7.88 among them, take a reset after a
     * complete response for an error: a small rest is read instead.) */
    bool big_rest = st && st->early && st->has_content_length &&
                    st->content_length - st->body.len > H2_DISCARD_MAX;
    if (st && (st->kind == STREAM_APP || big_rest) && !st->request_done && !st->closed &&
        !st->reset_sent) {
        st->reset_sent = true;
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *user)
{
    struct h2_session *s = user;
    struct h2_stream *st = stream_find(s, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    stream_gone(s, st, error_code);
    return 0;
}

/* ---- session ---- */

int h2_session_new(const struct h2_session_config *cfg, struct h2_session **out)
{
    int rc = -ENOMEM;
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_option *opt = NULL;
    struct h2_session *s = mem_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->limits = *cfg->limits;
    s->cfg.limits = &s->limits;
    if (s->limits.max_headers > HTTP1_MAX_HEADERS_CAP)
        s->limits.max_headers = HTTP1_MAX_HEADERS_CAP;
    h2_mem_init(&s->mem);
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0)
        goto out;
    nghttp2_session_callbacks_set_send_callback(cbs, send_frames);
    nghttp2_session_callbacks_set_send_data_callback(cbs, send_data);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);

    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, H2_HEADER_TABLE_SIZE);
    nghttp2_option_set_max_settings(opt, H2_MAX_SETTINGS_ENTRIES);
    nghttp2_option_set_max_outbound_ack(opt, H2_MAX_OUTBOUND_ACK);
    nghttp2_option_set_stream_reset_rate_limit(opt, H2_RESET_BURST, H2_RESET_RATE);
    nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
    nghttp2_option_set_no_closed_streams(opt, 1);
    if (nghttp2_session_server_new3(&s->ng, cbs, s, opt, &s->mem.ng) != 0) {
        s->ng = NULL;
        goto out;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, H2_HEADER_TABLE_SIZE},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, s->limits.max_header_bytes},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW) != 0)
        goto out;
    rc = 0;
    *out = s;
out:
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rc) {
        if (s->ng)
            nghttp2_session_del(s->ng);
        h2_mem_release(&s->mem);
        mem_free(s);
    }
    return rc;
}

int h2_session_recv(struct h2_session *s, const uint8_t *data, size_t len)
{
    if (s->failed)
        return ST_ERROR;
    ssize_t rv = nghttp2_session_mem_recv(s->ng, data, len);
    if (rv < 0) {
        log_debug("http2: closing connection: %s", nghttp2_strerror((int)rv));
        s->failed = true;
        return ST_ERROR;
    }
    if (s->heads_waiting)
        dispatch_heads(s);
    return 0;
}

int h2_session_send(struct h2_session *s, struct buf *out, size_t high_water)
{
    s->out = out;
    s->high_water = high_water;
    int rc = nghttp2_session_send(s->ng);
    s->out = NULL;
    if (rc != 0) {
        log_debug("http2: send failed: %s", nghttp2_strerror(rc));
        s->failed = true;
        return ST_ERROR;
    }
    return 0;
}

bool h2_session_done(const struct h2_session *s)
{
    return s->failed || (!nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng));
}

uint32_t h2_session_stream_count(const struct h2_session *s)
{
    return s->nstreams;
}

bool h2_session_receiving(const struct h2_session *s)
{
    for (const struct h2_stream *st = s->streams; st; st = st->next)
        if (!st->request_done)
            return true;
    return false;
}

void h2_session_drain(struct h2_session *s)
{
    nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    want_write(s);
}

void h2_session_free(struct h2_session *s)
{
    if (!s)
        return;
    while (s->streams) {
        struct h2_stream *st = s->streams;
        nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
        stream_gone(s, st, NGHTTP2_CANCEL);
    }
    while (s->free_streams) {
        struct h2_stream *st = s->free_streams;
        s->free_streams = st->next;
        stream_free(st);
    }
    nghttp2_session_del(s->ng);
    h2_mem_release(&s->mem);
    mem_free(s);
}

/* ---- the stream API of the app ---- */

void h2_stream_set_user(struct h2_stream *st, void *user)
{
    st->user = user;
}

void *h2_stream_user(const struct h2_stream *st)
{
    return st->user;
}

const char *h2_stream_method(const struct h2_stream *st, size_t *len)
{
    *len = st->has_method ? st->method_len : 0;
    return st->has_method ? hstr(st, st->method_off) : NULL;
}

const char *h2_stream_path(const struct h2_stream *st, size_t *len)
{
    *len = st->has_path ? st->path_len : 0;
    return st->has_path ? hstr(st, st->path_off) : NULL;
}

const char *h2_stream_header(const struct h2_stream *st, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (uint32_t i = 0; i < st->nhdrs; i++) {
        const struct h2_header *h = &st->hdrs[i];
        if (h->name_len == nl && strncasecmp(h->name, name, nl) == 0) {
            *len = h->value_len;
            return h->value;
        }
    }
    *len = 0;
    return NULL;
}

size_t h2_stream_header_count(const struct h2_stream *st)
{
    return st->nhdrs;
}

const struct h2_header *h2_stream_header_at(const struct h2_stream *st, size_t i)
{
    return i < st->nhdrs ? &st->hdrs[i] : NULL;
}

struct loop *h2_stream_loop(const struct h2_stream *st)
{
    return st->sess ? st->sess->cfg.loop : NULL;
}

int32_t h2_stream_id(const struct h2_stream *st)
{
    return st->id;
}

size_t h2_stream_peer(const struct h2_stream *st, char *out, size_t cap)
{
    if (!st->sess || !st->sess->cfg.peer || cap == 0)
        return 0;
    return st->sess->cfg.peer(st->sess->cfg.arg, out, cap);
}

static bool stream_usable(const struct h2_stream *st)
{
    return st->sess && !st->closed && !st->finished;
}

static void stream_resume(struct h2_stream *st)
{
    if (st->deferred && st->responded) {
        st->deferred = false;
        nghttp2_session_resume_data(st->sess->ng, st->id);
    }
    want_write(st->sess);
}

int h2_stream_respond_headers(struct h2_stream *st, int status, const struct h2_header *h, size_t n)
{
    if (!stream_usable(st) || st->responded || n > H2_MAX_RESPONSE_HEADERS || status < 100 ||
        status > 999)
        return ST_ERROR;
    nghttp2_nv nv[1 + H2_MAX_RESPONSE_HEADERS];
    char status_str[4];
    snprintf(status_str, sizeof status_str, "%d", status);
    nv[0] = make_nv(":status", 7, status_str, 3);
    for (size_t i = 0; i < n; i++)
        nv[i + 1] = make_nv(h[i].name, h[i].name_len, h[i].value, h[i].value_len);
    return submit(st, nv, n + 1, true);
}

int h2_stream_write(struct h2_stream *st, const void *data, size_t len)
{
    if (!stream_usable(st))
        return ST_ERROR;
    if (st->out_off > 0 && st->out_off >= st->out.len / 2) {
        buf_consume(&st->out, st->out_off);
        st->out_off = 0;
    }
    if (buf_append(&st->out, data, len) != 0) {
        st->out.err = 0;
        return ST_ERROR;
    }
    stream_resume(st);
    return 0;
}

int h2_stream_finish(struct h2_stream *st, const struct h2_header *trailers, size_t n)
{
    if (!stream_usable(st) || n > H2_MAX_TRAILERS)
        return ST_ERROR;
    if (!st->responded) {
        /* Trailers-only: one HEADERS frame with END_STREAM. */
        nghttp2_nv nv[1 + H2_MAX_TRAILERS];
        nv[0] = make_nv(":status", 7, "200", 3);
        for (size_t i = 0; i < n; i++)
            nv[i + 1] = make_nv(trailers[i].name, trailers[i].name_len, trailers[i].value,
                                trailers[i].value_len);
        st->out.len = 0;
        st->out_off = 0;
        st->finished = true;
        return submit(st, nv, n + 1, false);
    }
    buf_reset(&st->trailers);
    for (size_t i = 0; i < n; i++) {
        if (memchr(trailers[i].name, '\0', trailers[i].name_len) ||
            memchr(trailers[i].value, '\0', trailers[i].value_len))
            return ST_ERROR;
        buf_append(&st->trailers, trailers[i].name, trailers[i].name_len);
        buf_putc(&st->trailers, '\0');
        buf_append(&st->trailers, trailers[i].value, trailers[i].value_len);
        buf_putc(&st->trailers, '\0');
    }
    if (st->trailers.err)
        return ST_ERROR;
    st->ntrailers = (uint32_t)n;
    st->finished = true;
    stream_resume(st);
    return 0;
}

size_t h2_stream_pending(const struct h2_stream *st)
{
    return st->out.len - st->out_off;
}

void h2_stream_reset(struct h2_stream *st, uint32_t error_code)
{
    if (!st->sess || st->closed)
        return;
    nghttp2_submit_rst_stream(st->sess->ng, NGHTTP2_FLAG_NONE, st->id, error_code);
    want_write(st->sess);
}
