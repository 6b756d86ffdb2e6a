/*
 * SHA-256 against the FIPS 180-2/180-4 example vectors, the padding
 * boundaries, every split of a streamed message, and sha256_file against
 * sha256sum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/sha256.h"

static void hex_of(const void *data, size_t len, char hex[SHA256_HEX_SIZE])
{
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256(data, len, d);
    sha256_hex(d, hex);
}

static void assert_digest(const void *data, size_t len, const char *want)
{
    char hex[SHA256_HEX_SIZE];
    hex_of(data, len, hex);
    assert_string_equal(hex, want);
}

/* FIPS 180-2 appendix B and the NIST CSRC example values. */
static void test_fips_vectors(void **state)
{
    (void)state;
    assert_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_digest(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_int_equal(strlen(m448) * 8, 448);
    assert_digest(m448, strlen(m448),
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    assert_int_equal(strlen(m896) * 8, 896);
    assert_digest(m896, strlen(m896),
                  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state)
{
    (void)state;
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    assert_digest(a, 1000000, want);
    free(a);

    /* The same message streamed in odd pieces (1000 x 1000, then 1 at a time
     * across the first block boundaries). */
    struct sha256 s;
    uint8_t d[SHA256_DIGEST_SIZE];
    char hex[SHA256_HEX_SIZE];
    char thousand[1000];
    memset(thousand, 'a', sizeof thousand);
    sha256_init(&s);
    for (int i = 0; i < 130; i++)
        sha256_update(&s, "a", 1);
    sha256_update(&s, thousand, 870);
    for (int i = 1; i < 1000; i++)
        sha256_update(&s, thousand, sizeof thousand);
    sha256_final(&s, d);
    sha256_hex(d, hex);
    assert_string_equal(hex, want);
}

/* Lengths around the padding boundary: 55 bytes fit the length in the same
 * block, 56..63 need a second one, 64 is a full block. Expected values from
 * `printf 'a%.0s' $(seq N) | sha256sum`. */
static void test_padding_boundaries(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        const char *hex;
    } cases[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
    };
    char a[65];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_digest(a, cases[i].n, cases[i].hex);
}

/* Bytes (i*131+7) mod 256; digest from Python's hashlib.sha256. */
#define SPLIT_LEN 200
static const char split_want[] = "78bbb470b40e45fffa0526d26567d7d3887d082518e712cc05d0a8f4903e231b";

static void test_split_updates(void **state)
{
    (void)state;
    uint8_t msg[SPLIT_LEN], one[SHA256_DIGEST_SIZE], d[SHA256_DIGEST_SIZE];
    char hex[SHA256_HEX_SIZE];
    for (int i = 0; i < SPLIT_LEN; i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    sha256(msg, SPLIT_LEN, one);
    sha256_hex(one, hex);
    assert_string_equal(hex, split_want);

    for (size_t k = 0; k <= SPLIT_LEN; k++) {
        struct sha256 s;
        sha256_init(&s);
        sha256_update(&s, msg, k);
        sha256_update(&s, msg + k, SPLIT_LEN - k);
        sha256_final(&s, d);
        if (memcmp(d, one, sizeof d) != 0)
            fail_msg("split at %zu gives a different digest", k);
    }
    /* Three pieces: every (k, j) with an empty update in between. */
    for (size_t k = 0; k <= SPLIT_LEN; k += 7) {
        for (size_t j = k; j <= SPLIT_LEN; j += 13) {
            struct sha256 s;
            sha256_init(&s);
            sha256_update(&s, msg, k);
            sha256_update(&s, NULL, 0);
            sha256_update(&s, msg + k, j - k);
            sha256_update(&s, msg + j, SPLIT_LEN - j);
            sha256_final(&s, d);
            if (memcmp(d, one, sizeof d) != 0)
                fail_msg("split at %zu/%zu gives a different digest", k, j);
        }
    }
    /* Byte by byte. */
    struct sha256 s;
    sha256_init(&s);
    for (size_t i = 0; i < SPLIT_LEN; i++)
        sha256_update(&s, msg + i, 1);
    sha256_final(&s, d);
    assert_memory_equal(d, one, sizeof d);
}

static void source_path(char *out, size_t size, const char *rel)
{
    const char *root = getenv("INFERD_SOURCE_DIR");
    snprintf(out, size, "%s/%s", root ? root : ".", rel);
}

/* A temp file of 1,000,000 'a': 16 read chunks, the last one partial. */
static void test_file_million_a(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_sha256_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char block[1000];
    memset(block, 'a', sizeof block);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(write(fd, block, sizeof block), (ssize_t)sizeof block);
    close(fd);

    uint8_t d[SHA256_DIGEST_SIZE];
    char hex[SHA256_HEX_SIZE];
    assert_int_equal(sha256_file(path, d, hex), 0);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    char again[SHA256_HEX_SIZE];
    sha256_hex(d, again);
    assert_string_equal(again, hex);
    uint8_t d2[SHA256_DIGEST_SIZE];
    assert_int_equal(sha256_file(path, d2, NULL), 0); /* hex is optional */
    assert_memory_equal(d, d2, sizeof d);
    unlink(path);
}

/* The expected value is the output of
 *     sha256sum models/digits/1/model.onnx
 * on the committed file (19,835 bytes, generated deterministically by
 * models/build/make_digits.py). If that model is ever regenerated with
 * different weights, update this constant with sha256sum's new output. */
static const char digits_sha256[] =
    "aba6b0f9f6ab1249ba0ce287b4d08978545372e7c8034a08efbba2329216a313";

static void test_file_digits_model(void **state)
{
    (void)state;
    char path[PATH_MAX];
    uint8_t d[SHA256_DIGEST_SIZE];
    char hex[SHA256_HEX_SIZE];
    source_path(path, sizeof path, "models/digits/1/model.onnx");
    assert_int_equal(sha256_file(path, d, hex), 0);
    assert_string_equal(hex, digits_sha256);

    /* A copy in a temp file hashes the same. */
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    char tmp[] = "/tmp/inferd_sha256_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(write(fd, buf, n), (ssize_t)n);
    fclose(in);
    close(fd);
    char hex2[SHA256_HEX_SIZE];
    assert_int_equal(sha256_file(tmp, d, hex2), 0);
    assert_string_equal(hex2, digits_sha256);
    unlink(tmp);
}

static void test_file_errors(void **state)
{
    (void)state;
    uint8_t d[SHA256_DIGEST_SIZE], untouched[SHA256_DIGEST_SIZE];
    char hex[SHA256_HEX_SIZE] = "unchanged";
    memset(d, 0x5a, sizeof d);
    memcpy(untouched, d, sizeof d);

    assert_int_equal(sha256_file("/nonexistent/inferd/model.onnx", d, hex), -ENOENT);
    assert_int_equal(sha256_file("/tmp", d, hex), -EISDIR);
    assert_memory_equal(d, untouched, sizeof d);
    assert_string_equal(hex, "unchanged");

    char path[PATH_MAX];
    source_path(path, sizeof path, "models/digits/1/model.onnx");
    mem_fail_after(0);
    int rc = sha256_file(path, d, hex);
    mem_fail_reset();
    assert_int_equal(rc, -ENOMEM);
    assert_memory_equal(d, untouched, sizeof d);

    /* An empty file is the empty message. */
    char tmp[] = "/tmp/inferd_sha256_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sha256_file(tmp, d, hex), 0);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    unlink(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),       cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_padding_boundaries), cmocka_unit_test(test_split_updates),
        cmocka_unit_test(test_file_million_a),     cmocka_unit_test(test_file_digits_model),
        cmocka_unit_test(test_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
