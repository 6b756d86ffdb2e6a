#include "api/rest/generate_json.h"

#include <inttypes.h>
#include <string.h>

#include "api/tensor_json.h"
#include "base/json.h"

/* Largest generate request text after rewriting, relative to the body. */
#define REWRITE_SLACK 4096

/* Elements of a field's value: leaves of its nested arrays. */
static int64_t count_leaves(const struct json_value *v)
{
    if (v->type != JSON_ARRAY)
        return 1;
    int64_t n = 0;
    for (uint32_t i = 0; i < v->len; i++)
        n += count_leaves(&v->u.items[i]);
    return n;
}

/* Writes v's leaves as one flat JSON array. Returns false for a value that
 * cannot be tensor data (an object, null). */
static bool write_leaves(struct json_writer *w, const struct json_value *v)
{
    switch (v->type) {
    case JSON_ARRAY:
        for (uint32_t i = 0; i < v->len; i++)
            if (!write_leaves(w, &v->u.items[i]))
                return false;
        return true;
    case JSON_NUMBER:
        json_w_raw(w, v->u.num, v->len);
        return true;
    case JSON_STRING:
        json_w_str(w, v->u.str, v->len);
        return true;
    case JSON_TRUE:
    case JSON_FALSE:
        json_w_bool(w, v->type == JSON_TRUE);
        return true;
    default:
        return false;
    }
}

/* The input's shape for `count` elements: the model's dims (batch dim
 * excluded) with a variable one deduced. */
static int input_shape(const struct model *m, const struct model_io *io, int64_t count,
                       int64_t *shape, uint32_t *ndim, struct error *err)
{
    uint32_t first = m->batched ? 1 : 0, n = 0, variable = UINT32_MAX;
    int64_t fixed = 1;
    if (m->batched)
        shape[n++] = 1;
    for (uint32_t d = first; d < io->ndim; d++) {
        if (io->dims[d] < 0) {
            if (variable != UINT32_MAX)
                return error_set(err, 400,
                                 "input '%s': the model's shape has more than one variable "
                                 "dimension; use the infer endpoint with an explicit shape",
                                 io->name);
            variable = n;
            shape[n++] = -1;
            continue;
        }
        fixed *= io->dims[d];
        shape[n++] = io->dims[d];
    }
    if (variable != UINT32_MAX) {
        if (fixed == 0 || count % fixed != 0)
            return error_set(err, 400,
                             "input '%s': %" PRId64 " elements do not fill the model's shape",
                             io->name, count);
        shape[variable] = count / fixed;
    } else if (fixed != count) {
        return error_set(err, 400,
                         "input '%s': the model takes %" PRId64 " elements, the request has %" PRId64,
                         io->name, fixed, count);
    }
    *ndim = n;
    return 0;
}

int generate_json_to_infer(struct arena *arena, const struct model *m, const char *body,
                           size_t len, const char **out, size_t *out_len, struct error *err)
{
    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(arena, body, len, NULL, &root, &msg, &off) != 0) {
        if (strcmp(msg, "out of memory") == 0)
            return error_set(err, 413, "request too large to decode");
        return error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
    }
    if (root->type != JSON_OBJECT)
        return error_set(err, 400, "request body must be a JSON object");
    for (uint32_t i = 0; i < root->len; i++) {
        const struct json_member *f = &root->u.members[i];
        if (strcmp(f->key, "parameters") != 0 && model_input_index(m, f->key) < 0)
            return error_set(err, 400,
                             "unknown field '%s': not an input of model '%s' (nor 'parameters')",
                             f->key, m->name);
    }
    struct buf b;
    buf_init(&b, len * 2 + REWRITE_SLACK);
    struct json_writer w;
    json_w_init(&w, &b);
    json_w_obj_begin(&w);
    const struct json_value *params = json_get(root, "parameters");
    if (params) {
        json_w_key(&w, "parameters");
        if (params->type != JSON_OBJECT) {
            buf_free(&b);
            return error_set(err, 400, "'parameters' must be an object");
        }
        json_w_obj_begin(&w);
        for (uint32_t i = 0; i < params->len; i++) {
            const struct json_member *p = &params->u.members[i];
            json_w_keyn(&w, p->key, p->key_len);
            if (!write_leaves(&w, &p->value) || p->value.type == JSON_ARRAY) {
                buf_free(&b);
                return error_set(err, 400, "parameter '%s' must be a string, number or boolean",
                                 p->key);
            }
        }
        json_w_obj_end(&w);
    }
    json_w_key(&w, "inputs");
    json_w_arr_begin(&w);
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < m->info.ninputs; k++) {
        const struct model_io *io = &m->info.inputs[k];
        const struct json_value *v = json_get(root, io->name);
        if (!v && model_input_optional(m, k))
            continue;
        if (!v) {
            rc = error_set(err, 400, "missing field '%s' (an input of model '%s')", io->name,
                           m->name);
            break;
        }
        int64_t shape[TENSOR_MAX_DIMS];
        uint32_t ndim = 0;
        rc = input_shape(m, io, count_leaves(v), shape, &ndim, err);
        if (rc != 0)
            break;
        json_w_obj_begin(&w);
        tensor_json_write_head(&w, io->name, io->dtype, shape, ndim);
        json_w_key(&w, "data");
        json_w_arr_begin(&w);
        if (!write_leaves(&w, v))
            rc = error_set(err, 400, "field '%s' must be a scalar or an array of scalars",
                           io->name);
        json_w_arr_end(&w);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    if (rc == 0 && b.err)
        rc = error_set(err, 413, "request too large to decode");
    char *text = rc == 0 ? arena_alloc(arena, b.len ? b.len : 1) : NULL;
    if (rc == 0 && !text)
        rc = error_set(err, 413, "request too large to decode");
    if (rc == 0) {
        memcpy(text, b.data, b.len);
        *out = text;
        *out_len = b.len;
    }
    buf_free(&b);
    return rc;
}

void generate_json_response(struct buf *out, const struct model *m, const struct tensor *outputs,
                            uint32_t n)
{
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "model_name");
    json_w_cstr(&w, m->name);
    json_w_key(&w, "model_version");
    json_w_cstr(&w, m->version_str);
    for (uint32_t i = 0; i < n; i++) {
        const struct tensor *t = &outputs[i];
        int64_t count = tensor_count(t, INT64_MAX);
        json_w_key(&w, t->name);
        struct buf *b = json_w_value_buf(&w);
        if (!b)
            break;
        size_t start = b->len;
        tensor_json_write(b, t->dtype, t->data, count < 0 ? 0 : count);
        if (count == 1 && !b->err && b->len >= start + 2) {
            /* One element: the scalar, without the array's brackets. */
            memmove(b->data + start, b->data + start + 1, b->len - start - 2);
            b->len -= 2;
        }
    }
    json_w_obj_end(&w);
}
