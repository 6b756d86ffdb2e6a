#include "api/pages/dashboard.h"

#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/procmem.h"
#include "dashboard_html.h"
#include "obs/metrics.h"
#include "obs/stats.h"
#include "sched/sched.h"

void dashboard_page(struct http_txn *txn)
{
    if (buf_append(&txn->body, dashboard_html, dashboard_html_LEN) != 0) {
        http_txn_error(txn, 500, "cannot send the dashboard");
        return;
    }
    http_txn_add_header(txn, "Cache-Control", "no-store");
    http_txn_respond(txn, 200, "text/html; charset=utf-8");
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void write_version(struct json_writer *w, const struct model *m,
                          const struct stats_version *v)
{
    json_w_obj_begin(w);
    json_w_key(w, "version");
    json_w_cstr(w, m->version_str);
    json_w_key(w, "sha256");
    json_w_cstr(w, m->sha256);
    json_w_key(w, "max_batch_size");
    json_w_uint(w, m->sched_cfg.max_batch_size);
    json_w_key(w, "queue_depth");
    json_w_uint(w, sched_queue_depth(m->sched));
    json_w_key(w, "queue_capacity");
    json_w_uint(w, m->sched_cfg.max_queue_size);
    json_w_key(w, "memory_bytes");
    json_w_uint(w, m->memory_bytes);
    json_w_key(w, "success");
    json_w_uint(w, v->success.count);
    json_w_key(w, "fail");
    json_w_uint(w, v->fail.count);
    json_w_key(w, "inference_count");
    json_w_uint(w, v->inference_count);
    json_w_key(w, "execution_count");
    json_w_uint(w, v->execution_count);
    json_w_key(w, "last_inference");
    json_w_uint(w, v->last_inference_ms);
    /* Per-bucket (not cumulative) counts of inferd_request_duration_seconds. */
    json_w_key(w, "latency_buckets");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i <= stats_duration_buckets.nbounds; i++)
        json_w_uint(w, v->request_hist.buckets[i]);
    json_w_arr_end(w);
    json_w_key(w, "latency_sum_seconds");
    json_w_f64(w, (double)v->request_hist.sum / 1e9);
    json_w_obj_end(w);
}

void dashboard_data(const struct obs_sources *src, struct http_txn *txn)
{
    if (!src) {
        http_txn_error(txn, 404, "the dashboard is not enabled");
        return;
    }
    struct model_snapshot *snap = repository_acquire(src->repo);
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "server");
    json_w_obj_begin(&w);
    json_w_key(&w, "name");
    json_w_cstr(&w, "inferd");
    json_w_key(&w, "version");
    json_w_cstr(&w, INFERD_VERSION);
    json_w_key(&w, "now_ms");
    json_w_uint(&w, wall_ms());
    json_w_key(&w, "start_ms");
    json_w_uint(&w, src->start_ms);
    json_w_key(&w, "ready");
    json_w_bool(&w, snapshot_all_ready(snap));
    json_w_key(&w, "open_connections");
    json_w_uint(&w, src->open_connections ? atomic_load(src->open_connections) : 0);
    json_w_key(&w, "rss_bytes");
    json_w_uint(&w, procmem_rss_bytes());
    json_w_obj_end(&w);

    /* Upper bounds of the latency buckets, in seconds (+Inf implied). */
    json_w_key(&w, "latency_bounds_seconds");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < stats_duration_buckets.nbounds; i++)
        json_w_f64(&w, (double)stats_duration_buckets.bounds[i] / stats_duration_buckets.divisor);
    json_w_arr_end(&w);

    json_w_key(&w, "models");
    json_w_arr_begin(&w);
    bool failed = false;
    for (uint32_t i = 0; i < snap->count && !failed; i++) {
        const struct model_entry *e = &snap->entries[i];
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, e->name);
        json_w_key(&w, "ready");
        json_w_bool(&w, e->state == MODEL_READY);
        json_w_key(&w, "reason");
        json_w_cstr(&w, e->reason);
        json_w_key(&w, "versions");
        json_w_arr_begin(&w);
        for (uint32_t k = 0; k < e->nversions; k++) {
            const struct model *m = e->versions[k];
            struct stats_model *sm = stats_model_find(m->name, m->version);
            struct stats_version v;
            if (!sm || stats_version_read(sm, &v) != 0) {
                failed = true;
                break;
            }
            write_version(&w, m, &v);
            stats_version_free(&v);
        }
        json_w_arr_end(&w);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    /* Canaries and shadows of the models with a routing table. */
    json_w_key(&w, "routing");
    if (src->routing)
        routing_write_summary(src->routing, &w);
    else
        json_w_raw(&w, "[]", 2);
    json_w_obj_end(&w);
    repository_release(src->repo, snap);
    if (failed) {
        buf_reset(&txn->body);
        http_txn_error(txn, 503, "out of memory reading statistics");
        return;
    }
    http_txn_add_header(txn, "Cache-Control", "no-store");
    http_txn_respond(txn, 200, "application/json");
}
