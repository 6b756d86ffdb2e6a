/*
 * loadgen: the load generation engine of `inferd bench`: the client
 * threads, their connections, the closed and the open loop, the timers.
 * bench.h tells the two load models and the lifecycle of a run; bench.c
 * starts the threads, opens the start gate and merges the statistics.
 *
 * A struct worker is one client thread: its event loop (net/loop.h), a
 * timerfd, its share of the connections and of the load (closed loop: its
 * share of the requests in flight; open loop: every stride-th request of
 * the schedule from its offset), and its statistics. A connection carries
 * one request at a time (no pipelining), sent from the shared request
 * buffer and parsed in the connection's receive buffer (http_client.h).
 * Nothing is allocated per request.
 *
 * Lifecycle: loadgen_worker_init() on the main thread (0 or -errno), then
 * loadgen_worker_main() as the thread's start routine: it connects every
 * connection, passes the start gate, loads until the window is over and the
 * measured requests it sent are answered, failed or timed out, closes its
 * connections and returns NULL. loadgen_worker_free() after the join, or
 * after a failed init (of that worker: it frees what init got).
 *
 * The start gate (struct bench_shared): a worker whose initial connects are
 * all over (connected_ok and first_connect_err then stay as they are)
 * increments nconnected under gate_lock, broadcasts gate_cond and waits for
 * go. The main thread waits for nconnected to reach the number of workers,
 * sets t0, t_measure and t_end (or abort), then sets go and broadcasts.
 * Every other field of bench_shared is set before the threads start.
 *
 * Errors: a request's failure is counted, never returned: statuses, the
 * error kinds below and reconnects of the measured requests (started in
 * the window) go to the worker's struct bench_stats. A worker whose event
 * loop fails says so on stderr and stops.
 *
 * Thread: a worker, its connections and its statistics belong to its
 * thread from its start to its join; the main thread reads w->st after the
 * join. bench_shared is read-only during the run but for the gate.
 */
#ifndef INFERD_BENCH_LOADGEN_H
#define INFERD_BENCH_LOADGEN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bench/bench_options.h"
#include "bench/gen_stream.h"
#include "bench/hist.h"
#include "net/loop.h"

enum err_kind { LOADGEN_ERR_CONNECT, LOADGEN_ERR_RESET, LOADGEN_ERR_TIMEOUT, LOADGEN_ERR_PARSE, LOADGEN_ERR_COUNT };
extern const char *const loadgen_err_names[LOADGEN_ERR_COUNT];
enum phase { P_CONNECT, P_RUN, P_DONE };

struct bench_stats {
    struct hist latency;         /* ns, measured responses (every status) */
    struct hist latency_ok;      /* ... of them answered 2xx */
    struct hist latency_refused; /* ... of them answered 429 or 503 */
    uint64_t status[600];
    uint64_t errors[LOADGEN_ERR_COUNT];
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

/* A connection: private to loadgen.c. */
struct conn;

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

/* Empty statistics: every count 0, the histograms empty. */
void loadgen_stats_init(struct bench_stats *st);
/* Adds st to total. */
void loadgen_stats_merge(struct bench_stats *total, const struct bench_stats *st);

/* Sets up worker id of nthreads with nconns connections and, closed loop,
 * concurrency requests to keep in flight (0 in the open loop). 0 or -errno. */
int loadgen_worker_init(struct worker *w, struct bench_shared *sh, uint32_t id, uint32_t nconns,
                        uint32_t concurrency, uint32_t nthreads);
/* The thread's start routine (arg: its struct worker). */
void *loadgen_worker_main(void *arg);
void loadgen_worker_free(struct worker *w);

#endif
