/* Unit tests of the KServe v2 JSON infer codec (api/infer_json.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_model.h"
#include "api/infer_json.h"
#include "base/mem.h"
#include "core/fp16.h"

static struct model model;

/* A request with every input valid; %s slots let tests replace pieces. */
#define IN_INT32 "{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[2,4],\"data\":[[1,2,3,4],[5,6,7,-2147483648]]}"
#define IN_FP32 "{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[0.1,-0,1e-45]}"
#define IN_BYTES "{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\\u0000b\",\"\"]}"
#define IN_BOOL "{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":[true,false]}"
#define IN_FP16 "{\"name\":\"IN_FP16\",\"datatype\":\"FP16\",\"shape\":[3],\"data\":[0.5,65504,-5.960464477539063e-08]}"
#define IN_UINT64 "{\"name\":\"IN_UINT64\",\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[18446744073709551615]}"
#define ALL_INPUTS IN_INT32 "," IN_FP32 "," IN_BYTES "," IN_BOOL "," IN_FP16 "," IN_UINT64

struct decoded {
    struct infer_request req;
    struct error err;
    int rc;
};

static void decode(struct decoded *d, const char *body)
{
    memset(d, 0, sizeof *d);
    arena_init(&d->req.arena, 4096, 1 << 20);
    d->req.model = &model;
    d->rc = infer_json_decode(&d->req, &model, body, strlen(body), &d->err);
}

static void done(struct decoded *d)
{
    arena_free(&d->req.arena);
}

static void expect_error(const char *body, int status, const char *needle)
{
    struct decoded d;
    decode(&d, body);
    if (d.rc != -1 || d.err.status != status || !strstr(d.err.msg, needle))
        fail_msg("body %s\n  rc=%d status=%d msg=%s\n  wanted %d containing '%s'", body, d.rc,
                 d.err.status, d.err.msg, status, needle);
    done(&d);
}

static void test_decode_every_input(void **state)
{
    (void)state;
    struct decoded d;
    decode(&d, "{\"id\":\"req-7\",\"parameters\":{\"priority\":1,\"x\":\"y\",\"z\":true},"
               "\"inputs\":[" ALL_INPUTS "]}");
    assert_int_equal(d.rc, 0);
    assert_string_equal(d.req.id, "req-7");
    assert_int_equal(d.req.ninputs, 6);

    const struct tensor *t = &d.req.inputs[0];
    assert_string_equal(t->name, "IN_INT32");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->nbytes, 32);
    int32_t ints[8];
    memcpy(ints, t->data, sizeof ints);
    assert_int_equal(ints[4], 5);
    assert_int_equal(ints[7], INT32_MIN);

    t = &d.req.inputs[1];
    float f[3];
    memcpy(f, t->data, sizeof f);
    assert_true(f[0] == 0.1f);
    assert_true(f[1] == 0.0f && signbit(f[1]));
    assert_true(f[2] == 0x1p-149f); /* smallest subnormal */

    t = &d.req.inputs[2];
    const struct tensor_bytes *s = t->data;
    assert_int_equal(s[0].len, 3);
    assert_memory_equal(s[0].ptr, "a\0b", 3);
    assert_int_equal(s[1].len, 0);
    assert_int_equal(t->nbytes, 3);

    t = &d.req.inputs[3];
    assert_memory_equal(t->data, "\1\0", 2);

    t = &d.req.inputs[4];
    uint16_t h[3];
    memcpy(h, t->data, sizeof h);
    assert_int_equal(h[0], fp16_from_float(0.5f));
    assert_int_equal(h[1], 0x7bff);
    assert_int_equal(h[2], 0x8001);

    uint64_t u;
    memcpy(&u, d.req.inputs[5].data, 8);
    assert_true(u == UINT64_MAX);

    /* No "outputs": every model output in model order. */
    assert_int_equal(d.req.noutputs, 2);
    assert_string_equal(d.req.output_names[0], "OUT_A");
    assert_string_equal(d.req.output_names[1], "OUT_B");
    done(&d);
}

static void test_requested_outputs_keep_request_order(void **state)
{
    (void)state;
    struct decoded d;
    decode(&d, "{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_B\"},"
               "{\"name\":\"OUT_A\",\"parameters\":{\"binary_data\":false}}]}");
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.noutputs, 2);
    assert_string_equal(d.req.output_names[0], "OUT_B");
    assert_string_equal(d.req.output_names[1], "OUT_A");
    done(&d);
}

static void test_nested_and_flat_data_are_equal(void **state)
{
    (void)state;
    struct decoded a, b;
    decode(&a, "{\"inputs\":[" ALL_INPUTS "]}");
    decode(&b, "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[2,4],"
               "\"data\":[1,2,3,4,5,6,7,-2147483648]}," IN_FP32 "," IN_BYTES "," IN_BOOL
               "," IN_FP16 "," IN_UINT64 "]}");
    assert_int_equal(a.rc, 0);
    assert_int_equal(b.rc, 0);
    assert_memory_equal(a.req.inputs[0].data, b.req.inputs[0].data, 32);
    done(&a);
    done(&b);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("", 400, "malformed JSON");
    expect_error("{\"inputs\":[", 400, "malformed JSON");
    expect_error("[1]", 400, "must be a JSON object");
    expect_error("{}", 400, "'inputs'");
    expect_error("{\"inputs\":[]}", 400, "'inputs'");
    expect_error("{\"inputs\":{}}", 400, "'inputs'");
    expect_error("{\"id\":5,\"inputs\":[" ALL_INPUTS "]}", 400, "'id'");
    expect_error("{\"inputs\":[" IN_INT32 "]}", 400, "missing input 'IN_FP32'");
    expect_error("{\"inputs\":[" ALL_INPUTS "," IN_BOOL "]}", 400, "duplicate input 'IN_BOOL'");
    expect_error("{\"inputs\":[{\"name\":\"NOPE\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
                 400, "unknown input 'NOPE'");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"INT8\",\"shape\":[2],\"data\":[1,0]}]}",
                 400, "datatype INT8 does not match the model's BOOL");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOLEAN\",\"shape\":[2],\"data\":[1,0]}]}",
                 400, "unknown datatype");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[3],\"data\":[true,true,true]}]}",
                 400, "does not match the model's [2]");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[8],\"data\":[1,2,3,4,5,6,7,8]}]}",
                 400, "does not match the model's [-1,4]");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],\"data\":[1,2,3]}]}",
                 400, "needs 4 elements, 'data' has 3");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[-1,4],\"data\":[]}]}",
                 400, "non-negative");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],\"data\":[1,2,3,2147483648]}]}",
                 400, "element 3 is out of range for datatype INT32");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],\"data\":[1,2,3.5,4]}]}",
                 400, "element 2 is not an integer");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],\"data\":[1,true,3,4]}]}",
                 400, "element 1 is not a number");
    expect_error("{\"inputs\":[{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[1,1],\"data\":[1e39]}]}",
                 400, "out of range for datatype FP32");
    expect_error("{\"inputs\":[{\"name\":\"IN_FP16\",\"datatype\":\"FP16\",\"shape\":[1],\"data\":[65520]}]}",
                 400, "out of range for datatype FP16");
    expect_error("{\"inputs\":[{\"name\":\"IN_UINT64\",\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[-1]}]}",
                 400, "out of range for datatype UINT64");
    expect_error("{\"inputs\":[{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[1]}]}",
                 400, "not a string");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":[1,0]}]}",
                 400, "not true or false");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":true}]}",
                 400, "'data' must be an array");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"NOPE\"}]}", 400,
                 "unknown output 'NOPE'");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\"},{\"name\":\"OUT_A\"}]}",
                 400, "duplicate output");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[]}", 400, "non-empty");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"a\":[1]}}", 400,
                 "must be a string, number or bool");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"binary_data_output\":true}}", 400,
                 "binary tensor data");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],"
                 "\"parameters\":{\"binary_data_size\":2}}]}",
                 400, "binary tensor data");
    /* Shapes with a huge element count are refused before any allocation. */
    expect_error("{\"inputs\":[{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[4294967296,4294967296],\"data\":[]}]}",
                 400, "too many elements");
}

static void test_memory_ceiling_gives_413(void **state)
{
    (void)state;
    struct decoded d;
    memset(&d, 0, sizeof d);
    arena_init(&d.req.arena, 256, 2048); /* far too small for this request */
    const char *body = "{\"inputs\":[" ALL_INPUTS "]}";
    d.rc = infer_json_decode(&d.req, &model, body, strlen(body), &d.err);
    assert_int_equal(d.rc, -1);
    assert_int_equal(d.err.status, 413);
    done(&d);
}

/* Every allocation failure point gives a clean error, never a crash or leak. */
static void test_allocation_failures(void **state)
{
    (void)state;
    const char *body = "{\"inputs\":[" ALL_INPUTS "]}";
    for (long n = 0; n < 200; n++) {
        struct decoded d;
        memset(&d, 0, sizeof d);
        arena_init(&d.req.arena, 512, 1 << 20);
        mem_fail_after(n);
        d.rc = infer_json_decode(&d.req, &model, body, strlen(body), &d.err);
        mem_fail_reset();
        if (d.rc != 0)
            assert_true(d.err.status == 413 || d.err.status == 400);
        done(&d);
        if (d.rc == 0)
            break;
    }
}

static void test_encode_response(void **state)
{
    (void)state;
    struct infer_request req;
    memset(&req, 0, sizeof req);
    req.model = &model;
    req.id = "x\"y";
    req.id_len = 3;
    float a[4] = {0.1f, -0.0f, 3.4028235e38f, 1e-45f};
    struct tensor_bytes b[2] = {{"hi", 2}, {"\n", 1}};
    struct tensor outs[2] = {
        {.name = "OUT_A", .dtype = DT_FP32, .ndim = 2, .shape = {1, 4}, .data = a, .nbytes = 16},
        {.name = "OUT_B", .dtype = DT_BYTES, .ndim = 1, .shape = {2}, .data = b, .nbytes = 3},
    };
    req.outputs = outs;
    req.noutputs = 2;
    struct buf out;
    buf_init(&out, 1 << 20);
    infer_json_encode(&req, &out);
    assert_int_equal(out.err, 0);
    const char *want = "{\"model_name\":\"test\",\"model_version\":\"3\",\"id\":\"x\\\"y\","
                       "\"outputs\":[{\"name\":\"OUT_A\",\"datatype\":\"FP32\",\"shape\":[1,4],"
                       "\"data\":[0.1,-0,3.4028235e+38,1e-45]},{\"name\":\"OUT_B\",\"datatype\":"
                       "\"BYTES\",\"shape\":[2],\"data\":[\"hi\",\"\\n\"]}]}";
    if (out.len != strlen(want) || memcmp(out.data, want, out.len) != 0)
        fail_msg("got  %.*s\nwant %s", (int)out.len, out.data, want);
    buf_free(&out);
}

int main(void)
{
    test_model_init(&model);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_every_input),
        cmocka_unit_test(test_requested_outputs_keep_request_order),
        cmocka_unit_test(test_nested_and_flat_data_are_equal),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_memory_ceiling_gives_413),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_encode_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
