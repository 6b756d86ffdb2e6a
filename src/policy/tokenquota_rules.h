/*
 * tokenquota_rules: the `token-quotas` section of the config file, parsed
 * into rules (the counters that apply them are tokenquota.h's, which
 * also shows the section). A rule's scope (tenant, model) is a rate-limit
 * rule's (ratelimit_rules.h); its limits are up to six counters: per
 * minute and per day, each of prompt, completion and total tokens.
 *
 * The section may be null (no rules); at most TOKENQUOTA_MAX_RULES rules.
 * Nothing is allocated; thread: any.
 */
#ifndef INFERD_POLICY_TOKENQUOTA_RULES_H
#define INFERD_POLICY_TOKENQUOTA_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "policy/gcra.h"
#include "policy/ratelimit_rules.h"

#define TOKENQUOTA_MAX_RULES 64
#define TOKENQUOTA_MAX_MINUTE 1000000000ull /* tokens per minute of one counter */
#define TOKENQUOTA_MAX_DAY 1000000000000ull /* tokens per day of one counter (< 2^40) */
#define TOKENQUOTA_LIMITS 6                 /* per rule: 2 windows × 3 kinds */
#define TOKENQUOTA_DESCRIBE_MAX RATELIMIT_DESCRIBE_MAX

enum tokenquota_window { TOKENQUOTA_MINUTE, TOKENQUOTA_DAY };
enum tokenquota_kind { TOKENQUOTA_PROMPT, TOKENQUOTA_COMPLETION, TOKENQUOTA_TOTAL };

/* One limit of a rule: one counter per scope it applies to. */
struct tokenquota_limit {
    enum tokenquota_window window;
    enum tokenquota_kind kind;
    uint64_t limit;
    struct gcra_params gcra; /* TOKENQUOTA_MINUTE: burst limit, rate limit/60 a second */
};

struct tokenquota_rule {
    enum ratelimit_tenant tenant_kind;
    char tenant[RATELIMIT_TENANT_MAX]; /* RATELIMIT_ONE_TENANT: the name; else "" */
    char model[RATELIMIT_MODEL_MAX];   /* "" = every generative model */
    uint32_t nlimits;                  /* 1 .. TOKENQUOTA_LIMITS, minute ones first */
    struct tokenquota_limit limits[TOKENQUOTA_LIMITS];
};

/* Parses section into rules[0 .. *n) (room for TOKENQUOTA_MAX_RULES).
 * 0, or ST_ERROR with err (400) naming the path
 * ("token-quotas[0].per-minute.total: expected an integer from 1 to
 * 1000000000, got 0"); unknown keys, an entry without a limit, and two
 * entries alike in tenant and model are refused. */
int tokenquota_rules_parse(const struct json_value *section, struct tokenquota_rule *rules,
                           uint32_t *n, struct error *err);

/* Whether a and b have the same scope and limits (a reload keeps the
 * counters of such a rule). */
bool tokenquota_rule_same(const struct tokenquota_rule *a, const struct tokenquota_rule *b);

/* "minute" or "day"; "prompt", "completion" or "total". */
const char *tokenquota_window_name(enum tokenquota_window w);
const char *tokenquota_kind_name(enum tokenquota_kind k);

#endif
