/*
 * ort_floor: the compute floor of `make bench`. Runs an ONNX model in process
 * through the ONNX Runtime C API, with no server around it, at several batch
 * sizes, and reports inferences (samples) per second for each and the best.
 * inferd serving the same model over HTTP is compared with the best figure.
 *
 * The session is set up as inferd's ONNX Runtime backend sets it up
 * (src/backend/onnxruntime.c): the given intra-/inter-op thread counts,
 * ORT_ENABLE_ALL graph optimizations, sequential execution, outputs allocated
 * by ONNX Runtime and released after each run. Inputs are created once per
 * batch size over pre-filled buffers (deterministic pseudo-random values):
 * the floor measures Run() alone.
 *
 * Every input's variable first dimension is the batch; other variable
 * dimensions are 1. Supported input types: float, double, float16, int8..64,
 * uint8..64, bool.
 *
 * Build (scripts/bench.sh does this, from the repo root):
 *   gcc -std=c11 -O2 -Wall -Wextra -Werror -I third_party/onnxruntime/include \
 *       bench/ort_floor.c -o bench/results/tmp/ort_floor \
 *       third_party/onnxruntime/lib/libonnxruntime.so.1 \
 *       -Wl,-rpath,"$PWD/third_party/onnxruntime/lib"
 *
 * Run:
 *   ort_floor --model PATH [--batches 1,8,16,32,64,128] [--seconds S]
 *             [--warmup S] [--intra-op-threads N] [--inter-op-threads N] [--json]
 *
 * Exit status: 0 measured, 1 ONNX Runtime error, 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <onnxruntime_c_api.h>

#define MAX_BATCHES 32
#define MAX_INPUTS 64
#define MAX_OUTPUTS 64
#define MAX_DIMS 16

struct options {
    const char *model;
    uint32_t batches[MAX_BATCHES];
    uint32_t nbatches;
    double seconds;
    double warmup;
    int intra_op_threads;
    int inter_op_threads;
    bool json;
};

struct input_desc {
    char *name;
    ONNXTensorElementDataType type;
    size_t elem_size;
    size_t ndim;
    int64_t dims[MAX_DIMS]; /* -1: variable */
};

struct result {
    uint32_t batch;
    uint64_t runs;
    double elapsed_s;
    double inferences_per_s;
    double us_per_run;
};

static const OrtApi *ort;

static const char usage_text[] =
    "usage: ort_floor --model PATH [--batches 1,8,16,32,64,128] [--seconds S]\n"
    "                 [--warmup S] [--intra-op-threads N] [--inter-op-threads N] [--json]\n"
    "\n"
    "Runs PATH in process through ONNX Runtime at each batch size for S seconds\n"
    "(default 5, after a warm-up of --warmup seconds, default 0.5) and reports\n"
    "inferences/s per batch size and the best. Thread counts default to 1 and 1,\n"
    "as inferd serve's --ort-intra-op-threads/--ort-inter-op-threads.\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns 0, or -1 after printing the status's message (the status is
 * released either way). */
static int check(OrtStatus *st, const char *what)
{
    if (!st)
        return 0;
    fprintf(stderr, "ort_floor: %s: %s\n", what, ort->GetErrorMessage(st));
    ort->ReleaseStatus(st);
    return -1;
}

static size_t elem_size(ONNXTensorElementDataType t)
{
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
        return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
        return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
        return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
        return 1;
    default:
        return 0;
    }
}

/* Deterministic values in a small range valid for every supported type:
 * floats in [0, 1), float16 0.5, integers 0..15, bools 0/1. */
static void fill(void *data, ONNXTensorElementDataType t, size_t n)
{
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        switch (t) {
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
            ((float *)data)[i] = (float)(x >> 8) / 16777216.0f;
            break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
            ((double *)data)[i] = (double)(x >> 8) / 16777216.0;
            break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
            ((uint16_t *)data)[i] = 0x3800; /* 0.5 */
            break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
            ((uint8_t *)data)[i] = x & 1;
            break;
        default: {
            size_t sz = elem_size(t);
            uint64_t v = x & 15;
            memcpy((char *)data + i * sz, &v, sz); /* little-endian */
            break;
        }
        }
    }
}

static int parse_batches(const char *s, struct options *o)
{
    o->nbatches = 0;
    while (*s) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || v == 0 || v > 65536 || o->nbatches == MAX_BATCHES)
            return -1;
        o->batches[o->nbatches++] = (uint32_t)v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return o->nbatches ? 0 : -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const uint32_t default_batches[] = {1, 8, 16, 32, 64, 128};
    memcpy(o->batches, default_batches, sizeof default_batches);
    o->nbatches = sizeof default_batches / sizeof default_batches[0];
    o->seconds = 5;
    o->warmup = 0.5;
    o->intra_op_threads = 1;
    o->inter_op_threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            exit(0);
        } else if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!v)
            goto bad;
        i++;
        if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--batches")) {
            if (parse_batches(v, o))
                goto bad;
        } else if (!strcmp(a, "--seconds") || !strcmp(a, "--warmup")) {
            bool is_seconds = !strcmp(a, "--seconds");
            double d = strtod(v, &end);
            if (*end || !(d >= 0 && d <= 3600) || (is_seconds && d <= 0))
                goto bad;
            *(is_seconds ? &o->seconds : &o->warmup) = d;
        } else if (!strcmp(a, "--intra-op-threads") || !strcmp(a, "--inter-op-threads")) {
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 1024)
                goto bad;
            *(!strcmp(a, "--intra-op-threads") ? &o->intra_op_threads : &o->inter_op_threads) =
                (int)n;
        } else {
            goto bad;
        }
    }
    if (!o->model)
        goto bad;
    return 0;
bad:
    fputs(usage_text, stderr);
    return -1;
}

static int describe_inputs(OrtSession *session, OrtAllocator *alloc, struct input_desc *in,
                           size_t *nin)
{
    OrtStatus *st = ort->SessionGetInputCount(session, nin);
    if (check(st, "SessionGetInputCount"))
        return -1;
    if (*nin > MAX_INPUTS) {
        fprintf(stderr, "ort_floor: more than %d inputs\n", MAX_INPUTS);
        return -1;
    }
    for (size_t i = 0; i < *nin; i++) {
        OrtTypeInfo *ti = NULL;
        const OrtTensorTypeAndShapeInfo *tsi = NULL;
        int rc = -1;
        if (check(ort->SessionGetInputName(session, i, alloc, &in[i].name), "input name") ||
            check(ort->SessionGetInputTypeInfo(session, i, &ti), "input type") ||
            check(ort->CastTypeInfoToTensorInfo(ti, &tsi), "input tensor info"))
            goto next;
        if (!tsi) {
            fprintf(stderr, "ort_floor: input '%s' is not a tensor\n", in[i].name);
            goto next;
        }
        if (check(ort->GetTensorElementType(tsi, &in[i].type), "input element type") ||
            check(ort->GetDimensionsCount(tsi, &in[i].ndim), "input rank"))
            goto next;
        in[i].elem_size = elem_size(in[i].type);
        if (!in[i].elem_size || in[i].ndim > MAX_DIMS) {
            fprintf(stderr, "ort_floor: input '%s': unsupported type or rank\n", in[i].name);
            goto next;
        }
        if (check(ort->GetDimensions(tsi, in[i].dims, in[i].ndim), "input dims"))
            goto next;
        rc = 0;
    next:
        if (ti)
            ort->ReleaseTypeInfo(ti);
        if (rc)
            return -1;
    }
    return 0;
}

/* Runs the session at one batch size: warm-up, then runs for o->seconds. */
static int measure(OrtSession *session, OrtMemoryInfo *mem, const struct input_desc *in,
                   size_t nin, const char *const *out_names, size_t nout,
                   const struct options *o, uint32_t batch, struct result *r)
{
    void *buffers[MAX_INPUTS] = {0};
    OrtValue *values[MAX_INPUTS] = {0};
    OrtValue *outputs[MAX_OUTPUTS] = {0};
    const char *in_names[MAX_INPUTS];
    int rc = -1;

    for (size_t i = 0; i < nin; i++) {
        int64_t shape[MAX_DIMS];
        size_t n = 1;
        for (size_t d = 0; d < in[i].ndim; d++) {
            shape[d] = in[i].dims[d] >= 0 ? in[i].dims[d] : d == 0 ? (int64_t)batch : 1;
            n *= (size_t)shape[d];
        }
        in_names[i] = in[i].name;
        buffers[i] = malloc(n * in[i].elem_size + 1);
        if (!buffers[i]) {
            fprintf(stderr, "ort_floor: out of memory\n");
            goto out;
        }
        fill(buffers[i], in[i].type, n);
        if (check(ort->CreateTensorWithDataAsOrtValue(mem, buffers[i], n * in[i].elem_size,
                                                      shape, in[i].ndim, in[i].type, &values[i]),
                  "CreateTensorWithDataAsOrtValue"))
            goto out;
    }

    for (int phase = 0; phase < 2; phase++) {
        double limit = phase == 0 ? o->warmup : o->seconds;
        double start = now_s(), t = start;
        uint64_t runs = 0;
        /* Always at least one run: the warm-up's first run sizes ORT's arena. */
        do {
            OrtStatus *st = ort->Run(session, NULL, in_names, (const OrtValue *const *)values,
                                     nin, out_names, nout, outputs);
            if (check(st, "Run"))
                goto out;
            for (size_t k = 0; k < nout; k++) {
                ort->ReleaseValue(outputs[k]);
                outputs[k] = NULL;
            }
            runs++;
            t = now_s();
        } while (t - start < limit);
        if (phase == 1) {
            r->batch = batch;
            r->runs = runs;
            r->elapsed_s = t - start;
            r->inferences_per_s = (double)runs * batch / r->elapsed_s;
            r->us_per_run = r->elapsed_s * 1e6 / (double)runs;
        }
    }
    rc = 0;
out:
    for (size_t i = 0; i < nin; i++) {
        if (values[i])
            ort->ReleaseValue(values[i]);
        free(buffers[i]);
    }
    return rc;
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void report(const struct options *o, const struct result *res, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (res[i].inferences_per_s > res[best].inferences_per_s)
            best = i;
    if (!o->json) {
        printf("model %s, intra-op threads %d, inter-op threads %d, %.1f s per batch size\n",
               o->model, o->intra_op_threads, o->inter_op_threads, o->seconds);
        printf("%8s %12s %14s %12s\n", "batch", "runs", "inferences/s", "us/run");
        for (uint32_t i = 0; i < n; i++)
            printf("%8u %12llu %14.1f %12.1f\n", res[i].batch, (unsigned long long)res[i].runs,
                   res[i].inferences_per_s, res[i].us_per_run);
        printf("best: batch %u, %.1f inferences/s\n", res[best].batch,
               res[best].inferences_per_s);
        return;
    }
    printf("{\"model\":");
    print_json_string(o->model);
    printf(",\"ort_version\":");
    print_json_string(OrtGetApiBase()->GetVersionString());
    printf(",\"intra_op_threads\":%d,\"inter_op_threads\":%d,\"seconds\":%g,\"results\":[",
           o->intra_op_threads, o->inter_op_threads, o->seconds);
    for (uint32_t i = 0; i < n; i++)
        printf("%s{\"batch\":%u,\"runs\":%llu,\"elapsed_s\":%.6f,\"inferences_per_s\":%.3f,"
               "\"us_per_run\":%.3f}",
               i ? "," : "", res[i].batch, (unsigned long long)res[i].runs, res[i].elapsed_s,
               res[i].inferences_per_s, res[i].us_per_run);
    printf("],\"best\":{\"batch\":%u,\"inferences_per_s\":%.3f}}\n", res[best].batch,
           res[best].inferences_per_s);
}

int main(int argc, char **argv)
{
    struct options o = {0};
    struct input_desc in[MAX_INPUTS] = {0};
    char *out_names[MAX_OUTPUTS] = {0};
    struct result res[MAX_BATCHES] = {0};
    OrtEnv *env = NULL;
    OrtSessionOptions *so = NULL;
    OrtSession *session = NULL;
    OrtMemoryInfo *mem = NULL;
    OrtAllocator *alloc = NULL;
    size_t nin = 0, nout = 0;
    int rc = 1;

    if (parse_options(argc, argv, &o))
        return 2;
    ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    if (!ort) {
        fprintf(stderr, "ort_floor: ONNX Runtime %s does not serve C API version %d\n",
                OrtGetApiBase()->GetVersionString(), ORT_API_VERSION);
        return 1;
    }
    if (check(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_floor", &env), "CreateEnv") ||
        check(ort->CreateSessionOptions(&so), "CreateSessionOptions"))
        goto out;
    if (o.intra_op_threads > 0 &&
        check(ort->SetIntraOpNumThreads(so, o.intra_op_threads), "SetIntraOpNumThreads"))
        goto out;
    if (o.inter_op_threads > 0 &&
        check(ort->SetInterOpNumThreads(so, o.inter_op_threads), "SetInterOpNumThreads"))
        goto out;
    if (check(ort->SetSessionGraphOptimizationLevel(so, ORT_ENABLE_ALL), "optimization level") ||
        check(ort->SetSessionExecutionMode(so, ORT_SEQUENTIAL), "execution mode") ||
        check(ort->CreateSession(env, o.model, so, &session), "CreateSession") ||
        check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mem),
              "CreateCpuMemoryInfo") ||
        check(ort->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions"))
        goto out;
    if (describe_inputs(session, alloc, in, &nin))
        goto out;
    if (check(ort->SessionGetOutputCount(session, &nout), "SessionGetOutputCount"))
        goto out;
    if (nout > MAX_OUTPUTS) {
        fprintf(stderr, "ort_floor: more than %d outputs\n", MAX_OUTPUTS);
        goto out;
    }
    for (size_t k = 0; k < nout; k++)
        if (check(ort->SessionGetOutputName(session, k, alloc, &out_names[k]), "output name"))
            goto out;
    for (uint32_t b = 0; b < o.nbatches; b++) {
        if (measure(session, mem, in, nin, (const char *const *)out_names, nout, &o,
                    o.batches[b], &res[b]))
            goto out;
        if (!o.json)
            fprintf(stderr, "ort_floor: batch %u: %.1f inferences/s\n", res[b].batch,
                    res[b].inferences_per_s);
    }
    report(&o, res, o.nbatches);
    rc = 0;
out:
    for (size_t i = 0; i < nin; i++)
        if (in[i].name)
            alloc->Free(alloc, in[i].name);
    for (size_t k = 0; k < nout; k++)
        if (out_names[k])
            alloc->Free(alloc, out_names[k]);
    if (mem)
        ort->ReleaseMemoryInfo(mem);
    if (session)
        ort->ReleaseSession(session);
    if (so)
        ort->ReleaseSessionOptions(so);
    if (env)
        ort->ReleaseEnv(env);
    return rc;
}
