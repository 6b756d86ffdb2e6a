/*
 * tenant_slots: the per-tenant state of a rule whose tenant is "*"
 * (ratelimit.h's buckets, tokenquota.h's counters): each tenant gets its
 * own zeroed payload of a fixed size, claimed by its first call.
 *
 * An open-addressing table of TENANT_SLOTS_SLOTS slots allocated with the
 * rule, keyed by a 64-bit hash of the tenant name (two tenants whose
 * hashes collide would share a payload: about 1 chance in 10^12 for 4096
 * tenants; tenant names come from the operator's auth section, not from
 * clients). At most TENANT_SLOTS_TENANTS tenants get a slot (so that at
 * least half of the slots stay free and probing stays short); later ones
 * get NULL, and the caller uses its rule's shared overflow state. A slot
 * is claimed with a compare-and-swap and never given back.
 *
 * Threads: tenant_slots_get and tenant_slots_at on any, concurrently;
 * lock-free, and nothing is allocated after tenant_slots_new.
 */
#ifndef INFERD_POLICY_TENANT_SLOTS_H
#define INFERD_POLICY_TENANT_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENANT_SLOTS_TENANTS 4096u
#define TENANT_SLOTS_SLOTS 8192u /* a power of two, twice TENANT_SLOTS_TENANTS */
#define TENANT_SLOTS_NAME_MAX 64 /* a tenant's name as kept for the metrics, NUL included */

struct tenant_slots;

/* A table whose payloads are payload_size bytes (zeroed, aligned for any
 * type); NULL when out of memory. */
struct tenant_slots *tenant_slots_new(size_t payload_size);
/* NULL is a no-op. */
void tenant_slots_free(struct tenant_slots *t);

/* tenant's payload (tenant not NULL), claimed on its first call; NULL
 * when TENANT_SLOTS_TENANTS tenants already have one. *first_overflow is
 * set true by the first call that got NULL (for a log line), else false. */
void *tenant_slots_get(struct tenant_slots *t, const char *tenant, bool *first_overflow);

/* For the metrics: slot i's payload (i < TENANT_SLOTS_SLOTS) and its
 * tenant's name once the claiming call has written it; else NULL. */
void *tenant_slots_at(struct tenant_slots *t, uint32_t i, const char **name);

#endif
