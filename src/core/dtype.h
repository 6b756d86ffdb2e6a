/*
 * dtype: the tensor element types of the KServe v2 protocol, their wire names
 * ("FP32") and Triton config names ("TYPE_FP32"), and element sizes.
 */
#ifndef INFERD_CORE_DTYPE_H
#define INFERD_CORE_DTYPE_H

#include <stddef.h>

enum dtype {
    DT_INVALID = 0,
    DT_BOOL,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_FP16,
    DT_FP32,
    DT_FP64,
    DT_BYTES,
    DT_BF16,
    DT_COUNT
};

/* KServe name ("FP32"); "INVALID" for DT_INVALID or out-of-range values. */
const char *dtype_name(enum dtype t);
/* Parses a KServe name (exact, case-sensitive); DT_INVALID if unknown. */
enum dtype dtype_from_name(const char *s, size_t n);
/* Parses a Triton config name ("TYPE_FP32", "TYPE_STRING"); DT_INVALID if unknown. */
enum dtype dtype_from_config_name(const char *s, size_t n);
/* Triton config name ("TYPE_FP32"; BYTES is "TYPE_STRING"). */
const char *dtype_config_name(enum dtype t);
/* Bytes per element; 0 for DT_BYTES (variable) and DT_INVALID. */
size_t dtype_size(enum dtype t);

#endif
