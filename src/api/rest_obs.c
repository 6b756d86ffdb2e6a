#include "api/rest_obs.h"

#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "obs/request.h"
#include "obs/settings.h"
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
    _Static_assert(REQUEST_ID_MAX == HTTP_REQUEST_ID_MAX, "a txn keeps whole request ids");
    memcpy(txn->request_id, id, id_len + 1);

    struct obsreq_start s = {
        .proto = txn->version == HTTP_VERSION_3     ? OBS_PROTO_H3
                 : txn->version == HTTP_VERSION_2   ? OBS_PROTO_H2
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

/* The body's JSON object as settings (obs/settings.h), arena-owned. */
static int parse_settings(struct http_txn *txn, struct arena *a, struct setting **out, uint32_t *n,
                          struct error *err)
{
    struct json_value *v;
    const char *msg;
    size_t off;
    const char *body = txn->req.body ? txn->req.body : "";
    if (json_parse(a, body, (size_t)txn->req.body_len, NULL, &v, &msg, &off) != 0)
        return error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
    return settings_from_json(a, v, out, n, err);
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

static void write_log_settings(struct http_txn *txn)
{
    struct log_settings_view v;
    settings_log_get(&v);
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "log_file");
    json_w_cstr(&w, v.file);
    json_w_key(&w, "log_info");
    json_w_bool(&w, v.info);
    json_w_key(&w, "log_warning");
    json_w_bool(&w, v.warning);
    json_w_key(&w, "log_error");
    json_w_bool(&w, v.error);
    json_w_key(&w, "log_verbose_level");
    json_w_uint(&w, v.verbose_level);
    json_w_key(&w, "log_format");
    json_w_cstr(&w, v.format);
    json_w_obj_end(&w);
    http_txn_respond(txn, 200, "application/json");
}

/* POST: parses the body and applies it with `apply` (model: the trace
 * settings' model or NULL). Answers the error itself and returns false. */
static bool post_settings(struct http_txn *txn, const char *model,
                          int (*apply)(const char *model, const struct setting *s, uint32_t n,
                                       struct error *err))
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct error err;
    struct setting *s;
    uint32_t n;
    int rc = parse_settings(txn, &a, &s, &n, &err);
    if (rc == 0)
        rc = apply(model, s, n, &err);
    arena_free(&a);
    if (rc != 0)
        http_txn_error(txn, err.status, err.msg);
    return rc == 0;
}

static int apply_log(const char *model, const struct setting *s, uint32_t n, struct error *err)
{
    (void)model;
    return settings_log_apply(s, n, err);
}

void rest_obs_logging(struct http_txn *txn)
{
    if (!check_method(txn))
        return;
    if (is_post(txn) && !post_settings(txn, NULL, apply_log))
        return;
    write_log_settings(txn);
}

/* ---- trace settings ------------------------------------------------------------------ */

static void write_trace_settings(struct http_txn *txn, const char *model)
{
    struct trace_settings_view v;
    settings_trace_get(model, &v);
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "trace_level");
    json_w_arr_begin(&w);
    json_w_cstr(&w, v.level);
    json_w_arr_end(&w);
    json_w_key(&w, "trace_rate");
    json_w_cstr(&w, v.rate);
    json_w_key(&w, "trace_count");
    json_w_cstr(&w, v.count);
    json_w_key(&w, "log_frequency");
    json_w_cstr(&w, v.log_frequency);
    json_w_key(&w, "trace_file");
    json_w_cstr(&w, v.file);
    json_w_key(&w, "trace_mode");
    json_w_cstr(&w, v.mode);
    json_w_obj_end(&w);
    http_txn_respond(txn, 200, "application/json");
}

void rest_obs_trace_setting(struct http_txn *txn, struct repository *repo, const char *model,
                            size_t model_len)
{
    if (!check_method(txn))
        return;
    struct error err;
    if (model && settings_trace_model_check(repo, model, model_len, &err) != 0) {
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    if (is_post(txn) && !post_settings(txn, model, settings_trace_apply))
        return;
    write_trace_settings(txn, model);
}
