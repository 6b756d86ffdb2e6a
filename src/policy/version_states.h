/*
 * version_states: the process-wide store of a policy module's per-version
 * state (a breaker's circuit, a limiter's gradient), created on a
 * version's first call from the entry (version_entries.h) that applies to
 * it, and reference counted: the store holds one reference, every call
 * that uses the state another.
 *
 * A module's state begins with a struct version_state; ops say how to
 * make, compare and destroy the rest. version_states_apply() publishes the
 * module's new configuration and keeps the states whose entry the new
 * configuration leaves unchanged (ops->same); the others are dropped from
 * the store and end with their last call. At most ops->max states; beyond
 * (or out of memory) a version has none, which is logged once per apply.
 *
 * Thread: any. `lock` guards cfg, entries and states: readers of states
 * (metrics writers) hold it with version_states_lock().
 */
#ifndef INFERD_POLICY_VERSION_STATES_H
#define INFERD_POLICY_VERSION_STATES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "policy/version_entries.h"

struct version_state {
    atomic_uint refs;
    char model[VERSION_MODEL_MAX];
    int64_t version;
    char version_str[24];
};

struct version_states_ops {
    size_t size;  /* bytes of a state (it begins with a struct version_state) */
    uint32_t max; /* states at most */
    /* The log line when a version gets none: "<prefix> M version V (reason)<suffix>". */
    const char *none_prefix, *none_suffix;
    /* st's key is set, the rest zeroed: make the rest from entry. */
    void (*init)(struct version_state *st, const void *entry, const struct model *m);
    bool (*same)(const void *entry, const struct version_state *st);
    void (*destroy)(struct version_state *st); /* the rest; not the memory */
};

struct version_states {
    const struct version_states_ops *ops;
    pthread_mutex_t lock;
    void *cfg;                             /* the module's, owned by it */
    const struct version_entries *entries; /* cfg's list; NULL: none */
    atomic_uint nentries;                  /* entries->n, read without the lock */
    struct version_state **states;         /* ops->max */
    uint32_t nstates;
    bool full_logged;
};

/* 0, or ST_ERROR when out of memory. */
int version_states_init(struct version_states *t, const struct version_states_ops *ops);
/* Drops every state; returns the configuration for the module to free. */
void *version_states_destroy(struct version_states *t);

/* Publishes cfg with its list entries; returns the previous cfg (NULL at
 * first) for the module to free. */
void *version_states_apply(struct version_states *t, void *cfg,
                           const struct version_entries *entries);

/* Whether the configuration has any entry (no lock). */
static inline bool version_states_any(struct version_states *t)
{
    return atomic_load_explicit(&t->nentries, memory_order_relaxed) != 0;
}

/* The state of model m with a reference (version_states_unref), created
 * from its entry when needed; NULL when no entry applies or there is none
 * to be had. */
struct version_state *version_states_get(struct version_states *t, const struct model *m);
void version_states_unref(const struct version_states *t, struct version_state *st);

void version_states_lock(struct version_states *t);
void version_states_unlock(struct version_states *t);

#endif
