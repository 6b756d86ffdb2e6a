#include "api/openai/openai.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/gen_outputs.h"
#include "api/openai/http.h"
#include "api/openai/call.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/nearest.h"
#include "base/status.h"
#include "obs/request.h"

static void answer_error(struct http_txn *txn, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void answer_error(struct http_txn *txn, int status, const char *code, const char *fmt, ...)
{
    struct error err;
    va_list ap;
    va_start(ap, fmt);
    error_vset(&err, status, fmt, ap);
    va_end(ap);
    openai_http_error(txn, &err, code);
}

/* ---- routes -------------------------------------------------------------------- */

static bool seg_is(const struct openai_path *p, int i, const char *s)
{
    return i < p->n && p->len[i] == strlen(s) && memcmp(p->seg[i], s, p->len[i]) == 0;
}

static bool method_is(const struct http_txn *txn, const char *m)
{
    return txn->req.method_len == strlen(m) && memcmp(txn->req.method, m, txn->req.method_len) == 0;
}

static bool is_completions(const struct openai_path *p, enum openai_kind *kind)
{
    if (p->n == 1 && seg_is(p, 0, "completions")) {
        *kind = OPENAI_COMPLETIONS;
        return true;
    }
    if (p->n == 2 && seg_is(p, 0, "chat") && seg_is(p, 1, "completions")) {
        *kind = OPENAI_CHAT;
        return true;
    }
    return false;
}

enum auth_class openai_route_class(const struct openai_path *p)
{
    enum openai_kind kind;
    if (is_completions(p, &kind))
        return AUTH_IN_PIPELINE;
    if (p->n == 2 && seg_is(p, 0, "streams"))
        return AUTH_INFER;
    return AUTH_READ;
}

static void method_not_allowed(struct http_txn *txn, const char *allow)
{
    http_txn_add_header(txn, "Allow", allow);
    answer_error(txn, 405, "method_not_allowed", "method %.*s not allowed; use %s",
                 (int)txn->req.method_len, txn->req.method, allow);
}

/* ---- models -------------------------------------------------------------------- */

static void write_model(struct json_writer *w, const struct model *m, uint64_t created)
{
    json_w_obj_begin(w);
    json_w_key(w, "id");
    json_w_cstr(w, m->name);
    json_w_key(w, "object");
    json_w_cstr(w, "model");
    json_w_key(w, "created");
    json_w_uint(w, created);
    json_w_key(w, "owned_by");
    json_w_cstr(w, "inferd");
    json_w_obj_end(w);
}

/* GET /v1/models, GET /v1/models/{id}: the models whose default version
 * is generative. */
static void handle_models(struct openai_api *api, struct http_txn *txn, const char *id,
                          size_t id_len)
{
    struct repository *repo = api->front.serve->repo;
    struct model_snapshot *s = repository_acquire(repo);
    struct json_writer w;
    bool found = false;
    json_w_init(&w, &txn->body);
    if (!id) {
        json_w_obj_begin(&w);
        json_w_key(&w, "object");
        json_w_cstr(&w, "list");
        json_w_key(&w, "data");
        json_w_arr_begin(&w);
    }
    struct nearest near;
    nearest_init(&near, id, id_len);
    for (uint32_t i = 0; i < s->count; i++) {
        const struct model *m = s->entries[i].model;
        if (!m || !gen_model_is(m))
            continue;
        if (id && (strlen(m->name) != id_len || memcmp(m->name, id, id_len) != 0)) {
            nearest_offer(&near, m->name);
            continue;
        }
        write_model(&w, m, api->created_s);
        found = true;
    }
    if (!id) {
        json_w_arr_end(&w);
        json_w_obj_end(&w);
    }
    if (id && !found) {
        buf_reset(&txn->body);
        answer_error(txn, 404, "model_not_found",
                     "The model '%.*s' does not exist or is not a generative model%s%s%s",
                     (int)(id_len > 200 ? 200 : id_len), id,
                     near.best ? "; did you mean '" : "", near.best ? near.best : "",
                     near.best ? "'?" : "");
    }
    repository_release(repo, s); /* after the message: near.best is the snapshot's */
    if (id && !found)
        return;
    http_txn_respond(txn, 200, "application/json");
}

/* ---- streams ------------------------------------------------------------------- */

static const char *header(const struct http_txn *txn, const char *name, size_t *len)
{
    const struct http_header *h = http1_header(&txn->req, name);
    if (!h)
        return NULL;
    *len = h->value_len;
    return h->value;
}

static const char *auth_header(const void *ctx, const char *name, size_t *len)
{
    return header(ctx, name, len);
}

/* Last-Event-ID into r (absent: from the first event). Answers a
 * malformed one itself (400) and returns -1. */
static int read_last_event_id(struct http_txn *txn, struct stream_resume *r,
                              char id[STREAM_ID_LEN + 1])
{
    size_t len;
    const char *v = header(txn, "Last-Event-ID", &len);
    struct error err;
    if (!v)
        return 0;
    if (stream_parse_event_id(v, len, id, &r->last_seq, &err) != 0) {
        openai_http_error(txn, &err, "invalid_last_event_id");
        return ST_ERROR;
    }
    r->has_last = true;
    return 0;
}

static void resume(struct openai_api *api, struct http_txn *txn, struct stream_resume *r)
{
    struct error err;
    if (streams_resume(&api->front.streams, txn, r, &err) == 0)
        return;
    const char *code = err.status == 404   ? "stream_not_found"
                       : err.status == 410 ? "stream_expired"
                       : err.status == 409 ? "stream_conflict"
                                           : NULL;
    openai_http_error(txn, &err, code);
}

/* POST /v1/(chat/)completions with Last-Event-ID: that stream, if the
 * body is the one that started it. */
static void resume_post(struct openai_api *api, struct http_txn *txn, enum openai_kind kind,
                        const char *tenant)
{
    char id[STREAM_ID_LEN + 1];
    uint8_t digest[SHA256_DIGEST_SIZE];
    struct stream_resume r = {.tenant = tenant, .digest = digest, .kind = OPENAI_ROUTE_KIND(kind)};
    if (read_last_event_id(txn, &r, id) != 0)
        return;
    sha256(txn->req.body, (size_t)txn->req.body_len, digest);
    r.id = id;
    r.id_len = STREAM_ID_LEN;
    resume(api, txn, &r);
}

/* GET or DELETE /v1/streams/{id}. */
static void handle_stream(struct openai_api *api, struct http_txn *txn, const struct openai_path *p,
                          const char *tenant)
{
    const char *sid = p->seg[1];
    size_t sid_len = p->len[1];
    int shown = (int)(sid_len > 64 ? 64 : sid_len);
    if (method_is(txn, "DELETE")) {
        struct error err;
        bool running;
        if (streams_cancel(sid, sid_len, tenant, &running, &err) != 0) {
            openai_http_error(txn, &err, err.status == 410 ? "stream_expired" : "stream_not_found");
            return;
        }
        struct json_writer w;
        json_w_init(&w, &txn->body);
        json_w_obj_begin(&w);
        json_w_key(&w, "id");
        json_w_str(&w, sid, sid_len);
        json_w_key(&w, "object");
        json_w_cstr(&w, "stream");
        json_w_key(&w, "cancelled");
        json_w_bool(&w, running);
        json_w_obj_end(&w);
        http_txn_respond(txn, 200, "application/json");
        return;
    }
    if (!method_is(txn, "GET"))
        return method_not_allowed(txn, "GET, DELETE");
    char id[STREAM_ID_LEN + 1];
    struct stream_resume r = {.id = sid, .id_len = sid_len, .tenant = tenant};
    if (read_last_event_id(txn, &r, id) != 0)
        return;
    if (r.has_last && (sid_len != STREAM_ID_LEN || memcmp(id, sid, STREAM_ID_LEN) != 0)) {
        answer_error(txn, 400, "invalid_last_event_id",
                     "Last-Event-ID names an event of stream '%s', not of '%.*s'", id, shown, sid);
        return;
    }
    resume(api, txn, &r);
}

/* ---- completions on their head ---------------------------------------------------- */

/* The body of a completion taken on its head is complete, or is not
 * coming (txn.h): the call starts as if the request had come whole. */
static void completion_body(struct http_txn *txn, struct openai_front *front, enum openai_kind kind)
{
    if (txn->aborted)
        return http_txn_respond(txn, 0, NULL); /* the client left: nothing to answer */
    if (txn->body_status) {
        struct error err;
        error_set(&err, txn->body_status, "%s", txn->body_error);
        return openai_http_error(txn, &err, NULL);
    }
    openai_call_start(front, txn, kind);
}

static void on_completions_body(struct http_txn *txn, void *front)
{
    completion_body(txn, front, OPENAI_COMPLETIONS);
}

static void on_chat_body(struct http_txn *txn, void *front)
{
    completion_body(txn, front, OPENAI_CHAT);
}

/* POST /v1/(chat/)completions handed over on its head (api/http_api.h):
 * the model is named in the body, so what the pipeline decides for a model
 * waits for it; a missing or invalid key does not depend on the model and
 * is refused now, as the pipeline's auth stage would refuse it (401). */
static void completion_head(struct openai_api *api, struct auth *auth, struct http_txn *txn,
                            enum openai_kind kind)
{
    struct auth_result res;
    struct error err;
    if (auth_check(auth, AUTH_ANY_KEY, NULL, auth_header, txn, &res, &err) != 0)
        return openai_http_error(txn, &err, NULL);
    txn->on_body = kind == OPENAI_CHAT ? on_chat_body : on_completions_body;
    txn->body_ctx = &api->front;
}

/* ---- the router ---------------------------------------------------------------- */

void openai_handle(struct openai_api *api, struct auth *auth, struct http_txn *txn,
                   const struct openai_path *p)
{
    enum openai_kind kind;
    bool completions = is_completions(p, &kind);
    size_t len;
    bool resuming = completions && method_is(txn, "POST") && header(txn, "Last-Event-ID", &len);
    enum auth_class cls = resuming ? AUTH_INFER : openai_route_class(p);
    const char *tenant = NULL;
    struct auth_result res;
    if (cls != AUTH_IN_PIPELINE) {
        struct error err;
        int rc = auth_check(auth, cls, NULL, auth_header, txn, &res, &err);
        if (res.tenant[0]) {
            obsreq_set_tenant(txn->obs, res.tenant);
            tenant = res.tenant;
        }
        if (rc != 0) {
            openai_http_error(txn, &err, NULL);
            return;
        }
    }
    if (completions) {
        if (!method_is(txn, "POST"))
            return method_not_allowed(txn, "POST");
        if (resuming)
            return resume_post(api, txn, kind, tenant);
        if (txn->body_pending)
            return completion_head(api, auth, txn, kind);
        return openai_call_start(&api->front, txn, kind);
    }
    if ((p->n == 1 || p->n == 2) && seg_is(p, 0, "models")) {
        if (!method_is(txn, "GET") && !method_is(txn, "HEAD"))
            return method_not_allowed(txn, "GET, HEAD");
        return handle_models(api, txn, p->n == 2 ? p->seg[1] : NULL, p->n == 2 ? p->len[1] : 0);
    }
    if (p->n == 2 && seg_is(p, 0, "streams"))
        return handle_stream(api, txn, p, tenant);
    answer_error(txn, 404, "unknown_url", "unknown path %.*s",
                 (int)(txn->req.path_len > 200 ? 200 : txn->req.path_len), txn->req.path);
}

/* ---- per thread ---------------------------------------------------------------- */

void openai_api_init(struct openai_api *api, struct serve_thread *serve, uint64_t start_ms,
                     uint64_t sse_keepalive_ms)
{
    memset(api, 0, sizeof *api);
    api->front.serve = serve;
    api->created_s = start_ms / 1000u;
    stream_thread_init(&api->front.streams, serve->loop, sse_keepalive_ms);
    buf_init(&api->front.scratch, STREAM_MAX_BYTES);
}

void openai_api_tick(struct openai_api *api, uint64_t now_ms)
{
    (void)now_ms; /* the streams compare with clock_now_ns() */
    stream_thread_tick(&api->front.streams, clock_now_ns());
}

void openai_api_free(struct openai_api *api)
{
    stream_thread_free(&api->front.streams);
    buf_free(&api->front.scratch);
}
