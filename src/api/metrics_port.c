/* The /metrics exposition and its listener. */
#include "api/metrics_port.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/auth_http.h"
#include "api/streams.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/procmem.h"
#include "base/thread.h"
#include "gen/engine.h"
#include "obs/load_obs.h"
#include "obs/metrics.h"
#include "obs/request.h"
#include "obs/stats.h"
#include "preprocess/prep.h"
#include "sched/sched.h"
#include "serve/seqbatch.h"

/* Exposition body ceiling: grows with models × series; far above any
 * realistic repository. */
#define METRICS_BODY_MAX ((size_t)64 << 20)

/* ---- collecting --------------------------------------------------------- */

struct version_row {
    struct stats_version v;
    const struct model *loaded; /* in the current snapshot, or NULL */
    uint64_t queue_depth;       /* read once, so that every gauge of a scrape agrees */
    uint64_t queue_budget_ns;   /* in force now; 0: none (yet) */
    bool learns_batch_size;     /* sched_preferred_batch_size */
    uint32_t preferred_batch;   /* learned; 0: none yet */
};

struct collected {
    struct version_row *rows;
    uint32_t count, cap;
    bool failed;
};

static void collect_one(const struct stats_model *s, void *arg)
{
    struct collected *c = arg;
    if (c->failed)
        return;
    if (c->count == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 16;
        struct version_row *rows = mem_realloc(c->rows, cap * sizeof *rows);
        if (!rows) {
            c->failed = true;
            return;
        }
        c->rows = rows;
        c->cap = cap;
    }
    struct version_row *r = &c->rows[c->count];
    r->loaded = NULL;
    r->queue_depth = 0;
    r->queue_budget_ns = 0;
    r->learns_batch_size = false;
    r->preferred_batch = 0;
    if (stats_version_read(s, &r->v) != 0) {
        c->failed = true;
        return;
    }
    c->count++;
}

static void collected_free(struct collected *c)
{
    for (uint32_t i = 0; i < c->count; i++)
        stats_version_free(&c->rows[i].v);
    mem_free(c->rows);
}

/* Marks the rows whose version is loaded in snapshot s, and reads their
 * queue depth. */
static void match_loaded(struct collected *c, const struct model_snapshot *s)
{
    for (uint32_t i = 0; i < c->count; i++) {
        struct version_row *r = &c->rows[i];
        const struct model_entry *e = snapshot_find(s, r->v.name, strlen(r->v.name));
        if (e && e->state == MODEL_READY)
            r->loaded = registry_version(e, r->v.version);
        r->queue_depth = r->loaded ? sched_queue_depth(r->loaded->sched) : 0;
        r->queue_budget_ns = r->loaded ? sched_queue_budget_ns(r->loaded->sched) : 0;
        r->learns_batch_size =
            r->loaded && sched_preferred_batch_size(r->loaded->sched, &r->preferred_batch);
    }
}

/* ---- the exposition ----------------------------------------------------- */

enum row_value {
    RV_SUCCESS,
    RV_INFERENCES,
    RV_EXECUTIONS,
    RV_INLINE,
    RV_INPUT_ELEMENTS,
    RV_PADDING_ELEMENTS,
    RV_REQUEST_US,
    RV_QUEUE_US,
    RV_INPUT_US,
    RV_INFER_US,
    RV_OUTPUT_US,
};

static uint64_t row_value(const struct stats_version *v, enum row_value k)
{
    switch (k) {
    case RV_SUCCESS: return v->success.count;
    case RV_INFERENCES: return v->inference_count;
    case RV_EXECUTIONS: return v->execution_count;
    case RV_INLINE: return v->inline_executions;
    case RV_INPUT_ELEMENTS: return v->input_elements;
    case RV_PADDING_ELEMENTS: return v->padding_elements;
    case RV_REQUEST_US: return (v->success.ns + v->fail.ns) / 1000u;
    case RV_QUEUE_US: return v->queue.ns / 1000u;
    case RV_INPUT_US: return v->compute_input.ns / 1000u;
    case RV_INFER_US: return v->compute_infer.ns / 1000u;
    case RV_OUTPUT_US: return v->compute_output.ns / 1000u;
    }
    return 0;
}

static void write_model_counter(struct buf *b, const struct collected *c, const char *name,
                                const char *help, enum row_value k)
{
    metrics_write_header(b, name, "counter", help);
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stats_version *v = &c->rows[i].v;
        const char *labels[] = {"model", v->name, "version", v->version};
        metrics_write_u64(b, name, labels, 2, row_value(v, k));
    }
}

enum row_hist { RH_REQUEST, RH_QUEUE, RH_COMPUTE, RH_BATCH };

static void write_model_hist(struct buf *b, const struct collected *c, const char *name,
                             const char *help, enum row_hist k)
{
    const struct metrics_hist_spec *spec =
        k == RH_BATCH ? &stats_batch_buckets : &stats_duration_buckets;
    metrics_write_header(b, name, "histogram", help);
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stats_version *v = &c->rows[i].v;
        const struct metrics_hist_snapshot *h = k == RH_REQUEST ? &v->request_hist
                                                : k == RH_QUEUE ? &v->queue_hist
                                                : k == RH_COMPUTE ? &v->compute_hist
                                                                  : &v->batch_hist;
        const char *labels[] = {"model", v->name, "version", v->version};
        metrics_write_hist(b, name, labels, 2, spec, h);
    }
}

/* The gauges of a version row that describe it now (its scheduler, its
 * memory). */
enum row_gauge { RG_QUEUE_DEPTH, RG_QUEUE_CAPACITY, RG_BATCH_PREFERRED, RG_QUEUE_BUDGET, RG_MEMORY };

/* Whether row r has gauge k (a loaded version, one that learns a batch
 * size, one with a queue budget), and its value. */
static bool row_gauge(const struct version_row *r, enum row_gauge k, uint64_t *v)
{
    switch (k) {
    case RG_QUEUE_DEPTH: *v = r->queue_depth; return r->loaded != NULL;
    case RG_QUEUE_CAPACITY:
        *v = r->loaded ? r->loaded->sched_cfg.max_queue_size : 0;
        return r->loaded != NULL;
    case RG_BATCH_PREFERRED: *v = r->preferred_batch; return r->learns_batch_size;
    case RG_QUEUE_BUDGET: *v = r->queue_budget_ns; return r->queue_budget_ns != 0;
    case RG_MEMORY: *v = r->loaded ? r->loaded->memory_bytes : 0; return r->loaded != NULL;
    }
    return false;
}

/* Stateful model versions (sequence_batching, serve/seqbatch.h): their
 * sequences now, and since they loaded. */
static void write_sequences(struct buf *b, const struct collected *c)
{
    static const char *const events[] = {"started", "ended", "idle_ended"};
    metrics_write_header(b, "inferd_sequences_active", "gauge",
                         "Sequences a stateful model version keeps: started, not ended");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            metrics_write_header(b, "inferd_sequences_total", "counter",
                                 "Sequences of a stateful model version by event: started (a "
                                 "sequence_start request), ended (a sequence_end request), "
                                 "idle_ended (max_sequence_idle_microseconds passed)");
        for (uint32_t i = 0; i < c->count; i++) {
            const struct version_row *r = &c->rows[i];
            if (!r->loaded || !r->loaded->config.sequence_batching.enabled)
                continue;
            struct seqbatch_stats st;
            seqbatch_stats(r->loaded, &st);
            const char *labels[] = {"model", r->v.name, "version", r->v.version, "event", NULL};
            if (pass == 0) {
                metrics_write_u64(b, "inferd_sequences_active", labels, 2, st.active);
                continue;
            }
            const uint64_t counts[] = {st.started, st.ended, st.idle_ended};
            for (int k = 0; k < 3; k++) {
                labels[5] = events[k];
                metrics_write_u64(b, "inferd_sequences_total", labels, 3, counts[k]);
            }
        }
    }
}

static void write_row_gauge(struct buf *b, const struct collected *c, const char *name,
                            const char *help, enum row_gauge k)
{
    metrics_write_header(b, name, "gauge", help);
    for (uint32_t i = 0; i < c->count; i++) {
        const struct version_row *r = &c->rows[i];
        const char *labels[] = {"model", r->v.name, "version", r->v.version};
        uint64_t v;
        if (!row_gauge(r, k, &v))
            continue;
        if (k == RG_QUEUE_BUDGET) /* ns, exposed in seconds */
            metrics_write_f64(b, name, labels, 2, (double)v / 1e9);
        else
            metrics_write_u64(b, name, labels, 2, v);
    }
}

static void write_model_metrics(struct buf *b, const struct collected *c,
                                const struct model_snapshot *snap)
{
    write_model_counter(b, c, "nv_inference_request_success",
                        "Number of successful inference requests, all batch sizes", RV_SUCCESS);
    metrics_write_header(b, "nv_inference_request_failure", "counter",
                         "Number of failed inference requests, all batch sizes");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stats_version *v = &c->rows[i].v;
        for (int r = 0; r < STATS_FAIL_REASONS; r++) {
            const char *labels[] = {"model", v->name, "version", v->version, "reason",
                                    stats_fail_reason_name(r)};
            metrics_write_u64(b, "nv_inference_request_failure", labels, 3,
                              v->fail_by_reason[r].count);
        }
    }
    write_model_counter(b, c, "nv_inference_count",
                        "Number of inferences performed (samples of successful requests)",
                        RV_INFERENCES);
    write_model_counter(b, c, "nv_inference_exec_count",
                        "Number of model executions performed (batches)", RV_EXECUTIONS);
    write_model_counter(b, c, "inferd_inline_executions_total",
                        "Model executions run by the I/O thread that formed the batch (run to "
                        "completion, no thread hand-off)",
                        RV_INLINE);
    write_model_counter(b, c, "inferd_batch_input_elements_total",
                        "Input elements of the model executions, padding included",
                        RV_INPUT_ELEMENTS);
    write_model_counter(b, c, "inferd_batch_padding_elements_total",
                        "Zeros added to inputs by variable-length batching", RV_PADDING_ELEMENTS);
    metrics_write_header(b, "inferd_route_requests_total", "counter",
                         "Infer requests by the model version that served them and the "
                         "routing rule that chose it (docs/traffic.md)");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stats_version *v = &c->rows[i].v;
        for (int k = 0; k < ROUTE_KINDS; k++) {
            if (!v->routed[k])
                continue;
            const char *labels[] = {"model", v->name, "version", v->version, "route",
                                    route_kind_name(k)};
            metrics_write_u64(b, "inferd_route_requests_total", labels, 3, v->routed[k]);
        }
    }
    write_model_counter(b, c, "nv_inference_request_duration_us",
                        "Cumulative inference request duration in microseconds",
                        RV_REQUEST_US);
    write_model_counter(b, c, "nv_inference_queue_duration_us",
                        "Cumulative inference queuing duration in microseconds", RV_QUEUE_US);
    write_model_counter(b, c, "nv_inference_compute_input_duration_us",
                        "Cumulative compute input duration in microseconds", RV_INPUT_US);
    write_model_counter(b, c, "nv_inference_compute_infer_duration_us",
                        "Cumulative compute inference duration in microseconds", RV_INFER_US);
    write_model_counter(b, c, "nv_inference_compute_output_duration_us",
                        "Cumulative inference compute output duration in microseconds",
                        RV_OUTPUT_US);

    metrics_write_header(b, "nv_inference_pending_request_count", "gauge",
                         "Instantaneous number of pending requests awaiting execution per-model");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct version_row *r = &c->rows[i];
        const char *labels[] = {"model", r->v.name, "version", r->v.version};
        metrics_write_u64(b, "nv_inference_pending_request_count", labels, 2, r->queue_depth);
    }
    metrics_write_header(b, "nv_model_load_duration_secs", "gauge",
                         "Model load time in seconds, loading and warm-up (loaded versions)");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct version_row *r = &c->rows[i];
        const char *labels[] = {"model", r->v.name, "version", r->v.version};
        if (r->loaded)
            metrics_write_f64(b, "nv_model_load_duration_secs", labels, 2,
                              ((double)r->loaded->load_ms * 1000.0 +
                               (double)r->loaded->warmup_us) / 1e6);
    }

    write_model_hist(b, c, "inferd_request_duration_seconds",
                     "Inference request duration, from the complete HTTP request to the "
                     "answer (successful and failed requests)",
                     RH_REQUEST);
    write_model_hist(b, c, "inferd_queue_duration_seconds",
                     "Time successful requests waited in the model's queue", RH_QUEUE);
    write_model_hist(b, c, "inferd_compute_duration_seconds",
                     "Time the batch of a successful request took to gather, run and split",
                     RH_COMPUTE);
    write_model_hist(b, c, "inferd_batch_size", "Samples per model execution", RH_BATCH);

    write_row_gauge(b, c, "inferd_queue_depth", "Requests waiting in the model version's queue",
                    RG_QUEUE_DEPTH);
    write_row_gauge(b, c, "inferd_queue_capacity",
                    "Requests the model version's queue holds before answering 429",
                    RG_QUEUE_CAPACITY);
    write_row_gauge(b, c, "inferd_batch_size_preferred",
                    "Batch size the model version's batcher learned to prefer (fastest per "
                    "sample); 0: none, batches as large as the queue allows",
                    RG_BATCH_PREFERRED);
    write_row_gauge(b, c, "inferd_queue_budget_seconds",
                    "Longest estimated wait the model version's queue admits for a request "
                    "without a timeout of its own (--queue-budget-ms)",
                    RG_QUEUE_BUDGET);
    write_row_gauge(b, c, "inferd_model_memory_bytes",
                    "Host memory the loaded model version took when it loaded: resident size "
                    "growth over its load and warm-up (docs/model-lifecycle.md)",
                    RG_MEMORY);
    write_sequences(b, c);
    metrics_write_header(b, "inferd_queue_refusals_total", "counter",
                         "Requests the model version's queue refused at once, by reason");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stats_version *v = &c->rows[i].v;
        for (int k = 0; k < STATS_QUEUE_REFUSALS; k++) {
            const char *labels[] = {"model", v->name, "version", v->version, "reason",
                                    stats_queue_refusal_name(k)};
            metrics_write_u64(b, "inferd_queue_refusals_total", labels, 3,
                              v->queue_refusals[k]);
        }
    }
    /* Ready: every loaded version (1) and every model of the repository
     * that has none (0, without a version label). */
    metrics_write_header(b, "inferd_model_ready", "gauge",
                         "1 for each loaded model version; 0 (no version label) for a model "
                         "of the repository that failed to load");
    for (uint32_t i = 0; i < snap->count; i++) {
        const struct model_entry *e = &snap->entries[i];
        if (e->state != MODEL_READY || e->nversions == 0) {
            const char *labels[] = {"model", e->name};
            metrics_write_u64(b, "inferd_model_ready", labels, 1, 0);
            continue;
        }
        for (uint32_t k = 0; k < e->nversions; k++) {
            const char *labels[] = {"model", e->name, "version", e->versions[k]->version_str};
            metrics_write_u64(b, "inferd_model_ready", labels, 2, 1);
        }
    }
}

/* REST infer requests refused before they ran, by the HTTP status they
 * got (docs/metrics.md says which refusals share a status; the policy
 * modules' own metrics tell them apart). */
static const struct {
    int status;
    const char *reason;
} reject_reasons[] = {
    {400, "invalid"},    {401, "unauthenticated"}, {403, "forbidden"},
    {404, "not_found"},  {413, "too_large"},       {429, "queue_full"},
    {503, "unavailable"}, {504, "queue_timeout"},
};

static void write_server_metrics(struct buf *b, const struct obs_sources *src,
                                 struct sysinfo_cpu *cpu)
{
    struct metrics_http_totals t;
    metrics_http_read(&t);
    metrics_write_header(b, "inferd_http_responses_total", "counter",
                         "HTTP responses by endpoint and status code");
    for (int e = 0; e < METRICS_ENDPOINTS; e++)
        for (uint32_t s = 0; s <= METRICS_STATUSES; s++) {
            if (!t.responses[e][s])
                continue;
            char code[16];
            int c = metrics_status_code(s);
            snprintf(code, sizeof code, c ? "%d" : "other", c);
            const char *labels[] = {"endpoint", metrics_endpoint_name(e), "code", code};
            metrics_write_u64(b, "inferd_http_responses_total", labels, 2, t.responses[e][s]);
        }
    metrics_write_header(b, "inferd_requests_total", "counter",
                         "Requests by protocol (h1, h1.0, h2, h3, grpc, grpc-web)");
    for (int p = 0; p < OBS_PROTO_COUNT; p++) {
        const char *labels[] = {"protocol", obs_protocol_name((enum obs_protocol)p)};
        metrics_write_u64(b, "inferd_requests_total", labels, 1,
                          obs_protocol_requests((enum obs_protocol)p));
    }
    metrics_write_header(b, "inferd_http_request_body_bytes_total", "counter",
                         "Bytes of HTTP request bodies received");
    metrics_write_u64(b, "inferd_http_request_body_bytes_total", NULL, 0, t.bytes_in);
    metrics_write_header(b, "inferd_http_response_body_bytes_total", "counter",
                         "Bytes of HTTP response bodies sent");
    metrics_write_u64(b, "inferd_http_response_body_bytes_total", NULL, 0, t.bytes_out);
    metrics_write_header(b, "inferd_rejected_requests_total", "counter",
                         "Infer requests answered without running, by reason");
    for (size_t i = 0; i < sizeof reject_reasons / sizeof reject_reasons[0]; i++) {
        const char *labels[] = {"reason", reject_reasons[i].reason};
        uint32_t s = metrics_status_index(reject_reasons[i].status);
        metrics_write_u64(b, "inferd_rejected_requests_total", labels, 1,
                          t.responses[METRICS_EP_INFER][s]);
    }
    metrics_write_header(b, "inferd_open_connections", "gauge",
                         "Open HTTP connections on the HTTP port");
    metrics_write_u64(b, "inferd_open_connections", NULL, 0,
                      src->open_connections ? atomic_load(src->open_connections) : 0);
    metrics_write_header(b, "inferd_process_resident_memory_bytes", "gauge",
                         "Resident set size of the inferd process");
    metrics_write_u64(b, "inferd_process_resident_memory_bytes", NULL, 0, procmem_rss_bytes());
    metrics_write_header(b, "inferd_start_time_seconds", "gauge",
                         "Start time of the process since the Unix epoch in seconds");
    metrics_write_f64(b, "inferd_start_time_seconds", NULL, 0, (double)src->start_ms / 1000.0);

    uint64_t total, used;
    sysinfo_memory(&total, &used);
    metrics_write_header(b, "nv_cpu_utilization", "gauge",
                         "CPU utilization rate [0.0 - 1.0] since the previous scrape");
    metrics_write_f64(b, "nv_cpu_utilization", NULL, 0, sysinfo_cpu_utilization(cpu));
    metrics_write_header(b, "nv_cpu_memory_total_bytes", "gauge",
                         "CPU total memory (RAM), in bytes");
    metrics_write_u64(b, "nv_cpu_memory_total_bytes", NULL, 0, total);
    metrics_write_header(b, "nv_cpu_memory_used_bytes", "gauge",
                         "CPU used memory (RAM), in bytes");
    metrics_write_u64(b, "nv_cpu_memory_used_bytes", NULL, 0, used);
}

void metrics_expose(const struct obs_sources *src, struct sysinfo_cpu *cpu, struct buf *out)
{
    struct collected c = {0};
    stats_foreach(collect_one, &c);
    struct model_snapshot *snap = repository_acquire(src->repo);
    match_loaded(&c, snap);
    if (c.failed)
        out->err = -ENOMEM;
    else
        write_model_metrics(out, &c, snap);
    repository_release(src->repo, snap);
    collected_free(&c);
    load_obs_write(out);
    if (src->routing)
        routing_write_metrics(src->routing, out);
    if (src->auth)
        auth_write_metrics(src->auth, out);
    if (src->ratelimit)
        ratelimit_write_metrics(src->ratelimit, out);
    if (src->tokenquota)
        tokenquota_write_metrics(src->tokenquota, out);
    if (src->limiter)
        limiter_write_metrics(src->limiter, out);
    if (src->breaker)
        breaker_write_metrics(src->breaker, out);
    if (src->usage)
        usage_write_metrics(src->usage, out);
    if (src->remote)
        remote_models_metrics(src->remote, out);
    streams_write_metrics(out);
    gen_write_metrics(out);
    prep_write_metrics(out);
    write_server_metrics(out, src, cpu);
}

/* ---- the listener -------------------------------------------------------- */

struct metrics_server {
    const struct obs_sources *src;
    struct loop loop;
    struct http_server *server;
    struct sysinfo_cpu cpu;
    pthread_t tid;
    struct loop_task stop_task;
    bool loop_ready, thread_started;
};

static void metrics_handle(void *app, struct http_txn *txn)
{
    struct metrics_server *ms = app;
    const struct http1_request *r = &txn->req;
    if (!auth_http_allow(ms->src->auth, AUTH_METRICS, txn))
        return;
    if (r->path_len != 8 || memcmp(r->path, "/metrics", 8) != 0) {
        http_txn_error(txn, 404, "unknown path; metrics are at /metrics");
        return;
    }
    bool get = (r->method_len == 3 && memcmp(r->method, "GET", 3) == 0) ||
               (r->method_len == 4 && memcmp(r->method, "HEAD", 4) == 0);
    if (!get) {
        http_txn_add_header(txn, "Allow", "GET, HEAD");
        http_txn_error(txn, 405, "method not allowed; use GET");
        return;
    }
    txn->body.max = METRICS_BODY_MAX;
    metrics_expose(ms->src, &ms->cpu, &txn->body);
    if (txn->body.err) {
        http_txn_error(txn, 500, "cannot build the metrics exposition");
        return;
    }
    http_txn_respond(txn, 200, METRICS_CONTENT_TYPE);
}

static void metrics_stop_task(struct loop_task *t)
{
    struct metrics_server *ms =
        (struct metrics_server *)((char *)t - offsetof(struct metrics_server, stop_task));
    loop_stop(&ms->loop);
}

static void *metrics_thread(void *arg)
{
    struct metrics_server *ms = arg;
    if (loop_run(&ms->loop) != 0)
        log_error("metrics event loop failed: %s", strerror(errno));
    return NULL;
}

int metrics_server_start(const struct http_server_config *cfg, const struct obs_sources *src,
                         struct metrics_server **out)
{
    struct metrics_server *ms = mem_calloc(1, sizeof *ms);
    if (!ms)
        return -ENOMEM;
    ms->src = src;
    ms->stop_task.run = metrics_stop_task;
    int rc = loop_init(&ms->loop) != 0 ? -errno : 0;
    if (rc)
        goto out_fail;
    ms->loop_ready = true;
    struct http_server_config c = *cfg;
    c.open_connections = NULL; /* the metrics port has its own count */
    rc = http_server_start(&ms->loop, &c, metrics_handle, ms, &ms->server);
    if (rc)
        goto out_fail;
    /* Seed the CPU sample so the first scrape reports a recent interval. */
    sysinfo_cpu_utilization(&ms->cpu);
    rc = -thread_start(&ms->tid, "metrics", metrics_thread, ms);
    if (rc) {
        log_error("cannot start the metrics thread: %s", strerror(-rc));
        goto out_fail;
    }
    ms->thread_started = true;
    *out = ms;
    return 0;
out_fail:
    metrics_server_stop(ms);
    return rc;
}

int metrics_server_port(const struct metrics_server *ms)
{
    return http_server_port(ms->server);
}

void metrics_server_stop(struct metrics_server *ms)
{
    if (!ms)
        return;
    if (ms->thread_started) {
        loop_post(&ms->loop, &ms->stop_task);
        pthread_join(ms->tid, NULL);
    }
    http_server_free(ms->server);
    if (ms->loop_ready)
        loop_close(&ms->loop);
    mem_free(ms);
}
