#include "policy/tenant_slots.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "base/mem.h"

/* A slot: this head, then the payload. key: the tenant name's hash, 0 =
 * free; name: written by the call that claimed the slot, readable once
 * `named`. */
struct head {
    _Atomic uint64_t key;
    atomic_bool named;
    char name[TENANT_SLOTS_NAME_MAX];
};

#define ALIGN alignof(max_align_t)
#define ROUND_UP(n) (((n) + ALIGN - 1) / ALIGN * ALIGN)

struct tenant_slots {
    size_t stride; /* bytes per slot: the head and the payload, rounded up */
    atomic_uint tenants;
    atomic_bool overflowed;
    unsigned char *slots; /* TENANT_SLOTS_SLOTS × stride */
};

static struct head *slot(struct tenant_slots *t, uint32_t i)
{
    return (struct head *)(void *)(t->slots + (size_t)i * t->stride);
}

static void *payload(struct head *h)
{
    return (unsigned char *)h + ROUND_UP(sizeof *h);
}

struct tenant_slots *tenant_slots_new(size_t payload_size)
{
    struct tenant_slots *t = mem_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->stride = ROUND_UP(sizeof(struct head)) + ROUND_UP(payload_size);
    t->slots = mem_calloc(TENANT_SLOTS_SLOTS, t->stride);
    if (!t->slots) {
        mem_free(t);
        return NULL;
    }
    return t;
}

void tenant_slots_free(struct tenant_slots *t)
{
    if (!t)
        return;
    mem_free(t->slots);
    mem_free(t);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = hash_fmix64(hash_fnv1a(HASH_FNV_OFFSET, s, strlen(s)));
    return h ? h : 1;
}

void *tenant_slots_get(struct tenant_slots *t, const char *tenant, bool *first_overflow)
{
    *first_overflow = false;
    uint64_t key = hash_name(tenant);
    uint32_t mask = TENANT_SLOTS_SLOTS - 1;
    for (uint32_t probe = 0, i = (uint32_t)key & mask; probe < TENANT_SLOTS_SLOTS;
         probe++, i = (i + 1) & mask) {
        struct head *s = slot(t, i);
        uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == key)
            return payload(s);
        if (k != 0)
            continue;
        /* Free: the table keeps at least half of its slots free. */
        if (atomic_fetch_add_explicit(&t->tenants, 1, memory_order_relaxed) >=
            TENANT_SLOTS_TENANTS) {
            atomic_fetch_sub_explicit(&t->tenants, 1, memory_order_relaxed);
            break;
        }
        if (atomic_compare_exchange_strong_explicit(&s->key, &k, key, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            snprintf(s->name, sizeof s->name, "%s", tenant);
            atomic_store_explicit(&s->named, true, memory_order_release);
            return payload(s);
        }
        atomic_fetch_sub_explicit(&t->tenants, 1, memory_order_relaxed);
        if (k == key) /* the same tenant's other call was first */
            return payload(s);
    }
    *first_overflow = !atomic_exchange_explicit(&t->overflowed, true, memory_order_relaxed);
    return NULL;
}

void *tenant_slots_at(struct tenant_slots *t, uint32_t i, const char **name)
{
    struct head *s = slot(t, i);
    if (!atomic_load_explicit(&s->named, memory_order_acquire))
        return NULL;
    *name = s->name;
    return payload(s);
}
