#include "net/quic_tls.h"

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/sha256.h"
#include "base/status.h"

/* TLS 1.3 only, the AEADs QUIC defines, no middlebox compatibility mode
 * (RFC 9001 section 8.4). */
#define QUIC_PRIORITY                                                                              \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"      \
    "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"                     \
    "+GROUP-SECP521R1:%DISABLE_TLS13_COMPAT_MODE"
/* 0-RTT replay cache: slots, probes per lookup, and GnuTLS's window (ms)
 * within which a ClientHello's ticket age must fall. */
#define REPLAY_SLOTS 4096
#define REPLAY_PROBES 8
#define REPLAY_WINDOW_MS 10000

struct quic_creds {
    gnutls_certificate_credentials_t cred;
    atomic_uint refs; /* the store's (while current) + one per session */
};

struct replay_slot {
    uint8_t digest[SHA256_DIGEST_SIZE];
    time_t expires; /* 0 = empty */
};

struct quic_tls_store {
    struct tls_options opts;
    pthread_mutex_t lock; /* guards `current` and the replay cache */
    struct quic_creds *current;
    bool zero_rtt;
    gnutls_datum_t ticket_key;
    gnutls_anti_replay_t anti_replay;
    struct replay_slot *replay; /* REPLAY_SLOTS, with zero_rtt */
};

static void creds_unref(struct quic_creds *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        gnutls_certificate_free_credentials(c->cred);
        mem_free(c);
    }
}

static struct quic_creds *creds_load(const struct tls_options *o, struct error *err)
{
    struct quic_creds *c = mem_calloc(1, sizeof *c);
    if (!c) {
        error_set(err, 500, "out of memory");
        return NULL;
    }
    int rc = gnutls_certificate_allocate_credentials(&c->cred);
    if (rc < 0) {
        mem_free(c);
        error_set(err, 500, "HTTP/3 TLS: %s", gnutls_strerror(rc));
        return NULL;
    }
    rc = gnutls_certificate_set_x509_key_file(c->cred, o->cert_file, o->key_file,
                                              GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        gnutls_certificate_free_credentials(c->cred);
        mem_free(c);
        error_set(err, 500, "HTTP/3 TLS: cannot load certificate %s with key %s: %s", o->cert_file,
                  o->key_file, gnutls_strerror(rc));
        return NULL;
    }
    atomic_init(&c->refs, 1);
    return c;
}

/* GnuTLS's anti-replay store: GNUTLS_E_DB_ENTRY_EXISTS when the
 * ClientHello was seen within its window (the early data is then
 * rejected, the handshake goes on with 1-RTT). A full probe sequence also
 * rejects: when in doubt, no 0-RTT. */
static int replay_add(void *ptr, time_t exp_time, const gnutls_datum_t *key,
                      const gnutls_datum_t *data)
{
    (void)data;
    struct quic_tls_store *s = ptr;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256(key->data, key->size, d);
    uint32_t h;
    memcpy(&h, d, sizeof h);
    time_t now = time(NULL);
    int rc = GNUTLS_E_DB_ENTRY_EXISTS;
    pthread_mutex_lock(&s->lock);
    struct replay_slot *free_slot = NULL;
    for (uint32_t i = 0; i < REPLAY_PROBES; i++) {
        struct replay_slot *slot = &s->replay[(h + i) % REPLAY_SLOTS];
        bool live = slot->expires > now;
        if (live && memcmp(slot->digest, d, sizeof d) == 0) {
            free_slot = NULL;
            break;
        }
        if (!live && !free_slot)
            free_slot = slot;
    }
    if (free_slot) {
        memcpy(free_slot->digest, d, sizeof d);
        free_slot->expires = exp_time > now ? exp_time : now + 1;
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int zero_rtt_init(struct quic_tls_store *s, struct error *err)
{
    s->replay = mem_calloc(REPLAY_SLOTS, sizeof *s->replay);
    if (!s->replay)
        return error_set(err, 500, "out of memory");
    int rc = gnutls_session_ticket_key_generate(&s->ticket_key);
    if (rc < 0)
        return error_set(err, 500, "HTTP/3 TLS: session ticket key: %s", gnutls_strerror(rc));
    rc = gnutls_anti_replay_init(&s->anti_replay);
    if (rc < 0)
        return error_set(err, 500, "HTTP/3 TLS: anti-replay: %s", gnutls_strerror(rc));
    gnutls_anti_replay_set_window(s->anti_replay, REPLAY_WINDOW_MS);
    gnutls_anti_replay_set_add_function(s->anti_replay, replay_add);
    gnutls_anti_replay_set_ptr(s->anti_replay, s);
    return 0;
}

int quic_tls_store_new(const struct tls_options *o, bool zero_rtt, struct quic_tls_store **out,
                       struct error *err)
{
    if (o->client_ca_file)
        return error_set(err, 400,
                         "--http3 does not support client certificates (--tls-client-ca)");
    struct quic_creds *c = creds_load(o, err);
    if (!c)
        return ST_ERROR;
    struct quic_tls_store *s = mem_calloc(1, sizeof *s);
    if (!s) {
        creds_unref(c);
        return error_set(err, 500, "out of memory");
    }
    s->opts = *o;
    s->current = c;
    s->zero_rtt = zero_rtt;
    pthread_mutex_init(&s->lock, NULL);
    if (zero_rtt && zero_rtt_init(s, err) != 0) {
        quic_tls_store_free(s);
        return ST_ERROR;
    }
    *out = s;
    return 0;
}

int quic_tls_store_reload(struct quic_tls_store *s, struct error *err)
{
    struct quic_creds *c = creds_load(&s->opts, err);
    if (!c)
        return ST_ERROR;
    pthread_mutex_lock(&s->lock);
    struct quic_creds *old = s->current;
    s->current = c;
    pthread_mutex_unlock(&s->lock);
    creds_unref(old);
    return 0;
}

void quic_tls_store_free(struct quic_tls_store *s)
{
    if (!s)
        return;
    creds_unref(s->current);
    if (s->anti_replay)
        gnutls_anti_replay_deinit(s->anti_replay);
    if (s->ticket_key.data)
        gnutls_memset(s->ticket_key.data, 0, s->ticket_key.size);
    gnutls_free(s->ticket_key.data);
    mem_free(s->replay);
    pthread_mutex_destroy(&s->lock);
    mem_free(s);
}

int quic_tls_session_init(struct quic_tls_store *s, struct quic_tls_session *out, void *ptr)
{
    static const gnutls_datum_t h3 = {(unsigned char *)"h3", 2};
    gnutls_session_t g;
    unsigned flags = GNUTLS_SERVER | GNUTLS_NO_SIGNAL;
    if (s->zero_rtt)
        flags |= GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA;
    int rc = gnutls_init(&g, flags);
    if (rc < 0) {
        log_warn("http3: gnutls_init: %s", gnutls_strerror(rc));
        return ST_ERROR;
    }
    pthread_mutex_lock(&s->lock);
    struct quic_creds *c = s->current;
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&s->lock);
    const char *where = "priority";
    if ((rc = gnutls_priority_set_direct(g, QUIC_PRIORITY, NULL)) < 0)
        goto fail;
    where = "ngtcp2 binding";
    if ((rc = ngtcp2_crypto_gnutls_configure_server_session(g)) != 0)
        goto fail;
    where = "credentials";
    if ((rc = gnutls_credentials_set(g, GNUTLS_CRD_CERTIFICATE, c->cred)) < 0)
        goto fail;
    where = "ALPN";
    if ((rc = gnutls_alpn_set_protocols(g, &h3, 1, GNUTLS_ALPN_MANDATORY)) < 0)
        goto fail;
    if (s->zero_rtt) {
        where = "session tickets";
        if ((rc = gnutls_session_ticket_enable_server(g, &s->ticket_key)) < 0)
            goto fail;
        gnutls_anti_replay_enable(g, s->anti_replay);
        gnutls_record_set_max_early_data_size(g, UINT32_MAX);
    }
    gnutls_session_set_ptr(g, ptr);
    out->gnutls = g;
    out->creds = c;
    return 0;
fail:
    log_warn("http3: TLS session (%s): %s", where, rc < 0 ? gnutls_strerror(rc) : "failed");
    gnutls_deinit(g);
    creds_unref(c);
    return ST_ERROR;
}

void quic_tls_session_free(struct quic_tls_session *ts)
{
    if (!ts->gnutls)
        return;
    gnutls_deinit(ts->gnutls);
    creds_unref(ts->creds);
    ts->gnutls = NULL;
    ts->creds = NULL;
}

bool quic_tls_session_early_accepted(const struct quic_tls_session *ts)
{
    return ts->gnutls && (gnutls_session_get_flags(ts->gnutls) & GNUTLS_SFLAGS_EARLY_DATA);
}
