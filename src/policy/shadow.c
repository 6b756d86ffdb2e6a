#include "policy/shadow.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "obs/metrics.h"
#include "obs/request.h"
#include "policy/diff.h"

/* (version, shadow model, shadow version) series per primary model, and
 * outputs per series, that get statistics; more are not recorded (logged
 * once). */
#define SHADOW_MAX_SERIES 8
#define SHADOW_MAX_OUTPUTS 8
#define OUTPUT_NAME_MAX 64

enum drop_reason {
    DROP_QUEUE_FULL,
    DROP_UNAVAILABLE,
    DROP_TIMEOUT,
    DROP_FAILED,
    DROP_PRIMARY_FAILED,
    DROP_OUT_OF_MEMORY,
    DROP_REASONS
};
static const char *const drop_names[DROP_REASONS] = {
    "queue_full", "unavailable", "timeout", "failed", "primary_failed", "out_of_memory",
};

/* max |a-b| observed in units of 1e-12, exposed divided by 1e12: buckets
 * at each power of ten from 1e-9 to 10. */
static const struct metrics_hist_spec abs_buckets = {
    .nbounds = 11,
    .bounds = {1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
               1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
               10000000000000ull},
    .divisor = 1e12,
};

struct out_stats {
    char name[OUTPUT_NAME_MAX];
    _Atomic uint64_t compared, mismatches, rows, agree, elements, equal;
    _Atomic uint64_t max_abs_bits; /* the largest max |a-b| seen, as double bits */
    struct metrics_hist abs_hist;
};

struct series {
    int64_t version, shadow_version;
    char version_str[24], shadow_version_str[24];
    char shadow_model[ROUTE_MODEL_MAX];
    _Atomic uint64_t compared, mismatching, dropped[DROP_REASONS];
    atomic_uint nout;
    struct out_stats out[SHADOW_MAX_OUTPUTS];
};

struct shadow_stats {
    atomic_uint refs;
    char model[ROUTE_MODEL_MAX];
    pthread_mutex_t lock; /* adding a series or an output */
    atomic_uint nseries;
    bool full_logged;
    struct series series[SHADOW_MAX_SERIES];
};

struct shadow_job {
    struct infer_request req; /* the copy; first: the scheduler's view */
    struct shadow_stats *stats;
    struct series *series;
    double tolerance;
    uint32_t log_every;
    atomic_int pending; /* the primary's end and the copy's completion */
    bool primary_ok;
    /* The primary's outputs, copied with their names (its model may be
     * unloaded before the copy completes). */
    struct tensor *primary;
    uint32_t nprimary;
    char *primary_mem;
    char request_id[REQUEST_ID_MAX + 1];
};

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ---- the statistics ---------------------------------------------------------- */

struct shadow_stats *shadow_stats_new(const char *model)
{
    struct shadow_stats *s = mem_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    snprintf(s->model, sizeof s->model, "%s", model);
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

static struct shadow_stats *stats_ref(struct shadow_stats *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void shadow_stats_unref(struct shadow_stats *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_destroy(&s->lock);
        mem_free(s);
    }
}

static bool series_is(const struct series *x, int64_t version, const char *model, int64_t sv)
{
    return x->version == version && x->shadow_version == sv && strcmp(x->shadow_model, model) == 0;
}

/* The series of (version → model:sv), added on first use; NULL when the
 * table is full. Any thread. */
static struct series *series_get(struct shadow_stats *s, int64_t version, const char *model,
                                 int64_t sv)
{
    uint32_t n = atomic_load_explicit(&s->nseries, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (series_is(&s->series[i], version, model, sv))
            return &s->series[i];
    struct series *x = NULL;
    pthread_mutex_lock(&s->lock);
    n = atomic_load_explicit(&s->nseries, memory_order_relaxed);
    for (uint32_t i = 0; i < n && !x; i++)
        if (series_is(&s->series[i], version, model, sv))
            x = &s->series[i];
    if (!x && n < SHADOW_MAX_SERIES) {
        x = &s->series[n];
        x->version = version;
        x->shadow_version = sv;
        snprintf(x->version_str, sizeof x->version_str, "%lld", (long long)version);
        snprintf(x->shadow_version_str, sizeof x->shadow_version_str, "%lld", (long long)sv);
        snprintf(x->shadow_model, sizeof x->shadow_model, "%s", model);
        atomic_store_explicit(&s->nseries, n + 1, memory_order_release);
    } else if (!x && !s->full_logged) {
        s->full_logged = true;
        log_warn("model %s: shadow statistics keep %d version pairs; more are not recorded",
                 s->model, SHADOW_MAX_SERIES);
    }
    pthread_mutex_unlock(&s->lock);
    return x;
}

static struct out_stats *output_get(struct shadow_stats *s, struct series *x, const char *name)
{
    uint32_t n = atomic_load_explicit(&x->nout, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(x->out[i].name, name) == 0)
            return &x->out[i];
    struct out_stats *o = NULL;
    pthread_mutex_lock(&s->lock);
    n = atomic_load_explicit(&x->nout, memory_order_relaxed);
    for (uint32_t i = 0; i < n && !o; i++)
        if (strcmp(x->out[i].name, name) == 0)
            o = &x->out[i];
    if (!o && n < SHADOW_MAX_OUTPUTS) {
        o = &x->out[n];
        snprintf(o->name, sizeof o->name, "%s", name);
        atomic_store_explicit(&x->nout, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->lock);
    return o;
}

/* ---- a job's end ---------------------------------------------------------------- */

static double bits_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static void raise_max(_Atomic uint64_t *bits, double v)
{
    uint64_t old = atomic_load_explicit(bits, memory_order_relaxed), nb;
    memcpy(&nb, &v, sizeof nb);
    while (v > bits_double(old) &&
           !atomic_compare_exchange_weak_explicit(bits, &old, nb, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static const struct tensor *primary_output(const struct shadow_job *job, const char *name)
{
    for (uint32_t i = 0; i < job->nprimary; i++)
        if (strcmp(job->primary[i].name, name) == 0)
            return &job->primary[i];
    return NULL;
}

static void log_diff(const struct shadow_job *job, const char *output, const struct diff_result *d)
{
    const struct series *x = job->series;
    if (!d->comparable) {
        log_info("shadow diff: model=%s version=%s shadow_model=%s shadow_version=%s "
                 "request_id=%s output=%s datatype or shape differ",
                 job->stats->model, x->version_str, x->shadow_model, x->shadow_version_str,
                 job->request_id, output);
        return;
    }
    log_info("shadow diff: model=%s version=%s shadow_model=%s shadow_version=%s request_id=%s "
             "output=%s elements=%lld equal=%lld max_abs=%.9g max_rel=%.9g worst_index=%lld "
             "primary=%.9g shadow=%.9g argmax_agree=%lld/%lld",
             job->stats->model, x->version_str, x->shadow_model, x->shadow_version_str,
             job->request_id, output, (long long)d->elements, (long long)d->equal, d->max_abs,
             d->max_rel, (long long)d->worst, d->worst_a, d->worst_b, (long long)d->argmax_agree,
             (long long)d->rows);
}

/* Both answers are in and both succeeded: compare the outputs they share. */
static void compare(struct shadow_job *job)
{
    struct series *x = job->series;
    struct diff_result d[SHADOW_MAX_OUTPUTS];
    const char *names[SHADOW_MAX_OUTPUTS];
    bool mismatch[SHADOW_MAX_OUTPUTS];
    bool any = false;
    uint32_t n = 0;
    for (uint32_t i = 0; i < job->req.noutputs && n < SHADOW_MAX_OUTPUTS; i++) {
        const struct tensor *a = primary_output(job, job->req.output_names[i]);
        if (!a)
            continue;
        names[n] = job->req.output_names[i];
        diff_tensors(a, &job->req.outputs[i], &d[n]);
        mismatch[n] = !d[n].comparable || (d[n].is_float ? d[n].max_abs > job->tolerance
                                                         : d[n].equal < d[n].elements);
        any |= mismatch[n];
        n++;
    }
    add(&x->compared, 1);
    for (uint32_t i = 0; i < n; i++) {
        struct out_stats *o = output_get(job->stats, x, names[i]);
        if (!o)
            continue;
        add(&o->compared, 1);
        if (mismatch[i])
            add(&o->mismatches, 1);
        add(&o->elements, (uint64_t)d[i].elements);
        add(&o->equal, (uint64_t)d[i].equal);
        add(&o->rows, (uint64_t)d[i].rows);
        add(&o->agree, (uint64_t)d[i].argmax_agree);
        if (d[i].comparable && d[i].is_float) {
            double units = d[i].max_abs * 1e12;
            uint64_t v = units >= 1.8e19 ? UINT64_MAX : (uint64_t)units;
            metrics_hist_observe(&o->abs_hist, &abs_buckets, v, METRICS_SHARED_SHARD);
            raise_max(&o->max_abs_bits, d[i].max_abs);
        }
    }
    if (!any)
        return;
    uint64_t seq = atomic_fetch_add_explicit(&x->mismatching, 1, memory_order_relaxed);
    if (job->log_every && seq % job->log_every == 0)
        for (uint32_t i = 0; i < n; i++)
            if (mismatch[i])
                log_diff(job, names[i], &d[i]);
}

static void job_free(struct shadow_job *job)
{
    sched_release(&job->req);
    if (job->req.model)
        model_unref(job->req.model);
    arena_free(&job->req.arena);
    mem_free(job->primary_mem);
    shadow_stats_unref(job->stats);
    mem_free(job);
}

static enum drop_reason drop_of(int status)
{
    switch (status) {
    case 429: return DROP_QUEUE_FULL;
    case 503: return DROP_UNAVAILABLE;
    case 504: return DROP_TIMEOUT;
    default: return DROP_FAILED;
    }
}

static void drop(struct series *x, enum drop_reason r)
{
    if (x)
        add(&x->dropped[r], 1);
}

/* The last of the two ends. */
static void finish(struct shadow_job *job)
{
    if (atomic_fetch_sub_explicit(&job->pending, 1, memory_order_acq_rel) != 1)
        return;
    if (job->req.rc != 0)
        drop(job->series, drop_of(job->req.err.status));
    else if (!job->primary_ok)
        drop(job->series, DROP_PRIMARY_FAILED);
    else if (job->series)
        compare(job);
    job_free(job);
}

/* The scheduler's completion of the copy (any thread). */
static void on_complete(struct infer_request *req)
{
    finish((struct shadow_job *)req);
}

void shadow_primary_done(struct shadow_job *job, const struct infer_call *call)
{
    const struct infer_request *p = &call->req;
    if (p->rc == 0 && p->outputs && !p->model->sched_cfg.decoupled) {
        size_t size = p->noutputs * sizeof(struct tensor);
        for (uint32_t i = 0; i < p->noutputs; i++)
            size += tensor_copy_size(&p->outputs[i]) + strlen(p->output_names[i]) + 1;
        job->primary_mem = mem_alloc(size);
        if (job->primary_mem) {
            job->primary = (struct tensor *)job->primary_mem;
            char *q = job->primary_mem + p->noutputs * sizeof(struct tensor);
            for (uint32_t i = 0; i < p->noutputs; i++) {
                size_t len = strlen(p->output_names[i]) + 1;
                memcpy(q, p->output_names[i], len);
                const char *name = q;
                q = tensor_copy_to(&job->primary[i], &p->outputs[i], q + len);
                job->primary[i].name = name;
            }
            job->nprimary = p->noutputs;
            job->primary_ok = true;
        }
    }
    finish(job);
}

/* ---- starting a copy -------------------------------------------------------------- */

/* Copies call's inputs into the job's arena; the output names the shadow
 * model has among those the primary asked for. */
static int copy_request(struct shadow_job *job, const struct model *target,
                        const struct infer_call *call)
{
    const struct infer_request *p = &call->req;
    struct infer_request *r = &job->req;
    r->inputs = arena_calloc(&r->arena, p->ninputs ? p->ninputs : 1, sizeof *r->inputs);
    const char **names = arena_calloc(&r->arena, p->noutputs ? p->noutputs : 1, sizeof *names);
    if (!r->inputs || !names)
        return ST_ERROR;
    for (uint32_t i = 0; i < p->ninputs; i++) {
        char *mem = arena_alloc(&r->arena, tensor_copy_size(&p->inputs[i]));
        if (!mem)
            return ST_ERROR;
        tensor_copy_to(&r->inputs[i], &p->inputs[i], mem);
        int k = model_input_index(target, p->inputs[i].name);
        r->inputs[i].name = k >= 0 ? target->info.inputs[k].name : p->inputs[i].name;
    }
    r->ninputs = p->ninputs;
    for (uint32_t i = 0; i < p->noutputs; i++) {
        int k = model_output_index(target, p->output_names[i]);
        if (k >= 0)
            names[r->noutputs++] = target->info.outputs[k].name;
    }
    r->output_names = names;
    r->batch = p->batch;
    return 0;
}

struct shadow_job *shadow_start(struct shadow_stats *s, const struct route_table *t,
                                struct model *target, const struct infer_call *call)
{
    const struct infer_request *p = &call->req;
    struct series *x = series_get(s, p->model->version, target->name, target->version);
    if (sched_background_full(target->sched)) {
        drop(x, DROP_QUEUE_FULL); /* shed before any copying */
        model_unref(target);
        return NULL;
    }
    struct shadow_job *job = mem_calloc(1, sizeof *job);
    if (!job) {
        drop(x, DROP_OUT_OF_MEMORY);
        model_unref(target);
        return NULL;
    }
    /* One chunk for the copy and what the scheduler adds (output tensors). */
    size_t need = 256 + p->ninputs * sizeof(struct tensor) +
                  p->noutputs * (sizeof(const char *) + sizeof(struct tensor));
    for (uint32_t i = 0; i < p->ninputs; i++)
        need += tensor_copy_size(&p->inputs[i]) + 16;
    arena_init(&job->req.arena, need, (size_t)1 << 31);
    job->req.model = target;
    job->stats = stats_ref(s);
    job->series = x;
    job->tolerance = t->shadow_tolerance;
    job->log_every = t->shadow_log_every;
    atomic_init(&job->pending, 2);
    /* The id of the primary's answer and access log line, else the body's. */
    const char *id = call->request_id && call->request_id[0] ? call->request_id : NULL;
    size_t n = id ? strlen(id) : 0;
    if (!id && p->id) {
        id = p->id;
        n = p->id_len;
    }
    snprintf(job->request_id, sizeof job->request_id, "%.*s", id ? (int)n : 1, id ? id : "-");
    if (copy_request(job, target, call) != 0) {
        drop(x, DROP_OUT_OF_MEMORY);
        job_free(job);
        return NULL;
    }
    if (job->req.noutputs == 0) {
        job_free(job); /* nothing to compare: not a shadow copy at all */
        return NULL;
    }
    job->req.background = true;
    job->req.timeout_us = SHADOW_TIMEOUT_US;
    job->req.complete = on_complete;
    struct error err;
    if (model_submit(target, &job->req, NULL, &err) != 0) {
        drop(x, drop_of(err.status));
        job_free(job);
        return NULL;
    }
    return job;
}

/* ---- reading --------------------------------------------------------------------------- */

static void write_output_metric(struct buf *b, struct shadow_stats *const *all, uint32_t n,
                                const char *name, const char *type, const char *help,
                                int which)
{
    metrics_write_header(b, name, type, help);
    for (uint32_t i = 0; i < n; i++) {
        const struct shadow_stats *s = all[i];
        uint32_t ns = atomic_load_explicit(&s->nseries, memory_order_acquire);
        for (uint32_t k = 0; k < ns; k++) {
            const struct series *x = &s->series[k];
            uint32_t no = atomic_load_explicit(&x->nout, memory_order_acquire);
            for (uint32_t j = 0; j < no; j++) {
                const struct out_stats *o = &x->out[j];
                const char *labels[] = {"model", s->model, "version", x->version_str,
                                        "shadow_model", x->shadow_model, "shadow_version",
                                        x->shadow_version_str, "output", o->name};
                uint64_t rows = metrics_load(&o->rows), el = metrics_load(&o->elements);
                switch (which) {
                case 0:
                    metrics_write_u64(b, name, labels, 5, metrics_load(&o->mismatches));
                    break;
                case 1:
                    if (metrics_load(&o->abs_hist.count)) {
                        struct metrics_hist_snapshot h = {0};
                        metrics_hist_accumulate(&h, &o->abs_hist);
                        metrics_write_hist(b, name, labels, 5, &abs_buckets, &h);
                    }
                    break;
                case 2:
                    if (rows)
                        metrics_write_f64(b, name, labels, 5,
                                          (double)metrics_load(&o->agree) / (double)rows);
                    break;
                case 3:
                    if (rows)
                        metrics_write_u64(b, name, labels, 5, rows);
                    break;
                case 4:
                    if (rows)
                        metrics_write_u64(b, name, labels, 5, metrics_load(&o->agree));
                    break;
                case 5:
                    if (el)
                        metrics_write_f64(b, name, labels, 5,
                                          (double)metrics_load(&o->equal) / (double)el);
                    break;
                case 6:
                    metrics_write_u64(b, name, labels, 5, el);
                    break;
                case 7:
                    metrics_write_u64(b, name, labels, 5, metrics_load(&o->equal));
                    break;
                }
            }
        }
    }
}

void shadow_write_metrics(struct shadow_stats *const *all, uint32_t n, struct buf *b)
{
    metrics_write_header(b, "inferd_shadow_requests_total", "counter",
                         "Shadow copies whose outputs were compared with the primary's");
    for (uint32_t i = 0; i < n; i++) {
        const struct shadow_stats *s = all[i];
        uint32_t ns = atomic_load_explicit(&s->nseries, memory_order_acquire);
        for (uint32_t k = 0; k < ns; k++) {
            const struct series *x = &s->series[k];
            const char *labels[] = {"model", s->model, "version", x->version_str,
                                    "shadow_model", x->shadow_model, "shadow_version",
                                    x->shadow_version_str};
            metrics_write_u64(b, "inferd_shadow_requests_total", labels, 4,
                              metrics_load(&x->compared));
        }
    }
    metrics_write_header(b, "inferd_shadow_dropped_total", "counter",
                         "Shadow copies not compared, by reason");
    for (uint32_t i = 0; i < n; i++) {
        const struct shadow_stats *s = all[i];
        uint32_t ns = atomic_load_explicit(&s->nseries, memory_order_acquire);
        for (uint32_t k = 0; k < ns; k++) {
            const struct series *x = &s->series[k];
            for (int r = 0; r < DROP_REASONS; r++) {
                const char *labels[] = {"model", s->model, "version", x->version_str,
                                        "shadow_model", x->shadow_model, "shadow_version",
                                        x->shadow_version_str, "reason", drop_names[r]};
                metrics_write_u64(b, "inferd_shadow_dropped_total", labels, 5,
                                  metrics_load(&x->dropped[r]));
            }
        }
    }
    write_output_metric(b, all, n, "inferd_shadow_mismatch_total", "counter",
                        "Compared pairs whose output differs (floats: max absolute difference "
                        "above the tolerance; other types: any element)",
                        0);
    write_output_metric(b, all, n, "inferd_shadow_max_abs_difference", "histogram",
                        "Largest absolute difference between primary and shadow elements, per "
                        "compared pair (floating-point outputs)",
                        1);
    write_output_metric(b, all, n, "inferd_shadow_argmax_agreement_ratio", "gauge",
                        "Share of score-vector rows whose argmax is the same in primary and "
                        "shadow outputs",
                        2);
    write_output_metric(b, all, n, "inferd_shadow_argmax_rows_total", "counter",
                        "Score-vector rows compared (along the last dimension)", 3);
    write_output_metric(b, all, n, "inferd_shadow_argmax_agreements_total", "counter",
                        "Score-vector rows whose argmax agrees", 4);
    write_output_metric(b, all, n, "inferd_shadow_exact_match_ratio", "gauge",
                        "Share of output elements exactly equal in primary and shadow", 5);
    write_output_metric(b, all, n, "inferd_shadow_elements_total", "counter",
                        "Output elements compared", 6);
    write_output_metric(b, all, n, "inferd_shadow_equal_elements_total", "counter",
                        "Output elements exactly equal", 7);
}

void shadow_write_summary(const struct shadow_stats *s, struct json_writer *w)
{
    uint64_t compared = 0, dropped = 0, mismatches = 0, rows = 0, agree = 0;
    double max_abs = 0;
    uint32_t ns = atomic_load_explicit(&s->nseries, memory_order_acquire);
    for (uint32_t k = 0; k < ns; k++) {
        const struct series *x = &s->series[k];
        compared += metrics_load(&x->compared);
        for (int r = 0; r < DROP_REASONS; r++)
            dropped += metrics_load(&x->dropped[r]);
        mismatches += metrics_load(&x->mismatching);
        uint32_t no = atomic_load_explicit(&x->nout, memory_order_acquire);
        for (uint32_t j = 0; j < no; j++) {
            rows += metrics_load(&x->out[j].rows);
            agree += metrics_load(&x->out[j].agree);
            double m = bits_double(metrics_load(&x->out[j].max_abs_bits));
            if (m > max_abs)
                max_abs = m;
        }
    }
    json_w_obj_begin(w);
    json_w_key(w, "compared");
    json_w_uint(w, compared);
    json_w_key(w, "dropped");
    json_w_uint(w, dropped);
    json_w_key(w, "mismatches");
    json_w_uint(w, mismatches);
    json_w_key(w, "argmax_agreement");
    if (rows)
        json_w_f64(w, (double)agree / (double)rows);
    else
        json_w_null(w);
    json_w_key(w, "max_abs_difference");
    json_w_f64(w, max_abs);
    json_w_obj_end(w);
}
