#include "cluster/upstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/rand.h"
#include "base/status.h"
#include "base/thread.h"
#include "grpc_service.pb-c.h"

#define READY_PATH "/inference.GRPCInferenceService/ModelReady"

struct upstream_pool;

struct upstream {
    struct upstream_pool *pool;
    char addr[UPSTREAM_ADDR_MAX];
    char host[UPSTREAM_ADDR_MAX];
    int port;
    struct grpc_conn *conn;
    uint32_t consecutive;
    uint32_t missed_checks; /* health checks in a row without an answer */
    uint64_t ejected_until_ns;
    bool healthy, gone, health_busy, was_ejected;
    struct grpc_unary health;
    uint8_t health_msg[256];
    atomic_uint_fast64_t requests, failures, ejections, resumes, health_misses;
    atomic_uint outstanding;
    atomic_bool eligible;
};

/* A set of addresses handed over by upstream_pool_set. */
struct set_task {
    struct loop_task task;
    struct upstream_pool *pool;
    uint32_t n;
    char addrs[][UPSTREAM_ADDR_MAX];
};

struct upstream_pool {
    struct upstream_pool_config cfg;
    char model[256], label[300];
    struct loop loop;
    pthread_t thread;
    struct loop_watch timer;
    struct loop_task stop_task;
    pthread_mutex_t lock; /* ups[] and n, for readers on other threads */
    struct upstream *ups[UPSTREAM_MAX];
    uint32_t n;
    struct grpc_conn *graveyard[UPSTREAM_MAX * 2]; /* dead connections to close */
    uint32_t ngrave;
    uint64_t rng;
    atomic_bool ready;
};

/* ---- upstreams -------------------------------------------------------------- */

static bool eligible(const struct upstream *u, uint64_t now)
{
    return !u->gone && u->healthy && now >= u->ejected_until_ns;
}

static void refresh(struct upstream_pool *p)
{
    uint64_t now = clock_now_ns();
    bool any = false;
    for (uint32_t i = 0; i < p->n; i++) {
        bool e = eligible(p->ups[i], now);
        atomic_store(&p->ups[i]->eligible, e);
        any = any || e;
    }
    atomic_store(&p->ready, any);
}

static int split_addr(const char *addr, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= hn)
        return ST_ERROR;
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (*end || v <= 0 || v > 65535)
        return ST_ERROR;
    const char *h = addr;
    size_t len = (size_t)(colon - addr);
    if (h[0] == '[' && len >= 2 && h[len - 1] == ']') {
        h++;
        len -= 2;
    }
    memcpy(host, h, len);
    host[len] = '\0';
    *port = (int)v;
    return 0;
}

static struct upstream *upstream_new(struct upstream_pool *p, const char *addr)
{
    struct upstream *u = mem_calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->pool = p;
    snprintf(u->addr, sizeof u->addr, "%s", addr);
    if (split_addr(addr, u->host, sizeof u->host, &u->port) != 0) {
        log_warn("upstream '%s': expected host:port; ignored", addr);
        mem_free(u);
        return NULL;
    }
    u->healthy = true; /* until its first check says otherwise */
    return u;
}

static void bury(struct upstream_pool *p, struct grpc_conn *c)
{
    if (p->ngrave < sizeof p->graveyard / sizeof p->graveyard[0])
        p->graveyard[p->ngrave++] = c;
}

/* u's connection, (re)opened when needed; NULL when it cannot be. */
static struct grpc_conn *conn_of(struct upstream_pool *p, struct upstream *u)
{
    if (u->conn && grpc_conn_alive(u->conn))
        return u->conn;
    if (u->conn) {
        bury(p, u->conn);
        u->conn = NULL;
    }
    if (grpc_conn_open(&p->loop, u->host, u->port, &u->conn) != 0)
        u->conn = NULL;
    return u->conn;
}

static void note_failure(struct upstream_pool *p, struct upstream *u)
{
    atomic_fetch_add(&u->failures, 1);
    if (++u->consecutive < p->cfg.eject_failures || u->ejected_until_ns > clock_now_ns())
        return;
    u->ejected_until_ns = clock_now_ns() + (uint64_t)p->cfg.eject_secs * 1000000000ull;
    u->was_ejected = true;
    u->healthy = false; /* back after a successful check once the time passed */
    atomic_fetch_add(&u->ejections, 1);
    log_warn("%s: upstream %s ejected for %u s after %u consecutive failures", p->label, u->addr,
             p->cfg.eject_secs, u->consecutive);
    refresh(p);
}

/* ---- calls ------------------------------------------------------------------ */

/* Rendezvous hashing: the candidate whose hash with key is highest, so a
 * key keeps its upstream while that one stays eligible. */
static struct upstream *by_affinity(struct upstream *const *cand, uint32_t n, uint64_t key)
{
    struct upstream *best = NULL;
    uint64_t best_h = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = hash_fnv1a(key, cand[i]->addr, strlen(cand[i]->addr));
        h = rand_splitmix64(&h);
        if (!best || h > best_h)
            best = cand[i], best_h = h;
    }
    return best;
}

static struct upstream *pick(struct upstream_pool *p, const struct upstream *avoid,
                             uint64_t affinity)
{
    uint64_t now = clock_now_ns();
    struct upstream *cand[UPSTREAM_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n; i++)
        if (eligible(p->ups[i], now) && p->ups[i] != avoid)
            cand[n++] = p->ups[i];
    if (n == 0 && avoid && eligible(avoid, now))
        return (struct upstream *)avoid;
    if (n == 0)
        return NULL;
    if (affinity)
        return by_affinity(cand, n, affinity);
    if (n == 1)
        return cand[0];
    uint32_t a = (uint32_t)(rand_splitmix64(&p->rng) % n);
    uint32_t b = (uint32_t)(rand_splitmix64(&p->rng) % (n - 1));
    if (b >= a)
        b++;
    return atomic_load(&cand[a]->outstanding) <= atomic_load(&cand[b]->outstanding) ? cand[a]
                                                                                    : cand[b];
}

static void call_done(struct grpc_unary *g);

static bool call_message(struct grpc_unary *g, const uint8_t *msg, size_t len)
{
    struct upstream_call *c = g->ctx;
    return c->on_message(c, msg, len);
}

static void complete(struct upstream_call *c, int status, const char *msg)
{
    c->status = status;
    if (msg)
        snprintf(c->message, sizeof c->message, "%s", msg);
    c->done(c);
}

static void send_to(struct upstream_pool *p, struct upstream_call *c, const struct upstream *avoid)
{
    uint64_t now = clock_now_ns();
    if (c->_deadline_ns && now >= c->_deadline_ns) {
        complete(c, GRPC_DEADLINE_EXCEEDED, "deadline exceeded before an upstream answered");
        return;
    }
    struct upstream *u = pick(p, avoid, c->affinity);
    if (!u) {
        complete(c, GRPC_UNAVAILABLE, "no healthy upstream");
        return;
    }
    c->_up = u;
    c->attempt++;
    snprintf(c->upstream, sizeof c->upstream, "%s", u->addr);
    atomic_fetch_add(&u->requests, 1);
    atomic_fetch_add(&u->outstanding, 1);
    struct grpc_conn *conn = conn_of(p, u);
    c->_u = (struct grpc_unary){.path = c->path,
                                .msg = c->msg,
                                .len = c->len,
                                .timeout_us = c->_deadline_ns ? (c->_deadline_ns - now) / 1000u : 0,
                                .traceparent = c->traceparent[0] ? c->traceparent : NULL,
                                .request_id = c->request_id[0] ? c->request_id : NULL,
                                .done = call_done,
                                .on_message = c->on_message ? call_message : NULL,
                                .ctx = c};
    if (c->_u.timeout_us == 0 && c->_deadline_ns)
        c->_u.timeout_us = 1;
    if (!conn) {
        c->_u.status = GRPC_TRANSPORT;
        c->_u.reached = false;
        snprintf(c->_u.message, sizeof c->_u.message, "cannot connect to %s", u->addr);
        buf_init(&c->_u.resp, 0);
        call_done(&c->_u);
        return;
    }
    grpc_conn_call(conn, &c->_u);
}

static bool is_failure(int status)
{
    return status == GRPC_TRANSPORT || status == GRPC_UNAVAILABLE ||
           status == GRPC_DEADLINE_EXCEEDED;
}

static void call_done(struct grpc_unary *g)
{
    struct upstream_call *c = g->ctx;
    struct upstream_pool *p = c->_pool;
    struct upstream *u = c->_up;
    atomic_fetch_sub(&u->outstanding, 1);
    if (is_failure(g->status)) {
        note_failure(p, u);
        if (!g->reached && c->attempt <= p->cfg.max_retries) {
            log_info("%s: call never reached %s (%s); retrying elsewhere", p->label, u->addr,
                     g->message);
            buf_free(&g->resp);
            send_to(p, c, u);
            return;
        }
        if (c->replayable && g->status == GRPC_TRANSPORT && c->attempt <= p->cfg.max_retries) {
            log_warn("%s: stream cut on %s (%s); sent again elsewhere to be replayed", p->label,
                     u->addr, g->message);
            atomic_fetch_add(&u->resumes, 1);
            buf_free(&g->resp);
            send_to(p, c, u);
            return;
        }
    } else {
        u->consecutive = 0;
    }
    c->resp = g->resp;
    if (g->status)
        snprintf(c->message, sizeof c->message, "%.100s: %.150s", u->addr, g->message);
    complete(c, g->status, NULL);
}

static void run_call(struct loop_task *t)
{
    struct upstream_call *c =
        (struct upstream_call *)((char *)t - offsetof(struct upstream_call, _task));
    send_to(c->_pool, c, NULL);
}

void upstream_pool_call(struct upstream_pool *p, struct upstream_call *c)
{
    c->_pool = p;
    c->_up = NULL;
    c->attempt = 0;
    c->status = 0;
    c->message[0] = c->upstream[0] = '\0';
    buf_init(&c->resp, 0);
    c->_deadline_ns = c->timeout_us ? clock_now_ns() + c->timeout_us * 1000u : 0;
    c->_task.run = run_call;
    loop_post(&p->loop, &c->_task);
}

struct sync_call {
    struct upstream_call c;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
};

static void sync_done(struct upstream_call *c)
{
    struct sync_call *s = (struct sync_call *)c;
    pthread_mutex_lock(&s->lock);
    s->done = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int upstream_pool_call_sync(struct upstream_pool *p, const char *path, const uint8_t *msg,
                            size_t len, uint64_t timeout_us, struct buf *resp, struct error *err)
{
    struct sync_call s = {
        .c = {.path = path, .msg = msg, .len = len, .timeout_us = timeout_us, .done = sync_done}};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    upstream_pool_call(p, &s.c);
    pthread_mutex_lock(&s.lock);
    while (!s.done)
        pthread_cond_wait(&s.cond, &s.lock);
    pthread_mutex_unlock(&s.lock);
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.cond);
    if (s.c.status != 0) {
        buf_free(&s.c.resp);
        return error_set(err, upstream_http_status(s.c.status), "%s", s.c.message);
    }
    *resp = s.c.resp;
    return 0;
}

int upstream_http_status(int s)
{
    switch (s) {
    case 0:
        return 200;
    case 1:
        return 499;
    case 3:
        return 400;
    case GRPC_DEADLINE_EXCEEDED:
        return 504;
    case 5:
        return 404;
    case 7:
        return 403;
    case 8:
        return 429;
    case 9:
        return 400;
    case 12:
        return 501;
    case GRPC_UNAVAILABLE:
        return 503;
    case 16:
        return 401;
    case GRPC_TRANSPORT:
        return 502;
    default:
        return 500;
    }
}

/* ---- health checks ----------------------------------------------------------- */

/* A health check that got no answer (a timeout, a broken connection):
 * the upstream leaves only after unhealthy_threshold of them in a row, so
 * that one slow check on a loaded machine does not move its traffic (and
 * its sequences) elsewhere. */
static void check_missed(struct upstream_pool *p, struct upstream *u, const char *why)
{
    atomic_fetch_add(&u->health_misses, 1);
    u->missed_checks++;
    if (!u->healthy)
        return;
    if (u->missed_checks < p->cfg.unhealthy_threshold) {
        log_info("%s: upstream %s missed a health check (%u of %u in a row): %s", p->label,
                 u->addr, u->missed_checks, p->cfg.unhealthy_threshold, why);
        return;
    }
    log_warn("%s: upstream %s failed its health check %u times in a row: %s", p->label, u->addr,
             u->missed_checks, why);
    u->healthy = false;
}

static void health_done(struct grpc_unary *g)
{
    struct upstream *u = g->ctx;
    struct upstream_pool *p = u->pool;
    u->health_busy = false;
    bool ready = false;
    if (g->status == 0) {
        Inference__ModelReadyResponse *r = inference__model_ready_response__unpack(
            NULL, g->resp.len, (const uint8_t *)g->resp.data);
        ready = r && r->ready;
        if (r)
            inference__model_ready_response__free_unpacked(r, NULL);
    }
    buf_free(&g->resp);
    if (g->status == GRPC_TRANSPORT || g->status == GRPC_DEADLINE_EXCEEDED) {
        check_missed(p, u, g->message);
    } else if (!ready) {
        /* The upstream answered: its model is not ready (loading,
         * unloading, draining) or not there (an error status). It leaves
         * at once. */
        if (u->healthy)
            log_warn("%s: upstream %s failed its health check: %s", p->label, u->addr,
                     g->status ? g->message : "model not ready");
        u->healthy = false;
        u->missed_checks = 0;
    } else {
        u->missed_checks = 0;
        if (clock_now_ns() >= u->ejected_until_ns) {
            u->healthy = true;
            if (u->was_ejected) {
                log_info("%s: upstream %s is back (health check passed)", p->label, u->addr);
                u->was_ejected = false;
                u->consecutive = 0;
            }
        }
    }
    refresh(p);
}

static void check(struct upstream_pool *p, struct upstream *u)
{
    struct grpc_conn *conn = conn_of(p, u);
    if (!conn) {
        char why[UPSTREAM_ADDR_MAX + 32];
        snprintf(why, sizeof why, "cannot connect to %s", u->addr);
        check_missed(p, u, why);
        return;
    }
    Inference__ModelReadyRequest req = INFERENCE__MODEL_READY_REQUEST__INIT;
    req.name = p->model;
    req.version = (char *)"";
    size_t n = inference__model_ready_request__get_packed_size(&req);
    if (n > sizeof u->health_msg)
        return;
    inference__model_ready_request__pack(&req, u->health_msg);
    u->health = (struct grpc_unary){.path = READY_PATH,
                                    .msg = u->health_msg,
                                    .len = n,
                                    .timeout_us = (uint64_t)p->cfg.health_timeout_ms * 1000u,
                                    .done = health_done,
                                    .ctx = u};
    u->health_busy = true;
    grpc_conn_call(conn, &u->health);
}

/* ---- the pool's thread ----------------------------------------------------------- */

static void free_upstream(struct upstream_pool *p, struct upstream *u)
{
    if (u->conn)
        bury(p, u->conn);
    mem_free(u);
}

static void on_timer(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct upstream_pool *p =
        (struct upstream_pool *)((char *)w - offsetof(struct upstream_pool, timer));
    /* Dead connections, closed outside their own callbacks. */
    uint32_t keep = 0;
    for (uint32_t i = 0; i < p->ngrave; i++) {
        if (grpc_conn_outstanding(p->graveyard[i]) == 0 || !grpc_conn_alive(p->graveyard[i]))
            grpc_conn_close(p->graveyard[i]);
        else
            p->graveyard[keep++] = p->graveyard[i];
    }
    p->ngrave = keep;
    /* Upstreams that left, once idle. */
    pthread_mutex_lock(&p->lock);
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        struct upstream *u = p->ups[i];
        if (u->gone && !u->health_busy && atomic_load(&u->outstanding) == 0)
            free_upstream(p, u);
        else
            p->ups[n++] = u;
    }
    p->n = n;
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++)
        if (!p->ups[i]->gone && !p->ups[i]->health_busy)
            check(p, p->ups[i]);
    refresh(p);
    loop_defer_at(&p->loop, &p->timer,
                  clock_now_ns() + (uint64_t)p->cfg.health_interval_ms * 1000000u);
}

static void run_set(struct loop_task *t)
{
    struct set_task *s = (struct set_task *)t;
    struct upstream_pool *p = s->pool;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++) {
        bool keep = false;
        for (uint32_t j = 0; j < s->n && !keep; j++)
            keep = strcmp(p->ups[i]->addr, s->addrs[j]) == 0;
        if (!keep && !p->ups[i]->gone)
            log_info("%s: upstream %s left", p->label, p->ups[i]->addr);
        p->ups[i]->gone = !keep;
    }
    for (uint32_t j = 0; j < s->n && p->n < UPSTREAM_MAX; j++) {
        bool have = false;
        for (uint32_t i = 0; i < p->n && !have; i++)
            have = strcmp(p->ups[i]->addr, s->addrs[j]) == 0 && !p->ups[i]->gone;
        if (have)
            continue;
        struct upstream *u = upstream_new(p, s->addrs[j]);
        if (u) {
            p->ups[p->n++] = u;
            log_info("%s: upstream %s added", p->label, u->addr);
        }
    }
    pthread_mutex_unlock(&p->lock);
    refresh(p);
    mem_free(s);
}

void upstream_pool_set(struct upstream_pool *p, const char *const *addrs, uint32_t naddrs)
{
    if (naddrs > UPSTREAM_MAX)
        naddrs = UPSTREAM_MAX;
    struct set_task *s = mem_calloc(1, sizeof *s + naddrs * sizeof s->addrs[0]);
    if (!s) {
        log_error("%s: out of memory updating the upstreams", p->label);
        return;
    }
    s->task.run = run_set;
    s->pool = p;
    s->n = naddrs;
    for (uint32_t i = 0; i < naddrs; i++)
        snprintf(s->addrs[i], sizeof s->addrs[i], "%s", addrs[i]);
    loop_post(&p->loop, &s->task);
}

static void run_stop(struct loop_task *t)
{
    struct upstream_pool *p =
        (struct upstream_pool *)((char *)t - offsetof(struct upstream_pool, stop_task));
    loop_stop(&p->loop);
}

static void *pool_main(void *arg)
{
    struct upstream_pool *p = arg;
    loop_defer(&p->loop, &p->timer);
    loop_run(&p->loop);
    /* Connections first, while every upstream still exists: closing one
     * finishes its calls, and an upstream's health check in flight
     * (u->health, finished into health_done) lives inside the upstream. */
    for (uint32_t i = 0; i < p->n; i++) {
        grpc_conn_close(p->ups[i]->conn);
        p->ups[i]->conn = NULL;
    }
    for (uint32_t i = 0; i < p->ngrave; i++)
        grpc_conn_close(p->graveyard[i]);
    p->ngrave = 0;
    for (uint32_t i = 0; i < p->n; i++)
        free_upstream(p, p->ups[i]);
    p->n = 0;
    return NULL;
}

int upstream_pool_start(const struct upstream_pool_config *cfg, const char *const *addrs,
                        uint32_t naddrs, struct upstream_pool **out, struct error *err)
{
    struct upstream_pool *p = mem_calloc(1, sizeof *p);
    if (!p)
        return error_set(err, 500, "out of memory");
    p->cfg = *cfg;
    snprintf(p->model, sizeof p->model, "%s", cfg->model);
    snprintf(p->label, sizeof p->label, "%s", cfg->label);
    p->cfg.model = p->model;
    p->cfg.label = p->label;
    p->rng = clock_now_ns() | 1;
    pthread_mutex_init(&p->lock, NULL);
    p->timer.fd = -1;
    p->timer.on_events = on_timer;
    int rc = loop_init(&p->loop);
    if (rc) {
        mem_free(p);
        return error_set(err, 500, "cannot create the upstream loop: %s", strerror(-rc));
    }
    for (uint32_t i = 0; i < naddrs && p->n < UPSTREAM_MAX; i++) {
        struct upstream *u = upstream_new(p, addrs[i]);
        if (u)
            p->ups[p->n++] = u;
    }
    refresh(p);
    rc = thread_start(&p->thread, "upstream", pool_main, p);
    if (rc) {
        for (uint32_t i = 0; i < p->n; i++)
            mem_free(p->ups[i]);
        loop_close(&p->loop);
        mem_free(p);
        return error_set(err, 500, "cannot start the upstream thread: %s", strerror(rc));
    }
    *out = p;
    return 0;
}

void upstream_pool_stop(struct upstream_pool *p)
{
    if (!p)
        return;
    p->stop_task.run = run_stop;
    loop_post(&p->loop, &p->stop_task);
    pthread_join(p->thread, NULL);
    loop_close(&p->loop);
    pthread_mutex_destroy(&p->lock);
    mem_free(p);
}

bool upstream_pool_ready(const struct upstream_pool *p)
{
    return atomic_load(&p->ready);
}

void upstream_pool_metrics(struct upstream_pool *p, const char *family, struct buf *out)
{
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++) {
        struct upstream *u = p->ups[i];
        if (u->gone)
            continue;
        uint64_t v;
        if (strcmp(family, "requests") == 0)
            v = atomic_load(&u->requests);
        else if (strcmp(family, "failures") == 0)
            v = atomic_load(&u->failures);
        else if (strcmp(family, "ejections") == 0)
            v = atomic_load(&u->ejections);
        else if (strcmp(family, "resumes") == 0)
            v = atomic_load(&u->resumes);
        else if (strcmp(family, "health_check_misses") == 0)
            v = atomic_load(&u->health_misses);
        else if (strcmp(family, "outstanding") == 0)
            v = atomic_load(&u->outstanding);
        else
            v = atomic_load(&u->eligible) ? 1 : 0;
        const char *suffix =
            strcmp(family, "outstanding") == 0 || strcmp(family, "healthy") == 0 ? "" : "_total";
        buf_printf(out, "inferd_upstream_%s%s{model=\"%s\",upstream=\"%s\"} %llu\n", family, suffix,
                   p->label, u->addr, (unsigned long long)v);
    }
    pthread_mutex_unlock(&p->lock);
}
