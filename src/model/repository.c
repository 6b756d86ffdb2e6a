#include "model/repository.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

struct repository {
    struct repository_options opts;
    pthread_mutex_t lock; /* guards `current` (the swap and the reader's incref) */
    struct model_snapshot *current;

    pthread_t manager;
    bool manager_started;
    pthread_mutex_t qlock; /* guards the command queue, the dead list and stopping */
    pthread_cond_t qcond;
    struct repo_cmd *cmds_head, *cmds_tail;
    struct model *dead; /* versions whose last reference is gone */
    bool stopping;
};

/* ---- snapshots ----------------------------------------------------------- */

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct model_entry *)a)->name, ((const struct model_entry *)b)->name);
}

static void snapshot_free(struct model_snapshot *s)
{
    for (uint32_t i = 0; i < s->count; i++)
        model_entry_clear(&s->entries[i]);
    mem_free(s->entries);
    mem_free(s);
}

struct model_snapshot *repository_acquire(struct repository *r)
{
    pthread_mutex_lock(&r->lock);
    struct model_snapshot *s = r->current;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return s;
}

void repository_release(struct repository *r, struct model_snapshot *s)
{
    (void)r;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        snapshot_free(s);
}

const struct model_entry *snapshot_find(const struct model_snapshot *s, const char *name,
                                        size_t len)
{
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *n = s->entries[mid].name;
        size_t nlen = strlen(n);
        int c = memcmp(n, name, nlen < len ? nlen : len);
        if (c == 0)
            c = nlen < len ? -1 : nlen > len;
        if (c == 0)
            return &s->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool snapshot_all_ready(const struct model_snapshot *s)
{
    for (uint32_t i = 0; i < s->count; i++)
        if (s->entries[i].state != MODEL_READY || s->entries[i].failed_versions)
            return false;
    return true;
}

/* Copies an entry for a new snapshot: its own name and version array, one
 * more reference on each version. */
static int entry_copy(struct model_entry *dst, const struct model_entry *src)
{
    *dst = *src;
    dst->name = mem_strdup(src->name);
    dst->versions = src->nversions ? mem_calloc(src->nversions, sizeof *dst->versions) : NULL;
    if (!dst->name || (src->nversions && !dst->versions)) {
        mem_free(dst->name);
        mem_free(dst->versions);
        return -ENOMEM;
    }
    for (uint32_t v = 0; v < src->nversions; v++)
        dst->versions[v] = model_ref(src->versions[v]);
    return 0;
}

/* Publishes a snapshot made of the current one with `name` replaced by
 * *entry (moved in), or removed when entry is NULL. Manager thread only
 * (the only writer), so reading `current` without the lock is safe here. */
static int publish(struct repository *r, const char *name, struct model_entry *entry)
{
    struct model_snapshot *old = r->current;
    struct model_snapshot *s = mem_calloc(1, sizeof *s);
    uint32_t cap = old->count + 1;
    if (s)
        s->entries = mem_calloc(cap, sizeof *s->entries);
    if (!s || !s->entries) {
        mem_free(s);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < old->count; i++) {
        if (strcmp(old->entries[i].name, name) == 0)
            continue;
        if (entry_copy(&s->entries[s->count], &old->entries[i]) != 0) {
            snapshot_free(s);
            return -ENOMEM;
        }
        s->count++;
    }
    if (entry) {
        s->entries[s->count++] = *entry;
        memset(entry, 0, sizeof *entry);
    }
    qsort(s->entries, s->count, sizeof *s->entries, entry_cmp);
    atomic_init(&s->refs, 1);
    pthread_mutex_lock(&r->lock);
    r->current = s;
    pthread_mutex_unlock(&r->lock);
    repository_release(r, old);
    return 0;
}

/* ---- unloading ------------------------------------------------------------- */

/* Any thread: the version's last reference is gone; the manager unloads it. */
static void on_last_unref(struct model *m)
{
    struct repository *r = m->owner;
    pthread_mutex_lock(&r->qlock);
    m->next_dead = r->dead;
    r->dead = m;
    pthread_cond_signal(&r->qcond);
    pthread_mutex_unlock(&r->qlock);
}

static void adopt(struct repository *r, struct model_entry *e)
{
    for (uint32_t v = 0; v < e->nversions; v++) {
        e->versions[v]->on_last_unref = on_last_unref;
        e->versions[v]->owner = r;
    }
}

static void unload_dead(struct repository *r, struct model *dead)
{
    (void)r;
    if (!dead)
        return;
    while (dead) {
        struct model *next = dead->next_dead;
        log_info("model %s version %s sha256 %.12s unloaded", dead->name, dead->version_str,
                 dead->sha256);
        model_free(dead);
        dead = next;
    }
    /* A session's weights and arenas are large and freed all at once: give
     * the pages back now, or reload after reload leaves the heap holding
     * them (RSS creeping up with the number of reloads). */
    malloc_trim(0);
}

/* ---- loading ------------------------------------------------------------- */

/* Loads (or reloads) `name`. A model that fails to load keeps its previous
 * versions serving, when it had any; the failure is returned. */
static int load_model(struct repository *r, const char *name, const char *config,
                      struct error *err)
{
    if (!model_dir_is_model(&r->opts.load, name))
        return error_set(err, 404, "no model directory '%s' in the repository", name);
    struct model_entry e;
    model_entry_load(&r->opts.load, name, config, &e);
    adopt(r, &e);
    const struct model_entry *old = snapshot_find(r->current, name, strlen(name));
    if (e.state != MODEL_READY && old && old->state == MODEL_READY) {
        error_set(err, 400, "failed to load '%s' (the previous versions keep serving): %s", name,
                  e.reason);
        log_warn("%s", err->msg);
        model_entry_clear(&e);
        return -1;
    }
    bool failed = e.state != MODEL_READY || e.failed_versions;
    if (failed)
        error_set(err, 400, "failed to load '%s': %s", name, e.reason);
    int rc = publish(r, name, &e);
    if (rc) {
        model_entry_clear(&e);
        return error_set(err, 500, "out of memory publishing '%s'", name);
    }
    return failed ? -1 : 0;
}

static int unload_model(struct repository *r, const char *name, struct error *err)
{
    if (!snapshot_find(r->current, name, strlen(name)))
        return error_set(err, 400, "model '%s' is not loaded", name);
    if (publish(r, name, NULL) != 0)
        return error_set(err, 500, "out of memory unloading '%s'", name);
    log_info("model %s: unloading once its requests are answered", name);
    return 0;
}

/* Names of the model directories of the repository, sorted; *count set. */
static char **list_model_dirs(const struct repository *r, uint32_t *count)
{
    *count = 0;
    DIR *d = opendir(r->opts.load.repository);
    if (!d)
        return NULL;
    char **names = NULL;
    uint32_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!model_dir_is_model(&r->opts.load, de->d_name))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = mem_realloc(names, cap * sizeof *names);
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[*count] = mem_strdup(de->d_name)))
            break;
        (*count)++;
    }
    closedir(d);
    return names;
}

static int strcmp_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        mem_free(names[i]);
    mem_free(names);
}

static bool wanted_at_start(const struct repository *r, const char *name)
{
    if (r->opts.mode != CONTROL_EXPLICIT)
        return true;
    for (uint32_t i = 0; i < r->opts.nload_models; i++)
        if (strcmp(r->opts.load_models[i], "*") == 0 ||
            strcmp(r->opts.load_models[i], name) == 0)
            return true;
    return false;
}

/* Poll mode: load new models, reload changed ones, unload removed ones. */
static void poll_repository(struct repository *r)
{
    uint32_t n;
    char **names = list_model_dirs(r, &n);
    struct error err;
    for (uint32_t i = 0; i < n; i++) {
        const struct model_entry *e = snapshot_find(r->current, names[i], strlen(names[i]));
        if (e && e->fingerprint == model_dir_fingerprint(&r->opts.load, names[i]))
            continue;
        log_info("model %s: %s on disk, loading", names[i], e ? "changed" : "new");
        load_model(r, names[i], NULL, &err);
    }
    /* Walk a copy of the names: unloading publishes new snapshots. */
    uint32_t count = r->current->count;
    char **loaded = mem_calloc(count ? count : 1, sizeof *loaded);
    for (uint32_t i = 0; loaded && i < count; i++)
        loaded[i] = mem_strdup(r->current->entries[i].name);
    for (uint32_t i = 0; loaded && i < count; i++) {
        bool present = false;
        for (uint32_t j = 0; j < n && !present; j++)
            present = loaded[i] && strcmp(loaded[i], names[j]) == 0;
        if (loaded[i] && !present) {
            log_info("model %s: removed from the repository", loaded[i]);
            unload_model(r, loaded[i], &err);
        }
    }
    if (loaded)
        free_names(loaded, count);
    free_names(names, n);
}

/* ---- the manager thread ------------------------------------------------- */

static void run_cmd(struct repository *r, struct repo_cmd *cmd)
{
    struct error err;
    error_clear(&err);
    int rc = cmd->kind == REPO_LOAD ? load_model(r, cmd->name, cmd->config, &err)
                                    : unload_model(r, cmd->name, &err);
    cmd->status = rc ? (err.status ? err.status : 500) : 0;
    snprintf(cmd->msg, sizeof cmd->msg, "%s", rc ? err.msg : "");
    cmd->done(cmd);
}

static void *manager_main(void *arg)
{
    struct repository *r = arg;
    uint64_t next_poll = clock_now_ns() + (uint64_t)r->opts.poll_secs * 1000000000ull;
    pthread_mutex_lock(&r->qlock);
    while (!r->stopping) {
        if (r->dead) {
            struct model *dead = r->dead;
            r->dead = NULL;
            pthread_mutex_unlock(&r->qlock);
            unload_dead(r, dead);
            pthread_mutex_lock(&r->qlock);
            continue;
        }
        if (r->cmds_head) {
            struct repo_cmd *cmd = r->cmds_head;
            r->cmds_head = cmd->next;
            if (!r->cmds_head)
                r->cmds_tail = NULL;
            pthread_mutex_unlock(&r->qlock);
            run_cmd(r, cmd);
            pthread_mutex_lock(&r->qlock);
            continue;
        }
        if (r->opts.mode == CONTROL_POLL) {
            if (clock_now_ns() >= next_poll) {
                pthread_mutex_unlock(&r->qlock);
                poll_repository(r);
                next_poll = clock_now_ns() + (uint64_t)r->opts.poll_secs * 1000000000ull;
                pthread_mutex_lock(&r->qlock);
                continue;
            }
            struct timespec ts = {.tv_sec = (time_t)(next_poll / 1000000000ull),
                                  .tv_nsec = (long)(next_poll % 1000000000ull)};
            pthread_cond_timedwait(&r->qcond, &r->qlock, &ts);
        } else {
            pthread_cond_wait(&r->qcond, &r->qlock);
        }
    }
    /* Commands that arrived while stopping are answered, not carried out. */
    struct repo_cmd *cmd = r->cmds_head;
    r->cmds_head = r->cmds_tail = NULL;
    pthread_mutex_unlock(&r->qlock);
    while (cmd) {
        struct repo_cmd *next = cmd->next;
        cmd->status = 503;
        snprintf(cmd->msg, sizeof cmd->msg, "the server is shutting down");
        cmd->done(cmd);
        cmd = next;
    }
    return NULL;
}

int repository_submit(struct repository *r, struct repo_cmd *cmd, struct error *err)
{
    if (r->opts.mode != CONTROL_EXPLICIT)
        return error_set(err, 400, "explicit model load / unload is not allowed in model "
                                   "control mode '%s' (start with --model-control-mode explicit)",
                         r->opts.mode == CONTROL_POLL ? "poll" : "none");
    cmd->next = NULL;
    pthread_mutex_lock(&r->qlock);
    if (r->stopping) {
        pthread_mutex_unlock(&r->qlock);
        return error_set(err, 503, "the server is shutting down");
    }
    if (r->cmds_tail)
        r->cmds_tail->next = cmd;
    else
        r->cmds_head = cmd;
    r->cmds_tail = cmd;
    pthread_cond_signal(&r->qcond);
    pthread_mutex_unlock(&r->qlock);
    return 0;
}

/* ---- index ---------------------------------------------------------------- */

void repository_index(struct repository *r, bool ready_only, struct json_writer *w)
{
    uint32_t n;
    char **names = list_model_dirs(r, &n);
    if (n > 1)
        qsort(names, n, sizeof *names, strcmp_ptr);
    struct model_snapshot *s = repository_acquire(r);
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        const struct model_entry *e = snapshot_find(s, names[i], strlen(names[i]));
        if (e && e->nversions) {
            for (uint32_t v = 0; v < e->nversions; v++) {
                json_w_obj_begin(w);
                json_w_key(w, "name");
                json_w_cstr(w, e->name);
                json_w_key(w, "version");
                json_w_cstr(w, e->versions[v]->version_str);
                json_w_key(w, "state");
                json_w_cstr(w, "READY");
                json_w_key(w, "reason");
                json_w_cstr(w, "");
                json_w_obj_end(w);
            }
            if (!e->failed_versions)
                continue;
        }
        if (ready_only)
            continue;
        json_w_obj_begin(w);
        json_w_key(w, "name");
        json_w_cstr(w, names[i]);
        json_w_key(w, "state");
        json_w_cstr(w, "UNAVAILABLE");
        json_w_key(w, "reason");
        json_w_cstr(w, e ? e->reason : "unloaded");
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
    repository_release(r, s);
    free_names(names, n);
}

/* ---- open / close ------------------------------------------------------------ */

int repository_open(const struct repository_options *opts, struct repository **out,
                    struct error *err)
{
    DIR *d = opendir(opts->load.repository);
    if (!d)
        return error_set(err, 500, "cannot open model repository '%s': %s",
                         opts->load.repository, strerror(errno));
    closedir(d);
    struct repository *r = mem_calloc(1, sizeof *r);
    struct model_snapshot *s = mem_calloc(1, sizeof *s);
    if (!r || !s) {
        mem_free(r);
        mem_free(s);
        return error_set(err, 500, "out of memory");
    }
    r->opts = *opts;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->qlock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->qcond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->refs, 1);
    r->current = s;

    uint32_t n;
    char **names = list_model_dirs(r, &n);
    struct error ignored;
    for (uint32_t i = 0; i < n; i++)
        if (wanted_at_start(r, names[i]))
            load_model(r, names[i], NULL, &ignored);
    for (uint32_t i = 0; i < opts->nload_models; i++) {
        const char *want = opts->load_models[i];
        if (strcmp(want, "*") != 0 && !snapshot_find(r->current, want, strlen(want)))
            log_error("--load-model %s: no such model directory in the repository", want);
    }
    free_names(names, n);

    int rc = pthread_create(&r->manager, NULL, manager_main, r);
    if (rc) {
        repository_close(r);
        return error_set(err, 500, "cannot start the repository manager: %s", strerror(rc));
    }
    r->manager_started = true;
    *out = r;
    return 0;
}

void repository_close(struct repository *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->qlock);
    r->stopping = true;
    pthread_cond_broadcast(&r->qcond);
    pthread_mutex_unlock(&r->qlock);
    if (r->manager_started)
        pthread_join(r->manager, NULL);
    /* Dropping the last snapshot drops the last references: with the
     * manager gone, versions are freed right here. */
    struct model_snapshot *s = r->current;
    r->current = NULL;
    for (uint32_t i = 0; i < s->count; i++)
        for (uint32_t v = 0; v < s->entries[i].nversions; v++)
            s->entries[i].versions[v]->on_last_unref = NULL;
    repository_release(r, s);
    unload_dead(r, r->dead);
    r->dead = NULL;
    pthread_cond_destroy(&r->qcond);
    pthread_mutex_destroy(&r->qlock);
    pthread_mutex_destroy(&r->lock);
    mem_free(r);
}
