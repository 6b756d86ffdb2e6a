#include "policy/ratelimit_rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "policy/fields.h"

#define SECTION "rate-limits"

/* What a value is, for "got ..." (fields.h), a string not echoed. */
static void describe_value(const struct json_value *v, char *out, size_t size)
{
    if (v->type == JSON_STRING)
        snprintf(out, size, "a string");
    else
        fields_describe(v, out, size);
}

static int check_keys(const struct json_value *v, uint32_t i, struct error *err)
{
    static const char *const known[] = {"tenant", "model", "rate", "burst", NULL};
    for (uint32_t k = 0; k < v->len; k++) {
        const char *key = v->u.members[k].key;
        bool ok = false;
        for (const char *const *n = known; *n && !ok; n++)
            ok = strcmp(*n, key) == 0;
        if (!ok)
            return error_set(err, 400,
                             SECTION "[%u].%.64s: unknown key (a rule has tenant, model, rate "
                                     "and burst)",
                             i, key);
    }
    return 0;
}

static int get_name(const struct json_value *v, uint32_t i, const char *key, size_t max,
                    const char *what, char *out, struct error *err)
{
    char got[48];
    if (v->type != JSON_STRING) {
        describe_value(v, got, sizeof got);
        return error_set(err, 400,
                         SECTION "[%u].%s: expected a %s (a string; quote a name that looks "
                                 "like a number), got %s",
                         i, key, what, got);
    }
    if (v->len == 0 || v->len >= max || strlen(v->u.str) != v->len)
        return error_set(err, 400, SECTION "[%u].%s: expected a %s of 1 to %zu characters", i, key,
                         what, max - 1);
    memcpy(out, v->u.str, v->len + 1);
    return 0;
}

static int get_rate(const struct json_value *v, uint32_t i, double *out, struct error *err)
{
    char got[48];
    double d;
    if (v->type == JSON_NUMBER && json_num_f64(v, &d) == 0 && isfinite(d) &&
        d >= RATELIMIT_MIN_RATE && d <= RATELIMIT_MAX_RATE) {
        *out = d;
        return 0;
    }
    describe_value(v, got, sizeof got);
    return error_set(err, 400,
                     SECTION "[%u].rate: expected a number of tokens per second from %g to %.0f, "
                             "got %s",
                     i, RATELIMIT_MIN_RATE, RATELIMIT_MAX_RATE, got);
}

static int get_burst(const struct json_value *v, uint32_t i, uint32_t *out, struct error *err)
{
    char got[48];
    int64_t n;
    if (v->type == JSON_NUMBER && json_num_i64(v, &n) == 0 && n >= 1 && n <= RATELIMIT_MAX_BURST) {
        *out = (uint32_t)n;
        return 0;
    }
    describe_value(v, got, sizeof got);
    return error_set(err, 400, SECTION "[%u].burst: expected an integer from 1 to %u, got %s", i,
                     RATELIMIT_MAX_BURST, got);
}

static int parse_rule(const struct json_value *v, uint32_t i, struct ratelimit_rule *r,
                      struct error *err)
{
    char got[48];
    if (v->type != JSON_OBJECT) {
        describe_value(v, got, sizeof got);
        return error_set(err, 400,
                         SECTION "[%u]: expected a mapping of tenant, model, rate and burst, "
                                 "got %s",
                         i, got);
    }
    if (check_keys(v, i, err) != 0)
        return ST_ERROR;
    memset(r, 0, sizeof *r);
    const struct json_value *x;
    if ((x = json_get(v, "tenant"))) {
        if (get_name(x, i, "tenant", RATELIMIT_TENANT_MAX, "tenant name", r->tenant, err) != 0)
            return ST_ERROR;
        r->tenant_kind = strcmp(r->tenant, "*") == 0 ? RATELIMIT_EACH_TENANT : RATELIMIT_ONE_TENANT;
        if (r->tenant_kind == RATELIMIT_EACH_TENANT)
            r->tenant[0] = '\0';
    }
    if ((x = json_get(v, "model")) &&
        get_name(x, i, "model", RATELIMIT_MODEL_MAX, "model name", r->model, err) != 0)
        return ST_ERROR;
    if (!(x = json_get(v, "rate")))
        return error_set(err, 400, SECTION "[%u].rate: required (tokens per second)", i);
    if (get_rate(x, i, &r->rate, err) != 0)
        return ST_ERROR;
    double dflt = ceil(r->rate);
    r->burst = dflt < 1 ? 1 : dflt > RATELIMIT_MAX_BURST ? RATELIMIT_MAX_BURST : (uint32_t)dflt;
    if ((x = json_get(v, "burst")) && get_burst(x, i, &r->burst, err) != 0)
        return ST_ERROR;
    gcra_params_init(&r->gcra, r->rate, r->burst);
    return 0;
}

int ratelimit_rules_parse(const struct json_value *section, struct ratelimit_rule *rules,
                          uint32_t *n, struct error *err)
{
    char got[48];
    *n = 0;
    if (!section || section->type == JSON_NULL)
        return 0;
    if (section->type != JSON_ARRAY) {
        describe_value(section, got, sizeof got);
        return error_set(err, 400, SECTION ": expected a list of rules, got %s", got);
    }
    if (section->len > RATELIMIT_MAX_RULES)
        return error_set(err, 400, SECTION ": at most %d rules, got %u", RATELIMIT_MAX_RULES,
                         section->len);
    for (uint32_t i = 0; i < section->len; i++) {
        if (parse_rule(&section->u.items[i], i, &rules[i], err) != 0)
            return ST_ERROR;
        for (uint32_t k = 0; k < i; k++)
            if (ratelimit_rule_same(&rules[k], &rules[i]))
                return error_set(err, 400, SECTION "[%u]: the same rule as " SECTION "[%u]", i, k);
    }
    *n = section->len;
    return 0;
}

bool ratelimit_rule_same(const struct ratelimit_rule *a, const struct ratelimit_rule *b)
{
    return a->tenant_kind == b->tenant_kind && strcmp(a->tenant, b->tenant) == 0 &&
           strcmp(a->model, b->model) == 0 && a->rate == b->rate && a->burst == b->burst;
}

bool ratelimit_scope_matches(enum ratelimit_tenant kind, const char *rule_tenant,
                             const char *rule_model, const char *tenant, const char *model)
{
    if (rule_model[0] && strcmp(rule_model, model) != 0)
        return false;
    switch (kind) {
    case RATELIMIT_ANY_TENANT:
        return true;
    case RATELIMIT_ONE_TENANT:
        return tenant && strcmp(rule_tenant, tenant) == 0;
    case RATELIMIT_EACH_TENANT:
        return tenant != NULL;
    }
    return false;
}

void ratelimit_scope_describe(enum ratelimit_tenant kind, const char *rule_tenant,
                              const char *rule_model, const char *tenant, char *out, size_t size)
{
    const char *who = kind == RATELIMIT_ONE_TENANT    ? rule_tenant
                      : kind == RATELIMIT_EACH_TENANT ? tenant
                                                      : NULL;
    if (who && rule_model[0])
        snprintf(out, size, "tenant %.63s on model %s", who, rule_model);
    else if (who)
        snprintf(out, size, "tenant %.63s", who);
    else if (rule_model[0])
        snprintf(out, size, "model %s", rule_model);
    else
        snprintf(out, size, "the server");
}

int ratelimit_scope_check_tenant(const char *section, uint32_t i, enum ratelimit_tenant kind,
                                 const char *rule_tenant,
                                 bool (*known)(const void *ctx, const char *name), const void *ctx,
                                 bool any_tenants, struct error *err)
{
    if (kind == RATELIMIT_EACH_TENANT && !any_tenants)
        return error_set(err, 400,
                         "%s[%u].tenant: \"*\" needs tenants, and the auth section has none "
                         "(without API keys no call has a tenant)",
                         section, i);
    if (kind == RATELIMIT_ONE_TENANT && !known(ctx, rule_tenant))
        return error_set(err, 400, "%s[%u].tenant: '%s' is not a tenant of the auth section",
                         section, i, rule_tenant);
    return 0;
}

void ratelimit_rule_describe(const struct ratelimit_rule *r, const char *tenant, char *out,
                             size_t size)
{
    ratelimit_scope_describe(r->tenant_kind, r->tenant, r->model, tenant, out, size);
}
