/*
 * Fuzz target: api/tensor_json, differentially against the tree path
 * (base/json + the element checks of api/rest/infer_json.c).
 *
 * The first byte picks the datatype (low nibble) and a count adjustment
 * (high bits); the rest is the `data` span. The element count is the tree
 * path's leaf count when it parses as an array (so values get compared),
 * shifted by -1/0/+1 on some inputs to exercise the count check. Both paths
 * must accept and reject alike, with the same message for everything but
 * malformed JSON, and produce the same bytes. What is accepted is written
 * back with tensor_json_write and must parse to the same bytes again.
 * The span is also embedded as {"data":<span>} and read with
 * raw_array_key = "data": the JSON reader's raw scan must keep exactly the
 * array's bytes when the span is valid, and tensor_json_parse on the raw
 * span must decide as on the span itself.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tensor_json.h"
#include "base/json.h"
#include "core/fp16.h"

#define MAX_COUNT 65536

#include "../support/tensor_oracle.h"

/* ---- the target ------------------------------------------------------- */

static unsigned char out_a[MAX_COUNT * 16], out_b[MAX_COUNT * 16];

static bool same_output(enum dtype dt, int64_t count, const void *a, const void *b)
{
    if (dt != DT_BYTES)
        return memcmp(a, b, (size_t)count * dtype_size(dt)) == 0;
    const struct tensor_bytes *x = a, *y = b;
    for (int64_t i = 0; i < count; i++)
        if (x[i].len != y[i].len || memcmp(x[i].ptr, y[i].ptr, x[i].len) != 0)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum dtype dt = (enum dtype)(data[0] % DT_COUNT);
    int shift = (data[0] >> 4) % 4 == 3 ? -1 : (data[0] >> 4) % 4 == 2 ? 1 : 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    struct arena arena;
    arena_init(&arena, 4096, 16u << 20);

    /* The tree path first: its leaf count becomes the count. */
    struct json_limits lim = {.max_depth = TENSOR_JSON_MAX_DEPTH, .allow_nonfinite = true};
    struct json_value *root = NULL;
    const char *msg;
    size_t off;
    struct error ea = {0}, eb = {0};
    int ra; /* 0 ok, -1 error (ea), 1 malformed */
    int64_t count = (data[0] >> 4) & 7;
    if (json_parse(&arena, text, len, &lim, &root, &msg, &off) != ST_OK) {
        if (strcmp(msg, "out of memory") == 0)
            goto out_free_arena;
        ra = 1;
    } else if (root->type != JSON_ARRAY) {
        ra = error_set(&ea, 400, "input 'x': 'data' must be an array");
    } else {
        count = count_leaves(root) + shift;
        if (count < 0)
            count = 0;
        if (count > MAX_COUNT)
            goto out_free_arena;
        int64_t got = count_leaves(root);
        if (got != count) {
            char s[128];
            int64_t shape[1] = {count};
            shape_format(shape, 1, s, sizeof s);
            ra = error_set(&ea, 400, "input '%s': shape %s needs %lld elements, 'data' has %lld",
                           "x", s, (long long)count, (long long)got);
        } else {
            struct fill f = {.dtype = dt, .out = out_a, .strs = (void *)out_a, .err = &ea};
            ra = fill_leaves(&f, root);
        }
    }

    int64_t shape[1] = {count};
    enum status rb = tensor_json_parse(text, len, dt, shape, 1, count, out_b, &arena, "x", &eb);
    if (rb != ST_OK && eb.status == 413)
        goto out_free_arena; /* arena ceiling: the paths use different amounts */
    if (ra == 1) {
        if (rb == ST_OK || eb.status != 400)
            __builtin_trap();
    } else if (ra != 0) {
        if (rb == ST_OK || eb.status != ea.status || strcmp(ea.msg, eb.msg) != 0)
            __builtin_trap();
    } else {
        if (rb != ST_OK || !same_output(dt, count, out_a, out_b))
            __builtin_trap();
        /* Written back, the elements parse to the same bytes (NaN payloads
         * aside, which text does not carry). */
        struct buf b;
        buf_init(&b, 64u << 20);
        tensor_json_write(&b, dt, out_b, count);
        if (b.err == 0) {
            struct error ec = {0};
            if (tensor_json_parse(b.data, b.len, dt, shape, 1, count, out_a, &arena, "x", &ec) !=
                0)
                __builtin_trap();
            bool nan_seen = false;
            for (int64_t i = 0; i < count && !nan_seen; i++) {
                if (dt == DT_FP32) {
                    float x;
                    memcpy(&x, out_b + 4 * i, 4);
                    nan_seen = isnan(x);
                } else if (dt == DT_FP64) {
                    double x;
                    memcpy(&x, out_b + 8 * i, 8);
                    nan_seen = isnan(x);
                } else if (dt == DT_FP16) {
                    uint16_t h;
                    memcpy(&h, out_b + 2 * i, 2);
                    nan_seen = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
                }
            }
            if (!nan_seen && dt != DT_BF16 && dt != DT_INVALID &&
                !same_output(dt, count, out_a, out_b))
                __builtin_trap();
        }
        buf_free(&b);
    }

    /* The same span through the reader's raw arrays. */
    size_t wlen = len + 9;
    char *doc = malloc(wlen);
    if (doc) {
        memcpy(doc, "{\"data\":", 8);
        memcpy(doc + 8, text, len);
        doc[wlen - 1] = '}';
        struct json_limits rlim = {.max_depth = TENSOR_JSON_MAX_DEPTH + 1,
                                   .allow_nonfinite = true,
                                   .raw_array_key = "data"};
        struct json_value *rroot = NULL;
        enum status rr = json_parse(&arena, doc, wlen, &rlim, &rroot, &msg, &off);
        const struct json_value *raw = rr == ST_OK ? json_get(rroot, "data") : NULL;
        if (ra != 1 && root && root->type == JSON_ARRAY) {
            /* A valid array: the scan must accept it and keep its bytes. */
            const char *lb = memchr(text, '[', len);
            if (!raw || raw->type != JSON_RAW || raw->u.raw != doc + 8 + (lb - text))
                __builtin_trap();
        }
        /* Compared only when the raw array is the whole span: text like
         * `[],"c":1` is no array, but embedded it makes a valid object. */
        size_t trimmed = len;
        while (trimmed > 0 && (text[trimmed - 1] == ' ' || text[trimmed - 1] == '\t' ||
                               text[trimmed - 1] == '\n' || text[trimmed - 1] == '\r'))
            trimmed--;
        if (raw && raw->type == JSON_RAW && raw->u.raw + raw->len == doc + 8 + trimmed) {
            struct error ec = {0};
            enum status rc = tensor_json_parse(raw->u.raw, raw->len, dt, shape, 1, count, out_a, &arena,
                                       "x", &ec);
            if (!(rc != ST_OK && ec.status == 413) &&
                ((rc == ST_OK) != (rb == ST_OK) || (rb != ST_OK && ra != 1 && strcmp(ec.msg, eb.msg) != 0)))
                __builtin_trap();
        }
        free(doc);
    }

out_free_arena:
    arena_free(&arena);
    return 0;
}
