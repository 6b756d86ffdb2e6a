#include "api/rest.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/infer_json.h"
#include "api/obs_http.h"
#include "api/rest_obs.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/mem.h"
#include "obs/stats.h"
#include "sched/sched.h"

#define MAX_SEGMENTS 8
#define SEGMENT_MAX 256
/* Per-request decode memory: the JSON tree and typed tensors take a small
 * multiple of the body; beyond this ceiling the request gets a 413. */
#define INFER_ARENA_CHUNK (64 * 1024)
#define INFER_ARENA_MAX_FACTOR 32
#define INFER_ARENA_MAX_BYTES ((size_t)1 << 30)
/* Request objects kept per I/O thread for reuse (each keeps one arena chunk). */
#define REST_INFER_POOL_MAX 256

struct segment {
    char text[SEGMENT_MAX]; /* percent-decoded */
    size_t len;
};

struct route {
    struct segment seg[MAX_SEGMENTS];
    int n;
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Splits the path into percent-decoded segments. Returns false when the
 * path has too many or too long segments or a bad escape (→ 404/400). */
static bool split_path(const char *path, size_t len, struct route *r)
{
    r->n = 0;
    size_t i = 0;
    if (len == 0 || path[0] != '/')
        return false;
    while (i < len) {
        i++; /* skip '/' */
        if (r->n == MAX_SEGMENTS)
            return false;
        struct segment *s = &r->seg[r->n++];
        s->len = 0;
        while (i < len && path[i] != '/') {
            char c = path[i];
            if (c == '%') {
                int hi = i + 2 < len ? hexval(path[i + 1]) : -1;
                int lo = i + 2 < len ? hexval(path[i + 2]) : -1;
                if (hi < 0 || lo < 0)
                    return false;
                c = (char)(hi * 16 + lo);
                i += 2;
            }
            if (s->len + 1 >= SEGMENT_MAX)
                return false;
            s->text[s->len++] = c;
            i++;
        }
        s->text[s->len] = '\0';
    }
    /* A trailing slash leaves an empty last segment: ignore it. */
    if (r->n > 0 && r->seg[r->n - 1].len == 0)
        r->n--;
    return true;
}

static bool seg_is(const struct route *r, int i, const char *s)
{
    return i < r->n && r->seg[i].len == strlen(s) && memcmp(r->seg[i].text, s, r->seg[i].len) == 0;
}

static bool method_is(const struct http_txn *txn, const char *m)
{
    return txn->req.method_len == strlen(m) && memcmp(txn->req.method, m, txn->req.method_len) == 0;
}

static bool is_get(const struct http_txn *txn)
{
    return method_is(txn, "GET") || method_is(txn, "HEAD");
}

static void method_not_allowed(struct http_txn *txn, const char *allow)
{
    http_txn_add_header(txn, "Allow", allow);
    char msg[128];
    snprintf(msg, sizeof msg, "method %.*s not allowed; use %s", (int)txn->req.method_len,
             txn->req.method, allow);
    http_txn_error(txn, 405, msg);
}

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
    json_w_cstr(&w, "inferd");
    json_w_key(&w, "version");
    json_w_cstr(&w, INFERD_VERSION);
    json_w_key(&w, "extensions");
    json_w_arr_begin(&w);
    json_w_cstr(&w, "binary_tensor_data");
    json_w_cstr(&w, "model_configuration");
    json_w_cstr(&w, "model_repository");
    json_w_cstr(&w, "statistics");
    json_w_cstr(&w, "logging");
    json_w_cstr(&w, "trace");
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
                                      const struct segment *name, const struct segment *version,
                                      const struct model_entry **entry)
{
    struct error err;
    const struct model *m = NULL;
    const struct model_entry *e = snapshot_find(s, name->text, name->len);
    *entry = e;
    if (!e)
        error_set(&err, 404, "unknown model '%s'", name->text);
    else if (e->state != MODEL_READY)
        error_set(&err, 404, "model '%s' is not ready: %s", e->name, e->reason);
    else if (version && !(m = registry_version(e, version->text)))
        error_set(&err, 404, "model '%s' has no ready version '%s'", e->name, version->text);
    else
        return m ? m : e->model;
    http_txn_error(txn, err.status, err.msg);
    return NULL;
}

static void write_ios(struct json_writer *w, const struct model_io *ios, uint32_t n)
{
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        json_w_obj_begin(w);
        json_w_key(w, "name");
        json_w_cstr(w, ios[i].name);
        json_w_key(w, "datatype");
        json_w_cstr(w, dtype_name(ios[i].dtype));
        json_w_key(w, "shape");
        json_w_arr_begin(w);
        for (uint32_t d = 0; d < ios[i].ndim; d++)
            json_w_int(w, ios[i].dims[d]);
        json_w_arr_end(w);
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
    write_ios(&w, m->info.inputs, m->info.ninputs);
    json_w_key(&w, "outputs");
    write_ios(&w, m->info.outputs, m->info.noutputs);
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

/* ---- inference -------------------------------------------------------- */

/* One infer call in flight: the request, the exchange it answers, and the
 * task that brings the completed request back to the I/O loop. */
struct rest_infer {
    struct infer_request req;
    struct http_txn *txn;
    struct rest_api *api;
    struct loop_task task;
    struct rest_infer *next_free;
};

/* Takes a request object from the loop's free list (arena kept from its
 * last use), so that steady-state requests allocate nothing. */
static struct rest_infer *rest_infer_get(struct rest_api *api, size_t arena_max)
{
    struct rest_infer *ri = api->free_infers;
    if (ri) {
        api->free_infers = ri->next_free;
        api->nfree_infers--;
        struct arena arena = ri->req.arena;
        memset(ri, 0, sizeof *ri);
        ri->req.arena = arena;
        ri->req.arena.max = arena_max;
        pool_use_take(&api->infer_use);
        return ri;
    }
    ri = mem_calloc(1, sizeof *ri);
    if (ri) {
        arena_init(&ri->req.arena, INFER_ARENA_CHUNK, arena_max);
        pool_use_take(&api->infer_use);
    }
    return ri;
}

static void rest_infer_free(struct rest_infer *ri)
{
    arena_free(&ri->req.arena);
    mem_free(ri);
}

static void rest_infer_put(struct rest_api *api, struct rest_infer *ri)
{
    pool_use_give(&api->infer_use);
    if (api->nfree_infers >= REST_INFER_POOL_MAX) {
        rest_infer_free(ri);
        return;
    }
    arena_reset(&ri->req.arena);
    ri->next_free = api->free_infers;
    api->free_infers = ri;
    api->nfree_infers++;
}

/* Frees pooled request objects beyond keep. */
static void trim_pool(struct rest_api *api, uint32_t keep)
{
    while (api->nfree_infers > keep) {
        struct rest_infer *ri = api->free_infers;
        api->free_infers = ri->next_free;
        api->nfree_infers--;
        rest_infer_free(ri);
    }
}

void rest_api_tick(struct rest_api *api, uint64_t now_ms)
{
    trim_pool(api, pool_use_keep(&api->infer_use, now_ms));
}

void rest_api_free(struct rest_api *api)
{
    trim_pool(api, 0);
}

/* On the I/O loop: encode and send the response. */
static void infer_done(struct loop_task *task)
{
    struct rest_infer *ri = (struct rest_infer *)((char *)task - offsetof(struct rest_infer, task));
    struct infer_request *req = &ri->req;
    struct http_txn *txn = ri->txn;
    txn->cancel = NULL; /* ri is recycled below */
    ri->api->inflight--;
    rest_obs_infer_done(txn, req);
    stats_record_completion(sched_stats(req->model->sched), req, txn->aborted, txn->start_ns,
                            clock_now_ns());
    if (txn->aborted) {
        /* The client is gone; skip the encoding. */
    } else if (req->rc != 0) {
        http_txn_error(txn, req->err.status ? req->err.status : 500, req->err.msg);
        txn = NULL;
    } else {
        size_t json_len;
        infer_json_encode(req, &txn->body, &json_len);
        if (json_len && !txn->body.err) {
            char value[24];
            snprintf(value, sizeof value, "%zu", json_len);
            http_txn_add_header(txn, "Inference-Header-Content-Length", value);
            http_txn_respond(txn, 200, "application/octet-stream");
        } else {
            respond_json(txn, 200); /* a failed encoding becomes a JSON 500 */
        }
        txn = NULL;
    }
    sched_release(req);
    model_unref(req->model);
    if (txn)
        http_txn_respond(txn, 0, NULL); /* aborted: only releases the connection */
    struct rest_api *api = ri->api;
    rest_infer_put(api, ri);
    if (api->inflight == 0 && api->on_idle)
        api->on_idle(api->idle_arg);
}

/* On the worker thread: hand the request back to the loop that owns it. */
static void infer_complete(struct infer_request *req)
{
    struct rest_infer *ri = (struct rest_infer *)req;
    loop_post(ri->api->loop, &ri->task);
}

static void handle_infer(struct rest_api *api, struct http_txn *txn, const struct model *m)
{
    static const char header_name[] = "Inference-Header-Content-Length";
    size_t body_len = (size_t)txn->req.body_len;
    struct error err;
    error_clear(&err);
    /* Triton's binary tensor data extension: the length of the JSON part.
     * Several copies of the field would be ambiguous. */
    int64_t header_len = -1;
    const struct http_header *h = NULL;
    for (uint32_t i = 0; i < txn->req.nheaders; i++) {
        const struct http_header *x = &txn->req.headers[i];
        if (x->name_len != sizeof header_name - 1 ||
            strncasecmp(x->name, header_name, sizeof header_name - 1) != 0)
            continue;
        if (h) {
            http_txn_error(txn, 400, "more than one Inference-Header-Content-Length header");
            return;
        }
        h = x;
    }
    if (h && infer_json_header_length(h->value, h->value_len, body_len, &header_len, &err) != 0) {
        http_txn_error(txn, err.status, err.msg);
        return;
    }
    size_t arena_max = INFER_ARENA_MAX_BYTES;
    if (body_len < INFER_ARENA_MAX_BYTES / INFER_ARENA_MAX_FACTOR)
        arena_max = body_len * INFER_ARENA_MAX_FACTOR + INFER_ARENA_CHUNK * 16;
    struct rest_infer *ri = rest_infer_get(api, arena_max);
    if (!ri) {
        http_txn_add_header(txn, "Retry-After", "1");
        http_txn_error(txn, 503, "out of memory");
        return;
    }
    /* The request keeps the version loaded until it is answered, even if a
     * reload or unload replaces it meanwhile. */
    ri->req.model = model_ref((struct model *)m);
    ri->req.complete = infer_complete;
    ri->txn = txn;
    ri->api = api;
    ri->task.run = infer_done;
    rest_obs_infer_begin(txn, &ri->req, m);

    if (infer_json_decode(&ri->req, m, txn->req.body ? txn->req.body : "", body_len, header_len,
                          &err) != 0 ||
        sched_submit(m->sched, &ri->req, &err) != 0) {
        if (err.status == 429 || err.status == 503)
            http_txn_add_header(txn, "Retry-After", "1");
        stats_record_refused(sched_stats(m->sched), err.status, txn->start_ns, clock_now_ns());
        http_txn_error(txn, err.status, err.msg);
        model_unref(ri->req.model);
        rest_infer_put(api, ri);
        return;
    }
    /* A client that goes away while the request waits in the queue cancels
     * it: the scheduler drops it instead of running it. */
    txn->cancel = &ri->req.cancelled;
    api->inflight++;
}

/* /v2/models/{m}[/versions/{v}][/ready|/infer|/config] */
static void route_model(struct rest_api *api, struct http_txn *txn, const struct route *r)
{
    const struct segment *name = &r->seg[2];
    const struct segment *version = NULL;
    int i = 3;
    if (seg_is(r, 3, "versions")) {
        if (r->n < 5) {
            http_txn_error(txn, 404, "missing version after /versions");
            return;
        }
        version = &r->seg[4];
        i = 5;
    }
    const char *action = i < r->n ? r->seg[i].text : "";
    if (i + 1 < r->n || (i < r->n && strcmp(action, "ready") != 0 &&
                         strcmp(action, "infer") != 0 && strcmp(action, "config") != 0)) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    bool infer = strcmp(action, "infer") == 0;
    if (infer ? !method_is(txn, "POST") : !is_get(txn)) {
        method_not_allowed(txn, infer ? "POST" : "GET, HEAD");
        return;
    }
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model_entry *e;
    const struct model *m = find_model(s, txn, name, version, &e);
    if (!m) {
    } else if (infer) {
        atomic_fetch_add_explicit(&api->infer_requests, 1, memory_order_relaxed);
        handle_infer(api, txn, m);
    } else if (strcmp(action, "ready") == 0) {
        http_txn_respond(txn, 200, NULL);
    } else if (strcmp(action, "config") == 0) {
        handle_model_config(txn, m);
    } else {
        handle_model_metadata(txn, e, m);
    }
    repository_release(api->repo, s);
}

/* ---- repository API (Triton's model_repository extension) --------------- */

/* A load or unload in progress: answered when the manager has done it. */
struct rest_repo_call {
    struct repo_cmd cmd;
    struct http_txn *txn;
    struct rest_api *api;
    struct loop_task task;
    char *config; /* override text, owned */
};

static void repo_call_done_on_loop(struct loop_task *task)
{
    struct rest_repo_call *call =
        (struct rest_repo_call *)((char *)task - offsetof(struct rest_repo_call, task));
    struct rest_api *api = call->api;
    api->inflight--;
    if (call->cmd.status)
        http_txn_error(call->txn, call->cmd.status, call->cmd.msg);
    else
        http_txn_respond(call->txn, 200, NULL);
    mem_free(call->config);
    mem_free(call);
    if (api->inflight == 0 && api->on_idle)
        api->on_idle(api->idle_arg);
}

/* Manager thread: bring the answer back to the connection's loop. */
static void repo_call_done(struct repo_cmd *cmd)
{
    struct rest_repo_call *call = (struct rest_repo_call *)cmd;
    loop_post(call->api->loop, &call->task);
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
                                   const struct segment *name, bool load)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct error err;
    const struct json_value *body;
    struct rest_repo_call *call = NULL;
    if (parse_body(txn, &a, &body, &err) != 0)
        goto out_error;
    const struct json_value *params = json_get(body, "parameters");
    const struct json_value *config = json_get(params, "config");
    if (params && params->type != JSON_OBJECT) {
        error_set(&err, 400, "'parameters' must be an object");
        goto out_error;
    }
    if (config && (!load || config->type != JSON_STRING)) {
        error_set(&err, 400, "'config' must be a string and is only accepted by load");
        goto out_error;
    }
    if (name->len >= sizeof call->cmd.name || memchr(name->text, '/', name->len) ||
        memchr(name->text, '\0', name->len) || name->text[0] == '.') {
        error_set(&err, 400, "invalid model name");
        goto out_error;
    }
    call = mem_calloc(1, sizeof *call);
    if (!call) {
        error_set(&err, 503, "out of memory");
        goto out_error;
    }
    if (config && model_config_text_from_json(config->u.str, config->len, &call->config,
                                              &err) != 0)
        goto out_error;
    call->cmd.kind = load ? REPO_LOAD : REPO_UNLOAD;
    memcpy(call->cmd.name, name->text, name->len + 1);
    call->cmd.config = call->config;
    call->cmd.done = repo_call_done;
    call->txn = txn;
    call->api = api;
    call->task.run = repo_call_done_on_loop;
    if (repository_submit(api->repo, &call->cmd, &err) != 0)
        goto out_error;
    api->inflight++;
    arena_free(&a);
    return;
out_error:
    if (call) {
        mem_free(call->config);
        mem_free(call);
    }
    arena_free(&a);
    http_txn_error(txn, err.status, err.msg);
}

/* /v2/repository/index, /v2/repository/models/{m}/load|unload */
static void route_repository(struct rest_api *api, struct http_txn *txn, const struct route *r)
{
    bool index = r->n == 3 && seg_is(r, 2, "index");
    bool call = r->n == 5 && seg_is(r, 2, "models") &&
                (seg_is(r, 4, "load") || seg_is(r, 4, "unload"));
    if (!index && !call) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!method_is(txn, "POST")) {
        method_not_allowed(txn, "POST");
        return;
    }
    if (index)
        handle_repository_index(api, txn);
    else
        handle_repository_call(api, txn, &r->seg[3], seg_is(r, 4, "load"));
}

/* ---- statistics (Triton's extension) and the dashboard (api/obs_http.h) --- */

/* /v2/models/stats, /v2/models/{m}/stats, /v2/models/{m}/versions/{v}/stats */
static void route_stats(struct rest_api *api, struct http_txn *txn, const struct route *r)
{
    bool all = r->n == 3, model = r->n == 4, version = r->n == 6 && seg_is(r, 3, "versions");
    if (!all && !model && !version) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!is_get(txn)) {
        method_not_allowed(txn, "GET, HEAD");
        return;
    }
    obs_http_stats(api->repo, txn, all ? NULL : r->seg[2].text, all ? 0 : r->seg[2].len,
                   version ? r->seg[4].text : NULL);
}

/* /dashboard (the page), /dashboard/data (what it polls) */
static void route_dashboard(struct rest_api *api, struct http_txn *txn, const struct route *r)
{
    bool page = r->n == 1, data = r->n == 2 && seg_is(r, 1, "data");
    if (!page && !data) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (!is_get(txn)) {
        method_not_allowed(txn, "GET, HEAD");
        return;
    }
    if (page)
        obs_http_dashboard_page(txn);
    else
        obs_http_dashboard_data(api->obs, txn);
}

void rest_handle(void *app, struct http_txn *txn)
{
    struct rest_api *api = app;
    struct route r;
    rest_obs_begin(txn); /* request id, access log, tracing */
    if (!split_path(txn->req.path, txn->req.path_len, &r)) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (seg_is(&r, 0, "dashboard"))
        return route_dashboard(api, txn, &r);
    if (!seg_is(&r, 0, "v2")) {
        http_txn_error(txn, 404, "unknown path");
        return;
    }
    if (r.n == 1) {
        if (!is_get(txn))
            return method_not_allowed(txn, "GET, HEAD");
        return handle_server_metadata(api, txn);
    }
    if (seg_is(&r, 1, "health") && r.n == 3 && (seg_is(&r, 2, "live") || seg_is(&r, 2, "ready"))) {
        if (!is_get(txn))
            return method_not_allowed(txn, "GET, HEAD");
        return handle_health(api, txn, seg_is(&r, 2, "ready"));
    }
    if (seg_is(&r, 1, "models") && r.n >= 3 && seg_is(&r, r.n - 1, "stats"))
        return route_stats(api, txn, &r);
    /* Triton's logging and trace extensions (api/rest_obs.h) */
    if (r.n == 2 && seg_is(&r, 1, "logging"))
        return rest_obs_logging(txn);
    if (r.n == 3 && seg_is(&r, 1, "trace") && seg_is(&r, 2, "setting"))
        return rest_obs_trace_setting(txn, api->repo, NULL, 0);
    if (r.n == 5 && seg_is(&r, 1, "models") && seg_is(&r, 3, "trace") && seg_is(&r, 4, "setting"))
        return rest_obs_trace_setting(txn, api->repo, r.seg[2].text, r.seg[2].len);
    if (seg_is(&r, 1, "models") && r.n >= 3)
        return route_model(api, txn, &r);
    if (seg_is(&r, 1, "repository"))
        return route_repository(api, txn, &r);
    http_txn_error(txn, 404, "unknown path");
}
