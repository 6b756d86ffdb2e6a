/*
 * Unit tests for gen/sample: the generator against values computed by an
 * independent Python implementation of splitmix64 + xoshiro256**, the greedy
 * rule, the exact draw rule, top-k and top-p sets, frequencies against the
 * softmax, degenerate logits, and the scratch's allocation.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/mem.h"
#include "gen/sample.h"

static struct sample_scratch scratch;

static int setup(void **state)
{
    (void)state;
    return sample_scratch_init(&scratch, 65536);
}

static int teardown(void **state)
{
    (void)state;
    sample_scratch_free(&scratch);
    return 0;
}

static int32_t sample(const float *logits, uint32_t vocab, float temperature, int32_t top_k,
                      float top_p, struct gen_rng *rng)
{
    struct sample_params p = {temperature, top_k, top_p};
    return sample_token(logits, vocab, &p, rng, &scratch);
}

static void test_rng_reference(void **state)
{
    (void)state;
    static const struct {
        uint64_t seed, s[4];
        double u[3];
    } cases[] = {
        {0,
         {0xe220a8397b1dcdafu, 0x6e789e6aa1b965f4u, 0x06c45d188009454fu, 0xf88bb8a8724c81ecu},
         {0.6012629994179048, 0.7477740925472398, 0.10301998939503632}},
        {42,
         {0xbdd732262feb6e95u, 0x28efe333b266f103u, 0x47526757130f9f52u, 0x581ce1ff0e4ae394u},
         {0.08386297105988216, 0.3789802506626686, 0.6800434110281394}},
        {UINT64_MAX,
         {0xe4d971771b652c20u, 0xe99ff867dbf682c9u, 0x382ff84cb27281e9u, 0x6d1db36ccba982d2u},
         {0.5598927040505212, 0.7674350796247662, 0.5072966666942884}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gen_rng r;
        gen_rng_seed(&r, cases[i].seed);
        assert_memory_equal(r.s, cases[i].s, sizeof r.s);
        for (int k = 0; k < 3; k++)
            assert_true(gen_rng_uniform(&r) == cases[i].u[k]);
    }
    struct gen_rng r;
    gen_rng_seed(&r, 7);
    for (int i = 0; i < 100000; i++) {
        double u = gen_rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
    }
}

static void test_greedy(void **state)
{
    (void)state;
    struct gen_rng r, before;
    gen_rng_seed(&r, 1);
    before = r;
    const float l[] = {1, 3, -2, 3, NAN, 2.5f};
    assert_int_equal(sample(l, 6, 0, 0, 1, &r), 1); /* ties: lower id */
    assert_int_equal(sample(l, 6, -1, 50, 0.5f, &r), 1);
    assert_int_equal(sample(l, 6, NAN, 0, 1, &r), 1);
    assert_int_equal(sample(l, 6, 1.0f, 1, 1, &r), 1); /* top_k 1 */
    assert_memory_equal(&r, &before, sizeof r);        /* no draw */
    const float nan_first[] = {NAN, -INFINITY, -5};
    assert_int_equal(sample(nan_first, 3, 0, 0, 1, &r), 2);
    const float all_nan[] = {NAN, NAN};
    assert_int_equal(sample(all_nan, 2, 0, 0, 1, &r), 0);
    const float one[] = {0};
    assert_int_equal(sample(one, 1, 0, 0, 1, &r), 0);
}

/* Greedy against the ordering itself (higher first, then lower id, NaN
 * after every number), on logits drawn from a few values so that ties,
 * NaNs and infinities meet at every position. */
static void test_greedy_matches_the_ordering(void **state)
{
    (void)state;
    const float pool[] = {NAN, -INFINITY, INFINITY, -1.0f, 0.0f, -0.0f, 2.5f, 2.5f, FLT_MAX};
    struct gen_rng r, pick;
    gen_rng_seed(&r, 3);
    gen_rng_seed(&pick, 4);
    float l[40];
    for (int round = 0; round < 20000; round++) {
        uint32_t n = 1 + (uint32_t)(gen_rng_uniform(&pick) * 40);
        for (uint32_t i = 0; i < n; i++)
            l[i] = pool[(int)(gen_rng_uniform(&pick) * (sizeof pool / sizeof *pool))];
        int32_t want = 0;
        for (uint32_t i = 1; i < n; i++) {
            float x = l[i], y = l[want];
            bool before = isnan(x) ? false : isnan(y) ? true : x > y;
            if (before)
                want = (int32_t)i;
        }
        assert_int_equal(sample(l, n, 0, 0, 1, &r), want);
    }
}

/* The draw, exactly: equal weights split [0, 1) into equal parts by id. */
static void test_exact_draw(void **state)
{
    (void)state;
    const float l[8] = {0};
    struct gen_rng r, copy;
    gen_rng_seed(&r, 99);
    for (int i = 0; i < 1000; i++) {
        copy = r;
        double u = gen_rng_uniform(&copy);
        int32_t id = sample(l, 8, 0.7f, 0, 1, &r);
        assert_int_equal(id, (int32_t)(u * 8));
        assert_memory_equal(&r, &copy, sizeof r); /* exactly one draw */
    }
    /* Over the top 3 (ids 2, 5, 6 by logit) with weights 1, 1, 2 by id order:
     * [0, .25) -> 2, [.25, .5) -> 5, [.5, 1) -> 6. */
    const float m[8] = {-1, -1, 0, -1, -2, 0, (float)M_LN2, -1};
    for (int i = 0; i < 1000; i++) {
        copy = r;
        double u = gen_rng_uniform(&copy);
        int32_t id = sample(m, 8, 1, 3, 1, &r);
        int32_t want = u < 0.25 ? 2 : u < 0.5 ? 5 : 6;
        if (fabs(u - 0.25) > 1e-6 && fabs(u - 0.5) > 1e-6)
            assert_int_equal(id, want);
        assert_memory_equal(&r, &copy, sizeof r);
    }
}

static void count_draws(const float *l, uint32_t vocab, float t, int32_t k, float p, int n,
                        uint64_t seed, int *counts)
{
    struct gen_rng r;
    gen_rng_seed(&r, seed);
    memset(counts, 0, vocab * sizeof *counts);
    for (int i = 0; i < n; i++) {
        int32_t id = sample(l, vocab, t, k, p, &r);
        assert_true(id >= 0 && (uint32_t)id < vocab);
        counts[id]++;
    }
}

static void test_frequencies(void **state)
{
    (void)state;
    int counts[4];
    enum { N = 40000 };
    /* softmax([0, ln 3]) = .25, .75; at T = 2: 1 : sqrt(3). */
    const float two[] = {0, (float)log(3.0)};
    count_draws(two, 2, 1, 0, 1, N, 5, counts);
    assert_true(fabs(counts[1] / (double)N - 0.75) < 0.01);
    count_draws(two, 2, 2, 0, 1, N, 6, counts);
    assert_true(fabs(counts[1] / (double)N - sqrt(3.0) / (1 + sqrt(3.0))) < 0.01);
    /* Low temperature sharpens. */
    count_draws(two, 2, 0.1f, 0, 1, N, 7, counts);
    assert_true(counts[0] < N / 1000);

    /* top_p over probabilities .5 .3 .15 .05 (ids 3, 0, 2, 1). */
    const float p4[] = {(float)log(0.3), (float)log(0.05), (float)log(0.15), (float)log(0.5)};
    count_draws(p4, 4, 1, 0, 0.75f, N, 8, counts); /* keeps .5 and .3 */
    assert_int_equal(counts[1] + counts[2], 0);
    assert_true(fabs(counts[3] / (double)N - 0.625) < 0.01);
    count_draws(p4, 4, 1, 0, 0.45f, N, 9, counts); /* keeps .5 alone */
    assert_int_equal(counts[3], N);
    count_draws(p4, 4, 1, 0, 0.0f, N, 9, counts); /* keeps at least one */
    assert_int_equal(counts[3], N);
    count_draws(p4, 4, 1, 0, 0.9f, N, 10, counts); /* .5 .3 .15 */
    assert_int_equal(counts[1], 0);
    assert_true(fabs(counts[2] / (double)N - 0.15 / 0.95) < 0.01);
    count_draws(p4, 4, 1, 0, 1.0f, N, 11, counts); /* all */
    assert_true(fabs(counts[1] / (double)N - 0.05) < 0.005);
    count_draws(p4, 4, 1, 0, NAN, N, 11, counts); /* NaN keeps all too */
    assert_true(counts[1] > 0);

    /* top_k 2 then top_p: renormalised over the two kept. */
    count_draws(p4, 4, 1, 2, 1, N, 12, counts);
    assert_int_equal(counts[1] + counts[2], 0);
    assert_true(fabs(counts[0] / (double)N - 0.375) < 0.01);
    count_draws(p4, 4, 1, 3, 0.7f, N, 13, counts); /* of .5 .3 .15: .5/.95 < .7 */
    assert_int_equal(counts[1] + counts[2], 0);
    /* top_k at or past the vocabulary, and negative: off. */
    count_draws(p4, 4, 1, 4, 1, N, 14, counts);
    assert_true(counts[1] > 0);
    count_draws(p4, 4, 1, -3, 1, N, 14, counts);
    assert_true(counts[1] > 0);
}

/* Ties in top-k and top-p go to the lower id. */
static void test_ties(void **state)
{
    (void)state;
    int counts[6];
    const float l[] = {1, 2, 2, 2, 0, 2};
    count_draws(l, 6, 1, 2, 1, 2000, 3, counts); /* of four 2s, ids 1 and 2 */
    assert_true(counts[1] > 0 && counts[2] > 0);
    assert_int_equal(counts[1] + counts[2], 2000);
    count_draws(l, 6, 1, 0, 0.01f, 2000, 3, counts); /* the first of the 2s */
    assert_int_equal(counts[1], 2000);
}

static void test_degenerate_logits(void **state)
{
    (void)state;
    struct gen_rng r;
    gen_rng_seed(&r, 4);
    const float inf[] = {0, INFINITY, 0, INFINITY};
    const float ninf[] = {-INFINITY, -INFINITY, -INFINITY};
    const float nan[] = {NAN, 1, NAN, 1};
    const float most_ninf[] = {-INFINITY, 3, -INFINITY};
    const float huge[] = {-3e38f, 3e38f};
    for (int i = 0; i < 100; i++) {
        assert_int_equal(sample(inf, 4, 1, 0, 1, &r), 1);
        assert_int_equal(sample(ninf, 3, 1, 0, 1, &r), 0);
        int32_t id = sample(nan, 4, 1, 0, 0.9f, &r);
        assert_true(id == 1 || id == 3);
        assert_int_equal(sample(most_ninf, 3, 1, 0, 1, &r), 1);
        assert_int_equal(sample(huge, 2, 1, 0, 1, &r), 1);
        assert_int_equal(sample(huge, 2, 1e-30f, 0, 1, &r), 1);
    }
}

/* A 65536-entry vocabulary: top-k selection picks exactly the k highest. */
static void test_large_vocab(void **state)
{
    (void)state;
    enum { V = 65536, K = 40 };
    float *l = malloc(V * sizeof *l);
    assert_non_null(l);
    struct gen_rng r;
    gen_rng_seed(&r, 2024);
    for (uint32_t i = 0; i < V; i++)
        l[i] = (float)(gen_rng_uniform(&r) * 20 - 10);
    /* The K highest, by repeated selection. */
    bool taken[V] = {false};
    for (int k = 0; k < K; k++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < V; i++)
            if (!taken[i] && (best == UINT32_MAX || l[i] > l[best]))
                best = i;
        taken[best] = true;
    }
    for (int i = 0; i < 2000; i++) {
        int32_t id = sample(l, V, 1.5f, K, 0.95f, &r);
        assert_true(taken[id]);
    }
    free(l);
}

static void test_scratch_alloc(void **state)
{
    (void)state;
    struct sample_scratch s;
    for (long n = 0; n < 2; n++) {
        mem_fail_after(n);
        assert_int_equal(sample_scratch_init(&s, 512), -ENOMEM);
        mem_fail_reset();
        assert_null(s.probs);
        assert_null(s.ids);
    }
    assert_int_equal(sample_scratch_init(&s, 512), 0);
    assert_int_equal(s.cap, 512);
    sample_scratch_free(&s);
    sample_scratch_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_reference), cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_greedy_matches_the_ordering),
        cmocka_unit_test(test_exact_draw),    cmocka_unit_test(test_frequencies),
        cmocka_unit_test(test_ties),          cmocka_unit_test(test_degenerate_logits),
        cmocka_unit_test(test_large_vocab),   cmocka_unit_test(test_scratch_alloc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
