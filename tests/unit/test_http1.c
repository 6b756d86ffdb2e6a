/*
 * Unit tests of the HTTP/1.1 request parser: what it accepts, that every
 * error is the right status and raised as early as the bytes allow, and that
 * the outcome never depends on how the bytes were split across reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <time.h>

#include "http/http1.h"

static const struct http1_limits default_limits = {
    .max_request_line = 8192,
    .max_header_bytes = 16384,
    .max_headers = 64,
    .max_body = 1 << 20,
};

/* A request parsed in one call, and the buffer its pointers point into. */
struct parse {
    struct http1_parser p;
    struct http1_request req;
    char *buf;
    size_t len;
    int rc;
};

static char *copy_bytes(const void *raw, size_t len)
{
    char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, raw, len);
    return buf;
}

static struct parse *parse_bytes(const void *raw, size_t len, const struct http1_limits *limits)
{
    struct parse *ps = calloc(1, sizeof *ps);
    assert_non_null(ps);
    ps->buf = copy_bytes(raw, len);
    ps->len = len;
    http1_parser_init(&ps->p, limits);
    ps->rc = http1_parse(&ps->p, ps->buf, len, &ps->req);
    return ps;
}

static struct parse *parse_str(const char *raw)
{
    return parse_bytes(raw, strlen(raw), &default_limits);
}

static void parse_free(struct parse *ps)
{
    free(ps->buf);
    free(ps);
}

static void assert_span(const char *got, uint32_t got_len, const char *want)
{
    assert_non_null(got);
    assert_int_equal(got_len, strlen(want));
    if (got_len)
        assert_memory_equal(got, want, got_len);
}

static void assert_header(const struct http1_request *req, const char *name, const char *value)
{
    const struct http_header *h = http1_header(req, name);
    if (!h)
        fail_msg("header %s missing", name);
    assert_span(h->value, h->value_len, value);
}

static struct parse *parse_done(const char *raw)
{
    struct parse *ps = parse_str(raw);
    if (ps->rc != ST_DONE)
        fail_msg("rc %d, status %d (%s) for:\n%s", ps->rc, ps->p.err_status,
                 ps->p.err_msg ? ps->p.err_msg : "", raw);
    assert_int_equal(ps->p.consumed, strlen(raw));
    return ps;
}

/* ------------------------------------------------------------------ */
/* Accepted requests                                                  */
/* ------------------------------------------------------------------ */

static void test_simple_get(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET /v2/health/ready HTTP/1.1\r\n"
                                  "Host: localhost:8000\r\n"
                                  "User-Agent: curl/7.88.1\r\n"
                                  "Accept: */*\r\n"
                                  "\r\n");
    struct http1_request *req = &ps->req;
    assert_true(ps->p.head_done);
    assert_span(req->method, req->method_len, "GET");
    assert_span(req->target, req->target_len, "/v2/health/ready");
    assert_span(req->path, req->path_len, "/v2/health/ready");
    assert_null(req->query);
    assert_int_equal(req->version_minor, 1);
    assert_int_equal(req->nheaders, 3);
    assert_span(req->headers[0].name, req->headers[0].name_len, "Host");
    assert_span(req->headers[0].value, req->headers[0].value_len, "localhost:8000");
    assert_header(req, "accept", "*/*");
    assert_true(req->keep_alive);
    assert_false(req->expect_continue);
    assert_false(req->chunked);
    assert_false(req->has_content_length);
    assert_null(req->body);
    assert_int_equal(req->body_len, 0);
    parse_free(ps);
}

static void test_post_content_length(void **state)
{
    (void)state;
    const char *raw = "POST /v2/models/simple/infer HTTP/1.1\r\n"
                      "Host: a\r\n"
                      "Content-Type: application/json\r\n"
                      "Content-Length: 15\r\n"
                      "\r\n"
                      "{\"inputs\": []}\n";
    struct parse *ps = parse_done(raw);
    assert_true(ps->req.has_content_length);
    assert_int_equal(ps->req.content_length, 15);
    assert_span(ps->req.body, (uint32_t)ps->req.body_len, "{\"inputs\": []}\n");
    assert_ptr_equal(ps->req.body, ps->buf + strlen(raw) - 15);
    parse_free(ps);

    /* Content-Length: 0 is an empty body, done with the head. */
    ps = parse_done("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    assert_true(ps->req.has_content_length);
    assert_null(ps->req.body);
    parse_free(ps);
}

static void test_query_strings(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET /v2/models/m/infer?x=1&y=%20 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_span(ps->req.path, ps->req.path_len, "/v2/models/m/infer");
    assert_span(ps->req.query, ps->req.query_len, "x=1&y=%20");
    assert_span(ps->req.target, ps->req.target_len, "/v2/models/m/infer?x=1&y=%20");
    parse_free(ps);

    ps = parse_done("GET /?a?b HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_span(ps->req.path, ps->req.path_len, "/");
    assert_span(ps->req.query, ps->req.query_len, "a?b");
    parse_free(ps);

    /* An empty query is still a query. */
    ps = parse_done("GET /m? HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_span(ps->req.path, ps->req.path_len, "/m");
    assert_non_null(ps->req.query);
    assert_int_equal(ps->req.query_len, 0);
    parse_free(ps);

    ps = parse_done("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_span(ps->req.path, ps->req.path_len, "*");
    assert_null(ps->req.query);
    parse_free(ps);
}

/* RFC 9112 §3.2.2: a server must accept absolute-form; the path is what
 * follows the authority. */
static void test_absolute_form(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET http://h:8000/v2/health/live?q=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_span(ps->req.target, ps->req.target_len, "http://h:8000/v2/health/live?q=1");
    assert_span(ps->req.path, ps->req.path_len, "/v2/health/live");
    assert_span(ps->req.query, ps->req.query_len, "q=1");
    parse_free(ps);

    ps = parse_done("GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(ps->req.path_len, 0);
    parse_free(ps);
}

static void test_chunked_with_extensions_and_trailers(void **state)
{
    (void)state;
    const char *raw = "POST /v2/models/m/infer HTTP/1.1\r\n"
                      "Host: a\r\n"
                      "Transfer-Encoding: Chunked\r\n"
                      "\r\n"
                      "5;name=value\r\n"
                      "hello\r\n"
                      "1 ; quoted=\"a;b \\\"c\\\"\" ; flag\r\n"
                      " \r\n"
                      "00005\r\n"
                      "world\r\n"
                      "0;last\r\n"
                      "X-Checksum: abc\r\n"
                      "X-Other:\r\n"
                      "\r\n";
    struct parse *ps = parse_done(raw);
    assert_true(ps->req.chunked);
    assert_false(ps->req.has_content_length);
    assert_span(ps->req.body, (uint32_t)ps->req.body_len, "hello world");
    /* Trailers are checked but not reported. */
    assert_int_equal(ps->req.nheaders, 2);
    assert_null(http1_header(&ps->req, "X-Checksum"));
    parse_free(ps);

    /* A chunked request with no data at all has an empty body. */
    ps = parse_done("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assert_null(ps->req.body);
    assert_int_equal(ps->req.body_len, 0);
    parse_free(ps);
}

static void test_http10_keep_alive_rules(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET / HTTP/1.0\r\n\r\n");
    assert_int_equal(ps->req.version_minor, 0);
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    ps = parse_done("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert_true(ps->req.keep_alive);
    parse_free(ps);

    ps = parse_done("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    ps = parse_done("GET / HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n");
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    /* RFC 9110 §10.1.1: 100-continue from an HTTP/1.0 client is ignored. */
    ps = parse_done("GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
    assert_false(ps->req.expect_continue);
    parse_free(ps);
}

static void test_connection_close(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    ps = parse_done("GET / HTTP/1.1\r\nHost: a\r\nConnection: TE,\t CLOSE \r\n\r\n");
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    ps =
        parse_done("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nConnection: close\r\n\r\n");
    assert_false(ps->req.keep_alive);
    parse_free(ps);

    ps = parse_done("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed, keep-alive\r\n\r\n");
    assert_true(ps->req.keep_alive);
    parse_free(ps);
}

static void test_expect_continue_head_before_body(void **state)
{
    (void)state;
    const char *head = "POST /v2/models/m/infer HTTP/1.1\r\n"
                       "Host: a\r\n"
                       "Expect: 100-Continue\r\n"
                       "Content-Length: 5\r\n"
                       "\r\n";
    size_t head_len = strlen(head);
    char *buf = malloc(head_len);
    assert_non_null(buf);
    memcpy(buf, head, head_len);

    struct http1_parser p;
    struct http1_request req;
    http1_parser_init(&p, &default_limits);
    assert_int_equal(http1_parse(&p, buf, head_len, &req), ST_AGAIN);
    assert_true(p.head_done);
    assert_true(req.expect_continue);
    assert_span(req.path, req.path_len, "/v2/models/m/infer");
    assert_int_equal(req.content_length, 5);
    assert_null(req.body);

    /* The body arrives after "100 Continue", into a buffer that moved. */
    char *moved = malloc(head_len + 5);
    assert_non_null(moved);
    memcpy(moved, buf, head_len);
    memcpy(moved + head_len, "hello", 5);
    free(buf);
    assert_int_equal(http1_parse(&p, moved, head_len + 5, &req), ST_DONE);
    assert_int_equal(p.consumed, head_len + 5);
    assert_ptr_equal(req.method, moved);
    assert_header(&req, "host", "a");
    assert_span(req.body, (uint32_t)req.body_len, "hello");
    free(moved);
}

static void test_fields_known_so_far(void **state)
{
    (void)state;
    const char *raw = "PUT /a?q HTTP/1.1\r\nHost: h\r\nX-Partial: val";
    struct parse *ps = parse_str(raw);
    assert_int_equal(ps->rc, ST_AGAIN);
    assert_false(ps->p.head_done);
    assert_span(ps->req.method, ps->req.method_len, "PUT");
    assert_span(ps->req.query, ps->req.query_len, "q");
    assert_int_equal(ps->req.nheaders, 1);
    assert_header(&ps->req, "Host", "h");
    parse_free(ps);

    ps = parse_str("PUT /a?q HTT");
    assert_int_equal(ps->rc, ST_AGAIN);
    assert_null(ps->req.method);
    assert_null(ps->req.target);
    assert_null(ps->req.query);
    assert_int_equal(ps->req.nheaders, 0);
    parse_free(ps);
}

static void test_header_values_and_lookup(void **state)
{
    (void)state;
    struct parse *ps = parse_done("GET / HTTP/1.1\r\n"
                                  "Host: a\r\n"
                                  "X-Spaces: \t v a l \t \r\n"
                                  "X-Empty:\r\n"
                                  "X-Blank:   \r\n"
                                  "X-Utf8: caf\xc3\xa9\r\n"
                                  "X-Dup: first\r\n"
                                  "x-dup: second\r\n"
                                  "!#$%&'*+-.^_`|~09az: token\r\n"
                                  "Q^r`: caret\r\n"
                                  "\r\n");
    struct http1_request *req = &ps->req;
    assert_header(req, "x-spaces", "v a l");
    assert_header(req, "X-EMPTY", "");
    assert_header(req, "x-blank", "");
    assert_header(req, "X-Utf8", "caf\xc3\xa9");
    assert_header(req, "X-Dup", "first");
    assert_header(req, "!#$%&'*+-.^_`|~09AZ", "token");
    assert_null(http1_header(req, "X-Du"));
    assert_null(http1_header(req, "X-Dupe"));
    assert_null(http1_header(req, "Content-Length"));
    /* Only letters compare without case: not their neighbours in ASCII
     * ('@' '[' '`' '{'), nor '^' and '~' (0x20 apart too). */
    assert_null(http1_header(req, "!#$%&'*+-.^_`|~09aY"));
    assert_null(http1_header(req, "!#$%&'*+-.~_`|~09az"));
    assert_null(http1_header(req, "!#$%&'*+-.^_@|~09az"));
    assert_null(http1_header(req, "!#$%&'*+-.^_`|~09a{"));
    assert_header(req, "q^R`", "caret");
    assert_null(http1_header(req, "Q~r`"));
    assert_null(http1_header(req, "Q^r@"));
    parse_free(ps);
}

/* Every spelling of a name finds it, whatever its length. */
static void test_header_lookup_any_case(void **state)
{
    (void)state;
    static const char *const names[] = {"a", "Ab", "Vary", "X-Trace", "X-Tracer", "X-Tracers",
                                        "Content-Type", "Access-Control-Request-Method"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char raw[256], upper[64], lower[64], want[16];
        size_t n = strlen(names[k]);
        for (size_t i = 0; i <= n; i++) {
            upper[i] = (char)toupper((unsigned char)names[k][i]);
            lower[i] = (char)tolower((unsigned char)names[k][i]);
        }
        snprintf(raw, sizeof raw, "GET / HTTP/1.1\r\nHost: h\r\n%s: v%zu\r\n\r\n", names[k], k);
        snprintf(want, sizeof want, "v%zu", k);
        struct parse *ps = parse_done(raw);
        assert_header(&ps->req, upper, want);
        assert_header(&ps->req, lower, want);
        assert_header(&ps->req, names[k], want);
        lower[n - 1] = lower[n - 1] == 'z' ? 'y' : 'z';
        assert_null(http1_header(&ps->req, lower));
        parse_free(ps);
    }
}

/* The parser indexes the names' lengths (http1_request.name_lengths): a
 * name of a length no header has is absent at once, names of lengths 64
 * apart share a bit (so the index only filters, the scan decides), and a
 * request filled by other means (not indexed) is scanned. */
static void test_header_lookup_by_length_index(void **state)
{
    (void)state;
    char n64[65], n128[129], raw[512];
    memset(n64, 'a', 64);
    n64[64] = '\0';
    memset(n128, 'b', 128);
    n128[128] = '\0';
    snprintf(raw, sizeof raw, "POST / HTTP/1.1\r\nHost: h\r\nContent-Type: t\r\n%s: long\r\n"
             "Content-Length: 0\r\n\r\n", n64);
    struct parse *ps = parse_done(raw);
    struct http1_request *req = &ps->req;
    assert_true(req->indexed);
    assert_header(req, "content-type", "t");
    assert_header(req, "host", "h");
    assert_header(req, n64, "long");
    assert_null(http1_header(req, "x-request-id")); /* the length of Content-Type */
    assert_null(http1_header(req, "traceparent"));
    assert_null(http1_header(req, "a"));
    assert_null(http1_header(req, n128)); /* shares n64's bit, found absent by the scan */
    assert_null(http1_header(req, ""));
    /* Not indexed: the same lookups by scanning. */
    req->indexed = false;
    assert_header(req, "CONTENT-TYPE", "t");
    assert_header(req, n64, "long");
    assert_null(http1_header(req, "traceparent"));
    parse_free(ps);
}

/* Every byte value at every position of a 17-byte name finds the header
 * exactly when it is the same letter in either case or the same byte. */
static void test_header_lookup_every_byte(void **state)
{
    (void)state;
    static const char name[] = "X-Abcdefghi-Z09^~";
    char raw[128];
    snprintf(raw, sizeof raw, "GET / HTTP/1.1\r\nHost: h\r\n%s: v\r\n\r\n", name);
    struct parse *ps = parse_done(raw);
    size_t n = sizeof name - 1;
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 256; c++) {
            char probe[sizeof name];
            memcpy(probe, name, sizeof name);
            probe[i] = (char)c;
            int a = c >= 'A' && c <= 'Z' ? c + 32 : c;
            int b = name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i];
            const struct http_header *h = http1_header_n(&ps->req, probe, n);
            if ((h != NULL) != (a == b))
                fail_msg("byte 0x%02x at %zu: %s", c, i, h ? "found" : "not found");
        }
    }
    parse_free(ps);
}

static void test_leading_empty_lines_skipped(void **state)
{
    (void)state;
    struct parse *ps = parse_done("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_span(ps->req.method, ps->req.method_len, "GET");
    assert_ptr_equal(ps->req.method, ps->buf + 4);
    parse_free(ps);
}

static void test_limits_are_inclusive(void **state)
{
    (void)state;
    /* Request line of exactly max_request_line bytes with its CRLF, head of
     * exactly max_header_bytes, exactly max_headers fields, body of exactly
     * max_body bytes: all accepted. */
    const char *raw = "GET /abcd HTTP/1.1\r\n" /* 20 */
                      "Host: a\r\n"            /* 9 */
                      "B: 1\r\n"               /* 6 */
                      "Content-Length: 4\r\n"  /* 19 */
                      "\r\n"                   /* 2 */
                      "body";
    struct http1_limits lim = {
        .max_request_line = 20, .max_header_bytes = 56, .max_headers = 3, .max_body = 4};
    struct parse *ps = parse_bytes(raw, strlen(raw), &lim);
    assert_int_equal(ps->rc, ST_DONE);
    parse_free(ps);

    raw = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
          "2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n";
    lim = default_limits;
    lim.max_body = 4;
    ps = parse_bytes(raw, strlen(raw), &lim);
    assert_int_equal(ps->rc, ST_DONE);
    assert_span(ps->req.body, (uint32_t)ps->req.body_len, "abcd");
    parse_free(ps);
}

/* ------------------------------------------------------------------ */
/* Split reads: the outcome must not depend on how bytes arrive        */
/* ------------------------------------------------------------------ */

/* Everything observable about a parse, as text, so that two parses of the
 * same bytes in different buffers can be compared. */
static void describe(const struct http1_parser *p, const struct http1_request *req, int rc,
                     char *out, size_t size)
{
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(out + n, n < size ? size - n : 0, __VA_ARGS__))
    PUT("rc=%d", rc);
    if (rc == ST_ERROR) {
        PUT(" status=%d msg=%s", p->err_status, p->err_msg);
        return;
    }
    PUT(" consumed=%zu head_done=%d", rc == ST_DONE ? p->consumed : 0, p->head_done);
    PUT(" method=%.*s target=%.*s path=%.*s", (int)req->method_len, req->method ? req->method : "",
        (int)req->target_len, req->target ? req->target : "", (int)req->path_len,
        req->path ? req->path : "");
    PUT(" query=%s%.*s", req->query ? "?" : "-", (int)req->query_len, req->query ? req->query : "");
    PUT(" v=%d ka=%d ec=%d ch=%d cl=%d/%llu", req->version_minor, req->keep_alive,
        req->expect_continue, req->chunked, req->has_content_length,
        (unsigned long long)req->content_length);
    for (uint32_t i = 0; i < req->nheaders; i++)
        PUT(" [%.*s=%.*s]", (int)req->headers[i].name_len, req->headers[i].name,
            (int)req->headers[i].value_len, req->headers[i].value);
    PUT(" body=%s%.*s", req->body ? "+" : "-", (int)req->body_len, req->body ? req->body : "");
#undef PUT
    assert_true(n < size);
}

static const char *const split_requests[] = {
    "GET /v2/models/resnet50/ready?verbose=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n",
    "POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world",
    ("POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5;a=\"b\"\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"),
    "\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n", /* pipelined */
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX: a\nY: b\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
};

static void one_shot(const char *raw, char *out, size_t size)
{
    struct parse *ps = parse_str(raw);
    describe(&ps->p, &ps->req, ps->rc, out, size);
    parse_free(ps);
}

static void test_split_at_every_boundary(void **state)
{
    (void)state;
    static char want[8192], got[8192];
    static struct http1_request req;
    for (size_t r = 0; r < sizeof split_requests / sizeof *split_requests; r++) {
        const char *raw = split_requests[r];
        size_t n = strlen(raw);
        one_shot(raw, want, sizeof want);

        for (size_t k = 1; k < n; k++) {
            char *buf = copy_bytes(raw, n);
            struct http1_parser p;
            http1_parser_init(&p, &default_limits);
            int rc = http1_parse(&p, buf, k, &req);
            if (rc != ST_AGAIN) {
                /* Finished early: only possible with the same outcome. */
                describe(&p, &req, rc, got, sizeof got);
                if (strcmp(want, got) != 0)
                    fail_msg("request %zu split at %zu:\nwant %s\ngot  %s", r, k, want, got);
                free(buf);
                continue;
            }
            rc = http1_parse(&p, buf, n, &req);
            describe(&p, &req, rc, got, sizeof got);
            if (strcmp(want, got) != 0)
                fail_msg("request %zu split at %zu:\nwant %s\ngot  %s", r, k, want, got);
            free(buf);
        }
    }
}

/* As a connection does it: each read appends to a buffer that moves. */
static void test_grow_one_byte_per_call(void **state)
{
    (void)state;
    static char want[8192], got[8192];
    static struct http1_request req;
    for (size_t r = 0; r < sizeof split_requests / sizeof *split_requests; r++) {
        const char *raw = split_requests[r];
        size_t n = strlen(raw);
        one_shot(raw, want, sizeof want);

        struct http1_parser p;
        http1_parser_init(&p, &default_limits);
        char *buf = NULL;
        int rc = ST_AGAIN;
        size_t len = 0;
        while (rc == ST_AGAIN && len < n) {
            char *moved = malloc(len + 1);
            assert_non_null(moved);
            if (len)
                memcpy(moved, buf, len);
            moved[len] = raw[len];
            free(buf);
            buf = moved;
            rc = http1_parse(&p, buf, ++len, &req);
        }
        describe(&p, &req, rc, got, sizeof got);
        if (strcmp(want, got) != 0)
            fail_msg("request %zu byte by byte:\nwant %s\ngot  %s", r, want, got);
        /* DONE exactly when the last byte of the request arrived. */
        if (rc == ST_DONE)
            assert_int_equal(p.consumed, len);
        free(buf);
    }
}

/* ------------------------------------------------------------------ */
/* Pipelining                                                         */
/* ------------------------------------------------------------------ */

static void test_pipelining(void **state)
{
    (void)state;
    const char *raw = "GET /v2 HTTP/1.1\r\nHost: a\r\n\r\n"
                      "POST /v2/models/a/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n"
                      "abcd"
                      "POST /v2/models/b/infer HTTP/1.1\r\nHost: a\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n"
                      "3\r\nxyz\r\n2\r\n!!\r\n0\r\n\r\n"
                      "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    const char *paths[] = {"/v2", "/v2/models/a/infer", "/v2/models/b/infer", "/last"};
    const char *bodies[] = {NULL, "abcd", "xyz!!", NULL};
    size_t n = strlen(raw);
    char *buf = copy_bytes(raw, n);
    static struct http1_request req;
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        struct http1_parser p;
        http1_parser_init(&p, &default_limits);
        assert_int_equal(http1_parse(&p, buf + off, n - off, &req), ST_DONE);
        assert_span(req.path, req.path_len, paths[i]);
        if (bodies[i])
            assert_span(req.body, (uint32_t)req.body_len, bodies[i]);
        else
            assert_null(req.body);
        assert_int_equal(req.keep_alive, i < 3);
        off += p.consumed;
    }
    assert_int_equal(off, n);
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Errors                                                             */
/* ------------------------------------------------------------------ */

struct error_case {
    const char *what;
    const char *raw;
    size_t len;
    int status;
};

/* clang-format off */
#define BAD(what, raw, status) {what, raw, sizeof(raw) - 1, status}
/* clang-format on */

static void expect_errors(const struct error_case *cases, size_t n,
                          const struct http1_limits *limits)
{
    for (size_t i = 0; i < n; i++) {
        struct parse *ps = parse_bytes(cases[i].raw, cases[i].len, limits);
        if (ps->rc != ST_ERROR || ps->p.err_status != cases[i].status)
            fail_msg("%s: want error %d, got rc %d status %d", cases[i].what, cases[i].status,
                     ps->rc, ps->p.err_status);
        assert_non_null(ps->p.err_msg);
        assert_false(ps->req.keep_alive);
        /* Errors are final. */
        assert_int_equal(http1_parse(&ps->p, ps->buf, ps->len, &ps->req), ST_ERROR);
        assert_int_equal(ps->p.err_status, cases[i].status);
        parse_free(ps);
    }
}

#define EXPECT_ERRORS(cases, limits) expect_errors(cases, sizeof cases / sizeof *cases, limits)

#define H11 "GET / HTTP/1.1\r\nHost: a\r\n"
#define POST11 "POST / HTTP/1.1\r\nHost: a\r\n"
#define CHUNKED POST11 "Transfer-Encoding: chunked\r\n\r\n"

static void test_bad_request_line(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("double space", "GET  / HTTP/1.1\r\n", 400),
        BAD("double space before version", "GET /  HTTP/1.1\r\n", 400),
        BAD("trailing space", "GET / HTTP/1.1 \r\n", 400),
        BAD("tab separator", "GET\t/ HTTP/1.1\r\n", 400),
        BAD("leading space", " GET / HTTP/1.1\r\n", 400),
        BAD("empty method", " / HTTP/1.1\r\n", 400),
        BAD("bad method char", "G(T / HTTP/1.1\r\n", 400),
        BAD("absolute-form without authority", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        BAD("other scheme", "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        BAD("authority-form", "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        BAD("CTL in target", "GET /a\x01z HTTP/1.1\r\n", 400),
        BAD("DEL in target", "GET /a\x7fz HTTP/1.1\r\n", 400),
        BAD("non-ASCII target", "GET /caf\xc3\xa9 HTTP/1.1\r\n", 400),
        BAD("HTTP/0.9", "GET /\r\n", 400),
        BAD("lower-case version", "GET / http/1.1\r\n", 400),
        BAD("two-digit minor", "GET / HTTP/1.10\r\n", 400),
        BAD("no minor", "GET / HTTP/1\r\n", 400),
        BAD("HTTPS", "GET / HTTPS/1.1\r\n", 400),
        BAD("bare CR", "GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
        BAD("leading bare LF", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        BAD("NUL in method", "G\0T / HTTP/1.1\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_unsupported_version(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        BAD("h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        BAD("HTTP/1.2", "GET / HTTP/1.2\r\n", 505),
        BAD("HTTP/0.9 spelled out", "GET / HTTP/0.9\r\n", 505),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_bare_lf(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
        BAD("header line", H11 "X: a\nY: b\r\n\r\n", 400),
        BAD("end of head", H11 "\n", 400),
        BAD("chunk size line", CHUNKED "5\nhello\r\n0\r\n\r\n", 400),
        BAD("last chunk", CHUNKED "0\n\r\n", 400),
        BAD("end of trailers", CHUNKED "0\r\n\n", 400),
        BAD("trailer line", CHUNKED "0\r\nX: a\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_bad_header_lines(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("empty name", H11 ": a\r\n\r\n", 400),
        BAD("no colon", H11 "NoColon\r\n\r\n", 400),
        BAD("bad name char", H11 "Bad[name]: a\r\n\r\n", 400),
        BAD("non-ASCII name", H11 "Caf\xc3\xa9: a\r\n\r\n", 400),
        BAD("whitespace first line", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_obs_fold(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("space fold", H11 "X-A: a\r\n b\r\n\r\n", 400),
        BAD("tab fold", H11 "X-A: a\r\n\tb\r\n\r\n", 400),
        BAD("folded trailer", CHUNKED "0\r\nX: a\r\n b\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_space_before_colon(void **state)
{
    (void)state;
    /* "Transfer-Encoding : chunked" is a header some proxies ignore and
     * others honour: the classic smuggling vector. */
    static const struct error_case cases[] = {
        BAD("space", POST11 "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400),
        BAD("tab", H11 "Host\t: a\r\n\r\n", 400),
        BAD("in trailer", CHUNKED "0\r\nX : a\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_ctl_in_header_value(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("NUL", H11 "X: a\0b\r\n\r\n", 400),
        BAD("SOH", H11 "X: a\x01\r\n\r\n", 400),
        BAD("DEL", H11 "X: a\x7f\r\n\r\n", 400),
        BAD("bare CR", H11 "X: a\rb\r\n\r\n", 400),
        BAD("ESC in trailer", CHUNKED "0\r\nX: \x1b[1m\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_host_rules(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("missing in 1.1", "GET / HTTP/1.1\r\nX: a\r\n\r\n", 400),
        BAD("twice", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400),
        BAD("twice in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);

    struct parse *ps = parse_done("GET / HTTP/1.1\r\nHost:\r\n\r\n");
    assert_header(&ps->req, "host", "");
    parse_free(ps);
}

static void test_bad_content_length(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("plus sign", POST11 "Content-Length: +5\r\n\r\n", 400),
        BAD("minus sign", POST11 "Content-Length: -5\r\n\r\n", 400),
        BAD("trailing letter", POST11 "Content-Length: 5a\r\n\r\n", 400),
        BAD("hex", POST11 "Content-Length: 0x5\r\n\r\n", 400),
        BAD("empty", POST11 "Content-Length:\r\n\r\n", 400),
        BAD("inner space", POST11 "Content-Length: 1 2\r\n\r\n", 400),
        BAD("trailing comma", POST11 "Content-Length: 5,\r\n\r\n", 400),
        BAD("leading comma", POST11 "Content-Length: ,5\r\n\r\n", 400),
        BAD("empty element", POST11 "Content-Length: 5,,5\r\n\r\n", 400),
        BAD("2^64", POST11 "Content-Length: 18446744073709551616\r\n\r\n", 400),
        BAD("way over 2^64", POST11 "Content-Length: 99999999999999999999999999\r\n\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_request_smuggling_duplicate_content_length(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("two fields", POST11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
        BAD("list", POST11 "Content-Length: 5, 6\r\n\r\nhello!", 400),
        BAD("zero then five", POST11 "Content-Length: 0\r\nContent-Length: 5\r\n\r\nhello", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);

    /* The same value repeated is one length (RFC 9110 §8.6). */
    struct parse *ps =
        parse_done(POST11 "Content-Length: 5\r\ncontent-length: 005 ,\t5\r\n\r\nhello");
    assert_int_equal(ps->req.content_length, 5);
    assert_span(ps->req.body, (uint32_t)ps->req.body_len, "hello");
    parse_free(ps);
}

static void test_regress_request_smuggling_cl_te(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("CL then TE", POST11 "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        BAD("TE then CL", POST11 "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n", 400),
        BAD("CL and unknown TE", POST11 "Content-Length: 4\r\nTransfer-Encoding: gzip\r\n\r\n",
            400),
        BAD("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_unsupported_transfer_encoding(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("gzip", POST11 "Transfer-Encoding: gzip\r\n\r\n", 501),
        BAD("gzip, chunked", POST11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
        BAD("chunked, chunked", POST11 "Transfer-Encoding: chunked, chunked\r\n\r\n", 501),
        BAD("two fields", POST11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            501),
        BAD("parameter", POST11 "Transfer-Encoding: chunked;q=1\r\n\r\n", 501),
        BAD("empty", POST11 "Transfer-Encoding:\r\n\r\n", 501),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_unknown_expectation(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("other", POST11 "Expect: 200-ok\r\nContent-Length: 1\r\n\r\n", 417),
        BAD("list", POST11 "Expect: 100-continue, x\r\nContent-Length: 1\r\n\r\n", 417),
        BAD("empty", H11 "Expect:\r\n\r\n", 417),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_bad_chunk_size(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        BAD("not hex", CHUNKED "g\r\n", 400),
        BAD("empty", CHUNKED "\r\n", 400),
        BAD("leading space", CHUNKED " 5\r\n", 400),
        BAD("trailing space", CHUNKED "5 \r\n", 400),
        BAD("sign", CHUNKED "-5\r\n", 400),
        BAD("0x prefix", CHUNKED "0x5\r\n", 400),
        BAD("ext without name", CHUNKED "5;\r\n", 400),
        BAD("ext without value", CHUNKED "5;a=\r\n", 400),
        BAD("ext trailing space", CHUNKED "5;a \r\n", 400),
        BAD("ext two names", CHUNKED "5;a b\r\n", 400),
        BAD("ext unterminated quote", CHUNKED "5;a=\"b\r\n", 400),
        BAD("ext CTL in quote", CHUNKED "5;a=\"\x01\"\r\n", 400),
        BAD("ext bare CR", CHUNKED "5;a\rb\r\n", 400),
        BAD("trailer without colon", CHUNKED "0\r\nX\r\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_chunk_missing_crlf(void **state)
{
    (void)state;
    /* Detected on the first wrong byte after the data. */
    static const struct error_case cases[] = {
        BAD("data too long", CHUNKED "5\r\nhelloX", 400),
        BAD("CR without LF", CHUNKED "5\r\nhello\rX", 400),
        BAD("LF alone", CHUNKED "5\r\nhello\n", 400),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_chunk_size_overflow(void **state)
{
    (void)state;
    struct http1_limits lim = default_limits;
    lim.max_body = UINT64_MAX;
    static const struct error_case cases[] = {
        BAD("17 digits", CHUNKED "10000000000000000\r\n", 400),
        BAD("17 digits of zeros", CHUNKED "00000000000000001\r\n", 400),
        BAD("wraps to 0", CHUNKED "100000000000000000000000000000000\r\n", 400),
    };
    EXPECT_ERRORS(cases, &lim);

    /* The largest 16-digit size is accepted when max_body allows it. */
    struct parse *ps = parse_bytes(CHUNKED "FFFFFFFFFFFFFFFF\r\nabc", sizeof(CHUNKED) + 20, &lim);
    assert_int_equal(ps->rc, ST_AGAIN);
    parse_free(ps);
}

static void test_regress_chunk_extension_too_long(void **state)
{
    (void)state;
    char raw[sizeof(CHUNKED) + 300];
    int n = snprintf(raw, sizeof raw, "%s5;x=", CHUNKED);
    memset(raw + n, 'a', sizeof raw - (size_t)n);
    /* No LF anywhere: the line is rejected once its bound is reached. */
    struct parse *ps = parse_bytes(raw, sizeof raw, &default_limits);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 400);
    parse_free(ps);
}

static void test_regress_long_request_line(void **state)
{
    (void)state;
    struct http1_limits lim = default_limits;
    lim.max_request_line = 64;
    char raw[200] = "GET /";
    memset(raw + 5, 'a', sizeof raw - 5);

    /* 63 bytes without CRLF may still end in time, 64 cannot. */
    struct parse *ps = parse_bytes(raw, 63, &lim);
    assert_int_equal(ps->rc, ST_AGAIN);
    parse_free(ps);
    ps = parse_bytes(raw, 64, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 414);
    parse_free(ps);

    /* A complete line of 65 bytes. */
    memcpy(raw + 54, " HTTP/1.1\r\n", 11);
    ps = parse_bytes(raw, 65, &lim);
    assert_int_equal(ps->p.err_status, 414);
    parse_free(ps);
}

static void test_regress_header_bytes(void **state)
{
    (void)state;
    struct http1_limits lim = default_limits;
    lim.max_header_bytes = 256;
    char raw[1024];
    int n = snprintf(raw, sizeof raw, "%sX-Big: ", H11);
    memset(raw + n, 'a', sizeof raw - (size_t)n);

    struct parse *ps = parse_bytes(raw, 255, &lim);
    assert_int_equal(ps->rc, ST_AGAIN);
    parse_free(ps);
    ps = parse_bytes(raw, 256, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);
}

static void test_regress_empty_line_flood(void **state)
{
    (void)state;
    /* Skipped empty lines still count toward the head. */
    struct http1_limits lim = default_limits;
    lim.max_header_bytes = 64;
    char raw[128];
    for (size_t i = 0; i < sizeof raw; i += 2)
        memcpy(raw + i, "\r\n", 2);
    struct parse *ps = parse_bytes(raw, 64, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);
}

static void test_regress_header_count(void **state)
{
    (void)state;
    struct http1_limits lim = default_limits;
    lim.max_headers = 4;
    /* The fifth field fails as soon as its line is complete. */
    static const char raw[] = H11 "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n";
    struct parse *ps = parse_bytes(raw, sizeof raw - 1, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);

    /* Trailers count toward the same limit. */
    static const char chunked[] = CHUNKED "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n";
    ps = parse_bytes(chunked, sizeof chunked - 1, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);

    /* max_headers above the table's capacity is clamped to it. */
    lim.max_headers = UINT32_MAX;
    char big[8192];
    int n = snprintf(big, sizeof big, "%s", H11);
    for (int i = 0; i < HTTP1_MAX_HEADERS_CAP; i++)
        n += snprintf(big + n, sizeof big - (size_t)n, "X%d: %d\r\n", i, i);
    ps = parse_bytes(big, (size_t)n, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);
}

static void test_regress_trailer_bytes(void **state)
{
    (void)state;
    /* Trailers count toward max_header_bytes together with the head. */
    static const char head[] = CHUNKED "0\r\n";
    struct http1_limits lim = default_limits;
    lim.max_header_bytes = sizeof(CHUNKED) - 1 + 32;
    char raw[sizeof head + 64];
    memcpy(raw, head, sizeof head - 1);
    memset(raw + sizeof head - 1, 'a', sizeof raw - (sizeof head - 1));
    raw[sizeof head - 1 + 1] = ':';

    struct parse *ps = parse_bytes(raw, sizeof head - 1 + 31, &lim);
    assert_int_equal(ps->rc, ST_AGAIN);
    parse_free(ps);
    ps = parse_bytes(raw, sizeof head - 1 + 32, &lim);
    assert_int_equal(ps->rc, ST_ERROR);
    assert_int_equal(ps->p.err_status, 431);
    parse_free(ps);
}

static void test_regress_huge_content_length(void **state)
{
    (void)state;
    /* Refused from the head alone, before anyone buffers the body. */
    static const struct error_case cases[] = {
        BAD("over max_body", POST11 "Content-Length: 1048577\r\n\r\n", 413),
        BAD("2^64-1", POST11 "Content-Length: 18446744073709551615\r\n\r\n", 413),
        BAD("with 100-continue", POST11 "Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n",
            413),
    };
    EXPECT_ERRORS(cases, &default_limits);
}

static void test_regress_huge_chunked_body(void **state)
{
    (void)state;
    struct http1_limits lim = default_limits;
    lim.max_body = 10;
    /* Refused from the size line that goes over, before its data. */
    static const struct error_case cases[] = {
        BAD("one chunk", CHUNKED "b\r\n", 413),
        BAD("max digits", CHUNKED "FFFFFFFFFFFFFFFF\r\n", 413),
        BAD("sum of chunks", CHUNKED "8\r\n12345678\r\n3\r\n", 413),
    };
    EXPECT_ERRORS(cases, &lim);
}

/* A 413 says how large the body is, the limit, and the flag that sets it. */
static void test_body_too_large_message(void **state)
{
    (void)state;
    static const char cl[] = POST11 "Content-Length: 1048577\r\n\r\n";
    struct parse *ps = parse_bytes(cl, sizeof cl - 1, &default_limits);
    assert_int_equal(ps->p.err_status, 413);
    assert_string_equal(ps->p.err_msg, "request body of 1048577 bytes exceeds the limit of 1048576 "
                                       "bytes (--max-body-bytes)");
    parse_free(ps);

    struct http1_limits lim = default_limits;
    lim.max_body = 10;
    static const char chunked[] = CHUNKED "8\r\n12345678\r\n3\r\n";
    ps = parse_bytes(chunked, sizeof chunked - 1, &lim);
    assert_int_equal(ps->p.err_status, 413);
    assert_string_equal(ps->p.err_msg,
                        "request body of at least 11 bytes exceeds the limit of 10 bytes "
                        "(--max-body-bytes)");
    parse_free(ps);
}

/* ------------------------------------------------------------------ */
/* Cost: a slow client must not make the parser quadratic              */
/* ------------------------------------------------------------------ */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Feeds buf one more byte per call; returns the seconds it took. */
static double feed_byte_by_byte(char *buf, size_t n, const struct http1_limits *lim,
                                struct http1_parser *p, struct http1_request *req)
{
    http1_parser_init(p, lim);
    double start = now();
    int rc = ST_AGAIN;
    size_t len = 0;
    while (rc == ST_AGAIN && len < n)
        rc = http1_parse(p, buf, ++len, req);
    double took = now() - start;
    assert_int_equal(rc, ST_DONE);
    assert_int_equal(p->consumed, n);
    return took;
}

/* A parser that searched the whole line again on each call would still
 * look fast at 64 KiB (memchr scans GB/s: ~20 ms), so the line is 1 MiB:
 * ~10 ms when linear (~0.2 s under ASan), ~8 s when quadratic. */
static void test_regress_slow_header_rescan(void **state)
{
    (void)state;
    static struct http1_request req;
    struct http1_parser p;
    size_t big = 1 << 20, cap = big + 8192, n = 0;
    struct http1_limits lim = default_limits;
    lim.max_header_bytes = (uint32_t)cap;
    char *raw = malloc(cap);
    assert_non_null(raw);
    n += (size_t)snprintf(raw, cap, "%sX-Big: ", H11);
    memset(raw + n, 'a', big);
    n += big;
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(raw + n, cap - n, "\r\nX-%02d: %0100d", i, i);
    n += (size_t)snprintf(raw + n, cap - n, "\r\n\r\n");

    double took = feed_byte_by_byte(raw, n, &lim, &p, &req);
    assert_int_equal(req.nheaders, 62);
    assert_int_equal(req.headers[1].value_len, big);
    if (took > 1.5)
        fail_msg("%zu bytes one per call took %.3f s", n, took);
    free(raw);
}

static void test_regress_slow_chunked_rescan(void **state)
{
    (void)state;
    static struct http1_request req;
    struct http1_parser p;
    /* 64 KiB of body in one-byte chunks plus one 64 KiB chunk. */
    size_t cap = 600 * 1024, n = 0;
    char *raw = malloc(cap);
    assert_non_null(raw);
    n += (size_t)snprintf(raw, cap, "%s", CHUNKED);
    for (int i = 0; i < 64 * 1024; i++) {
        memcpy(raw + n, "1\r\nx\r\n", 6);
        n += 6;
    }
    n += (size_t)snprintf(raw + n, cap - n, "10000\r\n");
    memset(raw + n, 'y', 0x10000);
    n += 0x10000;
    n += (size_t)snprintf(raw + n, cap - n, "\r\n0\r\n\r\n");

    double took = feed_byte_by_byte(raw, n, &default_limits, &p, &req);
    assert_int_equal(req.body_len, 128 * 1024);
    assert_int_equal(req.body[0], 'x');
    assert_int_equal(req.body[64 * 1024 - 1], 'x');
    assert_int_equal(req.body[64 * 1024], 'y');
    assert_int_equal(req.body[128 * 1024 - 1], 'y');
    if (took > 0.5)
        fail_msg("%zu bytes one per call took %.3f s", n, took);
    free(raw);
}

/* Header values are checked eight bytes at a time: a control byte or DEL
 * anywhere in a long value is refused wherever it falls in its word, and
 * HTAB, SP and obs-text (bytes 0x80 and up) pass. */
static void test_header_value_bytes_everywhere(void **state)
{
    (void)state;
    static const unsigned char bad[] = {0x00, 0x01, 0x0b, 0x1f, 0x7f};
    static const unsigned char good[] = {'\t', ' ', 0x80, 0xc3, 0xff, 0x7e, '"'};
    for (size_t pos = 0; pos < 24; pos++) {
        for (size_t k = 0; k < sizeof bad + sizeof good; k++) {
            char raw[128], value[25];
            memset(value, 'v', 24);
            value[24] = '\0';
            bool is_bad = k < sizeof bad;
            unsigned char c = is_bad ? bad[k] : good[k - sizeof bad];
            /* OWS at either end is trimmed, not part of the value. */
            if (!is_bad && (c == '\t' || c == ' ') && (pos == 0 || pos == 23))
                continue;
            value[pos] = (char)c;
            static const char head[] = "GET / HTTP/1.1\r\nHost: h\r\nX-V: ", tail[] = "\r\n\r\n";
            size_t n = 0;
            memcpy(raw, head, sizeof head - 1); /* value may hold a NUL: no string functions */
            n += sizeof head - 1;
            memcpy(raw + n, value, 24);
            n += 24;
            memcpy(raw + n, tail, sizeof tail - 1);
            n += sizeof tail - 1;
            struct parse *ps = parse_bytes(raw, n, &default_limits);
            if (is_bad && (ps->rc != ST_ERROR || ps->p.err_status != 400))
                fail_msg("byte 0x%02x at %zu: rc %d status %d", c, pos, ps->rc, ps->p.err_status);
            if (!is_bad && ps->rc != ST_DONE)
                fail_msg("byte 0x%02x at %zu refused: rc %d status %d", c, pos, ps->rc,
                         ps->p.err_status);
            parse_free(ps);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_header_value_bytes_everywhere),
        cmocka_unit_test(test_post_content_length),
        cmocka_unit_test(test_query_strings),
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_chunked_with_extensions_and_trailers),
        cmocka_unit_test(test_http10_keep_alive_rules),
        cmocka_unit_test(test_connection_close),
        cmocka_unit_test(test_expect_continue_head_before_body),
        cmocka_unit_test(test_fields_known_so_far),
        cmocka_unit_test(test_header_values_and_lookup),
        cmocka_unit_test(test_header_lookup_any_case),
        cmocka_unit_test(test_header_lookup_by_length_index),
        cmocka_unit_test(test_header_lookup_every_byte),
        cmocka_unit_test(test_leading_empty_lines_skipped),
        cmocka_unit_test(test_limits_are_inclusive),
        cmocka_unit_test(test_split_at_every_boundary),
        cmocka_unit_test(test_grow_one_byte_per_call),
        cmocka_unit_test(test_pipelining),
        cmocka_unit_test(test_bad_request_line),
        cmocka_unit_test(test_unsupported_version),
        cmocka_unit_test(test_regress_bare_lf),
        cmocka_unit_test(test_bad_header_lines),
        cmocka_unit_test(test_regress_obs_fold),
        cmocka_unit_test(test_regress_space_before_colon),
        cmocka_unit_test(test_ctl_in_header_value),
        cmocka_unit_test(test_host_rules),
        cmocka_unit_test(test_bad_content_length),
        cmocka_unit_test(test_regress_request_smuggling_duplicate_content_length),
        cmocka_unit_test(test_regress_request_smuggling_cl_te),
        cmocka_unit_test(test_unsupported_transfer_encoding),
        cmocka_unit_test(test_unknown_expectation),
        cmocka_unit_test(test_bad_chunk_size),
        cmocka_unit_test(test_regress_chunk_missing_crlf),
        cmocka_unit_test(test_regress_chunk_size_overflow),
        cmocka_unit_test(test_regress_chunk_extension_too_long),
        cmocka_unit_test(test_regress_long_request_line),
        cmocka_unit_test(test_regress_header_bytes),
        cmocka_unit_test(test_regress_empty_line_flood),
        cmocka_unit_test(test_regress_header_count),
        cmocka_unit_test(test_regress_trailer_bytes),
        cmocka_unit_test(test_regress_huge_content_length),
        cmocka_unit_test(test_regress_huge_chunked_body),
        cmocka_unit_test(test_body_too_large_message),
        cmocka_unit_test(test_regress_slow_header_rescan),
        cmocka_unit_test(test_regress_slow_chunked_rescan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
