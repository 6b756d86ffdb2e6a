/*
 * upstream: the pool of upstream KServe v2 gRPC servers one remote model
 * version is served by, and the thread that talks to them.
 *
 * Each pool runs its own thread with an event loop (net/loop.h); every
 * upstream has one HTTP/2 connection (cluster/grpc_conn.h), opened on
 * first use and reused by all calls (multiplexed), reopened after it
 * failed.
 *
 * Choosing an upstream: power of two choices — two distinct eligible
 * upstreams at random, the one with fewer outstanding calls. Eligible:
 * healthy and not ejected. Healthy: an active health check, a ModelReady
 * of the model every health.interval_ms with health.timeout_ms, said
 * ready, and since then no check was answered "not ready" (or with an
 * error status) and fewer than unhealthy_threshold checks in a row went
 * unanswered (timeout, connection error); an upstream is presumed healthy
 * until its first check. An upstream is ejected for eject_secs after
 * eject_failures consecutive failures (connection errors, UNAVAILABLE,
 * timeouts); once that time has passed the next successful health check
 * takes it back.
 *
 * Retries: a call that certainly never reached an upstream (connection
 * refused, stream refused, GOAWAY below it: grpc_conn.h's `reached`) is
 * sent again to another upstream, at most max_retries times; a call that
 * may have run is not retried, except a replayable stream (below). A
 * call's deadline (timeout_us, from the request's) covers its retries.
 *
 * Streams: a call with on_message is a server stream (grpc_conn.h), its
 * messages handed to on_message on the pool's thread, each with the
 * `attempt` it came from (1 for the first send). A replayable stream
 * whose connection is lost mid-stream (the upstream died or was cut off:
 * GRPC_TRANSPORT) is sent again, whole, to another upstream while its
 * retries last; its messages then start again from the first, with the
 * next attempt number, and the caller skips what it has already had
 * (cluster/remote.h's replay). The caller clears `replayable` (from
 * on_message) once nothing may be replayed any more, e.g. after the last
 * message. Each such resend counts in inferd_upstream_resumes_total of
 * the upstream that failed.
 *
 * The set of upstreams is static (config) or replaced by discovery
 * (upstream_pool_set, any thread): upstreams that left finish their
 * calls and are dropped.
 *
 * Metrics (upstream_pool_metrics): per upstream, requests, failures,
 * ejections, outstanding calls, health state.
 */
#ifndef INFERD_CLUSTER_UPSTREAM_H
#define INFERD_CLUSTER_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "cluster/grpc_conn.h"
#include "net/loop.h"

#define UPSTREAM_MAX 64
#define UPSTREAM_ADDR_MAX 128

struct upstream_pool_config {
    const char *model; /* the model's name upstream */
    const char *label; /* "model:version" served here, for logs and metrics */
    uint32_t health_interval_ms, health_timeout_ms;
    uint32_t unhealthy_threshold; /* unanswered checks in a row that take an upstream out */
    uint32_t eject_failures, eject_secs;
    uint32_t max_retries;
};

struct upstream_pool;

/* One call through the pool; caller-owned until done(). */
struct upstream_call {
    const char *path;
    const uint8_t *msg;
    size_t len;
    uint64_t timeout_us;                   /* 0: none */
    char traceparent[64];                  /* "" : none */
    char request_id[128];                  /* "" : none */
    void (*done)(struct upstream_call *c); /* on the pool's thread */
    /* NULL: unary. Else a server stream: each message (valid during the
     * call); false cancels the call (done() with GRPC_CANCELLED). */
    bool (*on_message)(struct upstream_call *c, const uint8_t *msg, size_t len);
    bool replayable; /* a stream that may be sent again after a lost connection */
    /* 0: the pool's choice (power of two choices). Else calls with the same
     * key go to the same upstream while it is eligible (a sequence's
     * requests, whose state lives on one upstream). */
    uint64_t affinity;
    void *ctx;

    /* Results: status is a gRPC status (0 OK) or GRPC_TRANSPORT; resp the
     * response message (the caller buf_free()s it). */
    int status;
    char message[256];
    char upstream[UPSTREAM_ADDR_MAX]; /* the last one tried, or "" */
    struct buf resp;
    uint32_t attempt; /* sends so far (1 for the first), also in on_message */

    /* The pool's. */
    struct upstream_pool *_pool;
    struct upstream *_up;
    uint64_t _deadline_ns;
    struct grpc_unary _u;
    struct loop_task _task;
};

/* Starts a pool (its thread) over addrs ("host:port"). 0 or ST_ERROR with err. */
int upstream_pool_start(const struct upstream_pool_config *cfg, const char *const *addrs,
                        uint32_t naddrs, struct upstream_pool **out, struct error *err);
/* Stops the thread: calls still outstanding fail; frees. */
void upstream_pool_stop(struct upstream_pool *p);
/* Replaces the set of upstreams (any thread). */
void upstream_pool_set(struct upstream_pool *p, const char *const *addrs, uint32_t naddrs);
/* Sends c (any thread); done() is called once on the pool's thread. */
void upstream_pool_call(struct upstream_pool *p, struct upstream_call *c);
/* Sends a call and waits for it (not on the pool's thread): 0 with the
 * response in *resp (caller frees), or ST_ERROR with err naming the failure. */
int upstream_pool_call_sync(struct upstream_pool *p, const char *path, const uint8_t *msg,
                            size_t len, uint64_t timeout_us, struct buf *resp, struct error *err);
/* At least one upstream is eligible. Any thread. */
bool upstream_pool_ready(const struct upstream_pool *p);
/* An HTTP status for a failed call's gRPC status. */
int upstream_http_status(int grpc_status);
/* Prometheus lines (without HELP/TYPE) of the pool's upstreams, labelled
 * model="<label>" and upstream="<addr>", for each of the families
 * inferd_upstream_requests_total, _failures_total, _ejections_total,
 * _resumes_total, _health_check_misses_total, _outstanding, _healthy
 * (1 eligible, 0 not): `family` picks one, without the _total. Any
 * thread. */
void upstream_pool_metrics(struct upstream_pool *p, const char *family, struct buf *out);

#endif
