#include "cli/npy.h"

#include <stdio.h>
#include <string.h>

#include "base/status.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- the header dictionary (a Python literal) ----------------------------- */

struct lexer {
    const char *p, *end;
};

static void skip_space(struct lexer *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static bool eat(struct lexer *l, char c)
{
    skip_space(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes: *s, *n point into the header. */
static bool read_string(struct lexer *l, const char **s, size_t *n)
{
    skip_space(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return false;
    char q = *l->p++;
    const char *start = l->p;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\')
            return false;
        l->p++;
    }
    if (l->p >= l->end)
        return false;
    *s = start;
    *n = (size_t)(l->p - start);
    l->p++;
    return true;
}

static bool read_word(struct lexer *l, const char *word)
{
    skip_space(l);
    size_t n = strlen(word);
    if ((size_t)(l->end - l->p) < n || memcmp(l->p, word, n) != 0)
        return false;
    l->p += n;
    return true;
}

/* A decimal dimension, at most 2^53 (larger counts cannot be stored anyway). */
static bool read_dim(struct lexer *l, int64_t *out)
{
    skip_space(l);
    int64_t v = 0;
    const char *start = l->p;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
        if (l->p - start >= 16)
            return false;
        v = v * 10 + (*l->p - '0');
        l->p++;
    }
    if (l->p == start)
        return false;
    *out = v;
    return true;
}

/* (d0, d1, ...) with an optional trailing comma; () for a scalar. */
static bool read_shape(struct lexer *l, struct npy_array *a, struct error *err)
{
    if (!eat(l, '('))
        return false;
    a->ndim = 0;
    if (eat(l, ')'))
        return true;
    for (;;) {
        if (a->ndim == NPY_MAX_DIMS) {
            error_set(err, 400, "more than %d dimensions", NPY_MAX_DIMS);
            return false;
        }
        if (!read_dim(l, &a->shape[a->ndim]))
            return false;
        a->ndim++;
        if (eat(l, ')'))
            return true;
        if (!eat(l, ','))
            return false;
        if (eat(l, ')'))
            return true;
    }
}

/* descr: the byte order, the kind and the item size. */
static int parse_descr(const char *s, size_t n, struct npy_array *a, struct error *err)
{
    if (n < 3 || n > 12)
        return error_set(err, 400, "unsupported dtype '%.*s'", (int)n, s);
    char order = s[0], kind = s[1];
    uint64_t size = 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return error_set(err, 400, "unsupported dtype '%.*s'", (int)n, s);
        size = size * 10 + (uint64_t)(s[i] - '0');
    }
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return error_set(err, 400, "unsupported byte order in dtype '%.*s'", (int)n, s);
    a->big_endian = order == '>';
    a->kind = NPY_NUMERIC;
    a->dtype = DT_INVALID;
    switch (kind) {
    case 'b':
        a->dtype = size == 1 ? DT_BOOL : DT_INVALID;
        break;
    case 'i':
        a->dtype = size == 1   ? DT_INT8
                   : size == 2 ? DT_INT16
                   : size == 4 ? DT_INT32
                   : size == 8 ? DT_INT64
                               : DT_INVALID;
        break;
    case 'u':
        a->dtype = size == 1   ? DT_UINT8
                   : size == 2 ? DT_UINT16
                   : size == 4 ? DT_UINT32
                   : size == 8 ? DT_UINT64
                               : DT_INVALID;
        break;
    case 'f':
        a->dtype = size == 2 ? DT_FP16 : size == 4 ? DT_FP32 : size == 8 ? DT_FP64 : DT_INVALID;
        break;
    case 'S':
        a->kind = NPY_FIXED_BYTES;
        a->dtype = size >= 1 && size <= NPY_MAX_HEADER ? DT_BYTES : DT_INVALID;
        break;
    case 'U':
        a->kind = NPY_UTF32;
        a->dtype = size >= 1 && size <= NPY_MAX_HEADER ? DT_BYTES : DT_INVALID;
        size *= 4;
        break;
    case 'O':
        return error_set(err, 400, "object arrays (pickles) are not read; save bytes as 'S'");
    default:
        break;
    }
    if (a->dtype == DT_INVALID)
        return error_set(err, 400, "unsupported dtype '%.*s'", (int)n, s);
    a->item_size = (size_t)size;
    return 0;
}

static int parse_dict(struct lexer *l, struct npy_array *a, struct error *err)
{
    bool has_descr = false, has_order = false, has_shape = false;
    if (!eat(l, '{'))
        return error_set(err, 400, "the header is not a dictionary");
    while (!eat(l, '}')) {
        const char *key, *val;
        size_t klen, vlen;
        if (!read_string(l, &key, &klen) || !eat(l, ':'))
            return error_set(err, 400, "malformed header dictionary");
        if (klen == 5 && memcmp(key, "descr", 5) == 0 && !has_descr) {
            skip_space(l);
            if (l->p < l->end && *l->p == '[')
                return error_set(err, 400, "structured dtypes are not supported");
            if (!read_string(l, &val, &vlen))
                return error_set(err, 400, "malformed descr");
            if (parse_descr(val, vlen, a, err) != 0)
                return ST_ERROR;
            has_descr = true;
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0 && !has_order) {
            if (read_word(l, "True"))
                return error_set(err, 400, "Fortran-order arrays are not supported (C order only)");
            if (!read_word(l, "False"))
                return error_set(err, 400, "malformed fortran_order");
            has_order = true;
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0 && !has_shape) {
            if (!read_shape(l, a, err))
                return err->status ? -1 : error_set(err, 400, "malformed shape");
            has_shape = true;
        } else {
            return error_set(err, 400, "unexpected key '%.*s' in the header", (int)klen, key);
        }
        if (!eat(l, ',')) {
            if (!eat(l, '}'))
                return error_set(err, 400, "malformed header dictionary");
            break;
        }
    }
    if (!has_descr || !has_order || !has_shape)
        return error_set(err, 400, "the header lacks %s",
                         !has_descr   ? "descr"
                         : !has_order ? "fortran_order"
                                      : "shape");
    skip_space(l);
    if (l->p != l->end)
        return error_set(err, 400, "trailing bytes after the header dictionary");
    return 0;
}

int npy_parse(const void *file, size_t len, struct npy_array *out, struct error *err)
{
    const uint8_t *f = file;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(f, npy_magic, sizeof npy_magic) != 0)
        return error_set(err, 400, "not a .npy file (no \\x93NUMPY magic)");
    uint8_t major = f[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)f[8] | (size_t)f[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return error_set(err, 400, "truncated .npy header");
        hlen = (size_t)f[8] | (size_t)f[9] << 8 | (size_t)f[10] << 16 | (size_t)f[11] << 24;
        hoff = 12;
    } else {
        return error_set(err, 400, ".npy format version %u is not supported", major);
    }
    if (hlen > NPY_MAX_HEADER)
        return error_set(err, 400, ".npy header over %d bytes", NPY_MAX_HEADER);
    if (len - hoff < hlen)
        return error_set(err, 400, "truncated .npy header");
    struct lexer l = {(const char *)f + hoff, (const char *)f + hoff + hlen};
    if (parse_dict(&l, out, err) != 0)
        return ST_ERROR;
    uint64_t count = 1;
    for (int i = 0; i < out->ndim; i++)
        if (__builtin_mul_overflow(count, (uint64_t)out->shape[i], &count))
            return error_set(err, 400, "the shape's element count overflows");
    uint64_t bytes;
    if (__builtin_mul_overflow(count, (uint64_t)out->item_size, &bytes))
        return error_set(err, 400, "the data size overflows");
    size_t have = len - hoff - hlen;
    if (bytes != have)
        return error_set(err, 400, "the data holds %zu bytes, the header says %llu", have,
                         (unsigned long long)bytes);
    out->count = count;
    out->data = f + hoff + hlen;
    out->data_len = (size_t)bytes;
    return 0;
}

/* ---- data ------------------------------------------------------------------ */

static void put_u32le(uint8_t b[4], uint32_t v)
{
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static int utf32_element(const uint8_t *p, size_t chars, bool big, struct buf *out,
                         struct error *err)
{
    size_t n = chars;
    while (n > 0 && memcmp(p + 4 * (n - 1), "\0\0\0\0", 4) == 0)
        n--; /* trailing NULs are padding */
    size_t len_at = out->len;
    uint8_t len4[4] = {0};
    buf_append(out, len4, 4);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *q = p + 4 * i;
        uint32_t c = big ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
                         : (uint32_t)q[3] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[1] << 8 | q[0];
        char u[4];
        size_t k;
        if (c < 0x80) {
            u[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            u[0] = (char)(0xC0 | c >> 6);
            u[1] = (char)(0x80 | (c & 0x3F));
            k = 2;
        } else if (c < 0x10000) {
            if (c >= 0xD800 && c <= 0xDFFF)
                return error_set(err, 400, "invalid UTF-32 text (a surrogate)");
            u[0] = (char)(0xE0 | c >> 12);
            u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            u[2] = (char)(0x80 | (c & 0x3F));
            k = 3;
        } else if (c <= 0x10FFFF) {
            u[0] = (char)(0xF0 | c >> 18);
            u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            u[2] = (char)(0x80 | ((c >> 6) & 0x3F));
            u[3] = (char)(0x80 | (c & 0x3F));
            k = 4;
        } else {
            return error_set(err, 400, "invalid UTF-32 text (above U+10FFFF)");
        }
        buf_append(out, u, k);
    }
    if (out->err)
        return error_set(err, 413, "the tensor is too large");
    put_u32le((uint8_t *)out->data + len_at, (uint32_t)(out->len - len_at - 4));
    return 0;
}

int npy_data(const struct npy_array *a, struct buf *out, struct error *err)
{
    const uint8_t *p = a->data;
    if (a->kind == NPY_NUMERIC) {
        if (a->dtype == DT_BOOL)
            for (size_t i = 0; i < a->data_len; i++)
                if (p[i] > 1)
                    return error_set(err, 400, "BOOL element %zu is %u (not 0 or 1)", i, p[i]);
        size_t at = out->len;
        if (buf_append(out, p, a->data_len) != 0)
            return error_set(err, 413, "the tensor is too large");
        if (a->big_endian && a->item_size > 1 && a->data_len > 0) {
            uint8_t *d = (uint8_t *)out->data + at;
            for (size_t i = 0; i < a->data_len; i += a->item_size)
                for (size_t j = 0; j < a->item_size / 2; j++) {
                    uint8_t t = d[i + j];
                    d[i + j] = d[i + a->item_size - 1 - j];
                    d[i + a->item_size - 1 - j] = t;
                }
        }
        return 0;
    }
    for (uint64_t e = 0; e < a->count; e++) {
        const uint8_t *q = p + e * a->item_size;
        if (a->kind == NPY_UTF32) {
            if (utf32_element(q, a->item_size / 4, a->big_endian, out, err) != 0)
                return ST_ERROR;
            continue;
        }
        size_t n = a->item_size;
        while (n > 0 && q[n - 1] == 0)
            n--;
        uint8_t len4[4];
        put_u32le(len4, (uint32_t)n);
        buf_append(out, len4, 4);
        buf_append(out, q, n);
        if (out->err)
            return error_set(err, 413, "the tensor is too large");
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------------- */

static const char *numeric_descr(enum dtype t)
{
    switch (t) {
    case DT_BOOL:
        return "|b1";
    case DT_UINT8:
        return "|u1";
    case DT_INT8:
        return "|i1";
    case DT_UINT16:
        return "<u2";
    case DT_INT16:
        return "<i2";
    case DT_UINT32:
        return "<u4";
    case DT_INT32:
        return "<i4";
    case DT_UINT64:
        return "<u8";
    case DT_INT64:
        return "<i8";
    case DT_FP16:
        return "<f2";
    case DT_FP32:
        return "<f4";
    case DT_FP64:
        return "<f8";
    default:
        return NULL;
    }
}

static uint32_t get_u32le(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int npy_write(enum dtype dtype, int ndim, const int64_t *shape, const void *raw, size_t raw_len,
              struct buf *out, struct error *err)
{
    if (ndim < 0 || ndim > NPY_MAX_DIMS)
        return error_set(err, 400, "more than %d dimensions", NPY_MAX_DIMS);
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(count, (uint64_t)shape[i], &count))
            return error_set(err, 400, "invalid shape");
    const uint8_t *r = raw;
    char descr[32];
    size_t max_len = 1;
    if (dtype == DT_BYTES) {
        size_t off = 0;
        for (uint64_t e = 0; e < count; e++) {
            if (raw_len - off < 4)
                return error_set(err, 400, "BYTES data shorter than its shape");
            size_t n = get_u32le(r + off);
            if (raw_len - off - 4 < n)
                return error_set(err, 400, "BYTES data shorter than its shape");
            if (n > max_len)
                max_len = n;
            off += 4 + n;
        }
        if (off != raw_len)
            return error_set(err, 400, "BYTES data longer than its shape");
        snprintf(descr, sizeof descr, "|S%zu", max_len);
    } else {
        const char *d = numeric_descr(dtype);
        if (!d)
            return error_set(err, 400, "%s has no NumPy type", dtype_name(dtype));
        uint64_t bytes;
        if (__builtin_mul_overflow(count, (uint64_t)dtype_size(dtype), &bytes) || bytes != raw_len)
            return error_set(err, 400, "%zu data bytes for %llu %s elements", raw_len,
                             (unsigned long long)count, dtype_name(dtype));
        snprintf(descr, sizeof descr, "%s", d);
    }
    struct buf h;
    buf_init(&h, NPY_MAX_HEADER);
    buf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        buf_printf(&h, "%lld,%s", (long long)shape[i], i + 1 < ndim ? " " : "");
    buf_puts(&h, "), }");
    /* magic(6) version(2) length(2) header: padded with spaces to a multiple
     * of 64, ending in '\n' */
    size_t total = 10 + h.len + 1;
    size_t pad = (64 - total % 64) % 64;
    for (size_t i = 0; i < pad; i++)
        buf_putc(&h, ' ');
    buf_putc(&h, '\n');
    int rc = 0;
    if (h.err || h.len > 65535) {
        rc = error_set(err, 400, "the .npy header is too long");
        goto out;
    }
    uint8_t pre[10];
    memcpy(pre, npy_magic, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (uint8_t)h.len;
    pre[9] = (uint8_t)(h.len >> 8);
    buf_append(out, pre, sizeof pre);
    buf_append(out, h.data, h.len);
    if (dtype == DT_BYTES) {
        size_t off = 0;
        for (uint64_t e = 0; e < count; e++) {
            size_t n = get_u32le(r + off);
            buf_append(out, r + off + 4, n);
            for (size_t i = n; i < max_len; i++)
                buf_putc(out, '\0');
            off += 4 + n;
        }
    } else {
        buf_append(out, raw, raw_len);
    }
    if (out->err)
        rc = error_set(err, 413, "the tensor is too large for a file");
out:
    buf_free(&h);
    return rc;
}
