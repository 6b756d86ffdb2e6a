/*
 * The routing table (policy/route.c), the canary guard (policy/guard.c) and
 * the output diff (policy/diff.c), without a server: parsing and its
 * errors, the sticky bucket assignment and how little of it moves, the
 * rule order, when the guard trips, and what a diff reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "policy/diff.h"
#include "policy/guard.h"
#include "policy/route.h"

static struct route_table *parse_ok(const char *json, const struct route_table *prev)
{
    struct route_table *t = NULL;
    struct error err;
    int rc = route_parse(json, strlen(json), prev, &t, &err);
    if (rc != 0)
        fail_msg("route_parse(%s): %s", json, err.msg);
    return t;
}

/* The error of a table that must not parse; `field` must be in it. */
static void parse_fails(const char *json, const char *field)
{
    struct route_table *t = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(route_parse(json, strlen(json), NULL, &t, &err), -1);
    assert_null(t);
    assert_int_equal(err.status, 400);
    if (!strstr(err.msg, field))
        fail_msg("error '%s' does not name '%s'", err.msg, field);
}

static void test_defaults(void **state)
{
    (void)state;
    struct route_table *t = parse_ok("{}", NULL);
    assert_string_equal(t->pin_header, "x-model-version");
    assert_string_equal(t->arm_header, "x-ab-group");
    assert_string_equal(t->key_header, "");
    assert_int_equal(t->default_version, -1);
    assert_false(t->canary);
    assert_false(t->shadow);
    assert_int_equal(t->nsticky, 0);
    route_table_unref(t);
}

static void test_errors_name_the_field(void **state)
{
    (void)state;
    parse_fails("[]", "JSON object");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 150}}", "canary.weight");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 5.001}}", "canary.weight");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 1, \"weight\": 5}}", "canary.version");
    parse_fails("{\"canary\": {\"stable\": -1, \"version\": 2, \"weight\": 5}}", "canary.stable");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 5, \"guard\": {}}}",
                "canary.guard");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 5, \"guard\": "
                "{\"max_error_ratio\": 2}}}",
                "canary.guard.max_error_ratio");
    parse_fails("{\"colour\": 1}", "colour: unknown field");
    parse_fails("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 5, \"x\": 1}}",
                "canary.x");
    parse_fails("{\"pin_header\": \"bad header\"}", "pin_header");
    parse_fails("{\"sticky\": [{\"version\": 1, \"percent\": 50}]}", "key_header");
    parse_fails("{\"key_header\": \"k\", \"sticky\": [{\"version\": 1, \"percent\": 60}, "
                "{\"version\": 2, \"percent\": 50}]}",
                "more than 100");
    parse_fails("{\"key_header\": \"k\", \"sticky\": [{\"version\": 1, \"percent\": 60}, "
                "{\"version\": 1, \"percent\": 10}]}",
                "sticky[1].version");
    parse_fails("{\"key_header\": \"k\", \"sticky\": [{\"version\": 1, \"buckets\": [[0, 10]]}, "
                "{\"version\": 2, \"buckets\": [[10, 20]]}]}",
                "sticky[1].buckets[0]");
    parse_fails("{\"arms\": {\"a\": \"one\"}}", "arms.a");
    parse_fails("{\"shadow\": {\"version\": 2, \"percent\": 101}}", "shadow.percent");
    parse_fails("{\"shadow\": {\"percent\": 10}}", "shadow.version");
    parse_fails("{\"default_version\": 1.5}", "default_version");
    parse_fails("{\"generation\": \"x\"}", "generation");
}

static uint32_t owned_by(const struct route_table *t, int64_t version)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < ROUTE_BUCKETS; b++)
        n += t->bucket_owner[b] && t->sticky[t->bucket_owner[b] - 1].version == version;
    return n;
}

static int64_t owner_version(const struct route_table *t, uint32_t b)
{
    return t->bucket_owner[b] ? t->sticky[t->bucket_owner[b] - 1].version : -1;
}

/* Changing one arm's share moves only the buckets that must move. */
static void test_sticky_moves_the_minimum(void **state)
{
    (void)state;
    struct route_table *a = parse_ok("{\"key_header\": \"x-user-id\", \"sticky\": [{\"version\": "
                                     "1, \"percent\": 50}, {\"version\": 2, \"percent\": 50}]}",
                                     NULL);
    assert_int_equal(owned_by(a, 1), 5000);
    assert_int_equal(owned_by(a, 2), 5000);
    struct route_table *b = parse_ok("{\"key_header\": \"x-user-id\", \"sticky\": [{\"version\": "
                                     "1, \"percent\": 60}, {\"version\": 2, \"percent\": 40}]}",
                                     a);
    assert_int_equal(owned_by(b, 1), 6000);
    assert_int_equal(owned_by(b, 2), 4000);
    uint32_t moved = 0;
    for (uint32_t i = 0; i < ROUTE_BUCKETS; i++) {
        if (owner_version(a, i) == owner_version(b, i))
            continue;
        moved++;
        assert_int_equal(owner_version(a, i), 2); /* only from the arm that shrank */
        assert_int_equal(owner_version(b, i), 1);
    }
    assert_int_equal(moved, 1000);
    /* A third arm takes only from the unowned rest and the arms that shrink. */
    struct route_table *c = parse_ok("{\"key_header\": \"x-user-id\", \"sticky\": [{\"version\": "
                                     "1, \"percent\": 60}, {\"version\": 2, \"percent\": 30}, "
                                     "{\"version\": 3, \"percent\": 10}]}",
                                     b);
    for (uint32_t i = 0; i < ROUTE_BUCKETS; i++)
        if (owner_version(b, i) == 1)
            assert_int_equal(owner_version(c, i), 1);
    assert_int_equal(owned_by(c, 3), 1000);
    route_table_unref(a);
    route_table_unref(b);
    route_table_unref(c);
}

/* GET's form (with bucket ranges) parses back to the same assignment. */
static void test_round_trip(void **state)
{
    (void)state;
    struct route_table *a = parse_ok(
        "{\"key_header\": \"x-user-id\", \"arms\": {\"control\": 1, \"treatment\": 2}, "
        "\"sticky\": [{\"version\": 1, \"percent\": 33.33}, {\"version\": 2, \"percent\": 20}], "
        "\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 5.5, \"guard\": "
        "{\"max_error_ratio\": 0.05, \"window_s\": 30, \"min_requests\": 10}}, "
        "\"default_version\": 1, \"shadow\": {\"version\": 2, \"percent\": 12.5, \"log_every\": 3}}",
        NULL);
    struct buf out;
    buf_init(&out, 1 << 20);
    struct json_writer w;
    json_w_init(&w, &out);
    route_write_json(a, "m", &w);
    buf_append(&out, "", 1); /* NUL-terminated for parse_ok */
    struct route_table *b = parse_ok(out.data, NULL); /* no previous table: buckets as given */
    assert_memory_equal(a->bucket_owner, b->bucket_owner, ROUTE_BUCKETS);
    assert_int_equal(b->sticky[0].buckets, 3333);
    assert_int_equal(b->weight_bp, 550);
    assert_int_equal(b->shadow_bp, 1250);
    assert_int_equal(b->shadow_log_every, 3);
    assert_true(b->has_guard);
    assert_int_equal(b->guard.window_s, 30);
    assert_int_equal(b->guard.min_requests, 10);
    assert_true(b->guard.max_p99_ratio == 0);
    assert_int_equal(b->narms, 2);
    assert_string_equal(b->arms[1].name, "treatment");
    assert_int_equal(b->default_version, 1);
    buf_free(&out);
    route_table_unref(a);
    route_table_unref(b);
}

/* The documented bucket function (docs/traffic.md has it in Python). */
static void test_bucket_values(void **state)
{
    (void)state;
    assert_int_equal(route_bucket("user-1", 6), 5477);
    assert_int_equal(route_bucket("alice", 5), 7236);
    assert_int_equal(route_bucket("", 0), 4342);
}

struct headers {
    const char *names[4];
    const char *values[4];
};

static const char *get_header(const void *ctx, const char *name, size_t *len)
{
    const struct headers *h = ctx;
    for (int i = 0; i < 4 && h->names[i]; i++)
        if (strcmp(h->names[i], name) == 0) {
            *len = strlen(h->values[i]);
            return h->values[i];
        }
    return NULL;
}

static void test_rule_order(void **state)
{
    (void)state;
    struct route_table *t = parse_ok(
        "{\"key_header\": \"x-user-id\", \"arms\": {\"b\": 2}, \"sticky\": [{\"version\": 3, "
        "\"buckets\": [[5477, 5477]]}], \"canary\": {\"stable\": 1, \"version\": 4, \"weight\": "
        "100}, \"default_version\": 5}",
        NULL);
    struct route_choice c;
    struct headers all = {{"x-model-version", "x-ab-group", "x-user-id"}, {"7", "b", "user-1"}};
    route_choose(t, get_header, &all, 0, &c);
    assert_int_equal(c.kind, ROUTE_PIN);
    assert_int_equal(c.pin_len, 1);
    struct headers arm = {{"x-ab-group", "x-user-id"}, {"b", "user-1"}};
    route_choose(t, get_header, &arm, 0, &c);
    assert_int_equal(c.kind, ROUTE_AB);
    assert_int_equal(c.version, 2);
    struct headers unknown_arm = {{"x-ab-group", "x-user-id"}, {"zzz", "user-1"}};
    route_choose(t, get_header, &unknown_arm, 0, &c);
    assert_int_equal(c.kind, ROUTE_AB); /* falls through to the sticky bucket */
    assert_int_equal(c.version, 3);
    struct headers other_user = {{"x-user-id"}, {"alice"}}; /* bucket 7236: no arm owns it */
    route_choose(t, get_header, &other_user, 0, &c);
    assert_int_equal(c.kind, ROUTE_CANARY);
    assert_int_equal(c.version, 4);
    route_table_unref(t);

    t = parse_ok("{\"default_version\": 5}", NULL);
    struct headers none = {{NULL}, {NULL}};
    route_choose(t, get_header, &none, 0, &c);
    assert_int_equal(c.kind, ROUTE_DEFAULT);
    assert_int_equal(c.version, 5);
    route_table_unref(t);
}

/* Without key or request id the draw decides; with a request id the same
 * id always lands on the same side. */
static void test_canary_split(void **state)
{
    (void)state;
    struct route_table *t =
        parse_ok("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 10}}", NULL);
    struct headers none = {{NULL}, {NULL}};
    uint32_t canary = 0;
    struct route_choice c;
    for (uint64_t d = 0; d < 10000; d++) {
        route_choose(t, get_header, &none, d, &c);
        canary += c.version == 2;
    }
    assert_int_equal(canary, 1000); /* draws 0..9999 cover every bucket once */
    struct headers id = {{"x-request-id"}, {"req-42"}};
    route_choose(t, get_header, &id, 1, &c);
    int64_t first = c.version;
    for (uint64_t d = 0; d < 100; d++) {
        route_choose(t, get_header, &id, d, &c);
        assert_int_equal(c.version, first);
    }
    route_table_unref(t);
}

static void test_rolled_back_copy(void **state)
{
    (void)state;
    struct route_table *t =
        parse_ok("{\"canary\": {\"stable\": 1, \"version\": 2, \"weight\": 25}}", NULL);
    struct route_table *r = route_rolled_back(t, 1234, "error ratio too high");
    assert_int_equal(r->weight_bp, 0);
    assert_int_equal(r->rollback_weight_bp, 2500);
    assert_true(r->rolled_back);
    assert_string_equal(r->rollback_reason, "error ratio too high");
    assert_int_equal(t->weight_bp, 2500); /* the original is immutable */
    route_table_unref(t);
    route_table_unref(r);
}

/* ---- guard ------------------------------------------------------------------------ */

static void guard_with(struct guard *g, double max_err, double max_p99, uint32_t min)
{
    struct route_guard cfg = {.max_error_ratio = max_err, .max_p99_ratio = max_p99,
                              .window_s = 10, .min_requests = min};
    guard_init(g);
    guard_reset(g, &cfg, 7);
}

static void test_guard_error_ratio(void **state)
{
    (void)state;
    struct guard g;
    char why[256];
    guard_with(&g, 0.1, 0, 20);
    uint64_t now = 1000000000000ull;
    /* Stable: 1 error in 20. Canary: every other request fails. */
    for (int i = 0; i < 20; i++)
        assert_false(guard_record(&g, 7, false, i == 0, 1000000, now, why, sizeof why));
    bool tripped = false;
    int n = 0;
    while (!tripped && n < 100)
        tripped = guard_record(&g, 7, true, n++ % 2 == 0, 1000000, now, why, sizeof why);
    assert_true(tripped);
    assert_int_equal(n, 20); /* as soon as the canary has min_requests */
    assert_non_null(strstr(why, "error ratio 0.5000 > 0.1000"));
    /* Once per reset; another generation is not recorded. */
    assert_false(guard_record(&g, 7, true, true, 1000000, now, why, sizeof why));
    assert_false(guard_record(&g, 8, true, true, 1000000, now, why, sizeof why));
    guard_destroy(&g);
}

/* A failure both sides share is not the canary's. */
static void test_guard_shared_failure(void **state)
{
    (void)state;
    struct guard g;
    char why[256];
    guard_with(&g, 0.1, 0, 20);
    uint64_t now = 1000000000000ull;
    for (int i = 0; i < 40; i++)
        assert_false(guard_record(&g, 7, i % 2, true, 1000000, now, why, sizeof why));
    guard_destroy(&g);
}

static void test_guard_p99_and_window(void **state)
{
    (void)state;
    struct guard g;
    char why[256];
    guard_with(&g, -1, 3, 50);
    uint64_t now = 1000000000000ull;
    for (int i = 0; i < 100; i++)
        guard_record(&g, 7, false, false, 1000000, now, why, sizeof why); /* 1 ms */
    /* A healthy canary, twice as slow: under the ratio. */
    for (int i = 0; i < 100; i++)
        assert_false(guard_record(&g, 7, true, false, 2000000, now, why, sizeof why));
    struct guard_view v;
    guard_read(&g, now, &v);
    assert_int_equal(v.requests[0], 100);
    assert_int_equal(v.requests[1], 100);
    /* The window moved on: what was recorded is gone. */
    guard_read(&g, now + 11000000000ull, &v);
    assert_int_equal(v.requests[0], 0);
    assert_int_equal(v.requests[1], 0);
    guard_destroy(&g);

    guard_with(&g, -1, 3, 50);
    for (int i = 0; i < 100; i++)
        guard_record(&g, 7, false, false, 1000000, now, why, sizeof why);
    bool tripped = false;
    for (int i = 0; i < 100 && !tripped; i++)
        tripped = guard_record(&g, 7, true, false, 20000000, now, why, sizeof why); /* 20 ms */
    assert_true(tripped);
    assert_non_null(strstr(why, "p99 ratio"));
    guard_destroy(&g);
}

/* ---- diff ---------------------------------------------------------------------------- */

static struct tensor fp32(float *v, int64_t rows, int64_t cols)
{
    struct tensor t = {.name = "t", .dtype = DT_FP32, .ndim = 2, .shape = {rows, cols},
                       .data = v, .nbytes = (size_t)(rows * cols) * sizeof(float)};
    return t;
}

static void test_diff_floats(void **state)
{
    (void)state;
    float a[6] = {0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f};
    float b[6] = {0.1f, 0.3f, 0.4f, 0.5f, 0.45f, 0.05f};
    struct tensor x = fp32(a, 2, 3), y = fp32(b, 2, 3);
    struct diff_result d;
    diff_tensors(&x, &y, &d);
    assert_true(d.comparable);
    assert_true(d.is_float);
    assert_int_equal(d.elements, 6);
    assert_int_equal(d.equal, 2);
    assert_true(fabs(d.max_abs - 0.4) < 1e-6);
    assert_int_equal(d.worst, 1);
    assert_true(fabs(d.max_rel - 0.4 / 0.7) < 1e-6);
    assert_int_equal(d.rows, 2);
    assert_int_equal(d.argmax_agree, 1); /* row 0: 1 vs 2; row 1: 0 vs 0 */
    struct tensor z = fp32(b, 3, 2);
    diff_tensors(&x, &z, &d);
    assert_false(d.comparable);
}

static void test_diff_integers_and_bytes(void **state)
{
    (void)state;
    int64_t a[4] = {1, 2, 3, 4}, b[4] = {1, 9, 3, 8};
    struct tensor x = {.dtype = DT_INT64, .ndim = 1, .shape = {4}, .data = a, .nbytes = 32};
    struct tensor y = x;
    y.data = b;
    struct diff_result d;
    diff_tensors(&x, &y, &d);
    assert_false(d.is_float);
    assert_int_equal(d.equal, 2);
    assert_int_equal(d.worst, 1);
    assert_true(d.worst_a == 2 && d.worst_b == 9);
    assert_int_equal(d.rows, 0);
    struct tensor_bytes s1[2] = {{"ab", 2}, {"c", 1}}, s2[2] = {{"ab", 2}, {"d", 1}};
    struct tensor p = {.dtype = DT_BYTES, .ndim = 1, .shape = {2}, .data = s1, .nbytes = 3};
    struct tensor q = p;
    q.data = s2;
    diff_tensors(&p, &q, &d);
    assert_int_equal(d.equal, 1);
    assert_int_equal(d.worst, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_sticky_moves_the_minimum),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bucket_values),
        cmocka_unit_test(test_rule_order),
        cmocka_unit_test(test_canary_split),
        cmocka_unit_test(test_rolled_back_copy),
        cmocka_unit_test(test_guard_error_ratio),
        cmocka_unit_test(test_guard_shared_failure),
        cmocka_unit_test(test_guard_p99_and_window),
        cmocka_unit_test(test_diff_floats),
        cmocka_unit_test(test_diff_integers_and_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
