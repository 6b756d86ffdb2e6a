/*
 * Fuzz target for base/json. Properties checked on every input:
 *   - a failed parse reports a message and an offset within the input;
 *   - whatever parses strictly also parses with allow_nonfinite, to the same tree;
 *   - json_get finds the first member of each key;
 *   - a parsed tree written back with the writer re-parses to an equal tree
 *     (numbers compared as i64, u64, f64 bits, or text when out of range);
 *   - every number that fits a float survives json_w_f32 -> strtof exactly.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"

#define ARENA_MAX (1u << 20)

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_json: %s\n", what);
        abort();
    }
}

/* How a number is compared after the round trip: the most exact form that converts. */
enum num_kind { NUM_I64, NUM_U64, NUM_F64, NUM_TEXT };

static enum num_kind num_kind(const struct json_value *v)
{
    int64_t i;
    uint64_t u;
    double d;
    if (json_num_i64(v, &i) == 0)
        return NUM_I64;
    if (json_num_u64(v, &u) == 0)
        return NUM_U64;
    if (json_num_f64(v, &d) == 0)
        return NUM_F64;
    check(json_num_f64(v, &d) == -ERANGE, "f64 conversion fails with other than -ERANGE");
    return NUM_TEXT;
}

static bool num_equal(const struct json_value *a, const struct json_value *b)
{
    int64_t ia, ib;
    uint64_t ua, ub;
    double da, db;
    switch (num_kind(a)) {
    case NUM_I64:
        return json_num_i64(a, &ia) == 0 && json_num_i64(b, &ib) == 0 && ia == ib;
    case NUM_U64:
        return json_num_u64(a, &ua) == 0 && json_num_u64(b, &ub) == 0 && ua == ub;
    case NUM_F64:
        if (json_num_f64(a, &da) != 0 || json_num_f64(b, &db) != 0)
            return false;
        if (isnan(da))
            return isnan(db);
        return memcmp(&da, &db, sizeof da) == 0;
    case NUM_TEXT:
        return a->len == b->len && memcmp(a->u.num, b->u.num, a->len) == 0;
    }
    return false;
}

static bool tree_equal(const struct json_value *a, const struct json_value *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case JSON_NULL:
    case JSON_TRUE:
    case JSON_FALSE:
        return true;
    case JSON_NUMBER:
        return num_equal(a, b);
    case JSON_STRING:
        return a->len == b->len && memcmp(a->u.str, b->u.str, a->len) == 0;
    case JSON_RAW: /* not produced here (no raw_array_key), compared as text */
        return a->len == b->len && memcmp(a->u.raw, b->u.raw, a->len) == 0;
    case JSON_ARRAY:
        if (a->len != b->len)
            return false;
        for (uint32_t i = 0; i < a->len; i++)
            if (!tree_equal(&a->u.items[i], &b->u.items[i]))
                return false;
        return true;
    case JSON_OBJECT:
        if (a->len != b->len)
            return false;
        for (uint32_t i = 0; i < a->len; i++) {
            const struct json_member *ma = &a->u.members[i], *mb = &b->u.members[i];
            if (ma->key_len != mb->key_len || memcmp(ma->key, mb->key, ma->key_len) != 0 ||
                !tree_equal(&ma->value, &mb->value))
                return false;
        }
        return true;
    }
    return false;
}

static uint32_t tree_depth(const struct json_value *v)
{
    uint32_t deepest = 0;
    if (v->type == JSON_ARRAY)
        for (uint32_t i = 0; i < v->len; i++) {
            uint32_t d = tree_depth(&v->u.items[i]);
            deepest = d > deepest ? d : deepest;
        }
    else if (v->type == JSON_OBJECT)
        for (uint32_t i = 0; i < v->len; i++) {
            uint32_t d = tree_depth(&v->u.members[i].value);
            deepest = d > deepest ? d : deepest;
        }
    else
        return 0;
    return deepest + 1;
}

/* Decoded strings are NUL-terminated. (That they are valid UTF-8 is checked
 * by the round trip: the writer would escape invalid bytes and change them.) */
static void check_string(const char *s, uint32_t len)
{
    check(s[len] == '\0', "decoded string not NUL-terminated");
}

static void check_float(const struct json_value *v)
{
    float f, back;
    if (json_num_f32(v, &f) != 0 || isnan(f))
        return;
    struct buf b;
    struct json_writer w;
    buf_init(&b, 64);
    json_w_init(&w, &b);
    json_w_f32(&w, f);
    buf_putc(&b, '\0'); /* for strtof */
    check(b.err == 0, "json_w_f32 failed");
    back = strtof(b.data, NULL);
    check(memcmp(&back, &f, sizeof f) == 0, "json_w_f32 does not round-trip");
    buf_free(&b);
}

static void check_tree(const struct json_value *v)
{
    switch (v->type) {
    case JSON_NUMBER:
        check(v->u.num[v->len] == '\0' && strlen(v->u.num) == v->len, "bad number text");
        num_kind(v);
        check_float(v);
        break;
    case JSON_STRING:
        check_string(v->u.str, v->len);
        break;
    case JSON_ARRAY:
        for (uint32_t i = 0; i < v->len; i++)
            check_tree(&v->u.items[i]);
        break;
    case JSON_OBJECT:
        for (uint32_t i = 0; i < v->len; i++) {
            const struct json_member *m = &v->u.members[i];
            check_string(m->key, m->key_len);
            check_tree(&m->value);
            if (strlen(m->key) != m->key_len)
                continue; /* json_get cannot name a key with a NUL */
            const struct json_value *found = json_get(v, m->key);
            check(found && found <= &m->value, "json_get misses a key");
            const struct json_member *fm =
                (const struct json_member *)((const char *)found -
                                             offsetof(struct json_member, value));
            check(fm->key_len == m->key_len && memcmp(fm->key, m->key, m->key_len) == 0,
                  "json_get returns another key");
        }
        break;
    default:
        break;
    }
}

static void write_tree(struct json_writer *w, const struct json_value *v)
{
    int64_t i;
    uint64_t u;
    double d;
    switch (v->type) {
    case JSON_NULL:
        json_w_null(w);
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        json_w_bool(w, v->type == JSON_TRUE);
        break;
    case JSON_NUMBER:
        if (json_num_i64(v, &i) == 0)
            json_w_int(w, i);
        else if (json_num_u64(v, &u) == 0)
            json_w_uint(w, u);
        else if (json_num_f64(v, &d) == 0)
            json_w_f64(w, d);
        else
            json_w_raw(w, v->u.num, v->len);
        break;
    case JSON_STRING:
        json_w_str(w, v->u.str, v->len);
        break;
    case JSON_RAW:
        json_w_raw(w, v->u.raw, v->len);
        break;
    case JSON_ARRAY:
        json_w_arr_begin(w);
        for (uint32_t k = 0; k < v->len; k++)
            write_tree(w, &v->u.items[k]);
        json_w_arr_end(w);
        break;
    case JSON_OBJECT:
        json_w_obj_begin(w);
        for (uint32_t k = 0; k < v->len; k++) {
            json_w_keyn(w, v->u.members[k].key, v->u.members[k].key_len);
            write_tree(w, &v->u.members[k].value);
        }
        json_w_obj_end(w);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct arena strict_arena, lenient_arena, again_arena;
    struct json_value *strict = NULL, *lenient = NULL, *again = NULL;
    const char *msg = NULL;
    size_t off = 0;
    struct json_limits lenient_limits = {.allow_nonfinite = true};
    struct buf out;

    arena_init(&strict_arena, 4096, ARENA_MAX);
    arena_init(&lenient_arena, 4096, ARENA_MAX);
    arena_init(&again_arena, 4096, 4 * ARENA_MAX);
    buf_init(&out, 16 * size + 1024);

    enum status strict_rc = json_parse(&strict_arena, text, size, NULL, &strict, &msg, &off);
    if (strict_rc != ST_OK)
        check(msg && off <= size && !strict, "bad error report");
    enum status lenient_rc = json_parse(&lenient_arena, text, size, &lenient_limits, &lenient, &msg, &off);
    if (lenient_rc != ST_OK) {
        check(msg && off <= size && !lenient, "bad error report");
        check(strict_rc != ST_OK, "strict parse accepts what lenient rejects");
        goto out;
    }
    if (strict_rc == ST_OK)
        check(tree_equal(strict, lenient), "strict and lenient trees differ");
    check_tree(lenient);

    struct json_writer w;
    json_w_init(&w, &out);
    write_tree(&w, lenient);
    if (tree_depth(lenient) > JSON_WRITER_MAX_DEPTH) {
        check(out.err == -E2BIG, "writer accepted nesting beyond its limit");
        goto out;
    }
    check(out.err == 0 && w.depth == 0, "writer failed");
    enum status rc = json_parse(&again_arena, out.data, out.len, &lenient_limits, &again, &msg, &off);
    if (rc != ST_OK)
        fprintf(stderr, "re-parse: %s at %zu in %.*s\n", msg, off, (int)out.len, out.data);
    check(rc == ST_OK, "writer output does not parse");
    check(tree_equal(lenient, again), "round trip changed the tree");

out:
    buf_free(&out);
    arena_free(&strict_arena);
    arena_free(&lenient_arena);
    arena_free(&again_arena);
    return 0;
}
