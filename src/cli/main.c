/*
 * inferd command line: `inferd serve` runs the server; `--help`, `--version`.
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

#include "api/rest.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "bench/bench.h"
#include "http/server.h"
#include "model/model.h"
#include "net/loop.h"

#define MAX_LOAD_MODELS 256

struct serve_options {
    struct repository_options repo;
    const char *load_models[MAX_LOAD_MODELS];
    struct http_server_config http;
    int io_threads;
    uint32_t exit_timeout_secs;
};

static const char usage_text[] =
    "usage: inferd <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve        serve the models of a repository over KServe v2 REST\n"
    "  bench        load-test a server (KServe v2 infer requests or any endpoint)\n"
    "\n"
    "  inferd --help | -h       this text\n"
    "  inferd --version | -V    print the version\n"
    "  inferd serve --help      options of serve\n"
    "  inferd bench --help      options of bench\n";

static const char serve_usage_text[] =
    "usage: inferd serve [options]\n"
    "\n"
    "Serves every model of a Triton-style repository (<repo>/<model>/<version>/model.onnx)\n"
    "over the KServe v2 / Open Inference Protocol REST API.\n"
    "\n"
    "options:\n"
    "  --model-repository DIR     model repository (default: models)\n"
    "  --model-control-mode MODE  none: load every model at start (default); poll: also\n"
    "                             reload changed models; explicit: load only --load-model\n"
    "                             models and accept the repository load/unload API\n"
    "  --repository-poll-secs N   poll mode: rescan the repository every N s (default: 15)\n"
    "  --load-model NAME          explicit mode: load NAME at start (repeatable; * = all)\n"
    "  --backend-directory DIR    where backend plugins libinferd_<name>.so are looked for\n"
    "                             after the model's own directory\n"
    "  --host ADDR                address to listen on (default: 0.0.0.0)\n"
    "  --http-port N              HTTP port (default: 8000; 0 = any free port)\n"
    "  --io-threads N             event-loop threads serving connections (default: cores)\n"
    "  --max-request-line BYTES   longest request line, else 414 (default: 8192)\n"
    "  --max-header-bytes BYTES   largest request head, else 431 (default: 65536)\n"
    "  --max-headers N            most header fields, else 431 (default: 100)\n"
    "  --max-body-bytes BYTES     largest request body, else 413 (default: 67108864)\n"
    "  --max-connections N        open connections; more are refused (default: 10000)\n"
    "  --header-timeout-secs N    a request head must arrive within N s, else 408 (default: 30)\n"
    "  --idle-timeout-secs N      close keep-alive connections idle for N s (default: 300)\n"
    "  --write-timeout-secs N     close a connection whose response makes no progress for N s\n"
    "                             (a client that stops reading; default: 60)\n"
    "  --exit-timeout-secs N      on SIGTERM, wait at most N s for requests to finish (default: 30)\n"
    "  --queue-limit N            requests waiting per model, more get 429 (default: 1024)\n"
    "  --ort-intra-op-threads N   ONNX Runtime threads per operator and instance (default: 1;\n"
    "                             0 = max(1, cores / instances))\n"
    "  --ort-inter-op-threads N   ONNX Runtime threads across operators (default: 1)\n"
    "  --log-level LEVEL          error, warn, info or debug (default: info)\n"
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

static int default_io_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
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
                 .max_response_bytes = 1ull << 30},
        .io_threads = default_io_threads(),
        .exit_timeout_secs = 30,
    };
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
        case OPT_WRITE_TIMEOUT:
            o->http.write_timeout_ms = (uint32_t)parse_num(name, optarg, 1, 3600) * 1000;
            break;
        case OPT_EXIT_TIMEOUT:
            o->exit_timeout_secs = (uint32_t)parse_num(name, optarg, 0, 86400);
            break;
        case OPT_QUEUE_LIMIT:
            o->repo.load.queue_limit = (uint32_t)parse_num(name, optarg, 1, 1000000);
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
    o->repo.load_models = o->load_models;
}

/* One I/O thread: its event loop, its HTTP server (a SO_REUSEPORT listener
 * of the shared port) and its REST front end. */
struct io_thread {
    pthread_t tid;
    struct loop loop;
    struct http_server *server;
    struct rest_api api;
    struct loop_task drain_task; /* posted by the main thread on SIGTERM */
    struct loop_task stop_task;  /* posted on a second signal */
    bool server_drained;
    bool draining;
    bool loop_ready, thread_started;
};

static void io_maybe_stop(struct io_thread *t)
{
    if (t->draining && t->server_drained && t->api.inflight == 0)
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
    if (loop_run(&t->loop) != 0)
        log_error("event loop failed: %s", strerror(errno));
    atomic_fetch_sub(&io_threads_running, 1);
    return NULL;
}

/* Resident set size from /proc/self/statm, in bytes (0 if unknown). */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    return n == 2 ? resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* SIGUSR1: one line of process counters, for operators and `make bench`. */
static void log_stats(struct io_thread *threads, int n)
{
    uint64_t requests = 0;
    for (int i = 0; i < n; i++)
        requests += atomic_load_explicit(&threads[i].api.infer_requests, memory_order_relaxed);
    log_info("stats: infer_requests=%llu allocations=%llu rss_bytes=%llu",
             (unsigned long long)requests, (unsigned long long)mem_alloc_count(),
             (unsigned long long)rss_bytes());
}

static void stop_now(struct io_thread *threads, int n)
{
    for (int i = 0; i < n; i++)
        loop_post(&threads[i].loop, &threads[i].stop_task);
}

/* Waits for SIGINT/SIGTERM: the first drains every I/O thread (readiness
 * turns false, no new connections, in-flight and queued requests are
 * answered); a second signal, or exit_timeout_secs, stops them at once.
 * Returns when every I/O thread has stopped. SIGUSR1 logs counters.
 * Returns false when the drain did not complete. */
static bool wait_for_shutdown(struct io_thread *threads, int n, const sigset_t *mask,
                              uint32_t exit_timeout_secs)
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
             * systems); there is no file to reopen yet. */
            log_info("received SIGHUP: ignored");
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
                            struct repository *repo)
{
    static atomic_uint open_connections; /* --max-connections counts all threads */
    struct http_server_config http = o->http;
    http.reuseport = true;
    http.open_connections = &open_connections;
    for (int i = 0; i < n; i++) {
        struct io_thread *t = &threads[i];
        if (loop_init(&t->loop) != 0) {
            log_error("cannot create event loop: %s", strerror(errno));
            return -1;
        }
        t->loop_ready = true;
        t->api = (struct rest_api){.repo = repo, .loop = &t->loop, .on_idle = io_on_idle,
                                   .idle_arg = t};
        t->drain_task.run = io_drain;
        t->stop_task.run = io_stop;
        if (http_server_start(&t->loop, &http, rest_handle, &t->api, &t->server) != 0)
            return -1;
        /* The first listener may have picked the port (--http-port 0). */
        http.port = http_server_port(t->server);
        http.join_port = true;
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
    }
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

    static const char *const mode_names[] = {"none", "poll", "explicit"};
    log_info("inferd %s starting: repository %s, model control mode %s, %d I/O threads",
             INFERD_VERSION, o.repo.load.repository, mode_names[o.repo.mode], o.io_threads);
    struct repository *repo;
    struct error err;
    error_clear(&err);
    if (repository_open(&o.repo, &repo, &err) != 0) {
        log_error("%s", err.msg);
        return 1;
    }

    int rc = 1;
    struct io_thread *threads = mem_calloc((size_t)o.io_threads, sizeof *threads);
    if (!threads) {
        log_error("out of memory");
        goto out_repository;
    }
    if (start_io_threads(threads, o.io_threads, &o, repo) == 0) {
        struct model_snapshot *s = repository_acquire(repo);
        log_info("ready: %u models, %s; HTTP on %s:%d", s->count,
                 snapshot_all_ready(s) ? "all ready" : "SOME NOT READY", o.http.host,
                 http_server_port(threads[0].server));
        repository_release(repo, s);
        if (wait_for_shutdown(threads, o.io_threads, &mask, o.exit_timeout_secs)) {
            rc = 0;
        } else {
            /* Requests are still running on the models' workers: unloading
             * under them is not safe, and they are abandoned anyway. */
            log_warn("exiting without waiting for running requests");
            _exit(1);
        }
    }
    stop_io_threads(threads, o.io_threads);
    /* Every loop has stopped with no request in flight (or was stopped by a
     * second signal): the schedulers finish their queues while the models
     * unload, and then the loops are closed. */
out_repository:
    repository_close(repo);
    if (threads)
        for (int i = 0; i < o.io_threads; i++)
            if (threads[i].loop_ready)
                loop_close(&threads[i].loop);
    mem_free(threads);
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
    fprintf(stderr, "inferd: unknown command or option '%s'\n%s", cmd, usage_text);
    return 2;
}
