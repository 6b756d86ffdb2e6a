/*
 * api/limit_headers: OpenAI's duration format of the reset headers (Go's,
 * to the millisecond), the x-ratelimit-* headers of a call's rate limit
 * and token budget (absent when unset), and the retry advice of a 429
 * (Retry-After, retry-after-ms, x-should-retry by the refusal) and of a
 * 503.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "api/limit_headers.h"

static void test_duration_format(void **state)
{
    (void)state;
    static const struct {
        uint64_t ms;
        const char *want;
    } cases[] = {
        {0, "0s"},
        {1, "1ms"},
        {250, "250ms"},
        {999, "999ms"},
        {1000, "1s"},
        {1500, "1.5s"},
        {1250, "1.25s"},
        {2001, "2.001s"},
        {2100, "2.1s"},
        {59999, "59.999s"},
        {60000, "1m0s"},
        {90250, "1m30.25s"},
        {360000, "6m0s"},
        {3600000, "1h0m0s"},
        {3661000, "1h1m1s"},
        {86399000, "23h59m59s"},
        {86400000, "24h0m0s"},
        {UINT64_MAX, "5124095576030h25m51.615s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[LIMIT_DURATION_MAX];
        size_t n = limit_duration(cases[i].ms, out);
        assert_string_equal(out, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
    }
}

static const char *headers(const struct http_txn *txn)
{
    return txn->extra_headers;
}

static void test_headers_of_rate_limit_and_tokens(void **state)
{
    (void)state;
    static struct http_txn txn;
    struct serve_ratelimit rl = {.limit = 10, .remaining = 7, .reset_s = 3, .set = true};
    struct serve_tokens tk = {.limit = 50000, .remaining = 49700, .reset_ms = 360, .set = true};
    limit_headers_add(&txn, &rl, &tk);
    assert_string_equal(headers(&txn), "x-ratelimit-limit-requests: 10\r\n"
                                       "x-ratelimit-remaining-requests: 7\r\n"
                                       "x-ratelimit-reset-requests: 3s\r\n"
                                       "x-ratelimit-limit-tokens: 50000\r\n"
                                       "x-ratelimit-remaining-tokens: 49700\r\n"
                                       "x-ratelimit-reset-tokens: 360ms\r\n");

    /* Unset (no rule matched) or absent: nothing. */
    memset(&txn, 0, sizeof txn);
    rl.set = tk.set = false;
    limit_headers_add(&txn, &rl, &tk);
    limit_headers_add(&txn, NULL, NULL);
    assert_string_equal(headers(&txn), "");
}

static void test_retry_advice(void **state)
{
    (void)state;
    static struct http_txn txn;
    /* A request-rate 429: no budget refusal. */
    limit_headers_retry(&txn, 429, 2, NULL);
    assert_string_equal(headers(&txn), "Retry-After: 2\r\nretry-after-ms: 2000\r\n");

    /* A per-minute budget: the exact wait in ms, retrying is right. */
    memset(&txn, 0, sizeof txn);
    struct serve_tokens tk = {.retry_ms = 2100, .refusal = SERVE_QUOTA_RATE, .set = true};
    limit_headers_retry(&txn, 429, 3, &tk);
    assert_string_equal(headers(&txn), "Retry-After: 3\r\nretry-after-ms: 2100\r\n");

    /* The day's budget is spent, or the call never fits: do not retry. */
    memset(&txn, 0, sizeof txn);
    tk = (struct serve_tokens){.retry_ms = 3600000, .refusal = SERVE_QUOTA_EXHAUSTED, .set = true};
    limit_headers_retry(&txn, 429, 3600, &tk);
    assert_string_equal(
        headers(&txn), "Retry-After: 3600\r\nretry-after-ms: 3600000\r\nx-should-retry: false\r\n");
    memset(&txn, 0, sizeof txn);
    tk = (struct serve_tokens){.refusal = SERVE_QUOTA_TOO_LARGE, .set = true};
    limit_headers_retry(&txn, 429, 0, &tk);
    assert_string_equal(headers(&txn),
                        "Retry-After: 1\r\nretry-after-ms: 1000\r\nx-should-retry: false\r\n");

    /* 503: Retry-After only; other statuses: nothing. */
    memset(&txn, 0, sizeof txn);
    limit_headers_retry(&txn, 503, 0, &tk);
    assert_string_equal(headers(&txn), "Retry-After: 1\r\n");
    memset(&txn, 0, sizeof txn);
    limit_headers_retry(&txn, 400, 5, &tk);
    assert_string_equal(headers(&txn), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_format),
        cmocka_unit_test(test_headers_of_rate_limit_and_tokens),
        cmocka_unit_test(test_retry_advice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
