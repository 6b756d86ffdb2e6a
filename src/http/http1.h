/*
 * http1: an incremental, strict HTTP/1.1 request parser (RFC 9112).
 *
 * The parser works on the connection's receive buffer: `buf` holds the first
 * byte of the current request at buf[0] and `len` bytes are available. Call
 * http1_parse() again with the same buffer start (the buffer may have moved
 * in memory and grown) each time more bytes arrive. The parser keeps only
 * offsets, so moving the buffer is fine; it never re-scans bytes it has
 * already examined (a slowloris sending one byte per call costs O(1) each).
 * Decoding a chunked body rewrites bytes already passed in, so the buffer
 * must keep them as the parser left them: only append new bytes after len.
 *
 * Chunked bodies are decoded in place: on DONE the body is contiguous at
 * req->body. Trailers are parsed (bounded by the header limits) and ignored.
 *
 * Return values (base/status.h):
 *   ST_DONE      the request is complete; *req points into buf; the request
 *                occupied buf[0 .. p->consumed). Pipelined bytes after that
 *                belong to the next request: call http1_parser_init() and
 *                parse again from buf + consumed.
 *   ST_AGAIN     more bytes are needed. Once the head is complete,
 *                p->head_done is true and *req has its request line and
 *                headers (body not yet), so the caller can route early and
 *                answer `Expect: 100-continue`.
 *   ST_ERROR     malformed or over a limit; p->err_status is the HTTP status
 *                to answer (400, 413, 414, 417, 431, 501, 505) and p->err_msg a
 *                description: a static string, or for a 413 p->err_buf
 *                (valid until the parser is initialized again). The
 *                connection must be closed after the error response.
 */
#ifndef INFERD_HTTP_HTTP1_H
#define INFERD_HTTP_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"

#define HTTP1_MAX_HEADERS_CAP 256

/* Room for the message of http_body_too_large(). */
#define HTTP_BODY_TOO_LARGE_MAX 128

struct http1_limits {
    uint32_t max_request_line; /* bytes incl. CRLF; over → 414 */
    uint32_t max_header_bytes; /* request line + headers + final CRLF; over → 431 */
    uint32_t max_headers;      /* header fields; over → 431; <= HTTP1_MAX_HEADERS_CAP */
    uint64_t max_body;         /* decoded body bytes; over → 413 */
};

struct http_header {
    const char *name; /* not NUL-terminated */
    uint32_t name_len;
    const char *value; /* leading/trailing whitespace stripped */
    uint32_t value_len;
};

struct http1_request {
    const char *method;
    uint32_t method_len;
    const char *target; /* request-target as sent (origin-form, absolute-form or "*") */
    uint32_t target_len;
    const char *path; /* path of the target (after scheme://authority), up to '?' */
    uint32_t path_len;
    const char *query; /* after '?', NULL if none */
    uint32_t query_len;
    int version_minor; /* HTTP/1.0 → 0, HTTP/1.1 → 1 */
    uint32_t nheaders;
    /* When `indexed` (set by the front end once the headers are complete;
     * cleared with the fields before `headers`): bit (n & 63) is set for
     * every header name of n bytes, so that a lookup of a name whose
     * length no header has (most lookups: optional headers) ends at once. */
    uint64_t name_lengths;
    bool indexed;
    struct http_header headers[HTTP1_MAX_HEADERS_CAP];
    bool keep_alive;      /* after Connection header and version defaults */
    bool expect_continue; /* Expect: 100-continue */
    bool chunked;         /* Transfer-Encoding: chunked */
    bool has_content_length;
    uint64_t content_length;
    char *body; /* valid on DONE; NULL when the body is empty */
    uint64_t body_len;
};

/* Private to the parser: where a piece of the request lies in the buffer. */
struct http1_span {
    uint32_t off;
    uint32_t len;
};

struct http1_parser {
    struct http1_limits limits;
    bool head_done;
    size_t consumed;     /* on DONE: bytes of this request */
    int err_status;      /* on ERROR */
    const char *err_msg; /* on ERROR: static string or err_buf */
    char err_buf[HTTP_BODY_TOO_LARGE_MAX];
    /* Private state: offsets into the buffer (so that it may move); see
     * http1.c. */
    int _state;
    size_t _in;            /* first byte not yet consumed (start of the current line) */
    size_t _scan;          /* where the search for the current line's LF resumes */
    size_t _head_len;      /* bytes of the head incl. the blank line; the body starts here */
    size_t _trailer_start; /* offset of the trailer section (chunked) */
    uint64_t _body_len;    /* decoded body bytes so far */
    uint64_t _chunk_left;  /* data bytes of the current chunk not yet decoded */
    uint32_t _trailer_count;
    int _version_minor;
    bool _keep_alive, _expect_continue, _chunked, _has_content_length, _has_query;
    size_t _path_off; /* start of the path within the target (absolute-form) */
    uint64_t _content_length;
    struct http1_span _method, _target, _query;
    uint32_t _nheaders;
    struct http1_span _names[HTTP1_MAX_HEADERS_CAP];
    struct http1_span _values[HTTP1_MAX_HEADERS_CAP];
};

void http1_parser_init(struct http1_parser *p, const struct http1_limits *limits);
/* ST_DONE, ST_AGAIN or ST_ERROR: see the top of this file. */
enum status http1_parse(struct http1_parser *p, char *buf, size_t len, struct http1_request *req);

/* The message of a 413 for a request body over max_body bytes (the
 * server's --max-body-bytes), into out (HTTP_BODY_TOO_LARGE_MAX bytes):
 * "request body of N bytes exceeds the limit of M bytes (--max-body-bytes)",
 * "of at least N bytes" when `at_least` (a body whose length is not
 * announced: chunked, or HTTP/2 without content-length). Shared by HTTP/1.1
 * and HTTP/2; returns out. */
const char *http_body_too_large(char *out, uint64_t len, bool at_least, uint64_t max_body);

/* Indexes the lengths of req's header names (name_lengths), once its
 * headers are complete; a front end that adds a header afterwards must
 * call it again. */
void http1_request_index(struct http1_request *req);

/* The scan behind http1_header_n: case-insensitive, every header. */
const struct http_header *http1_header_scan(const struct http1_request *req, const char *name,
                                            size_t len);

/* Case-insensitive lookup of name[0..len); NULL if absent. A name of a
 * length no header has (by the index) is absent without a scan. */
static inline const struct http_header *http1_header_n(const struct http1_request *req,
                                                       const char *name, size_t len)
{
    bool may_have = !req->indexed || (req->name_lengths >> (len & 63) & 1);
    return may_have ? http1_header_scan(req, name, len) : NULL;
}

/* The same for a NUL-terminated name (inline: a literal's length is known
 * at compile time). */
static inline const struct http_header *http1_header(const struct http1_request *req,
                                                     const char *name)
{
    return http1_header_n(req, name, strlen(name));
}

#endif
