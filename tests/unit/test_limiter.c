/*
 * The adaptive concurrency limiter (policy/gradient.c, policy/limiter.c)
 * without a server: the `concurrency` section and its errors, and the
 * gradient with an injected clock — the limit grows while latency stays at
 * the minimum and shrinks when it doubles, stays within floor and ceiling,
 * the minimum is measured again at the floor, lower priority levels use a
 * share, waiters are admitted in order, expire, and are never stranded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/log.h"
#include "policy/gradient.h"
#include "policy/limiter.h"

#include "../support/section_test.h"

#define MS 1000000ull
#define SEC 1000000000ull

/* ---- the section ---------------------------------------------------------------------- */

SECTION_TEST_PARSE_FAILS(limiter)

static void test_section(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 1 << 20);
    struct limiter_config *c = NULL;
    struct error err;
    assert_int_equal(limiter_config_parse(NULL, &c, &err), 0);
    assert_non_null(c);
    limiter_config_free(c);
    assert_int_equal(limiter_config_parse(tree("null"), &c, &err), 0);
    assert_non_null(c);
    limiter_config_free(c);
    assert_int_equal(limiter_config_parse(tree("[{\"model\": \"digits\"}, {\"model\": \"digits\", "
                                               "\"version\": \"2\", \"min\": 2, \"max\": 8, "
                                               "\"queue\": false, \"tolerance\": 0.25}]"),
                                          &c, &err),
                     0);
    limiter_config_free(c);

    parse_fails("{\"model\": \"digits\"}", "concurrency: expected a list, got a mapping");
    parse_fails("[{\"model\": \"digits\", \"min\": -3}]",
                "concurrency[0].min: expected an integer from 1 to 100000, got -3");
    parse_fails("[{\"model\": \"a\"}, {\"model\": \"digits\", \"min\": 4, \"max\": 2}]",
                "concurrency[1].max: expected an integer from 4 to 100000, got 2");
    parse_fails("[{\"model\": \"digits\", \"min\": 4, \"initial\": 2}]",
                "concurrency[0].initial: expected an integer from 4 to 1000, got 2");
    parse_fails("[{\"model\": \"digits\", \"burst\": 3}]", "concurrency[0].burst: unknown key");
    parse_fails("[{\"version\": 1}]", "concurrency[0].model: required");
    parse_fails("[{\"model\": \"digits\", \"version\": \"v1\"}]",
                "concurrency[0].version: expected a version number (an integer >= 1), got \"v1\"");
    parse_fails("[{\"model\": \"digits\", \"queue\": \"yes\"}]",
                "concurrency[0].queue: expected true or false, got \"yes\"");
    parse_fails("[{\"model\": \"digits\", \"low-priority-share\": 0}]",
                "concurrency[0].low-priority-share: expected a number from 0.01 to 1, got 0");
    parse_fails("[{\"model\": \"digits\", \"min-rtt-samples\": 500}]",
                "concurrency[0].min-rtt-samples: expected an integer from 1 to 128, got 500");
    parse_fails("[{\"model\": \"digits\", \"version\": 1}, {\"model\": \"digits\", \"version\": "
                "\"1\"}]",
                "concurrency[1]: model digits (this version) is already limited by "
                "concurrency[0]");
    arena_free(&arena);
}

/* ---- the gradient --------------------------------------------------------------------- */

static struct gradient_waiter *woken[64];
static uint32_t nwoken;

static void wake(struct gradient_waiter *w)
{
    woken[nwoken++] = w;
}

static struct gradient_params params(uint32_t min, uint32_t max, uint32_t initial)
{
    return (struct gradient_params){.min = min,
                                    .max = max,
                                    .initial = initial,
                                    .window_ns = 100 * MS,
                                    .min_rtt_interval_ns = 1000 * SEC,
                                    .min_rtt_samples = 5,
                                    .tolerance = 0.5,
                                    .low_share = 0.9,
                                    .queue = true};
}

static uint32_t limit_of(struct gradient *g)
{
    return atomic_load(&g->limit);
}

/* One call that ends successfully at `end`, `latency` after its admission. */
static void run_call(struct gradient *g, uint64_t end, uint64_t latency)
{
    struct gradient_waiter w = {0};
    enum gradient_refusal why;
    assert_int_equal(gradient_admit(g, &w, end - latency, &why), GRADIENT_ADMITTED);
    gradient_complete(g, &w, true, end);
}

/* The first minimum, measured at the floor: 5 calls of `latency`; then the
 * limit is `initial`. Returns the time after. */
static uint64_t measure(struct gradient *g, uint64_t t, uint64_t latency)
{
    for (int i = 0; i < 5; i++)
        run_call(g, t += MS, latency);
    return t;
}

static void test_limit_grows_at_the_minimum_and_shrinks_when_latency_doubles(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(1, 1000, 10);
    gradient_init(&g, &p, wake, 0);
    assert_int_equal(limit_of(&g), 1); /* measuring at the floor */
    uint64_t t = measure(&g, SEC, 10 * MS);
    assert_int_equal(atomic_load(&g.min_rtt_ns), 10 * MS);
    assert_int_equal(limit_of(&g), 10);
    /* Latency at the minimum: limit * 1.5 + sqrt(limit), each window. */
    static const uint32_t growth[] = {18, 31, 52, 85};
    for (uint32_t i = 0; i < 4; i++) {
        run_call(&g, t += 50 * MS, 10 * MS);
        assert_int_equal(limit_of(&g), i ? growth[i - 1] : 10); /* window still open */
        run_call(&g, t += 50 * MS, 10 * MS);
        assert_int_equal(limit_of(&g), growth[i]);
    }
    assert_int_equal(atomic_load(&g.sampled_ns), 10 * MS);
    /* Latency doubles: gradient 1.5 / 2 = 0.75: 85 * 0.75 + 9.2 = 72. */
    run_call(&g, t += 100 * MS, 20 * MS);
    assert_int_equal(limit_of(&g), 72);
    assert_int_equal(atomic_load(&g.sampled_ns), 20 * MS);
    /* The window's p90: one slow call in ten does not move it. */
    for (int i = 0; i < 9; i++)
        run_call(&g, t += MS, 10 * MS);
    run_call(&g, t += 100 * MS, 500 * MS);
    assert_int_equal(atomic_load(&g.sampled_ns), 10 * MS);
    gradient_destroy(&g);
}

static void test_floor_and_ceiling(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(4, 40, 20);
    gradient_init(&g, &p, wake, 0);
    assert_int_equal(limit_of(&g), 4);
    uint64_t t = measure(&g, SEC, 10 * MS);
    for (int i = 0; i < 10; i++)
        run_call(&g, t += 100 * MS, 10 * MS);
    assert_int_equal(limit_of(&g), 40);
    /* Ten times slower: the gradient is at most halved, down to the floor. */
    run_call(&g, t += 100 * MS, 100 * MS);
    assert_int_equal(limit_of(&g), 26); /* 40 * 0.5 + 6.3 */
    for (int i = 0; i < 10; i++)
        run_call(&g, t += 100 * MS, 100 * MS);
    assert_int_equal(limit_of(&g), 4);
    gradient_destroy(&g);
}

static void test_minimum_is_measured_again_at_the_floor(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(2, 100, 30);
    p.min_rtt_interval_ns = 10 * SEC;
    gradient_init(&g, &p, wake, 0);
    uint64_t t = measure(&g, SEC, 10 * MS);
    assert_int_equal(limit_of(&g), 30);
    /* A call admitted before the measurement starts. */
    struct gradient_waiter early = {0};
    enum gradient_refusal why;
    assert_int_equal(gradient_admit(&g, &early, t, &why), GRADIENT_ADMITTED);
    /* The interval (plus up to 15 % jitter) passes; the window that closes
     * then starts a measurement: the limit drops to the floor. */
    t = 13 * SEC;
    run_call(&g, t, 20 * MS);
    assert_int_equal(limit_of(&g), 2);
    /* Only calls admitted at the floor measure: the early one does not. */
    gradient_complete(&g, &early, true, t + MS);
    for (int i = 0; i < 4; i++)
        run_call(&g, t += MS, 15 * MS);
    assert_int_equal(limit_of(&g), 2);
    run_call(&g, t += MS, 15 * MS);
    assert_int_equal(atomic_load(&g.min_rtt_ns), 15 * MS);
    /* Back to the limit the last window computed: 30 * 0.75 + 5.48 = 27. */
    assert_int_equal(limit_of(&g), 27);
    gradient_destroy(&g);
}

static void test_lower_priority_uses_a_share(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(10, 10, 10);
    p.low_share = 0.5;
    p.queue = false;
    gradient_init(&g, &p, wake, 0);
    struct gradient_waiter low[6] = {{0}}, high[6] = {{0}};
    enum gradient_refusal why;
    for (int i = 0; i < 5; i++) {
        low[i].low = true;
        assert_int_equal(gradient_admit(&g, &low[i], 0, &why), GRADIENT_ADMITTED);
    }
    low[5].low = true;
    assert_int_equal(gradient_admit(&g, &low[5], 0, &why), GRADIENT_EXPIRED);
    assert_int_equal(why, GRADIENT_REFUSED_LIMIT);
    for (int i = 0; i < 5; i++)
        assert_int_equal(gradient_admit(&g, &high[i], 0, &why), GRADIENT_ADMITTED);
    assert_int_equal(gradient_admit(&g, &high[5], 0, &why), GRADIENT_EXPIRED);
    assert_int_equal(atomic_load(&g.refused[GRADIENT_REFUSED_LIMIT]), 2);
    /* The share is at least one call. */
    struct gradient g1;
    p = params(1, 1, 1);
    p.low_share = 0.5;
    gradient_init(&g1, &p, wake, 0);
    struct gradient_waiter one = {.low = true};
    assert_int_equal(gradient_admit(&g1, &one, 0, &why), GRADIENT_ADMITTED);
    gradient_destroy(&g1);
    gradient_destroy(&g);
}

static void test_waiters_are_admitted_in_order_and_expire(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(2, 2, 2);
    p.min_rtt_samples = 1;
    gradient_init(&g, &p, wake, 0);
    enum gradient_refusal why;
    /* The minimum and sampled latency: 10 ms. */
    run_call(&g, 10 * MS, 10 * MS);
    run_call(&g, 200 * MS, 10 * MS);
    assert_int_equal(gradient_expected_ns(&g), 10 * MS);
    uint64_t t = 1 * SEC;
    struct gradient_waiter a = {0}, b = {0};
    assert_int_equal(gradient_admit(&g, &a, t, &why), GRADIENT_ADMITTED);
    assert_int_equal(gradient_admit(&g, &b, t, &why), GRADIENT_ADMITTED);
    /* Full: no deadline, refused at once; a budget of 5 ms is below the
     * sampled latency, refused too. */
    struct gradient_waiter none = {0}, tight = {.deadline_ns = t + 5 * MS};
    assert_int_equal(gradient_admit(&g, &none, t, &why), GRADIENT_EXPIRED);
    assert_int_equal(why, GRADIENT_REFUSED_LIMIT);
    assert_int_equal(gradient_admit(&g, &tight, t, &why), GRADIENT_EXPIRED);
    /* Two that may wait, and one whose budget will run out first. */
    atomic_bool gone = false;
    struct gradient_waiter w1 = {.deadline_ns = t + SEC}, w2 = {.deadline_ns = t + SEC},
                           w3 = {.deadline_ns = t + 30 * MS},
                           w4 = {.deadline_ns = t + SEC, .cancelled = &gone};
    assert_int_equal(gradient_admit(&g, &w1, t, &why), GRADIENT_WAITING);
    assert_int_equal(gradient_admit(&g, &w3, t, &why), GRADIENT_WAITING);
    assert_int_equal(gradient_admit(&g, &w2, t, &why), GRADIENT_WAITING);
    assert_int_equal(gradient_admit(&g, &w4, t, &why), GRADIENT_WAITING);
    assert_int_equal(atomic_load(&g.nwaiting), 4);
    /* A newcomer that could wait goes behind them, even if a slot is free. */
    nwoken = 0;
    atomic_store(&gone, true);
    gradient_complete(&g, &a, false, t + 25 * MS); /* w3: 5 ms left < 10 ms */
    assert_int_equal(nwoken, 3);
    assert_ptr_equal(woken[0], &w1);
    assert_int_equal(w1.verdict, GRADIENT_ADMITTED);
    assert_ptr_equal(woken[1], &w3);
    assert_int_equal(w3.verdict, GRADIENT_EXPIRED);
    assert_ptr_equal(woken[2], &w4);
    assert_int_equal(w4.verdict, GRADIENT_CANCELLED);
    assert_int_equal(atomic_load(&g.refused[GRADIENT_REFUSED_EXPIRED]), 1);
    assert_int_equal(w2.verdict, GRADIENT_WAITING);
    /* Both running calls end: w2 runs, nobody is left waiting. */
    nwoken = 0;
    gradient_complete(&g, &b, true, t + 40 * MS);
    assert_int_equal(nwoken, 1);
    assert_int_equal(w2.verdict, GRADIENT_ADMITTED);
    gradient_complete(&g, &w1, true, t + 50 * MS);
    gradient_complete(&g, &w2, true, t + 60 * MS);
    assert_int_equal(atomic_load(&g.in_flight), 0);
    assert_int_equal(atomic_load(&g.nwaiting), 0);
    gradient_destroy(&g);
}

static void test_queue_is_bounded(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(1, 1, 1);
    gradient_init(&g, &p, wake, 0);
    enum gradient_refusal why;
    struct gradient_waiter running = {0};
    assert_int_equal(gradient_admit(&g, &running, 0, &why), GRADIENT_ADMITTED);
    static struct gradient_waiter waiters[GRADIENT_QUEUE_MAX + 1];
    for (int i = 0; i < GRADIENT_QUEUE_MAX; i++) {
        waiters[i].deadline_ns = 10 * SEC;
        assert_int_equal(gradient_admit(&g, &waiters[i], 0, &why), GRADIENT_WAITING);
    }
    waiters[GRADIENT_QUEUE_MAX].deadline_ns = 10 * SEC;
    assert_int_equal(gradient_admit(&g, &waiters[GRADIENT_QUEUE_MAX], 0, &why), GRADIENT_EXPIRED);
    assert_int_equal(why, GRADIENT_REFUSED_QUEUE_FULL);
    /* Each completion lets the next one run, in order. */
    nwoken = 0;
    gradient_complete(&g, &running, true, MS);
    assert_int_equal(nwoken, 1);
    assert_ptr_equal(woken[0], &waiters[0]);
    gradient_destroy(&g);
}

/* The head-time refusal: only what gradient_admit would refuse whatever
 * the call's priority and deadline; nothing is taken, refusals counted. */
static void test_refuses_on_the_head_only_what_admit_surely_would(void **state)
{
    (void)state;
    struct gradient g;
    struct gradient_params p = params(1, 1, 1);
    gradient_init(&g, &p, wake, 0);
    enum gradient_refusal why;
    assert_false(gradient_refuses(&g, &why)); /* below the limit */
    struct gradient_waiter running = {0};
    assert_int_equal(gradient_admit(&g, &running, 0, &why), GRADIENT_ADMITTED);
    /* At the limit, but a call with time to spare may wait: not sure. */
    assert_false(gradient_refuses(&g, &why));
    assert_int_equal(atomic_load(&g.in_flight), 1);
    static struct gradient_waiter waiters[GRADIENT_QUEUE_MAX];
    for (int i = 0; i < GRADIENT_QUEUE_MAX; i++) {
        waiters[i].deadline_ns = 10 * SEC;
        assert_int_equal(gradient_admit(&g, &waiters[i], 0, &why), GRADIENT_WAITING);
    }
    assert_true(gradient_refuses(&g, &why)); /* the waiting line is full */
    assert_int_equal(why, GRADIENT_REFUSED_QUEUE_FULL);
    assert_int_equal(atomic_load(&g.refused[GRADIENT_REFUSED_QUEUE_FULL]), 1);
    /* Each completion admits the next waiter, which completes in turn. */
    nwoken = 0;
    gradient_complete(&g, &running, true, MS);
    for (int i = 0; i < GRADIENT_QUEUE_MAX; i++) {
        assert_int_equal(waiters[i].verdict, GRADIENT_ADMITTED);
        nwoken = 0; /* wake() records into a short array */
        gradient_complete(&g, &waiters[i], true, MS);
    }
    assert_int_equal(atomic_load(&g.nwaiting), 0);
    gradient_destroy(&g);

    /* Without queueing, the limit itself refuses. */
    p.queue = false;
    gradient_init(&g, &p, wake, 0);
    assert_int_equal(gradient_admit(&g, &running, 0, &why), GRADIENT_ADMITTED);
    assert_true(gradient_refuses(&g, &why));
    assert_int_equal(why, GRADIENT_REFUSED_LIMIT);
    assert_int_equal(atomic_load(&g.in_flight), 1);
    gradient_complete(&g, &running, true, MS);
    assert_false(gradient_refuses(&g, &why));
    gradient_destroy(&g);
}

/* ---- threads --------------------------------------------------------------------------- */

struct stress_waiter {
    struct gradient_waiter w;
    atomic_bool woken;
};

static void stress_wake(struct gradient_waiter *w)
{
    struct stress_waiter *s = (struct stress_waiter *)w;
    atomic_store_explicit(&s->woken, true, memory_order_release);
}

#define STRESS_LIMIT 2
#define STRESS_THREADS 6
#define STRESS_CALLS 1000

static struct gradient stress;
static atomic_uint stress_running, stress_max, stress_waited;

static void *stress_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < STRESS_CALLS; i++) {
        struct stress_waiter s = {.w = {.deadline_ns = UINT64_MAX / 2}};
        atomic_init(&s.woken, false);
        enum gradient_refusal why;
        enum gradient_verdict v = gradient_admit(&stress, &s.w, SEC, &why);
        if (v == GRADIENT_WAITING) {
            atomic_fetch_add(&stress_waited, 1);
            while (!atomic_load_explicit(&s.woken, memory_order_acquire))
                sched_yield();
            v = s.w.verdict;
        }
        if (v != GRADIENT_ADMITTED) {
            fprintf(stderr, "verdict %d\n", v);
            abort();
        }
        unsigned n = atomic_fetch_add(&stress_running, 1) + 1;
        unsigned m = atomic_load(&stress_max);
        while (n > m && !atomic_compare_exchange_weak(&stress_max, &m, n))
            ;
        sched_yield(); /* hold the slot a moment: others must wait */
        atomic_fetch_sub(&stress_running, 1);
        gradient_complete(&stress, &s.w, false, SEC);
    }
    return NULL;
}

/* Threads admit, wait and complete at once: never more than the limit
 * run, every waiter is woken (none stranded), nothing is left over. */
static void test_threads_never_exceed_the_limit_nor_strand_a_waiter(void **state)
{
    (void)state;
    struct gradient_params p = params(STRESS_LIMIT, STRESS_LIMIT, STRESS_LIMIT);
    gradient_init(&stress, &p, stress_wake, 0);
    /* The limit starts full, held here until a thread waits: at least
     * that one waits whatever the scheduler does with the threads. */
    struct gradient_waiter hold[STRESS_LIMIT];
    enum gradient_refusal why;
    for (int i = 0; i < STRESS_LIMIT; i++) {
        hold[i] = (struct gradient_waiter){.deadline_ns = UINT64_MAX / 2};
        assert_int_equal(gradient_admit(&stress, &hold[i], SEC, &why), GRADIENT_ADMITTED);
    }
    pthread_t t[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_main, NULL), 0);
    while (atomic_load(&stress.nwaiting) == 0)
        sched_yield();
    for (int i = 0; i < STRESS_LIMIT; i++)
        gradient_complete(&stress, &hold[i], false, SEC);
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_true(atomic_load(&stress_max) <= STRESS_LIMIT);
    assert_true(atomic_load(&stress_waited) > 0);
    assert_int_equal(atomic_load(&stress.in_flight), 0);
    assert_int_equal(atomic_load(&stress.nwaiting), 0);
    gradient_destroy(&stress);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section),
        cmocka_unit_test(test_limit_grows_at_the_minimum_and_shrinks_when_latency_doubles),
        cmocka_unit_test(test_floor_and_ceiling),
        cmocka_unit_test(test_minimum_is_measured_again_at_the_floor),
        cmocka_unit_test(test_lower_priority_uses_a_share),
        cmocka_unit_test(test_waiters_are_admitted_in_order_and_expire),
        cmocka_unit_test(test_queue_is_bounded),
        cmocka_unit_test(test_refuses_on_the_head_only_what_admit_surely_would),
        cmocka_unit_test(test_threads_never_exceed_the_limit_nor_strand_a_waiter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
