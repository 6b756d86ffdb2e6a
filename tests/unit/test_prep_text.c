/*
 * Unit tests for preprocess/text.c, the "text" modality: parsing of
 * preprocess.json's "text" object (defaults, every key's errors naming the
 * key), the tensors of one run (ids, mask, INT64/INT32, truncation to
 * max_length, ASCII lowercasing), the errors of run() (empty 400, invalid
 * UTF-8 400 with its offset, over max_bytes 413, output memory over its
 * limit 500), and allocation failures at every step.
 *
 * The tokenizer is a small tokenizer.json written into a temporary model
 * directory: merges "h"+"i" -> 256, " "+256 -> 257 (" hi"), "a"+"b" -> 258.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/mem.h"
#include "preprocess/modality.h"

static const char tokenizer_json[] =
    "{\"type\": \"byte-bpe\", \"vocab_size\": 260, \"eos_token_id\": 259, "
    "\"merges\": [[104, 105], [32, 256], [97, 98]]}";

static char model_dir[] = "/tmp/inferd_prep_text_XXXXXX";
static char vocab_path[sizeof model_dir + 32];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(model_dir))
        return -1;
    snprintf(vocab_path, sizeof vocab_path, "%s/tokenizer.json", model_dir);
    FILE *f = fopen(vocab_path, "w");
    if (!f)
        return -1;
    fputs(tokenizer_json, f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(vocab_path);
    rmdir(model_dir);
    return 0;
}

/* Parses the JSON object text as the "text" configuration, its
 * allocations failing after fail_after of them (-1: none fail): 0 with
 * *cfg, or -1 with err. */
static int parse_failing(const char *json, long fail_after, void **cfg, struct error *err)
{
    struct arena arena;
    arena_init(&arena, 4096, 1 << 20);
    struct json_value *v;
    const char *msg;
    size_t off;
    assert_int_equal(json_parse(&arena, json, strlen(json), NULL, &v, &msg, &off), 0);
    mem_fail_after(fail_after);
    int rc = prep_text.parse(v, model_dir, cfg, err);
    mem_fail_reset();
    arena_free(&arena);
    return rc;
}

static int parse(const char *json, void **cfg, struct error *err)
{
    return parse_failing(json, -1, cfg, err);
}

static void *parse_ok(const char *json)
{
    void *cfg = NULL;
    struct error err;
    if (parse(json, &cfg, &err) != 0)
        fail_msg("parse of %s failed: %s", json, err.msg);
    return cfg;
}

static void expect_parse_error(const char *json, const char *needle)
{
    void *cfg = NULL;
    struct error err;
    assert_int_equal(parse(json, &cfg, &err), -1);
    assert_int_equal(err.status, 400);
    if (!strstr(err.msg, needle))
        fail_msg("error for %s: '%s' does not name '%s'", json, err.msg, needle);
    assert_null(cfg);
}

/* Runs cfg over text; returns the status (0 or the error's). */
static int run(void *cfg, const char *text, size_t len, struct prep_mem *mem, struct tensor *out,
               struct error *err)
{
    struct prep_timings tm = {.n = 0};
    int rc = prep_text.run(cfg, (const uint8_t *)text, len, mem, out, &tm, err);
    if (rc == 0) {
        assert_int_equal(tm.n, 1);
        assert_string_equal(tm.t[0].stage, "tokenize");
    }
    return rc == 0 ? 0 : err->status;
}

/* Runs cfg over text, which must fail with status and a message naming
 * fragment. */
static void expect_run_error(void *cfg, const char *text, size_t len, struct prep_mem *mem,
                             int status, const char *fragment)
{
    struct tensor out[PREP_MAX_OUTPUTS];
    struct error err;
    assert_int_equal(run(cfg, text, len, mem, out, &err), status);
    if (!strstr(err.msg, fragment))
        fail_msg("error for '%.*s': '%s' does not name '%s'", (int)len, text, err.msg, fragment);
}

/* ids of out[0] as int64 (INT64 or INT32 data) */
static void expect_ids(const struct tensor *t, const int64_t *want, size_t n)
{
    assert_int_equal(t->ndim, 1);
    assert_int_equal(t->shape[0], (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        int64_t v =
            t->dtype == DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
        if (v != want[i])
            fail_msg("id %zu: %lld, want %lld", i, (long long)v, (long long)want[i]);
    }
    assert_int_equal(t->nbytes, n * (t->dtype == DT_INT64 ? 8 : 4));
}

static void test_defaults(void **state)
{
    (void)state;
    void *cfg = parse_ok("{}");
    struct prep_output o[PREP_MAX_OUTPUTS];
    assert_int_equal(prep_text.outputs(cfg, o), 1);
    assert_null(o[0].name);
    assert_int_equal(o[0].dtype, DT_INT64);
    assert_int_equal(o[0].ndim, 1);
    assert_int_equal(o[0].dims[0], -1);
    assert_string_equal(prep_text.key, "text");
    assert_string_equal(prep_text.content_types[0], "text/plain");
    assert_null(prep_text.content_types[1]);

    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct error err;
    assert_int_equal(run(cfg, "hi hi ab", 8, &mem, out, &err), 0);
    assert_int_equal(out[0].dtype, DT_INT64);
    expect_ids(&out[0], (const int64_t[]){256, 257, 32, 258}, 4);
    /* No lowercasing by default: "Hi" is two bytes. */
    assert_int_equal(run(cfg, "Hi", 2, &mem, out, &err), 0);
    expect_ids(&out[0], (const int64_t[]){72, 105}, 2);
    /* Multi-byte characters are their bytes; NUL is a byte too. */
    assert_int_equal(run(cfg, "\xc3\xa9\x00\xf0\x9f\x98\x80", 7, &mem, out, &err), 0);
    expect_ids(&out[0], (const int64_t[]){0xc3, 0xa9, 0, 0xf0, 0x9f, 0x98, 0x80}, 7);
    /* 64 tokens by default. */
    char longer[200];
    memset(longer, 'x', sizeof longer);
    assert_int_equal(run(cfg, longer, sizeof longer, &mem, out, &err), 0);
    assert_int_equal(out[0].shape[0], 64);
    prep_mem_release(&mem);
    prep_text.free(cfg);
}

static void test_mask_int32_lowercase(void **state)
{
    (void)state;
    void *cfg = parse_ok("{\"tokenizer\": \"bpe\", \"vocab\": \"tokenizer.json\", "
                         "\"attention_mask\": \"attention_mask\", \"datatype\": \"INT32\", "
                         "\"lowercase\": true, \"max_length\": 3, \"max_bytes\": 16}");
    struct prep_output o[PREP_MAX_OUTPUTS];
    assert_int_equal(prep_text.outputs(cfg, o), 2);
    assert_null(o[0].name);
    assert_string_equal(o[1].name, "attention_mask");
    assert_int_equal(o[0].dtype, DT_INT32);
    assert_int_equal(o[1].dtype, DT_INT32);
    assert_int_equal(o[1].dims[0], -1);

    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct error err;
    /* ASCII lowercased: "HI hI" -> "hi hi"; non-ASCII (É) is left alone. */
    assert_int_equal(run(cfg, "HI hI", 5, &mem, out, &err), 0);
    expect_ids(&out[0], (const int64_t[]){256, 257}, 2);
    assert_string_equal(out[1].name, "attention_mask");
    expect_ids(&out[1], (const int64_t[]){1, 1}, 2);
    assert_int_equal(run(cfg, "\xc3\x89", 2, &mem, out, &err), 0);
    expect_ids(&out[0], (const int64_t[]){0xc3, 0x89}, 2);
    /* Truncated to the first 3 tokens. */
    assert_int_equal(run(cfg, "AB hi Q Z", 9, &mem, out, &err), 0);
    expect_ids(&out[0], (const int64_t[]){258, 257, 32}, 3);
    expect_ids(&out[1], (const int64_t[]){1, 1, 1}, 3);
    /* Exactly max_bytes is accepted, one more is 413. */
    assert_int_equal(run(cfg, "abababababababab", 16, &mem, out, &err), 0);
    expect_run_error(cfg, "abababababababab!", 17, &mem, 413, "text.max_bytes");
    prep_mem_release(&mem);
    prep_text.free(cfg);
}

static void test_run_errors(void **state)
{
    (void)state;
    void *cfg = parse_ok("{\"attention_mask\": \"m\"}");
    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct error err;
    expect_run_error(cfg, "", 0, &mem, 400, "empty");
    static const struct {
        const char *s;
        size_t len, at;
    } bad[] = {
        {"ab\x80", 3, 2},             /* lone continuation byte */
        {"\xc0\xaf", 2, 0},           /* overlong '/' */
        {"x\xe2\x82", 3, 1},          /* truncated 3-byte sequence */
        {"\xed\xa0\x80", 3, 0},       /* UTF-16 surrogate U+D800 */
        {"ok\xf4\x90\x80\x80", 6, 2}, /* above U+10FFFF */
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(run(cfg, bad[i].s, bad[i].len, &mem, out, &err), 400);
        char want[64];
        snprintf(want, sizeof want, "not valid UTF-8 (at byte %zu)", bad[i].at);
        if (!strstr(err.msg, want))
            fail_msg("case %zu: '%s'", i, err.msg);
    }
    prep_mem_release(&mem);
    /* Output memory over its limit: 500 (room for the 8 bytes of ids, not
     * for the mask's). */
    prep_mem_init(&mem, 12);
    expect_run_error(cfg, "ab", 2, &mem, 500, "out of memory");
    prep_mem_release(&mem);
    prep_text.free(cfg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_parse_error("[]", "text must be an object");
    expect_parse_error("{\"max_len\": 3}", "unknown key 'max_len'");
    expect_parse_error("{\"tokenizer\": \"wordpiece\"}", "text.tokenizer");
    expect_parse_error("{\"tokenizer\": 1}", "text.tokenizer");
    expect_parse_error("{\"vocab\": \"../tokenizer.json\"}", "text.vocab");
    expect_parse_error("{\"vocab\": \"..\"}", "text.vocab");
    expect_parse_error("{\"vocab\": \"\"}", "text.vocab");
    expect_parse_error("{\"vocab\": \"missing.json\"}", "missing.json");
    expect_parse_error("{\"max_bytes\": 0}",
                       "text.max_bytes must be an integer from 1 to 16777216");
    expect_parse_error("{\"max_bytes\": 16777217}", "text.max_bytes");
    expect_parse_error("{\"max_bytes\": 1.5}", "text.max_bytes");
    expect_parse_error("{\"max_length\": 0}", "text.max_length must be an integer from 1 to 16384");
    expect_parse_error("{\"max_length\": \"64\"}", "text.max_length");
    expect_parse_error("{\"lowercase\": \"yes\"}", "text.lowercase");
    expect_parse_error("{\"attention_mask\": \"\"}", "text.attention_mask");
    expect_parse_error("{\"attention_mask\": null}", "text.attention_mask");
    expect_parse_error("{\"datatype\": \"FP32\"}", "text.datatype");

    /* A vocab that is not a tokenizer: the tokenizer's error, naming the file. */
    char bad[sizeof model_dir + 32];
    snprintf(bad, sizeof bad, "%s/bad.json", model_dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\"type\": \"wordpiece\"}", f);
    fclose(f);
    expect_parse_error("{\"vocab\": \"bad.json\"}", "bad.json");
    unlink(bad);

    /* Boundaries are accepted. */
    prep_text.free(parse_ok("{\"max_bytes\": 16777216, \"max_length\": 16384, "
                            "\"lowercase\": false, \"datatype\": \"INT64\"}"));
    prep_text.free(NULL);
}

/* Every allocation of parse and run failing in turn: a 500 (or success once
 * past the last one), nothing leaked (ASan). */
static void test_allocation_failures(void **state)
{
    (void)state;
    const char *json = "{\"attention_mask\": \"mask\", \"lowercase\": true}";
    bool parsed = false;
    for (long n = 0; !parsed; n++) {
        void *cfg = NULL;
        struct error err;
        if (parse_failing(json, n, &cfg, &err) == 0) {
            parsed = true;
            prep_text.free(cfg);
        } else {
            assert_int_equal(err.status, 500);
        }
    }
    void *cfg = parse_ok(json);
    bool ran = false;
    for (long n = 0; !ran; n++) {
        struct prep_mem mem;
        prep_mem_init(&mem, 1 << 20);
        struct tensor out[PREP_MAX_OUTPUTS];
        struct error err;
        mem_fail_after(n);
        int rc = run(cfg, "HI hi", 5, &mem, out, &err);
        mem_fail_reset();
        if (rc == 0) {
            ran = true;
            expect_ids(&out[0], (const int64_t[]){256, 257}, 2);
            expect_ids(&out[1], (const int64_t[]){1, 1}, 2);
        } else {
            assert_int_equal(rc, 500);
        }
        prep_mem_release(&mem);
    }
    prep_text.free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_mask_int32_lowercase),
        cmocka_unit_test(test_run_errors),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
