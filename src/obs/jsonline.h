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

/* Eight bytes at once: nonzero when any byte of w is < 0x20, '"', '\\' or
 * >= 0x80 (may also flag bytes after the first such byte; the caller then
 * looks at the bytes one by one). */
static inline uint64_t jl_special8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
    uint64_t zero_q = (quote - ones) & ~quote, zero_b = (bslash - ones) & ~bslash;
    uint64_t below = (w - ones * 0x20) & ~w;
    return (zero_q | zero_b | below | w) & high;
}

/* Length of the leading run of s[0..n) that needs no escaping. */
static inline size_t jl_plain_run(const char *s, size_t n)
{
    size_t j = 0;
    uint64_t w;
    for (; j + 8 <= n; j += 8) {
        memcpy(&w, s + j, 8);
        if (jl_special8(w))
            break;
    }
    if (j + 8 > n && n >= 8) {
        /* Every whole word was plain: the last eight bytes, overlapping
         * the last of them, settle the tail at once. */
        memcpy(&w, s + n - 8, 8);
        if (!jl_special8(w))
            return n;
    }
    for (; j < n; j++) {
        unsigned char c = (unsigned char)s[j];
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
            break;
    }
    return j;
}

/* A quoted, escaped JSON string. */
static inline void jl_str(struct jline *l, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = jl_plain_run(s, n);
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
        size_t j = i + jl_plain_run(s + i, n - i);
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
