/* The settings of `inferd serve`: flags, file keys, defaults and checks; see cli/serve_options.h.
 */
#include "cli/serve_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpc/grpc.h"
#include "api/http_obs.h"
#include "api/rest/infer.h"
#include "api/streams.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "cluster/etcd.h"
#include "http/http1.h"

/* See docs/execution.md, "Choosing the inline budget". */
#define DEFAULT_INLINE_BUDGET_US 5000

const char serve_usage_text[] =
    "usage: inferd serve [options]\n"
    "\n"
    "Serves every model of a Triton-style repository (<repo>/<model>/<version>/model.onnx)\n"
    "over the KServe v2 / Open Inference Protocol: REST (HTTP/1.1 and HTTP/2) and gRPC.\n"
    "\n"
    "configuration file (docs/configuration.md):\n"
    "  --config FILE              read settings from a YAML file: every flag below is a key\n"
    "                             (http-port: 8000), flags given here override it; SIGHUP\n"
    "                             rereads it (log-level, access-log-sample, trace-rate and\n"
    "                             the policy sections apply at once, the rest at restart)\n"
    "  --check-config FILE        validate FILE and the flags, print \"FILE: ok\" and exit 0,\n"
    "                             or print the error and exit 2 (nothing is started)\n"
    "\n"
    "models:\n"
    "  --model-repository DIR     model repository (default: models)\n"
    "  --model-control-mode MODE  none: load every model at start (default); poll: also\n"
    "                             reload changed models; explicit: load only --load-model\n"
    "                             models and accept the repository load/unload API\n"
    "  --repository-poll-secs N   poll mode: rescan the repository every N s (default: 15)\n"
    "  --load-model NAME          explicit mode: load NAME at start (repeatable; * = all)\n"
    "  --backend-directory DIR    where backend plugins libinferd_<name>.so are looked for\n"
    "                             after the model's own directory\n"
    "  --queue-limit N            requests waiting per model, more get 429 (default: 1024)\n"
    "  --queue-budget-ms N|auto|off  longest estimated wait in a model's queue for a request\n"
    "                             without its own timeout, when the model's config has no\n"
    "                             queue policy: a request that would wait longer gets 503\n"
    "                             with Retry-After at once (default: auto = 2 runs of a full\n"
    "                             batch of the model, at least 5 ms; off or 0 = none)\n"
    "  --model-memory-budget N    host memory in bytes all loaded model versions may take\n"
    "                             (each as measured when it loaded, in the statistics'\n"
    "                             memory_usage): a load whose files do not fit in what is\n"
    "                             left is refused before it starts (default: 0 = no budget)\n"
    "  --inline-budget-us N       an I/O thread runs a model's batch itself when the model's\n"
    "                             recent run time is at most N us and an instance is free\n"
    "                             (run to completion, no thread hand-off); slower models run\n"
    "                             on the worker pool (default: 5000; 0 = always the pool)\n"
    "  --worker-threads N         worker pool threads shared by all models (default: one per\n"
    "                             usable CPU)\n"
    "  --ort-intra-op-threads N   ONNX Runtime threads per operator and instance (default: 1;\n"
    "                             0 = max(1, usable CPUs / instances))\n"
    "  --ort-inter-op-threads N   ONNX Runtime threads across operators (default: 1)\n"
    "\n"
    "generative models (docs/generative.md):\n"
    "  --kv-cache-bytes N         KV cache budget shared by every generative model; a sequence\n"
    "                             takes blocks as it grows, waits (or gets 503 at its deadline)\n"
    "                             when its prompt does not fit, and the youngest running one is\n"
    "                             preempted when the cache is full\n"
    "                             (default: 268435456)\n"
    "  --max-running-sequences N  sequences a generative model decodes together (its running\n"
    "                             set, batched at every step; default: 64)\n"
    "  --prefill-chunk N          prompt tokens per prefill run: a long prompt joins the\n"
    "                             running set over several steps (default: 64)\n"
    "  --no-prefix-cache          never share KV cache blocks between sequences whose tokens\n"
    "                             begin the same way (default: shared, vLLM's prefix caching)\n"
    "  --usage-file FILE          keep the token metering (GET /v2/usage) in FILE across\n"
    "                             restarts, rewritten atomically every 5 s when it changed\n"
    "                             (default: in memory only)\n"
    "  --usage-retention-days N   days of metering kept, today included (default: 400)\n"
    "\n"
    "preprocessing (docs/preprocessing.md):\n"
    "  --preprocess-threads N     threads that decode images, sounds and texts into tensors\n"
    "                             for models with preprocess.json (default: one per usable CPU)\n"
    "  --preprocess-queue N       requests waiting for those threads; more get 503 with\n"
    "                             Retry-After (default: 1024)\n"
    "\n"
    "listening:\n"
    "  --host ADDR                address to listen on (default: 0.0.0.0)\n"
    "  --http-port N              HTTP port, HTTP/1.1 and HTTP/2 (default: 8000;\n"
    "                             0 = any free port)\n"
    "  --grpc-port N              gRPC port, HTTP/2 only (default: 8001; 0 = any free port)\n"
    "  --metrics-port N           Prometheus metrics port, GET /metrics (default: 8002;\n"
    "                             0 = any free port)\n"
    "  --no-metrics               do not open the metrics port\n"
    "  --io-threads N             event-loop threads serving connections (default: the CPUs\n"
    "                             this process may use: affinity mask and cgroup CPU quota;\n"
    "                             at most 64)\n"
    "  --tls-cert FILE            PEM certificate chain: TLS on the HTTP and gRPC ports\n"
    "                             (with --tls-key; SIGHUP reloads both files)\n"
    "  --tls-key FILE             PEM private key of --tls-cert\n"
    "  --tls-client-ca FILE       PEM CA certificates: require and verify client\n"
    "                             certificates (mutual TLS)\n"
    "  --cors-allow-origin ORIGIN browsers on ORIGIN (scheme://host[:port], or * for any)\n"
    "                             may call the HTTP port, gRPC-Web included: preflights\n"
    "                             answered, CORS headers on every answer (repeatable)\n"
    "  --server-name NAME         the server's name in its metadata (GET /v2, gRPC\n"
    "                             ServerMetadata; default: inferd; `triton` for clients\n"
    "                             that check for Triton's)\n"
    "  --http3                    also serve HTTP/3 (QUIC) on UDP, on the HTTP port's\n"
    "                             number; needs --tls-cert/--tls-key (not --tls-client-ca);\n"
    "                             TLS answers advertise it (Alt-Svc)\n"
    "  --http3-0rtt               accept 0-RTT early data on HTTP/3 (off: early data can\n"
    "                             be replayed; see docs/protocols.md)\n"
    "\n"
    "limits and timeouts:\n"
    "  --max-request-line BYTES   longest request line, else 414 (default: 8192)\n"
    "  --max-header-bytes BYTES   largest request head, else 431 (default: 65536)\n"
    "  --max-headers N            most header fields, else 431 (default: 100)\n"
    "  --max-body-bytes BYTES     largest request body, else 413 (default: 67108864)\n"
    "  --grpc-max-message-bytes BYTES  largest gRPC request message, else RESOURCE_EXHAUSTED\n"
    "                             (default: 67108864)\n"
    "  --h2-max-concurrent-streams N  HTTP/2 streams per connection (default: 128)\n"
    "  --max-connections N        open connections; more are refused (default: 10000)\n"
    "  --header-timeout-secs N    a request head must arrive within N s, else 408 (default: 30)\n"
    "  --idle-timeout-secs N      close keep-alive connections idle for N s (default: 300)\n"
    "  --write-timeout-secs N     close a connection whose response makes no progress for N s\n"
    "                             (a client that stops reading; default: 60)\n"
    "  --exit-timeout-secs N      on SIGTERM, wait at most N s for requests to finish (default: "
    "30)\n"
    "  --sse-keepalive-ms N       a comment goes out on an event stream (generate_stream)\n"
    "                             idle for N ms, so proxies keep it open (default: 15000)\n"
    "  --stream-resume-secs N     an OpenAI API stream whose client left keeps generating\n"
    "                             for N s, resumable with Last-Event-ID; then it is\n"
    "                             cancelled (default: 10; 0: cancel at once, no resume)\n"
    "\n"
    "logging and tracing:\n"
    "  --log-level LEVEL          error, warn, info or debug (default: info)\n"
    "  --log-format FORMAT        json or text: the access log's lines (default: json) and,\n"
    "                             when given, the server's own log lines (default: text)\n"
    "  --access-log FILE          one line per request to FILE (appended; reopened on\n"
    "                             SIGHUP) or - for stdout (default: off)\n"
    "  --access-log-sample RATIO  fraction of requests logged, 0..1 (default: 1)\n"
    "  --trace-rate RATIO         fraction of requests traced when no sampled traceparent\n"
    "                             decides, 0..1 (default: 0; a traceparent's flag is honoured)\n"
    "  --otlp-endpoint URL        export spans with OTLP/HTTP JSON, e.g.\n"
    "                             http://127.0.0.1:4318/v1/traces (default: none)\n"
    "  --otlp-interval-ms N       longest wait before buffered spans are sent (default: 1000)\n"
    "\n"
    "cluster (docs/deploy.md):\n"
    "  --etcd-endpoints URL[,URL] register this instance in etcd (v3 API, through its\n"
    "                             HTTP/JSON gateway: http://host:port) under a lease kept\n"
    "                             alive; deregistered first on SIGTERM (default: off)\n"
    "  --etcd-prefix PREFIX       key prefix: the key is PREFIXinstances/ID (default: /inferd/)\n"
    "  --etcd-lease-ttl SECS      lease TTL: a dead instance's key goes within it (default: 10)\n"
    "  --advertise-host HOST      the address others reach this instance at (default: --host\n"
    "                             unless 0.0.0.0, else the first non-loopback IPv4 address,\n"
    "                             else 127.0.0.1)\n"
    "  --instance-id ID           this instance's name in etcd (default: hostname:http-port)\n"
    "\n"
    "  -h, --help                 this text\n";

static const struct option getopt_table[] = {
    {"model-repository", required_argument, NULL, SERVE_OPT_REPO},
    {"model-control-mode", required_argument, NULL, SERVE_OPT_CONTROL_MODE},
    {"repository-poll-secs", required_argument, NULL, SERVE_OPT_POLL_SECS},
    {"load-model", required_argument, NULL, SERVE_OPT_LOAD_MODEL},
    {"cors-allow-origin", required_argument, NULL, SERVE_OPT_CORS_ORIGIN},
    {"backend-directory", required_argument, NULL, SERVE_OPT_BACKEND_DIR},
    {"host", required_argument, NULL, SERVE_OPT_HOST},
    {"http-port", required_argument, NULL, SERVE_OPT_PORT},
    {"io-threads", required_argument, NULL, SERVE_OPT_IO_THREADS},
    {"worker-threads", required_argument, NULL, SERVE_OPT_WORKER_THREADS},
    {"inline-budget-us", required_argument, NULL, SERVE_OPT_INLINE_BUDGET},
    {"max-request-line", required_argument, NULL, SERVE_OPT_MAX_REQUEST_LINE},
    {"max-header-bytes", required_argument, NULL, SERVE_OPT_MAX_HEADER_BYTES},
    {"max-headers", required_argument, NULL, SERVE_OPT_MAX_HEADERS},
    {"max-body-bytes", required_argument, NULL, SERVE_OPT_MAX_BODY},
    {"max-connections", required_argument, NULL, SERVE_OPT_MAX_CONNECTIONS},
    {"header-timeout-secs", required_argument, NULL, SERVE_OPT_HEADER_TIMEOUT},
    {"idle-timeout-secs", required_argument, NULL, SERVE_OPT_IDLE_TIMEOUT},
    {"queue-limit", required_argument, NULL, SERVE_OPT_QUEUE_LIMIT},
    {"model-memory-budget", required_argument, NULL, SERVE_OPT_MODEL_MEMORY_BUDGET},
    {"queue-budget-ms", required_argument, NULL, SERVE_OPT_QUEUE_BUDGET},
    {"kv-cache-bytes", required_argument, NULL, SERVE_OPT_KV_CACHE_BYTES},
    {"max-running-sequences", required_argument, NULL, SERVE_OPT_MAX_RUNNING_SEQUENCES},
    {"prefill-chunk", required_argument, NULL, SERVE_OPT_PREFILL_CHUNK},
    {"usage-file", required_argument, NULL, SERVE_OPT_USAGE_FILE},
    {"usage-retention-days", required_argument, NULL, SERVE_OPT_USAGE_RETENTION},
    {"exit-timeout-secs", required_argument, NULL, SERVE_OPT_EXIT_TIMEOUT},
    {"write-timeout-secs", required_argument, NULL, SERVE_OPT_WRITE_TIMEOUT},
    {"ort-intra-op-threads", required_argument, NULL, SERVE_OPT_INTRA},
    {"ort-inter-op-threads", required_argument, NULL, SERVE_OPT_INTER},
    {"log-level", required_argument, NULL, SERVE_OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, SERVE_OPT_LOG_FORMAT},
    {"access-log", required_argument, NULL, SERVE_OPT_ACCESS_LOG},
    {"access-log-sample", required_argument, NULL, SERVE_OPT_ACCESS_LOG_SAMPLE},
    {"trace-rate", required_argument, NULL, SERVE_OPT_TRACE_RATE},
    {"otlp-endpoint", required_argument, NULL, SERVE_OPT_OTLP_ENDPOINT},
    {"otlp-interval-ms", required_argument, NULL, SERVE_OPT_OTLP_INTERVAL},
    {"grpc-port", required_argument, NULL, SERVE_OPT_GRPC_PORT},
    {"h2-max-concurrent-streams", required_argument, NULL, SERVE_OPT_H2_STREAMS},
    {"tls-cert", required_argument, NULL, SERVE_OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, SERVE_OPT_TLS_KEY},
    {"tls-client-ca", required_argument, NULL, SERVE_OPT_TLS_CLIENT_CA},
    {"metrics-port", required_argument, NULL, SERVE_OPT_METRICS_PORT},
    {"no-metrics", no_argument, NULL, SERVE_OPT_NO_METRICS},
    {"no-prefix-cache", no_argument, NULL, SERVE_OPT_NO_PREFIX_CACHE},
    {"http3", no_argument, NULL, SERVE_OPT_HTTP3},
    {"http3-0rtt", no_argument, NULL, SERVE_OPT_HTTP3_0RTT},
    {"grpc-max-message-bytes", required_argument, NULL, SERVE_OPT_GRPC_MAX_MESSAGE},
    {"sse-keepalive-ms", required_argument, NULL, SERVE_OPT_SSE_KEEPALIVE},
    {"stream-resume-secs", required_argument, NULL, SERVE_OPT_STREAM_RESUME},
    {"preprocess-threads", required_argument, NULL, SERVE_OPT_PREPROCESS_THREADS},
    {"preprocess-queue", required_argument, NULL, SERVE_OPT_PREPROCESS_QUEUE},
    {"etcd-endpoints", required_argument, NULL, SERVE_OPT_ETCD_ENDPOINTS},
    {"etcd-prefix", required_argument, NULL, SERVE_OPT_ETCD_PREFIX},
    {"etcd-lease-ttl", required_argument, NULL, SERVE_OPT_ETCD_LEASE_TTL},
    {"advertise-host", required_argument, NULL, SERVE_OPT_ADVERTISE_HOST},
    {"instance-id", required_argument, NULL, SERVE_OPT_INSTANCE_ID},
    {"server-name", required_argument, NULL, SERVE_OPT_SERVER_NAME},
    {"config", required_argument, NULL, SERVE_OPT_CONFIG},
    {"check-config", required_argument, NULL, SERVE_OPT_CHECK_CONFIG},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int serve_option_find(const char *name, int *id, enum serve_option_kind *kind)
{
    for (const struct option *t = getopt_table; t->name; t++) {
        if (t->val < SERVE_OPT_REPO || t->val >= SERVE_OPT_CONFIG || strcmp(t->name, name) != 0)
            continue;
        *id = t->val;
        *kind = t->has_arg == no_argument ? SERVE_OPTION_SWITCH
                : t->val == SERVE_OPT_LOAD_MODEL || t->val == SERVE_OPT_CORS_ORIGIN
                    ? SERVE_OPTION_REPEATED
                    : SERVE_OPTION_VALUE;
        return 0;
    }
    return ST_ERROR;
}

const char *serve_option_name(int id)
{
    for (const struct option *t = getopt_table; t->name; t++)
        if (t->val == id)
            return t->name;
    return "?";
}

bool serve_option_reloadable(int id)
{
    return id == SERVE_OPT_LOG_LEVEL || id == SERVE_OPT_ACCESS_LOG_SAMPLE ||
           id == SERVE_OPT_TRACE_RATE;
}

void serve_options_defaults(struct serve_options *o)
{
    *o = (struct serve_options){
        .repo = {.load = {.repository = "models",
                          .intra_op_threads = 1,
                          .inter_op_threads = 1,
                          .queue_limit = 1024,
                          .queue_budget_us = SCHED_QUEUE_BUDGET_AUTO},
                 .mode = CONTROL_NONE,
                 .poll_secs = 15},
        .http = {.host = "0.0.0.0",
                 .port = 8000,
                 .limits = {.max_request_line = 8192,
                            .max_header_bytes = 65536,
                            .max_headers = 100,
                            .max_body = 64ull << 20},
                 .max_connections = 10000,
                 .header_timeout_ms = 30000,
                 .idle_timeout_ms = 300000,
                 .write_timeout_ms = 60000,
                 .max_response_bytes = 1ull << 30,
                 .grpc_listen = true,
                 .grpc_port = 8001,
                 .h2_max_concurrent_streams = 128,
                 .on_response = http_obs_on_response},
        .gen = {.kv_cache_bytes = GEN_DEFAULT_KV_CACHE_BYTES,
                .max_running = GEN_DEFAULT_MAX_RUNNING,
                .prefill_chunk = GEN_DEFAULT_PREFILL_CHUNK},
        .usage = {.retention_days = USAGE_DEFAULT_RETENTION_DAYS},
        .inline_budget_us = DEFAULT_INLINE_BUDGET_US,
        .exit_timeout_secs = 30,
        .metrics_port = 8002,
        .grpc_max_message_bytes = GRPC_DEFAULT_MAX_MESSAGE_BYTES,
        .sse_keepalive_ms = REST_SSE_KEEPALIVE_MS,
        .stream_resume_secs = STREAM_RESUME_SECS,
        .preprocess_queue = 1024,
        .log_level = LOG_INFO,
        .log_format = -1,
        .etcd = {.prefix = "/inferd/", .lease_ttl_s = 10},
    };
    o->access_log.sample = 1;
    o->trace = (struct trace_settings){.level = TRACE_LEVEL_TIMESTAMPS, .rate = 0, .count = -1};
}

/* A decimal integer in [lo, hi]. */
static int parse_num(const char *s, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out, struct error *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        return error_set(err, 400, "expected a number from %llu to %llu, got '%s'", lo, hi, s);
    *out = v;
    return 0;
}

/* A number in [0, 1]. */
static int parse_ratio(const char *s, double *out, struct error *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= 1))
        return error_set(err, 400, "expected a number from 0 to 1, got '%s'", s);
    *out = v;
    return 0;
}

/* One of names[] (NULL-terminated): its index, or ST_ERROR with "expected <list>". */
static int parse_word(const char *s, const char *const *names, const char *list, struct error *err)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return error_set(err, 400, "expected %s", list);
}

/* The flags whose value is a number in a range, and where it goes. */
struct num_option {
    int id;
    unsigned long long lo, hi;
    unsigned scale; /* stored value = value * scale */
    size_t offset;  /* in struct serve_options */
    size_t size;    /* of the field: 4 or 8 bytes */
};

#define NUM(id, lo, hi, scale, field)                                                              \
    {                                                                                              \
        id, lo, hi, scale, offsetof(struct serve_options, field),                                  \
            sizeof(((struct serve_options *)0)->field)                                             \
    }

static const struct num_option num_options[] = {
    NUM(SERVE_OPT_POLL_SECS, 1, 86400, 1, repo.poll_secs),
    NUM(SERVE_OPT_PORT, 0, 65535, 1, http.port),
    NUM(SERVE_OPT_IO_THREADS, 1, 256, 1, io_threads),
    NUM(SERVE_OPT_WORKER_THREADS, 1, 1024, 1, worker_threads),
    NUM(SERVE_OPT_INLINE_BUDGET, 0, 10000000, 1, inline_budget_us),
    NUM(SERVE_OPT_MAX_REQUEST_LINE, 64, 1 << 20, 1, http.limits.max_request_line),
    NUM(SERVE_OPT_MAX_HEADER_BYTES, 256, 16 << 20, 1, http.limits.max_header_bytes),
    NUM(SERVE_OPT_MAX_HEADERS, 1, HTTP1_MAX_HEADERS_CAP, 1, http.limits.max_headers),
    NUM(SERVE_OPT_MAX_BODY, 0, 4ull << 30, 1, http.limits.max_body),
    NUM(SERVE_OPT_MAX_CONNECTIONS, 1, 1000000, 1, http.max_connections),
    NUM(SERVE_OPT_HEADER_TIMEOUT, 1, 3600, 1000, http.header_timeout_ms),
    NUM(SERVE_OPT_IDLE_TIMEOUT, 1, 86400, 1000, http.idle_timeout_ms),
    NUM(SERVE_OPT_WRITE_TIMEOUT, 1, 3600, 1000, http.write_timeout_ms),
    NUM(SERVE_OPT_GRPC_PORT, 0, 65535, 1, http.grpc_port),
    NUM(SERVE_OPT_H2_STREAMS, 1, 65536, 1, http.h2_max_concurrent_streams),
    NUM(SERVE_OPT_EXIT_TIMEOUT, 0, 86400, 1, exit_timeout_secs),
    NUM(SERVE_OPT_METRICS_PORT, 0, 65535, 1, metrics_port),
    NUM(SERVE_OPT_QUEUE_LIMIT, 1, 1000000, 1, repo.load.queue_limit),
    NUM(SERVE_OPT_MODEL_MEMORY_BUDGET, 0, 1ull << 50, 1, repo.load.memory_budget),
    NUM(SERVE_OPT_GRPC_MAX_MESSAGE, 1024, 1ull << 31, 1, grpc_max_message_bytes),
    NUM(SERVE_OPT_SSE_KEEPALIVE, 100, 3600000, 1, sse_keepalive_ms),
    NUM(SERVE_OPT_STREAM_RESUME, 0, 86400, 1, stream_resume_secs),
    NUM(SERVE_OPT_INTRA, 0, 1024, 1, repo.load.intra_op_threads),
    NUM(SERVE_OPT_KV_CACHE_BYTES, 1ull << 16, 1ull << 40, 1, gen.kv_cache_bytes),
    NUM(SERVE_OPT_MAX_RUNNING_SEQUENCES, 1, 1024, 1, gen.max_running),
    NUM(SERVE_OPT_PREFILL_CHUNK, 1, 4096, 1, gen.prefill_chunk),
    NUM(SERVE_OPT_USAGE_RETENTION, 1, 36500, 1, usage.retention_days),
    NUM(SERVE_OPT_PREPROCESS_THREADS, 1, 256, 1, preprocess_threads),
    NUM(SERVE_OPT_PREPROCESS_QUEUE, 1, 1000000, 1, preprocess_queue),
    NUM(SERVE_OPT_INTER, 0, 1024, 1, repo.load.inter_op_threads),
    NUM(SERVE_OPT_OTLP_INTERVAL, 1, 3600000, 1, otlp.interval_ms),
    NUM(SERVE_OPT_ETCD_LEASE_TTL, 2, 3600, 1, etcd.lease_ttl_s),
};

static int apply_num(struct serve_options *o, const struct num_option *n, const char *value,
                     struct error *err)
{
    unsigned long long v = 0;
    if (parse_num(value, n->lo, n->hi, &v, err) != 0)
        return ST_ERROR;
    v *= n->scale;
    char *field = (char *)o + n->offset;
    if (n->size == sizeof(uint64_t)) {
        uint64_t v64 = v;
        memcpy(field, &v64, sizeof v64);
    } else {
        uint32_t v32 = (uint32_t)v; /* every 4-byte field's range fits int and uint32 */
        memcpy(field, &v32, sizeof v32);
    }
    return 0;
}

int serve_option_apply(struct serve_options *o, int id, const char *value, struct error *err)
{
    static const char *const modes[] = {"none", "poll", "explicit", NULL};
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    static const char *const formats[] = {"json", "text", NULL};
    _Static_assert(LOG_ERROR == 0 && LOG_WARN == 1 && LOG_INFO == 2 && LOG_DEBUG == 3,
                   "levels[] follows enum log_level");
    _Static_assert(LOG_LINE_JSON == 0 && LOG_LINE_TEXT == 1, "formats[] follows the enum");
    for (size_t i = 0; i < sizeof num_options / sizeof num_options[0]; i++)
        if (num_options[i].id == id)
            return apply_num(o, &num_options[i], value, err);
    int w;
    switch (id) {
    case SERVE_OPT_REPO:
        o->repo.load.repository = value;
        return 0;
    case SERVE_OPT_BACKEND_DIR:
        o->repo.load.backend_directory = value;
        return 0;
    case SERVE_OPT_HOST:
        o->http.host = value;
        return 0;
    case SERVE_OPT_TLS_CERT:
        o->tls.cert_file = value;
        return 0;
    case SERVE_OPT_TLS_KEY:
        o->tls.key_file = value;
        return 0;
    case SERVE_OPT_TLS_CLIENT_CA:
        o->tls.client_ca_file = value;
        return 0;
    case SERVE_OPT_ACCESS_LOG:
        o->access_log.path = value;
        return 0;
    case SERVE_OPT_USAGE_FILE:
        o->usage.path = value;
        return 0;
    case SERVE_OPT_OTLP_ENDPOINT:
        o->otlp.endpoint = value;
        return 0;
    case SERVE_OPT_ETCD_ENDPOINTS:
        o->etcd.endpoints = value;
        return 0;
    case SERVE_OPT_ETCD_PREFIX:
        if (value[0] == '\0' || strlen(value) > 256)
            return error_set(err, 400, "expected a key prefix of 1 to 256 bytes");
        o->etcd.prefix = value;
        return 0;
    case SERVE_OPT_ADVERTISE_HOST:
        if (value[0] == '\0' || strlen(value) >= 256 || strpbrk(value, " /\"\\"))
            return error_set(err, 400, "expected a host name or address, got '%s'", value);
        o->etcd.advertise_host = value;
        return 0;
    case SERVE_OPT_INSTANCE_ID:
        if (value[0] == '\0' || strlen(value) >= 128 || strchr(value, '/'))
            return error_set(err, 400, "expected 1 to 127 bytes without '/', got '%s'", value);
        o->etcd.instance_id = value;
        return 0;
    case SERVE_OPT_SERVER_NAME:
        if (value[0] == '\0' || strlen(value) > 64 || strpbrk(value, "\"\\"))
            return error_set(err, 400, "expected a name of 1 to 64 bytes without quotes");
        for (const char *c = value; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return error_set(err, 400, "expected a name without control characters");
        o->server_name = value;
        return 0;
    case SERVE_OPT_NO_PREFIX_CACHE:
        o->gen.no_prefix_cache = true;
        return 0;
    case SERVE_OPT_NO_METRICS:
        o->metrics_port = -1;
        return 0;
    case SERVE_OPT_HTTP3:
        o->http3 = true;
        return 0;
    case SERVE_OPT_HTTP3_0RTT:
        o->http3_0rtt = true;
        return 0;
    case SERVE_OPT_ACCESS_LOG_SAMPLE:
        return parse_ratio(value, &o->access_log.sample, err);
    case SERVE_OPT_TRACE_RATE:
        return parse_ratio(value, &o->trace.rate, err);
    case SERVE_OPT_QUEUE_BUDGET: {
        static const char *const words[] = {"auto", "off", NULL};
        unsigned long long ms = 0;
        if ((w = parse_word(value, words, "", err)) >= 0)
            o->repo.load.queue_budget_us = w == 0 ? SCHED_QUEUE_BUDGET_AUTO : 0;
        else if (parse_num(value, 0, 3600000, &ms, err) == 0)
            o->repo.load.queue_budget_us = ms * 1000u;
        else
            return error_set(err, 400, "expected auto, off or a number of ms from 0 to 3600000, "
                                       "got '%s'", value);
        return 0;
    }
    case SERVE_OPT_LOAD_MODEL:
        if (o->repo.nload_models == MAX_LOAD_MODELS)
            return error_set(err, 400, "at most %d models", MAX_LOAD_MODELS);
        o->load_models[o->repo.nload_models++] = value;
        return 0;
    case SERVE_OPT_CORS_ORIGIN:
        return cors_add_origin(&o->cors, value, err);
    case SERVE_OPT_CONTROL_MODE:
        if ((w = parse_word(value, modes, "none, poll or explicit", err)) < 0)
            return ST_ERROR;
        o->repo.mode = w == 0 ? CONTROL_NONE : w == 1 ? CONTROL_POLL : CONTROL_EXPLICIT;
        return 0;
    case SERVE_OPT_LOG_LEVEL:
        if ((w = parse_word(value, levels, "error, warn, info or debug", err)) < 0)
            return ST_ERROR;
        o->log_level = w;
        return 0;
    case SERVE_OPT_LOG_FORMAT:
        if ((w = parse_word(value, formats, "json or text", err)) < 0)
            return ST_ERROR;
        o->log_format = w;
        return 0;
    default:
        return error_set(err, 400, "not a setting");
    }
}

int serve_options_check(struct serve_options *o, struct error *err)
{
    if (o->repo.nload_models && o->repo.mode != CONTROL_EXPLICIT)
        return error_set(err, 400, "--load-model needs --model-control-mode explicit");
    if (!o->tls.cert_file != !o->tls.key_file)
        return error_set(err, 400, "--tls-cert and --tls-key go together");
    if (o->tls.client_ca_file && !o->tls.cert_file)
        return error_set(err, 400, "--tls-client-ca needs --tls-cert and --tls-key");
    if (o->http3 && !o->tls.cert_file)
        return error_set(err, 400,
                         "--http3 needs --tls-cert and --tls-key (QUIC is always encrypted)");
    if (o->http3 && o->tls.client_ca_file)
        return error_set(err, 400,
                         "--http3 does not support client certificates (--tls-client-ca)");
    if (o->http3_0rtt && !o->http3)
        return error_set(err, 400, "--http3-0rtt needs --http3");
    if (!o->etcd.endpoints && (o->etcd.advertise_host || o->etcd.instance_id))
        return error_set(err, 400, "--advertise-host and --instance-id need --etcd-endpoints");
    if (o->etcd.endpoints && etcd_endpoints_check(o->etcd.endpoints, err) != 0)
        return ST_ERROR;
    o->repo.load_models = o->load_models;
    return 0;
}

/* ---- the command line ----------------------------------------------------- */

void serve_cmdline_parse(int argc, char **argv, struct serve_cmdline *out)
{
    *out = (struct serve_cmdline){0};
    out->flags = mem_calloc((size_t)argc, sizeof *out->flags);
    if (!out->flags) {
        fputs("inferd: out of memory\n", stderr);
        exit(2);
    }
    /* Each value is checked on a scratch copy as it comes, so that the
     * first bad flag is the one reported. */
    struct serve_options scratch;
    serve_options_defaults(&scratch);
    bool config_given = false, check_given = false;
    struct error err;
    int c, idx;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", getopt_table, &idx)) != -1) {
        switch (c) {
        case 'h':
            fputs(serve_usage_text, stdout);
            exit(0);
        case SERVE_OPT_CONFIG:
        case SERVE_OPT_CHECK_CONFIG:
            if (c == SERVE_OPT_CONFIG ? check_given : config_given) {
                fputs("inferd serve: --config and --check-config exclude each other\n", stderr);
                exit(2);
            }
            *(c == SERVE_OPT_CONFIG ? &config_given : &check_given) = true;
            out->config_path = optarg;
            out->check_only = c == SERVE_OPT_CHECK_CONFIG;
            break;
        case '?':
            fputs("try 'inferd serve --help'\n", stderr);
            exit(2);
        default:
            error_clear(&err);
            if (serve_option_apply(&scratch, c, optarg, &err) != 0) {
                fprintf(stderr, "inferd: --%s: %s\n", getopt_table[idx].name, err.msg);
                exit(2);
            }
            out->flags[out->nflags++] = (struct serve_flag){.id = c, .value = optarg};
        }
    }
    if (optind < argc) {
        fprintf(stderr, "inferd serve: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
}

void serve_cmdline_apply(const struct serve_cmdline *c, struct serve_options *o)
{
    bool models_replaced = false, origins_replaced = false;
    for (uint32_t i = 0; i < c->nflags; i++) {
        const struct serve_flag *f = &c->flags[i];
        if (f->id == SERVE_OPT_LOAD_MODEL && !models_replaced) {
            o->repo.nload_models = 0; /* the command line's list replaces the file's */
            models_replaced = true;
        }
        if (f->id == SERVE_OPT_CORS_ORIGIN && !origins_replaced) {
            o->cors = (struct cors){0}; /* likewise */
            origins_replaced = true;
        }
        struct error err;
        error_clear(&err);
        serve_option_apply(o, f->id, f->value, &err); /* checked by serve_cmdline_parse */
    }
}

bool serve_cmdline_has(const struct serve_cmdline *c, int id)
{
    for (uint32_t i = 0; i < c->nflags; i++)
        if (c->flags[i].id == id)
            return true;
    return false;
}

void serve_cmdline_free(struct serve_cmdline *c)
{
    mem_free(c->flags);
    c->flags = NULL;
    c->nflags = 0;
}

/* ---- settings a reload applies ---------------------------------------------- */

void serve_runtime_of(const struct serve_options *o, struct serve_runtime *out)
{
    *out = (struct serve_runtime){.log_level = o->log_level,
                                  .access_log_sample = o->access_log.sample,
                                  .trace_rate = o->trace.rate};
}

void serve_runtime_apply(struct serve_runtime *cur, const struct serve_runtime *next)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    if (next->log_level != cur->log_level) {
        log_set_level((enum log_level)next->log_level);
        log_info("config: log-level is now %s", levels[next->log_level]);
    }
    if (next->access_log_sample != cur->access_log_sample) {
        accesslog_set_sample(next->access_log_sample);
        log_info("config: access-log-sample is now %g", next->access_log_sample);
    }
    if (next->trace_rate != cur->trace_rate) {
        struct trace_update u = {.set[TRACE_FIELD_RATE] = true};
        u.values.rate = next->trace_rate;
        struct error err;
        error_clear(&err);
        if (trace_settings_update(NULL, &u, &err) == 0)
            log_info("config: trace-rate is now %g", next->trace_rate);
        else
            log_error("config: trace-rate not applied: %s", err.msg);
    }
    *cur = *next;
}
