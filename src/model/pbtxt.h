/*
 * pbtxt: a reader for protobuf text format as Triton's config.pbtxt uses it,
 * into a generic tree (no schema: config.c gives the tree its meaning).
 *
 * Accepted syntax (protobuf's TextFormat, minus extensions and Any):
 *   name: scalar            name { fields }     name: { fields }
 *   name < fields >         name: [ scalar, ... ]    name: [ { fields }, ... ]
 *   A repeated field is written by repeating it or in list form; both give
 *   one pbtxt_field per element, in source order (`in_list` tells which).
 *   Scalars: integers (decimal, -negative, 0x hex, 0 octal), floats (1.5,
 *   .5, 1e-3, 2.5f), identifiers (TYPE_FP32, true, inf; -inf / -nan),
 *   strings in "double" or 'single' quotes with the C escapes \a \b \f \n
 *   \r \t \v \\ \' \" \? \ooo \xHH and \uXXXX / \UXXXXXXXX (written as
 *   UTF-8); adjacent strings are concatenated ("a" 'b' == "ab").
 *   `#` starts a comment to the end of the line. A field may be followed
 *   by one `,` or `;`. Lists take no trailing comma and do not nest.
 *
 * Contract of pbtxt_parse():
 *   Parses text[0..len) (NUL termination not needed; NUL bytes are an
 *   error). The tree (values, fields, names, decoded strings) is allocated
 *   from `arena` and lives as long as it; `text` may be freed after the
 *   call. The parser is iterative: the nesting limit does not depend on the
 *   C stack. Limits (NULL = defaults): messages nested deeper than
 *   max_depth, more than max_nodes fields in all, a string longer than
 *   max_string decoded bytes. Returns ST_OK (base/status.h), or on error
 *   ST_ERROR with err->status = 400
 *   and err->msg = "line:col: message" (1-based; columns count bytes), or
 *   err->status = 500 when the arena could not allocate (a ceiling of the
 *   arena is reported as 400 "input too large"). *root is set only on
 *   success. Numbers keep their source spelling; the pbtxt_to_* functions
 *   convert them exactly and check ranges.
 */
#ifndef INFERD_MODEL_PBTXT_H
#define INFERD_MODEL_PBTXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "base/status.h"

#define PBTXT_DEFAULT_MAX_DEPTH 32
#define PBTXT_DEFAULT_MAX_NODES 100000
#define PBTXT_DEFAULT_MAX_STRING 65536
#define PBTXT_MAX_DEPTH_LIMIT 1000 /* larger max_depth values are clamped */

enum pbtxt_kind {
    PBTXT_MESSAGE,
    PBTXT_INT,    /* integer literal (may be negative, hex or octal) */
    PBTXT_FLOAT,  /* literal with '.', exponent or f suffix */
    PBTXT_IDENT,  /* bare identifier; "-inf"/"-infinity"/"-nan" keep their sign */
    PBTXT_STRING, /* decoded bytes */
};

struct pbtxt_field;

struct pbtxt_value {
    enum pbtxt_kind kind;
    uint32_t line, col; /* where the value starts (the '{' of a message) */
    uint32_t len;       /* MESSAGE: number of fields; others: bytes of text */
    union {
        /* INT/FLOAT/IDENT: the source spelling; STRING: the decoded bytes
         * (may contain NUL). Always NUL-terminated. */
        const char *text;
        struct pbtxt_field *fields; /* MESSAGE: first field, source order */
    } u;
};

struct pbtxt_field {
    const char *name;   /* NUL-terminated identifier */
    uint32_t line, col; /* of the name */
    bool in_list;       /* written as an element of `name: [ ... ]` */
    struct pbtxt_value value;
    struct pbtxt_field *next; /* next field of the same message */
};

struct pbtxt_limits {
    uint32_t max_depth;  /* 0 = PBTXT_DEFAULT_MAX_DEPTH */
    uint32_t max_nodes;  /* 0 = PBTXT_DEFAULT_MAX_NODES */
    uint32_t max_string; /* 0 = PBTXT_DEFAULT_MAX_STRING */
};

enum status pbtxt_parse(struct arena *arena, const char *text, size_t len,
                        const struct pbtxt_limits *limits, struct pbtxt_value **root,
                        struct error *err);

/* Exact conversions. Return 0; -EINVAL when the kind does not fit (an
 * integer needs PBTXT_INT); -ERANGE when the value does not fit (for
 * pbtxt_to_u64 also a negative value). */
int pbtxt_to_i64(const struct pbtxt_value *v, int64_t *out);
int pbtxt_to_u64(const struct pbtxt_value *v, uint64_t *out);
/* INT, FLOAT or the identifiers inf, infinity, nan (any case, optional
 * '-'), as protobuf accepts for float fields. -ERANGE when a finite
 * literal overflows. */
int pbtxt_to_double(const struct pbtxt_value *v, double *out);
/* true/True/t, false/False/f, or the integers 1 and 0; else -EINVAL. */
int pbtxt_to_bool(const struct pbtxt_value *v, bool *out);

/* First field of a MESSAGE named `name`, or NULL. */
const struct pbtxt_field *pbtxt_find(const struct pbtxt_value *msg, const char *name);
/* "message", "integer", "float", "identifier" or "string". */
const char *pbtxt_kind_name(enum pbtxt_kind kind);

#endif
