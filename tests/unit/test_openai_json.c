/*
 * Unit tests for api/openai_json: the request parser of both endpoints
 * (every field, the defaults, null as absent, every refusal with its
 * status, param and code), and the writers (error, completion, chunk,
 * usage chunk), whose bodies are parsed back and checked field by field.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/openai/json.h"
#include "base/json.h"

static struct arena arena;
static struct openai_request req;
static struct openai_error err;

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

/* ---- helpers ------------------------------------------------------------- */

static int parse(enum openai_kind kind, const char *body)
{
    memset(&err, 0, sizeof err);
    return openai_request_parse(&arena, kind, body, strlen(body), &req, &err);
}

static void expect_ok(enum openai_kind kind, const char *body)
{
    int rc = parse(kind, body);
    if (rc != 0)
        print_error("%s: %d %s (param %s)\n", body, err.status, err.message,
                    err.param ? err.param : "null");
    assert_int_equal(rc, 0);
}

/* A refusal: status, param (NULL = null), code and, when msg is not NULL,
 * the exact message. */
static void expect_err(enum openai_kind kind, const char *body, int status, const char *param,
                       const char *code, const char *msg)
{
    int rc = parse(kind, body);
    if (rc != -1 || err.status != status ||
        (param ? !err.param || strcmp(err.param, param) != 0 : err.param != NULL) ||
        strcmp(err.code ? err.code : "", code ? code : "") != 0 ||
        (msg && strcmp(err.message, msg) != 0))
        print_error("%s: rc %d, %d %s/%s \"%s\"; want %d %s/%s \"%s\"\n", body, rc, err.status,
                    err.param ? err.param : "null", err.code ? err.code : "null", err.message,
                    status, param ? param : "null", code ? code : "null", msg ? msg : "");
    assert_int_equal(rc, -1);
    assert_int_equal(err.status, status);
    assert_string_equal(err.type, "invalid_request_error");
    if (param)
        assert_string_equal(err.param, param);
    else
        assert_null(err.param);
    if (code)
        assert_string_equal(err.code, code);
    else
        assert_null(err.code);
    if (msg)
        assert_string_equal(err.message, msg);
}

#define CMPL OPENAI_COMPLETIONS
#define CHAT OPENAI_CHAT

static void expect_cmpl_err(const char *fields, const char *param, const char *code,
                            const char *msg)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"model\": \"kjv\", \"prompt\": \"x\"%s}", fields);
    expect_err(CMPL, body, 400, param, code, msg);
}

static void expect_chat_err(const char *fields, const char *param, const char *code,
                            const char *msg)
{
    char body[4096];
    snprintf(body, sizeof body,
             "{\"model\": \"kjv\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]%s}",
             fields);
    expect_err(CHAT, body, 400, param, code, msg);
}

static void expect_cmpl_ok(const char *fields)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"model\": \"kjv\", \"prompt\": \"x\"%s}", fields);
    expect_ok(CMPL, body);
}

static void expect_chat_ok(const char *fields)
{
    char body[4096];
    snprintf(body, sizeof body,
             "{\"model\": \"kjv\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]%s}",
             fields);
    expect_ok(CHAT, body);
}

static void assert_prompt(const char *want, size_t want_len)
{
    assert_int_equal(req.prompt_len, want_len);
    assert_memory_equal(req.prompt, want, want_len);
}

static void assert_defaults(void)
{
    assert_int_equal(req.max_tokens, -1);
    assert_true(isnan(req.temperature));
    assert_true(isnan(req.top_p));
    assert_int_equal(req.top_k, -1);
    assert_false(req.has_seed);
    assert_int_equal(req.nstop, 0);
    assert_false(req.stream);
    assert_false(req.include_usage);
}

/* A body written by the writers, parsed back (it must be valid JSON). */
static const struct json_value *parse_back(struct buf *b)
{
    assert_int_equal(b->err, 0);
    struct json_value *root;
    const char *msg = NULL;
    size_t off = 0;
    if (json_parse(&arena, b->data, b->len, NULL, &root, &msg, &off) != ST_OK)
        print_error("%.*s\n^ %s at %zu\n", (int)b->len, b->data, msg, off);
    assert_int_equal(json_parse(&arena, b->data, b->len, NULL, &root, &msg, &off), ST_OK);
    assert_int_equal(root->type, JSON_OBJECT);
    return root;
}

static const struct json_value *get(const struct json_value *obj, const char *key,
                                    enum json_type type)
{
    const struct json_value *v = json_get(obj, key);
    if (!v || v->type != type)
        print_error("field '%s': %s\n", key, v ? "wrong type" : "absent");
    assert_non_null(v);
    assert_int_equal(v->type, type);
    return v;
}

static void assert_str(const struct json_value *obj, const char *key, const char *want,
                       size_t want_len)
{
    const struct json_value *v = get(obj, key, JSON_STRING);
    assert_int_equal(v->len, want_len);
    assert_memory_equal(v->u.str, want, want_len);
}

static void assert_cstr(const struct json_value *obj, const char *key, const char *want)
{
    assert_str(obj, key, want, strlen(want));
}

static void assert_uint(const struct json_value *obj, const char *key, uint64_t want)
{
    uint64_t x;
    assert_int_equal(json_num_u64(get(obj, key, JSON_NUMBER), &x), 0);
    assert_int_equal(x, want);
}

static void assert_members(const struct json_value *obj, uint32_t n)
{
    assert_int_equal(obj->type, JSON_OBJECT);
    assert_int_equal(obj->len, n);
}

/* choices[0] of a body (the only one). */
static const struct json_value *choice0(const struct json_value *root)
{
    const struct json_value *choices = get(root, "choices", JSON_ARRAY);
    assert_int_equal(choices->len, 1);
    const struct json_value *c = &choices->u.items[0];
    assert_int_equal(c->type, JSON_OBJECT);
    assert_uint(c, "index", 0);
    get(c, "logprobs", JSON_NULL);
    return c;
}

static void assert_usage(const struct json_value *root, uint64_t prompt, uint64_t completion)
{
    const struct json_value *u = get(root, "usage", JSON_OBJECT);
    assert_members(u, 3);
    assert_uint(u, "prompt_tokens", prompt);
    assert_uint(u, "completion_tokens", completion);
    assert_uint(u, "total_tokens", prompt + completion);
}

static void assert_head(const struct json_value *root, const char *object)
{
    assert_cstr(root, "id", "cmpl-7");
    assert_cstr(root, "object", object);
    assert_uint(root, "created", 1700000000);
    assert_cstr(root, "model", "kjv");
}

/* ---- requests: completions ------------------------------------------------ */

static void test_completions_minimal(void **state)
{
    (void)state;
    expect_ok(CMPL, "{\"model\": \"kjv\", \"prompt\": \"In the beginning\"}");
    assert_int_equal(req.kind, CMPL);
    assert_string_equal(req.model, "kjv");
    assert_prompt("In the beginning", 16);
    assert_defaults();

    expect_ok(CMPL, " {\"prompt\": [\"And God said\"], \"model\": \"kjv\"} ");
    assert_prompt("And God said", 12);
    expect_ok(CMPL, "{\"model\": \"kjv\", \"prompt\": \"\"}");
    assert_prompt("", 0);
    expect_ok(CMPL, "{\"model\": \"kjv\", \"prompt\": \"a\\u0000b\\n\\u00e9\"}");
    assert_prompt("a\0b\n\xc3\xa9", 6);
}

static void test_completions_all_fields(void **state)
{
    (void)state;
    expect_ok(CMPL, "{\"model\": \"kjv\", \"prompt\": \"p\", \"max_tokens\": 16,"
                    " \"temperature\": 0.7, \"top_p\": 0.9, \"top_k\": 40, \"seed\": 42,"
                    " \"stop\": [\"\\n\", \"Amen\"], \"stream\": true,"
                    " \"stream_options\": {\"include_usage\": true, \"include_obfuscation\": 1},"
                    " \"n\": 1, \"best_of\": 1, \"echo\": false, \"logprobs\": null,"
                    " \"suffix\": \"\", \"presence_penalty\": 0, \"frequency_penalty\": 0.0,"
                    " \"logit_bias\": {}, \"user\": \"u\", \"metadata\": {\"a\": [1, {}]},"
                    " \"max_completion_tokens\": \"ignored here\", \"tools\": 5}");
    assert_int_equal(req.max_tokens, 16);
    assert_true(req.temperature == 0.7f);
    assert_true(req.top_p == 0.9f);
    assert_int_equal(req.top_k, 40);
    assert_true(req.has_seed);
    assert_int_equal(req.seed, 42);
    assert_int_equal(req.nstop, 2);
    assert_int_equal(req.stop_len[0], 1);
    assert_memory_equal(req.stop[0], "\n", 1);
    assert_int_equal(req.stop_len[1], 4);
    assert_memory_equal(req.stop[1], "Amen", 4);
    assert_true(req.stream);
    assert_true(req.include_usage);
}

static void test_null_is_absent(void **state)
{
    (void)state;
    const char *nulls = ", \"max_tokens\": null, \"temperature\": null, \"top_p\": null,"
                        " \"top_k\": null, \"seed\": null, \"stop\": null, \"stream\": null,"
                        " \"stream_options\": null, \"n\": null, \"presence_penalty\": null,"
                        " \"frequency_penalty\": null, \"logit_bias\": null, \"logprobs\": null";
    expect_cmpl_ok(nulls);
    assert_defaults();
    char fields[1024];
    snprintf(fields, sizeof fields, "%s, \"best_of\": null, \"echo\": null, \"suffix\": null",
             nulls);
    expect_cmpl_ok(fields);
    assert_defaults();
    snprintf(fields, sizeof fields,
             "%s, \"max_completion_tokens\": null, \"tools\": null, \"functions\": null,"
             " \"response_format\": null",
             nulls);
    expect_chat_ok(fields);
    assert_defaults();
    expect_ok(CHAT, "{\"model\": \"kjv\", \"messages\": [{\"role\": \"user\", \"content\":"
                    " [{\"type\": \"text\", \"text\": \"x\"}]}], \"stream\": true,"
                    " \"stream_options\": {\"include_usage\": null}}");
    assert_true(req.stream);
    assert_false(req.include_usage);
}

static void test_prompt_errors(void **state)
{
    (void)state;
    expect_err(CMPL, "{\"model\": \"kjv\"}", 400, "prompt", "missing_required_parameter",
               "'prompt' is required");
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": null}", 400, "prompt",
               "missing_required_parameter", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": 5}", 400, "prompt", "invalid_type",
               "'prompt' must be a string or an array of one string, not a number");
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": {}}", 400, "prompt", "invalid_type", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": []}", 400, "prompt", "invalid_value", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": [1, 2, 3]}", 400, "prompt",
               "unsupported_value", "'prompt': a prompt of token ids is not supported");
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": [[1, 2]]}", 400, "prompt",
               "unsupported_value", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": [\"a\", \"b\"]}", 400, "prompt",
               "unsupported_value", "'prompt': more than one prompt is not supported");
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": [null]}", 400, "prompt", "invalid_type",
               NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": [true]}", 400, "prompt", "invalid_type",
               NULL);
}

/* A body whose prompt (or message content) is n bytes of 'a'. */
static char *big_body(enum openai_kind kind, size_t n, size_t copies)
{
    size_t cap = copies * (n + 64) + 256;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t len = (size_t)snprintf(body, cap,
                                  kind == CHAT ? "{\"model\": \"kjv\", \"messages\": ["
                                               : "{\"model\": \"kjv\", \"prompt\": ");
    for (size_t c = 0; c < copies; c++) {
        len += (size_t)snprintf(body + len, cap - len, "%s%s", c ? ", " : "",
                                kind == CHAT ? "{\"role\": \"user\", \"content\": \"" : "\"");
        memset(body + len, 'a', n);
        len += n;
        len += (size_t)snprintf(body + len, cap - len, kind == CHAT ? "\"}" : "\"");
    }
    snprintf(body + len, cap - len, kind == CHAT ? "]}" : "}");
    return body;
}

static void test_prompt_limit(void **state)
{
    (void)state;
    char *body = big_body(CMPL, OPENAI_MAX_PROMPT, 1);
    expect_ok(CMPL, body);
    assert_int_equal(req.prompt_len, OPENAI_MAX_PROMPT);
    free(body);
    body = big_body(CMPL, OPENAI_MAX_PROMPT + 1, 1);
    expect_err(CMPL, body, 400, "prompt", "invalid_value",
               "'prompt' is 1048577 bytes long, at most 1048576 are allowed");
    free(body);

    /* chat: two contents and the "\n" between them */
    body = big_body(CHAT, OPENAI_MAX_PROMPT / 2, 2);
    expect_err(CHAT, body, 400, "messages", "invalid_value",
               "the text of 'messages' is over 1048576 bytes long");
    free(body);
    body = big_body(CHAT, OPENAI_MAX_PROMPT / 2 - 1, 2);
    expect_ok(CHAT, body);
    assert_int_equal(req.prompt_len, OPENAI_MAX_PROMPT - 1);
    assert_int_equal(req.prompt[OPENAI_MAX_PROMPT / 2 - 1], '\n');
    free(body);
}

static void test_model(void **state)
{
    (void)state;
    expect_err(CMPL, "{\"prompt\": \"x\"}", 400, "model", "missing_required_parameter",
               "'model' is required");
    expect_err(CHAT, "{\"model\": null, \"messages\": []}", 400, "model",
               "missing_required_parameter", NULL);
    expect_err(CMPL, "{\"model\": 3, \"prompt\": \"x\"}", 400, "model", "invalid_type",
               "'model' must be a string, not a number");
    expect_err(CMPL, "{\"model\": \"\", \"prompt\": \"x\"}", 400, "model", "invalid_value",
               "'model' must be a model name of 1 to 256 bytes");
    expect_err(CMPL, "{\"model\": \"k\\u0000v\", \"prompt\": \"x\"}", 400, "model", "invalid_value",
               NULL);
    char body[600];
    snprintf(body, sizeof body, "{\"model\": \"%0257d\", \"prompt\": \"x\"}", 0);
    expect_err(CMPL, body, 400, "model", "invalid_value", NULL);
    snprintf(body, sizeof body, "{\"model\": \"%0256d\", \"prompt\": \"x\"}", 0);
    expect_ok(CMPL, body);
    assert_int_equal(strlen(req.model), 256);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_err(CMPL, "", 400, NULL, "invalid_json", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\",", 400, NULL, "invalid_json", NULL);
    expect_err(CHAT, "{\"model\": \"kjv\"} x", 400, NULL, "invalid_json", NULL);
    expect_err(CMPL, "{\"model\": \"kjv\", \"prompt\": \"x\", \"temperature\": NaN}", 400, NULL,
               "invalid_json", NULL);
    expect_err(CMPL, "[]", 400, NULL, "invalid_type",
               "the request body must be a JSON object, not an array");
    expect_err(CHAT, "\"x\"", 400, NULL, "invalid_type", NULL);
    expect_err(CHAT, "null", 400, NULL, "invalid_type", NULL);
}

static void test_arena_full(void **state)
{
    (void)state;
    struct arena small;
    arena_init(&small, 1024, 8192);
    char *body = big_body(CMPL, 20000, 1);
    memset(&err, 0, sizeof err);
    assert_int_equal(openai_request_parse(&small, CMPL, body, strlen(body), &req, &err), -1);
    assert_int_equal(err.status, 413);
    assert_string_equal(err.code, "request_too_large");
    free(body);
    arena_free(&small);
}

/* ---- requests: sampling and output fields ---------------------------------- */

static void test_max_tokens(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"max_tokens\": 1");
    assert_int_equal(req.max_tokens, 1);
    expect_cmpl_ok(", \"max_tokens\": 2147483647");
    assert_int_equal(req.max_tokens, INT32_MAX);
    expect_cmpl_err(", \"max_tokens\": 0", "max_tokens", "invalid_value",
                    "'max_tokens' must be between 1 and 2147483647, not 0");
    expect_cmpl_err(", \"max_tokens\": -5", "max_tokens", "invalid_value", NULL);
    expect_cmpl_err(", \"max_tokens\": 2147483648", "max_tokens", "invalid_value", NULL);
    expect_cmpl_err(", \"max_tokens\": 99999999999999999999999", "max_tokens", "invalid_value",
                    NULL);
    expect_cmpl_err(", \"max_tokens\": 1.5", "max_tokens", "invalid_type",
                    "'max_tokens' must be an integer, not 1.5");
    expect_cmpl_err(", \"max_tokens\": \"5\"", "max_tokens", "invalid_type",
                    "'max_tokens' must be an integer, not a string");
    expect_cmpl_err(", \"max_tokens\": [5]", "max_tokens", "invalid_type", NULL);

    expect_chat_ok(", \"max_completion_tokens\": 7");
    assert_int_equal(req.max_tokens, 7);
    expect_chat_ok(", \"max_tokens\": 9");
    assert_int_equal(req.max_tokens, 9);
    expect_chat_ok(", \"max_tokens\": 7, \"max_completion_tokens\": 7");
    assert_int_equal(req.max_tokens, 7);
    expect_chat_err(", \"max_tokens\": 7, \"max_completion_tokens\": 8", "max_tokens",
                    "invalid_value", NULL);
    expect_chat_err(", \"max_completion_tokens\": 0", "max_completion_tokens", "invalid_value",
                    NULL);
    expect_chat_err(", \"max_completion_tokens\": false", "max_completion_tokens", "invalid_type",
                    NULL);
    /* not a completions field: ignored there */
    expect_cmpl_ok(", \"max_completion_tokens\": 0");
    assert_int_equal(req.max_tokens, -1);
}

static void test_temperature_top_p_top_k(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"temperature\": 0");
    assert_true(req.temperature == 0.0f);
    expect_cmpl_ok(", \"temperature\": 2");
    assert_true(req.temperature == 2.0f);
    expect_cmpl_ok(", \"temperature\": 1e-3");
    assert_true(req.temperature == 1e-3f);
    expect_cmpl_err(", \"temperature\": 2.0001", "temperature", "invalid_value",
                    "'temperature' must be between 0 and 2, not 2.0001");
    expect_cmpl_err(", \"temperature\": -0.1", "temperature", "invalid_value", NULL);
    expect_cmpl_err(", \"temperature\": 1e400", "temperature", "invalid_value", NULL);
    expect_cmpl_err(", \"temperature\": \"0.5\"", "temperature", "invalid_type",
                    "'temperature' must be a number, not a string");
    expect_chat_err(", \"temperature\": true", "temperature", "invalid_type", NULL);

    expect_chat_ok(", \"top_p\": 1");
    assert_true(req.top_p == 1.0f);
    expect_chat_ok(", \"top_p\": 1e-30");
    assert_true(req.top_p > 0);
    expect_chat_ok(", \"top_p\": 1e-300");
    assert_true(req.top_p > 0);
    expect_chat_err(", \"top_p\": 0", "top_p", "invalid_value",
                    "'top_p' must be greater than 0 and at most 1, not 0");
    expect_chat_err(", \"top_p\": 1.5", "top_p", "invalid_value", NULL);
    expect_chat_err(", \"top_p\": {}", "top_p", "invalid_type", NULL);

    expect_cmpl_ok(", \"top_k\": 0");
    assert_int_equal(req.top_k, 0);
    expect_cmpl_ok(", \"top_k\": -1");
    assert_int_equal(req.top_k, 0);
    expect_cmpl_ok(", \"top_k\": 50");
    assert_int_equal(req.top_k, 50);
    expect_cmpl_err(", \"top_k\": -2", "top_k", "invalid_value", NULL);
    expect_cmpl_err(", \"top_k\": 4.5", "top_k", "invalid_type", NULL);
    expect_cmpl_err(", \"top_k\": 2147483648", "top_k", "invalid_value", NULL);
}

static void test_seed(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"seed\": 0");
    assert_true(req.has_seed);
    assert_int_equal(req.seed, 0);
    expect_cmpl_ok(", \"seed\": -1");
    assert_int_equal(req.seed, UINT64_MAX);
    expect_cmpl_ok(", \"seed\": -9223372036854775808");
    assert_int_equal(req.seed, (uint64_t)1 << 63);
    expect_cmpl_ok(", \"seed\": 18446744073709551615");
    assert_int_equal(req.seed, UINT64_MAX);
    expect_chat_ok(", \"seed\": 9223372036854775808");
    assert_int_equal(req.seed, (uint64_t)1 << 63);
    expect_cmpl_err(", \"seed\": 18446744073709551616", "seed", "invalid_value", NULL);
    expect_cmpl_err(", \"seed\": -9223372036854775809", "seed", "invalid_value", NULL);
    expect_cmpl_err(", \"seed\": 1.5", "seed", "invalid_type",
                    "'seed' must be an integer, not 1.5");
    expect_chat_err(", \"seed\": \"1\"", "seed", "invalid_type", NULL);
}

static void test_stop(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"stop\": \"\\n\\n\"");
    assert_int_equal(req.nstop, 1);
    assert_int_equal(req.stop_len[0], 2);
    assert_memory_equal(req.stop[0], "\n\n", 2);
    expect_cmpl_ok(", \"stop\": []");
    assert_int_equal(req.nstop, 0);
    expect_chat_ok(", \"stop\": [\"a\", \"b\\u0000\", \"c\", \"d\"]");
    assert_int_equal(req.nstop, 4);
    assert_int_equal(req.stop_len[1], 2);
    assert_memory_equal(req.stop[1], "b\0", 2);
    assert_memory_equal(req.stop[3], "d", 1);

    char fields[256];
    snprintf(fields, sizeof fields, ", \"stop\": \"%064d\"", 0);
    expect_cmpl_ok(fields);
    assert_int_equal(req.stop_len[0], 64);
    snprintf(fields, sizeof fields, ", \"stop\": [\"x\", \"%065d\"]", 0);
    expect_cmpl_err(fields, "stop", "invalid_value",
                    "'stop' sequences must be 1 to 64 bytes long, not 65");
    expect_cmpl_err(", \"stop\": \"\"", "stop", "invalid_value", NULL);
    expect_cmpl_err(", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]", "stop", "invalid_value",
                    "'stop' has 5 sequences, at most 4 are allowed");
    expect_cmpl_err(", \"stop\": 5", "stop", "invalid_type", NULL);
    expect_chat_err(", \"stop\": [\"a\", null]", "stop", "invalid_type", NULL);
    expect_chat_err(", \"stop\": {\"a\": 1}", "stop", "invalid_type", NULL);
}

static void test_stream(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"stream\": true");
    assert_true(req.stream);
    assert_false(req.include_usage);
    expect_chat_ok(", \"stream\": true, \"stream_options\": {\"include_usage\": false}");
    assert_false(req.include_usage);
    expect_chat_ok(", \"stream\": true, \"stream_options\": {}");
    expect_chat_ok(", \"stream\": false, \"stream_options\": null");
    assert_false(req.stream);
    expect_cmpl_err(", \"stream\": \"true\"", "stream", "invalid_type",
                    "'stream' must be a boolean, not a string");
    expect_cmpl_err(", \"stream\": 1", "stream", "invalid_type", NULL);
    expect_cmpl_err(", \"stream_options\": {\"include_usage\": true}", "stream_options",
                    "invalid_value", "'stream_options' is only allowed when 'stream' is true");
    expect_chat_err(", \"stream\": false, \"stream_options\": {}", "stream_options",
                    "invalid_value", NULL);
    expect_chat_err(", \"stream\": true, \"stream_options\": true", "stream_options",
                    "invalid_type", NULL);
    expect_chat_err(", \"stream\": true, \"stream_options\": {\"include_usage\": 1}",
                    "stream_options.include_usage", "invalid_type", NULL);
}

/* ---- requests: refusals ---------------------------------------------------- */

static void test_refusals_both(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        void (*refuse)(const char *, const char *, const char *, const char *) =
            k ? expect_chat_err : expect_cmpl_err;
        void (*ok)(const char *) = k ? expect_chat_ok : expect_cmpl_ok;
        ok(", \"n\": 1");
        refuse(", \"n\": 2", "n", "unsupported_value",
               "'n' must be 1: one completion per request is supported");
        refuse(", \"n\": 0", "n", "unsupported_value", NULL);
        refuse(", \"n\": \"1\"", "n", "invalid_type", NULL);
        ok(", \"presence_penalty\": 0.0, \"frequency_penalty\": -0");
        refuse(", \"presence_penalty\": 0.5", "presence_penalty", "unsupported_value",
               "'presence_penalty': a non-zero penalty is not supported");
        refuse(", \"frequency_penalty\": -1", "frequency_penalty", "unsupported_value", NULL);
        refuse(", \"frequency_penalty\": 3", "frequency_penalty", "invalid_value", NULL);
        refuse(", \"presence_penalty\": \"0\"", "presence_penalty", "invalid_type", NULL);
        refuse(", \"logit_bias\": {\"50256\": -100}", "logit_bias", "unsupported_value", NULL);
        refuse(", \"logit_bias\": []", "logit_bias", "invalid_type", NULL);
    }
}

static void test_refusals_completions(void **state)
{
    (void)state;
    expect_cmpl_ok(", \"best_of\": 1, \"echo\": false, \"suffix\": \"\"");
    expect_cmpl_err(", \"best_of\": 3", "best_of", "unsupported_value", NULL);
    expect_cmpl_err(", \"echo\": true", "echo", "unsupported_value",
                    "'echo': echoing the prompt is not supported");
    expect_cmpl_err(", \"echo\": 1", "echo", "invalid_type", NULL);
    expect_cmpl_err(", \"logprobs\": 0", "logprobs", "unsupported_value", NULL);
    expect_cmpl_err(", \"logprobs\": 5", "logprobs", "unsupported_value", NULL);
    expect_cmpl_err(", \"logprobs\": true", "logprobs", "invalid_type", NULL);
    expect_cmpl_err(", \"suffix\": \"end\"", "suffix", "unsupported_value", NULL);
    expect_cmpl_err(", \"suffix\": 1", "suffix", "invalid_type", NULL);
    /* chat-only fields are unknown here, and ignored */
    expect_cmpl_ok(", \"tools\": [{\"type\": \"function\"}], \"response_format\": 1");
}

static void test_refusals_chat(void **state)
{
    (void)state;
    expect_chat_ok(", \"logprobs\": false, \"tools\": [], \"functions\": [],"
                   " \"response_format\": {\"type\": \"text\"}, \"tool_choice\": \"none\"");
    expect_chat_err(", \"logprobs\": true", "logprobs", "unsupported_value",
                    "'logprobs': returning log probabilities is not supported");
    expect_chat_err(", \"logprobs\": 2", "logprobs", "invalid_type", NULL);
    expect_chat_err(", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]",
                    "tools", "unsupported_value", "'tools': calling tools is not supported");
    expect_chat_err(", \"tools\": {}", "tools", "invalid_type", NULL);
    expect_chat_err(", \"functions\": [{\"name\": \"f\"}]", "functions", "unsupported_value", NULL);
    expect_chat_err(", \"response_format\": {\"type\": \"json_object\"}", "response_format",
                    "unsupported_value",
                    "'response_format': only {\"type\": \"text\"} is supported");
    expect_chat_err(", \"response_format\": {}", "response_format", "unsupported_value", NULL);
    expect_chat_err(", \"response_format\": \"text\"", "response_format", "invalid_type", NULL);
    /* completions-only fields are unknown here, and ignored */
    expect_chat_ok(", \"best_of\": 5, \"echo\": true, \"suffix\": \"s\"");
}

/* ---- requests: chat messages ----------------------------------------------- */

static void test_messages(void **state)
{
    (void)state;
    expect_ok(CHAT, "{\"model\": \"kjv\", \"messages\": ["
                    "{\"role\": \"system\", \"content\": \"You speak as the KJV.\"},"
                    "{\"role\": \"developer\", \"content\": \"\", \"name\": \"d\"},"
                    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"In \"},"
                    " {\"type\": \"text\", \"text\": \"the\"}]},"
                    "{\"role\": \"assistant\", \"content\": \"beginning\", \"refusal\": null}]}");
    assert_int_equal(req.kind, CHAT);
    const char *want = "You speak as the KJV.\n\nIn the\nbeginning";
    assert_prompt(want, strlen(want));
    assert_defaults();

    expect_ok(CHAT, "{\"model\": \"kjv\", \"messages\": [{\"role\": \"user\", \"content\": []}]}");
    assert_prompt("", 0);

    char *body = malloc(64 * 300);
    assert_non_null(body);
    for (uint32_t n = OPENAI_MAX_MESSAGES; n <= OPENAI_MAX_MESSAGES + 1; n++) {
        size_t len = (size_t)sprintf(body, "{\"model\": \"kjv\", \"messages\": [");
        for (uint32_t i = 0; i < n; i++)
            len += (size_t)sprintf(body + len, "%s{\"role\": \"user\", \"content\": \"m\"}",
                                   i ? "," : "");
        strcpy(body + len, "]}");
        if (n == OPENAI_MAX_MESSAGES) {
            expect_ok(CHAT, body);
            assert_int_equal(req.prompt_len, 2 * OPENAI_MAX_MESSAGES - 1);
        } else {
            expect_err(CHAT, body, 400, "messages", "invalid_value",
                       "'messages' has 257 messages, at most 256 are allowed");
        }
    }
    free(body);
}

static void expect_msg_err(const char *messages, const char *param, const char *code,
                           const char *msg)
{
    char body[16384];
    snprintf(body, sizeof body, "{\"model\": \"kjv\", \"messages\": %s}", messages);
    expect_err(CHAT, body, 400, param, code, msg);
}

static void test_message_errors(void **state)
{
    (void)state;
    expect_err(CHAT, "{\"model\": \"kjv\"}", 400, "messages", "missing_required_parameter",
               "'messages' is required");
    expect_msg_err("null", "messages", "missing_required_parameter", NULL);
    expect_msg_err("[]", "messages", "invalid_value", "'messages' must not be empty");
    expect_msg_err("\"hi\"", "messages", "invalid_type",
                   "'messages' must be an array, not a string");
    expect_msg_err("{\"role\": \"user\"}", "messages", "invalid_type", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": \"a\"}, \"b\"]", "messages.[1]",
                   "invalid_type", "'messages.[1]' must be an object, not a string");
    expect_msg_err("[{\"content\": \"a\"}]", "messages.[0].role", "missing_required_parameter",
                   "'messages.[0].role' is required");
    expect_msg_err("[{\"role\": 1, \"content\": \"a\"}]", "messages.[0].role", "invalid_type",
                   NULL);
    expect_msg_err("[{\"role\": \"bob\", \"content\": \"a\"}]", "messages.[0].role",
                   "invalid_value",
                   "'messages.[0].role' must be 'system', 'developer', 'user' or 'assistant'");
    expect_msg_err("[{\"role\": \"user\\u0000\", \"content\": \"a\"}]", "messages.[0].role",
                   "invalid_value", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": \"a\"},"
                   " {\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c\"}]",
                   "messages.[1].role", "unsupported_value",
                   "'messages.[1].role': role 'tool' is not supported (tools and functions are "
                   "not)");
    expect_msg_err("[{\"role\": \"function\", \"content\": \"a\", \"name\": \"f\"}]",
                   "messages.[0].role", "unsupported_value", NULL);
    expect_msg_err("[{\"role\": \"user\"}]", "messages.[0].content", "missing_required_parameter",
                   "'messages.[0].content' is required");
    expect_msg_err("[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []}]",
                   "messages.[0].content", "missing_required_parameter", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": 5}]", "messages.[0].content", "invalid_type",
                   "'messages.[0].content' must be a string or an array of text parts, not a "
                   "number");
    expect_msg_err("[{\"role\": \"user\", \"content\": [\"a\"]}]", "messages.[0].content.[0]",
                   "invalid_type", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
                   " {\"type\": \"image_url\", \"image_url\": {\"url\": \"http://x\"}}]}]",
                   "messages.[0].content.[1]", "unsupported_value",
                   "'messages.[0].content.[1]': only parts of type 'text' are supported");
    expect_msg_err("[{\"role\": \"user\", \"content\": [{\"text\": \"a\"}]}]",
                   "messages.[0].content.[0]", "unsupported_value", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]",
                   "messages.[0].content.[0].text", "missing_required_parameter", NULL);
    expect_msg_err("[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 1}]}]",
                   "messages.[0].content.[0].text", "invalid_type", NULL);

    char body[8192];
    size_t len = (size_t)sprintf(body, "[{\"role\": \"user\", \"content\": [");
    for (int i = 0; i <= OPENAI_MAX_PARTS; i++)
        len += (size_t)sprintf(body + len, "%s{\"type\":\"text\",\"text\":\"\"}", i ? "," : "");
    strcpy(body + len, "]}]");
    expect_msg_err(body, "messages.[0].content", "invalid_value",
                   "'messages.[0].content' has 257 parts, at most 256 are allowed");
}

/* ---- responses ------------------------------------------------------------- */

static void test_error_json(void **state)
{
    (void)state;
    struct openai_error e = {.status = 400,
                             .type = "invalid_request_error",
                             .param = "temperature",
                             .code = "invalid_value"};
    snprintf(e.message, sizeof e.message, "'temperature' must be \"small\"\n\t\x01");
    struct buf b;
    buf_init(&b, 1 << 16);
    openai_error_json(&b, &e);
    const struct json_value *root = parse_back(&b);
    assert_members(root, 1);
    const struct json_value *o = get(root, "error", JSON_OBJECT);
    assert_members(o, 4);
    assert_cstr(o, "message", e.message);
    assert_cstr(o, "type", "invalid_request_error");
    assert_cstr(o, "param", "temperature");
    assert_cstr(o, "code", "invalid_value");

    /* a parser error, written as the front end would */
    assert_int_equal(parse(CHAT, "{\"model\": \"kjv\"}"), -1);
    buf_reset(&b);
    openai_error_json(&b, &err);
    o = get(parse_back(&b), "error", JSON_OBJECT);
    assert_cstr(o, "message", "'messages' is required");
    assert_cstr(o, "param", "messages");
    assert_cstr(o, "code", "missing_required_parameter");

    struct openai_error bare = {.status = 500, .message = "x"};
    buf_reset(&b);
    openai_error_json(&b, &bare);
    o = get(parse_back(&b), "error", JSON_OBJECT);
    assert_cstr(o, "type", "invalid_request_error");
    get(o, "param", JSON_NULL);
    get(o, "code", JSON_NULL);
    buf_free(&b);
}

/* Text with every kind of character JSON must escape, and UTF-8. */
static const char TRICKY[] = "a\"b\\c\nd\te\x01\x1f/\xc3\xa9\xe2\x80\xa8\0z";
#define TRICKY_LEN (sizeof TRICKY - 1)

static void test_completion_json(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 16);
    struct openai_result r = {.id = "cmpl-7",
                              .created = 1700000000,
                              .model = "kjv",
                              .text = TRICKY,
                              .text_len = TRICKY_LEN,
                              .finish_reason = "length",
                              .prompt_tokens = 5,
                              .completion_tokens = 16};
    openai_completion_json(&b, CMPL, &r);
    const struct json_value *root = parse_back(&b);
    assert_members(root, 6);
    assert_head(root, "text_completion");
    const struct json_value *c = choice0(root);
    assert_members(c, 4);
    assert_str(c, "text", TRICKY, TRICKY_LEN);
    assert_cstr(c, "finish_reason", "length");
    assert_usage(root, 5, 16);

    buf_reset(&b);
    r.finish_reason = "stop";
    r.prompt_tokens = UINT32_MAX;
    r.completion_tokens = UINT32_MAX;
    openai_completion_json(&b, CHAT, &r);
    root = parse_back(&b);
    assert_members(root, 6);
    assert_head(root, "chat.completion");
    c = choice0(root);
    assert_members(c, 4);
    const struct json_value *m = get(c, "message", JSON_OBJECT);
    assert_members(m, 2);
    assert_cstr(m, "role", "assistant");
    assert_str(m, "content", TRICKY, TRICKY_LEN);
    assert_cstr(c, "finish_reason", "stop");
    assert_usage(root, UINT32_MAX, UINT32_MAX);

    /* invalid UTF-8 in the text still makes valid JSON */
    buf_reset(&b);
    r.text = "\xff\xfe";
    r.text_len = 2;
    r.finish_reason = NULL;
    openai_completion_json(&b, CMPL, &r);
    c = choice0(parse_back(&b));
    get(c, "finish_reason", JSON_NULL);
    buf_free(&b);
}

static void test_chunk_json(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 16);

    /* chat: the first chunk has the role */
    openai_chunk_json(&b, CHAT, "cmpl-7", 1700000000, "kjv", "", 0, NULL, true, false);
    const struct json_value *root = parse_back(&b);
    assert_members(root, 5);
    assert_head(root, "chat.completion.chunk");
    const struct json_value *c = choice0(root);
    assert_members(c, 4);
    const struct json_value *d = get(c, "delta", JSON_OBJECT);
    assert_members(d, 2);
    assert_cstr(d, "role", "assistant");
    assert_cstr(d, "content", "");
    get(c, "finish_reason", JSON_NULL);

    /* a content chunk, with usage null */
    buf_reset(&b);
    openai_chunk_json(&b, CHAT, "cmpl-7", 1700000000, "kjv", TRICKY, TRICKY_LEN, NULL, false, true);
    root = parse_back(&b);
    assert_members(root, 6);
    get(root, "usage", JSON_NULL);
    d = get(choice0(root), "delta", JSON_OBJECT);
    assert_members(d, 1);
    assert_str(d, "content", TRICKY, TRICKY_LEN);

    /* a content chunk with no new text (held back) still has content */
    buf_reset(&b);
    openai_chunk_json(&b, CHAT, "cmpl-7", 1700000000, "kjv", "", 0, NULL, false, false);
    d = get(choice0(parse_back(&b)), "delta", JSON_OBJECT);
    assert_members(d, 1);
    assert_cstr(d, "content", "");

    /* the final chunk without text: delta {} */
    buf_reset(&b);
    openai_chunk_json(&b, CHAT, "cmpl-7", 1700000000, "kjv", "", 0, "stop", false, false);
    root = parse_back(&b);
    assert_members(root, 5);
    c = choice0(root);
    assert_members(get(c, "delta", JSON_OBJECT), 0);
    assert_cstr(c, "finish_reason", "stop");

    /* the final chunk with text */
    buf_reset(&b);
    openai_chunk_json(&b, CHAT, "cmpl-7", 1700000000, "kjv", "Amen", 4, "length", false, true);
    root = parse_back(&b);
    c = choice0(root);
    d = get(c, "delta", JSON_OBJECT);
    assert_members(d, 1);
    assert_cstr(d, "content", "Amen");
    assert_cstr(c, "finish_reason", "length");
    get(root, "usage", JSON_NULL);

    /* completions chunks: text, always */
    buf_reset(&b);
    openai_chunk_json(&b, CMPL, "cmpl-7", 1700000000, "kjv", " the", 4, NULL, true, false);
    root = parse_back(&b);
    assert_members(root, 5);
    assert_head(root, "text_completion");
    c = choice0(root);
    assert_members(c, 4);
    assert_cstr(c, "text", " the");
    get(c, "finish_reason", JSON_NULL);

    buf_reset(&b);
    openai_chunk_json(&b, CMPL, "cmpl-7", 1700000000, "kjv", "", 0, "cancelled", false, true);
    root = parse_back(&b);
    assert_members(root, 6);
    c = choice0(root);
    assert_cstr(c, "text", "");
    assert_cstr(c, "finish_reason", "cancelled");
    get(root, "usage", JSON_NULL);
    buf_free(&b);
}

static void test_usage_chunk_json(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 16);
    for (int k = 0; k < 2; k++) {
        buf_reset(&b);
        openai_usage_chunk_json(&b, k ? CHAT : CMPL, "cmpl-7", 1700000000, "kjv", 12, 30);
        const struct json_value *root = parse_back(&b);
        assert_members(root, 6);
        assert_head(root, k ? "chat.completion.chunk" : "text_completion");
        assert_int_equal(get(root, "choices", JSON_ARRAY)->len, 0);
        assert_usage(root, 12, 30);
    }
    buf_free(&b);
}

static void test_writer_ceiling(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 32);
    struct openai_result r = {.id = "cmpl-7", .model = "kjv", .text = "x", .text_len = 1};
    openai_completion_json(&b, CHAT, &r);
    assert_int_equal(b.err, -E2BIG);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_completions_minimal),
        TEST(test_completions_all_fields),
        TEST(test_null_is_absent),
        TEST(test_prompt_errors),
        TEST(test_prompt_limit),
        TEST(test_model),
        TEST(test_malformed),
        TEST(test_arena_full),
        TEST(test_max_tokens),
        TEST(test_temperature_top_p_top_k),
        TEST(test_seed),
        TEST(test_stop),
        TEST(test_stream),
        TEST(test_refusals_both),
        TEST(test_refusals_completions),
        TEST(test_refusals_chat),
        TEST(test_messages),
        TEST(test_message_errors),
        TEST(test_error_json),
        TEST(test_completion_json),
        TEST(test_chunk_json),
        TEST(test_usage_chunk_json),
        TEST(test_writer_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
