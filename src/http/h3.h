/*
 * h3: HTTP/3 over QUIC, with ngtcp2 (QUIC, TLS through quic_tls.h's
 * GnuTLS sessions) and nghttp3 (HTTP/3 framing, QPACK). It serves the same
 * handler as the TCP server (server.h) through struct http_txn (txn.h):
 * every HTTP/3 request stream becomes a txn, answered whole or streamed
 * (SSE included), exactly as an HTTP/2 stream. The implementation's
 * files (h3_*.c) and what each holds are listed in h3_conn.h.
 *
 * Threads. One h3_server owns one UDP socket and runs on one I/O loop: all
 * QUIC connections of the port live on that loop, so no connection-ID
 * routing between threads is needed (the kernel cannot route QUIC by
 * connection ID with plain SO_REUSEPORT, and a migrating client would
 * otherwise land on another thread). The server's handler runs on that
 * loop's thread like any other connection's.
 *
 * Connections. A client Initial packet that ngtcp2 accepts creates a
 * connection (within --max-connections, shared with TCP through
 * open_connections). Packets are routed to it by destination connection
 * ID: the IDs it issued (NEW_CONNECTION_ID) and the client's original one.
 * Connection migration: a packet from a new address on a known ID is
 * handed to ngtcp2, which validates the new path (PATH_CHALLENGE) before
 * it sends there. Stateless reset tokens are derived from a per-process
 * secret (ngtcp2_crypto). A connection ends on idle timeout (the QUIC
 * max_idle_timeout, from the server's idle timeout), on a peer
 * CONNECTION_CLOSE, or on a protocol error (we send CONNECTION_CLOSE and
 * keep the connection for a closing period of three PTOs).
 *
 * Limits. Concurrent request streams per connection: max_streams (QUIC
 * MAX_STREAMS; the peer cannot exceed it, ngtcp2 closes a connection that
 * tries). Flow-control windows: H3_STREAM_WINDOW per stream and
 * H3_CONN_WINDOW per connection (h3_server.c), returned as the bytes are taken.
 * Header and body limits as HTTP/1 (431, 413). The response output queue
 * of a stream is bounded by max_response_bytes (bytes written and not yet
 * acknowledged by the client).
 *
 * Lifetime of a stream: created when its HEADERS arrive, freed when
 * nghttp3 closes it; if its handler still holds the txn, the stream is
 * detached instead (txn aborted, cancel flag raised) and freed when the
 * handler ends the txn — as the HTTP/2 path (h2.h).
 */
#ifndef INFERD_HTTP_H3_H
#define INFERD_HTTP_H3_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http1.h"
#include "http/txn.h"
#include "net/loop.h"
#include "net/quic_tls.h"

struct h3_server;

struct h3_server_config {
    const char *host; /* as the TCP server's */
    int port;         /* the HTTPS (TCP) port: the UDP port of the same number */
    struct http1_limits limits;
    uint32_t max_streams;          /* concurrent request streams per connection */
    uint32_t max_connections;      /* over everything counted by open_connections */
    atomic_uint *open_connections; /* NULL = this server alone */
    uint32_t idle_timeout_ms;
    uint64_t max_response_bytes;
    struct quic_tls_store *tls; /* required */
    http_response_fn on_response;
};

/* Binds the UDP socket and registers it with the loop. *out is owned by
 * the caller; free with h3_server_free() after the loop stops. Returns 0
 * or -errno (logged). */
int h3_server_start(struct loop *loop, const struct h3_server_config *cfg, http_handler_fn handler,
                    void *app, struct h3_server **out);
int h3_server_port(const struct h3_server *s);
uint32_t h3_server_connection_count(const struct h3_server *s);
/* Loop thread: no new connection is accepted; each connection gets an
 * HTTP/3 GOAWAY, its requests in flight finish, then it closes.
 * on_drained runs (on the loop thread) once no connection is left. */
void h3_server_drain(struct h3_server *s, void (*on_drained)(void *arg), void *arg);
/* Closes every connection (their txns are aborted) and the socket. */
void h3_server_free(struct h3_server *s);

#endif
