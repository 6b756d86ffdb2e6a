/*
 * Fuzz target for policy/route (the routing table: the PUT body of
 * /v2/models/{m}/routing and the file routing.json). Properties checked on
 * every input:
 *   - route_parse succeeds, or fails with a 400/413 and a message;
 *   - a parsed table respects its limits: arms and sticky splits within
 *     ROUTE_MAX_ARMS, percents within 10,000 buckets, every bucket owned by
 *     an existing split (and each split's count is what it owns), headers
 *     NUL-terminated, lower-case, non-empty;
 *   - the JSON it writes parses back (with and without the table as the
 *     previous one) to a table that writes the same JSON;
 *   - route_choose on it with a fixed set of headers returns a known rule.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "policy/route.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_route: %s\n", what);
        abort();
    }
}

static void write_table(const struct route_table *t, struct buf *b)
{
    buf_reset(b);
    struct json_writer w;
    json_w_init(&w, b);
    route_write_json(t, "m", &w);
    check(!b->err, "writing the table failed");
}

static void check_table(const struct route_table *t)
{
    check(t->narms <= ROUTE_MAX_ARMS && t->nsticky <= ROUTE_MAX_ARMS, "too many arms");
    check(t->weight_bp <= ROUTE_BUCKETS && t->shadow_bp <= ROUTE_BUCKETS, "percent out of range");
    check(t->pin_header[0] && strlen(t->pin_header) < ROUTE_HEADER_MAX, "pin header");
    for (const char *c = t->pin_header; *c; c++)
        check(!(*c >= 'A' && *c <= 'Z'), "pin header not lower-case");
    uint32_t owned[ROUTE_MAX_ARMS] = {0};
    check(!t->nsticky == !t->bucket_owner, "bucket owners without splits");
    for (uint32_t b = 0; t->bucket_owner && b < ROUTE_BUCKETS; b++) {
        uint8_t o = t->bucket_owner[b];
        check(o <= t->nsticky, "bucket owned by no split");
        if (o)
            owned[o - 1]++;
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < t->nsticky; i++) {
        check(owned[i] == t->sticky[i].buckets, "split count differs from what it owns");
        total += owned[i];
    }
    check(total <= ROUTE_BUCKETS, "more buckets owned than exist");
}

static const char *headers(const void *ctx, const char *name, size_t *len)
{
    (void)ctx;
    if (strcmp(name, "x-user-id") == 0 || strcmp(name, "x-ab-group") == 0) {
        *len = 1;
        return "a";
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct route_table *t = NULL, *back = NULL, *again = NULL;
    struct error err;
    error_clear(&err);
    if (route_parse((const char *)data, size, NULL, &t, &err) != 0) {
        check(!t, "a table from a failed parse");
        check((err.status == 400 || err.status == 413) && err.msg[0], "failure without a 400");
        return 0;
    }
    check_table(t);
    struct route_choice c;
    route_choose(t, headers, NULL, 12345, &c);
    check(c.kind == ROUTE_DEFAULT || c.kind == ROUTE_AB || c.kind == ROUTE_CANARY ||
              (c.kind == ROUTE_PIN && c.pin_len == 1),
          "unknown rule chosen");
    struct buf first, second;
    buf_init(&first, 1 << 22);
    buf_init(&second, 1 << 22);
    write_table(t, &first);
    check(route_parse(first.data, first.len, NULL, &back, &err) == 0, "own JSON does not parse");
    check_table(back);
    back->generation = t->generation;
    write_table(back, &second);
    check(first.len == second.len && memcmp(first.data, second.data, first.len) == 0,
          "own JSON parses to another table");
    check(route_parse(first.data, first.len, t, &again, &err) == 0,
          "own JSON does not parse over itself");
    check(memcmp(again->bucket_owner ? again->bucket_owner : (uint8_t *)"",
                 t->bucket_owner ? t->bucket_owner : (uint8_t *)"",
                 t->bucket_owner ? ROUTE_BUCKETS : 0) == 0,
          "own JSON over itself moves buckets");
    buf_free(&first);
    buf_free(&second);
    route_table_unref(t);
    route_table_unref(back);
    route_table_unref(again);
    return 0;
}
