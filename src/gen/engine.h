/*
 * engine: serves a generative model version (DESIGN.md's "running set":
 * continuous batching over a KV cache) in place of its scheduler.
 *
 * A version is generative when its directory has generation.json:
 *     {"tokenizer": "tokenizer.json", "max_context": 256, "eos_token_id": 511,
 *      "num_layers": 4, "num_heads": 4, "head_dim": 32, "vocab_size": 512}
 * and its ONNX graph has the KV-cache interface of models/README.md
 * (input_ids, position_ids, attention_mask, past_key_values.{i}.key/value
 * in; logits, present.{i}.key/value out). gen_engine_attach() (the
 * registry's attach_engine hook) checks both, loads the tokenizer, warms
 * the graph up, and gives the version the text interface clients use
 * (Triton's TRT-LLM / vLLM names; docs/generative.md):
 *   inputs  text_input (BYTES [1]); optional max_tokens (INT32),
 *           temperature (FP32), top_k (INT32), top_p (FP32),
 *           random_seed (UINT64), stop_words (BYTES [-1], at most 4),
 *           stream (BOOL; default: the endpoint's, req->many_responses)
 *   outputs text_output (BYTES), finish_reason (BYTES: "" until the last
 *           response, then "stop", "length" or "cancelled"),
 *           num_input_tokens (INT32), num_output_tokens (INT32)
 * as a decoupled model: streaming, one response per generated token (its
 * new text, possibly empty while a stop sequence or a UTF-8 character is
 * undecided), the last one final; otherwise one final response with the
 * whole completion.
 *
 * Submit (any thread, usually an I/O thread): the inputs are checked and
 * the prompt tokenized there, so a bad request is refused at once (400:
 * empty prompt, prompt plus max_tokens beyond max_context, a reservation
 * larger than the whole --kv-cache-bytes budget); a full waiting line is
 * refused with 503 and Retry-After. Otherwise the sequence waits, in
 * arrival order, for a place in the running set (--max-running-sequences)
 * and its prompt's KV cache blocks (kvcache.h); if its deadline (the request's
 * timeout) passes first it is answered 503 with Retry-After, if it is
 * cancelled 499.
 *
 * The engine thread (one per version) loops: admit what fits; give each
 * running sequence the cache blocks its step needs, preempting the
 * youngest running sequence while the budget is short (it goes back to
 * the head of the line, and once admitted again recomputes its cache and
 * goes on from its last token, nothing sent twice); run one decode step
 * batching every running sequence past its prefill (its last token in,
 * the next sampled out); run one prefill chunk (--prefill-chunk tokens)
 * of each sequence still reading its prompt, batched (padded to the
 * longest chunk of similar sizes); hand out the responses;
 * retire finished sequences, freeing their cache. A sequence whose
 * request is cancelled (req->cancelled: the client is gone, or the
 * stream's grace period ended), whose deadline passed, or whose response
 * is refused (on_response false) ends at the next step with
 * finish_reason "cancelled".
 */
#ifndef INFERD_GEN_ENGINE_H
#define INFERD_GEN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "model/model.h"

struct gen_settings {
    uint64_t kv_cache_bytes; /* process-wide KV cache budget */
    uint32_t max_running;    /* sequences in one engine's running set */
    uint32_t prefill_chunk;  /* prompt tokens per prefill run */
    bool no_prefix_cache;    /* --no-prefix-cache: blocks are never shared */
};

#define GEN_DEFAULT_KV_CACHE_BYTES (256ull << 20)
#define GEN_DEFAULT_MAX_RUNNING 64u
#define GEN_DEFAULT_PREFILL_CHUNK 64u

/* Startup, before the repository loads anything. */
void gen_configure(const struct gen_settings *s);

/* The registry_options.attach_engine hook (model/model.h). Manager thread. */
int gen_engine_attach(struct model *m, const char *version_dir, struct error *err);

/* Prometheus text of every engine (docs/metrics.md). Any thread. */
void gen_write_metrics(struct buf *out);

#endif
