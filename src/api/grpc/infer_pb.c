#include "api/grpc/infer_pb.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Bytes of a BYTES element's length prefix in raw contents. */

/* ---- arena allocator for protobuf-c ------------------------------------- */

static void *pb_alloc(void *data, size_t size)
{
    struct infer_pb_allocator *a = data;
    void *p = arena_alloc(a->arena, size ? size : 1);
    if (!p)
        a->failed = true;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    (void)p; /* released with the arena */
}

void infer_pb_allocator_init(struct infer_pb_allocator *a, struct arena *arena)
{
    a->base.alloc = pb_alloc;
    a->base.free = pb_free;
    a->base.allocator_data = a;
    a->arena = arena;
    a->failed = false;
}

int infer_pb_unpack(struct arena *arena, const uint8_t *data, size_t len,
                    Inference__ModelInferRequest **out, struct error *err)
{
    struct infer_pb_allocator a;
    infer_pb_allocator_init(&a, arena);
    *out = inference__model_infer_request__unpack(&a.base, len, data);
    if (*out)
        return 0;
    if (a.failed)
        return error_set(err, 413, "request too large to decode");
    return error_set(err, 400, "malformed ModelInferRequest message");
}

/* ---- request ------------------------------------------------------------ */

/* The value of parameter `name` in a map<string, InferParameter> (protobuf-c
 * gives each map its own entry type), or NULL. */
#define FIND_PARAM(entries, n, name, out)                                                          \
    do {                                                                                           \
        (out) = NULL;                                                                              \
        for (size_t i_ = 0; i_ < (n); i_++)                                                        \
            if ((entries)[i_]->key && strcmp((entries)[i_]->key, (name)) == 0) {                   \
                (out) = (entries)[i_]->value;                                                      \
                break;                                                                             \
            }                                                                                      \
    } while (0)

/* A non-negative integer parameter (int64_param or uint64_param). */
static bool u64_param(const Inference__InferParameter *p, uint64_t *out)
{
    if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM &&
        p->int64_param >= 0)
        *out = (uint64_t)p->int64_param;
    else if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
        *out = p->uint64_param;
    else
        return false;
    return true;
}

/* Triton's shared-memory parameters of a tensor (serve/shm.h) from its
 * parameter values; sp->has_region false when it has none. */
static int shm_params(const Inference__InferParameter *region,
                      const Inference__InferParameter *size,
                      const Inference__InferParameter *offset, const char *what, const char *name,
                      struct shm_params *sp, struct error *err)
{
    memset(sp, 0, sizeof *sp);
    if (!region) {
        if (size || offset)
            return error_set(err, 400,
                             "%s '%s': shared-memory parameters need 'shared_memory_region'", what,
                             name);
        return 0;
    }
    if (region->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
        return error_set(err, 400, "%s '%s': 'shared_memory_region' must be a string", what, name);
    if (size && !u64_param(size, &sp->byte_size))
        return error_set(err, 400,
                         "%s '%s': 'shared_memory_byte_size' must be a non-negative integer", what,
                         name);
    if (offset && !u64_param(offset, &sp->offset))
        return error_set(err, 400, "%s '%s': 'shared_memory_offset' must be a non-negative integer",
                         what, name);
    sp->region = region->string_param;
    sp->region_len = strlen(region->string_param);
    sp->has_region = true;
    sp->has_byte_size = size != NULL;
    return 0;
}

static int decode_shape(const Inference__ModelInferRequest__InferInputTensor *in, struct tensor *t,
                        struct error *err)
{
    if (in->n_shape > TENSOR_MAX_DIMS)
        return error_set(err, 400, "input '%s': shape has %zu dimensions, at most %d allowed",
                         t->name, in->n_shape, TENSOR_MAX_DIMS);
    t->ndim = (uint32_t)in->n_shape;
    for (size_t i = 0; i < in->n_shape; i++) {
        if (in->shape[i] < 0)
            return error_set(err, 400, "input '%s': shape must hold non-negative integers",
                             t->name);
        t->shape[i] = in->shape[i];
    }
    return 0;
}

/* Raw contents of one input: numeric data is used in place (protobuf-c
 * copied it into the arena, 16-byte aligned); BYTES are split into
 * elements that point into it. */
static int decode_raw(struct infer_request *req, struct tensor *t, const ProtobufCBinaryData *raw,
                      int64_t count, struct error *err)
{
    if (t->dtype != DT_BYTES) {
        size_t esize = dtype_size(t->dtype);
        if ((uint64_t)count > SIZE_MAX / esize || (size_t)count * esize != raw->len) {
            char shape[128];
            shape_format(t->shape, t->ndim, shape, sizeof shape);
            return error_set(err, 400,
                             "input '%s': raw_input_contents has %zu bytes, shape %s of %s "
                             "needs %" PRIu64,
                             t->name, raw->len, shape, dtype_name(t->dtype),
                             (uint64_t)count * esize);
        }
        t->data = raw->len ? raw->data : (void *)"";
        t->nbytes = raw->len;
        return 0;
    }
    return tensor_bytes_split(&req->arena, t, (const char *)raw->data, raw->len, count,
                              "raw_input_contents", err);
}

/* The typed field each datatype travels in, and how many values each field holds. */
enum contents_field {
    F_BOOL,
    F_INT,
    F_INT64,
    F_UINT,
    F_UINT64,
    F_FP32,
    F_FP64,
    F_BYTES,
    F_NFIELDS,
    F_NONE = -1
};

static const char *const field_names[F_NFIELDS] = {
    "bool_contents",   "int_contents",  "int64_contents", "uint_contents",
    "uint64_contents", "fp32_contents", "fp64_contents",  "bytes_contents"};

static enum contents_field field_of(enum dtype t)
{
    switch (t) {
    case DT_BOOL:
        return F_BOOL;
    case DT_INT8:
    case DT_INT16:
    case DT_INT32:
        return F_INT;
    case DT_INT64:
        return F_INT64;
    case DT_UINT8:
    case DT_UINT16:
    case DT_UINT32:
        return F_UINT;
    case DT_UINT64:
        return F_UINT64;
    case DT_FP32:
        return F_FP32;
    case DT_FP64:
        return F_FP64;
    case DT_BYTES:
        return F_BYTES;
    default:
        return F_NONE;
    }
}

static void field_counts(const Inference__InferTensorContents *c, size_t n[F_NFIELDS])
{
    memset(n, 0, F_NFIELDS * sizeof *n);
    if (!c)
        return;
    n[F_BOOL] = c->n_bool_contents;
    n[F_INT] = c->n_int_contents;
    n[F_INT64] = c->n_int64_contents;
    n[F_UINT] = c->n_uint_contents;
    n[F_UINT64] = c->n_uint64_contents;
    n[F_FP32] = c->n_fp32_contents;
    n[F_FP64] = c->n_fp64_contents;
    n[F_BYTES] = c->n_bytes_contents;
}

/* Narrows int_contents / uint_contents to 8 or 16 bits with a range check. */
static int narrow(struct infer_request *req, struct tensor *t, const void *src, size_t count,
                  struct error *err)
{
    size_t esize = dtype_size(t->dtype);
    void *dst = arena_alloc(&req->arena, count ? count * esize : 1);
    if (!dst)
        return error_set(err, 413, "input '%s': request too large to decode", t->name);
    for (size_t i = 0; i < count; i++) {
        bool ok;
        switch (t->dtype) {
        case DT_INT8: {
            int32_t v = ((const int32_t *)src)[i];
            ok = v >= INT8_MIN && v <= INT8_MAX;
            ((int8_t *)dst)[i] = (int8_t)v;
            break;
        }
        case DT_INT16: {
            int32_t v = ((const int32_t *)src)[i];
            ok = v >= INT16_MIN && v <= INT16_MAX;
            ((int16_t *)dst)[i] = (int16_t)v;
            break;
        }
        case DT_UINT8: {
            uint32_t v = ((const uint32_t *)src)[i];
            ok = v <= UINT8_MAX;
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
        }
        default: { /* DT_UINT16 */
            uint32_t v = ((const uint32_t *)src)[i];
            ok = v <= UINT16_MAX;
            ((uint16_t *)dst)[i] = (uint16_t)v;
            break;
        }
        }
        if (!ok)
            return error_set(err, 400, "input '%s': element %zu is out of range for %s", t->name, i,
                             dtype_name(t->dtype));
    }
    t->data = dst;
    t->nbytes = count * esize;
    return 0;
}

static int decode_contents(struct infer_request *req, struct tensor *t,
                           const Inference__InferTensorContents *c, int64_t count,
                           struct error *err)
{
    enum contents_field f = field_of(t->dtype);
    if (f == F_NONE)
        return error_set(err, 400,
                         "input '%s': %s data must be sent in raw_input_contents (there is no "
                         "typed contents field for it)",
                         t->name, dtype_name(t->dtype));
    size_t n[F_NFIELDS];
    field_counts(c, n);
    for (int i = 0; i < F_NFIELDS; i++)
        if (i != (int)f && n[i])
            return error_set(err, 400, "input '%s': datatype %s takes contents.%s, not %s", t->name,
                             dtype_name(t->dtype), field_names[f], field_names[i]);
    if (n[f] != (uint64_t)count) {
        char shape[128];
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return error_set(err, 400,
                         "input '%s': contents.%s has %zu elements, shape %s needs %" PRId64,
                         t->name, field_names[f], n[f], shape, count);
    }
    size_t esize = dtype_size(t->dtype);
    t->nbytes = (size_t)count * esize;
    static char empty[16];
    switch (t->dtype) {
    case DT_BOOL: {
        uint8_t *dst = arena_alloc(&req->arena, count ? (size_t)count : 1);
        if (!dst)
            return error_set(err, 413, "input '%s': request too large to decode", t->name);
        for (int64_t i = 0; i < count; i++)
            dst[i] = c->bool_contents[i] != 0;
        t->data = dst;
        return 0;
    }
    case DT_INT8:
    case DT_INT16:
        return narrow(req, t, count ? c->int_contents : NULL, (size_t)count, err);
    case DT_UINT8:
    case DT_UINT16:
        return narrow(req, t, count ? c->uint_contents : NULL, (size_t)count, err);
    case DT_INT32:
        t->data = count ? (void *)c->int_contents : empty;
        return 0;
    case DT_INT64:
        t->data = count ? (void *)c->int64_contents : empty;
        return 0;
    case DT_UINT32:
        t->data = count ? (void *)c->uint_contents : empty;
        return 0;
    case DT_UINT64:
        t->data = count ? (void *)c->uint64_contents : empty;
        return 0;
    case DT_FP32:
        t->data = count ? (void *)c->fp32_contents : empty;
        return 0;
    case DT_FP64:
        t->data = count ? (void *)c->fp64_contents : empty;
        return 0;
    default: { /* DT_BYTES */
        struct tensor_bytes *elems =
            arena_alloc(&req->arena, count ? (size_t)count * sizeof *elems : 1);
        if (!elems)
            return error_set(err, 413, "input '%s': request too large to decode", t->name);
        size_t total = 0;
        for (int64_t i = 0; i < count; i++) {
            if (c->bytes_contents[i].len > UINT32_MAX)
                return error_set(err, 400, "input '%s': BYTES element %" PRId64 " is too long",
                                 t->name, i);
            /* protobuf-c leaves an empty element's data NULL. */
            elems[i].ptr = c->bytes_contents[i].len ? (const char *)c->bytes_contents[i].data : "";
            elems[i].len = (uint32_t)c->bytes_contents[i].len;
            total += elems[i].len;
        }
        t->data = elems;
        t->nbytes = total;
        return 0;
    }
    }
}

/* Whether an input names a shared-memory region. */
static bool uses_shm(const Inference__ModelInferRequest__InferInputTensor *in)
{
    const Inference__InferParameter *region;
    FIND_PARAM(in->parameters, in->n_parameters, "shared_memory_region", region);
    return region != NULL;
}

/* `raw`: the input's raw_input_contents entry, or NULL when the request
 * has none for it. */
static int decode_input(struct infer_request *req, struct shm_request *shm,
                        const struct model *m,
                        const Inference__ModelInferRequest__InferInputTensor *in,
                        const ProtobufCBinaryData *raw, bool *seen, struct error *err)
{
    int idx = model_input_index(m, in->name);
    if (idx < 0)
        return model_io_unknown(&m->info, true, in->name, m->name, err);
    if (seen[idx])
        return error_set(err, 400, "duplicate input '%s'", in->name);
    seen[idx] = true;

    struct tensor *t = &req->inputs[idx];
    t->name = m->info.inputs[idx].name;
    t->dtype = dtype_from_name(in->datatype, strlen(in->datatype));
    if (t->dtype == DT_INVALID)
        return error_set(err, 400, "input '%s': unknown datatype '%s'", t->name, in->datatype);
    if (decode_shape(in, t, err) != 0 || model_io_check(m->name, &m->info.inputs[idx], t, err) != 0)
        return ST_ERROR;
    const Inference__InferParameter *region, *size, *offset;
    FIND_PARAM(in->parameters, in->n_parameters, "shared_memory_region", region);
    FIND_PARAM(in->parameters, in->n_parameters, "shared_memory_byte_size", size);
    FIND_PARAM(in->parameters, in->n_parameters, "shared_memory_offset", offset);
    struct shm_params sp;
    if (shm_params(region, size, offset, "input", t->name, &sp, err) != 0)
        return ST_ERROR;
    int64_t count = tensor_count(t, INT64_MAX);
    if (count < 0)
        return error_set(err, 400, "input '%s': shape has too many elements", t->name);
    if (sp.has_region) {
        /* Triton's clients send an empty raw entry for such an input. */
        if (in->contents || (raw && raw->len))
            return error_set(err, 400, "input '%s' has both shared memory and contents", t->name);
        if (!shm)
            return error_set(err, 400, "input '%s': shared memory is not supported here",
                             t->name);
        return shm_request_input(shm, &req->arena, t, &sp, err);
    }
    if (raw)
        return decode_raw(req, t, raw, count, err); /* no contents: infer_pb_decode checked */
    if (!in->contents && count > 0) {
        enum contents_field f = field_of(t->dtype);
        if (f == F_NONE)
            return error_set(err, 400, "input '%s': %s data must be sent in raw_input_contents",
                             t->name, dtype_name(t->dtype));
        return error_set(err, 400, "input '%s' has no data: set contents.%s or raw_input_contents",
                         t->name, field_names[f]);
    }
    return decode_contents(req, t, in->contents, count, err);
}

static int decode_outputs(struct infer_request *req, struct shm_request *shm,
                          const struct model *m, const Inference__ModelInferRequest *msg,
                          struct error *err)
{
    size_t n = msg->n_outputs ? msg->n_outputs : m->info.noutputs;
    if (msg->n_outputs > m->info.noutputs)
        return error_set(err, 400, "'outputs' names %zu outputs, model '%s' has %u", msg->n_outputs,
                         m->name, m->info.noutputs);
    const char **names = arena_alloc(&req->arena, n * sizeof *names + 1);
    uint32_t *classes = NULL; /* allocated with the first classified output */
    if (!names)
        return error_set(err, 413, "request too large to decode");
    for (size_t i = 0; i < n; i++) {
        if (!msg->n_outputs) {
            names[i] = m->info.outputs[i].name;
            continue;
        }
        const Inference__ModelInferRequest__InferRequestedOutputTensor *o = msg->outputs[i];
        int idx = model_output_index(m, o->name);
        if (idx < 0)
            return model_io_unknown(&m->info, false, o->name, m->name, err);
        for (size_t j = 0; j < i; j++)
            if (names[j] == m->info.outputs[idx].name)
                return error_set(err, 400, "duplicate output '%s'", o->name);
        const Inference__InferParameter *p;
        FIND_PARAM(o->parameters, o->n_parameters, "classification", p);
        uint64_t k = 0;
        if (p && (!u64_param(p, &k) || k == 0))
            return error_set(err, 400,
                             "output '%s': parameter 'classification' must be a positive "
                             "int64_param",
                             o->name);
        if (k) {
            if (!classes && !(classes = arena_calloc(&req->arena, n, sizeof *classes)))
                return error_set(err, 413, "request too large to decode");
            classes[i] = k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
        }
        names[i] = m->info.outputs[idx].name;
        const Inference__InferParameter *region, *size, *offset;
        FIND_PARAM(o->parameters, o->n_parameters, "shared_memory_region", region);
        FIND_PARAM(o->parameters, o->n_parameters, "shared_memory_byte_size", size);
        FIND_PARAM(o->parameters, o->n_parameters, "shared_memory_offset", offset);
        struct shm_params sp;
        if (shm_params(region, size, offset, "output", names[i], &sp, err) != 0)
            return ST_ERROR;
        if (sp.has_region && !shm)
            return error_set(err, 400, "output '%s': shared memory is not supported here",
                             names[i]);
        if (sp.has_region &&
            shm_request_output(shm, &req->arena, (uint32_t)i, (uint32_t)n, names[i], &sp, err) != 0)
            return ST_ERROR;
    }
    req->output_names = names;
    req->output_binary = NULL;
    req->output_classes = classes;
    req->noutputs = (uint32_t)n;
    return 0;
}

/* A request-level parameter that must be a non-negative integer: *out is
 * left alone when it is absent, else set, or a 400 naming it (`unit` is
 * appended to the message). */
static int request_u64_param(const Inference__ModelInferRequest *msg, const char *name,
                             const char *unit, uint64_t *out, struct error *err)
{
    const Inference__InferParameter *p;
    FIND_PARAM(msg->parameters, msg->n_parameters, name, p);
    if (p && !u64_param(p, out))
        return error_set(err, 400, "parameter '%s' must be a non-negative integer%s", name, unit);
    return 0;
}

/* Triton's sequence parameters: sequence_id an int64, uint64 or string
 * parameter, sequence_start and sequence_end bool parameters. */
static int decode_sequence(const Inference__ModelInferRequest *msg, struct infer_sequence *seq,
                           struct error *err)
{
    const Inference__InferParameter *id, *start, *end;
    FIND_PARAM(msg->parameters, msg->n_parameters, "sequence_id", id);
    FIND_PARAM(msg->parameters, msg->n_parameters, "sequence_start", start);
    FIND_PARAM(msg->parameters, msg->n_parameters, "sequence_end", end);
    if (id && id->parameter_choice_case ==
                  INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
        seq->id_str = id->string_param;
        seq->id_str_len = (uint32_t)strlen(id->string_param);
    } else if (id && !u64_param(id, &seq->id)) {
        return error_set(err, 400, "parameter 'sequence_id' must be an unsigned integer or a "
                                   "string");
    }
    const Inference__InferParameter *flags[2] = {start, end};
    bool *out[2] = {&seq->start, &seq->end};
    for (int i = 0; i < 2; i++) {
        if (!flags[i])
            continue;
        if (flags[i]->parameter_choice_case !=
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            return error_set(err, 400, "parameter '%s' must be a bool",
                             i ? "sequence_end" : "sequence_start");
        *out[i] = flags[i]->bool_param;
    }
    return 0;
}

int infer_pb_decode(struct infer_request *req, struct shm_request *shm, const struct model *m,
                    const Inference__ModelInferRequest *msg, struct error *err)
{
    if (msg->id && msg->id[0]) {
        req->id = msg->id;
        req->id_len = (uint32_t)strlen(msg->id);
    }
    if (request_u64_param(msg, "timeout", " (microseconds)", &req->timeout_us, err) != 0 ||
        request_u64_param(msg, "priority", "", &req->priority, err) != 0 ||
        decode_sequence(msg, &req->sequence, err) != 0)
        return ST_ERROR;
    /* Inputs in shared memory may have no raw entry (Triton's clients
     * leave them out) or an empty one. */
    size_t nshm = 0;
    for (size_t k = 0; k < msg->n_inputs; k++) {
        const Inference__ModelInferRequest__InferInputTensor *in = msg->inputs[k];
        bool in_shm = uses_shm(in);
        nshm += in_shm;
        /* Triton's check and words, before any other about the inputs. */
        if (!in_shm && in->contents && msg->n_raw_input_contents)
            return error_set(err, 400,
                             "contents field must not be specified when using "
                             "raw_input_contents for '%s' for model '%s'",
                             in->name, msg->model_name);
    }
    bool all_raw = msg->n_raw_input_contents == msg->n_inputs;
    if (msg->n_raw_input_contents && !all_raw && msg->n_raw_input_contents != msg->n_inputs - nshm)
        return error_set(err, 400,
                         "raw_input_contents has %zu entries for %zu inputs: give one per input "
                         "(inputs in shared memory may be left out), in the order of 'inputs'",
                         msg->n_raw_input_contents, msg->n_inputs);
    req->inputs = arena_calloc(&req->arena, m->info.ninputs, sizeof *req->inputs);
    bool *seen = arena_calloc(&req->arena, m->info.ninputs, sizeof *seen);
    if (!req->inputs || !seen)
        return error_set(err, 413, "request too large to decode");
    req->ninputs = m->info.ninputs;
    size_t next_raw = 0;
    for (size_t k = 0; k < msg->n_inputs; k++) {
        const ProtobufCBinaryData *raw = NULL;
        if (all_raw)
            raw = &msg->raw_input_contents[k];
        else if (msg->n_raw_input_contents && !uses_shm(msg->inputs[k]))
            raw = &msg->raw_input_contents[next_raw++];
        if (decode_input(req, shm, m, msg->inputs[k], raw, seen, err) != 0)
            return ST_ERROR;
    }
    if (model_inputs_complete(m, req->inputs, seen, &req->ninputs, err) != 0)
        return ST_ERROR;
    req->batch = m->batched ? req->inputs[0].shape[0] : 1;
    if (m->batched)
        for (uint32_t i = 1; i < req->ninputs; i++)
            if (req->inputs[i].shape[0] != req->inputs[0].shape[0])
                return error_set(
                    err, 400, "inputs '%s' and '%s' have different batch sizes (%lld, %lld)",
                    req->inputs[0].name, req->inputs[i].name, (long long)req->inputs[0].shape[0],
                    (long long)req->inputs[i].shape[0]);
    return decode_outputs(req, shm, m, msg, err);
}

/* ---- response ----------------------------------------------------------- */

/* An output's raw bytes: numeric data as is, BYTES length-prefixed into
 * the arena. */
static int raw_output(const struct tensor *t, struct arena *arena, ProtobufCBinaryData *raw)
{
    int64_t count = tensor_count(t, INT64_MAX);
    if (count <= 0) {
        raw->len = 0;
        raw->data = NULL;
        return 0;
    }
    if (t->dtype != DT_BYTES) {
        raw->len = (size_t)count * dtype_size(t->dtype);
        raw->data = t->data;
        return 0;
    }
    const struct tensor_bytes *s = t->data;
    size_t size = (size_t)count * TENSOR_BYTES_PREFIX;
    for (int64_t i = 0; i < count; i++)
        size += s[i].len;
    uint8_t *p = arena_alloc(arena, size);
    if (!p)
        return -ENOMEM;
    raw->data = p;
    raw->len = size;
    for (int64_t i = 0; i < count; i++) {
        uint32_t n = s[i].len;
        *p++ = (uint8_t)n;
        *p++ = (uint8_t)(n >> 8);
        *p++ = (uint8_t)(n >> 16);
        *p++ = (uint8_t)(n >> 24);
        if (n)
            memcpy(p, s[i].ptr, n);
        p += n;
    }
    return 0;
}

/* Triton's parameter on every response of a decoupled model. */
static int final_parameter(struct arena *arena, bool final, Inference__ModelInferResponse *r)
{
    Inference__ModelInferResponse__ParametersEntry *e = arena_alloc(arena, sizeof *e);
    Inference__ModelInferResponse__ParametersEntry **ptrs = arena_alloc(arena, sizeof *ptrs);
    Inference__InferParameter *v = arena_alloc(arena, sizeof *v);
    if (!e || !ptrs || !v)
        return -ENOMEM;
    inference__model_infer_response__parameters_entry__init(e);
    inference__infer_parameter__init(v);
    v->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    v->bool_param = final;
    e->key = "triton_final_response";
    e->value = v;
    ptrs[0] = e;
    r->n_parameters = 1;
    r->parameters = ptrs;
    return 0;
}

/* An output written to shared memory: where it went, as Triton says it. */
static int shm_output_parameters(struct arena *arena, const struct shm_output *o,
                                 Inference__ModelInferResponse__InferOutputTensor *t)
{
    size_t n = o->offset ? 3 : 2;
    Inference__ModelInferResponse__InferOutputTensor__ParametersEntry *e =
        arena_alloc(arena, n * sizeof *e);
    Inference__ModelInferResponse__InferOutputTensor__ParametersEntry **ptrs =
        arena_alloc(arena, n * sizeof *ptrs);
    Inference__InferParameter *v = arena_alloc(arena, n * sizeof *v);
    if (!e || !ptrs || !v)
        return -ENOMEM;
    static const char *const keys[] = {"shared_memory_region", "shared_memory_byte_size",
                                       "shared_memory_offset"};
    for (size_t i = 0; i < n; i++) {
        inference__model_infer_response__infer_output_tensor__parameters_entry__init(&e[i]);
        inference__infer_parameter__init(&v[i]);
        e[i].key = (char *)keys[i];
        e[i].value = &v[i];
        ptrs[i] = &e[i];
        v[i].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    }
    v[0].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    v[0].string_param = (char *)shm_region_name(o->region);
    v[1].int64_param = (int64_t)o->written;
    if (n == 3)
        v[2].int64_param = (int64_t)o->offset;
    t->n_parameters = n;
    t->parameters = ptrs;
    return 0;
}

int infer_pb_response(const struct infer_request *req, const struct shm_request *shm,
                      const struct tensor *outputs, uint32_t n, enum infer_pb_final final,
                      struct arena *arena, Inference__ModelInferResponse **out)
{
    const struct model *m = req->model;
    Inference__ModelInferResponse *r = arena_alloc(arena, sizeof *r);
    Inference__ModelInferResponse__InferOutputTensor *outs =
        arena_alloc(arena, (n + 1) * sizeof *outs);
    Inference__ModelInferResponse__InferOutputTensor **ptrs =
        arena_alloc(arena, (n + 1) * sizeof *ptrs);
    ProtobufCBinaryData *raws = arena_alloc(arena, (n + 1) * sizeof *raws);
    char *id = req->id ? arena_strndup(arena, req->id, req->id_len) : NULL;
    if (!r || !outs || !ptrs || !raws || (req->id && !id))
        return -ENOMEM;
    inference__model_infer_response__init(r);
    r->model_name = m->name;
    r->model_version = (char *)m->version_str;
    if (id)
        r->id = id;
    for (uint32_t i = 0; i < n; i++) {
        const struct tensor *t = &outputs[i];
        inference__model_infer_response__infer_output_tensor__init(&outs[i]);
        outs[i].name = (char *)t->name;
        outs[i].datatype = (char *)dtype_name(t->dtype);
        outs[i].n_shape = t->ndim;
        outs[i].shape = (int64_t *)t->shape;
        ptrs[i] = &outs[i];
        if (shm_request_has_output(shm, i)) {
            /* An empty entry keeps raw_output_contents aligned with outputs. */
            raws[i].len = 0;
            raws[i].data = NULL;
            if (shm_output_parameters(arena, &shm->outputs[i], &outs[i]) != 0)
                return -ENOMEM;
        } else if (raw_output(t, arena, &raws[i]) != 0) {
            return -ENOMEM;
        }
    }
    r->n_outputs = n;
    r->outputs = ptrs;
    r->n_raw_output_contents = n;
    r->raw_output_contents = raws;
    if (final != INFER_PB_NOT_DECOUPLED &&
        final_parameter(arena, final == INFER_PB_FINAL, r) != 0)
        return -ENOMEM;
    *out = r;
    return 0;
}
