#include "api/grpc/services.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "api/grpc/model_pb.h"
#include "api/server_info.h"
#include "base/json.h"
#include "health.pb-c.h"
#include "model/lookup.h"
#include "obs/settings.h"
#include "obs/stats.h"
#include "serve/repo_call.h"

/* Health/Watch re-reads the repository this often while watched. */
#define WATCH_POLL_MS 250

/* ---- health and metadata ------------------------------------------------ */

static bool server_ready(struct grpc_api *api)
{
    if (api->draining)
        return false;
    struct model_snapshot *s = repository_acquire(api->repo);
    bool ready = snapshot_all_ready(s);
    repository_release(api->repo, s);
    return ready;
}

static void handle_server_live(struct grpc_call *call, const uint8_t *data, size_t len)
{
    (void)data, (void)len;
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = 1;
    grpc_call_reply(call, &r.base);
}

static void handle_server_ready(struct grpc_call *call, const uint8_t *data, size_t len)
{
    (void)data, (void)len;
    Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
    r.ready = server_ready(call->api);
    grpc_call_reply(call, &r.base);
}

static void handle_model_ready(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelReadyRequest *q =
        grpc_call_unpack(call, &inference__model_ready_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
    struct error err;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = model_lookup(s, q->name, strlen(q->name), q->version, NULL, &err);
    if (m)
        obsreq_set_model(call->obs, m->name, m->version_str, m->sha256);
    r.ready = !api->draining && m != NULL;
    repository_release(api->repo, s);
    grpc_call_reply(call, &r.base);
}

static void handle_server_metadata(struct grpc_call *call, const uint8_t *data, size_t len)
{
    (void)data, (void)len;
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    r.name = (char *)server_info_name();
    r.version = INFERD_VERSION;
    r.extensions = (char **)server_info_extensions(&r.n_extensions);
    grpc_call_reply(call, &r.base);
}

static Inference__ModelMetadataResponse__TensorMetadata **
tensor_metadata(struct arena *a, const struct model_io *ios, uint32_t n)
{
    Inference__ModelMetadataResponse__TensorMetadata **ptrs =
        arena_alloc(a, (n + 1) * sizeof *ptrs);
    Inference__ModelMetadataResponse__TensorMetadata *t = arena_alloc(a, (n + 1) * sizeof *t);
    if (!ptrs || !t)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        inference__model_metadata_response__tensor_metadata__init(&t[i]);
        t[i].name = ios[i].name;
        t[i].datatype = (char *)dtype_name(ios[i].dtype);
        t[i].n_shape = ios[i].ndim;
        t[i].shape = (int64_t *)ios[i].dims;
        ptrs[i] = &t[i];
    }
    return ptrs;
}

static void handle_model_metadata(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelMetadataRequest *q =
        grpc_call_unpack(call, &inference__model_metadata_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    const struct model_entry *e;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = model_lookup(s, q->name, strlen(q->name), q->version, &e, &err);
    if (!m) {
        grpc_call_fail(call, err.status, err.msg);
        goto out;
    }
    obsreq_set_model(call->obs, m->name, m->version_str, m->sha256);
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    r.name = m->name;
    r.platform = (char *)m->platform;
    r.versions = arena_alloc(&api->scratch, (e->nversions + 1) * sizeof *r.versions);
    r.inputs = tensor_metadata(&api->scratch, m->info.inputs, m->info.ninputs);
    r.outputs = tensor_metadata(&api->scratch, m->info.outputs, m->info.noutputs);
    if (!r.versions || !r.inputs || !r.outputs) {
        grpc_call_fail(call, 503, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < e->nversions; i++)
        r.versions[i] = e->versions[i]->version_str;
    r.n_versions = e->nversions;
    r.n_inputs = m->info.ninputs;
    r.n_outputs = m->info.noutputs;
    grpc_call_reply(call, &r.base);
out:
    repository_release(api->repo, s);
}

/* ---- model configuration ------------------------------------------------ */

static void handle_model_config(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelConfigRequest *q =
        grpc_call_unpack(call, &inference__model_config_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = model_lookup(s, q->name, strlen(q->name), q->version, NULL, &err);
    if (m)
        obsreq_set_model(call->obs, m->name, m->version_str, m->sha256);
    Inference__ModelConfig config;
    if (!m) {
        grpc_call_fail(call, err.status, err.msg);
    } else if (model_pb_config(&api->scratch, &m->config, &config) != 0) {
        grpc_call_fail(call, 503, "out of memory");
    } else {
        Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
        r.config = &config;
        grpc_call_reply(call, &r.base);
    }
    repository_release(api->repo, s);
}

/* ---- statistics --------------------------------------------------------- */

static void handle_model_statistics(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelStatisticsRequest *q =
        grpc_call_unpack(call, &inference__model_statistics_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    struct stats_report report;
    if (!q->name[0] && q->version[0]) {
        grpc_call_fail(call, 400, "a version needs a model name");
        return;
    }
    if (q->name[0])
        obsreq_set_model(call->obs, q->name, q->version, NULL);
    if (stats_report_build(api->repo, q->name[0] ? q->name : NULL, strlen(q->name),
                           q->version[0] ? q->version : NULL, &report, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    r.model_stats = MODEL_PB_ALLOC(&api->scratch, report.count, Inference__ModelStatistics,
                                   inference__model_statistics__init);
    int rc = r.model_stats ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < report.count; i++)
        rc = model_pb_statistics(&api->scratch, &report.versions[i], r.model_stats[i]);
    r.n_model_stats = report.count;
    if (rc != 0)
        grpc_call_fail(call, 503, "out of memory");
    else
        grpc_call_reply(call, &r.base);
    stats_report_free(&report);
}

/* ---- repository --------------------------------------------------------- */

static void handle_repository_index(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__RepositoryIndexRequest *q =
        grpc_call_unpack(call, &inference__repository_index_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    /* The repository manager writes its index as JSON (the REST answer);
     * read it back into messages rather than walk the repository twice. */
    struct buf json;
    buf_init(&json, (size_t)64 << 20);
    struct json_writer w;
    json_w_init(&w, &json);
    repository_index(api->repo, q->ready, &w);
    struct json_value *root = NULL;
    const char *msg;
    size_t off;
    Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
    if (json.err || json_parse(&api->scratch, json.data, json.len, NULL, &root, &msg, &off) != 0 ||
        root->type != JSON_ARRAY)
        goto out_oom;
    r.models =
        MODEL_PB_ALLOC(&api->scratch, root->len, Inference__RepositoryIndexResponse__ModelIndex,
                       inference__repository_index_response__model_index__init);
    if (!r.models)
        goto out_oom;
    r.n_models = root->len;
    for (uint32_t i = 0; i < root->len; i++) {
        static const char *const keys[] = {"name", "version", "state", "reason"};
        char **fields[] = {&r.models[i]->name, &r.models[i]->version, &r.models[i]->state,
                           &r.models[i]->reason};
        for (size_t k = 0; k < 4; k++) {
            const struct json_value *v = json_get(&root->u.items[i], keys[k]);
            if (v && v->type == JSON_STRING)
                *fields[k] = (char *)v->u.str;
        }
    }
    buf_free(&json);
    grpc_call_reply(call, &r.base);
    return;
out_oom:
    buf_free(&json);
    grpc_call_fail(call, 503, "out of memory");
}

/* A load or unload is done: answer the call with `ok` or the error. */
static void repo_call_answer(struct grpc_call *call, int status, const char *msg,
                             const ProtobufCMessage *ok)
{
    call->inflight--;
    if (status)
        grpc_call_fail(call, status, msg);
    else
        grpc_call_reply(call, ok);
    grpc_call_drop(call);
}

static void repo_load_done(void *ctx, int status, const char *msg)
{
    Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    repo_call_answer(ctx, status, msg, &r.base);
}

static void repo_unload_done(void *ctx, int status, const char *msg)
{
    Inference__RepositoryModelUnloadResponse r = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
    repo_call_answer(ctx, status, msg, &r.base);
}

/* The "config" parameter of a load: the configuration as JSON text. */
static const Inference__ModelRepositoryParameter *
load_config_param(const Inference__RepositoryModelLoadRequest *q)
{
    for (size_t i = 0; i < q->n_parameters; i++)
        if (q->parameters[i]->key && strcmp(q->parameters[i]->key, "config") == 0)
            return q->parameters[i]->value;
    return NULL;
}

static void handle_repository_call(struct grpc_call *call, const uint8_t *data, size_t len,
                                   bool load)
{
    const char *name;
    const Inference__ModelRepositoryParameter *config = NULL;
    if (load) {
        Inference__RepositoryModelLoadRequest *q =
            grpc_call_unpack(call, &inference__repository_model_load_request__descriptor, data, len);
        if (!q)
            return;
        name = q->model_name;
        config = load_config_param(q);
        for (size_t i = 0; i < q->n_parameters; i++) {
            const char *key = q->parameters[i]->key ? q->parameters[i]->key : "";
            if (strcmp(key, "config") != 0) {
                struct error err;
                serve_repo_refuse_param(name, strlen(name), key, strlen(key), &err);
                grpc_call_fail(call, err.status, err.msg);
                return;
            }
        }
    } else {
        Inference__RepositoryModelUnloadRequest *q =
            grpc_call_unpack(call, &inference__repository_model_unload_request__descriptor, data, len);
        if (!q)
            return;
        name = q->model_name;
    }
    obsreq_set_model(call->obs, name, NULL, NULL);
    struct error err;
    const char *config_text = NULL;
    size_t config_len = 0;
    if (config) {
        if (config->parameter_choice_case ==
            INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
            config_text = config->string_param;
            config_len = strlen(config_text);
        } else if (config->parameter_choice_case ==
                   INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM) {
            config_text = config->bytes_param.len ? (const char *)config->bytes_param.data : "";
            config_len = config->bytes_param.len;
        } else {
            grpc_call_fail(call, 400,
                           "parameter 'config' must be a string (the configuration as JSON)");
            return;
        }
    }
    if (serve_repo_call(call->api->serve, load, name, strlen(name), config_text, config_len,
                        load ? repo_load_done : repo_unload_done, call, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    call->inflight++;
    grpc_call_hold(call);
}

static void handle_repository_load(struct grpc_call *call, const uint8_t *data, size_t len)
{
    handle_repository_call(call, data, len, true);
}

static void handle_repository_unload(struct grpc_call *call, const uint8_t *data, size_t len)
{
    handle_repository_call(call, data, len, false);
}

/* ---- grpc.health.v1.Health ---------------------------------------------- */

/* The status of `service`: "" (or the inference service's name) is the
 * server; anything else is a model name. */
static Grpc__Health__V1__HealthCheckResponse__ServingStatus health_status(struct grpc_api *api,
                                                                          const char *service)
{
    if (!service[0] || strcmp(service, "inference.GRPCInferenceService") == 0)
        return server_ready(api)
                   ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                   : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model_entry *e = snapshot_find(s, service, strlen(service));
    Grpc__Health__V1__HealthCheckResponse__ServingStatus st =
        !e ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN
        : e->state == MODEL_READY && !api->draining
            ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
            : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    repository_release(api->repo, s);
    return st;
}

static void handle_health_check(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Grpc__Health__V1__HealthCheckRequest *q =
        grpc_call_unpack(call, &grpc__health__v1__health_check_request__descriptor, data, len);
    if (!q)
        return;
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = health_status(call->api, q->service);
    if (r.status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "unknown service '%s'", q->service);
        grpc_call_finish(call, GRPC_NOT_FOUND, msg);
        return;
    }
    grpc_call_reply(call, &r.base);
}

/* Runs the poll timer only while some stream watches. */
static void watch_timer_update(struct grpc_api *api)
{
    if (api->timer.fd < 0)
        return;
    struct itimerspec its = {0};
    if (api->nwatchers) {
        its.it_interval.tv_nsec = WATCH_POLL_MS * 1000000L;
        its.it_value = its.it_interval;
    }
    timerfd_settime(api->timer.fd, 0, &its, NULL);

}

/* Sends the watched service's status if it changed since the last one. */
static void watch_update(struct grpc_call *call)
{
    int status = health_status(call->api, call->service);
    if (status == call->watch_status)
        return;
    call->watch_status = status;
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = status;
    grpc_call_send(call, &r.base);
}

static void handle_health_watch(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Grpc__Health__V1__HealthCheckRequest *q =
        grpc_call_unpack(call, &grpc__health__v1__health_check_request__descriptor, data, len);
    if (!q)
        return;
    if (strlen(q->service) >= sizeof call->service) {
        grpc_call_fail(call, 400, "service name too long");
        return;
    }
    strcpy(call->service, q->service);
    call->watching = true;
    call->api->nwatchers++;
    watch_timer_update(call->api);
    watch_update(call);
}

static void watch_on_timer(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct grpc_api *api = (struct grpc_api *)((char *)w - offsetof(struct grpc_api, timer));
    uint64_t expirations;
    while (read(w->fd, &expirations, sizeof expirations) > 0) {
    }
    for (struct grpc_call *c = api->calls, *next; c; c = next) {
        next = c->next;
        if (c->watching && !c->finished) {
            grpc_call_hold(c);
            watch_update(c);
            grpc_call_drop(c);
        }
    }
}

/* The Watch stream closed: one watcher less. */
static void watch_close(struct grpc_call *call)
{
    if (!call->watching)
        return;
    call->api->nwatchers--;
    watch_timer_update(call->api);
}

/* Shutdown: the watcher learns NOT_SERVING, and the stream ends. */
static void watch_drain(struct grpc_call *call)
{
    if (!call->watching)
        return;
    watch_update(call);
    grpc_call_finish(call, GRPC_UNAVAILABLE, "server is shutting down");
}

/* The poll timer of the thread's Watch streams. */
static int watch_init(struct grpc_api *api)
{
    api->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    api->timer.on_events = watch_on_timer;
    if (api->timer.fd < 0)
        return -errno;
    int rc = loop_add(api->loop, &api->timer, EPOLLIN);
    if (rc != 0) {
        close(api->timer.fd);
        api->timer.fd = -1;
    }
    return rc;
}

static void watch_free(struct grpc_api *api)
{
    if (api->timer.fd >= 0) {
        loop_del(api->loop, &api->timer);
        close(api->timer.fd);
        api->timer.fd = -1;
    }
}

/* ---- trace and log settings (obs/settings.h, shared with REST) ------------- */

static void handle_trace_setting(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__TraceSettingRequest *q =
        grpc_call_unpack(call, &inference__trace_setting_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    const char *model = q->model_name[0] ? q->model_name : NULL;
    if (model && settings_trace_model_check(api->repo, model, strlen(model), &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    struct setting *s = arena_alloc(&api->scratch, (q->n_settings + 1) * sizeof *s);
    if (!s) {
        grpc_call_fail(call, 503, "out of memory");
        return;
    }
    for (size_t i = 0; i < q->n_settings; i++) {
        const Inference__TraceSettingRequest__SettingValue *v = q->settings[i]->value;
        memset(&s[i], 0, sizeof s[i]);
        s[i].name = q->settings[i]->key;
        /* No value clears the setting (Triton's TraceSettingRequest). */
        s[i].kind = v && v->n_value ? SETTING_STRINGS : SETTING_NULL;
        s[i].strs = v ? (const char *const *)v->value : NULL;
        s[i].n = v ? (uint32_t)v->n_value : 0;
    }
    if (settings_trace_apply(model, s, (uint32_t)q->n_settings, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    struct trace_settings_view cur;
    settings_trace_get(model, &cur);
    const char *keys[] = {"trace_level",   "trace_rate", "trace_count",
                          "log_frequency", "trace_file", "trace_mode"};
    const char *values[] = {cur.level, cur.rate, cur.count, cur.log_frequency, cur.file, cur.mode};
    enum { N = sizeof keys / sizeof keys[0] };
    Inference__TraceSettingResponse r = INFERENCE__TRACE_SETTING_RESPONSE__INIT;
    Inference__TraceSettingResponse__SettingsEntry entries[N], *ptrs[N];
    Inference__TraceSettingResponse__SettingValue vals[N];
    for (size_t i = 0; i < N; i++) {
        inference__trace_setting_response__settings_entry__init(&entries[i]);
        inference__trace_setting_response__setting_value__init(&vals[i]);
        vals[i].n_value = 1;
        vals[i].value = (char **)&values[i];
        entries[i].key = (char *)keys[i];
        entries[i].value = &vals[i];
        ptrs[i] = &entries[i];
    }
    r.n_settings = N;
    r.settings = ptrs;
    grpc_call_reply(call, &r.base);
}

static void handle_log_settings(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__LogSettingsRequest *q =
        grpc_call_unpack(call, &inference__log_settings_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    struct setting *s = arena_alloc(&api->scratch, (q->n_settings + 1) * sizeof *s);
    if (!s) {
        grpc_call_fail(call, 503, "out of memory");
        return;
    }
    for (size_t i = 0; i < q->n_settings; i++) {
        const Inference__LogSettingsRequest__SettingValue *v = q->settings[i]->value;
        memset(&s[i], 0, sizeof s[i]);
        s[i].name = q->settings[i]->key;
        s[i].kind = SETTING_OTHER; /* no value set */
        switch (v ? v->parameter_choice_case
                  : INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE__NOT_SET) {
        case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM:
            s[i].kind = SETTING_BOOL;
            s[i].b = v->bool_param;
            break;
        case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM:
            s[i].kind = SETTING_UINT;
            s[i].u = v->uint32_param;
            break;
        case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM:
            s[i].kind = SETTING_STRING;
            s[i].strs = (const char *const *)&v->string_param;
            s[i].n = 1;
            break;
        default:
            break;
        }
    }
    if (settings_log_apply(s, (uint32_t)q->n_settings, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    struct log_settings_view cur;
    settings_log_get(&cur);
    enum { N = 6 };
    Inference__LogSettingsResponse r = INFERENCE__LOG_SETTINGS_RESPONSE__INIT;
    Inference__LogSettingsResponse__SettingsEntry entries[N], *ptrs[N];
    Inference__LogSettingsResponse__SettingValue vals[N];
    static const char *const keys[N] = {"log_file",  "log_info",          "log_warning",
                                        "log_error", "log_verbose_level", "log_format"};
    for (size_t i = 0; i < N; i++) {
        inference__log_settings_response__settings_entry__init(&entries[i]);
        inference__log_settings_response__setting_value__init(&vals[i]);
        entries[i].key = (char *)keys[i];
        entries[i].value = &vals[i];
        ptrs[i] = &entries[i];
    }
    vals[0].parameter_choice_case =
        INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
    vals[0].string_param = (char *)cur.file;
    const bool flags[] = {cur.info, cur.warning, cur.error};
    for (size_t i = 1; i <= 3; i++) {
        vals[i].parameter_choice_case =
            INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM;
        vals[i].bool_param = flags[i - 1];
    }
    vals[4].parameter_choice_case =
        INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
    vals[4].uint32_param = cur.verbose_level;
    vals[5].parameter_choice_case =
        INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
    vals[5].string_param = (char *)cur.format;
    r.n_settings = N;
    r.settings = ptrs;
    grpc_call_reply(call, &r.base);
}

/* ---- the services' tables ----------------------------------------------------- */

static const struct grpc_method admin_methods[] = {
    {.path = GRPC_KSERVE_SERVICE "ServerLive",
     .auth = AUTH_HEALTH,
     .on_message = handle_server_live},
    {.path = GRPC_KSERVE_SERVICE "ServerReady",
     .auth = AUTH_HEALTH,
     .on_message = handle_server_ready},
    {.path = GRPC_KSERVE_SERVICE "ModelReady", .auth = AUTH_READ, .on_message = handle_model_ready},
    {.path = GRPC_KSERVE_SERVICE "ServerMetadata",
     .auth = AUTH_METADATA,
     .on_message = handle_server_metadata},
    {.path = GRPC_KSERVE_SERVICE "ModelMetadata",
     .auth = AUTH_READ,
     .on_message = handle_model_metadata},
    {.path = GRPC_KSERVE_SERVICE "ModelConfig",
     .auth = AUTH_READ,
     .on_message = handle_model_config},
    {.path = GRPC_KSERVE_SERVICE "ModelStatistics",
     .auth = AUTH_READ,
     .on_message = handle_model_statistics},
    {.path = GRPC_KSERVE_SERVICE "RepositoryIndex",
     .auth = AUTH_ADMIN,
     .on_message = handle_repository_index},
    {.path = GRPC_KSERVE_SERVICE "RepositoryModelLoad",
     .auth = AUTH_ADMIN,
     .on_message = handle_repository_load},
    {.path = GRPC_KSERVE_SERVICE "RepositoryModelUnload",
     .auth = AUTH_ADMIN,
     .on_message = handle_repository_unload},
    {.path = GRPC_KSERVE_SERVICE "TraceSetting",
     .auth = AUTH_ADMIN,
     .on_message = handle_trace_setting},
    {.path = GRPC_KSERVE_SERVICE "LogSettings",
     .auth = AUTH_ADMIN,
     .on_message = handle_log_settings},
};

const struct grpc_service grpc_admin_service = {
    .methods = admin_methods,
    .nmethods = sizeof admin_methods / sizeof admin_methods[0],
};

static const struct grpc_method health_methods[] = {
    {.path = "/grpc.health.v1.Health/Check",
     .auth = AUTH_HEALTH,
     .on_message = handle_health_check},
    {.path = "/grpc.health.v1.Health/Watch",
     .auth = AUTH_HEALTH,
     .on_message = handle_health_watch,
     .on_drain = watch_drain,
     .on_close = watch_close},
};

const struct grpc_service grpc_health_service = {
    .methods = health_methods,
    .nmethods = sizeof health_methods / sizeof health_methods[0],
    .init = watch_init,
    .free = watch_free,
};
