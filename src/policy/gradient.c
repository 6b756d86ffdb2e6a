#include "policy/gradient.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JITTER_PERCENT 15

const char *gradient_refusal_name(enum gradient_refusal r)
{
    static const char *const names[GRADIENT_REFUSALS] = {"limit", "queue_full", "expired"};
    return (unsigned)r < GRADIENT_REFUSALS ? names[r] : "limit";
}

static uint64_t next_random(struct gradient *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

/* now + the interval + up to JITTER_PERCENT of it (lock held). */
static uint64_t next_measurement(struct gradient *g, uint64_t now_ns)
{
    uint64_t interval = g->p.min_rtt_interval_ns;
    return now_ns + interval + next_random(g) % (interval / 100 * JITTER_PERCENT + 1);
}

void gradient_init(struct gradient *g, const struct gradient_params *p,
                   void (*wake)(struct gradient_waiter *w), uint64_t now_ns)
{
    memset(g, 0, sizeof *g);
    g->p = *p;
    g->wake = wake;
    pthread_mutex_init(&g->lock, NULL);
    g->rng = (now_ns ^ (uint64_t)(uintptr_t)g) | 1;
    /* The first minimum is measured at once, at the floor. */
    g->measuring = true;
    atomic_init(&g->epoch, 1);
    g->deferred_limit = p->initial;
    g->window_start_ns = now_ns;
    atomic_init(&g->limit, p->min);
}

void gradient_destroy(struct gradient *g)
{
    pthread_mutex_destroy(&g->lock);
}

uint64_t gradient_expected_ns(const struct gradient *g)
{
    uint64_t s = atomic_load_explicit(&g->sampled_ns, memory_order_relaxed);
    return s ? s : atomic_load_explicit(&g->min_rtt_ns, memory_order_relaxed);
}

/* The share of the limit w may use. */
static uint32_t usable(const struct gradient *g, const struct gradient_waiter *w)
{
    uint32_t limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
    if (!w->low)
        return limit;
    uint32_t n = (uint32_t)(limit * g->p.low_share);
    return n ? n : 1;
}

static bool try_acquire(struct gradient *g, struct gradient_waiter *w, uint64_t now_ns)
{
    uint32_t n = atomic_load_explicit(&g->in_flight, memory_order_relaxed);
    do {
        if (n >= usable(g, w))
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&g->in_flight, &n, n + 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    w->admitted_ns = now_ns;
    w->epoch = atomic_load_explicit(&g->epoch, memory_order_relaxed);
    w->verdict = GRADIENT_ADMITTED;
    return true;
}

/* Whether a waiter's remaining budget no longer covers the expected
 * latency. */
static bool out_of_budget(const struct gradient *g, const struct gradient_waiter *w,
                          uint64_t now_ns)
{
    return now_ns >= w->deadline_ns || w->deadline_ns - now_ns <= gradient_expected_ns(g);
}

/* Lets go, in FIFO order, of the waiters that can run, ran out of budget
 * or were cancelled; returns how many, in woken[] (lock held). */
static uint32_t scan(struct gradient *g, uint64_t now_ns, struct gradient_waiter **woken)
{
    uint32_t n = atomic_load_explicit(&g->nwaiting, memory_order_relaxed);
    uint32_t kept = 0, out = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct gradient_waiter *w = g->queue[i];
        if (w->cancelled && atomic_load_explicit(w->cancelled, memory_order_relaxed)) {
            w->verdict = GRADIENT_CANCELLED;
        } else if (out_of_budget(g, w, now_ns)) {
            /* Even with a slot free now, it would likely miss its deadline. */
            w->verdict = GRADIENT_EXPIRED;
            atomic_fetch_add_explicit(&g->refused[GRADIENT_REFUSED_EXPIRED], 1,
                                      memory_order_relaxed);
        } else if (!try_acquire(g, w, now_ns)) {
            g->queue[kept++] = w;
            continue;
        }
        woken[out++] = w;
    }
    atomic_store_explicit(&g->nwaiting, kept, memory_order_relaxed);
    return out;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The p90 of the samples (n > 0). */
static uint64_t p90(const uint64_t *samples, uint32_t n)
{
    uint64_t sorted[GRADIENT_SAMPLES];
    memcpy(sorted, samples, n * sizeof sorted[0]);
    qsort(sorted, n, sizeof sorted[0], cmp_u64);
    return sorted[(n * 9 + 9) / 10 - 1];
}

static void update_limit(struct gradient *g, uint64_t sampled_ns)
{
    double min_rtt = (double)atomic_load_explicit(&g->min_rtt_ns, memory_order_relaxed);
    double limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
    double gradient = min_rtt * (1.0 + g->p.tolerance) / (double)sampled_ns;
    gradient = gradient < 0.5 ? 0.5 : gradient > 2.0 ? 2.0 : gradient;
    double next = limit * gradient + sqrt(limit);
    next = next < g->p.min ? g->p.min : next > g->p.max ? g->p.max : next;
    atomic_store_explicit(&g->limit, (uint32_t)next, memory_order_relaxed);
}

/* One successful call's latency (lock held). */
static void record(struct gradient *g, const struct gradient_waiter *w, uint64_t now_ns)
{
    uint64_t latency = now_ns > w->admitted_ns ? now_ns - w->admitted_ns : 1;
    if (g->measuring) {
        /* Only calls admitted at the floor measure the minimum. */
        if (w->epoch != atomic_load_explicit(&g->epoch, memory_order_relaxed))
            return;
        g->samples[g->nsamples++] = latency;
        if (g->nsamples < g->p.min_rtt_samples)
            return;
        atomic_store_explicit(&g->min_rtt_ns, p90(g->samples, g->nsamples), memory_order_relaxed);
        g->measuring = false;
        atomic_store_explicit(&g->limit, g->deferred_limit, memory_order_relaxed);
        g->nsamples = 0;
        g->window_start_ns = now_ns;
        g->next_measure_ns = next_measurement(g, now_ns);
        return;
    }
    if (g->nsamples < GRADIENT_SAMPLES)
        g->samples[g->nsamples++] = latency;
    if (now_ns - g->window_start_ns < g->p.window_ns && g->nsamples < GRADIENT_SAMPLES)
        return;
    uint64_t sampled = p90(g->samples, g->nsamples);
    atomic_store_explicit(&g->sampled_ns, sampled, memory_order_relaxed);
    update_limit(g, sampled);
    g->nsamples = 0;
    g->window_start_ns = now_ns;
    if (now_ns >= g->next_measure_ns) {
        g->measuring = true;
        g->deferred_limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
        atomic_store_explicit(&g->limit, g->p.min, memory_order_relaxed);
        atomic_fetch_add_explicit(&g->epoch, 1, memory_order_relaxed);
    }
}

static void wake_all(struct gradient *g, struct gradient_waiter **woken, uint32_t n,
                     const struct gradient_waiter *except)
{
    for (uint32_t i = 0; i < n; i++)
        if (woken[i] != except)
            g->wake(woken[i]);
}

enum gradient_verdict gradient_admit(struct gradient *g, struct gradient_waiter *w, uint64_t now_ns,
                                     enum gradient_refusal *why)
{
    w->verdict = GRADIENT_WAITING;
    bool can_wait = g->p.queue && w->deadline_ns;
    /* Waiters go first: a call that could wait does not overtake them. */
    if ((!can_wait || atomic_load_explicit(&g->nwaiting, memory_order_relaxed) == 0) &&
        try_acquire(g, w, now_ns))
        return GRADIENT_ADMITTED;
    if (!can_wait || out_of_budget(g, w, now_ns)) {
        *why = GRADIENT_REFUSED_LIMIT;
        atomic_fetch_add_explicit(&g->refused[*why], 1, memory_order_relaxed);
        return GRADIENT_EXPIRED;
    }
    struct gradient_waiter *woken[GRADIENT_QUEUE_MAX];
    pthread_mutex_lock(&g->lock);
    uint32_t n = atomic_load_explicit(&g->nwaiting, memory_order_relaxed);
    if (n == GRADIENT_QUEUE_MAX) {
        pthread_mutex_unlock(&g->lock);
        *why = GRADIENT_REFUSED_QUEUE_FULL;
        atomic_fetch_add_explicit(&g->refused[*why], 1, memory_order_relaxed);
        return GRADIENT_EXPIRED;
    }
    g->queue[n] = w;
    atomic_store_explicit(&g->nwaiting, n + 1, memory_order_relaxed);
    /* A slot may have come free since the first try. */
    uint32_t nwoken = scan(g, now_ns, woken);
    enum gradient_verdict mine = w->verdict; /* w may be woken once the lock is gone */
    pthread_mutex_unlock(&g->lock);
    wake_all(g, woken, nwoken, w);
    *why = GRADIENT_REFUSED_EXPIRED;
    return mine;
}

bool gradient_refuses(struct gradient *g, enum gradient_refusal *why)
{
    uint32_t limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
    if (atomic_load_explicit(&g->in_flight, memory_order_relaxed) < limit)
        return false;
    if (!g->p.queue)
        *why = GRADIENT_REFUSED_LIMIT;
    else if (atomic_load_explicit(&g->nwaiting, memory_order_relaxed) >= GRADIENT_QUEUE_MAX)
        *why = GRADIENT_REFUSED_QUEUE_FULL;
    else
        return false;
    atomic_fetch_add_explicit(&g->refused[*why], 1, memory_order_relaxed);
    return true;
}

void gradient_complete(struct gradient *g, const struct gradient_waiter *w, bool success,
                       uint64_t now_ns)
{
    struct gradient_waiter *woken[GRADIENT_QUEUE_MAX];
    uint32_t nwoken = 0;
    pthread_mutex_lock(&g->lock);
    atomic_fetch_sub_explicit(&g->in_flight, 1, memory_order_acq_rel);
    if (success)
        record(g, w, now_ns);
    if (atomic_load_explicit(&g->nwaiting, memory_order_relaxed))
        nwoken = scan(g, now_ns, woken);
    pthread_mutex_unlock(&g->lock);
    wake_all(g, woken, nwoken, NULL);
}
