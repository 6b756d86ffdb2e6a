/*
 * sched: a model version's request queue, dynamic batcher and instance
 * workers.
 *
 * sched_submit() is called on an I/O thread. Each instance of the model has
 * a worker thread that takes requests from the shared queue, combines
 * compatible ones into a batch, runs the backend once for the batch and
 * splits the outputs back, then calls req->complete(req) for every request
 * on the worker thread.
 *
 * Batching (when cfg->max_batch_size > 0 and dynamic batching is on):
 *   - requests are compatible when every input has the same non-batch
 *     dimensions; a request carrying n samples (dim 0 = n) counts n;
 *   - a batch starts with the oldest queued request; the candidates are it
 *     and, in arrival order, every later compatible request that still fits
 *     within max_batch_size samples (a request is never split; one that
 *     does not fit is passed over and makes the batch full);
 *   - preferred sizes, as Triton's dynamic batcher: when a run of the
 *     candidates from the first one makes a preferred batch size, the
 *     longest such run (the largest preferred size that can be formed) is
 *     dispatched at once, even if more candidates are queued;
 *   - when none does, all the candidates are dispatched once the batch is
 *     full (max_batch_size samples, or a compatible request that does not
 *     fit) or its oldest request has waited max_queue_delay_us (or the
 *     scheduler stops); until then the batch waits, and the submit that
 *     makes it a preferred size or full wakes its worker;
 *   - requests whose `timeout` expired while queued are answered 504 and
 *     never run; requests whose `cancelled` flag is set before a worker
 *     takes them are answered 499 and never run;
 *   - a request with more than max_batch_size samples is refused (400), or,
 *     with allow_oversize (models without a config file), runs alone.
 * The queue is bounded by max_queue_size requests: beyond it submit fails
 * with 429.
 *
 * Outputs of a batched request point into the batch's output memory, which
 * is shared by the batch's requests and freed when the last of them calls
 * sched_release() (from any thread).
 *
 * Lifecycle: sched_start() once the model's instances are loaded;
 * sched_stop() once nothing more will be submitted: the workers finish
 * every queued request, then stop.
 *
 * Layering: sched sits below model/ and obs/. It knows the version it
 * serves only through struct sched_model, and tells the layers above about
 * each backend run through the optional struct sched_observer of its
 * config (obs/ records statistics and trace spans there).
 */
#ifndef INFERD_SCHED_SCHED_H
#define INFERD_SCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "core/infer.h"

struct sched;

/* What the scheduler needs of the model version it serves. sched_start
 * copies the struct; what it points to must outlive the scheduler (the
 * model layer's struct model owns it). */
struct sched_model {
    const char *name;                  /* for error messages and logs */
    const char *version;               /* decimal text, for the observer */
    const struct backend_ops *backend;
    void *const *instances;            /* one backend instance per worker */
    uint32_t ninstances;
    const struct model_info *info;     /* inputs and outputs, in model order */
};

/* One backend run of a batch, as the observer sees it. */
struct sched_batch_report {
    struct infer_request *const *members; /* the batch's requests */
    uint32_t n;
    int64_t samples;          /* the members' samples (sum of req->batch) */
    uint64_t start_ns;        /* batch taken by the worker (clock_now_ns) */
    uint64_t infer_start_ns;  /* backend execute() call; both 0 if it never ran */
    uint64_t infer_end_ns;
    uint64_t end_ns;          /* outputs assigned to the members */
    const struct error *err;  /* status 0: the run succeeded */
};

/* Set by the layer above (e.g. obs/batch_obs.h) to learn about every
 * backend run. All members optional; a zeroed struct observes nothing. */
struct sched_observer {
    /* Worker thread, after each backend run (success or failure), before
     * the members' complete() callbacks. Must not block. */
    void (*on_batch)(void *ctx, const struct sched_model *m, const struct sched_batch_report *b);
    /* Once, when the scheduler is freed (sched_stop after its workers are
     * joined, or a failed sched_start): nothing reports to ctx any more. */
    void (*on_stop)(void *ctx);
    void *ctx;
};

#define SCHED_MAX_PREFERRED 8

struct sched_config {
    uint32_t max_batch_size; /* samples per batch; 0 = the model has no batch dimension */
    bool dynamic_batching;   /* combine requests (else each runs alone) */
    uint32_t preferred_batch_sizes[SCHED_MAX_PREFERRED];
    uint32_t npreferred;
    uint64_t max_queue_delay_us;
    uint32_t max_queue_size; /* requests waiting; more → 429 */
    bool allow_oversize;     /* requests above max_batch_size run alone */
    /* Queue policy: a request's time limit in the queue when it gives none
     * (0 = none), and whether its own `timeout` may be shorter. */
    uint64_t default_timeout_us;
    bool allow_timeout_override;
    /* Decoupled model (backend execute_stream): each request runs alone
     * and may get many responses through req->on_response before
     * complete(); a cancelled request stops at its next response. */
    bool decoupled;
    struct sched_observer observer; /* zero = none */
};

/* Starts one worker per instance of m (m->instances). Takes over
 * cfg->observer: its on_stop runs exactly once, also when this fails. */
int sched_start(const struct sched_model *m, const struct sched_config *cfg, struct sched **out);

/* Queues req. Returns 0, or -1 with err: 429 when the queue is full (the
 * caller adds Retry-After), 400 for a batch larger than allowed, 503 when
 * the model is stopping. On failure the request stays with the caller. */
int sched_submit(struct sched *s, struct infer_request *req, struct error *err);

/* Releases the outputs of a completed request (any thread; once). */
void sched_release(struct infer_request *req);

/* Requests queued and not yet taken by a worker. */
uint32_t sched_queue_depth(struct sched *s);

/* The observer given to sched_start (never NULL; may be all zero). */
const struct sched_observer *sched_get_observer(const struct sched *s);

void sched_stop(struct sched *s);

#endif
