/*
 * registration: the thread that keeps this instance's key in etcd
 * (registration.h).
 */
#include "cluster/registration.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "base/thread.h"
#include "cluster/etcd.h"
#include "cluster/remote.h"

#define TICK_MS 250
#define RETRY_MS 1000
#define VALUE_MAX (256u * 1024)

enum reg_state { REG_NONE, REG_REGISTERED, REG_UNREACHABLE, REG_FAILING };

struct registration {
    struct registration_config cfg;
    char key[1024];
    char id[256], host[256], prefix[512];
    struct etcd_client etcd;
    atomic_bool stop;
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool deregister; /* under lock: asked to delete the key */
    bool removed;    /* under lock: remove_key() has run */
    bool removed_ok; /* under lock: ... and the key is gone (or was never put) */
    /* The thread's own. */
    int64_t lease;
    uint64_t last_keepalive_ms; /* last keepalive (or grant) that etcd answered */
    uint64_t next_keepalive_ms;
    uint64_t next_try_ms;
    bool put_done;
    enum reg_state state;
    struct buf value, put_value;
};

static void w_version(struct json_writer *w, int64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%lld", (long long)v);
    json_w_cstr(w, s);
}

/* The versions of e this instance serves itself: loaded ones that are not
 * remote (a gateway's remote versions are not offered, so gateways never
 * discover each other) and, unless ready_only, those that failed to load
 * (not the failures of the model as a whole, version -1); ascending. */
static void w_versions(struct json_writer *w, const char *key, const struct model_entry *e,
                       bool ready_only)
{
    json_w_key(w, key);
    json_w_arr_begin(w);
    uint32_t nv = ready_only && e->state != MODEL_READY ? 0 : e->nversions;
    uint32_t nf = ready_only ? 0 : e->nfailures;
    uint32_t i = 0, j = 0;
    while (j < nf && e->failures[j].version < 0)
        j++;
    while (i < nv || j < nf) {
        if (i < nv && remote_version_is(e->versions[i])) {
            i++;
        } else if (j >= nf || (i < nv && e->versions[i]->version < e->failures[j].version)) {
            w_version(w, e->versions[i++]->version);
        } else if (i < nv && e->versions[i]->version == e->failures[j].version) {
            /* A loaded version whose reload failed: once. */
            w_version(w, e->versions[i++]->version);
            j++;
        } else {
            w_version(w, e->failures[j++].version);
        }
    }
    json_w_arr_end(w);
}

void registration_value(struct buf *out, const struct registration_config *cfg,
                        const struct model_snapshot *s)
{
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "id");
    json_w_cstr(&w, cfg->instance_id);
    json_w_key(&w, "host");
    json_w_cstr(&w, cfg->host);
    json_w_key(&w, "http_port");
    json_w_int(&w, cfg->http_port);
    json_w_key(&w, "grpc_port");
    json_w_int(&w, cfg->grpc_port);
    json_w_key(&w, "metrics_port");
    json_w_int(&w, cfg->metrics_port > 0 ? cfg->metrics_port : 0);
    json_w_key(&w, "ready");
    json_w_bool(&w, snapshot_all_ready(s));
    /* A draining instance deletes its key rather than marking itself. */
    json_w_key(&w, "draining");
    json_w_bool(&w, false);
    json_w_key(&w, "version");
    json_w_cstr(&w, INFERD_VERSION);
    json_w_key(&w, "models");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < s->count; i++) {
        const struct model_entry *e = &s->entries[i];
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, e->name);
        w_versions(&w, "versions", e, false);
        w_versions(&w, "ready_versions", e, true);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    json_w_obj_end(&w);
}

static void set_state(struct registration *r, enum reg_state st)
{
    if (st == r->state)
        return;
    char ep[300];
    etcd_client_endpoint(&r->etcd, ep, sizeof ep);
    if (st == REG_REGISTERED)
        log_info("registered in etcd (%s) as %s, lease %llx, TTL %u s", ep, r->key,
                 (unsigned long long)r->lease, r->cfg.lease_ttl_s);
    else if (st == REG_UNREACHABLE)
        log_warn("etcd registration: %s; retrying every %u ms (serving goes on)", r->etcd.err,
                 RETRY_MS);
    else if (st == REG_FAILING)
        log_warn("etcd registration: %s; retrying every %u ms", r->etcd.err, RETRY_MS);
    r->state = st;
}

static void failed(struct registration *r, uint64_t now)
{
    set_state(r, r->etcd.unreachable ? REG_UNREACHABLE : REG_FAILING);
    r->next_try_ms = now + RETRY_MS;
}

static void lease_lost(struct registration *r, const char *why)
{
    if (r->state == REG_REGISTERED)
        log_warn("etcd registration: lease %llx %s; registering again",
                 (unsigned long long)r->lease, why);
    r->lease = 0;
    r->put_done = false;
    r->state = REG_NONE;
}

/* One round: lease, put, keepalive as due. */
static void step(struct registration *r)
{
    uint64_t now = clock_now_ms();
    if (now < r->next_try_ms)
        return;
    struct model_snapshot *s = repository_acquire(r->cfg.repo);
    buf_reset(&r->value);
    registration_value(&r->value, &r->cfg, s);
    repository_release(r->cfg.repo, s);
    if (r->value.err)
        return;
    if (r->lease && now - r->last_keepalive_ms >= (uint64_t)r->cfg.lease_ttl_s * 1000u)
        lease_lost(r, "expired while etcd was unreachable");
    if (!r->lease) {
        int64_t granted = 0;
        if (etcd_lease_grant(&r->etcd, r->cfg.lease_ttl_s, &r->lease, &granted) != 0) {
            r->lease = 0;
            failed(r, now);
            return;
        }
        r->last_keepalive_ms = now;
        r->next_keepalive_ms = now + r->cfg.lease_ttl_s * 1000u / 3;
        r->put_done = false;
    }
    bool changed = !r->put_done || r->value.len != r->put_value.len ||
                   memcmp(r->value.data, r->put_value.data, r->value.len) != 0;
    if (changed) {
        if (etcd_put(&r->etcd, r->key, r->value.data, r->value.len, r->lease) != 0) {
            if (!r->etcd.unreachable && strstr(r->etcd.err, "lease not found")) {
                lease_lost(r, "not found");
                return;
            }
            failed(r, now);
            return;
        }
        buf_reset(&r->put_value);
        buf_append(&r->put_value, r->value.data, r->value.len);
        r->put_done = true;
        set_state(r, REG_REGISTERED);
    }
    if (now >= r->next_keepalive_ms) {
        int64_t ttl = 0;
        if (etcd_lease_keepalive(&r->etcd, r->lease, &ttl) != 0) {
            failed(r, now);
            return;
        }
        if (ttl <= 0) {
            lease_lost(r, "no longer exists in etcd");
            r->next_try_ms = 0;
            return;
        }
        r->last_keepalive_ms = now;
        r->next_keepalive_ms = now + r->cfg.lease_ttl_s * 1000u / 3;
        set_state(r, REG_REGISTERED);
    }
}

/* The drain's first step: the key goes, and the lease with it. */
static void remove_key(struct registration *r)
{
    bool gone = true;
    if (r->put_done) {
        gone = etcd_delete(&r->etcd, r->key, false, NULL) == 0;
        if (gone)
            log_info("deregistered from etcd: %s deleted", r->key);
        else
            log_warn("etcd registration: cannot delete %s (%s); it goes when lease %llx "
                     "expires",
                     r->key, r->etcd.err, (unsigned long long)r->lease);
    }
    if (r->lease && etcd_lease_revoke(&r->etcd, r->lease) == 0)
        gone = true;
    r->lease = 0;
    r->put_done = false;
    pthread_mutex_lock(&r->lock);
    r->removed = true;
    r->removed_ok = gone;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

static void *registration_main(void *arg)
{
    struct registration *r = arg;
    bool key_removed = false;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        bool dereg = r->deregister;
        pthread_mutex_unlock(&r->lock);
        if (atomic_load(&r->stop))
            break;
        if (dereg && !key_removed) {
            remove_key(r);
            key_removed = true;
        } else if (!dereg) {
            step(r);
        }
        pthread_mutex_lock(&r->lock);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!atomic_load(&r->stop) && r->deregister == dereg)
            pthread_cond_timedwait(&r->cond, &r->lock, &ts);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

int registration_start(const struct registration_config *cfg, struct registration **out,
                       struct error *err)
{
    struct registration *r = mem_calloc(1, sizeof *r);
    if (!r)
        return error_set(err, 500, "out of memory");
    r->cfg = *cfg;
    if (r->cfg.lease_ttl_s < 2)
        r->cfg.lease_ttl_s = 2;
    snprintf(r->id, sizeof r->id, "%s", cfg->instance_id);
    snprintf(r->host, sizeof r->host, "%s", cfg->host);
    snprintf(r->prefix, sizeof r->prefix, "%s", cfg->prefix);
    r->cfg.instance_id = r->id;
    r->cfg.host = r->host;
    r->cfg.prefix = r->prefix;
    if ((size_t)snprintf(r->key, sizeof r->key, "%sinstances/%s", r->prefix, r->id) >=
        sizeof r->key) {
        mem_free(r);
        return error_set(err, 400, "--etcd-prefix and --instance-id are too long");
    }
    if (etcd_client_init(&r->etcd, cfg->endpoints, cfg->timeout_ms, &r->stop, err) != 0) {
        mem_free(r);
        return ST_ERROR;
    }
    buf_init(&r->value, VALUE_MAX);
    buf_init(&r->put_value, VALUE_MAX);
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (thread_start(&r->tid, "etcd-register", registration_main, r) != 0) {
        etcd_client_free(&r->etcd);
        buf_free(&r->value);
        buf_free(&r->put_value);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        mem_free(r);
        return error_set(err, 500, "cannot start the etcd registration thread");
    }
    *out = r;
    return 0;
}

bool registration_deregister(struct registration *r, uint32_t wait_ms)
{
    if (!r)
        return true;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    r->deregister = true;
    pthread_cond_broadcast(&r->cond);
    while (!r->removed && pthread_cond_timedwait(&r->cond, &r->lock, &ts) == 0)
        ;
    bool gone = r->removed_ok;
    pthread_mutex_unlock(&r->lock);
    return gone;
}

void registration_stop(struct registration *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    atomic_store(&r->stop, true);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->tid, NULL);
    if (r->lease) {
        /* The thread stopped without a drain (an error at start): give the
         * lease back so the key goes now. The cancel flag is set, so use a
         * client of its own. */
        struct etcd_client c;
        struct error err;
        if (etcd_client_init(&c, r->cfg.endpoints, 1000, NULL, &err) == 0) {
            etcd_lease_revoke(&c, r->lease);
            etcd_client_free(&c);
        }
    }
    etcd_client_free(&r->etcd);
    buf_free(&r->value);
    buf_free(&r->put_value);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    mem_free(r);
}
