#include "model/repository.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/onnxruntime.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/procmem.h"
#include "base/status.h"
#include "base/thread.h"

/* What a poll saw of a directory of the repository. */
struct dir_note {
    char *name;
    uint64_t fingerprint;
    char reason[ERROR_MSG_MAX]; /* an unservable directory's; "" for a model */
};

struct dir_notes {
    struct dir_note *items;
    uint32_t count, cap;
};

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

    /* Manager thread only. settling: the directories that changed since
     * they were last loaded or reported, as the last poll saw them; one is
     * acted upon when the next poll sees the same. unservable: the
     * directories reported as cannot-be-served, as reported (so that each
     * is logged once, not at every poll). */
    struct dir_notes settling, unservable;
};

/* ---- notes on directories ------------------------------------------------- */

static const struct dir_note *notes_find(const struct dir_notes *n, const char *name)
{
    for (uint32_t i = 0; i < n->count; i++)
        if (strcmp(n->items[i].name, name) == 0)
            return &n->items[i];
    return NULL;
}

static bool note_is(const struct dir_note *note, uint64_t fingerprint, const char *reason)
{
    return note && note->fingerprint == fingerprint && strcmp(note->reason, reason) == 0;
}

/* Out of memory: the note is dropped (the directory is seen as new again
 * at the next poll). */
static void notes_add(struct dir_notes *n, const char *name, uint64_t fingerprint,
                      const char *reason)
{
    if (n->count == n->cap) {
        uint32_t cap = n->cap ? n->cap * 2 : 8;
        struct dir_note *grown = mem_realloc(n->items, cap * sizeof *grown);
        if (!grown)
            return;
        n->items = grown;
        n->cap = cap;
    }
    struct dir_note *note = &n->items[n->count];
    if (!(note->name = mem_strdup(name)))
        return;
    note->fingerprint = fingerprint;
    snprintf(note->reason, sizeof note->reason, "%s", reason);
    n->count++;
}

static void notes_clear(struct dir_notes *n)
{
    for (uint32_t i = 0; i < n->count; i++)
        mem_free(n->items[i].name);
    mem_free(n->items);
    memset(n, 0, sizeof *n);
}

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
    dst->failures = NULL;
    dst->nfailures = 0;
    if (model_entry_copy_failures(dst, src) != 0) {
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
        INFERD_PROBE_2(model_unloaded, dead->name, dead->version_str);
        model_free(dead);
        dead = next;
    }
    /* A session's weights and arenas are large and freed all at once: give
     * the pages back now, or reload after reload leaves the heap holding
     * them (RSS creeping up with the number of reloads). */
    procmem_trim();
}

/* ---- loading ------------------------------------------------------------- */

static void observe_load(struct repository *r, const char *name,
                         const struct model_failure *failures, uint32_t nfailures)
{
    if (r->opts.observe_load)
        r->opts.observe_load(name, failures, nfailures);
}

/* A reload failed entirely: the old versions keep serving, published with
 * the attempt's failures (the index shows them) and fingerprint (poll mode
 * does not try the same files again). */
static int publish_failed_reload(struct repository *r, const char *name,
                                 const struct model_entry *old,
                                 const struct model_entry *attempt)
{
    struct model_entry kept;
    if (entry_copy(&kept, old) != 0)
        return -ENOMEM;
    if (model_entry_copy_failures(&kept, attempt) != 0) {
        model_entry_clear(&kept);
        return -ENOMEM;
    }
    kept.fingerprint = attempt->fingerprint;
    memcpy(kept.reason, attempt->reason, sizeof kept.reason);
    int rc = publish(r, name, &kept);
    if (rc)
        model_entry_clear(&kept);
    return rc;
}

/* Loads (or reloads) `name`. A model that fails to load keeps its previous
 * versions serving, when it had any; the failure is returned, its message
 * the reason alone (the repository API puts "failed to load 'name': "
 * before it). */
static int load_model(struct repository *r, const char *name, const char *config,
                      struct error *err)
{
    struct model_failure why;
    enum model_dir_kind kind = model_dir_check(&r->opts.load, name, &why);
    if (kind == MODEL_DIR_OTHER)
        return error_set(err, 404, "no model directory '%s' in the repository", name);
    if (kind == MODEL_DIR_UNSERVABLE) {
        observe_load(r, name, &why, 1);
        return error_set(err, 400, "model directory '%s' cannot be served: %s", name,
                         why.reason);
    }
    struct model_entry e;
    model_entry_load(&r->opts.load, name, config, &e);
    adopt(r, &e);
    if (e.state == MODEL_READY && r->opts.hooks.check) {
        struct error why_not;
        error_clear(&why_not);
        if (r->opts.hooks.check(r->opts.hooks.ctx, name, &e, r->current, &why_not) != 0)
            model_entry_refuse(&e, MODEL_FAIL_CONFIG, why_not.msg);
    }
    observe_load(r, name, e.failures, e.nfailures);
    const struct model_entry *old = snapshot_find(r->current, name, strlen(name));
    if (e.state != MODEL_READY && old && old->state == MODEL_READY) {
        error_set(err, 400, "%s (the previous versions keep serving)", e.reason);
        INFERD_PROBE_3(model_load, name, 0, 1);
        log_warn("failed to load '%s': %s", name, err->msg);
        if (publish_failed_reload(r, name, old, &e) != 0)
            log_error("model %s: out of memory recording the failed reload", name);
        model_entry_clear(&e);
        return ST_ERROR;
    }
    bool failed = e.state != MODEL_READY || e.failed_versions;
    if (failed)
        error_set(err, 400, "%s", e.reason);
    INFERD_PROBE_3(model_load, name, !failed, old != NULL); /* old: a reload */
    int rc = publish(r, name, &e);
    if (rc) {
        model_entry_clear(&e);
        return error_set(err, 500, "out of memory publishing '%s'", name);
    }
    if (r->opts.hooks.published)
        r->opts.hooks.published(r->opts.hooks.ctx, name,
                                snapshot_find(r->current, name, strlen(name)));
    return failed ? ST_ERROR : ST_OK;
}

static int unload_model(struct repository *r, const char *name, struct error *err)
{
    if (!snapshot_find(r->current, name, strlen(name)))
        return error_set(err, 400, "model '%s' is not loaded", name);
    if (publish(r, name, NULL) != 0)
        return error_set(err, 500, "out of memory unloading '%s'", name);
    log_info("model %s: unloading once its requests are answered", name);
    if (r->opts.hooks.published)
        r->opts.hooks.published(r->opts.hooks.ctx, name, NULL);
    if (r->opts.observe_gone)
        r->opts.observe_gone(name);
    return 0;
}

/* A directory of the repository that is a model or cannot be served. */
struct repo_dir {
    char *name;
    enum model_dir_kind kind; /* MODEL_DIR_MODEL or MODEL_DIR_UNSERVABLE */
    struct model_failure why; /* UNSERVABLE: why */
};

static int repo_dir_cmp(const void *a, const void *b)
{
    return strcmp(((const struct repo_dir *)a)->name, ((const struct repo_dir *)b)->name);
}

static void free_dirs(struct repo_dir *dirs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        mem_free(dirs[i].name);
    mem_free(dirs);
}

/* The models and unservable directories of the repository, sorted by
 * name; *count set. Out of memory ends the list early. */
static struct repo_dir *scan_dirs(const struct repository *r, uint32_t *count)
{
    *count = 0;
    DIR *d = opendir(r->opts.load.repository);
    if (!d)
        return NULL;
    struct repo_dir *dirs = NULL;
    uint32_t cap = 0;
    struct dirent *de;
    struct model_failure why;
    while ((de = readdir(d)) != NULL) {
        enum model_dir_kind kind = model_dir_check(&r->opts.load, de->d_name, &why);
        if (kind == MODEL_DIR_OTHER)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            struct repo_dir *grown = mem_realloc(dirs, cap * sizeof *dirs);
            if (!grown)
                break;
            dirs = grown;
        }
        struct repo_dir *dir = &dirs[*count];
        if (!(dir->name = mem_strdup(de->d_name)))
            break;
        dir->kind = kind;
        dir->why = why;
        (*count)++;
    }
    closedir(d);
    /* Models with remote versions only (model.h: registry_remote). */
    const struct registry_remote *rm = &r->opts.load.remote;
    for (uint32_t i = 0; i < rm->nnames; i++) {
        bool found = false;
        for (uint32_t j = 0; j < *count && !found; j++)
            found = strcmp(dirs[j].name, rm->names[i]) == 0;
        if (found)
            continue;
        struct repo_dir *grown = mem_realloc(dirs, (*count + 1) * sizeof *dirs);
        if (!grown)
            break;
        dirs = grown;
        if (!(dirs[*count].name = mem_strdup(rm->names[i])))
            break;
        dirs[*count].kind = MODEL_DIR_MODEL;
        memset(&dirs[*count].why, 0, sizeof dirs[*count].why);
        (*count)++;
    }
    if (*count > 1)
        qsort(dirs, *count, sizeof *dirs, repo_dir_cmp);
    return dirs;
}

static const char *dir_reason(const struct repo_dir *d)
{
    return d->kind == MODEL_DIR_UNSERVABLE ? d->why.reason : "";
}

/* A directory that cannot be served: logged once per change (the caller
 * notes it in r->unservable); counted as a failed load when it is one the
 * server should load. */
static void report_unservable(struct repository *r, const struct repo_dir *d, bool wanted)
{
    log_warn("model directory %s cannot be served: %s", d->name, d->why.reason);
    if (wanted)
        observe_load(r, d->name, &d->why, 1);
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

static bool has_model_dir(const struct repo_dir *dirs, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (dirs[i].kind == MODEL_DIR_MODEL && strcmp(dirs[i].name, name) == 0)
            return true;
    return false;
}

/* Poll mode, one directory: load it, or report it as unservable, when it
 * differs from what was last loaded or reported and the previous poll saw
 * it exactly as now (a copy in progress keeps changing, so it is never
 * loaded half-written). Notes it in *settling while it waits, and in
 * *unservable as last reported. */
static void poll_dir(struct repository *r, const struct repo_dir *d, struct dir_notes *settling,
                     struct dir_notes *unservable)
{
    uint64_t fp = model_dir_fingerprint(&r->opts.load, d->name);
    const char *reason = dir_reason(d);
    const struct dir_note *reported = notes_find(&r->unservable, d->name);
    const struct model_entry *e = snapshot_find(r->current, d->name, strlen(d->name));
    bool current = d->kind == MODEL_DIR_MODEL ? e && e->fingerprint == fp
                                              : note_is(reported, fp, reason);
    const struct dir_note *seen = notes_find(&r->settling, d->name);
    if (!current && note_is(seen, fp, reason)) {
        if (d->kind == MODEL_DIR_MODEL) {
            struct error err;
            log_info("model %s: %s on disk, loading", d->name, e ? "changed" : "new");
            load_model(r, d->name, NULL, &err);
        } else {
            report_unservable(r, d, true);
        }
        current = true;
    } else if (!current) {
        if (!seen && d->kind == MODEL_DIR_MODEL)
            log_info("model %s: %s on disk; loading once unchanged for a poll (%u s)", d->name,
                     e ? "changed" : "new", r->opts.poll_secs);
        notes_add(settling, d->name, fp, reason);
    }
    if (d->kind == MODEL_DIR_UNSERVABLE && current)
        notes_add(unservable, d->name, fp, reason);
    else if (d->kind == MODEL_DIR_UNSERVABLE && reported)
        notes_add(unservable, d->name, reported->fingerprint, reported->reason);
}

/* Poll mode: load new models, reload changed ones, unload removed ones,
 * report directories that cannot be served. */
static void poll_repository(struct repository *r)
{
    uint32_t n;
    struct repo_dir *dirs = scan_dirs(r, &n);
    struct dir_notes settling = {0}, unservable = {0};
    for (uint32_t i = 0; i < n; i++)
        poll_dir(r, &dirs[i], &settling, &unservable);
    /* A directory reported unservable that is gone now: forget it (one
     * that became a model is told about by its load). */
    for (uint32_t i = 0; i < r->unservable.count; i++) {
        const char *name = r->unservable.items[i].name;
        if (!notes_find(&unservable, name) && !has_model_dir(dirs, n, name) &&
            r->opts.observe_gone)
            r->opts.observe_gone(name);
    }
    notes_clear(&r->settling);
    notes_clear(&r->unservable);
    r->settling = settling;
    r->unservable = unservable;

    /* Walk a copy of the names: unloading publishes new snapshots. */
    struct error err;
    uint32_t count = r->current->count;
    char **loaded = mem_calloc(count ? count : 1, sizeof *loaded);
    for (uint32_t i = 0; loaded && i < count; i++)
        loaded[i] = mem_strdup(r->current->entries[i].name);
    for (uint32_t i = 0; loaded && i < count; i++) {
        if (loaded[i] && !has_model_dir(dirs, n, loaded[i])) {
            log_info("model %s: removed from the repository", loaded[i]);
            unload_model(r, loaded[i], &err);
        }
    }
    for (uint32_t i = 0; loaded && i < count; i++)
        mem_free(loaded[i]);
    mem_free(loaded);
    free_dirs(dirs, n);
}

/* ---- the manager thread ------------------------------------------------- */

static void run_cmd(struct repository *r, struct repo_cmd *cmd)
{
    struct error err;
    error_clear(&err);
    int rc = cmd->kind == REPO_LOAD ? load_model(r, cmd->name, cmd->config, &err)
                                    : unload_model(r, cmd->name, &err);
    cmd->status = rc ? (err.status ? err.status : 500) : 0;
    /* Triton's wording first: clients match on "failed to load 'm'". */
    cmd->msg[0] = '\0';
    if (rc && snprintf(cmd->msg, sizeof cmd->msg, "failed to %s '%s': %s",
                       cmd->kind == REPO_LOAD ? "load" : "unload", cmd->name, err.msg) < 0)
        snprintf(cmd->msg, sizeof cmd->msg, "%s", err.msg);
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

static void index_row(struct json_writer *w, const char *name, const char *version,
                      const char *state, const char *reason)
{
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, name);
    if (version) {
        json_w_key(w, "version");
        json_w_cstr(w, version);
    }
    json_w_key(w, "state");
    json_w_cstr(w, state);
    json_w_key(w, "reason");
    json_w_cstr(w, reason);
    json_w_obj_end(w);
}

static const struct model_failure *failure_of(const struct model_entry *e, int64_t version)
{
    for (uint32_t i = 0; i < e->nfailures; i++)
        if (e->failures[i].version == version)
            return &e->failures[i];
    return NULL;
}

static bool version_loaded(const struct model_entry *e, int64_t version)
{
    for (uint32_t v = 0; v < e->nversions; v++)
        if (e->versions[v]->version == version)
            return true;
    return false;
}

/* The rows of a model of the snapshot: its loaded versions, then what
 * failed (a failed reload of a loaded version is said on its READY row). */
static void index_entry(struct json_writer *w, const struct model_entry *e, bool ready_only)
{
    char reason[ERROR_MSG_MAX + 64];
    for (uint32_t v = 0; v < e->nversions; v++) {
        const struct model *m = e->versions[v];
        const struct model_failure *f = failure_of(e, m->version);
        if (f)
            snprintf(reason, sizeof reason,
                     "reloading its files failed, the loaded ones keep serving: %s", f->reason);
        index_row(w, e->name, m->version_str, "READY", f ? reason : "");
    }
    if (ready_only)
        return;
    for (uint32_t i = 0; i < e->nfailures; i++) {
        const struct model_failure *f = &e->failures[i];
        if (f->version >= 0 && version_loaded(e, f->version))
            continue;
        char version[24];
        snprintf(version, sizeof version, "%lld", (long long)f->version);
        index_row(w, e->name, f->version >= 0 ? version : NULL, "UNAVAILABLE", f->reason);
    }
    if (!e->nversions && !e->nfailures)
        index_row(w, e->name, NULL, "UNAVAILABLE", e->reason);
}

void repository_index(struct repository *r, bool ready_only, struct json_writer *w)
{
    uint32_t n;
    struct repo_dir *dirs = scan_dirs(r, &n);
    struct model_snapshot *s = repository_acquire(r);
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        const struct model_entry *e = snapshot_find(s, dirs[i].name, strlen(dirs[i].name));
        if (e)
            index_entry(w, e, ready_only);
        else if (!ready_only)
            index_row(w, dirs[i].name, NULL, "UNAVAILABLE",
                      dirs[i].kind == MODEL_DIR_UNSERVABLE ? dirs[i].why.reason : "unloaded");
    }
    json_w_arr_end(w);
    repository_release(r, s);
    free_dirs(dirs, n);
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

    /* At start a model loads at once: there is nothing to serve yet. */
    uint32_t n;
    struct repo_dir *dirs = scan_dirs(r, &n);
    struct error ignored;
    /* ONNX Runtime's one-time state (model/memory.h) is built now, not in
     * the first load, when the repository has a model of its own. */
    for (uint32_t i = 0; i < n; i++)
        if (dirs[i].kind == MODEL_DIR_MODEL) {
            onnxruntime_start();
            break;
        }
    for (uint32_t i = 0; i < n; i++) {
        bool wanted = wanted_at_start(r, dirs[i].name);
        if (dirs[i].kind == MODEL_DIR_UNSERVABLE) {
            report_unservable(r, &dirs[i], wanted);
            notes_add(&r->unservable, dirs[i].name,
                      model_dir_fingerprint(&r->opts.load, dirs[i].name), dirs[i].why.reason);
        } else if (wanted) {
            load_model(r, dirs[i].name, NULL, &ignored);
        }
    }
    for (uint32_t i = 0; i < opts->nload_models; i++) {
        const char *want = opts->load_models[i];
        bool found = strcmp(want, "*") == 0;
        for (uint32_t k = 0; k < n && !found; k++)
            found = strcmp(dirs[k].name, want) == 0;
        if (!found)
            log_error("--load-model %s: no such model directory in the repository", want);
    }
    free_dirs(dirs, n);

    int rc = thread_start(&r->manager, "repo", manager_main, r);
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
    notes_clear(&r->settling);
    notes_clear(&r->unservable);
    pthread_cond_destroy(&r->qcond);
    pthread_mutex_destroy(&r->qlock);
    pthread_mutex_destroy(&r->lock);
    mem_free(r);
}
