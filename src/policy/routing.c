#include "policy/routing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "model/lookup.h"
#include "obs/metrics.h"
#include "policy/guard.h"
#include "policy/shadow.h"

#define ROUTING_FILE "routing.json"
#define ROUTING_FILE_MAX ((size_t)1 << 20)

/* What a model keeps across its tables: the canary guard, the shadow
 * statistics, the rollback count. Reference counted (snapshots). */
struct route_state {
    atomic_uint refs;
    char name[ROUTE_MODEL_MAX];
    struct guard guard;
    struct shadow_stats *shadow;
    atomic_uint_fast64_t rollbacks;
};

struct routing_entry {
    struct route_state *state;
    struct route_table *table;
};

struct routing_snapshot {
    atomic_uint refs;
    uint32_t count;
    struct routing_entry entries[]; /* sorted by name */
};

struct routing {
    char *repo_dir;
    struct repository *repo;
    pthread_mutex_t lock; /* current: taking a reference, swapping */
    struct routing_snapshot *current;
    atomic_uint count; /* current->count, read without the lock */
    pthread_mutex_t write_lock; /* every change: one at a time */
    uint64_t changes;           /* routing_put()s so far (write_lock) */
    /* File writes of rollbacks in flight on their own threads
     * (write_lock); routing_free waits for them. */
    uint32_t syncing;
    pthread_cond_t synced;
    /* The table a load's check read from the file, published once the
     * model's entry is (write_lock). */
    struct {
        char name[ROUTE_MODEL_MAX];
        struct route_table *table; /* NULL: the model has no file */
        uint64_t changes;
        bool valid;
    } pending;
};

/* What a call holds from its routing stage to its done hook (call arena). */
struct route_hold {
    struct routing *rt;
    struct routing_snapshot *snap;
    const struct routing_entry *e;
    struct model *shadow_target; /* taken by the shadow stage */
};

/* ---- states and snapshots -------------------------------------------------------- */

static struct route_state *state_new(const char *name)
{
    struct route_state *st = mem_calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->shadow = shadow_stats_new(name);
    if (!st->shadow) {
        mem_free(st);
        return NULL;
    }
    atomic_init(&st->refs, 1);
    snprintf(st->name, sizeof st->name, "%s", name);
    guard_init(&st->guard);
    return st;
}

static void state_unref(struct route_state *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
        guard_destroy(&st->guard);
        shadow_stats_unref(st->shadow);
        mem_free(st);
    }
}

static void snapshot_unref(struct routing_snapshot *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < s->count; i++) {
        route_table_unref(s->entries[i].table);
        state_unref(s->entries[i].state);
    }
    mem_free(s);
}

static struct routing_snapshot *snapshot_acquire(struct routing *rt)
{
    pthread_mutex_lock(&rt->lock);
    struct routing_snapshot *s = rt->current;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&rt->lock);
    return s;
}

static const struct routing_entry *snapshot_entry(const struct routing_snapshot *s,
                                                  const char *name)
{
    uint32_t lo = 0, hi = s->count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        int c = strcmp(s->entries[mid].state->name, name);
        if (c == 0)
            return &s->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Publishes the current snapshot with `name`'s table replaced by t (a
 * reference moved in), or the name removed (t NULL). The model's state is
 * kept across tables. write_lock held. */
static int publish(struct routing *rt, const char *name, struct route_table *t)
{
    struct routing_snapshot *old = rt->current;
    struct routing_snapshot *s =
        mem_calloc(1, sizeof *s + (old->count + 1) * sizeof(struct routing_entry));
    if (!s)
        return -ENOMEM;
    atomic_init(&s->refs, 1);
    struct route_state *st = NULL;
    const struct routing_entry *prev = snapshot_entry(old, name);
    if (t) {
        st = prev ? prev->state : state_new(name);
        if (!st) {
            mem_free(s);
            return -ENOMEM;
        }
        if (prev)
            atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
    }
    bool placed = false;
    for (uint32_t i = 0; i < old->count; i++) {
        const struct routing_entry *e = &old->entries[i];
        int c = strcmp(e->state->name, name);
        if (c > 0 && t && !placed) {
            s->entries[s->count++] = (struct routing_entry){st, t};
            placed = true;
        }
        if (c == 0)
            continue;
        s->entries[s->count++] = (struct routing_entry){e->state, route_table_ref(e->table)};
        atomic_fetch_add_explicit(&e->state->refs, 1, memory_order_relaxed);
    }
    if (t && !placed)
        s->entries[s->count++] = (struct routing_entry){st, t};
    /* A new table starts a new window (the guard judges one generation). */
    if (t && t->canary && t->has_guard && !t->rolled_back)
        guard_reset(&st->guard, &t->guard, t->generation);
    pthread_mutex_lock(&rt->lock);
    rt->current = s;
    atomic_store_explicit(&rt->count, s->count, memory_order_relaxed);
    pthread_mutex_unlock(&rt->lock);
    snapshot_unref(old);
    return 0;
}

struct routing *routing_new(const char *repo_dir)
{
    struct routing *rt = mem_calloc(1, sizeof *rt);
    if (!rt)
        return NULL;
    rt->repo_dir = mem_strdup(repo_dir);
    rt->current = mem_calloc(1, sizeof *rt->current);
    if (!rt->repo_dir || !rt->current) {
        mem_free(rt->repo_dir);
        mem_free(rt->current);
        mem_free(rt);
        return NULL;
    }
    atomic_init(&rt->current->refs, 1);
    pthread_mutex_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->write_lock, NULL);
    pthread_cond_init(&rt->synced, NULL);
    return rt;
}

void routing_set_repository(struct routing *rt, struct repository *repo)
{
    rt->repo = repo;
}

void routing_free(struct routing *rt)
{
    if (!rt)
        return;
    pthread_mutex_lock(&rt->write_lock);
    while (rt->syncing)
        pthread_cond_wait(&rt->synced, &rt->write_lock);
    pthread_mutex_unlock(&rt->write_lock);
    pthread_cond_destroy(&rt->synced);
    snapshot_unref(rt->current);
    route_table_unref(rt->pending.table);
    pthread_mutex_destroy(&rt->lock);
    pthread_mutex_destroy(&rt->write_lock);
    mem_free(rt->repo_dir);
    mem_free(rt);
}

/* ---- the file ------------------------------------------------------------------------ */

static void file_path(const struct routing *rt, const char *model, const char *suffix, char *out,
                      size_t size)
{
    snprintf(out, size, "%s/%s/%s%s", rt->repo_dir, model, ROUTING_FILE, suffix);
}

/* Reads the model's file: 0 with *text (mem_alloc'd) and *len, 1 when
 * there is none, -1 with err. */
static int file_read(const struct routing *rt, const char *model, char **text, size_t *len,
                     struct error *err)
{
    char path[4096];
    file_path(rt, model, "", path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        return error_set(err, 400, "%s: %s", path, strerror(errno));
    }
    char *buf = mem_alloc(ROUTING_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, ROUTING_FILE_MAX + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf)
        return error_set(err, 500, "out of memory reading %s", path);
    if (bad || n > ROUTING_FILE_MAX) {
        mem_free(buf);
        return error_set(err, 400, "%s: %s", path,
                         bad ? "cannot be read" : "larger than 1 MiB");
    }
    *text = buf;
    *len = n;
    return 0;
}

/* Writes the table's JSON to the model's file: a temporary file, fsync,
 * rename over the old one, fsync of the directory. */
static int file_write(const struct routing *rt, const char *model, const struct route_table *t,
                      struct error *err)
{
    char path[4096], tmp[4096 + 8], dir[4096];
    file_path(rt, model, "", path, sizeof path);
    file_path(rt, model, ".tmp", tmp, sizeof tmp);
    snprintf(dir, sizeof dir, "%s/%s", rt->repo_dir, model);
    struct buf b;
    buf_init(&b, ROUTING_FILE_MAX);
    struct json_writer w;
    json_w_init(&w, &b);
    route_write_json(t, model, &w);
    buf_append(&b, "\n", 1);
    int rc = ST_ERROR;
    int fd = -1;
    if (b.err) {
        error_set(err, 500, "out of memory writing the routing table");
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error_set(err, 500, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t off = 0;
    while (off < b.len) {
        ssize_t w2 = write(fd, b.data + off, b.len - off);
        if (w2 < 0 && errno == EINTR)
            continue;
        if (w2 <= 0) {
            error_set(err, 500, "cannot write %s: %s", tmp, strerror(errno));
            goto out;
        }
        off += (size_t)w2;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        error_set(err, 500, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        error_set(err, 500, "cannot replace %s: %s", path, strerror(errno));
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc)
        unlink(tmp);
    buf_free(&b);
    return rc;
}

/* ---- the repository hooks -------------------------------------------------------------- */

static void pending_clear(struct routing *rt)
{
    route_table_unref(rt->pending.table);
    rt->pending.table = NULL;
    rt->pending.valid = false;
}

static int hook_check(void *ctx, const char *name, const struct model_entry *e,
                      const struct model_snapshot *current, struct error *err)
{
    struct routing *rt = ctx;
    char *text = NULL;
    size_t len = 0;
    struct route_table *t = NULL;
    int rc = 0;
    pthread_mutex_lock(&rt->write_lock);
    pending_clear(rt);
    int found = file_read(rt, name, &text, &len, err);
    if (found < 0) {
        rc = ST_ERROR;
        goto out;
    }
    if (found == 0) {
        struct routing_snapshot *s = rt->current;
        const struct routing_entry *prev = snapshot_entry(s, name);
        struct error why;
        if (route_parse(text, len, prev ? prev->table : NULL, &t, &why) != 0 ||
            route_check(t, e, current, &why) != 0) {
            rc = error_set(err, 400, "%s/%s: %s", name, ROUTING_FILE, why.msg);
            route_table_unref(t);
            goto out;
        }
        /* A restart keeps the generation the file recorded. */
        t->generation = prev ? prev->table->generation + 1
                             : (t->expect_generation ? t->expect_generation : 1);
        t->expect_generation = 0;
    }
    snprintf(rt->pending.name, sizeof rt->pending.name, "%s", name);
    rt->pending.table = t;
    rt->pending.changes = rt->changes;
    rt->pending.valid = true;
out:
    pthread_mutex_unlock(&rt->write_lock);
    mem_free(text);
    return rc;
}

static void hook_published(void *ctx, const char *name, const struct model_entry *e)
{
    struct routing *rt = ctx;
    pthread_mutex_lock(&rt->write_lock);
    bool mine = rt->pending.valid && strcmp(rt->pending.name, name) == 0;
    if (!e || e->state != MODEL_READY) {
        if (snapshot_entry(rt->current, name) && publish(rt, name, NULL) != 0)
            log_error("model %s: out of memory removing its routing table", name);
    } else if (mine && rt->pending.changes == rt->changes) {
        /* Not changed by a PUT since the file was read. */
        struct route_table *t = rt->pending.table;
        rt->pending.table = NULL;
        if (t) {
            if (publish(rt, name, t) != 0) {
                log_error("model %s: out of memory publishing its routing table", name);
                route_table_unref(t);
            } else {
                log_info("model %s: routing table %s/%s (generation %llu)", name, name,
                         ROUTING_FILE, (unsigned long long)t->generation);
            }
        } else if (snapshot_entry(rt->current, name) && publish(rt, name, NULL) != 0) {
            log_error("model %s: out of memory removing its routing table", name);
        }
    }
    if (mine)
        pending_clear(rt);
    pthread_mutex_unlock(&rt->write_lock);
}

struct repository_hooks routing_repository_hooks(struct routing *rt)
{
    return (struct repository_hooks){.ctx = rt, .check = hook_check,
                                     .published = hook_published};
}

/* ---- the API ------------------------------------------------------------------------------ */

static void write_empty(const char *model, struct json_writer *w)
{
    json_w_obj_begin(w);
    json_w_key(w, "model");
    json_w_cstr(w, model);
    json_w_key(w, "generation");
    json_w_uint(w, 0);
    json_w_obj_end(w);
}

/* 0 when model is loaded (any state), else -1 with the lookup's 404. */
static int model_known(struct routing *rt, const char *model, struct error *err)
{
    struct model_snapshot *s = repository_acquire(rt->repo);
    const struct model_entry *e = model_lookup_entry(s, model, strlen(model), err);
    repository_release(rt->repo, s);
    return e ? ST_OK : ST_ERROR;
}

int routing_get(struct routing *rt, const char *model, struct json_writer *w, struct error *err)
{
    if (model_known(rt, model, err) != 0)
        return ST_ERROR;
    struct routing_snapshot *s = snapshot_acquire(rt);
    const struct routing_entry *e = snapshot_entry(s, model);
    if (e)
        route_write_json(e->table, model, w);
    else
        write_empty(model, w);
    snapshot_unref(s);
    return 0;
}

int routing_put(struct routing *rt, const char *model, const char *body, size_t len,
                struct json_writer *w, struct error *err)
{
    struct route_table *t = NULL;
    int rc = ST_ERROR;
    pthread_mutex_lock(&rt->write_lock);
    const struct routing_entry *prev = snapshot_entry(rt->current, model);
    struct model_snapshot *s = repository_acquire(rt->repo);
    const struct model_entry *e = model_lookup_entry(s, model, strlen(model), err);
    if (!e || route_parse(body, len, prev ? prev->table : NULL, &t, err) != 0 ||
        route_check(t, e, s, err) != 0) {
        repository_release(rt->repo, s);
        goto out;
    }
    repository_release(rt->repo, s);
    uint64_t current = prev ? prev->table->generation : 0;
    if (t->expect_generation && t->expect_generation != current) {
        error_set(err, 409, "generation %llu is not the current one (%llu): read it again",
                  (unsigned long long)t->expect_generation, (unsigned long long)current);
        goto out;
    }
    t->expect_generation = 0;
    t->generation = current + 1;
    if (file_write(rt, model, t, err) != 0)
        goto out;
    rt->changes++;
    route_write_json(t, model, w);
    if (publish(rt, model, t) != 0) {
        error_set(err, 500, "out of memory publishing the routing table");
        goto out;
    }
    log_info("model %s: routing table generation %llu set through the API", model,
             (unsigned long long)t->generation);
    t = NULL;
    rc = 0;
out:
    pthread_mutex_unlock(&rt->write_lock);
    route_table_unref(t);
    return rc;
}

/* Writes a model's current table to its file, on a thread of its own (a
 * rollback is decided on an I/O thread, which must not wait for fsync).
 * Whatever changed meanwhile, the file ends up with the newest table. */
struct file_sync {
    struct routing *rt;
    char name[ROUTE_MODEL_MAX];
};

static void *file_sync_main(void *arg)
{
    struct file_sync *job = arg;
    struct routing *rt = job->rt;
    struct error err;
    pthread_mutex_lock(&rt->write_lock);
    const struct routing_entry *e = snapshot_entry(rt->current, job->name);
    if (e && file_write(rt, job->name, e->table, &err) != 0)
        log_error("model %s: the rollback is not in %s (%s); a restart restores the canary",
                  job->name, ROUTING_FILE, err.msg);
    rt->syncing--;
    pthread_cond_broadcast(&rt->synced);
    pthread_mutex_unlock(&rt->write_lock);
    mem_free(job);
    return NULL;
}

/* write_lock held. */
static void file_sync_start(struct routing *rt, const char *name)
{
    struct file_sync *job = mem_calloc(1, sizeof *job);
    pthread_attr_t attr;
    pthread_t tid;
    if (job) {
        job->rt = rt;
        snprintf(job->name, sizeof job->name, "%s", name);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, file_sync_main, job);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
            rt->syncing++;
            return;
        }
        mem_free(job);
    }
    log_error("model %s: cannot start writing the rollback to %s; a restart restores the "
              "canary",
              name, ROUTING_FILE);
}

/* A guard tripped on the canary of `generation`: weight 0 in the table at
 * once, in its file soon after. Any thread (the one that recorded the
 * request). */
static void rollback(struct routing *rt, struct route_state *st, uint64_t generation,
                     const char *reason)
{
    pthread_mutex_lock(&rt->write_lock);
    const struct routing_entry *e = snapshot_entry(rt->current, st->name);
    if (!e || e->table->generation != generation || !e->table->canary) {
        pthread_mutex_unlock(&rt->write_lock);
        return;
    }
    struct route_table *t = route_rolled_back(e->table, clock_wall_ms(), reason);
    if (!t) {
        pthread_mutex_unlock(&rt->write_lock);
        log_error("model %s: out of memory rolling the canary back", st->name);
        return;
    }
    t->generation = generation + 1;
    atomic_fetch_add_explicit(&st->rollbacks, 1, memory_order_relaxed);
    rt->changes++;
    log_warn("model %s: canary version %lld rolled back (weight %.2f%% -> 0): %s", st->name,
             (long long)t->canary_version, t->rollback_weight_bp / 100.0, reason);
    if (publish(rt, st->name, t) != 0) {
        log_error("model %s: out of memory publishing the rollback", st->name);
        route_table_unref(t);
    } else {
        file_sync_start(rt, st->name);
    }
    pthread_mutex_unlock(&rt->write_lock);
}

/* ---- the stages ------------------------------------------------------------------------------ */

static const char *call_header(const void *ctx, const char *name, size_t *len)
{
    const struct infer_call *call = ctx;
    return call->header ? call->header(call, name, len) : NULL;
}

/* A per-thread xorshift for draws (canary without key, shadow share). */
static uint64_t draw(void)
{
    static _Thread_local uint64_t x;
    if (!x)
        x = clock_now_ns() ^ ((uint64_t)(uintptr_t)&x << 16) ^ 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static const struct model *version_of(const struct model_entry *e, int64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)v);
    return registry_version(e, text);
}

/* Replaces the call's model (resolve's choice) by m. */
static void use_model(struct infer_call *call, const struct model *m, enum route_kind kind)
{
    if (m != call->req.model) {
        model_unref(call->req.model);
        call->req.model = model_ref((struct model *)m);
    }
    call->route = kind;
}

/* The pin header's version, looked up like a URL version. */
static enum stage_result pin(struct infer_call *call, const struct route_choice *c)
{
    char text[32];
    struct error err;
    if (c->pin_len >= sizeof text) {
        model_unref(call->req.model);
        call->req.model = NULL;
        call->route = ROUTE_PIN;
        return serve_call_error(call, 400,
                                "failed to get model version from specified version string "
                                "'%.24s...' (pin header)",
                                c->pin);
    }
    memcpy(text, c->pin, c->pin_len);
    text[c->pin_len] = '\0';
    const struct model *m = model_lookup(call->snapshot, call->model_name,
                                         strlen(call->model_name), text, NULL, &err);
    if (!m) {
        /* Nothing serves it: no version to report or count (as for a
         * version in the URL that is not loaded). */
        model_unref(call->req.model);
        call->req.model = NULL;
        call->route = ROUTE_PIN;
        return serve_call_error(call, err.status, "%s (pin header)", err.msg);
    }
    use_model(call, m, ROUTE_PIN);
    return STAGE_CONTINUE;
}

/* The shadow copy's model, when this call takes one: a reference, or NULL. */
static struct model *shadow_target(const struct infer_call *call, const struct route_table *t)
{
    if (!t->shadow || t->shadow_bp == 0 || draw() % ROUTE_BUCKETS >= t->shadow_bp)
        return NULL;
    const struct model_entry *e = call->entry;
    if (t->shadow_model[0] && strcmp(t->shadow_model, call->model_name) != 0)
        e = snapshot_find(call->snapshot, t->shadow_model, strlen(t->shadow_model));
    if (!e || e->state != MODEL_READY)
        return NULL;
    const struct model *m = version_of(e, t->shadow_version);
    /* A copy to the version that answers is no comparison. */
    if (!m || m == call->req.model || m->sched_cfg.decoupled ||
        call->req.model->sched_cfg.decoupled)
        return NULL;
    return model_ref((struct model *)m);
}

/* A model without a table: only the default pin header applies. */
static enum stage_result pin_without_table(struct infer_call *call)
{
    struct route_choice c = {.kind = ROUTE_PIN};
    if (call->route == ROUTE_URL ||
        !(c.pin = call_header(call, ROUTE_DEFAULT_PIN_HEADER, &c.pin_len)))
        return STAGE_CONTINUE;
    return pin(call, &c);
}

enum stage_result routing_stage_route(struct infer_call *call, const void *cfg)
{
    struct routing *rt = (struct routing *)cfg;
    if (atomic_load_explicit(&rt->count, memory_order_relaxed) == 0)
        return pin_without_table(call); /* no model has a table */
    struct routing_snapshot *s = snapshot_acquire(rt);
    const struct routing_entry *e = snapshot_entry(s, call->model_name);
    if (!e) {
        snapshot_unref(s);
        return pin_without_table(call);
    }
    struct route_hold *h = arena_calloc(&call->req.arena, 1, sizeof *h);
    if (!h) {
        snapshot_unref(s);
        return serve_call_error(call, 503, "out of memory");
    }
    h->rt = rt;
    h->snap = s;
    h->e = e;
    call->route_ctx = h;
    const struct route_table *t = e->table;
    if (call->route != ROUTE_URL) {
        struct route_choice c;
        route_choose(t, call_header, call, draw(), &c);
        if (c.kind == ROUTE_PIN) {
            enum stage_result r = pin(call, &c);
            if (r != STAGE_CONTINUE)
                return r;
        } else {
            /* A rule whose version is gone (unloaded since the table was
             * set) falls back to the newest version. */
            const struct model *m = c.version >= 0 ? version_of(call->entry, c.version) : NULL;
            if (m)
                use_model(call, m, c.kind);
            else
                call->route = ROUTE_DEFAULT;
        }
    }
    h->shadow_target = shadow_target(call, t);
    return STAGE_CONTINUE;
}

/* Whether the call's answer counts as a canary failure (guard.h). */
static bool failed_5xx(const struct infer_call *call)
{
    return call->req.rc != 0 && call->req.err.status >= 500;
}

void routing_route_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct route_hold *h = call->route_ctx;
    if (!h)
        return;
    const struct route_table *t = h->e->table;
    bool cancelled = atomic_load_explicit(&call->req.cancelled, memory_order_relaxed) ||
                     (call->req.rc != 0 && call->req.err.status == 499);
    bool client_error = call->req.rc != 0 && call->req.err.status < 500;
    if (call->route == ROUTE_CANARY && t->has_guard && !t->rolled_back && !cancelled &&
        !client_error && call->req.model) {
        bool canary = call->req.model->version == t->canary_version;
        uint64_t now = clock_now_ns();
        char reason[ROUTE_REASON_MAX];
        if (guard_record(&h->e->state->guard, t->generation, canary, failed_5xx(call),
                         now - call->received_ns, now, reason, sizeof reason))
            rollback(h->rt, h->e->state, t->generation, reason);
    }
    if (h->shadow_target)
        model_unref(h->shadow_target);
    snapshot_unref(h->snap);
    call->route_ctx = NULL;
}

enum stage_result routing_stage_shadow(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    struct route_hold *h = call->route_ctx;
    /* A stateful model's request means nothing without its sequence's
     * state, which only the primary version holds (serve/seqbatch.h): no
     * copy (the route's done releases the target). */
    if (!h || !h->shadow_target || call->req.model->config.sequence_batching.enabled)
        return STAGE_CONTINUE;
    struct model *target = h->shadow_target;
    h->shadow_target = NULL;
    call->shadow_ctx = shadow_start(h->e->state->shadow, h->e->table, target, call);
    return STAGE_CONTINUE;
}

void routing_shadow_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    if (call->shadow_ctx)
        shadow_primary_done(call->shadow_ctx, call);
    call->shadow_ctx = NULL;
}

/* ---- reading ---------------------------------------------------------------------------------- */

void routing_write_metrics(struct routing *rt, struct buf *out)
{
    struct routing_snapshot *s = snapshot_acquire(rt);
    metrics_write_header(out, "inferd_route_rollbacks_total", "counter",
                         "Canaries whose guard tripped and whose weight went to 0");
    struct shadow_stats *all[256];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->count; i++) {
        const struct route_state *st = s->entries[i].state;
        const char *labels[] = {"model", st->name};
        metrics_write_u64(out, "inferd_route_rollbacks_total", labels, 1,
                          atomic_load_explicit(&st->rollbacks, memory_order_relaxed));
        if (n < sizeof all / sizeof all[0])
            all[n++] = st->shadow;
    }
    shadow_write_metrics(all, n, out);
    snapshot_unref(s);
}

void routing_write_summary(struct routing *rt, struct json_writer *w)
{
    struct routing_snapshot *s = snapshot_acquire(rt);
    json_w_arr_begin(w);
    uint64_t now = clock_now_ns();
    for (uint32_t i = 0; i < s->count; i++) {
        const struct routing_entry *e = &s->entries[i];
        const struct route_table *t = e->table;
        json_w_obj_begin(w);
        json_w_key(w, "model");
        json_w_cstr(w, e->state->name);
        json_w_key(w, "table");
        route_write_json(t, e->state->name, w);
        if (t->canary) {
            /* What the guard sees now. */
            struct guard_view v;
            guard_read(&e->state->guard, now, &v);
            json_w_key(w, "window");
            json_w_obj_begin(w);
            json_w_key(w, "stable_requests");
            json_w_uint(w, v.requests[0]);
            json_w_key(w, "stable_errors");
            json_w_uint(w, v.errors[0]);
            json_w_key(w, "canary_requests");
            json_w_uint(w, v.requests[1]);
            json_w_key(w, "canary_errors");
            json_w_uint(w, v.errors[1]);
            json_w_obj_end(w);
        }
        if (t->shadow) {
            json_w_key(w, "shadow_stats");
            shadow_write_summary(e->state->shadow, w);
        }
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
    snapshot_unref(s);
}
