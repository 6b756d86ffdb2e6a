#include "policy/circuit.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

const char *circuit_state_name(enum circuit_state s)
{
    static const char *const names[CIRCUIT_STATES] = {"closed", "open", "half-open"};
    return (unsigned)s < CIRCUIT_STATES ? names[s] : "closed";
}

void circuit_init(struct circuit *c, const struct circuit_params *p, const char *name)
{
    memset(c, 0, sizeof *c);
    c->p = *p;
    snprintf(c->name, sizeof c->name, "%s", name);
    atomic_init(&c->state, CIRCUIT_CLOSED);
    c->generation = 1;
    pthread_mutex_init(&c->lock, NULL);
}

void circuit_destroy(struct circuit *c)
{
    pthread_mutex_destroy(&c->lock);
}

static uint64_t slot_ns(const struct circuit *c)
{
    uint64_t ns = c->p.window_ns / CIRCUIT_SLOTS;
    return ns ? ns : 1;
}

/* The window's totals at now (lock held). */
static void window_sum(const struct circuit *c, uint64_t now_ns, uint32_t *requests,
                       uint32_t *failures)
{
    uint64_t epoch = now_ns / slot_ns(c);
    *requests = *failures = 0;
    for (uint32_t i = 0; i < CIRCUIT_SLOTS; i++) {
        const struct circuit_slot *s = &c->slots[i];
        if (s->epoch + CIRCUIT_SLOTS > epoch) {
            *requests += s->requests;
            *failures += s->failures;
        }
    }
}

void circuit_window(struct circuit *c, uint64_t now_ns, uint32_t *requests, uint32_t *failures)
{
    pthread_mutex_lock(&c->lock);
    window_sum(c, now_ns, requests, failures);
    pthread_mutex_unlock(&c->lock);
}

/* Lock held. */
static void enter(struct circuit *c, enum circuit_state to, uint64_t now_ns, const char *why)
{
    enum circuit_state from = atomic_load_explicit(&c->state, memory_order_relaxed);
    c->generation++;
    c->probes_out = c->probes_ok = 0;
    if (to == CIRCUIT_OPEN)
        atomic_store_explicit(&c->open_until_ns, now_ns + c->p.open_ns, memory_order_relaxed);
    if (to == CIRCUIT_CLOSED) {
        c->consecutive_failures = 0;
        memset(c->slots, 0, sizeof c->slots);
    }
    atomic_store_explicit(&c->state, to, memory_order_release);
    atomic_fetch_add_explicit(&c->transitions[to], 1, memory_order_relaxed);
    if (to == CIRCUIT_CLOSED)
        log_info("breaker: %s %s -> %s (%s)", c->name, circuit_state_name(from),
                 circuit_state_name(to), why);
    else
        log_warn("breaker: %s %s -> %s (%s)", c->name, circuit_state_name(from),
                 circuit_state_name(to), why);
}

enum circuit_admission circuit_admit(struct circuit *c, uint64_t now_ns, struct circuit_ticket *t,
                                     uint64_t *retry_ns)
{
    enum circuit_admission a = CIRCUIT_PASS;
    int state = atomic_load_explicit(&c->state, memory_order_acquire);
    uint64_t until = atomic_load_explicit(&c->open_until_ns, memory_order_relaxed);
    if (state == CIRCUIT_OPEN && now_ns < until) {
        *retry_ns = until - now_ns;
        return CIRCUIT_REFUSE;
    }
    pthread_mutex_lock(&c->lock);
    state = atomic_load_explicit(&c->state, memory_order_relaxed);
    if (state == CIRCUIT_OPEN) {
        until = atomic_load_explicit(&c->open_until_ns, memory_order_relaxed);
        if (now_ns < until) {
            *retry_ns = until - now_ns;
            a = CIRCUIT_REFUSE;
            goto out;
        }
        char why[64];
        snprintf(why, sizeof why, "open for %llu ms",
                 (unsigned long long)(c->p.open_ns / 1000000u));
        enter(c, CIRCUIT_HALF_OPEN, now_ns, why);
        state = CIRCUIT_HALF_OPEN;
    }
    if (state == CIRCUIT_HALF_OPEN) {
        if (c->probes_out >= c->p.probes) {
            *retry_ns = 0;
            a = CIRCUIT_REFUSE;
            goto out;
        }
        c->probes_out++;
        a = CIRCUIT_PROBE;
    }
    t->generation = c->generation;
    t->probe = a == CIRCUIT_PROBE;
out:
    pthread_mutex_unlock(&c->lock);
    return a;
}

/* A closed breaker's outcome (lock held). */
static void record_closed(struct circuit *c, bool failure, uint64_t now_ns)
{
    uint64_t epoch = now_ns / slot_ns(c);
    struct circuit_slot *s = &c->slots[epoch % CIRCUIT_SLOTS];
    if (s->epoch != epoch) {
        s->epoch = epoch;
        s->requests = s->failures = 0;
    }
    s->requests++;
    s->failures += failure;
    c->consecutive_failures = failure ? c->consecutive_failures + 1 : 0;
    char why[128];
    if (c->p.consecutive && c->consecutive_failures >= c->p.consecutive) {
        snprintf(why, sizeof why, "%u consecutive failures", c->consecutive_failures);
        enter(c, CIRCUIT_OPEN, now_ns, why);
        return;
    }
    if (c->p.ratio <= 0 || !failure)
        return;
    uint32_t requests, failures;
    window_sum(c, now_ns, &requests, &failures);
    if (requests >= c->p.min_requests && (double)failures >= c->p.ratio * requests) {
        snprintf(why, sizeof why, "%u of %u calls failed in %llu s", failures, requests,
                 (unsigned long long)(c->p.window_ns / 1000000000u));
        enter(c, CIRCUIT_OPEN, now_ns, why);
    }
}

void circuit_record(struct circuit *c, const struct circuit_ticket *t, enum circuit_outcome o,
                    uint64_t now_ns)
{
    pthread_mutex_lock(&c->lock);
    if (t->generation != c->generation)
        goto out; /* admitted under a state that is over */
    if (!t->probe) {
        if (o != CIRCUIT_NEITHER)
            record_closed(c, o == CIRCUIT_FAILURE, now_ns);
        goto out;
    }
    if (o == CIRCUIT_NEITHER) {
        c->probes_out--;
    } else if (o == CIRCUIT_FAILURE) {
        enter(c, CIRCUIT_OPEN, now_ns, "a probe failed");
    } else if (++c->probes_ok == c->p.probes) {
        char why[64];
        snprintf(why, sizeof why, "%u probe%s succeeded", c->p.probes, c->p.probes == 1 ? "" : "s");
        enter(c, CIRCUIT_CLOSED, now_ns, why);
    }
out:
    pthread_mutex_unlock(&c->lock);
}
