/*
 * published: the publication mechanism ratelimit.h and tokenquota.h
 * share: an immutable, reference-counted configuration of rules, swapped
 * under a short mutex, whose rules keep their state across reloads.
 *
 * A configuration is its owner's struct, allocated with mem_calloc, that
 * begins with a struct published_rules (published_unref frees it whole).
 * Each of its rules has a long-lived state (struct rule_state), itself
 * reference counted so that configurations can share it: a zeroed
 * payload of the owner's size (its buckets or counters), and for a "*"
 * rule a tenant_slots.h table of such payloads, one per tenant.
 *
 * A store (struct published) holds the current configuration. A reader
 * takes a reference to it (published_acquire) and holds it as long as it
 * uses it; published_apply publishes a new one: each of its rules that the
 * owner's same() finds in the current configuration takes over that
 * rule's state (at most once each), the others keep their new, zeroed
 * state; the old configuration goes with its last reference.
 *
 * Threads: building a configuration on one thread; apply on any
 * (serialized inside); acquire, unref and published_active on any,
 * concurrently with apply.
 */
#ifndef INFERD_POLICY_PUBLISHED_H
#define INFERD_POLICY_PUBLISHED_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/tenant_slots.h"

#define PUBLISHED_MAX_RULES 64

/* A rule's long-lived state, shared by the configurations that have the
 * rule. */
struct rule_state {
    atomic_uint refs;
    struct tenant_slots *slots; /* "*" rules: a payload per tenant; else NULL */
    /* The rule's payload; for "*" rules the overflow one, shared by the
     * tenants beyond TENANT_SLOTS_TENANTS. */
    alignas(max_align_t) unsigned char one[];
};

/* The head of a configuration. */
struct published_rules {
    atomic_uint refs;
    uint32_t nrules;            /* rules with a state: published_add_state */
    const unsigned char *rules; /* the owner's rules, rule_size bytes apart */
    size_t rule_size;
    bool (*same)(const void *a, const void *b); /* two rules (published_apply) */
    struct rule_state *states[PUBLISHED_MAX_RULES];
};

/* Starts the head of a new configuration (one reference, no rule):
 * rules[i] is the owner's rule i (the array lives in the configuration;
 * it need not be filled yet), same() compares two of them. */
void published_rules_init(struct published_rules *p, const void *rules, size_t rule_size,
                          bool (*same)(const void *a, const void *b));
/* Gives rule p->nrules a new state (payload_size bytes, and a table of
 * such payloads when per_tenant) and counts it. 0, or ST_ERROR out of memory
 * (the caller unrefs p). At most PUBLISHED_MAX_RULES. */
int published_add_state(struct published_rules *p, size_t payload_size, bool per_tenant);
/* Drops a reference; the last one frees the configuration and the states
 * only it holds. NULL is a no-op. */
void published_unref(struct published_rules *p);

/* The store. */
struct published {
    pthread_mutex_t lock; /* current: taking a reference, swapping */
    struct published_rules *current;
    atomic_bool active;         /* current has rules (read without the lock) */
    pthread_mutex_t write_lock; /* published_apply: one at a time */
};

/* Starts s with the configuration empty (takes its reference). */
void published_init(struct published *s, struct published_rules *empty);
/* Drops the current configuration; after every reader stopped. */
void published_destroy(struct published *s);
/* Whether the current configuration has rules (a hint: readers that find
 * none may skip acquiring it). */
bool published_active(struct published *s);
/* A reference to the current configuration (published_unref it). */
struct published_rules *published_acquire(struct published *s);
/* Publishes c (takes its reference) as above. Returns how many of c's
 * rules kept the state of a current rule; *old_nrules: the rules of the
 * configuration it replaced. */
uint32_t published_apply(struct published *s, struct published_rules *c, uint32_t *old_nrules);

#endif
