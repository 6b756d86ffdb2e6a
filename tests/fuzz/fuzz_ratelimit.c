/*
 * Fuzz target for policy/ratelimit_rules (the `rate-limits` section of the
 * config file, given here as JSON text: the loader turns YAML into the same
 * tree). Properties checked on every input:
 *   - ratelimit_rules_parse succeeds, or fails with a 400 whose message
 *     starts with "rate-limits" (the path);
 *   - parsed rules respect their limits: at most RATELIMIT_MAX_RULES, rate
 *     and burst in range, names NUL-terminated within their buffers, a
 *     "*" tenant stored as RATELIMIT_EACH_TENANT, no two rules alike;
 *   - each rule's bucket behaves: from full, exactly `burst` calls are
 *     admitted at one instant, the next is refused with a wait of at most
 *     one interval, and the times involved do not overflow.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "policy/gcra.h"
#include "policy/ratelimit_rules.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_ratelimit: %s\n", what);
        abort();
    }
}

static void check_bucket(const struct ratelimit_rule *r)
{
    const uint64_t now = 1000000000000000ull; /* ~11 days of uptime */
    const struct gcra_params *p = &r->gcra;
    check(p->interval_ns >= 1 && p->burst == r->burst, "bucket shape");
    check(p->tolerance_ns == (uint64_t)(r->burst - 1) * p->interval_ns, "tolerance");
    check(p->tolerance_ns + p->interval_ns < UINT64_MAX - now, "bucket times overflow");
    _Atomic uint64_t tat = 0;
    /* Bursts are up to a million: check the first and the last few calls. */
    uint32_t fast = r->burst > 64 ? r->burst - 64 : 0;
    if (fast)
        tat = now + (uint64_t)fast * p->interval_ns;
    for (uint32_t i = fast; i < r->burst; i++)
        check(gcra_take(&tat, p, now, NULL), "a full bucket refused within its burst");
    uint64_t wait = 0;
    check(!gcra_take(&tat, p, now, &wait), "a bucket admitted more than its burst");
    check(wait >= 1 && wait <= p->interval_ns, "wait longer than one interval");
    check(gcra_remaining(tat, p, now) == 0, "tokens left in an empty bucket");
    check(gcra_take(&tat, p, now + wait, NULL), "no token after the wait");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct arena arena;
    arena_init(&arena, 4096, 1 << 20);
    struct json_value *v = NULL;
    if (json_parse(&arena, (const char *)data, size, NULL, &v, NULL, NULL) != 0)
        goto out;
    struct ratelimit_rule rules[RATELIMIT_MAX_RULES];
    uint32_t n = 0;
    struct error err;
    error_clear(&err);
    if (ratelimit_rules_parse(v, rules, &n, &err) != 0) {
        check(err.status == 400, "an error that is not a 400");
        check(strncmp(err.msg, "rate-limits", 11) == 0, "an error without its path");
        goto out;
    }
    check(n <= RATELIMIT_MAX_RULES, "too many rules");
    for (uint32_t i = 0; i < n; i++) {
        const struct ratelimit_rule *r = &rules[i];
        check(r->rate >= RATELIMIT_MIN_RATE && r->rate <= RATELIMIT_MAX_RATE, "rate out of range");
        check(r->burst >= 1 && r->burst <= RATELIMIT_MAX_BURST, "burst out of range");
        check(memchr(r->tenant, 0, sizeof r->tenant) && memchr(r->model, 0, sizeof r->model),
              "name not terminated");
        check((r->tenant_kind == RATELIMIT_ONE_TENANT) == (r->tenant[0] != 0), "tenant kind");
        check(strcmp(r->tenant, "*") != 0, "\"*\" kept as a tenant name");
        for (uint32_t k = 0; k < i; k++)
            check(!ratelimit_rule_same(&rules[k], r), "two rules alike");
        check_bucket(r);
    }
out:
    arena_free(&arena);
    return 0;
}
