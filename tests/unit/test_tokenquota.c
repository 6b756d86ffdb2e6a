/*
 * Token budgets (policy/tokenquota_rules.c, policy/tokenquota.c) without
 * a server: the section's errors, which rules a call matches, the
 * all-or-nothing reservation, the three kinds of refusal with their
 * retry times on injected clocks, refunds per minute and per day (also
 * across midnight), the tenant table's overflow, what a reload keeps,
 * the metrics, and many threads reserving against one budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "policy/tokenquota.h"

#define SEC 1000000000ull
#define DAY 86400ull
static struct arena arena;
/* The injected clocks' start: the real clocks' now, so that the metrics
 * (which read the real clocks) see the counters as the calls left them. */
static uint64_t T0, W0;

static int setup(void **state)
{
    (void)state;
    T0 = clock_now_ns();
    W0 = (uint64_t)clock_wall_ms() / 1000u;
    log_set_level(LOG_ERROR); /* not a line per reload or overflow */
    arena_init(&arena, 4096, 1 << 24);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    arena_free(&arena);
    return 0;
}

static const struct json_value *json(const char *text)
{
    struct json_value *v = NULL;
    const char *msg = NULL;
    if (json_parse(&arena, text, strlen(text), NULL, &v, &msg, NULL) != 0)
        fail_msg("json_parse(%s): %s", text, msg);
    return v;
}

static struct tokenquota_config *config(const char *text)
{
    struct tokenquota_config *c = NULL;
    struct error err;
    error_clear(&err);
    if (tokenquota_config_parse(json(text), &c, &err) != 0)
        fail_msg("tokenquota_config_parse(%s): %s", text, err.msg);
    return c;
}

static struct tokenquota *store(const char *text)
{
    struct tokenquota *tq = tokenquota_new();
    assert_non_null(tq);
    tokenquota_apply(tq, config(text));
    return tq;
}

static void parse_fails(const char *text, const char *msg)
{
    struct tokenquota_config *c = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(tokenquota_config_parse(json(text), &c, &err), -1);
    assert_null(c);
    assert_int_equal(err.status, 400);
    if (strcmp(err.msg, msg) != 0)
        fail_msg("%s:\n  got      %s\n  expected %s", text, err.msg, msg);
}

static void test_parse_errors_name_the_path(void **state)
{
    (void)state;
    parse_fails("{\"model\": \"m\"}", "token-quotas: expected a list, got a mapping");
    parse_fails("[1]", "token-quotas[0]: expected a mapping, got 1");
    parse_fails("[{\"model\": \"m\", \"rate\": 1}]", "token-quotas[0].rate: unknown key");
    parse_fails("[{\"tenant\": 12, \"per-day\": {\"total\": 1}}]",
                "token-quotas[0].tenant: expected a name of 1 to 63 characters, got 12");
    parse_fails("[{\"model\": \"\", \"per-day\": {\"total\": 1}}]",
                "token-quotas[0].model: expected a name of 1 to 255 characters, got \"\"");
    parse_fails("[{\"per-minute\": 5}]", "token-quotas[0].per-minute: expected a mapping, got 5");
    parse_fails("[{\"per-minute\": {\"total\": 0}}]",
                "token-quotas[0].per-minute.total: expected an integer from 1 to 1000000000, "
                "got 0");
    parse_fails("[{\"per-day\": {\"total\": 5}}, {\"model\": \"m\", \"per-minute\": "
                "{\"prompt\": 1000000001}}]",
                "token-quotas[1].per-minute.prompt: expected an integer from 1 to 1000000000, "
                "got 1000000001");
    parse_fails("[{\"per-day\": {\"completion\": 1000000000001}}]",
                "token-quotas[0].per-day.completion: expected an integer from 1 to "
                "1000000000000, got 1000000000001");
    parse_fails("[{\"per-day\": {\"total\": 2.5}}]",
                "token-quotas[0].per-day.total: expected an integer from 1 to 1000000000000, "
                "got 2.5");
    parse_fails("[{\"per-day\": {\"total\": \"5\"}}]",
                "token-quotas[0].per-day.total: expected an integer from 1 to 1000000000000, "
                "got \"5\"");
    parse_fails("[{\"per-day\": {\"tokens\": 5}}]", "token-quotas[0].per-day.tokens: unknown key");
    parse_fails("[{\"model\": \"m\"}]", "token-quotas[0]: no limit (give per-minute or per-day, "
                                        "with prompt, completion or total)");
    parse_fails("[{\"model\": \"m\", \"per-minute\": {}, \"per-day\": null}]",
                "token-quotas[0]: no limit (give per-minute or per-day, with prompt, completion "
                "or total)");
    parse_fails("[{\"tenant\": \"*\", \"per-day\": {\"total\": 5}}, {\"tenant\": \"*\", "
                "\"per-minute\": {\"total\": 9}}]",
                "token-quotas[1]: the same tenant and model as token-quotas[0] (put both limits "
                "in one entry)");
    char many[4096];
    size_t n = 0;
    n += (size_t)snprintf(many + n, sizeof many - n, "[");
    for (int i = 0; i <= TOKENQUOTA_MAX_RULES; i++)
        n += (size_t)snprintf(many + n, sizeof many - n,
                              "%s{\"model\": \"m%d\", \"per-day\": {\"total\": 1}}", i ? "," : "",
                              i);
    snprintf(many + n, sizeof many - n, "]");
    parse_fails(many, "token-quotas: at most 64 entries, got 65");
    /* null and an empty list: no rules. */
    tokenquota_config_free(config("null"));
    tokenquota_config_free(config("[]"));
}

static bool known(const void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "team-a") == 0;
}

static void test_tenants_must_exist(void **state)
{
    (void)state;
    struct tokenquota_config *c = config("[{\"tenant\": \"team-a\", \"per-day\": {\"total\": 5}}, "
                                         "{\"tenant\": \"team-b\", \"per-day\": {\"total\": 5}}]");
    struct error err;
    assert_int_equal(tokenquota_config_check_tenants(c, known, NULL, true, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg,
                        "token-quotas[1].tenant: 'team-b' is not a tenant of the auth section");
    tokenquota_config_free(c);
    c = config("[{\"tenant\": \"*\", \"per-day\": {\"total\": 5}}]");
    assert_int_equal(tokenquota_config_check_tenants(c, known, NULL, true, &err), 0);
    assert_int_equal(tokenquota_config_check_tenants(c, known, NULL, false, &err), -1);
    assert_string_equal(err.msg, "token-quotas[0].tenant: \"*\" needs tenants, and the auth "
                                 "section has none (without API keys no call has a tenant)");
    tokenquota_config_free(c);
}

/* A reservation that must succeed; returns what the headers would show. */
static struct serve_tokens reserve_ok(struct tokenquota *tq, const char *tenant, const char *model,
                                      uint32_t p, uint32_t c, uint64_t now, uint64_t wall,
                                      struct tokenquota_reservation *res)
{
    struct tokenquota_reservation local;
    struct serve_tokens info;
    struct error err;
    error_clear(&err);
    if (tokenquota_reserve(tq, tenant, model, p, c, now, wall, res ? res : &local, &info, &err) !=
        0)
        fail_msg("reserve(%s, %s, %u, %u): %s", tenant ? tenant : "-", model, p, c, err.msg);
    if (!res)
        tokenquota_settle(&local, p, c, now, wall); /* all used: nothing given back */
    return info;
}

/* A reservation that must be refused with why; err and info returned. */
static struct serve_tokens reserve_refused(struct tokenquota *tq, const char *tenant,
                                           const char *model, uint32_t p, uint32_t c, uint64_t now,
                                           uint64_t wall, enum serve_quota_refusal why,
                                           struct error *err)
{
    struct tokenquota_reservation res;
    struct serve_tokens info;
    error_clear(err);
    assert_int_equal(tokenquota_reserve(tq, tenant, model, p, c, now, wall, &res, &info, err), -1);
    assert_int_equal(err->status, 429);
    assert_true(info.set);
    assert_int_equal(info.refusal, why);
    assert_true(err->retry_after_s >= 1);
    return info;
}

static void test_matching(void **state)
{
    (void)state;
    struct tokenquota *tq = store("[{\"tenant\": \"a\", \"model\": \"m\", \"per-day\": "
                                  "{\"total\": 100}}, "
                                  "{\"model\": \"n\", \"per-day\": {\"total\": 50}}, "
                                  "{\"tenant\": \"*\", \"model\": \"s\", \"per-day\": "
                                  "{\"total\": 30}}]");
    struct tokenquota_reservation res;
    struct serve_tokens info;
    struct error err;
    /* No rule for model x, nor for tenant b on m. */
    assert_int_equal(tokenquota_reserve(tq, NULL, "x", 5, 5, T0, W0, &res, &info, &err), 0);
    assert_false(info.set);
    assert_null(res.config);
    assert_int_equal(tokenquota_reserve(tq, "b", "m", 5, 5, T0, W0, &res, &info, &err), 0);
    assert_false(info.set);
    info = reserve_ok(tq, "a", "m", 10, 10, T0, W0, NULL);
    assert_int_equal(info.limit, 100);
    assert_int_equal(info.remaining, 80);
    /* Model n: every tenant and none share the budget. */
    assert_int_equal(reserve_ok(tq, "a", "n", 10, 0, T0, W0, NULL).remaining, 40);
    assert_int_equal(reserve_ok(tq, NULL, "n", 10, 0, T0, W0, NULL).remaining, 30);
    /* "*" on model s: each tenant its own, none without one. */
    assert_int_equal(reserve_ok(tq, "a", "s", 10, 0, T0, W0, NULL).remaining, 20);
    assert_int_equal(reserve_ok(tq, "b", "s", 5, 0, T0, W0, NULL).remaining, 25);
    assert_int_equal(tokenquota_reserve(tq, NULL, "s", 5, 5, T0, W0, &res, &info, &err), 0);
    assert_false(info.set);
    tokenquota_free(tq);
}

static void test_reservation_is_all_or_nothing(void **state)
{
    (void)state;
    /* Tenant a's own budget (checked first), and one every call shares
     * with two limits of two windows. */
    struct tokenquota *tq = store("[{\"per-minute\": {\"prompt\": 1000}, "
                                  "\"per-day\": {\"completion\": 100}}, "
                                  "{\"tenant\": \"a\", \"per-minute\": {\"completion\": 60}}]");
    struct error err;
    /* Left: 950 prompt, 60 completion today, 20 of a's completion. */
    assert_int_equal(reserve_ok(tq, "a", "m", 50, 40, T0, W0, NULL).remaining, 20);
    /* The day refuses after the minute took the prompt: given back. */
    struct serve_tokens info =
        reserve_refused(tq, "b", "m", 10, 70, T0, W0, SERVE_QUOTA_EXHAUSTED, &err);
    assert_int_equal(info.remaining, 60);
    /* a's own budget refuses before the shared ones are touched. */
    reserve_refused(tq, "a", "m", 1, 30, T0, W0, SERVE_QUOTA_RATE, &err);
    assert_string_equal(err.msg, "token budget of tenant a exceeded: 60 completion tokens per "
                                 "minute, this request reserves 30 (max_tokens), 20 left; retry "
                                 "in 10.0 s");
    /* Nothing of the refused calls stayed: exactly 950 prompt, 60 completion. */
    info = reserve_ok(tq, "b", "m", 950, 0, T0, W0, NULL);
    assert_int_equal(info.remaining, 0);
    assert_int_equal(info.limit, 1000);
    reserve_refused(tq, "b", "m", 1, 0, T0, W0, SERVE_QUOTA_RATE, &err);
    assert_int_equal(reserve_ok(tq, "b", "m", 0, 60, T0, W0, NULL).remaining, 0);
    reserve_refused(tq, "b", "m", 0, 1, T0, W0, SERVE_QUOTA_EXHAUSTED, &err);
    tokenquota_free(tq);
}

static void test_refusals_and_retry_times(void **state)
{
    (void)state;
    struct tokenquota *tq = store("[{\"tenant\": \"team-a\", \"model\": \"kjv\", "
                                  "\"per-minute\": {\"total\": 1200}}, "
                                  "{\"tenant\": \"team-b\", \"model\": \"kjv\", "
                                  "\"per-day\": {\"total\": 1000}}]");
    struct error err;
    /* 1200 a minute: one token per 50 ms. 1100 taken, 100 left: 300 more
     * need 200 tokens, 10 s. */
    struct serve_tokens info = reserve_ok(tq, "team-a", "kjv", 100, 1000, T0, W0, NULL);
    assert_int_equal(info.limit, 1200);
    assert_int_equal(info.remaining, 100);
    assert_int_equal(info.reset_ms, 55000); /* 1100 tokens × 50 ms */
    assert_int_equal(info.refusal, SERVE_QUOTA_NONE);
    info = reserve_refused(tq, "team-a", "kjv", 44, 256, T0, W0, SERVE_QUOTA_RATE, &err);
    assert_string_equal(err.msg, "token budget of tenant team-a on model kjv exceeded: 1200 total "
                                 "tokens per minute, this request reserves 300 (prompt 44 + "
                                 "max_tokens 256), 100 left; retry in 10.0 s");
    assert_int_equal(info.retry_ms, 10000);
    assert_int_equal(err.retry_after_s, 10);
    assert_int_equal(info.remaining, 100);
    /* 7.95 s later: 259 tokens, 41 short (2.05 s, shown rounded up). */
    info = reserve_refused(tq, "team-a", "kjv", 44, 256, T0 + 7950000000ull, W0, SERVE_QUOTA_RATE,
                           &err);
    assert_int_equal(info.retry_ms, 2050);
    assert_int_equal(err.retry_after_s, 3);
    assert_non_null(strstr(err.msg, "259 left; retry in 2.1 s"));
    reserve_ok(tq, "team-a", "kjv", 44, 256, T0 + 10 * SEC, W0, NULL);

    /* Larger than the whole budget: never fits. */
    info = reserve_refused(tq, "team-a", "kjv", 44, 1200, T0 + 100 * SEC, W0, SERVE_QUOTA_TOO_LARGE,
                           &err);
    assert_string_equal(err.msg, "request too large for the token budget of tenant team-a on "
                                 "model kjv: it reserves 1244 (prompt 44 + max_tokens 1200), the "
                                 "budget is 1200 total tokens per minute; lower max_tokens");
    assert_int_equal(info.retry_ms, 60000);
    assert_int_equal(err.retry_after_s, 60);

    /* A day: 2 h before midnight UTC, 900 of 1000 used. */
    uint64_t day = W0 / DAY, evening = day * DAY + DAY - 7200;
    info = reserve_ok(tq, "team-b", "kjv", 400, 500, T0, evening, NULL);
    assert_int_equal(info.remaining, 100);
    assert_int_equal(info.reset_ms, 7200000);
    info = reserve_refused(tq, "team-b", "kjv", 44, 256, T0, evening, SERVE_QUOTA_EXHAUSTED, &err);
    assert_string_equal(err.msg, "daily token quota of tenant team-b on model kjv exhausted: 1000 "
                                 "total tokens per day, this request reserves 300 (prompt 44 + "
                                 "max_tokens 256), 100 left; it renews at 00:00 UTC, in 7200 s");
    assert_int_equal(info.retry_ms, 7200000);
    assert_int_equal(err.retry_after_s, 7200);
    info = reserve_refused(tq, "team-b", "kjv", 1, 1000, T0, evening, SERVE_QUOTA_TOO_LARGE, &err);
    assert_non_null(strstr(err.msg, "the budget is 1000 total tokens per day; lower max_tokens"));
    /* The next day starts empty. */
    info = reserve_ok(tq, "team-b", "kjv", 44, 256, T0, evening + 7200, NULL);
    assert_int_equal(info.remaining, 700);
    assert_int_equal(info.reset_ms, DAY * 1000);
    tokenquota_free(tq);
}

static void test_refunds(void **state)
{
    (void)state;
    struct tokenquota *tq = store("[{\"model\": \"m\", \"per-minute\": {\"total\": 60000}}, "
                                  "{\"model\": \"d\", \"per-day\": {\"prompt\": 1000, "
                                  "\"completion\": 1000}}]");
    struct tokenquota_reservation res;
    /* A minute: 500 reserved, 200 used: 300 back at once. */
    assert_int_equal(reserve_ok(tq, NULL, "m", 100, 400, T0, W0, &res).remaining, 59500);
    tokenquota_settle(&res, 100, 100, T0, W0);
    assert_null(res.config);
    assert_int_equal(reserve_ok(tq, NULL, "m", 1, 0, T0, W0, NULL).remaining, 59799);
    /* Used more than reserved: clamped, nothing taken beyond. */
    reserve_ok(tq, NULL, "m", 100, 400, T0, W0, &res);
    tokenquota_settle(&res, 1000, 1000, T0, W0);
    assert_int_equal(reserve_ok(tq, NULL, "m", 1, 0, T0, W0, NULL).remaining, 59298);
    /* Given back after the bucket refilled: never fuller than full. */
    reserve_ok(tq, NULL, "m", 100, 400, T0 + 120 * SEC, W0, &res);
    tokenquota_settle(&res, 0, 0, T0 + 121 * SEC, W0);
    assert_int_equal(reserve_ok(tq, NULL, "m", 1, 0, T0 + 121 * SEC, W0, NULL).remaining, 59999);

    /* A day: the unused part of each counter back the same day. */
    uint64_t day = W0 / DAY, late = day * DAY + DAY - 10;
    struct serve_tokens info = reserve_ok(tq, NULL, "d", 100, 400, T0, late, &res);
    assert_int_equal(info.remaining, 600); /* completion: the fewer left */
    tokenquota_settle(&res, 100, 50, T0, late);
    info = reserve_ok(tq, NULL, "d", 1, 1, T0, late, NULL);
    assert_int_equal(info.remaining, 899); /* prompt: 1000 - 100 - 1 */
    /* Reserved before midnight, settled after: the new day owes nothing. */
    reserve_ok(tq, NULL, "d", 200, 300, T0, late, &res);
    struct tokenquota_reservation next;
    info = reserve_ok(tq, NULL, "d", 10, 600, T0, late + 20, &next);
    assert_int_equal(info.remaining, 400);
    tokenquota_settle(&res, 0, 0, T0, late + 20);
    assert_int_equal(reserve_ok(tq, NULL, "d", 1, 1, T0, late + 20, NULL).remaining, 399);
    tokenquota_settle(&next, 10, 100, T0, late + 20);
    assert_int_equal(reserve_ok(tq, NULL, "d", 1, 1, T0, late + 20, NULL).remaining, 898);
    tokenquota_free(tq);
}

static long long metric(struct tokenquota *tq, const char *series)
{
    struct buf b;
    buf_init(&b, 1 << 24);
    tokenquota_write_metrics(tq, &b);
    assert_int_equal(b.err, 0);
    buf_putc(&b, '\0');
    long long v = -1;
    size_t n = strlen(series);
    for (const char *line = b.data; line && *line; line = strchr(line, '\n'), line += !!line)
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            v = atoll(line + n + 1);
    buf_free(&b);
    return v;
}

static void test_tenant_overflow_shares(void **state)
{
    (void)state;
    struct tokenquota *tq = store("[{\"tenant\": \"*\", \"per-day\": {\"total\": 10}}]");
    struct tokenquota_reservation res;
    struct serve_tokens info;
    struct error err;
    uint32_t admitted = 0;
    char name[32];
    for (uint32_t i = 0; i < TOKENQUOTA_TENANTS + 100; i++) {
        snprintf(name, sizeof name, "tenant-%u", i);
        if (tokenquota_reserve(tq, name, "m", 4, 6, T0, W0, &res, &info, &err) == 0) {
            admitted++;
            tokenquota_settle(&res, 4, 6, T0, W0);
        }
    }
    /* One budget each for the first 4096, one shared by the 100 others. */
    assert_int_equal(admitted, TOKENQUOTA_TENANTS + 1);
    reserve_refused(tq, "tenant-7", "m", 1, 0, T0, W0, SERVE_QUOTA_EXHAUSTED, &err);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"0\",tenant=\"*\","
                                "window=\"day\",kind=\"total\",reason=\"exhausted\"}"),
                     99);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"0\",tenant=\"tenant-7\","
                                "window=\"day\",kind=\"total\",reason=\"exhausted\"}"),
                     1);
    assert_int_equal(metric(tq, "inferd_token_quota_remaining{rule=\"0\",tenant=\"tenant-7\","
                                "window=\"day\",kind=\"total\"}"),
                     0);
    tokenquota_free(tq);
}

static void test_reload_keeps_counters(void **state)
{
    (void)state;
    struct tokenquota *tq = store("[{\"model\": \"x\", \"per-day\": {\"total\": 100}}, "
                                  "{\"model\": \"y\", \"per-day\": {\"total\": 100}}, "
                                  "{\"tenant\": \"*\", \"per-minute\": {\"total\": 60}}]");
    struct tokenquota_reservation res;
    reserve_ok(tq, NULL, "x", 30, 30, T0, W0, &res); /* settled after the reload */
    reserve_ok(tq, NULL, "y", 30, 30, T0, W0, NULL);
    reserve_ok(tq, "t", "z", 10, 10, T0, W0, NULL);
    /* y's limit changes; the others move but stay alike. */
    tokenquota_apply(tq, config("[{\"tenant\": \"*\", \"per-minute\": {\"total\": 60}}, "
                                "{\"model\": \"y\", \"per-day\": {\"total\": 101}}, "
                                "{\"model\": \"x\", \"per-day\": {\"total\": 100}}]"));
    assert_int_equal(reserve_ok(tq, "t", "z", 1, 0, T0, W0, NULL).remaining, 39);
    assert_int_equal(reserve_ok(tq, NULL, "y", 1, 0, T0, W0, NULL).remaining, 100); /* anew */
    /* The reservation made before the reload settles on the kept counter. */
    tokenquota_settle(&res, 10, 10, T0, W0);
    assert_int_equal(reserve_ok(tq, NULL, "x", 1, 0, T0, W0, NULL).remaining, 79);
    assert_int_equal(metric(tq, "inferd_token_quota_limit{rule=\"1\",model=\"y\",window=\"day\","
                                "kind=\"total\"}"),
                     101);
    assert_int_equal(metric(tq, "inferd_token_quota_remaining{rule=\"2\",model=\"x\","
                                "window=\"day\",kind=\"total\"}"),
                     79);
    /* A reservation outlives a reload that removes its rule. */
    reserve_ok(tq, NULL, "x", 5, 5, T0, W0, &res);
    tokenquota_apply(tq, config("null"));
    struct serve_tokens info;
    struct error err;
    struct tokenquota_reservation none;
    assert_int_equal(tokenquota_reserve(tq, NULL, "x", 500, 500, T0, W0, &none, &info, &err), 0);
    assert_false(info.set);
    tokenquota_settle(&res, 1, 1, T0, W0);
    assert_int_equal(metric(tq, "inferd_token_quota_limit{rule=\"0\",model=\"x\",window=\"day\","
                                "kind=\"total\"}"),
                     -1);
    tokenquota_free(tq);
}

static void test_metrics_and_no_allocation(void **state)
{
    (void)state;
    /* The buckets refill 1 and 2 tokens a second: the scrape, a few ms
     * after the reservations at the real now, sees them as they were. */
    uint64_t now = clock_now_ns();
    struct tokenquota *tq = store("[{\"tenant\": \"*\", \"model\": \"kjv\", \"per-minute\": "
                                  "{\"prompt\": 60, \"total\": 120}}, "
                                  "{\"tenant\": \"team-a\", \"per-day\": {\"completion\": 50}}]");
    struct tokenquota_reservation res;
    struct serve_tokens info;
    struct error err;
    reserve_ok(tq, "team-b", "kjv", 20, 30, now, W0, NULL); /* claims team-b's counters */
    uint64_t before = mem_alloc_count();
    reserve_ok(tq, "team-a", "kjv", 10, 40, now, W0, &res);
    tokenquota_settle(&res, 10, 20, now, W0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(
            tokenquota_reserve(tq, "team-a", "kjv", 10, 40, now, W0, &res, &info, &err), -1);
    assert_int_equal(mem_alloc_count(), before);
    assert_int_equal(info.refusal, SERVE_QUOTA_EXHAUSTED);
    assert_int_equal(metric(tq, "inferd_token_quota_limit{rule=\"0\",tenant=\"team-b\","
                                "model=\"kjv\",window=\"minute\",kind=\"prompt\"}"),
                     60);
    assert_int_equal(metric(tq, "inferd_token_quota_remaining{rule=\"0\",tenant=\"team-b\","
                                "model=\"kjv\",window=\"minute\",kind=\"total\"}"),
                     70);
    assert_int_equal(metric(tq, "inferd_token_quota_remaining{rule=\"0\",tenant=\"*\","
                                "model=\"kjv\",window=\"minute\",kind=\"total\"}"),
                     120);
    assert_int_equal(metric(tq, "inferd_token_quota_remaining{rule=\"1\",tenant=\"team-a\","
                                "window=\"day\",kind=\"completion\"}"),
                     30);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"1\",tenant=\"team-a\","
                                "window=\"day\",kind=\"completion\",reason=\"exhausted\"}"),
                     10);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"1\",tenant=\"team-a\","
                                "window=\"day\",kind=\"completion\",reason=\"too_large\"}"),
                     0);
    /* A day counter never refuses for want of rate, nor a bucket as spent. */
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"1\",tenant=\"team-a\","
                                "window=\"day\",kind=\"completion\",reason=\"rate\"}"),
                     -1);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"0\",tenant=\"team-b\","
                                "model=\"kjv\",window=\"minute\",kind=\"total\",reason=\"rate\"}"),
                     0);
    assert_int_equal(metric(tq, "inferd_token_quota_refusals_total{rule=\"0\",tenant=\"team-b\","
                                "model=\"kjv\",window=\"minute\",kind=\"total\","
                                "reason=\"exhausted\"}"),
                     -1);
    tokenquota_free(tq);
    /* No rules: no series at all. */
    tq = tokenquota_new();
    struct buf b;
    buf_init(&b, 4096);
    tokenquota_write_metrics(tq, &b);
    assert_int_equal(b.len, 0);
    buf_free(&b);
    tokenquota_free(tq);
}

/* ---- many threads on one budget ------------------------------------------------------- */

#define THREADS 8
#define BUDGET 100000u

struct hammer {
    struct tokenquota *tq;
    _Atomic uint64_t held;  /* reserved and not yet given back, as the threads count */
    _Atomic uint64_t worst; /* the most `held` ever was */
    _Atomic uint64_t admitted, refused;
};

static void note_held(struct hammer *h, uint64_t n)
{
    uint64_t now = atomic_fetch_add(&h->held, n) + n;
    uint64_t w = atomic_load(&h->worst);
    while (now > w && !atomic_compare_exchange_weak(&h->worst, &w, now))
        ;
}

static void *hammer_run(void *arg)
{
    struct hammer *h = arg;
    struct tokenquota_reservation res;
    struct serve_tokens info;
    struct error err;
    unsigned seed = (unsigned)(uintptr_t)&res;
    /* Reserve 2 .. 8 tokens, give back part of every third: the counter
     * moves both ways. The clocks stand still: nothing refills. */
    for (int i = 0; i < 20000; i++) {
        uint32_t p = 1 + (uint32_t)(rand_r(&seed) % 4), c = 1 + (uint32_t)(rand_r(&seed) % 4);
        if (tokenquota_reserve(h->tq, NULL, "m", p, c, T0, W0, &res, &info, &err) != 0) {
            atomic_fetch_add(&h->refused, 1);
            continue;
        }
        /* Counted after the counter took them, uncounted before it gives
         * them back: held never exceeds what the counter holds. */
        note_held(h, p + c);
        atomic_fetch_add(&h->admitted, 1);
        uint32_t used_c = i % 3 == 0 ? c - 1 : c;
        atomic_fetch_sub(&h->held, c - used_c);
        tokenquota_settle(&res, p, used_c, T0, W0);
    }
    /* Then one token at a time until the budget is spent. */
    while (tokenquota_reserve(h->tq, NULL, "m", 1, 0, T0, W0, &res, &info, &err) == 0) {
        note_held(h, 1);
        tokenquota_settle(&res, 1, 0, T0, W0);
    }
    return NULL;
}

static void hammer(const char *rules)
{
    struct hammer h = {.tq = store(rules)};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_run, &h), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    if (atomic_load(&h.worst) > BUDGET)
        fail_msg("%s: %llu tokens held at once, budget %u", rules,
                 (unsigned long long)atomic_load(&h.worst), BUDGET);
    /* Exhausted: exactly the budget is spent, and the counter agrees. */
    assert_int_equal(atomic_load(&h.held), BUDGET);
    assert_true(atomic_load(&h.refused) > 0);
    assert_true(atomic_load(&h.admitted) > 1000);
    struct tokenquota_reservation res;
    struct serve_tokens info;
    struct error err;
    assert_int_equal(tokenquota_reserve(h.tq, NULL, "m", 1, 0, T0, W0, &res, &info, &err), -1);
    assert_int_equal(info.remaining, 0);
    tokenquota_free(h.tq);
}

static void test_threads_never_overspend(void **state)
{
    (void)state;
    hammer("[{\"model\": \"m\", \"per-minute\": {\"total\": 100000}}]");
    hammer("[{\"model\": \"m\", \"per-day\": {\"total\": 100000}}]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors_name_the_path),
        cmocka_unit_test(test_tenants_must_exist),
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_reservation_is_all_or_nothing),
        cmocka_unit_test(test_refusals_and_retry_times),
        cmocka_unit_test(test_refunds),
        cmocka_unit_test(test_tenant_overflow_shares),
        cmocka_unit_test(test_reload_keeps_counters),
        cmocka_unit_test(test_metrics_and_no_allocation),
        cmocka_unit_test(test_threads_never_overspend),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
