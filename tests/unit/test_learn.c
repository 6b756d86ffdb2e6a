/*
 * The batch-size learning rule (sched/learn.h) on its own: runs of chosen
 * sizes and durations go in, the preferred size and the caps of the next
 * batches come out. No clock, no threads: a "model" here is a function
 * from batch size to run time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched/learn.h"

#define MAX_BATCH 16

/* The cap of a batch planned now; a batch that explores is taken. */
static uint32_t take(struct learn *l, int64_t head, bool full)
{
    bool exploring;
    uint32_t cap = learn_cap(l, head, full, &exploring);
    if (exploring)
        learn_explored(l);
    return cap;
}

/* ns per run of n samples: 1 us a sample up to 4, 4 us a sample above. */
static uint64_t sweet_at_4(uint32_t n)
{
    return (uint64_t)n * (n <= 4 ? 1000u : 4000u);
}

/* mlp-like: a fixed cost per run plus a falling cost per sample. */
static uint64_t falling(uint32_t n)
{
    return 20000u + (uint64_t)n * 1000u;
}

/* Runs each size class LEARN_MIN_RUNS times at its bound. */
static void measure_all(struct learn *l, uint64_t (*cost)(uint32_t))
{
    for (uint32_t i = 0; i < l->nbuckets; i++)
        for (int k = 0; k < LEARN_MIN_RUNS; k++)
            learn_note(l, learn_bound(l, i), cost(learn_bound(l, i)));
}

static void test_size_classes(void **state)
{
    (void)state;
    assert_int_equal(learn_bucket_of(1), 0);
    assert_int_equal(learn_bucket_of(2), 1);
    assert_int_equal(learn_bucket_of(3), 2);
    assert_int_equal(learn_bucket_of(4), 2);
    assert_int_equal(learn_bucket_of(5), 3);
    assert_int_equal(learn_bucket_of(16), 4);
    assert_int_equal(learn_bucket_of(17), 5);
    struct learn l;
    learn_init(&l, 16);
    assert_int_equal(l.nbuckets, 5);
    assert_int_equal(learn_bound(&l, 4), 16);
    learn_init(&l, 100); /* the last class is (64, 100] */
    assert_int_equal(l.nbuckets, 8);
    assert_int_equal(learn_bound(&l, 6), 64);
    assert_int_equal(learn_bound(&l, 7), 100);
}

/* Every class measured with `cost`: the preferred size, and the cap of a
 * batch planned from a queue too short to fill one (no exploring). */
static void check_preference(uint64_t (*cost)(uint32_t), uint32_t expected)
{
    struct learn l;
    learn_init(&l, MAX_BATCH);
    measure_all(&l, cost);
    assert_int_equal(l.preferred, expected);
    assert_int_equal(take(&l, 1, false), expected);
}

/* 1, 2 and 4 are equally fast per sample: the largest of them. */
static void test_sweet_spot_is_preferred_and_caps(void **state)
{
    (void)state;
    check_preference(sweet_at_4, 4);
}

static void test_falling_cost_prefers_nothing(void **state)
{
    (void)state;
    check_preference(falling, 0);
}

/* The best class is the largest one measured: nothing says a larger batch
 * would be slower, so no cap. */
static void test_no_cap_without_a_slower_larger_class(void **state)
{
    (void)state;
    struct learn l;
    learn_init(&l, MAX_BATCH);
    for (int k = 0; k < LEARN_MIN_RUNS; k++) {
        learn_note(&l, 1, sweet_at_4(1) * 3);
        learn_note(&l, 4, sweet_at_4(4));
    }
    assert_int_equal(l.preferred, 0);
    /* One run of 16 is not yet a measurement. */
    learn_note(&l, 16, sweet_at_4(16));
    assert_int_equal(l.preferred, 0);
    for (int k = 1; k < LEARN_MIN_RUNS; k++)
        learn_note(&l, 16, sweet_at_4(16));
    assert_int_equal(l.preferred, 4);
}

/* A stall makes one run of the preferred class ten times slower: the
 * class's time follows it by 1/32 only, and the choice stays. */
static void test_a_stall_does_not_move_the_choice(void **state)
{
    (void)state;
    struct learn l;
    learn_init(&l, MAX_BATCH);
    measure_all(&l, sweet_at_4);
    assert_int_equal(l.preferred, 4);
    assert_false(learn_note(&l, 4, 10 * sweet_at_4(4)));
    assert_int_equal(l.preferred, 4);
    assert_false(learn_note(&l, 3, 10 * sweet_at_4(3)));
    assert_int_equal(l.preferred, 4);
}

/* Exploring happens only with a full batch queued, at most every other
 * batch, for a class with few runs, never below the first request. */
static void test_exploring(void **state)
{
    (void)state;
    struct learn l;
    learn_init(&l, MAX_BATCH);
    learn_note(&l, 16, sweet_at_4(16));
    learn_note(&l, 16, sweet_at_4(16));
    assert_int_equal(take(&l, 1, false), 0);
    /* Planned (by a thread that hands the batch to another): not yet
     * counted as explored. */
    bool exploring;
    assert_int_equal(learn_cap(&l, 1, true, &exploring), 1); /* the class of 1: no runs */
    assert_true(exploring);
    assert_int_equal(take(&l, 1, true), 1);
    assert_int_equal(take(&l, 1, true), 0); /* not again at once */
    learn_note(&l, 1, sweet_at_4(1));
    assert_int_equal(take(&l, 1, true), 0);
    learn_note(&l, 16, sweet_at_4(16));
    /* The first request has 5 samples: the classes of 1, 2 and 4 cannot
     * be made; (4, 8] has no runs. */
    assert_int_equal(take(&l, 5, true), 8);
}

/* A batcher with a deep queue (every batch could be full), on a model
 * fastest per sample at 4: it explores, settles on 4, and then runs
 * batches of 4 but for a rare look at a stale class. */
static void test_deep_queue_converges(void **state)
{
    (void)state;
    struct learn l;
    learn_init(&l, MAX_BATCH);
    uint32_t other = 0, larger = 0;
    for (int step = 0; step < 600; step++) {
        uint32_t cap = take(&l, 1, true);
        uint32_t size = cap ? cap : MAX_BATCH;
        learn_note(&l, size, sweet_at_4(size));
        if (step >= 100 && size != 4)
            other++;
        if (step >= 100 && size > 4)
            larger++;
    }
    assert_int_equal(l.preferred, 4);
    /* 500 batches: each of the other 4 classes is looked at again about
     * every LEARN_STALE_BATCHES batches. */
    assert_true(other >= 1 && other <= 4 * (500 / LEARN_STALE_BATCHES + 1));
    assert_true(larger >= 1);
}

static void test_predict(void **state)
{
    (void)state;
    struct learn l;
    learn_init(&l, MAX_BATCH);
    assert_int_equal(learn_predict_ns(&l, 16), 0);
    learn_note(&l, 16, 64000);
    assert_int_equal(learn_predict_ns(&l, 16), 0); /* one run is not enough */
    learn_note(&l, 16, 64000);
    assert_int_equal(learn_predict_ns(&l, 16), 64000);
    assert_int_equal(learn_predict_ns(&l, 12), 48000); /* same class, per sample */
    assert_int_equal(learn_predict_ns(&l, 4), 0);
    assert_int_equal(learn_predict_ns(&l, 17), 0); /* above max_batch */
    assert_false(learn_note(&l, 17, 1000));          /* oversize: not counted */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_sweet_spot_is_preferred_and_caps),
        cmocka_unit_test(test_falling_cost_prefers_nothing),
        cmocka_unit_test(test_no_cap_without_a_slower_larger_class),
        cmocka_unit_test(test_a_stall_does_not_move_the_choice),
        cmocka_unit_test(test_exploring),
        cmocka_unit_test(test_deep_queue_converges),
        cmocka_unit_test(test_predict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
