#include "policy/diff.h"

#include <math.h>
#include <string.h>

#include "core/fp16.h"

static bool is_float(enum dtype t)
{
    return t == DT_FP16 || t == DT_BF16 || t == DT_FP32 || t == DT_FP64;
}

/* Element i of a numeric tensor as a double (int64/uint64 above 2^53 lose
 * precision: only the reported values, not equality, use this). */
static double value(const struct tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case DT_BOOL:
    case DT_UINT8: return ((const uint8_t *)d)[i];
    case DT_UINT16: return ((const uint16_t *)d)[i];
    case DT_UINT32: return ((const uint32_t *)d)[i];
    case DT_UINT64: return (double)((const uint64_t *)d)[i];
    case DT_INT8: return ((const int8_t *)d)[i];
    case DT_INT16: return ((const int16_t *)d)[i];
    case DT_INT32: return ((const int32_t *)d)[i];
    case DT_INT64: return (double)((const int64_t *)d)[i];
    case DT_FP16: return fp16_to_float(((const uint16_t *)d)[i]);
    case DT_BF16: {
        uint32_t bits = (uint32_t)((const uint16_t *)d)[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    case DT_FP32: return ((const float *)d)[i];
    case DT_FP64: return ((const double *)d)[i];
    default: return 0;
    }
}

static bool same_shape(const struct tensor *a, const struct tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static void diff_bytes(const struct tensor *a, const struct tensor *b, struct diff_result *r)
{
    const struct tensor_bytes *x = a->data, *y = b->data;
    for (int64_t i = 0; i < r->elements; i++) {
        if (x[i].len == y[i].len && (x[i].len == 0 || memcmp(x[i].ptr, y[i].ptr, x[i].len) == 0))
            r->equal++;
        else if (r->worst < 0)
            r->worst = i;
    }
}

static void diff_numbers(const struct tensor *a, const struct tensor *b, struct diff_result *r)
{
    size_t width = dtype_size(a->dtype);
    const char *x = a->data, *y = b->data;
    for (int64_t i = 0; i < r->elements; i++) {
        if (!r->is_float) {
            if (memcmp(x + (size_t)i * width, y + (size_t)i * width, width) == 0) {
                r->equal++;
            } else if (r->worst < 0) {
                r->worst = i;
                r->worst_a = value(a, i);
                r->worst_b = value(b, i);
            }
            continue;
        }
        double p = value(a, i), q = value(b, i);
        if (p == q) {
            r->equal++;
            continue;
        }
        double abs_diff = isnan(p) != isnan(q) ? INFINITY : fabs(p - q);
        double scale = fmax(fabs(p), fabs(q));
        double rel = isnan(abs_diff) ? 0 : isinf(abs_diff) ? 1 : abs_diff / scale;
        if (rel > r->max_rel)
            r->max_rel = rel;
        if (r->worst < 0 || abs_diff > r->max_abs) {
            r->max_abs = isnan(abs_diff) ? r->max_abs : abs_diff;
            r->worst = i;
            r->worst_a = p;
            r->worst_b = q;
        }
    }
}

static int64_t argmax(const struct tensor *t, int64_t from, int64_t n)
{
    int64_t best = from;
    double best_v = value(t, from);
    for (int64_t i = from + 1; i < from + n; i++) {
        double v = value(t, i);
        if (v > best_v || (isnan(best_v) && !isnan(v))) {
            best_v = v;
            best = i;
        }
    }
    return best - from;
}

void diff_tensors(const struct tensor *a, const struct tensor *b, struct diff_result *out)
{
    memset(out, 0, sizeof *out);
    out->worst = -1;
    if (!same_shape(a, b))
        return;
    int64_t n = tensor_count(a, INT64_MAX);
    if (n < 0)
        return;
    out->comparable = true;
    out->is_float = is_float(a->dtype);
    out->elements = n;
    if (a->dtype == DT_BYTES)
        diff_bytes(a, b, out);
    else
        diff_numbers(a, b, out);
    int64_t last = a->ndim ? a->shape[a->ndim - 1] : 0;
    if (out->is_float && last > 1 && n > 0) {
        out->rows = n / last;
        for (int64_t row = 0; row < out->rows; row++)
            out->argmax_agree += argmax(a, row * last, last) == argmax(b, row * last, last);
    }
}
