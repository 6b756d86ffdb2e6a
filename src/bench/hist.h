/*
 * hist: a latency histogram in the style of HdrHistogram — fixed memory,
 * O(1) record, bounded relative error.
 *
 * Buckets are log-linear: values below 2 * HIST_SUB_BUCKETS are counted
 * exactly (one bucket per value); above that, every power-of-two range
 * [2^k, 2^(k+1)) is split into HIST_SUB_BUCKETS (128) equal sub-buckets, so a
 * bucket is at most 1/128 of its lowest value wide. A percentile is reported
 * as the middle of its bucket, which is within 1/256 (0.4 %) of the exact
 * order statistic; count, min, max and the sum behind the mean are exact.
 *
 * The unit is the caller's; `inferd bench` records nanoseconds, so the
 * histogram covers 1 ns .. HIST_MAX_VALUE (2^40 - 1 ns, about 18 minutes),
 * comfortably more than the required 1 µs .. 100 s. Larger values are
 * counted in the last bucket (max stays exact).
 *
 * A struct hist is about 34 KiB and is used in place (no allocation). It is
 * not thread-safe: give each thread its own and hist_merge() them at the end.
 */
#ifndef INFERD_BENCH_HIST_H
#define INFERD_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB_BUCKETS (1u << HIST_SUB_BITS) /* linear sub-buckets per power of two */
#define HIST_MAX_BITS 40
#define HIST_MAX_VALUE ((UINT64_C(1) << HIST_MAX_BITS) - 1)
/* 2*SUB exact buckets, then SUB per power of two from 2^(SUB_BITS+1) up. */
#define HIST_BUCKETS ((HIST_MAX_BITS - HIST_SUB_BITS + 1) * HIST_SUB_BUCKETS)

struct hist {
    uint64_t count;
    uint64_t sum; /* of recorded values (exact; wraps only past 2^64) */
    uint64_t min; /* UINT64_MAX while empty */
    uint64_t max;
    uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
/* Counts one value. Never fails, never allocates. */
void hist_record(struct hist *h, uint64_t v);
/* Adds every count of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value at percentile p (0..100): the middle of the bucket holding the
 * ceil(p/100 * count)-th smallest value (the smallest for p = 0), clamped to
 * [min, max]; p = 100 gives max exactly. 0 when empty. */
uint64_t hist_percentile(const struct hist *h, double p);
/* 0 when empty. */
double hist_mean(const struct hist *h);
uint64_t hist_min(const struct hist *h);
uint64_t hist_max(const struct hist *h);

/* Bucket arithmetic, exposed for tests: the bucket of v and the range
 * [lo, hi] of values that fall into bucket i. */
uint32_t hist_bucket_of(uint64_t v);
void hist_bucket_range(uint32_t i, uint64_t *lo, uint64_t *hi);

#endif
