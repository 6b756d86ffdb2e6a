#include "api/rest_obs.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/log.h"
#include "model/lookup.h"
#include "obs/request.h"
#include "obs/trace.h"

/* ---- per-request hooks ------------------------------------------------------ */

static const char *header(const struct http_txn *txn, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&txn->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

static size_t txn_peer(const void *ctx, char *out, size_t cap)
{
    return http_txn_peer(ctx, out, cap);
}

/* Before the response head is formatted: our span's traceparent. */
static void on_head(struct http_txn *txn, int status)
{
    (void)status;
    char tp[TRACEPARENT_LEN + 1];
    if (obsreq_traceparent(txn->obs, tp))
        http_txn_add_header(txn, "traceparent", tp);
}

/* The exchange is over (status 0: the peer left): the log line and spans. */
static void on_end(struct http_txn *txn, int status, uint64_t body_bytes)
{
    struct obsreq *o = txn->obs;
    txn->obs = NULL;
    if (txn->error)
        obsreq_set_error(o, txn->error);
    obsreq_end(o, status, body_bytes);
}

void rest_obs_begin(struct http_txn *txn)
{
    size_t id_len = 0;
    const char *incoming = header(txn, "x-request-id", &id_len);
    char id[REQUEST_ID_MAX + 1];
    id_len = request_id_resolve(incoming, id_len, id);
    http_txn_add_header(txn, "x-request-id", id);

    struct obsreq_start s = {
        .proto = txn->version == HTTP_VERSION_2     ? OBS_PROTO_H2
                 : txn->version == HTTP_VERSION_1_0 ? OBS_PROTO_HTTP10
                                                    : OBS_PROTO_HTTP1,
        .method = txn->req.method,
        .method_len = txn->req.method_len,
        .endpoint = txn->req.path,
        .endpoint_len = txn->req.path_len,
        .request_id = id,
        .request_id_len = id_len,
        .bytes_in = txn->req.body_len,
        .start_ns = txn->start_ns,
        .peer = txn_peer,
        .peer_ctx = txn,
    };
    s.traceparent = header(txn, "traceparent", &s.traceparent_len);
    s.tracestate = header(txn, "tracestate", &s.tracestate_len);
    struct obsreq *o = obsreq_begin(&s);
    txn->obs = o;
    txn->on_head = o ? on_head : NULL;
    txn->on_end = o ? on_end : NULL;
}

void rest_obs_infer_begin(struct http_txn *txn, struct infer_request *req, const struct model *m)
{
    obsreq_attach(txn->obs, req, m->name, m->version_str, m->sha256);
}

void rest_obs_infer_done(struct http_txn *txn, const struct infer_request *req)
{
    obsreq_infer_done(txn->obs, req);
}

/* ---- shared by both endpoints -------------------------------------------------- */

static bool is_post(const struct http_txn *txn)
{
    return txn->req.method_len == 4 && memcmp(txn->req.method, "POST", 4) == 0;
}

static bool is_get(const struct http_txn *txn)
{
    return (txn->req.method_len == 3 && memcmp(txn->req.method, "GET", 3) == 0) ||
           (txn->req.method_len == 4 && memcmp(txn->req.method, "HEAD", 4) == 0);
}

/* Parses the body as a JSON object into *root (arena-owned). */
static int parse_object(struct http_txn *txn, struct arena *a, const struct json_value **root,
                        struct error *err)
{
    struct json_value *v;
    const char *msg;
    size_t off;
    const char *body = txn->req.body ? txn->req.body : "";
    if (json_parse(a, body, (size_t)txn->req.body_len, NULL, &v, &msg, &off) != 0)
        return error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "request body must be a JSON object");
    *root = v;
    return 0;
}

static bool check_method(struct http_txn *txn)
{
    if (is_get(txn) || is_post(txn))
        return true;
    http_txn_add_header(txn, "Allow", "GET, HEAD, POST");
    http_txn_error(txn, 405, "method not allowed; use GET, HEAD, POST");
    return false;
}

/* ---- logging --------------------------------------------------------------------- */

/* "default" or "ISO8601" (both inferd's text format), or "json". */
static _Atomic(const char *) text_format_name = "default";

static void write_log_settings(struct http_txn *txn)
{
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "log_file");
    json_w_cstr(&w, "");
    json_w_key(&w, "log_info");
    json_w_bool(&w, log_enabled(LOG_INFO));
    json_w_key(&w, "log_warning");
    json_w_bool(&w, log_enabled(LOG_WARN));
    json_w_key(&w, "log_error");
    json_w_bool(&w, log_enabled(LOG_ERROR));
    json_w_key(&w, "log_verbose_level");
    json_w_uint(&w, log_enabled(LOG_DEBUG) ? 1 : 0);
    json_w_key(&w, "log_format");
    json_w_cstr(&w, log_get_format() == LOG_FORMAT_JSON ? "json" : atomic_load(&text_format_name));
    json_w_obj_end(&w);
    http_txn_respond(txn, 200, "application/json");
}

static int apply_log_settings(const struct json_value *body, struct error *err)
{
    /* Validate every field before changing anything. */
    int info = -1, warn = -1, error = -1, verbose = -1, format = -1;
    const char *format_name = NULL;
    for (uint32_t i = 0; i < body->len; i++) {
        const char *k = body->u.members[i].key;
        const struct json_value *v = &body->u.members[i].value;
        int *flag = NULL;
        if (strcmp(k, "log_info") == 0)
            flag = &info;
        else if (strcmp(k, "log_warning") == 0 || strcmp(k, "log_warnings") == 0)
            flag = &warn;
        else if (strcmp(k, "log_error") == 0 || strcmp(k, "log_errors") == 0)
            flag = &error;
        if (flag) {
            if (v->type != JSON_TRUE && v->type != JSON_FALSE)
                return error_set(err, 400, "'%s' must be a boolean", k);
            *flag = v->type == JSON_TRUE;
        } else if (strcmp(k, "log_verbose_level") == 0) {
            uint64_t level;
            if (v->type != JSON_NUMBER || json_num_u64(v, &level) != 0 || level > UINT32_MAX)
                return error_set(err, 400, "'log_verbose_level' must be an integer >= 0");
            verbose = level > 0;
        } else if (strcmp(k, "log_format") == 0) {
            if (v->type != JSON_STRING)
                return error_set(err, 400, "'log_format' must be a string");
            if (strcmp(v->u.str, "default") == 0 || strcmp(v->u.str, "ISO8601") == 0) {
                format = LOG_FORMAT_TEXT;
                format_name = strcmp(v->u.str, "default") == 0 ? "default" : "ISO8601";
            } else if (strcmp(v->u.str, "json") == 0) {
                format = LOG_FORMAT_JSON;
            } else {
                return error_set(err, 400, "unknown log_format '%.64s' (default, ISO8601, json)",
                                 v->u.str);
            }
        } else if (strcmp(k, "log_file") == 0) {
            if (v->type != JSON_STRING)
                return error_set(err, 400, "'log_file' must be a string");
            if (v->len != 0)
                return error_set(err, 400, "log_file cannot be set: inferd logs to stderr "
                                           "(redirect it, or use --access-log for requests)");
        } else {
            return error_set(err, 400, "unknown log setting '%.64s'", k);
        }
    }
    if (info >= 0)
        log_set_enabled(LOG_INFO, info);
    if (warn >= 0)
        log_set_enabled(LOG_WARN, warn);
    if (error >= 0)
        log_set_enabled(LOG_ERROR, error);
    if (verbose >= 0)
        log_set_enabled(LOG_DEBUG, verbose);
    if (format >= 0)
        log_set_format((enum log_format)format);
    if (format_name)
        atomic_store(&text_format_name, format_name);
    return 0;
}

void rest_obs_logging(struct http_txn *txn)
{
    if (!check_method(txn))
        return;
    if (is_post(txn)) {
        struct arena a;
        arena_init(&a, 4096, 1 << 20);
        struct error err;
        const struct json_value *body;
        int rc = parse_object(txn, &a, &body, &err);
        if (rc == 0)
            rc = apply_log_settings(body, &err);
        arena_free(&a);
        if (rc != 0) {
            http_txn_error(txn, err.status, err.msg);
            return;
        }
    }
    write_log_settings(txn);
}

/* ---- trace settings ------------------------------------------------------------------ */

static void write_string_array(struct json_writer *w, const char *s)
{
    json_w_arr_begin(w);
    json_w_cstr(w, s);
    json_w_arr_end(w);
}

static void write_trace_settings(struct http_txn *txn, const char *model)
{
    struct trace_settings s;
    trace_settings_get(model, &s);
    char rate[32], count[24], freq[16];
    if (s.rate <= 0)
        snprintf(rate, sizeof rate, "0");
    else if (fabs(1.0 / s.rate - round(1.0 / s.rate)) < 1e-9)
        snprintf(rate, sizeof rate, "%.0f", round(1.0 / s.rate));
    else
        snprintf(rate, sizeof rate, "%.15g", s.rate);
    snprintf(count, sizeof count, "%lld", (long long)s.count);
    snprintf(freq, sizeof freq, "%u", s.log_frequency);
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "trace_level");
    write_string_array(&w, s.level == TRACE_LEVEL_OFF ? "OFF" : "TIMESTAMPS");
    json_w_key(&w, "trace_rate");
    json_w_cstr(&w, rate);
    json_w_key(&w, "trace_count");
    json_w_cstr(&w, count);
    json_w_key(&w, "log_frequency");
    json_w_cstr(&w, freq);
    json_w_key(&w, "trace_file");
    json_w_cstr(&w, s.file);
    json_w_key(&w, "trace_mode");
    json_w_cstr(&w, "opentelemetry");
    json_w_obj_end(&w);
    http_txn_respond(txn, 200, "application/json");
}

void rest_obs_trace_setting(struct http_txn *txn, struct repository *repo, const char *model,
                            size_t model_len)
{
    if (!check_method(txn))
        return;
    if (model) {
        struct error err;
        struct model_snapshot *snap = repository_acquire(repo);
        bool known = model_lookup_entry(snap, model, model_len, &err) != NULL;
        repository_release(repo, snap);
        if (!known) {
            http_txn_error(txn, err.status, err.msg);
            return;
        }
    }
    if (is_post(txn)) {
        struct arena a;
        arena_init(&a, 4096, 1 << 20);
        struct error err;
        const struct json_value *body;
        int rc = parse_object(txn, &a, &body, &err);
        if (rc == 0)
            rc = trace_settings_apply(model, body, &err);
        arena_free(&a);
        if (rc != 0) {
            http_txn_error(txn, err.status, err.msg);
            return;
        }
    }
    write_trace_settings(txn, model);
}
