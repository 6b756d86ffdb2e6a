#include "api/rest/logging.h"

#include <string.h>

#include "api/http_path.h"
#include "base/arena.h"
#include "base/json.h"
#include "obs/settings.h"
#include "obs/trace.h"

/* ---- shared by both endpoints -------------------------------------------------- */

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
    if (http_method_is_get(txn) || http_method_is(txn, "POST"))
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

void rest_logging(struct http_txn *txn)
{
    if (!check_method(txn))
        return;
    if (http_method_is(txn, "POST") && !post_settings(txn, NULL, apply_log))
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

void rest_trace_setting(struct http_txn *txn, struct repository *repo, const char *model,
                        size_t model_len)
{
    if (!check_method(txn))
        return;
    struct error err;
    if (model && settings_trace_model_check(repo, model, model_len, &err) != 0) {
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    if (http_method_is(txn, "POST") && !post_settings(txn, model, settings_trace_apply))
        return;
    write_trace_settings(txn, model);
}
