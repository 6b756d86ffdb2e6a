/* Unit tests of the KServe v2 JSON infer codec (api/rest/infer_json.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../support/infer_compare.h"
#include "../support/test_model.h"
#include "api/rest/infer_json_scan.h"
#include "api/rest/infer_json.h"
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
    d->rc = infer_json_decode(&d->req, NULL, &model, body, strlen(body), -1, &d->err);
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
    assert_int_equal(d.req.priority, 1);
    assert_int_equal(d.req.timeout_us, 0);
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
    assert_non_null(d.req.output_binary);
    assert_false(d.req.output_binary[0]);
    assert_false(d.req.output_binary[1]);
    assert_null(d.req.output_classes); /* none asked */
    done(&d);
}

/* Triton's classification extension: the count per requested output, 0
 * for the others; counts beyond UINT32_MAX saturate (any count is clamped
 * to the output's classes later). */
static void test_classification_counts(void **state)
{
    (void)state;
    struct decoded d;
    decode(&d, "{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_B\"},"
               "{\"name\":\"OUT_A\",\"parameters\":{\"classification\":3,\"binary_data\":true}}]}");
    assert_int_equal(d.rc, 0);
    assert_non_null(d.req.output_classes);
    assert_int_equal(d.req.output_classes[0], 0);
    assert_int_equal(d.req.output_classes[1], 3);
    assert_true(d.req.output_binary[1]);
    done(&d);
    decode(&d, "{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
               "{\"classification\":99999999999}}]}");
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.output_classes[0], UINT32_MAX);
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

/* A graph of constants: "inputs": [] is the whole request. */
static void test_model_without_inputs(void **state)
{
    (void)state;
    struct model constants = model;
    constants.info.inputs = NULL;
    constants.info.ninputs = 0;
    struct decoded d;
    memset(&d, 0, sizeof d);
    arena_init(&d.req.arena, 4096, 1 << 20);
    const char *body = "{\"inputs\":[],\"outputs\":[{\"name\":\"OUT_B\"}]}";
    d.rc = infer_json_decode(&d.req, NULL, &constants, body, strlen(body), -1, &d.err);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.ninputs, 0);
    assert_int_equal(d.req.batch, 1);
    assert_int_equal(d.req.noutputs, 1);
    assert_string_equal(d.req.output_names[0], "OUT_B");
    done(&d);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("", 400, "malformed JSON");
    expect_error("{\"inputs\":[", 400, "malformed JSON");
    expect_error("[1]", 400, "must be a JSON object");
    expect_error("{}", 400, "'inputs'");
    expect_error("{\"inputs\":[]}", 400, "missing input 'IN_INT32'");
    expect_error("{\"inputs\":{}}", 400, "'inputs'");
    expect_error("{\"id\":5,\"inputs\":[" ALL_INPUTS "]}", 400, "'id'");
    expect_error("{\"inputs\":[" IN_INT32 "]}", 400, "missing input 'IN_FP32'");
    expect_error("{\"inputs\":[" ALL_INPUTS "," IN_BOOL "]}", 400, "duplicate input 'IN_BOOL'");
    expect_error(
        "{\"inputs\":[{\"name\":\"NOPE\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", 400,
        "unexpected inference input 'NOPE' for model 'test', which has inputs: 'IN_INT32' (INT32 "
        "[-1,4]), 'IN_FP32' (FP32 [-1,-1]), 'IN_BYTES' (BYTES [-1]), 'IN_BOOL' (BOOL [2]), "
        "'IN_FP16' (FP16 [-1]), 'IN_UINT64' (UINT64 [-1])");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"INT8\",\"shape\":[2],\"data\":[1,0]}]}",
                 400, "inference input 'IN_BOOL' data-type is 'INT8', but model 'test' expects 'BOOL'");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOLEAN\",\"shape\":[2],\"data\":[1,0]}]}",
                 400, "unknown datatype");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[3],\"data\":[true,true,true]}]}",
                 400, "unexpected shape for input 'IN_BOOL' for model 'test'. Expected [2], got [3]");
    expect_error("{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[8],\"data\":[1,2,3,4,5,6,7,8]}]}",
                 400, "unexpected shape for input 'IN_INT32' for model 'test'. Expected [-1,4], got [8]");
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
                 "unexpected inference output 'NOPE' for model 'test', which has outputs: 'OUT_A'");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\"},{\"name\":\"OUT_A\"}]}",
                 400, "duplicate output");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[]}", 400, "non-empty");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"a\":[1]}}", 400,
                 "must be a string, number or bool");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"binary_data_output\":1}}", 400,
                 "request: parameter 'binary_data_output' must be true or false");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"priority\":\"high\"}}", 400,
                 "parameter 'priority' must be a non-negative integer");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"priority\":-1}}", 400,
                 "parameter 'priority' must be a non-negative integer");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"parameters\":{\"priority\":1.5}}", 400,
                 "parameter 'priority' must be a non-negative integer");
    expect_error("{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
                 "{\"binary_data\":\"yes\"}}]}",
                 400, "output 'OUT_A': parameter 'binary_data' must be true or false");
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],"
                 "\"parameters\":{\"binary_data_size\":2}}]}",
                 400, "input 'IN_BOOL': 'binary_data_size' needs the Inference-Header-Content-Length header");
    static const char *const bad_classes[] = {"0", "-1", "1.5", "\"2\"", "true"};
    for (size_t i = 0; i < sizeof bad_classes / sizeof bad_classes[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"inputs\":[" ALL_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
                 "{\"classification\":%s}}]}",
                 bad_classes[i]);
        expect_error(body, 400, "output 'OUT_A': parameter 'classification' must be a positive integer");
    }
    expect_error("{\"inputs\":[{\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],"
                 "\"parameters\":{\"shared_memory_region\":\"r\"}}]}",
                 400, "shared memory is not supported");
    /* Shapes with a huge element count are refused before any allocation. */
    expect_error("{\"inputs\":[{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[4294967296,4294967296],\"data\":[]}]}",
                 400, "too many elements");
}

/* ---- the everyday request without a tree (infer_json_scan.h) ------------ */

/* Every input in the everyday shape: plain strings, no parameters. */
#define PLAIN_BYTES "{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"ab\",\"\"]}"
#define PLAIN_INPUTS IN_INT32 "," IN_FP32 "," PLAIN_BYTES "," IN_BOOL "," IN_FP16 "," IN_UINT64

/* Decodes body[0..len) (header_len: its Inference-Header-Content-Length,
 * -1 none) with infer_json_decode() and with the general decoder alone:
 * same result, same request or the same error. Returns the arena bytes
 * each used through *used and *general_used. */
static void expect_same_as_general_bytes(const char *body, size_t len, int64_t header_len,
                                         size_t *used, size_t *general_used)
{
    struct decoded d, g;
    memset(&d, 0, sizeof d);
    arena_init(&d.req.arena, 4096, 1 << 20);
    d.req.model = &model;
    d.rc = infer_json_decode(&d.req, NULL, &model, body, len, header_len, &d.err);
    memset(&g, 0, sizeof g);
    arena_init(&g.req.arena, 4096, 1 << 20);
    g.req.model = &model;
    g.rc = infer_json_decode_general(&g.req, NULL, &model, body, len, header_len, &g.err);
    const char *diff = d.rc == 0 && g.rc == 0 ? infer_request_diff(&d.req, &g.req) : NULL;
    if (d.rc != g.rc || diff ||
        (d.rc != 0 && (d.err.status != g.err.status || strcmp(d.err.msg, g.err.msg) != 0)))
        fail_msg("body %.*s\n  decode rc=%d %d %s\n  general rc=%d %d %s\n  differ in: %s",
                 (int)len, body, d.rc, d.err.status, d.rc ? d.err.msg : "", g.rc, g.err.status,
                 g.rc ? g.err.msg : "", diff ? diff : "-");
    if (used)
        *used = d.req.arena.used;
    if (general_used)
        *general_used = g.req.arena.used;
    done(&d);
    done(&g);
}

static void expect_same_as_general(const char *body, size_t *used, size_t *general_used)
{
    expect_same_as_general_bytes(body, strlen(body), -1, used, general_used);
}

/* A body the scanner reads, decoded as the general decoder does it: when
 * `decoded`, without the tree (less of the arena than the general
 * decoder); else refused by the checks, its allocations rewound (as much
 * of the arena as the general decoder alone). */
static void expect_read(const char *body, bool decoded)
{
    struct infer_json_doc doc;
    if (!infer_json_scan(body, strlen(body), &doc))
        fail_msg("not read as an everyday request: %s", body);
    size_t used, general_used;
    expect_same_as_general(body, &used, &general_used);
    if (decoded ? used >= general_used : used != general_used)
        fail_msg("%zu arena bytes, the general decoder %zu: %s", used, general_used, body);
}

static void test_plain_requests(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"inputs\":[" PLAIN_INPUTS "]}",
        "{\"id\":\"r-1\",\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_B\"}]}",
        "{\"outputs\":[{\"name\":\"OUT_B\"},{\"name\":\"OUT_A\"}],\"inputs\":[" PLAIN_INPUTS
        "],\"id\":\"\"}",
        " \r\n{ \"inputs\" : [ { \"data\" : [ [1, 2, 3, 4] ] , \"shape\" : [ 1 , 4 ] ,"
        " \"datatype\" : \"INT32\" , \"name\" : \"IN_INT32\" } ,"
        " {\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[0,3],\"data\":[]},"
        " {\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[0],\"data\":[]},"
        " {\"name\":\"IN_BOOL\",\"datatype\":\"BOOL\",\"shape\":[2],\"data\":[[true],[false]]},"
        " {\"name\":\"IN_FP16\",\"datatype\":\"FP16\",\"shape\":[1],\"data\":[NaN]},"
        " {\"name\":\"IN_UINT64\",\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[0]} ] }\t\n",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"parameters\":{\"binary_data\":true},"
        "\"name\":\"OUT_A\"},{\"name\":\"OUT_B\"}]}",
        "{\"parameters\":{\"binary_data_output\":true},\"inputs\":[" PLAIN_INPUTS "]}",
        "{\"parameters\":{\"binary_data_output\":true},\"inputs\":[" PLAIN_INPUTS
        "],\"outputs\":[{\"name\":\"OUT_B\",\"parameters\":{\"binary_data\":false}},"
        "{\"name\":\"OUT_A\"}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        expect_read(bodies[i], true);
}

/* Binary tensor data after the JSON (Triton's clients' way): read by the
 * everyday path too, the same request as the general decoder's. */
static void test_plain_binary(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"shape\":[1,4],\"datatype\":\"INT32\","
        "\"parameters\":{\"binary_data_size\":16}}," IN_FP32 "," PLAIN_BYTES "," IN_BOOL ","
        IN_FP16 "," IN_UINT64 "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
        "{\"binary_data\":true}}]}",
        "{\"inputs\":[" IN_INT32 "," IN_FP32 ",{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\","
        "\"shape\":[2],\"parameters\":{\"binary_data_size\":16}}," IN_BOOL "," IN_FP16 ","
        IN_UINT64 "]}",
    };
    /* 16 bytes each: four INT32s, or two BYTES elements (4-byte lengths). */
    static const char tails[][16] = {
        {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, (char)0xff, (char)0xff, (char)0xff, (char)0xff},
        {3, 0, 0, 0, 'a', 'b', 'c', 5, 0, 0, 0, 'd', 'e', 'f', 'g', 'h'},
    };
    for (size_t i = 0; i < 2; i++) {
        char body[2048];
        size_t head = strlen(heads[i]);
        memcpy(body, heads[i], head);
        memcpy(body + head, tails[i], 16);
        struct infer_json_doc doc;
        if (!infer_json_scan(body, head, &doc))
            fail_msg("not read as an everyday request: %s", heads[i]);
        size_t used, general_used;
        expect_same_as_general_bytes(body, head + 16, (int64_t)head, &used, &general_used);
        if (used >= general_used)
            fail_msg("%zu arena bytes, the general decoder %zu: %s", used, general_used, heads[i]);
        /* Wrong sizes and headers: the general decoder's errors. */
        expect_same_as_general_bytes(body, head + 15, (int64_t)head, NULL, NULL);
        expect_same_as_general_bytes(body, head + 16, (int64_t)head - 1, NULL, NULL);
        expect_same_as_general_bytes(body, head + 16, -1, NULL, NULL);
        expect_same_as_general_bytes(body, head, -1, NULL, NULL);
        memcpy(body + head + 16, "xx", 2);
        expect_same_as_general_bytes(body, head + 18, (int64_t)head, &used, &general_used);
        assert_int_equal(used, general_used); /* refused: rewound */
    }
}

/* Bodies left to the general decoder; the answers are its own either way. */
static void test_plain_declines(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"inputs\":[" ALL_INPUTS "]}",                            /* an escape in a string */
        "{\"inputs\":[" PLAIN_INPUTS "],\"parameters\":{\"priority\":2}}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
        "{\"classification\":2}}]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"parameters\":{\"binary_data_output\":true,"
        "\"timeout\":5}}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\",\"parameters\":"
        "{\"binary_data\":1}}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,4],\"parameters\":{\"binary_data_size\":16}}]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"inputs\":[]}",            /* a member twice */
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"extra\":1}",
        "{\"id\":\"r\"}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1.0,4],"
        "\"data\":[1,2,3,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[01,4],"
        "\"data\":[1,2,3,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[-1,4],"
        "\"data\":[1,2,3,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,{}]}]}",
        "{\"inputs\":[{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[1],"
        "\"data\":[\"\xc3\xa9\"]}]}",
        "{\"inputs\":[]} x",
        "{\"inputs\":[" PLAIN_INPUTS "]",
        "[]",
        "",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct infer_json_doc doc;
        if (infer_json_scan(bodies[i], strlen(bodies[i]), &doc))
            fail_msg("read as an everyday request: %s", bodies[i]);
        expect_same_as_general(bodies[i], NULL, NULL);
    }
}

/* Read by the scanner, refused by the checks: the general decoder's
 * errors, word for word, and nothing left behind in the arena. */
static void test_plain_errors(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"inputs\":[{\"name\":\"NOPE\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[1]}]}",
        "{\"inputs\":[" PLAIN_INPUTS "," IN_BOOL "]}",
        "{\"inputs\":[" IN_INT32 "]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT33\",\"shape\":[1,4],"
        "\"data\":[1,2,3,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,5],"
        "\"data\":[1,2,3,4,5]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"FP32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,4]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],"
        "\"data\":[1,2,3]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,1e400]}]}",
        "{\"inputs\":[{\"name\":\"IN_INT32\",\"datatype\":\"INT32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,,]}]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_C\"}]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\"},{\"name\":\"OUT_A\"}]}",
        "{\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\"},{\"name\":\"OUT_B\"},"
        "{\"name\":\"OUT_A\"}]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        expect_read(bodies[i], false);
}

/* An arena far too small for body (a ceiling of max bytes) gives 413. */
static void expect_413(const char *body, size_t max)
{
    struct decoded d;
    memset(&d, 0, sizeof d);
    arena_init(&d.req.arena, 256, max);
    d.rc = infer_json_decode(&d.req, NULL, &model, body, strlen(body), -1, &d.err);
    assert_int_equal(d.rc, -1);
    assert_int_equal(d.err.status, 413);
    done(&d);
}

/* Every allocation failure decoding body (arenas of `chunk`-byte chunks)
 * gives a clean error, never a crash or a leak; and an arena far too small
 * gives 413. */
static void expect_clean_failures(const char *body, size_t chunk)
{
    for (long n = 0; n < 200; n++) {
        struct decoded d;
        memset(&d, 0, sizeof d);
        arena_init(&d.req.arena, chunk, 1 << 20);
        mem_fail_after(n);
        d.rc = infer_json_decode(&d.req, NULL, &model, body, strlen(body), -1, &d.err);
        mem_fail_reset();
        if (d.rc != 0)
            assert_true(d.err.status == 413 || d.err.status == 400);
        done(&d);
        if (d.rc == 0)
            break;
    }
    expect_413(body, 512);
}

/* The everyday path: its allocations fail cleanly too. */
static void test_plain_allocation_failures(void **state)
{
    (void)state;
    expect_clean_failures(
        "{\"id\":\"x\",\"inputs\":[" PLAIN_INPUTS "],\"outputs\":[{\"name\":\"OUT_A\"}]}", 128);
}

static void test_memory_ceiling_gives_413(void **state)
{
    (void)state;
    expect_413("{\"inputs\":[" ALL_INPUTS "]}", 2048);
}

/* Every allocation failure point gives a clean error, never a crash or leak. */
static void test_allocation_failures(void **state)
{
    (void)state;
    expect_clean_failures("{\"inputs\":[" ALL_INPUTS "]}", 512);
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
    size_t json_len = 99;
    infer_json_encode(&req, NULL, &out, &json_len);
    assert_int_equal(out.err, 0);
    assert_int_equal(json_len, 0);
    const char *want = "{\"model_name\":\"test\",\"model_version\":\"3\",\"id\":\"x\\\"y\","
                       "\"outputs\":[{\"name\":\"OUT_A\",\"datatype\":\"FP32\",\"shape\":[1,4],"
                       "\"data\":[0.1,-0,3.4028235e+38,1e-45]},{\"name\":\"OUT_B\",\"datatype\":"
                       "\"BYTES\",\"shape\":[2],\"data\":[\"hi\",\"\\n\"]}]}";
    if (out.len != strlen(want) || memcmp(out.data, want, out.len) != 0)
        fail_msg("got  %.*s\nwant %s", (int)out.len, out.data, want);
    buf_free(&out);
}

/* ---- binary tensor data extension ------------------------------------ */

/* A request body in a 16-aligned buffer: the JSON header, padded with
 * spaces so that the binary part starts `skew` bytes past a multiple of 8,
 * then the binary part. */
struct body {
    _Alignas(16) char data[8192];
    size_t len;
    size_t json_len;
};

static void body_begin(struct body *b, size_t skew, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void body_begin(struct body *b, size_t skew, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data, sizeof b->data, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof b->data - 64);
    b->len = (size_t)n;
    while (b->len % 8 != skew)
        b->data[b->len++] = ' ';
    b->json_len = b->len;
}

static void body_add(struct body *b, const void *p, size_t n)
{
    assert_true(b->len + n <= sizeof b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* Appends one BYTES element: 4-byte little-endian length, then the bytes. */
static void body_add_str(struct body *b, const char *s, uint32_t n)
{
    unsigned char prefix[4] = {(unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                               (unsigned char)(n >> 24)};
    body_add(b, prefix, 4);
    body_add(b, s, n);
}

static void decode_with(struct decoded *d, const struct model *m, const char *body, size_t len,
                        int64_t header_len)
{
    memset(d, 0, sizeof *d);
    arena_init(&d->req.arena, 4096, 1 << 20);
    d->req.model = (struct model *)m;
    d->rc = infer_json_decode(&d->req, NULL, m, body, len, header_len, &d->err);
}

static void decode_body(struct decoded *d, const struct model *m, const struct body *b)
{
    decode_with(d, m, b->data, b->len, (int64_t)b->json_len);
}

static void expect_decode_error(const struct model *m, const char *body, size_t len,
                                int64_t header_len, int status, const char *needle)
{
    struct decoded d;
    decode_with(&d, m, body, len, header_len);
    if (d.rc != -1 || d.err.status != status || !strstr(d.err.msg, needle))
        fail_msg("body %.*s (header %lld)\n  rc=%d status=%d msg=%s\n  wanted %d containing '%s'",
                 (int)len, body, (long long)header_len, d.rc, d.err.status, d.err.msg, status,
                 needle);
    done(&d);
}

static void expect_body_error(const struct model *m, const struct body *b, const char *needle)
{
    expect_decode_error(m, b->data, b->len, (int64_t)b->json_len, 400, needle);
}

static bool points_into(const void *p, const struct body *b)
{
    return (const char *)p >= b->data && (const char *)p < b->data + b->len;
}

static void model_make(struct model *m, struct model_io *inputs, uint32_t ninputs,
                       struct model_io *outputs, uint32_t noutputs, bool batched)
{
    test_model_init(m);
    m->name = "aux";
    m->info.inputs = inputs;
    m->info.ninputs = ninputs;
    m->info.outputs = outputs;
    m->info.noutputs = noutputs;
    m->run_info = m->info;
    m->batched = batched;
}

/* One input per datatype that has a binary form, each of shape [-1]. */
static const enum dtype every_dtype[] = {DT_BOOL,  DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64,
                                         DT_INT8,  DT_INT16, DT_INT32,  DT_INT64,  DT_FP16,
                                         DT_FP32,  DT_FP64,  DT_BF16,   DT_BYTES};
#define NEVERY (sizeof every_dtype / sizeof every_dtype[0])
static struct model_io every_inputs[NEVERY];
static struct model_io every_outputs[] = {{"OUT", DT_FP32, 1, {-1}}};
static struct model every_model;

static struct model_io f64_inputs[] = {{"X", DT_FP64, 1, {-1}}};
static struct model_io f64_outputs[] = {{"Y", DT_FP64, 1, {-1}}};
static struct model f64_model; /* one FP64 input, not batched */

static void aux_models_init(void)
{
    static char names[NEVERY][16];
    for (size_t i = 0; i < NEVERY; i++) {
        snprintf(names[i], sizeof names[i], "IN_%s", dtype_name(every_dtype[i]));
        every_inputs[i] = (struct model_io){names[i], every_dtype[i], 1, {-1}};
    }
    model_make(&every_model, every_inputs, NEVERY, every_outputs, 1, false);
    model_make(&f64_model, f64_inputs, 1, f64_outputs, 1, false);
}

static void test_binary_every_dtype(void **state)
{
    (void)state;
    char json[4096];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"inputs\":[");
    for (size_t i = 0; i < NEVERY; i++) {
        enum dtype t = every_dtype[i];
        size_t size = t == DT_BYTES ? 3 * 4 + 5 : 3 * dtype_size(t); /* BYTES: "", "a", "\0bc\xff" */
        n += (size_t)snprintf(json + n, sizeof json - n,
                              "%s{\"name\":\"IN_%s\",\"datatype\":\"%s\",\"shape\":[3],"
                              "\"parameters\":{\"binary_data_size\":%zu}}",
                              i ? "," : "", dtype_name(t), dtype_name(t), size);
    }
    snprintf(json + n, sizeof json - n, "]}");

    for (size_t skew = 0; skew < 8; skew++) {
        struct body b;
        body_begin(&b, skew, "%s", json);
        size_t offsets[NEVERY];
        unsigned char pattern = 1;
        for (size_t i = 0; i < NEVERY; i++) {
            offsets[i] = b.len;
            if (every_dtype[i] == DT_BYTES) {
                body_add_str(&b, "", 0);
                body_add_str(&b, "a", 1);
                body_add_str(&b, "\0bc\xff", 4);
                continue;
            }
            size_t size = 3 * dtype_size(every_dtype[i]);
            for (size_t k = 0; k < size; k++) {
                unsigned char x = every_dtype[i] == DT_BOOL ? (unsigned char)(k & 1) : pattern++;
                body_add(&b, &x, 1);
            }
        }
        struct decoded d;
        decode_body(&d, &every_model, &b);
        if (d.rc != 0)
            fail_msg("skew %zu: %s", skew, d.err.msg);
        assert_int_equal(d.req.ninputs, NEVERY);
        for (size_t i = 0; i < NEVERY; i++) {
            const struct tensor *t = &d.req.inputs[i];
            assert_int_equal(t->dtype, every_dtype[i]);
            assert_int_equal(t->ndim, 1);
            assert_int_equal(t->shape[0], 3);
            if (t->dtype == DT_BYTES) {
                const struct tensor_bytes *e = t->data;
                assert_int_equal(t->nbytes, 5);
                assert_int_equal(e[0].len, 0);
                assert_int_equal(e[1].len, 1);
                assert_int_equal(e[2].len, 4);
                /* Elements point into the body, past their length prefixes. */
                assert_ptr_equal(e[1].ptr, b.data + offsets[i] + 8);
                assert_ptr_equal(e[2].ptr, b.data + offsets[i] + 13);
                assert_memory_equal(e[2].ptr, "\0bc\xff", 4);
                continue;
            }
            size_t esize = dtype_size(t->dtype);
            assert_int_equal(t->nbytes, 3 * esize);
            assert_memory_equal(t->data, b.data + offsets[i], t->nbytes);
            /* In place exactly when aligned; a copy is aligned too. */
            bool aligned = (uintptr_t)(b.data + offsets[i]) % esize == 0;
            assert_true(points_into(t->data, &b) == aligned);
            assert_true((uintptr_t)t->data % esize == 0);
        }
        done(&d);
    }
}

static void test_binary_mixed_with_json(void **state)
{
    (void)state;
    struct body b;
    body_begin(&b, 0,
               "{\"inputs\":[" IN_INT32 ","
               "{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[1,3],"
               "\"parameters\":{\"binary_data_size\":12}},"
               "{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[2],"
               "\"parameters\":{\"binary_data_size\":10,\"other\":1}}," IN_BOOL ","
               "{\"name\":\"IN_FP16\",\"datatype\":\"FP16\",\"shape\":[3],"
               "\"parameters\":{\"binary_data_size\":6}}," IN_UINT64 "]}");
    float f[3] = {0.1f, -0.0f, 1e-45f};
    body_add(&b, f, sizeof f);
    body_add_str(&b, "hi", 2);
    body_add_str(&b, "", 0);
    uint16_t h[3] = {0x3800, 0x7c00, 0x8001}; /* FP16 raw as-is, infinity included */
    body_add(&b, h, sizeof h);
    struct decoded d;
    decode_body(&d, &model, &b);
    if (d.rc != 0)
        fail_msg("%s", d.err.msg);
    int32_t ints[8];
    memcpy(ints, d.req.inputs[0].data, sizeof ints);
    assert_int_equal(ints[7], INT32_MIN);
    assert_memory_equal(d.req.inputs[1].data, f, sizeof f);
    assert_ptr_equal(d.req.inputs[1].data, b.data + b.json_len);
    const struct tensor_bytes *e = d.req.inputs[2].data;
    assert_int_equal(e[0].len, 2);
    assert_memory_equal(e[0].ptr, "hi", 2);
    assert_int_equal(e[1].len, 0);
    assert_memory_equal(d.req.inputs[3].data, "\1\0", 2);
    assert_memory_equal(d.req.inputs[4].data, h, sizeof h);
    uint64_t u;
    memcpy(&u, d.req.inputs[5].data, 8);
    assert_true(u == UINT64_MAX);
    done(&d);
}

/* A numeric tensor at an offset not aligned for its type is copied into
 * the arena; an aligned one is used in place. */
static void test_binary_alignment(void **state)
{
    (void)state;
    double x[2] = {1.5, -0.0};
    for (size_t skew = 0; skew < 8; skew++) {
        struct body b;
        body_begin(&b, skew, "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP64\",\"shape\":[2],"
                             "\"parameters\":{\"binary_data_size\":16}}]}");
        body_add(&b, x, sizeof x);
        struct decoded d;
        decode_body(&d, &f64_model, &b);
        assert_int_equal(d.rc, 0);
        const struct tensor *t = &d.req.inputs[0];
        assert_int_equal(t->nbytes, 16);
        assert_memory_equal(t->data, x, sizeof x);
        assert_true((uintptr_t)t->data % 8 == 0);
        if (skew == 0)
            assert_ptr_equal(t->data, b.data + b.json_len);
        else
            assert_false(points_into(t->data, &b));
        done(&d);
    }
}

static void test_binary_bytes_errors(void **state)
{
    (void)state;
    static struct model_io in[] = {{"S", DT_BYTES, 1, {-1}}};
    static struct model_io out[] = {{"T", DT_BYTES, 1, {-1}}};
    struct model m;
    model_make(&m, in, 1, out, 1, false);
#define S_INPUT(n, size) \
    "{\"inputs\":[{\"name\":\"S\",\"datatype\":\"BYTES\",\"shape\":[" #n "]," \
    "\"parameters\":{\"binary_data_size\":" #size "}}]}"
    struct body b;
    /* Length prefix cut short. */
    body_begin(&b, 0, S_INPUT(2, 9));
    body_add_str(&b, "abc", 3);
    body_add(&b, "\2\0", 2);
    expect_body_error(&m, &b, "input 'S': BYTES element 1 is truncated: 2 bytes left for its 4-byte length");
    /* Length beyond the tensor's bytes (though not beyond the body). */
    body_begin(&b, 0, S_INPUT(2, 11));
    body_add_str(&b, "abc", 3);
    body_add_str(&b, "x", 1);
    expect_body_error(&m, &b, "input 'S': BYTES element 1 has length 1 but only 0 bytes are left");
    body_begin(&b, 0, S_INPUT(1, 8));
    body_add_str(&b, "abcd", 4);
    b.data[b.len - 5] = (char)0xff; /* length 0xff000004 */
    expect_body_error(&m, &b, "has length 4278190084 but only 4 bytes are left");
    /* More bytes than the shape's elements use. */
    body_begin(&b, 0, S_INPUT(1, 9));
    body_add_str(&b, "abc", 3);
    body_add(&b, "yz", 2);
    expect_body_error(&m, &b, "input 'S': 2 of the 9 bytes of binary_data_size are left after the 1 BYTES elements");
    /* Too small for the count, checked before any allocation. */
    body_begin(&b, 0, S_INPUT(1000000000, 8));
    body_add_str(&b, "abcd", 4);
    expect_body_error(&m, &b, "binary_data_size of 8 bytes cannot hold 1000000000 BYTES elements");
    /* Empty tensor, empty data. */
    body_begin(&b, 0, S_INPUT(0, 0));
    struct decoded d;
    decode_body(&d, &m, &b);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].nbytes, 0);
    done(&d);
#undef S_INPUT
}

static void test_binary_errors(void **state)
{
    (void)state;
    const struct model *m = &f64_model;
#define X_INPUT(shape, params) \
    "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP64\",\"shape\":" shape "," params "}]}"
    struct body b;
    double x[2] = {1, 2};

    body_begin(&b, 0, X_INPUT("[2]", "\"parameters\":{\"binary_data_size\":12}"));
    body_add(&b, x, 12);
    expect_body_error(m, &b, "input 'X': binary_data_size is 12 bytes, shape [2] of FP64 needs 16");
    body_begin(&b, 0, X_INPUT("[2]", "\"parameters\":{\"binary_data_size\":24}"));
    body_add(&b, x, 16);
    expect_body_error(m, &b, "input 'X': binary_data_size 24 exceeds the 16 bytes of binary data left");
    body_begin(&b, 0, X_INPUT("[2]", "\"parameters\":{\"binary_data_size\":16}"));
    body_add(&b, x, 16);
    body_add(&b, "!", 1);
    expect_body_error(m, &b, "1 bytes after the JSON header are not claimed by any input's binary_data_size");
    body_begin(&b, 0, X_INPUT("[1]", "\"data\":[1]"));
    body_add(&b, x, 8);
    expect_body_error(m, &b, "8 bytes after the JSON header are not claimed");
    body_begin(&b, 0, X_INPUT("[1]", "\"data\":[1],\"parameters\":{\"binary_data_size\":8}"));
    body_add(&b, x, 8);
    expect_body_error(m, &b,
                      "Input must set only one of the following fields: 'data', "
                      "'binary_data_size' in 'parameters', 'shared_memory_region' in "
                      "'parameters'. But set 'data' 'binary_data_size' (input 'X')");
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{}"));
    expect_body_error(m, &b, "'shared_memory_region' in 'parameters'. But no field is set (input 'X')");
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":-8}"));
    expect_body_error(m, &b, "input 'X': 'binary_data_size' must be a non-negative integer");
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":8.0}"));
    expect_body_error(m, &b, "'binary_data_size' must be a non-negative integer");
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":\"8\"}"));
    expect_body_error(m, &b, "'binary_data_size' must be a non-negative integer");
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":18446744073709551616}"));
    expect_body_error(m, &b, "'binary_data_size' must be a non-negative integer");
    body_begin(&b, 0, X_INPUT("[4611686018427387904]", "\"parameters\":{\"binary_data_size\":0}"));
    expect_body_error(m, &b, "input 'X': shape has too many elements");
    body_begin(&b, 0, X_INPUT("[9223372036854775807,2]", "\"parameters\":{\"binary_data_size\":0}"));
    expect_body_error(m, &b, "for model 'aux'. Expected [-1], got [9223372036854775807,2]");
    /* A header length that cuts the JSON, or exceeds the body. */
    body_begin(&b, 0, X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":8}"));
    body_add(&b, x, 8);
    expect_decode_error(m, b.data, b.len, 20, 400, "malformed JSON");
    char needle[256];
    snprintf(needle, sizeof needle, "Inference-Header-Content-Length %zu exceeds the body length %zu",
             b.len + 1, b.len);
    expect_decode_error(m, b.data, b.len, (int64_t)b.len + 1, 400, needle);
    expect_decode_error(m, b.data, b.len, -2, 400, "exceeds the body length");
    /* Without the header the whole body must be JSON: bytes after it are
     * taken for binary data sent without the header, which is named with
     * the length it needs (the JSON's own, before the padding). */
    size_t json_only = strlen(X_INPUT("[1]", "\"parameters\":{\"binary_data_size\":8}"));
    snprintf(needle, sizeof needle,
             "%zu bytes follow the %zu-byte JSON request: binary tensor data after the JSON needs "
             "the header Inference-Header-Content-Length: %zu (the length of the JSON part)",
             b.len - json_only, json_only, json_only);
    expect_decode_error(m, b.data, b.len, -1, 400, needle);
    /* With the header, bytes after the JSON inside its part are malformed JSON. */
    expect_decode_error(m, "{\"inputs\":[]} x", 15, 15, 400,
                        "malformed JSON at byte 14: trailing characters after value");
    /* With the header and no binary input, a pure JSON request is fine. */
    body_begin(&b, 3, X_INPUT("[1]", "\"data\":[1]"));
    struct decoded d;
    decode_body(&d, m, &b);
    assert_int_equal(d.rc, 0);
    done(&d);
#undef X_INPUT
}

static void test_header_length(void **state)
{
    (void)state;
    struct {
        const char *value;
        size_t body_len;
        int64_t want; /* -1: error */
    } cases[] = {
        {"0", 0, 0},       {"17", 17, 17},   {"007", 10, 7},     {"10", 9, -1},
        {"", 10, -1},      {"-1", 10, -1},   {"+5", 10, -1},     {" 5", 10, -1},
        {"5 ", 10, -1},    {"0x10", 99, -1}, {"1e2", 1000, -1},  {"3.0", 10, -1},
        {"99999999999999999999999999", SIZE_MAX, -1},
        {"18446744073709551615", SIZE_MAX, -1}, {"9223372036854775808", SIZE_MAX, -1},
        {"9223372036854775807", SIZE_MAX, INT64_MAX}, {"9223372036854775807", 100, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct error err;
        error_clear(&err);
        int64_t v = -7;
        int rc = infer_json_header_length(cases[i].value, strlen(cases[i].value),
                                          cases[i].body_len, &v, &err);
        if (cases[i].want < 0) {
            if (rc != -1 || err.status != 400 || !strstr(err.msg, "Inference-Header-Content-Length"))
                fail_msg("'%s' accepted", cases[i].value);
        } else if (rc != 0 || v != cases[i].want) {
            fail_msg("'%s': rc %d v %lld (%s)", cases[i].value, rc, (long long)v, err.msg);
        }
    }
}

static void test_binary_output_flags(void **state)
{
    (void)state;
    struct {
        const char *extra;
        uint32_t n;
        const char *names[2];
        bool flags[2];
    } cases[] = {
        {"", 2, {"OUT_A", "OUT_B"}, {false, false}},
        {",\"parameters\":{\"binary_data_output\":true}", 2, {"OUT_A", "OUT_B"}, {true, true}},
        {",\"parameters\":{\"binary_data_output\":false}", 2, {"OUT_A", "OUT_B"}, {false, false}},
        {",\"parameters\":{\"binary_data_output\":true},\"outputs\":[{\"name\":\"OUT_B\"},"
         "{\"name\":\"OUT_A\",\"parameters\":{\"binary_data\":false}}]",
         2, {"OUT_B", "OUT_A"}, {true, false}},
        {",\"outputs\":[{\"name\":\"OUT_B\",\"parameters\":{\"binary_data\":true}},"
         "{\"name\":\"OUT_A\"}]",
         2, {"OUT_B", "OUT_A"}, {true, false}},
        {",\"parameters\":{\"binary_data_output\":false},\"outputs\":[{\"name\":\"OUT_A\","
         "\"parameters\":{\"binary_data\":true}}]",
         1, {"OUT_A"}, {true}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[2048];
        snprintf(body, sizeof body, "{\"inputs\":[" ALL_INPUTS "]%s}", cases[i].extra);
        struct decoded d;
        decode(&d, body);
        if (d.rc != 0)
            fail_msg("case %zu: %s", i, d.err.msg);
        assert_int_equal(d.req.noutputs, cases[i].n);
        for (uint32_t k = 0; k < cases[i].n; k++) {
            assert_string_equal(d.req.output_names[k], cases[i].names[k]);
            if (d.req.output_binary[k] != cases[i].flags[k])
                fail_msg("case %zu output %u: binary %d", i, k, d.req.output_binary[k]);
        }
        done(&d);
    }
}

/* Raw binary requests (Inference-Header-Content-Length: 0). */
static void test_binary_raw(void **state)
{
    (void)state;
    static struct model_io batched_in[] = {{"X", DT_FP32, 2, {-1, -1}}};
    static struct model_io fixed_in[] = {{"U", DT_UINT8, 2, {3, 4}}};
    static struct model_io batched_fixed_in[] = {{"X", DT_FP32, 2, {-1, 4}}};
    static struct model_io int16_in[] = {{"H", DT_INT16, 3, {2, -1, 1}}};
    static struct model_io two_var_in[] = {{"X", DT_FP32, 2, {-1, -1}}};
    static struct model_io zero_in[] = {{"X", DT_FP32, 2, {0, -1}}};
    static struct model_io bytes_in[] = {{"S", DT_BYTES, 1, {-1}}};
    static struct model_io bytes_var_in[] = {{"S", DT_BYTES, 2, {-1, -1}}};
    static struct model_io bytes_two_in[] = {{"S", DT_BYTES, 1, {2}}};
    static struct model_io outs[] = {{"A", DT_FP32, 1, {-1}}, {"B", DT_BYTES, 1, {-1}}};
    struct model batched, fixed, batched_fixed, int16, two_var, zero, bytes, bytes_var, bytes_two;
    model_make(&batched, batched_in, 1, outs, 2, true);
    model_make(&fixed, fixed_in, 1, outs, 2, false);
    model_make(&batched_fixed, batched_fixed_in, 1, outs, 1, true);
    model_make(&int16, int16_in, 1, outs, 1, false);
    model_make(&two_var, two_var_in, 1, outs, 1, false);
    model_make(&zero, zero_in, 1, outs, 1, false);
    model_make(&bytes, bytes_in, 1, outs + 1, 1, true);
    model_make(&bytes_var, bytes_var_in, 1, outs + 1, 1, true);
    model_make(&bytes_two, bytes_two_in, 1, outs + 1, 1, false);

    _Alignas(16) char raw[64];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (char)i;
    struct decoded d;

    /* Batch dim 1, the other variable dim deduced; every output binary. */
    decode_with(&d, &batched, raw, 24, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.ninputs, 1);
    assert_int_equal(d.req.inputs[0].ndim, 2);
    assert_int_equal(d.req.inputs[0].shape[0], 1);
    assert_int_equal(d.req.inputs[0].shape[1], 6);
    assert_int_equal(d.req.inputs[0].nbytes, 24);
    assert_ptr_equal(d.req.inputs[0].data, raw);
    assert_int_equal(d.req.batch, 1);
    assert_int_equal(d.req.noutputs, 2);
    assert_string_equal(d.req.output_names[1], "B");
    assert_true(d.req.output_binary[0] && d.req.output_binary[1]);
    assert_null(d.req.id);
    done(&d);
    /* Misaligned body: copied. */
    decode_with(&d, &batched, raw + 1, 8, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[1], 2);
    assert_memory_equal(d.req.inputs[0].data, raw + 1, 8);
    assert_true((uintptr_t)d.req.inputs[0].data % 4 == 0);
    done(&d);
    /* Empty body: zero rows. */
    decode_with(&d, &batched, raw, 0, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[1], 0);
    done(&d);
    decode_with(&d, &fixed, raw, 12, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[0], 3);
    assert_int_equal(d.req.inputs[0].shape[1], 4);
    done(&d);
    decode_with(&d, &batched_fixed, raw, 16, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[0], 1);
    done(&d);
    decode_with(&d, &int16, raw, 12, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[1], 3);
    done(&d);
    /* BYTES: the whole body is the one element, no length prefix. */
    decode_with(&d, &bytes, "hello\0raw", 9, 0);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.inputs[0].shape[0], 1);
    const struct tensor_bytes *e = d.req.inputs[0].data;
    assert_int_equal(e[0].len, 9);
    assert_memory_equal(e[0].ptr, "hello\0raw", 9);
    assert_int_equal(d.req.inputs[0].nbytes, 9);
    done(&d);

    expect_decode_error(&model, raw, 16, 0, 400,
                        "a raw binary request (Inference-Header-Content-Length: 0) needs a model "
                        "with exactly one input; model 'test' has 6");
    expect_decode_error(&fixed, raw, 13, 0, 400,
                        "raw binary request: input 'U' of shape [3,4] needs 12 bytes, the body has 13");
    expect_decode_error(&batched_fixed, raw, 12, 0, 400,
                        "input 'X' of shape [1,4] needs 16 bytes, the body has 12");
    expect_decode_error(&batched, raw, 10, 0, 400,
                        "a body of 10 bytes is not a whole number of 4-byte rows of input 'X'");
    expect_decode_error(&int16, raw, 6, 0, 400, "not a whole number of 4-byte rows");
    expect_decode_error(&two_var, raw, 16, 0, 400,
                        "raw binary request: the shape of input 'X' cannot be deduced, the "
                        "model's [-1,-1] has more than one variable dimension");
    expect_decode_error(&zero, raw, 0, 0, 400, "cannot be deduced from the body length");
    expect_decode_error(&bytes_var, raw, 4, 0, 400,
                        "raw binary request: BYTES input 'S' must have exactly one element, the "
                        "model's shape is [-1,-1]");
    expect_decode_error(&bytes_two, raw, 4, 0, 400, "must have exactly one element");
}

static void test_binary_allocation_failures(void **state)
{
    (void)state;
    struct body b;
    body_begin(&b, 1,
               "{\"inputs\":[" IN_INT32 ","
               "{\"name\":\"IN_FP32\",\"datatype\":\"FP32\",\"shape\":[1,3],"
               "\"parameters\":{\"binary_data_size\":12}},"
               "{\"name\":\"IN_BYTES\",\"datatype\":\"BYTES\",\"shape\":[2],"
               "\"parameters\":{\"binary_data_size\":10}}," IN_BOOL "," IN_FP16 "," IN_UINT64
               "],\"parameters\":{\"binary_data_output\":true}}");
    float f[3] = {1, 2, 3};
    body_add(&b, f, sizeof f);
    body_add_str(&b, "hi", 2);
    body_add_str(&b, "", 0);
    for (long n = 0; n < 200; n++) {
        struct decoded d;
        memset(&d, 0, sizeof d);
        arena_init(&d.req.arena, 512, 1 << 20);
        mem_fail_after(n);
        d.rc = infer_json_decode(&d.req, NULL, &model, b.data, b.len, (int64_t)b.json_len, &d.err);
        mem_fail_reset();
        if (d.rc != 0)
            assert_true(d.err.status == 413 || d.err.status == 400);
        done(&d);
        if (d.rc == 0)
            return;
    }
    fail_msg("never decoded");
}

static void test_encode_binary(void **state)
{
    (void)state;
    struct infer_request req;
    memset(&req, 0, sizeof req);
    req.model = &model;
    req.id = "7";
    req.id_len = 1;
    float a[4] = {0.1f, -0.0f, 3.4028235e38f, 1e-45f};
    struct tensor_bytes s[3] = {{"hi", 2}, {"", 0}, {"a\0\xff", 3}};
    uint16_t h[2] = {0x7c00, 0x3c00};
    unsigned char bools[3] = {1, 0, 1};
    struct tensor outs[4] = {
        {.name = "OUT_A", .dtype = DT_FP32, .ndim = 2, .shape = {1, 4}, .data = a, .nbytes = 16},
        {.name = "OUT_B", .dtype = DT_BYTES, .ndim = 1, .shape = {3}, .data = s, .nbytes = 5},
        {.name = "H", .dtype = DT_FP16, .ndim = 1, .shape = {2}, .data = h, .nbytes = 4},
        {.name = "Z", .dtype = DT_BOOL, .ndim = 2, .shape = {3, 1}, .data = bools, .nbytes = 3},
    };
    req.outputs = outs;
    req.noutputs = 4;
    bool flags[4] = {true, true, true, false};
    req.output_binary = flags;
    struct buf out;
    buf_init(&out, 1 << 20);
    size_t json_len = 0;
    infer_json_encode(&req, NULL, &out, &json_len);
    assert_int_equal(out.err, 0);
    const char *want = "{\"model_name\":\"test\",\"model_version\":\"3\",\"id\":\"7\",\"outputs\":["
                       "{\"name\":\"OUT_A\",\"datatype\":\"FP32\",\"shape\":[1,4],"
                       "\"parameters\":{\"binary_data_size\":16}},"
                       "{\"name\":\"OUT_B\",\"datatype\":\"BYTES\",\"shape\":[3],"
                       "\"parameters\":{\"binary_data_size\":17}},"
                       "{\"name\":\"H\",\"datatype\":\"FP16\",\"shape\":[2],"
                       "\"parameters\":{\"binary_data_size\":4}},"
                       "{\"name\":\"Z\",\"datatype\":\"BOOL\",\"shape\":[3,1],"
                       "\"data\":[true,false,true]}]}";
    if (json_len != strlen(want) || memcmp(out.data, want, json_len) != 0)
        fail_msg("got  %.*s\nwant %s", (int)json_len, out.data, want);
    const unsigned char tail[] = {
        /* OUT_A */ 0xcd, 0xcc, 0xcc, 0x3d, 0, 0, 0, 0x80, 0xff, 0xff, 0x7f, 0x7f, 1, 0, 0, 0,
        /* OUT_B */ 2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0, 3, 0, 0, 0, 'a', 0, 0xff,
        /* H */ 0x00, 0x7c, 0x00, 0x3c};
    assert_int_equal(out.len, json_len + sizeof tail);
    assert_memory_equal(out.data + json_len, tail, sizeof tail);

    /* Only the BYTES output binary; appending after existing content. */
    buf_reset(&out);
    buf_append(&out, "prefix", 6);
    bool only_b[4] = {false, true, false, false};
    req.output_binary = only_b;
    req.noutputs = 2;
    infer_json_encode(&req, NULL, &out, &json_len);
    const char *want2 = "{\"model_name\":\"test\",\"model_version\":\"3\",\"id\":\"7\",\"outputs\":["
                        "{\"name\":\"OUT_A\",\"datatype\":\"FP32\",\"shape\":[1,4],"
                        "\"data\":[0.1,-0,3.4028235e+38,1e-45]},"
                        "{\"name\":\"OUT_B\",\"datatype\":\"BYTES\",\"shape\":[3],"
                        "\"parameters\":{\"binary_data_size\":17}}]}";
    if (json_len != strlen(want2) || memcmp(out.data + 6, want2, json_len) != 0)
        fail_msg("got  %.*s\nwant %s", (int)json_len, out.data + 6, want2);
    assert_int_equal(out.len, 6 + json_len + 17);
    assert_memory_equal(out.data + 6 + json_len, tail + 16, 17);

    /* A response too large for the buffer is a sticky error. */
    struct buf small;
    buf_init(&small, json_len + 5);
    infer_json_encode(&req, NULL, &small, &json_len);
    assert_int_not_equal(small.err, 0);
    buf_free(&small);
    buf_free(&out);
}

int main(void)
{
    test_model_init(&model);
    aux_models_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_every_input),
        cmocka_unit_test(test_requested_outputs_keep_request_order),
        cmocka_unit_test(test_classification_counts),
        cmocka_unit_test(test_nested_and_flat_data_are_equal),
        cmocka_unit_test(test_model_without_inputs),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_plain_requests),
        cmocka_unit_test(test_plain_binary),
        cmocka_unit_test(test_plain_declines),
        cmocka_unit_test(test_plain_errors),
        cmocka_unit_test(test_plain_allocation_failures),
        cmocka_unit_test(test_memory_ceiling_gives_413),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_encode_response),
        cmocka_unit_test(test_binary_every_dtype),
        cmocka_unit_test(test_binary_mixed_with_json),
        cmocka_unit_test(test_binary_alignment),
        cmocka_unit_test(test_binary_bytes_errors),
        cmocka_unit_test(test_binary_errors),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_binary_output_flags),
        cmocka_unit_test(test_binary_raw),
        cmocka_unit_test(test_binary_allocation_failures),
        cmocka_unit_test(test_encode_binary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
