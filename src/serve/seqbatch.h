/*
 * seqbatch: Triton's sequence batcher, for models whose config has
 * sequence_batching (model/config.h): stateful models whose requests come
 * in sequences named by a correlation id.
 *
 * A pipeline stage (seqbatch_stage, after decode) and its done hook. For
 * such a model every request must carry Triton's parameters sequence_id
 * (a non-zero unsigned integer or a non-empty string; core/infer.h),
 * sequence_start on its first request and sequence_end on its last. The
 * stage
 *   - refuses, in Triton's words: a missing correlation id, a sequence
 *     that was not started, a request of more than one sample, a string id
 *     for a numeric CORRID control (and the reverse);
 *   - keeps one request of a sequence in the model at a time, in the order
 *     the requests reached it (after decode): a request whose predecessor
 *     is still running waits (the call is deferred) and is released by the
 *     predecessor's end. Requests of different sequences batch together
 *     with the model's scheduler (the strategy's max_queue_delay and
 *     preferred sizes);
 *   - feeds the control inputs (START, END, READY, CORRID, with the
 *     configured false/true values) and the implicit state: each state
 *     input gets the state output of the sequence's previous request, or
 *     zeros in the initial shape on a START; the state outputs are computed
 *     with the request but not sent (req.hidden_outputs);
 *   - drops a sequence whose START did not run (the scheduler refused it,
 *     or it expired or was cancelled in the queue), as Triton never starts
 *     one: the requests waiting behind that START without a START of
 *     their own fail as requests of a sequence not started do;
 *   - ends a sequence when its END request is admitted (a later request
 *     with the same id must START again; the requests already queued still
 *     run), or when it has been idle for max_sequence_idle_microseconds
 *     (checked as requests arrive and end).
 *
 * inferd does not bind sequences to batch slots, as Triton's direct and
 * oldest strategies do for backends that keep state inside the model: an
 * ONNX model keeps none (its state is the implicit state the server
 * holds), so any batch position serves any sequence and the strategies
 * differ only in their batching settings. At most SEQBATCH_MAX sequences
 * are kept per model version; a START beyond is refused (503).
 *
 * The sequences of a version live in a table made on its first sequence
 * request (struct model's seqbatch) and freed with the version. Each
 * sequence in progress holds a reference on its version, so a reload
 * drains them: new sequences start on the new version, while the requests
 * of those already started go on to the version that holds their state,
 * which unloads when its last sequence ends (or idles out). Thread-safe:
 * calls from any I/O thread.
 */
#ifndef INFERD_SERVE_SEQBATCH_H
#define INFERD_SERVE_SEQBATCH_H

#include <stdint.h>

#include "serve/call.h"

#define SEQBATCH_MAX 65536

enum stage_result seqbatch_stage(struct infer_call *call, const void *cfg);
void seqbatch_done(struct infer_call *call, const void *cfg);

/* Any I/O thread, from its tick: ends the sequences idle too long on
 * every version (also those no request reaches any more: an older version
 * left by a reload, or an unloaded model), at most every 100 ms. */
void seqbatch_tick(uint64_t now_ns);
/* At shutdown, once no call is in flight and before the repository
 * closes: ends every sequence, dropping its version reference. */
void seqbatch_shutdown(void);

struct seqbatch_stats {
    uint64_t active;     /* sequences kept now */
    uint64_t started;    /* START requests admitted */
    uint64_t ended;      /* by an END request */
    uint64_t idle_ended; /* by max_sequence_idle_microseconds */
};
/* The counts of version m (all 0 before its first sequence). Any thread. */
void seqbatch_stats(const struct model *m, struct seqbatch_stats *out);

#endif
