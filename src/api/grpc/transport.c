#include "api/grpc/call.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api/grpc/infer_pb.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/probe.h"
#include "base/status.h"

/* Call objects kept per I/O thread for reuse. */
#define POOL_MAX 256
/* A reused call keeps a message buffer up to this size. */
#define CALL_KEEP_BUFFER (64 * 1024)
/* Largest response message (the output queue of a stream is bounded too). */
#define MAX_RESPONSE_BYTES ((size_t)1 << 30)

/* ---- helpers ------------------------------------------------------------ */

int grpc_status_from_http(int status)
{
    switch (status) {
    case 0:
    case 200:
        return GRPC_OK;
    case 400:
        return GRPC_INVALID_ARGUMENT;
    case 401:
        return GRPC_UNAUTHENTICATED;
    case 403:
        return GRPC_PERMISSION_DENIED;
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
    case 502: /* a gateway's upstream failed (gRPC's own HTTP mapping) */
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
    case GRPC_PERMISSION_DENIED:
        return 403;
    case GRPC_UNAUTHENTICATED:
        return 401;
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
        return ST_ERROR;
    uint64_t v = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return ST_ERROR;
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
        return ST_ERROR;
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

void grpc_call_hold(struct grpc_call *call)
{
    call->refs++;
}

void grpc_call_drop(struct grpc_call *call)
{
    if (--call->refs == 0)
        call_put(call);
}

bool grpc_call_is_stream(const struct grpc_call *call)
{
    return call->method && call->method->client_stream;
}

/* ---- access log and tracing ----------------------------------------------- */

static size_t call_peer(const void *ctx, char *out, size_t cap)
{
    const struct grpc_call *call = ctx;
    return call->conn ? call->wire->peer(call->conn, out, cap) : 0;
}

/* An observer for one request of the call (obs/request.h): NULL when
 * neither the access log nor the tracer wants it, or the stream is gone. */
struct obsreq *grpc_obs_begin(struct grpc_call *call, const char *id, size_t id_len,
                              uint64_t bytes_in, uint64_t start_ns)
{
    if (!call->conn)
        return NULL;
    const struct grpc_wire *w = call->wire;
    struct obsreq_start s = {
        .proto = w->proto,
        .method = "POST",
        .method_len = 4,
        .request_id = id,
        .request_id_len = id_len,
        .bytes_in = bytes_in,
        .start_ns = start_ns,
        .peer = call_peer,
        .peer_ctx = call,
    };
    s.endpoint = w->path(call->conn, &s.endpoint_len);
    s.traceparent = w->header(call->conn, "traceparent", &s.traceparent_len);
    s.tracestate = w->header(call->conn, "tracestate", &s.tracestate_len);
    return obsreq_begin(&s);
}

/* The observer of a call other than ModelStreamInfer, decided once: when
 * its request message is complete, or when the call ends before that. */
static void call_obs_begin(struct grpc_call *call)
{
    if (call->obs_begun)
        return;
    call->obs_begun = true;
    call->obs = grpc_obs_begin(call, call->request_id, call->request_id_len, call->msg.len,
                               call->received_ns);
    obsreq_set_tenant(call->obs, call->tenant);
}

void grpc_call_obs_end(struct grpc_call *call, int http_status)
{
    INFERD_PROBE_3(response_written, call->request_id, http_status, call->bytes_out);
    obsreq_end(call->obs, http_status, call->bytes_out);
    call->obs = NULL;
}

/* ModelStreamInfer: the observer of one request message; its request id is
 * the message's `id` when that is a valid request id, else a new one. */
struct obsreq *grpc_message_obs_begin(struct grpc_call *call, const char *msg_id, uint64_t bytes_in,
                                      uint64_t start_ns)
{
    char id[REQUEST_ID_MAX + 1];
    size_t n = request_id_resolve(msg_id, msg_id ? strlen(msg_id) : 0, id);
    return grpc_obs_begin(call, id, n, bytes_in, start_ns);
}

/* ---- responding --------------------------------------------------------- */

/* Most headers initial_metadata() writes. */
#define INITIAL_METADATA_MAX 8

/* The response's initial metadata: content-type, x-request-id, when the
 * call is traced traceparent, and on a ModelInfer call that resolved a
 * model x-inferd-model-version and x-inferd-route (as REST's headers),
 * and the ratelimit-* entries when a rate limit applied to it.
 * Writes up to INITIAL_METADATA_MAX headers; returns how many. */
static size_t initial_metadata(const struct grpc_call *call, struct h2_header *h,
                               char tp[TRACEPARENT_LEN + 1])
{
    size_t n = 0;
    h[n++] = hdr("content-type", "application/grpc");
    h[n++] = (struct h2_header){"x-request-id", 12, call->request_id, call->request_id_len};
    if (obsreq_traceparent(call->obs, tp))
        h[n++] = (struct h2_header){"traceparent", 11, tp, TRACEPARENT_LEN};
    if (call->route) {
        h[n++] = hdr("x-inferd-model-version", call->model_version);
        h[n++] = hdr("x-inferd-route", call->route);
    }
    if (call->ratelimit_limit[0]) {
        h[n++] = hdr("ratelimit-limit", call->ratelimit_limit);
        h[n++] = hdr("ratelimit-remaining", call->ratelimit_remaining);
        h[n++] = hdr("ratelimit-reset", call->ratelimit_reset);
    }
    return n;
}

static int send_headers(struct grpc_call *call)
{
    if (call->headers_sent)
        return 0;
    struct h2_header h[INITIAL_METADATA_MAX];
    char tp[TRACEPARENT_LEN + 1];
    size_t n = initial_metadata(call, h, tp);
    if (call->wire->respond_headers(call->conn, h, n) != 0)
        return ST_ERROR;
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
    if (!call->conn || call->finished)
        return;
    call->finished = true;
    call->http_status = http_status;
    if (!grpc_call_is_stream(call)) {
        call_obs_begin(call);
        if (code != GRPC_OK)
            obsreq_set_error(call->obs, msg);
    } else if (code != GRPC_OK) {
        struct obsreq *o = grpc_obs_begin(call, call->request_id, call->request_id_len,
                                          call->msg.len, call->received_ns);
        obsreq_set_error(o, msg);
        obsreq_end(o, http_status, 0);
    }
    char status[8], encoded[3 * ERROR_MSG_MAX + 1], tp[TRACEPARENT_LEN + 1];
    snprintf(status, sizeof status, "%d", code);
    struct h2_header t[INITIAL_METADATA_MAX + 4];
    size_t n = 0;
    if (!call->headers_sent)
        n = initial_metadata(call, t, tp);
    t[n++] = hdr("grpc-status", status);
    if (code != GRPC_OK && msg && msg[0]) {
        grpc_message_encode(msg, encoded, sizeof encoded);
        t[n++] = hdr("grpc-message", encoded);
    }
    if (code != GRPC_OK && call->retry_after[0]) {
        t[n++] = hdr("retry-after", call->retry_after);
        t[n++] = hdr("grpc-retry-pushback-ms", call->retry_pushback_ms);
    }
    bool sent = call->wire->finish(call->conn, t, n) == 0;
    if (!sent && call->conn && call->wire->abort)
        call->wire->abort(call->conn);
    grpc_call_obs_end(call, sent ? http_status : 0);
    if (call->wire->finish_closes && call->conn)
        grpc_call_closed(call);
}

void grpc_call_finish(struct grpc_call *call, int code, const char *msg)
{
    call_end(call, code, http_status_from_grpc(code), msg);
}

/* Ends the call with the gRPC status matching an inferd error. */
void grpc_call_fail(struct grpc_call *call, int http_status, const char *msg)
{
    call_end(call, grpc_status_from_http(http_status), http_status, msg);
}

/* Serializes msg as one gRPC message and queues it on the stream; returns
 * its size. On failure the call is ended (RESOURCE_EXHAUSTED); returns -1. */
int64_t grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
    struct grpc_api *api = call->api;
    if (!call->conn || call->finished)
        return ST_ERROR;
    size_t n = protobuf_c_message_get_packed_size(msg);
    buf_reset(&api->out);
    if (n > MAX_RESPONSE_BYTES - FRAME_HEADER || buf_reserve(&api->out, FRAME_HEADER + n) != 0) {
        call_end(call, GRPC_RESOURCE_EXHAUSTED, 500, "response message too large");
        return ST_ERROR;
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
        rc = call->wire->write(call->conn, p, api->out.len);
    if (api->out.cap > CALL_KEEP_BUFFER * 16)
        buf_free(&api->out);
    if (rc != 0) {
        /* The client does not read what it asked for (output queue full). */
        grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "response queue of the stream is full");
        return ST_ERROR;
    }
    call->bytes_out += n;
    return (int64_t)n;
}

/* A unary response: the message, then status OK. */
void grpc_call_reply(struct grpc_call *call, const ProtobufCMessage *msg)
{
    if (grpc_call_send(call, msg) >= 0)
        grpc_call_finish(call, GRPC_OK, NULL);
}

/* Unpacks a request message into the api's scratch arena; answers the
 * call itself on failure (NULL). */
void *grpc_call_unpack(struct grpc_call *call, const ProtobufCMessageDescriptor *d,
                       const uint8_t *data, size_t len)
{
    struct infer_pb_allocator a;
    infer_pb_allocator_init(&a, &call->api->scratch);
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, &a.base, len, data);
    if (!msg) {
        char text[ERROR_MSG_MAX];
        snprintf(text, sizeof text, "malformed %s message", d->short_name);
        grpc_call_fail(call, a.failed ? 413 : 400, text);
    }
    return msg;
}

/* ---- calls on a wire ---------------------------------------------------- */

/* The method at path in the services' tables, or NULL. */
static const struct grpc_method *find_method(const struct grpc_api *api, const char *path,
                                             size_t len)
{
    for (size_t k = 0; k < api->nservices; k++) {
        const struct grpc_service *svc = api->services[k];
        for (size_t i = 0; i < svc->nmethods; i++) {
            const struct grpc_method *m = &svc->methods[i];
            if (strlen(m->path) == len && memcmp(m->path, path, len) == 0)
                return m;
        }
    }
    return NULL;
}

static const char *call_metadata(const void *ctx, const char *name, size_t *len)
{
    const struct grpc_call *call = ctx;
    return call->conn ? call->wire->header(call->conn, name, len) : NULL;
}

/* Whether the call may go on (policy/auth.h); else it was ended. An
 * unknown method needs `read`, as an unknown REST path does: a client
 * without a key learns nothing from a "method not implemented" answer. */
static bool authorized(struct grpc_call *call)
{
    struct auth_result res;
    struct error err;
    enum auth_class cls = call->method ? call->method->auth : AUTH_READ;
    int rc = auth_check(call->api->auth, cls, NULL, call_metadata, call, &res, &err);
    memcpy(call->tenant, res.tenant, sizeof call->tenant);
    if (rc == 0)
        return true;
    grpc_call_fail(call, err.status, err.msg);
    return false;
}

/* The call's grpc-encoding: messages compressed with gzip or deflate are
 * decompressed (as Triton's gRPC core does); another encoding is refused
 * (false: the call is answered). */
static bool accept_encoding(struct grpc_call *call)
{
    size_t len = 0;
    const char *enc = call->wire->header(call->conn, "grpc-encoding", &len);
    if (!enc || (len == 8 && memcmp(enc, "identity", 8) == 0))
        return true;
    int f = inflate_format_of(enc, len);
    if (f < 0) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "grpc-encoding '%.*s' is not supported (gzip, deflate and identity are)",
                 (int)(len < 64 ? len : 64), enc);
        grpc_call_finish(call, GRPC_UNIMPLEMENTED, msg);
        return false;
    }
    call->encoding = (enum inflate_format)f;
    call->rd.compressed_ok = true;
    return true;
}

/* A compressed message in call->msg replaced by its decompressed bytes
 * (at most --grpc-max-message-bytes). false: the call is answered. */
static bool decompress(struct grpc_call *call)
{
    struct buf plain;
    struct error err;
    buf_init(&plain, call->api->max_message_bytes);
    if (inflate_all(call->encoding, (const uint8_t *)call->msg.data, call->msg.len, &plain,
                    &err) != 0) {
        buf_free(&plain);
        char msg[ERROR_MSG_MAX];
        if (err.status == 413) {
            snprintf(msg, sizeof msg,
                     "request message exceeds the limit of %" PRIu64
                     " bytes once decompressed (--grpc-max-message-bytes)",
                     call->api->max_message_bytes);
            call_end(call, GRPC_RESOURCE_EXHAUSTED, 413, msg);
        } else {
            snprintf(msg, sizeof msg, "cannot decompress the request message: %.200s", err.msg);
            grpc_call_finish(call, err.status == 500 ? GRPC_RESOURCE_EXHAUSTED : GRPC_INTERNAL,
                             msg);
        }
        return false;
    }
    buf_free(&call->msg);
    call->msg = plain;
    return true;
}

struct grpc_call *grpc_call_open(struct grpc_api *api, const struct grpc_wire *wire, void *conn,
                                 void (*set_user)(void *conn, struct grpc_call *call))
{
    struct grpc_call *call = call_get(api);
    if (!call)
        return NULL;
    call->wire = wire;
    call->conn = conn;
    call->received_ns = clock_now_ns();
    size_t id_len = 0;
    const char *id = wire->header(conn, "x-request-id", &id_len);
    call->request_id_len = request_id_resolve(id, id_len, call->request_id);
    set_user(conn, call);
    call->next = api->calls;
    if (api->calls)
        api->calls->prev = call;
    api->calls = call;
    grpc_call_hold(call);

    size_t plen = 0, mlen = 0;
    const char *path = wire->path(conn, &plen);
    const char *method = wire->method(conn, &mlen);
    call->method = path ? find_method(api, path, plen) : NULL;
    INFERD_PROBE_4(request_begin, call->request_id, path, plen, (uint64_t)0);
    const char *timeout;
    size_t tlen = 0;
    if (!authorized(call)) {
    } else if (!call->method) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "unknown method %.*s", (int)(plen < 200 ? plen : 200),
                 path ? path : "");
        grpc_call_finish(call, GRPC_UNIMPLEMENTED, msg);
    } else if (!method || mlen != 4 || memcmp(method, "POST", 4) != 0) {
        grpc_call_finish(call, GRPC_UNIMPLEMENTED, "gRPC calls use POST");
    } else if (!accept_encoding(call)) {
    } else if ((timeout = wire->header(conn, "grpc-timeout", &tlen)) != NULL) {
        uint64_t ns;
        if (grpc_timeout_parse(timeout, tlen, &ns) != 0)
            grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "malformed grpc-timeout header");
        else
            call->deadline_ns =
                ns > UINT64_MAX - call->received_ns ? UINT64_MAX : call->received_ns + ns;
    }
    return call;
}

/* Handles the request message of a unary (or server-streaming) call, or one
 * message of a ModelStreamInfer stream. */
static void dispatch(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (!call->method->client_stream)
        call_obs_begin(call);
    call->method->on_message(call, data, len);
    arena_reset(&call->api->scratch);
}

static void message_complete(struct grpc_call *call)
{
    call->nmessages++;
    if (call->method->client_stream) {
        dispatch(call, (const uint8_t *)call->msg.data, call->msg.len);
        buf_reset(&call->msg);
    } else if (call->nmessages > 1) {
        grpc_call_finish(call, GRPC_INVALID_ARGUMENT,
                         "more than one request message for a unary call");
    }
}

void grpc_call_data(struct grpc_call *call, const uint8_t *data, size_t len)
{
    grpc_call_hold(call);
    while (len && !call->finished) {
        enum grpc_read r =
            grpc_reader_feed(&call->rd, &call->msg, call->api->max_message_bytes, &data, &len);
        if (r == GRPC_READ_MESSAGE) {
            if (call->rd.compressed && !decompress(call))
                break;
            message_complete(call);
            continue;
        }
        if (r == GRPC_READ_COMPRESSED) {
            grpc_call_finish(call, GRPC_INTERNAL,
                             "a compressed message without a grpc-encoding header");
        } else if (r == GRPC_READ_BAD_FLAGS) {
            grpc_call_finish(call, GRPC_INTERNAL, "invalid gRPC message flags");
        } else if (r == GRPC_READ_TOO_LARGE) {
            char msg[ERROR_MSG_MAX];
            snprintf(msg, sizeof msg,
                     "request message of %" PRIu32 " bytes exceeds the limit of %" PRIu64
                     " bytes (--grpc-max-message-bytes)",
                     call->rd.msg_len, call->api->max_message_bytes);
            call_end(call, GRPC_RESOURCE_EXHAUSTED, 413, msg);
        } else if (r == GRPC_READ_NO_MEMORY) {
            grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED,
                             "out of memory for the request message");
        }
        break;
    }
    grpc_call_drop(call);
}

void grpc_call_request_end(struct grpc_call *call)
{
    grpc_call_hold(call);
    call->client_ended = true;
    if (call->finished) {
    } else if (grpc_reader_inside(&call->rd)) {
        grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "the request ended inside a message");
    } else if (call->method->client_stream) {
        if (call->method->on_client_end)
            call->method->on_client_end(call);
    } else if (call->nmessages == 0) {
        grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "no request message");
    } else {
        dispatch(call, (const uint8_t *)call->msg.data, call->msg.len);
    }
    grpc_call_drop(call);
}

void grpc_call_closed(struct grpc_call *call)
{
    struct grpc_api *api = call->api;
    call->conn = NULL;
    call->finished = true;
    if (call->prev)
        call->prev->next = call->next;
    else
        api->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    /* A request in flight logs the call when it comes back (with its
     * timings); else the call is logged now. */
    bool in_flight = call->infers != NULL;
    if (call->method && call->method->on_close)
        call->method->on_close(call); /* e.g. queued work is cancelled */
    if (!in_flight)
        grpc_call_obs_end(call, 0);
    grpc_call_drop(call);
}

/* ---- the native wire: gRPC on HTTP/2 streams (http/h2.h) ------------------ */

static const char *st_header(const void *conn, const char *name, size_t *len)
{
    return h2_stream_header(conn, name, len);
}

static const char *st_method(const void *conn, size_t *len)
{
    return h2_stream_method(conn, len);
}

static const char *st_path(const void *conn, size_t *len)
{
    return h2_stream_path(conn, len);
}

static size_t st_peer(const void *conn, char *out, size_t cap)
{
    return h2_stream_peer(conn, out, cap);
}

static int st_respond_headers(void *conn, const struct h2_header *h, size_t n)
{
    return h2_stream_respond_headers(conn, 200, h, n);
}

static int st_write(void *conn, const void *data, size_t len)
{
    return h2_stream_write(conn, data, len);
}

static int st_finish(void *conn, const struct h2_header *t, size_t n)
{
    return h2_stream_finish(conn, t, n);
}

static void st_abort(void *conn)
{
    h2_stream_reset(conn, H2_INTERNAL_ERROR);
}

static const struct grpc_wire h2_wire = {
    .proto = OBS_PROTO_GRPC,
    .header = st_header,
    .method = st_method,
    .path = st_path,
    .peer = st_peer,
    .respond_headers = st_respond_headers,
    .write = st_write,
    .finish = st_finish,
    .abort = st_abort,
};

static void st_set_user(void *conn, struct grpc_call *call)
{
    h2_stream_set_user(conn, call);
}

static void on_headers(void *app, struct h2_stream *st)
{
    struct grpc_call *call = grpc_call_open(app, &h2_wire, st, st_set_user);
    if (call)
        grpc_call_drop(call);
    else
        h2_stream_reset(st, H2_REFUSED_STREAM);
}

static void on_data(void *app, struct h2_stream *st, const uint8_t *data, size_t len)
{
    (void)app;
    struct grpc_call *call = h2_stream_user(st);
    if (call)
        grpc_call_data(call, data, len);
}

static void on_end(void *app, struct h2_stream *st)
{
    (void)app;
    struct grpc_call *call = h2_stream_user(st);
    if (call)
        grpc_call_request_end(call);
}

static void on_close(void *app, struct h2_stream *st, uint32_t error_code)
{
    (void)app;
    (void)error_code;
    struct grpc_call *call = h2_stream_user(st);
    if (!call)
        return;
    h2_stream_set_user(st, NULL);
    grpc_call_closed(call);
}

/* ---- api ------------------------------------------------------------------ */

int grpc_api_init(struct grpc_api *api, struct serve_thread *serve, uint64_t max_message_bytes,
                  const struct grpc_service *const *services, size_t nservices)
{
    memset(api, 0, sizeof *api);
    api->services = services;
    api->nservices = nservices;
    api->repo = serve->repo;
    api->loop = serve->loop;
    api->serve = serve;
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
    buf_init(&api->web_in, MAX_RESPONSE_BYTES);
    buf_init(&api->web_out, MAX_RESPONSE_BYTES / 3 * 4 + 4);
    for (; api->nservices_ready < nservices; api->nservices_ready++) {
        const struct grpc_service *svc = services[api->nservices_ready];
        int rc = svc->init ? svc->init(api) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

void grpc_api_drain(struct grpc_api *api)
{
    api->draining = true;
    for (struct grpc_call *c = api->calls, *next; c; c = next) {
        next = c->next;
        grpc_call_hold(c);
        if (c->method && c->method->on_drain)
            c->method->on_drain(c);
        grpc_call_drop(c);
    }
}

/* Frees pooled call objects beyond keep. */
static void trim_pool(struct grpc_api *api, uint32_t keep)
{
    while (api->nfree_calls > keep) {
        struct grpc_call *c = api->free_calls;
        api->free_calls = c->next_free;
        api->nfree_calls--;
        call_free(c);
    }
}

void grpc_api_tick(struct grpc_api *api, uint64_t now_ms)
{
    trim_pool(api, pool_use_keep(&api->call_use, now_ms));
}

void grpc_api_free(struct grpc_api *api)
{
    if (!api->loop)
        return; /* never initialized */
    trim_pool(api, 0);
    arena_free(&api->scratch);
    buf_free(&api->out);
    buf_free(&api->web_in);
    buf_free(&api->web_out);
    for (size_t k = 0; k < api->nservices_ready; k++)
        if (api->services[k]->free)
            api->services[k]->free(api);
}
