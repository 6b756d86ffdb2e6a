#include "policy/ratelimit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "obs/metrics.h"

/* One bucket and what it decided. */
struct bucket {
    _Atomic uint64_t tat; /* gcra.h */
    _Atomic uint64_t admitted, limited;
};

/* A rule's long-lived state, shared by the configurations that have the
 * rule (reference counted). */
struct rule_state {
    atomic_uint refs;
    struct bucket one;          /* the rule's bucket; for "*" rules the overflow bucket */
    struct tenant_slots *slots; /* "*" rules: a struct bucket per tenant */
};

/* The configuration is also the published snapshot. */
struct ratelimit_config {
    atomic_uint refs;
    uint32_t nrules;
    struct ratelimit_rule rules[RATELIMIT_MAX_RULES];
    struct rule_state *states[RATELIMIT_MAX_RULES];
};

struct ratelimit {
    pthread_mutex_t lock; /* current: taking a reference, swapping */
    struct ratelimit_config *current;
    atomic_bool active;         /* current has rules (read without the lock) */
    pthread_mutex_t write_lock; /* ratelimit_apply: one at a time */
};

int ratelimit_config_check_tenants(const struct ratelimit_config *c,
                                   bool (*known)(const void *ctx, const char *name),
                                   const void *ctx, bool any_tenants, struct error *err)
{
    for (uint32_t i = 0; c && i < c->nrules; i++) {
        const struct ratelimit_rule *r = &c->rules[i];
        if (r->tenant_kind == RATELIMIT_EACH_TENANT && !any_tenants)
            return error_set(err, 400,
                             "rate-limits[%u].tenant: \"*\" needs tenants, and the auth section "
                             "has none (without API keys no call has a tenant)",
                             i);
        if (r->tenant_kind == RATELIMIT_ONE_TENANT && !known(ctx, r->tenant))
            return error_set(err, 400,
                             "rate-limits[%u].tenant: '%s' is not a tenant of the auth section", i,
                             r->tenant);
    }
    return 0;
}

/* ---- states and configurations ---------------------------------------------------- */

static struct rule_state *state_new(const struct ratelimit_rule *r)
{
    struct rule_state *st = mem_calloc(1, sizeof *st);
    if (!st)
        return NULL;
    if (r->tenant_kind == RATELIMIT_EACH_TENANT) {
        st->slots = tenant_slots_new(sizeof(struct bucket));
        if (!st->slots) {
            mem_free(st);
            return NULL;
        }
    }
    atomic_init(&st->refs, 1);
    return st;
}

static void state_unref(struct rule_state *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
        tenant_slots_free(st->slots);
        mem_free(st);
    }
}

static void config_unref(struct ratelimit_config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < c->nrules; i++)
        state_unref(c->states[i]);
    mem_free(c);
}

int ratelimit_config_parse(const struct json_value *section, struct ratelimit_config **out,
                           struct error *err)
{
    *out = NULL;
    struct ratelimit_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory for the rate limits");
    atomic_init(&c->refs, 1);
    if (ratelimit_rules_parse(section, c->rules, &c->nrules, err) != 0) {
        c->nrules = 0;
        config_unref(c);
        return -1;
    }
    for (uint32_t i = 0; i < c->nrules; i++) {
        c->states[i] = state_new(&c->rules[i]);
        if (!c->states[i]) {
            c->nrules = i;
            config_unref(c);
            return error_set(err, 500, "out of memory for the buckets of the rate limits");
        }
    }
    *out = c;
    return 0;
}

void ratelimit_config_free(struct ratelimit_config *c)
{
    config_unref(c);
}

static struct ratelimit_config *config_acquire(struct ratelimit *rl)
{
    pthread_mutex_lock(&rl->lock);
    struct ratelimit_config *c = rl->current;
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&rl->lock);
    return c;
}

/* ---- the store ---------------------------------------------------------------------- */

struct ratelimit *ratelimit_new(void)
{
    struct ratelimit *rl = mem_calloc(1, sizeof *rl);
    struct error err;
    if (!rl || ratelimit_config_parse(NULL, &rl->current, &err) != 0) {
        mem_free(rl);
        return NULL;
    }
    pthread_mutex_init(&rl->lock, NULL);
    pthread_mutex_init(&rl->write_lock, NULL);
    return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
    if (!rl)
        return;
    config_unref(rl->current);
    pthread_mutex_destroy(&rl->lock);
    pthread_mutex_destroy(&rl->write_lock);
    mem_free(rl);
}

void ratelimit_apply(struct ratelimit *rl, struct ratelimit_config *c)
{
    pthread_mutex_lock(&rl->write_lock);
    struct ratelimit_config *old = rl->current; /* only writers change it */
    bool taken[RATELIMIT_MAX_RULES] = {false};
    uint32_t kept = 0;
    for (uint32_t i = 0; i < c->nrules; i++) {
        for (uint32_t k = 0; k < old->nrules; k++) {
            if (taken[k] || !ratelimit_rule_same(&old->rules[k], &c->rules[i]))
                continue;
            taken[k] = true;
            state_unref(c->states[i]);
            c->states[i] = old->states[k];
            atomic_fetch_add_explicit(&c->states[i]->refs, 1, memory_order_relaxed);
            kept++;
            break;
        }
    }
    pthread_mutex_lock(&rl->lock);
    rl->current = c;
    atomic_store_explicit(&rl->active, c->nrules > 0, memory_order_relaxed);
    pthread_mutex_unlock(&rl->lock);
    pthread_mutex_unlock(&rl->write_lock);
    if (c->nrules || old->nrules)
        log_info("rate limits: %u rules (%u unchanged keep their buckets, %u start full)",
                 c->nrules, kept, c->nrules - kept);
    config_unref(old); /* calls admitted under it hold their own reference */
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
    return b ? b : &st->one;
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
    if (!atomic_load_explicit(&rl->active, memory_order_relaxed))
        return 0;
    struct ratelimit_config *c = config_acquire(rl);
    struct taken taken[RATELIMIT_MAX_RULES];
    uint32_t n = 0;
    int rc = 0;
    /* Tenant rules first: a tenant over its own limit is refused before it
     * takes a token of a bucket other tenants share. */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint32_t i = 0; i < c->nrules; i++) {
            const struct ratelimit_rule *r = &c->rules[i];
            if ((r->tenant_kind == RATELIMIT_ANY_TENANT) != (pass == 1) ||
                !rule_matches(r, tenant, model))
                continue;
            struct bucket *b = r->tenant_kind == RATELIMIT_EACH_TENANT
                                   ? tenant_bucket(c->states[i], i, tenant)
                                   : &c->states[i]->one;
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
    config_unref(c);
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
    if (c->nrules == 0)
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
        for (uint32_t i = 0; i < c->nrules; i++) {
            const struct ratelimit_rule *r = &c->rules[i];
            struct rule_state *st = c->states[i];
            if (r->tenant_kind != RATELIMIT_EACH_TENANT) {
                write_bucket(out, what, i, r,
                             r->tenant_kind == RATELIMIT_ONE_TENANT ? r->tenant : NULL, &st->one,
                             now);
                continue;
            }
            for (uint32_t k = 0; k < TENANT_SLOTS_SLOTS; k++) {
                const char *name;
                const struct bucket *b = tenant_slots_at(st->slots, k, &name);
                if (b)
                    write_bucket(out, what, i, r, name, b, now);
            }
            /* The bucket tenants beyond RATELIMIT_TENANTS share. */
            write_bucket(out, what, i, r, "*", &st->one, now);
        }
    }
out_unref:
    config_unref(c);
}
