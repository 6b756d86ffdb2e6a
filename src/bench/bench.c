#include "bench/bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/status.h"
#include "bench/bench_args.h"
#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "bench/bench_request.h"
#include "bench/gen_floor.h"
#include "bench/http_client.h"
#include "bench/loadgen.h"
#include "bench/progress.h"

/* Makes room for the sockets: raise the soft descriptor limit if needed. */
static void raise_fd_limit(uint32_t needed)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= needed)
        return;
    rl.rlim_cur = rl.rlim_max < needed ? rl.rlim_max : needed;
    setrlimit(RLIMIT_NOFILE, &rl);
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
    /* Workers whose init ran (each then frees cleanly), and threads started. */
    uint32_t ninit = 0, started = 0;
    pthread_mutex_init(&sh->gate_lock, NULL);
    pthread_cond_init(&sh->gate_cond, NULL);
    for (uint32_t i = 0; i < nthreads; i++) {
        uint32_t nconns = o->connections / nthreads + (i < o->connections % nthreads);
        uint32_t conc = o->concurrency / nthreads + (i < o->concurrency % nthreads);
        int err =
            loadgen_worker_init(&workers[i], sh, i, nconns, sh->open_loop ? 0 : conc, nthreads);
        ninit = i + 1;
        if (err) {
            fprintf(stderr, "inferd bench: cannot set up client thread: %s\n", strerror(-err));
            goto out_open_gate;
        }
    }
    for (; started < nthreads; started++) {
        int err =
            pthread_create(&workers[started].thread, NULL, loadgen_worker_main, &workers[started]);
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
    for (uint32_t i = 0; i < ninit; i++) {
        if (rc == 0)
            loadgen_stats_merge(total, &workers[i].st);
        loadgen_worker_free(&workers[i]);
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
    int rc = bench_options_parse(argc, argv, &o);
    if (rc == ST_ERROR)
        return 0;
    if (rc)
        return rc;
    struct http_url u;
    const char *uerr;
    if (http_url_parse(o.url, &u, &uerr) != 0)
        return bench_usage_error(BENCH_PROG, "--url %s: %s", o.url, uerr);

    struct bench_shared sh = {
        .o = &o, .open_loop = o.rate > 0, .timeout_ns = (uint64_t)o.timeout_ms * 1000000ull};
    char msg[512];
    if (http_url_resolve(&u, &sh.addr, &sh.addrlen, msg, sizeof msg) != 0) {
        fprintf(stderr, "inferd bench: %s\n", msg);
        return 1;
    }

    struct bench_request r;
    struct bench_stats *total = NULL;
    rc = bench_request_build(&r, &o, &u, &sh.addr, sh.addrlen);
    if (rc)
        goto out;
    sh.req = r.req.data;
    sh.req_len = r.req.len;
    sh.head_request = r.head_request;

    rc = 1;
    total = mem_alloc(sizeof *total);
    if (!total) {
        fprintf(stderr, "inferd bench: out of memory\n");
        goto out;
    }
    loadgen_stats_init(total);
    raise_fd_limit(o.connections + 64);
    rc = run(&o, &sh, total);
    if (rc == 0) {
        struct report_info ri = {.authority = u.authority,
                                 .method = r.method,
                                 .target = r.target.data,
                                 .request_bytes = r.req.len,
                                 .body_bytes = r.body.len};
        if (o.json)
            bench_report_json(&o, &ri, total);
        else
            bench_report_text(&o, &ri, total);
        fflush(stdout);
    }
out:
    mem_free(total);
    bench_request_free(&r);
    return rc;
}
