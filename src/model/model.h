/*
 * model: a loaded model version (backend instances + I/O description +
 * configuration + scheduler), the entry that groups a model's loaded
 * versions, and the functions that load them from the repository.
 *
 * Repository layout (Triton's): <repo>/<model>/<version>/model.onnx, where
 * <version> is a decimal number, and an optional <repo>/<model>/config.pbtxt
 * (see config.h). model_entry_load() loads the versions the config's
 * version_policy selects (default: the newest); a version's effective
 * configuration is the config file checked against the ONNX file, or the
 * ONNX file alone.
 *
 * Lifecycle of a version (struct model): see version.h.
 */
#ifndef INFERD_MODEL_MODEL_H
#define INFERD_MODEL_MODEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "model/config.h"
#include "model/version.h"
#include "sched/sched.h"

enum model_state { MODEL_READY, MODEL_UNAVAILABLE };

/* Why a load failed, as a small fixed set (a metric label: never the free
 * text, whose cardinality is unbounded). */
enum model_failure_kind {
    MODEL_FAIL_CONFIG,  /* config.pbtxt does not parse or does not fit the model */
    MODEL_FAIL_LAYOUT,  /* the directory cannot be served (no version directory, no model.onnx) */
    MODEL_FAIL_IO,      /* a file or directory cannot be read */
    MODEL_FAIL_BACKEND, /* the backend (plugin) cannot be found or loaded */
    MODEL_FAIL_LOAD,    /* the backend refused the model file, or out of resources */
    MODEL_FAIL_WARMUP,  /* a model_warmup the config asks for failed */
    MODEL_FAIL_MEMORY,  /* the version would not fit in the memory budget */
    MODEL_FAIL_KINDS
};
/* "config", "layout", "io", "backend", "load", "warmup", "memory". */
const char *model_failure_kind_name(enum model_failure_kind k);

/* One thing of a model directory that failed to load or cannot be served. */
struct model_failure {
    int64_t version; /* -1: the model as a whole (its config, its directory) */
    enum model_failure_kind kind;
    char reason[ERROR_MSG_MAX];
};

/* A model name and its loaded versions. Immutable once published. */
struct model_entry {
    char *name;
    enum model_state state;       /* READY when at least one version loaded */
    char reason[ERROR_MSG_MAX];   /* why a version (or the model) failed, the last one */
    struct model **versions;      /* loaded versions, ascending; one reference each */
    uint32_t nversions;
    uint32_t failed_versions;     /* selected versions that failed to load */
    struct model *model;          /* newest loaded version: the default */
    uint64_t fingerprint;         /* of the files it was loaded from */
    /* What the last load of the model could not load or serve, ascending
     * by version (whole-model failures first); owned, mem_alloc'd. After a
     * reload that failed entirely these describe the attempt while
     * `versions` are the previous ones, still serving. */
    struct model_failure *failures;
    uint32_t nfailures;
};

struct registry_options {
    const char *repository;
    int intra_op_threads;
    int inter_op_threads;
    uint32_t queue_limit; /* requests waiting per model (a config may ask for fewer) */
    /* The queue budget of versions whose config has no queue policy
     * (sched.h: sched_config.queue_budget_us): SCHED_QUEUE_BUDGET_AUTO,
     * a fixed number of us, or 0 = none. */
    uint64_t queue_budget_us;
    const char *backend_directory; /* plugin libraries not in the model directory; or NULL */
    /* Host memory all loaded versions may take (model/memory.h); a load
     * that would not fit is refused (MODEL_FAIL_MEMORY). 0: no budget. */
    uint64_t memory_budget;
    /* The worker pool every version's scheduler shares (sched/pool.h);
     * NULL: each scheduler starts its own. */
    struct sched_pool *pool;
    /* The pool of background work (shadow copies; sched.h); NULL: `pool`. */
    struct sched_pool *background_pool;
    /* Called before a version's scheduler starts, to set the observer of
     * its backend runs (sched.h); the scheduler calls its on_stop when it
     * is freed. Filled by the layer above (src/cli/main.c:
     * obs/batch_obs.h's batch_obs_attach). NULL: no observer. */
    void (*observe_version)(const char *name, int64_t version, struct sched_observer *out);
    /* Called once a version's backend instances are loaded and its config
     * checked, before its warm-up: makes it generative when its version
     * directory says so (src/gen/engine.h; filled by src/cli/main.c),
     * setting m->engine_ops and m->engine and replacing m->info and the
     * config's inputs and outputs by what clients send and receive. A
     * generative version is not warmed up by the model layer (its engine
     * does it). Returns 0 (generative or not) or ST_ERROR with err: the version
     * fails to load (MODEL_FAIL_CONFIG). NULL: no version is generative. */
    int (*attach_engine)(struct model *m, const char *version_dir, struct error *err);
    /* Called right after attach_engine: gives the version the raw inputs
     * its model directory's preprocess.json declares (preprocess/prep.h;
     * filled by src/cli/main.c), appending them to m->info.inputs and
     * setting m->prep, m->prep_free and m->input_optional; m->run_info
     * keeps what the backend takes. Returns 0 (declared or not) or -1
     * with err: the version fails to load (MODEL_FAIL_CONFIG). NULL: no
     * preprocessing. */
    int (*attach_preprocess)(struct model *m, const char *model_dir, struct error *err);
    /* Runs an ensemble's version (platform "ensemble", serve/ensemble.h;
     * filled by src/cli/main.c): sets m->engine_ops and m->engine, which
     * run its steps. Returns 0 or ST_ERROR with err (the version fails to
     * load). NULL: ensembles are refused. */
    int (*attach_ensemble)(struct model *m, struct error *err);
    /* Versions served by other servers (cluster/remote.h; filled by
     * src/cli/main.c). A model named in names[] is a model of the
     * repository even without a directory of its own; model_entry_load()
     * calls load() after the local versions (if any): it adds the remote
     * ones with model_entry_add_version(), and records those that cannot
     * load as failures of e (model_entry_add_failure). All NULL: none. */
    struct registry_remote {
        void *ctx;
        const char *const *names;
        uint32_t nnames;
        void (*load)(void *ctx, const struct registry_options *opts, const char *name,
                     struct model_entry *e);
    } remote;
};

/* Whether `name` has remote versions (opts->remote.names). */
bool registry_has_remote(const struct registry_options *opts, const char *name);
/* Adds version m (its reference moves to e) to e->versions, keeping them
 * ascending. -EEXIST when e has that version already, -ENOMEM: m is then
 * still the caller's. */
int model_entry_add_version(struct model_entry *e, struct model *m);
/* Records a failure of version `version` (-1: the whole model) in e. */
void model_entry_add_failure(struct model_entry *e, int64_t version, enum model_failure_kind kind,
                             const char *reason);
/* A version whose requests another server runs (cluster/remote.h): no
 * backend and no files; `info` (moved into it) is what clients send and
 * receive, its configuration derived from it as from an ONNX file, every
 * input optional (the upstream checks which a call needs), decoupled as
 * the upstream's config says (a generative model upstream streams its
 * responses through the gateway); engine_ops/engine run its requests
 * (model_submit). Its scheduler has no
 * instance (it holds the statistics only). 0, or ST_ERROR with err. */
int model_new_remote(const struct registry_options *opts, const char *name, int64_t version,
                     const char *platform, struct model_info *info, bool decoupled,
                     const struct model_engine_ops *ops, void *engine, struct model **out,
                     struct error *err);

/* Loads model `name` of the repository into *e (never fails as a call: a
 * model that cannot load is UNAVAILABLE with e->reason). config_override,
 * if not NULL, replaces config.pbtxt's text. Every failure, and every
 * numeric version directory without a model.onnx (logged as a warning: it
 * is never selected), is in e->failures. Blocking; manager thread. */
void model_entry_load(const struct registry_options *opts, const char *name,
                      const char *config_override, struct model_entry *e);
/* Turns a loaded entry into a failed one (a check above the model layer
 * refused it, e.g. its routing file): its versions are released, the
 * state is UNAVAILABLE with `reason` as a whole-model failure of `kind`. */
void model_entry_refuse(struct model_entry *e, enum model_failure_kind kind, const char *reason);
/* Drops the entry's references to its versions and frees it. */
void model_entry_clear(struct model_entry *e);
/* Replaces dst's failures (freed) by a copy of src's. -ENOMEM leaves dst
 * without any. */
int model_entry_copy_failures(struct model_entry *dst, const struct model_entry *src);

/* The loaded version named `version` (decimal text) of e, or NULL. */
const struct model *registry_version(const struct model_entry *e, const char *version);

/* What a directory of the repository is: a model (at least one numeric
 * version directory), one that cannot be served (unreadable, or model files
 * without a version directory: *reason says what to do), or something else
 * (hidden, not a directory, or without model files: models/build holds
 * scripts). For UNSERVABLE, *why is filled (version -1, LAYOUT or IO). */
enum model_dir_kind { MODEL_DIR_OTHER, MODEL_DIR_MODEL, MODEL_DIR_UNSERVABLE };
enum model_dir_kind model_dir_check(const struct registry_options *opts, const char *name,
                                    struct model_failure *why);
/* Changes whenever a file of the model directory (config.pbtxt,
 * preprocess.json, labels, a tokenizer), a file of a version directory
 * (the model file, a generative model's generation.json and tokenizer, a
 * plugin's parameters) or the set of numeric version directories changes;
 * hidden files excepted. */
uint64_t model_dir_fingerprint(const struct registry_options *opts, const char *name);

/* Queues req for version m: its engine's when it is generative, else its
 * scheduler's (sched_submit, with `here` as there). Same contract. */
int model_submit(struct model *m, struct infer_request *req, struct sched_local *here,
                 struct error *err);

/* Whether version m's scheduler would refuse even a request of its
 * highest priority level because its queue is full (sched_queue_full): a
 * hint for refusing on a request's head; model_submit decides. Always
 * false for a generative or remote version. */
bool model_queue_full(const struct model *m);

struct model *model_ref(struct model *m);
void model_unref(struct model *m);
/* Stops the workers (their queues drain first) and unloads. */
void model_free(struct model *m);

/* Index of the model input/output named `name`, or NOT_FOUND. */
int model_input_index(const struct model *m, const char *name);
int model_output_index(const struct model *m, const char *name);
/* Whether requests may leave out input i (m->info order): the options of
 * a generative model (gen/engine.h), the raw inputs of a preprocessed one
 * and the inputs they feed (preprocess/prep.h: its stage checks that one
 * of the two came). Other models need every input (the scheduler gathers
 * them all; config.pbtxt's `optional` is not honoured). */
bool model_input_optional(const struct model *m, uint32_t i);
/* After a decoder stored input i of m at inputs[i] and set seen[i]: drops
 * the optional inputs the request left out, keeping the order, and sets *n.
 * 0, or ST_ERROR with a 400 naming the first required input missing. */
int model_inputs_complete(const struct model *m, struct tensor *inputs, const bool *seen,
                          uint32_t *n, struct error *err);

#endif
