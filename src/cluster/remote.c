#include "cluster/remote.h"
#include "cluster/remote_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "core/dtype.h"
#include "grpc_service.pb-c.h"
#include "obs/trace.h"

#define METADATA_PATH "/inference.GRPCInferenceService/ModelMetadata"
#define CONFIG_PATH "/inference.GRPCInferenceService/ModelConfig"
#define NAME_MAX_LEN 256

/* ---- the section ------------------------------------------------------------ */

static int get_u32(const struct json_value *obj, const char *key, const char *where, uint32_t lo,
                   uint32_t hi, uint32_t *out, struct error *err)
{
    const struct json_value *v = obj ? json_get(obj, key) : NULL;
    if (!v)
        return 0;
    uint64_t n;
    if (v->type != JSON_NUMBER || json_num_u64(v, &n) != 0 || n < lo || n > hi)
        return error_set(err, 400, "%s.%s: expected a number from %u to %u", where, key, lo, hi);
    *out = (uint32_t)n;
    return 0;
}

static int get_str(const struct json_value *obj, const char *key, const char *where, char **out,
                   struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type != JSON_STRING || v->len == 0 || v->len >= NAME_MAX_LEN ||
        strlen(v->u.str) != v->len)
        return error_set(err, 400, "%s.%s: expected a non-empty string", where, key);
    if (!(*out = mem_strdup(v->u.str)))
        return error_set(err, 500, "out of memory");
    return 0;
}

static const char *const known_keys[] = {"model",    "version",      "upstreams",
                                         "discover", "remote-model", "health-check",
                                         "outlier",  "max-retries",  NULL};
static const char *const health_keys[] = {"interval-ms", "timeout-ms", "unhealthy-threshold",
                                          NULL};
static const char *const outlier_keys[] = {"consecutive-failures", "ejection-secs", NULL};

/* A mapping's keys are all in known (NULL-terminated); obj NULL: none. */
static int check_keys(const struct json_value *obj, const char *where,
                      const char *const *known, struct error *err)
{
    for (uint32_t k = 0; obj && k < obj->len; k++) {
        const char *key = obj->u.members[k].key;
        size_t j = 0;
        while (known[j] && strcmp(key, known[j]) != 0)
            j++;
        if (!known[j])
            return error_set(err, 400, "%s: unknown key '%s'", where, key);
    }
    return 0;
}

static int parse_one(const struct json_value *v, uint32_t i, struct remote_model_config *m,
                     struct error *err)
{
    char where[64];
    snprintf(where, sizeof where, "remote-models[%u]", i);
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "%s: expected a mapping", where);
    if (check_keys(v, where, known_keys, err))
        return ST_ERROR;
    if (get_str(v, "model", where, &m->model, err) ||
        get_str(v, "remote-model", where, &m->remote_model, err))
        return ST_ERROR;
    if (!m->model)
        return error_set(err, 400, "%s.model: required", where);
    if (!m->remote_model && !(m->remote_model = mem_strdup(m->model)))
        return error_set(err, 500, "out of memory");
    m->version = 1;
    const struct json_value *ver = json_get(v, "version");
    if (ver) {
        char *end;
        long long n = -1;
        if (ver->type == JSON_STRING || ver->type == JSON_NUMBER) {
            const char *t = ver->type == JSON_STRING ? ver->u.str : ver->u.num;
            n = t[0] >= '0' && t[0] <= '9' ? strtoll(t, &end, 10) : -1;
            if (n >= 0 && *end)
                n = -1;
        }
        if (n < 1 || n > 999999999)
            return error_set(err, 400, "%s.version: expected a version number (1 to 999999999)",
                             where);
        m->version = n;
    }
    const struct json_value *d = json_get(v, "discover");
    if (d && d->type != JSON_TRUE && d->type != JSON_FALSE)
        return error_set(err, 400, "%s.discover: expected true or false", where);
    m->discover = d && d->type == JSON_TRUE;
    const struct json_value *ups = json_get(v, "upstreams");
    if (ups && ups->type != JSON_ARRAY)
        return error_set(err, 400, "%s.upstreams: expected a sequence of host:port", where);
    if (ups && ups->len > UPSTREAM_MAX)
        return error_set(err, 400, "%s.upstreams: at most %d", where, UPSTREAM_MAX);
    if (ups && ups->len && !(m->upstreams = mem_calloc(ups->len, sizeof *m->upstreams)))
        return error_set(err, 500, "out of memory");
    for (uint32_t u = 0; ups && u < ups->len; u++) {
        const struct json_value *a = &ups->u.items[u];
        const char *colon = a->type == JSON_STRING ? strrchr(a->u.str, ':') : NULL;
        if (!colon || colon == a->u.str || a->len >= UPSTREAM_ADDR_MAX || !colon[1] ||
            strspn(colon + 1, "0123456789") != strlen(colon + 1) || atoi(colon + 1) < 1 ||
            atoi(colon + 1) > 65535)
            return error_set(err, 400, "%s.upstreams[%u]: expected host:port", where, u);
        if (!(m->upstreams[u] = mem_strdup(a->u.str)))
            return error_set(err, 500, "out of memory");
        m->nupstreams++;
    }
    if (m->discover == (m->nupstreams > 0))
        return error_set(err, 400, "%s: give either upstreams or discover: true", where);
    struct upstream_pool_config *p = &m->pool;
    *p = (struct upstream_pool_config){.health_interval_ms = 1000,
                                       .health_timeout_ms = 500,
                                       .unhealthy_threshold = 3,
                                       .eject_failures = 3,
                                       .eject_secs = 10,
                                       .max_retries = 2};
    const struct json_value *hc = json_get(v, "health-check");
    const struct json_value *ol = json_get(v, "outlier");
    if ((hc && hc->type != JSON_OBJECT) || (ol && ol->type != JSON_OBJECT))
        return error_set(err, 400, "%s: health-check and outlier are mappings", where);
    char sub[96];
    snprintf(sub, sizeof sub, "%s.health-check", where);
    if (check_keys(hc, sub, health_keys, err) ||
        get_u32(hc, "interval-ms", sub, 50, 600000, &p->health_interval_ms, err) ||
        get_u32(hc, "timeout-ms", sub, 10, 60000, &p->health_timeout_ms, err) ||
        get_u32(hc, "unhealthy-threshold", sub, 1, 1000, &p->unhealthy_threshold, err))
        return ST_ERROR;
    snprintf(sub, sizeof sub, "%s.outlier", where);
    if (check_keys(ol, sub, outlier_keys, err) ||
        get_u32(ol, "consecutive-failures", sub, 1, 1000, &p->eject_failures, err) ||
        get_u32(ol, "ejection-secs", sub, 1, 3600, &p->eject_secs, err) ||
        get_u32(v, "max-retries", where, 0, 10, &p->max_retries, err))
        return ST_ERROR;
    return 0;
}

int remote_models_config_parse(const struct json_value *v, struct remote_models_config **out,
                               struct error *err)
{
    *out = NULL;
    if (!v)
        return 0;
    if (v->type != JSON_ARRAY)
        return error_set(err, 400, "remote-models: expected a sequence of mappings");
    if (v->len > REMOTE_MAX_MODELS)
        return error_set(err, 400, "remote-models: at most %d entries", REMOTE_MAX_MODELS);
    struct remote_models_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory");
    for (uint32_t i = 0; i < v->len; i++) {
        c->count++;
        if (parse_one(&v->u.items[i], i, &c->models[i], err) != 0) {
            remote_models_config_free(c);
            return ST_ERROR;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(c->models[j].model, c->models[i].model) == 0 &&
                c->models[j].version == c->models[i].version) {
                remote_models_config_free(c);
                return error_set(err, 400, "remote-models[%u]: model and version repeat entry %u",
                                 i, j);
            }
    }
    *out = c;
    return 0;
}

void remote_models_config_free(struct remote_models_config *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->count; i++) {
        struct remote_model_config *m = &c->models[i];
        for (uint32_t u = 0; u < m->nupstreams; u++)
            mem_free(m->upstreams[u]);
        mem_free(m->upstreams);
        mem_free(m->model);
        mem_free(m->remote_model);
    }
    mem_free(c);
}

/* ---- the running set ------------------------------------------------------------ */

struct remote_models {
    struct remote_models_config *cfg;
    bool applied;
    struct remote_engine engines[REMOTE_MAX_MODELS];
    const char *names[REMOTE_MAX_MODELS];
    uint32_t nnames;
};

struct remote_models *remote_models_new(void)
{
    return mem_calloc(1, sizeof(struct remote_models));
}

static bool same_config(const struct remote_models_config *a, const struct remote_models_config *b)
{
    uint32_t na = a ? a->count : 0, nb = b ? b->count : 0;
    if (na != nb)
        return false;
    for (uint32_t i = 0; i < na; i++) {
        const struct remote_model_config *x = &a->models[i], *y = &b->models[i];
        if (strcmp(x->model, y->model) || x->version != y->version ||
            strcmp(x->remote_model, y->remote_model) || x->discover != y->discover ||
            x->nupstreams != y->nupstreams || memcmp(&x->pool, &y->pool, sizeof x->pool) != 0)
            return false;
        for (uint32_t u = 0; u < x->nupstreams; u++)
            if (strcmp(x->upstreams[u], y->upstreams[u]))
                return false;
    }
    return true;
}

void remote_models_apply(struct remote_models *r, struct remote_models_config *c)
{
    if (!r->applied) {
        r->cfg = c;
        r->applied = true;
        return;
    }
    if (!same_config(r->cfg, c))
        log_warn("remote-models: the section changed; it is read at start only (restart to "
                 "apply)");
    remote_models_config_free(c);
}

int remote_models_start(struct remote_models *r, struct error *err)
{
    const struct remote_models_config *cfg = r->cfg;
    for (uint32_t i = 0; cfg && i < cfg->count; i++) {
        const struct remote_model_config *m = &cfg->models[i];
        struct remote_engine *e = &r->engines[i];
        e->cfg = m;
        snprintf(e->label, sizeof e->label, "%s:%lld", m->model, (long long)m->version);
        struct upstream_pool_config pc = m->pool;
        pc.model = m->remote_model;
        pc.label = e->label;
        if (upstream_pool_start(&pc, (const char *const *)m->upstreams, m->nupstreams, &e->pool,
                                err) != 0)
            return ST_ERROR;
        bool seen = false;
        for (uint32_t j = 0; j < r->nnames && !seen; j++)
            seen = strcmp(r->names[j], m->model) == 0;
        if (!seen)
            r->names[r->nnames++] = m->model;
    }
    return 0;
}

void remote_models_free(struct remote_models *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < REMOTE_MAX_MODELS; i++)
        upstream_pool_stop(r->engines[i].pool);
    remote_models_config_free(r->cfg);
    mem_free(r);
}

bool remote_models_discovering(const struct remote_models *r)
{
    for (uint32_t i = 0; r->cfg && i < r->cfg->count; i++)
        if (r->cfg->models[i].discover)
            return true;
    return false;
}

void remote_models_discovered(struct remote_models *r,
                              uint32_t (*addrs_of)(void *ctx, const char *model,
                                                   char (*out)[UPSTREAM_ADDR_MAX], uint32_t max),
                              void *ctx)
{
    static char addrs[UPSTREAM_MAX][UPSTREAM_ADDR_MAX];
    const char *ptrs[UPSTREAM_MAX];
    for (uint32_t i = 0; r->cfg && i < r->cfg->count; i++) {
        if (!r->cfg->models[i].discover)
            continue;
        uint32_t n = addrs_of(ctx, r->cfg->models[i].remote_model, addrs, UPSTREAM_MAX);
        for (uint32_t k = 0; k < n; k++)
            ptrs[k] = addrs[k];
        upstream_pool_set(r->engines[i].pool, ptrs, n);
    }
}

void remote_models_metrics(struct remote_models *r, struct buf *out)
{
    static const struct {
        const char *family, *type, *help;
    } fams[] = {
        {"requests", "counter", "Calls sent to an upstream (retries count again)."},
        {"failures", "counter",
         "Calls to an upstream that failed: connection errors, UNAVAILABLE, timeouts."},
        {"ejections", "counter", "Times an upstream was ejected after consecutive failures."},
        {"resumes", "counter",
         "Streams cut by a lost connection to an upstream and sent again to another one."},
        {"health_check_misses", "counter",
         "Health checks of an upstream that went unanswered (timed out, or no connection)."},
        {"outstanding", "gauge", "Calls sent to an upstream and not answered yet."},
        {"healthy", "gauge", "1 when an upstream takes calls (healthy, not ejected), else 0."},
    };
    if (!r || !r->cfg || !r->cfg->count)
        return;
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        bool counter = fams[f].type[0] == 'c';
        buf_printf(out, "# HELP inferd_upstream_%s%s %s\n# TYPE inferd_upstream_%s%s %s\n",
                   fams[f].family, counter ? "_total" : "", fams[f].help, fams[f].family,
                   counter ? "_total" : "", fams[f].type);
        for (uint32_t i = 0; i < r->cfg->count; i++)
            upstream_pool_metrics(r->engines[i].pool, fams[f].family, out);
    }
}

/* ---- loading a version -------------------------------------------------------------- */

static int io_from(const Inference__ModelMetadataResponse__TensorMetadata *const *t, size_t n,
                   struct model_io **out, uint32_t *count, struct error *err)
{
    *out = mem_calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return error_set(err, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct model_io *io = &(*out)[i];
        io->dtype = dtype_from_name(t[i]->datatype, strlen(t[i]->datatype));
        if (io->dtype == DT_INVALID || t[i]->n_shape > TENSOR_MAX_DIMS)
            return error_set(err, 502, "tensor '%s': datatype '%s' or rank not supported",
                             t[i]->name, t[i]->datatype);
        if (!(io->name = mem_strdup(t[i]->name)))
            return error_set(err, 500, "out of memory");
        io->ndim = (uint32_t)t[i]->n_shape;
        memcpy(io->dims, t[i]->shape, t[i]->n_shape * sizeof *t[i]->shape);
        (*count)++;
    }
    return 0;
}

/* One call of a load (ModelMetadata, ModelConfig: a request naming the
 * model), waited for: 0 with the answer in *resp (the caller frees it), or
 * ST_ERROR with err. */
static int ask_upstream(struct remote_engine *e, const char *path, const ProtobufCMessage *rq,
                        uint64_t timeout_us, struct buf *resp, struct error *err)
{
    uint8_t msg[512];
    size_t len = protobuf_c_message_get_packed_size(rq);
    if (len > sizeof msg)
        return error_set(err, 400, "remote model name too long");
    protobuf_c_message_pack(rq, msg);
    return upstream_pool_call_sync(e->pool, path, msg, len, timeout_us, resp, err);
}

/* Whether the upstream's model is decoupled (its ModelConfig's
 * model_transaction_policy): its requests then go as streams. An upstream
 * without ModelConfig (not every KServe v2 server has Triton's extension)
 * serves an ordinary model. */
static bool upstream_decoupled(struct remote_engine *e, uint64_t timeout_us)
{
    Inference__ModelConfigRequest rq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    rq.name = e->cfg->remote_model;
    rq.version = (char *)"";
    struct buf resp;
    struct error err;
    if (ask_upstream(e, CONFIG_PATH, &rq.base, timeout_us, &resp, &err) != 0) {
        log_info("remote %s: no ModelConfig from the upstream (%s): an ordinary model", e->label,
                 err.msg);
        return false;
    }
    Inference__ModelConfigResponse *c =
        inference__model_config_response__unpack(NULL, resp.len, (const uint8_t *)resp.data);
    buf_free(&resp);
    bool decoupled = c && c->config && c->config->model_transaction_policy &&
                     c->config->model_transaction_policy->decoupled;
    if (c)
        inference__model_config_response__free_unpacked(c, NULL);
    return decoupled;
}

static int load_version(const struct registry_options *opts, struct remote_engine *e,
                        struct model **out, struct error *err)
{
    Inference__ModelMetadataRequest rq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    rq.name = e->cfg->remote_model;
    rq.version = (char *)"";
    struct buf resp;
    uint64_t timeout = (uint64_t)e->cfg->pool.health_timeout_ms * 1000u * 4;
    if (ask_upstream(e, METADATA_PATH, &rq.base, timeout, &resp, err) != 0)
        return ST_ERROR;
    Inference__ModelMetadataResponse *md =
        inference__model_metadata_response__unpack(NULL, resp.len, (const uint8_t *)resp.data);
    buf_free(&resp);
    if (!md)
        return error_set(err, 502, "malformed ModelMetadataResponse");
    struct model_info info = {0};
    int rc = io_from((const Inference__ModelMetadataResponse__TensorMetadata *const *)md->inputs,
                     md->n_inputs, &info.inputs, &info.ninputs, err);
    if (rc == 0)
        rc = io_from((const Inference__ModelMetadataResponse__TensorMetadata *const *)md->outputs,
                     md->n_outputs, &info.outputs, &info.noutputs, err);
    inference__model_metadata_response__free_unpacked(md, NULL);
    if (rc != 0) {
        model_info_free(&info);
        return ST_ERROR;
    }
    bool decoupled = upstream_decoupled(e, timeout);
    return model_new_remote(opts, e->cfg->model, e->cfg->version, "remote", &info, decoupled,
                            &remote_ops, e, out, err);
}

bool remote_version_is(const struct model *m)
{
    return m->engine_ops == &remote_ops;
}

static void registry_load(void *ctx, const struct registry_options *opts, const char *name,
                          struct model_entry *e)
{
    struct remote_models *r = ctx;
    for (uint32_t i = 0; r->cfg && i < r->cfg->count; i++) {
        struct remote_engine *en = &r->engines[i];
        if (strcmp(en->cfg->model, name) != 0)
            continue;
        struct model *m = NULL;
        struct error err;
        error_clear(&err);
        int rc = load_version(opts, en, &m, &err);
        if (rc == 0 && (rc = model_entry_add_version(e, m)) != 0) {
            error_set(&err, 400, "%s",
                      rc == -EEXIST ? "a local version has the same number" : "out of memory");
            model_unref(m);
            rc = ST_ERROR;
        }
        if (rc != 0) {
            snprintf(e->reason, sizeof e->reason, "remote version %lld: %.200s",
                     (long long)en->cfg->version, err.msg);
            log_error("model %s: %s", name, e->reason);
            model_entry_add_failure(e, en->cfg->version, MODEL_FAIL_LOAD, err.msg);
            e->failed_versions++;
            continue;
        }
        log_info("model %s version %lld: remote, served by %s (%u upstreams%s)", name,
                 (long long)en->cfg->version, en->cfg->remote_model, en->cfg->nupstreams,
                 en->cfg->discover ? ", discovered" : "");
    }
}

void remote_models_registry(struct remote_models *r, struct registry_options *opts)
{
    opts->remote.ctx = r;
    opts->remote.names = r->names;
    opts->remote.nnames = r->nnames;
    opts->remote.load = registry_load;
}
