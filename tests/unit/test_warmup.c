/*
 * Model warm-up: real ONNX Runtime instances of models/simple and
 * models/strings with configs from config.pbtxt texts, and a fake backend
 * that records every execution (instance, input shapes and data) to check
 * how many executions of which shapes run per instance.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/onnxruntime.h"
#include "base/mem.h"
#include "core/fp16.h"
#include "model/config.h"
#include "model/model.h"
#include "model/warmup.h"

/* As test_onnxruntime.c: ORT leaks a block inside CreateEnv, suppressed by
 * our caller's frame, which LeakSanitizer only sees with the slow unwinder;
 * and ORT's own pool threads keep per-thread state. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0:malloc_context_size=64";
}

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:ort_init_once\nleak:libstdc++.so.6\n";
}

#define MAX_INSTANCES 4

static void source_path(char *out, size_t size, const char *rel)
{
    const char *root = getenv("INFERD_SOURCE_DIR");
    snprintf(out, size, "%s/%s", root ? root : ".", rel);
}

/* Fills m->config from text (NULL: derived from the ONNX model as without
 * a config.pbtxt) checked against m->info. */
static void configure(struct model *m, const char *text)
{
    struct error err;
    error_clear(&err);
    m->run_info = m->info; /* no preprocessing: the backend sees what clients see */
    if (!text) {
        assert_int_equal(model_config_from_onnx(m->name, &m->info, &m->config), 0);
        return;
    }
    if (model_config_parse(text, strlen(text), &m->config, &err))
        fail_msg("parse: %s", err.msg);
    if (model_config_check(&m->config, m->name, &m->info, &err))
        fail_msg("check: %s", err.msg);
}

/* ---- real ONNX Runtime instances ---------------------------------------- */

/* A struct model as the registry builds it, around n real instances of
 * <source>/models/<name>/1/model.onnx. m->path is `path` when given (the
 * warm-up files are found next to it), else the real file. */
static void ort_model(struct model *m, const char *name, uint32_t n, const char *path,
                      const char *cfg_text)
{
    char real[PATH_MAX], rel[128];
    struct error err;
    error_clear(&err);
    memset(m, 0, sizeof *m);
    snprintf(rel, sizeof rel, "models/%s/1/model.onnx", name);
    source_path(real, sizeof real, rel);
    m->name = strdup(name);
    m->path = strdup(path ? path : real);
    m->version = 1;
    snprintf(m->version_str, sizeof m->version_str, "1");
    m->platform = "onnxruntime_onnx";
    m->backend = &backend_onnxruntime;
    m->instances = calloc(n, sizeof *m->instances);
    assert_non_null(m->instances);
    struct backend_load_args args = {.path = real, .intra_op_threads = 1};
    for (uint32_t i = 0; i < n; i++) {
        struct model_info info = {0};
        if (backend_onnxruntime.load(&args, &m->instances[i], i ? &info : &m->info, &err))
            fail_msg("loading %s: %s", real, err.msg);
        model_info_free(&info);
        m->ninstances++;
    }
    configure(m, cfg_text);
    m->batched = m->config.max_batch_size > 0;
}

static void ort_model_free(struct model *m)
{
    for (uint32_t i = 0; i < m->ninstances; i++)
        backend_onnxruntime.unload(m->instances[i]);
    free(m->instances);
    model_info_free(&m->info);
    model_config_free(&m->config);
    free(m->name);
    free(m->path);
}

static void warmup_ok(const struct model *m)
{
    struct error err;
    uint64_t us = 0;
    error_clear(&err);
    int rc = model_warmup(m, &us, &err);
    if (rc)
        fail_msg("warm-up failed: %s", err.msg);
    assert_true(us > 0);
}

/* Runs a warm-up that must fail with status 500 and a message containing
 * every one of the NULL-terminated substrings. */
static void warmup_fails(const struct model *m, ...)
{
    struct error err;
    uint64_t us = UINT64_MAX;
    error_clear(&err);
    assert_int_equal(model_warmup(m, &us, &err), -1);
    assert_int_equal(err.status, 500);
    assert_true(us != UINT64_MAX);
    va_list ap;
    va_start(ap, m);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.msg, s))
            fail_msg("error \"%s\" does not contain \"%s\"", err.msg, s);
    va_end(ap);
}

static void test_real_default(void **state)
{
    (void)state;
    struct model m;
    /* No config.pbtxt: batched, preferring the default max_batch_size. */
    ort_model(&m, "simple", 2, NULL, NULL);
    warmup_ok(&m);
    ort_model_free(&m);

    ort_model(&m, "simple", 1, NULL,
              "max_batch_size: 8 dynamic_batching { preferred_batch_size: [2, 8] }");
    warmup_ok(&m);
    ort_model_free(&m);

    ort_model(&m, "simple", 1, NULL, "max_batch_size: 0");
    warmup_ok(&m);
    ort_model_free(&m);

    ort_model(&m, "strings", 1, NULL, "max_batch_size: 0");
    warmup_ok(&m);
    ort_model_free(&m);
}

static const char zero_random_pbtxt[] =
    "max_batch_size: 8\n"
    "model_warmup [\n"
    "  { name: 'zeros' batch_size: 4 count: 2\n"
    "    inputs { key: 'INPUT0' value { data_type: TYPE_INT32 dims: [16] zero_data: true } }\n"
    "    inputs { key: 'INPUT1' value { data_type: TYPE_INT32 dims: [16] zero_data: true } } },\n"
    "  { name: 'random' batch_size: 8\n"
    "    inputs { key: 'INPUT0' value { data_type: TYPE_INT32 dims: [16] random_data: true } }\n"
    "    inputs { key: 'INPUT1' value { data_type: TYPE_INT32 dims: [16] random_data: true } } }\n"
    "]\n";

static void test_real_zero_random(void **state)
{
    (void)state;
    struct model m;
    ort_model(&m, "simple", 2, NULL, zero_random_pbtxt);
    warmup_ok(&m);
    ort_model_free(&m);

    ort_model(&m, "strings", 1, NULL,
              "max_batch_size: 0\n"
              "model_warmup { name: 'text' batch_size: 1 count: 3\n"
              "  inputs { key: 'TEXT' value { data_type: TYPE_STRING dims: [5] "
              "random_data: true } } }\n");
    warmup_ok(&m);
    ort_model_free(&m);
}

/* ---- a temporary model directory for warm-up files ---------------------- */

struct tmp_repo {
    char root[64];
    char model_path[256]; /* <root>/<model>/1/model.onnx (not created) */
    char warmup[256];     /* <root>/<model>/warmup */
};

static void tmp_repo_make(struct tmp_repo *r, const char *model)
{
    char dir[128];
    snprintf(r->root, sizeof r->root, "/tmp/inferd_warmup_XXXXXX");
    assert_non_null(mkdtemp(r->root));
    snprintf(dir, sizeof dir, "%s/%s", r->root, model);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(r->warmup, sizeof r->warmup, "%s/warmup", dir);
    assert_int_equal(mkdir(r->warmup, 0700), 0);
    snprintf(r->model_path, sizeof r->model_path, "%s/1/model.onnx", dir);
}

static void tmp_file(const struct tmp_repo *r, const char *name, const void *data, size_t n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", r->warmup, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void tmp_repo_remove(const struct tmp_repo *r, const char *model)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->root);
    assert_int_equal(system(cmd), 0);
    (void)model;
}

/* Triton's BYTES file format: 4-byte little-endian length, then the bytes. */
static size_t bytes_file(char *out, const char *const *elems, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(elems[i]);
        out[off++] = (char)(len & 0xff);
        out[off++] = (char)(len >> 8);
        out[off++] = (char)(len >> 16);
        out[off++] = (char)(len >> 24);
        memcpy(out + off, elems[i], len);
        off += len;
    }
    return off;
}

static const char file_pbtxt[] =
    "max_batch_size: 8\n"
    "model_warmup { name: 'from_file' batch_size: 3\n"
    "  inputs { key: 'INPUT0' value { data_type: TYPE_INT32 dims: [16] "
    "input_data_file: 'in0.bin' } }\n"
    "  inputs { key: 'INPUT1' value { data_type: TYPE_INT32 dims: [16] "
    "input_data_file: 'in1.bin' } } }\n";

static void test_real_file(void **state)
{
    (void)state;
    struct tmp_repo r;
    struct model m;
    int32_t in[16];
    for (int i = 0; i < 16; i++)
        in[i] = i * 1000;
    tmp_repo_make(&r, "simple");
    tmp_file(&r, "in0.bin", in, sizeof in);
    tmp_file(&r, "in1.bin", in, sizeof in);
    ort_model(&m, "simple", 2, r.model_path, file_pbtxt);
    warmup_ok(&m);

    /* One int32 short: the error names the file and both sizes. */
    tmp_file(&r, "in1.bin", in, sizeof in - 4);
    warmup_fails(&m, "warm-up 'from_file' failed: input 'INPUT1': ", r.warmup, "in1.bin",
                 "holds 60 bytes, expected 64 (INT32 [16])", NULL);
    /* One byte too many. */
    char big[65] = {0};
    tmp_file(&r, "in1.bin", big, sizeof big);
    warmup_fails(&m, "in1.bin", "holds 65 bytes, expected 64", NULL);
    /* Missing. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/in1.bin", r.warmup);
    assert_int_equal(unlink(path), 0);
    warmup_fails(&m, "warm-up 'from_file' failed: input 'INPUT1': cannot open ", path,
                 "No such file or directory", NULL);
    /* A directory is not a data file. */
    assert_int_equal(mkdir(path, 0700), 0);
    warmup_fails(&m, "not a regular file", NULL);
    ort_model_free(&m);
    tmp_repo_remove(&r, "simple");

    /* BYTES from a file into the real strings model (no batch dim). */
    tmp_repo_make(&r, "strings");
    const char *const words[] = {"warm", "", "up"};
    char buf[64];
    size_t n = bytes_file(buf, words, 3);
    tmp_file(&r, "text.bin", buf, n);
    ort_model(&m, "strings", 1, r.model_path,
              "max_batch_size: 0\n"
              "model_warmup { name: 'words' batch_size: 1\n"
              "  inputs { key: 'TEXT' value { data_type: TYPE_STRING dims: [3] "
              "input_data_file: 'text.bin' } } }\n");
    warmup_ok(&m);
    /* The last element cut short, then a trailing byte, then too few. */
    tmp_file(&r, "text.bin", buf, n - 1);
    warmup_fails(&m, "warm-up 'words' failed: input 'TEXT': ", "text.bin",
                 "holds 17 bytes, element 2 of 3 needs 18", NULL);
    buf[n] = 'x';
    tmp_file(&r, "text.bin", buf, n + 1);
    warmup_fails(&m, "text.bin", "holds 19 bytes, expected 18 (3 BYTES elements)", NULL);
    tmp_file(&r, "text.bin", buf, 8 + 4 + 2); /* "warm", "" and half a length */
    warmup_fails(&m, "holds 14 bytes, too few for 3 BYTES elements (element 2 ", NULL);
    ort_model_free(&m);
    tmp_repo_remove(&r, "strings");
}

static void test_real_input_errors(void **state)
{
    (void)state;
    struct model m;
    ort_model(&m, "simple", 1, NULL, zero_random_pbtxt);
    /* model_config_check rejects a sample without every input; a config
     * changed afterwards (or a check that allows optional inputs) must
     * still not reach the backend with an input missing. */
    struct model_warmup *w = &m.config.warmups[1];
    assert_int_equal(w->ninputs, 2);
    assert_string_equal(w->inputs[1].name, "INPUT1");
    w->ninputs = 1;
    warmup_fails(&m, "warm-up 'random' failed: input 'INPUT1' is missing", NULL);
    w->ninputs = 2;
    char *saved = w->inputs[1].name;
    w->inputs[1].name = "NOPE";
    warmup_fails(&m, "warm-up 'random' failed: the model has no input 'NOPE'", NULL);
    w->inputs[1].name = saved;
    w->inputs[1].dtype = DT_FP32;
    warmup_fails(&m, "input 'INPUT1' has data_type TYPE_FP32, the model TYPE_INT32", NULL);
    w->inputs[1].dtype = DT_INT32;
    /* Dims the model rejects: ONNX Runtime's message, with the instance. */
    w->inputs[1].dims[0] = 15;
    warmup_fails(&m, "warm-up 'random' failed: instance 0: ", NULL);
    w->inputs[1].dims[0] = 16;
    warmup_ok(&m);
    ort_model_free(&m);
}

/* ---- a fake backend that records executions ------------------------------ */

#define FAKE_MAX_CALLS 64
#define FAKE_MAX_INPUTS 4
#define FAKE_DATA_MAX 512

struct fake_input {
    char name[16];
    enum dtype dtype;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    size_t nbytes;
    size_t ndata;                      /* bytes in data[] */
    unsigned char data[FAKE_DATA_MAX]; /* numeric: raw; BYTES: len byte + bytes per element */
};

struct fake_call {
    int instance;
    uint32_t nin, nout;
    struct fake_input in[FAKE_MAX_INPUTS];
};

static struct {
    struct fake_call calls[FAKE_MAX_CALLS];
    uint32_t ncalls;
    uint32_t successes;
    uint32_t releases;
    int fail_at; /* index of the call that fails, -1 for none */
} fake;

static int fake_ids[MAX_INSTANCES] = {0, 1, 2, 3};

static void fake_reset(void)
{
    memset(&fake, 0, sizeof fake);
    fake.fail_at = -1;
}

static int fake_load(const struct backend_load_args *args, void **instance, struct model_info *info,
                     struct error *err)
{
    (void)args, (void)instance, (void)info;
    return error_set(err, 500, "not used");
}

static void record_input(struct fake_input *r, const struct tensor *t)
{
    snprintf(r->name, sizeof r->name, "%s", t->name);
    r->dtype = t->dtype;
    r->ndim = t->ndim;
    memcpy(r->shape, t->shape, sizeof r->shape);
    r->nbytes = t->nbytes;
    if (t->dtype != DT_BYTES) {
        r->ndata = t->nbytes < FAKE_DATA_MAX ? t->nbytes : FAKE_DATA_MAX;
        memcpy(r->data, t->data, r->ndata);
        return;
    }
    const struct tensor_bytes *el = t->data;
    int64_t n = tensor_count(t, INT64_MAX);
    for (int64_t i = 0; i < n; i++) {
        assert_non_null(el[i].ptr);
        assert_true(el[i].len < 256);
        if (r->ndata + 1 + el[i].len > FAKE_DATA_MAX)
            break;
        r->data[r->ndata++] = (unsigned char)el[i].len;
        memcpy(r->data + r->ndata, el[i].ptr, el[i].len);
        r->ndata += el[i].len;
    }
}

static int fake_execute(void *instance, struct arena *arena, const struct tensor *inputs,
                        uint32_t nin, const char *const *output_names, uint32_t nout,
                        struct tensor *out, void **state, uint32_t flags, struct error *err)
{
    (void)flags;
    assert_true(fake.ncalls < FAKE_MAX_CALLS);
    assert_true(nin <= FAKE_MAX_INPUTS);
    struct fake_call *c = &fake.calls[fake.ncalls++];
    c->instance = *(int *)instance;
    c->nin = nin;
    c->nout = nout;
    for (uint32_t i = 0; i < nin; i++)
        record_input(&c->in[i], &inputs[i]);
    if (fake.fail_at == (int)fake.ncalls - 1)
        return error_set(err, 500, "model execution failed: fake");
    for (uint32_t i = 0; i < nout; i++) {
        float *y = arena_alloc(arena, sizeof *y);
        if (!y)
            return error_set(err, 500, "out of memory");
        *y = 1.0f;
        out[i] = (struct tensor){.name = output_names[i],
                                 .dtype = DT_FP32,
                                 .ndim = 1,
                                 .shape = {1},
                                 .data = y,
                                 .nbytes = sizeof *y};
    }
    /* A real allocation, so that LeakSanitizer sees a missing release(). */
    *state = malloc(16);
    assert_non_null(*state);
    fake.successes++;
    return 0;
}

static void fake_release(void *instance, void *state)
{
    (void)instance;
    fake.releases++;
    free(state);
}

static void fake_unload(void *instance)
{
    (void)instance;
}

static const struct backend_ops fake_backend = {
    .abi_version = BACKEND_ABI_VERSION,
    .name = "fake",
    .load = fake_load,
    .execute = fake_execute,
    .release = fake_release,
    .unload = fake_unload,
};

/* A model with four inputs of different kinds (all with a variable leading
 * dim, so it can be batched) and two outputs. */
static struct model_io fake_inputs[] = {
    {.name = "A", .dtype = DT_INT32, .ndim = 3, .dims = {-1, -1, 3}},
    {.name = "H", .dtype = DT_FP16, .ndim = 2, .dims = {-1, 2}},
    {.name = "S", .dtype = DT_BYTES, .ndim = 2, .dims = {-1, 2}},
    {.name = "B", .dtype = DT_BOOL, .ndim = 2, .dims = {-1, 4}},
};
static struct model_io fake_outputs[] = {
    {.name = "Y", .dtype = DT_FP32, .ndim = 2, .dims = {-1, 1}},
    {.name = "Z", .dtype = DT_FP32, .ndim = 2, .dims = {-1, 1}},
};

static void fake_model(struct model *m, uint32_t ninstances, const char *path, const char *cfg_text)
{
    memset(m, 0, sizeof *m);
    m->name = "fake";
    m->path = (char *)(path ? path : "/nonexistent/fake/1/model.onnx");
    snprintf(m->version_str, sizeof m->version_str, "1");
    m->backend = &fake_backend;
    m->instances = calloc(ninstances ? ninstances : 1, sizeof *m->instances);
    assert_non_null(m->instances);
    for (uint32_t i = 0; i < ninstances; i++)
        m->instances[i] = &fake_ids[i];
    m->ninstances = ninstances;
    m->info = (struct model_info){
        .ninputs = 4, .noutputs = 2, .inputs = fake_inputs, .outputs = fake_outputs};
    configure(m, cfg_text);
    m->batched = m->config.max_batch_size > 0;
    fake_reset();
}

static void fake_model_free(struct model *m)
{
    free(m->instances);
    model_config_free(&m->config); /* info is static */
}

static const struct fake_input *call_input(const struct fake_call *c, const char *name)
{
    for (uint32_t i = 0; i < c->nin; i++)
        if (!strcmp(c->in[i].name, name))
            return &c->in[i];
    fail_msg("input %s not given", name);
    return NULL;
}

static void assert_shape(const struct fake_input *in, uint32_t ndim, ...)
{
    va_list ap;
    assert_int_equal(in->ndim, ndim);
    va_start(ap, ndim);
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t want = va_arg(ap, int64_t);
        if (in->shape[d] != want)
            fail_msg("input %s dim %u is %lld, expected %lld", in->name, d, (long long)in->shape[d],
                     (long long)want);
    }
    va_end(ap);
}

static bool all_zero(const struct fake_input *in)
{
    for (size_t i = 0; i < in->ndata; i++)
        if (in->data[i])
            return false;
    return true;
}

/* Every call: all four inputs, both outputs, zero data of batch bs (0: no
 * batch dim) and the variable dim of A as 1. */
static void assert_default_call(const struct fake_call *c, int instance, int64_t bs)
{
    assert_int_equal(c->instance, instance);
    assert_int_equal(c->nin, 4);
    assert_int_equal(c->nout, 2);
    if (bs) {
        assert_shape(call_input(c, "A"), 3, bs, (int64_t)1, (int64_t)3);
        assert_shape(call_input(c, "H"), 2, bs, (int64_t)2);
        assert_shape(call_input(c, "S"), 2, bs, (int64_t)2);
        assert_shape(call_input(c, "B"), 2, bs, (int64_t)4);
    } else {
        assert_shape(call_input(c, "A"), 3, (int64_t)1, (int64_t)1, (int64_t)3);
        assert_shape(call_input(c, "S"), 2, (int64_t)1, (int64_t)2);
    }
    int64_t rows = bs ? bs : 1;
    assert_int_equal(call_input(c, "A")->nbytes, (size_t)rows * 3 * 4);
    assert_true(all_zero(call_input(c, "A")));
    assert_true(all_zero(call_input(c, "H")));
    assert_true(all_zero(call_input(c, "B")));
    /* BYTES zeros: empty strings (each recorded as a 0 length byte). */
    const struct fake_input *s = call_input(c, "S");
    assert_int_equal(s->nbytes, 0);
    assert_int_equal(s->ndata, (size_t)rows * 2);
    assert_true(all_zero(s));
}

static void test_fake_default_shapes(void **state)
{
    (void)state;
    struct model m;
    struct error err;
    error_clear(&err);

    /* Preferred sizes 2 and 4 (2 again is not run twice), two instances:
     * 2 executions per instance, instance by instance. */
    fake_model(&m, 2, NULL,
               "max_batch_size: 8 dynamic_batching { preferred_batch_size: [2, 4, 2] }");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 4);
    assert_int_equal(fake.releases, 4);
    assert_default_call(&fake.calls[0], 0, 2);
    assert_default_call(&fake.calls[1], 1, 2);
    assert_default_call(&fake.calls[2], 0, 4);
    assert_default_call(&fake.calls[3], 1, 4);
    fake_model_free(&m);

    /* Batching without a dynamic batcher: batch 1. */
    fake_model(&m, 3, NULL, "max_batch_size: 8");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 3);
    for (int i = 0; i < 3; i++)
        assert_default_call(&fake.calls[i], i, 1);
    fake_model_free(&m);

    /* A dynamic batcher without preferred sizes prefers max_batch_size. */
    fake_model(&m, 1, NULL, "max_batch_size: 8 dynamic_batching { }");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 1);
    assert_default_call(&fake.calls[0], 0, 8);
    fake_model_free(&m);

    /* No config.pbtxt: batched, with a dynamic batcher that (after
     * model_config_check) prefers MODEL_CONFIG_DEFAULT_MAX_BATCH. */
    fake_model(&m, 1, NULL, NULL);
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 1);
    assert_default_call(&fake.calls[0], 0, MODEL_CONFIG_DEFAULT_MAX_BATCH);
    fake_model_free(&m);

    /* No batch dim: the model's own dims, variable ones as 1. */
    fake_model(&m, 2, NULL, "max_batch_size: 0");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 2);
    assert_default_call(&fake.calls[0], 0, 0);
    assert_default_call(&fake.calls[1], 1, 0);
    fake_model_free(&m);

    /* Fixed dims in the config win over the ONNX -1. */
    fake_model(&m, 1, NULL,
               "max_batch_size: 2 input { name: 'A' data_type: TYPE_INT32 dims: [5, 3] }");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 1);
    assert_shape(call_input(&fake.calls[0], "A"), 3, (int64_t)1, (int64_t)5, (int64_t)3);
    fake_model_free(&m);
}

static const char fake_entries_pbtxt[] =
    "max_batch_size: 8\n"
    "model_warmup [\n"
    "  { name: 'random' batch_size: 2 count: 3\n"
    "    inputs { key: 'A' value { data_type: TYPE_INT32 dims: [4, 3] random_data: true } }\n"
    "    inputs { key: 'H' value { data_type: TYPE_FP16 dims: [2] random_data: true } }\n"
    "    inputs { key: 'S' value { data_type: TYPE_STRING dims: [2] random_data: true } }\n"
    "    inputs { key: 'B' value { data_type: TYPE_BOOL dims: [4] random_data: true } } },\n"
    "  { name: 'zeros' batch_size: 5\n"
    "    inputs { key: 'A' value { data_type: TYPE_INT32 dims: [1, 3] zero_data: true } }\n"
    "    inputs { key: 'H' value { data_type: TYPE_FP16 dims: [2] zero_data: true } }\n"
    "    inputs { key: 'S' value { data_type: TYPE_STRING dims: [2] zero_data: true } }\n"
    "    inputs { key: 'B' value { data_type: TYPE_BOOL dims: [4] zero_data: true } } }\n"
    "]\n";

static void check_random_call(const struct fake_call *c)
{
    const struct fake_input *a = call_input(c, "A");
    assert_shape(a, 3, (int64_t)2, (int64_t)4, (int64_t)3);
    assert_int_equal(a->ndata, 2 * 4 * 3 * 4);
    bool nonzero = false;
    for (size_t i = 0; i < a->ndata / 4; i++) {
        int32_t v;
        memcpy(&v, a->data + 4 * i, 4);
        assert_true(v >= 0 && v < 128);
        nonzero |= v != 0;
    }
    assert_true(nonzero);
    const struct fake_input *h = call_input(c, "H");
    assert_shape(h, 2, (int64_t)2, (int64_t)2);
    for (size_t i = 0; i < h->ndata / 2; i++) {
        uint16_t v;
        memcpy(&v, h->data + 2 * i, 2);
        float f = fp16_to_float(v);
        assert_true(f >= 0.0f && f < 1.0f);
    }
    const struct fake_input *b = call_input(c, "B");
    for (size_t i = 0; i < b->ndata; i++)
        assert_true(b->data[i] <= 1);
    const struct fake_input *s = call_input(c, "S");
    size_t off = 0, total = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t len = s->data[off++];
        assert_true(len >= 1 && len <= 8);
        for (uint8_t k = 0; k < len; k++)
            assert_true(s->data[off + k] > ' ' && s->data[off + k] <= '~');
        off += len;
        total += len;
    }
    assert_int_equal(off, s->ndata);
    assert_int_equal(s->nbytes, total);
}

static void test_fake_entries(void **state)
{
    (void)state;
    struct model m;
    struct error err;
    error_clear(&err);
    fake_model(&m, 2, NULL, fake_entries_pbtxt);
    uint64_t us = 0;
    assert_int_equal(model_warmup(&m, &us, &err), 0);
    /* 'random' 3 times on instance 0, 3 times on instance 1; 'zeros' (count
     * 0: once) on each. */
    assert_int_equal(fake.ncalls, 8);
    assert_int_equal(fake.releases, 8);
    static const int instances[8] = {0, 0, 0, 1, 1, 1, 0, 1};
    for (int i = 0; i < 8; i++)
        assert_int_equal(fake.calls[i].instance, instances[i]);
    for (int i = 0; i < 6; i++) {
        check_random_call(&fake.calls[i]);
        /* The same sample every time. */
        for (uint32_t k = 0; k < 4; k++)
            assert_memory_equal(fake.calls[i].in[k].data, fake.calls[0].in[k].data,
                                fake.calls[0].in[k].ndata);
    }
    for (int i = 6; i < 8; i++)
        assert_default_call(&fake.calls[i], instances[i], 5);
    /* Deterministic across loads: a second warm-up gives the same bytes. */
    struct fake_call first;
    memcpy(&first, &fake.calls[0], sizeof first);
    fake_reset();
    assert_int_equal(model_warmup(&m, &us, &err), 0);
    for (uint32_t k = 0; k < 4; k++) {
        assert_int_equal(fake.calls[0].in[k].ndata, first.in[k].ndata);
        assert_memory_equal(fake.calls[0].in[k].data, first.in[k].data, first.in[k].ndata);
    }
    fake_model_free(&m);
}

static void test_fake_files_per_row(void **state)
{
    (void)state;
    struct tmp_repo r;
    struct model m;
    struct error err;
    error_clear(&err);
    tmp_repo_make(&r, "fake");
    int32_t a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[2] = {fp16_from_float(0.5f), fp16_from_float(-2.0f)};
    uint8_t b[4] = {1, 0, 0, 1};
    const char *const words[] = {"ab", "cde"};
    char s[32];
    size_t ns = bytes_file(s, words, 2);
    tmp_file(&r, "a.bin", a, sizeof a);
    tmp_file(&r, "h.bin", h, sizeof h);
    tmp_file(&r, "b.bin", b, sizeof b);
    tmp_file(&r, "s.bin", s, ns);
    fake_model(&m, 1, r.model_path,
               "max_batch_size: 4\n"
               "model_warmup { name: 'files' batch_size: 3\n"
               "  inputs { key: 'A' value { data_type: TYPE_INT32 dims: [2, 3] "
               "input_data_file: 'a.bin' } }\n"
               "  inputs { key: 'H' value { data_type: TYPE_FP16 dims: [2] "
               "input_data_file: 'h.bin' } }\n"
               "  inputs { key: 'S' value { data_type: TYPE_STRING dims: [2] "
               "input_data_file: 's.bin' } }\n"
               "  inputs { key: 'B' value { data_type: TYPE_BOOL dims: [4] "
               "input_data_file: 'b.bin' } } }\n");
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 1);
    const struct fake_call *c = &fake.calls[0];
    /* The file is one sample, repeated for each of the 3 batch rows. */
    const struct fake_input *in = call_input(c, "A");
    assert_shape(in, 3, (int64_t)3, (int64_t)2, (int64_t)3);
    assert_int_equal(in->ndata, 3 * sizeof a);
    for (int row = 0; row < 3; row++)
        assert_memory_equal(in->data + row * sizeof a, a, sizeof a);
    in = call_input(c, "H");
    assert_int_equal(in->ndata, 3 * sizeof h);
    for (int row = 0; row < 3; row++)
        assert_memory_equal(in->data + row * sizeof h, h, sizeof h);
    in = call_input(c, "B");
    for (int row = 0; row < 3; row++)
        assert_memory_equal(in->data + row * sizeof b, b, sizeof b);
    in = call_input(c, "S");
    assert_shape(in, 2, (int64_t)3, (int64_t)2);
    assert_int_equal(in->nbytes, 3 * 5);
    assert_memory_equal(in->data, "\2ab\3cde\2ab\3cde\2ab\3cde", 18);

    /* Fixed-size file for a whole batch instead of one sample. */
    int32_t a3[18] = {0};
    tmp_file(&r, "a.bin", a3, sizeof a3);
    fake_reset();
    assert_int_equal(model_warmup(&m, NULL, &err), -1);
    assert_int_equal(err.status, 500);
    assert_non_null(strstr(err.msg, "warm-up 'files' failed: input 'A': "));
    assert_non_null(strstr(err.msg, "a.bin' holds 72 bytes, expected 24 (INT32 [2,3])"));
    assert_int_equal(fake.ncalls, 0);
    fake_model_free(&m);
    tmp_repo_remove(&r, "fake");
}

static void test_fake_execute_failure(void **state)
{
    (void)state;
    struct model m;
    struct error err;
    error_clear(&err);
    fake_model(&m, 2, NULL, fake_entries_pbtxt);
    fake.fail_at = 4; /* 'random' on instance 1, second time */
    assert_int_equal(model_warmup(&m, NULL, &err), -1);
    assert_int_equal(err.status, 500);
    assert_string_equal(err.msg,
                        "warm-up 'random' failed: instance 1: model execution failed: fake");
    assert_int_equal(fake.ncalls, 5); /* the first failure stops it */
    assert_int_equal(fake.releases, 4);
    fake_model_free(&m);

    fake_model(&m, 2, NULL, "max_batch_size: 8 dynamic_batching { preferred_batch_size: [4] }");
    fake.fail_at = 0;
    assert_int_equal(model_warmup(&m, NULL, &err), -1);
    assert_string_equal(err.msg,
                        "warm-up 'default_batch_4' failed: instance 0: model execution failed: "
                        "fake");
    fake_model_free(&m);

    fake_model(&m, 1, NULL, "max_batch_size: 0");
    fake.fail_at = 0;
    assert_int_equal(model_warmup(&m, NULL, &err), -1);
    assert_string_equal(err.msg, "warm-up 'default' failed: instance 0: model execution failed: "
                                 "fake");
    fake_model_free(&m);

    /* No instances: nothing to run. */
    fake_model(&m, 0, NULL, fake_entries_pbtxt);
    assert_int_equal(model_warmup(&m, NULL, &err), 0);
    assert_int_equal(fake.ncalls, 0);
    fake_model_free(&m);
}

/* Failing each allocation in turn: an error, never a leak or a crash (the
 * sanitizer build checks the leaks). */
static void test_fake_out_of_memory(void **state)
{
    (void)state;
    struct tmp_repo r;
    struct model m;
    tmp_repo_make(&r, "fake");
    uint8_t b[4] = {1, 0, 0, 1};
    const char *const words[] = {"ab", "cde"};
    char s[32];
    size_t ns = bytes_file(s, words, 2);
    tmp_file(&r, "b.bin", b, sizeof b);
    tmp_file(&r, "s.bin", s, ns);
    fake_model(&m, 2, r.model_path,
               "max_batch_size: 4\n"
               "model_warmup { name: 'mixed' batch_size: 2 count: 2\n"
               "  inputs { key: 'A' value { data_type: TYPE_INT32 dims: [2, 3] "
               "random_data: true } }\n"
               "  inputs { key: 'H' value { data_type: TYPE_FP16 dims: [2] zero_data: true } }\n"
               "  inputs { key: 'S' value { data_type: TYPE_STRING dims: [2] "
               "input_data_file: 's.bin' } }\n"
               "  inputs { key: 'B' value { data_type: TYPE_BOOL dims: [4] "
               "input_data_file: 'b.bin' } } }\n");
    int failures = 0;
    for (long n = 0; n < 100; n++) {
        struct error err;
        error_clear(&err);
        fake_reset();
        mem_fail_after(n);
        int rc = model_warmup(&m, NULL, &err);
        mem_fail_reset();
        if (rc == 0) {
            assert_int_equal(fake.ncalls, 4);
            break;
        }
        failures++;
        assert_int_equal(err.status, 500);
        assert_non_null(strstr(err.msg, "warm-up 'mixed' failed: "));
        assert_int_equal(fake.releases, fake.successes);
    }
    assert_true(failures > 0);
    fake_model_free(&m);
    tmp_repo_remove(&r, "fake");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_default),        cmocka_unit_test(test_real_zero_random),
        cmocka_unit_test(test_real_file),           cmocka_unit_test(test_real_input_errors),
        cmocka_unit_test(test_fake_default_shapes), cmocka_unit_test(test_fake_entries),
        cmocka_unit_test(test_fake_files_per_row),  cmocka_unit_test(test_fake_execute_failure),
        cmocka_unit_test(test_fake_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
