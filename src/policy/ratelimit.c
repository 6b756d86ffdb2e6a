#include "policy/ratelimit.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "obs/metrics.h"
#include "policy/published.h"

/* One bucket and what it decided. */
struct bucket {
    _Atomic uint64_t tat; /* gcra.h */
    _Atomic uint64_t admitted, limited;
};

/* The configuration is also the published snapshot (published.h): each
 * rule's state holds a struct bucket (per tenant for "*" rules). */
struct ratelimit_config {
    struct published_rules pub; /* first: its states[i] is rule i's */
    struct ratelimit_rule rules[RATELIMIT_MAX_RULES];
};

_Static_assert(RATELIMIT_MAX_RULES <= PUBLISHED_MAX_RULES, "every rule has a state");

struct ratelimit {
    struct published pub;
};

int ratelimit_config_check_tenants(const struct ratelimit_config *c,
                                   bool (*known)(const void *ctx, const char *name),
                                   const void *ctx, bool any_tenants, struct error *err)
{
    for (uint32_t i = 0; c && i < c->pub.nrules; i++) {
        const struct ratelimit_rule *r = &c->rules[i];
        if (ratelimit_scope_check_tenant("rate-limits", i, r->tenant_kind, r->tenant, known, ctx,
                                         any_tenants, err) != 0)
            return ST_ERROR;
    }
    return 0;
}

/* ---- configurations and the store --------------------------------------------------- */

static bool rule_same(const void *a, const void *b)
{
    return ratelimit_rule_same(a, b);
}

int ratelimit_config_parse(const struct json_value *section, struct ratelimit_config **out,
                           struct error *err)
{
    *out = NULL;
    struct ratelimit_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory for the rate limits");
    published_rules_init(&c->pub, c->rules, sizeof c->rules[0], rule_same);
    uint32_t n;
    if (ratelimit_rules_parse(section, c->rules, &n, err) != 0) {
        published_unref(&c->pub);
        return ST_ERROR;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (published_add_state(&c->pub, sizeof(struct bucket),
                                c->rules[i].tenant_kind == RATELIMIT_EACH_TENANT) != 0) {
            published_unref(&c->pub);
            return error_set(err, 500, "out of memory for the buckets of the rate limits");
        }
    }
    *out = c;
    return 0;
}

void ratelimit_config_free(struct ratelimit_config *c)
{
    published_unref(c ? &c->pub : NULL);
}

static struct ratelimit_config *config_acquire(struct ratelimit *rl)
{
    return (struct ratelimit_config *)published_acquire(&rl->pub);
}

struct ratelimit *ratelimit_new(void)
{
    struct ratelimit *rl = mem_calloc(1, sizeof *rl);
    struct ratelimit_config *empty;
    struct error err;
    if (!rl || ratelimit_config_parse(NULL, &empty, &err) != 0) {
        mem_free(rl);
        return NULL;
    }
    published_init(&rl->pub, &empty->pub);
    return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
    if (!rl)
        return;
    published_destroy(&rl->pub);
    mem_free(rl);
}

void ratelimit_apply(struct ratelimit *rl, struct ratelimit_config *c)
{
    uint32_t n = c->pub.nrules, old_n;
    uint32_t kept = published_apply(&rl->pub, &c->pub, &old_n);
    if (n || old_n)
        log_info("rate limits: %u rules (%u unchanged keep their buckets, %u start full)", n, kept,
                 n - kept);
}

/* ---- admission ---------------------------------------------------------------------- */

/* The bucket of tenant in a "*" rule: its own, or the overflow bucket
 * once RATELIMIT_TENANTS tenants have one. */
static struct bucket *tenant_bucket(struct rule_state *st, uint32_t rule, const char *tenant)
{
    bool first_overflow;
    struct bucket *b = tenant_slots_get(st->slots, tenant, &first_overflow);
    if (first_overflow)
        log_warn("rate limits: rule %u has %u tenants with a bucket of their own; tenant "
                 "%.63s and later ones share one bucket",
                 rule, RATELIMIT_TENANTS, tenant);
    return b ? b : (struct bucket *)st->one;
}

static bool rule_matches(const struct ratelimit_rule *r, const char *tenant, const char *model)
{
    return ratelimit_scope_matches(r->tenant_kind, r->tenant, r->model, tenant, model);
}

static void describe_bucket(const struct ratelimit_rule *r, uint64_t tat, uint64_t now,
                            struct serve_ratelimit *info)
{
    info->limit = r->burst;
    info->remaining = gcra_remaining(tat, &r->gcra, now);
    uint64_t full = gcra_until_full_ns(tat, now);
    info->reset_s = (uint32_t)((full + 999999999ull) / 1000000000ull);
    info->set = true;
}

struct taken {
    struct bucket *b;
    const struct ratelimit_rule *r;
};

int ratelimit_admit(struct ratelimit *rl, const char *tenant, const char *model, uint64_t now_ns,
                    struct serve_ratelimit *info, struct error *err)
{
    info->set = false;
    if (!published_active(&rl->pub))
        return 0;
    struct ratelimit_config *c = config_acquire(rl);
    struct taken taken[RATELIMIT_MAX_RULES];
    uint32_t n = 0;
    int rc = 0;
    /* Tenant rules first: a tenant over its own limit is refused before it
     * takes a token of a bucket other tenants share. */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint32_t i = 0; i < c->pub.nrules; i++) {
            const struct ratelimit_rule *r = &c->rules[i];
            if ((r->tenant_kind == RATELIMIT_ANY_TENANT) != (pass == 1) ||
                !rule_matches(r, tenant, model))
                continue;
            struct bucket *b = r->tenant_kind == RATELIMIT_EACH_TENANT
                                   ? tenant_bucket(c->pub.states[i], i, tenant)
                                   : (struct bucket *)c->pub.states[i]->one;
            uint64_t wait;
            if (gcra_take(&b->tat, &r->gcra, now_ns, &wait)) {
                taken[n++] = (struct taken){b, r};
                continue;
            }
            while (n > 0) {
                n--;
                gcra_give_back(&taken[n].b->tat, &taken[n].r->gcra, now_ns);
            }
            atomic_fetch_add_explicit(&b->limited, 1, memory_order_relaxed);
            describe_bucket(r, atomic_load_explicit(&b->tat, memory_order_relaxed), now_ns, info);
            char what[RATELIMIT_DESCRIBE_MAX];
            ratelimit_rule_describe(r, tenant, what, sizeof what);
            rc = error_set(err, 429, "rate limit of %s exceeded (%g/s, burst %u)", what, r->rate,
                           r->burst);
            err->retry_after_s = (unsigned)((wait + 999999999ull) / 1000000000ull);
            break;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        struct serve_ratelimit one;
        atomic_fetch_add_explicit(&taken[k].b->admitted, 1, memory_order_relaxed);
        describe_bucket(taken[k].r, atomic_load_explicit(&taken[k].b->tat, memory_order_relaxed),
                        now_ns, &one);
        if (!info->set || one.remaining < info->remaining)
            *info = one;
    }
    published_unref(&c->pub);
    return rc;
}

enum stage_result ratelimit_stage(struct infer_call *call, const void *cfg)
{
    struct ratelimit *rl = (struct ratelimit *)cfg; /* the buckets are atomics */
    struct error err;
    if (ratelimit_admit(rl, call->tenant, call->model_name, clock_now_ns(), &call->ratelimit,
                        &err) == 0)
        return STAGE_CONTINUE;
    serve_call_error(call, err.status, "%s", err.msg);
    call->req.err.retry_after_s = err.retry_after_s;
    return STAGE_DONE;
}

/* ---- metrics ------------------------------------------------------------------------- */

struct series {
    char rule[12];
    const char *labels[8]; /* rule, [tenant], [model], outcome */
    uint32_t n;
};

static void series_init(struct series *s, uint32_t i, const struct ratelimit_rule *r,
                        const char *tenant)
{
    snprintf(s->rule, sizeof s->rule, "%u", i);
    s->n = 0;
    s->labels[s->n++] = "rule";
    s->labels[s->n++] = s->rule;
    if (tenant) {
        s->labels[s->n++] = "tenant";
        s->labels[s->n++] = tenant;
    }
    if (r->model[0]) {
        s->labels[s->n++] = "model";
        s->labels[s->n++] = r->model;
    }
}

enum family { REQUESTS_TOTAL, TOKENS };

static void write_bucket(struct buf *out, enum family what, uint32_t i,
                         const struct ratelimit_rule *r, const char *tenant, const struct bucket *b,
                         uint64_t now)
{
    struct series s;
    series_init(&s, i, r, tenant);
    if (what == TOKENS) {
        uint64_t tat = atomic_load_explicit(&b->tat, memory_order_relaxed);
        metrics_write_u64(out, "inferd_rate_limit_tokens", s.labels, s.n / 2,
                          gcra_remaining(tat, &r->gcra, now));
        return;
    }
    static const char *const outcomes[] = {"admitted", "limited"};
    uint64_t v[] = {atomic_load_explicit(&b->admitted, memory_order_relaxed),
                    atomic_load_explicit(&b->limited, memory_order_relaxed)};
    s.labels[s.n++] = "outcome";
    for (int k = 0; k < 2; k++) {
        s.labels[s.n] = outcomes[k];
        metrics_write_u64(out, "inferd_rate_limit_requests_total", s.labels, s.n / 2 + 1, v[k]);
    }
}

void ratelimit_write_metrics(struct ratelimit *rl, struct buf *out)
{
    struct ratelimit_config *c = config_acquire(rl);
    uint64_t now = clock_now_ns();
    if (c->pub.nrules == 0)
        goto out_unref;
    static const char *const names[] = {[REQUESTS_TOTAL] = "inferd_rate_limit_requests_total",
                                        [TOKENS] = "inferd_rate_limit_tokens"};
    static const char *const types[] = {[REQUESTS_TOTAL] = "counter", [TOKENS] = "gauge"};
    static const char *const helps[] = {
        [REQUESTS_TOTAL] = "Calls a rate-limit rule admitted or refused (per rule, and per "
                           "tenant for tenant \"*\")",
        [TOKENS] = "Tokens left in a rate-limit bucket"};
    for (enum family what = REQUESTS_TOTAL; what <= TOKENS; what++) {
        metrics_write_header(out, names[what], types[what], helps[what]);
        for (uint32_t i = 0; i < c->pub.nrules; i++) {
            const struct ratelimit_rule *r = &c->rules[i];
            struct rule_state *st = c->pub.states[i];
            const struct bucket *one = (const struct bucket *)st->one;
            if (r->tenant_kind != RATELIMIT_EACH_TENANT) {
                write_bucket(out, what, i, r,
                             r->tenant_kind == RATELIMIT_ONE_TENANT ? r->tenant : NULL, one, now);
                continue;
            }
            for (uint32_t k = 0; k < TENANT_SLOTS_SLOTS; k++) {
                const char *name;
                const struct bucket *b = tenant_slots_at(st->slots, k, &name);
                if (b)
                    write_bucket(out, what, i, r, name, b, now);
            }
            /* The bucket tenants beyond RATELIMIT_TENANTS share. */
            write_bucket(out, what, i, r, "*", one, now);
        }
    }
out_unref:
    published_unref(&c->pub);
}
