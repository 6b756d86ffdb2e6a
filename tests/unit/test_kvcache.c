/*
 * The KV cache: the byte budget (reserve, refuse, give back), blocks
 * taken on demand and pooled, and gather/scatter against a dense
 * reference layout across block boundaries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "base/mem.h"
#include "gen/kvcache.h"

static void test_budget(void **state)
{
    (void)state;
    gen_kv_budget_set(1000);
    assert_true(gen_kv_reserve(600));
    assert_false(gen_kv_reserve(401));
    assert_true(gen_kv_reserve(400));
    assert_int_equal(gen_kv_reserved(), 1000);
    assert_false(gen_kv_reserve(1));
    gen_kv_unreserve(600);
    assert_true(gen_kv_reserve(600));
    gen_kv_unreserve(1000);
    assert_int_equal(gen_kv_reserved(), 0);
    assert_false(gen_kv_reserve(1001));
}

static void test_sizes(void **state)
{
    (void)state;
    struct gen_kv_shape s = {.layers = 2, .heads = 3, .head_dim = 4};
    size_t block = 2 * 2 * 3 * GEN_KV_BLOCK_TOKENS * 4 * sizeof(float);
    assert_int_equal(gen_kv_block_bytes(&s), block);
    assert_int_equal(gen_kv_bytes_for(&s, 1), block);
    assert_int_equal(gen_kv_bytes_for(&s, GEN_KV_BLOCK_TOKENS), block);
    assert_int_equal(gen_kv_bytes_for(&s, GEN_KV_BLOCK_TOKENS + 1), 2 * block);
}

/* The value a dense [heads][tokens][head_dim] tensor of (layer, kv) holds. */
static float value(uint32_t layer, uint32_t kv, uint32_t h, uint32_t t, uint32_t d)
{
    return (float)(layer * 100000 + kv * 10000 + h * 1000 + t * 10 + d);
}

static void test_scatter_gather(void **state)
{
    (void)state;
    struct gen_kv_shape s = {.layers = 2, .heads = 3, .head_dim = 4};
    struct gen_kv_pool pool;
    gen_kv_pool_init(&pool, &s);
    struct gen_kv_seq seq = {0};
    /* 37 tokens stored as runs of 5, 20 and 12: across block boundaries. */
    const uint32_t runs[] = {5, 20, 12}, total = 37, stride = 40;
    float *src = mem_alloc(sizeof(float) * s.heads * stride * s.head_dim);
    for (uint32_t r = 0, pos = 0; r < 3; pos += runs[r], r++) {
        assert_int_equal(gen_kv_seq_reserve(&pool, &seq, pos + runs[r]), 0);
        for (uint32_t l = 0; l < s.layers; l++)
            for (uint32_t kv = 0; kv < 2; kv++) {
                /* The run sits at [3, 3 + n) of a [heads][stride][dim] tensor. */
                for (uint32_t h = 0; h < s.heads; h++)
                    for (uint32_t t = 0; t < runs[r]; t++)
                        for (uint32_t d = 0; d < s.head_dim; d++)
                            src[(h * stride + 3 + t) * s.head_dim + d] =
                                value(l, kv, h, pos + t, d);
                gen_kv_scatter(&pool, &seq, l, kv, src, stride, 3, runs[r], pos);
            }
        seq.len = pos + runs[r];
    }
    assert_int_equal(seq.nblocks, 3);
    assert_int_equal(pool.in_use, 3);
    float *dst = mem_alloc(sizeof(float) * s.heads * stride * s.head_dim);
    for (uint32_t l = 0; l < s.layers; l++)
        for (uint32_t kv = 0; kv < 2; kv++) {
            memset(dst, 0xff, sizeof(float) * s.heads * stride * s.head_dim);
            gen_kv_gather(&pool, &seq, l, kv, dst, stride);
            for (uint32_t h = 0; h < s.heads; h++)
                for (uint32_t t = 0; t < stride; t++)
                    for (uint32_t d = 0; d < s.head_dim; d++) {
                        float want = t < total ? value(l, kv, h, t, d) : 0.0f;
                        assert_true(dst[(h * stride + t) * s.head_dim + d] == want);
                    }
        }
    gen_kv_seq_release(&pool, &seq);
    assert_int_equal(pool.in_use, 0);
    assert_int_equal(pool.nfree, 3);
    /* Released blocks are reused before new ones are allocated. */
    assert_int_equal(gen_kv_seq_reserve(&pool, &seq, 1), 0);
    assert_int_equal(pool.nfree, 2);
    gen_kv_seq_release(&pool, &seq);
    gen_kv_pool_trim(&pool, 1);
    assert_int_equal(pool.nfree, 1);
    gen_kv_pool_free(&pool);
    mem_free(src);
    mem_free(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_scatter_gather),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
