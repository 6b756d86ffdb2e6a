/* Unit tests of the gRPC front end's helpers (api/grpc/transport.c): grpc-timeout
 * parsing, grpc-message percent-encoding and the status mapping. The RPCs
 * themselves are tested end to end by tests/integration/test_grpc.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/grpc/grpc.h"

static void expect_timeout(const char *text, uint64_t want_ns)
{
    uint64_t ns = 0;
    if (grpc_timeout_parse(text, strlen(text), &ns) != 0 || ns != want_ns)
        fail_msg("'%s': got %llu, want %llu", text, (unsigned long long)ns,
                 (unsigned long long)want_ns);
}

static void test_timeout_units(void **state)
{
    (void)state;
    expect_timeout("1H", 3600ull * 1000000000ull);
    expect_timeout("2M", 120ull * 1000000000ull);
    expect_timeout("3S", 3000000000ull);
    expect_timeout("250m", 250000000ull);
    expect_timeout("7u", 7000ull);
    expect_timeout("9n", 9ull);
    expect_timeout("0m", 0);
    expect_timeout("99999999S", 99999999ull * 1000000000ull);
    expect_timeout("99999999H", UINT64_MAX); /* saturates */
}

static void test_timeout_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {"", "S", "1", "1s", "1x", "-1S", "1.5S", "123456789S",
                                      " 1S", "1S ", "1 S"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ns;
        if (grpc_timeout_parse(bad[i], strlen(bad[i]), &ns) != -1)
            fail_msg("'%s' accepted", bad[i]);
    }
}

static void test_message_encoding(void **state)
{
    (void)state;
    char out[64];
    grpc_message_encode("unknown model 'x'", out, sizeof out);
    assert_string_equal(out, "unknown model 'x'");
    grpc_message_encode("100% sure\n\xc3\xa9", out, sizeof out);
    assert_string_equal(out, "100%25 sure%0A%C3%A9");
    /* Truncation never splits an escape. */
    grpc_message_encode("ab%", out, 5);
    assert_string_equal(out, "ab");
    grpc_message_encode("abcdef", out, 4);
    assert_string_equal(out, "abc");
}

static void test_status_mapping(void **state)
{
    (void)state;
    assert_int_equal(grpc_status_from_http(400), 3);  /* INVALID_ARGUMENT */
    assert_int_equal(grpc_status_from_http(401), 16); /* UNAUTHENTICATED */
    assert_int_equal(grpc_status_from_http(403), 7);  /* PERMISSION_DENIED */
    assert_int_equal(grpc_status_from_http(404), 5);  /* NOT_FOUND */
    assert_int_equal(grpc_status_from_http(413), 8);  /* RESOURCE_EXHAUSTED */
    assert_int_equal(grpc_status_from_http(429), 8);
    assert_int_equal(grpc_status_from_http(499), 1);  /* CANCELLED */
    assert_int_equal(grpc_status_from_http(500), 13); /* INTERNAL */
    assert_int_equal(grpc_status_from_http(501), 12); /* UNIMPLEMENTED */
    assert_int_equal(grpc_status_from_http(503), 14); /* UNAVAILABLE */
    assert_int_equal(grpc_status_from_http(504), 4);  /* DEADLINE_EXCEEDED */
    assert_int_equal(grpc_status_from_http(405), 3);
    assert_int_equal(grpc_status_from_http(502), 14); /* a gateway's upstream failed */
    assert_int_equal(grpc_status_from_http(507), 13); /* any other 5xx: INTERNAL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout_units),
        cmocka_unit_test(test_timeout_malformed),
        cmocka_unit_test(test_message_encoding),
        cmocka_unit_test(test_status_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
