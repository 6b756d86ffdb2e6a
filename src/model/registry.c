#include "base/status.h"
#include "model/model.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/onnxruntime.h"
#include "base/sha256.h"
#include "model/backend_config.h"
#include "model/config.h"
#include "model/labels.h"
#include "model/memory.h"
#include "model/warmup.h"
#include "base/clock.h"
#include "base/cpus.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/path.h"
#include "sched/sched.h"

#define MODEL_FILE "model.onnx"
/* Version directories considered per model. */
#define MAX_VERSIONS 1024
#define PATH_MAX_LEN 4096

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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Which numeric version directories list_versions() returns. */
enum version_dirs { VERSIONS_WITH_MODEL, VERSIONS_WITHOUT_MODEL, VERSIONS_ALL };

/* The numeric version directories of model_dir that `which` asks for,
 * ascending, into versions[0..max); returns how many (at most max). */
static uint32_t list_versions(const char *model_dir, enum version_dirs which, int64_t *versions,
                              uint32_t max)
{
    DIR *d = opendir(model_dir);
    if (!d)
        return 0;
    uint32_t n = 0;
    struct dirent *e;
    char path[PATH_MAX_LEN];
    while ((e = readdir(d)) != NULL && n < max) {
        int64_t v;
        if (!parse_version(e->d_name, &v) ||
            !path_fmt(path, sizeof path, "%s/%s", model_dir, e->d_name) || !is_dir(path))
            continue;
        bool has_model = path_fmt(path, sizeof path, "%s/%s/%s", model_dir, e->d_name,
                                  MODEL_FILE) &&
                         is_file(path);
        if (which == VERSIONS_ALL || has_model == (which == VERSIONS_WITH_MODEL))
            versions[n++] = v;
    }
    closedir(d);
    qsort(versions, n, sizeof *versions, cmp_i64);
    return n;
}

/* The documented rule: instances x intra-op threads <= the CPUs this
 * process may use (affinity mask and cgroup CPU quota). */
static int auto_intra_op_threads(uint32_t instances)
{
    int n = cpus_usable() / (int)instances;
    return n < 1 ? 1 : n;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    model_memory_release(m);
    if (m->engine)
        m->engine_ops->stop(m->engine);
    sched_stop(m->sched);
    if (m->prep)
        m->prep_free(m->prep);
    mem_free(m->input_optional);
    if (m->seqbatch)
        m->seqbatch_free(m->seqbatch);
    for (uint32_t i = 0; i < m->ninstances; i++)
        m->backend->unload(m->instances[i]);
    mem_free(m->instances);
    model_labels_free(m->labels, m->info.noutputs);
    /* info owns every entry; a sequence model's counts only those clients
     * see (split_run_info). */
    if (m->run_info.inputs == m->info.inputs && m->run_info.ninputs > m->info.ninputs)
        m->info.ninputs = m->run_info.ninputs;
    if (m->run_info.outputs == m->info.outputs && m->run_info.noutputs > m->info.noutputs)
        m->info.noutputs = m->run_info.noutputs;
    model_info_free(&m->info);
    model_config_free(&m->config);
    mem_free(m->name);
    mem_free(m->path);
    mem_free(m);
}

/* Reads <repo>/<model>/config.pbtxt into *text (mem_alloc'd, NUL-terminated);
 * *text stays NULL when there is no such file. On failure *kind says why. */
static int read_config_text(const char *dir, char **text, size_t *len, struct error *err,
                            enum model_failure_kind *kind)
{
    *kind = MODEL_FAIL_IO;
    char path[PATH_MAX_LEN];
    *text = NULL;
    *len = 0;
    if (!path_fmt(path, sizeof path, "%s/config.pbtxt", dir) || !is_file(path))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return error_set(err, 400, "cannot read %s: %s", path, strerror(errno));
    char *buf = mem_alloc(MODEL_CONFIG_MAX_TEXT + 1);
    if (!buf) {
        fclose(f);
        return error_set(err, 500, "out of memory");
    }
    size_t n = fread(buf, 1, MODEL_CONFIG_MAX_TEXT + 1, f);
    fclose(f);
    if (n > MODEL_CONFIG_MAX_TEXT) {
        mem_free(buf);
        *kind = MODEL_FAIL_CONFIG;
        return error_set(err, 400, "config.pbtxt is larger than %u bytes", MODEL_CONFIG_MAX_TEXT);
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* The model's effective configuration: config.pbtxt checked against the
 * ONNX file, or derived from the ONNX file alone. */
static int model_configure(struct model *m, const char *text, size_t len, struct error *err)
{
    if (!text) {
        if (model_config_from_onnx(m->name, &m->info, &m->config) != 0)
            return error_set(err, 500, "cannot derive a configuration from the ONNX model");
        return 0;
    }
    struct error perr;
    if (model_config_parse(text, len, &m->config, &perr) != 0)
        return error_set(err, perr.status, "config.pbtxt:%s", perr.msg);
    if (model_config_check(&m->config, m->name, &m->info, err) != 0)
        return ST_ERROR;
    for (uint32_t i = 0; i < m->config.ninputs; i++)
        if (m->config.inputs[i].has_reshape)
            return error_set(err, 400, "input '%s': reshape is not supported by this server",
                             m->config.inputs[i].name);
    for (uint32_t i = 0; i < m->config.noutputs; i++)
        if (m->config.outputs[i].has_reshape)
            return error_set(err, 400, "output '%s': reshape is not supported by this server",
                             m->config.outputs[i].name);
    return 0;
}

/* Moves the tensors hidden(cfg, name) selects after the others, keeping
 * both groups' order; returns how many are not hidden. */
static uint32_t hide_last(struct model_io *ios, uint32_t n, const struct model_config *cfg,
                          bool (*hidden)(const struct model_config *, const char *))
{
    uint32_t shown = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (hidden(cfg, ios[i].name))
            continue;
        struct model_io x = ios[i];
        memmove(&ios[shown + 1], &ios[shown], (i - shown) * sizeof *ios);
        ios[shown++] = x;
    }
    return shown;
}

/* What the backend and the scheduler see (run_info) and what clients see
 * (info): the same, but for a sequence model, whose control and state
 * tensors (sequence_batching) are fed and kept by the server
 * (serve/seqbatch.h). They go last, and info counts only the others; info
 * still owns every entry (model_free frees them all). */
static void split_run_info(struct model *m)
{
    if (m->config.sequence_batching.enabled) {
        uint32_t in = hide_last(m->info.inputs, m->info.ninputs, &m->config,
                                model_config_sequence_input);
        uint32_t out = hide_last(m->info.outputs, m->info.noutputs, &m->config,
                                 model_config_sequence_output);
        m->run_info = m->info;
        m->info.ninputs = in;
        m->info.noutputs = out;
        return;
    }
    m->run_info = m->info;
}

/* Narrows the ONNX dims to the configured ones (the check guarantees they
 * agree, and a configured fixed dim is more precise than an ONNX -1). */
static void refine_dims(struct model_io *ios, uint32_t n, const struct model_config_io *cfg,
                        uint32_t ncfg, bool batched)
{
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t c = 0; c < ncfg; c++) {
            if (strcmp(cfg[c].name, ios[i].name) != 0)
                continue;
            uint32_t off = batched ? 1 : 0;
            if (cfg[c].ndim + off != ios[i].ndim)
                break;
            for (uint32_t d = 0; d < cfg[c].ndim; d++)
                ios[i].dims[d + off] = cfg[c].dims[d];
            break;
        }
    }
}

static void sched_config_from(struct model *m, const struct registry_options *opts,
                              bool from_file)
{
    const struct model_config *c = &m->config;
    const struct model_dynamic_batching *db = &c->dynamic_batching;
    struct sched_config *sc = &m->sched_cfg;
    memset(sc, 0, sizeof *sc);
    sc->max_batch_size = c->max_batch_size > 0 ? (uint32_t)c->max_batch_size : 0;
    sc->dynamic_batching = db->enabled && sc->max_batch_size > 0;
    /* An autocompleted [max_batch_size] prefers nothing: full batches go at
     * once anyway, and the scheduler may learn a better size. */
    uint32_t npreferred = db->_preferred_autocompleted ? 0 : db->npreferred;
    for (uint32_t i = 0; i < npreferred && sc->npreferred < SCHED_MAX_PREFERRED; i++)
        sc->preferred_batch_sizes[sc->npreferred++] = (uint32_t)db->preferred_batch_size[i];
    if (db->npreferred > SCHED_MAX_PREFERRED)
        log_warn("model %s: only the first %d preferred_batch_size values are used", m->name,
                 SCHED_MAX_PREFERRED);
    sc->max_queue_delay_us = db->max_queue_delay_us;
    const struct model_sequence_batching *sb = &c->sequence_batching;
    if (sb->enabled) {
        /* Requests of different sequences batch like dynamic batching,
         * with the strategy's delay and preferred sizes (serve/seqbatch.h
         * keeps one request per sequence in flight). */
        sc->dynamic_batching = sc->max_batch_size > 0;
        sc->max_queue_delay_us = sb->max_queue_delay_us;
        for (uint32_t i = 0; i < sb->npreferred && sc->npreferred < SCHED_MAX_PREFERRED; i++)
            sc->preferred_batch_sizes[sc->npreferred++] = (uint32_t)sb->preferred_batch_size[i];
    }
    sc->max_queue_size = opts->queue_limit;
    /* Triton's queue policies: the default one for every level, replaced
     * per level by priority_queue_policy. */
    sc->nlevels = db->priority_levels ? (uint32_t)db->priority_levels : 1;
    sc->default_level = db->default_priority_level ? (uint32_t)db->default_priority_level - 1 : 0;
    for (uint32_t l = 0; l < sc->nlevels; l++) {
        const struct model_queue_policy *qp = &db->default_queue_policy;
        for (uint32_t i = 0; i < db->npriority_policies; i++)
            if (db->priority_queue_policy[i].level == l + 1)
                qp = &db->priority_queue_policy[i].policy;
        sc->levels[l] = (struct sched_queue_policy){
            .default_timeout_us = qp->default_timeout_us,
            .allow_timeout_override = qp->allow_timeout_override,
            .delay = qp->timeout_action == MODEL_TIMEOUT_DELAY,
            .max_queue_size = qp->max_queue_size < opts->queue_limit ? qp->max_queue_size : 0};
    }
    sc->padding_budget = c->padding_budget;
    /* A model without a config file keeps serving requests larger than the
     * batch limit it was given by default; a configured limit is Triton's
     * hard limit. */
    sc->allow_oversize = !from_file || !c->_max_batch_size_set;
    /* A decoupled model runs one request at a time: its responses belong to
     * one request. */
    sc->decoupled = c->decoupled;
    if (sc->decoupled)
        sc->dynamic_batching = false;
    /* The server's queue budget bounds the wait of a model that says
     * nothing about it; a config with a queue policy has chosen (even "no
     * timeout"), and a decoupled request's run is its whole stream. */
    sc->queue_budget_us = db->_queue_policy_set || sc->decoupled ? 0 : opts->queue_budget_us;
    /* Preferred sizes written in the config are the user's choice; without
     * them the scheduler learns which sizes run fastest. */
    sc->learn_batch_sizes = sc->dynamic_batching && sc->npreferred == 0;
}

static uint32_t instance_count(const struct model_config *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->ninstance_groups; i++)
        n += (uint32_t)c->instance_groups[i].count;
    return n ? n : 1;
}

/* Instances the config text asks for (1 without one, or if it does not
 * parse: the load reports that later), known before the first instance
 * loads so that every instance gets the same thread count. */
static uint32_t planned_instances(const char *text, size_t len)
{
    struct model_config cfg;
    struct error err;
    if (!text || model_config_parse(text, len, &cfg, &err) != 0)
        return 1;
    uint32_t n = instance_count(&cfg);
    model_config_free(&cfg);
    return n;
}

/* On failure, *kind says why (the error path of each step sets it). */
static int model_load_with(const struct registry_options *opts, const char *name,
                           int64_t version, const char *cfg_text, size_t cfg_len,
                           const struct backend_config *backend_cfg, struct model **out,
                           struct error *err, enum model_failure_kind *kind)
{
    *kind = MODEL_FAIL_LOAD;
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
    /* config.pbtxt's `backend` picks ONNX Runtime or a plugin library
     * (backend/plugin.h), looked for in the version directory, the model
     * directory, then --backend-directory; a plugin's name is what
     * metadata calls the platform, as Triton does. */
    char model_dir[PATH_MAX_LEN], version_dir[PATH_MAX_LEN];
    path_fmt(model_dir, sizeof model_dir, "%s/%s", opts->repository, name); /* shorter than path */
    path_fmt(version_dir, sizeof version_dir, "%s/%lld", model_dir, (long long)version);
    if (model_backend_for_config(cfg_text, cfg_len, version_dir, model_dir,
                                 opts->backend_directory, &m->backend, err) != 0) {
        *kind = MODEL_FAIL_BACKEND;
        model_free(m);
        return ST_ERROR;
    }
    m->platform = m->backend == &backend_onnxruntime ? "onnxruntime_onnx" : m->backend->name;

    /* The first instance tells the model's inputs and outputs, which the
     * configuration is checked against; it says how many more to load. */
    uint64_t t0 = clock_now_ns();
    char log_id[PATH_MAX_LEN];
    snprintf(log_id, sizeof log_id, "%s:%s", m->name, m->version_str);
    struct backend_load_args args = {
        .path = m->path,
        .log_id = log_id,
        .intra_op_threads = opts->intra_op_threads,
        .inter_op_threads = opts->inter_op_threads,
        .config = backend_cfg,
    };
    void *first = NULL;
    if (!opts->intra_op_threads)
        args.intra_op_threads = auto_intra_op_threads(planned_instances(cfg_text, cfg_len));
    if (m->backend->load(&args, &first, &m->info, err) != 0) {
        model_free(m);
        return ST_ERROR;
    }
    uint32_t count = 1;
    int rc = model_configure(m, cfg_text, cfg_len, err);
    if (rc)
        *kind = MODEL_FAIL_CONFIG;
    else {
        count = instance_count(&m->config);
        m->instances = mem_calloc(count, sizeof *m->instances);
        if (!m->instances)
            rc = error_set(err, 500, "out of memory");
    }
    if (rc) {
        m->backend->unload(first);
        model_free(m);
        return ST_ERROR;
    }
    m->instances[m->ninstances++] = first;
    for (uint32_t i = 1; i < count; i++) {
        struct model_info info = {0};
        if (m->backend->load(&args, &m->instances[i], &info, err) != 0) {
            model_free(m);
            return ST_ERROR;
        }
        m->ninstances++;
        model_info_free(&info);
    }
    m->load_ms = (clock_now_ns() - t0) / 1000000u;
    uint8_t digest[SHA256_DIGEST_SIZE];
    rc = sha256_file(m->path, digest, m->sha256);
    if (rc) {
        model_free(m);
        *kind = MODEL_FAIL_IO;
        return error_set(err, 500, "cannot hash %s: %s", path, strerror(-rc));
    }
    m->batched = m->config.max_batch_size > 0;
    refine_dims(m->info.inputs, m->info.ninputs, m->config.inputs, m->config.ninputs, m->batched);
    refine_dims(m->info.outputs, m->info.noutputs, m->config.outputs, m->config.noutputs,
                m->batched);
    if (opts->attach_engine && opts->attach_engine(m, version_dir, err) != 0) {
        model_free(m);
        *kind = MODEL_FAIL_CONFIG;
        return ST_ERROR;
    }
    split_run_info(m);
    if (opts->attach_preprocess && opts->attach_preprocess(m, model_dir, err) != 0) {
        model_free(m);
        *kind = MODEL_FAIL_CONFIG;
        return ST_ERROR;
    }
    if (m->prep && m->config.sequence_batching.enabled) {
        model_free(m);
        *kind = MODEL_FAIL_CONFIG;
        return error_set(err, 400, "sequence_batching cannot be combined with preprocessing");
    }
    if (model_labels_load(model_dir, &m->config, &m->info, &m->labels, err) != 0) {
        model_free(m);
        *kind = MODEL_FAIL_CONFIG;
        return ST_ERROR;
    }
    sched_config_from(m, opts, cfg_text != NULL);
    if (m->config.decoupled && !m->engine && !m->backend->execute_stream) {
        rc = error_set(err, 400,
                       "model_transaction_policy { decoupled: true }: backend '%s' cannot run "
                       "decoupled models",
                       m->backend->name);
        model_free(m);
        *kind = MODEL_FAIL_CONFIG;
        return rc;
    }
    /* A version is ready only once warmed up: the first requests would
     * otherwise pay for ONNX Runtime's lazy initialisation. The default
     * zero-filled warm-up is a courtesy that many valid models reject (zero
     * Resize scales, zero Slice steps): its failure is a warning; a warm-up
     * the config asks for must pass, as in Triton. */
    if (!m->engine && model_warmup(m, &m->warmup_us, err) != 0) {
        if (m->config.nwarmups > 0) {
            model_free(m);
            *kind = MODEL_FAIL_WARMUP;
            return ST_ERROR;
        }
        log_warn("model %s version %s: %s; serving it without a warm-up (model_warmup in "
                 "config.pbtxt gives inputs the model accepts)",
                 m->name, m->version_str, err->msg);
        error_clear(err);
        m->warmup_failed = true;
    }
    if (opts->observe_version)
        opts->observe_version(m->name, m->version, &m->sched_cfg.observer);
    struct sched_model sm = {.name = m->name, .version = m->version_str,
                             .backend = m->backend, .instances = m->instances,
                             .ninstances = m->ninstances, .info = &m->run_info,
                             .pool = opts->pool,
                             .background_pool = opts->background_pool};
    rc = sched_start(&sm, &m->sched_cfg, &m->sched);
    if (rc) {
        model_free(m);
        return error_set(err, 500, "cannot start workers: %s", strerror(-rc));
    }
    atomic_init(&m->refs, 1);
    *out = m;
    return 0;
}

/* Loads a version; a plugin backend's configuration is parsed once for all
 * its instances (model/backend_config.h). */
static int model_load(const struct registry_options *opts, const char *name, int64_t version,
                      const char *cfg_text, size_t cfg_len, struct model **out,
                      struct error *err, enum model_failure_kind *kind)
{
    char version_dir[PATH_MAX_LEN], version_str[24];
    snprintf(version_str, sizeof version_str, "%lld", (long long)version);
    if (path_fmt(version_dir, sizeof version_dir, "%s/%s/%s", opts->repository, name,
                 version_str) &&
        model_memory_admit(name, version_str, version_dir, opts->memory_budget, err) != 0) {
        *kind = MODEL_FAIL_MEMORY;
        return ST_ERROR;
    }
    struct model_backend_config bc;
    if (model_backend_config_prepare(cfg_text, cfg_len, &bc, err) != 0) {
        *kind = MODEL_FAIL_CONFIG;
        return ST_ERROR;
    }
    onnxruntime_start(); /* its one-time state is not this version's */
    uint64_t before = model_memory_sample();
    int rc = model_load_with(opts, name, version, cfg_text, cfg_len, bc.config, out, err, kind);
    model_backend_config_free(&bc);
    if (rc == 0)
        model_memory_account(*out, before);
    return rc;
}

int model_submit(struct model *m, struct infer_request *req, struct sched_local *here,
                 struct error *err)
{
    if (m->engine)
        return m->engine_ops->submit(m->engine, req, err);
    return sched_submit(m->sched, req, here, err);
}

bool model_queue_full(const struct model *m)
{
    return !m->engine && m->sched && sched_queue_full(m->sched);
}

struct model *model_ref(struct model *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void model_unref(struct model *m)
{
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* Unloading joins worker threads and frees sessions: never on the
     * thread that happened to drop the last reference (an I/O loop). */
    if (m->on_last_unref)
        m->on_last_unref(m);
    else
        model_free(m);
}

/* The versions the policy selects among those on disk (ascending), into
 * out; returns how many. Missing SPECIFIC versions are logged. */
static uint32_t select_versions(const char *model, const struct model_version_policy *p,
                                const int64_t *disk, uint32_t ndisk, int64_t *out)
{
    uint32_t n = 0;
    switch (p->kind) {
    case MODEL_VERSIONS_ALL:
        memcpy(out, disk, ndisk * sizeof *disk);
        return ndisk;
    case MODEL_VERSIONS_LATEST: {
        uint32_t keep = p->num_versions < ndisk ? p->num_versions : ndisk;
        memcpy(out, disk + (ndisk - keep), keep * sizeof *disk);
        return keep;
    }
    case MODEL_VERSIONS_SPECIFIC:
        for (uint32_t i = 0; i < ndisk; i++)
            for (uint32_t j = 0; j < p->nversions; j++)
                if (disk[i] == p->versions[j])
                    out[n++] = disk[i];
        for (uint32_t j = 0; j < p->nversions; j++) {
            bool found = false;
            for (uint32_t i = 0; i < ndisk && !found; i++)
                found = disk[i] == p->versions[j];
            if (!found)
                log_warn("model %s: version %lld named by version_policy has no %s", model,
                         (long long)p->versions[j], MODEL_FILE);
        }
        return n;
    }
    return 0;
}

static void log_loaded(const struct model *m)
{
    INFERD_PROBE_4(model_version_loaded, m->name, m->version_str, m->load_ms, m->warmup_us);
    const char *warmup = m->warmup_failed ? "warm-up failed after" : "warmed up in";
    double mib = (double)m->memory_bytes / (1024.0 * 1024.0);
    if (m->config.ensemble.enabled) {
        log_info("model %s version %s sha256 %.12s loaded: an ensemble of %u steps (%u inputs, "
                 "%u outputs)",
                 m->name, m->version_str, m->sha256, m->config.ensemble.nsteps, m->info.ninputs,
                 m->info.noutputs);
        return;
    }
    if (m->sched_cfg.dynamic_batching) {
        char wait[48] = "without waiting";
        if (m->sched_cfg.max_queue_delay_us)
            snprintf(wait, sizeof wait, "after %llu us",
                     (unsigned long long)m->sched_cfg.max_queue_delay_us);
        log_info("model %s version %s sha256 %.12s loaded in %llu ms, %s %llu us "
                 "(%u inputs, %u outputs, %u instances, %.1f MiB of memory, batching up to %u "
                 "%s)",
                 m->name, m->version_str, m->sha256, (unsigned long long)m->load_ms, warmup,
                 (unsigned long long)m->warmup_us, m->info.ninputs, m->info.noutputs,
                 m->ninstances, mib, m->sched_cfg.max_batch_size, wait);
    } else
        log_info("model %s version %s sha256 %.12s loaded in %llu ms, %s %llu us "
                 "(%u inputs, %u outputs, %u instances, %.1f MiB of memory)",
                 m->name, m->version_str, m->sha256, (unsigned long long)m->load_ms, warmup,
                 (unsigned long long)m->warmup_us, m->info.ninputs, m->info.noutputs,
                 m->ninstances, mib);
}

static const char *const failure_kind_names[MODEL_FAIL_KINDS] = {
    [MODEL_FAIL_CONFIG] = "config", [MODEL_FAIL_LAYOUT] = "layout", [MODEL_FAIL_IO] = "io",
    [MODEL_FAIL_BACKEND] = "backend", [MODEL_FAIL_LOAD] = "load", [MODEL_FAIL_WARMUP] = "warmup",
    [MODEL_FAIL_MEMORY] = "memory",
};

const char *model_failure_kind_name(enum model_failure_kind k)
{
    return (unsigned)k < MODEL_FAIL_KINDS ? failure_kind_names[k] : "load";
}

/* Appends a failure to e->failures; out of memory drops it (e->reason
 * still says what failed last). */
void model_entry_add_failure(struct model_entry *e, int64_t version,
                             enum model_failure_kind kind, const char *reason)
{
    struct model_failure *grown = mem_realloc(e->failures, (e->nfailures + 1) * sizeof *grown);
    if (!grown)
        return;
    e->failures = grown;
    struct model_failure *f = &grown[e->nfailures++];
    f->version = version;
    f->kind = kind;
    snprintf(f->reason, sizeof f->reason, "%s", reason);
}

/* The model as a whole failed to load. */
static void entry_fail(struct model_entry *e, enum model_failure_kind kind, const char *fmt,
                       const char *detail)
{
    snprintf(e->reason, sizeof e->reason, fmt, detail);
    log_error("model %s: %s", e->name, e->reason);
    model_entry_add_failure(e, -1, kind, e->reason);
}

void model_entry_refuse(struct model_entry *e, enum model_failure_kind kind, const char *reason)
{
    for (uint32_t v = 0; v < e->nversions; v++)
        model_unref(e->versions[v]);
    mem_free(e->versions);
    e->versions = NULL;
    e->nversions = 0;
    e->model = NULL;
    e->state = MODEL_UNAVAILABLE;
    entry_fail(e, kind, "%s", reason);
}

/* Numeric version directories without a model file are never selected:
 * say so, or a pushed version that is misnamed goes unnoticed. */
static void entry_note_empty_versions(struct model_entry *e, const char *dir)
{
    int64_t empty[MAX_VERSIONS];
    uint32_t n = list_versions(dir, VERSIONS_WITHOUT_MODEL, empty, MAX_VERSIONS);
    for (uint32_t i = 0; i < n; i++) {
        char reason[ERROR_MSG_MAX];
        snprintf(reason, sizeof reason,
                 "version directory %lld has no %s: put the model in %.100s/%lld/%s",
                 (long long)empty[i], MODEL_FILE, e->name, (long long)empty[i], MODEL_FILE);
        log_warn("model %s: %s", e->name, reason);
        model_entry_add_failure(e, empty[i], MODEL_FAIL_LAYOUT, reason);
    }
}

static int failure_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct model_failure *)a)->version;
    int64_t y = ((const struct model_failure *)b)->version;
    return (x > y) - (x < y);
}

bool registry_has_remote(const struct registry_options *opts, const char *name)
{
    for (uint32_t i = 0; i < opts->remote.nnames; i++)
        if (strcmp(opts->remote.names[i], name) == 0)
            return true;
    return false;
}

int model_entry_add_version(struct model_entry *e, struct model *m)
{
    uint32_t at = 0;
    while (at < e->nversions && e->versions[at]->version < m->version)
        at++;
    if (at < e->nversions && e->versions[at]->version == m->version)
        return -EEXIST;
    struct model **grown = mem_realloc(e->versions, (e->nversions + 1) * sizeof *grown);
    if (!grown)
        return -ENOMEM;
    memmove(grown + at + 1, grown + at, (e->nversions - at) * sizeof *grown);
    grown[at] = m;
    e->versions = grown;
    e->nversions++;
    return 0;
}

/* A version with no backend instance (remote, ensemble): its name,
 * version and platform; NULL when out of memory. */
static struct model *model_without_instances(const char *name, int64_t version,
                                             const char *platform)
{
    struct model *m = mem_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->name = mem_strdup(name);
    m->path = mem_strdup("");
    if (!m->name || !m->path) {
        model_free(m);
        return NULL;
    }
    m->version = version;
    snprintf(m->version_str, sizeof m->version_str, "%lld", (long long)version);
    m->platform = platform;
    m->backend = &backend_onnxruntime; /* never run: no instance */
    return m;
}

/* Such a version's scheduler, for its statistics and queue gauges (its
 * engine takes the requests). Returns 0 or ST_ERROR with err. */
static int start_stats_scheduler(struct model *m, const struct registry_options *opts,
                                 bool from_file, struct error *err)
{
    sched_config_from(m, opts, from_file);
    if (opts->observe_version)
        opts->observe_version(m->name, m->version, &m->sched_cfg.observer);
    struct sched_model sm = {.name = m->name, .version = m->version_str,
                             .backend = m->backend, .info = &m->run_info,
                             .pool = opts->pool, .background_pool = opts->background_pool};
    int rc = sched_start(&sm, &m->sched_cfg, &m->sched);
    return rc ? error_set(err, 500, "cannot start the version's scheduler: %s", strerror(-rc))
              : 0;
}

int model_new_remote(const struct registry_options *opts, const char *name, int64_t version,
                     const char *platform, struct model_info *info, bool decoupled,
                     const struct model_engine_ops *ops, void *engine, struct model **out,
                     struct error *err)
{
    struct model *m = model_without_instances(name, version, platform);
    if (!m) {
        model_info_free(info);
        return error_set(err, 500, "out of memory");
    }
    m->info = *info;
    memset(info, 0, sizeof *info);
    if (model_configure(m, NULL, 0, err) != 0) {
        model_free(m);
        return ST_ERROR;
    }
    m->config.decoupled = decoupled;
    m->batched = m->config.max_batch_size > 0;
    m->run_info = m->info;
    /* The upstream says which inputs a call must carry (KServe metadata
     * does not: a preprocessed model takes its raw input or the tensor it
     * feeds): every input is optional here, the upstream answers 400. */
    m->input_optional = mem_calloc(m->info.ninputs ? m->info.ninputs : 1, sizeof(bool));
    if (!m->input_optional) {
        model_free(m);
        return error_set(err, 500, "out of memory");
    }
    for (uint32_t i = 0; i < m->info.ninputs; i++)
        m->input_optional[i] = true;
    if (start_stats_scheduler(m, opts, false, err) != 0) {
        model_free(m);
        return ST_ERROR;
    }
    m->engine_ops = ops;
    m->engine = engine;
    atomic_init(&m->refs, 1);
    *out = m;
    return 0;
}

/* The model_io of config tensors: their dims with the batch dimension
 * (-1) when batched. Returns 0 or ST_ERROR (out of memory). */
static int ios_from_config(const struct model_config_io *cfg, uint32_t n, bool batched,
                           struct model_io **out)
{
    struct model_io *ios = mem_calloc(n ? n : 1, sizeof *ios);
    if (!ios)
        return ST_ERROR;
    *out = ios;
    for (uint32_t i = 0; i < n; i++) {
        if (!(ios[i].name = mem_strdup(cfg[i].name)))
            return ST_ERROR;
        ios[i].dtype = cfg[i].dtype;
        if (batched)
            ios[i].dims[ios[i].ndim++] = -1;
        for (uint32_t d = 0; d < cfg[i].ndim && ios[i].ndim < TENSOR_MAX_DIMS; d++)
            ios[i].dims[ios[i].ndim++] = cfg[i].dims[d];
    }
    return 0;
}

/* An ensemble's version: no model file and no instances; what clients send
 * and receive is its config, and attach_ensemble's engine runs its steps.
 * It has a scheduler only for its statistics. */
static int model_load_ensemble(const struct registry_options *opts, const char *name,
                               int64_t version, const char *cfg_text, size_t cfg_len,
                               struct model **out, struct error *err,
                               enum model_failure_kind *kind)
{
    *kind = MODEL_FAIL_CONFIG;
    if (!opts->attach_ensemble)
        return error_set(err, 400, "ensembles are not served by this server");
    uint64_t t0 = clock_now_ns();
    struct model *m = model_without_instances(name, version, "ensemble");
    if (!m)
        return error_set(err, 500, "out of memory");
    struct error perr;
    if (model_config_parse(cfg_text, cfg_len, &m->config, &perr) != 0) {
        model_free(m);
        return error_set(err, perr.status, "config.pbtxt:%s", perr.msg);
    }
    if (model_config_check_ensemble(&m->config, name, err) != 0) {
        model_free(m);
        return ST_ERROR;
    }
    m->batched = m->config.max_batch_size > 0;
    if (ios_from_config(m->config.inputs, m->config.ninputs, m->batched, &m->info.inputs) ||
        (m->info.ninputs = m->config.ninputs,
         ios_from_config(m->config.outputs, m->config.noutputs, m->batched, &m->info.outputs))) {
        model_free(m);
        return error_set(err, 500, "out of memory");
    }
    m->info.noutputs = m->config.noutputs;
    m->run_info = m->info;
    uint8_t digest[SHA256_DIGEST_SIZE]; /* the config is what the version is */
    sha256(cfg_text, cfg_len, digest);
    sha256_hex(digest, m->sha256);
    if (start_stats_scheduler(m, opts, true, err) != 0 || opts->attach_ensemble(m, err) != 0) {
        model_free(m);
        return ST_ERROR;
    }
    m->load_ms = (clock_now_ns() - t0) / 1000000u;
    atomic_init(&m->refs, 1);
    *out = m;
    return 0;
}

/* The versions of model directory `dir` (config.pbtxt, version policy). */
static void load_local(const struct registry_options *opts, const char *dir,
                       const char *config_override, struct model_entry *e);

void model_entry_load(const struct registry_options *opts, const char *name,
                      const char *config_override, struct model_entry *e)
{
    char dir[PATH_MAX_LEN];
    memset(e, 0, sizeof *e);
    e->state = MODEL_UNAVAILABLE;
    e->name = mem_strdup(name);
    if (!e->name) {
        snprintf(e->reason, sizeof e->reason, "out of memory");
        return;
    }
    if (!path_fmt(dir, sizeof dir, "%s/%s", opts->repository, e->name)) {
        entry_fail(e, MODEL_FAIL_LAYOUT, "%s", "model path too long");
        return;
    }
    e->fingerprint = model_dir_fingerprint(opts, name);
    bool remote = registry_has_remote(opts, name);
    if (!remote || is_dir(dir))
        load_local(opts, dir, config_override, e);
    if (remote && opts->remote.load)
        opts->remote.load(opts->remote.ctx, opts, name, e);
    if (e->nversions > 0) {
        e->state = MODEL_READY;
        e->model = e->versions[e->nversions - 1];
    }
}

static void load_local(const struct registry_options *opts, const char *dir,
                       const char *config_override, struct model_entry *e)
{
    char *text = NULL;
    size_t len = 0;
    struct error err;
    error_clear(&err);
    enum model_failure_kind kind;
    if (config_override) {
        text = mem_strdup(config_override);
        len = text ? strlen(text) : 0;
        if (!text) {
            entry_fail(e, MODEL_FAIL_LOAD, "%s", "out of memory");
            return;
        }
    } else if (read_config_text(dir, &text, &len, &err, &kind) != 0) {
        entry_fail(e, kind, "%s", err.msg);
        return;
    }
    /* The version policy comes from the config file; Triton's default is
     * the newest version. */
    struct model_version_policy policy = {.kind = MODEL_VERSIONS_LATEST, .num_versions = 1};
    struct model_config parsed;
    bool have_parsed = false;
    if (text) {
        if (model_config_parse(text, len, &parsed, &err) != 0) {
            entry_fail(e, MODEL_FAIL_CONFIG, "config.pbtxt:%s", err.msg);
            mem_free(text);
            return;
        }
        have_parsed = true;
        policy = parsed.version_policy;
        for (uint32_t i = 0; i < parsed.nignored; i++)
            log_warn("model %s: config.pbtxt:%u:%u: '%s' is not used by inferd", e->name,
                     parsed.ignored[i].line, parsed.ignored[i].col, parsed.ignored[i].path);
    }
    /* An ensemble's version directories are empty: its steps are other
     * models (serve/ensemble.h). */
    bool ensemble = have_parsed && !strcmp(parsed.platform, "ensemble");
    if (!ensemble)
        entry_note_empty_versions(e, dir);
    int64_t disk[MAX_VERSIONS], chosen[MAX_VERSIONS];
    uint32_t ndisk = list_versions(dir, ensemble ? VERSIONS_ALL : VERSIONS_WITH_MODEL, disk,
                                   MAX_VERSIONS);
    uint32_t nchosen = select_versions(e->name, &policy, disk, ndisk, chosen);
    if (have_parsed)
        model_config_free(&parsed); /* policy pointed into it: not used past here */
    if (nchosen == 0 && ndisk) {
        entry_fail(e, MODEL_FAIL_CONFIG, "%s", "version_policy selects no version on disk");
    } else if (nchosen == 0) {
        /* The version directories without a model file are failures already. */
        snprintf(e->reason, sizeof e->reason, "no version directory with a %s file", MODEL_FILE);
        log_error("model %s: %s", e->name, e->reason);
        if (!e->nfailures)
            model_entry_add_failure(e, -1, MODEL_FAIL_LAYOUT, e->reason);
    } else if (!(e->versions = mem_calloc(nchosen, sizeof *e->versions))) {
        entry_fail(e, MODEL_FAIL_LOAD, "%s", "out of memory");
    }
    if (!e->versions) {
        mem_free(text);
        return;
    }
    for (uint32_t i = 0; i < nchosen; i++) {
        struct model *m = NULL;
        if ((ensemble ? model_load_ensemble(opts, e->name, chosen[i], text, len, &m, &err, &kind)
                      : model_load(opts, e->name, chosen[i], text, len, &m, &err, &kind)) != 0) {
            snprintf(e->reason, sizeof e->reason, "version %lld: %.200s", (long long)chosen[i],
                     err.msg);
            log_error("model %s version %lld failed to load: %s", e->name,
                      (long long)chosen[i], err.msg);
            model_entry_add_failure(e, chosen[i], kind, err.msg);
            e->failed_versions++;
            continue;
        }
        log_loaded(m);
        e->versions[e->nversions++] = m;
    }
    mem_free(text);
    if (e->nfailures > 1)
        qsort(e->failures, e->nfailures, sizeof *e->failures, failure_cmp);
}

void model_entry_clear(struct model_entry *e)
{
    for (uint32_t v = 0; v < e->nversions; v++)
        model_unref(e->versions[v]);
    mem_free(e->versions);
    mem_free(e->failures);
    mem_free(e->name);
    memset(e, 0, sizeof *e);
}

int model_entry_copy_failures(struct model_entry *dst, const struct model_entry *src)
{
    mem_free(dst->failures);
    dst->failures = NULL;
    dst->nfailures = 0;
    if (!src->nfailures)
        return 0;
    dst->failures = mem_alloc(src->nfailures * sizeof *dst->failures);
    if (!dst->failures)
        return -ENOMEM;
    memcpy(dst->failures, src->failures, src->nfailures * sizeof *dst->failures);
    dst->nfailures = src->nfailures;
    return 0;
}

enum model_dir_kind model_dir_check(const struct registry_options *opts, const char *name,
                                    struct model_failure *why)
{
    char dir[PATH_MAX_LEN];
    if (registry_has_remote(opts, name))
        return MODEL_DIR_MODEL;
    if (name[0] == '.' || !path_fmt(dir, sizeof dir, "%s/%s", opts->repository, name) ||
        !is_dir(dir))
        return MODEL_DIR_OTHER;
    why->version = -1;
    DIR *d = opendir(dir);
    if (!d) {
        why->kind = MODEL_FAIL_IO;
        snprintf(why->reason, sizeof why->reason, "cannot read the model directory: %s",
                 strerror(errno));
        return MODEL_DIR_UNSERVABLE;
    }
    bool version_dir = false, model_files = false;
    struct dirent *e;
    int64_t v;
    while (!version_dir && (e = readdir(d)) != NULL) {
        version_dir = parse_version(e->d_name, &v);
        model_files = model_files || strcmp(e->d_name, MODEL_FILE) == 0 ||
                      strcmp(e->d_name, "config.pbtxt") == 0;
    }
    closedir(d);
    if (version_dir)
        return MODEL_DIR_MODEL;
    if (!model_files)
        return MODEL_DIR_OTHER;
    why->kind = MODEL_FAIL_LAYOUT;
    snprintf(why->reason, sizeof why->reason,
             "no version directory: put the model in %.100s/1/%s", name, MODEL_FILE);
    return MODEL_DIR_UNSERVABLE;
}

/* FNV-1a over the names, sizes and modification times of the model's
 * config.pbtxt and version files, and the names of the version
 * directories: any change of what would be loaded, or of what the load
 * reports as unservable, changes it (poll mode reloads on a change). */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t fingerprint_file(uint64_t h, const char *path)
{
    struct stat st;
    h = fnv(h, path, strlen(path));
    if (stat(path, &st) != 0)
        return fnv(h, "-", 1);
    h = fnv(h, &st.st_size, sizeof st.st_size);
    h = fnv(h, &st.st_mtim.tv_sec, sizeof st.st_mtim.tv_sec);
    return fnv(h, &st.st_mtim.tv_nsec, sizeof st.st_mtim.tv_nsec);
}

/* Every regular file directly in directory `dir`, in any order; hidden
 * files (an editor's) are not. For a version directory: the model file and
 * what is read beside it (a generative model's generation.json and
 * tokenizer, a plugin's parameters); for the model directory: config.pbtxt
 * and what it and preprocess.json name (labels, a tokenizer). */
static uint64_t fingerprint_files(uint64_t h, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return fnv(h, "-", 1);
    uint64_t sum = 0;
    char path[PATH_MAX_LEN];
    struct stat st;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && path_fmt(path, sizeof path, "%s/%s", dir, de->d_name) &&
            stat(path, &st) == 0 && S_ISREG(st.st_mode))
            sum += fingerprint_file(14695981039346656037ull, path);
    closedir(d);
    return fnv(h, &sum, sizeof sum);
}

uint64_t model_dir_fingerprint(const struct registry_options *opts, const char *name)
{
    char dir[PATH_MAX_LEN], path[PATH_MAX_LEN];
    uint64_t h = 14695981039346656037ull;
    if (!path_fmt(dir, sizeof dir, "%s/%s", opts->repository, name))
        return h;
    h = fingerprint_files(h, dir);
    int64_t versions[MAX_VERSIONS];
    uint32_t n = list_versions(dir, VERSIONS_ALL, versions, MAX_VERSIONS);
    for (uint32_t i = 0; i < n; i++)
        if (path_fmt(path, sizeof path, "%s/%lld", dir, (long long)versions[i])) {
            h = fnv(h, path, strlen(path)); /* the version too */
            h = fingerprint_files(h, path);
        }
    return h;
}

const struct model *registry_version(const struct model_entry *e, const char *version)
{
    for (uint32_t i = 0; i < e->nversions; i++)
        if (strcmp(e->versions[i]->version_str, version) == 0)
            return e->versions[i];
    return NULL;
}

int model_input_index(const struct model *m, const char *name)
{
    for (uint32_t i = 0; i < m->info.ninputs; i++)
        if (strcmp(m->info.inputs[i].name, name) == 0)
            return (int)i;
    return NOT_FOUND;
}

bool model_input_optional(const struct model *m, uint32_t i)
{
    if (m->input_optional)
        return m->input_optional[i];
    if (!m->engine)
        return false; /* the scheduler gathers every input of a batch */
    for (uint32_t k = 0; k < m->config.ninputs; k++)
        if (strcmp(m->config.inputs[k].name, m->info.inputs[i].name) == 0)
            return m->config.inputs[k].optional;
    return false;
}

int model_inputs_complete(const struct model *m, struct tensor *inputs, const bool *seen,
                          uint32_t *n, struct error *err)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < m->info.ninputs; i++) {
        if (seen[i])
            inputs[kept++] = inputs[i];
        else if (!model_input_optional(m, i))
            return error_set(err, 400, "missing input '%s' for model '%s'",
                             m->info.inputs[i].name, m->name);
    }
    *n = kept;
    return 0;
}

int model_output_index(const struct model *m, const char *name)
{
    for (uint32_t i = 0; i < m->info.noutputs; i++)
        if (strcmp(m->info.outputs[i].name, name) == 0)
            return (int)i;
    return NOT_FOUND;
}
