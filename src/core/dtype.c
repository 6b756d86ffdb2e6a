#include "core/dtype.h"

#include <string.h>

/* Names with their lengths: a request's datatype is looked up here for
 * every input. */
#define NAME(s) s, sizeof s - 1
static const struct {
    const char *name;
    size_t name_len;
    const char *config_name;
    size_t config_name_len;
    size_t size;
} dtypes[DT_COUNT] = {
    [DT_INVALID] = {NAME("INVALID"), NAME("TYPE_INVALID"), 0},
    [DT_BOOL] = {NAME("BOOL"), NAME("TYPE_BOOL"), 1},
    [DT_UINT8] = {NAME("UINT8"), NAME("TYPE_UINT8"), 1},
    [DT_UINT16] = {NAME("UINT16"), NAME("TYPE_UINT16"), 2},
    [DT_UINT32] = {NAME("UINT32"), NAME("TYPE_UINT32"), 4},
    [DT_UINT64] = {NAME("UINT64"), NAME("TYPE_UINT64"), 8},
    [DT_INT8] = {NAME("INT8"), NAME("TYPE_INT8"), 1},
    [DT_INT16] = {NAME("INT16"), NAME("TYPE_INT16"), 2},
    [DT_INT32] = {NAME("INT32"), NAME("TYPE_INT32"), 4},
    [DT_INT64] = {NAME("INT64"), NAME("TYPE_INT64"), 8},
    [DT_FP16] = {NAME("FP16"), NAME("TYPE_FP16"), 2},
    [DT_FP32] = {NAME("FP32"), NAME("TYPE_FP32"), 4},
    [DT_FP64] = {NAME("FP64"), NAME("TYPE_FP64"), 8},
    [DT_BYTES] = {NAME("BYTES"), NAME("TYPE_STRING"), 0},
    [DT_BF16] = {NAME("BF16"), NAME("TYPE_BF16"), 2},
};
#undef NAME

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

static int equals(const char *s, size_t n, const char *name, size_t name_len)
{
    return name_len == n && s[0] == name[0] && memcmp(s, name, n) == 0;
}

enum dtype dtype_from_name(const char *s, size_t n)
{
    /* The everyday ones first: every input of a JSON request names one. */
    if (n == 5 && memcmp(s, "INT32", 5) == 0)
        return DT_INT32;
    if (n == 4 && memcmp(s, "FP32", 4) == 0)
        return DT_FP32;
    for (int t = DT_INVALID + 1; t < DT_COUNT; t++)
        if (equals(s, n, dtypes[t].name, dtypes[t].name_len))
            return (enum dtype)t;
    return DT_INVALID;
}

enum dtype dtype_from_config_name(const char *s, size_t n)
{
    for (int t = DT_INVALID + 1; t < DT_COUNT; t++)
        if (equals(s, n, dtypes[t].config_name, dtypes[t].config_name_len))
            return (enum dtype)t;
    return DT_INVALID;
}
