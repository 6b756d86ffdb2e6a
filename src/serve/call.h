/*
 * call: the protocol-neutral inference call and the serving pipeline that
 * carries it from a front end to the scheduler and back.
 *
 * Every front end (REST infer and generate, gRPC ModelInfer and
 * ModelStreamInfer) decodes only its wire format and encodes what comes
 * back; everything between is here, once:
 *
 *   front end                         serve_call_new(), fills the selector,
 *                                     deadline, header accessor, then
 *   serve_call_start()                runs the stages in order:
 *     resolve                         model (and version) from the registry
 *                                     snapshot; holds a model reference
 *     (policy stages)                 auth, rate limits, routing (which may
 *                                     change the version), breaker, the
 *                                     limiter's and the queue's refusals
 *     decode                          waits for the request body if the
 *                                     front end started the call on the
 *                                     head (its body()), then the front
 *                                     end's decode() against the model
 *     (after decode)                  token quotas, concurrency slot,
 *                                     preprocessing, shadow copy
 *     submit                          the model's scheduler
 *   completion events                 on the call's I/O loop: emit() for
 *                                     each response (final flag on the
 *                                     last), or fail() once; then end().
 *
 * A stage returns STAGE_CONTINUE, STAGE_DONE (it answered the call:
 * serve_call_error() for an error, serve_call_respond() with a response),
 * or STAGE_DEFER (it keeps the call and
 * resumes it later with serve_call_resume(), from any thread). The stage
 * list is fixed at startup (struct serve_pipeline): the production list
 * is built by the layer that knows every stage (src/cli/pipeline.c); a
 * new stage is one file plus one line there.
 *
 * Responses. An ordinary model answers once: emit() with the request's
 * outputs and final = true. A decoupled model (config
 * model_transaction_policy { decoupled: true }) answers zero or more times
 * as it runs: emit() per response, `final` on the one the model marked
 * last; when it ends without marking one, an empty final response
 * (noutputs 0) follows. An error after responses were emitted ends the
 * call with fail(). What a front end can carry is its call->mode:
 *   SERVE_ONE_RESPONSE    one response; a decoupled model is refused (400)
 *                         before it runs (Triton's infer and ModelInfer)
 *   SERVE_SINGLE_DECOUPLED one response; a decoupled model may serve it,
 *                         but a second response fails the call (400,
 *                         "use the streaming endpoint": Triton's generate)
 *   SERVE_MANY_RESPONSES  any number (ModelStreamInfer, generate_stream)
 *
 * Calls started on the head. An HTTP front end may start a call as soon
 * as the request's head is in (http/txn.h, "Request bodies"), so that
 * every stage before decode (auth, rate limits, resolve, route, breaker,
 * the head-time refusals of the limiter and the queue) answers before the
 * body is read. Its body() says whether the body is there: decode defers
 * (and is run again on serve_call_resume(), which the front end calls
 * once the body is complete or failed) until it is. Those stages must not
 * keep pointers into the request beyond their run (the receive buffer may
 * move while the body arrives); what they take must not be held by the
 * time a slow client spends uploading: the limiter's slot is taken after
 * decode for that reason.
 *
 * Cancellation. A front end whose client went away stores true in
 * call->req.cancelled: queued work is dropped (499) and a decoupled model
 * stops at its next response. Responses that arrive afterwards are still
 * passed to emit() (the front end drops them) so that the sequence always
 * ends.
 *
 * Lifecycle and threads. A call belongs to the I/O thread (struct
 * serve_thread) that created it: every front-end callback runs there.
 * Created by serve_call_new(), started once, it ends with exactly one
 * end() callback, after which it returns to the thread's pool (the front
 * end must drop its pointers in end()). Its memory (req.arena) is freed
 * in one step then.
 */
#ifndef INFERD_SERVE_CALL_H
#define INFERD_SERVE_CALL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/pool_use.h"
#include "core/infer.h"
#include "model/repository.h"
#include "net/loop.h"
#include "obs/request.h"
#include "obs/route_kind.h"
#include "serve/shm.h"

struct infer_call;
struct serve_thread;

enum stage_result { STAGE_CONTINUE, STAGE_DONE, STAGE_DEFER };

enum serve_mode { SERVE_ONE_RESPONSE, SERVE_SINGLE_DECOUPLED, SERVE_MANY_RESPONSES };

/* One stage: looks at (and may change) the call; see the top of the file.
 * done (optional) runs when the call ends, for every stage whose run()
 * was called, last stage first, before the front end's end(): the call's
 * outcome is final there (req.rc, req.err; on success req.outputs of an
 * ordinary model, still valid), so a stage can record it and release what
 * its run() took. */
struct serve_stage {
    const char *name;
    enum stage_result (*run)(struct infer_call *call, const void *cfg);
    const void *cfg; /* the stage's immutable configuration */
    void (*done)(struct infer_call *call, const void *cfg);
};

#define SERVE_MAX_STAGES 16

struct serve_pipeline {
    struct serve_stage stages[SERVE_MAX_STAGES];
    uint32_t nstages;
};

/* One response handed to emit(): outputs in the request's output order,
 * valid during the call only. */
struct serve_response {
    const struct tensor *outputs;
    uint32_t noutputs;
    bool final;
};

/* What a front end provides (a static const table). */
struct serve_frontend {
    const char *name;
    /* Fills call->req for model m: inputs (model order), requested outputs,
     * id, parameters such as `timeout`. Returns 0 or ST_ERROR with err (4xx). */
    int (*decode)(struct infer_call *call, const struct model *m, struct error *err);
    /* NULL: the request body is always there when the call starts. Else
     * asked by decode first (see "Calls started on the head" above):
     * ST_OK, the body is complete (*body_len its size, for the decode
     * memory ceiling); ST_AGAIN, not yet: the front end calls
     * serve_call_resume() once it is complete or cannot be, and decode
     * asks again; ST_ERROR, it cannot be read (err: 400, 408, 413, or 499
     * when the client went away). */
    int (*body)(struct infer_call *call, size_t *body_len, struct error *err);
    void (*emit)(struct infer_call *call, const struct serve_response *resp);
    /* The call failed (at any point); err->status is an HTTP status. */
    void (*fail)(struct infer_call *call, const struct error *err);
    /* Last callback of every call. */
    void (*end)(struct infer_call *call);
};

/* Reads a request header (HTTP) or metadata entry (gRPC), case-insensitive;
 * NULL if absent. The value is not NUL-terminated. */
typedef const char *(*serve_header_fn)(const struct infer_call *call, const char *name,
                                       size_t *len);

/* The rate limit a call came under (policy/ratelimit.h): of the buckets
 * of the rules that matched it, the one with the fewest tokens left (the
 * refusing one when the call was refused). The front ends send it as
 * RateLimit-Limit, -Remaining and -Reset (REST headers, gRPC metadata) on
 * every answer. */
struct serve_ratelimit {
    uint32_t limit;     /* the bucket's burst */
    uint32_t remaining; /* tokens left after this call, rounded down */
    uint32_t reset_s;   /* seconds until the bucket is full again, rounded up */
    bool set;           /* false: no rule matched (nothing to send) */
};

/* Why a token reservation was refused (policy/tokenquota.h). */
enum serve_quota_refusal {
    SERVE_QUOTA_NONE,      /* admitted */
    SERVE_QUOTA_RATE,      /* a per-minute budget: retry after Retry-After */
    SERVE_QUOTA_EXHAUSTED, /* a per-day budget: not before the next UTC day */
    SERVE_QUOTA_TOO_LARGE, /* larger than a whole budget: never fits */
};

/* The token budget a call of a generative model came under: of the
 * counters of the token-quota rules that matched it, the one with the
 * fewest tokens left after its reservation (the refusing one when it was
 * refused). The OpenAI front end sends it as x-ratelimit-limit-tokens,
 * -remaining-tokens and -reset-tokens; the refusal picks the error's
 * type and whether the client may retry (x-should-retry). */
struct serve_tokens {
    uint64_t limit;     /* the counter's limit */
    uint64_t remaining; /* tokens left after this call's reservation */
    uint64_t reset_ms;  /* until it is full again (per minute) or its day ends */
    uint64_t retry_ms;  /* refused: until the reservation would fit; else 0 */
    enum serve_quota_refusal refusal;
    bool set; /* false: no rule matched (nothing to send) */
};

struct infer_call {
    struct infer_request req; /* first: what the scheduler sees */
    struct serve_thread *thread;
    const struct serve_frontend *frontend;
    /* The front end's own, free for its use. */
    struct {
        void *ctx;           /* its object for this call (txn, gRPC call) */
        void *owner;         /* its per-thread object */
        const void *request; /* its decoded envelope (the unpacked message) */
        struct obsreq *obs;  /* its access-log and trace observer */
        struct infer_call *prev, *next;
        uint64_t seq, time_ns;
        bool started, flag;
    } fe;

    /* Set by the front end before serve_call_start(). */
    const char *model_name; /* NUL-terminated */
    const char *version;    /* "" or NULL: chosen by policy (the newest) */
    serve_header_fn header;
    const char *request_id; /* the id its answer carries (x-request-id); NULL: none */
    uint64_t received_ns;
    uint64_t deadline_ns;  /* absolute (clock_now_ns); 0 = none */
    enum serve_mode mode;  /* how many responses the protocol carries */

    /* Set by the stages. */
    const struct model_entry *entry; /* during the stages only (snapshot held) */
    struct model_snapshot *snapshot; /* released before submit */
    const char *tenant;              /* authenticated tenant, or NULL */
    struct serve_ratelimit ratelimit; /* set by the rate-limit stage */
    struct serve_tokens tokens;       /* set by the token-quota stage */
    /* Why req.model is the version it is (obs/route_kind.h): resolve sets
     * url or default, the routing stage may say pin, ab or canary. */
    enum route_kind route;
    void *route_ctx;  /* the routing stage's, from its run() to its done() */
    void *shadow_ctx; /* the shadow stage's, from its run() to its done() */
    void *breaker_ctx; /* the circuit breaker stage's (policy/breaker.h) */
    void *limiter_ctx; /* the concurrency limiter stage's (policy/limiter.h) */
    void *prep_ctx;    /* the preprocessing stage's (preprocess/prep.h) */
    void *tokens_ctx;  /* the token-quota stage's reservation (policy/tokenquota.h) */
    void *seq_ctx;     /* the sequence stage's sequence (serve/seqbatch.h) */
    /* A step of an ensemble (serve/ensemble.h): how many ensembles this
     * call runs inside (0: a client's call). */
    uint32_t ensemble_depth;
    struct infer_call *seq_next; /* the sequence stage's queue of a sequence's calls */

    /* Read-only for the front end: the scheduler took the request (so its
     * timings mean something). */
    bool submitted;

    /* Shared-memory regions the request uses (serve/shm.h): the decoder
     * takes them (registry set from the thread), the pipeline writes the
     * outputs that go there before emit() and releases every region
     * after end(). The encoder leaves those outputs' data out. */
    struct shm_request shm;

    /* Progress (private to the pipeline). */
    uint32_t _next_stage;
    bool _final_sent;
    bool _out_of_memory;        /* a response could not be copied (worker thread) */
    uint32_t _responses;        /* responses of a decoupled model seen on the loop */
    uint64_t _last_response_ns; /* when the worker finished copying the last one */
    struct error _stream_err;   /* why the responses were cut short, or none */
    struct loop_task _task;     /* completion or resume, posted to the loop */
    struct infer_call *_next_free;
};

/* The pipeline state of one I/O thread. */
struct serve_thread {
    struct repository *repo;
    struct loop *loop;
    const struct serve_pipeline *pipeline;
    struct shm_registry *shm; /* process-wide; NULL: no shared memory */
    struct sched_local *sched; /* run to completion on this thread; NULL: never inline */
    uint32_t inflight; /* calls started and not yet ended */
    /* Called when inflight drops to 0 (shutdown waits for it). */
    void (*on_idle)(void *arg);
    void *idle_arg;
    /* Infer calls started; read by other threads for the stats line. */
    atomic_uint_fast64_t calls;
    struct infer_call *free_calls; /* reusable, trimmed by serve_thread_tick */
    uint32_t nfree;
    struct pool_use use;
};

/* inline_budget_us: the longest estimated batch run this thread takes on
 * itself (sched.h, run to completion); 0 = none. Returns 0 or -ENOMEM. */
int serve_thread_init(struct serve_thread *t, struct repository *repo, struct loop *loop,
                      const struct serve_pipeline *pipeline, uint64_t inline_budget_us);
/* About once a second on the loop thread: frees pooled calls the last
 * period did not need (base/pool_use.h). */
void serve_thread_tick(struct serve_thread *t, uint64_t now_ms);
/* On the loop thread, once its loop_run() returned: work the thread
 * would still have run goes elsewhere (sched_local_stop). */
void serve_thread_stopped(struct serve_thread *t);
/* Frees the pool; after the loop stopped. */
void serve_thread_free(struct serve_thread *t);

/* A new call for a request of `body_len` bytes (its decode memory ceiling
 * follows from it; a call started on the head passes what it knows, and
 * decode sets the ceiling again from the front end's body()), or NULL when
 * out of memory. Loop thread. */
struct infer_call *serve_call_new(struct serve_thread *t, const struct serve_frontend *fe,
                                  void *fe_ctx, size_t body_len);
/* Returns a call that was never started to the pool (the front end could
 * not even read the request's envelope and answered itself). */
void serve_call_abandon(struct infer_call *call);
/* Runs the stages. Every outcome, even an immediate error, reaches the
 * front end through its callbacks, ending with end(). */
void serve_call_start(struct infer_call *call);
/* A deferred stage is done with the call (any thread): the stages go on,
 * from the next one, on the call's loop. A deferred stage that answers
 * the call with an error instead calls serve_call_error() first: the call
 * is then refused on its loop. */
void serve_call_resume(struct infer_call *call);
/* For stages that answer the call themselves (e.g. from a cache): its one,
 * final response; returns STAGE_DONE. */
enum stage_result serve_call_respond(struct infer_call *call, const struct tensor *outputs,
                                     uint32_t n);
/* For stages: answer the call with an error; returns STAGE_DONE. */
enum stage_result serve_call_error(struct infer_call *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Stage functions of the default pipeline, for tests that build their own
 * pipelines around them. */
enum stage_result serve_stage_resolve(struct infer_call *call, const void *cfg);
/* Before decode: refuses a call (429, as submit would) when the version's
 * queue is full even for a request of its highest priority level
 * (model_queue_full), so that a full queue refuses on the request's head;
 * submit still decides for the calls this lets through. */
enum stage_result serve_stage_queue(struct infer_call *call, const void *cfg);
enum stage_result serve_stage_decode(struct infer_call *call, const void *cfg);
enum stage_result serve_stage_submit(struct infer_call *call, const void *cfg);

#endif
