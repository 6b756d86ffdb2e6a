/* Batch sizes a model version runs fastest per sample; see learn.h. */
#include "sched/learn.h"

#include <string.h>

uint32_t learn_bucket_of(int64_t samples)
{
    if (samples <= 1)
        return 0;
    return (uint32_t)(64 - __builtin_clzll((unsigned long long)(samples - 1)));
}

uint32_t learn_bound(const struct learn *l, uint32_t i)
{
    uint64_t b = (uint64_t)1 << i;
    return b < l->max_batch ? (uint32_t)b : l->max_batch;
}

void learn_init(struct learn *l, uint32_t max_batch)
{
    memset(l, 0, sizeof *l);
    l->max_batch = max_batch ? max_batch : 1;
    l->nbuckets = learn_bucket_of(l->max_batch) + 1;
}

static bool measured(const struct learn_bucket *b)
{
    return b->runs >= LEARN_MIN_RUNS;
}

/* The preferred size the classes measured so far call for (see learn.h). */
static uint32_t choose(const struct learn *l)
{
    uint64_t best = 0;
    for (uint32_t i = 0; i < l->nbuckets; i++)
        if (measured(&l->b[i]) && (!best || l->b[i].low_x64 < best))
            best = l->b[i].low_x64;
    if (!best)
        return 0;
    uint32_t pick = 0, largest = 0;
    for (uint32_t i = 0; i < l->nbuckets; i++) {
        if (!measured(&l->b[i]))
            continue;
        largest = i;
        if (l->b[i].low_x64 <= best + best / LEARN_TOLERANCE_DIV)
            pick = i;
    }
    if (pick == largest) /* nothing larger measured (and slower) */
        return 0;
    /* A larger class as fast as the best is taken at once; the current one
     * is given up for a smaller one only when it is clearly slower. */
    uint32_t cur = l->preferred ? learn_bucket_of(l->preferred) : 0;
    if (l->preferred && pick < cur && cur < largest && measured(&l->b[cur]) &&
        l->b[cur].low_x64 <= best + 2 * best / LEARN_TOLERANCE_DIV)
        return l->preferred;
    return learn_bound(l, pick);
}

bool learn_note(struct learn *l, int64_t samples, uint64_t ns)
{
    if (samples < 1 || (uint64_t)samples > l->max_batch || !ns)
        return false;
    struct learn_bucket *b = &l->b[learn_bucket_of(samples)];
    uint64_t per = ns * 64u / (uint64_t)samples;
    if (!per)
        per = 1;
    /* Down at once, up by at most 1/32 a run: a stall adds time (even ten
     * times a run's), it never removes any; a lasting change still shows
     * within tens of runs. */
    if (!b->low_x64 || per < b->low_x64)
        b->low_x64 = per;
    else
        b->low_x64 += (per - b->low_x64 < b->low_x64 ? per - b->low_x64 : b->low_x64) >> 5;
    learn_ewma(&b->typical_x64, per, 3);
    if (b->runs < UINT32_MAX)
        b->runs++;
    b->last_run = ++l->batches;
    uint32_t before = l->preferred;
    l->preferred = choose(l);
    return l->preferred != before;
}

uint32_t learn_cap(const struct learn *l, int64_t head, bool full, bool *exploring)
{
    *exploring = false;
    if (!full || l->batches - l->explored < LEARN_EXPLORE_EVERY)
        return l->preferred;
    uint32_t pick = LEARN_BUCKETS;
    for (uint32_t i = 0; i < l->nbuckets; i++) {
        const struct learn_bucket *b = &l->b[i];
        /* Not below the request the batch starts with. */
        if ((int64_t)learn_bound(l, i) < head)
            continue;
        if (measured(b) && l->batches - b->last_run < LEARN_STALE_BATCHES)
            continue;
        if (pick == LEARN_BUCKETS || b->runs < l->b[pick].runs)
            pick = i;
    }
    if (pick == LEARN_BUCKETS)
        return l->preferred;
    *exploring = true;
    uint32_t upper = learn_bound(l, pick);
    return upper < l->max_batch ? upper : 0;
}

void learn_explored(struct learn *l)
{
    l->explored = l->batches;
}

uint64_t learn_predict_ns(const struct learn *l, int64_t samples)
{
    if (samples < 1 || (uint64_t)samples > l->max_batch)
        return 0;
    const struct learn_bucket *b = &l->b[learn_bucket_of(samples)];
    return b->runs >= 2 ? b->typical_x64 * (uint64_t)samples / 64u : 0;
}
