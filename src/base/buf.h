/*
 * buf: a growable byte buffer with a ceiling (as curl's dynbuf).
 *
 * Appends that would grow the buffer past `max` fail with -E2BIG and leave
 * the content unchanged; allocation failure gives -ENOMEM. The first failure
 * is also remembered in `err` (sticky) so that a sequence of appends, e.g. a
 * JSON document, can be checked once at the end.
 */
#ifndef INFERD_BASE_BUF_H
#define INFERD_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

struct buf {
    char *data;  /* owned; NULL until the first append */
    size_t len;  /* bytes in use */
    size_t cap;  /* bytes allocated */
    size_t max;  /* ceiling on len */
    int err;     /* first error of an append (0, -E2BIG or -ENOMEM) */
};

void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);
/* Empties the buffer and clears `err`, keeping the allocation. */
void buf_reset(struct buf *b);
/* Grows the allocation for `extra` more bytes after len (the slow path of
 * the functions below): 0, -E2BIG past max, -ENOMEM. */
int buf_grow(struct buf *b, size_t extra);

/* Whether `extra` more bytes fit in the allocation and under max (max may
 * have been lowered below the allocation since it grew). */
static inline int buf_fits(const struct buf *b, size_t extra)
{
    return extra <= b->cap - b->len && extra <= b->max - b->len;
}

/* Makes room for `extra` more bytes after len. Inline: most appends fit. */
static inline int buf_reserve(struct buf *b, size_t extra)
{
    return b->len <= b->max && buf_fits(b, extra) ? 0 : buf_grow(b, extra);
}

static inline int buf_append(struct buf *b, const void *p, size_t n)
{
    int rc = buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static inline int buf_putc(struct buf *b, char c)
{
    int rc = buf_reserve(b, 1);
    if (rc)
        return rc;
    b->data[b->len++] = c;
    return 0;
}
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes (memmove of the rest). */
void buf_consume(struct buf *b, size_t n);

#endif
