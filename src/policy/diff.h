/*
 * diff: how two tensors of the same output differ (shadow traffic,
 * docs/traffic.md "Output diffing"). Pure; no allocation.
 *
 * Tensors are comparable when their datatypes and shapes are equal. Then:
 *   - every datatype: elements, and how many are exactly equal (BYTES:
 *     byte for byte; floats: bitwise value equality, NaN never equal);
 *   - floating-point outputs (FP16, BF16, FP32, FP64): the largest
 *     absolute difference |a - b| and the largest relative difference
 *     |a - b| / max(|a|, |b|) (0 where both are 0), and the element with
 *     the largest absolute difference (a NaN on one side only counts as an
 *     infinite difference);
 *   - score vectors, floating-point outputs whose last dimension is longer
 *     than 1: the rows along the last dimension and how many have their
 *     largest element (argmax; first of equal ones) at the same index.
 */
#ifndef INFERD_POLICY_DIFF_H
#define INFERD_POLICY_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

struct diff_result {
    bool comparable; /* same datatype and shape */
    bool is_float;
    int64_t elements, equal;
    double max_abs, max_rel;
    int64_t worst;           /* index of the worst element; -1 when all are equal */
    double worst_a, worst_b; /* its values (numeric outputs) */
    int64_t rows, argmax_agree;
};

void diff_tensors(const struct tensor *a, const struct tensor *b, struct diff_result *out);

#endif
