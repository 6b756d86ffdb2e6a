#include "api/http_obs.h"

#include <string.h>

#include "base/probe.h"
#include "obs/metrics.h"
#include "obs/request.h"
#include "obs/trace.h"

/* ---- per-request hooks ------------------------------------------------------ */

static inline const char *header(const struct http_txn *txn, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&txn->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

/* The request body's size: a request answered on its head (txn.h,
 * "Request bodies") did not have its body read, and is logged and counted
 * with the size its Content-Length announced (0 for a chunked one). */
static uint64_t bytes_in(const struct http_txn *txn)
{
    return txn->body_pending ? txn->req.content_length : txn->req.body_len;
}

static size_t txn_peer(const void *ctx, char *out, size_t cap)
{
    return http_txn_peer(ctx, out, cap);
}

/* Before the response head is formatted: our span's traceparent. */
static void on_head(struct http_txn *txn, int status)
{
    (void)status;
    char tp[TRACEPARENT_LEN + 1];
    if (obsreq_traceparent(txn->obs, tp))
        http_txn_add_header(txn, "traceparent", tp);
}

/* The exchange is over (status 0: the peer left): the log line and spans. */
static void on_end(struct http_txn *txn, int status, uint64_t body_bytes)
{
    struct obsreq *o = txn->obs;
    txn->obs = NULL;
    if (txn->error)
        obsreq_set_error(o, txn->error);
    obsreq_end(o, status, body_bytes);
}

void http_obs_begin(struct http_txn *txn)
{
    size_t id_len = 0;
    const char *incoming = header(txn, "x-request-id", &id_len);
    char id[REQUEST_ID_MAX + 1];
    id_len = request_id_resolve(incoming, id_len, id);
    http_txn_add_header(txn, "x-request-id", id);
    _Static_assert(REQUEST_ID_MAX == HTTP_REQUEST_ID_MAX, "a txn keeps whole request ids");
    memcpy(txn->request_id, id, id_len + 1);
    uint64_t in = bytes_in(txn); /* announced: the body may still be on its way */
    INFERD_PROBE_4(request_begin, txn->request_id, txn->req.path, txn->req.path_len, in);

    struct obsreq_start s = {
        .proto = txn->version == HTTP_VERSION_3     ? OBS_PROTO_H3
                 : txn->version == HTTP_VERSION_2   ? OBS_PROTO_H2
                 : txn->version == HTTP_VERSION_1_0 ? OBS_PROTO_HTTP10
                                                    : OBS_PROTO_HTTP1,
        .method = txn->req.method,
        .method_len = txn->req.method_len,
        .endpoint = txn->req.path,
        .endpoint_len = txn->req.path_len,
        .request_id = id,
        .request_id_len = id_len,
        .bytes_in = in,
        .start_ns = txn->start_ns,
        .peer = txn_peer,
        .peer_ctx = txn,
    };
    s.traceparent = header(txn, "traceparent", &s.traceparent_len);
    s.tracestate = header(txn, "tracestate", &s.tracestate_len);
    struct obsreq *o = obsreq_begin(&s);
    txn->obs = o;
    txn->on_head = o ? on_head : NULL;
    txn->on_end = o ? on_end : NULL;
}

void http_obs_infer_begin(struct http_txn *txn, struct infer_request *req, const struct model *m)
{
    obsreq_attach(txn->obs, req, m->name, m->version_str, m->sha256);
    /* Decode has the whole body, also when the call began on the head. */
    obsreq_set_bytes_in(txn->obs, txn->req.body_len);
}

void http_obs_infer_done(struct http_txn *txn, const struct infer_request *req)
{
    obsreq_infer_done(txn->obs, req);
}

void http_obs_on_response(const struct http_txn *txn, int status, size_t body_bytes)
{
    if (!txn)
        metrics_http_response(NULL, 0, status, 0, body_bytes);
    else
        metrics_http_response(txn->req.path, txn->req.path_len, status, bytes_in(txn),
                              body_bytes);
}
