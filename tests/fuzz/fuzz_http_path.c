/*
 * Fuzz target: api/http_path (http_path_split), differentially against a
 * byte-at-a-time reference that follows the contract of http_path.h: a
 * path is '/'-separated segments, each percent-decoded ("%XX", two hex
 * digits, else refused), at most HTTP_SEGMENT_MAX - 1 bytes, at most
 * HTTP_PATH_MAX_SEGMENTS of them, an empty last segment (a trailing slash)
 * dropped. The splitter searches 8 bytes at a time, so both must agree on
 * every input: accepted or refused alike, and the same segments.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/http_path.h"
#include "base/hex.h"

static bool reference_split(const char *path, size_t len, struct http_path *p)
{
    p->n = 0;
    if (len == 0 || path[0] != '/')
        return false;
    size_t i = 0;
    while (i < len) {
        i++; /* the '/' */
        if (p->n == HTTP_PATH_MAX_SEGMENTS)
            return false;
        struct http_segment *s = &p->seg[p->n++];
        s->len = 0;
        while (i < len && path[i] != '/') {
            char c = path[i];
            if (c == '%') {
                if (len - i < 3 || hex_value(path[i + 1]) < 0 || hex_value(path[i + 2]) < 0)
                    return false;
                c = (char)(hex_value(path[i + 1]) * 16 + hex_value(path[i + 2]));
                i += 2;
            }
            if (s->len == HTTP_SEGMENT_MAX - 1)
                return false;
            s->text[s->len++] = c;
            i++;
        }
        s->text[s->len] = '\0';
    }
    if (p->n > 0 && p->seg[p->n - 1].len == 0)
        p->n--;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_path got, want;
    const char *path = (const char *)data;
    bool ok = http_path_split(path, size, &got);
    bool ref = reference_split(path, size, &want);
    if (ok != ref)
        abort();
    if (!ok)
        return 0;
    if (got.n != want.n)
        abort();
    for (int i = 0; i < got.n; i++)
        if (got.seg[i].len != want.seg[i].len ||
            memcmp(got.seg[i].text, want.seg[i].text, got.seg[i].len + 1) != 0)
            abort();
    return 0;
}
