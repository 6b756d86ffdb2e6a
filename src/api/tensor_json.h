/*
 * tensor_json: the `data` array of a KServe v2 JSON tensor, decoded straight
 * into tensor memory and encoded straight from it, without a JSON tree.
 *
 * A 784-float request spends most of its decode time on this array; parsing
 * it in one pass with exact number conversion (base/numparse) avoids a tree
 * node and an arena copy per element, and printing with base/numfmt avoids
 * snprintf.
 *
 * tensor_json_parse() accepts exactly what the tree path (base/json with
 * NaN/Infinity allowed, then the per-element checks of api/rest/infer_json.c)
 * accepts for a `data` value nested at most TENSOR_JSON_MAX_DEPTH deep, and
 * produces the same bytes and the same messages. Its errors come in the
 * tree path's order: malformed JSON anywhere in the span first, then a
 * wrong element count, then the first bad element.
 */
#ifndef INFERD_API_TENSOR_JSON_H
#define INFERD_API_TENSOR_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/numfmt.h"
#include "base/error.h"
#include "base/status.h"
#include "core/dtype.h"
#include "core/tensor.h"

/* The outer array plus one level per dimension. Objects inside the array
 * (always a bad element) count towards the depth too. */
#define TENSOR_JSON_MAX_DEPTH (TENSOR_MAX_DIMS + 1)

/*
 * Parses the JSON array text[0..len) (nested arbitrarily; whitespace
 * allowed around and inside) into `count` elements of `dtype`, the product
 * of shape[0..ndim) (the shape is only used in the count message):
 *   numeric types  packed little-endian at `out` (count * dtype_size bytes);
 *                  integers must be integer literals in range, floats are
 *                  rounded exactly like strtof/strtod, NaN/Infinity/
 *                  -Infinity accepted, finite literals that overflow are out
 *                  of range; FP16 via fp16_from_float (a finite value that
 *                  rounds to infinity is out of range).
 *   DT_BOOL        one byte 0/1, from true/false only.
 *   DT_BYTES       `out` is a struct tensor_bytes[count]. A string without
 *                  escapes points INTO `text` (valid as long as text is);
 *                  one with escapes is decoded into `arena` (\u0000 kept).
 * The span is validated completely (it is not assumed to be valid JSON):
 * strict RFC 8259, UTF-8 checked in every string, nesting at most
 * TENSOR_JSON_MAX_DEPTH. `out` is written only for elements before the
 * first bad one; on error its content is unspecified.
 *
 * Returns ST_OK, or ST_ERROR with *err filled: 400 for malformed JSON ("input '%s':
 * malformed JSON in 'data' at byte %zu: %s", offset from text), a count
 * mismatch ("input '%s': shape %s needs %lld elements, 'data' has %lld")
 * or a bad element ("input '%s': element %lld is out of range for datatype
 * %s", "... is not an integer ...", "... is not a number ...", "... is not
 * true or false ...", "... is not a string ..."; "input '%s': datatype %s
 * is not supported in JSON"); 413 when the arena is exhausted.
 * Thread: any; nothing global.
 */
enum status tensor_json_parse(const char *text, size_t len, enum dtype dtype,
                              const int64_t *shape, uint32_t ndim, int64_t count, void *out,
                              struct arena *arena, const char *input_name, struct error *err);

/*
 * Appends the `count` elements at `data` (laid out as above) as one flat
 * JSON array "[...]": numbers via numfmt (shortest round trip; NaN,
 * Infinity, -Infinity for non-finite values), BOOL as true/false, FP16 as
 * its float value, BYTES as JSON strings with invalid UTF-8 bytes written as
 * \u00XX (as json_w_str), other datatypes as null. Errors (buffer ceiling,
 * OOM) are sticky in b->err; nothing is appended once b->err is set.
 */
void tensor_json_write(struct buf *b, enum dtype dtype, const void *data, int64_t count);

/*
 * Writes the members "name", "datatype" and "shape" of a KServe v2 tensor
 * (metadata, infer request or response) into the object w is in.
 */
void tensor_json_write_head(struct json_writer *w, const char *name, enum dtype dtype,
                            const int64_t *shape, uint32_t ndim);

/* The same members at p, unchecked (base/json_cursor.h): the caller made
 * TENSOR_JSON_HEAD_ROOM(name_len, ndim) bytes of room (ndim at most
 * TENSOR_MAX_DIMS). Returns the end. */
#define TENSOR_JSON_HEAD_ROOM(name_len, ndim)                                                  \
    (6 * (size_t)(name_len) + 2 + 16 + (size_t)(ndim) * (NUMFMT_MAX + 1) + 48)
char *tensor_json_head(char *p, const char *name, size_t name_len, enum dtype dtype,
                       const int64_t *shape, uint32_t ndim);

#endif
