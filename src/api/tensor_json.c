#include "api/tensor_json.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/json.h"
#include "base/json_cursor.h"
#include "base/numfmt.h"
#include "base/numparse.h"
#include "core/fp16.h"

/* ------------------------------------------------------------------------ */
/* Parser                                                                   */
/* ------------------------------------------------------------------------ */

struct tj_parser {
    const char *text, *end;
    enum dtype dtype;
    int64_t count;
    unsigned char *out;        /* numeric and BOOL destination */
    struct tensor_bytes *strs; /* BYTES destination */
    struct arena *arena;
    const char *input; /* for messages */
    struct error *err;
    int64_t index;       /* leaves seen so far */
    int64_t bad_index;   /* the first bad element, -1 while there is none */
    const char *bad_why; /* its reason; NULL: the datatype is not supported */
};

static int malformed(struct tj_parser *t, const char *at, const char *msg)
{
    return error_set(t->err, 400, "input '%s': malformed JSON in 'data' at byte %zu: %s", t->input,
                     (size_t)(at - t->text), msg);
}

/* Remembers the first bad element; its error is reported only if the whole
 * span is valid JSON with the right number of elements. */
static void bad_element(struct tj_parser *t, const char *why)
{
    if (t->bad_index < 0) {
        t->bad_index = t->index;
        t->bad_why = why;
    }
}

/* Whether the current leaf is to be converted and stored: past the count,
 * or after a bad element, the rest only needs to be valid JSON. */
static inline bool storing(const struct tj_parser *t)
{
    return t->index < t->count && t->bad_index < 0;
}

static inline const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static bool dtype_supported(enum dtype dt)
{
    return dt > DT_INVALID && dt < DT_COUNT && dt != DT_BF16;
}

/* Why a leaf of the wrong JSON kind is bad for the datatype. */
static const char *wrong_kind(enum dtype dt)
{
    if (!dtype_supported(dt))
        return NULL;
    return dt == DT_BOOL ? "not true or false" : dt == DT_BYTES ? "not a string" : "not a number";
}

/*
 * The string at *pp (a quote). Validated completely (base/json's string
 * rules); *pp is left after the closing quote. With dst, the content is
 * stored: pointing into the text when there is no escape, else decoded
 * into the arena.
 */
static int string_value(struct tj_parser *t, const char **pp, struct tensor_bytes *dst)
{
    struct json_string s;
    const char *msg, *at;

    if (json_string_scan(*pp, t->end, &s, &msg, &at) != 0)
        return malformed(t, at, msg);
    *pp = s.raw + s.raw_len + 1;
    if (!dst)
        return ST_OK;
    if (!s.escaped) {
        dst->ptr = s.raw;
        dst->len = s.raw_len;
        return ST_OK;
    }
    char *copy = arena_alloc(t->arena, s.raw_len);
    if (!copy)
        return error_set(t->err, 413, "input '%s': request too large to decode", t->input);
    dst->ptr = copy;
    dst->len = (uint32_t)json_string_decode(&s, copy);
    return ST_OK;
}

/* true, false or null at p; returns the byte after it or NULL. */
static const char *literal(const char *p, const char *end, const char *word, size_t n)
{
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/*
 * Validates the scalar at *pp that is not part of the tensor (inside an
 * object, or a leaf whose conversion is not needed).
 */
static int skip_scalar(struct tj_parser *t, const char **pp)
{
    const char *p = *pp, *next = NULL;
    switch (*p) {
    case '"':
        return string_value(t, pp, NULL);
    case 't':
        next = literal(p, t->end, "true", 4);
        break;
    case 'f':
        next = literal(p, t->end, "false", 5);
        break;
    case 'n':
        next = literal(p, t->end, "null", 4);
        break;
    case 'N':
    case 'I':
        if (numparse_skip(p, t->end, NUMPARSE_NONFINITE, &next) != 0)
            next = NULL;
        break;
    default:
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            if (numparse_skip(p, t->end, NUMPARSE_NONFINITE, &next) != 0)
                return malformed(t, next, "invalid number");
            break;
        }
        return malformed(t, p, "unexpected character");
    }
    if (!next)
        return malformed(t, p, "invalid literal");
    *pp = next;
    return ST_OK;
}

/* `"key" :` inside an object, *pp at the key after whitespace. */
static int object_key(struct tj_parser *t, const char **pp)
{
    const char *p = skip_ws(*pp, t->end);
    if (p == t->end || *p != '"')
        return malformed(t, p, "expected string key");
    if (string_value(t, &p, NULL) != 0)
        return ST_ERROR;
    p = skip_ws(p, t->end);
    if (p == t->end || *p != ':')
        return malformed(t, p, "expected ':'");
    *pp = p + 1;
    return ST_OK;
}

/*
 * Validates the object or array at *pp, `depth` containers deep already,
 * without storing anything (objects are never tensor elements).
 */
static int skip_container(struct tj_parser *t, const char **pp, int depth)
{
    char closer[TENSOR_JSON_MAX_DEPTH];
    int n = 0;
    const char *p = *pp, *end = t->end;

    for (;;) {
        /* A value starts at p (whitespace skipped). */
        if (p == end)
            return malformed(t, p, "unexpected end of input");
        if (*p == '[' || *p == '{') {
            if (depth + n == TENSOR_JSON_MAX_DEPTH)
                return malformed(t, p, "nesting too deep");
            closer[n++] = *p == '[' ? ']' : '}';
            p = skip_ws(p + 1, end);
            if (p == end || *p != closer[n - 1]) {
                if (closer[n - 1] == '}' && object_key(t, &p) != 0)
                    return ST_ERROR;
                p = skip_ws(p, end);
                continue;
            }
            p++; /* an empty container */
            n--;
        } else if (skip_scalar(t, &p) != 0) {
            return ST_ERROR;
        }
        /* A value is complete: close every container that ends here. */
        for (;;) {
            if (n == 0) {
                *pp = p;
                return ST_OK;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p++;
                if (closer[n - 1] == '}' && object_key(t, &p) != 0)
                    return ST_ERROR;
                p = skip_ws(p, end);
                break;
            }
            if (p < end && *p == closer[n - 1]) {
                p++;
                n--;
                continue;
            }
            if (p == end)
                return malformed(t, p, "unexpected end of input");
            return malformed(t, p, closer[n - 1] == '}' ? "expected ',' or '}'"
                                                        : "expected ',' or ']'");
        }
    }
}

static void store_int(unsigned char *dst, size_t size, int64_t x)
{
    switch (size) {
    case 1: { int8_t y = (int8_t)x; memcpy(dst, &y, 1); break; }
    case 2: { int16_t y = (int16_t)x; memcpy(dst, &y, 2); break; }
    case 4: { int32_t y = (int32_t)x; memcpy(dst, &y, 4); break; }
    default: memcpy(dst, &x, 8); break;
    }
}

static void store_uint(unsigned char *dst, size_t size, uint64_t x)
{
    switch (size) {
    case 1: { uint8_t y = (uint8_t)x; memcpy(dst, &y, 1); break; }
    case 2: { uint16_t y = (uint16_t)x; memcpy(dst, &y, 2); break; }
    case 4: { uint32_t y = (uint32_t)x; memcpy(dst, &y, 4); break; }
    default: memcpy(dst, &x, 8); break;
    }
}

/*
 * A number token at *pp that is a tensor element: converted and stored
 * when storing(), else only validated. numparse's results map to the
 * messages of the tree path: -EINVAL "not an integer", -ERANGE "out of
 * range"; -EILSEQ is malformed JSON.
 */
static inline int number_leaf(struct tj_parser *t, const char **pp)
{
    const char *p = *pp, *next = p;
    int rc;
    size_t i = (size_t)t->index;
    const unsigned flags = NUMPARSE_NONFINITE;

    if (!storing(t)) {
        rc = numparse_skip(p, t->end, flags, &next);
    } else {
        switch (t->dtype) {
        case DT_FP32: {
            float x;
            rc = numparse_f32(p, t->end, flags, &x, &next);
            if (rc == 0)
                memcpy(t->out + 4 * i, &x, 4);
            break;
        }
        case DT_FP64: {
            double x;
            rc = numparse_f64(p, t->end, flags, &x, &next);
            if (rc == 0)
                memcpy(t->out + 8 * i, &x, 8);
            break;
        }
        case DT_FP16: {
            float x;
            rc = numparse_f32(p, t->end, flags, &x, &next);
            if (rc == 0) {
                uint16_t h = fp16_from_float(x);
                if (isfinite(x) && (h & 0x7C00u) == 0x7C00u)
                    rc = -ERANGE;
                else
                    memcpy(t->out + 2 * i, &h, 2);
            }
            break;
        }
        case DT_INT8:
        case DT_INT16:
        case DT_INT32:
        case DT_INT64: {
            int64_t x;
            size_t size = dtype_size(t->dtype);
            int64_t hi = size == 8 ? INT64_MAX : (INT64_C(1) << (8 * size - 1)) - 1;
            bool neg;
            uint64_t mag;
            if (numparse_small_integer(p, t->end, &neg, &mag, &next)) {
                x = neg ? -(int64_t)mag : (int64_t)mag;
                rc = 0;
            } else {
                rc = numparse_i64(p, t->end, flags, &x, &next);
            }
            if (rc == 0 && (x > hi || x < -hi - 1))
                rc = -ERANGE;
            if (rc == 0)
                store_int(t->out + size * i, size, x);
            break;
        }
        case DT_UINT8:
        case DT_UINT16:
        case DT_UINT32:
        case DT_UINT64: {
            uint64_t x;
            size_t size = dtype_size(t->dtype);
            uint64_t hi = size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
            rc = numparse_u64(p, t->end, flags, &x, &next);
            if (rc == 0 && x > hi)
                rc = -ERANGE;
            if (rc == 0)
                store_uint(t->out + size * i, size, x);
            break;
        }
        default: /* BOOL, BYTES, unsupported: a number is the wrong kind */
            rc = numparse_skip(p, t->end, flags, &next);
            if (rc == 0)
                bad_element(t, wrong_kind(t->dtype));
            break;
        }
    }
    if (rc == -EILSEQ) {
        bool word = *p == 'N' || *p == 'I' || (*p == '-' && p + 1 < t->end && p[1] == 'I');
        return word ? malformed(t, p, "invalid literal") : malformed(t, next, "invalid number");
    }
    if (rc == -EINVAL)
        bad_element(t, "not an integer");
    else if (rc == -ERANGE)
        bad_element(t, "out of range");
    *pp = next;
    return ST_OK;
}

/* A tensor element that is not a number: string, true/false, null, object. */
static int other_leaf(struct tj_parser *t, const char **pp, int depth)
{
    const char *p = *pp;
    bool store = storing(t);

    switch (*p) {
    case '"':
        if (store && t->dtype == DT_BYTES)
            return string_value(t, pp, &t->strs[t->index]);
        if (string_value(t, pp, NULL) != 0)
            return ST_ERROR;
        break;
    case 't':
    case 'f':
        if (skip_scalar(t, pp) != 0)
            return ST_ERROR;
        if (store && t->dtype == DT_BOOL) {
            t->out[t->index] = *p == 't';
            return ST_OK;
        }
        break;
    case '{':
        if (skip_container(t, pp, depth) != 0)
            return ST_ERROR;
        break;
    case 'N':
    case 'I':
        return number_leaf(t, pp);
    default: /* null, or not JSON */
        if (skip_scalar(t, pp) != 0)
            return ST_ERROR;
        break;
    }
    if (store)
        bad_element(t, wrong_kind(t->dtype));
    return ST_OK;
}

/*
 * The common case of an integer tensor: one flat array of small integers
 * without whitespace, "[0,1,-2]", exactly `count` of them, each in range.
 * Decoded in one tight loop per element type; returns false as soon as
 * anything else shows (whitespace, nesting, another kind of value, a large
 * or malformed number, a wrong count), and the general parser then starts
 * over from the first byte, with its exact errors (what this stored is
 * overwritten).
 */

/* The loop for element type T in [LO, HI] (an unsigned type takes no
 * sign, not even "-0": the general parser reads that one). */
#define FLAT_LOOP(T, LO, HI)                                                  \
    for (int64_t i = 0;; i++) {                                               \
        bool neg;                                                             \
        uint64_t mag;                                                         \
        if (!numparse_small_integer(p, end, &neg, &mag, &p) || (neg && (LO) == 0)) \
            return false;                                                     \
        int64_t x = neg ? -(int64_t)mag : (int64_t)mag;                       \
        if (x < (LO) || x > (HI))                                             \
            return false;                                                     \
        T y = (T)x;                                                           \
        memcpy(out + sizeof(T) * (size_t)i, &y, sizeof(T));                   \
        if (i + 1 == count)                                                   \
            break;                                                            \
        if (p == end || *p != ',')                                            \
            return false;                                                     \
        p++;                                                                  \
    }                                                                         \
    break

static bool flat_small_integers(struct tj_parser *t)
{
    const char *p = t->text, *end = t->end;
    unsigned char *out = t->out;
    int64_t count = t->count;
    if (count <= 0 || p == end || *p++ != '[')
        return false;
    switch (t->dtype) {
    case DT_INT8: FLAT_LOOP(int8_t, INT8_MIN, INT8_MAX);
    case DT_INT16: FLAT_LOOP(int16_t, INT16_MIN, INT16_MAX);
    case DT_INT32: FLAT_LOOP(int32_t, INT32_MIN, INT32_MAX);
    case DT_INT64: FLAT_LOOP(int64_t, INT64_MIN, INT64_MAX);
    case DT_UINT8: FLAT_LOOP(uint8_t, 0, UINT8_MAX);
    case DT_UINT16: FLAT_LOOP(uint16_t, 0, UINT16_MAX);
    case DT_UINT32: FLAT_LOOP(uint32_t, 0, (int64_t)UINT32_MAX);
    case DT_UINT64: FLAT_LOOP(uint64_t, 0, INT64_MAX);
    default:
        return false;
    }
    if (p == end || *p++ != ']' || skip_ws(p, end) != end)
        return false;
    t->index = count;
    return true;
}
#undef FLAT_LOOP

enum status tensor_json_parse(const char *text, size_t len, enum dtype dtype,
                              const int64_t *shape, uint32_t ndim, int64_t count, void *out,
                              struct arena *arena, const char *input_name, struct error *err)
{
    struct tj_parser t = {
        .text = text,
        .end = len ? text + len : text, /* no arithmetic on a NULL empty text */
        .dtype = dtype,
        .count = count,
        .out = out,
        .strs = out,
        .arena = arena,
        .input = input_name,
        .err = err,
        .bad_index = -1,
    };
    if (flat_small_integers(&t))
        return ST_OK;
    const char *p = skip_ws(text, t.end), *end = t.end;
    int depth = 0;

    if (p == end || *p != '[')
        return error_set(err, 400, "input '%s': 'data' must be an array", input_name);
    for (;;) {
        /* A value starts at p (whitespace skipped). */
        if (p == end)
            return malformed(&t, p, "unexpected end of input");
        char c = *p;
        if (c == '[') {
            if (depth == TENSOR_JSON_MAX_DEPTH)
                return malformed(&t, p, "nesting too deep");
            depth++;
            p = skip_ws(p + 1, end);
            if (p == end || *p != ']')
                continue; /* on to the first element */
            p++; /* an empty array is a complete value */
            depth--;
        } else {
            int rc = (c >= '0' && c <= '9') || c == '-' ? number_leaf(&t, &p)
                                                        : other_leaf(&t, &p, depth);
            if (rc != 0)
                return ST_ERROR;
            t.index++;
        }
        /* A value is complete: close every array that ends here. */
        for (;;) {
            if (depth == 0)
                goto out_done;
            if (p < end && *p == ',') { /* the common case, no whitespace */
                p = skip_ws(p + 1, end);
                break;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                break;
            }
            if (p < end && *p == ']') {
                p++;
                depth--;
                continue;
            }
            if (p == end)
                return malformed(&t, p, "unexpected end of input");
            return malformed(&t, p, "expected ',' or ']'");
        }
    }

out_done:
    p = skip_ws(p, end);
    if (p != end)
        return malformed(&t, p, json_err_trailing);
    if (t.index != count) {
        char shape_text[128];
        shape_format(shape, ndim, shape_text, sizeof shape_text);
        return error_set(err, 400, "input '%s': shape %s needs %lld elements, 'data' has %lld",
                         input_name, shape_text, (long long)count, (long long)t.index);
    }
    if (t.bad_index >= 0) {
        if (!t.bad_why)
            return error_set(err, 400, "input '%s': datatype %s is not supported in JSON",
                             input_name, dtype_name(dtype));
        return error_set(err, 400, "input '%s': element %lld is %s for datatype %s", input_name,
                         (long long)t.bad_index, t.bad_why, dtype_name(dtype));
    }
    return ST_OK;
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */
/* ------------------------------------------------------------------------ */


/* One numeric or BOOL element as text at o (NUMFMT_MAX bytes of room). */
/* An integer element: one or two digits (the common case of class indices,
 * token ids, counts) directly, anything else through numfmt. */
static inline size_t format_int(char *o, int64_t x)
{
    if (x >= 0 && x < 10) {
        o[0] = (char)('0' + x);
        return 1;
    }
    if (x >= 10 && x < 100) {
        o[0] = (char)('0' + x / 10);
        o[1] = (char)('0' + x % 10);
        return 2;
    }
    return numfmt_i64(o, x);
}

static size_t format_element(char *o, enum dtype dtype, const unsigned char *p, int64_t i)
{
    size_t k = (size_t)i;
    switch (dtype) {
    case DT_BOOL:
        if (p[k]) {
            memcpy(o, "true", 4);
            return 4;
        }
        memcpy(o, "false", 5);
        return 5;
    case DT_INT8: { int8_t x; memcpy(&x, p + k, 1); return format_int(o, x); }
    case DT_INT16: { int16_t x; memcpy(&x, p + 2 * k, 2); return format_int(o, x); }
    case DT_INT32: { int32_t x; memcpy(&x, p + 4 * k, 4); return format_int(o, x); }
    case DT_INT64: { int64_t x; memcpy(&x, p + 8 * k, 8); return format_int(o, x); }
    case DT_UINT8: return numfmt_u64(o, p[k]);
    case DT_UINT16: { uint16_t x; memcpy(&x, p + 2 * k, 2); return numfmt_u64(o, x); }
    case DT_UINT32: { uint32_t x; memcpy(&x, p + 4 * k, 4); return numfmt_u64(o, x); }
    case DT_UINT64: { uint64_t x; memcpy(&x, p + 8 * k, 8); return numfmt_u64(o, x); }
    case DT_FP16: { uint16_t x; memcpy(&x, p + 2 * k, 2); return numfmt_f32(o, fp16_to_float(x)); }
    case DT_FP32: { float x; memcpy(&x, p + 4 * k, 4); return numfmt_f32(o, x); }
    case DT_FP64: { double x; memcpy(&x, p + 8 * k, 8); return numfmt_f64(o, x); }
    default:
        memcpy(o, "null", 4);
        return 4;
    }
}

/* Elements [i, end) at o, each after a comma but the tensor's first;
 * returns the end. The type's switch is outside the loop. */
static char *format_run(char *o, enum dtype dtype, const unsigned char *p, int64_t i,
                        int64_t end)
{
#define RUN(T, FORMAT)                                                        \
    for (; i < end; i++) {                                                    \
        T x;                                                                  \
        memcpy(&x, p + sizeof(T) * (size_t)i, sizeof(T));                     \
        if (i > 0)                                                            \
            *o++ = ',';                                                       \
        o += FORMAT;                                                          \
    }                                                                         \
    return o
    switch (dtype) {
    case DT_INT8: RUN(int8_t, format_int(o, x));
    case DT_INT16: RUN(int16_t, format_int(o, x));
    case DT_INT32: RUN(int32_t, format_int(o, x));
    case DT_INT64: RUN(int64_t, format_int(o, x));
    case DT_UINT8: RUN(uint8_t, numfmt_u64(o, x));
    case DT_UINT16: RUN(uint16_t, numfmt_u64(o, x));
    case DT_UINT32: RUN(uint32_t, numfmt_u64(o, x));
    case DT_UINT64: RUN(uint64_t, numfmt_u64(o, x));
    case DT_FP32: RUN(float, numfmt_f32(o, x));
    case DT_FP64: RUN(double, numfmt_f64(o, x));
    default: /* BOOL, FP16 */
        for (; i < end; i++) {
            if (i > 0)
                *o++ = ',';
            o += format_element(o, dtype, p, i);
        }
        return o;
    }
#undef RUN
}

/* Elements formatted per reservation of the buffer. */
#define WRITE_BATCH 64
#define ELEMENT_ROOM (NUMFMT_MAX + 1) /* a comma and the number (with its NUL) */

void tensor_json_write(struct buf *b, enum dtype dtype, const void *data, int64_t count)
{
    const unsigned char *p = data;

    if (b->err || buf_putc(b, '[') != 0)
        return;
    for (int64_t i = 0; i < count && !b->err;) {
        if (dtype == DT_BYTES) {
            const struct tensor_bytes *s = (const struct tensor_bytes *)data + i;
            if (i > 0)
                buf_putc(b, ',');
            json_write_quoted(b, s->ptr, s->len);
            i++;
            continue;
        }
        int64_t n = count - i < WRITE_BATCH ? count - i : WRITE_BATCH;
        size_t room = (size_t)n * ELEMENT_ROOM;
        if (b->len > b->max || b->max - b->len < room) {
            /* Near the ceiling: one element at a time, so the ceiling
             * fails exactly where the output stops fitting. */
            char tmp[ELEMENT_ROOM];
            size_t k = 0;
            if (i > 0)
                tmp[k++] = ',';
            k += format_element(tmp + k, dtype, p, i);
            buf_append(b, tmp, k);
            i++;
            continue;
        }
        if (buf_reserve(b, room) != 0)
            return;
        b->len = (size_t)(format_run(b->data + b->len, dtype, p, i, i + n) - b->data);
        i += n;
    }
    buf_putc(b, ']');
}

char *tensor_json_head(char *p, const char *name, size_t name_len, enum dtype dtype,
                       const int64_t *shape, uint32_t ndim)
{
    const char *dt = dtype_name(dtype);
    p = jc_lit(p, "\"name\":");
    p = jc_str(p, name, name_len);
    p = jc_lit(p, ",\"datatype\":\"");
    p = jc_put(p, dt, strnlen(dt, 16));
    p = jc_lit(p, "\",\"shape\":[");
    for (uint32_t d = 0; d < ndim; d++) {
        if (d)
            *p++ = ',';
        p = jc_i64(p, shape[d]);
    }
    *p++ = ']';
    return p;
}

void tensor_json_write_head(struct json_writer *w, const char *name, enum dtype dtype,
                            const int64_t *shape, uint32_t ndim)
{
    struct buf *b = json_w_members_buf(w);
    size_t name_len = strlen(name);
    if (ndim > TENSOR_MAX_DIMS)
        ndim = TENSOR_MAX_DIMS;
    if (!b || buf_reserve(b, TENSOR_JSON_HEAD_ROOM(name_len, ndim)) != 0)
        return;
    char *p = tensor_json_head(b->data + b->len, name, name_len, dtype, shape, ndim);
    b->len = (size_t)(p - b->data);
}
