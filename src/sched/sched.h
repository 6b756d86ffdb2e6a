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
 *   - a batch is dispatched as soon as it holds max_batch_size samples, or a
 *     preferred batch size (or more than the largest one), or when its oldest
 *     request has waited max_queue_delay_us;
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
 */
#ifndef INFERD_SCHED_SCHED_H
#define INFERD_SCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "core/infer.h"

struct model;
struct sched;

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
};

/* Starts one worker per instance of m (m->instances). */
int sched_start(struct model *m, const struct sched_config *cfg, struct sched **out);

/* Queues req. Returns 0, or -1 with err: 429 when the queue is full (the
 * caller adds Retry-After), 400 for a batch larger than allowed, 503 when
 * the model is stopping. On failure the request stays with the caller. */
int sched_submit(struct sched *s, struct infer_request *req, struct error *err);

/* Releases the outputs of a completed request (any thread; once). */
void sched_release(struct infer_request *req);

/* Requests queued and not yet taken by a worker. */
uint32_t sched_queue_depth(struct sched *s);

/* The version's statistics (obs/stats.h), where the front end records its
 * requests' outcomes; NULL if they could not be allocated. */
struct stats_model;
struct stats_model *sched_stats(const struct sched *s);

void sched_stop(struct sched *s);

#endif
