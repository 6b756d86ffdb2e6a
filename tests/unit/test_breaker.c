/*
 * Circuit breakers (policy/circuit.c, policy/breaker.c) without a server:
 * the `breakers` section and its errors; the transitions with an injected
 * clock — consecutive failures, a failure ratio that needs its minimum
 * count and forgets what left the window, open → half-open after open
 * time, probes that close or reopen it, outcomes of an earlier state
 * ignored; and the stage, which refuses with Retry-After or switches an
 * unpinned call to the fallback version.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/log.h"
#include "model/model.h"
#include "policy/breaker.h"
#include "policy/circuit.h"

#define MS 1000000ull
#define SEC 1000000000ull

static struct arena arena;

static const struct json_value *tree(const char *text)
{
    struct json_value *v = NULL;
    if (json_parse(&arena, text, strlen(text), NULL, &v, NULL, NULL) != 0)
        fail_msg("bad JSON in the test: %s", text);
    return v;
}

static void parse_fails(const char *text, const char *message)
{
    struct breaker_config *c = (struct breaker_config *)1;
    struct error err;
    error_clear(&err);
    assert_int_equal(breaker_config_parse(tree(text), &c, &err), -1);
    assert_null(c);
    assert_int_equal(err.status, 400);
    if (strcmp(err.msg, message) != 0)
        fail_msg("error '%s', expected '%s'", err.msg, message);
}

static void test_section(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 1 << 20);
    struct breaker_config *c = NULL;
    struct error err;
    assert_int_equal(breaker_config_parse(NULL, &c, &err), 0);
    breaker_config_free(c);
    assert_int_equal(breaker_config_parse(tree("[{\"model\": \"digits\", \"version\": 2, "
                                               "\"failure-ratio\": 0.5, \"fallback-version\": "
                                               "\"1\"}]"),
                                          &c, &err),
                     0);
    breaker_config_free(c);
    parse_fails("[{\"model\": \"digits\", \"consecutive-failures\": 0}]",
                "breakers[0]: consecutive-failures and failure-ratio are both 0: the breaker "
                "could never open");
    parse_fails("[{\"model\": \"digits\", \"failure-ratio\": 1.5}]",
                "breakers[0].failure-ratio: expected a number from 0 to 1, got 1.5");
    parse_fails("[{\"model\": \"d\"}, {\"model\": \"digits\", \"open-secs\": 0}]",
                "breakers[1].open-secs: expected an integer from 1 to 3600, got 0");
    parse_fails("[{\"model\": \"digits\", \"version\": 2, \"fallback-version\": 2}]",
                "breakers[0].fallback-version: the version the breaker protects");
    parse_fails("[{\"model\": \"digits\", \"fallback\": 1}]", "breakers[0].fallback: unknown key");
    parse_fails("[{\"model\": \"digits\", \"model\": \"x\"}]", "breakers[0].model: given twice");
    parse_fails("[{\"model\": \"digits\"}, {\"model\": \"digits\"}]",
                "breakers[1]: model digits already has a breaker in breakers[0]");
    parse_fails("{}", "breakers: expected a list, got a mapping");
    arena_free(&arena);
}

/* ---- the state machine --------------------------------------------------------------- */

static struct circuit_params params(void)
{
    return (struct circuit_params){.consecutive = 3,
                                   .window_ns = 10 * SEC,
                                   .min_requests = 4,
                                   .open_ns = 5 * SEC,
                                   .probes = 2};
}

static enum circuit_state state_of(struct circuit *c)
{
    return (enum circuit_state)atomic_load(&c->state);
}

/* One call at now with outcome o; returns how it was admitted. */
static enum circuit_admission call(struct circuit *c, uint64_t now, enum circuit_outcome o)
{
    struct circuit_ticket t;
    uint64_t retry;
    enum circuit_admission a = circuit_admit(c, now, &t, &retry);
    if (a != CIRCUIT_REFUSE)
        circuit_record(c, &t, o, now);
    return a;
}

static void test_consecutive_failures_open_it(void **state)
{
    (void)state;
    struct circuit c;
    struct circuit_params p = params();
    circuit_init(&c, &p, "digits version 2");
    uint64_t t = SEC;
    call(&c, t, CIRCUIT_FAILURE);
    call(&c, t, CIRCUIT_FAILURE);
    call(&c, t, CIRCUIT_SUCCESS); /* the run is broken */
    call(&c, t, CIRCUIT_FAILURE);
    call(&c, t, CIRCUIT_NEITHER); /* a client error says nothing */
    call(&c, t, CIRCUIT_FAILURE);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    assert_int_equal(call(&c, t, CIRCUIT_FAILURE), CIRCUIT_PASS);
    assert_int_equal(state_of(&c), CIRCUIT_OPEN);
    assert_int_equal(atomic_load(&c.transitions[CIRCUIT_OPEN]), 1);
    struct circuit_ticket tk;
    uint64_t retry = 0;
    assert_int_equal(circuit_admit(&c, t + 2 * SEC, &tk, &retry), CIRCUIT_REFUSE);
    assert_int_equal(retry, 3 * SEC);
    circuit_destroy(&c);
}

static void test_failure_ratio_needs_its_minimum_and_its_window(void **state)
{
    (void)state;
    struct circuit c;
    struct circuit_params p = params();
    p.consecutive = 0;
    p.ratio = 0.5;
    circuit_init(&c, &p, "digits version 2");
    uint64_t t = 100 * SEC;
    /* Two failures of three: above the ratio, below the minimum count. */
    call(&c, t, CIRCUIT_FAILURE);
    call(&c, t, CIRCUIT_SUCCESS);
    call(&c, t, CIRCUIT_FAILURE);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    /* Eleven seconds later they left the window: 1 of 4 fail. */
    t += 11 * SEC;
    call(&c, t, CIRCUIT_SUCCESS);
    call(&c, t, CIRCUIT_SUCCESS);
    call(&c, t, CIRCUIT_SUCCESS);
    call(&c, t, CIRCUIT_FAILURE);
    uint32_t requests, failures;
    circuit_window(&c, t, &requests, &failures);
    assert_int_equal(requests, 4);
    assert_int_equal(failures, 1);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    /* 3 of 6 = 0.5: open. */
    call(&c, t + SEC, CIRCUIT_FAILURE);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    call(&c, t + SEC, CIRCUIT_FAILURE);
    assert_int_equal(state_of(&c), CIRCUIT_OPEN);
    circuit_destroy(&c);
}

/* Opens c (3 failures) at t. */
static void trip(struct circuit *c, uint64_t t)
{
    for (int i = 0; i < 3; i++)
        call(c, t, CIRCUIT_FAILURE);
    assert_int_equal(state_of(c), CIRCUIT_OPEN);
}

static void test_half_open_probes_close_or_reopen_it(void **state)
{
    (void)state;
    struct circuit c;
    struct circuit_params p = params();
    circuit_init(&c, &p, "digits version 2");
    uint64_t t = SEC;
    trip(&c, t);
    struct circuit_ticket a, b, x;
    uint64_t retry = 99;
    assert_int_equal(circuit_admit(&c, t + 5 * SEC - 1, &a, &retry), CIRCUIT_REFUSE);
    assert_int_equal(retry, 1);
    /* Open time is over: two probes pass, the third waits for them. */
    t += 5 * SEC;
    assert_int_equal(circuit_admit(&c, t, &a, &retry), CIRCUIT_PROBE);
    assert_int_equal(state_of(&c), CIRCUIT_HALF_OPEN);
    assert_int_equal(circuit_admit(&c, t, &b, &retry), CIRCUIT_PROBE);
    assert_int_equal(circuit_admit(&c, t, &x, &retry), CIRCUIT_REFUSE);
    assert_int_equal(retry, 0);
    /* A probe that ends neither way gives its place back. */
    circuit_record(&c, &b, CIRCUIT_NEITHER, t);
    assert_int_equal(circuit_admit(&c, t, &b, &retry), CIRCUIT_PROBE);
    circuit_record(&c, &a, CIRCUIT_SUCCESS, t);
    assert_int_equal(state_of(&c), CIRCUIT_HALF_OPEN);
    circuit_record(&c, &b, CIRCUIT_FAILURE, t);
    assert_int_equal(state_of(&c), CIRCUIT_OPEN);
    assert_int_equal(atomic_load(&c.transitions[CIRCUIT_OPEN]), 2);
    /* Again, and both succeed: closed, with a clean slate. */
    t += 5 * SEC;
    assert_int_equal(circuit_admit(&c, t, &a, &retry), CIRCUIT_PROBE);
    assert_int_equal(circuit_admit(&c, t, &b, &retry), CIRCUIT_PROBE);
    circuit_record(&c, &a, CIRCUIT_SUCCESS, t);
    circuit_record(&c, &b, CIRCUIT_SUCCESS, t);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    assert_int_equal(atomic_load(&c.transitions[CIRCUIT_HALF_OPEN]), 2);
    assert_int_equal(atomic_load(&c.transitions[CIRCUIT_CLOSED]), 1);
    call(&c, t, CIRCUIT_FAILURE);
    call(&c, t, CIRCUIT_FAILURE);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    circuit_destroy(&c);
}

static void test_outcomes_of_an_earlier_state_are_ignored(void **state)
{
    (void)state;
    struct circuit c;
    struct circuit_params p = params();
    p.probes = 1;
    circuit_init(&c, &p, "digits version 2");
    uint64_t t = SEC, retry;
    struct circuit_ticket slow;
    assert_int_equal(circuit_admit(&c, t, &slow, &retry), CIRCUIT_PASS);
    trip(&c, t);
    t += 5 * SEC;
    struct circuit_ticket probe;
    assert_int_equal(circuit_admit(&c, t, &probe, &retry), CIRCUIT_PROBE);
    /* The call admitted while closed fails now: not the probe's verdict. */
    circuit_record(&c, &slow, CIRCUIT_FAILURE, t);
    assert_int_equal(state_of(&c), CIRCUIT_HALF_OPEN);
    circuit_record(&c, &probe, CIRCUIT_SUCCESS, t);
    assert_int_equal(state_of(&c), CIRCUIT_CLOSED);
    circuit_destroy(&c);
}

/* ---- the stage ----------------------------------------------------------------------- */

static struct model *version(int64_t v)
{
    struct model *m = calloc(1, sizeof *m);
    m->name = "digits";
    m->version = v;
    snprintf(m->version_str, sizeof m->version_str, "%lld", (long long)v);
    atomic_init(&m->refs, 100); /* never freed by the stage */
    return m;
}

static void test_stage_refuses_or_falls_back(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 1 << 20);
    struct model *v1 = version(1), *v2 = version(2);
    struct model *versions[] = {v1, v2};
    struct model_entry e = {.name = "digits", .versions = versions, .nversions = 2, .model = v2};
    struct breaker *b = breaker_new();
    struct breaker_config *c;
    struct error err;
    assert_int_equal(breaker_config_parse(tree("[{\"model\": \"digits\", \"version\": 2, "
                                               "\"consecutive-failures\": 1, \"open-secs\": 30}]"),
                                          &c, &err),
                     0);
    breaker_apply(b, c);
    struct infer_call call;
    memset(&call, 0, sizeof call);
    arena_init(&call.req.arena, 4096, 1 << 20);
    call.entry = &e;
    call.req.model = v2;
    call.route = ROUTE_DEFAULT;
    /* One failure opens it. */
    assert_int_equal(breaker_stage(&call, b), STAGE_CONTINUE);
    call.req.rc = -1;
    call.req.err.status = 500;
    breaker_done(&call, b);
    call.req.rc = 0;
    assert_int_equal(breaker_stage(&call, b), STAGE_DONE);
    assert_int_equal(call.req.err.status, 503);
    assert_int_equal(call.req.err.retry_after_s, 30);
    assert_string_equal(call.req.err.msg,
                        "circuit breaker of digits version 2 is open (half-open in 30 s)");
    /* A changed entry (now with a fallback) starts a closed breaker: open
     * it again, with a 504 this time. */
    assert_int_equal(breaker_config_parse(tree("[{\"model\": \"digits\", \"version\": 2, "
                                               "\"consecutive-failures\": 1, \"open-secs\": 30, "
                                               "\"fallback-version\": 1}]"),
                                          &c, &err),
                     0);
    breaker_apply(b, c);
    call.req.rc = 0;
    assert_int_equal(breaker_stage(&call, b), STAGE_CONTINUE);
    call.req.rc = -1;
    call.req.err.status = 504;
    breaker_done(&call, b);
    call.req.rc = 0;
    assert_int_equal(breaker_stage(&call, b), STAGE_CONTINUE);
    assert_ptr_equal(call.req.model, v1);
    assert_int_equal(call.route, ROUTE_FALLBACK);
    assert_string_equal(route_kind_name(call.route), "fallback");
    assert_null(call.breaker_ctx); /* the fallback is not counted */
    /* A reload with the same entry keeps the open breaker. */
    assert_int_equal(breaker_config_parse(tree("[{\"model\": \"digits\", \"version\": 2, "
                                               "\"consecutive-failures\": 1, \"open-secs\": 30, "
                                               "\"fallback-version\": 1}, {\"model\": \"other\"}]"),
                                          &c, &err),
                     0);
    breaker_apply(b, c);
    call.req.model = v2;
    call.route = ROUTE_DEFAULT;
    assert_int_equal(breaker_stage(&call, b), STAGE_CONTINUE);
    assert_ptr_equal(call.req.model, v1);
    /* A client that named version 2 gets the 503. */
    call.req.model = v2;
    call.route = ROUTE_URL;
    assert_int_equal(breaker_stage(&call, b), STAGE_DONE);
    assert_int_equal(call.req.err.status, 503);
    /* Version 1 has no breaker. */
    call.req.model = v1;
    call.req.rc = 0;
    assert_int_equal(breaker_stage(&call, b), STAGE_CONTINUE);
    assert_null(call.breaker_ctx);
    struct buf out;
    buf_init(&out, 1 << 16);
    breaker_write_metrics(b, &out);
    buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "inferd_breaker_state{model=\"digits\",version=\"2\"} 1\n"));
    assert_non_null(strstr(out.data, "inferd_breaker_transitions_total{model=\"digits\","
                                     "version=\"2\",to=\"open\"} 1\n"));
    buf_free(&out);
    breaker_free(b);
    arena_free(&call.req.arena);
    arena_free(&arena);
    free(v1);
    free(v2);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section),
        cmocka_unit_test(test_consecutive_failures_open_it),
        cmocka_unit_test(test_failure_ratio_needs_its_minimum_and_its_window),
        cmocka_unit_test(test_half_open_probes_close_or_reopen_it),
        cmocka_unit_test(test_outcomes_of_an_earlier_state_are_ignored),
        cmocka_unit_test(test_stage_refuses_or_falls_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
