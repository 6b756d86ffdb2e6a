/*
 * h3_conn: what the parts of the HTTP/3 server share (internal to
 * src/http/h3_*.c; the public interface is http/h3.h):
 *   h3_server.c   the UDP socket, connections (accept, packet I/O, UDP
 *                 send, timers, close, drain) and h3.h's functions
 *   h3_quic.c     the ngtcp2 callbacks (QUIC: handshake, stream data, acks,
 *                 connection IDs) and the randomness QUIC asks for
 *   h3_cid.c      connection-ID routing: which connection a packet's
 *                 destination connection ID belongs to
 *   h3_request.c  the nghttp3 callbacks and the HTTP/3 layer of a
 *                 connection; a request assembled from its HEADERS and
 *                 DATA and handed to the handler
 *   h3_stream.c   streams, their outgoing chunk queues, responses and the
 *                 HTTP/3 side of struct http_txn (http/txn.h)
 *
 * Threads: everything runs on the I/O loop that owns the server, the
 * handler included; nothing here locks. The server is made by
 * h3_server_start() before that loop runs and freed by h3_server_free()
 * after it stops.
 *
 * Lifecycle of a connection: created by h3_server.c when a datagram whose
 * destination connection ID is unknown is a client Initial that ngtcp2
 * accepts (not while draining, and within the connection limit). The
 * ngtcp2 and nghttp3 callbacks never free it: a failing callback returns
 * the library's error (having set c->ccerr when it knows the HTTP/3 error
 * code), and h3_server.c, where the library call returns, closes the
 * connection (CONNECTION_CLOSE, then a closing period of three PTOs; a
 * peer's CONNECTION_CLOSE starts a draining period instead). It is marked
 * dead when that period ends, on idle timeout, or when ngtcp2 drops it,
 * and freed at the next safe point: the top of the server's own entry
 * points (a datagram, the connection's timer, a drain). h3_server_free()
 * frees the rest. Freeing a connection removes its connection IDs from
 * the routing table and lets go of its streams.
 *
 * Lifecycle of a stream: created by nghttp3's begin_headers callback
 * (h3_request.c), dispatched to the handler as a txn once the client's
 * request is complete (unless h3_stream_fail() answered it first, over a
 * limit), freed when nghttp3 closes the stream or its
 * connection is freed (h3_stream_gone). If the handler still holds the txn
 * then, the stream is detached instead (conn NULL, txn aborted, cancel flag
 * raised) and freed when the handler ends the txn (h3_stream.c), as the
 * HTTP/2 path (h2.h). Its output chunks are freed as the client
 * acknowledges them, or with the stream.
 */
#ifndef INFERD_HTTP_H3_CONN_H
#define INFERD_HTTP_H3_CONN_H

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/h3.h"
#include "http/txn.h"
#include "net/loop.h"
#include "net/quic_tls.h"
#include "net/udp.h"

/* The per-process secret behind our stateless reset tokens. */
#define H3_SECRET_LEN 32
/* Datagrams: the largest we take. */
#define H3_MAX_DATAGRAM 65536
/* Connection-ID routing table buckets (chained). */
#define H3_CID_BUCKETS 4096

struct h3_conn;
struct cid_entry; /* h3_cid.c */

/* Response bytes given to nghttp3, kept until the client acknowledges them
 * (ngtcp2 retransmits from them). */
struct h3_chunk {
    struct h3_chunk *next;
    char *data; /* owned */
    size_t len;
    size_t acked;
};

struct h3_stream {
    struct h3_conn *conn; /* NULL once detached (the handler still holds the txn) */
    struct h3_stream *prev, *next;
    int64_t id;
    /* Request head: names and values copied into hbuf; the txn's header
     * array holds offsets until the head is complete. */
    struct buf hbuf;
    size_t method_off, method_len, path_off, path_len;
    bool has_method, has_path;
    uint64_t header_bytes;
    int err_status; /* answer this error once the head is complete */
    const char *err_msg;
    bool head_done;
    bool request_done; /* the client's FIN */
    bool txn_active;   /* the handler owns the txn */
    bool responded;    /* response submitted */
    bool finished;     /* all output queued */
    bool deferred;     /* read_data said WOULDBLOCK */
    struct buf body;   /* request body */
    /* Output: chunks in order; [read_chunk, read_off) onward not yet given
     * to nghttp3; the head chunk's `acked` bytes are acknowledged. */
    struct h3_chunk *out_head, *out_tail, *read_chunk;
    size_t read_off;
    uint64_t unacked; /* bytes queued and not yet acknowledged */
    struct http_txn txn;
};

enum conn_phase {
    PHASE_OPEN,
    PHASE_CLOSING,  /* we sent CONNECTION_CLOSE: answer packets with it until deadline */
    PHASE_DRAINING, /* the peer closed: stay silent until deadline */
};

struct h3_conn {
    struct loop_watch timer; /* fd -1: expiry and deferred writes */
    struct h3_server *server;
    struct h3_conn *prev, *next;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    struct quic_tls_session tls;
    ngtcp2_crypto_conn_ref conn_ref;
    struct cid_entry *cids;
    struct udp_addr local, remote; /* the path of the last packet */
    struct h3_stream *streams;
    uint32_t nstreams;
    enum conn_phase phase;
    uint64_t close_deadline_ns;
    struct buf close_pkt;                /* our CONNECTION_CLOSE, resent in PHASE_CLOSING */
    ngtcp2_connection_close_error ccerr; /* set by a failing callback */
    bool dead;                           /* free at the next safe point */
    bool goaway_sent;                    /* draining: GOAWAY submitted */
};

struct h3_server {
    struct loop *loop;
    struct h3_server_config cfg;
    http_handler_fn handler;
    void *app;
    struct loop_watch sock;
    int port;
    struct h3_conn *conns;
    uint32_t nconns;
    atomic_uint own_connections;
    atomic_uint *open_connections;
    struct cid_entry *cid_table[H3_CID_BUCKETS];
    uint8_t secret[H3_SECRET_LEN];
    uint8_t pkt[H3_MAX_DATAGRAM]; /* receive buffer */
    uint8_t tx[NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE];
    bool draining;
    void (*on_drained)(void *arg);
    void *drained_arg;
};

/* ---- every part: two steps on a connection ----
 * Inline, so that the streams and the nghttp3 and ngtcp2 callbacks do not
 * call into h3_server.c, which calls them: calls go one way, h3_server.c ->
 * h3_quic.c -> h3_request.c -> h3_stream.c, and to h3_cid.c
 * (scripts/check_calls.py). */

/* Asks the loop to run the connection's writes after the current event. */
static inline void h3_conn_want_write(struct h3_conn *c)
{
    loop_defer(c->server->loop, &c->timer);
}

/* n bytes of stream id were taken (or dropped): the flow-control windows
 * of the stream and the connection grow back by n. */
static inline void h3_conn_consume(struct h3_conn *c, int64_t id, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
}

/* ---- h3_quic.c: the ngtcp2 callbacks ---- */

extern const ngtcp2_callbacks h3_quic_callbacks;
/* The conn_ref callback of the TLS session: its connection's ngtcp2_conn. */
ngtcp2_conn *h3_quic_get_conn(ngtcp2_crypto_conn_ref *ref);
/* n random bytes (connection IDs, the reset secret, packet fields). */
void h3_quic_random(void *p, size_t n);

/* ---- h3_cid.c: connection-ID routing ---- */

/* The connection that issued (or was first reached by) this ID; NULL if
 * none. */
struct h3_conn *h3_cid_find(struct h3_server *s, const uint8_t *d, size_t n);
/* Routes cid to c. Returns 0 or ST_ERROR (out of memory). */
int h3_cid_add(struct h3_conn *c, const ngtcp2_cid *cid);
void h3_cid_remove(struct h3_conn *c, const ngtcp2_cid *cid);
void h3_cid_remove_all(struct h3_conn *c);

/* ---- h3_request.c: the HTTP/3 layer of a connection ---- */

/* Creates c's nghttp3 connection (once; later calls return 0) and opens
 * its control and QPACK streams. Returns 0 or ST_ERROR. */
int h3_http_setup(struct h3_conn *c);

/* ---- h3_stream.c: streams, responses, the txn ---- */

extern const struct http_txn_ops h3_txn_ops;
/* A stream of id on c, linked into c's streams; NULL when out of memory. */
struct h3_stream *h3_stream_new(struct h3_conn *c, int64_t id);
void h3_stream_gone(struct h3_conn *c, struct h3_stream *st);
/* The client acknowledged n more bytes of st's output. */
void h3_stream_acked(struct h3_stream *st, uint64_t n);
void h3_stream_fail(struct h3_stream *st, int status, const char *msg);

#endif
