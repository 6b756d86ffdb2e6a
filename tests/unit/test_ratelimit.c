/*
 * Rate limits (policy/gcra.c, policy/ratelimit_rules.c,
 * policy/ratelimit.c) without a server: the section's errors and
 * defaults, the bucket arithmetic on an injected clock, which rules a
 * call matches and the tokens it gives back, what a reload keeps, the
 * tenant table's capacity, many threads on one bucket, the stage, the
 * metrics, and that neither admitting nor refusing allocates.
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
#include <time.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mem.h"
#include "policy/gcra.h"
#include "policy/ratelimit.h"

#define SEC 1000000000ull
#define MS 1000000ull
static struct arena arena;
/* The injected clock's start: the real clock's now, so that the metrics
 * (which read the real clock) see the buckets as the calls left them. */
static uint64_t T0;

static int setup(void **state)
{
    (void)state;
    T0 = clock_now_ns();
    log_set_level(LOG_WARN); /* not a line per reload */
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

static struct ratelimit_config *config(const char *text)
{
    struct ratelimit_config *c = NULL;
    struct error err;
    error_clear(&err);
    if (ratelimit_config_parse(json(text), &c, &err) != 0)
        fail_msg("ratelimit_config_parse(%s): %s", text, err.msg);
    return c;
}

static struct ratelimit *store(const char *text)
{
    struct ratelimit *rl = ratelimit_new();
    assert_non_null(rl);
    ratelimit_apply(rl, config(text));
    return rl;
}

/* The section must not parse, with exactly this message. */
static void parse_fails(const char *text, const char *msg)
{
    struct ratelimit_config *c = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(ratelimit_config_parse(json(text), &c, &err), -1);
    assert_null(c);
    assert_int_equal(err.status, 400);
    if (strcmp(err.msg, msg) != 0)
        fail_msg("%s:\n  got      %s\n  expected %s", text, err.msg, msg);
}

static void test_parse_errors_name_the_path(void **state)
{
    (void)state;
    parse_fails("{\"rate\": 1}", "rate-limits: expected a list of rules, got a mapping");
    parse_fails("[1]",
                "rate-limits[0]: expected a mapping of tenant, model, rate and burst, got 1");
    parse_fails("[{\"rate\": 1}, {\"rate\": -3}]",
                "rate-limits[1].rate: expected a number of tokens per second from 0.001 to "
                "1000000000, got -3");
    parse_fails("[{\"rate\": 0}]", "rate-limits[0].rate: expected a number of tokens per second "
                                   "from 0.001 to 1000000000, got 0");
    parse_fails("[{\"rate\": 2e9}]", "rate-limits[0].rate: expected a number of tokens per "
                                     "second from 0.001 to 1000000000, got 2e9");
    parse_fails("[{\"rate\": \"fast\"}]", "rate-limits[0].rate: expected a number of tokens per "
                                          "second from 0.001 to 1000000000, got a string");
    parse_fails("[{\"model\": \"m\"}]", "rate-limits[0].rate: required (tokens per second)");
    parse_fails("[{\"rate\": 1}, {\"rate\": 1, \"burst\": -3}]",
                "rate-limits[1].burst: expected an integer from 1 to 1000000, got -3");
    parse_fails("[{\"rate\": 1, \"burst\": 1.5}]",
                "rate-limits[0].burst: expected an integer from 1 to 1000000, got 1.5");
    parse_fails("[{\"rate\": 1, \"burst\": 1000001}]",
                "rate-limits[0].burst: expected an integer from 1 to 1000000, got 1000001");
    parse_fails("[{\"rate\": 1, \"burts\": 3}]",
                "rate-limits[0].burts: unknown key (a rule has tenant, model, rate and burst)");
    parse_fails("[{\"rate\": 1, \"tenant\": 12}]",
                "rate-limits[0].tenant: expected a tenant name (a string; quote a name that "
                "looks like a number), got 12");
    parse_fails("[{\"rate\": 1, \"tenant\": \"\"}]",
                "rate-limits[0].tenant: expected a tenant name of 1 to 63 characters");
    parse_fails("[{\"rate\": 1, \"model\": null}]",
                "rate-limits[0].model: expected a model name (a string; quote a name that looks "
                "like a number), got null");
    parse_fails("[{\"rate\": 1, \"model\": \"m\"}, {\"rate\": 1, \"model\": \"m\"}]",
                "rate-limits[1]: the same rule as rate-limits[0]");

    char many[4096];
    size_t n = 0;
    n += (size_t)snprintf(many + n, sizeof many - n, "[");
    for (int i = 0; i <= RATELIMIT_MAX_RULES; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s{\"rate\": %d}", i ? "," : "", i + 1);
    snprintf(many + n, sizeof many - n, "]");
    parse_fails(many, "rate-limits: at most 64 rules, got 65");
}

static void test_parse_defaults(void **state)
{
    (void)state;
    struct ratelimit_rule rules[RATELIMIT_MAX_RULES];
    uint32_t n = 99;
    struct error err;
    assert_int_equal(ratelimit_rules_parse(NULL, rules, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ratelimit_rules_parse(json("null"), rules, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ratelimit_rules_parse(json("[{\"rate\": 0.5}, {\"rate\": 100, \"model\": "
                                                "\"m\"}, {\"rate\": 2.5, \"tenant\": \"*\"}, "
                                                "{\"rate\": 3, \"burst\": 7, \"tenant\": \"a\"}]"),
                                           rules, &n, &err),
                     0);
    assert_int_equal(n, 4);
    assert_int_equal(rules[0].burst, 1); /* max(1, ceil(0.5)) */
    assert_int_equal(rules[0].tenant_kind, RATELIMIT_ANY_TENANT);
    assert_int_equal(rules[0].gcra.interval_ns, 2 * SEC);
    assert_int_equal(rules[1].burst, 100);
    assert_string_equal(rules[1].model, "m");
    assert_int_equal(rules[1].gcra.tolerance_ns, 99 * 10 * MS);
    assert_int_equal(rules[2].burst, 3);
    assert_int_equal(rules[2].tenant_kind, RATELIMIT_EACH_TENANT);
    assert_int_equal(rules[3].burst, 7);
    assert_int_equal(rules[3].tenant_kind, RATELIMIT_ONE_TENANT);
    assert_string_equal(rules[3].tenant, "a");
    /* Same scope, another shape: a second window, not a duplicate. */
    assert_int_equal(ratelimit_rules_parse(json("[{\"rate\": 10}, {\"rate\": 10, \"burst\": 50}]"),
                                           rules, &n, &err),
                     0);
    assert_int_equal(n, 2);
}

static void test_gcra_burst_then_refusal(void **state)
{
    (void)state;
    struct gcra_params p;
    gcra_params_init(&p, 10, 5); /* 100 ms per token */
    _Atomic uint64_t tat = 0;
    uint64_t wait = 0;
    for (uint32_t i = 0; i < 5; i++) {
        assert_true(gcra_take(&tat, &p, T0, &wait));
        assert_int_equal(gcra_remaining(tat, &p, T0), 4 - i);
    }
    assert_false(gcra_take(&tat, &p, T0, &wait));
    assert_int_equal(wait, 100 * MS);
    assert_int_equal(gcra_until_full_ns(tat, T0), 500 * MS);
    assert_false(gcra_take(&tat, &p, T0 + 100 * MS - 1, &wait));
    assert_int_equal(wait, 1);
    assert_true(gcra_take(&tat, &p, T0 + 100 * MS, &wait));
    assert_int_equal(gcra_remaining(tat, &p, T0 + 100 * MS), 0);
    /* Half a token later: still none; full again 500 ms after the last. */
    assert_int_equal(gcra_remaining(tat, &p, T0 + 150 * MS), 0);
    assert_int_equal(gcra_remaining(tat, &p, T0 + 600 * MS), 5);
    assert_int_equal(gcra_until_full_ns(tat, T0 + 600 * MS), 0);
    /* A bucket idle for long holds burst tokens, never more. */
    for (uint32_t i = 0; i < 5; i++)
        assert_true(gcra_take(&tat, &p, T0 + 100 * SEC, NULL));
    assert_false(gcra_take(&tat, &p, T0 + 100 * SEC, NULL));
}

static void test_gcra_refill_rate_is_exact(void **state)
{
    (void)state;
    struct gcra_params p;
    gcra_params_init(&p, 0.5, 1); /* one token every 2 s */
    _Atomic uint64_t tat = 0;
    uint32_t admitted = 0;
    for (uint64_t t = T0; t < T0 + 60 * SEC; t += 10 * MS)
        admitted += gcra_take(&tat, &p, t, NULL);
    assert_int_equal(admitted, 30);

    gcra_params_init(&p, 1000, 20);
    tat = 0;
    admitted = 0;
    for (uint64_t t = T0; t <= T0 + 10 * SEC; t += 100 * 1000) /* every 0.1 ms */
        admitted += gcra_take(&tat, &p, t, NULL);
    assert_int_equal(admitted, 20 + 10000); /* the burst, then 1000 per second */
}

static void test_gcra_give_back(void **state)
{
    (void)state;
    struct gcra_params p;
    gcra_params_init(&p, 1, 3);
    _Atomic uint64_t tat = 0;
    assert_true(gcra_take(&tat, &p, T0, NULL));
    assert_true(gcra_take(&tat, &p, T0, NULL));
    assert_int_equal(gcra_remaining(tat, &p, T0), 1);
    gcra_give_back(&tat, &p, T0);
    assert_int_equal(gcra_remaining(tat, &p, T0), 2);
    gcra_give_back(&tat, &p, T0);
    assert_int_equal(tat, T0); /* full: never below now */
    gcra_give_back(&tat, &p, T0);
    assert_int_equal(tat, T0);
    assert_int_equal(gcra_remaining(tat, &p, T0), 3);
    /* A token taken long ago and refilled meanwhile is not given twice. */
    assert_true(gcra_take(&tat, &p, T0, NULL));
    gcra_give_back(&tat, &p, T0 + 5 * SEC);
    assert_int_equal(gcra_remaining(tat, &p, T0 + 5 * SEC), 3);
}

static void test_retry_after_and_headers(void **state)
{
    (void)state;
    struct ratelimit *rl = store("[{\"rate\": 0.5, \"burst\": 2}]");
    struct serve_ratelimit info;
    struct error err;
    error_clear(&err);
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), 0);
    assert_true(info.set);
    assert_int_equal(info.limit, 2);
    assert_int_equal(info.remaining, 1);
    assert_int_equal(info.reset_s, 2);
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), 0);
    assert_int_equal(info.remaining, 0);
    assert_int_equal(info.reset_s, 4);
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), -1);
    assert_int_equal(err.status, 429);
    assert_int_equal(err.retry_after_s, 2);
    assert_string_equal(err.msg, "rate limit of the server exceeded (0.5/s, burst 2)");
    assert_true(info.set);
    assert_int_equal(info.limit, 2);
    assert_int_equal(info.remaining, 0);
    assert_int_equal(info.reset_s, 4);
    /* 1.5 s to go is 2 s (rounded up); 1 ns to go is 1 s. */
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0 + 500 * MS, &info, &err), -1);
    assert_int_equal(err.retry_after_s, 2);
    assert_int_equal(info.reset_s, 4); /* 3.5 s */
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0 + 2 * SEC - 1, &info, &err), -1);
    assert_int_equal(err.retry_after_s, 1);
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0 + 2 * SEC, &info, &err), 0);
    ratelimit_free(rl);

    /* No rule matches: nothing to tell. */
    rl = store("[{\"rate\": 1, \"model\": \"other\"}]");
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), 0);
    assert_false(info.set);
    ratelimit_free(rl);
}

/* The line of `series` in the metrics text (its value), or -1. */
static long long metric(struct ratelimit *rl, const char *series)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    ratelimit_write_metrics(rl, &b);
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

static void test_give_back_when_a_second_rule_refuses(void **state)
{
    (void)state;
    /* Tenant a's own bucket (10 tokens, barely refilling) and a bucket
     * every call shares (1 token per second). */
    struct ratelimit *rl = store("[{\"rate\": 1, \"burst\": 1}, "
                                 "{\"tenant\": \"a\", \"rate\": 0.001, \"burst\": 10}]");
    struct serve_ratelimit info;
    struct error err;
    assert_int_equal(ratelimit_admit(rl, "a", "m", T0, &info, &err), 0);
    assert_int_equal(metric(rl, "inferd_rate_limit_tokens{rule=\"1\",tenant=\"a\"}"), 9);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ratelimit_admit(rl, "a", "m", T0, &info, &err), -1);
        assert_string_equal(err.msg, "rate limit of the server exceeded (1/s, burst 1)");
    }
    /* Refused by the shared bucket: tenant a's tokens came back. */
    assert_int_equal(metric(rl, "inferd_rate_limit_tokens{rule=\"1\",tenant=\"a\"}"), 9);
    assert_int_equal(metric(rl, "inferd_rate_limit_requests_total{rule=\"0\",outcome=\"limited\"}"),
                     5);
    assert_int_equal(
        metric(rl, "inferd_rate_limit_requests_total{rule=\"0\",outcome=\"admitted\"}"), 1);
    assert_int_equal(
        metric(rl,
               "inferd_rate_limit_requests_total{rule=\"1\",tenant=\"a\",outcome=\"admitted\"}"),
        1);
    assert_int_equal(
        metric(rl, "inferd_rate_limit_requests_total{rule=\"1\",tenant=\"a\",outcome=\"limited\"}"),
        0);
    /* The most constrained bucket is the one the headers describe. */
    assert_int_equal(ratelimit_admit(rl, "a", "m", T0 + SEC, &info, &err), 0);
    assert_int_equal(info.limit, 1);
    assert_int_equal(info.remaining, 0);
    assert_int_equal(metric(rl, "inferd_rate_limit_tokens{rule=\"1\",tenant=\"a\"}"), 8);
    ratelimit_free(rl);
}

static void test_matching_and_fairness(void **state)
{
    (void)state;
    struct ratelimit *rl =
        store("[{\"tenant\": \"a\", \"rate\": 1, \"burst\": 1}, "
              "{\"tenant\": \"*\", \"rate\": 1, \"burst\": 2}, "
              "{\"model\": \"m\", \"rate\": 1, \"burst\": 5}, "
              "{\"tenant\": \"a\", \"model\": \"n\", \"rate\": 0.001, \"burst\": 1}]");
    struct serve_ratelimit info;
    struct error err;
    /* No tenant (no API keys): only the model rule matches. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), 0);
    assert_int_equal(ratelimit_admit(rl, NULL, "m", T0, &info, &err), -1);
    assert_string_equal(err.msg, "rate limit of model m exceeded (1/s, burst 5)");
    assert_int_equal(ratelimit_admit(rl, NULL, "other", T0, &info, &err), 0);
    assert_false(info.set);
    /* Tenant a: its own rule and its "*" bucket; over its limit, it leaves
     * the others theirs. */
    assert_int_equal(ratelimit_admit(rl, "a", "x", T0, &info, &err), 0);
    assert_int_equal(ratelimit_admit(rl, "a", "x", T0, &info, &err), -1);
    assert_string_equal(err.msg, "rate limit of tenant a exceeded (1/s, burst 1)");
    assert_int_equal(ratelimit_admit(rl, "b", "x", T0, &info, &err), 0);
    assert_int_equal(info.remaining, 1);
    assert_int_equal(ratelimit_admit(rl, "b", "x", T0, &info, &err), 0);
    assert_int_equal(ratelimit_admit(rl, "b", "x", T0, &info, &err), -1);
    assert_string_equal(err.msg, "rate limit of tenant b exceeded (1/s, burst 2)");
    assert_int_equal(ratelimit_admit(rl, "c", "x", T0, &info, &err), 0);
    assert_int_equal(info.remaining, 1); /* c's own bucket, untouched by b */
    /* The tenant-and-model rule: its refusal gives back what a's two
     * other buckets gave. */
    assert_int_equal(ratelimit_admit(rl, "a", "n", T0 + SEC, &info, &err), 0);
    assert_int_equal(ratelimit_admit(rl, "a", "n", T0 + 2 * SEC, &info, &err), -1);
    assert_string_equal(err.msg, "rate limit of tenant a on model n exceeded (0.001/s, burst 1)");
    assert_int_equal(ratelimit_admit(rl, "a", "x", T0 + 2 * SEC, &info, &err), 0);
    assert_int_equal(
        metric(rl, "inferd_rate_limit_requests_total{rule=\"1\",tenant=\"b\",outcome=\"limited\"}"),
        1);
    assert_int_equal(
        metric(rl,
               "inferd_rate_limit_requests_total{rule=\"1\",tenant=\"c\",outcome=\"admitted\"}"),
        1);
    ratelimit_free(rl);
}

static void test_reload_keeps_unchanged_buckets(void **state)
{
    (void)state;
    struct ratelimit *rl = store("[{\"model\": \"x\", \"rate\": 1, \"burst\": 2}, "
                                 "{\"model\": \"y\", \"rate\": 1, \"burst\": 2}, "
                                 "{\"tenant\": \"*\", \"rate\": 1, \"burst\": 1}]");
    struct serve_ratelimit info;
    struct error err;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ratelimit_admit(rl, NULL, "x", T0, &info, &err), 0);
        assert_int_equal(ratelimit_admit(rl, NULL, "y", T0, &info, &err), 0);
    }
    assert_int_equal(ratelimit_admit(rl, "t", "z", T0, &info, &err), 0);
    /* y's rate changes, the others move but stay alike. */
    ratelimit_apply(rl, config("[{\"tenant\": \"*\", \"rate\": 1, \"burst\": 1}, "
                               "{\"model\": \"y\", \"rate\": 2, \"burst\": 2}, "
                               "{\"model\": \"x\", \"rate\": 1, \"burst\": 2}]"));
    assert_int_equal(ratelimit_admit(rl, NULL, "x", T0, &info, &err), -1); /* still empty */
    assert_string_equal(err.msg, "rate limit of model x exceeded (1/s, burst 2)");
    assert_int_equal(ratelimit_admit(rl, "t", "z", T0, &info, &err), -1);
    assert_int_equal(ratelimit_admit(rl, NULL, "y", T0, &info, &err), 0); /* starts full */
    assert_int_equal(info.remaining, 1);
    assert_int_equal(metric(rl, "inferd_rate_limit_requests_total{rule=\"2\",model=\"x\","
                                "outcome=\"admitted\"}"),
                     2);
    assert_int_equal(metric(rl, "inferd_rate_limit_requests_total{rule=\"1\",model=\"y\","
                                "outcome=\"admitted\"}"),
                     1);
    /* A removed rule no longer limits; no rules at all: nothing. */
    ratelimit_apply(rl, config("[{\"model\": \"y\", \"rate\": 2, \"burst\": 2}]"));
    assert_int_equal(ratelimit_admit(rl, NULL, "x", T0, &info, &err), 0);
    assert_false(info.set);
    ratelimit_apply(rl, config("null"));
    assert_int_equal(ratelimit_admit(rl, NULL, "y", T0, &info, &err), 0);
    assert_false(info.set);
    assert_int_equal(metric(rl, "inferd_rate_limit_tokens{rule=\"0\",model=\"y\"}"), -1);
    ratelimit_free(rl);
}

static void test_tenant_table_capacity(void **state)
{
    (void)state;
    struct ratelimit *rl = store("[{\"tenant\": \"*\", \"rate\": 0.001, \"burst\": 1}]");
    struct serve_ratelimit info;
    struct error err;
    uint32_t admitted = 0;
    char name[32];
    for (uint32_t i = 0; i < RATELIMIT_TENANTS + 100; i++) {
        snprintf(name, sizeof name, "tenant-%u", i);
        admitted += ratelimit_admit(rl, name, "m", T0, &info, &err) == 0;
    }
    /* One bucket each for the first 4096, one shared by the 100 others. */
    assert_int_equal(admitted, RATELIMIT_TENANTS + 1);
    assert_int_equal(ratelimit_admit(rl, "tenant-7", "m", T0, &info, &err), -1);
    assert_int_equal(
        metric(rl, "inferd_rate_limit_requests_total{rule=\"0\",tenant=\"*\",outcome=\"limited\"}"),
        99);
    assert_int_equal(metric(rl, "inferd_rate_limit_requests_total{rule=\"0\",tenant=\"tenant-7\","
                                "outcome=\"limited\"}"),
                     1);
    ratelimit_free(rl);
}

static void test_no_allocation_on_admission_or_refusal(void **state)
{
    (void)state;
    struct ratelimit *rl = store("[{\"tenant\": \"*\", \"rate\": 1, \"burst\": 3}, "
                                 "{\"model\": \"m\", \"rate\": 1, \"burst\": 2}]");
    struct serve_ratelimit info;
    struct error err;
    uint64_t before = mem_alloc_count();
    assert_int_equal(ratelimit_admit(rl, "a", "m", T0, &info, &err), 0);
    assert_int_equal(ratelimit_admit(rl, "b", "m", T0, &info, &err), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(ratelimit_admit(rl, "a", "m", T0, &info, &err), -1);
    assert_int_equal(mem_alloc_count(), before);
    ratelimit_free(rl);
}

struct hammer {
    struct ratelimit *rl;
    uint64_t end_ns;
    _Atomic uint64_t admitted, first_ns, last_ns;
};

static void *hammer_run(void *arg)
{
    struct hammer *h = arg;
    struct serve_ratelimit info;
    struct error err;
    for (;;) {
        uint64_t now = clock_now_ns();
        if (now >= h->end_ns)
            return NULL;
        if (ratelimit_admit(h->rl, NULL, "m", now, &info, &err) != 0)
            continue;
        atomic_fetch_add(&h->admitted, 1);
        uint64_t v = atomic_load(&h->first_ns);
        while (now < v && !atomic_compare_exchange_weak(&h->first_ns, &v, now))
            ;
        v = atomic_load(&h->last_ns);
        while (now > v && !atomic_compare_exchange_weak(&h->last_ns, &v, now))
            ;
    }
}

static void test_threads_take_exactly_the_rate(void **state)
{
    (void)state;
    /* A burst that covers a second of not being scheduled on a busy
     * machine: tokens then wait in the bucket instead of being lost. */
    struct hammer h = {.rl = store("[{\"rate\": 1000, \"burst\": 1000}]")};
    atomic_init(&h.first_ns, UINT64_MAX);
    h.end_ns = clock_now_ns() + 400 * MS;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_run, &h), 0);
    /* Meanwhile, reloads of the same rule: its bucket carries over each
     * time, and calls in flight finish under the configuration they hold. */
    uint32_t reloads = 0;
    while (clock_now_ns() < h.end_ns) {
        ratelimit_apply(h.rl, config("[{\"rate\": 1000, \"burst\": 1000}]"));
        reloads++;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_true(reloads > 10);
    /* Tokens refill from the first call on: burst + rate × elapsed, give
     * or take the token being refilled at the last call. */
    double expected = 1000 + (double)(h.last_ns - h.first_ns) * 1000 / SEC;
    double admitted = (double)h.admitted;
    if (admitted < expected - 1 || admitted > expected + 1)
        fail_msg("admitted %.0f, expected %.1f +- 1", admitted, expected);
    ratelimit_free(h.rl);
}

static void test_stage_refuses_with_429(void **state)
{
    (void)state;
    struct ratelimit *rl = store("[{\"model\": \"m\", \"rate\": 0.25, \"burst\": 1}]");
    static struct infer_call call;
    call.model_name = "m";
    assert_int_equal(ratelimit_stage(&call, rl), STAGE_CONTINUE);
    assert_true(call.ratelimit.set);
    assert_int_equal(call.ratelimit.remaining, 0);
    assert_int_equal(call.ratelimit.reset_s, 4);
    assert_int_equal(ratelimit_stage(&call, rl), STAGE_DONE);
    assert_int_equal(call.req.rc, -1);
    assert_int_equal(call.req.err.status, 429);
    assert_int_equal(call.req.err.retry_after_s, 4); /* 4 s less the µs between the calls */
    assert_string_equal(call.req.err.msg, "rate limit of model m exceeded (0.25/s, burst 1)");
    ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors_name_the_path),
        cmocka_unit_test(test_parse_defaults),
        cmocka_unit_test(test_gcra_burst_then_refusal),
        cmocka_unit_test(test_gcra_refill_rate_is_exact),
        cmocka_unit_test(test_gcra_give_back),
        cmocka_unit_test(test_retry_after_and_headers),
        cmocka_unit_test(test_give_back_when_a_second_rule_refuses),
        cmocka_unit_test(test_matching_and_fairness),
        cmocka_unit_test(test_reload_keeps_unchanged_buckets),
        cmocka_unit_test(test_tenant_table_capacity),
        cmocka_unit_test(test_no_allocation_on_admission_or_refusal),
        cmocka_unit_test(test_threads_take_exactly_the_rate),
        cmocka_unit_test(test_stage_refuses_with_429),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
