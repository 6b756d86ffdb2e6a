/*
 * config_io: the input and output sections of config.pbtxt (ModelInput,
 * ModelOutput, with reshape) into cfg->inputs and cfg->outputs; see
 * config_parse.h for what a section parser receives and returns.
 */
#include "model/config_parse.h"

#include <string.h>

static const char *const format_names[] = {"FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"};

const char *model_io_format_name(enum model_io_format f)
{
    return (size_t)f < COUNT_OF(format_names) ? format_names[f] : "FORMAT_NONE";
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
    if (config_want_message(c, f))
        return ST_ERROR;
    io->has_reshape = true;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = !strcmp(e->name, "shape")
                     ? config_add_dim(c, e, true, io->reshape, &io->reshape_ndim)
                     : config_unknown(c, e, "ModelTensorReshape");
        config_path_pop(c, m);
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
        if (config_once(c, f, seen, IO_NAME) || config_get_string(c, f, &io->name))
            return ST_ERROR;
        return io->name[0] ? 0 : FAIL_V(c, &f->value, "must not be empty");
    }
    if (!strcmp(n, "data_type"))
        return (config_once(c, f, seen, IO_DTYPE) || config_get_dtype(c, f, &io->dtype)) ? ST_ERROR
                                                                                         : 0;
    if (!strcmp(n, "dims")) {
        io->has_dims = true;
        return config_add_dim(c, f, true, io->dims, &io->ndim);
    }
    if (!strcmp(n, "reshape"))
        return (config_once(c, f, seen, IO_RESHAPE) || parse_reshape(c, f, io)) ? ST_ERROR : 0;
    if (!strcmp(n, "is_shape_tensor")) {
        if (config_once(c, f, seen, IO_SHAPE_TENSOR) || config_get_bool(c, f, &flag))
            return ST_ERROR;
        return flag ? FAIL_V(c, &f->value, "shape tensors are only supported by TensorRT models")
                    : 0;
    }
    if (!strcmp(n, "is_non_linear_format_io")) {
        if (config_once(c, f, seen, IO_NONLINEAR) || config_get_bool(c, f, &flag))
            return ST_ERROR;
        return flag ? FAIL_V(c, &f->value,
                             "non-linear IO formats are only supported by TensorRT models")
                    : 0;
    }
    if (input) {
        if (!strcmp(n, "format")) {
            if (config_once(c, f, seen, IO_FORMAT) ||
                config_get_enum(c, f, format_names, COUNT_OF(format_names),
                                "FORMAT_NONE, FORMAT_NHWC or FORMAT_NCHW", &k))
                return ST_ERROR;
            io->format = (enum model_io_format)k;
            return 0;
        }
        if (!strcmp(n, "optional"))
            return (config_once(c, f, seen, IO_OPTIONAL) || config_get_bool(c, f, &io->optional))
                       ? ST_ERROR
                       : 0;
        if (!strcmp(n, "allow_ragged_batch"))
            return config_ignore(c, f);
        return config_unknown(c, f, "ModelInput");
    }
    if (!strcmp(n, "label_filename"))
        return (config_once(c, f, seen, IO_LABEL) || config_get_string(c, f, &io->label_filename))
                   ? ST_ERROR
                   : 0;
    return config_unknown(c, f, "ModelOutput");
}

static int parse_io(struct ctx *c, const struct pbtxt_field *f, struct model_config_io *io,
                    bool input, const struct model_config_io *previous, uint32_t nprevious)
{
    char a[128], b[128];
    uint32_t seen = 0;
    const struct pbtxt_field *name_field = NULL;

    if (config_want_message(c, f))
        return ST_ERROR;
    io->label_filename = config_empty_string;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        if (!strcmp(e->name, "name"))
            name_field = e;
        struct mark m = config_path_push(c, e->name);
        int rc = parse_io_field(c, e, io, input, &seen);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!io->name)
        return FAIL_V(c, &f->value, "must specify 'name'");
    for (uint32_t i = 0; i < nprevious; i++)
        if (!strcmp(previous[i].name, io->name)) {
            struct mark m = config_path_push(c, "name");
            FAIL_V(c, &name_field->value, "%s '%s' is specified more than once",
                   input ? "input" : "output", io->name);
            config_path_pop(c, m);
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

int config_parse_ios(struct ctx *c, const struct pbtxt_value *root, const char *name, bool input)
{
    struct model_config *cfg = c->cfg;
    uint32_t n;
    if (config_check_entries(c, root, name, &n))
        return ST_ERROR;
    struct model_config_io *ios = config_calloc(c, n, sizeof *ios);
    if (!ios)
        return ST_ERROR;
    uint32_t i = 0;
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        if (strcmp(f->name, name))
            continue;
        struct mark m = config_path_push(c, name);
        config_path_index(c, i);
        int rc = parse_io(c, f, &ios[i], input, ios, i);
        config_path_pop(c, m);
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
