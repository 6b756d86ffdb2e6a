/* Unit tests for base/json: the strict reader, number conversions and the writer. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/mem.h"

static struct arena arena;

static int setup(void **state)
{
    (void)state;
    arena_init(&arena, 4096, 64u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    arena_free(&arena);
    mem_fail_reset();
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- helpers ---------------------------------------------------------- */

static const struct json_value *parse_lim(const char *text, size_t len,
                                          const struct json_limits *lim)
{
    struct json_value *v = NULL;
    const char *msg = NULL;
    size_t off = 0;
    int rc = json_parse(&arena, text, len, lim, &v, &msg, &off);
    if (rc != 0)
        print_error("parse of \"%.*s\" failed: %s at %zu\n", (int)len, text, msg, off);
    assert_int_equal(rc, 0);
    assert_non_null(v);
    return v;
}

static const struct json_value *parse(const char *text)
{
    return parse_lim(text, strlen(text), NULL);
}

static const struct json_value *parse_nonfinite(const char *text)
{
    struct json_limits lim = {.allow_nonfinite = true};
    return parse_lim(text, strlen(text), &lim);
}

static void expect_error_lim(const char *text, size_t len, const struct json_limits *lim,
                             const char *want_msg, size_t want_off)
{
    struct json_value *v = (struct json_value *)1;
    const char *msg = NULL;
    size_t off = (size_t)-1;
    int rc = json_parse(&arena, text, len, lim, &v, &msg, &off);
    if (rc == 0 || !msg || strcmp(msg, want_msg) != 0 || off != want_off)
        print_error("input \"%.*s\": got rc=%d \"%s\" at %zu, want \"%s\" at %zu\n",
                    (int)(len > 60 ? 60 : len), text, rc, msg ? msg : "(null)", off, want_msg,
                    want_off);
    assert_int_equal(rc, -1);
    assert_null(v);
    assert_string_equal(msg, want_msg);
    assert_int_equal(off, want_off);
}

static void expect_error(const char *text, const char *msg, size_t off)
{
    expect_error_lim(text, strlen(text), NULL, msg, off);
}

static void assert_str_value(const struct json_value *v, const char *want, size_t want_len)
{
    assert_non_null(v);
    assert_int_equal(v->type, JSON_STRING);
    assert_int_equal(v->len, want_len);
    assert_memory_equal(v->u.str, want, want_len);
    assert_int_equal(v->u.str[want_len], '\0');
}

/* Writer output as a NUL-terminated string (the buf is reset each time). */
static const char *w_text(struct buf *b)
{
    assert_int_equal(b->err, 0);
    buf_putc(b, '\0');
    b->len--;
    return b->data;
}

/* ---- reader: valid documents ----------------------------------------- */

static void test_scalars(void **state)
{
    (void)state;
    assert_int_equal(parse("null")->type, JSON_NULL);
    assert_int_equal(parse("true")->type, JSON_TRUE);
    assert_int_equal(parse("false")->type, JSON_FALSE);
    assert_int_equal(parse(" \t\r\n true \t\r\n ")->type, JSON_TRUE);

    const struct json_value *v = parse("-12.5e+3");
    assert_int_equal(v->type, JSON_NUMBER);
    assert_int_equal(v->len, 8);
    assert_string_equal(v->u.num, "-12.5e+3");

    assert_str_value(parse("\"\""), "", 0);
    assert_str_value(parse("\"hello\""), "hello", 5);

    /* Input need not be NUL-terminated: only len bytes are read. */
    char buf[4] = {'1', '2', '3', '4'};
    v = parse_lim(buf, 3, NULL);
    assert_string_equal(v->u.num, "123");
    char tbuf[4] = {'t', 'r', 'u', 'e'};
    assert_int_equal(parse_lim(tbuf, 4, NULL)->type, JSON_TRUE);

    /* An empty text may be NULL; err_msg and err_off may be NULL. */
    expect_error_lim(NULL, 0, NULL, "empty input", 0);
    struct json_value *out;
    assert_int_equal(json_parse(&arena, "[x]", 3, NULL, &out, NULL, NULL), -1);
    assert_null(out);
}

static void test_numbers_valid(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "0",     "-0",     "1",          "-1",        "0.0",
        "-0.0",  "10",     "1234567890", "0e0",       "0E0",
        "0e+1",  "0e-1",   "1.5",        "1e5",       "1E5",
        "1e+5",  "1e-5",   "1.25e-10",   "-0.000001", "123456789012345678901234567890",
        "1e999", "1e-999",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        const struct json_value *v = parse(ok[i]);
        assert_int_equal(v->type, JSON_NUMBER);
        assert_string_equal(v->u.num, ok[i]);
        assert_int_equal(v->len, strlen(ok[i]));
    }
}

static void test_tree(void **state)
{
    (void)state;
    const struct json_value *v =
        parse("{\"a\": [1, \"two\", {\"b\": null}, [], {}], \"c\": {\"d\": true}, \"e\": false}");
    assert_int_equal(v->type, JSON_OBJECT);
    assert_int_equal(v->len, 3);
    assert_string_equal(v->u.members[0].key, "a");
    assert_int_equal(v->u.members[0].key_len, 1);
    assert_string_equal(v->u.members[1].key, "c");
    assert_string_equal(v->u.members[2].key, "e");

    const struct json_value *a = json_get(v, "a");
    assert_ptr_equal(a, &v->u.members[0].value);
    assert_int_equal(a->type, JSON_ARRAY);
    assert_int_equal(a->len, 5);
    assert_int_equal(a->u.items[0].type, JSON_NUMBER);
    assert_string_equal(a->u.items[0].u.num, "1");
    assert_str_value(&a->u.items[1], "two", 3);
    assert_int_equal(a->u.items[2].type, JSON_OBJECT);
    assert_int_equal(json_get(&a->u.items[2], "b")->type, JSON_NULL);
    assert_int_equal(a->u.items[3].type, JSON_ARRAY);
    assert_int_equal(a->u.items[3].len, 0);
    assert_int_equal(a->u.items[4].type, JSON_OBJECT);
    assert_int_equal(a->u.items[4].len, 0);

    assert_int_equal(json_get(json_get(v, "c"), "d")->type, JSON_TRUE);
    assert_int_equal(json_get(v, "e")->type, JSON_FALSE);
    assert_null(json_get(v, "x"));
    assert_null(json_get(v, ""));
    assert_null(json_get(a, "a")); /* not an object */
    assert_null(json_get(NULL, "a"));

    /* Top-level containers and whitespace everywhere. */
    v = parse(" [ ] ");
    assert_int_equal(v->type, JSON_ARRAY);
    assert_int_equal(v->len, 0);
    v = parse("\n{\r\n\t\"k\"\t:\t[ 1 , 2 ]\n}\n");
    assert_int_equal(json_get(v, "k")->len, 2);
    v = parse("[[[[]]],[[]]]");
    assert_int_equal(v->len, 2);
    assert_int_equal(v->u.items[0].u.items[0].u.items[0].len, 0);
}

static void test_kserve_request(void **state)
{
    (void)state;
    const struct json_value *v =
        parse("{\"id\":\"42\",\"parameters\":{\"binary_data_output\":true},"
              "\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,4],\"datatype\":\"FP32\","
              "\"data\":[1.0,2.5,-3e-2,4]}],\"outputs\":[{\"name\":\"OUTPUT0\"}]}");
    assert_str_value(json_get(v, "id"), "42", 2);
    assert_int_equal(json_get(json_get(v, "parameters"), "binary_data_output")->type, JSON_TRUE);
    const struct json_value *inputs = json_get(v, "inputs");
    assert_int_equal(inputs->len, 1);
    const struct json_value *in0 = &inputs->u.items[0];
    assert_str_value(json_get(in0, "datatype"), "FP32", 4);
    const struct json_value *shape = json_get(in0, "shape");
    int64_t dim;
    assert_int_equal(json_num_i64(&shape->u.items[1], &dim), 0);
    assert_int_equal(dim, 4);
    const struct json_value *data = json_get(in0, "data");
    assert_int_equal(data->len, 4);
    float f;
    assert_int_equal(json_num_f32(&data->u.items[2], &f), 0);
    assert_true(f == -3e-2f);
    assert_int_equal(json_num_f32(&data->u.items[3], &f), 0);
    assert_true(f == 4.0f);
}

static void test_get_duplicates_and_nul_keys(void **state)
{
    (void)state;
    const struct json_value *v = parse("{\"k\":1,\"k\":2,\"a\\u0000b\":3,\"a\":4}");
    assert_int_equal(v->len, 4);
    assert_string_equal(json_get(v, "k")->u.num, "1"); /* first wins */
    assert_int_equal(v->u.members[2].key_len, 3);
    assert_memory_equal(v->u.members[2].key, "a\0b", 4);
    /* "a" must not match the key "a\0b" even though strcmp would say so. */
    assert_string_equal(json_get(v, "a")->u.num, "4");
    /* Keys are compared by bytes, not case-insensitively. */
    assert_null(json_get(v, "K"));
}

static void test_string_escapes(void **state)
{
    (void)state;
    assert_str_value(parse("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\""), "\" \\ / \b \f \n \r \t", 15);
    assert_str_value(parse("\"\\u0041\\u00e9\\u00E9\\u20ac\""), "A\xc3\xa9\xc3\xa9\xe2\x82\xac", 8);
    /* Surrogate pairs combine into one 4-byte sequence. */
    assert_str_value(parse("\"\\ud83d\\ude00\""), "\xf0\x9f\x98\x80", 4);
    assert_str_value(parse("\"\\uD800\\uDC00\""), "\xf0\x90\x80\x80", 4);
    assert_str_value(parse("\"\\uDBFF\\uDFFF\""), "\xf4\x8f\xbf\xbf", 4);
    /* \u0000 gives an embedded NUL, hence the explicit length. */
    assert_str_value(parse("\"a\\u0000b\""), "a\0b", 3);
    /* Boundaries of each UTF-8 length, escaped and raw. */
    assert_str_value(parse("\"\\u007f\\u0080\\u07ff\\u0800\\uffff\""),
                     "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 11);
    const char raw[] = "\"\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
                       "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"";
    assert_str_value(parse(raw), raw + 1, sizeof raw - 3);
    /* An escaped quote does not end the string. */
    assert_str_value(parse("[\"a\\\"]\"]")->u.items, "a\"]", 3);
    assert_str_value(parse("\"\\\\\""), "\\", 1);
}

/* Regression (libFuzzer + UBSan): closing an empty container before any child
 * had been pushed computed `slots + base` with slots still NULL. */
static void test_regress_empty_container_null_slots(void **state)
{
    (void)state;
    const struct json_value *v = parse("[]");
    assert_int_equal(v->type, JSON_ARRAY);
    assert_int_equal(v->len, 0);
    assert_null(v->u.items);
    v = parse("{}");
    assert_int_equal(v->type, JSON_OBJECT);
    assert_int_equal(v->len, 0);
    assert_null(v->u.members);
    v = parse("[[],{}]");
    assert_int_equal(v->len, 2);
}

/* ---- reader: rejections ----------------------------------------------- */

static void test_reject_syntax(void **state)
{
    (void)state;
    expect_error("", "empty input", 0);
    expect_error(" \n\t\r", "empty input", 4);
    expect_error("[1,2,]", "unexpected character", 5);
    expect_error("{\"a\":1,}", "expected string key", 7);
    expect_error("[,]", "unexpected character", 1);
    expect_error("{,}", "expected string key", 1);
    expect_error("[1 2]", "expected ',' or ']'", 3);
    expect_error("{\"a\":1 \"b\":2}", "expected ',' or '}'", 7);
    expect_error("{\"a\" 1}", "expected ':'", 5);
    expect_error("{1:2}", "expected string key", 1);
    expect_error("{'a':1}", "expected string key", 1);
    expect_error("'a'", "unexpected character", 0);
    expect_error("[1] // c", "trailing characters after value", 4);
    expect_error("/* c */ 1", "unexpected character", 0);
    expect_error("1 2", "trailing characters after value", 2);
    expect_error("{}}", "trailing characters after value", 2);
    expect_error("[1]]", "trailing characters after value", 3);
    expect_error("[1}", "expected ',' or ']'", 2);
    expect_error("{\"a\":1]", "expected ',' or '}'", 6);
    expect_error("[", "unexpected end of input", 1);
    expect_error("[1", "unexpected end of input", 2);
    expect_error("[1,", "unexpected end of input", 3);
    expect_error("{", "expected string key", 1);
    expect_error("{\"a\"", "expected ':'", 4);
    expect_error("{\"a\":", "unexpected end of input", 5);
    expect_error("tru", "invalid literal", 0);
    expect_error("nul", "invalid literal", 0);
    expect_error("True", "unexpected character", 0);
    expect_error("falsey", "trailing characters after value", 5);
    expect_error("[nan]", "invalid literal", 1);
    /* Only space, tab, LF and CR are whitespace. */
    expect_error("\f1", "unexpected character", 0);
    expect_error("\v1", "unexpected character", 0);
    expect_error("\xc2\xa0 1", "unexpected character", 0); /* U+00A0 */
    expect_error_lim("1\0", 2, NULL, "trailing characters after value", 1);
}

static void test_reject_numbers(void **state)
{
    (void)state;
    expect_error("01", "invalid number", 1);
    expect_error("-01", "invalid number", 2);
    expect_error("[00]", "invalid number", 2);
    expect_error("+1", "unexpected character", 0);
    expect_error(".5", "unexpected character", 0);
    expect_error("1.", "invalid number", 2);
    expect_error("1.e5", "invalid number", 2);
    expect_error("-", "invalid number", 1);
    expect_error("-a", "invalid number", 1);
    expect_error("- 1", "invalid number", 1);
    expect_error("1e", "invalid number", 2);
    expect_error("1e+", "invalid number", 3);
    expect_error("1E-x", "invalid number", 3);
    expect_error("0x10", "trailing characters after value", 1);
    expect_error("1.5.3", "trailing characters after value", 3);
    expect_error("[1.]", "invalid number", 3);
    /* The bare non-finite tokens need allow_nonfinite. */
    expect_error("NaN", "unexpected character", 0);
    expect_error("Infinity", "unexpected character", 0);
    expect_error("-Infinity", "invalid number", 1);
    struct json_limits lim = {.allow_nonfinite = true};
    expect_error_lim("Inf", 3, &lim, "invalid literal", 0);
    expect_error_lim("-Infinit", 8, &lim, "invalid literal", 0);
    expect_error_lim("Na", 2, &lim, "invalid literal", 0);
    expect_error_lim("+Infinity", 9, &lim, "unexpected character", 0);
    expect_error_lim("nan", 3, &lim, "invalid literal", 0);
}

static void test_reject_strings(void **state)
{
    (void)state;
    expect_error("\"abc", "unterminated string", 4);
    expect_error("\"abc\\\"", "unterminated string", 6);
    expect_error("\"abc\\", "unterminated string", 5);
    expect_error("[\"a", "unterminated string", 3);
    expect_error("\"a\nb\"", "control character in string", 2);
    expect_error("\"a\tb\"", "control character in string", 2);
    expect_error_lim("\"a\0b\"", 5, NULL, "control character in string", 2);
    expect_error("\"\x1f\"", "control character in string", 1);
    assert_str_value(parse("\"\x7f\""), "\x7f", 1); /* DEL is not a control char in JSON */
    expect_error("\"\\x41\"", "invalid escape", 1);
    expect_error("\"\\a\"", "invalid escape", 1);
    expect_error("\"\\U0041\"", "invalid escape", 1);
    expect_error("\"ab\\'\"", "invalid escape", 3);
    expect_error("\"\\u12\"", "invalid escape", 1);
    expect_error("\"\\u12G4\"", "invalid escape", 1);
    expect_error("\"\\u-123\"", "invalid escape", 1);
    /* Lone and mismatched surrogates. */
    expect_error("\"\\ud800\"", "lone surrogate in \\u escape", 1);
    expect_error("\"\\ud800x\"", "lone surrogate in \\u escape", 1);
    expect_error("\"\\ud800\\n\"", "lone surrogate in \\u escape", 1);
    expect_error("\"\\ud800\\u0041\"", "lone surrogate in \\u escape", 1);
    expect_error("\"\\ud800\\ud800\"", "lone surrogate in \\u escape", 1);
    expect_error("\"\\udc00\"", "lone surrogate in \\u escape", 1);
    expect_error("\"a\\udfff\\ud800\"", "lone surrogate in \\u escape", 2);
    expect_error("\"\\ud800\\udc0\"", "lone surrogate in \\u escape", 1);
    /* Invalid raw UTF-8. */
    static const struct {
        const char *text;
        size_t off;
    } bad_utf8[] = {
        {"\"\x80\"", 1},             /* lone continuation byte */
        {"\"a\xbf\"", 2},            /* lone continuation byte */
        {"\"\xc0\x80\"", 1},         /* overlong NUL */
        {"\"\xc1\xbf\"", 1},         /* overlong 2-byte */
        {"\"\xe0\x80\x80\"", 1},     /* overlong 3-byte */
        {"\"\xe0\x9f\xbf\"", 1},     /* overlong 3-byte, top */
        {"\"\xf0\x80\x80\x80\"", 1}, /* overlong 4-byte */
        {"\"\xf0\x8f\xbf\xbf\"", 1}, /* overlong 4-byte, top */
        {"\"\xed\xa0\x80\"", 1},     /* UTF-8 encoded surrogate U+D800 */
        {"\"\xed\xbf\xbf\"", 1},     /* UTF-8 encoded surrogate U+DFFF */
        {"\"\xf4\x90\x80\x80\"", 1}, /* U+110000 */
        {"\"\xf5\x80\x80\x80\"", 1}, /* lead byte beyond U+10FFFF */
        {"\"\xff\"", 1},
        {"\"\xfe\"", 1},
        {"\"\xc3\"", 1},             /* truncated by the closing quote */
        {"\"\xe2\x82\"", 1},         /* truncated 3-byte */
        {"\"\xf0\x9f\x98\"", 1},     /* truncated 4-byte */
        {"\"\xc3z\"", 1},            /* continuation missing */
        {"\"ok\xe2\x28\xa1\"", 3},   /* bad second byte */
        {"\"\xf0\x9f\x28\x80\"", 1}, /* bad third byte */
    };
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++)
        expect_error(bad_utf8[i].text, "invalid UTF-8 in string", bad_utf8[i].off);
    /* Invalid UTF-8 in a key is rejected too. */
    expect_error("{\"\xff\":1}", "invalid UTF-8 in string", 2);
}

static void test_depth_limit(void **state)
{
    (void)state;
    char text[512];
    struct json_limits lim = {.max_depth = 5};

    /* Exactly max_depth levels parse; one more fails where it opens. */
    expect_error_lim("[[[[[[]]]]]]", 12, &lim, "nesting too deep", 5);
    const struct json_value *v = parse_lim("[[[[[]]]]]", 10, &lim);
    assert_int_equal(v->type, JSON_ARRAY);
    v = parse_lim("{\"a\":[{\"b\":[{}]}]}", 18, &lim);
    assert_int_equal(v->type, JSON_OBJECT);
    expect_error_lim("{\"a\":[{\"b\":[{\"c\":[]}]}]}", 24, &lim, "nesting too deep", 17);
    /* Scalars do not count as a level. */
    parse_lim("[[[[[1]]]]]", 11, &lim);
    /* Siblings do not add up. */
    parse_lim("[[[[[]]]],[[[[]]]],[[[[]]]]]", 28, &lim);

    /* The default is 64. */
    for (int depth = 64; depth <= 65; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++)
            text[n++] = '[';
        for (int i = 0; i < depth; i++)
            text[n++] = ']';
        if (depth == 64)
            parse_lim(text, n, NULL);
        else
            expect_error_lim(text, n, NULL, "nesting too deep", 64);
    }
    lim.max_depth = 1;
    parse_lim("[1,2]", 5, &lim);
    expect_error_lim("[[]]", 4, &lim, "nesting too deep", 1);
}

static void test_deep_input(void **state)
{
    (void)state;
    enum { DEPTH = 100000 };
    char *text = malloc(2 * DEPTH);
    assert_non_null(text);
    memset(text, '[', DEPTH);
    memset(text + DEPTH, ']', DEPTH);

    expect_error_lim(text, DEPTH, NULL, "nesting too deep", 64);
    struct json_limits lim = {.max_depth = 300};
    expect_error_lim(text, 2 * DEPTH, &lim, "nesting too deep", 300);
    /* The parser is iterative: even a huge limit does not touch the C stack. */
    lim.max_depth = DEPTH;
    const struct json_value *v = parse_lim(text, 2 * DEPTH, &lim);
    for (int i = 1; i < DEPTH; i++) {
        assert_int_equal(v->len, 1);
        v = v->u.items;
    }
    assert_int_equal(v->len, 0);
    expect_error_lim(text, 2 * DEPTH - 1, &lim, "unexpected end of input", 2 * DEPTH - 1);

    /* Objects too. */
    for (int i = 0; i < DEPTH / 5; i++)
        memcpy(text + 5 * i, "{\"a\":", 5);
    expect_error_lim(text, DEPTH, NULL, "nesting too deep", 64 * 5);
    free(text);
}

/* ---- number conversions ---------------------------------------------- */

static int to_i64(const char *text, int64_t *out)
{
    return json_num_i64(parse_nonfinite(text), out);
}

static int to_u64(const char *text, uint64_t *out)
{
    return json_num_u64(parse_nonfinite(text), out);
}

static void test_num_i64(void **state)
{
    (void)state;
    int64_t v;
    assert_int_equal(to_i64("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(to_i64("-0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(to_i64("42", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(to_i64("-42", &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(to_i64("9223372036854775807", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(to_i64("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    v = 7;
    assert_int_equal(to_i64("9223372036854775808", &v), -ERANGE);
    assert_int_equal(to_i64("-9223372036854775809", &v), -ERANGE);
    assert_int_equal(to_i64("18446744073709551616", &v), -ERANGE);
    assert_int_equal(to_i64("99999999999999999999999999", &v), -ERANGE);
    assert_int_equal(v, 7); /* untouched on error */
    assert_int_equal(to_i64("1e2", &v), -EINVAL);
    assert_int_equal(to_i64("1E2", &v), -EINVAL);
    assert_int_equal(to_i64("1.0", &v), -EINVAL);
    assert_int_equal(to_i64("1e999999999999999999999", &v), -EINVAL);
    assert_int_equal(to_i64("NaN", &v), -EINVAL);
    assert_int_equal(to_i64("Infinity", &v), -EINVAL);
    assert_int_equal(to_i64("-Infinity", &v), -EINVAL);
    assert_int_equal(json_num_i64(parse("\"1\""), &v), -EINVAL);
    assert_int_equal(json_num_i64(parse("null"), &v), -EINVAL);
    assert_int_equal(json_num_i64(NULL, &v), -EINVAL);
}

static void test_num_u64(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(to_u64("0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(to_u64("-0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(to_u64("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(to_u64("9223372036854775808", &v), 0);
    assert_true(v == (uint64_t)INT64_MAX + 1);
    assert_int_equal(to_u64("18446744073709551616", &v), -ERANGE);
    assert_int_equal(to_u64("18446744073709551620", &v), -ERANGE);
    assert_int_equal(to_u64("-1", &v), -ERANGE);
    assert_int_equal(to_u64("-18446744073709551615", &v), -ERANGE);
    assert_int_equal(to_u64("1e2", &v), -EINVAL);
    assert_int_equal(to_u64("0.5", &v), -EINVAL);
    assert_int_equal(to_u64("NaN", &v), -EINVAL);
    assert_int_equal(json_num_u64(parse("[]"), &v), -EINVAL);
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_num_f64(void **state)
{
    (void)state;
    double d;
    assert_int_equal(json_num_f64(parse("1.5"), &d), 0);
    assert_true(d == 1.5);
    assert_int_equal(json_num_f64(parse("1e2"), &d), 0);
    assert_true(d == 100.0);
    assert_int_equal(json_num_f64(parse("0.1"), &d), 0);
    assert_true(d == 0.1);
    /* Exact beyond 2^53 as strtod is correctly rounded. */
    assert_int_equal(json_num_f64(parse("9007199254740993"), &d), 0);
    assert_true(d == 9007199254740992.0);
    assert_int_equal(json_num_f64(parse("-0.0"), &d), 0);
    assert_true(d == 0 && signbit(d));
    assert_int_equal(json_num_f64(parse("-0"), &d), 0);
    assert_true(d == 0 && signbit(d));
    assert_int_equal(json_num_f64(parse("1.7976931348623157e308"), &d), 0);
    assert_true(d == DBL_MAX);
    assert_int_equal(json_num_f64(parse("2.2250738585072014e-308"), &d), 0);
    assert_true(d == DBL_MIN);
    /* Subnormals and underflow to zero are values, not errors. */
    assert_int_equal(json_num_f64(parse("4.9406564584124654e-324"), &d), 0);
    assert_true(f64_bits(d) == 1);
    assert_int_equal(json_num_f64(parse("1e-310"), &d), 0);
    assert_true(d > 0 && d < DBL_MIN);
    assert_int_equal(json_num_f64(parse("1e-400"), &d), 0);
    assert_true(d == 0 && !signbit(d));
    assert_int_equal(json_num_f64(parse("-1e-400"), &d), 0);
    assert_true(d == 0 && signbit(d));
    /* Overflow of a finite literal is a range error. */
    d = 3;
    assert_int_equal(json_num_f64(parse("1e999"), &d), -ERANGE);
    assert_int_equal(json_num_f64(parse("-1e999"), &d), -ERANGE);
    assert_int_equal(json_num_f64(parse("1.8e308"), &d), -ERANGE);
    assert_true(d == 3);
    /* The non-finite tokens. */
    assert_int_equal(json_num_f64(parse_nonfinite("NaN"), &d), 0);
    assert_true(isnan(d));
    assert_int_equal(json_num_f64(parse_nonfinite("Infinity"), &d), 0);
    assert_true(isinf(d) && d > 0);
    assert_int_equal(json_num_f64(parse_nonfinite("-Infinity"), &d), 0);
    assert_true(isinf(d) && d < 0);
    const struct json_value *v = parse_nonfinite("[NaN,-Infinity,Infinity,-1]");
    assert_int_equal(v->len, 4);
    assert_string_equal(v->u.items[1].u.num, "-Infinity");
    assert_int_equal(json_num_f64(&v->u.items[3], &d), 0);
    assert_true(d == -1);
    assert_int_equal(json_num_f64(parse("true"), &d), -EINVAL);
}

static void test_num_f32(void **state)
{
    (void)state;
    float f;
    assert_int_equal(json_num_f32(parse("0.1"), &f), 0);
    assert_true(f == 0.1f);
    assert_int_equal(json_num_f32(parse("-0.0"), &f), 0);
    assert_true(f == 0 && signbit(f));
    assert_int_equal(json_num_f32(parse("3.4028235e38"), &f), 0);
    assert_true(f == FLT_MAX);
    assert_int_equal(json_num_f32(parse("-3.4028235e38"), &f), 0);
    assert_true(f == -FLT_MAX);
    /* Just below the midpoint between FLT_MAX and 2^128 still rounds to
     * FLT_MAX; from the midpoint on strtof gives infinity: a range error. */
    assert_int_equal(json_num_f32(parse("3.4028235677973366e38"), &f), 0);
    assert_true(f == FLT_MAX);
    assert_true(isinf(strtof("3.4028235677973367e38", NULL)));
    assert_int_equal(json_num_f32(parse("3.4028235677973367e38"), &f), -ERANGE);
    assert_int_equal(json_num_f32(parse("3.4028236e38"), &f), -ERANGE);
    assert_int_equal(json_num_f32(parse("1e39"), &f), -ERANGE);
    /* A double-sized value is a float range error. */
    assert_int_equal(json_num_f32(parse("1e300"), &f), -ERANGE);
    /* Subnormals and underflow. */
    assert_int_equal(json_num_f32(parse("1.4e-45"), &f), 0);
    assert_true(f32_bits(f) == 1);
    assert_int_equal(json_num_f32(parse("1.1754942e-38"), &f), 0);
    assert_true(f > 0 && f < FLT_MIN);
    assert_int_equal(json_num_f32(parse("1e-50"), &f), 0);
    assert_true(f == 0);
    /* strtof rounds once; (float)strtod would round twice and differ here. */
    assert_int_equal(json_num_f32(parse("1.00000005960464477550"), &f), 0);
    assert_true(f == strtof("1.00000005960464477550", NULL));
    assert_int_equal(json_num_f32(parse_nonfinite("-Infinity"), &f), 0);
    assert_true(isinf(f) && f < 0);
    assert_int_equal(json_num_f32(parse_nonfinite("NaN"), &f), 0);
    assert_true(isnan(f));
    assert_int_equal(json_num_f32(parse("\"1\""), &f), -EINVAL);
}

/* ---- float round trip -------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Significant digits of a %g text ("-1.25e-07" has 3). */
/* Significant digits of a decimal: from the first nonzero digit to the
 * last (trailing zeros, as in "100", are not significant). */
static int sig_digits(const char *s)
{
    int n = 0, zeros = 0;
    bool leading = true;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        if (leading && *s == '0')
            continue;
        leading = false;
        n++;
        zeros = *s == '0' ? zeros + 1 : 0;
    }
    n -= zeros;
    return n ? n : 1;
}

static void check_f32(struct buf *b, float f)
{
    struct json_writer w;
    buf_reset(b);
    json_w_init(&w, b);
    json_w_f32(&w, f);
    const char *text = w_text(b);
    float back = strtof(text, NULL);
    if (isnan(f)) {
        assert_string_equal(text, "NaN");
        return;
    }
    if (f32_bits(back) != f32_bits(f))
        print_error("float %a written as %s reads back as %a\n", (double)f, text, (double)back);
    assert_true(f32_bits(back) == f32_bits(f));
}

static void check_f64(struct buf *b, double d)
{
    struct json_writer w;
    buf_reset(b);
    json_w_init(&w, b);
    json_w_f64(&w, d);
    const char *text = w_text(b);
    double back = strtod(text, NULL);
    if (isnan(d)) {
        assert_string_equal(text, "NaN");
        return;
    }
    if (f64_bits(back) != f64_bits(d))
        print_error("double %a written as %s reads back as %a\n", d, text, back);
    assert_true(f64_bits(back) == f64_bits(d));
}

static void test_round_trip_f32(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 10);
    static const float edges[] = {
        0.0f,         -0.0f,           FLT_MIN,  -FLT_MIN,  FLT_MAX,     -FLT_MAX,
        FLT_TRUE_MIN, -FLT_TRUE_MIN,   0.1f,     1.0f / 3,  16777216.0f, 16777217.0f,
        1e-45f,       1.17549421e-38f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        check_f32(&b, edges[i]);

    /* Random bit patterns cover every exponent including subnormals. */
    for (int i = 0; i < 200000; i++) {
        uint32_t bits = (uint32_t)(rng() >> 32);
        float f;
        memcpy(&f, &bits, sizeof f);
        check_f32(&b, f);
    }
    /* Short decimals must come back as short as they went in. */
    for (int i = 0; i < 20000; i++) {
        char in[32];
        int digits = 1 + (int)(rng() % 6);
        uint64_t mant = rng() % 1000000;
        for (int k = digits; k < 6; k++)
            mant /= 10;
        snprintf(in, sizeof in, "%llue%d", (unsigned long long)mant, (int)(rng() % 70) - 40);
        float f = strtof(in, NULL);
        check_f32(&b, f);
        assert_true(sig_digits(b.data) <= sig_digits(in));
    }
    /* The output is JSON: it parses, as a number, back to the same float. */
    for (int i = 0; i < 2000; i++) {
        uint32_t bits = (uint32_t)rng();
        float f, back;
        memcpy(&f, &bits, sizeof f);
        if (isnan(f))
            continue;
        check_f32(&b, f);
        const struct json_value *v = parse_nonfinite(w_text(&b));
        assert_int_equal(json_num_f32(v, &back), 0);
        assert_true(f32_bits(back) == f32_bits(f));
        arena_reset(&arena);
    }
    buf_free(&b);
}

static void test_round_trip_f64(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 10);
    static const double edges[] = {0.0,
                                   -0.0,
                                   DBL_MIN,
                                   -DBL_MIN,
                                   DBL_MAX,
                                   -DBL_MAX,
                                   DBL_TRUE_MIN,
                                   -DBL_TRUE_MIN,
                                   0.1,
                                   1.0 / 3,
                                   9007199254740992.0,
                                   9007199254740994.0,
                                   5e-324,
                                   2.2250738585072009e-308,
                                   1e23,
                                   5e-324 * 3,
                                   INFINITY,
                                   -INFINITY,
                                   NAN};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        check_f64(&b, edges[i]);

    for (int i = 0; i < 200000; i++) {
        uint64_t bits = rng();
        double d;
        memcpy(&d, &bits, sizeof d);
        check_f64(&b, d);
    }
    for (int i = 0; i < 20000; i++) {
        char in[48];
        int digits = 1 + (int)(rng() % 15);
        uint64_t mant = rng() % 1000000000000000ull;
        for (int k = digits; k < 15; k++)
            mant /= 10;
        snprintf(in, sizeof in, "%llue%d", (unsigned long long)mant, (int)(rng() % 600) - 300);
        double d = strtod(in, NULL);
        check_f64(&b, d);
        assert_true(sig_digits(b.data) <= sig_digits(in));
    }
    for (int i = 0; i < 2000; i++) {
        uint64_t bits = rng();
        double d, back;
        memcpy(&d, &bits, sizeof d);
        if (isnan(d))
            continue;
        check_f64(&b, d);
        const struct json_value *v = parse_nonfinite(w_text(&b));
        assert_int_equal(json_num_f64(v, &back), 0);
        assert_true(f64_bits(back) == f64_bits(d));
        arena_reset(&arena);
    }
    buf_free(&b);
}

/* ---- writer ------------------------------------------------------------ */

static void test_writer_nested(void **state)
{
    (void)state;
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1 << 16);
    json_w_init(&w, &b);

    json_w_obj_begin(&w);
    json_w_key(&w, "model_name");
    json_w_cstr(&w, "resnet");
    json_w_key(&w, "outputs");
    json_w_arr_begin(&w);
    json_w_obj_begin(&w);
    json_w_key(&w, "name");
    json_w_cstr(&w, "out");
    json_w_key(&w, "shape");
    json_w_arr_begin(&w);
    json_w_int(&w, 1);
    json_w_int(&w, 3);
    json_w_arr_end(&w);
    json_w_key(&w, "data");
    json_w_arr_begin(&w);
    json_w_f32(&w, 0.5f);
    json_w_f32(&w, -1.25f);
    json_w_f64(&w, 1e100);
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    json_w_obj_begin(&w);
    json_w_obj_end(&w);
    json_w_arr_begin(&w);
    json_w_arr_end(&w);
    json_w_arr_end(&w);
    json_w_key(&w, "ok");
    json_w_bool(&w, true);
    json_w_key(&w, "no");
    json_w_bool(&w, false);
    json_w_key(&w, "nothing");
    json_w_null(&w);
    json_w_key(&w, "raw");
    json_w_raw(&w, "{\"x\":[1]}", 9);
    json_w_key(&w, "big");
    json_w_uint(&w, UINT64_MAX);
    json_w_obj_end(&w);

    assert_int_equal(w.depth, 0);
    assert_string_equal(w_text(&b),
                        "{\"model_name\":\"resnet\",\"outputs\":[{\"name\":\"out\",\"shape\":[1,3],"
                        "\"data\":[0.5,-1.25,1e+100]},{},[]],\"ok\":true,\"no\":false,"
                        "\"nothing\":null,\"raw\":{\"x\":[1]},\"big\":18446744073709551615}");
    /* And the reader agrees. */
    const struct json_value *v = parse(w_text(&b));
    assert_int_equal(v->len, 7);
    buf_free(&b);
}

static void test_writer_scalars(void **state)
{
    (void)state;
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1 << 16);
    json_w_init(&w, &b);
    json_w_arr_begin(&w);
    json_w_int(&w, 0);
    json_w_int(&w, -1);
    json_w_int(&w, INT64_MAX);
    json_w_int(&w, INT64_MIN);
    json_w_uint(&w, 0);
    json_w_uint(&w, 10);
    json_w_f64(&w, -0.0);
    json_w_f32(&w, -0.0f);
    json_w_f64(&w, 0.1);
    json_w_f32(&w, 0.1f);
    json_w_f64(&w, 100);
    json_w_f64(&w, 123456789012.0);
    json_w_f64(&w, 5e-324);
    json_w_f32(&w, FLT_MAX);
    json_w_f64(&w, NAN);
    json_w_f64(&w, INFINITY);
    json_w_f32(&w, -INFINITY);
    json_w_arr_end(&w);
    assert_string_equal(w_text(&b),
                        "[0,-1,9223372036854775807,-9223372036854775808,0,10,-0,-0,0.1,0.1,100,"
                        "123456789012,5e-324,3.4028235e+38,NaN,Infinity,-Infinity]");

    /* A lone top-level value. */
    buf_reset(&b);
    json_w_init(&w, &b);
    json_w_cstr(&w, "x");
    assert_string_equal(w_text(&b), "\"x\"");
    buf_free(&b);
}

static void test_writer_escapes(void **state)
{
    (void)state;
    static const char special[] = "\" \\ / \b \f \n \r \t \x01 \x1f \x7f \0!";
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1 << 16);
    json_w_init(&w, &b);
    json_w_obj_begin(&w);
    json_w_key(&w, "q\"\\\n");
    json_w_str(&w, special, sizeof special - 1);
    json_w_keyn(&w, "a\0b", 3);
    json_w_cstr(&w, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
    json_w_obj_end(&w);
    assert_string_equal(w_text(&b),
                        "{\"q\\\"\\\\\\n\":\"\\\" \\\\ / \\b \\f \\n \\r \\t \\u0001 \\u001f \x7f "
                        "\\u0000!\",\"a\\u0000b\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
                        "\xf4\x8f\xbf\xbf\"}");
    /* Reading it back gives the original bytes. */
    const struct json_value *v = parse(w_text(&b));
    assert_str_value(&v->u.members[0].value, special, sizeof special - 1);
    assert_int_equal(v->u.members[0].key_len, 4);
    assert_int_equal(v->u.members[1].key_len, 3);
    assert_memory_equal(v->u.members[1].key, "a\0b", 3);
    buf_free(&b);
}

static void test_writer_invalid_utf8(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"\xff", "\"\\u00ff\""},
        {"a\x80z", "\"a\\u0080z\""},
        {"\xc0\x80", "\"\\u00c0\\u0080\""},                       /* overlong */
        {"\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\""},            /* surrogate */
        {"\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""}, /* > U+10FFFF */
        {"\xe2\x82", "\"\\u00e2\\u0082\""},                       /* truncated at the end */
        {"\xe2\x82\xac\xe2\x82", "\"\xe2\x82\xac\\u00e2\\u0082\""},
        {"\xc3z", "\"\\u00c3z\""},
    };
    struct buf b;
    buf_init(&b, 1 << 10);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct json_writer w;
        buf_reset(&b);
        json_w_init(&w, &b);
        json_w_cstr(&w, cases[i].in);
        assert_string_equal(w_text(&b), cases[i].out);
        /* Always valid JSON. */
        parse(w_text(&b));
    }
    buf_free(&b);
}

static void test_writer_depth(void **state)
{
    (void)state;
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1 << 10);

    json_w_init(&w, &b);
    for (int i = 0; i < JSON_WRITER_MAX_DEPTH; i++)
        json_w_arr_begin(&w);
    for (int i = 0; i < JSON_WRITER_MAX_DEPTH; i++)
        json_w_arr_end(&w);
    assert_int_equal(b.err, 0);
    assert_int_equal(b.len, 2 * JSON_WRITER_MAX_DEPTH);

    buf_reset(&b);
    json_w_init(&w, &b);
    for (int i = 0; i < JSON_WRITER_MAX_DEPTH; i++)
        json_w_obj_begin(&w), json_w_key(&w, "k");
    json_w_arr_begin(&w);
    assert_int_equal(b.err, -E2BIG);
    /* Sticky: later calls do nothing. */
    size_t len = b.len;
    json_w_int(&w, 1);
    json_w_arr_end(&w);
    assert_int_equal(b.len, len);
    assert_int_equal(b.err, -E2BIG);

    /* An end without a begin is a caller bug, reported not crashed on. */
    buf_reset(&b);
    json_w_init(&w, &b);
    json_w_arr_end(&w);
    assert_int_equal(b.err, -EINVAL);
    buf_free(&b);
}

static void test_writer_buf_ceiling(void **state)
{
    (void)state;
    struct buf b;
    struct json_writer w;
    buf_init(&b, 16);
    json_w_init(&w, &b);
    json_w_arr_begin(&w);
    json_w_cstr(&w, "0123456789abcdefghij");
    assert_int_equal(b.err, -E2BIG);
    json_w_int(&w, 1); /* would fit, but the error is sticky */
    json_w_arr_end(&w);
    assert_int_equal(b.err, -E2BIG);
    buf_free(&b);
}

/* ---- memory ------------------------------------------------------------ */

static void test_arena_ceiling(void **state)
{
    (void)state;
    struct arena small;
    struct json_value *v;
    const char *msg = NULL;
    size_t off = 0;
    char text[4096];
    size_t n = 0;

    text[n++] = '[';
    for (int i = 0; i < 500; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%d", i ? "," : "", i);
    text[n++] = ']';

    /* Each ceiling below what the document needs fails cleanly with
     * "out of memory" (the temporary stacks come from the arena too). */
    for (size_t max = 0; max < 100000; max += 64) {
        arena_init(&small, 1024, max);
        int rc = json_parse(&small, text, n, NULL, &v, &msg, &off);
        arena_free(&small);
        if (rc == 0)
            break;
        assert_string_equal(msg, "out of memory");
        assert_null(v);
        assert_true(off <= n);
    }
    arena_init(&small, 1024, 100000);
    assert_int_equal(json_parse(&small, text, n, NULL, &v, &msg, &off), 0);
    arena_free(&small);

    /* A string bigger than the ceiling. */
    arena_init(&small, 1024, 256);
    memset(text, 'a', 1000);
    text[0] = '"';
    text[999] = '"';
    assert_int_equal(json_parse(&small, text, 1000, NULL, &v, &msg, &off), -1);
    assert_string_equal(msg, "out of memory");
    assert_int_equal(off, 0);
    arena_free(&small);
}

static void test_heap_failure(void **state)
{
    (void)state;
    const char *text =
        "{\"a\":[[1,2,[3,[4,[5,[6,[7,[8,[9,[10,[11,[12,[13,[14,[15,[16,[17,[18]]]]]]]]]"
        "]]]]]]]]],\"b\":{\"c\":\"d\"}}";
    struct json_value *v;
    const char *msg;
    size_t off;

    /* Fail the Nth allocation (temporary stacks and arena chunks) for every
     * N until the parse succeeds: each failure must be clean. */
    for (long n = 0;; n++) {
        arena_reset(&arena);
        mem_fail_after(n);
        int rc = json_parse(&arena, text, strlen(text), NULL, &v, &msg, &off);
        mem_fail_reset();
        if (rc == 0)
            break;
        assert_string_equal(msg, "out of memory");
        assert_true(n < 100);
    }
    assert_int_equal(json_get(v, "b")->type, JSON_OBJECT);
}

static void test_parse_float_array(void **state)
{
    (void)state;
    /* The size of an MNIST input: 784 floats. */
    struct buf b;
    struct json_writer w;
    buf_init(&b, 1 << 20);
    json_w_init(&w, &b);
    json_w_arr_begin(&w);
    for (int i = 0; i < 784; i++)
        json_w_f32(&w, (float)i / 255.0f);
    json_w_arr_end(&w);
    assert_int_equal(b.err, 0);
    const struct json_value *v = parse_lim(b.data, b.len, NULL);
    assert_int_equal(v->len, 784);
    for (uint32_t i = 0; i < v->len; i++) {
        float f;
        assert_int_equal(json_num_f32(&v->u.items[i], &f), 0);
        assert_true(f == (float)i / 255.0f);
    }
    buf_free(&b);
}

/* ---- reader: raw arrays (raw_array_key) ------------------------------- */

static const struct json_value *parse_raw(const char *text, uint32_t max_depth)
{
    struct json_limits lim = {.max_depth = max_depth, .raw_array_key = "data"};
    return parse_lim(text, strlen(text), &lim);
}

static void expect_raw(const struct json_value *v, const char *text, const char *want)
{
    assert_non_null(v);
    assert_int_equal(v->type, JSON_RAW);
    assert_int_equal(v->len, strlen(want));
    assert_memory_equal(v->u.raw, want, v->len);
    /* A span of the caller's text, not a copy. */
    assert_true(v->u.raw >= text && v->u.raw + v->len <= text + strlen(text));
}

static void test_type_names(void **state)
{
    (void)state;
    const struct json_value *v =
        parse("{\"n\":null,\"f\":false,\"t\":true,\"x\":1.5,\"s\":\"\",\"a\":[],\"o\":{}}");
    assert_string_equal(json_type_name(json_get(v, "n")), "null");
    assert_string_equal(json_type_name(json_get(v, "f")), "a boolean");
    assert_string_equal(json_type_name(json_get(v, "t")), "a boolean");
    assert_string_equal(json_type_name(json_get(v, "x")), "a number");
    assert_string_equal(json_type_name(json_get(v, "s")), "a string");
    assert_string_equal(json_type_name(json_get(v, "a")), "an array");
    assert_string_equal(json_type_name(json_get(v, "o")), "an object");
    assert_string_equal(json_type_name(v), "an object");
    v = parse_raw("{\"data\":[1,2]}", 0);
    assert_int_equal(json_get(v, "data")->type, JSON_RAW);
    assert_string_equal(json_type_name(json_get(v, "data")), "an array");
}

static void test_raw_arrays(void **state)
{
    (void)state;
    const char *text = "{\"id\":\"x\",\"data\" : [1, 2, [3]] ,\"other\":[1,2],\"z\":true}";
    const struct json_value *v = parse_raw(text, 0);
    expect_raw(json_get(v, "data"), text, "[1, 2, [3]]");
    assert_int_equal(json_get(v, "other")->type, JSON_ARRAY);
    assert_int_equal(json_get(v, "z")->type, JSON_TRUE);

    /* Brackets and escaped quotes inside strings do not count. */
    text = "{\"inputs\":[{\"name\":\"a\",\"data\":[[0.5,\"]\"],{\"k\":\"[\\\"}\"},\"\\\\\"]},"
           "{\"data\":[]}]}";
    v = parse_raw(text, 0);
    const struct json_value *inputs = json_get(v, "inputs");
    assert_int_equal(inputs->len, 2);
    expect_raw(json_get(&inputs->u.items[0], "data"), text,
               "[[0.5,\"]\"],{\"k\":\"[\\\"}\"},\"\\\\\"]");
    expect_raw(json_get(&inputs->u.items[1], "data"), text, "[]");

    /* Only arrays, only members, only the exact (decoded) key. */
    text = "{\"data2\":[1],\"dat\":[1],\"d\\u0061ta\":[7],\"x\":{\"data\":5}}";
    v = parse_raw(text, 0);
    assert_int_equal(json_get(v, "data2")->type, JSON_ARRAY);
    assert_int_equal(json_get(v, "dat")->type, JSON_ARRAY);
    expect_raw(json_get(v, "data"), text, "[7]");
    assert_int_equal(json_get(json_get(v, "x"), "data")->type, JSON_NUMBER);
    v = parse_raw("{\"data\":{\"data\":[1]}}", 0);
    assert_int_equal(json_get(v, "data")->type, JSON_OBJECT);
    assert_int_equal(json_get(json_get(v, "data"), "data")->type, JSON_RAW);
    v = parse_raw("[1,[2]]", 0);
    assert_int_equal(v->type, JSON_ARRAY);
    /* Without the key set, nothing is raw. */
    v = parse("{\"data\":[1]}");
    assert_int_equal(json_get(v, "data")->type, JSON_ARRAY);

    /* The content is not validated here (api/tensor_json does that). */
    text = "{\"data\":[01, tru, \"\\x\", 1.e5, ,]}";
    v = parse_raw(text, 0);
    expect_raw(json_get(v, "data"), text, "[01, tru, \"\\x\", 1.e5, ,]");

    /* Long spans: the 8-byte skip, with its false alarms (Y _ y DEL). */
    static char big[20000];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"data\":[");
    size_t start = n - 1;
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s%.9g", i ? "," : "", i * 0.37);
    n += (size_t)snprintf(big + n, sizeof big - n, ",\"Y_y\x7f[{\",[[{}]]],\"k\":1}");
    v = parse_raw(big, 0);
    const struct json_value *raw = json_get(v, "data");
    assert_int_equal(raw->type, JSON_RAW);
    assert_ptr_equal(raw->u.raw, big + start);
    assert_int_equal(raw->len, strlen(big) - start - strlen(",\"k\":1}"));
    assert_int_equal(json_get(v, "k")->type, JSON_NUMBER);

    /* Errors: unbalanced, mismatched, unterminated. */
    struct json_limits lim = {.raw_array_key = "data"};
    text = "{\"data\":[1,2}";
    expect_error_lim(text, strlen(text), &lim, "mismatched bracket", 12);
    text = "{\"data\":[{]}]}";
    expect_error_lim(text, strlen(text), &lim, "mismatched bracket", 10);
    text = "{\"data\":[1,[2]";
    expect_error_lim(text, strlen(text), &lim, "unexpected end of input", strlen(text));
    text = "{\"data\":[\"a]}";
    expect_error_lim(text, strlen(text), &lim, "unterminated string", strlen(text));
    text = "{\"data\":[\"a\\\"]}";
    expect_error_lim(text, strlen(text), &lim, "unterminated string", strlen(text));
    text = "{\"data\":[1]]}";
    expect_error_lim(text, strlen(text), &lim, "expected ',' or '}'", 11);

    /* Depth: the raw array's levels count with the enclosing ones. */
    v = parse_raw("{\"data\":[[[1]]]}", 4);
    assert_int_equal(json_get(v, "data")->type, JSON_RAW);
    lim.max_depth = 4;
    text = "{\"data\":[[[[1]]]]}";
    expect_error_lim(text, strlen(text), &lim, "nesting too deep", 11);
    text = "{\"data\":[[[{\"a\":1}]]]}";
    expect_error_lim(text, strlen(text), &lim, "nesting too deep", 11);
    lim.max_depth = 1000;
    n = (size_t)snprintf(big, sizeof big, "{\"data\":");
    for (int i = 0; i < JSON_RAW_MAX_DEPTH; i++)
        big[n++] = '[';
    for (int i = 0; i < JSON_RAW_MAX_DEPTH; i++)
        big[n++] = ']';
    big[n++] = '}';
    v = parse_lim(big, n, &lim);
    assert_int_equal(json_get(v, "data")->len, 2 * JSON_RAW_MAX_DEPTH);
    n = (size_t)snprintf(big, sizeof big, "{\"data\":");
    for (int i = 0; i <= JSON_RAW_MAX_DEPTH; i++)
        big[n++] = '[';
    expect_error_lim(big, n, &lim, "nesting too deep", 8 + JSON_RAW_MAX_DEPTH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_scalars),
        TEST(test_numbers_valid),
        TEST(test_tree),
        TEST(test_kserve_request),
        TEST(test_get_duplicates_and_nul_keys),
        TEST(test_string_escapes),
        TEST(test_regress_empty_container_null_slots),
        TEST(test_reject_syntax),
        TEST(test_reject_numbers),
        TEST(test_reject_strings),
        TEST(test_depth_limit),
        TEST(test_deep_input),
        TEST(test_num_i64),
        TEST(test_num_u64),
        TEST(test_num_f64),
        TEST(test_num_f32),
        TEST(test_round_trip_f32),
        TEST(test_round_trip_f64),
        TEST(test_writer_nested),
        TEST(test_writer_scalars),
        TEST(test_writer_escapes),
        TEST(test_writer_invalid_utf8),
        TEST(test_writer_depth),
        TEST(test_writer_buf_ceiling),
        TEST(test_arena_ceiling),
        TEST(test_heap_failure),
        TEST(test_parse_float_array),
        TEST(test_raw_arrays),
        TEST(test_type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
