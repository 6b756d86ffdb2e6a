#include "bench/hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

uint32_t hist_bucket_of(uint64_t v)
{
    if (v > HIST_MAX_VALUE)
        v = HIST_MAX_VALUE;
    if (v < 2 * HIST_SUB_BUCKETS)
        return (uint32_t)v;
    /* v in [2^e, 2^(e+1)) with e > HIST_SUB_BITS: keep the top SUB_BITS+1
     * bits, so v >> shift lies in [SUB, 2*SUB). */
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v);
    uint32_t shift = e - HIST_SUB_BITS;
    return shift * HIST_SUB_BUCKETS + (uint32_t)(v >> shift);
}

void hist_bucket_range(uint32_t i, uint64_t *lo, uint64_t *hi)
{
    if (i < 2 * HIST_SUB_BUCKETS) {
        *lo = *hi = i;
        return;
    }
    uint32_t shift = i / HIST_SUB_BUCKETS - 1;
    uint64_t top = i % HIST_SUB_BUCKETS + HIST_SUB_BUCKETS;
    *lo = top << shift;
    *hi = *lo + (UINT64_C(1) << shift) - 1;
}

void hist_record(struct hist *h, uint64_t v)
{
    h->buckets[hist_bucket_of(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    if (src->count == 0)
        return;
    for (uint32_t i = 0; i < HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (!(p > 0)) /* also NaN */
        return h->min;
    if (p >= 100)
        return h->max;
    double want = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++; /* ceil */
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen < rank)
            continue;
        uint64_t lo, hi;
        hist_bucket_range(i, &lo, &hi);
        uint64_t mid = lo + (hi - lo) / 2;
        if (mid < h->min)
            mid = h->min;
        if (mid > h->max)
            mid = h->max;
        return mid;
    }
    return h->max; /* unreachable: the buckets sum to count */
}

double hist_mean(const struct hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}

uint64_t hist_min(const struct hist *h)
{
    return h->count ? h->min : 0;
}

uint64_t hist_max(const struct hist *h)
{
    return h->max;
}
