#include "base/json.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "base/numparse.h"

#define JSON_DEFAULT_MAX_DEPTH 64

const char json_err_trailing[] = "trailing characters after value";

/* The two-character escapes (\" \\ \/ \b \f \n \r \t) indexed by the letter
 * after the backslash, for the string scanner (a lookup per escape instead
 * of a memchr); 0 for a letter that is not one of them. */
static const unsigned char unescaped[256] = {
    ['"'] = '"',  ['\\'] = '\\', ['/'] = '/',  ['b'] = '\b',
    ['f'] = '\f', ['n'] = '\n',  ['r'] = '\r', ['t'] = '\t',
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                  */
/* ------------------------------------------------------------------------ */

/* Reads the 4 hex digits of a \u escape at s (s + 4 <= end checked by the caller). */
static int hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return ST_ERROR;
    }
    *out = v;
    return ST_OK;
}

static char *put_utf8(char *d, uint32_t cp)
{
    if (cp < 0x80) {
        *d++ = (char)cp;
    } else if (cp < 0x800) {
        *d++ = (char)(0xC0 | (cp >> 6));
        *d++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *d++ = (char)(0xE0 | (cp >> 12));
        *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *d++ = (char)(0xF0 | (cp >> 18));
        *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (char)(0x80 | (cp & 0x3F));
    }
    return d;
}

/*
 * The escape at s (a backslash, s < end): its length and the code point it
 * stands for, or 0 with *why set. A high surrogate must be followed by an
 * escaped low surrogate; the pair is one code point. Bounded by the end of
 * the text rather than by the closing quote, which makes no difference: a
 * quote is neither a hex digit nor a backslash nor 'u', so an escape that
 * would run into it fails where it would fail at the quote.
 */
static size_t escape_at(const unsigned char *s, const unsigned char *end, uint32_t *cp,
                        const char **why)
{
    uint32_t low;

    if (end - s < 2) {
        *why = "invalid escape"; /* json_string_scan reports it as unterminated */
        return 0;
    }
    if (unescaped[s[1]]) {
        *cp = unescaped[s[1]];
        return 2;
    }
    if (s[1] != 'u' || end - s < 6 || hex4(s + 2, cp) != 0) {
        *why = "invalid escape";
        return 0;
    }
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) {
        *why = "lone surrogate in \\u escape";
        return 0;
    }
    if (*cp < 0xD800 || *cp > 0xDBFF)
        return 6;
    if (end - s < 12 || s[6] != '\\' || s[7] != 'u' || hex4(s + 8, &low) != 0 || low < 0xDC00 ||
        low > 0xDFFF) {
        *why = "lone surrogate in \\u escape";
        return 0;
    }
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    return 12;
}

static int string_fail(const char *why, const char *at, const char **err_msg, const char **err_at)
{
    *err_msg = why;
    *err_at = at;
    return ST_ERROR;
}

/*
 * Reports the error `why` at `at`, inside the string whose opening quote is
 * at p, unless the string has no closing quote or is too long: those are
 * reported first, whatever else is wrong inside. The search for the quote
 * goes on from `at`: what comes before has been read as whole escapes and
 * characters, none of which holds an unescaped quote.
 */
static int string_error(const char *p, const char *at, const char *end, const char *why,
                        const char **err_msg, const char **err_at)
{
    const char *close = at;

    while (close < end && *close != '"') {
        if (*close == '\\' && close + 1 < end)
            close++; /* the escaped byte cannot close the string */
        close++;
    }
    if (close >= end)
        return string_fail("unterminated string", end, err_msg, err_at);
    if ((size_t)(close - (p + 1)) >= UINT32_MAX)
        return string_fail("string too long", p, err_msg, err_at);
    return string_fail(why, at, err_msg, err_at);
}

enum status json_string_scan(const char *p, const char *end, struct json_string *out,
                             const char **err_msg, const char **err_at)
{
    const unsigned char *start = (const unsigned char *)p + 1, *s = start;
    const unsigned char *e = (const unsigned char *)end;
    const char *why;
    uint32_t cp;
    bool escaped = false;

    for (;;) {
        s += json_plain_run((const char *)s, (size_t)(e - s));
        if (s == e || *s == '"')
            break;
        size_t n;
        if (*s == '\\') {
            n = escape_at(s, e, &cp, &why);
            escaped = true;
        } else if (*s < 0x20) {
            n = 0;
            why = "control character in string";
        } else {
            n = json_utf8_seq_len(s, (size_t)(e - s));
            why = "invalid UTF-8 in string";
        }
        if (n == 0)
            return string_error(p, (const char *)s, end, why, err_msg, err_at);
        s += n;
    }
    if (s == e)
        return string_fail("unterminated string", end, err_msg, err_at);
    if ((size_t)(s - start) >= UINT32_MAX)
        return string_fail("string too long", p, err_msg, err_at);
    out->raw = (const char *)start;
    out->raw_len = (uint32_t)(s - start);
    out->escaped = escaped;
    return ST_OK;
}

size_t json_string_decode(const struct json_string *s, char *dst)
{
    const unsigned char *q = (const unsigned char *)s->raw, *end = q + s->raw_len;
    const char *why;
    uint32_t cp;
    char *d = dst;

    if (!s->escaped) {
        memcpy(dst, s->raw, s->raw_len);
        return s->raw_len;
    }
    while (q < end) {
        const unsigned char *run = q;
        while (q < end && *q != '\\')
            q++;
        memcpy(d, run, (size_t)(q - run));
        d += q - run;
        if (q == end)
            break;
        q += escape_at(q, end, &cp, &why); /* validated by json_string_scan */
        d = put_utf8(d, cp);
    }
    return (size_t)(d - dst);
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The reader is iterative so that the nesting limit, not the C stack, bounds
 * how deep a document can go. Children of the containers that are still open
 * wait on one temporary stack (`slots`, heap, reused for the whole parse);
 * when a container closes, its children are copied into one contiguous
 * arena array and popped. `frames` records where each open container's
 * children start on that stack.
 */
struct json_frame {
    size_t base; /* index in slots of the container's first child */
    bool is_object;
};

struct json_parser {
    const char *p, *end;
    struct arena *arena;
    uint32_t max_depth;
    bool allow_nonfinite;
    const char *raw_key; /* limits->raw_array_key */
    size_t raw_key_len;

    struct json_member *slots; /* array children use only .value */
    size_t nslots, slots_cap;
    struct json_frame *frames;
    size_t nframes, frames_cap;

    const char *err_msg;
    const char *err_at;
};

static int fail_at(struct json_parser *ps, const char *at, const char *msg)
{
    ps->err_msg = msg;
    ps->err_at = at;
    return ST_ERROR;
}

static void skip_ws_run(struct json_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Most calls find no whitespace (every other byte is above ' '): that
 * test is inlined, the loop is not. */
static inline void skip_ws(struct json_parser *ps)
{
    if (ps->p < ps->end && (unsigned char)*ps->p <= ' ')
        skip_ws_run(ps);
}

/* Grows a temporary stack: doubles *cap, or starts it at `first` elements.
 * The stacks live in the arena too, so a parse allocates nothing from the
 * heap once the arena has its chunks; the abandoned smaller copies cost at
 * most as much as the final stack. */
static int grow(struct arena *arena, void **array, size_t *cap, size_t first, size_t size)
{
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap > SIZE_MAX / size)
        return ST_ERROR;
    void *p = arena_alloc(arena, ncap * size);
    if (!p)
        return ST_ERROR;
    if (*cap)
        memcpy(p, *array, *cap * size);
    *array = p;
    *cap = ncap;
    return ST_OK;
}

static struct json_member *push_slot(struct json_parser *ps)
{
    if (ps->nslots == ps->slots_cap &&
        grow(ps->arena, (void **)&ps->slots, &ps->slots_cap, 64, sizeof *ps->slots) != 0)
        return NULL;
    return &ps->slots[ps->nslots++];
}

/* Parses the string at ps->p (a quote) into a decoded, NUL-terminated arena
 * copy (decoding never makes a string longer). */
static int parse_string(struct json_parser *ps, const char **out, uint32_t *out_len)
{
    struct json_string str;
    const char *msg, *at;

    if (json_string_scan(ps->p, ps->end, &str, &msg, &at) != 0)
        return fail_at(ps, at, msg);
    char *copy = arena_alloc(ps->arena, (size_t)str.raw_len + 1);
    if (!copy)
        return fail_at(ps, ps->p, "out of memory");
    size_t n = str.raw_len;
    if (str.escaped)
        n = json_string_decode(&str, copy);
    else
        memcpy(copy, str.raw, n);
    copy[n] = '\0';
    *out = copy;
    *out_len = (uint32_t)n;
    ps->p = str.raw + str.raw_len + 1;
    return ST_OK;
}

/*
 * Finds the end of the number starting at s, checking the RFC 8259 grammar
 *   -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
 */
static int scan_number(struct json_parser *ps, const char *s, const char **out_end)
{
    const char *q = s, *end = ps->end;

    if (*q == '-')
        q++;
    if (q == end || !is_digit(*q))
        return fail_at(ps, q, "invalid number");
    if (*q == '0') {
        q++;
        if (q < end && is_digit(*q))
            return fail_at(ps, q, "invalid number"); /* leading zero */
    } else {
        while (q < end && is_digit(*q))
            q++;
    }
    if (q < end && *q == '.') {
        q++;
        if (q == end || !is_digit(*q))
            return fail_at(ps, q, "invalid number");
        while (q < end && is_digit(*q))
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q == end || !is_digit(*q))
            return fail_at(ps, q, "invalid number");
        while (q < end && is_digit(*q))
            q++;
    }
    *out_end = q;
    return ST_OK;
}

/* Parses a number (or Infinity/-Infinity when allowed) and keeps an arena
 * copy of its text, converted later by json_num_*. */
static int parse_number(struct json_parser *ps, struct json_value *v)
{
    const char *s = ps->p, *end;
    const char *digits = *s == '-' ? s + 1 : s;

    if (ps->allow_nonfinite && digits < ps->end && *digits == 'I') {
        if ((size_t)(ps->end - digits) < 8 || memcmp(digits, "Infinity", 8) != 0)
            return fail_at(ps, s, "invalid literal");
        end = digits + 8;
    } else if (scan_number(ps, s, &end) != 0) {
        return ST_ERROR;
    }
    if ((size_t)(end - s) >= UINT32_MAX)
        return fail_at(ps, s, "number too long");
    v->type = JSON_NUMBER;
    v->len = (uint32_t)(end - s);
    v->u.num = arena_strndup(ps->arena, s, v->len);
    if (!v->u.num)
        return fail_at(ps, s, "out of memory");
    ps->p = end;
    return ST_OK;
}

/* Parses one of the bare words true, false, null. */
static int parse_word(struct json_parser *ps, struct json_value *v, const char *word,
                      enum json_type type)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail_at(ps, ps->p, "invalid literal");
    v->type = type;
    v->len = 0;
    v->u.str = NULL;
    ps->p += n;
    return ST_OK;
}

/* Parses a value that is not an array or object. */
static int parse_scalar(struct json_parser *ps, struct json_value *v)
{
    const char *at = ps->p;

    if (at == ps->end)
        return fail_at(ps, at, "unexpected end of input");
    switch (*at) {
    case '"':
        v->type = JSON_STRING;
        return parse_string(ps, &v->u.str, &v->len);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return parse_number(ps, v);
    case 't':
        return parse_word(ps, v, "true", JSON_TRUE);
    case 'f':
        return parse_word(ps, v, "false", JSON_FALSE);
    case 'n':
        return parse_word(ps, v, "null", JSON_NULL);
    case 'I':
        if (ps->allow_nonfinite)
            return parse_number(ps, v);
        break;
    case 'N':
        if (!ps->allow_nonfinite)
            break;
        if (parse_word(ps, v, "NaN", JSON_NUMBER) != 0)
            return ST_ERROR;
        v->len = 3;
        v->u.num = "NaN"; /* static text outlives any arena */
        return ST_OK;
    }
    return fail_at(ps, at, "unexpected character");
}

/* Consumes '[' or '{' and opens a frame for it, if the depth limit allows. */
static int open_container(struct json_parser *ps)
{
    if (ps->nframes == ps->max_depth)
        return fail_at(ps, ps->p, "nesting too deep");
    if (ps->nframes == ps->frames_cap &&
        grow(ps->arena, (void **)&ps->frames, &ps->frames_cap, 16, sizeof *ps->frames) != 0)
        return fail_at(ps, ps->p, "out of memory");
    struct json_frame *f = &ps->frames[ps->nframes++];
    f->base = ps->nslots;
    f->is_object = *ps->p == '{';
    ps->p++;
    return ST_OK;
}

/* Consumes the closing bracket of the innermost container and turns its
 * children into one contiguous arena array in *v. */
static int close_container(struct json_parser *ps, struct json_value *v)
{
    struct json_frame *f = &ps->frames[ps->nframes - 1];
    size_t n = ps->nslots - f->base;

    if (n > UINT32_MAX)
        return fail_at(ps, ps->p, "too many elements");
    v->type = f->is_object ? JSON_OBJECT : JSON_ARRAY;
    v->len = (uint32_t)n;
    v->u.items = NULL; /* an empty container has no array (and slots may be NULL) */
    if (n > 0) {
        const struct json_member *children = &ps->slots[f->base];
        if (f->is_object) {
            v->u.members = arena_alloc(ps->arena, n * sizeof *v->u.members);
            if (!v->u.members)
                return fail_at(ps, ps->p, "out of memory");
            memcpy(v->u.members, children, n * sizeof *children);
        } else {
            v->u.items = arena_alloc(ps->arena, n * sizeof *v->u.items);
            if (!v->u.items)
                return fail_at(ps, ps->p, "out of memory");
            for (size_t i = 0; i < n; i++)
                v->u.items[i] = children[i].value;
        }
    }
    ps->nslots = f->base;
    ps->nframes--;
    ps->p++;
    return ST_OK;
}

/* Parses `"key" :` into a new slot whose value is filled in later. */
static int parse_key(struct json_parser *ps)
{
    skip_ws(ps);
    if (ps->p == ps->end || *ps->p != '"')
        return fail_at(ps, ps->p, "expected string key");
    struct json_member *m = push_slot(ps);
    if (!m)
        return fail_at(ps, ps->p, "out of memory");
    if (parse_string(ps, &m->key, &m->key_len) != 0)
        return ST_ERROR;
    skip_ws(ps);
    if (ps->p == ps->end || *ps->p != ':')
        return fail_at(ps, ps->p, "expected ':'");
    ps->p++;
    return ST_OK;
}

static bool in_object(const struct json_parser *ps)
{
    return ps->frames[ps->nframes - 1].is_object;
}

/* True if the next byte closes the innermost container. */
static bool at_close(const struct json_parser *ps)
{
    return ps->p < ps->end && *ps->p == (in_object(ps) ? '}' : ']');
}

/* Stores a finished value as the next child of the innermost container. */
static int add_child(struct json_parser *ps, const struct json_value *v)
{
    if (in_object(ps)) {
        ps->slots[ps->nslots - 1].value = *v; /* the slot parse_key pushed */
        return ST_OK;
    }
    struct json_member *m = push_slot(ps);
    if (!m)
        return fail_at(ps, ps->p, "out of memory");
    m->key = NULL;
    m->key_len = 0;
    m->value = *v;
    return ST_OK;
}

/* Whether the value about to be parsed is a member named by raw_array_key
 * (parse_key has pushed its slot). */
static bool at_raw_key(const struct json_parser *ps)
{
    if (!ps->raw_key || ps->nframes == 0 || !in_object(ps))
        return false;
    const struct json_member *m = &ps->slots[ps->nslots - 1];
    return m->key_len == ps->raw_key_len && memcmp(m->key, ps->raw_key, m->key_len) == 0;
}

/*
 * Skips the array at ps->p (a '[') without building it, into a JSON_RAW
 * value: strings are skipped whole (a quote preceded by an odd number of
 * backslashes does not end one), brackets must pair up and nest within the
 * depth limits. Everything else is left to whoever consumes the span.
 */
static int scan_raw_array(struct json_parser *ps, struct json_value *v)
{
    const char *start = ps->p, *p = start, *end = ps->end;
    uint64_t objects = 0; /* bit i set: level i+1 is an object */
    uint32_t depth = 0;
    uint32_t limit = ps->max_depth - (uint32_t)ps->nframes; /* levels left */

    if (limit > JSON_RAW_MAX_DEPTH)
        limit = JSON_RAW_MAX_DEPTH;
    for (;;) {
        p = json_raw_skip8(p, end);
        if (p == end)
            return fail_at(ps, p, "unexpected end of input");
        switch (*p) {
        case '"': {
            const char *q = p + 1;
            for (;;) {
                q = memchr(q, '"', (size_t)(end - q));
                if (!q)
                    return fail_at(ps, end, "unterminated string");
                const char *b = q;
                while (b[-1] == '\\') /* the opening quote stops this */
                    b--;
                if ((q - b) % 2 == 0)
                    break;
                q++;
            }
            p = q + 1;
            continue;
        }
        case '[':
        case '{':
            if (depth == limit)
                return fail_at(ps, p, "nesting too deep");
            if (*p == '{')
                objects |= UINT64_C(1) << depth;
            else
                objects &= ~(UINT64_C(1) << depth);
            depth++;
            break;
        case ']':
        case '}':
            if (depth == 0 || (*p == '}') != ((objects >> (depth - 1)) & 1))
                return fail_at(ps, p, "mismatched bracket");
            depth--;
            break;
        default:
            break;
        }
        p++;
        if (depth == 0)
            break;
    }
    if ((size_t)(p - start) >= UINT32_MAX)
        return fail_at(ps, start, "array too long");
    v->type = JSON_RAW;
    v->len = (uint32_t)(p - start);
    v->u.raw = start;
    ps->p = p;
    return ST_OK;
}

static int parse_document(struct json_parser *ps, struct json_value *out)
{
    struct json_value v;

    skip_ws(ps);
    if (ps->p == ps->end)
        return fail_at(ps, ps->p, "empty input");

    for (;;) {
        /* A value starts here: either open a container or read a scalar. */
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == '[' && at_raw_key(ps)) {
            if (scan_raw_array(ps, &v) != 0)
                return ST_ERROR;
        } else if (ps->p < ps->end && (*ps->p == '[' || *ps->p == '{')) {
            if (open_container(ps) != 0)
                return ST_ERROR;
            skip_ws(ps);
            if (!at_close(ps)) {
                /* The first child follows (after its key, in an object). */
                if (in_object(ps) && parse_key(ps) != 0)
                    return ST_ERROR;
                continue;
            }
            if (close_container(ps, &v) != 0) /* an empty container */
                return ST_ERROR;
        } else if (parse_scalar(ps, &v) != 0) {
            return ST_ERROR;
        }

        /* v is complete. Hand it to its container; every container that
         * closes right after it becomes the next complete value. */
        for (;;) {
            if (ps->nframes == 0) {
                skip_ws(ps);
                if (ps->p != ps->end)
                    return fail_at(ps, ps->p, json_err_trailing);
                *out = v;
                return ST_OK;
            }
            if (add_child(ps, &v) != 0)
                return ST_ERROR;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                if (in_object(ps) && parse_key(ps) != 0)
                    return ST_ERROR;
                break; /* on to the next value */
            }
            if (at_close(ps)) {
                if (close_container(ps, &v) != 0)
                    return ST_ERROR;
                continue;
            }
            if (ps->p == ps->end)
                return fail_at(ps, ps->p, "unexpected end of input");
            return fail_at(ps, ps->p,
                           in_object(ps) ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
}

enum status json_parse(struct arena *arena, const char *text, size_t len,
                       const struct json_limits *limits, struct json_value **out,
                       const char **err_msg, size_t *err_off)
{
    struct json_parser ps = {
        .p = text,
        .end = len ? text + len : text, /* no arithmetic on a NULL empty text */
        .arena = arena,
        .max_depth = limits && limits->max_depth ? limits->max_depth : JSON_DEFAULT_MAX_DEPTH,
        .allow_nonfinite = limits && limits->allow_nonfinite,
        .raw_key = limits ? limits->raw_array_key : NULL,
        .raw_key_len = limits && limits->raw_array_key ? strlen(limits->raw_array_key) : 0,
    };
    struct json_value *root = NULL;
    enum status rc = ST_ERROR;

    *out = NULL;
    root = arena_alloc(arena, sizeof *root);
    if (!root) {
        fail_at(&ps, text, "out of memory");
        goto out_free_stacks;
    }
    if (parse_document(&ps, root) != 0)
        goto out_free_stacks;
    *out = root;
    rc = ST_OK;

out_free_stacks:
    if (rc != ST_OK) {
        if (err_msg)
            *err_msg = ps.err_msg;
        if (err_off)
            *err_off = (size_t)(ps.err_at - text);
    }
    return rc;
}

const struct json_value *json_getn(const struct json_value *v, const char *key, size_t n)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_member *m = &v->u.members[i];
        if (m->key_len == n && (n == 0 || (m->key[0] == key[0] && memcmp(m->key, key, n) == 0)))
            return &m->value;
    }
    return NULL;
}

const char *json_type_name(const struct json_value *v)
{
    switch (v->type) {
    case JSON_NULL:
        return "null";
    case JSON_FALSE:
    case JSON_TRUE:
        return "a boolean";
    case JSON_NUMBER:
        return "a number";
    case JSON_STRING:
        return "a string";
    case JSON_ARRAY:
    case JSON_RAW:
        return "an array";
    case JSON_OBJECT:
        return "an object";
    }
    return "a value";
}

/* ------------------------------------------------------------------------ */
/* Number conversions                                                       */
/* ------------------------------------------------------------------------ */

/* numparse does the work; the text was validated by the parse, so -EILSEQ
 * cannot happen (and would mean "not a number" anyway). */
static const char *num_end(const struct json_value *v)
{
    return v->u.num + v->len;
}

int json_num_i64(const struct json_value *v, int64_t *out)
{
    const char *next;
    if (!v || v->type != JSON_NUMBER)
        return -EINVAL;
    int rc = numparse_i64(v->u.num, num_end(v), NUMPARSE_NONFINITE, out, &next);
    return rc == -EILSEQ ? -EINVAL : rc;
}

int json_num_u64(const struct json_value *v, uint64_t *out)
{
    const char *next;
    if (!v || v->type != JSON_NUMBER)
        return -EINVAL;
    int rc = numparse_u64(v->u.num, num_end(v), NUMPARSE_NONFINITE, out, &next);
    return rc == -EILSEQ ? -EINVAL : rc;
}

int json_num_f64(const struct json_value *v, double *out)
{
    const char *next;
    if (!v || v->type != JSON_NUMBER)
        return -EINVAL;
    int rc = numparse_f64(v->u.num, num_end(v), NUMPARSE_NONFINITE, out, &next);
    return rc == -EILSEQ ? -EINVAL : rc;
}

int json_num_f32(const struct json_value *v, float *out)
{
    const char *next;
    if (!v || v->type != JSON_NUMBER)
        return -EINVAL;
    /* Rounded once, straight to float: strtod then (float) can be off by one. */
    int rc = numparse_f32(v->u.num, num_end(v), NUMPARSE_NONFINITE, out, &next);
    return rc == -EILSEQ ? -EINVAL : rc;
}
