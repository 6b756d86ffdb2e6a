#include "bench/loadgen.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "bench/http_client.h"

#define RECV_BUF_SIZE (16 * 1024)
#define READ_BUDGET 32                    /* recv() calls per connection per wakeup, then yield */
#define HOUSEKEEPING_NS (10 * 1000000ull) /* timeouts and reconnect back-off */
#define BACKOFF_NS (100 * 1000000ull)     /* after a failed connect */

enum conn_state { C_CLOSED, C_BACKOFF, C_CONNECTING, C_IDLE, C_BUSY };
const char *const loadgen_err_names[LOADGEN_ERR_COUNT] = {"connect", "reset", "timeout", "parse"};

/* Admitted and refused responses, apart: under admission control a fast
 * refusal must not hide the latency of the requests that were served. */
static bool status_admitted(int status)
{
    return status >= 200 && status < 300;
}

static bool status_refused(int status)
{
    return status == 429 || status == 503;
}

/* A connection. Lifecycle: created with its worker; CLOSED (no socket) →
 * CONNECTING → IDLE ⇄ BUSY (one request at a time) → CLOSED when either side
 * ends it; BACKOFF for a while after a failed connect. A conn that is not
 * CONNECTING or BUSY sits in exactly one of the worker's lists. */
struct conn {
    struct loop_watch watch; /* first: the callback casts back */
    struct worker *w;
    enum conn_state state;
    bool has_req;  /* a request is assigned (CONNECTING or BUSY) */
    bool measured; /* that request is in the measured window */
    bool ever_connected;
    bool fin_seen; /* the peer closed its side (or the socket failed) */
    uint64_t start_ns;
    uint64_t backoff_until;
    size_t sent;
    size_t rlen;
    char *rbuf; /* RECV_BUF_SIZE, part of the worker's block */
    struct http_resp resp;
    struct gen_stream *gs; /* --openai: the stream being read */
    struct conn *prev, *next;
};

static void list_push(struct conn_list *l, struct conn *c)
{
    c->prev = NULL;
    c->next = l->head;
    if (l->head)
        l->head->prev = c;
    l->head = c;
}

static void list_remove(struct conn_list *l, struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static struct conn *list_pop(struct conn_list *l)
{
    struct conn *c = l->head;
    if (c)
        list_remove(l, c);
    return c;
}

static void worker_dispatch(struct worker *w, uint64_t now);
static void worker_check_done(struct worker *w, uint64_t now);
static void conn_on_events(struct loop_watch *watch, uint32_t events);

static bool in_window(const struct worker *w, uint64_t t)
{
    return t >= w->sh->t_measure && t < w->sh->t_end;
}

static bool counting(const struct worker *w, uint64_t now)
{
    return w->phase == P_RUN && now >= w->sh->t_measure;
}

static uint64_t open_due(const struct worker *w, uint64_t i)
{
    return w->sh->t0 + (uint64_t)(((double)i * w->stride + w->offset) * w->ns_per_req);
}

static void conn_close(struct conn *c)
{
    if (c->watch.fd >= 0) {
        loop_del(&c->w->loop, &c->watch);
        close(c->watch.fd);
        c->watch.fd = -1;
    }
    c->state = C_CLOSED;
    c->rlen = 0;
    c->fin_seen = false;
}

/* The assigned request is over (answered or failed): free the slot. */
static void request_finished(struct worker *w, struct conn *c, uint64_t now)
{
    c->has_req = false;
    if (c->measured)
        w->outstanding--;
    c->measured = false;
    if (!w->sh->open_loop && now < w->sh->t_end)
        w->pending++;
}

static void conn_fail(struct conn *c, enum err_kind kind, uint64_t now)
{
    struct worker *w = c->w;
    bool had_req = c->has_req;
    if (had_req && c->measured)
        w->st.errors[kind]++;
    if (had_req && c->gs)
        gen_stream_finish(c->gs, 0, c->measured, now, &w->st.gen);
    conn_close(c);
    if (kind == LOADGEN_ERR_CONNECT) {
        c->state = C_BACKOFF;
        c->backoff_until = now + BACKOFF_NS;
        list_push(&w->backoff, c);
    } else {
        list_push(&w->closed, c);
    }
    if (had_req)
        request_finished(w, c, now);
}

static void conn_send(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    const char *req = w->sh->req;
    size_t len = w->sh->req_len;
    while (c->sent < len) {
        ssize_t n = send(c->watch.fd, req + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
            if (c->measured)
                w->st.bytes_sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* EPOLLOUT resumes */
        conn_fail(c, LOADGEN_ERR_RESET, now);
        return;
    }
}

/* --openai: the decoded body of a 2xx response goes to the stream reader. */
static void conn_on_body(void *arg, const char *p, size_t n)
{
    struct conn *c = arg;
    if (c->resp.status >= 200 && c->resp.status < 300)
        gen_stream_feed(c->gs, p, n, clock_now_ns());
}

static void conn_start_request(struct conn *c, uint64_t now)
{
    const struct bench_shared *sh = c->w->sh;
    c->state = C_BUSY;
    c->sent = 0;
    c->rlen = 0;
    http_resp_init(&c->resp, sh->head_request);
    if (c->gs)
        gen_stream_begin(c->gs, c->start_ns, sh->t_measure, sh->t_end);
    conn_send(c, now);
}

static int conn_connect(struct conn *c)
{
    struct worker *w = c->w;
    int fd = http_connect_start(&w->sh->addr, w->sh->addrlen);
    if (fd < 0)
        return fd;
    c->watch.fd = fd;
    c->watch.on_events = conn_on_events;
    int rc = loop_add(&w->loop, &c->watch, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    if (rc) {
        close(fd);
        c->watch.fd = -1;
        return rc;
    }
    c->state = C_CONNECTING;
    return 0;
}

/* Hands a request to c, which is IDLE or CLOSED and in no list. */
static void conn_assign(struct conn *c, uint64_t start, uint64_t now)
{
    struct worker *w = c->w;
    c->has_req = true;
    c->start_ns = start;
    c->measured = in_window(w, start);
    if (c->measured)
        w->outstanding++;
    if (c->state == C_IDLE) {
        conn_start_request(c, now);
        return;
    }
    if (conn_connect(c) != 0)
        conn_fail(c, LOADGEN_ERR_CONNECT, now);
}

/* The response is complete. must_close: the connection cannot carry
 * another request (bytes after the response, or the peer closed). */
static void conn_complete(struct conn *c, uint64_t now, bool must_close)
{
    struct worker *w = c->w;
    if (c->measured) {
        uint64_t lat = now - c->start_ns;
        hist_record(&w->st.latency, lat);
        if (status_admitted(c->resp.status))
            hist_record(&w->st.latency_ok, lat);
        else if (status_refused(c->resp.status))
            hist_record(&w->st.latency_refused, lat);
        w->st.status[c->resp.status]++;
    }
    if (c->gs)
        gen_stream_finish(c->gs, c->resp.status, c->measured, now, &w->st.gen);
    if (c->resp.keep_alive && !must_close) {
        c->state = C_IDLE;
        list_push(&w->ready, c);
    } else {
        conn_close(c);
        list_push(&w->closed, c);
    }
    request_finished(w, c, now);
}

/* Reads what the socket has for a BUSY connection and parses it, at most
 * READ_BUDGET reads per call (then the loop calls back later, so a large
 * response does not starve the other connections). After a FIN
 * (c->fin_seen) the connection is not reused even if the response said
 * keep-alive. */
static void conn_read(struct conn *c)
{
    struct worker *w = c->w;
    for (int budget = READ_BUDGET; budget > 0; budget--) {
        size_t space = RECV_BUF_SIZE - c->rlen;
        ssize_t n = recv(c->watch.fd, c->rbuf + c->rlen, space, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            conn_fail(c, LOADGEN_ERR_RESET, clock_now_ns());
            return;
        }
        if (n == 0) {
            uint64_t now = clock_now_ns();
            if (http_resp_eof(&c->resp) == HTTP_RESP_DONE)
                conn_complete(c, now, true);
            else
                conn_fail(c, LOADGEN_ERR_RESET, now); /* closed before or during the response */
            return;
        }
        if (c->measured)
            w->st.bytes_received += (uint64_t)n;
        c->rlen += (size_t)n;
        size_t used;
        int rc = http_resp_parse(&c->resp, c->rbuf, c->rlen, &used);
        if (used) {
            memmove(c->rbuf, c->rbuf + used, c->rlen - used);
            c->rlen -= used;
        }
        if (rc == HTTP_RESP_DONE) {
            conn_complete(c, clock_now_ns(), c->rlen != 0 || c->fin_seen);
            return;
        }
        if (rc == HTTP_RESP_ERROR || c->rlen == RECV_BUF_SIZE) {
            conn_fail(c, LOADGEN_ERR_PARSE, clock_now_ns());
            return;
        }
        /* A short read drained the socket: the next arrival is a new edge.
         * Not so for a FIN already reported in this event: read on to see
         * the end of the connection. */
        if ((size_t)n < space && !c->fin_seen)
            return;
    }
    loop_defer(&w->loop, &c->watch); /* budget spent: on_events(c, 0) later */
}

static void initial_connect_done(struct worker *w, struct conn *c, int err);

static void conn_on_events(struct loop_watch *watch, uint32_t events)
{
    struct conn *c = (struct conn *)watch;
    struct worker *w = c->w;
    switch (c->state) {
    case C_CONNECTING: {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = http_connect_result(watch->fd);
        uint64_t now = clock_now_ns();
        if (w->phase == P_CONNECT) {
            initial_connect_done(w, c, err);
            return;
        }
        if (err) {
            conn_fail(c, LOADGEN_ERR_CONNECT, now);
        } else {
            if (c->ever_connected && counting(w, now))
                w->st.reconnects++;
            c->ever_connected = true;
            if (c->has_req) {
                conn_start_request(c, now);
            } else {
                c->state = C_IDLE;
                list_push(&w->ready, c);
            }
        }
        break;
    }
    case C_BUSY:
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->fin_seen = true;
        if ((events & EPOLLOUT) && c->sent < w->sh->req_len)
            conn_send(c, clock_now_ns());
        /* events == 0: a deferred call after the read budget ran out. */
        if (c->state == C_BUSY &&
            (events == 0 || (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))))
            conn_read(c);
        break;
    case C_IDLE:
        /* Nothing is expected on an idle connection: the server closed it
         * (or sent something unsolicited, such as a 408). Reconnect later. */
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            list_remove(&w->ready, c);
            conn_close(c);
            list_push(&w->closed, c);
        }
        break;
    default:
        break;
    }
    if (w->phase == P_RUN) {
        uint64_t now = clock_now_ns();
        worker_dispatch(w, now);
        worker_check_done(w, now);
    }
}

/* Fails requests that have waited too long: in flight, or (open loop) due
 * and still without a connection. Ends back-off periods. */
static void worker_housekeeping(struct worker *w, uint64_t now)
{
    uint64_t timeout = w->sh->timeout_ns;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->has_req && now >= c->start_ns && now - c->start_ns >= timeout)
            conn_fail(c, LOADGEN_ERR_TIMEOUT, now);
    }
    struct conn *c = w->backoff.head;
    while (c) {
        struct conn *next = c->next;
        if (now >= c->backoff_until) {
            list_remove(&w->backoff, c);
            c->state = C_CLOSED;
            list_push(&w->closed, c);
        }
        c = next;
    }
}

static struct conn *worker_free_conn(struct worker *w)
{
    struct conn *c = list_pop(&w->ready);
    return c ? c : list_pop(&w->closed);
}

static void worker_dispatch(struct worker *w, uint64_t now)
{
    const struct bench_shared *sh = w->sh;
    if (!sh->open_loop) {
        while (w->pending && now < sh->t_end) {
            struct conn *c = worker_free_conn(w);
            if (!c)
                return;
            w->pending--;
            conn_assign(c, now, now);
        }
        return;
    }
    for (;;) {
        uint64_t due = open_due(w, w->next_index);
        if (due > now || due >= sh->t_end)
            return;
        if (now - due >= sh->timeout_ns) {
            /* Waited for a connection past its timeout: never sent. */
            if (in_window(w, due))
                w->st.errors[LOADGEN_ERR_TIMEOUT]++;
            w->next_index++;
            continue;
        }
        struct conn *c = worker_free_conn(w);
        if (!c)
            return;
        w->next_index++;
        conn_assign(c, due, now);
    }
}

static void worker_check_done(struct worker *w, uint64_t now)
{
    const struct bench_shared *sh = w->sh;
    if (w->phase != P_RUN || now < sh->t_end || w->outstanding)
        return;
    if (sh->open_loop && open_due(w, w->next_index) < sh->t_end)
        return;
    w->phase = P_DONE;
    loop_stop(&w->loop);
}

static void timer_arm(struct worker *w, uint64_t at)
{
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(at / 1000000000ull), .tv_nsec = (long)(at % 1000000000ull)},
    };
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1; /* zero would disarm */
    timerfd_settime(w->timer.fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void worker_start_run(struct worker *w);

static void timer_on_events(struct loop_watch *watch, uint32_t events)
{
    (void)events;
    struct worker *w = (struct worker *)((char *)watch - offsetof(struct worker, timer));
    uint64_t expirations;
    ssize_t ignored = read(watch->fd, &expirations, sizeof expirations);
    (void)ignored;
    uint64_t now = clock_now_ns();
    if (w->phase == P_CONNECT) {
        /* The initial connects took longer than the timeout: give up on the
         * ones still pending. */
        for (uint32_t i = 0; i < w->nconns && w->phase == P_CONNECT; i++) {
            struct conn *c = &w->conns[i];
            if (c->state == C_CONNECTING) {
                initial_connect_done(w, c, -ETIMEDOUT);
            }
        }
        return;
    }
    if (now >= w->next_housekeeping) {
        worker_housekeeping(w, now);
        w->next_housekeeping = now + HOUSEKEEPING_NS;
    }
    worker_dispatch(w, now);
    worker_check_done(w, now);
    if (w->phase != P_RUN)
        return;
    uint64_t next = w->next_housekeeping;
    if (now < w->sh->t_end && w->sh->t_end < next)
        next = w->sh->t_end;
    if (w->sh->open_loop) {
        uint64_t due = open_due(w, w->next_index);
        if (due > now && due < next)
            next = due;
    }
    timer_arm(w, next);
}

/* P_CONNECT: every connection tries once before the clock starts, so that
 * the first measured requests do not pay for the handshakes. */
static void initial_connect_done(struct worker *w, struct conn *c, int err)
{
    if (err) {
        if (!w->first_connect_err)
            w->first_connect_err = err;
        conn_close(c);
        c->state = C_BACKOFF;
        c->backoff_until = 0; /* the run starts with a retry */
        list_push(&w->backoff, c);
    } else {
        c->state = C_IDLE;
        c->ever_connected = true;
        w->connected_ok++;
        list_push(&w->ready, c);
    }
    if (--w->connect_pending == 0)
        worker_start_run(w);
}

static void worker_start_run(struct worker *w)
{
    struct bench_shared *sh = w->sh;
    /* Blocking here is fine: this thread has nothing else to do until the
     * main thread has seen every worker connect and set the start time. */
    pthread_mutex_lock(&sh->gate_lock);
    sh->nconnected++;
    pthread_cond_broadcast(&sh->gate_cond);
    while (!sh->go)
        pthread_cond_wait(&sh->gate_cond, &sh->gate_lock);
    pthread_mutex_unlock(&sh->gate_lock);
    if (sh->abort) {
        w->phase = P_DONE;
        loop_stop(&w->loop);
        return;
    }
    w->phase = P_RUN;
    uint64_t now = clock_now_ns();
    w->next_housekeeping = now; /* moves back-off conns to the closed list at once */
    worker_housekeeping(w, now);
    w->next_housekeeping = now + HOUSEKEEPING_NS;
    worker_dispatch(w, now);
    timer_arm(w, sh->open_loop ? open_due(w, w->next_index) : now + HOUSEKEEPING_NS);
}

void *loadgen_worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16]; /* the kernel's limit, NUL included */
    snprintf(name, sizeof name, "bench-%u", w->id);
    pthread_setname_np(pthread_self(), name);
    uint64_t now = clock_now_ns();
    w->connect_pending = w->nconns;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        int rc = conn_connect(c);
        if (rc != 0) {
            c->state = C_CONNECTING; /* so that the failure is accounted once */
            initial_connect_done(w, c, rc);
        }
    }
    if (w->phase == P_CONNECT)
        timer_arm(w, now + w->sh->timeout_ns);
    if (w->phase != P_DONE && loop_run(&w->loop) != 0)
        fprintf(stderr, "inferd bench: event loop failed: %s\n", strerror(errno));
    for (uint32_t i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    return NULL;
}

int loadgen_worker_init(struct worker *w, struct bench_shared *sh, uint32_t id, uint32_t nconns,
                        uint32_t concurrency, uint32_t nthreads)
{
    memset(w, 0, sizeof *w);
    w->sh = sh;
    w->id = id;
    w->nconns = nconns;
    w->pending = concurrency;
    w->stride = nthreads;
    w->offset = id;
    w->ns_per_req = sh->open_loop ? 1e9 / sh->o->rate : 0;
    w->timer.fd = -1;
    loadgen_stats_init(&w->st);
    w->conns = mem_calloc(nconns, sizeof *w->conns);
    w->rbufs = mem_alloc((size_t)nconns * RECV_BUF_SIZE);
    if (!w->conns || !w->rbufs)
        return -ENOMEM;
    if (sh->o->openai) {
        w->streams = mem_calloc(nconns, sizeof *w->streams);
        if (!w->streams)
            return -ENOMEM;
    }
    for (uint32_t i = 0; i < nconns; i++) {
        struct conn *c = &w->conns[i];
        c->w = w;
        c->watch.fd = -1;
        c->rbuf = w->rbufs + (size_t)i * RECV_BUF_SIZE;
        if (w->streams) {
            if (gen_stream_init(&w->streams[i]) != 0)
                return -ENOMEM;
            c->gs = &w->streams[i];
            c->resp.on_body = conn_on_body;
            c->resp.body_arg = c;
        }
    }
    int rc = loop_init(&w->loop);
    if (rc)
        return rc;
    w->loop_ok = true;
    w->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->timer.fd < 0)
        return -errno;
    w->timer.on_events = timer_on_events;
    return loop_add(&w->loop, &w->timer, EPOLLIN);
}

void loadgen_worker_free(struct worker *w)
{
    if (w->timer.fd >= 0) {
        loop_del(&w->loop, &w->timer);
        close(w->timer.fd);
    }
    if (w->loop_ok)
        loop_close(&w->loop);
    if (w->streams)
        for (uint32_t i = 0; i < w->nconns; i++)
            gen_stream_free(&w->streams[i]);
    mem_free(w->streams);
    mem_free(w->conns);
    mem_free(w->rbufs);
}

void loadgen_stats_init(struct bench_stats *st)
{
    memset(st, 0, sizeof *st);
    hist_init(&st->latency);
    hist_init(&st->latency_ok);
    hist_init(&st->latency_refused);
    gen_stats_init(&st->gen);
}

void loadgen_stats_merge(struct bench_stats *total, const struct bench_stats *st)
{
    hist_merge(&total->latency, &st->latency);
    hist_merge(&total->latency_ok, &st->latency_ok);
    hist_merge(&total->latency_refused, &st->latency_refused);
    for (int s = 0; s < 600; s++)
        total->status[s] += st->status[s];
    for (int k = 0; k < LOADGEN_ERR_COUNT; k++)
        total->errors[k] += st->errors[k];
    total->bytes_sent += st->bytes_sent;
    total->bytes_received += st->bytes_received;
    total->reconnects += st->reconnects;
    gen_stats_merge(&total->gen, &st->gen);
}
