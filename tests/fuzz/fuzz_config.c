/*
 * Fuzz target for the --config file: base/yaml (YAML text to a JSON value
 * tree) and cli/config_file's flag keys (the tree applied to the serve
 * options). Properties checked on every input:
 *   - yaml_parse succeeds, or fails with a 400/413 and a message that
 *     names a place ("line L, column C: ", "byte N: ") or a size limit;
 *   - a tree respects the limits and the mapping rules: depth within
 *     YAML_MAX_DEPTH, nodes within YAML_MAX_NODES, NUL-terminated strings
 *     and keys, no duplicate key in a mapping, every NUMBER convertible by
 *     json_num_f64 (so modules can read it);
 *   - the tree written as JSON is YAML that parses to the same tree
 *     (JSON text is YAML), unless it holds what YAML cannot carry raw
 *     (non-printable characters, keys longer than libyaml's simple keys);
 *   - applying its flag keys succeeds or fails with a 400 and a message,
 *     and a success passes or fails serve_options_check with a message.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/yaml.h"
#include "cli/config_file.h"
#include "cli/serve_options.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_config: %s\n", what);
        abort();
    }
}

/* Longest key that still is a simple key for libyaml once escaped (its
 * limit is 1024 characters, an escape takes up to 6). */
#define ROUND_TRIP_MAX_KEY 160

/* A code point libyaml accepts raw in a document (its IS_PRINTABLE). */
static bool printable(uint32_t c)
{
    return c == 0x09 || c == 0x0A || c == 0x0D || (c >= 0x20 && c <= 0x7E) || c == 0x85 ||
           (c >= 0xA0 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD && c != 0xFEFF) ||
           (c >= 0x10000 && c <= 0x10FFFF);
}

/* YAML 1.1's line breaks beyond C0 (NEL, LS, PS): raw in a double-quoted
 * scalar they fold into a space. */
static bool line_break(uint32_t c)
{
    return c == 0x85 || c == 0x2028 || c == 0x2029;
}

/* True when the JSON writer's text of s is a YAML double-quoted scalar
 * with the same content: the writer escapes C0 controls, the rest must be
 * printable and no line break. s is valid UTF-8 (libyaml checked the
 * input). */
static bool writable(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = json_utf8_seq_len(p + i, n - i);
        check(len > 0, "a string is not UTF-8");
        uint32_t c = len == 1   ? p[i]
                     : len == 2 ? (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F)
                     : len == 3 ? (uint32_t)(p[i] & 0x0F) << 12 | (uint32_t)(p[i + 1] & 0x3F) << 6 |
                                      (p[i + 2] & 0x3F)
                                : (uint32_t)(p[i] & 0x07) << 18 | (uint32_t)(p[i + 1] & 0x3F) << 12 |
                                      (uint32_t)(p[i + 2] & 0x3F) << 6 | (p[i + 3] & 0x3F);
        if (c >= 0x20 && (!printable(c) || line_break(c)))
            return false;
        i += len;
    }
    return true;
}

struct walk {
    uint32_t nodes;
    bool round_trip; /* the JSON text is YAML for the same tree */
};

static int cmp_members(const void *pa, const void *pb)
{
    const struct json_member *a = *(const struct json_member *const *)pa;
    const struct json_member *b = *(const struct json_member *const *)pb;
    uint32_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

static void check_tree(const struct json_value *v, uint32_t depth, struct walk *w)
{
    w->nodes++;
    switch (v->type) {
    case JSON_NULL:
    case JSON_TRUE:
    case JSON_FALSE: return;
    case JSON_NUMBER: {
        check(v->u.num[v->len] == '\0' && strlen(v->u.num) == v->len, "number text");
        double d;
        int rc = json_num_f64(v, &d);
        check(rc == 0 || rc == -ERANGE, "a NUMBER json_num_f64 refuses");
        return;
    }
    case JSON_STRING:
        check(v->u.str[v->len] == '\0', "string not NUL-terminated");
        if (!writable(v->u.str, v->len))
            w->round_trip = false;
        return;
    case JSON_ARRAY:
    case JSON_OBJECT:
        check(depth < YAML_MAX_DEPTH, "nested deeper than the limit");
        break;
    case JSON_RAW: check(false, "a raw array"); return;
    }
    if (v->type == JSON_ARRAY) {
        for (uint32_t i = 0; i < v->len; i++)
            check_tree(&v->u.items[i], depth + 1, w);
        return;
    }
    const struct json_member **sorted = malloc((v->len + 1) * sizeof *sorted);
    check(sorted != NULL, "out of memory");
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_member *m = &v->u.members[i];
        check(m->key[m->key_len] == '\0', "key not NUL-terminated");
        if (m->key_len > ROUND_TRIP_MAX_KEY || !writable(m->key, m->key_len))
            w->round_trip = false;
        w->nodes++; /* the key */
        sorted[i] = m;
        check_tree(&m->value, depth + 1, w);
    }
    qsort(sorted, v->len, sizeof *sorted, cmp_members);
    for (uint32_t i = 1; i < v->len; i++)
        check(cmp_members(&sorted[i - 1], &sorted[i]) != 0, "duplicate key in a mapping");
    free(sorted);
}

static void write_tree(struct json_writer *w, const struct json_value *v)
{
    switch (v->type) {
    case JSON_NULL: json_w_null(w); return;
    case JSON_TRUE: json_w_bool(w, true); return;
    case JSON_FALSE: json_w_bool(w, false); return;
    case JSON_NUMBER: json_w_raw(w, v->u.num, v->len); return;
    case JSON_STRING: json_w_str(w, v->u.str, v->len); return;
    case JSON_ARRAY:
        json_w_arr_begin(w);
        for (uint32_t i = 0; i < v->len; i++)
            write_tree(w, &v->u.items[i]);
        json_w_arr_end(w);
        return;
    case JSON_OBJECT:
        json_w_obj_begin(w);
        for (uint32_t i = 0; i < v->len; i++) {
            json_w_keyn(w, v->u.members[i].key, v->u.members[i].key_len);
            write_tree(w, &v->u.members[i].value);
        }
        json_w_obj_end(w);
        return;
    case JSON_RAW: return;
    }
}

static void to_json(const struct json_value *v, struct buf *b)
{
    struct json_writer w;
    json_w_init(&w, b);
    write_tree(&w, v);
}

static void check_error(const struct error *err)
{
    check(err->status == 400 || err->status == 413, "failure without a 400 or 413");
    check(strncmp(err->msg, "line ", 5) == 0 || strncmp(err->msg, "byte ", 5) == 0 ||
              strcmp(err->msg, "out of memory") == 0 || strncmp(err->msg, "larger than ", 12) == 0,
          "an error that names no place");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct arena arena;
    arena_init(&arena, 1 << 16, 64u << 20);
    struct json_value *top = NULL;
    struct error err;
    error_clear(&err);
    if (yaml_parse(&arena, (const char *)data, size, &top, &err) != 0) {
        check_error(&err);
        arena_free(&arena);
        return 0;
    }
    struct walk w = {.round_trip = true};
    check_tree(top, 0, &w);
    check(w.nodes <= YAML_MAX_NODES + 1, "more nodes than the limit");

    struct buf first, second;
    buf_init(&first, 16u << 20);
    buf_init(&second, 16u << 20);
    to_json(top, &first);
    check(!first.err, "the tree does not write as JSON");
    if (w.round_trip && first.len <= YAML_MAX_TEXT) {
        struct json_value *back = NULL;
        if (yaml_parse(&arena, first.data, first.len, &back, &err) != 0) {
            fprintf(stderr, "fuzz_config: %s\n", err.msg);
            check(false, "the tree's JSON text is not YAML");
        }
        to_json(back, &second);
        check(first.len == second.len && memcmp(first.data, second.data, first.len) == 0,
              "the tree's JSON text is YAML for another tree");
    }
    buf_free(&first);
    buf_free(&second);

    struct serve_options o;
    serve_options_defaults(&o);
    error_clear(&err);
    if (config_apply_flags(top, &o, NULL, 0, &err) != 0) {
        check(err.status == 400 && err.msg[0], "a refused key without a 400");
    } else {
        error_clear(&err);
        check(serve_options_check(&o, &err) == 0 || (err.status == 400 && err.msg[0]),
              "a refused combination without a message");
    }
    arena_free(&arena);
    return 0;
}
