/* Unit tests for model/config: Triton config.pbtxt parsing, validation
 * against a model's own inputs and outputs, autocomplete, JSON output. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/mem.h"
#include "model/config.h"

static int teardown(void **state)
{
    (void)state;
    mem_fail_reset();
    return 0;
}

#define TEST(fn) cmocka_unit_test_teardown(fn, teardown)

/* ---- hand-built models ------------------------------------------------- */

#define IO(n, t, ...)                                                                              \
    {                                                                                              \
        .name = (char *)(n), .dtype = (t),                                                         \
        .ndim = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), .dims = {                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

/* Triton's "simple": INPUT0/1 and OUTPUT0/1, INT32 [batch, 16]. */
static struct model_io simple_in[] = {IO("INPUT0", DT_INT32, -1, 16),
                                      IO("INPUT1", DT_INT32, -1, 16)};
static struct model_io simple_out[] = {IO("OUTPUT0", DT_INT32, -1, 16),
                                       IO("OUTPUT1", DT_INT32, -1, 16)};
static const struct model_info simple = {2, 2, simple_in, simple_out};

/* No batch dimension: [3, 4] in, [3] out. */
static struct model_io fixed_in[] = {IO("x", DT_FP32, 3, 4)};
static struct model_io fixed_out[] = {IO("y", DT_FP32, 3)};
static const struct model_info fixed = {1, 1, fixed_in, fixed_out};

/* Batched image model with variable spatial dims. */
static struct model_io image_in[] = {IO("image", DT_FP32, -1, 3, -1, -1)};
static struct model_io image_out[] = {IO("scores", DT_FP32, -1, 1000)};
static const struct model_info image = {1, 1, image_in, image_out};

/* First input batched, second not. */
static struct model_io mixed_in[] = {IO("a", DT_FP32, -1, 2), IO("b", DT_INT64, 2)};
static struct model_io mixed_out[] = {IO("c", DT_FP32, -1, 2)};
static const struct model_info mixed = {2, 1, mixed_in, mixed_out};

/* Reshaped: the model takes [batch, 4, 4], clients send 16 values. */
static struct model_io flat_in[] = {IO("in", DT_UINT8, -1, 4, 4)};
static struct model_io flat_out[] = {IO("out", DT_FP64, -1)};
static const struct model_info flat = {1, 1, flat_in, flat_out};

static const struct model_info nothing = {0, 0, NULL, NULL};

/* A stateful model (Triton's simple_sequence with a running sum): INPUT,
 * control inputs START, READY, CORRID, state ACC_IN -> ACC_OUT. */
static struct model_io seq_in[] = {IO("INPUT", DT_INT32, -1, 1), IO("START", DT_INT32, -1, 1),
                                   IO("READY", DT_FP32, -1, 1), IO("CORRID", DT_UINT64, -1, 1),
                                   IO("ACC_IN", DT_INT32, -1, 1)};
static struct model_io seq_out[] = {IO("OUTPUT", DT_INT32, -1, 1), IO("ACC_OUT", DT_INT32, -1, 1)};
static const struct model_info seqmodel = {5, 2, seq_in, seq_out};

/* A graph of constants: no inputs, and an output whose leading dim is
 * variable (so only the missing input keeps it from being batched). */
static struct model_io constants_out[] = {IO("c", DT_FP32, -1, 3)};
static const struct model_info constants = {0, 1, NULL, constants_out};

/* ---- helpers ------------------------------------------------------------ */

static void parse_ok(const char *text, struct model_config *cfg)
{
    struct error err;
    error_clear(&err);
    int rc = model_config_parse(text, strlen(text), cfg, &err);
    if (rc)
        print_error("parse failed: %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void parse_fail(const char *text, const char *msg)
{
    struct model_config cfg;
    struct error err;
    error_clear(&err);
    int rc = model_config_parse(text, strlen(text), &cfg, &err);
    if (rc == 0)
        print_error("accepted: %s\n", text);
    assert_int_equal(rc, -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, msg);
    assert_int_equal(cfg.ninputs, 0); /* left empty */
    model_config_free(&cfg);
}

static void check_ok(const char *text, const char *model, const struct model_info *info,
                     struct model_config *cfg)
{
    struct error err;
    error_clear(&err);
    parse_ok(text, cfg);
    int rc = model_config_check(cfg, model, info, &err);
    if (rc)
        print_error("check failed: %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void check_fail(const char *text, const char *model, const struct model_info *info,
                       const char *msg)
{
    struct model_config cfg;
    struct error err;
    error_clear(&err);
    parse_ok(text, &cfg);
    int rc = model_config_check(&cfg, model, info, &err);
    if (rc == 0)
        print_error("check accepted: %s\n", text);
    assert_int_equal(rc, -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, msg);
    model_config_free(&cfg);
}

/* The config's JSON, NUL-terminated; free() it. Also checks it parses. */
static char *to_json(const struct model_config *cfg)
{
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1u << 20);
    json_w_init(&w, &b);
    model_config_write_json(cfg, &w);
    assert_int_equal(b.err, 0);
    assert_int_equal(w.depth, 0);

    struct arena a;
    arena_init(&a, 4096, 1u << 20);
    struct json_value *v;
    const char *msg;
    size_t off;
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &v, &msg, &off), 0);
    arena_free(&a);

    char *s = strndup(b.data, b.len);
    buf_free(&b);
    assert_non_null(s);
    return s;
}

static void assert_dims(const int64_t *dims, uint32_t ndim, const char *expect)
{
    char s[128];
    shape_format(dims, ndim, s, sizeof s);
    assert_string_equal(s, expect);
}

/* ---- Triton's examples ---------------------------------------------------- */

static const char simple_pbtxt[] = "name: \"simple\"\n"
                                   "platform: \"onnxruntime_onnx\"\n"
                                   "max_batch_size: 8\n"
                                   "input [\n"
                                   "  {\n"
                                   "    name: \"INPUT0\"\n"
                                   "    data_type: TYPE_INT32\n"
                                   "    dims: [ 16 ]\n"
                                   "  },\n"
                                   "  {\n"
                                   "    name: \"INPUT1\"\n"
                                   "    data_type: TYPE_INT32\n"
                                   "    dims: [ 16 ]\n"
                                   "  }\n"
                                   "]\n"
                                   "output [\n"
                                   "  {\n"
                                   "    name: \"OUTPUT0\"\n"
                                   "    data_type: TYPE_INT32\n"
                                   "    dims: [ 16 ]\n"
                                   "  },\n"
                                   "  {\n"
                                   "    name: \"OUTPUT1\"\n"
                                   "    data_type: TYPE_INT32\n"
                                   "    dims: [ 16 ]\n"
                                   "  }\n"
                                   "]\n";

static void test_simple_example(void **state)
{
    (void)state;
    struct model_config cfg;
    parse_ok(simple_pbtxt, &cfg);
    assert_string_equal(cfg.name, "simple");
    assert_string_equal(cfg.platform, "onnxruntime_onnx");
    assert_string_equal(cfg.backend, "");
    assert_int_equal(cfg.max_batch_size, 8);
    assert_int_equal(cfg.ninputs, 2);
    assert_int_equal(cfg.noutputs, 2);
    assert_string_equal(cfg.inputs[1].name, "INPUT1");
    assert_int_equal(cfg.inputs[1].dtype, DT_INT32);
    assert_dims(cfg.inputs[1].dims, cfg.inputs[1].ndim, "[16]");
    assert_false(cfg.inputs[1].optional);
    assert_string_equal(cfg.outputs[0].name, "OUTPUT0");
    assert_false(cfg.dynamic_batching.enabled);
    assert_int_equal(cfg.ninstance_groups, 0);
    assert_int_equal(cfg.version_policy.kind, MODEL_VERSIONS_LATEST);
    assert_int_equal(cfg.version_policy.num_versions, 1);
    assert_int_equal(cfg.nignored, 0);

    struct error err;
    assert_int_equal(model_config_check(&cfg, "simple", &simple, &err), 0);
    assert_string_equal(cfg.backend, "onnxruntime");
    assert_int_equal(cfg.ninputs, 2); /* nothing to complete */
    assert_false(cfg.inputs[0].autocompleted);
    assert_int_equal(cfg.ninstance_groups, 1);
    assert_string_equal(cfg.instance_groups[0].name, "simple");
    assert_int_equal(cfg.instance_groups[0].kind, MODEL_INSTANCE_CPU);
    assert_int_equal(cfg.instance_groups[0].count, 1);

    char *json = to_json(&cfg);
    assert_string_equal(
        json,
        "{\"name\":\"simple\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
        "\"runtime\":\"\","
        "\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":8,"
        "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_INT32\",\"format\":\"FORMAT_NONE\","
        "\"dims\":[16],"
        "\"is_shape_tensor\":false,\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_"
        "format_io\":false},"
        "{\"name\":\"INPUT1\",\"data_type\":\"TYPE_INT32\",\"format\":\"FORMAT_NONE\",\"dims\":[16]"
        ","
        "\"is_shape_tensor\":false,\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_"
        "format_io\":false}],"
        "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"label_"
        "filename\":\"\","
        "\"is_shape_tensor\":false,\"is_non_linear_format_io\":false},"
        "{\"name\":\"OUTPUT1\",\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"label_filename\":\"\","
        "\"is_shape_tensor\":false,\"is_non_linear_format_io\":false}],"
        "\"batch_input\":[],\"batch_output\":[],"
        "\"model_transaction_policy\":{\"decoupled\":false},"
        "\"instance_group\":[{\"name\":\"simple\",\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],"
        "\"secondary_devices\":[],\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],"
        "\"default_model_filename\":\"model.onnx\",\"cc_model_filenames\":{},\"metric_tags\":{},"
        "\"parameters\":{},\"model_warmup\":[]}");
    free(json);
    model_config_free(&cfg);
}

/* Triton's quickstart densenet_onnx config (image classification). */
static void test_densenet_example(void **state)
{
    (void)state;
    static struct model_io in[] = {IO("data_0", DT_FP32, 3, 224, 224)};
    static struct model_io out[] = {IO("fc6_1", DT_FP32, 1000)};
    const struct model_info densenet = {1, 1, in, out};
    const char *text = "name: \"densenet_onnx\"\n"
                       "platform: \"onnxruntime_onnx\"\n"
                       "max_batch_size : 0\n"
                       "input [\n"
                       "  {\n"
                       "    name: \"data_0\"\n"
                       "    data_type: TYPE_FP32\n"
                       "    format: FORMAT_NCHW\n"
                       "    dims: [ 3, 224, 224 ]\n"
                       "    reshape { shape: [ 1, 3, 224, 224 ] }\n"
                       "  }\n"
                       "]\n"
                       "output [\n"
                       "  {\n"
                       "    name: \"fc6_1\"\n"
                       "    data_type: TYPE_FP32\n"
                       "    dims: [ 1000 ]\n"
                       "    reshape { shape: [ 1, 1000, 1, 1 ] }\n"
                       "    label_filename: \"densenet_labels.txt\"\n"
                       "  }\n"
                       "]\n";
    struct model_config cfg;
    parse_ok(text, &cfg);
    assert_int_equal(cfg.inputs[0].format, MODEL_IO_FORMAT_NCHW);
    assert_true(cfg.inputs[0].has_reshape);
    assert_dims(cfg.inputs[0].reshape, cfg.inputs[0].reshape_ndim, "[1,3,224,224]");
    assert_string_equal(cfg.outputs[0].label_filename, "densenet_labels.txt");
    /* the ONNX model of the quickstart takes [1,3,224,224] */
    static struct model_io in4[] = {IO("data_0", DT_FP32, 1, 3, 224, 224)};
    static struct model_io out4[] = {IO("fc6_1", DT_FP32, 1, 1000, 1, 1)};
    const struct model_info densenet4 = {1, 1, in4, out4};
    struct error err;
    assert_int_equal(model_config_check(&cfg, "densenet_onnx", &densenet4, &err), 0);
    char *json = to_json(&cfg);
    assert_non_null(strstr(
        json,
        "\"format\":\"FORMAT_NCHW\",\"dims\":[3,224,224],\"reshape\":{\"shape\":[1,3,224,224]}"));
    assert_non_null(strstr(
        json, "\"reshape\":{\"shape\":[1,1000,1,1]},\"label_filename\":\"densenet_labels.txt\""));
    free(json);
    model_config_free(&cfg);

    /* checked against the un-reshaped model, the reshape disagrees */
    check_fail(
        text, "densenet_onnx", &densenet,
        "input 'data_0': config reshape [1,3,224,224] do not match the model's shape [3,224,224]");
}

static void test_dynamic_batching_every_field(void **state)
{
    (void)state;
    const char *text = "max_batch_size: 16\n"
                       "dynamic_batching {\n"
                       "  preferred_batch_size: [ 4, 8 ]\n"
                       "  preferred_batch_size: 16\n"
                       "  max_queue_delay_microseconds: 500\n"
                       "  preserve_ordering: false\n"
                       "  priority_levels: 3\n"
                       "  default_priority_level: 2\n"
                       "  default_queue_policy {\n"
                       "    timeout_action: DELAY\n"
                       "    default_timeout_microseconds: 100000\n"
                       "    allow_timeout_override: true\n"
                       "    max_queue_size: 32\n"
                       "  }\n"
                       "  priority_queue_policy { key: 1 value { max_queue_size: 4 } }\n"
                       "  priority_queue_policy [ { key: 3, value: { timeout_action: REJECT, "
                       "default_timeout_microseconds: 18446744073709551615 } } ]\n"
                       "  priority_queue_policy { key: 1 value { max_queue_size: 5 } }\n"
                       "}\n";
    struct model_config cfg;
    parse_ok(text, &cfg);
    const struct model_dynamic_batching *db = &cfg.dynamic_batching;
    assert_true(db->enabled);
    assert_int_equal(db->npreferred, 3);
    assert_int_equal(db->preferred_batch_size[0], 4);
    assert_int_equal(db->preferred_batch_size[2], 16);
    assert_int_equal(db->max_queue_delay_us, 500);
    assert_false(db->preserve_ordering);
    assert_int_equal(db->priority_levels, 3);
    assert_int_equal(db->default_priority_level, 2);
    assert_int_equal(db->default_queue_policy.timeout_action, MODEL_TIMEOUT_DELAY);
    assert_int_equal(db->default_queue_policy.default_timeout_us, 100000);
    assert_true(db->default_queue_policy.allow_timeout_override);
    assert_int_equal(db->default_queue_policy.max_queue_size, 32);
    assert_int_equal(db->npriority_policies, 2); /* key 1 twice: the last wins */
    assert_int_equal(db->priority_queue_policy[0].level, 1);
    assert_int_equal(db->priority_queue_policy[0].policy.max_queue_size, 5);
    assert_int_equal(db->priority_queue_policy[1].level, 3);
    assert_true(db->priority_queue_policy[1].policy.default_timeout_us == UINT64_MAX);

    struct error err;
    assert_int_equal(model_config_check(&cfg, "image", &image, &err), 0);
    char *json = to_json(&cfg);
    assert_non_null(strstr(
        json, "\"dynamic_batching\":{\"preferred_batch_size\":[4,8,16],\"max_queue_delay_"
              "microseconds\":500,"
              "\"preserve_ordering\":false,\"priority_levels\":3,\"default_priority_level\":2,"
              "\"default_queue_policy\":{\"timeout_action\":\"DELAY\",\"default_timeout_"
              "microseconds\":100000,"
              "\"allow_timeout_override\":true,\"max_queue_size\":32},"
              "\"priority_queue_policy\":{\"1\":{\"timeout_action\":\"REJECT\",\"default_timeout_"
              "microseconds\":0,"
              "\"allow_timeout_override\":false,\"max_queue_size\":5},"
              "\"3\":{\"timeout_action\":\"REJECT\",\"default_timeout_microseconds\":"
              "18446744073709551615,"
              "\"allow_timeout_override\":false,\"max_queue_size\":0}}},"));
    free(json);
    model_config_free(&cfg);
}

static void test_dynamic_batching_defaults(void **state)
{
    (void)state;
    struct model_config cfg;
    check_ok("max_batch_size: 8 dynamic_batching { }", "simple", &simple, &cfg);
    assert_true(cfg.dynamic_batching.enabled);
    assert_int_equal(cfg.dynamic_batching.max_queue_delay_us, 0);
    /* Triton's normalization: no preferred sizes -> max_batch_size */
    assert_int_equal(cfg.dynamic_batching.npreferred, 1);
    assert_int_equal(cfg.dynamic_batching.preferred_batch_size[0], 8);
    assert_int_equal(cfg.dynamic_batching.default_queue_policy.timeout_action,
                     MODEL_TIMEOUT_REJECT);
    model_config_free(&cfg);

    /* allowed without batching: queue policies still apply */
    check_ok("dynamic_batching { default_queue_policy { max_queue_size: 2 } }", "fixed", &fixed,
             &cfg);
    assert_true(cfg.dynamic_batching.enabled);
    assert_int_equal(cfg.dynamic_batching.npreferred, 0);
    model_config_free(&cfg);
}

static void test_dynamic_batching_errors(void **state)
{
    (void)state;
    parse_fail("max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: -5\n}",
               "3:33: dynamic_batching.max_queue_delay_microseconds: expected a non-negative "
               "integer, found -5");
    parse_fail("dynamic_batching { max_queue_delay_microseconds: \"100\" }",
               "1:50: dynamic_batching.max_queue_delay_microseconds: expected a non-negative "
               "integer, found the "
               "string \"100\"");
    parse_fail("max_batch_size: 8 dynamic_batching { preferred_batch_size: [4, 16] }",
               "1:64: dynamic_batching.preferred_batch_size: preferred batch size 16 is larger "
               "than max_batch_size 8");
    parse_fail("dynamic_batching { preferred_batch_size: 1 }\nmax_batch_size: 0",
               "1:42: dynamic_batching.preferred_batch_size: preferred batch size 1 is larger than "
               "max_batch_size 0");
    parse_fail(
        "max_batch_size: 8 dynamic_batching { preferred_batch_size: 0 }",
        "1:60: dynamic_batching.preferred_batch_size: expected a positive batch size, found 0");
    parse_fail("dynamic_batching { priority_levels: 2 }",
               "1:18: dynamic_batching.default_priority_level: must be in [1, 2] when "
               "priority_levels is set");
    parse_fail("dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
               "1:63: dynamic_batching.default_priority_level: must be in [1, 2] when "
               "priority_levels is set");
    parse_fail("dynamic_batching { default_priority_level: 1 }",
               "1:44: dynamic_batching.default_priority_level: needs priority_levels");
    parse_fail("dynamic_batching { priority_queue_policy { key: 1 value {} } }",
               "1:20: dynamic_batching.priority_queue_policy[0]: needs priority_levels");
    parse_fail(
        "dynamic_batching { priority_levels: 2 default_priority_level: 1\n"
        "  priority_queue_policy { key: 3 value {} } }",
        "2:32: dynamic_batching.priority_queue_policy[0]: priority level 3 is not in [1, 2]");
    parse_fail("dynamic_batching { priority_levels: 2 default_priority_level: 1\n"
               "  priority_queue_policy { key: 1 value { timeout_action: WAIT } } }",
               "2:58: dynamic_batching.priority_queue_policy[0].value.timeout_action: expected "
               "REJECT or DELAY, found "
               "WAIT");
    parse_fail("dynamic_batching { priority_levels: 2 default_priority_level: 1\n"
               "  priority_queue_policy { key: 1 val {} } }",
               "2:34: dynamic_batching.priority_queue_policy[0].val: unknown field in a map entry "
               "(expected key and "
               "value)");
    parse_fail(
        "dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }",
        "1:18: dynamic_batching: preserve_ordering allows only one priority level");
    parse_fail(
        "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY "
        "default_timeout_microseconds: 10 } }",
        "1:18: dynamic_batching: preserve_ordering does not allow the DELAY timeout action");
    parse_fail(
        "dynamic_batching { max_queue_delay_microseconds: 1 max_queue_delay_microseconds: 2 }",
        "1:52: dynamic_batching.max_queue_delay_microseconds: specified more than once");
    parse_fail("dynamic_batching { max_queue_delay_microseconds: [1] }",
               "1:20: dynamic_batching.max_queue_delay_microseconds: not a repeated field: list "
               "syntax is not allowed");
    parse_fail("dynamic_batching { default_queue_policy { max_queue_size: 4294967296 } }",
               "1:59: dynamic_batching.default_queue_policy.max_queue_size: expected a "
               "non-negative 32-bit integer, "
               "found 4294967296");
    parse_fail("dynamic_batching { batch_timeout: 5 }",
               "1:20: dynamic_batching.batch_timeout: unknown field (not part of Triton's "
               "ModelDynamicBatching)");
    parse_fail("dynamic_batching: 5",
               "1:19: dynamic_batching: expected a message { ... }, found 5");
    parse_fail("dynamic_batching {} sequence_batching {}",
               "1:21: sequence_batching: dynamic_batching and sequence_batching cannot both be set "
               "(one scheduling "
               "policy per model)");
    parse_fail("dynamic_batching {} dynamic_batching {}",
               "1:21: dynamic_batching: dynamic_batching and dynamic_batching cannot both be set "
               "(one scheduling "
               "policy per model)");
}

static void test_instance_groups(void **state)
{
    (void)state;
    const char *text =
        "instance_group [\n"
        "  { count: 2 kind: KIND_CPU },\n"
        "  { name: \"extra\" kind: KIND_AUTO },\n"
        "  { kind: KIND_MODEL count: 0 rate_limiter { priority: 2 } passive: false }\n"
        "]\n";
    struct model_config cfg;
    parse_ok(text, &cfg);
    assert_int_equal(cfg.ninstance_groups, 3);
    assert_string_equal(cfg.instance_groups[0].name, "");
    assert_int_equal(cfg.instance_groups[0].count, 2);
    assert_int_equal(cfg.instance_groups[1].kind, MODEL_INSTANCE_AUTO);
    assert_int_equal(cfg.instance_groups[1].count, 1);
    assert_int_equal(cfg.instance_groups[2].kind, MODEL_INSTANCE_MODEL);
    assert_int_equal(cfg.instance_groups[2].count, 1); /* 0 means unset */
    assert_int_equal(cfg.nignored, 2);
    assert_string_equal(cfg.ignored[0].path, "instance_group.rate_limiter");
    assert_int_equal(cfg.ignored[0].line, 4);
    assert_int_equal(cfg.ignored[0].col, 31);
    assert_string_equal(cfg.ignored[1].path, "instance_group.passive");

    struct error err;
    assert_int_equal(model_config_check(&cfg, "simple", &simple, &err), 0);
    assert_string_equal(cfg.instance_groups[0].name, "simple_0");
    assert_int_equal(cfg.instance_groups[0].kind, MODEL_INSTANCE_CPU);
    assert_string_equal(cfg.instance_groups[1].name, "extra");
    assert_int_equal(cfg.instance_groups[1].kind, MODEL_INSTANCE_CPU);
    assert_string_equal(cfg.instance_groups[2].name, "simple_2");
    char *json = to_json(&cfg);
    assert_non_null(strstr(json, "{\"name\":\"simple_2\",\"kind\":\"KIND_MODEL\",\"count\":1,"));
    free(json);
    model_config_free(&cfg);

    parse_fail("instance_group [ { kind: KIND_GPU } ]",
               "1:26: instance_group[0].kind: GPU instances are not supported (inferd runs models "
               "on the CPU)");
    parse_fail("instance_group { kind: 1 }", "1:24: instance_group[0].kind: GPU instances are not "
                                             "supported (inferd runs models on the CPU)");
    parse_fail(
        "instance_group { kind: KIND_TPU }",
        "1:24: instance_group[0].kind: expected KIND_AUTO, KIND_CPU or KIND_MODEL, found KIND_TPU");
    parse_fail("instance_group { count: 1 }\ninstance_group { count: -1 }",
               "2:25: instance_group[1].count: expected a positive instance count, found -1");
    parse_fail("instance_group { count: 257 }",
               "1:25: instance_group[0].count: expected a positive instance count, found 257");
    parse_fail("instance_group { count: 200 }\ninstance_group { count: 100 }",
               "2:1: instance_group[1]: more than 256 instances in all groups");
    parse_fail(
        "instance_group { kind: KIND_CPU gpus: [ 0 ] }",
        "1:41: instance_group[0].gpus: GPUs are not supported (inferd runs models on the CPU)");
    parse_fail("instance_group { profile: \"0\" }",
               "1:27: instance_group[0].profile: optimization profiles are only supported by "
               "TensorRT models");
    parse_fail("instance_group { name: 'a' name: 'b' }",
               "1:28: instance_group[0].name: specified more than once");
    parse_fail(
        "instance_group { cpus: 2 }",
        "1:18: instance_group[0].cpus: unknown field (not part of Triton's ModelInstanceGroup)");
}

static void test_version_policies(void **state)
{
    (void)state;
    struct model_config cfg;
    char *json;

    parse_ok("version_policy: { latest: { num_versions: 2 } }", &cfg);
    assert_int_equal(cfg.version_policy.kind, MODEL_VERSIONS_LATEST);
    assert_int_equal(cfg.version_policy.num_versions, 2);
    model_config_free(&cfg);

    parse_ok("version_policy: { all: { } }", &cfg);
    assert_int_equal(cfg.version_policy.kind, MODEL_VERSIONS_ALL);
    json = to_json(&cfg);
    assert_non_null(strstr(json, "\"version_policy\":{\"all\":{}}"));
    free(json);
    model_config_free(&cfg);

    parse_ok("version_policy { specific { versions: [1, 3] versions: 7 } }", &cfg);
    assert_int_equal(cfg.version_policy.kind, MODEL_VERSIONS_SPECIFIC);
    assert_int_equal(cfg.version_policy.nversions, 3);
    assert_int_equal(cfg.version_policy.versions[0], 1);
    assert_int_equal(cfg.version_policy.versions[2], 7);
    json = to_json(&cfg);
    assert_non_null(strstr(json, "\"version_policy\":{\"specific\":{\"versions\":[1,3,7]}}"));
    free(json);
    model_config_free(&cfg);

    parse_fail("version_policy { latest { num_versions: 1 } all { } }",
               "1:45: version_policy.all: only one of latest, all and specific may be set");
    parse_fail("version_policy { latest { } }",
               "1:25: version_policy.latest.num_versions: must be at least 1");
    parse_fail("version_policy { latest { num_versions: 0 } }",
               "1:41: version_policy.latest.num_versions: must be at least 1");
    parse_fail(
        "version_policy { latest { num_versions: -1 } }",
        "1:41: version_policy.latest.num_versions: expected a positive 32-bit integer, found -1");
    parse_fail("version_policy { specific { } }",
               "1:27: version_policy.specific: must list at least one version");
    parse_fail("version_policy { specific { versions: [1, -2] } }",
               "1:43: version_policy.specific.versions: expected a version number >= 0, found -2");
    parse_fail(
        "version_policy { all { x: 1 } }",
        "1:24: version_policy.all: unknown field (not part of Triton's ModelVersionPolicy.All)");
    parse_fail("version_policy { }",
               "1:16: version_policy: must set one of latest, all and specific");
    parse_fail(
        "version_policy { newest { } }",
        "1:18: version_policy.newest: unknown field (not part of Triton's ModelVersionPolicy)");
    parse_fail("version_policy { latest: 1 }",
               "1:26: version_policy.latest: expected a message { ... }, found 1");
    parse_fail("version_policy { all {} }\nversion_policy { all {} }",
               "2:1: version_policy: specified more than once");
}

static const char warmup_pbtxt[] =
    "max_batch_size: 8\n"
    "model_warmup [\n"
    "  {\n"
    "    name: \"zeros\"\n"
    "    batch_size: 4\n"
    "    inputs { key: \"INPUT0\" value: { data_type: TYPE_INT32 dims: [ 16 ] "
    "zero_data: true } }\n"
    "    inputs { key: \"INPUT1\" value: { data_type: TYPE_INT32 dims: [ 16 ] "
    "random_data: true } }\n"
    "    count: 3\n"
    "  },\n"
    "  {\n"
    "    name: \"file\"\n"
    "    batch_size: 1\n"
    "    inputs [ { key: \"INPUT0\" value: { data_type: TYPE_INT32 dims: 16 "
    "input_data_file: \"in0.bin\" } },\n"
    "             { key: \"INPUT1\" value: { data_type: TYPE_INT32 dims: 16 "
    "zero_data: false } } ]\n"
    "  }\n"
    "]\n";

static void test_warmup(void **state)
{
    (void)state;
    struct model_config cfg;
    check_ok(warmup_pbtxt, "simple", &simple, &cfg);
    assert_int_equal(cfg.nwarmups, 2);
    const struct model_warmup *w = &cfg.warmups[0];
    assert_string_equal(w->name, "zeros");
    assert_int_equal(w->batch_size, 4);
    assert_int_equal(w->count, 3);
    assert_int_equal(w->ninputs, 2);
    assert_string_equal(w->inputs[0].name, "INPUT0");
    assert_int_equal(w->inputs[0].dtype, DT_INT32);
    assert_dims(w->inputs[0].dims, w->inputs[0].ndim, "[16]");
    assert_int_equal(w->inputs[0].source, MODEL_WARMUP_ZERO);
    assert_int_equal(w->inputs[1].source, MODEL_WARMUP_RANDOM);
    w = &cfg.warmups[1];
    assert_int_equal(w->count, 0);
    assert_int_equal(w->inputs[0].source, MODEL_WARMUP_FILE);
    assert_string_equal(w->inputs[0].input_data_file, "in0.bin");
    assert_int_equal(w->inputs[1].source, MODEL_WARMUP_ZERO); /* the value is not checked */
    char *json = to_json(&cfg);
    assert_non_null(strstr(
        json, "\"model_warmup\":[{\"name\":\"zeros\",\"batch_size\":4,\"inputs\":{"
              "\"INPUT0\":{\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"zero_data\":true},"
              "\"INPUT1\":{\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"random_data\":true}},"
              "\"count\":3},{\"name\":\"file\",\"batch_size\":1,\"inputs\":{"
              "\"INPUT0\":{\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"input_data_file\":\"in0."
              "bin\"},"));
    free(json);
    model_config_free(&cfg);
}

static void test_warmup_errors(void **state)
{
    (void)state;
    parse_fail("model_warmup { name: 'w' inputs { key: 'x' value { data_type: TYPE_FP32 zero_data: "
               "true } } }",
               "1:14: model_warmup[0].batch_size: must be in [1, 1] (max_batch_size 0)");
    parse_fail("max_batch_size: 4 model_warmup { batch_size: 5 }",
               "1:46: model_warmup[0].batch_size: must be in [1, 4] (max_batch_size 4)");
    parse_fail(
        "model_warmup { batch_size: 1 inputs { key: 'x' value { data_type: TYPE_FP32 zero_data: "
        "true "
        "random_data: true } } }",
        "1:93: model_warmup[0].inputs[\"x\"].random_data: only one of zero_data, random_data and "
        "input_data_file may be set");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' value { data_type: TYPE_FP32 } } }",
               "1:54: model_warmup[0].inputs[\"x\"]: must set one of zero_data, random_data and "
               "input_data_file");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' value { zero_data: true } } }",
               "1:54: model_warmup[0].inputs[\"x\"]: must specify 'data_type'");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' value { data_type: TYPE_FP32 "
               "input_data_file: '../../etc/passwd' } } }",
               "1:94: model_warmup[0].inputs[\"x\"].input_data_file: must be a file name in the "
               "model's warmup "
               "directory");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' value { data_type: TYPE_FP32 dims: "
               "-1 zero_data: 1 } "
               "} }",
               "1:83: model_warmup[0].inputs[\"x\"].dims: expected a dimension >= 1, found -1");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' } }",
               "1:37: model_warmup[0].inputs[\"x\"]: map entry without a value");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 7 value {} } }",
               "1:44: model_warmup[0].inputs[0].key: expected a string, found 7");

    /* against the model */
    check_fail("max_batch_size: 8 model_warmup { name: 'w' batch_size: 1 inputs { key: 'INPUT2' "
               "value { data_type: "
               "TYPE_INT32 dims: 16 zero_data: true } } }",
               "simple", &simple, "model_warmup[0] 'w': the model has no input 'INPUT2'");
    check_fail("max_batch_size: 8 model_warmup { name: 'w' batch_size: 1 inputs { key: 'INPUT0' "
               "value { data_type: "
               "TYPE_FP32 dims: 16 zero_data: true } } }",
               "simple", &simple,
               "model_warmup[0] 'w': input 'INPUT0' has data_type TYPE_FP32, the model TYPE_INT32");
    check_fail("max_batch_size: 8 model_warmup { name: 'w' batch_size: 1 inputs { key: 'INPUT0' "
               "value { data_type: "
               "TYPE_INT32 dims: [1, 16] zero_data: true } } }",
               "simple", &simple,
               "model_warmup[0] 'w': input 'INPUT0' has dims [1,16], the model [16]");
    check_fail("max_batch_size: 8 model_warmup { name: 'w' batch_size: 1 inputs { key: 'INPUT0' "
               "value { data_type: "
               "TYPE_INT32 dims: 16 zero_data: true } } }",
               "simple", &simple, "model_warmup[0] 'w': input 'INPUT1' is missing");
    /* an optional input may be left out; a variable dim takes any size */
    struct model_config cfg;
    check_ok("max_batch_size: 8 input { name: 'image' optional: true }\n"
             "model_warmup { batch_size: 2 }\n"
             "model_warmup { batch_size: 2 inputs { key: 'image' value { data_type: TYPE_FP32 "
             "dims: [3, 5, 7] "
             "zero_data: true } } }",
             "image", &image, &cfg);
    model_config_free(&cfg);
}

static void test_parameters(void **state)
{
    (void)state;
    struct model_config cfg;
    parse_ok("parameters { key: \"intra_op_thread_count\" value: { string_value: \"2\" } }\n"
             "parameters [ { key: 'a' value { string_value: 'x' } }, { key: 'b' value { } } ]\n"
             "parameters { key: 'a' value { string_value: 'y' } }\n"
             "parameters { value { string_value: 'no key' } }\n"
             "parameters { key: 'c' }\n",
             &cfg);
    assert_int_equal(cfg.nparameters, 5);
    assert_string_equal(cfg.parameters[0].key, "intra_op_thread_count");
    assert_string_equal(cfg.parameters[0].string_value, "2");
    assert_string_equal(cfg.parameters[1].key, "a");
    assert_string_equal(cfg.parameters[1].string_value, "y"); /* the last wins */
    assert_string_equal(cfg.parameters[2].key, "b");
    assert_string_equal(cfg.parameters[2].string_value, "");
    assert_string_equal(cfg.parameters[3].key, "");
    assert_string_equal(cfg.parameters[4].string_value, "");
    char *json = to_json(&cfg);
    assert_non_null(strstr(json,
                           "\"parameters\":{\"intra_op_thread_count\":{\"string_value\":\"2\"},"
                           "\"a\":{\"string_value\":\"y\"},\"b\":{\"string_value\":\"\"},"
                           "\"\":{\"string_value\":\"no key\"},\"c\":{\"string_value\":\"\"}}"));
    free(json);
    model_config_free(&cfg);

    parse_fail("parameters { key: 'k' value { int_value: 3 } }",
               "1:31: parameters[\"k\"].value.int_value: unknown field (not part of Triton's "
               "ModelParameter)");
    parse_fail("parameters { key: 'k' value { string_value: 3 } }",
               "1:45: parameters[\"k\"].value.string_value: expected a string, found 3");
    parse_fail("parameters { key: 'k' value: 'v' }",
               "1:30: parameters[\"k\"].value: expected a message { ... }, found the string \"v\"");
    parse_fail("parameters { key: 'k' key: 'j' }",
               "1:23: parameters[0].key: specified more than once");
    parse_fail("parameters { key: 'a\\0b' }",
               "1:19: parameters[0].key: must not contain NUL bytes");
    parse_fail("parameters: 'x'",
               "1:13: parameters[0]: expected a message { ... }, found the string \"x\"");
}

/* sequence_batching: the strategy, controls and state are read; the
 * control and state tensors are the server's, never autocompleted into
 * the config's inputs and outputs; mistakes are named. */
static void test_sequence_batching(void **state)
{
    (void)state;
    static const char text[] =
        "max_batch_size: 8\n"
        "sequence_batching {\n"
        "  max_sequence_idle_microseconds: 2000000\n"
        "  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] "
        "max_queue_delay_microseconds: 300 preserve_ordering: true }\n"
        "  control_input [\n"
        "    { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 "
        "] } ] },\n"
        "    { name: \"READY\" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1.5 "
        "] } ] },\n"
        "    { name: \"CORRID\" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 "
        "} ] }\n"
        "  ]\n"
        "  state [ { input_name: \"ACC_IN\" output_name: \"ACC_OUT\" data_type: TYPE_INT32 dims: "
        "[ 1 ] initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: \"z\" } } "
        "]\n"
        "}\n";
    struct model_config cfg;
    parse_ok(text, &cfg);
    const struct model_sequence_batching *sb = &cfg.sequence_batching;
    assert_true(sb->enabled && sb->oldest);
    assert_int_equal(sb->max_sequence_idle_us, 2000000);
    assert_int_equal(sb->max_candidate_sequences, 4);
    assert_int_equal(sb->npreferred, 2);
    assert_int_equal(sb->preferred_batch_size[1], 4);
    assert_int_equal(sb->max_queue_delay_us, 300);
    assert_int_equal(sb->ncontrols, 3);
    assert_int_equal(sb->controls[0].kind, MODEL_SEQ_START);
    assert_int_equal(sb->controls[0].dtype, DT_INT32);
    assert_int_equal(sb->controls[0].int32_false_true[1], 1);
    assert_int_equal(sb->controls[1].dtype, DT_FP32);
    assert_true(sb->controls[1].fp32_false_true[1] == 1.5f);
    assert_int_equal(sb->controls[2].kind, MODEL_SEQ_CORRID);
    assert_int_equal(sb->controls[2].dtype, DT_UINT64);
    assert_int_equal(sb->nstates, 1);
    assert_string_equal(sb->states[0].output_name, "ACC_OUT");
    assert_int_equal(sb->states[0].ndim, 1);
    assert_int_equal(cfg.nignored, 1); /* oldest.preserve_ordering: about slots */
    struct error err;
    assert_int_equal(model_config_check(&cfg, "seq", &seqmodel, &err), 0);
    assert_int_equal(cfg.ninputs, 1); /* INPUT only */
    assert_string_equal(cfg.inputs[0].name, "INPUT");
    assert_int_equal(cfg.noutputs, 1);
    assert_true(model_config_sequence_input(&cfg, "CORRID"));
    assert_true(model_config_sequence_output(&cfg, "ACC_OUT"));
    assert_false(model_config_sequence_input(&cfg, "INPUT"));
    model_config_free(&cfg);
    /* The default idle time, and a direct strategy. */
    parse_ok("sequence_batching { direct { max_queue_delay_microseconds: 5 } }", &cfg);
    assert_int_equal(cfg.sequence_batching.max_sequence_idle_us, MODEL_SEQ_DEFAULT_IDLE_US);
    assert_false(cfg.sequence_batching.oldest);
    model_config_free(&cfg);

    parse_fail("sequence_batching { control_input [ { name: \"S\" control [ { kind: "
               "CONTROL_SEQUENCE_START int32_false_true: [ 0 ] } ] } ] }",
               "1:49: sequence_batching.control_input[0].control[0]: CONTROL_SEQUENCE_START needs "
               "two values "
               "(false, then true) in one of int32_false_true, fp32_false_true and "
               "bool_false_true");
    parse_fail("sequence_batching { control_input [ { name: \"C\" control [ { kind: "
               "CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ] }",
               "1:49: sequence_batching.control_input[0].control[0]: CONTROL_SEQUENCE_CORRID needs "
               "data_type TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING");
    parse_fail("sequence_batching { state [ { input_name: \"a\" output_name: \"b\" data_type: "
               "TYPE_INT32 dims: [ -1 ] } ] }",
               "1:21: sequence_batching.state[0]: dims has a variable dimension: give initial_state "
               "dims (the shape of the state a sequence starts with)");
    parse_fail("sequence_batching { state [ { input_name: \"a\" output_name: \"b\" data_type: "
               "TYPE_INT32 dims: [ 1 ] initial_state { data_file: \"f\" } } ] }",
               "1:114: sequence_batching.state[0].initial_state.data_file: not supported by inferd: "
               "initial states are zeros (zero_data)");
    parse_fail("sequence_batching { direct { } oldest { } }",
               "1:32: sequence_batching.oldest: direct and oldest cannot both be set");
    parse_fail("dynamic_batching { } sequence_batching { }",
               "1:22: sequence_batching: dynamic_batching and sequence_batching cannot both be set "
               "(one scheduling policy per model)");

    /* Tensors the model lacks, or of another type, or also listed as inputs. */
    static const char *const bad[][3] = {
        {"control_input [ { name: \"NOPE\" control [ { kind: CONTROL_SEQUENCE_START "
         "int32_false_true: [ 0, 1 ] } ] } ]",
         "",
         "sequence_batching: control input 'NOPE': the model has no input of that name (its "
         "inputs: 'INPUT' (INT32 [-1,1]), 'START' (INT32 [-1,1]), 'READY' (FP32 [-1,1]), "
         "'CORRID' (UINT64 [-1,1]), 'ACC_IN' (INT32 [-1,1]))"},
        {"control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START "
         "fp32_false_true: [ 0, 1 ] } ] } ]",
         "",
         "sequence_batching: control input 'START' is TYPE_INT32 in the model, the config says "
         "TYPE_FP32"},
        {"state [ { input_name: \"ACC_IN\" output_name: \"OUTPUT\" data_type: TYPE_INT32 dims: "
         "[ 1 ] } ]",
         "output [ { name: \"OUTPUT\" } ]",
         "sequence_batching: state output 'OUTPUT' is fed by the server; it cannot also be a "
         "model output in the config"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, "max_batch_size: 8 sequence_batching { %s } %s", bad[i][0],
                 bad[i][1]);
        parse_ok(t, &cfg);
        assert_int_equal(model_config_check(&cfg, "seq", &seqmodel, &err), -1);
        assert_string_equal(err.msg, bad[i][2]);
        model_config_free(&cfg);
    }
}

static void test_ignored_fields(void **state)
{
    (void)state;
    const char *text = "name: \"m\"\n"
                       "optimization { execution_accelerators { cpu_execution_accelerator: [ { "
                       "name: \"openvino\" } ] } "
                       "}\n"
                       "input [ { name: \"a\" allow_ragged_batch: true } ]\n"
                       "response_cache { enable: true }\n"
                       "model_transaction_policy { decoupled: false }\n"
                       "default_model_filename: \"model.onnx\"\n"
                       "cc_model_filenames { key: \"7.5\" value: \"x.onnx\" }\n"
                       "metric_tags { key: \"team\" value: \"vision\" }\n"
                       "model_operations { op_library_filename: \"libop.so\" }\n"
                       "model_repository_agents { agents [ { name: \"checksum\" } ] }\n"
                       "batch_input [ { kind: BATCH_ELEMENT_COUNT } ]\n"
                       "batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE } ]\n"
                       "batch_input { kind: BATCH_ITEM_SHAPE }\n"
                       "runtime: \"libtriton_onnxruntime.so\"\n"
                       "model_metrics { }\n"
                       "input [ { name: \"b\" allow_ragged_batch: false } ]\n";
    struct model_config cfg;
    parse_ok(text, &cfg);
    const char *paths[] = {"optimization",
                           "input.allow_ragged_batch",
                           "response_cache",
                           "default_model_filename",
                           "cc_model_filenames",
                           "metric_tags",
                           "model_operations",
                           "model_repository_agents",
                           "batch_input",
                           "batch_output",
                           "runtime",
                           "model_metrics"};
    assert_int_equal(cfg.nignored, sizeof paths / sizeof paths[0]);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        assert_string_equal(cfg.ignored[i].path, paths[i]);
    assert_int_equal(cfg.ignored[0].line, 2);
    assert_int_equal(cfg.ignored[0].col, 1);
    assert_int_equal(cfg.ignored[1].line, 3);
    assert_int_equal(cfg.ignored[1].col, 21);
    assert_int_equal(cfg.ignored[8].line, 11); /* the first batch_input */
    assert_int_equal(cfg.ninputs, 2);
    assert_false(cfg.decoupled); /* model_transaction_policy is read, not ignored */
    model_config_free(&cfg);

    /* An ensemble has no ONNX model: the ONNX check refuses its platform
     * (the registry checks it with model_config_check_ensemble). */
    parse_ok("platform: \"ensemble\" ensemble_scheduling { step [ { model_name: \"a\" "
             "output_map { key: \"y\" value: \"Y\" } } ] }",
             &cfg);
    assert_int_equal(cfg.nignored, 0);
    struct error err;
    assert_int_equal(model_config_check(&cfg, "simple", &simple, &err), -1);
    assert_string_equal(
        err.msg,
        "platform: 'ensemble' is not supported (inferd serves \"onnxruntime_onnx\" models)");
    model_config_free(&cfg);
}

/* ensemble_scheduling: steps and maps are read; the pipeline is checked
 * (sources of every tensor, no double producer, no cycle, outputs made). */
static void test_ensemble(void **state)
{
    (void)state;
    static const char head[] =
        "platform: \"ensemble\" max_batch_size: 4\n"
        "input [ { name: \"A\" data_type: TYPE_INT32 dims: [ 16 ] }, "
        "{ name: \"B\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";
    char text[8192];
    snprintf(text, sizeof text,
             "%sensemble_scheduling { step [\n"
             "  { model_name: \"simple\" model_version: 1\n"
             "    input_map { key: \"INPUT0\" value: \"A\" } input_map { key: \"INPUT1\" "
             "value: \"B\" }\n"
             "    output_map { key: \"OUTPUT0\" value: \"SUM\" } output_map { key: \"OUTPUT1\" "
             "value: \"DIFF\" } },\n"
             "  { model_name: \"simple\"\n"
             "    input_map [ { key: \"INPUT0\" value: \"SUM\" }, { key: \"INPUT1\" value: "
             "\"DIFF\" } ]\n"
             "    output_map { key: \"OUTPUT0\" value: \"OUT\" } } ] }\n",
             head);
    struct model_config cfg;
    parse_ok(text, &cfg);
    assert_true(cfg.ensemble.enabled);
    assert_int_equal(cfg.ensemble.nsteps, 2);
    assert_int_equal(cfg.ensemble.steps[0].model_version, 1);
    assert_int_equal(cfg.ensemble.steps[1].model_version, -1);
    assert_int_equal(cfg.ensemble.steps[1].ninputs, 2);
    assert_string_equal(cfg.ensemble.steps[1].input_map[1].value, "DIFF");
    struct error err;
    assert_int_equal(model_config_check_ensemble(&cfg, "pipe", &err), 0);
    assert_string_equal(cfg.name, "pipe");
    model_config_free(&cfg);

    static const char *const bad[][2] = {
        {"ensemble_scheduling { step [ { model_name: \"m\" input_map { key: \"x\" value: "
         "\"NOPE\" } output_map { key: \"y\" value: \"OUT\" } } ] }",
         "ensemble_scheduling.step[0] ('m'): input_map takes 'NOPE', which is neither an "
         "ensemble input nor a step's output"},
        {"ensemble_scheduling { step [ { model_name: \"m\" input_map { key: \"x\" value: \"A\" "
         "} output_map { key: \"y\" value: \"T\" } } ] }",
         "output 'OUT': no step gives it (an output_map value)"},
        {"ensemble_scheduling { step [ { model_name: \"m\" input_map { key: \"x\" value: \"A\" "
         "} output_map { key: \"y\" value: \"OUT\" } }, { model_name: \"n\" output_map { "
         "key: \"z\" value: \"OUT\" } } ] }",
         "ensemble_scheduling.step[1] ('n'): 'OUT' is also the output of step 0"},
        {"ensemble_scheduling { step [ { model_name: \"m\" input_map { key: \"x\" value: \"T2\" "
         "} output_map { key: \"y\" value: \"T1\" } }, { model_name: \"n\" input_map { key: "
         "\"x\" value: \"T1\" } output_map [ { key: \"y\" value: \"T2\" }, { key: \"z\" "
         "value: \"OUT\" } ] } ] }",
         "ensemble_scheduling.step[0] ('m'): its inputs wait for its own outputs (the steps form "
         "a cycle)"},
        {"ensemble_scheduling { step [ { model_name: \"pipe\" output_map { key: \"y\" value: "
         "\"OUT\" } } ] }",
         "ensemble_scheduling.step[0]: the ensemble cannot run itself"},
        {"ensemble_scheduling { step [ { model_name: \"m\" output_map { key: \"y\" value: \"A\" "
         "} } ] }",
         "ensemble_scheduling.step[0] ('m'): output_map gives 'A', which is an ensemble input"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", head, bad[i][0]);
        parse_ok(text, &cfg);
        assert_int_equal(model_config_check_ensemble(&cfg, "pipe", &err), -1);
        assert_string_equal(err.msg, bad[i][1]);
        model_config_free(&cfg);
    }
    /* At most MODEL_ENSEMBLE_MAX_STEPS steps. */
    size_t len = (size_t)snprintf(text, sizeof text, "%sensemble_scheduling { ", head);
    for (int i = 0; i <= MODEL_ENSEMBLE_MAX_STEPS; i++)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "step { model_name: \"m\" output_map { key: \"y\" value: "
                                "\"T%d\" } } ",
                                i);
    assert_true(len + 2 < sizeof text);
    strcat(text, "}");
    parse_ok(text, &cfg);
    assert_int_equal(model_config_check_ensemble(&cfg, "pipe", &err), -1);
    assert_string_equal(err.msg, "ensemble_scheduling: at most 64 steps");
    model_config_free(&cfg);
    parse_fail("ensemble_scheduling { step [ { model_name: \"m\" } ] }",
               "1:23: ensemble_scheduling.step[0]: needs an output_map entry (what the step gives "
               "the ensemble)");
}

static void test_unknown_fields(void **state)
{
    (void)state;
    parse_fail("name: 'm'\nmax_batch: 4",
               "2:1: max_batch: unknown field (not part of Triton's ModelConfig)");
    parse_fail("input [ { name: 'a' }, { name: 'b' shape: [1] } ]",
               "1:36: input[1].shape: unknown field (not part of Triton's ModelInput)");
    parse_fail("output { name: 'a' optional: true }",
               "1:20: output[0].optional: unknown field (not part of Triton's ModelOutput)");
    parse_fail(
        "output { name: 'a' allow_ragged_batch: true }",
        "1:20: output[0].allow_ragged_batch: unknown field (not part of Triton's ModelOutput)");
    parse_fail(
        "input { name: 'a' reshape { dims: [1] } }",
        "1:29: input[0].reshape.dims: unknown field (not part of Triton's ModelTensorReshape)");
    parse_fail(
        "dynamic_batching { default_queue_policy { action: REJECT } }",
        "1:43: dynamic_batching.default_queue_policy.action: unknown field (not part of Triton's "
        "ModelQueuePolicy)");
    parse_fail("model_warmup { batch_size: 1 size: 2 }",
               "1:30: model_warmup[0].size: unknown field (not part of Triton's ModelWarmup)");
    parse_fail("model_warmup { batch_size: 1 inputs { key: 'x' value { data_type: TYPE_FP32 shape: "
               "1 } } }",
               "1:77: model_warmup[0].inputs[\"x\"].shape: unknown field (not part of Triton's "
               "ModelWarmup.Input)");
    parse_fail("version_policy { latest { n: 1 } }",
               "1:27: version_policy.latest.n: unknown field (not part of Triton's "
               "ModelVersionPolicy.Latest)");
    parse_fail("version_policy { specific { version: 1 } }",
               "1:29: version_policy.specific.version: unknown field (not part of Triton's "
               "ModelVersionPolicy.Specific)");
}

static void test_value_errors(void **state)
{
    (void)state;
    parse_fail("name: simple", "1:7: name: expected a string, found simple");
    parse_fail("name: { }", "1:7: name: expected a string, found a message");
    parse_fail("name: 'a'\nname: 'b'", "2:1: name: specified more than once");
    parse_fail("name: ['a']", "1:1: name: not a repeated field: list syntax is not allowed");
    parse_fail("max_batch_size: -1",
               "1:17: max_batch_size: expected a non-negative integer, found -1");
    parse_fail("max_batch_size: 2147483648",
               "1:17: max_batch_size: expected a non-negative integer, found 2147483648");
    parse_fail("max_batch_size: 8.0",
               "1:17: max_batch_size: expected a non-negative integer, found 8.0");
    parse_fail("max_batch_size: \"8\"",
               "1:17: max_batch_size: expected a non-negative integer, found the string \"8\"");
    parse_fail("max_batch_size: 1 max_batch_size: 1",
               "1:19: max_batch_size: specified more than once");
    parse_fail("input { name: 'a' data_type: FP32 }",
               "1:30: input[0].data_type: expected a data type such as TYPE_FP32, found FP32");
    parse_fail("input { name: 'a' data_type: TYPE_INVALID }",
               "1:30: input[0].data_type: TYPE_INVALID is not a data type");
    parse_fail("input { name: 'a' data_type: 15 }",
               "1:30: input[0].data_type: expected a data type such as TYPE_FP32, found 15");
    parse_fail(
        "input { name: 'a' dims: [2, 0] }",
        "1:29: input[0].dims: expected a dimension >= 1, or -1 for a variable dimension, found 0");
    parse_fail(
        "input { name: 'a' dims: [-2] }",
        "1:26: input[0].dims: expected a dimension >= 1, or -1 for a variable dimension, found -2");
    parse_fail("input { name: 'a' dims: [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1] }",
               "1:58: input[0].dims: more than 16 dimensions");
    parse_fail("input { name: 'a' dims: 'x' }", "1:25: input[0].dims: expected a dimension >= 1, "
                                                "or -1 for a variable dimension, found the string "
                                                "\"x\"");
    parse_fail("input { name: 'a' optional: yes }",
               "1:29: input[0].optional: expected true or false, found yes");
    parse_fail("input { name: 'a' format: FORMAT_NCHW dims: [3, 4] }",
               "1:7: input[0]: FORMAT_NCHW needs 3 dims");
    parse_fail(
        "input { name: 'a' is_shape_tensor: true }",
        "1:36: input[0].is_shape_tensor: shape tensors are only supported by TensorRT models");
    parse_fail("output { name: 'a' is_non_linear_format_io: true }",
               "1:45: output[0].is_non_linear_format_io: non-linear IO formats are only supported "
               "by TensorRT models");
    parse_fail("input { dims: 1 }", "1:7: input[0]: must specify 'name'");
    parse_fail("input { name: '' }", "1:15: input[0].name: must not be empty");
    parse_fail("input [ { name: 'a' }, { name: 'b' }, { name: 'a' } ]",
               "1:47: input[2].name: input 'a' is specified more than once");
    parse_fail("input: 'a'", "1:8: input[0]: expected a message { ... }, found the string \"a\"");
    parse_fail("platform: 3", "1:11: platform: expected a string, found 3");
    parse_fail("name: \"x\" \"y\" backend: 'a' backend: 'b'",
               "1:28: backend: specified more than once");
}

static void test_reshape(void **state)
{
    (void)state;
    struct model_config cfg;
    /* the model sees [4, 4]; clients send [16] */
    check_ok("max_batch_size: 2 input { name: 'in' dims: [16] reshape: { shape: [4, 4] } }", "flat",
             &flat, &cfg);
    assert_true(cfg.inputs[0].has_reshape);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[16]");
    assert_dims(cfg.inputs[0].reshape, cfg.inputs[0].reshape_ndim, "[4,4]");
    model_config_free(&cfg);
    /* variable pieces pair up: [2,4,-1,6] and [8,-1,1,6] */
    parse_ok("input { name: 'x' dims: [2, 4, -1, 6] reshape { shape: [8, -1, 1, 6] } }", &cfg);
    model_config_free(&cfg);
    /* an empty reshape (a scalar per batch row) needs one element and batching */
    check_ok("max_batch_size: 4 output { name: 'out' dims: [1] reshape { } }", "flat", &flat, &cfg);
    assert_true(cfg.outputs[0].has_reshape);
    assert_int_equal(cfg.outputs[0].reshape_ndim, 0);
    char *json = to_json(&cfg);
    assert_non_null(strstr(json, "\"dims\":[1],\"reshape\":{\"shape\":[]},"));
    free(json);
    model_config_free(&cfg);

    parse_fail("input { name: 'x' dims: [16] reshape { shape: [4, 5] } }",
               "1:7: input[0]: reshape [4,5] does not hold the same elements as dims [16]");
    parse_fail("input { name: 'x' dims: [2, -1] reshape { shape: [2, 3] } }",
               "1:7: input[0]: reshape [2,3] does not hold the same elements as dims [2,-1]");
    parse_fail("input { name: 'x' dims: [2, -1, 3] reshape { shape: [6, -1] } }",
               "1:7: input[0]: reshape [6,-1] does not hold the same elements as dims [2,-1,3]");
    parse_fail("input { name: 'x' reshape { shape: [4] } }", "1:7: input[0]: reshape needs dims");
    parse_fail("input { name: 'x' dims: [1] reshape { } }",
               "1:7: input[0]: an empty reshape needs max_batch_size > 0 (scalar tensors are not "
               "supported)");
    parse_fail(
        "input { name: 'x' dims: [4611686018427387904, 4] reshape { shape: [4611686018427387904, "
        "4] } }",
        "1:7: input[0]: reshape [4611686018427387904,4] does not hold the same elements as dims "
        "[4611686018427387904,4]");
    parse_fail("input { name: 'x' dims: [1] reshape { shape: [0] } }",
               "1:47: input[0].reshape.shape: expected a dimension >= 1, or -1 for a variable "
               "dimension, found 0");
    parse_fail("input { name: 'x' dims: [1] reshape { } reshape { } }",
               "1:41: input[0].reshape: specified more than once");
    /* against the model: reshape is what the model sees */
    check_fail("max_batch_size: 2 input { name: 'in' dims: [16] }", "flat", &flat,
               "input 'in': config dims [16] plus the batch dimension make [-1,16], which does "
               "not match the model's shape [-1,4,4]");
    check_fail("max_batch_size: 2 input { name: 'in' dims: [16] reshape { shape: [2, 8] } }",
               "flat", &flat,
               "input 'in': config reshape [2,8] plus the batch dimension make [-1,2,8], which "
               "does not match the model's shape [-1,4,4]");
    /* the batch dimension written into reshape as well */
    check_fail("max_batch_size: 2 input { name: 'in' dims: [1, 16] reshape { shape: [1, 4, 4] } }",
               "flat", &flat,
               "input 'in': config reshape [1,4,4] plus the batch dimension make [-1,1,4,4], the "
               "model's shape is [-1,4,4]: leave the batch dimension out of reshape when "
               "max_batch_size > 0 (reshape: [4,4])");
    check_fail("max_batch_size: 2 output { name: 'out' dims: [-1] reshape { shape: [-1] } }",
               "flat", &flat,
               "output 'out': config reshape [-1] plus the batch dimension make [-1,-1], the "
               "model's shape is [-1]: leave the batch dimension out of reshape when "
               "max_batch_size > 0 (reshape: { shape: [ ] })");
}

/* ---- checks against the model ------------------------------------------ */

static void test_check_errors(void **state)
{
    (void)state;
    check_fail("name: 'other'", "simple", &simple,
               "name: config name 'other' does not match the model directory 'simple'");
    check_fail("platform: 'tensorflow_savedmodel'", "simple", &simple,
               "platform: 'tensorflow_savedmodel' is not supported (inferd serves "
               "\"onnxruntime_onnx\" models)");
    check_fail("backend: 'python'", "simple", &simple,
               "backend: 'python' models need their inputs and outputs in config.pbtxt (there is "
               "no model file to take them from)");
    check_fail("input { name: 'INPUT2' }", "simple", &simple,
               "input 'INPUT2': the model has no input of that name (its inputs: 'INPUT0' (INT32 "
               "[-1,16]), 'INPUT1' (INT32 [-1,16]))");
    check_fail("output { name: 'INPUT0' }", "simple", &simple,
               "output 'INPUT0': the model has no output of that name (its outputs: 'OUTPUT0' "
               "(INT32 [-1,16]), 'OUTPUT1' (INT32 [-1,16]))");
    check_fail("input { name: 'INPUT0' }", "none", &nothing,
               "input 'INPUT0': the model has no input of that name (its inputs: none)");
    check_fail("max_batch_size: 4", "constants", &constants,
               "max_batch_size: 4 needs a model input to carry the batch size, but the model has "
               "no inputs (set max_batch_size: 0)");
    check_fail("max_batch_size: 8 input { name: 'INPUT0' data_type: TYPE_FP32 dims: [16] }",
               "simple", &simple,
               "input 'INPUT0': config data_type TYPE_FP32 does not match the model's TYPE_INT32");
    check_fail(
        "max_batch_size: 8 output { name: 'OUTPUT1' data_type: TYPE_INT64 }", "simple", &simple,
        "output 'OUTPUT1': config data_type TYPE_INT64 does not match the model's TYPE_INT32");
    check_fail("max_batch_size: 8 input { name: 'INPUT0' data_type: TYPE_INT32 dims: [8] }",
               "simple", &simple,
               "input 'INPUT0': config dims [8] plus the batch dimension make [-1,8], which does "
               "not match the model's shape [-1,16]");
    /* forgetting that max_batch_size > 0 removes the batch dim: the two
     * shapes side by side, and the fix */
    check_fail("max_batch_size: 8 input { name: 'INPUT0' dims: [-1, 16] }", "simple", &simple,
               "input 'INPUT0': config dims [-1,16] plus the batch dimension make [-1,-1,16], the "
               "model's shape is [-1,16]: leave the batch dimension out of dims when "
               "max_batch_size > 0 (dims: [16])");
    check_fail("max_batch_size: 8 output { name: 'OUTPUT1' dims: [8, 16] }", "simple", &simple,
               "output 'OUTPUT1': config dims [8,16] plus the batch dimension make [-1,8,16], the "
               "model's shape is [-1,16]: leave the batch dimension out of dims when "
               "max_batch_size > 0 (dims: [16])");
    check_fail("max_batch_size: 2 output { name: 'out' dims: [-1] }", "flat", &flat,
               "output 'out': config dims [-1] plus the batch dimension make [-1,-1], the model's "
               "shape is [-1]: leave the batch dimension out of dims when max_batch_size > 0 "
               "(dims: [1] with reshape: { shape: [ ] })");
    /* the other way round: without max_batch_size, dims are the whole shape */
    check_fail("input { name: 'INPUT0' dims: [16] }", "simple", &simple,
               "input 'INPUT0': config dims [16] do not match the model's shape [-1,16]: with "
               "max_batch_size 0, dims include the model's first (batch) dimension (dims: "
               "[-1,16]), or set max_batch_size > 0 to batch requests");
    /* a configured -1 does not match a fixed model dim */
    check_fail("max_batch_size: 8 input { name: 'INPUT0' dims: [-1] }", "simple", &simple,
               "input 'INPUT0': config dims [-1] plus the batch dimension make [-1,-1], which "
               "does not match the model's shape [-1,16]");
    check_fail("input { name: 'x' dims: [3, 5] }", "fixed", &fixed,
               "input 'x': config dims [3,5] do not match the model's shape [3,4]");
    check_fail("output { name: 'y' dims: [3, 1] }", "fixed", &fixed,
               "output 'y': config dims [3,1] do not match the model's shape [3]");
    check_fail("max_batch_size: 4", "fixed", &fixed,
               "max_batch_size: 4 needs a variable first dimension in every model input and "
               "output, but input 'x' "
               "has shape [3,4]");
    check_fail("max_batch_size: 4", "mixed", &mixed,
               "max_batch_size: 4 needs a variable first dimension in every model input and "
               "output, but input 'b' "
               "has shape [2]");
    static struct model_io scalar_out[] = {{.name = (char *)"s", .dtype = DT_FP32, .ndim = 0}};
    const struct model_info scalar = {1, 1, simple_in, scalar_out};
    check_fail("max_batch_size: 4", "scalar", &scalar,
               "max_batch_size: 4 needs a variable first dimension in every model input and "
               "output, but output 's' "
               "has shape []");
    check_fail("max_batch_size: 4 input { name: 'INPUT0' dims: [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1] }",
               "simple", &simple,
               "input 'INPUT0': dims with the batch dimension exceed 16 dimensions");
}

static void test_check_matches(void **state)
{
    (void)state;
    struct model_config cfg;
    /* model -1 matches any configured dim; the config may pin it */
    check_ok("max_batch_size: 8 input { name: 'image' dims: [3, 224, 224] }", "image", &image,
             &cfg);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[3,224,224]");
    model_config_free(&cfg);
    check_ok("max_batch_size: 8 input { name: 'image' dims: [3, -1, -1] }", "image", &image, &cfg);
    model_config_free(&cfg);
    /* max_batch_size 0 on a batchable model: the batch dim is an ordinary dim */
    check_ok("max_batch_size: 0 input { name: 'INPUT0' dims: [-1, 16] } input { name: 'INPUT1' "
             "dims: [2, 16] }",
             "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_false(cfg.dynamic_batching.enabled);
    assert_dims(cfg.outputs[0].dims, cfg.outputs[0].ndim, "[-1,16]");
    model_config_free(&cfg);
    /* the name may be omitted or equal; platform and backend may be given */
    check_ok("name: 'simple' platform: 'onnxruntime_onnx' backend: 'onnxruntime' max_batch_size: 8",
             "simple", &simple, &cfg);
    model_config_free(&cfg);
}

static void test_autocomplete(void **state)
{
    (void)state;
    struct model_config cfg;
    /* some tensors listed, some partly */
    check_ok("max_batch_size: 8\n"
             "input { name: 'INPUT1' optional: true }\n"
             "output { name: 'OUTPUT1' data_type: TYPE_INT32 label_filename: 'labels.txt' }\n",
             "simple", &simple, &cfg);
    assert_int_equal(cfg.ninputs, 2);
    assert_string_equal(cfg.inputs[0].name, "INPUT1"); /* configured ones first */
    assert_false(cfg.inputs[0].autocompleted);
    assert_true(cfg.inputs[0].optional);
    assert_int_equal(cfg.inputs[0].dtype, DT_INT32);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[16]");
    assert_string_equal(cfg.inputs[1].name, "INPUT0");
    assert_true(cfg.inputs[1].autocompleted);
    assert_false(cfg.inputs[1].optional);
    assert_dims(cfg.inputs[1].dims, cfg.inputs[1].ndim, "[16]");
    assert_int_equal(cfg.noutputs, 2);
    assert_string_equal(cfg.outputs[0].label_filename, "labels.txt");
    assert_string_equal(cfg.outputs[1].name, "OUTPUT0");
    assert_string_equal(cfg.outputs[1].label_filename, "");
    assert_false(cfg.dynamic_batching.enabled); /* max_batch_size was written */
    model_config_free(&cfg);

    /* only instance_group: everything else as without a config */
    check_ok("instance_group { count: 2 }", "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, MODEL_CONFIG_DEFAULT_MAX_BATCH);
    assert_true(cfg.dynamic_batching.enabled);
    assert_int_equal(cfg.dynamic_batching.max_queue_delay_us, MODEL_CONFIG_DEFAULT_QUEUE_DELAY_US);
    assert_int_equal(cfg.ninputs, 2);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[16]");
    assert_int_equal(cfg.instance_groups[0].count, 2);
    model_config_free(&cfg);

    /* tensors listed without dims (only for their labels): batching as
     * without a config; a listed dims decides it */
    check_ok("output { name: 'OUTPUT0' label_filename: 'labels.txt' }", "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, MODEL_CONFIG_DEFAULT_MAX_BATCH);
    assert_true(cfg.dynamic_batching.enabled);
    assert_string_equal(cfg.outputs[0].label_filename, "labels.txt");
    assert_dims(cfg.outputs[0].dims, cfg.outputs[0].ndim, "[16]");
    model_config_free(&cfg);
    check_ok("output { name: 'OUTPUT0' dims: [-1, 16] }", "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_false(cfg.dynamic_batching.enabled);
    model_config_free(&cfg);

    /* a written dynamic_batching is kept */
    check_ok("dynamic_batching { max_queue_delay_microseconds: 7 }", "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, MODEL_CONFIG_DEFAULT_MAX_BATCH);
    assert_int_equal(cfg.dynamic_batching.max_queue_delay_us, 7);
    model_config_free(&cfg);

    /* an explicit max_batch_size: 0 is respected */
    check_ok("max_batch_size: 0", "simple", &simple, &cfg);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[-1,16]");
    model_config_free(&cfg);

    struct error err;
    assert_int_equal(model_config_parse(NULL, 0, &cfg, &err), 0);
    model_config_free(&cfg);

    /* an empty config.pbtxt gives exactly the no-config result */
    struct model_config from_onnx;
    const struct model_info *models[] = {&simple, &fixed, &image, &mixed, &flat, &nothing};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        check_ok("", "m", models[i], &cfg);
        assert_int_equal(model_config_from_onnx("m", models[i], &from_onnx), 0);
        char *a = to_json(&cfg), *b = to_json(&from_onnx);
        assert_string_equal(a, b);
        free(a);
        free(b);
        model_config_free(&cfg);
        model_config_free(&from_onnx);
    }
}

static void test_check_is_idempotent(void **state)
{
    (void)state;
    const char *texts[] = {simple_pbtxt, warmup_pbtxt, "", "instance_group [{}, {name: 'x'}]",
                           "max_batch_size: 4 input { name: 'INPUT1' }"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct model_config cfg;
        struct error err;
        check_ok(texts[i], "simple", &simple, &cfg);
        char *a = to_json(&cfg);
        assert_int_equal(model_config_check(&cfg, "simple", &simple, &err), 0);
        char *b = to_json(&cfg);
        assert_string_equal(a, b);
        free(a);
        free(b);
        model_config_free(&cfg);
    }
}

static void test_from_onnx(void **state)
{
    (void)state;
    struct model_config cfg;

    assert_int_equal(model_config_from_onnx("simple", &simple, &cfg), 0);
    assert_string_equal(cfg.name, "simple");
    assert_int_equal(cfg.max_batch_size, 64);
    assert_int_equal(cfg.ninputs, 2);
    assert_int_equal(cfg.noutputs, 2);
    assert_true(cfg.inputs[0].autocompleted);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[16]");
    assert_dims(cfg.outputs[1].dims, cfg.outputs[1].ndim, "[16]");
    assert_true(cfg.dynamic_batching.enabled);
    assert_int_equal(cfg.dynamic_batching.max_queue_delay_us, 0);
    assert_int_equal(cfg.dynamic_batching.npreferred, 1);
    assert_int_equal(cfg.dynamic_batching.preferred_batch_size[0], 64);
    assert_int_equal(cfg.ninstance_groups, 1);
    assert_string_equal(cfg.instance_groups[0].name, "simple");
    assert_int_equal(cfg.instance_groups[0].kind, MODEL_INSTANCE_CPU);
    assert_int_equal(cfg.instance_groups[0].count, 1);
    assert_int_equal(cfg.version_policy.kind, MODEL_VERSIONS_LATEST);
    char *json = to_json(&cfg);
    assert_non_null(strstr(json, "\"max_batch_size\":64,"));
    assert_non_null(strstr(json,
                           "\"dynamic_batching\":{\"preferred_batch_size\":[64],"
                           "\"max_queue_delay_microseconds\":0,\"preserve_ordering\":false,"));
    free(json);
    model_config_free(&cfg);

    /* no batch dimension: dims as the model has them */
    assert_int_equal(model_config_from_onnx("fixed", &fixed, &cfg), 0);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_false(cfg.dynamic_batching.enabled);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[3,4]");
    model_config_free(&cfg);

    /* one tensor without a variable leading dim: not batched */
    assert_int_equal(model_config_from_onnx("mixed", &mixed, &cfg), 0);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[-1,2]");
    model_config_free(&cfg);

    assert_int_equal(model_config_from_onnx("image", &image, &cfg), 0);
    assert_dims(cfg.inputs[0].dims, cfg.inputs[0].ndim, "[3,-1,-1]");
    model_config_free(&cfg);

    assert_int_equal(model_config_from_onnx("none", &nothing, &cfg), 0);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_int_equal(cfg.ninputs, 0);
    model_config_free(&cfg);

    /* no inputs: nothing carries a batch size, so not batched */
    assert_int_equal(model_config_from_onnx("constants", &constants, &cfg), 0);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_false(cfg.dynamic_batching.enabled);
    assert_dims(cfg.outputs[0].dims, cfg.outputs[0].ndim, "[-1,3]");
    model_config_free(&cfg);

    /* a scalar output: not batched */
    static struct model_io scalar_out[] = {{.name = (char *)"s", .dtype = DT_FP32, .ndim = 0}};
    const struct model_info scalar = {1, 1, simple_in, scalar_out};
    assert_int_equal(model_config_from_onnx("scalar", &scalar, &cfg), 0);
    assert_int_equal(cfg.max_batch_size, 0);
    assert_int_equal(cfg.outputs[0].ndim, 0);
    model_config_free(&cfg);
}

static void test_index_lookup(void **state)
{
    (void)state;
    struct model_config cfg;
    assert_int_equal(model_config_from_onnx("simple", &simple, &cfg), 0);
    assert_int_equal(model_config_input_index(&cfg, "INPUT1"), 1);
    assert_int_equal(model_config_input_index(&cfg, "OUTPUT1"), -1);
    assert_int_equal(model_config_output_index(&cfg, "OUTPUT1"), 1);
    assert_int_equal(model_config_output_index(&cfg, "nope"), -1);
    model_config_free(&cfg);
    model_config_free(&cfg); /* idempotent */
    assert_string_equal(cfg.name, "");
}

static void test_json_escapes_and_strings(void **state)
{
    (void)state;
    struct model_config cfg;
    check_ok("parameters { key: 'quote\"back\\\\slash' value { string_value: 'tab\\t\\xff' } }",
             "simple", &simple, &cfg);
    char *json = to_json(&cfg);
    assert_non_null(strstr(
        json, "\"parameters\":{\"quote\\\"back\\\\slash\":{\"string_value\":\"tab\\t\\u00ff\"}}"));
    free(json);
    model_config_free(&cfg);
}

static void test_syntax_errors_pass_through(void **state)
{
    (void)state;
    parse_fail("name: 'x'\ninput [ { name: 'a' ",
               "2:21: unexpected end of input: '{' opened at 2:9 is not closed");
    parse_fail("name: \"unterminated", "1:7: unterminated string");
}

static void test_size_limit(void **state)
{
    (void)state;
    size_t n = MODEL_CONFIG_MAX_TEXT + 1;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, ' ', n);
    struct model_config cfg;
    struct error err;
    assert_int_equal(model_config_parse(text, n, &cfg, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, "the model configuration is larger than 1048576 bytes");
    assert_int_equal(model_config_parse(text, n - 1, &cfg, &err), 0);
    model_config_free(&cfg);
    free(text);

    /* more entries than a repeated field may hold */
    struct buf b;
    buf_init(&b, 1u << 20);
    buf_puts(&b, "max_batch_size: 8 dynamic_batching { preferred_batch_size: [");
    for (int i = 0; i <= 4096; i++)
        buf_printf(&b, "%s1", i ? "," : "");
    buf_puts(&b, "] }");
    assert_int_equal(model_config_parse(b.data, b.len, &cfg, &err), -1);
    assert_string_equal(err.msg,
                        "1:38: dynamic_batching.preferred_batch_size: more than 4096 entries");
    buf_free(&b);
}

/* Every allocation failing in turn: parse and check fail cleanly with 500
 * (or succeed), never crash or leak. */
static void test_heap_failure(void **state)
{
    (void)state;
    bool parsed = false, checked = false;
    for (long n = 0; n < 400 && !checked; n++) {
        struct model_config cfg;
        struct error err;
        error_clear(&err);
        mem_fail_after(n);
        int rc = model_config_parse(warmup_pbtxt, strlen(warmup_pbtxt), &cfg, &err);
        if (rc == 0) {
            parsed = true;
            rc = model_config_check(&cfg, "simple", &simple, &err);
            checked = rc == 0;
        }
        mem_fail_reset();
        if (rc != 0)
            assert_int_equal(err.status, 500);
        model_config_free(&cfg);
    }
    assert_true(parsed && checked);

    for (long n = 0; n < 100; n++) {
        struct model_config cfg;
        mem_fail_after(n);
        int rc = model_config_from_onnx("simple", &simple, &cfg);
        mem_fail_reset();
        assert_true(rc == 0 || rc == -ENOMEM);
        model_config_free(&cfg);
        if (rc == 0)
            break;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_simple_example),
        TEST(test_densenet_example),
        TEST(test_dynamic_batching_every_field),
        TEST(test_dynamic_batching_defaults),
        TEST(test_dynamic_batching_errors),
        TEST(test_instance_groups),
        TEST(test_version_policies),
        TEST(test_warmup),
        TEST(test_warmup_errors),
        TEST(test_parameters),
        TEST(test_sequence_batching), TEST(test_ensemble), TEST(test_ignored_fields),
        TEST(test_unknown_fields),
        TEST(test_value_errors),
        TEST(test_reshape),
        TEST(test_check_errors),
        TEST(test_check_matches),
        TEST(test_autocomplete),
        TEST(test_check_is_idempotent),
        TEST(test_from_onnx),
        TEST(test_index_lookup),
        TEST(test_json_escapes_and_strings),
        TEST(test_syntax_errors_pass_through),
        TEST(test_size_limit),
        TEST(test_heap_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
