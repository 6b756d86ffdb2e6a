/*
 * tensor_oracle: the reference decoder of KServe `data` values for the
 * differential tests of api/tensor_json.c — the element conversion inferd
 * used before tensor_json existed, over a tree from base/json.c: walk the
 * (nested) array, convert every leaf with the exact json_num_* functions,
 * and report the same messages. tensor_json_parse must accept, reject and
 * produce exactly what this does.
 */
#ifndef INFERD_TESTS_TENSOR_ORACLE_H
#define INFERD_TESTS_TENSOR_ORACLE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/tensor.h"

struct fill {
    enum dtype dtype;
    unsigned char *out;
    struct tensor_bytes *strs;
    int64_t index;
    struct error *err;
};

static int bad_value(struct fill *f, const char *why)
{
    return error_set(f->err, 400, "input '%s': element %lld is %s for datatype %s", "x",
                     (long long)f->index, why, dtype_name(f->dtype));
}

static void store(unsigned char *dst, size_t size, uint64_t x)
{
    switch (size) {
    case 1: { uint8_t y = (uint8_t)x; memcpy(dst, &y, 1); break; }
    case 2: { uint16_t y = (uint16_t)x; memcpy(dst, &y, 2); break; }
    case 4: { uint32_t y = (uint32_t)x; memcpy(dst, &y, 4); break; }
    default: memcpy(dst, &x, 8); break;
    }
}

static int put_int(struct fill *f, const struct json_value *v, int64_t lo, int64_t hi)
{
    int64_t x;
    if (v->type != JSON_NUMBER)
        return bad_value(f, "not a number");
    int rc = json_num_i64(v, &x);
    if (rc == -EINVAL)
        return bad_value(f, "not an integer");
    if (rc == -ERANGE || x < lo || x > hi)
        return bad_value(f, "out of range");
    size_t size = dtype_size(f->dtype);
    store(f->out + (size_t)f->index * size, size, (uint64_t)x);
    return 0;
}

static int put_uint(struct fill *f, const struct json_value *v, uint64_t hi)
{
    uint64_t x;
    if (v->type != JSON_NUMBER)
        return bad_value(f, "not a number");
    int rc = json_num_u64(v, &x);
    if (rc == -EINVAL)
        return bad_value(f, "not an integer");
    if (rc == -ERANGE || x > hi)
        return bad_value(f, "out of range");
    size_t size = dtype_size(f->dtype);
    store(f->out + (size_t)f->index * size, size, x);
    return 0;
}

static int put_leaf(struct fill *f, const struct json_value *v)
{
    switch (f->dtype) {
    case DT_BOOL:
        if (v->type != JSON_TRUE && v->type != JSON_FALSE)
            return bad_value(f, "not true or false");
        f->out[f->index] = v->type == JSON_TRUE;
        return 0;
    case DT_INT8: return put_int(f, v, INT8_MIN, INT8_MAX);
    case DT_INT16: return put_int(f, v, INT16_MIN, INT16_MAX);
    case DT_INT32: return put_int(f, v, INT32_MIN, INT32_MAX);
    case DT_INT64: return put_int(f, v, INT64_MIN, INT64_MAX);
    case DT_UINT8: return put_uint(f, v, UINT8_MAX);
    case DT_UINT16: return put_uint(f, v, UINT16_MAX);
    case DT_UINT32: return put_uint(f, v, UINT32_MAX);
    case DT_UINT64: return put_uint(f, v, UINT64_MAX);
    case DT_FP16:
    case DT_FP32: {
        float x;
        if (v->type != JSON_NUMBER)
            return bad_value(f, "not a number");
        if (json_num_f32(v, &x) != 0)
            return bad_value(f, "out of range");
        if (f->dtype == DT_FP32) {
            memcpy(f->out + (size_t)f->index * 4, &x, 4);
            return 0;
        }
        uint16_t h = fp16_from_float(x);
        if (isfinite(x) && (h & 0x7c00u) == 0x7c00u)
            return bad_value(f, "out of range");
        memcpy(f->out + (size_t)f->index * 2, &h, 2);
        return 0;
    }
    case DT_FP64: {
        double x;
        if (v->type != JSON_NUMBER)
            return bad_value(f, "not a number");
        if (json_num_f64(v, &x) != 0)
            return bad_value(f, "out of range");
        memcpy(f->out + (size_t)f->index * 8, &x, 8);
        return 0;
    }
    case DT_BYTES:
        if (v->type != JSON_STRING)
            return bad_value(f, "not a string");
        f->strs[f->index].ptr = v->u.str;
        f->strs[f->index].len = v->len;
        return 0;
    default:
        return error_set(f->err, 400, "input '%s': datatype %s is not supported in JSON", "x",
                         dtype_name(f->dtype));
    }
}

static int fill_leaves(struct fill *f, const struct json_value *v)
{
    if (v->type != JSON_ARRAY) {
        int rc = put_leaf(f, v);
        f->index++;
        return rc;
    }
    for (uint32_t i = 0; i < v->len; i++)
        if (fill_leaves(f, &v->u.items[i]) != 0)
            return -1;
    return 0;
}

static int64_t count_leaves(const struct json_value *v)
{
    if (v->type != JSON_ARRAY)
        return 1;
    int64_t n = 0;
    for (uint32_t i = 0; i < v->len; i++)
        n += count_leaves(&v->u.items[i]);
    return n;
}

#endif
