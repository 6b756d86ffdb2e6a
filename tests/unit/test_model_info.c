/* Unit tests for backend/model_info.c: a request tensor checked against a
 * model's input, and the list of a model's tensors that error messages
 * show (bounded, cut at a whole tensor). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"

static struct model_io mlp_in[] = {{(char *)"x", DT_FP32, 2, {-1, 4}}};
static struct model_io mlp_out[] = {{(char *)"probs", DT_FP32, 2, {-1, 3}},
                                    {(char *)"label", DT_INT64, 1, {-1}}};
static const struct model_info mlp = {1, 2, mlp_in, mlp_out};

static void test_list(void **state)
{
    (void)state;
    char out[160];
    model_io_list(mlp_out, 2, out, sizeof out);
    assert_string_equal(out, "'probs' (FP32 [-1,3]), 'label' (INT64 [-1])");
    model_io_list(NULL, 0, out, sizeof out);
    assert_string_equal(out, "none");
}

/* Tensors that do not fit are left out whole, with "..." after the last
 * that does; the result never exceeds the buffer. */
static void test_list_truncated(void **state)
{
    (void)state;
    struct model_io many[40];
    char names[40][16];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        many[i] = (struct model_io){names[i], DT_FP32, 1, {4}};
    }
    char out[64];
    model_io_list(many, 40, out, sizeof out);
    assert_string_equal(out, "'in0' (FP32 [4]), 'in1' (FP32 [4]), 'in2' (FP32 [4]), ...");

    /* The last tensor needs no room for the ellipsis. */
    char exact[sizeof "'in0' (FP32 [4]), 'in1' (FP32 [4])"];
    model_io_list(many, 2, exact, sizeof exact);
    assert_string_equal(exact, "'in0' (FP32 [4]), 'in1' (FP32 [4])");
    model_io_list(many, 3, exact, sizeof exact);
    assert_string_equal(exact, "'in0' (FP32 [4]), ...");

    /* Not even the first fits. */
    char tiny[8];
    model_io_list(many, 40, tiny, sizeof tiny);
    assert_string_equal(tiny, "...");
}

static void test_unknown(void **state)
{
    (void)state;
    struct error err;
    assert_int_equal(model_io_unknown(&mlp, true, "input", "mlp", &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(
        err.msg, "unexpected inference input 'input' for model 'mlp', which has inputs: 'x' (FP32 [-1,4])");
    assert_int_equal(model_io_unknown(&mlp, false, "prob", "mlp", &err), -1);
    assert_string_equal(err.msg, "unexpected inference output 'prob' for model 'mlp', which has outputs: "
                                 "'probs' (FP32 [-1,3]), 'label' (INT64 [-1])");
    const struct model_info none = {0, 0, NULL, NULL};
    assert_int_equal(model_io_unknown(&none, true, "x", "constants", &err), -1);
    assert_string_equal(err.msg, "unexpected inference input 'x' for model 'constants', which has no inputs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_list_truncated),
        cmocka_unit_test(test_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
