/*
 * Backend plugins: resolving names to the built-in backend or a library,
 * the example plugin (examples/backends/identity_stall) driven through the
 * adapter, the loader's refusals (tests/unit/plugins/bad_backend.c built
 * as several broken libraries), and the config rules for plugin backends.
 * CMake passes the build directory (INFERD_PLUGIN_DIR) and the directory of
 * the broken libraries (INFERD_TEST_BACKEND_DIR).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/onnxruntime.h"
#include "backend/plugin.h"
#include "base/arena.h"
#include "model/backend_config.h"
#include "model/config.h"

#ifndef INFERD_PLUGIN_DIR
#error "CMake defines INFERD_PLUGIN_DIR"
#endif

/* Where load() thinks the model is; identity_stall reads no files. */
#define MODEL_FILE "/nonexistent/repo/echo/1/model.onnx"

static const char *const OUT[] = {"OUT"};

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("'%s' does not contain '%s'", haystack, needle);
}

static const struct backend_ops *resolve_ok(const char *name, const char *model_dir,
                                            const char *search_dir)
{
    const struct backend_ops *ops = NULL;
    struct error err = {0};
    if (plugin_backend_resolve(name, NULL, model_dir, search_dir, &ops, &err) != 0)
        fail_msg("resolve %s: %s", name, err.msg);
    assert_non_null(ops);
    return ops;
}

/* The error of a refused resolve (400 unless said otherwise). */
static struct error resolve_fail(const char *name, const char *model_dir, const char *search_dir)
{
    const struct backend_ops *ops = (const void *)1;
    struct error err = {0};
    assert_int_equal(plugin_backend_resolve(name, NULL, model_dir, search_dir, &ops, &err), -1);
    assert_null(ops);
    assert_int_equal(err.status, 400);
    return err;
}

/* Loads as the registry does: the model layer parses the config for the
 * plugin (model/backend_config.h), then the backend loads. */
static int load(const struct backend_ops *ops, const char *cfg, void **inst,
                struct model_info *info, struct error *err)
{
    struct model_backend_config bc;
    error_clear(err);
    *inst = NULL;
    if (model_backend_config_prepare(cfg, cfg ? strlen(cfg) : 0, &bc, err) != 0)
        return -1;
    struct backend_load_args args = {
        .path = MODEL_FILE,
        .intra_op_threads = 1,
        .config = bc.config,
    };
    int rc = ops->load(&args, inst, info, err);
    model_backend_config_free(&bc);
    return rc;
}

static void load_ok(const struct backend_ops *ops, const char *cfg, void **inst,
                    struct model_info *info)
{
    struct error err;
    if (load(ops, cfg, inst, info, &err) != 0)
        fail_msg("load: %s", err.msg);
}

static void load_fail(const struct backend_ops *ops, const char *cfg, int status, const char *msg)
{
    struct error err;
    struct model_info info = {0};
    void *inst = (void *)1;
    assert_int_equal(load(ops, cfg, &inst, &info, &err), -1);
    assert_null(inst);
    assert_int_equal(info.ninputs + info.noutputs, 0);
    assert_int_equal(err.status, status);
    assert_string_equal(err.msg, msg);
}

static const struct backend_ops *identity_stall(void)
{
    return resolve_ok("identity_stall", INFERD_PLUGIN_DIR, NULL);
}

/* ---- resolving ------------------------------------------------------------- */

static void test_builtin(void **state)
{
    (void)state;
    assert_ptr_equal(resolve_ok("onnxruntime", "/nonexistent", NULL), &backend_onnxruntime);
    assert_ptr_equal(resolve_ok("", "/nonexistent", NULL), &backend_onnxruntime);
    assert_ptr_equal(resolve_ok(NULL, "/nonexistent", NULL), &backend_onnxruntime);

    const struct backend_ops *ops = NULL;
    struct error err = {0};
    assert_int_equal(model_backend_for_config(NULL, 0, NULL, "/nonexistent", NULL, &ops, &err), 0);
    assert_ptr_equal(ops, &backend_onnxruntime);
    const char *cfg = "platform: 'onnxruntime_onnx' max_batch_size: 4";
    assert_int_equal(model_backend_for_config(cfg, strlen(cfg), NULL, "/x", NULL, &ops, &err), 0);
    assert_ptr_equal(ops, &backend_onnxruntime);
    cfg = "backend: 'onnxruntime'";
    assert_int_equal(model_backend_for_config(cfg, strlen(cfg), NULL, "/x", NULL, &ops, &err), 0);
    assert_ptr_equal(ops, &backend_onnxruntime);
    cfg = "max_batch_size: [";
    assert_int_equal(model_backend_for_config(cfg, strlen(cfg), NULL, "/x", NULL, &ops, &err), -1);
    assert_int_equal(err.status, 400);
    assert_contains(err.msg, "config.pbtxt:1:");
}

static void test_resolve_plugin(void **state)
{
    (void)state;
    const struct backend_ops *ops = identity_stall();
    assert_ptr_not_equal(ops, &backend_onnxruntime);
    assert_int_equal(ops->abi_version, BACKEND_ABI_VERSION);
    assert_string_equal(ops->name, "identity_stall");
    /* cached: the same library gives the same table, found in the model
     * directory or in the search directory */
    assert_ptr_equal(identity_stall(), ops);
    assert_ptr_equal(resolve_ok("identity_stall", "/nonexistent", INFERD_PLUGIN_DIR), ops);

    const struct backend_ops *via_cfg = NULL;
    struct error err = {0};
    const char *cfg = "backend: \"identity_stall\"";
    assert_int_equal(
        model_backend_for_config(cfg, strlen(cfg), NULL, INFERD_PLUGIN_DIR, NULL, &via_cfg, &err), 0);
    assert_ptr_equal(via_cfg, ops);
}

static void test_missing_library(void **state)
{
    (void)state;
    struct error err = resolve_fail("nope", "/nonexistent/m", NULL);
    assert_string_equal(err.msg, "backend 'nope': no libinferd_nope.so in /nonexistent/m (and "
                                 "no backend directory)");
    err = resolve_fail("nope", "/nonexistent/m", "/nonexistent/b");
    assert_string_equal(err.msg,
                        "backend 'nope': no libinferd_nope.so in /nonexistent/m or /nonexistent/b");
    err = resolve_fail("../etc/x", INFERD_PLUGIN_DIR, NULL);
    assert_contains(err.msg, "backend: '../etc/x' is not a backend name");
    resolve_fail("a b", INFERD_PLUGIN_DIR, NULL);
}

static void test_not_a_library(void **state)
{
    (void)state;
    char dir[] = "/tmp/inferd_plugin_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/libinferd_garbage.so", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not an ELF file\n", f);
    fclose(f);
    struct error err = resolve_fail("garbage", dir, NULL);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "backend 'garbage': cannot load %s: ", path);
    assert_contains(err.msg, want);
    assert_contains(err.msg, path); /* dlerror() names it too */
    unlink(path);
    rmdir(dir);
}

static void test_bad_libraries(void **state)
{
    (void)state;
    const char *dir = INFERD_TEST_BACKEND_DIR;
    char path[PATH_MAX], want[PATH_MAX + 128];

    struct error err = resolve_fail("bad_abi", dir, NULL);
    snprintf(want, sizeof want,
             "backend 'bad_abi': %s/libinferd_bad_abi.so: it implements backend ABI version 99, "
             "inferd takes 1 to 3",
             dir);
    assert_string_equal(err.msg, want);

    err = resolve_fail("bad_refuse", dir, NULL);
    snprintf(want, sizeof want,
             "backend 'bad_refuse': %s/libinferd_bad_refuse.so cannot serve backend ABI version 3",
             dir);
    assert_string_equal(err.msg, want);

    err = resolve_fail("bad_nosym", dir, NULL);
    snprintf(path, sizeof path, "%s/libinferd_bad_nosym.so", dir);
    snprintf(want, sizeof want,
             "backend 'bad_nosym': %s does not export inferd_backend_init: ", path);
    assert_contains(err.msg, want);
    assert_contains(err.msg, "undefined symbol"); /* dlerror() */

    err = resolve_fail("bad_nullfn", dir, NULL);
    snprintf(want, sizeof want,
             "backend 'bad_nullfn': %s/libinferd_bad_nullfn.so: its inferd_backend_api has no "
             "execute function",
             dir);
    assert_string_equal(err.msg, want);

    /* A refused library is not cached: asking again gives the same answer. */
    struct error again = resolve_fail("bad_abi", dir, NULL);
    assert_contains(again.msg, "ABI version 99");
}

/* ---- the adapter, with identity_stall ---------------------------------- */

static const char FP32_CFG[] = "backend: 'identity_stall' max_batch_size: 4\n"
                               "input [{ name: 'IN' data_type: TYPE_FP32 dims: [3] }]\n"
                               "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [3] }]\n";

static void test_identity_fp32(void **state)
{
    (void)state;
    const struct backend_ops *ops = identity_stall();
    void *inst = NULL;
    struct model_info info = {0};
    load_ok(ops, FP32_CFG, &inst, &info);
    assert_int_equal(info.ninputs, 1);
    assert_int_equal(info.noutputs, 1);
    assert_string_equal(info.inputs[0].name, "IN");
    assert_string_equal(info.outputs[0].name, "OUT");
    assert_int_equal(info.inputs[0].dtype, DT_FP32);
    assert_int_equal(info.outputs[0].ndim, 2); /* the batch dim first */
    assert_int_equal(info.outputs[0].dims[0], -1);
    assert_int_equal(info.outputs[0].dims[1], 3);

    float data[6] = {1, 2, 3, 4, 5, 6};
    struct tensor in = {.name = "IN", .dtype = DT_FP32, .ndim = 2, .shape = {2, 3},
                        .data = data, .nbytes = sizeof data};
    struct tensor out;
    void *st = NULL;
    struct arena arena;
    arena_init(&arena, 4096, 1 << 20);
    struct error err = {0};
    assert_int_equal(ops->execute(inst, &arena, &in, 1, OUT, 1, &out, &st, 0, &err), 0);
    assert_ptr_equal(out.name, OUT[0]);
    assert_int_equal(out.dtype, DT_FP32);
    assert_int_equal(out.ndim, 2);
    assert_int_equal(out.shape[0], 2);
    assert_int_equal(out.shape[1], 3);
    assert_int_equal(out.nbytes, sizeof data);
    assert_ptr_not_equal(out.data, data); /* a copy: inputs live only during the call */
    assert_memory_equal(out.data, data, sizeof data);
    assert_non_null(st);
    ops->release(inst, st);

    /* a wrong output name is the plugin's 400 */
    const char *const wrong[] = {"NOPE"};
    assert_int_equal(ops->execute(inst, &arena, &in, 1, wrong, 1, &out, &st, 0, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, "unknown output 'NOPE' (the output is 'OUT')");
    arena_free(&arena);
    ops->unload(inst);
    model_info_free(&info);
}

static void test_identity_bytes(void **state)
{
    (void)state;
    const struct backend_ops *ops = identity_stall();
    void *inst = NULL;
    struct model_info info = {0};
    load_ok(ops,
            "backend: 'identity_stall'\n"
            "input [{ name: 'IN' data_type: TYPE_STRING dims: [-1] }]\n"
            "output [{ name: 'OUT' data_type: TYPE_STRING dims: [-1] }]\n",
            &inst, &info);
    assert_int_equal(info.outputs[0].dtype, DT_BYTES);
    assert_int_equal(info.outputs[0].ndim, 1);

    struct tensor_bytes el[3] = {{"hello", 5}, {"", 0}, {"a\0b", 3}};
    struct tensor in = {.name = "IN", .dtype = DT_BYTES, .ndim = 1, .shape = {3},
                        .data = el, .nbytes = 8};
    struct tensor out;
    void *st = NULL;
    struct error err = {0};
    assert_int_equal(ops->execute(inst, NULL, &in, 1, OUT, 1, &out, &st, 0, &err), 0);
    assert_int_equal(out.dtype, DT_BYTES);
    assert_int_equal(out.shape[0], 3);
    assert_int_equal(out.nbytes, 8);
    const struct tensor_bytes *got = out.data;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(got[i].len, el[i].len);
        if (el[i].len) {
            assert_ptr_not_equal(got[i].ptr, el[i].ptr);
            assert_memory_equal(got[i].ptr, el[i].ptr, el[i].len);
        }
    }
    ops->release(inst, st);
    ops->unload(inst);
    model_info_free(&info);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_fail_and_stall(void **state)
{
    (void)state;
    const struct backend_ops *ops = identity_stall();
    void *inst = NULL;
    struct model_info info = {0};
    load_ok(ops,
            "backend: 'identity_stall'\n"
            "input [{ name: 'IN' data_type: TYPE_INT32 dims: [2] }]\n"
            "output [{ name: 'OUT' data_type: TYPE_INT32 dims: [2] }]\n"
            "parameters { key: 'fail_every_n' value: { string_value: '2' } }\n"
            "parameters { key: 'delay_us' value: { string_value: '30000' } }\n",
            &inst, &info);
    int32_t data[2] = {7, -7};
    struct tensor in = {.name = "IN", .dtype = DT_INT32, .ndim = 1, .shape = {2},
                        .data = data, .nbytes = sizeof data};
    struct tensor out;
    for (int call = 1; call <= 4; call++) {
        void *st = NULL;
        struct error err = {0};
        uint64_t t0 = now_ms();
        int rc = ops->execute(inst, NULL, &in, 1, OUT, 1, &out, &st, 0, &err);
        assert_true(now_ms() - t0 >= 29);
        if (call % 2 == 0) {
            assert_int_equal(rc, -1);
            assert_int_equal(err.status, 500);
            assert_string_equal(err.msg, "injected failure");
            assert_null(st);
        } else {
            assert_int_equal(rc, 0);
            assert_memory_equal(out.data, data, sizeof data);
            ops->release(inst, st);
        }
    }
    ops->unload(inst);
    model_info_free(&info);

    /* fail_skip spares the first executions (inferd's warm-up) */
    load_ok(ops,
            "backend: 'identity_stall'\n"
            "input [{ name: 'IN' data_type: TYPE_INT32 dims: [2] }]\n"
            "output [{ name: 'OUT' data_type: TYPE_INT32 dims: [2] }]\n"
            "parameters { key: 'fail_every_n' value: { string_value: '1' } }\n"
            "parameters { key: 'fail_skip' value: { string_value: '2' } }\n",
            &inst, &info);
    for (int call = 1; call <= 4; call++) {
        void *st = NULL;
        struct error err = {0};
        int rc = ops->execute(inst, NULL, &in, 1, OUT, 1, &out, &st, 0, &err);
        assert_int_equal(rc, call <= 2 ? 0 : -1);
        if (rc == 0)
            ops->release(inst, st);
    }
    ops->unload(inst);
    model_info_free(&info);
}

static void test_load_errors(void **state)
{
    (void)state;
    const struct backend_ops *ops = identity_stall();
    load_fail(ops, NULL, 400, "backend 'identity_stall': the model needs a config.pbtxt");
    load_fail(ops,
              "backend: 'identity_stall'\n"
              "input [{ name: 'IN' data_type: TYPE_FP32 }]\n"
              "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [1] }]\n",
              400, "input 'IN': dims are required (backend 'identity_stall' cannot fill them in)");
    load_fail(ops, "backend: 'identity_stall'", 400,
              "backend: 'identity_stall' models need their inputs and outputs in config.pbtxt "
              "(there is no model file to take them from)");
    load_fail(ops,
              "backend: 'identity_stall'\n"
              "input [{ name: 'IN' data_type: TYPE_FP32 dims: [1] }]\n"
              "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [1] }]\n"
              "parameters { key: 'fail_evry' value: { string_value: '2' } }\n",
              400,
              "backend 'identity_stall': unknown parameter 'fail_evry' (identity_stall takes "
              "fail_every_n, fail_skip, delay_us, sample_delay_us, shadow_fail, fail_while_exists "
              "and started_log)");
    load_fail(ops,
              "backend: 'identity_stall'\n"
              "input [{ name: 'IN' data_type: TYPE_FP32 dims: [1] }]\n"
              "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [1] }]\n"
              "parameters { key: 'delay_us' value: { string_value: '-1' } }\n",
              400, "backend 'identity_stall': parameter delay_us: '-1' is not a number in range");
    load_fail(ops,
              "backend: 'identity_stall'\n"
              "input [{ name: 'IN' data_type: TYPE_FP32 dims: [1] }]\n"
              "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [1] }]\n"
              "parameters { key: 'sample_delay_us' value: { string_value: '16:1000,4:10' } }\n",
              400, "backend 'identity_stall': parameter sample_delay_us: expected up to 8 rows:us "
                   "pairs, rows ascending, separated by commas, got '16:1000,4:10'");
    load_fail(ops,
              "backend: 'identity_stall'\n"
              "input [{ name: 'IN' data_type: TYPE_FP32 dims: [1] }]\n"
              "output [{ name: 'OUT' data_type: TYPE_INT32 dims: [1] }]\n",
              400,
              "backend 'identity_stall': input 'IN' and output 'OUT' must have the same "
              "data_type and dims");
}

/* A plugin whose output is malformed: the adapter refuses it with a 500
 * and releases its state; a plugin status other than 400 becomes 500. */
static void test_bad_output(void **state)
{
    (void)state;
    const struct backend_ops *ops = resolve_ok("bad_output", INFERD_TEST_BACKEND_DIR, NULL);
    const char *cfg = "backend: 'bad_output'\n"
                      "input [{ name: 'x' data_type: TYPE_FP32 dims: [-1] }]\n"
                      "output [{ name: 'y' data_type: TYPE_FP32 dims: [-1] }]\n";
    void *inst = NULL;
    struct model_info info = {0};
    load_ok(ops, cfg, &inst, &info);

    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/libinferd_bad_output.so", INFERD_TEST_BACKEND_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the loader's handle */
    assert_non_null(h);
    int *releases = dlsym(h, "bad_release_count");
    assert_non_null(releases);

    float x[2] = {1, 2};
    struct tensor in = {.name = "x", .dtype = DT_FP32, .ndim = 1, .shape = {2},
                        .data = x, .nbytes = sizeof x};
    const char *const names[] = {"y"};
    struct tensor out;
    void *st = NULL;
    struct error err = {0};
    int before = *releases;
    assert_int_equal(ops->execute(inst, NULL, &in, 1, names, 1, &out, &st, 0, &err), -1);
    assert_int_equal(err.status, 500);
    assert_string_equal(err.msg, "backend 'bad_output' returned output 'y' with nbytes that do "
                                 "not match its shape");
    assert_null(st);
    assert_int_equal(*releases, before + 1);
    dlclose(h);
    ops->unload(inst);
    model_info_free(&info);

    char fail_cfg[512];
    snprintf(fail_cfg, sizeof fail_cfg,
             "%sparameters { key: 'fail_load' value: { string_value: '1' } }", cfg);
    load_fail(ops, fail_cfg, 500, "backend 'bad_output': nope");
}

/* ---- config rules for plugin backends ----------------------------------- */

static struct model_io echo_ios[2] = {
    {"IN", DT_FP32, 2, {-1, 3}},
    {"OUT", DT_FP32, 2, {-1, 3}},
};
static const struct model_info echo_info = {1, 1, &echo_ios[0], &echo_ios[1]};

static int check(const char *text, struct error *err)
{
    struct model_config cfg;
    struct error perr;
    if (model_config_parse(text, strlen(text), &cfg, &perr) != 0)
        fail_msg("parse: %s", perr.msg);
    error_clear(err);
    int rc = model_config_check(&cfg, "echo", &echo_info, err);
    if (rc == 0) {
        assert_string_equal(cfg.backend, "identity_stall");
        assert_string_equal(cfg.platform, "");
        assert_int_equal(cfg.ninputs, 1);
    }
    model_config_free(&cfg);
    return rc;
}

static void test_config_check(void **state)
{
    (void)state;
    struct error err;
    assert_int_equal(check(FP32_CFG, &err), 0);
    assert_int_equal(check("backend: 'identity_stall' platform: 'onnxruntime_onnx'", &err), -1);
    assert_string_equal(err.msg, "platform: 'onnxruntime_onnx' cannot be combined with backend "
                                 "'identity_stall' (a plugin backend's models have no platform)");
    assert_int_equal(check("backend: 'identity_stall' max_batch_size: 4\n"
                           "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [3] }]\n",
                           &err),
                     -1);
    assert_string_equal(err.msg,
                        "input 'IN': backend 'identity_stall' reports it, but config.pbtxt does "
                        "not list it");
    assert_int_equal(check("backend: 'identity_stall' max_batch_size: 4\n"
                           "input [{ name: 'IN' dims: [3] }]\n"
                           "output [{ name: 'OUT' data_type: TYPE_FP32 dims: [3] }]\n",
                           &err),
                     -1);
    assert_string_equal(err.msg, "input 'IN': data_type is required (backend 'identity_stall' "
                                 "cannot fill it in)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin),        cmocka_unit_test(test_resolve_plugin),
        cmocka_unit_test(test_missing_library), cmocka_unit_test(test_not_a_library),
        cmocka_unit_test(test_bad_libraries),  cmocka_unit_test(test_identity_fp32),
        cmocka_unit_test(test_identity_bytes), cmocka_unit_test(test_fail_and_stall),
        cmocka_unit_test(test_load_errors),    cmocka_unit_test(test_bad_output),
        cmocka_unit_test(test_config_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
