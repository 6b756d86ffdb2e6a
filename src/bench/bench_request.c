#include "bench/bench_request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/rand.h"
#include "base/status.h"
#include "bench/bench_args.h"
#include "bench/gen_stream.h"
#include "core/dtype.h"
#include "core/fp16.h"

#define MAX_BODY_BYTES (1ull << 30)
#define MAX_ELEMENTS (64u << 20)
#define METADATA_TIMEOUT_MS 10000

static void put_le(struct buf *b, uint64_t v, size_t size)
{
    unsigned char le[8];
    for (size_t i = 0; i < size; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    buf_append(b, le, size);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Writes `count` deterministic values of type t: as JSON array elements
 * (w != NULL) or as raw little-endian data into raw. Values are small so
 * that models doing arithmetic on them stay in range. */
static void fill_values(enum dtype t, uint64_t count, uint64_t seed, struct json_writer *w,
                        struct buf *raw)
{
    uint64_t s = seed;
    char str[32];
    for (uint64_t i = 0; i < count; i++) {
        uint64_t r = rand_splitmix64(&s);
        int64_t si = (int64_t)(r % 100) - 50;
        uint64_t ui = r % 100;
        float f = (float)(r % 1000) / 100.0f;
        switch (t) {
        case DT_BOOL:
            if (w)
                json_w_bool(w, r & 1);
            else
                put_le(raw, r & 1, 1);
            break;
        case DT_UINT8:
        case DT_UINT16:
        case DT_UINT32:
        case DT_UINT64:
            if (w)
                json_w_uint(w, ui);
            else
                put_le(raw, ui, dtype_size(t));
            break;
        case DT_INT8:
        case DT_INT16:
        case DT_INT32:
        case DT_INT64:
            if (w)
                json_w_int(w, si);
            else
                put_le(raw, (uint64_t)si, dtype_size(t));
            break;
        case DT_FP16:
            if (w)
                json_w_f32(w, f);
            else
                put_le(raw, fp16_from_float(f), 2);
            break;
        case DT_BF16: {
            uint32_t u = f32_bits(f);
            uint16_t bf = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
            if (w) {
                uint32_t back = (uint32_t)bf << 16;
                float fb;
                memcpy(&fb, &back, sizeof fb);
                json_w_f32(w, fb);
            } else {
                put_le(raw, bf, 2);
            }
            break;
        }
        case DT_FP32:
            if (w)
                json_w_f32(w, f);
            else
                put_le(raw, f32_bits(f), 4);
            break;
        case DT_FP64: {
            double d = (double)(r % 1000) / 100.0;
            if (w) {
                json_w_f64(w, d);
            } else {
                uint64_t u;
                memcpy(&u, &d, sizeof u);
                put_le(raw, u, 8);
            }
            break;
        }
        case DT_BYTES: {
            int n = snprintf(str, sizeof str, "bench-%u", (unsigned)(r % 100000));
            if (w) {
                json_w_str(w, str, (size_t)n);
            } else {
                put_le(raw, (uint64_t)n, 4);
                buf_append(raw, str, (size_t)n);
            }
            break;
        }
        default:
            break;
        }
    }
}

struct input_desc {
    const char *name;
    size_t name_len;
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[16];
    uint64_t count;
};

static int describe_input(const struct json_value *in, uint32_t batch, struct input_desc *d,
                          char *err, size_t err_size)
{
    const struct json_value *name = json_get(in, "name");
    const struct json_value *dt = json_get(in, "datatype");
    const struct json_value *shape = json_get(in, "shape");
    if (!name || name->type != JSON_STRING || !dt || dt->type != JSON_STRING || !shape ||
        shape->type != JSON_ARRAY) {
        snprintf(err, err_size, "model metadata: an input lacks name, datatype or shape");
        return ST_ERROR;
    }
    d->name = name->u.str;
    d->name_len = name->len;
    d->dtype = dtype_from_name(dt->u.str, dt->len);
    if (d->dtype == DT_INVALID) {
        snprintf(err, err_size, "model metadata: input '%s' has unknown datatype '%s'", name->u.str,
                 dt->u.str);
        return ST_ERROR;
    }
    if (shape->len > 16) {
        snprintf(err, err_size, "model metadata: input '%s' has more than 16 dimensions",
                 name->u.str);
        return ST_ERROR;
    }
    d->ndim = shape->len;
    d->count = 1;
    for (uint32_t i = 0; i < shape->len; i++) {
        int64_t v;
        if (json_num_i64(&shape->u.items[i], &v) != 0 || v < -1) {
            snprintf(err, err_size, "model metadata: input '%s' has an invalid shape", name->u.str);
            return ST_ERROR;
        }
        if (v == -1)
            v = i == 0 ? batch : 1;
        d->dims[i] = v;
        if (v && d->count > MAX_ELEMENTS / (uint64_t)v) {
            snprintf(err, err_size, "input '%s' would have more than %u elements", name->u.str,
                     MAX_ELEMENTS);
            return ST_ERROR;
        }
        d->count *= (uint64_t)v;
    }
    if (batch > 1) {
        const struct json_value *d0 = shape->len ? &shape->u.items[0] : NULL;
        int64_t v0 = 0;
        if (!d0 || json_num_i64(d0, &v0) != 0 || v0 != -1) {
            snprintf(err, err_size,
                     "--batch %u: input '%s' has no variable first (batch) dimension", batch,
                     name->u.str);
            return ST_ERROR;
        }
    }
    return 0;
}

int bench_build_infer_body(const char *metadata, size_t metadata_len, enum bench_format format,
                           uint32_t batch, struct buf *body, size_t *json_len, char *err,
                           size_t err_size)
{
    int rc = ST_ERROR;
    struct arena arena;
    arena_init(&arena, 16 * 1024, 64ull << 20);
    struct json_value *doc;
    const char *perr;
    size_t poff;
    struct input_desc *descs = NULL;
    *json_len = 0;
    if (json_parse(&arena, metadata, metadata_len, NULL, &doc, &perr, &poff) != 0) {
        snprintf(err, err_size, "model metadata is not JSON: %s at byte %zu", perr, poff);
        goto out_arena;
    }
    const struct json_value *inputs = json_get(doc, "inputs");
    if (!inputs || inputs->type != JSON_ARRAY || inputs->len == 0) {
        snprintf(err, err_size, "model metadata has no inputs");
        goto out_arena;
    }
    descs = arena_calloc(&arena, inputs->len, sizeof *descs);
    if (!descs) {
        snprintf(err, err_size, "out of memory");
        goto out_arena;
    }
    /* A preprocessed model's raw inputs (an image, a sound, a text:
     * docs/preprocessing.md) replace tensors the request then carries
     * itself: they are left out. */
    uint32_t ninputs = 0;
    for (uint32_t i = 0; i < inputs->len; i++) {
        const struct json_value *params = json_get(&inputs->u.items[i], "parameters");
        if (params && json_get(params, "preprocess"))
            continue;
        if (describe_input(&inputs->u.items[i], batch, &descs[ninputs++], err, err_size))
            goto out_arena;
    }

    struct json_writer w;
    json_w_init(&w, body);
    json_w_obj_begin(&w);
    json_w_key(&w, "inputs");
    json_w_arr_begin(&w);
    for (uint32_t i = 0; i < ninputs; i++) {
        const struct input_desc *d = &descs[i];
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_str(&w, d->name, d->name_len);
        json_w_key(&w, "shape");
        json_w_arr_begin(&w);
        for (uint32_t k = 0; k < d->ndim; k++)
            json_w_int(&w, d->dims[k]);
        json_w_arr_end(&w);
        json_w_key(&w, "datatype");
        json_w_cstr(&w, dtype_name(d->dtype));
        if (format == BENCH_FORMAT_JSON) {
            json_w_key(&w, "data");
            json_w_arr_begin(&w);
            fill_values(d->dtype, d->count, i + 1, &w, NULL);
            json_w_arr_end(&w);
        } else {
            uint64_t size = d->dtype == DT_BYTES ? 0 : d->count * dtype_size(d->dtype);
            if (d->dtype == DT_BYTES) {
                /* Measure the serialized strings by generating them once. */
                struct buf tmp;
                buf_init(&tmp, MAX_BODY_BYTES);
                fill_values(d->dtype, d->count, i + 1, NULL, &tmp);
                size = tmp.len;
                if (tmp.err)
                    body->err = tmp.err;
                buf_free(&tmp);
            }
            json_w_key(&w, "parameters");
            json_w_obj_begin(&w);
            json_w_key(&w, "binary_data_size");
            json_w_uint(&w, size);
            json_w_obj_end(&w);
        }
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    if (format == BENCH_FORMAT_BINARY) {
        json_w_key(&w, "parameters");
        json_w_obj_begin(&w);
        json_w_key(&w, "binary_data_output");
        json_w_bool(&w, true);
        json_w_obj_end(&w);
    }
    json_w_obj_end(&w);
    if (format == BENCH_FORMAT_BINARY) {
        *json_len = body->len;
        for (uint32_t i = 0; i < ninputs; i++)
            fill_values(descs[i].dtype, descs[i].count, i + 1, NULL, body);
    }
    if (body->err) {
        snprintf(err, err_size, "request body too large (%s)",
                 body->err == -ENOMEM ? "out of memory" : "over 1 GiB");
        goto out_arena;
    }
    rc = 0;
out_arena:
    arena_free(&arena);
    return rc;
}

/* Appends s percent-encoded as one path segment. */
static void put_segment(struct buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c))
            buf_putc(b, (char)c);
        else
            buf_printf(b, "%%%02X", c);
    }
}

static void put_model_path(struct buf *b, const struct http_url *u, const struct bench_options *o,
                           const char *suffix)
{
    buf_puts(b, u->prefix);
    buf_puts(b, "/v2/models/");
    put_segment(b, o->model);
    if (o->version) {
        buf_puts(b, "/versions/");
        put_segment(b, o->version);
    }
    buf_puts(b, suffix);
}

/* The request head up to and including the blank line. */
static void put_head(struct buf *req, const struct bench_options *o, const struct http_url *u,
                     const char *method, const char *target, bool has_body, size_t body_len,
                     const char *content_type, const char *accept, size_t json_len)
{
    buf_printf(req, "%s %s HTTP/1.1\r\n", method, target);
    if (!bench_options_has_header(o, "host"))
        buf_printf(req, "Host: %s\r\n", u->authority);
    if (!bench_options_has_header(o, "user-agent"))
        buf_puts(req, "User-Agent: inferd-bench/" INFERD_VERSION "\r\n");
    if (content_type && !bench_options_has_header(o, "content-type"))
        buf_printf(req, "Content-Type: %s\r\n", content_type);
    if (accept && !bench_options_has_header(o, "accept"))
        buf_printf(req, "Accept: %s\r\n", accept);
    if (json_len)
        buf_printf(req, "Inference-Header-Content-Length: %zu\r\n", json_len);
    if (has_body)
        buf_printf(req, "Content-Length: %zu\r\n", body_len);
    for (uint32_t i = 0; i < o->nheaders; i++)
        buf_printf(req, "%s\r\n", o->headers[i]);
    buf_puts(req, "\r\n");
}

static int read_file(const char *path, struct buf *out, char *err, size_t err_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_size, "--body-file %s: %s", path, strerror(errno));
        return ST_ERROR;
    }
    int rc = 0;
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, err_size, "--body-file %s: %s", path, strerror(errno));
            rc = ST_ERROR;
            break;
        }
        if (n == 0)
            break;
        if (buf_append(out, chunk, (size_t)n) != 0) {
            snprintf(err, err_size, "--body-file %s: larger than 1 GiB or out of memory", path);
            rc = ST_ERROR;
            break;
        }
    }
    close(fd);
    return rc;
}

/* Fetches the metadata and builds the infer body. Returns 0 or 1 (reported). */
static int build_model_body(const struct bench_options *o, const struct http_url *u,
                            const struct sockaddr_storage *addr, socklen_t addrlen,
                            struct buf *body, size_t *json_len)
{
    int rc = 1;
    struct buf req, meta;
    buf_init(&req, 1 << 20);
    buf_init(&meta, 64 << 20);
    buf_puts(&req, "GET ");
    put_model_path(&req, u, o, "");
    buf_puts(&req, " HTTP/1.1\r\n");
    if (!bench_options_has_header(o, "host"))
        buf_printf(&req, "Host: %s\r\n", u->authority);
    buf_puts(&req, "Accept: application/json\r\nConnection: close\r\n");
    for (uint32_t i = 0; i < o->nheaders; i++)
        if (!bench_header_named(o->headers[i], "content-type"))
            buf_printf(&req, "%s\r\n", o->headers[i]);
    buf_puts(&req, "\r\n");
    int status = 0;
    int err = req.err ? req.err
                      : http_fetch(addr, addrlen, req.data, req.len, false, METADATA_TIMEOUT_MS,
                                   &status, &meta);
    if (err) {
        fprintf(stderr, "inferd bench: cannot fetch metadata of model '%s' from %s: %s\n", o->model,
                o->url, err == -EPROTO ? "malformed response" : strerror(-err));
        goto out;
    }
    if (status != 200) {
        fprintf(stderr, "inferd bench: metadata of model '%s': HTTP %d: %.*s\n", o->model, status,
                (int)(meta.len < 500 ? meta.len : 500), meta.data ? meta.data : "");
        goto out;
    }
    char msg[512];
    if (bench_build_infer_body(meta.data, meta.len, o->format, o->batch, body, json_len, msg,
                               sizeof msg) != 0) {
        fprintf(stderr, "inferd bench: model '%s': %s\n", o->model, msg);
        goto out;
    }
    rc = 0;
out:
    buf_free(&req);
    buf_free(&meta);
    return rc;
}

int bench_request_build(struct bench_request *r, const struct bench_options *o,
                        const struct http_url *u, const struct sockaddr_storage *addr,
                        socklen_t addrlen)
{
    buf_init(&r->body, MAX_BODY_BYTES);
    buf_init(&r->req, MAX_BODY_BYTES + (1 << 20));
    buf_init(&r->target, 64 * 1024);
    r->method = NULL;
    r->head_request = false;
    size_t json_len = 0;
    const char *method;
    const char *content_type = NULL, *accept = NULL;
    bool has_body;
    char msg[512];
    if (o->openai) {
        struct gen_request gr = {.model = o->openai,
                                 .prompt = o->prompt,
                                 .max_tokens = o->max_tokens,
                                 .temperature = o->temperature,
                                 .has_seed = o->has_seed,
                                 .seed = o->seed};
        gen_request_body(&r->body, &gr);
        method = "POST";
        has_body = true;
        content_type = "application/json";
        accept = "text/event-stream";
        buf_puts(&r->target, u->prefix);
        buf_puts(&r->target, "/v1/completions");
    } else if (o->model) {
        if (build_model_body(o, u, addr, addrlen, &r->body, &json_len) != 0)
            return 1;
        method = "POST";
        has_body = true;
        content_type =
            o->format == BENCH_FORMAT_BINARY ? "application/octet-stream" : "application/json";
        put_model_path(&r->target, u, o, "/infer");
    } else {
        if (o->body_file && read_file(o->body_file, &r->body, msg, sizeof msg) != 0)
            return bench_usage_error(BENCH_PROG, "%s", msg);
        method = o->method ? o->method : o->body_file ? "POST" : "GET";
        has_body = o->body_file || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
        if (o->body_file && r->body.len && !bench_options_has_header(o, "content-type"))
            content_type = "application/octet-stream";
        buf_puts(&r->target, u->prefix);
        buf_puts(&r->target, o->path);
    }
    if (r->target.err)
        return bench_usage_error(BENCH_PROG, "request target too long");
    buf_putc(&r->target, '\0');
    put_head(&r->req, o, u, method, r->target.data, has_body, r->body.len, content_type, accept,
             json_len);
    buf_append(&r->req, r->body.data, r->body.len);
    if (r->req.err) {
        fprintf(stderr, "inferd bench: request too large\n");
        return 1;
    }
    r->method = method;
    r->head_request = strcmp(method, "HEAD") == 0;
    return 0;
}

void bench_request_free(struct bench_request *r)
{
    buf_free(&r->body);
    buf_free(&r->req);
    buf_free(&r->target);
}
