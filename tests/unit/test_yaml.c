/* Unit tests for base/yaml: YAML → JSON value tree, scalar resolution, limits and errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/yaml.h"

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
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static const struct json_value *parse(const char *text)
{
    struct json_value *v = NULL;
    struct error err;
    error_clear(&err);
    int rc = yaml_parse(&arena, text, strlen(text), &v, &err);
    if (rc != 0)
        print_error("yaml_parse of \"%s\" failed: %s\n", text, err.msg);
    assert_int_equal(rc, 0);
    return v;
}

/* Parses text, which must fail with status; returns the message. */
static const char *parse_fail_n(const char *text, size_t len, int status)
{
    static struct error err;
    error_clear(&err);
    struct json_value *v = NULL;
    assert_int_equal(yaml_parse(&arena, text, len, &v, &err), -1);
    assert_int_equal(err.status, status);
    return err.msg;
}

static const char *parse_fail(const char *text)
{
    return parse_fail_n(text, strlen(text), 400);
}

/* The tree of a one-key mapping `k: <scalar>`. */
static const struct json_value *scalar(const char *text)
{
    char doc[256];
    snprintf(doc, sizeof doc, "k: %s\n", text);
    const struct json_value *v = parse(doc);
    assert_int_equal(v->type, JSON_OBJECT);
    assert_int_equal(v->len, 1);
    return &v->u.members[0].value;
}

static void assert_number(const char *text, const char *json)
{
    const struct json_value *v = scalar(text);
    if (v->type != JSON_NUMBER)
        print_error("'%s' is not a number\n", text);
    assert_int_equal(v->type, JSON_NUMBER);
    assert_string_equal(v->u.num, json);
    assert_int_equal(v->len, strlen(json));
    double d;
    assert_int_equal(json_num_f64(v, &d), 0);
}

static void assert_string(const char *text, const char *str)
{
    const struct json_value *v = scalar(text);
    if (v->type != JSON_STRING)
        print_error("'%s' is not a string (type %d)\n", text, v->type);
    assert_int_equal(v->type, JSON_STRING);
    assert_string_equal(v->u.str, str);
}

static void assert_type(const char *text, enum json_type type)
{
    assert_int_equal(scalar(text)->type, type);
}

/* ---- the tree ---------------------------------------------------------- */

static void test_block_tree(void **state)
{
    (void)state;
    const struct json_value *v = parse("# settings\n"
                                       "http-port: 8000\n"
                                       "load-model:\n"
                                       "  - a\n"
                                       "  - b\n"
                                       "auth:\n"
                                       "  tenants:\n"
                                       "    - name: team-a\n"
                                       "      keys: [k1, 'k2']\n"
                                       "empty: {}\n");
    assert_int_equal(v->type, JSON_OBJECT);
    assert_int_equal(v->len, 4);
    /* members in source order */
    assert_string_equal(v->u.members[0].key, "http-port");
    assert_string_equal(v->u.members[1].key, "load-model");
    assert_string_equal(v->u.members[2].key, "auth");
    assert_string_equal(v->u.members[3].key, "empty");
    uint64_t port;
    assert_int_equal(json_num_u64(json_get(v, "http-port"), &port), 0);
    assert_int_equal(port, 8000);
    const struct json_value *models = json_get(v, "load-model");
    assert_int_equal(models->type, JSON_ARRAY);
    assert_int_equal(models->len, 2);
    assert_string_equal(models->u.items[1].u.str, "b");
    const struct json_value *tenants = json_get(json_get(v, "auth"), "tenants");
    assert_int_equal(tenants->type, JSON_ARRAY);
    const struct json_value *keys = json_get(&tenants->u.items[0], "keys");
    assert_int_equal(keys->len, 2);
    assert_string_equal(keys->u.items[0].u.str, "k1");
    assert_string_equal(json_get(&tenants->u.items[0], "name")->u.str, "team-a");
    assert_int_equal(json_get(v, "empty")->type, JSON_OBJECT);
    assert_int_equal(json_get(v, "empty")->len, 0);
}

/* JSON text is YAML and gives the tree json_parse gives. */
static void test_json_text(void **state)
{
    (void)state;
    const char *text = "{\"a\": [1, -2.5, 1e3, true, false, null, \"s\\u00e9\", []],"
                       " \"b\": {\"c\": {}}, \"d\": \"\"}";
    const struct json_value *y = parse(text);
    struct json_value *j = NULL;
    const char *msg;
    size_t off;
    assert_int_equal(json_parse(&arena, text, strlen(text), NULL, &j, &msg, &off), 0);
    /* Same shape, types and texts, element by element. */
    const struct json_value *ya = json_get(y, "a"), *ja = json_get(j, "a");
    assert_int_equal(ya->len, ja->len);
    for (uint32_t i = 0; i < ya->len; i++) {
        assert_int_equal(ya->u.items[i].type, ja->u.items[i].type);
        if (ja->u.items[i].type == JSON_NUMBER)
            assert_string_equal(ya->u.items[i].u.num, ja->u.items[i].u.num);
        if (ja->u.items[i].type == JSON_STRING)
            assert_string_equal(ya->u.items[i].u.str, ja->u.items[i].u.str);
    }
    assert_int_equal(json_get(json_get(y, "b"), "c")->type, JSON_OBJECT);
    assert_int_equal(json_get(y, "d")->type, JSON_STRING);
    assert_int_equal(json_get(y, "d")->len, 0);
}

static void test_empty_documents(void **state)
{
    (void)state;
    assert_int_equal(parse("")->type, JSON_NULL);
    assert_int_equal(parse("# only a comment\n\n")->type, JSON_NULL);
    assert_int_equal(parse("---\n")->type, JSON_NULL);
    assert_int_equal(parse("---\n...\n")->type, JSON_NULL);
    assert_int_equal(parse("42")->type, JSON_NUMBER);
}

/* ---- scalars ----------------------------------------------------------- */

static void test_nulls_and_booleans(void **state)
{
    (void)state;
    assert_type("", JSON_NULL);
    assert_type("~", JSON_NULL);
    assert_type("null", JSON_NULL);
    assert_type("Null", JSON_NULL);
    assert_type("NULL", JSON_NULL);
    assert_type("true", JSON_TRUE);
    assert_type("True", JSON_TRUE);
    assert_type("TRUE", JSON_TRUE);
    assert_type("false", JSON_FALSE);
    assert_type("False", JSON_FALSE);
    assert_type("FALSE", JSON_FALSE);
    /* Only those: YAML 1.1's other booleans are strings. */
    assert_string("yes", "yes");
    assert_string("no", "no");
    assert_string("on", "on");
    assert_string("off", "off");
    assert_string("tRUE", "tRUE");
    assert_string("nULL", "nULL");
    /* Quoted: always strings. */
    assert_string("'true'", "true");
    assert_string("\"null\"", "null");
    assert_string("''", "");
}

static void test_numbers(void **state)
{
    (void)state;
    assert_number("0", "0");
    assert_number("42", "42");
    assert_number("-3", "-3");
    assert_number("+5", "5");
    assert_number("-0", "-0");
    assert_number("2.5", "2.5");
    assert_number("1.", "1.0");
    assert_number(".5", "0.5");
    assert_number("-.5e3", "-0.5e3");
    assert_number("+1.5E-3", "1.5E-3");
    assert_number("1e5", "1e5");
    assert_number("0.25", "0.25");
    uint64_t u;
    assert_int_equal(json_num_u64(scalar("+5"), &u), 0);
    assert_int_equal(u, 5);
    int64_t i;
    assert_int_equal(json_num_i64(scalar("-3"), &i), 0);
    assert_int_equal(i, -3);
    assert_int_equal(json_num_i64(scalar("2.5"), &i), -EINVAL);
    /* Other YAML 1.1 forms stay strings (a module expecting a number refuses them). */
    assert_string("007", "007");
    assert_string("0x1f", "0x1f");
    assert_string("0o17", "0o17");
    assert_string("1_000", "1_000");
    assert_string("1:30", "1:30");
    assert_string(".inf", ".inf");
    assert_string("-.inf", "-.inf");
    assert_string(".nan", ".nan");
    assert_string("1e", "1e");
    assert_string("1e+", "1e+");
    assert_string(".", ".");
    assert_string("-1-", "-1-");
    assert_string("+", "+");
    assert_string("1.2.3", "1.2.3");
    assert_string("127.0.0.1", "127.0.0.1");
    assert_string("'42'", "42");
    assert_string("\"-3\"", "-3");
}

static void test_strings(void **state)
{
    (void)state;
    assert_string("hello world", "hello world");
    assert_string("\"tab\\there\"", "tab\there");
    assert_string("'it''s'", "it's");
    assert_string("\"caf\\u00e9\"", "caf\xc3\xa9");
    /* A NUL from an escape is kept, with the length. */
    const struct json_value *v = scalar("\"a\\0b\"");
    assert_int_equal(v->type, JSON_STRING);
    assert_int_equal(v->len, 3);
    assert_memory_equal(v->u.str, "a\0b", 3);
    /* Block scalars. */
    v = parse("k: |\n  line 1\n  line 2\n");
    assert_string_equal(json_get(v, "k")->u.str, "line 1\nline 2\n");
    v = parse("k: >-\n  folded\n  text\n");
    assert_string_equal(json_get(v, "k")->u.str, "folded text");
    /* Keys are text, whatever they look like. */
    v = parse("1: a\ntrue: b\n~: c\n");
    assert_string_equal(v->u.members[0].key, "1");
    assert_string_equal(v->u.members[1].key, "true");
    assert_string_equal(v->u.members[2].key, "~");
}

/* ---- refusals ---------------------------------------------------------- */

static void assert_contains(const char *msg, const char *part)
{
    if (!strstr(msg, part))
        print_error("'%s' does not contain '%s'\n", msg, part);
    assert_non_null(strstr(msg, part));
}

static void test_refuse_anchors_aliases_tags(void **state)
{
    (void)state;
    assert_string_equal(parse_fail("a: &x 1\nb: *x\n"),
                        "line 1, column 4: anchors (&name) are not supported");
    assert_contains(parse_fail("a: &x [1]\n"), "anchors");
    assert_contains(parse_fail("a: &x {b: 1}\n"), "anchors");
    /* The billion laughs. */
    assert_contains(parse_fail("a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a]\nc: [*b,*b]\n"), "anchors");
    assert_string_equal(parse_fail("a: !!str 1\n"),
                        "line 1, column 4: tags (!name) are not supported");
    assert_contains(parse_fail("a: !custom {b: 1}\n"), "tags");
    assert_contains(parse_fail("a: !!seq [1]\n"), "tags");
    assert_contains(parse_fail("--- !!map\na: 1\n"), "tags");
}

static void test_refuse_second_document(void **state)
{
    (void)state;
    assert_string_equal(parse_fail("a: 1\n---\nb: 2\n"),
                        "line 2, column 1: a second document (only one is allowed)");
    assert_contains(parse_fail("---\na: 1\n...\n---\n"), "a second document");
}

static void test_refuse_duplicate_and_complex_keys(void **state)
{
    (void)state;
    assert_string_equal(parse_fail("a: 1\nb: 2\na: 3\n"),
                        "line 3, column 1: duplicate mapping key (first at line 1)");
    assert_contains(parse_fail("x:\n  s3cret: 1\n  y: 2\n  s3cret: 3\n"),
                    "line 4, column 3: duplicate mapping key");
    /* Keys differing only after a shared prefix or in length are distinct. */
    const struct json_value *v = parse("ab: 1\na: 2\nabc: 3\n'a\\0': 4\n");
    assert_int_equal(v->len, 4);
    /* Duplicates in flow mappings, in a sequence's mappings. */
    assert_contains(parse_fail("{a: 1, a: 2}"), "duplicate mapping key");
    assert_contains(parse_fail("- {x: 1}\n- {y: 1, y: 2}\n"), "duplicate mapping key");
    assert_string_equal(parse_fail("? [a, b]\n: 1\n"),
                        "line 1, column 3: a mapping key must be a scalar, not a sequence or a "
                        "mapping");
    assert_contains(parse_fail("{{a: 1}: 2}"), "a mapping key must be a scalar");
}

/* No message repeats the document's text: keys and values may be secrets. */
static void test_errors_never_echo_values(void **state)
{
    (void)state;
    const char *docs[] = {
        "auth:\n  keys: [\"sha256:SECRETVALUE\n",
        "auth: {keys: [SECRETVALUE}\n",
        "auth:\n  SECRETVALUE: 1\n  SECRETVALUE: 2\n",
        "auth: &SECRETVALUE 1\n",
        "auth: !SECRETVALUE 1\n",
        "auth: *SECRETVALUE\n",
        "auth:\n  - SECRETVALUE\n  k: v\n",
        "auth: 'SECRETVALUE\n",
        "auth: SECRETVALUE\n\tx: 1\n",
        "%TAG !s! tag:x,2000:\n--- !s!SECRETVALUE a\n",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        const char *msg = parse_fail(docs[i]);
        if (strstr(msg, "SECRETVALUE"))
            print_error("message of document %zu echoes it: %s\n", i, msg);
        assert_null(strstr(msg, "SECRETVALUE"));
        assert_true(strncmp(msg, "line ", 5) == 0 || strncmp(msg, "byte ", 5) == 0);
    }
}

static void test_syntax_error_position(void **state)
{
    (void)state;
    const char *msg = parse_fail("a: 1\nb: [1, 2\nc: 3\n");
    assert_contains(msg, "line ");
    msg = parse_fail("a: 1\n  b: 2\n");
    assert_string_equal(msg, "line 2, column 4: mapping values are not allowed in this context");
    /* Invalid UTF-8: the reader's error, by byte offset. */
    msg = parse_fail_n("a: \xff\n", 5, 400);
    assert_contains(msg, "byte 3: ");
}

/* ---- limits ------------------------------------------------------------ */

static void test_depth_limit(void **state)
{
    (void)state;
    char text[128];
    /* 32 levels parse, 33 do not. */
    memset(text, '[', 32);
    memset(text + 32, ']', 32);
    text[64] = '\0';
    const struct json_value *v = parse(text);
    for (int i = 0; i < 31; i++)
        v = &v->u.items[0];
    assert_int_equal(v->type, JSON_ARRAY);
    assert_int_equal(v->len, 0);
    memset(text, '[', 33);
    memset(text + 33, ']', 33);
    text[66] = '\0';
    assert_string_equal(parse_fail(text), "line 1, column 33: nested deeper than 32 levels");
    /* Block mappings count the same. */
    char block[2048] = "";
    size_t n = 0;
    for (int i = 0; i < 33; i++)
        n += (size_t)snprintf(block + n, sizeof block - n, "%*sk:\n", 2 * i, "");
    snprintf(block + n, sizeof block - n, "%*sk: 1\n", 66, "");
    assert_contains(parse_fail(block), "nested deeper than 32 levels");
}

static void test_node_limit(void **state)
{
    (void)state;
    /* [0,0,...]: the sequence and its items are nodes. */
    size_t items = YAML_MAX_NODES - 1;
    char *text = malloc(2 * items + 8);
    assert_non_null(text);
    size_t n = 0;
    text[n++] = '[';
    for (size_t i = 0; i < items; i++) {
        text[n++] = '0';
        text[n++] = ',';
    }
    text[n - 1] = ']';
    text[n] = '\0';
    const struct json_value *v = parse(text);
    assert_int_equal(v->len, items);
    /* One more. */
    text[n - 1] = ',';
    text[n++] = '0';
    text[n++] = ']';
    text[n] = '\0';
    assert_contains(parse_fail_n(text, n, 413), "more than 100000 nodes");
    free(text);
    /* Keys count too. */
    text = malloc(12 * (size_t)YAML_MAX_NODES);
    assert_non_null(text);
    n = 0;
    for (size_t i = 0; i < YAML_MAX_NODES / 2 + 1; i++)
        n += (size_t)sprintf(text + n, "k%zu: 1\n", i);
    assert_contains(parse_fail_n(text, n, 413), "more than 100000 nodes");
    free(text);
}

static void test_size_limit(void **state)
{
    (void)state;
    size_t len = YAML_MAX_TEXT + 1;
    char *text = malloc(len);
    assert_non_null(text);
    memset(text, ' ', len);
    assert_string_equal(parse_fail_n(text, len, 413), "larger than 1048576 bytes");
    /* Exactly the limit is fine. */
    text[0] = '1';
    const struct json_value *v = NULL;
    struct error err;
    assert_int_equal(yaml_parse(&arena, text, len - 1, (struct json_value **)&v, &err), 0);
    assert_int_equal(v->type, JSON_NUMBER);
    free(text);
}

static void test_arena_ceiling(void **state)
{
    (void)state;
    struct arena small;
    arena_init(&small, 1024, 4096);
    char text[8192];
    size_t n = 0;
    for (int i = 0; i < 400; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "key%d: value\n", i);
    struct json_value *v = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(yaml_parse(&small, text, n, &v, &err), -1);
    assert_int_equal(err.status, 413);
    arena_free(&small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_block_tree),
        TEST(test_json_text),
        TEST(test_empty_documents),
        TEST(test_nulls_and_booleans),
        TEST(test_numbers),
        TEST(test_strings),
        TEST(test_refuse_anchors_aliases_tags),
        TEST(test_refuse_second_document),
        TEST(test_refuse_duplicate_and_complex_keys),
        TEST(test_errors_never_echo_values),
        TEST(test_syntax_error_position),
        TEST(test_depth_limit),
        TEST(test_node_limit),
        TEST(test_size_limit),
        TEST(test_arena_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
