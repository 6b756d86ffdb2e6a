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
    gen_kv_pool_init(&pool, &s, false);
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

/* Fills seq's tokens [seq->len, n) with recognisable values (every layer,
 * k/v, head: token id t of tokens[] at position t gives 1000 * id + t). */
static void fill(struct gen_kv_pool *p, struct gen_kv_seq *seq, const int32_t *tokens, uint32_t n)
{
    const struct gen_kv_shape *s = &p->shape;
    uint32_t from = seq->len, count = n - from;
    assert_int_equal(gen_kv_seq_own_tail(p, seq), 0);
    assert_int_equal(gen_kv_seq_reserve(p, seq, n), 0);
    float *src = mem_alloc(sizeof(float) * s->heads * count * s->head_dim);
    for (uint32_t l = 0; l < s->layers; l++)
        for (uint32_t kv = 0; kv < 2; kv++) {
            for (uint32_t h = 0; h < s->heads; h++)
                for (uint32_t t = 0; t < count; t++)
                    for (uint32_t d = 0; d < s->head_dim; d++)
                        src[(h * count + t) * s->head_dim + d] =
                            (float)(1000 * tokens[from + t] + from + t);
            gen_kv_scatter(p, seq, l, kv, src, count, 0, count, from);
        }
    mem_free(src);
    seq->len = n;
}

/* Token t of seq's (layer 0, key, head 0), as stored. */
static float stored(const struct gen_kv_pool *p, const struct gen_kv_seq *seq, uint32_t t)
{
    float *dst = mem_alloc(sizeof(float) * p->shape.heads * seq->len * p->shape.head_dim);
    gen_kv_gather(p, seq, 0, 0, dst, seq->len);
    float v = dst[(size_t)t * p->shape.head_dim];
    mem_free(dst);
    return v;
}

/* The prefix table: a published prefix is attached by a later sequence
 * (reference counts), kept idle when nobody holds it, copied before a
 * sequence writes into it (the other's data unchanged), deduplicated when
 * two sequences computed the same prefix, and evicted oldest first with
 * its bytes given back. */
static void test_prefix_sharing(void **state)
{
    (void)state;
    struct gen_kv_shape s = {.layers = 1, .heads = 1, .head_dim = 2};
    uint64_t bb = gen_kv_block_bytes(&s);
    gen_kv_budget_set(64 * bb);
    struct gen_kv_pool pool;
    gen_kv_pool_init(&pool, &s, true);
    int32_t tokens[48], other[48];
    for (int i = 0; i < 48; i++)
        tokens[i] = other[i] = 7 + i;
    other[40] = 999; /* differs in its third block */

    /* a computes 40 tokens (2 full blocks) and publishes them: their bytes
     * become the cache's. */
    struct gen_kv_seq a = {0}, b = {0}, c = {0};
    assert_true(gen_kv_reserve(3 * bb)); /* a's reservation */
    fill(&pool, &a, tokens, 40);
    uint32_t moved, dropped;
    gen_kv_seq_publish(&pool, &a, tokens, &moved, &dropped);
    assert_int_equal(moved, 2);
    assert_int_equal(dropped, 0);
    gen_kv_unreserve(bb); /* a keeps one block of its own */
    assert_int_equal(a.nshared, 2);
    assert_int_equal(pool.ncached, 2);

    /* b's tokens begin the same way: it takes both blocks (40 tokens of
     * which 32 are whole blocks). */
    assert_int_equal(gen_kv_seq_attach(&pool, &b, other, 40), 32);
    assert_int_equal(b.nshared, 2);
    assert_ptr_equal(b.blocks[0], a.blocks[0]);
    assert_int_equal(a.blocks[1]->refs, 2);
    b.len = 32;
    assert_true(stored(&pool, &b, 31) == (float)(1000 * 38 + 31));

    /* c's whole 32-token prompt is there: it runs its last token again,
     * writing into the table's second block, so it copies it first. */
    assert_int_equal(gen_kv_seq_attach(&pool, &c, tokens, 32), 32);
    c.len = 31;
    int32_t changed[48];
    memcpy(changed, tokens, sizeof changed);
    changed[31] = 500;
    fill(&pool, &c, changed, 32);
    assert_int_equal(c.nshared, 1);
    assert_ptr_not_equal(c.blocks[1], a.blocks[1]);
    assert_int_equal(a.blocks[1]->refs, 2); /* a and b */
    assert_true(stored(&pool, &c, 31) == (float)(1000 * 500 + 31));
    assert_true(stored(&pool, &c, 30) == (float)(1000 * 37 + 30)); /* copied */
    a.len = 40;
    assert_true(stored(&pool, &a, 31) == (float)(1000 * 38 + 31)); /* unchanged */

    /* b goes on with other tokens; when its third block fills, it is
     * published under its own prefix, not a's. */
    fill(&pool, &b, other, 48);
    gen_kv_seq_publish(&pool, &b, other, &moved, &dropped);
    assert_int_equal(moved, 1);
    assert_int_equal(pool.ncached, 3);

    /* c computed what a had (its block 1 with token 31 = 38 again, then 8
     * more): publishing it finds the table's block and drops its copy. */
    c.len = 31;
    fill(&pool, &c, tokens, 40);
    gen_kv_seq_publish(&pool, &c, tokens, &moved, &dropped);
    assert_int_equal(moved, 0);
    assert_int_equal(dropped, 1);
    assert_ptr_equal(c.blocks[1], a.blocks[1]);
    assert_int_equal(a.blocks[1]->refs, 3);

    /* Released, the table's blocks stay idle (their bytes the cache's) and
     * are evicted oldest first. */
    uint64_t before = gen_kv_reserved();
    gen_kv_seq_release(&pool, &a);
    gen_kv_seq_release(&pool, &b);
    gen_kv_seq_release(&pool, &c);
    assert_int_equal(pool.nidle, 3);
    assert_int_equal(gen_kv_reserved(), before);
    struct gen_kv_seq d = {0};
    assert_int_equal(gen_kv_seq_attach(&pool, &d, tokens, 48), 32); /* still there */
    gen_kv_seq_release(&pool, &d);
    assert_int_equal(gen_kv_evict_idle(&pool, 2), 2);
    assert_int_equal(pool.ncached, 1);
    assert_int_equal(gen_kv_reserved(), before - 2 * bb);
    assert_true(pool.queried_tokens == 40 + 32 + 48);
    assert_true(pool.hit_tokens == 32 + 32 + 32);
    gen_kv_pool_free(&pool); /* the last one's bytes too */
    assert_int_equal(gen_kv_reserved(), before - 3 * bb);
    assert_int_equal(pool.in_use, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_scatter_gather),
        cmocka_unit_test(test_prefix_sharing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
