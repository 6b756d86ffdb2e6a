/*
 * The ONNX Runtime backend against the real models of models/ and the
 * identity models of tests/models/, plus small models written byte by byte
 * here for the load errors no shipped model can show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/onnxruntime.h"
#include "base/arena.h"
#include "base/mem.h"

/* The sanitizer build of this test brings its own leak settings: the slow
 * unwinder, so that a stack through ORT (built without frame pointers) is
 * whole, and a suppression that names our caller of ORT's one leak inside
 * CreateEnv. Here, not in the integration suite (whose tests/lsan.supp must
 * name the whole library to use the fast unwinder), an ORT object that
 * src/backend/onnxruntime.c forgets to release is reported. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0:malloc_context_size=64";
}

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:ort_init_once\n";
}

#define ARENA_CHUNK 4096
#define ARENA_MAX (1u << 20)

struct model {
    void *inst;
    struct model_info info;
};

static void source_path(char *out, size_t size, const char *rel)
{
    const char *root = getenv("INFERD_SOURCE_DIR");
    snprintf(out, size, "%s/%s", root ? root : ".", rel);
}

static void load_model(const char *rel, struct model *m)
{
    char path[PATH_MAX];
    struct backend_load_args args = {.path = path};
    struct error err = {0};

    source_path(path, sizeof path, rel);
    if (backend_onnxruntime.load(&args, &m->inst, &m->info, &err))
        fail_msg("loading %s: %s", path, err.msg);
}

static void unload_model(struct model *m)
{
    backend_onnxruntime.unload(m->inst);
    model_info_free(&m->info);
}

static struct tensor make_tensor(const char *name, enum dtype dtype, uint32_t ndim,
                                 const int64_t *shape, void *data, size_t nbytes)
{
    struct tensor t = {.name = name, .dtype = dtype, .ndim = ndim, .data = data, .nbytes = nbytes};
    memcpy(t.shape, shape, ndim * sizeof shape[0]);
    return t;
}

static int execute(struct model *m, struct arena *arena, const struct tensor *in, uint32_t nin,
                   const char *const *outs, uint32_t nout, struct tensor *out, void **state,
                   struct error *err)
{
    error_clear(err);
    return backend_onnxruntime.execute(m->inst, arena, in, nin, outs, nout, out, state, 0, err);
}

/* ---- simple: INPUT0, INPUT1 INT32 [batch,16] -> sum, difference ---- */

static int setup_simple(void **state)
{
    struct model *m = calloc(1, sizeof *m);
    load_model("models/simple/1/model.onnx", m);
    *state = m;
    return 0;
}

static int teardown_model(void **state)
{
    unload_model(*state);
    free(*state);
    return 0;
}

static void fill_simple(int32_t *a, int32_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a[i] = (int32_t)(i * 7) - 100;
        b[i] = (int32_t)(i * i % 97) - 50;
    }
}

static void test_simple_info(void **state)
{
    struct model *m = *state;
    const char *names[] = {"INPUT0", "INPUT1"};
    const char *out_names[] = {"OUTPUT0", "OUTPUT1"};

    assert_int_equal(m->info.ninputs, 2);
    assert_int_equal(m->info.noutputs, 2);
    for (int i = 0; i < 2; i++) {
        const struct model_io *ios[] = {&m->info.inputs[i], &m->info.outputs[i]};
        assert_string_equal(ios[0]->name, names[i]);
        assert_string_equal(ios[1]->name, out_names[i]);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ios[k]->dtype, DT_INT32);
            assert_int_equal(ios[k]->ndim, 2);
            assert_int_equal(ios[k]->dims[0], -1);
            assert_int_equal(ios[k]->dims[1], 16);
        }
    }
}

static void check_simple_batch(struct model *m, int64_t batch)
{
    int32_t a[3 * 16], b[3 * 16];
    int64_t shape[] = {batch, 16};
    size_t n = (size_t)batch * 16;
    struct arena arena;
    const char *outs[] = {"OUTPUT0", "OUTPUT1"};
    struct tensor out[2];
    void *st = NULL;
    struct error err;

    fill_simple(a, b, n);
    /* Inputs in the other order than the model's: matched by name. */
    struct tensor in[] = {
        make_tensor("INPUT1", DT_INT32, 2, shape, b, n * sizeof b[0]),
        make_tensor("INPUT0", DT_INT32, 2, shape, a, n * sizeof a[0]),
    };
    arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
    assert_int_equal(execute(m, &arena, in, 2, outs, 2, out, &st, &err), 0);
    for (int k = 0; k < 2; k++) {
        assert_ptr_equal(out[k].name, outs[k]);
        assert_int_equal(out[k].dtype, DT_INT32);
        assert_int_equal(out[k].ndim, 2);
        assert_int_equal(out[k].shape[0], batch);
        assert_int_equal(out[k].shape[1], 16);
        assert_int_equal(out[k].nbytes, n * sizeof(int32_t));
    }
    const int32_t *sum = out[0].data, *diff = out[1].data;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sum[i], a[i] + b[i]);
        assert_int_equal(diff[i], a[i] - b[i]);
    }
    backend_onnxruntime.release(m->inst, st);
    arena_free(&arena);
}

static void test_simple_batch1(void **state)
{
    check_simple_batch(*state, 1);
}

static void test_simple_batch3(void **state)
{
    check_simple_batch(*state, 3);
}

/* Outputs whose shape the backend can tell before the run (enum out_plan)
 * are not ORT's: simple's OUTPUT0/1 are declared [-1, 16]; the first run
 * shows the -1 is the batch. Later runs write into the instance's staged
 * values (struct ort_staged: the arena is not used), or, while a state
 * still holds those, into the arena; a held state's outputs are never
 * overwritten by a later run; staged inputs take each run's data. */
static void run_simple(struct model *m, struct arena *arena, int64_t batch, int32_t bias,
                       struct tensor *out, void **st)
{
    static int32_t a[3 * 16], b[3 * 16];
    const char *outs[] = {"OUTPUT0", "OUTPUT1"};
    int64_t shape[] = {batch, 16};
    size_t n = (size_t)batch * 16;
    struct error err;
    fill_simple(a, b, 3 * 16);
    for (size_t i = 0; i < n; i++)
        a[i] += bias;
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, n * sizeof a[0]),
        make_tensor("INPUT1", DT_INT32, 2, shape, b, n * sizeof b[0]),
    };
    assert_int_equal(execute(m, arena, in, 2, outs, 2, out, st, &err), 0);
    for (int k = 0; k < 2; k++)
        assert_int_equal(out[k].shape[0], batch);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(((const int32_t *)out[0].data)[i], a[i] + b[i]);
        assert_int_equal(((const int32_t *)out[1].data)[i], a[i] - b[i]);
    }
}

static void test_outputs_preallocated(void **state)
{
    struct model *m = *state;
    struct tensor out[2], held[2];
    void *st, *held_st;
    struct arena arena;
    arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
    size_t used = arena.used, n = 3 * 16;

    run_simple(m, &arena, 2, 0, out, &st); /* not known yet: ORT's memory */
    assert_int_equal(arena.used, used);
    backend_onnxruntime.release(m->inst, st);

    run_simple(m, &arena, 3, 0, held, &held_st); /* staged */
    assert_int_equal(arena.used, used);
    for (int k = 0; k < 2; k++)
        assert_int_equal((uintptr_t)held[k].data % 64, 0);

    run_simple(m, &arena, 3, 1000, out, &st); /* the staged values are held: the arena */
    assert_true(arena.used - used >= 2 * n * sizeof(int32_t));
    for (int k = 0; k < 2; k++)
        assert_int_equal((uintptr_t)out[k].data % 64, 0);
    /* fill_simple: a[0] + b[0] = -100 + -50, unchanged by the later run */
    assert_int_equal(((const int32_t *)held[0].data)[0], -150);
    assert_int_equal(((const int32_t *)out[0].data)[0], 1000 - 150);
    backend_onnxruntime.release(m->inst, st);
    backend_onnxruntime.release(m->inst, held_st);

    used = arena.used;
    run_simple(m, &arena, 3, 2000, out, &st); /* released: staged again */
    assert_int_equal(arena.used, used);
    assert_ptr_equal(out[0].data, held[0].data);
    backend_onnxruntime.release(m->inst, st);
    arena_free(&arena);
}

/* first3: Y = X[0:3], declared [-1, 4]. Batches 2 and 3 make the backend
 * take Y's first dimension for the batch; a batch of 5 proves it wrong:
 * the run still succeeds (once more with ORT's memory) with 3 rows, and
 * the backend no longer preallocates. Each run's state is held until the
 * next run is done, so the batch of 5, whose staged output the batch of 3
 * holds, is planned in the arena. */
static void test_a_first_dimension_that_is_not_the_batch(void **state)
{
    struct model *m = *state;
    int32_t x[5 * 4];
    const char *outs[] = {"Y"};
    struct tensor out[1];
    void *st = NULL;
    struct error err;
    struct arena arena;

    for (int i = 0; i < 5 * 4; i++)
        x[i] = 100 + i;
    arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
    const int64_t batches[] = {2, 3, 5, 2};
    for (size_t r = 0; r < sizeof batches / sizeof batches[0]; r++) {
        int64_t shape[] = {batches[r], 4};
        struct tensor in[] = {make_tensor("X", DT_INT32, 2, shape, x,
                                          (size_t)batches[r] * 4 * sizeof x[0])};
        size_t used = arena.used;
        void *prev = st;
        assert_int_equal(execute(m, &arena, in, 1, outs, 1, out, &st, &err), 0);
        int64_t rows = batches[r] < 3 ? batches[r] : 3;
        assert_int_equal(out[0].shape[0], rows);
        assert_int_equal(out[0].shape[1], 4);
        for (int i = 0; i < rows * 4; i++)
            assert_int_equal(((const int32_t *)out[0].data)[i], 100 + i);
        if (r == 2) /* learnt from the first run: planned (in the arena), then wrong */
            assert_true(arena.used > used);
        if (r == 3) /* after the batch of 5: ORT's memory again */
            assert_int_equal(arena.used, used);
        if (r > 0)
            backend_onnxruntime.release(m->inst, prev);
    }
    backend_onnxruntime.release(m->inst, st);
    arena_free(&arena);
}

static int setup_first3(void **state)
{
    struct model *m = calloc(1, sizeof *m);
    load_model("tests/models/first3/1/model.onnx", m);
    *state = m;
    return 0;
}

static void test_simple_one_output(void **state)
{
    struct model *m = *state;
    int32_t a[16], b[16];
    int64_t shape[] = {1, 16};
    const char *only1[] = {"OUTPUT1"};
    const char *reversed[] = {"OUTPUT1", "OUTPUT0"};
    struct tensor out[2];
    void *st;
    struct error err;

    fill_simple(a, b, 16);
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT1", DT_INT32, 2, shape, b, sizeof b),
    };
    assert_int_equal(execute(m, NULL, in, 2, only1, 1, out, &st, &err), 0);
    assert_string_equal(out[0].name, "OUTPUT1");
    for (int i = 0; i < 16; i++)
        assert_int_equal(((const int32_t *)out[0].data)[i], a[i] - b[i]);
    backend_onnxruntime.release(m->inst, st);

    assert_int_equal(execute(m, NULL, in, 2, reversed, 2, out, &st, &err), 0);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(((const int32_t *)out[0].data)[i], a[i] - b[i]);
        assert_int_equal(((const int32_t *)out[1].data)[i], a[i] + b[i]);
    }
    backend_onnxruntime.release(m->inst, st);
}

static void test_simple_empty_batch(void **state)
{
    struct model *m = *state;
    int64_t shape[] = {0, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor out[1];
    void *st;
    struct error err;
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, NULL, 0),
        make_tensor("INPUT1", DT_INT32, 2, shape, NULL, 0),
    };

    assert_int_equal(execute(m, NULL, in, 2, outs, 1, out, &st, &err), 0);
    assert_int_equal(out[0].ndim, 2);
    assert_int_equal(out[0].shape[0], 0);
    assert_int_equal(out[0].nbytes, 0);
    backend_onnxruntime.release(m->inst, st);
}

/* Runs simple with the given inputs and expects a 400 whose message holds
 * `needle`. */
static void expect_simple_error(struct model *m, const struct tensor *in, uint32_t nin,
                                const char *const *outs, uint32_t nout, int status,
                                const char *needle)
{
    struct tensor out[2];
    void *st = NULL;
    struct error err;

    assert_int_equal(execute(m, NULL, in, nin, outs, nout, out, &st, &err), -1);
    if (err.status != status || !strstr(err.msg, needle))
        fail_msg("expected %d with '%s', got %d '%s'", status, needle, err.status, err.msg);
    assert_null(st);
}

static void test_error_missing_input(void **state)
{
    int32_t a[16] = {0};
    int64_t shape[] = {1, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor in[] = {make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a)};
    expect_simple_error(*state, in, 1, outs, 1, 400, "missing input 'INPUT1'");
}

static void test_error_unknown_input(void **state)
{
    int32_t a[16] = {0};
    int64_t shape[] = {1, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT1", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT2", DT_INT32, 2, shape, a, sizeof a),
    };
    expect_simple_error(*state, in, 3, outs, 1, 400, "unknown input 'INPUT2'");
}

static void test_error_duplicate_input(void **state)
{
    int32_t a[16] = {0};
    int64_t shape[] = {1, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
    };
    expect_simple_error(*state, in, 2, outs, 1, 400, "'INPUT0' given more than once");
}

static void test_error_wrong_dtype(void **state)
{
    int32_t a[16] = {0};
    float f[16] = {0};
    int64_t shape[] = {1, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT1", DT_FP32, 2, shape, f, sizeof f),
    };
    expect_simple_error(*state, in, 2, outs, 1, 400,
                        "input 'INPUT1' has datatype FP32, the model expects INT32");
}

static void test_error_unknown_output(void **state)
{
    int32_t a[16] = {0};
    int64_t shape[] = {1, 16};
    const char *unknown[] = {"OUTPUT0", "OUTPUT9"};
    const char *twice[] = {"OUTPUT1", "OUTPUT1"};
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
        make_tensor("INPUT1", DT_INT32, 2, shape, a, sizeof a),
    };
    expect_simple_error(*state, in, 2, unknown, 2, 400, "unknown output 'OUTPUT9'");
    expect_simple_error(*state, in, 2, twice, 2, 400, "'OUTPUT1' requested more than once");
}

static void test_error_wrong_shape(void **state)
{
    int32_t a[16] = {0};
    int64_t shape15[] = {1, 15}, shape16[] = {1, 16}, rank1[] = {16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor wrong_dim[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape15, a, 15 * sizeof a[0]),
        make_tensor("INPUT1", DT_INT32, 2, shape16, a, sizeof a),
    };
    struct tensor wrong_rank[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape16, a, sizeof a),
        make_tensor("INPUT1", DT_INT32, 1, rank1, a, sizeof a),
    };
    struct tensor wrong_size[] = {
        make_tensor("INPUT0", DT_INT32, 2, shape16, a, sizeof a - 4),
        make_tensor("INPUT1", DT_INT32, 2, shape16, a, sizeof a),
    };
    /* The first two are ORT's own checks; its text goes to the client. */
    expect_simple_error(*state, wrong_dim, 2, outs, 1, 400, "invalid dimensions for input: INPUT0");
    expect_simple_error(*state, wrong_rank, 2, outs, 1, 400, "Invalid rank for input: INPUT1");
    expect_simple_error(*state, wrong_size, 2, outs, 1, 400,
                        "input 'INPUT0' has 60 bytes of data, shape [1,16] of INT32 needs 64");
}

static void test_error_batch_mismatch(void **state)
{
    int32_t a[3 * 16] = {0};
    int64_t two[] = {2, 16}, three[] = {3, 16};
    const char *outs[] = {"OUTPUT0"};
    struct tensor in[] = {
        make_tensor("INPUT0", DT_INT32, 2, two, a, 2 * 16 * sizeof a[0]),
        make_tensor("INPUT1", DT_INT32, 2, three, a, sizeof a),
    };
    /* Both match [batch,16]; the Add kernel fails, which ORT reports as a
     * runtime failure rather than an invalid argument. */
    expect_simple_error(*state, in, 2, outs, 1, 500, "model execution failed: ");
}

/* ---- strings: TEXT BYTES [batch] -> UPPER, ECHO ---- */

static int setup_strings(void **state)
{
    struct model *m = calloc(1, sizeof *m);
    load_model("models/strings/1/model.onnx", m);
    *state = m;
    return 0;
}

static void test_strings(void **state)
{
    struct model *m = *state;
    /* clang-format off */
    static const struct tensor_bytes text[] = {
        {"hello", 5},
        {"", 0},
        {"a\0b", 3},
        {"caf\xc3\xa9 \xe2\x82\xac", 9}, /* "café €" */
        {"MiXeD 123", 9},
        {"\0", 1},
    };
    /* clang-format on */
    static const char *const upper[] = {"HELLO", "", "A\0B", NULL, "MIXED 123", "\0"};
    int64_t shape[] = {6};
    const char *outs[] = {"ECHO", "UPPER"};
    struct tensor out[2];
    struct arena arena;
    void *st;
    struct error err;
    size_t total = 0;

    for (size_t i = 0; i < 6; i++)
        total += text[i].len;
    struct tensor in[] = {make_tensor("TEXT", DT_BYTES, 1, shape, (void *)text, total)};
    arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
    if (execute(m, &arena, in, 1, outs, 2, out, &st, &err))
        fail_msg("%d %s", err.status, err.msg);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(out[k].dtype, DT_BYTES);
        assert_int_equal(out[k].ndim, 1);
        assert_int_equal(out[k].shape[0], 6);
    }
    const struct tensor_bytes *echo = out[0].data, *up = out[1].data;
    assert_int_equal(out[0].nbytes, total);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(echo[i].len, text[i].len);
        assert_memory_equal(echo[i].ptr, text[i].ptr, text[i].len);
        if (upper[i]) {
            assert_int_equal(up[i].len, text[i].len);
            assert_memory_equal(up[i].ptr, upper[i], text[i].len);
        }
    }
    /* Whatever the locale does with the é, the ASCII part is upper-cased. */
    assert_true(up[3].len >= 7);
    assert_memory_equal(up[3].ptr, "CAF", 3);
    backend_onnxruntime.release(m->inst, st);
    arena_free(&arena);
}

static void test_strings_arena_ceiling(void **state)
{
    struct model *m = *state;
    static const struct tensor_bytes text[] = {{"0123456789abcdef0123456789abcdef", 32}};
    int64_t shape[] = {1};
    const char *outs[] = {"ECHO"};
    struct tensor out[1];
    struct arena arena;
    void *st = NULL;
    struct error err;
    struct tensor in[] = {make_tensor("TEXT", DT_BYTES, 1, shape, (void *)text, 32)};

    arena_init(&arena, 16, 16);
    assert_int_equal(execute(m, &arena, in, 1, outs, 1, out, &st, &err), -1);
    assert_int_equal(err.status, 500);
    assert_string_equal(err.msg, "out of memory for output 'ECHO'");
    assert_null(st);
    arena_free(&arena);
}

/* ---- digits: pixels FP32 [batch,64] -> probabilities [batch,10], label ---- */

/* models/digits/sample.json: a held-out "2", 8x8 pixels 0..16. */
/* clang-format off */
static const float digit_two[64] = {
     0,  0,  7, 16, 14,  3,  0,  0,
     0,  0,  9, 14, 11, 15,  0,  0,
     0,  0,  1,  5,  0, 15,  5,  0,
     0,  0,  0,  0,  0, 16,  5,  0,
     0,  0,  0,  0,  3, 16,  4,  0,
     0,  0,  0,  1, 12, 14,  1,  0,
     0,  0,  5, 12, 16, 16, 14,  1,
     0,  0,  8, 16, 14, 10, 13,  3,
};
/* clang-format on */

static int setup_digits(void **state)
{
    struct model *m = calloc(1, sizeof *m);
    load_model("models/digits/1/model.onnx", m);
    *state = m;
    return 0;
}

static void test_digits(void **state)
{
    struct model *m = *state;
    enum { BATCH = 64 };
    static float pixels[BATCH * 64];
    const char *outs[] = {"probabilities", "label"};
    struct tensor out[2];
    void *st;
    struct error err;

    /* Row 0 is the sample; the others are shifted, scaled variants. */
    for (int r = 0; r < BATCH; r++)
        for (int p = 0; p < 64; p++)
            pixels[r * 64 + p] = r == 0 ? digit_two[p] : fmodf(digit_two[(p + r) % 64] * r, 17);
    for (int64_t batch = 1; batch <= BATCH; batch += BATCH - 1) {
        int64_t shape[] = {batch, 64};
        struct tensor in[] = {
            make_tensor("pixels", DT_FP32, 2, shape, pixels, (size_t)batch * 64 * sizeof(float))};
        assert_int_equal(execute(m, NULL, in, 1, outs, 2, out, &st, &err), 0);
        assert_int_equal(out[0].dtype, DT_FP32);
        assert_int_equal(out[0].shape[0], batch);
        assert_int_equal(out[0].shape[1], 10);
        assert_int_equal(out[1].dtype, DT_INT64);
        assert_int_equal(out[1].ndim, 1);
        assert_int_equal(out[1].shape[0], batch);
        assert_int_equal(out[1].nbytes, (size_t)batch * 8);
        const float *prob = out[0].data;
        const int64_t *label = out[1].data;
        for (int64_t r = 0; r < batch; r++) {
            const float *row = prob + r * 10;
            double sum = 0;
            int best = 0;
            for (int c = 0; c < 10; c++) {
                sum += row[c];
                if (row[c] > row[best])
                    best = c;
            }
            assert_float_equal(sum, 1.0, 1e-5);
            assert_int_equal(label[r], best);
        }
        assert_int_equal(label[0], 2);
        backend_onnxruntime.release(m->inst, st);
    }
}

/* ---- identity_<type>: INPUT0 [batch,n] -> OUTPUT0, bit for bit ---- */

struct identity_case {
    const char *model;
    enum dtype dtype;
    const void *data; /* 6 elements */
    size_t nbytes;
};

static const uint8_t id_bool[] = {0, 1, 1, 0, 1, 0};
static const uint8_t id_uint8[] = {0, 1, 127, 128, 254, 255};
static const uint16_t id_uint16[] = {0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff};
static const uint32_t id_uint32[] = {0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
static const uint64_t id_uint64[] = {
    0, 1, INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX - 1, UINT64_MAX};
static const int8_t id_int8[] = {INT8_MIN, -1, 0, 1, 42, INT8_MAX};
static const int16_t id_int16[] = {INT16_MIN, -1, 0, 1, 4242, INT16_MAX};
static const int32_t id_int32[] = {INT32_MIN, -1, 0, 1, 424242, INT32_MAX};
static const int64_t id_int64[] = {INT64_MIN, -1, 0, 1, 42424242424242, INT64_MAX};
/* -0, smallest and largest subnormal, 1.0, largest finite, -2.0 */
static const uint16_t id_fp16[] = {0x8000, 0x0001, 0x03ff, 0x3c00, 0x7bff, 0xc000};
static const float id_fp32[] = {-0.0f, FLT_TRUE_MIN, 1e-40f, 1.0f, FLT_MAX, -3.25f};
static const double id_fp64[] = {-0.0, DBL_TRUE_MIN, 1e-310, 1.0, DBL_MAX, -3.25};
static const struct tensor_bytes id_bytes[] = {
    {"", 0}, {"a", 1}, {"\0b", 2}, {"h\xc3\xa9llo", 6}, {"x\0\0y", 4}, {"\xff\xfe", 2},
};

/* clang-format off */
#define ID_CASE(dir, dt, arr) {"tests/models/" dir "/1/model.onnx", dt, arr, sizeof arr}
/* clang-format on */
static const struct identity_case identity_cases[] = {
    ID_CASE("identity_bool", DT_BOOL, id_bool),
    ID_CASE("identity_uint8", DT_UINT8, id_uint8),
    ID_CASE("identity_uint16", DT_UINT16, id_uint16),
    ID_CASE("identity_uint32", DT_UINT32, id_uint32),
    ID_CASE("identity_uint64", DT_UINT64, id_uint64),
    ID_CASE("identity_int8", DT_INT8, id_int8),
    ID_CASE("identity_int16", DT_INT16, id_int16),
    ID_CASE("identity_int32", DT_INT32, id_int32),
    ID_CASE("identity_int64", DT_INT64, id_int64),
    ID_CASE("identity_fp16", DT_FP16, id_fp16),
    ID_CASE("identity_fp32", DT_FP32, id_fp32),
    ID_CASE("identity_fp64", DT_FP64, id_fp64),
    {"tests/models/identity_bytes/1/model.onnx", DT_BYTES, id_bytes, 15},
};

static void test_identity(void **state)
{
    const struct identity_case *c = *state;
    struct model m;
    int64_t shape[] = {2, 3};
    const char *outs[] = {"OUTPUT0"};
    struct tensor out[1];
    struct arena arena;
    void *st;
    struct error err;

    load_model(c->model, &m);
    assert_int_equal(m.info.ninputs, 1);
    assert_int_equal(m.info.inputs[0].dtype, c->dtype);
    assert_int_equal(m.info.inputs[0].ndim, 2);
    assert_int_equal(m.info.inputs[0].dims[0], -1);
    assert_int_equal(m.info.inputs[0].dims[1], -1);
    assert_int_equal(m.info.outputs[0].dtype, c->dtype);

    struct tensor in[] = {make_tensor("INPUT0", c->dtype, 2, shape, (void *)c->data, c->nbytes)};
    arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
    if (execute(&m, &arena, in, 1, outs, 1, out, &st, &err))
        fail_msg("%s: %d %s", c->model, err.status, err.msg);
    assert_int_equal(out[0].dtype, c->dtype);
    assert_int_equal(out[0].ndim, 2);
    assert_int_equal(out[0].shape[0], 2);
    assert_int_equal(out[0].shape[1], 3);
    assert_int_equal(out[0].nbytes, c->nbytes);
    if (c->dtype == DT_BYTES) {
        const struct tensor_bytes *want = c->data, *got = out[0].data;
        for (int i = 0; i < 6; i++) {
            assert_int_equal(got[i].len, want[i].len);
            assert_memory_equal(got[i].ptr, want[i].ptr, want[i].len);
        }
    } else {
        assert_memory_equal(out[0].data, c->data, c->nbytes);
    }
    backend_onnxruntime.release(m.inst, st);
    arena_free(&arena);
    unload_model(&m);
}

/* ---- load errors ---- */

/* Loads path, expecting failure; removes the file first if `temporary`. */
static void expect_load_error(const char *path, int intra, int temporary, const char *needle)
{
    struct backend_load_args args = {.path = path, .intra_op_threads = intra};
    void *inst = (void *)&args;
    struct model_info info = {0};
    struct error err = {0};
    char prefix[PATH_MAX + 64];

    int rc = backend_onnxruntime.load(&args, &inst, &info, &err);
    if (temporary)
        unlink(path);
    assert_int_equal(rc, -1);
    snprintf(prefix, sizeof prefix, "failed to load model '%s': ", path);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, needle))
        fail_msg("expected '%s...%s', got '%s'", prefix, needle, err.msg);
    assert_ptr_equal(inst, &args); /* untouched */
    assert_null(info.inputs);
    assert_null(info.outputs);
}

static void test_load_missing_file(void **state)
{
    (void)state;
    expect_load_error("/nonexistent/inferd/model.onnx", 0, 0, "/nonexistent/inferd/model.onnx");
}

static void write_file(char *path, const void *data, size_t n)
{
    strcpy(path, "/tmp/inferd_test_ort_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
}

static void test_load_garbage_file(void **state)
{
    char path[64];
    static const char garbage[] = "this is not an ONNX model \x01\x02\xff\xfe\x80";
    (void)state;

    write_file(path, garbage, sizeof garbage);
    expect_load_error(path, 0, 1, "");
}

static void test_load_negative_threads(void **state)
{
    char path[PATH_MAX];
    (void)state;
    source_path(path, sizeof path, "models/simple/1/model.onnx");
    expect_load_error(path, -1, 0, "negative thread count");
}

static void test_load_thread_options(void **state)
{
    char path[PATH_MAX];
    struct backend_load_args args = {.path = path, .intra_op_threads = 1, .inter_op_threads = 1};
    struct model m;
    struct error err = {0};
    (void)state;

    source_path(path, sizeof path, "models/simple/1/model.onnx");
    assert_int_equal(backend_onnxruntime.load(&args, &m.inst, &m.info, &err), 0);
    check_simple_batch(&m, 2);
    unload_model(&m);
}

/* A protobuf writer just big enough for ModelProto, to build models with the
 * input types no shipped model has. */
struct pb {
    uint8_t b[1024];
    size_t n;
};

static void pb_varint(struct pb *p, uint64_t v)
{
    assert_true(p->n + 10 <= sizeof p->b);
    while (v >= 0x80) {
        p->b[p->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p->b[p->n++] = (uint8_t)v;
}

static void pb_int(struct pb *p, unsigned field, uint64_t v)
{
    pb_varint(p, field << 3);
    pb_varint(p, v);
}

static void pb_bytes(struct pb *p, unsigned field, const void *data, size_t n)
{
    pb_varint(p, field << 3 | 2);
    pb_varint(p, n);
    assert_true(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, data, n);
    p->n += n;
}

static void pb_str(struct pb *p, unsigned field, const char *s)
{
    pb_bytes(p, field, s, strlen(s));
}

static void pb_msg(struct pb *p, unsigned field, const struct pb *m)
{
    pb_bytes(p, field, m->b, m->n);
}

enum { ONNX_FLOAT = 1, ONNX_COMPLEX64 = 14, ONNX_BFLOAT16 = 16, ONNX_FLOAT8E4M3FN = 17 };

/* TypeProto of a tensor with `rank` dims of 1. */
static struct pb tensor_type(int elem, int rank)
{
    struct pb shape = {0}, tensor = {0}, type = {0};
    for (int d = 0; d < rank; d++) {
        struct pb dim = {0};
        pb_int(&dim, 1, 1); /* dim_value */
        pb_msg(&shape, 1, &dim);
    }
    pb_int(&tensor, 1, (uint64_t)elem);
    pb_msg(&tensor, 2, &shape);
    pb_msg(&type, 1, &tensor); /* tensor_type */
    return type;
}

static struct pb sequence_type(void)
{
    struct pb elem = tensor_type(ONNX_FLOAT, 1), seq = {0}, type = {0};
    pb_msg(&seq, 1, &elem);
    pb_msg(&type, 4, &seq); /* sequence_type */
    return type;
}

static struct pb value_info(const char *name, const struct pb *type)
{
    struct pb vi = {0};
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, type);
    return vi;
}

/* Writes a model with inputs X (of type x_type, unused) and A (FLOAT [1])
 * and output Y = Identity(A); returns its path in `path`. */
static void write_model(char *path, const struct pb *x_type)
{
    struct pb a_type = tensor_type(ONNX_FLOAT, 1);
    struct pb x = value_info("X", x_type), a = value_info("A", &a_type),
              y = value_info("Y", &a_type);
    struct pb node = {0}, graph = {0}, opset = {0}, model = {0};

    pb_str(&node, 1, "A");
    pb_str(&node, 2, "Y");
    pb_str(&node, 3, "identity");
    pb_str(&node, 4, "Identity");
    pb_msg(&graph, 1, &node);
    pb_str(&graph, 2, "g");
    pb_msg(&graph, 11, &x);
    pb_msg(&graph, 11, &a);
    pb_msg(&graph, 12, &y);
    pb_int(&opset, 2, 13);
    pb_int(&model, 1, 8); /* ir_version */
    pb_msg(&model, 7, &graph);
    pb_msg(&model, 8, &opset);
    write_file(path, model.b, model.n);
}

static void test_load_bf16_input(void **state)
{
    char path[64];
    struct pb type = tensor_type(ONNX_BFLOAT16, 3);
    struct backend_load_args args = {.path = path};
    struct model m;
    struct error err = {0};
    (void)state;

    write_model(path, &type);
    int rc = backend_onnxruntime.load(&args, &m.inst, &m.info, &err);
    unlink(path);
    if (rc)
        fail_msg("%s", err.msg);
    assert_int_equal(m.info.ninputs, 2);
    assert_string_equal(m.info.inputs[0].name, "X");
    assert_int_equal(m.info.inputs[0].dtype, DT_BF16);
    assert_int_equal(m.info.inputs[0].ndim, 3);
    assert_int_equal(m.info.inputs[0].dims[2], 1);
    unload_model(&m);
}

static void test_load_unsupported_types(void **state)
{
    char path[64];
    struct pb complex = tensor_type(ONNX_COMPLEX64, 1), float8 = tensor_type(ONNX_FLOAT8E4M3FN, 1),
              seq = sequence_type(), rank17 = tensor_type(ONNX_FLOAT, TENSOR_MAX_DIMS + 1);
    (void)state;

    /* The released ORT builds have no complex types: ORT itself refuses. */
    write_model(path, &complex);
    expect_load_error(path, 0, 1, "complex64");
    write_model(path, &float8);
    expect_load_error(path, 0, 1, "input 'X' has unsupported element type float8e4m3fn");
    write_model(path, &seq);
    expect_load_error(path, 0, 1, "input 'X' is a sequence, not a tensor");
    write_model(path, &rank17);
    expect_load_error(path, 0, 1, "input 'X' has rank 17, more than 16");
}

/* ---- allocation failures: every one is an error, never a crash or leak ---- */

static void test_load_out_of_memory(void **state)
{
    char path[PATH_MAX];
    struct backend_load_args args = {.path = path};
    struct model m;
    struct error err;
    long n;
    (void)state;

    source_path(path, sizeof path, "models/simple/1/model.onnx");
    for (n = 0; n < 100; n++) {
        error_clear(&err);
        mem_fail_after(n);
        int rc = backend_onnxruntime.load(&args, &m.inst, &m.info, &err);
        mem_fail_reset();
        if (rc == 0)
            break;
        assert_int_equal(err.status, 500);
        assert_non_null(strstr(err.msg, "out of memory"));
    }
    assert_true(n > 0 && n < 100);
    unload_model(&m);
}

static void test_execute_out_of_memory(void **state)
{
    struct model *m = *state;
    static const struct tensor_bytes text[] = {{"abc", 3}, {"d", 1}};
    int64_t shape[] = {2};
    const char *outs[] = {"UPPER", "ECHO"};
    struct tensor out[2];
    struct arena arena;
    void *st;
    struct error err;
    long n;
    struct tensor in[] = {make_tensor("TEXT", DT_BYTES, 1, shape, (void *)text, 4)};

    for (n = 0; n < 100; n++) {
        arena_init(&arena, ARENA_CHUNK, ARENA_MAX);
        st = NULL;
        mem_fail_after(n);
        int rc = execute(m, &arena, in, 1, outs, 2, out, &st, &err);
        mem_fail_reset();
        if (rc == 0) {
            assert_memory_equal(((const struct tensor_bytes *)out[0].data)[0].ptr, "ABC", 3);
            backend_onnxruntime.release(m->inst, st);
            arena_free(&arena);
            break;
        }
        assert_int_equal(err.status, 500);
        assert_null(st);
        arena_free(&arena);
    }
    assert_true(n > 0 && n < 100);
}

/* ---- threads ---- */

struct worker {
    struct model *m;
    int runs;
    int failures;
};

static void *simple_worker(void *arg)
{
    struct worker *w = arg;
    int32_t a[4 * 16], b[4 * 16];
    int64_t shape[] = {4, 16};
    const char *outs[] = {"OUTPUT0", "OUTPUT1"};
    struct tensor out[2];
    void *st;
    struct error err;

    for (int r = 0; r < w->runs; r++) {
        for (int i = 0; i < 64; i++) {
            a[i] = r * 64 + i;
            b[i] = i - r;
        }
        struct tensor in[] = {
            make_tensor("INPUT0", DT_INT32, 2, shape, a, sizeof a),
            make_tensor("INPUT1", DT_INT32, 2, shape, b, sizeof b),
        };
        if (execute(w->m, NULL, in, 2, outs, 2, out, &st, &err)) {
            w->failures++;
            continue;
        }
        for (int i = 0; i < 64; i++)
            if (((int32_t *)out[0].data)[i] != a[i] + b[i] ||
                ((int32_t *)out[1].data)[i] != a[i] - b[i])
                w->failures++;
        backend_onnxruntime.release(w->m->inst, st);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct model *shared = *state, other;
    struct worker w[2] = {{shared, 300, 0}, {&other, 300, 0}};
    pthread_t t[2];

    /* Two instances at once. */
    load_model("models/simple/1/model.onnx", &other);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, simple_worker, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    unload_model(&other);
    /* One instance, handed from thread to thread. */
    for (int i = 0; i < 2; i++) {
        w[i].m = shared;
        assert_int_equal(pthread_create(&t[i], NULL, simple_worker, &w[i]), 0);
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    assert_int_equal(w[0].failures + w[1].failures, 0);
}

/* One test per type, named after it (cmocka_unit_test_prestate would name
 * them all test_identity). */
/* clang-format off */
#define IDENTITY_TEST(i, name) {name, test_identity, NULL, NULL, (void *)&identity_cases[i]}
/* clang-format on */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_simple_info, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_simple_batch1, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_simple_batch3, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_simple_one_output, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_outputs_preallocated, setup_simple,
                                        teardown_model),
        cmocka_unit_test_setup_teardown(test_a_first_dimension_that_is_not_the_batch,
                                        setup_first3, teardown_model),
        cmocka_unit_test_setup_teardown(test_simple_empty_batch, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_missing_input, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_unknown_input, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_duplicate_input, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_wrong_dtype, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_unknown_output, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_wrong_shape, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_error_batch_mismatch, setup_simple, teardown_model),
        cmocka_unit_test_setup_teardown(test_strings, setup_strings, teardown_model),
        cmocka_unit_test_setup_teardown(test_strings_arena_ceiling, setup_strings, teardown_model),
        cmocka_unit_test_setup_teardown(test_execute_out_of_memory, setup_strings, teardown_model),
        cmocka_unit_test_setup_teardown(test_digits, setup_digits, teardown_model),
        IDENTITY_TEST(0, "test_identity_bool"),
        IDENTITY_TEST(1, "test_identity_uint8"),
        IDENTITY_TEST(2, "test_identity_uint16"),
        IDENTITY_TEST(3, "test_identity_uint32"),
        IDENTITY_TEST(4, "test_identity_uint64"),
        IDENTITY_TEST(5, "test_identity_int8"),
        IDENTITY_TEST(6, "test_identity_int16"),
        IDENTITY_TEST(7, "test_identity_int32"),
        IDENTITY_TEST(8, "test_identity_int64"),
        IDENTITY_TEST(9, "test_identity_fp16"),
        IDENTITY_TEST(10, "test_identity_fp32"),
        IDENTITY_TEST(11, "test_identity_fp64"),
        IDENTITY_TEST(12, "test_identity_bytes"),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_load_garbage_file),
        cmocka_unit_test(test_load_negative_threads),
        cmocka_unit_test(test_load_thread_options),
        cmocka_unit_test(test_load_bf16_input),
        cmocka_unit_test(test_load_unsupported_types),
        cmocka_unit_test(test_load_out_of_memory),
        cmocka_unit_test_setup_teardown(test_threads, setup_simple, teardown_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
