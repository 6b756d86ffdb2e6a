/*
 * h2: HTTP/2 on inferd's own connections, with libnghttp2 doing the framing
 * and HPACK. The server (tcp_conn.c) owns the socket and the buffers; an
 * h2_session is fed the received bytes (h2_session_recv) and asked for the
 * bytes to send (h2_session_send). Nothing here touches a file descriptor,
 * so the fuzz target drives exactly the code a real connection runs.
 *
 * Changes to the contract of notes/h2_contract.md (for the gRPC service):
 *   - h2_stream_finish() without h2_stream_respond_headers() sends a
 *     "trailers-only" response: one HEADERS frame with ":status: 200", then
 *     the given trailers, with END_STREAM. Put content-type (and
 *     grpc-status, grpc-message) in the trailers for that case.
 *   - Header names given to respond_headers/finish must be lowercase
 *     (HTTP/2 rule); they are sent as given.
 *   - At most H2_MAX_TRAILERS trailers; respond_headers takes at most
 *     H2_MAX_RESPONSE_HEADERS headers (more: -1).
 *   - h2_stream_loop() returns the loop of the connection's I/O thread
 *     (NULL in the fuzz target).
 *
 * Streams. Each HTTP/2 request stream is one struct h2_stream, created when
 * its HEADERS arrive. Routing is decided when the header block is complete:
 *   - content-type application/grpc* (but not application/grpc-web*, an
 *     ordinary exchange) and an app configured → the app
 *     (struct h2_stream_app): on_headers, on_data..., on_end, and on_close
 *     exactly once at the end. The app answers with the h2_stream_* calls.
 *   - otherwise → REST: the transport collects the whole body (limits as
 *     for HTTP/1: --max-body-bytes → 413, header list over
 *     --max-header-bytes or more than --max-headers fields → 431), fills
 *     the stream's struct http_txn (txn->stream points back at it) and
 *     calls the server's http_handler_fn, which answers through the txn
 *     (txn.h): a whole response, or a streamed one whose writes become
 *     DATA frames as they come. A stream the config's `early` function
 *     picks goes to the handler on its head instead, while its body
 *     arrives (txn.h, "Request bodies"); if the handler answers before the
 *     body is complete, RST_STREAM(NO_ERROR) follows the response so the
 *     client stops sending, and the connection stays.
 *
 * Lifetime. A stream belongs to its session. When the stream closes (peer
 * RST_STREAM, response complete) or the connection goes away:
 *   - an app stream gets on_close(), then is freed (the app must drop its
 *     pointer in on_close);
 *   - a REST stream whose handler has not responded yet is detached: its
 *     txn is marked aborted and stays valid until the handler calls
 *     http_txn_respond() or http_txn_stream_end(), which then only free it
 *     (as the HTTP/1 path).
 * All functions run on the connection's I/O loop thread.
 */
#ifndef INFERD_HTTP_H2_H
#define INFERD_HTTP_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/http1.h"
#include "http/txn.h"
#include "net/loop.h"

struct h2_stream; /* one HTTP/2 stream, owned by the transport */
struct h2_session;

#define H2_MAX_RESPONSE_HEADERS 32
#define H2_MAX_TRAILERS 16

/* HTTP/2 error codes (RFC 9113 section 7) used with h2_stream_reset(). */
enum {
    H2_NO_ERROR = 0x0,
    H2_PROTOCOL_ERROR = 0x1,
    H2_INTERNAL_ERROR = 0x2,
    H2_REFUSED_STREAM = 0x7,
    H2_CANCEL = 0x8,
    H2_ENHANCE_YOUR_CALM = 0xb,
};

struct h2_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* Application for streams that are not REST (today: content-type
 * application/grpc*). All callbacks run on the connection's I/O loop
 * thread, from inside h2_session_recv()/h2_session_send()/h2_session_free(). */
struct h2_stream_app {
    void *app; /* e.g. struct grpc_api, one per I/O thread */
    /* Request headers complete (pseudo-headers + metadata). */
    void (*on_headers)(void *app, struct h2_stream *st);
    /* Request DATA bytes; only valid during the call (the app copies what it
     * keeps). Flow-control window is returned to the peer after it returns. */
    void (*on_data)(void *app, struct h2_stream *st, const uint8_t *data, size_t len);
    /* The client half-closed the stream (END_STREAM). */
    void (*on_end)(void *app, struct h2_stream *st);
    /* The stream is gone: peer RST_STREAM, connection closed/reset, or the
     * app's final trailers were sent. After this the app must never touch
     * `st` again. error_code is the HTTP/2 error code (0 = clean). */
    void (*on_close)(void *app, struct h2_stream *st, uint32_t error_code);
};

void h2_stream_set_user(struct h2_stream *st, void *user); /* app's per-stream object */
void *h2_stream_user(const struct h2_stream *st);
/* Request pseudo-headers and headers (case-insensitive lookup, first match;
 * NULL if absent). The strings are not NUL-terminated; valid until on_close. */
const char *h2_stream_method(const struct h2_stream *st, size_t *len);
const char *h2_stream_path(const struct h2_stream *st, size_t *len);
const char *h2_stream_header(const struct h2_stream *st, const char *name, size_t *len);
/* Iterate all regular request headers (pseudo-headers excluded). */
size_t h2_stream_header_count(const struct h2_stream *st);
const struct h2_header *h2_stream_header_at(const struct h2_stream *st, size_t i);
struct loop *h2_stream_loop(const struct h2_stream *st);
/* HTTP/2 stream id (for logs). */
int32_t h2_stream_id(const struct h2_stream *st);
/* The client's address of the stream's connection (config `peer`) into
 * out, NUL-terminated; returns its length (0 if unknown or the stream is
 * detached from its session). */
size_t h2_stream_peer(const struct h2_stream *st, char *out, size_t cap);

/* Response: headers once (":status" + the given headers), then any number
 * of writes (copied into the stream's bounded output queue; -1 if the
 * queue would grow over its limit or the stream is closed/finished), then
 * finish with trailers (END_STREAM). finish may be called without
 * respond_headers: a trailers-only response (see the top of this file).
 * Returns 0 or ST_ERROR (stream closed, called twice, too many headers). */
int h2_stream_respond_headers(struct h2_stream *st, int status, const struct h2_header *h,
                              size_t n);
int h2_stream_write(struct h2_stream *st, const void *data, size_t len);
int h2_stream_finish(struct h2_stream *st, const struct h2_header *trailers, size_t n);
/* Bytes queued on the stream and not yet sent (for streaming back-pressure). */
size_t h2_stream_pending(const struct h2_stream *st);
/* Abort the stream with RST_STREAM(error_code); on_close follows. */
void h2_stream_reset(struct h2_stream *st, uint32_t error_code);

/* ---- The transport side (tcp_conn.c and the fuzz target) ---- */

struct h2_session_config {
    const struct http1_limits *limits; /* header and body limits, as HTTP/1 */
    uint32_t max_concurrent_streams;   /* SETTINGS_MAX_CONCURRENT_STREAMS */
    uint64_t max_response_bytes;       /* per-stream output queue ceiling */
    const struct h2_stream_app *grpc;  /* NULL: no gRPC */
    http_handler_fn handler;             /* REST streams */
    void *handler_app;
    /* REST streams the handler takes on their head (txn.h, "Request
     * bodies"), called with handler_app; NULL: every body is read whole
     * first. A stream is offered at the end of the h2_session_recv() in
     * which its head completed, if its body is not complete by then. */
    http_early_fn early;
    struct loop *loop; /* for h2_stream_loop(); may be NULL */
    /* Output became available outside h2_session_recv/send (an asynchronous
     * respond or write): the owner should call h2_session_send soon. */
    void (*want_write)(void *arg);
    void *arg;
    /* The client's address "ip:port" ("[ip6]:port") into out (called with
     * `arg`); returns its length, 0 if unknown. NULL = never known. */
    size_t (*peer)(void *arg, char *out, size_t cap);
    /* Filled into each REST txn (txn->on_response). */
    http_response_fn on_response;
    /* Alt-Svc header value added to each REST answer; NULL = none. */
    const char *alt_svc;
};

/* Creates a server session and queues its SETTINGS. Returns 0 or -ENOMEM. */
int h2_session_new(const struct h2_session_config *cfg, struct h2_session **out);
/* Processes received bytes (starting with the client connection preface).
 * Returns 0, or ST_ERROR when the connection is broken (protocol error, flood):
 * send what h2_session_send still produces (a GOAWAY), then close. */
int h2_session_recv(struct h2_session *s, const uint8_t *data, size_t len);
/* Appends frames to `out` until nothing is left to send or out->len reaches
 * `high_water`. Returns 0 or ST_ERROR (fatal; close the connection). */
int h2_session_send(struct h2_session *s, struct buf *out, size_t high_water);
/* True when the session is finished (GOAWAY exchanged or fatal error, and
 * nothing left to send): the connection should be closed once the output
 * buffer is flushed. */
bool h2_session_done(const struct h2_session *s);
/* Open streams (including REST streams whose handler works). */
uint32_t h2_session_stream_count(const struct h2_session *s);
/* True while some stream's request is still arriving (HEADERS or DATA
 * without END_STREAM yet): the connection's read timeout applies. */
bool h2_session_receiving(const struct h2_session *s);
/* Graceful shutdown: GOAWAY with the last processed stream id; streams in
 * flight finish; no new stream is accepted. */
void h2_session_drain(struct h2_session *s);
/* Frees the session. App streams get on_close(H2_CANCEL); REST streams
 * still held by a handler are detached and marked aborted. */
void h2_session_free(struct h2_session *s);

#endif
