/*
 * inferd command line: `inferd serve` runs the server; `inferd bench`,
 * `inferd routing` (cli/routing_cmd.h), `inferd infer` (cli/infer_cmd.h),
 * `inferd models` and `inferd health` (cli/admin_cmd.h) are clients of
 * one; `inferd keys` (cli/keys_cmd.h) makes API keys; `--help`,
 * `--version`.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/grpc/grpc.h"
#include "api/grpc/services.h"
#include "api/http_api.h"
#include "api/server_info.h"
#include "api/http_obs.h"
#include "api/metrics_port.h"
#include "api/streams.h"
#include "base/clock.h"
#include "base/cpus.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/procmem.h"
#include "base/status.h"
#include "base/thread.h"
#include "bench/bench.h"
#include "cli/admin_cmd.h"
#include "cli/cluster_setup.h"
#include "cli/config_file.h"
#include "cli/infer_cmd.h"
#include "cli/keys_cmd.h"
#include "cli/pipeline.h"
#include "cli/routing_cmd.h"
#include "cli/serve_options.h"
#include "cluster/remote.h"
#include "http/h3.h"
#include "http/server.h"
#include "model/model.h"
#include "net/loop.h"
#include "net/quic_tls.h"
#include "net/sdnotify.h"
#include "net/tls.h"
#include "net/watchdog.h"
#include "obs/accesslog.h"
#include "obs/batch_obs.h"
#include "obs/load_obs.h"
#include "obs/otlp.h"
#include "obs/request.h"
#include "obs/sysinfo.h"
#include "obs/trace.h"
#include "obs/usage.h"
#include "policy/auth.h"
#include "policy/breaker.h"
#include "policy/limiter.h"
#include "policy/ratelimit.h"
#include "policy/routing.h"
#include "policy/tokenquota.h"
#include "preprocess/prep.h"
#include "sched/pool.h"
#include "serve/ensemble.h"
#include "serve/seqbatch.h"
#include "serve/shm.h"

static const char usage_text[] =
    "usage: inferd <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve        serve the models of a repository over KServe v2 REST and gRPC\n"
    "  infer        send one inference request (inputs from JSON, .npy or raw files;\n"
    "               REST or gRPC) and print or save the outputs (docs/cli.md)\n"
    "  models       list the repository, load or unload a model, show statistics\n"
    "  health       is a server (or a model) live and ready\n"
    "  bench        load-test a server (KServe v2 infer requests or any endpoint)\n"
    "  routing      read or change a model's routing table on a running server\n"
    "               (canary, A/B, shadow: docs/traffic.md)\n"
    "  keys         make an API key (keys new) or the hash of one (keys hash) for the\n"
    "               configuration's auth section (docs/security.md)\n"
    "\n"
    "  inferd --help | -h       this text\n"
    "  inferd --version | -V    print the version\n"
    "  inferd serve --help      options of serve\n"
    "  inferd infer --help      options of infer (and its exit codes)\n"
    "  inferd models --help     options of models\n"
    "  inferd health --help     options of health\n"
    "  inferd bench --help      options of bench\n"
    "  inferd routing --help    options of routing\n"
    "  inferd keys --help       usage of keys\n";

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

/* One I/O thread: its event loop, its HTTP server (a SO_REUSEPORT listener
 * of the shared port) and its REST front end. */
struct io_thread {
    pthread_t tid;
    int index; /* the thread's name: io-<index> */
    struct loop loop;
    struct http_server *server;
    struct h3_server *h3;      /* --http3: thread 0 only (h3.h: one loop owns the UDP port) */
    struct serve_thread serve; /* the serving pipeline's state of this thread */
    struct http_api api;
    struct grpc_api grpc;
    struct loop_task drain_task; /* posted by the main thread on SIGTERM */
    struct loop_task stop_task;  /* posted on a second signal */
    bool server_drained;
    bool h3_drained;
    bool draining;
    bool loop_ready, thread_started;
};

static void io_maybe_stop(struct io_thread *t)
{
    if (t->draining && t->server_drained && (!t->h3 || t->h3_drained) && t->serve.inflight == 0)
        loop_stop(&t->loop);
}

static void io_on_server_drained(void *arg)
{
    struct io_thread *t = arg;
    t->server_drained = true;
    io_maybe_stop(t);
}

static void io_on_h3_drained(void *arg)
{
    struct io_thread *t = arg;
    t->h3_drained = true;
    io_maybe_stop(t);
}

static void io_on_idle(void *arg)
{
    io_maybe_stop(arg);
}

static void io_drain(struct loop_task *task)
{
    struct io_thread *t =
        (struct io_thread *)((char *)task - offsetof(struct io_thread, drain_task));
    t->draining = true;
    t->api.rest.draining = true;
    grpc_api_drain(&t->grpc);
    if (t->h3)
        h3_server_drain(t->h3, io_on_h3_drained, t);
    http_server_drain(t->server, io_on_server_drained, t);
}

static void io_stop(struct loop_task *task)
{
    struct io_thread *t =
        (struct io_thread *)((char *)task - offsetof(struct io_thread, stop_task));
    loop_stop(&t->loop);
}

static atomic_int io_threads_running;

static void *io_thread_main(void *arg)
{
    struct io_thread *t = arg;
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
             (unsigned long long)procmem_rss_bytes(), (unsigned long long)heap_in_use,
             (unsigned long long)heap_free);
}

/* The HTTP server's tick: the front ends shed request objects that recent
 * traffic did not need, and idle sequences of stateful models end. */
static void io_tick(void *arg, uint64_t now_ms)
{
    struct io_thread *t = arg;
    serve_thread_tick(&t->serve, now_ms);
    seqbatch_tick(now_ms * 1000000u);
    http_api_tick(&t->api, now_ms);
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
static void reload_tls(struct tls_store *tls, struct quic_tls_store *quic)
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
    if (quic && quic_tls_store_reload(quic, &err) != 0) {
        log_error("received SIGHUP: HTTP/3 TLS reload failed, keeping its current certificate: "
                  "%s",
                  err.msg);
        return;
    }
    char desc[512];
    tls_store_describe(tls, desc, sizeof desc);
    log_info("received SIGHUP: TLS certificate reloaded (%s)%s", desc, quic ? ", HTTP/3 too" : "");
}

/* Waits for SIGINT/SIGTERM: the first deletes the etcd registration (reg,
 * NULL without one; waiting for that at most 3 s), then drains every I/O
 * thread (readiness turns false, no new connections, in-flight and queued
 * requests are answered); a second signal, or exit_timeout_secs, stops
 * them at once.
 * Returns when every I/O thread has stopped. SIGUSR1 logs counters.
 * Returns false when the drain did not complete. */
static bool wait_for_shutdown(struct io_thread *threads, int n, const sigset_t *mask,
                              uint32_t exit_timeout_secs, struct tls_store *tls,
                              struct quic_tls_store *quic, struct config_reloader *reload,
                              struct sdnotify *notify, struct watchdog *watchdog,
                              struct registration *reg)
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
             * systems): the --config file is read again and, with TLS,
             * the certificate and key are reloaded. */
            sdnotify_reloading(notify);
            if (reload)
                config_reload(reload);
            if (tls || !reload)
                reload_tls(tls, quic);
            accesslog_reopen(); /* logrotate: the writer reopens --access-log */
            sdnotify_send(notify, "READY=1\nSTATUS=serving (reloaded on SIGHUP)");
            continue;
        }
        if (++signals == 1) {
            log_info("received %s: draining", strsignal(sig));
            registration_deregister(reg, 3000);
            sdnotify_send(notify, "STOPPING=1\nSTATUS=draining: up to %u s for running requests",
                          exit_timeout_secs);
            watchdog_draining(watchdog);
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
                            const struct serve_pipeline *pipeline, struct routing *routing,
                            struct auth *auth, struct quic_tls_store *quic)
{
    static atomic_uint open_connections; /* --max-connections counts all threads */
    static char alt_svc[64];             /* filled once the port is known */
    struct http_server_config http = o->http;
    if (o->server_name)
        server_info_set_name(o->server_name);
    http.reuseport = true;
    http.open_connections = &open_connections;
    http.alt_svc = quic ? alt_svc : NULL;
    o->obs.open_connections = &open_connections;
    for (int i = 0; i < n; i++) {
        struct io_thread *t = &threads[i];
        t->index = i;
        if (loop_init(&t->loop) != 0) {
            log_error("cannot create event loop: %s", strerror(errno));
            return ST_ERROR;
        }
        t->loop_ready = true;
        if (serve_thread_init(&t->serve, repo, &t->loop, pipeline, o->inline_budget_us) != 0) {
            log_error("out of memory");
            return ST_ERROR;
        }
        t->serve.shm = shm; /* one registry for every thread */
        t->serve.on_idle = io_on_idle;
        t->serve.idle_arg = t;
        http_api_init(&t->api, &t->serve, &o->obs, o->sse_keepalive_ms);
        t->api.rest.routing = routing;
        t->api.rest.infer.max_body = o->http.limits.max_body;
        t->api.auth = auth;
        if (grpc_api_init(&t->grpc, &t->serve, o->grpc_max_message_bytes, grpc_services,
                          grpc_nservices) != 0) {
            log_error("cannot set up the gRPC front end: %s", strerror(errno));
            return ST_ERROR;
        }
        t->grpc.routing = routing;
        t->grpc.auth = auth;
        t->api.grpc = &t->grpc;
        t->api.cors = &o->cors;
        http.grpc = &t->grpc.app;
        http.on_tick = io_tick;
        http.tick_arg = t;
        http.early = http_api_early; /* the inference routes decide on their head */
        t->drain_task.run = io_drain;
        t->stop_task.run = io_stop;
        if (http_server_start(&t->loop, &http, http_api_handle, &t->api, &t->server) != 0)
            return ST_ERROR;
        /* The first listener may have picked the port (--http-port 0). */
        http.port = http_server_port(t->server);
        http.join_port = true;
        http.grpc_port = http_server_grpc_port(t->server);
        http.grpc_join_port = true;
    }
    if (quic) {
        /* One loop owns the UDP port and every QUIC connection (h3.h). */
        struct h3_server_config h3 = {
            .host = http.host,
            .port = http.port,
            .limits = http.limits,
            .max_streams = http.h2_max_concurrent_streams,
            .max_connections = http.max_connections,
            .open_connections = &open_connections,
            .idle_timeout_ms = http.idle_timeout_ms,
            .max_response_bytes = http.max_response_bytes,
            .tls = quic,
            .on_response = http.on_response,
        };
        if (h3_server_start(&threads[0].loop, &h3, http_api_handle, &threads[0].api, &threads[0].h3) !=
            0)
            return ST_ERROR;
        snprintf(alt_svc, sizeof alt_svc, "h3=\":%d\"; ma=86400", h3_server_port(threads[0].h3));
        log_info("HTTP/3 on UDP %s:%d (one I/O thread; 0-RTT %s)", http.host,
                 h3_server_port(threads[0].h3), o->http3_0rtt ? "on" : "off");
    }
    atomic_store(&io_threads_running, n);
    for (int i = 0; i < n; i++) {
        char name[16]; /* the kernel's limit, NUL included */
        snprintf(name, sizeof name, "io-%d", threads[i].index);
        int rc = thread_start(&threads[i].tid, name, io_thread_main, &threads[i]);
        if (rc) {
            log_error("cannot start I/O thread: %s", strerror(rc));
            atomic_fetch_sub(&io_threads_running, n - i);
            return ST_ERROR;
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
        h3_server_free(threads[i].h3);
        http_server_free(threads[i].server);
        http_api_free(&threads[i].api);
        grpc_api_free(&threads[i].grpc);
        serve_thread_free(&threads[i].serve);
    }
    streams_shutdown();
}

/* The metrics listener (its own thread; see api/metrics_port.h), unless
 * --no-metrics. Returns 0 or ST_ERROR (logged). */
static int start_metrics(const struct serve_options *o, struct metrics_server **out)
{
    *out = NULL;
    if (o->metrics_port < 0)
        return 0;
    struct http_server_config cfg = {
        .host = o->http.host,
        .port = o->metrics_port,
        .limits = o->http.limits,
        .max_connections = 256,
        .header_timeout_ms = o->http.header_timeout_ms,
        .idle_timeout_ms = o->http.idle_timeout_ms,
        .write_timeout_ms = o->http.write_timeout_ms,
        .max_response_bytes = o->http.max_response_bytes,
        .on_response = http_obs_on_response,
    };
    if (metrics_server_start(&cfg, &o->obs, out) != 0)
        return ST_ERROR;
    log_info("metrics on %s:%d", o->http.host, metrics_server_port(*out));
    return 0;
}

/* The access log writer, the trace settings and the OTLP exporter
 * (obs/); before the I/O threads start. Returns 0 or ST_ERROR (logged). */
static int start_logging_tracing(struct serve_options *o)
{
    struct error err;
    error_clear(&err);
    trace_settings_init(&o->trace);
    if (o->access_log.path) {
        o->access_log.format =
            o->log_format >= 0 ? (enum log_line_format)o->log_format : LOG_LINE_JSON;
        if (accesslog_open(&o->access_log, &err) != 0) {
            log_error("%s", err.msg);
            return ST_ERROR;
        }
        log_info("access log: %s (%s, sample %g)", o->access_log.path,
                 o->access_log.format == LOG_LINE_JSON ? "json" : "text", o->access_log.sample);
    }
    if (o->otlp.endpoint) {
        if (otlp_start(&o->otlp, &err) != 0) {
            log_error("%s", err.msg);
            return ST_ERROR;
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

/* The service manager learns that the ports accept (sdnotify.h). */
static void notify_ready(struct sdnotify *notify, const struct io_thread *threads, uint32_t models)
{
    sdnotify_send(notify,
                  "READY=1\nMAINPID=%ld\nSTATUS=serving %u models; HTTP port %d, gRPC port %d",
                  (long)getpid(), models, http_server_port(threads[0].server),
                  http_server_grpc_port(threads[0].server));
}

/* The service manager's watchdog, fed while every I/O loop runs
 * (watchdog.h); NULL without WatchdogSec=. */
static struct watchdog *start_watchdog(struct sdnotify *notify, struct io_thread *threads, int n)
{
    struct loop *loops[WATCHDOG_MAX_LOOPS];
    if (n > WATCHDOG_MAX_LOOPS)
        n = WATCHDOG_MAX_LOOPS;
    for (int i = 0; i < n; i++)
        loops[i] = &threads[i].loop;
    struct watchdog *w;
    int rc = watchdog_start(notify, loops, n, &w);
    if (rc != 0)
        log_error("cannot start the service manager watchdog: %s", strerror(-rc));
    else if (w)
        log_info("service manager watchdog: every %llu ms while the I/O threads run",
                 (unsigned long long)(notify->watchdog_usec / 2000u));
    return w;
}

/* The signals the main thread takes with sigtimedwait (wait_for_shutdown):
 * blocked before the server starts any thread (the usage file's writer is
 * the first), so that every thread inherits the mask. A thread that did not
 * block SIGTERM would take it whenever the main thread is between two waits,
 * and die of it without draining. */
static void block_server_signals(sigset_t *mask)
{
    sigemptyset(mask);
    sigaddset(mask, SIGINT);
    sigaddset(mask, SIGTERM);
    sigaddset(mask, SIGUSR1);
    sigaddset(mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, mask, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Runs the server with settings o until SIGINT/SIGTERM (mask: from
 * block_server_signals()); reload is NULL without --config. parts: the
 * policy stores of the sections (run() adds the routing store). notify:
 * the service manager's socket (sdnotify.h). Returns the exit status. */
static int run(struct serve_options *o, struct config_reloader *reload,
               struct pipeline_parts *parts, struct sdnotify *notify, const sigset_t *mask)
{

    struct cpus_limits cpus;
    cpus_probe(&cpus);
    bool io_threads_given = o->io_threads > 0;
    if (!io_threads_given)
        o->io_threads = default_io_threads(&cpus);
    char io_threads_text[160];
    describe_io_threads(io_threads_text, sizeof io_threads_text, o->io_threads, io_threads_given,
                        &cpus);
    static const char *const mode_names[] = {"none", "poll", "explicit"};
    log_info("inferd %s starting: repository %s, model control mode %s, %s", INFERD_VERSION,
             o->repo.load.repository, mode_names[o->repo.mode], io_threads_text);
    struct repository *repo;
    struct error err;
    error_clear(&err);
    /* Every version's backend runs feed its statistics and batch spans;
     * every load's outcome feeds the load metrics. */
    o->repo.load.observe_version = batch_obs_attach;
    /* A version with generation.json is served by its generation engine. */
    gen_configure(&o->gen);
    o->repo.load.attach_engine = gen_engine_attach;
    /* A model with preprocess.json takes raw images, sounds and texts. */
    static const struct prep_modality *const modalities[] = {&prep_image, &prep_audio, &prep_text};
    prep_modalities_set(modalities, sizeof modalities / sizeof modalities[0]);
    o->repo.load.attach_preprocess = prep_attach;
    o->repo.load.attach_ensemble = ensemble_attach;
    o->repo.observe_load = load_obs_record;
    o->repo.observe_gone = load_obs_forget;
    if (o->worker_threads <= 0)
        o->worker_threads = cpus.usable;
    struct sched_pool *pool;
    int prc = sched_pool_start((uint32_t)o->worker_threads, "worker", &pool);
    if (prc != 0) {
        log_error("cannot start the worker pool: %s", strerror(-prc));
        return 1;
    }
    log_info("worker pool: %u threads; batches estimated at up to %llu us run on the I/O "
             "threads (--inline-budget-us)",
             sched_pool_threads(pool), (unsigned long long)o->inline_budget_us);
    o->repo.load.pool = pool;
    /* Shadow copies run on threads of the lowest CPU priority: they use
     * what client requests leave (docs/traffic.md). */
    struct sched_pool *shadow_pool;
    prc = sched_pool_start_idle((uint32_t)cpus.usable, "shadow", &shadow_pool);
    if (prc != 0) {
        log_error("cannot start the shadow pool: %s", strerror(-prc));
        sched_pool_stop(pool);
        return 1;
    }
    o->repo.load.background_pool = shadow_pool;
    /* Routing tables are read with each model (routing.json) and applied
     * by the pipeline's route and shadow stages. */
    struct routing *routing = routing_new(o->repo.load.repository);
    if (!routing) {
        log_error("out of memory");
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        return 1;
    }
    o->repo.hooks = routing_repository_hooks(routing);
    /* Remote versions (gateway mode): their pools start before the
     * repository loads them (their metadata comes from an upstream). */
    if (remote_models_start(parts->remote, &err) != 0) {
        log_error("%s", err.msg);
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        routing_free(routing);
        return 1;
    }
    remote_models_registry(parts->remote, &o->repo.load);
    /* Discovered upstreams (remote models with discover: true). */
    struct discovery *discovery = NULL;
    if (cluster_discovery_start(o, parts->remote, &discovery) != 0) {
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        routing_free(routing);
        return 1;
    }
    if (repository_open(&o->repo, &repo, &err) != 0) {
        log_error("%s", err.msg);
        discovery_stop(discovery);
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        routing_free(routing);
        return 1;
    }
    routing_set_repository(routing, repo);
    /* Raw images, sounds and texts are turned into tensors on a pool of
     * their own, never on an I/O thread (docs/preprocessing.md). */
    if (o->preprocess_threads <= 0)
        o->preprocess_threads = cpus.usable;
    struct prep_stage_cfg prep = {0};
    prc =
        prep_pool_start((uint32_t)o->preprocess_threads, (uint32_t)o->preprocess_queue, &prep.pool);
    if (prc != 0) {
        log_error("cannot start the preprocessing pool: %s", strerror(-prc));
        repository_close(repo);
        discovery_stop(discovery);
        sched_pool_stop(shadow_pool);
        sched_pool_stop(pool);
        routing_free(routing);
        return 1;
    }
    struct serve_pipeline pipeline;
    parts->routing = routing;
    parts->prep = &prep;
    pipeline_build(&pipeline, parts);

    int rc = 1;
    struct metrics_server *metrics = NULL;
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    o->obs.repo = repo;
    o->obs.routing = routing;
    o->obs.auth = parts->auth;
    o->obs.ratelimit = parts->ratelimit;
    o->obs.tokenquota = parts->tokens.quotas;
    o->obs.limiter = parts->limiter;
    o->obs.breaker = parts->breaker;
    o->obs.usage = parts->tokens.usage;
    o->obs.remote = parts->remote;
    o->obs.start_ms = (uint64_t)started.tv_sec * 1000u + (uint64_t)started.tv_nsec / 1000000u;
    struct tls_store *tls = NULL;
    struct quic_tls_store *quic = NULL;
    struct io_thread *threads = NULL;
    /* Triton's system shared-memory regions, shared by every thread. */
    struct shm_registry *shm = shm_registry_new();
    if (!shm) {
        log_error("out of memory");
        goto out_repository;
    }
    if (o->tls.cert_file) {
        if (tls_store_new(&o->tls, &tls, &err) != 0) {
            log_error("%s", err.msg);
            goto out_repository;
        }
        char desc[512];
        tls_store_describe(tls, desc, sizeof desc);
        log_info("TLS enabled: %s%s", desc,
                 o->tls.client_ca_file ? "; client certificates required" : "");
        o->http.tls = tls;
        if (o->http3 && quic_tls_store_new(&o->tls, o->http3_0rtt, &quic, &err) != 0) {
            log_error("%s", err.msg);
            goto out_repository;
        }
    }
    if (start_logging_tracing(o) != 0)
        goto out_repository;
    threads = mem_calloc((size_t)o->io_threads, sizeof *threads);
    if (!threads) {
        log_error("out of memory");
        goto out_repository;
    }
    streams_configure(o->stream_resume_secs);
    /* The metrics port first: a client that saw the HTTP port ready can
     * scrape at once. */
    if (start_metrics(o, &metrics) == 0 &&
        start_io_threads(threads, o->io_threads, o, repo, shm, &pipeline, routing, parts->auth,
                         quic) == 0) {
        struct model_snapshot *s = repository_acquire(repo);
        log_info("ready: %u models, %s; HTTP on %s:%d, gRPC on port %d%s", s->count,
                 snapshot_all_ready(s) ? "all ready" : "SOME NOT READY", o->http.host,
                 http_server_port(threads[0].server), http_server_grpc_port(threads[0].server),
                 tls ? " (TLS)" : "");
        notify_ready(notify, threads, s->count);
        repository_release(repo, s);
        struct registration *reg = NULL;
        cluster_setup_start(o, repo, http_server_port(threads[0].server),
                            http_server_grpc_port(threads[0].server),
                            metrics ? metrics_server_port(metrics) : 0, &reg);
        struct watchdog *watchdog = start_watchdog(notify, threads, o->io_threads);
        bool drained = wait_for_shutdown(threads, o->io_threads, mask, o->exit_timeout_secs, tls,
                                         quic, reload, notify, watchdog, reg);
        watchdog_stop(watchdog); /* every loop has stopped */
        registration_stop(reg);
        if (drained) {
            rc = 0;
        } else {
            /* Requests are still running on the models' workers: unloading
             * under them is not safe, and they are abandoned anyway. */
            log_warn("exiting without waiting for running requests");
            _exit(1);
        }
    }
    stop_io_threads(threads, o->io_threads);
    seqbatch_shutdown(); /* sequences hold their versions: before the repository closes */
    metrics_server_stop(metrics);
    /* Every loop has stopped with no request in flight (or was stopped by a
     * second signal): the schedulers finish their queues while the models
     * unload, and then the loops are closed. */
out_repository:
    prep_pool_stop(prep.pool); /* no call waits for it any more */
    repository_close(repo);
    discovery_stop(discovery); /* before the pools it feeds are freed */
    routing_free(routing); /* no call holds a table any more */
    sched_pool_stop(pool); /* every model's scheduler has stopped */
    sched_pool_stop(shadow_pool);
    shm_registry_free(shm); /* no request holds a region any more */
    stop_logging_tracing();
    if (threads)
        for (int i = 0; i < o->io_threads; i++)
            if (threads[i].loop_ready)
                loop_close(&threads[i].loop);
    mem_free(threads);
    tls_store_free(tls);
    quic_tls_store_free(quic);
    if (rc == 0)
        log_info("shutdown complete");
    return rc;
}

CONFIG_SECTION_ADAPTERS(auth)
CONFIG_SECTION_ADAPTERS(ratelimit)
CONFIG_SECTION_ADAPTERS(limiter)
CONFIG_SECTION_ADAPTERS(breaker)
CONFIG_SECTION_ADAPTERS(tokenquota)
CONFIG_SECTION_ADAPTERS(remote_models)

/* The policy sections, in their order in the section table. */
enum {
    SECTION_AUTH,
    SECTION_RATE_LIMITS,
    SECTION_CONCURRENCY,
    SECTION_BREAKERS,
    SECTION_TOKEN_QUOTAS,
    SECTION_REMOTE_MODELS,
    NSECTIONS
};

static bool is_tenant(const void *auth, const char *name)
{
    return auth_config_has_tenant(auth, name);
}

/* config_check_fn: the tenants rate-limit and token-quota rules name
 * are the auth section's. */
static int check_sections(void *const *parsed, struct error *err)
{
    const struct auth_config *auth = parsed[SECTION_AUTH];
    bool any = auth && auth->ntenants > 0;
    if (ratelimit_config_check_tenants(parsed[SECTION_RATE_LIMITS], is_tenant, auth, any, err) != 0)
        return ST_ERROR;
    return tokenquota_config_check_tenants(parsed[SECTION_TOKEN_QUOTAS], is_tenant, auth, any, err);
}

/* The settings: defaults < the --config file < the command line, and the
 * parsed policy sections (their defaults without a file). Exits 2 on an
 * error, and 0 after --check-config. Returns the file (NULL without
 * --config), which the strings of o point into. */
static struct config_file *load_settings(const struct serve_cmdline *cmdline,
                                         struct serve_options *o,
                                         const struct config_section *sections, size_t nsections,
                                         void **parsed)
{
    serve_options_defaults(o);
    struct config_file *file = NULL;
    struct error err;
    error_clear(&err);
    if (cmdline->config_path ? config_file_load(cmdline->config_path, o, sections, nsections,
                                                check_sections, parsed, &file, &err)
                             : config_sections_defaults(sections, nsections, parsed, &err)) {
        fprintf(stderr, "inferd: %s\n", err.msg);
        exit(2);
    }
    serve_cmdline_apply(cmdline, o);
    if (serve_options_check(o, &err) != 0) {
        fprintf(stderr, "inferd serve: %s\n", err.msg);
        exit(2);
    }
    if (cmdline->check_only) {
        config_sections_discard(sections, nsections, parsed);
        config_file_free(file);
        printf("%s: ok\n", cmdline->config_path);
        exit(0);
    }
    return file;
}

static int serve(int argc, char **argv)
{
    struct serve_cmdline cmdline;
    serve_cmdline_parse(argc, argv, &cmdline);
    /* The policy sections of the --config file (cli/config_file.h). Per
     * module X: CONFIG_SECTION_ADAPTERS(X) at file scope; here its store
     * (X_new()) and its entry in sections[] at its SECTION_ index;
     * X_free(store) after run(). */
    _Static_assert(NSECTIONS <= CONFIG_MAX_SECTIONS, "too many sections");
    struct config_section sections[NSECTIONS];
    const size_t nsections = NSECTIONS;
    void *parsed[NSECTIONS];
    /* The policy stores (policy/auth.h, ratelimit.h, limiter.h, breaker.h,
     * tokenquota.h). */
    struct pipeline_parts parts = {.auth = auth_new(),
                                   .ratelimit = ratelimit_new(),
                                   .limiter = limiter_new(),
                                   .breaker = breaker_new(),
                                   .tokens.quotas = tokenquota_new(),
                                   .remote = remote_models_new()};
    if (!parts.auth || !parts.ratelimit || !parts.limiter || !parts.breaker ||
        !parts.tokens.quotas || !parts.remote) {
        fprintf(stderr, "inferd: out of memory\n");
        auth_free(parts.auth);
        ratelimit_free(parts.ratelimit);
        limiter_free(parts.limiter);
        breaker_free(parts.breaker);
        tokenquota_free(parts.tokens.quotas);
        remote_models_free(parts.remote);
        return 1;
    }
    sections[SECTION_AUTH] = CONFIG_SECTION("auth", auth, parts.auth);
    sections[SECTION_RATE_LIMITS] = CONFIG_SECTION("rate-limits", ratelimit, parts.ratelimit);
    sections[SECTION_CONCURRENCY] = CONFIG_SECTION("concurrency", limiter, parts.limiter);
    sections[SECTION_BREAKERS] = CONFIG_SECTION("breakers", breaker, parts.breaker);
    sections[SECTION_TOKEN_QUOTAS] =
        CONFIG_SECTION("token-quotas", tokenquota, parts.tokens.quotas);
    sections[SECTION_REMOTE_MODELS] =
        CONFIG_SECTION("remote-models", remote_models, parts.remote);
    struct serve_options o;
    struct config_file *file = load_settings(&cmdline, &o, sections, nsections, parsed);
    log_set_level((enum log_level)o.log_level);
    if (o.log_format >= 0)
        log_set_format(o.log_format == LOG_LINE_JSON ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
    config_sections_apply(sections, nsections, parsed);
    struct config_reloader reloader = {.path = cmdline.config_path,
                                       .cmdline = &cmdline,
                                       .sections = sections,
                                       .nsections = nsections,
                                       .check = check_sections,
                                       .running = file};
    serve_runtime_of(&o, &reloader.runtime);
    /* The token metering (obs/usage.h): a usage file that cannot be read
     * or written stops the start, rather than be overwritten. */
    int rc = 1;
    struct error err;
    error_clear(&err);
    /* Type=notify under systemd (net/sdnotify.h): a NOTIFY_SOCKET that
     * cannot be used stops the start, as the manager would time out. */
    struct sdnotify notify;
    sigset_t mask;
    block_server_signals(&mask);
    if (sdnotify_open(&notify, &err) != 0)
        log_error("%s", err.msg);
    else if (usage_open(&o.usage, &parts.tokens.usage, &err) == 0)
        rc = run(&o, file ? &reloader : NULL, &parts, &notify, &mask);
    else
        log_error("%s", err.msg);
    sdnotify_close(&notify);
    /* Every I/O thread has stopped. */
    usage_close(parts.tokens.usage); /* its last write */
    auth_free(parts.auth);
    ratelimit_free(parts.ratelimit);
    limiter_free(parts.limiter);
    breaker_free(parts.breaker);
    tokenquota_free(parts.tokens.quotas);
    remote_models_free(parts.remote); /* after the repository closed */
    config_file_free(file);
    serve_cmdline_free(&cmdline);
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
    if (strcmp(cmd, "keys") == 0)
        return keys_main(argc - 1, argv + 1);
    if (strcmp(cmd, "infer") == 0)
        return infer_main(argc - 1, argv + 1);
    if (strcmp(cmd, "models") == 0)
        return models_main(argc - 1, argv + 1);
    if (strcmp(cmd, "health") == 0)
        return health_main(argc - 1, argv + 1);
    fprintf(stderr, "inferd: unknown command or option '%s'\n%s", cmd, usage_text);
    return 2;
}
