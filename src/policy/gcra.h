/*
 * gcra: one token bucket as one atomic 64-bit word, by the generic cell
 * rate algorithm (GCRA, "virtual scheduling").
 *
 * The word is the bucket's theoretical arrival time (tat, in ns of
 * clock_now_ns()): the time at which the bucket would be full again if no
 * call came. With interval = 1 s / rate and tolerance = (burst - 1) ×
 * interval, a call at `now` is admitted when tat - now <= tolerance (a
 * tat in the past counts as now), and then tat becomes max(tat, now) +
 * interval. So a full bucket admits `burst` calls at once, then one per
 * interval: it refills continuously, with no timer and no refill thread.
 * Taking n tokens at once (token budgets) moves tat n intervals.
 * A tat of 0 is a full bucket.
 *
 * Every function is lock-free (a compare-and-swap loop that only retries
 * when another thread changed the word meanwhile), allocates nothing, and
 * takes the time as an argument (tests inject a clock). Thread: any.
 */
#ifndef INFERD_POLICY_GCRA_H
#define INFERD_POLICY_GCRA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The shape of a bucket, fixed when its rule is parsed. */
struct gcra_params {
    uint64_t interval_ns;  /* 1e9 / rate, rounded, >= 1 */
    uint64_t tolerance_ns; /* (burst - 1) × interval_ns */
    uint32_t burst;
};

/* rate: tokens per second (> 0); burst >= 1. The caller keeps
 * burst × 1e9 / rate within 2^62 (ratelimit.h's bounds do). */
void gcra_params_init(struct gcra_params *p, double rate, uint32_t burst);

/* Takes n tokens at once at now (n <= burst; n = 0 takes nothing): when
 * max(tat, now) + n × interval - now <= burst × interval, tat becomes
 * max(tat, now) + n × interval. true: taken. false: refused, nothing
 * changed, and *wait_ns (if not NULL) is how long until the n tokens are
 * there (> 0). gcra_take is n = 1. */
bool gcra_take_n(_Atomic uint64_t *tat, const struct gcra_params *p, uint32_t n, uint64_t now,
                 uint64_t *wait_ns);
bool gcra_take(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now, uint64_t *wait_ns);
/* Gives back n tokens taken at or before now (tat moves back n intervals,
 * but never below now: a bucket cannot hold more than it did).
 * gcra_give_back is n = 1. */
void gcra_give_back_n(_Atomic uint64_t *tat, const struct gcra_params *p, uint32_t n, uint64_t now);
void gcra_give_back(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now);

/* The tokens left at now (0 .. burst, rounded down), and how long until
 * the bucket is full again (0 when it is). */
uint32_t gcra_remaining(uint64_t tat, const struct gcra_params *p, uint64_t now);
uint64_t gcra_until_full_ns(uint64_t tat, uint64_t now);

#endif
