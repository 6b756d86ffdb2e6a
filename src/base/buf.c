#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"

void buf_init(struct buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
    b->err = 0;
}

void buf_free(struct buf *b)
{
    mem_free(b->data);
    buf_init(b, b->max);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->err = 0;
}

static int fail(struct buf *b, int rc)
{
    if (!b->err)
        b->err = rc;
    return rc;
}

int buf_grow(struct buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return fail(b, -E2BIG);
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max)
        cap = b->max;
    char *p = mem_realloc(b->data, cap);
    if (!p)
        return fail(b, -ENOMEM);
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return fail(b, -EINVAL);
    if ((size_t)n < sizeof small)
        return buf_append(b, small, (size_t)n);
    int rc = buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}
