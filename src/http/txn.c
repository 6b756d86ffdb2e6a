#include "http/txn.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "base/probe.h"
#include "base/status.h"

const char *http_status_text(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

void http_error_body(struct buf *b, const char *msg)
{
    struct json_writer w;
    buf_reset(b);
    json_w_init(&w, b);
    json_w_obj_begin(&w);
    json_w_key(&w, "error");
    json_w_cstr(&w, msg);
    json_w_obj_end(&w);
}

void http_txn_set_request(struct http_txn *txn, const char *method, size_t method_len,
                          const char *target, size_t target_len, const struct buf *body)
{
    struct http1_request *r = &txn->req;
    uint32_t nheaders = r->nheaders;
    memset(r, 0, offsetof(struct http1_request, headers));
    r->nheaders = nheaders;
    r->method = method;
    r->method_len = (uint32_t)method_len;
    r->target = target;
    r->target_len = (uint32_t)target_len;
    r->path = target;
    const char *q = memchr(target, '?', target_len);
    r->path_len = q ? (uint32_t)(q - target) : r->target_len;
    if (q) {
        r->query = q + 1;
        r->query_len = (uint32_t)(target + target_len - r->query);
    }
    r->version_minor = 1;
    r->keep_alive = true;
    r->body = body->len ? body->data : NULL;
    r->body_len = body->len;
    r->has_content_length = true;
    r->content_length = body->len;
}

void http_txn_reset(struct http_txn *txn, const struct http_txn_ops *ops, void *transport,
                    enum http_version version, http_response_fn on_response)
{
    txn->ops = ops;
    txn->transport = transport;
    txn->version = version;
    txn->aborted = false;
    txn->streaming = false;
    txn->stream_status = 0;
    txn->stream_bytes = 0;
    txn->cancel = NULL;
    txn->on_abort = NULL;
    txn->abort_ctx = NULL;
    txn->body_pending = false;
    txn->body_status = 0;
    txn->body_error[0] = '\0';
    txn->on_body = NULL;
    txn->body_ctx = NULL;
    txn->on_head = NULL;
    txn->on_end = NULL;
    txn->obs = NULL;
    txn->error = NULL;
    txn->on_response = on_response;
    txn->head_only = txn->req.method_len == 4 && memcmp(txn->req.method, "HEAD", 4) == 0;
    txn->extra_headers[0] = '\0';
    txn->extra_len = 0;
    buf_reset(&txn->body);
}

void http_txn_notify_end(struct http_txn *txn, int status, uint64_t body_bytes)
{
    void (*on_end)(struct http_txn *, int, uint64_t) = txn->on_end;
    txn->on_end = NULL;
    txn->on_head = NULL;
    INFERD_PROBE_3(response_written, txn->request_id, status, body_bytes);
    if (on_end)
        on_end(txn, status, body_bytes);
    if (status && txn->on_response)
        txn->on_response(txn, status, (size_t)body_bytes);
}

void http_txn_respond(struct http_txn *txn, int status, const char *content_type)
{
    if (txn->body.err && !txn->aborted) {
        txn->error = "response too large";
        http_error_body(&txn->body, txn->error);
        status = 500;
        content_type = "application/json";
    }
    int seen = txn->aborted ? 0 : status;
    txn->on_body = NULL; /* answered: the body no longer concerns the handler */
    if (seen && txn->on_head)
        txn->on_head(txn, status);
    http_txn_notify_end(txn, seen, txn->head_only ? 0 : txn->body.len);
    txn->ops->respond(txn, status, content_type);
}

void http_txn_error(struct http_txn *txn, int status, const char *msg)
{
    http_error_body(&txn->body, msg);
    txn->error = msg;
    http_txn_respond(txn, status, "application/json");
}

int http_txn_stream_begin(struct http_txn *txn, int status, const char *content_type)
{
    txn->streaming = true;
    txn->stream_status = status;
    txn->on_body = NULL;
    if (txn->aborted)
        return ST_ERROR;
    if (txn->on_head)
        txn->on_head(txn, status);
    return txn->ops->stream_begin(txn, status, content_type);
}

int http_txn_stream_write(struct http_txn *txn, const void *data, size_t len)
{
    if (txn->aborted || txn->head_only)
        return txn->aborted ? ST_ERROR : ST_OK;
    if (len == 0)
        return 0;
    int rc = txn->ops->stream_write(txn, data, len);
    if (rc == 0)
        txn->stream_bytes += len;
    return rc;
}

void http_txn_stream_end(struct http_txn *txn)
{
    http_txn_notify_end(txn, txn->aborted ? 0 : txn->stream_status, txn->stream_bytes);
    txn->ops->stream_end(txn);
}

size_t http_txn_stream_pending(const struct http_txn *txn)
{
    return txn->aborted ? 0 : txn->ops->stream_pending(txn);
}

size_t http_txn_peer(const struct http_txn *txn, char *out, size_t cap)
{
    return txn->ops->peer(txn, out, cap);
}

void http_txn_add_header(struct http_txn *txn, const char *name, const char *value)
{
    size_t used = txn->extra_len;
    size_t nlen = strlen(name), vlen = strlen(value);
    char *p = txn->extra_headers + used;
    if (nlen + vlen + 4 >= sizeof txn->extra_headers - used) {
        log_warn("response header %s dropped: the extra headers are full", name);
        return;
    }
    memcpy(p, name, nlen);
    memcpy(p + nlen, ": ", 2);
    memcpy(p + nlen + 2, value, vlen);
    memcpy(p + nlen + 2 + vlen, "\r\n", 3); /* with the terminating NUL */
    txn->extra_len = used + nlen + vlen + 4;
}

void http_txn_abort(struct http_txn *txn)
{
    txn->aborted = true;
    if (txn->cancel)
        atomic_store_explicit(txn->cancel, true, memory_order_relaxed);
    void (*on_abort)(struct http_txn *, void *) = txn->on_abort;
    txn->on_abort = NULL;
    if (on_abort)
        on_abort(txn, txn->abort_ctx);
    http_txn_body_done(txn, 499, "the client went away before the request body was complete");
}

void http_txn_body_done(struct http_txn *txn, int status, const char *msg)
{
    if (!txn->body_pending)
        return;
    txn->body_pending = false;
    txn->body_status = status;
    snprintf(txn->body_error, sizeof txn->body_error, "%s", status && msg ? msg : "");
    void (*on_body)(struct http_txn *, void *) = txn->on_body;
    txn->on_body = NULL;
    if (on_body)
        on_body(txn, txn->body_ctx);
}
