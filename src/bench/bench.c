#include "bench/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/mem.h"
#include "base/rand.h"
#include "bench/bench_args.h"
#include "bench/gen_floor.h"
#include "bench/gen_stream.h"
#include "bench/hist.h"
#include "bench/http_client.h"
#include "bench/progress.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "net/loop.h"

#define MAX_HEADERS 64
#define MAX_CONNECTIONS 20000
#define MAX_BODY_BYTES (1ull << 30)
#define MAX_ELEMENTS (64u << 20)
#define RECV_BUF_SIZE (16 * 1024)
#define READ_BUDGET 32                    /* recv() calls per connection per wakeup, then yield */
#define HOUSEKEEPING_NS (10 * 1000000ull) /* timeouts and reconnect back-off */
#define BACKOFF_NS (100 * 1000000ull)     /* after a failed connect */
#define METADATA_TIMEOUT_MS 10000
#define MAX_PROMPT_BYTES (1u << 20)
#define MAX_STREAM_CONNECTIONS 4096 /* --openai: each holds a 64 KiB event buffer */
#define DEFAULT_PROMPT "And God said"
#define PROG "inferd bench" /* how its messages start */

static const char bench_usage_text[] =
    "usage: inferd bench [options]\n"
    "       inferd bench --generate-floor [options]   (see inferd bench --generate-floor --help)\n"
    "\n"
    "HTTP/1.1 load generator for KServe v2 servers (--model), OpenAI-compatible\n"
    "generation servers (--openai) and arbitrary endpoints (--path). Reports throughput,\n"
    "latency percentiles, statuses and errors; latency also apart for admitted (2xx) and\n"
    "refused (429, 503) responses. --generate-floor instead runs a generative model in\n"
    "process (the floor the server's tokens/s is compared with).\n"
    "\n"
    "target:\n"
    "  --url URL              server base URL, http://HOST:PORT (default http://127.0.0.1:8000)\n"
    "  --model NAME           build the request from GET /v2/models/NAME metadata: every input\n"
    "                         with its shape (variable dims -> 1) filled with deterministic\n"
    "                         pseudo-random values of its datatype (BYTES: short strings);\n"
    "                         a preprocessed model's raw inputs (image, audio, text) are\n"
    "                         left out: the tensors they would feed are sent\n"
    "  --version V            model version (optional path segment)\n"
    "  --format json|binary   request encoding (default json); binary = Triton's binary tensor\n"
    "                         extension (JSON header + raw little-endian tensors, with\n"
    "                         Inference-Header-Content-Length)\n"
    "  --batch N              samples along the batch dimension (default 1)\n"
    "  --path PATH            raw mode instead of --model: send requests to PATH\n"
    "  --body-file FILE       raw mode: request body (FILE's bytes)\n"
    "  --method M             raw mode request method (default POST with a body, else GET)\n"
    "  --header 'K: V'        extra request header (repeatable)\n"
    "\n"
    "generation (--openai):\n"
    "  --openai MODEL         streamed completions: POST /v1/completions with \"stream\": true\n"
    "                         and stream_options.include_usage; reports tokens/s received in\n"
    "                         the window, time to first token (TTFT) and time per output\n"
    "                         token (TPOT) percentiles, requests ok/failed\n"
    "  --prompt TEXT          the prompt (default \"" DEFAULT_PROMPT "\")\n"
    "  --max-tokens N         max_tokens of each request (default 128)\n"
    "  --temperature T        0 (default) = greedy\n"
    "  --seed N               the request's seed (default: none sent)\n"
    "\n"
    "load:\n"
    "  --connections N        TCP connections (default 16)\n"
    "  --concurrency N        closed loop: N requests in flight in total (default = connections;\n"
    "                         at most one per connection, no pipelining)\n"
    "  --rate R               open loop: R requests/s in total on a fixed schedule; latency is\n"
    "                         measured from the scheduled send time (no coordinated omission)\n"
    "  --duration SECS        measured duration (default 10; fractional allowed)\n"
    "  --warmup SECS          unmeasured warm-up first (default 1)\n"
    "  --threads N            client threads, each with its own event loop and share of the\n"
    "                         connections (default 1)\n"
    "  --timeout-ms MS        per-request timeout (default 10000), counted as error \"timeout\"\n"
    "\n"
    "output:\n"
    "  --json                 print one JSON object instead of the text report: latency_us\n"
    "                         of every response, latency_us_ok and latency_us_refused of the\n"
    "                         2xx and the 429/503 responses (with requests_ok, rps_ok and\n"
    "                         requests_refused)\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 the run happened (even with HTTP errors), 1 no connection could be made\n"
    "or the model metadata could not be fetched, 2 usage error.\n";

/* ---- options ------------------------------------------------------------ */

struct bench_options {
    const char *url;
    const char *model;
    const char *version;
    enum bench_format format;
    bool format_set;
    uint32_t batch;
    bool batch_set;
    const char *path;
    const char *body_file;
    const char *method;
    const char *headers[MAX_HEADERS];
    uint32_t nheaders;
    uint32_t connections;
    uint32_t concurrency; /* 0 = connections */
    double rate;          /* > 0: open loop */
    double duration_s;
    double warmup_s;
    uint32_t threads;
    uint32_t timeout_ms;
    bool json;
    /* --openai */
    const char *openai;
    const char *prompt;
    uint32_t max_tokens;
    double temperature;
    bool has_seed;
    uint64_t seed;
    bool gen_set; /* a generation option was given */
};

enum {
    OPT_URL = 256,
    OPT_MODEL,
    OPT_VERSION,
    OPT_FORMAT,
    OPT_BATCH,
    OPT_PATH,
    OPT_BODY_FILE,
    OPT_METHOD,
    OPT_HEADER,
    OPT_CONNECTIONS,
    OPT_CONCURRENCY,
    OPT_RATE,
    OPT_DURATION,
    OPT_WARMUP,
    OPT_THREADS,
    OPT_TIMEOUT,
    OPT_JSON,
    OPT_OPENAI,
    OPT_PROMPT,
    OPT_MAX_TOKENS,
    OPT_TEMPERATURE,
    OPT_SEED,
};

static const struct option bench_options_table[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"model", required_argument, NULL, OPT_MODEL},
    {"version", required_argument, NULL, OPT_VERSION},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"path", required_argument, NULL, OPT_PATH},
    {"body-file", required_argument, NULL, OPT_BODY_FILE},
    {"method", required_argument, NULL, OPT_METHOD},
    {"header", required_argument, NULL, OPT_HEADER},
    {"connections", required_argument, NULL, OPT_CONNECTIONS},
    {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
    {"rate", required_argument, NULL, OPT_RATE},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"openai", required_argument, NULL, OPT_OPENAI},
    {"prompt", required_argument, NULL, OPT_PROMPT},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static bool is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* "Name: value" with a token name and no control characters. */
static bool header_ok(const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return false;
    for (const char *p = h; p < colon; p++)
        if (!is_token_char((unsigned char)*p))
            return false;
    for (const char *p = colon + 1; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t')
            return false;
    return true;
}

static bool header_named(const char *h, const char *name)
{
    size_t n = strlen(name);
    return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

static bool user_header(const struct bench_options *o, const char *name)
{
    for (uint32_t i = 0; i < o->nheaders; i++)
        if (header_named(o->headers[i], name))
            return true;
    return false;
}

/* One option of parse_bench_args() (bench_getopt()'s fn). */
static int bench_option(void *ctx, int c, const char *name, const char *arg)
{
    struct bench_options *o = ctx;
    int rc = 0;
    switch (c) {
    case OPT_URL:
        o->url = arg;
        break;
    case OPT_MODEL:
        o->model = arg;
        break;
    case OPT_VERSION:
        o->version = arg;
        break;
    case OPT_FORMAT:
        o->format_set = true;
        if (strcmp(arg, "json") == 0)
            o->format = BENCH_FORMAT_JSON;
        else if (strcmp(arg, "binary") == 0)
            o->format = BENCH_FORMAT_BINARY;
        else
            rc = bench_usage_error(PROG, "--format: expected json or binary, got '%s'", arg);
        break;
    case OPT_BATCH:
        o->batch_set = true;
        rc = bench_parse_u32(PROG, name, arg, 1, 1 << 20, &o->batch);
        break;
    case OPT_PATH:
        o->path = arg;
        break;
    case OPT_BODY_FILE:
        o->body_file = arg;
        break;
    case OPT_METHOD:
        o->method = arg;
        break;
    case OPT_HEADER:
        if (o->nheaders == MAX_HEADERS)
            rc = bench_usage_error(PROG, "--header: at most %d headers", MAX_HEADERS);
        else if (!header_ok(arg))
            rc = bench_usage_error(PROG, "--header: expected 'Name: value', got '%s'", arg);
        else if (header_named(arg, "content-length") || header_named(arg, "transfer-encoding"))
            rc = bench_usage_error(PROG, "--header: %s is set by inferd bench itself", arg);
        else
            o->headers[o->nheaders++] = arg;
        break;
    case OPT_CONNECTIONS:
        rc = bench_parse_u32(PROG, name, arg, 1, MAX_CONNECTIONS, &o->connections);
        break;
    case OPT_CONCURRENCY:
        rc = bench_parse_u32(PROG, name, arg, 1, MAX_CONNECTIONS, &o->concurrency);
        break;
    case OPT_RATE:
        rc = bench_parse_f64(PROG, name, arg, 1e-3, 1e8, &o->rate);
        break;
    case OPT_DURATION:
        rc = bench_parse_f64(PROG, name, arg, 1e-3, 1e7, &o->duration_s);
        break;
    case OPT_WARMUP:
        rc = bench_parse_f64(PROG, name, arg, 0, 1e7, &o->warmup_s);
        break;
    case OPT_THREADS:
        rc = bench_parse_u32(PROG, name, arg, 1, 1024, &o->threads);
        break;
    case OPT_TIMEOUT:
        rc = bench_parse_u32(PROG, name, arg, 1, 3600000, &o->timeout_ms);
        break;
    case OPT_JSON:
        o->json = true;
        break;
    case OPT_OPENAI:
        o->openai = arg;
        break;
    case OPT_PROMPT:
        o->gen_set = true;
        o->prompt = arg;
        if (strlen(arg) > MAX_PROMPT_BYTES)
            rc = bench_usage_error(PROG, "--prompt: at most %u bytes", MAX_PROMPT_BYTES);
        break;
    case OPT_MAX_TOKENS:
        o->gen_set = true;
        rc = bench_parse_u32(PROG, name, arg, 1, 1 << 20, &o->max_tokens);
        break;
    case OPT_TEMPERATURE:
        o->gen_set = true;
        rc = bench_parse_f64(PROG, name, arg, 0, 2, &o->temperature);
        break;
    case OPT_SEED: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        o->gen_set = true;
        o->has_seed = true;
        o->seed = v;
        if (errno || end == arg || *end || arg[0] == '-')
            rc = bench_usage_error(
                PROG, "--seed: expected a whole number from 0 to 2^64-1, got '%s'", arg);
        break;
    }
    }
    return rc;
}

/* Returns 0, 2 (usage error, reported), or -1 for --help (printed). */
static int parse_bench_args(int argc, char **argv, struct bench_options *o)
{
    *o = (struct bench_options){
        .url = "http://127.0.0.1:8000",
        .format = BENCH_FORMAT_JSON,
        .batch = 1,
        .connections = 16,
        .duration_s = 10,
        .warmup_s = 1,
        .threads = 1,
        .timeout_ms = 10000,
        .prompt = DEFAULT_PROMPT,
        .max_tokens = 128,
    };
    int rc = bench_getopt(PROG, argc, argv, bench_options_table, bench_usage_text, bench_option, o);
    if (rc)
        return rc;
    if (!o->model && !o->path && !o->openai)
        return bench_usage_error(PROG,
                                 "say what to load: --model NAME, --openai MODEL or --path PATH");
    if (o->openai && (o->model || o->path || o->body_file || o->method))
        return bench_usage_error(
            PROG, "--openai excludes --model and raw mode (--path, --body-file, --method)");
    if (!o->openai && o->gen_set)
        return bench_usage_error(PROG,
                                 "--prompt, --max-tokens, --temperature and --seed need --openai");
    if (o->openai && o->connections > MAX_STREAM_CONNECTIONS)
        return bench_usage_error(PROG, "--openai: at most %d --connections",
                                 MAX_STREAM_CONNECTIONS);
    if (o->model && (o->path || o->body_file || o->method))
        return bench_usage_error(
            PROG, "--model and raw mode (--path, --body-file, --method) exclude each other");
    if (!o->model && (o->version || o->format_set || o->batch_set))
        return bench_usage_error(PROG, "--version, --format and --batch need --model");
    if (o->body_file && !o->path)
        return bench_usage_error(PROG, "--body-file needs --path");
    if (o->path && o->path[0] != '/')
        return bench_usage_error(PROG, "--path must start with '/'");
    if (o->path && strpbrk(o->path, " \r\n\t"))
        return bench_usage_error(PROG, "--path must not contain spaces or control characters");
    if (o->method) {
        for (const char *p = o->method; *p; p++)
            if (!is_token_char((unsigned char)*p))
                return bench_usage_error(PROG, "--method: invalid method '%s'", o->method);
        if (!o->method[0])
            return bench_usage_error(PROG, "--method: empty method");
    }
    if (o->rate > 0 && o->concurrency)
        return bench_usage_error(
            PROG, "--rate (open loop) and --concurrency (closed loop) exclude each other");
    if (o->concurrency > o->connections)
        return bench_usage_error(
            PROG,
            "--concurrency %u needs at least as many --connections (one request "
            "in flight per connection)",
            o->concurrency);
    if (o->threads > o->connections)
        return bench_usage_error(PROG, "--threads %u exceeds --connections %u", o->threads,
                                 o->connections);
    if (!o->concurrency)
        o->concurrency = o->connections;
    return 0;
}

/* ---- request building --------------------------------------------------- */

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
        return -1;
    }
    d->name = name->u.str;
    d->name_len = name->len;
    d->dtype = dtype_from_name(dt->u.str, dt->len);
    if (d->dtype == DT_INVALID) {
        snprintf(err, err_size, "model metadata: input '%s' has unknown datatype '%s'", name->u.str,
                 dt->u.str);
        return -1;
    }
    if (shape->len > 16) {
        snprintf(err, err_size, "model metadata: input '%s' has more than 16 dimensions",
                 name->u.str);
        return -1;
    }
    d->ndim = shape->len;
    d->count = 1;
    for (uint32_t i = 0; i < shape->len; i++) {
        int64_t v;
        if (json_num_i64(&shape->u.items[i], &v) != 0 || v < -1) {
            snprintf(err, err_size, "model metadata: input '%s' has an invalid shape", name->u.str);
            return -1;
        }
        if (v == -1)
            v = i == 0 ? batch : 1;
        d->dims[i] = v;
        if (v && d->count > MAX_ELEMENTS / (uint64_t)v) {
            snprintf(err, err_size, "input '%s' would have more than %u elements", name->u.str,
                     MAX_ELEMENTS);
            return -1;
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
            return -1;
        }
    }
    return 0;
}

int bench_build_infer_body(const char *metadata, size_t metadata_len, enum bench_format format,
                           uint32_t batch, struct buf *body, size_t *json_len, char *err,
                           size_t err_size)
{
    int rc = -1;
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
    if (!user_header(o, "host"))
        buf_printf(req, "Host: %s\r\n", u->authority);
    if (!user_header(o, "user-agent"))
        buf_puts(req, "User-Agent: inferd-bench/" INFERD_VERSION "\r\n");
    if (content_type && !user_header(o, "content-type"))
        buf_printf(req, "Content-Type: %s\r\n", content_type);
    if (accept && !user_header(o, "accept"))
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
        return -1;
    }
    int rc = 0;
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, err_size, "--body-file %s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        if (buf_append(out, chunk, (size_t)n) != 0) {
            snprintf(err, err_size, "--body-file %s: larger than 1 GiB or out of memory", path);
            rc = -1;
            break;
        }
    }
    close(fd);
    return rc;
}

/* ---- the load generator ------------------------------------------------- */

enum conn_state { C_CLOSED, C_BACKOFF, C_CONNECTING, C_IDLE, C_BUSY };
enum err_kind { E_CONNECT, E_RESET, E_TIMEOUT, E_PARSE, E_COUNT };
static const char *const err_names[E_COUNT] = {"connect", "reset", "timeout", "parse"};
enum phase { P_CONNECT, P_RUN, P_DONE };

/* Admitted and refused responses, apart: under admission control a fast
 * refusal must not hide the latency of the requests that were served. */
static bool status_admitted(int status)
{
    return status >= 200 && status < 300;
}

static bool status_refused(int status)
{
    return status == 429 || status == 503;
}

struct bench_stats {
    struct hist latency;         /* ns, measured responses (every status) */
    struct hist latency_ok;      /* ... of them answered 2xx */
    struct hist latency_refused; /* ... of them answered 429 or 503 */
    uint64_t status[600];
    uint64_t errors[E_COUNT];
    uint64_t bytes_sent, bytes_received;
    uint64_t reconnects;
    struct gen_stats gen; /* --openai */
};

/* Read-only during the run, shared by every worker. */
struct bench_shared {
    const struct bench_options *o;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const char *req; /* head + body, contiguous */
    size_t req_len;
    bool head_request;
    bool open_loop;
    uint64_t timeout_ns;
    /* The start gate: each worker reports its initial connects done and
     * waits for `go`; main then sets the clock (or abort) and opens it. */
    pthread_mutex_t gate_lock;
    pthread_cond_t gate_cond;
    uint32_t nconnected; /* workers past their initial connects */
    bool go;
    bool abort;
    uint64_t t0, t_measure, t_end; /* warm-up start, window start, window end */
};

struct worker;

/* A connection. Lifecycle: created with its worker; CLOSED (no socket) →
 * CONNECTING → IDLE ⇄ BUSY (one request at a time) → CLOSED when either side
 * ends it; BACKOFF for a while after a failed connect. A conn that is not
 * CONNECTING or BUSY sits in exactly one of the worker's lists. */
struct conn {
    struct loop_watch watch; /* first: the callback casts back */
    struct worker *w;
    enum conn_state state;
    bool has_req;  /* a request is assigned (CONNECTING or BUSY) */
    bool measured; /* that request is in the measured window */
    bool ever_connected;
    bool fin_seen; /* the peer closed its side (or the socket failed) */
    uint64_t start_ns;
    uint64_t backoff_until;
    size_t sent;
    size_t rlen;
    char *rbuf; /* RECV_BUF_SIZE, part of the worker's block */
    struct http_resp resp;
    struct gen_stream *gs; /* --openai: the stream being read */
    struct conn *prev, *next;
};

struct conn_list {
    struct conn *head;
};

struct worker {
    struct loop loop;
    bool loop_ok;
    struct bench_shared *sh;
    uint32_t id;
    pthread_t thread;
    struct conn *conns;
    uint32_t nconns;
    char *rbufs;
    struct gen_stream *streams; /* --openai: one per connection */
    struct conn_list ready, closed, backoff;
    enum phase phase;
    uint32_t connect_pending; /* initial connects not yet finished */
    uint32_t connected_ok;    /* initial connects that succeeded */
    int first_connect_err;
    /* closed loop */
    uint32_t pending; /* requests to start as soon as a connection is free */
    /* open loop: this worker's request i is due at t0 + (i * stride + offset) / rate */
    uint64_t next_index;
    uint32_t stride, offset;
    double ns_per_req;
    uint64_t outstanding; /* measured requests assigned and not finished */
    struct loop_watch timer;
    uint64_t next_housekeeping;
    struct bench_stats st;
};

static void list_push(struct conn_list *l, struct conn *c)
{
    c->prev = NULL;
    c->next = l->head;
    if (l->head)
        l->head->prev = c;
    l->head = c;
}

static void list_remove(struct conn_list *l, struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static struct conn *list_pop(struct conn_list *l)
{
    struct conn *c = l->head;
    if (c)
        list_remove(l, c);
    return c;
}

static void worker_dispatch(struct worker *w, uint64_t now);
static void worker_check_done(struct worker *w, uint64_t now);
static void conn_on_events(struct loop_watch *watch, uint32_t events);

static bool in_window(const struct worker *w, uint64_t t)
{
    return t >= w->sh->t_measure && t < w->sh->t_end;
}

static bool counting(const struct worker *w, uint64_t now)
{
    return w->phase == P_RUN && now >= w->sh->t_measure;
}

static uint64_t open_due(const struct worker *w, uint64_t i)
{
    return w->sh->t0 + (uint64_t)(((double)i * w->stride + w->offset) * w->ns_per_req);
}

static void conn_close(struct conn *c)
{
    if (c->watch.fd >= 0) {
        loop_del(&c->w->loop, &c->watch);
        close(c->watch.fd);
        c->watch.fd = -1;
    }
    c->state = C_CLOSED;
    c->rlen = 0;
    c->fin_seen = false;
}

/* The assigned request is over (answered or failed): free the slot. */
static void request_finished(struct worker *w, struct conn *c, uint64_t now)
{
    c->has_req = false;
    if (c->measured)
        w->outstanding--;
    c->measured = false;
    if (!w->sh->open_loop && now < w->sh->t_end)
        w->pending++;
}

static void conn_fail(struct conn *c, enum err_kind kind, uint64_t now)
{
    struct worker *w = c->w;
    bool had_req = c->has_req;
    if (had_req && c->measured)
        w->st.errors[kind]++;
    if (had_req && c->gs)
        gen_stream_finish(c->gs, 0, c->measured, now, &w->st.gen);
    conn_close(c);
    if (kind == E_CONNECT) {
        c->state = C_BACKOFF;
        c->backoff_until = now + BACKOFF_NS;
        list_push(&w->backoff, c);
    } else {
        list_push(&w->closed, c);
    }
    if (had_req)
        request_finished(w, c, now);
}

static void conn_send(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    const char *req = w->sh->req;
    size_t len = w->sh->req_len;
    while (c->sent < len) {
        ssize_t n = send(c->watch.fd, req + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
            if (c->measured)
                w->st.bytes_sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* EPOLLOUT resumes */
        conn_fail(c, E_RESET, now);
        return;
    }
}

/* --openai: the decoded body of a 2xx response goes to the stream reader. */
static void conn_on_body(void *arg, const char *p, size_t n)
{
    struct conn *c = arg;
    if (c->resp.status >= 200 && c->resp.status < 300)
        gen_stream_feed(c->gs, p, n, clock_now_ns());
}

static void conn_start_request(struct conn *c, uint64_t now)
{
    const struct bench_shared *sh = c->w->sh;
    c->state = C_BUSY;
    c->sent = 0;
    c->rlen = 0;
    http_resp_init(&c->resp, sh->head_request);
    if (c->gs)
        gen_stream_begin(c->gs, c->start_ns, sh->t_measure, sh->t_end);
    conn_send(c, now);
}

static int conn_connect(struct conn *c)
{
    struct worker *w = c->w;
    int fd = http_connect_start(&w->sh->addr, w->sh->addrlen);
    if (fd < 0)
        return fd;
    c->watch.fd = fd;
    c->watch.on_events = conn_on_events;
    int rc = loop_add(&w->loop, &c->watch, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    if (rc) {
        close(fd);
        c->watch.fd = -1;
        return rc;
    }
    c->state = C_CONNECTING;
    return 0;
}

/* Hands a request to c, which is IDLE or CLOSED and in no list. */
static void conn_assign(struct conn *c, uint64_t start, uint64_t now)
{
    struct worker *w = c->w;
    c->has_req = true;
    c->start_ns = start;
    c->measured = in_window(w, start);
    if (c->measured)
        w->outstanding++;
    if (c->state == C_IDLE) {
        conn_start_request(c, now);
        return;
    }
    if (conn_connect(c) != 0)
        conn_fail(c, E_CONNECT, now);
}

/* The response is complete. must_close: the connection cannot carry
 * another request (bytes after the response, or the peer closed). */
static void conn_complete(struct conn *c, uint64_t now, bool must_close)
{
    struct worker *w = c->w;
    if (c->measured) {
        uint64_t lat = now - c->start_ns;
        hist_record(&w->st.latency, lat);
        if (status_admitted(c->resp.status))
            hist_record(&w->st.latency_ok, lat);
        else if (status_refused(c->resp.status))
            hist_record(&w->st.latency_refused, lat);
        w->st.status[c->resp.status]++;
    }
    if (c->gs)
        gen_stream_finish(c->gs, c->resp.status, c->measured, now, &w->st.gen);
    if (c->resp.keep_alive && !must_close) {
        c->state = C_IDLE;
        list_push(&w->ready, c);
    } else {
        conn_close(c);
        list_push(&w->closed, c);
    }
    request_finished(w, c, now);
}

/* Reads what the socket has for a BUSY connection and parses it, at most
 * READ_BUDGET reads per call (then the loop calls back later, so a large
 * response does not starve the other connections). After a FIN
 * (c->fin_seen) the connection is not reused even if the response said
 * keep-alive. */
static void conn_read(struct conn *c)
{
    struct worker *w = c->w;
    for (int budget = READ_BUDGET; budget > 0; budget--) {
        size_t space = RECV_BUF_SIZE - c->rlen;
        ssize_t n = recv(c->watch.fd, c->rbuf + c->rlen, space, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            conn_fail(c, E_RESET, clock_now_ns());
            return;
        }
        if (n == 0) {
            uint64_t now = clock_now_ns();
            if (http_resp_eof(&c->resp) == HTTP_RESP_DONE)
                conn_complete(c, now, true);
            else
                conn_fail(c, E_RESET, now); /* closed before or during the response */
            return;
        }
        if (c->measured)
            w->st.bytes_received += (uint64_t)n;
        c->rlen += (size_t)n;
        size_t used;
        int rc = http_resp_parse(&c->resp, c->rbuf, c->rlen, &used);
        if (used) {
            memmove(c->rbuf, c->rbuf + used, c->rlen - used);
            c->rlen -= used;
        }
        if (rc == HTTP_RESP_DONE) {
            conn_complete(c, clock_now_ns(), c->rlen != 0 || c->fin_seen);
            return;
        }
        if (rc == HTTP_RESP_ERROR || c->rlen == RECV_BUF_SIZE) {
            conn_fail(c, E_PARSE, clock_now_ns());
            return;
        }
        /* A short read drained the socket: the next arrival is a new edge.
         * Not so for a FIN already reported in this event: read on to see
         * the end of the connection. */
        if ((size_t)n < space && !c->fin_seen)
            return;
    }
    loop_defer(&w->loop, &c->watch); /* budget spent: on_events(c, 0) later */
}

static void initial_connect_done(struct worker *w, struct conn *c, int err);

static void conn_on_events(struct loop_watch *watch, uint32_t events)
{
    struct conn *c = (struct conn *)watch;
    struct worker *w = c->w;
    switch (c->state) {
    case C_CONNECTING: {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = http_connect_result(watch->fd);
        uint64_t now = clock_now_ns();
        if (w->phase == P_CONNECT) {
            initial_connect_done(w, c, err);
            return;
        }
        if (err) {
            conn_fail(c, E_CONNECT, now);
        } else {
            if (c->ever_connected && counting(w, now))
                w->st.reconnects++;
            c->ever_connected = true;
            if (c->has_req) {
                conn_start_request(c, now);
            } else {
                c->state = C_IDLE;
                list_push(&w->ready, c);
            }
        }
        break;
    }
    case C_BUSY:
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->fin_seen = true;
        if ((events & EPOLLOUT) && c->sent < w->sh->req_len)
            conn_send(c, clock_now_ns());
        /* events == 0: a deferred call after the read budget ran out. */
        if (c->state == C_BUSY &&
            (events == 0 || (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))))
            conn_read(c);
        break;
    case C_IDLE:
        /* Nothing is expected on an idle connection: the server closed it
         * (or sent something unsolicited, such as a 408). Reconnect later. */
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            list_remove(&w->ready, c);
            conn_close(c);
            list_push(&w->closed, c);
        }
        break;
    default:
        break;
    }
    if (w->phase == P_RUN) {
        uint64_t now = clock_now_ns();
        worker_dispatch(w, now);
        worker_check_done(w, now);
    }
}

/* Fails requests that have waited too long: in flight, or (open loop) due
 * and still without a connection. Ends back-off periods. */
static void worker_housekeeping(struct worker *w, uint64_t now)
{
    uint64_t timeout = w->sh->timeout_ns;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->has_req && now >= c->start_ns && now - c->start_ns >= timeout)
            conn_fail(c, E_TIMEOUT, now);
    }
    struct conn *c = w->backoff.head;
    while (c) {
        struct conn *next = c->next;
        if (now >= c->backoff_until) {
            list_remove(&w->backoff, c);
            c->state = C_CLOSED;
            list_push(&w->closed, c);
        }
        c = next;
    }
}

static struct conn *worker_free_conn(struct worker *w)
{
    struct conn *c = list_pop(&w->ready);
    return c ? c : list_pop(&w->closed);
}

static void worker_dispatch(struct worker *w, uint64_t now)
{
    const struct bench_shared *sh = w->sh;
    if (!sh->open_loop) {
        while (w->pending && now < sh->t_end) {
            struct conn *c = worker_free_conn(w);
            if (!c)
                return;
            w->pending--;
            conn_assign(c, now, now);
        }
        return;
    }
    for (;;) {
        uint64_t due = open_due(w, w->next_index);
        if (due > now || due >= sh->t_end)
            return;
        if (now - due >= sh->timeout_ns) {
            /* Waited for a connection past its timeout: never sent. */
            if (in_window(w, due))
                w->st.errors[E_TIMEOUT]++;
            w->next_index++;
            continue;
        }
        struct conn *c = worker_free_conn(w);
        if (!c)
            return;
        w->next_index++;
        conn_assign(c, due, now);
    }
}

static void worker_check_done(struct worker *w, uint64_t now)
{
    const struct bench_shared *sh = w->sh;
    if (w->phase != P_RUN || now < sh->t_end || w->outstanding)
        return;
    if (sh->open_loop && open_due(w, w->next_index) < sh->t_end)
        return;
    w->phase = P_DONE;
    loop_stop(&w->loop);
}

static void timer_arm(struct worker *w, uint64_t at)
{
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(at / 1000000000ull), .tv_nsec = (long)(at % 1000000000ull)},
    };
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1; /* zero would disarm */
    timerfd_settime(w->timer.fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void worker_start_run(struct worker *w);

static void timer_on_events(struct loop_watch *watch, uint32_t events)
{
    (void)events;
    struct worker *w = (struct worker *)((char *)watch - offsetof(struct worker, timer));
    uint64_t expirations;
    ssize_t ignored = read(watch->fd, &expirations, sizeof expirations);
    (void)ignored;
    uint64_t now = clock_now_ns();
    if (w->phase == P_CONNECT) {
        /* The initial connects took longer than the timeout: give up on the
         * ones still pending. */
        for (uint32_t i = 0; i < w->nconns && w->phase == P_CONNECT; i++) {
            struct conn *c = &w->conns[i];
            if (c->state == C_CONNECTING) {
                initial_connect_done(w, c, -ETIMEDOUT);
            }
        }
        return;
    }
    if (now >= w->next_housekeeping) {
        worker_housekeeping(w, now);
        w->next_housekeeping = now + HOUSEKEEPING_NS;
    }
    worker_dispatch(w, now);
    worker_check_done(w, now);
    if (w->phase != P_RUN)
        return;
    uint64_t next = w->next_housekeeping;
    if (now < w->sh->t_end && w->sh->t_end < next)
        next = w->sh->t_end;
    if (w->sh->open_loop) {
        uint64_t due = open_due(w, w->next_index);
        if (due > now && due < next)
            next = due;
    }
    timer_arm(w, next);
}

/* P_CONNECT: every connection tries once before the clock starts, so that
 * the first measured requests do not pay for the handshakes. */
static void initial_connect_done(struct worker *w, struct conn *c, int err)
{
    if (err) {
        if (!w->first_connect_err)
            w->first_connect_err = err;
        conn_close(c);
        c->state = C_BACKOFF;
        c->backoff_until = 0; /* the run starts with a retry */
        list_push(&w->backoff, c);
    } else {
        c->state = C_IDLE;
        c->ever_connected = true;
        w->connected_ok++;
        list_push(&w->ready, c);
    }
    if (--w->connect_pending == 0)
        worker_start_run(w);
}

static void worker_start_run(struct worker *w)
{
    struct bench_shared *sh = w->sh;
    /* Blocking here is fine: this thread has nothing else to do until the
     * main thread has seen every worker connect and set the start time. */
    pthread_mutex_lock(&sh->gate_lock);
    sh->nconnected++;
    pthread_cond_broadcast(&sh->gate_cond);
    while (!sh->go)
        pthread_cond_wait(&sh->gate_cond, &sh->gate_lock);
    pthread_mutex_unlock(&sh->gate_lock);
    if (sh->abort) {
        w->phase = P_DONE;
        loop_stop(&w->loop);
        return;
    }
    w->phase = P_RUN;
    uint64_t now = clock_now_ns();
    w->next_housekeeping = now; /* moves back-off conns to the closed list at once */
    worker_housekeeping(w, now);
    w->next_housekeeping = now + HOUSEKEEPING_NS;
    worker_dispatch(w, now);
    timer_arm(w, sh->open_loop ? open_due(w, w->next_index) : now + HOUSEKEEPING_NS);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16]; /* the kernel's limit, NUL included */
    snprintf(name, sizeof name, "bench-%u", w->id);
    pthread_setname_np(pthread_self(), name);
    uint64_t now = clock_now_ns();
    w->connect_pending = w->nconns;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        int rc = conn_connect(c);
        if (rc != 0) {
            c->state = C_CONNECTING; /* so that the failure is accounted once */
            initial_connect_done(w, c, rc);
        }
    }
    if (w->phase == P_CONNECT)
        timer_arm(w, now + w->sh->timeout_ns);
    if (w->phase != P_DONE && loop_run(&w->loop) != 0)
        fprintf(stderr, "inferd bench: event loop failed: %s\n", strerror(errno));
    for (uint32_t i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    return NULL;
}

static int worker_init(struct worker *w, struct bench_shared *sh, uint32_t id, uint32_t nconns,
                       uint32_t concurrency, uint32_t nthreads)
{
    memset(w, 0, sizeof *w);
    w->sh = sh;
    w->id = id;
    w->nconns = nconns;
    w->pending = concurrency;
    w->stride = nthreads;
    w->offset = id;
    w->ns_per_req = sh->open_loop ? 1e9 / sh->o->rate : 0;
    w->timer.fd = -1;
    hist_init(&w->st.latency);
    hist_init(&w->st.latency_ok);
    hist_init(&w->st.latency_refused);
    gen_stats_init(&w->st.gen);
    w->conns = mem_calloc(nconns, sizeof *w->conns);
    w->rbufs = mem_alloc((size_t)nconns * RECV_BUF_SIZE);
    if (!w->conns || !w->rbufs)
        return -ENOMEM;
    if (sh->o->openai) {
        w->streams = mem_calloc(nconns, sizeof *w->streams);
        if (!w->streams)
            return -ENOMEM;
    }
    for (uint32_t i = 0; i < nconns; i++) {
        struct conn *c = &w->conns[i];
        c->w = w;
        c->watch.fd = -1;
        c->rbuf = w->rbufs + (size_t)i * RECV_BUF_SIZE;
        if (w->streams) {
            if (gen_stream_init(&w->streams[i]) != 0)
                return -ENOMEM;
            c->gs = &w->streams[i];
            c->resp.on_body = conn_on_body;
            c->resp.body_arg = c;
        }
    }
    int rc = loop_init(&w->loop);
    if (rc)
        return rc;
    w->loop_ok = true;
    w->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->timer.fd < 0)
        return -errno;
    w->timer.on_events = timer_on_events;
    return loop_add(&w->loop, &w->timer, EPOLLIN);
}

static void worker_free(struct worker *w)
{
    if (w->timer.fd >= 0) {
        loop_del(&w->loop, &w->timer);
        close(w->timer.fd);
    }
    if (w->loop_ok)
        loop_close(&w->loop);
    if (w->streams)
        for (uint32_t i = 0; i < w->nconns; i++)
            gen_stream_free(&w->streams[i]);
    mem_free(w->streams);
    mem_free(w->conns);
    mem_free(w->rbufs);
}

/* ---- report ------------------------------------------------------------- */

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

/* A number with one decimal ("38470.0", "95.5"): fixed notation reads
 * better than the shortest round-trip form ("3.847e+04"). */
static void json_w_fixed1(struct json_writer *w, double v)
{
    char s[64];
    int n = snprintf(s, sizeof s, "%.1f", isfinite(v) ? v : 0.0);
    json_w_raw(w, s, (size_t)n);
}

struct report_info {
    const char *authority;
    const char *method;
    const char *target;
    size_t request_bytes;
    size_t body_bytes;
};

static void write_config(struct json_writer *jw, const struct bench_options *o,
                         const struct report_info *ri)
{
    json_w_key(jw, "config");
    json_w_obj_begin(jw);
    json_w_key(jw, "url");
    json_w_cstr(jw, o->url);
    json_w_key(jw, "mode");
    json_w_cstr(jw, o->rate > 0 ? "open" : "closed");
    json_w_key(jw, "model");
    o->model ? json_w_cstr(jw, o->model) : json_w_null(jw);
    json_w_key(jw, "version");
    o->version ? json_w_cstr(jw, o->version) : json_w_null(jw);
    json_w_key(jw, "format");
    o->model ? json_w_cstr(jw, o->format == BENCH_FORMAT_BINARY ? "binary" : "json")
             : json_w_null(jw);
    json_w_key(jw, "batch");
    json_w_uint(jw, o->batch);
    json_w_key(jw, "path");
    o->path ? json_w_cstr(jw, o->path) : json_w_null(jw);
    json_w_key(jw, "body_file");
    o->body_file ? json_w_cstr(jw, o->body_file) : json_w_null(jw);
    json_w_key(jw, "method");
    json_w_cstr(jw, ri->method);
    json_w_key(jw, "target");
    json_w_cstr(jw, ri->target);
    json_w_key(jw, "headers");
    json_w_arr_begin(jw);
    for (uint32_t i = 0; i < o->nheaders; i++)
        json_w_cstr(jw, o->headers[i]);
    json_w_arr_end(jw);
    json_w_key(jw, "connections");
    json_w_uint(jw, o->connections);
    json_w_key(jw, "concurrency");
    o->rate > 0 ? json_w_null(jw) : json_w_uint(jw, o->concurrency);
    json_w_key(jw, "rate");
    o->rate > 0 ? json_w_f64(jw, o->rate) : json_w_null(jw);
    json_w_key(jw, "duration_s");
    json_w_f64(jw, o->duration_s);
    json_w_key(jw, "warmup_s");
    json_w_f64(jw, o->warmup_s);
    json_w_key(jw, "threads");
    json_w_uint(jw, o->threads);
    json_w_key(jw, "timeout_ms");
    json_w_uint(jw, o->timeout_ms);
    json_w_key(jw, "request_bytes");
    json_w_uint(jw, ri->request_bytes);
    json_w_key(jw, "body_bytes");
    json_w_uint(jw, ri->body_bytes);
    json_w_key(jw, "openai");
    o->openai ? json_w_cstr(jw, o->openai) : json_w_null(jw);
    if (o->openai) {
        json_w_key(jw, "prompt");
        json_w_cstr(jw, o->prompt);
        json_w_key(jw, "max_tokens");
        json_w_uint(jw, o->max_tokens);
        json_w_key(jw, "temperature");
        json_w_f64(jw, o->temperature);
        json_w_key(jw, "seed");
        o->has_seed ? json_w_uint(jw, o->seed) : json_w_null(jw);
    }
    json_w_obj_end(jw);
}

static const double report_percentiles[] = {50, 90, 99, 99.9};
static const char *const report_json_keys[] = {"p50", "p90", "p99", "p999"};
static const char *const report_text_keys[] = {"p50", "p90", "p99", "p99.9"};

/* "key": {"p50", "p90", "p99", "p999", "max", "mean"} in µs; all 0 when empty. */
static void write_latency(struct json_writer *jw, const char *key, const struct hist *h)
{
    json_w_key(jw, key);
    json_w_obj_begin(jw);
    for (size_t i = 0; i < sizeof report_percentiles / sizeof report_percentiles[0]; i++) {
        json_w_key(jw, report_json_keys[i]);
        json_w_fixed1(jw, us(hist_percentile(h, report_percentiles[i])));
    }
    json_w_key(jw, "max");
    json_w_fixed1(jw, us(hist_max(h)));
    json_w_key(jw, "mean");
    json_w_fixed1(jw, hist_mean(h) / 1000.0);
    json_w_obj_end(jw);
}

static double tokens_per_request(const struct gen_stats *g)
{
    return g->ok ? (double)g->completion_tokens / (double)g->ok : 0.0;
}

/* "generation": what --openai measured (gen_stream.h). */
static void write_generation(struct json_writer *jw, const struct bench_options *o,
                             const struct gen_stats *g)
{
    json_w_key(jw, "generation");
    json_w_obj_begin(jw);
    json_w_key(jw, "requests_ok");
    json_w_uint(jw, g->ok);
    json_w_key(jw, "requests_failed");
    json_w_uint(jw, g->failed);
    json_w_key(jw, "tokens");
    json_w_fixed1(jw, g->window_tokens);
    json_w_key(jw, "tokens_per_s");
    json_w_fixed1(jw, g->window_tokens / o->duration_s);
    json_w_key(jw, "completion_tokens");
    json_w_uint(jw, g->completion_tokens);
    json_w_key(jw, "prompt_tokens");
    json_w_uint(jw, g->prompt_tokens);
    json_w_key(jw, "tokens_per_request");
    json_w_fixed1(jw, tokens_per_request(g));
    json_w_key(jw, "finish");
    json_w_obj_begin(jw);
    for (int k = 0; k < GEN_FINISH_COUNT; k++) {
        json_w_key(jw, gen_finish_names[k]);
        json_w_uint(jw, g->finish[k]);
    }
    json_w_obj_end(jw);
    write_latency(jw, "ttft_us", &g->ttft);
    write_latency(jw, "tpot_us", &g->tpot);
    json_w_obj_end(jw);
}

static void report_json(const struct bench_options *o, const struct report_info *ri,
                        const struct bench_stats *st)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    struct json_writer jw;
    json_w_init(&jw, &b);
    uint64_t n = st->latency.count;
    json_w_obj_begin(&jw);
    json_w_key(&jw, "requests");
    json_w_uint(&jw, n);
    json_w_key(&jw, "duration_s");
    json_w_f64(&jw, o->duration_s);
    json_w_key(&jw, "rps");
    json_w_fixed1(&jw, (double)n / o->duration_s);
    write_latency(&jw, "latency_us", &st->latency);
    json_w_key(&jw, "requests_ok");
    json_w_uint(&jw, st->latency_ok.count);
    json_w_key(&jw, "rps_ok");
    json_w_fixed1(&jw, (double)st->latency_ok.count / o->duration_s);
    write_latency(&jw, "latency_us_ok", &st->latency_ok);
    json_w_key(&jw, "requests_refused");
    json_w_uint(&jw, st->latency_refused.count);
    write_latency(&jw, "latency_us_refused", &st->latency_refused);
    json_w_key(&jw, "status");
    json_w_obj_begin(&jw);
    for (int s = 100; s < 600; s++) {
        if (!st->status[s])
            continue;
        char key[12];
        snprintf(key, sizeof key, "%d", s);
        json_w_key(&jw, key);
        json_w_uint(&jw, st->status[s]);
    }
    json_w_obj_end(&jw);
    json_w_key(&jw, "errors");
    json_w_obj_begin(&jw);
    for (int k = 0; k < E_COUNT; k++) {
        json_w_key(&jw, err_names[k]);
        json_w_uint(&jw, st->errors[k]);
    }
    json_w_obj_end(&jw);
    json_w_key(&jw, "bytes_sent");
    json_w_uint(&jw, st->bytes_sent);
    json_w_key(&jw, "bytes_received");
    json_w_uint(&jw, st->bytes_received);
    json_w_key(&jw, "reconnects");
    json_w_uint(&jw, st->reconnects);
    if (o->openai)
        write_generation(&jw, o, &st->gen);
    write_config(&jw, o, ri);
    json_w_obj_end(&jw);
    buf_putc(&b, '\n');
    if (!b.err)
        fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
}

static void print_bytes(const char *label, uint64_t n)
{
    if (n >= 10ull << 20)
        printf("%s %.1f MiB", label, (double)n / (1 << 20));
    else if (n >= 10ull << 10)
        printf("%s %.1f KiB", label, (double)n / (1 << 10));
    else
        printf("%s %llu B", label, (unsigned long long)n);
}

static void print_latency(const char *label, const struct hist *h)
{
    printf("%s", label);
    for (size_t i = 0; i < sizeof report_percentiles / sizeof report_percentiles[0]; i++)
        printf(" %s %.1f ", report_text_keys[i], us(hist_percentile(h, report_percentiles[i])));
    printf(" max %.1f  mean %.1f\n", us(hist_max(h)), hist_mean(h) / 1000.0);
}

static void report_text(const struct bench_options *o, const struct report_info *ri,
                        const struct bench_stats *st)
{
    uint64_t n = st->latency.count;
    printf("inferd bench: %s http://%s%s (", ri->method, ri->authority, ri->target);
    if (o->model)
        printf("model %s, %s, batch %u, ", o->model,
               o->format == BENCH_FORMAT_BINARY ? "binary" : "json", o->batch);
    if (o->openai)
        printf("model %s, streamed, max_tokens %u, temperature %g, ", o->openai, o->max_tokens,
               o->temperature);
    printf("%zu-byte request)\n", ri->request_bytes);
    if (o->rate > 0)
        printf("open loop: %g req/s on %u connections", o->rate, o->connections);
    else
        printf("closed loop: %u in flight on %u connections", o->concurrency, o->connections);
    printf(", %u thread%s; %g s measured after %g s warm-up\n\n", o->threads,
           o->threads == 1 ? "" : "s", o->duration_s, o->warmup_s);
    printf("  requests    %llu in %g s = %.1f req/s\n", (unsigned long long)n, o->duration_s,
           (double)n / o->duration_s);
    print_latency("  latency µs ", &st->latency);
    printf("  admitted    %llu (2xx) = %.1f req/s\n", (unsigned long long)st->latency_ok.count,
           (double)st->latency_ok.count / o->duration_s);
    print_latency("    latency µs ", &st->latency_ok);
    printf("  refused     %llu (429, 503)\n", (unsigned long long)st->latency_refused.count);
    print_latency("    latency µs ", &st->latency_refused);
    printf("  status     ");
    bool any = false;
    for (int s = 100; s < 600; s++) {
        if (st->status[s]) {
            printf(" %d: %llu", s, (unsigned long long)st->status[s]);
            any = true;
        }
    }
    printf("%s\n", any ? "" : " (none)");
    printf("  errors     ");
    for (int k = 0; k < E_COUNT; k++)
        printf(" %s %llu%s", err_names[k], (unsigned long long)st->errors[k],
               k + 1 < E_COUNT ? "," : "\n");
    printf("  reconnects  %llu\n", (unsigned long long)st->reconnects);
    if (o->openai) {
        const struct gen_stats *g = &st->gen;
        printf("  generation  %llu ok, %llu failed; %.1f tokens/s in the window (%.0f tokens), "
               "%.1f tokens/request\n",
               (unsigned long long)g->ok, (unsigned long long)g->failed,
               g->window_tokens / o->duration_s, g->window_tokens, tokens_per_request(g));
        print_latency("    TTFT µs    ", &g->ttft);
        print_latency("    TPOT µs    ", &g->tpot);
        printf("    finish     ");
        for (int k = 0; k < GEN_FINISH_COUNT; k++)
            printf(" %s %llu%s", gen_finish_names[k], (unsigned long long)g->finish[k],
                   k + 1 < GEN_FINISH_COUNT ? "," : "\n");
    }
    print_bytes("  bytes       sent", st->bytes_sent);
    print_bytes(", received", st->bytes_received);
    printf("\n");
}

/* ---- main --------------------------------------------------------------- */

/* Makes room for the sockets: raise the soft descriptor limit if needed. */
static void raise_fd_limit(uint32_t needed)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= needed)
        return;
    rl.rlim_cur = rl.rlim_max < needed ? rl.rlim_max : needed;
    setrlimit(RLIMIT_NOFILE, &rl);
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
    if (!user_header(o, "host"))
        buf_printf(&req, "Host: %s\r\n", u->authority);
    buf_puts(&req, "Accept: application/json\r\nConnection: close\r\n");
    for (uint32_t i = 0; i < o->nheaders; i++)
        if (!header_named(o->headers[i], "content-type"))
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

static void merge_stats(struct bench_stats *total, const struct bench_stats *st)
{
    hist_merge(&total->latency, &st->latency);
    hist_merge(&total->latency_ok, &st->latency_ok);
    hist_merge(&total->latency_refused, &st->latency_refused);
    for (int s = 0; s < 600; s++)
        total->status[s] += st->status[s];
    for (int k = 0; k < E_COUNT; k++)
        total->errors[k] += st->errors[k];
    total->bytes_sent += st->bytes_sent;
    total->bytes_received += st->bytes_received;
    total->reconnects += st->reconnects;
    gen_stats_merge(&total->gen, &st->gen);
}

/* While the workers run: the elapsed share of warm-up + measured window on
 * stderr when it is a terminal (bench/progress.h), erased at the end. */
static void show_progress(const struct bench_shared *sh)
{
    struct progress p;
    progress_start(&p, stderr, "inferd bench");
    if (!p.on)
        return;
    for (uint64_t now = clock_now_ns(); now < sh->t_end; now = clock_now_ns()) {
        progress_update(&p, (double)(now - sh->t0) / (double)(sh->t_end - sh->t0),
                        now < sh->t_measure ? "warm-up" : "measuring");
        uint64_t left = sh->t_end - now;
        struct timespec ts = {0, (long)(left < 200000000ull ? left : 200000000ull)};
        nanosleep(&ts, NULL);
    }
    progress_end(&p);
}

/* Runs the workers and merges their statistics into *total. Returns 0, or
 * 1 when nothing could connect or the threads could not be set up. */
static int run(const struct bench_options *o, struct bench_shared *sh, struct bench_stats *total)
{
    uint32_t nthreads = o->threads;
    struct worker *workers = mem_calloc(nthreads, sizeof *workers);
    if (!workers) {
        fprintf(stderr, "inferd bench: out of memory\n");
        return 1;
    }
    int rc = 1;
    uint32_t started = 0;
    pthread_mutex_init(&sh->gate_lock, NULL);
    pthread_cond_init(&sh->gate_cond, NULL);
    for (uint32_t i = 0; i < nthreads; i++) {
        uint32_t nconns = o->connections / nthreads + (i < o->connections % nthreads);
        uint32_t conc = o->concurrency / nthreads + (i < o->concurrency % nthreads);
        int err = worker_init(&workers[i], sh, i, nconns, sh->open_loop ? 0 : conc, nthreads);
        if (err) {
            fprintf(stderr, "inferd bench: cannot set up client thread: %s\n", strerror(-err));
            goto out_open_gate;
        }
    }
    for (; started < nthreads; started++) {
        int err = pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]);
        if (err) {
            fprintf(stderr, "inferd bench: cannot start thread: %s\n", strerror(err));
            goto out_open_gate;
        }
    }
    pthread_mutex_lock(&sh->gate_lock);
    while (sh->nconnected < nthreads)
        pthread_cond_wait(&sh->gate_cond, &sh->gate_lock);
    pthread_mutex_unlock(&sh->gate_lock);
    uint32_t connected = 0;
    int first_err = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        connected += workers[i].connected_ok;
        if (!first_err)
            first_err = workers[i].first_connect_err;
    }
    if (connected == 0) {
        fprintf(stderr, "inferd bench: cannot connect to %s: %s\n", o->url,
                strerror(first_err ? -first_err : ECONNREFUSED));
        goto out_open_gate;
    }
    if (connected < o->connections)
        fprintf(stderr, "inferd bench: warning: only %u of %u connections could be opened (%s)\n",
                connected, o->connections, strerror(-first_err));
    sh->t0 = clock_now_ns();
    sh->t_measure = sh->t0 + (uint64_t)(o->warmup_s * 1e9);
    sh->t_end = sh->t_measure + (uint64_t)(o->duration_s * 1e9);
    rc = 0;
out_open_gate:
    pthread_mutex_lock(&sh->gate_lock);
    sh->abort = rc != 0;
    sh->go = true;
    pthread_cond_broadcast(&sh->gate_cond);
    pthread_mutex_unlock(&sh->gate_lock);
    if (rc == 0)
        show_progress(sh);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    for (uint32_t i = 0; i < nthreads; i++) {
        if (rc == 0)
            merge_stats(total, &workers[i].st);
        worker_free(&workers[i]);
    }
    pthread_cond_destroy(&sh->gate_cond);
    pthread_mutex_destroy(&sh->gate_lock);
    mem_free(workers);
    return rc;
}

int bench_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--generate-floor") == 0)
            return gen_floor_main(argc, argv);
    struct bench_options o;
    int rc = parse_bench_args(argc, argv, &o);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;
    struct http_url u;
    const char *uerr;
    if (http_url_parse(o.url, &u, &uerr) != 0)
        return bench_usage_error(PROG, "--url %s: %s", o.url, uerr);

    struct bench_shared sh = {
        .o = &o, .open_loop = o.rate > 0, .timeout_ns = (uint64_t)o.timeout_ms * 1000000ull};
    char msg[512];
    if (http_url_resolve(&u, &sh.addr, &sh.addrlen, msg, sizeof msg) != 0) {
        fprintf(stderr, "inferd bench: %s\n", msg);
        return 1;
    }

    struct buf body, req, target;
    buf_init(&body, MAX_BODY_BYTES);
    buf_init(&req, MAX_BODY_BYTES + (1 << 20));
    buf_init(&target, 64 * 1024);
    struct bench_stats *total = NULL;
    size_t json_len = 0;
    const char *method;
    const char *content_type = NULL, *accept = NULL;
    bool has_body;
    rc = 1;
    if (o.openai) {
        struct gen_request gr = {.model = o.openai,
                                 .prompt = o.prompt,
                                 .max_tokens = o.max_tokens,
                                 .temperature = o.temperature,
                                 .has_seed = o.has_seed,
                                 .seed = o.seed};
        gen_request_body(&body, &gr);
        method = "POST";
        has_body = true;
        content_type = "application/json";
        accept = "text/event-stream";
        buf_puts(&target, u.prefix);
        buf_puts(&target, "/v1/completions");
    } else if (o.model) {
        if (build_model_body(&o, &u, &sh.addr, sh.addrlen, &body, &json_len) != 0)
            goto out;
        method = "POST";
        has_body = true;
        content_type =
            o.format == BENCH_FORMAT_BINARY ? "application/octet-stream" : "application/json";
        put_model_path(&target, &u, &o, "/infer");
    } else {
        if (o.body_file && read_file(o.body_file, &body, msg, sizeof msg) != 0) {
            rc = bench_usage_error(PROG, "%s", msg);
            goto out;
        }
        method = o.method ? o.method : o.body_file ? "POST" : "GET";
        has_body = o.body_file || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
        if (o.body_file && body.len && !user_header(&o, "content-type"))
            content_type = "application/octet-stream";
        buf_puts(&target, u.prefix);
        buf_puts(&target, o.path);
    }
    if (target.err) {
        rc = bench_usage_error(PROG, "request target too long");
        goto out;
    }
    buf_putc(&target, '\0');
    put_head(&req, &o, &u, method, target.data, has_body, body.len, content_type, accept, json_len);
    buf_append(&req, body.data, body.len);
    if (req.err) {
        fprintf(stderr, "inferd bench: request too large\n");
        goto out;
    }
    sh.req = req.data;
    sh.req_len = req.len;
    sh.head_request = strcmp(method, "HEAD") == 0;

    total = mem_alloc(sizeof *total);
    if (!total) {
        fprintf(stderr, "inferd bench: out of memory\n");
        goto out;
    }
    memset(total, 0, sizeof *total);
    hist_init(&total->latency);
    hist_init(&total->latency_ok);
    hist_init(&total->latency_refused);
    gen_stats_init(&total->gen);
    raise_fd_limit(o.connections + 64);
    rc = run(&o, &sh, total);
    if (rc == 0) {
        struct report_info ri = {.authority = u.authority,
                                 .method = method,
                                 .target = target.data,
                                 .request_bytes = req.len,
                                 .body_bytes = body.len};
        if (o.json)
            report_json(&o, &ri, total);
        else
            report_text(&o, &ri, total);
        fflush(stdout);
    }
out:
    mem_free(total);
    buf_free(&body);
    buf_free(&req);
    buf_free(&target);
    return rc;
}
