#include "api/grpc/web.h"

#include <stddef.h>
#include <string.h>

#include "api/grpc/call.h"
#include "base/base64.h"

/* The decoded body or the encoded frames a gRPC-Web exchange keeps
 * between requests; larger buffers are freed after use. */
#define WEB_KEEP_BUFFER (1u << 20)

enum grpc_web_encoding grpc_web_request(const struct http_txn *txn)
{
    const struct http_header *h = http1_header(&txn->req, "content-type");
    return h ? grpc_web_content_type(h->value, h->value_len) : GRPC_WEB_NONE;
}

/* ---- the wire: conn is the exchange's struct http_txn ---------------------- */

/* The call of an exchange (web_set_user); valid until the exchange ends. */
static struct grpc_call *call_of(const void *conn)
{
    return ((const struct http_txn *)conn)->abort_ctx;
}

static const char *web_header(const void *conn, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&((const struct http_txn *)conn)->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

static const char *web_method(const void *conn, size_t *len)
{
    const struct http_txn *txn = conn;
    *len = txn->req.method_len;
    return txn->req.method;
}

static const char *web_path(const void *conn, size_t *len)
{
    const struct http_txn *txn = conn;
    *len = txn->req.path_len;
    return txn->req.path;
}

static size_t web_peer(const void *conn, char *out, size_t cap)
{
    return http_txn_peer(conn, out, cap);
}

static const char *content_type(const struct grpc_call *call)
{
    return call->web_text ? "application/grpc-web-text+proto" : "application/grpc-web+proto";
}

/* The metadata h[0..n) as HTTP headers (content-type is the txn's own). */
static void add_headers(struct http_txn *txn, const struct h2_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char name[64], value[3 * ERROR_MSG_MAX + 1];
        if ((h[i].name_len == 12 && memcmp(h[i].name, "content-type", 12) == 0) ||
            h[i].name_len >= sizeof name || h[i].value_len >= sizeof value)
            continue;
        memcpy(name, h[i].name, h[i].name_len);
        name[h[i].name_len] = '\0';
        memcpy(value, h[i].value, h[i].value_len);
        value[h[i].value_len] = '\0';
        http_txn_add_header(txn, name, value);
    }
}

static int web_respond_headers(void *conn, const struct h2_header *h, size_t n)
{
    struct http_txn *txn = conn;
    add_headers(txn, h, n);
    return http_txn_stream_begin(txn, 200, content_type(call_of(txn)));
}

static int web_write(void *conn, const void *data, size_t len)
{
    struct http_txn *txn = conn;
    struct grpc_call *call = call_of(txn);
    if (!call->web_text)
        return http_txn_stream_write(txn, data, len);
    struct buf *out = &call->api->web_out;
    buf_reset(out);
    int rc =
        base64_append(out, data, len) == 0 ? http_txn_stream_write(txn, out->data, out->len) : -1;
    if (out->cap > WEB_KEEP_BUFFER)
        buf_free(out);
    return rc;
}

/* Ends the exchange: the trailers as the last frame, or (nothing sent yet)
 * a trailers-only answer. The txn is gone afterwards (the wire's
 * finish_closes). */
static int web_finish(void *conn, const struct h2_header *t, size_t n)
{
    struct http_txn *txn = conn;
    struct grpc_call *call = call_of(txn);
    txn->on_abort = NULL;
    if (!txn->streaming) {
        add_headers(txn, t, n);
        http_txn_respond(txn, 200, content_type(call));
        return 0;
    }
    struct buf frame;
    buf_init(&frame, 2 * WEB_KEEP_BUFFER);
    int rc = grpc_web_trailer_frame(t, n, &frame) == 0 ? web_write(txn, frame.data, frame.len) : -1;
    buf_free(&frame);
    http_txn_stream_end(txn);
    return rc;
}

static const struct grpc_wire web_wire = {
    .proto = OBS_PROTO_GRPC_WEB,
    .header = web_header,
    .method = web_method,
    .path = web_path,
    .peer = web_peer,
    .respond_headers = web_respond_headers,
    .write = web_write,
    .finish = web_finish,
    .finish_closes = true,
};

/* ---- the client left ------------------------------------------------------- */

/* Ends the aborted exchange (which only frees it), outside the transport's
 * close path that reported the abort. */
static void web_end_run(struct loop_task *t)
{
    struct grpc_call *call = (struct grpc_call *)((char *)t - offsetof(struct grpc_call, web_end));
    struct http_txn *txn = call->web_txn;
    call->web_txn = NULL;
    if (txn->streaming)
        http_txn_stream_end(txn);
    else
        http_txn_respond(txn, 499, NULL);
    grpc_call_drop(call);
}

/* The client went away: the call is closed as a reset gRPC stream is (its
 * work cancelled), and the txn ended from the loop soon after. */
static void web_on_abort(struct http_txn *txn, void *ctx)
{
    struct grpc_call *call = ctx;
    grpc_call_hold(call);
    call->web_txn = txn;
    call->web_end.run = web_end_run;
    loop_post(call->api->loop, &call->web_end);
    grpc_call_closed(call);
}

static void web_set_user(void *conn, struct grpc_call *call)
{
    struct http_txn *txn = conn;
    call->web_text = grpc_web_request(txn) == GRPC_WEB_TEXT;
    txn->abort_ctx = call;
    txn->on_abort = web_on_abort;
}

/* ---- requests ---------------------------------------------------------------- */

void grpc_web_handle(struct grpc_api *api, struct http_txn *txn, enum grpc_web_encoding enc)
{
    struct grpc_call *call = grpc_call_open(api, &web_wire, txn, web_set_user);
    if (!call) {
        http_txn_add_header(txn, "grpc-status", "14");
        http_txn_add_header(txn, "grpc-message", "out of memory");
        http_txn_respond(txn, 200,
                         enc == GRPC_WEB_TEXT ? "application/grpc-web-text+proto"
                                              : "application/grpc-web+proto");
        return;
    }
    const uint8_t *body = (const uint8_t *)txn->req.body;
    size_t len = txn->req.body_len;
    if (!call->finished && enc == GRPC_WEB_TEXT) {
        buf_reset(&api->web_in);
        int rc = base64_decode_chunks(txn->req.body, len, &api->web_in);
        if (rc == -1)
            grpc_call_finish(call, GRPC_INVALID_ARGUMENT,
                             "the application/grpc-web-text body is not base64");
        else if (rc != 0)
            grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory for the request body");
        body = (const uint8_t *)api->web_in.data;
        len = api->web_in.len;
    }
    if (!call->finished) {
        grpc_call_data(call, body, len);
        grpc_call_request_end(call);
    }
    if (api->web_in.cap > WEB_KEEP_BUFFER)
        buf_free(&api->web_in);
    grpc_call_drop(call);
}
