/*
 * tcp_conn: what the two halves of the TCP server share (internal to
 * src/http/tcp_*.c; the public interface is http/server.h):
 *   tcp_server.c  the listening sockets (HTTP port, gRPC port), accepting,
 *                 the loop's tick, drain and free: server.h's functions
 *   tcp_conn.c    one connection from accept to close: TLS handshake,
 *                 HTTP/1.1 read, parse, dispatch and write (the HTTP/1
 *                 side of struct http_txn), the hand-over to an HTTP/2
 *                 session (h2.h), deadlines, linger and drain
 *
 * tcp_server.c calls into tcp_conn.c, never the other way: a connection
 * reaches its server only through struct http_server's fields (its
 * config, loop, handler and counters) and the on_drained callback.
 *
 * Threads: everything runs on the I/O loop that owns the server; nothing
 * here locks. The process-wide connection counter (open_connections) is
 * the one shared object, and it is atomic.
 */
#ifndef INFERD_HTTP_TCP_CONN_H
#define INFERD_HTTP_TCP_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/server.h"
#include "net/loop.h"

struct listener {
    struct loop_watch watch;
    struct http_server *server;
    bool grpc; /* the gRPC port: HTTP/2 only */
    int port;
};

struct http_server {
    struct loop *loop;
    struct http_server_config cfg;
    http_handler_fn handler;
    void *app;
    struct listener listeners[2]; /* HTTP port, gRPC port (fd -1 if none) */
    struct loop_watch reaper;     /* frees closed connections at the end of an iteration */
    struct http_conn *conns;      /* open connections */
    struct http_conn *graveyard;  /* closed, to be freed by the reaper */
    uint32_t nconns;
    atomic_uint own_connections; /* the counter when the config shares none */
    atomic_uint *open_connections;
    bool draining;
    void (*on_drained)(void *arg);
    void *drained_arg;
};

/* Sets up s's connection bookkeeping (the reaper); before any other call. */
void tcp_conns_init(struct http_server *s);

/* Makes a connection of the accepted socket fd (non-blocking), which
 * already counts in s->open_connections: TLS when configured, else
 * HTTP/1.1 (or HTTP/2 on its preface; only HTTP/2 when grpc_port).
 * Takes fd and its count: on failure (ST_ERROR, out of memory or the
 * loop refused it) the socket is closed and the count given back. */
int tcp_conn_open(struct http_server *s, int fd, bool grpc_port, int port);

/* Acts on every connection whose deadline passed at now_ms: a request
 * head or body cut short is answered 408, anything else closed. */
void tcp_conns_expire(struct http_server *s, uint64_t now_ms);

/* Draining (s->draining is set, the listeners closed): idle connections
 * close, HTTP/2 sessions send GOAWAY, a request under way gets a short
 * grace to arrive whole. s->on_drained is called (once) when the last
 * connection is gone, perhaps from within this call. */
void tcp_conns_drain(struct http_server *s);

/* Closes every connection at once and frees those no handler holds (a
 * held one is freed when its handler responds; http_server_free() runs
 * after the loop stopped, when none is held). */
void tcp_conns_close(struct http_server *s);

#endif
