#include "core/tensor.h"

#include <stdio.h>

int64_t shape_count(const int64_t *shape, uint32_t ndim, int64_t limit)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > limit / shape[i])
            return -1;
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
