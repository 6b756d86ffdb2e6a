/*
 * tls: server-side TLS with OpenSSL 3 for inferd's non-blocking
 * connections (TLS 1.2 and 1.3 only).
 *
 * struct tls_store holds the current server context (certificate chain,
 * key, optional client CA for mutual TLS). It is created on the main
 * thread before the I/O threads start and replaced by tls_store_reload()
 * (SIGHUP, main thread): the new context is built and validated first (a
 * bad file keeps the old one), then published by swapping the pointer
 * under a mutex. Every connection holds a reference on the context it was
 * accepted with (OpenSSL's SSL_CTX refcount), so existing connections keep
 * their certificate and the old context is freed with its last connection.
 *
 * struct tls_conn is one connection's TLS state, used only by the
 * connection's I/O thread. The I/O functions never block: they return
 * ST_AGAIN (base/status.h) when the socket has no data or no room (the caller waits for
 * the next edge-triggered event; the socket is watched for both directions
 * so a renegotiation-free TLS 1.2/1.3 record layer cannot stall).
 */
#ifndef INFERD_NET_TLS_H
#define INFERD_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/status.h"

struct tls_store;
struct tls_conn;

struct tls_options {
    const char *cert_file;      /* PEM certificate chain */
    const char *key_file;       /* PEM private key */
    const char *client_ca_file; /* PEM CAs for client certificates; NULL = none */
};

/* ALPN policy of a listener. */
enum tls_alpn {
    TLS_ALPN_H2_HTTP1, /* offer "h2" and "http/1.1" (the HTTP port) */
    TLS_ALPN_H2_ONLY,  /* only "h2" (the gRPC port) */
};

/* Loads the files into a new store. The options' strings must stay valid
 * (they are read again on reload). Returns 0 or ST_ERROR with err set. */
int tls_store_new(const struct tls_options *o, struct tls_store **out, struct error *err);
/* Main thread: reads the files again and publishes the new context. On
 * failure the old context stays and -1 is returned with err set. */
int tls_store_reload(struct tls_store *s, struct error *err);
/* After every connection is closed. */
void tls_store_free(struct tls_store *s);
/* A description of the current certificate (subject and serial) for logs. */
void tls_store_describe(struct tls_store *s, char *out, size_t size);

/* Any thread: a TLS server connection on fd with the current context.
 * NULL on failure (logged). */
struct tls_conn *tls_conn_new(struct tls_store *s, int fd, enum tls_alpn alpn);
void tls_conn_free(struct tls_conn *c);
/* Runs the handshake. Returns ST_DONE when complete, ST_AGAIN, or
 * ST_ERROR (logged at debug level). */
enum status tls_conn_handshake(struct tls_conn *c);
/* After the handshake: did ALPN choose "h2"? */
bool tls_conn_alpn_h2(const struct tls_conn *c);
/* Returns bytes read (> 0), 0 when the peer closed (close_notify),
 * ST_AGAIN or ST_ERROR. */
ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t len);
/* Returns bytes written (> 0), ST_AGAIN or ST_ERROR. */
ssize_t tls_conn_write(struct tls_conn *c, const void *buf, size_t len);
/* Sends close_notify if the socket takes it at once (never waits). */
void tls_conn_shutdown(struct tls_conn *c);

#endif
