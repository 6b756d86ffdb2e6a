#include "api/rest/rest.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/rest/logging.h"
#include "api/rest/shm.h"
#include "api/rest/stats.h"
#include "api/server_info.h"
#include "api/tensor_json.h"
#include "api/usage_http.h"
#include "base/json.h"
#include "model/lookup.h"
#include "policy/routing.h"
#include "preprocess/prep.h"
#include "serve/repo_call.h"

static void respond_json(struct http_txn *txn, int status)
{
    http_txn_respond(txn, status, "application/json");
}

/* ---- server endpoints ------------------------------------------------- */

static void handle_server_metadata(struct rest_api *api, struct http_txn *txn)
{
    (void)api;
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "name");
    json_w_cstr(&w, server_info_name());
    json_w_key(&w, "version");
    json_w_cstr(&w, INFERD_VERSION);
    json_w_key(&w, "extensions");
    json_w_arr_begin(&w);
    size_t n;
    const char *const *ext = server_info_extensions(&n);
    for (size_t i = 0; i < n; i++)
        json_w_cstr(&w, ext[i]);
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    respond_json(txn, 200);
}

static void handle_health(struct rest_api *api, struct http_txn *txn, bool ready_check)
{
    if (ready_check && api->draining) {
        http_txn_error(txn, 503, "shutting down");
        return;
    }
    if (ready_check) {
        struct model_snapshot *s = repository_acquire(api->repo);
        bool ready = snapshot_all_ready(s);
        repository_release(api->repo, s);
        if (!ready) {
            http_txn_error(txn, 503, "not every model is ready");
            return;
        }
    }
    http_txn_respond(txn, 200, NULL);
}

/* ---- model endpoints -------------------------------------------------- */

/* Resolves {m} and the optional version (default: the newest loaded) in
 * snapshot s; answers 404 itself on failure. */
static const struct model *find_model(const struct model_snapshot *s, struct http_txn *txn,
                                      const struct http_segment *name,
                                      const struct http_segment *version,
                                      const struct model_entry **entry)
{
    struct error err;
    const struct model *m =
        model_lookup(s, name->text, name->len, version ? version->text : NULL, entry, &err);
    if (!m)
        http_txn_error(txn, err.status, err.msg);
    return m;
}

/* inferd's addition to a raw input of a preprocessed model
 * (docs/preprocessing.md): "parameters": {"preprocess": "image",
 * "content_types": [...], "feeds": [...]}, so that clients can tell it
 * from the tensors it replaces. */
static void write_raw_input(struct json_writer *w, const struct prep_raw_info *r)
{
    json_w_key(w, "parameters");
    json_w_obj_begin(w);
    json_w_key(w, "preprocess");
    json_w_cstr(w, r->modality);
    json_w_key(w, "content_types");
    json_w_arr_begin(w);
    for (const char *const *t = r->content_types; *t; t++)
        json_w_cstr(w, *t);
    json_w_arr_end(w);
    json_w_key(w, "feeds");
    json_w_arr_begin(w);
    for (uint32_t k = 0; k < r->nfeeds; k++)
        json_w_cstr(w, r->feeds[k]);
    json_w_arr_end(w);
    json_w_obj_end(w);
}

/* m: the model whose inputs ios are (its raw inputs get their
 * parameters), or NULL for outputs. */
static void write_ios(struct json_writer *w, const struct model_io *ios, uint32_t n,
                      const struct model *m)
{
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        json_w_obj_begin(w);
        tensor_json_write_head(w, ios[i].name, ios[i].dtype, ios[i].dims, ios[i].ndim);
        struct prep_raw_info raw;
        if (m && prep_raw_info(m, i, &raw))
            write_raw_input(w, &raw);
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
}

static void handle_model_metadata(struct http_txn *txn, const struct model_entry *e,
                                  const struct model *m)
{
    struct json_writer w;
    json_w_init(&w, &txn->body);
    json_w_obj_begin(&w);
    json_w_key(&w, "name");
    json_w_cstr(&w, m->name);
    json_w_key(&w, "versions");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < e->nversions; i++)
        json_w_cstr(&w, e->versions[i]->version_str);
    json_w_arr_end(&w);
    json_w_key(&w, "platform");
    json_w_cstr(&w, m->platform);
    json_w_key(&w, "inputs");
    write_ios(&w, m->info.inputs, m->info.ninputs, m);
    json_w_key(&w, "outputs");
    write_ios(&w, m->info.outputs, m->info.noutputs, NULL);
    /* inferd's addition: the identity of the served file. */
    json_w_key(&w, "parameters");
    json_w_obj_begin(&w);
    json_w_key(&w, "sha256");
    json_w_cstr(&w, m->sha256);
    json_w_obj_end(&w);
    json_w_obj_end(&w);
    respond_json(txn, 200);
}

/* Triton's model_configuration extension: the effective configuration. */
static void handle_model_config(struct http_txn *txn, const struct model *m)
{
    struct json_writer w;
    json_w_init(&w, &txn->body);
    model_config_write_json(&m->config, &w);
    respond_json(txn, 200);
}

static const struct {
    const char *action;
    enum rest_infer_kind kind;
} infer_actions[] = {
    {"infer", REST_INFER},
    {"generate", REST_GENERATE},
    {"generate_stream", REST_GENERATE_STREAM},
};

/* /v2/models/{m}[/versions/{v}][/ready|/config|/infer|/generate|/generate_stream] */
static void route_model(struct rest_api *api, struct http_txn *txn, const struct http_path *r)
{
    const struct http_segment *name = &r->seg[2];
    const struct http_segment *version = NULL;
    int i = 3;
    if (http_path_is(r, 3, "versions")) {
        if (r->n < 5) {
            http_txn_error(txn, 404, "missing version after /versions");
            return;
        }
        version = &r->seg[4];
        i = 5;
    }
    const char *action = i < r->n ? r->seg[i].text : "";
    int infer = -1;
    for (size_t k = 0; k < sizeof infer_actions / sizeof infer_actions[0]; k++)
        if (strcmp(action, infer_actions[k].action) == 0)
            infer = (int)k;
    if (i + 1 < r->n ||
        (i < r->n && infer < 0 && strcmp(action, "ready") != 0 && strcmp(action, "config") != 0)) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (infer >= 0 ? !http_method_is(txn, "POST") : !http_method_is_get(txn)) {
        http_method_not_allowed(txn, infer >= 0 ? "POST" : "GET, HEAD");
        return;
    }
    if (infer >= 0) {
        /* The pipeline resolves the model itself (routing may choose). */
        rest_infer_start(&api->infer, txn, infer_actions[infer].kind, name->text,
                         version ? version->text : NULL);
        return;
    }
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model_entry *e;
    const struct model *m = find_model(s, txn, name, version, &e);
    if (!m) {
    } else if (strcmp(action, "ready") == 0) {
        http_txn_respond(txn, 200, NULL);
    } else if (strcmp(action, "config") == 0) {
        handle_model_config(txn, m);
    } else {
        handle_model_metadata(txn, e, m);
    }
    repository_release(api->repo, s);
}

/* GET/PUT /v2/models/{m}/routing: the model's routing table
 * (policy/routing.h, docs/traffic.md). */
static void handle_routing(struct rest_api *api, struct http_txn *txn,
                           const struct http_segment *name)
{
    struct error err;
    struct json_writer w;
    bool put = http_method_is(txn, "PUT");
    if (!put && !http_method_is_get(txn))
        return http_method_not_allowed(txn, "GET, HEAD, PUT");
    if (name->len != strlen(name->text)) {
        http_txn_error(txn, 404, "Request for unknown model: the name holds a NUL byte");
        return;
    }
    json_w_init(&w, &txn->body);
    int rc = put ? routing_put(api->routing, name->text, txn->req.body ? txn->req.body : "",
                               (size_t)txn->req.body_len, &w, &err)
                 : routing_get(api->routing, name->text, &w, &err);
    if (rc != 0) {
        buf_reset(&txn->body);
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    respond_json(txn, 200);
}

/* ---- repository API (Triton's model_repository extension) --------------- */

/* A load or unload is done: answer its exchange. */
static void repo_call_done(void *ctx, int status, const char *msg)
{
    struct http_txn *txn = ctx;
    if (status)
        http_txn_error(txn, status, msg);
    else
        http_txn_respond(txn, 200, NULL);
}

/* Reads the optional JSON body of a load/unload/index request into *root. */
static int parse_body(struct http_txn *txn, struct arena *a, const struct json_value **root,
                      struct error *err)
{
    *root = NULL;
    if (!txn->req.body_len)
        return 0;
    struct json_value *v;
    const char *msg;
    size_t off;
    if (json_parse(a, txn->req.body, (size_t)txn->req.body_len, NULL, &v, &msg, &off) != 0)
        return error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "request body must be a JSON object");
    *root = v;
    return 0;
}

static void handle_repository_index(struct rest_api *api, struct http_txn *txn)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct error err;
    const struct json_value *body;
    if (parse_body(txn, &a, &body, &err) != 0) {
        arena_free(&a);
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    const struct json_value *ready = json_get(body, "ready");
    if (ready && ready->type != JSON_TRUE && ready->type != JSON_FALSE) {
        arena_free(&a);
        http_txn_error(txn, 400, "'ready' must be a boolean");
        return;
    }
    struct json_writer w;
    json_w_init(&w, &txn->body);
    repository_index(api->repo, ready && ready->type == JSON_TRUE, &w);
    arena_free(&a);
    respond_json(txn, 200);
}

static void handle_repository_call(struct rest_api *api, struct http_txn *txn,
                                   const struct http_segment *name, bool load)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct error err;
    const struct json_value *body;
    if (parse_body(txn, &a, &body, &err) != 0)
        goto out_error;
    const struct json_value *params = json_get(body, "parameters");
    const struct json_value *config = json_get(params, "config");
    if (params && params->type != JSON_OBJECT) {
        error_set(&err, 400, "'parameters' must be an object");
        goto out_error;
    }
    if (config && config->type != JSON_STRING) {
        error_set(&err, 400, "'config' must be a string (the configuration as JSON)");
        goto out_error;
    }
    for (uint32_t i = 0; load && params && i < params->len; i++) {
        const struct json_member *p = &params->u.members[i];
        if (strcmp(p->key, "config") != 0) {
            serve_repo_refuse_param(name->text, name->len, p->key, p->key_len, &err);
            goto out_error;
        }
    }
    if (serve_repo_call(api->serve, load, name->text, name->len, config ? config->u.str : NULL,
                        config ? config->len : 0, repo_call_done, txn, &err) != 0)
        goto out_error;
    arena_free(&a);
    return;
out_error:
    arena_free(&a);
    http_txn_error(txn, err.status, err.msg);
}

/* /v2/repository/index, /v2/repository/models/{m}/load|unload */
static void route_repository(struct rest_api *api, struct http_txn *txn, const struct http_path *r)
{
    bool index = r->n == 3 && http_path_is(r, 2, "index");
    bool call = r->n == 5 && http_path_is(r, 2, "models") &&
                (http_path_is(r, 4, "load") || http_path_is(r, 4, "unload"));
    if (!index && !call) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!http_method_is(txn, "POST")) {
        http_method_not_allowed(txn, "POST");
        return;
    }
    if (index)
        handle_repository_index(api, txn);
    else
        handle_repository_call(api, txn, &r->seg[3], http_path_is(r, 4, "load"));
}

/* ---- shared memory (Triton's extensions, api/rest/shm.h) ------------------ */

/* /v2/systemsharedmemory[/region/{name}]/status|unregister,
 * /v2/systemsharedmemory/region/{name}/register; /v2/cudasharedmemory/... */
static void route_shared_memory(struct rest_api *api, struct http_txn *txn,
                                const struct http_path *r)
{
    bool region = r->n == 5 && http_path_is(r, 2, "region");
    const char *action = r->n == 3 ? r->seg[2].text : region ? r->seg[4].text : "";
    bool status = strcmp(action, "status") == 0, unregister = strcmp(action, "unregister") == 0,
         reg = region && strcmp(action, "register") == 0;
    if ((r->n != 3 && !region) || (!status && !unregister && !reg)) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (status ? !http_method_is_get(txn) : !http_method_is(txn, "POST")) {
        http_method_not_allowed(txn, status ? "GET, HEAD" : "POST");
        return;
    }
    const char *name = region ? r->seg[3].text : NULL;
    if (name && strlen(name) != r->seg[3].len) {
        http_txn_error(txn, 400, "a region name cannot contain NUL bytes");
        return;
    }
    struct shm_registry *shm = api->serve->shm;
    if (http_path_is(r, 1, "cudasharedmemory")) {
        rest_shm_cuda(shm, txn, action, name);
        return;
    }
    if (status)
        rest_shm_status(shm, txn, name);
    else if (unregister)
        rest_shm_unregister(shm, txn, name);
    else
        rest_shm_register(shm, txn, name);
}

/* ---- statistics (Triton's extension, api/rest/stats.h) ------------------ */

/* /v2/models/stats, /v2/models/{m}/stats, /v2/models/{m}/versions/{v}/stats */
static void route_stats(struct rest_api *api, struct http_txn *txn, const struct http_path *r)
{
    bool all = r->n == 3, model = r->n == 4, version = r->n == 6 && http_path_is(r, 3, "versions");
    if (!all && !model && !version) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!http_method_is_get(txn)) {
        http_method_not_allowed(txn, "GET, HEAD");
        return;
    }
    rest_stats(api->repo, txn, all ? NULL : r->seg[2].text, all ? 0 : r->seg[2].len,
               version ? r->seg[4].text : NULL);
}

/* ---- API keys (policy/auth.h) ------------------------------------------------- */

enum auth_class rest_route_class(const struct http_path *r)
{
    if (r->n == 1)
        return AUTH_METADATA;
    if (http_path_is(r, 1, "health"))
        return AUTH_HEALTH;
    if (http_path_is(r, 1, "logging") || http_path_is(r, 1, "trace") ||
        http_path_is(r, 1, "repository") || http_path_is(r, 1, "usage"))
        return AUTH_ADMIN;
    if (http_path_is(r, 1, "systemsharedmemory") || http_path_is(r, 1, "cudasharedmemory"))
        return AUTH_INFER;
    if (!http_path_is(r, 1, "models") || r->n < 4)
        return AUTH_READ;
    if (http_path_is(r, 3, "routing") || http_path_is(r, 3, "trace"))
        return AUTH_ADMIN;
    int action = r->n == 4 ? 3 : r->n == 6 && http_path_is(r, 3, "versions") ? 5 : -1;
    for (size_t k = 0; action > 0 && k < sizeof infer_actions / sizeof infer_actions[0]; k++)
        if (http_path_is(r, action, infer_actions[k].action))
            return AUTH_IN_PIPELINE;
    return AUTH_READ;
}

/* ---- the /v2 routes ------------------------------------------------------------- */

void rest_route(struct rest_api *api, struct http_txn *txn, const struct http_path *r)
{
    if (r->n == 1) {
        if (!http_method_is_get(txn))
            return http_method_not_allowed(txn, "GET, HEAD");
        return handle_server_metadata(api, txn);
    }
    if (http_path_is(r, 1, "health") && r->n == 3 &&
        (http_path_is(r, 2, "live") || http_path_is(r, 2, "ready"))) {
        if (!http_method_is_get(txn))
            return http_method_not_allowed(txn, "GET, HEAD");
        return handle_health(api, txn, http_path_is(r, 2, "ready"));
    }
    if (http_path_is(r, 1, "models") && r->n >= 3 && http_path_is(r, r->n - 1, "stats"))
        return route_stats(api, txn, r);
    /* Triton's logging and trace extensions (api/rest/logging.h) */
    if (r->n == 2 && http_path_is(r, 1, "logging"))
        return rest_logging(txn);
    if (r->n == 3 && http_path_is(r, 1, "trace") && http_path_is(r, 2, "setting"))
        return rest_trace_setting(txn, api->repo, NULL, 0);
    if (r->n == 5 && http_path_is(r, 1, "models") && http_path_is(r, 3, "trace") &&
        http_path_is(r, 4, "setting"))
        return rest_trace_setting(txn, api->repo, r->seg[2].text, r->seg[2].len);
    if (r->n == 2 && http_path_is(r, 1, "usage")) {
        if (!http_method_is_get(txn))
            return http_method_not_allowed(txn, "GET, HEAD");
        return usage_http_get(api->obs ? api->obs->usage : NULL, txn);
    }
    if (r->n == 4 && http_path_is(r, 1, "models") && http_path_is(r, 3, "routing"))
        return handle_routing(api, txn, &r->seg[2]);
    if (http_path_is(r, 1, "models") && r->n >= 3)
        return route_model(api, txn, r);
    if (http_path_is(r, 1, "repository"))
        return route_repository(api, txn, r);
    if (http_path_is(r, 1, "systemsharedmemory") || http_path_is(r, 1, "cudasharedmemory"))
        return route_shared_memory(api, txn, r);
    http_txn_error(txn, 404, "unknown path");
}

void rest_api_init(struct rest_api *api, struct serve_thread *serve,
                   const struct obs_sources *obs, uint64_t sse_keepalive_ms)
{
    memset(api, 0, sizeof *api);
    api->repo = serve->repo;
    api->serve = serve;
    api->obs = obs;
    rest_infer_init(&api->infer, serve, sse_keepalive_ms);
}

void rest_api_tick(struct rest_api *api, uint64_t now_ms)
{
    rest_infer_tick(&api->infer, now_ms * 1000000u);
}

void rest_api_free(struct rest_api *api)
{
    rest_infer_free(&api->infer);
}
