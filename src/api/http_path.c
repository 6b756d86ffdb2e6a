#include "api/http_path.h"

#include <stdio.h>
#include <string.h>

#include "base/hex.h"

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
        while (i < len && path[i] != '/') {
            char c = path[i];
            if (c == '%') {
                int hi = i + 2 < len ? hex_value(path[i + 1]) : NOT_FOUND;
                int lo = i + 2 < len ? hex_value(path[i + 2]) : NOT_FOUND;
                if (hi < 0 || lo < 0)
                    return false;
                c = (char)(hi * 16 + lo);
                i += 2;
            }
            if (s->len + 1 >= HTTP_SEGMENT_MAX)
                return false;
            s->text[s->len++] = c;
            i++;
        }
        s->text[s->len] = '\0';
    }
    /* A trailing slash leaves an empty last segment: ignore it. */
    if (p->n > 0 && p->seg[p->n - 1].len == 0)
        p->n--;
    return true;
}

bool http_method_is(const struct http_txn *txn, const char *m)
{
    return txn->req.method_len == strlen(m) && memcmp(txn->req.method, m, txn->req.method_len) == 0;
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
