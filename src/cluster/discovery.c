/*
 * discovery: the watcher of <prefix>instances/ and its snapshots
 * (discovery.h).
 */
#include "cluster/discovery.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "base/thread.h"
#include "cluster/etcd.h"

#define WATCH_WAIT_MS 500
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

struct snapshot_impl {
    struct cluster_snapshot pub; /* first: the public pointer is this one */
    atomic_uint refs;
    struct arena arena;
};

/* One key of the prefix as etcd has it (the thread's own). */
struct entry {
    char *key;
    char *value;
    size_t value_len;
    int64_t mod_revision;
    bool logged; /* this value was logged as not a registration */
};

struct discovery {
    struct discovery_config cfg;
    char prefix[512]; /* <prefix>instances/ */
    struct etcd_client etcd;
    atomic_bool stop;
    pthread_t tid;
    pthread_mutex_t lock; /* guards current */
    struct snapshot_impl *current;
    atomic_uint_fast64_t generation;
    /* The thread's own. */
    struct entry *entries;
    uint32_t n_entries;
    int64_t next_revision; /* where the watch resumes; 0: read the range first */
    int link;              /* the state last logged: 0 none yet, 1 watching, 2 unreachable */
};

static struct snapshot_impl *impl_of(const struct cluster_snapshot *s)
{
    return (struct snapshot_impl *)(void *)s;
}

const struct cluster_snapshot *cluster_snapshot_retain(const struct cluster_snapshot *s)
{
    atomic_fetch_add(&impl_of(s)->refs, 1);
    return s;
}

void cluster_snapshot_release(const struct cluster_snapshot *s)
{
    if (!s)
        return;
    struct snapshot_impl *impl = impl_of(s);
    if (atomic_fetch_sub(&impl->refs, 1) == 1) {
        arena_free(&impl->arena);
        mem_free(impl);
    }
}

const struct cluster_model *cluster_instance_model(const struct cluster_instance *inst,
                                                   const char *name)
{
    for (uint32_t i = 0; i < inst->n_models; i++)
        if (strcmp(inst->models[i].name, name) == 0)
            return &inst->models[i];
    return NULL;
}

bool cluster_instance_serves(const struct cluster_instance *inst, const char *model,
                             const char *version)
{
    if (!inst->ready || inst->draining || inst->grpc_port <= 0)
        return false;
    const struct cluster_model *m = cluster_instance_model(inst, model);
    if (!m || m->n_ready_versions == 0)
        return false;
    if (!version)
        return true;
    for (uint32_t i = 0; i < m->n_ready_versions; i++)
        if (strcmp(m->ready_versions[i], version) == 0)
            return true;
    return false;
}

/* Reads a string array member (at most CLUSTER_MAX_VERSIONS). */
static int parse_strings(struct arena *a, const struct json_value *v, const char *const **out,
                         uint32_t *n)
{
    *out = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (v->type != JSON_ARRAY || v->len > CLUSTER_MAX_VERSIONS)
        return ST_ERROR;
    const char **arr = arena_calloc(a, v->len ? v->len : 1, sizeof *arr);
    if (!arr)
        return ST_ERROR;
    for (uint32_t i = 0; i < v->len; i++) {
        if (v->u.items[i].type != JSON_STRING)
            return ST_ERROR;
        arr[i] = v->u.items[i].u.str;
    }
    *out = arr;
    *n = v->len;
    return 0;
}

static int port_member(const struct json_value *o, const char *key, int *out)
{
    const struct json_value *v = json_get(o, key);
    int64_t p = 0;
    *out = 0;
    if (!v)
        return 0;
    if (json_num_i64(v, &p) != 0 || p < 0 || p > 65535)
        return ST_ERROR;
    *out = (int)p;
    return 0;
}

const char *cluster_instance_parse(struct arena *a, const char *text, size_t len,
                                   struct cluster_instance *inst)
{
    struct json_value *v;
    const char *jerr;
    size_t off;
    memset(inst, 0, sizeof *inst);
    if (len > CLUSTER_VALUE_MAX)
        return "value too large";
    if (json_parse(a, text, len, NULL, &v, &jerr, &off) != ST_OK)
        return "not JSON";
    if (v->type != JSON_OBJECT)
        return "not a JSON object";
    const struct json_value *id = json_get(v, "id"), *host = json_get(v, "host"), *t;
    if (!id || id->type != JSON_STRING || id->len == 0 || id->len >= CLUSTER_ID_MAX)
        return "no valid \"id\"";
    if (!host || host->type != JSON_STRING || host->len == 0 || host->len >= CLUSTER_HOST_MAX)
        return "no valid \"host\"";
    memcpy(inst->id, id->u.str, id->len + 1);
    memcpy(inst->host, host->u.str, host->len + 1);
    if (port_member(v, "http_port", &inst->http_port) != 0 ||
        port_member(v, "grpc_port", &inst->grpc_port) != 0 ||
        port_member(v, "metrics_port", &inst->metrics_port) != 0 || inst->grpc_port == 0)
        return "no valid \"grpc_port\" (or a bad port)";
    inst->ready = (t = json_get(v, "ready")) && t->type == JSON_TRUE;
    inst->draining = (t = json_get(v, "draining")) && t->type == JSON_TRUE;
    inst->version = (t = json_get(v, "version")) && t->type == JSON_STRING ? t->u.str : "";
    const struct json_value *models = json_get(v, "models");
    if (!models)
        return NULL;
    if (models->type != JSON_ARRAY || models->len > CLUSTER_MAX_MODELS)
        return "\"models\" is not an array of at most 256 models";
    struct cluster_model *ms = arena_calloc(a, models->len ? models->len : 1, sizeof *ms);
    if (!ms)
        return "out of memory";
    for (uint32_t i = 0; i < models->len; i++) {
        const struct json_value *m = &models->u.items[i];
        const struct json_value *name = json_get(m, "name");
        if (!name || name->type != JSON_STRING || name->len == 0)
            return "a model without a \"name\"";
        ms[i].name = name->u.str;
        if (parse_strings(a, json_get(m, "versions"), &ms[i].versions, &ms[i].n_versions) != 0 ||
            parse_strings(a, json_get(m, "ready_versions"), &ms[i].ready_versions,
                          &ms[i].n_ready_versions) != 0)
            return "a model's versions are not an array of strings";
    }
    inst->models = ms;
    inst->n_models = models->len;
    return NULL;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct cluster_instance *)a)->id,
                  ((const struct cluster_instance *)b)->id);
}

static struct snapshot_impl *snapshot_new(void)
{
    struct snapshot_impl *s = mem_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    arena_init(&s->arena, 16384, (size_t)CLUSTER_MAX_INSTANCES * (CLUSTER_VALUE_MAX + 4096));
    return s;
}

/* Builds a snapshot of the entries and makes it current. A value that is
 * not a registration is logged once (until it changes). */
static void publish(struct discovery *d)
{
    struct snapshot_impl *s = snapshot_new();
    if (!s) {
        log_error("discovery: out of memory; the instance set is not updated");
        return;
    }
    uint32_t n = d->n_entries < CLUSTER_MAX_INSTANCES ? d->n_entries : CLUSTER_MAX_INSTANCES;
    struct cluster_instance *insts = arena_calloc(&s->arena, n ? n : 1, sizeof *insts);
    uint32_t k = 0;
    for (uint32_t i = 0; insts && i < n; i++) {
        struct entry *e = &d->entries[i];
        const char *why = cluster_instance_parse(&s->arena, e->value, e->value_len, &insts[k]);
        if (why) {
            if (!e->logged)
                log_warn("discovery: %s (revision %lld) is not an inferd registration: %s", e->key,
                         (long long)e->mod_revision, why);
            e->logged = true;
            continue;
        }
        insts[k++].mod_revision = e->mod_revision;
    }
    if (insts)
        qsort(insts, k, sizeof *insts, by_id);
    s->pub.instances = insts;
    s->pub.n_instances = insts ? k : 0;
    s->pub.generation = atomic_load(&d->generation) + 1;
    pthread_mutex_lock(&d->lock);
    struct snapshot_impl *old = d->current;
    d->current = s;
    atomic_store(&d->generation, s->pub.generation);
    pthread_mutex_unlock(&d->lock);
    cluster_snapshot_release(&old->pub);
    if (d->cfg.on_change)
        d->cfg.on_change(d->cfg.on_change_ctx, &s->pub);
}

static void entries_clear(struct discovery *d)
{
    for (uint32_t i = 0; i < d->n_entries; i++) {
        mem_free(d->entries[i].key);
        mem_free(d->entries[i].value);
    }
    d->n_entries = 0;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *s = mem_alloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* Sets key's value (a put), or removes the key (put false). Out of
 * memory or over the limit, the put is dropped (logged). */
static void entry_set(struct discovery *d, const struct etcd_kv *kv, bool put)
{
    uint32_t i = 0;
    while (i < d->n_entries && strcmp(d->entries[i].key, kv->key) != 0)
        i++;
    if (!put) {
        if (i < d->n_entries) {
            mem_free(d->entries[i].key);
            mem_free(d->entries[i].value);
            d->entries[i] = d->entries[--d->n_entries];
        }
        return;
    }
    char *value = dup_bytes(kv->value, kv->value_len);
    if (!value) {
        log_error("discovery: out of memory; %s not updated", kv->key);
        return;
    }
    if (i == d->n_entries) {
        if (d->n_entries == CLUSTER_MAX_INSTANCES) {
            log_warn("discovery: more than %d instances registered; %s ignored",
                     CLUSTER_MAX_INSTANCES, kv->key);
            mem_free(value);
            return;
        }
        char *key = dup_bytes(kv->key, kv->key_len);
        if (!key) {
            mem_free(value);
            return;
        }
        d->entries[d->n_entries++] = (struct entry){.key = key};
    }
    struct entry *e = &d->entries[i];
    mem_free(e->value);
    e->value = value;
    e->value_len = kv->value_len;
    e->mod_revision = kv->mod_revision;
    e->logged = false;
}

static void set_connected(struct discovery *d, bool connected)
{
    int link = connected ? 1 : 2;
    if (link == d->link)
        return;
    d->link = link;
    char ep[300];
    const struct cluster_snapshot *s = discovery_snapshot(d);
    if (connected)
        log_info("discovery: watching %s on etcd %s (%u instances)", d->prefix,
                 etcd_client_endpoint(&d->etcd, ep, sizeof ep), s->n_instances);
    else
        log_warn("discovery: %s; keeping the last %u instances, retrying", d->etcd.err,
                 s->n_instances);
    cluster_snapshot_release(s);
}

/* Reads the whole prefix. */
static int read_range(struct discovery *d)
{
    struct arena a;
    arena_init(&a, 65536, (size_t)CLUSTER_MAX_INSTANCES * (CLUSTER_VALUE_MAX / 2 + 4096));
    struct etcd_kv *kvs;
    uint32_t n;
    int64_t revision;
    int rc = etcd_range_prefix(&d->etcd, d->prefix, &a, &kvs, &n, &revision);
    if (rc == 0) {
        entries_clear(d);
        for (uint32_t i = 0; i < n; i++)
            entry_set(d, &kvs[i], true);
        d->next_revision = revision + 1;
        publish(d);
    }
    arena_free(&a);
    return rc;
}

/* Follows the watch until it breaks or the discovery stops. */
static void follow(struct discovery *d)
{
    struct arena a;
    arena_init(&a, 65536, ETCD_ANSWER_MAX * 4u);
    while (!atomic_load(&d->stop)) {
        arena_reset(&a);
        struct etcd_watch_msg msg;
        int rc = etcd_watch_next(&d->etcd, WATCH_WAIT_MS, &a, &msg);
        if (rc == 1)
            continue;
        if (rc < 0)
            break;
        if (msg.compact_revision > 0 || msg.canceled) {
            /* The resume point is gone: read everything again. */
            log_info("discovery: watch canceled by etcd%s%s; reading %s again",
                     msg.cancel_reason[0] ? ": " : "", msg.cancel_reason, d->prefix);
            d->next_revision = 0;
            break;
        }
        if (msg.n_events == 0)
            continue;
        for (uint32_t i = 0; i < msg.n_events; i++) {
            const struct etcd_event *ev = &msg.events[i];
            entry_set(d, &ev->kv, ev->type == ETCD_EVENT_PUT);
            if (ev->kv.mod_revision >= d->next_revision)
                d->next_revision = ev->kv.mod_revision + 1;
        }
        publish(d);
    }
    arena_free(&a);
    etcd_client_disconnect(&d->etcd);
}

static void sleep_ms(struct discovery *d, uint32_t ms)
{
    uint64_t until = clock_now_ms() + ms;
    while (!atomic_load(&d->stop) && clock_now_ms() < until) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void *discovery_main(void *arg)
{
    struct discovery *d = arg;
    uint32_t backoff = BACKOFF_MIN_MS;
    while (!atomic_load(&d->stop)) {
        if ((d->next_revision == 0 && read_range(d) != 0) ||
            etcd_watch_open(&d->etcd, d->prefix, d->next_revision) != 0) {
            if (atomic_load(&d->stop))
                break;
            set_connected(d, false);
            sleep_ms(d, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        set_connected(d, true);
        backoff = BACKOFF_MIN_MS;
        follow(d);
        if (!atomic_load(&d->stop) && d->next_revision != 0) {
            set_connected(d, false);
            sleep_ms(d, backoff);
        }
    }
    return NULL;
}

int discovery_start(const struct discovery_config *cfg, struct discovery **out, struct error *err)
{
    struct discovery *d = mem_calloc(1, sizeof *d);
    if (!d)
        return error_set(err, 500, "out of memory");
    d->cfg = *cfg;
    const char *prefix = cfg->prefix ? cfg->prefix : "/inferd/";
    if ((size_t)snprintf(d->prefix, sizeof d->prefix, "%sinstances/", prefix) >= sizeof d->prefix) {
        mem_free(d);
        return error_set(err, 400, "--etcd-prefix is too long");
    }
    d->entries = mem_calloc(CLUSTER_MAX_INSTANCES, sizeof *d->entries);
    d->current = snapshot_new();
    if (!d->entries || !d->current) {
        mem_free(d->entries);
        cluster_snapshot_release(d->current ? &d->current->pub : NULL);
        mem_free(d);
        return error_set(err, 500, "out of memory");
    }
    if (etcd_client_init(&d->etcd, cfg->endpoints, cfg->timeout_ms, &d->stop, err) != 0) {
        mem_free(d->entries);
        cluster_snapshot_release(&d->current->pub);
        mem_free(d);
        return ST_ERROR;
    }
    pthread_mutex_init(&d->lock, NULL);
    if (thread_start(&d->tid, "etcd-discover", discovery_main, d) != 0) {
        etcd_client_free(&d->etcd);
        pthread_mutex_destroy(&d->lock);
        mem_free(d->entries);
        cluster_snapshot_release(&d->current->pub);
        mem_free(d);
        return error_set(err, 500, "cannot start the discovery thread");
    }
    *out = d;
    return 0;
}

void discovery_stop(struct discovery *d)
{
    if (!d)
        return;
    atomic_store(&d->stop, true);
    pthread_join(d->tid, NULL);
    etcd_client_free(&d->etcd);
    entries_clear(d);
    mem_free(d->entries);
    cluster_snapshot_release(&d->current->pub);
    pthread_mutex_destroy(&d->lock);
    mem_free(d);
}

const struct cluster_snapshot *discovery_snapshot(struct discovery *d)
{
    pthread_mutex_lock(&d->lock);
    const struct cluster_snapshot *s = cluster_snapshot_retain(&d->current->pub);
    pthread_mutex_unlock(&d->lock);
    return s;
}

uint64_t discovery_generation(const struct discovery *d)
{
    return atomic_load(&d->generation);
}
