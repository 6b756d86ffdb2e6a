/*
 * ratelimit: token buckets per tenant, per model, and per tenant and
 * model (docs/limits.md, "Rate limits"), and the serving-pipeline stage
 * that applies them.
 *
 * Configuration: the `rate-limits` section of the config file, a sequence
 * of rules (ratelimit_rules.h).
 *
 * Matching. A call takes one token from the bucket of every rule that
 * matches it: a rule with `tenant` matches only calls whose tenant (set
 * by the auth stage; NULL when no API keys are configured) is that one,
 * or any tenant for "*"; a rule with `model` only calls of that model.
 * When one bucket refuses, the tokens this call already took are given
 * back and the call is refused: 429, Retry-After = the seconds until
 * that bucket has a token (rounded up, >= 1). Two rules alike in tenant,
 * model, rate and burst are refused at parse (one would only double the
 * other).
 *
 * Buckets: one atomic 64-bit word each (gcra.h), so admission is
 * lock-free and allocates nothing (measured: about 40 ns to admit, 300 ns
 * to refuse, most of it formatting the message).
 * The per-tenant buckets of a "*" rule live in a tenant_slots.h table
 * allocated with the rule. At most RATELIMIT_TENANTS tenants get their
 * own bucket per rule; later ones share the rule's overflow bucket
 * (logged once per rule). A tenant's bucket is claimed by its first call
 * with a compare-and-swap.
 *
 * Fairness: a tenant's calls only ever take tokens from buckets that its
 * own calls match (its own bucket of a tenant rule, and the shared
 * buckets of rules without a tenant). Tenant rules are checked first, so
 * one tenant over its limit is refused by its own bucket before it
 * touches a shared one, and a refused call gives back what it took.
 *
 * Publication and reload. The rules and their buckets are one immutable,
 * reference-counted configuration, replaced by a pointer swap under a
 * short mutex; a call holds it only while its stage runs (nothing of it
 * is needed later). In ratelimit_apply a new rule alike in tenant, model,
 * rate and burst to a rule of the current configuration takes over that
 * rule's buckets (their state and counters); a changed or new rule starts
 * full; a removed rule's memory goes with the last call that could still
 * use it.
 *
 * Threads: parse on any thread; apply on any (serialized inside);
 * admission and metrics on any, concurrently with apply.
 */
#ifndef INFERD_POLICY_RATELIMIT_H
#define INFERD_POLICY_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "policy/ratelimit_rules.h"
#include "policy/tenant_slots.h"
#include "serve/call.h"

/* Per "*" rule: tenants with a bucket of their own. */
#define RATELIMIT_TENANTS TENANT_SLOTS_TENANTS

struct ratelimit_config;
struct ratelimit;

/* section: the value under `rate-limits` (NULL or null: no rules). 0 and
 * a new configuration, or ST_ERROR with err (400) naming the path, e.g.
 * "rate-limits[1].burst: expected an integer from 1 to 1000000, got -3";
 * unknown keys are refused by name. Allocates every bucket of the rules
 * (so that ratelimit_apply cannot fail). */
int ratelimit_config_parse(const struct json_value *section, struct ratelimit_config **out,
                           struct error *err);
/* A configuration never applied; NULL is a no-op. */
void ratelimit_config_free(struct ratelimit_config *c);

/* Checks the tenants c's rules name against the tenants that exist
 * (known(ctx, name): the auth section's): a rule naming another tenant, or
 * a "*" rule when there are none (any_tenants false), is refused, 400
 * "rate-limits[i].tenant: ...". 0 or ST_ERROR with err. */
int ratelimit_config_check_tenants(const struct ratelimit_config *c,
                                   bool (*known)(const void *ctx, const char *name),
                                   const void *ctx, bool any_tenants, struct error *err);

/* The process-wide store, with no rules; NULL when out of memory. */
struct ratelimit *ratelimit_new(void);
/* After every I/O thread stopped; NULL is a no-op. */
void ratelimit_free(struct ratelimit *rl);
/* Publishes c (takes ownership) for the next calls (see the top). */
void ratelimit_apply(struct ratelimit *rl, struct ratelimit_config *c);

/* The admission of one call of `tenant` (NULL: none) to `model` at now_ns
 * (clock_now_ns()). 0: admitted; ST_ERROR: refused, err = 429 with the rule
 * ("rate limit of tenant team-a on model digits exceeded (100/s, burst
 * 200)": names, never a key) and retry_after_s. *info: the most
 * constrained matching bucket (the refusing one on -1); info->set false
 * when no rule matched. Lock-free on the buckets, allocates nothing. */
int ratelimit_admit(struct ratelimit *rl, const char *tenant, const char *model, uint64_t now_ns,
                    struct serve_ratelimit *info, struct error *err);

/* Prometheus text: inferd_rate_limit_requests_total{rule, tenant, model,
 * outcome="admitted"|"limited"} and inferd_rate_limit_tokens{rule,
 * tenant, model} (docs/metrics.md). */
void ratelimit_write_metrics(struct ratelimit *rl, struct buf *out);

/* The stage (serve/call.h), cfg = the struct ratelimit: after auth,
 * before route. Sets call->ratelimit; refuses with 429 and
 * req.err.retry_after_s. */
enum stage_result ratelimit_stage(struct infer_call *call, const void *cfg);

#endif
