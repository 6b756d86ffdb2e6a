#include "cli/grpc_client.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/status.h"
#include "grpc_service.pb-c.h"

#define SERVICE "/inference.GRPCInferenceService/"
#define MAX_RESPONSE ((size_t)256 << 20)

void cli_infer_result_free(struct cli_infer_result *r)
{
    for (int i = 0; i < r->noutputs; i++)
        cli_tensor_free(&r->outputs[i]);
    r->noutputs = 0;
}

struct call {
    struct cli_conn conn;
    const uint8_t *req; /* the framed request message */
    size_t req_len, req_off;
    int32_t stream_id;
    bool closed;    /* the stream ended */
    uint32_t error; /* its RST_STREAM code, when not 0 */
    int http_status;
    int grpc_status; /* -1 until seen */
    char grpc_message[512];
    struct buf body;
    char err[512];
};

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *arg)
{
    (void)s, (void)flags;
    struct call *c = arg;
    if (cli_conn_write(&c->conn, data, len, c->err, sizeof c->err) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* grpc-message is percent-encoded. */
static void decode_message(char *dst, size_t size, const uint8_t *v, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        if (v[i] == '%' && i + 2 < n && hexval((char)v[i + 1]) >= 0 &&
            hexval((char)v[i + 2]) >= 0) {
            dst[o++] = (char)(hexval((char)v[i + 1]) * 16 + hexval((char)v[i + 2]));
            i += 2;
        } else {
            dst[o++] = (char)v[i];
        }
    }
    dst[o] = '\0';
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *arg)
{
    (void)s, (void)flags;
    struct call *c = arg;
    if (f->hd.stream_id != c->stream_id)
        return 0;
    char v[16];
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        snprintf(v, sizeof v, "%.*s", (int)(valuelen < 15 ? valuelen : 15), value);
        c->http_status = atoi(v);
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        snprintf(v, sizeof v, "%.*s", (int)(valuelen < 15 ? valuelen : 15), value);
        c->grpc_status = atoi(v);
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        decode_message(c->grpc_message, sizeof c->grpc_message, value, valuelen);
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *arg)
{
    (void)s, (void)flags;
    struct call *c = arg;
    if (id == c->stream_id && buf_append(&c->body, data, len) != 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *arg)
{
    (void)s;
    struct call *c = arg;
    if (id == c->stream_id) {
        c->closed = true;
        c->error = code;
    }
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *out, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *arg)
{
    (void)s, (void)id, (void)src;
    struct call *c = arg;
    size_t n = c->req_len - c->req_off;
    if (n > len)
        n = len;
    memcpy(out, c->req + c->req_off, n);
    c->req_off += n;
    if (c->req_off == c->req_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* The message of a framed response body, or NULL (printed why unless prog
 * is NULL). */
static const uint8_t *unframe(const struct buf *body, size_t *len, const char *prog)
{
    const uint8_t *b = (const uint8_t *)body->data;
    if (body->len < 5 || b[0] != 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC: %s response message\n", prog,
                    body->len < 5 ? "no" : "a compressed");
        return NULL;
    }
    size_t n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
    if (n > body->len - 5) {
        if (prog)
            fprintf(stderr, "%s: gRPC: truncated response message\n", prog);
        return NULL;
    }
    *len = n;
    return b + 5;
}

/* A message packed with its 5-byte gRPC prefix, in a malloc'd block. */
static uint8_t *frame(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > UINT32_MAX)
        return NULL;
    uint8_t *p = malloc(n + 5);
    if (!p)
        return NULL;
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    protobuf_c_message_pack(m, p + 5);
    *len = n + 5;
    return p;
}

/* The framed ModelInferRequest (5-byte gRPC prefix + message), in a
 * malloc'd block. */
static uint8_t *pack_request(const struct cli_infer_request *rq, size_t *len)
{
    Inference__ModelInferRequest m = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor ins[CLI_MAX_TENSORS];
    Inference__ModelInferRequest__InferInputTensor *inp[CLI_MAX_TENSORS];
    Inference__ModelInferRequest__InferRequestedOutputTensor outs[CLI_MAX_TENSORS];
    Inference__ModelInferRequest__InferRequestedOutputTensor *outp[CLI_MAX_TENSORS];
    ProtobufCBinaryData raw[CLI_MAX_TENSORS];
    m.model_name = (char *)rq->model;
    if (rq->version)
        m.model_version = (char *)rq->version;
    if (rq->id)
        m.id = (char *)rq->id;
    for (int i = 0; i < rq->ninputs; i++) {
        struct cli_tensor *t = &rq->inputs[i];
        Inference__ModelInferRequest__InferInputTensor init =
            INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
        ins[i] = init;
        ins[i].name = t->name;
        ins[i].datatype = (char *)dtype_name(t->dtype);
        ins[i].n_shape = (size_t)t->ndim;
        ins[i].shape = t->shape;
        inp[i] = &ins[i];
        raw[i].data = (uint8_t *)t->raw.data;
        raw[i].len = t->raw.len;
    }
    m.n_inputs = m.n_raw_input_contents = (size_t)rq->ninputs;
    m.inputs = inp;
    m.raw_input_contents = raw;
    for (int i = 0; i < rq->noutputs; i++) {
        Inference__ModelInferRequest__InferRequestedOutputTensor init =
            INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
        outs[i] = init;
        outs[i].name = (char *)rq->outputs[i];
        outp[i] = &outs[i];
    }
    m.n_outputs = (size_t)rq->noutputs;
    m.outputs = outp;
    return frame(&m.base, len);
}

static int unpack_response(const struct buf *body, struct cli_infer_result *res,
                           const char *prog)
{
    size_t n;
    const uint8_t *b = unframe(body, &n, prog);
    if (!b)
        return CLI_EXIT_FAILED;
    Inference__ModelInferResponse *m = inference__model_infer_response__unpack(NULL, n, b);
    if (!m) {
        fprintf(stderr, "%s: gRPC: malformed ModelInferResponse\n", prog);
        return CLI_EXIT_FAILED;
    }
    int rc = 0;
    snprintf(res->model_name, sizeof res->model_name, "%s", m->model_name);
    snprintf(res->model_version, sizeof res->model_version, "%s", m->model_version);
    snprintf(res->id, sizeof res->id, "%s", m->id);
    struct error err;
    error_clear(&err);
    if (m->n_outputs > CLI_MAX_TENSORS || m->n_raw_output_contents != m->n_outputs) {
        fprintf(stderr, "%s: gRPC: %zu outputs with %zu raw contents\n", prog, m->n_outputs,
                m->n_raw_output_contents);
        rc = CLI_EXIT_FAILED;
    }
    for (size_t i = 0; rc == 0 && i < m->n_outputs; i++) {
        const Inference__ModelInferResponse__InferOutputTensor *o = m->outputs[i];
        struct cli_tensor *t = &res->outputs[res->noutputs++];
        cli_tensor_init(t);
        snprintf(t->name, sizeof t->name, "%s", o->name);
        t->dtype = dtype_from_name(o->datatype, strlen(o->datatype));
        if (t->dtype == DT_INVALID || o->n_shape > CLI_MAX_DIMS) {
            fprintf(stderr, "%s: gRPC: output %s: datatype '%s', %zu dims\n", prog, t->name,
                    o->datatype, o->n_shape);
            rc = CLI_EXIT_FAILED;
            break;
        }
        t->ndim = (int)o->n_shape;
        memcpy(t->shape, o->shape, sizeof t->shape[0] * o->n_shape);
        if (buf_append(&t->raw, m->raw_output_contents[i].data, m->raw_output_contents[i].len) ||
            cli_tensor_check(t, &err) != 0) {
            fprintf(stderr, "%s: gRPC: output %s\n", prog, err.msg[0] ? err.msg : "too large");
            rc = CLI_EXIT_FAILED;
        }
    }
    inference__model_infer_response__free_unpacked(m, NULL);
    return rc;
}

static nghttp2_nv nv(const char *name, const char *value)
{
    nghttp2_nv h = {(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                    NGHTTP2_NV_FLAG_NONE};
    return h;
}

/* Runs the session until the stream closed: 0, or ST_ERROR with c->err. */
static int exchange(nghttp2_session *s, struct call *c)
{
    uint8_t in[65536];
    for (;;) {
        if (nghttp2_session_send(s) != 0) {
            if (!c->err[0])
                snprintf(c->err, sizeof c->err, "HTTP/2 send failed");
            return ST_ERROR;
        }
        if (c->closed)
            return 0;
        long k = cli_conn_read(&c->conn, in, sizeof in, NULL, NULL, c->err, sizeof c->err);
        if (k < 0)
            return ST_ERROR;
        if (k == 0) {
            snprintf(c->err, sizeof c->err, "the server closed the connection");
            return ST_ERROR;
        }
        ssize_t r = nghttp2_session_mem_recv(s, in, (size_t)k);
        if (r < 0) {
            snprintf(c->err, sizeof c->err, "HTTP/2: %s%s", nghttp2_strerror((int)r),
                     c->body.err ? " (response too large)" : "");
            return ST_ERROR;
        }
    }
}

/* "host:port" (IPv6 literal in brackets) of the gRPC port on t's host. */
static void grpc_authority(const struct cli_target *t, int port, char *out, size_t size)
{
    bool v6 = strchr(t->u.host, ':') != NULL;
    snprintf(out, size, "%s%s%s:%d", v6 ? "[" : "", t->u.host, v6 ? "]" : "", port);
}

/* One unary call: the framed message req[0..len) to `path` on t's host at
 * `port`; the framed response message into *body. Prints why it failed,
 * naming the address it dialed, unless prog is NULL (quiet). Returns 0 or
 * an exit code of cli/client.h. */
static int unary_call(const struct cli_target *t, int port, const char *path, const uint8_t *req,
                      size_t len, struct buf *body, const char *prog)
{
    struct cli_target gt = *t;
    char authority[sizeof gt.u.authority];
    grpc_authority(t, port, authority, sizeof authority);
    snprintf(gt.u.port, sizeof gt.u.port, "%d", port);
    memcpy(gt.u.authority, authority, sizeof authority); /* named in its messages */
    struct call *c = calloc(1, sizeof *c);
    if (!c) {
        if (prog)
            fprintf(stderr, "%s: out of memory\n", prog);
        return CLI_EXIT_FAILED;
    }
    c->grpc_status = -1;
    c->req = req;
    c->req_len = len;
    buf_init(&c->body, MAX_RESPONSE);
    int rc = CLI_EXIT_CONNECT;
    nghttp2_session *s = NULL;
    nghttp2_session_callbacks *cb = NULL;
    if (cli_conn_open(&c->conn, &gt, "\x02h2", 3, c->err, sizeof c->err) != 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC: %s\n", prog, c->err);
        goto out;
    }
    if (nghttp2_session_callbacks_new(&cb) != 0)
        goto out_close;
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    if (nghttp2_session_client_new(&s, cb, c) != 0)
        goto out_close;
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, settings, 1);
    nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, 1 << 28);
    char timeout[32], auth[4200];
    snprintf(timeout, sizeof timeout, "%dm", t->timeout_ms);
    nghttp2_nv hdrs[9];
    size_t nh = 0;
    hdrs[nh++] = nv(":method", "POST");
    hdrs[nh++] = nv(":scheme", t->tls ? "https" : "http");
    hdrs[nh++] = nv(":path", path);
    hdrs[nh++] = nv(":authority", authority);
    hdrs[nh++] = nv("content-type", "application/grpc");
    hdrs[nh++] = nv("te", "trailers");
    hdrs[nh++] = nv("grpc-timeout", timeout);
    hdrs[nh++] = nv("user-agent", "inferd-cli/" INFERD_VERSION);
    if (t->api_key) {
        snprintf(auth, sizeof auth, "Bearer %s", t->api_key);
        hdrs[nh++] = nv("authorization", auth);
    }
    nghttp2_data_provider dp = {.read_callback = read_body};
    c->stream_id = nghttp2_submit_request(s, NULL, hdrs, nh, &dp, c);
    if (c->stream_id < 0) {
        snprintf(c->err, sizeof c->err, "HTTP/2: %s", nghttp2_strerror(c->stream_id));
        if (prog)
            fprintf(stderr, "%s: gRPC %s: %s\n", prog, authority, c->err);
        goto out_close;
    }
    if (exchange(s, c) != 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC %s: %s\n", prog, authority, c->err);
        goto out_close;
    }
    rc = CLI_EXIT_FAILED;
    if (c->http_status != 200) {
        if (prog)
            fprintf(stderr, "%s: gRPC %s: HTTP status %d\n", prog, authority, c->http_status);
    } else if (c->grpc_status < 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC %s: the stream ended without a grpc-status (error %u)\n",
                    prog, authority, c->error);
    } else if (c->grpc_status != 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC status %d: %s\n", prog, c->grpc_status, c->grpc_message);
    } else if (buf_append(body, c->body.data, c->body.len) != 0) {
        if (prog)
            fprintf(stderr, "%s: gRPC %s: the response is too large\n", prog, authority);
    } else {
        rc = 0;
    }
out_close:
    if (s)
        nghttp2_session_del(s);
    if (cb)
        nghttp2_session_callbacks_del(cb);
    cli_conn_close(&c->conn);
out:
    buf_free(&c->body);
    free(c);
    return rc;
}

int cli_grpc_infer(const struct cli_target *t, int port, const struct cli_infer_request *rq,
                   struct cli_infer_result *res, const char *prog)
{
    size_t len;
    uint8_t *req = pack_request(rq, &len);
    if (!req) {
        fprintf(stderr, "%s: the request is too large\n", prog);
        return CLI_EXIT_USAGE;
    }
    struct buf body;
    buf_init(&body, MAX_RESPONSE);
    int rc = unary_call(t, port, SERVICE "ModelInfer", req, len, &body, prog);
    if (rc == 0)
        rc = unpack_response(&body, res, prog);
    buf_free(&body);
    free(req);
    return rc;
}

static void write_ios(struct json_writer *w,
                      Inference__ModelMetadataResponse__TensorMetadata *const *ios, size_t n)
{
    json_w_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        json_w_obj_begin(w);
        json_w_key(w, "name");
        json_w_cstr(w, ios[i]->name);
        json_w_key(w, "datatype");
        json_w_cstr(w, ios[i]->datatype);
        json_w_key(w, "shape");
        json_w_arr_begin(w);
        for (size_t d = 0; d < ios[i]->n_shape; d++)
            json_w_int(w, ios[i]->shape[d]);
        json_w_arr_end(w);
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
}

int cli_grpc_metadata(const struct cli_target *t, int port, const char *model,
                      const char *version, struct buf *json, const char *prog)
{
    Inference__ModelMetadataRequest m = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    m.name = (char *)model;
    m.version = (char *)(version ? version : "");
    size_t len;
    uint8_t *req = frame(&m.base, &len);
    if (!req)
        return CLI_EXIT_USAGE;
    struct buf body;
    buf_init(&body, MAX_RESPONSE);
    int rc = unary_call(t, port, SERVICE "ModelMetadata", req, len, &body, prog);
    free(req);
    size_t n;
    const uint8_t *msg = rc == 0 ? unframe(&body, &n, prog) : NULL;
    Inference__ModelMetadataResponse *r =
        msg ? inference__model_metadata_response__unpack(NULL, n, msg) : NULL;
    if (rc == 0 && !r) {
        if (prog && msg)
            fprintf(stderr, "%s: gRPC: malformed ModelMetadataResponse\n", prog);
        rc = CLI_EXIT_FAILED;
    }
    if (r) {
        struct json_writer w;
        json_w_init(&w, json);
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, r->name);
        json_w_key(&w, "inputs");
        write_ios(&w, r->inputs, r->n_inputs);
        json_w_key(&w, "outputs");
        write_ios(&w, r->outputs, r->n_outputs);
        json_w_obj_end(&w);
        if (json->err)
            rc = CLI_EXIT_FAILED;
        inference__model_metadata_response__free_unpacked(r, NULL);
    }
    buf_free(&body);
    return rc;
}
