#include "model/model.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/onnxruntime.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "sched/sched.h"

#define MODEL_FILE "model.onnx"
#define DEFAULT_MAX_BATCH 64
#define DEFAULT_QUEUE_DELAY_US 100
#define PATH_MAX_LEN 4096

/* Formats a path; false (and an empty path) if it does not fit. */
static bool path_fmt(char *out, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool path_fmt(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        out[0] = '\0';
        return false;
    }
    return true;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A version directory name is a decimal number without sign or leading zeros. */
static bool parse_version(const char *s, int64_t *out)
{
    if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 18)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    *out = strtoll(s, NULL, 10);
    return true;
}

/* Newest version directory of model_dir that holds a model file; -1 if none. */
static int64_t newest_version(const char *model_dir)
{
    DIR *d = opendir(model_dir);
    if (!d)
        return -1;
    int64_t best = -1;
    struct dirent *e;
    char path[PATH_MAX_LEN];
    while ((e = readdir(d)) != NULL) {
        int64_t v;
        if (!parse_version(e->d_name, &v) || v <= best)
            continue;
        if (path_fmt(path, sizeof path, "%s/%s/%s", model_dir, e->d_name, MODEL_FILE) &&
            is_file(path))
            best = v;
    }
    closedir(d);
    return best;
}

/* A model directory has at least one numeric version subdirectory; other
 * directories (such as models/build with the scripts that made the models)
 * are not models. */
static bool has_version_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    int64_t v;
    while (!found && (e = readdir(d)) != NULL)
        found = parse_version(e->d_name, &v);
    closedir(d);
    return found;
}

/* Every input and output has a variable leading dimension. */
static bool has_batch_dim(const struct model_info *info)
{
    if (info->ninputs == 0 || info->noutputs == 0)
        return false;
    for (uint32_t i = 0; i < info->ninputs; i++)
        if (info->inputs[i].ndim == 0 || info->inputs[i].dims[0] != -1)
            return false;
    for (uint32_t i = 0; i < info->noutputs; i++)
        if (info->outputs[i].ndim == 0 || info->outputs[i].dims[0] != -1)
            return false;
    return true;
}

/* The documented rule: instances x intra-op threads <= the cores this
 * process may run on. */
static int auto_intra_op_threads(uint32_t instances)
{
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int n = cores / (int)instances;
    return n < 1 ? 1 : n;
}

static void model_free(struct model *m)
{
    if (!m)
        return;
    sched_stop(m->sched);
    for (uint32_t i = 0; i < m->ninstances; i++)
        m->backend->unload(m->instances[i]);
    mem_free(m->instances);
    model_info_free(&m->info);
    mem_free(m->name);
    mem_free(m->path);
    mem_free(m);
}

static int model_load(const struct registry_options *opts, const char *name, int64_t version,
                      struct model **out, struct error *err)
{
    struct model *m = mem_calloc(1, sizeof *m);
    if (!m)
        return error_set(err, 500, "out of memory");
    char path[PATH_MAX_LEN];
    if (!path_fmt(path, sizeof path, "%s/%s/%lld/%s", opts->repository, name,
                  (long long)version, MODEL_FILE)) {
        model_free(m);
        return error_set(err, 400, "model path too long");
    }
    m->name = mem_strdup(name);
    m->path = mem_strdup(path);
    if (!m->name || !m->path) {
        model_free(m);
        return error_set(err, 500, "out of memory");
    }
    m->version = version;
    snprintf(m->version_str, sizeof m->version_str, "%lld", (long long)version);
    m->platform = "onnxruntime_onnx";
    m->backend = &backend_onnxruntime;

    uint32_t count = opts->instances ? opts->instances : 1;
    m->instances = mem_calloc(count, sizeof *m->instances);
    if (!m->instances) {
        model_free(m);
        return error_set(err, 500, "out of memory");
    }
    uint64_t t0 = clock_now_ns();
    struct backend_load_args args = {
        .path = m->path,
        .intra_op_threads = opts->intra_op_threads ? opts->intra_op_threads
                                                   : auto_intra_op_threads(count),
        .inter_op_threads = opts->inter_op_threads,
    };
    for (uint32_t i = 0; i < count; i++) {
        struct model_info info = {0};
        if (m->backend->load(&args, &m->instances[i], i == 0 ? &m->info : &info, err) != 0) {
            model_free(m);
            return -1;
        }
        m->ninstances++;
        model_info_free(&info);
    }
    m->load_ms = (clock_now_ns() - t0) / 1000000u;
    m->batched = has_batch_dim(&m->info);
    /* Without a config file: batch up to DEFAULT_MAX_BATCH samples with a
     * short delay when the model has a batch dimension; larger requests
     * still run, alone. */
    m->sched_cfg = (struct sched_config){
        .max_batch_size = m->batched ? DEFAULT_MAX_BATCH : 0,
        .dynamic_batching = m->batched,
        .max_queue_delay_us = DEFAULT_QUEUE_DELAY_US,
        .max_queue_size = opts->queue_limit,
        .allow_oversize = true,
    };
    int rc = sched_start(m, &m->sched_cfg, &m->sched);
    if (rc) {
        model_free(m);
        return error_set(err, 500, "cannot start workers: %s", strerror(-rc));
    }
    *out = m;
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct model_entry *)a)->name, ((const struct model_entry *)b)->name);
}

static void load_entry(const struct registry_options *opts, struct model_entry *e)
{
    char dir[PATH_MAX_LEN], cfg[PATH_MAX_LEN];
    path_fmt(dir, sizeof dir, "%s/%s", opts->repository, e->name);
    if (path_fmt(cfg, sizeof cfg, "%s/config.pbtxt", dir) && is_file(cfg))
        log_warn("model %s: config.pbtxt is not read by this version; inputs, outputs and "
                 "batching come from the ONNX file",
                 e->name);
    int64_t version = newest_version(dir);
    if (version < 0) {
        e->state = MODEL_UNAVAILABLE;
        snprintf(e->reason, sizeof e->reason, "no version directory with a %s file", MODEL_FILE);
        log_error("model %s: %s", e->name, e->reason);
        return;
    }
    struct error err;
    error_clear(&err);
    if (model_load(opts, e->name, version, &e->model, &err) != 0) {
        e->state = MODEL_UNAVAILABLE;
        snprintf(e->reason, sizeof e->reason, "%s", err.msg);
        log_error("model %s version %lld failed to load: %s", e->name, (long long)version,
                  err.msg);
        return;
    }
    e->state = MODEL_READY;
    const struct model *m = e->model;
    if (m->sched_cfg.dynamic_batching)
        log_info("model %s version %lld loaded in %llu ms (%u inputs, %u outputs, %u instances, "
                 "batching up to %u after %llu us)",
                 e->name, (long long)version, (unsigned long long)m->load_ms, m->info.ninputs,
                 m->info.noutputs, m->ninstances, m->sched_cfg.max_batch_size,
                 (unsigned long long)m->sched_cfg.max_queue_delay_us);
    else
        log_info("model %s version %lld loaded in %llu ms (%u inputs, %u outputs, %u instances)",
                 e->name, (long long)version, (unsigned long long)m->load_ms, m->info.ninputs,
                 m->info.noutputs, m->ninstances);
}

int registry_load(const struct registry_options *opts, struct registry *reg, struct error *err)
{
    reg->entries = NULL;
    reg->count = 0;
    DIR *d = opendir(opts->repository);
    if (!d)
        return error_set(err, 500, "cannot open model repository '%s': %s", opts->repository,
                         strerror(errno));
    uint32_t cap = 0;
    struct dirent *e;
    char path[PATH_MAX_LEN];
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (!path_fmt(path, sizeof path, "%s/%s", opts->repository, e->d_name) || !is_dir(path))
            continue;
        if (!has_version_dir(path)) {
            log_debug("%s: no version directories, not a model", path);
            continue;
        }
        if (reg->count == cap) {
            cap = cap ? cap * 2 : 8;
            struct model_entry *grown = mem_realloc(reg->entries, cap * sizeof *grown);
            if (!grown) {
                rc = error_set(err, 500, "out of memory");
                break;
            }
            reg->entries = grown;
        }
        struct model_entry *me = &reg->entries[reg->count];
        memset(me, 0, sizeof *me);
        me->name = mem_strdup(e->d_name);
        if (!me->name) {
            rc = error_set(err, 500, "out of memory");
            break;
        }
        reg->count++;
    }
    closedir(d);
    if (rc) {
        registry_free(reg);
        return rc;
    }
    if (reg->count)
        qsort(reg->entries, reg->count, sizeof *reg->entries, entry_cmp);
    for (uint32_t i = 0; i < reg->count; i++)
        load_entry(opts, &reg->entries[i]);
    return 0;
}

void registry_free(struct registry *reg)
{
    for (uint32_t i = 0; i < reg->count; i++) {
        model_free(reg->entries[i].model);
        mem_free(reg->entries[i].name);
    }
    mem_free(reg->entries);
    reg->entries = NULL;
    reg->count = 0;
}

const struct model_entry *registry_find(const struct registry *reg, const char *name, size_t len)
{
    size_t lo = 0, hi = reg->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *n = reg->entries[mid].name;
        size_t nlen = strlen(n);
        int c = memcmp(n, name, nlen < len ? nlen : len);
        if (c == 0)
            c = nlen < len ? -1 : nlen > len;
        if (c == 0)
            return &reg->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool registry_all_ready(const struct registry *reg)
{
    for (uint32_t i = 0; i < reg->count; i++)
        if (reg->entries[i].state != MODEL_READY)
            return false;
    return true;
}

int model_input_index(const struct model *m, const char *name)
{
    for (uint32_t i = 0; i < m->info.ninputs; i++)
        if (strcmp(m->info.inputs[i].name, name) == 0)
            return (int)i;
    return -1;
}

int model_output_index(const struct model *m, const char *name)
{
    for (uint32_t i = 0; i < m->info.noutputs; i++)
        if (strcmp(m->info.outputs[i].name, name) == 0)
            return (int)i;
    return -1;
}
