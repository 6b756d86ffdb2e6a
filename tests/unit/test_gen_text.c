/*
 * Unit tests for gen/gen_text: stop sequences across token boundaries, the
 * holdback of possible stop starts and of cut characters, U+FFFD replacement
 * against vectors from Python's bytes.decode("utf-8", "replace"), the same
 * output for every split of the same text, and the limits.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/mem.h"
#include "gen/gen_text.h"

#define FFFD "\xEF\xBF\xBD"

static void init(struct gen_text *t, const char *s0, const char *s1)
{
    const char *stops[2] = {s0, s1};
    size_t lens[2] = {s0 ? strlen(s0) : 0, s1 ? strlen(s1) : 0};
    assert_int_equal(gen_text_init(t, stops, lens, s1 ? 2 : s0 ? 1 : 0), 0);
}

/* Appends one token and checks what a take then releases. */
static int step(struct gen_text *t, const char *tok, const char *released)
{
    int rc = gen_text_append(t, tok, strlen(tok));
    struct buf out;
    buf_init(&out, 1 << 20);
    gen_text_take(t, false, &out);
    assert_int_equal(out.err, 0);
    assert_int_equal(out.len, strlen(released));
    if (out.len)
        assert_memory_equal(out.data, released, out.len);
    buf_free(&out);
    return rc;
}

static void finish(struct gen_text *t, const char *released)
{
    struct buf out;
    buf_init(&out, 1 << 20);
    gen_text_take(t, true, &out);
    assert_int_equal(out.len, strlen(released));
    if (out.len)
        assert_memory_equal(out.data, released, out.len);
    buf_free(&out);
    gen_text_free(t);
}

static void test_no_stops(void **state)
{
    (void)state;
    struct gen_text t;
    init(&t, NULL, NULL);
    assert_int_equal(step(&t, "Hello", "Hello"), 0);
    assert_int_equal(step(&t, ", world", ", world"), 0);
    assert_int_equal(step(&t, "", ""), 0);
    finish(&t, "");
}

static void test_stop_across_tokens(void **state)
{
    (void)state;
    struct gen_text t;
    init(&t, "\n\n", NULL);
    assert_int_equal(step(&t, "a\n", "a"), 0);        /* "\n" may start the stop */
    assert_int_equal(step(&t, "\nb", ""), 1);         /* and it did: nothing more */
    assert_int_equal(gen_text_append(&t, "x", 1), 1); /* ignored after a stop */
    finish(&t, "");

    init(&t, "END", NULL);
    assert_int_equal(step(&t, "xEN", "x"), 0);
    assert_int_equal(step(&t, "o", "ENo"), 0); /* not the stop after all */
    assert_int_equal(step(&t, "E", ""), 0);
    assert_int_equal(step(&t, "N", ""), 0);
    assert_int_equal(step(&t, "D!", ""), 1);
    finish(&t, "");

    /* A stop inside one token, with text before it in the same token. */
    init(&t, "END", NULL);
    assert_int_equal(step(&t, "abcENDdef", "abc"), 1); /* the rest is decided */
    finish(&t, "");

    /* Held text is released at the end when no stop came. */
    init(&t, "END", NULL);
    assert_int_equal(step(&t, "xEN", "x"), 0);
    finish(&t, "EN");
}

/* The text ends before the earliest-starting occurrence; which occurrences
 * exist depends on where the tokens ended. */
static void test_earliest_occurrence(void **state)
{
    (void)state;
    struct gen_text t;
    init(&t, "abc", "b");
    assert_int_equal(step(&t, "abc", ""), 1);
    finish(&t, "");

    init(&t, "abc", "b");
    assert_int_equal(step(&t, "ab", "a"), 1); /* "b" complete first */
    finish(&t, "");

    init(&t, "xyz", "yz");
    assert_int_equal(step(&t, "1xy", "1"), 0);
    assert_int_equal(step(&t, "z", ""), 1);
    finish(&t, "");

    /* Overlapping prefixes: "aab" in "aaab". */
    init(&t, "aab", NULL);
    assert_int_equal(step(&t, "a", ""), 0);
    assert_int_equal(step(&t, "a", ""), 0);
    assert_int_equal(step(&t, "a", "a"), 0);
    assert_int_equal(step(&t, "b", ""), 1);
    finish(&t, "");
}

/* Python: bytes.decode("utf-8", "replace"), whole text at once. */
static const struct {
    const char *in, *out;
} utf8_cases[] = {
    {"\xff", FFFD},
    {"\xe2\x82"
     "A",
     FFFD "A"},
    {"\xe2\x82", FFFD},
    {"\xf0\x80", FFFD FFFD},
    {"\xed\xa0\x80", FFFD FFFD FFFD},
    {"\xc0\xaf", FFFD FFFD},
    {"a\xf4\x90\x80\x80"
     "b",
     "a" FFFD FFFD FFFD FFFD "b"},
    {"\xf0\x9f\x98\x80\xf0\x9f\x98", "\xf0\x9f\x98\x80" FFFD},
    {"\xe0\x80\x80", FFFD FFFD FFFD},
    {"\xc3\xa9\xc3", "\xc3\xa9" FFFD},
    {"caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac"},
};

/* Every split into tokens, with a take after each: the same output. */
static void test_utf8_every_split(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof utf8_cases / sizeof utf8_cases[0]; c++) {
        const char *in = utf8_cases[c].in;
        size_t n = strlen(in);
        for (uint32_t mask = 0; mask < (1u << (n - 1)); mask++) {
            struct gen_text t;
            init(&t, NULL, NULL);
            struct buf out;
            buf_init(&out, 1 << 20);
            size_t start = 0;
            for (size_t i = 1; i <= n; i++) {
                if (i == n || (mask >> (i - 1) & 1)) {
                    assert_int_equal(gen_text_append(&t, in + start, i - start), 0);
                    gen_text_take(&t, false, &out);
                    start = i;
                }
            }
            gen_text_take(&t, true, &out);
            if (out.len != strlen(utf8_cases[c].out) ||
                memcmp(out.data, utf8_cases[c].out, out.len) != 0)
                fail_msg("case %zu, split mask %u: wrong output", c, mask);
            buf_free(&out);
            gen_text_free(&t);
        }
    }
}

static void test_utf8_holdback(void **state)
{
    (void)state;
    struct gen_text t;
    init(&t, NULL, NULL);
    assert_int_equal(step(&t, "\xc3", ""), 0);
    assert_int_equal(step(&t, "\xa9", "\xc3\xa9"), 0);
    assert_int_equal(step(&t, "\xe2\x82", ""), 0);
    assert_int_equal(step(&t, "x", FFFD "x"), 0); /* cannot be completed any more */
    assert_int_equal(step(&t, "\xf0\x9f", ""), 0);
    finish(&t, FFFD);

    /* A stop that begins inside a character: the character waits for it. */
    init(&t, "\xa9x", NULL);
    assert_int_equal(step(&t, "\xc3\xa9", ""), 0);
    assert_int_equal(step(&t, "x", FFFD), 1); /* the text is "\xc3", complete */
    finish(&t, "");
    init(&t, "\xa9x", NULL);
    assert_int_equal(step(&t, "\xc3\xa9", ""), 0);
    assert_int_equal(step(&t, "y", "\xc3\xa9y"), 0);
    finish(&t, "");
}

static void test_limits(void **state)
{
    (void)state;
    struct gen_text t;
    const char *five[5] = {"a", "b", "c", "d", "e"};
    size_t ones[5] = {1, 1, 1, 1, 1};
    assert_int_equal(gen_text_init(&t, five, ones, 5), -EINVAL);
    gen_text_free(&t);
    size_t zero[1] = {0};
    assert_int_equal(gen_text_init(&t, five, zero, 1), -EINVAL);
    gen_text_free(&t);
    char long_stop[GEN_MAX_STOP_LEN + 1];
    memset(long_stop, 'z', sizeof long_stop);
    const char *ls[1] = {long_stop};
    size_t ll[1] = {GEN_MAX_STOP_LEN + 1};
    assert_int_equal(gen_text_init(&t, ls, ll, 1), -EINVAL);
    gen_text_free(&t);

    /* A stop of the maximum length, found across many tokens. */
    ll[0] = GEN_MAX_STOP_LEN;
    assert_int_equal(gen_text_init(&t, ls, ll, 1), 0);
    assert_int_equal(step(&t, "ab", "ab"), 0);
    for (int i = 0; i < GEN_MAX_STOP_LEN - 1; i++)
        assert_int_equal(step(&t, "z", ""), 0);
    assert_int_equal(step(&t, "z", ""), 1);
    finish(&t, "");

    /* The pending ceiling. */
    init(&t, NULL, NULL);
    char *big = malloc(GEN_TEXT_MAX_PENDING);
    assert_non_null(big);
    memset(big, 'q', GEN_TEXT_MAX_PENDING);
    assert_int_equal(gen_text_append(&t, big, GEN_TEXT_MAX_PENDING), 0);
    assert_int_equal(gen_text_append(&t, "q", 1), -1);
    free(big);
    struct buf out;
    buf_init(&out, 32u << 20);
    gen_text_take(&t, false, &out);
    assert_int_equal(out.len, GEN_TEXT_MAX_PENDING);
    buf_free(&out);
    assert_int_equal(gen_text_append(&t, "q", 1), 0); /* room again */
    finish(&t, "q");

    /* Out of memory, and a full output buffer. */
    init(&t, NULL, NULL);
    mem_fail_after(0);
    int rc = gen_text_append(&t, "abc", 3);
    mem_fail_reset();
    assert_int_equal(rc, -1);
    assert_int_equal(gen_text_append(&t, "abc", 3), 0);
    buf_init(&out, 2);
    gen_text_take(&t, true, &out);
    assert_int_equal(out.err, -E2BIG);
    buf_free(&out);
    gen_text_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_stops),
        cmocka_unit_test(test_stop_across_tokens),
        cmocka_unit_test(test_earliest_occurrence),
        cmocka_unit_test(test_utf8_every_split),
        cmocka_unit_test(test_utf8_holdback),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
