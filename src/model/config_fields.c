/*
 * config_fields: reading one field of config.pbtxt for the section parsers
 * (config_parse.h): the path that names it in messages, the error at its
 * position, and its value checked against the kind the field has in
 * Triton's ModelConfig (singular, message, string, integer in a range,
 * enum, data type, dimension, map entry).
 */
#include "model/config_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CONFIG_IGNORED_MAX 64

static const char *const datatype_names[] = {
    "TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
    "TYPE_UINT64",  "TYPE_INT8", "TYPE_INT16", "TYPE_INT32",  "TYPE_INT64",
    "TYPE_FP16",    "TYPE_FP32", "TYPE_FP64",  "TYPE_STRING", "TYPE_BF16",
};

/* ---- paths and errors ---- */

static void append(char *buf, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, CONFIG_PATH_MAX - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n < CONFIG_PATH_MAX - *len ? (size_t)n : CONFIG_PATH_MAX - 1 - *len;
}

struct mark config_path_push(struct ctx *c, const char *name)
{
    struct mark m = {c->plen, c->splen};
    append(c->path, &c->plen, "%s%s", c->plen ? "." : "", name);
    append(c->spath, &c->splen, "%s%s", c->splen ? "." : "", name);
    return m;
}

void config_path_index(struct ctx *c, uint32_t i)
{
    append(c->path, &c->plen, "[%u]", i);
}

void config_path_key(struct ctx *c, const char *key)
{
    append(c->path, &c->plen, "[\"%.40s\"]", key);
}

void config_path_pop(struct ctx *c, struct mark m)
{
    c->plen = m.plen;
    c->splen = m.splen;
    c->path[c->plen] = '\0';
    c->spath[c->splen] = '\0';
}

int config_fail_at(struct ctx *c, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(c->err, 400, "%u:%u: %s: %s", line, col, c->path, msg);
}

/* "a message", "a string", or the literal itself. */
static const char *describe(const struct pbtxt_value *v, char *buf, size_t size)
{
    switch (v->kind) {
    case PBTXT_MESSAGE:
        return "a message";
    case PBTXT_STRING:
        snprintf(buf, size, "the string \"%.32s%s\"", v->u.text, v->len > 32 ? "..." : "");
        return buf;
    default:
        snprintf(buf, size, "%.32s%s", v->u.text, v->len > 32 ? "..." : "");
        return buf;
    }
}

/* ---- field kinds ---- */

int config_unknown(struct ctx *c, const struct pbtxt_field *f, const char *message_type)
{
    return FAIL_F(c, f, "unknown field (not part of Triton's %s)", message_type);
}

/* A field Triton knows and inferd does not use: remembered once per path. */
int config_ignore(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_config *cfg = c->cfg;
    for (uint32_t i = 0; i < cfg->nignored; i++)
        if (!strcmp(cfg->ignored[i].path, c->spath))
            return 0;
    if (cfg->nignored == CONFIG_IGNORED_MAX)
        return 0;
    if (!cfg->ignored) {
        cfg->ignored = config_calloc(c, CONFIG_IGNORED_MAX, sizeof *cfg->ignored);
        if (!cfg->ignored)
            return ST_ERROR;
    }
    struct model_config_ignored *ig = &cfg->ignored[cfg->nignored];
    ig->path = config_strdup(c, c->spath, c->splen);
    if (!ig->path)
        return ST_ERROR;
    ig->line = f->line;
    ig->col = f->col;
    cfg->nignored++;
    return 0;
}

/* A singular field: at most once, and not in list form. */
int config_once(struct ctx *c, const struct pbtxt_field *f, uint32_t *seen, uint32_t bit)
{
    if (f->in_list)
        return FAIL_F(c, f, "not a repeated field: list syntax is not allowed");
    if (*seen & bit)
        return FAIL_F(c, f, "specified more than once");
    *seen |= bit;
    return 0;
}

int config_want_message(struct ctx *c, const struct pbtxt_field *f)
{
    char buf[64];
    if (f->value.kind != PBTXT_MESSAGE)
        return FAIL_V(c, &f->value, "expected a message { ... }, found %s",
                      describe(&f->value, buf, sizeof buf));
    return 0;
}

int config_get_string(struct ctx *c, const struct pbtxt_field *f, char **out)
{
    char buf[64];
    const struct pbtxt_value *v = &f->value;
    if (v->kind != PBTXT_STRING)
        return FAIL_V(c, v, "expected a string, found %s", describe(v, buf, sizeof buf));
    if (memchr(v->u.text, '\0', v->len))
        return FAIL_V(c, v, "must not contain NUL bytes");
    *out = config_strdup(c, v->u.text, v->len);
    return *out ? ST_OK : ST_ERROR;
}

int config_get_i64(struct ctx *c, const struct pbtxt_field *f, int64_t min, int64_t max,
                   const char *expect, int64_t *out)
{
    char buf[64];
    int64_t x = 0;
    if (pbtxt_to_i64(&f->value, &x) != 0 || x < min || x > max)
        return FAIL_V(c, &f->value, "expected %s, found %s", expect,
                      describe(&f->value, buf, sizeof buf));
    *out = x;
    return 0;
}

int config_get_u64(struct ctx *c, const struct pbtxt_field *f, uint64_t max, const char *expect,
                   uint64_t *out)
{
    char buf[64];
    uint64_t x;
    if (pbtxt_to_u64(&f->value, &x) != 0 || x > max)
        return FAIL_V(c, &f->value, "expected %s, found %s", expect,
                      describe(&f->value, buf, sizeof buf));
    *out = x;
    return 0;
}

int config_get_bool(struct ctx *c, const struct pbtxt_field *f, bool *out)
{
    char buf[64];
    if (pbtxt_to_bool(&f->value, out) != 0)
        return FAIL_V(c, &f->value, "expected true or false, found %s",
                      describe(&f->value, buf, sizeof buf));
    return 0;
}

/* An enum: its identifier, or its number as protobuf also allows. */
int config_get_enum(struct ctx *c, const struct pbtxt_field *f, const char *const *names, size_t n,
                    const char *expect, int *out)
{
    char buf[64];
    const struct pbtxt_value *v = &f->value;
    /* Quoted names too: the JSON form of a config writes enums as strings. */
    if (v->kind == PBTXT_IDENT || v->kind == PBTXT_STRING) {
        for (size_t i = 0; i < n; i++)
            if (!strcmp(v->u.text, names[i])) {
                *out = (int)i;
                return 0;
            }
    } else if (v->kind == PBTXT_INT) {
        int64_t x = 0;
        if (pbtxt_to_i64(v, &x) == 0 && x >= 0 && (uint64_t)x < n) {
            *out = (int)x;
            return 0;
        }
    }
    return FAIL_V(c, v, "expected %s, found %s", expect, describe(v, buf, sizeof buf));
}

int config_get_dtype(struct ctx *c, const struct pbtxt_field *f, enum dtype *out)
{
    int i = 0;
    if (config_get_enum(c, f, datatype_names, COUNT_OF(datatype_names),
                        "a data type such as TYPE_FP32", &i))
        return ST_ERROR;
    enum dtype t = dtype_from_config_name(datatype_names[i], strlen(datatype_names[i]));
    if (t == DT_INVALID)
        return FAIL_V(c, &f->value, "TYPE_INVALID is not a data type");
    *out = t;
    return 0;
}

static uint32_t count_fields(const struct pbtxt_value *msg, const char *name)
{
    uint32_t n = 0;
    for (const struct pbtxt_field *f = msg->u.fields; f; f = f->next)
        if (!strcmp(f->name, name))
            n++;
    return n;
}

int config_check_entries(struct ctx *c, const struct pbtxt_value *msg, const char *name,
                         uint32_t *n)
{
    *n = count_fields(msg, name);
    if (*n > CONFIG_MAX_ENTRIES) {
        const struct pbtxt_field *f = pbtxt_find(msg, name);
        struct mark m = config_path_push(c, name);
        FAIL_F(c, f, "more than %u entries", CONFIG_MAX_ENTRIES);
        config_path_pop(c, m);
        return ST_ERROR;
    }
    return 0;
}

/* One dimension of dims / reshape: >= 1, or -1 when variable is allowed. */
static int get_dim(struct ctx *c, const struct pbtxt_field *f, bool allow_variable, int64_t *out)
{
    char buf[64];
    int64_t x = 0;
    if (pbtxt_to_i64(&f->value, &x) != 0 || x == 0 || x < (allow_variable ? -1 : 1))
        return FAIL_V(c, &f->value, "expected %s, found %s",
                      allow_variable ? "a dimension >= 1, or -1 for a variable dimension"
                                     : "a dimension >= 1",
                      describe(&f->value, buf, sizeof buf));
    *out = x;
    return 0;
}

int config_add_dim(struct ctx *c, const struct pbtxt_field *f, bool allow_variable, int64_t *dims,
                   uint32_t *ndim)
{
    int64_t d = 0;
    if (get_dim(c, f, allow_variable, &d))
        return ST_ERROR;
    if (*ndim == TENSOR_MAX_DIMS)
        return FAIL_V(c, &f->value, "more than %d dimensions", TENSOR_MAX_DIMS);
    dims[(*ndim)++] = d;
    return 0;
}

/* A map entry { key: ... value: ... }: returns its key and value fields
 * (NULL when absent). */
int config_map_entry(struct ctx *c, const struct pbtxt_field *f, const struct pbtxt_field **key,
                     const struct pbtxt_field **value)
{
    uint32_t seen = 0;
    *key = *value = NULL;
    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "key")) {
            rc = config_once(c, e, &seen, 1);
            *key = e;
        } else if (!strcmp(e->name, "value")) {
            rc = config_once(c, e, &seen, 2);
            *value = e;
        } else {
            rc = FAIL_F(c, e, "unknown field in a map entry (expected key and value)");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

/* The string key of a map entry; "" when absent (protobuf's default). */
int config_map_string_key(struct ctx *c, const struct pbtxt_field *key, char **out)
{
    if (!key) {
        *out = config_empty_string;
        return 0;
    }
    struct mark m = config_path_push(c, "key");
    int rc = config_get_string(c, key, out);
    config_path_pop(c, m);
    return rc;
}
