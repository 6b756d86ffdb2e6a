/* Unit tests of the small base and core pieces: buf, arena, fp16, dtype, shapes. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/mem.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/tensor.h"

static void test_buf_ceiling_is_sticky(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 8);
    assert_int_equal(buf_append(&b, "12345", 5), 0);
    assert_int_equal(buf_append(&b, "6789", 4), -E2BIG);
    assert_int_equal(b.len, 5); /* unchanged by the failed append */
    assert_int_equal(b.err, -E2BIG);
    assert_int_equal(buf_append(&b, "678", 3), 0);
    assert_memory_equal(b.data, "12345678", 8);
    assert_int_equal(b.err, -E2BIG); /* still remembered */
    buf_reset(&b);
    assert_int_equal(b.err, 0);
    buf_free(&b);
}

static void test_buf_printf_and_consume(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(buf_printf(&b, "[%s]%d", big, 42), 0); /* longer than the stack buffer */
    assert_int_equal(b.len, 599 + 4);
    buf_consume(&b, 600);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "]42", 3);
    buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    buf_free(&b);
}

static void test_buf_oom(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    mem_fail_after(0);
    assert_int_equal(buf_append(&b, "x", 1), -ENOMEM);
    mem_fail_reset();
    assert_int_equal(b.err, -ENOMEM);
    buf_free(&b);
}

static void test_arena_alignment_and_ceiling(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 256, 4096);
    for (int i = 1; i < 20; i++) {
        void *p = arena_alloc(&a, (size_t)i * 7);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xab, (size_t)i * 7);
    }
    assert_null(arena_alloc(&a, 4096)); /* over the ceiling */
    void *big = arena_alloc(&a, 1000);   /* larger than a chunk: own chunk */
    assert_non_null(big);
    arena_reset(&a);
    assert_int_equal(a.used, 0);
    assert_non_null(arena_alloc(&a, 4000));
    arena_free(&a);
}

/* A rewind gives back what was allocated since the mark: the next
 * allocation gets the same address, the chunks made since (a new head, a
 * large block behind the head) are freed (ASan reports them otherwise),
 * and the bytes count again toward the ceiling. */
static void test_arena_rewind(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 256, 4096);
    struct arena_mark empty = arena_mark(&a);
    assert_non_null(arena_alloc(&a, 100));
    assert_non_null(arena_alloc(&a, 1000));
    arena_rewind(&a, &empty);
    assert_null(a.head);
    assert_int_equal(a.used, 0);

    assert_non_null(arena_alloc(&a, 40));
    struct arena_mark m = arena_mark(&a);
    char *next = arena_alloc(&a, 16);
    assert_non_null(arena_alloc(&a, 1000)); /* behind the head */
    assert_non_null(arena_alloc(&a, 200));  /* a new head */
    assert_non_null(arena_alloc(&a, 1500)); /* behind the new head */
    assert_null(arena_alloc(&a, 2000));     /* over the ceiling */
    arena_rewind(&a, &m);
    assert_int_equal(a.used, 48);
    assert_ptr_equal(arena_alloc(&a, 16), next);
    assert_non_null(arena_alloc(&a, 3000)); /* room again under the ceiling */
    arena_free(&a);
}

static void test_arena_oom_returns_null(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 256, 1 << 20);
    mem_fail_after(0);
    assert_null(arena_alloc(&a, 10));
    mem_fail_reset();
    assert_non_null(arena_calloc(&a, 10, 10));
    assert_null(arena_calloc(&a, SIZE_MAX / 2, 4)); /* overflow */
    arena_free(&a);
}

/* Every half converts to float and back to the same bits (NaNs stay NaN). */
static void test_fp16_exhaustive_round_trip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = fp16_to_float((uint16_t)h);
        uint16_t back = fp16_from_float(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(isnan(f));
            assert_int_equal(back & 0x7c00, 0x7c00);
            assert_true(back & 0x3ff);
        } else {
            assert_int_equal(back, h);
        }
    }
}

static void test_fp16_rounding(void **state)
{
    (void)state;
    assert_int_equal(fp16_from_float(65504.0f), 0x7bff);
    assert_int_equal(fp16_from_float(65519.0f), 0x7bff); /* rounds down */
    assert_int_equal(fp16_from_float(65520.0f), 0x7c00); /* ties to even → inf */
    assert_int_equal(fp16_from_float(-0.0f), 0x8000);
    assert_int_equal(fp16_from_float(5.960464477539063e-08f), 0x0001); /* smallest subnormal */
    assert_int_equal(fp16_from_float(2.98023223876953125e-08f), 0x0000); /* half of it: even */
    assert_int_equal(fp16_from_float(2.99e-08f), 0x0001);
    assert_int_equal(fp16_from_float(1.0f + 1.0f / 2048), 0x3c00); /* tie → even */
    assert_int_equal(fp16_from_float(1.0f + 3.0f / 2048), 0x3c02); /* tie → even (up) */
    assert_true(fp16_to_float(0x7c00) == INFINITY);
}

static void test_dtype_names(void **state)
{
    (void)state;
    for (int t = DT_INVALID + 1; t < DT_COUNT; t++) {
        const char *n = dtype_name((enum dtype)t);
        assert_int_equal(dtype_from_name(n, strlen(n)), t);
        const char *c = dtype_config_name((enum dtype)t);
        assert_int_equal(dtype_from_config_name(c, strlen(c)), t);
    }
    assert_int_equal(dtype_from_name("fp32", 4), DT_INVALID);
    assert_int_equal(dtype_from_name("FP3", 3), DT_INVALID);
    assert_int_equal(dtype_from_config_name("TYPE_STRING", 11), DT_BYTES);
    assert_int_equal(dtype_size(DT_FP16), 2);
    assert_int_equal(dtype_size(DT_BYTES), 0);
    assert_string_equal(dtype_name((enum dtype)99), "INVALID");
}

static void test_shape_count_overflow(void **state)
{
    (void)state;
    int64_t s1[] = {2, 3, 4};
    assert_int_equal(shape_count(s1, 3, INT64_MAX), 24);
    assert_int_equal(shape_count(s1, 0, INT64_MAX), 1);
    int64_t s2[] = {INT64_MAX / 2, 3};
    assert_int_equal(shape_count(s2, 2, INT64_MAX), -1);
    int64_t s3[] = {1000, 1000};
    assert_int_equal(shape_count(s3, 2, 999999), -1);
    int64_t s4[] = {0, INT64_MAX};
    assert_int_equal(shape_count(s4, 2, INT64_MAX), 0);
    int64_t s5[] = {3, -1};
    assert_int_equal(shape_count(s5, 2, INT64_MAX), -1);
    char out[32];
    shape_format(s1, 3, out, sizeof out);
    assert_string_equal(out, "[2,3,4]");
    shape_format(s1, 3, out, 4);
    assert_int_equal(strlen(out), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_ceiling_is_sticky),
        cmocka_unit_test(test_buf_printf_and_consume),
        cmocka_unit_test(test_buf_oom),
        cmocka_unit_test(test_arena_alignment_and_ceiling),
        cmocka_unit_test(test_arena_rewind),
        cmocka_unit_test(test_arena_oom_returns_null),
        cmocka_unit_test(test_fp16_exhaustive_round_trip),
        cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_shape_count_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
