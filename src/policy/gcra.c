#include "policy/gcra.h"

#include <math.h>

void gcra_params_init(struct gcra_params *p, double rate, uint32_t burst)
{
    double interval = nearbyint(1e9 / rate);
    p->interval_ns = interval < 1 ? 1 : (uint64_t)interval;
    p->burst = burst;
    p->tolerance_ns = (uint64_t)(burst - 1) * p->interval_ns;
}

bool gcra_take(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now, uint64_t *wait_ns)
{
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed);
    for (;;) {
        uint64_t start = old > now ? old : now;
        if (start - now > p->tolerance_ns) {
            if (wait_ns)
                *wait_ns = start - now - p->tolerance_ns;
            return false;
        }
        if (atomic_compare_exchange_weak_explicit(tat, &old, start + p->interval_ns,
                                                  memory_order_relaxed, memory_order_relaxed))
            return true;
    }
}

void gcra_give_back(_Atomic uint64_t *tat, const struct gcra_params *p, uint64_t now)
{
    uint64_t old = atomic_load_explicit(tat, memory_order_relaxed);
    for (;;) {
        if (old <= now)
            return; /* already full: the token refilled meanwhile */
        uint64_t back = old - now > p->interval_ns ? old - p->interval_ns : now;
        if (atomic_compare_exchange_weak_explicit(tat, &old, back, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
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
