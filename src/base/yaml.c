/* YAML → JSON value tree with libyaml's event parser; see base/yaml.h. */
#include "base/yaml.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/status.h"

/* Key of a mapping being built, for the duplicate check at its end. */
struct key_mark {
    const char *key;
    uint32_t len;
    uint32_t index; /* source order, so that the later duplicate is reported */
    size_t line, column;
};

/* A sequence or mapping being built: its elements so far (arena vectors
 * that double; the final array is exact). */
struct frame {
    bool mapping;
    bool have_key; /* mapping: a key waits for its value */
    uint32_t n, cap;
    struct json_value *items;    /* sequence */
    struct json_member *members; /* mapping */
    struct key_mark *keys;       /* mapping: one per member */
    struct key_mark pending;     /* mapping: the waiting key */
};

struct builder {
    struct arena *arena;
    struct error *err;
    struct frame stack[YAML_MAX_DEPTH];
    uint32_t depth;
    uint32_t nodes;
    struct json_value root;
    bool have_root;
};

static int fail_at(struct builder *b, const yaml_mark_t *m, int status, const char *what)
{
    return error_set(b->err, status, "line %zu, column %zu: %s", m->line + 1, m->column + 1, what);
}

static int out_of_memory(struct builder *b, const yaml_mark_t *m)
{
    return fail_at(b, m, 413, "the document needs more memory than allowed");
}

/* Grows a frame's vectors to hold one more element. */
static int frame_reserve(struct builder *b, struct frame *f)
{
    if (f->n < f->cap)
        return 0;
    uint32_t cap = f->cap ? f->cap * 2 : 8;
    if (f->mapping) {
        struct json_member *m = arena_alloc(b->arena, (size_t)cap * sizeof *m);
        struct key_mark *k = arena_alloc(b->arena, (size_t)cap * sizeof *k);
        if (!m || !k)
            return ST_ERROR;
        if (f->n) {
            memcpy(m, f->members, (size_t)f->n * sizeof *m);
            memcpy(k, f->keys, (size_t)f->n * sizeof *k);
        }
        f->members = m;
        f->keys = k;
    } else {
        struct json_value *v = arena_alloc(b->arena, (size_t)cap * sizeof *v);
        if (!v)
            return ST_ERROR;
        if (f->n)
            memcpy(v, f->items, (size_t)f->n * sizeof *v);
        f->items = v;
    }
    f->cap = cap;
    return 0;
}

/* A complete value: the root, a sequence's next item or a mapping's
 * value (keys go through add_key). */
static int add_value(struct builder *b, const struct json_value *v, const yaml_mark_t *m)
{
    if (b->depth == 0) {
        b->root = *v;
        b->have_root = true;
        return 0;
    }
    struct frame *f = &b->stack[b->depth - 1];
    if (frame_reserve(b, f) != 0)
        return out_of_memory(b, m);
    if (f->mapping) {
        f->members[f->n] =
            (struct json_member){.key = f->pending.key, .key_len = f->pending.len, .value = *v};
        f->keys[f->n] = f->pending;
        f->keys[f->n].index = f->n;
        f->have_key = false;
    } else {
        f->items[f->n] = *v;
    }
    f->n++;
    return 0;
}

static int count_node(struct builder *b, const yaml_mark_t *m)
{
    if (++b->nodes > YAML_MAX_NODES)
        return fail_at(b, m, 413, "more than 100000 nodes");
    return 0;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A plain scalar in the decimal number forms of base/yaml.h, written in
 * JSON's spelling to the arena; NULL when it is not one (or on OOM, which
 * *oom tells). */
static const char *plain_number(struct arena *a, const char *s, size_t n, uint32_t *out_len,
                                bool *oom)
{
    size_t i = 0;
    bool minus = false;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        minus = s[i++] == '-';
    size_t int_start = i;
    while (i < n && is_digit(s[i]))
        i++;
    size_t int_len = i - int_start;
    if (int_len > 1 && s[int_start] == '0')
        return NULL; /* 017: YAML 1.1 octal; not a decimal number */
    size_t frac_start = 0, frac_len = 0;
    bool dot = false;
    if (i < n && s[i] == '.') {
        dot = true;
        frac_start = ++i;
        while (i < n && is_digit(s[i]))
            i++;
        frac_len = i - frac_start;
    }
    if (int_len == 0 && frac_len == 0)
        return NULL;
    size_t exp_start = i;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t digits = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == digits)
            return NULL;
    }
    if (i != n)
        return NULL;
    /* -?, integer part (0 when absent), .fraction (0 when empty), exponent */
    char *out = arena_alloc(a, n + 4);
    if (!out) {
        *oom = true;
        return NULL;
    }
    size_t o = 0;
    if (minus)
        out[o++] = '-';
    if (int_len) {
        memcpy(out + o, s + int_start, int_len);
        o += int_len;
    } else {
        out[o++] = '0';
    }
    if (dot) {
        out[o++] = '.';
        if (frac_len) {
            memcpy(out + o, s + frac_start, frac_len);
            o += frac_len;
        } else {
            out[o++] = '0';
        }
    }
    memcpy(out + o, s + exp_start, n - exp_start);
    o += n - exp_start;
    out[o] = '\0';
    *out_len = (uint32_t)o;
    return out;
}

static bool equals_any(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(s, *words, n) == 0)
            return true;
    return false;
}

/* The value of a scalar event, resolved as base/yaml.h says. */
static int scalar_value(struct builder *b, const yaml_event_t *e, struct json_value *v)
{
    static const char *const nulls[] = {"~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    const char *s = (const char *)e->data.scalar.value;
    size_t n = e->data.scalar.length;
    if (n >= UINT32_MAX)
        return fail_at(b, &e->start_mark, 413, "a scalar is too long");
    if (e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (n == 0 || equals_any(s, n, nulls)) {
            *v = (struct json_value){.type = JSON_NULL};
            return 0;
        }
        if (equals_any(s, n, trues) || equals_any(s, n, falses)) {
            *v = (struct json_value){.type = s[0] == 't' || s[0] == 'T' ? JSON_TRUE : JSON_FALSE};
            return 0;
        }
        bool oom = false;
        uint32_t len = 0;
        const char *num = plain_number(b->arena, s, n, &len, &oom);
        if (oom)
            return out_of_memory(b, &e->start_mark);
        if (num) {
            *v = (struct json_value){.type = JSON_NUMBER, .len = len, .u.num = num};
            return 0;
        }
    }
    char *str = arena_strndup(b->arena, s, n);
    if (!str)
        return out_of_memory(b, &e->start_mark);
    *v = (struct json_value){.type = JSON_STRING, .len = (uint32_t)n, .u.str = str};
    return 0;
}

static int on_scalar(struct builder *b, const yaml_event_t *e)
{
    if (count_node(b, &e->start_mark) != 0)
        return ST_ERROR;
    struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;
    if (f && f->mapping && !f->have_key) {
        size_t n = e->data.scalar.length;
        if (n >= UINT32_MAX)
            return fail_at(b, &e->start_mark, 413, "a mapping key is too long");
        char *key = arena_strndup(b->arena, (const char *)e->data.scalar.value, n);
        if (!key)
            return out_of_memory(b, &e->start_mark);
        f->pending = (struct key_mark){.key = key,
                                       .len = (uint32_t)n,
                                       .line = e->start_mark.line,
                                       .column = e->start_mark.column};
        f->have_key = true;
        return 0;
    }
    struct json_value v;
    if (scalar_value(b, e, &v) != 0)
        return ST_ERROR;
    return add_value(b, &v, &e->start_mark);
}

static int on_start(struct builder *b, const yaml_event_t *e, bool mapping)
{
    if (count_node(b, &e->start_mark) != 0)
        return ST_ERROR;
    if (b->depth) {
        struct frame *f = &b->stack[b->depth - 1];
        if (f->mapping && !f->have_key)
            return fail_at(b, &e->start_mark, 400,
                           "a mapping key must be a scalar, not a sequence or a mapping");
    }
    if (b->depth == YAML_MAX_DEPTH)
        return fail_at(b, &e->start_mark, 400, "nested deeper than 32 levels");
    b->stack[b->depth++] = (struct frame){.mapping = mapping};
    return 0;
}

static int cmp_keys(const void *pa, const void *pb)
{
    const struct key_mark *a = pa, *b = pb;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Duplicate keys of a finished mapping: sorted by key (then source
 * order), a duplicate is next to its first occurrence. */
static int check_duplicates(struct builder *b, struct frame *f)
{
    if (f->n < 2)
        return 0;
    qsort(f->keys, f->n, sizeof *f->keys, cmp_keys);
    for (uint32_t i = 1; i < f->n; i++) {
        const struct key_mark *p = &f->keys[i - 1], *k = &f->keys[i];
        if (p->len == k->len && memcmp(p->key, k->key, k->len) == 0) {
            yaml_mark_t m = {.line = k->line, .column = k->column};
            char what[96];
            snprintf(what, sizeof what, "duplicate mapping key (first at line %zu)", p->line + 1);
            return fail_at(b, &m, 400, what);
        }
    }
    return 0;
}

static int on_end(struct builder *b, const yaml_event_t *e)
{
    struct frame *f = &b->stack[--b->depth];
    if (f->mapping && check_duplicates(b, f) != 0)
        return ST_ERROR;
    struct json_value v = {.type = f->mapping ? JSON_OBJECT : JSON_ARRAY, .len = f->n};
    if (f->mapping)
        v.u.members = f->members;
    else
        v.u.items = f->items;
    return add_value(b, &v, &e->start_mark);
}

/* Refuses what base/yaml.h refuses in one event: anchors, aliases, tags. */
static int check_event(struct builder *b, const yaml_event_t *e)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (e->type) {
    case YAML_ALIAS_EVENT:
        return fail_at(b, &e->start_mark, 400, "aliases (*name) are not supported");
    case YAML_SCALAR_EVENT:
        anchor = e->data.scalar.anchor;
        tag = e->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = e->data.sequence_start.anchor;
        tag = e->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = e->data.mapping_start.anchor;
        tag = e->data.mapping_start.tag;
        break;
    default:
        break;
    }
    if (anchor)
        return fail_at(b, &e->start_mark, 400, "anchors (&name) are not supported");
    if (tag)
        return fail_at(b, &e->start_mark, 400, "tags (!name) are not supported");
    return 0;
}

/* libyaml's error: its problem and context are static descriptions, never
 * the document's text. */
static int parser_error(struct builder *b, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return error_set(b->err, 413, "out of memory");
    const char *problem = p->problem ? p->problem : "syntax error";
    if (p->error == YAML_READER_ERROR)
        return error_set(b->err, 400, "byte %zu: %s", p->problem_offset, problem);
    if (p->context)
        return error_set(b->err, 400, "line %zu, column %zu: %s (%s, line %zu)",
                         p->problem_mark.line + 1, p->problem_mark.column + 1, problem, p->context,
                         p->context_mark.line + 1);
    return fail_at(b, &p->problem_mark, 400, problem);
}

static int on_event(struct builder *b, const yaml_event_t *e, int *documents)
{
    if (check_event(b, e) != 0)
        return ST_ERROR;
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++*documents > 1)
            return fail_at(b, &e->start_mark, 400, "a second document (only one is allowed)");
        return 0;
    case YAML_SCALAR_EVENT:
        return on_scalar(b, e);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(b, e, false);
    case YAML_MAPPING_START_EVENT:
        return on_start(b, e, true);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(b, e);
    default:
        return 0;
    }
}

int yaml_parse(struct arena *arena, const char *text, size_t len, struct json_value **out,
               struct error *err)
{
    if (len > YAML_MAX_TEXT)
        return error_set(err, 413, "larger than %u bytes", YAML_MAX_TEXT);
    struct builder *b = arena_calloc(arena, 1, sizeof *b);
    if (!b)
        return error_set(err, 413, "out of memory");
    b->arena = arena;
    b->err = err;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return error_set(err, 413, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = ST_ERROR, documents = 0;
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            parser_error(b, &p);
            break;
        }
        bool end = e.type == YAML_STREAM_END_EVENT;
        int erc = on_event(b, &e, &documents);
        yaml_event_delete(&e);
        if (erc != 0)
            break;
        if (end) {
            rc = 0;
            break;
        }
    }
    yaml_parser_delete(&p);
    if (rc != 0)
        return ST_ERROR;
    struct json_value *v = arena_alloc(arena, sizeof *v);
    if (!v)
        return error_set(err, 413, "out of memory");
    *v = b->have_root ? b->root : (struct json_value){.type = JSON_NULL};
    *out = v;
    return 0;
}
