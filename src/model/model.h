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
 * Lifecycle of a version (struct model), reference counted:
 *   loaded and warmed by model_entry_load() on the repository manager
 *   thread (refs = 1, held by its entry) → published in a snapshot (see
 *   repository.h; each snapshot entry holds a reference) → every request
 *   that uses it holds a reference from lookup until its response is sent →
 *   when the last reference goes, on_last_unref hands it to the manager
 *   thread, which stops its workers and unloads it (model_free). So a
 *   version replaced by a reload keeps serving the requests it already has.
 */
#ifndef INFERD_MODEL_MODEL_H
#define INFERD_MODEL_MODEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "model/config.h"
#include "sched/sched.h"

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
    struct model_config config; /* effective configuration */
    /* max_batch_size > 0: every input and output has a leading batch
     * dimension, so requests may carry several samples along dim 0; such a
     * model has at least one input (a model without inputs is unbatched:
     * model_config_check refuses max_batch_size > 0 for it). */
    bool batched;
    char sha256[65];  /* of the model file, lower-case hex */
    uint64_t load_ms, warmup_us;
    /* The default warm-up (no model_warmup in the config) failed; the
     * version serves anyway (logged as a warning). */
    bool warmup_failed;
    struct sched_config sched_cfg;
    struct sched *sched;

    atomic_uint refs;
    /* Called (on any thread) when refs drops to 0; NULL = model_free now. */
    void (*on_last_unref)(struct model *m);
    void *owner; /* for on_last_unref */
    struct model *next_dead; /* the manager's unload list */
};

enum model_state { MODEL_READY, MODEL_UNAVAILABLE };

/* A model name and its loaded versions. Immutable once published. */
struct model_entry {
    char *name;
    enum model_state state;       /* READY when at least one version loaded */
    char reason[ERROR_MSG_MAX];   /* why a version (or the model) failed */
    struct model **versions;      /* loaded versions, ascending; one reference each */
    uint32_t nversions;
    uint32_t failed_versions;     /* selected versions that failed to load */
    struct model *model;          /* newest loaded version: the default */
    uint64_t fingerprint;         /* of the files it was loaded from */
};

struct registry_options {
    const char *repository;
    int intra_op_threads;
    int inter_op_threads;
    uint32_t queue_limit; /* requests waiting per model (a config may ask for fewer) */
    const char *backend_directory; /* plugin libraries not in the model directory; or NULL */
};

/* Loads model `name` of the repository into *e (never fails as a call: a
 * model that cannot load is UNAVAILABLE with e->reason). config_override,
 * if not NULL, replaces config.pbtxt's text. Blocking; manager thread. */
void model_entry_load(const struct registry_options *opts, const char *name,
                      const char *config_override, struct model_entry *e);
/* Drops the entry's references to its versions and frees it. */
void model_entry_clear(struct model_entry *e);

/* The loaded version named `version` (decimal text) of e, or NULL. */
const struct model *registry_version(const struct model_entry *e, const char *version);

/* <repo>/<name> is a directory with at least one numeric version directory. */
bool model_dir_is_model(const struct registry_options *opts, const char *name);
/* Changes whenever config.pbtxt or a version's model file changes. */
uint64_t model_dir_fingerprint(const struct registry_options *opts, const char *name);

struct model *model_ref(struct model *m);
void model_unref(struct model *m);
/* Stops the workers (their queues drain first) and unloads. */
void model_free(struct model *m);

/* Index of the model input/output named `name`, or -1. */
int model_input_index(const struct model *m, const char *name);
int model_output_index(const struct model *m, const char *name);

#endif
