#include "serve/classify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "core/fp16.h"

bool classify_dtype_ok(enum dtype dt)
{
    return dt != DT_BOOL && dt != DT_BYTES && dtype_size(dt) > 0;
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element i of a floating-point row, widened. */
static double float_at(enum dtype dt, const void *row, size_t i)
{
    uint16_t h;
    switch (dt) {
    case DT_FP16:
        memcpy(&h, (const char *)row + i * 2, 2);
        return fp16_to_float(h);
    case DT_BF16:
        memcpy(&h, (const char *)row + i * 2, 2);
        return bf16_to_float(h);
    case DT_FP32: {
        float f;
        memcpy(&f, (const char *)row + i * 4, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, (const char *)row + i * 8, 8);
        return d;
    }
    }
}

#define LOAD(T, row, i)                                                                            \
    ({                                                                                             \
        T v_;                                                                                      \
        memcpy(&v_, (const char *)(row) + (i) * sizeof(T), sizeof(T));                             \
        v_;                                                                                        \
    })
#define CMP(a, b) ((a) > (b) ? 1 : (a) < (b) ? -1 : 0)

static bool is_unsigned(enum dtype dt)
{
    return dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

static bool is_signed(enum dtype dt)
{
    return dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64;
}

/* Element i of an integer row in 64 bits: zero-extended for the unsigned
 * types (read it as uint64_t), sign-extended for the signed ones (read it
 * as int64_t). */
static uint64_t int_at(enum dtype dt, const void *row, size_t i)
{
    switch (dt) {
    case DT_UINT8:
        return LOAD(uint8_t, row, i);
    case DT_UINT16:
        return LOAD(uint16_t, row, i);
    case DT_UINT32:
        return LOAD(uint32_t, row, i);
    case DT_INT8:
        return (uint64_t)(int64_t)LOAD(int8_t, row, i);
    case DT_INT16:
        return (uint64_t)(int64_t)LOAD(int16_t, row, i);
    case DT_INT32:
        return (uint64_t)(int64_t)LOAD(int32_t, row, i);
    default: /* DT_UINT64, DT_INT64 */
        return LOAD(uint64_t, row, i);
    }
}

/* Compares elements a and b of row by value: 1, 0 or ST_ERROR; NaN is below
 * every number and equal to NaN. */
static int compare(enum dtype dt, const void *row, size_t a, size_t b)
{
    if (is_unsigned(dt)) {
        uint64_t x = int_at(dt, row, a), y = int_at(dt, row, b);
        return CMP(x, y);
    }
    if (is_signed(dt)) {
        int64_t x = (int64_t)int_at(dt, row, a), y = (int64_t)int_at(dt, row, b);
        return CMP(x, y);
    }
    double x = float_at(dt, row, a), y = float_at(dt, row, b);
    if (isnan(x) || isnan(y))
        return isnan(x) ? (isnan(y) ? 0 : -1) : 1;
    return CMP(x, y);
}

/* Element a ranks before element b: higher value, or equal and lower index. */
static bool better(enum dtype dt, const void *row, size_t a, size_t b)
{
    int c = compare(dt, row, a, b);
    return c > 0 || (c == 0 && a < b);
}

/* idx[0..n) is a heap with its worst element at the root; restores that
 * after idx[i] got worse. */
static void sift_down(enum dtype dt, const void *row, size_t *idx, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(dt, row, idx[w], idx[l]))
            w = l;
        if (r < n && better(dt, row, idx[w], idx[r]))
            w = r;
        if (w == i)
            return;
        size_t t = idx[i];
        idx[i] = idx[w];
        idx[w] = t;
        i = w;
    }
}

size_t classify_topk(enum dtype dt, const void *row, size_t count, size_t k, size_t *idx)
{
    if (k > count)
        k = count;
    if (k == 0)
        return 0;
    /* The k best so far in a heap whose root is the worst of them:
     * O(count log k). */
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (n < k) {
            size_t c = n++;
            idx[c] = i;
            while (c > 0 && better(dt, row, idx[(c - 1) / 2], idx[c])) {
                size_t p = (c - 1) / 2, t = idx[p];
                idx[p] = idx[c];
                idx[c] = t;
                c = p;
            }
        } else if (better(dt, row, i, idx[0])) {
            idx[0] = i;
            sift_down(dt, row, idx, n, 0);
        }
    }
    /* Heap sort: the worst goes to the end each time, leaving best first. */
    for (size_t end = n - 1; end > 0; end--) {
        size_t t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_down(dt, row, idx, end, 0);
    }
    return n;
}

size_t classify_format(char *buf, size_t size, enum dtype dt, const void *row, size_t index,
                       const struct tensor_bytes *label)
{
    /* std::to_string: an integer's decimal digits (small types promote to
     * int, uint32 is unsigned, 64-bit types are (unsigned) long: widening
     * prints the same); floating point is "%f". */
    char value[400];
    if (is_unsigned(dt))
        snprintf(value, sizeof value, "%" PRIu64, int_at(dt, row, index));
    else if (is_signed(dt))
        snprintf(value, sizeof value, "%" PRId64, (int64_t)int_at(dt, row, index));
    else
        snprintf(value, sizeof value, "%f", float_at(dt, row, index));
    int n;
    if (label && label->len)
        n = snprintf(buf, size, "%s:%zu:%.*s", value, index, (int)label->len, label->ptr);
    else
        n = snprintf(buf, size, "%s:%zu", value, index);
    return n < 0 ? 0 : (size_t)n;
}

int classify_check(const struct infer_request *req, const struct shm_request *shm,
                   struct error *err)
{
    if (!req->output_classes)
        return 0;
    const struct model *m = req->model;
    for (uint32_t i = 0; i < req->noutputs; i++) {
        if (!req->output_classes[i])
            continue;
        const char *name = req->output_names[i];
        if (shm_request_has_output(shm, i))
            return error_set(
                err, 400, "output '%s': classification cannot be written to shared memory", name);
        int k = model_output_index(m, name);
        if (k >= 0 && !classify_dtype_ok(m->info.outputs[k].dtype))
            return error_set(err, 400,
                             "output '%s': classification needs a numeric output, model '%s' "
                             "gives %s",
                             name, m->name, dtype_name(m->info.outputs[k].dtype));
    }
    return 0;
}

/* What one classified output becomes. */
struct plan {
    const struct tensor *src;
    const struct tensor_bytes *labels; /* NULL: none */
    uint32_t nlabels;
    bool batched;              /* rows along dim 0 */
    size_t rows, row_count, k; /* k: classes per row after clamping */
    size_t *idx;               /* rows * k indices, best first per row */
};

static const struct tensor_bytes *label_of(const struct plan *p, size_t index)
{
    return p->labels && index < p->nlabels ? &p->labels[index] : NULL;
}

static const char *row_at(const struct plan *p, size_t r)
{
    return (const char *)p->src->data + r * p->row_count * dtype_size(p->src->dtype);
}

/* The classes asked for output `name`, 0 for none. */
static uint32_t classes_of(const struct infer_request *req, const char *name)
{
    for (uint32_t i = 0; i < req->noutputs; i++)
        if (req->output_names[i] == name || strcmp(req->output_names[i], name) == 0)
            return req->output_classes[i];
    return 0;
}

/* Ranks the rows of p->src (k classes asked) into p->idx; adds the bytes
 * its strings take to *text. */
static int plan_output(const struct model *m, struct plan *p, uint32_t k, size_t *text,
                       struct error *err)
{
    const struct tensor *t = p->src;
    if (!classify_dtype_ok(t->dtype))
        return error_set(err, 400, "output '%s': classification needs a numeric output, not %s",
                         t->name, dtype_name(t->dtype));
    p->batched = m->batched && t->ndim > 0;
    int64_t rows = p->batched ? t->shape[0] : 1;
    int64_t count = shape_count(t->shape + p->batched, t->ndim - p->batched, INT64_MAX);
    if (rows < 0 || count < 0)
        return error_set(err, 500, "output '%s' has an invalid shape", t->name);
    p->rows = (size_t)rows;
    p->row_count = (size_t)count;
    p->k = k < p->row_count ? k : p->row_count;
    int oi = model_output_index(m, t->name);
    if (m->labels && oi >= 0 && m->labels[oi].count) {
        p->labels = m->labels[oi].lines;
        p->nlabels = m->labels[oi].count;
    }
    if (p->rows && p->k > CLASSIFY_MAX_BYTES / sizeof(struct tensor_bytes) / p->rows)
        return error_set(err, 400, "output '%s': classification results would exceed %u bytes",
                         t->name, CLASSIFY_MAX_BYTES);
    if (p->rows * p->k == 0)
        return 0;
    p->idx = mem_alloc(p->rows * p->k * sizeof *p->idx);
    if (!p->idx)
        return error_set(err, 500, "out of memory");
    for (size_t r = 0; r < p->rows; r++) {
        size_t *idx = p->idx + r * p->k;
        classify_topk(t->dtype, row_at(p, r), p->row_count, p->k, idx);
        for (size_t j = 0; j < p->k; j++) {
            *text += classify_format(NULL, 0, t->dtype, row_at(p, r), idx[j], label_of(p, idx[j])) +
                     sizeof(struct tensor_bytes);
            if (*text > CLASSIFY_MAX_BYTES)
                return error_set(err, 400,
                                 "output '%s': classification results would exceed %u bytes",
                                 t->name, CLASSIFY_MAX_BYTES);
        }
    }
    return 0;
}

/* Writes p's strings at *pos (room up to end) and their elements at elems; dst becomes the
 * tensor that replaces p->src. */
static void write_output(const struct plan *p, struct tensor *dst, struct tensor_bytes *elems,
                         char **pos, const char *end)
{
    const struct tensor *t = p->src;
    dst->dtype = DT_BYTES;
    dst->ndim = p->batched ? 2 : 1;
    dst->shape[0] = (int64_t)(p->batched ? p->rows : p->k);
    dst->shape[1] = (int64_t)p->k;
    dst->data = elems;
    dst->nbytes = 0;
    for (size_t r = 0; r < p->rows; r++)
        for (size_t j = 0; j < p->k; j++) {
            size_t index = p->idx[r * p->k + j];
            const struct tensor_bytes *label = label_of(p, index);
            size_t len =
                classify_format(*pos, (size_t)(end - *pos), t->dtype, row_at(p, r), index, label);
            elems[r * p->k + j] = (struct tensor_bytes){.ptr = *pos, .len = (uint32_t)len};
            *pos += len;
            dst->nbytes += len;
        }
}

int classify_outputs(const struct infer_request *req, const struct tensor *in, uint32_t n,
                     const struct tensor **out, void **mem, struct error *err)
{
    *out = in;
    *mem = NULL;
    if (!req->output_classes || n == 0)
        return 0;
    struct plan *plans = mem_calloc(n, sizeof *plans);
    if (!plans)
        return error_set(err, 500, "out of memory");
    size_t text = 0, elems = 0;
    int rc = 0;
    bool any = false;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = classes_of(req, in[i].name);
        if (!k)
            continue;
        any = true;
        plans[i].src = &in[i];
        rc = plan_output(req->model, &plans[i], k, &text, err);
        elems += plans[i].rows * plans[i].k;
    }
    char *block = NULL;
    /* The tensors, then the element arrays, then the strings (text counted
     * each element's struct too), and a NUL after the last. */
    size_t size = n * sizeof(struct tensor) + text + 1;
    if (rc == 0 && any) {
        block = mem_alloc(size);
        if (!block)
            rc = error_set(err, 500, "out of memory");
    }
    if (rc == 0 && any) {
        struct tensor *outs = (struct tensor *)block;
        struct tensor_bytes *next = (struct tensor_bytes *)(block + n * sizeof(struct tensor));
        char *pos = (char *)(next + elems);
        for (uint32_t i = 0; i < n; i++) {
            outs[i] = in[i];
            if (!plans[i].src)
                continue;
            write_output(&plans[i], &outs[i], next, &pos, block + size);
            next += plans[i].rows * plans[i].k;
        }
        *out = outs;
        *mem = block;
    }
    for (uint32_t i = 0; i < n; i++)
        mem_free(plans[i].idx);
    mem_free(plans);
    return rc;
}
