/*
 * grpc_conn: one client HTTP/2 connection (cleartext, prior knowledge) to
 * a gRPC server, carrying any number of concurrent unary calls as streams
 * of the one connection (multiplexed, reused for the connection's life).
 *
 * Everything runs on the loop thread the connection was opened on: the
 * socket is non-blocking and watched by the loop; calls are started and
 * finish (done()) there. grpc_conn_open() starts connecting and returns at
 * once; calls started before the connection is up wait for it.
 *
 * A call (struct grpc_unary) is caller-owned: it fills path, the
 * serialized message and the metadata, and gets done() exactly once with
 *   status   the grpc-status (0 OK), or GRPC_TRANSPORT (-1) when the
 *            connection failed or was cut before the trailers came;
 *   reached  false only when the server certainly did not process it: the
 *            connection never came up, the request's HEADERS never left
 *            this process, the stream was refused (REFUSED_STREAM) or a
 *            GOAWAY's last-stream-id is below it — such a call may be
 *            retried elsewhere; true otherwise (it may have run);
 *   resp     the response message (without the 5-byte gRPC prefix).
 * A call with timeout_us sends grpc-timeout and fails with status 4
 * (DEADLINE_EXCEEDED, reached) when its time passes without an answer;
 * its stream is reset.
 *
 * A server-streaming call (on_message set, e.g. ModelStreamInfer with one
 * request message and its responses) gets each response message as it
 * arrives instead of one in resp: on_message(u, msg, len), msg valid
 * during the call only, then done() once when the stream ends (resp
 * empty). on_message returning false cancels the call: its stream is
 * reset (RST_STREAM CANCEL) and done() follows with status 1 (CANCELLED,
 * reached). A stream that ends inside a message fails with status 13.
 *
 * done() may start new calls (on any connection) but must not close a
 * connection: it runs inside the connection's HTTP/2 processing.
 *
 * A connection that failed (connect error, reset, GOAWAY) fails its
 * outstanding calls and stays dead (grpc_conn_alive() false): its owner
 * closes it and opens another. grpc_conn_close() fails what is
 * outstanding (done() called) and frees it.
 */
#ifndef INFERD_CLUSTER_GRPC_CONN_H
#define INFERD_CLUSTER_GRPC_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "net/loop.h"

#define GRPC_TRANSPORT (-1)
#define GRPC_CANCELLED 1
#define GRPC_DEADLINE_EXCEEDED 4
#define GRPC_UNAVAILABLE 14
/* Largest response message accepted (bigger: the call fails, status 8). */
#define GRPC_CONN_MAX_MESSAGE (64u << 20)

struct grpc_conn;

struct grpc_unary {
    /* Set by the caller. */
    const char *path;   /* "/inference.GRPCInferenceService/ModelInfer" */
    const uint8_t *msg; /* serialized request message */
    size_t len;
    uint64_t timeout_us;     /* 0: none */
    const char *traceparent; /* NULL: not sent */
    const char *request_id;  /* x-request-id; NULL: not sent */
    void (*done)(struct grpc_unary *u);
    /* NULL: unary (the response in resp). Else a server stream (above). */
    bool (*on_message)(struct grpc_unary *u, const uint8_t *msg, size_t len);
    void *ctx;

    /* Results, valid in done(). */
    int status;
    bool reached;
    char message[256]; /* grpc-message, or what went wrong */
    struct buf resp;   /* freed by the caller (buf_free) */

    /* The connection's. */
    struct grpc_conn *_conn;
    int32_t _stream;
    size_t _sent; /* bytes of the framed message handed to nghttp2 */
    uint8_t _prefix[5];
    bool _headers_sent, _have_status, _finished, _cancelled;
    uint64_t _deadline_ns;
    struct grpc_unary *_prev, *_next;
};

/* Starts connecting to host:port (numeric IPv4/IPv6 or a name resolved
 * now) on loop l. 0, or -errno (nothing allocated). Loop thread. */
int grpc_conn_open(struct loop *l, const char *host, int port, struct grpc_conn **out);
/* Starts u on c. It first reads what the upstream sent, so that a
 * connection the upstream closed or reset is seen before u is written into
 * it: the other calls on c may then finish (their done() runs first). If c
 * is dead, u is failed at once (done() before the return, reached false).
 * Loop thread. */
void grpc_conn_call(struct grpc_conn *c, struct grpc_unary *u);
/* Not failed: connecting or up. */
bool grpc_conn_alive(const struct grpc_conn *c);
/* Calls started and not yet done. */
uint32_t grpc_conn_outstanding(const struct grpc_conn *c);
/* Fails its calls, closes the socket, frees. Loop thread. */
void grpc_conn_close(struct grpc_conn *c);

#endif
