/* Token metering (obs/usage.h): the day table, the totals since the
 * start, the query, the metrics and the file. */
#include "obs/usage.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/day.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "base/thread.h"
#include "obs/metrics.h"

#define USAGE_FORMAT "inferd-usage/1"
_Static_assert(USAGE_MAX_ROWS == 100000 && USAGE_NAME_MAX == 256, "usage_record's warning");
/* The file's ceiling: USAGE_MAX_ROWS rows of long names fit. */
#define USAGE_FILE_MAX ((size_t)96 << 20)
/* A copy's names: two of at most USAGE_NAME_MAX bytes per row. */
#define COPY_NAMES_MAX ((size_t)2 * USAGE_NAME_MAX * USAGE_MAX_ROWS)
#define PATH_MAX_LEN 4096

/* One row: a (day, tenant, model) of the day table, or a (tenant, model)
 * of the totals (day 0). */
struct entry {
    uint64_t day;
    char *tenant; /* NULL: none */
    char *model;
    uint64_t requests, prompt, completion;
};

/* Rows in an array, found through an open-addressing index that holds
 * their position + 1 (0: empty). nslots is a power of two, twice cap. */
struct table {
    struct entry *e;
    uint32_t n, cap;
    uint32_t *slots;
    uint32_t nslots;
};

struct usage {
    pthread_mutex_t lock;
    struct table rows;   /* by day, tenant and model */
    struct table totals; /* by tenant and model, since the start */
    uint64_t newest_day; /* retention runs when a later day is recorded */
    uint32_t retention_days;
    uint64_t dropped;
    bool drop_logged;
    bool dirty; /* rows changed since the last write */
    /* The writer (path set). */
    char *path;
    char dir[PATH_MAX_LEN];
    bool writer_started, stopping;
    bool write_failing; /* a failure was logged; the next success is too */
    pthread_cond_t cond;
    pthread_t tid;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* ---- the table ------------------------------------------------------------- */

static uint32_t key_hash(uint64_t day, const char *tenant, const char *model)
{
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i < 8; i++) {
        h ^= (day >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    h ^= tenant ? 1 : 2; /* no tenant differs from every name */
    h *= 1099511628211ull;
    for (const char *p = tenant ? tenant : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    h ^= 0xff; /* the boundary between the names */
    h *= 1099511628211ull;
    for (const char *p = model; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static bool same_tenant(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The index slot of the row, or of the empty slot where it would go. */
static uint32_t *table_slot(const struct table *t, uint64_t day, const char *tenant,
                            const char *model)
{
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = key_hash(day, tenant, model) & mask;; i = (i + 1) & mask) {
        uint32_t k = t->slots[i];
        if (k == 0)
            return &t->slots[i];
        const struct entry *e = &t->e[k - 1];
        if (e->day == day && same_tenant(e->tenant, tenant) && strcmp(e->model, model) == 0)
            return &t->slots[i];
    }
}

static void table_reindex(struct table *t)
{
    memset(t->slots, 0, (size_t)t->nslots * sizeof *t->slots);
    for (uint32_t k = 0; k < t->n; k++)
        *table_slot(t, t->e[k].day, t->e[k].tenant, t->e[k].model) = k + 1;
}

/* Room for one more row: false when out of memory. */
static bool table_grow(struct table *t)
{
    if (t->n < t->cap)
        return true;
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    struct entry *e = mem_realloc(t->e, (size_t)cap * sizeof *e);
    if (!e)
        return false;
    t->e = e;
    uint32_t *slots = mem_calloc((size_t)cap * 2, sizeof *slots);
    if (!slots)
        return false;
    mem_free(t->slots);
    t->slots = slots;
    t->nslots = cap * 2;
    t->cap = cap;
    table_reindex(t);
    return true;
}

/* The row of the key, added (zero) when new; NULL past USAGE_MAX_ROWS or
 * when out of memory. */
static struct entry *table_get(struct table *t, uint64_t day, const char *tenant, const char *model)
{
    if (t->nslots) {
        uint32_t k = *table_slot(t, day, tenant, model);
        if (k)
            return &t->e[k - 1];
    }
    if (t->n == USAGE_MAX_ROWS || !table_grow(t))
        return NULL;
    char *tn = tenant ? mem_strdup(tenant) : NULL;
    char *mn = mem_strdup(model);
    if ((tenant && !tn) || !mn) {
        mem_free(tn);
        mem_free(mn);
        return NULL;
    }
    struct entry *e = &t->e[t->n];
    *e = (struct entry){.day = day, .tenant = tn, .model = mn};
    *table_slot(t, day, tenant, model) = ++t->n;
    return e;
}

/* Drops the rows of days before first_day. */
static void table_drop_before(struct table *t, uint64_t first_day)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < t->n; k++) {
        if (t->e[k].day >= first_day) {
            t->e[kept++] = t->e[k];
            continue;
        }
        mem_free(t->e[k].tenant);
        mem_free(t->e[k].model);
    }
    if (kept == t->n)
        return;
    t->n = kept;
    table_reindex(t);
}

static void table_free(struct table *t)
{
    for (uint32_t k = 0; k < t->n; k++) {
        mem_free(t->e[k].tenant);
        mem_free(t->e[k].model);
    }
    mem_free(t->e);
    mem_free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- recording ---------------------------------------------------------------- */

/* Keeps the retention_days days up to today (today included). */
static void retain(struct usage *u, uint64_t today)
{
    if (today >= u->retention_days)
        table_drop_before(&u->rows, today - u->retention_days + 1);
}

static bool name_fits(const char *s)
{
    return strnlen(s, USAGE_NAME_MAX) < USAGE_NAME_MAX;
}

void usage_record(struct usage *u, const char *tenant, const char *model, uint64_t day,
                  uint32_t prompt_tokens, uint32_t completion_tokens)
{
    bool fits = (!tenant || name_fits(tenant)) && name_fits(model);
    bool log_drop = false;
    pthread_mutex_lock(&u->lock);
    if (day > u->newest_day) {
        u->newest_day = day;
        retain(u, day);
    }
    struct entry *rows[2] = {fits ? table_get(&u->rows, day, tenant, model) : NULL,
                             fits ? table_get(&u->totals, 0, tenant, model) : NULL};
    if (!rows[0] || !rows[1]) {
        u->dropped++;
        log_drop = !u->drop_logged;
    }
    for (int i = 0; i < 2; i++) {
        if (!rows[i])
            continue;
        rows[i]->requests = sat_add(rows[i]->requests, 1);
        rows[i]->prompt = sat_add(rows[i]->prompt, prompt_tokens);
        rows[i]->completion = sat_add(rows[i]->completion, completion_tokens);
    }
    u->dirty = u->dirty || rows[0];
    u->drop_logged = u->drop_logged || log_drop;
    pthread_mutex_unlock(&u->lock);
    if (log_drop)
        log_warn("usage: a call of model %.64s (tenant %.64s) is not metered: %s "
                 "(inferd_usage_rows_dropped_total counts such calls)",
                 model, tenant ? tenant : "none",
                 fits ? "the table holds its 100000 rows, or memory ran out"
                      : "a name has 256 bytes or more");
}

/* ---- copies (taken under the lock, used without it) ------------------------------ */

struct copy {
    struct entry *e;
    uint32_t n;
    struct arena names;
};

static bool query_match(const struct entry *e, const struct usage_query *q)
{
    return !q || ((!q->tenant || (e->tenant && strcmp(q->tenant, e->tenant) == 0)) &&
                  (!q->model || strcmp(q->model, e->model) == 0) &&
                  (!q->from_day || e->day >= q->from_day) && (!q->to_day || e->day <= q->to_day));
}

/* Copies t's rows that q matches (NULL: all). Called with the lock
 * held. False when out of memory. */
static bool copy_take(const struct table *t, const struct usage_query *q, struct copy *c)
{
    arena_init(&c->names, 4096, COPY_NAMES_MAX);
    c->n = 0;
    c->e = mem_alloc((size_t)(t->n ? t->n : 1) * sizeof *c->e);
    if (!c->e)
        return false;
    for (uint32_t k = 0; k < t->n; k++) {
        const struct entry *e = &t->e[k];
        if (!query_match(e, q))
            continue;
        struct entry *d = &c->e[c->n++];
        *d = *e;
        d->tenant = e->tenant ? arena_strndup(&c->names, e->tenant, strlen(e->tenant)) : NULL;
        d->model = arena_strndup(&c->names, e->model, strlen(e->model));
        if ((e->tenant && !d->tenant) || !d->model)
            return false;
    }
    return true;
}

static void copy_free(struct copy *c)
{
    mem_free(c->e);
    arena_free(&c->names);
}

/* By day, then tenant (none first), then model. */
static int entry_cmp(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    if (a->day != b->day)
        return a->day < b->day ? -1 : 1;
    if (!a->tenant != !b->tenant)
        return a->tenant ? 1 : -1;
    int c = a->tenant ? strcmp(a->tenant, b->tenant) : 0;
    return c ? c : strcmp(a->model, b->model);
}

/* A sorted copy of t (under u's lock); false when out of memory. */
static bool copy_sorted(struct usage *u, const struct table *t, const struct usage_query *q,
                        struct copy *c)
{
    pthread_mutex_lock(&u->lock);
    bool ok = copy_take(t, q, c);
    pthread_mutex_unlock(&u->lock);
    if (ok)
        qsort(c->e, c->n, sizeof *c->e, entry_cmp);
    return ok;
}

/* ---- the query and the metrics ---------------------------------------------------- */

static void write_counts(struct json_writer *w, uint64_t requests, uint64_t prompt,
                         uint64_t completion)
{
    json_w_key(w, "requests");
    json_w_uint(w, requests);
    json_w_key(w, "prompt_tokens");
    json_w_uint(w, prompt);
    json_w_key(w, "completion_tokens");
    json_w_uint(w, completion);
}

/* {"day", "tenant", "model", and the counts}; total_tokens too for the API. */
static void write_row(struct json_writer *w, const struct entry *e, bool total)
{
    char day[DAY_TEXT_LEN + 1];
    day_format(e->day, day);
    json_w_obj_begin(w);
    json_w_key(w, "day");
    json_w_cstr(w, day);
    json_w_key(w, "tenant");
    if (e->tenant)
        json_w_cstr(w, e->tenant);
    else
        json_w_null(w);
    json_w_key(w, "model");
    json_w_cstr(w, e->model);
    write_counts(w, e->requests, e->prompt, e->completion);
    if (total) {
        json_w_key(w, "total_tokens");
        json_w_uint(w, sat_add(e->prompt, e->completion));
    }
    json_w_obj_end(w);
}

bool usage_write_json(struct usage *u, const struct usage_query *q, struct buf *out)
{
    struct copy c;
    if (!copy_sorted(u, &u->rows, q, &c)) {
        copy_free(&c);
        return false;
    }
    uint64_t requests = 0, prompt = 0, completion = 0;
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "rows");
    json_w_arr_begin(&w);
    for (uint32_t k = 0; k < c.n; k++) {
        write_row(&w, &c.e[k], true);
        requests = sat_add(requests, c.e[k].requests);
        prompt = sat_add(prompt, c.e[k].prompt);
        completion = sat_add(completion, c.e[k].completion);
    }
    json_w_arr_end(&w);
    json_w_key(&w, "totals");
    json_w_obj_begin(&w);
    write_counts(&w, requests, prompt, completion);
    json_w_key(&w, "total_tokens");
    json_w_uint(&w, sat_add(prompt, completion));
    json_w_obj_end(&w);
    json_w_obj_end(&w);
    copy_free(&c);
    return out->err == 0;
}

void usage_write_metrics(struct usage *u, struct buf *out)
{
    struct copy c;
    bool ok = copy_sorted(u, &u->totals, NULL, &c);
    pthread_mutex_lock(&u->lock);
    uint64_t dropped = u->dropped;
    pthread_mutex_unlock(&u->lock);
    if (!ok) {
        copy_free(&c);
        out->err = -ENOMEM;
        return;
    }
    metrics_write_header(out, "inferd_usage_requests_total", "counter",
                         "Settled calls of generative models by tenant and model, since the start");
    for (uint32_t k = 0; k < c.n; k++) {
        const char *labels[] = {"tenant", c.e[k].tenant ? c.e[k].tenant : "", "model",
                                c.e[k].model};
        metrics_write_u64(out, "inferd_usage_requests_total", labels, 2, c.e[k].requests);
    }
    metrics_write_header(out, "inferd_usage_tokens_total", "counter",
                         "Tokens generative models used by tenant, model and kind, since the "
                         "start");
    for (uint32_t k = 0; k < c.n; k++) {
        const char *labels[] = {
            "tenant", c.e[k].tenant ? c.e[k].tenant : "", "model", c.e[k].model, "kind", "prompt"};
        metrics_write_u64(out, "inferd_usage_tokens_total", labels, 3, c.e[k].prompt);
        labels[5] = "completion";
        metrics_write_u64(out, "inferd_usage_tokens_total", labels, 3, c.e[k].completion);
    }
    metrics_write_header(out, "inferd_usage_rows_dropped_total", "counter",
                         "Calls not metered: the usage table was full (or a name too long)");
    metrics_write_u64(out, "inferd_usage_rows_dropped_total", NULL, 0, dropped);
    copy_free(&c);
}

/* ---- the file ------------------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes text to FILE.tmp, fsyncs it, renames it over FILE and fsyncs
 * the directory. */
static int write_file(const struct usage *u, const struct buf *text, struct error *err)
{
    char tmp[PATH_MAX_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", u->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return error_set(err, 500, "usage file %s: cannot write %s: %s", u->path, tmp,
                         strerror(errno));
    int rc = write_all(fd, text->data, text->len);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, u->path) != 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return error_set(err, 500, "usage file %s: cannot write it: %s", u->path, strerror(-rc));
    }
    int dfd = open(u->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* Writes every row (when dirty, or `always`); on failure the rows stay
 * dirty for the next attempt. 0 or ST_ERROR with err. */
static int flush(struct usage *u, bool always, struct error *err)
{
    struct copy c;
    pthread_mutex_lock(&u->lock);
    bool dirty = u->dirty;
    bool ok = !dirty && !always ? true : copy_take(&u->rows, NULL, &c);
    u->dirty = false;
    pthread_mutex_unlock(&u->lock);
    if (!dirty && !always)
        return 0;
    struct buf text;
    buf_init(&text, USAGE_FILE_MAX);
    int rc = 0;
    if (ok) {
        qsort(c.e, c.n, sizeof *c.e, entry_cmp);
        struct json_writer w;
        json_w_init(&w, &text);
        json_w_obj_begin(&w);
        json_w_key(&w, "format");
        json_w_cstr(&w, USAGE_FORMAT);
        json_w_key(&w, "rows");
        json_w_arr_begin(&w);
        for (uint32_t k = 0; k < c.n; k++)
            write_row(&w, &c.e[k], false);
        json_w_arr_end(&w);
        json_w_obj_end(&w);
        buf_putc(&text, '\n');
    }
    copy_free(&c);
    if (!ok || text.err)
        rc = error_set(err, 500, "usage file %s: out of memory writing it", u->path);
    else
        rc = write_file(u, &text, err);
    buf_free(&text);
    if (rc) {
        pthread_mutex_lock(&u->lock);
        u->dirty = true;
        pthread_mutex_unlock(&u->lock);
    }
    return rc;
}

/* A name of the file: a string of 1 to USAGE_NAME_MAX - 1 bytes without
 * NUL, or (null_ok) null. */
static int load_name(const struct json_value *v, bool null_ok, const char **out)
{
    *out = NULL;
    if (null_ok && v && v->type == JSON_NULL)
        return 0;
    if (!v || v->type != JSON_STRING || v->len == 0 || v->len >= USAGE_NAME_MAX ||
        strlen(v->u.str) != v->len)
        return ST_ERROR;
    *out = v->u.str;
    return 0;
}

/* Row i of the file into the day table. */
static int load_row(struct usage *u, const struct json_value *r, uint32_t i, struct error *err)
{
    static const char *const keys[] = {"day",      "tenant",        "model",
                                       "requests", "prompt_tokens", "completion_tokens"};
    if (r->type != JSON_OBJECT)
        return error_set(err, 400, "usage file %s: rows[%u]: expected an object, got %s", u->path,
                         i, json_type_name(r));
    for (uint32_t m = 0; m < r->len; m++) {
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(r->u.members[m].key, keys[k]) != 0)
            k++;
        if (k == sizeof keys / sizeof keys[0])
            return error_set(err, 400, "usage file %s: rows[%u]: unknown key '%.64s'", u->path, i,
                             r->u.members[m].key);
    }
    const struct json_value *day = json_get(r, "day");
    uint64_t d;
    if (!day || day->type != JSON_STRING || day_parse(day->u.str, day->len, &d) != 0)
        return error_set(err, 400, "usage file %s: rows[%u].day: expected a date YYYY-MM-DD",
                         u->path, i);
    const char *tenant, *model;
    if (load_name(json_get(r, "tenant"), true, &tenant) != 0)
        return error_set(err, 400,
                         "usage file %s: rows[%u].tenant: expected null or a name of 1 to %d "
                         "bytes",
                         u->path, i, USAGE_NAME_MAX - 1);
    if (load_name(json_get(r, "model"), false, &model) != 0)
        return error_set(err, 400,
                         "usage file %s: rows[%u].model: expected a name of 1 to %d bytes", u->path,
                         i, USAGE_NAME_MAX - 1);
    uint64_t n[3];
    for (int k = 0; k < 3; k++) {
        const struct json_value *v = json_get(r, keys[3 + k]);
        if (!v || json_num_u64(v, &n[k]) != 0)
            return error_set(err, 400,
                             "usage file %s: rows[%u].%s: expected an integer from 0 to %llu",
                             u->path, i, keys[3 + k], (unsigned long long)UINT64_MAX);
    }
    struct entry *e = table_get(&u->rows, d, tenant, model);
    if (!e)
        return error_set(err, 500, "usage file %s: out of memory loading it", u->path);
    /* A key twice (a hand-edited file) adds up. */
    e->requests = sat_add(e->requests, n[0]);
    e->prompt = sat_add(e->prompt, n[1]);
    e->completion = sat_add(e->completion, n[2]);
    return 0;
}

/* Reads the file when it exists. */
static int load_file(struct usage *u, struct error *err)
{
    char *text;
    size_t len;
    int rc = file_read(u->path, USAGE_FILE_MAX, &text, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return error_set(err, 400, "usage file %s: cannot read it: %s", u->path,
                         rc == -EFBIG ? "larger than 96 MiB" : strerror(-rc));
    struct arena a;
    arena_init(&a, 1 << 16, USAGE_FILE_MAX * 4);
    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(&a, text, len, NULL, &root, &msg, &off) != ST_OK) {
        rc =
            error_set(err, 400, "usage file %s: malformed JSON at byte %zu: %s", u->path, off, msg);
        goto out;
    }
    const struct json_value *format = json_get(root, "format");
    const struct json_value *rows = json_get(root, "rows");
    if (root->type != JSON_OBJECT || !format || format->type != JSON_STRING ||
        strcmp(format->u.str, USAGE_FORMAT) != 0) {
        rc = error_set(err, 400, "usage file %s: not a usage file (\"format\": \"%s\" expected)",
                       u->path, USAGE_FORMAT);
        goto out;
    }
    if (!rows || rows->type != JSON_ARRAY || rows->len > USAGE_MAX_ROWS) {
        rc = error_set(err, 400, "usage file %s: \"rows\" must be an array of at most %u rows",
                       u->path, USAGE_MAX_ROWS);
        goto out;
    }
    for (uint32_t i = 0; i < rows->len && rc == 0; i++)
        rc = load_row(u, &rows->u.items[i], i, err);
out:
    arena_free(&a);
    mem_free(text);
    return rc;
}

static void *writer_main(void *arg)
{
    struct usage *u = arg;
    pthread_mutex_lock(&u->lock);
    while (!u->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += USAGE_FLUSH_MS / 1000;
        ts.tv_nsec += (long)(USAGE_FLUSH_MS % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        int rc = 0;
        while (!u->stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&u->cond, &u->lock, &ts);
        if (u->stopping || !u->dirty)
            continue;
        pthread_mutex_unlock(&u->lock);
        struct error err;
        error_clear(&err);
        rc = flush(u, false, &err);
        if (rc && !u->write_failing)
            log_warn("%s (retrying every %u ms)", err.msg, USAGE_FLUSH_MS);
        else if (!rc && u->write_failing)
            log_info("usage file %s: written again", u->path);
        u->write_failing = rc != 0; /* only this thread reads it until close */
        pthread_mutex_lock(&u->lock);
    }
    pthread_mutex_unlock(&u->lock);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------- */

static int set_path(struct usage *u, const char *path, struct error *err)
{
    size_t len = strlen(path);
    if (len == 0 || len >= PATH_MAX_LEN)
        return error_set(err, 400, "usage file: the path must have 1 to %d bytes",
                         PATH_MAX_LEN - 1);
    u->path = mem_strdup(path);
    if (!u->path)
        return error_set(err, 500, "out of memory");
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(u->dir, sizeof u->dir, ".");
    else
        snprintf(u->dir, sizeof u->dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return 0;
}

int usage_open(const struct usage_options *o, struct usage **out, struct error *err)
{
    *out = NULL;
    struct usage *u = mem_calloc(1, sizeof *u);
    if (!u)
        return error_set(err, 500, "out of memory");
    pthread_mutex_init(&u->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cond, &ca);
    pthread_condattr_destroy(&ca);
    u->retention_days = o->retention_days ? o->retention_days : USAGE_DEFAULT_RETENTION_DAYS;
    if (o->path) {
        if (set_path(u, o->path, err) != 0 || load_file(u, err) != 0)
            goto out_free;
        u->newest_day = (uint64_t)time(NULL) / 86400;
        retain(u, u->newest_day);
        /* Written at once: a directory we cannot write to is found now. */
        if (flush(u, true, err) != 0)
            goto out_free;
        int rc = thread_start(&u->tid, "usage", writer_main, u);
        if (rc) {
            error_set(err, 500, "usage file %s: cannot start its writer: %s", u->path,
                      strerror(rc));
            goto out_free;
        }
        u->writer_started = true;
    }
    *out = u;
    return 0;
out_free:
    usage_close(u);
    return ST_ERROR;
}

void usage_close(struct usage *u)
{
    if (!u)
        return;
    if (u->writer_started) {
        pthread_mutex_lock(&u->lock);
        u->stopping = true;
        pthread_cond_signal(&u->cond);
        pthread_mutex_unlock(&u->lock);
        pthread_join(u->tid, NULL);
        struct error err;
        error_clear(&err);
        if (flush(u, false, &err) != 0)
            log_error("%s: the metering since its last write is lost", err.msg);
    }
    table_free(&u->rows);
    table_free(&u->totals);
    pthread_cond_destroy(&u->cond);
    pthread_mutex_destroy(&u->lock);
    mem_free(u->path);
    mem_free(u);
}
