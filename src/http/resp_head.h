/*
 * resp_head: the head of a REST response as each protocol sends it.
 *
 * HTTP/1.1 (tcp_conn.c): the status line and header lines as text.
 *
 * HTTP/2 (h2.c) and
 * HTTP/3 (h3_stream.c) send them: :status, server, date, content-length (unless
 * the body is streamed), content-type (when given) and the handler's
 * extra header lines ("Name: value\r\n", txn.h), their names lowercased
 * as both protocols require. A line without a colon is skipped; lines
 * beyond HTTP_RESP_HEAD_FIELDS fields are dropped.
 *
 * Threads: any; the Date value is cached per thread.
 */
#ifndef INFERD_HTTP_RESP_HEAD_H
#define INFERD_HTTP_RESP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/txn.h"

#define HTTP_RESP_HEAD_FIELDS 40

struct http_resp_field {
    const char *name, *value; /* into the struct http_resp_head or the caller's strings */
    size_t name_len, value_len;
};

/* The fields and the storage they point into. */
struct http_resp_head {
    char status[8];
    char length[24];
    char extra[sizeof((struct http_txn *)0)->extra_headers];
    struct http_resp_field fields[HTTP_RESP_HEAD_FIELDS];
    size_t n;
};

/* Builds h; content_type and extra may be NULL; length: the body's bytes
 * (unused when streamed). h is valid while content_type is. */
void http_resp_head_build(struct http_resp_head *h, int status, const char *content_type,
                          const char *extra, bool streamed, uint64_t length);

/* Formats an HTTP/1.1 response head into b (reset first): the status
 * line, Server, Date, Content-Length (content_length >= 0), or for a
 * streamed response (content_length < 0) chunked transfer coding when the
 * client speaks HTTP/1.1 (version_minor 1; else the body ends when the
 * connection closes), Content-Type when given, Connection (close unless
 * keep_alive; keep-alive spelled out for HTTP/1.0), the handler's
 * extra_headers lines, the blank line. No printf: appends of known
 * pieces, the status line and Date cached per thread and second. An
 * append that fails (b's ceiling, memory) is left out and recorded in
 * b->err (buf.h). */
void http_resp_head_h1(struct buf *b, int status, const char *content_type,
                       const char *extra_headers, bool keep_alive, int version_minor,
                       int64_t content_length);

#endif
