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
 *   jc_* (base/json_cursor.h): unchecked, for text whose longest form
 *   the caller bounds at compile time (the access log line, one span).
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

#include "base/json_cursor.h"

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

#endif
