#include "http/h3_conn.h"

#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/status.h"
#include "http/resp_head.h"

/* ---- streams ---- */

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

struct h3_stream *h3_stream_new(struct h3_conn *c, int64_t id)
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
void h3_stream_gone(struct h3_conn *c, struct h3_stream *st)
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

void h3_stream_acked(struct h3_stream *st, uint64_t n)
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
    h3_conn_want_write(c);
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
    h3_conn_want_write(c);
}

/* An error the transport answers itself (limits). A request still
 * arriving is told to stop (STOP_SENDING H3_NO_ERROR, RFC 9114 section
 * 4.1): the client reads the answer instead of sending the rest. */
void h3_stream_fail(struct h3_stream *st, int status, const char *msg)
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
        h3_conn_want_write(st->conn);
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

const struct http_txn_ops h3_txn_ops = {
    .respond = h3t_respond,
    .stream_begin = h3t_stream_begin,
    .stream_write = h3t_stream_write,
    .stream_end = h3t_stream_end,
    .stream_pending = h3t_stream_pending,
    .peer = h3t_peer,
};
