#include "obs/request.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/json.h"
#include "base/mem.h"
#include "base/numfmt.h"
#include "core/dtype.h"
#include "obs/accesslog.h"
#include "obs/jsonline.h"
#include "obs/metrics.h"
#include "obs/otlp.h"

#define INPUTS_MAX 1024

struct obsreq {
    struct obsreq *next_free, *next_all;
    enum obs_protocol proto;
    bool log;         /* an access log line is wanted */
    bool traced;      /* spans are recorded */
    bool has_parent;  /* an incoming traceparent was valid */
    bool done;        /* obsreq_infer_done was called */
    uint8_t flags;    /* W3C flags we propagate */
    uint8_t trace_id[TRACE_ID_BYTES];
    uint8_t span_id[SPAN_ID_BYTES];
    uint8_t parent_span_id[SPAN_ID_BYTES];
    struct trace_parent parent;
    double rate;
    uint64_t start_ns, encode_start_ns;
    uint64_t enqueue_ns, exec_start_ns, exec_end_ns;
    uint64_t bytes_in;
    uint32_t batch_size;
    struct infer_trace req_trace; /* batch link, copied from the request */
    /* Text fields, NUL-terminated, with their lengths (no strlen per use). */
    uint16_t request_id_len, method_len, endpoint_len, peer_len;
    uint16_t model_len, version_len, sha12_len, inputs_len, error_len;
    char request_id[REQUEST_ID_MAX + 1];
    char method[16];
    char endpoint[256];
    char peer[64];
    char model[256];
    char version[24];
    char sha12[13];
    const char *route; /* route_kind_name(), or NULL: not routed (not an infer request) */
    uint8_t route_len;
    char tenant[OBSREQ_TENANT_MAX + 1]; /* "" = none */
    /* A generative model's request (obsreq_set_generation); finish "" = none. */
    uint32_t prompt_tokens, completion_tokens;
    char finish_reason[OBSREQ_FINISH_MAX + 1];
    uint64_t tokens_reserved; /* obsreq_set_tokens_reserved; 0 = none */
    char tracestate[TRACESTATE_MAX + 1];
    char inputs[INPUTS_MAX]; /* formatted for the access log's format */
    char error[ERROR_MSG_MAX]; /* the error answer's message; error_len 0: none */
};

static _Thread_local struct obsreq *tls_free;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obsreq *all_objects;

static const char *const proto_names[OBS_PROTO_COUNT] = {
    [OBS_PROTO_HTTP1] = "h1", [OBS_PROTO_HTTP10] = "h1.0",         [OBS_PROTO_H2] = "h2",
    [OBS_PROTO_GRPC] = "grpc", [OBS_PROTO_H3] = "h3", [OBS_PROTO_GRPC_WEB] = "grpc-web",
};

const char *obs_protocol_name(enum obs_protocol p)
{
    return p < OBS_PROTO_COUNT ? proto_names[p] : "unknown";
}

/* Requests begun, by protocol (inferd_requests_total), per metrics shard. */
struct proto_shard {
    _Alignas(METRICS_CACHE_LINE) _Atomic uint64_t requests[OBS_PROTO_COUNT];
};
static struct proto_shard proto_shards[METRICS_NSHARDS];

uint64_t obs_protocol_requests(enum obs_protocol p)
{
    uint64_t n = 0;
    for (int i = 0; p < OBS_PROTO_COUNT && i < METRICS_NSHARDS; i++)
        n += metrics_load(&proto_shards[i].requests[p]);
    return n;
}

size_t request_id_resolve(const char *in, size_t len, char out[REQUEST_ID_MAX + 1])
{
    bool valid = in && len >= 1 && len <= REQUEST_ID_MAX;
    for (size_t i = 0; valid && i < len; i++)
        valid = in[i] >= 0x21 && in[i] <= 0x7e;
    if (valid) {
        memcpy(out, in, len);
        out[len] = '\0';
        return len;
    }
    uint8_t raw[16];
    trace_random(raw, sizeof raw);
    span_hex(raw, sizeof raw, out);
    return 32;
}

static struct obsreq *pool_get(void)
{
    struct obsreq *o = tls_free;
    if (o) {
        tls_free = o->next_free;
        return o;
    }
    o = mem_calloc(1, sizeof *o);
    if (!o)
        return NULL;
    pthread_mutex_lock(&all_lock);
    o->next_all = all_objects;
    all_objects = o;
    pthread_mutex_unlock(&all_lock);
    return o;
}

static void pool_put(struct obsreq *o)
{
    o->next_free = tls_free;
    tls_free = o;
}

void obsreq_pool_free(void)
{
    pthread_mutex_lock(&all_lock);
    struct obsreq *o = all_objects;
    all_objects = NULL;
    pthread_mutex_unlock(&all_lock);
    while (o) {
        struct obsreq *next = o->next_all;
        mem_free(o);
        o = next;
    }
    tls_free = NULL;
}

/* Copies s[0..n) into dst (cut to cap - 1), NUL-terminated; returns the
 * length copied. */
static uint16_t copy_str(char *dst, size_t cap, const char *s, size_t n)
{
    if (!s) {
        s = ""; /* memcpy wants a valid pointer even for 0 bytes */
        n = 0;
    }
    if (n >= cap)
        n = cap - 1;
    /* Hide the bound from the compiler: knowing n < cap, GCC inlines the
     * copy as `rep movsq`, whose start-up cost dominated obsreq_begin in
     * profiles; the library memcpy is several times faster at these sizes. */
    __asm__("" : "+r"(n));
    memcpy(dst, s, n);
    dst[n] = '\0';
    return (uint16_t)n;
}

struct obsreq *obsreq_begin(const struct obsreq_start *s)
{
    if (s->proto < OBS_PROTO_COUNT) {
        int shard = metrics_shard_index();
        metrics_add(&proto_shards[shard].requests[s->proto], 1, shard);
    }
    bool log = accesslog_sample();
    struct trace_parent parent;
    bool has_parent = s->traceparent &&
                      trace_parse_traceparent(s->traceparent, s->traceparent_len, &parent) == 0;
    double rate = 0;
    bool sampled = trace_sample(NULL, has_parent ? &parent : NULL, &rate);
    if (!log && !sampled && !trace_has_model_settings())
        return NULL;
    struct obsreq *o = pool_get();
    if (!o)
        return NULL;
    o->proto = s->proto;
    o->log = log;
    o->traced = sampled;
    o->has_parent = has_parent;
    o->done = false;
    o->rate = rate;
    o->parent = parent;
    if (has_parent) {
        memcpy(o->trace_id, parent.trace_id, TRACE_ID_BYTES);
        memcpy(o->parent_span_id, parent.span_id, SPAN_ID_BYTES);
        o->flags = parent.flags;
    } else {
        trace_new_trace_id(o->trace_id);
        o->flags = 0;
    }
    trace_new_span_id(o->span_id);
    o->tracestate[0] = '\0';
    if (has_parent && s->tracestate &&
        trace_parse_tracestate(s->tracestate, s->tracestate_len, o->tracestate,
                               sizeof o->tracestate) < 0)
        o->tracestate[0] = '\0';
    o->start_ns = s->start_ns ? s->start_ns : clock_now_ns();
    o->encode_start_ns = o->enqueue_ns = o->exec_start_ns = o->exec_end_ns = 0;
    o->bytes_in = s->bytes_in;
    o->batch_size = 0;
    memset(&o->req_trace, 0, sizeof o->req_trace);
    o->request_id_len =
        copy_str(o->request_id, sizeof o->request_id, s->request_id, s->request_id_len);
    o->method_len = copy_str(o->method, sizeof o->method, s->method, s->method_len);
    o->endpoint_len = copy_str(o->endpoint, sizeof o->endpoint, s->endpoint, s->endpoint_len);
    o->peer[0] = '\0';
    o->peer_len = 0;
    if (log && s->peer)
        o->peer_len = (uint16_t)s->peer(s->peer_ctx, o->peer, sizeof o->peer);
    o->model[0] = o->version[0] = o->sha12[0] = '\0';
    o->model_len = o->version_len = o->sha12_len = o->inputs_len = o->error_len = 0;
    o->route = NULL;
    o->tenant[0] = '\0';
    o->finish_reason[0] = '\0';
    o->prompt_tokens = o->completion_tokens = 0;
    o->tokens_reserved = 0;
    return o;
}

void obsreq_set_model(struct obsreq *o, const char *name, const char *version,
                      const char *sha256)
{
    if (!o)
        return;
    o->model_len = copy_str(o->model, sizeof o->model, name, name ? strlen(name) : 0);
    o->version_len =
        copy_str(o->version, sizeof o->version, version, version ? strlen(version) : 0);
    o->sha12_len = copy_str(o->sha12, sizeof o->sha12, sha256, sha256 ? strnlen(sha256, 12) : 0);
    double rate;
    int d = trace_sample_model(o->model, o->has_parent ? &o->parent : NULL, &rate);
    if (d >= 0) {
        o->traced = d == 1;
        o->rate = rate;
    }
}

void obsreq_set_bytes_in(struct obsreq *o, uint64_t bytes_in)
{
    if (o)
        o->bytes_in = bytes_in;
}

void obsreq_set_route(struct obsreq *o, enum route_kind route)
{
    if (!o)
        return;
    o->route = route_kind_name(route);
    o->route_len = (uint8_t)strnlen(o->route, 8); /* "fallback", the longest */
}

void obsreq_set_tenant(struct obsreq *o, const char *tenant)
{
    if (o)
        copy_str(o->tenant, sizeof o->tenant, tenant, tenant ? strlen(tenant) : 0);
}

void obsreq_set_generation(struct obsreq *o, uint32_t prompt_tokens, uint32_t completion_tokens,
                           const char *finish_reason)
{
    if (!o)
        return;
    o->prompt_tokens = prompt_tokens;
    o->completion_tokens = completion_tokens;
    if (!finish_reason || !finish_reason[0])
        finish_reason = "-"; /* not finished (the stream was left mid-way) */
    copy_str(o->finish_reason, sizeof o->finish_reason, finish_reason, strlen(finish_reason));
}

void obsreq_set_tokens_reserved(struct obsreq *o, uint64_t tokens)
{
    if (o)
        o->tokens_reserved = tokens;
}

void obsreq_attach(struct obsreq *o, struct infer_request *req, const char *name,
                   const char *version, const char *sha256)
{
    if (!o)
        return;
    obsreq_set_model(o, name, version, sha256);
    struct infer_trace *t = &req->trace;
    memcpy(t->trace_id, o->trace_id, TRACE_ID_BYTES);
    memcpy(t->span_id, o->span_id, SPAN_ID_BYTES);
    t->sampled = o->traced;
    t->batch_linked = false;
}

/* One input as the access log shows it, written at p: JSON {"name",
 * "datatype","shape"} or text name:DATATYPE:[d,d]. Needs at most
 * INPUT_ELEMENT_MAX bytes; returns the end. */
#define INPUT_NAME_MAX 200
#define INPUT_ELEMENT_MAX                                                                      \
    (JC_STR_ROOM(INPUT_NAME_MAX) + 64 /* keys, datatype */ + TENSOR_MAX_DIMS * (NUMFMT_MAX + 1))

static char *format_input(char *p, const struct tensor *t, bool json)
{
    size_t name_len = strnlen(t->name, INPUT_NAME_MAX);
    const char *dt = dtype_name(t->dtype);
    if (json) {
        p = jc_lit(p, "{\"name\":");
        p = jc_str(p, t->name, name_len);
        p = jc_lit(p, ",\"datatype\":");
        p = jc_qraw(p, dt, strlen(dt));
        p = jc_lit(p, ",\"shape\":[");
    } else {
        p = jc_put(p, t->name, name_len);
        *p++ = ':';
        p = jc_put(p, dt, strlen(dt));
        p = jc_lit(p, ":[");
    }
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (d)
            *p++ = ',';
        p = jc_i64(p, t->shape[d]);
    }
    return json ? jc_lit(p, "]}") : jc_lit(p, "]");
}

/* The last inputs summary a thread wrote and what it was made of: the
 * requests to a model mostly send the same names, datatypes and shapes,
 * and comparing them costs a fraction of formatting them again. Holds
 * summaries of up to SUMMARY_INPUTS inputs with names below SUMMARY_NAME
 * bytes; others are formatted every time. */
#define SUMMARY_INPUTS 4
#define SUMMARY_NAME 64
struct summary_cache {
    bool valid, json;
    uint32_t ninputs;
    struct {
        enum dtype dtype;
        uint32_t ndim;
        char name[SUMMARY_NAME];
        int64_t shape[TENSOR_MAX_DIMS];
    } in[SUMMARY_INPUTS];
    uint16_t len;
    char text[INPUTS_MAX];
};
static _Thread_local struct summary_cache tls_summary;

static bool summary_cached(const struct summary_cache *c, const struct infer_request *req,
                           bool json)
{
    if (!c->valid || c->json != json || c->ninputs != req->ninputs)
        return false;
    for (uint32_t i = 0; i < req->ninputs; i++) {
        const struct tensor *t = &req->inputs[i];
        if (t->dtype != c->in[i].dtype || t->ndim != c->in[i].ndim ||
            memcmp(t->shape, c->in[i].shape, t->ndim * sizeof t->shape[0]) != 0 ||
            strncmp(t->name, c->in[i].name, SUMMARY_NAME) != 0)
            return false;
    }
    return true;
}

static void summary_keep(struct summary_cache *c, const struct infer_request *req, bool json,
                         const char *text, uint16_t len)
{
    c->valid = false;
    if (req->ninputs > SUMMARY_INPUTS)
        return;
    for (uint32_t i = 0; i < req->ninputs; i++) {
        const struct tensor *t = &req->inputs[i];
        size_t n = strnlen(t->name, SUMMARY_NAME);
        if (n == SUMMARY_NAME)
            return;
        memcpy(c->in[i].name, t->name, n + 1);
        c->in[i].dtype = t->dtype;
        c->in[i].ndim = t->ndim;
        memcpy(c->in[i].shape, t->shape, t->ndim * sizeof t->shape[0]);
    }
    c->json = json;
    c->ninputs = req->ninputs;
    c->len = len;
    memcpy(c->text, text, len);
    c->valid = true;
}

/* The inputs as the access log shows them: a JSON array or the text
 * elements separated by ';'. Stops at a whole element when the space runs
 * out. */
static void format_inputs(struct obsreq *o, const struct infer_request *req, bool json)
{
    if (summary_cached(&tls_summary, req, json)) {
        memcpy(o->inputs, tls_summary.text, tls_summary.len);
        o->inputs_len = tls_summary.len;
        return;
    }
    char *p = o->inputs, *end = o->inputs + sizeof o->inputs - 1; /* room for the closing ']' */
    if (json)
        *p++ = '[';
    for (uint32_t i = 0; i < req->ninputs; i++) {
        char *q = p + (i != 0);
        if ((size_t)(end - q) >= INPUT_ELEMENT_MAX) {
            q = format_input(q, &req->inputs[i], json); /* fits at its longest */
        } else { /* near the end: written aside, kept when it fits */
            char tmp[INPUT_ELEMENT_MAX];
            size_t n = (size_t)(format_input(tmp, &req->inputs[i], json) - tmp);
            if (n > (size_t)(end - q))
                break;
            q = jc_put(q, tmp, n);
        }
        if (i)
            *p = json ? ',' : ';';
        p = q;
    }
    if (json)
        *p++ = ']';
    o->inputs_len = (uint16_t)(p - o->inputs);
    summary_keep(&tls_summary, req, json, o->inputs, o->inputs_len);
}

void obsreq_infer_done(struct obsreq *o, const struct infer_request *req)
{
    if (!o)
        return;
    o->done = true;
    o->encode_start_ns = o->traced ? clock_now_ns() : 0; /* only the encode span needs it */
    o->enqueue_ns = req->enqueue_ns;
    o->exec_start_ns = req->exec_start_ns;
    o->exec_end_ns = req->exec_end_ns;
    o->batch_size = req->batch_size;
    o->req_trace = req->trace;
    if (o->log)
        format_inputs(o, req, accesslog_format() == LOG_LINE_JSON);
}

void obsreq_set_error(struct obsreq *o, const char *msg)
{
    if (!o || !msg || !o->log)
        return;
    o->error_len = copy_str(o->error, sizeof o->error, msg, strnlen(msg, sizeof o->error));
}

bool obsreq_traceparent(const struct obsreq *o, char out[TRACEPARENT_LEN + 1])
{
    if (!o || !o->traced)
        return false;
    trace_format_traceparent(out, o->trace_id, o->span_id, (uint8_t)(o->flags | 1));
    out[TRACEPARENT_LEN] = '\0';
    return true;
}

/* ---- access log record and line --------------------------------------------- */

/* What the access log keeps of a request: built by obsreq_end on the
 * request's thread (copies, no formatting), turned into a line by
 * format_record on the access log's writer thread. In the record the
 * fixed part is followed by the text fields, packed in enum log_text
 * order (not NUL-terminated). */
enum log_text {
    LT_REQUEST_ID,
    LT_METHOD,
    LT_ENDPOINT,
    LT_MODEL,
    LT_VERSION,
    LT_SHA12,
    LT_TENANT,  /* empty: no tenant */
    LT_FINISH,  /* empty: not a generation; "-": one that did not finish */
    LT_PEER,
    LT_INPUTS,  /* already in the log's format (format_inputs) */
    LT_ERROR,   /* empty: no error */
    LT_COUNT
};

struct log_record {
    uint64_t start_ns, end_ns, enqueue_ns, exec_start_ns, exec_end_ns;
    uint64_t bytes_in, bytes_out, tokens_reserved;
    uint32_t batch_size, prompt_tokens, completion_tokens;
    int32_t status;
    const char *route; /* route_kind_name() (static), or NULL */
    uint8_t route_len, proto;
    uint8_t trace_id[TRACE_ID_BYTES];
    uint16_t len[LT_COUNT];
};

/* The caps of the text fields: the struct obsreq buffers they come from. */
#define FIELD_CAP(f) (sizeof(((struct obsreq *)0)->f) - 1)
#define RECORD_TEXT_MAX                                                                        \
    (FIELD_CAP(request_id) + FIELD_CAP(method) + FIELD_CAP(endpoint) + FIELD_CAP(model) +     \
     FIELD_CAP(version) + FIELD_CAP(sha12) + FIELD_CAP(tenant) + FIELD_CAP(finish_reason) +    \
     FIELD_CAP(peer) + FIELD_CAP(inputs) + FIELD_CAP(error))
#define RECORD_MAX (sizeof(struct log_record) + RECORD_TEXT_MAX)

/* The record being built (copied out by accesslog_write). */
static _Thread_local char tls_record[RECORD_MAX];

static char *put_text(char *p, struct log_record *r, enum log_text t, const char *s, size_t n)
{
    r->len[t] = (uint16_t)n;
    memcpy(p, s, n);
    return p + n;
}

/* Writes o's record into out (RECORD_MAX bytes); returns its size. */
static size_t build_record(const struct obsreq *o, int status, uint64_t bytes_out,
                           uint64_t end_ns, char *out)
{
    struct log_record r = {
        .start_ns = o->start_ns,
        .end_ns = end_ns,
        .enqueue_ns = o->enqueue_ns,
        .exec_start_ns = o->exec_start_ns,
        .exec_end_ns = o->exec_end_ns,
        .bytes_in = o->bytes_in,
        .bytes_out = bytes_out,
        .tokens_reserved = o->tokens_reserved,
        .batch_size = o->batch_size,
        .prompt_tokens = o->prompt_tokens,
        .completion_tokens = o->completion_tokens,
        .status = status,
        .route = o->route,
        .route_len = o->route_len,
        .proto = (uint8_t)o->proto,
    };
    memcpy(r.trace_id, o->trace_id, TRACE_ID_BYTES);
    char *p = out + sizeof r;
    p = put_text(p, &r, LT_REQUEST_ID, o->request_id, o->request_id_len);
    p = put_text(p, &r, LT_METHOD, o->method, o->method_len);
    p = put_text(p, &r, LT_ENDPOINT, o->endpoint, o->endpoint_len);
    p = put_text(p, &r, LT_MODEL, o->model, o->model_len);
    p = put_text(p, &r, LT_VERSION, o->version, o->version_len);
    p = put_text(p, &r, LT_SHA12, o->sha12, o->sha12_len);
    p = put_text(p, &r, LT_TENANT, o->tenant, strlen(o->tenant));
    p = put_text(p, &r, LT_FINISH, o->finish_reason, strlen(o->finish_reason));
    p = put_text(p, &r, LT_PEER, o->peer, o->peer_len);
    p = put_text(p, &r, LT_INPUTS, o->inputs, o->inputs_len);
    p = put_text(p, &r, LT_ERROR, o->error, o->error_len);
    memcpy(out, &r, sizeof r);
    return (size_t)(p - out);
}

/* A record read back: its fixed part and where each text field starts. */
struct log_view {
    struct log_record r;
    const char *text[LT_COUNT];
};

static void read_record(const void *data, struct log_view *v)
{
    memcpy(&v->r, data, sizeof v->r);
    const char *p = (const char *)data + sizeof v->r;
    for (int t = 0; t < LT_COUNT; t++) {
        v->text[t] = p;
        p += v->r.len[t];
    }
}

/* RFC 3339 UTC with milliseconds of the monotonic time mono_ns; out needs
 * 25 bytes; returns 24. The wall clock is read once per second per thread
 * (the offset to the monotonic clock, and the seconds part formatted). */
static size_t format_time(char *out, uint64_t mono_ns)
{
    static _Thread_local uint64_t offset_ns, offset_until;
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[24];
    if (mono_ns >= offset_until) {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t now = clock_now_ns();
        offset_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec - now;
        offset_until = now + 1000000000u;
    }
    uint64_t unix_ns = mono_ns + offset_ns;
    time_t sec = (time_t)(unix_ns / 1000000000u);
    if (sec != cached_sec) {
        struct tm tm;
        gmtime_r(&sec, &tm);
        strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = sec;
    }
    size_t n = 19; /* YYYY-MM-DDTHH:MM:SS */
    memcpy(out, cached, n);
    unsigned ms = (unsigned)(unix_ns / 1000000u % 1000u);
    out[n++] = '.';
    out[n++] = (char)('0' + ms / 100);
    out[n++] = (char)('0' + ms / 10 % 10);
    out[n++] = (char)('0' + ms % 10);
    out[n++] = 'Z';
    out[n] = '\0';
    return n;
}

static uint64_t us_between(uint64_t a, uint64_t b)
{
    return a && b > a ? (b - a) / 1000u : 0;
}

/* The longest line either format can write: every text field at its cap
 * (the struct obsreq buffers), escaped at 6 bytes a byte (JSON), every
 * number at NUMFMT_MAX, and the keys and punctuation (LINE_LITERALS,
 * counted with room to spare: both formats' literals are under 500
 * bytes). The writers below check nothing per field: the access log's
 * line buffer holds this bound. */
#define LINE_LITERALS 768
#define LINE_NUMBERS 10
#define LINE_BOUND                                                                             \
    (LINE_LITERALS + LINE_NUMBERS * NUMFMT_MAX + 40 /* ts */ + 2 * TRACE_ID_BYTES + 2 +       \
     8 + 2 /* protocol */ + 8 + 2 /* route */ + JC_STR_ROOM(FIELD_CAP(request_id)) +          \
     JC_STR_ROOM(FIELD_CAP(method)) + JC_STR_ROOM(FIELD_CAP(endpoint)) +                       \
     JC_STR_ROOM(FIELD_CAP(model)) + JC_STR_ROOM(FIELD_CAP(version)) +                         \
     JC_STR_ROOM(FIELD_CAP(sha12)) + JC_STR_ROOM(FIELD_CAP(tenant)) +                          \
     JC_STR_ROOM(FIELD_CAP(finish_reason)) + JC_STR_ROOM(FIELD_CAP(error)) +                   \
     FIELD_CAP(peer) + 2 + FIELD_CAP(inputs) + 1)
_Static_assert(LINE_BOUND <= ACCESSLOG_LINE_MAX,
               "an access log line at its longest must fit the writer's line");

/* A text field of the record as a JSON string (null when empty). */
static char *json_text_or_null(char *p, const struct log_view *v, enum log_text t)
{
    return v->r.len[t] ? jc_str(p, v->text[t], v->r.len[t]) : jc_lit(p, "null");
}

static char *json_text(char *p, const struct log_view *v, enum log_text t)
{
    return jc_str(p, v->text[t], v->r.len[t]);
}

static size_t write_json_line(const struct log_view *v, char *line, const char *ts,
                              size_t ts_len, const char *tid)
{
    const struct log_record *r = &v->r;
    char *p = jc_lit(line, "{\"ts\":");
    p = jc_qraw(p, ts, ts_len);
    p = jc_lit(p, ",\"request_id\":");
    p = json_text(p, v, LT_REQUEST_ID);
    p = jc_lit(p, ",\"trace_id\":");
    p = jc_qraw(p, tid, 2 * TRACE_ID_BYTES);
    p = jc_lit(p, ",\"protocol\":");
    p = jc_qraw(p, proto_names[r->proto], strlen(proto_names[r->proto]));
    p = jc_lit(p, ",\"method\":");
    p = json_text(p, v, LT_METHOD);
    p = jc_lit(p, ",\"endpoint\":");
    p = json_text(p, v, LT_ENDPOINT);
    p = jc_lit(p, ",\"model\":");
    p = json_text_or_null(p, v, LT_MODEL);
    p = jc_lit(p, ",\"version\":");
    p = json_text_or_null(p, v, LT_VERSION);
    p = jc_lit(p, ",\"route\":");
    /* Route names are route_kind.h's fixed vocabulary: nothing to escape. */
    p = r->route ? jc_qraw(p, r->route, r->route_len) : jc_lit(p, "null");
    if (r->len[LT_TENANT]) {
        p = jc_lit(p, ",\"tenant\":");
        p = json_text(p, v, LT_TENANT);
    }
    if (r->len[LT_FINISH]) {
        p = jc_lit(p, ",\"prompt_tokens\":");
        p = jc_u64(p, r->prompt_tokens);
        p = jc_lit(p, ",\"completion_tokens\":");
        p = jc_u64(p, r->completion_tokens);
        p = jc_lit(p, ",\"finish_reason\":");
        if (v->text[LT_FINISH][0] == '-')
            p = jc_lit(p, "null");
        else
            p = json_text(p, v, LT_FINISH);
    }
    if (r->tokens_reserved) {
        p = jc_lit(p, ",\"tokens_reserved\":");
        p = jc_u64(p, r->tokens_reserved);
    }
    p = jc_lit(p, ",\"model_sha256\":");
    p = json_text_or_null(p, v, LT_SHA12);
    p = jc_lit(p, ",\"inputs\":");
    p = r->len[LT_INPUTS] ? jc_put(p, v->text[LT_INPUTS], r->len[LT_INPUTS]) : jc_lit(p, "[]");
    p = jc_lit(p, ",\"batch_size\":");
    p = jc_u64(p, r->batch_size);
    p = jc_lit(p, ",\"queue_us\":");
    p = jc_u64(p, us_between(r->enqueue_ns, r->exec_start_ns));
    p = jc_lit(p, ",\"compute_us\":");
    p = jc_u64(p, us_between(r->exec_start_ns, r->exec_end_ns));
    p = jc_lit(p, ",\"total_us\":");
    p = jc_u64(p, us_between(r->start_ns, r->end_ns));
    p = jc_lit(p, ",\"status\":");
    p = jc_i64(p, r->status);
    p = jc_lit(p, ",\"bytes_in\":");
    p = jc_u64(p, r->bytes_in);
    p = jc_lit(p, ",\"bytes_out\":");
    p = jc_u64(p, r->bytes_out);
    p = jc_lit(p, ",\"client\":");
    p = jc_qraw(p, v->text[LT_PEER], r->len[LT_PEER]);
    p = jc_lit(p, ",\"error\":");
    p = json_text_or_null(p, v, LT_ERROR);
    p = jc_lit(p, "}");
    return (size_t)(p - line);
}

/* Text values are single tokens: bytes outside 0x21-0x7e become '_'. */
static char *put_token(char *p, const char *key, const char *val, size_t n)
{
    *p++ = ' ';
    p = jc_put(p, key, strlen(key));
    *p++ = '=';
    if (!n)
        return jc_lit(p, "-");
    for (size_t i = 0; i < n; i++)
        *p++ = val[i] >= 0x21 && val[i] <= 0x7e ? val[i] : '_';
    return p;
}

static char *put_text_token(char *p, const char *key, const struct log_view *v, enum log_text t)
{
    return put_token(p, key, v->text[t], v->r.len[t]);
}

static char *put_number(char *p, const char *key, uint64_t val)
{
    *p++ = ' ';
    p = jc_put(p, key, strlen(key));
    *p++ = '=';
    return jc_u64(p, val);
}

static size_t write_text_line(const struct log_view *v, char *line, const char *ts,
                              size_t ts_len, const char *tid)
{
    const struct log_record *r = &v->r;
    char *p = jc_put(line, ts, ts_len);
    p = put_text_token(p, "request_id", v, LT_REQUEST_ID);
    p = put_token(p, "trace_id", tid, 2 * TRACE_ID_BYTES);
    p = put_token(p, "protocol", proto_names[r->proto], strlen(proto_names[r->proto]));
    p = put_text_token(p, "method", v, LT_METHOD);
    p = put_text_token(p, "endpoint", v, LT_ENDPOINT);
    p = put_text_token(p, "model", v, LT_MODEL);
    p = put_text_token(p, "version", v, LT_VERSION);
    p = put_token(p, "route", r->route, r->route ? r->route_len : 0);
    if (r->len[LT_TENANT])
        p = put_text_token(p, "tenant", v, LT_TENANT);
    if (r->len[LT_FINISH]) {
        p = put_number(p, "prompt_tokens", r->prompt_tokens);
        p = put_number(p, "completion_tokens", r->completion_tokens);
        p = put_text_token(p, "finish_reason", v, LT_FINISH);
    }
    if (r->tokens_reserved)
        p = put_number(p, "tokens_reserved", r->tokens_reserved);
    p = put_text_token(p, "model_sha256", v, LT_SHA12);
    p = put_text_token(p, "inputs", v, LT_INPUTS);
    p = put_number(p, "batch_size", r->batch_size);
    p = put_number(p, "queue_us", us_between(r->enqueue_ns, r->exec_start_ns));
    p = put_number(p, "compute_us", us_between(r->exec_start_ns, r->exec_end_ns));
    p = put_number(p, "total_us", us_between(r->start_ns, r->end_ns));
    p = jc_lit(p, " status=");
    p = jc_i64(p, r->status);
    p = put_number(p, "bytes_in", r->bytes_in);
    p = put_number(p, "bytes_out", r->bytes_out);
    p = put_text_token(p, "client", v, LT_PEER);
    p = put_text_token(p, "error", v, LT_ERROR);
    return (size_t)(p - line);
}

/* The access log's accesslog_format_fn for build_record's records (on the
 * writer thread). */
static size_t format_record(const void *data, size_t len, char *out)
{
    (void)len;
    struct log_view v;
    read_record(data, &v);
    char ts[40], tid[2 * TRACE_ID_BYTES + 1];
    size_t ts_len = format_time(ts, v.r.end_ns);
    span_hex(v.r.trace_id, TRACE_ID_BYTES, tid);
    return accesslog_format() == LOG_LINE_JSON ? write_json_line(&v, out, ts, ts_len, tid)
                                               : write_text_line(&v, out, ts, ts_len, tid);
}

/* ---- spans ------------------------------------------------------------------- */

static void record_spans(struct obsreq *o, int status, uint64_t bytes_out, uint64_t end_ns)
{
    struct span_record r;
    char name[192];
    size_t n = o->method_len; /* "METHOD /path", cut to the buffer */
    memcpy(name, o->method, n);
    name[n++] = ' ';
    size_t path = o->endpoint_len < sizeof name - n ? o->endpoint_len : sizeof name - n;
    memcpy(name + n, o->endpoint, path);
    n += path;
    span_init(&r, o->trace_id, o->span_id, o->has_parent ? o->parent_span_id : NULL,
              SPAN_KIND_SERVER, name, n, o->start_ns, end_ns);
    r.flags = (uint8_t)(o->flags | 1);
    if (o->tracestate[0])
        span_set_state(&r, o->tracestate, strlen(o->tracestate));
    span_attr_str(&r, "inferd.request_id", o->request_id, o->request_id_len);
    span_attr_str(&r, "inferd.protocol", proto_names[o->proto], strlen(proto_names[o->proto]));
    span_attr_str(&r, "http.request.method", o->method, o->method_len);
    span_attr_str(&r, "url.path", o->endpoint, o->endpoint_len);
    span_attr_int(&r, "http.response.status_code", status);
    span_attr_bool(&r, "inferd.remote_parent", o->has_parent);
    span_attr_double(&r, "inferd.sampling.rate", o->rate);
    if (o->model[0]) {
        span_attr_str(&r, "inferd.model.name", o->model, o->model_len);
        span_attr_str(&r, "inferd.model.version", o->version, o->version_len);
        if (o->route)
            span_attr_str(&r, "inferd.route", o->route, strlen(o->route));
    }
    if (o->tenant[0])
        span_attr_str(&r, "inferd.tenant", o->tenant, strlen(o->tenant));
    if (o->done)
        span_attr_int(&r, "inferd.batch_size", o->batch_size);
    if (status >= 500 || status == 0) {
        char msg[32];
        snprintf(msg, sizeof msg, status ? "HTTP %d" : "client went away", status);
        span_set_error(&r, msg);
    }
    if (o->req_trace.batch_linked)
        span_add_link(&r, o->req_trace.batch_trace_id, o->req_trace.batch_span_id);
    otlp_submit(&r);
    if (!o->done)
        return;
    /* Children: waiting in the queue, and encoding the response. */
    uint8_t id[SPAN_ID_BYTES];
    if (o->enqueue_ns) {
        static const char qname[] = "queue";
        uint64_t qend = o->exec_start_ns ? o->exec_start_ns : o->encode_start_ns;
        trace_new_span_id(id);
        span_init(&r, o->trace_id, id, o->span_id, SPAN_KIND_INTERNAL, qname, sizeof qname - 1,
                  o->enqueue_ns, qend);
        span_attr_str(&r, "inferd.model.name", o->model, o->model_len);
        otlp_submit(&r);
    }
    static const char ename[] = "encode response";
    trace_new_span_id(id);
    span_init(&r, o->trace_id, id, o->span_id, SPAN_KIND_INTERNAL, ename, sizeof ename - 1,
              o->encode_start_ns, end_ns);
    span_attr_int(&r, "inferd.response.bytes", (int64_t)bytes_out);
    otlp_submit(&r);
}

void obsreq_end(struct obsreq *o, int status, uint64_t bytes_out)
{
    if (!o)
        return;
    uint64_t end_ns = clock_now_ns();
    if (o->log)
        accesslog_write(format_record, tls_record,
                        build_record(o, status, bytes_out, end_ns, tls_record));
    if (o->traced)
        record_spans(o, status, bytes_out, end_ns);
    pool_put(o);
}
