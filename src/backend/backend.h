/*
 * backend: the interface between the scheduler and a model execution engine.
 *
 * A backend is a const table of functions with a version first (as SQLite's
 * sqlite3_vfs). One loaded instance ("session") serves one model version and
 * is used by one worker thread at a time; instances of the same model are
 * independent.
 *
 * Lifecycle of an instance:
 *   load()      on the repository thread; fills the model's I/O description.
 *   execute()   on a worker thread, any number of times.
 *   release()   once per successful execute(), after the outputs are no
 *               longer read; from any thread (the I/O thread releases them
 *               after encoding the response), never concurrently with
 *               unload().
 *   unload()    on the repository thread, after the last release().
 */
#ifndef INFERD_BACKEND_BACKEND_H
#define INFERD_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/tensor.h"

/* One input or output of a model as the model declares it. dims include the
 * batch dimension when the model has one; -1 is a variable dimension. */
struct model_io {
    char *name; /* owned by the struct model_info */
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS];
};

struct model_info {
    uint32_t ninputs, noutputs;
    struct model_io *inputs;  /* owned; freed by model_info_free() */
    struct model_io *outputs; /* owned */
};

void model_info_free(struct model_info *info);

/* Whether tensor t fits input io of model `model_name`: same datatype,
 * rank and fixed dims. Returns 0, or ST_ERROR with a 400 in err in Triton's
 * wording (clients match on it):
 *   "inference input 'x' data-type is 'FP32', but model 'm' expects 'INT32'"
 *   "unexpected shape for input 'x' for model 'm'. Expected [-1,16], got [1,15]" */
int model_io_check(const char *model_name, const struct model_io *io, const struct tensor *t,
                   struct error *err);

/* Writes the n tensors ios as "'x' (FP32 [-1,4]), 'y' (INT64 [-1])" into
 * out (size > 0 bytes, NUL-terminated), "none" when n is 0. Tensors that do
 * not fit are left out whole and the list ends in "..." (room for it is
 * kept). Thread: any. */
void model_io_list(const struct model_io *ios, uint32_t n, char *out, size_t size);

/* The 400 for a request that names a tensor model `model_name` does not
 * have, listing what it has (truncated as model_io_list does):
 * "unexpected inference input 'in' for model 'm', which has inputs:
 *  'x' (FP32 [-1,4])" (Triton's wording, then the list)
 * (or "..., which has no inputs").
 * `input` chooses the inputs or the outputs of info. Returns -1. */
int model_io_unknown(const struct model_info *info, bool input, const char *name,
                     const char *model_name, struct error *err);

/* A tensor a model's configuration declares. */
struct backend_tensor_decl {
    const char *name;
    enum dtype dtype;
    const int64_t *dims; /* as the model sees them (a reshape applied), without
                          * the batch dimension; -1 = variable */
    uint32_t ndim;
};

struct backend_param {
    const char *key;
    const char *value;
};

/* What a model's configuration (config.pbtxt) tells its backend. The model
 * layer parses the configuration and fills this in; backend/ never parses a
 * configuration itself. Complete: every tensor has a data type and dims. */
struct backend_config {
    int64_t max_batch_size; /* > 0: every tensor has a leading batch dimension */
    const struct backend_tensor_decl *inputs, *outputs;
    uint32_t ninputs, noutputs;
    const struct backend_param *parameters;
    uint32_t nparameters;
};

struct backend_load_args {
    const char *path;         /* model file: <repo>/<model>/<version>/model.onnx */
    const char *log_id;       /* "<model>:<version>", names the instance in the engine's
                               * log lines; NULL: the engine's default */
    int intra_op_threads;     /* 0 = backend default */
    int inter_op_threads;     /* 0 = backend default */
    /* The model's configuration (an override included), for the duration
     * of load(); NULL without one. Plugin backends (backend/plugin.h) take
     * their parameters and I/O from it; ONNX Runtime ignores it. */
    const struct backend_config *config;
};

#define BACKEND_ABI_VERSION 1

/* execute() flags: the batch is made of shadow copies (policy/shadow.h). */
#define BACKEND_EXEC_SHADOW 1u

struct backend_ops {
    uint32_t abi_version; /* BACKEND_ABI_VERSION */
    const char *name;     /* "onnxruntime" */

    /* Loads the model at args->path. On success *instance is set and *info
     * describes the model's inputs and outputs (caller frees with
     * model_info_free). On failure returns ST_ERROR with err->msg set. */
    int (*load)(const struct backend_load_args *args, void **instance,
                struct model_info *info, struct error *err);

    /* Runs the model (flags: BACKEND_EXEC_*). `inputs` are exactly the model's inputs (any order,
     * matched by name) with concrete shapes. `output_names` lists the
     * outputs to compute (nout >= 1); on success out[i] describes output i:
     * name points to output_names[i], data points into memory owned by
     * *state (or into `arena`) and stays valid until release(). BYTES outputs
     * are arrays of struct tensor_bytes allocated from `arena`.
     * On failure returns -1, err->status is 400 for input errors the engine
     * detected and 500 for engine failures; *state need not be released. */
    int (*execute)(void *instance, struct arena *arena, const struct tensor *inputs,
                   uint32_t nin, const char *const *output_names, uint32_t nout,
                   struct tensor *out, void **state, uint32_t flags, struct error *err);

    void (*release)(void *instance, void *state);
    void (*unload)(void *instance);

    /* Decoupled models (include/inferd/backend.h): runs one request and
     * calls send(ctx, outputs, nout, final) for each response, outputs
     * valid during that call only. send() returns false when the request
     * is cancelled: execute_stream then returns as soon as it can. Returns
     * 0, or ST_ERROR with err (400/500). NULL when the backend has none. */
    int (*execute_stream)(void *instance, const struct tensor *inputs, uint32_t nin,
                          const char *const *output_names, uint32_t nout,
                          bool (*send)(void *ctx, const struct tensor *outputs, uint32_t nout,
                                       bool final),
                          void *ctx, struct error *err);
};

#endif
