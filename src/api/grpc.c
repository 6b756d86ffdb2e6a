#include "api/grpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "api/infer_pb.h"
#include "api/model_pb.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "health.pb-c.h"
#include "obs/request.h"
#include "obs/stats.h"
#include "sched/sched.h"

/* gRPC message prefix: compressed flag + 4-byte big-endian length. */
#define FRAME_HEADER 5
/* Per-request decode memory, as in rest.c: a small multiple of the message. */
#define INFER_ARENA_CHUNK (64 * 1024)
#define INFER_ARENA_MAX_FACTOR 32
#define INFER_ARENA_MAX_BYTES ((size_t)1 << 30)
/* Objects kept per I/O thread for reuse. */
#define POOL_MAX 256
/* A reused call keeps a message buffer up to this size. */
#define CALL_KEEP_BUFFER (64 * 1024)
/* Requests in flight on one ModelStreamInfer stream; more are refused
 * (RESOURCE_EXHAUSTED) until responses have been sent. */
#define STREAM_MAX_INFLIGHT 256
/* Health/Watch re-reads the repository this often while watched. */
#define WATCH_POLL_MS 250
/* Largest response message (the output queue of a stream is bounded too). */
#define MAX_RESPONSE_BYTES ((size_t)1 << 30)

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
};

enum method_id {
    M_SERVER_LIVE,
    M_SERVER_READY,
    M_MODEL_READY,
    M_SERVER_METADATA,
    M_MODEL_METADATA,
    M_MODEL_INFER,
    M_MODEL_STREAM_INFER,
    M_MODEL_CONFIG,
    M_MODEL_STATISTICS,
    M_REPOSITORY_INDEX,
    M_REPOSITORY_LOAD,
    M_REPOSITORY_UNLOAD,
    M_HEALTH_CHECK,
    M_HEALTH_WATCH,
};

struct method {
    const char *path;
    enum method_id id;
    bool client_stream; /* each request message is handled as it arrives */
};

#define SVC "/inference.GRPCInferenceService/"
static const struct method methods[] = {
    {SVC "ServerLive", M_SERVER_LIVE, false},
    {SVC "ServerReady", M_SERVER_READY, false},
    {SVC "ModelReady", M_MODEL_READY, false},
    {SVC "ServerMetadata", M_SERVER_METADATA, false},
    {SVC "ModelMetadata", M_MODEL_METADATA, false},
    {SVC "ModelInfer", M_MODEL_INFER, false},
    {SVC "ModelStreamInfer", M_MODEL_STREAM_INFER, true},
    {SVC "ModelConfig", M_MODEL_CONFIG, false},
    {SVC "ModelStatistics", M_MODEL_STATISTICS, false},
    {SVC "RepositoryIndex", M_REPOSITORY_INDEX, false},
    {SVC "RepositoryModelLoad", M_REPOSITORY_LOAD, false},
    {SVC "RepositoryModelUnload", M_REPOSITORY_UNLOAD, false},
    {"/grpc.health.v1.Health/Check", M_HEALTH_CHECK, false},
    {"/grpc.health.v1.Health/Watch", M_HEALTH_WATCH, false},
};
#undef SVC

/* One RPC: an HTTP/2 stream and the work started for it. Reference
 * counted: the open stream holds one reference, each infer request or
 * repository command in flight one, and each transport callback one for
 * its duration (so that a stream closing inside a callback never frees
 * the call under it). */
struct grpc_call {
    struct grpc_api *api;
    struct h2_stream *st; /* NULL once the stream closed */
    const struct method *method;
    uint32_t refs;
    uint64_t received_ns;
    uint64_t deadline_ns; /* from grpc-timeout; 0 = none */
    /* Incoming message framing. */
    uint8_t hdr[FRAME_HEADER];
    uint32_t hdr_got; /* 0 between messages; FRAME_HEADER while reading a payload */
    uint32_t msg_len;
    struct buf msg;
    uint32_t nmessages;
    bool client_ended;
    bool headers_sent;
    bool finished;             /* trailers sent (or the stream closed): nothing more to send */
    uint32_t inflight;         /* infer requests and repository commands */
    struct grpc_infer *infers; /* infer requests in flight, for cancellation */
    /* Health/Watch: the watched service and the last status sent. */
    char service[256];
    int watch_status;
    bool watching;
    /* Access log and tracing (obs/request.h). The call's x-request-id (for
     * ModelStreamInfer the stream's; each message has its own observer). */
    char request_id[REQUEST_ID_MAX + 1];
    size_t request_id_len;
    struct obsreq *obs; /* other calls: the call's observer, NULL once ended */
    bool obs_begun;     /* call->obs was decided */
    int http_status;    /* HTTP equivalent of the status the call ended with */
    uint64_t bytes_out; /* response message bytes sent */
    struct grpc_call *prev, *next; /* api->calls */
    struct grpc_call *next_free;
};

/* One infer request in flight. */
struct grpc_infer {
    struct infer_request req;
    struct grpc_call *call;
    struct grpc_api *api;
    struct loop_task task;
    struct grpc_infer *prev, *next; /* call->infers */
    uint64_t received_ns;           /* when its message was complete */
    struct obsreq *obs;             /* ModelStreamInfer: the message's observer */
    struct grpc_infer *next_free;
};

static void call_finish(struct grpc_call *call, int code, const char *msg);
static void watch_timer_update(struct grpc_api *api);

/* ---- helpers ------------------------------------------------------------ */

int grpc_status_from_http(int status)
{
    switch (status) {
    case 0:
    case 200:
        return GRPC_OK;
    case 400:
        return GRPC_INVALID_ARGUMENT;
    case 404:
        return GRPC_NOT_FOUND;
    case 409:
        return GRPC_FAILED_PRECONDITION;
    case 413:
    case 429:
        return GRPC_RESOURCE_EXHAUSTED;
    case 499:
        return GRPC_CANCELLED;
    case 501:
        return GRPC_UNIMPLEMENTED;
    case 503:
        return GRPC_UNAVAILABLE;
    case 504:
        return GRPC_DEADLINE_EXCEEDED;
    default:
        return status >= 400 && status < 500 ? GRPC_INVALID_ARGUMENT
               : status >= 500               ? GRPC_INTERNAL
                                             : GRPC_UNKNOWN;
    }
}

/* The HTTP status the access log shows for a gRPC status code (the inverse
 * of grpc_status_from_http() for the codes inferd sends). */
static int http_status_from_grpc(int code)
{
    switch (code) {
    case GRPC_OK:
        return 200;
    case GRPC_CANCELLED:
        return 499;
    case GRPC_INVALID_ARGUMENT:
        return 400;
    case GRPC_DEADLINE_EXCEEDED:
        return 504;
    case GRPC_NOT_FOUND:
        return 404;
    case GRPC_RESOURCE_EXHAUSTED:
        return 429;
    case GRPC_FAILED_PRECONDITION:
        return 409;
    case GRPC_UNIMPLEMENTED:
        return 501;
    case GRPC_UNAVAILABLE:
        return 503;
    default:
        return 500;
    }
}

int grpc_timeout_parse(const char *value, size_t len, uint64_t *out_ns)
{
    /* gRPC over HTTP/2: TimeoutValue is 1 to 8 ASCII digits. */
    if (len < 2 || len > 9)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(value[i] - '0');
    }
    uint64_t unit;
    switch (value[len - 1]) {
    case 'H':
        unit = 3600ull * 1000000000ull;
        break;
    case 'M':
        unit = 60ull * 1000000000ull;
        break;
    case 'S':
        unit = 1000000000ull;
        break;
    case 'm':
        unit = 1000000ull;
        break;
    case 'u':
        unit = 1000ull;
        break;
    case 'n':
        unit = 1;
        break;
    default:
        return -1;
    }
    *out_ns = v > UINT64_MAX / unit ? UINT64_MAX : v * unit;
    return 0;
}

void grpc_message_encode(const char *msg, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 1 < size; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[o++] = (char)*p;
            continue;
        }
        if (o + 4 > size)
            break;
        out[o++] = '%';
        out[o++] = hex[*p >> 4];
        out[o++] = hex[*p & 15];
    }
    out[o] = '\0';
}

static struct h2_header hdr(const char *name, const char *value)
{
    return (struct h2_header){name, strlen(name), value, strlen(value)};
}

/* ---- call objects ------------------------------------------------------- */

static struct grpc_call *call_get(struct grpc_api *api)
{
    struct grpc_call *call = api->free_calls;
    if (call) {
        api->free_calls = call->next_free;
        api->nfree_calls--;
        pool_use_take(&api->call_use);
        struct buf msg = call->msg;
        memset(call, 0, sizeof *call);
        call->msg = msg;
        call->msg.max = api->max_message_bytes;
    } else {
        call = mem_calloc(1, sizeof *call);
        if (!call)
            return NULL;
        buf_init(&call->msg, api->max_message_bytes);
        pool_use_take(&api->call_use);
    }
    call->api = api;
    call->refs = 1;
    call->watch_status = -1;
    return call;
}

static void call_free(struct grpc_call *call)
{
    buf_free(&call->msg);
    mem_free(call);
}

static void call_put(struct grpc_call *call)
{
    struct grpc_api *api = call->api;
    pool_use_give(&api->call_use);
    if (api->nfree_calls >= POOL_MAX) {
        call_free(call);
        return;
    }
    if (call->msg.cap > CALL_KEEP_BUFFER)
        buf_free(&call->msg);
    buf_reset(&call->msg);
    call->next_free = api->free_calls;
    api->free_calls = call;
    api->nfree_calls++;
}

static void call_hold(struct grpc_call *call)
{
    call->refs++;
}

static void call_drop(struct grpc_call *call)
{
    if (--call->refs == 0)
        call_put(call);
}

static void api_maybe_idle(struct grpc_api *api)
{
    if (api->inflight == 0 && api->on_idle)
        api->on_idle(api->idle_arg);
}

static bool is_stream(const struct grpc_call *call)
{
    return call->method && call->method->id == M_MODEL_STREAM_INFER;
}

/* ---- access log and tracing ----------------------------------------------- */

static size_t call_peer(const void *ctx, char *out, size_t cap)
{
    const struct grpc_call *call = ctx;
    return call->st ? h2_stream_peer(call->st, out, cap) : 0;
}

/* An observer for one request of the call (obs/request.h): NULL when
 * neither the access log nor the tracer wants it, or the stream is gone. */
static struct obsreq *obs_begin(struct grpc_call *call, const char *id, size_t id_len,
                                uint64_t bytes_in, uint64_t start_ns)
{
    if (!call->st)
        return NULL;
    struct obsreq_start s = {
        .proto = OBS_PROTO_GRPC,
        .method = "POST",
        .method_len = 4,
        .request_id = id,
        .request_id_len = id_len,
        .bytes_in = bytes_in,
        .start_ns = start_ns,
        .peer = call_peer,
        .peer_ctx = call,
    };
    s.endpoint = h2_stream_path(call->st, &s.endpoint_len);
    s.traceparent = h2_stream_header(call->st, "traceparent", &s.traceparent_len);
    s.tracestate = h2_stream_header(call->st, "tracestate", &s.tracestate_len);
    return obsreq_begin(&s);
}

/* The observer of a call other than ModelStreamInfer, decided once: when
 * its request message is complete, or when the call ends before that. */
static void call_obs_begin(struct grpc_call *call)
{
    if (call->obs_begun)
        return;
    call->obs_begun = true;
    call->obs = obs_begin(call, call->request_id, call->request_id_len, call->msg.len,
                          call->received_ns);
}

static void call_obs_end(struct grpc_call *call, int http_status)
{
    obsreq_end(call->obs, http_status, call->bytes_out);
    call->obs = NULL;
}

/* ModelStreamInfer: the observer of one request message; its request id is
 * the message's `id` when that is a valid request id, else a new one. */
static struct obsreq *message_obs_begin(struct grpc_call *call, const char *msg_id,
                                        uint64_t bytes_in, uint64_t start_ns)
{
    char id[REQUEST_ID_MAX + 1];
    size_t n = request_id_resolve(msg_id, msg_id ? strlen(msg_id) : 0, id);
    return obs_begin(call, id, n, bytes_in, start_ns);
}

/* ---- responding --------------------------------------------------------- */

/* The response's initial metadata: content-type, x-request-id and, when
 * the call is traced, traceparent. Writes up to 3 headers; returns how many. */
static size_t initial_metadata(const struct grpc_call *call, struct h2_header *h,
                               char tp[TRACEPARENT_LEN + 1])
{
    size_t n = 0;
    h[n++] = hdr("content-type", "application/grpc");
    h[n++] = (struct h2_header){"x-request-id", 12, call->request_id, call->request_id_len};
    if (obsreq_traceparent(call->obs, tp))
        h[n++] = (struct h2_header){"traceparent", 11, tp, TRACEPARENT_LEN};
    return n;
}

static int send_headers(struct grpc_call *call)
{
    if (call->headers_sent)
        return 0;
    struct h2_header h[3];
    char tp[TRACEPARENT_LEN + 1];
    size_t n = initial_metadata(call, h, tp);
    if (h2_stream_respond_headers(call->st, 200, h, n) != 0)
        return -1;
    call->headers_sent = true;
    return 0;
}

/* Ends the call with a gRPC status (trailers-only when no message was
 * sent); http_status is its HTTP equivalent for the access log and the
 * request span. A call other than ModelStreamInfer is logged here; a
 * ModelStreamInfer stream only when it ends with an error (its messages
 * are logged one by one). */
static void call_end(struct grpc_call *call, int code, int http_status, const char *msg)
{
    if (!call->st || call->finished)
        return;
    call->finished = true;
    call->http_status = http_status;
    if (!is_stream(call))
        call_obs_begin(call);
    else if (code != GRPC_OK)
        obsreq_end(obs_begin(call, call->request_id, call->request_id_len, call->msg.len,
                             call->received_ns),
                   http_status, 0);
    char status[8], encoded[3 * ERROR_MSG_MAX + 1], tp[TRACEPARENT_LEN + 1];
    snprintf(status, sizeof status, "%d", code);
    struct h2_header t[5];
    size_t n = 0;
    if (!call->headers_sent)
        n = initial_metadata(call, t, tp);
    t[n++] = hdr("grpc-status", status);
    if (code != GRPC_OK && msg && msg[0]) {
        grpc_message_encode(msg, encoded, sizeof encoded);
        t[n++] = hdr("grpc-message", encoded);
    }
    bool sent = h2_stream_finish(call->st, t, n) == 0;
    if (!sent && call->st)
        h2_stream_reset(call->st, H2_INTERNAL_ERROR);
    call_obs_end(call, sent ? http_status : 0);
}

static void call_finish(struct grpc_call *call, int code, const char *msg)
{
    call_end(call, code, http_status_from_grpc(code), msg);
}

/* Ends the call with the gRPC status matching an inferd error. */
static void call_fail(struct grpc_call *call, int http_status, const char *msg)
{
    call_end(call, grpc_status_from_http(http_status), http_status, msg);
}

/* Serializes msg as one gRPC message and queues it on the stream; returns
 * its size. On failure the call is ended (RESOURCE_EXHAUSTED); returns -1. */
static int64_t call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
    struct grpc_api *api = call->api;
    if (!call->st || call->finished)
        return -1;
    size_t n = protobuf_c_message_get_packed_size(msg);
    buf_reset(&api->out);
    if (n > MAX_RESPONSE_BYTES - FRAME_HEADER || buf_reserve(&api->out, FRAME_HEADER + n) != 0) {
        call_end(call, GRPC_RESOURCE_EXHAUSTED, 500, "response message too large");
        return -1;
    }
    uint8_t *p = (uint8_t *)api->out.data;
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    protobuf_c_message_pack(msg, p + FRAME_HEADER);
    api->out.len = FRAME_HEADER + n;
    int rc = send_headers(call);
    if (rc == 0)
        rc = h2_stream_write(call->st, p, api->out.len);
    if (api->out.cap > CALL_KEEP_BUFFER * 16)
        buf_free(&api->out);
    if (rc != 0) {
        /* The client does not read what it asked for (output queue full). */
        call_finish(call, GRPC_RESOURCE_EXHAUSTED, "response queue of the stream is full");
        return -1;
    }
    call->bytes_out += n;
    return (int64_t)n;
}

/* A unary response: the message, then status OK. */
static void call_reply(struct grpc_call *call, const ProtobufCMessage *msg)
{
    if (call_send(call, msg) >= 0)
        call_finish(call, GRPC_OK, NULL);
}

/* Unpacks a request message into the api's scratch arena; answers the
 * call itself on failure (NULL). */
static void *call_unpack(struct grpc_call *call, const ProtobufCMessageDescriptor *d,
                         const uint8_t *data, size_t len)
{
    struct infer_pb_allocator a;
    infer_pb_allocator_init(&a, &call->api->scratch);
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, &a.base, len, data);
    if (!msg) {
        char text[ERROR_MSG_MAX];
        snprintf(text, sizeof text, "malformed %s message", d->short_name);
        call_fail(call, a.failed ? 413 : 400, text);
    }
    return msg;
}

/* ---- model lookup ------------------------------------------------------- */

/* The model `name` (and `version`, "" = the newest loaded) in snapshot s,
 * or NULL with a 404 in err. */
static const struct model *find_model(const struct model_snapshot *s, const char *name,
                                      const char *version, const struct model_entry **entry,
                                      struct error *err)
{
    const struct model *m = NULL;
    const struct model_entry *e = snapshot_find(s, name, strlen(name));
    if (entry)
        *entry = e;
    if (!e)
        error_set(err, 404, "unknown model '%s'", name);
    else if (e->state != MODEL_READY)
        error_set(err, 404, "model '%s' is not ready: %s", e->name, e->reason);
    else if (version[0] && !(m = registry_version(e, version)))
        error_set(err, 404, "model '%s' has no ready version '%s'", e->name, version);
    else
        return m ? m : e->model;
    return NULL;
}

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

static void handle_server_live(struct grpc_call *call)
{
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = 1;
    call_reply(call, &r.base);
}

static void handle_server_ready(struct grpc_call *call)
{
    Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
    r.ready = server_ready(call->api);
    call_reply(call, &r.base);
}

static void handle_model_ready(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelReadyRequest *q =
        call_unpack(call, &inference__model_ready_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
    struct error err;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = find_model(s, q->name, q->version, NULL, &err);
    if (m)
        obsreq_set_model(call->obs, m->name, m->version_str, m->sha256);
    r.ready = !api->draining && m != NULL;
    repository_release(api->repo, s);
    call_reply(call, &r.base);
}

static void handle_server_metadata(struct grpc_call *call)
{
    static char *extensions[] = {"model_configuration", "model_repository", "statistics"};
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    r.name = "inferd";
    r.version = INFERD_VERSION;
    r.n_extensions = sizeof extensions / sizeof extensions[0];
    r.extensions = extensions;
    call_reply(call, &r.base);
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
        call_unpack(call, &inference__model_metadata_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    const struct model_entry *e;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = find_model(s, q->name, q->version, &e, &err);
    if (!m) {
        call_fail(call, err.status, err.msg);
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
        call_fail(call, 503, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < e->nversions; i++)
        r.versions[i] = e->versions[i]->version_str;
    r.n_versions = e->nversions;
    r.n_inputs = m->info.ninputs;
    r.n_outputs = m->info.noutputs;
    call_reply(call, &r.base);
out:
    repository_release(api->repo, s);
}

/* ---- model configuration ------------------------------------------------ */

static void handle_model_config(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelConfigRequest *q =
        call_unpack(call, &inference__model_config_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    struct model_snapshot *s = repository_acquire(api->repo);
    const struct model *m = find_model(s, q->name, q->version, NULL, &err);
    if (m)
        obsreq_set_model(call->obs, m->name, m->version_str, m->sha256);
    Inference__ModelConfig config;
    if (!m) {
        call_fail(call, err.status, err.msg);
    } else if (model_pb_config(&api->scratch, &m->config, &config) != 0) {
        call_fail(call, 503, "out of memory");
    } else {
        Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
        r.config = &config;
        call_reply(call, &r.base);
    }
    repository_release(api->repo, s);
}

/* ---- statistics --------------------------------------------------------- */

static void handle_model_statistics(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__ModelStatisticsRequest *q =
        call_unpack(call, &inference__model_statistics_request__descriptor, data, len);
    if (!q)
        return;
    struct grpc_api *api = call->api;
    struct error err;
    struct stats_report report;
    if (!q->name[0] && q->version[0]) {
        call_fail(call, 400, "a version needs a model name");
        return;
    }
    if (q->name[0])
        obsreq_set_model(call->obs, q->name, q->version, NULL);
    if (stats_report_build(api->repo, q->name[0] ? q->name : NULL, strlen(q->name),
                           q->version[0] ? q->version : NULL, &report, &err) != 0) {
        call_fail(call, err.status, err.msg);
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
        call_fail(call, 503, "out of memory");
    else
        call_reply(call, &r.base);
    stats_report_free(&report);
}

/* ---- repository --------------------------------------------------------- */

static void handle_repository_index(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__RepositoryIndexRequest *q =
        call_unpack(call, &inference__repository_index_request__descriptor, data, len);
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
    call_reply(call, &r.base);
    return;
out_oom:
    buf_free(&json);
    call_fail(call, 503, "out of memory");
}

/* A load or unload in progress: answered when the manager has done it. */
struct grpc_repo_call {
    struct repo_cmd cmd;
    struct grpc_call *call;
    struct loop_task task;
    char *config; /* override text, owned */
};

static void repo_call_done_on_loop(struct loop_task *task)
{
    struct grpc_repo_call *rc =
        (struct grpc_repo_call *)((char *)task - offsetof(struct grpc_repo_call, task));
    struct grpc_call *call = rc->call;
    struct grpc_api *api = call->api;
    api->inflight--;
    call->inflight--;
    if (rc->cmd.status) {
        call_fail(call, rc->cmd.status, rc->cmd.msg);
    } else if (rc->cmd.kind == REPO_LOAD) {
        Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
        call_reply(call, &r.base);
    } else {
        Inference__RepositoryModelUnloadResponse r =
            INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
        call_reply(call, &r.base);
    }
    mem_free(rc->config);
    mem_free(rc);
    call_drop(call);
    api_maybe_idle(api);
}

/* Manager thread: bring the answer back to the call's loop. */
static void repo_call_done(struct repo_cmd *cmd)
{
    struct grpc_repo_call *rc = (struct grpc_repo_call *)cmd;
    loop_post(rc->call->api->loop, &rc->task);
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
    struct grpc_api *api = call->api;
    const char *name;
    const Inference__ModelRepositoryParameter *config = NULL;
    if (load) {
        Inference__RepositoryModelLoadRequest *q =
            call_unpack(call, &inference__repository_model_load_request__descriptor, data, len);
        if (!q)
            return;
        name = q->model_name;
        config = load_config_param(q);
    } else {
        Inference__RepositoryModelUnloadRequest *q =
            call_unpack(call, &inference__repository_model_unload_request__descriptor, data, len);
        if (!q)
            return;
        name = q->model_name;
    }
    obsreq_set_model(call->obs, name, NULL, NULL);
    struct error err;
    struct grpc_repo_call *rc = NULL;
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len >= sizeof rc->cmd.name || strchr(name, '/') || name[0] == '.') {
        error_set(&err, 400, "invalid model name");
        goto out_error;
    }
    const char *config_text = NULL;
    size_t config_len = 0;
    if (config) {
        if (config->parameter_choice_case ==
            INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
            config_text = config->string_param;
            config_len = strlen(config_text);
        } else if (config->parameter_choice_case ==
                   INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM) {
            config_text = (const char *)config->bytes_param.data;
            config_len = config->bytes_param.len;
        } else {
            error_set(&err, 400, "parameter 'config' must be a string (the configuration as JSON)");
            goto out_error;
        }
    }
    rc = mem_calloc(1, sizeof *rc);
    if (!rc) {
        error_set(&err, 503, "out of memory");
        goto out_error;
    }
    if (config_text && model_config_text_from_json(config_len ? config_text : "", config_len,
                                                   &rc->config, &err) != 0)
        goto out_error;
    rc->cmd.kind = load ? REPO_LOAD : REPO_UNLOAD;
    memcpy(rc->cmd.name, name, name_len + 1);
    rc->cmd.config = rc->config;
    rc->cmd.done = repo_call_done;
    rc->call = call;
    rc->task.run = repo_call_done_on_loop;
    if (repository_submit(api->repo, &rc->cmd, &err) != 0)
        goto out_error;
    api->inflight++;
    call->inflight++;
    call_hold(call);
    return;
out_error:
    if (rc) {
        mem_free(rc->config);
        mem_free(rc);
    }
    call_fail(call, err.status, err.msg);
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
        call_unpack(call, &grpc__health__v1__health_check_request__descriptor, data, len);
    if (!q)
        return;
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = health_status(call->api, q->service);
    if (r.status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "unknown service '%s'", q->service);
        call_finish(call, GRPC_NOT_FOUND, msg);
        return;
    }
    call_reply(call, &r.base);
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
    call_send(call, &r.base);
}

static void handle_health_watch(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Grpc__Health__V1__HealthCheckRequest *q =
        call_unpack(call, &grpc__health__v1__health_check_request__descriptor, data, len);
    if (!q)
        return;
    if (strlen(q->service) >= sizeof call->service) {
        call_fail(call, 400, "service name too long");
        return;
    }
    strcpy(call->service, q->service);
    call->watching = true;
    call->api->nwatchers++;
    watch_timer_update(call->api);
    watch_update(call);
}

static void on_timer(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct grpc_api *api = (struct grpc_api *)((char *)w - offsetof(struct grpc_api, timer));
    uint64_t expirations;
    while (read(w->fd, &expirations, sizeof expirations) > 0) {
    }
    for (struct grpc_call *c = api->calls, *next; c; c = next) {
        next = c->next;
        if (c->watching && !c->finished) {
            call_hold(c);
            watch_update(c);
            call_drop(c);
        }
    }
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

/* ---- inference ---------------------------------------------------------- */

static struct grpc_infer *infer_get(struct grpc_api *api, size_t arena_max)
{
    struct grpc_infer *gi = api->free_infers;
    if (gi) {
        api->free_infers = gi->next_free;
        api->nfree_infers--;
        struct arena arena = gi->req.arena;
        memset(gi, 0, sizeof *gi);
        gi->req.arena = arena;
        gi->req.arena.max = arena_max;
        pool_use_take(&api->infer_use);
        return gi;
    }
    gi = mem_calloc(1, sizeof *gi);
    if (gi) {
        arena_init(&gi->req.arena, INFER_ARENA_CHUNK, arena_max);
        pool_use_take(&api->infer_use);
    }
    return gi;
}

static void infer_free(struct grpc_infer *gi)
{
    arena_free(&gi->req.arena);
    mem_free(gi);
}

static void infer_put(struct grpc_api *api, struct grpc_infer *gi)
{
    pool_use_give(&api->infer_use);
    if (api->nfree_infers >= POOL_MAX) {
        infer_free(gi);
        return;
    }
    arena_reset(&gi->req.arena);
    gi->next_free = api->free_infers;
    api->free_infers = gi;
    api->nfree_infers++;
}

/* ModelStreamInfer: ends the observer of one message, answered with a
 * response message of n bytes (n < 0: none could be sent). */
static void message_obs_end(struct grpc_call *call, struct obsreq **o, int http_status,
                            int64_t n)
{
    if (n < 0)
        http_status = call->st ? call->http_status : 0;
    obsreq_end(*o, http_status, n < 0 ? 0 : (uint64_t)n);
    *o = NULL;
}

/* ModelStreamInfer: a failed request is one response with error_message
 * (and its id), and the stream goes on. Ends the message's observer *o
 * with http_status. */
static void stream_error(struct grpc_call *call, struct obsreq **o, int http_status,
                         const char *model, const char *version, const char *id, const char *msg)
{
    Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    ir.model_name = (char *)model;
    ir.model_version = (char *)version;
    ir.id = (char *)id;
    Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    r.error_message = (char *)msg;
    r.infer_response = &ir;
    message_obs_end(call, o, http_status, call_send(call, &r.base));
}

/* Where the observer of an infer request lives: the message's own on a
 * ModelStreamInfer stream, else the call's. */
static struct obsreq **infer_obs(struct grpc_infer *gi)
{
    return is_stream(gi->call) ? &gi->obs : &gi->call->obs;
}

/* A stream ends with OK once the client half-closed and every request
 * was answered; when the server drains, with UNAVAILABLE. */
static void stream_maybe_end(struct grpc_call *call)
{
    if (call->inflight || call->finished || !call->st)
        return;
    if (call->client_ended)
        call_finish(call, GRPC_OK, NULL);
    else if (call->api->draining)
        call_finish(call, GRPC_UNAVAILABLE, "server is shutting down");
}

static void infer_respond(struct grpc_call *call, struct grpc_infer *gi)
{
    struct infer_request *req = &gi->req;
    int status = req->rc == 0 ? 200 : req->err.status ? req->err.status : 500;
    const char *msg = req->err.msg;
    Inference__ModelInferResponse *resp = NULL;
    if (req->rc == 0 && infer_pb_response(req, &req->arena, &resp) != 0) {
        status = 500;
        msg = "out of memory encoding the response";
    }
    if (!resp) {
        if (is_stream(call))
            stream_error(call, &gi->obs, status, req->model->name, req->model->version_str,
                         req->id ? req->id : "", msg);
        else
            call_fail(call, status, msg);
        return;
    }
    if (is_stream(call)) {
        Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        r.infer_response = resp;
        message_obs_end(call, &gi->obs, status, call_send(call, &r.base));
    } else {
        call_reply(call, &resp->base);
    }
}

/* On the I/O loop: answer and release a completed request. */
static void infer_done(struct loop_task *task)
{
    struct grpc_infer *gi = (struct grpc_infer *)((char *)task - offsetof(struct grpc_infer, task));
    struct grpc_call *call = gi->call;
    struct grpc_api *api = gi->api;
    struct infer_request *req = &gi->req;
    api->inflight--;
    call->inflight--;
    if (gi->prev)
        gi->prev->next = gi->next;
    else
        call->infers = gi->next;
    if (gi->next)
        gi->next->prev = gi->prev;
    stats_record_completion(sched_stats(req->model->sched), req, call->st == NULL, gi->received_ns,
                            clock_now_ns());
    struct obsreq **o = infer_obs(gi);
    obsreq_infer_done(*o, req);
    if (call->st && !call->finished) {
        infer_respond(call, gi);
        if (is_stream(call))
            stream_maybe_end(call);
    }
    if (*o) { /* not answered: the client left, or the stream ended first */
        obsreq_end(*o, call->st ? call->http_status : 0, 0);
        *o = NULL;
    }
    sched_release(req);
    model_unref(req->model);
    infer_put(api, gi);
    call_drop(call);
    api_maybe_idle(api);
}

/* On the worker thread: hand the request back to the loop that owns it. */
static void infer_complete(struct infer_request *req)
{
    struct grpc_infer *gi = (struct grpc_infer *)req;
    loop_post(gi->api->loop, &gi->task);
}

/* Decodes one ModelInferRequest message and submits it. Errors answer the
 * call (unary) or become an error response on the stream. */
static void start_infer(struct grpc_call *call, const uint8_t *data, size_t len)
{
    struct grpc_api *api = call->api;
    struct error err;
    error_clear(&err);
    atomic_fetch_add_explicit(&api->infer_requests, 1, memory_order_relaxed);
    size_t arena_max = INFER_ARENA_MAX_BYTES;
    if (len < INFER_ARENA_MAX_BYTES / INFER_ARENA_MAX_FACTOR)
        arena_max = len * INFER_ARENA_MAX_FACTOR + INFER_ARENA_CHUNK * 16;
    struct grpc_infer *gi = infer_get(api, arena_max);
    if (!gi) {
        if (is_stream(call)) {
            struct obsreq *o = message_obs_begin(call, NULL, len, clock_now_ns());
            stream_error(call, &o, 503, "", "", "", "out of memory");
        } else {
            call_fail(call, 503, "out of memory");
        }
        return;
    }
    gi->call = call;
    gi->api = api;
    gi->received_ns = clock_now_ns();
    Inference__ModelInferRequest *msg = NULL;
    const struct model *m = NULL;
    int rc = infer_pb_unpack(&gi->req.arena, data, len, &msg, &err);
    if (is_stream(call))
        gi->obs = message_obs_begin(call, msg ? msg->id : NULL, len, gi->received_ns);
    struct obsreq **o = infer_obs(gi);
    if (rc != 0)
        goto out_error;
    struct model_snapshot *s = repository_acquire(api->repo);
    m = find_model(s, msg->model_name, msg->model_version, NULL, &err);
    if (m)
        gi->req.model = model_ref((struct model *)m);
    repository_release(api->repo, s);
    if (!m)
        goto out_error;
    obsreq_attach(*o, &gi->req, m->name, m->version_str, m->sha256);
    gi->req.complete = infer_complete;
    gi->task.run = infer_done;
    if (infer_pb_decode(&gi->req, m, msg, &err) != 0)
        goto out_error;
    if (call->deadline_ns) {
        uint64_t now = clock_now_ns();
        if (now >= call->deadline_ns) {
            error_set(&err, 504, "deadline exceeded before the request was queued");
            goto out_error;
        }
        uint64_t left_us = (call->deadline_ns - now) / 1000u;
        if (left_us == 0)
            left_us = 1;
        if (!gi->req.timeout_us || left_us < gi->req.timeout_us)
            gi->req.timeout_us = left_us;
    }
    if (call->inflight >= STREAM_MAX_INFLIGHT) {
        error_set(&err, 429, "too many requests in flight on this stream (%d)",
                  STREAM_MAX_INFLIGHT);
        goto out_error;
    }
    if (sched_submit(m->sched, &gi->req, &err) != 0)
        goto out_error;
    gi->next = call->infers;
    if (call->infers)
        call->infers->prev = gi;
    call->infers = gi;
    call->inflight++;
    api->inflight++;
    call_hold(call);
    return;
out_error:
    if (m)
        stats_record_refused(sched_stats(m->sched), err.status, gi->received_ns, clock_now_ns());
    if (is_stream(call))
        stream_error(call, o, err.status, msg ? msg->model_name : "",
                     msg ? msg->model_version : "", msg ? msg->id : "", err.msg);
    else
        call_fail(call, err.status, err.msg);
    if (gi->req.model)
        model_unref(gi->req.model);
    infer_put(api, gi);
}

/* ---- stream callbacks ----------------------------------------------------- */

static const struct method *find_method(const char *path, size_t len)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].path) == len && memcmp(methods[i].path, path, len) == 0)
            return &methods[i];
    return NULL;
}

static void on_headers(void *app, struct h2_stream *st)
{
    struct grpc_api *api = app;
    struct grpc_call *call = call_get(api);
    if (!call) {
        h2_stream_reset(st, H2_REFUSED_STREAM);
        return;
    }
    call->st = st;
    call->received_ns = clock_now_ns();
    size_t id_len = 0;
    const char *id = h2_stream_header(st, "x-request-id", &id_len);
    call->request_id_len = request_id_resolve(id, id_len, call->request_id);
    h2_stream_set_user(st, call);
    call->next = api->calls;
    if (api->calls)
        api->calls->prev = call;
    api->calls = call;
    call_hold(call);

    size_t plen = 0, mlen = 0;
    const char *path = h2_stream_path(st, &plen);
    const char *method = h2_stream_method(st, &mlen);
    call->method = path ? find_method(path, plen) : NULL;
    const char *timeout;
    size_t tlen = 0;
    if (!call->method) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "unknown method %.*s", (int)(plen < 200 ? plen : 200),
                 path ? path : "");
        call_finish(call, GRPC_UNIMPLEMENTED, msg);
    } else if (!method || mlen != 4 || memcmp(method, "POST", 4) != 0) {
        call_finish(call, GRPC_UNIMPLEMENTED, "gRPC calls use POST");
    } else if ((timeout = h2_stream_header(st, "grpc-timeout", &tlen)) != NULL) {
        uint64_t ns;
        if (grpc_timeout_parse(timeout, tlen, &ns) != 0)
            call_finish(call, GRPC_INVALID_ARGUMENT, "malformed grpc-timeout header");
        else
            call->deadline_ns =
                ns > UINT64_MAX - call->received_ns ? UINT64_MAX : call->received_ns + ns;
    }
    call_drop(call);
}

/* Handles the request message of a unary (or server-streaming) call. */
static void dispatch(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (!call->method->client_stream)
        call_obs_begin(call);
    switch (call->method->id) {
    case M_SERVER_LIVE:
        handle_server_live(call);
        break;
    case M_SERVER_READY:
        handle_server_ready(call);
        break;
    case M_MODEL_READY:
        handle_model_ready(call, data, len);
        break;
    case M_SERVER_METADATA:
        handle_server_metadata(call);
        break;
    case M_MODEL_METADATA:
        handle_model_metadata(call, data, len);
        break;
    case M_MODEL_INFER:
    case M_MODEL_STREAM_INFER:
        start_infer(call, data, len);
        break;
    case M_MODEL_CONFIG:
        handle_model_config(call, data, len);
        break;
    case M_MODEL_STATISTICS:
        handle_model_statistics(call, data, len);
        break;
    case M_REPOSITORY_INDEX:
        handle_repository_index(call, data, len);
        break;
    case M_REPOSITORY_LOAD:
        handle_repository_call(call, data, len, true);
        break;
    case M_REPOSITORY_UNLOAD:
        handle_repository_call(call, data, len, false);
        break;
    case M_HEALTH_CHECK:
        handle_health_check(call, data, len);
        break;
    case M_HEALTH_WATCH:
        handle_health_watch(call, data, len);
        break;
    }
    arena_reset(&call->api->scratch);
}

static void message_complete(struct grpc_call *call)
{
    call->hdr_got = 0;
    call->nmessages++;
    if (call->method->client_stream) {
        if (call->api->draining) {
            struct obsreq *o = message_obs_begin(call, NULL, call->msg.len, clock_now_ns());
            stream_error(call, &o, 503, "", "", "", "server is shutting down");
        } else
            dispatch(call, (const uint8_t *)call->msg.data, call->msg.len);
        buf_reset(&call->msg);
    } else if (call->nmessages > 1) {
        call_finish(call, GRPC_INVALID_ARGUMENT, "more than one request message for a unary call");
    }
}

static void on_data(void *app, struct h2_stream *st, const uint8_t *data, size_t len)
{
    (void)app;
    struct grpc_call *call = h2_stream_user(st);
    if (!call)
        return;
    call_hold(call);
    while (len && !call->finished) {
        if (call->hdr_got < FRAME_HEADER) {
            size_t take = FRAME_HEADER - call->hdr_got;
            take = take < len ? take : len;
            memcpy(call->hdr + call->hdr_got, data, take);
            call->hdr_got += (uint32_t)take;
            data += take;
            len -= take;
            if (call->hdr_got < FRAME_HEADER)
                break;
            uint32_t n = (uint32_t)call->hdr[1] << 24 | (uint32_t)call->hdr[2] << 16 |
                         (uint32_t)call->hdr[3] << 8 | call->hdr[4];
            if (call->hdr[0] & 1) {
                call_finish(call, GRPC_UNIMPLEMENTED, "compression not supported");
                break;
            }
            if (call->hdr[0] != 0) {
                call_finish(call, GRPC_INTERNAL, "invalid gRPC message flags");
                break;
            }
            if (n > call->api->max_message_bytes) {
                char msg[ERROR_MSG_MAX];
                snprintf(msg, sizeof msg,
                         "request message of %" PRIu32 " bytes exceeds the limit of %" PRIu64
                         " bytes (--grpc-max-message-bytes)",
                         n, call->api->max_message_bytes);
                call_end(call, GRPC_RESOURCE_EXHAUSTED, 413, msg);
                break;
            }
            call->msg_len = n;
            buf_reset(&call->msg);
            if (n == 0)
                message_complete(call);
            continue;
        }
        size_t want = call->msg_len - call->msg.len;
        size_t take = want < len ? want : len;
        if (buf_append(&call->msg, data, take) != 0) {
            call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory for the request message");
            break;
        }
        data += take;
        len -= take;
        if (call->msg.len == call->msg_len)
            message_complete(call);
    }
    call_drop(call);
}

static void on_end(void *app, struct h2_stream *st)
{
    (void)app;
    struct grpc_call *call = h2_stream_user(st);
    if (!call)
        return;
    call_hold(call);
    call->client_ended = true;
    if (call->finished) {
    } else if (call->hdr_got) {
        call_finish(call, GRPC_INVALID_ARGUMENT, "the request ended inside a message");
    } else if (call->method->client_stream) {
        stream_maybe_end(call);
    } else if (call->nmessages == 0) {
        call_finish(call, GRPC_INVALID_ARGUMENT, "no request message");
    } else {
        dispatch(call, (const uint8_t *)call->msg.data, call->msg.len);
    }
    call_drop(call);
}

static void on_close(void *app, struct h2_stream *st, uint32_t error_code)
{
    struct grpc_api *api = app;
    (void)error_code;
    struct grpc_call *call = h2_stream_user(st);
    if (!call)
        return;
    h2_stream_set_user(st, NULL);
    call->st = NULL;
    call->finished = true;
    if (call->prev)
        call->prev->next = call->next;
    else
        api->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    if (call->watching) {
        api->nwatchers--;
        watch_timer_update(api);
    }
    /* Work still queued for this call must not run (the scheduler drops
     * cancelled requests). A request in flight logs the call when it comes
     * back (with its timings); else the call is logged now. */
    for (struct grpc_infer *gi = call->infers; gi; gi = gi->next)
        atomic_store_explicit(&gi->req.cancelled, true, memory_order_relaxed);
    if (!call->infers)
        call_obs_end(call, 0);
    call_drop(call);
}

/* ---- api ------------------------------------------------------------------ */

int grpc_api_init(struct grpc_api *api, struct repository *repo, struct loop *loop,
                  uint64_t max_message_bytes)
{
    memset(api, 0, sizeof *api);
    api->repo = repo;
    api->loop = loop;
    api->max_message_bytes = max_message_bytes;
    api->app = (struct h2_stream_app){.app = api,
                                      .on_headers = on_headers,
                                      .on_data = on_data,
                                      .on_end = on_end,
                                      .on_close = on_close};
    size_t scratch_max = max_message_bytes < ((size_t)1 << 28)
                             ? (size_t)max_message_bytes * 4 + (1u << 20)
                             : (size_t)1 << 30;
    arena_init(&api->scratch, 16 * 1024, scratch_max);
    buf_init(&api->out, MAX_RESPONSE_BYTES);
    api->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    api->timer.on_events = on_timer;
    if (api->timer.fd < 0)
        return -errno;
    int rc = loop_add(loop, &api->timer, EPOLLIN);
    if (rc != 0) {
        close(api->timer.fd);
        api->timer.fd = -1;
    }
    return rc;
}

void grpc_api_drain(struct grpc_api *api)
{
    api->draining = true;
    for (struct grpc_call *c = api->calls, *next; c; c = next) {
        next = c->next;
        call_hold(c);
        if (c->watching) {
            watch_update(c);
            call_finish(c, GRPC_UNAVAILABLE, "server is shutting down");
        } else if (c->method && is_stream(c)) {
            stream_maybe_end(c);
        }
        call_drop(c);
    }
}

/* Frees pooled objects beyond keep_calls / keep_infers. */
static void trim_pools(struct grpc_api *api, uint32_t keep_calls, uint32_t keep_infers)
{
    while (api->nfree_calls > keep_calls) {
        struct grpc_call *c = api->free_calls;
        api->free_calls = c->next_free;
        api->nfree_calls--;
        call_free(c);
    }
    while (api->nfree_infers > keep_infers) {
        struct grpc_infer *gi = api->free_infers;
        api->free_infers = gi->next_free;
        api->nfree_infers--;
        infer_free(gi);
    }
}

void grpc_api_tick(struct grpc_api *api, uint64_t now_ms)
{
    trim_pools(api, pool_use_keep(&api->call_use, now_ms), pool_use_keep(&api->infer_use, now_ms));
}

void grpc_api_free(struct grpc_api *api)
{
    if (!api->loop)
        return; /* never initialized */
    trim_pools(api, 0, 0);
    arena_free(&api->scratch);
    buf_free(&api->out);
    if (api->timer.fd >= 0) {
        loop_del(api->loop, &api->timer);
        close(api->timer.fd);
        api->timer.fd = -1;
    }
}
