#include "model/pbtxt.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hex.h"
#include "base/mem.h"
#include "base/status.h"

struct lexer {
    const char *p, *end;
    uint32_t line, col;
    struct arena *arena;
    struct error *err;
    uint32_t nodes, max_nodes, max_depth, max_string;
};

/* One open message or list. Lists append their elements, as fields named
 * after the list, to the message frame below them. */
enum frame_kind { FRAME_MESSAGE, FRAME_LIST };

struct frame {
    enum frame_kind kind;
    uint32_t line, col; /* of the opening bracket */
    /* FRAME_MESSAGE */
    struct pbtxt_value *msg;
    struct pbtxt_field **tail;
    char close; /* '}' or '>'; '\0' for the root */
    /* FRAME_LIST */
    const char *name;
    uint32_t name_line, name_col;
    bool had_colon;
    bool want_value; /* after '[' or ',' */
    bool empty;      /* nothing since '[' (']' allowed) */
};

static bool is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int fail_at(struct lexer *lx, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(struct lexer *lx, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(lx->err, 400, "%u:%u: %s", line, col, msg);
}

/* Describes the byte at the cursor for an error message. */
static const char *describe(const struct lexer *lx, char *buf, size_t size)
{
    if (lx->p >= lx->end)
        return "end of input";
    unsigned char c = (unsigned char)*lx->p;
    if (c >= 0x21 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

static int fail_here(struct lexer *lx, const char *expected)
{
    char buf[16];
    return fail_at(lx, lx->line, lx->col, "expected %s, found %s", expected,
                   describe(lx, buf, sizeof buf));
}

static int fail_alloc(struct lexer *lx, size_t n)
{
    if (lx->arena->max - lx->arena->used < n + 16)
        return fail_at(lx, lx->line, lx->col, "input too large");
    return error_set(lx->err, 500, "%u:%u: out of memory", lx->line, lx->col);
}

static void *alloc(struct lexer *lx, size_t n)
{
    void *p = arena_calloc(lx->arena, 1, n);
    if (!p)
        fail_alloc(lx, n);
    return p;
}

static void advance(struct lexer *lx)
{
    if (*lx->p == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
    lx->p++;
}

static void advance_to(struct lexer *lx, const char *to)
{
    while (lx->p < to)
        advance(lx);
}

static void skip_space(struct lexer *lx)
{
    while (lx->p < lx->end) {
        if (is_space((unsigned char)*lx->p)) {
            advance(lx);
        } else if (*lx->p == '#') {
            while (lx->p < lx->end && *lx->p != '\n')
                advance(lx);
        } else {
            break;
        }
    }
}

/* The same skipping without position tracking, for re-reading strings. */
static const char *skip_space_raw(const char *p, const char *end)
{
    while (p < end) {
        if (is_space((unsigned char)*p))
            p++;
        else if (*p == '#')
            while (p < end && *p != '\n')
                p++;
        else
            break;
    }
    return p;
}

static bool at(const struct lexer *lx, char c)
{
    return lx->p < lx->end && *lx->p == c;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The byte a one-letter escape stands for (\n -> newline), or -1. */
static int simple_escape(char e)
{
    static const char from[] = "abfnrtv\\'\"?";
    static const char to[] = "\a\b\f\n\r\t\v\\'\"?";
    const char *hit = e ? strchr(from, e) : NULL;
    return hit ? (unsigned char)to[hit - from] : NOT_FOUND;
}

/*
 * Decodes one quoted piece starting at its opening quote. Adds the decoded
 * length to *n and, when out is not NULL, writes the bytes at out + *n.
 * Returns the byte after the closing quote, or NULL with *bad / *msg set.
 */
static const char *decode_piece(const char *p, const char *end, char *out, size_t *n,
                                const char **bad, const char **msg)
{
    const char *open = p;
    char quote = *p++;
    size_t k = *n;
    char utf8[4];

    for (;;) {
        if (p >= end) {
            *bad = open;
            *msg = "unterminated string";
            return NULL;
        }
        char c = *p;
        if (c == quote) {
            *n = k;
            return p + 1;
        }
        if (c == '\n') {
            *bad = p;
            *msg = "newline in string (strings cannot span lines)";
            return NULL;
        }
        if (c == '\0') {
            *bad = p;
            *msg = "NUL byte in string (write it as \\0)";
            return NULL;
        }
        if (c != '\\') {
            if (out)
                out[k] = c;
            k++;
            p++;
            continue;
        }
        const char *esc = p++;
        if (p >= end) {
            *bad = open;
            *msg = "unterminated string";
            return NULL;
        }
        char e = *p++;
        uint32_t value = 0;
        size_t nbytes = 1;
        int simple = simple_escape(e);
        if (simple >= 0) {
            if (out)
                out[k] = (char)simple;
            k++;
            continue;
        }
        switch (e) {
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
            value = (uint32_t)(e - '0');
            for (int i = 0; i < 2 && p < end && *p >= '0' && *p <= '7'; i++)
                value = value * 8 + (uint32_t)(*p++ - '0');
            if (value > 0xff) {
                *bad = esc;
                *msg = "octal escape out of range (more than \\377)";
                return NULL;
            }
            break;
        case 'x':
        case 'X':
            if (p >= end || hex_value((unsigned char)*p) < 0) {
                *bad = esc;
                *msg = "\\x escape without hex digits";
                return NULL;
            }
            for (int i = 0; i < 2 && p < end && hex_value((unsigned char)*p) >= 0; i++)
                value = value * 16 + (uint32_t)hex_value((unsigned char)*p++);
            break;
        case 'u':
        case 'U': {
            int digits = e == 'u' ? 4 : 8;
            for (int i = 0; i < digits; i++) {
                if (p >= end || hex_value((unsigned char)*p) < 0) {
                    *bad = esc;
                    *msg = e == 'u' ? "\\u escape needs 4 hex digits"
                                    : "\\U escape needs 8 hex digits";
                    return NULL;
                }
                value = value * 16 + (uint32_t)hex_value((unsigned char)*p++);
            }
            if (value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) {
                *bad = esc;
                *msg = "escape is not a Unicode scalar value";
                return NULL;
            }
            nbytes = utf8_encode(value, utf8);
            if (out)
                memcpy(out + k, utf8, nbytes);
            k += nbytes;
            continue;
        }
        default:
            *bad = esc;
            *msg = "unknown escape sequence";
            return NULL;
        }
        if (out)
            out[k] = (char)value;
        k += nbytes;
    }
}

/* A string: one or more adjacent quoted pieces. Two passes: validate and
 * measure while tracking positions, then decode into one allocation. */
static int lex_string(struct lexer *lx, struct pbtxt_value *v)
{
    const char *start = lx->p;
    uint32_t line = lx->line, col = lx->col;
    size_t total = 0;
    uint32_t pieces = 0;
    const char *bad = NULL, *msg = NULL;

    while (at(lx, '"') || at(lx, '\'')) {
        const char *next = decode_piece(lx->p, lx->end, NULL, &total, &bad, &msg);
        if (!next) {
            advance_to(lx, bad);
            return fail_at(lx, lx->line, lx->col, "%s", msg);
        }
        if (total > lx->max_string)
            return fail_at(lx, line, col, "string longer than %u bytes", lx->max_string);
        advance_to(lx, next);
        pieces++;
        skip_space(lx);
    }

    char *out = alloc(lx, total + 1);
    if (!out)
        return ST_ERROR;
    const char *p = start;
    size_t n = 0;
    for (uint32_t i = 0; i < pieces; i++) {
        p = decode_piece(p, lx->end, out, &n, &bad, &msg);
        p = skip_space_raw(p, lx->end);
    }
    out[n] = '\0';
    v->kind = PBTXT_STRING;
    v->u.text = out;
    v->len = (uint32_t)n;
    return ST_OK;
}

static bool word_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static bool is_nonfinite_word(const char *s, size_t n)
{
    return word_is(s, n, "inf") || word_is(s, n, "infinity") || word_is(s, n, "nan");
}

/* Number at the cursor (after an optional '-', which `start` includes). */
static int lex_number(struct lexer *lx, const char *start, uint32_t line, uint32_t col,
                      struct pbtxt_value *v)
{
    const char *p = lx->p, *end = lx->end;
    bool is_float = false;

    if (*p == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        const char *digits = p;
        while (p < end && hex_value((unsigned char)*p) >= 0)
            p++;
        if (p == digits)
            return fail_at(lx, line, col, "invalid hexadecimal number");
    } else if (*p == '0' && p + 1 < end && is_digit((unsigned char)p[1])) {
        p++;
        while (p < end && is_digit((unsigned char)*p)) {
            if (*p > '7')
                return fail_at(lx, line, col,
                               "invalid octal number (numbers starting with 0 are octal)");
            p++;
        }
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
            return fail_at(lx, line, col,
                           "invalid octal number (numbers starting with 0 are octal)");
    } else {
        while (p < end && is_digit((unsigned char)*p))
            p++;
        if (p < end && *p == '.') {
            is_float = true;
            p++;
            while (p < end && is_digit((unsigned char)*p))
                p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            const char *q = p + 1;
            if (q < end && (*q == '+' || *q == '-'))
                q++;
            if (q >= end || !is_digit((unsigned char)*q))
                return fail_at(lx, line, col, "invalid exponent in number");
            p = q;
            while (p < end && is_digit((unsigned char)*p))
                p++;
            is_float = true;
        }
        if (p < end && (*p == 'f' || *p == 'F')) {
            is_float = true;
            p++;
        }
    }
    if (p < end && (is_ident_char((unsigned char)*p) || *p == '.'))
        return fail_at(lx, line, col,
                       "invalid number (a number must be followed by a space or punctuation)");

    char *text = arena_strndup(lx->arena, start, (size_t)(p - start));
    if (!text)
        return fail_alloc(lx, (size_t)(p - start) + 1);
    advance_to(lx, p);
    v->kind = is_float ? PBTXT_FLOAT : PBTXT_INT;
    v->u.text = text;
    v->len = (uint32_t)(p - start);
    return ST_OK;
}

static int lex_ident(struct lexer *lx, const char **out, size_t *len)
{
    const char *start = lx->p;
    while (lx->p < lx->end && is_ident_char((unsigned char)*lx->p))
        advance(lx);
    *len = (size_t)(lx->p - start);
    char *s = arena_strndup(lx->arena, start, *len);
    if (!s)
        return fail_alloc(lx, *len + 1);
    *out = s;
    return ST_OK;
}

static int lex_scalar(struct lexer *lx, struct pbtxt_value *v)
{
    const char *start = lx->p;
    v->line = lx->line;
    v->col = lx->col;

    if (at(lx, '"') || at(lx, '\''))
        return lex_string(lx, v);

    bool negative = at(lx, '-');
    if (negative)
        advance(lx);
    if (lx->p < lx->end &&
        (is_digit((unsigned char)*lx->p) ||
         (*lx->p == '.' && lx->p + 1 < lx->end && is_digit((unsigned char)lx->p[1]))))
        return lex_number(lx, start, v->line, v->col, v);

    if (lx->p < lx->end && is_ident_start((unsigned char)*lx->p)) {
        const char *word = lx->p;
        while (lx->p < lx->end && is_ident_char((unsigned char)*lx->p))
            advance(lx);
        size_t n = (size_t)(lx->p - word);
        if (negative && !is_nonfinite_word(word, n))
            return fail_at(lx, v->line, v->col, "expected a number after '-'");
        char *text = arena_strndup(lx->arena, start, (size_t)(lx->p - start));
        if (!text)
            return fail_alloc(lx, (size_t)(lx->p - start) + 1);
        v->kind = PBTXT_IDENT;
        v->u.text = text;
        v->len = (uint32_t)(lx->p - start);
        return ST_OK;
    }
    if (negative)
        return fail_at(lx, v->line, v->col, "expected a number after '-'");
    return fail_here(lx, "a value");
}

static struct pbtxt_field *add_field(struct lexer *lx, struct frame *m, const char *name,
                                     uint32_t line, uint32_t col)
{
    if (lx->nodes >= lx->max_nodes) {
        fail_at(lx, line, col, "more than %u fields", lx->max_nodes);
        return NULL;
    }
    struct pbtxt_field *f = alloc(lx, sizeof *f);
    if (!f)
        return NULL;
    lx->nodes++;
    f->name = name;
    f->line = line;
    f->col = col;
    *m->tail = f;
    m->tail = &f->next;
    m->msg->len++;
    return f;
}

static void skip_separator(struct lexer *lx)
{
    skip_space(lx);
    if (at(lx, ',') || at(lx, ';'))
        advance(lx);
}

/* Opens a message as the value of field f (the '{' or '<' at the cursor). */
static int open_message(struct lexer *lx, struct frame *stack, uint32_t *top, uint32_t *depth,
                        struct pbtxt_field *f)
{
    if (*depth >= lx->max_depth)
        return fail_at(lx, lx->line, lx->col, "messages nested deeper than %u", lx->max_depth);
    (*depth)++;
    f->value.kind = PBTXT_MESSAGE;
    f->value.line = lx->line;
    f->value.col = lx->col;
    struct frame *fr = &stack[++*top];
    memset(fr, 0, sizeof *fr);
    fr->kind = FRAME_MESSAGE;
    fr->line = lx->line;
    fr->col = lx->col;
    fr->msg = &f->value;
    fr->tail = &f->value.u.fields;
    fr->close = *lx->p == '{' ? '}' : '>';
    advance(lx);
    return ST_OK;
}

/* After a message or list closed: the frame below continues. */
static void after_close(struct lexer *lx, struct frame *stack, uint32_t top)
{
    if (stack[top].kind == FRAME_LIST) {
        stack[top].want_value = false;
        stack[top].empty = false;
    } else {
        skip_separator(lx);
    }
}

/* One step inside a message: a closing bracket or one field. ST_OK to go
 * on, ST_DONE at the end of the input, or ST_ERROR (err is set). */
static enum status step_message(struct lexer *lx, struct frame *stack, uint32_t *top, uint32_t *depth)
{
    struct frame *m = &stack[*top];
    char buf[16];

    if (lx->p >= lx->end) {
        if (*top == 0)
            return ST_DONE;
        return fail_at(lx, lx->line, lx->col,
                       "unexpected end of input: '%c' opened at %u:%u is not closed",
                       m->close == '}' ? '{' : '<', m->line, m->col);
    }
    char c = *lx->p;
    if (c == ']')
        return fail_at(lx, lx->line, lx->col, "unexpected ']'");
    if (c == '}' || c == '>') {
        if (c != m->close)
            return fail_at(lx, lx->line, lx->col, "unexpected '%c'", c);
        advance(lx);
        (*top)--;
        (*depth)--;
        after_close(lx, stack, *top);
        return ST_OK;
    }
    if (c == '[')
        return fail_at(lx, lx->line, lx->col, "extension and Any fields ([...]) are not supported");
    if (!is_ident_start((unsigned char)c))
        return fail_at(lx, lx->line, lx->col, "expected a field name, found %s",
                       describe(lx, buf, sizeof buf));

    uint32_t line = lx->line, col = lx->col;
    const char *name = NULL;
    size_t name_len;
    if (lex_ident(lx, &name, &name_len))
        return ST_ERROR;
    skip_space(lx);
    bool colon = at(lx, ':');
    if (colon) {
        advance(lx);
        skip_space(lx);
    }
    if (at(lx, '{') || at(lx, '<')) {
        struct pbtxt_field *f = add_field(lx, m, name, line, col);
        if (!f)
            return ST_ERROR;
        return open_message(lx, stack, top, depth, f);
    }
    if (at(lx, '[')) {
        struct frame *fr = &stack[++*top];
        memset(fr, 0, sizeof *fr);
        fr->kind = FRAME_LIST;
        fr->line = lx->line;
        fr->col = lx->col;
        fr->name = name;
        fr->name_line = line;
        fr->name_col = col;
        fr->had_colon = colon;
        fr->want_value = true;
        fr->empty = true;
        advance(lx);
        return ST_OK;
    }
    if (!colon) {
        if (lx->p >= lx->end)
            return fail_at(lx, lx->line, lx->col,
                           "expected ':' or '{' after '%s', found end of input", name);
        return fail_at(lx, lx->line, lx->col, "expected ':' or '{' after '%s', found %s", name,
                       describe(lx, buf, sizeof buf));
    }
    struct pbtxt_field *f = add_field(lx, m, name, line, col);
    if (!f)
        return ST_ERROR;
    if (lex_scalar(lx, &f->value))
        return ST_ERROR;
    skip_separator(lx);
    return ST_OK;
}

/* One step inside a list: an element, a ',' or the ']'. ST_OK or ST_ERROR. */
static enum status step_list(struct lexer *lx, struct frame *stack, uint32_t *top, uint32_t *depth)
{
    struct frame *l = &stack[*top];

    if (lx->p >= lx->end)
        return fail_at(lx, lx->line, lx->col,
                       "unexpected end of input: '[' opened at %u:%u is not closed", l->line,
                       l->col);
    if (at(lx, ']') && (!l->want_value || l->empty)) {
        advance(lx);
        (*top)--;
        after_close(lx, stack, *top);
        return ST_OK;
    }
    if (!l->want_value) {
        if (!at(lx, ','))
            return fail_here(lx, "',' or ']'");
        advance(lx);
        l->want_value = true;
        return ST_OK;
    }
    if (at(lx, '['))
        return fail_at(lx, lx->line, lx->col, "lists cannot be nested");
    struct pbtxt_field *f = add_field(lx, &stack[*top - 1], l->name, l->name_line, l->name_col);
    if (!f)
        return ST_ERROR;
    f->in_list = true;
    if (at(lx, '{') || at(lx, '<'))
        return open_message(lx, stack, top, depth, f);
    if (!l->had_colon)
        return fail_at(lx, l->name_line, l->name_col,
                       "expected ':' before a list of values for '%s'", l->name);
    if (lex_scalar(lx, &f->value))
        return ST_ERROR;
    l->want_value = false;
    l->empty = false;
    return ST_OK;
}

enum status pbtxt_parse(struct arena *arena, const char *text, size_t len,
                        const struct pbtxt_limits *limits, struct pbtxt_value **root,
                        struct error *err)
{
    if (!text)
        text = ""; /* (NULL, 0) is an empty input */
    struct lexer lx = {
        .p = text,
        .end = text + len,
        .line = 1,
        .col = 1,
        .arena = arena,
        .err = err,
        .max_depth = PBTXT_DEFAULT_MAX_DEPTH,
        .max_nodes = PBTXT_DEFAULT_MAX_NODES,
        .max_string = PBTXT_DEFAULT_MAX_STRING,
    };
    if (limits) {
        if (limits->max_depth)
            lx.max_depth = limits->max_depth < PBTXT_MAX_DEPTH_LIMIT ? limits->max_depth
                                                                     : PBTXT_MAX_DEPTH_LIMIT;
        if (limits->max_nodes)
            lx.max_nodes = limits->max_nodes;
        if (limits->max_string)
            lx.max_string = limits->max_string;
    }

    const char *nul = memchr(text, '\0', len);
    if (nul) {
        advance_to(&lx, nul);
        return fail_at(&lx, lx.line, lx.col, "NUL byte in input");
    }

    struct pbtxt_value *top_msg = alloc(&lx, sizeof *top_msg);
    /* One message frame per nesting level, plus at most one list frame
     * above each message frame. */
    struct frame *stack = alloc(&lx, sizeof *stack * (2 * (size_t)lx.max_depth + 2));
    if (!top_msg || !stack)
        return ST_ERROR;
    top_msg->kind = PBTXT_MESSAGE;
    top_msg->line = top_msg->col = 1;
    stack[0].kind = FRAME_MESSAGE;
    stack[0].msg = top_msg;
    stack[0].tail = &top_msg->u.fields;
    stack[0].line = stack[0].col = 1;

    uint32_t top = 0, depth = 0;
    for (;;) {
        skip_space(&lx);
        enum status rc = stack[top].kind == FRAME_MESSAGE
                             ? step_message(&lx, stack, &top, &depth)
                             : step_list(&lx, stack, &top, &depth);
        if (rc == ST_ERROR)
            return ST_ERROR;
        if (rc == ST_DONE)
            break;
    }
    *root = top_msg;
    return ST_OK;
}

/* Magnitude of an INT literal (without sign) and its sign. */
static int int_parts(const struct pbtxt_value *v, bool *negative, uint64_t *mag)
{
    if (v->kind != PBTXT_INT)
        return -EINVAL;
    const char *p = v->u.text;
    *negative = *p == '-';
    if (*negative)
        p++;
    unsigned base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    } else if (p[0] == '0' && p[1] != '\0') {
        base = 8;
        p++;
    }
    uint64_t m = 0;
    for (; *p; p++) {
        int d = hex_value((unsigned char)*p);
        if (d < 0 || (unsigned)d >= base)
            return -EINVAL;
        if (m > (UINT64_MAX - (uint64_t)d) / base)
            return -ERANGE;
        m = m * base + (uint64_t)d;
    }
    *mag = m;
    return 0;
}

int pbtxt_to_i64(const struct pbtxt_value *v, int64_t *out)
{
    bool negative;
    uint64_t mag;
    int rc = int_parts(v, &negative, &mag);
    if (rc)
        return rc;
    if (negative) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return -ERANGE;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return -ERANGE;
        *out = (int64_t)mag;
    }
    return 0;
}

int pbtxt_to_u64(const struct pbtxt_value *v, uint64_t *out)
{
    bool negative;
    uint64_t mag;
    int rc = int_parts(v, &negative, &mag);
    if (rc)
        return rc;
    if (negative && mag != 0)
        return -ERANGE;
    *out = mag;
    return 0;
}

int pbtxt_to_double(const struct pbtxt_value *v, double *out)
{
    if (v->kind == PBTXT_IDENT) {
        const char *s = v->u.text;
        bool negative = *s == '-';
        if (negative)
            s++;
        size_t n = strlen(s);
        if (word_is(s, n, "inf") || word_is(s, n, "infinity"))
            *out = negative ? -INFINITY : INFINITY;
        else if (word_is(s, n, "nan"))
            *out = negative ? -NAN : NAN;
        else
            return -EINVAL;
        return 0;
    }
    if (v->kind == PBTXT_INT) {
        /* Integer literals beyond 64 bits give -ERANGE, as in protobuf. */
        bool negative;
        uint64_t mag;
        int rc = int_parts(v, &negative, &mag);
        if (rc == 0)
            *out = negative ? -(double)mag : (double)mag;
        return rc;
    }
    if (v->kind != PBTXT_FLOAT)
        return -EINVAL;
    size_t n = v->len;
    if (v->u.text[n - 1] == 'f' || v->u.text[n - 1] == 'F')
        n--; /* the float suffix */
    char buf[64];
    char *copy = n < sizeof buf ? buf : mem_alloc(n + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, v->u.text, n);
    copy[n] = '\0';
    errno = 0;
    double d = strtod(copy, NULL);
    int rc = (errno == ERANGE && isinf(d)) ? -ERANGE : 0;
    if (copy != buf)
        mem_free(copy);
    if (rc == 0)
        *out = d;
    return rc;
}

int pbtxt_to_bool(const struct pbtxt_value *v, bool *out)
{
    if (v->kind == PBTXT_IDENT) {
        const char *s = v->u.text;
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "t")) {
            *out = true;
            return 0;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "f")) {
            *out = false;
            return 0;
        }
        return -EINVAL;
    }
    uint64_t u;
    if (v->kind == PBTXT_INT && pbtxt_to_u64(v, &u) == 0 && u <= 1) {
        *out = u == 1;
        return 0;
    }
    return -EINVAL;
}

const struct pbtxt_field *pbtxt_find(const struct pbtxt_value *msg, const char *name)
{
    if (msg->kind != PBTXT_MESSAGE)
        return NULL;
    for (const struct pbtxt_field *f = msg->u.fields; f; f = f->next)
        if (!strcmp(f->name, name))
            return f;
    return NULL;
}

const char *pbtxt_kind_name(enum pbtxt_kind kind)
{
    switch (kind) {
    case PBTXT_MESSAGE:
        return "message";
    case PBTXT_INT:
        return "integer";
    case PBTXT_FLOAT:
        return "float";
    case PBTXT_IDENT:
        return "identifier";
    case PBTXT_STRING:
        return "string";
    }
    return "value";
}
