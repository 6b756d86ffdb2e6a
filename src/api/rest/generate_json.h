/*
 * generate_json: the JSON bodies of Triton's generate extension
 * (POST /v2/models/{m}[/versions/{v}]/generate and generate_stream).
 *
 * Request: one JSON object whose fields name the model's inputs, each a
 * scalar or an array (nested arrays are read row-major), e.g.
 *     {"IN": [4, 5, 6], "DELAY": [10, 10, 10], "WAIT": 0}
 * plus an optional "parameters" object (as in an infer request: `timeout`
 * in µs, `priority`). Each input's shape is the model's (without the batch dimension)
 * with its one variable dimension, if any, deduced from the element count
 * (a scalar is one element); a batched model gets a leading batch
 * dimension of 1. Every model input must be given (but a generative
 * model's optional ones, model_input_optional()); another field is a 400.
 * generate_json_to_infer() rewrites the body as the KServe v2 infer
 * request the infer decoder (infer_json.h) reads, so every check of an
 * infer request applies. The text lives in `arena` (the decoded tensors
 * may point into it).
 *
 * Response: {"model_name", "model_version", "<output>": value, ...} with
 * each output a scalar when it has one element, else a flat array in
 * row-major order; BYTES as strings.
 */
#ifndef INFERD_API_GENERATE_JSON_H
#define INFERD_API_GENERATE_JSON_H

#include <stddef.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/error.h"
#include "core/tensor.h"
#include "model/model.h"

/* Returns 0 with the infer request text in *out (arena memory), or -1
 * with err 400 (413 when the arena is full). */
int generate_json_to_infer(struct arena *arena, const struct model *m, const char *body,
                           size_t len, const char **out, size_t *out_len, struct error *err);

/* Appends the response object for outputs[0..n) to out (errors sticky in
 * out->err). */
void generate_json_response(struct buf *out, const struct model *m, const struct tensor *outputs,
                            uint32_t n);

#endif
