/*
 * The JSON form of a model configuration (what Triton's load API takes in
 * parameters.config, and what GET /v2/models/{m}/config returns) turned
 * into protobuf text format, so that one parser and one checker serve both.
 *
 * The protobuf JSON mapping is followed: objects are messages, arrays are
 * repeated fields, enum values are strings (the config parser accepts enum
 * names quoted), and 64-bit integers may be written as decimal strings.
 */
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/mem.h"
#include "model/config.h"

static bool is_integer_text(const char *s, size_t n)
{
    size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
    if (i == n || n - i > 20)
        return false;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static void put_string(struct buf *b, const char *s, size_t n)
{
    buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            buf_printf(b, "\\%03o", c);
        else
            buf_putc(b, (char)c);
    }
    buf_putc(b, '"');
}

/* Fields whose values are strings even when they look like numbers; any
 * other string of digits is a 64-bit integer in the protobuf JSON mapping
 * (e.g. "dims": ["16"]). */
static bool string_field(const char *key)
{
    static const char *const names[] = {"name", "key", "string_value", "platform", "backend",
                                        "label_filename", "input_data_file",
                                        "default_model_filename"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(key, names[i]) == 0)
            return true;
    return false;
}

static void put_scalar(struct buf *b, const char *key, const struct json_value *v)
{
    switch (v->type) {
    case JSON_TRUE: buf_puts(b, "true"); break;
    case JSON_FALSE: buf_puts(b, "false"); break;
    case JSON_NUMBER: buf_append(b, v->u.num, v->len); break;
    case JSON_STRING:
        if (!string_field(key) && is_integer_text(v->u.str, v->len))
            buf_append(b, v->u.str, v->len);
        else
            put_string(b, v->u.str, v->len);
        break;
    default: break;
    }
}

static int put_message(struct buf *b, const struct json_value *obj, int depth, struct error *err);

static int put_field(struct buf *b, const char *key, const struct json_value *v, int depth,
                     struct error *err)
{
    switch (v->type) {
    case JSON_NULL:
        return 0; /* protobuf JSON: null = field not set */
    case JSON_OBJECT:
        buf_printf(b, "%s { ", key);
        if (put_message(b, v, depth + 1, err) != 0)
            return -1;
        buf_puts(b, "} ");
        return 0;
    case JSON_ARRAY:
        for (uint32_t i = 0; i < v->len; i++) {
            const struct json_value *item = &v->u.items[i];
            if (item->type == JSON_ARRAY)
                return error_set(err, 400, "config: '%s' holds nested arrays", key);
            if (item->type == JSON_OBJECT) {
                if (put_field(b, key, item, depth, err) != 0)
                    return -1;
                continue;
            }
            buf_printf(b, "%s: ", key);
            put_scalar(b, key, item);
            buf_putc(b, ' ');
        }
        return 0;
    default:
        buf_printf(b, "%s: ", key);
        put_scalar(b, key, v);
        buf_putc(b, ' ');
        return 0;
    }
}

static int put_message(struct buf *b, const struct json_value *obj, int depth, struct error *err)
{
    if (depth > 32)
        return error_set(err, 400, "config: nested too deeply");
    for (uint32_t i = 0; i < obj->len; i++) {
        const struct json_member *m = &obj->u.members[i];
        if (strlen(m->key) != m->key_len || !m->key_len)
            return error_set(err, 400, "config: invalid field name");
        for (const char *k = m->key; *k; k++)
            if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
                  (*k >= '0' && *k <= '9') || *k == '_'))
                return error_set(err, 400, "config: invalid field name '%s'", m->key);
        /* Maps (parameters, warm-up inputs) are objects keyed by name in
         * JSON and repeated {key, value} entries in text format. */
        bool map = (strcmp(m->key, "parameters") == 0 || strcmp(m->key, "inputs") == 0) &&
                   m->value.type == JSON_OBJECT;
        if (!map) {
            if (put_field(b, m->key, &m->value, depth, err) != 0)
                return -1;
            continue;
        }
        for (uint32_t j = 0; j < m->value.len; j++) {
            const struct json_member *e = &m->value.u.members[j];
            buf_printf(b, "%s { key: ", m->key);
            put_string(b, e->key, e->key_len);
            buf_puts(b, " ");
            if (put_field(b, "value", &e->value, depth + 1, err) != 0)
                return -1;
            buf_puts(b, "} ");
        }
    }
    return 0;
}

int model_config_text_from_json(const char *json, size_t len, char **text, struct error *err)
{
    struct arena a;
    arena_init(&a, 4096, (size_t)MODEL_CONFIG_MAX_TEXT * 16);
    struct buf b;
    buf_init(&b, MODEL_CONFIG_MAX_TEXT);
    struct json_value *root;
    const char *msg;
    size_t off;
    int rc = -1;
    *text = NULL;
    if (json_parse(&a, json, len, NULL, &root, &msg, &off) != 0) {
        error_set(err, 400, "config: malformed JSON at byte %zu: %s", off, msg);
        goto out;
    }
    if (root->type != JSON_OBJECT) {
        error_set(err, 400, "config: must be a JSON object");
        goto out;
    }
    if (put_message(&b, root, 0, err) != 0)
        goto out;
    buf_putc(&b, '\0');
    if (b.err) {
        error_set(err, 400, "config: larger than %u bytes", MODEL_CONFIG_MAX_TEXT);
        goto out;
    }
    *text = b.data;
    b.data = NULL;
    rc = 0;
out:
    buf_free(&b);
    arena_free(&a);
    return rc;
}
