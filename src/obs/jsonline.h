/*
 * jsonline: minimal append-only JSON text builders for the access log and
 * the OTLP encoder, where the general writer's per-character escaping and
 * separator bookkeeping showed in profiles. Two forms:
 *
 *   jl_* (struct jline): a checked builder into a fixed buffer, for text
 *   of no known bound (the OTLP envelope's service name). Keys and
 *   punctuation as literals (jl_lit), values with jl_str. When the buffer
 *   is too small `overflow` is set and further appends do nothing; the
 *   caller discards the text.
 *
 *   jc_* (a char * cursor): unchecked, for text whose longest form the
 *   caller bounds at compile time (the access log line, one span): no
 *   test per field, the cursor kept in a register.
 *
 * Strings are always valid JSON: control characters, '"' and '\\' escaped,
 * valid UTF-8 kept, bytes that are not valid UTF-8 written as \u00XX.
 */
#ifndef INFERD_OBS_JSONLINE_H
#define INFERD_OBS_JSONLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/json.h"
#include "base/numfmt.h"

struct jline {
    char *p;
    size_t n, cap;
    bool overflow;
};

static inline void jl_init(struct jline *l, char *p, size_t cap)
{
    l->p = p;
    l->n = 0;
    l->cap = cap;
    l->overflow = false;
}

static inline void jl_put(struct jline *l, const char *s, size_t n)
{
    if (l->overflow || n > l->cap - l->n) {
        l->overflow = true;
        return;
    }
    memcpy(l->p + l->n, s, n);
    l->n += n;
}

/* s must be a string literal ("" s does not compile otherwise). */
#define jl_lit(l, s) jl_put((l), "" s, sizeof("" s) - 1)

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

/* A quoted, escaped JSON string. */
static inline void jl_str(struct jline *l, const char *s, size_t n)
{
    if (l->overflow)
        return;
    size_t room = l->cap - l->n, i = json_plain_run(s, n);
    if (i + 2 > room) {
        l->overflow = true;
        return;
    }
    char *p = l->p + l->n;
    *p++ = '"';
    memcpy(p, s, i); /* the plain run found above: often the whole string */
    p += i;
    if (i < n) {
        /* room - i - 2: what is left after the run and the two quotes. */
        p = json_escape_tail(p, room - i - 2, s + i, n - i);
        if (!p) {
            l->overflow = true;
            return;
        }
    }
    *p++ = '"';
    l->n = (size_t)(p - l->p);
}

static inline void jl_cstr(struct jline *l, const char *s)
{
    jl_str(l, s, strlen(s));
}

/*
 * The unchecked cursor, for a text whose longest form is known before it
 * is written (the access log line: every field has a cap, so its bound is
 * a constant the caller checks at compile time). Each call writes at p and
 * returns the end; the caller guarantees the room: jc_str needs
 * JC_STR_ROOM(n), numbers NUMFMT_MAX, the others their length (+ 2 quotes
 * for jc_qraw). The cursor stays in a register, where jl_*'s bookkeeping
 * went through memory after every copy (a char store may alias it).
 */
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
