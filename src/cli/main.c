/*
 * inferd command line: `inferd serve` runs the server; `inferd bench` and
 * `inferd routing` (cli/routing_cmd.h) are clients of one; `--help`, `--version`.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/grpc.h"
#include "api/obs_http.h"
#include "api/rest.h"
#include "base/clock.h"
#include "base/cpus.h"
#include "base/log.h"
#include "base/mem.h"
#include "bench/bench.h"
#include "cli/pipeline.h"
#include "cli/routing_cmd.h"
#include "http/server.h"
#include "model/model.h"
#include "net/loop.h"
#include "net/tls.h"
#include "obs/accesslog.h"
#include "obs/batch_obs.h"
#include "obs/load_obs.h"
#include "obs/otlp.h"
#include "obs/request.h"
#include "obs/sysinfo.h"
#include "obs/trace.h"
#include "policy/routing.h"
#include "sched/pool.h"
#include "serve/shm.h"

#define MAX_LOAD_MODELS 256
/* See docs/execution.md, "Choosing the inline budget". */
#define DEFAULT_INLINE_BUDGET_US 5000

struct serve_options {
    struct repository_options repo;
    const char *load_models[MAX_LOAD_MODELS];
    struct http_server_config http;
    int io_threads; /* 0: --io-threads not given, see default_io_threads() */
    int worker_threads;        /* 0: --worker-threads not given: one per usable CPU */
    uint64_t inline_budget_us; /* run to completion under this estimate */
    uint32_t exit_timeout_secs;
    struct tls_options tls; /* cert_file NULL: plaintext */
    int metrics_port; /* -1 = --no-metrics */
    struct obs_sources obs;
    uint64_t grpc_max_message_bytes;
    uint64_t sse_keepalive_ms;
    /* Access log and tracing (obs/). */
    struct accesslog_config access_log; /* path NULL = off */
    int log_format;                     /* enum log_line_format; -1 = not given */
    struct trace_settings trace;
    struct otlp_config otlp;            /* endpoint NULL = no export */
};

static const char usage_text[] =
    "usage: inferd <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve        serve the models of a repository over KServe v2 REST and gRPC\n"
    "  bench        load-test a server (KServe v2 infer requests or any endpoint)\n"
    "  routing      read or change a model's routing table on a running server\n"
    "               (canary, A/B, shadow: docs/traffic.md)\n"
    "\n"
    "  inferd --help | -h       this text\n"
    "  inferd --version | -V    print the version\n"
    "  inferd serve --help      options of serve\n"
    "  inferd bench --help      options of bench\n"
    "  inferd routing --help    options of routing\n";

static const char serve_usage_text[] =
    "usage: inferd serve [options]\n"
    "\n"
    "Serves every model of a Triton-style repository (<repo>/<model>/<version>/model.onnx)\n"
    "over the KServe v2 / Open Inference Protocol: REST (HTTP/1.1 and HTTP/2) and gRPC.\n"
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
    "  --exit-timeout-secs N      on SIGTERM, wait at most N s for requests to finish (default: 30)\n"
    "  --sse-keepalive-ms N       a comment goes out on an event stream (generate_stream)\n"
    "                             idle for N ms, so proxies keep it open (default: 15000)\n"
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
    "  -h, --help                 this text\n";

enum {
    OPT_REPO = 256,
    OPT_CONTROL_MODE,
    OPT_POLL_SECS,
    OPT_LOAD_MODEL,
    OPT_BACKEND_DIR,
    OPT_HOST,
    OPT_PORT,
    OPT_IO_THREADS,
    OPT_WORKER_THREADS,
    OPT_INLINE_BUDGET,
    OPT_MAX_REQUEST_LINE,
    OPT_MAX_HEADER_BYTES,
    OPT_MAX_HEADERS,
    OPT_MAX_BODY,
    OPT_MAX_CONNECTIONS,
    OPT_HEADER_TIMEOUT,
    OPT_IDLE_TIMEOUT,
    OPT_QUEUE_LIMIT,
    OPT_EXIT_TIMEOUT,
    OPT_WRITE_TIMEOUT,
    OPT_INTRA,
    OPT_INTER,
    OPT_LOG_LEVEL,
    OPT_LOG_FORMAT,
    OPT_ACCESS_LOG,
    OPT_ACCESS_LOG_SAMPLE,
    OPT_TRACE_RATE,
    OPT_OTLP_ENDPOINT,
    OPT_OTLP_INTERVAL,
    OPT_GRPC_PORT,
    OPT_H2_STREAMS,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_CLIENT_CA,
    OPT_METRICS_PORT,
    OPT_NO_METRICS,
    OPT_GRPC_MAX_MESSAGE,
    OPT_SSE_KEEPALIVE,
};

static const struct option serve_options_table[] = {
    {"model-repository", required_argument, NULL, OPT_REPO},
    {"model-control-mode", required_argument, NULL, OPT_CONTROL_MODE},
    {"repository-poll-secs", required_argument, NULL, OPT_POLL_SECS},
    {"load-model", required_argument, NULL, OPT_LOAD_MODEL},
    {"backend-directory", required_argument, NULL, OPT_BACKEND_DIR},
    {"host", required_argument, NULL, OPT_HOST},
    {"http-port", required_argument, NULL, OPT_PORT},
    {"io-threads", required_argument, NULL, OPT_IO_THREADS},
    {"worker-threads", required_argument, NULL, OPT_WORKER_THREADS},
    {"inline-budget-us", required_argument, NULL, OPT_INLINE_BUDGET},
    {"max-request-line", required_argument, NULL, OPT_MAX_REQUEST_LINE},
    {"max-header-bytes", required_argument, NULL, OPT_MAX_HEADER_BYTES},
    {"max-headers", required_argument, NULL, OPT_MAX_HEADERS},
    {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"header-timeout-secs", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"idle-timeout-secs", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"queue-limit", required_argument, NULL, OPT_QUEUE_LIMIT},
    {"exit-timeout-secs", required_argument, NULL, OPT_EXIT_TIMEOUT},
    {"write-timeout-secs", required_argument, NULL, OPT_WRITE_TIMEOUT},
    {"ort-intra-op-threads", required_argument, NULL, OPT_INTRA},
    {"ort-inter-op-threads", required_argument, NULL, OPT_INTER},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"access-log-sample", required_argument, NULL, OPT_ACCESS_LOG_SAMPLE},
    {"trace-rate", required_argument, NULL, OPT_TRACE_RATE},
    {"otlp-endpoint", required_argument, NULL, OPT_OTLP_ENDPOINT},
    {"otlp-interval-ms", required_argument, NULL, OPT_OTLP_INTERVAL},
    {"grpc-port", required_argument, NULL, OPT_GRPC_PORT},
    {"h2-max-concurrent-streams", required_argument, NULL, OPT_H2_STREAMS},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"tls-client-ca", required_argument, NULL, OPT_TLS_CLIENT_CA},
    {"metrics-port", required_argument, NULL, OPT_METRICS_PORT},
    {"no-metrics", no_argument, NULL, OPT_NO_METRICS},
    {"grpc-max-message-bytes", required_argument, NULL, OPT_GRPC_MAX_MESSAGE},
    {"sse-keepalive-ms", required_argument, NULL, OPT_SSE_KEEPALIVE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses a decimal integer in [lo, hi] or exits with status 2. */
static unsigned long long parse_num(const char *flag, const char *s, unsigned long long lo,
                                    unsigned long long hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "inferd: --%s: expected a number from %llu to %llu, got '%s'\n", flag,
                lo, hi, s);
        exit(2);
    }
    return v;
}

/* Parses a number in [0, 1] or exits with status 2. */
static double parse_ratio(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= 1)) {
        fprintf(stderr, "inferd: --%s: expected a number from 0 to 1, got '%s'\n", flag, s);
        exit(2);
    }
    return v;
}

/* The default number of I/O threads: one per usable CPU, at most 64. */
#define MAX_DEFAULT_IO_THREADS 64
static int default_io_threads(const struct cpus_limits *cpus)
{
    return cpus->usable > MAX_DEFAULT_IO_THREADS ? MAX_DEFAULT_IO_THREADS : cpus->usable;
}

/* "2 I/O threads (2 usable CPUs: affinity 2, cgroup quota none)": how many
 * and why, for the startup line. */
static void describe_io_threads(char *out, size_t size, int n, bool given,
                                const struct cpus_limits *cpus)
{
    char quota[32] = "none";
    if (cpus->quota > 0)
        snprintf(quota, sizeof quota, "%d", cpus->quota);
    char why[48] = "";
    if (given)
        snprintf(why, sizeof why, "--io-threads; ");
    else if (n < cpus->usable)
        snprintf(why, sizeof why, "at most %d by default; ", MAX_DEFAULT_IO_THREADS);
    snprintf(out, size, "%d I/O thread%s (%s%d usable CPU%s: affinity %d, cgroup quota %s)", n,
             n == 1 ? "" : "s", why, cpus->usable, cpus->usable == 1 ? "" : "s", cpus->affinity,
             quota);
}

static void parse_serve_args(int argc, char **argv, struct serve_options *o)
{
    *o = (struct serve_options){
        .repo = {.load = {.repository = "models", .intra_op_threads = 1,
                          .inter_op_threads = 1, .queue_limit = 1024},
                 .mode = CONTROL_NONE, .poll_secs = 15},
        .http = {.host = "0.0.0.0", .port = 8000,
                 .limits = {.max_request_line = 8192, .max_header_bytes = 65536,
                            .max_headers = 100, .max_body = 64ull << 20},
                 .max_connections = 10000, .header_timeout_ms = 30000,
                 .idle_timeout_ms = 300000, .write_timeout_ms = 60000,
                 .max_response_bytes = 1ull << 30, .grpc_listen = true, .grpc_port = 8001,
                 .h2_max_concurrent_streams = 128, .on_response = obs_http_on_response},
        .inline_budget_us = DEFAULT_INLINE_BUDGET_US,
        .exit_timeout_secs = 30,
        .metrics_port = 8002,
        .grpc_max_message_bytes = GRPC_DEFAULT_MAX_MESSAGE_BYTES,
        .sse_keepalive_ms = REST_SSE_KEEPALIVE_MS,
    };
    o->log_format = -1;
    o->access_log.sample = 1;
    o->trace = (struct trace_settings){.level = TRACE_LEVEL_TIMESTAMPS, .rate = 0, .count = -1};
    int c, idx;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", serve_options_table, &idx)) != -1) {
        const char *name = c >= OPT_REPO ? serve_options_table[idx].name : "";
        switch (c) {
        case OPT_REPO: o->repo.load.repository = optarg; break;
        case OPT_CONTROL_MODE:
            if (strcmp(optarg, "none") == 0)
                o->repo.mode = CONTROL_NONE;
            else if (strcmp(optarg, "poll") == 0)
                o->repo.mode = CONTROL_POLL;
            else if (strcmp(optarg, "explicit") == 0)
                o->repo.mode = CONTROL_EXPLICIT;
            else {
                fprintf(stderr, "inferd: --model-control-mode: expected none, poll or explicit\n");
                exit(2);
            }
            break;
        case OPT_BACKEND_DIR: o->repo.load.backend_directory = optarg; break;
        case OPT_POLL_SECS: o->repo.poll_secs = (uint32_t)parse_num(name, optarg, 1, 86400); break;
        case OPT_LOAD_MODEL:
            if (o->repo.nload_models == MAX_LOAD_MODELS) {
                fprintf(stderr, "inferd: at most %d --load-model flags\n", MAX_LOAD_MODELS);
                exit(2);
            }
            o->load_models[o->repo.nload_models++] = optarg;
            break;
        case OPT_HOST: o->http.host = optarg; break;
        case OPT_PORT: o->http.port = (int)parse_num(name, optarg, 0, 65535); break;
        case OPT_IO_THREADS: o->io_threads = (int)parse_num(name, optarg, 1, 256); break;
        case OPT_WORKER_THREADS: o->worker_threads = (int)parse_num(name, optarg, 1, 1024); break;
        case OPT_INLINE_BUDGET:
            o->inline_budget_us = parse_num(name, optarg, 0, 10000000);
            break;
        case OPT_MAX_REQUEST_LINE:
            o->http.limits.max_request_line = (uint32_t)parse_num(name, optarg, 64, 1 << 20);
            break;
        case OPT_MAX_HEADER_BYTES:
            o->http.limits.max_header_bytes = (uint32_t)parse_num(name, optarg, 256, 16 << 20);
            break;
        case OPT_MAX_HEADERS:
            o->http.limits.max_headers = (uint32_t)parse_num(name, optarg, 1, HTTP1_MAX_HEADERS_CAP);
            break;
        case OPT_MAX_BODY:
            o->http.limits.max_body = parse_num(name, optarg, 0, 4ull << 30);
            break;
        case OPT_MAX_CONNECTIONS:
            o->http.max_connections = (uint32_t)parse_num(name, optarg, 1, 1000000);
            break;
        case OPT_HEADER_TIMEOUT:
            o->http.header_timeout_ms = (uint32_t)parse_num(name, optarg, 1, 3600) * 1000;
            break;
        case OPT_IDLE_TIMEOUT:
            o->http.idle_timeout_ms = (uint32_t)parse_num(name, optarg, 1, 86400) * 1000;
            break;
        case OPT_GRPC_PORT: o->http.grpc_port = (int)parse_num(name, optarg, 0, 65535); break;
        case OPT_H2_STREAMS:
            o->http.h2_max_concurrent_streams = (uint32_t)parse_num(name, optarg, 1, 65536);
            break;
        case OPT_TLS_CERT: o->tls.cert_file = optarg; break;
        case OPT_TLS_KEY: o->tls.key_file = optarg; break;
        case OPT_TLS_CLIENT_CA: o->tls.client_ca_file = optarg; break;
        case OPT_WRITE_TIMEOUT:
            o->http.write_timeout_ms = (uint32_t)parse_num(name, optarg, 1, 3600) * 1000;
            break;
        case OPT_EXIT_TIMEOUT:
            o->exit_timeout_secs = (uint32_t)parse_num(name, optarg, 0, 86400);
            break;
        case OPT_METRICS_PORT: o->metrics_port = (int)parse_num(name, optarg, 0, 65535); break;
        case OPT_NO_METRICS: o->metrics_port = -1; break;
        case OPT_QUEUE_LIMIT:
            o->repo.load.queue_limit = (uint32_t)parse_num(name, optarg, 1, 1000000);
            break;
        case OPT_GRPC_MAX_MESSAGE:
            o->grpc_max_message_bytes = parse_num(name, optarg, 1024, 1ull << 31);
            break;
        case OPT_SSE_KEEPALIVE:
            o->sse_keepalive_ms = parse_num(name, optarg, 100, 3600000);
            break;
        case OPT_INTRA: o->repo.load.intra_op_threads = (int)parse_num(name, optarg, 0, 1024); break;
        case OPT_INTER: o->repo.load.inter_op_threads = (int)parse_num(name, optarg, 0, 1024); break;
        case OPT_LOG_LEVEL:
            if (strcmp(optarg, "error") == 0)
                log_set_level(LOG_ERROR);
            else if (strcmp(optarg, "warn") == 0)
                log_set_level(LOG_WARN);
            else if (strcmp(optarg, "info") == 0)
                log_set_level(LOG_INFO);
            else if (strcmp(optarg, "debug") == 0)
                log_set_level(LOG_DEBUG);
            else {
                fprintf(stderr, "inferd: --log-level: expected error, warn, info or debug\n");
                exit(2);
            }
            break;
        case OPT_LOG_FORMAT:
            if (strcmp(optarg, "json") == 0)
                o->log_format = LOG_LINE_JSON;
            else if (strcmp(optarg, "text") == 0)
                o->log_format = LOG_LINE_TEXT;
            else {
                fprintf(stderr, "inferd: --log-format: expected json or text\n");
                exit(2);
            }
            /* The server's own lines follow from the first one on. */
            log_set_format(o->log_format == LOG_LINE_JSON ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
            break;
        case OPT_ACCESS_LOG: o->access_log.path = optarg; break;
        case OPT_ACCESS_LOG_SAMPLE: o->access_log.sample = parse_ratio(name, optarg); break;
        case OPT_TRACE_RATE: o->trace.rate = parse_ratio(name, optarg); break;
        case OPT_OTLP_ENDPOINT: o->otlp.endpoint = optarg; break;
        case OPT_OTLP_INTERVAL:
            o->otlp.interval_ms = (uint32_t)parse_num(name, optarg, 1, 3600000);
            break;
        case 'h': fputs(serve_usage_text, stdout); exit(0);
        default: fputs("try 'inferd serve --help'\n", stderr); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "inferd serve: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    if (o->repo.nload_models && o->repo.mode != CONTROL_EXPLICIT) {
        fprintf(stderr, "inferd serve: --load-model needs --model-control-mode explicit\n");
        exit(2);
    }
    if (!o->tls.cert_file != !o->tls.key_file) {
        fprintf(stderr, "inferd serve: --tls-cert and --tls-key go together\n");
        exit(2);
    }
    if (o->tls.client_ca_file && !o->tls.cert_file) {
        fprintf(stderr, "inferd serve: --tls-client-ca needs --tls-cert and --tls-key\n");
        exit(2);
    }
    o->repo.load_models = o->load_models;
}

/* One I/O thread: its event loop, its HTTP server (a SO_REUSEPORT listener
 * of the shared port) and its REST front end. */
struct io_thread {
    pthread_t tid;
    int index; /* the thread's name: io-<index> */
    struct loop loop;
    struct http_server *server;
    struct serve_thread serve; /* the serving pipeline's state of this thread */
    struct rest_api api;
    struct grpc_api grpc;
    struct loop_task drain_task; /* posted by the main thread on SIGTERM */
    struct loop_task stop_task;  /* posted on a second signal */
    bool server_drained;
    bool draining;
    bool loop_ready, thread_started;
};

static void io_maybe_stop(struct io_thread *t)
{
    if (t->draining && t->server_drained && t->serve.inflight == 0)
        loop_stop(&t->loop);
}

static void io_on_server_drained(void *arg)
{
    struct io_thread *t = arg;
    t->server_drained = true;
    io_maybe_stop(t);
}

static void io_on_idle(void *arg)
{
    io_maybe_stop(arg);
}

static void io_drain(struct loop_task *task)
{
    struct io_thread *t = (struct io_thread *)((char *)task - offsetof(struct io_thread, drain_task));
    t->draining = true;
    t->api.draining = true;
    grpc_api_drain(&t->grpc);
    http_server_drain(t->server, io_on_server_drained, t);
}

static void io_stop(struct loop_task *task)
{
    struct io_thread *t = (struct io_thread *)((char *)task - offsetof(struct io_thread, stop_task));
    loop_stop(&t->loop);
}

static atomic_int io_threads_running;

static void *io_thread_main(void *arg)
{
    struct io_thread *t = arg;
    char name[16]; /* the kernel's limit, NUL included */
    snprintf(name, sizeof name, "io-%d", t->index);
    pthread_setname_np(pthread_self(), name);
    if (loop_run(&t->loop) != 0)
        log_error("event loop failed: %s", strerror(errno));
    serve_thread_stopped(&t->serve);
    atomic_fetch_sub(&io_threads_running, 1);
    return NULL;
}

/* SIGUSR1: one line of process counters, for operators and `make bench`. */
static void log_stats(struct io_thread *threads, int n)
{
    uint64_t requests = 0;
    for (int i = 0; i < n; i++)
        requests += atomic_load_explicit(&threads[i].serve.calls, memory_order_relaxed);
    uint64_t heap_in_use, heap_free;
    sysinfo_heap(&heap_in_use, &heap_free);
    log_info("stats: infer_requests=%llu allocations=%llu rss_bytes=%llu heap_in_use_bytes=%llu "
             "heap_free_bytes=%llu",
             (unsigned long long)requests, (unsigned long long)mem_alloc_count(),
             (unsigned long long)sysinfo_rss_bytes(), (unsigned long long)heap_in_use,
             (unsigned long long)heap_free);
}

/* The HTTP server's tick: the front ends shed request objects that recent
 * traffic did not need. */
static void io_tick(void *arg, uint64_t now_ms)
{
    struct io_thread *t = arg;
    serve_thread_tick(&t->serve, now_ms);
    rest_api_tick(&t->api, now_ms);
    grpc_api_tick(&t->grpc, now_ms);
}

static void stop_now(struct io_thread *threads, int n)
{
    for (int i = 0; i < n; i++)
        loop_post(&threads[i].loop, &threads[i].stop_task);
}

/* SIGHUP: new connections get the certificate and key read again now;
 * open connections keep theirs. A file that does not load keeps the old
 * ones. */
static void reload_tls(struct tls_store *tls)
{
    if (!tls) {
        log_info("received SIGHUP: ignored, no TLS certificate to reload");
        return;
    }
    struct error err;
    error_clear(&err);
    if (tls_store_reload(tls, &err) != 0) {
        log_error("received SIGHUP: TLS reload failed, keeping the current certificate: %s",
                  err.msg);
        return;
    }
    char desc[512];
    tls_store_describe(tls, desc, sizeof desc);
    log_info("received SIGHUP: TLS certificate reloaded (%s)", desc);
}

/* Waits for SIGINT/SIGTERM: the first drains every I/O thread (readiness
 * turns false, no new connections, in-flight and queued requests are
 * answered); a second signal, or exit_timeout_secs, stops them at once.
 * Returns when every I/O thread has stopped. SIGUSR1 logs counters.
 * Returns false when the drain did not complete. */
static bool wait_for_shutdown(struct io_thread *threads, int n, const sigset_t *mask,
                              uint32_t exit_timeout_secs, struct tls_store *tls)
{
    int signals = 0;
    uint64_t deadline = 0;
    bool forced = false;
    while (atomic_load(&io_threads_running) > 0) {
        struct timespec tick = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
        siginfo_t si;
        int sig = sigtimedwait(mask, &si, &tick);
        if (sig < 0) {
            if (deadline && !forced && clock_now_ms() >= deadline) {
                log_warn("drain not finished after %u s (--exit-timeout-secs): stopping now",
                         exit_timeout_secs);
                forced = true;
                stop_now(threads, n);
            }
            continue;
        }
        if (sig == SIGUSR1) {
            log_stats(threads, n);
            continue;
        }
        if (sig == SIGHUP) {
            /* Not a reason to exit (a closed terminal, a habit of init
             * systems): with TLS, the certificate and key are reloaded. */
            reload_tls(tls);
            accesslog_reopen(); /* logrotate: the writer reopens --access-log */
            continue;
        }
        if (++signals == 1) {
            log_info("received %s: draining", strsignal(sig));
            deadline = clock_now_ms() + (uint64_t)exit_timeout_secs * 1000u;
            for (int i = 0; i < n; i++)
                loop_post(&threads[i].loop, &threads[i].drain_task);
        } else if (!forced) {
            log_warn("received %s again: stopping now", strsignal(sig));
            forced = true;
            stop_now(threads, n);
        }
    }
    return !forced;
}

static int start_io_threads(struct io_thread *threads, int n, struct serve_options *o,
                            struct repository *repo, struct shm_registry *shm,
                            const struct serve_pipeline *pipeline, struct routing *routing)
{
    static atomic_uint open_connections; /* --max-connections counts all threads */
    struct http_server_config http = o->http;
    http.reuseport = true;
    http.open_connections = &open_connections;
    o->obs.open_connections = &open_connections;
    for (int i = 0; i < n; i++) {
        struct io_thread *t = &threads[i];
        t->index = i;
        if (loop_init(&t->loop) != 0) {
            log_error("cannot create event loop: %s", strerror(errno));
            return -1;
        }
        t->loop_ready = true;
        if (serve_thread_init(&t->serve, repo, &t->loop, pipeline, o->inline_budget_us) != 0) {
            log_error("out of memory");
            return -1;
        }
        t->serve.shm = shm; /* one registry for every thread */
        t->serve.on_idle = io_on_idle;
        t->serve.idle_arg = t;
        rest_api_init(&t->api, &t->serve, &o->obs, o->sse_keepalive_ms);
        t->api.routing = routing;
        if (grpc_api_init(&t->grpc, &t->serve, o->grpc_max_message_bytes) != 0) {
            log_error("cannot set up the gRPC front end: %s", strerror(errno));
            return -1;
        }
        t->grpc.routing = routing;
        http.grpc = &t->grpc.app;
        http.on_tick = io_tick;
        http.tick_arg = t;
        t->drain_task.run = io_drain;
        t->stop_task.run = io_stop;
        if (http_server_start(&t->loop, &http, rest_handle, &t->api, &t->server) != 0)
            return -1;
        /* The first listener may have picked the port (--http-port 0). */
        http.port = http_server_port(t->server);
        http.join_port = true;
        http.grpc_port = http_server_grpc_port(t->server);
        http.grpc_join_port = true;
    }
    atomic_store(&io_threads_running, n);
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&threads[i].tid, NULL, io_thread_main, &threads[i]);
        if (rc) {
            log_error("cannot start I/O thread: %s", strerror(rc));
            atomic_fetch_sub(&io_threads_running, n - i);
            return -1;
        }
        threads[i].thread_started = true;
    }
    return 0;
}

static void stop_io_threads(struct io_thread *threads, int n)
{
    for (int i = 0; i < n; i++)
        if (threads[i].thread_started)
            loop_post(&threads[i].loop, &threads[i].stop_task);
    for (int i = 0; i < n; i++)
        if (threads[i].thread_started)
            pthread_join(threads[i].tid, NULL);
    for (int i = 0; i < n; i++) {
        http_server_free(threads[i].server);
        rest_api_free(&threads[i].api);
        grpc_api_free(&threads[i].grpc);
        serve_thread_free(&threads[i].serve);
    }
}

/* The metrics listener (its own thread; see api/obs_http.h), unless
 * --no-metrics. Returns 0 or -1 (logged). */
static int start_metrics(const struct serve_options *o, struct metrics_server **out)
{
    *out = NULL;
    if (o->metrics_port < 0)
        return 0;
    struct http_server_config cfg = {
        .host = o->http.host, .port = o->metrics_port, .limits = o->http.limits,
        .max_connections = 256, .header_timeout_ms = o->http.header_timeout_ms,
        .idle_timeout_ms = o->http.idle_timeout_ms, .write_timeout_ms = o->http.write_timeout_ms,
        .max_response_bytes = o->http.max_response_bytes, .on_response = obs_http_on_response,
    };
    if (metrics_server_start(&cfg, &o->obs, out) != 0)
        return -1;
    log_info("metrics on %s:%d", o->http.host, metrics_server_port(*out));
    return 0;
}

/* The access log writer, the trace settings and the OTLP exporter
 * (obs/); before the I/O threads start. Returns 0 or -1 (logged). */
static int start_logging_tracing(struct serve_options *o)
{
    struct error err;
    error_clear(&err);
    trace_settings_init(&o->trace);
    if (o->access_log.path) {
        o->access_log.format = o->log_format >= 0 ? (enum log_line_format)o->log_format
                                                  : LOG_LINE_JSON;
        if (accesslog_open(&o->access_log, &err) != 0) {
            log_error("%s", err.msg);
            return -1;
        }
        log_info("access log: %s (%s, sample %g)", o->access_log.path,
                 o->access_log.format == LOG_LINE_JSON ? "json" : "text", o->access_log.sample);
    }
    if (o->otlp.endpoint) {
        if (otlp_start(&o->otlp, &err) != 0) {
            log_error("%s", err.msg);
            return -1;
        }
        log_info("tracing: OTLP/HTTP to %s, trace rate %g", o->otlp.endpoint, o->trace.rate);
    }
    return 0;
}

/* After every producer (I/O threads, model workers) has stopped. */
static void stop_logging_tracing(void)
{
    accesslog_close();
    otlp_stop();
    obsreq_pool_free();
}

static int serve(int argc, char **argv)
{
    struct serve_options o;
    parse_serve_args(argc, argv, &o);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGHUP);
    /* Block before any thread starts so that every thread inherits the mask
     * and only the main thread takes the signals, with sigtimedwait. */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct cpus_limits cpus;
    cpus_probe(&cpus);
    bool io_threads_given = o.io_threads > 0;
    if (!io_threads_given)
        o.io_threads = default_io_threads(&cpus);
    char io_threads_text[160];
    describe_io_threads(io_threads_text, sizeof io_threads_text, o.io_threads, io_threads_given,
                        &cpus);
    static const char *const mode_names[] = {"none", "poll", "explicit"};
    log_info("inferd %s starting: repository %s, model control mode %s, %s", INFERD_VERSION,
             o.repo.load.repository, mode_names[o.repo.mode], io_threads_text);
    struct repository *repo;
    struct error err;
    error_clear(&err);
    /* Every version's backend runs feed its statistics and batch spans;
     * every load's outcome feeds the load metrics. */
    o.repo.load.observe_version = batch_obs_attach;
    o.repo.observe_load = load_obs_record;
    o.repo.observe_gone = load_obs_forget;
    if (o.worker_threads <= 0)
        o.worker_threads = cpus.usable;
    struct sched_pool *pool;
    int prc = sched_pool_start((uint32_t)o.worker_threads, "worker", &pool);
    if (prc != 0) {
        log_error("cannot start the worker pool: %s", strerror(-prc));
        return 1;
    }
    log_info("worker pool: %u threads; batches estimated at up to %llu us run on the I/O "
             "threads (--inline-budget-us)",
             sched_pool_threads(pool), (unsigned long long)o.inline_budget_us);
    o.repo.load.pool = pool;
    /* Shadow copies run on threads of the lowest CPU priority: they use
     * what client requests leave (docs/traffic.md). */
    struct sched_pool *shadow_pool;
    prc = sched_pool_start_idle((uint32_t)cpus.usable, "shadow", &shadow_pool);
    if (prc != 0) {
        log_error("cannot start the shadow pool: %s", strerror(-prc));
        sched_pool_stop(pool);
        return 1;
    }
    o.repo.load.background_pool = shadow_pool;
    /* Routing tables are read with each model (routing.json) and applied
     * by the pipeline's route and shadow stages. */
    struct routing *routing = routing_new(o.repo.load.repository);
    if (!routing) {
        log_error("out of memory");
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        return 1;
    }
    o.repo.hooks = routing_repository_hooks(routing);
    if (repository_open(&o.repo, &repo, &err) != 0) {
        log_error("%s", err.msg);
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        routing_free(routing);
        return 1;
    }
    routing_set_repository(routing, repo);
    /* Adaptive concurrency and circuit breakers: nothing configured yet. */
    struct limiter *limiter = limiter_new();
    struct breaker *breaker = breaker_new();
    struct serve_pipeline pipeline;
    pipeline_build(&pipeline, &(struct pipeline_parts){.routing = routing, .breaker = breaker,
                                                       .limiter = limiter});

    int rc = 1;
    struct metrics_server *metrics = NULL;
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    o.obs.repo = repo;
    o.obs.routing = routing;
    o.obs.limiter = limiter;
    o.obs.breaker = breaker;
    o.obs.start_ms = (uint64_t)started.tv_sec * 1000u + (uint64_t)started.tv_nsec / 1000000u;
    struct tls_store *tls = NULL;
    struct io_thread *threads = NULL;
    /* Triton's system shared-memory regions, shared by every thread. */
    struct shm_registry *shm = shm_registry_new();
    if (!shm || !limiter || !breaker) {
        log_error("out of memory");
        goto out_repository;
    }
    if (o.tls.cert_file) {
        if (tls_store_new(&o.tls, &tls, &err) != 0) {
            log_error("%s", err.msg);
            goto out_repository;
        }
        char desc[512];
        tls_store_describe(tls, desc, sizeof desc);
        log_info("TLS enabled: %s%s", desc, o.tls.client_ca_file ? "; client certificates required" : "");
        o.http.tls = tls;
    }
    if (start_logging_tracing(&o) != 0)
        goto out_repository;
    threads = mem_calloc((size_t)o.io_threads, sizeof *threads);
    if (!threads) {
        log_error("out of memory");
        goto out_repository;
    }
    if (start_io_threads(threads, o.io_threads, &o, repo, shm, &pipeline, routing) == 0 &&
        start_metrics(&o, &metrics) == 0) {
        struct model_snapshot *s = repository_acquire(repo);
        log_info("ready: %u models, %s; HTTP on %s:%d, gRPC on port %d%s", s->count,
                 snapshot_all_ready(s) ? "all ready" : "SOME NOT READY", o.http.host,
                 http_server_port(threads[0].server), http_server_grpc_port(threads[0].server),
                 tls ? " (TLS)" : "");
        repository_release(repo, s);
        if (wait_for_shutdown(threads, o.io_threads, &mask, o.exit_timeout_secs, tls)) {
            rc = 0;
        } else {
            /* Requests are still running on the models' workers: unloading
             * under them is not safe, and they are abandoned anyway. */
            log_warn("exiting without waiting for running requests");
            _exit(1);
        }
    }
    stop_io_threads(threads, o.io_threads);
    metrics_server_stop(metrics);
    /* Every loop has stopped with no request in flight (or was stopped by a
     * second signal): the schedulers finish their queues while the models
     * unload, and then the loops are closed. */
out_repository:
    repository_close(repo);
    routing_free(routing); /* no call holds a table any more */
    limiter_free(limiter);
    breaker_free(breaker);
    sched_pool_stop(pool); /* every model's scheduler has stopped */
    sched_pool_stop(shadow_pool);
    shm_registry_free(shm); /* no request holds a region any more */
    stop_logging_tracing();
    if (threads)
        for (int i = 0; i < o.io_threads; i++)
            if (threads[i].loop_ready)
                loop_close(&threads[i].loop);
    mem_free(threads);
    tls_store_free(tls);
    if (rc == 0)
        log_info("shutdown complete");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("inferd %s\n", INFERD_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "serve") == 0)
        return serve(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return bench_main(argc - 1, argv + 1);
    if (strcmp(cmd, "routing") == 0)
        return routing_main(argc - 1, argv + 1);
    fprintf(stderr, "inferd: unknown command or option '%s'\n%s", cmd, usage_text);
    return 2;
}
