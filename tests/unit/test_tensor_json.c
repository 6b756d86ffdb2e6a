/*
 * Unit tests for api/tensor_json: every datatype, nesting, element counts,
 * every error, the writer, and a differential test against the tree path
 * (base/json + the per-element checks of api/rest/infer_json.c) on random and
 * mutated arrays.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/tensor_json.h"
#include "base/json.h"
#include "base/mem.h"
#include "core/fp16.h"

#include "../support/tensor_oracle.h"

static struct arena arena;

static int setup(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 64u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    arena_free(&arena);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- helpers ---------------------------------------------------------- */

static unsigned char out[1 << 16];
static struct error err;

/* Parses a flat array of `count` elements (shape [count]). */
static int parse_n(const char *text, enum dtype dt, int64_t count)
{
    int64_t shape[1] = {count};
    memset(out, 0xAA, sizeof out);
    error_clear(&err);
    return tensor_json_parse(text, strlen(text), dt, shape, 1, count, out, &arena, "x", &err);
}

static void expect_ok(const char *text, enum dtype dt, int64_t count)
{
    int rc = parse_n(text, dt, count);
    if (rc != 0)
        print_error("%s \"%s\": %s\n", dtype_name(dt), text, err.msg);
    assert_int_equal(rc, 0);
}

static void expect_error(const char *text, enum dtype dt, int64_t count, int status,
                         const char *msg)
{
    int rc = parse_n(text, dt, count);
    if (rc == 0 || err.status != status || (msg && strcmp(err.msg, msg) != 0))
        print_error("%s \"%s\": rc %d status %d \"%s\", want %d \"%s\"\n", dtype_name(dt), text,
                    rc, err.status, err.msg, status, msg ? msg : "");
    assert_int_equal(rc, -1);
    assert_int_equal(err.status, status);
    if (msg)
        assert_string_equal(err.msg, msg);
}

static void expect_malformed(const char *text, enum dtype dt, int64_t count)
{
    expect_error(text, dt, count, 400, NULL);
    assert_non_null(strstr(err.msg, "malformed JSON in 'data'"));
}

/* ---- every datatype --------------------------------------------------- */

static void test_numeric_types(void **state)
{
    (void)state;
    expect_ok("[1, -2, 127, -128]", DT_INT8, 4);
    assert_memory_equal(out, "\x01\xFE\x7F\x80", 4);
    expect_ok("[0, 255, -0]", DT_UINT8, 3);
    assert_memory_equal(out, "\x00\xFF\x00", 3);
    expect_ok("[-32768, 32767]", DT_INT16, 2);
    int16_t i16[2] = {-32768, 32767};
    assert_memory_equal(out, i16, 4);
    expect_ok("[65535]", DT_UINT16, 1);
    uint16_t u16 = 65535;
    assert_memory_equal(out, &u16, 2);
    expect_ok("[-2147483648,2147483647]", DT_INT32, 2);
    int32_t i32[2] = {INT32_MIN, INT32_MAX};
    assert_memory_equal(out, i32, 8);
    expect_ok("[4294967295]", DT_UINT32, 1);
    uint32_t u32 = UINT32_MAX;
    assert_memory_equal(out, &u32, 4);
    expect_ok("[-9223372036854775808, 9223372036854775807]", DT_INT64, 2);
    int64_t i64[2] = {INT64_MIN, INT64_MAX};
    assert_memory_equal(out, i64, 16);
    expect_ok("[18446744073709551615]", DT_UINT64, 1);
    uint64_t u64 = UINT64_MAX;
    assert_memory_equal(out, &u64, 8);

    expect_ok("[0.1, -0, 1e-45, 3.4028235e38, NaN, Infinity, -Infinity, 1e-50]", DT_FP32, 8);
    float f[8];
    memcpy(f, out, sizeof f);
    assert_true(f[0] == 0.1f && f[1] == 0 && signbit(f[1]) && f[2] == 1e-45f);
    assert_true(f[3] == FLT_MAX && isnan(f[4]) && f[5] == INFINITY && f[6] == -INFINITY);
    assert_true(f[7] == 0);
    expect_ok("[0.1, 1.7976931348623157e308, 5e-324]", DT_FP64, 3);
    double d[3];
    memcpy(d, out, sizeof d);
    assert_true(d[0] == 0.1 && d[1] == DBL_MAX && d[2] == 5e-324);
    expect_ok("[1.5, 65504, -65519.99, 1e-8, NaN, -Infinity]", DT_FP16, 6);
    uint16_t h[6];
    memcpy(h, out, sizeof h);
    assert_int_equal(h[0], fp16_from_float(1.5f));
    assert_int_equal(h[1], 0x7BFF);
    assert_int_equal(h[2], 0xFBFF);
    assert_int_equal(h[3], fp16_from_float(1e-8f));
    assert_true((h[4] & 0x7C00) == 0x7C00 && (h[4] & 0x3FF) != 0);
    assert_int_equal(h[5], 0xFC00);

    expect_ok("[true, false,true]", DT_BOOL, 3);
    assert_memory_equal(out, "\x01\x00\x01", 3);
    expect_ok("[]", DT_FP32, 0);
    expect_ok(" \t\r\n[ ] \n", DT_INT8, 0);
}

static void test_bytes(void **state)
{
    (void)state;
    const char *text = "[\"plain\", \"\", \"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\", \"\\u0000z\","
                       " \"\\u00e9\\u20ac\\ud83d\\ude00\", \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"]";
    expect_ok(text, DT_BYTES, 6);
    struct tensor_bytes s[6];
    memcpy(s, out, sizeof s);
    assert_int_equal(s[0].len, 5);
    assert_memory_equal(s[0].ptr, "plain", 5);
    assert_true(s[0].ptr > text && s[0].ptr < text + strlen(text)); /* no copy */
    assert_int_equal(s[1].len, 0);
    assert_int_equal(s[2].len, 11);
    assert_memory_equal(s[2].ptr, "a\"b\\c/\b\f\n\r\t", 11);
    assert_int_equal(s[3].len, 2);
    assert_memory_equal(s[3].ptr, "\0z", 2);
    assert_int_equal(s[4].len, 2 + 3 + 4);
    assert_memory_equal(s[4].ptr, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9);
    assert_int_equal(s[5].len, 9);
    assert_memory_equal(s[5].ptr, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9);

    /* Invalid UTF-8, control characters, bad escapes, lone surrogates. */
    static const char *const bad[] = {
        "[\"\xC3\"]", "[\"\xC0\x80\"]", "[\"\xED\xA0\x80\"]", "[\"\xF4\x90\x80\x80\"]",
        "[\"\xFF\"]", "[\"\x80\"]", "[\"\xE2\x82\"]", "[\"a\nb\"]", "[\"\x01\"]",
        "[\"\\x\"]", "[\"\\u12\"]", "[\"\\u12G4\"]", "[\"\\ud800\"]", "[\"\\udc00\"]",
        "[\"\\ud800\\u0041\"]", "[\"\\ud800x\"]", "[\"abc]", "[\"abc\\\"]", "[\"\\",
        "[\"\\U0041\"]", "[\"\\'\"]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_malformed(bad[i], DT_BYTES, 1);
}

static void test_nesting(void **state)
{
    (void)state;
    expect_ok("[[1,2],[3,4]]", DT_INT32, 4);
    int32_t v[4] = {1, 2, 3, 4};
    assert_memory_equal(out, v, sizeof v);
    /* Only the leaves count; the nesting need not match the shape (as in
     * the tree path, which counts leaves). */
    expect_ok("[[1],[[2]],3,[],[[[4]]]]", DT_INT32, 4);
    assert_memory_equal(out, v, sizeof v);
    expect_ok("[ [ 1 , 2 ] , [ 3 , 4 ] ]", DT_INT32, 4);

    char deep[128];
    size_t n = 0;
    for (int i = 0; i < TENSOR_JSON_MAX_DEPTH; i++)
        deep[n++] = '[';
    deep[n++] = '7';
    for (int i = 0; i < TENSOR_JSON_MAX_DEPTH; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    expect_ok(deep, DT_INT8, 1);
    memmove(deep + 1, deep, n + 1);
    deep[0] = '[';
    strcat(deep, "]");
    expect_malformed(deep, DT_INT8, 1);
    assert_non_null(strstr(err.msg, "nesting too deep"));

    /* Objects count towards the depth too. */
    n = 0;
    for (int i = 0; i < TENSOR_JSON_MAX_DEPTH - 1; i++)
        deep[n++] = '[';
    strcpy(deep + n, "{\"a\":1}");
    n += 7;
    for (int i = 0; i < TENSOR_JSON_MAX_DEPTH - 1; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    expect_error(deep, DT_INT8, 1, 400, "input 'x': element 0 is not a number for datatype INT8");
    memmove(deep + 1, deep, n + 1);
    deep[0] = '[';
    strcat(deep, "]");
    expect_malformed(deep, DT_INT8, 1);
}

static void test_counts(void **state)
{
    (void)state;
    int64_t shape[2] = {2, 3};
    error_clear(&err);
    const char *text = "[[1,2,3],[4,5]]";
    assert_int_equal(tensor_json_parse(text, strlen(text), DT_FP32, shape, 2, 6, out, &arena,
                                       "in0", &err),
                     -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, "input 'in0': shape [2,3] needs 6 elements, 'data' has 5");
    text = "[[1,2,3],[4,5,6,7]]";
    assert_int_equal(tensor_json_parse(text, strlen(text), DT_FP32, shape, 2, 6, out, &arena,
                                       "in0", &err),
                     -1);
    assert_string_equal(err.msg, "input 'in0': shape [2,3] needs 6 elements, 'data' has 7");
    /* The count is checked before the elements (the tree path's order)... */
    expect_error("[1, \"a\"]", DT_INT8, 3, 400, "input 'x': shape [3] needs 3 elements, 'data' has 2");
    /* ...and malformed JSON before the count. */
    expect_malformed("[1, 2,]", DT_INT8, 3);
    /* A scalar 0-d tensor still comes as an array. */
    int64_t none[1];
    text = "[5]";
    assert_int_equal(tensor_json_parse(text, 3, DT_INT64, none, 0, 1, out, &arena, "s", &err), 0);
    int64_t five = 5;
    assert_memory_equal(out, &five, 8);
}

static void test_element_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        enum dtype dt;
        const char *msg;
    } cases[] = {
        {"[1, 128]", DT_INT8, "input 'x': element 1 is out of range for datatype INT8"},
        {"[-129, 0]", DT_INT8, "input 'x': element 0 is out of range for datatype INT8"},
        {"[256, 0]", DT_UINT8, "input 'x': element 0 is out of range for datatype UINT8"},
        {"[-1, 0]", DT_UINT8, "input 'x': element 0 is out of range for datatype UINT8"},
        {"[32768, 0]", DT_INT16, "input 'x': element 0 is out of range for datatype INT16"},
        {"[65536, 0]", DT_UINT16, "input 'x': element 0 is out of range for datatype UINT16"},
        {"[2147483648,0]", DT_INT32, "input 'x': element 0 is out of range for datatype INT32"},
        {"[4294967296,0]", DT_UINT32, "input 'x': element 0 is out of range for datatype UINT32"},
        {"[9223372036854775808,0]", DT_INT64,
         "input 'x': element 0 is out of range for datatype INT64"},
        {"[18446744073709551616,0]", DT_UINT64,
         "input 'x': element 0 is out of range for datatype UINT64"},
        {"[1.5, 0]", DT_INT32, "input 'x': element 0 is not an integer for datatype INT32"},
        {"[0, 1e2]", DT_INT32, "input 'x': element 1 is not an integer for datatype INT32"},
        {"[0, 1e999]", DT_UINT64, "input 'x': element 1 is not an integer for datatype UINT64"},
        {"[NaN, 0]", DT_INT8, "input 'x': element 0 is not an integer for datatype INT8"},
        {"[0, -Infinity]", DT_UINT8, "input 'x': element 1 is not an integer for datatype UINT8"},
        {"[\"1\", 0]", DT_INT8, "input 'x': element 0 is not a number for datatype INT8"},
        {"[0, null]", DT_FP32, "input 'x': element 1 is not a number for datatype FP32"},
        {"[true, 0]", DT_FP64, "input 'x': element 0 is not a number for datatype FP64"},
        {"[{}, 0]", DT_FP16, "input 'x': element 0 is not a number for datatype FP16"},
        {"[1e39, 0]", DT_FP32, "input 'x': element 0 is out of range for datatype FP32"},
        {"[0, -1e309]", DT_FP64, "input 'x': element 1 is out of range for datatype FP64"},
        {"[65520, 0]", DT_FP16, "input 'x': element 0 is out of range for datatype FP16"},
        {"[0, -1e6]", DT_FP16, "input 'x': element 1 is out of range for datatype FP16"},
        {"[1, true]", DT_BOOL, "input 'x': element 0 is not true or false for datatype BOOL"},
        {"[true, null]", DT_BOOL, "input 'x': element 1 is not true or false for datatype BOOL"},
        {"[false, \"true\"]", DT_BOOL,
         "input 'x': element 1 is not true or false for datatype BOOL"},
        {"[\"a\", 1]", DT_BYTES, "input 'x': element 1 is not a string for datatype BYTES"},
        {"[[\"a\"], [null]]", DT_BYTES, "input 'x': element 1 is not a string for datatype BYTES"},
        {"[\"a\", {\"b\": [1, {}]}]", DT_BYTES,
         "input 'x': element 1 is not a string for datatype BYTES"},
        {"[1, 2]", DT_BF16, "input 'x': datatype BF16 is not supported in JSON"},
        {"[\"a\", 2]", DT_INVALID, "input 'x': datatype INVALID is not supported in JSON"},
        /* The first bad element wins. */
        {"[1, 300, 1.5]", DT_INT8, "input 'x': element 1 is out of range for datatype INT8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(cases[i].text, cases[i].dt, 2 + (i == sizeof cases / sizeof cases[0] - 1),
                     400, cases[i].msg);
    /* A later syntax error still beats a bad element. */
    expect_malformed("[300, 1,, 2]", DT_INT8, 3);
    expect_malformed("[\"a\", 1, \"\xFF\"]", DT_BYTES, 3);
    /* Zero elements of an unsupported type are fine (nothing to convert). */
    expect_ok("[]", DT_BF16, 0);
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "[", "[1", "[1,", "[1,]", "[,1]", "[1 2]", "[1]]", "[1] x", "[[1]", "[01]", "[1.]",
        "[.5]", "[+1]", "[1e]", "[-]", "[--1]", "[0x1]", "[1.5e+]", "[tru]", "[nul]", "[fals]",
        "[True]", "[nan]", "[inf]", "[Inf]", "[-NaN]", "[NaN1]", "[Infinityx]", "[1,,2]",
        "[{]", "[{\"a\"}]", "[{\"a\":}]", "[{\"a\" 1}]", "[{1:2}]", "[{\"a\":1,}]",
        "[{\"a\":1]", "[{\"a\":[1}]", "[\"\xC3\x28\"]", "[1]\x00", "['a']", "[1/2]",
        "[1]\xEF\xBB\xBF", "[\xEF\xBB\xBF 1]", "[\"a\"\"b\"]", "[[]]]", "[]]",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t shape[1] = {1};
        size_t len = strlen(cases[i]) + (strcmp(cases[i], "[1]") == 0); /* "[1]\0" */
        for (enum dtype dt = DT_BOOL; dt < DT_COUNT; dt++) {
            error_clear(&err);
            int rc = tensor_json_parse(cases[i], len, dt, shape, 1, 1, out, &arena, "x", &err);
            if (rc == 0 || err.status != 400 || !strstr(err.msg, "malformed JSON"))
                print_error("\"%s\" as %s: rc %d \"%s\"\n", cases[i], dtype_name(dt), rc,
                            err.msg);
            assert_int_equal(rc, -1);
            assert_non_null(strstr(err.msg, "malformed JSON"));
        }
    }
    expect_error("5", DT_INT8, 1, 400, "input 'x': 'data' must be an array");
    expect_error("", DT_INT8, 0, 400, "input 'x': 'data' must be an array");
    expect_error("{\"a\":1}", DT_INT8, 1, 400, "input 'x': 'data' must be an array");
    int64_t shape[1] = {0};
    assert_int_equal(tensor_json_parse(NULL, 0, DT_INT8, shape, 1, 0, out, &arena, "x", &err), -1);
}

static void test_arena_exhausted(void **state)
{
    (void)state;
    struct arena small;
    arena_init(&small, 256, 64);
    const char *text = "[\"\\u0041aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]";
    int64_t shape[1] = {1};
    struct tensor_bytes s[1];
    error_clear(&err);
    assert_int_equal(tensor_json_parse(text, strlen(text), DT_BYTES, shape, 1, 1, s, &small, "x",
                                       &err),
                     -1);
    assert_int_equal(err.status, 413);
    /* Without escapes nothing is allocated. */
    text = "[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]";
    assert_int_equal(tensor_json_parse(text, strlen(text), DT_BYTES, shape, 1, 1, s, &small, "x",
                                       &err),
                     0);
    arena_free(&small);
}

/* ---- writer ----------------------------------------------------------- */

static void expect_written(enum dtype dt, const void *data, int64_t count, const char *want)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    tensor_json_write(&b, dt, data, count);
    assert_int_equal(b.err, 0);
    if (b.len != strlen(want) || memcmp(b.data, want, b.len) != 0)
        print_error("%s: got \"%.*s\", want \"%s\"\n", dtype_name(dt), (int)b.len, b.data, want);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    buf_free(&b);
}

static void test_write(void **state)
{
    (void)state;
    unsigned char bools[3] = {1, 0, 2};
    expect_written(DT_BOOL, bools, 3, "[true,false,true]");
    int8_t i8[3] = {-128, 0, 127};
    expect_written(DT_INT8, i8, 3, "[-128,0,127]");
    uint8_t u8[2] = {0, 255};
    expect_written(DT_UINT8, u8, 2, "[0,255]");
    int16_t i16[2] = {-32768, 32767};
    expect_written(DT_INT16, i16, 2, "[-32768,32767]");
    uint16_t u16[1] = {65535};
    expect_written(DT_UINT16, u16, 1, "[65535]");
    int32_t i32[2] = {INT32_MIN, 7};
    expect_written(DT_INT32, i32, 2, "[-2147483648,7]");
    uint32_t u32[1] = {UINT32_MAX};
    expect_written(DT_UINT32, u32, 1, "[4294967295]");
    int64_t i64[2] = {INT64_MIN, INT64_MAX};
    expect_written(DT_INT64, i64, 2, "[-9223372036854775808,9223372036854775807]");
    uint64_t u64[1] = {UINT64_MAX};
    expect_written(DT_UINT64, u64, 1, "[18446744073709551615]");
    float f[7] = {0.1f, -0.0f, 1e-45f, FLT_MAX, NAN, INFINITY, 100};
    expect_written(DT_FP32, f, 7, "[0.1,-0,1e-45,3.4028235e+38,NaN,Infinity,100]");
    double d[4] = {0.1, 1e21, 5e-324, -INFINITY};
    expect_written(DT_FP64, d, 4, "[0.1,1e+21,5e-324,-Infinity]");
    uint16_t h[3] = {0x3C00, 0x7BFF, 0x0001};
    expect_written(DT_FP16, h, 3, "[1,65504,5.9604645e-8]");
    struct tensor_bytes s[3] = {{"a\"b\\", 4}, {"\0\x01\n\xC3\xA9\xFF", 6}, {"", 0}};
    expect_written(DT_BYTES, s, 3, "[\"a\\\"b\\\\\",\"\\u0000\\u0001\\n\xC3\xA9\\u00ff\",\"\"]");
    expect_written(DT_FP32, f, 0, "[]");
    expect_written(DT_BF16, h, 2, "[null,null]");

    /* A ceiling hit leaves a sticky error, exactly where output stops fitting. */
    static float many[1000];
    for (int i = 0; i < 1000; i++)
        many[i] = (float)i;
    struct buf b;
    buf_init(&b, 2048);
    tensor_json_write(&b, DT_FP32, many, 1000);
    assert_int_equal(b.err, -E2BIG);
    buf_free(&b);
    size_t exact = 2 + 999; /* "[0,1,...,999]": brackets, commas, digits */
    for (int i = 0; i < 1000; i++)
        exact += i < 10 ? 1 : i < 100 ? 2 : 3;
    buf_init(&b, exact);
    tensor_json_write(&b, DT_FP32, many, 1000);
    assert_int_equal(b.err, 0);
    assert_int_equal(b.len, exact);
    buf_free(&b);
    buf_init(&b, exact - 1);
    tensor_json_write(&b, DT_FP32, many, 1000);
    assert_int_equal(b.err, -E2BIG);
    tensor_json_write(&b, DT_FP32, many, 1); /* a no-op after the error */
    assert_int_equal(b.err, -E2BIG);
    buf_free(&b);
}

/* ---- differential against the tree path ------------------------------- */

/* The tree path; returns 1 (with *err) for malformed JSON. */
static int tree_parse(const char *text, size_t len, enum dtype dt, const int64_t *shape,
                      uint32_t ndim, int64_t count, void *dst, struct error *e)
{
    struct json_limits lim = {.max_depth = TENSOR_JSON_MAX_DEPTH, .allow_nonfinite = true};
    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(&arena, text, len, &lim, &root, &msg, &off) != 0) {
        error_set(e, 400, "malformed JSON at byte %zu: %s", off, msg);
        return 1;
    }
    if (root->type != JSON_ARRAY)
        return error_set(e, 400, "input 'x': 'data' must be an array");
    int64_t got = count_leaves(root);
    if (got != count) {
        char s[128];
        shape_format(shape, ndim, s, sizeof s);
        return error_set(e, 400, "input '%s': shape %s needs %lld elements, 'data' has %lld", "x",
                         s, (long long)count, (long long)got);
    }
    struct fill f = {.dtype = dt, .out = dst, .strs = dst, .err = e};
    return fill_leaves(&f, root);
}

static uint64_t rng_state = 5;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

struct text {
    char s[8192];
    size_t n;
};

static void put(struct text *t, const char *s)
{
    size_t k = strlen(s);
    if (t->n + k < sizeof t->s) {
        memcpy(t->s + t->n, s, k);
        t->n += k;
    }
}

static void random_ws(struct text *t)
{
    static const char *const ws[] = {"", "", "", " ", "\n", " \t", "\r\n "};
    put(t, ws[rnd_below(7)]);
}

/* A random scalar, usually of the kind the datatype wants. */
static void random_scalar(struct text *t, enum dtype dt)
{
    static const char *const numbers[] = {
        "0", "-0", "1", "-1", "127", "-128", "128", "255", "256", "-129", "32767", "32768",
        "65535", "65536", "-32769", "2147483647", "2147483648", "-2147483649", "4294967295",
        "4294967296", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1.5", "-0.0",
        "1e2", "1E-2", "0.1", "3.4028235e38", "3.4028236e38", "1e39", "1e309", "-1e309",
        "65504", "65519", "65520", "-65520", "1e-8", "5e-324", "1e-400", "NaN", "Infinity",
        "-Infinity", "100000000000000000000000", "0.30000000000000004", "1e-45",
    };
    static const char *const strings[] = {
        "\"\"", "\"abc\"", "\"a\\nb\"", "\"\\u0000\"", "\"\\u00e9\"", "\"\\ud83d\\ude00\"",
        "\"\xC3\xA9\"", "\"\\\"\\\\\\/\"", "\"x y z\"",
    };
    static const char *const others[] = {"true", "false", "null", "{}", "{\"a\":[1,{\"b\":null}]}",
                                         "[]"};
    unsigned kind = rnd_below(40) < 37 ? rnd_below(7) : 7 + rnd_below(3);
    bool want_num = dt != DT_BOOL && dt != DT_BYTES;
    char tmp[64];
    if (kind < 7) {
        if (dt == DT_BOOL) {
            put(t, rnd() & 1 ? "true" : "false");
        } else if (dt == DT_BYTES) {
            put(t, strings[rnd_below(sizeof strings / sizeof strings[0])]);
        } else if (kind < 4) { /* in range for most types */
            int v = (int)rnd_below(200) - 100;
            snprintf(tmp, sizeof tmp, "%d", dt >= DT_UINT8 && dt <= DT_UINT64 ? (v < 0 ? -v : v) : v);
            put(t, tmp);
        } else if (kind < 6 && dt >= DT_FP16) {
            float f;
            uint32_t bits = (uint32_t)rnd();
            memcpy(&f, &bits, 4);
            snprintf(tmp, sizeof tmp, "%.*g", 1 + (int)rnd_below(12), isfinite(f) ? f : 0.5);
            put(t, tmp);
        } else {
            put(t, numbers[rnd_below(sizeof numbers / sizeof numbers[0])]);
        }
    } else if (kind < 8 && want_num) {
        put(t, numbers[rnd_below(sizeof numbers / sizeof numbers[0])]);
    } else if (kind < 9) {
        put(t, strings[rnd_below(sizeof strings / sizeof strings[0])]);
    } else {
        put(t, others[rnd_below(sizeof others / sizeof others[0])]);
    }
}

/* An array nested like shape[dim..ndim), leaves random. */
static void random_array(struct text *t, enum dtype dt, const int64_t *shape, uint32_t ndim,
                         uint32_t dim)
{
    if (dim == ndim) {
        random_scalar(t, dt);
        return;
    }
    put(t, "[");
    for (int64_t i = 0; i < shape[dim]; i++) {
        random_ws(t);
        if (i)
            put(t, ",");
        random_ws(t);
        random_array(t, dt, shape, ndim, dim + 1);
    }
    random_ws(t);
    put(t, "]");
}

/* Small damage: drop, insert or replace a byte. */
static void mutate(struct text *t)
{
    static const char alphabet[] = "[]{},:\"\\ 0123456789-+.eEtfnuNI\x80\xC3\xFF\x01";
    if (t->n == 0)
        return;
    size_t at = rnd_below((unsigned)t->n);
    switch (rnd_below(3)) {
    case 0:
        memmove(t->s + at, t->s + at + 1, t->n - at - 1);
        t->n--;
        break;
    case 1:
        if (t->n + 1 < sizeof t->s) {
            memmove(t->s + at + 1, t->s + at, t->n - at);
            t->s[at] = alphabet[rnd_below(sizeof alphabet - 1)];
            t->n++;
        }
        break;
    default:
        t->s[at] = alphabet[rnd_below(sizeof alphabet - 1)];
        break;
    }
}

static unsigned char out_a[1 << 16], out_b[1 << 16];

/* Runs both paths on text; fails the test on any difference. */
static void compare_paths(const char *text, size_t len, enum dtype dt, const int64_t *shape,
                          uint32_t ndim, int64_t count, int *accepted)
{
    struct error ea, eb;
    error_clear(&ea);
    error_clear(&eb);
    memset(out_a, 0, sizeof out_a);
    memset(out_b, 0, sizeof out_b);
    int ra = tree_parse(text, len, dt, shape, ndim, count, out_a, &ea);
    int rb = tensor_json_parse(text, len, dt, shape, ndim, count, out_b, &arena, "x", &eb);
    bool same;
    if (ra == 1) /* malformed: the other must say so, or that it is no array */
        same = rb == -1 && eb.status == 400 &&
               (strstr(eb.msg, "malformed JSON") || strstr(eb.msg, "must be an array"));
    else if (ra != 0)
        same = rb == -1 && eb.status == ea.status && strcmp(ea.msg, eb.msg) == 0;
    else
        same = rb == 0;
    if (same && ra == 0) {
        (*accepted)++;
        if (dt == DT_BYTES) {
            const struct tensor_bytes *a = (const void *)out_a, *b = (const void *)out_b;
            for (int64_t i = 0; i < count && same; i++)
                same = a[i].len == b[i].len && memcmp(a[i].ptr, b[i].ptr, a[i].len) == 0;
        } else {
            same = memcmp(out_a, out_b, (size_t)count * dtype_size(dt)) == 0;
        }
    }
    if (!same)
        print_error("%s count %lld \"%.*s\":\n  tree rc %d \"%s\"\n  tensor_json rc %d \"%s\"\n",
                    dtype_name(dt), (long long)count, (int)len, text, ra, ea.msg, rb, eb.msg);
    assert_true(same);
}

/* Fewer under AddressSanitizer (see test_numparse.c). */
#if defined(__SANITIZE_ADDRESS__)
#define DIFF_ROUNDS 25000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DIFF_ROUNDS 25000
#endif
#endif
#ifndef DIFF_ROUNDS
#define DIFF_ROUNDS 200000
#endif

static void test_differential(void **state)
{
    (void)state;
    static struct text t;
    int accepted = 0;
    for (int round = 0; round < DIFF_ROUNDS; round++) {
        enum dtype dt = (enum dtype)(1 + rnd_below(DT_COUNT - 1));
        if (dt == DT_BF16 && rnd_below(4))
            dt = DT_FP32;
        uint32_t ndim = rnd_below(4);
        int64_t shape[4];
        for (uint32_t i = 0; i < ndim; i++)
            shape[i] = rnd_below(5);
        int64_t count = shape_count(shape, ndim, INT64_MAX);
        t.n = 0;
        random_ws(&t);
        if (ndim == 0) {
            put(&t, "[");
            random_scalar(&t, dt);
            put(&t, "]");
        } else {
            random_array(&t, dt, shape, ndim, 0);
        }
        random_ws(&t);
        unsigned damage = rnd_below(4) == 0 ? 1 + rnd_below(3) : 0;
        for (unsigned i = 0; i < damage; i++)
            mutate(&t);
        int64_t want = rnd_below(10) == 0 ? count + (int64_t)rnd_below(3) - 1 : count;
        if (want < 0)
            want = 0;
        compare_paths(t.s, t.n, dt, shape, ndim, want, &accepted);
        if (round % 1000 == 0)
            arena_reset(&arena);
    }
    /* A healthy share was accepted, so values were compared too. */
    assert_true(accepted > DIFF_ROUNDS / 5);
    print_message("differential: %d inputs, %d accepted by both\n", DIFF_ROUNDS, accepted);
}

/* Writer then parser is the identity, for random bit patterns. */
static void test_write_parse_roundtrip(void **state)
{
    (void)state;
    static unsigned char data[4096 * 8], back[4096 * 8];
    for (enum dtype dt = DT_BOOL; dt <= DT_FP64; dt++) {
        size_t size = dtype_size(dt);
        int64_t count = 4096;
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = (unsigned char)rnd();
        if (dt == DT_BOOL)
            for (int64_t i = 0; i < count; i++)
                data[i] &= 1;
        /* NaN payloads do not survive text; use plain NaNs. */
        for (int64_t i = 0; i < count; i++) {
            if (dt == DT_FP32) {
                float f;
                memcpy(&f, data + 4 * i, 4);
                if (isnan(f))
                    memcpy(data + 4 * i, &(float){1.5f}, 4);
            } else if (dt == DT_FP64) {
                double d;
                memcpy(&d, data + 8 * i, 8);
                if (isnan(d))
                    memcpy(data + 8 * i, &(double){-2.5}, 8);
            } else if (dt == DT_FP16) {
                uint16_t h;
                memcpy(&h, data + 2 * i, 2);
                if ((h & 0x7C00) == 0x7C00)
                    h &= 0xBFFF;
                memcpy(data + 2 * i, &h, 2);
            }
        }
        struct buf b;
        buf_init(&b, 1 << 22);
        tensor_json_write(&b, dt, data, count);
        assert_int_equal(b.err, 0);
        int64_t shape[1] = {count};
        error_clear(&err);
        int rc = tensor_json_parse(b.data, b.len, dt, shape, 1, count, back, &arena, "x", &err);
        if (rc)
            print_error("%s: %s\n", dtype_name(dt), err.msg);
        assert_int_equal(rc, 0);
        assert_memory_equal(back, data, (size_t)count * size);
        buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_numeric_types),   TEST(test_bytes),          TEST(test_nesting),
        TEST(test_counts),          TEST(test_element_errors), TEST(test_malformed),
        TEST(test_arena_exhausted), TEST(test_write),          TEST(test_differential),
        TEST(test_write_parse_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
