/*
 * http_path: what every HTTP front end reads of a request line: the path
 * as percent-decoded segments, and the method. Used by the entry
 * (api/http_api.c) to pick a front end and by the front ends to pick a
 * handler.
 *
 * No allocation: a struct http_path is a fixed array (on the stack). All
 * functions run on the connection's I/O thread.
 */
#ifndef INFERD_API_HTTP_PATH_H
#define INFERD_API_HTTP_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "http/txn.h"

#define HTTP_PATH_MAX_SEGMENTS 8
#define HTTP_SEGMENT_MAX 256

struct http_segment {
    char text[HTTP_SEGMENT_MAX]; /* percent-decoded, NUL-terminated */
    size_t len;
};

struct http_path {
    struct http_segment seg[HTTP_PATH_MAX_SEGMENTS];
    int n; /* a trailing slash adds no empty segment */
};

/* Splits path[0..len) into p. Returns false when the path does not start
 * with '/', has more than HTTP_PATH_MAX_SEGMENTS segments, a segment of
 * HTTP_SEGMENT_MAX bytes or more, or a bad percent escape (the caller
 * answers 404). */
bool http_path_split(const char *path, size_t len, struct http_path *p);
/* Whether segment i exists and equals s. Inline: the length of a literal
 * is known at compile time, and routing compares many. */
static inline bool http_path_is(const struct http_path *p, int i, const char *s)
{
    size_t n = strlen(s);
    return i < p->n && p->seg[i].len == n && memcmp(p->seg[i].text, s, n) == 0;
}

/* Whether the request's method is m (case-sensitive, as RFC 9110 says).
 * Inline: m is a literal, its length known at compile time. */
static inline bool http_method_is(const struct http_txn *txn, const char *m)
{
    size_t n = strlen(m);
    return txn->req.method_len == n && memcmp(txn->req.method, m, n) == 0;
}
/* GET or HEAD: HEAD is accepted wherever GET is. */
bool http_method_is_get(const struct http_txn *txn);
/* Answers 405 with an Allow header listing `allow` and a JSON error body
 * naming the method. */
void http_method_not_allowed(struct http_txn *txn, const char *allow);

#endif
