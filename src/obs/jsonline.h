/*
 * jsonline: a minimal append-only JSON text builder into a fixed buffer,
 * for the access log and the OTLP encoder, where the general writer's
 * per-character escaping and separator bookkeeping showed in profiles.
 *
 * The caller writes keys and punctuation as literals (jl_lit) and values
 * with jl_str (escaped, always valid JSON: control characters, '"', '\\'
 * escaped, invalid UTF-8 bytes written as \u00XX), jl_u64, jl_i64. When the
 * buffer is too small `overflow` is set and further appends do nothing; the
 * caller discards the text.
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

/* Numbers are formatted in place when the room left holds the longest. */
static inline void jl_u64(struct jline *l, uint64_t v)
{
    if (!l->overflow && l->cap - l->n >= NUMFMT_MAX) {
        l->n += numfmt_u64(l->p + l->n, v);
        return;
    }
    char tmp[NUMFMT_MAX];
    jl_put(l, tmp, numfmt_u64(tmp, v));
}

static inline void jl_i64(struct jline *l, int64_t v)
{
    if (!l->overflow && l->cap - l->n >= NUMFMT_MAX) {
        l->n += numfmt_i64(l->p + l->n, v);
        return;
    }
    char tmp[NUMFMT_MAX];
    jl_put(l, tmp, numfmt_i64(tmp, v));
}

/* A quoted, escaped JSON string. */
static inline void jl_str(struct jline *l, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = json_plain_run(s, n);
    if (i == n && !l->overflow && n + 2 <= l->cap - l->n) {
        /* The common case: nothing to escape, and room for all of it. */
        char *p = l->p + l->n;
        p[0] = '"';
        memcpy(p + 1, s, n);
        p[n + 1] = '"';
        l->n += n + 2;
        return;
    }
    jl_lit(l, "\"");
    jl_put(l, s, i); /* the plain run found above */
    while (i < n && !l->overflow) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c >= 0x80 ? json_utf8_seq_len((const unsigned char *)s + i, n - i) : 0;
        if (k) {
            jl_put(l, s + i, k); /* valid UTF-8 goes as it is */
            i += k;
        } else if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            jl_put(l, e, 2);
            i++;
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            jl_put(l, e, 6);
            i++;
        }
        /* The next plain run: copied in one piece. */
        size_t j = i + json_plain_run(s + i, n - i);
        jl_put(l, s + i, j - i);
        i = j;
    }
    jl_lit(l, "\"");
}

/* A quoted string the caller produced itself and knows needs no escaping
 * (hex ids, timestamps, numeric addresses, fixed names). */
static inline void jl_qraw(struct jline *l, const char *s, size_t n)
{
    if (l->overflow || n + 2 > l->cap - l->n) {
        l->overflow = true;
        return;
    }
    char *p = l->p + l->n;
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    l->n += n + 2;
}

static inline void jl_cstr(struct jline *l, const char *s)
{
    jl_str(l, s, strlen(s));
}

#endif
