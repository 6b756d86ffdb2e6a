/*
 * gradient: the adaptive concurrency limit of one model version
 * (docs/limits.md, "Adaptive concurrency"), in the spirit of Envoy's
 * adaptive concurrency filter and Netflix's concurrency-limits gradient.
 *
 * Admission: a call runs when fewer than the limit are in flight (one CAS,
 * no lock); a call of a lower priority level only below
 * max(1, floor(limit * low_share)), so lower levels are refused first as
 * the limit fills. Over the limit a call that may queue (params.queue and
 * a deadline whose remaining budget exceeds the sampled latency) waits in
 * a FIFO of GRADIENT_QUEUE_MAX; the others are refused.
 *
 * Measuring: each successful call's latency (completion - admission) is a
 * sample. Every sample window (or GRADIENT_SAMPLES samples) the sampled
 * latency is the window's p90 and the limit becomes
 *   clamp(limit * clamp(min_rtt * (1 + tolerance) / sampled, 0.5, 2) + sqrt(limit), min, max)
 * The minimum latency min_rtt is measured as Envoy does: the limit is held
 * at `min` until min_rtt_samples calls admitted since then completed; their
 * p90 is min_rtt and the limit goes back to where it was (`initial` after
 * the first measurement, which starts at once). Measurements repeat every
 * min_rtt_interval plus a random jitter of up to 15 %.
 *
 * Waiters. A queued waiter leaves the FIFO, in order, at the first
 * admission or completion that finds its client gone (GRADIENT_CANCELLED),
 * its budget no longer above the sampled latency (GRADIENT_EXPIRED: even
 * with a slot free, it would likely miss its deadline), or it admissible
 * (GRADIENT_ADMITTED); wake(w) then tells its owner,
 * on the thread that decided it, outside the lock. Completions take the
 * lock and admissions that queue take it too, so a waiter always sees a
 * later completion: it cannot be stranded (with none in flight, it is
 * admissible).
 *
 * Time comes from the caller (now_ns: a monotonic clock), so tests drive
 * it. Thread safety: any thread; one short mutex on completion and on
 * queueing.
 */
#ifndef INFERD_POLICY_GRADIENT_H
#define INFERD_POLICY_GRADIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GRADIENT_SAMPLES 128   /* per window, and at most per min_rtt measurement */
#define GRADIENT_QUEUE_MAX 256 /* waiters per limiter */
#define GRADIENT_LIMIT_MAX 100000

struct gradient_params {
    uint32_t min, max, initial; /* 1 <= min <= initial <= max */
    uint64_t window_ns;
    uint64_t min_rtt_interval_ns;
    uint32_t min_rtt_samples; /* 1 .. GRADIENT_SAMPLES */
    double tolerance;         /* >= 0 */
    double low_share;         /* (0, 1] */
    bool queue;
};

enum gradient_verdict {
    GRADIENT_WAITING,
    GRADIENT_ADMITTED,
    GRADIENT_EXPIRED,
    GRADIENT_CANCELLED,
};

/* Why a call was not admitted (also the metric's reason label). */
enum gradient_refusal {
    GRADIENT_REFUSED_LIMIT, /* over the limit, could not wait */
    GRADIENT_REFUSED_QUEUE_FULL,
    GRADIENT_REFUSED_EXPIRED, /* waited; its budget ran out */
    GRADIENT_REFUSALS
};
const char *gradient_refusal_name(enum gradient_refusal r); /* "limit", "queue_full", "expired" */

/* One call, owned by its caller (e.g. in the call's arena). */
struct gradient_waiter {
    /* Set by the caller before gradient_admit(). */
    uint64_t deadline_ns;         /* absolute; 0 = none (never waits) */
    bool low;                     /* of a lower priority level */
    const atomic_bool *cancelled; /* NULL: never */
    /* Set by the gradient. */
    enum gradient_verdict verdict;
    uint64_t admitted_ns;
    uint32_t epoch; /* of the measurement it was admitted in */
};

struct gradient {
    struct gradient_params p;
    void (*wake)(struct gradient_waiter *w);
    atomic_uint limit;
    atomic_uint in_flight;
    atomic_uint nwaiting;
    atomic_uint_fast64_t min_rtt_ns; /* 0 until measured */
    atomic_uint_fast64_t sampled_ns; /* 0 until a window closed */
    atomic_uint_fast64_t refused[GRADIENT_REFUSALS];

    pthread_mutex_t lock; /* everything below */
    bool measuring;
    atomic_uint epoch;
    uint32_t deferred_limit; /* restored when a measurement ends */
    uint64_t next_measure_ns;
    uint64_t window_start_ns;
    uint64_t samples[GRADIENT_SAMPLES];
    uint32_t nsamples;
    uint64_t rng;
    struct gradient_waiter *queue[GRADIENT_QUEUE_MAX]; /* nwaiting, in arrival order */
};

/* p must be valid (see struct gradient_params); wake: see the top. */
void gradient_init(struct gradient *g, const struct gradient_params *p,
                   void (*wake)(struct gradient_waiter *w), uint64_t now_ns);
void gradient_destroy(struct gradient *g); /* no waiter left */

/* GRADIENT_ADMITTED (w runs: call gradient_complete() when it ends),
 * GRADIENT_WAITING (w is queued: wake() will say), or, refused,
 * GRADIENT_EXPIRED with *why. */
enum gradient_verdict gradient_admit(struct gradient *g, struct gradient_waiter *w, uint64_t now_ns,
                                     enum gradient_refusal *why);

/* Whether gradient_admit would refuse a call now whatever its priority
 * level and deadline turn out to be (so also one of the highest level
 * with all the time it wants): the limit is reached and the call could
 * not wait (params.queue off, or GRADIENT_QUEUE_MAX waiting). Then *why
 * and the refusal is counted, as gradient_admit counts it. Takes no slot:
 * for refusing a call before its body (which holds its priority and
 * deadline) is read; gradient_admit decides for the others. */
bool gradient_refuses(struct gradient *g, enum gradient_refusal *why);

/* An admitted call ended; success: it answered without error (its latency
 * is a sample). Wakes the waiters it lets go. */
void gradient_complete(struct gradient *g, const struct gradient_waiter *w, bool success,
                       uint64_t now_ns);

/* The latency to expect, for Retry-After: the sampled latency, or min_rtt
 * before the first window, or 0. */
uint64_t gradient_expected_ns(const struct gradient *g);

#endif
