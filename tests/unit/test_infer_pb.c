/* Unit tests of the KServe v2 gRPC infer codec (api/grpc/infer_pb.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/grpc/infer_pb.h"
#include "base/mem.h"
#include "model/model.h"

/* One input per datatype, named after it ("FP32", ...), each of shape [-1];
 * outputs OUT_FP32 FP32 [-1] and OUT_BYTES BYTES [-1]. */
static const enum dtype all_types[] = {DT_BOOL, DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64,
                                       DT_INT8, DT_INT16, DT_INT32,  DT_INT64,  DT_FP16,
                                       DT_FP32, DT_FP64,  DT_BYTES,  DT_BF16};
#define NTYPES (sizeof all_types / sizeof all_types[0])
static struct model_io inputs[NTYPES];
static struct model_io outputs[] = {{"OUT_FP32", DT_FP32, 1, {-1}},
                                    {"OUT_BYTES", DT_BYTES, 1, {-1}}};
static struct model model;

static void model_setup(void)
{
    memset(&model, 0, sizeof model);
    model.name = "pb";
    strcpy(model.version_str, "2");
    for (size_t i = 0; i < NTYPES; i++)
        inputs[i] = (struct model_io){(char *)dtype_name(all_types[i]), all_types[i], 1, {-1}};
    model.info.inputs = inputs;
    model.info.ninputs = NTYPES;
    model.info.outputs = outputs;
    model.info.noutputs = 2;
}

/* ---- building requests ---------------------------------------------------- */

/* A request being built: every input of the model, 3 elements each, as
 * typed contents (or raw when `raw`). */
struct builder {
    Inference__ModelInferRequest msg;
    Inference__ModelInferRequest__InferInputTensor in[NTYPES + 2];
    Inference__ModelInferRequest__InferInputTensor *inp[NTYPES + 2];
    Inference__InferTensorContents contents[NTYPES + 2];
    ProtobufCBinaryData raw[NTYPES + 2];
    int64_t shape[NTYPES + 2][1];
};

static protobuf_c_boolean b_vals[3] = {1, 0, 1};
static int32_t i_vals[3] = {-128, 0, 127};
static int32_t i16_vals[3] = {-32768, 1, 32767};
static int32_t i32_vals[3] = {INT32_MIN, -1, INT32_MAX};
static int64_t i64_vals[3] = {INT64_MIN, -1, INT64_MAX};
static uint32_t u8_vals[3] = {0, 1, 255};
static uint32_t u16_vals[3] = {0, 7, 65535};
static uint32_t u32_vals[3] = {0, 9, UINT32_MAX};
static uint64_t u64_vals[3] = {0, 1, UINT64_MAX};
static float f32_vals[3] = {0.5f, -0.0f, 3.4028235e38f};
static double f64_vals[3] = {1e-300, -2.5, 1e300};
static ProtobufCBinaryData bytes_vals[3] = {
    {2, (uint8_t *)"a\0"}, {0, NULL}, {3, (uint8_t *)"xyz"}};

/* Expected raw bytes of each type's 3 elements. */
static size_t expected_raw(enum dtype t, uint8_t *out)
{
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        switch (t) {
        case DT_BOOL:
            out[n++] = (uint8_t)b_vals[i];
            break;
        case DT_INT8:
            out[n++] = (uint8_t)(int8_t)i_vals[i];
            break;
        case DT_UINT8:
            out[n++] = (uint8_t)u8_vals[i];
            break;
        case DT_INT16: {
            int16_t v = (int16_t)i16_vals[i];
            memcpy(out + n, &v, 2);
            n += 2;
            break;
        }
        case DT_UINT16: {
            uint16_t v = (uint16_t)u16_vals[i];
            memcpy(out + n, &v, 2);
            n += 2;
            break;
        }
        case DT_FP16:
        case DT_BF16: {
            uint16_t v = (uint16_t)(0x3c00 + i);
            memcpy(out + n, &v, 2);
            n += 2;
            break;
        }
        case DT_INT32:
            memcpy(out + n, &i32_vals[i], 4);
            n += 4;
            break;
        case DT_UINT32:
            memcpy(out + n, &u32_vals[i], 4);
            n += 4;
            break;
        case DT_FP32:
            memcpy(out + n, &f32_vals[i], 4);
            n += 4;
            break;
        case DT_INT64:
            memcpy(out + n, &i64_vals[i], 8);
            n += 8;
            break;
        case DT_UINT64:
            memcpy(out + n, &u64_vals[i], 8);
            n += 8;
            break;
        case DT_FP64:
            memcpy(out + n, &f64_vals[i], 8);
            n += 8;
            break;
        default: { /* BYTES */
            uint32_t len = (uint32_t)bytes_vals[i].len;
            memcpy(out + n, &len, 4);
            if (len)
                memcpy(out + n + 4, bytes_vals[i].data, len);
            n += 4 + len;
            break;
        }
        }
    }
    return n;
}

static uint8_t raw_store[NTYPES][64];

static void set_contents(Inference__InferTensorContents *c, enum dtype t)
{
    inference__infer_tensor_contents__init(c);
    switch (t) {
    case DT_BOOL:
        c->n_bool_contents = 3;
        c->bool_contents = b_vals;
        break;
    case DT_INT8:
        c->n_int_contents = 3;
        c->int_contents = i_vals;
        break;
    case DT_INT16:
        c->n_int_contents = 3;
        c->int_contents = i16_vals;
        break;
    case DT_INT32:
        c->n_int_contents = 3;
        c->int_contents = i32_vals;
        break;
    case DT_INT64:
        c->n_int64_contents = 3;
        c->int64_contents = i64_vals;
        break;
    case DT_UINT8:
        c->n_uint_contents = 3;
        c->uint_contents = u8_vals;
        break;
    case DT_UINT16:
        c->n_uint_contents = 3;
        c->uint_contents = u16_vals;
        break;
    case DT_UINT32:
        c->n_uint_contents = 3;
        c->uint_contents = u32_vals;
        break;
    case DT_UINT64:
        c->n_uint64_contents = 3;
        c->uint64_contents = u64_vals;
        break;
    case DT_FP32:
        c->n_fp32_contents = 3;
        c->fp32_contents = f32_vals;
        break;
    case DT_FP64:
        c->n_fp64_contents = 3;
        c->fp64_contents = f64_vals;
        break;
    case DT_BYTES:
        c->n_bytes_contents = 3;
        c->bytes_contents = bytes_vals;
        break;
    default:
        break; /* FP16/BF16 have no typed field */
    }
}

/* Every input; typed contents except FP16/BF16 unless `raw`. With typed
 * contents FP16 and BF16 cannot be sent, so they are left out and the
 * caller must use a model view without them (see decode()). */
static void build(struct builder *b, bool raw)
{
    memset(b, 0, sizeof *b);
    inference__model_infer_request__init(&b->msg);
    b->msg.model_name = "pb";
    size_t n = 0;
    for (size_t i = 0; i < NTYPES; i++) {
        enum dtype t = all_types[i];
        if (!raw && (t == DT_FP16 || t == DT_BF16))
            continue;
        Inference__ModelInferRequest__InferInputTensor *in = &b->in[n];
        inference__model_infer_request__infer_input_tensor__init(in);
        in->name = (char *)dtype_name(t);
        in->datatype = (char *)dtype_name(t);
        b->shape[n][0] = 3;
        in->n_shape = 1;
        in->shape = b->shape[n];
        if (raw) {
            b->raw[n].len = expected_raw(t, raw_store[i]);
            b->raw[n].data = raw_store[i];
        } else {
            set_contents(&b->contents[n], t);
            in->contents = &b->contents[n];
        }
        b->inp[n] = in;
        n++;
    }
    b->msg.n_inputs = n;
    b->msg.inputs = b->inp;
    if (raw) {
        b->msg.n_raw_input_contents = n;
        b->msg.raw_input_contents = b->raw;
    }
}

/* The model, or (typed_only) the model without its FP16 and BF16 inputs,
 * which typed contents cannot carry. */
static void model_view(bool typed_only, struct model *m, struct model_io subset[NTYPES])
{
    *m = model;
    if (!typed_only)
        return;
    uint32_t n = 0;
    for (size_t i = 0; i < NTYPES; i++)
        if (inputs[i].dtype != DT_FP16 && inputs[i].dtype != DT_BF16)
            subset[n++] = inputs[i];
    m->info.inputs = subset;
    m->info.ninputs = n;
}

struct decoded {
    struct infer_request req;
    struct error err;
    int rc;
};

/* Packs msg, unpacks it and decodes it against the model (without the
 * FP16/BF16 inputs when `typed_only`). */
static void decode_with(struct decoded *d, const Inference__ModelInferRequest *msg, bool typed_only,
                        size_t arena_max)
{
    memset(d, 0, sizeof *d);
    arena_init(&d->req.arena, 1024, arena_max);
    size_t len = inference__model_infer_request__get_packed_size(msg);
    uint8_t *wire = malloc(len + 1);
    inference__model_infer_request__pack(msg, wire);
    struct model m;
    struct model_io subset[NTYPES];
    model_view(typed_only, &m, subset);
    Inference__ModelInferRequest *u;
    d->rc = infer_pb_unpack(&d->req.arena, wire, len, &u, &d->err);
    /* The unpacked message lives in the arena: the wire bytes can go. */
    memset(wire, 0xaa, len);
    free(wire);
    if (d->rc == 0)
        d->rc = infer_pb_decode(&d->req, NULL, &m, u, &d->err);
}

static void decode(struct decoded *d, const Inference__ModelInferRequest *msg, bool typed_only)
{
    decode_with(d, msg, typed_only, 1 << 20);
}

static void done(struct decoded *d)
{
    arena_free(&d->req.arena);
}

static const struct tensor *input_of(const struct decoded *d, enum dtype t)
{
    for (uint32_t i = 0; i < d->req.ninputs; i++)
        if (d->req.inputs[i].dtype == t)
            return &d->req.inputs[i];
    fail_msg("no input of type %s", dtype_name(t));
    return NULL;
}

/* A tensor's data in raw layout (BYTES length-prefixed). */
static size_t tensor_raw(const struct tensor *t, uint8_t *out)
{
    if (t->dtype != DT_BYTES) {
        memcpy(out, t->data, t->nbytes);
        return t->nbytes;
    }
    const struct tensor_bytes *e = t->data;
    size_t n = 0;
    for (int64_t i = 0; i < t->shape[0]; i++) {
        memcpy(out + n, &e[i].len, 4);
        if (e[i].len)
            memcpy(out + n + 4, e[i].ptr, e[i].len);
        n += 4 + e[i].len;
    }
    return n;
}

static void expect_error(const Inference__ModelInferRequest *msg, bool typed_only, int status,
                         const char *needle)
{
    struct decoded d;
    decode(&d, msg, typed_only);
    if (d.rc != -1 || d.err.status != status || !strstr(d.err.msg, needle))
        fail_msg("rc=%d status=%d msg=%s\n  wanted %d containing '%s'", d.rc, d.err.status,
                 d.err.msg, status, needle);
    done(&d);
}

/* ---- tests ---------------------------------------------------------------- */

static void check_every_type(bool raw)
{
    struct builder b;
    build(&b, raw);
    b.msg.id = "req-7";
    struct decoded d;
    decode(&d, &b.msg, !raw);
    if (d.rc != 0)
        fail_msg("decode failed: %s", d.err.msg);
    assert_string_equal(d.req.id, "req-7");
    assert_int_equal(d.req.id_len, 5);
    assert_int_equal(d.req.noutputs, 2);
    assert_string_equal(d.req.output_names[0], "OUT_FP32");
    for (size_t i = 0; i < NTYPES; i++) {
        enum dtype t = all_types[i];
        if (!raw && (t == DT_FP16 || t == DT_BF16))
            continue;
        const struct tensor *in = input_of(&d, t);
        assert_int_equal(in->ndim, 1);
        assert_int_equal(in->shape[0], 3);
        uint8_t want[64], got[64];
        size_t wn = expected_raw(t, want);
        size_t gn = tensor_raw(in, got);
        if (wn != gn || memcmp(want, got, wn) != 0)
            fail_msg("%s input differs (%zu vs %zu bytes)", dtype_name(t), gn, wn);
    }
    done(&d);
}

static void test_typed_contents_every_type(void **state)
{
    (void)state;
    check_every_type(false);
}

static void test_raw_contents_every_type(void **state)
{
    (void)state;
    check_every_type(true);
}

static void test_empty_tensor(void **state)
{
    (void)state;
    struct builder b;
    build(&b, false);
    for (size_t i = 0; i < b.msg.n_inputs; i++) {
        b.shape[i][0] = 0;
        b.in[i].contents = NULL;
    }
    struct decoded d;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(input_of(&d, DT_FP32)->nbytes, 0);
    done(&d);
}

/* A graph of constants: a request without inputs asks for its outputs. */
static void test_model_without_inputs(void **state)
{
    (void)state;
    struct model constants = model;
    constants.info.inputs = NULL;
    constants.info.ninputs = 0;
    Inference__ModelInferRequest msg = INFERENCE__MODEL_INFER_REQUEST__INIT;
    msg.model_name = "constants";
    struct decoded d;
    memset(&d, 0, sizeof d);
    arena_init(&d.req.arena, 1024, 1 << 20);
    d.rc = infer_pb_decode(&d.req, NULL, &constants, &msg, &d.err);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.ninputs, 0);
    assert_int_equal(d.req.batch, 1);
    assert_int_equal(d.req.noutputs, 2);
    done(&d);
}

static void test_errors(void **state)
{
    (void)state;
    struct builder b;

    build(&b, false);
    b.in[0].name = "NOPE";
    expect_error(&b.msg, true, 400,
                 "unexpected inference input 'NOPE' for model 'pb', which has inputs: 'BOOL' (BOOL [-1]), "
                 "'UINT8' (UINT8 [-1]), 'UINT16' (UINT16 [-1]), 'UINT32' (UINT32 [-1]), 'UINT64' "
                 "(UINT64 [-1]), 'INT8' (INT8 [-1]), 'INT16' (INT16 [-1]), ...");

    build(&b, false);
    b.in[1].name = b.in[0].name;
    expect_error(&b.msg, true, 400, "duplicate input");

    build(&b, false);
    b.msg.n_inputs--;
    expect_error(&b.msg, true, 400, "missing input 'BYTES'");

    build(&b, false);
    b.msg.n_inputs = 0;
    expect_error(&b.msg, true, 400, "missing input 'BOOL'");

    build(&b, false);
    b.in[0].datatype = "INT32";
    expect_error(&b.msg, true, 400, "inference input 'BOOL' data-type is 'INT32', but model 'pb' expects 'BOOL'");

    build(&b, false);
    b.in[0].datatype = "FLOAT";
    expect_error(&b.msg, true, 400, "unknown datatype 'FLOAT'");

    build(&b, false);
    b.in[0].n_shape = 0;
    expect_error(&b.msg, true, 400, "unexpected shape for input 'BOOL' for model 'pb'. Expected [-1], got []");

    build(&b, false);
    b.shape[0][0] = -1;
    expect_error(&b.msg, true, 400, "non-negative");

    build(&b, false);
    int64_t big[TENSOR_MAX_DIMS + 1] = {0};
    b.in[0].n_shape = TENSOR_MAX_DIMS + 1;
    b.in[0].shape = big;
    expect_error(&b.msg, true, 400, "at most 16 allowed");

    build(&b, false);
    b.shape[0][0] = 4;
    expect_error(&b.msg, true, 400, "contents.bool_contents has 3 elements, shape [4] needs 4");

    build(&b, false);
    b.contents[3].n_int_contents = 3; /* UINT32 also given int_contents */
    b.contents[3].int_contents = i_vals;
    expect_error(&b.msg, true, 400,
                 "datatype UINT32 takes contents.uint_contents, not int_contents");

    build(&b, false);
    int32_t wide[3] = {1, 128, 2};
    b.contents[5].int_contents = wide; /* INT8 */
    expect_error(&b.msg, true, 400, "element 1 is out of range for INT8");

    build(&b, false);
    uint32_t wide16[3] = {65536, 0, 0};
    b.contents[2].uint_contents = wide16; /* UINT16 */
    expect_error(&b.msg, true, 400, "element 0 is out of range for UINT16");

    build(&b, false);
    b.in[0].contents = NULL;
    expect_error(&b.msg, true, 400, "has no data: set contents.bool_contents");

    /* FP16 has no typed field. */
    build(&b, true);
    b.msg.n_raw_input_contents = 0;
    b.msg.raw_input_contents = NULL;
    for (size_t i = 0; i < b.msg.n_inputs; i++) {
        if (all_types[i] == DT_FP16)
            continue;
        set_contents(&b.contents[i], all_types[i]);
        b.in[i].contents = &b.contents[i];
    }
    expect_error(&b.msg, false, 400, "FP16 data must be sent in raw_input_contents");

    build(&b, true);
    b.msg.n_raw_input_contents--;
    expect_error(&b.msg, false, 400, "raw_input_contents has 13 entries for 14 inputs");

    build(&b, true);
    set_contents(&b.contents[0], DT_BOOL);
    b.in[0].contents = &b.contents[0];
    expect_error(&b.msg, false, 400,
                 "contents field must not be specified when using raw_input_contents for "
                 "'BOOL' for model 'pb'");
    /* Triton's order: the input with contents is named before the raw
     * entries are counted (its raw entry is missing here). */
    b.msg.n_raw_input_contents--;
    b.msg.raw_input_contents++;
    expect_error(&b.msg, false, 400,
                 "contents field must not be specified when using raw_input_contents for "
                 "'BOOL' for model 'pb'");

    build(&b, true);
    b.raw[10].len--; /* FP32 */
    expect_error(&b.msg, false, 400, "raw_input_contents has 11 bytes, shape [3] of FP32 needs 12");

    build(&b, true);
    b.raw[12].len = 13; /* BYTES: two elements complete, the third's length cut */
    expect_error(&b.msg, false, 400, "BYTES element 2 is truncated");

    build(&b, true);
    b.raw[12].len = 15;
    expect_error(&b.msg, false, 400, "BYTES element 2 has length 3 but only 1 bytes are left");

    build(&b, true);
    uint8_t extra[64];
    memcpy(extra, raw_store[12], b.raw[12].len);
    extra[b.raw[12].len] = 0;
    b.raw[12].data = extra;
    b.raw[12].len++;
    expect_error(&b.msg, false, 400, "1 of the 18 bytes of raw_input_contents are left");

    build(&b, true);
    b.raw[12].len = 8;
    b.shape[12][0] = 3;
    expect_error(&b.msg, false, 400, "cannot hold 3 BYTES elements");
}

static void test_parameters_and_outputs(void **state)
{
    (void)state;
    struct builder b;
    Inference__InferParameter p = INFERENCE__INFER_PARAMETER__INIT;
    Inference__ModelInferRequest__ParametersEntry e =
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
    Inference__ModelInferRequest__ParametersEntry *ep = &e;
    e.key = "timeout";
    e.value = &p;

    build(&b, false);
    b.msg.n_parameters = 1;
    b.msg.parameters = &ep;
    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p.int64_param = 1500;
    struct decoded d;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.timeout_us, 1500);
    done(&d);

    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    p.string_param = "10";
    expect_error(&b.msg, true, 400, "parameter 'timeout' must be a non-negative integer");

    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p.int64_param = -1;
    expect_error(&b.msg, true, 400, "parameter 'timeout'");

    /* priority: int64 >= 0 or uint64, as timeout; absent = 0 (the default level). */
    e.key = "priority";
    p.int64_param = 2;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.priority, 2);
    assert_int_equal(d.req.timeout_us, 0);
    done(&d);

    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
    p.uint64_param = 1;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.priority, 1);
    done(&d);

    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p.int64_param = -1;
    expect_error(&b.msg, true, 400, "parameter 'priority' must be a non-negative integer");

    p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    p.string_param = "high";
    expect_error(&b.msg, true, 400, "parameter 'priority' must be a non-negative integer");

    b.msg.n_parameters = 0;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.priority, 0);
    done(&d);

    /* Requested outputs: order kept, unknown and duplicate refused. */
    build(&b, false);
    Inference__ModelInferRequest__InferRequestedOutputTensor o[3], *op[3] = {&o[0], &o[1], &o[2]};
    for (int i = 0; i < 3; i++)
        inference__model_infer_request__infer_requested_output_tensor__init(&o[i]);
    o[0].name = "OUT_BYTES";
    b.msg.n_outputs = 1;
    b.msg.outputs = op;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.req.noutputs, 1);
    assert_string_equal(d.req.output_names[0], "OUT_BYTES");
    done(&d);

    o[0].name = "OUT_X";
    expect_error(&b.msg, true, 400,
                 "unexpected inference output 'OUT_X' for model 'pb', which has outputs: 'OUT_FP32' "
                 "(FP32 [-1]), 'OUT_BYTES' (BYTES [-1])");
    o[0].name = "OUT_FP32";
    o[1].name = "OUT_FP32";
    b.msg.n_outputs = 2;
    expect_error(&b.msg, true, 400, "duplicate output 'OUT_FP32'");
    b.msg.n_outputs = 3;
    expect_error(&b.msg, true, 400, "'outputs' names 3 outputs, model 'pb' has 2");

    Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry oe =
        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__PARAMETERS_ENTRY__INIT;
    Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry *oep = &oe;
    Inference__InferParameter three = INFERENCE__INFER_PARAMETER__INIT;
    three.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    three.int64_param = 3;
    oe.key = "classification";
    oe.value = &three;
    b.msg.n_outputs = 1;
    o[0].n_parameters = 1;
    o[0].parameters = &oep;
    decode(&d, &b.msg, true);
    assert_int_equal(d.rc, 0);
    assert_non_null(d.req.output_classes);
    assert_int_equal(d.req.output_classes[0], 3);
    done(&d);
    three.int64_param = 0;
    expect_error(&b.msg, true, 400, "parameter 'classification' must be a positive int64_param");
    three.int64_param = -2;
    expect_error(&b.msg, true, 400, "parameter 'classification' must be a positive int64_param");
    three.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    three.string_param = "3";
    expect_error(&b.msg, true, 400, "parameter 'classification' must be a positive int64_param");
}

static void test_malformed_and_limits(void **state)
{
    (void)state;
    struct infer_request req;
    struct error err;
    Inference__ModelInferRequest *u;
    static const uint8_t garbage[][6] = {
        {0x0a, 0x05, 'a'},  /* string longer than the message */
        {0x2a, 0x80},       /* unterminated length varint */
        {0x0f, 0x00},       /* wire type 7 */
        {0x3a, 0x02, 0x01}, /* raw_input_contents cut short */
    };
    static const size_t lens[] = {3, 2, 2, 3};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memset(&req, 0, sizeof req);
        arena_init(&req.arena, 1024, 1 << 20);
        assert_int_equal(infer_pb_unpack(&req.arena, garbage[i], lens[i], &u, &err), -1);
        assert_int_equal(err.status, 400);
        assert_string_equal(err.msg, "malformed ModelInferRequest message");
        arena_free(&req.arena);
    }

    /* A message that needs more memory than the arena's ceiling: 413. */
    struct builder b;
    build(&b, true);
    static uint8_t big[200000];
    b.raw[1].data = big; /* UINT8 */
    b.raw[1].len = sizeof big;
    b.shape[1][0] = sizeof big;
    struct decoded d;
    decode_with(&d, &b.msg, false, 64 * 1024);
    assert_int_equal(d.rc, -1);
    assert_int_equal(d.err.status, 413);
    done(&d);
    decode_with(&d, &b.msg, false, 1 << 20);
    assert_int_equal(d.rc, 0);
    assert_int_equal(input_of(&d, DT_UINT8)->nbytes, sizeof big);
    done(&d);
}

/* Every allocation failure point gives a clean error, never a crash. */
static void test_allocation_failures(void **state)
{
    (void)state;
    for (int raw = 0; raw < 2; raw++) {
        struct builder b;
        build(&b, raw);
        size_t len = inference__model_infer_request__get_packed_size(&b.msg);
        uint8_t *wire = malloc(len);
        inference__model_infer_request__pack(&b.msg, wire);
        struct model m;
        struct model_io subset[NTYPES];
        model_view(!raw, &m, subset);
        bool succeeded = false;
        for (long n = 0; n < 200 && !succeeded; n++) {
            struct infer_request req;
            struct error err;
            memset(&req, 0, sizeof req);
            arena_init(&req.arena, 256, 1 << 20);
            Inference__ModelInferRequest *u;
            mem_fail_after(n);
            int rc = infer_pb_unpack(&req.arena, wire, len, &u, &err);
            if (rc == 0)
                rc = infer_pb_decode(&req, NULL, &m, u, &err);
            Inference__ModelInferResponse *resp = NULL;
            if (rc == 0) {
                req.outputs = req.inputs; /* any tensors will do for the encoder */
                req.noutputs = 2;
                req.model = &m;
                rc = infer_pb_response(&req, NULL, req.outputs, req.noutputs, INFER_PB_NOT_DECOUPLED, &req.arena, &resp) == 0 ? 0 : -1;
                if (rc != 0)
                    err.status = 413;
            }
            mem_fail_reset();
            if (rc != 0)
                assert_int_equal(err.status, 413);
            succeeded = rc == 0 && resp != NULL;
            arena_free(&req.arena);
        }
        assert_true(succeeded);
        free(wire);
    }
}

static void test_response(void **state)
{
    (void)state;
    struct infer_request req;
    memset(&req, 0, sizeof req);
    arena_init(&req.arena, 1024, 1 << 20);
    req.model = &model;
    req.id = "abc";
    req.id_len = 3;
    float a[4] = {0.1f, -0.0f, 3.4028235e38f, 1e-45f};
    struct tensor_bytes s[2] = {{"hi", 2}, {"", 0}};
    struct tensor outs[2] = {
        {.name = "OUT_FP32", .dtype = DT_FP32, .ndim = 1, .shape = {4}, .data = a, .nbytes = 16},
        {.name = "OUT_BYTES", .dtype = DT_BYTES, .ndim = 1, .shape = {2}, .data = s, .nbytes = 2},
    };
    req.outputs = outs;
    req.noutputs = 2;
    Inference__ModelInferResponse *r;
    assert_int_equal(infer_pb_response(&req, NULL, req.outputs, req.noutputs, INFER_PB_NOT_DECOUPLED, &req.arena, &r), 0);
    size_t len = inference__model_infer_response__get_packed_size(r);
    uint8_t *wire = malloc(len);
    inference__model_infer_response__pack(r, wire);
    Inference__ModelInferResponse *u = inference__model_infer_response__unpack(NULL, len, wire);
    assert_non_null(u);
    assert_string_equal(u->model_name, "pb");
    assert_string_equal(u->model_version, "2");
    assert_string_equal(u->id, "abc");
    assert_int_equal(u->n_outputs, 2);
    assert_string_equal(u->outputs[0]->name, "OUT_FP32");
    assert_string_equal(u->outputs[0]->datatype, "FP32");
    assert_int_equal(u->outputs[0]->n_shape, 1);
    assert_int_equal(u->outputs[0]->shape[0], 4);
    assert_null(u->outputs[0]->contents);
    assert_string_equal(u->outputs[1]->datatype, "BYTES");
    assert_int_equal(u->n_raw_output_contents, 2);
    assert_int_equal(u->raw_output_contents[0].len, 16);
    assert_memory_equal(u->raw_output_contents[0].data, a, 16);
    static const uint8_t want_bytes[] = {2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0};
    assert_int_equal(u->raw_output_contents[1].len, sizeof want_bytes);
    assert_memory_equal(u->raw_output_contents[1].data, want_bytes, sizeof want_bytes);
    inference__model_infer_response__free_unpacked(u, NULL);
    free(wire);

    /* Without an id the field is absent. */
    req.id = NULL;
    assert_int_equal(infer_pb_response(&req, NULL, req.outputs, req.noutputs, INFER_PB_NOT_DECOUPLED, &req.arena, &r), 0);
    assert_true(r->id == NULL || r->id[0] == '\0');
    arena_free(&req.arena);
}

int main(void)
{
    model_setup();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_contents_every_type),
        cmocka_unit_test(test_raw_contents_every_type),
        cmocka_unit_test(test_empty_tensor),
        cmocka_unit_test(test_model_without_inputs),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_parameters_and_outputs),
        cmocka_unit_test(test_malformed_and_limits),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
