/*
 * json_cursor: an unchecked JSON text writer, for text whose longest form
 * the caller knows before writing it (the access log line, a span, a
 * response's head fields): the caller makes the room once, then each call
 * writes at p and returns the end, with no test per field and the cursor
 * kept in a register (a struct's length field written after every copy is
 * reloaded after every char store, which may alias it).
 *
 * Room each call needs: jc_str JC_STR_ROOM(n); jc_u64/jc_i64 NUMFMT_MAX;
 * jc_qraw n + 2; jc_put and jc_lit their length. Strings are always valid
 * JSON: control characters, '"' and '\\' escaped, valid UTF-8 kept, bytes
 * that are not valid UTF-8 written as \u00XX. Header-only; any thread.
 */
#ifndef INFERD_BASE_JSON_CURSOR_H
#define INFERD_BASE_JSON_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/json.h"
#include "base/numfmt.h"

/* Writes the escaped form of s[0..n) at p (s starts at a byte that
 * json_plain_run stopped at: escaping continues from there), within `room`
 * bytes; returns the end, or NULL when the next piece would not fit.
 * Valid UTF-8 goes as it is; '"' and '\\' get a backslash; control
 * characters and bytes that are not valid UTF-8 become \u00XX. */
static inline char *json_escape_tail(char *p, size_t room, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char *start = p;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c >= 0x80 ? json_utf8_seq_len((const unsigned char *)s + i, n - i) : 0;
        size_t out = k ? k : c == '"' || c == '\\' ? 2 : 6;
        if (out > room - (size_t)(p - start))
            return NULL;
        if (k) {
            memcpy(p, s + i, k); /* valid UTF-8 goes as it is */
            i += k;
        } else if (out == 2) {
            p[0] = '\\';
            p[1] = (char)c;
            i++;
        } else {
            memcpy(p, "\\u00", 4);
            p[4] = hex[c >> 4];
            p[5] = hex[c & 15];
            i++;
        }
        p += out;
        /* The next plain run: copied in one piece. */
        size_t j = i + json_plain_run(s + i, n - i);
        if (j - i > room - (size_t)(p - start))
            return NULL;
        memcpy(p, s + i, j - i);
        p += j - i;
        i = j;
    }
    return p;
}

#define JC_STR_ROOM(n) (6 * (size_t)(n) + 2)

static inline char *jc_put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* s must be a string literal. */
#define jc_lit(p, s) jc_put((p), "" s, sizeof("" s) - 1)

/* Values below 1000 (dimensions, statuses, batch sizes, small byte
 * counts) are written here; larger ones by numfmt. */
static inline char *jc_u64(char *p, uint64_t v)
{
    if (v >= 1000)
        return p + numfmt_u64(p, v);
    unsigned u = (unsigned)v;
    if (u >= 100) {
        *p++ = (char)('0' + u / 100);
        u %= 100;
        *p++ = (char)('0' + u / 10);
    } else if (u >= 10) {
        *p++ = (char)('0' + u / 10);
    }
    *p++ = (char)('0' + u % 10);
    return p;
}

static inline char *jc_i64(char *p, int64_t v)
{
    return v >= 0 ? jc_u64(p, (uint64_t)v) : p + numfmt_i64(p, v);
}

static inline char *jc_qraw(char *p, const char *s, size_t n)
{
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    return p + n + 2;
}

static inline char *jc_str(char *p, const char *s, size_t n)
{
    size_t i = json_plain_run(s, n);
    *p++ = '"';
    memcpy(p, s, i);
    p += i;
    if (i < n)
        p = json_escape_tail(p, SIZE_MAX, s + i, n - i); /* never NULL: unbounded */
    *p++ = '"';
    return p;
}

#endif
