/*
 * sched: a model version's request queue, dynamic batcher, and the leasing
 * of its backend instances to the threads that run its batches.
 *
 * Who runs a batch (DESIGN.md: "a backend instance is used by one thread
 * at a time"):
 *   - run to completion: sched_submit() on an I/O thread (with its struct
 *     sched_local) only queues; at the end of that event-loop pass the
 *     thread forms a batch of what it queued (natural batching: one pass's
 *     requests for a model form one batch, with no timer) and, when an
 *     instance is free and the model's recent run time (a moving estimate)
 *     is within the thread's inline budget, leases the instance, runs the
 *     batch and completes its requests itself: no hand-off;
 *   - otherwise (a model above the budget, one whose run time is not known
 *     yet, a decoupled model, or a submit from a thread without a
 *     sched_local) a thread of the worker pool (sched/pool.h) runs it;
 *   - every instance busy: the request waits; the thread that gives an
 *     instance back looks at the queue again.
 * One thread runs at most one batch of a model per event-loop pass, so a
 * loop is never held for longer than about one run of a cheap model.
 *
 * Queue order: priority level first (Triton's priority_levels; level 1 is
 * the highest; a request's `priority` 0 or above the levels takes the
 * default level), then the earliest deadline within a level (a request's
 * deadline is its arrival plus its queue timeout; requests without one
 * come after those with one, in arrival order), then requests whose
 * timeout passed under timeout_action DELAY, last in their level.
 * Background requests (shadow copies) come after every level, form
 * batches of their own, and run on the background pool, and only while
 * no other request of the model waits (an I/O thread never runs them).
 *
 * Batching (when cfg->max_batch_size > 0 and dynamic batching is on):
 *   - requests are compatible when every input has the same non-batch
 *     dimensions, or, with a padding budget, when their dimensions differ
 *     only where the model declares them variable (-1); a request carrying
 *     n samples (dim 0 = n) counts n;
 *   - a batch starts with the request at the head of the queue; the
 *     candidates are it and, in queue order, every later compatible request
 *     that still fits within max_batch_size samples (a request is never
 *     split; one that does not fit is passed over and makes the batch
 *     full) and, with padding, that keeps the zeros added within the
 *     budget (a fraction of the batch's input elements; one that would
 *     exceed it is passed over);
 *   - preferred sizes, as Triton's dynamic batcher: when a run of the
 *     candidates from the first one makes a preferred batch size, the
 *     longest such run is dispatched at once;
 *   - learned sizes, when the config has no preferred size: the scheduler
 *     keeps, per size class of its batches ((2^(i-1), 2^i] samples, up to
 *     max_batch_size), the time per sample of its successful runs
 *     (sched/learn.h), and prefers the largest class that runs within
 *     1/8 of the fastest per sample, once a larger class was measured to
 *     be slower: when the candidates reach that size, the longest run of
 *     them within it is dispatched at once (a batch that does not reach
 *     it waits as below: never longer than max_queue_delay). To measure
 *     the classes a full batch never lands in, a batch whose candidates
 *     fill max_batch_size is now and then capped at such a class instead
 *     (at most every other batch while a class has fewer than 4 runs, or
 *     none in 256 batches): exploring never makes a batch wait. The same
 *     statistics, kept for every model that batches (preferred sizes in
 *     the config or not), give the estimated run time of a batch once its
 *     size class has run (the inline budget's test, the estimated wait);
 *   - when none does, all the candidates are dispatched once the batch is
 *     full or its first request has waited max_queue_delay_us (or the
 *     scheduler stops); until then the batch waits (the thread that found
 *     it waiting sets a timer: its loop's, or the pool's);
 *   - padded inputs are filled with zeros up to the longest dimension of
 *     the batch; an output dimension the model declares variable whose
 *     size is the padded length of an input dimension is cut back to each
 *     request's own length of that dimension (the first such input
 *     dimension when several have that length);
 *   - a request with more than max_batch_size samples is refused (400), or,
 *     with allow_oversize (models without a config file), runs alone.
 *
 * Time limits. A request's queue timeout is its level's
 * default_timeout_us, or its own `timeout` when shorter and the policy
 * allows it (or when the level has none). When it passes while the
 * request waits, the request is answered 504 (REJECT) and never runs, or
 * moves behind its level (DELAY). Deadline-aware admission: under REJECT,
 * a request whose timeout is shorter than the estimated wait is refused at
 * once with 503 and err->retry_after_s. The estimated wait: the batches
 * running now finish (each at the estimated run time of its samples), then
 * the requests queued ahead of it run as batches of the size a deep queue
 * forms (the largest preferred size, else max_batch_size samples; one
 * request each without batching), one round of them per instance at a
 * time; it rides in the batch after them.
 *
 * Queue budget (cfg->queue_budget_us): a time bound for the requests that
 * have no timeout at all (none at their level, none of their own), so
 * that an overloaded model refuses at once instead of letting its queue
 * grow to max_queue_size. A request whose estimated wait exceeds the
 * budget is refused with 503 and err->retry_after_s (the estimated wait,
 * rounded up to whole seconds). SCHED_QUEUE_BUDGET_AUTO derives it from
 * the model's estimated run time: SCHED_QUEUE_BUDGET_BATCHES runs of the
 * batch a deep queue forms (at least one full batch runs while the next
 * one waits, so refusing beyond that costs no throughput), and at least
 * SCHED_QUEUE_BUDGET_FLOOR_US (so that a fast model's bursts are not
 * refused for the noise of a shared machine). Neither kind of admission
 * refuses before the model's first run (nothing is estimated yet), nor
 * DELAY requests, nor background requests; the budget spares
 * req->budget_exempt (a sequence's requests after its START).
 * Cancelled requests are answered 499 and never run. The queue is bounded
 * by max_queue_size requests (and each level by its own max_queue_size):
 * beyond it submit fails with 429 — unless the last queued request is of a
 * lower level than the newcomer (background requests are the lowest): that
 * one is shed instead (answered 429) and the newcomer takes its place, so
 * overload sheds shadow copies and low priorities first.
 *
 * Outputs of a batched request point into the batch's output memory (or,
 * for outputs cut back after padding, a copy in it), shared by the batch's
 * requests and freed when the last of them calls sched_release() (from
 * any thread).
 *
 * Lifecycle: sched_start() once the model's instances are loaded;
 * sched_stop() once nothing more will be submitted: it waits for every
 * queued request to finish.
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
#include "net/loop.h"

struct sched;
struct sched_pool;

/* What the scheduler needs of the model version it serves. sched_start
 * copies the struct; what it points to must outlive the scheduler (the
 * model layer's struct model owns it). */
struct sched_model {
    const char *name;                  /* for error messages and logs */
    const char *version;               /* decimal text, for the observer */
    const struct backend_ops *backend;
    void *const *instances;            /* leased to one thread at a time */
    uint32_t ninstances;
    const struct model_info *info;     /* inputs and outputs, in model order */
    /* The worker pool that runs the batches no I/O thread runs inline;
     * NULL: the scheduler starts a pool of its own, one thread per
     * instance. A decoupled model always has its own pool (its requests
     * hold a thread for as long as they stream). */
    struct sched_pool *pool;
    /* The pool that runs background batches (shadow copies), normally one
     * of idle CPU priority (sched_pool_start_idle); NULL: `pool`. */
    struct sched_pool *background_pool;
};

/* One backend run of a batch, as the observer sees it. */
struct sched_batch_report {
    struct infer_request *const *members; /* the batch's requests */
    uint32_t n;
    int64_t samples;          /* the members' samples (sum of req->batch) */
    int64_t elements;         /* input elements of the batch, padding included */
    int64_t padding;          /* of which zeros added by padding */
    bool inline_run;          /* run by the I/O thread that formed it */
    uint64_t start_ns;        /* batch taken by its thread (clock_now_ns) */
    uint64_t infer_start_ns;  /* backend execute() call; both 0 if it never ran */
    uint64_t infer_end_ns;
    uint64_t end_ns;          /* outputs assigned to the members */
    const struct error *err;  /* status 0: the run succeeded */
};

/* Why sched_submit refused a request it could have queued. */
enum sched_refusal {
    SCHED_REFUSED_FULL,     /* 429: the queue (or the request's level) is full */
    SCHED_REFUSED_DEADLINE, /* 503: the request's own timeout cannot be met */
    SCHED_REFUSED_BUDGET,   /* 503: the wait would exceed the queue budget */
    SCHED_REFUSALS
};

/* Set by the layer above (e.g. obs/batch_obs.h) to learn about every
 * backend run. All members optional; a zeroed struct observes nothing. */
struct sched_observer {
    /* The thread that ran the batch (an I/O thread or a pool worker),
     * after each backend run (success or failure), before the members'
     * complete() callbacks. Must not block. */
    void (*on_batch)(void *ctx, const struct sched_model *m, const struct sched_batch_report *b);
    /* The submitting thread, when sched_submit refuses a request for one
     * of these reasons (after the queue's lock is released). Must not
     * block. */
    void (*on_refuse)(void *ctx, const struct sched_model *m, enum sched_refusal why);
    /* Once, when the scheduler is stopped (sched_stop once its queue is
     * empty and every instance is back, or a failed sched_start): nothing
     * reports to ctx any more. */
    void (*on_stop)(void *ctx);
    void *ctx;
};

/* Background requests (infer.h) waiting per model version; more are
 * refused with 429. */
#define SCHED_BACKGROUND_MAX 64

#define SCHED_MAX_PREFERRED 8
#define SCHED_MAX_LEVELS 16

/* Queue policy of one priority level (Triton's ModelQueuePolicy). */
struct sched_queue_policy {
    uint64_t default_timeout_us; /* a request's time limit in the queue; 0 = none */
    bool allow_timeout_override; /* its own `timeout` may be shorter */
    bool delay;                  /* timeout_action DELAY (else REJECT) */
    uint32_t max_queue_size;     /* requests waiting at this level; 0 = no own limit */
};

struct sched_config {
    uint32_t max_batch_size; /* samples per batch; 0 = the model has no batch dimension */
    bool dynamic_batching;   /* combine requests (else each runs alone) */
    uint32_t preferred_batch_sizes[SCHED_MAX_PREFERRED];
    uint32_t npreferred;
    uint64_t max_queue_delay_us;
    uint32_t max_queue_size; /* requests waiting, all levels; more → 429 */
    bool allow_oversize;     /* requests above max_batch_size run alone */
    /* Priority levels 1..nlevels (0 is taken as 1), their policies at
     * levels[level - 1], and the level of a request that names none. */
    uint32_t nlevels;
    uint32_t default_level;
    struct sched_queue_policy levels[SCHED_MAX_LEVELS];
    /* Variable-length batching: zeros padding may add, as a fraction of
     * a batch's input elements; 0 = off (only equal shapes batch). */
    double padding_budget;
    /* Decoupled model (backend execute_stream): each request runs alone
     * and may get many responses through req->on_response before
     * complete(); a cancelled request stops at its next response. */
    bool decoupled;
    /* The queue budget of requests that have no queue timeout (none at
     * their level, none of their own): a request whose estimated wait is
     * longer is refused at once (503). 0 = none; SCHED_QUEUE_BUDGET_AUTO =
     * derived from the model's measured run time (see the top). The model
     * layer sets it only for versions whose config has no queue policy. */
    uint64_t queue_budget_us;
    /* Prefer the batch sizes learned to run fastest per sample (see the
     * top); the model layer sets it for dynamic batching without
     * preferred_batch_size (with preferred sizes it has no effect). */
    bool learn_batch_sizes;
    struct sched_observer observer; /* zero = none */
};

#define SCHED_QUEUE_BUDGET_AUTO UINT64_MAX
/* The automatic budget: the time of this many batches of the size a deep
 * queue forms, at the model's estimated run time, and at least the floor. */
#define SCHED_QUEUE_BUDGET_BATCHES 2
#define SCHED_QUEUE_BUDGET_FLOOR_US 5000

/* Takes the instances of m (m->instances) and, without m->pool, starts a
 * pool of its own. Takes over cfg->observer: its on_stop runs exactly
 * once, also when this fails. */
int sched_start(const struct sched_model *m, const struct sched_config *cfg, struct sched **out);

/* The per-I/O-thread context of run to completion: one per event loop,
 * used on that loop's thread only. budget_us: the longest estimated batch
 * run the thread takes on itself (0: it never runs one). */
struct sched_local;
struct sched_local *sched_local_new(struct loop *l, uint64_t budget_us);
/* The loop stopped (on its thread, after loop_run): the batches it would
 * have looked at go to the pool. Other threads' requests may be among
 * them (a thread that gives an instance back takes the queue on). */
void sched_local_stop(struct sched_local *x);
/* After the loop stopped. */
void sched_local_free(struct sched_local *x);

/* Queues req. `here`: the calling I/O thread's context (the batch may run
 * on it at the end of this loop pass), or NULL on any other thread (a pool
 * worker runs it). Returns 0, or ST_ERROR with err: 429 when the queue is full
 * (the caller adds Retry-After), 503 when the request's deadline cannot be
 * met (err->retry_after_s set) or the model is stopping, 400 for a batch
 * larger than allowed. On failure the request stays with the caller. */
int sched_submit(struct sched *s, struct infer_request *req, struct sched_local *here,
                 struct error *err);

/* Releases the outputs of a completed request (any thread; once). */
void sched_release(struct infer_request *req);

/* Whether a background request would be refused now (SCHED_BACKGROUND_MAX
 * wait): a hint, read without the lock, to skip preparing one. */
bool sched_background_full(const struct sched *s);

/* Requests queued and not yet taken by a thread. */
uint32_t sched_queue_depth(struct sched *s);

/* Whether sched_submit would refuse a request of the highest priority
 * level now because the queue is full: max_queue_size requests wait and
 * none of a lower level that it could shed. A hint, read without the lock
 * (the queue changes meanwhile), for refusing a request before its body
 * is read; sched_submit decides. */
bool sched_queue_full(const struct sched *s);

/* The queue budget in force now, in ns: 0 without one, or while an
 * automatic budget has no run time to derive it from yet. */
uint64_t sched_queue_budget_ns(struct sched *s);

/* The batch size the batcher learned to prefer (see the top) in *size, 0
 * while none (batches as large as the queue allows). false: the version
 * does not learn one (no dynamic batching, or preferred sizes in its
 * config). */
bool sched_preferred_batch_size(struct sched *s, uint32_t *size);

/* The observer given to sched_start (never NULL; may be all zero). */
const struct sched_observer *sched_get_observer(const struct sched *s);

/* Waits until the queue is empty and every instance is back, then frees
 * the scheduler (its memory once no thread refers to it any more). */
void sched_stop(struct sched *s);

#endif
