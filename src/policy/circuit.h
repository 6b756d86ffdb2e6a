/*
 * circuit: the circuit breaker of one model version (docs/limits.md,
 * "Circuit breakers").
 *
 *   closed     calls pass; their outcomes are counted. It opens after
 *              `consecutive` failures in a row, or when failures / calls
 *              >= `ratio` over the sliding window with at least
 *              min_requests calls in it (either test off when 0).
 *   open       calls are refused (circuit_admit: CIRCUIT_OPEN, with the
 *              time left) until open_ns have passed; the first call after
 *              that turns it half-open.
 *   half-open  `probes` calls pass, one after another or together; when
 *              all succeeded it closes (counters and window cleared), the
 *              first failure opens it again. Further calls are refused
 *              meanwhile; a probe that ends neither way (cancelled, a
 *              client error) frees its place for another.
 * Only outcomes of calls admitted under the current state count (a call
 * that passed while closed and ends after the breaker opened is ignored).
 *
 * The window is CIRCUIT_SLOTS slots of window_ns / CIRCUIT_SLOTS; a slot
 * older than the window is cleared when time reaches it again.
 *
 * Every transition is a log line naming `name` and why ("breaker: digits
 * version 2 closed -> open (5 consecutive failures)") and counted.
 *
 * Time comes from the caller (monotonic now_ns). Thread safety: any
 * thread; a closed breaker admits with one atomic load, outcomes are
 * counted under a short mutex.
 */
#ifndef INFERD_POLICY_CIRCUIT_H
#define INFERD_POLICY_CIRCUIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CIRCUIT_SLOTS 10
#define CIRCUIT_NAME_MAX 320

struct circuit_params {
    uint32_t consecutive; /* 0 = off */
    double ratio;         /* 0 = off */
    uint64_t window_ns;
    uint32_t min_requests;
    uint64_t open_ns;
    uint32_t probes; /* >= 1 */
};

enum circuit_state { CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN, CIRCUIT_STATES };
const char *circuit_state_name(enum circuit_state s); /* "closed", "open", "half-open" */

enum circuit_admission { CIRCUIT_PASS, CIRCUIT_PROBE, CIRCUIT_REFUSE };

/* What a passed call carries to circuit_record(). */
struct circuit_ticket {
    uint64_t generation;
    bool probe;
};

struct circuit_slot {
    uint64_t epoch; /* which period of slot length it counts */
    uint32_t requests, failures;
};

struct circuit {
    struct circuit_params p;
    char name[CIRCUIT_NAME_MAX]; /* "digits version 2" */
    atomic_int state;
    atomic_uint_fast64_t open_until_ns;
    atomic_uint_fast64_t transitions[CIRCUIT_STATES]; /* by the state entered */

    pthread_mutex_t lock; /* everything below */
    uint64_t generation;  /* one per state entered */
    uint32_t consecutive_failures;
    uint32_t probes_out, probes_ok;
    struct circuit_slot slots[CIRCUIT_SLOTS];
};

void circuit_init(struct circuit *c, const struct circuit_params *p, const char *name);
void circuit_destroy(struct circuit *c);

/* Whether a call may pass now. CIRCUIT_REFUSE: *retry_ns is the time until
 * the breaker turns half-open (0 when it already is, its probes all out);
 * *t is set for the others. */
enum circuit_admission circuit_admit(struct circuit *c, uint64_t now_ns, struct circuit_ticket *t,
                                     uint64_t *retry_ns);

enum circuit_outcome { CIRCUIT_SUCCESS, CIRCUIT_FAILURE, CIRCUIT_NEITHER };

/* The outcome of a call that passed with ticket t. */
void circuit_record(struct circuit *c, const struct circuit_ticket *t, enum circuit_outcome o,
                    uint64_t now_ns);

/* Calls and failures in the window now (for messages and tests). */
void circuit_window(struct circuit *c, uint64_t now_ns, uint32_t *requests, uint32_t *failures);

#endif
