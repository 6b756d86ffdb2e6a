/* Unit tests of the pieces of `inferd bench`: the incremental HTTP response
 * parser (every split point), base URL parsing, and infer request bodies
 * built from model metadata. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "bench/bench_request.h"
#include "bench/http_client.h"

/* ---- response parser ---------------------------------------------------- */

struct feed_result {
    int rc;
    int status;
    bool keep_alive;
    uint64_t body_len;
    char body[4096];
    size_t body_got;
    size_t leftover; /* bytes after the response */
    const char *err;
};

static void collect_body(void *arg, const char *p, size_t n)
{
    struct feed_result *r = arg;
    assert_true(r->body_got + n <= sizeof r->body);
    memcpy(r->body + r->body_got, p, n);
    r->body_got += n;
}

/* Feeds `text` to a fresh parser in pieces of `step` bytes (0 = all at
 * once), the way bench.c does: unconsumed bytes stay at the front of the
 * buffer and new bytes are appended. eof: signal the end of the connection
 * after the last piece if the response is not complete. */
static struct feed_result feed(const char *text, size_t len, size_t step, bool head, bool eof)
{
    struct feed_result r;
    memset(&r, 0, sizeof r);
    struct http_resp p = {.on_body = collect_body, .body_arg = &r};
    http_resp_init(&p, head);
    char buf[8192];
    size_t have = 0, off = 0;
    r.rc = HTTP_RESP_AGAIN;
    while (r.rc == HTTP_RESP_AGAIN && off < len) {
        size_t n = step && step < len - off ? step : len - off;
        assert_true(have + n <= sizeof buf);
        memcpy(buf + have, text + off, n);
        have += n;
        off += n;
        size_t used = 12345;
        r.rc = http_resp_parse(&p, buf, have, &used);
        assert_true(used <= have);
        memmove(buf, buf + used, have - used);
        have -= used;
    }
    if (r.rc == HTTP_RESP_AGAIN && eof)
        r.rc = http_resp_eof(&p);
    r.status = p.status;
    r.keep_alive = p.keep_alive;
    r.body_len = p.body_len;
    r.leftover = have + (len - off);
    r.err = p.err_msg;
    return r;
}

/* Checks that every split of the input gives the same result. */
static void expect_response(const char *text, bool head, bool eof, int status, bool keep_alive,
                            const char *body, size_t leftover)
{
    size_t len = strlen(text);
    for (size_t step = 0; step <= len; step = step ? step + 1 : 1) {
        struct feed_result r = feed(text, len, step, head, eof);
        if (r.rc != HTTP_RESP_DONE)
            fail_msg("step %zu: rc %d (%s) for %s", step, r.rc, r.err ? r.err : "", text);
        assert_int_equal(r.status, status);
        assert_int_equal(r.keep_alive, keep_alive);
        assert_int_equal(r.body_len, strlen(body));
        assert_int_equal(r.body_got, strlen(body));
        assert_memory_equal(r.body, body, strlen(body));
        assert_int_equal(r.leftover, leftover);
    }
}

static void expect_error(const char *text, bool eof)
{
    size_t len = strlen(text);
    for (size_t step = 0; step <= len; step = step ? step + 1 : 1) {
        struct feed_result r = feed(text, len, step, false, eof);
        if (r.rc != HTTP_RESP_ERROR)
            fail_msg("step %zu: rc %d for %s", step, r.rc, text);
        assert_non_null(r.err);
    }
}

static void test_resp_content_length(void **state)
{
    (void)state;
    expect_response("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "Content-Length: 11\r\n\r\n{\"a\":12345}",
                    false, false, 200, true, "{\"a\":12345}", 0);
    expect_response("HTTP/1.1 400 Bad Request\r\ncontent-length:  2 \r\n\r\nno", false, false, 400,
                    true, "no", 0);
    /* Zero length, no reason phrase, bare LF line ends. */
    expect_response("HTTP/1.1 200\nContent-Length: 0\n\n", false, false, 200, true, "", 0);
    /* Repeated identical Content-Length is fine. */
    expect_response("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false,
                    false, 200, true, "x", 0);
}

static void test_resp_leftover_is_not_consumed(void **state)
{
    (void)state;
    /* Bytes after the response are left to the caller (bench closes the
     * connection when it sees any, since it never pipelines). */
    static const char text[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA";
    struct feed_result r = feed(text, strlen(text), 0, false, false);
    assert_int_equal(r.rc, HTTP_RESP_DONE);
    assert_int_equal(r.leftover, 5);
}

static void test_resp_chunked(void **state)
{
    (void)state;
    expect_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n"
                    "1;name=value\r\n,\r\n"
                    "A \r\n0123456789\r\n"
                    "0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
                    false, false, 200, true, "hello,0123456789", 0);
    expect_response("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, CHUNKED\r\n\r\n0\r\n\r\n", false,
                    false, 200, true, "", 0);
    /* Transfer-Encoding wins over Content-Length. */
    expect_response("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n",
                    false, false, 200, true, "abc", 0);
}

static void test_resp_interim_and_bodiless(void **state)
{
    (void)state;
    expect_response("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                    "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
                    false, false, 201, true, "ok", 0);
    expect_response("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false, false, 204,
                    true, "", 0);
    expect_response("HTTP/1.1 304 Not Modified\r\n\r\n", false, false, 304, true, "", 0);
    /* HEAD: headers describe a body that is not sent. */
    expect_response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true, false, 200, true, "", 0);
}

static void test_resp_connection_semantics(void **state)
{
    (void)state;
    expect_response("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", false,
                    false, 200, false, "x", 0);
    expect_response("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false, false, 200, false, "x",
                    0);
    expect_response("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
                    false, false, 200, true, "x", 0);
    expect_response("HTTP/1.1 200 OK\r\nConnection: upgrade, close\r\nContent-Length: 0\r\n\r\n",
                    false, false, 200, false, "", 0);
    /* No length: the body ends with the connection. */
    expect_response("HTTP/1.1 200 OK\r\n\r\nuntil the end", false, true, 200, false,
                    "until the end", 0);
    expect_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nabc",
                    false, true, 200, false, "abc", 0);
}

static void test_resp_errors(void **state)
{
    (void)state;
    expect_error("HTTP/2 200 OK\r\n\r\n", false);
    expect_error("HTTP/1.1 20 OK\r\n\r\n", false);
    expect_error("HTTP/1.1 2000 OK\r\n\r\n", false);
    expect_error("HTTP/1.1 099 Low\r\n\r\n", false);
    expect_error("HTTP/1.1 600 High\r\n\r\n", false);
    expect_error("SSH-2.0-OpenSSH\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", false);
    expect_error("HTTP/1.1 101 Switching Protocols\r\n\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false);
    expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "11111111111111111\r\n",
                 false);
    expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", false);
    /* Truncated: the connection ends inside the head or the body. */
    expect_error("HTTP/1.1 200 OK\r\nContent-Len", true);
    expect_error("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc", true);
    expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", true);
}

static void test_resp_eof_before_anything(void **state)
{
    (void)state;
    struct http_resp p = {0};
    http_resp_init(&p, false);
    assert_false(http_resp_started(&p));
    assert_int_equal(http_resp_eof(&p), HTTP_RESP_ERROR);
    http_resp_init(&p, false);
    size_t used;
    assert_int_equal(http_resp_parse(&p, "HTT", 3, &used), HTTP_RESP_AGAIN);
    assert_int_equal(used, 0);
    assert_true(http_resp_started(&p));
}

static void test_resp_head_too_long(void **state)
{
    (void)state;
    /* A header line that never ends: the parser gives up at its limit
     * instead of asking for more forever. */
    size_t n = HTTP_RESP_MAX_HEAD + 100;
    char *big = malloc(n);
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', n - 20);
    struct http_resp p = {0};
    http_resp_init(&p, false);
    size_t used;
    assert_int_equal(http_resp_parse(&p, big, n, &used), HTTP_RESP_ERROR);
    free(big);
}

/* ---- URL ---------------------------------------------------------------- */

static void test_url_parse(void **state)
{
    (void)state;
    struct http_url u;
    const char *err;
    assert_int_equal(http_url_parse("http://127.0.0.1:8000", &u, &err), 0);
    assert_string_equal(u.host, "127.0.0.1");
    assert_string_equal(u.port, "8000");
    assert_string_equal(u.authority, "127.0.0.1:8000");
    assert_string_equal(u.prefix, "");
    assert_int_equal(http_url_parse("HTTP://example.com/", &u, &err), 0);
    assert_string_equal(u.host, "example.com");
    assert_string_equal(u.port, "80");
    assert_string_equal(u.prefix, "");
    assert_int_equal(http_url_parse("http://[::1]:9000/api/v1//", &u, &err), 0);
    assert_string_equal(u.host, "::1");
    assert_string_equal(u.port, "9000");
    assert_string_equal(u.authority, "[::1]:9000");
    assert_string_equal(u.prefix, "/api/v1");
    assert_int_equal(http_url_parse("https://x", &u, &err), -1);
    assert_int_equal(http_url_parse("127.0.0.1:8000", &u, &err), -1);
    assert_int_equal(http_url_parse("http://", &u, &err), -1);
    assert_int_equal(http_url_parse("http://h:0", &u, &err), -1);
    assert_int_equal(http_url_parse("http://h:65536", &u, &err), -1);
    assert_int_equal(http_url_parse("http://h:80x", &u, &err), -1);
    assert_int_equal(http_url_parse("http://h:", &u, &err), -1);
    assert_int_equal(http_url_parse("http://[::1", &u, &err), -1);
    assert_int_equal(http_url_parse("http://u@h", &u, &err), -1);
    assert_int_equal(http_url_parse("http://h/p?q", &u, &err), -1);
}

/* ---- infer request bodies ----------------------------------------------- */

static const char simple_meta[] =
    "{\"name\":\"simple\",\"versions\":[\"1\"],\"platform\":\"onnxruntime_onnx\","
    "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[-1,16]},"
    "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[-1,16]}],"
    "\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":\"INT32\",\"shape\":[-1,16]}]}";

static void test_body_json(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    size_t json_len = 99;
    char err[256];
    assert_int_equal(bench_build_infer_body(simple_meta, strlen(simple_meta), BENCH_FORMAT_JSON, 3,
                                            &b, &json_len, err, sizeof err),
                     0);
    assert_int_equal(json_len, 0);
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *doc;
    const char *perr;
    size_t poff;
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &doc, &perr, &poff), 0);
    const struct json_value *inputs = json_get(doc, "inputs");
    assert_non_null(inputs);
    assert_int_equal(inputs->len, 2);
    for (uint32_t i = 0; i < 2; i++) {
        const struct json_value *in = &inputs->u.items[i];
        assert_string_equal(json_get(in, "name")->u.str, i ? "INPUT1" : "INPUT0");
        assert_string_equal(json_get(in, "datatype")->u.str, "INT32");
        const struct json_value *shape = json_get(in, "shape");
        int64_t d0, d1;
        assert_int_equal(json_num_i64(&shape->u.items[0], &d0), 0);
        assert_int_equal(json_num_i64(&shape->u.items[1], &d1), 0);
        assert_int_equal(d0, 3); /* the batch */
        assert_int_equal(d1, 16);
        const struct json_value *data = json_get(in, "data");
        assert_int_equal(data->len, 48);
        for (uint32_t k = 0; k < data->len; k++) {
            int64_t v;
            assert_int_equal(json_num_i64(&data->u.items[k], &v), 0);
            assert_true(v >= -50 && v < 50);
        }
    }
    /* Deterministic: the same body every time. */
    struct buf again;
    buf_init(&again, 1 << 20);
    assert_int_equal(bench_build_infer_body(simple_meta, strlen(simple_meta), BENCH_FORMAT_JSON, 3,
                                            &again, &json_len, err, sizeof err),
                     0);
    assert_int_equal(again.len, b.len);
    assert_memory_equal(again.data, b.data, b.len);
    buf_free(&again);
    arena_free(&a);
    buf_free(&b);
}

static void test_body_binary(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    size_t json_len = 0;
    char err[256];
    assert_int_equal(bench_build_infer_body(simple_meta, strlen(simple_meta), BENCH_FORMAT_BINARY,
                                            2, &b, &json_len, err, sizeof err),
                     0);
    assert_true(json_len > 0);
    assert_int_equal(b.len, json_len + 2 * (2 * 16 * 4));
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *doc;
    const char *perr;
    size_t poff;
    assert_int_equal(json_parse(&a, b.data, json_len, NULL, &doc, &perr, &poff), 0);
    const struct json_value *in0 = &json_get(doc, "inputs")->u.items[0];
    assert_null(json_get(in0, "data"));
    uint64_t size;
    assert_int_equal(json_num_u64(json_get(json_get(in0, "parameters"), "binary_data_size"), &size),
                     0);
    assert_int_equal(size, 2 * 16 * 4);
    assert_int_equal(json_get(json_get(doc, "parameters"), "binary_data_output")->type, JSON_TRUE);
    /* The raw INT32 values are little-endian and in the generator's range. */
    const unsigned char *raw = (const unsigned char *)b.data + json_len;
    for (size_t i = 0; i < 64; i++) {
        int32_t v = (int32_t)((uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                              (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);
        assert_true(v >= -50 && v < 50);
    }
    arena_free(&a);
    buf_free(&b);
}

static void test_body_bytes_and_types(void **state)
{
    (void)state;
    static const char meta[] =
        "{\"inputs\":[{\"name\":\"TEXT\",\"datatype\":\"BYTES\",\"shape\":[-1]},"
        "{\"name\":\"H\",\"datatype\":\"FP16\",\"shape\":[-1,2,-1]},"
        "{\"name\":\"B\",\"datatype\":\"BOOL\",\"shape\":[-1,3]}]}";
    struct buf b;
    buf_init(&b, 1 << 20);
    size_t json_len;
    char err[256];
    assert_int_equal(bench_build_infer_body(meta, strlen(meta), BENCH_FORMAT_BINARY, 2, &b,
                                            &json_len, err, sizeof err),
                     0);
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *doc;
    const char *perr;
    size_t poff;
    assert_int_equal(json_parse(&a, b.data, json_len, NULL, &doc, &perr, &poff), 0);
    const struct json_value *inputs = json_get(doc, "inputs");
    uint64_t sizes[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            json_num_u64(json_get(json_get(&inputs->u.items[i], "parameters"), "binary_data_size"),
                         &sizes[i]),
            0);
    assert_int_equal(sizes[1], 2 * 2 * 1 * 2); /* [2,2,1] FP16 */
    assert_int_equal(sizes[2], 2 * 3);         /* [2,3] BOOL */
    assert_int_equal(b.len, json_len + sizes[0] + sizes[1] + sizes[2]);
    /* BYTES: two elements, each a 4-byte little-endian length and the text. */
    const unsigned char *p = (const unsigned char *)b.data + json_len;
    size_t off = 0;
    for (int e = 0; e < 2; e++) {
        uint32_t n = p[off] | p[off + 1] << 8 | p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
        assert_true(n > 0 && n < 32);
        assert_memory_equal(p + off + 4, "bench-", 6);
        off += 4 + n;
    }
    assert_int_equal(off, sizes[0]);
    arena_free(&a);

    /* The JSON form of the same inputs is valid JSON with strings. */
    buf_reset(&b);
    assert_int_equal(bench_build_infer_body(meta, strlen(meta), BENCH_FORMAT_JSON, 1, &b, &json_len,
                                            err, sizeof err),
                     0);
    arena_init(&a, 4096, 1 << 20);
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &doc, &perr, &poff), 0);
    const struct json_value *text = &json_get(doc, "inputs")->u.items[0];
    assert_int_equal(json_get(text, "data")->u.items[0].type, JSON_STRING);
    arena_free(&a);
    buf_free(&b);
}

static void test_body_errors(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    size_t json_len;
    char err[256];
    static const char fixed[] =
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[4]}]}";
    /* No variable batch dimension: batch 1 works, batch 2 does not. */
    assert_int_equal(bench_build_infer_body(fixed, strlen(fixed), BENCH_FORMAT_JSON, 1, &b,
                                            &json_len, err, sizeof err),
                     0);
    buf_reset(&b);
    assert_int_equal(bench_build_infer_body(fixed, strlen(fixed), BENCH_FORMAT_JSON, 2, &b,
                                            &json_len, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "batch"));
    static const char *bad[] = {
        "not json",
        "{\"inputs\":[]}",
        "{\"outputs\":[]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP99\",\"shape\":[1]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-2]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\"}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1000000,1000000]}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf_reset(&b);
        err[0] = '\0';
        assert_int_equal(bench_build_infer_body(bad[i], strlen(bad[i]), BENCH_FORMAT_JSON, 1, &b,
                                                &json_len, err, sizeof err),
                         -1);
        assert_true(err[0] != '\0');
    }
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_content_length),
        cmocka_unit_test(test_resp_leftover_is_not_consumed),
        cmocka_unit_test(test_resp_chunked),
        cmocka_unit_test(test_resp_interim_and_bodiless),
        cmocka_unit_test(test_resp_connection_semantics),
        cmocka_unit_test(test_resp_errors),
        cmocka_unit_test(test_resp_eof_before_anything),
        cmocka_unit_test(test_resp_head_too_long),
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test(test_body_json),
        cmocka_unit_test(test_body_binary),
        cmocka_unit_test(test_body_bytes_and_types),
        cmocka_unit_test(test_body_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
