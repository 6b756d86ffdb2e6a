#include "policy/tokenquota_rules.h"

#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "policy/fields.h"

#define SECTION "token-quotas"

const char *tokenquota_window_name(enum tokenquota_window w)
{
    return w == TOKENQUOTA_MINUTE ? "minute" : "day";
}

const char *tokenquota_kind_name(enum tokenquota_kind k)
{
    static const char *const names[] = {[TOKENQUOTA_PROMPT] = "prompt",
                                        [TOKENQUOTA_COMPLETION] = "completion",
                                        [TOKENQUOTA_TOTAL] = "total"};
    return names[k];
}

/* The limits of one window (`per-minute` or `per-day`), appended to r. */
static int parse_window(const struct json_value *entry, uint32_t i, enum tokenquota_window w,
                        struct tokenquota_rule *r, struct error *err)
{
    static const char *const known[] = {"prompt", "completion", "total", NULL};
    const char *key = w == TOKENQUOTA_MINUTE ? "per-minute" : "per-day";
    const struct json_value *v = json_get(entry, key);
    if (!v || v->type == JSON_NULL)
        return 0;
    char path[48];
    snprintf(path, sizeof path, SECTION "[%u].%s", i, key);
    if (fields_check_object(v, path, known, err) != 0)
        return ST_ERROR;
    uint64_t max = w == TOKENQUOTA_MINUTE ? TOKENQUOTA_MAX_MINUTE : TOKENQUOTA_MAX_DAY;
    for (enum tokenquota_kind k = TOKENQUOTA_PROMPT; k <= TOKENQUOTA_TOTAL; k++) {
        uint64_t limit = 0;
        if (fields_u64(v, path, tokenquota_kind_name(k), 1, max, &limit, err) != 0)
            return ST_ERROR;
        if (limit == 0)
            continue;
        struct tokenquota_limit *l = &r->limits[r->nlimits++];
        l->window = w;
        l->kind = k;
        l->limit = limit;
        if (w == TOKENQUOTA_MINUTE)
            gcra_params_init(&l->gcra, (double)limit / 60.0, (uint32_t)limit);
    }
    return 0;
}

static int parse_rule(const struct json_value *v, uint32_t i, struct tokenquota_rule *r,
                      struct error *err)
{
    static const char *const known[] = {"tenant", "model", "per-minute", "per-day", NULL};
    char path[32];
    snprintf(path, sizeof path, SECTION "[%u]", i);
    if (fields_check_object(v, path, known, err) != 0)
        return ST_ERROR;
    memset(r, 0, sizeof *r);
    if (fields_name(v, path, "tenant", r->tenant, sizeof r->tenant, false, err) != 0 ||
        fields_name(v, path, "model", r->model, sizeof r->model, false, err) != 0)
        return ST_ERROR;
    if (r->tenant[0])
        r->tenant_kind = strcmp(r->tenant, "*") == 0 ? RATELIMIT_EACH_TENANT : RATELIMIT_ONE_TENANT;
    if (r->tenant_kind == RATELIMIT_EACH_TENANT)
        r->tenant[0] = '\0';
    if (parse_window(v, i, TOKENQUOTA_MINUTE, r, err) != 0 ||
        parse_window(v, i, TOKENQUOTA_DAY, r, err) != 0)
        return ST_ERROR;
    if (r->nlimits == 0)
        return error_set(err, 400,
                         "%s: no limit (give per-minute or per-day, with prompt, completion "
                         "or total)",
                         path);
    return 0;
}

static bool same_scope(const struct tokenquota_rule *a, const struct tokenquota_rule *b)
{
    return a->tenant_kind == b->tenant_kind && strcmp(a->tenant, b->tenant) == 0 &&
           strcmp(a->model, b->model) == 0;
}

int tokenquota_rules_parse(const struct json_value *section, struct tokenquota_rule *rules,
                           uint32_t *n, struct error *err)
{
    *n = 0;
    if (!section || section->type == JSON_NULL)
        return 0;
    if (fields_check_list(section, SECTION, TOKENQUOTA_MAX_RULES, err) != 0)
        return ST_ERROR;
    for (uint32_t i = 0; i < section->len; i++) {
        if (parse_rule(&section->u.items[i], i, &rules[i], err) != 0)
            return ST_ERROR;
        for (uint32_t k = 0; k < i; k++)
            if (same_scope(&rules[k], &rules[i]))
                return error_set(err, 400,
                                 SECTION "[%u]: the same tenant and model as " SECTION
                                         "[%u] (put both limits in one entry)",
                                 i, k);
    }
    *n = section->len;
    return 0;
}

bool tokenquota_rule_same(const struct tokenquota_rule *a, const struct tokenquota_rule *b)
{
    if (!same_scope(a, b) || a->nlimits != b->nlimits)
        return false;
    for (uint32_t k = 0; k < a->nlimits; k++)
        if (a->limits[k].window != b->limits[k].window || a->limits[k].kind != b->limits[k].kind ||
            a->limits[k].limit != b->limits[k].limit)
            return false;
    return true;
}
