/*
 * txn: one HTTP request/response exchange, whatever the transport carries
 * it (HTTP/1.1 in tcp_conn.c, HTTP/2 in h2.c, HTTP/3 in h3_stream.c). Handlers see only this
 * header; each transport fills txn->ops with its own implementation, so
 * nothing here asks which transport it is.
 *
 * A handler answers in one of two ways, exactly once per txn, on the loop
 * thread that owns the connection:
 *   - http_txn_respond(): status, content type and txn->body, all at once;
 *   - a streamed response: http_txn_stream_begin() (status, content type,
 *     the extra headers; no Content-Length), any number of
 *     http_txn_stream_write() calls, each sent as soon as the socket takes
 *     it (HTTP/1.1: one chunk of Transfer-Encoding: chunked, or the raw
 *     bytes on an HTTP/1.0 connection that then closes; HTTP/2: DATA
 *     frames), then http_txn_stream_end().
 * The txn stays valid until respond() or stream_end() returns.
 *
 * The peer may go away while the handler works or streams: the transport
 * then calls http_txn_abort(), which marks the txn aborted and raises the
 * handler's cancel flag (and calls its on_abort). The handler still ends the txn (respond() or
 * stream_end() then only free it); stream_write() on an aborted txn
 * returns -1 without sending.
 *
 * Request bodies. A transport normally calls the handler once the whole
 * request is in: txn->req.body holds its body. For a request its server's
 * `early` function (http_early_fn) picks, it calls the handler as soon as
 * the head is complete instead, with body_pending true: req.body is NULL
 * and req.body_len 0 while the body arrives. The handler may answer at
 * once (a refusal) without the body: the transport then stops reading it
 * (HTTP/1.1: `Connection: close`, the unread rest is drained for a short
 * linger, then the connection closes; HTTP/2: RST_STREAM(NO_ERROR) after
 * the response, the connection stays). Otherwise the transport reads on
 * (HTTP/1.1 sends the 100 Continue of `Expect: 100-continue` only once the
 * handler returned without answering) and, exactly once, when the body is
 * complete or cannot be, clears body_pending, sets body_status (0: the
 * body is in req.body; else the status to answer: 400 malformed framing,
 * 408 not received in time, 413 over the limit, 499 the peer is gone) and
 * body_error, and calls on_body if the handler set it. on_body runs where
 * the handler would have been called (it may answer the txn there); it is
 * never called after the handler answered. HTTP/3 always reads the whole
 * body first.
 *
 * Observers: on_head runs before the response head is formatted (it may
 * still add headers); on_end once the exchange is over, with the status
 * (0 = the peer is gone) and the body bytes sent. Both are reset for every
 * request by the transport. When the answer is an error body
 * (http_txn_error, or a response too large to send), txn->error is its
 * message while the observers run; else NULL.
 */
#ifndef INFERD_HTTP_TXN_H
#define INFERD_HTTP_TXN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/http1.h"

struct http_txn;

/* The transport's side of a txn (see the top of this file). */
struct http_txn_ops {
    void (*respond)(struct http_txn *txn, int status, const char *content_type);
    int (*stream_begin)(struct http_txn *txn, int status, const char *content_type);
    int (*stream_write)(struct http_txn *txn, const void *data, size_t len);
    void (*stream_end)(struct http_txn *txn);
    /* Response bytes of a stream not yet taken by the socket. */
    size_t (*stream_pending)(const struct http_txn *txn);
    size_t (*peer)(const struct http_txn *txn, char *out, size_t cap);
};

enum http_version { HTTP_VERSION_1_0, HTTP_VERSION_1_1, HTTP_VERSION_2, HTTP_VERSION_3 };

/* Response observer of a whole server (metrics): every response of a
 * handler (txn) or of the server itself (txn NULL), once, when it ends. */
typedef void (*http_response_fn)(const struct http_txn *txn, int status, size_t body_bytes);

/* Longest request id a txn keeps (api/http_obs.c: obs/request.h's). */
#define HTTP_REQUEST_ID_MAX 128

struct http_txn {
    struct http1_request req; /* pointers into the transport's buffers */
    const struct http_txn_ops *ops;
    void *transport; /* the connection (HTTP/1) or stream (HTTP/2) */
    enum http_version version;
    bool head_only; /* HEAD request: the body is not sent */
    bool aborted;   /* the peer is gone; ending the txn only frees it */
    bool streaming; /* http_txn_stream_begin() was called */
    int stream_status;
    uint64_t stream_bytes; /* body bytes written to a stream */
    uint64_t start_ns;
    struct buf body; /* response body, filled by the handler */
    /* Extra response header lines, each "Name: value\r\n" (e.g. Allow,
     * CORS, gRPC-Web's metadata), NUL-terminated; extra_len bytes of them
     * (written by http_txn_add_header() only). */
    char extra_headers[4096];
    size_t extra_len;
    /* Observers (access log, tracing: api/http_obs.c), set by the handler
     * for each request; see the top of this file. */
    void (*on_head)(struct http_txn *txn, int status);
    void (*on_end)(struct http_txn *txn, int status, uint64_t body_bytes);
    void *obs;
    /* The request's id as the answer carries it (x-request-id), set by the
     * handler for each request; "" = none. */
    char request_id[HTTP_REQUEST_ID_MAX + 1];
    const char *error;            /* the error answer's message, for the observers */
    http_response_fn on_response; /* set by the transport from its config */
    /* Set by a handler whose work can be dropped (e.g. an infer request's
     * `cancelled` flag): stored true when the txn is aborted, from the loop
     * thread. Reset to NULL for every request. */
    atomic_bool *cancel;
    /* Set by a handler that must hear of the abort itself (the gRPC-Web
     * front end: its call cancels what it started): called once from
     * http_txn_abort(), with abort_ctx. Reset to NULL for every request. */
    void (*on_abort)(struct http_txn *txn, void *abort_ctx);
    void *abort_ctx;
    /* The body of a request handed over on its head (see "Request bodies"
     * at the top): set by the transport; on_body and body_ctx by the
     * handler. Reset for every request. */
    bool body_pending;
    int body_status;
    char body_error[HTTP_BODY_TOO_LARGE_MAX];
    void (*on_body)(struct http_txn *txn, void *body_ctx);
    void *body_ctx;
};

typedef void (*http_handler_fn)(void *app, struct http_txn *txn);
/* Whether the request whose head is in txn->req (method, path, headers;
 * no body) should go to the handler now, before its body is read (see
 * "Request bodies" at the top). Called at most once per request, only
 * when the body is not complete yet; must not keep pointers into txn. */
typedef bool (*http_early_fn)(void *app, const struct http_txn *txn);

/* Sends the whole response: status, Content-Type (may be NULL when the
 * body is empty) and txn->body. */
void http_txn_respond(struct http_txn *txn, int status, const char *content_type);
/* Convenience: body {"error": msg} with the given status. */
void http_txn_error(struct http_txn *txn, int status, const char *msg);

/* Streamed response (see the top of this file). begin returns 0, or ST_ERROR
 * when the txn is aborted (end it anyway). write copies data into the
 * transport's bounded output queue: 0, or ST_ERROR when the peer is gone or the
 * queue is over the response limit (the client does not read; end the
 * stream). */
int http_txn_stream_begin(struct http_txn *txn, int status, const char *content_type);
int http_txn_stream_write(struct http_txn *txn, const void *data, size_t len);
void http_txn_stream_end(struct http_txn *txn);
size_t http_txn_stream_pending(const struct http_txn *txn);

/* The client's address "ip:port" ("[ip6]:port") into out; returns its
 * length (0 if unknown). */
size_t http_txn_peer(const struct http_txn *txn, char *out, size_t cap);
/* Appends "Name: value\r\n" to the extra headers; a header that does not
 * fit is dropped whole, with a warning (never sent cut). */
void http_txn_add_header(struct http_txn *txn, const char *name, const char *value);
/* For the transports: the peer is gone while the handler owns txn — mark
 * it aborted and raise its cancel flag; a body still pending ends with
 * status 499 (http_txn_body_done). */
void http_txn_abort(struct http_txn *txn);
/* For the transports: the body of a txn handed over on its head is
 * complete (status 0: req.body and req.body_len are set) or cannot be
 * (status 400, 408, 413, 499 and msg): see "Request bodies" at the top.
 * Does nothing when no body is pending. */
void http_txn_body_done(struct http_txn *txn, int status, const char *msg);
/* For the transports: a new request on txn; clears the per-request state. */
void http_txn_reset(struct http_txn *txn, const struct http_txn_ops *ops, void *transport,
                    enum http_version version, http_response_fn on_response);
/* For the HTTP/2 and HTTP/3 transports: fills txn->req from a request's
 * :method, :path (split at '?' into path and query) and whole body, with
 * HTTP/1.1's defaults (keep-alive, the body's length as Content-Length).
 * The headers (req.headers, req.nheaders) are left as they are. */
void http_txn_set_request(struct http_txn *txn, const char *method, size_t method_len,
                          const char *target, size_t target_len, const struct buf *body);
/* For the transports: the observers of a response that ends now (status 0
 * when aborted). */
void http_txn_notify_end(struct http_txn *txn, int status, uint64_t body_bytes);

const char *http_status_text(int status);
/* Replaces b's content with the error body {"error": msg}. */
void http_error_body(struct buf *b, const char *msg);

#endif
