/*
 * sched_int: what the files of src/sched/ share and nothing else includes.
 *
 *   queue.c   the queue (order, admission, time limits), batch formation,
 *             leasing instances, start and stop
 *   run.c     running one formed batch on a leased instance: gather (and
 *             pad) inputs, execute, hand the outputs back (and cut them),
 *             note the run in the estimates
 *   learn.c   the time per sample by batch size, and the size to prefer
 *             (learn.h: it knows nothing of the scheduler)
 *   pool.c    the worker pool: threads that run what no I/O thread runs
 *   local.c   the I/O thread's side of run to completion
 *
 * Locks: a scheduler's `lock` may be held while taking its pool's lock,
 * never the other way round. No lock is held while a batch runs or while
 * requests are completed.
 */
#ifndef INFERD_SCHED_SCHED_INT_H
#define INFERD_SCHED_SCHED_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "sched/learn.h"
#include "sched/pool.h"
#include "sched/sched.h"

/* One backend instance and the scratch memory of a batch run on it; held
 * by one thread at a time (leased from the scheduler's free list). */
struct slot {
    void *instance;
    struct buf *gather;     /* one per model input */
    struct tensor *inputs;  /* the batch's inputs */
    const char **names;     /* union of the members' requested outputs */
    struct tensor *outs;    /* the batch's outputs */
    int64_t (*padded)[TENSOR_MAX_DIMS]; /* per input: the batch's padded dims */
    int64_t (*trial)[TENSOR_MAX_DIMS];  /* per input: padded dims with one more member */
    struct infer_request **members;
    uint32_t capacity;    /* size of members */
    uint32_t n;           /* members of the batch formed on it */
    bool leased;          /* held by a thread (not on the free list) */
    uint64_t started_ns;  /* while leased: when its batch started */
    int64_t samples;      /* while leased: its batch's samples */
    bool exploring;       /* its planned batch is capped to explore a size (learn.h) */
    struct slot *next_free;
};

struct sched {
    struct sched_model model; /* valid until sched_stop() returns */
    uint32_t ninputs;         /* model.info->ninputs, for sched_free */
    struct sched_config cfg;
    struct sched_pool *pool;     /* model.pool, or own_pool */
    struct sched_pool *own_pool; /* started and stopped by this scheduler */
    atomic_uint refs;            /* the owner's, pools' and loops' references */

    pthread_mutex_t lock;
    pthread_cond_t drained; /* signalled when an instance comes back while stopping */
    struct infer_request *head, *tail; /* the queue, in its order */
    uint32_t queued;
    int64_t queued_samples; /* of the queued requests (sum of req->batch) */
    uint32_t level_queued[SCHED_MAX_LEVELS + 1]; /* the last: background requests */
    atomic_uint background_waiting; /* level_queued's last, for readers without the lock */
    atomic_bool full;               /* sched_queue_full's answer, for readers without the lock */
    uint64_t seq; /* arrival counter */
    struct slot *slots, *free_slots;
    uint32_t nslots, nfree;
    uint64_t est_ns; /* moving estimate of a batch's run; 0 = no run yet */
    uint64_t est_samples_x256; /* moving estimate of a batch's samples, x256 */
    /* Time per sample by batch size (learn.h), kept for a model that
     * batches (predict_ns uses it), and, with prefer_learned
     * (cfg.learn_batch_sizes, no configured preferred size), its learned
     * preferred size and exploring caps apply. */
    bool learning, prefer_learned;
    struct learn learn;
    bool stopping;

    struct pool_job job; /* runs sched_work(s, NULL) on a pool worker */
    struct pool_job bg_job;       /* runs background batches on bg_pool */
    struct sched_pool *bg_pool;   /* model.background_pool, or pool */

    pthread_mutex_t batches_lock;
    struct sched_batch *free_batches;
};

/* Weight of a new run in the moving estimates: 1/2^SCHED_EST_SHIFT. */
#define SCHED_EST_SHIFT 3

/* Output memory of one backend run, shared by the requests of the batch. */
struct sched_batch {
    struct sched *sched;
    void *instance;
    void *backend_state;
    struct arena arena; /* BYTES outputs, cut-back outputs, per-batch tensors */
    atomic_uint refs;
    struct sched_batch *next_free;
};

void sched_ref(struct sched *s);
void sched_unref(struct sched *s);

/* ---- run.c ---- */
/* A finished run of `samples` samples that took ran_ns, into s's estimates
 * (takes s->lock; nothing for a decoupled model, whose runs last as long as
 * their streams), and, when it succeeded, into the learned batch sizes.
 * Called before the run's requests complete: a client that has its answer
 * may send its next request at once, and whether that one runs inline or
 * on the pool is decided by the estimate. */
void sched_note_run(struct sched *s, uint64_t ran_ns, int64_t samples, bool ok);
int slot_init(struct slot *sl, const struct sched *s, void *instance);
void slot_free(struct slot *sl, uint32_t ninputs);
/* Runs the sl->n members on the slot's instance, notes the run in the
 * estimates (sched_note_run) and then completes each member. */
void run_batch(struct sched *s, struct slot *sl, bool inline_run);
void run_decoupled(struct sched *s, struct slot *sl);
void batch_pool_free(struct sched *s);
int batch_pool_fill(struct sched *s, uint32_t n);
/* Whether a and b may share a batch (dims equal, or differing only where
 * padding is allowed). */
bool batch_compatible(const struct sched *s, const struct infer_request *a,
                      const struct infer_request *b);

/* ---- local.c ----
 * The I/O thread's pending list knows a scheduler only as its pool job
 * (hold/drop while listed, run_local to run it, pool_post to hand it to a
 * worker), so local.c never calls into queue.c: the dependency is one way. */
uint64_t local_budget_ns(const struct sched_local *x);
/* On the loop thread: run `job` (run_local) at the end of this pass (at_ns

 * 0) or once at_ns has come; if the list cannot grow, `pool` runs it. */
void local_add(struct sched_local *x, struct sched_pool *pool, struct pool_job *job,
               uint64_t at_ns);

#endif
