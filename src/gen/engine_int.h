/*
 * engine_int: what the files of the engine share (engine.h is the
 * contract): the engine, its sequences, and the functions each file
 * provides to the others.
 *   engine.c      the engine thread: admission, prefill, decode, retire
 *   sequence.c    a request's inputs → a sequence (submit side); its
 *                 responses
 *   attach.c      generation.json, the ONNX interface check, the text
 *                 interface, the warm-up; the registry hook
 *   gen_obs.c     the engines' metrics
 */
#ifndef INFERD_GEN_ENGINE_INT_H
#define INFERD_GEN_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/arena.h"
#include "base/buf.h"
#include "core/infer.h"
#include "gen/gen_text.h"
#include "gen/kvcache.h"
#include "gen/sample.h"
#include "preprocess/tokenizer.h"
#include "model/model.h"
#include "obs/metrics.h"

/* Layers the engine takes (tensors per run: 3 + 2 * layers in). */
#define GEN_MAX_LAYERS 32

enum gen_finish { GEN_FINISH_STOP, GEN_FINISH_LENGTH, GEN_FINISH_CANCELLED, GEN_FINISH_N };
const char *gen_finish_name(enum gen_finish f);

/* The text interface's outputs, in model order. */
enum { GEN_OUT_TEXT, GEN_OUT_FINISH, GEN_OUT_NIN, GEN_OUT_NOUT, GEN_NOUTPUTS };

struct gen_seq {
    struct gen_seq *next; /* waiting line */
    struct infer_request *req;
    int32_t *tokens; /* prompt then generated; room for nprompt + max_new */
    uint32_t ntokens, nprompt, max_new;
    uint32_t generated;   /* tokens sampled (an eos included) */
    /* Tokens the prefill caches before decode steps take over: the prompt,
     * or after a preemption everything but the last token sampled (the
     * next decode step's input). */
    uint32_t prefill_to;
    struct gen_kv_seq kv; /* tokens [0, kv.len) cached */
    uint64_t reserved;    /* budget bytes held (kvcache.h) */
    struct sample_params sp;
    struct gen_rng rng;
    struct gen_text text;
    bool stream;
    uint32_t out_index[GEN_NOUTPUTS]; /* response position of each output, or UINT32_MAX */
    uint64_t submit_ns, deadline_ns, first_ns, last_ns;
    uint64_t id; /* unique in its engine: tells a reused address apart */
};

/* The last decode run, kept while the next one has the same rows in the
 * same order: its present.* outputs are then the next run's past (no
 * copy out of the KV blocks), its attention mask grows by one column. */
struct gen_prev {
    void *state;   /* the run's outputs (backend state); NULL: none */
    uint64_t *ids; /* its rows' gen_seq ids */
    uint32_t n;
    size_t ids_cap;
    uint32_t past;         /* present.*'s axis 2: the next run's past */
    const float **present; /* [2 * layers] */
    int64_t *mask;         /* [n, past]: the run's mask (one of masks[]) */
};

/* generation.json's "present": "new": the graph returns only the new
 * tokens' keys and values and reads the past where it lies, so the decode
 * rows' past stays here from step to step, [rows, heads, cap, head_dim]
 * per (layer, kv), and a run writes only its new tokens into it (no copy
 * of the past per step). Slot r is input row r; a leaving row's slot takes
 * the last slot's row, a new row is gathered from its blocks into a new
 * slot, and cap follows the longest row in steps of GEN_KVBUF_STEP tokens
 * (a relayout at most every that many tokens). Positions past a slot's len
 * are zero. */
struct gen_kvbuf {
    float **t;     /* [2 * layers], rows_cap * heads * cap * head_dim floats each */
    uint64_t *ids; /* [rows_cap]: each slot's gen_seq id */
    uint32_t *len; /* [rows_cap]: tokens valid in each slot */
    uint32_t n, rows_cap, cap;
};
#define GEN_KVBUF_STEP 32

struct gen_stats {
    _Atomic uint64_t prompt_tokens, generation_tokens;
    _Atomic uint64_t finished[GEN_FINISH_N];
    _Atomic uint64_t refused_waiting;  /* 503: waiting line full or deadline while waiting */
    _Atomic uint64_t preemptions;      /* sequences sent back to the line for lack of cache */
    _Atomic uint64_t steps, step_rows; /* decode steps and the sequences they carried */
    _Atomic uint64_t prefill_runs;     /* backend runs of prefill chunks (batched) */
    _Atomic uint64_t kvbuf_bytes;      /* e->kvbuf's memory ("present": "new") */
    _Atomic uint32_t running, waiting;
    struct metrics_hist ttft, tpot, batch;
};

/* The model's shape, from generation.json (checked against the graph). */
struct gen_shape {
    uint32_t max_context, vocab, eos;
    struct gen_kv_shape kv;
    bool present_new; /* "present": "new" (struct gen_kvbuf); else past ++ new */
};

struct gen_engine {
    char *name;
    char version[24];
    const struct backend_ops *backend;
    void *instance; /* the version's first instance, the engine's alone */
    struct tokenizer *tok;
    struct gen_shape shape;
    /* Graph tensor names: inputs then outputs, [2 * layers] past/present. */
    char **past_names, **present_names;
    const char **run_outputs; /* "logits" then the present names */
    uint32_t max_running, prefill_chunk, max_waiting;
    const struct model_io *outputs; /* the text interface's (m->info) */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gen_seq *wait_head, *wait_tail; /* under mu */
    uint32_t nwaiting;                     /* under mu */
    bool stopping;                         /* under mu */
    _Atomic uint64_t seed_counter;

    /* The engine thread's. */
    struct gen_seq **running;
    uint32_t nrunning;
    struct gen_kv_pool pool;
    struct sample_scratch scratch;
    struct arena arena; /* per backend run */
    struct buf text;    /* a response's text */
    int64_t *ints;      /* a run's input_ids and position_ids */
    size_t ints_cap;
    int64_t *masks[2]; /* attention masks: the current run's and prev's */
    size_t masks_cap[2];
    uint32_t mask_cur;
    struct gen_prev prev;
    uint64_t next_id;
    float *past;
    size_t past_cap;
    struct gen_kvbuf kvbuf;
    float *logits; /* present "new": a run's logits in the caller's row order */
    size_t logits_cap;

    struct gen_stats stats;
    struct gen_engine *next; /* gen_obs.c's list */
};

/* sequence.c */
/* Checks req's inputs, tokenizes, builds *out. 0, or ST_ERROR with err (400). */
int gen_seq_new(struct gen_engine *e, struct infer_request *req, struct gen_seq **out,
                struct error *err);
void gen_seq_free(struct gen_engine *e, struct gen_seq *s);
/* model_engine_ops.estimate (model/version.h): gen_seq_new's checks of
 * the prompt and max_tokens, with its refusals; no sequence is made. */
int gen_seq_estimate(void *engine, const struct infer_request *req, uint32_t *prompt_tokens,
                     uint32_t *max_completion, struct error *err);
/* What s used so far onto its request (usage_prompt_tokens and
 * usage_completion_tokens: the prompt and the tokens generated). */
void gen_seq_count(struct gen_seq *s);
/* Sends one response (text taken from the sequence's gen_text; final with
 * its finish reason), the usage counted first (gen_seq_count). false when the request refused it
 * (cancelled). */
bool gen_seq_respond(struct gen_engine *e, struct gen_seq *s, bool final, enum gen_finish why);

/* engine.c */
/* One backend run over rows [0, n) of seqs, row b feeding tokens
 * [kv.len, kv.len + ts[b]) (ts NULL: t for every row; else t is the
 * largest ts[b], and a shorter row is padded after its tokens: causal
 * attention keeps its real tokens from seeing the padding, which is not
 * stored); stores their keys and values and points *logits at the run's
 * [n, t, vocab] logits (row b's last token at [b, ts[b] - 1]), valid until
 * gen_run_release(). keep (decode steps): the next decode run takes its
 * past from this one's (present "all": the run becomes e->prev, which owns
 * its outputs, *state is then NULL, and serves a next run with the same
 * rows; present "new": the rows stay in e->kvbuf). 0 or ST_ERROR with err. */
int gen_run(struct gen_engine *e, struct gen_seq *const *seqs, uint32_t n, uint32_t t,
            const uint32_t *ts, bool keep, const float **logits, void **state, struct error *err);
/* Frees what runs keep for the next (e->prev's outputs, e->kvbuf): idle,
 * on a failure, at the end. */
void gen_prev_drop(struct gen_engine *e);
void gen_run_release(struct gen_engine *e, void *state);
int gen_engine_start(struct gen_engine *e);
void gen_engine_stop(struct gen_engine *e);
int gen_engine_submit(void *engine, struct infer_request *req, struct error *err);

/* gen_obs.c */
void gen_obs_register(struct gen_engine *e);
void gen_obs_unregister(struct gen_engine *e);
extern const struct metrics_hist_spec gen_latency_spec, gen_batch_spec;

#endif
