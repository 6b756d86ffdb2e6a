/*
 * infer: one inference request as it travels from a protocol front end
 * through the scheduler to a backend and back.
 *
 * Lifecycle:
 *   The serving pipeline (serve/) creates the request, has the front end
 *   decode inputs into it (memory from req->arena or pointing into its
 *   receive buffer), sets `complete` (and `on_response` for a decoupled
 *   model), and submits it to the model's scheduler. From then on the
 *   scheduler's worker thread owns it: it runs the backend and
 *     - for an ordinary model, fills outputs/rc/err: the one response;
 *     - for a decoupled model, calls on_response() for each response the
 *       model sends (zero or more, outputs valid during the call only),
 *       then sets rc/err (outputs NULL);
 *   and calls complete(req) on the worker thread, exactly once, which hands
 *   ownership back (the pipeline posts it to its I/O loop). The front end
 *   encodes the outputs, sched_release() frees them, and the request goes
 *   back to its pool.
 */
#ifndef INFERD_CORE_INFER_H
#define INFERD_CORE_INFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/tensor.h"

struct model;

/* W3C trace context of a request, set by the front end before submit
 * (obs/request.c) and read by the scheduler, which records one span per
 * batch linked to its sampled members and stores that span's ids here. */
struct infer_trace {
    uint8_t trace_id[16];
    uint8_t span_id[8];       /* the request's server span */
    uint8_t batch_trace_id[16];
    uint8_t batch_span_id[8]; /* set by the worker when batch_linked */
    bool sampled;
    bool batch_linked;
};

/* Triton's sequence parameters (sequence_id, sequence_start,
 * sequence_end), set by the front end's decoder whatever the model; only a
 * model with sequence_batching reads them (serve/seqbatch.h). */
struct infer_sequence {
    uint64_t id;        /* a numeric correlation id; 0: none or a string one */
    const char *id_str; /* a string correlation id (the request's memory), or NULL */
    uint32_t id_str_len;
    bool start, end;
};

struct infer_request {
    struct arena arena;
    struct model *model;
    const char *id; /* client's request id, NUL-terminated, or NULL */
    uint32_t id_len;

    struct tensor *inputs;
    uint32_t ninputs;
    const char *const *output_names; /* outputs to compute, in response order;
                                        each points to the model's own name */
    uint32_t noutputs;
    /* noutputs flags aligned with output_names: true = return that output
     * as binary tensor data (Triton's extension). NULL = every output in
     * JSON. Set by the front end's decoder, read by its encoder. */
    const bool *output_binary;
    /* noutputs counts aligned with output_names: k > 0 = return that output
     * as its top k classes per batch row (Triton's classification
     * extension, serve/classify.h), 0 = its values. NULL = none. Set by
     * the front end's decoder; the pipeline converts the outputs. */
    const uint32_t *output_classes;
    int64_t batch;        /* samples along dim 0 (1 for models without batching) */
    uint64_t timeout_us;  /* client's `timeout` parameter; 0 = none */
    uint64_t priority;    /* client's `priority` parameter; 0 = the model's default level */
    struct infer_sequence sequence;
    /* The last hidden_outputs of output_names are computed for the server
     * (a sequence's state, serve/seqbatch.h), not sent to the client. */
    uint32_t hidden_outputs;
    /* Background work (a shadow copy, policy/shadow.h): queued behind
     * every other request, batched only with background requests, always
     * run by the worker pool, timeout_us its queue limit whatever the
     * model's policy; dropped (429) when SCHED_BACKGROUND_MAX wait. */
    bool background;
    /* Not held to the queue budget (sched/sched.h): a request of a
     * sequence in progress (serve/seqbatch.h), whose refusal would stall a
     * sequence already admitted; new sequences are. Set by the pipeline. */
    bool budget_exempt;
    /* The front end carries many responses (a streaming endpoint): a
     * generative model streams one per token unless told otherwise
     * (gen/engine.h). Set by the pipeline. */
    bool many_responses;

    /* Filled by the worker before complete(). */
    int rc;                /* 0 or ST_ERROR with err set */
    struct error err;
    struct tensor *outputs; /* noutputs entries, valid until sched_release() */
    struct sched_batch *batch_ref; /* owner of the output memory */
    uint32_t batch_size;           /* samples of the batch this request ran in */
    uint64_t enqueue_ns, exec_start_ns, exec_end_ns;
    /* The backend call inside [exec_start_ns, exec_end_ns]: before it the
     * batch's inputs are gathered, after it the outputs are split back
     * (Triton's compute_input / compute_infer / compute_output). */
    uint64_t infer_start_ns, infer_end_ns;
    struct infer_trace trace;
    /* Generative models (gen/engine.h): the prompt tokens the model read
     * and the tokens it generated for this request, set by the engine
     * before each response (so before complete()); 0 and 0 for a request
     * that never reached the running set. What token budgets charge and
     * usage metering counts (policy/tokenquota.h). */
    uint32_t usage_prompt_tokens, usage_completion_tokens;

    /* Set (any thread) when the client is gone: the scheduler completes a
     * cancelled request with status 499 instead of running it, if it has
     * not started yet. */
    atomic_bool cancelled;

    /* Decoupled models: one response, on the worker thread, before
     * complete(). `outputs` (noutputs, in output_names order) are valid
     * during the call only; `final` when the model marked it its last.
     * Returns false when the request is cancelled: the model stops. */
    bool (*on_response)(struct infer_request *req, const struct tensor *outputs, uint32_t n,
                        bool final);
    /* Called on the thread that ran the request (an I/O thread or a pool
     * worker, sched/sched.h), or that dropped it from the queue. */
    void (*complete)(struct infer_request *req);
    struct infer_request *next; /* scheduler queue link */
    /* The scheduler's, while the request is queued. */
    uint32_t _level;       /* priority level - 1 */
    bool _delayed, _picked;
    uint64_t _deadline_ns; /* queue timeout, absolute; 0 = none */
};

#endif
