#include "cli/tensors.h"

#include <math.h>
#include <string.h>

#include "base/status.h"
#include "core/fp16.h"

void cli_tensor_init(struct cli_tensor *t)
{
    memset(t, 0, sizeof *t);
    buf_init(&t->raw, CLI_MAX_TENSOR);
}

void cli_tensor_free(struct cli_tensor *t)
{
    buf_free(&t->raw);
}

int64_t cli_tensor_count(const struct cli_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0 || __builtin_mul_overflow(n, t->shape[i], &n))
            return ST_ERROR;
    return n;
}

static uint32_t get_u32le(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int cli_tensor_check(const struct cli_tensor *t, struct error *err)
{
    int64_t count = cli_tensor_count(t);
    if (count < 0)
        return error_set(err, 400, "%s: invalid shape", t->name);
    const uint8_t *p = (const uint8_t *)t->raw.data;
    size_t len = t->raw.len;
    if (t->dtype != DT_BYTES) {
        uint64_t bytes;
        if (__builtin_mul_overflow((uint64_t)count, (uint64_t)dtype_size(t->dtype), &bytes) ||
            bytes != len)
            return error_set(err, 400, "%s: %zu data bytes for %lld %s elements", t->name, len,
                             (long long)count, dtype_name(t->dtype));
        return 0;
    }
    size_t off = 0;
    for (int64_t e = 0; e < count; e++) {
        if (len - off < 4 || len - off - 4 < get_u32le(p + off))
            return error_set(err, 400, "%s: BYTES data shorter than its shape", t->name);
        off += 4 + get_u32le(p + off);
    }
    if (off != len)
        return error_set(err, 400, "%s: BYTES data longer than its shape", t->name);
    return 0;
}

/* ---- JSON -> raw ------------------------------------------------------------ */

static int put_value(struct cli_tensor *t, const struct json_value *v, struct error *err)
{
    struct buf *b = &t->raw;
    enum dtype dt = t->dtype;
    if (dt == DT_BYTES) {
        if (v->type != JSON_STRING)
            return error_set(err, 400, "%s: BYTES elements are strings, got %s", t->name,
                             json_type_name(v));
        uint8_t len4[4] = {(uint8_t)v->len, (uint8_t)(v->len >> 8), (uint8_t)(v->len >> 16),
                           (uint8_t)(v->len >> 24)};
        buf_append(b, len4, 4);
        return buf_append(b, v->u.str, v->len) ? error_set(err, 413, "%s: too large", t->name) : 0;
    }
    if (dt == DT_BOOL) {
        if (v->type != JSON_TRUE && v->type != JSON_FALSE)
            return error_set(err, 400, "%s: BOOL elements are true or false, got %s", t->name,
                             json_type_name(v));
        return buf_putc(b, v->type == JSON_TRUE) ? error_set(err, 413, "%s: too large", t->name)
                                                 : 0;
    }
    if (v->type != JSON_NUMBER)
        return error_set(err, 400, "%s: %s elements are numbers, got %s", t->name, dtype_name(dt),
                         json_type_name(v));
    union {
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float f32;
        double f64;
    } u;
    int64_t i = 0;
    uint64_t un = 0;
    double d = 0;
    int rc = 0;
    bool is_signed = dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64;
    bool is_unsigned = dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
    if (is_signed)
        rc = json_num_i64(v, &i);
    else if (is_unsigned)
        rc = json_num_u64(v, &un);
    else
        rc = json_num_f64(v, &d);
    if (rc != 0)
        return error_set(err, 400, "%s: '%s' is not a %s value", t->name, v->u.num, dtype_name(dt));
    bool range = true;
    switch (dt) {
    case DT_INT8:
        range = i >= INT8_MIN && i <= INT8_MAX;
        u.i8 = (int8_t)i;
        break;
    case DT_INT16:
        range = i >= INT16_MIN && i <= INT16_MAX;
        u.i16 = (int16_t)i;
        break;
    case DT_INT32:
        range = i >= INT32_MIN && i <= INT32_MAX;
        u.i32 = (int32_t)i;
        break;
    case DT_INT64:
        u.i64 = i;
        break;
    case DT_UINT8:
        range = un <= UINT8_MAX;
        u.u8 = (uint8_t)un;
        break;
    case DT_UINT16:
        range = un <= UINT16_MAX;
        u.u16 = (uint16_t)un;
        break;
    case DT_UINT32:
        range = un <= UINT32_MAX;
        u.u32 = (uint32_t)un;
        break;
    case DT_UINT64:
        u.u64 = un;
        break;
    case DT_FP16:
        u.u16 = fp16_from_float((float)d);
        break;
    case DT_BF16: {
        float f = (float)d;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (isnan(f))
            u.u16 = (uint16_t)((bits >> 16) | 0x40);
        else
            u.u16 = (uint16_t)((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
        break;
    }
    case DT_FP32:
        u.f32 = (float)d;
        break;
    case DT_FP64:
        u.f64 = d;
        break;
    default:
        return error_set(err, 400, "%s: unsupported datatype", t->name);
    }
    if (!range)
        return error_set(err, 400, "%s: %s is out of range for %s", t->name, v->u.num,
                         dtype_name(dt));
    return buf_append(b, &u, dtype_size(dt)) ? error_set(err, 413, "%s: too large", t->name) : 0;
}

/* Depth-first over nested arrays; dims[depth] records (or checks) the
 * length of each level when shaping. */
static int walk(struct cli_tensor *t, const struct json_value *v, int depth, bool shaping,
                int *rank, int64_t *dims, struct error *err)
{
    if (v->type != JSON_ARRAY) {
        if (shaping) {
            if (*rank < 0)
                *rank = depth;
            else if (*rank != depth)
                return error_set(err, 400, "%s: the nested arrays are not rectangular", t->name);
        }
        return put_value(t, v, err);
    }
    if (depth >= CLI_MAX_DIMS)
        return error_set(err, 400, "%s: nested deeper than %d", t->name, CLI_MAX_DIMS);
    if (shaping) {
        if (*rank >= 0 && depth >= *rank)
            return error_set(err, 400, "%s: the nested arrays are not rectangular", t->name);
        if (dims[depth] < 0)
            dims[depth] = v->len;
        else if (dims[depth] != v->len)
            return error_set(err, 400, "%s: the nested arrays are not rectangular", t->name);
        if (v->len == 0 && *rank < 0)
            *rank = depth + 1;
    }
    for (uint32_t k = 0; k < v->len; k++)
        if (walk(t, &v->u.items[k], depth + 1, shaping, rank, dims, err) != 0)
            return ST_ERROR;
    return 0;
}

int cli_tensor_from_json(struct cli_tensor *t, const struct json_value *data, bool shape_out,
                         struct error *err)
{
    int rank = -1;
    int64_t dims[CLI_MAX_DIMS];
    for (int i = 0; i < CLI_MAX_DIMS; i++)
        dims[i] = -1;
    if (walk(t, data, 0, shape_out, &rank, dims, err) != 0)
        return ST_ERROR;
    if (shape_out) {
        t->ndim = rank < 0 ? 0 : rank;
        for (int i = 0; i < t->ndim; i++)
            t->shape[i] = dims[i];
    }
    return cli_tensor_check(t, err);
}

/* ---- raw -> JSON / text ----------------------------------------------------- */

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The numeric element at p, written by w. */
static void write_elem(const struct cli_tensor *t, const uint8_t *p, struct json_writer *w)
{
    switch (t->dtype) {
    case DT_BOOL:
        json_w_bool(w, *p != 0);
        break;
    case DT_INT8:
        json_w_int(w, *(const int8_t *)p);
        break;
    case DT_UINT8:
        json_w_uint(w, *p);
        break;
    default:
        break;
    }
    union {
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float f32;
        double f64;
    } u;
    size_t sz = dtype_size(t->dtype);
    if (sz > 1)
        memcpy(&u, p, sz);
    switch (t->dtype) {
    case DT_INT16:
        json_w_int(w, u.i16);
        break;
    case DT_INT32:
        json_w_int(w, u.i32);
        break;
    case DT_INT64:
        json_w_int(w, u.i64);
        break;
    case DT_UINT16:
        json_w_uint(w, u.u16);
        break;
    case DT_UINT32:
        json_w_uint(w, u.u32);
        break;
    case DT_UINT64:
        json_w_uint(w, u.u64);
        break;
    case DT_FP16:
        json_w_f32(w, fp16_to_float(u.u16));
        break;
    case DT_BF16:
        json_w_f32(w, bf16_to_float(u.u16));
        break;
    case DT_FP32:
        json_w_f32(w, u.f32);
        break;
    case DT_FP64:
        json_w_f64(w, u.f64);
        break;
    default:
        break;
    }
}

/* Writes the elements [from, to) to w. */
static void write_range(const struct cli_tensor *t, struct json_writer *w, uint64_t from,
                        uint64_t to)
{
    const uint8_t *p = (const uint8_t *)t->raw.data;
    if (t->dtype != DT_BYTES) {
        size_t sz = dtype_size(t->dtype);
        for (uint64_t e = from; e < to; e++)
            write_elem(t, p + e * sz, w);
        return;
    }
    size_t off = 0;
    for (uint64_t e = 0; e < to; e++) {
        uint32_t n = get_u32le(p + off);
        if (e >= from)
            json_w_str(w, (const char *)p + off + 4, n);
        off += 4 + n;
    }
}

void cli_tensor_write_json(const struct cli_tensor *t, struct json_writer *w)
{
    json_w_arr_begin(w);
    write_range(t, w, 0, (uint64_t)cli_tensor_count(t));
    json_w_arr_end(w);
}

void cli_tensor_print(const struct cli_tensor *t, FILE *f, uint64_t limit)
{
    uint64_t count = (uint64_t)cli_tensor_count(t);
    fprintf(f, "%s  %s  [", t->name, dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    fprintf(f, "]\n");
    uint64_t row = t->ndim > 0 && t->shape[t->ndim - 1] > 0 ? (uint64_t)t->shape[t->ndim - 1] : 1;
    uint64_t shown = count < limit ? count : limit;
    struct buf line;
    buf_init(&line, 1 << 20);
    for (uint64_t at = 0; at < shown; at += row) {
        uint64_t end = at + row < shown ? at + row : shown;
        buf_reset(&line);
        struct json_writer w;
        json_w_init(&w, &line);
        json_w_arr_begin(&w);
        write_range(t, &w, at, end);
        json_w_arr_end(&w);
        /* the row without its brackets, values separated by two spaces */
        fputs("  ", f);
        int depth = 0;
        bool in_str = false, esc = false;
        for (size_t i = 1; i + 1 < line.len; i++) {
            char c = line.data[i];
            if (in_str) {
                in_str = !(c == '"' && !esc);
                esc = c == '\\' && !esc;
            } else if (c == '"') {
                in_str = true;
            } else if (c == '[' || c == '{') {
                depth++;
            } else if (c == ']' || c == '}') {
                depth--;
            } else if (c == ',' && depth == 0) {
                fputs("  ", f);
                continue;
            }
            fputc(c, f);
        }
        fputc('\n', f);
    }
    if (shown < count)
        fprintf(f, "  ... %llu more\n", (unsigned long long)(count - shown));
    buf_free(&line);
}

bool cli_tensor_json_safe(const struct cli_tensor *t)
{
    if (t->dtype == DT_FP16 || t->dtype == DT_BF16)
        return false;
    if (t->dtype != DT_BYTES)
        return true;
    const uint8_t *p = (const uint8_t *)t->raw.data;
    for (size_t off = 0; off < t->raw.len;) {
        uint32_t n = get_u32le(p + off);
        const unsigned char *s = p + off + 4;
        for (uint32_t i = 0; i < n;) {
            size_t k = json_utf8_seq_len(s + i, n - i);
            if (k == 0 || s[i] == 0)
                return false;
            i += (uint32_t)k;
        }
        off += 4 + n;
    }
    return true;
}
