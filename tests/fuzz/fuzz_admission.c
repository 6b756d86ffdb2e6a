/*
 * Fuzz target for the `concurrency` and `breakers` sections of the config
 * file (policy/limiter.c, policy/breaker.c), given here as JSON text: the
 * loader turns YAML into the same tree. The input is parsed as each of the
 * two sections. Properties checked on every input:
 *   - each parse succeeds, or fails with a 400 whose message starts with
 *     the section's key (the path) and fits its buffer;
 *   - a parsed configuration can be applied to a store, applied again
 *     (every limiter and breaker carried over) and replaced by the empty
 *     configuration, with metrics written in between, without leaking
 *     (the sanitizer build) or crashing.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "policy/breaker.h"
#include "policy/limiter.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_admission: %s\n", what);
        abort();
    }
}

static void check_error(const struct error *err, const char *key)
{
    check(err->status == 400, "an error that is not a 400");
    check(memchr(err->msg, 0, sizeof err->msg) != NULL, "message not terminated");
    check(strncmp(err->msg, key, strlen(key)) == 0, "an error without its path");
}

static void limiter_round(const struct json_value *v)
{
    struct limiter_config *c = NULL, *again = NULL, *none = NULL;
    struct error err;
    error_clear(&err);
    if (limiter_config_parse(v, &c, &err) != 0) {
        check(c == NULL, "a configuration despite the error");
        check_error(&err, "concurrency");
        return;
    }
    check(limiter_config_parse(v, &again, &err) == 0, "the same text parsed differently");
    check(limiter_config_parse(NULL, &none, &err) == 0, "no section refused");
    struct limiter *l = limiter_new();
    check(l != NULL, "out of memory");
    struct buf out;
    buf_init(&out, 1 << 20);
    limiter_apply(l, c);
    limiter_write_metrics(l, &out);
    limiter_apply(l, again);
    limiter_apply(l, none);
    limiter_write_metrics(l, &out);
    buf_free(&out);
    limiter_free(l);
}

static void breaker_round(const struct json_value *v)
{
    struct breaker_config *c = NULL, *again = NULL, *none = NULL;
    struct error err;
    error_clear(&err);
    if (breaker_config_parse(v, &c, &err) != 0) {
        check(c == NULL, "a configuration despite the error");
        check_error(&err, "breakers");
        return;
    }
    check(breaker_config_parse(v, &again, &err) == 0, "the same text parsed differently");
    check(breaker_config_parse(NULL, &none, &err) == 0, "no section refused");
    struct breaker *b = breaker_new();
    check(b != NULL, "out of memory");
    struct buf out;
    buf_init(&out, 1 << 20);
    breaker_apply(b, c);
    breaker_write_metrics(b, &out);
    breaker_apply(b, again);
    breaker_apply(b, none);
    breaker_write_metrics(b, &out);
    buf_free(&out);
    breaker_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct arena arena;
    arena_init(&arena, 4096, 1 << 20);
    struct json_value *v = NULL;
    if (json_parse(&arena, (const char *)data, size, NULL, &v, NULL, NULL) == 0) {
        limiter_round(v);
        breaker_round(v);
    }
    arena_free(&arena);
    return 0;
}
