#include "api/rest/infer_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api/rest/infer_json_scan.h"
#include "api/tensor_json.h"
#include "base/json.h"
#include "base/json_cursor.h"
#include "core/fp16.h"

/* Nesting allowed in a request: the document, inputs array, input object,
 * and `data` nested up to the maximum rank. */
#define INFER_JSON_MAX_DEPTH (TENSOR_MAX_DIMS + 8)

/* Bytes of a BYTES element's length prefix in binary tensor data. */

/* ---- request ---------------------------------------------------------- */

/* The part of the body after the JSON header, claimed input by input. */
struct binary_part {
    const char *body;
    size_t off;   /* next unclaimed byte */
    size_t end;   /* body length */
    bool present; /* the request has Inference-Header-Content-Length */
};

/* An optional boolean parameter: absent leaves *out unchanged. */
static int get_bool_param(const struct json_value *params, const char *key, const char *where,
                          bool *out, struct error *err)
{
    const struct json_value *v = json_get(params, key);
    if (!v)
        return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return error_set(err, 400, "%s: parameter '%s' must be true or false", where, key);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* An output's optional "classification" parameter (Triton's extension,
 * serve/classify.h): a positive integer; counts beyond UINT32_MAX are
 * UINT32_MAX (any count is clamped to the output's classes). Absent: 0. */
static int get_classification(const struct json_value *params, const char *where, uint32_t *out,
                              struct error *err)
{
    const struct json_value *v = json_get(params, "classification");
    *out = 0;
    if (!v)
        return 0;
    uint64_t k;
    if (json_num_u64(v, &k) != 0 || k == 0)
        return error_set(err, 400, "%s: parameter 'classification' must be a positive integer",
                         where);
    *out = k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
    return 0;
}

/* Triton's sequence parameters: sequence_id an unsigned integer or a
 * string, sequence_start and sequence_end booleans. */
static int decode_sequence(const struct json_value *params, struct infer_sequence *seq,
                           struct error *err)
{
    if (!params)
        return 0; /* most requests: nothing to look up */
    const struct json_value *id = json_get(params, "sequence_id");
    if (id && id->type == JSON_STRING) {
        seq->id_str = id->u.str;
        seq->id_str_len = id->len;
    } else if (id && json_num_u64(id, &seq->id) != 0) {
        return error_set(err, 400, "parameter 'sequence_id' must be an unsigned integer or a "
                                   "string");
    }
    if (get_bool_param(params, "sequence_start", "request", &seq->start, err) != 0 ||
        get_bool_param(params, "sequence_end", "request", &seq->end, err) != 0)
        return ST_ERROR;
    return 0;
}

static int check_parameters(const struct json_value *params, const char *where,
                            struct error *err)
{
    if (!params)
        return 0;
    if (params->type != JSON_OBJECT)
        return error_set(err, 400, "%s: 'parameters' must be an object", where);
    for (uint32_t i = 0; i < params->len; i++) {
        enum json_type t = params->u.members[i].value.type;
        if (t == JSON_ARRAY || t == JSON_RAW || t == JSON_OBJECT || t == JSON_NULL)
            return error_set(err, 400, "%s: parameter '%s' must be a string, number or bool",
                             where, params->u.members[i].key);
    }
    return 0;
}

/* Triton's shared-memory parameters of a tensor (serve/shm.h); p->has_region
 * false when it has none. */
static int get_shm_params(const struct json_value *params, const char *where,
                          struct shm_params *p, struct error *err)
{
    memset(p, 0, sizeof *p);
    const struct json_value *region = json_get(params, "shared_memory_region");
    const struct json_value *size = json_get(params, "shared_memory_byte_size");
    const struct json_value *offset = json_get(params, "shared_memory_offset");
    if (!region) {
        if (size || offset)
            return error_set(err, 400, "%s: shared-memory parameters need 'shared_memory_region'",
                             where);
        return 0;
    }
    if (region->type != JSON_STRING)
        return error_set(err, 400, "%s: 'shared_memory_region' must be a string", where);
    if (size && json_num_u64(size, &p->byte_size) != 0)
        return error_set(err, 400, "%s: 'shared_memory_byte_size' must be a non-negative integer",
                         where);
    if (offset && json_num_u64(offset, &p->offset) != 0)
        return error_set(err, 400, "%s: 'shared_memory_offset' must be a non-negative integer",
                         where);
    p->region = region->u.str;
    p->region_len = region->len;
    p->has_region = true;
    p->has_byte_size = size != NULL;
    return 0;
}

static int decode_shape(const struct json_value *shape, const char *name, struct tensor *t,
                        struct error *err)
{
    if (!shape || shape->type != JSON_ARRAY)
        return error_set(err, 400, "input '%s': 'shape' must be an array of integers", name);
    if (shape->len > TENSOR_MAX_DIMS)
        return error_set(err, 400, "input '%s': shape has %u dimensions, at most %d allowed",
                         name, shape->len, TENSOR_MAX_DIMS);
    t->ndim = shape->len;
    for (uint32_t i = 0; i < shape->len; i++) {
        int64_t d;
        if (json_num_i64(&shape->u.items[i], &d) != 0 || d < 0)
            return error_set(err, 400, "input '%s': shape must hold non-negative integers",
                             name);
        t->shape[i] = d;
    }
    return 0;
}

/* An input's data comes from exactly one place; Triton's words when not,
 * then the input's name. */
static int data_fields_error(const char *name, bool data, bool binary, bool shm,
                             struct error *err)
{
    return error_set(err, 400,
                     "Input must set only one of the following fields: 'data', "
                     "'binary_data_size' in 'parameters', 'shared_memory_region' in "
                     "'parameters'. But %s%s%s%s (input '%s')",
                     data || binary || shm ? "set" : "no field is set", data ? " 'data'" : "",
                     binary ? " 'binary_data_size'" : "", shm ? " 'shared_memory_region'" : "",
                     name);
}

/* Claims the input's binary_data_size bytes from the binary part. Numeric
 * data is used in place when aligned for its element type, else copied
 * into the arena (a body offset is arbitrary, so alignment is luck). */
static int decode_binary_input(struct infer_request *req, struct tensor *t, uint64_t size,
                               struct binary_part *bin, struct error *err)
{
    if (!bin->present)
        return error_set(err, 400,
                         "input '%s': 'binary_data_size' needs the Inference-Header-Content-Length "
                         "header",
                         t->name);
    size_t left = bin->end - bin->off;
    if (size > left)
        return error_set(err, 400,
                         "input '%s': binary_data_size %" PRIu64
                         " exceeds the %zu bytes of binary data left in the body",
                         t->name, size, left);
    const char *p = bin->body + bin->off;
    bin->off += (size_t)size;

    int64_t count = tensor_count(t, INT64_MAX);
    if (count < 0)
        return error_set(err, 400, "input '%s': shape has too many elements", t->name);
    if (t->dtype == DT_BYTES)
        return tensor_bytes_split(&req->arena, t, p, (size_t)size, count, "binary_data_size", err);
    size_t esize = dtype_size(t->dtype);
    if (esize == 0)
        return error_set(err, 400, "input '%s': datatype %s cannot be sent as binary data",
                         t->name, dtype_name(t->dtype));
    if ((uint64_t)count > SIZE_MAX / esize)
        return error_set(err, 400, "input '%s': shape has too many elements", t->name);
    if ((size_t)count * esize != size) {
        char shape[128];
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return error_set(err, 400,
                         "input '%s': binary_data_size is %" PRIu64
                         " bytes, shape %s of %s needs %zu",
                         t->name, size, shape, dtype_name(t->dtype), (size_t)count * esize);
    }
    t->nbytes = (size_t)size;
    if (size == 0 || (uintptr_t)p % esize == 0) {
        t->data = (void *)p;
        return 0;
    }
    void *copy = arena_alloc(&req->arena, (size_t)size);
    if (!copy)
        return error_set(err, 413, "input '%s': request too large to decode", t->name);
    memcpy(copy, p, (size_t)size);
    t->data = copy;
    return 0;
}

/* An input's `data` array, text[0..len), into its tensor (name, datatype
 * and shape set and checked). */
static int decode_data(struct infer_request *req, struct tensor *t, const char *text, size_t len,
                       struct error *err)
{
    /* More elements than any body could carry: the shape is wrong. */
    int64_t want = tensor_count(t, INT32_MAX);
    if (want < 0)
        return error_set(err, 400, "input '%s': shape has too many elements", t->name);
    size_t bytes = t->dtype == DT_BYTES ? (size_t)want * sizeof(struct tensor_bytes)
                                        : (size_t)want * dtype_size(t->dtype);
    t->data = arena_alloc(&req->arena, bytes);
    if (!t->data)
        return error_set(err, 413, "input '%s': request too large to decode", t->name);
    if (tensor_json_parse(text, len, t->dtype, t->shape, t->ndim, want, t->data, &req->arena,
                          t->name, err) != 0)
        return ST_ERROR;
    t->nbytes = bytes;
    if (t->dtype == DT_BYTES) {
        const struct tensor_bytes *s = t->data;
        t->nbytes = 0;
        for (int64_t i = 0; i < want; i++)
            t->nbytes += s[i].len;
    }
    return 0;
}

static int decode_input(struct infer_request *req, struct shm_request *shm,
                        const struct model *m, const struct json_value *in, bool *seen,
                        struct binary_part *bin, struct error *err)
{
    if (in->type != JSON_OBJECT)
        return error_set(err, 400, "each element of 'inputs' must be an object");
    const struct json_value *name = json_get(in, "name");
    if (!name || name->type != JSON_STRING)
        return error_set(err, 400, "input without a 'name' string");
    int idx = model_input_index(m, name->u.str);
    if (idx < 0 || strlen(name->u.str) != name->len)
        return model_io_unknown(&m->info, true, name->u.str, m->name, err);
    if (seen[idx])
        return error_set(err, 400, "duplicate input '%s'", name->u.str);
    seen[idx] = true;

    struct tensor *t = &req->inputs[idx];
    t->name = m->info.inputs[idx].name;
    const struct json_value *dt = json_get(in, "datatype");
    if (!dt || dt->type != JSON_STRING)
        return error_set(err, 400, "input '%s': 'datatype' must be a string", t->name);
    t->dtype = dtype_from_name(dt->u.str, dt->len);
    if (t->dtype == DT_INVALID)
        return error_set(err, 400, "input '%s': unknown datatype '%s'", t->name, dt->u.str);
    if (decode_shape(json_get(in, "shape"), t->name, t, err) != 0)
        return ST_ERROR;
    if (model_io_check(m->name, &m->info.inputs[idx], t, err) != 0)
        return ST_ERROR;

    const struct json_value *params = json_get(in, "parameters");
    if (check_parameters(params, t->name, err) != 0)
        return ST_ERROR;
    /* The errors' prefix, formatted only when there are parameters to
     * complain about (this runs for every input of every request). */
    char where[ERROR_MSG_MAX];
    where[0] = '\0';
    if (params)
        snprintf(where, sizeof where, "input '%s'", t->name);
    struct shm_params sp;
    if (get_shm_params(params, where, &sp, err) != 0)
        return ST_ERROR;

    const struct json_value *data = json_get(in, "data");
    const struct json_value *binary_size = json_get(params, "binary_data_size");
    if ((data != NULL) + (binary_size != NULL) + sp.has_region != 1)
        return data_fields_error(t->name, data, binary_size, sp.has_region, err);
    if (sp.has_region) {
        if (!shm)
            return error_set(err, 400, "input '%s': shared memory is not supported here",
                             t->name);
        return shm_request_input(shm, &req->arena, t, &sp, err);
    }
    if (binary_size) {
        uint64_t size;
        if (json_num_u64(binary_size, &size) != 0)
            return error_set(err, 400,
                             "input '%s': 'binary_data_size' must be a non-negative integer",
                             t->name);
        return decode_binary_input(req, t, size, bin, err);
    }
    if (data->type != JSON_RAW)
        return error_set(err, 400, "input '%s': 'data' must be an array", t->name);
    return decode_data(req, t, data->u.raw, data->len, err);
}

/* Every model output in model order, each binary or not. */
static int all_outputs(struct infer_request *req, const struct model *m, bool binary,
                       struct error *err)
{
    const char **names = arena_alloc(&req->arena, m->info.noutputs * sizeof *names);
    bool *flags = arena_alloc(&req->arena, m->info.noutputs * sizeof *flags);
    if (!names || !flags)
        return error_set(err, 413, "request too large to decode");
    for (uint32_t i = 0; i < m->info.noutputs; i++) {
        names[i] = m->info.outputs[i].name;
        flags[i] = binary;
    }
    req->output_names = names;
    req->output_binary = flags;
    req->noutputs = m->info.noutputs;
    return 0;
}

static int decode_outputs(struct infer_request *req, struct shm_request *shm,
                          const struct model *m, const struct json_value *outs,
                          bool binary_default, struct error *err)
{
    if (!outs)
        return all_outputs(req, m, binary_default, err);
    if (outs->type != JSON_ARRAY || outs->len == 0)
        return error_set(err, 400, "'outputs' must be a non-empty array");
    if (outs->len > m->info.noutputs)
        return error_set(err, 400, "'outputs' names %u outputs, model '%s' has %u", outs->len,
                         m->name, m->info.noutputs);
    const char **names = arena_alloc(&req->arena, outs->len * sizeof *names);
    bool *flags = arena_alloc(&req->arena, outs->len * sizeof *flags);
    uint32_t *classes = arena_calloc(&req->arena, outs->len, sizeof *classes);
    bool any_classes = false;
    if (!names || !flags || !classes)
        return error_set(err, 413, "request too large to decode");
    for (uint32_t i = 0; i < outs->len; i++) {
        const struct json_value *o = &outs->u.items[i];
        const struct json_value *name = o->type == JSON_OBJECT ? json_get(o, "name") : NULL;
        if (!name || name->type != JSON_STRING)
            return error_set(err, 400, "each element of 'outputs' needs a 'name' string");
        int idx = model_output_index(m, name->u.str);
        if (idx < 0 || strlen(name->u.str) != name->len)
            return model_io_unknown(&m->info, false, name->u.str, m->name, err);
        for (uint32_t j = 0; j < i; j++)
            if (names[j] == m->info.outputs[idx].name)
                return error_set(err, 400, "duplicate output '%s'", name->u.str);
        const struct json_value *params = json_get(o, "parameters");
        if (check_parameters(params, name->u.str, err) != 0)
            return ST_ERROR;
        char where[ERROR_MSG_MAX];
        where[0] = '\0';
        if (params)
            snprintf(where, sizeof where, "output '%s'", name->u.str);
        flags[i] = binary_default;
        if (get_bool_param(params, "binary_data", where, &flags[i], err) != 0)
            return ST_ERROR;
        if (get_classification(params, where, &classes[i], err) != 0)
            return ST_ERROR;
        any_classes |= classes[i] != 0;
        names[i] = m->info.outputs[idx].name;
        struct shm_params sp;
        if (get_shm_params(params, where, &sp, err) != 0)
            return ST_ERROR;
        if (sp.has_region && !shm)
            return error_set(err, 400, "output '%s': shared memory is not supported here",
                             names[i]);
        if (sp.has_region &&
            shm_request_output(shm, &req->arena, i, outs->len, names[i], &sp, err) != 0)
            return ST_ERROR;
    }
    req->output_names = names;
    req->output_binary = flags;
    req->output_classes = any_classes ? classes : NULL;
    req->noutputs = outs->len;
    return 0;
}

/* Inference-Header-Content-Length: 0 — the body is the raw data of the
 * model's only input (Triton's "raw binary request"); the raw inputs of a
 * preprocessed model (preprocess/prep.h) do not count, they have their own
 * raw body (Content-Type: image/png, ...). The shape comes from
 * the model: the batch dim is 1 and one other variable dim, if any, is
 * deduced from the body length. A BYTES input must then hold exactly one
 * element: the whole body, without a length prefix. */
static int decode_raw(struct infer_request *req, const struct model *m, const char *body,
                      size_t len, struct error *err)
{
    const struct model_info *graph = &m->run_info;
    if (graph->ninputs != 1)
        return error_set(err, 400,
                         "a raw binary request (Inference-Header-Content-Length: 0) needs a model "
                         "with exactly one input; model '%s' has %u",
                         m->name, graph->ninputs);
    const struct model_io *io = &graph->inputs[0];
    req->inputs = arena_calloc(&req->arena, 1, sizeof *req->inputs);
    if (!req->inputs)
        return error_set(err, 413, "request too large to decode");
    req->ninputs = 1;
    struct tensor *t = req->inputs;
    t->name = io->name;
    t->dtype = io->dtype;
    t->ndim = io->ndim;
    int variable = -1;
    uint64_t fixed = 1; /* product of the known dims, saturated */
    for (uint32_t d = 0; d < io->ndim; d++) {
        int64_t dim = io->dims[d];
        if (dim < 0 && d == 0 && m->batched)
            dim = 1;
        if (dim < 0) {
            if (variable >= 0) {
                char want[128];
                shape_format(io->dims, io->ndim, want, sizeof want);
                return error_set(err, 400,
                                 "raw binary request: the shape of input '%s' cannot be deduced, "
                                 "the model's %s has more than one variable dimension",
                                 t->name, want);
            }
            variable = (int)d;
            continue;
        }
        t->shape[d] = dim;
        fixed = dim != 0 && fixed > UINT64_MAX / (uint64_t)dim ? UINT64_MAX : fixed * (uint64_t)dim;
    }

    size_t unit = t->dtype == DT_BYTES ? 0 : dtype_size(t->dtype);
    if (t->dtype == DT_BYTES) {
        if (variable >= 0 || fixed != 1) {
            char want[128];
            shape_format(io->dims, io->ndim, want, sizeof want);
            return error_set(err, 400,
                             "raw binary request: BYTES input '%s' must have exactly one element, "
                             "the model's shape is %s",
                             t->name, want);
        }
        if (len > UINT32_MAX)
            return error_set(err, 400, "raw binary request: a BYTES element is limited to %u bytes",
                             (unsigned)UINT32_MAX);
        struct tensor_bytes *elem = arena_alloc(&req->arena, sizeof *elem);
        if (!elem)
            return error_set(err, 413, "request too large to decode");
        elem->ptr = body;
        elem->len = (uint32_t)len;
        t->data = elem;
        t->nbytes = len;
    } else {
        if (unit == 0)
            return error_set(err, 400, "raw binary request: input '%s' has datatype %s",
                             t->name, dtype_name(t->dtype));
        uint64_t row = fixed > UINT64_MAX / unit ? UINT64_MAX : fixed * unit;
        if (variable >= 0) {
            if (row == 0 || row == UINT64_MAX)
                return error_set(err, 400,
                                 "raw binary request: the shape of input '%s' cannot be deduced "
                                 "from the body length",
                                 t->name);
            if (len % row != 0)
                return error_set(err, 400,
                                 "raw binary request: a body of %zu bytes is not a whole number "
                                 "of %" PRIu64 "-byte rows of input '%s'",
                                 len, row, t->name);
            t->shape[variable] = (int64_t)(len / row);
        } else if (row != len) {
            char shape[128];
            shape_format(t->shape, t->ndim, shape, sizeof shape);
            return error_set(err, 400,
                             "raw binary request: input '%s' of shape %s needs %" PRIu64
                             " bytes, the body has %zu",
                             t->name, shape, row, len);
        }
        t->nbytes = len;
        if (len == 0 || (uintptr_t)body % unit == 0) {
            t->data = (void *)body;
        } else {
            t->data = arena_alloc(&req->arena, len);
            if (!t->data)
                return error_set(err, 413, "request too large to decode");
            memcpy(t->data, body, len);
        }
    }
    req->batch = m->batched && t->ndim > 0 ? t->shape[0] : 1;
    return all_outputs(req, m, true, err);
}

int infer_json_header_length(const char *value, size_t n, size_t body_len, int64_t *out,
                             struct error *err)
{
    if (n == 0)
        return error_set(err, 400, "Inference-Header-Content-Length must be a decimal number");
    uint64_t limit = body_len < (uint64_t)INT64_MAX ? body_len : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (value[i] < '0' || value[i] > '9')
            return error_set(err, 400, "Inference-Header-Content-Length must be a decimal number");
        unsigned digit = (unsigned)(value[i] - '0');
        if (v > limit / 10 || limit - v * 10 < digit)
            return error_set(err, 400,
                             "Inference-Header-Content-Length exceeds the body length %zu",
                             body_len);
        v = v * 10 + digit;
    }
    *out = (int64_t)v;
    return 0;
}

/* A whole JSON request with more bytes after it, `off` being the first of
 * them that is not whitespace: binary tensor data sent without the header
 * that says where the JSON ends. The JSON part ends where its whitespace
 * before `off` begins (a value never ends in whitespace). */
static int unannounced_binary(const char *body, size_t off, size_t len, struct error *err)
{
    size_t json_len = off;
    while (json_len > 0 && (body[json_len - 1] == ' ' || body[json_len - 1] == '\t' ||
                            body[json_len - 1] == '\n' || body[json_len - 1] == '\r'))
        json_len--;
    return error_set(err, 400,
                     "%zu bytes follow the %zu-byte JSON request: binary tensor data after the "
                     "JSON needs the header Inference-Header-Content-Length: %zu (the length of "
                     "the JSON part)",
                     len - json_len, json_len, json_len);
}

int infer_json_decode_general(struct infer_request *req, struct shm_request *shm,
                              const struct model *m, const char *body, size_t len,
                              int64_t header_len, struct error *err)
{
    if (header_len < -1 || (header_len >= 0 && (uint64_t)header_len > len))
        return error_set(err, 400, "Inference-Header-Content-Length %" PRId64
                                   " exceeds the body length %zu",
                         header_len, len);
    if (header_len == 0)
        return decode_raw(req, m, body, len, err);
    struct binary_part bin = {.body = body, .off = len, .end = len, .present = header_len > 0};
    size_t json_len = len;
    if (bin.present) {
        json_len = (size_t)header_len;
        bin.off = json_len;
    }

    /* "data" arrays are not expanded into the tree: tensor_json parses them
     * straight into typed buffers once the datatype and shape are known. */
    struct json_limits limits = {.max_depth = INFER_JSON_MAX_DEPTH, .allow_nonfinite = true,
                                 .raw_array_key = "data"};
    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(&req->arena, body, json_len, &limits, &root, &msg, &off) != 0) {
        if (strcmp(msg, "out of memory") == 0)
            return error_set(err, 413, "request too large to decode");
        if (msg == json_err_trailing && !bin.present)
            return unannounced_binary(body, off, len, err);
        return error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
    }
    if (root->type != JSON_OBJECT)
        return error_set(err, 400, "request body must be a JSON object");

    const struct json_value *id = json_get(root, "id");
    if (id) {
        if (id->type != JSON_STRING)
            return error_set(err, 400, "'id' must be a string");
        req->id = id->u.str;
        req->id_len = id->len;
    }
    const struct json_value *params = json_get(root, "parameters");
    if (check_parameters(params, "request", err) != 0)
        return ST_ERROR;
    bool binary_output = false;
    if (get_bool_param(params, "binary_data_output", "request", &binary_output, err) != 0)
        return ST_ERROR;
    const struct json_value *timeout = json_get(params, "timeout");
    if (timeout) {
        uint64_t us;
        if (json_num_u64(timeout, &us) != 0)
            return error_set(err, 400, "parameter 'timeout' must be a non-negative integer "
                                       "(microseconds)");
        req->timeout_us = us;
    }
    const struct json_value *priority = json_get(params, "priority");
    if (priority) {
        uint64_t level;
        if (json_num_u64(priority, &level) != 0)
            return error_set(err, 400, "parameter 'priority' must be a non-negative integer");
        req->priority = level;
    }
    if (decode_sequence(params, &req->sequence, err) != 0)
        return ST_ERROR;

    const struct json_value *inputs = json_get(root, "inputs");
    /* Empty for a model without inputs; a missing input is named below. */
    if (!inputs || inputs->type != JSON_ARRAY)
        return error_set(err, 400, "request needs an 'inputs' array");
    req->inputs = arena_calloc(&req->arena, m->info.ninputs, sizeof *req->inputs);
    bool *seen = arena_calloc(&req->arena, m->info.ninputs, sizeof *seen);
    if (!req->inputs || !seen)
        return error_set(err, 413, "request too large to decode");
    req->ninputs = m->info.ninputs;
    for (uint32_t i = 0; i < inputs->len; i++)
        if (decode_input(req, shm, m, &inputs->u.items[i], seen, &bin, err) != 0)
            return ST_ERROR;
    if (model_inputs_complete(m, req->inputs, seen, &req->ninputs, err) != 0)
        return ST_ERROR;
    if (bin.off != bin.end)
        return error_set(err, 400,
                         "%zu bytes after the JSON header are not claimed by any input's "
                         "binary_data_size",
                         bin.end - bin.off);
    req->batch = m->batched ? req->inputs[0].shape[0] : 1;
    if (m->batched)
        for (uint32_t i = 1; i < req->ninputs; i++)
            if (req->inputs[i].shape[0] != req->inputs[0].shape[0])
                return error_set(err, 400,
                                 "inputs '%s' and '%s' have different batch sizes (%lld, %lld)",
                                 req->inputs[0].name, req->inputs[i].name,
                                 (long long)req->inputs[0].shape[0],
                                 (long long)req->inputs[i].shape[0]);
    return decode_outputs(req, shm, m, json_get(root, "outputs"), binary_output, err);
}

/* ---- the everyday request, without a tree (infer_json_scan.h) --------- */

/* The index of the tensor of ios[0..n) called name, or NOT_FOUND. */
static int io_index(const struct model_io *ios, uint32_t n, const struct infer_json_span *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strncmp(ios[i].name, name->p, name->n) == 0 && ios[i].name[name->n] == '\0')
            return (int)i;
    return NOT_FOUND;
}

/*
 * Fills req from what infer_json_scan() read, as infer_json_decode_general()
 * would from the same text (no parameters but the binary ones, so the
 * request options keep their defaults); bin is the binary part after the
 * JSON, each binary input claims its bytes from it. False at the first
 * thing the general decoder would refuse: req is then as it was and the
 * arena rewound, and the general decoder reads the request again and
 * reports it.
 */
static bool decode_plain(struct infer_request *req, const struct model *m,
                         const struct infer_json_doc *doc, struct binary_part *bin)
{
    struct arena_mark mark = arena_mark(&req->arena);
    struct error err;
    const char *id = NULL;
    if (doc->has_id && !(id = arena_strndup(&req->arena, doc->id.p, doc->id.n)))
        goto decline;
    uint32_t nin = m->info.ninputs;
    struct tensor *ins = arena_calloc(&req->arena, nin, sizeof *ins);
    bool *seen = arena_calloc(&req->arena, nin, sizeof *seen);
    if (!ins || !seen)
        goto decline;
    for (uint32_t i = 0; i < doc->ninputs; i++) {
        const struct infer_json_scan_input *in = &doc->inputs[i];
        int idx = io_index(m->info.inputs, nin, &in->name);
        if (idx == NOT_FOUND || seen[idx])
            goto decline;
        seen[idx] = true;
        struct tensor *t = &ins[idx];
        t->name = m->info.inputs[idx].name;
        t->dtype = dtype_from_name(in->datatype.p, in->datatype.n);
        if (t->dtype == DT_INVALID)
            goto decline;
        t->ndim = in->ndim;
        memcpy(t->shape, in->shape, in->ndim * sizeof *t->shape);
        if (model_io_check(m->name, &m->info.inputs[idx], t, &err) != 0)
            goto decline;
        if (in->data.p ? decode_data(req, t, in->data.p, in->data.n, &err) != 0
                       : decode_binary_input(req, t, in->binary_size, bin, &err) != 0)
            goto decline;
    }
    if (bin->off != bin->end)
        goto decline;
    uint32_t ninputs;
    if (model_inputs_complete(m, ins, seen, &ninputs, &err) != 0 || (m->batched && !ninputs))
        goto decline;
    for (uint32_t i = 1; m->batched && i < ninputs; i++)
        if (ins[i].shape[0] != ins[0].shape[0])
            goto decline;

    const char **names = NULL;
    bool *flags = NULL;
    if (doc->has_outputs) {
        uint32_t n = doc->noutputs;
        names = arena_alloc(&req->arena, n * sizeof *names);
        flags = arena_alloc(&req->arena, n * sizeof *flags);
        if (n > m->info.noutputs || !names || !flags)
            goto decline;
        for (uint32_t i = 0; i < n; i++) {
            const struct infer_json_scan_output *o = &doc->outputs[i];
            int idx = io_index(m->info.outputs, m->info.noutputs, &o->name);
            if (idx == NOT_FOUND)
                goto decline;
            names[i] = m->info.outputs[idx].name;
            flags[i] = o->binary_given ? o->binary : doc->binary_output;
            for (uint32_t j = 0; j < i; j++)
                if (names[j] == names[i])
                    goto decline;
        }
        req->output_names = names;
        req->output_binary = flags;
        req->noutputs = n;
    } else if (all_outputs(req, m, doc->binary_output, &err) != 0) {
        goto decline;
    }
    if (id) {
        req->id = id;
        req->id_len = doc->id.n;
    }
    req->inputs = ins;
    req->ninputs = ninputs;
    req->batch = m->batched ? ins[0].shape[0] : 1;
    return true;

decline:
    arena_rewind(&req->arena, &mark);
    return false;
}

int infer_json_decode(struct infer_request *req, struct shm_request *shm, const struct model *m,
                      const char *body, size_t len, int64_t header_len, struct error *err)
{
    /* A JSON request, or a JSON header with binary tensor data after it. */
    if (header_len == -1 || (header_len > 0 && (uint64_t)header_len <= len)) {
        size_t json_len = header_len > 0 ? (size_t)header_len : len;
        struct binary_part bin = {.body = body, .off = json_len, .end = len,
                                  .present = header_len > 0};
        struct infer_json_doc doc;
        if (infer_json_scan(body, json_len, &doc) && decode_plain(req, m, &doc, &bin))
            return 0;
    }
    return infer_json_decode_general(req, shm, m, body, len, header_len, err);
}

/* ---- response --------------------------------------------------------- */

static bool output_is_binary(const struct infer_request *req, const struct shm_request *shm,
                             uint32_t i)
{
    return req->output_binary && req->output_binary[i] && !shm_request_has_output(shm, i);
}

/* An output written to shared memory: where it went, as Triton says it. */
/* An output's "parameters" member naming its shared-memory region, at p
 * (room: SHM_PARAMS_ROOM(region name length)). */
#define SHM_PARAMS_ROOM(n) (JC_STR_ROOM(n) + 2 * NUMFMT_MAX + 128)
static char *shm_params(char *p, const struct shm_output *o, const char *region, size_t n)
{
    p = jc_lit(p, ",\"parameters\":{\"shared_memory_region\":");
    p = jc_str(p, region, n);
    p = jc_lit(p, ",\"shared_memory_byte_size\":");
    p = jc_u64(p, o->written);
    if (o->offset) {
        p = jc_lit(p, ",\"shared_memory_offset\":");
        p = jc_u64(p, o->offset);
    }
    *p++ = '}';
    return p;
}

/* Bytes of an output as binary tensor data. */
static size_t binary_size(const struct tensor *t, int64_t count)
{
    if (count <= 0)
        return 0;
    if (t->dtype != DT_BYTES)
        return (size_t)count * dtype_size(t->dtype);
    const struct tensor_bytes *s = t->data;
    size_t n = (size_t)count * TENSOR_BYTES_PREFIX;
    for (int64_t i = 0; i < count; i++)
        n += s[i].len;
    return n;
}

static void append_binary(struct buf *out, const struct tensor *t, int64_t count, size_t size)
{
    if (count <= 0 || buf_reserve(out, size) != 0)
        return;
    if (t->dtype != DT_BYTES) {
        buf_append(out, t->data, size);
        return;
    }
    const struct tensor_bytes *s = t->data;
    for (int64_t i = 0; i < count; i++) {
        unsigned char prefix[TENSOR_BYTES_PREFIX] = {
            (unsigned char)s[i].len, (unsigned char)(s[i].len >> 8),
            (unsigned char)(s[i].len >> 16), (unsigned char)(s[i].len >> 24)};
        buf_append(out, prefix, sizeof prefix);
        buf_append(out, s[i].ptr, s[i].len);
    }
}

void infer_json_encode(const struct infer_request *req, const struct shm_request *shm,
                       struct buf *out, size_t *json_len)
{
    /* A fixed shape of JSON, written with the unchecked cursor: each part's
     * room is made once, at its longest (a failed reservation is sticky in
     * out->err, and nothing more is written). */
    const struct model *m = req->model;
    size_t start = out->len;
    bool any_binary = false;
    if (json_len)
        *json_len = 0;
    size_t name_len = strlen(m->name), version_len = strlen(m->version_str);
    size_t most = JC_STR_ROOM(name_len) + JC_STR_ROOM(version_len) +
                  (req->id ? JC_STR_ROOM(req->id_len) : 0) + 64;
    if (buf_reserve(out, most) != 0)
        return;
    char *p = jc_lit(out->data + out->len, "{\"model_name\":");
    p = jc_str(p, m->name, name_len);
    p = jc_lit(p, ",\"model_version\":");
    p = jc_str(p, m->version_str, version_len);
    if (req->id) {
        p = jc_lit(p, ",\"id\":");
        p = jc_str(p, req->id, req->id_len);
    }
    p = jc_lit(p, ",\"outputs\":[");
    out->len = (size_t)(p - out->data);
    for (uint32_t i = 0; i < req->noutputs; i++) {
        const struct tensor *t = &req->outputs[i];
        int64_t count = tensor_count(t, INT64_MAX);
        uint32_t ndim = t->ndim < TENSOR_MAX_DIMS ? t->ndim : TENSOR_MAX_DIMS;
        size_t tname_len = strlen(t->name);
        bool in_shm = shm_request_has_output(shm, i);
        bool binary = !in_shm && output_is_binary(req, shm, i);
        const char *region = in_shm ? shm_region_name(shm->outputs[i].region) : NULL;
        size_t region_len = region ? strlen(region) : 0;
        most = TENSOR_JSON_HEAD_ROOM(tname_len, ndim) + SHM_PARAMS_ROOM(region_len) + 16;
        if (buf_reserve(out, most) != 0)
            return;
        p = out->data + out->len;
        if (i)
            *p++ = ',';
        *p++ = '{';
        p = tensor_json_head(p, t->name, tname_len, t->dtype, t->shape, ndim);
        if (in_shm) {
            p = shm_params(p, &shm->outputs[i], region, region_len);
        } else if (binary) {
            any_binary = true;
            p = jc_lit(p, ",\"parameters\":{\"binary_data_size\":");
            p = jc_u64(p, binary_size(t, count));
            *p++ = '}';
        } else {
            p = jc_lit(p, ",\"data\":");
            out->len = (size_t)(p - out->data);
            tensor_json_write(out, t->dtype, t->data, count);
            if (out->err || buf_reserve(out, 1) != 0)
                return;
            p = out->data + out->len;
        }
        *p++ = '}';
        out->len = (size_t)(p - out->data);
    }
    buf_append(out, "]}", 2);
    if (out->err)
        return;
    size_t header = out->len - start;
    if (any_binary)
        for (uint32_t i = 0; i < req->noutputs; i++)
            if (output_is_binary(req, shm, i)) {
                const struct tensor *t = &req->outputs[i];
                int64_t count = tensor_count(t, INT64_MAX);
                append_binary(out, t, count, binary_size(t, count));
            }
    if (json_len)
        *json_len = any_binary ? header : 0;
}
