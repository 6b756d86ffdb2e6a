#include "bench/bench_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/bench_args.h"

#define MAX_CONNECTIONS 20000
#define MAX_PROMPT_BYTES (1u << 20)
#define MAX_STREAM_CONNECTIONS 4096 /* --openai: each holds a 64 KiB event buffer */
#define DEFAULT_PROMPT "And God said"

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

bool bench_header_named(const char *h, const char *name)
{
    size_t n = strlen(name);
    return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

bool bench_options_has_header(const struct bench_options *o, const char *name)
{
    for (uint32_t i = 0; i < o->nheaders; i++)
        if (bench_header_named(o->headers[i], name))
            return true;
    return false;
}

/* One option of bench_options_parse() (bench_getopt()'s fn). */
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
            rc = bench_usage_error(BENCH_PROG, "--format: expected json or binary, got '%s'", arg);
        break;
    case OPT_BATCH:
        o->batch_set = true;
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, 1 << 20, &o->batch);
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
        if (o->nheaders == BENCH_MAX_HEADERS)
            rc = bench_usage_error(BENCH_PROG, "--header: at most %d headers", BENCH_MAX_HEADERS);
        else if (!header_ok(arg))
            rc = bench_usage_error(BENCH_PROG, "--header: expected 'Name: value', got '%s'", arg);
        else if (bench_header_named(arg, "content-length") ||
                 bench_header_named(arg, "transfer-encoding"))
            rc = bench_usage_error(BENCH_PROG, "--header: %s is set by inferd bench itself", arg);
        else
            o->headers[o->nheaders++] = arg;
        break;
    case OPT_CONNECTIONS:
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, MAX_CONNECTIONS, &o->connections);
        break;
    case OPT_CONCURRENCY:
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, MAX_CONNECTIONS, &o->concurrency);
        break;
    case OPT_RATE:
        rc = bench_parse_f64(BENCH_PROG, name, arg, 1e-3, 1e8, &o->rate);
        break;
    case OPT_DURATION:
        rc = bench_parse_f64(BENCH_PROG, name, arg, 1e-3, 1e7, &o->duration_s);
        break;
    case OPT_WARMUP:
        rc = bench_parse_f64(BENCH_PROG, name, arg, 0, 1e7, &o->warmup_s);
        break;
    case OPT_THREADS:
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, 1024, &o->threads);
        break;
    case OPT_TIMEOUT:
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, 3600000, &o->timeout_ms);
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
            rc = bench_usage_error(BENCH_PROG, "--prompt: at most %u bytes", MAX_PROMPT_BYTES);
        break;
    case OPT_MAX_TOKENS:
        o->gen_set = true;
        rc = bench_parse_u32(BENCH_PROG, name, arg, 1, 1 << 20, &o->max_tokens);
        break;
    case OPT_TEMPERATURE:
        o->gen_set = true;
        rc = bench_parse_f64(BENCH_PROG, name, arg, 0, 2, &o->temperature);
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
                BENCH_PROG, "--seed: expected a whole number from 0 to 2^64-1, got '%s'", arg);
        break;
    }
    }
    return rc;
}

int bench_options_parse(int argc, char **argv, struct bench_options *o)
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
    int rc = bench_getopt(BENCH_PROG, argc, argv, bench_options_table, bench_usage_text,
                          bench_option, o);
    if (rc)
        return rc;
    if (!o->model && !o->path && !o->openai)
        return bench_usage_error(BENCH_PROG,
                                 "say what to load: --model NAME, --openai MODEL or --path PATH");
    if (o->openai && (o->model || o->path || o->body_file || o->method))
        return bench_usage_error(
            BENCH_PROG, "--openai excludes --model and raw mode (--path, --body-file, --method)");
    if (!o->openai && o->gen_set)
        return bench_usage_error(BENCH_PROG,
                                 "--prompt, --max-tokens, --temperature and --seed need --openai");
    if (o->openai && o->connections > MAX_STREAM_CONNECTIONS)
        return bench_usage_error(BENCH_PROG, "--openai: at most %d --connections",
                                 MAX_STREAM_CONNECTIONS);
    if (o->model && (o->path || o->body_file || o->method))
        return bench_usage_error(
            BENCH_PROG, "--model and raw mode (--path, --body-file, --method) exclude each other");
    if (!o->model && (o->version || o->format_set || o->batch_set))
        return bench_usage_error(BENCH_PROG, "--version, --format and --batch need --model");
    if (o->body_file && !o->path)
        return bench_usage_error(BENCH_PROG, "--body-file needs --path");
    if (o->path && o->path[0] != '/')
        return bench_usage_error(BENCH_PROG, "--path must start with '/'");
    if (o->path && strpbrk(o->path, " \r\n\t"))
        return bench_usage_error(BENCH_PROG,
                                 "--path must not contain spaces or control characters");
    if (o->method) {
        for (const char *p = o->method; *p; p++)
            if (!is_token_char((unsigned char)*p))
                return bench_usage_error(BENCH_PROG, "--method: invalid method '%s'", o->method);
        if (!o->method[0])
            return bench_usage_error(BENCH_PROG, "--method: empty method");
    }
    if (o->rate > 0 && o->concurrency)
        return bench_usage_error(
            BENCH_PROG, "--rate (open loop) and --concurrency (closed loop) exclude each other");
    if (o->concurrency > o->connections)
        return bench_usage_error(
            BENCH_PROG,
            "--concurrency %u needs at least as many --connections (one request "
            "in flight per connection)",
            o->concurrency);
    if (o->threads > o->connections)
        return bench_usage_error(BENCH_PROG, "--threads %u exceeds --connections %u", o->threads,
                                 o->connections);
    if (!o->concurrency)
        o->concurrency = o->connections;
    return 0;
}
