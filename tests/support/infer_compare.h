/*
 * infer_compare: whether two decoded infer requests are the same request,
 * for the tests and the fuzz target that compare two decoders of one body
 * (api/rest/infer_json.h: the everyday path and the general one).
 *
 * infer_request_diff() returns NULL when a and b carry the same id, inputs
 * (names, datatypes, shapes, bytes; BYTES element by element), outputs
 * (names, binary flags, classification counts), batch, options and
 * sequence parameters; else what differs first (a static string).
 */
#ifndef INFERD_TEST_INFER_COMPARE_H
#define INFERD_TEST_INFER_COMPARE_H

#include <stdbool.h>
#include <string.h>

#include "core/infer.h"

static inline bool infer_compare_text(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static inline const char *infer_compare_tensor(const struct tensor *a, const struct tensor *b)
{
    if (a->name != b->name && strcmp(a->name, b->name) != 0)
        return "input names";
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes)
        return "input datatype, rank or size";
    if (memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) != 0)
        return "input shape";
    if (a->dtype != DT_BYTES)
        return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0 ? NULL : "input data";
    int64_t n = tensor_count(a, INT64_MAX);
    const struct tensor_bytes *x = a->data, *y = b->data;
    for (int64_t i = 0; i < n; i++)
        if (!infer_compare_text(x[i].ptr, x[i].len, y[i].ptr, y[i].len))
            return "BYTES elements";
    return NULL;
}

static inline const char *infer_request_diff(const struct infer_request *a,
                                             const struct infer_request *b)
{
    if ((a->id == NULL) != (b->id == NULL) ||
        (a->id && !infer_compare_text(a->id, a->id_len, b->id, b->id_len)))
        return "id";
    if (a->ninputs != b->ninputs)
        return "number of inputs";
    for (uint32_t i = 0; i < a->ninputs; i++) {
        const char *why = infer_compare_tensor(&a->inputs[i], &b->inputs[i]);
        if (why)
            return why;
    }
    if (a->noutputs != b->noutputs)
        return "number of outputs";
    for (uint32_t i = 0; i < a->noutputs; i++) {
        if (strcmp(a->output_names[i], b->output_names[i]) != 0)
            return "output names";
        bool abin = a->output_binary && a->output_binary[i];
        bool bbin = b->output_binary && b->output_binary[i];
        if (abin != bbin)
            return "output binary flags";
        uint32_t acl = a->output_classes ? a->output_classes[i] : 0;
        uint32_t bcl = b->output_classes ? b->output_classes[i] : 0;
        if (acl != bcl)
            return "output classification";
    }
    if (a->batch != b->batch || a->timeout_us != b->timeout_us || a->priority != b->priority)
        return "batch, timeout or priority";
    const struct infer_sequence *s = &a->sequence, *t = &b->sequence;
    if (s->id != t->id || s->start != t->start || s->end != t->end ||
        (s->id_str == NULL) != (t->id_str == NULL) ||
        (s->id_str && !infer_compare_text(s->id_str, s->id_str_len, t->id_str, t->id_str_len)))
        return "sequence parameters";
    return NULL;
}

#endif
