#include "core/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    const char *config_name;
    size_t size;
} dtypes[DT_COUNT] = {
    [DT_INVALID] = {"INVALID", "TYPE_INVALID", 0},
    [DT_BOOL] = {"BOOL", "TYPE_BOOL", 1},
    [DT_UINT8] = {"UINT8", "TYPE_UINT8", 1},
    [DT_UINT16] = {"UINT16", "TYPE_UINT16", 2},
    [DT_UINT32] = {"UINT32", "TYPE_UINT32", 4},
    [DT_UINT64] = {"UINT64", "TYPE_UINT64", 8},
    [DT_INT8] = {"INT8", "TYPE_INT8", 1},
    [DT_INT16] = {"INT16", "TYPE_INT16", 2},
    [DT_INT32] = {"INT32", "TYPE_INT32", 4},
    [DT_INT64] = {"INT64", "TYPE_INT64", 8},
    [DT_FP16] = {"FP16", "TYPE_FP16", 2},
    [DT_FP32] = {"FP32", "TYPE_FP32", 4},
    [DT_FP64] = {"FP64", "TYPE_FP64", 8},
    [DT_BYTES] = {"BYTES", "TYPE_STRING", 0},
    [DT_BF16] = {"BF16", "TYPE_BF16", 2},
};

static int valid(enum dtype t)
{
    return t > DT_INVALID && t < DT_COUNT;
}

const char *dtype_name(enum dtype t)
{
    return valid(t) ? dtypes[t].name : dtypes[DT_INVALID].name;
}

const char *dtype_config_name(enum dtype t)
{
    return valid(t) ? dtypes[t].config_name : dtypes[DT_INVALID].config_name;
}

size_t dtype_size(enum dtype t)
{
    return valid(t) ? dtypes[t].size : 0;
}

static int equals(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && memcmp(s, name, n) == 0;
}

enum dtype dtype_from_name(const char *s, size_t n)
{
    for (int t = DT_INVALID + 1; t < DT_COUNT; t++)
        if (equals(s, n, dtypes[t].name))
            return (enum dtype)t;
    return DT_INVALID;
}

enum dtype dtype_from_config_name(const char *s, size_t n)
{
    for (int t = DT_INVALID + 1; t < DT_COUNT; t++)
        if (equals(s, n, dtypes[t].config_name))
            return (enum dtype)t;
    return DT_INVALID;
}
