#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"

struct tls_store {
    struct tls_options opts;
    pthread_mutex_t lock; /* guards `ctx` between the swap and SSL_new */
    SSL_CTX *ctx;         /* the store's reference; each SSL holds its own */
};

struct tls_conn {
    SSL *ssl;
    bool failed; /* a fatal error: no close_notify may be sent */
};

/* ex_data slot of an SSL telling the ALPN callback which policy applies. */
static int alpn_index = -1;
static pthread_once_t alpn_once = PTHREAD_ONCE_INIT;

static void alpn_index_init(void)
{
    alpn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The first OpenSSL error as text (the queue is cleared). */
static const char *ssl_error_text(char *buf, size_t size)
{
    unsigned long e = ERR_get_error();
    if (!e)
        snprintf(buf, size, "unknown error");
    else
        ERR_error_string_n(e, buf, size);
    ERR_clear_error();
    return buf;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)arg;
    static const unsigned char h2_http1[] = "\x02h2\x08http/1.1";
    static const unsigned char h2_only[] = "\x02h2";
    bool only = SSL_get_ex_data(ssl, alpn_index) != NULL;
    const unsigned char *prefs = only ? h2_only : h2_http1;
    unsigned int prefs_len = only ? sizeof h2_only - 1 : sizeof h2_http1 - 1;
    if (SSL_select_next_proto((unsigned char **)out, outlen, prefs, prefs_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return only ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK;
    return SSL_TLSEXT_ERR_OK;
}

/* Builds and checks a server context from the files. */
static SSL_CTX *ctx_build(const struct tls_options *o, struct error *err)
{
    char msg[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        error_set(err, 500, "TLS: cannot create a context: %s", ssl_error_text(msg, sizeof msg));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
        error_set(err, 500, "TLS: cannot load certificate %s: %s", o->cert_file,
                  ssl_error_text(msg, sizeof msg));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1) {
        error_set(err, 500, "TLS: cannot load key %s: %s", o->key_file,
                  ssl_error_text(msg, sizeof msg));
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        error_set(err, 500, "TLS: key %s does not match certificate %s", o->key_file,
                  o->cert_file);
        ERR_clear_error();
        goto fail;
    }
    if (o->client_ca_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->client_ca_file);
        if (!names || SSL_CTX_load_verify_locations(ctx, o->client_ca_file, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            error_set(err, 500, "TLS: cannot load client CA %s: %s", o->client_ca_file,
                      ssl_error_text(msg, sizeof msg));
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        static const unsigned char sid_ctx[] = "inferd";
        SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int tls_store_new(const struct tls_options *o, struct tls_store **out, struct error *err)
{
    pthread_once(&alpn_once, alpn_index_init);
    SSL_CTX *ctx = ctx_build(o, err);
    if (!ctx)
        return ST_ERROR;
    struct tls_store *s = mem_calloc(1, sizeof *s);
    if (!s) {
        SSL_CTX_free(ctx);
        return error_set(err, 500, "out of memory");
    }
    s->opts = *o;
    s->ctx = ctx;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

int tls_store_reload(struct tls_store *s, struct error *err)
{
    SSL_CTX *ctx = ctx_build(&s->opts, err);
    if (!ctx)
        return ST_ERROR;
    pthread_mutex_lock(&s->lock);
    SSL_CTX *old = s->ctx;
    s->ctx = ctx;
    pthread_mutex_unlock(&s->lock);
    SSL_CTX_free(old); /* freed for good with its last connection */
    return 0;
}

void tls_store_free(struct tls_store *s)
{
    if (!s)
        return;
    SSL_CTX_free(s->ctx);
    pthread_mutex_destroy(&s->lock);
    mem_free(s);
}

void tls_store_describe(struct tls_store *s, char *out, size_t size)
{
    pthread_mutex_lock(&s->lock);
    X509 *cert = SSL_CTX_get0_certificate(s->ctx);
    char subject[256] = "?", serial[128] = "?";
    if (cert) {
        X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
        BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
        char *hex = bn ? BN_bn2hex(bn) : NULL;
        if (hex)
            snprintf(serial, sizeof serial, "%s", hex);
        OPENSSL_free(hex);
        BN_free(bn);
    }
    pthread_mutex_unlock(&s->lock);
    snprintf(out, size, "subject %s, serial %s", subject, serial);
}

struct tls_conn *tls_conn_new(struct tls_store *s, int fd, enum tls_alpn alpn)
{
    struct tls_conn *c = mem_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_lock(&s->lock);
    c->ssl = SSL_new(s->ctx); /* takes its own reference on the context */
    pthread_mutex_unlock(&s->lock);
    if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
        char msg[256];
        log_warn("TLS: cannot create a connection: %s", ssl_error_text(msg, sizeof msg));
        SSL_free(c->ssl);
        mem_free(c);
        return NULL;
    }
    SSL_set_ex_data(c->ssl, alpn_index, alpn == TLS_ALPN_H2_ONLY ? (void *)c : NULL);
    SSL_set_accept_state(c->ssl);
    return c;
}

void tls_conn_free(struct tls_conn *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    mem_free(c);
}

/* Maps an SSL_ERROR_* after a failed call to ST_AGAIN, 0 (the peer closed)
 * or ST_ERROR; logs failures at debug level (clients that are not TLS, or
 * refused certificates). */
static int conn_error(struct tls_conn *c, int ret, const char *what)
{
    int e = SSL_get_error(c->ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return ST_AGAIN;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        return 0;
    }
    char msg[256];
    log_debug("TLS %s failed: %s", what, ssl_error_text(msg, sizeof msg));
    c->failed = true;
    return ST_ERROR;
}

enum status tls_conn_handshake(struct tls_conn *c)
{
    int ret = SSL_do_handshake(c->ssl);
    if (ret == 1)
        return ST_DONE;
    int rc = conn_error(c, ret, "handshake");
    return rc == ST_AGAIN ? ST_AGAIN : ST_ERROR;
}

bool tls_conn_alpn_h2(const struct tls_conn *c)
{
    const unsigned char *p = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(c->ssl, &p, &len);
    return len == 2 && memcmp(p, "h2", 2) == 0;
}

ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t len)
{
    size_t n = 0;
    int ret = SSL_read_ex(c->ssl, buf, len, &n);
    if (ret == 1)
        return (ssize_t)n;
    int rc = conn_error(c, ret, "read");
    return rc == ST_AGAIN ? ST_AGAIN : rc == 0 ? 0 : ST_ERROR;
}

ssize_t tls_conn_write(struct tls_conn *c, const void *buf, size_t len)
{
    size_t n = 0;
    int ret = SSL_write_ex(c->ssl, buf, len, &n);
    if (ret == 1)
        return (ssize_t)n;
    int rc = conn_error(c, ret, "write");
    return rc == ST_AGAIN ? ST_AGAIN : ST_ERROR;
}

void tls_conn_shutdown(struct tls_conn *c)
{
    if (c->failed || !SSL_is_init_finished(c->ssl))
        return;
    if (SSL_shutdown(c->ssl) < 0)
        ERR_clear_error();
}
