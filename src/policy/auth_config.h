/*
 * auth_config: the `auth` section of the configuration file, parsed
 * (the section's form and meaning: policy/auth.h; docs/security.md).
 *
 * A configuration is immutable once parsed and reference counted: the
 * store (auth.h) holds one reference, each check or infer call that uses
 * it one more. Every tenant points back to its configuration, so the
 * tenant name an infer call carries (call->tenant) leads to the reference
 * to drop. The struct is defined here for the store and the unit test;
 * everything else uses the functions.
 */
#ifndef INFERD_POLICY_AUTH_CONFIG_H
#define INFERD_POLICY_AUTH_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "policy/auth_key.h"

#define AUTH_MAX_KEYS 1024 /* in the whole section (so at most as many tenants) */
#define AUTH_TENANT_MAX 64 /* characters of a tenant's name */
/* Models one tenant may name in infer:<model> scopes. */
#define AUTH_MAX_MODEL_SCOPES 256
#define AUTH_MODEL_MAX 255 /* characters of a model name in a scope */

enum auth_open {
    AUTH_OPEN_HEALTH = 1u << 0,
    AUTH_OPEN_METRICS = 1u << 1,
    AUTH_OPEN_METADATA = 1u << 2,
    AUTH_OPEN_DASHBOARD = 1u << 3,
};

enum auth_scope_bits {
    AUTH_SCOPE_READ = 1u << 0,
    AUTH_SCOPE_ADMIN = 1u << 1,
    AUTH_SCOPE_INFER = 1u << 2, /* every model */
};

struct auth_config;

struct auth_tenant {
    char name[AUTH_TENANT_MAX + 1]; /* call->tenant points here */
    uint32_t scopes;                /* enum auth_scope_bits */
    uint32_t nmodels;               /* infer:<model> scopes */
    char **models;
    struct auth_config *config; /* the one this tenant belongs to */
};

struct auth_stored_key {
    struct auth_key_hash hash;
    uint32_t tenant; /* index in tenants */
};

struct auth_config {
    atomic_uint refs;
    uint64_t generation; /* unique per publication (tags the key hints); 0 before */
    uint32_t open;       /* enum auth_open */
    uint32_t ntenants, nkeys;
    struct auth_tenant *tenants;
    struct auth_stored_key *keys;
};

/* ---- the loader's contract ------------------------------------------------------- */

/* section: the value under `auth`, NULL (or a YAML null) when the file
 * has none: no tenant, [health, metrics] open. 0 with *out (free it with
 * auth_config_free, or hand it to auth_apply), or ST_ERROR with err (400) whose
 * message names the path, e.g. "auth.tenants[1].scopes[0]: ..."; unknown
 * keys are refused by name; a key hash (or a key pasted in its place) is
 * never quoted. */
int auth_config_parse(const struct json_value *section, struct auth_config **out,
                      struct error *err);
/* A configuration that was not applied. NULL is a no-op. */
void auth_config_free(struct auth_config *c);
/* Whether c has a tenant named name (the rate-limit rules name tenants). */
bool auth_config_has_tenant(const struct auth_config *c, const char *name);

/* ---- references (the store and its checks) --------------------------------------- */

void auth_config_ref(struct auth_config *c);
/* Frees c with its last reference. NULL is a no-op. */
void auth_config_unref(struct auth_config *c);

#endif
