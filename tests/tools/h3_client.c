/*
 * h3_client: a small HTTP/3 test client for inferd's integration tests
 * (tests/integration/test_http3_0rtt.py), independent of the server's code:
 * ngtcp2 0.12 + ngtcp2_crypto_gnutls + nghttp3 0.8 + GnuTLS from Debian.
 * Built as a test tool only (not installed, not part of the inferd binary).
 *
 *   h3_client [options] PORT PATH
 *     --method M         request method (default GET, POST with --data)
 *     --data S           request body (application/json); @FILE reads it
 *                        from FILE (up to 64 MiB)
 *     --ca FILE          verify the server certificate against FILE for
 *                        127.0.0.1 (default: no verification)
 *     --session FILE     TLS session ticket + QUIC transport parameters:
 *                        when FILE exists the connection resumes and sends
 *                        the requests as 0-RTT early data; a ticket received
 *                        on this connection is (re)written to FILE
 *     --parallel N       N identical requests on the one connection, opened
 *                        as the server's MAX_STREAMS allows (1..1000)
 *     --hold-ms MS       after the answers, keep the idle connection open up
 *                        to MS and report whether the idle timeout closed it
 *     --timeout-ms MS    give up after MS (default 20000)
 *     --record FILE      write the datagrams sent before the handshake
 *                        completed (the first flight: Initial and 0-RTT)
 *                        to FILE, each after its 2-byte length
 *     --replay FILE      no connection: send FILE's datagrams (an
 *                        attacker's replay of a recorded first flight) from
 *                        a new socket, read for 1 s, print "replayed: N"
 *
 * Output (stdout): "key: value" lines: early-data (none: no session to
 * resume; accepted: GnuTLS says the server took the early data; rejected:
 * the requests were sent again after the handshake), early-request-bytes
 * (request stream bytes sent before the handshake completed, i.e. as
 * 0-RTT), peer-max-streams-bidi (the server's initial MAX_STREAMS),
 * max-open-streams (most requests awaiting their responses at once: a
 * stream counts from its request until its response ends, not until QUIC
 * closes it, which waits for acknowledgements the server's new stream
 * credit may overtake), one "response:
 * STREAM STATUS BODYLEN" per request, "closed: idle after MS ms" (the idle
 * timeout, counted from the last answer), "closed: held" (--hold-ms ran
 * out) or "closed: by peer"; then, for a single request, "status", one
 * "header: NAME: VALUE" per response header, a blank line and the body.
 * Exit 0 when every request was answered, 1 on failure (reason on stderr),
 * 2 on usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QUIC_PRIORITY                                                                              \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"      \
    "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"                     \
    "+GROUP-SECP521R1:%DISABLE_TLS13_COMPAT_MODE"
#define MAX_REQUESTS 1000
#define MAX_BODY (64u << 20) /* response bytes kept per request */
#define MAX_HEADERS 64
#define MAX_SESSION_FILE 16384

struct req {
    int64_t stream_id;
    int status;
    bool done;
    bool awaiting; /* sent, its response not complete (counted in open_now) */
    char *body;
    size_t body_len;
    char *headers[MAX_HEADERS];
    size_t nheaders;
};

struct client {
    int fd;
    struct sockaddr_in local, remote;
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    const char *method, *path, *session_file;
    char *data;
    size_t data_len;
    char authority[32];
    struct req reqs[MAX_REQUESTS];
    size_t nreqs, next_req, ndone;
    size_t open_now, open_max;
    bool early_attempted, early_rejected, resubmit;
    bool ticket_seen;
    size_t early_request_bytes; /* request stream bytes sent before the handshake completed */
    FILE *record;
    uint8_t tx[65536], rx[65536];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fill_random(uint8_t *p, size_t n)
{
    if (gnutls_rnd(GNUTLS_RND_RANDOM, p, n) != 0) {
        fprintf(stderr, "h3_client: gnutls_rnd failed\n");
        exit(1);
    }
}

static void path_of(struct client *c, ngtcp2_path *p)
{
    p->local.addr = (ngtcp2_sockaddr *)&c->local;
    p->local.addrlen = sizeof c->local;
    p->remote.addr = (ngtcp2_sockaddr *)&c->remote;
    p->remote.addrlen = sizeof c->remote;
    p->user_data = NULL;
}

/* ---- session file: "ticket HEX" and one "NAME VALUE" line per transport
 * parameter the server's early-data limits come from ---- */

struct saved_params {
    const char *name;
    size_t offset;
};

static const struct saved_params saved[] = {
    {"initial_max_streams_bidi", offsetof(ngtcp2_transport_params, initial_max_streams_bidi)},
    {"initial_max_streams_uni", offsetof(ngtcp2_transport_params, initial_max_streams_uni)},
    {"initial_max_stream_data_bidi_local",
     offsetof(ngtcp2_transport_params, initial_max_stream_data_bidi_local)},
    {"initial_max_stream_data_bidi_remote",
     offsetof(ngtcp2_transport_params, initial_max_stream_data_bidi_remote)},
    {"initial_max_stream_data_uni", offsetof(ngtcp2_transport_params, initial_max_stream_data_uni)},
    {"initial_max_data", offsetof(ngtcp2_transport_params, initial_max_data)},
    {"active_connection_id_limit", offsetof(ngtcp2_transport_params, active_connection_id_limit)},
};

static int session_save(struct client *c)
{
    gnutls_datum_t d = {NULL, 0};
    const ngtcp2_transport_params *p = ngtcp2_conn_get_remote_transport_params(c->q);
    if (!p || gnutls_session_get_data2(c->tls, &d) != 0)
        return -1;
    FILE *f = fopen(c->session_file, "w");
    if (!f) {
        gnutls_free(d.data);
        return -1;
    }
    fputs("ticket ", f);
    for (unsigned i = 0; i < d.size; i++)
        fprintf(f, "%02x", d.data[i]);
    fputc('\n', f);
    for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
        fprintf(f, "%s %llu\n", saved[i].name,
                (unsigned long long)*(const uint64_t *)((const char *)p + saved[i].offset));
    gnutls_free(d.data);
    return fclose(f) == 0 ? 0 : -1;
}

/* 1 when the file was loaded (ticket set on the TLS session, parameters
 * given to ngtcp2), 0 when it does not exist, -1 when it is malformed. */
static int session_load(struct client *c)
{
    FILE *f = fopen(c->session_file, "r");
    if (!f)
        return errno == ENOENT ? 0 : -1;
    static char line[MAX_SESSION_FILE];
    static uint8_t ticket[MAX_SESSION_FILE / 2];
    size_t ticket_len = 0;
    ngtcp2_transport_params p;
    ngtcp2_transport_params_default(&p);
    size_t nparams = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "ticket ", 7) == 0) {
            const char *hex = line + 7;
            for (ticket_len = 0; hex[2 * ticket_len] && hex[2 * ticket_len + 1]; ticket_len++) {
                unsigned b;
                if (sscanf(hex + 2 * ticket_len, "%2x", &b) != 1)
                    break;
                ticket[ticket_len] = (uint8_t)b;
            }
            continue;
        }
        for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++) {
            size_t n = strlen(saved[i].name);
            if (strncmp(line, saved[i].name, n) == 0 && line[n] == ' ') {
                *(uint64_t *)((char *)&p + saved[i].offset) = strtoull(line + n + 1, NULL, 10);
                nparams++;
            }
        }
    }
    fclose(f);
    if (!ticket_len || nparams != sizeof saved / sizeof saved[0])
        return -1;
    gnutls_datum_t d = {ticket, (unsigned)ticket_len};
    if (gnutls_session_set_data(c->tls, d.data, d.size) != 0)
        return -1;
    ngtcp2_conn_set_early_remote_transport_params(c->q, &p);
    return 1;
}

static int ticket_hook(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                       const gnutls_datum_t *msg)
{
    (void)htype, (void)when, (void)incoming, (void)msg;
    struct client *c = ((ngtcp2_crypto_conn_ref *)gnutls_session_get_ptr(s))->user_data;
    c->ticket_seen = true;
    return 0;
}

/* ---- HTTP/3 ---- */

static int h_recv_header(nghttp3_conn *h, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                         nghttp3_rcbuf *value, uint8_t flags, void *user, void *sreq)
{
    (void)h, (void)sid, (void)token, (void)flags, (void)user;
    struct req *r = sreq;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    if (n.len == 7 && memcmp(n.base, ":status", 7) == 0) {
        r->status = atoi((const char *)v.base);
        return 0;
    }
    if (r->nheaders == MAX_HEADERS)
        return 0;
    char *line = malloc(n.len + v.len + 3);
    if (!line)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    sprintf(line, "%.*s: %.*s", (int)n.len, (const char *)n.base, (int)v.len, (const char *)v.base);
    r->headers[r->nheaders++] = line;
    return 0;
}

static int h_recv_data(nghttp3_conn *h, int64_t sid, const uint8_t *data, size_t len, void *user,
                       void *sreq)
{
    (void)h;
    struct client *c = user;
    struct req *r = sreq;
    if (r->body_len + len > MAX_BODY)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    char *b = realloc(r->body, r->body_len + len + 1);
    if (!b)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    memcpy(b + r->body_len, data, len);
    r->body = b;
    r->body_len += len;
    ngtcp2_conn_extend_max_stream_offset(c->q, sid, len);
    ngtcp2_conn_extend_max_offset(c->q, len);
    return 0;
}

static int h_deferred_consume(nghttp3_conn *h, int64_t sid, size_t n, void *user, void *sreq)
{
    (void)h, (void)sreq;
    struct client *c = user;
    ngtcp2_conn_extend_max_stream_offset(c->q, sid, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
    return 0;
}

static int h_end_stream(nghttp3_conn *h, int64_t sid, void *user, void *sreq)
{
    (void)h, (void)sid;
    struct client *c = user;
    struct req *r = sreq;
    if (!r->done) {
        r->done = true;
        c->ndone++;
    }
    if (r->awaiting) {
        r->awaiting = false;
        c->open_now--;
    }
    return 0;
}

static int h_stream_close(nghttp3_conn *h, int64_t sid, uint64_t code, void *user, void *sreq)
{
    (void)h, (void)sid, (void)code;
    struct client *c = user;
    struct req *r = sreq;
    if (r && r->awaiting) { /* reset before its response ended */
        r->awaiting = false;
        c->open_now--;
    }
    return 0;
}

static int h_acked(nghttp3_conn *h, int64_t sid, uint64_t n, void *user, void *sreq)
{
    (void)h, (void)sid, (void)n, (void)user, (void)sreq;
    return 0;
}

static nghttp3_ssize read_body(nghttp3_conn *h, int64_t sid, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *user, void *sreq)
{
    (void)h, (void)sid, (void)veccnt, (void)sreq;
    struct client *c = user;
    vec[0].base = (uint8_t *)c->data;
    vec[0].len = c->data_len;
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 1;
}

static int http_setup(struct client *c)
{
    static const nghttp3_callbacks cbs = {
        .acked_stream_data = h_acked,
        .stream_close = h_stream_close,
        .recv_data = h_recv_data,
        .deferred_consume = h_deferred_consume,
        .recv_header = h_recv_header,
        .end_stream = h_end_stream,
    };
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    if (nghttp3_conn_client_new(&c->h, &cbs, &settings, NULL, c) != 0)
        return -1;
    int64_t ctrl, enc, dec;
    if (ngtcp2_conn_open_uni_stream(c->q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(c->h, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h, enc, dec) != 0)
        return -1;
    return 0;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP3_NV_FLAG_NONE                 \
    }

/* Opens as many request streams as the server's MAX_STREAMS allows. */
static int submit_requests(struct client *c)
{
    while (c->next_req < c->nreqs) {
        struct req *r = &c->reqs[c->next_req];
        int rv = ngtcp2_conn_open_bidi_stream(c->q, &r->stream_id, NULL);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED)
            return 0;
        if (rv != 0)
            return -1;
        nghttp3_nv nva[] = {
            NV(":method", c->method),       NV(":scheme", "https"),
            NV(":authority", c->authority), NV(":path", c->path),
            NV("user-agent", "h3_client"),  NV("content-type", "application/json"),
        };
        nghttp3_data_reader dr = {read_body};
        size_t nv = c->data ? 6 : 5;
        if (nghttp3_conn_submit_request(c->h, r->stream_id, nva, nv, c->data ? &dr : NULL, r) != 0)
            return -1;
        c->next_req++;
        r->awaiting = true;
        if (++c->open_now > c->open_max)
            c->open_max = c->open_now;
    }
    return 0;
}

/* Early data rejected: ngtcp2 dropped every stream; start HTTP/3 again and
 * send the requests as 1-RTT. */
static int resubmit(struct client *c)
{
    nghttp3_conn_del(c->h);
    c->h = NULL;
    for (size_t i = 0; i < c->nreqs; i++) {
        struct req *r = &c->reqs[i];
        for (size_t j = 0; j < r->nheaders; j++)
            free(r->headers[j]);
        free(r->body);
        memset(r, 0, sizeof *r);
    }
    c->next_req = c->ndone = c->open_now = c->open_max = 0;
    c->resubmit = false;
    return http_setup(c) == 0 && submit_requests(c) == 0 ? 0 : -1;
}

/* ---- QUIC ---- */

static void q_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    fill_random(dest, len);
}

static int q_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
    (void)q, (void)user;
    fill_random(cid->data, cidlen);
    cid->datalen = cidlen;
    fill_random(token, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
}

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t offset,
                              const uint8_t *data, size_t len, void *user, void *sreq)
{
    (void)offset, (void)sreq;
    struct client *c = user;
    if (!c->h)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    nghttp3_ssize n =
        nghttp3_conn_read_stream(c->h, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
    if (n < 0) {
        fprintf(stderr, "h3_client: nghttp3_conn_read_stream: %s\n", nghttp3_strerror((int)n));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    ngtcp2_conn_extend_max_stream_offset(q, sid, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(q, (uint64_t)n);
    return 0;
}

static int q_acked(ngtcp2_conn *q, int64_t sid, uint64_t offset, uint64_t len, void *user,
                   void *sreq)
{
    (void)q, (void)offset, (void)sreq;
    struct client *c = user;
    return c->h && nghttp3_conn_add_ack_offset(c->h, sid, len) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE
                                                                    : 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t code, void *user,
                          void *sreq)
{
    (void)q, (void)sreq;
    struct client *c = user;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        code = NGHTTP3_H3_NO_ERROR;
    if (!c->h)
        return 0;
    int rv = nghttp3_conn_close_stream(c->h, sid, code);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t sid, uint64_t final_size, uint64_t code,
                          void *user, void *sreq)
{
    (void)q, (void)final_size, (void)code, (void)sreq;
    struct client *c = user;
    return c->h && nghttp3_conn_shutdown_stream_read(c->h, sid) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE
                                                                     : 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t sid, uint64_t max, void *user,
                                    void *sreq)
{
    (void)q, (void)max, (void)sreq;
    struct client *c = user;
    return c->h && nghttp3_conn_unblock_stream(c->h, sid) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int q_handshake_completed(ngtcp2_conn *q, void *user)
{
    struct client *c = user;
    bool accepted = gnutls_session_get_flags(c->tls) & GNUTLS_SFLAGS_EARLY_DATA;
    /* GnuTLS reports the server's refusal only now: tell ngtcp2 (a no-op
     * when it already knows). */
    if (c->early_attempted && !accepted && !ngtcp2_conn_get_early_data_rejected(q))
        return ngtcp2_conn_early_data_rejected(q) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_early_data_rejected(ngtcp2_conn *q, void *user)
{
    (void)q;
    struct client *c = user;
    c->early_rejected = true;
    c->resubmit = true;
    return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct client *c = ref->user_data;
    return c->q;
}

static const ngtcp2_callbacks quic_callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked,
    .stream_close = q_stream_close,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = q_rand,
    .get_new_connection_id = q_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = q_stream_reset,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .early_data_rejected = q_early_data_rejected,
};

static int tls_setup(struct client *c, const char *ca)
{
    static const gnutls_datum_t h3 = {(unsigned char *)"h3", 2};
    if (gnutls_certificate_allocate_credentials(&c->cred) != 0 ||
        gnutls_init(&c->tls,
                    GNUTLS_CLIENT | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA) != 0 ||
        gnutls_priority_set_direct(c->tls, QUIC_PRIORITY, NULL) != 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) != 0 ||
        gnutls_alpn_set_protocols(c->tls, &h3, 1, GNUTLS_ALPN_MANDATORY) != 0)
        return -1;
    if (ca) {
        if (gnutls_certificate_set_x509_trust_file(c->cred, ca, GNUTLS_X509_FMT_PEM) <= 0)
            return -1;
        gnutls_session_set_verify_cert(c->tls, "127.0.0.1", 0);
    }
    gnutls_handshake_set_hook_function(c->tls, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET,
                                       GNUTLS_HOOK_POST, ticket_hook);
    gnutls_session_set_ptr(c->tls, &c->ref);
    return 0;
}

static int quic_setup(struct client *c, int port)
{
    c->fd = socket(AF_INET, SOCK_DGRAM, 0);
    c->remote.sin_family = AF_INET;
    c->remote.sin_port = htons((uint16_t)port);
    c->remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof c->local;
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&c->remote, sizeof c->remote) != 0 ||
        getsockname(c->fd, (struct sockaddr *)&c->local, &len) != 0)
        return -1;
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    ngtcp2_cid dcid, scid;
    dcid.datalen = 18;
    scid.datalen = 16;
    fill_random(dcid.data, dcid.datalen);
    fill_random(scid.data, scid.datalen);
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now_ns();
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_streams_uni = 3;
    params.initial_max_stream_data_bidi_local = 16u << 20;
    params.initial_max_stream_data_uni = 1u << 20;
    params.initial_max_data = 64u << 20;
    params.max_idle_timeout = 60 * NGTCP2_SECONDS;
    ngtcp2_path path;
    path_of(c, &path);
    c->ref = (ngtcp2_crypto_conn_ref){get_conn, c};
    if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &quic_callbacks,
                               &settings, &params, NULL, c) != 0)
        return -1;
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

/* ngtcp2 took ndatalen bytes of stream sid (-1: none): tells nghttp3 and
 * counts the request bytes sent as 0-RTT. */
static int stream_written(struct client *c, int64_t sid, ngtcp2_ssize ndatalen)
{
    if (ndatalen < 0)
        return 0;
    if (sid % 4 == 0 && !ngtcp2_conn_get_handshake_completed(c->q))
        c->early_request_bytes += (size_t)ndatalen;
    return nghttp3_conn_add_write_offset(c->h, sid, (size_t)ndatalen);
}

/* Writes every packet ngtcp2 and nghttp3 have; 0, or a negative ngtcp2
 * error. */
static int write_packets(struct client *c)
{
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    uint64_t ts = now_ns();
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_vec vec[16];
        nghttp3_ssize nvec = 0;
        if (c->h && ngtcp2_conn_get_max_data_left(c->q)) {
            nvec = nghttp3_conn_writev_stream(c->h, &sid, &fin, vec, 16);
            if (nvec < 0)
                return NGTCP2_ERR_INTERNAL;
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndatalen;
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, c->tx, sizeof c->tx, &ndatalen, flags,
                                      sid, (const ngtcp2_vec *)vec, (size_t)nvec, ts);
        if (n < 0) {
            if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                nghttp3_conn_block_stream(c->h, sid);
                continue;
            }
            if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
                nghttp3_conn_shutdown_stream_write(c->h, sid);
                continue;
            }
            if (n == NGTCP2_ERR_WRITE_MORE) {
                if (stream_written(c, sid, ndatalen) != 0)
                    return NGTCP2_ERR_INTERNAL;
                continue;
            }
            return (int)n;
        }
        if (stream_written(c, sid, ndatalen) != 0)
            return NGTCP2_ERR_INTERNAL;
        if (n == 0)
            break;
        if (send(c->fd, c->tx, (size_t)n, 0) < 0 && errno != EAGAIN)
            return NGTCP2_ERR_INTERNAL;
        if (c->record && !ngtcp2_conn_get_handshake_completed(c->q)) {
            uint8_t len[2] = {(uint8_t)(n >> 8), (uint8_t)n};
            fwrite(len, 1, 2, c->record);
            fwrite(c->tx, 1, (size_t)n, c->record);
        }
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, ts);
    return 0;
}

/* 0; 1 when the peer closed; a negative ngtcp2 error. */
static int read_packets(struct client *c)
{
    ngtcp2_path path;
    path_of(c, &path);
    for (;;) {
        ssize_t n = recv(c->fd, c->rx, sizeof c->rx, 0);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : NGTCP2_ERR_INTERNAL;
        ngtcp2_pkt_info pi = {0};
        int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, c->rx, (size_t)n, now_ns());
        if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING)
            return 1;
        if (rv != 0)
            return rv;
    }
}

static void send_close(struct client *c)
{
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->tx, sizeof c->tx,
                                                        &ccerr, now_ns());
    if (n > 0)
        send(c->fd, c->tx, (size_t)n, 0);
}

static void print_results(struct client *c)
{
    bool accepted = gnutls_session_get_flags(c->tls) & GNUTLS_SFLAGS_EARLY_DATA;
    const char *early = !c->early_attempted ? "none"
                        : c->early_rejected ? "rejected"
                        : accepted          ? "accepted"
                                            : "unknown";
    const ngtcp2_transport_params *p = ngtcp2_conn_get_remote_transport_params(c->q);
    printf("early-data: %s\n", early);
    printf("early-request-bytes: %zu\n", c->early_request_bytes);
    printf("peer-max-streams-bidi: %llu\n",
           p ? (unsigned long long)p->initial_max_streams_bidi : 0);
    printf("max-open-streams: %zu\n", c->open_max);
    for (size_t i = 0; i < c->nreqs; i++)
        printf("response: %lld %d %zu\n", (long long)c->reqs[i].stream_id, c->reqs[i].status,
               c->reqs[i].body_len);
}

/* --replay: the recorded datagrams, sent as they were. */
static int replay(const char *file, int port)
{
    FILE *f = fopen(file, "rb");
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!f || fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        fprintf(stderr, "h3_client: cannot replay %s\n", file);
        return 1;
    }
    static uint8_t pkt[65536];
    uint8_t len[2];
    int n = 0;
    while (fread(len, 1, 2, f) == 2) {
        size_t size = (size_t)len[0] << 8 | len[1];
        if (fread(pkt, 1, size, f) != size || send(fd, pkt, size, 0) < 0)
            break;
        n++;
    }
    fclose(f);
    uint64_t until = now_ns() + 1000000000u;
    for (uint64_t now = now_ns(); now < until; now = now_ns()) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)((until - now) / 1000000u) + 1) > 0 &&
            recv(fd, pkt, sizeof pkt, 0) < 0)
            break;
    }
    close(fd);
    printf("replayed: %d\n", n);
    return n > 0 ? 0 : 1;
}

/* --data: the string, or @FILE's bytes. */
static char *load_data(const char *arg, size_t *len)
{
    if (arg[0] != '@') {
        *len = strlen(arg);
        return strdup(arg);
    }
    FILE *f = fopen(arg + 1, "rb");
    char *d = f ? malloc(MAX_BODY) : NULL;
    if (!d) {
        if (f)
            fclose(f);
        return NULL;
    }
    *len = fread(d, 1, MAX_BODY, f);
    bool whole = feof(f) && !ferror(f);
    fclose(f);
    if (!whole) {
        free(d);
        return NULL;
    }
    return d;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: h3_client [--method M] [--data S] [--ca FILE] [--session FILE] "
            "[--parallel N] [--hold-ms MS] [--timeout-ms MS] [--record FILE] [--replay FILE] "
            "PORT PATH\n");
    return 2;
}

int main(int argc, char **argv)
{
    static struct client cl;
    struct client *c = &cl;
    const char *ca = NULL, *record = NULL, *replay_file = NULL;
    long parallel = 1, hold_ms = 0, timeout_ms = 20000;
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "--method") == 0)
            c->method = v;
        else if (strcmp(o, "--data") == 0) {
            free(c->data);
            if (!(c->data = load_data(v, &c->data_len))) {
                fprintf(stderr, "h3_client: cannot read %s\n", v);
                return 1;
            }
        } else if (strcmp(o, "--ca") == 0)
            ca = v;
        else if (strcmp(o, "--session") == 0)
            c->session_file = v;
        else if (strcmp(o, "--parallel") == 0)
            parallel = strtol(v, NULL, 10);
        else if (strcmp(o, "--hold-ms") == 0)
            hold_ms = strtol(v, NULL, 10);
        else if (strcmp(o, "--timeout-ms") == 0)
            timeout_ms = strtol(v, NULL, 10);
        else if (strcmp(o, "--record") == 0)
            record = v;
        else if (strcmp(o, "--replay") == 0)
            replay_file = v;
        else
            return usage();
    }
    if (argc - i != 2 || parallel < 1 || parallel > MAX_REQUESTS || hold_ms < 0 || timeout_ms < 1)
        return usage();
    int port = atoi(argv[i]);
    if (replay_file)
        return replay(replay_file, port);
    if (record && !(c->record = fopen(record, "wb"))) {
        fprintf(stderr, "h3_client: cannot write %s\n", record);
        return 1;
    }
    c->path = argv[i + 1];
    if (!c->method)
        c->method = c->data ? "POST" : "GET";
    c->nreqs = (size_t)parallel;
    snprintf(c->authority, sizeof c->authority, "127.0.0.1:%d", port);

    if (tls_setup(c, ca) != 0 || quic_setup(c, port) != 0) {
        fprintf(stderr, "h3_client: setup failed\n");
        return 1;
    }
    if (c->session_file) {
        int rv = session_load(c);
        if (rv < 0) {
            fprintf(stderr, "h3_client: bad session file %s\n", c->session_file);
            return 1;
        }
        /* Resumed: HTTP/3 and the requests go out in the first flight. */
        if (rv == 1) {
            c->early_attempted = true;
            if (http_setup(c) != 0 || submit_requests(c) != 0) {
                fprintf(stderr, "h3_client: cannot send early data\n");
                return 1;
            }
        }
    }

    uint64_t start = now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000u;
    uint64_t answered_at = 0;
    const char *failure = NULL, *closed = NULL;
    for (;;) {
        int rv = write_packets(c);
        if (rv != 0) {
            failure = ngtcp2_strerror(rv);
            break;
        }
        uint64_t now = now_ns();
        if (c->ndone == c->nreqs && !answered_at)
            answered_at = now;
        if (answered_at && now >= answered_at + (uint64_t)hold_ms * 1000000u) {
            closed = "held";
            break;
        }
        if (now >= deadline) {
            failure = "timed out";
            break;
        }
        uint64_t expiry = ngtcp2_conn_get_expiry(c->q);
        uint64_t wake = expiry < deadline ? expiry : deadline;
        int wait_ms = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        poll(&pfd, 1, wait_ms);
        rv = read_packets(c);
        if (rv == 1) {
            closed = "by peer";
            break;
        }
        if (rv < 0) {
            failure = ngtcp2_strerror(rv);
            break;
        }
        if (ngtcp2_conn_get_expiry(c->q) <= now_ns()) {
            rv = ngtcp2_conn_handle_expiry(c->q, now_ns());
            if (rv == NGTCP2_ERR_IDLE_CLOSE) {
                closed = "idle";
                break;
            }
            if (rv != 0) {
                failure = ngtcp2_strerror(rv);
                break;
            }
        }
        if (c->resubmit && ngtcp2_conn_get_handshake_completed(c->q) && resubmit(c) != 0) {
            failure = "cannot send the requests again after early data was rejected";
            break;
        }
        if (!c->h && ngtcp2_conn_get_handshake_completed(c->q) &&
            (http_setup(c) != 0 || submit_requests(c) != 0)) {
            failure = "cannot start HTTP/3";
            break;
        }
        if (c->h && submit_requests(c) != 0) {
            failure = "cannot open a request stream";
            break;
        }
    }
    if (c->session_file && c->ticket_seen && session_save(c) != 0)
        fprintf(stderr, "h3_client: cannot write %s\n", c->session_file);
    if (!failure && (!closed || strcmp(closed, "held") == 0))
        send_close(c);
    print_results(c);
    if (closed && strcmp(closed, "idle") == 0)
        printf("closed: idle after %llu ms\n",
               (unsigned long long)((now_ns() - (answered_at ? answered_at : start)) / 1000000u));
    else if (closed)
        printf("closed: %s\n", closed);
    if (c->nreqs == 1 && c->ndone == 1) {
        struct req *r = &c->reqs[0];
        printf("status: %d\n", r->status);
        for (size_t j = 0; j < r->nheaders; j++)
            printf("header: %s\n", r->headers[j]);
        printf("\n");
        if (r->body_len)
            fwrite(r->body, 1, r->body_len, stdout); /* body is NULL when empty */
    }
    fflush(stdout);
    for (size_t j = 0; j < c->nreqs; j++) {
        for (size_t k = 0; k < c->reqs[j].nheaders; k++)
            free(c->reqs[j].headers[k]);
        free(c->reqs[j].body);
    }
    nghttp3_conn_del(c->h);
    ngtcp2_conn_del(c->q);
    gnutls_deinit(c->tls);
    gnutls_certificate_free_credentials(c->cred);
    close(c->fd);
    free(c->data);
    if (c->record)
        fclose(c->record);
    if (failure || c->ndone != c->nreqs) {
        fprintf(stderr, "h3_client: %s (%zu of %zu answered)\n", failure ? failure : "closed",
                c->ndone, c->nreqs);
        return 1;
    }
    return 0;
}
