/*
 * quic_tls: the TLS 1.3 side of inferd's QUIC (HTTP/3) connections, with
 * GnuTLS (the crypto binding Debian ships for ngtcp2). TCP TLS stays on
 * OpenSSL (tls.h); both read the same certificate and key files.
 *
 * struct quic_tls_store holds the current GnuTLS certificate credentials.
 * It is created on the main thread before the I/O threads start and
 * replaced by quic_tls_store_reload() (SIGHUP, main thread), with the same
 * rules as tls_store_reload(): the new files are loaded and checked first
 * (a bad file keeps the old credentials), then published under a mutex.
 * Credentials are reference counted: each session holds the credentials it
 * was created with, so open connections keep their certificate and old
 * credentials are freed with their last session.
 *
 * 0-RTT (early data) is off unless the store is created with zero_rtt:
 * then sessions issue TLS 1.3 session tickets (a key made at start, never
 * written anywhere) and accept early data, with GnuTLS's anti-replay window
 * backed by the store's bounded replay cache (see quic_tls.c). Early data
 * can still be replayed within that window by an attacker who captures it
 * (RFC 8446 section 8): only idempotent requests belong in it.
 *
 * A session (struct quic_tls_session) belongs to one connection and is
 * used only on its I/O thread.
 */
#ifndef INFERD_NET_QUIC_TLS_H
#define INFERD_NET_QUIC_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "net/tls.h"

struct quic_tls_store;
struct quic_creds;

struct quic_tls_session {
    void *gnutls; /* gnutls_session_t */
    struct quic_creds *creds;
};

/* Loads o's certificate and key (o's strings must stay valid: they are
 * read again on reload). Client certificates (o->client_ca_file) are not
 * supported over QUIC: ST_ERROR with err set. Returns 0 or ST_ERROR with err set. */
int quic_tls_store_new(const struct tls_options *o, bool zero_rtt, struct quic_tls_store **out,
                       struct error *err);
/* Main thread: reads the files again; on failure the old credentials stay
 * and -1 is returned with err set. */
int quic_tls_store_reload(struct quic_tls_store *s, struct error *err);
/* After every session is freed. */
void quic_tls_store_free(struct quic_tls_store *s);

/* A server session for one QUIC connection: TLS 1.3 only, ALPN "h3"
 * mandatory, configured for ngtcp2 (ngtcp2_crypto_gnutls), with `ptr` as
 * the session's user pointer (ngtcp2's ngtcp2_crypto_conn_ref). Returns 0
 * or -1 (logged). */
int quic_tls_session_init(struct quic_tls_store *s, struct quic_tls_session *out, void *ptr);
void quic_tls_session_free(struct quic_tls_session *ts);
/* Did the client's 0-RTT data get accepted on this session? */
bool quic_tls_session_early_accepted(const struct quic_tls_session *ts);

#endif
