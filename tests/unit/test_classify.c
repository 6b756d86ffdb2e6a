/* Triton's classification extension (serve/classify.h): top-k order, the
 * value formatting, labels, shapes and clamping, and the label files
 * (model/labels.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/mem.h"
#include "core/fp16.h"
#include "model/labels.h"
#include "serve/classify.h"

static void format(char *buf, size_t size, enum dtype dt, const void *row, size_t index,
                   const char *label)
{
    struct tensor_bytes l = {label, label ? (uint32_t)strlen(label) : 0};
    size_t n = classify_format(buf, size, dt, row, index, label ? &l : NULL);
    assert_int_equal(n, strlen(buf));
}

static void test_format_like_std_to_string(void **state)
{
    (void)state;
    char buf[128];
    float f[] = {0.7091503f, 3.3f, -1e-7f, 12345678.0f};
    format(buf, sizeof buf, DT_FP32, f, 0, NULL);
    assert_string_equal(buf, "0.709150:0");
    format(buf, sizeof buf, DT_FP32, f, 1, "apple");
    assert_string_equal(buf, "3.300000:1:apple");
    format(buf, sizeof buf, DT_FP32, f, 2, "");
    assert_string_equal(buf, "-0.000000:2"); /* an empty label is none */
    format(buf, sizeof buf, DT_FP32, f, 3, NULL);
    assert_string_equal(buf, "12345678.000000:3");
    double d[] = {1.0 / 3};
    format(buf, sizeof buf, DT_FP64, d, 0, NULL);
    assert_string_equal(buf, "0.333333:0");
    uint8_t u8[] = {255};
    format(buf, sizeof buf, DT_UINT8, u8, 0, "x");
    assert_string_equal(buf, "255:0:x");
    int8_t i8[] = {-128};
    format(buf, sizeof buf, DT_INT8, i8, 0, NULL);
    assert_string_equal(buf, "-128:0");
    uint32_t u32[] = {UINT32_MAX};
    format(buf, sizeof buf, DT_UINT32, u32, 0, NULL);
    assert_string_equal(buf, "4294967295:0");
    int64_t i64[] = {0, INT64_MIN};
    format(buf, sizeof buf, DT_INT64, i64, 1, NULL);
    assert_string_equal(buf, "-9223372036854775808:1");
    uint64_t u64[] = {UINT64_MAX};
    format(buf, sizeof buf, DT_UINT64, u64, 0, NULL);
    assert_string_equal(buf, "18446744073709551615:0");
    uint16_t h[] = {fp16_from_float(0.5f)};
    format(buf, sizeof buf, DT_FP16, h, 0, NULL);
    assert_string_equal(buf, "0.500000:0");
    uint16_t bf[] = {0x3fc0}; /* 1.5 */
    format(buf, sizeof buf, DT_BF16, bf, 0, NULL);
    assert_string_equal(buf, "1.500000:0");
    /* snprintf's contract: the length needed, the buffer cut short. */
    assert_int_equal(classify_format(buf, 4, DT_FP32, f, 1, NULL), strlen("3.300000:1"));
    assert_string_equal(buf, "3.3");
    assert_int_equal(classify_format(NULL, 0, DT_FP32, f, 1, NULL), strlen("3.300000:1"));
}

static void expect_topk(enum dtype dt, const void *row, size_t count, size_t k, const size_t *want,
                        size_t nwant)
{
    size_t idx[64];
    assert_int_equal(classify_topk(dt, row, count, k, idx), nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_int_equal(idx[i], want[i]);
}

static void test_topk_order_ties_and_clamping(void **state)
{
    (void)state;
    /* Triton's documented example: [1, 5, 10, 4] ranks 2, 1, 3, 0. */
    uint32_t u[] = {1, 5, 10, 4};
    expect_topk(DT_UINT32, u, 4, 2, (size_t[]){2, 1}, 2);
    expect_topk(DT_UINT32, u, 4, 4, (size_t[]){2, 1, 3, 0}, 4);
    expect_topk(DT_UINT32, u, 4, 100, (size_t[]){2, 1, 3, 0}, 4); /* clamped */
    expect_topk(DT_UINT32, u, 0, 3, NULL, 0);
    /* Ties: lower index first, whatever k. */
    float t[] = {0.25f, 0.5f, 0.25f, 0.5f, 0.25f};
    expect_topk(DT_FP32, t, 5, 5, (size_t[]){1, 3, 0, 2, 4}, 5);
    expect_topk(DT_FP32, t, 5, 3, (size_t[]){1, 3, 0}, 3);
    expect_topk(DT_FP32, t, 5, 1, (size_t[]){1}, 1);
    /* NaN below every number, negative values, infinities. */
    float n[] = {NAN, -1.0f, -INFINITY, INFINITY, NAN, 0.0f};
    expect_topk(DT_FP32, n, 6, 6, (size_t[]){3, 5, 1, 2, 0, 4}, 6);
    /* Signed and 64-bit integers compare exactly (not through double). */
    int64_t big[] = {INT64_MAX - 1, INT64_MAX, INT64_MIN, -1};
    expect_topk(DT_INT64, big, 4, 4, (size_t[]){1, 0, 3, 2}, 4);
    uint64_t ubig[] = {UINT64_MAX - 1, UINT64_MAX, 0};
    expect_topk(DT_UINT64, ubig, 3, 2, (size_t[]){1, 0}, 2);
    int8_t s8[] = {-5, 3, -128, 127};
    expect_topk(DT_INT8, s8, 4, 2, (size_t[]){3, 1}, 2);
    double dd[] = {1e-300, 0.0, -1e-300};
    expect_topk(DT_FP64, dd, 3, 3, (size_t[]){0, 1, 2}, 3);
}

/* The heap selection agrees with a full stable sort on random rows with
 * many ties, for every k. */
static void test_topk_matches_sort(void **state)
{
    (void)state;
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        size_t count = 1 + (size_t)(rand() % 60);
        int16_t row[64];
        for (size_t i = 0; i < count; i++)
            row[i] = (int16_t)(rand() % 9 - 4);
        size_t want[64];
        for (size_t i = 0; i < count; i++)
            want[i] = i;
        for (size_t i = 1; i < count; i++) /* insertion sort: stable */
            for (size_t j = i; j > 0 && row[want[j]] > row[want[j - 1]]; j--) {
                size_t x = want[j];
                want[j] = want[j - 1];
                want[j - 1] = x;
            }
        size_t k = 1 + (size_t)(rand() % (int)count);
        expect_topk(DT_INT16, row, count, k, want, k);
    }
}

static void test_dtypes(void **state)
{
    (void)state;
    assert_false(classify_dtype_ok(DT_BOOL));
    assert_false(classify_dtype_ok(DT_BYTES));
    assert_false(classify_dtype_ok(DT_INVALID));
    assert_true(classify_dtype_ok(DT_FP32));
    assert_true(classify_dtype_ok(DT_FP16));
    assert_true(classify_dtype_ok(DT_UINT8));
    assert_true(classify_dtype_ok(DT_INT64));
}

/* ---- whole responses ---- */

static struct model_io outputs[] = {
    {"probs", DT_FP32, 2, {-1, 3}},
    {"other", DT_INT32, 1, {-1}},
    {"flags", DT_BOOL, 1, {-1}},
};

static struct model make_model(bool batched, struct model_labels *labels)
{
    struct model m;
    memset(&m, 0, sizeof m);
    m.name = "cls";
    m.info.outputs = outputs;
    m.info.noutputs = 3;
    m.batched = batched;
    m.labels = labels;
    return m;
}

static const char *element(const struct tensor *t, size_t i, char *buf)
{
    const struct tensor_bytes *s = t->data;
    memcpy(buf, s[i].ptr, s[i].len);
    buf[s[i].len] = '\0';
    return buf;
}

static void test_outputs_batched_with_labels(void **state)
{
    (void)state;
    static const struct tensor_bytes lines[] = {{"zero", 4}, {"", 0}};
    struct model_labels labels[3] = {{.count = 2, .lines = lines}};
    struct model m = make_model(true, labels);
    float probs[] = {0.1f, 0.7f, 0.2f, 0.5f, 0.2f, 0.3f};
    int32_t other[] = {4, 5};
    struct tensor in[2] = {
        {.name = "other", .dtype = DT_INT32, .ndim = 1, .shape = {2}, .data = other, .nbytes = 8},
        {.name = "probs",
         .dtype = DT_FP32,
         .ndim = 2,
         .shape = {2, 3},
         .data = probs,
         .nbytes = 24},
    };
    const char *names[] = {"other", "probs"};
    uint32_t classes[] = {0, 2};
    struct infer_request req = {
        .model = &m, .output_names = names, .noutputs = 2, .output_classes = classes};
    const struct tensor *out;
    void *mem;
    struct error err;
    assert_int_equal(classify_outputs(&req, in, 2, &out, &mem, &err), 0);
    assert_non_null(mem);
    assert_ptr_equal(out[0].data, other); /* not asked: as it was */
    assert_int_equal(out[0].dtype, DT_INT32);
    const struct tensor *c = &out[1];
    assert_string_equal(c->name, "probs");
    assert_int_equal(c->dtype, DT_BYTES);
    assert_int_equal(c->ndim, 2);
    assert_int_equal(c->shape[0], 2);
    assert_int_equal(c->shape[1], 2);
    char buf[64];
    assert_string_equal(element(c, 0, buf), "0.700000:1"); /* label line empty */
    assert_string_equal(element(c, 1, buf), "0.200000:2"); /* past the labels */
    assert_string_equal(element(c, 2, buf), "0.500000:0:zero");
    assert_string_equal(element(c, 3, buf), "0.300000:2");
    assert_int_equal(c->nbytes, strlen("0.700000:1") + strlen("0.200000:2") +
                                    strlen("0.500000:0:zero") + strlen("0.300000:2"));
    mem_free(mem);

    /* k beyond the classes: clamped to 3 per row. */
    classes[1] = 1000;
    assert_int_equal(classify_outputs(&req, in, 2, &out, &mem, &err), 0);
    assert_int_equal(out[1].shape[0], 2);
    assert_int_equal(out[1].shape[1], 3);
    assert_string_equal(element(&out[1], 5, buf), "0.200000:1");
    mem_free(mem);
}

static void test_outputs_unbatched_and_none(void **state)
{
    (void)state;
    struct model m = make_model(false, NULL);
    int32_t other[] = {3, 9, 1, 9};
    struct tensor in[1] = {
        {.name = "other",
         .dtype = DT_INT32,
         .ndim = 2,
         .shape = {2, 2},
         .data = other,
         .nbytes = 16},
    };
    const char *names[] = {"other"};
    uint32_t classes[] = {3};
    struct infer_request req = {
        .model = &m, .output_names = names, .noutputs = 1, .output_classes = classes};
    const struct tensor *out;
    void *mem;
    struct error err;
    /* Unbatched: the whole output is one row, flattened. */
    assert_int_equal(classify_outputs(&req, in, 1, &out, &mem, &err), 0);
    assert_int_equal(out[0].ndim, 1);
    assert_int_equal(out[0].shape[0], 3);
    char buf[64];
    assert_string_equal(element(&out[0], 0, buf), "9:1");
    assert_string_equal(element(&out[0], 1, buf), "9:3");
    assert_string_equal(element(&out[0], 2, buf), "3:0");
    mem_free(mem);

    /* Nothing asked: the same array, nothing allocated. */
    req.output_classes = NULL;
    assert_int_equal(classify_outputs(&req, in, 1, &out, &mem, &err), 0);
    assert_ptr_equal(out, in);
    assert_null(mem);
}

static void test_check_refuses_non_numeric(void **state)
{
    (void)state;
    struct model m = make_model(true, NULL);
    const char *names[] = {"probs", "flags"};
    uint32_t classes[] = {1, 0};
    struct infer_request req = {
        .model = &m, .output_names = names, .noutputs = 2, .output_classes = classes};
    struct shm_request shm;
    memset(&shm, 0, sizeof shm);
    struct error err;
    assert_int_equal(classify_check(&req, &shm, &err), 0);
    classes[1] = 2;
    assert_int_equal(classify_check(&req, &shm, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "output 'flags': classification needs a numeric output"));
    assert_non_null(strstr(err.msg, "BOOL"));
}

/* ---- label files ---- */

static char dir[64];

static void write_file(const char *name, const char *text, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static int load(const char *file, struct model_labels **out, struct error *err)
{
    static struct model_config_io cfg_out[2];
    cfg_out[0] = (struct model_config_io){.name = "probs", .label_filename = (char *)file};
    cfg_out[1] = (struct model_config_io){.name = "other", .label_filename = ""};
    struct model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.outputs = cfg_out;
    cfg.noutputs = 2;
    struct model_info info = {.noutputs = 3, .outputs = outputs};
    return model_labels_load(dir, &cfg, &info, out, err);
}

static void test_label_files(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/inferd_labels_XXXXXX");
    assert_non_null(mkdtemp(dir));
    struct model_labels *l;
    struct error err;

    write_file("crlf.txt", "cat\r\n\r\ndog", 10);
    assert_int_equal(load("crlf.txt", &l, &err), 0);
    assert_non_null(l);
    assert_int_equal(l[0].count, 3); /* last line without '\n' counts */
    assert_int_equal(l[0].lines[0].len, 3);
    assert_memory_equal(l[0].lines[0].ptr, "cat", 3);
    assert_int_equal(l[0].lines[1].len, 0);
    assert_memory_equal(l[0].lines[2].ptr, "dog", 3);
    assert_int_equal(l[1].count, 0);
    assert_int_equal(l[2].count, 0);
    model_labels_free(l, 3);

    write_file("empty.txt", "", 0);
    assert_int_equal(load("empty.txt", &l, &err), 0);
    assert_int_equal(l[0].count, 0);
    model_labels_free(l, 3);

    write_file("ten.txt", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", 20);
    assert_int_equal(load("ten.txt", &l, &err), 0);
    assert_int_equal(l[0].count, 10); /* the final '\n' ends line 9 */
    model_labels_free(l, 3);

    assert_int_equal(load("missing.txt", &l, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "output 'probs': cannot read label file"));
    assert_non_null(strstr(err.msg, "missing.txt"));
    assert_null(l);

    static const char *const bad[] = {"/etc/passwd", "../x.txt", "a/../../x", ".."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(bad[i], &l, &err), -1);
        assert_non_null(strstr(err.msg, "must be a relative path inside the model directory"));
    }

    /* Limits: lines and bytes. */
    size_t n = MODEL_LABELS_MAX_LINES + 1;
    char *many = malloc(n);
    memset(many, '\n', n);
    write_file("many.txt", many, n);
    free(many);
    assert_int_equal(load("many.txt", &l, &err), -1);
    assert_non_null(strstr(err.msg, "has more than"));
    char path[128];
    snprintf(path, sizeof path, "%s/big.txt", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fseek(f, MODEL_LABELS_MAX_BYTES, SEEK_SET), 0);
    fputc('x', f);
    fclose(f);
    assert_int_equal(load("big.txt", &l, &err), -1);
    assert_non_null(strstr(err.msg, "is larger than"));

    static const char *const files[] = {"crlf.txt", "empty.txt", "ten.txt", "many.txt", "big.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_like_std_to_string),
        cmocka_unit_test(test_topk_order_ties_and_clamping),
        cmocka_unit_test(test_topk_matches_sort),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_outputs_batched_with_labels),
        cmocka_unit_test(test_outputs_unbatched_and_none),
        cmocka_unit_test(test_check_refuses_non_numeric),
        cmocka_unit_test(test_label_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
