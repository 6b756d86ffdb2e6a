#include "obs/request.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/mem.h"
#include "core/dtype.h"
#include "obs/accesslog.h"
#include "obs/otlp.h"

#define LINE_MAX_BYTES (16 * 1024)
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
    char request_id[REQUEST_ID_MAX + 1];
    char method[16];
    char endpoint[256];
    char peer[64];
    char model[256];
    char version[24];
    char sha12[13];
    char tracestate[TRACESTATE_MAX + 1];
    char inputs[INPUTS_MAX]; /* formatted for the access log's format */
    size_t inputs_len;
    struct buf line; /* the access log line, reused */
};

static _Thread_local struct obsreq *tls_free;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obsreq *all_objects;

static const char *const proto_names[] = {"http/1.1", "http/1.0", "h2", "grpc"};

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
    trace_hex(raw, sizeof raw, out);
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
    buf_init(&o->line, LINE_MAX_BYTES);
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
        buf_free(&o->line);
        mem_free(o);
        o = next;
    }
    tls_free = NULL;
}

static void copy_str(char *dst, size_t cap, const char *s, size_t n)
{
    if (!s)
        n = 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, s, n);
    dst[n] = '\0';
}

struct obsreq *obsreq_begin(const struct obsreq_start *s)
{
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
    copy_str(o->request_id, sizeof o->request_id, s->request_id, s->request_id_len);
    copy_str(o->method, sizeof o->method, s->method, s->method_len);
    copy_str(o->endpoint, sizeof o->endpoint, s->endpoint, s->endpoint_len);
    o->peer[0] = '\0';
    if (log && s->peer)
        s->peer(s->peer_ctx, o->peer, sizeof o->peer);
    o->model[0] = o->version[0] = o->sha12[0] = '\0';
    o->inputs_len = 0;
    return o;
}

void obsreq_set_model(struct obsreq *o, const char *name, const char *version,
                      const char *sha256)
{
    if (!o)
        return;
    copy_str(o->model, sizeof o->model, name, name ? strlen(name) : 0);
    copy_str(o->version, sizeof o->version, version, version ? strlen(version) : 0);
    copy_str(o->sha12, sizeof o->sha12, sha256, sha256 ? strlen(sha256) : 0);
    double rate;
    int d = trace_sample_model(o->model, o->has_parent ? &o->parent : NULL, &rate);
    if (d >= 0) {
        o->traced = d == 1;
        o->rate = rate;
    }
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

/* Escapes s for a JSON string into out (at most cap bytes, whole escapes
 * only, truncating a long name); returns the bytes written. Names come from
 * the model, so bytes >= 0x80 pass as they are. */
static size_t json_escape_short(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && n + 6 < cap; c++) {
        if (*c == '"' || *c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*c;
        } else if (*c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", *c);
        } else {
            out[n++] = (char)*c;
        }
    }
    return n;
}

/* The inputs as the access log shows them: JSON [{"name","datatype",
 * "shape"}] or text name:DATATYPE:[d,d];... Stops at a whole element when
 * the space runs out. */
static void format_inputs(struct obsreq *o, const struct infer_request *req, bool json)
{
    size_t len = 0;
    char *p = o->inputs;
    if (json)
        p[len++] = '[';
    for (uint32_t i = 0; i < req->ninputs; i++) {
        const struct tensor *t = &req->inputs[i];
        char el[512];
        size_t n = 0;
        if (json) {
            n = (size_t)snprintf(el, sizeof el, "%s{\"name\":\"", i ? "," : "");
            n += json_escape_short(el + n, 300, t->name);
            n += (size_t)snprintf(el + n, sizeof el - n, "\",\"datatype\":\"%s\",\"shape\":[",
                                  dtype_name(t->dtype));
        } else {
            n = (size_t)snprintf(el, sizeof el, "%s%.200s:%s:[", i ? ";" : "", t->name,
                                 dtype_name(t->dtype));
        }
        for (uint32_t d = 0; d < t->ndim && n < sizeof el - 32; d++)
            n += (size_t)snprintf(el + n, sizeof el - n, "%s%lld", d ? "," : "",
                                  (long long)t->shape[d]);
        n += (size_t)snprintf(el + n, sizeof el - n, json ? "]}" : "]");
        if (n >= sizeof el || len + n + 2 > sizeof o->inputs)
            break;
        memcpy(p + len, el, n);
        len += n;
    }
    if (json)
        p[len++] = ']';
    o->inputs_len = len;
}

void obsreq_infer_done(struct obsreq *o, const struct infer_request *req)
{
    if (!o)
        return;
    o->done = true;
    o->encode_start_ns = clock_now_ns();
    o->enqueue_ns = req->enqueue_ns;
    o->exec_start_ns = req->exec_start_ns;
    o->exec_end_ns = req->exec_end_ns;
    o->batch_size = req->batch_size;
    o->req_trace = req->trace;
    if (o->log)
        format_inputs(o, req, accesslog_format() == LOG_LINE_JSON);
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

static void format_time(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
}

static uint64_t us_between(uint64_t a, uint64_t b)
{
    return a && b > a ? (b - a) / 1000u : 0;
}

static void w_str_or_null(struct json_writer *w, const char *s)
{
    if (*s)
        json_w_cstr(w, s);
    else
        json_w_null(w);
}

static void write_json_line(struct obsreq *o, const char *ts, const char *tid, int status,
                            uint64_t bytes_out, uint64_t end_ns)
{
    struct json_writer w;
    json_w_init(&w, &o->line);
    json_w_obj_begin(&w);
    json_w_key(&w, "ts");
    json_w_cstr(&w, ts);
    json_w_key(&w, "request_id");
    json_w_cstr(&w, o->request_id);
    json_w_key(&w, "trace_id");
    json_w_cstr(&w, tid);
    json_w_key(&w, "protocol");
    json_w_cstr(&w, proto_names[o->proto]);
    json_w_key(&w, "method");
    json_w_cstr(&w, o->method);
    json_w_key(&w, "endpoint");
    json_w_cstr(&w, o->endpoint);
    json_w_key(&w, "model");
    w_str_or_null(&w, o->model);
    json_w_key(&w, "version");
    w_str_or_null(&w, o->version);
    json_w_key(&w, "model_sha256");
    w_str_or_null(&w, o->sha12);
    json_w_key(&w, "inputs");
    if (o->inputs_len)
        json_w_raw(&w, o->inputs, o->inputs_len);
    else
        json_w_raw(&w, "[]", 2);
    json_w_key(&w, "batch_size");
    json_w_uint(&w, o->batch_size);
    json_w_key(&w, "queue_us");
    json_w_uint(&w, us_between(o->enqueue_ns, o->exec_start_ns));
    json_w_key(&w, "compute_us");
    json_w_uint(&w, us_between(o->exec_start_ns, o->exec_end_ns));
    json_w_key(&w, "total_us");
    json_w_uint(&w, us_between(o->start_ns, end_ns));
    json_w_key(&w, "status");
    json_w_int(&w, status);
    json_w_key(&w, "bytes_in");
    json_w_uint(&w, o->bytes_in);
    json_w_key(&w, "bytes_out");
    json_w_uint(&w, bytes_out);
    json_w_key(&w, "client");
    json_w_cstr(&w, o->peer);
    json_w_obj_end(&w);
}

/* Text values are single tokens: bytes outside 0x21-0x7e become '_'. */
static void put_token(struct buf *b, const char *key, const char *v)
{
    buf_printf(b, " %s=", key);
    if (!*v) {
        buf_putc(b, '-');
        return;
    }
    for (const char *c = v; *c; c++)
        buf_putc(b, *c >= 0x21 && *c <= 0x7e ? *c : '_');
}

static void write_text_line(struct obsreq *o, const char *ts, const char *tid, int status,
                            uint64_t bytes_out, uint64_t end_ns)
{
    struct buf *b = &o->line;
    buf_puts(b, ts);
    put_token(b, "request_id", o->request_id);
    put_token(b, "trace_id", tid);
    put_token(b, "protocol", proto_names[o->proto]);
    put_token(b, "method", o->method);
    put_token(b, "endpoint", o->endpoint);
    put_token(b, "model", o->model);
    put_token(b, "version", o->version);
    put_token(b, "model_sha256", o->sha12);
    char inputs[INPUTS_MAX + 1];
    copy_str(inputs, sizeof inputs, o->inputs, o->inputs_len);
    put_token(b, "inputs", inputs);
    buf_printf(b, " batch_size=%u queue_us=%llu compute_us=%llu total_us=%llu status=%d "
                  "bytes_in=%llu bytes_out=%llu",
               o->batch_size, (unsigned long long)us_between(o->enqueue_ns, o->exec_start_ns),
               (unsigned long long)us_between(o->exec_start_ns, o->exec_end_ns),
               (unsigned long long)us_between(o->start_ns, end_ns), status,
               (unsigned long long)o->bytes_in, (unsigned long long)bytes_out);
    put_token(b, "client", o->peer);
}

/* ---- spans ------------------------------------------------------------------- */

static void record_spans(struct obsreq *o, int status, uint64_t bytes_out, uint64_t end_ns)
{
    struct span_record r;
    char name[192];
    int n = snprintf(name, sizeof name, "%s %s", o->method, o->endpoint);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof name)
        n = sizeof name - 1;
    span_init(&r, o->trace_id, o->span_id, o->has_parent ? o->parent_span_id : NULL,
              SPAN_KIND_SERVER, name, (size_t)n, o->start_ns, end_ns);
    r.flags = (uint8_t)(o->flags | 1);
    if (o->tracestate[0])
        span_set_state(&r, o->tracestate, strlen(o->tracestate));
    span_attr_str(&r, "inferd.request_id", o->request_id, strlen(o->request_id));
    span_attr_str(&r, "inferd.protocol", proto_names[o->proto], strlen(proto_names[o->proto]));
    span_attr_str(&r, "http.request.method", o->method, strlen(o->method));
    span_attr_str(&r, "url.path", o->endpoint, strlen(o->endpoint));
    span_attr_int(&r, "http.response.status_code", status);
    span_attr_bool(&r, "inferd.remote_parent", o->has_parent);
    span_attr_double(&r, "inferd.sampling.rate", o->rate);
    if (o->model[0]) {
        span_attr_str(&r, "inferd.model.name", o->model, strlen(o->model));
        span_attr_str(&r, "inferd.model.version", o->version, strlen(o->version));
    }
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
        span_attr_str(&r, "inferd.model.name", o->model, strlen(o->model));
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
    trace_hex(o->trace_id, TRACE_ID_BYTES, tid);
    if (o->log) {
        char ts[40];
        format_time(ts, sizeof ts);
        buf_reset(&o->line);
        if (accesslog_format() == LOG_LINE_JSON)
            write_json_line(o, ts, tid, status, bytes_out, end_ns);
        else
            write_text_line(o, ts, tid, status, bytes_out, end_ns);
        if (!o->line.err)
            accesslog_write(o->line.data, o->line.len);
    }
    if (o->traced)
        record_spans(o, status, bytes_out, end_ns);
    pool_put(o);
}
