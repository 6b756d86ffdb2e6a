/*
 * version: struct model, one loaded model version (backend instances + I/O
 * description + configuration + scheduler), as a type only. The functions
 * that load, reference and free it are the registry's (model.h); code that
 * only reads a version (warm-up) includes this header, not model.h.
 *
 * Lifecycle of a version (struct model), reference counted:
 *   loaded and warmed by model_entry_load() on the repository manager
 *   thread (refs = 1, held by its entry) → published in a snapshot (see
 *   repository.h; each snapshot entry holds a reference) → every request
 *   that uses it holds a reference from lookup until its response is sent →
 *   when the last reference goes, on_last_unref hands it to the manager
 *   thread, which stops its workers and unloads it (model_free). So a
 *   version replaced by a reload keeps serving the requests it already has.
 */
#ifndef INFERD_MODEL_VERSION_H
#define INFERD_MODEL_VERSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/config.h"
#include "model/labels.h"
#include "sched/sched.h"

/* A generative model's engine (gen/engine.h): it runs the version's
 * requests instead of the scheduler (model_submit). Set by the
 * registry_options' attach_engine hook, which the model layer cannot see
 * past. */
struct model_engine_ops {
    /* As sched_submit: 0, or ST_ERROR with err and the request still the caller's. */
    int (*submit)(void *engine, struct infer_request *req, struct error *err);
    /* Once no request can come any more (the last reference is gone):
     * finishes, frees the engine. */
    void (*stop)(void *engine);
    /* Before submit (token budgets, policy/tokenquota.h), on any thread:
     * what req may use — *prompt_tokens, its text_input tokenized, and
     * *max_completion, the most it may generate (its max_tokens, or the
     * rest of the context). 0, or ST_ERROR with err (400) when submit would
     * refuse the inputs for the same reason. */
    int (*estimate)(void *engine, const struct infer_request *req, uint32_t *prompt_tokens,
                    uint32_t *max_completion, struct error *err);
};

struct model {
    char *name;
    int64_t version;
    char version_str[24];
    char *path; /* model file */
    const char *platform; /* "onnxruntime_onnx" */
    const struct backend_ops *backend;
    void **instances; /* one backend instance per worker */
    uint32_t ninstances;
    struct model_info info;     /* from the first instance, dims narrowed by the config */
    /* What the backend, the scheduler and the warm-up see: `info` but for
     * the raw inputs a preprocessed version appends (a view of info's
     * arrays, not owned). */
    struct model_info run_info;
    struct model_config config; /* effective configuration */
    /* max_batch_size > 0: every input and output has a leading batch
     * dimension, so requests may carry several samples along dim 0; such a
     * model has at least one input (a model without inputs is unbatched:
     * model_config_check refuses max_batch_size > 0 for it). */
    bool batched;
    /* The outputs' class labels (model/labels.h), in info.outputs order;
     * NULL when no output has a label_filename. */
    struct model_labels *labels;
    char sha256[65];  /* of the model file, lower-case hex */
    uint64_t load_ms, warmup_us;
    /* Host memory the version took when it loaded (model/memory.h). */
    uint64_t memory_bytes;
    /* The default warm-up (no model_warmup in the config) failed; the
     * version serves anyway (logged as a warning). */
    bool warmup_failed;
    struct sched_config sched_cfg;
    /* Every version has one (its statistics and queue gauges live there);
     * a generative version's requests go to its engine instead. */
    struct sched *sched;
    const struct model_engine_ops *engine_ops; /* NULL: not generative */
    void *engine;
    /* Preprocessing (preprocess/prep.h), set by the attach_preprocess hook:
     * its raw inputs, freed by prep_free in model_free. NULL: none. */
    void *prep;
    void (*prep_free)(void *prep);
    /* NULL, or one per info.inputs (owned): model_input_optional(). */
    bool *input_optional;
    /* A sequence model's sequences (serve/seqbatch.h), made on its first
     * request; freed by seqbatch_free in model_free. NULL: none yet. */
    _Atomic(void *) seqbatch;
    void (*seqbatch_free)(void *seqbatch);

    atomic_uint refs;
    /* Called (on any thread) when refs drops to 0; NULL = model_free now. */
    void (*on_last_unref)(struct model *m);
    void *owner; /* for on_last_unref */
    struct model *next_dead; /* the manager's unload list */
};

#endif
