/*
 * classify: Triton's classification extension. A requested output with the
 * parameter "classification": k (REST JSON, binary or not; gRPC int64_param)
 * comes back as a BYTES tensor of its k highest-valued classes per batch
 * row instead of its values. The front ends' decoders fill
 * req->output_classes; the pipeline (serve/call.c) checks the request at
 * decode (classify_check) and converts the outputs once they arrive, before
 * the front end encodes them (classify_outputs), so every protocol answers
 * the same.
 *
 * Semantics (Triton's server, src/classification.cc and its callers):
 *   rows      a batched model's output (max_batch_size > 0) has one row
 *             per sample along dim 0; an unbatched model's whole output is
 *             one row. A row's classes are its elements, flattened
 *             row-major: the index of a class is its position in the row
 *             (for the usual [batch, classes] output, the last dim).
 *   top k     the k highest values, compared in the output's datatype;
 *             equal values rank by lower index (Triton leaves ties to an
 *             unstable sort); NaN ranks below every number. k larger than
 *             the row is clamped to the row's size.
 *   element   "<value>:<index>" or "<value>:<index>:<label>", value
 *             formatted as C++'s std::to_string formats it: "%f" for FP32
 *             and FP64 ("0.709231"), decimal for integers; the label is
 *             line <index> of the output's label_filename (model/labels.h),
 *             left out when there is no such line or it is empty.
 *   shape     [rows, min(k, row size)] for a batched model, [min(k, row
 *             size)] for an unbatched one; datatype BYTES.
 * Datatypes: the integer types, FP32 and FP64 as Triton; FP16 and BF16 too
 * (an inferd addition: their values are formatted as FP32's). BOOL and
 * BYTES outputs cannot be classified (400).
 *
 * Thread: any; nothing global.
 */
#ifndef INFERD_SERVE_CLASSIFY_H
#define INFERD_SERVE_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "core/infer.h"
#include "core/tensor.h"
#include "model/labels.h"
#include "model/model.h"
#include "serve/shm.h"

/* Most bytes the classification of one response may produce (its strings
 * and element arrays): beyond it the request fails with a 400. */
#define CLASSIFY_MAX_BYTES (64u << 20)

/* After decode: 0 when every output req asks to classify can be (a
 * numeric datatype, not written to shared memory), else -1 with a 400
 * naming the output. Nothing to do when req->output_classes is NULL. */
int classify_check(const struct infer_request *req, const struct shm_request *shm,
                   struct error *err);

/* The n outputs `in` of model m with those that req asks to classify
 * (matched by name with req->output_names) replaced. *out is `in` when
 * none is (and *mem NULL); else a new array in *mem, one mem_alloc'd block
 * holding everything the new tensors point to (the others still point
 * where `in` does): the caller mem_frees it after encoding. Returns 0, or
 * -1 with err (400 too large, 500 out of memory). */
int classify_outputs(const struct infer_request *req, const struct tensor *in, uint32_t n,
                     const struct tensor **out, void **mem, struct error *err);

/* ---- the parts, for tests ---- */

/* Whether outputs of datatype dt can be classified. */
bool classify_dtype_ok(enum dtype dt);

/* The min(k, count) best indices of the count elements of type dt at row,
 * best first, into idx (room for min(k, count)); returns how many. */
size_t classify_topk(enum dtype dt, const void *row, size_t count, size_t k, size_t *idx);

/* Formats element `index` of row as "<value>:<index>[:<label>]" into
 * buf[0..size) (NUL-terminated when size > 0); label NULL or empty: none.
 * Returns the length the whole string needs, without the NUL (as
 * snprintf). */
size_t classify_format(char *buf, size_t size, enum dtype dt, const void *row, size_t index,
                       const struct tensor_bytes *label);

#endif
