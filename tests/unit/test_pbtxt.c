/* Unit tests for model/pbtxt: protobuf text format syntax, errors with
 * their exact positions, limits, number conversions. */
#include <errno.h>
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
#include "base/mem.h"
#include "model/pbtxt.h"

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

static const struct pbtxt_value *parse_lim(const char *text, size_t len,
                                           const struct pbtxt_limits *lim)
{
    struct pbtxt_value *root = NULL;
    struct error err;
    error_clear(&err);
    int rc = pbtxt_parse(&arena, text, len, lim, &root, &err);
    if (rc != 0)
        print_error("parse of \"%.*s\" failed: %s\n", (int)len, text, err.msg);
    assert_int_equal(rc, 0);
    assert_non_null(root);
    assert_int_equal(root->kind, PBTXT_MESSAGE);
    return root;
}

static const struct pbtxt_value *parse(const char *text)
{
    return parse_lim(text, strlen(text), NULL);
}

/* Expects a failure with exactly this message. */
static void reject_lim(const char *text, size_t len, const struct pbtxt_limits *lim,
                       const char *msg)
{
    struct pbtxt_value *root = NULL;
    struct error err;
    error_clear(&err);
    int rc = pbtxt_parse(&arena, text, len, lim, &root, &err);
    if (rc == 0)
        print_error("\"%.*s\" was accepted\n", (int)len, text);
    assert_int_equal(rc, -1);
    assert_null(root);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.msg, msg);
}

static void reject(const char *text, const char *msg)
{
    reject_lim(text, strlen(text), NULL, msg);
}

static const struct pbtxt_field *field_at(const struct pbtxt_value *msg, uint32_t i)
{
    const struct pbtxt_field *f = msg->u.fields;
    while (f && i--)
        f = f->next;
    assert_non_null(f);
    return f;
}

static void assert_scalar(const struct pbtxt_field *f, const char *name, enum pbtxt_kind kind,
                          const char *text)
{
    assert_string_equal(f->name, name);
    assert_int_equal(f->value.kind, kind);
    assert_string_equal(f->value.u.text, text);
    assert_int_equal(f->value.len, strlen(text));
}

static int64_t i64_of(const char *text)
{
    const struct pbtxt_value *root = parse(text);
    int64_t x = 0;
    assert_int_equal(pbtxt_to_i64(&root->u.fields->value, &x), 0);
    return x;
}

static int i64_rc(const char *text)
{
    const struct pbtxt_value *root = parse(text);
    int64_t x;
    return pbtxt_to_i64(&root->u.fields->value, &x);
}

static int u64_rc(const char *text, uint64_t *x)
{
    const struct pbtxt_value *root = parse(text);
    return pbtxt_to_u64(&root->u.fields->value, x);
}

static int double_rc(const char *text, double *x)
{
    const struct pbtxt_value *root = parse(text);
    return pbtxt_to_double(&root->u.fields->value, x);
}

static int bool_rc(const char *text, bool *x)
{
    const struct pbtxt_value *root = parse(text);
    return pbtxt_to_bool(&root->u.fields->value, x);
}

/* ---- syntax ----------------------------------------------------------- */

static void test_empty_and_comments(void **state)
{
    (void)state;
    assert_int_equal(parse("")->len, 0);
    assert_int_equal(parse_lim(NULL, 0, NULL)->len, 0);
    assert_int_equal(parse("  \n\t\r\n")->len, 0);
    assert_int_equal(parse("# only a comment")->len, 0);
    const struct pbtxt_value *root = parse("# head\na: 1 # tail\n# more\nb: 2#x");
    assert_int_equal(root->len, 2);
    assert_scalar(field_at(root, 0), "a", PBTXT_INT, "1");
    assert_scalar(field_at(root, 1), "b", PBTXT_INT, "2");
    assert_null(field_at(root, 1)->next);
}

static void test_integers(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("a: 0 b: 42 c: -7 d: 0x1F e: 0X0 f: 017 g: -0x10 h: 00");
    assert_scalar(field_at(root, 0), "a", PBTXT_INT, "0");
    assert_scalar(field_at(root, 1), "b", PBTXT_INT, "42");
    assert_scalar(field_at(root, 2), "c", PBTXT_INT, "-7");
    assert_scalar(field_at(root, 3), "d", PBTXT_INT, "0x1F");
    assert_scalar(field_at(root, 4), "e", PBTXT_INT, "0X0");
    assert_scalar(field_at(root, 5), "f", PBTXT_INT, "017");
    assert_scalar(field_at(root, 6), "g", PBTXT_INT, "-0x10");
    assert_scalar(field_at(root, 7), "h", PBTXT_INT, "00");
}

static void test_floats(void **state)
{
    (void)state;
    const struct pbtxt_value *root =
        parse("a: 1.5 b: .5 c: 1e-3 d: 2.5f e: 1. f: -0.25 g: 3E+2 h: 7F i: -.5");
    assert_scalar(field_at(root, 0), "a", PBTXT_FLOAT, "1.5");
    assert_scalar(field_at(root, 1), "b", PBTXT_FLOAT, ".5");
    assert_scalar(field_at(root, 2), "c", PBTXT_FLOAT, "1e-3");
    assert_scalar(field_at(root, 3), "d", PBTXT_FLOAT, "2.5f");
    assert_scalar(field_at(root, 4), "e", PBTXT_FLOAT, "1.");
    assert_scalar(field_at(root, 5), "f", PBTXT_FLOAT, "-0.25");
    assert_scalar(field_at(root, 6), "g", PBTXT_FLOAT, "3E+2");
    assert_scalar(field_at(root, 7), "h", PBTXT_FLOAT, "7F");
    assert_scalar(field_at(root, 8), "i", PBTXT_FLOAT, "-.5");
}

static void test_identifiers(void **state)
{
    (void)state;
    const struct pbtxt_value *root =
        parse("a: TYPE_FP32 b: true c: KIND_CPU d: -inf e: -NaN f: _x9");
    assert_scalar(field_at(root, 0), "a", PBTXT_IDENT, "TYPE_FP32");
    assert_scalar(field_at(root, 1), "b", PBTXT_IDENT, "true");
    assert_scalar(field_at(root, 2), "c", PBTXT_IDENT, "KIND_CPU");
    assert_scalar(field_at(root, 3), "d", PBTXT_IDENT, "-inf");
    assert_scalar(field_at(root, 4), "e", PBTXT_IDENT, "-NaN");
    assert_scalar(field_at(root, 5), "f", PBTXT_IDENT, "_x9");
}

static void test_strings(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse(
        "a: \"plain\" b: 'single \"q\"' c: \"x\" 'y' \"z\" d: \"\" e: \"it's\" f: 'say \"hi\"'");
    assert_scalar(field_at(root, 0), "a", PBTXT_STRING, "plain");
    assert_scalar(field_at(root, 1), "b", PBTXT_STRING, "single \"q\"");
    assert_scalar(field_at(root, 2), "c", PBTXT_STRING, "xyz");
    assert_scalar(field_at(root, 3), "d", PBTXT_STRING, "");
    assert_scalar(field_at(root, 4), "e", PBTXT_STRING, "it's");
    assert_scalar(field_at(root, 5), "f", PBTXT_STRING, "say \"hi\"");
}

static void test_string_concatenation_across_lines(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("a: \"one \"  # comment\n  'two ' \n\"three\"\nb: 1");
    assert_scalar(field_at(root, 0), "a", PBTXT_STRING, "one two three");
    assert_scalar(field_at(root, 1), "b", PBTXT_INT, "1");
    assert_int_equal(field_at(root, 1)->line, 4);
}

static void test_string_escapes(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("a: \"\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\" b: "
                                           "\"\\101\\x42\\X43\\7\\0x\" c: \"\\u00e9\\U0001F600\"");
    assert_scalar(field_at(root, 0), "a", PBTXT_STRING, "\a\b\f\n\r\t\v\\'\"?");
    const struct pbtxt_field *b = field_at(root, 1);
    assert_int_equal(b->value.len, 6);
    assert_memory_equal(b->value.u.text, "ABC\a\0x", 6);
    assert_int_equal(b->value.u.text[6], '\0');
    assert_scalar(field_at(root, 2), "c", PBTXT_STRING, "\xc3\xa9\xf0\x9f\x98\x80");
    /* \x takes at most two digits, octal at most three */
    root = parse("a: \"\\x414\" b: \"\\1012\"");
    assert_scalar(field_at(root, 0), "a", PBTXT_STRING, "A4");
    assert_scalar(field_at(root, 1), "b", PBTXT_STRING, "A2");
    /* raw UTF-8 passes through */
    root = parse("a: \"caf\xc3\xa9\"");
    assert_scalar(field_at(root, 0), "a", PBTXT_STRING, "caf\xc3\xa9");
}

static void test_messages(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("a { x: 1 } b: { y: 2 } c < z: 3 > d: < > e {}");
    assert_int_equal(root->len, 5);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(field_at(root, i)->value.kind, PBTXT_MESSAGE);
    assert_scalar(field_at(&field_at(root, 0)->value, 0), "x", PBTXT_INT, "1");
    assert_scalar(field_at(&field_at(root, 1)->value, 0), "y", PBTXT_INT, "2");
    assert_scalar(field_at(&field_at(root, 2)->value, 0), "z", PBTXT_INT, "3");
    assert_int_equal(field_at(root, 3)->value.len, 0);
    assert_null(field_at(root, 4)->value.u.fields);
    /* positions: the field name and the opening brace */
    root = parse("\n  outer {\n    inner: {\n      v: 'x'\n    }\n  }\n");
    const struct pbtxt_field *outer = field_at(root, 0);
    assert_int_equal(outer->line, 2);
    assert_int_equal(outer->col, 3);
    assert_int_equal(outer->value.line, 2);
    assert_int_equal(outer->value.col, 9);
    const struct pbtxt_field *inner = field_at(&outer->value, 0);
    assert_int_equal(inner->line, 3);
    assert_int_equal(inner->col, 5);
    assert_int_equal(inner->value.col, 12);
    const struct pbtxt_field *v = field_at(&inner->value, 0);
    assert_int_equal(v->value.line, 4);
    assert_int_equal(v->value.col, 10);
}

static void test_lists(void **state)
{
    (void)state;
    const struct pbtxt_value *root =
        parse("dims: [ 1, -1, 0x10 ] empty: [] x: 5 names: ['a' \"b\", \"c\"]");
    assert_int_equal(root->len, 6);
    for (uint32_t i = 0; i < 3; i++) {
        assert_string_equal(field_at(root, i)->name, "dims");
        assert_true(field_at(root, i)->in_list);
    }
    assert_string_equal(field_at(root, 1)->value.u.text, "-1");
    assert_scalar(field_at(root, 3), "x", PBTXT_INT, "5");
    assert_false(field_at(root, 3)->in_list);
    assert_scalar(field_at(root, 4), "names", PBTXT_STRING, "ab");
    assert_scalar(field_at(root, 5), "names", PBTXT_STRING, "c");
    /* messages in a list, with or without a colon */
    root = parse("input [ { name: 'a' }, < name: 'b' > ] output: [{name: 'c'}]");
    assert_int_equal(root->len, 3);
    assert_string_equal(field_at(root, 1)->name, "input");
    assert_true(field_at(root, 1)->in_list);
    assert_scalar(field_at(&field_at(root, 1)->value, 0), "name", PBTXT_STRING, "b");
    assert_scalar(field_at(&field_at(root, 2)->value, 0), "name", PBTXT_STRING, "c");
    /* a list element's position is the list's name */
    root = parse("\n  d: [1,\n 2]");
    assert_int_equal(field_at(root, 1)->line, 2);
    assert_int_equal(field_at(root, 1)->col, 3);
    assert_int_equal(field_at(root, 1)->value.line, 3);
    assert_int_equal(field_at(root, 1)->value.col, 2);
}

static void test_repeated_by_repetition(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("v: 1 v: 2 w { } v: 3");
    assert_int_equal(root->len, 4);
    assert_string_equal(pbtxt_find(root, "v")->value.u.text, "1");
    assert_ptr_equal(pbtxt_find(root, "w"), field_at(root, 2));
    assert_null(pbtxt_find(root, "nope"));
    assert_null(pbtxt_find(&field_at(root, 0)->value, "v"));
}

static void test_separators(void **state)
{
    (void)state;
    const struct pbtxt_value *root = parse("a: 1, b: 2; c { d: 3, }, e: [1], f: 'x';");
    assert_int_equal(root->len, 5);
    assert_int_equal(field_at(&field_at(root, 2)->value, 0)->value.len, 1);
    root = parse("a:1;b:2");
    assert_int_equal(root->len, 2);
}

static void test_tree_is_independent_of_text(void **state)
{
    (void)state;
    char *text = strdup("name: \"x\" value: 12 m { k: TYPE_INT8 }");
    assert_non_null(text);
    struct pbtxt_value *root;
    struct error err;
    assert_int_equal(pbtxt_parse(&arena, text, strlen(text), NULL, &root, &err), 0);
    memset(text, '#', strlen(text));
    free(text);
    assert_scalar(field_at(root, 0), "name", PBTXT_STRING, "x");
    assert_scalar(field_at(root, 1), "value", PBTXT_INT, "12");
    assert_scalar(field_at(&field_at(root, 2)->value, 0), "k", PBTXT_IDENT, "TYPE_INT8");
}

static void test_no_nul_termination_needed(void **state)
{
    (void)state;
    const char text[] = {'a', ':', ' ', '1', '2'}; /* no NUL after it */
    const struct pbtxt_value *root = parse_lim(text, sizeof text, NULL);
    assert_scalar(field_at(root, 0), "a", PBTXT_INT, "12");
    const char str[] = {'a', ':', '"', 'x', '"', ' ', '"'};
    reject_lim(str, sizeof str, NULL, "1:7: unterminated string");
}

/* ---- errors ----------------------------------------------------------- */

static void test_reject_structure(void **state)
{
    (void)state;
    reject("a: ", "1:4: expected a value, found end of input");
    reject("a 1", "1:3: expected ':' or '{' after 'a', found '1'");
    reject("a", "1:2: expected ':' or '{' after 'a', found end of input");
    reject("a: 1 }", "1:6: unexpected '}'");
    reject("a {\n  b: 1\n", "3:1: unexpected end of input: '{' opened at 1:3 is not closed");
    reject("a < b: 1", "1:9: unexpected end of input: '<' opened at 1:3 is not closed");
    reject("a { b: 1 >", "1:10: unexpected '>'");
    reject("a < b: 1 }", "1:10: unexpected '}'");
    reject("1: 2", "1:1: expected a field name, found '1'");
    reject("[ext.field]: 1", "1:1: extension and Any fields ([...]) are not supported");
    reject("a: 1,, b: 2", "1:6: expected a field name, found ','");
    reject("a: 1 \x01", "1:6: expected a field name, found byte 0x01");
    reject("a { , }", "1:5: expected a field name, found ','");
    reject("\ta: ?", "1:5: expected a value, found '?'");
    reject("# c\na: }", "2:4: expected a value, found '}'");
    reject("a: {", "1:5: unexpected end of input: '{' opened at 1:4 is not closed");
    reject("a: b: c", "1:5: expected a field name, found ':'");
    reject("a: 1 ]", "1:6: unexpected ']'");
}

static void test_reject_lists(void **state)
{
    (void)state;
    reject("a: [1, 2", "1:9: unexpected end of input: '[' opened at 1:4 is not closed");
    reject("a: [1 2]", "1:7: expected ',' or ']', found '2'");
    reject("a: [1,]", "1:7: expected a value, found ']'");
    reject("a: [,1]", "1:5: expected a value, found ','");
    reject("a: [[1]]", "1:5: lists cannot be nested");
    reject("a [1]", "1:1: expected ':' before a list of values for 'a'");
    reject("a: [{ b: 1 } { b: 2 }]", "1:14: expected ',' or ']', found '{'");
    reject("a: [{ b: 1 ]", "1:12: unexpected ']'");
}

static void test_reject_strings(void **state)
{
    (void)state;
    reject("a: \"abc", "1:4: unterminated string");
    reject("a: 'abc\"", "1:4: unterminated string");
    reject("a: \"x\" 'y", "1:8: unterminated string");
    reject("a: \"ab\ncd\"", "1:7: newline in string (strings cannot span lines)");
    reject("a: \"\\q\"", "1:5: unknown escape sequence");
    reject("a: \"ok\\", "1:4: unterminated string");
    reject("a: \"\\x\"", "1:5: \\x escape without hex digits");
    reject("a: \"\\400\"", "1:5: octal escape out of range (more than \\377)");
    reject("a: \"\\ud800\"", "1:5: escape is not a Unicode scalar value");
    reject("a: \"\\U00110000\"", "1:5: escape is not a Unicode scalar value");
    reject("a: \"\\u12\"", "1:5: \\u escape needs 4 hex digits");
    reject("a: \"\\U1234\"", "1:5: \\U escape needs 8 hex digits");
    reject("x: 1\n  a: 'ok' \"\\z\"", "2:12: unknown escape sequence");
    reject_lim("a: \"x\0y\"", 8, NULL, "1:6: NUL byte in input");
    reject_lim("a: 1\0", 5, NULL, "1:5: NUL byte in input");
}

static void test_reject_numbers(void **state)
{
    (void)state;
    reject("a: 0x", "1:4: invalid hexadecimal number");
    reject("a: 0xg", "1:4: invalid hexadecimal number");
    reject("a: 09", "1:4: invalid octal number (numbers starting with 0 are octal)");
    reject("a: 01.5", "1:4: invalid octal number (numbers starting with 0 are octal)");
    reject("a: 1e", "1:4: invalid exponent in number");
    reject("a: 1e+", "1:4: invalid exponent in number");
    reject("a: 12abc", "1:4: invalid number (a number must be followed by a space or punctuation)");
    reject("a: 1.2.3", "1:4: invalid number (a number must be followed by a space or punctuation)");
    reject("a: 0x1g", "1:4: invalid number (a number must be followed by a space or punctuation)");
    reject("a: -b", "1:4: expected a number after '-'");
    reject("a: -", "1:4: expected a number after '-'");
    reject("a: - 1", "1:4: expected a number after '-'");
    reject("a: -true", "1:4: expected a number after '-'");
    reject("a: .", "1:4: expected a value, found '.'");
}

/* ---- limits ----------------------------------------------------------- */

static char *nested(unsigned depth)
{
    char *s = malloc(3 * (size_t)depth + 1);
    assert_non_null(s);
    size_t n = 0;
    for (unsigned i = 0; i < depth; i++) {
        s[n++] = 'a';
        s[n++] = '{';
    }
    for (unsigned i = 0; i < depth; i++)
        s[n++] = '}';
    s[n] = '\0';
    return s;
}

static void test_depth_limit(void **state)
{
    (void)state;
    char *ok = nested(PBTXT_DEFAULT_MAX_DEPTH);
    const struct pbtxt_value *v = parse(ok);
    for (unsigned i = 0; i < PBTXT_DEFAULT_MAX_DEPTH; i++)
        v = &v->u.fields->value;
    assert_int_equal(v->len, 0);
    free(ok);

    char *deep = nested(PBTXT_DEFAULT_MAX_DEPTH + 1);
    reject(deep, "1:66: messages nested deeper than 32");
    free(deep);

    struct pbtxt_limits lim = {.max_depth = 2};
    parse_lim("a { b { c: 1 } }", 16, &lim);
    reject_lim("a { b { c { } } }", 17, &lim, "1:11: messages nested deeper than 2");
    /* lists of messages count the message, not the list */
    parse_lim("a { b: [{ c: 1 }] }", 19, &lim);
    reject_lim("a { b: [{ c { } }] }", 20, &lim, "1:13: messages nested deeper than 2");
}

static void test_deep_input_does_not_crash(void **state)
{
    (void)state;
    char *deep = nested(200000);
    struct pbtxt_value *root;
    struct error err;
    assert_int_equal(pbtxt_parse(&arena, deep, strlen(deep), NULL, &root, &err), -1);
    assert_string_equal(err.msg, "1:66: messages nested deeper than 32");
    struct pbtxt_limits lim = {.max_depth = 100000}; /* clamped */
    assert_int_equal(pbtxt_parse(&arena, deep, strlen(deep), &lim, &root, &err), -1);
    assert_string_equal(err.msg, "1:2002: messages nested deeper than 1000");
    free(deep);
}

static void test_node_limit(void **state)
{
    (void)state;
    struct pbtxt_limits lim = {.max_nodes = 5};
    parse_lim("a: 1 b: 2 c { d: 3 e: 4 }", 25, &lim);
    reject_lim("a: 1 b: 2 c { d: 3 e: 4 } f: 6", 30, &lim, "1:27: more than 5 fields");
    reject_lim("a: [1, 2, 3, 4, 5, 6]", 21, &lim, "1:1: more than 5 fields");

    /* the default: 100000 */
    size_t n = PBTXT_DEFAULT_MAX_NODES + 1;
    char *text = malloc(4 + n * 2 + 2);
    assert_non_null(text);
    size_t k = 0;
    memcpy(text, "v: [", 4);
    k = 4;
    for (size_t i = 0; i < n; i++) {
        text[k++] = '1';
        text[k++] = i + 1 < n ? ',' : ']';
    }
    text[k] = '\0';
    reject_lim(text, k, NULL, "1:1: more than 100000 fields");
    text[k - 3] = ']'; /* one element fewer */
    const struct pbtxt_value *root = parse_lim(text, k - 2, NULL);
    assert_int_equal(root->len, PBTXT_DEFAULT_MAX_NODES);
    free(text);
}

static void test_string_limit(void **state)
{
    (void)state;
    struct pbtxt_limits lim = {.max_string = 4};
    parse_lim("a: 'abcd'", 9, &lim);
    parse_lim("a: '\\x41\\x42\\x43\\x44'", 21, &lim); /* decoded bytes count */
    reject_lim("a: 'abcde'", 10, &lim, "1:4: string longer than 4 bytes");
    reject_lim("x: 1\na: 'ab' \"cde\"", 18, &lim, "2:4: string longer than 4 bytes");
}

static void test_arena_ceiling(void **state)
{
    (void)state;
    struct arena small;
    arena_init(&small, 256, 512);
    struct pbtxt_value *root;
    struct error err;
    const char *text = "a: 1 b: 2 c: 3 d: 4 e: 5 f: 6 g: 7 h: 8 i: 9 j: 10";
    assert_int_equal(pbtxt_parse(&small, text, strlen(text), NULL, &root, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "input too large"));
    arena_free(&small);
}

/* Every allocation failing in turn: an error, never a crash or a leak. */
static void test_heap_failure(void **state)
{
    (void)state;
    const char *text = "name: 'x' input [{ name: 'a' dims: [1, 2] }] m { n { o: 'p' 'q' } }";
    bool succeeded = false;
    for (long n = 0; n < 64 && !succeeded; n++) {
        struct arena a;
        arena_init(&a, 64, 1u << 20);
        struct pbtxt_value *root = NULL;
        struct error err;
        mem_fail_after(n);
        int rc = pbtxt_parse(&a, text, strlen(text), NULL, &root, &err);
        mem_fail_reset();
        if (rc == 0) {
            succeeded = true;
            assert_int_equal(root->len, 3);
        } else {
            assert_int_equal(err.status, 500);
            assert_non_null(strstr(err.msg, "out of memory"));
        }
        arena_free(&a);
    }
    assert_true(succeeded);
}

/* All the tree's memory is the arena's: nothing else is allocated. */
static void test_only_arena_memory(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 1u << 16, 1u << 20);
    assert_non_null(arena_alloc(&a, 1)); /* the first chunk */
    uint64_t before = mem_alloc_count();
    struct pbtxt_value *root;
    struct error err;
    const char *text = "a: 1.5e3 b: 'x' c { d: [1, 2] } e: 1e400";
    assert_int_equal(pbtxt_parse(&a, text, strlen(text), NULL, &root, &err), 0);
    double d;
    assert_int_equal(pbtxt_to_double(&field_at(root, 0)->value, &d), 0);
    assert_int_equal(mem_alloc_count(), before);
    arena_free(&a);
}

/* ---- conversions ------------------------------------------------------ */

static void test_to_i64(void **state)
{
    (void)state;
    assert_int_equal(i64_of("a: 0"), 0);
    assert_int_equal(i64_of("a: -12"), -12);
    assert_int_equal(i64_of("a: 0x7fffFFFFffffFFFF"), INT64_MAX);
    assert_true(i64_of("a: -9223372036854775808") == INT64_MIN);
    assert_int_equal(i64_of("a: 9223372036854775807"), INT64_MAX);
    assert_int_equal(i64_of("a: 017"), 15);
    assert_int_equal(i64_of("a: -0x10"), -16);
    assert_int_equal(i64_rc("a: 9223372036854775808"), -ERANGE);
    assert_int_equal(i64_rc("a: -9223372036854775809"), -ERANGE);
    assert_int_equal(i64_rc("a: 99999999999999999999999"), -ERANGE);
    assert_int_equal(i64_rc("a: 1.0"), -EINVAL);
    assert_int_equal(i64_rc("a: '1'"), -EINVAL);
    assert_int_equal(i64_rc("a: x"), -EINVAL);
    assert_int_equal(i64_rc("a {}"), -EINVAL);
}

static void test_to_u64(void **state)
{
    (void)state;
    uint64_t x = 0;
    assert_int_equal(u64_rc("a: 18446744073709551615", &x), 0);
    assert_true(x == UINT64_MAX);
    assert_int_equal(u64_rc("a: 0xFFFFFFFFFFFFFFFF", &x), 0);
    assert_true(x == UINT64_MAX);
    assert_int_equal(u64_rc("a: -0", &x), 0);
    assert_true(x == 0);
    assert_int_equal(u64_rc("a: 18446744073709551616", &x), -ERANGE);
    assert_int_equal(u64_rc("a: -1", &x), -ERANGE);
    assert_int_equal(u64_rc("a: 1e3", &x), -EINVAL);
}

static void test_to_double(void **state)
{
    (void)state;
    double x = 0;
    assert_int_equal(double_rc("a: 1.5", &x), 0);
    assert_true(x == 1.5);
    assert_int_equal(double_rc("a: 2.5f", &x), 0);
    assert_true(x == 2.5);
    assert_int_equal(double_rc("a: 7F", &x), 0);
    assert_true(x == 7.0);
    assert_int_equal(double_rc("a: -3", &x), 0);
    assert_true(x == -3.0);
    assert_int_equal(double_rc("a: 0x10", &x), 0);
    assert_true(x == 16.0);
    assert_int_equal(double_rc("a: 1e-3", &x), 0);
    assert_true(x == 1e-3);
    assert_int_equal(double_rc("a: inf", &x), 0);
    assert_true(isinf(x) && x > 0);
    assert_int_equal(double_rc("a: -Infinity", &x), 0);
    assert_true(isinf(x) && x < 0);
    assert_int_equal(double_rc("a: nan", &x), 0);
    assert_true(isnan(x));
    assert_int_equal(double_rc("a: 1e400", &x), -ERANGE);
    assert_int_equal(double_rc("a: 1e-400", &x), 0); /* underflow to 0 is fine */
    assert_int_equal(double_rc("a: 99999999999999999999999", &x), -ERANGE);
    assert_int_equal(double_rc("a: infinite", &x), -EINVAL);
    assert_int_equal(double_rc("a: '1'", &x), -EINVAL);
    /* a long literal */
    char text[300] = "a: 0.";
    memset(text + 5, '1', 250);
    text[255] = '\0';
    assert_int_equal(double_rc(text, &x), 0);
    assert_true(fabs(x - 1.0 / 9) < 1e-15);
}

static void test_to_bool(void **state)
{
    (void)state;
    bool x = false;
    const char *yes[] = {"a: true", "a: True", "a: t", "a: 1"};
    const char *no[] = {"a: false", "a: False", "a: f", "a: 0"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(bool_rc(yes[i], &x), 0);
        assert_true(x);
        assert_int_equal(bool_rc(no[i], &x), 0);
        assert_false(x);
    }
    assert_int_equal(bool_rc("a: TRUE", &x), -EINVAL);
    assert_int_equal(bool_rc("a: 2", &x), -EINVAL);
    assert_int_equal(bool_rc("a: 'true'", &x), -EINVAL);
    assert_int_equal(bool_rc("a: 1.0", &x), -EINVAL);
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(pbtxt_kind_name(PBTXT_MESSAGE), "message");
    assert_string_equal(pbtxt_kind_name(PBTXT_INT), "integer");
    assert_string_equal(pbtxt_kind_name(PBTXT_FLOAT), "float");
    assert_string_equal(pbtxt_kind_name(PBTXT_IDENT), "identifier");
    assert_string_equal(pbtxt_kind_name(PBTXT_STRING), "string");
}

/* A Triton config as it appears in the wild parses into the expected tree. */
static void test_triton_config_shape(void **state)
{
    (void)state;
    const char *text = "name: \"simple\"\n"
                       "platform: \"onnxruntime_onnx\"\n"
                       "max_batch_size: 8\n"
                       "input [\n"
                       "  {\n"
                       "    name: \"INPUT0\"\n"
                       "    data_type: TYPE_INT32\n"
                       "    dims: [ 16 ]\n"
                       "  },\n"
                       "  {\n"
                       "    name: \"INPUT1\"\n"
                       "    data_type: TYPE_INT32\n"
                       "    dims: [ 16 ]\n"
                       "  }\n"
                       "]\n"
                       "instance_group { kind: KIND_CPU count: 2 }\n"
                       "parameters { key: \"k\" value: { string_value: \"v\" } }\n";
    const struct pbtxt_value *root = parse(text);
    assert_int_equal(root->len, 7);
    const struct pbtxt_field *in1 = field_at(root, 4);
    assert_string_equal(in1->name, "input");
    assert_int_equal(in1->line, 4);
    assert_int_equal(in1->value.line, 10);
    assert_int_equal(in1->value.col, 3);
    const struct pbtxt_field *dims = pbtxt_find(&in1->value, "dims");
    assert_int_equal(dims->line, 13);
    assert_int_equal(dims->col, 5);
    assert_int_equal(dims->value.col, 13);
    assert_scalar(pbtxt_find(&in1->value, "data_type"), "data_type", PBTXT_IDENT, "TYPE_INT32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_empty_and_comments),
        TEST(test_integers),
        TEST(test_floats),
        TEST(test_identifiers),
        TEST(test_strings),
        TEST(test_string_concatenation_across_lines),
        TEST(test_string_escapes),
        TEST(test_messages),
        TEST(test_lists),
        TEST(test_repeated_by_repetition),
        TEST(test_separators),
        TEST(test_tree_is_independent_of_text),
        TEST(test_no_nul_termination_needed),
        TEST(test_reject_structure),
        TEST(test_reject_lists),
        TEST(test_reject_strings),
        TEST(test_reject_numbers),
        TEST(test_depth_limit),
        TEST(test_deep_input_does_not_crash),
        TEST(test_node_limit),
        TEST(test_string_limit),
        TEST(test_arena_ceiling),
        TEST(test_heap_failure),
        TEST(test_only_arena_memory),
        TEST(test_to_i64),
        TEST(test_to_u64),
        TEST(test_to_double),
        TEST(test_to_bool),
        TEST(test_kind_names),
        TEST(test_triton_config_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
