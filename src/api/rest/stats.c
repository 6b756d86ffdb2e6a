#include "api/rest/stats.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/json.h"
#include "obs/stats.h"

static void write_duration(struct json_writer *w, const char *key, const struct stats_duration *d)
{
    json_w_key(w, key);
    json_w_obj_begin(w);
    json_w_key(w, "count");
    json_w_uint(w, d->count);
    json_w_key(w, "ns");
    json_w_uint(w, d->ns);
    json_w_obj_end(w);
}

static void write_model_stat(struct json_writer *w, const struct stats_version *v)
{
    static const struct stats_duration no_cache; /* inferd has no response cache */
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, v->name);
    json_w_key(w, "version");
    json_w_cstr(w, v->version);
    json_w_key(w, "last_inference");
    json_w_uint(w, v->last_inference_ms);
    json_w_key(w, "inference_count");
    json_w_uint(w, v->inference_count);
    json_w_key(w, "execution_count");
    json_w_uint(w, v->execution_count);
    json_w_key(w, "inference_stats");
    json_w_obj_begin(w);
    write_duration(w, "success", &v->success);
    write_duration(w, "fail", &v->fail);
    write_duration(w, "queue", &v->queue);
    write_duration(w, "compute_input", &v->compute_input);
    write_duration(w, "compute_infer", &v->compute_infer);
    write_duration(w, "compute_output", &v->compute_output);
    write_duration(w, "cache_hit", &no_cache);
    write_duration(w, "cache_miss", &no_cache);
    json_w_obj_end(w);
    json_w_key(w, "response_stats");
    json_w_obj_begin(w);
    for (uint32_t i = 0; i < v->nresponses; i++) {
        const struct stats_response *r = &v->responses[i];
        char key[12];
        snprintf(key, sizeof key, "%" PRIu32, r->index);
        json_w_key(w, key);
        json_w_obj_begin(w);
        write_duration(w, "compute_infer", &r->compute_infer);
        write_duration(w, "compute_output", &r->compute_output);
        write_duration(w, "success", &r->success);
        write_duration(w, "fail", &r->fail);
        write_duration(w, "empty_response", &r->empty_response);
        write_duration(w, "cancel", &r->cancel);
        json_w_obj_end(w);
    }
    json_w_obj_end(w);
    json_w_key(w, "batch_stats");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < v->nbatches; i++) {
        const struct stats_batch *b = &v->batches[i];
        json_w_obj_begin(w);
        json_w_key(w, "batch_size");
        json_w_uint(w, b->batch_size);
        write_duration(w, "compute_input", &b->compute_input);
        write_duration(w, "compute_infer", &b->compute_infer);
        write_duration(w, "compute_output", &b->compute_output);
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
    /* Triton's form: one entry per kind of memory; inferd's is host memory. */
    json_w_key(w, "memory_usage");
    json_w_arr_begin(w);
    json_w_obj_begin(w);
    json_w_key(w, "type");
    json_w_str(w, "CPU", 3);
    json_w_key(w, "id");
    json_w_uint(w, 0);
    json_w_key(w, "byte_size");
    json_w_uint(w, v->memory_bytes);
    json_w_obj_end(w);
    json_w_arr_end(w);
    json_w_obj_end(w);
}

void rest_stats(struct repository *repo, struct http_txn *txn, const char *model, size_t model_len,
                const char *version)
{
    struct stats_report report;
    struct error err;
    error_clear(&err);
    if (stats_report_build(repo, model, model_len, version, &report, &err) != 0) {
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "model_stats");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < report.count; i++)
        write_model_stat(&w, &report.versions[i]);
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    stats_report_free(&report);
    http_txn_respond(txn, 200, "application/json");
}
