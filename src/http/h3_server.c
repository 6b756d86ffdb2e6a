#include "http/h3_conn.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "net/drain.h"
#include "net/udp.h"

/* Flow control: the windows a client starts with, and how far ngtcp2 may
 * grow them as the bytes are taken (as HTTP/2's: a big tensor is not
 * throttled by round trips). */
#define H3_STREAM_WINDOW (1u << 20)
#define H3_CONN_WINDOW (4u << 20)
#define H3_MAX_STREAM_WINDOW (16u << 20)
#define H3_MAX_CONN_WINDOW (64u << 20)
/* Our connection IDs. */
#define H3_SCID_LEN 18
/* Datagrams read per wakeup before yielding. */
#define H3_READS_PER_WAKEUP 64
/* Packets written per connection per turn before yielding to the loop. */
#define H3_WRITES_PER_TURN 64
/* The QUIC handshake must complete within this. */
#define H3_HANDSHAKE_TIMEOUT_MS 10000
/* Vectors handed from nghttp3 to ngtcp2 per packet. */
#define H3_VECS 16

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- connections ---- */

static void path_of(ngtcp2_path *p, struct udp_addr *local, struct udp_addr *remote)
{
    p->local.addr = (ngtcp2_sockaddr *)&local->ss;
    p->local.addrlen = local->len;
    p->remote.addr = (ngtcp2_sockaddr *)&remote->ss;
    p->remote.addrlen = remote->len;
    p->user_data = NULL;
}

static void send_to(struct h3_server *s, const ngtcp2_path *path, const uint8_t *data, size_t n)
{
    struct udp_addr remote = {.len = path->remote.addrlen}, local = {.len = path->local.addrlen};
    memcpy(&remote.ss, path->remote.addr, path->remote.addrlen);
    memcpy(&local.ss, path->local.addr, path->local.addrlen);
    /* A full socket buffer drops the packet: QUIC's loss recovery sends
     * its content again, as for a packet lost on the way. */
    int rc = udp_send(s->sock.fd, data, n, &remote, &local);
    if (rc != 0 && rc != -EAGAIN)
        log_debug("http3: sendmsg: %s", strerror(-rc));
}

static void maybe_drained(struct h3_server *s)
{
    drain_notify_if_done(s->draining, s->nconns, &s->on_drained, s->drained_arg);
}

static void conn_free(struct h3_conn *c)
{
    struct h3_server *s = c->server;
    loop_del(s->loop, &c->timer);
    while (c->streams)
        h3_stream_gone(c, c->streams);
    h3_cid_remove_all(c);
    if (c->h)
        nghttp3_conn_del(c->h);
    if (c->q)
        ngtcp2_conn_del(c->q);
    quic_tls_session_free(&c->tls);
    buf_free(&c->close_pkt);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    atomic_fetch_sub(s->open_connections, 1);
    mem_free(c);
    maybe_drained(s);
}

/* Frees a connection marked dead; called only at the top of the server's
 * own entry points (never inside an ngtcp2 or nghttp3 callback). */
static void conn_reap(struct h3_conn *c)
{
    if (c->dead)
        conn_free(c);
}

static void arm_timer(struct h3_conn *c, uint64_t due_ns)
{
    loop_defer_at(c->server->loop, &c->timer, due_ns);
}

/* Sends CONNECTION_CLOSE with c->ccerr and enters the closing period. */
static void conn_close(struct h3_conn *c)
{
    if (c->phase != PHASE_OPEN)
        return;
    struct h3_server *s = c->server;
    uint64_t now = clock_now_ns();
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, s->tx, sizeof s->tx,
                                                        &c->ccerr, now);
    if (n <= 0) {
        c->dead = true;
        return;
    }
    buf_reset(&c->close_pkt);
    buf_append(&c->close_pkt, s->tx, (size_t)n);
    send_to(s, &ps.path, s->tx, (size_t)n);
    c->phase = PHASE_CLOSING;
    c->close_deadline_ns = now + 3 * ngtcp2_conn_get_pto(c->q);
    arm_timer(c, c->close_deadline_ns);
}

/* A library error of ngtcp2 on this connection. */
static void conn_fail_liberr(struct h3_conn *c, int rv)
{
    if (rv == NGTCP2_ERR_DRAINING) {
        c->phase = PHASE_DRAINING;
        c->close_deadline_ns = clock_now_ns() + 3 * ngtcp2_conn_get_pto(c->q);
        arm_timer(c, c->close_deadline_ns);
        return;
    }
    if (rv == NGTCP2_ERR_DROP_CONN || rv == NGTCP2_ERR_IDLE_CLOSE) {
        c->dead = true;
        return;
    }
    if (c->ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT &&
        c->ccerr.error_code == 0) {
        if (rv == NGTCP2_ERR_CRYPTO)
            ngtcp2_connection_close_error_set_transport_error_tls_alert(
                &c->ccerr, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
        else
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->ccerr, rv, NULL, 0);
    }
    log_debug("http3: closing connection: %s", ngtcp2_strerror(rv));
    conn_close(c);
}

/* Writes what ngtcp2 and nghttp3 have to send, up to H3_WRITES_PER_TURN
 * packets (then the loop calls again), and arms the expiry timer. */
static void conn_write(struct h3_conn *c)
{
    if (c->phase != PHASE_OPEN || c->dead)
        return;
    struct h3_server *s = c->server;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    uint64_t now = clock_now_ns();
    for (int npkts = 0;; npkts++) {
        if (npkts == H3_WRITES_PER_TURN) {
            h3_conn_want_write(c);
            break;
        }
        int64_t id = -1;
        int fin = 0;
        nghttp3_vec vec[H3_VECS];
        nghttp3_ssize nvec = 0;
        if (c->h && ngtcp2_conn_get_max_data_left(c->q)) {
            nvec = nghttp3_conn_writev_stream(c->h, &id, &fin, vec, H3_VECS);
            if (nvec < 0) {
                ngtcp2_connection_close_error_set_application_error(
                    &c->ccerr, nghttp3_err_infer_quic_app_error_code((int)nvec), NULL, 0);
                conn_close(c);
                return;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (fin)
            flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
        ngtcp2_ssize ndatalen;
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, s->tx, sizeof s->tx, &ndatalen, flags,
                                      id, (const ngtcp2_vec *)vec, (size_t)nvec, now);
        if (n < 0) {
            switch (n) {
            case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                nghttp3_conn_block_stream(c->h, id);
                continue;
            case NGTCP2_ERR_STREAM_SHUT_WR:
                nghttp3_conn_shutdown_stream_write(c->h, id);
                continue;
            case NGTCP2_ERR_WRITE_MORE:
                if (nghttp3_conn_add_write_offset(c->h, id, (size_t)ndatalen) != 0) {
                    conn_fail_liberr(c, NGTCP2_ERR_INTERNAL);
                    return;
                }
                continue;
            default:
                conn_fail_liberr(c, (int)n);
                return;
            }
        }
        if (ndatalen >= 0 && nghttp3_conn_add_write_offset(c->h, id, (size_t)ndatalen) != 0) {
            conn_fail_liberr(c, NGTCP2_ERR_INTERNAL);
            return;
        }
        if (n == 0)
            break;
        send_to(s, &ps.path, s->tx, (size_t)n);
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, now);
    if (s->draining && c->h && !c->goaway_sent) {
        nghttp3_conn_submit_shutdown_notice(c->h);
        c->goaway_sent = true;
        h3_conn_want_write(c);
    }
    if (s->draining && c->nstreams == 0 && c->goaway_sent) {
        ngtcp2_connection_close_error_set_application_error(&c->ccerr, NGHTTP3_H3_NO_ERROR, NULL,
                                                            0);
        conn_close(c);
        return;
    }
    ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(c->q);
    if (expiry != UINT64_MAX)
        arm_timer(c, expiry);
}

/* The connection's timer: closing/draining deadlines, ngtcp2's expiry
 * (loss detection, ACK delay, idle timeout), deferred writes. */
static void conn_on_timer(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct h3_conn *c = container_of(w, struct h3_conn, timer);
    uint64_t now = clock_now_ns();
    if (c->phase != PHASE_OPEN) {
        if (now >= c->close_deadline_ns)
            c->dead = true;
        else
            arm_timer(c, c->close_deadline_ns);
        conn_reap(c);
        return;
    }
    if (ngtcp2_conn_get_expiry(c->q) <= now) {
        int rv = ngtcp2_conn_handle_expiry(c->q, now);
        if (rv != 0) {
            conn_fail_liberr(c, rv);
            conn_reap(c);
            return;
        }
    }
    conn_write(c);
    conn_reap(c);
}

static void conn_read(struct h3_conn *c, struct udp_addr *local, struct udp_addr *remote,
                      const uint8_t *data, size_t len)
{
    if (c->phase == PHASE_CLOSING) {
        struct h3_server *s = c->server;
        if (c->close_pkt.len &&
            udp_send(s->sock.fd, c->close_pkt.data, c->close_pkt.len, remote, local) != 0)
            log_debug("http3: cannot resend CONNECTION_CLOSE");
        return;
    }
    if (c->phase == PHASE_DRAINING)
        return;
    c->local = *local;
    c->remote = *remote;
    ngtcp2_path path;
    path_of(&path, &c->local, &c->remote);
    ngtcp2_pkt_info pi = {0};
    int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, data, len, clock_now_ns());
    if (rv != 0) {
        conn_fail_liberr(c, rv);
        return;
    }
    conn_write(c);
}

static struct h3_conn *conn_accept(struct h3_server *s, struct udp_addr *local,
                                   struct udp_addr *remote, const uint8_t *data, size_t len)
{
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, data, len) != 0)
        return NULL;
    if (s->draining)
        return NULL;
    if (s->cfg.max_connections &&
        atomic_fetch_add(s->open_connections, 1) >= s->cfg.max_connections) {
        atomic_fetch_sub(s->open_connections, 1);
        return NULL; /* the client's handshake times out; as a full TCP backlog */
    }
    if (!s->cfg.max_connections)
        atomic_fetch_add(s->open_connections, 1);
    struct h3_conn *c = mem_calloc(1, sizeof *c);
    if (!c) {
        atomic_fetch_sub(s->open_connections, 1);
        return NULL;
    }
    c->server = s;
    c->timer.fd = -1;
    c->timer.on_events = conn_on_timer;
    c->local = *local;
    c->remote = *remote;
    c->conn_ref = (ngtcp2_crypto_conn_ref){h3_quic_get_conn, c};
    buf_init(&c->close_pkt, sizeof s->tx);
    ngtcp2_connection_close_error_default(&c->ccerr);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;

    ngtcp2_cid scid;
    scid.datalen = H3_SCID_LEN;
    h3_quic_random(scid.data, scid.datalen);
    uint64_t now = clock_now_ns();
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now;
    settings.max_window = H3_MAX_CONN_WINDOW;
    settings.max_stream_window = H3_MAX_STREAM_WINDOW;
    settings.handshake_timeout = (ngtcp2_duration)H3_HANDSHAKE_TIMEOUT_MS * NGTCP2_MILLISECONDS;
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_stream_data_bidi_local = H3_STREAM_WINDOW;
    params.initial_max_stream_data_bidi_remote = H3_STREAM_WINDOW;
    params.initial_max_stream_data_uni = H3_STREAM_WINDOW;
    params.initial_max_data = H3_CONN_WINDOW;
    params.initial_max_streams_bidi = s->cfg.max_streams;
    params.initial_max_streams_uni = 3;
    params.max_idle_timeout = (ngtcp2_duration)s->cfg.idle_timeout_ms * NGTCP2_MILLISECONDS;
    params.original_dcid = hd.dcid;
    params.stateless_reset_token_present = 1;
    ngtcp2_path path;
    path_of(&path, &c->local, &c->remote);
    if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, s->secret,
                                                     H3_SECRET_LEN, &scid) != 0 ||
        ngtcp2_conn_server_new(&c->q, &hd.scid, &scid, &path, hd.version, &h3_quic_callbacks,
                               &settings, &params, NULL, c) != 0) {
        c->q = NULL;
        conn_free(c);
        return NULL;
    }
    if (quic_tls_session_init(s->cfg.tls, &c->tls, &c->conn_ref) != 0 ||
        h3_cid_add(c, &scid) != 0 || h3_cid_add(c, &hd.dcid) != 0) {
        conn_free(c);
        return NULL;
    }
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls.gnutls);
    return c;
}

/* Answers a packet of a version we do not speak with the versions we do. */
static void send_version_negotiation(struct h3_server *s, const ngtcp2_version_cid *vc,
                                     struct udp_addr *local, struct udp_addr *remote)
{
    static const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
    uint8_t unused;
    h3_quic_random(&unused, 1);
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        s->tx, sizeof s->tx, unused, vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, versions,
        sizeof versions / sizeof versions[0]);
    if (n > 0)
        udp_send(s->sock.fd, s->tx, (size_t)n, remote, local);
}

static void on_datagram(struct h3_server *s, struct udp_addr *local, struct udp_addr *remote,
                        const uint8_t *data, size_t len)
{
    ngtcp2_version_cid vc;
    int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, H3_SCID_LEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        send_version_negotiation(s, &vc, local, remote);
        return;
    }
    if (rv != 0)
        return;
    struct h3_conn *c = h3_cid_find(s, vc.dcid, vc.dcidlen);
    if (!c) {
        c = conn_accept(s, local, remote, data, len);
        if (!c)
            return;
    }
    conn_read(c, local, remote, data, len);
    conn_reap(c);
}

static void sock_on_events(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct h3_server *s = container_of(w, struct h3_server, sock);
    for (int i = 0; i < H3_READS_PER_WAKEUP; i++) {
        struct udp_addr local, remote;
        ssize_t n = udp_recv(s->sock.fd, s->pkt, sizeof s->pkt, &remote, &local);
        if (n == 0)
            return;
        if (n < 0) {
            log_debug("http3: recvmsg: %s", strerror((int)-n));
            return;
        }
        if ((size_t)n <= sizeof s->pkt)
            on_datagram(s, &local, &remote, s->pkt, (size_t)n);
    }
    loop_defer(s->loop, &s->sock); /* more may wait: after the other watchers */
}

/* ---- server ---- */

int h3_server_start(struct loop *loop, const struct h3_server_config *cfg, http_handler_fn handler,
                    void *app, struct h3_server **out)
{
    struct h3_server *s = mem_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.max_streams)
        s->cfg.max_streams = 128;
    s->handler = handler;
    s->app = app;
    s->open_connections = cfg->open_connections ? cfg->open_connections : &s->own_connections;
    h3_quic_random(s->secret, sizeof s->secret);
    int fd = udp_bind(cfg->host, cfg->port, &s->port);
    if (fd < 0) {
        mem_free(s);
        return fd;
    }
    s->sock.fd = fd;
    s->sock.on_events = sock_on_events;
    int rc = loop_add(loop, &s->sock, EPOLLIN);
    if (rc) {
        close(fd);
        mem_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int h3_server_port(const struct h3_server *s)
{
    return s->port;
}

uint32_t h3_server_connection_count(const struct h3_server *s)
{
    return s->nconns;
}

void h3_server_drain(struct h3_server *s, void (*on_drained)(void *arg), void *arg)
{
    s->draining = true;
    s->on_drained = on_drained;
    s->drained_arg = arg;
    struct h3_conn *c = s->conns;
    while (c) {
        struct h3_conn *next = c->next;
        if (c->phase == PHASE_OPEN && !c->h) {
            /* Still in its handshake: nothing to finish. */
            ngtcp2_connection_close_error_set_transport_error(&c->ccerr, NGTCP2_NO_ERROR, NULL, 0);
            conn_close(c);
        } else {
            h3_conn_want_write(c);
        }
        conn_reap(c);
        c = next;
    }
    maybe_drained(s);
}

void h3_server_free(struct h3_server *s)
{
    if (!s)
        return;
    s->on_drained = NULL;
    while (s->conns)
        conn_free(s->conns);
    loop_del(s->loop, &s->sock);
    close(s->sock.fd);
    mem_free(s);
}
