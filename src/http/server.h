/*
 * server: the HTTP/1.1 and HTTP/2 server on top of the event loop —
 * listening sockets, connections, request framing (http1.c, h2.c) and
 * response writing. Implemented by tcp_server.c (ports, accepting,
 * drain) and tcp_conn.c (a connection), which share tcp_conn.h.
 *
 * Lifecycle of a connection (all on the loop thread):
 *   accepted → READING: bytes are read and parsed until a request is
 *   complete → the handler is called with a struct http_txn → WAITING until
 *   the handler (now or later, e.g. when an inference completes) calls
 *   http_txn_respond() → WRITING until the response is sent → READING the
 *   next (possibly already pipelined) request, or closed.
 *   A request the config's `early` function picks goes to the handler as
 *   soon as its head is parsed, when its body is not complete yet (txn.h,
 *   "Request bodies"): BODY while the body is read and parsed in place
 *   (the handler may already answer: then `Connection: close`, the
 *   response, a linger that drops what the client still sends, close), then
 *   WAITING once the body is complete (http_txn_body_done tells the
 *   handler) → WRITING → READING as above. A body that fails on the way
 *   (timeout 408, framing 400, limit 413) is the handler's to answer, and
 *   the connection closes after that answer. `Expect: 100-continue` is
 *   answered 100 only once the handler returned without answering.
 *   A connection is freed only once no transaction refers to it: if the peer
 *   goes away while a handler is working, the transaction is marked aborted
 *   and the connection is freed when the handler responds.
 *   Requests on one connection are handled one at a time, so responses are
 *   always in request order.
 *
 * Errors found by the parser (and timeouts) are answered by the server
 * itself with a JSON body {"error": "..."} and `Connection: close`.
 */
#ifndef INFERD_HTTP_SERVER_H
#define INFERD_HTTP_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/h2.h"
#include "http/http1.h"
#include "http/txn.h"
#include "net/loop.h"
#include "net/tls.h"

struct http_server;
struct http_conn;


struct http_server_config {
    const char *host; /* numeric IPv4/IPv6 address or host name */
    int port;
    /* Several servers (one per I/O thread) share the port with SO_REUSEPORT;
     * the kernel spreads new connections over their listeners. The first
     * server checks that no other process holds the port. */
    bool reuseport;
    bool join_port; /* a later server of the same process: skip the check */
    struct http1_limits limits;
    uint32_t max_connections; /* over every server sharing open_connections */
    /* Open connections of the whole process (the servers of all I/O
     * threads share one counter, so the limit is global); NULL = this
     * server alone. */
    atomic_uint *open_connections;
    uint32_t header_timeout_ms; /* whole head must arrive within this */
    uint32_t idle_timeout_ms;   /* keep-alive connection with no request */
    uint32_t write_timeout_ms;  /* response must drain within this */
    uint64_t max_response_bytes;
    /* HTTP/2 (h2.h): the gRPC port takes HTTP/2 only; on the HTTP port a connection is HTTP/2 when it starts
     * with the client preface or TLS ALPN chose "h2". Streams with
     * content-type application/grpc* go to `grpc` (NULL = no gRPC). */
    bool grpc_listen;    /* open the gRPC port */
    int grpc_port;       /* 0 = any free port */
    bool grpc_join_port; /* like join_port, for the gRPC listener */
    const struct h2_stream_app *grpc;
    uint32_t h2_max_concurrent_streams;
    /* TLS on both ports when not NULL (tls.h); shared by all servers. */
    struct tls_store *tls;
    /* The Alt-Svc header value of answers sent over TLS (HTTP/1.1 and
     * HTTP/2), e.g. `h3=":8000"; ma=86400` with --http3; NULL = none. Read
     * at each request: may be filled after the server starts, before its
     * loop runs. */
    const char *alt_svc;
    /* Which requests go to the handler on their head, before their body is
     * read (http_early_fn, txn.h; also for HTTP/2 streams); NULL: none,
     * every request is read whole first. Called with the handler's app. */
    http_early_fn early;
    /* Observer (metrics), called on the loop thread for every response
     * before it is sent: a handler's (txn) or the server's own error answer
     * (txn NULL), with its status and body size. NULL = none. */
    http_response_fn on_response;
    /* Called about once a second on the loop thread, after the server's
     * own timeouts, with tick_arg and clock_now_ms(). NULL = none. */
    void (*on_tick)(void *tick_arg, uint64_t now_ms);
    void *tick_arg;
};

/* Creates the listening socket and registers it with the loop (and makes
 * the loop's tick drive this server's timeouts). *out is
 * owned by the caller; free with http_server_free() after the loop stops.
 * Returns 0 or -errno (message logged). */
int http_server_start(struct loop *loop, const struct http_server_config *cfg,
                      http_handler_fn handler, void *app, struct http_server **out);
/* Actual port (useful when cfg->port was 0). */
int http_server_port(const struct http_server *s);
/* Actual gRPC port; -1 when cfg->grpc_listen is false. */
int http_server_grpc_port(const struct http_server *s);
/* Stops accepting; idle connections are closed, busy ones close after their
 * response. on_drained is called (on the loop thread) once no connection
 * is left. */
void http_server_drain(struct http_server *s, void (*on_drained)(void *arg), void *arg);
void http_server_free(struct http_server *s);
uint32_t http_server_connection_count(const struct http_server *s);

#endif
