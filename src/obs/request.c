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

#define LINE_MAX_BYTES 8192 /* every field at its longest, escaped, fits */
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
    char tenant[OBSREQ_TENANT_MAX + 1]; /* "" = none */
    /* A generative model's request (obsreq_set_generation); finish "" = none. */
    uint32_t prompt_tokens, completion_tokens;
    char finish_reason[OBSREQ_FINISH_MAX + 1];
    uint64_t tokens_reserved; /* obsreq_set_tokens_reserved; 0 = none */
    char tracestate[TRACESTATE_MAX + 1];
    char inputs[INPUTS_MAX]; /* formatted for the access log's format */
    char error[ERROR_MSG_MAX]; /* the error answer's message; error_len 0: none */
};

/* The access log line being formatted (copied out by accesslog_write). */
static _Thread_local char tls_line[LINE_MAX_BYTES];

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
    if (o)
        o->route = route_kind_name(route);
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

/* The inputs as the access log shows them: JSON [{"name","datatype",
 * "shape"}] or text name:DATATYPE:[d,d];... Stops at a whole element when
 * the space runs out. */
static void format_inputs(struct obsreq *o, const struct infer_request *req, bool json)
{
    struct jline l;
    jl_init(&l, o->inputs, sizeof o->inputs - 1); /* room for the closing ']' */
    if (json)
        jl_lit(&l, "[");
    for (uint32_t i = 0; i < req->ninputs; i++) {
        const struct tensor *t = &req->inputs[i];
        size_t mark = l.n;
        size_t name_len = strnlen(t->name, 200);
        const char *dt = dtype_name(t->dtype);
        if (i)
            jl_put(&l, json ? "," : ";", 1);
        if (json) {
            jl_lit(&l, "{\"name\":");
            jl_str(&l, t->name, name_len);
            jl_lit(&l, ",\"datatype\":");
            jl_qraw(&l, dt, strlen(dt));
            jl_lit(&l, ",\"shape\":[");
        } else {
            jl_put(&l, t->name, name_len);
            jl_lit(&l, ":");
            jl_put(&l, dt, strlen(dt));
            jl_lit(&l, ":[");
        }
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (d)
                jl_lit(&l, ",");
            jl_i64(&l, t->shape[d]);
        }
        jl_put(&l, json ? "]}" : "]", json ? 2 : 1);
        if (l.overflow) { /* drop the element that did not fit */
            l.n = mark;
            l.overflow = false;
            break;
        }
    }
    l.cap++; /* the reserved byte */
    if (json)
        jl_lit(&l, "]");
    o->inputs_len = (uint16_t)l.n;
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

/* ---- access log line ------------------------------------------------------ */

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

static void jl_str_or_null(struct jline *l, const char *s, size_t n)
{
    if (n)
        jl_str(l, s, n);
    else
        jl_lit(l, "null");
}

static void write_json_line(struct obsreq *o, struct jline *l, const char *ts, size_t ts_len,
                            const char *tid, int status, uint64_t bytes_out, uint64_t end_ns)
{
    jl_lit(l, "{\"ts\":");
    jl_qraw(l, ts, ts_len);
    jl_lit(l, ",\"request_id\":");
    jl_str(l, o->request_id, o->request_id_len);
    jl_lit(l, ",\"trace_id\":");
    jl_qraw(l, tid, 2 * TRACE_ID_BYTES);
    jl_lit(l, ",\"protocol\":");
    jl_qraw(l, proto_names[o->proto], strlen(proto_names[o->proto]));
    jl_lit(l, ",\"method\":");
    jl_str(l, o->method, o->method_len);
    jl_lit(l, ",\"endpoint\":");
    jl_str(l, o->endpoint, o->endpoint_len);
    jl_lit(l, ",\"model\":");
    jl_str_or_null(l, o->model, o->model_len);
    jl_lit(l, ",\"version\":");
    jl_str_or_null(l, o->version, o->version_len);
    jl_lit(l, ",\"route\":");
    jl_str_or_null(l, o->route, o->route ? strlen(o->route) : 0);
    if (o->tenant[0]) {
        jl_lit(l, ",\"tenant\":");
        jl_str(l, o->tenant, strlen(o->tenant));
    }
    if (o->finish_reason[0]) {
        jl_lit(l, ",\"prompt_tokens\":");
        jl_u64(l, o->prompt_tokens);
        jl_lit(l, ",\"completion_tokens\":");
        jl_u64(l, o->completion_tokens);
        jl_lit(l, ",\"finish_reason\":");
        if (o->finish_reason[0] == '-')
            jl_lit(l, "null");
        else
            jl_str(l, o->finish_reason, strlen(o->finish_reason));
    }
    if (o->tokens_reserved) {
        jl_lit(l, ",\"tokens_reserved\":");
        jl_u64(l, o->tokens_reserved);
    }
    jl_lit(l, ",\"model_sha256\":");
    jl_str_or_null(l, o->sha12, o->sha12_len);
    jl_lit(l, ",\"inputs\":");
    if (o->inputs_len)
        jl_put(l, o->inputs, o->inputs_len);
    else
        jl_lit(l, "[]");
    jl_lit(l, ",\"batch_size\":");
    jl_u64(l, o->batch_size);
    jl_lit(l, ",\"queue_us\":");
    jl_u64(l, us_between(o->enqueue_ns, o->exec_start_ns));
    jl_lit(l, ",\"compute_us\":");
    jl_u64(l, us_between(o->exec_start_ns, o->exec_end_ns));
    jl_lit(l, ",\"total_us\":");
    jl_u64(l, us_between(o->start_ns, end_ns));
    jl_lit(l, ",\"status\":");
    jl_i64(l, status);
    jl_lit(l, ",\"bytes_in\":");
    jl_u64(l, o->bytes_in);
    jl_lit(l, ",\"bytes_out\":");
    jl_u64(l, bytes_out);
    jl_lit(l, ",\"client\":");
    jl_qraw(l, o->peer, o->peer_len);
    jl_lit(l, ",\"error\":");
    jl_str_or_null(l, o->error, o->error_len);
    jl_lit(l, "}");
}

/* Text values are single tokens: bytes outside 0x21-0x7e become '_'. */
static void put_token(struct jline *l, const char *key, const char *v, size_t n)
{
    jl_lit(l, " ");
    jl_put(l, key, strlen(key));
    jl_lit(l, "=");
    if (!n) {
        jl_lit(l, "-");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char c = v[i] >= 0x21 && v[i] <= 0x7e ? v[i] : '_';
        jl_put(l, &c, 1);
    }
}

static void put_number(struct jline *l, const char *key, uint64_t v)
{
    jl_lit(l, " ");
    jl_put(l, key, strlen(key));
    jl_lit(l, "=");
    jl_u64(l, v);
}

static void write_text_line(struct obsreq *o, struct jline *l, const char *ts, size_t ts_len,
                            const char *tid, int status, uint64_t bytes_out, uint64_t end_ns)
{
    jl_put(l, ts, ts_len);
    put_token(l, "request_id", o->request_id, o->request_id_len);
    put_token(l, "trace_id", tid, 2 * TRACE_ID_BYTES);
    put_token(l, "protocol", proto_names[o->proto], strlen(proto_names[o->proto]));
    put_token(l, "method", o->method, o->method_len);
    put_token(l, "endpoint", o->endpoint, o->endpoint_len);
    put_token(l, "model", o->model, o->model_len);
    put_token(l, "version", o->version, o->version_len);
    put_token(l, "route", o->route, o->route ? strlen(o->route) : 0);
    if (o->tenant[0])
        put_token(l, "tenant", o->tenant, strlen(o->tenant));
    if (o->finish_reason[0]) {
        put_number(l, "prompt_tokens", o->prompt_tokens);
        put_number(l, "completion_tokens", o->completion_tokens);
        put_token(l, "finish_reason", o->finish_reason, strlen(o->finish_reason));
    }
    if (o->tokens_reserved)
        put_number(l, "tokens_reserved", o->tokens_reserved);
    put_token(l, "model_sha256", o->sha12, o->sha12_len);
    put_token(l, "inputs", o->inputs, o->inputs_len);
    put_number(l, "batch_size", o->batch_size);
    put_number(l, "queue_us", us_between(o->enqueue_ns, o->exec_start_ns));
    put_number(l, "compute_us", us_between(o->exec_start_ns, o->exec_end_ns));
    put_number(l, "total_us", us_between(o->start_ns, end_ns));
    jl_lit(l, " status=");
    jl_i64(l, status);
    put_number(l, "bytes_in", o->bytes_in);
    put_number(l, "bytes_out", bytes_out);
    put_token(l, "client", o->peer, o->peer_len);
    put_token(l, "error", o->error, o->error_len);
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
    char tid[2 * TRACE_ID_BYTES + 1];
    span_hex(o->trace_id, TRACE_ID_BYTES, tid);
    if (o->log) {
        char ts[40];
        size_t ts_len = format_time(ts, end_ns);
        struct jline l;
        jl_init(&l, tls_line, sizeof tls_line);
        if (accesslog_format() == LOG_LINE_JSON)
            write_json_line(o, &l, ts, ts_len, tid, status, bytes_out, end_ns);
        else
            write_text_line(o, &l, ts, ts_len, tid, status, bytes_out, end_ns);
        if (!l.overflow)
            accesslog_write(l.p, l.n);
    }
    if (o->traced)
        record_spans(o, status, bytes_out, end_ns);
    pool_put(o);
}
