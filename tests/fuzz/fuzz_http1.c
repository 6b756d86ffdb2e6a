/*
 * Fuzz target for the HTTP/1.1 request parser.
 *
 * Input: byte 0 is a control byte (bit 7 picks tight or roomy limits, the
 * rest seeds the split points); the remaining bytes are what a client sent.
 *
 * Checks, beyond what ASan/UBSan catch:
 *   - every DONE is self-consistent (pointers inside the request's bytes,
 *     lengths within the limits, trimmed values, ...);
 *   - pipelined parsing (init again at buf + consumed while DONE) terminates;
 *   - feeding the same bytes in growing pieces, each appended to a copy of
 *     the buffer that moved (as a connection does, keeping what the parser
 *     rewrote), ends exactly as the one-shot parse: same result, status and
 *     message, same request fields and body bytes.
 * A failed check aborts, so the replay test in `make test` fails too.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http1.h"

static const struct http1_limits roomy = {
    .max_request_line = 8192, .max_header_bytes = 16384, .max_headers = 64, .max_body = 1 << 20};
/* Small enough that short inputs reach every limit. */
static const struct http1_limits tight = {
    .max_request_line = 48, .max_header_bytes = 160, .max_headers = 4, .max_body = 24};

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_http1: check failed at line %d: %s\n", __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Everything observable about a parse as numbers, with pointers turned into
 * offsets from the buffer so that parses in different buffers compare. */
struct outcome {
    size_t n;
    int64_t v[32 + 4 * HTTP1_MAX_HEADERS_CAP];
};

static void put(struct outcome *o, int64_t x)
{
    CHECK(o->n < sizeof o->v / sizeof *o->v);
    o->v[o->n++] = x;
}

static int64_t offset(const char *p, const char *buf)
{
    return p ? (int64_t)(p - buf) : -1;
}

static void record(struct outcome *o, const struct http1_parser *p, const struct http1_request *req,
                   const char *buf, int rc)
{
    o->n = 0;
    put(o, rc);
    if (rc == ST_ERROR) {
        put(o, p->err_status);
        put(o, (int64_t)(intptr_t)p->err_msg);
        return;
    }
    put(o, rc == ST_DONE ? (int64_t)p->consumed : -1);
    put(o, p->head_done);
    put(o, offset(req->method, buf));
    put(o, req->method_len);
    put(o, offset(req->target, buf));
    put(o, req->target_len);
    put(o, offset(req->path, buf));
    put(o, req->path_len);
    put(o, offset(req->query, buf));
    put(o, req->query_len);
    put(o, req->version_minor);
    put(o, req->keep_alive);
    put(o, req->expect_continue);
    put(o, req->chunked);
    put(o, req->has_content_length);
    put(o, (int64_t)req->content_length);
    put(o, offset(req->body, buf));
    put(o, (int64_t)req->body_len);
    put(o, req->nheaders);
    for (uint32_t i = 0; i < req->nheaders; i++) {
        put(o, offset(req->headers[i].name, buf));
        put(o, req->headers[i].name_len);
        put(o, offset(req->headers[i].value, buf));
        put(o, req->headers[i].value_len);
    }
}

static bool same_outcome(const struct outcome *a, const struct outcome *b)
{
    return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof *a->v) == 0;
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static void check_span(const char *p, uint32_t len, const char *buf, size_t end)
{
    CHECK(p >= buf && (size_t)(p - buf) + len <= end);
}

/* What every result must satisfy, whatever the input. */
static void check_result(const struct http1_parser *p, const struct http1_request *req,
                         const char *buf, size_t len, int rc)
{
    CHECK(rc == ST_DONE || rc == ST_AGAIN || rc == ST_ERROR);
    if (rc == ST_ERROR) {
        int s = p->err_status;
        CHECK(s == 400 || s == 413 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505);
        CHECK(p->err_msg != NULL);
        CHECK(!req->keep_alive);
        return;
    }
    size_t end = rc == ST_DONE ? p->consumed : len;
    CHECK(end <= len);
    CHECK(req->nheaders <= p->limits.max_headers && req->nheaders <= HTTP1_MAX_HEADERS_CAP);
    for (uint32_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        check_span(h->name, h->name_len, buf, end);
        check_span(h->value, h->value_len, buf, end);
        CHECK(h->name_len > 0);
        for (uint32_t j = 0; j < h->name_len; j++)
            CHECK(is_tchar((unsigned char)h->name[j]));
        if (h->value_len) {
            CHECK(h->value[0] != ' ' && h->value[0] != '\t');
            CHECK(h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t');
        }
    }
    CHECK(http1_header(req, "") == NULL);
    if (req->method) {
        check_span(req->method, req->method_len, buf, end);
        check_span(req->target, req->target_len, buf, end);
        /* The path lies inside the target: all of it (origin-form, "*"),
         * or after scheme://authority (absolute-form). */
        CHECK(req->path >= req->target &&
              req->path + req->path_len <= req->target + req->target_len);
        size_t path_off = (size_t)(req->path - req->target);
        if (path_off == 0) {
            CHECK(req->target[0] == '/' || (req->target_len == 1 && req->target[0] == '*'));
        } else {
            CHECK(strncasecmp(req->target, "http://", 7) == 0 ||
                  strncasecmp(req->target, "https://", 8) == 0);
            CHECK(req->path_len == 0 || req->path[0] == '/');
            CHECK(memchr(req->target, '?', path_off) == NULL);
        }
        if (req->query)
            CHECK(req->query == req->path + req->path_len + 1 &&
                  path_off + req->path_len + 1 + req->query_len == req->target_len);
        else
            CHECK(path_off + req->path_len == req->target_len);
        CHECK(req->version_minor == 0 || req->version_minor == 1);
    }
    if (rc != ST_DONE) {
        CHECK(req->body == NULL && req->body_len == 0);
        return;
    }
    CHECK(p->head_done && req->method != NULL);
    CHECK(p->consumed > 0);
    CHECK(!(req->chunked && req->has_content_length));
    CHECK(req->body_len <= p->limits.max_body);
    if (req->has_content_length && !req->chunked)
        CHECK(req->body_len == req->content_length);
    if (!req->chunked && !req->has_content_length)
        CHECK(req->body_len == 0);
    CHECK((req->body == NULL) == (req->body_len == 0));
    if (req->body)
        check_span(req->body, (uint32_t)req->body_len, buf, end);
    if (req->version_minor == 1)
        CHECK(http1_header(req, "HOST") != NULL);
    const struct http_header *cl = http1_header(req, "content-length");
    CHECK((cl != NULL) == req->has_content_length);
}

/* Decoding rewrites the request's own bytes only: the pipelined bytes after
 * it must be as the client sent them. */
static void check_untouched(const char *buf, const char *input, size_t from, size_t to)
{
    if (to > from)
        CHECK(memcmp(buf + from, input + from, to - from) == 0);
}

static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http1_request req;
    static struct outcome once, split;
    struct http1_parser p;

    if (size == 0)
        return 0;
    uint8_t control = data[0];
    const char *input = (const char *)data + 1;
    size_t n = size - 1;
    const struct http1_limits *limits = control & 0x80 ? &tight : &roomy;

    /* One shot, then the requests pipelined behind it. */
    char *whole = malloc(n ? n : 1);
    CHECK(whole != NULL);
    if (n)
        memcpy(whole, input, n);
    http1_parser_init(&p, limits);
    int rc = http1_parse(&p, whole, n, &req);
    check_result(&p, &req, whole, n, rc);
    record(&once, &p, &req, whole, rc);
    size_t once_consumed = rc == ST_DONE ? p.consumed : 0;
    char *once_body = req.body;
    uint64_t once_body_len = req.body_len;
    if (rc == ST_DONE)
        check_untouched(whole, input, once_consumed, n);

    size_t off = 0;
    while (rc == ST_DONE && off + p.consumed < n) {
        off += p.consumed;
        http1_parser_init(&p, limits);
        rc = http1_parse(&p, whole + off, n - off, &req);
        check_result(&p, &req, whole + off, n - off, rc);
    }

    /* The same bytes in growing pieces, in a buffer that moves each time. */
    uint32_t seed = 0x9e3779b9u ^ control;
    uint32_t max_step = 1u << ((control >> 4) & 7); /* 1 .. 128 */
    char *buf = NULL;
    size_t len = 0;
    http1_parser_init(&p, limits);
    do {
        size_t step = 1 + next_random(&seed) % max_step;
        size_t grown = n - len < step ? n : len + step;
        char *moved = malloc(grown ? grown : 1);
        CHECK(moved != NULL);
        if (len)
            memcpy(moved, buf, len);
        if (grown > len)
            memcpy(moved + len, input + len, grown - len);
        free(buf);
        buf = moved;
        len = grown;
        rc = http1_parse(&p, buf, len, &req);
        check_result(&p, &req, buf, len, rc);
    } while (rc == ST_AGAIN && len < n);
    record(&split, &p, &req, buf, rc);

    if (!same_outcome(&once, &split)) {
        fprintf(stderr, "fuzz_http1: split parse differs from one-shot (rc %d/%lld)\n", rc,
                (long long)once.v[0]);
        for (size_t i = 0; i < once.n || i < split.n; i++)
            fprintf(stderr, "  [%zu] %lld %lld\n", i, i < once.n ? (long long)once.v[i] : 0,
                    i < split.n ? (long long)split.v[i] : 0);
        abort();
    }
    if (rc == ST_DONE) {
        CHECK(p.consumed == once_consumed);
        check_untouched(buf, input, p.consumed, len);
        CHECK(req.body_len == once_body_len);
        if (req.body_len)
            CHECK(memcmp(req.body, once_body, req.body_len) == 0);
    }

    free(buf);
    free(whole);
    return 0;
}
