/*
 * tokenquota: token budgets of generative models per tenant, per model,
 * and per tenant and model (docs/generative.md, "Token budgets"): the
 * `token-quotas` section of the config file, the process-wide store of
 * the budgets, and the serving-pipeline stage that reserves against them.
 *
 * Section (a list; each entry needs at least one limit):
 *
 *   token-quotas:
 *     - tenant: team-a       # optional: only this authenticated tenant;
 *                            # "*": every tenant, each its own budgets
 *       model: kjv           # optional: only this model (all versions);
 *                            # absent: every generative model together
 *       per-minute:          # rolling: refills continuously, limit/60 a second
 *         prompt: 20000      # each optional, 1 .. TOKENQUOTA_MAX_MINUTE
 *         completion: 40000
 *         total: 50000
 *       per-day:             # calendar day (UTC): empty again at 00:00
 *         total: 2000000     # prompt / completion / total, 1 .. TOKENQUOTA_MAX_DAY
 *
 * Counters. Each limit of a rule is one counter: per-minute ones are
 * token buckets of size `limit` refilled at limit/60 tokens a second
 * (gcra.h's word, taking n tokens at once); per-day ones count the tokens
 * of the current UTC day (one atomic word: day number and tokens used).
 * A "*" rule has its counters per tenant (at most TOKENQUOTA_TENANTS
 * tenants; later ones share the rule's overflow counters, logged once).
 *
 * Reservation (the stage, after decode). A call of a generative model
 * (m->engine_ops->estimate) is estimated before it runs: P prompt tokens
 * (its text tokenized) and C, the most it may generate (its max_tokens,
 * or the model's default: the rest of the context). It reserves P on
 * every matching `prompt` counter, C on every `completion` counter and
 * P + C on every `total` counter, each with a compare-and-swap that
 * refuses when the counter has less room than that: so concurrent calls
 * together never spend more than a budget. When one counter refuses, what
 * the call reserved on the others is given back and the call is refused
 * with 429:
 *   - a per-minute counter without room: Retry-After (and retry-after-ms)
 *     = the time until the bucket has room for the reservation;
 *     call->tokens.refusal = SERVE_QUOTA_RATE;
 *   - a per-day counter without room: Retry-After = the time until the
 *     next UTC day; refusal = SERVE_QUOTA_EXHAUSTED (the client should
 *     not retry automatically);
 *   - a reservation larger than the counter's whole limit (it can never
 *     fit): refusal = SERVE_QUOTA_TOO_LARGE, the message says by how much
 *     and that max_tokens is what to lower; Retry-After = a minute, or the
 *     time until the next UTC day, for a per-day counter (not sooner).
 * A call whose model is not generative, or that no rule matches, passes.
 *
 * Settlement (the done hook, once per call, whatever its outcome). What
 * the call really used is the engine's count (infer_request's
 * usage_prompt_tokens and usage_completion_tokens: 0 and 0 for a call
 * that never reached the running set, e.g. refused, expired or cancelled
 * while waiting). The unused part of each reservation is given back: to
 * a per-minute bucket at once (never fuller than full); to a per-day
 * counter only if its day is still the current one (a call admitted
 * before midnight is charged to the day it was admitted). A stream the
 * client cancels or resumes is one call: settled once, for the tokens
 * generated. The done hook also meters the call (obs/usage.h) and puts
 * its tokens on its access-log line.
 *
 * Headers. call->tokens (serve/call.h) is set for a call that matched at
 * least one rule: the counter with the fewest tokens left after the
 * reservation (the refusing one when refused). The OpenAI front end sends
 * it as x-ratelimit-limit-tokens, -remaining-tokens and -reset-tokens.
 *
 * Publication and reload as ratelimit.h: an immutable, reference-counted
 * configuration swapped under a short mutex; a rule alike in tenant,
 * model and limits to one of the running configuration keeps its
 * counters. A call holds the configuration it reserved under until it is
 * settled (the reference is in call->tokens_ctx).
 *
 * Threads: parse on any thread; apply on any (serialized inside);
 * the stage, its done hook and the metrics on any, concurrently.
 */
#ifndef INFERD_POLICY_TOKENQUOTA_H
#define INFERD_POLICY_TOKENQUOTA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "obs/usage.h"
#include "policy/tenant_slots.h"
#include "policy/tokenquota_rules.h"
#include "serve/call.h"

/* TOKENQUOTA_MAX_RULES, _MAX_MINUTE and _MAX_DAY: tokenquota_rules.h. */
#define TOKENQUOTA_TENANTS TENANT_SLOTS_TENANTS /* per "*" rule, as ratelimit.h */

struct tokenquota_config;
struct tokenquota;

/* section: the value under `token-quotas` (NULL or null: no rules). 0 and
 * a new configuration, or ST_ERROR with err (400) naming the path, e.g.
 * "token-quotas[0].per-minute.total: expected an integer from 1 to
 * 1000000000, got 0"; unknown keys are refused by name; an entry with no
 * limit, and two entries alike in tenant and model, are refused.
 * Allocates every counter (so that tokenquota_apply cannot fail). */
int tokenquota_config_parse(const struct json_value *section, struct tokenquota_config **out,
                            struct error *err);
void tokenquota_config_free(struct tokenquota_config *c);

/* As ratelimit_config_check_tenants: a rule naming a tenant the auth
 * section does not have, or a "*" rule without tenants, is refused
 * (400, "token-quotas[i].tenant: ..."). */
int tokenquota_config_check_tenants(const struct tokenquota_config *c,
                                    bool (*known)(const void *ctx, const char *name),
                                    const void *ctx, bool any_tenants, struct error *err);

/* The process-wide store, with no rules; NULL when out of memory. */
struct tokenquota *tokenquota_new(void);
/* After every I/O thread stopped; NULL is a no-op. */
void tokenquota_free(struct tokenquota *tq);
/* Publishes c (takes ownership) for the next calls. */
void tokenquota_apply(struct tokenquota *tq, struct tokenquota_config *c);

/* One reservation, the stage's unit (exposed for the unit tests, which
 * inject the clock). tenant NULL: none. now_ns: clock_now_ns() for the
 * per-minute buckets; wall_s: the UTC wall clock in seconds for the
 * per-day counters. 0: reserved (res holds what to settle; *info set
 * when a rule matched); ST_ERROR: refused, err = 429 with retry_after_s, *info
 * the refusing counter (its refusal set). The caller settles a reserved
 * res exactly once. */
struct tokenquota_reservation {
    struct tokenquota_config *config; /* referenced; NULL: no rule matched */
    uint32_t prompt, completion;      /* reserved: P and C */
    uint64_t day;                     /* the UTC day number it was made on */
    const char *tenant;               /* the call's (outlives the reservation) */
    char model[256];
};
int tokenquota_reserve(struct tokenquota *tq, const char *tenant, const char *model,
                       uint32_t prompt, uint32_t completion, uint64_t now_ns, uint64_t wall_s,
                       struct tokenquota_reservation *res, struct serve_tokens *info,
                       struct error *err);
/* Gives back what res reserved beyond what was used (prompt_used <=
 * res->prompt, completion_used <= res->completion: larger values are
 * clamped), and drops res's reference. */
void tokenquota_settle(struct tokenquota_reservation *res, uint32_t prompt_used,
                       uint32_t completion_used, uint64_t now_ns, uint64_t wall_s);

/* Prometheus text: inferd_token_quota_limit{rule, tenant, model, window,
 * kind} (gauge), inferd_token_quota_remaining{...} (gauge, at scrape
 * time) and inferd_token_quota_refusals_total{..., reason="rate"|
 * "exhausted"|"too_large"} (docs/metrics.md). */
void tokenquota_write_metrics(struct tokenquota *tq, struct buf *out);

/* The stage's configuration (the pipeline's part). */
struct tokens_stage_cfg {
    struct tokenquota *quotas; /* never NULL (no rules: nothing reserved) */
    struct usage *usage;       /* metering; never NULL */
};

/* The stage (serve/call.h), cfg = struct tokens_stage_cfg: after decode,
 * before the limiter. Estimates, reserves, sets call->tokens and
 * call->tokens_ctx; refuses with 429 (see the top). Allocates the
 * reservation in the call's arena. */
enum stage_result tokens_stage(struct infer_call *call, const void *cfg);
/* Its done hook: settles the reservation, meters the call
 * (usage_record) and logs its tokens (obsreq, when the front end has
 * one). */
void tokens_done(struct infer_call *call, const void *cfg);

#endif
