#include "policy/tokenquota.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "obs/metrics.h"
#include "policy/published.h"

#define DAY_S 86400ull
#define DAY_SHIFT 40 /* a day word: the day number above, the tokens used below */
#define USED_MASK ((1ull << DAY_SHIFT) - 1)
#define NREASONS 3 /* SERVE_QUOTA_RATE .. SERVE_QUOTA_TOO_LARGE */

_Static_assert(TOKENQUOTA_MAX_DAY <= USED_MASK, "a day's tokens fit below the day number");
_Static_assert(TOKENQUOTA_MAX_MINUTE <= UINT32_MAX, "a bucket's size is a gcra burst");

/* One limit of one scope: a gcra.h word (per minute) or a day word (per
 * day), and the calls it refused, by reason. */
struct counter {
    _Atomic uint64_t word;
    _Atomic uint64_t refusals[NREASONS];
};

/* The configuration is also the published snapshot (published.h): each
 * rule's state holds its counters, one per limit (per tenant for "*"
 * rules). */
struct tokenquota_config {
    struct published_rules pub; /* first: its states[i] is rule i's */
    struct tokenquota_rule rules[TOKENQUOTA_MAX_RULES];
};

_Static_assert(TOKENQUOTA_MAX_RULES <= PUBLISHED_MAX_RULES, "every rule has a state");

struct tokenquota {
    struct published pub;
};

int tokenquota_config_check_tenants(const struct tokenquota_config *c,
                                    bool (*known)(const void *ctx, const char *name),
                                    const void *ctx, bool any_tenants, struct error *err)
{
    for (uint32_t i = 0; c && i < c->pub.nrules; i++) {
        const struct tokenquota_rule *r = &c->rules[i];
        if (ratelimit_scope_check_tenant("token-quotas", i, r->tenant_kind, r->tenant, known, ctx,
                                         any_tenants, err) != 0)
            return ST_ERROR;
    }
    return 0;
}

/* ---- configurations and the store --------------------------------------------------- */

static bool rule_same(const void *a, const void *b)
{
    return tokenquota_rule_same(a, b);
}

int tokenquota_config_parse(const struct json_value *section, struct tokenquota_config **out,
                            struct error *err)
{
    *out = NULL;
    struct tokenquota_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory for the token quotas");
    published_rules_init(&c->pub, c->rules, sizeof c->rules[0], rule_same);
    uint32_t n;
    if (tokenquota_rules_parse(section, c->rules, &n, err) != 0) {
        published_unref(&c->pub);
        return ST_ERROR;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct tokenquota_rule *r = &c->rules[i];
        if (published_add_state(&c->pub, r->nlimits * sizeof(struct counter),
                                r->tenant_kind == RATELIMIT_EACH_TENANT) != 0) {
            published_unref(&c->pub);
            return error_set(err, 500, "out of memory for the counters of the token quotas");
        }
    }
    *out = c;
    return 0;
}

void tokenquota_config_free(struct tokenquota_config *c)
{
    published_unref(c ? &c->pub : NULL);
}

static struct tokenquota_config *config_acquire(struct tokenquota *tq)
{
    return (struct tokenquota_config *)published_acquire(&tq->pub);
}

static void config_unref(struct tokenquota_config *c)
{
    published_unref(&c->pub);
}

struct tokenquota *tokenquota_new(void)
{
    struct tokenquota *tq = mem_calloc(1, sizeof *tq);
    struct tokenquota_config *empty;
    struct error err;
    if (!tq || tokenquota_config_parse(NULL, &empty, &err) != 0) {
        mem_free(tq);
        return NULL;
    }
    published_init(&tq->pub, &empty->pub);
    return tq;
}

void tokenquota_free(struct tokenquota *tq)
{
    if (!tq)
        return;
    published_destroy(&tq->pub);
    mem_free(tq);
}

void tokenquota_apply(struct tokenquota *tq, struct tokenquota_config *c)
{
    uint32_t n = c->pub.nrules, old_n;
    uint32_t kept = published_apply(&tq->pub, &c->pub, &old_n);
    if (n || old_n)
        log_info("token quotas: %u rules (%u unchanged keep their counters, %u start empty)", n,
                 kept, n - kept);
}

/* ---- counters ------------------------------------------------------------------------ */

/* The counters of rule i for tenant: the rule's, or for a "*" rule the
 * tenant's own (the overflow ones once TOKENQUOTA_TENANTS have theirs). */
static struct counter *counters_of(struct tokenquota_config *c, uint32_t i, const char *tenant)
{
    struct rule_state *st = c->pub.states[i];
    struct counter *one = (struct counter *)st->one;
    if (c->rules[i].tenant_kind != RATELIMIT_EACH_TENANT)
        return one;
    bool first_overflow;
    struct counter *own = tenant_slots_get(st->slots, tenant, &first_overflow);
    if (first_overflow)
        log_warn("token quotas: rule %u has %u tenants with counters of their own; tenant "
                 "%.63s and later ones share one set",
                 i, TOKENQUOTA_TENANTS, tenant);
    return own ? own : one;
}

static uint64_t amount(enum tokenquota_kind k, uint32_t prompt, uint32_t completion)
{
    return k == TOKENQUOTA_PROMPT       ? prompt
           : k == TOKENQUOTA_COMPLETION ? completion
                                        : (uint64_t)prompt + completion;
}

/* The tokens a day word says were used on `day` (another day's: none). */
static uint64_t day_used(uint64_t word, uint64_t day)
{
    return word >> DAY_SHIFT == day ? word & USED_MASK : 0;
}

/* Takes n tokens of a per-day counter on `day`. A word already on a later
 * day (a thread whose clock passed midnight first) is charged as it is. */
static bool day_take(_Atomic uint64_t *w, uint64_t limit, uint64_t n, uint64_t day)
{
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        uint64_t d = old >> DAY_SHIFT > day ? old >> DAY_SHIFT : day;
        uint64_t used = day_used(old, d);
        if (used + n > limit)
            return false;
        if (atomic_compare_exchange_weak_explicit(w, &old, d << DAY_SHIFT | (used + n),
                                                  memory_order_relaxed, memory_order_relaxed))
            return true;
    }
}

/* Gives back n tokens taken on `day`, if the counter is still on it. */
static void day_give_back(_Atomic uint64_t *w, uint64_t n, uint64_t day)
{
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        if (old >> DAY_SHIFT != day)
            return; /* a new day started: it owes nothing to the last one */
        uint64_t used = old & USED_MASK;
        uint64_t back = day << DAY_SHIFT | (used > n ? used - n : 0);
        if (atomic_compare_exchange_weak_explicit(w, &old, back, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
}

static uint64_t ms_of_ns(uint64_t ns)
{
    return (ns + 999999u) / 1000000u;
}

static uint64_t until_next_day_ms(uint64_t wall_s)
{
    return ((wall_s / DAY_S + 1) * DAY_S - wall_s) * 1000u;
}

/* A counter's state as the headers show it (no refusal). */
static void describe_counter(const struct tokenquota_limit *l, const struct counter *k,
                             uint64_t now_ns, uint64_t wall_s, struct serve_tokens *info)
{
    uint64_t w = atomic_load_explicit(&k->word, memory_order_relaxed);
    info->limit = l->limit;
    if (l->window == TOKENQUOTA_MINUTE) {
        info->remaining = gcra_remaining(w, &l->gcra, now_ns);
        info->reset_ms = ms_of_ns(gcra_until_full_ns(w, now_ns));
    } else {
        uint64_t used = day_used(w, wall_s / DAY_S);
        info->remaining = used < l->limit ? l->limit - used : 0;
        info->reset_ms = until_next_day_ms(wall_s);
    }
    info->retry_ms = 0;
    info->refusal = SERVE_QUOTA_NONE;
    info->set = true;
}

/* ---- reservation and settlement --------------------------------------------------------- */

/* What the call reserves on a counter of kind k, for a message. */
static void describe_amount(enum tokenquota_kind k, uint32_t prompt, uint32_t completion, char *out,
                            size_t size)
{
    if (k == TOKENQUOTA_PROMPT)
        snprintf(out, size, "%u (its prompt)", prompt);
    else if (k == TOKENQUOTA_COMPLETION)
        snprintf(out, size, "%u (max_tokens)", completion);
    else
        snprintf(out, size, "%llu (prompt %u + max_tokens %u)",
                 (unsigned long long)prompt + completion, prompt, completion);
}

/* The refusal of a call by counter k of limit l of rule r: *info and err. */
static int refuse(const struct tokenquota_rule *r, const struct tokenquota_limit *l,
                  struct counter *k, enum serve_quota_refusal why, uint64_t wait_ns,
                  const char *tenant, uint32_t prompt, uint32_t completion, uint64_t now_ns,
                  uint64_t wall_s, struct serve_tokens *info, struct error *err)
{
    atomic_fetch_add_explicit(&k->refusals[why - 1], 1, memory_order_relaxed);
    describe_counter(l, k, now_ns, wall_s, info);
    info->refusal = why;
    if (why == SERVE_QUOTA_RATE)
        info->retry_ms = ms_of_ns(wait_ns);
    else if (why == SERVE_QUOTA_EXHAUSTED || l->window == TOKENQUOTA_DAY)
        info->retry_ms = until_next_day_ms(wall_s);
    else
        info->retry_ms = 60000; /* too large for a minute: not sooner than a whole one */
    char scope[TOKENQUOTA_DESCRIBE_MAX], reserves[64];
    ratelimit_scope_describe(r->tenant_kind, r->tenant, r->model, tenant, scope, sizeof scope);
    describe_amount(l->kind, prompt, completion, reserves, sizeof reserves);
    unsigned long long limit = l->limit, left = info->remaining;
    const char *kind = tokenquota_kind_name(l->kind);
    if (why == SERVE_QUOTA_RATE) {
        unsigned long long tenths = (info->retry_ms + 99) / 100;
        error_set(err, 429,
                  "token budget of %s exceeded: %llu %s tokens per minute, this request "
                  "reserves %s, %llu left; retry in %llu.%llu s",
                  scope, limit, kind, reserves, left, tenths / 10, tenths % 10);
    } else if (why == SERVE_QUOTA_EXHAUSTED) {
        error_set(err, 429,
                  "daily token quota of %s exhausted: %llu %s tokens per day, this request "
                  "reserves %s, %llu left; it renews at 00:00 UTC, in %llu s",
                  scope, limit, kind, reserves, left, (unsigned long long)(info->retry_ms / 1000));
    } else {
        error_set(err, 429,
                  "request too large for the token budget of %s: it reserves %s, the budget "
                  "is %llu %s tokens per %s; lower max_tokens",
                  scope, reserves, limit, kind, tokenquota_window_name(l->window));
    }
    uint64_t s = (info->retry_ms + 999) / 1000;
    err->retry_after_s = s < 1 ? 1 : s > UINT32_MAX ? UINT32_MAX : (unsigned)s;
    return ST_ERROR;
}

/* A counter a reservation took from, to give back on a later refusal. */
struct taken {
    struct counter *k;
    const struct tokenquota_limit *l;
    uint64_t n;
};

static void give_back(const struct taken *t, uint64_t n, uint64_t now_ns, uint64_t day)
{
    if (n == 0)
        return;
    if (t->l->window == TOKENQUOTA_MINUTE)
        gcra_give_back_n(&t->k->word, &t->l->gcra, (uint32_t)n, now_ns);
    else
        day_give_back(&t->k->word, n, day);
}

/* Takes what the call reserves from every limit of rule i, appending to
 * taken; on a refusal returns -1 (what this rule took is in taken). */
static int reserve_rule(struct tokenquota_config *c, uint32_t i, const char *tenant,
                        uint32_t prompt, uint32_t completion, uint64_t now_ns, uint64_t wall_s,
                        struct taken *taken, uint32_t *ntaken, struct serve_tokens *info,
                        struct error *err)
{
    const struct tokenquota_rule *r = &c->rules[i];
    struct counter *ks = counters_of(c, i, tenant);
    for (uint32_t j = 0; j < r->nlimits; j++) {
        const struct tokenquota_limit *l = &r->limits[j];
        struct counter *k = &ks[j];
        uint64_t n = amount(l->kind, prompt, completion), wait = 0;
        if (n > l->limit)
            return refuse(r, l, k, SERVE_QUOTA_TOO_LARGE, 0, tenant, prompt, completion, now_ns,
                          wall_s, info, err);
        if (l->window == TOKENQUOTA_MINUTE
                ? !gcra_take_n(&k->word, &l->gcra, (uint32_t)n, now_ns, &wait)
                : !day_take(&k->word, l->limit, n, wall_s / DAY_S))
            return refuse(r, l, k,
                          l->window == TOKENQUOTA_MINUTE ? SERVE_QUOTA_RATE : SERVE_QUOTA_EXHAUSTED,
                          wait, tenant, prompt, completion, now_ns, wall_s, info, err);
        taken[(*ntaken)++] = (struct taken){k, l, n};
    }
    return 0;
}

int tokenquota_reserve(struct tokenquota *tq, const char *tenant, const char *model,
                       uint32_t prompt, uint32_t completion, uint64_t now_ns, uint64_t wall_s,
                       struct tokenquota_reservation *res, struct serve_tokens *info,
                       struct error *err)
{
    memset(info, 0, sizeof *info);
    *res = (struct tokenquota_reservation){
        .prompt = prompt, .completion = completion, .day = wall_s / DAY_S, .tenant = tenant};
    /* Matched by this copy, here and when settling, so that both agree. */
    snprintf(res->model, sizeof res->model, "%s", model);
    if (!published_active(&tq->pub))
        return 0;
    struct tokenquota_config *c = config_acquire(tq);
    struct taken taken[TOKENQUOTA_MAX_RULES * TOKENQUOTA_LIMITS];
    uint32_t n = 0;
    bool matched = false;
    int rc = 0;
    /* Tenant rules first: a tenant over its own budget is refused before
     * it takes tokens of a budget other tenants share. */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint32_t i = 0; i < c->pub.nrules && rc == 0; i++) {
            const struct tokenquota_rule *r = &c->rules[i];
            if ((r->tenant_kind == RATELIMIT_ANY_TENANT) != (pass == 1) ||
                !ratelimit_scope_matches(r->tenant_kind, r->tenant, r->model, tenant, res->model))
                continue;
            matched = true;
            rc = reserve_rule(c, i, tenant, prompt, completion, now_ns, wall_s, taken, &n, info,
                              err);
        }
    }
    if (rc != 0) {
        while (n > 0) {
            n--;
            give_back(&taken[n], taken[n].n, now_ns, res->day);
        }
        config_unref(c);
        return ST_ERROR;
    }
    if (!matched) {
        config_unref(c);
        return 0;
    }
    for (uint32_t k = 0; k < n; k++) {
        struct serve_tokens one;
        describe_counter(taken[k].l, taken[k].k, now_ns, wall_s, &one);
        if (!info->set || one.remaining < info->remaining)
            *info = one;
    }
    res->config = c; /* the reference the settlement drops */
    return 0;
}

void tokenquota_settle(struct tokenquota_reservation *res, uint32_t prompt_used,
                       uint32_t completion_used, uint64_t now_ns, uint64_t wall_s)
{
    struct tokenquota_config *c = res->config;
    if (!c)
        return;
    res->config = NULL;
    uint32_t p = prompt_used < res->prompt ? prompt_used : res->prompt;
    uint32_t q = completion_used < res->completion ? completion_used : res->completion;
    bool same_day = wall_s / DAY_S == res->day;
    for (uint32_t i = 0; i < c->pub.nrules; i++) {
        const struct tokenquota_rule *r = &c->rules[i];
        if (!ratelimit_scope_matches(r->tenant_kind, r->tenant, r->model, res->tenant, res->model))
            continue;
        struct counter *ks = counters_of(c, i, res->tenant);
        for (uint32_t j = 0; j < r->nlimits; j++) {
            const struct tokenquota_limit *l = &r->limits[j];
            if (l->window == TOKENQUOTA_DAY && !same_day)
                continue; /* charged to the day it was admitted on */
            uint64_t unused = amount(l->kind, res->prompt, res->completion) - amount(l->kind, p, q);
            give_back(&(struct taken){&ks[j], l, unused}, unused, now_ns, res->day);
        }
    }
    config_unref(c);
}

/* ---- metrics ------------------------------------------------------------------------- */

enum family { LIMIT, REMAINING, REFUSALS_TOTAL, NFAMILIES };

struct series {
    char rule[12];
    const char *labels[14]; /* rule, [tenant], [model], window, kind, [reason] */
    uint32_t n;
};

static void write_counter(struct buf *out, enum family what, uint32_t i,
                          const struct tokenquota_rule *r, const struct tokenquota_limit *l,
                          const char *tenant, const struct counter *k, uint64_t now_ns,
                          uint64_t wall_s)
{
    struct series s;
    snprintf(s.rule, sizeof s.rule, "%u", i);
    s.n = 0;
    s.labels[s.n++] = "rule";
    s.labels[s.n++] = s.rule;
    if (tenant) {
        s.labels[s.n++] = "tenant";
        s.labels[s.n++] = tenant;
    }
    if (r->model[0]) {
        s.labels[s.n++] = "model";
        s.labels[s.n++] = r->model;
    }
    s.labels[s.n++] = "window";
    s.labels[s.n++] = tokenquota_window_name(l->window);
    s.labels[s.n++] = "kind";
    s.labels[s.n++] = tokenquota_kind_name(l->kind);
    if (what == LIMIT) {
        metrics_write_u64(out, "inferd_token_quota_limit", s.labels, s.n / 2, l->limit);
    } else if (what == REMAINING) {
        struct serve_tokens info;
        describe_counter(l, k, now_ns, wall_s, &info);
        metrics_write_u64(out, "inferd_token_quota_remaining", s.labels, s.n / 2, info.remaining);
    } else {
        static const char *const reasons[NREASONS] = {"rate", "exhausted", "too_large"};
        s.labels[s.n++] = "reason";
        for (int j = 0; j < NREASONS; j++) {
            /* A bucket refuses for want of rate, a day counter when spent. */
            if (j + 1 ==
                (l->window == TOKENQUOTA_MINUTE ? SERVE_QUOTA_EXHAUSTED : SERVE_QUOTA_RATE))
                continue;
            s.labels[s.n] = reasons[j];
            metrics_write_u64(out, "inferd_token_quota_refusals_total", s.labels, s.n / 2 + 1,
                              atomic_load_explicit(&k->refusals[j], memory_order_relaxed));
        }
    }
}

/* Every counter of rule i (per tenant for a "*" rule, then the shared
 * overflow ones as tenant "*"). */
static void write_rule(struct buf *out, enum family what, const struct tokenquota_config *c,
                       uint32_t i, uint64_t now_ns, uint64_t wall_s)
{
    const struct tokenquota_rule *r = &c->rules[i];
    struct rule_state *st = c->pub.states[i];
    const struct counter *one = (const struct counter *)st->one;
    for (uint32_t j = 0; j < r->nlimits; j++) {
        if (r->tenant_kind != RATELIMIT_EACH_TENANT) {
            write_counter(out, what, i, r, &r->limits[j],
                          r->tenant_kind == RATELIMIT_ONE_TENANT ? r->tenant : NULL, &one[j],
                          now_ns, wall_s);
            continue;
        }
        for (uint32_t k = 0; k < TENANT_SLOTS_SLOTS; k++) {
            const char *name;
            const struct counter *ks = tenant_slots_at(st->slots, k, &name);
            if (ks)
                write_counter(out, what, i, r, &r->limits[j], name, &ks[j], now_ns, wall_s);
        }
        write_counter(out, what, i, r, &r->limits[j], "*", &one[j], now_ns, wall_s);
    }
}

void tokenquota_write_metrics(struct tokenquota *tq, struct buf *out)
{
    struct tokenquota_config *c = config_acquire(tq);
    uint64_t now_ns = clock_now_ns(), wall_s = (uint64_t)clock_wall_ms() / 1000u;
    static const char *const names[] = {[LIMIT] = "inferd_token_quota_limit",
                                        [REMAINING] = "inferd_token_quota_remaining",
                                        [REFUSALS_TOTAL] = "inferd_token_quota_refusals_total"};
    static const char *const types[] = {
        [LIMIT] = "gauge", [REMAINING] = "gauge", [REFUSALS_TOTAL] = "counter"};
    static const char *const helps[] = {
        [LIMIT] = "Tokens a token-quota counter allows per minute or per UTC day",
        [REMAINING] = "Tokens left in a token-quota counter",
        [REFUSALS_TOTAL] = ("Calls a token-quota counter refused, by reason (per rule, and per "
                            "tenant for tenant \"*\")")};
    for (enum family what = LIMIT; what < NFAMILIES && c->pub.nrules > 0; what++) {
        metrics_write_header(out, names[what], types[what], helps[what]);
        for (uint32_t i = 0; i < c->pub.nrules; i++)
            write_rule(out, what, c, i, now_ns, wall_s);
    }
    config_unref(c);
}
