#include "backend/onnxruntime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <onnxruntime_c_api.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"

/* ORT's log id of lines not tied to a session. */
#define ORT_ENV_LOG_ID "env"
/* Longest ORT message passed on (the log line has a ceiling anyway). */
#define ORT_LOG_MSG_MAX 768

/* Process-wide ORT objects: written once by ort_init_once(), read-only after.
 * `ort` stays NULL when initialization failed; ort_init_msg says why. */
static pthread_once_t ort_once = PTHREAD_ONCE_INIT;
static const OrtApi *ort;
static OrtEnv *ort_env;
static OrtMemoryInfo *ort_cpu_memory;
static char ort_init_msg[ERROR_MSG_MAX];
/* The environment's log threshold, updated by loads (see ort_log_sync). */
static pthread_mutex_t ort_env_level_lock = PTHREAD_MUTEX_INITIALIZER;
static OrtLoggingLevel ort_env_level;

/*
 * Where an output's memory comes from. Run() allocates what it returns and
 * its release frees it, about a fifth of a small model's run; an output
 * whose shape is known before the run is instead created over memory of
 * the batch's arena, which ORT fills in place. The plan is per instance
 * (an instance runs on one thread at a time, so it changes without a lock).
 */
enum out_plan {
    OUT_ORT,    /* ORT allocates it: BYTES, or a shape only the run knows */
    OUT_STATIC, /* every dimension declared: preallocated */
    OUT_GUESS,  /* declared but the first, maybe the batch: ORT allocates until
                 * a run shows the first dimension is the first input's */
    OUT_BATCH,  /* the first dimension is the first input's: preallocated */
};

struct ort_out {
    enum out_plan plan;
    enum dtype dtype;
    uint32_t ndim;
    int64_t dims[TENSOR_MAX_DIMS]; /* as the session declares them; -1 variable */
};

/*
 * A small tensor's OrtValue kept from run to run over memory of the
 * instance's own. Making an OrtValue and releasing it costs ORT about
 * 1,700 instructions, more than copying ORT_STAGE_MAX bytes; a request of
 * a small model has four (two inputs, two outputs: a sixth of its whole
 * cost in the server). So an input of at most ORT_STAGE_MAX bytes is
 * copied into its staged value, and an output whose shape is planned
 * before the run (enum out_plan) is written by ORT into its staged value
 * and read there until the run's state is released. A shape that changes
 * makes the value again (as each run did before).
 */
#define ORT_STAGE_MAX 8192

struct ort_staged {
    OrtValue *value; /* NULL: none made yet */
    void *mem;       /* ORT_STAGE_MAX + 63 bytes; data is its 64-byte aligned start */
    void *data;
    size_t nbytes;
    enum dtype dtype;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
};

struct ort_instance {
    OrtSession *session;
    uint32_t ninputs, noutputs;
    char **input_names; /* session order, as Run() takes them */
    enum dtype *input_dtypes;
    char **output_names; /* session order */
    struct ort_out *outs; /* session order */
    /* Run options of a run with preallocated outputs: only fatal messages
     * logged, so that a plan proved wrong (the run is then repeated with
     * ORT's memory, which logs as usual) is not an error line. */
    OrtRunOptions *quiet_run;
    OrtRunOptions *run; /* the others' (made once: Run would make one per call) */
    /* [ninputs + noutputs], session order (struct ort_staged). The
     * outputs' are lent to one run's state at a time: outputs_lent is set
     * by execute() and cleared by the release of that state, which may
     * come on another thread while the next run goes on (without them). */
    struct ort_staged *staged;
    _Atomic bool outputs_lent;
    /* Reusable states: execute() runs on a worker thread, release() may run
     * on an I/O thread, so the free list has its own lock. */
    pthread_mutex_t pool_lock;
    struct ort_state *free_states;
};

/* What one execute() hands to release(): the outputs' OrtValues (ORT's
 * memory, or the arena's: enum out_plan). During the call it also holds the input OrtValues, so that every
 * error path frees everything through ort_state_free(). Sized per instance
 * (all inputs + all outputs), so it can later come from a per-instance pool. */
#define ORT_STATES_PREALLOCATED 4

struct ort_state;
struct ort_instance;
static struct ort_state *ort_state_new(struct ort_instance *inst);
static void ort_state_free(struct ort_instance *inst, struct ort_state *state);

struct ort_state {
    struct ort_state *next_free;
    bool lent; /* its outputs are (in part) the instance's staged values */
    uint32_t nvalues;
    OrtValue *values[]; /* [0, ninputs): inputs; then up to noutputs outputs (those the
                         * call made: staged values are the instance's) */
};

static const struct {
    ONNXTensorElementDataType onnx;
    enum dtype dtype;
} dtype_map[] = {
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, DT_BOOL},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, DT_UINT8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16, DT_UINT16},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, DT_UINT32},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64, DT_UINT64},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, DT_INT8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16, DT_INT16},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, DT_INT32},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, DT_INT64},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, DT_FP16},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, DT_FP32},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, DT_FP64},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, DT_BYTES},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, DT_BF16},
};

#define DTYPE_MAP_LEN (sizeof dtype_map / sizeof dtype_map[0])

static enum dtype dtype_from_onnx(ONNXTensorElementDataType t)
{
    for (size_t i = 0; i < DTYPE_MAP_LEN; i++)
        if (dtype_map[i].onnx == t)
            return dtype_map[i].dtype;
    return DT_INVALID;
}

static ONNXTensorElementDataType dtype_to_onnx(enum dtype t)
{
    for (size_t i = 0; i < DTYPE_MAP_LEN; i++)
        if (dtype_map[i].dtype == t)
            return dtype_map[i].onnx;
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

/* Names for error messages about element types we do not serve. */
static const char *onnx_element_name(ONNXTensorElementDataType t)
{
    static const char *const names[] = {
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED] = "undefined",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64] = "complex64",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128] = "complex128",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN] = "float8e4m3fn",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ] = "float8e4m3fnuz",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2] = "float8e5m2",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ] = "float8e5m2fnuz",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4] = "uint4",
        [ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4] = "int4",
    };
    enum dtype ours = dtype_from_onnx(t);
    if (ours != DT_INVALID)
        return dtype_name(ours);
    if ((size_t)t < sizeof names / sizeof names[0] && names[t])
        return names[t];
    return "of an unknown kind";
}

static const char *onnx_type_name(ONNXType t)
{
    switch (t) {
    case ONNX_TYPE_TENSOR:
        return "tensor";
    case ONNX_TYPE_SEQUENCE:
        return "sequence";
    case ONNX_TYPE_MAP:
        return "map";
    case ONNX_TYPE_OPAQUE:
        return "opaque value";
    case ONNX_TYPE_SPARSETENSOR:
        return "sparse tensor";
    case ONNX_TYPE_OPTIONAL:
        return "optional";
    default:
        return "value of unknown type";
    }
}

static enum log_level log_level_from_ort(OrtLoggingLevel severity)
{
    switch (severity) {
    case ORT_LOGGING_LEVEL_VERBOSE:
    case ORT_LOGGING_LEVEL_INFO:
        return LOG_DEBUG;
    case ORT_LOGGING_LEVEL_WARNING:
        return LOG_WARN;
    default:
        return LOG_ERROR;
    }
}

/* The least severe ORT level whose lines inferd's log would keep now, so
 * that ORT does not format lines only to have them dropped. */
static OrtLoggingLevel ort_log_threshold(void)
{
    if (log_enabled(LOG_DEBUG))
        return ORT_LOGGING_LEVEL_VERBOSE;
    if (log_enabled(LOG_WARN))
        return ORT_LOGGING_LEVEL_WARNING;
    if (log_enabled(LOG_ERROR))
        return ORT_LOGGING_LEVEL_ERROR;
    return ORT_LOGGING_LEVEL_FATAL;
}

/* ORT's logging function: its lines join inferd's log, one line each
 * (control characters become spaces), named by the session's log id. */
static void ORT_API_CALL ort_log(void *param, OrtLoggingLevel severity, const char *category,
                                 const char *logid, const char *code_location,
                                 const char *message)
{
    (void)param;
    (void)category;
    enum log_level level = log_level_from_ort(severity);
    if (!log_enabled(level))
        return;
    char msg[ORT_LOG_MSG_MAX];
    size_t n = 0;
    for (const char *p = message ? message : ""; *p && n < sizeof msg - 1; p++)
        msg[n++] = (unsigned char)*p < 0x20 ? ' ' : *p;
    msg[n] = '\0';
    log_msg(level, "onnxruntime %s: %s [%s]", logid && logid[0] ? logid : ORT_ENV_LOG_ID, msg,
            code_location ? code_location : "");
}

/* Brings the environment's threshold (lines not tied to a session) to
 * inferd's current log level; returns that threshold for a new session. */
static OrtLoggingLevel ort_log_sync(void)
{
    OrtLoggingLevel level = ort_log_threshold();
    pthread_mutex_lock(&ort_env_level_lock);
    if (level != ort_env_level) {
        OrtStatus *st = ort->UpdateEnvWithCustomLogLevel(ort_env, level);
        if (st)
            ort->ReleaseStatus(st); /* the callback still filters by level */
        else
            ort_env_level = level;
    }
    pthread_mutex_unlock(&ort_env_level_lock);
    return level;
}

/* The smallest ONNX model (y = Identity(x), one float, opset 13; made with
 * onnx.helper and SerializeToString). A session of it is created and
 * released once at initialization: ORT builds its process-wide state (the
 * CPU kernel registry, some 25 MiB) on its first session, which would
 * otherwise land in the first model's load time and measured memory. */
static const unsigned char prime_model[] = {
    0x08, 0x07, 0x12, 0x00, 0x3a, 0x37, 0x0a, 0x10, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79,
    0x22, 0x08, 0x49, 0x64, 0x65, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x12, 0x01, 0x67, 0x5a,
    0x0f, 0x0a, 0x01, 0x78, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02,
    0x08, 0x01, 0x62, 0x0f, 0x0a, 0x01, 0x79, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12,
    0x04, 0x0a, 0x02, 0x08, 0x01, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d,
};

static OrtStatus *prime(const OrtApi *api)
{
    OrtSessionOptions *options = NULL;
    OrtSession *session = NULL;
    OrtStatus *st = api->CreateSessionOptions(&options);
    if (!st)
        st = api->SetIntraOpNumThreads(options, 1);
    if (!st)
        st = api->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL);
    if (!st)
        st = api->CreateSessionFromArray(ort_env, prime_model, sizeof prime_model, options,
                                         &session);
    if (session)
        api->ReleaseSession(session);
    if (options)
        api->ReleaseSessionOptions(options);
    return st;
}

static void ort_init_once(void)
{
    const OrtApiBase *base = OrtGetApiBase();
    const OrtApi *api = base->GetApi(ORT_API_VERSION);
    OrtStatus *st;

    if (!api) {
        snprintf(ort_init_msg, sizeof ort_init_msg,
                 "ONNX Runtime %s does not serve C API version %d", base->GetVersionString(),
                 ORT_API_VERSION);
        return;
    }
    ort_env_level = ort_log_threshold();
    st = api->CreateEnvWithCustomLogger(ort_log, NULL, ort_env_level, ORT_ENV_LOG_ID, &ort_env);
    if (!st)
        st = api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &ort_cpu_memory);
    if (!st)
        st = prime(api);
    if (st) {
        snprintf(ort_init_msg, sizeof ort_init_msg, "cannot initialize ONNX Runtime: %s",
                 api->GetErrorMessage(st));
        api->ReleaseStatus(st);
        api->ReleaseEnv(ort_env);
        ort_env = NULL;
        return;
    }
    ort = api;
}

static int ort_init(const char *path, struct error *err)
{
    pthread_once(&ort_once, ort_init_once);
    if (!ort)
        return error_set(err, 500, "failed to load model '%s': %s", path, ort_init_msg);
    return 0;
}

void onnxruntime_start(void)
{
    pthread_once(&ort_once, ort_init_once);
}

/* Turns a failed ORT call during load() into the client error; frees st. */
static int load_error(struct error *err, const char *path, OrtStatus *st)
{
    error_set(err, 400, "failed to load model '%s': %s", path, ort->GetErrorMessage(st));
    ort->ReleaseStatus(st);
    return ST_ERROR;
}

/* Turns a failed ORT call during execute() into the client error; frees st.
 * ORT reports inputs it rejects (rank, dims, sizes) as invalid arguments. */
static int execute_error(struct error *err, OrtStatus *st)
{
    if (ort->GetErrorCode(st) == ORT_INVALID_ARGUMENT)
        error_set(err, 400, "%s", ort->GetErrorMessage(st));
    else
        error_set(err, 500, "model execution failed: %s", ort->GetErrorMessage(st));
    ort->ReleaseStatus(st);
    return ST_ERROR;
}

static void ort_instance_free(struct ort_instance *inst)
{
    if (!inst)
        return;
    while (inst->free_states) {
        struct ort_state *next = inst->free_states->next_free;
        mem_free(inst->free_states);
        inst->free_states = next;
    }
    pthread_mutex_destroy(&inst->pool_lock);
    for (uint32_t i = 0; inst->staged && i < inst->ninputs + inst->noutputs; i++) {
        if (inst->staged[i].value)
            ort->ReleaseValue(inst->staged[i].value);
        mem_free(inst->staged[i].mem);
    }
    mem_free(inst->staged);
    if (inst->session)
        ort->ReleaseSession(inst->session);
    for (uint32_t i = 0; inst->input_names && i < inst->ninputs; i++)
        mem_free(inst->input_names[i]);
    for (uint32_t i = 0; inst->output_names && i < inst->noutputs; i++)
        mem_free(inst->output_names[i]);
    mem_free(inst->input_names);
    mem_free(inst->input_dtypes);
    mem_free(inst->output_names);
    mem_free(inst->outs);
    if (inst->quiet_run)
        ort->ReleaseRunOptions(inst->quiet_run);
    if (inst->run)
        ort->ReleaseRunOptions(inst->run);
    mem_free(inst);
}

/* Fills io (and *inst_name, the instance's own copy of the name) from input
 * or output `index` of the session. */
static int describe_io(OrtSession *session, int is_input, size_t index, const char *path,
                       struct model_io *io, char **inst_name, struct error *err)
{
    const char *kind = is_input ? "input" : "output";
    OrtAllocator *alloc = NULL;
    char *ort_name = NULL;
    OrtTypeInfo *type_info = NULL;
    const OrtTensorTypeAndShapeInfo *tensor_info;
    ONNXType value_type;
    ONNXTensorElementDataType elem;
    size_t ndim;
    OrtStatus *st;
    int rc = ST_ERROR;

    st = ort->GetAllocatorWithDefaultOptions(&alloc);
    if (st)
        goto out;
    st = is_input ? ort->SessionGetInputName(session, index, alloc, &ort_name)
                  : ort->SessionGetOutputName(session, index, alloc, &ort_name);
    if (st)
        goto out;
    io->name = mem_strdup(ort_name);
    *inst_name = mem_strdup(ort_name);
    if (!io->name || !*inst_name) {
        error_set(err, 500, "failed to load model '%s': out of memory", path);
        goto out;
    }
    st = is_input ? ort->SessionGetInputTypeInfo(session, index, &type_info)
                  : ort->SessionGetOutputTypeInfo(session, index, &type_info);
    if (st)
        goto out;
    st = ort->GetOnnxTypeFromTypeInfo(type_info, &value_type);
    if (st)
        goto out;
    if (value_type != ONNX_TYPE_TENSOR) {
        error_set(err, 400, "failed to load model '%s': %s '%s' is a %s, not a tensor", path, kind,
                  io->name, onnx_type_name(value_type));
        goto out;
    }
    st = ort->CastTypeInfoToTensorInfo(type_info, &tensor_info);
    if (st)
        goto out;
    st = ort->GetTensorElementType(tensor_info, &elem);
    if (st)
        goto out;
    io->dtype = dtype_from_onnx(elem);
    if (io->dtype == DT_INVALID) {
        error_set(err, 400, "failed to load model '%s': %s '%s' has unsupported element type %s",
                  path, kind, io->name, onnx_element_name(elem));
        goto out;
    }
    st = ort->GetDimensionsCount(tensor_info, &ndim);
    if (st)
        goto out;
    if (ndim > TENSOR_MAX_DIMS) {
        error_set(err, 400, "failed to load model '%s': %s '%s' has rank %zu, more than %d", path,
                  kind, io->name, ndim, TENSOR_MAX_DIMS);
        goto out;
    }
    st = ort->GetDimensions(tensor_info, io->dims, ndim);
    if (st)
        goto out;
    io->ndim = (uint32_t)ndim;
    for (uint32_t d = 0; d < io->ndim; d++)
        if (io->dims[d] < 0)
            io->dims[d] = -1; /* symbolic ("batch") or unknown */
    rc = 0;
out:
    if (st)
        load_error(err, path, st);
    ort->ReleaseTypeInfo(type_info);
    if (ort_name)
        ort->ReleaseStatus(ort->AllocatorFree(alloc, ort_name));
    return rc;
}

/* The first plan of an output, from what the session declares. */
static void plan_output(struct ort_out *o, const struct model_io *io)
{
    o->dtype = io->dtype;
    o->ndim = io->ndim;
    memcpy(o->dims, io->dims, sizeof o->dims);
    uint32_t variable = 0;
    for (uint32_t d = 0; d < io->ndim; d++)
        variable += io->dims[d] < 0;
    if (io->dtype == DT_BYTES || io->ndim > TENSOR_MAX_DIMS)
        o->plan = OUT_ORT;
    else if (variable == 0)
        o->plan = OUT_STATIC;
    else if (variable == 1 && io->dims[0] < 0)
        o->plan = OUT_GUESS;
    else
        o->plan = OUT_ORT;
}

static int ort_load(const struct backend_load_args *args, void **instance, struct model_info *info,
                    struct error *err)
{
    const char *path = args->path;
    OrtSessionOptions *options = NULL;
    struct ort_instance *inst = NULL;
    struct model_info mi = {0};
    OrtStatus *st = NULL;
    size_t nin, nout;
    int rc = ST_ERROR;

    if (ort_init(path, err))
        return ST_ERROR;
    if (args->intra_op_threads < 0 || args->inter_op_threads < 0)
        return error_set(err, 400, "failed to load model '%s': negative thread count", path);
    inst = mem_calloc(1, sizeof *inst);
    if (!inst) {
        error_set(err, 500, "failed to load model '%s': out of memory", path);
        goto out;
    }
    pthread_mutex_init(&inst->pool_lock, NULL);
    st = ort->CreateSessionOptions(&options);
    if (!st && args->log_id)
        st = ort->SetSessionLogId(options, args->log_id);
    if (!st)
        st = ort->SetSessionLogSeverityLevel(options, (int)ort_log_sync());
    if (!st && args->intra_op_threads > 0)
        st = ort->SetIntraOpNumThreads(options, args->intra_op_threads);
    if (!st && args->inter_op_threads > 0)
        st = ort->SetInterOpNumThreads(options, args->inter_op_threads);
    if (!st)
        st = ort->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL);
    if (!st)
        st = ort->SetSessionExecutionMode(options, ORT_SEQUENTIAL);
    if (!st)
        st = ort->CreateSession(ort_env, path, options, &inst->session);
    if (!st)
        st = ort->CreateRunOptions(&inst->run);
    if (!st)
        st = ort->CreateRunOptions(&inst->quiet_run);
    if (!st)
        st = ort->RunOptionsSetRunLogSeverityLevel(inst->quiet_run, ORT_LOGGING_LEVEL_FATAL);
    if (!st)
        st = ort->SessionGetInputCount(inst->session, &nin);
    if (!st)
        st = ort->SessionGetOutputCount(inst->session, &nout);
    if (st)
        goto out;
    if (nin > UINT32_MAX || nout > UINT32_MAX) {
        error_set(err, 400, "failed to load model '%s': too many inputs or outputs", path);
        goto out;
    }
    inst->input_names = mem_calloc(nin, sizeof *inst->input_names);
    inst->input_dtypes = mem_calloc(nin, sizeof *inst->input_dtypes);
    inst->output_names = mem_calloc(nout, sizeof *inst->output_names);
    inst->outs = mem_calloc(nout ? nout : 1, sizeof *inst->outs);
    inst->staged = mem_calloc(nin + nout ? nin + nout : 1, sizeof *inst->staged);
    mi.inputs = mem_calloc(nin, sizeof *mi.inputs);
    mi.outputs = mem_calloc(nout, sizeof *mi.outputs);
    if (!inst->input_names || !inst->input_dtypes || !inst->output_names || !inst->outs ||
        !inst->staged || !mi.inputs || !mi.outputs) {
        error_set(err, 500, "failed to load model '%s': out of memory", path);
        goto out;
    }
    /* Counts first, so that the frees below see every name filled so far. */
    inst->ninputs = mi.ninputs = (uint32_t)nin;
    inst->noutputs = mi.noutputs = (uint32_t)nout;
    for (uint32_t i = 0; i < inst->ninputs; i++) {
        if (describe_io(inst->session, 1, i, path, &mi.inputs[i], &inst->input_names[i], err))
            goto out;
        inst->input_dtypes[i] = mi.inputs[i].dtype;
    }
    for (uint32_t i = 0; i < inst->noutputs; i++) {
        if (describe_io(inst->session, 0, i, path, &mi.outputs[i], &inst->output_names[i], err))
            goto out;
        plan_output(&inst->outs[i], &mi.outputs[i]);
    }
    /* A few run states up front: results of one batch are still being
     * encoded while the next runs, and the pool should not have to grow
     * while serving. */
    for (int i = 0; i < ORT_STATES_PREALLOCATED; i++) {
        struct ort_state *state = ort_state_new(inst);
        if (!state) {
            error_set(err, 500, "failed to load model '%s': out of memory", path);
            goto out;
        }
        ort_state_free(inst, state);
    }
    *instance = inst;
    *info = mi;
    rc = 0;
out:
    if (st)
        load_error(err, path, st);
    if (options)
        ort->ReleaseSessionOptions(options);
    if (rc) {
        ort_instance_free(inst);
        model_info_free(&mi);
    }
    return rc;
}

static struct ort_state *ort_state_new(struct ort_instance *inst)
{
    pthread_mutex_lock(&inst->pool_lock);
    struct ort_state *state = inst->free_states;
    if (state)
        inst->free_states = state->next_free;
    pthread_mutex_unlock(&inst->pool_lock);
    if (state)
        return state;
    uint32_t n = inst->ninputs + inst->noutputs;
    state = mem_calloc(1, sizeof *state + (size_t)n * sizeof state->values[0]);
    if (state)
        state->nvalues = n;
    return state;
}

/* Releases the state's OrtValues and keeps the state for the next call. */
static void ort_state_free(struct ort_instance *inst, struct ort_state *state)
{
    if (!state)
        return;
    for (uint32_t i = 0; i < state->nvalues; i++) {
        if (state->values[i])
            ort->ReleaseValue(state->values[i]);
        state->values[i] = NULL;
    }
    if (state->lent) {
        state->lent = false;
        atomic_store_explicit(&inst->outputs_lent, false, memory_order_release);
    }
    pthread_mutex_lock(&inst->pool_lock);
    state->next_free = inst->free_states;
    inst->free_states = state;
    pthread_mutex_unlock(&inst->pool_lock);
}

static int find_name(char *const *names, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return NOT_FOUND;
}

/* Every requested output must be a model output, asked for once; this also
 * bounds nout by the instance's output count (the size of the state). */
static int check_outputs(const struct ort_instance *inst, const char *const *names, uint32_t n,
                         struct error *err)
{
    if (n == 0)
        return error_set(err, 400, "no outputs requested");
    for (uint32_t i = 0; i < n; i++) {
        if (find_name(inst->output_names, inst->noutputs, names[i]) < 0)
            return error_set(err, 400, "unknown output '%s'", names[i]);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return error_set(err, 400, "output '%s' requested more than once", names[i]);
    }
    return 0;
}

static int make_string_input(const struct tensor *t, size_t count, OrtValue **value,
                             struct error *err)
{
    const struct tensor_bytes *elems = t->data;
    OrtAllocator *alloc;
    OrtStatus *st;

    if (count && !elems)
        return error_set(err, 400, "input '%s' has no data", t->name);
    st = ort->GetAllocatorWithDefaultOptions(&alloc);
    if (!st)
        st = ort->CreateTensorAsOrtValue(alloc, t->shape, t->ndim,
                                         ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, value);
    /* Element by element with explicit lengths: FillStringTensor would stop
     * at the first NUL byte. */
    for (size_t i = 0; !st && i < count; i++) {
        char *buf;
        st = ort->GetResizedStringTensorElementBuffer(*value, i, elems[i].len, &buf);
        if (!st && elems[i].len)
            memcpy(buf, elems[i].ptr, elems[i].len);
    }
    return st ? execute_error(err, st) : 0;
}

/* Checks input t's rank and that its bytes are its shape's. */
static int check_input(const struct tensor *t, size_t *count, struct error *err)
{
    size_t size = dtype_size(t->dtype);
    char shape[128];
    if (t->ndim > TENSOR_MAX_DIMS)
        return error_set(err, 400, "input '%s' has rank %u, more than %d", t->name, t->ndim,
                         TENSOR_MAX_DIMS);
    int64_t n = tensor_count(t, INT64_MAX);
    if (n < 0 || (uint64_t)n > SIZE_MAX / (size ? size : 1)) {
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return error_set(err, 400, "input '%s' has an invalid shape %s", t->name, shape);
    }
    if (t->dtype != DT_BYTES && t->nbytes != (size_t)n * size) {
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return error_set(err, 400, "input '%s' has %zu bytes of data, shape %s of %s needs %zu",
                         t->name, t->nbytes, shape, dtype_name(t->dtype), (size_t)n * size);
    }
    *count = (size_t)n;
    return 0;
}

/* Creates the OrtValue for input t (checked) in *value (left for the
 * caller to release, also on failure). */
static int make_input(const struct tensor *t, size_t count, OrtValue **value, struct error *err)
{
    if (t->dtype == DT_BYTES)
        return make_string_input(t, count, value, err);
    OrtStatus *st = ort->CreateTensorWithDataAsOrtValue(
        ort_cpu_memory, t->data, t->nbytes, t->shape, t->ndim, dtype_to_onnx(t->dtype), value);
    return st ? execute_error(err, st) : 0;
}

/* s's value for a numeric tensor of this type and shape (nbytes its
 * size), made again over s's memory when the shape is not the last one's.
 * NULL when the tensor is not small, or on a failure (the caller then
 * makes a value of its own, which says what failed). */
static OrtValue *stage(struct ort_staged *s, enum dtype dtype, const int64_t *shape,
                       uint32_t ndim, size_t nbytes)
{
    if (dtype == DT_BYTES || nbytes == 0 || nbytes > ORT_STAGE_MAX)
        return NULL;
    if (s->value && s->dtype == dtype && s->ndim == ndim &&
        memcmp(s->shape, shape, ndim * sizeof *shape) == 0)
        return s->value;
    if (s->value)
        ort->ReleaseValue(s->value);
    s->value = NULL;
    if (!s->mem) {
        if (!(s->mem = mem_alloc(ORT_STAGE_MAX + 63)))
            return NULL;
        s->data = (void *)(((uintptr_t)s->mem + 63) & ~(uintptr_t)63);
    }
    OrtStatus *st = ort->CreateTensorWithDataAsOrtValue(ort_cpu_memory, s->data, nbytes, shape,
                                                        ndim, dtype_to_onnx(dtype), &s->value);
    if (st) {
        ort->ReleaseStatus(st);
        s->value = NULL;
        return NULL;
    }
    s->dtype = dtype;
    s->ndim = ndim;
    s->nbytes = nbytes;
    memcpy(s->shape, shape, ndim * sizeof *shape);
    return s->value;
}

/* Copies the strings of a BYTES output into the arena as tensor_bytes. */
static int read_strings(OrtValue *value, size_t count, struct arena *arena, struct tensor *t,
                        struct error *err)
{
    struct tensor_bytes *elems;
    size_t *offsets;
    size_t total;
    char *buf;
    OrtStatus *st;

    st = ort->GetStringTensorDataLength(value, &total);
    if (st)
        return execute_error(err, st);
    buf = arena_alloc(arena, total);
    offsets = arena_calloc(arena, count, sizeof *offsets);
    elems = arena_calloc(arena, count, sizeof *elems);
    if (!buf || !offsets || !elems)
        return error_set(err, 500, "out of memory for output '%s'", t->name);
    st = ort->GetStringTensorContent(value, buf, total, offsets, count);
    if (st)
        return execute_error(err, st);
    for (size_t i = 0; i < count; i++) {
        size_t end = i + 1 < count ? offsets[i + 1] : total;
        if (end - offsets[i] > UINT32_MAX)
            return error_set(err, 500, "output '%s' has an element over 4 GiB", t->name);
        elems[i].ptr = buf + offsets[i];
        elems[i].len = (uint32_t)(end - offsets[i]);
    }
    t->data = elems;
    t->nbytes = total;
    return 0;
}

/* Describes the output OrtValue in t; numeric data stays in the OrtValue. */
static int read_output(OrtValue *value, const char *name, struct arena *arena, struct tensor *t,
                       struct error *err)
{
    OrtTensorTypeAndShapeInfo *info = NULL;
    ONNXTensorElementDataType elem;
    size_t ndim, count;
    OrtStatus *st;
    int rc = ST_ERROR;

    t->name = name;
    st = ort->GetTensorTypeAndShape(value, &info);
    if (!st)
        st = ort->GetTensorElementType(info, &elem);
    if (!st)
        st = ort->GetDimensionsCount(info, &ndim);
    if (!st)
        st = ort->GetTensorShapeElementCount(info, &count);
    if (st)
        goto out;
    t->dtype = dtype_from_onnx(elem);
    if (t->dtype == DT_INVALID) {
        error_set(err, 500, "output '%s' has unsupported element type %s", name,
                  onnx_element_name(elem));
        goto out;
    }
    if (ndim > TENSOR_MAX_DIMS) {
        error_set(err, 500, "output '%s' has rank %zu, more than %d", name, ndim, TENSOR_MAX_DIMS);
        goto out;
    }
    st = ort->GetDimensions(info, t->shape, ndim);
    if (st)
        goto out;
    t->ndim = (uint32_t)ndim;
    if (t->dtype == DT_BYTES) {
        rc = read_strings(value, count, arena, t, err);
        goto out;
    }
    st = ort->GetTensorMutableData(value, &t->data);
    if (st)
        goto out;
    t->nbytes = count * dtype_size(t->dtype);
    rc = 0;
out:
    if (st)
        execute_error(err, st);
    if (info)
        ort->ReleaseTensorTypeAndShapeInfo(info);
    return rc;
}

/* The output's shape when its plan says it before the run (in shape,
 * its size in *bytes); false when ORT must allocate it. */
static bool planned_shape(const struct ort_out *o, int64_t batch, int64_t *shape, size_t *bytes)
{
    if (o->plan != OUT_STATIC && (o->plan != OUT_BATCH || batch < 0))
        return false;
    *bytes = dtype_size(o->dtype);
    for (uint32_t d = 0; d < o->ndim; d++) {
        shape[d] = d == 0 && o->plan == OUT_BATCH ? batch : o->dims[d];
        if (shape[d] != 0 && *bytes > SIZE_MAX / 2 / (size_t)shape[d])
            return false; /* absurd: let ORT say what it makes of it */
        *bytes *= (size_t)shape[d];
    }
    return *bytes != 0;
}

/* The output's OrtValue over 64-byte aligned memory of the arena, of the
 * planned shape. 0, or ST_ERROR with err. */
static int preallocate(const struct ort_out *o, const int64_t *shape, size_t bytes,
                       struct arena *arena, OrtValue **value, struct error *err)
{
    char *p = arena_alloc(arena, bytes + 63);
    if (!p)
        return error_set(err, 500, "out of memory for the outputs");
    void *data = (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
    OrtStatus *st = ort->CreateTensorWithDataAsOrtValue(ort_cpu_memory, data, bytes, shape,
                                                        o->ndim, dtype_to_onnx(o->dtype), value);
    return st ? execute_error(err, st) : 0;
}

/* After a run ORT allocated an OUT_GUESS output for: its first dimension
 * was the first input's (and the rest as declared), or it never is. */
static void learn_plan(struct ort_out *o, int64_t batch, const struct tensor *t)
{
    if (o->plan != OUT_GUESS || batch < 0)
        return;
    bool same = t->ndim == o->ndim && t->shape[0] == batch;
    for (uint32_t d = 1; same && d < o->ndim; d++)
        same = t->shape[d] == o->dims[d];
    o->plan = same ? OUT_BATCH : OUT_ORT;
}

/* The run's output i as planned before it: shape, type and memory known. */
struct planned {
    uint32_t k; /* the output's index in session order */
    bool known;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    void *data;
    size_t bytes;
};

static int ort_execute(void *instance, struct arena *arena, const struct tensor *inputs,
                       uint32_t nin, const char *const *output_names, uint32_t nout,
                       struct tensor *out, void **state_out, uint32_t flags,
                       struct error *err)
{
    (void)flags; /* a shadow copy runs like any request */
    struct ort_instance *inst = instance;
    struct ort_state *state = NULL;
    OrtValue **in_values, **out_values; /* the values this call made (the state's) */
    OrtStatus *st = NULL;
    int rc = ST_ERROR;

    if (check_outputs(inst, output_names, nout, err))
        return ST_ERROR;
    state = ort_state_new(inst);
    if (!state)
        return error_set(err, 500, "out of memory");
    in_values = state->values;
    out_values = state->values + inst->ninputs;
    /* What Run() takes: the values made here or the instance's staged ones. */
    OrtValue *run_in[inst->ninputs + 1], *run_out[nout]; /* + 1: a model may have no input */
    struct planned plan[nout];
    memset(run_in, 0, sizeof run_in);

    for (uint32_t j = 0; j < nin; j++) {
        const struct tensor *t = &inputs[j];
        int k = find_name(inst->input_names, inst->ninputs, t->name);
        size_t count = 0;
        if (k < 0) {
            error_set(err, 400, "unknown input '%s'", t->name);
            goto out;
        }
        if (run_in[k]) {
            error_set(err, 400, "input '%s' given more than once", t->name);
            goto out;
        }
        if (t->dtype != inst->input_dtypes[k]) {
            error_set(err, 400, "input '%s' has datatype %s, the model expects %s", t->name,
                      dtype_name(t->dtype), dtype_name(inst->input_dtypes[k]));
            goto out;
        }
        if (check_input(t, &count, err))
            goto out;
        struct ort_staged *sv = &inst->staged[k];
        if ((run_in[k] = stage(sv, t->dtype, t->shape, t->ndim, t->nbytes))) {
            memcpy(sv->data, t->data, t->nbytes);
            continue;
        }
        if (make_input(t, count, &in_values[k], err))
            goto out;
        run_in[k] = in_values[k];
    }
    for (uint32_t k = 0; k < inst->ninputs; k++) {
        if (!run_in[k]) {
            error_set(err, 400, "missing input '%s'", inst->input_names[k]);
            goto out;
        }
    }

    /* Outputs whose shape is planned: the staged values when no earlier
     * run's state holds them, else over the arena; the others ORT's. */
    int64_t batch = nin > 0 && inputs[0].ndim > 0 ? inputs[0].shape[0] : -1;
    bool lend = !atomic_load_explicit(&inst->outputs_lent, memory_order_acquire), lent = false;
    bool preallocated = false;
    for (uint32_t i = 0; i < nout; i++) {
        /* check_outputs() found every name */
        uint32_t k = (uint32_t)find_name(inst->output_names, inst->noutputs, output_names[i]);
        const struct ort_out *o = &inst->outs[k];
        struct planned *pl = &plan[i];
        pl->k = k;
        run_out[i] = NULL;
        pl->known = arena && planned_shape(o, batch, pl->shape, &pl->bytes);
        if (!pl->known)
            continue;
        pl->ndim = o->ndim;
        struct ort_staged *sv = &inst->staged[inst->ninputs + k];
        if (lend && (run_out[i] = stage(sv, o->dtype, pl->shape, o->ndim, pl->bytes))) {
            pl->data = sv->data;
            lent = true;
        } else {
            if (preallocate(o, pl->shape, pl->bytes, arena, &out_values[i], err))
                goto out;
            run_out[i] = out_values[i];
            pl->data = NULL; /* read from the value */
            pl->known = false;
        }
        preallocated = true;
    }
    st = ort->Run(inst->session, preallocated ? inst->quiet_run : inst->run,
                  (const char *const *)inst->input_names, (const OrtValue *const *)run_in,
                  inst->ninputs, output_names, nout, run_out);
    if (st && preallocated) {
        /* Perhaps an output's shape was not the one planned (a first
         * dimension that is not the batch for these inputs, or a model whose
         * declared shape its kernels do not keep): once more with ORT's
         * memory; if that works, ORT allocates every output of this
         * instance from now on. */
        OrtStatus *first = st;
        for (uint32_t i = 0; i < nout; i++) {
            if (run_out[i] && !plan[i].known) /* not a staged value */
                ort->ReleaseValue(run_out[i]);
            out_values[i] = run_out[i] = NULL;
            plan[i].known = false;
        }
        lent = false;
        st = ort->Run(inst->session, inst->run, (const char *const *)inst->input_names,
                      (const OrtValue *const *)run_in, inst->ninputs, output_names, nout,
                      run_out);
        if (st) {
            ort->ReleaseStatus(st);
            st = first;
        } else {
            ort->ReleaseStatus(first);
            for (uint32_t k = 0; k < inst->noutputs; k++)
                inst->outs[k].plan = OUT_ORT;
        }
    }
    for (uint32_t i = 0; i < nout; i++)
        if (!plan[i].known && run_out[i])
            out_values[i] = run_out[i]; /* made by this call (or by ORT in it) */
    if (st)
        goto out;
    for (uint32_t k = 0; k < inst->ninputs; k++) {
        if (in_values[k])
            ort->ReleaseValue(in_values[k]);
        in_values[k] = NULL;
    }
    for (uint32_t i = 0; i < nout; i++) {
        const struct planned *pl = &plan[i];
        uint32_t k = pl->k;
        if (pl->known) {
            /* staged: its shape is the one planned, its type the declared */
            out[i] = (struct tensor){.name = output_names[i],
                                     .dtype = inst->outs[k].dtype,
                                     .ndim = pl->ndim,
                                     .data = pl->data,
                                     .nbytes = pl->bytes};
            memcpy(out[i].shape, pl->shape, pl->ndim * sizeof pl->shape[0]);
            continue;
        }
        if (read_output(out_values[i], output_names[i], arena, &out[i], err))
            goto out;
        learn_plan(&inst->outs[k], batch, &out[i]);
    }
    if (lent) {
        state->lent = true;
        atomic_store_explicit(&inst->outputs_lent, true, memory_order_relaxed);
    }
    *state_out = state;
    state = NULL;
    rc = 0;
out:
    if (st)
        execute_error(err, st);
    ort_state_free(inst, state);
    return rc;
}

static void ort_release(void *instance, void *state)
{
    ort_state_free(instance, state);
}

static void ort_unload(void *instance)
{
    ort_instance_free(instance);
}

const struct backend_ops backend_onnxruntime = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "onnxruntime",
    .load = ort_load,
    .execute = ort_execute,
    .release = ort_release,
    .unload = ort_unload,
};
