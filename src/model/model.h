/*
 * model: a loaded model version (backend instance + its I/O description +
 * its scheduler) and the registry of the repository's models.
 *
 * Repository layout (Triton's): <repo>/<model>/<version>/model.onnx, where
 * <version> is a decimal number, and an optional <repo>/<model>/config.pbtxt
 * (see config.h). The registry loads at startup the versions the config's
 * version_policy selects (default: the newest); the effective configuration
 * is the config file checked against the ONNX file, or the ONNX file alone.
 *
 * Lifecycle: registry_load() on the main thread before serving; lookups
 * from any thread while serving (the registry does not change); 
 * registry_free() after every request has completed.
 */
#ifndef INFERD_MODEL_MODEL_H
#define INFERD_MODEL_MODEL_H

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
     * dimension, so requests may carry several samples along dim 0. */
    bool batched;
    uint64_t load_ms;
    struct sched_config sched_cfg;
    struct sched *sched;
};

enum model_state { MODEL_READY, MODEL_UNAVAILABLE };

struct model_entry {
    char *name;
    enum model_state state;       /* READY when at least one version loaded */
    char reason[ERROR_MSG_MAX];   /* why a version (or the model) failed */
    struct model **versions;      /* loaded versions, ascending */
    uint32_t nversions;
    uint32_t failed_versions;     /* selected versions that failed to load */
    struct model *model;          /* newest loaded version: the default */
};

struct registry_options {
    const char *repository;
    int intra_op_threads;
    int inter_op_threads;
    uint32_t queue_limit; /* requests waiting per model (a config may ask for fewer) */
};

struct registry {
    struct model_entry *entries; /* sorted by name */
    uint32_t count;
};

/* Scans and loads the repository. A model that fails to load is kept as
 * UNAVAILABLE with its reason; only an unreadable repository fails the
 * call (-1 with err). */
int registry_load(const struct registry_options *opts, struct registry *reg, struct error *err);
void registry_free(struct registry *reg);
const struct model_entry *registry_find(const struct registry *reg, const char *name, size_t len);
/* True when every selected version of every model loaded. */
bool registry_all_ready(const struct registry *reg);
/* The loaded version named `version` (decimal text) of e, or NULL. */
const struct model *registry_version(const struct model_entry *e, const char *version);

/* Index of the model input/output named `name`, or -1. */
int model_input_index(const struct model *m, const char *name);
int model_output_index(const struct model *m, const char *name);

#endif
