/*
 * Unit tests of the base64 codec (base/base64.h): the RFC 4648 vectors
 * both ways, every byte value round trip, the URL-safe unpadded form,
 * padded and unpadded single texts, padded chunks one after the other,
 * invalid input (bad characters, '=' inside, quanta cut short,
 * non-canonical ends) and buf ceilings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "base/base64.h"

static const struct {
    const char *plain, *b64;
} vectors[] = {{"", ""},
               {"f", "Zg=="},
               {"fo", "Zm8="},
               {"foo", "Zm9v"},
               {"foob", "Zm9vYg=="},
               {"fooba", "Zm9vYmE="},
               {"foobar", "Zm9vYmFy"},
               {"/inferd/instances/", "L2luZmVyZC9pbnN0YW5jZXMv"}};

static void test_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        const char *plain = vectors[i].plain, *b64 = vectors[i].b64;
        size_t pn = strlen(plain), bn = strlen(b64);
        struct buf b;
        buf_init(&b, 1024);
        assert_int_equal(base64_append(&b, plain, pn), 0);
        assert_int_equal(b.len, bn);
        assert_int_equal(BASE64_LEN(pn), bn);
        assert_memory_equal(b.data ? b.data : "", b64, bn);
        unsigned char out[64];
        long n = base64_decode(b64, bn, out);
        assert_int_equal(n, (long)pn);
        assert_memory_equal(out, plain, pn);
        /* The same text with its padding dropped decodes the same. */
        size_t unpadded = bn;
        while (unpadded > 0 && b64[unpadded - 1] == '=')
            unpadded--;
        assert_int_equal(base64_decode(b64, unpadded, out), (long)pn);
        assert_memory_equal(out, plain, pn);
        buf_reset(&b);
        assert_int_equal(base64_decode_chunks(b64, bn, &b), 0);
        assert_int_equal(b.len, pn);
        assert_memory_equal(b.data ? b.data : "", plain, pn);
        buf_free(&b);
    }
}

static void test_all_bytes_and_url_form(void **state)
{
    (void)state;
    unsigned char all[256], back[BASE64_DECODED_MAX(BASE64_LEN(256))];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(base64_append(&b, all, sizeof all), 0);
    assert_int_equal(base64_decode(b.data, b.len, back), 256);
    assert_memory_equal(all, back, 256);
    buf_free(&b);
    /* URL-safe: "-_" for "+/", no padding. */
    char url[BASE64URL_LEN(3) + 1];
    size_t n = base64_encode(url, "\xfb\xff\xbf", 3, BASE64_URL);
    assert_int_equal(n, 4);
    assert_memory_equal(url, "-_-_", 4);
    char std[BASE64_LEN(3)];
    assert_int_equal(base64_encode(std, "\xfb\xff\xbf", 3, BASE64_STD), 4);
    assert_memory_equal(std, "+/+/", 4);
    assert_int_equal(base64_encode(url, "fo", 2, BASE64_URL), BASE64URL_LEN(2));
    assert_memory_equal(url, "Zm8", 3);
    char key[BASE64URL_LEN(32)];
    assert_int_equal(base64_encode(key, all, 32, BASE64_URL), 43);
}

static void test_decode_invalid(void **state)
{
    (void)state;
    unsigned char out[16];
    assert_int_equal(base64_decode("Zm9v!", 5, out), -1); /* bad character */
    assert_int_equal(base64_decode("Z", 1, out), -1);     /* cut short */
    assert_int_equal(base64_decode("Zm9vZ", 5, out), -1);
    assert_int_equal(base64_decode("Zh==", 4, out), -1); /* non-zero leftover bits */
    assert_int_equal(base64_decode("Zm9=", 4, out), -1);
    assert_int_equal(base64_decode("Zm=v", 4, out), -1); /* '=' inside */
    assert_int_equal(base64_decode("Z===", 4, out), -1);
    assert_int_equal(base64_decode("Zg=", 3, out), -1);  /* padding cut short */
    assert_int_equal(base64_decode("Zm-_", 4, out), -1); /* URL alphabet */
    assert_int_equal(base64_decode("Zm8", 3, out), 2);   /* unpadded is accepted */
}

static void test_chunks(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 64);
    /* "abcd" as "YQ==" + "YmM=" + "ZA==": three chunks, each padded. */
    assert_int_equal(base64_decode_chunks("YQ==YmM=ZA==", 12, &out), 0);
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.data, "abcd", 4);
    buf_reset(&out);
    assert_int_equal(base64_decode_chunks("YWJjZA==", 8, &out), 0);
    assert_memory_equal(out.data, "abcd", 4);
    const char *bad[] = {"YWJ", "YW=j", "Y===", "YWJj*A==", "YWJjZA=", "YW Jj", "YWJjZA"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf_reset(&out);
        if (base64_decode_chunks(bad[i], strlen(bad[i]), &out) != -1)
            fail_msg("'%s' accepted", bad[i]);
    }
    buf_reset(&out);
    assert_int_equal(base64_append(&out, "abcd", 4), 0);
    assert_int_equal(out.len, 8);
    assert_memory_equal(out.data, "YWJjZA==", 8);
    /* A buf too small: the buf error, not -1. */
    struct buf tiny;
    buf_init(&tiny, 2);
    assert_int_not_equal(base64_decode_chunks("YWJjZA==", 8, &tiny), 0);
    assert_int_not_equal(base64_decode_chunks("YWJjZA==", 8, &tiny), -1);
    assert_int_not_equal(base64_append(&tiny, "abcd", 4), 0);
    assert_int_equal(base64_append(&tiny, "", 0), 0);
    buf_free(&tiny);
    buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_all_bytes_and_url_form),
        cmocka_unit_test(test_decode_invalid),
        cmocka_unit_test(test_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
