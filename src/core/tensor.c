#include "core/tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

int64_t shape_count(const int64_t *shape, uint32_t ndim, int64_t limit)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ST_ERROR;
        if (shape[i] != 0 && n > limit / shape[i])
            return ST_ERROR;
        n *= shape[i];
    }
    return n;
}

int64_t tensor_count(const struct tensor *t, int64_t limit)
{
    return shape_count(t->shape, t->ndim, limit);
}

void shape_format(const int64_t *shape, uint32_t ndim, char *out, size_t size)
{
    size_t off = 0;
    if (size == 0)
        return;
    out[0] = '\0';
    off += (size_t)snprintf(out + off, size - off, "[");
    for (uint32_t i = 0; i < ndim && off < size; i++)
        off += (size_t)snprintf(out + off, size - off, "%s%lld", i ? "," : "",
                                (long long)shape[i]);
    if (off < size)
        snprintf(out + off, size - off, "]");
}

static uint32_t read_le32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

int tensor_bytes_split(struct arena *arena, struct tensor *t, const char *p, size_t size,
                       int64_t count, const char *what, struct error *err)
{
    if ((uint64_t)count > size / TENSOR_BYTES_PREFIX)
        return error_set(err, 400,
                         "input '%s': %s of %zu bytes cannot hold %" PRId64
                         " BYTES elements (each takes at least %d bytes)",
                         t->name, what, size, count, TENSOR_BYTES_PREFIX);
    struct tensor_bytes *elems = NULL;
    if (count > 0) {
        elems = arena_alloc(arena, (size_t)count * sizeof *elems);
        if (!elems)
            return error_set(err, 413, "input '%s': request too large to decode", t->name);
    }
    size_t off = 0, total = 0;
    for (int64_t i = 0; i < count; i++) {
        if (size - off < TENSOR_BYTES_PREFIX)
            return error_set(err, 400,
                             "input '%s': BYTES element %" PRId64
                             " is truncated: %zu bytes left for its %d-byte length",
                             t->name, i, size - off, TENSOR_BYTES_PREFIX);
        uint32_t n = read_le32(p + off);
        off += TENSOR_BYTES_PREFIX;
        if (n > size - off)
            return error_set(err, 400,
                             "input '%s': BYTES element %" PRId64 " has length %" PRIu32
                             " but only %zu bytes are left",
                             t->name, i, n, size - off);
        elems[i].ptr = p + off;
        elems[i].len = n;
        off += n;
        total += n;
    }
    if (off != size)
        return error_set(err, 400,
                         "input '%s': %zu of the %zu bytes of %s are left after the %" PRId64
                         " BYTES elements of the shape",
                         t->name, size - off, size, what, count);
    t->data = elems ? (void *)elems : (void *)"";
    t->nbytes = total;
    return 0;
}

size_t tensor_copy_size(const struct tensor *t)
{
    size_t n = t->nbytes + 16;
    if (t->dtype == DT_BYTES)
        n += (size_t)tensor_count(t, INT64_MAX) * sizeof(struct tensor_bytes);
    return n;
}

char *tensor_copy_to(struct tensor *dst, const struct tensor *src, char *p)
{
    *dst = *src;
    p += (16 - (uintptr_t)p % 16) % 16;
    dst->data = p;
    if (src->dtype != DT_BYTES) {
        if (src->nbytes)
            memcpy(p, src->data, src->nbytes);
        return p + src->nbytes;
    }
    int64_t count = tensor_count(src, INT64_MAX);
    struct tensor_bytes *el = (struct tensor_bytes *)p;
    const struct tensor_bytes *from = src->data;
    p += (size_t)count * sizeof *el;
    for (int64_t e = 0; e < count; e++) {
        el[e].ptr = p;
        el[e].len = from[e].len;
        if (from[e].len)
            memcpy(p, from[e].ptr, from[e].len);
        p += from[e].len;
    }
    return p;
}
