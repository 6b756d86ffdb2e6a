#include "policy/published.h"

#include "base/mem.h"
#include "base/status.h"

void published_rules_init(struct published_rules *p, const void *rules, size_t rule_size,
                          bool (*same)(const void *a, const void *b))
{
    atomic_init(&p->refs, 1);
    p->nrules = 0;
    p->rules = rules;
    p->rule_size = rule_size;
    p->same = same;
}

int published_add_state(struct published_rules *p, size_t payload_size, bool per_tenant)
{
    if (p->nrules >= PUBLISHED_MAX_RULES)
        return ST_ERROR;
    struct rule_state *st = mem_calloc(1, sizeof *st + payload_size);
    if (!st)
        return ST_ERROR;
    if (per_tenant) {
        st->slots = tenant_slots_new(payload_size);
        if (!st->slots) {
            mem_free(st);
            return ST_ERROR;
        }
    }
    atomic_init(&st->refs, 1);
    p->states[p->nrules++] = st;
    return 0;
}

static void state_unref(struct rule_state *st)
{
    if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
        tenant_slots_free(st->slots);
        mem_free(st);
    }
}

void published_unref(struct published_rules *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < p->nrules; i++)
        state_unref(p->states[i]);
    mem_free(p); /* the head of the owner's configuration */
}

void published_init(struct published *s, struct published_rules *empty)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->write_lock, NULL);
    s->current = empty;
    atomic_init(&s->active, empty->nrules > 0);
}

void published_destroy(struct published *s)
{
    published_unref(s->current);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->write_lock);
}

bool published_active(struct published *s)
{
    return atomic_load_explicit(&s->active, memory_order_relaxed);
}

struct published_rules *published_acquire(struct published *s)
{
    pthread_mutex_lock(&s->lock);
    struct published_rules *p = s->current;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    return p;
}

uint32_t published_apply(struct published *s, struct published_rules *c, uint32_t *old_nrules)
{
    pthread_mutex_lock(&s->write_lock);
    struct published_rules *old = s->current; /* only writers change it */
    bool taken[PUBLISHED_MAX_RULES] = {false};
    uint32_t kept = 0;
    for (uint32_t i = 0; i < c->nrules; i++) {
        for (uint32_t k = 0; k < old->nrules; k++) {
            if (taken[k] || !c->same(old->rules + k * old->rule_size, c->rules + i * c->rule_size))
                continue;
            taken[k] = true;
            state_unref(c->states[i]);
            c->states[i] = old->states[k];
            atomic_fetch_add_explicit(&c->states[i]->refs, 1, memory_order_relaxed);
            kept++;
            break;
        }
    }
    pthread_mutex_lock(&s->lock);
    s->current = c;
    atomic_store_explicit(&s->active, c->nrules > 0, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->write_lock);
    *old_nrules = old->nrules;
    published_unref(old); /* readers that acquired it hold their own reference */
    return kept;
}
