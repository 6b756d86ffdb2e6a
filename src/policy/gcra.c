#include "policy/gcra.h"

#include <math.h>

void gcra_params_init(struct gcra_params *p, double rate, uint32_t burst)
{
    double interval = nearbyint(1e9 / rate);
    p->interval_ns = interval < 1 ? 1 : (uint64_t)interval;
    p->burst = burst;
    p->tolerance_ns = (uint64_t)(burst - 1) * p->interval_ns;
}

bool gcra_take_n(_Atomic uint64_t *tat, const struct gcra_params *p, uint32_t n, uint64_t now,
                 uint64_t *wait_ns)
{
    uint64_t need = (uint64_t)n * p->interval_ns;
    uint64_t room = p->tolerance_ns + p->interval_ns; /* burst × interval */
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed);
    for (;;) {
        uint64_t start = old > now ? old : now;
        if (start - now + need > room) {
            if (wait_ns)
                *wait_ns = start - now + need - room;
            return false;
        }
        if (atomic_compare_exchange_weak_explicit(tat, &old, start + need, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    }
}

bool gcra_take(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now, uint64_t *wait_ns)
{
    return gcra_take_n(tat, p, 1, now, wait_ns);
}

void gcra_give_back_n(_Atomic uint64_t *tat, const struct gcra_params *p, uint32_t n, uint64_t now)
{
    uint64_t back_by = (uint64_t)n * p->interval_ns;
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed);
    for (;;) {
        if (old <= now)
            return; /* already full: the tokens refilled meanwhile */
        uint64_t back = old - now > back_by ? old - back_by : now;
        if (atomic_compare_exchange_weak_explicit(tat, &old, back, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
}

void gcra_give_back(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now)
{
    gcra_give_back_n(tat, p, 1, now);
}

uint32_t gcra_remaining(uint64_t tat, const struct gcra_params *p, uint64_t now)
{
    if (tat <= now)
        return p->burst;
    uint64_t ahead = tat - now; /* <= tolerance + interval for a tat gcra_take set */
    uint64_t room = p->tolerance_ns + p->interval_ns;
    return ahead >= room ? 0 : (uint32_t)((room - ahead) / p->interval_ns);
}

uint64_t gcra_until_full_ns(uint64_t tat, uint64_t now)
{
    return tat > now ? tat - now : 0;
}
