#include "api/http_path.h"

#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/hex.h"

/* The first '/' or '%' of s[i..len), or len: 8 bytes at a time (a byte
 * equal to c zeroes in w ^ c; the lowest zero byte's high bit is exact). */
static size_t plain_run(const char *s, size_t i, size_t len)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    for (; len - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        w = le64toh(w);
        uint64_t a = w ^ (ones * '/'), b = w ^ (ones * '%');
        uint64_t z = (((a - ones) & ~a) | ((b - ones) & ~b)) & highs;
        if (z)
            return i + (size_t)(__builtin_ctzll(z) >> 3);
    }
    while (i < len && s[i] != '/' && s[i] != '%')
        i++;
    return i;
}

bool http_path_split(const char *path, size_t len, struct http_path *p)
{
    p->n = 0;
    size_t i = 0;
    if (len == 0 || path[0] != '/')
        return false;
    while (i < len) {
        i++; /* skip '/' */
        if (p->n == HTTP_PATH_MAX_SEGMENTS)
            return false;
        struct http_segment *s = &p->seg[p->n++];
        s->len = 0;
        for (;;) {
            /* A run without escapes is copied in one piece. */
            size_t run = i;
            i = plain_run(path, i, len);
            if (i - run >= HTTP_SEGMENT_MAX - s->len)
                return false;
            memcpy(s->text + s->len, path + run, i - run);
            s->len += i - run;
            if (i == len || path[i] == '/')
                break;
            int hi = i + 2 < len ? hex_value(path[i + 1]) : NOT_FOUND;
            int lo = i + 2 < len ? hex_value(path[i + 2]) : NOT_FOUND;
            if (hi < 0 || lo < 0 || s->len + 1 >= HTTP_SEGMENT_MAX)
                return false;
            s->text[s->len++] = (char)(hi * 16 + lo);
            i += 3;
        }
        s->text[s->len] = '\0';
    }
    /* A trailing slash leaves an empty last segment: ignore it. */
    if (p->n > 0 && p->seg[p->n - 1].len == 0)
        p->n--;
    return true;
}

bool http_method_is_get(const struct http_txn *txn)
{
    return http_method_is(txn, "GET") || http_method_is(txn, "HEAD");
}

void http_method_not_allowed(struct http_txn *txn, const char *allow)
{
    http_txn_add_header(txn, "Allow", allow);
    char msg[128];
    snprintf(msg, sizeof msg, "method %.*s not allowed; use %s", (int)txn->req.method_len,
             txn->req.method, allow);
    http_txn_error(txn, 405, msg);
}
