#include "http/h3_conn.h"

#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/status.h"
#include "http/http1.h"

/* ---- request assembly ---- */

static const char *hstr(const struct h3_stream *st, size_t off)
{
    return st->hbuf.data + off;
}

static void head_error(struct h3_stream *st, int status, const char *msg)
{
    if (!st->err_status) {
        st->err_status = status;
        st->err_msg = msg;
    }
}

static void rest_dispatch(struct h3_stream *st)
{
    struct h3_conn *c = st->conn;
    struct h3_server *s = c->server;
    struct http_txn *t = &st->txn;
    http_txn_set_request(t, hstr(st, st->method_off), st->method_len, hstr(st, st->path_off),
                         st->path_len, &st->body);
    http_txn_reset(t, &h3_txn_ops, st, HTTP_VERSION_3, s->cfg.on_response);
    t->start_ns = clock_now_ns();
    st->txn_active = true;
    s->handler(s->app, t);
}

/* The header block is complete: offsets become pointers; checks. */
static void head_complete(struct h3_stream *st)
{
    struct http1_request *r = &st->txn.req;
    for (uint32_t i = 0; i < r->nheaders; i++) {
        struct http_header *h = &r->headers[i];
        h->name = hstr(st, (size_t)(uintptr_t)h->name);
        h->value = hstr(st, (size_t)(uintptr_t)h->value);
    }
    st->head_done = true;
    if (st->err_status) {
        h3_stream_fail(st, st->err_status, st->err_msg);
        return;
    }
    if (!st->has_method || !st->has_path) {
        h3_stream_fail(st, 400, "request without :method or :path (CONNECT is not supported)");
        return;
    }
    const struct http_header *cl = http1_header(r, "content-length");
    if (cl) {
        uint64_t v = 0;
        bool ok = cl->value_len > 0 && cl->value_len <= 19;
        for (uint32_t i = 0; ok && i < cl->value_len; i++) {
            ok = cl->value[i] >= '0' && cl->value[i] <= '9';
            v = v * 10 + (uint64_t)(cl->value[i] - '0');
        }
        if (!ok) {
            h3_stream_fail(st, 400, "invalid Content-Length");
            return;
        }
        uint64_t max = st->conn->server->cfg.limits.max_body;
        if (v > max) {
            char msg[HTTP_BODY_TOO_LARGE_MAX];
            h3_stream_fail(st, 413, http_body_too_large(msg, v, false, max));
        }
    }
}

static void request_end(struct h3_stream *st)
{
    st->request_done = true;
    if (!st->responded)
        rest_dispatch(st);
}

/* ---- nghttp3 callbacks ---- */

static int h3_begin_headers(nghttp3_conn *h, int64_t id, void *conn_user, void *stream_user)
{
    (void)stream_user;
    struct h3_conn *c = conn_user;
    struct h3_stream *st = h3_stream_new(c, id);
    if (!st)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    nghttp3_conn_set_stream_user_data(h, id, st);
    return 0;
}

static bool hbuf_add(struct h3_stream *st, const uint8_t *p, size_t n, size_t *off)
{
    *off = st->hbuf.len;
    return buf_append(&st->hbuf, p, n) == 0;
}

static int h3_recv_header(nghttp3_conn *h, int64_t id, int32_t token, nghttp3_rcbuf *name,
                          nghttp3_rcbuf *value, uint8_t flags, void *conn_user, void *stream_user)
{
    (void)h;
    (void)id;
    (void)token;
    (void)flags;
    struct h3_conn *c = conn_user;
    struct h3_stream *st = stream_user;
    if (!st || st->err_status)
        return 0;
    const struct http1_limits *lim = &c->server->cfg.limits;
    nghttp3_vec nm = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    st->header_bytes += nm.len + v.len + 32;
    if (st->header_bytes > lim->max_header_bytes) {
        head_error(st, 431, "request header fields too large");
        return 0;
    }
    size_t noff, voff;
    if (nm.len && nm.base[0] == ':') {
        if (nm.len == 7 && memcmp(nm.base, ":method", 7) == 0) {
            if (!hbuf_add(st, v.base, v.len, &voff))
                goto too_large;
            st->method_off = voff;
            st->method_len = v.len;
            st->has_method = true;
        } else if (nm.len == 5 && memcmp(nm.base, ":path", 5) == 0) {
            if (!hbuf_add(st, v.base, v.len, &voff))
                goto too_large;
            st->path_off = voff;
            st->path_len = v.len;
            st->has_path = true;
        }
        return 0;
    }
    struct http1_request *r = &st->txn.req;
    uint32_t max_headers =
        lim->max_headers < HTTP1_MAX_HEADERS_CAP ? lim->max_headers : HTTP1_MAX_HEADERS_CAP;
    if (r->nheaders >= max_headers) {
        head_error(st, 431, "too many header fields");
        return 0;
    }
    if (!hbuf_add(st, nm.base, nm.len, &noff) || !hbuf_add(st, v.base, v.len, &voff))
        goto too_large;
    r->headers[r->nheaders++] =
        (struct http_header){(const char *)(uintptr_t)noff, (uint32_t)nm.len,
                             (const char *)(uintptr_t)voff, (uint32_t)v.len};
    return 0;
too_large:
    head_error(st, 431, "request header fields too large");
    return 0;
}

static int h3_end_headers(nghttp3_conn *h, int64_t id, int fin, void *conn_user, void *stream_user)
{
    (void)h;
    (void)id;
    (void)conn_user;
    struct h3_stream *st = stream_user;
    if (!st)
        return 0;
    head_complete(st);
    if (fin && st->conn && !st->request_done)
        request_end(st);
    return 0;
}

static int h3_recv_data(nghttp3_conn *h, int64_t id, const uint8_t *data, size_t len,
                        void *conn_user, void *stream_user)
{
    (void)h;
    struct h3_conn *c = conn_user;
    struct h3_stream *st = stream_user;
    h3_conn_consume(c, id, len); /* taken or dropped: the window goes back */
    if (!st || !st->head_done || st->responded)
        return 0;
    uint64_t max = c->server->cfg.limits.max_body;
    if (st->body.len + len > max) {
        char msg[HTTP_BODY_TOO_LARGE_MAX];
        h3_stream_fail(st, 413, http_body_too_large(msg, st->body.len + len, true, max));
    } else if (buf_append(&st->body, data, len) != 0) {
        h3_stream_fail(st, 503, "out of memory for the request body");
    }
    return 0;
}

static int h3_deferred_consume(nghttp3_conn *h, int64_t id, size_t n, void *conn_user,
                               void *stream_user)
{
    (void)h;
    (void)stream_user;
    h3_conn_consume(conn_user, id, n);
    return 0;
}

static int h3_end_stream(nghttp3_conn *h, int64_t id, void *conn_user, void *stream_user)
{
    (void)h;
    (void)id;
    (void)conn_user;
    struct h3_stream *st = stream_user;
    if (st && !st->request_done)
        request_end(st);
    return 0;
}

static int h3_acked_stream_data(nghttp3_conn *h, int64_t id, uint64_t n, void *conn_user,
                                void *stream_user)
{
    (void)h;
    (void)id;
    (void)conn_user;
    if (stream_user)
        h3_stream_acked(stream_user, n);
    return 0;
}

static int h3_stream_close(nghttp3_conn *h, int64_t id, uint64_t app_error_code, void *conn_user,
                           void *stream_user)
{
    (void)h;
    (void)app_error_code;
    struct h3_conn *c = conn_user;
    if (stream_user)
        h3_stream_gone(c, stream_user);
    /* A client request stream is over: the client may open another. */
    if ((id & 0x3) == 0)
        ngtcp2_conn_extend_max_streams_bidi(c->q, 1);
    return 0;
}

static int h3_stop_sending(nghttp3_conn *h, int64_t id, uint64_t app_error_code, void *conn_user,
                           void *stream_user)
{
    (void)h;
    (void)stream_user;
    struct h3_conn *c = conn_user;
    ngtcp2_conn_shutdown_stream_read(c->q, id, app_error_code);
    return 0;
}

static int h3_reset_stream(nghttp3_conn *h, int64_t id, uint64_t app_error_code, void *conn_user,
                           void *stream_user)
{
    (void)h;
    (void)stream_user;
    struct h3_conn *c = conn_user;
    ngtcp2_conn_shutdown_stream_write(c->q, id, app_error_code);
    return 0;
}

/* The HTTP/3 layer of a connection: once the handshake has given us the
 * client's transport parameters (our three unidirectional streams need
 * its stream limit). */
int h3_http_setup(struct h3_conn *c)
{
    if (c->h)
        return 0;
    if (ngtcp2_conn_get_streams_uni_left(c->q) < 3)
        return ST_ERROR;
    static const nghttp3_callbacks cbs = {
        .acked_stream_data = h3_acked_stream_data,
        .stream_close = h3_stream_close,
        .recv_data = h3_recv_data,
        .deferred_consume = h3_deferred_consume,
        .begin_headers = h3_begin_headers,
        .recv_header = h3_recv_header,
        .end_headers = h3_end_headers,
        .stop_sending = h3_stop_sending,
        .end_stream = h3_end_stream,
        .reset_stream = h3_reset_stream,
    };
    const struct h3_server_config *cfg = &c->server->cfg;
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    settings.max_field_section_size = cfg->limits.max_header_bytes;
    settings.qpack_max_dtable_capacity = 4096;
    settings.qpack_blocked_streams = 100;
    if (nghttp3_conn_server_new(&c->h, &cbs, &settings, NULL, c) != 0)
        return ST_ERROR;
    nghttp3_conn_set_max_client_streams_bidi(c->h, cfg->max_streams);
    int64_t ctrl, enc, dec;
    if (ngtcp2_conn_open_uni_stream(c->q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(c->h, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h, enc, dec) != 0)
        return ST_ERROR;
    if (c->server->draining) {
        nghttp3_conn_submit_shutdown_notice(c->h);
        c->goaway_sent = true;
    }
    return 0;
}
