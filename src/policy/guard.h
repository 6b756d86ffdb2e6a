/*
 * guard: the sliding-window judge of a canary (docs/traffic.md,
 * "Automatic rollback").
 *
 * Requests the canary split routed are recorded on their side (stable or
 * canary) with their outcome and latency. The window is GUARD_SLOTS time
 * slots of window_s / GUARD_SLOTS each; a slot older than the window is
 * cleared when time reaches it again. Latencies go into a log-linear
 * histogram (8 sub-buckets per power of two: about 9 % resolution) per
 * slot, from which the p99 of each side is read.
 *
 * The guard trips, once the canary side has min_requests in the window:
 *   - error: the canary's error ratio is above max_error_ratio and above
 *     the stable side's (when that has min_requests too; a failure both
 *     sides share is not the canary's);
 *   - latency: both sides have min_requests and canary p99 / stable p99 is
 *     above max_p99_ratio.
 * An error is an answer with a status of 500 or more; cancelled requests
 * (the client left) and client errors (4xx) are not recorded.
 *
 * Thread safety: one mutex per guard; recording is a few adds under it
 * (only requests of a guarded canary pay it).
 */
#ifndef INFERD_POLICY_GUARD_H
#define INFERD_POLICY_GUARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/route.h"

#define GUARD_SLOTS 10
#define GUARD_HIST_BUCKETS 256

struct guard_side {
    uint64_t requests, errors;
    uint32_t hist[GUARD_HIST_BUCKETS];
};

struct guard_slot {
    uint64_t epoch; /* slot start / slot length; which period it holds */
    struct guard_side side[2]; /* 0 stable, 1 canary */
};

struct guard {
    pthread_mutex_t lock;
    struct route_guard cfg;
    uint64_t generation; /* of the table whose canary it judges */
    uint64_t slot_ns;
    bool tripped;
    struct guard_slot slots[GUARD_SLOTS];
};

/* What the window holds, for messages and tests. */
struct guard_view {
    uint64_t requests[2], errors[2];
    uint64_t p99_ns[2]; /* 0 without requests */
};

void guard_init(struct guard *g);
void guard_destroy(struct guard *g);

/* Starts judging a new canary (cfg, of table `generation`): clears the
 * window. */
void guard_reset(struct guard *g, const struct route_guard *cfg, uint64_t generation);

/* Records one request of table `generation` (ignored when the guard
 * judges another one, or already tripped). canary: which side; error: it
 * failed with a 5xx; latency_ns: received to answered. Returns true when
 * this request trips the guard (once per reset), with the reason written
 * to reason[size]. */
bool guard_record(struct guard *g, uint64_t generation, bool canary, bool error,
                  uint64_t latency_ns, uint64_t now_ns, char *reason, size_t size);

/* The window as it is at now_ns. */
void guard_read(struct guard *g, uint64_t now_ns, struct guard_view *out);

#endif
