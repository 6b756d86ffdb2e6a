#include "http/tcp_conn.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "net/sock.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static void accept_all(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct listener *l = container_of(w, struct listener, watch);
    struct http_server *s = l->server;
    /* A drain earlier in this loop pass closed the listener after epoll
     * had reported it readable. */
    if (w->fd < 0)
        return;
    for (;;) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_warn("accept: %s", strerror(errno));
            return;
        }
        if (atomic_fetch_add(s->open_connections, 1) >= s->cfg.max_connections) {
            atomic_fetch_sub(s->open_connections, 1);
            close(fd); /* over --max-connections: refuse at once */
            continue;
        }
        tcp_conn_open(s, fd, l->grpc, l->port);
    }
}

static void on_tick(struct loop *l, void *arg)
{
    (void)l;
    struct http_server *s = arg;
    uint64_t now = clock_now_ms();
    tcp_conns_expire(s, now);
    if (s->cfg.on_tick)
        s->cfg.on_tick(s->cfg.tick_arg, now);
}

static void listen_options(int fd, int family, void *arg)
{
    (void)family;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (*(const bool *)arg)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
}

static int listen_socket(const char *host, int port, bool reuseport, int *out_port)
{
    return sock_bind(host, port, SOCK_STREAM, listen_options, &reuseport, out_port);
}

/* Opens one port of the server; SO_REUSEPORT as configured. */
static int listener_open(struct http_server *s, struct listener *l, int port, bool join,
                         bool grpc)
{
    const struct http_server_config *cfg = &s->cfg;
    int fd;
    if (cfg->reuseport && !join) {
        /* A plain bind fails if anyone holds the port, including another
         * process's SO_REUSEPORT listeners, which would otherwise silently
         * share our traffic. */
        fd = listen_socket(cfg->host, port, false, &l->port);
        if (fd >= 0) {
            close(fd);
            fd = listen_socket(cfg->host, l->port, true, &l->port);
        }
    } else {
        fd = listen_socket(cfg->host, port, cfg->reuseport, &l->port);
    }
    if (fd < 0)
        return fd;
    l->watch.fd = fd;
    l->watch.on_events = accept_all;
    l->server = s;
    l->grpc = grpc;
    int rc = loop_add(s->loop, &l->watch, EPOLLIN);
    if (rc) {
        close(fd);
        l->watch.fd = -1;
    }
    return rc;
}

static void listeners_close(struct http_server *s)
{
    for (int i = 0; i < 2; i++) {
        struct listener *l = &s->listeners[i];
        if (l->watch.fd >= 0) {
            loop_del(s->loop, &l->watch);
            close(l->watch.fd);
            l->watch.fd = -1;
        }
    }
}

int http_server_start(struct loop *loop, const struct http_server_config *cfg,
                      http_handler_fn handler, void *app, struct http_server **out)
{
    struct http_server *s = mem_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.h2_max_concurrent_streams)
        s->cfg.h2_max_concurrent_streams = 128;
    s->open_connections = cfg->open_connections ? cfg->open_connections : &s->own_connections;
    s->handler = handler;
    s->app = app;
    s->listeners[0].watch.fd = s->listeners[1].watch.fd = -1;
    s->listeners[1].port = -1;
    tcp_conns_init(s);
    int rc = listener_open(s, &s->listeners[0], cfg->port, cfg->join_port, false);
    if (rc == 0 && cfg->grpc_listen)
        rc = listener_open(s, &s->listeners[1], cfg->grpc_port, cfg->grpc_join_port, true);
    if (rc) {
        listeners_close(s);
        mem_free(s);
        return rc;
    }
    loop->on_tick = on_tick;
    loop->tick_arg = s;
    *out = s;
    return 0;
}

int http_server_port(const struct http_server *s)
{
    return s->listeners[0].port;
}

int http_server_grpc_port(const struct http_server *s)
{
    return s->listeners[1].port;
}

uint32_t http_server_connection_count(const struct http_server *s)
{
    return s->nconns;
}

void http_server_drain(struct http_server *s, void (*on_drained)(void *arg), void *arg)
{
    s->draining = true;
    s->on_drained = on_drained;
    s->drained_arg = arg;
    listeners_close(s);
    tcp_conns_drain(s);
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    tcp_conns_close(s);
    listeners_close(s);
    mem_free(s);
}
