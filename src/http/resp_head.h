/*
 * resp_head: the header fields of a REST response as HTTP/2 (h2.c) and
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

#endif
