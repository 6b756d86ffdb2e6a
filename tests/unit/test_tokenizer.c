/*
 * Unit tests for preprocess/tokenizer: the file format and its errors, the
 * encoding rule on hand-made cases, a differential check against a naive
 * implementation of the rule (written here straight from the spec: find the
 * lowest-ranked pair, replace its occurrences left to right, repeat) over
 * random merge tables and texts, round trips, allocation failures, and the
 * shipped model's tokenizer.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/mem.h"
#include "preprocess/tokenizer.h"

/* ---- helpers ---------------------------------------------------------- */

/* tokenizer.json text for merges[0..n) (caller frees b). */
static void make_json(struct buf *b, const int32_t (*merges)[2], uint32_t n)
{
    buf_init(b, 1u << 24);
    buf_printf(b,
               "{\"type\": \"byte-bpe\", \"vocab_size\": %u, \"eos_token\": \"<|endoftext|>\", "
               "\"eos_token_id\": %u, \"merges\": [",
               256 + n + 1, 256 + n);
    for (uint32_t k = 0; k < n; k++)
        buf_printf(b, "%s[%d, %d]", k ? ", " : "", merges[k][0], merges[k][1]);
    buf_puts(b, "]}");
    assert_int_equal(b->err, 0);
}

static struct tokenizer *make_tokenizer(const int32_t (*merges)[2], uint32_t n)
{
    struct buf b;
    make_json(&b, merges, n);
    struct tokenizer *t = NULL;
    struct error err;
    int rc = tokenizer_parse(b.data, b.len, &t, &err);
    if (rc != 0)
        fail_msg("parse failed: %s", err.msg);
    buf_free(&b);
    return t;
}

/* The rule, naively: O(pairs * merges) per step. Returns the token count. */
static size_t ref_encode(const int32_t (*merges)[2], uint32_t nm, const unsigned char *s,
                         size_t len, int32_t *out)
{
    size_t count = 0;
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t start = 0; start < len;) {
        size_t end = start + 1;
        while (end < len && s[end] != ' ' && s[end] != '\n')
            end++;
        size_t n = end - start;
        for (size_t i = 0; i < n; i++)
            ids[i] = s[start + i];
        for (;;) {
            uint32_t best = UINT32_MAX;
            for (size_t i = 0; i + 1 < n; i++)
                for (uint32_t k = 0; k < nm && k < best; k++)
                    if (merges[k][0] == ids[i] && merges[k][1] == ids[i + 1])
                        best = k;
            if (best == UINT32_MAX)
                break;
            size_t w = 0;
            for (size_t i = 0; i < n;) {
                if (i + 1 < n && ids[i] == merges[best][0] && ids[i + 1] == merges[best][1]) {
                    ids[w++] = (int32_t)(256 + best);
                    i += 2;
                } else {
                    ids[w++] = ids[i++];
                }
            }
            n = w;
        }
        memcpy(out + count, ids, n * sizeof *ids);
        count += n;
        start = end;
    }
    free(ids);
    return count;
}

/* decode(ids) == text. */
static void assert_decodes_to(const struct tokenizer *t, const int32_t *ids, size_t n,
                              const char *text, size_t len)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const char *tb = tokenizer_token(t, ids[i], &tl);
        assert_non_null(tb);
        assert_true(at + tl <= len);
        assert_memory_equal(tb, text + at, tl);
        at += tl;
    }
    assert_int_equal(at, len);
}

static uint64_t rng_state = 0x243F6A8885A308D3u;

static uint32_t rnd_below(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * UINT64_C(2685821657736338717)) >> 33) % n;
}

/* 256 "th", 257 " t", 258 " th", 259 "the", 260 " the", 261 "aa", 262 "aaa" (eos 263). */
static const int32_t small_merges[][2] = {{116, 104}, {32, 116}, {257, 104}, {256, 101},
                                          {258, 101}, {97, 97},  {261, 97}};
#define NSMALL (sizeof small_merges / sizeof small_merges[0])

static void expect_encoding(const struct tokenizer *t, const char *text, const int32_t *want,
                            size_t nwant)
{
    int32_t ids[64];
    int64_t n = tokenizer_encode(t, text, strlen(text), ids, 64);
    assert_int_equal(n, (int64_t)nwant);
    assert_memory_equal(ids, want, nwant * sizeof *ids);
    assert_decodes_to(t, ids, nwant, text, strlen(text));
}

#define EXPECT(t, text, ...)                                                                       \
    expect_encoding(t, text, (const int32_t[]){__VA_ARGS__},                                       \
                    sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

/* ---- tests ------------------------------------------------------------- */

static void test_small_rules(void **state)
{
    (void)state;
    struct tokenizer *t = make_tokenizer(small_merges, NSMALL);
    assert_int_equal(tokenizer_vocab_size(t), 264);
    assert_int_equal(tokenizer_eos(t), 263);

    /* " the": rank 0 (t,h) first, then (th,e); (" ",t) no longer exists. */
    EXPECT(t, "the the", 259, 32, 259);
    EXPECT(t, "the", 259);
    EXPECT(t, " th", 32, 256);
    /* Without an h after it, (" ", t) merges. */
    EXPECT(t, " tx", 257, 120);
    /* Left to right, no overlap: "aaaaa" -> aa aa a -> (aa,a) rank 6 -> aa aaa. */
    EXPECT(t, "aaaaa", 261, 262);
    EXPECT(t, "aaa", 262);
    /* A piece starts before every space and newline. */
    EXPECT(t, "\n\nab", 10, 10, 97, 98);
    EXPECT(t, "a a", 97, 32, 97);
    EXPECT(t, "  ", 32, 32);
    /* The eos text is bytes. */
    EXPECT(t, "<|endoftext|>", 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62);
    /* Any bytes, NUL included. */
    int32_t ids[4];
    assert_int_equal(tokenizer_encode(t, "\x00\xff", 2, ids, 4), 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 255);
    assert_int_equal(tokenizer_encode(t, "", 0, ids, 4), 0);

    /* Decoding. */
    size_t len;
    const char *b = tokenizer_token(t, 260, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(b, " the", 4);
    b = tokenizer_token(t, 65, &len);
    assert_int_equal(len, 1);
    assert_int_equal(b[0], 'A');
    assert_null(tokenizer_token(t, 263, &len));
    assert_int_equal(len, 0);
    assert_null(tokenizer_token(t, -1, &len));
    assert_null(tokenizer_token(t, 264, &len));
    tokenizer_free(t);
    tokenizer_free(NULL);
}

/* max bounds what is written; the total is still counted. */
static void test_truncated_output(void **state)
{
    (void)state;
    struct tokenizer *t = make_tokenizer(small_merges, NSMALL);
    int32_t ids[4] = {-7, -7, -7, -7};
    assert_int_equal(tokenizer_encode(t, "aa aa x", 7, ids, 2), 5);
    assert_int_equal(ids[0], 261);
    assert_int_equal(ids[1], 32);
    assert_int_equal(ids[2], -7);
    assert_int_equal(tokenizer_encode(t, "aa aa x", 7, NULL, 0), 5);
    tokenizer_free(t);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"", "tokenizer.json: "},
        {"[]", "not a JSON object"},
        {"{\"vocab_size\": 257, \"eos_token_id\": 256, \"merges\": []}", "\"type\""},
        {"{\"type\": \"bpe\", \"vocab_size\": 257, \"eos_token_id\": 256, \"merges\": []}",
         "\"type\" must be \"byte-bpe\""},
        {"{\"type\": \"byte-bpe\", \"eos_token_id\": 256, \"merges\": []}",
         "\"vocab_size\" is missing"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 1.5, \"eos_token_id\": 256, \"merges\": []}",
         "\"vocab_size\" must be an integer"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 256, \"eos_token_id\": 255, \"merges\": []}",
         "\"vocab_size\" must be from 257 to 65536"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 65537, \"eos_token_id\": 65536, \"merges\": []}",
         "\"vocab_size\" must be from 257 to 65536"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 257, \"merges\": []}",
         "\"eos_token_id\" is missing"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 257, \"eos_token_id\": 0, \"merges\": []}",
         "\"eos_token_id\" must be the last id"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 257, \"eos_token_id\": 256, \"eos_token\": 1, "
         "\"merges\": []}",
         "\"eos_token\" must be a string"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 257, \"eos_token_id\": 256}",
         "\"merges\" must be an array"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, \"merges\": []}",
         "\"merges\" has 0 pairs; vocab_size 258 needs 1"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, \"merges\": [[1]]}",
         "\"merges\"[0] must be a pair [a, b]"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, \"merges\": [7]}",
         "\"merges\"[0] must be a pair [a, b]"},
        /* A merge may not refer to itself or to a later merge. */
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, "
         "\"merges\": [[1, 256]]}",
         "\"merges\"[0] must be a pair of ids below 256"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 259, \"eos_token_id\": 258, "
         "\"merges\": [[1, 2], [256, 258]]}",
         "\"merges\"[1] must be a pair of ids below 257"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, "
         "\"merges\": [[-1, 2]]}",
         "\"merges\"[0] must be a pair of ids below 256"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 258, \"eos_token_id\": 257, "
         "\"merges\": [[1, \"2\"]]}",
         "\"merges\"[0] must be a pair of ids below 256"},
        {"{\"type\": \"byte-bpe\", \"vocab_size\": 260, \"eos_token_id\": 259, "
         "\"merges\": [[1, 2], [3, 4], [1, 2]]}",
         "\"merges\"[2] repeats \"merges\"[0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tokenizer *t = (struct tokenizer *)&t;
        struct error err;
        error_clear(&err);
        int rc = tokenizer_parse(cases[i].json, strlen(cases[i].json), &t, &err);
        if (rc != -1 || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: rc %d, message \"%s\", expected \"%s\"", i, rc, err.msg,
                     cases[i].msg);
        assert_int_equal(err.status, 400);
        assert_null(t);
    }
}

/* Doubling merges would make tokens of 2^k bytes: refused past the limit. */
static void test_token_length_limit(void **state)
{
    (void)state;
    int32_t merges[13][2];
    merges[0][0] = merges[0][1] = 'a';
    for (int k = 1; k < 13; k++)
        merges[k][0] = merges[k][1] = 256 + k - 1; /* token 256+k: 2^(k+1) bytes */
    struct buf b;
    make_json(&b, (const int32_t(*)[2])merges, 12); /* up to 4096 bytes: fine */
    struct tokenizer *t;
    struct error err;
    assert_int_equal(tokenizer_parse(b.data, b.len, &t, &err), 0);
    size_t len;
    assert_non_null(tokenizer_token(t, 256 + 11, &len));
    assert_int_equal(len, 4096);
    tokenizer_free(t);
    buf_free(&b);
    make_json(&b, (const int32_t(*)[2])merges, 13);
    assert_int_equal(tokenizer_parse(b.data, b.len, &t, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "\"merges\"[12] makes a token longer than 4096 bytes"));
    buf_free(&b);

    /* And the file size. */
    char *big = malloc(TOKENIZER_MAX_FILE + 1);
    assert_non_null(big);
    memset(big, ' ', TOKENIZER_MAX_FILE + 1);
    assert_int_equal(tokenizer_parse(big, TOKENIZER_MAX_FILE + 1, &t, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "larger than 8388608 bytes"));
    free(big);
}

/* Random merge tables over a small alphabet (so merges apply often) and
 * random texts: the fast encoder equals the naive rule, and decodes back. */
static void test_differential(void **state)
{
    (void)state;
    static const char alphabet[] = "ab \nc";
    for (int round = 0; round < 300; round++) {
        uint32_t nm = 1 + rnd_below(60);
        int32_t merges[60][2];
        for (uint32_t k = 0; k < nm; k++) {
            bool dup;
            do {
                for (int s = 0; s < 2; s++) {
                    uint32_t pick = rnd_below(5 + k);
                    merges[k][s] =
                        pick < 5 ? (unsigned char)alphabet[pick] : (int32_t)(256 + pick - 5);
                }
                dup = false;
                for (uint32_t j = 0; j < k; j++)
                    dup |= merges[j][0] == merges[k][0] && merges[j][1] == merges[k][1];
            } while (dup);
        }
        struct tokenizer *t = make_tokenizer((const int32_t(*)[2])merges, nm);
        for (int text_round = 0; text_round < 20; text_round++) {
            unsigned char text[300];
            size_t len = rnd_below(sizeof text);
            for (size_t i = 0; i < len; i++)
                text[i] = rnd_below(10) ? (unsigned char)alphabet[rnd_below(5)]
                                        : (unsigned char)rnd_below(256);
            int32_t got[300], want[300];
            int64_t n = tokenizer_encode(t, (const char *)text, len, got, 300);
            size_t wn = ref_encode((const int32_t(*)[2])merges, nm, text, len, want);
            assert_int_equal(n, (int64_t)wn);
            assert_memory_equal(got, want, wn * sizeof *got);
            assert_decodes_to(t, got, wn, (const char *)text, len);
        }
        tokenizer_free(t);
    }
}

/* Pieces longer than the stack buffer (256 bytes) take the heap path. */
static void test_long_pieces(void **state)
{
    (void)state;
    struct tokenizer *t = make_tokenizer(small_merges, NSMALL);
    size_t len = 5000;
    char *text = malloc(len);
    int32_t *got = malloc(len * sizeof *got), *want = malloc(len * sizeof *want);
    assert_true(text && got && want);
    for (size_t i = 0; i < len; i++)
        text[i] = "atheaaa"[rnd_below(7)];
    text[1000] = ' ';
    int64_t n = tokenizer_encode(t, text, len, got, len);
    size_t wn = ref_encode(small_merges, NSMALL, (const unsigned char *)text, len, want);
    assert_int_equal(n, (int64_t)wn);
    assert_memory_equal(got, want, wn * sizeof *got);

    /* A 1 MiB piece of one byte: 2^20 a -> (aa)^(2^19) -> then (aa,a)? no a
     * left between them, so 2^19 "aa" tokens. */
    size_t big = 1u << 20;
    char *a = malloc(big);
    int32_t *ids = malloc(big * sizeof *ids);
    assert_true(a && ids);
    memset(a, 'a', big);
    assert_int_equal(tokenizer_encode(t, a, big, ids, big), (int64_t)(big / 2));
    for (size_t i = 0; i < big / 2; i++)
        assert_int_equal(ids[i], 261);
    /* Odd length: the last a joins the last aa. */
    assert_int_equal(tokenizer_encode(t, a, big - 1, ids, big), (int64_t)(big / 2 - 1));
    assert_int_equal(ids[big / 2 - 2], 262);
    free(a);
    free(ids);
    free(text);
    free(got);
    free(want);
    tokenizer_free(t);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    struct buf b;
    make_json(&b, small_merges, NSMALL);
    for (long n = 0;; n++) {
        struct tokenizer *t = (struct tokenizer *)&b;
        struct error err;
        mem_fail_after(n);
        int rc = tokenizer_parse(b.data, b.len, &t, &err);
        mem_fail_reset();
        if (rc == 0) {
            assert_true(n >= 5); /* the object and its four tables at least */
            tokenizer_free(t);
            break;
        }
        assert_int_equal(rc, -1);
        assert_null(t);
        assert_int_equal(err.status, 500);
    }
    buf_free(&b);

    struct tokenizer *t = make_tokenizer(small_merges, NSMALL);
    char text[600];
    memset(text, 'a', sizeof text);
    int32_t ids[600];
    mem_fail_after(0);
    int64_t long_piece = tokenizer_encode(t, text, sizeof text, ids, 600);
    int64_t short_piece = tokenizer_encode(t, text, 200, ids, 600);
    mem_fail_reset();
    assert_int_equal(long_piece, -1);   /* needs a heap buffer */
    assert_int_equal(short_piece, 100); /* stack only */
    tokenizer_free(t);
}

static void source_path(char *out, size_t size, const char *rel)
{
    const char *root = getenv("INFERD_SOURCE_DIR");
    snprintf(out, size, "%s/%s", root ? root : ".", rel);
}

static void test_load(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_tokenizer_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct buf b;
    make_json(&b, small_merges, NSMALL);
    assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
    close(fd);
    struct tokenizer *t;
    struct error err;
    assert_int_equal(tokenizer_load(path, &t, &err), 0);
    EXPECT(t, "the aaa", 259, 32, 262);
    tokenizer_free(t);

    /* Errors name the file. */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{}", 2), 2);
    close(fd);
    assert_int_equal(tokenizer_load(path, &t, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "\"type\""));
    unlink(path);
    assert_int_equal(tokenizer_load(path, &t, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "cannot read"));
    assert_null(t);
    buf_free(&b);
}

static void test_shipped_model(void **state)
{
    (void)state;
    char path[4096];
    source_path(path, sizeof path, "models/kjv/1/tokenizer.json");
    struct tokenizer *t;
    struct error err;
    if (tokenizer_load(path, &t, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(tokenizer_vocab_size(t), 512);
    assert_int_equal(tokenizer_eos(t), 511);

    static const char verse[] =
        "In the beginning God created the heaven and the earth.\n"
        "And the earth was without form, and void; and darkness was upon the face of the deep. "
        "And the Spirit of God moved upon the face of the waters.";
    int32_t ids[512];
    int64_t n = tokenizer_encode(t, verse, strlen(verse), ids, 512);
    assert_true(n > 0 && n < (int64_t)strlen(verse) / 2); /* BPE compresses English text */
    assert_decodes_to(t, ids, (size_t)n, verse, strlen(verse));

    /* A 1000-byte prompt: well under a millisecond (reported, and bounded
     * loosely so that sanitizer builds pass). */
    char prompt[1000];
    for (size_t i = 0; i < sizeof prompt; i++)
        prompt[i] = verse[i % (sizeof verse - 1)];
    struct timespec a, b;
    enum { REPS = 2000 };
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < REPS; r++)
        assert_true(tokenizer_encode(t, prompt, sizeof prompt, ids, 512) > 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us =
        ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / REPS;
    print_message("tokenizer_encode: 1000-byte prompt in %.1f us\n", us);
    assert_true(us < 1000);
    tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_rules),         cmocka_unit_test(test_truncated_output),
        cmocka_unit_test(test_parse_errors),        cmocka_unit_test(test_token_length_limit),
        cmocka_unit_test(test_differential),        cmocka_unit_test(test_long_pieces),
        cmocka_unit_test(test_allocation_failures), cmocka_unit_test(test_load),
        cmocka_unit_test(test_shipped_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
