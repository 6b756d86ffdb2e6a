/*
 * config_parse: config.pbtxt text -> struct model_config (model_config_parse),
 * and the struct's lifecycle and arena (see config.h, "Parsing").
 */
#include "base/status.h"
#include "model/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/pbtxt.h"

#define CONFIG_ARENA_CHUNK 4096
#define CONFIG_ARENA_MAX (8u << 20)
#define TREE_ARENA_CHUNK 16384
#define TREE_ARENA_MAX (32u << 20)
/* Entries of any one repeated field or map (inputs, preferred sizes, ...):
 * keeps the duplicate checks, which compare pairs, cheap. */
#define CONFIG_MAX_ENTRIES 4096
/* Model instances over all instance groups. */
#define CONFIG_MAX_INSTANCES 256
#define CONFIG_PATH_MAX 160
#define CONFIG_IGNORED_MAX 64

static char empty_string[] = "";

static const char *const datatype_names[] = {
    "TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
    "TYPE_UINT64",  "TYPE_INT8", "TYPE_INT16", "TYPE_INT32",  "TYPE_INT64",
    "TYPE_FP16",    "TYPE_FP32", "TYPE_FP64",  "TYPE_STRING", "TYPE_BF16",
};
static const char *const kind_names[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"};
static const char *const format_names[] = {"FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"};
static const char *const timeout_action_names[] = {"REJECT", "DELAY"};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Parse context: the config being filled and the path of the field being
 * read, with indexes for messages ("input[1].dims") and without them for
 * the list of ignored fields ("input.dims"). */
struct ctx {
    struct model_config *cfg;
    struct error *err;
    char path[CONFIG_PATH_MAX];
    size_t plen;
    char spath[CONFIG_PATH_MAX];
    size_t splen;
};

struct mark {
    size_t plen, splen;
};

void model_config_init(struct model_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    arena_init(&cfg->_arena, CONFIG_ARENA_CHUNK, CONFIG_ARENA_MAX);
    cfg->name = cfg->platform = cfg->backend = empty_string;
    cfg->version_policy.kind = MODEL_VERSIONS_LATEST;
    cfg->version_policy.num_versions = 1;
}

void model_config_free(struct model_config *cfg)
{
    arena_free(&cfg->_arena);
    model_config_init(cfg);
}

const char *model_io_format_name(enum model_io_format f)
{
    return (size_t)f < COUNT_OF(format_names) ? format_names[f] : "FORMAT_NONE";
}

const char *model_timeout_action_name(enum model_timeout_action a)
{
    return (size_t)a < COUNT_OF(timeout_action_names) ? timeout_action_names[a] : "REJECT";
}

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

static struct mark path_push(struct ctx *c, const char *name)
{
    struct mark m = {c->plen, c->splen};
    append(c->path, &c->plen, "%s%s", c->plen ? "." : "", name);
    append(c->spath, &c->splen, "%s%s", c->splen ? "." : "", name);
    return m;
}

static void path_index(struct ctx *c, uint32_t i)
{
    append(c->path, &c->plen, "[%u]", i);
}

static void path_key(struct ctx *c, const char *key)
{
    append(c->path, &c->plen, "[\"%.40s\"]", key);
}

static void path_pop(struct ctx *c, struct mark m)
{
    c->plen = m.plen;
    c->splen = m.splen;
    c->path[c->plen] = '\0';
    c->spath[c->splen] = '\0';
}

static int fail_at(struct ctx *c, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(struct ctx *c, uint32_t line, uint32_t col, const char *fmt, ...)
{
    char msg[ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(c->err, 400, "%u:%u: %s: %s", line, col, c->path, msg);
}

#define FAIL_V(c, v, ...) fail_at((c), (v)->line, (v)->col, __VA_ARGS__)
#define FAIL_F(c, f, ...) fail_at((c), (f)->line, (f)->col, __VA_ARGS__)

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

/* ---- allocation from the config's arena ---- */

/* An allocation of n bytes failed: the arena's ceiling (a client-side
 * problem, 400) or the heap (500). */
static int fail_alloc(const struct model_config *cfg, size_t n, struct error *err)
{
    const struct arena *a = &cfg->_arena;
    if (a->max - a->used < n + 16)
        return error_set(err, 400, "the model configuration is too large");
    return error_set(err, 500, "out of memory while reading the model configuration");
}

void *model_config_alloc(struct model_config *cfg, size_t count, size_t size, struct error *err)
{
    void *p = arena_calloc(&cfg->_arena, count ? count : 1, size);
    if (!p)
        fail_alloc(cfg, count * size, err);
    return p;
}

char *model_config_strndup(struct model_config *cfg, const char *s, size_t n, struct error *err)
{
    char *d = arena_strndup(&cfg->_arena, s, n);
    if (!d)
        fail_alloc(cfg, n + 1, err);
    return d;
}

static void *cfg_calloc(struct ctx *c, size_t count, size_t size)
{
    return model_config_alloc(c->cfg, count, size, c->err);
}

static char *cfg_strdup(struct ctx *c, const char *s, size_t n)
{
    return model_config_strndup(c->cfg, s, n, c->err);
}

/* ---- field kinds ---- */

static int unknown(struct ctx *c, const struct pbtxt_field *f, const char *message_type)
{
    return FAIL_F(c, f, "unknown field (not part of Triton's %s)", message_type);
}

/* A field Triton knows and inferd does not use: remembered once per path. */
static int ignore(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_config *cfg = c->cfg;
    for (uint32_t i = 0; i < cfg->nignored; i++)
        if (!strcmp(cfg->ignored[i].path, c->spath))
            return 0;
    if (cfg->nignored == CONFIG_IGNORED_MAX)
        return 0;
    if (!cfg->ignored) {
        cfg->ignored = cfg_calloc(c, CONFIG_IGNORED_MAX, sizeof *cfg->ignored);
        if (!cfg->ignored)
            return ST_ERROR;
    }
    struct model_config_ignored *ig = &cfg->ignored[cfg->nignored];
    ig->path = cfg_strdup(c, c->spath, c->splen);
    if (!ig->path)
        return ST_ERROR;
    ig->line = f->line;
    ig->col = f->col;
    cfg->nignored++;
    return 0;
}

/* A singular field: at most once, and not in list form. */
static int once(struct ctx *c, const struct pbtxt_field *f, uint32_t *seen, uint32_t bit)
{
    if (f->in_list)
        return FAIL_F(c, f, "not a repeated field: list syntax is not allowed");
    if (*seen & bit)
        return FAIL_F(c, f, "specified more than once");
    *seen |= bit;
    return 0;
}

static int want_message(struct ctx *c, const struct pbtxt_field *f)
{
    char buf[64];
    if (f->value.kind != PBTXT_MESSAGE)
        return FAIL_V(c, &f->value, "expected a message { ... }, found %s",
                      describe(&f->value, buf, sizeof buf));
    return 0;
}

static int get_string(struct ctx *c, const struct pbtxt_field *f, char **out)
{
    char buf[64];
    const struct pbtxt_value *v = &f->value;
    if (v->kind != PBTXT_STRING)
        return FAIL_V(c, v, "expected a string, found %s", describe(v, buf, sizeof buf));
    if (memchr(v->u.text, '\0', v->len))
        return FAIL_V(c, v, "must not contain NUL bytes");
    *out = cfg_strdup(c, v->u.text, v->len);
    return *out ? ST_OK : ST_ERROR;
}

static int get_i64(struct ctx *c, const struct pbtxt_field *f, int64_t min, int64_t max,
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

static int get_u64(struct ctx *c, const struct pbtxt_field *f, uint64_t max, const char *expect,
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

static int get_bool(struct ctx *c, const struct pbtxt_field *f, bool *out)
{
    char buf[64];
    if (pbtxt_to_bool(&f->value, out) != 0)
        return FAIL_V(c, &f->value, "expected true or false, found %s",
                      describe(&f->value, buf, sizeof buf));
    return 0;
}

/* An enum: its identifier, or its number as protobuf also allows. */
static int get_enum(struct ctx *c, const struct pbtxt_field *f, const char *const *names, size_t n,
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

static int get_dtype(struct ctx *c, const struct pbtxt_field *f, enum dtype *out)
{
    int i = 0;
    if (get_enum(c, f, datatype_names, COUNT_OF(datatype_names), "a data type such as TYPE_FP32",
                 &i))
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

static int check_entries(struct ctx *c, const struct pbtxt_value *msg, const char *name,
                         uint32_t *n)
{
    *n = count_fields(msg, name);
    if (*n > CONFIG_MAX_ENTRIES) {
        const struct pbtxt_field *f = pbtxt_find(msg, name);
        struct mark m = path_push(c, name);
        FAIL_F(c, f, "more than %u entries", CONFIG_MAX_ENTRIES);
        path_pop(c, m);
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

static int add_dim(struct ctx *c, const struct pbtxt_field *f, bool allow_variable, int64_t *dims,
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
static int map_entry(struct ctx *c, const struct pbtxt_field *f, const struct pbtxt_field **key,
                     const struct pbtxt_field **value)
{
    uint32_t seen = 0;
    *key = *value = NULL;
    if (want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "key")) {
            rc = once(c, e, &seen, 1);
            *key = e;
        } else if (!strcmp(e->name, "value")) {
            rc = once(c, e, &seen, 2);
            *value = e;
        } else {
            rc = FAIL_F(c, e, "unknown field in a map entry (expected key and value)");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

/* The string key of a map entry; "" when absent (protobuf's default). */
static int map_string_key(struct ctx *c, const struct pbtxt_field *key, char **out)
{
    if (!key) {
        *out = empty_string;
        return 0;
    }
    struct mark m = path_push(c, "key");
    int rc = get_string(c, key, out);
    path_pop(c, m);
    return rc;
}

/* ---- reshape arithmetic ---- */

/*
 * dims and reshape describe the same elements: split both at their -1
 * entries; the pieces must pair up with equal products. [2,4,-1,6] and
 * [8,-1,1,6] agree (8 = 2*4, 6 = 1*6); so do [1] and [] (one element).
 */
static bool reshape_compatible(const int64_t *a, uint32_t na, const int64_t *b, uint32_t nb)
{
    uint32_t i = 0, j = 0;
    for (;;) {
        int64_t pa = 1, pb = 1;
        for (; i < na && a[i] != -1; i++)
            if (__builtin_mul_overflow(pa, a[i], &pa))
                return false;
        for (; j < nb && b[j] != -1; j++)
            if (__builtin_mul_overflow(pb, b[j], &pb))
                return false;
        if (pa != pb || (i == na) != (j == nb))
            return false;
        if (i == na)
            return true;
        i++;
        j++;
    }
}

/* ---- messages ---- */

static int parse_reshape(struct ctx *c, const struct pbtxt_field *f, struct model_config_io *io)
{
    if (want_message(c, f))
        return ST_ERROR;
    io->has_reshape = true;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = !strcmp(e->name, "shape") ? add_dim(c, e, true, io->reshape, &io->reshape_ndim)
                                           : unknown(c, e, "ModelTensorReshape");
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

enum io_bits {
    IO_NAME = 1 << 0,
    IO_DTYPE = 1 << 1,
    IO_FORMAT = 1 << 2,
    IO_RESHAPE = 1 << 3,
    IO_OPTIONAL = 1 << 4,
    IO_SHAPE_TENSOR = 1 << 5,
    IO_NONLINEAR = 1 << 6,
    IO_LABEL = 1 << 7,
};

static int parse_io_field(struct ctx *c, const struct pbtxt_field *f, struct model_config_io *io,
                          bool input, uint32_t *seen)
{
    const char *n = f->name;
    bool flag;
    int k = 0;

    if (!strcmp(n, "name")) {
        if (once(c, f, seen, IO_NAME) || get_string(c, f, &io->name))
            return ST_ERROR;
        return io->name[0] ? 0 : FAIL_V(c, &f->value, "must not be empty");
    }
    if (!strcmp(n, "data_type"))
        return (once(c, f, seen, IO_DTYPE) || get_dtype(c, f, &io->dtype)) ? ST_ERROR : 0;
    if (!strcmp(n, "dims")) {
        io->has_dims = true;
        return add_dim(c, f, true, io->dims, &io->ndim);
    }
    if (!strcmp(n, "reshape"))
        return (once(c, f, seen, IO_RESHAPE) || parse_reshape(c, f, io)) ? ST_ERROR : 0;
    if (!strcmp(n, "is_shape_tensor")) {
        if (once(c, f, seen, IO_SHAPE_TENSOR) || get_bool(c, f, &flag))
            return ST_ERROR;
        return flag ? FAIL_V(c, &f->value, "shape tensors are only supported by TensorRT models")
                    : 0;
    }
    if (!strcmp(n, "is_non_linear_format_io")) {
        if (once(c, f, seen, IO_NONLINEAR) || get_bool(c, f, &flag))
            return ST_ERROR;
        return flag ? FAIL_V(c, &f->value,
                             "non-linear IO formats are only supported by TensorRT models")
                    : 0;
    }
    if (input) {
        if (!strcmp(n, "format")) {
            if (once(c, f, seen, IO_FORMAT) ||
                get_enum(c, f, format_names, COUNT_OF(format_names),
                         "FORMAT_NONE, FORMAT_NHWC or FORMAT_NCHW", &k))
                return ST_ERROR;
            io->format = (enum model_io_format)k;
            return 0;
        }
        if (!strcmp(n, "optional"))
            return (once(c, f, seen, IO_OPTIONAL) || get_bool(c, f, &io->optional)) ? ST_ERROR : 0;
        if (!strcmp(n, "allow_ragged_batch"))
            return ignore(c, f);
        return unknown(c, f, "ModelInput");
    }
    if (!strcmp(n, "label_filename"))
        return (once(c, f, seen, IO_LABEL) || get_string(c, f, &io->label_filename)) ? ST_ERROR : 0;
    return unknown(c, f, "ModelOutput");
}

static int parse_io(struct ctx *c, const struct pbtxt_field *f, struct model_config_io *io,
                    bool input, const struct model_config_io *previous, uint32_t nprevious)
{
    char a[128], b[128];
    uint32_t seen = 0;
    const struct pbtxt_field *name_field = NULL;

    if (want_message(c, f))
        return ST_ERROR;
    io->label_filename = empty_string;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        if (!strcmp(e->name, "name"))
            name_field = e;
        struct mark m = path_push(c, e->name);
        int rc = parse_io_field(c, e, io, input, &seen);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!io->name)
        return FAIL_V(c, &f->value, "must specify 'name'");
    for (uint32_t i = 0; i < nprevious; i++)
        if (!strcmp(previous[i].name, io->name)) {
            struct mark m = path_push(c, "name");
            FAIL_V(c, &name_field->value, "%s '%s' is specified more than once",
                   input ? "input" : "output", io->name);
            path_pop(c, m);
            return ST_ERROR;
        }
    if (io->has_reshape) {
        if (!io->has_dims)
            return FAIL_V(c, &f->value, "reshape needs dims");
        if (c->cfg->max_batch_size == 0 && io->reshape_ndim == 0)
            return FAIL_V(
                c, &f->value,
                "an empty reshape needs max_batch_size > 0 (scalar tensors are not supported)");
        if (!reshape_compatible(io->dims, io->ndim, io->reshape, io->reshape_ndim)) {
            shape_format(io->dims, io->ndim, a, sizeof a);
            shape_format(io->reshape, io->reshape_ndim, b, sizeof b);
            return FAIL_V(c, &f->value, "reshape %s does not hold the same elements as dims %s", b,
                          a);
        }
    }
    if (io->format != MODEL_IO_FORMAT_NONE && io->has_dims && io->ndim != 3)
        return FAIL_V(c, &f->value, "%s needs 3 dims", format_names[io->format]);
    return 0;
}

static int parse_ios(struct ctx *c, const struct pbtxt_value *root, const char *name, bool input)
{
    struct model_config *cfg = c->cfg;
    uint32_t n;
    if (check_entries(c, root, name, &n))
        return ST_ERROR;
    struct model_config_io *ios = cfg_calloc(c, n, sizeof *ios);
    if (!ios)
        return ST_ERROR;
    uint32_t i = 0;
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        if (strcmp(f->name, name))
            continue;
        struct mark m = path_push(c, name);
        path_index(c, i);
        int rc = parse_io(c, f, &ios[i], input, ios, i);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
        i++;
    }
    if (input) {
        cfg->inputs = ios;
        cfg->ninputs = n;
    } else {
        cfg->outputs = ios;
        cfg->noutputs = n;
    }
    return 0;
}

enum queue_bits { QP_ACTION = 1, QP_TIMEOUT = 2, QP_OVERRIDE = 4, QP_SIZE = 8 };

static int parse_queue_policy(struct ctx *c, const struct pbtxt_field *f,
                              struct model_queue_policy *qp)
{
    uint32_t seen = 0;
    uint64_t u = 0;
    int k = 0;
    if (want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc;
        if (!strcmp(e->name, "timeout_action")) {
            rc = once(c, e, &seen, QP_ACTION) ||
                 get_enum(c, e, timeout_action_names, COUNT_OF(timeout_action_names),
                          "REJECT or DELAY", &k);
            if (!rc)
                qp->timeout_action = (enum model_timeout_action)k;
        } else if (!strcmp(e->name, "default_timeout_microseconds")) {
            rc = once(c, e, &seen, QP_TIMEOUT) ||
                 get_u64(c, e, UINT64_MAX, "a non-negative integer", &qp->default_timeout_us);
        } else if (!strcmp(e->name, "allow_timeout_override")) {
            rc = once(c, e, &seen, QP_OVERRIDE) || get_bool(c, e, &qp->allow_timeout_override);
        } else if (!strcmp(e->name, "max_queue_size")) {
            rc = once(c, e, &seen, QP_SIZE) ||
                 get_u64(c, e, UINT32_MAX, "a non-negative 32-bit integer", &u);
            if (!rc)
                qp->max_queue_size = (uint32_t)u;
        } else {
            rc = unknown(c, e, "ModelQueuePolicy");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

static int parse_priority_policy(struct ctx *c, const struct pbtxt_field *f,
                                 struct model_dynamic_batching *db, uint32_t index)
{
    const struct pbtxt_field *key, *value;
    char buf[64];
    uint64_t level = 0;

    path_index(c, index);
    if (map_entry(c, f, &key, &value))
        return ST_ERROR;
    if (key) {
        struct mark m = path_push(c, "key");
        int rc = get_u64(c, key, UINT64_MAX, "a priority level", &level);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (db->priority_levels == 0)
        return FAIL_F(c, f, "needs priority_levels");
    if (level < 1 || level > db->priority_levels) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)level);
        return FAIL_V(c, key ? &key->value : &f->value, "priority level %s is not in [1, %llu]",
                      buf, (unsigned long long)db->priority_levels);
    }
    struct model_priority_policy *pp = NULL;
    for (uint32_t i = 0; i < db->npriority_policies; i++)
        if (db->priority_queue_policy[i].level == level)
            pp = &db->priority_queue_policy[i]; /* the last entry wins, as in protobuf maps */
    if (!pp)
        pp = &db->priority_queue_policy[db->npriority_policies++];
    memset(pp, 0, sizeof *pp);
    pp->level = level;
    if (value) {
        struct mark m = path_push(c, "value");
        int rc = parse_queue_policy(c, value, &pp->policy);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

enum db_bits { DB_DELAY = 1, DB_ORDER = 2, DB_LEVELS = 4, DB_DEFAULT_LEVEL = 8, DB_POLICY = 16 };

static int parse_dynamic_batching(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_dynamic_batching *db = &c->cfg->dynamic_batching;
    int32_t max_batch = c->cfg->max_batch_size;
    const struct pbtxt_field *default_level = NULL;
    uint32_t seen = 0, npreferred, npolicies;

    if (want_message(c, f))
        return ST_ERROR;
    const struct pbtxt_value *msg = &f->value;
    db->enabled = true;

    /* priority_levels first: the levels of the other fields depend on it. */
    for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
        if (strcmp(e->name, "priority_levels"))
            continue;
        struct mark m = path_push(c, e->name);
        int rc = once(c, e, &seen, DB_LEVELS) ||
                 get_u64(c, e, UINT64_MAX, "a non-negative integer", &db->priority_levels);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (check_entries(c, msg, "preferred_batch_size", &npreferred) ||
        check_entries(c, msg, "priority_queue_policy", &npolicies))
        return ST_ERROR;
    db->preferred_batch_size = cfg_calloc(c, npreferred, sizeof *db->preferred_batch_size);
    db->priority_queue_policy = cfg_calloc(c, npolicies, sizeof *db->priority_queue_policy);
    if (!db->preferred_batch_size || !db->priority_queue_policy)
        return ST_ERROR;

    for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        int64_t x = 0;
        if (!strcmp(e->name, "preferred_batch_size")) {
            rc = get_i64(c, e, 1, INT32_MAX, "a positive batch size", &x);
            if (!rc && x > max_batch)
                rc = FAIL_V(c, &e->value,
                            "preferred batch size %lld is larger than max_batch_size %d",
                            (long long)x, max_batch);
            if (!rc)
                db->preferred_batch_size[db->npreferred++] = (int32_t)x;
        } else if (!strcmp(e->name, "max_queue_delay_microseconds")) {
            rc = once(c, e, &seen, DB_DELAY) ||
                 get_u64(c, e, UINT64_MAX, "a non-negative integer", &db->max_queue_delay_us);
        } else if (!strcmp(e->name, "preserve_ordering")) {
            rc = once(c, e, &seen, DB_ORDER) || get_bool(c, e, &db->preserve_ordering);
        } else if (!strcmp(e->name, "priority_levels")) {
            /* read above */
        } else if (!strcmp(e->name, "default_priority_level")) {
            default_level = e;
            rc = once(c, e, &seen, DB_DEFAULT_LEVEL) ||
                 get_u64(c, e, UINT64_MAX, "a non-negative integer", &db->default_priority_level);
        } else if (!strcmp(e->name, "default_queue_policy")) {
            rc =
                once(c, e, &seen, DB_POLICY) || parse_queue_policy(c, e, &db->default_queue_policy);
        } else if (!strcmp(e->name, "priority_queue_policy")) {
            rc = parse_priority_policy(c, e, db, db->npriority_policies);
        } else {
            rc = unknown(c, e, "ModelDynamicBatching");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }

    if (db->priority_levels > 0 &&
        (db->default_priority_level < 1 || db->default_priority_level > db->priority_levels)) {
        struct mark m = path_push(c, "default_priority_level");
        fail_at(c, default_level ? default_level->value.line : msg->line,
                default_level ? default_level->value.col : msg->col,
                "must be in [1, %llu] when priority_levels is set",
                (unsigned long long)db->priority_levels);
        path_pop(c, m);
        return ST_ERROR;
    }
    if (db->priority_levels == 0 && db->default_priority_level != 0) {
        struct mark m = path_push(c, "default_priority_level");
        FAIL_V(c, &default_level->value, "needs priority_levels");
        path_pop(c, m);
        return ST_ERROR;
    }
    if (db->preserve_ordering) {
        if (db->priority_levels > 1)
            return FAIL_V(c, msg, "preserve_ordering allows only one priority level");
        bool delay = db->default_queue_policy.timeout_action == MODEL_TIMEOUT_DELAY &&
                     db->default_queue_policy.default_timeout_us != 0;
        for (uint32_t i = 0; i < db->npriority_policies; i++)
            delay |= db->priority_queue_policy[i].policy.timeout_action == MODEL_TIMEOUT_DELAY &&
                     db->priority_queue_policy[i].policy.default_timeout_us != 0;
        if (delay)
            return FAIL_V(c, msg, "preserve_ordering does not allow the DELAY timeout action");
    }
    return 0;
}

enum ig_bits { IG_NAME = 1, IG_KIND = 2, IG_COUNT = 4 };

static int parse_instance_group(struct ctx *c, const struct pbtxt_field *f,
                                struct model_instance_group *g)
{
    uint32_t seen = 0;
    int64_t count = 0;
    int k = 0;

    if (want_message(c, f))
        return ST_ERROR;
    g->name = empty_string;
    g->kind = MODEL_INSTANCE_AUTO;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "name")) {
            rc = once(c, e, &seen, IG_NAME) || get_string(c, e, &g->name);
        } else if (!strcmp(e->name, "kind")) {
            rc = once(c, e, &seen, IG_KIND) || get_enum(c, e, kind_names, COUNT_OF(kind_names),
                                                        "KIND_AUTO, KIND_CPU or KIND_MODEL", &k);
            if (!rc && k == 1)
                rc = FAIL_V(c, &e->value,
                            "GPU instances are not supported (inferd runs models on the CPU)");
            if (!rc)
                g->kind = k == 0   ? MODEL_INSTANCE_AUTO
                          : k == 2 ? MODEL_INSTANCE_CPU
                                   : MODEL_INSTANCE_MODEL;
        } else if (!strcmp(e->name, "count")) {
            rc = once(c, e, &seen, IG_COUNT) ||
                 get_i64(c, e, 0, CONFIG_MAX_INSTANCES, "a positive instance count", &count);
        } else if (!strcmp(e->name, "gpus")) {
            rc = FAIL_V(c, &e->value, "GPUs are not supported (inferd runs models on the CPU)");
        } else if (!strcmp(e->name, "profile")) {
            rc =
                FAIL_V(c, &e->value, "optimization profiles are only supported by TensorRT models");
        } else if (!strcmp(e->name, "rate_limiter") || !strcmp(e->name, "secondary_devices") ||
                   !strcmp(e->name, "passive") || !strcmp(e->name, "host_policy")) {
            rc = ignore(c, e);
        } else {
            rc = unknown(c, e, "ModelInstanceGroup");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    g->count = count > 0 ? (int32_t)count : 1; /* 0 is proto3's "unset" */
    return 0;
}

static int parse_version_list(struct ctx *c, const struct pbtxt_field *f,
                              struct model_version_policy *vp)
{
    uint32_t n;
    if (want_message(c, f) || check_entries(c, &f->value, "versions", &n))
        return ST_ERROR;
    vp->versions = cfg_calloc(c, n, sizeof *vp->versions);
    if (!vp->versions)
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = !strcmp(e->name, "versions") ? get_i64(c, e, 0, INT64_MAX, "a version number >= 0",
                                                        &vp->versions[vp->nversions])
                                              : unknown(c, e, "ModelVersionPolicy.Specific");
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
        vp->nversions++;
    }
    if (vp->nversions == 0)
        return FAIL_V(c, &f->value, "must list at least one version");
    return 0;
}

static int parse_version_policy(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_version_policy *vp = &c->cfg->version_policy;
    const struct pbtxt_field *choice = NULL;
    uint64_t num = 0;

    if (want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        if (strcmp(e->name, "latest") && strcmp(e->name, "all") && strcmp(e->name, "specific"))
            rc = unknown(c, e, "ModelVersionPolicy");
        else if (choice)
            rc = FAIL_F(c, e, "only one of latest, all and specific may be set");
        else if (e->in_list)
            rc = FAIL_F(c, e, "not a repeated field: list syntax is not allowed");
        else if (want_message(c, e))
            rc = ST_ERROR;
        choice = e;
        if (!rc && !strcmp(e->name, "latest")) {
            uint32_t seen = 0;
            vp->kind = MODEL_VERSIONS_LATEST;
            for (const struct pbtxt_field *l = e->value.u.fields; l && !rc; l = l->next) {
                struct mark ml = path_push(c, l->name);
                rc = !strcmp(l->name, "num_versions")
                         ? once(c, l, &seen, 1) ||
                               get_u64(c, l, UINT32_MAX, "a positive 32-bit integer", &num)
                         : unknown(c, l, "ModelVersionPolicy.Latest");
                path_pop(c, ml);
            }
            if (!rc && num == 0) {
                struct mark ml = path_push(c, "num_versions");
                const struct pbtxt_field *nf = pbtxt_find(&e->value, "num_versions");
                rc = FAIL_V(c, nf ? &nf->value : &e->value, "must be at least 1");
                path_pop(c, ml);
            }
            vp->num_versions = (uint32_t)num;
        } else if (!rc && !strcmp(e->name, "all")) {
            vp->kind = MODEL_VERSIONS_ALL;
            if (e->value.u.fields)
                rc = unknown(c, e->value.u.fields, "ModelVersionPolicy.All");
        } else if (!rc) {
            vp->kind = MODEL_VERSIONS_SPECIFIC;
            rc = parse_version_list(c, e, vp);
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!choice)
        return FAIL_V(c, &f->value, "must set one of latest, all and specific");
    return 0;
}

/* The name of a warmup data file: a plain file name inside the model's
 * warmup/ directory, so a config cannot point the server at other files. */
static bool plain_file_name(const char *s)
{
    return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") && strcmp(s, "..");
}

static int parse_warmup_file(struct ctx *c, const struct pbtxt_field *f,
                             struct model_warmup_input *in)
{
    if (get_string(c, f, &in->input_data_file))
        return ST_ERROR;
    if (!plain_file_name(in->input_data_file))
        return FAIL_V(c, &f->value, "must be a file name in the model's warmup directory");
    in->source = MODEL_WARMUP_FILE;
    return 0;
}

static int parse_warmup_input(struct ctx *c, const struct pbtxt_field *f,
                              struct model_warmup_input *in)
{
    uint32_t seen = 0, sources = 0;
    bool flag;
    if (want_message(c, f))
        return ST_ERROR;
    in->input_data_file = empty_string;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "data_type")) {
            rc = once(c, e, &seen, 1) || get_dtype(c, e, &in->dtype);
        } else if (!strcmp(e->name, "dims")) {
            rc = add_dim(c, e, false, in->dims, &in->ndim);
        } else if (!strcmp(e->name, "zero_data") || !strcmp(e->name, "random_data") ||
                   !strcmp(e->name, "input_data_file")) {
            if (sources++)
                rc = FAIL_F(c, e,
                            "only one of zero_data, random_data and input_data_file may be set");
            else if (e->in_list)
                rc = FAIL_F(c, e, "not a repeated field: list syntax is not allowed");
            else if (!strcmp(e->name, "input_data_file"))
                rc = parse_warmup_file(c, e, in);
            else /* the value is not checked: setting the field selects it */
                rc = get_bool(c, e, &flag);
            if (!rc && !strcmp(e->name, "zero_data"))
                in->source = MODEL_WARMUP_ZERO;
            else if (!rc && !strcmp(e->name, "random_data"))
                in->source = MODEL_WARMUP_RANDOM;
        } else {
            rc = unknown(c, e, "ModelWarmup.Input");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (in->dtype == DT_INVALID)
        return FAIL_V(c, &f->value, "must specify 'data_type'");
    if (!sources)
        return FAIL_V(c, &f->value, "must set one of zero_data, random_data and input_data_file");
    return 0;
}

enum warmup_bits { WU_NAME = 1, WU_BATCH = 2, WU_COUNT = 4 };

static int parse_warmup(struct ctx *c, const struct pbtxt_field *f, struct model_warmup *w)
{
    uint32_t seen = 0, n;
    uint64_t batch = 0, count = 0;
    const struct pbtxt_field *batch_field = NULL;

    if (want_message(c, f) || check_entries(c, &f->value, "inputs", &n))
        return ST_ERROR;
    w->name = empty_string;
    w->inputs = cfg_calloc(c, n, sizeof *w->inputs);
    if (!w->inputs)
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "name")) {
            rc = once(c, e, &seen, WU_NAME) || get_string(c, e, &w->name);
        } else if (!strcmp(e->name, "batch_size")) {
            batch_field = e;
            rc = once(c, e, &seen, WU_BATCH) ||
                 get_u64(c, e, UINT32_MAX, "a positive batch size", &batch);
        } else if (!strcmp(e->name, "count")) {
            rc = once(c, e, &seen, WU_COUNT) ||
                 get_u64(c, e, UINT32_MAX, "a non-negative 32-bit integer", &count);
        } else if (!strcmp(e->name, "inputs")) {
            const struct pbtxt_field *key, *value;
            char *name;
            size_t before = c->plen;
            path_index(c, w->ninputs);
            rc = map_entry(c, e, &key, &value) || map_string_key(c, key, &name);
            if (!rc) {
                c->plen = before; /* from here on the key names the entry */
                c->path[before] = '\0';
                path_key(c, name);
                struct model_warmup_input *in = NULL;
                for (uint32_t i = 0; i < w->ninputs; i++)
                    if (!strcmp(w->inputs[i].name, name))
                        in = &w->inputs[i]; /* the last entry wins */
                if (!in)
                    in = &w->inputs[w->ninputs++];
                memset(in, 0, sizeof *in);
                in->name = name;
                if (!value)
                    rc = FAIL_V(c, &e->value, "map entry without a value");
                else
                    rc = parse_warmup_input(c, value, in);
            }
        } else {
            rc = unknown(c, e, "ModelWarmup");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    uint64_t max = c->cfg->max_batch_size > 0 ? (uint64_t)c->cfg->max_batch_size : 1;
    if (batch < 1 || batch > max) {
        struct mark m = path_push(c, "batch_size");
        fail_at(c, batch_field ? batch_field->value.line : f->value.line,
                batch_field ? batch_field->value.col : f->value.col,
                "must be in [1, %llu] (max_batch_size %d)", (unsigned long long)max,
                c->cfg->max_batch_size);
        path_pop(c, m);
        return ST_ERROR;
    }
    w->batch_size = (uint32_t)batch;
    w->count = (uint32_t)count;
    return 0;
}

static int parse_parameter(struct ctx *c, const struct pbtxt_field *f, uint32_t index)
{
    struct model_config *cfg = c->cfg;
    const struct pbtxt_field *key, *value;
    char *k, *v = empty_string;

    size_t before = c->plen;
    path_index(c, index);
    if (map_entry(c, f, &key, &value) || map_string_key(c, key, &k))
        return ST_ERROR;
    c->plen = before; /* from here on the key names the entry */
    c->path[before] = '\0';
    path_key(c, k);
    if (value) {
        uint32_t seen = 0;
        struct mark m = path_push(c, "value");
        if (want_message(c, value)) {
            path_pop(c, m);
            return ST_ERROR;
        }
        for (const struct pbtxt_field *e = value->value.u.fields; e; e = e->next) {
            struct mark me = path_push(c, e->name);
            int rc = !strcmp(e->name, "string_value") ? once(c, e, &seen, 1) || get_string(c, e, &v)
                                                      : unknown(c, e, "ModelParameter");
            path_pop(c, me);
            if (rc)
                return ST_ERROR;
        }
        path_pop(c, m);
    }
    struct model_parameter *p = NULL;
    for (uint32_t i = 0; i < cfg->nparameters; i++)
        if (!strcmp(cfg->parameters[i].key, k))
            p = &cfg->parameters[i]; /* the last entry wins */
    if (!p)
        p = &cfg->parameters[cfg->nparameters++];
    p->key = k;
    p->string_value = v;
    return 0;
}

/* Fields of ModelConfig that inferd accepts and does not use. */
static const char *const ignored_top[] = {
    "runtime",
    "batch_input",
    "batch_output",
    "optimization",
    "sequence_batching",
    "ensemble_scheduling",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "response_cache",
    "model_metrics",
};

enum top_bits {
    TOP_NAME = 1,
    TOP_PLATFORM = 2,
    TOP_BACKEND = 4,
    TOP_MAX_BATCH = 8,
    TOP_DYNAMIC = 16,
    TOP_VERSION = 32,
    TOP_TRANSACTION = 64,
};

/* model_transaction_policy { decoupled: <bool> } */
static int parse_transaction_policy(struct ctx *c, const struct pbtxt_field *f)
{
    uint32_t seen = 0;
    if (want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = path_push(c, e->name);
        int rc = !strcmp(e->name, "decoupled")
                     ? once(c, e, &seen, 1) || get_bool(c, e, &c->cfg->decoupled)
                     : unknown(c, e, "ModelTransactionPolicy");
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

static bool is_ignored_top(const char *name)
{
    for (size_t i = 0; i < COUNT_OF(ignored_top); i++)
        if (!strcmp(name, ignored_top[i]))
            return true;
    return false;
}

static int parse_root(struct ctx *c, const struct pbtxt_value *root)
{
    struct model_config *cfg = c->cfg;
    uint32_t seen = 0, n;
    const struct pbtxt_field *scheduling = NULL;

    /* max_batch_size first: dims, preferred sizes and warmups depend on it. */
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        if (strcmp(f->name, "max_batch_size"))
            continue;
        int64_t x = 0;
        struct mark m = path_push(c, f->name);
        int rc = once(c, f, &seen, TOP_MAX_BATCH) ||
                 get_i64(c, f, 0, INT32_MAX, "a non-negative integer", &x);
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
        cfg->max_batch_size = (int32_t)x;
        cfg->_max_batch_size_set = true;
    }
    if (parse_ios(c, root, "input", true) || parse_ios(c, root, "output", false))
        return ST_ERROR;

    if (check_entries(c, root, "instance_group", &n))
        return ST_ERROR;
    cfg->instance_groups = cfg_calloc(c, n, sizeof *cfg->instance_groups);
    if (check_entries(c, root, "model_warmup", &n))
        return ST_ERROR;
    cfg->warmups = cfg_calloc(c, n, sizeof *cfg->warmups);
    if (check_entries(c, root, "parameters", &n))
        return ST_ERROR;
    cfg->parameters = cfg_calloc(c, n, sizeof *cfg->parameters);
    if (!cfg->instance_groups || !cfg->warmups || !cfg->parameters)
        return ST_ERROR;

    uint32_t instances = 0;
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        const char *name = f->name;
        struct mark m = path_push(c, name);
        int rc = 0;
        if (!strcmp(name, "name")) {
            rc = once(c, f, &seen, TOP_NAME) || get_string(c, f, &cfg->name);
        } else if (!strcmp(name, "platform")) {
            rc = once(c, f, &seen, TOP_PLATFORM) || get_string(c, f, &cfg->platform);
        } else if (!strcmp(name, "backend")) {
            rc = once(c, f, &seen, TOP_BACKEND) || get_string(c, f, &cfg->backend);
        } else if (!strcmp(name, "max_batch_size") || !strcmp(name, "input") ||
                   !strcmp(name, "output")) {
            /* read above */
        } else if (!strcmp(name, "dynamic_batching") || !strcmp(name, "sequence_batching") ||
                   !strcmp(name, "ensemble_scheduling")) {
            if (scheduling)
                rc = FAIL_F(c, f, "%s and %s cannot both be set (one scheduling policy per model)",
                            scheduling->name, name);
            else if (f->in_list)
                rc = FAIL_F(c, f, "not a repeated field: list syntax is not allowed");
            scheduling = f;
            if (!rc)
                rc = name[0] == 'd' ? parse_dynamic_batching(c, f) : ignore(c, f);
        } else if (!strcmp(name, "instance_group")) {
            path_index(c, cfg->ninstance_groups);
            rc = parse_instance_group(c, f, &cfg->instance_groups[cfg->ninstance_groups]);
            if (!rc) {
                instances += (uint32_t)cfg->instance_groups[cfg->ninstance_groups++].count;
                if (instances > CONFIG_MAX_INSTANCES)
                    rc = FAIL_F(c, f, "more than %d instances in all groups", CONFIG_MAX_INSTANCES);
            }
        } else if (!strcmp(name, "version_policy")) {
            rc = once(c, f, &seen, TOP_VERSION) || parse_version_policy(c, f);
        } else if (!strcmp(name, "model_transaction_policy")) {
            rc = once(c, f, &seen, TOP_TRANSACTION) || parse_transaction_policy(c, f);
        } else if (!strcmp(name, "model_warmup")) {
            path_index(c, cfg->nwarmups);
            rc = parse_warmup(c, f, &cfg->warmups[cfg->nwarmups]);
            cfg->nwarmups += !rc;
        } else if (!strcmp(name, "parameters")) {
            rc = parse_parameter(c, f, cfg->nparameters);
        } else if (is_ignored_top(name)) {
            rc = ignore(c, f);
        } else {
            rc = unknown(c, f, "ModelConfig");
        }
        path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

/* Ignored fields in source order (inputs and outputs are read first). */
static void sort_ignored(struct model_config *cfg)
{
    for (uint32_t i = 1; i < cfg->nignored; i++) {
        struct model_config_ignored x = cfg->ignored[i];
        uint32_t j = i;
        for (; j > 0 && (cfg->ignored[j - 1].line > x.line ||
                         (cfg->ignored[j - 1].line == x.line && cfg->ignored[j - 1].col > x.col));
             j--)
            cfg->ignored[j] = cfg->ignored[j - 1];
        cfg->ignored[j] = x;
    }
}

int model_config_parse(const char *text, size_t len, struct model_config *cfg, struct error *err)
{
    struct arena tree;
    struct pbtxt_value *root;
    struct ctx c = {.cfg = cfg, .err = err};
    int rc;

    model_config_init(cfg);
    if (len > MODEL_CONFIG_MAX_TEXT)
        return error_set(err, 400, "the model configuration is larger than %u bytes",
                         MODEL_CONFIG_MAX_TEXT);
    arena_init(&tree, TREE_ARENA_CHUNK, TREE_ARENA_MAX);
    rc = pbtxt_parse(&tree, text, len, NULL, &root, err);
    if (rc == 0)
        rc = parse_root(&c, root);
    arena_free(&tree);
    if (rc == 0)
        sort_ignored(cfg);
    if (rc) {
        model_config_free(cfg);
        return ST_ERROR;
    }
    return 0;
}
