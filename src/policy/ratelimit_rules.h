/*
 * ratelimit_rules: the `rate-limits` section of the config file, parsed
 * into rules (the buckets that apply them are ratelimit.h's).
 *
 *   rate-limits:
 *     - tenant: team-a   # optional: only calls of this authenticated
 *                        # tenant; "*": every tenant, each its own bucket
 *       model: digits    # optional: only this model (all its versions);
 *                        # absent: every model together
 *       rate: 100        # tokens per second, RATELIMIT_MIN_RATE ..
 *                        # RATELIMIT_MAX_RATE, fractions allowed
 *       burst: 200       # bucket size, 1 .. RATELIMIT_MAX_BURST
 *                        # (default: max(1, ceil(rate)))
 *
 * The section may be null (no rules); at most RATELIMIT_MAX_RULES rules.
 * Nothing is allocated; thread: any.
 */
#ifndef INFERD_POLICY_RATELIMIT_RULES_H
#define INFERD_POLICY_RATELIMIT_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "policy/gcra.h"

#define RATELIMIT_MAX_RULES 64
#define RATELIMIT_TENANT_MAX 64 /* a tenant name in a rule: 1 to 63 bytes */
#define RATELIMIT_MODEL_MAX 256 /* a model name in a rule: 1 to 255 bytes */
#define RATELIMIT_MIN_RATE 0.001
#define RATELIMIT_MAX_RATE 1e9
#define RATELIMIT_MAX_BURST 1000000u
/* The longest ratelimit_rule_describe() text, NUL included. */
#define RATELIMIT_DESCRIBE_MAX (RATELIMIT_TENANT_MAX + RATELIMIT_MODEL_MAX + 32)

enum ratelimit_tenant {
    RATELIMIT_ANY_TENANT,  /* no `tenant`: every call, one bucket */
    RATELIMIT_ONE_TENANT,  /* `tenant: name` */
    RATELIMIT_EACH_TENANT, /* `tenant: "*"`: one bucket per tenant */
};

struct ratelimit_rule {
    enum ratelimit_tenant tenant_kind;
    char tenant[RATELIMIT_TENANT_MAX]; /* RATELIMIT_ONE_TENANT: the name; else "" */
    char model[RATELIMIT_MODEL_MAX];   /* "" = every model */
    double rate;
    uint32_t burst;
    struct gcra_params gcra;
};

/* Parses section into rules[0 .. *n) (room for RATELIMIT_MAX_RULES).
 * 0, or ST_ERROR with err (400) naming the path ("rate-limits[1].rate: ..."). */
int ratelimit_rules_parse(const struct json_value *section, struct ratelimit_rule *rules,
                          uint32_t *n, struct error *err);

/* Whether a and b are the same bucket shape and scope (a reload keeps
 * the bucket of such a rule). */
bool ratelimit_rule_same(const struct ratelimit_rule *a, const struct ratelimit_rule *b);

/* Whether a rule of scope (kind, rule_tenant, rule_model: "" = every
 * model) matches a call of tenant (NULL: none) to model. Shared with the
 * token budgets (tokenquota_rules.h), whose rules have the same scope. */
bool ratelimit_scope_matches(enum ratelimit_tenant kind, const char *rule_tenant,
                             const char *rule_model, const char *tenant, const char *model);
/* What a rule of that scope limits, for a refusal's message: "tenant
 * team-a on model digits", "tenant team-a", "model digits", "the server";
 * tenant: the call's (the one a "*" rule's state belongs to). */
void ratelimit_scope_describe(enum ratelimit_tenant kind, const char *rule_tenant,
                              const char *rule_model, const char *tenant, char *out, size_t size);

/* Checks the tenant of rule i of a scope (kind, rule_tenant) in section
 * ("rate-limits", "token-quotas") against the tenants that exist
 * (known(ctx, name): the auth section's): a rule naming another tenant,
 * or a "*" rule when there are none (any_tenants false), is refused, 400
 * "section[i].tenant: ...". 0 or ST_ERROR with err. */
int ratelimit_scope_check_tenant(const char *section, uint32_t i, enum ratelimit_tenant kind,
                                 const char *rule_tenant,
                                 bool (*known)(const void *ctx, const char *name), const void *ctx,
                                 bool any_tenants, struct error *err);

/* What the rule limits, for a refusal's message: "tenant team-a on model
 * digits", "tenant team-a", "model digits", "the server"; tenant: the
 * call's tenant (the one a "*" rule's bucket belongs to). */
void ratelimit_rule_describe(const struct ratelimit_rule *r, const char *tenant, char *out,
                             size_t size);

#endif
