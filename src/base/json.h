/*
 * json: a strict RFC 8259 JSON reader that builds a tree in an arena, and a
 * streaming writer into a struct buf.
 *
 * Reader contract:
 *   json_parse() parses exactly one JSON value (surrounded by optional
 *   whitespace) from text[0..len). It never reads past len and does not need
 *   NUL termination. The whole tree (values, member arrays, decoded strings)
 *   is allocated from `arena` and lives as long as the arena; `text` may be
 *   freed after the call. Rejected: nesting deeper than limits->max_depth,
 *   invalid UTF-8 in strings, lone surrogates in \u escapes, leading zeros,
 *   trailing garbage. Objects need not be duplicate-free (duplicates are
 *   kept, the first wins in json_get). As an extension (like Python's json
 *   module) the bare tokens NaN, Infinity and -Infinity are accepted as
 *   numbers when limits->allow_nonfinite is set. limits may be NULL (the
 *   defaults), and so may err_msg and err_off. Temporary memory for the
 *   parse (its stacks) also comes from the arena; the depth
 *   limit does not depend on the C stack (the parser is iterative).
 *   Numbers are kept as their source text (copied into the arena), and
 *   converted on demand, exactly, by the json_num_* functions.
 *
 *   Raw arrays: when limits->raw_array_key is set, an ARRAY that is the
 *   value of an object member with exactly that key is not expanded into
 *   the tree. The parser skips over it quickly, only string-aware (brackets
 *   inside strings do not count) and bracket-aware ('[' pairs with ']',
 *   '{' with '}', nesting within max_depth and at most JSON_RAW_MAX_DEPTH
 *   levels), without checking numbers, literals, commas or UTF-8 inside,
 *   and stores it as a JSON_RAW value whose u.raw points INTO `text` (the
 *   '[' ... ']' bytes, len of them). Unlike everything else in the tree,
 *   such a span is valid only as long as `text` is; whoever consumes it
 *   must validate it (api/tensor_json.h does, for KServe's "data").
 *   Returns ST_OK (base/status.h) with *out set; on error ST_ERROR, with
 *   *err_msg set to a static string and *err_off to the byte offset where
 *   the error was detected. A complete value followed by more than
 *   whitespace fails with json_err_trailing (that very pointer, so callers
 *   may compare it) at the first byte after the whitespace.
 *
 * Writer contract:
 *   The writer appends to a struct buf and inserts commas and colons itself;
 *   errors (buffer ceiling, OOM) are sticky in the buf (b->err). Strings are
 *   escaped; invalid UTF-8 bytes are written as \u00XX so the output is
 *   always valid JSON. Non-finite doubles are written as NaN, Infinity,
 *   -Infinity (the Python extension) since JSON has no other spelling.
 *   Nesting deeper than JSON_WRITER_MAX_DEPTH sets b->err = -E2BIG, and an
 *   end without a begin -EINVAL; once b->err is set, every call is a no-op.
 */
#ifndef INFERD_BASE_JSON_H
#define INFERD_BASE_JSON_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/status.h"

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
    JSON_RAW, /* an unexpanded array: see raw_array_key */
};

struct json_member;

struct json_value {
    enum json_type type;
    uint32_t len; /* STRING: decoded bytes; NUMBER, RAW: text bytes; ARRAY/OBJECT: element count */
    union {
        const char *str;             /* STRING: decoded, NUL-terminated (may contain NUL) */
        const char *num;             /* NUMBER: source text, NUL-terminated */
        struct json_value *items;    /* ARRAY: len contiguous values */
        struct json_member *members; /* OBJECT: len contiguous members, source order */
        const char *raw;             /* RAW: into the caller's text, not NUL-terminated */
    } u;
};

struct json_member {
    const char *key; /* decoded, NUL-terminated */
    uint32_t key_len;
    struct json_value value;
};

/* The error of a complete value followed by more bytes (see json_parse). */
extern const char json_err_trailing[];

/* Nesting inside one raw array (its own '[' included) is also bounded by this. */
#define JSON_RAW_MAX_DEPTH 64

struct json_limits {
    uint32_t max_depth;        /* arrays/objects nested deeper fail; 0 = 64 */
    bool allow_nonfinite;      /* accept NaN, Infinity, -Infinity */
    const char *raw_array_key; /* NULL, or: keep arrays under this key as JSON_RAW */
};

enum status json_parse(struct arena *arena, const char *text, size_t len,
                       const struct json_limits *limits, struct json_value **out,
                       const char **err_msg, size_t *err_off);

/* First member named key in an OBJECT; NULL if absent or v is not an object. */
const struct json_value *json_getn(const struct json_value *v, const char *key, size_t n);
/* Inline so that the length of a literal key is known at compile time. */
static inline const struct json_value *json_get(const struct json_value *v, const char *key)
{
    return json_getn(v, key, strlen(key));
}

/* What v is, the way an error message names it: "null", "a boolean",
 * "a number", "a string", "an array" (RAW too), "an object". */
const char *json_type_name(const struct json_value *v);

/* Exact conversions of a NUMBER. Return 0, -EINVAL if v is not a NUMBER or
 * (for the integer forms) not an integer literal (no '.', no exponent), or
 * -ERANGE if the value does not fit. */
int json_num_i64(const struct json_value *v, int64_t *out);
int json_num_u64(const struct json_value *v, uint64_t *out);
/* Correctly rounded (strtod/strtof semantics); -ERANGE only on overflow to
 * infinity of a finite literal. NaN/Infinity tokens convert to NaN/inf. */
int json_num_f64(const struct json_value *v, double *out);
int json_num_f32(const struct json_value *v, float *out);

/*
 * Strings: the one lexer and decoder of JSON strings, used by the reader and
 * by parsers that read JSON text without it (api/tensor_json.c), so that
 * every string is checked by the same rules and fails with the same messages.
 *
 * json_string_scan() reads the string whose opening quote is at p (p < end)
 * and validates all of it, never reading at or past end: escapes (\uXXXX
 * high surrogates must be followed by an escaped low one), no raw control
 * characters, well-formed UTF-8 (no overlong forms, surrogates or code
 * points above U+10FFFF). On success it returns ST_OK and fills *out; the
 * closing quote is at out->raw + out->raw_len. On error it returns ST_ERROR with
 * *err_msg a static string and *err_at the byte it is about:
 *   "unterminated string"          end (no closing quote)
 *   "string too long"              p (UINT32_MAX or more bytes inside)
 *   "invalid escape", "lone surrogate in \\u escape"   the backslash
 *   "control character in string", "invalid UTF-8 in string"   the byte
 * in that order of precedence (the first two as json_parse has always
 * reported them), and of the last four the leftmost. Nothing is allocated;
 * thread: any.
 *
 * json_string_decode() writes the decoded content of a string that
 * json_string_scan() accepted to dst, which has room for s->raw_len bytes
 * (decoding never makes a string longer), and returns its length. \u0000
 * becomes a NUL byte; nothing is NUL-terminated. Without escapes the
 * decoded bytes are the raw ones, so a caller may use s->raw instead.
 */
struct json_string {
    const char *raw; /* the bytes between the quotes, undecoded */
    uint32_t raw_len;
    bool escaped; /* raw contains a backslash escape */
};

enum status json_string_scan(const char *p, const char *end, struct json_string *out,
                             const char **err_msg, const char **err_at);
size_t json_string_decode(const struct json_string *s, char *dst);

/*
 * Length of the leading run of s[0..n) that a JSON string holds as it is:
 * no quote, backslash, control character or byte above 0x7F. The string
 * scanner and both JSON writers (json_write.c, obs/jsonline.h) skip or copy
 * such runs in one piece; inline, eight bytes per test.
 *
 * json_special_bytes(w) has the high bit set in each byte of w (eight
 * bytes, the first in memory in the lowest byte) that ends a run. A borrow
 * may also flag a byte after a flagged one, never before it, so the lowest
 * flag is exact.
 */
static inline uint64_t json_special_bytes(uint64_t w)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t q = w ^ (ones * '"');
    uint64_t b = w ^ (ones * '\\');
    return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w) & highs;
}

/* The index of the first flagged byte of a json_special_bytes() result. */
static inline size_t json_first_special(uint64_t special)
{
    return (size_t)__builtin_ctzll(special) / 8;
}

static inline uint64_t json_load8(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return le64toh(w); /* the first byte lowest */
}

/* Whether any of the 8 bytes of w may be a bracket or a quote: the
 * skippers of raw arrays (json.c, api/rest/infer_json_scan.c) pass over
 * numbers 8 bytes per test. The brackets [ ] { } are exactly the bytes that
 * OR 0x26 turns into 0x7F together with Y _ y DEL; those four never occur
 * in JSON numbers. A hit is rechecked per byte. */
static inline bool json_raw_special8(uint64_t w)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t b = (w | (ones * 0x26)) ^ (ones * 0x7F); /* zero byte: a bracket candidate */
    uint64_t q = w ^ (ones * '"');                    /* zero byte: a quote */
    return (((b - ones) & ~b) | ((q - ones) & ~q)) & highs;
}

/* The first position from p on, 8 bytes at a time, whose word may hold a
 * bracket or a quote, or where fewer than 8 bytes are left. */
static inline const char *json_raw_skip8(const char *p, const char *end)
{
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        if (json_raw_special8(w))
            break;
        p += 8;
    }
    return p;
}

/* Whether all n < 8 bytes of s are plain, tested as one word: two
 * overlapping 4-byte loads, or (n < 4) the first, middle and last bytes
 * with plain filler ('a') in the rest. Short strings are most of what the
 * writers escape: names, methods, versions. */
static inline bool json_short_plain(const char *s, size_t n)
{
    uint64_t w;
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        w = le32toh(a) | (uint64_t)le32toh(b) << 32;
    } else if (n) {
        w = (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[n / 2] << 8 |
            (uint64_t)(unsigned char)s[n - 1] << 16 | UINT64_C(0x6161616161000000);
    } else {
        return true;
    }
    return json_special_bytes(w) == 0;
}

static inline size_t json_plain_run(const char *s, size_t n)
{
    size_t j = 0;
    uint64_t special;
    if (n < 8 && json_short_plain(s, n))
        return n;
    for (; j + 8 <= n; j += 8)
        if ((special = json_special_bytes(json_load8(s + j))) != 0)
            return j + json_first_special(special);
    if (n >= 8) {
        /* The last eight bytes, overlapping the words above (all plain),
         * settle the tail at once. */
        special = json_special_bytes(json_load8(s + n - 8));
        return special ? n - 8 + json_first_special(special) : n;
    }
    for (; j < n; j++) {
        unsigned char c = (unsigned char)s[j];
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
            break;
    }
    return j;
}

/*
 * Length of the well-formed UTF-8 sequence at s (n > 0 bytes available), or
 * 0 if it is not one. Follows Unicode's table 3-7, so overlong forms, UTF-16
 * surrogates and code points above U+10FFFF are all rejected by the ranges
 * allowed for the second byte. Inline: the string scanner and both JSON
 * writers call it per non-ASCII character.
 */
static inline size_t json_utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    size_t len;

    if (c < 0x80)
        return 1;
    if (c < 0xC2) /* a continuation byte, or the lead of an overlong 2-byte form */
        return 0;
    if (c < 0xE0) {
        len = 2;
    } else if (c < 0xF0) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* U+D800..U+DFFF */
    } else if (c < 0xF5) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

#define JSON_WRITER_MAX_DEPTH 32

struct json_writer {
    struct buf *b;
    uint32_t depth;
    bool after_key;                           /* next value follows "key": */
    bool nonempty[JSON_WRITER_MAX_DEPTH + 1]; /* current container has an element */
};

void json_w_init(struct json_writer *w, struct buf *b);
void json_w_obj_begin(struct json_writer *w);
void json_w_obj_end(struct json_writer *w);
void json_w_arr_begin(struct json_writer *w);
void json_w_arr_end(struct json_writer *w);
/* A key written as is: `quoted` is the key in quotes followed by ':' and
 * needs no escaping. json_w_key_lit builds it from a string literal of
 * plain ASCII at compile time (the hot encoders' fixed keys). */
void json_w_key_raw(struct json_writer *w, const char *quoted, size_t n);
#define json_w_key_lit(w, key) json_w_key_raw((w), "\"" key "\":", sizeof(key) + 2)
void json_w_key(struct json_writer *w, const char *key); /* NUL-terminated */
/* A key of n bytes, which may contain NUL (as parsed keys can). */
void json_w_keyn(struct json_writer *w, const char *key, size_t n);
void json_w_str(struct json_writer *w, const char *s, size_t n);
void json_w_cstr(struct json_writer *w, const char *s);
void json_w_int(struct json_writer *w, int64_t v);
void json_w_uint(struct json_writer *w, uint64_t v);
/* Shortest text that reads back to the same float / double (round-trip). */
void json_w_f32(struct json_writer *w, float v);
void json_w_f64(struct json_writer *w, double v);
void json_w_bool(struct json_writer *w, bool v);
void json_w_null(struct json_writer *w);
/* Appends s[0..n) as a quoted JSON string (the escaping json_w_str uses)
 * straight to b, without a writer's separators. */
void json_write_quoted(struct buf *b, const char *s, size_t n);
/* Appends already-valid JSON text as one value. */
void json_w_raw(struct json_writer *w, const char *json, size_t n);
/* For a value produced by another writer straight into the buffer (such as
 * a tensor's data array): writes the separator and returns the buffer the
 * caller must append exactly one valid JSON value to; NULL after an error. */
struct buf *json_w_value_buf(struct json_writer *w);
/* For members appended straight into the buffer, inside an object: writes
 * the comma when the object has members already and returns the buffer,
 * to which the caller appends one or more `"key":value` members separated
 * by commas (none before the first or after the last); NULL after an
 * error. */
struct buf *json_w_members_buf(struct json_writer *w);

#endif
