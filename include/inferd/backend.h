/*
 * inferd/backend.h: the ABI of inferd backend plugins.
 *
 * A backend plugin is a shared library `libinferd_<name>.so` that exports
 *
 *     const struct inferd_backend_api *inferd_backend_init(uint32_t host_abi_version);
 *
 * and serves the models whose config.pbtxt says `backend: "<name>"`. inferd
 * looks for the library in the model's directory (<repo>/<model>/) first,
 * then in the server's backend directory. It calls inferd_backend_init()
 * once per library, right after dlopen, on the repository thread; the
 * plugin returns a pointer to a const table that lives as long as the
 * library (a static const struct), or NULL if it cannot serve
 * `host_abi_version` (inferd then refuses the library). The table's first
 * field is its ABI version (INFERD_BACKEND_ABI_MIN_VERSION up to
 * INFERD_BACKEND_ABI_VERSION; inferd reads only the fields of that
 * version); every function pointer of version 1 must be set.
 * A library, once loaded, stays loaded until the process exits.
 *
 * This header depends on nothing of inferd: a plugin is built with
 *     cc -std=c11 -shared -fPIC -I<inferd>/include -o libinferd_x.so x.c
 *
 * Object lifecycles
 *   instance  load() creates one per model instance (a config's
 *             instance_group count), on the repository thread;
 *             unload() destroys it on the repository thread, after every
 *             state of it was released. Instances of one model (and of
 *             different models) are independent and run concurrently.
 *   state     execute() may set *state (NULL before the call) to anything
 *             that keeps its outputs alive; release(instance, state) is
 *             called exactly once for each successful execute() that left
 *             *state non-NULL, once inferd no longer reads the outputs.
 *
 * Shadow copies (ABI 3): a plugin that sets execute_flags learns, per
 * batch, whether it runs shadow copies of requests (INFERD_EXECUTE_SHADOW;
 * inferd never mixes shadow copies and client requests in one batch).
 *
 * Decoupled models (ABI 2; config.pbtxt `model_transaction_policy {
 * decoupled: true }`, Triton's term): a request gets zero or more
 * responses, sent as the model makes them. inferd calls
 * execute_decoupled() for one request at a time (never batched) and the
 * plugin calls sink->send() for each response, from inside that call, on
 * the calling thread. send() copies the outputs before it returns, so the
 * plugin may reuse or free their memory at once. send() returns
 * INFERD_SEND_STOP once the request is cancelled (the client went away,
 * or its deadline passed): the plugin should return promptly; further
 * sends are dropped. A response flagged INFERD_RESPONSE_FINAL is the last;
 * one may also return without sending a final one (inferd then ends the
 * request itself).
 *
 * Threads
 *   load(), unload():  the repository thread.
 *   execute(), execute_decoupled():
 *                      a worker thread; one call at a time per instance.
 *   release():         any thread (usually an I/O thread), possibly while
 *                      execute() runs on the same instance: the state of one
 *                      call must not be shared with the next.
 *
 * Errors
 *   load() and execute() return 0 on success, anything else on failure
 *   with err->status and err->msg (NUL-terminated) set. status 400: the
 *   caller's fault (an input the model cannot take, a bad config
 *   parameter); 500: the backend's (engine failure, out of memory). Any
 *   other status is reported as 500. The message reaches the client (for
 *   execute) or the model's status (for load).
 *
 * Memory
 *   inferd owns everything it passes in; it is valid for the duration of
 *   the call only (copy what you keep). The plugin owns everything it
 *   returns: the model info until unload(instance), the output data (numeric
 *   and BYTES alike: inferd gives a plugin no allocator) until
 *   release(instance, state).
 */
#ifndef INFERD_BACKEND_PUBLIC_H
#define INFERD_BACKEND_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INFERD_BACKEND_ABI_VERSION 3u
/* The oldest table inferd still takes: a version 1 table ends after
 * unload (no decoupled models). */
#define INFERD_BACKEND_ABI_MIN_VERSION 1u
#define INFERD_MAX_DIMS 16
#define INFERD_ERROR_MSG_MAX 256

/* Tensor element types (KServe v2 names; Triton's TYPE_STRING is BYTES).
 * The values are part of the ABI. */
enum inferd_dtype {
    INFERD_DTYPE_INVALID = 0,
    INFERD_DTYPE_BOOL = 1, /* one byte, 0 or 1 */
    INFERD_DTYPE_UINT8 = 2,
    INFERD_DTYPE_UINT16 = 3,
    INFERD_DTYPE_UINT32 = 4,
    INFERD_DTYPE_UINT64 = 5,
    INFERD_DTYPE_INT8 = 6,
    INFERD_DTYPE_INT16 = 7,
    INFERD_DTYPE_INT32 = 8,
    INFERD_DTYPE_INT64 = 9,
    INFERD_DTYPE_FP16 = 10,
    INFERD_DTYPE_FP32 = 11,
    INFERD_DTYPE_FP64 = 12,
    INFERD_DTYPE_BYTES = 13, /* data is an array of struct inferd_bytes */
    INFERD_DTYPE_BF16 = 14,
};

/* One BYTES element: `len` bytes at `ptr`, not NUL-terminated, may hold NULs. */
struct inferd_bytes {
    const char *ptr;
    uint32_t len;
};

/*
 * A tensor. Numeric types: `data` holds count * element size bytes
 * (count = product of shape; 1 for ndim 0), little-endian, row-major, no
 * padding, and nbytes is that size. BYTES: `data` is an array of `count`
 * struct inferd_bytes and nbytes is the sum of their lengths.
 * Inputs are read-only.
 */
struct inferd_tensor {
    const char *name; /* NUL-terminated */
    enum inferd_dtype dtype;
    uint32_t ndim; /* <= INFERD_MAX_DIMS */
    int64_t shape[INFERD_MAX_DIMS];
    void *data;
    size_t nbytes;
};

/* An input or output as the model declares it; -1 is a variable dim. With
 * max_batch_size > 0, dims[0] is the batch dimension (-1). */
struct inferd_model_io {
    const char *name;
    enum inferd_dtype dtype;
    uint32_t ndim;
    int64_t dims[INFERD_MAX_DIMS];
};

/* The model's inputs and outputs, filled by load(). The arrays and names
 * are the plugin's and must stay valid until unload() of that instance
 * (inferd copies them before it makes any other call). */
struct inferd_model_info {
    uint32_t ninputs, noutputs;
    const struct inferd_model_io *inputs;
    const struct inferd_model_io *outputs;
};

struct inferd_error {
    int status;                     /* 400 or 500 */
    char msg[INFERD_ERROR_MSG_MAX]; /* NUL-terminated */
};

/* One entry of config.pbtxt's `parameters` map (string_value). */
struct inferd_parameter {
    const char *key;
    const char *value;
};

/*
 * What load() gets; all of it owned by inferd and valid during the call.
 * inferd does not decide which file in the version directory is the model:
 * the plugin reads what it needs from version_dir (the directory must
 * exist and, for inferd to count it as a version, hold a file named
 * model.onnx, which may be an empty placeholder).
 * inputs/outputs are config.pbtxt's, which for a plugin backend must give
 * every input and output with data_type and dims; they are shown as the
 * model sees them (with max_batch_size > 0, a leading -1 batch dim).
 * The info load() returns is checked against them.
 */
struct inferd_backend_load_args {
    const char *model_name;  /* "<model>" */
    const char *model_dir;   /* "<repo>/<model>" */
    const char *version_dir; /* "<repo>/<model>/<version>" */
    int64_t version;
    int32_t max_batch_size; /* 0 = no batch dimension */
    uint32_t ninputs, noutputs;
    const struct inferd_model_io *inputs;
    const struct inferd_model_io *outputs;
    uint32_t nparameters;
    const struct inferd_parameter *parameters; /* distinct keys, config order */
    int intra_op_threads; /* threads the instance may use per operation; >= 1 */
    int inter_op_threads; /* 0 = backend default */
};

/* execute_flags() flags (ABI 3) */
/* Every request of the batch is a shadow copy (docs/traffic.md; the
 * marker `x-shadow: true`): its answer is compared with the version that
 * answered the client and then dropped. A model with side effects (writes
 * to a store, sends messages) should skip them. */
#define INFERD_EXECUTE_SHADOW 1u

/* send() flags */
#define INFERD_RESPONSE_FINAL 1u
/* send() results */
#define INFERD_SEND_OK 0
#define INFERD_SEND_STOP 1

/* Where a decoupled model sends its responses (see "Decoupled models"). */
struct inferd_response_sink {
    void *ctx; /* inferd's; pass it back to send() */
    /* One response: outputs[i] for output_names[i] of the execute call, all
     * nout of them (name may be NULL; inferd sets it), checked against the
     * declared outputs like execute()'s. Returns INFERD_SEND_OK, or
     * INFERD_SEND_STOP when the request is cancelled or a response was
     * malformed (that ends the request with a 500). */
    int (*send)(void *ctx, const struct inferd_tensor *outputs, uint32_t nout, uint32_t flags);
};

struct inferd_backend_api {
    uint32_t abi_version; /* INFERD_BACKEND_ABI_VERSION: first, always */
    const char *name;     /* for messages, e.g. "identity_stall" */

    /* Creates one instance of the model and describes its inputs and
     * outputs in *info (see struct inferd_model_info for ownership). */
    int (*load)(const struct inferd_backend_load_args *args, void **instance,
                struct inferd_model_info *info, struct inferd_error *err);

    /* Runs the model once. `inputs` are exactly the model's inputs (matched
     * by name, any order) with concrete shapes; their data is valid only
     * during the call. `output_names` lists the nout >= 1 outputs to
     * compute; fill outputs[i] for output_names[i] (dtype, ndim, shape,
     * data, nbytes; inferd sets name). The output data must stay valid
     * until release(instance, *state). On failure the plugin frees what it
     * allocated itself: release() is not called. */
    int (*execute)(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                   const char *const *output_names, uint32_t nout,
                   struct inferd_tensor *outputs, void **state, struct inferd_error *err);

    /* Frees the outputs of one execute(). Any thread. */
    void (*release)(void *instance, void *state);

    /* Destroys the instance (repository thread, after every release()). */
    void (*unload)(void *instance);

    /* ---- ABI version 2 ---- */

    /* Runs one request of a decoupled model, sending its responses through
     * sink (see "Decoupled models"); inputs and output_names as execute().
     * Returns 0, or non-zero with err set: the request ends with that
     * error after the responses already sent. NULL when the plugin serves
     * no decoupled model; a decoupled model then fails to load. */
    int (*execute_decoupled)(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                             const char *const *output_names, uint32_t nout,
                             const struct inferd_response_sink *sink, struct inferd_error *err);

    /* ---- ABI version 3 ---- */

    /* execute() with flags (INFERD_EXECUTE_*; unknown bits are to be
     * ignored). When set, inferd calls it instead of execute(); NULL: inferd
     * calls execute() and the plugin is not told. */
    int (*execute_flags)(void *instance, const struct inferd_tensor *inputs, uint32_t nin,
                         const char *const *output_names, uint32_t nout,
                         struct inferd_tensor *outputs, void **state, uint32_t flags,
                         struct inferd_error *err);
};

/* The one symbol a plugin exports (visible even with -fvisibility=hidden). */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const struct inferd_backend_api *inferd_backend_init(uint32_t host_abi_version);
typedef const struct inferd_backend_api *(*inferd_backend_init_fn)(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif
