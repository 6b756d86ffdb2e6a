#include "policy/guard.h"

#include <stdio.h>
#include <string.h>

/* Log-linear buckets over microseconds: bucket 8*k + m holds values whose
 * highest bit is k with the next three bits m (values < 8 map to
 * themselves). */
static uint32_t hist_bucket(uint64_t us)
{
    if (us < 8)
        return (uint32_t)us;
    uint32_t k = 63u - (uint32_t)__builtin_clzll(us);
    uint32_t m = (uint32_t)(us >> (k - 3)) & 7u;
    uint32_t b = 8u * (k - 2) + m;
    return b < GUARD_HIST_BUCKETS ? b : GUARD_HIST_BUCKETS - 1;
}

/* The upper bound (µs) of bucket b. */
static uint64_t hist_upper(uint32_t b)
{
    if (b < 8)
        return b + 1;
    uint32_t k = b / 8u + 2, m = b % 8u;
    return ((uint64_t)(8u + m + 1) << (k - 3));
}

void guard_init(struct guard *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
}

void guard_destroy(struct guard *g)
{
    pthread_mutex_destroy(&g->lock);
}

void guard_reset(struct guard *g, const struct route_guard *cfg, uint64_t generation)
{
    pthread_mutex_lock(&g->lock);
    g->cfg = *cfg;
    g->generation = generation;
    g->slot_ns = (uint64_t)cfg->window_s * 1000000000u / GUARD_SLOTS;
    if (!g->slot_ns)
        g->slot_ns = 1;
    g->tripped = false;
    memset(g->slots, 0, sizeof g->slots);
    pthread_mutex_unlock(&g->lock);
}

/* Sums the slots still inside the window (lock held). */
static void sum_window(const struct guard *g, uint64_t epoch, struct guard_side out[2])
{
    memset(out, 0, 2 * sizeof *out);
    for (int i = 0; i < GUARD_SLOTS; i++) {
        const struct guard_slot *s = &g->slots[i];
        if (s->epoch + GUARD_SLOTS <= epoch || s->epoch > epoch)
            continue;
        for (int side = 0; side < 2; side++) {
            out[side].requests += s->side[side].requests;
            out[side].errors += s->side[side].errors;
            for (int b = 0; b < GUARD_HIST_BUCKETS; b++)
                out[side].hist[b] += s->side[side].hist[b];
        }
    }
}

static uint64_t p99_ns(const struct guard_side *s)
{
    uint64_t non_error = 0;
    for (int b = 0; b < GUARD_HIST_BUCKETS; b++)
        non_error += s->hist[b];
    if (!non_error)
        return 0;
    uint64_t rank = (non_error * 99 + 99) / 100; /* ceil(0.99 n) */
    uint64_t seen = 0;
    for (int b = 0; b < GUARD_HIST_BUCKETS; b++) {
        seen += s->hist[b];
        if (seen >= rank)
            return hist_upper((uint32_t)b) * 1000u;
    }
    return hist_upper(GUARD_HIST_BUCKETS - 1) * 1000u;
}

static void view_of(const struct guard_side side[2], struct guard_view *v)
{
    for (int i = 0; i < 2; i++) {
        v->requests[i] = side[i].requests;
        v->errors[i] = side[i].errors;
        v->p99_ns[i] = p99_ns(&side[i]);
    }
}

/* Whether the window trips the guard (lock held). */
static bool judge(const struct guard *g, const struct guard_view *v, char *reason, size_t size)
{
    const struct route_guard *c = &g->cfg;
    if (v->requests[1] < c->min_requests)
        return false;
    double canary_err = (double)v->errors[1] / (double)v->requests[1];
    bool stable_known = v->requests[0] >= c->min_requests;
    double stable_err = stable_known ? (double)v->errors[0] / (double)v->requests[0] : 0;
    if (c->max_error_ratio >= 0 && canary_err > c->max_error_ratio && canary_err > stable_err) {
        snprintf(reason, size,
                 "error ratio %.4f > %.4f over %llu canary requests in %u s (stable %.4f over "
                 "%llu)",
                 canary_err, c->max_error_ratio, (unsigned long long)v->requests[1], c->window_s,
                 stable_err, (unsigned long long)v->requests[0]);
        return true;
    }
    if (c->max_p99_ratio > 0 && stable_known && v->p99_ns[0] && v->p99_ns[1]) {
        double ratio = (double)v->p99_ns[1] / (double)v->p99_ns[0];
        if (ratio > c->max_p99_ratio) {
            snprintf(reason, size,
                     "p99 ratio %.2f > %.2f (canary p99 %.3f ms over %llu requests, stable "
                     "%.3f ms over %llu) in %u s",
                     ratio, c->max_p99_ratio, v->p99_ns[1] / 1e6,
                     (unsigned long long)v->requests[1], v->p99_ns[0] / 1e6,
                     (unsigned long long)v->requests[0], c->window_s);
            return true;
        }
    }
    return false;
}

bool guard_record(struct guard *g, uint64_t generation, bool canary, bool error,
                  uint64_t latency_ns, uint64_t now_ns, char *reason, size_t size)
{
    bool trip = false;
    pthread_mutex_lock(&g->lock);
    if (g->generation != generation || g->tripped || !g->slot_ns)
        goto out;
    uint64_t epoch = now_ns / g->slot_ns;
    struct guard_slot *s = &g->slots[epoch % GUARD_SLOTS];
    if (s->epoch != epoch) {
        memset(s, 0, sizeof *s);
        s->epoch = epoch;
    }
    struct guard_side *side = &s->side[canary ? 1 : 0];
    side->requests++;
    if (error)
        side->errors++;
    else
        side->hist[hist_bucket(latency_ns / 1000u)]++;
    if (!canary)
        goto out;
    struct guard_side sum[2];
    sum_window(g, epoch, sum);
    struct guard_view v;
    view_of(sum, &v);
    trip = judge(g, &v, reason, size);
    g->tripped = trip;
out:
    pthread_mutex_unlock(&g->lock);
    return trip;
}

void guard_read(struct guard *g, uint64_t now_ns, struct guard_view *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g->lock);
    if (g->slot_ns) {
        struct guard_side sum[2];
        sum_window(g, now_ns / g->slot_ns, sum);
        view_of(sum, out);
    }
    pthread_mutex_unlock(&g->lock);
}
