#include "http/h3.h"

#include <errno.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "http/resp_head.h"
#include "net/udp.h"

/* Flow control: the windows a client starts with, and how far ngtcp2 may
 * grow them as the bytes are taken (as HTTP/2's: a big tensor is not
 * throttled by round trips). */
#define H3_STREAM_WINDOW (1u << 20)
#define H3_CONN_WINDOW (4u << 20)
#define H3_MAX_STREAM_WINDOW (16u << 20)
#define H3_MAX_CONN_WINDOW (64u << 20)
/* Our connection IDs, and the per-process secret behind their stateless
 * reset tokens. */
#define H3_SCID_LEN 18
#define H3_SECRET_LEN 32
/* Datagrams: read per wakeup before yielding, and the largest we take. */
#define H3_READS_PER_WAKEUP 64
#define H3_MAX_DATAGRAM 65536
/* Packets written per connection per turn before yielding to the loop. */
#define H3_WRITES_PER_TURN 64
/* The QUIC handshake must complete within this. */
#define H3_HANDSHAKE_TIMEOUT_MS 10000
/* Vectors handed from nghttp3 to ngtcp2 per packet. */
#define H3_VECS 16
/* Connection-ID routing table buckets (chained). */
#define H3_CID_BUCKETS 4096
/* Response header fields of a REST answer, besides the extra lines. */

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct h3_conn;

/* Response bytes given to nghttp3, kept until the client acknowledges them
 * (ngtcp2 retransmits from them). */
struct h3_chunk {
    struct h3_chunk *next;
    char *data; /* owned */
    size_t len;
    size_t acked;
};

struct h3_stream {
    struct h3_conn *conn; /* NULL once detached (the handler still holds the txn) */
    struct h3_stream *prev, *next;
    int64_t id;
    /* Request head: names and values copied into hbuf; the txn's header
     * array holds offsets until the head is complete. */
    struct buf hbuf;
    size_t method_off, method_len, path_off, path_len;
    bool has_method, has_path;
    uint64_t header_bytes;
    int err_status; /* answer this error once the head is complete */
    const char *err_msg;
    bool head_done;
    bool request_done; /* the client's FIN */
    bool txn_active;   /* the handler owns the txn */
    bool responded;    /* response submitted */
    bool finished;     /* all output queued */
    bool deferred;     /* read_data said WOULDBLOCK */
    struct buf body;   /* request body */
    /* Output: chunks in order; [read_chunk, read_off) onward not yet given
     * to nghttp3; the head chunk's `acked` bytes are acknowledged. */
    struct h3_chunk *out_head, *out_tail, *read_chunk;
    size_t read_off;
    uint64_t unacked; /* bytes queued and not yet acknowledged */
    struct http_txn txn;
};

struct cid_entry {
    ngtcp2_cid cid;
    struct h3_conn *conn;
    struct cid_entry *bucket_next;
    struct cid_entry *conn_next;
};

enum conn_phase {
    PHASE_OPEN,
    PHASE_CLOSING,  /* we sent CONNECTION_CLOSE: answer packets with it until deadline */
    PHASE_DRAINING, /* the peer closed: stay silent until deadline */
};

struct h3_conn {
    struct loop_watch timer; /* fd -1: expiry and deferred writes */
    struct h3_server *server;
    struct h3_conn *prev, *next;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    struct quic_tls_session tls;
    ngtcp2_crypto_conn_ref conn_ref;
    struct cid_entry *cids;
    struct udp_addr local, remote; /* the path of the last packet */
    struct h3_stream *streams;
    uint32_t nstreams;
    enum conn_phase phase;
    uint64_t close_deadline_ns;
    struct buf close_pkt;                /* our CONNECTION_CLOSE, resent in PHASE_CLOSING */
    ngtcp2_connection_close_error ccerr; /* set by a failing callback */
    bool dead;                           /* free at the next safe point */
    bool goaway_sent;                    /* draining: GOAWAY submitted */
};

struct h3_server {
    struct loop *loop;
    struct h3_server_config cfg;
    http_handler_fn handler;
    void *app;
    struct loop_watch sock;
    int port;
    struct h3_conn *conns;
    uint32_t nconns;
    atomic_uint own_connections;
    atomic_uint *open_connections;
    struct cid_entry *cid_table[H3_CID_BUCKETS];
    uint8_t secret[H3_SECRET_LEN];
    uint8_t pkt[H3_MAX_DATAGRAM]; /* receive buffer */
    uint8_t tx[NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE];
    bool draining;
    void (*on_drained)(void *arg);
    void *drained_arg;
};

static void conn_write(struct h3_conn *c);
static void conn_reap(struct h3_conn *c);
static void stream_fail(struct h3_stream *st, int status, const char *msg);

static void fill_random(void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = getrandom(b, n, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            /* getrandom() cannot fail once the pool is initialized; keep a
             * defined value rather than stack garbage. */
            memset(b, 0, n);
            return;
        }
        b += r;
        n -= (size_t)r;
    }
}

/* ---- connection-ID routing ---- */

static uint32_t cid_hash(const uint8_t *d, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 16777619u;
    return h % H3_CID_BUCKETS;
}

static struct h3_conn *cid_find(struct h3_server *s, const uint8_t *d, size_t n)
{
    for (struct cid_entry *e = s->cid_table[cid_hash(d, n)]; e; e = e->bucket_next)
        if (e->cid.datalen == n && memcmp(e->cid.data, d, n) == 0)
            return e->conn;
    return NULL;
}

static int cid_add(struct h3_conn *c, const ngtcp2_cid *cid)
{
    struct h3_server *s = c->server;
    struct cid_entry *e = mem_calloc(1, sizeof *e);
    if (!e)
        return ST_ERROR;
    e->cid = *cid;
    e->conn = c;
    uint32_t b = cid_hash(cid->data, cid->datalen);
    e->bucket_next = s->cid_table[b];
    s->cid_table[b] = e;
    e->conn_next = c->cids;
    c->cids = e;
    return 0;
}

static void cid_unlink_bucket(struct h3_server *s, struct cid_entry *e)
{
    struct cid_entry **pp = &s->cid_table[cid_hash(e->cid.data, e->cid.datalen)];
    for (; *pp; pp = &(*pp)->bucket_next)
        if (*pp == e) {
            *pp = e->bucket_next;
            return;
        }
}

static void cid_remove(struct h3_conn *c, const ngtcp2_cid *cid)
{
    for (struct cid_entry **pp = &c->cids; *pp; pp = &(*pp)->conn_next) {
        struct cid_entry *e = *pp;
        if (e->cid.datalen == cid->datalen && memcmp(e->cid.data, cid->data, cid->datalen) == 0) {
            *pp = e->conn_next;
            cid_unlink_bucket(c->server, e);
            mem_free(e);
            return;
        }
    }
}

static void cid_remove_all(struct h3_conn *c)
{
    while (c->cids) {
        struct cid_entry *e = c->cids;
        c->cids = e->conn_next;
        cid_unlink_bucket(c->server, e);
        mem_free(e);
    }
}

/* ---- streams ---- */

static void want_write(struct h3_conn *c)
{
    loop_defer(c->server->loop, &c->timer);
}

static void chunks_free(struct h3_stream *st)
{
    while (st->out_head) {
        struct h3_chunk *k = st->out_head;
        st->out_head = k->next;
        mem_free(k->data);
        mem_free(k);
    }
    st->out_tail = st->read_chunk = NULL;
    st->read_off = 0;
    st->unacked = 0;
}

static void stream_free(struct h3_stream *st)
{
    chunks_free(st);
    buf_free(&st->hbuf);
    buf_free(&st->body);
    buf_free(&st->txn.body);
    mem_free(st);
}

static struct h3_stream *stream_new(struct h3_conn *c, int64_t id)
{
    struct h3_server *s = c->server;
    struct h3_stream *st = mem_calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->conn = c;
    st->id = id;
    buf_init(&st->hbuf, s->cfg.limits.max_header_bytes);
    buf_init(&st->body, (size_t)s->cfg.limits.max_body);
    buf_init(&st->txn.body, (size_t)s->cfg.max_response_bytes);
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    c->nstreams++;
    return st;
}

static void stream_unlink(struct h3_conn *c, struct h3_stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    c->nstreams--;
}

/* The stream leaves its connection: a txn still held by its handler is
 * detached and aborted (freed when the handler ends it), else freed. */
static void stream_gone(struct h3_conn *c, struct h3_stream *st)
{
    stream_unlink(c, st);
    st->conn = NULL;
    if (st->txn_active) {
        http_txn_abort(&st->txn);
        return;
    }
    stream_free(st);
}

/* Queues bytes (taking ownership of data) behind the stream's output. */
static void chunk_push(struct h3_stream *st, struct h3_chunk *k)
{
    if (st->out_tail)
        st->out_tail->next = k;
    else
        st->out_head = k;
    st->out_tail = k;
    if (!st->read_chunk) {
        st->read_chunk = k;
        st->read_off = 0;
    }
    st->unacked += k->len;
}

static int chunk_copy(struct h3_stream *st, const void *data, size_t len)
{
    struct h3_chunk *k = mem_calloc(1, sizeof *k);
    char *copy = len ? mem_alloc(len) : NULL;
    if (!k || (len && !copy)) {
        mem_free(k);
        mem_free(copy);
        return ST_ERROR;
    }
    memcpy(copy, data, len);
    k->data = copy;
    k->len = len;
    chunk_push(st, k);
    return 0;
}

/* Moves b's bytes into a chunk without copying (b is left empty, with
 * its ceiling). */
static int chunk_take(struct h3_stream *st, struct buf *b)
{
    struct h3_chunk *k = mem_calloc(1, sizeof *k);
    if (!k)
        return ST_ERROR;
    k->data = b->data;
    k->len = b->len;
    size_t max = b->max;
    buf_init(b, max);
    chunk_push(st, k);
    return 0;
}

static void chunks_acked(struct h3_stream *st, uint64_t n)
{
    st->unacked -= n < st->unacked ? n : st->unacked;
    while (n > 0 && st->out_head) {
        struct h3_chunk *k = st->out_head;
        size_t left = k->len - k->acked;
        size_t take = n < left ? (size_t)n : left;
        k->acked += take;
        n -= take;
        if (k->acked == k->len && k != st->read_chunk) {
            st->out_head = k->next;
            if (!st->out_head)
                st->out_tail = NULL;
            mem_free(k->data);
            mem_free(k);
        } else if (k->acked < k->len) {
            break;
        }
    }
}

/* nghttp3 asks for response body bytes: everything not yet given. */
static nghttp3_ssize read_data(nghttp3_conn *h, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *conn_user, void *stream_user)
{
    (void)h;
    (void)id;
    (void)conn_user;
    struct h3_stream *st = stream_user;
    size_t n = 0;
    while (n < veccnt && st->read_chunk) {
        struct h3_chunk *k = st->read_chunk;
        if (st->read_off < k->len) {
            vec[n].base = (uint8_t *)k->data + st->read_off;
            vec[n].len = k->len - st->read_off;
            n++;
        }
        st->read_chunk = k->next;
        st->read_off = 0;
    }
    if (!st->read_chunk && st->finished)
        *pflags |= NGHTTP3_DATA_FLAG_EOF;
    else if (n == 0) {
        st->deferred = true;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    return (nghttp3_ssize)n;
}

static void stream_resume(struct h3_stream *st)
{
    struct h3_conn *c = st->conn;
    if (st->deferred && st->responded) {
        st->deferred = false;
        nghttp3_conn_resume_stream(c->h, st->id);
    }
    want_write(c);
}

/* ---- responses ---- */

static nghttp3_nv make_nv(const char *name, size_t nl, const char *value, size_t vl)
{
    return (nghttp3_nv){(uint8_t *)name, (uint8_t *)value, nl, vl, NGHTTP3_NV_FLAG_NONE};
}

/* Submits a REST response: status, content type, body length (of the
 * queued output, unless `streamed`) and the extra header lines ("Name:
 * value\r\n", names lowercased for HTTP/3). */
static void rest_submit(struct h3_stream *st, int status, const char *content_type,
                        const char *extra, bool head_only, bool streamed)
{
    struct h3_conn *c = st->conn;
    struct http_resp_head head;
    http_resp_head_build(&head, status, content_type, extra, streamed, st->unacked);
    nghttp3_nv nv[HTTP_RESP_HEAD_FIELDS];
    for (size_t i = 0; i < head.n; i++)
        nv[i] = make_nv(head.fields[i].name, head.fields[i].name_len, head.fields[i].value,
                        head.fields[i].value_len);
    if (head_only)
        chunks_free(st);
    st->finished = !streamed;
    st->responded = true;
    nghttp3_data_reader dr = {.read_data = read_data};
    bool with_body = streamed || st->out_head != NULL;
    if (nghttp3_conn_submit_response(c->h, st->id, nv, head.n, with_body ? &dr : NULL) != 0)
        ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
    want_write(c);
}

/* An error the transport answers itself (limits). A request still
 * arriving is told to stop (STOP_SENDING H3_NO_ERROR, RFC 9114 section
 * 4.1): the client reads the answer instead of sending the rest. */
static void stream_fail(struct h3_stream *st, int status, const char *msg)
{
    if (st->responded)
        return;
    struct h3_conn *c = st->conn;
    struct buf b;
    buf_init(&b, 4096);
    http_error_body(&b, msg);
    chunks_free(st);
    if (b.err || chunk_take(st, &b) != 0) {
        buf_free(&b);
        ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
        return;
    }
    if (c->server->cfg.on_response)
        c->server->cfg.on_response(NULL, status, (size_t)st->unacked);
    rest_submit(st, status, "application/json", NULL, false, false);
    if (!st->request_done)
        ngtcp2_conn_shutdown_stream_read(c->q, st->id, NGHTTP3_H3_NO_ERROR);
}

/* ---- the HTTP/3 side of struct http_txn (txn.h) ---- */

static struct h3_stream *txn_stream(const struct http_txn *txn)
{
    return txn->transport;
}

static void h3t_respond(struct http_txn *txn, int status, const char *content_type)
{
    struct h3_stream *st = txn_stream(txn);
    st->txn_active = false;
    if (!st->conn) {
        stream_free(st);
        return;
    }
    chunks_free(st);
    if (txn->body.len && chunk_take(st, &txn->body) != 0) {
        ngtcp2_conn_shutdown_stream(st->conn->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
        want_write(st->conn);
        return;
    }
    buf_reset(&txn->body);
    rest_submit(st, status, content_type, txn->extra_headers, txn->head_only, false);
}

static int h3t_stream_begin(struct http_txn *txn, int status, const char *content_type)
{
    struct h3_stream *st = txn_stream(txn);
    if (!st->conn || st->responded)
        return ST_ERROR;
    chunks_free(st);
    rest_submit(st, status, content_type, txn->extra_headers, txn->head_only, true);
    return 0;
}

static int h3t_stream_write(struct http_txn *txn, const void *data, size_t len)
{
    struct h3_stream *st = txn_stream(txn);
    if (!st->conn || st->finished)
        return ST_ERROR;
    if (txn->head_only || len == 0)
        return 0;
    if (st->unacked + len > st->conn->server->cfg.max_response_bytes)
        return ST_ERROR;
    if (chunk_copy(st, data, len) != 0)
        return ST_ERROR;
    stream_resume(st);
    return 0;
}

static void h3t_stream_end(struct http_txn *txn)
{
    struct h3_stream *st = txn_stream(txn);
    st->txn_active = false;
    if (!st->conn) {
        stream_free(st);
        return;
    }
    st->finished = true;
    stream_resume(st);
}

static size_t h3t_stream_pending(const struct http_txn *txn)
{
    return (size_t)txn_stream(txn)->unacked;
}

static size_t h3t_peer(const struct http_txn *txn, char *out, size_t cap)
{
    const struct h3_stream *st = txn_stream(txn);
    if (!st->conn)
        return 0;
    return udp_addr_format(&st->conn->remote, out, cap);
}

static const struct http_txn_ops h3_txn_ops = {
    .respond = h3t_respond,
    .stream_begin = h3t_stream_begin,
    .stream_write = h3t_stream_write,
    .stream_end = h3t_stream_end,
    .stream_pending = h3t_stream_pending,
    .peer = h3t_peer,
};

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
        stream_fail(st, st->err_status, st->err_msg);
        return;
    }
    if (!st->has_method || !st->has_path) {
        stream_fail(st, 400, "request without :method or :path (CONNECT is not supported)");
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
            stream_fail(st, 400, "invalid Content-Length");
            return;
        }
        uint64_t max = st->conn->server->cfg.limits.max_body;
        if (v > max) {
            char msg[HTTP_BODY_TOO_LARGE_MAX];
            stream_fail(st, 413, http_body_too_large(msg, v, false, max));
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

static void consume(struct h3_conn *c, int64_t id, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
}

static int h3_begin_headers(nghttp3_conn *h, int64_t id, void *conn_user, void *stream_user)
{
    (void)stream_user;
    struct h3_conn *c = conn_user;
    struct h3_stream *st = stream_new(c, id);
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
    consume(c, id, len); /* taken or dropped: the window goes back */
    if (!st || !st->head_done || st->responded)
        return 0;
    uint64_t max = c->server->cfg.limits.max_body;
    if (st->body.len + len > max) {
        char msg[HTTP_BODY_TOO_LARGE_MAX];
        stream_fail(st, 413, http_body_too_large(msg, st->body.len + len, true, max));
    } else if (buf_append(&st->body, data, len) != 0) {
        stream_fail(st, 503, "out of memory for the request body");
    }
    return 0;
}

static int h3_deferred_consume(nghttp3_conn *h, int64_t id, size_t n, void *conn_user,
                               void *stream_user)
{
    (void)h;
    (void)stream_user;
    consume(conn_user, id, n);
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
        chunks_acked(stream_user, n);
    return 0;
}

static int h3_stream_close(nghttp3_conn *h, int64_t id, uint64_t app_error_code, void *conn_user,
                           void *stream_user)
{
    (void)h;
    (void)app_error_code;
    struct h3_conn *c = conn_user;
    if (stream_user)
        stream_gone(c, stream_user);
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
static int http_setup(struct h3_conn *c)
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

/* ---- ngtcp2 callbacks ---- */

static void q_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    fill_random(dest, len);
}

static int q_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
    (void)q;
    struct h3_conn *c = user;
    fill_random(cid->data, cidlen);
    cid->datalen = cidlen;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->server->secret, H3_SECRET_LEN,
                                                     cid) != 0 ||
        cid_add(c, cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *user)
{
    (void)q;
    cid_remove(user, cid);
    return 0;
}

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t offset,
                              const uint8_t *data, size_t len, void *user, void *stream_user)
{
    (void)q;
    (void)offset;
    (void)stream_user;
    struct h3_conn *c = user;
    if (http_setup(c) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    nghttp3_ssize n =
        nghttp3_conn_read_stream(c->h, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (n < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)n), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    consume(c, id, (size_t)n);
    return 0;
}

static int q_acked_stream_data(ngtcp2_conn *q, int64_t id, uint64_t offset, uint64_t len,
                               void *user, void *stream_user)
{
    (void)q;
    (void)offset;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_add_ack_offset(c->h, id, len) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t app_error_code,
                          void *user, void *stream_user)
{
    (void)q;
    (void)stream_user;
    struct h3_conn *c = user;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        app_error_code = NGHTTP3_H3_NO_ERROR;
    if (!c->h)
        return 0;
    int rv = nghttp3_conn_close_stream(c->h, id, app_error_code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
        ngtcp2_connection_close_error_set_application_error(
            &c->ccerr, nghttp3_err_infer_quic_app_error_code(rv), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t final_size, uint64_t app_error_code,
                          void *user, void *stream_user)
{
    (void)q;
    (void)final_size;
    (void)app_error_code;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_shutdown_stream_read(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_stop_sending(ngtcp2_conn *q, int64_t id, uint64_t app_error_code, void *user,
                                 void *stream_user)
{
    return q_stream_reset(q, id, 0, app_error_code, user, stream_user);
}

static int q_extend_max_remote_streams_bidi(ngtcp2_conn *q, uint64_t max_streams, void *user)
{
    (void)q;
    struct h3_conn *c = user;
    if (c->h)
        nghttp3_conn_set_max_client_streams_bidi(c->h, max_streams);
    return 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max_data, void *user,
                                    void *stream_user)
{
    (void)q;
    (void)max_data;
    (void)stream_user;
    struct h3_conn *c = user;
    if (c->h && nghttp3_conn_unblock_stream(c->h, id) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_handshake_completed(ngtcp2_conn *q, void *user)
{
    (void)q;
    return http_setup(user) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct h3_conn *c = ref->user_data;
    return c->q;
}

static const ngtcp2_callbacks quic_callbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked_stream_data,
    .stream_close = q_stream_close,
    .rand = q_rand,
    .get_new_connection_id = q_new_cid,
    .remove_connection_id = q_remove_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = q_stream_reset,
    .extend_max_remote_streams_bidi = q_extend_max_remote_streams_bidi,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = q_stream_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

/* ---- connections ---- */

static void path_of(ngtcp2_path *p, struct udp_addr *local, struct udp_addr *remote)
{
    p->local.addr = (ngtcp2_sockaddr *)&local->ss;
    p->local.addrlen = local->len;
    p->remote.addr = (ngtcp2_sockaddr *)&remote->ss;
    p->remote.addrlen = remote->len;
    p->user_data = NULL;
}

static void send_to(struct h3_server *s, const ngtcp2_path *path, const uint8_t *data, size_t n)
{
    struct udp_addr remote = {.len = path->remote.addrlen}, local = {.len = path->local.addrlen};
    memcpy(&remote.ss, path->remote.addr, path->remote.addrlen);
    memcpy(&local.ss, path->local.addr, path->local.addrlen);
    /* A full socket buffer drops the packet: QUIC's loss recovery sends
     * its content again, as for a packet lost on the way. */
    int rc = udp_send(s->sock.fd, data, n, &remote, &local);
    if (rc != 0 && rc != -EAGAIN)
        log_debug("http3: sendmsg: %s", strerror(-rc));
}

static void maybe_drained(struct h3_server *s)
{
    if (s->draining && s->nconns == 0 && s->on_drained) {
        void (*cb)(void *) = s->on_drained;
        s->on_drained = NULL;
        cb(s->drained_arg);
    }
}

static void conn_free(struct h3_conn *c)
{
    struct h3_server *s = c->server;
    loop_del(s->loop, &c->timer);
    while (c->streams)
        stream_gone(c, c->streams);
    cid_remove_all(c);
    if (c->h)
        nghttp3_conn_del(c->h);
    if (c->q)
        ngtcp2_conn_del(c->q);
    quic_tls_session_free(&c->tls);
    buf_free(&c->close_pkt);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    atomic_fetch_sub(s->open_connections, 1);
    mem_free(c);
    maybe_drained(s);
}

/* Frees a connection marked dead; called only at the top of the server's
 * own entry points (never inside an ngtcp2 or nghttp3 callback). */
static void conn_reap(struct h3_conn *c)
{
    if (c->dead)
        conn_free(c);
}

static void arm_timer(struct h3_conn *c, uint64_t due_ns)
{
    loop_defer_at(c->server->loop, &c->timer, due_ns);
}

/* Sends CONNECTION_CLOSE with c->ccerr and enters the closing period. */
static void conn_close(struct h3_conn *c)
{
    if (c->phase != PHASE_OPEN)
        return;
    struct h3_server *s = c->server;
    uint64_t now = clock_now_ns();
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, s->tx, sizeof s->tx,
                                                        &c->ccerr, now);
    if (n <= 0) {
        c->dead = true;
        return;
    }
    buf_reset(&c->close_pkt);
    buf_append(&c->close_pkt, s->tx, (size_t)n);
    send_to(s, &ps.path, s->tx, (size_t)n);
    c->phase = PHASE_CLOSING;
    c->close_deadline_ns = now + 3 * ngtcp2_conn_get_pto(c->q);
    arm_timer(c, c->close_deadline_ns);
}

/* A library error of ngtcp2 on this connection. */
static void conn_fail_liberr(struct h3_conn *c, int rv)
{
    if (rv == NGTCP2_ERR_DRAINING) {
        c->phase = PHASE_DRAINING;
        c->close_deadline_ns = clock_now_ns() + 3 * ngtcp2_conn_get_pto(c->q);
        arm_timer(c, c->close_deadline_ns);
        return;
    }
    if (rv == NGTCP2_ERR_DROP_CONN || rv == NGTCP2_ERR_IDLE_CLOSE) {
        c->dead = true;
        return;
    }
    if (c->ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT &&
        c->ccerr.error_code == 0) {
        if (rv == NGTCP2_ERR_CRYPTO)
            ngtcp2_connection_close_error_set_transport_error_tls_alert(
                &c->ccerr, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
        else
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->ccerr, rv, NULL, 0);
    }
    log_debug("http3: closing connection: %s", ngtcp2_strerror(rv));
    conn_close(c);
}

/* Writes what ngtcp2 and nghttp3 have to send, up to H3_WRITES_PER_TURN
 * packets (then the loop calls again), and arms the expiry timer. */
static void conn_write(struct h3_conn *c)
{
    if (c->phase != PHASE_OPEN || c->dead)
        return;
    struct h3_server *s = c->server;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    uint64_t now = clock_now_ns();
    for (int npkts = 0;; npkts++) {
        if (npkts == H3_WRITES_PER_TURN) {
            want_write(c);
            break;
        }
        int64_t id = -1;
        int fin = 0;
        nghttp3_vec vec[H3_VECS];
        nghttp3_ssize nvec = 0;
        if (c->h && ngtcp2_conn_get_max_data_left(c->q)) {
            nvec = nghttp3_conn_writev_stream(c->h, &id, &fin, vec, H3_VECS);
            if (nvec < 0) {
                ngtcp2_connection_close_error_set_application_error(
                    &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)nvec), NULL, 0);
                conn_close(c);
                return;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (fin)
            flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
        ngtcp2_ssize ndatalen;
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, s->tx, sizeof s->tx, &ndatalen, flags,
                                      id, (const ngtcp2_vec *)vec, (size_t)nvec, now);
        if (n < 0) {
            switch (n) {
            case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                nghttp3_conn_block_stream(c->h, id);
                continue;
            case NGTCP2_ERR_STREAM_SHUT_WR:
                nghttp3_conn_shutdown_stream_write(c->h, id);
                continue;
            case NGTCP2_ERR_WRITE_MORE:
                if (nghttp3_conn_add_write_offset(c->h, id, (size_t)ndatalen) != 0) {
                    conn_fail_liberr(c, NGTCP2_ERR_INTERNAL);
                    return;
                }
                continue;
            default:
                conn_fail_liberr(c, (int)n);
                return;
            }
        }
        if (ndatalen >= 0 && nghttp3_conn_add_write_offset(c->h, id, (size_t)ndatalen) != 0) {
            conn_fail_liberr(c, NGTCP2_ERR_INTERNAL);
            return;
        }
        if (n == 0)
            break;
        send_to(s, &ps.path, s->tx, (size_t)n);
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, now);
    if (s->draining && c->h && !c->goaway_sent) {
        nghttp3_conn_submit_shutdown_notice(c->h);
        c->goaway_sent = true;
        want_write(c);
    }
    if (s->draining && c->nstreams == 0 && c->goaway_sent) {
        ngtcp2_connection_close_error_set_application_error(&c->ccerr, NGHTTP3_H3_NO_ERROR, NULL,
                                                            0);
        conn_close(c);
        return;
    }
    ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(c->q);
    if (expiry != UINT64_MAX)
        arm_timer(c, expiry);
}

/* The connection's timer: closing/draining deadlines, ngtcp2's expiry
 * (loss detection, ACK delay, idle timeout), deferred writes. */
static void conn_on_timer(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct h3_conn *c = container_of(w, struct h3_conn, timer);
    uint64_t now = clock_now_ns();
    if (c->phase != PHASE_OPEN) {
        if (now >= c->close_deadline_ns)
            c->dead = true;
        else
            arm_timer(c, c->close_deadline_ns);
        conn_reap(c);
        return;
    }
    if (ngtcp2_conn_get_expiry(c->q) <= now) {
        int rv = ngtcp2_conn_handle_expiry(c->q, now);
        if (rv != 0) {
            conn_fail_liberr(c, rv);
            conn_reap(c);
            return;
        }
    }
    conn_write(c);
    conn_reap(c);
}

static void conn_read(struct h3_conn *c, struct udp_addr *local, struct udp_addr *remote,
                      const uint8_t *data, size_t len)
{
    if (c->phase == PHASE_CLOSING) {
        struct h3_server *s = c->server;
        if (c->close_pkt.len &&
            udp_send(s->sock.fd, c->close_pkt.data, c->close_pkt.len, remote, local) != 0)
            log_debug("http3: cannot resend CONNECTION_CLOSE");
        return;
    }
    if (c->phase == PHASE_DRAINING)
        return;
    c->local = *local;
    c->remote = *remote;
    ngtcp2_path path;
    path_of(&path, &c->local, &c->remote);
    ngtcp2_pkt_info pi = {0};
    int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, data, len, clock_now_ns());
    if (rv != 0) {
        conn_fail_liberr(c, rv);
        return;
    }
    conn_write(c);
}

static struct h3_conn *conn_accept(struct h3_server *s, struct udp_addr *local,
                                   struct udp_addr *remote, const uint8_t *data, size_t len)
{
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, data, len) != 0)
        return NULL;
    if (s->draining)
        return NULL;
    if (s->cfg.max_connections &&
        atomic_fetch_add(s->open_connections, 1) >= s->cfg.max_connections) {
        atomic_fetch_sub(s->open_connections, 1);
        return NULL; /* the client's handshake times out; as a full TCP backlog */
    }
    if (!s->cfg.max_connections)
        atomic_fetch_add(s->open_connections, 1);
    struct h3_conn *c = mem_calloc(1, sizeof *c);
    if (!c) {
        atomic_fetch_sub(s->open_connections, 1);
        return NULL;
    }
    c->server = s;
    c->timer.fd = -1;
    c->timer.on_events = conn_on_timer;
    c->local = *local;
    c->remote = *remote;
    c->conn_ref = (ngtcp2_crypto_conn_ref){get_conn, c};
    buf_init(&c->close_pkt, sizeof s->tx);
    ngtcp2_connection_close_error_default(&c->ccerr);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;

    ngtcp2_cid scid;
    scid.datalen = H3_SCID_LEN;
    fill_random(scid.data, scid.datalen);
    uint64_t now = clock_now_ns();
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now;
    settings.max_window = H3_MAX_CONN_WINDOW;
    settings.max_stream_window = H3_MAX_STREAM_WINDOW;
    settings.handshake_timeout = (ngtcp2_duration)H3_HANDSHAKE_TIMEOUT_MS * NGTCP2_MILLISECONDS;
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_stream_data_bidi_local = H3_STREAM_WINDOW;
    params.initial_max_stream_data_bidi_remote = H3_STREAM_WINDOW;
    params.initial_max_stream_data_uni = H3_STREAM_WINDOW;
    params.initial_max_data = H3_CONN_WINDOW;
    params.initial_max_streams_bidi = s->cfg.max_streams;
    params.initial_max_streams_uni = 3;
    params.max_idle_timeout = (ngtcp2_duration)s->cfg.idle_timeout_ms * NGTCP2_MILLISECONDS;
    params.original_dcid = hd.dcid;
    params.stateless_reset_token_present = 1;
    ngtcp2_path path;
    path_of(&path, &c->local, &c->remote);
    if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, s->secret,
                                                     H3_SECRET_LEN, &scid) != 0 ||
        ngtcp2_conn_server_new(&c->q, &hd.scid, &scid, &path, hd.version, &quic_callbacks,
                               &settings, &params, NULL, c) != 0) {
        c->q = NULL;
        conn_free(c);
        return NULL;
    }
    if (quic_tls_session_init(s->cfg.tls, &c->tls, &c->conn_ref) != 0 || cid_add(c, &scid) != 0 ||
        cid_add(c, &hd.dcid) != 0) {
        conn_free(c);
        return NULL;
    }
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls.gnutls);
    return c;
}

/* Answers a packet of a version we do not speak with the versions we do. */
static void send_version_negotiation(struct h3_server *s, const ngtcp2_version_cid *vc,
                                     struct udp_addr *local, struct udp_addr *remote)
{
    static const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
    uint8_t unused;
    fill_random(&unused, 1);
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        s->tx, sizeof s->tx, unused, vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, versions,
        sizeof versions / sizeof versions[0]);
    if (n > 0)
        udp_send(s->sock.fd, s->tx, (size_t)n, remote, local);
}

static void on_datagram(struct h3_server *s, struct udp_addr *local, struct udp_addr *remote,
                        const uint8_t *data, size_t len)
{
    ngtcp2_version_cid vc;
    int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, H3_SCID_LEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        send_version_negotiation(s, &vc, local, remote);
        return;
    }
    if (rv != 0)
        return;
    struct h3_conn *c = cid_find(s, vc.dcid, vc.dcidlen);
    if (!c) {
        c = conn_accept(s, local, remote, data, len);
        if (!c)
            return;
    }
    conn_read(c, local, remote, data, len);
    conn_reap(c);
}

static void sock_on_events(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct h3_server *s = container_of(w, struct h3_server, sock);
    for (int i = 0; i < H3_READS_PER_WAKEUP; i++) {
        struct udp_addr local, remote;
        ssize_t n = udp_recv(s->sock.fd, s->pkt, sizeof s->pkt, &remote, &local);
        if (n == 0)
            return;
        if (n < 0) {
            log_debug("http3: recvmsg: %s", strerror((int)-n));
            return;
        }
        if ((size_t)n <= sizeof s->pkt)
            on_datagram(s, &local, &remote, s->pkt, (size_t)n);
    }
    loop_defer(s->loop, &s->sock); /* more may wait: after the other watchers */
}

/* ---- server ---- */

int h3_server_start(struct loop *loop, const struct h3_server_config *cfg, http_handler_fn handler,
                    void *app, struct h3_server **out)
{
    struct h3_server *s = mem_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.max_streams)
        s->cfg.max_streams = 128;
    s->handler = handler;
    s->app = app;
    s->open_connections = cfg->open_connections ? cfg->open_connections : &s->own_connections;
    fill_random(s->secret, sizeof s->secret);
    int fd = udp_bind(cfg->host, cfg->port, &s->port);
    if (fd < 0) {
        mem_free(s);
        return fd;
    }
    s->sock.fd = fd;
    s->sock.on_events = sock_on_events;
    int rc = loop_add(loop, &s->sock, EPOLLIN);
    if (rc) {
        close(fd);
        mem_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int h3_server_port(const struct h3_server *s)
{
    return s->port;
}

uint32_t h3_server_connection_count(const struct h3_server *s)
{
    return s->nconns;
}

void h3_server_drain(struct h3_server *s, void (*on_drained)(void *arg), void *arg)
{
    s->draining = true;
    s->on_drained = on_drained;
    s->drained_arg = arg;
    struct h3_conn *c = s->conns;
    while (c) {
        struct h3_conn *next = c->next;
        if (c->phase == PHASE_OPEN && !c->h) {
            /* Still in its handshake: nothing to finish. */
            ngtcp2_connection_close_error_set_transport_error(&c->ccerr, NGTCP2_NO_ERROR, NULL, 0);
            conn_close(c);
        } else {
            want_write(c);
        }
        conn_reap(c);
        c = next;
    }
    maybe_drained(s);
}

void h3_server_free(struct h3_server *s)
{
    if (!s)
        return;
    s->on_drained = NULL;
    while (s->conns)
        conn_free(s->conns);
    loop_del(s->loop, &s->sock);
    close(s->sock.fd);
    mem_free(s);
}
