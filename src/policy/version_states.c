#include "policy/version_states.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"

int version_states_init(struct version_states *t, const struct version_states_ops *ops)
{
    *t = (struct version_states){.ops = ops};
    t->states = mem_calloc(ops->max, sizeof t->states[0]);
    if (!t->states)
        return ST_ERROR;
    pthread_mutex_init(&t->lock, NULL);
    return 0;
}

void *version_states_destroy(struct version_states *t)
{
    for (uint32_t i = 0; i < t->nstates; i++)
        version_states_unref(t, t->states[i]);
    mem_free(t->states);
    pthread_mutex_destroy(&t->lock);
    return t->cfg;
}

void version_states_unref(const struct version_states *t, struct version_state *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
        t->ops->destroy(st);
        mem_free(st);
    }
}

void *version_states_apply(struct version_states *t, void *cfg,
                           const struct version_entries *entries)
{
    pthread_mutex_lock(&t->lock);
    void *old = t->cfg;
    t->cfg = cfg;
    t->entries = entries;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < t->nstates; i++) {
        struct version_state *st = t->states[i];
        const void *e = version_entries_for(entries, st->model, st->version);
        if (e && t->ops->same(e, st))
            t->states[kept++] = st;
        else
            version_states_unref(t, st);
    }
    t->nstates = kept;
    t->full_logged = false;
    atomic_store_explicit(&t->nentries, entries ? entries->n : 0, memory_order_relaxed);
    pthread_mutex_unlock(&t->lock);
    return old;
}

struct version_state *version_states_get(struct version_states *t, const struct model *m)
{
    struct version_state *st = NULL;
    pthread_mutex_lock(&t->lock);
    const void *e = version_entries_for(t->entries, m->name, m->version);
    if (!e)
        goto out;
    for (uint32_t i = 0; i < t->nstates && !st; i++)
        if (t->states[i]->version == m->version && strcmp(t->states[i]->model, m->name) == 0)
            st = t->states[i];
    if (!st) {
        if (t->nstates == t->ops->max || !(st = mem_calloc(1, t->ops->size))) {
            if (!t->full_logged)
                log_error("%s %s version %s (%s)%s", t->ops->none_prefix, m->name, m->version_str,
                          t->nstates == t->ops->max ? "too many versions" : "out of memory",
                          t->ops->none_suffix);
            t->full_logged = true;
            goto out;
        }
        atomic_init(&st->refs, 1);
        snprintf(st->model, sizeof st->model, "%s", m->name);
        st->version = m->version;
        snprintf(st->version_str, sizeof st->version_str, "%s", m->version_str);
        t->ops->init(st, e, m);
        t->states[t->nstates++] = st;
    }
    atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
out:
    pthread_mutex_unlock(&t->lock);
    return st;
}

void version_states_lock(struct version_states *t)
{
    pthread_mutex_lock(&t->lock);
}

void version_states_unlock(struct version_states *t)
{
    pthread_mutex_unlock(&t->lock);
}
